//! What points back from a job to what it was run for: the workflow step
//! whose newest try it is (the dashboard's job page links back to it).

use super::rows::{Cells, Record};
use super::sql::{Sql, Stmt, args};
use super::*;

/// The way back from a job.
#[async_trait]
pub trait JobLinkStore: Send + Sync + 'static {
    /// The workflow and the index of its step whose newest try ran `job`
    /// (none for a job of no workflow, or of an earlier try).
    async fn step_of_job(&self, org: &OrgId, job: &JobId) -> Result<Option<(WorkflowId, u32)>>;
}

/// A step's workflow and index, as a record.
struct StepOfJob(WorkflowId, u32);

impl Record for StepOfJob {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(StepOfJob(r.id(0)?, u32::try_from(r.int(1)?).unwrap_or(0)))
    }
}

#[async_trait]
impl<S: Sql + 'static> JobLinkStore for S {
    async fn step_of_job(&self, org: &OrgId, job: &JobId) -> Result<Option<(WorkflowId, u32)>> {
        let row: Option<StepOfJob> = self
            .query_one(Stmt::new(
                "SELECT s.workflow_id, s.idx FROM workflow_steps s \
                 JOIN workflows w ON w.id = s.workflow_id \
                 WHERE s.job_id = $1 AND w.org_id = $2",
                args![job.as_str(), org.as_str()],
            ))
            .await?;
        Ok(row.map(|StepOfJob(w, i)| (w, i)))
    }
}
