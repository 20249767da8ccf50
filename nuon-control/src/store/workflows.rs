//! Workflows and their steps, written once for both databases.

use super::rollouts::{save_stmts, stale_rollout};
use super::rows::{Cells, Dialect, Offset, Record, WorkflowHead};
use super::shared::{
    already_started, corrupt, enum_str, inputs_column, json_or_null, planned_status,
};
use super::sql::{Arg, Change, Sql, Stmt, args, in_list};
use super::*;

mod create;
mod reads;
mod writes;

use create::{StartChecks, check_start, create_stmts, created, fired_twice, start_checks};
use nuon_core::model::{InstallState, Step};
use nuon_core::{ReleaseId, now_ms};
pub use reads::{ActiveWorkflow, Moving};
use reads::{JobOfWorkflow, MovingRow, StatusRow, WaitingRow, of_many};
use writes::{bump, bumped, dispatch_in_one, ended_ctes, save_summaries, step_writes, summary_sql};

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
    /// The outputs (JSON, the sensitive ones sealed) and state its install
    /// has after it, written with it.
    pub install_outputs: Option<(String, InstallState)>,
}

/// A write of a workflow held back for its next write to carry (on
/// PostgreSQL in the same statement): one statement fewer for each.
#[derive(Debug, Clone)]
pub enum Carried {
    /// It starts: `running` from `pending`, its install in this state.
    Started(InstallState),
    /// A step ended: its index, and its update.
    Ended(u32, StepUpdate),
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

    /// Saves installs' summaries, each made from its install's workflows
    /// at a revision (install, revision, summary); nothing of one whose
    /// workflow changed since (its revision moved on), so a stale summary
    /// never overwrites a fresher one. One statement for many.
    async fn save_install_summaries(&self, made: &[(InstallId, i64, SummaryText)]) -> Result<()>;

    /// Stores a new workflow, pending, with its steps; its install runs
    /// its config version from then on (set in the same transaction).
    async fn create_workflow(&self, org: &OrgId, workflow: NewWorkflow) -> Result<Workflow>;

    /// An install's workflows, newest first.
    async fn list_workflows(&self, org: &OrgId, install: &InstallId) -> Result<Vec<Workflow>> {
        self.installs_workflows(org, std::slice::from_ref(install))
            .await
    }

    /// The workflows of these installs of the org, by install (in no set
    /// order), each install's newest first: one read for many.
    async fn installs_workflows(
        &self,
        org: &OrgId,
        installs: &[InstallId],
    ) -> Result<Vec<Workflow>>;

    /// One workflow of the org.
    async fn get_workflow(&self, org: &OrgId, id: &WorkflowId) -> Result<Option<Workflow>>;

    /// Each of these workflows (with its org) that is there, with what
    /// the engine reads to move it (its install, their runner, its running
    /// steps' jobs): one read for all of them, in no particular order.
    async fn workflows_to_move(&self, keys: &[(OrgId, WorkflowId)]) -> Result<Vec<Moving>>;

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

    /// Sets a workflow's status (and its end time, for an ending status),
    /// and with it its install's state and the release it runs
    /// (`Some(None)`: none) when given (one statement on PostgreSQL, one
    /// transaction on SQLite: whoever sees the workflow's new status sees
    /// the install's); the revision its install's summary has after the
    /// change bumped it (none when the org has no such workflow). `ended`:
    /// the update of the step that ended before (`index`, update), written
    /// with it (the install's state given wins over the step's).
    async fn set_workflow_status(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        status: WorkflowStatus,
        install_state: Option<InstallState>,
        release: Option<Option<&ReleaseId>>,
        ended: Option<(u32, StepUpdate)>,
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
    /// with the state token its Terraform uses, when the workflow is
    /// running. `carried`, written first (on PostgreSQL in the same
    /// statement): its start (then it dispatches only a workflow that was
    /// pending), or the update of the step that ended before it, written
    /// whether or not the step is dispatched.
    async fn dispatch_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        job: NewJob,
        state_token: Option<StateToken>,
        carried: Option<Carried>,
    ) -> Result<()>;
}

/// One workflow of the org with what the engine reads to move it
/// ([`WorkflowStore::workflows_to_move`] of one).
pub async fn workflow_to_move<S: WorkflowStore + ?Sized>(
    store: &S,
    org: &OrgId,
    id: &WorkflowId,
) -> Result<Option<Moving>> {
    let mut found = store
        .workflows_to_move(&[(org.clone(), id.clone())])
        .await?;
    Ok(found.pop())
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

/// A workflow's id and row with one of its steps (none for a workflow of
/// no steps): an install's workflows read in one statement.
struct ListedRow(WorkflowId, WorkflowHead, Option<Step>);

impl Record for ListedRow {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        // The step's columns follow its `workflow_id`, `NULL` for none.
        let at = 1 + WorkflowHead::COLUMNS.split(',').count();
        let step = match r.opt_text(at)? {
            Some(_) => Some(Step::read(&Offset(r, at + 1))?),
            None => None,
        };
        let head = WorkflowHead::read(&Offset(r, 1))?;
        Ok(ListedRow(r.id(0)?, head, step))
    }
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

    async fn save_install_summaries(&self, made: &[(InstallId, i64, SummaryText)]) -> Result<()> {
        if made.is_empty() {
            return Ok(());
        }
        self.execute(save_summaries(made)).await.map(drop)
    }

    async fn create_workflow(&self, org: &OrgId, new: NewWorkflow) -> Result<Workflow> {
        let now = now_ms();
        let small = new.steps.len() <= create::IN_ONE_AT_MOST
            && new
                .rollout
                .as_ref()
                .is_none_or(|r| r.targets.len() <= create::IN_ONE_AT_MOST);
        if S::DIALECT == Dialect::Postgres && small {
            let one = create::create_in_one(org, &new, now)?;
            let answer = self
                .write_query(one)
                .await
                .map_err(|e| fired_twice(e, new.fire.as_ref()))?;
            create::check_created(answer.into_iter().next(), &new)?;
            return created(&new, now);
        }
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

    async fn installs_workflows(
        &self,
        org: &OrgId,
        installs: &[InstallId],
    ) -> Result<Vec<Workflow>> {
        // Each head on each of its steps' rows, in order: one round trip
        // (and one snapshot) for a thousand installs.
        let sql = format!(
            "SELECT h.*, s.* FROM (SELECT id, {} FROM workflows \
             WHERE org_id = $1 AND install_id IN (IDS)) h \
             LEFT JOIN (SELECT workflow_id, {} FROM workflow_steps) s ON s.workflow_id = h.id \
             ORDER BY h.install_id, h.created_at DESC, h.id DESC, s.idx",
            WorkflowHead::COLUMNS,
            Step::COLUMNS
        );
        let ids: Vec<&str> = installs.iter().map(|i| i.as_str()).collect();
        let mut out: Vec<Workflow> = Vec::new();
        if let Some(stmt) = in_list(S::DIALECT, &[org.as_str()], &ids, &sql) {
            let rows: Vec<ListedRow> = self.query(stmt).await?;
            for ListedRow(id, head, step) in rows {
                match out.last_mut() {
                    Some(w) if w.id == id => w.steps.extend(step),
                    _ => out.push(head.with_steps(id, step.into_iter().collect())),
                }
            }
        }
        Ok(out)
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

    async fn workflows_to_move(&self, keys: &[(OrgId, WorkflowId)]) -> Result<Vec<Moving>> {
        if keys.is_empty() {
            return Ok(Vec::new());
        }
        let rows: Vec<MovingRow> = self
            .query(Stmt::new(
                reads::moving_sql_of(S::DIALECT),
                vec![Arg::from(reads::moving_keys(keys))],
            ))
            .await?;
        let mut out: Vec<Moving> = Vec::new();
        for MovingRow {
            id,
            first,
            step,
            job,
        } in rows
        {
            // A workflow's rows come together, its first one first.
            match out.last_mut() {
                Some(m) if m.workflow.id == id => {
                    m.workflow.steps.extend(step);
                    m.jobs.extend(job);
                }
                _ => {
                    let Some((head, install, runner)) = first else {
                        return Err(corrupt(format!(
                            "workflow {id}: its first step's row is not marked first"
                        )));
                    };
                    out.push(Moving {
                        workflow: head.with_steps(id, step.into_iter().collect()),
                        install,
                        runner,
                        jobs: job.into_iter().collect(),
                    });
                }
            }
        }
        Ok(out)
    }

    async fn active_workflows(&self) -> Result<Vec<ActiveWorkflow>> {
        self.query(Stmt::new(
            "SELECT org_id, id, install_id, status FROM workflows \
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
        if let Some(stmt) = of_many(
            S::DIALECT,
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
        if let Some(stmt) = of_many(
            S::DIALECT,
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
        if let Some(stmt) = reads::workflows_of_jobs(S::DIALECT, jobs) {
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
        install_state: Option<InstallState>,
        release: Option<Option<&ReleaseId>>,
        ended: Option<(u32, StepUpdate)>,
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
        // Of the workflow's install (`$1` the workflow, `$2` the org), with
        // the arguments of the status's write and theirs after them: each
        // with how many of them it names (SQLite takes no more).
        let install = "(SELECT install_id FROM workflows WHERE id = $1 AND org_id = $2)";
        let mut args = writes[0].args.clone();
        // The step that ended before it, on PostgreSQL: its common table
        // expressions, and the placeholder of the install's outputs it
        // made, which the install's write below takes.
        let (ended_sql, outputs) = match (&ended, S::DIALECT) {
            (Some((at, u)), Dialect::Postgres) => {
                ended_ctes(org, id, *at, u, &mut args, install_state.is_some())
            }
            _ => (String::new(), None),
        };
        let mut also = Vec::new();
        if let Some(state) = install_state {
            args.push(Arg::from(state.as_str()));
            let outputs = outputs
                .map(|o| {
                    format!(", outputs = CASE WHEN EXISTS (SELECT 1 FROM ended) THEN {o} ELSE outputs END")
                })
                .unwrap_or_default();
            also.push((
                format!(
                    "UPDATE installs SET state = ${}{outputs} WHERE org_id = $2 AND id = {install}",
                    args.len()
                ),
                args.len(),
            ));
        }
        match release {
            Some(Some(r)) => {
                args.extend(args![r.as_str(), now_ms()]);
                also.push((
                    format!(
                        "INSERT INTO install_releases (install_id, org_id, release_id, at) \
                         SELECT install_id, $2, ${}, ${} FROM workflows WHERE id = $1 AND org_id = $2 \
                         ON CONFLICT (install_id) DO UPDATE SET \
                         release_id = excluded.release_id, at = excluded.at",
                        args.len() - 1,
                        args.len()
                    ),
                    args.len(),
                ));
            }
            Some(None) => also.push((
                format!(
                    "DELETE FROM install_releases WHERE org_id = $2 AND install_id = {install}"
                ),
                2,
            )),
            None => {}
        }
        match S::DIALECT {
            // One statement, which answers the revision it bumped to.
            Dialect::Postgres => {
                let mut one = writes.pop().expect("one statement on PostgreSQL");
                for (n, (sql, _)) in also.iter().enumerate() {
                    let rest = one
                        .sql
                        .strip_prefix("WITH ")
                        .expect("a bumped write opens WITH");
                    one.sql = format!("WITH installed{n} AS ({sql}), {rest}").into();
                }
                if !ended_sql.is_empty() {
                    let rest = one.sql.strip_prefix("WITH ").expect("it opens WITH");
                    one.sql = format!("WITH {ended_sql}{rest}").into();
                }
                one.args = args;
                one.sql.to_mut().push_str(" RETURNING rev");
                Ok(self.write_query(one).await?.pop())
            }
            // The step's update, the two, then the revision read in their
            // transaction.
            Dialect::Sqlite => {
                if let Some((at, u)) = &ended {
                    writes.splice(0..0, step_writes(S::DIALECT, org, id, *at, u));
                }
                writes.extend(
                    (also.into_iter()).map(|(sql, named)| Stmt::new(sql, args[..named].to_vec())),
                );
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
        let writes = step_writes(S::DIALECT, org, id, index, &u);
        if S::DIALECT == Dialect::Postgres {
            // The update finds the step or changes nothing: no read first.
            let changed = self.execute(writes).await?;
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
        self.write_if_found(read, writes, missing).await
    }

    async fn dispatch_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        job: NewJob,
        token: Option<StateToken>,
        carried: Option<Carried>,
    ) -> Result<()> {
        let missing = || format!("workflow {id} is not running: step {index} not dispatched");
        if S::DIALECT == Dialect::Postgres {
            let one = dispatch_in_one(org, id, index, &job, token, carried.as_ref());
            let dispatched: Vec<bool> = self.write_query(one).await?;
            return (dispatched.first().filter(|d| **d).map(drop))
                .ok_or_else(|| StoreError::Invalid(missing()));
        }
        // What it carries first; a start in the same transaction, which
        // then reads the workflow pending.
        let mut stmts = Vec::new();
        let status = match carried {
            Some(Carried::Started(state)) => {
                stmts.push(Stmt::new(
                    "UPDATE workflows SET status = 'running', finished_at = NULL \
                     WHERE id = $1 AND org_id = $2",
                    args![id.as_str(), org.as_str()],
                ));
                stmts.push(Stmt::new(
                    "UPDATE installs SET state = $3 WHERE org_id = $2 \
                     AND id = (SELECT install_id FROM workflows WHERE id = $1 AND org_id = $2)",
                    args![id.as_str(), org.as_str(), state.as_str()],
                ));
                "pending"
            }
            Some(Carried::Ended(at, u)) => {
                self.update_step(org, id, at, u).await?;
                "running"
            }
            None => "running",
        };
        // The workflow's row, read locked: it stays running (or pending,
        // to start) until the step is dispatched.
        let read = Stmt::new(
            format!(
                "SELECT 1 FROM workflows WHERE id = $1 AND org_id = $2 AND status = '{status}' \
                 AND EXISTS (SELECT 1 FROM workflow_steps WHERE workflow_id = $1 AND idx = $3)"
            ),
            args![id.as_str(), org.as_str(), index],
        );
        let job_id = job.spec.job_id.as_str();
        stmts.extend([
            super::jobs::job_insert(&job),
            Stmt::new(
                "UPDATE workflow_steps SET status = 'running', job_id = $4, reason = NULL \
                 WHERE workflow_id = $1 AND idx = $3 \
                 AND EXISTS (SELECT 1 FROM workflows w WHERE w.id = $1 AND w.org_id = $2 \
                             AND w.status = 'running')",
                args![id.as_str(), org.as_str(), index, job_id],
            ),
        ]);
        stmts.extend(token.map(|t| {
            Stmt::new(
                "INSERT INTO state_tokens (token_hash, job_id, install_id, component) \
                 VALUES ($1, $2, $3, $4)",
                args![t.hash, job_id, t.install_id.as_str(), t.component],
            )
        }));
        stmts.push(bump(id));
        self.write_if_found(read, stmts, missing()).await
    }
}
