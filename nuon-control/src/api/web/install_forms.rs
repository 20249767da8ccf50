//! An install's settings and labels, from its page: the service's own
//! operations, refused, done and recorded as the API does them.

use axum::extract::{Form, Path, State};
use axum::response::{IntoResponse, Redirect, Response};

use super::{Fields, Web, csrf_refused, error_page, field};
use crate::api::{SharedState, Source};
use crate::error::Error;

/// Renames an install or changes its approval mode, from its page: the
/// service's own operation, which refuses, changes and records it as the
/// API does.
pub(super) async fn settings(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Path(key): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(r) = csrf_refused(&web, field(&fields, "csrf").unwrap_or_default()) {
        return r;
    }
    let approval = match field(&fields, "approval").filter(|a| !a.is_empty()) {
        Some(a) => match a.parse() {
            Ok(mode) => Some(mode),
            Err(_) => {
                return error_page(Error::bad_request(format!(
                    "approval {a:?} is not one of approve-all, prompt: pick one of the list"
                )));
            }
        },
        None => None,
    };
    let change = nuon_core::wire::EditInstall {
        name: field(&fields, "name")
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_owned),
        approval,
    };
    let caller = web.auth.caller_at(source);
    match state.services().update_install(&caller, &key, change).await {
        Ok(i) => Redirect::to(&format!("/installs/{}", i.id)).into_response(),
        Err(e) => error_page(e),
    }
}

/// Sets and removes an install's labels (`tier=prod region-`, as `nuon
/// installs label` takes them), from its page: the service's own
/// operation, refused, done and recorded as the API does it.
pub(super) async fn labels(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Path(key): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(r) = csrf_refused(&web, field(&fields, "csrf").unwrap_or_default()) {
        return r;
    }
    let words: Vec<&str> = field(&fields, "labels")
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let change = match nuon_core::wire::LabelChange::from_words(&words) {
        Ok(c) if !words.is_empty() => c,
        Ok(_) => {
            return error_page(Error::bad_request(
                "name a label to set (KEY=VALUE) or remove (KEY-)",
            ));
        }
        Err(e) => return error_page(Error::bad_request(format!("labels: {e}"))),
    };
    let caller = web.auth.caller_at(source);
    match state
        .services()
        .set_install_labels(&caller, &key, change)
        .await
    {
        Ok(i) => Redirect::to(&format!("/installs/{}", i.id)).into_response(),
        Err(e) => error_page(e),
    }
}
