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
use serde::Deserialize;
use serde_json::json;

use super::doc::Op;
use super::{Body, Caller, Q, SharedState, body_of};
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
    caller: Caller,
    Q(q): Q<ListQuery>,
) -> Result<Json<AuditList>, Error> {
    state
        .services()
        .list_audit(&caller, q.after, q.limit, q.actor.as_deref())
        .await
        .map(Json)
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
    caller: Caller,
    Q(q): Q<ExportQuery>,
) -> Result<Response, Error> {
    let actor = state
        .services()
        .audit_actor(&caller, q.runner.as_deref(), q.install.as_deref())
        .await?;
    // Streamed a page at a time: a million entries never sit in memory.
    let stream = futures_util::stream::unfold(Some(0u64), move |after| {
        let (state, caller, actor) = (state.clone(), caller.clone(), actor.clone());
        async move {
            let after = after?;
            let services = state.services();
            let page =
                services.list_audit(&caller, Some(after), Some(EXPORT_PAGE), actor.as_deref());
            match page.await {
                Ok(page) if page.entries.is_empty() => None,
                Ok(page) => {
                    let mut out = Vec::new();
                    for e in &page.entries {
                        serde_json::to_writer(&mut out, e).expect("an entry encodes");
                        out.push(b'\n');
                    }
                    Some((Ok::<_, std::io::Error>(out), page.next_after))
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
    caller: Caller,
) -> Result<Json<AuditVerification>, Error> {
    state.services().verify_audit(&caller).await.map(Json)
}

async fn create_webhook(
    State(state): State<SharedState>,
    caller: Caller,
    body: Result<Body<CreateWebhook>, Error>,
) -> Result<(StatusCode, Json<WebhookCreated>), Error> {
    let req = body_of::<ep::CreateWebhook, _>(&state, &caller, &[], body).await?;
    let made = state.services().create_webhook(&caller, req).await?;
    Ok((StatusCode::CREATED, Json(made)))
}

async fn list_webhooks(
    State(state): State<SharedState>,
    caller: Caller,
) -> Result<Json<WebhookList>, Error> {
    state.services().list_webhooks(&caller).await.map(Json)
}

async fn remove_webhook(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
) -> Result<Json<WebhookInfo>, Error> {
    state
        .services()
        .remove_webhook(&caller, &raw)
        .await
        .map(Json)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DeliveriesQuery {
    webhook: Option<String>,
    limit: Option<u32>,
}

async fn deliveries(
    State(state): State<SharedState>,
    caller: Caller,
    Q(q): Q<DeliveriesQuery>,
) -> Result<Json<DeliveryList>, Error> {
    state
        .services()
        .list_deliveries(&caller, q.webhook.as_deref(), q.limit)
        .await
        .map(Json)
}

async fn debug(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Body<DebugRequest>, Error>,
) -> Result<(StatusCode, Json<JobInfo>), Error> {
    let req = body_of::<ep::RequestInstallDebug, _>(&state, &caller, &[&key], body).await?;
    let job = state
        .services()
        .request_install_debug(&caller, &key, req)
        .await?;
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
