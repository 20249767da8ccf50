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

/// An install's cached summary of its workflows (what the dashboard's
/// overview reads instead of every workflow): the install's revision,
/// bumped by every change to one of its workflows in the change's own
/// transaction, and the summary saved at `summary_rev`. The cache is
/// fresh while the two are equal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedSummary {
    /// The install.
    pub install_id: InstallId,
    /// Its workflows' revision now.
    pub rev: i64,
    /// The summary, with the revision it was made at.
    pub summary: Option<(i64, SummaryText)>,
}

/// A summary as stored: its brief (what decides the install's health
/// status, read for every install) and the whole of it (read for the
/// installs shown), both JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SummaryText {
    /// What decides the health status.
    pub brief: String,
    /// The whole summary.
    pub full: String,
}

impl CachedSummary {
    /// The summary, if it was made at the current revision.
    pub fn fresh(&self) -> Option<&SummaryText> {
        self.summary
            .as_ref()
            .filter(|(at, _)| *at == self.rev)
            .map(|(_, s)| s)
    }
}

/// The statements both stores run for the summary cache (`?n`; the
/// PostgreSQL store turns them into `$n`).
pub(crate) mod summary_sql {
    /// Marks an install's summary stale (`?1`: the install).
    pub(crate) const BUMP_INSTALL: &str = "INSERT INTO install_summaries (install_id, rev) VALUES (?1, 1) \
         ON CONFLICT (install_id) DO UPDATE SET rev = install_summaries.rev + 1";
    /// Marks the summary of a workflow's install stale (`?1`: the workflow).
    pub(crate) const BUMP_WORKFLOW: &str = "INSERT INTO install_summaries (install_id, rev) \
         SELECT install_id, 1 FROM workflows WHERE id = ?1 \
         ON CONFLICT (install_id) DO UPDATE SET rev = install_summaries.rev + 1";
    /// Every install's cache of an org (`?1`), installs without one left out.
    pub(crate) const LIST: &str = "SELECT s.install_id, s.rev, s.summary_rev, s.brief, s.summary \
         FROM install_summaries s JOIN installs i ON i.id = s.install_id WHERE i.org_id = ?1";
    /// Saves a summary made at revision `?2` (`?1` the install, `?3` its
    /// brief, `?4` the whole), only while that is still the install's
    /// revision.
    pub(crate) const SAVE: &str = "INSERT INTO install_summaries (install_id, rev, summary_rev, brief, summary) \
         VALUES (?1, ?2, ?2, ?3, ?4) \
         ON CONFLICT (install_id) DO UPDATE SET summary_rev = excluded.summary_rev, \
         brief = excluded.brief, summary = excluded.summary \
         WHERE install_summaries.rev = excluded.rev";
}

/// Workflows and their steps.
#[async_trait]
pub trait WorkflowStore: Send + Sync + 'static {
    /// Every install of the org's cached summary of its workflows (see
    /// [`CachedSummary`]); an install that never had a workflow changed
    /// since this cache came in has none (its revision is 0).
    async fn install_summaries(&self, org: &OrgId) -> Result<Vec<CachedSummary>>;

    /// Saves an install's summary made from its workflows at revision
    /// `rev`; nothing if a workflow of it changed since (the revision
    /// moved on), so a stale summary never overwrites a fresher one.
    async fn save_install_summary(
        &self,
        install: &InstallId,
        rev: i64,
        summary: &SummaryText,
    ) -> Result<()>;

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
