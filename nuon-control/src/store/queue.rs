//! The runner side of the job queue: claims, leases, logs, completions.

use super::*;

/// The jobs a claim took.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Claimed {
    /// The jobs, each with its new attempt.
    pub jobs: Vec<ClaimedJob>,
    /// Whether the runner has queued jobs that its org's limit on running
    /// jobs held back: it should look again when a job of the org ends.
    pub held_back: bool,
}

/// The runner side of the job queue: claims, leases, logs, completions.
#[async_trait]
pub trait QueueStore: Send + Sync + 'static {
    /// Claims up to `max` queued jobs of the given kinds for `runner`, each
    /// with a new attempt whose lease lasts `lease_ms`, and no more than its
    /// org's limit on running jobs leaves room for.
    async fn claim(
        &self,
        runner: &RunnerId,
        kinds: &[String],
        max: u32,
        lease_ms: u64,
    ) -> Result<Claimed>;

    /// Extends the runner's leases and says, per lease, whether to go on.
    async fn heartbeat(
        &self,
        runner: &RunnerId,
        leases: &[LeaseRef],
        lease_ms: u64,
    ) -> Result<Vec<LeaseStatus>>;

    /// The state of the runner's leases, without extending them.
    async fn lease_states(
        &self,
        runner: &RunnerId,
        leases: &[LeaseRef],
    ) -> Result<Vec<LeaseStatus>>;

    /// Stores a batch of log lines of the runner's current attempt.
    async fn append_logs(&self, runner: &RunnerId, job: &JobId, batch: LogBatch) -> Result<LogAck>;

    /// Completes the runner's attempt. Idempotent.
    async fn complete(
        &self,
        runner: &RunnerId,
        job: &JobId,
        completion: Completion,
    ) -> Result<CompletionAck>;
}
