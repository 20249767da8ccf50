//! The nuon control plane.
//!
//! It queues jobs for runners and never connects to one: runners long-poll
//! the Runner API, hold each job under a lease fenced by its attempt number,
//! stream logs that are stored exactly once, and complete idempotently.
//! Vendors drive it through the Control API with org-scoped API tokens.
//!
//! - [`store`]: the [`Store`](store::Store) traits, by domain, and their
//!   SQLite and (feature `postgres`) PostgreSQL implementations.
//! - [`ControlPlane`]: opens a data dir (an [`OpenStore`]) and serves both
//!   APIs; the workflow engine runs inside it, below the APIs.
//! - [`sys`]: the listen backlog and open-files limit a fleet needs.
//!
//! ```no_run
//! # async fn demo() -> Result<(), nuon_control::Error> {
//! use nuon_control::{ControlPlane, ServerConfig};
//!
//! let plane = ControlPlane::open(ServerConfig::new("./nuon-data")).await?;
//! let control = tokio::net::TcpListener::bind("127.0.0.1:7400").await?;
//! let runner = tokio::net::TcpListener::bind("127.0.0.1:7401").await?;
//! plane.serve(control, runner, async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```

mod api;
pub mod backup;
mod desired;
mod engine;
mod error;
mod health;
mod hub;
pub mod keys;
mod listen;
mod oidc;
mod ops;
mod private;
mod render_pool;
pub mod reseal;
pub mod s3;
pub mod secrets;
mod server;
mod service;
pub mod store;
pub mod sys;
mod throttle;
pub mod tls;

pub use api::openapi;

pub use api::Timings;
pub use error::{Error, Result};
pub use listen::ConnLimits;
pub use oidc::OidcConfig;
pub use ops::{Auditor, OpsConfig};
pub use private::{ADMIN_TOKEN_FILE, BUILD_RUNNER_TOKEN_FILE, SIGNING_KEY_FILE};
pub use server::{ControlPlane, OpenStore, ServerConfig};
pub use throttle::ThrottleConfig;
