//! The few calls into libc the runner needs. This is the only module with
//! `unsafe` code; each call is a plain system call on integers or a file
//! descriptor this process owns.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::time::Duration;

pub(crate) use libc::{SIGKILL, SIGTERM};

/// Writes `text` to `path`, readable by its owner only, atomically (a
/// temporary file renamed over it).
pub(crate) fn write_private(path: &std::path::Path, text: &str) -> io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    // Next to it, named after all of it: `a.b` and `a.c` never share one.
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(text.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Sends `signal` to every process of the process group `pgid`. Returns
/// `Ok(false)` when the group no longer exists.
pub(crate) fn kill_group(pgid: u32, signal: libc::c_int) -> io::Result<bool> {
    // A process group id of 0 or 1 would signal our own group or every
    // process we may signal: never do that.
    let pgid = libc::pid_t::try_from(pgid)
        .ok()
        .filter(|p| *p > 1)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                "refusing to signal process group <= 1",
            )
        })?;
    // SAFETY: kill(2) takes two integers and touches no memory of ours; a
    // negative pid addresses the process group, which we checked is > 1.
    let rc = unsafe { libc::kill(-pgid, signal) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::ESRCH) {
        Ok(false)
    } else {
        Err(err)
    }
}

/// Takes an exclusive advisory lock on `file` without waiting. Returns
/// `Ok(false)` when another process holds it. The lock lasts as long as the
/// file stays open.
pub(crate) fn try_lock_exclusive(file: &File) -> io::Result<bool> {
    // SAFETY: flock(2) on a file descriptor that `file` owns and keeps open
    // for the duration of the call; no memory is passed.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    if err.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Ok(false)
    } else {
        Err(err)
    }
}

/// Waits up to `timeout` until one of `fds` has data to read or is closed,
/// and sets `ready[i]` for each that has. Returns `false` when the time ran
/// out (or a signal interrupted the wait).
pub(crate) fn wait_readable(
    fds: &[&dyn AsRawFd],
    ready: &mut [bool],
    timeout: Duration,
) -> io::Result<bool> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    let n = libc::nfds_t::try_from(pfds.len()).unwrap_or(0);
    // SAFETY: poll(2) on `n` pollfds that live in `pfds` for the whole call,
    // on descriptors the caller keeps open.
    let rc = unsafe { libc::poll(pfds.as_mut_ptr(), n, ms) };
    if rc < 0 {
        let err = io::Error::last_os_error();
        return if err.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(err)
        };
    }
    for (r, p) in ready.iter_mut().zip(&pfds) {
        *r = p.revents != 0;
    }
    Ok(rc > 0)
}

/// Asks the kernel for a pipe buffer of `size` bytes on Linux (the most an
/// unprivileged process may ask for is `/proc/sys/fs/pipe-max-size`, 1 MiB
/// by default). A chatty job then fills the buffer 16 times less often than
/// with the default 64 KiB, and the runner wakes up as many times less.
/// Best effort: the pipe keeps its size when the call fails. Returns whether
/// the pipe now holds at least `size` bytes.
#[cfg(target_os = "linux")]
pub(crate) fn grow_pipe(pipe: &impl AsRawFd, size: usize) -> bool {
    let want = libc::c_int::try_from(size).unwrap_or(libc::c_int::MAX);
    // SAFETY: fcntl(2) F_SETPIPE_SZ on a descriptor the caller keeps open
    // for the duration of the call; it takes an integer and no memory.
    let rc = unsafe { libc::fcntl(pipe.as_raw_fd(), libc::F_SETPIPE_SZ, want) };
    if rc < 0 {
        tracing::debug!(error = %io::Error::last_os_error(), "cannot grow a job's output pipe");
        return false;
    }
    rc >= want
}

/// Marks the calling thread as batch work for the Linux scheduler
/// (`SCHED_BATCH`): it no longer preempts a running thread when it wakes
/// up. For the thread that drains a job's output: woken by the job's every
/// write, it would otherwise keep taking the job's CPU from under it. Any
/// thread may lower itself so; best effort.
#[cfg(target_os = "linux")]
pub(crate) fn batch_scheduling() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: sched_setscheduler(2) on the calling thread (0) with a
    // parameter that lives across the call.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    if rc != 0 {
        tracing::debug!(error = %io::Error::last_os_error(), "cannot set SCHED_BATCH");
    }
}

/// Mounts an overlay filesystem at `target`: `lower` read-only beneath,
/// writes going to `upper` (`work` is overlayfs's scratch directory).
#[cfg(target_os = "linux")]
pub(crate) fn mount_overlay(
    lower: &std::path::Path,
    upper: &std::path::Path,
    work: &std::path::Path,
    target: &std::path::Path,
) -> io::Result<()> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    for p in [lower, upper, work] {
        let b = p.as_os_str().as_bytes();
        if b.contains(&b',') || b.contains(&b':') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} has a ',' or ':', which overlayfs cannot take; use a work directory without them",
                    p.display()
                ),
            ));
        }
    }
    let c = |b: &[u8]| CString::new(b).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e));
    let options = c(format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        upper.display(),
        work.display()
    )
    .as_bytes())?;
    let target_c = c(target.as_os_str().as_bytes())?;
    let fstype = c(b"overlay")?;
    // SAFETY: mount(2) with NUL-terminated strings that live across the
    // call; the data argument is the options string overlayfs parses.
    let rc = unsafe {
        libc::mount(
            fstype.as_ptr(),
            target_c.as_ptr(),
            fstype.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            options.as_ptr().cast(),
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Detaches the mount at `target` (lazily: it goes once nothing uses it).
/// `Ok(false)` when nothing was mounted there.
#[cfg(target_os = "linux")]
pub(crate) fn unmount(target: &std::path::Path) -> io::Result<bool> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let target_c = CString::new(target.as_os_str().as_bytes())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: umount2(2) with a NUL-terminated string that lives across
    // the call and an integer flag.
    let rc = unsafe { libc::umount2(target_c.as_ptr(), libc::MNT_DETACH) };
    if rc == 0 {
        return Ok(true);
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EINVAL) | Some(libc::ENOENT) => Ok(false),
        _ => Err(err),
    }
}

/// Other systems have no batch policy.
#[cfg(not(target_os = "linux"))]
pub(crate) fn batch_scheduling() {}

/// Other systems keep their default pipe size.
#[cfg(not(target_os = "linux"))]
pub(crate) fn grow_pipe(_pipe: &impl AsRawFd, _size: usize) -> bool {
    false
}

/// Signals one process (`kill(2)`); a process that is gone is no error.
#[cfg(feature = "cmd")]
pub(crate) fn signal_pid(pid: i32, signal: i32) {
    // 0, -1 and below would signal groups or every process. (1 is a
    // runner that is its container's init.)
    if pid < 1 {
        return;
    }
    // SAFETY: a plain system call on integers.
    let _ = unsafe { libc::kill(pid, signal) };
}

/// When [`nuon_core::STOP_WITH_PARENT_ENV`] names this process's parent:
/// SIGTERM comes to this process when the parent ends, however it ends
/// (Linux's `PR_SET_PDEATHSIG`), and at once when the parent is already
/// gone. The variable is then taken out of the environment, so what this
/// process starts does not read it as its own.
#[cfg(feature = "cmd")]
#[allow(unsafe_code)]
pub(crate) fn stop_with_parent() {
    let Some(parent) = std::env::var(nuon_core::STOP_WITH_PARENT_ENV)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return;
    };
    // SAFETY: at start-up, before this process does anything on another
    // thread; prctl, getppid, getpid and kill take integers.
    unsafe {
        std::env::remove_var(nuon_core::STOP_WITH_PARENT_ENV);
        #[cfg(target_os = "linux")]
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        if libc::getppid() != parent {
            libc::kill(libc::getpid(), libc::SIGTERM);
        }
    }
}

/// This process's parent (`getppid(2)`): when the parent exits, the
/// kernel gives the process another.
#[cfg(feature = "cmd")]
pub(crate) fn parent_pid() -> i32 {
    // SAFETY: getppid cannot fail and touches no memory.
    unsafe { libc::getppid() }
}

/// Waits for child `pid` to end, reaping it (`waitpid(2)`).
#[cfg(feature = "cmd")]
pub(crate) fn reap(pid: i32) {
    let mut status = 0;
    // SAFETY: `status` is a valid, writable int for the call.
    let _ = unsafe { libc::waitpid(pid, &mut status, 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_to_signal_group_zero_or_one() {
        assert!(kill_group(0, 0).is_err());
        assert!(kill_group(1, 0).is_err());
    }

    #[test]
    fn lock_is_exclusive_between_open_files() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lock");
        let a = File::create(&path).unwrap();
        assert!(try_lock_exclusive(&a).unwrap());
        let b = File::open(&path).unwrap();
        assert!(!try_lock_exclusive(&b).unwrap());
        drop(a);
        assert!(try_lock_exclusive(&b).unwrap());
    }
}
