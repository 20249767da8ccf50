//! People on the Control API: invited by email address with a role
//! (owner, admin, deployer, viewer), signing in through the org's OpenID
//! Connect provider for an API token of their own that expires.
//!
//! A person's tokens never do more than their role allows now: the role is
//! read with the token on every request, so a demotion or a removal holds
//! at once.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, patch, post};
use nuon_core::audit::AuditEntry;
use nuon_core::endpoint as ep;
use nuon_core::token::{hash_token, issue_api_token};
use nuon_core::wire::ErrorCode;
use nuon_core::wire::{
    InviteUser, SetUserRole, SignInCallback, SignInQuery, SignedIn, TokenCreated, TokenScope,
    UserInfo, UserList, routes,
};
use nuon_core::{TokenId, now_ms};

use super::doc::Op;
use super::{Body, Caller, Q, SharedState, Source, body_of};
use crate::error::Error;
use crate::oidc::{OidcError, SIGN_IN_WINDOW_MS};
use crate::store::{NewApiToken, PendingSignIn};

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::ListUsers>(get(list_users)),
        Op::endpoint::<ep::InviteUser>(post(invite_user)),
        Op::endpoint::<ep::SetUserRole>(patch(set_role)),
        Op::endpoint::<ep::RemoveUser>(axum::routing::delete(remove_user)),
        Op::get(routes::OIDC_LOGIN, "signIn", "Start signing in to an org (`?org=NAME`) through its OpenID Connect provider: a redirect to the provider (authorization code flow with PKCE). Needs no token.", get(sign_in))
            .query("org", serde_json::json!({"type": "string"}), "The org, by name.")
            .redirects("To the provider's authorization endpoint.")
            .public(),
        Op::endpoint::<ep::SignInCallback>(get(callback))
            .query("code", serde_json::json!({"type": "string"}), "The authorization code.")
            .query("state", serde_json::json!({"type": "string"}), "The sign-in's state.")
            .query("error", serde_json::json!({"type": "string"}), "The provider's refusal, if it refused.")
            .query("error_description", serde_json::json!({"type": "string"}), "Its words.")
            .query("iss", serde_json::json!({"type": "string"}), "The issuer that answers (RFC 9207).")
            .public(),
    ]
}

async fn list_users(
    State(state): State<SharedState>,
    caller: Caller,
) -> Result<Json<UserList>, Error> {
    state.services().list_users(&caller).await.map(Json)
}

async fn invite_user(
    State(state): State<SharedState>,
    caller: Caller,
    body: Result<Body<InviteUser>, Error>,
) -> Result<(StatusCode, Json<UserInfo>), Error> {
    let req = body_of::<ep::InviteUser, _>(&state, &caller, &[], body).await?;
    let user = state.services().invite_user(&caller, req).await?;
    Ok((StatusCode::CREATED, Json(user)))
}

async fn set_role(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Body<SetUserRole>, Error>,
) -> Result<Json<UserInfo>, Error> {
    let req = body_of::<ep::SetUserRole, _>(&state, &caller, &[&key], body).await?;
    state
        .services()
        .set_user_role(&caller, &key, req)
        .await
        .map(Json)
}

async fn remove_user(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<UserInfo>, Error> {
    state.services().remove_user(&caller, &key).await.map(Json)
}

fn oidc_of(state: &SharedState) -> Result<std::sync::Arc<crate::oidc::Oidc>, Error> {
    state.oidc.clone().ok_or_else(|| {
        Error::refused(ErrorCode::OidcNotConfigured, "this control plane signs nobody in: start nuon-ctl serve with --oidc-issuer, --oidc-client-id and a client secret (--oidc-client-secret-file or NUON_OIDC_CLIENT_SECRET); API tokens work meanwhile",
        )
    })
}

/// Where the provider sends the browser back.
fn redirect_url(state: &SharedState, oidc: &crate::oidc::Oidc) -> Result<String, Error> {
    if let Some(url) = &oidc.config.redirect_url {
        return Ok(url.clone());
    }
    state
        .control_url
        .get()
        .map(|base| format!("{base}{}", routes::OIDC_CALLBACK))
        .ok_or_else(|| Error::internal("the Control API's URL is not known yet"))
}

impl From<OidcError> for Error {
    fn from(e: OidcError) -> Self {
        match e {
            OidcError::Provider(_) => Error::refused(ErrorCode::IdentityProvider, e.to_string()),
            OidcError::Refused(_) => Error::refused(ErrorCode::SignInRefused, e.to_string()),
        }
    }
}

async fn sign_in(
    State(state): State<SharedState>,
    Q(q): Q<SignInQuery>,
) -> Result<Redirect, Error> {
    let oidc = oidc_of(&state)?;
    let org = state.store.org_named(&q.org).await.map_err(|_| {
        Error::not_found(format!(
            "no org {:?}",
            q.org.chars().take(80).collect::<String>()
        ))
    })?;
    let start = oidc.start(&redirect_url(&state, &oidc)?).await?;
    let pending = PendingSignIn {
        org_id: org,
        nonce: start.nonce,
        verifier: start.verifier,
        expires_at_ms: now_ms() + SIGN_IN_WINDOW_MS,
    };
    state
        .store
        .begin_sign_in(&hash_token(&start.state), &pending)
        .await?;
    Ok(Redirect::to(&start.url))
}

async fn callback(
    State(state): State<SharedState>,
    Source(source): Source,
    headers: HeaderMap,
    Q(q): Q<SignInCallback>,
) -> Result<Response, Error> {
    let oidc = oidc_of(&state)?;
    let state_param = q.state.as_deref().unwrap_or_default();
    // Taken first, whatever comes next: a state is good for one answer.
    let pending = match state_param {
        "" => None,
        s => state.store.take_sign_in(&hash_token(s)).await?,
    };
    let Some(pending) = pending else {
        return Err(Error::refused(
            ErrorCode::UnknownSignIn,
            "this sign-in's state is unknown, used or expired (a sign-in is good for one answer within 10 minutes); start again at /v1/auth/oidc/login?org=NAME",
        ));
    };
    let org = pending.org_id.clone();
    let refused = |actor: &str, why: &str| {
        AuditEntry::new(
            now_ms(),
            actor,
            "signIn",
            routes::OIDC_CALLBACK,
            source.clone(),
            "401",
        )
        .with_detail(why.to_owned())
    };
    if let Some(iss) = q.iss.as_deref().filter(|i| *i != oidc.config.issuer) {
        let why = format!(
            "the answer comes from the issuer {iss:?}, not {:?} (a mix-up of providers)",
            oidc.config.issuer
        );
        state.auditor.record(&org, refused("oidc", &why)).await;
        return Err(Error::refused(ErrorCode::SignInRefused, why));
    }
    if let Some(err) = &q.error {
        let why = format!(
            "the provider refused: {err} {}",
            q.error_description.as_deref().unwrap_or("")
        );
        state.auditor.record(&org, refused("oidc", &why)).await;
        return Err(Error::refused(ErrorCode::SignInRefused, why));
    }
    let code = q
        .code
        .as_deref()
        .filter(|c| !c.is_empty())
        .ok_or_else(|| Error::bad_request("the provider sent no code"))?;
    let who = match oidc
        .finish(code, &redirect_url(&state, &oidc)?, &pending)
        .await
    {
        Ok(who) => who,
        Err(e) => {
            state
                .auditor
                .record(&org, refused("oidc", &e.to_string()))
                .await;
            return Err(e.into());
        }
    };
    let id = TokenId::generate();
    let issued = issue_api_token(&id);
    let ttl = i64::try_from(oidc.config.session_ttl.as_millis()).unwrap_or(i64::MAX);
    let token = NewApiToken {
        id,
        name: "sign-in".into(),
        scope: TokenScope::Admin,
        token_hash: issued.hash.clone(),
        user_id: None,
        expires_at_ms: Some(now_ms().saturating_add(ttl)),
    };
    let Some((user, mut token)) = state.store.sign_in_user(&org, &who, &token).await? else {
        let why = format!("{} is not invited to this org", who.email);
        state.auditor.record(&org, refused(&who.email, &why)).await;
        return Err(Error::refused(
            ErrorCode::NotInvited,
            format!(
                "{why}: an owner or admin invites people (`nuon users invite {} --role viewer`)",
                who.email
            ),
        ));
    };
    // What the token may do: no more than the role.
    token.scope = token.scope.at_most(user.role.scope());
    let entry = AuditEntry::new(
        now_ms(),
        &user.email,
        "signIn",
        routes::OIDC_CALLBACK,
        source,
        "200",
    )
    .with_detail(format!(
        "as {} through {}; token {}",
        user.role.as_str(),
        oidc.config.issuer,
        token.id
    ));
    state.auditor.record(&org, entry).await;
    tracing::info!(user = %user.id, "signed in");
    let answer = SignedIn {
        user,
        token: TokenCreated {
            token,
            secret: issued.secret,
        },
    };
    let wants_html = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("text/html"));
    if wants_html {
        return Ok(signed_in_page(&answer).into_response());
    }
    Ok(Json(answer).into_response())
}

/// The page a browser lands on: who signed in, and their token, once.
fn signed_in_page(s: &SignedIn) -> Response {
    let body = maud::html! {
        (maud::DOCTYPE)
        html lang="en" {
            head { meta charset="utf-8"; title { "Signed in" } }
            body { main {
                h1 { "Signed in as " (s.user.email) " (" (s.user.role.as_str()) ")" }
                p { "Your API token, shown only now; it works until it expires:" }
                pre { code { (s.token.secret) } }
                p { "Use it as " code { "NUON_TOKEN" } " or " code { "--token" } "." }
            } }
        }
    }
    .into_string();
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; frame-ancestors 'none'",
            ),
        ],
        body,
    )
        .into_response()
}
