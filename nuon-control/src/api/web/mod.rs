//! The dashboard: server-rendered pages over the same functions the
//! Control API's handlers use, served by `nuon-ctl` on the Control API's
//! listener under `/` (the API stays under `/v1`).
//!
//! - Sign-in exchanges an API token for a session: a random cookie
//!   (`HttpOnly`, `SameSite=Strict`, `Secure` behind HTTPS) whose hash is
//!   kept with the hash of the token; every request authenticates that
//!   token again, so a revoked token, a demoted or removed person ends what
//!   the session may do at once. Sessions end after 30 minutes unused or 12
//!   hours in all, and on sign-out (removed from the store).
//! - Every form carries the session's CSRF token; a POST without it is
//!   refused (403). A read-only token sees every page and no button, and
//!   its POSTs are refused as the API refuses them.
//! - Pages are `maud` templates (escaped by construction), one stylesheet,
//!   and a Content-Security-Policy that allows nothing from anywhere else.

mod acts;
mod cells;
mod cookies;
mod diff;
mod fleet;
mod install_forms;
mod installer;
mod layout;
mod live;
mod markdown;
mod new_install;
mod overview;
mod pages;
mod people_forms;
mod render;
mod sign_in;

use axum::Router;
use axum::extract::{Form, FromRequestParts, Path, Query, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use futures_util::StreamExt;
use nuon_core::now_ms;
use nuon_core::token::hash_token;
use serde::Deserialize;

use self::cookies::{cookie, same, secret, set_cookie};
use self::layout::{html, page};
use self::people_forms::{PeopleAct, people_act};
use super::{ApiAuth, SharedState, Source};
use crate::error::Error;
use crate::service::{require_admin, require_deployer};
use crate::store::WebSession;

/// The session cookie.
const COOKIE: &str = "nuon_session";
/// The cookie that ties the sign-in form to its browser.
const LOGIN_COOKIE: &str = "nuon_login";
/// A session unused this long ends.
const IDLE_MS: i64 = 30 * 60 * 1000;
/// A session ends this long after it began, used or not.
const ABSOLUTE_MS: i64 = 12 * 60 * 60 * 1000;
/// How stale a session's last use may be before it is written again.
const TOUCH_MS: i64 = 60 * 1000;

/// What every page may load: its own stylesheet and scripts, nothing else.
const CSP: &str = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// The dashboard's routes.
pub(super) fn router() -> Router<SharedState> {
    Router::new()
        .route("/", get(overview::get))
        .route("/login", get(login_page).post(login))
        .route("/login/code", post(login_with_code))
        .route("/logout", post(logout))
        .route(
            "/assets/app.css",
            get(|| async { asset("text/css; charset=utf-8", include_str!("app.css")) }),
        )
        .route("/installs/{id}", get(install))
        .merge(render::routes())
        .merge(installer::routes())
        .route("/apps", get(apps))
        .route("/apps/{id}", get(app))
        .route("/apps/{id}/diff", get(app_diff))
        .route("/runners", get(runners))
        .route("/workflows/{id}", get(workflow))
        .route("/workflows/{id}/events", get(live::workflow_events))
        .route("/jobs/{id}", get(job))
        .route("/jobs/{id}/raw", get(job_raw))
        .route("/jobs/{id}/events", get(job_events))
        .route(
            "/assets/live.js",
            get(|| async { asset("text/javascript; charset=utf-8", include_str!("live.js")) }),
        )
        .route("/workflows/{id}/{act}", post(acts::workflow_act))
        .route("/installs/{id}/pending/{act}", post(acts::pending_act))
        .route(
            "/installs/{id}/inputs",
            get(inputs_page)
                .post(|st, src, web, id, f| install_act(st, src, web, id, f, InstallAct::Inputs)),
        )
        .route(
            "/installs/{id}/delete",
            post(|st, src, web, id, f| install_act(st, src, web, id, f, InstallAct::Delete)),
        )
        .route(
            "/installs/{id}/forget",
            post(|st, src, web, id, f| install_act(st, src, web, id, f, InstallAct::Forget)),
        )
        .route("/apps/{id}/delete", post(app_delete))
        .route("/apps/{id}/installs/new", get(new_install_page))
        .route("/apps/{id}/installs", post(install_create))
        .route("/installs/{id}/workflows", post(workflow_start))
        .route("/rollouts", get(rollouts))
        .route("/rollouts/{id}", get(rollout))
        .route("/rollouts/{id}/{act}", post(rollout_act))
        .route("/releases/{id}/rollouts", post(rollout_create))
        .route("/installs/{id}/labels", post(install_forms::labels))
        .route("/installs/{id}/settings", post(install_forms::settings))
        .route("/installs/{id}/overrides", post(install_overrides))
        .route("/apps/{id}/builds", post(app_builds))
        .route("/groups", get(groups).post(group_create))
        .route("/groups/{name}/delete", post(group_delete))
        .route("/people", get(people))
        .route(
            "/people/invite",
            post(|st, src, web, f| {
                people_act(st, src, web, Path(String::new()), f, PeopleAct::Invite)
            }),
        )
        .route(
            "/people/{id}/role",
            post(|st, src, web, id, f| people_act(st, src, web, id, f, PeopleAct::Role)),
        )
        .route(
            "/people/{id}/remove",
            post(|st, src, web, id, f| people_act(st, src, web, id, f, PeopleAct::Remove)),
        )
        .route(
            "/tokens",
            post(|st, src, web, f| {
                people_act(st, src, web, Path(String::new()), f, PeopleAct::MakeToken)
            }),
        )
        .route(
            "/tokens/{id}/revoke",
            post(|st, src, web, id, f| people_act(st, src, web, id, f, PeopleAct::Revoke)),
        )
        .layer(axum::middleware::from_fn(security_headers))
}

async fn security_headers(req: axum::extract::Request, next: axum::middleware::Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    // A handler's own (stricter) policy stands: the vendor's images.
    h.entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static(CSP));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    resp
}

/// One of the dashboard's own files, compiled in, cached for 5 minutes.
fn asset(content_type: &'static str, body: &'static str) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            (header::CACHE_CONTROL, "public, max-age=300"),
        ],
        body,
    )
        .into_response()
}

/// Text escaped for hand-written markup (the SVG pictures), as `maud`
/// escapes everything else.
pub(super) fn escape(text: &str) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(text.len());
    let _ = maud::Escaper::new(&mut out).write_str(text);
    out
}

/// A signed-in browser: the API principal its session acts as, and the
/// session's CSRF token.
pub(super) struct Web {
    pub(super) auth: ApiAuth,
    pub(super) csrf: String,
    id_hash: String,
    /// A service account's token's name (a person is named by email).
    token_name: Option<String>,
}

impl Web {
    /// Whether this session may start, approve and cancel workflows.
    pub(super) fn can_deploy(&self) -> bool {
        require_deployer(&self.auth.0).is_ok()
    }

    /// Whether this session may change and delete installs and apps.
    pub(super) fn can_admin(&self) -> bool {
        require_admin(&self.auth.0).is_ok()
    }

    /// Who is signed in, as shown.
    pub(super) fn who(&self) -> String {
        match &self.auth.0.user {
            Some(u) => format!("{} ({})", u.email, u.role.as_str()),
            None => format!(
                "{} ({})",
                self.token_name
                    .clone()
                    .unwrap_or_else(|| self.auth.0.token_id.to_string()),
                self.auth.0.scope
            ),
        }
    }
}

impl FromRequestParts<SharedState> for Web {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &SharedState) -> Result<Self, Response> {
        let to_login = || Redirect::to("/login").into_response();
        let Some(raw) = cookie(&parts.headers, COOKIE) else {
            return Err(to_login());
        };
        let id_hash = hash_token(&raw);
        let fail = |e: crate::store::StoreError| Error::from(e).into_response();
        let Some(session) = state.store.web_session(&id_hash).await.map_err(fail)? else {
            return Err(to_login());
        };
        let now = now_ms();
        if now - session.last_seen_at_ms > IDLE_MS {
            let _ = state.store.end_web_session(&id_hash).await;
            return Err(to_login());
        }
        // The token the session acts with, checked again: revoked,
        // expired, or its person removed, and the session is over.
        let Some(principal) = state
            .store
            .authenticate_api(&session.token_hash)
            .await
            .map_err(fail)?
        else {
            let _ = state.store.end_web_session(&id_hash).await;
            return Err(to_login());
        };
        if now - session.last_seen_at_ms > TOUCH_MS {
            state
                .store
                .touch_web_session(&id_hash, now)
                .await
                .map_err(fail)?;
        }
        // A service account's session is shown by its token's name.
        let token_name = match &principal.user {
            Some(_) => None,
            None => state
                .store
                .list_api_tokens(&principal.org_id)
                .await
                .map_err(fail)?
                .into_iter()
                .find(|t| t.id == principal.token_id)
                .map(|t| format!("token {}", t.name)),
        };
        Ok(Web {
            auth: ApiAuth(principal),
            csrf: session.csrf,
            id_hash,
            token_name,
        })
    }
}

/// An error as a page: its status and its message, never a stack.
pub(super) fn error_page(e: Error) -> Response {
    let status = e.status();
    (status, html(pages::error(status, &e.to_string()))).into_response()
}

/// A form's CSRF field.
#[derive(Deserialize)]
struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// The refusal of a POST whose form does not carry the session's CSRF
/// token, if it does not.
fn csrf_refused(web: &Web, given: &str) -> Option<Response> {
    if same(given, &web.csrf) {
        return None;
    }
    Some(error_page(Error::refused(
        nuon_core::wire::ErrorCode::Csrf,
        "this form is not from this session (its CSRF token is missing or wrong): reload the page and try again",
    )))
}

#[derive(Deserialize)]
struct LoginForm {
    #[serde(default)]
    token: String,
    #[serde(default)]
    csrf: String,
}

#[derive(Deserialize)]
struct LoginQuery {
    #[serde(default)]
    code: Option<String>,
}

/// The sign-in form; with `?code=`, the page that says whom a sign-in
/// code signs in as, and asks.
async fn login_page(
    State(state): State<SharedState>,
    headers: HeaderMap,
    Query(q): Query<LoginQuery>,
) -> Response {
    let csrf = secret();
    let page = match q.code.as_deref() {
        None => sign_in::login(&csrf, None),
        Some(code) => match code_signs_in_as(&state, code).await {
            Ok(Some((org, who, scope))) => {
                sign_in::confirm_sign_in(&csrf, code, &org, &who, &scope)
            }
            Ok(None) => sign_in::login(
                &csrf,
                Some(
                    "This sign-in link was used already or is past its time: ask for a new one (`nuon orgs sign-in-link`).",
                ),
            ),
            Err(e) => return error_page(e),
        },
    };
    let mut resp = html(page);
    resp.headers_mut().insert(
        header::SET_COOKIE,
        set_cookie(
            LOGIN_COOKIE,
            &csrf,
            600,
            super::caller::over_https(&headers),
        ),
    );
    resp
}

/// The org, person and scope a sign-in code signs in as, while it works.
async fn code_signs_in_as(
    state: &SharedState,
    code: &str,
) -> Result<Option<(String, String, String)>, Error> {
    if code.is_empty() || code.len() > 128 {
        return Ok(None);
    }
    let key = crate::service::sign_in::sign_in_code_key(code);
    let Some(row) = live_code(state, &key).await? else {
        return Ok(None);
    };
    let Some(p) = state.store.authenticate_api(&row.token_hash).await? else {
        return Ok(None);
    };
    let org = state
        .store
        .get_org(&p.org_id)
        .await?
        .map_or_else(|| p.org_id.to_string(), |o| o.name);
    let who = match &p.user {
        Some(u) => u.email.clone(),
        None => format!("the service account token {}", p.token_id),
    };
    Ok(Some((org, who, p.scope)))
}

/// The stored row of the sign-in code under `key`, while it works.
async fn live_code(state: &SharedState, key: &str) -> Result<Option<WebSession>, Error> {
    Ok(state.store.web_session(key).await?.filter(|row| {
        row.csrf == crate::service::sign_in::SIGN_IN_CODE_MARK && row.expires_at_ms > now_ms()
    }))
}

/// A form that failed: the sign-in page again, saying why, with a fresh
/// form token (and `429` with `Retry-After` when throttled).
fn sign_in_again(
    headers: &HeaderMap,
    status: StatusCode,
    why: &str,
    retry: Option<u64>,
) -> Response {
    let csrf = secret();
    let mut resp = (status, html(sign_in::login(&csrf, Some(why)))).into_response();
    let h = resp.headers_mut();
    h.insert(
        header::SET_COOKIE,
        set_cookie(LOGIN_COOKIE, &csrf, 600, super::caller::over_https(headers)),
    );
    if let Some(secs) = retry {
        h.insert(header::RETRY_AFTER, secs.into());
    }
    resp
}

/// Whether a sign-in form came from the page this browser was given.
fn from_this_browser(headers: &HeaderMap, csrf: &str) -> bool {
    cookie(headers, LOGIN_COOKIE).is_some_and(|c| !csrf.is_empty() && same(&c, csrf))
}

/// Opens a session acting with the token hashed `token_hash`.
async fn open_session(state: &SharedState, headers: &HeaderMap, token_hash: String) -> Response {
    let raw = secret();
    let now = now_ms();
    let session = WebSession {
        id_hash: hash_token(&raw),
        token_hash,
        csrf: secret(),
        created_at_ms: now,
        last_seen_at_ms: now,
        expires_at_ms: now + ABSOLUTE_MS,
    };
    if let Err(e) = state.store.create_web_session(&session).await {
        return error_page(e.into());
    }
    let mut resp = Redirect::to("/").into_response();
    let secure = super::caller::over_https(headers);
    let h = resp.headers_mut();
    h.append(
        header::SET_COOKIE,
        set_cookie(COOKIE, &raw, ABSOLUTE_MS / 1000, secure),
    );
    h.append(header::SET_COOKIE, set_cookie(LOGIN_COOKIE, "", 0, secure));
    resp
}

/// A throttled or failed check, as the sign-in page says it.
fn sign_in_refused(headers: &HeaderMap, e: Error, why: &str) -> Response {
    match e {
        e @ Error::TooManyAttempts { .. } => sign_in_again(
            headers,
            StatusCode::TOO_MANY_REQUESTS,
            &e.to_string(),
            e.retry_after(),
        ),
        Error::Api {
            status: StatusCode::UNAUTHORIZED,
            ..
        } => sign_in_again(headers, StatusCode::UNAUTHORIZED, why, None),
        e => error_page(e),
    }
}

async fn login(
    State(state): State<SharedState>,
    crate::api::Source(source): crate::api::Source,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if !from_this_browser(&headers, &form.csrf) {
        return sign_in_again(
            &headers,
            StatusCode::UNAUTHORIZED,
            "This sign-in form expired or is not from this browser: try again.",
            None,
        );
    }
    let token = form.token.trim();
    let token_hash = hash_token(token);
    let checked = crate::api::throttled(&state, &source, token, &token_hash, async {
        Ok(state.store.authenticate_api(&token_hash).await?)
    })
    .await;
    match checked {
        Ok(Some(_)) => open_session(&state, &headers, token_hash).await,
        Ok(None) => sign_in_again(
            &headers,
            StatusCode::UNAUTHORIZED,
            "That API token is unknown, revoked or expired.",
            None,
        ),
        Err(e) => sign_in_refused(
            &headers,
            e,
            "That API token is unknown, revoked or expired.",
        ),
    }
}

#[derive(Deserialize)]
struct CodeForm {
    #[serde(default)]
    code: String,
    #[serde(default)]
    csrf: String,
}

/// The person said yes to a sign-in code's page: the code is used up (once,
/// even when two tabs say yes together) and a session opened.
async fn login_with_code(
    State(state): State<SharedState>,
    crate::api::Source(source): crate::api::Source,
    headers: HeaderMap,
    Form(form): Form<CodeForm>,
) -> Response {
    use crate::service::sign_in::sign_in_code_key;
    if !from_this_browser(&headers, &form.csrf) {
        return sign_in_again(
            &headers,
            StatusCode::UNAUTHORIZED,
            "This sign-in form expired or is not from this browser: open the sign-in link again.",
            None,
        );
    }
    let key = sign_in_code_key(form.code.trim());
    let used = "This sign-in link was used already or is past its time: ask for a new one (`nuon orgs sign-in-link`).";
    let taken = crate::api::throttled(&state, &source, "", &key, async {
        let Some(row) = live_code(&state, &key).await? else {
            return Ok(None);
        };
        // Only one of two racing tabs ends it.
        if !state.store.end_web_session(&key).await? {
            return Ok(None);
        }
        Ok(state
            .store
            .authenticate_api(&row.token_hash)
            .await?
            .map(|_| row.token_hash))
    })
    .await;
    match taken {
        Ok(Some(token_hash)) => open_session(&state, &headers, token_hash).await,
        Ok(None) => sign_in_again(&headers, StatusCode::UNAUTHORIZED, used, None),
        Err(e) => sign_in_refused(&headers, e, used),
    }
}

async fn logout(
    State(state): State<SharedState>,
    headers: HeaderMap,
    web: Web,
    Form(form): Form<CsrfForm>,
) -> Response {
    if let Some(r) = csrf_refused(&web, &form.csrf) {
        return r;
    }
    if let Err(e) = state.store.end_web_session(&web.id_hash).await {
        return error_page(e.into());
    }
    let mut resp = Redirect::to("/login").into_response();
    resp.headers_mut().insert(
        header::SET_COOKIE,
        set_cookie(COOKIE, "", 0, super::caller::over_https(&headers)),
    );
    resp
}

async fn install(State(state): State<SharedState>, web: Web, Path(key): Path<String>) -> Response {
    page(pages::install(&state, &web, &key).await)
}

async fn apps(State(state): State<SharedState>, web: Web) -> Response {
    page(fleet::apps(&state, &web).await)
}

async fn app(State(state): State<SharedState>, web: Web, Path(key): Path<String>) -> Response {
    page(fleet::app(&state, &web, &key).await)
}

#[derive(Deserialize)]
struct DiffQuery {
    from: u32,
    to: u32,
}

async fn app_diff(
    State(state): State<SharedState>,
    web: Web,
    Path(key): Path<String>,
    Query(q): Query<DiffQuery>,
) -> Response {
    page(fleet::diff(&state, &web, &key, q.from, q.to).await)
}

#[derive(Deserialize, Default)]
struct PageQuery {
    #[serde(default)]
    page: usize,
}

async fn runners(
    State(state): State<SharedState>,
    web: Web,
    Query(q): Query<PageQuery>,
) -> Response {
    page(fleet::runners(&state, &web, q.page).await)
}

async fn workflow(State(state): State<SharedState>, web: Web, Path(id): Path<String>) -> Response {
    page(pages::workflow(&state, &web, &id).await)
}

#[derive(Deserialize, Default)]
struct LogQuery {
    #[serde(default)]
    after: u64,
}

async fn job(
    State(state): State<SharedState>,
    web: Web,
    Path(raw): Path<String>,
    Query(q): Query<LogQuery>,
) -> Response {
    page(pages::job(&state, &web, &raw, q.after).await)
}

/// The job's whole log as text, read page by page: a download.
async fn job_raw(State(state): State<SharedState>, web: Web, Path(raw): Path<String>) -> Response {
    let caller = web.auth.caller();
    let id = match pages::job_of(&state, &web, &raw).await {
        Ok(job) => job.id,
        Err(e) => return error_page(e),
    };
    let filename = format!("attachment; filename=\"{id}.log\"");
    let stream = futures_util::stream::unfold(Some(0u64), move |cursor| {
        let (state, caller, id) = (state.clone(), caller.clone(), id.clone());
        async move {
            let cursor = cursor?;
            let services = state.services();
            let page = match services
                .job_log(&caller, id.as_str(), cursor, Some(5000))
                .await
            {
                Ok(p) => p,
                Err(e) => return Some((Err(std::io::Error::other(e.to_string())), None)),
            };
            if page.lines.is_empty() {
                return None;
            }
            let mut text = String::new();
            for l in &page.lines {
                text.push_str(&l.text);
                text.push('\n');
            }
            Some((
                Ok::<_, std::io::Error>(bytes::Bytes::from(text)),
                Some(page.next),
            ))
        }
    });
    (
        [
            (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_owned()),
            (header::CONTENT_DISPOSITION, filename),
        ],
        axum::body::Body::from_stream(stream),
    )
        .into_response()
}

/// A job's new log lines as Server-Sent Events (`lines`, each with every
/// line that came at once, then `end` once the job has finished and every
/// line was sent): the API's own follower.
async fn job_events(
    State(state): State<SharedState>,
    web: Web,
    headers: HeaderMap,
    Path(raw): Path<String>,
    Query(q): Query<LogQuery>,
) -> Response {
    let after = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse().ok())
        .unwrap_or(q.after);
    use axum::response::sse::{Event, KeepAlive, Sse};
    let org = web.auth.0.org_id.clone();
    let id = match pages::job_of(&state, &web, &raw).await {
        Ok(job) => job.id,
        Err(e) => return error_page(e),
    };
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(super::control::follow(state, org, id, after, tx));
    let stream = futures_util::stream::unfold((rx, false), |(mut rx, ended)| async move {
        if ended {
            return None;
        }
        let events: Vec<Event> = match rx.recv().await {
            Some(Ok(chunk)) => {
                // Every line of the chunk in one event (one JSON object a
                // line), with the last line's cursor as the event's id: a
                // browser that reconnects resumes after it.
                let text = String::from_utf8_lossy(&chunk);
                let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
                let cursor = lines
                    .last()
                    .and_then(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                    .and_then(|v| v["cursor"].as_u64());
                match cursor {
                    Some(cursor) => vec![
                        Event::default()
                            .event("lines")
                            .id(cursor.to_string())
                            .data(lines.join("\n")),
                    ],
                    None => Vec::new(),
                }
            }
            // The follower ended: the log is complete (or it failed, and
            // the page says so by stopping).
            Some(Err(_)) | None => {
                // (An event with no data is never dispatched.)
                return Some((
                    vec![Event::default().event("end").data("complete")],
                    (rx, true),
                ));
            }
        };
        Some((events, (rx, false)))
    })
    .flat_map(|events| {
        futures_util::stream::iter(events.into_iter().map(Ok::<_, std::convert::Infallible>))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The refusal of a form's POST: without the session's CSRF token, or
/// from a session whose role may not do it (`role`, as the API checks).
pub(super) fn refused(
    web: &Web,
    fields: &Fields,
    role: fn(&crate::store::ApiPrincipal) -> Result<(), Error>,
) -> Option<Response> {
    csrf_refused(web, field(fields, "csrf").unwrap_or_default())
        .or_else(|| role(&web.auth.0).err().map(error_page))
}

/// A form's fields, in order (an inputs form's names are not known
/// ahead).
pub(super) type Fields = Vec<(String, String)>;

fn field<'a>(fields: &'a Fields, name: &str) -> Option<&'a str> {
    fields
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

async fn inputs_page(
    State(state): State<SharedState>,
    web: Web,
    Path(key): Path<String>,
) -> Response {
    page(pages::inputs(&state, &web, &key).await)
}

/// What a form does to an install.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum InstallAct {
    /// Deprovision, then remove.
    Delete,
    /// Remove the record only.
    Forget,
    /// Change inputs and secrets (a dry run first, then confirmed).
    Inputs,
}

/// Deletes, forgets or changes the inputs of an install, from its page:
/// a confirmation first (deleting and forgetting ask for the install's
/// name; a change of inputs shows its dry run), then the service the API
/// calls (the same refusals, and the audit trail records it under the
/// API's operation).
async fn install_act(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Path(key): Path<String>,
    Form(fields): Form<Fields>,
    act: InstallAct,
) -> Response {
    if let Some(r) = refused(&web, &fields, require_admin) {
        return r;
    }
    let services = state.services();
    let install = match services.find_install(&web.auth.caller(), &key).await {
        Ok(i) => i,
        Err(e) => return error_page(e),
    };
    let confirmed = field(&fields, "confirm") == Some("yes");
    let caller = web.auth.caller_at(source);
    let at = format!("/installs/{}", install.id);
    let id = install.id.to_string();
    if act == InstallAct::Inputs {
        // Only what changed: a plain input whose value differs from the
        // one shown, a sensitive input or a secret with a value typed;
        // once confirmed, every value the confirmation carries.
        let mut req = nuon_core::wire::UpdateInputs {
            dry_run: !confirmed,
            ..Default::default()
        };
        for (k, v) in &fields {
            if let Some(name) = k.strip_prefix("input.") {
                let changed = confirmed
                    || match field(&fields, &format!("was.{name}")) {
                        Some(was) => was != v,
                        None => !v.is_empty(),
                    };
                if changed {
                    req.inputs
                        .insert(name.to_owned(), serde_json::Value::String(v.clone()));
                }
            } else if let Some(name) = k.strip_prefix("secret.")
                && (confirmed || !v.is_empty())
            {
                req.secrets.insert(name.to_owned(), v.clone());
            }
        }
        let carried: Vec<(String, String)> = req
            .inputs
            .iter()
            .map(|(k, v)| {
                (
                    format!("input.{k}"),
                    v.as_str().unwrap_or_default().to_owned(),
                )
            })
            .chain(
                req.secrets
                    .iter()
                    .map(|(k, v)| (format!("secret.{k}"), v.clone())),
            )
            .collect();
        let names: Vec<String> = req
            .inputs
            .keys()
            .chain(req.secrets.keys())
            .cloned()
            .collect();
        if !confirmed {
            let done = match services.plan_inputs_update(&caller, &id, req).await {
                Ok(d) => d,
                Err(e) => return error_page(e),
            };
            let list = |v: &[String]| {
                if v.is_empty() {
                    "none".to_owned()
                } else {
                    v.join(", ")
                }
            };
            let what = maud::html! {
                p { "Changes " strong { (names.join(", ")) } " of install " (install.name) "." }
                p { "Redeployed: " (list(&done.redeploys)) ". Actions around them: " (list(&done.actions)) "." }
            };
            let question = format!("Change {} of {}?", names.join(", "), install.name);
            return html(pages::confirmation(
                &web,
                &pages::Confirm {
                    question: &question,
                    what,
                    action: &format!("{at}/inputs"),
                    button: "Yes, change and redeploy",
                    class: "primary",
                    hidden: &carried,
                    type_name: None,
                    back: &format!("{at}/inputs"),
                },
            ));
        }
        return match services.update_install_inputs(&caller, &id, req).await {
            Ok(d) => workflow_or(d.workflow.as_ref(), &at),
            Err(e) => error_page(e),
        };
    }
    let typed = field(&fields, "name");
    if !confirmed || typed != Some(install.name.as_str()) {
        let (question, what, button) = match act {
            InstallAct::Delete => (
                format!("Delete install {}?", install.name),
                "Its components are torn down and its sandbox destroyed (a deprovision workflow, with its approvals); the install and its runner's token go when that succeeds. A failed deprovision can be retried.",
                "Yes, deprovision and delete",
            ),
            _ => (
                format!("Forget install {}?", install.name),
                "Only its record goes: nothing in the customer's cloud is destroyed, and its runner's token stops working. Its workflows and states go with it.",
                "Yes, forget it",
            ),
        };
        let what = maud::html! {
            p { (what) }
            @if confirmed { p.error role="alert" { "The name typed was not " code { (install.name) } "." } }
        };
        return html(pages::confirmation(
            &web,
            &pages::Confirm {
                question: &question,
                what,
                action: &format!(
                    "{at}/{}",
                    if act == InstallAct::Delete {
                        "delete"
                    } else {
                        "forget"
                    }
                ),
                button,
                class: "danger",
                hidden: &[],
                type_name: Some(&install.name),
                back: &at,
            },
        ));
    }
    if act == InstallAct::Delete {
        match services.delete_install(&caller, &id).await {
            Ok(wf) => Redirect::to(&format!("/workflows/{}", wf.id)).into_response(),
            Err(e) => error_page(e),
        }
    } else {
        match services.forget_install(&caller, &id).await {
            Ok(r) => html(layout::notice(
                &web,
                &format!("Install {} forgotten", install.name),
                &r.warning,
            )),
            Err(e) => error_page(e),
        }
    }
}

/// Starts a workflow on an install, from its page, once confirmed: the
/// service's operation (and its refusals: a teardown is an admin's).
async fn workflow_start(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Path(key): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(r) = refused(&web, &fields, require_deployer) {
        return r;
    }
    let (services, caller) = (state.services(), web.auth.caller_at(source));
    let install = match services.find_install(&caller, &key).await {
        Ok(i) => i,
        Err(e) => return error_page(e),
    };
    let given = |name: &str| field(&fields, name).filter(|v| !v.is_empty());
    let mut req = serde_json::json!({ "kind": given("kind").unwrap_or_default() });
    for name in ["component", "action", "runbook"] {
        if let Some(v) = given(name) {
            req[name] = serde_json::Value::String(v.to_owned());
        }
    }
    // Run-time inputs of an action or a runbook: `NAME=VALUE`, separated
    // by commas or lines.
    if let Some(text) = given("inputs") {
        let mut inputs = serde_json::Map::new();
        for item in text
            .split([',', '\n'])
            .map(str::trim)
            .filter(|i| !i.is_empty())
        {
            match item.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => {
                    inputs.insert(
                        k.trim().to_owned(),
                        serde_json::Value::String(v.trim().to_owned()),
                    );
                }
                _ => {
                    return error_page(Error::bad_request(format!(
                        "inputs: {item:?} is not NAME=VALUE (give them as NAME=VALUE, separated by commas)"
                    )));
                }
            }
        }
        req["inputs"] = serde_json::Value::Object(inputs);
    }
    let req: nuon_core::wire::CreateWorkflow = match serde_json::from_value(req) {
        Ok(r) => r,
        Err(e) => return error_page(Error::bad_request(format!("the workflow asked for: {e}"))),
    };
    let kind = format!("{:?}", req.kind).to_lowercase();
    let what = match (&req.action, &req.runbook, &req.component) {
        (Some(a), _, _) => format!("action {a}"),
        (None, Some(r), _) => format!("runbook {r}"),
        (None, None, Some(c)) => format!("{kind} of {c}"),
        (None, None, None) => kind.clone(),
    };
    let what = if req.inputs.is_empty() {
        what
    } else {
        let given: Vec<String> = req.inputs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        format!("{what} with {}", given.join(", "))
    };
    let at = format!("/installs/{}", install.id);
    if field(&fields, "confirm") != Some("yes") {
        let question = format!("Start {what} on {}?", install.name);
        let body = maud::html! {
            p { "It queues behind the install's running workflow; its plans wait for an approval as the install's approval setting says." }
        };
        let hidden: Vec<(String, String)> = fields
            .iter()
            .filter(|(k, _)| {
                matches!(
                    k.as_str(),
                    "kind" | "component" | "action" | "runbook" | "inputs"
                )
            })
            .cloned()
            .collect();
        let destroys = matches!(req.kind, nuon_core::workflow::WorkflowKind::Teardown);
        return html(pages::confirmation(
            &web,
            &pages::Confirm {
                question: &question,
                what: body,
                action: &format!("{at}/workflows"),
                button: "Yes, start it",
                class: if destroys { "danger" } else { "primary" },
                hidden: &hidden,
                type_name: None,
                back: &at,
            },
        ));
    }
    match services
        .start_workflow(&caller, install.id.as_str(), req)
        .await
    {
        Ok(wf) => Redirect::to(&format!("/workflows/{}", wf.id)).into_response(),
        Err(e) => error_page(e),
    }
}

async fn rollouts(State(state): State<SharedState>, web: Web) -> Response {
    page(fleet::rollouts(&state, &web).await)
}

async fn rollout(State(state): State<SharedState>, web: Web, Path(key): Path<String>) -> Response {
    let caller = web.auth.caller();
    page(
        state
            .services()
            .get_rollout(&caller, &key)
            .await
            .map(|r| fleet::rollout_page(&web, &r)),
    )
}

/// Pause, resume, retry, cancel or roll back a rollout, from its page, once
/// confirmed: the service the API calls (the same refusals, and the audit
/// trail records it under the API's operation).
async fn rollout_act(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Path((key, act)): Path<(String, String)>,
    Form(fields): Form<Fields>,
) -> Response {
    use crate::engine::RolloutAct;
    if let Some(r) = refused(&web, &fields, require_deployer) {
        return r;
    }
    let (act, question, what) = match act.as_str() {
        "pause" => (
            RolloutAct::Pause,
            "Pause this rollout?",
            "What deploys (or updates) finishes; nothing new starts until it is resumed.",
        ),
        "resume" => (
            RolloutAct::Resume,
            "Resume this rollout?",
            "Its next wave starts, or it goes on without the installs that failed.",
        ),
        "retry" => (
            RolloutAct::Retry,
            "Retry the failed installs?",
            "Each gets a new deploy workflow, with its inputs as they are now; then the rollout goes on.",
        ),
        "cancel" => (
            RolloutAct::Cancel,
            "Cancel this rollout?",
            "Nothing more starts; the deploys that run finish.",
        ),
        "rollback" => (
            RolloutAct::Rollback,
            "Roll this rollout back?",
            "Every install it reached returns to the release it had before, by a new rollout.",
        ),
        other => return error_page(Error::not_found(format!("no rollout action {other:?}"))),
    };
    let services = state.services();
    let at = format!("/rollouts/{key}");
    if field(&fields, "confirm") != Some("yes") {
        // The rollout must be the org's before anything is asked.
        if let Err(e) = services.get_rollout(&web.auth.caller(), &key).await {
            return error_page(e);
        }
        return html(pages::confirmation(
            &web,
            &pages::Confirm {
                question,
                what: maud::html! { p { (what) } },
                action: &format!("{at}/{act_path}", act_path = act_name(act)),
                button: "Yes",
                class: if matches!(act, RolloutAct::Cancel | RolloutAct::Rollback) {
                    "danger"
                } else {
                    "primary"
                },
                hidden: &[],
                type_name: None,
                back: &at,
            },
        ));
    }
    let caller = web.auth.caller_at(source);
    match services.act_on_rollout(&caller, &key, act).await {
        // A rollback answers with the new rollout that does it.
        Ok(r) => Redirect::to(&format!("/rollouts/{}", r.id)).into_response(),
        Err(e) => error_page(e),
    }
}

fn act_name(act: crate::engine::RolloutAct) -> &'static str {
    use crate::engine::RolloutAct;
    match act {
        RolloutAct::Resume => "resume",
        RolloutAct::Pause => "pause",
        RolloutAct::Retry => "retry",
        RolloutAct::Cancel => "cancel",
        RolloutAct::Rollback => "rollback",
    }
}

/// Rolls a release out, from its app's page: the dry run's plan first
/// (who gets it, in which wave), then the service the API calls (the
/// same refusals, and the audit trail records it under the API's
/// operation).
async fn rollout_create(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Path(key): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(r) = refused(&web, &fields, require_deployer) {
        return r;
    }
    let confirmed = field(&fields, "confirm") == Some("yes");
    let req = nuon_core::rollout::CreateRollout {
        to: field(&fields, "to").unwrap_or_default().to_owned(),
        waves: field(&fields, "waves")
            .filter(|w| !w.is_empty())
            .unwrap_or("100%")
            .to_owned(),
        dry_run: !confirmed,
        ..Default::default()
    };
    let caller = web.auth.caller_at(source);
    let services = state.services();
    if !confirmed {
        let plan = match services.plan_rollout(&caller, &key, req.clone()).await {
            Ok(p) => p,
            Err(e) => return error_page(e),
        };
        let question = format!("Roll release {key} out to {}?", req.to);
        let what = maud::html! {
            p { (plan.targets.len()) " installs in " (plan.wave_count) " waves (" code { (plan.waves) } "), at most " (plan.max_parallel) " at once; a failed install stops it." }
            ol { @for w in 0..plan.wave_count {
                li { @for (i, t) in plan.targets.iter().filter(|t| t.wave == w).enumerate() {
                    @if i > 0 { ", " } (t.install)
                } }
            } }
        };
        let hidden = vec![
            ("to".to_owned(), req.to.clone()),
            ("waves".to_owned(), req.waves.clone()),
        ];
        return html(pages::confirmation(
            &web,
            &pages::Confirm {
                question: &question,
                what,
                action: &format!("/releases/{key}/rollouts"),
                button: "Yes, roll it out",
                class: "primary",
                hidden: &hidden,
                type_name: None,
                back: "/rollouts",
            },
        ));
    }
    match services.create_rollout(&caller, &key, req).await {
        Ok(r) => Redirect::to(&format!("/rollouts/{}", r.id)).into_response(),
        Err(e) => error_page(e),
    }
}

async fn people(State(state): State<SharedState>, web: Web) -> Response {
    page(pages::people(&state, &web).await)
}

/// The app and its latest config, for a new install of it (an admin's).
async fn app_for_install(
    state: &SharedState,
    web: &Web,
    key: &str,
) -> Result<(nuon_core::wire::AppInfo, nuon_core::app::AppConfig), Error> {
    require_admin(&web.auth.0)?;
    let (services, caller) = (state.services(), web.auth.caller());
    let app = services.find_app(&caller, key).await?;
    let latest = services.latest_config(&caller, &app).await?;
    Ok((app, latest.config))
}

/// The form of a new install of an app.
async fn new_install_page(
    State(state): State<SharedState>,
    web: Web,
    Path(key): Path<String>,
) -> Response {
    page(
        app_for_install(&state, &web, &key)
            .await
            .map(|(app, config)| new_install::form(&web, &app, &config, None)),
    )
}

/// Creates an install from the form, by the API's own handler: its
/// runner's token on the answer, or the form again with the reason.
async fn install_create(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Path(key): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(r) = refused(&web, &fields, require_admin) {
        return r;
    }
    let (app, config) = match app_for_install(&state, &web, &key).await {
        Ok(found) => found,
        Err(e) => return error_page(e),
    };
    let again = |why: String| {
        let status = StatusCode::BAD_REQUEST;
        (
            status,
            html(new_install::form(
                &web,
                &app,
                &config,
                Some((&fields, &why)),
            )),
        )
            .into_response()
    };
    let req = match new_install::request(&app, &fields) {
        Ok(r) => r,
        Err(e) => return again(e),
    };
    let caller = web.auth.caller_at(source);
    match state.services().create_install(&caller, req).await {
        Ok(made) => html(new_install::created(&web, &made)),
        Err(e) if e.status().is_client_error() => again(e.to_string()),
        Err(e) => error_page(e),
    }
}

/// Sets or clears an install's own values for a component (`target` is
/// `COMPONENT/helm_values` or `COMPONENT/tf_vars`), from its page; the
/// component is deployed with them. The service the API calls does it
/// (the same refusals, and the audit trail records it).
async fn install_overrides(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Path(key): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(r) = refused(&web, &fields, require_admin) {
        return r;
    }
    let target = field(&fields, "target").unwrap_or_default();
    let Some((component, kind)) = target.rsplit_once('/') else {
        return error_page(Error::bad_request(
            "choose the component whose values to set",
        ));
    };
    let clear = field(&fields, "clear").is_some();
    let text = (!clear).then(|| {
        field(&fields, "values")
            .unwrap_or_default()
            .replace("\r\n", "\n")
    });
    if text.as_deref().is_some_and(|t| t.trim().is_empty()) {
        return error_page(Error::bad_request(
            "the values are empty: to remove the install's values for the component, tick \"clear\"",
        ));
    }
    let req = match kind {
        "helm_values" => nuon_core::wire::SetComponentOverride {
            helm_values: text,
            tf_vars: None,
            deploy: true,
        },
        "tf_vars" => nuon_core::wire::SetComponentOverride {
            helm_values: None,
            tf_vars: text,
            deploy: true,
        },
        other => {
            return error_page(Error::bad_request(format!(
                "{other:?} is not helm_values or tf_vars"
            )));
        }
    };
    let caller = web.auth.caller_at(source);
    let services = state.services();
    match services
        .set_component_override(&caller, &key, component, req)
        .await
    {
        Ok(r) => workflow_or(r.workflow.as_ref(), &format!("/installs/{key}")),
        Err(e) => error_page(e),
    }
}

/// To the page of the workflow a change started, else back to `back`.
fn workflow_or(workflow: Option<&nuon_core::wire::WorkflowInfo>, back: &str) -> Response {
    match workflow {
        Some(w) => Redirect::to(&format!("/workflows/{}", w.id)).into_response(),
        None => Redirect::to(back).into_response(),
    }
}

async fn groups(State(state): State<SharedState>, web: Web) -> Response {
    page(fleet::groups(&state, &web).await)
}

/// Makes a group of installs, from the groups page: the service's own
/// operation, refused, done and recorded as the API does it.
async fn group_create(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(r) = refused(&web, &fields, require_admin) {
        return r;
    }
    let req = nuon_core::wire::CreateGroup {
        name: field(&fields, "name").unwrap_or_default().to_owned(),
        selector: field(&fields, "selector").unwrap_or_default().to_owned(),
    };
    let caller = web.auth.caller_at(source);
    match state.services().create_group(&caller, req).await {
        Ok(_) => Redirect::to("/groups").into_response(),
        Err(e) => error_page(e),
    }
}

/// Deletes a group (its installs stay), once confirmed: the service's
/// own operation, refused, done and recorded as the API does it.
async fn group_delete(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Path(name): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(r) = refused(&web, &fields, require_admin) {
        return r;
    }
    if field(&fields, "confirm") != Some("yes") {
        return html(pages::confirmation(
            &web,
            &pages::Confirm {
                question: &format!("Delete group {name}?"),
                what: maud::html! { p { "Its installs stay, with their labels; only the name and its selector go." } },
                action: &format!("/groups/{name}/delete"),
                button: "Yes, delete it",
                class: "danger",
                hidden: &[],
                type_name: None,
                back: "/groups",
            },
        ));
    }
    let caller = web.auth.caller_at(source);
    match state.services().delete_group(&caller, &name).await {
        Ok(_) => Redirect::to("/groups").into_response(),
        Err(e) => error_page(e),
    }
}

/// Builds an app's components of its latest config version, from its page.
async fn app_builds(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Path(key): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(r) = refused(&web, &fields, require_deployer) {
        return r;
    }
    let caller = web.auth.caller_at(source);
    let result = state
        .services()
        .create_builds(&caller, &key, Default::default())
        .await;
    match result {
        Ok(_) => Redirect::to(&format!("/apps/{key}")).into_response(),
        Err(e) => error_page(e),
    }
}

/// Deletes an app with no install left, from its page, once its name is
/// typed: the service the API calls does it (the same refusals, and the
/// audit trail records it).
async fn app_delete(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Path(key): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(r) = refused(&web, &fields, require_admin) {
        return r;
    }
    let services = state.services();
    let app = match services.find_app(&web.auth.caller(), &key).await {
        Ok(a) => a,
        Err(e) => return error_page(e),
    };
    let confirmed = field(&fields, "confirm") == Some("yes");
    if !confirmed || field(&fields, "name") != Some(app.name.as_str()) {
        let question = format!("Delete app {}?", app.name);
        let what = maud::html! {
            p { "Its config versions, builds and releases go with it. An app with installs is not deleted: delete or forget them first." }
            @if confirmed { p.error role="alert" { "The name typed was not " code { (app.name) } "." } }
        };
        return html(pages::confirmation(
            &web,
            &pages::Confirm {
                question: &question,
                what,
                action: &format!("/apps/{}/delete", app.id),
                button: "Yes, delete it",
                class: "danger",
                hidden: &[],
                type_name: Some(&app.name),
                back: &format!("/apps/{}", app.id),
            },
        ));
    }
    let caller = web.auth.caller_at(source);
    match services.delete_app(&caller, app.id.as_str()).await {
        Ok(_) => Redirect::to("/apps").into_response(),
        Err(e) => error_page(e),
    }
}

/// The API path's last word of an operation.
fn op_path(op: &str) -> &'static str {
    match op {
        "approveWorkflowStep" => "approve",
        "denyWorkflowStep" => "deny",
        "retryWorkflow" => "retry",
        "skipWorkflowStep" => "skip",
        _ => "cancel",
    }
}
