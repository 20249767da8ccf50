//! The one error type of the runner library.

use std::path::PathBuf;

use nuon_core::TransportError;

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why the runner could not start, or why it stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The configuration cannot work (no slots, a token not of the runner form, ...).
    #[error("invalid runner configuration: {0}")]
    Config(String),
    /// The HTTP client of the control plane could not be built.
    #[error("cannot set up the control plane client: {0}")]
    Client(#[source] nuon_client::Error),
    /// A file or directory under the work directory could not be used.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What the runner tried to do, e.g. "create the spool directory".
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Another runner process already uses this work directory.
    #[error(
        "work directory {} is in use by another runner process (it holds {}); \
         give each runner its own work directory",
        work_dir.display(),
        lock.display()
    )]
    WorkDirInUse {
        /// The work directory.
        work_dir: PathBuf,
        /// The lock file another process holds.
        lock: PathBuf,
    },
    /// The orphan guard (a `sh` watchdog) could not be started.
    #[error(
        "cannot start the orphan guard (`sh`, which kills job processes if the runner dies): {0}"
    )]
    OrphanGuard(#[source] std::io::Error),
    /// The control plane refused the runner: its token was revoked or is
    /// wrong, or another process of the runner uses it.
    #[error("the control plane refused this runner; it stops: {0}")]
    Unauthorized(#[source] TransportError),
}
