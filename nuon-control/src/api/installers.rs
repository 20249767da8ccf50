//! Installers and invitations on the Control API: adapters over the
//! service layer (`service/invitations.rs`).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{delete, get, post};
use nuon_core::endpoint as ep;
use nuon_core::wire::{
    CreateInvitation, InstallerInfo, InstallerList, InvitationCreated, InvitationInfo,
    InvitationList,
};

use super::caller::public_base;
use super::doc::Op;
use super::{Body, SharedState, body_of};
use crate::error::Error;
use crate::service::Caller;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::ListInstallers>(get(list_installers)),
        Op::endpoint::<ep::GetInstaller>(get(get_installer)),
        Op::endpoint::<ep::CreateInvitation>(post(create_invitation)),
        Op::endpoint::<ep::ListInvitations>(get(list_invitations)),
        Op::endpoint::<ep::RevokeInvitation>(delete(revoke_invitation)),
    ]
}

async fn list_installers(
    State(state): State<SharedState>,
    caller: Caller,
) -> Result<Json<InstallerList>, Error> {
    Ok(Json(state.services().list_installers(&caller).await?))
}

async fn get_installer(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<InstallerInfo>, Error> {
    Ok(Json(state.services().get_installer(&caller, &key).await?))
}

async fn create_invitation(
    State(state): State<SharedState>,
    caller: Caller,
    headers: HeaderMap,
    body: Result<Body<CreateInvitation>, Error>,
) -> Result<(StatusCode, Json<InvitationCreated>), Error> {
    let req = body_of::<ep::CreateInvitation, _>(&state, &caller, &[], body).await?;
    let base = public_base(&state, &headers);
    let made = state
        .services()
        .create_invitation(&caller, req, &base)
        .await?;
    Ok((StatusCode::CREATED, Json(made)))
}

async fn list_invitations(
    State(state): State<SharedState>,
    caller: Caller,
) -> Result<Json<InvitationList>, Error> {
    Ok(Json(state.services().list_invitations(&caller).await?))
}

async fn revoke_invitation(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<InvitationInfo>, Error> {
    Ok(Json(
        state.services().revoke_invitation(&caller, &key).await?,
    ))
}
