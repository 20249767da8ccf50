//! The few calls into libc the runner needs. This is the only module with
//! `unsafe` code; each call is a plain system call on integers or a file
//! descriptor this process owns.
#![allow(unsafe_code)]

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;

pub(crate) use libc::{SIGKILL, SIGTERM};

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
