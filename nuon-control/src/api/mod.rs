//! The two HTTP APIs: the Control API (vendors, the CLI) and the Runner API
//! (runners), each on its own listener and router.

pub(crate) mod apps;
mod caller;
mod control;
pub(crate) mod doc;
mod drift;
mod groups;
pub(crate) mod health;
mod installers;
mod lifecycle;
mod ops;
mod orgs;
mod people;
mod releases;
mod rollouts;
mod runner;
mod runner_releases;
mod session;
mod stack;
pub(crate) mod state;
mod toggles;
mod web;
mod workflows;

use std::collections::HashMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use nuon_core::token::hash_token;
use nuon_core::wire::RunnerStatus;
use nuon_core::wire::{ErrorCode, MAX_BODY_BYTES, routes};
use nuon_core::{JobId, OrgId, PublicKey, RunnerId};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::engine::Engine;
use crate::error::Error;
use crate::hub::Wakes;
use crate::keys::{JobKeys, OrgSigners};
use crate::secrets::SecretBox;
pub(crate) use crate::service::Caller;
use crate::store::{ApiPrincipal, RunnerPrincipal, Store, Wake};

/// Timings of the job loop.
#[derive(Debug, Clone)]
pub struct Timings {
    /// How long a lease lasts without a heartbeat.
    pub lease: Duration,
    /// The longest a claim is held open.
    pub max_claim_wait: Duration,
    /// The longest a heartbeat is held open.
    pub max_heartbeat_wait: Duration,
    /// How often the replica looks for queued jobs of the runners parked
    /// on it, and wakes them: a safety net for wake-ups lost between
    /// replicas, one statement for all of them (`None` for an embedded
    /// store, where every wake-up is in process).
    pub fallback_poll: Option<Duration>,
}

/// What every handler shares.
pub(crate) struct AppState {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) timings: Timings,
    /// Who waits for what, woken here and on the other replicas.
    pub(crate) wakes: Arc<Wakes>,
    /// Signs and seals jobs, opens them for their runners.
    pub(crate) keys: Arc<JobKeys>,
    /// The runner tokens this replica checked lately.
    pub(crate) runner_tokens: crate::service::runners::RunnerTokens,
    /// Each org's fleet as this replica last read it.
    fleet_views: crate::service::fleet::FleetViews,
    /// What each runner's telemetry may set off (audit entries, workflows,
    /// webhook events) per minute.
    telemetry_effects: crate::throttle::Rate,
    /// Log bytes each runner shipped in its current hour.
    log_windows: Mutex<HashMap<RunnerId, (Instant, u64)>>,
    /// Failed sign-ins and token checks, per address and account.
    pub(crate) throttle: crate::throttle::Throttle,
    pub(crate) shutdown: watch::Receiver<bool>,
    pub(crate) secrets: Arc<SecretBox>,
    /// The workflow engine.
    pub(crate) engine: Arc<Engine>,
    /// Whether this replica holds the maintenance lead (rescues leases,
    /// prunes, drives workflows).
    pub(crate) leader: Arc<AtomicBool>,
    /// The Control API's base URL, once serving: named to a client that
    /// reached the Runner API by mistake.
    pub(crate) control_url: OnceLock<String>,
    /// Writes the audit trail.
    pub(crate) auditor: Arc<crate::ops::Auditor>,
    /// Health thresholds and webhook retries.
    pub(crate) ops: crate::ops::OpsConfig,
    /// What `/metrics` shows.
    pub(crate) metrics: Arc<crate::ops::Metrics>,
    pub(crate) gauges: crate::ops::GaugeCache,
    /// The telemetry each runner last sent, as stored.
    telemetry: Mutex<HashMap<RunnerId, nuon_core::wire::RunnerTelemetry>>,
    /// The runners told, since this process started, which attempts the
    /// store says they hold (`ClaimResponse::known_leases`).
    pub(crate) told_leases: Mutex<std::collections::HashSet<RunnerId>>,
    /// The provider people sign in through, when one is configured.
    pub(crate) oidc: Option<Arc<crate::oidc::Oidc>>,
}

impl AppState {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        timings: Timings,
        shutdown: watch::Receiver<bool>,
        secrets: Arc<SecretBox>,
        signers: Arc<dyn OrgSigners>,
        ops: crate::ops::OpsConfig,
    ) -> Self {
        let wakes = Arc::new(Wakes::new(store.clone()));
        let metrics = Arc::new(crate::ops::Metrics::default());
        let keys = Arc::new(JobKeys::new(signers, secrets.clone()));
        let leader = Arc::new(AtomicBool::new(false));
        let engine = Arc::new(Engine::new(
            store.clone(),
            secrets.clone(),
            keys.clone(),
            wakes.clone(),
            leader.clone(),
            metrics.clone(),
            ops.clone(),
        ));
        AppState {
            throttle: crate::throttle::Throttle::new(ops.sign_in_throttle),
            log_windows: Mutex::new(HashMap::new()),
            telemetry_effects: crate::throttle::Rate::new(
                ops.telemetry_effects_burst,
                ops.telemetry_effects_per_minute,
            ),
            auditor: crate::ops::Auditor::start(store.clone()),
            ops,
            metrics,
            gauges: Default::default(),
            telemetry: Mutex::new(HashMap::new()),
            told_leases: Mutex::default(),
            store,
            timings,
            wakes,
            keys,
            runner_tokens: Default::default(),
            fleet_views: Default::default(),
            shutdown,
            secrets,
            engine,
            leader,
            control_url: OnceLock::new(),
            oidc: None,
        }
    }

    /// Wakes the runner's parked claims and heartbeats, here and on the
    /// other replicas.
    pub(crate) fn wake_runner(&self, runner: &RunnerId) {
        self.wakes.runner(runner);
    }

    /// Wakes the claims the org's limit on running jobs held back, here and
    /// on the other replicas: one of its running jobs ended.
    pub(crate) fn wake_org(&self, org: &OrgId) {
        self.wakes.org(org);
    }

    /// Wakes the followers of a job's log, here and on the other replicas.
    pub(crate) fn wake_logs(&self, job: &JobId) {
        self.wakes.logs(job);
    }

    /// Applies another replica's wake-up here.
    pub(crate) fn apply_wake(&self, wake: &Wake) {
        let w = &self.wakes;
        match wake {
            Wake::Runner(r) => w.runners.wake(r),
            Wake::Logs(j) => w.logs.wake(j),
            Wake::Org(o) => w.orgs.wake(o),
            Wake::Executor => self.engine.wake(),
            Wake::Workflow(o, wf) => self.engine.touched_here(o.clone(), wf.clone()),
            Wake::JobEnded(j) => self.engine.job_ended_here(j.clone()),
            Wake::All => {
                w.runners.wake_all();
                w.orgs.wake_all();
                w.logs.wake_all();
                self.engine.wake();
            }
        }
    }

    /// The operations of the service layer, over this state's store and
    /// audit trail.
    pub(crate) fn services(&self) -> crate::service::Services<'_> {
        crate::service::Services {
            store: &*self.store,
            auditor: &self.auditor,
            secrets: &self.secrets,
            keys: &self.keys,
            engine: &self.engine,
            wakes: &self.wakes,
            ops: &self.ops,
            live_window: self.live_window(),
            runner_tokens: &self.runner_tokens,
            fleet_views: &self.fleet_views,
        }
    }

    /// The public key the org's runners verify its jobs with.
    pub(crate) async fn signing_public_key(&self, org: &OrgId) -> Result<PublicKey, Error> {
        Ok(self.keys.signer(org).await?.public_key())
    }

    /// How long a runner counts as there after its last call: a live
    /// runner calls at least once a claim's wait or a lease.
    pub(crate) fn live_window(&self) -> Duration {
        self.timings.max_claim_wait + self.timings.lease
    }

    /// Whether a runner is there, from its last call.
    pub(crate) fn runner_status(&self, revoked: bool, last_seen_ms: Option<i64>) -> RunnerStatus {
        self.services().runner_status(revoked, last_seen_ms)
    }

    /// Tells the org's webhooks of each probe the runner's watch saw fail
    /// (having passed, or not been seen, before) or pass again.
    async fn probes_changed(
        &self,
        org: &nuon_core::OrgId,
        runner: &RunnerId,
        was: &[nuon_core::wire::ProbeSeen],
        now: &[nuon_core::wire::ProbeSeen],
    ) {
        use nuon_core::webhook::WebhookEvent;
        let changed: Vec<(&nuon_core::wire::ProbeSeen, WebhookEvent)> = now
            .iter()
            .filter_map(|p| {
                let before = was
                    .iter()
                    .find(|w| w.component == p.component && w.probe == p.probe);
                match (before.map(|b| b.ok), p.ok) {
                    (Some(true) | None, false) => Some((p, WebhookEvent::ProbeFailed)),
                    (Some(false), true) => Some((p, WebhookEvent::ProbeRecovered)),
                    _ => None,
                }
            })
            .collect();
        if changed.is_empty() {
            return;
        }
        let Ok(Some(install)) = self.store.find_install_of_runner(org, runner).await else {
            return;
        };
        for (p, event) in changed {
            let data = serde_json::json!({
                "install_id": install.id,
                "install": install.name,
                "component": p.component,
                "probe": p.probe,
                "ok": p.ok,
                "detail": p.detail,
                "at_ms": p.at_ms,
                "runner_id": runner,
            });
            crate::ops::emit(&*self.store, org, event, data).await;
        }
    }

    /// The customer turned break-glass roles on (`now` has them, `was`
    /// not) or off: recorded in the audit trail, and the install's
    /// `role-enabled` / `role-disabled` actions started.
    async fn break_glass_changed(
        &self,
        org: &nuon_core::OrgId,
        runner: &RunnerId,
        was: &[String],
        now: &[String],
    ) {
        let Ok(Some(install)) = self.store.find_install_of_runner(org, runner).await else {
            return;
        };
        for (roles, other, trigger) in [(now, was, "role-enabled"), (was, now, "role-disabled")] {
            let changed: Vec<&String> = roles.iter().filter(|r| !other.contains(r)).collect();
            if changed.is_empty() {
                continue;
            }
            let names: Vec<&str> = changed.iter().map(|r| r.as_str()).collect();
            let entry = nuon_core::audit::AuditEntry::new(
                nuon_core::now_ms(),
                format!("runner:{runner}"),
                "breakGlass",
                format!("/v1/installs/{}", install.id),
                String::new(),
                "200",
            )
            .with_detail(format!(
                "{trigger}: the customer turned break-glass {} {}",
                names.join(", "),
                if trigger == "role-enabled" {
                    "on"
                } else {
                    "off"
                }
            ));
            self.auditor.record(org, entry).await;
            if let Err(e) = self.engine.fire_trigger(org, &install, trigger).await {
                tracing::warn!(install = %install.id, error = %e, "cannot start the {trigger} actions");
            }
        }
    }

    /// Keeps what a runner reported of itself, when it changed.
    pub(crate) async fn runner_telemetry(
        &self,
        org: &nuon_core::OrgId,
        runner: &RunnerId,
        telemetry: Option<nuon_core::wire::RunnerTelemetry>,
    ) {
        let Some(mut t) = telemetry else { return };
        // A runner's clock may run ahead: its probes were seen no later
        // than now, so that a deploy after them counts as newer.
        let now = nuon_core::now_ms();
        for p in &mut t.probes {
            p.at_ms = p.at_ms.min(now);
        }
        let before = {
            let seen = self.telemetry.lock().expect("telemetry lock");
            if seen.get(runner) == Some(&t) {
                return;
            }
            seen.get(runner).cloned()
        };
        // What the store kept, after a restart: a role turned on before
        // fires nothing again.
        let before = match before {
            Some(b) => Some(b),
            None => match self.store.find_runner(org, runner.as_str()).await {
                Ok(r) => r.and_then(|r| r.telemetry),
                Err(_) => None,
            },
        };
        let (was, probes_before) = before
            .map(|b| (b.break_glass, b.probes))
            .unwrap_or_default();
        let probes_moved = t.probes.iter().any(|p| {
            probes_before
                .iter()
                .find(|w| w.component == p.component && w.probe == p.probe)
                .is_none_or(|w| w.ok != p.ok)
        });
        if (was != t.break_glass || probes_moved)
            && let Err(wait) = self.telemetry_effects.take(runner.as_str())
        {
            // Held back: what it would set off is kept as it was, so the
            // change still shows as one when the runner reports it again
            // (with every claim and heartbeat) after the wait.
            self.metrics.telemetry_held();
            tracing::debug!(%runner, ?wait, "a runner's telemetry changes too often: its effects wait");
            t.break_glass = was;
            t.probes = probes_before;
            self.telemetry
                .lock()
                .expect("telemetry lock")
                .insert(runner.clone(), t);
            return;
        }
        self.telemetry
            .lock()
            .expect("telemetry lock")
            .insert(runner.clone(), t.clone());
        if was != t.break_glass {
            self.break_glass_changed(org, runner, &was, &t.break_glass)
                .await;
        }
        self.probes_changed(org, runner, &probes_before, &t.probes)
            .await;
        let json = serde_json::to_string(&t).unwrap_or_default();
        if let Err(e) = self.store.set_runner_telemetry(runner, &json).await {
            tracing::warn!(%runner, error = %e, "cannot keep the runner's telemetry");
            self.telemetry
                .lock()
                .expect("telemetry lock")
                .remove(runner);
        }
    }

    /// The log quota for a batch from `runner`: the per-job quota, and what
    /// is left of the runner's quota in its current hour.
    pub(crate) fn log_quota(&self, runner: &RunnerId) -> crate::store::LogQuota {
        let windows = self.log_windows.lock().expect("log quota lock");
        let used = windows
            .get(runner)
            .filter(|(start, _)| start.elapsed() < LOG_WINDOW)
            .map_or(0, |(_, used)| *used);
        crate::store::LogQuota {
            per_attempt: self.ops.log_quota_per_job,
            runner_room: self.ops.log_quota_per_runner.saturating_sub(used),
        }
    }

    /// Counts `bytes` of log stored for `runner` in its current hour.
    pub(crate) fn charge_log(&self, runner: &RunnerId, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut windows = self.log_windows.lock().expect("log quota lock");
        let now = Instant::now();
        let w = windows.entry(runner.clone()).or_insert((now, 0));
        if w.0.elapsed() >= LOG_WINDOW {
            *w = (now, 0);
        }
        w.1 = w.1.saturating_add(bytes);
    }

    pub(crate) fn forget_runner_tokens(&self, runner: &RunnerId) {
        self.runner_tokens.forget(runner);
    }

    /// Resolves once the server starts shutting down.
    pub(crate) async fn shutting_down(&self) {
        let mut rx = self.shutdown.clone();
        let _ = rx.wait_for(|down| *down).await;
    }
}

pub(crate) type SharedState = Arc<AppState>;

/// The window of a runner's log quota.
const LOG_WINDOW: std::time::Duration = std::time::Duration::from_secs(3600);

/// The token of a request: `Authorization: Bearer TOKEN`, or HTTP basic
/// auth with the token as the password (what Terraform's `http` state
/// backend sends, from `TF_HTTP_PASSWORD`).
pub(crate) fn bearer(parts: &Parts) -> Result<String, Error> {
    use base64::Engine as _;
    let header = parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .ok_or_else(|| {
            Error::refused(ErrorCode::Unauthorized, "missing bearer token: send `Authorization: Bearer TOKEN` (the CLI takes --token or NUON_TOKEN)",
            )
        })?;
    let value = header.to_str().ok();
    let basic = || {
        let raw = value?.strip_prefix("Basic ")?;
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(raw.trim())
            .ok()?;
        let text = String::from_utf8(decoded).ok()?;
        Some(text.split_once(':')?.1.to_owned())
    };
    value
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(|t| t.trim().to_owned())
        .or_else(basic)
        .filter(|t| !t.is_empty() && t.len() <= 256)
        .ok_or_else(|| {
            Error::refused(ErrorCode::Unauthorized, "malformed Authorization header: expected `Bearer TOKEN` (or basic auth with the token as password)",
            )
        })
}

/// The hash of the API token a request came with, once [`ApiAuth`] took it.
#[derive(Debug, Clone)]
pub(crate) struct TokenHash(pub(crate) String);

/// The org an API request acts for.
pub(crate) struct ApiAuth(pub(crate) ApiPrincipal);

impl FromRequestParts<SharedState> for ApiAuth {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &SharedState) -> Result<Self, Error> {
        let token = bearer(parts)?;
        let hash = hash_token(&token);
        let source = caller::source_of(&parts.extensions);
        let principal = throttled(state, &source, &token, &hash, async {
            Ok(state.store.authenticate_api(&hash).await?)
        })
        .await?;
        parts.extensions.insert(TokenHash(hash));
        principal.map(ApiAuth).ok_or_else(|| {
                Error::refused(ErrorCode::Unauthorized, "invalid or revoked API token (an admin token is in the control plane's DATA_DIR/admin-token; under `nuon dev`, ./nuon-data/control/admin-token)",
                )
            })
    }
}

/// Checks a credential (`token`, hashed `hash`) with `check` under the
/// sign-in throttle: `429` before any check when `source` or the token's
/// account failed too often; a miss counts as a failure.
pub(crate) async fn throttled<T>(
    state: &AppState,
    source: &str,
    token: &str,
    hash: &str,
    check: impl Future<Output = Result<Option<T>, Error>>,
) -> Result<Option<T>, Error> {
    let account = crate::throttle::account_of(token);
    if let Err(t) = state.throttle.check(source, account, hash) {
        state.metrics.auth_throttled();
        return Err(t.into());
    }
    let found = check.await?;
    match &found {
        Some(_) => state.throttle.good(hash),
        None => {
            state.metrics.auth_failed();
            state.throttle.failed(source, account);
        }
    }
    Ok(found)
}

/// The address a request came from, when the listener records it.
pub(crate) struct Source(pub(crate) String);

impl<S: Send + Sync> FromRequestParts<S> for Source {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Source(caller::source_of(&parts.extensions)))
    }
}

/// The runner a Runner API request comes from.
pub(crate) struct RunnerAuth(pub(crate) Arc<RunnerPrincipal>);

impl FromRequestParts<SharedState> for RunnerAuth {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &SharedState) -> Result<Self, Error> {
        let hash = hash_token(&bearer(parts)?);
        let cached = state.runner_tokens.get(&hash);
        if let Some(p) = cached {
            session::check(state, parts, &p).await?;
            return Ok(RunnerAuth(p));
        }
        let source = caller::source_of(&parts.extensions);
        let token = bearer(parts)?;
        let principal = throttled(state, &source, &token, &hash, async {
            Ok(state.store.authenticate_runner(&hash).await?)
        })
        .await?
        .map(Arc::new)
        .ok_or_else(|| {
                Error::refused(ErrorCode::Unauthorized, "invalid or revoked runner token; issue this runner a new one with `nuon runners rotate-token RUNNER` (an install's runner is named after the install)",
                )
            })?;
        state.runner_tokens.keep(hash, principal.clone());
        session::check(state, parts, &principal).await?;
        Ok(RunnerAuth(principal))
    }
}

/// A JSON body whose rejections are our JSON errors: 413 when too large,
/// 400 with serde's message (which names the field and position) otherwise.
pub(crate) struct Body<T>(pub(crate) T);

impl<T: DeserializeOwned> FromRequest<SharedState> for Body<T> {
    type Rejection = Error;

    async fn from_request(req: Request, state: &SharedState) -> Result<Self, Error> {
        match axum::Json::<T>::from_request(req, state).await {
            Ok(axum::Json(v)) => Ok(Body(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

/// The request of operation `E` on `keys`, or its refusal (a body the
/// service never saw: not JSON, an unknown field) recorded under `E` in
/// the audit trail, as the service records the rest.
pub(crate) async fn body_of<E: nuon_core::endpoint::Endpoint, T>(
    state: &SharedState,
    caller: &Caller,
    keys: &[&str],
    body: Result<Body<T>, Error>,
) -> Result<T, Error> {
    match body {
        Ok(Body(req)) => Ok(req),
        Err(e) => {
            let target = nuon_core::endpoint::path_of::<E>(keys);
            state
                .services()
                .audited::<E, T>(caller, target, Err(e))
                .await
        }
    }
}

fn json_rejection(rejection: JsonRejection) -> Error {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return Error::refused(
            ErrorCode::TooLarge,
            format!("request body is larger than {MAX_BODY_BYTES} bytes"),
        );
    }
    let message = match &rejection {
        JsonRejection::MissingJsonContentType(_) => {
            "request body must be JSON with `Content-Type: application/json`".to_string()
        }
        other => format!("invalid request body: {}", other.body_text()),
    };
    Error::bad_request(message)
}

/// A query string, with JSON errors like every other rejection.
pub(crate) struct Q<T>(pub(crate) T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequestParts<S> for Q<T> {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Error> {
        axum::extract::Query::<T>::try_from_uri(&parts.uri)
            .map(|q| Q(q.0))
            .map_err(|e| Error::bad_request(format!("invalid query string: {}", e.body_text())))
    }
}

/// Parses an id from a path; a malformed id is simply not found.
pub(crate) fn path_id<T: std::str::FromStr>(kind: &str, raw: &str) -> Result<T, Error> {
    raw.parse()
        .map_err(|_| Error::not_found(format!("no {kind} {raw:?}")))
}

/// Which of the two APIs a router serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    Control,
    Runner,
}

/// Paths under this prefix belong to the Runner API.
const RUNNER_PREFIX: &str = "/v1/runner/";

/// A request no route matched. A request meant for the other API (a runner
/// pointed at the Control API's port, a client at the Runner API's) is told
/// so, with the address of the right one when it is known.
fn not_found_route(api: Api, state: &AppState, path: &str) -> Error {
    let for_runner = path.starts_with(RUNNER_PREFIX);
    let for_control = !for_runner && (path.starts_with("/v1/") || path == routes::OPENAPI);
    // This API, the one the request meant, who calls it, and where it is.
    let (this, meant, caller, at, flag) = match api {
        Api::Control if for_runner => (
            "Control",
            "Runner",
            "the runner",
            state.engine.runner_url_known(),
            "--runner-listen",
        ),
        Api::Runner if for_control => (
            "Runner",
            "Control",
            "the client (NUON_API_URL, --api)",
            state.control_url.get().map(String::as_str),
            "--listen",
        ),
        _ => return Error::not_found(format!("no route {path}")),
    };
    let at = at.map_or_else(|| format!(" (nuon-ctl serve {flag})"), |u| format!(": {u}"));
    Error::refused(
        ErrorCode::WrongApi,
        format!(
            "this is the control plane's {this} API, not its {meant} API; point {caller} at the {meant} API{at}"
        ),
    )
}

async fn health() -> &'static str {
    "ok\n"
}

fn finish(router: Router<SharedState>, state: SharedState, api: Api) -> Router {
    router
        .route(routes::HEALTH, axum::routing::get(health))
        .fallback(
            move |axum::extract::State(s): axum::extract::State<SharedState>,
                  uri: axum::http::Uri| async move { not_found_route(api, &s, uri.path()) },
        )
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Every operation of the Control API.
pub(crate) fn control_ops() -> Vec<doc::Op> {
    let mut ops = control::ops();
    ops.extend(orgs::ops());
    ops.extend(people::ops());
    ops.extend(apps::ops());
    ops.extend(state::ops());
    ops.extend(workflows::ops());
    ops.extend(toggles::ops());
    ops.extend(installers::ops());
    ops.extend(drift::ops());
    ops.extend(groups::ops());
    ops.extend(releases::ops());
    ops.extend(rollouts::ops());
    ops.extend(runner_releases::ops());
    ops.extend(lifecycle::ops());
    ops.extend(health::ops());
    ops.extend(ops::ops());
    ops.extend(stack::ops());
    ops
}

/// The OpenAPI document of the Control API.
pub fn openapi() -> serde_json::Value {
    doc::openapi(&control_ops())
}

pub(crate) fn control_router(state: SharedState) -> Router {
    let ops = control_ops();
    let document = Arc::new(doc::openapi(&ops));
    let router = doc::router(ops)
        .route(
            routes::OPENAPI,
            axum::routing::get(move || {
                let document = document.clone();
                async move { axum::Json(document.as_ref().clone()) }
            }),
        )
        .route(routes::METRICS, axum::routing::get(ops::metrics))
        .merge(web::router());
    finish(router, state, Api::Control)
}

pub(crate) fn runner_router(state: SharedState) -> Router {
    finish(
        runner::routes()
            .merge(state::runner_routes())
            .merge(stack::runner_routes()),
        state,
        Api::Runner,
    )
}
