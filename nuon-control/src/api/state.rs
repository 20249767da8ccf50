//! Terraform state on the control plane: the `http` backend Terraform
//! itself talks to (on the Runner API), and the operator's view and forced
//! unlock (on the Control API; the service's, `service/states.rs`).
//!
//! The backend's basic-auth password is either a job's state token
//! (`stt_...`, minted when the workflow step is dispatched, good for that
//! one component while that job has not ended, so a runner's own token
//! never reaches Terraform) or the install runner's token (for operators).
//! A lock taken with a state token records its job: when the job ends
//! without releasing it (its runner was lost), the executor releases it
//! and says so in the step.
//!
//! Terraform's protocol: `GET` the state (404 when there is none), `POST` a
//! new state (with `?ID=LOCK` while it holds the lock), `LOCK` and `UNLOCK`
//! with its lock info as the body. A lock held by someone else answers 423
//! with the holder's lock info, which Terraform prints. Every state written
//! is kept as a new version, sealed like the install's secrets.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use nuon_core::endpoint as ep;
use nuon_core::wire::ErrorCode;
use nuon_core::wire::{StateList, StateUnlocked, routes};
use nuon_core::{InstallId, now_ms};
use serde::Deserialize;

use super::doc::Op;
use super::{Caller, Q, RunnerAuth, SharedState};
use crate::error::Error;
use crate::secrets::state_context;
use crate::service::states::check_component;
use crate::store::StateLock;
use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use nuon_core::JobId;
use nuon_core::token::hash_token;

pub(super) fn runner_routes() -> axum::Router<SharedState> {
    axum::Router::new().route(routes::RUNNER_STATE, any(backend))
}

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::ListInstallStates>(get(list_states)),
        Op::endpoint::<ep::ForceUnlockState>(post(force_unlock)),
    ]
}

/// A lock held by someone else: 423 with the holder's lock info, as
/// Terraform expects.
fn locked(held: StateLock) -> Response {
    (
        StatusCode::LOCKED,
        [(header::CONTENT_TYPE, "application/json")],
        held.info,
    )
        .into_response()
}

#[derive(Deserialize)]
struct StateQuery {
    #[serde(rename = "ID")]
    id: Option<String>,
}

#[derive(Deserialize)]
struct LockBody {
    #[serde(rename = "ID")]
    id: String,
}

/// The prefix of state tokens.
pub(crate) const STATE_TOKEN_PREFIX: &str = "stt_";

/// Who calls the state backend: the install, and the job when it came
/// with a state token (then only for its one component).
pub(crate) struct StateAuth {
    install: InstallId,
    only: Option<(String, JobId)>,
}

impl FromRequestParts<SharedState> for StateAuth {
    type Rejection = Error;

    async fn from_request_parts(parts: &mut Parts, state: &SharedState) -> Result<Self, Error> {
        let token = super::bearer(parts)?;
        if token.starts_with(STATE_TOKEN_PREFIX) {
            let hash = hash_token(&token);
            let source = super::caller::source_of(&parts.extensions);
            let p = super::throttled(state, &source, &token, &hash, async {
                Ok(state.store.authenticate_state(&hash).await?)
            })
            .await?
            .ok_or_else(|| {
                    Error::refused(ErrorCode::Unauthorized, "this state token is unknown or its job has ended: state tokens are good only while their job runs",
                    )
                })?;
            return Ok(StateAuth {
                install: p.install_id,
                only: Some((p.component, p.job_id)),
            });
        }
        let RunnerAuth(runner) = RunnerAuth::from_request_parts(parts, state).await?;
        let (_, install) = state
            .store
            .install_of_runner(&runner.runner_id)
            .await?
            .ok_or_else(|| {
                Error::refused(
                    ErrorCode::NotAnInstallRunner,
                    "Terraform state is kept per install: use the token of the install's runner",
                )
            })?;
        Ok(StateAuth {
            install,
            only: None,
        })
    }
}

async fn backend(
    State(state): State<SharedState>,
    auth: StateAuth,
    Path(component): Path<String>,
    Q(q): Q<StateQuery>,
    method: Method,
    body: Bytes,
) -> Result<Response, Error> {
    check_component(&component)?;
    let install = auth.install;
    let job_id = match auth.only {
        Some((allowed, _)) if allowed != component => {
            return Err(Error::refused(
                ErrorCode::WrongComponent,
                format!("this state token is for the state of {allowed:?}, not {component:?}"),
            ));
        }
        Some((_, job)) => Some(job),
        None => None,
    };
    let lock_info = |body: &Bytes| -> Result<StateLock, Error> {
        let parsed: LockBody = serde_json::from_slice(body).map_err(|e| {
            Error::bad_request(format!(
                "the lock info is not Terraform's JSON with an ID: {e}"
            ))
        })?;
        Ok(StateLock {
            id: parsed.id,
            info: String::from_utf8_lossy(body).into_owned(),
            created_at_ms: now_ms(),
            job_id: job_id.clone(),
        })
    };
    match method.as_str() {
        "GET" => match state.store.get_state(&install, &component).await? {
            Some((_, sealed)) => {
                let text = state
                    .secrets
                    .open(&sealed, &state_context(&install, &component))?;
                Ok(([(header::CONTENT_TYPE, "application/json")], text).into_response())
            }
            None => Err(Error::not_found(format!("no state yet for {component}"))),
        },
        "POST" => {
            let text = std::str::from_utf8(&body)
                .ok()
                .filter(|t| serde_json::from_str::<serde::de::IgnoredAny>(t).is_ok())
                .ok_or_else(|| Error::bad_request("a Terraform state must be JSON"))?;
            let sealed = state
                .secrets
                .seal(text, &state_context(&install, &component));
            match state
                .store
                .put_state(&install, &component, q.id.as_deref(), sealed)
                .await?
            {
                Ok(version) => {
                    tracing::info!(install = %install, component, version, "terraform state written");
                    Ok(StatusCode::OK.into_response())
                }
                Err(held) => Ok(locked(held)),
            }
        }
        "LOCK" => {
            let lock = lock_info(&body)?;
            match state.store.lock_state(&install, &component, lock).await? {
                Ok(()) => Ok(StatusCode::OK.into_response()),
                Err(held) => Ok(locked(held)),
            }
        }
        "UNLOCK" => {
            let lock = lock_info(&body)?;
            match state
                .store
                .unlock_state(&install, &component, &lock.id)
                .await?
            {
                Ok(()) => Ok(StatusCode::OK.into_response()),
                Err(held) => Ok(locked(held)),
            }
        }
        other => Err(Error::refused(
            ErrorCode::MethodNotAllowed,
            format!(
                "{other} is not part of Terraform's http backend here: use GET, POST, LOCK or UNLOCK"
            ),
        )),
    }
}

async fn list_states(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<StateList>, Error> {
    state.services().list_states(&caller, &key).await.map(Json)
}

async fn force_unlock(
    State(state): State<SharedState>,
    caller: Caller,
    Path((key, component)): Path<(String, String)>,
) -> Result<Json<StateUnlocked>, Error> {
    state
        .services()
        .force_unlock_state(&caller, &key, &component)
        .await
        .map(Json)
}
