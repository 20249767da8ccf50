//! The dashboard's overview: every install of the org as a row, from the
//! replica's view of the fleet (`service::fleet`).

use axum::extract::{Query, State};
use axum::response::Response;
use maud::{Markup, html};
use nuon_core::model::Install;
use nuon_core::now_ms;
use nuon_core::wire::{HealthStatus, SyncStatus};
use serde::Deserialize;

use super::Web;
use super::cells::check_cell;
use super::layout::{ago, layout, page};
use crate::api::SharedState;
use crate::error::Error;
use crate::health::InstallSummary;

/// What the overview is asked for.
#[derive(Deserialize, Default)]
pub(super) struct OverviewQuery {
    /// Words an install's name, app, state or labels hold.
    #[serde(default)]
    q: String,
    /// Only the installs of this health (`healthy`, `unhealthy`,
    /// `offline`, `disabled`), or those waiting for an approval
    /// (`waiting`).
    #[serde(default)]
    show: String,
    /// Which page of the installs, from 0.
    #[serde(default)]
    page: usize,
}

/// `GET /`: the overview.
pub(super) async fn get(
    State(state): State<SharedState>,
    web: Web,
    Query(q): Query<OverviewQuery>,
) -> Response {
    page(overview(&state, &web, q.q.trim(), q.show.trim(), q.page).await)
}

/// An install's labels as `key=value`.
fn labels_of(i: &Install) -> Vec<String> {
    i.labels.iter().map(|(k, v)| format!("{k}={v}")).collect()
}

/// How many installs the overview shows at once.
const OVERVIEW_PAGE: usize = 100;

/// Every install of the org as a row: its components by their last
/// deploy, its runner, and what waits for an approval.
async fn overview(
    state: &SharedState,
    web: &Web,
    q: &str,
    show: &str,
    page: usize,
) -> Result<Markup, Error> {
    let services = state.services();
    let needle = q.to_lowercase();
    let mut rows = Vec::new();
    let (mut healthy, mut unhealthy, mut waiting_total) = (0, 0, 0);
    // The fleet as this replica keeps it: each install's workflows as one
    // summary, not every workflow.
    let fleet = services.fleet(&web.auth.caller()).await?;
    let names = &fleet.names;
    let total = fleet.installs().len();
    let now = now_ms();
    // The whole fleet, its first view: counted from what the view keeps,
    // and only the page's installs looked at.
    let whole = (needle.is_empty() && show.is_empty())
        .then(|| fleet.counts())
        .flatten();
    let installs = match &whole {
        Some(_) => {
            let end = page.saturating_add(1).saturating_mul(OVERVIEW_PAGE);
            &fleet.installs()[..total.min(end)]
        }
        None => fleet.installs(),
    };
    for i in installs {
        let app: &str = names.get(&i.app_id).map_or("?", String::as_str);
        if !needle.is_empty() {
            let labels = labels_of(i).join(" ");
            let hay = format!("{} {} {} {labels}", i.name, app, i.state).to_lowercase();
            if !hay.contains(&needle) {
                continue;
            }
        }
        // The status from the brief; the checks only for the rows shown.
        let status = fleet.health(i);
        let waiting = fleet.summary(&i.id).map_or(0, |s| s.brief.waiting.len());
        let picked = match show {
            "" => true,
            "waiting" => waiting > 0,
            s => status.is_some_and(|h| h == s),
        };
        if !picked {
            continue;
        }
        match status {
            Some(HealthStatus::Healthy) => healthy += 1,
            Some(_) => unhealthy += 1,
            None => {}
        }
        waiting_total += waiting;
        rows.push((i, app, status));
    }
    // By status, in `HealthStatus::ALL`'s order.
    let mut by_health = [0usize; HealthStatus::ALL.len()];
    for (_, _, status) in &rows {
        if let Some(n) = status.and_then(|s| HealthStatus::ALL.iter().position(|k| *k == s)) {
            by_health[n] += 1;
        }
    }
    let mut matched = rows.len();
    if let Some(counts) = whole {
        by_health = counts.by_health;
        let counted = HealthStatus::ALL.iter().zip(by_health);
        (healthy, unhealthy) = counted.fold((0, 0), |(h, u), (k, n)| match k {
            HealthStatus::Healthy => (h + n, u),
            _ => (h, u + n),
        });
        waiting_total = counts.waiting;
        matched = total;
    }
    let pages = matched.div_ceil(OVERVIEW_PAGE).max(1);
    let page = page.min(pages - 1);
    let shown: Vec<_> =
        rows.into_iter()
            .skip(page * OVERVIEW_PAGE)
            .take(OVERVIEW_PAGE)
            .map(|(i, app, _)| {
                let labels = labels_of(i);
                let none = InstallSummary::made(Default::default());
                let summary = fleet.summary(&i.id).unwrap_or(&none);
                let waiting = summary.brief.waiting.clone();
                let full = summary.full();
                let h = fleet.configs.get(&i.app_id).map(|c| {
                    crate::health::health_of(c, i, fleet.runner(&i.runner_id), &full, now)
                });
                (i, app, labels, h, waiting)
            })
            .collect();
    let strip: Vec<(&str, usize)> = (HealthStatus::ALL.iter().zip(by_health))
        .map(|(k, n)| (k.as_str(), n))
        .collect();
    let body = html! {
        h1 { "Installs" }
        (super::fleet::health_strip(&strip))
        ul.counts aria-label="Counts" {
            li { a href="/" { strong { (total) } "installs" } }
            li { a href="/?show=healthy" { strong { (healthy) } "healthy" } }
            li { strong { (unhealthy) } "not healthy: "
                @for (n, s) in HealthStatus::ALL.iter().filter(|s| **s != HealthStatus::Healthy).enumerate() {
                    @if n > 0 { ", " }
                    a href={ "/?show=" (s) } { (s.as_str().replace('_', " ")) }
                } }
            li { a href="/?show=waiting" { strong { (waiting_total) } "waiting for an approval" } }
        }
        form.search method="get" action="/" role="search" {
            label for="q" class="muted" { "Search" }
            input id="q" type="search" name="q" value=(q) placeholder="name, app, state or label";
            @if !show.is_empty() { input type="hidden" name="show" value=(show); }
            button type="submit" { "Filter" }
        }
        @let link = |p: usize| format!("/?q={}&show={}&page={p}", crate::oidc::form_encode(q), crate::oidc::form_encode(show));
        @if pages > 1 {
            nav.actions aria-label="Pages" {
                span { "Page " (page + 1) " of " (pages) " (" (matched) " installs)" }
                @if page > 0 { a href=(link(page - 1)) { "Previous" } }
                @if page + 1 < pages { a href=(link(page + 1)) { "Next" } }
            }
        }
        @if shown.is_empty() {
            p.muted { "No install matches." }
        } @else {
            div.table-wrap {
                table {
                    thead { tr {
                        th scope="col" { "Install" }
                        th scope="col" { "App" }
                        th scope="col" { "State" }
                        th scope="col" { "Health" }
                        th scope="col" { "Components" }
                        th scope="col" { "Runner" }
                        th scope="col" { "Approvals" }
                    } }
                    tbody {
                        @for (i, app, labels, h, waiting) in &shown {
                            tr {
                                td {
                                    a href={ "/installs/" (i.id) } { (i.name) }
                                    @if !labels.is_empty() {
                                        br; span.muted { (labels.join(", ")) }
                                    }
                                }
                                td {
                                    (app)
                                    @if let Some(d) = fleet.configs.get(&i.app_id).and_then(|c| c.metadata.display_name.as_ref()) {
                                        br; span.muted { (d) }
                                    }
                                }
                                td { span class={ "badge " (i.state) } { (i.state.as_str().replace('_', " ")) } }
                                td {
                                    @match h {
                                        Some(h) => {
                                            span class={ "badge " (h.status) } { (h.status.as_str().replace('_', " ")) }
                                            @if h.sync == SyncStatus::OutOfSync {
                                                " " span class="badge out_of_sync" title="a component's last change was denied, failed or cancelled: what runs is what an earlier deploy left" { "out of sync" }
                                            }
                                        }
                                        None => span.muted { "no config" },
                                    }
                                }
                                td { div.cells {
                                    @if let Some(h) = h {
                                        @for c in h.checks.iter().filter(|c| matches!(c.kind.as_str(), "component" | "probe" | "check")) {
                                            (check_cell(c))
                                        }
                                    }
                                } }
                                td {
                                    @if let Some(h) = h {
                                        @for c in h.checks.iter().filter(|c| c.kind == "runner") {
                                            span class={ "badge " (c.status) } { (c.status) }
                                            " " span.muted { "last call " (ago(c.at_ms)) }
                                        }
                                    }
                                }
                                td {
                                    @for (id, kind) in waiting {
                                        a href={ "/workflows/" (id) } { (format!("{kind:?}").to_lowercase()) " waits" }
                                        br;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(layout("Installs", Some(web), body))
}
