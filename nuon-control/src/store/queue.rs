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
    /// Whether the claim saw no queued job of the runner left (of any
    /// kind) once it took its own: its next claim may wait for a wake
    /// before it looks. False when not known.
    pub nothing_left: bool,
    /// What the runner's settings' version is made of, as the claim read
    /// it with the jobs it took (`Some(None)`: a runner of no install,
    /// a build runner); `None` when the claim did not read it.
    pub settings: Option<Option<SettingsBasis>>,
}

/// How much of a job's log is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogQuota {
    /// Bytes of records kept per attempt.
    pub per_attempt: u64,
    /// Bytes its runner may still ship in its current window.
    pub runner_room: u64,
}

impl LogQuota {
    /// No limit.
    pub const NONE: LogQuota = LogQuota {
        per_attempt: u64::MAX,
        runner_room: u64::MAX,
    };
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

    /// Stores a batch of log lines of the runner's current attempt, with
    /// no quota.
    async fn append_logs(&self, runner: &RunnerId, job: &JobId, batch: LogBatch) -> Result<LogAck> {
        self.append_logs_within(runner, job, batch, LogQuota::NONE)
            .await
            .map(|(ack, _)| ack)
    }

    /// Stores a batch of log lines of the runner's current attempt, as far
    /// as `quota` lets it: the lines past it are acknowledged and dropped,
    /// and the attempt's log ends with a line saying so. Also the bytes
    /// stored.
    async fn append_logs_within(
        &self,
        runner: &RunnerId,
        job: &JobId,
        batch: LogBatch,
        quota: LogQuota,
    ) -> Result<(LogAck, u64)>;

    /// Completes the runner's attempt. Idempotent.
    async fn complete(
        &self,
        runner: &RunnerId,
        job: &JobId,
        completion: Completion,
    ) -> Result<CompletionAck>;

    /// Stores the attempt's last log lines (as [`Self::append_logs_within`]
    /// does) and then completes it (as [`Self::complete`]): a completion
    /// those lines make whole is accepted. Also the bytes stored. The
    /// lines stored stay when the completion is refused.
    async fn complete_with_logs(
        &self,
        runner: &RunnerId,
        job: &JobId,
        logs: LogBatch,
        quota: LogQuota,
        completion: Completion,
    ) -> Result<(CompletionAck, u64)> {
        let wrote = match self.append_logs_within(runner, job, logs, quota).await {
            Ok((_, wrote)) => wrote,
            // A finished attempt takes no lines: its completion answers
            // (the same answer again, or why not).
            Err(StoreError::Conflict {
                code: ErrorCode::StaleAttempt,
                ..
            }) => 0,
            Err(e) => return Err(e),
        };
        Ok((self.complete(runner, job, completion).await?, wrote))
    }
}
