//! Workflows and their steps, written once for both databases.

use super::rollouts::{save_stmts, stale_rollout};
use super::rows::{Cells, Dialect, Offset, Record, WorkflowHead};
use super::shared::{
    already_started, corrupt, enum_str, inputs_column, json_or_null, planned_status,
};
use super::sql::{Arg, Change, Sql, Stmt, args};
use super::*;

mod reads;
mod writes;

use nuon_core::model::{QueuedJob, Step};
use nuon_core::now_ms;
pub use reads::{ActiveWorkflow, Moving};
use reads::{JobOfWorkflow, MovingRow, StatusRow, WaitingRow, of_many};
use writes::{bump, bumped, dispatch_in_one, summary_sql, update_step_stmt};

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
    pub rollout: Option<super::rollouts::RolloutSave>,
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
    pub attempts: Option<Vec<nuon_core::model::StepAttempt>>,
}

impl StepUpdate {
    /// The update made to `step` as the store makes it to its row (an
    /// approval time of now when `approved`).
    pub fn apply_to(&self, step: &mut nuon_core::model::Step) {
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

/// Workflows and their steps.
#[async_trait]
pub trait WorkflowStore: Send + Sync + 'static {
    /// An install's summary revision (0 when none of its workflows changed
    /// since this cache came in): what a summary made now is saved at.
    async fn install_summary_rev(&self, install: &InstallId) -> Result<i64>;

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
    async fn create_workflow(&self, org: &OrgId, workflow: NewWorkflow) -> Result<Workflow>;

    /// An install's workflows, newest first.
    async fn list_workflows(&self, org: &OrgId, install: &InstallId) -> Result<Vec<Workflow>>;

    /// One workflow of the org.
    async fn get_workflow(&self, org: &OrgId, id: &WorkflowId) -> Result<Option<Workflow>>;

    /// One workflow of the org with what the engine reads to move it
    /// (its install, their runner, its running steps' jobs): one read.
    async fn workflow_to_move(&self, org: &OrgId, id: &WorkflowId) -> Result<Option<Moving>>;

    /// Every workflow that is `pending`, `running` or `cancelling`, oldest
    /// first, with its install.
    async fn active_workflows(&self) -> Result<Vec<ActiveWorkflow>>;

    /// The status of each of these workflows of the org that is there, and
    /// when it ended: one read for many, without their steps.
    async fn workflow_statuses(
        &self,
        org: &OrgId,
        ids: &[WorkflowId],
    ) -> Result<Vec<(WorkflowId, WorkflowStatus, Option<i64>)>>;

    /// The org and workflow whose step ran (or runs) each of `jobs` that a
    /// step ran (a job of no step is not in the answer): one read for many.
    async fn workflows_of_jobs(&self, jobs: &[JobId]) -> Result<Vec<(JobId, OrgId, WorkflowId)>>;

    /// Of these workflows of the org, each one's first step that waits for
    /// a person's approval, by name: one read for many.
    async fn waiting_steps(
        &self,
        org: &OrgId,
        ids: &[WorkflowId],
    ) -> Result<Vec<(WorkflowId, String)>>;

    /// Sets a workflow's status (and its end time, for an ending status);
    /// the revision its install's summary has after the change bumped it
    /// (none when the org has no such workflow).
    async fn set_workflow_status(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        status: WorkflowStatus,
    ) -> Result<Option<i64>>;

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

impl Record for CachedSummary {
    const COLUMNS: &'static str = "s.install_id, s.rev, s.summary_rev, s.brief, s.summary";
    fn read(r: &impl Cells) -> Result<Self> {
        let text = r.opt_text(3)?.zip(r.opt_text(4)?);
        Ok(CachedSummary {
            install_id: r.id(0)?,
            rev: r.int(1)?,
            summary: r
                .opt_int(2)?
                .zip(text.map(|(brief, full)| SummaryText { brief, full })),
        })
    }
}

/// A workflow's row with its id, for lists.
struct HeadRow(WorkflowId, WorkflowHead);

impl Record for HeadRow {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(HeadRow(r.id(0)?, WorkflowHead::read(&Offset(r, 1))?))
    }
}

/// A step's row with its workflow's id, for lists.
struct StepRow(WorkflowId, Step);

impl Record for StepRow {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(StepRow(r.id(0)?, Step::read(&Offset(r, 1))?))
    }
}

/// A workflow's row with one of its steps (none for a workflow of no
/// steps): a workflow read in one statement.
struct HeadAndStep(WorkflowHead, Option<Step>);

impl Record for HeadAndStep {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        let at = WorkflowHead::COLUMNS.split(',').count();
        let step = match r.opt_int(at)? {
            Some(_) => Some(Step::read(&Offset(r, at))?),
            None => None,
        };
        Ok(HeadAndStep(WorkflowHead::read(r)?, step))
    }
}

/// What a new workflow is checked against in its transaction: whether its
/// install is the org's, whether its cron run was stored already, and the
/// version of the rollout it starts when that rollout is the org's.
struct StartChecks {
    in_org: bool,
    fired: bool,
    rollout_version: Option<i64>,
}

impl Record for StartChecks {
    /// The first two; parameters: the install, the org, the cron run's
    /// action and time.
    const COLUMNS: &'static str = "EXISTS (SELECT 1 FROM installs WHERE id = $1 AND org_id = $2), \
         EXISTS (SELECT 1 FROM cron_fires WHERE install_id = $1 AND action = $3 AND fire_at = $4)";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(StartChecks {
            in_org: r.flag(0)?,
            fired: r.flag(1)?,
            rollout_version: r.opt_int(2)?,
        })
    }
}

/// The locked read of a new workflow's [`StartChecks`]: the row of the
/// rollout it starts (so that no other save of it comes between the check
/// and the save), else its install's.
fn start_checks(org: &OrgId, new: &NewWorkflow) -> Stmt {
    let (action, at) = new.fire.as_ref().map(|(a, t)| (a.as_str(), *t)).unzip();
    let mut values = args![new.install_id.as_str(), org.as_str(), action, Arg::Int(at)];
    let sql = match &new.rollout {
        Some(r) => {
            values.push(Arg::from(r.id().as_str()));
            format!(
                "SELECT {}, CASE WHEN org_id = $2 THEN version END FROM rollouts WHERE id = $5",
                StartChecks::COLUMNS
            )
        }
        None => format!(
            "SELECT {}, NULL FROM installs WHERE id = $1",
            StartChecks::COLUMNS
        ),
    };
    Stmt::new(sql, values)
}

/// Refuses a new workflow as its checks say (`None`: no row to read them
/// from): an install not the org's, its cron run stored already, its
/// rollout saved since it was read.
fn check_start(found: Option<StartChecks>, new: &NewWorkflow) -> Result<()> {
    let no_install = || StoreError::Invalid(format!("no install {}", new.install_id));
    let Some(c) = found else {
        return Err(match &new.rollout {
            Some(r) => stale_rollout(r.id()),
            None => no_install(),
        });
    };
    if !c.in_org {
        return Err(no_install());
    }
    if let Some((action, at)) = &new.fire
        && c.fired
    {
        return Err(already_started(action, *at));
    }
    match &new.rollout {
        Some(r) if c.rollout_version != Some(r.head.version as i64) => Err(stale_rollout(r.id())),
        _ => Ok(()),
    }
}

/// `e`, but the insert of a cron run that found it stored (by another
/// leader, since the check) is `already_started`, as the check says.
fn fired_twice(e: StoreError, fire: Option<&(String, i64)>) -> StoreError {
    let Some((action, at)) = fire else {
        return e;
    };
    let started = already_started(action, *at);
    let twice = matches!(
        &e,
        StoreError::Conflict { code: ErrorCode::NameTaken, message, .. }
            if *message == started.to_string()
    );
    if twice { started } else { e }
}

/// The statements that store a new workflow, pending, with its steps, and
/// what goes with it: its cron run, its rollout saved, its install's config
/// version, its install's summary marked stale.
fn create_stmts(org: &OrgId, new: &NewWorkflow, now: i64) -> Result<Vec<Stmt>> {
    let mut stmts = Vec::new();
    if let Some((action, at)) = &new.fire {
        stmts.push(
            Stmt::new(
                "INSERT INTO cron_fires (install_id, action, fire_at, workflow_id) \
                 VALUES ($1, $2, $3, $4)",
                args![
                    new.install_id.as_str(),
                    action.as_str(),
                    *at,
                    new.id.as_str()
                ],
            )
            .taken(already_started(action, *at).to_string()),
        );
    }
    if let Some(r) = &new.rollout {
        stmts.extend(save_stmts(org, r, &[])?);
    }
    stmts.push(Stmt::new(
        "UPDATE installs SET config_version = $2 WHERE id = $1 AND config_version != $2",
        args![new.install_id.as_str(), new.config_version],
    ));
    stmts.push(Stmt::new(
        "INSERT INTO workflows (id, org_id, install_id, kind, status, config_version, created_at, \
         component, inputs, trigger, release_id) \
         VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8, $9, $10)",
        args![
            new.id.as_str(),
            org.as_str(),
            new.install_id.as_str(),
            enum_str(&new.kind),
            new.config_version,
            now,
            new.component.as_deref(),
            inputs_column(&new.inputs),
            new.trigger.as_deref(),
            new.release.as_ref().map(|r| r.as_str()),
        ],
    ));
    let steps: Vec<(usize, &PlannedStep)> = new.steps.iter().enumerate().collect();
    stmts.extend(
        steps
            .chunks(STEPS_PER_INSERT)
            .map(|chunk| insert_steps(&new.id, chunk)),
    );
    stmts.push(Stmt::new(
        summary_sql::BUMP_INSTALL,
        args![new.install_id.as_str()],
    ));
    Ok(stmts)
}

/// Steps one insert holds at most: 9 values each, well under either
/// database's bound on a statement's parameters.
const STEPS_PER_INSERT: usize = 1000;

/// Stores planned steps (each with its index), in one statement. A step's
/// `needs_approval` is PostgreSQL's `BOOLEAN` and SQLite's 0/1: the SQL
/// makes it of an integer.
fn insert_steps(workflow: &WorkflowId, steps: &[(usize, &PlannedStep)]) -> Stmt {
    let mut sql = String::from(
        "INSERT INTO workflow_steps (workflow_id, idx, name, kind, target, needs_approval, \
         status, reason, outputs) VALUES ",
    );
    let mut all = Vec::with_capacity(steps.len() * 9);
    for (row, (i, s)) in steps.iter().enumerate() {
        let (status, outputs) = planned_status(s);
        let n = row * 9;
        if row > 0 {
            sql.push_str(", ");
        }
        let marks: Vec<String> = (1..=9)
            .map(|k| match k {
                6 => format!("${} <> 0", n + k),
                _ => format!("${}", n + k),
            })
            .collect();
        sql.push_str(&format!("({})", marks.join(", ")));
        all.extend(args![
            workflow.as_str(),
            *i as i64,
            s.name.as_str(),
            enum_str(&s.kind),
            s.target.as_deref(),
            i64::from(s.needs_approval),
            status,
            s.skipped.as_deref(),
            outputs,
        ]);
    }
    Stmt::new(sql, all)
}

/// The new workflow as its rows read once stored.
fn created(new: &NewWorkflow, now: i64) -> Result<Workflow> {
    let steps = new.steps.iter().enumerate();
    let steps = steps
        .map(|(i, s)| planned_step(i, s))
        .collect::<Result<Vec<_>>>()?;
    let head = WorkflowHead {
        install_id: new.install_id.clone(),
        kind: new.kind,
        status: WorkflowStatus::Pending,
        config_version: new.config_version,
        created_at_ms: now,
        finished_at_ms: None,
        component: new.component.clone(),
        inputs: new.inputs.clone(),
        trigger: new.trigger.clone(),
        release_id: new.release.clone(),
    };
    Ok(head.with_steps(new.id.clone(), steps))
}

/// A planned step as its row reads once stored ([`insert_step`]).
fn planned_step(i: usize, s: &PlannedStep) -> Result<Step> {
    let (status, outputs) = planned_status(s);
    Ok(Step {
        index: i as u32,
        name: s.name.clone(),
        kind: s.kind,
        target: s.target.clone(),
        needs_approval: s.needs_approval,
        status: status.parse().map_err(corrupt)?,
        job_id: None,
        approved_at_ms: None,
        reason: s.skipped.clone(),
        outputs: json_or_null(outputs),
        attempts: Vec::new(),
        approved_by: None,
    })
}

/// Workflows and their steps, written once for both databases.
#[async_trait]
impl<S: Sql + 'static> WorkflowStore for S {
    async fn install_summary_rev(&self, install: &InstallId) -> Result<i64> {
        let rev: Option<i64> = self
            .query_one(Stmt::new(
                "SELECT rev FROM install_summaries WHERE install_id = $1",
                args![install.as_str()],
            ))
            .await?;
        Ok(rev.unwrap_or(0))
    }

    async fn save_install_summary(
        &self,
        install: &InstallId,
        rev: i64,
        summary: &SummaryText,
    ) -> Result<()> {
        self.execute_one(Stmt::new(
            summary_sql::SAVE,
            args![
                install.as_str(),
                rev,
                summary.brief.as_str(),
                summary.full.as_str(),
            ],
        ))
        .await
        .map(drop)
    }

    async fn create_workflow(&self, org: &OrgId, new: NewWorkflow) -> Result<Workflow> {
        let now = now_ms();
        let (read, stmts) = (start_checks(org, &new), create_stmts(org, &new, now)?);
        let (workflow, fire) = (created(&new, now)?, new.fire.clone());
        // Checked and stored in one transaction: a refusal keeps nothing.
        self.change_locked(read, move |found: Vec<StartChecks>| {
            check_start(found.into_iter().next(), &new)?;
            Ok((stmts, workflow))
        })
        .await
        .map_err(|e| fired_twice(e, fire.as_ref()))
    }

    async fn list_workflows(&self, org: &OrgId, install: &InstallId) -> Result<Vec<Workflow>> {
        let heads: Vec<HeadRow> = self
            .query(Stmt::new(
                format!(
                    "SELECT id, {} FROM workflows WHERE org_id = $1 AND install_id = $2 \
                     ORDER BY created_at DESC, id DESC",
                    WorkflowHead::COLUMNS
                ),
                args![org.as_str(), install.as_str()],
            ))
            .await?;
        let rows: Vec<StepRow> = self
            .query(Stmt::new(
                format!(
                    "SELECT workflow_id, {} FROM workflow_steps WHERE workflow_id IN \
                     (SELECT id FROM workflows WHERE org_id = $1 AND install_id = $2) \
                     ORDER BY workflow_id, idx",
                    Step::COLUMNS
                ),
                args![org.as_str(), install.as_str()],
            ))
            .await?;
        let mut steps = std::collections::HashMap::<WorkflowId, Vec<Step>>::new();
        for StepRow(id, step) in rows {
            steps.entry(id).or_default().push(step);
        }
        let with_steps = |HeadRow(id, head): HeadRow| {
            let its = steps.remove(&id).unwrap_or_default();
            head.with_steps(id, its)
        };
        Ok(heads.into_iter().map(with_steps).collect())
    }

    async fn get_workflow(&self, org: &OrgId, id: &WorkflowId) -> Result<Option<Workflow>> {
        // The head on each of its steps' rows: one round trip.
        let rows: Vec<HeadAndStep> = self
            .query(Stmt::new(
                format!(
                    "SELECT h.*, s.* FROM (SELECT {} FROM workflows WHERE id = $1 AND org_id = $2) h \
                     LEFT JOIN (SELECT {} FROM workflow_steps WHERE workflow_id = $1) s ON 1 = 1 \
                     ORDER BY s.idx",
                    WorkflowHead::COLUMNS,
                    Step::COLUMNS
                ),
                args![id.as_str(), org.as_str()],
            ))
            .await?;
        let mut rows = rows.into_iter();
        let Some(HeadAndStep(head, first)) = rows.next() else {
            return Ok(None);
        };
        let steps = first.into_iter().chain(rows.filter_map(|r| r.1)).collect();
        Ok(Some(head.with_steps(id.clone(), steps)))
    }

    async fn workflow_to_move(&self, org: &OrgId, id: &WorkflowId) -> Result<Option<Moving>> {
        let rows: Vec<MovingRow> = self
            .query(Stmt::new(
                reads::moving_sql(S::DIALECT),
                args![id.as_str(), org.as_str()],
            ))
            .await?;
        let mut rows = rows.into_iter();
        let Some(MovingRow { first, step, job }) = rows.next() else {
            return Ok(None);
        };
        let Some((head, install, runner)) = first else {
            return Err(corrupt(format!(
                "workflow {id}: its first step's row is not marked first"
            )));
        };
        let mut steps: Vec<Step> = step.into_iter().collect();
        let mut jobs: Vec<QueuedJob> = job.into_iter().collect();
        for MovingRow { step, job, .. } in rows {
            steps.extend(step);
            jobs.extend(job);
        }
        Ok(Some(Moving {
            workflow: head.with_steps(id.clone(), steps),
            install,
            runner,
            jobs,
        }))
    }

    async fn active_workflows(&self) -> Result<Vec<ActiveWorkflow>> {
        self.query(Stmt::new(
            "SELECT org_id, id, install_id FROM workflows \
             WHERE status IN ('pending', 'running', 'cancelling') ORDER BY created_at, id",
            Vec::new(),
        ))
        .await
    }

    async fn workflow_statuses(
        &self,
        org: &OrgId,
        ids: &[WorkflowId],
    ) -> Result<Vec<(WorkflowId, WorkflowStatus, Option<i64>)>> {
        let mut out = Vec::with_capacity(ids.len());
        for stmt in of_many(
            org,
            ids,
            "SELECT id, status, finished_at FROM workflows WHERE org_id = $1 AND id IN (IDS)",
        ) {
            let rows: Vec<StatusRow> = self.query(stmt).await?;
            out.extend(rows.into_iter().map(|r| (r.0, r.1, r.2)));
        }
        Ok(out)
    }

    async fn waiting_steps(
        &self,
        org: &OrgId,
        ids: &[WorkflowId],
    ) -> Result<Vec<(WorkflowId, String)>> {
        let mut out: Vec<(WorkflowId, String)> = Vec::new();
        for stmt in of_many(
            org,
            ids,
            "SELECT s.workflow_id, s.name FROM workflow_steps s JOIN workflows w ON w.id = s.workflow_id \
             WHERE w.org_id = $1 AND s.workflow_id IN (IDS) AND s.status = 'waiting_approval' \
             AND s.approved_at IS NULL ORDER BY s.workflow_id, s.idx",
        ) {
            let rows: Vec<WaitingRow> = self.query(stmt).await?;
            for WaitingRow(wf, name) in rows {
                if out.last().is_none_or(|(last, _)| *last != wf) {
                    out.push((wf, name));
                }
            }
        }
        Ok(out)
    }

    async fn workflows_of_jobs(&self, jobs: &[JobId]) -> Result<Vec<(JobId, OrgId, WorkflowId)>> {
        let mut out = Vec::with_capacity(jobs.len());
        for stmt in reads::workflows_of_jobs(jobs) {
            let rows: Vec<JobOfWorkflow> = self.query(stmt).await?;
            out.extend(rows.into_iter().map(|JobOfWorkflow(j, o, w)| (j, o, w)));
        }
        Ok(out)
    }

    async fn set_workflow_status(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        status: WorkflowStatus,
    ) -> Result<Option<i64>> {
        // An ending status ends it now.
        let finished = (!status.is_active()).then(now_ms);
        let write = Stmt::new(
            "UPDATE workflows SET status = $3, finished_at = $4 WHERE id = $1 AND org_id = $2",
            args![
                id.as_str(),
                org.as_str(),
                status.as_str(),
                Arg::Int(finished)
            ],
        );
        let mut writes = bumped(S::DIALECT, write, id);
        match S::DIALECT {
            // One statement, which answers the revision it bumped to.
            Dialect::Postgres => {
                let mut one = writes.pop().expect("one statement on PostgreSQL");
                one.sql.push_str(" RETURNING rev");
                Ok(self.write_query(one).await?.pop())
            }
            // The two, then the revision read in their transaction.
            Dialect::Sqlite => {
                let read = Stmt::new(
                    "SELECT s.rev FROM install_summaries s JOIN workflows w ON w.install_id = s.install_id \
                     WHERE w.id = $1 AND w.org_id = $2",
                    args![id.as_str(), org.as_str()],
                );
                let plan = Change {
                    first: writes,
                    lock: None,
                    read,
                    read_locks: false,
                };
                self.change(plan, |mut revs: Vec<i64>| Ok((Vec::new(), revs.pop())))
                    .await
            }
        }
    }

    async fn update_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        u: StepUpdate,
    ) -> Result<()> {
        let missing = format!("no step {index} in workflow {id}");
        let write = update_step_stmt(org, id, index, &u);
        if S::DIALECT == Dialect::Postgres {
            // The update finds the step or changes nothing: no read first.
            let changed = self.execute(bumped(S::DIALECT, write, id)).await?;
            return match changed.first() {
                Some(n) if *n > 0 => Ok(()),
                _ => Err(StoreError::Invalid(missing)),
            };
        }
        let read = Stmt::new(
            "SELECT idx FROM workflow_steps WHERE workflow_id = $1 AND idx = $2 \
             AND EXISTS (SELECT 1 FROM workflows w WHERE w.id = $1 AND w.org_id = $3)",
            args![id.as_str(), index, org.as_str()],
        );
        self.write_if_found(read, bumped(S::DIALECT, write, id), missing)
            .await
    }

    async fn dispatch_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        job: NewJob,
        token: Option<StateToken>,
    ) -> Result<()> {
        if S::DIALECT == Dialect::Postgres {
            return self
                .execute(vec![dispatch_in_one(org, id, index, &job, token)])
                .await?
                .first()
                .filter(|n| **n > 0)
                .map(drop)
                .ok_or_else(|| {
                    StoreError::Invalid(format!(
                        "workflow {id} is not running: step {index} not dispatched"
                    ))
                });
        }
        // The workflow's row, read locked: it stays running until the
        // step is dispatched.
        let read = Stmt::new(
            "SELECT 1 FROM workflows WHERE id = $1 AND org_id = $2 AND status = 'running' \
             AND EXISTS (SELECT 1 FROM workflow_steps WHERE workflow_id = $1 AND idx = $3)",
            args![id.as_str(), org.as_str(), index],
        );
        let job_id = job.spec.job_id.as_str();
        let mut stmts = vec![
            super::jobs::job_insert(&job),
            Stmt::new(
                "UPDATE workflow_steps SET status = 'running', job_id = $4, reason = NULL \
                 WHERE workflow_id = $1 AND idx = $3 \
                 AND EXISTS (SELECT 1 FROM workflows w WHERE w.id = $1 AND w.org_id = $2 \
                             AND w.status = 'running')",
                args![id.as_str(), org.as_str(), index, job_id],
            ),
        ];
        stmts.extend(token.map(|t| {
            Stmt::new(
                "INSERT INTO state_tokens (token_hash, job_id, install_id, component) \
                 VALUES ($1, $2, $3, $4)",
                args![t.hash, job_id, t.install_id.as_str(), t.component],
            )
        }));
        stmts.push(bump(id));
        let missing = format!("workflow {id} is not running: step {index} not dispatched");
        self.write_if_found(read, stmts, missing).await
    }
}
