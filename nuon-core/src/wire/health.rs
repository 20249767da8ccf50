//! An install's health and drift as the Control API shows them: its
//! state and health (two axes, beside whether what is desired is
//! deployed), the checks they are made of, and what drifted.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CheckState, DriftStatus, HealthStatus, InstallState, SyncStatus};
use crate::id::WorkflowId;
use crate::workflow::StepStatus;

/// One thing an install's health is made of.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HealthCheck {
    /// `install` (its state), `runner`, `component`, `probe` (one of a component's `[health]`
    /// probes, as its last health step saw it), `check` (one a component
    /// requires, as the vendor's systems last pushed it), or `action` (a
    /// health-check action: one with a `cron` trigger).
    pub kind: String,
    /// The runner's, component's or action's name; a probe's is
    /// `COMPONENT/PROBE`.
    pub name: String,
    /// `ok`, `failed`, `offline` or `disabled` (the runner), `absent` (a
    /// component never deployed or destroyed; an install not deployed),
    /// or `unknown` (never run; an install a workflow changes).
    pub status: CheckState,
    /// What it says: why it failed, when it was last seen or run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The workflow its status comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<WorkflowId>,
    /// When: the runner's last call, the workflow's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<i64>,
    /// A component's change that is desired and not deployed: its last
    /// apply was denied, failed, cancelled or skipped after a denial.
    /// What runs is what an earlier deploy left (the drift from desired)
    /// until a later deploy applies it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingChange>,
}

/// A change desired and not deployed (see [`HealthCheck::pending`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PendingChange {
    /// How its apply ended: `denied`, `failed`, `cancelled`, `skipped`
    /// (an earlier step of its workflow was denied), or `pending` (its
    /// workflow ended before it: a plan failed).
    pub status: StepStatus,
    /// The workflow of that apply.
    pub workflow_id: WorkflowId,
    /// When that workflow ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<i64>,
}

/// An install's health.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InstallHealth {
    /// The install.
    pub install: String,
    /// Where the install is in its life (`active`, `failed`,
    /// `deprovisioned`, ...): only an `active` one can be `healthy`.
    #[serde(default)]
    pub state: InstallState,
    /// `healthy` (it is active, its runner is there and nothing failed),
    /// `unhealthy` (its last workflow, a component's last deploy or a
    /// health-check action's last run failed), `progressing` (a workflow
    /// changes it), `not_deployed` (never provisioned, torn down or
    /// deprovisioned), `disabled` (the customer turned its runner off
    /// with `nuon-runner disable`) or `offline` (its runner is not there).
    pub status: HealthStatus,
    /// `out_of_sync` when a component's change is desired and not
    /// deployed (see [`HealthCheck::pending`]), else `in_sync`: the
    /// second axis, beside health.
    #[serde(default)]
    pub sync: SyncStatus,
    /// What it is made of.
    pub checks: Vec<HealthCheck>,
}

/// What the newest drift check of a component (or the sandbox) found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DriftInfo {
    /// The component, or `sandbox`.
    pub target: String,
    /// `drifted` (its plan has changes), `in_sync`, `checking` (a check
    /// runs or waits), `check_failed` or `never_checked`.
    pub status: DriftStatus,
    /// The plan's summary (`add`, `change`, `destroy`) and, for Terraform,
    /// the addresses it would change.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub changes: serde_json::Value,
    /// The drift check's workflow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<WorkflowId>,
    /// When it was checked (its workflow started).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_at_ms: Option<i64>,
    /// Why the check failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its `drift_schedule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// When the schedule checks it next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_check_ms: Option<i64>,
}

/// An install's drift.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InstallDrift {
    /// The install.
    pub install: String,
    /// The sandbox, then each component with a schedule or a check.
    pub targets: Vec<DriftInfo>,
}
