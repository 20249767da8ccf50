//! Install labels and groups on the Control API: labels are set on an
//! install (`PATCH /v1/installs/{id}/labels`), a group is a name and a
//! label selector whose members are whichever installs match it when it
//! is read.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, get, patch, post};
use nuon_core::endpoint as ep;
use nuon_core::wire::{CreateGroup, GroupInfo, GroupList, InstallInfo, LabelChange};

use super::doc::Op;
use super::{Body, Caller, SharedState, body_of};
use crate::error::Error;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::SetInstallLabels>(patch(set_labels)),
        Op::endpoint::<ep::CreateInstallGroup>(post(create_group)),
        Op::endpoint::<ep::ListInstallGroups>(get(list_groups)),
        Op::endpoint::<ep::GetInstallGroup>(get(get_group)),
        Op::endpoint::<ep::DeleteInstallGroup>(delete(delete_group)),
    ]
}

pub(super) async fn set_labels(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Body<LabelChange>, Error>,
) -> Result<Json<InstallInfo>, Error> {
    let req = body_of::<ep::SetInstallLabels, _>(&state, &caller, &[&key], body).await?;
    state
        .services()
        .set_install_labels(&caller, &key, req)
        .await
        .map(Json)
}

async fn create_group(
    State(state): State<SharedState>,
    caller: Caller,
    body: Result<Body<CreateGroup>, Error>,
) -> Result<(StatusCode, Json<GroupInfo>), Error> {
    let req = body_of::<ep::CreateInstallGroup, _>(&state, &caller, &[], body).await?;
    let group = state.services().create_group(&caller, req).await?;
    Ok((StatusCode::CREATED, Json(group)))
}

async fn list_groups(
    State(state): State<SharedState>,
    caller: Caller,
) -> Result<Json<GroupList>, Error> {
    state.services().list_groups(&caller).await.map(Json)
}

async fn get_group(
    State(state): State<SharedState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<GroupInfo>, Error> {
    state.services().get_group(&caller, &name).await.map(Json)
}

async fn delete_group(
    State(state): State<SharedState>,
    caller: Caller,
    Path(name): Path<String>,
) -> Result<Json<GroupInfo>, Error> {
    state
        .services()
        .delete_group(&caller, &name)
        .await
        .map(Json)
}
