//! The dashboard's render page: what each step of a workflow would be
//! given on an install, rendered with its values and outputs (the
//! `renderInstall` operation, through the service layer). Nothing runs.
//! And the app's README rendered for the install (`getInstallReadme`).

use axum::extract::{Path, Query, State};
use axum::response::Response;
use maud::{Markup, html};
use serde::Deserialize;

use super::Web;
use super::layout::{layout, page};
use crate::api::SharedState;
use crate::error::Error;

/// The workflows a render page offers.
const WORKFLOWS: [&str; 5] = [
    "provision",
    "deploy",
    "teardown",
    "deprovision",
    "reprovision",
];

#[derive(Deserialize)]
pub(super) struct RenderQuery {
    #[serde(default)]
    workflow: Option<String>,
}

/// The pages of what an install renders.
pub(super) fn routes() -> axum::Router<SharedState> {
    use axum::routing::get;
    axum::Router::new()
        .route("/installs/{id}/render", get(render_page))
        .route("/installs/{id}/readme", get(readme_page))
}

async fn render_page(
    State(state): State<SharedState>,
    web: Web,
    Path(key): Path<String>,
    Query(q): Query<RenderQuery>,
) -> Response {
    let workflow = q.workflow.as_deref().unwrap_or("deploy");
    page(render(&state, &web, &key, workflow).await)
}

async fn readme_page(
    State(state): State<SharedState>,
    web: Web,
    Path(key): Path<String>,
) -> Response {
    page(readme(&state, &web, &key).await)
}

async fn readme(state: &SharedState, web: &Web, key: &str) -> Result<Markup, Error> {
    let r = state
        .services()
        .install_readme(&web.auth.caller(), key)
        .await?;
    let body = html! {
        h1 { "README of " (key) }
        p.muted { "Rendered with the install's values and outputs; secrets and sensitive values are stand-ins." }
        @if !r.warnings.is_empty() {
            h2 { "What does not render (shown as written)" }
            ul.problems {
                @for w in &r.warnings {
                    li { (w) }
                }
            }
        }
        div.readme.markdown { (maud::PreEscaped(super::markdown::to_html(&r.rendered))) }
    };
    Ok(layout(&format!("README {key}"), Some(web), body))
}

async fn render(
    state: &SharedState,
    web: &Web,
    key: &str,
    workflow: &str,
) -> Result<Markup, Error> {
    let r = state
        .services()
        .render_install(&web.auth.caller(), key, workflow)
        .await?;
    let body = html! {
        h1 { "What a " (workflow) " of " (key) " would be given" }
        p.muted {
            "Rendered with the install's values and outputs. Secrets and sensitive values are stand-ins; "
            "outputs not known yet read (known after apply). Nothing runs."
        }
        nav aria-label="Workflow" {
            @for w in WORKFLOWS {
                @if w == workflow {
                    strong { (w) } " "
                } @else {
                    a href={ "/installs/" (key) "/render?workflow=" (w) } { (w) } " "
                }
            }
        }
        @if !r.problems.is_empty() {
            h2 { "Values that do not render" }
            ul.problems {
                @for p in &r.problems {
                    li { strong { (p.step) } ": " (p.message) }
                }
            }
        }
        @if r.artifacts.is_empty() && r.problems.is_empty() {
            p { "This workflow renders nothing for this install." }
        }
        @for a in &r.artifacts {
            section {
                h2 { (a.step) ": " (a.what) }
                pre { code { (a.text) } }
            }
        }
    };
    Ok(layout(&format!("Render {key}"), Some(web), body))
}

/// The secrets' table (nothing when the app has none).
pub(super) fn secrets_table(secrets: &nuon_core::wire::InstallSecrets) -> Markup {
    html! {
        @if !secrets.secrets.is_empty() {
            h2 { "Secrets" }
            table {
                thead { tr { th { "Secret" } th { "Held by" } th { "State" } } }
                tbody {
                    @for s in &secrets.secrets {
                        tr {
                            td { code { (s.name) } }
                            td { (s.held_by) }
                            td {
                                @match (&s.location, s.set) {
                                    (Some(at), _) => { "in the customer's account: " code { (at) } }
                                    (None, _) if s.held_by == "customer" => { "entered by the customer in the install stack (not reported yet)" }
                                    (None, true) => { "set (sealed)" }
                                    (None, false) => { @if s.required { "not set (required)" } @else { "not set" } }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}
