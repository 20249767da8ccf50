//! The [`Transport`] a runner talks to the control plane through.

use async_trait::async_trait;

use crate::id::JobId;
use crate::wire::{
    ClaimRequest, ClaimResponse, Completion, CompletionAck, HeartbeatRequest, HeartbeatResponse,
    LogAck, LogBatch,
};

/// Why a Runner API call did not succeed. The variants tell the runner what
/// to do next: retry later, stop the attempt, or give up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransportError {
    /// The attempt is no longer this runner's (409 `stale_attempt`): stop its work.
    #[error("attempt is stale: {0}")]
    Stale(String),
    /// The server does not hold every log line yet (409 `logs_pending`): resend from `acked_seq + 1`.
    #[error("server holds log lines only up to {acked_seq}; send the rest before completing")]
    LogsPending {
        /// Highest contiguous sequence number the server holds.
        acked_seq: u64,
    },
    /// The runner token is unknown or revoked (401), or another process of
    /// the runner uses it (409 `runner_in_use`): retrying will not help.
    #[error("runner token refused: {0}")]
    Unauthorized(String),
    /// The request was refused as invalid (other 4xx): retrying it will not help.
    #[error("request refused ({status}): {message}")]
    Rejected {
        /// The HTTP status.
        status: u16,
        /// The server's message.
        message: String,
    },
    /// The control plane could not be reached or failed (connect error, 5xx):
    /// retry with backoff; nothing was lost.
    #[error("control plane unavailable: {0}")]
    Unavailable(String),
    /// The connection broke after the request was sent, before its answer
    /// came: a NAT, proxy or load balancer on the way may close requests
    /// held open longer than it allows. Retry; nothing was lost.
    #[error("connection cut before the answer came: {0}")]
    Cut(String),
}

impl TransportError {
    /// Whether the same call may succeed later.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            TransportError::Unavailable(_) | TransportError::Cut(_)
        )
    }
}

/// The runner's side of the Runner API.
///
/// [`nuon-client`](https://docs.rs/nuon-client)'s `RunnerClient` implements
/// it over HTTP; tests and embedders may implement it in memory.
#[async_trait]
pub trait Transport: Send + Sync + 'static {
    /// Long-poll for jobs.
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimResponse, TransportError>;
    /// Extend leases and learn about cancellations.
    async fn heartbeat(&self, req: &HeartbeatRequest) -> Result<HeartbeatResponse, TransportError>;
    /// Append a batch of log lines to an attempt.
    async fn append_logs(&self, job: &JobId, batch: &LogBatch) -> Result<LogAck, TransportError>;
    /// Complete an attempt.
    async fn complete(
        &self,
        job: &JobId,
        completion: &Completion,
    ) -> Result<CompletionAck, TransportError>;
    /// The runner's settings. A control plane that keeps none for it (a
    /// transport of tests, an older control plane) has empty ones.
    async fn settings(&self) -> Result<crate::wire::RunnerSettingsInfo, TransportError> {
        Ok(crate::wire::RunnerSettingsInfo::default())
    }
}
