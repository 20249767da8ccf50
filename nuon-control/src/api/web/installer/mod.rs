//! The customer's installer page, `/install/TOKEN`: what an invitation
//! links to. No account and no vendor token: the link is the credential
//! (its token kept as a hash), spent once, by one browser.
//!
//! - Opened while pending: the app's description and README, the inputs
//!   the app lets the customer set (`user_configurable`, by group, with
//!   defaults; sensitive ones as passwords) and, unless the invitation
//!   names it, the install's name. Sent, the link is spent, the install
//!   made as the customer (the audit trail says so, with the inputs they
//!   set) and its provision started; a refusal shows the form again with
//!   what was typed and the reason, the link unspent.
//! - Opened by the browser that spent it: the install stack to download
//!   (single-file forms as the file, the others as a shell bundle) with
//!   the commands to apply it, the provision's progress live (Server-Sent
//!   Events), then the install's README rendered with its outputs and the
//!   installer's `post_install_markdown`.
//! - Opened anywhere else after it was used, or after its expiry or
//!   revocation: a page that says so.
//!
//! The browser is known by a cookie of its own (`HttpOnly`,
//! `SameSite=Lax`, so the link opened from a mail still finds it); every
//! form carries a CSRF token derived from it. The page loads nothing from
//! elsewhere (the dashboard's Content-Security-Policy): the vendor's logo
//! and favicon are the ones its CLI sent with the config, served from here
//! to the browser that may see the page.

use std::collections::BTreeMap;

use axum::Router;
use axum::extract::{Form, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use maud::{DOCTYPE, Markup, PreEscaped, html};
use nuon_core::app::{AppConfig, Installer};
use nuon_core::model::{Install, InvitationState};
use nuon_core::now_ms;
use nuon_core::token::hash_token;
use nuon_core::wire::AppInfo;

use super::cookies::{cookie, same, secret};
use super::layout::html as html_response;
use super::markdown::to_html;
use super::new_install::input_fieldsets;
use super::{Fields, asset, error_page, field};
use crate::api::{SharedState, Source};
use crate::error::Error;
use crate::service::Caller;
use crate::service::invitations::{Accepted, CustomerInstall, customer_caller, refusal};
use crate::store::StoredInvitation;

mod progress;
mod stack;

use progress::progress;

/// The cookie that knows this browser.
const CUSTOMER_COOKIE: &str = "nuon_customer";
/// How long a browser is known: the longest an invitation lives.
const COOKIE_MAX_AGE_S: i64 = 90 * 24 * 3600;
/// The longest link token looked up (ours are 68 characters).
const MAX_TOKEN: usize = 128;

/// The installer page's routes (under the dashboard's security headers).
pub(super) fn routes() -> Router<SharedState> {
    Router::new()
        .route("/install/{token}", get(show).post(accept))
        .route("/install/{token}/stack/{format}", get(stack::stack))
        .route("/install/{token}/events", get(progress::events))
        .route("/install/{token}/logo", get(logo))
        .route("/install/{token}/favicon", get(favicon))
        .route(
            &format!("{}/{{token}}", stack::TEMPLATE_PATH),
            get(stack::launch),
        )
        .route("/apps/{id}/invitations", axum::routing::post(invite))
        .route(
            "/assets/installer.js",
            get(|| async {
                asset(
                    "text/javascript; charset=utf-8",
                    include_str!("installer.js"),
                )
            }),
        )
}

/// The vendor's dashboard: an invitation made from an app's page, its link
/// shown once.
async fn invite(
    State(state): State<SharedState>,
    Source(source): Source,
    web: super::Web,
    headers: HeaderMap,
    Path(app): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    if let Some(r) = super::refused(&web, &fields, crate::service::require_admin) {
        return r;
    }
    let req = nuon_core::wire::CreateInvitation {
        app,
        email: field(&fields, "email")
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_owned),
        ..Default::default()
    };
    let base = crate::api::caller::public_base(&state, &headers);
    let made = state
        .services()
        .create_invitation(&web.auth.caller_at(source), req, &base)
        .await;
    match made {
        Ok(made) => html_response(super::layout::layout(
            "Invitation made",
            Some(&web),
            html! {
                h1 { "Invitation made" }
                p role="status" { "Send this link to your customer: it is shown only now, works once, and expires " (super::layout::ago(Some(made.invitation.expires_at_ms))) "." }
                pre #invitation-url { (made.url) }
                p.muted { "Take it back with " code { "nuon invitations revoke " (made.invitation.id) } "." }
            },
        )),
        Err(e) => error_page(e),
    }
}

/// This browser's cookie: the one it sent, or a new one with the header
/// that sets it.
fn browser(headers: &HeaderMap) -> (String, Option<HeaderValue>) {
    if let Some(c) = cookie(headers, CUSTOMER_COOKIE).filter(|c| c.len() == 64) {
        return (c, None);
    }
    let c = secret();
    let secure = if crate::api::caller::over_https(headers) {
        "; Secure"
    } else {
        ""
    };
    let set = HeaderValue::from_str(&format!(
        "{CUSTOMER_COOKIE}={c}; Path=/install; HttpOnly; SameSite=Lax; Max-Age={COOKIE_MAX_AGE_S}{secure}"
    ))
    .expect("a cookie of hex and fixed words");
    (c, Some(set))
}

/// The CSRF token of this browser's forms.
fn csrf_of(cookie: &str) -> String {
    hash_token(&format!("installer-csrf:{cookie}"))
}

/// What a link opens, for this browser.
enum Opened {
    /// No invitation has it.
    Unknown,
    /// It cannot be used: used elsewhere, expired or revoked.
    Refused(StoredInvitation),
    /// It can be used: the form.
    Pending(StoredInvitation),
    /// This browser used it: its install.
    Mine(StoredInvitation),
}

async fn open(state: &SharedState, token: &str, cookie: &str) -> Result<Opened, Error> {
    if token.is_empty() || token.len() > MAX_TOKEN {
        return Ok(Opened::Unknown);
    }
    let Some(inv) = state.store.invitation_by_token(&hash_token(token)).await? else {
        return Ok(Opened::Unknown);
    };
    let mine = inv.revoked_at_ms.is_none()
        && inv.install_id.is_some()
        && inv
            .browser_hash
            .as_deref()
            .is_some_and(|b| same(b, &hash_token(cookie)));
    Ok(match inv.state(now_ms()) {
        _ if mine => Opened::Mine(inv),
        InvitationState::Pending => Opened::Pending(inv),
        _ => Opened::Refused(inv),
    })
}

/// `resp` with this browser's cookie set, when it is new.
fn with_cookie(mut resp: Response, set: Option<HeaderValue>) -> Response {
    if let Some(v) = set {
        resp.headers_mut().append(header::SET_COOKIE, v);
    }
    resp
}

/// The app and config an invitation installs, as the customer sees them.
struct Offer {
    caller: Caller,
    app: AppInfo,
    config: AppConfig,
}

async fn offer(
    state: &SharedState,
    inv: &StoredInvitation,
    source: String,
) -> Result<Offer, Error> {
    let caller = customer_caller(inv, source);
    let services = state.services();
    let app = services.find_app(&caller, inv.app_id.as_str()).await?;
    let config = services.latest_config(&caller, &app).await?.config;
    Ok(Offer {
        caller,
        app,
        config,
    })
}

async fn show(
    State(state): State<SharedState>,
    Source(source): Source,
    headers: HeaderMap,
    Path(token): Path<String>,
) -> Response {
    let (cookie, set) = browser(&headers);
    let resp = match open(&state, &token, &cookie).await {
        Err(e) => error_page(e),
        Ok(Opened::Unknown) => unknown(),
        Ok(Opened::Refused(inv)) => refused(&inv),
        Ok(Opened::Pending(inv)) => match offer(&state, &inv, source).await {
            Ok(o) => html_response(form_page(&token, &cookie, &inv, &o, None)),
            Err(e) => error_page(e),
        },
        Ok(Opened::Mine(inv)) => match install_page(&state, &token, &inv, source).await {
            Ok(m) => html_response(m),
            Err(e) => error_page(e),
        },
    };
    with_cookie(resp, set)
}

/// A page that says why the link or form cannot be used, and what to do.
fn said(status: StatusCode, title: &str, message: &str) -> Response {
    let body = html! {
        h1 { (title) }
        p role="alert" { (message) }
    };
    (status, html_response(frame("Installer", None, body))).into_response()
}

fn unknown() -> Response {
    said(
        StatusCode::NOT_FOUND,
        "This link does not work",
        "It is not a link to an installer: check it was copied whole, or ask the vendor for a new one.",
    )
}

fn refused(inv: &StoredInvitation) -> Response {
    refused_in(inv.state(now_ms()))
}

fn refused_in(state: InvitationState) -> Response {
    said(
        StatusCode::GONE,
        "This link does not work any more",
        refusal(state),
    )
}

async fn accept(
    State(state): State<SharedState>,
    Source(source): Source,
    headers: HeaderMap,
    Path(token): Path<String>,
    Form(fields): Form<Fields>,
) -> Response {
    let Some(cookie) = cookie(&headers, CUSTOMER_COOKIE) else {
        return forbidden();
    };
    let given = field(&fields, "csrf").unwrap_or_default();
    if given.is_empty() || !same(given, &csrf_of(&cookie)) {
        return forbidden();
    }
    let inv = match open(&state, &token, &cookie).await {
        Err(e) => return error_page(e),
        Ok(Opened::Unknown) => return unknown(),
        Ok(Opened::Refused(inv)) => return refused(&inv),
        Ok(Opened::Mine(_)) => return Redirect::to(&format!("/install/{token}")).into_response(),
        Ok(Opened::Pending(inv)) => inv,
    };
    let form = CustomerInstall {
        name: field(&fields, "name").unwrap_or_default().to_owned(),
        inputs: fields
            .iter()
            .filter_map(|(k, v)| Some((k.strip_prefix("input.")?.to_owned(), v.clone())))
            .collect::<BTreeMap<_, _>>(),
    };
    let accepted = state
        .services()
        .accept_invitation(
            &hash_token(&token),
            &hash_token(&cookie),
            form,
            source.clone(),
        )
        .await;
    match accepted {
        Ok(Accepted::Installed) => Redirect::to(&format!("/install/{token}")).into_response(),
        Ok(Accepted::Unknown) => unknown(),
        Ok(Accepted::Refused(state)) => refused_in(state),
        Err(e) if e.status().is_client_error() => match offer(&state, &inv, source).await {
            Ok(o) => (
                StatusCode::BAD_REQUEST,
                html_response(form_page(
                    &token,
                    &cookie,
                    &inv,
                    &o,
                    Some((&fields, &e.to_string())),
                )),
            )
                .into_response(),
            Err(e) => error_page(e),
        },
        Err(e) => error_page(e),
    }
}

fn forbidden() -> Response {
    said(
        StatusCode::FORBIDDEN,
        "This form has expired",
        "It was not sent from this browser's installer page (or cookies are off): open the link again and send the form from there.",
    )
}

/// The form: what the app is, what the customer may set.
fn form_page(
    token: &str,
    cookie: &str,
    inv: &StoredInvitation,
    o: &Offer,
    again: Option<(&Fields, &str)>,
) -> Markup {
    let config = &o.config;
    let installer = config.installer.as_ref();
    let sent = |name: &str| again.and_then(|(f, _)| field(f, name)).unwrap_or_default();
    // Never typed back: what is sensitive.
    let sent_safe = |name: &str| {
        let input = name.strip_prefix("input.").and_then(|n| config.input(n));
        if input.is_some_and(|i| i.sensitive) {
            ""
        } else {
            sent(name)
        }
    };
    let settable = |i: &nuon_core::app::InputDecl| i.user_configurable && !i.internal;
    let runner = config
        .runner
        .as_ref()
        .map_or("local", |r| r.runner_type.as_str());
    let held: Vec<&str> = config
        .secrets
        .iter()
        .filter(|s| s.held_by_customer())
        .map(|s| s.name.as_str())
        .collect();
    let title = title_of(&o.app, config);
    let body = html! {
        h1 { "Install " (title) }
        @if let Some(d) = description_of(config) { p.lead { (d) } }
        @if let Some((_, why)) = again {
            p.error role="alert" { "Not created: " (why) }
        }
        @if let Some(readme) = &config.metadata.readme {
            details.readme {
                summary { "About " (title) }
                div.markdown { (PreEscaped(to_html(readme))) }
            }
        }
        form method="post" action={ "/install/" (token) } {
            input type="hidden" name="csrf" value=(csrf_of(cookie));
            @match (&inv.install_id, &inv.name) {
                // An install the vendor made: its values are the vendor's.
                (Some(_), name) => p { "The vendor prepared the install " strong { (name.as_deref().unwrap_or_default()) } " for you: go on to get its stack." },
                (None, Some(name)) => p { "The install will be named " strong { (name) } "." },
                (None, None) => div.field {
                    label for="install-name" { "Name of your install" }
                    p.muted { "Letters, digits, " code { "-" } " and " code { "_" } ": the vendor sees it." }
                    input id="install-name" type="text" name="name" required value=(sent("name")) autocomplete="off";
                },
            }
            @if inv.install_id.is_some() {
            } @else if config.inputs.iter().any(settable) {
                (input_fieldsets(config, settable, &sent_safe))
            } @else {
                p.muted { "The vendor set every value of this app: there is nothing to fill in." }
            }
            h2 { "Where it runs" }
            p { (where_it_runs(runner)) }
            @if !held.is_empty() {
                p { "You enter its secrets (" (held.join(", ")) ") into the install stack, in your own account: they never pass through this page or the vendor." }
            }
            div.actions {
                button.primary type="submit" { "Create the install" }
            }
        }
    };
    frame(
        &format!("Install {title}"),
        installer.map(|i| (i, token)),
        body,
    )
}

/// The app as the customer reads its name.
fn title_of(app: &AppInfo, config: &AppConfig) -> String {
    config
        .metadata
        .display_name
        .clone()
        .unwrap_or_else(|| app.name.clone())
}

fn description_of(config: &AppConfig) -> Option<String> {
    config
        .installer
        .as_ref()
        .and_then(|i| i.description.clone())
        .or_else(|| config.metadata.description.clone())
}

pub(super) fn where_it_runs(runner_type: &str) -> &'static str {
    match runner_type {
        "aws" | "aws-ecs" | "aws-eks" => {
            "In your AWS account, in the region you pick when you apply its stack (a CloudFormation template or a Terraform configuration). The vendor gets no access to your account: the install's runner calls out, and nothing calls in."
        }
        "azure" | "azure-aks" | "azure-acs" => {
            "In your Azure subscription, on your Kubernetes cluster (its stack is a Helm chart). The vendor gets no access to your subscription."
        }
        "gcp" => {
            "In your Google Cloud project, on your Kubernetes cluster (its stack is a Helm chart). The vendor gets no access to your project."
        }
        _ => {
            "On a machine of yours (its stack is a shell bundle and a systemd unit). The vendor gets no access to it: the install's runner calls out, and nothing calls in."
        }
    }
}

/// The page of the install this browser made.
async fn install_page(
    state: &SharedState,
    token: &str,
    inv: &StoredInvitation,
    source: String,
) -> Result<Markup, Error> {
    let o = offer(state, inv, source).await?;
    let install = mine(state, &o.caller, inv).await?;
    let progress = progress(state, &o.caller, &install, &o.config).await?;
    let title = title_of(&o.app, &o.config);
    let runner = o
        .config
        .runner
        .as_ref()
        .map_or("local", |r| r.runner_type.as_str());
    let stack = stack::section(state, token, inv, &install, runner).await?;
    let body = html! {
        h1 { "Install " (install.name) " of " (title) }
        p { "State: " span #state .{ "badge " (install.state.as_str()) } { (install.state.as_str()) } }
        (stack)
        section #progress data-live-install={ "/install/" (token) "/events" } {
            h2 { "2. Provisioning" }
            p.muted #progress-status { (progress.status) }
            table {
                thead { tr { th { "Step" } th { "Status" } th { "Why" } } }
                tbody #steps {
                    @for s in &progress.steps {
                        tr { td { (s.0) } td { span.{ "badge " (s.1) } { (s.1) } } td { (s.2) } }
                    }
                }
            }
        }
        section #readme hidden[progress.readme.is_none()] {
            h2 { "3. Your install" }
            div #readme-body .markdown {
                @if let Some(r) = &progress.readme { (PreEscaped(r)) }
            }
        }
        script src="/assets/installer.js" {}
    };
    Ok(frame(
        &format!("Install {}", install.name),
        o.config.installer.as_ref().map(|i| (i, token)),
        body,
    ))
}

/// The install this browser's invitation made.
async fn mine(
    state: &SharedState,
    caller: &Caller,
    inv: &StoredInvitation,
) -> Result<Install, Error> {
    let id = inv
        .install_id
        .as_ref()
        .ok_or_else(|| Error::not_found("this invitation has not made an install yet"))?;
    state.services().find_install(caller, id.as_str()).await
}

async fn logo(
    state: State<SharedState>,
    source: Source,
    headers: HeaderMap,
    path: Path<String>,
) -> Response {
    image(state, source, headers, path, nuon_core::app::LOGO_SOURCE).await
}

async fn favicon(
    state: State<SharedState>,
    source: Source,
    headers: HeaderMap,
    path: Path<String>,
) -> Response {
    image(state, source, headers, path, nuon_core::app::FAVICON_SOURCE).await
}

/// The vendor's logo or favicon, as the sync kept it, to the browser that
/// may see the page (the link pending, or the install it made): served
/// from here with its own type, never sniffed, an SVG unable to run
/// anything.
async fn image(
    State(state): State<SharedState>,
    Source(source): Source,
    headers: HeaderMap,
    Path(token): Path<String>,
    which: &str,
) -> Response {
    let Some(cookie) = cookie(&headers, CUSTOMER_COOKIE) else {
        return forbidden();
    };
    let inv = match open(&state, &token, &cookie).await {
        Ok(Opened::Pending(inv) | Opened::Mine(inv)) => inv,
        Ok(Opened::Unknown) => return unknown(),
        Ok(Opened::Refused(inv)) => return refused(&inv),
        Err(e) => return error_page(e),
    };
    let found = async {
        let caller = customer_caller(&inv, source);
        let services = state.services();
        let app = services.find_app(&caller, inv.app_id.as_str()).await?;
        services.installer_image(&caller, &app, which).await
    }
    .await;
    match found {
        Ok(Some((kind, bytes))) => (
            [
                (header::CONTENT_TYPE, kind),
                (header::CACHE_CONTROL, "private, max-age=3600".to_owned()),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
                (
                    header::CONTENT_SECURITY_POLICY,
                    "default-src 'none'; style-src 'unsafe-inline'; sandbox".to_owned(),
                ),
            ],
            bytes,
        )
            .into_response(),
        Ok(None) => said(
            StatusCode::NOT_FOUND,
            "No image",
            "The vendor's config keeps no such image.",
        ),
        Err(e) => error_page(e),
    }
}

/// The installer's own frame: the vendor's logo (served here), name and
/// links, the page, the vendor's footer and copyright (Markdown,
/// sanitized); `installer` with the link's token its images are under.
fn frame(title: &str, installer: Option<(&Installer, &str)>, body: Markup) -> Markup {
    let (images, installer) = match installer {
        Some((i, token)) => (Some(format!("/install/{token}")), Some(i)),
        None => (None, None),
    };
    let kept = |t: &Option<String>| images.as_ref().filter(|_| t.is_some());
    let logo = installer.and_then(|i| kept(&i.logo_type));
    let favicon = installer.and_then(|i| kept(&i.favicon_type));
    let name = installer
        .and_then(|i| i.name.as_deref())
        .unwrap_or("Installer");
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (title) }
                link rel="stylesheet" href="/assets/app.css";
                @if let Some(base) = favicon { link rel="icon" href={ (base) "/favicon" }; }
            }
            body.installer {
                header {
                    @if let Some(base) = logo { img.logo src={ (base) "/logo" } alt={ (name) " logo" } height="32"; }
                    span.brand { (name) }
                    @if let Some(i) = installer {
                        nav aria-label="Vendor" {
                            @for (label, url) in i.links() {
                                a href=(url) rel="noopener noreferrer" { (label) }
                            }
                        }
                    }
                }
                main { (body) }
                @if let Some(i) = installer {
                    footer {
                        @if let Some(f) = &i.footer_markdown { div.markdown { (PreEscaped(to_html(f))) } }
                        @if let Some(c) = &i.copyright_markdown { div.markdown.muted { (PreEscaped(to_html(c))) } }
                    }
                }
            }
        }
    }
}
