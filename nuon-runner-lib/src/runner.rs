//! The runner: claim loop, job tasks, the heartbeat task, shippers, drain.

use std::collections::{BTreeMap, HashMap};
use std::fs::{self, File};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use nuon_core::wire::{
    ClaimRequest, ClaimResponse, ClaimedJob, HeartbeatRequest, LeaseRef, LeaseState,
    RunnerSettingsInfo,
};
use nuon_core::{JobId, JobResult, JobSpec, Outcome, Signed as _, StopReason, TransportError};
use tokio::sync::{Notify, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, sleep, sleep_until};

use crate::backoff::Backoff;
use crate::config::RunnerConfig;
use crate::container::{ContainerRuntime, Isolation, JobContainers};
use crate::error::{Error, Result};
use crate::host::{ProcessHost, deadline_in};
use crate::journal::Journal;
use crate::keys::Keys;
use crate::orphan::OrphanGuard;
use crate::spool::{self, Meta, SharedSpool, SpoolWriter};
use crate::sys;

mod checks;
mod heartbeat;
mod known;
mod link;
mod shipping;

/// One attempt of one job.
type Key = (JobId, u32);

/// How much longer than the grace period stopped jobs get to end.
const STOP_SLACK: Duration = Duration::from_secs(10);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A job the runner holds.
struct JobEntry {
    stop: watch::Sender<Option<StopReason>>,
    /// Whether its first heartbeat succeeded, so the heartbeat task carries it.
    leased: bool,
}

/// State shared by the runner's tasks.
struct Shared {
    config: RunnerConfig,
    /// The org keys jobs are accepted from.
    keys: Keys,
    kinds: Vec<String>,
    spool_dir: PathBuf,
    jobs_dir: PathBuf,
    guard: Arc<OrphanGuard>,
    /// Under `--isolation container`: runc and its directories.
    containers: Option<Arc<ContainerRuntime>>,
    jobs: Mutex<HashMap<Key, JobEntry>>,
    leases_changed: Notify,
    shippers: Mutex<HashMap<Key, JoinHandle<()>>>,
    shippers_changed: Notify,
    fatal: watch::Sender<Option<TransportError>>,
    /// Every job accepted, refused and ended, hash-chained.
    journal: Journal,
    /// The attempts accepted lately, read from the journal: a claim of
    /// one again is a replay.
    accepted: crate::journal::Accepted,
    /// The settings the control plane gives this runner (its install's
    /// `runner.toml`): their environment reaches every job.
    settings: Mutex<RunnerSettingsInfo>,
    /// How long the link lets a claim or a heartbeat be held.
    hold: link::HoldLimit,
}

impl Shared {
    fn backoff(&self) -> Backoff {
        Backoff::new(self.config.backoff_base, self.config.backoff_cap)
    }

    /// Brings the counts of running jobs and unshipped attempts up to date.
    fn count(&self) {
        let stats = &self.config.stats;
        stats.set_running(lock(&self.jobs).len());
        stats.set_backlog(lock(&self.shippers).len());
    }

    /// Fetches the runner's settings when `version` is not the one held
    /// (`None`: the control plane keeps none for this runner). A failure
    /// keeps the settings before, and says so.
    async fn refresh_settings(&self, version: Option<&str>) {
        let Some(version) = version else { return };
        if lock(&self.settings).version != version {
            self.fetch_settings().await;
        }
    }

    /// Fetches the runner's settings.
    async fn fetch_settings(&self) {
        match self.config.transport.settings().await {
            // Signed by the org's key, as jobs are (empty ones need not be:
            // they give a job nothing).
            Ok(s)
                if (!s.env.is_empty() || s.update.is_some() || s.watch.is_some())
                    && self.keys.verify(&s.signed_bytes(), &s.signature).is_err() =>
            {
                self.config
                    .stats
                    .error("the runner's settings are not signed by the org's key: refused");
                tracing::error!(version = %s.version, "the runner's settings are not signed by the org's key; jobs run with the ones before");
            }
            Ok(mut s) => {
                // The release of an update is signed on its own, when it
                // is published: a runner takes no binary the org's key did
                // not sign. Only the update is refused; the settings stand.
                if let Some(u) = &s.update
                    && self
                        .keys
                        .verify(&u.release.signed_bytes(), &u.release.signature)
                        .is_err()
                {
                    self.config.stats.error(format!(
                        "runner version {} is not signed by a key of the org: update refused (publish it again)",
                        u.release.version
                    ));
                    tracing::error!(version = %u.release.version, "the runner release asked for is not signed by the org's key; update refused");
                    s.update = None;
                }
                tracing::info!(version = %s.version, env_vars = s.env.len(), update = ?s.update.as_ref().map(|u| &u.release.version), "runner settings fetched");
                self.config.settings_seen.send_replace(Some(s.clone()));
                *lock(&self.settings) = s;
            }
            Err(e) => {
                self.config
                    .stats
                    .error(format!("fetching the runner's settings failed: {e}"));
                tracing::warn!(error = %e, "cannot fetch the runner's settings; jobs run with the ones before");
            }
        }
    }

    fn report_fatal(&self, e: TransportError) {
        tracing::error!(error = %e, "the control plane refused this runner; it stops");
        self.fatal.send_if_modified(|v| {
            if v.is_none() {
                *v = Some(e);
                true
            } else {
                false
            }
        });
    }

    /// Asks a job to stop; returns whether this is news to it.
    fn stop_job(&self, key: &Key, reason: StopReason) -> bool {
        lock(&self.jobs).get(key).is_some_and(|entry| {
            entry.stop.send_if_modified(|v| {
                if v.is_none() {
                    *v = Some(reason);
                    true
                } else {
                    false
                }
            })
        })
    }

    fn stop_all(&self, reason: StopReason) {
        let keys: Vec<Key> = lock(&self.jobs).keys().cloned().collect();
        for key in keys {
            self.stop_job(&key, reason);
        }
    }

    fn set_leased(&self, key: &Key) {
        if let Some(entry) = lock(&self.jobs).get_mut(key) {
            entry.leased = true;
        }
        self.leases_changed.notify_one();
    }

    fn leased(&self) -> Vec<LeaseRef> {
        let mut leases: Vec<LeaseRef> = lock(&self.jobs)
            .iter()
            .filter(|(_, e)| e.leased)
            .map(|((job_id, attempt), _)| LeaseRef {
                job_id: job_id.clone(),
                attempt: *attempt,
            })
            .collect();
        leases.sort_by(|a, b| (&a.job_id, a.attempt).cmp(&(&b.job_id, b.attempt)));
        leases
    }
}

/// Runs jobs for one runner identity until its shutdown future resolves.
///
/// See the [crate documentation](crate) for what it does.
#[derive(Debug)]
pub struct Runner {
    config: RunnerConfig,
}

fn io_err<'a>(action: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> Error + 'a {
    move |source| Error::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

async fn opt_future<F: Future + Unpin>(f: &mut Option<F>) -> F::Output {
    match f {
        Some(f) => f.await,
        None => std::future::pending().await,
    }
}

/// A claim in flight; its output says how long the server held it.
/// A claim in flight: its answer, how long it was held and the wait it
/// asked for.
type ClaimFuture = Pin<
    Box<dyn Future<Output = (Result<ClaimResponse, TransportError>, Duration, Duration)> + Send>,
>;

impl Runner {
    /// A runner with this configuration. Nothing starts before [`Runner::run`].
    pub fn new(config: RunnerConfig) -> Self {
        Runner { config }
    }

    /// Claims and runs jobs until `shutdown` resolves, then drains: stops
    /// claiming, lets running jobs finish (up to
    /// [`RunnerConfig::drain_timeout`], then stops them), waits for their logs
    /// and completions to be delivered (up to [`RunnerConfig::ship_timeout`];
    /// what is left stays in the spool for the next start) and returns `Ok`.
    ///
    /// Returns an error when the work directory cannot be used, or when the
    /// control plane refuses the runner's token (it was revoked).
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> Result<()> {
        let config = self.config;
        if config.slots == 0 {
            return Err(Error::Config("slots must be at least 1".into()));
        }
        let kinds = config.plugins.kinds();
        if kinds.is_empty() {
            return Err(Error::Config(
                "no plugins are registered, so the runner could claim no job".into(),
            ));
        }
        let work_dir = config.work_dir.clone();
        let spool_dir = work_dir.join("spool");
        let mut jobs_dir = work_dir.join("jobs");
        if matches!(config.isolation, Isolation::Container(_)) {
            // A job's work directory is mounted at its own path in its
            // containers: that path must be absolute.
            jobs_dir = std::path::absolute(&jobs_dir).map_err(io_err("resolve", &jobs_dir))?;
        }
        for dir in [&work_dir, &spool_dir, &jobs_dir] {
            private_dir(dir, config.strict_permissions)?;
        }
        let lock_path = work_dir.join("runner.lock");
        let lock_file =
            File::create(&lock_path).map_err(io_err("create the lock file", &lock_path))?;
        if !sys::try_lock_exclusive(&lock_file).map_err(io_err("lock", &lock_path))? {
            return Err(Error::WorkDirInUse {
                work_dir,
                lock: lock_path,
            });
        }
        // Containers a dead run left go before the job directories they
        // may still have mounted.
        let containers = match &config.isolation {
            Isolation::Process => None,
            Isolation::Container(options) => {
                let rt =
                    ContainerRuntime::new(options.clone(), &work_dir).map_err(Error::Config)?;
                rt.clean_leftovers();
                Some(Arc::new(rt))
            }
        };
        clean_jobs_dir(&jobs_dir);
        let guard = Arc::new(
            match &containers {
                None => OrphanGuard::spawn(),
                Some(rt) => OrphanGuard::spawn_with(Some([
                    rt.options.runc.as_path(),
                    rt.state_dir.as_path(),
                    rt.bundles_dir.as_path(),
                ])),
            }
            .map_err(Error::OrphanGuard)?,
        );

        let journal = Journal::open(&work_dir, &config.runner_id)
            .map_err(io_err("open the audit journal in", &work_dir))?;
        let accepted = crate::journal::Accepted::from_journal(journal.path(), nuon_core::now_ms())
            .map_err(io_err("read the audit journal in", &work_dir))?;
        config.stats.set_slots(config.slots);
        let shared = Arc::new(Shared {
            journal,
            accepted,
            keys: Keys::load(&work_dir, config.signing_key),
            kinds,
            spool_dir,
            jobs_dir,
            guard,
            containers,
            jobs: Mutex::new(HashMap::new()),
            leases_changed: Notify::new(),
            shippers: Mutex::new(HashMap::new()),
            shippers_changed: Notify::new(),
            fatal: watch::channel(None).0,
            settings: Mutex::new(RunnerSettingsInfo::default()),
            hold: link::HoldLimit::default(),
            config,
        });
        tracing::info!(
            runner = %shared.config.runner_id,
            work_dir = %work_dir.display(),
            slots = shared.config.slots,
            kinds = ?shared.kinds,
            "runner started"
        );
        recover_spool(&shared).await?;
        // At start, whatever version: claims and heartbeats then say when
        // they change.
        shared.fetch_settings().await;
        let heartbeat = tokio::spawn(heartbeat::heartbeat_loop(shared.clone()));
        let watch = tokio::spawn(
            crate::watch::Watch {
                transport: shared.config.transport.clone(),
                stats: shared.config.stats.clone(),
                settings: shared.config.settings_seen.subscribe(),
                confined: shared.containers.is_some(),
            }
            .run(),
        );

        let result = main_loop(&shared, shutdown).await;

        for task in [heartbeat, watch] {
            task.abort();
            let _ = task.await;
        }
        shared.guard.close().await;
        drop(lock_file);
        match &result {
            Ok(()) => tracing::info!(runner = %shared.config.runner_id, "runner stopped"),
            Err(e) => {
                tracing::error!(runner = %shared.config.runner_id, error = %e, "runner stopped with an error")
            }
        }
        result
    }
}

/// Makes `dir` (when missing) private to the runner's user: job specs,
/// logs and work files hold the install's secrets. A wider mode is fixed
/// with a warning, or refused under `strict`.
fn private_dir(dir: &Path, strict: bool) -> Result<()> {
    use nuon_core::private::{DIR_MODE, Verdict, verdict};
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .map_err(io_err("create the directory", dir))?;
    let mode = fs::metadata(dir)
        .map_err(io_err("read the mode of", dir))?
        .permissions()
        .mode();
    match verdict(&dir.display().to_string(), mode, true, strict) {
        Verdict::Private => Ok(()),
        Verdict::Fix(message) => {
            fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))
                .map_err(io_err("set the mode of", dir))?;
            tracing::warn!("{message}");
            Ok(())
        }
        Verdict::Refuse(message) => Err(Error::Config(message)),
    }
}

/// Removes job work directories a dead runner left behind.
fn clean_jobs_dir(jobs_dir: &Path) {
    let Ok(entries) = fs::read_dir(jobs_dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let res = if path.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        if let Err(e) = res {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove a leftover job work directory");
        }
    }
}

/// Finishes the attempts a previous runner process left unfinished and
/// starts a shipper for every attempt in the spool.
async fn recover_spool(shared: &Arc<Shared>) -> Result<()> {
    let root = shared.spool_dir.clone();
    let found = tokio::task::spawn_blocking(move || -> Result<Vec<(PathBuf, Meta)>> {
        let found = spool::list(&root).map_err(io_err("read the spool directory", &root))?;
        for (path, meta) in &found {
            match spool::read_result(path) {
                Ok(Some(_)) => {}
                Ok(None) => {
                    let reason = "runner restarted while the job was running";
                    tracing::warn!(job = %meta.job_id, attempt = meta.attempt,
                        "{reason}; failing the attempt and shipping its log");
                    let finished = SpoolWriter::reopen(path, Arc::new(Notify::new())).and_then(|mut w| {
                        w.system(&format!("{reason}; its processes were killed"));
                        w.finish(&JobResult::failed(reason))
                    });
                    if let Err(e) = finished {
                        tracing::error!(file = %path.display(), error = %e, "cannot finish a leftover attempt's spool");
                    }
                }
                Err(e) => {
                    tracing::error!(file = %path.display(), error = %e, "cannot read a leftover attempt's spool file");
                }
            }
        }
        Ok(found)
    })
    .await
    .map_err(|e| Error::Config(format!("spool recovery task failed: {e}")))??;
    for (path, meta) in found {
        tracing::info!(job = %meta.job_id, attempt = meta.attempt, "shipping a spooled attempt left by a previous run");
        shared.spawn_shipper(path, meta, Arc::new(Notify::new()));
    }
    Ok(())
}

/// How often a disabled runner calls.
const DISABLED_POLL: Duration = Duration::from_secs(5);

async fn main_loop(shared: &Arc<Shared>, shutdown: impl Future<Output = ()>) -> Result<()> {
    let mut shutdown = std::pin::pin!(shutdown);
    let mut fatal = shared.fatal.subscribe();
    let mut jobs: JoinSet<()> = JoinSet::new();
    let mut task_keys: HashMap<tokio::task::Id, Key> = HashMap::new();
    let mut claim: Option<ClaimFuture> = None;
    let mut claim_delay: Option<Duration> = None;
    let mut backoff = shared.backoff();
    let slots = shared.config.slots;
    let claim_wait = shared.config.claim_wait;

    let mut was_disabled: Option<String> = None;
    let stopped_by: Result<()> = loop {
        let free = slots.saturating_sub(jobs.len());
        if claim.is_none() && free > 0 {
            // The customer's switch: while it is off the runner still
            // calls (so the vendor sees it, disabled) but takes no job.
            let disabled = crate::switch::disabled(&shared.config.work_dir);
            if disabled != was_disabled {
                match &disabled {
                    Some(why) => {
                        tracing::warn!(reason = %why, "the runner is disabled (`nuon-runner enable` turns it back on): it takes no new job")
                    }
                    None => tracing::info!("the runner is enabled: it takes jobs again"),
                }
                shared.config.stats.set_disabled(disabled.clone());
                was_disabled = disabled.clone();
            }
            let stats = &shared.config.stats;
            stats.set_break_glass(crate::switch::break_glass_roles(&shared.config.work_dir));
            stats.set_tools(shared.config.plugins.tools());
            let asked = shared.hold.wait(claim_wait);
            let req = ClaimRequest {
                kinds: shared.kinds.clone(),
                slots: if disabled.is_some() {
                    0
                } else {
                    u32::try_from(free).unwrap_or(u32::MAX)
                },
                wait_ms: u64::try_from(asked.as_millis()).unwrap_or(u64::MAX),
                signing_key: Some(shared.keys.current().to_string()),
                telemetry: Some(shared.config.stats.telemetry()),
                settings_version: Some(lock(&shared.settings).version.clone()),
            };
            let transport = shared.config.transport.clone();
            let delay = claim_delay.take();
            claim = Some(Box::pin(async move {
                if let Some(d) = delay {
                    sleep(d).await;
                }
                let sent = Instant::now();
                let answer = transport.claim(&req).await;
                (answer, sent.elapsed(), asked)
            }));
        }
        tokio::select! {
            () = &mut shutdown => break Ok(()),
            _ = fatal.changed() => {
                if let Some(e) = fatal.borrow().clone() {
                    break Err(Error::Unauthorized(e));
                }
            }
            (answer, held, asked) = opt_future(&mut claim) => {
                claim = None;
                if let Ok(resp) = &answer {
                    // Before its jobs are checked: they may be signed by
                    // the new key.
                    shared.keys.learn(&resp.key_rotations);
                    shared.report_known_ends(&resp.known_leases);
                }
                match answer {
                    Ok(resp) if resp.jobs.is_empty() && was_disabled.is_some() => {
                        // Disabled: answered at once. Call again soon, so
                        // the runner stays healthy and an enable is seen.
                        shared.refresh_settings(resp.settings_version.as_deref()).await;
                        claim_delay = Some(DISABLED_POLL.min(claim_wait));
                    }
                    Ok(resp)
                        if resp.jobs.is_empty()
                            && resp.settings_version.as_deref().is_some_and(|v| v != lock(&shared.settings).version) =>
                    {
                        // Answered early because the settings changed (an
                        // update asked): take them, and claim again at once,
                        // unless they could not be taken (then not in a
                        // loop).
                        shared.refresh_settings(resp.settings_version.as_deref()).await;
                        if resp.settings_version.as_deref() == Some(lock(&shared.settings).version.as_str()) {
                            backoff.reset();
                        } else {
                            claim_delay = Some(backoff.next_delay());
                        }
                    }
                    Ok(resp) if resp.jobs.is_empty() && held < asked / 2 => {
                        // Nothing, and early: the server did not hold the
                        // claim. Do not spin; this is not the happy path.
                        let delay = backoff.next_delay();
                        tracing::debug!(held_ms = held.as_millis() as u64, retry_in_ms = delay.as_millis() as u64,
                            "empty claim answered early; pausing before the next");
                        claim_delay = Some(delay);
                    }
                    Ok(resp) => {
                        backoff.reset();
                        // Before its jobs start: they run with the new ones.
                        shared.refresh_settings(resp.settings_version.as_deref()).await;
                        for claimed in resp.jobs {
                            start_job(shared, &mut jobs, &mut task_keys, claimed);
                        }
                    }
                    Err(TransportError::Unauthorized(m)) => {
                        shared.report_fatal(TransportError::Unauthorized(m));
                    }
                    Err(TransportError::Rejected { status: 404, message }) => {
                        // No claim route at this address: the URL names
                        // something else (the Control API, a proxy's
                        // path). Retrying for ever would only hide it.
                        break Err(Error::Config(format!(
                            "the control plane has no Runner API at this address (404): {message}"
                        )));
                    }
                    Err(TransportError::Cut(_))
                        if shared.hold.cut("claim", asked, held) =>
                    {
                        // Cut on the way after being held a while: not the
                        // control plane failing. Again at once, held shorter.
                        backoff.reset();
                    }
                    Err(e) => {
                        let delay = backoff.next_delay();
                        shared.config.stats.error(format!("claiming jobs failed: {e}"));
                        tracing::warn!(error = %e, retry_in_ms = delay.as_millis() as u64, "claiming jobs failed; will retry");
                        claim_delay = Some(delay);
                    }
                }
            }
            Some(joined) = jobs.join_next_with_id() => job_joined(shared, &mut task_keys, joined),
        }
    };
    // Stop claiming: an answer to a dropped claim is lost, and the lease of
    // any job in it expires on the server.
    drop(claim);

    let mut result = stopped_by;
    if result.is_ok() {
        tracing::info!(
            running = jobs.len(),
            drain_timeout_s = shared.config.drain_timeout.as_secs(),
            "shutting down: no more claims; letting running jobs finish"
        );
        // An update's drain lets every job end: a rollout wave never stops
        // a long apply (the control plane bounds how long it waits).
        let until_done = shared
            .config
            .drain_until_done
            .load(std::sync::atomic::Ordering::Relaxed);
        let deadline = deadline_in(if until_done {
            Duration::from_secs(7 * 86_400)
        } else {
            shared.config.drain_timeout
        });
        if let Err(e) = wait_jobs(shared, &mut jobs, &mut task_keys, &mut fatal, deadline).await {
            result = Err(e);
        }
    }
    if !jobs.is_empty() {
        if result.is_ok() {
            tracing::warn!(
                running = jobs.len(),
                "drain timeout passed: stopping the jobs still running"
            );
        }
        shared.stop_all(StopReason::Shutdown);
        let deadline = deadline_in(shared.config.grace.saturating_add(STOP_SLACK));
        let _ = wait_jobs(shared, &mut jobs, &mut task_keys, &mut fatal, deadline).await;
        if !jobs.is_empty() {
            tracing::error!(
                running = jobs.len(),
                "jobs did not end after being stopped; abandoning them"
            );
            jobs.abort_all();
            while let Some(joined) = jobs.join_next_with_id().await {
                job_joined(shared, &mut task_keys, joined);
            }
        }
    }
    if result.is_ok() {
        let deadline = deadline_in(shared.config.ship_timeout);
        if !shared.wait_shippers(deadline).await {
            tracing::warn!(
                attempts = lock(&shared.shippers).len(),
                "could not deliver every log and completion in time; they stay in the spool for the next start"
            );
        }
        if let Some(e) = fatal.borrow().clone() {
            result = Err(Error::Unauthorized(e));
        }
    }
    shared.abort_all_shippers().await;
    result
}

/// Waits for running jobs until none is left or `deadline`; stops them all
/// when the token is refused meanwhile (and returns that error).
async fn wait_jobs(
    shared: &Arc<Shared>,
    jobs: &mut JoinSet<()>,
    task_keys: &mut HashMap<tokio::task::Id, Key>,
    fatal: &mut watch::Receiver<Option<TransportError>>,
    deadline: Instant,
) -> Result<()> {
    let mut result = Ok(());
    while !jobs.is_empty() {
        tokio::select! {
            Some(joined) = jobs.join_next_with_id() => job_joined(shared, task_keys, joined),
            r = fatal.changed(), if result.is_ok() => {
                if r.is_ok()
                    && let Some(e) = fatal.borrow().clone() {
                        shared.stop_all(StopReason::Shutdown);
                        result = Err(Error::Unauthorized(e));
                    }
            }
            () = sleep_until(deadline) => break,
        }
    }
    result
}

fn start_job(
    shared: &Arc<Shared>,
    jobs: &mut JoinSet<()>,
    task_keys: &mut HashMap<tokio::task::Id, Key>,
    claimed: ClaimedJob,
) {
    let key: Key = (claimed.job_id.clone(), claimed.attempt);
    let (stop_tx, stop_rx) = watch::channel(None);
    {
        let mut map = lock(&shared.jobs);
        if map.contains_key(&key) {
            tracing::error!(job = %key.0, attempt = key.1, "claimed an attempt this runner already runs; ignoring it");
            return;
        }
        map.insert(
            key.clone(),
            JobEntry {
                stop: stop_tx,
                leased: false,
            },
        );
    }
    shared.count();
    let job = JobRun {
        shared: shared.clone(),
        key: key.clone(),
        claimed,
        stop: stop_rx,
        signer: std::sync::OnceLock::new(),
    };
    let handle = jobs.spawn(job.run());
    task_keys.insert(handle.id(), key);
}

fn job_joined(
    shared: &Arc<Shared>,
    task_keys: &mut HashMap<tokio::task::Id, Key>,
    joined: std::result::Result<(tokio::task::Id, ()), tokio::task::JoinError>,
) {
    let (id, failure) = match joined {
        Ok((id, ())) => (id, None),
        Err(e) => (e.id(), Some(e)),
    };
    let Some(key) = task_keys.remove(&id) else {
        return;
    };
    lock(&shared.jobs).remove(&key);
    shared.count();
    if let Some(e) = failure {
        tracing::error!(job = %key.0, attempt = key.1, error = %e, "job task failed");
        let path = spool::attempt_path(&shared.spool_dir, &key.0, key.1);
        if path.exists() && matches!(spool::read_result(&path), Ok(None)) {
            let reason = format!("the runner's task for this job failed: {e}");
            let finished = SpoolWriter::reopen(&path, Arc::new(Notify::new())).and_then(|mut w| {
                w.system(&reason);
                w.finish(&JobResult::failed(reason.clone()))
            });
            if let Err(e) = finished {
                tracing::error!(file = %path.display(), error = %e, "cannot finish the attempt's spool");
            }
        }
    }
}

/// How the first heartbeat of a job went.
enum Start {
    Go,
    Stop(StopReason),
    Fatal,
}

/// One claimed job, from the signature check to its result.
struct JobRun {
    shared: Arc<Shared>,
    key: Key,
    claimed: ClaimedJob,
    stop: watch::Receiver<Option<StopReason>>,
    /// The key that signed the spec, once [`Self::check`] verified it.
    signer: std::sync::OnceLock<nuon_core::PublicKey>,
}

impl JobRun {
    async fn first_heartbeat(&mut self) -> Start {
        let req = HeartbeatRequest {
            leases: vec![LeaseRef {
                job_id: self.key.0.clone(),
                attempt: self.key.1,
            }],
            wait_ms: 0,
            telemetry: None,
        };
        let mut backoff = self.shared.backoff();
        let transport = self.shared.config.transport.clone();
        loop {
            if let Some(reason) = *self.stop.borrow() {
                return Start::Stop(reason);
            }
            let sent = Instant::now();
            let answer = tokio::select! {
                r = transport.heartbeat(&req) => r,
                r = self.stop.changed() => {
                    if r.is_err() {
                        return Start::Stop(StopReason::Shutdown);
                    }
                    continue;
                }
            };
            match answer {
                Ok(resp) => {
                    // Answered at once (no wait asked): its round trip.
                    self.shared.config.stats.heartbeat(sent.elapsed());
                    let state = resp
                        .leases
                        .iter()
                        .find(|l| l.job_id == self.key.0 && l.attempt == self.key.1)
                        .map(|l| l.state);
                    return match state {
                        Some(LeaseState::Active) => Start::Go,
                        Some(LeaseState::Cancel) => Start::Stop(StopReason::Cancelled),
                        Some(LeaseState::Stale) | None => Start::Stop(StopReason::Stale),
                    };
                }
                Err(TransportError::Unauthorized(m)) => {
                    self.shared.report_fatal(TransportError::Unauthorized(m));
                    return Start::Fatal;
                }
                Err(TransportError::Stale(_)) => return Start::Stop(StopReason::Stale),
                Err(e) => {
                    let delay = backoff.next_delay();
                    tracing::warn!(job = %self.key.0, attempt = self.key.1, error = %e,
                        retry_in_ms = delay.as_millis() as u64,
                        "first heartbeat of the job failed; will retry before starting it");
                    tokio::select! {
                        () = sleep(delay) => {}
                        r = self.stop.changed() => {
                            if r.is_err() {
                                return Start::Stop(StopReason::Shutdown);
                            }
                        }
                    }
                }
            }
        }
    }

    /// The attempt is not ours any more: drop its log, never complete it.
    /// The caller closes the writer first (see [`SpoolWriter::close`]), so
    /// that a pipe thread still running cannot write into the file being
    /// removed.
    async fn drop_stale(&self, (path, log_lines): (PathBuf, u64)) {
        self.shared.journal.record(
            "job.dropped",
            self.key.0.as_str(),
            "stale",
            format!(
                "attempt {}: its lease went to a newer attempt or expired; not completed here",
                self.key.1
            ),
        );
        self.shared.accepted.dropped(&self.key.0, self.key.1);
        tracing::warn!(job = %self.key.0, attempt = self.key.1, log_lines,
            "the attempt is stale (its lease is lost to a newer attempt or expired); dropping its log spool without completing it");
        self.shared.abort_shipper(&self.key).await;
        spool::remove(&path);
    }

    /// How the job's processes are confined: `None` as process groups;
    /// under `--isolation container`, its image prepared (fetched, checked
    /// and unpacked once per digest), its limits and network. `Err`: why
    /// the job cannot run.
    async fn containers_for(
        &self,
        spec: &JobSpec,
        in_process: bool,
        spool: &mut SpoolWriter,
    ) -> std::result::Result<Option<JobContainers>, JobResult> {
        let ended = |outcome: Outcome, reason: String| JobResult {
            outcome,
            exit_code: None,
            reason: Some(reason),
            outputs: serde_json::Value::Null,
        };
        if in_process {
            return Ok(None);
        }
        let Some(rt) = &self.shared.containers else {
            if !spec.sandbox.is_unset() {
                spool.system(
                    "this runner runs jobs as process groups (--isolation process): the job's image, limits and network settings are not applied",
                );
            }
            return Ok(None);
        };
        let image = spec
            .sandbox
            .image
            .clone()
            .or_else(|| rt.options.default_image.clone())
            .ok_or_else(|| {
                JobResult::failed("the job names no container image and this runner, which runs jobs in containers (--isolation container), has no default (--job-image)")
            })?;
        let started = std::time::Instant::now();
        // A store that hangs, a cancel or the runner's shutdown stop the
        // preparation too (and free the image for other jobs).
        let mut stop = self.stop.clone();
        let bound = Duration::from_secs(spec.timeout_secs);
        let root = tokio::select! {
            r = rt.options.images.prepare(&image) => r.map_err(|e| {
                JobResult::failed(format!("the job's image is refused, nothing of the job ran: {e}"))
            })?,
            r = stop.wait_for(Option::is_some) => {
                let reason = r.ok().and_then(|s| *s);
                let (outcome, why) = match reason {
                    Some(StopReason::Cancelled) => (Outcome::Cancelled, "cancelled"),
                    Some(StopReason::TimedOut) => (Outcome::TimedOut, "timed out"),
                    Some(StopReason::Stale) => (Outcome::Failed, "its lease was lost"),
                    Some(StopReason::Shutdown) | None => (Outcome::Failed, "the runner is shutting down"),
                };
                return Err(ended(outcome, format!(
                    "{why} while its image {image} was being prepared; nothing of the job ran"
                )));
            }
            () = tokio::time::sleep(bound) => {
                return Err(ended(Outcome::TimedOut, format!(
                    "timed out: its image {image} was not ready within the job's timeout ({}s); nothing of the job ran",
                    bound.as_secs()
                )));
            }
        };
        let limits = rt.options.limits.for_job(&spec.sandbox);
        // The customer's policy wins over what the job asks for.
        let allowed =
            spec.kind != <nuon_core::ExecJob as nuon_core::Job>::KIND || rt.options.exec_network;
        if spec.sandbox.network == Some(true) && !allowed {
            spool.system(
                "the job asks for the network; this runner's policy denies it to commands (--exec-network off)",
            );
        }
        let network = allowed && spec.sandbox.network.unwrap_or(true);
        spool.system(&format!(
            "in containers of {image}{}: memory {} MiB, {} CPU, {} processes, network {}",
            match (root.synced, root.unpacked) {
                (true, _) => format!(
                    " (synced from the vendor's store and unpacked in {} ms)",
                    started.elapsed().as_millis()
                ),
                (false, true) => format!(" (unpacked in {} ms)", started.elapsed().as_millis()),
                (false, false) => String::new(),
            },
            limits.memory_bytes >> 20,
            limits.millicpus as f64 / 1000.0,
            limits.pids,
            if network { "on" } else { "off" }
        ));
        Ok(Some(JobContainers {
            runtime: rt.clone(),
            image,
            root,
            limits,
            network,
            name: format!("{}-{}", self.key.0, self.key.1),
        }))
    }

    /// Refuses the job: it never runs. In the journal as refused.
    fn refuse(&self, spool: &mut SpoolWriter, reason: String) {
        self.journal_refused(&reason);
        spool.system(&reason);
        self.write_result(spool, &JobResult::failed(reason));
    }

    fn finish(&self, spool: &mut SpoolWriter, result: &JobResult) {
        let outcome = nuon_core::JobStatus::from(result.outcome).as_str();
        self.shared.config.stats.job_ended(outcome);
        let mut detail = format!("attempt {}", self.key.1);
        if let Some(code) = result.exit_code {
            detail.push_str(&format!("; exit code {code}"));
        }
        if let Some(r) = &result.reason {
            detail.push_str("; ");
            detail.push_str(&r.chars().take(500).collect::<String>());
        }
        self.shared
            .journal
            .record("job.finished", self.key.0.as_str(), outcome, detail);
        self.shared
            .accepted
            .finish(&self.key.0, self.key.1, outcome);
        self.write_result(spool, result);
    }

    fn write_result(&self, spool: &mut SpoolWriter, result: &JobResult) {
        tracing::info!(
            job = %self.key.0,
            attempt = self.key.1,
            outcome = ?result.outcome,
            exit_code = ?result.exit_code,
            reason = result.reason.as_deref().unwrap_or(""),
            log_lines = spool.lines(),
            "job finished"
        );
        if let Err(e) = spool.finish(result) {
            tracing::error!(job = %self.key.0, attempt = self.key.1, error = %e,
                "cannot write the attempt's result to the spool; it is completed as failed at the next start");
        }
    }

    async fn run(mut self) {
        let meta = Meta {
            job_id: self.key.0.clone(),
            attempt: self.key.1,
        };
        // Checked (a refusal journaled) before anything is written.
        let Some(checked) = self.checked() else {
            return;
        };
        let notify = Arc::new(Notify::new());
        let mut spool = match SpoolWriter::create(&self.shared.spool_dir, &meta, notify.clone()) {
            Ok(w) => w,
            Err(e) => {
                if let Err(reason) = &checked {
                    tracing::error!(job = %self.key.0, attempt = self.key.1, "{reason}");
                    self.journal_refused(reason);
                }
                tracing::error!(job = %meta.job_id, attempt = meta.attempt, error = %e,
                    "cannot create the attempt's log spool; not running the job (its lease will expire)");
                return;
            }
        };
        self.shared
            .spawn_shipper(spool.path().to_path_buf(), meta, notify);

        let mut spec = match checked {
            Ok(spec) => {
                spool.set_redact(&spec.redact);
                spec
            }
            Err(reason) => {
                tracing::error!(job = %self.key.0, attempt = self.key.1, "{reason}");
                return self.refuse(&mut spool, reason);
            }
        };
        let Some(plugin) = self.shared.config.plugins.get(&spec.kind).cloned() else {
            let reason = format!(
                "no plugin for job kind {:?} on this runner (it has: {})",
                spec.kind,
                self.shared.kinds.join(", ")
            );
            tracing::error!(job = %self.key.0, attempt = self.key.1, "{reason}");
            return self.refuse(&mut spool, reason);
        };
        if let Err(e) = plugin.validate(&spec) {
            let reason = e.to_string();
            tracing::warn!(job = %self.key.0, attempt = self.key.1, kind = %spec.kind, "job is not valid here: {reason}");
            return self.refuse(&mut spool, reason);
        }
        // The role of the job's operation, as the stack created it; a
        // role it did not create (or a break-glass one that is off) is
        // refused.
        let mut redact = spec.redact.clone();
        let (role_env, lease) = match self.role(&spec, &mut spool, &mut redact).await {
            Ok(handed) => (handed.env, handed.lease),
            Err(reason) => return self.refuse(&mut spool, reason),
        };
        // The customer-held secrets it prints, read here with its role.
        let secrets = &self.shared.config.customer_secrets;
        if let Err(reason) = secrets
            .fill_job(&mut spec, &role_env, &mut redact, &mut spool)
            .await
        {
            return self.refuse(&mut spool, reason);
        }
        self.shared.journal.record(
            "job.accepted",
            self.key.0.as_str(),
            "accepted",
            format!(
                "attempt {}; kind {}; {}",
                self.key.1,
                spec.kind,
                self.provenance()
            ),
        );
        match self.first_heartbeat().await {
            Start::Go => {}
            Start::Fatal => return,
            Start::Stop(StopReason::Stale) => return self.drop_stale(spool.close()).await,
            Start::Stop(reason) => {
                let result = match reason {
                    StopReason::Cancelled => JobResult {
                        outcome: Outcome::Cancelled,
                        exit_code: None,
                        reason: Some("cancelled before it started".into()),
                        outputs: serde_json::Value::Null,
                    },
                    _ => JobResult::failed("the runner shut down before the job started"),
                };
                spool.system(result.reason.as_deref().unwrap_or_default());
                return self.finish(&mut spool, &result);
            }
        }
        self.shared.set_leased(&self.key);

        // The job's image, every layer checked, before anything of it runs.
        let containers = match self
            .containers_for(&spec, plugin.in_process(), &mut spool)
            .await
        {
            Ok(c) => c,
            Err(result) => {
                let reason = result.reason.clone().unwrap_or_default();
                tracing::warn!(job = %self.key.0, attempt = self.key.1, "{reason}");
                spool.system(&reason);
                if *self.stop.borrow() == Some(StopReason::Stale) {
                    return self.drop_stale(spool.close()).await;
                }
                return self.finish(&mut spool, &result);
            }
        };

        let work_dir = match tempfile::Builder::new()
            .prefix(&format!("{}-{}-", self.key.0, self.key.1))
            .tempdir_in(&self.shared.jobs_dir)
        {
            Ok(d) => d,
            Err(e) => {
                let reason = format!(
                    "cannot create the job's work directory in {}: {e}",
                    self.shared.jobs_dir.display()
                );
                tracing::error!(job = %self.key.0, attempt = self.key.1, "{reason}");
                spool.system(&reason);
                return self.finish(&mut spool, &JobResult::failed(reason));
            }
        };
        tracing::info!(job = %self.key.0, attempt = self.key.1, kind = %spec.kind, "job started");
        let mut env: BTreeMap<String, String> = self.shared.config.env.clone();
        // The control plane's settings over the runner's own environment;
        // the job's own environment (set per process) over both.
        env.extend(lock(&self.shared.settings).env.clone());
        env.extend(role_env);
        env.insert("NUON_JOB_ID".into(), self.key.0.to_string());
        env.insert("NUON_JOB_ATTEMPT".into(), self.key.1.to_string());
        let timeout = Duration::from_secs(spec.timeout_secs);
        let mut host = ProcessHost {
            work_dir: work_dir.path().to_path_buf(),
            spool: SharedSpool::new(spool),
            stop: self.stop.clone(),
            deadline: deadline_in(timeout),
            timeout,
            grace: self.shared.config.grace,
            env,
            guard: self.shared.guard.clone(),
            stopped: None,
            containers,
        };
        let outcome = plugin.run(&spec, &mut host).await;
        // The job's credentials end with it.
        drop(lease);
        let stopped = host.stopped.or(*self.stop.borrow());
        let removed = tokio::task::spawn_blocking(move || work_dir.close()).await;
        if let Ok(Err(e)) = removed {
            tracing::warn!(job = %self.key.0, attempt = self.key.1, error = %e, "cannot remove the job's work directory");
        }
        if stopped == Some(StopReason::Stale) {
            let closed = host.spool.lock().close();
            return self.drop_stale(closed).await;
        }
        let mut spool = host.spool.lock();
        let result = match outcome {
            Ok(result) => result,
            Err(e) => {
                let reason = e.to_string();
                spool.system(&reason);
                JobResult::failed(reason)
            }
        };
        self.finish(&mut spool, &result);
    }
}
