//! The [`Plugin`] trait a job kind is implemented by, and the [`JobHost`]
//! the runner gives it to run processes and write the job's log.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;

use crate::job::{JobResult, JobSpec};

/// Runs the jobs of one kind on a runner.
///
/// The runner library owns everything around a job (lease, signature check,
/// work directory, log spool, timeout, cancellation); a plugin only turns a
/// spec into processes through its [`JobHost`] and a [`JobResult`].
#[async_trait]
pub trait Plugin: Send + Sync + 'static {
    /// The job kind this plugin runs, e.g. `"exec"`.
    fn kind(&self) -> &'static str;

    /// Checks the spec before any work starts (payload shape, binaries present).
    fn validate(&self, spec: &JobSpec) -> Result<(), PluginError>;

    /// Whether the kind does its work in the runner's own process and
    /// starts no process (artifact copies, WASM plugins in their own
    /// sandbox): then it needs no container image.
    fn in_process(&self) -> bool {
        false
    }

    /// Runs the job to its end.
    async fn run(&self, spec: &JobSpec, host: &mut dyn JobHost) -> Result<JobResult, PluginError>;

    /// The tool versions the plugin holds, told to the control plane with
    /// the runner's figures; called before each claim, so it must be cheap.
    fn tools(&self) -> Vec<crate::wire::ToolHeld> {
        Vec::new()
    }
}

/// Why a plugin could not run a job. The runner fails the job with this text
/// as its reason and writes it to the job's log.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    /// The payload is not valid for this kind.
    #[error("invalid job: {0}")]
    Invalid(String),
    /// Something the job needs is missing on the runner (a binary, a file).
    #[error("{0}")]
    Missing(String),
    /// The host could not run a process.
    #[error(transparent)]
    Host(#[from] HostError),
}

/// A process for the host to run in its own process group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSpec {
    /// The program: a path, or a name to look up on `PATH`.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Environment added to the runner's job environment.
    pub env: BTreeMap<String, String>,
    /// Working directory; relative paths are inside the job's work directory.
    pub cwd: Option<PathBuf>,
    /// Write the process's stdout to this file (relative paths are inside
    /// the job's work directory) instead of the log: for output a plugin
    /// reads back, like `terraform output -json`. Stderr still goes to the
    /// log.
    pub stdout_file: Option<PathBuf>,
}

impl ProcessSpec {
    /// A process running `program` with no arguments.
    pub fn new(program: impl Into<PathBuf>) -> Self {
        ProcessSpec {
            program: program.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            stdout_file: None,
        }
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }
}

/// Why the host stopped a process before it ended by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The job was cancelled through the API.
    Cancelled,
    /// The job reached its timeout.
    TimedOut,
    /// The attempt's lease was lost to a newer attempt.
    Stale,
    /// The runner is shutting down and the drain bound passed.
    Shutdown,
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessExit {
    /// It exited with this code.
    Exited(i32),
    /// A signal it did not expect ended it.
    Signaled(i32),
    /// The host stopped it (and every process of its group).
    Stopped(StopReason),
    /// The kernel stopped it at one of the job's limits (in a container).
    Limited(LimitHit),
}

/// A limit of a job's container that the kernel enforced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitHit {
    /// The memory limit: the kernel's OOM killer ended the process.
    Memory {
        /// The limit, in bytes.
        limit_bytes: u64,
    },
    /// The limit on processes: a `fork` failed, and the process ended.
    Pids {
        /// The limit.
        limit: u64,
    },
}

impl std::fmt::Display for LimitHit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LimitHit::Memory { limit_bytes } => write!(
                f,
                "out of memory: killed at the job's memory limit of {} MiB (raise it with the job's memory limit or the runner's --job-memory)",
                limit_bytes / (1024 * 1024)
            ),
            LimitHit::Pids { limit } => write!(
                f,
                "the job reached its limit of {limit} processes and could start no more (a fork bomb, or too many processes at once; the runner's --job-pids)"
            ),
        }
    }
}

/// The failure to start or watch a process.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    /// The program could not be started.
    #[error("could not start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Reading the process's output or waiting for it failed.
    #[error("i/o error while running {program}: {source}")]
    Io {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// What the runner lends a plugin while it runs one job.
#[async_trait]
pub trait JobHost: Send {
    /// The job's own temporary work directory, removed after the job.
    fn work_dir(&self) -> &Path;

    /// Writes a line to the job's log on the `system` stream.
    fn log(&mut self, text: &str);

    /// Runs a process in its own process group, its stdout and stderr going to
    /// the job's log line by line, and waits for it. The host stops it (the
    /// whole group: SIGTERM, a grace period, SIGKILL) on cancellation,
    /// timeout or a lost lease, and reports that as [`ProcessExit::Stopped`].
    async fn run_process(&mut self, process: ProcessSpec) -> Result<ProcessExit, HostError>;

    /// Why the job must stop now (cancelled, timed out, lease lost, runner
    /// shutting down), if it must: for plugins that work in-process, which
    /// check it while they run.
    fn stop_requested(&mut self) -> Option<StopReason> {
        None
    }

    /// The last lines (at most [`STDERR_TAIL_LINES`]) the latest process
    /// wrote to stderr, redacted as in the log: what a failure's reason
    /// quotes. Empty where the host does not keep them.
    fn stderr_tail(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// Whether the job's processes run in a container from the job's tool
    /// image rather than on the runner's host: then programs are those of
    /// the image, found with [`JobHost::find_program`].
    fn isolated(&self) -> bool {
        false
    }

    /// Where a program called `name` is for the job's processes when they
    /// are [isolated](JobHost::isolated): its path inside the container,
    /// found on the image's `PATH`. `None` on a host that does not isolate.
    fn find_program(&self, name: &str) -> Option<PathBuf> {
        let _ = name;
        None
    }
}

/// Root filesystems of tool images for jobs in containers: each image
/// fetched from the install's store, every layer checked against its
/// digests, and unpacked once per digest.
#[async_trait]
pub trait ImageRoots: Send + Sync {
    /// The root filesystem of `image`, ready to be the read-only lower
    /// layer of a job's container; it stays in place at least while the
    /// returned value lives.
    async fn prepare(&self, image: &crate::job::ImageRef) -> Result<PreparedRoot, String>;
}

/// An unpacked image, kept while this value lives.
pub struct PreparedRoot {
    /// The directory holding the image's files.
    pub rootfs: PathBuf,
    /// The image's own environment (`KEY=VALUE`, from its config).
    pub env: Vec<String>,
    /// Whether this call unpacked it (the first job of this digest).
    pub unpacked: bool,
    /// Whether this call first synced it into the install's store.
    pub synced: bool,
    /// Held while a job uses the image; dropping it lets the cache evict.
    pub lease: Box<dyn std::any::Any + Send + Sync>,
}

impl std::fmt::Debug for PreparedRoot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedRoot")
            .field("rootfs", &self.rootfs)
            .field("env", &self.env)
            .field("unpacked", &self.unpacked)
            .field("synced", &self.synced)
            .finish_non_exhaustive()
    }
}

/// How many of a process's last stderr lines a host keeps for
/// [`JobHost::stderr_tail`].
pub const STDERR_TAIL_LINES: usize = 40;
