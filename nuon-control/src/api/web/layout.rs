//! The frame every dashboard page is drawn in, and the small pieces the
//! pages share.

use axum::http::header;
use axum::response::{IntoResponse, Response};
use maud::{DOCTYPE, Markup, html};
use nuon_core::now_ms;

use super::{Web, error_page};
use crate::error::Error;

/// How long ago `at_ms` was, in words (`5 min ago`), or how far ahead it
/// is (`in 7 d`).
pub(super) fn ago(at_ms: Option<i64>) -> String {
    let Some(at) = at_ms else {
        return "never".into();
    };
    let delta = at - now_ms();
    let s = delta.unsigned_abs() / 1000;
    let amount = match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86400 => format!("{} h", s / 3600),
        _ => format!("{} d", s / 86400),
    };
    if delta > 0 && s > 0 {
        format!("in {amount}")
    } else {
        format!("{amount} ago")
    }
}

/// A page in the dashboard's frame: its header, the navigation of a
/// signed-in session, and `body`.
pub(super) fn layout(title: &str, web: Option<&Web>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · nuon" }
                link rel="stylesheet" href="/assets/app.css";
            }
            body {
                header {
                    a.brand href="/" { "nuon" }
                    @if let Some(w) = web {
                        nav aria-label="Main" {
                            a href="/" { "Overview" }
                            a href="/apps" { "Apps" }
                            a href="/runners" { "Runners" }
                            a href="/groups" { "Groups" }
                            a href="/rollouts" { "Rollouts" }
                            a href="/people" { "People" }
                        }
                        span.muted { (w.who()) }
                        form method="post" action="/logout" {
                            input type="hidden" name="csrf" value=(w.csrf);
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

/// A form of one button that posts to `action` with the session's CSRF
/// token.
pub(super) fn button_form(web: &Web, action: &str, class: &str, label: &str) -> Markup {
    html! {
        form method="post" action=(action) {
            input type="hidden" name="csrf" value=(web.csrf);
            button class=(class) type="submit" { (label) }
        }
    }
}

/// A page, or the error as a page.
pub(super) fn page(r: Result<Markup, Error>) -> Response {
    match r {
        Ok(m) => html(m),
        Err(e) => error_page(e),
    }
}

/// Markup as an HTML answer.
pub(super) fn html(m: Markup) -> Response {
    (
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        m.into_string(),
    )
        .into_response()
}

/// A page that says something was done.
pub(super) fn notice(web: &Web, title: &str, message: &str) -> Markup {
    layout(
        title,
        Some(web),
        html! {
            h1 { (title) }
            p role="status" { (message) }
            p { a href="/" { "Back to the overview" } }
        },
    )
}
