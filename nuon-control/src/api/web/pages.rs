//! The dashboard's pages. Each reads what the Control API's handlers read,
//! through the same functions, with the session's principal.

use std::collections::BTreeMap;

use axum::http::StatusCode;
use maud::{Markup, html};
use nuon_core::now_ms;
use nuon_core::wire::{SyncStatus, WorkflowInfo};
use nuon_core::workflow::{StepStatus, WorkflowStatus};

use super::Web;
use super::cells::{
    check_cell, crumbs, install_crumbs, person, plan_summary, timeline, workflow_label,
};
use super::layout::{ago, button_form, layout};
use crate::api::SharedState;
use crate::error::Error;
use crate::service::installs::install_info;

/// An error page.
pub(super) fn error(status: StatusCode, message: &str) -> Markup {
    layout(
        status.canonical_reason().unwrap_or("Error"),
        None,
        html! {
            h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
            p.error role="alert" { (message) }
            p { a href="/" { "Back to the overview" } }
        },
    )
}

/// The org's people and API tokens, and (for an admin) the forms that
/// invite, change roles, remove, and make and revoke tokens.
pub(super) async fn people(state: &SharedState, web: &Web) -> Result<Markup, Error> {
    use nuon_core::wire::Role;
    let caller = web.auth.caller();
    let users = state.services().list_users(&caller).await?;
    let tokens = state.services().list_tokens(&caller).await?;
    let roles = [Role::Owner, Role::Admin, Role::Deployer, Role::Viewer];
    let admin = web.can_admin();
    let body = html! {
        h1 { "People" }
        @if users.users.is_empty() {
            p.muted { "Nobody is invited yet; people sign in through the org's OpenID Connect provider once invited." }
        } @else {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Person" } th scope="col" { "Role" } th scope="col" { "Status" } th scope="col" { "Last sign-in" } @if admin { th scope="col" { "Change" } } } }
                tbody { @for u in &users.users { tr {
                    td { (u.email) @if let Some(n) = &u.name { br; span.muted { (n) } } }
                    td { (u.role.as_str()) }
                    td { (format!("{:?}", u.status).to_lowercase()) }
                    td { (ago(u.last_sign_in_at_ms)) }
                    @if admin { td { div.actions {
                        form.search method="post" action={ "/people/" (u.id) "/role" } {
                            input type="hidden" name="csrf" value=(web.csrf);
                            label for={ "role-" (u.id) } class="muted" { "Role" }
                            select id={ "role-" (u.id) } name="role" {
                                @for r in roles { option value=(r.as_str()) selected[r == u.role] { (r.as_str()) } }
                            }
                            button type="submit" { "Set" }
                        }
                        (button_form(web, &format!("/people/{}/remove", u.id), "danger", "Remove…"))
                    } } }
                } } }
            } }
        }
        @if admin {
            form.search method="post" action="/people/invite" {
                input type="hidden" name="csrf" value=(web.csrf);
                label for="invite-email" { "Invite" }
                input id="invite-email" type="text" name="email" placeholder="name@example.com" autocomplete="off" required;
                label for="invite-role" { "as" }
                select id="invite-role" name="role" { @for r in roles { option value=(r.as_str()) selected[r == Role::Viewer] { (r.as_str()) } } }
                button type="submit" { "Invite" }
            }
        }
        h2 { "API tokens" }
        div.table-wrap { table {
            thead { tr { th scope="col" { "Token" } th scope="col" { "Scope" } th scope="col" { "Owner" } th scope="col" { "Made" } th scope="col" { "Expires" } th scope="col" { "State" } @if admin { th scope="col" { "Revoke" } } } }
            tbody { @for t in &tokens.tokens { tr {
                td { (t.name) br; code.muted { (t.id) } }
                td { (t.scope.as_str()) }
                td { (t.user.as_deref().unwrap_or("service account")) }
                td { (ago(Some(t.created_at_ms))) }
                td { @match t.expires_at_ms { Some(at) => (format!("in {} min", ((at - now_ms()).max(0)) / 60_000)), None => "never" } }
                td { @if t.revoked { "revoked" } @else { "active" } }
                @if admin { td { @if !t.revoked && t.id != web.auth.0.token_id {
                    (button_form(web, &format!("/tokens/{}/revoke", t.id), "danger", "Revoke…"))
                } } }
            } } }
        } }
        @if admin {
            form.search method="post" action="/tokens" {
                input type="hidden" name="csrf" value=(web.csrf);
                label for="token-name" { "New token" }
                input id="token-name" type="text" name="name" placeholder="ci-deployer" autocomplete="off" required;
                label for="token-scope" { "scope" }
                select id="token-scope" name="scope" {
                    option value="read" { "read" }
                    option value="deployer" { "deployer" }
                    option value="admin" { "admin" }
                }
                button type="submit" { "Make" }
            }
        }
    };
    Ok(layout("People", Some(web), body))
}

/// A token just made: its secret, shown this once.
pub(super) fn token_made(web: &Web, made: &nuon_core::wire::TokenCreated) -> Markup {
    layout(
        "Token made",
        Some(web),
        html! {
            h1 { "Token " (made.token.name) " made" }
            p role="status" { "Its secret is shown only now: keep it where it is needed (" code { "NUON_TOKEN" } ")." }
            pre id="token-secret" { (made.secret) }
            p { a href="/people" { "Back to people and tokens" } }
        },
    )
}

/// The session's org's workflow of a path's id as the API shows it, or
/// not found.
pub(super) async fn workflow_of(
    state: &SharedState,
    web: &Web,
    raw: &str,
) -> Result<nuon_core::wire::WorkflowInfo, Error> {
    let id: nuon_core::WorkflowId = crate::api::path_id("workflow", raw)?;
    state
        .services()
        .get_workflow(&web.auth.caller(), id.as_str())
        .await
}

/// The session's org's job of a path's id as the API shows it, or not
/// found.
pub(super) async fn job_of(
    state: &SharedState,
    web: &Web,
    raw: &str,
) -> Result<nuon_core::wire::JobInfo, Error> {
    let id: nuon_core::JobId = crate::api::path_id("job", raw)?;
    state
        .services()
        .get_job(&web.auth.caller(), id.as_str())
        .await
}

/// One install: its components, inputs (sensitive ones by name only),
/// secrets by name only, runner and workflows.
pub(super) async fn install(state: &SharedState, web: &Web, key: &str) -> Result<Markup, Error> {
    let (services, caller) = (state.services(), web.auth.caller());
    let (stored, app, latest) = services.install_app_config(&caller, key).await?;
    let h = services
        .install_health(&caller, &stored, &latest.config)
        .await?;
    let workflows = services
        .install_workflows(&caller, stored.id.as_str())
        .await?
        .workflows;
    let info = install_info(stored.clone())?;
    let components = crate::service::toggles::components(&latest.config, &stored);
    let secrets = services.install_secrets(&caller, key).await?;
    let customer_inputs = services.customer_inputs(&caller, &stored).await?;
    // Outputs as the API answers them: sensitive ones masked.
    let outputs = services.install_outputs(&caller, key).await?;
    let levels = [
        (app.name.clone(), Some(format!("/apps/{}", app.id))),
        (info.name.clone(), None),
    ];
    let body = html! {
        (crumbs(&levels))
        h1 { "Install " (info.name) }
        dl.facts {
            dt { "App" } dd { (app.name) " (config version " (info.config_version) ")" }
            dt { "State" } dd {
                span class={ "badge " (info.state) } { (info.state.as_str().replace('_', " ")) }
                @if let Some(k) = h.checks.iter().find(|k| k.kind == "install") {
                    " " span.muted { (k.detail.clone().unwrap_or_default()) }
                }
            }
            dt { "Health" } dd {
                span class={ "badge " (h.status) } { (h.status.as_str().replace('_', " ")) }
                " " span class={ "badge " (h.sync) } { (h.sync.as_str().replace('_', " ")) }
                @if h.sync == SyncStatus::OutOfSync {
                    " " span.muted { "a component's last change was not applied: what runs is what an earlier deploy left; deploy again to apply it" }
                }
            }
            @if let Some(p) = &info.pending { (super::cells::pending_facts(web, &info.id, p)) }
            // The checks its components require, as the vendor's systems
            // last pushed them.
            @let pushed: Vec<_> = h.checks.iter().filter(|k| k.kind == "check").collect();
            @if !pushed.is_empty() {
                dt { "Checks" } dd {
                    @for k in pushed {
                        (check_cell(k)) " " span.muted { (k.detail.clone().unwrap_or_default()) } br;
                    }
                }
            }
            dt { "Approvals" } dd {
                (info.approval)
                @if web.can_admin() {
                    details {
                        summary { "Rename, or change its approvals" }
                        form.search method="post" action={ "/installs/" (info.id) "/settings" } {
                            input type="hidden" name="csrf" value=(web.csrf);
                            label for="install-name" { "Name" }
                            input id="install-name" type="text" name="name" value=(info.name) required pattern="[A-Za-z0-9._-]{1,64}" autocomplete="off";
                            label for="install-approval" { "Applies" }
                            (super::cells::approval_select(info.approval))
                            button type="submit" { "Save" }
                        }
                    }
                }
            }
            @if !info.labels.is_empty() || web.can_admin() {
                dt { "Labels" } dd {
                    @for (k, v) in &info.labels { code { (k) "=" (v) } " " }
                    @if web.can_admin() {
                        form.search method="post" action={ "/installs/" (info.id) "/labels" } {
                            input type="hidden" name="csrf" value=(web.csrf);
                            label for="labels" class="muted" { "Change" }
                            input id="labels" type="text" name="labels" placeholder="tier=prod region-" autocomplete="off" required;
                            button type="submit" { "Set" }
                        }
                    }
                }
            }
        }
        h2 { "Components" }
        div.table-wrap { table {
            thead { tr { th scope="col" { "Component" } th scope="col" { "Type" } th scope="col" { "Last deploy" } th scope="col" { "Outputs" } th scope="col" { "On" } th scope="col" { "Own values" } } }
            tbody {
                @for c in &components {
                    @let check = h.checks.iter().find(|k| k.kind == "component" && k.name == c.name);
                    tr {
                        td {
                            (c.name)
                            @if !c.labels.is_empty() {
                                br; span.muted { @for (k, v) in &c.labels { code { (k) "=" (v) } " " } }
                            }
                        }
                        td { code { (c.kind) } }
                        td {
                            @match check {
                                Some(k) => { (check_cell(k)) " " span.muted { (k.detail.clone().unwrap_or_default()) } },
                                None => span.muted { "-" },
                            }
                            // Its health probes, as its last health step or the
                            // runner's watch since saw them.
                            @for p in h.checks.iter().filter(|k| k.kind == "probe" && k.name.split_once('/').is_some_and(|(of, _)| of == c.name)) {
                                br; (check_cell(p)) " " span.muted { (p.detail.clone().unwrap_or_default()) }
                            }
                        }
                        td { (output_list(outputs.components.get(&c.name))) }
                        td { @if c.enabled { "on" } @else { "off" } }
                        td { @match c.overrides.as_ref().and_then(|o| o.helm_values.as_ref().or(o.tf_vars.as_ref())) {
                            Some(text) => details {
                                summary { @if c.kind == "helm_chart" { "Helm values" } @else { "Terraform variables" } }
                                pre { code { (text) } }
                            },
                            None => span.muted { "-" },
                        } }
                    }
                }
            }
        } }
        @let overridable: Vec<(&str, &str, &str)> = components.iter().filter_map(|c| match c.kind.as_str() {
            "helm_chart" => Some((c.name.as_str(), "helm_values", "Helm values (YAML)")),
            "terraform_module" => Some((c.name.as_str(), "tf_vars", "Terraform variables (.tfvars)")),
            _ => None,
        }).collect();
        @if web.can_admin() && !overridable.is_empty() {
            details {
                summary { "Set this install's own values for a component" }
                p.muted { "Merged over the app config's values (Helm values deep-merged; a .tfvars file read last), rendered as templates; the component is deployed with them." }
                form method="post" action={ "/installs/" (info.id) "/overrides" } {
                    input type="hidden" name="csrf" value=(web.csrf);
                    label for="override-target" { "Component" }
                    select id="override-target" name="target" {
                        @for (name, kind, what) in &overridable { option value={ (name) "/" (kind) } { (name) " — " (what) } }
                    }
                    label for="override-values" { "Values" }
                    textarea id="override-values" name="values" rows="6" cols="60" placeholder="replicaCount: 3" {}
                    label { input type="checkbox" name="clear" value="1"; " clear them (the config's values apply again)" }
                    button type="submit" { "Set and deploy" }
                }
            }
        }
        @if !outputs.sandbox.is_empty() {
            h3 { "Sandbox outputs" }
            (output_list(Some(&outputs.sandbox)))
        }
        h2 { "Inputs" }
        @let by_customer = |k: &str| customer_inputs.iter().any(|c| c == k);
        dl.facts {
            @for (k, v) in &info.inputs {
                dt { (k) } dd { code { (match v { serde_json::Value::String(s) => s.clone(), other => other.to_string() }) } @if by_customer(k) { " " span.muted.customer { "(set by the customer)" } } }
            }
            @for k in &info.sensitive_inputs {
                dt { (k) } dd.muted { "(sensitive)" @if by_customer(k) { " (set by the customer)" } }
            }
        }
        (super::render::secrets_table(&secrets))
        h2 { "Runner" }
        @for c in h.checks.iter().filter(|c| c.kind == "runner") {
            p { span class={ "badge " (c.status) } { (c.status) } " " (c.name) ": " (c.detail.clone().unwrap_or_default()) }
        }
        h2 { "Workflows" }
        @if web.can_deploy() {
            @let manual: Vec<&str> = latest.config.actions.iter()
                .filter(|a| a.triggers.iter().any(|t| t.kind == "manual"))
                .map(|a| a.name.as_str()).collect();
            div.actions {
                form.search method="post" action={ "/installs/" (info.id) "/workflows" } {
                    input type="hidden" name="csrf" value=(web.csrf);
                    label for="start-kind" { "Start" }
                    select id="start-kind" name="kind" {
                        option value="deploy" { "deploy" }
                        option value="provision" { "provision" }
                        option value="reprovision" { "reprovision" }
                        option value="drift" { "drift check" }
                        @if web.can_admin() { option value="teardown" { "teardown" } }
                    }
                    label for="start-component" { "of" }
                    select id="start-component" name="component" {
                        option value="" { "every component" }
                        @for c in &components { option value=(c.name) { (c.name) } }
                    }
                    button type="submit" { "Start…" }
                }
                @if !manual.is_empty() {
                    form.search method="post" action={ "/installs/" (info.id) "/workflows" } {
                        input type="hidden" name="csrf" value=(web.csrf);
                        input type="hidden" name="kind" value="action";
                        label for="start-action" { "Run action" }
                        select id="start-action" name="action" {
                            @for a in &manual { option value=(a) { (a) } }
                        }
                        label for="start-action-inputs" { "with inputs" }
                        input id="start-action-inputs" name="inputs" placeholder="NAME=VALUE, …";
                        button type="submit" { "Run…" }
                    }
                }
                @if !latest.config.runbooks.is_empty() {
                    form.search method="post" action={ "/installs/" (info.id) "/workflows" } {
                        input type="hidden" name="csrf" value=(web.csrf);
                        input type="hidden" name="kind" value="runbook";
                        label for="start-runbook" { "Run runbook" }
                        select id="start-runbook" name="runbook" {
                            @for r in &latest.config.runbooks { option value=(r.name) { (r.name) } }
                        }
                        label for="start-runbook-inputs" { "with inputs" }
                        input id="start-runbook-inputs" name="inputs" placeholder="NAME=VALUE, …";
                        button type="submit" { "Run…" }
                    }
                }
            }
        }
        (workflow_table(&workflows))
        p { a href={ "/installs/" (info.id) "/render" } { "What each workflow would be given, rendered" } " · " a href={ "/installs/" (info.id) "/readme" } { "the app's README" } }
        @if web.can_admin() {
            h2 { "Change" }
            div.actions {
                a href={ "/installs/" (info.id) "/inputs" } { "Change inputs and secrets" }
                (button_form(web, &format!("/installs/{}/delete", info.id), "danger", "Delete (deprovision)"))
                (button_form(web, &format!("/installs/{}/forget", info.id), "danger", "Forget"))
            }
        }
    };
    Ok(layout(&format!("Install {}", info.name), Some(web), body))
}

/// The form that changes an install's inputs and secrets: plain inputs
/// with their values; sensitive inputs and secrets empty (kept unless a
/// new value is typed).
pub(super) async fn inputs(state: &SharedState, web: &Web, key: &str) -> Result<Markup, Error> {
    crate::service::require_admin(&web.auth.0)?;
    let (services, caller) = (state.services(), web.auth.caller());
    let (stored, _, _) = services.install_app_config(&caller, key).await?;
    let (_, config) = state
        .engine
        .app_config(&web.auth.0.org_id, &stored.app_id, stored.config_version)
        .await?;
    let info = install_info(stored.clone())?;
    let shown = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let body = html! {
        h1 { "Inputs and secrets of " (info.name) }
        p.muted { "Only what you change is sent. The components that read a changed value are redeployed (and what depends on them), between the app's update-inputs actions; the next page says which, before anything changes." }
        form method="post" action={ "/installs/" (info.id) "/inputs" } {
            input type="hidden" name="csrf" value=(web.csrf);
            @for i in config.inputs.iter().filter(|i| !i.internal) {
                @let id = format!("input-{}", i.name);
                @let current = info.inputs.get(&i.name).map(shown).unwrap_or_default();
                div.field {
                    label for=(id) { (i.display_name.as_deref().unwrap_or(&i.name)) " " code { (i.name) } }
                    @if let Some(d) = &i.description { p.muted { (d) } }
                    @if i.sensitive {
                        input id=(id) type="password" name={ "input." (i.name) } autocomplete="off" placeholder="(unchanged)";
                    } @else {
                        input id=(id) type="text" name={ "input." (i.name) } value=(current);
                        input type="hidden" name={ "was." (i.name) } value=(current);
                    }
                }
            }
            @for sec in &config.secrets {
                @let id = format!("secret-{}", sec.name);
                div.field {
                    label for=(id) { "Secret " (sec.display_name.as_deref().unwrap_or(&sec.name)) " " code { (sec.name) } }
                    @if !sec.description.is_empty() { p.muted { (sec.description) } }
                    input id=(id) type="password" name={ "secret." (sec.name) } autocomplete="off" placeholder="(unchanged)";
                }
            }
            div.actions {
                button.primary type="submit" { "Review the change" }
                a href={ "/installs/" (info.id) } { "Cancel" }
            }
        }
    };
    Ok(layout(&format!("Inputs of {}", info.name), Some(web), body))
}

/// Outputs as `key = value` lines (a long value cut short).
fn output_list(outputs: Option<&serde_json::Map<String, serde_json::Value>>) -> Markup {
    html! {
        @match outputs.filter(|o| !o.is_empty()) {
            None => span.muted { "-" },
            Some(o) => ul.outputs { @for (k, v) in o {
                @let text = match v { serde_json::Value::String(s) => s.clone(), other => other.to_string() };
                li { code { (k) } " = " code { (text.chars().take(120).collect::<String>()) @if text.chars().count() > 120 { "…" } } }
            } },
        }
    }
}

fn workflow_table(workflows: &[WorkflowInfo]) -> Markup {
    html! {
        @if workflows.is_empty() {
            p.muted { "None yet." }
        } @else {
            div.table-wrap { table {
                thead { tr { th scope="col" { "Workflow" } th scope="col" { "Kind" } th scope="col" { "Status" } th scope="col" { "Started" } } }
                tbody {
                    @for w in workflows {
                        tr {
                            td { a href={ "/workflows/" (w.id) } { (w.id) } }
                            td { (format!("{:?}", w.kind).to_lowercase()) }
                            td { span class={ "badge " (w.status.as_str()) } { (w.status.as_str()) } }
                            td { (ago(Some(w.created_at_ms))) }
                        }
                    }
                }
            } }
        }
    }
}

/// One workflow: its steps in order, and what the session may do to it.
pub(super) async fn workflow(state: &SharedState, web: &Web, raw: &str) -> Result<Markup, Error> {
    let (services, caller) = (state.services(), web.auth.caller());
    let wf = workflow_of(state, web, raw).await?;
    let (install, mut levels) = match install_crumbs(state, web, &wf.install_id).await? {
        Some((i, levels)) => (i.name, levels),
        None => (wf.install_id.to_string(), Vec::new()),
    };
    levels.push((workflow_label(&wf), None));
    // Who approved, by name.
    let tokens = services.token_names(&caller).await?;
    let waiting = wf
        .steps
        .iter()
        .find(|s| s.status == StepStatus::WaitingApproval);
    // Each step's job: how long it took, and its bar on the timeline.
    let mut took = BTreeMap::new();
    let mut bars = Vec::new();
    for s in &wf.steps {
        let Some(j) = &s.job_id else { continue };
        // A job no longer kept has no bar.
        let Ok(job) = services.get_job(&caller, j.as_str()).await else {
            continue;
        };
        let Some(start) = job.started_at_ms else {
            continue;
        };
        let end = job.finished_at_ms.unwrap_or_else(now_ms);
        took.insert(
            s.index,
            format!("{:.1} s", (end - start).max(0) as f64 / 1000.0),
        );
        bars.push((s.name.clone(), s.status.as_str().to_owned(), start, end));
    }
    let ended = !wf.status.is_active();
    let failed = [WorkflowStatus::Failed, WorkflowStatus::Cancelled].contains(&wf.status);
    let form = |act: &str, label: &str, class: &str, step: Option<&str>| {
        html! {
            form method="post" action={ "/workflows/" (wf.id) "/" (act) } {
                input type="hidden" name="csrf" value=(web.csrf);
                @if let Some(s) = step { input type="hidden" name="step" value=(s); }
                button class=(class) type="submit" { (label) }
            }
        }
    };
    let body = html! {
        (crumbs(&levels))
        h1 { (format!("{:?}", wf.kind).to_lowercase()) " of " a href={ "/installs/" (wf.install_id) } { (install) } }
        dl.facts {
            dt { "Workflow" } dd { code { (wf.id) } }
            dt { "Status" } dd { span id="status" class={ "badge " (wf.status.as_str()) } { (wf.status.as_str()) } }
            dt { "Started" } dd { (ago(Some(wf.created_at_ms))) }
            @if let Some(t) = &wf.trigger { dt { "Trigger" } dd { (t) } }
        }
        @if web.can_deploy() {
            div.actions {
                @if let Some(s) = waiting {
                    (form("approve", &format!("Approve {}", s.name), "primary", Some(&s.name)))
                    form method="post" action={ "/workflows/" (wf.id) "/approve" } {
                        input type="hidden" name="csrf" value=(web.csrf);
                        input type="hidden" name="step" value=(s.name);
                        input type="hidden" name="all" value="yes";
                        button type="submit" { "Approve all remaining steps" }
                    }
                    (form("deny", &format!("Deny {}", s.name), "danger", Some(&s.name)))
                }
                @if !ended { (form("cancel", "Cancel workflow", "", None)) }
                @if ended && failed {
                    (form("retry", "Retry", "", None))
                    @if let Some(s) = wf.steps.iter().find(|s| matches!(s.status, StepStatus::Failed | StepStatus::Cancelled)) {
                        (form("skip", &format!("Skip {} and go on", s.name), "", Some(&s.name)))
                    }
                }
            }
        }
        h2 { "Steps" }
        div.table-wrap { table id="steps" data-live-workflow={ "/workflows/" (wf.id) "/events" } {
            thead { tr { th scope="col" { "#" } th scope="col" { "Step" } th scope="col" { "Status" } th scope="col" { "Approval" } th scope="col" { "Log" } th scope="col" { "Took" } th scope="col" { "Plan, or why" } } }
            tbody {
                @for s in &wf.steps {
                    tr id={ "step-" (s.index) } data-step=(s.name) {
                        td { (s.index + 1) }
                        td { (s.name) }
                        td { span class={ "badge " (s.status.as_str()) } { (s.status.as_str()) } }
                        td.approval {
                            @if let Some(by) = &s.approved_by { "approved by " (person(by, &tokens)) }
                            @else if s.needs_approval { "needed" }
                        }
                        td.log { @if let Some(j) = &s.job_id { a href={ "/jobs/" (j) } { "log" } } }
                        td.took { (took.get(&s.index).cloned().unwrap_or_default()) }
                        td.why {
                            (s.reason.clone().unwrap_or_default())
                            @if let Some(c) = s.outputs.get("changes").filter(|c| c.is_object()) {
                                (plan_summary(c))
                            }
                        }
                    }
                }
            }
        } }
        @if !bars.is_empty() {
            h2 { "Timeline" }
            (timeline(&bars))
        }
        section id="current" hidden {
            h2 { "Log of " span id="current-step" {} }
            div.table-wrap { table.log id="current-log" { tbody {} } }
        }
        script src="/assets/live.js" defer {}
    };
    Ok(layout("Workflow", Some(web), body))
}

/// How many log lines a page shows.
const LOG_PAGE: u32 = 1000;

/// A job's log: a page of lines after `after` (stdout, stderr and the
/// runner's own lines told apart, each with a link), the next page's link,
/// and on the last page the lines still to come, as they come.
pub(super) async fn job(
    state: &SharedState,
    web: &Web,
    raw: &str,
    after: u64,
) -> Result<Markup, Error> {
    let (services, caller) = (state.services(), web.auth.caller());
    let job = job_of(state, web, raw).await?;
    let id = job.id.clone();
    let page = services
        .job_log(&caller, id.as_str(), after, Some(LOG_PAGE))
        .await?;
    let more = page.lines.len() as u32 >= LOG_PAGE;
    let live = !more && !page.complete;
    // The way back: the step that ran it, its workflow, install and app.
    let from = services.step_of_job(&caller, &id).await?;
    let mut levels = Vec::new();
    let mut facts = Vec::new();
    if let Some((w, index)) = &from {
        if let Some((i, crumbs)) = install_crumbs(state, web, &w.install_id).await? {
            levels = crumbs;
            facts.push(("Install", i.name.clone(), format!("/installs/{}", i.id)));
        }
        let label = workflow_label(w);
        levels.push((label.clone(), Some(format!("/workflows/{}", w.id))));
        facts.push(("Workflow", label, format!("/workflows/{}", w.id)));
        if let Some(s) = w.steps.iter().find(|s| s.index == *index) {
            levels.push((
                s.name.clone(),
                Some(format!("/workflows/{}#step-{}", w.id, s.index)),
            ));
            facts.push((
                "Step",
                s.name.clone(),
                format!("/workflows/{}#step-{}", w.id, s.index),
            ));
        }
    }
    levels.push(("log".to_owned(), None));
    let body = html! {
        (crumbs(&levels))
        h1 { "Job " code { (job.id) } }
        dl.facts {
            @for (what, label, href) in &facts { dt { (what) } dd { a href=(href) { (label) } } }
            dt { "Kind" } dd { (job.kind) " job" }
            dt { "Status" } dd { span class={ "badge " (job.status.as_str()) } { (job.status.as_str()) } }
            dt { "Created" } dd { (ago(Some(job.created_at_ms))) }
        }
        div.actions {
            a href={ "/jobs/" (job.id) "/raw" } download { "Download the raw log" }
            @if after > 0 { a href={ "/jobs/" (job.id) } { "First page" } }
            @if more { a href={ "/jobs/" (job.id) "?after=" (page.next) } { "Next page" } }
        }
        form.search role="search" {
            label for="log-filter" { "Search this page" }
            input id="log-filter" type="search" placeholder="text in a line";
            span id="log-matches" class="muted" aria-live="polite" {}
        }
        div.table-wrap {
            table.log id="log" data-live-log=[live.then(|| format!("/jobs/{}/events?after={}", job.id, page.next))] {
                thead { tr { th scope="col" { "Line" } th scope="col" { "Text" } } }
                tbody {
                    @for l in &page.lines {
                        @let n = format!("{}-{}", l.attempt, l.seq);
                        tr id={ "L" (n) } class=(format!("{:?}", l.stream).to_lowercase()) {
                            td { a href={ "#L" (n) } { (n) } }
                            td { pre { (l.text) } }
                        }
                    }
                }
            }
        }
        @if page.lines.is_empty() && !live { p.muted { "No log lines." } }
        script src="/assets/live.js" defer {}
    };
    Ok(layout("Job log", Some(web), body))
}

/// What a confirmation page asks.
pub(super) struct Confirm<'a> {
    /// The question, as the page's heading.
    pub(super) question: &'a str,
    /// What happens on yes.
    pub(super) what: Markup,
    /// Where the form posts.
    pub(super) action: &'a str,
    /// The yes button's text, and its class (`primary`, `danger`).
    pub(super) button: &'a str,
    pub(super) class: &'a str,
    /// Fields the form carries on.
    pub(super) hidden: &'a [(String, String)],
    /// A name the person must type to say yes (deleting an install).
    pub(super) type_name: Option<&'a str>,
    /// Where "no" goes.
    pub(super) back: &'a str,
}

/// A confirmation page: the question, what happens, and a form that says
/// yes with the session's CSRF token.
pub(super) fn confirmation(web: &Web, c: &Confirm<'_>) -> Markup {
    let body = html! {
        h1 { (c.question) }
        (c.what)
        div.actions {
            form method="post" action=(c.action) {
                input type="hidden" name="csrf" value=(web.csrf);
                input type="hidden" name="confirm" value="yes";
                @for (k, v) in c.hidden { input type="hidden" name=(k) value=(v); }
                @if let Some(n) = c.type_name {
                    label for="confirm-name" { "Type " code { (n) } " to confirm" }
                    input id="confirm-name" type="text" name="name" autocomplete="off" required;
                }
                button class=(c.class) type="submit" { (c.button) }
            }
            a href=(c.back) { "No, go back" }
        }
    };
    layout(c.question, Some(web), body)
}
