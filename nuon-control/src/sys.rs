//! What a control plane serving thousands of runners asks of the host: a
//! long listen backlog and a raised open-files limit. The only `unsafe` of
//! this crate (ARCHITECTURE.md, invariants).

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpSocket};

/// Pending connections the kernel may queue on each listener (it caps this
/// at `net.core.somaxconn`): a fleet of runners reconnecting after a restart
/// arrives in thousands, and a short queue turns the overflow into connect
/// timeouts and long backoffs.
pub const LISTEN_BACKLOG: u32 = 8192;

/// Listens on `addr` with [`LISTEN_BACKLOG`] (and `SO_REUSEADDR`, so a
/// restart does not wait out `TIME_WAIT`).
pub fn listen(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}

/// When [`nuon_core::STOP_WITH_PARENT_ENV`] names this process's parent:
/// SIGTERM comes to this process when the parent ends, however it ends
/// (Linux's `PR_SET_PDEATHSIG`), and at once when the parent is already
/// gone. The variable is then taken out of the environment, so what this
/// process starts does not read it as its own.
#[allow(unsafe_code)]
pub fn stop_with_parent() {
    let Some(parent) = std::env::var(nuon_core::STOP_WITH_PARENT_ENV)
        .ok()
        .and_then(|v| v.parse::<i32>().ok())
    else {
        return;
    };
    // SAFETY: at start-up, before this process starts another thread;
    // prctl, getppid, getpid and kill take integers.
    unsafe {
        std::env::remove_var(nuon_core::STOP_WITH_PARENT_ENV);
        #[cfg(target_os = "linux")]
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
        if libc::getppid() != parent {
            libc::kill(libc::getpid(), libc::SIGTERM);
        }
    }
}

/// Raises the soft limit of open files to the hard limit. Every parked
/// runner holds a connection, so the default soft limit (often 1,024) would
/// refuse the 1,025th runner.
#[allow(unsafe_code)]
pub fn raise_open_files_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    let raised = unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 || lim.rlim_cur >= lim.rlim_max {
            None
        } else {
            let before = lim.rlim_cur;
            lim.rlim_cur = lim.rlim_max;
            (libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0).then_some((before, lim.rlim_max))
        }
    };
    if let Some((before, after)) = raised {
        tracing::debug!(before, after, "raised the open files limit");
    }
}
