//! The install's progress on the installer page: its provision's steps,
//! live, then its README rendered with its outputs.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use nuon_core::app::AppConfig;
use nuon_core::model::{Install, InstallState};

use super::super::cookies::cookie;
use super::super::error_page;
use super::super::live::live;
use super::super::markdown::to_html;
use super::{CUSTOMER_COOKIE, Opened, forbidden, mine, offer, open};
use crate::api::{SharedState, Source};
use crate::error::Error;
use crate::service::Caller;

/// Where the install's provision is.
pub(super) struct Progress {
    pub(super) status: String,
    /// Each step: name, status, why.
    pub(super) steps: Vec<(String, &'static str, String)>,
    /// The README with the post-install notes, once the install is up.
    pub(super) readme: Option<String>,
    /// Nothing more will change.
    ended: bool,
}

pub(super) async fn progress(
    state: &SharedState,
    caller: &Caller,
    install: &Install,
    config: &AppConfig,
) -> Result<Progress, Error> {
    let workflows = state
        .services()
        .install_workflows(caller, install.id.as_str())
        .await?
        .workflows;
    let wf = workflows.first();
    let steps = wf
        .map(|w| {
            w.steps
                .iter()
                .map(|s| {
                    (
                        s.name.clone(),
                        s.status.as_str(),
                        s.reason.clone().unwrap_or_default(),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let status = match wf {
        None => "No provision has started yet.".to_owned(),
        Some(w) if w.status.is_active() && install.state == InstallState::Created => {
            format!(
                "The {} waits for the install's runner: apply the stack above.",
                w.kind.as_str()
            )
        }
        Some(w) => format!("The {} is {}.", w.kind.as_str(), w.status),
    };
    let up = install.state == InstallState::Active;
    let readme = if up {
        Some(readme_html(state, caller, install, config).await)
    } else {
        None
    };
    let ended = wf.is_none_or(|w| !w.status.is_active());
    Ok(Progress {
        status,
        steps,
        readme,
        ended,
    })
}

/// The README rendered with the install's values and outputs, then the
/// installer's `post_install_markdown`, as sanitized HTML.
async fn readme_html(
    state: &SharedState,
    caller: &Caller,
    install: &Install,
    config: &AppConfig,
) -> String {
    let mut out = String::new();
    if config.metadata.readme.is_some() || config.components.iter().any(|c| c.readme.is_some()) {
        match state
            .services()
            .install_readme(caller, install.id.as_str())
            .await
        {
            Ok(r) => out.push_str(&to_html(&r.rendered)),
            Err(e) => {
                tracing::warn!(install = %install.id, error = %e, "the README does not render")
            }
        }
    }
    if let Some(md) = config
        .installer
        .as_ref()
        .and_then(|i| i.post_install_markdown.as_deref())
    {
        out.push_str(&to_html(md));
    }
    if out.is_empty() {
        out = "<p>The install is up.</p>".into();
    }
    out
}

/// The provision's changes as Server-Sent Events (`progress`), until it
/// ends, for the browser whose invitation made the install.
pub(super) async fn events(
    State(state): State<SharedState>,
    Source(source): Source,
    headers: HeaderMap,
    Path(token): Path<String>,
) -> Response {
    let Some(cookie) = cookie(&headers, CUSTOMER_COOKIE) else {
        return forbidden();
    };
    let inv = match open(&state, &token, &cookie).await {
        Ok(Opened::Mine(inv)) => Arc::new(inv),
        Ok(_) => return forbidden(),
        Err(e) => return error_page(e),
    };
    let o = match offer(&state, &inv, source).await {
        Ok(o) => Arc::new(o),
        Err(e) => return error_page(e),
    };
    live(state.clone(), "progress", move || {
        let (state, o, inv) = (state.clone(), o.clone(), inv.clone());
        async move {
            let install = mine(&state, &o.caller, &inv).await.ok()?;
            let p = progress(&state, &o.caller, &install, &o.config)
                .await
                .ok()?;
            let done = p.ended && (p.readme.is_some() || install.state == InstallState::Failed);
            let event = serde_json::json!({
                "state": install.state.as_str(),
                "status": p.status,
                "steps": p.steps.iter().map(|(n, s, why)| serde_json::json!({"name": n, "status": s, "reason": why})).collect::<Vec<_>>(),
                "readme_html": p.readme,
                "ended": done,
            })
            .to_string();
            Some((event, done))
        }
    })
}
