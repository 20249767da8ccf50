//! The Control API for the caller's org and its API tokens.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use nuon_core::endpoint as ep;
use nuon_core::wire::{CreateToken, OrgInfo, SignInCode, TokenCreated, TokenInfo, TokenList};

use super::doc::Op;
use super::{Body, Caller, SharedState, body_of};
use crate::error::Error;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::GetOrg>(get(get_org)),
        Op::endpoint::<ep::CreateToken>(post(create_token)),
        Op::endpoint::<ep::ListTokens>(get(list_tokens)),
        Op::endpoint::<ep::RevokeToken>(post(revoke_token)),
        Op::endpoint::<ep::CreateSignInCode>(post(create_sign_in_code)),
    ]
}

async fn create_sign_in_code(
    State(state): State<SharedState>,
    caller: Caller,
    axum::Extension(super::TokenHash(token_hash)): axum::Extension<super::TokenHash>,
    headers: axum::http::HeaderMap,
) -> Result<(StatusCode, Json<SignInCode>), Error> {
    let base = super::caller::public_base(&state, &headers);
    let services = state.services();
    let made = services
        .create_sign_in_code(&caller, token_hash, &base)
        .await?;
    Ok((StatusCode::CREATED, Json(made)))
}

async fn get_org(State(state): State<SharedState>, caller: Caller) -> Result<Json<OrgInfo>, Error> {
    state.services().get_org(&caller).await.map(Json)
}

async fn create_token(
    State(state): State<SharedState>,
    caller: Caller,
    body: Result<Body<CreateToken>, Error>,
) -> Result<(StatusCode, Json<TokenCreated>), Error> {
    let req = body_of::<ep::CreateToken, _>(&state, &caller, &[], body).await?;
    let made = state.services().create_token(&caller, req).await?;
    Ok((StatusCode::CREATED, Json(made)))
}

async fn list_tokens(
    State(state): State<SharedState>,
    caller: Caller,
) -> Result<Json<TokenList>, Error> {
    state.services().list_tokens(&caller).await.map(Json)
}

async fn revoke_token(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
) -> Result<Json<TokenInfo>, Error> {
    state.services().revoke_token(&caller, &raw).await.map(Json)
}
