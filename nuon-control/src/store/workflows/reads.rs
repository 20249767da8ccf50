//! The rows the engine's passes and the rollouts read many of at once:
//! the active workflows, statuses, waiting steps.

use super::super::rows::{Cells, Dialect, Offset, Record, WorkflowHead};
use super::super::sql::{Stmt, in_list};
use super::super::*;
use nuon_core::model::{QueuedJob, Step};
use std::sync::LazyLock;

/// A workflow that is not over, and its install: what the engine's pass
/// walks, oldest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveWorkflow {
    /// Its org.
    pub org: OrgId,
    /// The workflow.
    pub id: WorkflowId,
    /// Its install: one workflow of an install moves at a time.
    pub install: InstallId,
    /// `pending`, `running` or `cancelling`.
    pub status: WorkflowStatus,
}

impl Record for ActiveWorkflow {
    const COLUMNS: &'static str = "org_id, id, install_id, status";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(ActiveWorkflow {
            org: r.id(0)?,
            id: r.id(1)?,
            install: r.id(2)?,
            status: r.text(3)?.parse().map_err(super::super::shared::corrupt)?,
        })
    }
}

/// A workflow's id, status and end, as `workflow_statuses` reads them.
pub(super) struct StatusRow(
    pub(super) WorkflowId,
    pub(super) WorkflowStatus,
    pub(super) Option<i64>,
);

impl Record for StatusRow {
    const COLUMNS: &'static str = "id, status, finished_at";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(StatusRow(
            r.id(0)?,
            r.text(1)?.parse().map_err(super::super::shared::corrupt)?,
            r.opt_int(2)?,
        ))
    }
}

/// A job and the org and workflow whose step ran it, as
/// `workflows_of_jobs` reads them.
pub(super) struct JobOfWorkflow(pub(super) JobId, pub(super) OrgId, pub(super) WorkflowId);

impl Record for JobOfWorkflow {
    const COLUMNS: &'static str = "s.job_id, w.org_id, w.id";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(JobOfWorkflow(r.id(0)?, r.id(1)?, r.id(2)?))
    }
}

/// The statement that finds the workflow of each of `jobs` (none when
/// there are none).
pub(super) fn workflows_of_jobs(dialect: Dialect, jobs: &[JobId]) -> Option<Stmt> {
    let ids: Vec<&str> = jobs.iter().map(|j| j.as_str()).collect();
    in_list(
        dialect,
        &[],
        &ids,
        "SELECT s.job_id, w.org_id, w.id FROM workflow_steps s \
         JOIN workflows w ON w.id = s.workflow_id WHERE s.job_id IN (IDS)",
    )
}

/// `sql` (whose `$1` is the org and `IN (IDS)` the ids) for the org's
/// workflows `ids` (none when there are none).
pub(super) fn of_many(
    dialect: Dialect,
    org: &OrgId,
    ids: &[WorkflowId],
    sql: &str,
) -> Option<Stmt> {
    let ids: Vec<&str> = ids.iter().map(|w| w.as_str()).collect();
    in_list(dialect, &[org.as_str()], &ids, sql)
}

/// A workflow's id and the name of a step of it, as `waiting_steps` reads
/// them.
pub(super) struct WaitingRow(pub(super) WorkflowId, pub(super) String);

impl Record for WaitingRow {
    const COLUMNS: &'static str = "s.workflow_id, s.name";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(WaitingRow(r.id(0)?, r.text(1)?))
    }
}

/// A workflow the engine moves, with what moving it reads first, in one
/// round trip: its install, the install's runner, and the jobs of its
/// running steps. Each of a rollout's installs is moved four times or
/// more; apart, these were four reads each time.
#[derive(Debug, Clone, PartialEq)]
pub struct Moving {
    /// The workflow, with its steps.
    pub workflow: Workflow,
    /// Its install; `None` when it is gone.
    pub install: Option<Install>,
    /// The install's runner; `None` when it has none.
    pub runner: Option<RunnerInfo>,
    /// The job of each of its `running` steps that has one, without its
    /// payload (`null`: what moves a workflow is a job's end, never the
    /// spec it ran).
    pub jobs: Vec<QueuedJob>,
}

/// The statement of [`Moving`], for many workflows at once: one
/// parameter, a JSON array of `[org, workflow]` pairs (one statement text
/// however many: PostgreSQL prepares it once a connection). Each row is a
/// workflow's row on one of its steps' rows (as `get_workflow` reads
/// them), a running step's row with its job, and the first row of each
/// workflow (its first step's, or the workflow's alone when it has none)
/// with the install and its runner. The first column says which row is
/// the first: only that row's workflow, install and runner are decoded
/// ([`MovingRow`]), the rest carry `NULL` for the two. Rows come workflow
/// by workflow, each's steps in order. The workflow's id and org follow
/// the first column; the steps, the install, the runner and the job each
/// carry one column more than their own, the key they are matched on.
/// PostgreSQL looks the install, runner and job up by key from the row
/// before (`LATERAL`), by its key alone (`OFFSET 0` keeps the org's test
/// out of the inner plan): joined plainly, or with the org's test beside
/// the key, a plan made while the tables were young walked every job of
/// the org by `jobs_org` (1.5 to 5 ms a read at 1,000 installs, growing
/// with the org). The job's payload (the spec as shown, kilobytes of
/// JSON) is left out: reading and decoding it was a fifth of the read's
/// decoding, for nothing the engine looks at.
pub(super) fn moving_sql_of(dialect: Dialect) -> &'static str {
    // Made once a dialect: formatting it took 0.6 % of a replica's CPU
    // through a rollout to 10,000 installs.
    static POSTGRES: LazyLock<String> = LazyLock::new(|| moving_sql(Dialect::Postgres));
    static SQLITE: LazyLock<String> = LazyLock::new(|| moving_sql(Dialect::Sqlite));
    match dialect {
        Dialect::Postgres => &POSTGRES,
        Dialect::Sqlite => &SQLITE,
    }
}

fn moving_sql(dialect: Dialect) -> String {
    let keys = match dialect {
        Dialect::Postgres => {
            "SELECT e->>0 AS org, e->>1 AS id FROM jsonb_array_elements($1::jsonb) e"
        }
        Dialect::Sqlite => {
            "SELECT json_extract(value, '$[0]') AS org, json_extract(value, '$[1]') AS id FROM json_each($1)"
        }
    };
    let first =
        "COALESCE(s.idx = (SELECT min(idx) FROM workflow_steps WHERE workflow_id = h.w_id), TRUE)";
    let by = |cols: &str, table: &str, key: &str, of: &str, when: &str| match dialect {
        Dialect::Postgres => format!(
            "LEFT JOIN LATERAL (SELECT {cols}, org_id AS {key}_org FROM (SELECT * FROM {table} WHERE id = {of} OFFSET 0) {table} \
             WHERE org_id = h.w_org{when} LIMIT 1) {key} ON TRUE"
        ),
        Dialect::Sqlite => format!(
            "LEFT JOIN (SELECT {cols}, org_id AS {key}_org FROM {table}) {key} \
             ON {key}.id = {of} AND {key}.{key}_org = h.w_org{when}"
        ),
    };
    format!(
        "WITH k AS ({keys}) \
         SELECT {first}, h.*, s.*, i.*, r.*, j.* \
         FROM (SELECT id AS w_id, org_id AS w_org, {} FROM workflows WHERE (org_id, id) IN (SELECT org, id FROM k)) h \
         LEFT JOIN (SELECT {}, workflow_id AS s_of FROM workflow_steps WHERE workflow_id IN (SELECT id FROM k)) s \
         ON s.s_of = h.w_id {} {} {} \
         ORDER BY h.w_id, s.idx",
        WorkflowHead::COLUMNS,
        Step::COLUMNS,
        by(
            Install::COLUMNS,
            "installs",
            "i",
            "h.install_id",
            &format!(" AND {first}")
        ),
        by(RunnerInfo::COLUMNS, "runners", "r", "i.runner_id", ""),
        by(
            &QueuedJob::COLUMNS.replacen("payload", "NULL AS payload", 1),
            "jobs",
            "j",
            "(CASE WHEN s.status = 'running' THEN s.job_id END)",
            ""
        ),
    )
}

/// The one parameter of [`moving_sql`]: the workflows as a JSON array of
/// `[org, workflow]` pairs.
pub(super) fn moving_keys(keys: &[(OrgId, WorkflowId)]) -> String {
    let pairs: Vec<[&str; 2]> = keys.iter().map(|(o, w)| [o.as_str(), w.as_str()]).collect();
    serde_json::to_string(&pairs).expect("strings serialize")
}

/// One row of [`moving_sql`]: the workflow's id, with its head, install
/// and runner on its first row only, a step (none when the workflow has
/// none), and the running step's job.
pub(super) struct MovingRow {
    pub(super) id: WorkflowId,
    pub(super) first: Option<(WorkflowHead, Option<Install>, Option<RunnerInfo>)>,
    pub(super) step: Option<Step>,
    pub(super) job: Option<QueuedJob>,
}

impl Record for MovingRow {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        let id = r.id(1)?;
        // The first flag, the id and the org.
        let head = 3;
        let mut at = head + width::<WorkflowHead>();
        // A step's first column, its index, is an integer.
        let step = match r.opt_int(at)? {
            Some(_) => Some(Step::read(&Offset(r, at))?),
            None => None,
        };
        // Each after its key.
        at += width::<Step>() + 1;
        let install = read_at(r, &mut at)?;
        at += 1;
        let runner = read_at(r, &mut at)?;
        at += 1;
        let job = read_at(r, &mut at)?;
        let first = match r.flag(0)? {
            true => Some((WorkflowHead::read(&Offset(r, head))?, install, runner)),
            false => None,
        };
        Ok(MovingRow {
            id,
            first,
            step,
            job,
        })
    }
}

/// How many columns `T` reads.
fn width<T: Record>() -> usize {
    T::COLUMNS.split(',').count()
}

/// The `T` from column `at` on (none when its first column, an id, is
/// `NULL`: a left join found none); `at` moves past its columns.
fn read_at<T: Record>(r: &impl Cells, at: &mut usize) -> Result<Option<T>> {
    let from = *at;
    *at += width::<T>();
    match r.opt_text(from)? {
        Some(_) => T::read(&Offset(r, from)).map(Some),
        None => Ok(None),
    }
}
