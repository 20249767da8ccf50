//! Jobs as the Control API sees them: queue, read, cancel, logs.

use super::*;

/// A job to queue: its spec, the signed bytes sealed, and the payload as
/// the Control API shows it (made by [`crate::keys`]).
#[derive(Debug, Clone)]
pub struct NewJob {
    /// The spec.
    pub spec: JobSpec,
    /// `serde_json::to_string(&spec)`, the signed bytes, sealed: what a
    /// claim hands out, opened on the way to the runner.
    pub sealed_spec: String,
    /// The signature of the signed bytes.
    pub signature: String,
    /// The payload as the Control API shows it (no secret in it).
    pub payload: serde_json::Value,
}

/// Jobs as the Control API sees them: queue, read, cancel, logs.
#[async_trait]
pub trait JobStore: Send + Sync + 'static {
    /// Queues a job.
    async fn enqueue_job(&self, job: NewJob) -> Result<JobInfo>;

    /// One job of the org.
    async fn get_job(&self, org: &OrgId, id: &JobId) -> Result<Option<JobInfo>>;

    /// The org's newest jobs.
    async fn list_jobs(&self, org: &OrgId, limit: u32) -> Result<Vec<JobInfo>>;

    /// Cancels a queued job at once, or flags a running one for its runner.
    async fn request_cancel(&self, org: &OrgId, id: &JobId) -> Result<Option<JobInfo>>;

    /// Up to `limit` log lines of an org's job after `cursor`.
    async fn read_logs(
        &self,
        org: &OrgId,
        job: &JobId,
        cursor: u64,
        limit: u32,
    ) -> Result<Option<LogPage>>;
}
