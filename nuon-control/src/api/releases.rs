//! Releases on the Control API: a config version of an app and the
//! newest successful build of each of its components (and its sandbox),
//! frozen when the release is made, so that whatever is synced or built
//! later, the release deploys the same artifacts by digest.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use nuon_core::endpoint as ep;
use nuon_core::wire::ErrorCode;
use nuon_core::wire::{CreateRelease, ReleaseInfo, ReleaseList};
use nuon_core::{ReleaseId, now_ms};
use serde::Deserialize;

use super::apps::{app_of, decode_config};
use super::control::require_deployer;
use super::doc::Op;
use super::{ApiAuth, Body, SharedState};
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
    auth: ApiAuth,
    Body(req): Body<CreateRelease>,
) -> Result<(StatusCode, Json<ReleaseInfo>), Error> {
    require_deployer(&auth)?;
    let org = &auth.0.org_id;
    let app = app_of(&state, &auth, &req.app).await?;
    let stored = state
        .store
        .get_config(org, &app.id, req.config_version)
        .await?
        .ok_or_else(|| {
            Error::not_found(match req.config_version {
                Some(v) => format!("app {:?} has no config version {v}", app.name),
                None => format!("app {:?} has no config yet: `nuon apps sync` one", app.name),
            })
        })?;
    let version = decode_config(&state, &app, stored)?;
    let config = version.config;
    let mut wanted: Vec<String> = config.components.iter().map(|c| c.name.clone()).collect();
    if config.sandbox.is_some() {
        wanted.push("sandbox".into());
    }
    let built = state
        .engine
        .latest_builds(org, &app.id, version.version)
        .await?;
    let unbuilt: Vec<&str> = wanted
        .iter()
        .filter(|c| !built.contains_key(*c))
        .map(String::as_str)
        .collect();
    if !unbuilt.is_empty() {
        let latest = state
            .store
            .get_config(org, &app.id, None)
            .await?
            .map(|c| c.version);
        // Builds are made of the latest version only.
        let fix = if latest == Some(version.version) {
            format!("run `nuon builds create --app {} --wait` first", app.name)
        } else {
            format!(
                "builds are made of the latest config version only (v{}): release that one, or sync v{}'s files again so that they become the latest",
                latest.unwrap_or_default(),
                version.version
            )
        };
        return Err(Error::api(
            StatusCode::CONFLICT,
            ErrorCode::NotBuilt,
            format!(
                "a release needs a successful build of every component: config version {} of app {:?} has none of {}; {fix}",
                version.version,
                app.name,
                unbuilt.join(", "),
            ),
        ));
    }
    let builds = built
        .into_iter()
        .filter(|(c, _)| wanted.contains(c))
        .collect();
    let release = ReleaseInfo {
        id: ReleaseId::generate(),
        app_id: app.id.clone(),
        app_name: Some(app.name.clone()),
        config_version: version.version,
        builds,
        created_at_ms: now_ms(),
    };
    state.store.create_release(org, &release).await?;
    tracing::info!(release = %release.id, app = %app.name, version = release.config_version, "release created");
    Ok((StatusCode::CREATED, Json(release)))
}

/// Releases with their apps' names.
async fn named(
    state: &SharedState,
    auth: &ApiAuth,
    mut releases: Vec<ReleaseInfo>,
) -> Result<Vec<ReleaseInfo>, Error> {
    let apps = state.services().app_names(&auth.0.org_id).await?;
    for r in &mut releases {
        r.app_name = apps.get(&r.app_id).cloned();
    }
    Ok(releases)
}

async fn list_releases(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Query(q): Query<AppQuery>,
) -> Result<Json<ReleaseList>, Error> {
    let app = match &q.app {
        Some(key) => Some(app_of(&state, &auth, key).await?.id),
        None => None,
    };
    let releases = state
        .store
        .list_releases(&auth.0.org_id, app.as_ref())
        .await?;
    Ok(Json(ReleaseList {
        releases: named(&state, &auth, releases).await?,
    }))
}

async fn get_release(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<Json<ReleaseInfo>, Error> {
    let missing = || Error::not_found(format!("no release {key:?} (see `nuon releases list`)"));
    let id: ReleaseId = key.parse().map_err(|_| missing())?;
    let found = state
        .store
        .get_release(&auth.0.org_id, &id)
        .await?
        .ok_or_else(missing)?;
    let mut named = named(&state, &auth, vec![found]).await?;
    Ok(Json(named.remove(0)))
}
