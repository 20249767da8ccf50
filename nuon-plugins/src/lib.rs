//! The built-in job plugins of the nuon runner.
//!
//! A plugin implements [`nuon_core::Plugin`] for one job kind: it checks a
//! spec before any work starts (`validate`) and turns it into processes
//! through the runner's [`nuon_core::JobHost`] (`run`). The runner library
//! owns everything around it: signature check, lease, work directory, log
//! spool, timeout and cancellation.
//!
//! Features, named after the job kinds they bring:
//!
//! - `exec` (default): [`exec::ExecPlugin`] runs one command
//!   ([`nuon_core::ExecJob`]).
//! - `terraform` (default): [`terraform::find`], the Terraform (or OpenTofu)
//!   binary that satisfies a component's `terraform_version`;
//!   [`terraform::install`], that version installed from a mirror, its
//!   signature checked ([`openpgp`]); the `terraform` job kind.
//! - `oci` (default): [`oci::LayoutStore`], the OCI image layout
//!   [`nuon_core::artifact::ArtifactStore`]; [`oci::copy`], the copy engine
//!   (blobs by digest, in parallel, resumable); [`sync::SyncPlugin`] (the
//!   `sync` job kind: an artifact copied by digest into the install's store).
//! - `registry`: OCI distribution registries as artifact stores.
//! - `helm`: the `helm` job kind, charts through the `helm` binary, and
//!   the `kubernetes_manifest` job kind, objects through `kubectl`.
//! - `pulumi`: the `pulumi` job kind, Pulumi programs through the
//!   `pulumi` binary, their stacks kept by the control plane's state
//!   backend (or the customer's own).
//! - `build` (default): [`build::BuildPlugin`], the build runner's `build`
//!   job kind.
//! - `health`: [`health::HealthPlugin`], the `health` job kind: a
//!   component's health probes after its apply.
//! - `wasm`: the `wasm` job kind, vendor plugins as WebAssembly components
//!   under wasmtime (the one feature that compiles wasmtime).
//!
//! ```
//! # #[cfg(feature = "exec")] {
//! use nuon_core::{ExecJob, Job, JobId, JobSpec, OrgId, Plugin, RunnerId};
//! use nuon_plugins::exec::ExecPlugin;
//!
//! let spec = JobSpec {
//!     job_id: JobId::generate(),
//!     org_id: OrgId::generate(),
//!     runner_id: RunnerId::generate(),
//!     kind: ExecJob::KIND.into(),
//!     payload: serde_json::json!({"command": "sh", "args": ["-c", "echo hi"]}),
//!     timeout_secs: 60,
//!     retry: Default::default(),
//!     created_at_ms: 0,
//!     redact: Vec::new(),
//!     role: None,
//!     sandbox: Default::default(),
//!     customer_secrets: Vec::new(),
//! };
//! let plugin = ExecPlugin::new();
//! assert_eq!(plugin.kind(), "exec");
//! plugin.validate(&spec).expect("sh is on PATH");
//! # }
//! ```

#[cfg(feature = "build")]
pub mod build;
#[cfg(feature = "exec")]
pub mod debug;
#[cfg(feature = "exec")]
pub mod exec;
#[cfg(feature = "health")]
pub mod health;
#[cfg(feature = "helm")]
pub mod helm;
#[cfg(feature = "helm")]
pub mod kubernetes;
#[cfg(feature = "oci")]
pub mod oci;
#[cfg(feature = "terraform")]
pub mod openpgp;
#[cfg(any(feature = "helm", feature = "terraform"))]
mod policy;
#[cfg(any(feature = "helm", feature = "pulumi", feature = "wasm"))]
mod private;
#[cfg(feature = "pulumi")]
pub mod pulumi;
#[cfg(feature = "oci")]
pub mod release;
#[cfg(feature = "oci")]
pub mod sync;
#[cfg(feature = "terraform")]
pub mod terraform;
#[cfg(feature = "wasm")]
pub mod wasm;
