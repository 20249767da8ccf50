//! The Control API's audit layer: every state-changing call a token made,
//! recorded under its operation (the operations whose service records
//! them itself excepted).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::Response;

use super::SharedState;
use crate::store::ApiPrincipal;

/// Filled by the API token's check: whose request this is.
#[derive(Clone, Default)]
pub(crate) struct Actor(Arc<Mutex<Option<ApiPrincipal>>>);

impl Actor {
    pub(crate) fn set(&self, p: &ApiPrincipal) {
        *self.0.lock().expect("actor lock") = Some(p.clone());
    }
}

/// The Control API's write operations, by method and route.
pub(crate) type WriteOps = Arc<HashMap<(String, String), &'static str>>;

/// Records every state-changing Control API call that a token made: who,
/// what, on what, from where, and how it ended.
pub(crate) async fn audit_layer(
    State((state, ops)): State<(SharedState, WriteOps)>,
    req: Request,
    next: Next,
) -> Response {
    let method = req.method().as_str().to_ascii_lowercase();
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_owned());
    let Some(op) = route.and_then(|r| ops.get(&(method, r)).copied()) else {
        return next.run(req).await;
    };
    let source = super::caller::source_of(req.extensions());
    let target = req.uri().path().to_owned();
    let actor = Actor::default();
    let mut req = req;
    req.extensions_mut().insert(actor.clone());
    let response = next.run(req).await;
    let who = actor.0.lock().expect("actor lock").clone();
    if let Some(p) = who {
        record_write(&state, &p, op, target, source, response.status()).await;
    }
    response
}

/// Records a state-changing call of `p` (the API's, or the dashboard's
/// under the API operation it performs): who, what, on what, from where,
/// and how it ended.
pub(crate) async fn record_write(
    state: &SharedState,
    p: &ApiPrincipal,
    op: &str,
    target: String,
    source: String,
    status: axum::http::StatusCode,
) {
    crate::service::record(&state.auditor, p, op, target, source, status).await;
}
