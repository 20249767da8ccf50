//! An install's and an app's lifecycle on the Control API: deleting an
//! install (deprovision, then remove), forgetting one (remove the record
//! only), changing inputs and secrets with the workflow Nuon starts for
//! it (the `update-inputs` triggers around a redeploy of what reads the
//! values), and deleting an app that has no install left. The service
//! ([`crate::service::lifecycle`], [`crate::service::pending`]) does
//! them; this is the thin HTTP side.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, post};
use nuon_core::endpoint as ep;
use nuon_core::wire::{
    AppInfo, InputsUpdated, InstallRemoved, PendingResolved, UpdateInputs, WorkflowInfo,
};

use super::doc::Op;
use super::{Body, Caller, SharedState, body_of};
use crate::error::Error;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::DeleteInstall>(delete(delete_install)),
        Op::endpoint::<ep::ForgetInstall>(post(forget_install)),
        Op::endpoint::<ep::UpdateInstallInputs>(post(update_inputs)),
        Op::endpoint::<ep::ApplyInstallPending>(post(apply_pending)),
        Op::endpoint::<ep::DiscardInstallPending>(post(discard_pending)),
        Op::endpoint::<ep::DeleteApp>(delete(delete_app)),
    ]
}

async fn delete_install(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<(StatusCode, Json<WorkflowInfo>), Error> {
    let wf = state.services().delete_install(&caller, &key).await?;
    Ok((StatusCode::ACCEPTED, Json(wf)))
}

async fn forget_install(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<InstallRemoved>, Error> {
    state
        .services()
        .forget_install(&caller, &key)
        .await
        .map(Json)
}

async fn update_inputs(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Body<UpdateInputs>, Error>,
) -> Result<Json<InputsUpdated>, Error> {
    let req = body_of::<ep::UpdateInstallInputs, _>(&state, &caller, &[&key], body).await?;
    state
        .services()
        .update_install_inputs(&caller, &key, req)
        .await
        .map(Json)
}

async fn apply_pending(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<PendingResolved>, Error> {
    Ok(Json(state.services().apply_pending(&caller, &key).await?))
}

async fn discard_pending(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<PendingResolved>, Error> {
    Ok(Json(state.services().discard_pending(&caller, &key).await?))
}

async fn delete_app(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<AppInfo>, Error> {
    state.services().delete_app(&caller, &key).await.map(Json)
}
