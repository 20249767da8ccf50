//! Workflows and their steps.

use super::*;

/// A new workflow with its planned steps.
#[derive(Debug, Clone)]
pub struct NewWorkflow {
    /// The workflow.
    pub id: WorkflowId,
    /// The install.
    pub install_id: InstallId,
    /// What it does.
    pub kind: WorkflowKind,
    /// The config version it deploys.
    pub config_version: u32,
    /// Only this component, when asked for one.
    pub component: Option<String>,
    /// Its steps, in order.
    pub steps: Vec<PlannedStep>,
    /// An action's run-time inputs.
    pub inputs: std::collections::BTreeMap<String, String>,
    /// What started it, when not a person (`cron`, `disable-component`).
    pub trigger: Option<String>,
    /// A cron run: the action and the time it was due. The workflow is
    /// stored only if no other run of that action was stored for that
    /// time (two leaders in turn never start it twice): else a conflict
    /// `already_started`.
    pub fire: Option<(String, i64)>,
    /// The release it deploys: its builds, not the newest ones.
    pub release: Option<nuon_core::ReleaseId>,
    /// A rollout's start: the rollout with this workflow marked started,
    /// saved over its version in the same transaction (a conflict
    /// `stale_rollout`, and no workflow, when it changed meanwhile).
    pub rollout: Option<nuon_core::rollout::RolloutInfo>,
}

/// A change to a workflow step, made by the executor.
#[derive(Debug, Clone, Default)]
pub struct StepUpdate {
    /// The new status.
    pub status: StepStatus,
    /// Why (a failure, a skip).
    pub reason: Option<String>,
    /// Its job's outputs, JSON.
    pub outputs_json: Option<String>,
    /// Set the approval time to now (`Some(true)`) or clear it.
    pub approved: Option<bool>,
    /// Who approved it, with `approved: Some(true)`.
    pub approved_by: Option<String>,
    /// Forget the job (a retry).
    pub clear_job: bool,
    /// Replace its earlier failed tries.
    pub attempts: Option<Vec<nuon_core::wire::StepAttempt>>,
}

impl StepUpdate {
    /// The update made to `step` as the store makes it to its row (an
    /// approval time of now when `approved`).
    pub fn apply_to(&self, step: &mut nuon_core::wire::WorkflowStepInfo) {
        step.status = self.status;
        step.reason = self.reason.clone();
        if let Some(o) = &self.outputs_json {
            step.outputs = serde_json::from_str(o).unwrap_or_default();
        }
        match self.approved {
            Some(true) => {
                step.approved_at_ms = Some(nuon_core::now_ms());
                step.approved_by = self.approved_by.clone();
            }
            Some(false) => {
                step.approved_at_ms = None;
                step.approved_by = None;
            }
            None => {}
        }
        if self.clear_job {
            step.job_id = None;
        }
        if let Some(a) = &self.attempts {
            step.attempts = a.clone();
        }
    }

    /// Its tries, as the column keeps them.
    pub(crate) fn attempts_json(&self) -> Option<String> {
        self.attempts
            .as_ref()
            .map(|a| serde_json::to_string(a).unwrap_or_default())
    }
}

/// Workflows and their steps.
#[async_trait]
pub trait WorkflowStore: Send + Sync + 'static {
    /// Stores a new workflow, pending, with its steps; its install runs
    /// its config version from then on (set in the same transaction).
    async fn create_workflow(&self, org: &OrgId, workflow: NewWorkflow) -> Result<WorkflowInfo>;

    /// An install's workflows, newest first.
    async fn list_workflows(&self, org: &OrgId, install: &InstallId) -> Result<Vec<WorkflowInfo>>;

    /// One workflow of the org.
    async fn get_workflow(&self, org: &OrgId, id: &WorkflowId) -> Result<Option<WorkflowInfo>>;

    /// Every workflow that is `pending` or `running`, oldest first.
    async fn active_workflows(&self) -> Result<Vec<(OrgId, WorkflowId)>>;

    /// Sets a workflow's status (and its end time, for an ending status).
    async fn set_workflow_status(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        status: WorkflowStatus,
    ) -> Result<()>;

    /// Changes one step.
    async fn update_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        update: StepUpdate,
    ) -> Result<()>;

    /// Queues a step's job and marks the step running, in one transaction,
    /// with the state token its Terraform uses.
    async fn dispatch_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        job: NewJob,
        state_token: Option<StateToken>,
    ) -> Result<()>;
}
