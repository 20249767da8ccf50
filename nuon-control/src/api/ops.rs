//! Operations on the Control API: the org's audit trail (list, export,
//! verify), webhooks and their deliveries, log and debug requests to an
//! install's runner, and `/metrics`.

use axum::Json;
use axum::body::Body as HttpBody;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use nuon_core::audit::AuditEntry;
use nuon_core::endpoint as ep;
use nuon_core::wire::{
    AuditList, AuditVerification, CreateWebhook, DebugRequest, DeliveryList, JobInfo,
    WebhookCreated, WebhookInfo, WebhookList, routes,
};
use nuon_core::{DebugJob, Job, JobId, JobSpec, RetryPolicy, WebhookId, now_ms};
use serde::Deserialize;
use serde_json::json;

use super::apps::install_of;
use super::control::require_admin;
use super::doc::Op;
use super::{ApiAuth, Body, Q, SharedState, path_id};
use crate::error::Error;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::ListAudit>(get(list))
            .query("after", json!({"type": "integer", "minimum": 0}), "The number of the last entry read (0 for the start).")
            .query("limit", json!({"type": "integer", "minimum": 0}), "Entries per page (1 to 10000, default 1000).")
            .query("actor", json!({"type": "string"}), "Only the entries of this actor (a token id, or runner:ID)."),
        Op::get(routes::AUDIT_EXPORT, "exportAudit", "The org's whole audit trail as NDJSON, or with runner or install only the jobs that runner ran (what `nuon-runner audit compare` takes).", get(export))
            .query("runner", json!({"type": "string"}), "Only the entries of this runner (name or id).")
            .query("install", json!({"type": "string"}), "Only the entries of this install's runner (name or id).")
            .streams::<AuditEntry>("application/x-ndjson"),
        Op::endpoint::<ep::VerifyAudit>(get(verify)),
        Op::endpoint::<ep::CreateWebhook>(post(create_webhook)),
        Op::endpoint::<ep::ListWebhooks>(get(list_webhooks)),
        Op::endpoint::<ep::RemoveWebhook>(post(remove_webhook)),
        Op::endpoint::<ep::ListWebhookDeliveries>(get(deliveries))
            .query("webhook", json!({"type": "string"}), "Only this webhook's.")
            .query("limit", json!({"type": "integer", "minimum": 0}), "How many (1 to 1000, default 100)."),
        Op::endpoint::<ep::RequestInstallDebug>(post(debug)),
    ]
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    after: Option<u64>,
    limit: Option<u32>,
    actor: Option<String>,
}

async fn list(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Q(q): Q<ListQuery>,
) -> Result<Json<AuditList>, Error> {
    let limit = q.limit.unwrap_or(1000).clamp(1, 10_000);
    let entries = state
        .store
        .list_audit(
            &auth.0.org_id,
            q.after.unwrap_or(0),
            limit,
            q.actor.as_deref(),
        )
        .await?;
    let next_after = (entries.len() == limit as usize)
        .then(|| entries.last().map(|e| e.n))
        .flatten();
    Ok(Json(AuditList {
        entries,
        next_after,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ExportQuery {
    runner: Option<String>,
    install: Option<String>,
}

/// Entries read per page of an export.
const EXPORT_PAGE: u32 = 10_000;

async fn export(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Q(q): Q<ExportQuery>,
) -> Result<Response, Error> {
    let org = auth.0.org_id.clone();
    let runner = match (&q.runner, &q.install) {
        (Some(_), Some(_)) => {
            return Err(Error::bad_request(
                "give runner or install, not both (an install's entries are its runner's)",
            ));
        }
        (Some(r), None) => Some(
            state
                .store
                .find_runner(&org, r)
                .await?
                .ok_or_else(|| Error::not_found(format!("no runner {r:?} in this org")))?
                .id,
        ),
        (None, Some(i)) => Some(install_of(&state, &auth, i).await?.runner_id),
        (None, None) => None,
    };
    let actor = runner.map(|r| format!("runner:{r}"));
    // Streamed a page at a time: a million entries never sit in memory.
    let stream = futures_util::stream::unfold(Some(0u64), move |after| {
        let (state, org, actor) = (state.clone(), org.clone(), actor.clone());
        async move {
            let after = after?;
            match state
                .store
                .list_audit(&org, after, EXPORT_PAGE, actor.as_deref())
                .await
            {
                Ok(page) if page.is_empty() => None,
                Ok(page) => {
                    let next = (page.len() == EXPORT_PAGE as usize)
                        .then(|| page.last().map(|e| e.n))
                        .flatten();
                    let mut out = Vec::new();
                    for e in &page {
                        serde_json::to_writer(&mut out, e).expect("an entry encodes");
                        out.push(b'\n');
                    }
                    Some((Ok::<_, std::io::Error>(out), next))
                }
                Err(e) => Some((Err(std::io::Error::other(e.to_string())), None)),
            }
        }
    });
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        HttpBody::from_stream(stream),
    )
        .into_response())
}

async fn verify(
    State(state): State<SharedState>,
    auth: ApiAuth,
) -> Result<Json<AuditVerification>, Error> {
    Ok(Json(
        crate::store::verify_audit(&*state.store, &auth.0.org_id).await?,
    ))
}

async fn create_webhook(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Body(req): Body<CreateWebhook>,
) -> Result<(StatusCode, Json<WebhookCreated>), Error> {
    require_admin(&auth)?;
    let url = req.url.trim();
    let parsed = reqwest::Url::parse(url).map_err(|e| {
        Error::bad_request(format!(
            "webhook url {url:?} is not a URL ({e}): give e.g. https://hooks.example.com/nuon"
        ))
    })?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(Error::bad_request(format!(
            "webhook url {url:?} must be http:// or https:// with a host"
        )));
    }
    // A literal address is checked now; a name, at each delivery.
    let literal = parsed.host_str().and_then(|h| {
        h.trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .ok()
    });
    if let Some(ip) =
        literal.filter(|ip| !state.ops.webhook_allow_private && !crate::ops::is_public(*ip))
    {
        return Err(Error::bad_request(format!(
            "webhook url {url:?} points at {ip}, not a public address: an org's webhook may not reach into the control plane's network (`nuon-ctl serve --webhook-allow-private-networks` allows it)"
        )));
    }
    if req.events.is_empty() {
        let all: Vec<_> = nuon_core::webhook::WebhookEvent::ALL
            .iter()
            .map(|e| e.as_str())
            .collect();
        return Err(Error::bad_request(format!(
            "a webhook takes at least one event: {}",
            all.join(", ")
        )));
    }
    let mut events = req.events.clone();
    events.sort();
    events.dedup();
    let id = WebhookId::generate();
    let mut raw = [0u8; 24];
    nuon_core::random_bytes(&mut raw);
    let secret = format!("whsec_{}", hex::encode(raw));
    let sealed = state
        .secrets
        .seal(&secret, &crate::secrets::webhook_context(&id));
    let webhook = state
        .store
        .create_webhook(&auth.0.org_id, &id, parsed.as_str(), &events, &sealed)
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(WebhookCreated { webhook, secret }),
    ))
}

async fn list_webhooks(
    State(state): State<SharedState>,
    auth: ApiAuth,
) -> Result<Json<WebhookList>, Error> {
    Ok(Json(WebhookList {
        webhooks: state.store.list_webhooks(&auth.0.org_id).await?,
    }))
}

async fn remove_webhook(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(raw): Path<String>,
) -> Result<Json<WebhookInfo>, Error> {
    require_admin(&auth)?;
    let id: WebhookId = path_id("webhook", &raw)?;
    state
        .store
        .remove_webhook(&auth.0.org_id, &id)
        .await?
        .map(Json)
        .ok_or_else(|| {
            Error::not_found(format!(
                "no webhook {raw} in this org (see `nuon orgs webhooks list`)"
            ))
        })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeliveriesQuery {
    webhook: Option<String>,
    limit: Option<u32>,
}

async fn deliveries(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Q(q): Q<DeliveriesQuery>,
) -> Result<Json<DeliveryList>, Error> {
    let hook: Option<WebhookId> = q
        .webhook
        .as_deref()
        .map(|w| path_id("webhook", w))
        .transpose()?;
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    Ok(Json(DeliveryList {
        deliveries: state
            .store
            .list_deliveries(&auth.0.org_id, hook.as_ref(), limit)
            .await?,
    }))
}

/// The longest a debug command may run.
const MAX_DEBUG_SECS: u64 = 3600;

async fn debug(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
    Body(req): Body<DebugRequest>,
) -> Result<(StatusCode, Json<JobInfo>), Error> {
    require_admin(&auth)?;
    if req.command.is_empty() || req.command[0].trim().is_empty() {
        return Err(Error::bad_request(
            "command is empty: give the program and its arguments, e.g. [\"journalctl\", \"-u\", \"app\", \"-n\", \"100\"]",
        ));
    }
    if req.command.iter().any(|a| a.contains('\0')) {
        return Err(Error::bad_request("command: an argument holds a NUL byte"));
    }
    let timeout_secs = req.timeout_secs.unwrap_or(300);
    if timeout_secs == 0 || timeout_secs > MAX_DEBUG_SECS {
        return Err(Error::bad_request(format!(
            "timeout_secs must be between 1 and {MAX_DEBUG_SECS}, got {timeout_secs}"
        )));
    }
    let install = install_of(&state, &auth, &key).await?;
    let org = auth.0.org_id.clone();
    let payload = DebugJob {
        purpose: req.purpose,
        command: req.command,
    };
    let spec = JobSpec {
        job_id: JobId::generate(),
        org_id: org.clone(),
        runner_id: install.runner_id.clone(),
        kind: DebugJob::KIND.into(),
        payload: serde_json::to_value(&payload)
            .map_err(|e| Error::internal(format!("cannot encode the request: {e}")))?,
        timeout_secs,
        retry: RetryPolicy { max_attempts: 1 },
        created_at_ms: now_ms(),
        redact: Vec::new(),
        role: None,
        sandbox: Default::default(),
        customer_secrets: Vec::new(),
    };
    let job = state.keys.sign(spec).await?;
    let job = state.store.enqueue_job(job).await?;
    state.wake_runner(&install.runner_id);
    tracing::info!(job = %job.id, install = %install.name, "debug request queued for the install's runner");
    Ok((StatusCode::CREATED, Json(job)))
}

/// `GET /metrics`: Prometheus text, no token (nothing in it names an org).
pub(super) async fn metrics(State(state): State<SharedState>) -> Result<Response, Error> {
    let text = crate::ops::render(state.fleet(), &state.gauges).await?;
    Ok((
        [(header::CONTENT_TYPE, nuon_core::metrics::CONTENT_TYPE)],
        text,
    )
        .into_response())
}

impl super::AppState {
    /// The operations layer's view of the state.
    pub(crate) fn fleet(&self) -> crate::ops::Fleet<'_> {
        crate::ops::Fleet {
            store: &*self.store,
            auditor: &self.auditor,
            secrets: &self.secrets,
            config: &self.ops,
            metrics: &self.metrics,
        }
    }
}
