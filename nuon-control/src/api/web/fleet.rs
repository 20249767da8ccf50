//! The dashboard's apps and runners pages, and its pictures: a
//! component dependency graph and a fleet health strip, drawn as SVG on the
//! server (no script), and a line diff of two config versions.

use std::collections::BTreeMap;
use std::time::Instant;

use maud::{Markup, PreEscaped, html};
use nuon_core::now_ms;
use nuon_core::wire::{ConfigVersionInfo, RunnerStatus};

use super::diff;
use super::layout::{ago, button_form, layout};
use super::{Web, escape as esc};
use crate::api::SharedState;
use crate::error::Error;

/// The org's groups of installs (a name and a label selector) with the
/// installs each selects now; an admin makes and deletes them here.
pub(super) async fn groups(state: &SharedState, web: &Web) -> Result<Markup, Error> {
    let list = state.services().list_groups(&web.auth.caller()).await?;
    let body = html! {
        h1 { "Groups" }
        p.muted { "A group is a name and a label selector: its installs are the ones whose labels match it, now and later. Rollouts and " code { "nuon installs list --group" } " select by them." }
        @if list.groups.is_empty() {
            p.muted { "None yet." }
        } @else {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Group" } th scope="col" { "Selector" } th scope="col" { "Installs" } @if web.can_admin() { th scope="col" { "Delete" } } } }
                tbody { @for g in &list.groups { tr {
                    td { (g.name) }
                    td { code { (g.selector) } }
                    td { @if g.installs.is_empty() { span.muted { "none" } } @for (i, name) in g.installs.iter().enumerate() {
                        @if i > 0 { ", " } a href={ "/installs/" (name) } { (name) }
                    } }
                    @if web.can_admin() { td { (button_form(web, &format!("/groups/{}/delete", g.name), "danger", "Delete…")) } }
                } } }
            } }
        }
        @if web.can_admin() {
            form.search method="post" action="/groups" {
                input type="hidden" name="csrf" value=(web.csrf);
                label for="group-name" { "New group" }
                input id="group-name" type="text" name="name" placeholder="prod-eu" autocomplete="off" required;
                label for="group-selector" { "of" }
                input id="group-selector" type="text" name="selector" placeholder="tier=prod,region in (eu-west-1)" autocomplete="off" required;
                button type="submit" { "Make" }
            }
        }
    };
    Ok(layout("Groups", Some(web), body))
}

/// Every rollout of the org, newest first.
pub(super) async fn rollouts(state: &SharedState, web: &Web) -> Result<Markup, Error> {
    let (services, org) = (state.services(), &web.auth.0.org_id);
    let list = services.all_rollouts(&web.auth.caller()).await?;
    let names = services.app_names(org).await?;
    let versions = services.runner_releases(org).await?;
    let body = html! {
        h1 { "Rollouts" }
        @if list.is_empty() {
            p.muted { "None yet: roll a release out from its app's page, or " code { "nuon releases rollout" } "." }
        } @else {
            div.table-wrap { table {
                thead { tr {
                    th scope="col" { "Rollout" } th scope="col" { "App" } th scope="col" { "To" }
                    th scope="col" { "Status" } th scope="col" { "Wave" } th scope="col" { "By" } th scope="col" { "Started" }
                } }
                tbody { @for r in &list { tr {
                    td { a href={ "/rollouts/" (r.id) } { (r.id) } @if r.rollback_of.is_some() { br; span.muted { "a rollback" } } }
                    td { @match (&r.app_id, &r.runner_version) {
                        (Some(app), _) => (names.get(app).map_or("?", String::as_str)),
                        (None, v) => { "runner " (v.as_deref().unwrap_or("?")) },
                    } }
                    td { code { (r.selector) } }
                    td { span class={ "badge " (r.status.as_str()) } { (r.status.as_str()) } }
                    td { ((r.wave + 1).min(r.wave_count)) " of " (r.wave_count) }
                    td { (r.created_by.as_deref().unwrap_or("-")) }
                    td { (ago(Some(r.created_at_ms))) }
                } } }
            } }
        }
        h2 { "Runner versions" }
        @if versions.is_empty() {
            p.muted { "None published: " code { "nuon runners release publish --version V --binary PATH --store STORE" } "." }
        } @else {
            div.table-wrap { table {
                thead { tr {
                    th scope="col" { "Version" } th scope="col" { "Platform" } th scope="col" { "Artifact" } th scope="col" { "Published" }
                } }
                tbody { @for v in &versions { tr {
                    td { (v.version) }
                    td { (v.os) "/" (v.arch) }
                    td { code { (v.repository) "@" (v.digest) } }
                    td { (v.created_by.as_deref().unwrap_or("-")) ", " (ago(Some(v.created_at_ms))) }
                } } }
            } }
            p.muted { "Roll one out to the install runners in waves with " code { "nuon runners release rollout VERSION --wave 10%" } "; its rollout shows above." }
        }
    };
    Ok(layout("Rollouts", Some(web), body))
}

/// A rollout's installs, wave by wave, and what the session may do to it.
pub(super) fn rollout_page(web: &Web, r: &nuon_core::rollout::RolloutInfo) -> Markup {
    // Only what can still be done: each act as the rollout's own rules
    // would take it now.
    let rollback = r.rollback_of.is_none()
        && r.clone()
            .rollback(nuon_core::RolloutId::generate(), 0, None)
            .is_ok();
    let acts: Vec<(&str, &str)> = [
        ("pause", "Pause", r.clone().pause().is_ok()),
        ("resume", "Resume", r.clone().resume().is_ok()),
        ("retry", "Retry the failed", r.clone().retry().is_ok()),
        ("cancel", "Cancel", r.clone().cancel().is_ok()),
        ("rollback", "Roll back", rollback),
    ]
    .into_iter()
    .filter(|(_, _, can)| *can)
    .map(|(act, label, _)| (act, label))
    .collect();
    let selector = if r.selector.is_empty() {
        "every install"
    } else {
        r.selector.as_str()
    };
    let body = html! {
        h1 { "Rollout " (r.id) }
        dl.facts {
            @if let Some(v) = &r.runner_version {
                dt { "Runner version" } dd { (v) " " span.muted { "(each install's runner updates itself)" } }
            } @else {
                dt { "App" } dd { (r.app_name.as_deref().unwrap_or("?")) }
            }
            dt { "Release" } dd { code { (r.release_id) } }
            dt { "Installs" } dd { code { (selector) } }
            dt { "Waves" } dd { (r.wave_count) " (" (r.waves.replace(',', ", then ")) "), at most " (r.max_parallel) " installs at once" }
            dt { "Status" } dd { span class={ "badge " (r.status.as_str()) } { (r.status.as_str()) } " wave " ((r.wave + 1).min(r.wave_count)) " of " (r.wave_count) }
            @if let Some(why) = &r.reason { dt { "Why" } dd { (why) } }
            @if let Some(of) = &r.rollback_of { dt { "Rolls back" } dd { a href={ "/rollouts/" (of) } { (of) } } }
            dt { "By" } dd { (r.created_by.as_deref().unwrap_or("-")) ", " (ago(Some(r.created_at_ms))) }
        }
        @if web.can_deploy() && !acts.is_empty() {
            div.actions {
                @for (act, label) in acts {
                    (button_form(web, &format!("/rollouts/{}/{act}", r.id), if matches!(act, "cancel" | "rollback") { "danger" } else { "" }, label))
                }
            }
        }
        h2 { "Installs" }
        div.table-wrap { table {
            thead { tr { th scope="col" { "Wave" } th scope="col" { "Install" } @if r.rollback_of.is_some() { th scope="col" { "Gets" } } th scope="col" { "State" } th scope="col" { "Workflow" } th scope="col" { "Why" } } }
            tbody { @for t in &r.targets { tr {
                td { (t.wave + 1) }
                td { a href={ "/installs/" (t.install_id) } { (t.install) } }
                @if r.rollback_of.is_some() { td { code { (t.gets()) } } }
                td { span class={ "badge " (t.state.as_str()) } { (t.state.as_str()) } }
                td { @if let Some(w) = &t.workflow_id { a href={ "/workflows/" (w) } { "deploy, " (ago(t.started_at_ms)) } } @else { "-" } }
                td { (t.reason.as_deref().unwrap_or("")) }
            } } }
        } }
    };
    layout(&format!("Rollout {}", r.id), Some(web), body)
}

/// Components as layers: each one layer below the deepest it depends on.
fn layers(deps: &[(String, Vec<String>)]) -> Vec<Vec<String>> {
    let mut depth: BTreeMap<&str, usize> = BTreeMap::new();
    // Dependencies come first in a valid config; a few passes settle the
    // rest (a cycle is refused at validate, so this ends).
    for _ in 0..=deps.len() {
        let mut changed = false;
        for (name, on) in deps {
            let d = on
                .iter()
                .filter_map(|o| depth.get(o.as_str()))
                .map(|d| d + 1)
                .max()
                .unwrap_or(0);
            if depth.get(name.as_str()) != Some(&d) {
                depth.insert(name, d);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut out: Vec<Vec<String>> = Vec::new();
    for (name, _) in deps {
        let d = depth.get(name.as_str()).copied().unwrap_or(0);
        if out.len() <= d {
            out.resize(d + 1, Vec::new());
        }
        out[d].push(name.clone());
    }
    out
}

/// The dependency graph of components as SVG: a column per layer, an
/// arrow from each component to what it depends on.
pub(super) fn dependency_graph(deps: &[(String, Vec<String>)]) -> Markup {
    const W: usize = 170;
    const H: usize = 34;
    const GAP_X: usize = 60;
    const GAP_Y: usize = 16;
    let layers = layers(deps);
    let tallest = layers.iter().map(Vec::len).max().unwrap_or(0);
    let width = layers.len() * (W + GAP_X) + 10;
    let height = tallest * (H + GAP_Y) + 10;
    let mut at: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (x, layer) in layers.iter().enumerate() {
        for (y, name) in layer.iter().enumerate() {
            at.insert(name, (5 + x * (W + GAP_X), 5 + y * (H + GAP_Y)));
        }
    }
    let mut svg = format!(
        "<svg class=\"graph\" role=\"img\" aria-labelledby=\"graph-title\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" xmlns=\"http://www.w3.org/2000/svg\"><title id=\"graph-title\">Component dependencies: each arrow points from a component to one it depends on</title>\
         <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto-start-reverse\"><path d=\"M 0 0 L 10 5 L 0 10 z\" class=\"edge-head\"/></marker></defs>"
    );
    for (name, on) in deps {
        let Some(&(x1, y1)) = at.get(name.as_str()) else {
            continue;
        };
        for o in on {
            if let Some(&(x2, y2)) = at.get(o.as_str()) {
                svg.push_str(&format!(
                    "<line class=\"edge\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" marker-end=\"url(#arrow)\"/>",
                    x1,
                    y1 + H / 2,
                    x2 + W,
                    y2 + H / 2
                ));
            }
        }
    }
    for (name, (x, y)) in &at {
        svg.push_str(&format!(
            "<g class=\"node\" data-component=\"{n}\"><rect x=\"{x}\" y=\"{y}\" width=\"{W}\" height=\"{H}\" rx=\"5\"/><text x=\"{}\" y=\"{}\">{n}</text></g>",
            x + 10,
            y + H / 2 + 5,
            n = esc(name)
        ));
    }
    svg.push_str("</svg>");
    PreEscaped(svg)
}

/// A strip of the fleet's health: one segment per state, as wide as its
/// share of the installs.
pub(super) fn health_strip(counts: &[(&str, usize)]) -> Markup {
    let total: usize = counts.iter().map(|c| c.1).sum();
    if total == 0 {
        return html! {};
    }
    let words: Vec<String> = counts
        .iter()
        .filter(|c| c.1 > 0)
        .map(|(k, n)| format!("{n} {k}"))
        .collect();
    let mut svg = format!(
        "<svg class=\"strip\" role=\"img\" aria-label=\"Fleet health: {}\" viewBox=\"0 0 1000 16\" preserveAspectRatio=\"none\" xmlns=\"http://www.w3.org/2000/svg\">",
        esc(&words.join(", "))
    );
    let mut x = 0.0;
    for (kind, n) in counts {
        if *n == 0 {
            continue;
        }
        let w = 1000.0 * *n as f64 / total as f64;
        svg.push_str(&format!(
            "<rect class=\"seg-{}\" x=\"{x:.1}\" y=\"0\" width=\"{w:.1}\" height=\"16\"><title>{n} {}</title></rect>",
            esc(kind),
            esc(kind)
        ));
        x += w;
    }
    svg.push_str("</svg>");
    PreEscaped(svg)
}

/// The org's apps.
pub(super) async fn apps(state: &SharedState, web: &Web) -> Result<Markup, Error> {
    let apps = state.services().list_apps(&web.auth.caller()).await?.apps;
    let body = html! {
        h1 { "Apps" }
        @if apps.is_empty() {
            p.muted { "No app yet: " code { "nuon apps create NAME" } "." }
        } @else {
            div.table-wrap { table {
                thead { tr { th scope="col" { "App" } th scope="col" { "Created" } } }
                tbody { @for a in &apps { tr {
                    td { a href={ "/apps/" (a.id) } { (a.name) } }
                    td { (ago(Some(a.created_at_ms))) }
                } } }
            } }
        }
    };
    Ok(layout("Apps", Some(web), body))
}

/// A config version of the app, opened.
async fn version(
    state: &SharedState,
    web: &Web,
    app: &nuon_core::wire::AppInfo,
    n: u32,
) -> Result<ConfigVersionInfo, Error> {
    state
        .services()
        .get_config(&web.auth.caller(), app.id.as_str(), &n.to_string())
        .await
}

/// One app: its config versions (with a diff of any two), its components
/// and their dependency graph, and its builds.
pub(super) async fn app(state: &SharedState, web: &Web, key: &str) -> Result<Markup, Error> {
    let (services, caller) = (state.services(), web.auth.caller());
    let app = services.find_app(&caller, key).await?;
    let mut versions = services
        .list_configs(&caller, app.id.as_str())
        .await?
        .configs;
    versions.sort_by_key(|v| std::cmp::Reverse(v.version));
    let builds = services.list_builds(&caller, app.id.as_str()).await?.builds;
    let latest = match versions.first() {
        Some(v) => Some(version(state, web, &app, v.version).await?),
        None => None,
    };
    let latest = latest.as_ref();
    let deps: Vec<(String, Vec<String>)> = latest
        .map(|v| {
            v.config
                .components
                .iter()
                .map(|c| (c.name.clone(), c.depends_on.clone()))
                .collect()
        })
        .unwrap_or_default();
    // Its installs, each with its state.
    let fleet = services.installs(&caller).await?;
    let installs: Vec<_> = (fleet.installs().iter())
        .filter(|i| i.app_id == app.id)
        .collect();
    let body = html! {
        (super::cells::crumbs(&[(app.name.clone(), None)]))
        h1 { "App " (app.name) }
        @if let Some(m) = latest.map(|v| &v.config.metadata) {
            @if let Some(d) = &m.display_name { p { strong { (d) } } }
            @if let Some(d) = &m.description { p.muted { (d) } }
        }
        @if web.can_admin() && latest.is_some() {
            p { a href={ "/apps/" (app.id) "/installs/new" } { "New install of " (app.name) } }
            form.invite method="post" action={ "/apps/" (app.id) "/invitations" } {
                input type="hidden" name="csrf" value=(web.csrf);
                label for="invite-email" { "A customer's email (kept with the invitation; nothing is sent)" }
                input id="invite-email" type="email" name="email" autocomplete="off";
                button type="submit" { "Invite a customer" }
            }
        }
        h2 { "Installs" }
        @if installs.is_empty() {
            p.muted { "No install yet." }
        } @else {
            div.table-wrap { table.installs {
                thead { tr { th scope="col" { "Install" } th scope="col" { "State" } th scope="col" { "Config" } th scope="col" { "Created" } } }
                tbody { @for i in &installs { tr {
                    td { a href={ "/installs/" (i.id) } { (i.name) } }
                    td { span class={ "badge " (i.state) } { (i.state.as_str().replace('_', " ")) } }
                    td { "v" (i.config_version) }
                    td { (ago(Some(i.created_at_ms))) }
                } } }
            } }
        }
        h2 { "Config versions" }
        @if versions.len() >= 2 {
            form.search method="get" action={ "/apps/" (app.id) "/diff" } {
                label for="from" { "Compare" }
                select id="from" name="from" { @for v in &versions { option value=(v.version) selected[v.version == versions[1].version] { "v" (v.version) } } }
                label for="to" { "with" }
                select id="to" name="to" { @for v in &versions { option value=(v.version) selected[v.version == versions[0].version] { "v" (v.version) } } }
                button type="submit" { "Diff" }
            }
        }
        div.table-wrap { table {
            thead { tr { th scope="col" { "Version" } th scope="col" { "Components" } th scope="col" { "Synced" } } }
            tbody { @for v in &versions { tr {
                td { "v" (v.version) }
                td { (v.components) }
                td { (ago(Some(v.created_at_ms))) }
            } } }
        } }
        @if let Some(v) = latest {
            h2 { "Components of v" (v.version) }
            div.table-wrap { table {
                thead { tr { th scope="col" { "Component" } th scope="col" { "Type" } th scope="col" { "Depends on" } } }
                tbody { @for c in &v.config.components { tr {
                    td { (c.name) }
                    td { code { (c.kind().as_str()) } }
                    td { (c.depends_on.join(", ")) }
                } } }
            } }
            h2 { "Dependency graph" }
            div.table-wrap { (dependency_graph(&deps)) }
        }
        h2 { "Builds" }
        @if web.can_deploy() {
            (button_form(web, &format!("/apps/{}/builds", app.id), "", "Build the latest config version"))
        }
        @if builds.is_empty() {
            p.muted { "None yet: " code { "nuon builds create --app " (app.name) } "." }
        } @else {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Build" } th scope="col" { "Component" } th scope="col" { "Version" } th scope="col" { "Status" } th scope="col" { "Log" } } }
                tbody { @for b in &builds { tr {
                    td { code { (b.id) } }
                    td { (b.component) }
                    td { "v" (b.config_version) }
                    td { span class={ "badge " (b.status.as_str()) } { (b.status.as_str()) } }
                    td { a href={ "/jobs/" (b.id) } { "log" } }
                } } }
            } }
        }
    };
    let releases = services
        .list_releases(&caller, Some(app.id.as_str()))
        .await?
        .releases;
    let body = html! {
        (body)
        h2 { "Releases" }
        @if releases.is_empty() {
            p.muted { "None yet: " code { "nuon releases create --app " (app.name) } "." }
        } @else {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Release" } th scope="col" { "Version" } th scope="col" { "Made" } th scope="col" { "Roll out" } } }
                tbody { @for r in &releases { tr {
                    td { code { (r.id) } }
                    td { "v" (r.config_version) }
                    td { (ago(Some(r.created_at_ms))) }
                    td {
                        @if web.can_deploy() {
                            form.search method="post" action={ "/releases/" (r.id) "/rollouts" } {
                                input type="hidden" name="csrf" value=(web.csrf);
                                label for={ "to-" (r.id) } { "to" }
                                input id={ "to-" (r.id) } type="text" name="to" placeholder="tier=prod" required;
                                label for={ "waves-" (r.id) } { "waves" }
                                input id={ "waves-" (r.id) } type="text" name="waves" value="1,50%,100%";
                                button type="submit" { "Plan…" }
                            }
                        }
                    }
                } } }
            } }
        }
        p { a href="/rollouts" { "Every rollout" } }
        @if web.can_admin() {
            h2 { "Delete" }
            (button_form(web, &format!("/apps/{}/delete", app.id), "danger", "Delete this app"))
        }
    };
    Ok(layout(&format!("App {}", app.name), Some(web), body))
}

/// How many differing lines a file's diff may have before it gives up.
const DIFF_CHANGES: usize = 2_000;
/// How long one page's diffs may take.
const DIFF_TIME: std::time::Duration = std::time::Duration::from_millis(1500);

/// Two config versions of an app, file by file, as a line diff.
pub(super) async fn diff(
    state: &SharedState,
    web: &Web,
    key: &str,
    from: u32,
    to: u32,
) -> Result<Markup, Error> {
    let app = state.services().find_app(&web.auth.caller(), key).await?;
    let (a, b) = (
        &version(state, web, &app, from).await?,
        &version(state, web, &app, to).await?,
    );
    let files = |v: &ConfigVersionInfo| -> BTreeMap<String, String> {
        v.files
            .iter()
            .filter(|f| f.encoding.is_none())
            .map(|f| (f.path.clone(), f.contents.clone()))
            .collect()
    };
    let (fa, fb) = (files(a), files(b));
    // Each changed file's diff, made off the async runtime under one
    // deadline for the page: a file the diff gave up on says so.
    let changed = crate::render_pool::blocking(move || {
        let deadline = Instant::now() + DIFF_TIME;
        let mut paths: Vec<&String> = fa.keys().chain(fb.keys()).collect();
        paths.sort();
        paths.dedup();
        let empty = String::new();
        paths
            .into_iter()
            .filter_map(|p| {
                let (x, y) = (fa.get(p).unwrap_or(&empty), fb.get(p).unwrap_or(&empty));
                (x != y).then(|| {
                    let lines = match diff::line_diff(x, y, DIFF_CHANGES, deadline) {
                        Ok(d) => Ok(d
                            .into_iter()
                            .map(|l| match l {
                                diff::Line::Same(t) => (' ', t.to_owned()),
                                diff::Line::Removed(t) => ('-', t.to_owned()),
                                diff::Line::Added(t) => ('+', t.to_owned()),
                            })
                            .collect::<Vec<_>>()),
                        Err(why) => Err(match why {
                            diff::GaveUp::TooManyChanges(n) => format!(
                                "More than {n} lines differ: not shown line by line (v{from}: {} lines, v{to}: {} lines).",
                                x.lines().count(),
                                y.lines().count()
                            ),
                            diff::GaveUp::Deadline => format!(
                                "Not shown: the page's diffs took over {} ms before this file.",
                                DIFF_TIME.as_millis()
                            ),
                        }),
                    };
                    (p.clone(), lines)
                })
            })
            .collect::<Vec<_>>()
    })
    .await
    .map_err(Error::internal)?;
    let body = html! {
        h1 { "App " a href={ "/apps/" (app.id) } { (app.name) } ": v" (from) " → v" (to) }
        @for (p, lines) in &changed {
            h2 { code { (p) } }
            @match lines {
                Ok(lines) => pre.diff { @for (k, l) in lines {
                    @match k {
                        '+' => ins { "+ " (l) "\n" },
                        '-' => del { "- " (l) "\n" },
                        _ => span { "  " (l) "\n" },
                    }
                } },
                Err(why) => p.muted { (why) },
            }
        }
        @if changed.is_empty() {
            p.muted { "The two versions' files are the same." }
        }
    };
    Ok(layout("Config diff", Some(web), body))
}

/// How many runners the runners page shows at once.
const RUNNERS_PAGE: usize = 100;

/// Every runner of the org: its last call, version, slots and jobs now.
pub(super) async fn runners(state: &SharedState, web: &Web, page: usize) -> Result<Markup, Error> {
    let (services, caller) = (state.services(), web.auth.caller());
    let runners = services.list_runners(&caller).await?.runners;
    let jobs = services.list_jobs(&caller, Some(1000)).await?.jobs;
    // An install's runner, by its install's name (the installs read once).
    let fleet = services.installs(&caller).await?;
    let installs: BTreeMap<_, _> = (fleet.installs().iter())
        .map(|i| (&i.runner_id, (&i.id, &i.name)))
        .collect();
    let pages = runners.len().div_ceil(RUNNERS_PAGE).max(1);
    let page = page.min(pages - 1);
    let running = |id: &nuon_core::RunnerId| {
        jobs.iter()
            .filter(|j| &j.runner_id == id && j.status == nuon_core::JobStatus::Running)
            .collect::<Vec<_>>()
    };
    let body = html! {
        h1 { "Runners" }
        @if pages > 1 {
            nav.actions aria-label="Pages" {
                span { "Page " (page + 1) " of " (pages) " (" (runners.len()) " runners)" }
                @if page > 0 { a href={ "/runners?page=" (page - 1) } { "Previous" } }
                @if page + 1 < pages { a href={ "/runners?page=" (page + 1) } { "Next" } }
            }
        }
        div.table-wrap { table {
            thead { tr {
                th scope="col" { "Runner" } th scope="col" { "Role" } th scope="col" { "Health" }
                th scope="col" { "Last call" } th scope="col" { "Version" } th scope="col" { "Slots" }
                th scope="col" { "Running jobs" } th scope="col" { "Tools" }
            } }
            tbody { @for r in runners.iter().skip(page * RUNNERS_PAGE).take(RUNNERS_PAGE) {
                @let t = r.telemetry.as_ref();
                @let health = if r.status == RunnerStatus::Revoked { "revoked".to_owned() }
                    else if t.and_then(|t| t.disabled.as_ref()).is_some() { "disabled".to_owned() }
                    else { r.health.as_str().to_owned() };
                tr {
                    td {
                        (r.name)
                        @if let Some((id, name)) = installs.get(&r.id) {
                            br; span.muted { "install " a href={ "/installs/" (id) } { (name) } }
                        }
                    }
                    td { (format!("{:?}", r.role).to_lowercase()) }
                    td { span class={ "badge " (health) } { (health) } }
                    td { (ago(r.last_seen_at_ms)) }
                    td { (r.session.as_ref().and_then(|s| s.version.clone()).unwrap_or_else(|| "-".into())) }
                    td { @match t { Some(t) => { (t.busy) " / " (t.slots) }, None => "-" } }
                    td { @for j in running(&r.id) { a href={ "/jobs/" (j.id) } { (j.kind) } " " } }
                    td { @for tool in t.map(|t| &t.tools[..]).unwrap_or_default() { (tool) br; } }
                }
            } }
        } }
        p.muted { "As of " (ago(Some(now_ms()))) "." }
    };
    Ok(layout("Runners", Some(web), body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_are_laid_out_below_what_they_depend_on() {
        let deps = vec![
            ("db".to_owned(), vec![]),
            ("app".to_owned(), vec!["db".to_owned()]),
            ("web".to_owned(), vec!["app".to_owned(), "db".to_owned()]),
            ("cache".to_owned(), vec![]),
        ];
        assert_eq!(
            layers(&deps),
            vec![
                vec!["db".to_owned(), "cache".to_owned()],
                vec!["app".to_owned()],
                vec!["web".to_owned()]
            ]
        );
        let svg = dependency_graph(&[("<x>".to_owned(), vec![])]).into_string();
        assert!(svg.contains("&lt;x&gt;") && !svg.contains("<x>"), "{svg}");
    }
}
