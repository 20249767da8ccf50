//! The [`JobHost`] the runner lends a plugin: runs processes in their own
//! process group, captures their output into the spool line by line, and
//! stops them (SIGTERM, a grace period, SIGKILL of the whole group) on
//! cancellation, timeout, a lost lease or shutdown.

use std::collections::BTreeMap;
use std::io::{self, PipeReader, Read};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use nuon_core::wire::{LogStream, MAX_LOG_LINE_BYTES};
use nuon_core::{HostError, JobHost, ProcessExit, ProcessSpec, StopReason};
use tokio::sync::oneshot;
use tokio::sync::watch;
use tokio::time::{Instant, sleep_until};

use crate::container::{Container, ContainerProcess, JobContainers, LimitsHit};
use crate::orphan::OrphanGuard;
use crate::spool::{SharedSpool, SpoolWriter};
use crate::sys;

/// The pipe buffer asked for each output stream (see [`sys::grow_pipe`]).
const PIPE_SIZE: usize = 1024 * 1024;
/// How much output is read at once from each pipe.
const READ_CHUNK: usize = 256 * 1024;
/// How often a pump waiting for output checks that it is still wanted.
const PUMP_POLL: Duration = Duration::from_millis(250);
/// How long a pump that found only a little output waits before it looks
/// again, so that a job writing its lines one small `write` at a time is
/// read in large batches rather than woken for at every line. Only with
/// pipes of [`PIPE_SIZE`]: a job would need more than 2 GB/s to fill one in
/// this time. Nothing is shipped more often than every 50 ms anyway.
const PUMP_COALESCE: Duration = Duration::from_micros(500);
/// How long to keep reading pipes after the process group was killed: a
/// process that left the group may hold them open forever.
const PIPE_DRAIN: Duration = Duration::from_secs(2);

/// A duration too long to wait for (about 30 years).
const FOREVER: Duration = Duration::from_secs(30 * 365 * 86_400);

/// The instant `d` from now, or a far future one when `d` is absurdly long.
pub(crate) fn deadline_in(d: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(d).unwrap_or_else(|| now + FOREVER)
}

/// Everything a job's processes need from the runner.
pub(crate) struct ProcessHost {
    pub(crate) work_dir: PathBuf,
    pub(crate) spool: SharedSpool,
    pub(crate) stop: watch::Receiver<Option<StopReason>>,
    pub(crate) deadline: Instant,
    pub(crate) timeout: Duration,
    pub(crate) grace: Duration,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) guard: Arc<OrphanGuard>,
    /// Why the host stopped the job's processes, once it did.
    pub(crate) stopped: Option<StopReason>,
    /// Under `--isolation container`: the job's image and limits; each
    /// process then runs in a container of its own.
    pub(crate) containers: Option<JobContainers>,
}

/// Kills a process group and unregisters it from the orphan guard when
/// dropped, so no group outlives its `run_process`, even a cancelled one.
struct GroupGuard {
    pgid: u32,
    guard: Arc<OrphanGuard>,
    /// The container the group's `runc` runs, removed first.
    container: Option<Container>,
}

impl GroupGuard {
    /// The container's process ended: the limit the kernel stopped it at,
    /// if any; the container is removed.
    fn finish_container(&mut self) -> LimitsHit {
        let Some(c) = self.container.take() else {
            return LimitsHit::default();
        };
        let id = c.id.clone();
        let hit = c.finish();
        self.guard.remove_container(&id);
        hit
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(c) = self.container.take() {
            let id = c.id.clone();
            drop(c);
            self.guard.remove_container(&id);
        }
        if let Err(e) = sys::kill_group(self.pgid, sys::SIGKILL) {
            tracing::warn!(pgid = self.pgid, error = %e, "cannot kill a job's process group");
        }
        self.guard.remove(self.pgid);
    }
}

/// Cuts pipe output into lines.
struct LineSplitter {
    stream: LogStream,
    partial: Vec<u8>,
}

impl LineSplitter {
    fn new(stream: LogStream) -> Self {
        LineSplitter {
            stream,
            partial: Vec::new(),
        }
    }

    fn push(&mut self, mut data: &[u8], spool: &mut SpoolWriter) {
        let ts = nuon_core::now_ms();
        if !self.partial.is_empty() {
            // The end of the line started by an earlier read.
            let Some(i) = memchr::memchr(b'\n', data) else {
                self.partial.extend_from_slice(data);
                self.cut_long(ts, spool);
                return;
            };
            self.partial.extend_from_slice(&data[..i]);
            spool.append_bytes(self.stream, ts, &self.partial);
            self.partial.clear();
            data = &data[i + 1..];
        }
        let complete = memchr::memrchr(b'\n', data).map_or(0, |i| i + 1);
        spool.append_lines(self.stream, ts, &data[..complete]);
        self.partial.extend_from_slice(&data[complete..]);
        self.cut_long(ts, spool);
    }

    /// Cuts a line longer than the limit, at a UTF-8 boundary when the
    /// bytes are UTF-8.
    fn cut_long(&mut self, ts: i64, spool: &mut SpoolWriter) {
        while self.partial.len() >= MAX_LOG_LINE_BYTES {
            let mut cut = MAX_LOG_LINE_BYTES;
            while cut > MAX_LOG_LINE_BYTES - 3 && (self.partial[cut] & 0xC0) == 0x80 {
                cut -= 1;
            }
            spool.append_bytes(self.stream, ts, &self.partial[..cut]);
            self.partial.drain(..cut);
        }
    }

    fn finish(&mut self, spool: &mut SpoolWriter) {
        if !self.partial.is_empty() {
            spool.append_bytes(self.stream, nuon_core::now_ms(), &self.partial);
            self.partial.clear();
        }
    }
}

async fn done_opt(r: &mut Option<oneshot::Receiver<()>>) {
    match r {
        Some(r) => {
            let _ = r.await;
        }
        None => std::future::pending().await,
    }
}

/// Starts the thread that drains a job's output pipes into the spool. The
/// receiver resolves when the thread has ended.
fn spawn_pump(
    pipes: Vec<(PipeReader, LogStream)>,
    coalesce: bool,
    spool: SharedSpool,
    stop: Arc<AtomicBool>,
) -> io::Result<oneshot::Receiver<()>> {
    let (done, rx) = oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("job-output".into())
        .spawn(move || {
            sys::batch_scheduling();
            pump(pipes, coalesce, &spool, &stop);
            drop(done);
        })?;
    Ok(rx)
}

fn stream_name(stream: LogStream) -> &'static str {
    match stream {
        LogStream::Stdout => "stdout",
        LogStream::Stderr => "stderr",
        LogStream::System => "system",
    }
}

/// Drains a job's pipes into the spool the way `cat > file` would: a
/// blocking wait for output, then the lines cut and appended on this
/// thread, so a chatty job never waits for the runner's async scheduler.
/// One thread for both pipes keeps the order in which the job wrote to
/// them, as far as the order can be seen: a pipe that became readable first
/// is read first, and stdout before stderr when both did at once. With
/// `coalesce` (the pipes are large), a round that found only a little
/// output is followed by a short pause ([`PUMP_COALESCE`]) while more
/// collects. Ends at end-of-file of both, or soon after `stop` is set (a
/// process that left the job's group may hold a pipe open forever).
fn pump(
    pipes: Vec<(PipeReader, LogStream)>,
    coalesce: bool,
    spool: &SharedSpool,
    stop: &AtomicBool,
) {
    let mut open: Vec<(PipeReader, LineSplitter)> = pipes
        .into_iter()
        .map(|(p, stream)| (p, LineSplitter::new(stream)))
        .collect();
    let mut buf = vec![0u8; READ_CHUNK];
    // The stream read last.
    let mut last_read: Option<LogStream> = None;
    let fail = |stream: LogStream, e: io::Error| {
        spool.lock().system(&format!(
            "cannot read the process's {}: {e}",
            stream_name(stream)
        ));
    };
    while !open.is_empty() && !stop.load(Ordering::Relaxed) {
        // Wake up when buffered lines are due on disk (and in the shipper's
        // hands), or now and then to see whether reading is still wanted.
        let wait = spool.lock().flush_deadline().map_or(PUMP_POLL, |at| {
            at.saturating_duration_since(std::time::Instant::now())
        });
        let fds: Vec<&dyn AsRawFd> = open.iter().map(|(p, _)| p as &dyn AsRawFd).collect();
        let mut ready = vec![false; fds.len()];
        match sys::wait_readable(&fds, &mut ready, wait) {
            Ok(true) => {}
            Ok(false) => {
                spool.lock().maybe_flush();
                continue;
            }
            Err(e) => {
                fail(LogStream::System, e);
                break;
            }
        }
        let mut closed = Vec::new();
        let mut trickle = coalesce;
        for (i, (pipe, lines)) in open.iter_mut().enumerate() {
            if !ready[i] {
                continue;
            }
            match pipe.read(&mut buf) {
                Ok(0) => closed.push(i),
                Ok(n) => {
                    // Only a job writing to one stream is left to collect:
                    // lines of two streams waiting together could not be
                    // told apart in time.
                    let same = last_read.replace(lines.stream) == Some(lines.stream);
                    trickle &= same && n < READ_CHUNK / 2;
                    let mut spool = spool.lock();
                    lines.push(&buf[..n], &mut spool);
                    spool.maybe_flush();
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    fail(lines.stream, e);
                    closed.push(i);
                }
            }
        }
        if !closed.is_empty() {
            trickle = false;
        }
        for i in closed.into_iter().rev() {
            let (_, mut lines) = open.remove(i);
            lines.finish(&mut spool.lock());
        }
        if trickle {
            std::thread::sleep(PUMP_COALESCE);
        }
    }
    for (_, mut lines) in open {
        lines.finish(&mut spool.lock());
    }
}

/// Where `name` is inside an image's root filesystem, on the image's
/// `PATH`: the path as the container sees it.
/// The program to spawn: a bare name found on the job's own `PATH` (as the
/// child's `execvp` would find it), else as given. With a bare name and a
/// `PATH` of the job's own, std cannot hand the spawn to `posix_spawn` (it
/// would search the runner's `PATH`) and forks the whole runner instead,
/// copying its page tables for every process of every job (about 14% of
/// the job loop's throughput, BENCHMARKS.md). As a path, the spawn is a
/// vfork.
fn on_job_path(program: &Path, path: Option<&str>, cwd: &Path) -> PathBuf {
    let bare = program.components().count() == 1 && !program.is_absolute();
    match path {
        Some(path) if bare => {
            which::which_in(program, Some(path), cwd).unwrap_or_else(|_| program.to_path_buf())
        }
        _ => program.to_path_buf(),
    }
}

fn find_in_image(rootfs: &Path, env: &[String], name: &str) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = env
        .iter()
        .find_map(|kv| kv.strip_prefix("PATH="))
        .unwrap_or("/usr/local/bin:/usr/bin:/bin");
    path.split(':')
        .filter(|d| d.starts_with('/'))
        .map(|dir| Path::new(dir).join(name))
        .find(|inside| {
            resolve_in_root(rootfs, inside)
                .and_then(|host| std::fs::metadata(host).ok())
                .is_some_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

/// The host path of `inside` (absolute, as a container sees it) in the
/// root filesystem `root`, every link resolved one component at a time
/// inside the root, never on the host. `None` past 40 links.
fn resolve_in_root(root: &Path, inside: &Path) -> Option<PathBuf> {
    use std::path::Component;
    let mut todo: Vec<std::ffi::OsString> = inside
        .components()
        .rev()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_owned()),
            Component::ParentDir => Some("..".into()),
            _ => None,
        })
        .collect();
    let mut done: Vec<std::ffi::OsString> = Vec::new();
    let mut links = 0;
    while let Some(part) = todo.pop() {
        if part == ".." {
            done.pop();
            continue;
        }
        let host: PathBuf = std::iter::once(root.as_os_str().to_owned())
            .chain(done.iter().cloned())
            .chain(std::iter::once(part.clone()))
            .collect();
        match std::fs::symlink_metadata(&host) {
            Ok(m) if m.file_type().is_symlink() => {
                links += 1;
                if links > 40 {
                    return None;
                }
                let target = std::fs::read_link(&host).ok()?;
                if target.is_absolute() {
                    done.clear();
                }
                for c in target.components().rev() {
                    match c {
                        Component::Normal(n) => todo.push(n.to_owned()),
                        Component::ParentDir => todo.push("..".into()),
                        _ => {}
                    }
                }
            }
            _ => done.push(part),
        }
    }
    Some(
        std::iter::once(root.as_os_str().to_owned())
            .chain(done)
            .collect(),
    )
}

async fn sleep_opt(at: Option<Instant>) {
    match at {
        Some(at) => sleep_until(at).await,
        None => std::future::pending().await,
    }
}

fn describe(reason: StopReason, timeout: Duration) -> String {
    match reason {
        StopReason::Cancelled => "job cancelled".into(),
        StopReason::TimedOut => format!("job timed out after {}s", timeout.as_secs()),
        StopReason::Stale => "the attempt's lease was lost".into(),
        StopReason::Shutdown => "the runner is shutting down".into(),
    }
}

impl ProcessHost {
    /// A stop already requested, or the timeout already passed.
    fn pending_stop(&mut self) -> Option<StopReason> {
        if self.stopped.is_none() {
            self.stopped = *self.stop.borrow();
        }
        if self.stopped.is_none() && Instant::now() >= self.deadline {
            self.stopped = Some(StopReason::TimedOut);
        }
        self.stopped
    }

    fn exit_of(status: ExitStatus) -> ProcessExit {
        use std::os::unix::process::ExitStatusExt;
        match (status.code(), status.signal()) {
            (Some(code), _) => ProcessExit::Exited(code),
            (None, Some(sig)) => ProcessExit::Signaled(sig),
            (None, None) => ProcessExit::Exited(-1),
        }
    }
}

#[async_trait]
impl JobHost for ProcessHost {
    fn work_dir(&self) -> &Path {
        &self.work_dir
    }

    fn stop_requested(&mut self) -> Option<StopReason> {
        self.pending_stop()
    }

    fn log(&mut self, text: &str) {
        self.spool.lock().system(text);
    }

    fn stderr_tail(&mut self) -> Vec<String> {
        self.spool.lock().take_stderr_tail()
    }

    fn isolated(&self) -> bool {
        self.containers.is_some()
    }

    fn find_program(&self, name: &str) -> Option<PathBuf> {
        let job = self.containers.as_ref()?;
        find_in_image(&job.root.rootfs, &job.root.env, name)
    }

    async fn run_process(&mut self, process: ProcessSpec) -> Result<ProcessExit, HostError> {
        let program = process.program.display().to_string();
        if let Some(reason) = self.pending_stop() {
            return Ok(ProcessExit::Stopped(reason));
        }
        let cwd = match &process.cwd {
            Some(dir) => self.work_dir.join(dir),
            None => self.work_dir.clone(),
        };
        // The tail a failure quotes is this process's alone.
        drop(self.spool.lock().take_stderr_tail());
        let (mut cmd, container) = match &self.containers {
            None => {
                let path = process.env.get("PATH").or_else(|| self.env.get("PATH"));
                let exe = on_job_path(&process.program, path.map(String::as_str), &cwd);
                let mut cmd = tokio::process::Command::new(exe);
                cmd.args(&process.args)
                    .env_clear()
                    .envs(&self.env)
                    .envs(&process.env)
                    .current_dir(&cwd);
                (cmd, None)
            }
            Some(job) => {
                let mut env = self.env.clone();
                env.extend(process.env.clone());
                let (container, cmd) = job
                    .prepare(ContainerProcess {
                        program: &process.program,
                        args: &process.args,
                        env,
                        cwd: &cwd,
                        work_dir: &self.work_dir,
                    })
                    .map_err(|e| HostError::Spawn {
                        program: program.clone(),
                        source: std::io::Error::other(e),
                    })?;
                (cmd, Some(container))
            }
        };
        cmd.stdin(Stdio::null())
            .process_group(0)
            .kill_on_drop(false);
        let io_err = |source| HostError::Io {
            program: program.clone(),
            source,
        };
        let mut pipes = Vec::new();
        let mut grown = true;
        match &process.stdout_file {
            // Stdout goes straight to the file the plugin reads back.
            Some(path) => {
                let path = self.work_dir.join(path);
                let file = std::fs::File::create(&path).map_err(|e| HostError::Io {
                    program: program.clone(),
                    source: std::io::Error::new(
                        e.kind(),
                        format!(
                            "cannot create {} for the process's output: {e}",
                            path.display()
                        ),
                    ),
                })?;
                cmd.stdout(file);
            }
            None => {
                let (out_r, out_w) = std::io::pipe().map_err(io_err)?;
                grown &= sys::grow_pipe(&out_r, PIPE_SIZE);
                cmd.stdout(out_w);
                pipes.push((out_r, LogStream::Stdout));
            }
        }
        let (err_r, err_w) = std::io::pipe().map_err(io_err)?;
        grown &= sys::grow_pipe(&err_r, PIPE_SIZE);
        cmd.stderr(err_w);
        pipes.push((err_r, LogStream::Stderr));
        // The watchdog knows the container before it exists: a runner
        // killed right after the spawn leaves none behind.
        let container_id = container.as_ref().map(|c| c.id.clone());
        if let Some(id) = &container_id {
            self.guard.add_container(id);
        }
        let spawned = cmd.spawn();
        // The command holds our copies of the write ends: without dropping
        // it, the pipes would never reach end-of-file.
        drop(cmd);
        let started = spawned.map_err(|source| HostError::Spawn {
            program: program.clone(),
            source,
        });
        let (mut child, pgid) = match started.and_then(|child| match child.id() {
            Some(pgid) => Ok((child, pgid)),
            None => Err(HostError::Io {
                program: program.clone(),
                source: std::io::Error::other("the process has no id right after it started"),
            }),
        }) {
            Ok(started) => started,
            Err(e) => {
                drop(container);
                if let Some(id) = &container_id {
                    self.guard.remove_container(id);
                }
                return Err(e);
            }
        };
        self.guard.add(pgid);
        let mut group = GroupGuard {
            pgid,
            guard: self.guard.clone(),
            container,
        };
        let runtime = self.containers.as_ref().map(|c| c.runtime.clone());
        tracing::debug!(pgid, %program, "started job process");

        let stop_pump = Arc::new(AtomicBool::new(false));
        let pump =
            spawn_pump(pipes, grown, self.spool.clone(), stop_pump.clone()).map_err(|source| {
                HostError::Io {
                    program: program.clone(),
                    source,
                }
            })?;
        let mut pump = Some(pump);
        let mut status: Option<ExitStatus> = None;
        let mut stopping: Option<StopReason> = None;
        let mut kill_at: Option<Instant> = None;
        let mut drain_until: Option<Instant> = None;
        let mut stop_open = true;
        let deadline = self.deadline;

        loop {
            if status.is_some() && pump.is_none() {
                break;
            }
            let running = status.is_none();
            let mut begin_stop = None;
            tokio::select! {
                () = done_opt(&mut pump) => pump = None,
                r = child.wait(), if running => {
                    let st = r.map_err(|source| HostError::Io { program: program.clone(), source })?;
                    status = Some(st);
                    // No process of the job outlives its main process.
                    if let Err(e) = sys::kill_group(pgid, sys::SIGKILL) {
                        tracing::warn!(pgid, error = %e, "cannot kill a job's process group");
                    }
                    drain_until = Some(Instant::now() + PIPE_DRAIN);
                },
                r = self.stop.changed(), if running && stop_open && stopping.is_none() => match r {
                    Ok(()) => begin_stop = *self.stop.borrow_and_update(),
                    Err(_) => stop_open = false,
                },
                () = sleep_until(deadline), if running && stopping.is_none() => {
                    begin_stop = Some(StopReason::TimedOut);
                },
                () = sleep_opt(kill_at), if running => {
                    kill_at = None;
                    self.spool.lock().system(&format!(
                        "processes still running {}s after SIGTERM: sending SIGKILL to {}",
                        self.grace.as_secs_f64(),
                        if runtime.is_some() { "the container's processes" } else { "the process group" }
                    ));
                    let by_runc = match (&runtime, &container_id) {
                        (Some(rt), Some(id)) => rt.signal(id, "KILL").await,
                        _ => false,
                    };
                    // Not created yet (or no container): the group, runc
                    // included; a container it made is deleted after.
                    if !by_runc && let Err(e) = sys::kill_group(pgid, sys::SIGKILL) {
                        tracing::warn!(pgid, error = %e, "cannot kill a job's process group");
                    }
                    if runtime.is_some() {
                        // Until the process is gone: again after a grace.
                        kill_at = Some(deadline_in(self.grace));
                    }
                },
                () = sleep_opt(drain_until) => {
                    tracing::warn!(pgid, %program, "job output pipes still open after its process group was killed; a process left the group");
                    self.spool.lock().system("output pipes still held open by a process that left the job's process group; stopped reading them");
                    break;
                },
            }
            if let Some(reason) = begin_stop {
                stopping = Some(reason);
                self.stopped = Some(reason);
                self.spool.lock().system(&format!(
                    "{}: sending SIGTERM to the job's processes, SIGKILL after {}s",
                    describe(reason, self.timeout),
                    self.grace.as_secs_f64()
                ));
                let by_runc = match (&runtime, &container_id) {
                    (Some(rt), Some(id)) => rt.signal(id, "TERM").await,
                    _ => false,
                };
                // runc forwards SIGTERM to the container's first process.
                if !by_runc && let Err(e) = sys::kill_group(pgid, sys::SIGTERM) {
                    tracing::warn!(pgid, error = %e, "cannot signal a job's process group");
                }
                kill_at = Some(deadline_in(self.grace));
            }
        }
        stop_pump.store(true, Ordering::Relaxed);
        self.spool.lock().flush();
        let hit = group.finish_container();
        drop(group);
        if runtime.is_some() {
            // Before the runner touches the work directory again.
            let removed = crate::container::remove_escaping_links(&self.work_dir);
            if !removed.is_empty() {
                self.spool.lock().system(&format!(
                    "removed links the job left that lead out of its work directory or nowhere: {}",
                    removed.join(", ")
                ));
            }
        }
        let status = status.expect("the loop ends only after the process exited");
        // From a container, runc's exit code: 128 + N after signal N, as a
        // shell reports it.
        let ended = Self::exit_of(status);
        // An OOM kill is the failure; a refused fork is when the process
        // did not succeed (a tool may retry one and carry on).
        let exit = match (stopping, hit.memory, hit.pids) {
            (Some(reason), _, _) => ProcessExit::Stopped(reason),
            (None, Some(hit), _) => ProcessExit::Limited(hit),
            (None, None, Some(hit)) if ended != ProcessExit::Exited(0) => ProcessExit::Limited(hit),
            (None, None, Some(hit)) => {
                self.spool
                    .lock()
                    .system(&format!("{hit}; the process still succeeded"));
                ended
            }
            (None, None, None) => ended,
        };
        tracing::debug!(pgid, %program, ?exit, "job process ended");
        Ok(exit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_program_is_found_on_the_jobs_own_path() {
        let cwd = Path::new("/");
        let found = on_job_path(Path::new("sh"), Some("/nowhere:/usr/bin:/bin"), cwd);
        assert!(
            found.is_absolute() && found.ends_with("sh"),
            "{}",
            found.display()
        );
        // Paths, names found nowhere and no PATH are left to the spawn.
        for (program, path) in [
            ("./run.sh", Some("/bin")),
            ("/bin/sh", Some("/nowhere")),
            ("no-such-program-here", Some("/bin")),
            ("sh", None),
        ] {
            assert_eq!(
                on_job_path(Path::new(program), path, cwd),
                Path::new(program)
            );
        }
    }

    #[test]
    fn programs_are_found_in_the_image_with_its_links_resolved_inside_it() {
        use std::os::unix::fs::{PermissionsExt, symlink};
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("rootfs");
        std::fs::create_dir_all(root.join("usr/bin")).unwrap();
        let tool = root.join("usr/bin/busybox");
        std::fs::write(&tool, "").unwrap();
        std::fs::set_permissions(&tool, std::fs::Permissions::from_mode(0o755)).unwrap();
        // /bin is an absolute link, as in merged-/usr images.
        symlink("/usr/bin", root.join("bin")).unwrap();
        symlink("busybox", root.join("usr/bin/sh")).unwrap();
        symlink("../../etc/passwd", root.join("usr/bin/escape")).unwrap();
        symlink("/bin/loop", root.join("usr/bin/loop")).unwrap();
        let env = ["PATH=/bin".to_owned()];
        assert_eq!(
            find_in_image(&root, &env, "sh"),
            Some(PathBuf::from("/bin/sh"))
        );
        assert_eq!(
            resolve_in_root(&root, Path::new("/bin/sh")),
            Some(root.join("usr/bin/busybox"))
        );
        // `..` stops at the image's root, never the host's.
        assert_eq!(
            resolve_in_root(&root, Path::new("/usr/bin/escape")),
            Some(root.join("etc/passwd"))
        );
        assert_eq!(find_in_image(&root, &env, "escape"), None);
        assert_eq!(resolve_in_root(&root, Path::new("/usr/bin/loop")), None);
        assert_eq!(find_in_image(&root, &env, "missing"), None);
    }
}
