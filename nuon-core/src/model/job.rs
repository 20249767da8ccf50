//! Jobs as the queue keeps them: the spec a runner runs (its kind and
//! payload) and how far it got.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::{JobId, JobStatus, RunnerId};

/// A job in the queue: what it runs, on which runner, and how far it got.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "JobInfo")]
pub struct QueuedJob {
    /// Its id.
    pub id: JobId,
    /// The runner it is for.
    pub runner_id: RunnerId,
    /// Its kind.
    pub kind: String,
    /// Its payload.
    pub payload: serde_json::Value,
    /// Its status.
    pub status: JobStatus,
    /// How many attempts it has had.
    pub attempts: u32,
    /// How many it may have.
    pub max_attempts: u32,
    /// Timeout of one attempt in seconds.
    pub timeout_secs: u64,
    /// Whether a cancel was requested.
    pub cancel_requested: bool,
    /// Exit code of the last attempt's main process.
    pub exit_code: Option<i32>,
    /// Why it did not succeed.
    pub reason: Option<String>,
    /// Its outputs.
    pub outputs: serde_json::Value,
    /// Creation time, ms since the epoch.
    pub created_at_ms: i64,
    /// When its first attempt started.
    pub started_at_ms: Option<i64>,
    /// When it finished.
    pub finished_at_ms: Option<i64>,
}
