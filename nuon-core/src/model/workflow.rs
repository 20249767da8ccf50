//! Workflows as the store keeps them and the engine moves them: what a
//! workflow does ([`WorkflowKind`]), its steps ([`Step`], each of a
//! [`StepKind`]) and how far each got ([`WorkflowStatus`],
//! [`StepStatus`], the failed tries in [`StepAttempt`]).
//!
//! The planning rules that make the steps from an app config are in
//! [`crate::workflow`]; the API shows these types as they are (`wire`
//! names them `WorkflowInfo` and `WorkflowStepInfo`) until a wire form
//! has to differ.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::status;
use crate::{InstallId, JobId, ReleaseId, WorkflowId};

/// What a workflow does to an install.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorkflowKind {
    /// Sandbox, then every component.
    Provision,
    /// Every component.
    Deploy,
    /// Every component destroyed, dependents first.
    Teardown,
    /// Teardown, then the sandbox destroyed.
    Deprovision,
    /// Provision again: the sandbox, then every component.
    Reprovision,
    /// Run one action by hand (its `manual` trigger).
    Action,
    /// Plan one component (or the sandbox) to find drift: never applies,
    /// asks for no approval, changes nothing on the install.
    Drift,
    /// Run a runbook: its component deploys, teardowns, sandbox
    /// reprovisions and actions in order, stopping at the first failure.
    Runbook,
}

impl WorkflowKind {
    /// The kind as the API spells it (`provision`, `deploy`, ...).
    pub const fn as_str(self) -> &'static str {
        match self {
            WorkflowKind::Provision => "provision",
            WorkflowKind::Deploy => "deploy",
            WorkflowKind::Teardown => "teardown",
            WorkflowKind::Deprovision => "deprovision",
            WorkflowKind::Reprovision => "reprovision",
            WorkflowKind::Action => "action",
            WorkflowKind::Drift => "drift",
            WorkflowKind::Runbook => "runbook",
        }
    }
}

/// What one step does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StepKind {
    /// Copy the sandbox's artifact into the install's store.
    SandboxSync,
    /// Copy a component's artifact into the install's store.
    Sync,
    /// Plan the sandbox.
    SandboxPlan,
    /// Apply the sandbox's plan.
    SandboxApply,
    /// Plan the sandbox's destruction.
    SandboxDestroyPlan,
    /// Destroy the sandbox (apply the destroy plan).
    SandboxDestroy,
    /// Plan a component.
    Plan,
    /// Apply a component's plan.
    Apply,
    /// Plan a component's destruction.
    DestroyPlan,
    /// Destroy a component (apply the destroy plan).
    Destroy,
    /// Run an action.
    Action,
    /// Wait for the install's stack to phone home (or for a runner started
    /// another way to connect): the control plane's own step, no job.
    AwaitStack,
    /// Wait for the install's runner to be healthy (a recent call, not
    /// disabled by the customer): the control plane's own step, no job.
    AwaitRunner,
    /// Write the install's secrets that the config syncs into the
    /// sandbox's cluster as Kubernetes Secrets (`kubernetes_sync`).
    SecretsSync,
    /// Run a component's health probes after its apply, until its health
    /// holds or the stabilization window ends (`[health]`).
    Health,
    /// Wait until the checks a component's `[health] required_checks`
    /// names are reported healthy: the control plane's own step, no job.
    AwaitChecks,
    /// A kind this build does not know: a newer control plane's, read
    /// during a rolling upgrade (or by an older client). Carried, never
    /// rejected: the stored step keeps its kind, and only a replica that
    /// knows it moves the workflow (see `docs/src/how-to/upgrade.md`).
    #[serde(other)]
    Unknown,
}

impl StepKind {
    /// Whether the step is one of the sandbox's (its sync, plans, apply
    /// and destroy).
    pub const fn is_sandbox(self) -> bool {
        matches!(
            self,
            StepKind::SandboxSync
                | StepKind::SandboxPlan
                | StepKind::SandboxApply
                | StepKind::SandboxDestroyPlan
                | StepKind::SandboxDestroy
        )
    }

    /// Whether the control plane does the step itself (it waits for
    /// something) rather than a runner's job.
    pub const fn is_await(self) -> bool {
        matches!(
            self,
            StepKind::AwaitStack | StepKind::AwaitRunner | StepKind::AwaitChecks
        )
    }
}

status! {
    /// How far a workflow got.
    WorkflowStatus {
        /// Queued behind another workflow of the install.
        #[default]
        Pending = "pending",
        /// Its steps are moving.
        Running = "running",
        /// Every step succeeded (or was skipped for want of changes).
        Succeeded = "succeeded",
        /// Ended; a denial skipped some steps.
        Partial = "partial",
        /// A step failed; it can be retried from that step.
        Failed = "failed",
        /// Its running job is being stopped; the install stays busy.
        Cancelling = "cancelling",
        /// Cancelled.
        Cancelled = "cancelled",
    }
}

impl WorkflowStatus {
    /// Whether the workflow still holds its install (pending, running or
    /// cancelling).
    pub const fn is_active(self) -> bool {
        matches!(
            self,
            WorkflowStatus::Pending | WorkflowStatus::Running | WorkflowStatus::Cancelling
        )
    }
}

status! {
    /// How far a step of a workflow got.
    StepStatus {
        /// Not started.
        #[default]
        Pending = "pending",
        /// Waits for an operator's approval.
        WaitingApproval = "waiting_approval",
        /// Its job runs.
        Running = "running",
        /// Done.
        Succeeded = "succeeded",
        /// Its job failed (or could not be dispatched).
        Failed = "failed",
        /// Left out: an earlier denial, or nothing to do.
        Skipped = "skipped",
        /// An operator denied its approval.
        Denied = "denied",
        /// The workflow was cancelled while it waited or ran.
        Cancelled = "cancelled",
    }
}

impl StepStatus {
    /// Whether the workflow moves past the step: it succeeded, was skipped
    /// or denied, or its workflow was cancelled. (A failed step stops the
    /// workflow until it is retried.)
    pub const fn is_passed(self) -> bool {
        matches!(
            self,
            StepStatus::Succeeded
                | StepStatus::Skipped
                | StepStatus::Denied
                | StepStatus::Cancelled
        )
    }
}

/// One step of a workflow and how far it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "WorkflowStepInfo")]
pub struct Step {
    /// 0, 1, 2, ... in order.
    pub index: u32,
    /// For people.
    pub name: String,
    /// What it does.
    pub kind: StepKind,
    /// The component or action, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Whether it waits for an approval.
    pub needs_approval: bool,
    /// How far it got.
    pub status: StepStatus,
    /// The job that runs it, once dispatched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<JobId>,
    /// When it was approved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_at_ms: Option<i64>,
    /// Who approved it: a person's email address, a service account's
    /// token id, or `control-plane` (no changes, or its policies passed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_by: Option<String>,
    /// Why it failed or was skipped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What its job reported (a plan's changes, an apply's outputs).
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub outputs: serde_json::Value,
    /// Its earlier tries that failed, oldest first: each automatic retry
    /// (`max_auto_retries`) and each `nuon workflows retry` adds one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attempts: Vec<StepAttempt>,
}

/// A try of a step that failed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StepAttempt {
    /// The job that ran it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job_id: Option<JobId>,
    /// Why it failed.
    pub reason: String,
    /// When it failed.
    pub failed_at_ms: i64,
    /// For an automatic retry, when the next try may start (the backoff).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at_ms: Option<i64>,
}

/// A workflow of an install.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "WorkflowInfo")]
pub struct Workflow {
    /// Its id.
    pub id: WorkflowId,
    /// The install.
    pub install_id: InstallId,
    /// What it does.
    pub kind: WorkflowKind,
    /// How far it got.
    pub status: WorkflowStatus,
    /// Only this component, when it was asked for one (for an `action`
    /// workflow, the action).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
    /// The app config version it deploys.
    pub config_version: u32,
    /// When it was created.
    pub created_at_ms: i64,
    /// When it ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at_ms: Option<i64>,
    /// The run-time inputs of an action or runbook workflow (`--input k=v`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, String>,
    /// What started it, when not a person: `cron` (and the time it was
    /// due), or the lifecycle point of a toggle.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<String>,
    /// The release it deploys (a rollout's workflow): that release's
    /// builds, whatever was built after.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub release_id: Option<ReleaseId>,
    /// Its steps, in order.
    pub steps: Vec<Step>,
}
