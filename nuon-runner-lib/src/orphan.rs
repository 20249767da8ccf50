//! The orphan guard: a `sh` watchdog that kills every job process group the
//! runner leaves behind, however the runner dies (even `kill -9`).
//!
//! The runner starts one `sh -c SCRIPT` in its own process group and keeps
//! the write end of its stdin. It writes `+PGID` when a job's process group
//! starts and `-PGID` when it ends. When the runner process dies, the kernel
//! closes that pipe; the watchdog reads end-of-file and sends SIGKILL to every
//! group still in its set, then exits. The pipe is close-on-exec, so job
//! processes never hold it open.

use std::io::{self, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use std::os::unix::process::CommandExt;

/// The watchdog, in POSIX sh with builtins only. It ignores the usual
/// termination signals so it outlives the runner until its stdin closes.
const SCRIPT: &str = r#"
trap '' HUP INT TERM
set -f
groups=' '
ctrs=' '
while IFS= read -r line; do
  case $line in
    +c*|-c*)
      c=${line#?c}
      case $c in
        ''|*[!A-Za-z0-9_.-]*) continue ;;
      esac
      case $line in
        +*) ctrs="$ctrs$c " ;;
        *)
          rest=' '
          for x in $ctrs; do
            [ "$x" = "$c" ] || rest="$rest$x "
          done
          ctrs=$rest
          ;;
      esac
      continue
      ;;
    +*) g=${line#+} ;;
    -*) g=${line#-} ;;
    *) continue ;;
  esac
  case $g in
    ''|*[!0-9]*) continue ;;
  esac
  case $line in
    +*) groups="$groups$g " ;;
    *)
      rest=' '
      for x in $groups; do
        [ "$x" = "$g" ] || rest="$rest$x "
      done
      groups=$rest
      ;;
  esac
done
for g in $groups; do
  kill -s KILL -- "-$g" 2>/dev/null
done
for c in $ctrs; do
  "$1" --root "$2" delete --force "$c" >/dev/null 2>&1
  umount -l "$3/$c/rootfs" 2>/dev/null
  rm -rf "$3/$c"
done
exit 0
"#;

struct Watchdog {
    stdin: ChildStdin,
    child: Child,
}

/// The runner's handle on its watchdog.
pub(crate) struct OrphanGuard {
    inner: Mutex<Option<Watchdog>>,
    warned: AtomicBool,
}

impl OrphanGuard {
    /// Starts the watchdog.
    pub(crate) fn spawn() -> io::Result<Self> {
        Self::spawn_with(None)
    }

    /// Starts the watchdog; with `containers` (`runc`, its `--root` and the
    /// bundles directory) it also removes the containers still registered.
    pub(crate) fn spawn_with(containers: Option<[&std::path::Path; 3]>) -> io::Result<Self> {
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(SCRIPT).arg("sh");
        if let Some(args) = containers {
            cmd.args(args);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()?;
        let stdin = child
            .stdin
            .take()
            .ok_or_else(|| io::Error::other("no stdin pipe"))?;
        Ok(OrphanGuard {
            inner: Mutex::new(Some(Watchdog { stdin, child })),
            warned: AtomicBool::new(false),
        })
    }

    /// The watchdog's process id (its process group id too).
    #[cfg(test)]
    pub(crate) fn pid(&self) -> Option<u32> {
        let inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.as_ref().map(|w| w.child.id())
    }

    fn send(&self, line: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let result = match inner.as_mut() {
            Some(w) => w
                .stdin
                .write_all(line.as_bytes())
                .and_then(|()| w.stdin.flush()),
            None => Err(io::Error::other("the orphan guard was closed")),
        };
        if let Err(e) = result
            && !self.warned.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                error = %e,
                "orphan guard is gone: job processes may outlive the runner if it is killed"
            );
        }
    }

    /// Tells the watchdog a job process group started.
    pub(crate) fn add(&self, pgid: u32) {
        self.send(&format!("+{pgid}\n"));
    }

    /// Tells the watchdog a job process group ended.
    pub(crate) fn remove(&self, pgid: u32) {
        self.send(&format!("-{pgid}\n"));
    }

    /// Tells the watchdog a job container was created.
    pub(crate) fn add_container(&self, id: &str) {
        self.send(&format!("+c{id}\n"));
    }

    /// Tells the watchdog a job container was removed.
    pub(crate) fn remove_container(&self, id: &str) {
        self.send(&format!("-c{id}\n"));
    }

    /// Closes the pipe (the watchdog kills whatever is left and exits) and
    /// reaps the watchdog.
    pub(crate) async fn close(&self) {
        let taken = self.inner.lock().unwrap_or_else(|e| e.into_inner()).take();
        let Some(Watchdog { stdin, mut child }) = taken else {
            return;
        };
        drop(stdin);
        let wait = tokio::task::spawn_blocking(move || child.wait());
        if tokio::time::timeout(Duration::from_secs(5), wait)
            .await
            .is_err()
        {
            tracing::warn!("orphan guard did not exit within 5s after the runner closed it");
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::io::{BufRead, BufReader};
    use std::time::Instant;

    use super::*;

    /// Whether a process exists and is not a zombie.
    pub(crate) fn alive(pid: u32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            // The state follows the command name in parentheses.
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
            Err(_) => false,
        }
    }

    fn wait_dead(pid: u32, within: Duration) -> bool {
        let until = Instant::now() + within;
        while Instant::now() < until {
            if !alive(pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        !alive(pid)
    }

    /// A child in its own process group, killed and reaped when dropped so a
    /// failing test leaves nothing behind.
    struct Group(Child);

    impl Group {
        fn spawn() -> Self {
            Group(
                Command::new("sleep")
                    .arg("1000")
                    .process_group(0)
                    .spawn()
                    .unwrap(),
            )
        }

        fn id(&self) -> u32 {
            self.0.id()
        }

        /// Reaps it if it ended within `within`; whether it did.
        fn ended_within(&mut self, within: Duration) -> bool {
            let until = Instant::now() + within;
            while Instant::now() < until {
                if self.0.try_wait().unwrap().is_some() {
                    return true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            false
        }
    }

    impl Drop for Group {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    #[tokio::test]
    async fn closing_kills_registered_groups_only() {
        let guard = OrphanGuard::spawn().unwrap();
        let mut kept = Group::spawn();
        let ended = Group::spawn();
        let other = Group::spawn();
        guard.add(kept.id());
        guard.add(ended.id());
        guard.remove(ended.id());
        // Garbage is ignored.
        guard.send("+abc\n-\nnonsense\n");
        let watchdog = guard.pid().unwrap();
        guard.close().await;
        assert!(!alive(watchdog));
        assert!(
            kept.ended_within(Duration::from_secs(5)),
            "registered group survived"
        );
        assert!(alive(ended.id()) && alive(other.id()));
    }

    /// Run by `killing_the_runner_kills_its_job_groups` in a child process:
    /// holds a guard with one registered group, prints the group id, waits.
    #[test]
    fn orphan_guard_helper_process() {
        if std::env::var_os("NUON_ORPHAN_HELPER").is_none() {
            return;
        }
        let guard = OrphanGuard::spawn().unwrap();
        let job = Group::spawn();
        guard.add(job.id());
        println!("PGID {}", job.id());
        std::thread::sleep(Duration::from_secs(600));
    }

    #[test]
    fn killing_the_runner_kills_its_job_groups() {
        let mut holder = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "orphan::tests::orphan_guard_helper_process",
                "--nocapture",
            ])
            .env("NUON_ORPHAN_HELPER", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(holder.stdout.take().unwrap());
        let mut pgid = None;
        let mut line = String::new();
        while out.read_line(&mut line).unwrap() > 0 {
            if let Some(p) = line.trim().strip_prefix("PGID ") {
                pgid = Some(p.parse::<u32>().unwrap());
                break;
            }
            line.clear();
        }
        let pgid = pgid.expect("helper printed its job's process group");
        assert!(alive(pgid));
        /// Kills the group if the test fails, so it leaves nothing behind.
        struct Cleanup(u32);
        impl Drop for Cleanup {
            fn drop(&mut self) {
                let _ = crate::sys::kill_group(self.0, crate::sys::SIGKILL);
            }
        }
        let _cleanup = Cleanup(pgid);
        // SIGKILL: the holder of the pipe gets no chance to clean up.
        holder.kill().unwrap();
        holder.wait().unwrap();
        assert!(
            wait_dead(pgid, Duration::from_secs(5)),
            "job group {pgid} survived its runner"
        );
    }
}
