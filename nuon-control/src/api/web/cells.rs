//! Small pieces of markup pages share: a health check's cell, a plan's
//! summary.

use maud::{Markup, html};
use nuon_core::model::{ApprovalMode, Install};
use nuon_core::wire::HealthCheck;

/// A health check as a cell: its name and status, what it says on hover,
/// and a change of it that is pending.
pub(super) fn check_cell(c: &HealthCheck) -> Markup {
    html! {
        span class={ "cell " (c.status) } title=(c.detail.clone().unwrap_or_default()) {
            (c.name) ": " (c.status)
            @if let Some(p) = &c.pending { " · change " (p.status) }
        }
    }
}

/// A plan's counts, and its resources: their addresses, actions and the
/// attributes they change (`input: 5 → 9`), open when there are few.
pub(super) fn plan_summary(c: &serde_json::Value) -> Markup {
    let n = |k: &str| c[k].as_u64().unwrap_or(0);
    let resources = nuon_core::workflow::plan_resources(c);
    html! {
        span.plan {
            span.add { "+" (n("add")) } " " span.change { "~" (n("change")) } " " span.destroy { "-" (n("destroy")) }
        }
        // Open when short: what changes is what an approval is about.
        @if !resources.is_empty() {
            details open[resources.len() <= 10] {
                summary { (resources.len()) " resource(s)" }
                ul { @for r in &resources { li {
                    code { (r.address) } " " span.muted { (r.actions) }
                    @if !r.values.is_empty() {
                        ul.values { @for v in &r.values { li { code { (v) } } } }
                    }
                } } }
            }
        }
    }
}

/// Where a page is, from the overview down (`Installs › hello › demo ›
/// deploy, 3 min ago`): each level a link but the page's own.
pub(super) fn crumbs(levels: &[(String, Option<String>)]) -> Markup {
    html! {
        nav.crumbs aria-label="Breadcrumbs" {
            ol {
                li { a href="/" { "Installs" } }
                @for (label, href) in levels {
                    li {
                        @match href {
                            Some(h) => a href=(h) { (label) },
                            None => span aria-current="page" { (label) },
                        }
                    }
                }
            }
        }
    }
}

/// A workflow as people name it: its kind, what it was about and when
/// (`deploy of web, 3 min ago`), not its id.
pub(super) fn workflow_label(w: &nuon_core::wire::WorkflowInfo) -> String {
    let of = w
        .component
        .as_ref()
        .map(|c| format!(" of {c}"))
        .unwrap_or_default();
    format!(
        "{}{of}, {}",
        w.kind.as_str().replace('_', " "),
        super::layout::ago(Some(w.created_at_ms))
    )
}

/// Who did something, as people know them: a person by their email (as
/// recorded), a service account's token by its name (`ci (token)`), the
/// control plane as itself.
pub(super) fn person(actor: &str, tokens: &std::collections::BTreeMap<String, String>) -> String {
    match tokens.get(actor) {
        Some(name) => format!("{name} (token)"),
        None => actor.to_owned(),
    }
}

/// The way back from a page about something of install `id`: its app and
/// itself, each with its link, while they are there.
pub(super) async fn install_crumbs(
    state: &crate::api::SharedState,
    web: &super::Web,
    id: &nuon_core::InstallId,
) -> Result<Option<(Install, Vec<(String, Option<String>)>)>, crate::error::Error> {
    let Some((install, app)) = state
        .services()
        .install_and_app(&web.auth.caller(), id)
        .await?
    else {
        return Ok(None);
    };
    let mut levels = Vec::new();
    if let Some(app) = app {
        levels.push((app.name, Some(format!("/apps/{}", app.id))));
    }
    levels.push((
        install.name.clone(),
        Some(format!("/installs/{}", install.id)),
    ));
    Ok(Some((install, levels)))
}

/// The steps' jobs as bars on one time axis, from the first start.
pub(super) fn timeline(bars: &[(String, String, i64, i64)]) -> Markup {
    let t0 = bars.iter().map(|b| b.2).min().unwrap_or(0);
    let t1 = bars.iter().map(|b| b.3).max().unwrap_or(t0).max(t0 + 1);
    let span = (t1 - t0) as f64;
    const ROW: usize = 22;
    const LABEL: f64 = 180.0;
    const WIDTH: f64 = 820.0;
    // Below the bars, a time axis: a tick every 0.1, 0.2, 0.5, 1, 2, 5,
    // 10, 15, 30 s, 1, 2, 5, 10, 15, 30 min or 1 h, at most six of them.
    const AXIS: usize = 24;
    let tick_ms = [
        100, 200, 500, 1_000, 2_000, 5_000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000,
        600_000, 900_000, 1_800_000, 3_600_000,
    ]
    .into_iter()
    .find(|t| span / (*t as f64) <= 6.0)
    .unwrap_or(3_600_000);
    let height = bars.len() * ROW + 4 + AXIS;
    let esc = super::escape;
    let mut svg = format!(
        "<svg class=\"timeline\" role=\"img\" aria-label=\"Timeline of the steps' jobs, {:.1} s in all\" viewBox=\"0 0 1000 {height}\" xmlns=\"http://www.w3.org/2000/svg\">",
        span / 1000.0
    );
    for (i, (name, status, start, end)) in bars.iter().enumerate() {
        let x = LABEL + WIDTH * (start - t0) as f64 / span;
        let w = (WIDTH * (end - start) as f64 / span).max(2.0);
        let y = i * ROW + 2;
        svg.push_str(&format!(
            "<text x=\"0\" y=\"{}\">{}</text><rect class=\"bar {}\" x=\"{x:.1}\" y=\"{y}\" width=\"{w:.1}\" height=\"16\"><title>{} {:.1} s</title></rect>",
            y + 13,
            esc(name),
            esc(status),
            esc(name),
            (end - start) as f64 / 1000.0
        ));
    }
    let axis_y = bars.len() * ROW + 4;
    svg.push_str(&format!(
        "<line class=\"axis\" x1=\"{LABEL}\" y1=\"{axis_y}\" x2=\"{}\" y2=\"{axis_y}\"/>",
        LABEL + WIDTH
    ));
    let mut at = 0i64;
    while (at as f64) <= span {
        let x = LABEL + WIDTH * at as f64 / span;
        let label = match tick_ms {
            60_000.. => format!("{} min", at / 60_000),
            1_000.. => format!("{} s", at / 1000),
            _ => format!("{:.1} s", at as f64 / 1000.0),
        };
        svg.push_str(&format!(
            "<line class=\"tick\" x1=\"{x:.1}\" y1=\"{axis_y}\" x2=\"{x:.1}\" y2=\"{}\"/><text class=\"tick\" x=\"{x:.1}\" y=\"{}\" text-anchor=\"middle\">{label}</text>",
            axis_y + 4,
            axis_y + 18
        ));
        at += tick_ms;
    }
    svg.push_str("</svg>");
    maud::PreEscaped(svg)
}

/// An install's values changed and not deployed: each change, why it is
/// not deployed, and (to who may) Apply and Discard.
pub(super) fn pending_facts(
    web: &super::Web,
    install: &nuon_core::InstallId,
    p: &nuon_core::wire::PendingValues,
) -> Markup {
    let act = |a: &str| format!("/installs/{install}/pending/{a}");
    html! {
        dt { "Pending" } dd.pending {
            ul { @for c in &p.changes { li { code { (c.line()) } } } }
            span.muted { "not deployed to " (p.components.join(", "))
                @if let (Some(w), Some(how)) = (&p.workflow_id, &p.ended) {
                    ": " a href={ "/workflows/" (w) } { "its workflow" } " was " (how)
                } @else if let Some(w) = &p.workflow_id {
                    ": " a href={ "/workflows/" (w) } { "its workflow" } " runs"
                }
            }
            div.actions {
                @if web.can_deploy() { (super::layout::button_form(web, &act("apply"), "", "Apply")) }
                @if web.can_admin() { (super::layout::button_form(web, &act("discard"), "danger", "Discard")) }
            }
        }
    }
}

/// The `approval` field of an install's forms, `selected` chosen.
pub(super) fn approval_select(selected: ApprovalMode) -> Markup {
    html! {
        select id="install-approval" name="approval" {
            @for mode in ApprovalMode::ALL {
                option value=(mode) selected[*mode == selected] {
                    @match mode {
                        ApprovalMode::ApproveAll => "run after their plans (approve-all)",
                        ApprovalMode::Prompt => "wait for an approval (prompt)",
                    }
                }
            }
        }
    }
}
