//! Runner updates, on the runner's side (`nuon runners release rollout`).
//!
//! The control plane asks for a version in the runner's signed settings
//! ([`RunnerUpdate`]; the release inside is signed by the org's key too,
//! both checked before the settings are taken). Then:
//!
//! 1. **Download** the binary by digest from the vendor's store into
//!    `WORK_DIR/runner-versions/VERSION/nuon-runner` (every byte hashed on
//!    the way, the size checked, written aside and renamed).
//! 2. **Drain**: the runner stops claiming, lets its jobs finish and ships
//!    their logs and results, as on SIGTERM; then it writes `switch.json`
//!    (from where to where), starts a **watchdog** (the old binary, known to
//!    work: `nuon-runner update-watchdog`) and **re-execs** the new binary
//!    with the same arguments, in the same process.
//! 3. The new version **confirms** once its first call to the control
//!    plane has been answered (its settings fetched and verified): it
//!    writes `current.json` and removes `switch.json`; the watchdog sees
//!    that and exits.
//! 4. If the new version exits before it confirms, or has not confirmed
//!    within the bound (`--update-timeout`; the watchdog then stops it:
//!    SIGTERM, SIGKILL after 10 s), the watchdog records why in
//!    `failed.json` and starts the old version again in its place, which
//!    reports the failure with its telemetry; the control plane fails the
//!    install's step of the rollout with that reason.
//!
//! A runner started by its service manager after a crash, from the binary
//! the stack installed, follows `current.json` to the version it was last
//! updated to; an unconfirmed `switch.json` it finds is a version that
//! died, recorded as failed. A version that failed is not tried again
//! until the control plane asks again (a rollout's `retry`). A runner
//! pinned by its customer (`--pin-version`) takes no other version.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nuon_core::ReleaseId;
use nuon_core::artifact::{ArtifactStore, Descriptor};
use nuon_core::wire::{RunnerSettingsInfo, RunnerUpdate, RunnerUpdateFailure};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::sync::watch;

use crate::RunnerStats;

/// Where versions are kept, under the work dir.
pub const VERSIONS_DIR: &str = "runner-versions";
const SWITCH: &str = "switch.json";
const CURRENT: &str = "current.json";
const FAILED: &str = "failed.json";
const WATCHDOG_PID: &str = "watchdog.pid";
/// Set on a process the boot binary started to follow `current.json`.
const FOLLOWED_ENV: &str = "NUON_RUNNER_FOLLOWED";
/// Set on the new version a switch execs: it is on trial.
const SWITCHED_ENV: &str = "NUON_RUNNER_SWITCHED";

/// An update in flight: written before the re-exec, removed by the new
/// version when it confirms (or by the watchdog when it gives up).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Switch {
    /// The version that drained.
    pub from_version: String,
    /// Its binary.
    pub from_path: PathBuf,
    /// The version switched to.
    pub to_version: String,
    /// Its binary.
    pub to_path: PathBuf,
    /// The release asked for.
    pub release_id: ReleaseId,
    /// The ask's number.
    pub tries: u32,
    /// By when the new version must confirm, ms since the epoch.
    pub deadline_ms: i64,
}

/// The version the runner was last updated to, confirmed healthy.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Current {
    version: String,
    path: PathBuf,
}

/// What the process does at start, before anything else.
#[derive(Debug)]
pub enum Boot {
    /// Run, as this version.
    Run,
    /// Run as the new version of an update: confirm once healthy.
    Trial(Switch),
    /// Start this binary instead (the version last updated to).
    Follow(PathBuf),
}

/// The runner's updates: what it runs, where versions come from, and
/// where it keeps them.
#[derive(Clone)]
pub struct Updater {
    work_dir: PathBuf,
    version: String,
    pin: Option<String>,
    store: Option<Arc<dyn ArtifactStore>>,
    bound: Duration,
    stats: Arc<RunnerStats>,
}

fn dir(work_dir: &Path) -> PathBuf {
    work_dir.join(VERSIONS_DIR)
}

fn read<T: for<'de> Deserialize<'de>>(path: &Path) -> Option<T> {
    let text = std::fs::read_to_string(path).ok()?;
    match serde_json::from_str(&text) {
        Ok(v) => Some(v),
        Err(e) => {
            tracing::warn!(file = %path.display(), error = %e, "an update record does not parse; ignored");
            None
        }
    }
}

fn write<T: Serialize>(path: &Path, value: &T) -> std::io::Result<()> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    let text = serde_json::to_string_pretty(value).map_err(std::io::Error::other)?;
    crate::sys::write_private(path, &text)
}

/// Records a failed update (the watchdog's and the runner's own).
fn record_failure(work_dir: &Path, failure: &RunnerUpdateFailure) {
    if let Err(e) = write(&dir(work_dir).join(FAILED), failure) {
        tracing::error!(error = %e, "cannot record the failed update");
    }
}

impl Updater {
    /// The updates of the runner of `work_dir`, running `version`, pinned
    /// to `pin` (if the customer pinned it), downloading from `store`, with
    /// `bound` for a new version to confirm.
    pub fn new(
        work_dir: &Path,
        version: &str,
        pin: Option<String>,
        store: Option<Arc<dyn ArtifactStore>>,
        bound: Duration,
        stats: Arc<RunnerStats>,
    ) -> Self {
        let work_dir = std::path::absolute(work_dir).unwrap_or_else(|_| work_dir.to_owned());
        stats.set_pinned(pin.clone());
        Updater {
            work_dir,
            version: version.to_owned(),
            pin,
            store,
            bound,
            stats,
        }
    }

    /// The same, downloading from `store`.
    pub fn with_store(mut self, store: Option<Arc<dyn ArtifactStore>>) -> Self {
        self.store = store;
        self
    }

    /// What to do at start: finish the record of an update that did not
    /// confirm, report the last failure, confirm as the new version, or
    /// follow the version last updated to.
    pub fn boot(&self) -> Boot {
        let d = dir(&self.work_dir);
        if let Some(s) = read::<Switch>(&d.join(SWITCH)) {
            if s.to_version == self.version {
                return Boot::Trial(s);
            }
            if std::env::var_os(SWITCHED_ENV).is_some() {
                // Switched to, but this binary is another version than its
                // release says: not it. The watchdog goes back.
                let why = format!(
                    "the binary of version {} reports version {}",
                    s.to_version, self.version
                );
                eprintln!("nuon-runner: {why}; exiting for the version before");
                record_failure(
                    &self.work_dir,
                    &RunnerUpdateFailure {
                        release_id: s.release_id.clone(),
                        version: s.to_version.clone(),
                        tries: s.tries,
                        reason: why,
                    },
                );
                std::process::exit(70);
            }
            // Started again while an update was unconfirmed: the new
            // version died (the watchdog records it first, when it could).
            if read::<RunnerUpdateFailure>(&d.join(FAILED))
                .is_none_or(|f| f.release_id != s.release_id || f.tries != s.tries)
            {
                record_failure(
                    &self.work_dir,
                    &RunnerUpdateFailure {
                        release_id: s.release_id.clone(),
                        version: s.to_version.clone(),
                        tries: s.tries,
                        reason: format!(
                            "version {} stopped before it was healthy; the runner started again on {}",
                            s.to_version, self.version
                        ),
                    },
                );
            }
            let _ = std::fs::remove_file(d.join(SWITCH));
        }
        if let Some(f) = read::<RunnerUpdateFailure>(&d.join(FAILED)) {
            tracing::warn!(version = %f.version, reason = %f.reason, "the last runner update failed; this runner stays on its version");
            self.stats.set_update_failed(Some(f));
        }
        if std::env::var_os(FOLLOWED_ENV).is_none()
            && let Some(c) = read::<Current>(&d.join(CURRENT))
            && c.version != self.version
            && self.pin.as_ref().is_none_or(|p| p == &c.version)
            && c.path.is_file()
        {
            return Boot::Follow(c.path);
        }
        Boot::Run
    }

    /// Confirms `switch` once the runner's first settings arrive (its
    /// first answered call): this version becomes current, the update is
    /// done. Runs until then.
    pub async fn confirm(
        &self,
        switch: Switch,
        mut settings: watch::Receiver<Option<RunnerSettingsInfo>>,
    ) {
        if settings.wait_for(Option::is_some).await.is_err() {
            return;
        }
        let d = dir(&self.work_dir);
        let current = Current {
            version: self.version.clone(),
            path: std::env::current_exe().unwrap_or_else(|_| switch.to_path.clone()),
        };
        if let Err(e) = write(&d.join(CURRENT), &current) {
            tracing::error!(error = %e, "cannot record the version updated to");
        }
        let _ = std::fs::remove_file(d.join(FAILED));
        let _ = std::fs::remove_file(d.join(SWITCH));
        self.stats.set_update_failed(None);
        tracing::info!(from = %switch.from_version, to = %self.version, "runner update confirmed: healthy on the new version");
        // The watchdog (a child, since the re-exec) sees the record gone
        // and exits: reap it.
        if let Some(pid) = std::fs::read_to_string(d.join(WATCHDOG_PID))
            .ok()
            .and_then(|p| p.trim().parse::<i32>().ok())
        {
            let _ = std::fs::remove_file(d.join(WATCHDOG_PID));
            tokio::task::spawn_blocking(move || crate::sys::reap(pid));
        }
    }

    /// Watches the runner's settings for a version to update to; answers
    /// the switch to make once the binary is downloaded and checked (the
    /// caller drains, then [`Updater::switch`]es). Failures are recorded
    /// and reported, and the runner stays as it is.
    pub async fn watch(&self, mut settings: watch::Receiver<Option<RunnerSettingsInfo>>) -> Switch {
        loop {
            let update = settings
                .borrow_and_update()
                .as_ref()
                .and_then(|s| s.update.clone());
            if let Some(u) = update
                && let Some(switch) = self.consider(&u).await
            {
                return switch;
            }
            if settings.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }

    /// Whether to take update `u`: the switch, once its binary is staged.
    async fn consider(&self, u: &RunnerUpdate) -> Option<Switch> {
        let r = &u.release;
        if r.version == self.version {
            return None;
        }
        // The version names a directory: the API allows no other shape,
        // and neither does the runner.
        let shaped = !r.version.is_empty()
            && r.version.len() <= 64
            && r.version.starts_with(|c: char| c.is_ascii_alphanumeric())
            && r.version
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'));
        if let Some(f) = read::<RunnerUpdateFailure>(&dir(&self.work_dir).join(FAILED))
            && f.release_id == r.id
            && f.tries == u.tries
        {
            return None;
        }
        let fail = |reason: String| {
            tracing::error!(version = %r.version, %reason, "runner update refused");
            let f = RunnerUpdateFailure {
                release_id: r.id.clone(),
                version: r.version.clone(),
                tries: u.tries,
                reason,
            };
            record_failure(&self.work_dir, &f);
            self.stats.set_update_failed(Some(f));
            None
        };
        if !shaped {
            return fail(format!("version {:?} is not a version", r.version));
        }
        let Ok(from_path) = std::env::current_exe() else {
            return fail("this runner cannot tell where its own binary is".into());
        };
        if let Some(pin) = &self.pin
            && pin != &r.version
        {
            return fail(format!(
                "the customer pinned this runner to version {pin} (--pin-version)"
            ));
        }
        if r.os != std::env::consts::OS || r.arch != std::env::consts::ARCH {
            return fail(format!(
                "the release is built for {}/{}; this runner runs on {}/{}",
                r.os,
                r.arch,
                std::env::consts::OS,
                std::env::consts::ARCH
            ));
        }
        let Some(store) = &self.store else {
            return fail(
                "this runner has no vendor store to download runner binaries from (--vendor-store)"
                    .into(),
            );
        };
        tracing::info!(from = %self.version, to = %r.version, digest = %r.digest, "runner update: downloading");
        let path = match self.download(&**store, u).await {
            Ok(p) => p,
            Err(e) => return fail(e),
        };
        Some(Switch {
            from_version: self.version.clone(),
            from_path,
            to_version: r.version.clone(),
            to_path: path,
            release_id: r.id.clone(),
            tries: u.tries,
            deadline_ms: 0,
        })
    }

    /// The release's binary, by digest, in `runner-versions/VERSION/`.
    async fn download(
        &self,
        store: &dyn ArtifactStore,
        u: &RunnerUpdate,
    ) -> Result<PathBuf, String> {
        use std::os::unix::fs::PermissionsExt;
        let r = &u.release;
        let digest = r
            .digest
            .parse()
            .map_err(|e| format!("the release's digest: {e}"))?;
        let blob = Descriptor {
            media_type: "application/octet-stream".into(),
            digest,
            size: r.size,
            annotations: Default::default(),
        };
        let vdir = dir(&self.work_dir).join(&r.version);
        tokio::fs::create_dir_all(&vdir)
            .await
            .map_err(|e| format!("create {}: {e}", vdir.display()))?;
        let path = vdir.join("nuon-runner");
        let part = vdir.join("nuon-runner.part");
        let mut reader = store
            .open_blob(&r.repository, &blob)
            .await
            .map_err(|e| format!("download {}@{}: {e}", r.repository, r.digest))?;
        let mut file = tokio::fs::File::create(&part)
            .await
            .map_err(|e| format!("write {}: {e}", part.display()))?;
        // The reader checks the digest and size as the bytes stream: a
        // mismatch is an error before the end, and nothing is renamed.
        let copied = tokio::io::copy(&mut reader, &mut file).await;
        let done = match copied {
            Ok(n) if n == r.size => match file.flush().await {
                // On disk before it is renamed: a crash never leaves a
                // short binary under the final name.
                Ok(()) => file.sync_all().await.map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            },
            Ok(n) => Err(format!("got {n} bytes, the release says {}", r.size)),
            Err(e) => Err(e.to_string()),
        };
        drop(file);
        if let Err(e) = done {
            let _ = tokio::fs::remove_file(&part).await;
            return Err(format!("download {}@{}: {e}", r.repository, r.digest));
        }
        tokio::fs::set_permissions(&part, std::fs::Permissions::from_mode(0o755))
            .await
            .and(tokio::fs::rename(&part, &path).await)
            .map_err(|e| format!("stage {}: {e}", path.display()))?;
        Ok(path)
    }

    /// After the drain: records the switch, starts the watchdog (this
    /// binary), and re-execs the new version with this process's
    /// arguments. Returns only on failure (the runner then stays, and
    /// says why).
    pub fn switch(&self, mut s: Switch) -> String {
        use std::os::unix::process::CommandExt;
        let d = dir(&self.work_dir);
        // Recorded, so that the runner started again does not try it again
        // and reports why.
        let failed = |s: &Switch, why: String| {
            record_failure(
                &self.work_dir,
                &RunnerUpdateFailure {
                    release_id: s.release_id.clone(),
                    version: s.to_version.clone(),
                    tries: s.tries,
                    reason: why.clone(),
                },
            );
            why
        };
        s.deadline_ms = nuon_core::now_ms() + self.bound.as_millis() as i64;
        if let Err(e) = write(&d.join(SWITCH), &s) {
            return failed(&s, format!("cannot record the switch: {e}"));
        }
        let args: Vec<std::ffi::OsString> = std::env::args_os().skip(1).collect();
        let watchdog = std::process::Command::new(&s.from_path)
            .arg("update-watchdog")
            .arg("--work-dir")
            .arg(&self.work_dir)
            .arg("--pid")
            .arg(std::process::id().to_string())
            .arg("--")
            .args(&args)
            .env_remove(FOLLOWED_ENV)
            .stdin(std::process::Stdio::null())
            .spawn();
        match watchdog {
            Ok(child) => {
                let _ = std::fs::write(d.join(WATCHDOG_PID), child.id().to_string());
            }
            Err(e) => {
                let _ = std::fs::remove_file(d.join(SWITCH));
                return failed(&s, format!("cannot start the update watchdog: {e}"));
            }
        }
        tracing::info!(from = %s.from_version, to = %s.to_version, "runner update: drained; switching to the new version");
        let e = std::process::Command::new(&s.to_path)
            .args(&args)
            .env_remove(FOLLOWED_ENV)
            .env(SWITCHED_ENV, "1")
            .exec();
        // Still here: the exec failed. This process exits; the watchdog
        // starts this version again in its place.
        failed(&s, format!("cannot start version {}: {e}", s.to_version))
    }
}

/// Re-execs the binary of `current` (the version last updated to).
pub fn follow(path: &Path) -> std::io::Error {
    use std::os::unix::process::CommandExt;
    tracing::info!(binary = %path.display(), "starting the version this runner was last updated to");
    std::process::Command::new(path)
        .args(std::env::args_os().skip(1))
        .env(FOLLOWED_ENV, "1")
        .env_remove(SWITCHED_ENV)
        .exec()
}

/// The watchdog of a switch (`nuon-runner update-watchdog --work-dir DIR
/// --pid PID -- ARGS`): the old binary, started by the process about to
/// re-exec. It waits for the new version to confirm; if that process
/// exits first, or the deadline passes (then it stops it), it records why
/// and execs the old version with `ARGS` in its place. Returns the exit
/// code when there was nothing to do.
pub fn watchdog(work_dir: &Path, pid: i32, args: &[std::ffi::OsString]) -> u8 {
    use std::os::unix::process::CommandExt;
    let d = dir(work_dir);
    let died = || crate::sys::parent_pid() != pid;
    let Some(s) = read::<Switch>(&d.join(SWITCH)) else {
        return 0;
    };
    let why = loop {
        std::thread::sleep(Duration::from_millis(100));
        if !d.join(SWITCH).exists() {
            // Confirmed: the new version is healthy.
            return 0;
        }
        if died() {
            break format!(
                "version {} exited before it was healthy; the runner went back to {}",
                s.to_version, s.from_version
            );
        }
        if nuon_core::now_ms() > s.deadline_ms {
            // Confirmed at the last moment: nothing to undo.
            if !d.join(SWITCH).exists() {
                return 0;
            }
            crate::sys::signal_pid(pid, libc::SIGTERM);
            let until = std::time::Instant::now() + Duration::from_secs(10);
            while !died() && std::time::Instant::now() < until {
                std::thread::sleep(Duration::from_millis(100));
            }
            if !died() {
                crate::sys::signal_pid(pid, libc::SIGKILL);
                let until = std::time::Instant::now() + Duration::from_secs(10);
                while !died() && std::time::Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(50));
                }
            }
            if !died() {
                eprintln!(
                    "nuon-runner update-watchdog: version {} is not healthy and does not stop; leaving it to the service manager",
                    s.to_version
                );
                return 1;
            }
            break format!(
                "version {} was not healthy within the bound (no answered call to the control plane); stopped, and the runner went back to {}",
                s.to_version, s.from_version
            );
        }
    };
    eprintln!("nuon-runner update-watchdog: {why}");
    // A reason the new process recorded itself (a wrong binary) stands.
    if read::<RunnerUpdateFailure>(&d.join(FAILED))
        .is_none_or(|f| f.release_id != s.release_id || f.tries != s.tries)
    {
        record_failure(
            work_dir,
            &RunnerUpdateFailure {
                release_id: s.release_id.clone(),
                version: s.to_version.clone(),
                tries: s.tries,
                reason: why,
            },
        );
    }
    let _ = std::fs::remove_file(d.join(SWITCH));
    let _ = std::fs::remove_file(d.join(WATCHDOG_PID));
    let e = std::process::Command::new(&s.from_path)
        .args(args)
        .env_remove(FOLLOWED_ENV)
        .env_remove(SWITCHED_ENV)
        .exec();
    eprintln!(
        "nuon-runner update-watchdog: cannot start {} again: {e}",
        s.from_path.display()
    );
    1
}
