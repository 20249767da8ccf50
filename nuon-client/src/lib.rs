//! Typed async clients of the nuon control plane.
//!
//! - [`ControlClient`]: the Control API a vendor drives (runners, jobs, logs),
//!   authenticated with an org API token.
//! - [`RunnerClient`]: the Runner API, authenticated with a runner token; it
//!   implements [`nuon_core::Transport`], which is how `nuon-runner-lib` uses it.
//!
//! Both go through one `reqwest` client each (keep-alive, HTTP/2 over TLS by
//! ALPN), honour `HTTPS_PROXY`/`HTTP_PROXY`/`NO_PROXY`, and accept a custom CA
//! bundle.
//!
//! Its one feature, `policies` (on by default), checks an app directory's
//! Rego and Kyverno policies before a sync ([`app_dir`]) with nuon-core's
//! policy engines. A tool that only calls the APIs can leave it out
//! (`default-features = false`): no policy engine is linked, and an app
//! directory with policies is refused before it is sent.
//!
//! ```no_run
//! # async fn demo() -> Result<(), nuon_client::Error> {
//! use nuon_client::{ClientConfig, ControlClient};
//! use nuon_core::wire::CreateJob;
//!
//! let client = ControlClient::new(ClientConfig::new("http://127.0.0.1:7400", "tok_...")?)?;
//! let job = client
//!     .create_job(&CreateJob {
//!         runner: "install-1".into(),
//!         kind: "exec".into(),
//!         payload: serde_json::json!({"command": "echo", "args": ["hi"]}),
//!         timeout_secs: None,
//!         max_attempts: None,
//!     sandbox: None,
//!     })
//!     .await?;
//! let mut logs = client.follow_logs(&job.id, 0);
//! while let Some(line) = logs.next().await? {
//!     println!("{}", line.text);
//! }
//! # Ok(()) }
//! ```

pub mod app_dir;
mod config;
mod control;
mod error;
mod http;
mod runner;

pub use config::ClientConfig;
pub use control::{ControlClient, LogFollower};
pub use error::{Error, Result};
pub use runner::{RunnerClient, phone_home, session_of_this_process};
