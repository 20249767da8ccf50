//! Releases on the Control API: a config version of an app and the
//! newest successful build of each of its components (and its sandbox),
//! frozen when the release is made. The service
//! ([`crate::service::Services::create_release`]) makes and reads them;
//! this is the thin HTTP side.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use nuon_core::endpoint as ep;
use nuon_core::wire::{CreateRelease, ReleaseInfo, ReleaseList};
use serde::Deserialize;

use super::doc::Op;
use super::{Body, Caller, SharedState, body_of};
use crate::error::Error;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::CreateRelease>(post(create_release)),
        Op::endpoint::<ep::ListReleases>(get(list_releases)).query(
            "app",
            serde_json::json!({"type": "string"}),
            "Only this app's (by name or id).",
        ),
        Op::endpoint::<ep::GetRelease>(get(get_release)),
    ]
}

/// `?app=` of a list of releases.
#[derive(Debug, Default, Deserialize)]
struct AppQuery {
    app: Option<String>,
}

async fn create_release(
    State(state): State<SharedState>,
    caller: Caller,
    body: Result<Body<CreateRelease>, Error>,
) -> Result<(StatusCode, Json<ReleaseInfo>), Error> {
    let req = body_of::<ep::CreateRelease, _>(&state, &caller, &[], body).await?;
    let release = state.services().create_release(&caller, req).await?;
    Ok((StatusCode::CREATED, Json(release)))
}

async fn list_releases(
    State(state): State<SharedState>,
    caller: Caller,
    Query(q): Query<AppQuery>,
) -> Result<Json<ReleaseList>, Error> {
    state
        .services()
        .list_releases(&caller, q.app.as_deref())
        .await
        .map(Json)
}

async fn get_release(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<ReleaseInfo>, Error> {
    state.services().get_release(&caller, &key).await.map(Json)
}
