//! A new install from the dashboard: a form made from the app's latest
//! config (the install's name, approval mode and labels, each input by
//! its group, each secret, which toggleable components start on, and the
//! install's own values for a component), sent to the API's own handler.
//! A refusal shows the form again with what was typed (secrets and
//! sensitive inputs excepted) and the API's reason; the answer shows the
//! runner's token once, and how to start the runner and provision.

use std::collections::BTreeMap;

use maud::{Markup, html};
use nuon_core::app::{AppConfig, ComponentKind, InputDecl, InputType};
use nuon_core::wire::{AppInfo, ComponentOverride, CreateInstall, InstallCreated};

use super::cells::approval_select;
use super::layout::layout;
use super::{Fields, Web, field};

/// The form, for `app` at its latest `config`: empty, or as it was sent
/// (`again`) with the reason it was refused.
pub(super) fn form(
    web: &Web,
    app: &AppInfo,
    config: &AppConfig,
    again: Option<(&Fields, &str)>,
) -> Markup {
    let sent = |name: &str| again.and_then(|(f, _)| field(f, name)).unwrap_or_default();
    let toggleable: Vec<_> = config.components.iter().filter(|c| c.toggleable).collect();
    let overridable: Vec<_> = config
        .components
        .iter()
        .filter(|c| {
            matches!(
                c.kind(),
                ComponentKind::HelmChart | ComponentKind::TerraformModule
            )
        })
        .collect();
    let toggled_on = |name: &str, default: bool| match again {
        Some((f, _)) => field(f, &format!("on.{name}")).is_some(),
        None => default,
    };
    let body = html! {
        h1 { "New install of " (app.name) }
        @if let Some((_, why)) = again {
            p.error role="alert" { "Not created: " (why) }
        }
        p.muted { "Made from the app's latest config version. Nothing is deployed until you provision it; the next page shows its runner's token, once." }
        form method="post" action={ "/apps/" (app.id) "/installs" } {
            input type="hidden" name="csrf" value=(web.csrf);
            div.field {
                label for="install-name" { "Name" }
                p.muted { "Unique in the org: letters, digits, " code { "-" } " and " code { "_" } "." }
                input id="install-name" type="text" name="name" required value=(sent("name")) autocomplete="off";
            }
            div.field {
                label for="install-approval" { "Applies" }
                (approval_select(sent("approval").parse().unwrap_or_default()))
            }
            div.field {
                label for="install-labels" { "Labels" }
                p.muted { "What groups and rollouts select by, as " code { "KEY=VALUE" } " words: " code { "tier=prod region=eu" } "." }
                input id="install-labels" type="text" name="labels" value=(sent("labels")) autocomplete="off";
            }
            (input_fieldsets(config, |i| !i.internal, &sent))
            @if !config.secrets.is_empty() {
                fieldset {
                    legend { "Secrets" }
                    p.muted { "Sealed at rest and never shown again." }
                    @for s in config.secrets.iter().filter(|s| s.held_by_customer()) {
                        p.muted { code { (s.name) } ": held by the customer, who enters it when they apply the install stack; it stays in their account." }
                    }
                    @for s in config.secrets.iter().filter(|s| !s.held_by_customer()) {
                        @let id = format!("secret-{}", s.name);
                        @let needed = s.required && !s.auto_generate && s.default.is_none();
                        div.field {
                            label for=(id) { (s.display_name.as_deref().unwrap_or(&s.name)) " " code { (s.name) } @if needed { " (required)" } }
                            @if !s.description.is_empty() { p.muted { (s.description) } }
                            @if s.auto_generate { p.muted { "Left empty: generated." } }
                            input id=(id) type="password" name={ "secret." (s.name) } autocomplete="off" required[needed];
                        }
                    }
                }
            }
            @if !toggleable.is_empty() {
                fieldset {
                    legend { "Components that may be off" }
                    @for c in &toggleable {
                        div.check {
                            input type="hidden" name={ "toggle." (c.name) } value="1";
                            input id={ "on-" (c.name) } type="checkbox" name={ "on." (c.name) } value="1" checked[toggled_on(&c.name, c.default_enabled)];
                            label for={ "on-" (c.name) } { (c.name) " is on" }
                        }
                    }
                }
            }
            @if !overridable.is_empty() {
                details {
                    summary { "The install's own values for a component" }
                    p.muted { "Over the config's: Helm values (YAML) are merged over the chart's values; Terraform variables (a .tfvars file) are read last. Both may be templates." }
                    @for c in &overridable {
                        @let (key, what) = match c.kind() {
                            ComponentKind::HelmChart => ("helm_values", "Helm values (YAML)"),
                            _ => ("tf_vars", "Terraform variables (.tfvars)"),
                        };
                        @let name = format!("{key}.{}", c.name);
                        div.field {
                            label for={ "own-" (c.name) } { (c.name) ": " (what) }
                            textarea id={ "own-" (c.name) } name=(name) rows="4" cols="60" { (sent(&name)) }
                        }
                    }
                }
            }
            div.actions {
                button.primary type="submit" { "Create the install" }
                a href={ "/apps/" (app.id) } { "Cancel" }
            }
        }
    };
    layout(&format!("New install of {}", app.name), Some(web), body)
}

/// The inputs `keep` picks, each in a fieldset of its group (in the order
/// the config declares the groups; those of no group, or of one not
/// declared, first), as typed before (`sent`) or empty: a sensitive one
/// as a password, a boolean as a choice with its default.
pub(super) fn input_fieldsets<'a>(
    config: &AppConfig,
    keep: impl Fn(&InputDecl) -> bool,
    sent: &dyn Fn(&str) -> &'a str,
) -> Markup {
    // Inputs by their group, in the order the config declares the groups;
    // those of no group (or of one not declared) first.
    let mut groups: Vec<(Option<&str>, Vec<&InputDecl>)> = vec![(None, Vec::new())];
    for g in &config.input_groups {
        groups.push((Some(g.name.as_str()), Vec::new()));
    }
    for i in config.inputs.iter().filter(|i| keep(i)) {
        let at = groups
            .iter()
            .position(|(g, _)| g.is_some() && *g == i.group.as_deref())
            .unwrap_or(0);
        groups[at].1.push(i);
    }
    let group_title = |name: &str| {
        let g = config.input_groups.iter().find(|g| g.name == name);
        let title = g.and_then(|g| g.display_name.clone());
        (
            title.unwrap_or_else(|| name.to_owned()),
            g.and_then(|g| g.description.clone()),
        )
    };
    html! {
        @for (group, inputs) in groups.iter().filter(|(_, i)| !i.is_empty()) {
            fieldset {
                @match group {
                    Some(g) => {
                        @let (title, description) = group_title(g);
                        legend { (title) }
                        @if let Some(d) = description { p.muted { (d) } }
                    }
                    None => legend { "Inputs" },
                }
                @for i in inputs {
                    @let id = format!("input-{}", i.name);
                    @let default = i.default.as_ref().map(shown);
                    @let typed = sent(&format!("input.{}", i.name));
                    div.field {
                        label for=(id) {
                            (i.display_name.as_deref().unwrap_or(&i.name)) " " code { (i.name) }
                            @if i.required && default.is_none() { " (required)" }
                        }
                        @if let Some(d) = &i.description { p.muted { (d) } }
                        @if let Some(d) = &default { p.muted { "Left empty: " code { (d) } "." } }
                        @if i.sensitive {
                            input id=(id) type="password" name={ "input." (i.name) } autocomplete="off" required[i.required && default.is_none()];
                        } @else if i.ty == InputType::Bool {
                            select id=(id) name={ "input." (i.name) } {
                                option value="" selected[typed.is_empty()] { "(its default)" }
                                option value="true" selected[typed == "true"] { "true" }
                                option value="false" selected[typed == "false"] { "false" }
                            }
                        } @else {
                            input id=(id) type="text" name={ "input." (i.name) } value=(typed) autocomplete="off" required[i.required && default.is_none()];
                        }
                    }
                }
            }
        }
    }
}

fn shown(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The API's request from the form's fields: an empty input or secret is
/// left out (its default, or a generated value, applies), as is an
/// empty text of own values.
pub(super) fn request(app: &AppInfo, fields: &Fields) -> Result<CreateInstall, String> {
    let approval = match field(fields, "approval").filter(|a| !a.is_empty()) {
        Some(a) => Some(a.parse().map_err(|_| {
            format!("approval {a:?} is not one of approve-all, prompt: pick one of the list")
        })?),
        None => None,
    };
    let mut req = CreateInstall {
        app: app.id.to_string(),
        name: field(fields, "name").unwrap_or_default().trim().to_owned(),
        inputs: BTreeMap::new(),
        secrets: BTreeMap::new(),
        approval,
        labels: BTreeMap::new(),
        components: BTreeMap::new(),
        overrides: BTreeMap::new(),
    };
    for word in field(fields, "labels")
        .unwrap_or_default()
        .split_whitespace()
    {
        let (k, v) = nuon_core::labels::parse_label(word).map_err(|e| format!("labels: {e}"))?;
        req.labels.insert(k, v);
    }
    for (k, v) in fields {
        if v.trim().is_empty() {
            continue;
        }
        if let Some(name) = k.strip_prefix("input.") {
            req.inputs
                .insert(name.to_owned(), serde_json::Value::String(v.clone()));
        } else if let Some(name) = k.strip_prefix("secret.") {
            req.secrets.insert(name.to_owned(), v.clone());
        } else if let Some(name) = k.strip_prefix("helm_values.") {
            // A browser sends a textarea's lines ended by CR LF.
            let o = req.overrides.entry(name.to_owned()).or_default();
            o.helm_values = Some(v.replace("\r\n", "\n"));
        } else if let Some(name) = k.strip_prefix("tf_vars.") {
            let o: &mut ComponentOverride = req.overrides.entry(name.to_owned()).or_default();
            o.tf_vars = Some(v.replace("\r\n", "\n"));
        } else if let Some(name) = k.strip_prefix("toggle.") {
            let on = field(fields, &format!("on.{name}")).is_some();
            req.components.insert(name.to_owned(), on);
        }
    }
    Ok(req)
}

/// The answer: the install, its runner's token (shown only here), and
/// what comes next.
pub(super) fn created(web: &Web, made: &InstallCreated) -> Markup {
    let i = &made.install;
    let api = made.runner_api_url.as_deref().unwrap_or("RUNNER_API_URL");
    let body = html! {
        h1 { "Install " (i.name) " created" }
        p role="status" { "Its runner's token is shown only now: give it to the customer with the command below (or with the install stack, " code { "nuon installs stack " (i.name) } ")." }
        pre id="runner-token" { (made.runner_token) }
        h2 { "Start its runner" }
        pre { "NUON_RUNNER_TOKEN=" (made.runner_token) " nuon-runner run --api " (api) " \\\n    --signing-key " (made.signing_public_key) " \\\n    --work-dir ./nuon-runner-" (i.name) " --vendor-store VENDOR_STORE" }
        h2 { "Then" }
        p { "Provision it from " a href={ "/installs/" (i.id) } { "its page" } ": the provision waits for its runner." }
    };
    layout(&format!("Install {} created", i.name), Some(web), body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(pairs: &[(&str, &str)]) -> Fields {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn app() -> AppInfo {
        serde_json::from_value(serde_json::json!({
            "id": "app_01M8C0AY87516WYXNY8MS8239D", "name": "shop", "created_at_ms": 0,
        }))
        .unwrap()
    }

    /// What the form sends becomes the API's request: empty values are
    /// left to their defaults; a toggle is off unless its box is checked.
    #[test]
    fn the_forms_fields_make_the_apis_request() {
        let req = request(
            &app(),
            &fields(&[
                ("csrf", "x"),
                ("name", " acme "),
                ("approval", "prompt"),
                ("labels", "tier=prod  region=eu"),
                ("input.domain", "acme.example.com"),
                ("input.replicas", ""),
                ("secret.api_key", "k3y"),
                ("secret.generated", ""),
                ("toggle.cache", "1"),
                ("toggle.search", "1"),
                ("on.search", "1"),
                ("helm_values.web", "replicaCount: 3\r\nimage: x\r\n"),
                ("tf_vars.db", ""),
            ]),
        )
        .unwrap();
        assert_eq!(req.name, "acme");
        assert_eq!(req.app, "app_01M8C0AY87516WYXNY8MS8239D");
        assert_eq!(req.approval, Some(nuon_core::model::ApprovalMode::Prompt));
        assert_eq!(
            req.labels,
            BTreeMap::from([
                ("region".into(), "eu".into()),
                ("tier".into(), "prod".into())
            ])
        );
        assert_eq!(
            req.inputs,
            BTreeMap::from([("domain".into(), serde_json::json!("acme.example.com"))])
        );
        assert_eq!(
            req.secrets,
            BTreeMap::from([("api_key".into(), "k3y".into())])
        );
        assert_eq!(
            req.components,
            BTreeMap::from([("cache".into(), false), ("search".into(), true)])
        );
        assert_eq!(req.overrides.len(), 1);
        assert_eq!(
            req.overrides["web"].helm_values.as_deref(),
            Some("replicaCount: 3\nimage: x\n")
        );
        let bad = request(&app(), &fields(&[("name", "a"), ("labels", "tier")])).unwrap_err();
        assert!(bad.starts_with("labels: "), "{bad}");
    }
}
