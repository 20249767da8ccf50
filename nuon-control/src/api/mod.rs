//! The two HTTP APIs: the Control API (vendors, the CLI) and the Runner API
//! (runners), each on its own listener and router.

pub(crate) mod apps;
mod control;
pub(crate) mod doc;
mod orgs;
mod runner;
pub(crate) mod state;
mod workflows;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use nuon_core::token::hash_token;
use nuon_core::wire::{MAX_BODY_BYTES, routes};
use nuon_core::{JobId, OrgId, OrgSigningKey, RunnerId};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use crate::error::Error;
use crate::executor::Executor;
use crate::hub::Hub;
use crate::secrets::SecretBox;
use crate::store::{ApiPrincipal, RunnerPrincipal, Store, Wake};

/// How long a runner token's lookup is reused before the store is asked again.
/// Revocation through this process clears it at once.
const AUTH_CACHE_TTL: Duration = Duration::from_secs(5);

/// Timings of the job loop.
#[derive(Debug, Clone)]
pub struct Timings {
    /// How long a lease lasts without a heartbeat.
    pub lease: Duration,
    /// The longest a claim is held open.
    pub max_claim_wait: Duration,
    /// The longest a heartbeat is held open.
    pub max_heartbeat_wait: Duration,
    /// How often a parked claim looks at the store again without a wake-up:
    /// a safety net for wake-ups lost between replicas (`None` for an
    /// embedded store, where every wake-up is in process).
    pub fallback_poll: Option<Duration>,
}

/// What every handler shares.
pub(crate) struct AppState {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) timings: Timings,
    pub(crate) runners: Hub<RunnerId>,
    /// Claims that an org's limit on running jobs held back, woken when a
    /// job of the org ends.
    pub(crate) orgs: Hub<OrgId>,
    pub(crate) logs: Hub<JobId>,
    keys: Mutex<HashMap<OrgId, OrgSigningKey>>,
    runner_auth: Mutex<HashMap<String, (RunnerPrincipal, Instant)>>,
    pub(crate) shutdown: watch::Receiver<bool>,
    pub(crate) secrets: Arc<SecretBox>,
    pub(crate) executor: Executor,
    /// The Runner API's base URL as runners reach it (for the state
    /// backend address in Terraform jobs); set when serving starts.
    pub(crate) runner_url: std::sync::OnceLock<String>,
    /// Whether this replica holds the maintenance lead (rescues leases,
    /// prunes, drives workflows).
    pub(crate) leader: std::sync::atomic::AtomicBool,
}

impl AppState {
    pub(crate) fn new(
        store: Arc<dyn Store>,
        timings: Timings,
        shutdown: watch::Receiver<bool>,
        secrets: Arc<SecretBox>,
    ) -> Self {
        AppState {
            store,
            timings,
            runners: Hub::new(),
            orgs: Hub::new(),
            logs: Hub::new(),
            keys: Mutex::new(HashMap::new()),
            runner_auth: Mutex::new(HashMap::new()),
            shutdown,
            secrets,
            executor: Executor::new(),
            runner_url: std::sync::OnceLock::new(),
            leader: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Wakes the runner's parked claims and heartbeats, here and on the
    /// other replicas.
    pub(crate) fn wake_runner(&self, runner: &RunnerId) {
        self.runners.wake(runner);
        self.store.announce(Wake::Runner(runner.clone()));
    }

    /// Wakes the claims the org's limit on running jobs held back, here and
    /// on the other replicas: one of its running jobs ended.
    pub(crate) fn wake_org(&self, org: &OrgId) {
        self.orgs.wake(org);
        self.store.announce(Wake::Org(org.clone()));
    }

    /// Wakes the followers of a job's log, here and on the other replicas.
    pub(crate) fn wake_logs(&self, job: &JobId) {
        self.logs.wake(job);
        self.store.announce(Wake::Logs(job.clone()));
    }

    /// Tells the executor to look again, wherever it leads.
    pub(crate) fn wake_executor(&self) {
        self.executor.wake();
        self.store.announce(Wake::Executor);
    }

    /// Applies another replica's wake-up here.
    pub(crate) fn apply_wake(&self, wake: Wake) {
        match wake {
            Wake::Runner(r) => self.runners.wake(&r),
            Wake::Logs(j) => self.logs.wake(&j),
            Wake::Org(o) => self.orgs.wake(&o),
            Wake::Executor => self.executor.wake(),
            Wake::All => {
                self.runners.wake_all();
                self.orgs.wake_all();
                self.logs.wake_all();
                self.executor.wake();
            }
        }
    }

    /// Whether this replica drives workflows and maintenance now.
    pub(crate) fn is_leader(&self) -> bool {
        self.leader.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The Runner API's base URL for jobs.
    pub(crate) fn runner_url(&self) -> &str {
        self.runner_url
            .get()
            .map(String::as_str)
            .unwrap_or("http://127.0.0.1:7401")
    }

    pub(crate) async fn signing_key(&self, org: &OrgId) -> Result<OrgSigningKey, Error> {
        if let Some(k) = self.keys.lock().expect("keys lock").get(org) {
            return Ok(k.clone());
        }
        let key = self
            .store
            .signing_key(org)
            .await?
            .ok_or_else(|| Error::not_found(format!("org {org} not found")))?;
        self.keys
            .lock()
            .expect("keys lock")
            .insert(org.clone(), key.clone());
        Ok(key)
    }

    pub(crate) fn forget_runner_tokens(&self, runner: &RunnerId) {
        self.runner_auth
            .lock()
            .expect("auth lock")
            .retain(|_, (p, _)| &p.runner_id != runner);
    }

    /// Resolves once the server starts shutting down.
    pub(crate) async fn shutting_down(&self) {
        let mut rx = self.shutdown.clone();
        let _ = rx.wait_for(|down| *down).await;
    }
}

pub(crate) type SharedState = Arc<AppState>;

/// Shows the outputs a Terraform apply marked sensitive (a job's or a
/// step's `{"outputs": ..., "sensitive": [...]}`) as `(sensitive)`.
pub(crate) fn mask_sensitive_outputs(outputs: &mut serde_json::Value) {
    let names: Vec<String> = outputs["sensitive"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    for n in names {
        if let Some(v) = outputs.get_mut("outputs").and_then(|o| o.get_mut(&n)) {
            *v = serde_json::Value::String("(sensitive)".into());
        }
    }
}

/// A job as the API shows it: sensitive outputs masked.
pub(crate) fn job_view(mut job: nuon_core::wire::JobInfo) -> nuon_core::wire::JobInfo {
    mask_sensitive_outputs(&mut job.outputs);
    job
}

/// A workflow as the API shows it: sensitive outputs of its steps masked.
pub(crate) fn workflow_view(
    mut wf: nuon_core::wire::WorkflowInfo,
) -> nuon_core::wire::WorkflowInfo {
    for s in &mut wf.steps {
        mask_sensitive_outputs(&mut s.outputs);
    }
    wf
}

/// The token of a request: `Authorization: Bearer TOKEN`, or HTTP basic
/// auth with the token as the password (what Terraform's `http` state
/// backend sends, from `TF_HTTP_PASSWORD`).
pub(crate) fn bearer(parts: &Parts) -> Result<String, Error> {
    use base64::Engine as _;
    let header = parts
        .headers
        .get(axum::http::header::AUTHORIZATION)
        .ok_or_else(|| {
            Error::api(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "missing bearer token: send `Authorization: Bearer TOKEN` (the CLI takes --token or NUON_TOKEN)",
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
            Error::api(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "malformed Authorization header: expected `Bearer TOKEN` (or basic auth with the token as password)",
            )
        })
}

/// The org an API request acts for.
pub(crate) struct ApiAuth(pub(crate) ApiPrincipal);

impl FromRequestParts<SharedState> for ApiAuth {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &SharedState) -> Result<Self, Error> {
        let token = bearer(parts)?;
        state
            .store
            .authenticate_api(&hash_token(&token))
            .await?
            .map(ApiAuth)
            .ok_or_else(|| {
                Error::api(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "invalid or revoked API token (an admin token is in the control plane's DATA_DIR/admin-token; under `nuon dev`, ./nuon-data/control/admin-token)",
                )
            })
    }
}

/// The runner a Runner API request comes from.
pub(crate) struct RunnerAuth(pub(crate) RunnerPrincipal);

impl FromRequestParts<SharedState> for RunnerAuth {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &SharedState) -> Result<Self, Error> {
        let hash = hash_token(&bearer(parts)?);
        if let Some((p, at)) = state.runner_auth.lock().expect("auth lock").get(&hash)
            && at.elapsed() < AUTH_CACHE_TTL
        {
            return Ok(RunnerAuth(p.clone()));
        }
        let principal = state
            .store
            .authenticate_runner(&hash)
            .await?
            .ok_or_else(|| {
                Error::api(
                    StatusCode::UNAUTHORIZED,
                    "unauthorized",
                    "invalid or revoked runner token; create a new one with `nuon runners create`",
                )
            })?;
        state
            .runner_auth
            .lock()
            .expect("auth lock")
            .insert(hash, (principal.clone(), Instant::now()));
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

fn json_rejection(rejection: JsonRejection) -> Error {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return Error::api(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
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

async fn not_found_route(uri: axum::http::Uri) -> Error {
    Error::not_found(format!("no route {}", uri.path()))
}

async fn health() -> &'static str {
    "ok\n"
}

fn finish(router: Router<SharedState>, state: SharedState) -> Router {
    router
        .route(routes::HEALTH, axum::routing::get(health))
        .fallback(not_found_route)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Every operation of the Control API.
pub(crate) fn control_ops() -> Vec<doc::Op> {
    let mut ops = control::ops();
    ops.extend(orgs::ops());
    ops.extend(apps::ops());
    ops.extend(state::ops());
    ops.extend(workflows::ops());
    ops
}

/// The OpenAPI document of the Control API.
pub fn openapi() -> serde_json::Value {
    doc::openapi(&control_ops())
}

pub(crate) fn control_router(state: SharedState) -> Router {
    let ops = control_ops();
    let document = Arc::new(doc::openapi(&ops));
    let router = doc::router(ops).route(
        routes::OPENAPI,
        axum::routing::get(move || {
            let document = document.clone();
            async move { axum::Json(document.as_ref().clone()) }
        }),
    );
    finish(router, state)
}

pub(crate) fn runner_router(state: SharedState) -> Router {
    finish(runner::routes().merge(state::runner_routes()), state)
}
