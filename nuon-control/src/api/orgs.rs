//! The Control API for the caller's org and its API tokens.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use nuon_core::TokenId;
use nuon_core::endpoint as ep;
use nuon_core::token::issue_api_token;
use nuon_core::wire::ErrorCode;
use nuon_core::wire::{CreateToken, OrgInfo, SignInCode, TokenCreated, TokenInfo, TokenList};

use crate::store::NewApiToken;

use super::control::{require_admin, valid_name};
use super::doc::Op;
use super::{ApiAuth, Body, SharedState, path_id};
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

async fn get_org(State(state): State<SharedState>, auth: ApiAuth) -> Result<Json<OrgInfo>, Error> {
    let org = state
        .store
        .get_org(&auth.0.org_id)
        .await?
        .ok_or_else(|| Error::not_found("the token's org no longer exists"))?;
    Ok(Json(org))
}

pub(super) async fn create_token(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Body(req): Body<CreateToken>,
) -> Result<(StatusCode, Json<TokenCreated>), Error> {
    require_admin(&auth)?;
    if !valid_name(&req.name) {
        return Err(Error::bad_request(format!(
            "invalid token name {:?}: use 1 to 64 letters, digits, '-', '_' or '.'",
            req.name.chars().take(80).collect::<String>()
        )));
    }
    // A person's token makes a token of theirs, held to their role; a
    // service account's (or one asked for) belongs to no person.
    let user = match (&auth.0.user, req.service_account) {
        (Some(u), false) => Some(u),
        _ => None,
    };
    let scope = match user {
        Some(u) => req.scope.at_most(u.role.scope()),
        None => req.scope,
    };
    let id = TokenId::generate();
    let issued = issue_api_token(&id);
    let new = NewApiToken {
        id: id.clone(),
        name: req.name.clone(),
        scope,
        token_hash: issued.hash.clone(),
        user_id: user.map(|u| u.id.clone()),
        expires_at_ms: None,
    };
    let token = state.store.create_api_token(&auth.0.org_id, &new).await?;
    tracing::info!(token = %id, scope = scope.as_str(), "API token created");
    Ok((
        StatusCode::CREATED,
        Json(TokenCreated {
            token,
            secret: issued.secret,
        }),
    ))
}

pub(super) async fn list_tokens(
    State(state): State<SharedState>,
    auth: ApiAuth,
) -> Result<Json<TokenList>, Error> {
    let tokens = state.store.list_api_tokens(&auth.0.org_id).await?;
    Ok(Json(TokenList { tokens }))
}

pub(super) async fn revoke_token(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(raw): Path<String>,
) -> Result<Json<TokenInfo>, Error> {
    require_admin(&auth)?;
    let id: TokenId = path_id("token", &raw)?;
    if id == auth.0.token_id {
        return Err(Error::api(
            StatusCode::CONFLICT,
            ErrorCode::OwnToken,
            "a token cannot revoke itself: revoke it with another admin token",
        ));
    }
    let token = state
        .store
        .revoke_api_token(&auth.0.org_id, &id)
        .await?
        .ok_or_else(|| Error::not_found(format!("no token {raw:?}")))?;
    tracing::info!(token = %id, "API token revoked");
    Ok(Json(token))
}
