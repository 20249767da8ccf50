//! An in-memory control plane behind the `Transport` trait, and a harness
//! that signs jobs and runs a `Runner` against it.

use nuon_core::Signed as _;
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use nuon_core::wire::{
    ClaimRequest, ClaimResponse, ClaimedJob, Completion, CompletionAck, HeartbeatRequest,
    HeartbeatResponse, LeaseState, LeaseStatus, LogAck, LogBatch, LogLine, LogStream,
};
use nuon_core::{
    ExecJob, Job, JobId, JobSpec, OrgId, OrgSigningKey, RunnerId, Transport, TransportError,
};
use nuon_runner_lib::{Runner, RunnerConfig};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

/// One attempt of one job.
pub type Key = (JobId, u32);

/// What the fake control plane holds; tests read and change it.
#[derive(Default)]
pub struct State {
    /// Jobs waiting to be claimed.
    pub queue: VecDeque<ClaimedJob>,
    /// Claim answers served again by someone on the link, not by the
    /// control plane: answered after the queue, with no lease made.
    pub replays: VecDeque<ClaimedJob>,
    /// Lease states by attempt.
    pub leases: HashMap<Key, LeaseState>,
    /// The stored log of each attempt (seq = index + 1).
    pub logs: HashMap<Key, Vec<LogLine>>,
    /// Accepted completions.
    pub completions: HashMap<JobId, Completion>,
    /// Every call fails with `Unavailable` while set.
    pub unavailable: bool,
    /// Every call fails with `Unauthorized` while set.
    pub unauthorized: bool,
    /// Calls refused because of `unavailable`.
    pub failed_calls: usize,
    /// Every claim request received.
    pub claims: Vec<ClaimRequest>,
    /// Claims the runner gave up on before they were answered.
    pub claims_abandoned: usize,
    /// Every heartbeat request received.
    pub heartbeats: Vec<HeartbeatRequest>,
    /// `(first_seq, lines)` of every log batch received.
    pub batches: Vec<(u64, usize)>,
    /// Store only half of the next multi-line batch (an ack lower than what was sent).
    pub short_ack_once: bool,
    /// `(first_seq, lines)` of the log lines each completion carried.
    pub carried: Vec<(u64, usize)>,
    /// Ignore the log lines a completion carries, as a control plane of a
    /// release before them does.
    pub ignores_completion_logs: bool,
}

impl State {
    /// Stores the lines of `batch` past those held; the high mark.
    fn store(&mut self, key: Key, batch: &LogBatch) -> u64 {
        let short = std::mem::take(&mut self.short_ack_once);
        let stored = self.logs.entry(key).or_default();
        let have = stored.len() as u64;
        if batch.first_seq <= have + 1 {
            let skip = (have + 1 - batch.first_seq) as usize;
            let mut new: Vec<LogLine> =
                batch.lines.iter().skip(skip).map(|l| l.to_line()).collect();
            if short && new.len() > 1 {
                new.truncate(new.len() / 2);
            } else if short {
                self.short_ack_once = true;
            }
            stored.extend(new);
        }
        stored.len() as u64
    }

    /// The texts of an attempt's stored lines on `stream`.
    pub fn texts(&self, key: &Key, stream: LogStream) -> Vec<String> {
        self.logs
            .get(key)
            .map(|lines| {
                lines
                    .iter()
                    .filter(|l| l.stream == stream)
                    .map(|l| l.text.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn check(&mut self) -> Result<(), TransportError> {
        if self.unauthorized {
            return Err(TransportError::Unauthorized("token revoked".into()));
        }
        if self.unavailable {
            self.failed_calls += 1;
            return Err(TransportError::Unavailable("control plane down".into()));
        }
        Ok(())
    }
}

/// The fake control plane.
#[derive(Default)]
pub struct Fake {
    state: Mutex<State>,
    changed: Notify,
}

impl Fake {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the state and wakes held requests and waiting tests.
    pub fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let r = f(&mut self.lock());
        self.changed.notify_waiters();
        r
    }

    /// Waits until `f` finds something in the state, at most `within`.
    pub async fn wait_for<R>(
        &self,
        what: &str,
        within: Duration,
        mut f: impl FnMut(&State) -> Option<R>,
    ) -> R {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = f(&self.lock()) {
                return r;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                panic!("timed out after {within:?} waiting for {what}");
            }
        }
    }

    /// Waits for the completion of `job`.
    pub async fn completion(&self, job: &JobId, within: Duration) -> Completion {
        self.wait_for(&format!("completion of {job}"), within, |s| {
            s.completions.get(job).cloned()
        })
        .await
    }

    /// Waits until an attempt's stored log has a line `pred` accepts; returns its text.
    pub async fn line(
        &self,
        key: &Key,
        within: Duration,
        pred: impl Fn(&LogLine) -> bool,
    ) -> String {
        self.wait_for(&format!("a log line of {}", key.0), within, |s| {
            s.logs
                .get(key)
                .and_then(|lines| lines.iter().find(|l| pred(l)))
                .map(|l| l.text.clone())
        })
        .await
    }

    /// Holds a request until the state changes or `deadline`.
    async fn hold<R>(
        &self,
        deadline: tokio::time::Instant,
        mut f: impl FnMut(&mut State) -> Option<Result<R, TransportError>>,
        on_timeout: impl FnOnce(&mut State) -> R,
    ) -> Result<R, TransportError> {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(r) = f(&mut self.lock()) {
                return r;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return Ok(on_timeout(&mut self.lock()));
            }
        }
    }
}

fn statuses(state: &State, req: &HeartbeatRequest) -> Vec<LeaseStatus> {
    req.leases
        .iter()
        .map(|l| LeaseStatus {
            job_id: l.job_id.clone(),
            attempt: l.attempt,
            state: state
                .leases
                .get(&(l.job_id.clone(), l.attempt))
                .copied()
                .unwrap_or(LeaseState::Stale),
        })
        .collect()
}

fn hb_response(leases: Vec<LeaseStatus>) -> HeartbeatResponse {
    HeartbeatResponse {
        leases,
        lease_ms: 60_000,
        next_heartbeat_ms: 1_000,
        settings_version: None,
    }
}

#[async_trait]
impl Transport for Fake {
    async fn claim(&self, req: &ClaimRequest) -> Result<ClaimResponse, TransportError> {
        /// Counts the claim as abandoned if it is dropped before it answers.
        struct Abandoned<'a>(&'a Fake, bool);
        impl Drop for Abandoned<'_> {
            fn drop(&mut self) {
                if !self.1 {
                    self.0.with(|s| s.claims_abandoned += 1);
                }
            }
        }
        let deadline = tokio::time::Instant::now() + Duration::from_millis(req.wait_ms);
        self.with(|s| s.claims.push(req.clone()));
        let mut abandoned = Abandoned(self, false);
        let answer = self
            .hold(
                deadline,
                |s| {
                    if let Err(e) = s.check() {
                        return Some(Err(e));
                    }
                    let jobs: Vec<ClaimedJob> = if !s.queue.is_empty() {
                        let n = (req.slots as usize).min(s.queue.len());
                        let jobs: Vec<ClaimedJob> = s.queue.drain(..n).collect();
                        for j in &jobs {
                            s.leases
                                .insert((j.job_id.clone(), j.attempt), LeaseState::Active);
                        }
                        jobs
                    } else if let Some(replayed) = s.replays.pop_front() {
                        vec![replayed]
                    } else {
                        return None;
                    };
                    Some(Ok(ClaimResponse {
                        jobs,
                        key_rotations: Vec::new(),
                        settings_version: None,
                        known_leases: Vec::new(),
                    }))
                },
                |_| ClaimResponse {
                    jobs: Vec::new(),
                    key_rotations: Vec::new(),
                    settings_version: None,
                    known_leases: Vec::new(),
                },
            )
            .await;
        abandoned.1 = true;
        answer
    }

    async fn heartbeat(&self, req: &HeartbeatRequest) -> Result<HeartbeatResponse, TransportError> {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(req.wait_ms);
        self.with(|s| s.heartbeats.push(req.clone()));
        let immediate = req.wait_ms == 0;
        self.hold(
            deadline,
            |s| {
                if let Err(e) = s.check() {
                    return Some(Err(e));
                }
                let st = statuses(s, req);
                if immediate || st.iter().any(|l| l.state != LeaseState::Active) {
                    Some(Ok(hb_response(st)))
                } else {
                    None
                }
            },
            |s| hb_response(statuses(s, req)),
        )
        .await
    }

    async fn append_logs(&self, job: &JobId, batch: &LogBatch) -> Result<LogAck, TransportError> {
        self.with(|s| {
            s.check()?;
            let key = (job.clone(), batch.attempt);
            if s.leases.get(&key) != Some(&LeaseState::Active)
                && s.leases.get(&key) != Some(&LeaseState::Cancel)
            {
                return Err(TransportError::Stale("attempt is stale".into()));
            }
            s.batches.push((batch.first_seq, batch.lines.len()));
            Ok(LogAck {
                acked_seq: s.store(key, batch),
            })
        })
    }

    async fn complete(
        &self,
        job: &JobId,
        completion: &Completion,
    ) -> Result<CompletionAck, TransportError> {
        self.with(|s| {
            s.check()?;
            let key = (job.clone(), completion.attempt);
            if let Some(done) = s.completions.get(job)
                && done.attempt == completion.attempt
            {
                return Ok(CompletionAck {
                    status: done.result.outcome.into(),
                });
            }
            if s.leases.get(&key) != Some(&LeaseState::Active)
                && s.leases.get(&key) != Some(&LeaseState::Cancel)
            {
                return Err(TransportError::Stale("attempt is stale".into()));
            }
            if let Some(logs) = completion.logs.clone()
                && !s.ignores_completion_logs
            {
                let batch = logs.into_batch(completion.attempt).map_err(|message| {
                    TransportError::Rejected {
                        status: 400,
                        message,
                    }
                })?;
                s.carried.push((batch.first_seq, batch.lines.len()));
                s.store(key.clone(), &batch);
            }
            let have = s.logs.get(&key).map_or(0, |l| l.len() as u64);
            if completion.log_lines > have {
                return Err(TransportError::LogsPending { acked_seq: have });
            }
            s.completions.insert(job.clone(), completion.clone());
            Ok(CompletionAck {
                status: completion.result.outcome.into(),
            })
        })
    }
}

/// A signing key, a runner identity, a work directory and a fake control plane.
pub struct Harness {
    pub fake: Arc<Fake>,
    pub key: OrgSigningKey,
    pub org: OrgId,
    pub runner_id: RunnerId,
    pub dir: tempfile::TempDir,
}

/// A runner running in a task.
pub struct Running {
    pub handle: JoinHandle<nuon_runner_lib::Result<()>>,
    shutdown: Option<oneshot::Sender<()>>,
}

impl Running {
    /// Resolves the shutdown future.
    pub fn shutdown(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }

    /// Shuts down and waits for `run` to return, at most `within`.
    pub async fn stop(mut self, within: Duration) -> nuon_runner_lib::Result<()> {
        self.shutdown();
        self.join(within).await
    }

    /// Waits for `run` to return, at most `within`.
    pub async fn join(self, within: Duration) -> nuon_runner_lib::Result<()> {
        tokio::time::timeout(within, self.handle)
            .await
            .expect("runner did not return in time")
            .expect("runner task panicked")
    }
}

/// Seconds, for readable timeouts.
pub fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

impl Harness {
    pub fn new() -> Self {
        Harness {
            fake: Arc::new(Fake::default()),
            key: OrgSigningKey::generate(),
            org: OrgId::generate(),
            runner_id: RunnerId::generate(),
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn work_dir(&self) -> PathBuf {
        self.dir.path().join("work")
    }

    /// A configuration with short waits, for tests.
    pub fn config(&self) -> RunnerConfig {
        let mut c = RunnerConfig::new(
            self.fake.clone(),
            self.key.public_key(),
            self.runner_id.clone(),
            self.work_dir(),
        );
        c.claim_wait = secs(5);
        c.heartbeat_wait = secs(1);
        c.grace = secs(1);
        c.drain_timeout = secs(30);
        c.ship_timeout = secs(10);
        c.backoff_base = Duration::from_millis(10);
        c.backoff_cap = Duration::from_millis(200);
        c
    }

    /// An exec job running `sh -c script`.
    pub fn sh(&self, script: &str) -> JobSpec {
        self.spec(
            serde_json::json!({"command": "sh", "args": ["-c", script]}),
            60,
        )
    }

    pub fn spec(&self, payload: serde_json::Value, timeout_secs: u64) -> JobSpec {
        JobSpec {
            job_id: JobId::generate(),
            org_id: self.org.clone(),
            runner_id: self.runner_id.clone(),
            kind: ExecJob::KIND.into(),
            payload,
            timeout_secs,
            retry: Default::default(),
            created_at_ms: nuon_core::now_ms(),
            redact: Vec::new(),
            role: None,
            sandbox: Default::default(),
            customer_secrets: Vec::new(),
        }
    }

    /// The claim of a spec, signed by the org's key.
    pub fn claimed(&self, spec: &JobSpec) -> ClaimedJob {
        self.claimed_attempt(spec, 1)
    }

    /// The claim of `attempt` of a spec, signed and granted by the org's
    /// key.
    pub fn claimed_attempt(&self, spec: &JobSpec, attempt: u32) -> ClaimedJob {
        let text = serde_json::to_string(spec).unwrap();
        let not_after_ms = nuon_core::Grant::not_after(nuon_core::now_ms(), 60_000);
        let grant = nuon_core::Grant {
            job_id: &spec.job_id,
            attempt,
            runner_id: &self.runner_id,
            not_after_ms,
            spec: text.as_bytes(),
        };
        ClaimedJob {
            job_id: spec.job_id.clone(),
            attempt,
            signature: self.key.sign_now(text.as_bytes()),
            grant: self.key.sign_now(&grant.signed_bytes()),
            not_after_ms,
            spec: text,
            lease_ms: 60_000,
        }
    }

    /// Queues a claim; returns its attempt key.
    pub fn enqueue(&self, claimed: ClaimedJob) -> Key {
        let key = (claimed.job_id.clone(), claimed.attempt);
        self.fake.with(|s| s.queue.push_back(claimed));
        key
    }

    /// Takes the control plane away, lets the job waiting for the file
    /// `go` go on, and waits for its end in the spool.
    pub async fn end_while_away(&self, go: &Path, key: &Key) {
        self.fake.with(|s| s.unavailable = true);
        std::fs::write(go, "").unwrap();
        eventually("the job to end during the outage", secs(30), || {
            spool_ended(&self.work_dir(), key)
        })
        .await;
    }

    /// Queues a spec, signed.
    pub fn enqueue_spec(&self, spec: &JobSpec) -> Key {
        self.enqueue(self.claimed(spec))
    }

    /// Starts a runner in a task.
    pub fn start(&self, config: RunnerConfig) -> Running {
        let (tx, rx) = oneshot::channel::<()>();
        let handle = tokio::spawn(Runner::new(config).run(async move {
            let _ = rx.await;
        }));
        Running {
            handle,
            shutdown: Some(tx),
        }
    }
}

/// Whether a process exists and is not a zombie.
pub fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z') && !rest.starts_with('X')),
        Err(_) => false,
    }
}

/// Polls `cond` (for things only the file system or the kernel can tell)
/// every 20 ms, at most `within`.
pub async fn eventually(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < within,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The spool file of an attempt.
pub fn spool_file(work: &Path, key: &Key) -> PathBuf {
    work.join("spool").join(format!("{}-{}.log", key.0, key.1))
}

/// Whether an attempt's spool file holds its result (its last record).
pub fn spool_ended(work: &Path, key: &Key) -> bool {
    std::fs::read(spool_file(work, key)).is_ok_and(|raw| {
        let body = raw.strip_suffix(b"\n").unwrap_or_default();
        body.rsplit(|b| *b == b'\n')
            .next()
            .is_some_and(|last| last.starts_with(b"R{"))
    })
}

/// Bounds a future, failing the test instead of hanging it.
pub async fn within<F: Future>(what: &str, limit: Duration, f: F) -> F::Output {
    tokio::time::timeout(limit, f)
        .await
        .unwrap_or_else(|_| panic!("timed out after {limit:?}: {what}"))
}
