//! One token, one live runner: each runner process names its session on
//! every Runner API request ([`SESSION_HEADER`]). The first session of a
//! token takes it; a second is refused while the first is seen, naming
//! it, unless it asks to replace it, after which the first is refused in
//! turn (fenced off) within the auth cache's time.

use nuon_core::wire::ErrorCode;
use std::net::SocketAddr;

use axum::extract::ConnectInfo;
use axum::http::request::Parts;
use nuon_core::now_ms;
use nuon_core::wire::{RunnerSession, RunnerStatus, SESSION_HEADER};

use super::AppState;
use crate::error::Error;
use crate::store::RunnerPrincipal;

/// Checks the request's session against the token's, taking the token
/// when it is free, its session gone quiet, or the request replaces it.
/// A request without a session is refused (one that skipped the check
/// could run beside the token's live runner), but for Terraform's state
/// backend, which cannot send one.
pub(super) async fn check(
    state: &AppState,
    parts: &Parts,
    principal: &RunnerPrincipal,
) -> Result<(), Error> {
    let Some(raw) = parts.headers.get(SESSION_HEADER) else {
        // Terraform's own `http` backend sends no header of ours: the state
        // endpoints take a job's state token, or an operator's runner token,
        // without a session.
        let state = nuon_core::wire::routes::RUNNER_STATE.trim_end_matches("{component}");
        if parts.uri.path().starts_with(state) {
            return Ok(());
        }
        return Err(Error::refused(
            ErrorCode::RunnerSessionRequired,
            format!(
                "a Runner API request must name its runner process in the {SESSION_HEADER} \
                 header (`id=ID; host=HOST; pid=PID`): one token, one live runner. nuon-runner \
                 and nuon_client::RunnerClient send it; a tool of your own must too"
            ),
        ));
    };
    let raw = raw
        .to_str()
        .map_err(|_| Error::bad_request(format!("{SESSION_HEADER} is not ASCII")))?;
    let (mut mine, replace) = RunnerSession::parse_header(raw).map_err(Error::bad_request)?;
    let current = &principal.current;
    if let Some(cur) = current {
        // The same session: nothing to record, unless it was restarted
        // (another process, maybe another version) in the same place.
        if cur.id == mine.id
            && (cur.pid == mine.pid && cur.version == mine.version || mine.version.is_none())
        {
            return Ok(());
        }
        let quiet = now_ms() - principal.last_seen_ms.unwrap_or(0);
        // Seen lately, or it took the token lately (its first calls may
        // come before any that records it seen).
        let latest = principal.last_seen_ms.max(Some(cur.since_ms));
        let live = state.runner_status(false, latest) == RunnerStatus::Connected;
        if live && !replace && cur.id != mine.id {
            return Err(in_use(principal, cur, quiet));
        }
    }
    mine.addr = peer(parts);
    mine.since_ms = now_ms();
    let json = serde_json::to_string(&mine)
        .map_err(|e| Error::internal(format!("cannot encode a runner session: {e}")))?;
    let took = state
        .store
        .set_runner_session(&principal.runner_id, principal.session.as_deref(), &json)
        .await?;
    // Every replica's cached view of this token is stale now (theirs
    // within the cache's time).
    state.forget_runner_tokens(&principal.runner_id);
    if !took {
        // Another request of this same session may have taken it first
        // (a runner's first calls can overlap): that is no conflict.
        let now = state
            .store
            .find_runner(&principal.org_id, principal.runner_id.as_str())
            .await?
            .and_then(|r| r.session);
        if now.is_some_and(|s| s.id == mine.id) {
            return Ok(());
        }
        return Err(Error::refused(
            ErrorCode::RunnerInUse,
            format!(
                "another process took runner {}'s token at the same moment; one token, one runner: stop the other, or start this one with --replace",
                principal.runner_id
            ),
        ));
    }
    match current {
        Some(cur) => tracing::warn!(
            runner = %principal.runner_id,
            new = %describe(&mine),
            old = %describe(cur),
            "a runner session took the token over; the old one is refused from now on"
        ),
        None => {
            tracing::info!(runner = %principal.runner_id, session = %describe(&mine), "runner session started")
        }
    }
    Ok(())
}

fn in_use(principal: &RunnerPrincipal, cur: &RunnerSession, quiet_ms: i64) -> Error {
    Error::refused(
        ErrorCode::RunnerInUse,
        format!(
            "runner {} is already running as {}, started {} s ago and last seen {} s ago; one token, one live runner: stop that one, or start this one with --replace to take over (the other is then refused)",
            principal.runner_id,
            describe(cur),
            (now_ms() - cur.since_ms).max(0) / 1000,
            quiet_ms.max(0) / 1000,
        ),
    )
}

fn describe(s: &RunnerSession) -> String {
    let from = s
        .addr
        .as_deref()
        .map(|a| format!(" from {a}"))
        .unwrap_or_default();
    format!("pid {} on host {}{from}", s.pid, s.host)
}

/// The address a request came from: the first `X-Forwarded-For` hop when
/// a proxy says so, else the peer.
fn peer(parts: &Parts) -> Option<String> {
    let forwarded = parts
        .headers
        .get("x-forwarded-for")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(',').next())
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty());
    forwarded.or_else(|| {
        parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|c| c.0.ip().to_string())
    })
}
