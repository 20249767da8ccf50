//! The Control API for apps, their config versions and components, and
//! installs with their inputs and secrets: adapters over the service
//! (`service/apps.rs`, `configs.rs`, `installs.rs`, `install_reads.rs`).

use nuon_core::endpoint as ep;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, patch, post};
use nuon_core::endpoint::{GetInstall, GetInstallReadme, RenderInstall, UpdateInstall};
use nuon_core::wire::{
    AppInfo, AppList, ComponentList, ConfigVersionInfo, ConfigVersionList, CreateApp,
    CreateInstall, EditInstall, InstallCreated, InstallInfo, InstallList, SetInputs, SyncConfig,
    WorkflowInfo, WorkflowList,
};
use serde::Deserialize;

use super::doc::Op;
use super::{Body, Caller, Q, SharedState, body_of};
use crate::error::Error;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::CreateApp>(post(create_app)),
        Op::endpoint::<ep::ListApps>(get(list_apps)),
        Op::endpoint::<ep::GetApp>(get(get_app)),
        Op::endpoint::<ep::SyncAppConfig>(post(sync_config))
            .or_status(200, "The files are those of the latest version: no version is made; the answer is that one."),
        Op::endpoint::<ep::ListAppConfigs>(get(list_configs)),
        Op::endpoint::<ep::GetAppConfig>(get(get_config)),
        Op::endpoint::<ep::ListComponents>(get(list_components)),
        Op::endpoint::<ep::CreateInstall>(post(create_install)),
        Op::endpoint::<ep::ListInstalls>(get(list_installs))
            .query("selector", serde_json::json!({"type": "string"}), "A label selector: `tier=prod,region!=us`, `tier in (a,b)`, `team`, `!legacy`.")
            .query("limit", serde_json::json!({"type": "integer", "minimum": 1, "maximum": 1000}), "A page of at most this many installs (1 to 1000), with `next` when there are more; every install without it.")
            .query("after", serde_json::json!({"type": "string"}), "Where the page starts: the `next` of the page before (`CREATED_MS.INSTALL_ID`), with `limit`."),
        Op::endpoint::<GetInstall>(get(get_install)),
        Op::endpoint::<RenderInstall>(get(render_install)),
        Op::endpoint::<GetInstallReadme>(get(install_readme)),
        Op::endpoint::<ep::ListInstallSecrets>(get(install_secrets)),
        Op::endpoint::<UpdateInstall>(patch(update_install)),
        Op::endpoint::<ep::SetInstallInputs>(patch(set_inputs)),
        Op::endpoint::<ep::ListInstallWorkflows>(get(list_workflows)),
        Op::endpoint::<ep::GetWorkflow>(get(get_workflow)),
    ]
}

pub(super) async fn create_install(
    State(state): State<SharedState>,
    caller: Caller,
    body: Result<Body<CreateInstall>, Error>,
) -> Result<(StatusCode, Json<InstallCreated>), Error> {
    let req = body_of::<ep::CreateInstall, _>(&state, &caller, &[], body).await?;
    let made = state.services().create_install(&caller, req).await?;
    Ok((StatusCode::CREATED, Json(made)))
}

async fn create_app(
    State(state): State<SharedState>,
    caller: Caller,
    body: Result<Body<CreateApp>, Error>,
) -> Result<(StatusCode, Json<AppInfo>), Error> {
    let req = body_of::<ep::CreateApp, _>(&state, &caller, &[], body).await?;
    let app = state.services().create_app(&caller, req).await?;
    Ok((StatusCode::CREATED, Json(app)))
}

async fn list_apps(
    State(state): State<SharedState>,
    caller: Caller,
) -> Result<Json<AppList>, Error> {
    state.services().list_apps(&caller).await.map(Json)
}

async fn get_app(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<AppInfo>, Error> {
    state.services().find_app(&caller, &key).await.map(Json)
}

/// Answered 201 with the version made, or 200 with the latest one when
/// the files are its files (`unchanged`).
async fn sync_config(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Body<SyncConfig>, Error>,
) -> Result<(StatusCode, Json<ConfigVersionInfo>), Error> {
    let req = body_of::<ep::SyncAppConfig, _>(&state, &caller, &[&key], body).await?;
    let c = state.services().sync_app_config(&caller, &key, req).await?;
    let status = if c.unchanged {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(c)))
}

async fn list_configs(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<ConfigVersionList>, Error> {
    state.services().list_configs(&caller, &key).await.map(Json)
}

async fn get_config(
    State(state): State<SharedState>,
    caller: Caller,
    Path((key, version)): Path<(String, String)>,
) -> Result<Json<ConfigVersionInfo>, Error> {
    state
        .services()
        .get_config(&caller, &key, &version)
        .await
        .map(Json)
}

async fn list_components(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<ComponentList>, Error> {
    state
        .services()
        .list_components(&caller, &key)
        .await
        .map(Json)
}

/// `GET /v1/installs`'s query.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InstallsQuery {
    selector: Option<String>,
    after: Option<String>,
    limit: Option<u32>,
}

async fn list_installs(
    State(state): State<SharedState>,
    caller: Caller,
    Q(q): Q<InstallsQuery>,
) -> Result<Json<InstallList>, Error> {
    let selector = q.selector.as_deref().unwrap_or("");
    state
        .services()
        .list_installs(&caller, selector, q.after.as_deref(), q.limit)
        .await
        .map(Json)
}

async fn get_install(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<InstallInfo>, Error> {
    state.services().get_install(&caller, &key).await.map(Json)
}

async fn render_install(
    State(state): State<SharedState>,
    caller: Caller,
    Path((key, workflow)): Path<(String, String)>,
) -> Result<Json<nuon_core::rendered::RenderedWorkflow>, Error> {
    state
        .services()
        .render_install(&caller, &key, &workflow)
        .await
        .map(Json)
}

async fn install_readme(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<nuon_core::rendered::RenderedReadme>, Error> {
    state
        .services()
        .install_readme(&caller, &key)
        .await
        .map(Json)
}

async fn install_secrets(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<nuon_core::wire::InstallSecrets>, Error> {
    state
        .services()
        .install_secrets(&caller, &key)
        .await
        .map(Json)
}

async fn update_install(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Body<EditInstall>, Error>,
) -> Result<Json<InstallInfo>, Error> {
    let req = body_of::<UpdateInstall, _>(&state, &caller, &[&key], body).await?;
    state
        .services()
        .update_install(&caller, &key, req)
        .await
        .map(Json)
}

async fn set_inputs(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Body<SetInputs>, Error>,
) -> Result<Json<InstallInfo>, Error> {
    let req = body_of::<ep::SetInstallInputs, _>(&state, &caller, &[&key], body).await?;
    state
        .services()
        .set_install_inputs(&caller, &key, req)
        .await
        .map(Json)
}

async fn list_workflows(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<WorkflowList>, Error> {
    state
        .services()
        .install_workflows(&caller, &key)
        .await
        .map(Json)
}

async fn get_workflow(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
) -> Result<Json<WorkflowInfo>, Error> {
    state.services().get_workflow(&caller, &raw).await.map(Json)
}
