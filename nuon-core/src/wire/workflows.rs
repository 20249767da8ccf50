//! What an operator asks of workflows: to start one, and to answer,
//! approve or act on its steps.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::workflow::WorkflowKind;

/// Start a workflow on an install.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWorkflow {
    /// What to do.
    pub kind: WorkflowKind,
    /// Only this component (deploy and teardown).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    /// The action to run (kind `action`; it needs a `manual` trigger).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// A teardown of `component` alone: the components that depend on it
    /// stay deployed (by default they are torn down first).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub only: bool,
    /// The app config version a teardown or deprovision destroys with
    /// (default: the one the install was deployed with), so that a fix
    /// synced and built since can destroy what a broken version left; or
    /// that a deploy deploys, with that version's newest builds (default:
    /// the app's latest config), outside releases: back to any earlier
    /// version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<u32>,
    /// The release a deploy deploys: its config version and its builds
    /// (`rel_…`, of the install's app). Not with `config_version`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release: Option<crate::ReleaseId>,
    /// The runbook to run (kind `runbook`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runbook: Option<String>,
    /// The run's inputs: of an action (kind `action`), each one the
    /// action declares in its `inputs`; of a runbook (kind `runbook`),
    /// each one the runbook declares in its `[[input]]`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, String>,
    /// Plan and stop (provision, deploy, teardown, deprovision,
    /// reprovision): the syncs and plans run, nothing is applied or
    /// destroyed, and the install's state stays as it is.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub plan_only: bool,
}

/// An answer to a step that waits for an approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApprovalAnswer {
    /// The step, by index or name; default: the one waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// What to do.
    pub response: crate::workflow::ApprovalResponse,
}

/// Approve, deny or retry a step of a workflow.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StepChoice {
    /// The step, by index or name (`apply database`); default: the one
    /// waiting (approve, deny) or failed (retry, skip).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
}

/// Approve a workflow's step: the one waiting (or `step`), and with `all`
/// every later step of the workflow that would ask (each recorded in the
/// audit trail as approved by the same caller).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApproveSteps {
    /// The step, by index or name (`apply database`); default: the one
    /// waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// Approve the rest of the workflow too: its later applies run after
    /// their plans without asking.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub all: bool,
}
