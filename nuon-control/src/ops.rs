//! Operating the fleet after day one: the audit trail's writer, runner
//! health transitions, webhook deliveries, and the control plane's
//! metrics.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nuon_core::audit::AuditEntry;
use nuon_core::metrics::{Exposition, Histogram, LATENCY_BUCKETS, STEP_BUCKETS};
use nuon_core::webhook::{self, WebhookEvent};
use nuon_core::wire::{DeliveryStatus, RunnerHealth};
use nuon_core::{OrgId, now_ms};
use tokio::sync::{mpsc, oneshot};

mod runner_health;
pub(crate) use runner_health::check_runners;

use crate::secrets::{SecretBox, webhook_context};
use crate::store::{AuditHeads, DeliveryTry, NewAudit, Store, StoreError};

/// The most entries one append writes.
const MAX_AUDIT_BATCH: usize = 4096;
/// How long a caller waits for its entry to be written before going on
/// (the entry stays queued, and is written when the store is back).
const AUDIT_WAIT: Duration = Duration::from_secs(5);

/// Settings of the operations layer.
#[derive(Debug, Clone)]
pub struct OpsConfig {
    /// A runner silent this long is unhealthy (default 90 s).
    pub runner_unhealthy_after: Duration,
    /// A runner silent this long is offline (default 5 min).
    pub runner_offline_after: Duration,
    /// How long a step waits for its install's runner (a provision's
    /// `await runner`, a step whose runner the customer disabled) before
    /// it fails (default 15 min).
    pub await_runner_timeout: Duration,
    /// How long a downloaded install stack's one-time token works (default
    /// 24 h); a provision's `await install stack` step waits as long.
    pub stack_token_ttl: Duration,
    /// A plan older than this when its apply is about to run is planned
    /// again first (default 72 h).
    pub plan_max_age: Duration,
    /// The longest wait between two tries of a webhook delivery (default
    /// 5 min); the waits double from 1 s up to it.
    pub webhook_max_backoff: Duration,
    /// When a delivery is given up on, counted from its event (default 3 days).
    pub webhook_give_up_after: Duration,
    /// Whether webhooks may point at loopback, private, link-local and
    /// other non-public addresses (default no: an org's webhook must not
    /// reach into the control plane's own network).
    pub webhook_allow_private: bool,
    /// The vendor's bucket CloudFormation quick-create templates are put
    /// in (AWS's console reads them from S3 only); without one, the
    /// installer page's "Launch stack" names the control plane's own
    /// template link.
    pub stack_templates: Option<crate::s3::TemplateBucket>,
    /// How often an install's runner runs its components' health probes
    /// between deploys (default 60 s).
    pub probe_interval: Duration,
    /// How many failed sign-ins and token checks an address (and an
    /// account) may make before it is answered `429`.
    pub sign_in_throttle: crate::throttle::ThrottleConfig,
    /// Bytes of log kept per job attempt (default 256 MiB); past it the log
    /// says it was truncated and the job goes on.
    pub log_quota_per_job: u64,
    /// Bytes of log a runner may ship per hour (default 4 GiB), across its
    /// jobs; past it its jobs' logs are truncated the same way.
    pub log_quota_per_runner: u64,
    /// Changes in a runner's telemetry that set something off (break-glass
    /// roles turned on or off, probes failing or recovering) taken at once
    /// (default 10); past them, one per minute in
    /// [`Self::telemetry_effects_per_minute`], the others wait.
    pub telemetry_effects_burst: u32,
    /// Such changes taken per minute after the burst (default 6).
    pub telemetry_effects_per_minute: u32,
}

impl Default for OpsConfig {
    fn default() -> Self {
        OpsConfig {
            runner_unhealthy_after: Duration::from_secs(90),
            runner_offline_after: Duration::from_secs(300),
            await_runner_timeout: Duration::from_secs(900),
            stack_token_ttl: Duration::from_secs(24 * 3600),
            plan_max_age: Duration::from_secs(72 * 3600),
            webhook_max_backoff: Duration::from_secs(300),
            webhook_give_up_after: Duration::from_secs(3 * 86_400),
            webhook_allow_private: false,
            stack_templates: None,
            probe_interval: Duration::from_secs(60),
            sign_in_throttle: Default::default(),
            log_quota_per_job: 256 << 20,
            log_quota_per_runner: 4 << 30,
            telemetry_effects_burst: 10,
            telemetry_effects_per_minute: 6,
        }
    }
}

/// A duration in whole milliseconds, as the store's times count them.
fn ms(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

impl OpsConfig {
    /// When what a runner shows (whether it is there, after `window`; its
    /// health) next moves after `now`: the first of its thresholds from its
    /// last call still ahead; never for a revoked runner or one never seen.
    pub(crate) fn shown_until(
        &self,
        window: Duration,
        revoked: bool,
        last_seen_ms: Option<i64>,
        now: i64,
    ) -> i64 {
        match (revoked, last_seen_ms) {
            (false, Some(at)) => [
                window,
                self.runner_unhealthy_after,
                self.runner_offline_after,
            ]
            .into_iter()
            .map(|d| at.saturating_add(ms(d)))
            .filter(|t| *t > now)
            .min()
            .unwrap_or(i64::MAX),
            _ => i64::MAX,
        }
    }

    /// A runner's health from its last call, at `now`.
    pub(crate) fn health(
        &self,
        revoked: bool,
        last_seen_ms: Option<i64>,
        now: i64,
    ) -> RunnerHealth {
        match (revoked, last_seen_ms) {
            (true, _) => RunnerHealth::Offline,
            (false, None) => RunnerHealth::Unknown,
            (false, Some(at)) if now - at >= ms(self.runner_offline_after) => RunnerHealth::Offline,
            (false, Some(at)) if now - at >= ms(self.runner_unhealthy_after) => {
                RunnerHealth::Unhealthy
            }
            (false, Some(_)) => RunnerHealth::Healthy,
        }
    }
}

struct Pending {
    entry: NewAudit,
    done: Option<oneshot::Sender<()>>,
}

/// The most entries waiting to be written: past it, callers wait for room
/// (the API slows down rather than the queue growing without bound).
const MAX_AUDIT_QUEUE: usize = 100_000;

/// Appends audit entries in batches: everything queued while one batch is
/// written goes in the next, in the order recorded (group commit).
pub struct Auditor {
    tx: mpsc::Sender<Pending>,
    queued: AtomicU64,
    written: AtomicU64,
}

impl Auditor {
    /// Starts the writer on `store` (on the current tokio runtime).
    pub fn start(store: Arc<dyn Store>) -> Arc<Self> {
        let (tx, rx) = mpsc::channel(MAX_AUDIT_QUEUE);
        let auditor = Arc::new(Auditor {
            tx,
            queued: AtomicU64::new(0),
            written: AtomicU64::new(0),
        });
        tokio::spawn(write_loop(store, rx, Arc::downgrade(&auditor)));
        auditor
    }

    /// How many entries were written.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Records an entry, and waits until it is written (or 5 s, when the
    /// store is down: it stays queued, and is written when it is back).
    pub async fn record(&self, org: &OrgId, entry: AuditEntry) {
        self.record_all(vec![(org.clone(), entry)]).await;
    }

    /// Records entries (of any orgs) together, and waits until they are
    /// written as [`Auditor::record`] does: they reach the writer at once
    /// and share its transactions.
    pub async fn record_all(&self, entries: Vec<(OrgId, AuditEntry)>) {
        let mut waits = Vec::with_capacity(entries.len());
        for (org, entry) in entries {
            let (done, written) = oneshot::channel();
            let pending = Pending {
                entry: NewAudit { org, entry },
                done: Some(done),
            };
            self.queued.fetch_add(1, Ordering::Relaxed);
            if self.tx.send(pending).await.is_err() {
                return;
            }
            waits.push(written);
        }
        let all = async {
            for w in waits {
                let _ = w.await;
            }
        };
        if tokio::time::timeout(AUDIT_WAIT, all).await.is_err() {
            tracing::warn!("the audit trail is behind: an entry waits to be written");
        }
    }

    /// Waits until every entry recorded so far is written, or `limit`;
    /// whether they all were. At shutdown, before the store closes.
    pub async fn flush(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = self
                .queued
                .load(Ordering::Relaxed)
                .saturating_sub(self.written());
            if left == 0 {
                return true;
            }
            if tokio::time::Instant::now() >= deadline {
                tracing::error!(
                    entries = left,
                    "shutting down with audit entries not yet written"
                );
                return false;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn write_loop(
    store: Arc<dyn Store>,
    mut rx: mpsc::Receiver<Pending>,
    auditor: std::sync::Weak<Auditor>,
) {
    // The heads this writer left, so that its next batch of an org is
    // one statement while no other replica appended to that org.
    let mut heads = AuditHeads::default();
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < MAX_AUDIT_BATCH {
            match rx.try_recv() {
                Ok(p) => batch.push(p),
                Err(_) => break,
            }
        }
        let entries: Vec<NewAudit> = batch.iter().map(|p| p.entry.clone()).collect();
        let mut delay = Duration::from_millis(100);
        loop {
            match store.append_audit(entries.clone(), &mut heads).await {
                Ok(()) => break,
                Err(StoreError::Closed) => return,
                Err(e) => {
                    tracing::error!(error = %e, entries = entries.len(), "cannot write to the audit trail; trying again");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
        }
        if let Some(a) = auditor.upgrade() {
            a.written.fetch_add(batch.len() as u64, Ordering::Relaxed);
        }
        for p in batch {
            if let Some(d) = p.done {
                let _ = d.send(());
            }
        }
    }
}

/// What the operations layer works with: the store, the audit trail, the
/// webhook secrets, its settings and the replica's counters.
#[derive(Clone, Copy)]
pub(crate) struct Fleet<'a> {
    pub(crate) store: &'a dyn Store,
    pub(crate) auditor: &'a Auditor,
    pub(crate) secrets: &'a SecretBox,
    pub(crate) config: &'a OpsConfig,
    pub(crate) metrics: &'a Metrics,
}

/// Queues `event` for the org's webhooks that take it (a failure is logged:
/// the event is lost to the webhooks, never to the store).
pub(crate) async fn emit(
    store: &dyn Store,
    org: &OrgId,
    event: WebhookEvent,
    data: serde_json::Value,
) {
    match store.enqueue_event(org, event, &data).await {
        Ok(0) => {}
        Ok(n) => tracing::debug!(%org, %event, webhooks = n, "event queued for webhooks"),
        Err(e) => {
            tracing::error!(%org, %event, error = %e, "cannot queue an event for the org's webhooks")
        }
    }
}

/// How long one delivery may take.
const DELIVERY_TIMEOUT: Duration = Duration::from_secs(10);

/// Posts every delivery that is due: of each webhook its oldest pending
/// one, so each receiver gets its events in order. Answers how many were
/// tried.
pub(crate) async fn deliver_webhooks(state: Fleet<'_>) -> Result<usize, StoreError> {
    let due = state.store.due_deliveries(now_ms(), 256).await?;
    let count = due.len();
    let tries = due.into_iter().map(|d| async move {
        let outcome = post(state.secrets, state.config.webhook_allow_private, &d).await;
        let next = match outcome {
            Ok(()) => DeliveryTry::Delivered,
            Err(error) => {
                let age = Duration::from_millis((now_ms() - d.delivery.created_at_ms).max(0) as u64);
                if age >= state.config.webhook_give_up_after {
                    DeliveryTry::GiveUp { error }
                } else {
                    let wait = backoff(d.delivery.attempts, state.config.webhook_max_backoff);
                    DeliveryTry::Retry {
                        error,
                        next_at_ms: now_ms() + wait.as_millis() as i64,
                    }
                }
            }
        };
        let delivered = matches!(next, DeliveryTry::Delivered);
        state.metrics.webhook_tries(delivered);
        if let Err(e) = state.store.record_try(&d.delivery.id, next).await {
            tracing::error!(delivery = %d.delivery.id, error = %e, "cannot record a webhook delivery's try");
        }
    });
    futures_util::future::join_all(tries).await;
    Ok(count)
}

/// The wait after the `attempts`-th failed try: 1 s doubling, up to `max`.
fn backoff(attempts: u32, max: Duration) -> Duration {
    Duration::from_secs(1u64 << attempts.min(20)).min(max)
}

/// Whether `ip` is an address of the public internet.
pub(crate) fn is_public(ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.is_documentation()
                || a == 0
                // 100.64.0.0/10, carrier-grade NAT; 198.18.0.0/15, benchmarking.
                || (a == 100 && (64..128).contains(&b))
                || (a == 198 && (b == 18 || b == 19))
                || a >= 240)
        }
        IpAddr::V6(v6) => {
            // An IPv4 address inside an IPv6 one reaches that IPv4 address
            // (through the host, a NAT64 gateway or a 6to4 or Teredo
            // relay): it is public when the IPv4 one is.
            if let Some(v4) = embedded_ipv4(v6) {
                return is_public(IpAddr::V4(v4));
            }
            let first = v6.segments()[0];
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                // fc00::/7 unique local, fe80::/10 link local.
                || (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80)
        }
    }
}

/// The IPv4 address an IPv6 address carries: IPv4-mapped (`::ffff:a.b.c.d`),
/// IPv4-compatible (`::a.b.c.d`, deprecated but routed by some stacks),
/// NAT64 (`64:ff9b::/96` and the local-use `64:ff9b:1::/48`), 6to4
/// (`2002:AABB:CCDD::/16`) and Teredo (`2001:0::/32`, the client's address
/// inverted in the last 32 bits).
fn embedded_ipv4(v6: std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    use std::net::Ipv4Addr;
    let s = v6.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    match s {
        // ::a.b.c.d, but not :: and ::1 (unspecified and loopback).
        [0, 0, 0, 0, 0, 0, _, _] if !v6.is_loopback() && !v6.is_unspecified() => Some(low),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] | [0x64, 0xff9b, 1, ..] => Some(low),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        [0x2001, 0, ..] => Some(Ipv4Addr::from(!u32::from(low))),
        _ => None,
    }
}

/// The address to post `url` to: resolved once, and refused when it is
/// not public (unless `allow_private`); the client is then pinned to it, so
/// a name that resolves elsewhere a moment later changes nothing.
async fn resolve(url: &str, allow_private: bool) -> Result<(String, SocketAddr), String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url} is not a URL: {e}"))?;
    let host = parsed
        .host_str()
        .ok_or_else(|| format!("{url} has no host"))?
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    let port = parsed.port_or_known_default().unwrap_or(443);
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .collect();
    let first = *addrs
        .first()
        .ok_or_else(|| format!("{host} resolves to no address"))?;
    if !allow_private && let Some(bad) = addrs.iter().find(|a| !is_public(a.ip())) {
        return Err(format!(
            "refused: {host} resolves to {}, not a public address (`nuon-ctl serve --webhook-allow-private-networks` allows it)",
            bad.ip()
        ));
    }
    Ok((host, first))
}

async fn post(
    secrets: &SecretBox,
    allow_private: bool,
    d: &crate::store::DueDelivery,
) -> Result<(), String> {
    let (host, addr) = resolve(&d.url, allow_private).await?;
    // No redirect is followed: a delivery goes to the URL the org gave.
    let client = reqwest::Client::builder()
        .use_rustls_tls()
        .redirect(reqwest::redirect::Policy::none())
        .resolve(&host, addr)
        .build()
        .map_err(|e| format!("cannot build the webhook client: {e}"))?;
    let secret = secrets
        .open(&d.sealed_secret, &webhook_context(&d.delivery.webhook_id))
        .map_err(|e| format!("cannot open the webhook's secret: {e}"))?;
    let now = now_ms() / 1000;
    let signature = webhook::sign(secret.as_bytes(), now, d.body.as_bytes());
    let answer = client
        .post(&d.url)
        .timeout(DELIVERY_TIMEOUT)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(webhook::EVENT_HEADER, d.delivery.event.as_str())
        .header(webhook::DELIVERY_HEADER, d.delivery.id.as_str())
        .header(webhook::SIGNATURE_HEADER, signature)
        .body(d.body.clone())
        .send()
        .await
        .map_err(|e| format!("cannot reach {}: {e}", d.url))?;
    let status = answer.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(format!("{} answered {status}", d.url))
    }
}

/// What the control plane counts as it runs (this replica's share); the
/// store's gauges are read at each scrape.
pub(crate) struct Metrics {
    dispatch: Histogram,
    steps: Mutex<HashMap<&'static str, Arc<Histogram>>>,
    store_writes: Mutex<HashMap<&'static str, Arc<Histogram>>>,
    pub(crate) parked_claims: AtomicI64,
    webhooks_ok: AtomicU64,
    webhooks_failed: AtomicU64,
    auth_failed: AtomicU64,
    auth_throttled: AtomicU64,
    telemetry_held: AtomicU64,
    jobs_ended: Mutex<HashMap<String, u64>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            dispatch: Histogram::new(LATENCY_BUCKETS_LONG),
            steps: Mutex::default(),
            store_writes: Mutex::default(),
            parked_claims: AtomicI64::new(0),
            webhooks_ok: AtomicU64::new(0),
            webhooks_failed: AtomicU64::new(0),
            auth_failed: AtomicU64::new(0),
            auth_throttled: AtomicU64::new(0),
            telemetry_held: AtomicU64::new(0),
            jobs_ended: Mutex::default(),
        }
    }
}

/// Dispatch latency buckets: a millisecond to ten minutes.
const LATENCY_BUCKETS_LONG: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 600.0,
];

/// Counts a parked claim while it lives.
pub(crate) struct Parked<'a>(&'a Metrics);

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        self.0.parked_claims.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Metrics {
    /// A job was claimed `waited` after it was queued.
    pub(crate) fn dispatched(&self, waited: Duration) {
        self.dispatch.observe(waited.as_secs_f64());
    }

    /// A step of `kind` ran for `took`.
    pub(crate) fn step(&self, kind: &'static str, took: Duration) {
        let h = self
            .steps
            .lock()
            .expect("metrics lock")
            .entry(kind)
            .or_insert_with(|| Arc::new(Histogram::new(STEP_BUCKETS)))
            .clone();
        h.observe(took.as_secs_f64());
    }

    /// A store write `op` took `took`.
    pub(crate) fn store_write(&self, op: &'static str, took: Duration) {
        let h = self
            .store_writes
            .lock()
            .expect("metrics lock")
            .entry(op)
            .or_insert_with(|| Arc::new(Histogram::new(LATENCY_BUCKETS)))
            .clone();
        h.observe(took.as_secs_f64());
    }

    /// A job ended with `outcome`.
    pub(crate) fn job_ended(&self, outcome: &str) {
        *self
            .jobs_ended
            .lock()
            .expect("metrics lock")
            .entry(outcome.to_owned())
            .or_default() += 1;
    }

    pub(crate) fn park(&self) -> Parked<'_> {
        self.parked_claims.fetch_add(1, Ordering::Relaxed);
        Parked(self)
    }

    /// A token or sign-in that did not check out.
    pub(crate) fn auth_failed(&self) {
        self.auth_failed.fetch_add(1, Ordering::Relaxed);
    }

    /// A runner's telemetry change whose effects were held back.
    pub(crate) fn telemetry_held(&self) {
        self.telemetry_held.fetch_add(1, Ordering::Relaxed);
    }

    /// A try answered `429` by the sign-in throttle.
    pub(crate) fn auth_throttled(&self) {
        self.auth_throttled.fetch_add(1, Ordering::Relaxed);
    }

    fn webhook_tries(&self, delivered: bool) {
        let c = if delivered {
            &self.webhooks_ok
        } else {
            &self.webhooks_failed
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// How long the store's gauges are reused between scrapes.
const GAUGE_TTL: Duration = Duration::from_secs(1);

/// The store's gauges, read at most once per [`GAUGE_TTL`].
#[derive(Default)]
pub(crate) struct GaugeCache(tokio::sync::Mutex<Option<(Instant, crate::store::Gauges)>>);

/// The control plane's metrics page (Prometheus text).
pub(crate) async fn render(state: Fleet<'_>, gauges: &GaugeCache) -> Result<String, StoreError> {
    let gauges = {
        let mut cached = gauges.0.lock().await;
        match &*cached {
            Some((at, g)) if at.elapsed() < GAUGE_TTL => g.clone(),
            _ => {
                let now = now_ms();
                let g = state
                    .store
                    .gauges(
                        now - ms(state.config.runner_unhealthy_after),
                        now - ms(state.config.runner_offline_after),
                    )
                    .await?;
                *cached = Some((Instant::now(), g.clone()));
                g
            }
        }
    };
    let m = &state.metrics;
    let mut out = Exposition::default();
    out.family("nuon_jobs", "gauge", "Jobs queued and running, by kind.");
    for (status, kind, n) in &gauges.jobs {
        out.sample(
            "nuon_jobs",
            &[("status", status), ("kind", kind)],
            *n as f64,
        );
    }
    out.family(
        "nuon_runners",
        "gauge",
        "Runners by health (from the age of their last call).",
    );
    // `Gauges::runners` counts them in `RunnerHealth::ALL`'s order.
    for (health, n) in RunnerHealth::ALL.iter().zip(gauges.runners) {
        out.sample("nuon_runners", &[("health", health.as_str())], n as f64);
    }
    out.single(
        "nuon_parked_claims",
        "gauge",
        "Runner claims held open on this replica, waiting for a job.",
        m.parked_claims.load(Ordering::Relaxed) as f64,
    );
    out.single(
        "nuon_log_stored_bytes",
        "gauge",
        "Bytes the job logs take in the store.",
        gauges.log_bytes as f64,
    );
    m.dispatch.write(
        &mut out,
        "nuon_dispatch_latency_seconds",
        "Time from a job's creation to its claim by a runner.",
        &[],
    );
    out.family(
        "nuon_jobs_ended_total",
        "counter",
        "Jobs whose runner reported their end to this replica, by outcome.",
    );
    let ended = m.jobs_ended.lock().expect("metrics lock").clone();
    let mut ended: Vec<_> = ended.into_iter().collect();
    ended.sort();
    for (outcome, n) in ended {
        out.sample("nuon_jobs_ended_total", &[("outcome", &outcome)], n as f64);
    }
    let histograms = |map: &Mutex<HashMap<&'static str, Arc<Histogram>>>| {
        let mut v: Vec<_> = map
            .lock()
            .expect("metrics lock")
            .iter()
            .map(|(k, h)| (*k, h.clone()))
            .collect();
        v.sort_by_key(|(k, _)| *k);
        v
    };
    out.family(
        "nuon_workflow_step_duration_seconds",
        "histogram",
        "How long workflow steps' jobs ran, by step kind.",
    );
    for (kind, h) in histograms(&m.steps) {
        h.samples(
            &mut out,
            "nuon_workflow_step_duration_seconds",
            &[("kind", kind)],
        );
    }
    out.family(
        "nuon_store_write_duration_seconds",
        "histogram",
        "Store writes of the Runner API, by operation.",
    );
    for (op, h) in histograms(&m.store_writes) {
        h.samples(&mut out, "nuon_store_write_duration_seconds", &[("op", op)]);
    }
    out.single(
        "nuon_audit_entries_written_total",
        "counter",
        "Audit entries this replica wrote.",
        state.auditor.written() as f64,
    );
    out.family(
        "nuon_webhook_deliveries_total",
        "counter",
        "Webhook delivery tries by this replica, by result.",
    );
    out.sample(
        "nuon_webhook_deliveries_total",
        &[("result", DeliveryStatus::Delivered.as_str())],
        m.webhooks_ok.load(Ordering::Relaxed) as f64,
    );
    out.sample(
        "nuon_webhook_deliveries_total",
        &[("result", "failed")],
        m.webhooks_failed.load(Ordering::Relaxed) as f64,
    );
    out.family(
        "nuon_auth_failures_total",
        "counter",
        "Tokens and sign-ins this replica refused as unknown, revoked or expired.",
    );
    out.sample(
        "nuon_auth_failures_total",
        &[],
        m.auth_failed.load(Ordering::Relaxed) as f64,
    );
    out.family(
        "nuon_auth_throttled_total",
        "counter",
        "Tries answered 429 because their address or account failed too often.",
    );
    out.sample(
        "nuon_auth_throttled_total",
        &[],
        m.auth_throttled.load(Ordering::Relaxed) as f64,
    );
    out.family(
        "nuon_telemetry_held_total",
        "counter",
        "Runner telemetry changes whose effects (audit entries, workflows, webhook events) were held back because the runner changed too often.",
    );
    out.sample(
        "nuon_telemetry_held_total",
        &[],
        m.telemetry_held.load(Ordering::Relaxed) as f64,
    );
    Ok(out.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn health_follows_the_thresholds() {
        let c = OpsConfig {
            runner_unhealthy_after: Duration::from_secs(10),
            runner_offline_after: Duration::from_secs(60),
            ..OpsConfig::default()
        };
        assert_eq!(c.health(false, None, 0), RunnerHealth::Unknown);
        assert_eq!(c.health(false, Some(0), 9_999), RunnerHealth::Healthy);
        assert_eq!(c.health(false, Some(0), 10_000), RunnerHealth::Unhealthy);
        assert_eq!(c.health(false, Some(0), 60_000), RunnerHealth::Offline);
        assert_eq!(c.health(true, Some(0), 0), RunnerHealth::Offline);
        // What is shown holds until the next threshold ahead.
        let window = Duration::from_secs(30);
        assert_eq!(c.shown_until(window, false, Some(0), 5_000), 10_000);
        assert_eq!(c.shown_until(window, false, Some(0), 10_000), 30_000);
        assert_eq!(c.shown_until(window, false, Some(0), 45_000), 60_000);
        assert_eq!(c.shown_until(window, false, Some(0), 60_000), i64::MAX);
        assert_eq!(c.shown_until(window, false, None, 0), i64::MAX);
        assert_eq!(c.shown_until(window, true, Some(0), 0), i64::MAX);
    }

    #[test]
    fn only_public_addresses_are_public() {
        for ip in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            // IPv4 inside IPv6: NAT64, 6to4, IPv4-compatible, Teredo.
            "64:ff9b::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::10.0.0.1",
            "2002:7f00:0001::1",
            "2002:a9fe:a9fe::",
            "::127.0.0.1",
            "::10.0.0.1",
            "::169.254.169.254",
            // Teredo: the client 127.0.0.1, inverted.
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in [
            "1.1.1.1",
            "93.184.216.34",
            "2606:4700:4700::1111",
            "64:ff9b::1.1.1.1",
            "2002:0101:0101::1",
            "::1.1.1.1",
            "2001:0:4136:e378:8000:63bf:fefe:fefe",
        ] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_a_private_address_is_refused_at_delivery() {
        let e = resolve("http://localhost:9/hook", false).await.unwrap_err();
        assert!(e.contains("not a public address"), "{e}");
        let (host, addr) = resolve("http://localhost:9/hook", true).await.unwrap();
        assert_eq!((host.as_str(), addr.port()), ("localhost", 9));
        assert!(addr.ip().is_loopback());
    }

    #[tokio::test]
    async fn a_flush_waits_for_every_recorded_entry() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn Store> = Arc::new(crate::store::SqliteStore::open(dir.path()).unwrap());
        let org = store
            .create_org(&OrgId::generate(), "o", b"k")
            .await
            .unwrap()
            .org_id;
        let auditor = Auditor::start(store.clone());
        let mut callers = Vec::new();
        for i in 0..500 {
            let (a, org) = (auditor.clone(), org.clone());
            callers.push(tokio::spawn(async move {
                a.record(&org, AuditEntry::new(i, "t", "op", "/x", "", "200"))
                    .await
            }));
        }
        // Every entry recorded, none waited for yet: the flush waits.
        while auditor.queued.load(Ordering::Relaxed) < 500 {
            tokio::task::yield_now().await;
        }
        assert!(auditor.flush(Duration::from_secs(5)).await);
        assert_eq!(auditor.written(), 500);
        for c in callers {
            c.await.unwrap();
        }
        let v = crate::store::verify_audit(&*store, &org).await.unwrap();
        assert_eq!((v.entries, v.broken), (500, None));
    }

    #[test]
    fn webhook_backoff_doubles_to_its_cap() {
        let max = Duration::from_secs(300);
        assert_eq!(backoff(0, max), Duration::from_secs(1));
        assert_eq!(backoff(3, max), Duration::from_secs(8));
        assert_eq!(backoff(12, max), max);
        assert_eq!(backoff(u32::MAX, max), max);
    }
}
