//! Pages that follow what changes: Server-Sent Events of what a closure
//! sees, sent when it changed (a workflow's steps on the dashboard, an
//! install's provision on the customer's installer page).

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};

use super::{Web, error_page, pages};
use crate::api::SharedState;

/// A workflow's changes as Server-Sent Events (`workflow`), until it ends.
pub(super) async fn workflow_events(
    State(state): State<SharedState>,
    web: Web,
    Path(raw): Path<String>,
) -> Response {
    let caller = web.auth.caller();
    let id = match pages::workflow_of(&state, &web, &raw).await {
        Ok(wf) => wf.id,
        Err(e) => return error_page(e),
    };
    // Who approves, by name, as the page names them.
    let tokens = match state.services().token_names(&caller).await {
        Ok(t) => std::sync::Arc::new(t),
        Err(e) => return error_page(e),
    };
    live(state.clone(), "workflow", move || {
        let (state, caller, id, tokens) =
            (state.clone(), caller.clone(), id.clone(), tokens.clone());
        async move {
            let wf = state
                .services()
                .get_workflow(&caller, id.as_str())
                .await
                .ok()?;
            Some((
                workflow_event(&wf, &tokens).to_string(),
                !wf.status.is_active(),
            ))
        }
    })
}

/// Server-Sent Events named `name`: what `look` sees, each time it
/// changed, looked at twice a second until `look` says it is done (or
/// finds nothing) or the control plane stops.
pub(super) fn live<F, Fut>(state: SharedState, name: &'static str, look: F) -> Response
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Option<(String, bool)>> + Send + 'static,
{
    use axum::response::sse::{Event, KeepAlive, Sse};
    // (state, look, last sent, ended)
    let start = (state, look, String::new(), false);
    let stream =
        futures_util::stream::unfold(start, move |(state, look, last, ended)| async move {
            if ended {
                return None;
            }
            loop {
                let (event, done) = look().await?;
                if event != last {
                    let e = Event::default().event(name).data(event.clone());
                    return Some((
                        Ok::<_, std::convert::Infallible>(e),
                        (state, look, event, done),
                    ));
                }
                tokio::select! {
                    _ = tokio::time::sleep(std::time::Duration::from_millis(500)) => {}
                    _ = state.shutting_down() => return None,
                }
            }
        });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// A workflow as its page's script follows it.
fn workflow_event(
    wf: &nuon_core::wire::WorkflowInfo,
    tokens: &std::collections::BTreeMap<String, String>,
) -> serde_json::Value {
    let steps: Vec<serde_json::Value> = wf
        .steps
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s.name,
                "status": s.status.as_str(),
                "needs_approval": s.needs_approval,
                "approved_by": s.approved_by.as_deref().map(|by| super::cells::person(by, tokens)),
                "reason": s.reason,
                "job_id": s.job_id,
            })
        })
        .collect();
    serde_json::json!({
        "status": wf.status.as_str(),
        "ended": !wf.status.is_active(),
        "steps": steps,
    })
}
