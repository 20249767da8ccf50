//! Where tenant-driven work runs: templates rendered for a job or a stack,
//! config diffs. Off the async runtime's worker threads (so `/healthz`,
//! the Control API and the Runner API keep answering while a tenant's
//! template spends its budget), and a few at a time (so one org cannot
//! take every thread).

use std::sync::OnceLock;

use tokio::runtime::{Handle, RuntimeFlavor};
use tokio::sync::Semaphore;

/// How many renders run at once.
const SLOTS: usize = 2;

fn slots() -> &'static Semaphore {
    static SLOTS_: OnceLock<Semaphore> = OnceLock::new();
    SLOTS_.get_or_init(|| Semaphore::new(SLOTS))
}

/// Runs `f` on the blocking pool, once a slot is free; `Err` with the
/// panic's words when it panicked.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, String> {
    let _slot = slots().acquire().await.map_err(|e| e.to_string())?;
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| format!("a render failed: {e}"))
}

/// Runs `f`, which borrows from its caller, once a slot is free, with the
/// worker thread it runs on handed over to the runtime's other tasks
/// meanwhile (`block_in_place`); on a single-threaded runtime (tests), in
/// place.
pub(crate) async fn in_place<T>(f: impl FnOnce() -> T) -> T {
    let _slot = slots().acquire().await;
    match Handle::current().runtime_flavor() {
        RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}
