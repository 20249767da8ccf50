//! Test support: build and start the real binaries on loopback, drive them,
//! and clean up after. Every wait is bounded, so a broken build fails a test
//! instead of hanging it.
//!
//! The fixtures unit tests need too (a throwaway PostgreSQL cluster, the
//! rule for missing tools) live in the light `nuon-test-fixtures` crate and
//! are re-exported here.
#![allow(missing_docs, unsafe_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nuon_client::{ClientConfig, ControlClient};
use nuon_core::JobId;
use nuon_core::wire::{JobInfo, LogEntry};
pub use nuon_test_fixtures::{PgCluster, have_python_module, have_tool, require_all};

mod binaries;
mod net;
mod plugins;
mod records;
mod registry;
mod serve;
pub mod webdriver;

pub use binaries::*;
pub use net::*;
pub use plugins::*;
pub use records::*;
pub use registry::*;
pub use serve::*;

/// Waits until `f` returns `Some`, checking every 20 ms, for at most `limit`.
pub fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> Result<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if start.elapsed() > limit {
            bail!("timed out after {limit:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn process_alive(pid: i32) -> bool {
    // A zombie is dead for our purposes.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a pid we started; no memory is involved.
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

/// Sends `sig` to every process of the group `pgid` (a group this test
/// started with `process_group(0)`). Groups 0 and 1 are refused: they
/// would reach far more than the test's own processes.
pub fn signal_group(pgid: u32, sig: i32) {
    let pgid = i32::try_from(pgid).unwrap_or(0);
    assert!(pgid > 1, "refusing to signal process group {pgid}");
    // SAFETY: kill(2) with a negative pid (a group the test started); no
    // memory is involved.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// One shared tokio runtime for the async client in sync tests. Shared, so
/// a client's pooled connections outlive each `block_on`.
pub fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// Waits (by following the job's log to its end) until the job finishes.
pub fn wait_job(client: &ControlClient, id: &JobId, limit: Duration) -> Result<JobInfo> {
    rt().block_on(async {
        tokio::time::timeout(limit, async {
            let mut f = client.follow_logs(id, 0);
            while f.next().await?.is_some() {}
            loop {
                let job = client.get_job(id).await?;
                if job.status.is_terminal() {
                    return Ok::<_, anyhow::Error>(job);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .with_context(|| format!("job {id} did not finish within {limit:?}"))?
    })
}

/// Every log line of a job.
pub fn all_logs(client: &ControlClient, id: &JobId) -> Result<Vec<LogEntry>> {
    rt().block_on(async {
        let mut out = Vec::new();
        let mut cursor = 0;
        loop {
            let page = client.job_logs(id, cursor).await?;
            if page.lines.is_empty() {
                return Ok(out);
            }
            cursor = page.next;
            out.extend(page.lines);
        }
    })
}

/// Reads a pid a job wrote into `path`, waiting for it to appear.
pub fn read_pid(path: &Path) -> Result<i32> {
    wait_for("the job to write its pid", Duration::from_secs(20), || {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    })
}
