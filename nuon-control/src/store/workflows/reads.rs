//! The rows the engine's passes and the rollouts read many of at once:
//! the active workflows, statuses, waiting steps.

use super::super::rows::{Cells, Record};
use super::super::sql::{Arg, Stmt};
use super::super::*;

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
}

impl Record for ActiveWorkflow {
    const COLUMNS: &'static str = "org_id, id, install_id";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(ActiveWorkflow {
            org: r.id(0)?,
            id: r.id(1)?,
            install: r.id(2)?,
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

/// The statements that find the workflow of each of `jobs`, a thousand
/// at a time.
pub(super) fn workflows_of_jobs(jobs: &[JobId]) -> Vec<Stmt> {
    let ids: Vec<&str> = jobs.iter().map(|j| j.as_str()).collect();
    in_lists(
        &[],
        &ids,
        "SELECT s.job_id, w.org_id, w.id FROM workflow_steps s \
         JOIN workflows w ON w.id = s.workflow_id WHERE s.job_id IN (IDS)",
    )
}

/// `sql` (whose `$1` is the org and `IN (IDS)` the ids) for the org's
/// workflows `ids`, a thousand at a time.
pub(super) fn of_many(org: &OrgId, ids: &[WorkflowId], sql: &str) -> Vec<Stmt> {
    let ids: Vec<&str> = ids.iter().map(|w| w.as_str()).collect();
    in_lists(&[org.as_str()], &ids, sql)
}

/// `sql` with the arguments `first` (`$1`, ...) and, for its `IN (IDS)`,
/// the `ids` after them, a thousand at a time: a statement's parameters
/// are bounded (SQLite's 32,766).
fn in_lists(first: &[&str], ids: &[&str], sql: &str) -> Vec<Stmt> {
    ids.chunks(1000)
        .map(|chunk| {
            let mut args: Vec<Arg> = first.iter().map(|a| Arg::from(*a)).collect();
            let marks: Vec<String> = chunk
                .iter()
                .map(|id| {
                    args.push(Arg::from(*id));
                    format!("${}", args.len())
                })
                .collect();
            Stmt::new(sql.replace("IDS", &marks.join(", ")), args)
        })
        .collect()
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
