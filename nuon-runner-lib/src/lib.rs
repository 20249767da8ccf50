//! The nuon runner engine: it claims signed jobs from the control plane,
//! runs them in their own process groups, and ships their logs and results
//! back without losing a line.
//!
//! The `nuon-runner` binary is a thin shell around [`Runner`]; tests and
//! embedders drive it the same way, with any [`nuon_core::Transport`] (the
//! HTTP `RunnerClient` of `nuon-client`, or an in-memory fake).
//!
//! # What a runner does
//!
//! - **Claims** with a long poll for the kinds of its [`PluginRegistry`] and
//!   its free slots; the next claim goes out the moment an answer arrives or
//!   a slot frees. Errors back off exponentially with full jitter; a refused
//!   token ends [`Runner::run`] with [`Error::Unauthorized`].
//! - **Checks every job** before anything runs: the Ed25519 signature over
//!   the exact spec bytes, then that the spec names the claimed job and this
//!   runner, then the plugin's `validate`. A refused job is completed as
//!   failed with the reason in its log.
//! - **Heartbeats** once for a job before starting it, then one task extends
//!   every lease in a long-poll loop; `cancel` stops a job, `stale` kills it
//!   and drops its log. Heartbeat errors never stop jobs.
//! - **Runs each job** in a temporary directory under `WORK_DIR/jobs`, each
//!   process in its own process group, with the configured environment (not
//!   the runner's own: its token stays out), a timeout, and the cancel ladder
//!   SIGTERM, [`RunnerConfig::grace`], SIGKILL of the group. When the main
//!   process exits, the rest of its group is killed. An orphan guard (a `sh`
//!   watchdog holding a pipe from the runner) kills every job group if the
//!   runner process dies, even by `kill -9`.
//! - **Spools** each attempt's output on disk in `WORK_DIR/spool/JOBID-ATTEMPT.log`
//!   (append-only log records, the attempt's result as the last one), and
//!   ships it with one request in flight per attempt, then the completion.
//!   Nothing is lost across control-plane outages or runner restarts: at start
//!   an attempt left without a result is failed ("runner restarted while the
//!   job was running") and shipped.
//! - **Watches** its install's health between deploys: the probes its
//!   signed settings name (each deployed component's `[health]`), one
//!   round every interval, reported in its telemetry and at once when one
//!   changes, also while the control plane is down.
//! - **Drains** when the shutdown future resolves: no more claims, running
//!   jobs finish (up to [`RunnerConfig::drain_timeout`], then they are
//!   stopped), logs and completions are delivered (up to
//!   [`RunnerConfig::ship_timeout`]), and `run` returns `Ok`.
//!
//! # Example
//!
//! ```no_run
//! use nuon_client::ClientConfig;
//! use nuon_runner_lib::{Runner, RunnerConfig};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = ClientConfig::new("https://runner-api.example.com", "rnr_01J....secret")?;
//! let key = "ed25519:AAAAC3NzaC1lZDI1NTE5AAAAIBm8dY0bHhj8rR7pZqNw0k0Jcq5v".parse()?;
//! let mut config = RunnerConfig::connect(client, key, "nuon-runner-data")?;
//! config.slots = 2;
//! Runner::new(config)
//!     .run(async {
//!         let _ = tokio::signal::ctrl_c().await;
//!     })
//!     .await?;
//! # Ok(()) }
//! ```

pub mod aws_session;
mod backoff;
#[cfg(feature = "cmd")]
pub mod cmd;
mod config;
pub mod container;
pub mod credentials;
pub mod customer_secrets;
mod error;
mod host;
pub mod journal;
mod keys;
pub mod nested_stacks;
mod orphan;
mod runner;
mod shipper;
mod spool;
mod stats;
pub mod switch;
mod sys;
mod tail;
#[cfg(feature = "cmd")]
pub mod update;
mod watch;

pub use backoff::Backoff;
pub use config::{PluginRegistry, RunnerConfig};
pub use error::{Error, Result};
pub use runner::Runner;
pub use stats::RunnerStats;

static VERSION: std::sync::OnceLock<&'static str> = std::sync::OnceLock::new();

/// Sets the version this runner reports (its binary's; default the
/// crate's). Set once, before the runner connects.
pub fn set_version(version: &'static str) {
    let _ = VERSION.set(version);
}

/// The version this runner reports to the control plane (its session)
/// and prints with `--version`.
pub fn version() -> &'static str {
    VERSION.get().copied().unwrap_or(env!("CARGO_PKG_VERSION"))
}

#[allow(dead_code)]
fn assert_send_sync() {
    fn check<T: Send + Sync>() {}
    check::<RunnerConfig>();
    check::<Runner>();
    check::<Error>();
}
