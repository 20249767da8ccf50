//! What a runner tells of itself with its claims and heartbeats: its key
//! figures, the tools it holds, what its health probes saw, and an update
//! it did not take.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A runner's key figures, sent with its claims and heartbeats.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunnerTelemetry {
    /// How many jobs it runs at once.
    pub slots: u32,
    /// How many run now.
    pub busy: u32,
    /// Attempts whose logs or results are not yet all shipped.
    pub spool_backlog: u32,
    /// Jobs it finished, by outcome (`succeeded`, `failed`, `cancelled`,
    /// `refused`).
    #[serde(default)]
    pub jobs: BTreeMap<String, u64>,
    /// The last heartbeat's round trip, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_rtt_ms: Option<u64>,
    /// The last error it met (a job it refused, a call that failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Set while the customer has disabled the runner (`nuon-runner
    /// disable`): their reason. A disabled runner takes no new job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disabled: Option<String>,
    /// The break-glass roles the customer turned on (`nuon-runner
    /// break-glass enable ROLE`), by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub break_glass: Vec<String>,
    /// The version the customer pinned the runner to (`nuon-runner run
    /// --pin-version`): runner rollouts pass it over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pinned: Option<String>,
    /// The last update it did not take, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_failed: Option<RunnerUpdateFailure>,
    /// What each health probe it watches said in its last round
    /// (`ProbeWatch`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub probes: Vec<ProbeSeen>,
    /// The tool versions it holds (Terraform and OpenTofu on its `PATH`
    /// and those it installed for a component's pinned version).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolHeld>,
}

/// A tool version a runner holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ToolHeld {
    /// The binary: `terraform`, `tofu`.
    pub name: String,
    /// Its version, as it reports it.
    pub version: String,
    /// Installed by the runner from its mirror (not found on its `PATH`).
    #[serde(default)]
    pub installed: bool,
}

impl std::fmt::Display for ToolHeld {
    /// `terraform 1.11.4`, with ` (installed)` for one the runner installed.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.name, self.version)?;
        if self.installed {
            f.write_str(" (installed)")?;
        }
        Ok(())
    }
}

/// What one probe said in the runner's last round of its watch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeSeen {
    /// The component.
    pub component: String,
    /// The probe's name.
    pub probe: String,
    /// Whether it passed.
    pub ok: bool,
    /// What it answered (`HTTP 200 in 3 ms`, an exit code and the end of
    /// its output, why it could not connect).
    pub detail: String,
    /// When the round ran, ms since the epoch (the control plane takes
    /// no time later than its own now).
    pub at_ms: i64,
}

/// A runner's report of an update it did not take: the version it stays
/// off, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunnerUpdateFailure {
    /// The release it was asked to run.
    pub release_id: crate::ReleaseId,
    /// Its version.
    pub version: String,
    /// The ask's number (`tries` of the `RunnerUpdate` it answers).
    pub tries: u32,
    /// Why: a download or signature that did not check, a trial run that
    /// failed, a new process that was not healthy in time (and the runner
    /// went back to the version before), a pin.
    pub reason: String,
}
