//! The Control API for the caller's org and its API tokens.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use nuon_core::endpoint as ep;
use nuon_core::wire::{CreateToken, OrgInfo, SignInCode, TokenCreated, TokenInfo, TokenList};

use super::doc::Op;
use super::{ApiAuth, Body, Caller, SharedState, body_of};
use crate::error::Error;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::GetOrg>(get(get_org)),
        Op::endpoint::<ep::CreateToken>(post(create_token)).audited_by_service(),
        Op::endpoint::<ep::ListTokens>(get(list_tokens)),
        Op::endpoint::<ep::RevokeToken>(post(revoke_token)).audited_by_service(),
        Op::endpoint::<ep::CreateSignInCode>(post(create_sign_in_code)),
    ]
}

/// How long a sign-in code works.
pub(crate) const SIGN_IN_CODE_MS: i64 = 10 * 60 * 1000;
/// What marks a stored web session row as a sign-in code, not a session.
pub(crate) const SIGN_IN_CODE_MARK: &str = "sign-in-code";

/// The key a sign-in code is stored under: not the hash of the code
/// itself, so a code is never taken for a session's cookie.
pub(crate) fn sign_in_code_key(code: &str) -> String {
    nuon_core::token::hash_token(&format!("{SIGN_IN_CODE_MARK}:{code}"))
}

async fn create_sign_in_code(
    State(state): State<SharedState>,
    auth: ApiAuth,
    axum::Extension(super::TokenHash(token_hash)): axum::Extension<super::TokenHash>,
    headers: axum::http::HeaderMap,
) -> Result<(StatusCode, Json<SignInCode>), Error> {
    // It writes (a row that opens a session): not for read-only tokens,
    // which sign in with the token form.
    super::control::require_deployer(&auth)?;
    let mut raw = [0u8; 16];
    nuon_core::random_bytes(&mut raw);
    let code = hex::encode(raw);
    let now = nuon_core::now_ms();
    let expires_at_ms = now + SIGN_IN_CODE_MS;
    state
        .store
        .create_web_session(&crate::store::WebSession {
            id_hash: sign_in_code_key(&code),
            token_hash,
            csrf: SIGN_IN_CODE_MARK.into(),
            created_at_ms: now,
            last_seen_at_ms: now,
            expires_at_ms,
        })
        .await?;
    let base = super::caller::public_base(&state, &headers);
    Ok((
        StatusCode::CREATED,
        Json(SignInCode {
            url: format!("{base}/login?code={code}"),
            code,
            expires_at_ms,
        }),
    ))
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
