//! Core types of the nuon BYOC delivery platform.
//!
//! A vendor runs the control plane; each customer install runs a runner that
//! makes the only (outbound) connection, claims jobs, runs them and ships
//! logs and results back. This crate is the contract between those parts:
//!
//! - ids ([`JobId`], [`RunnerId`], [`OrgId`]) and tokens ([`token`]);
//! - the signed [`JobSpec`] and typed payloads ([`Job`], [`ExecJob`]);
//! - job states ([`JobStatus`], [`Outcome`], [`JobResult`]);
//! - the wire types of both APIs ([`wire`]);
//! - job signing ([`OrgSigningKey`], [`PublicKey`]);
//! - the traits [`Transport`] (runner ↔ control plane) and [`Plugin`] / [`JobHost`]
//!   (runner ↔ the code that runs one job kind).
//!
//! It has no server, no database and starts no process.
//!
//! ```
//! use nuon_core::{ExecJob, Job, JobId, JobSpec, OrgId, OrgSigningKey, RunnerId};
//!
//! let key = OrgSigningKey::generate();
//! let spec = JobSpec {
//!     job_id: JobId::generate(),
//!     org_id: OrgId::generate(),
//!     runner_id: RunnerId::generate(),
//!     kind: ExecJob::KIND.into(),
//!     payload: serde_json::to_value(ExecJob {
//!         command: "echo".into(),
//!         args: vec!["hello".into()],
//!         env: Default::default(),
//!         dir: None,
//!         outputs_file: false,
//!     })?,
//!     timeout_secs: 60,
//!     retry: Default::default(),
//!     created_at_ms: 0,
//!     redact: Vec::new(),
//!     role: None,
//!     sandbox: Default::default(),
//!     customer_secrets: Vec::new(),
//! };
//! let bytes = serde_json::to_vec(&spec)?;
//! let signature = key.sign_now(&bytes);
//! key.public_key().verify(&bytes, &signature)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod app;
pub mod artifact;
pub mod audit;
pub mod cron;
mod duration;
pub mod endpoint;
mod id;
mod job;
#[cfg(feature = "policies")]
pub mod kyverno;
pub mod labels;
mod manifests;
pub mod metrics;
pub mod model;
mod plugin;
pub mod policy;
pub mod private;
pub mod records;
pub mod redact;
pub mod rendered;
pub mod rollout;
mod signing;
pub mod stack;
pub use nuon_template as template;
pub mod token;
mod transport;
pub mod version;
pub mod wasm;
pub mod webhook;
pub mod wire;
pub mod workflow;

pub use duration::parse_duration;
pub use id::{
    AppId, CROCKFORD, DeliveryId, IdError, InstallId, InvitationId, JobId, OrgId, ReleaseId,
    RolloutId, RunnerId, TokenId, UserId, WebhookId, WorkflowId, random_below, random_bytes,
};
pub use job::{
    ACTION_OUTPUTS_VAR, ArtifactRef, BuildJob, BuildSource, DebugJob, ExecJob, HealthJob,
    HelmAction, HelmJob, HttpBackend, ImageRef, Job, JobResult, JobRole, JobSandbox, JobSpec,
    JobStatus, KubernetesJob, KustomizeBuild, Outcome, Package, PayloadError, PulumiAction,
    PulumiJob, RetryPolicy, SourceFileContents, SyncJob, TerraformAction, TerraformJob,
    parse_action_outputs,
};
pub use plugin::{
    HostError, ImageRoots, JobHost, LimitHit, Plugin, PluginError, PreparedRoot, ProcessExit,
    ProcessSpec, STDERR_TAIL_LINES, StopReason,
};
pub use signing::{
    Grant, KeyRefused, KeyRotation, Learned, OrgSigningKey, PublicKey, SignatureError, Signed,
    SignedRotation, Signer, SignerError, TrustedKeys, hmac_sha256,
};
pub use transport::{Transport, TransportError};

/// Set by a process that starts ours and wants them gone when it is
/// (`nuon dev`), to its own pid: each of our binaries then asks the kernel
/// for SIGTERM when its parent ends, however it ends (`nuon_control::sys`,
/// `nuon_runner_lib`'s `sys`).
pub const STOP_WITH_PARENT_ENV: &str = "NUON_STOP_WITH_PARENT";

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}
