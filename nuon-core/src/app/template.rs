//! Templates in config values: Go's `text/template` language with sprig
//! ([`crate::template`]), over Nuon's values under `.nuon`:
//!
//! | reference | value |
//! |---|---|
//! | `.nuon.install.id`, `.nuon.install.name` | the install's id and name |
//! | `.nuon.app.id`, `.nuon.app.name`, `.nuon.org.id` | the app and org |
//! | `.nuon.install.inputs.NAME`, `.nuon.inputs.inputs.NAME` | an input of the install |
//! | `.nuon.sandbox.outputs.KEY…` (or `.nuon.install.sandbox.outputs.KEY…`) | an output of the install's sandbox |
//! | `.nuon.components.NAME.outputs.KEY…` (or `.nuon.install.components.…`) | an output of another component (a dependency) |
//! | `.nuon.secrets.NAME` | a secret of the install |
//! | `.nuon.install_stack.outputs.KEY…` | an output of the install stack (arrives at run time; Nuon's contract, [`crate::stack::contract`]) |
//! | `.nuon.cloud_account.aws.region`, `.gcp.project_id`, `.gcp.region`, `.azure.location` | the install's cloud account, from its stack (empty until it phones home) |
//! | `.nuon.id`, `.nuon.name`, `.nuon.org.name`, `.nuon.runner.id`, `.nuon.domain.public_domain`, … | the rest of Nuon's install state ([`STATE_FIELDS`]) |
//! | `.action.inputs.NAME` | a run-time input of the action whose step reads it |
//! | `.nuon.actions.workflows.NAME.outputs.KEY…` | an output an action run wrote (arrives at run time) |
//!
//! Checking happens when a config is validated ([`scan`] parses each value
//! and finds the references read from the root; the config check resolves
//! them); rendering happens on the control plane when a job is dispatched
//! ([`render`]). A value printed as it is that has no value (`{{
//! .nuon.install.inputs.typo }}`) is an error naming it, where Go would
//! print `<no value>`; `{{ .x | default "y" }}` and the like work as in Go.
//! As in Nuon, a value that reads nothing under `.nuon` (or an action's
//! `.action.inputs`) is not a template and is left as written
//! ([`is_template`]).

use std::collections::BTreeMap;

use serde_json::Value;

use crate::template::{Budget, ErrorKind, Template, Value as TValue};

/// What a reference points at.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Reference {
    /// `.nuon.install.id`
    InstallId,
    /// `.nuon.install.name`
    InstallName,
    /// `.nuon.app.id`
    AppId,
    /// `.nuon.app.name`
    AppName,
    /// `.nuon.org.id`
    OrgId,
    /// `.nuon.install.inputs.NAME` or `.nuon.inputs.inputs.NAME`
    Input(String),
    /// `.nuon.sandbox.outputs.KEY…`
    SandboxOutput(Vec<String>),
    /// `.nuon.components.NAME.outputs.KEY…`
    ComponentOutput {
        /// The component.
        component: String,
        /// The path inside its outputs.
        path: Vec<String>,
    },
    /// `.nuon.secrets.NAME`
    Secret(String),
    /// `.nuon.install_stack.outputs.KEY…`
    InstallStackOutput(Vec<String>),
    /// `.nuon.cloud_account.CLOUD.FIELD`
    CloudAccount(Vec<String>),
    /// Another field of Nuon's install state, known when rendering
    /// (`.nuon.org.name`, `.nuon.runner.id`, ...: [`STATE_FIELDS`]).
    State(Vec<String>),
    /// `.nuon.actions.workflows.NAME.outputs.KEY…`
    ActionOutput {
        /// The action.
        workflow: String,
        /// The path inside its outputs.
        path: Vec<String>,
    },
    /// `.action.inputs.NAME`: a run-time input of the action running.
    ActionInput(String),
    /// A whole map of values (`.nuon.install.inputs`, `.nuon.components`),
    /// read by a function such as `index` or `range`.
    Prefix(Vec<String>),
}

/// One field chain a value reads from under `.nuon`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// Byte offset of the chain in the text.
    pub start: usize,
    /// Byte offset just after it.
    pub end: usize,
    /// The chain, as written (`.nuon.install.id`).
    pub written: String,
    /// What it points at.
    pub reference: Reference,
    /// Whether the value is printed as it is (no `default`, `if`, …).
    pub printed: bool,
}

/// A template that does not parse, or a reference that does not resolve.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    /// Byte offset in the text.
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

/// The top-level names under `.nuon`, for suggestions.
pub const ROOTS: &[&str] = &[
    "id",
    "name",
    "runner",
    "domain",
    "install",
    "inputs",
    "app",
    "org",
    "sandbox",
    "components",
    "secrets",
    "install_stack",
    "cloud_account",
    "actions",
];

/// The fields of Nuon's install state (`pkg/types/state`) besides inputs,
/// outputs and secrets, by the object that has them: each renders to what
/// is known here, or to an empty text (`populated` says whether it is).
pub const STATE_FIELDS: &[(&str, &[&str])] = &[
    ("org", &["id", "name", "status", "populated"]),
    ("app", &["id", "name", "status", "populated"]),
    (
        "install",
        &[
            "id",
            "name",
            "public_domain",
            "internal_domain",
            "populated",
        ],
    ),
    ("runner", &["id", "runner_group_id", "status", "populated"]),
    ("domain", &["public_domain", "internal_domain", "populated"]),
    ("sandbox", &["status", "type", "version", "populated"]),
    (
        "install_stack",
        &[
            "populated",
            "status",
            "quick_link_url",
            "template_url",
            "template_json",
            "checksum",
        ],
    ),
    ("inputs", &["populated"]),
    ("actions", &["populated"]),
];

/// Nuon's cloud account fields (`pkg/types/state/cloud_account.go`).
pub const CLOUD_ACCOUNT: &[(&str, &[&str])] = &[
    ("aws", &["region"]),
    ("azure", &["location"]),
    ("gcp", &["project_id", "region"]),
];

fn fields_of(
    table: &[(&'static str, &'static [&'static str])],
    of: &str,
) -> &'static [&'static str] {
    table
        .iter()
        .find(|(o, _)| *o == of)
        .map_or(&[], |(_, f)| *f)
}

fn parse_reference(written: &str, path: &[String]) -> Result<Reference, String> {
    let rest: Vec<&str> = path.iter().map(String::as_str).collect();
    match rest.as_slice() {
        ["action", "inputs", name, ..] => return Ok(Reference::ActionInput(name.to_string())),
        ["action"] | ["action", "inputs"] => {
            return Ok(Reference::Prefix(
                rest.iter().map(|s| s.to_string()).collect(),
            ));
        }
        ["action", ..] => {
            return Err(format!(
                "unknown template reference {written:?}: an action's run-time inputs are .action.inputs.NAME"
            ));
        }
        _ => {}
    }
    if rest.first() != Some(&"nuon") {
        return Err(format!(
            "unknown template reference {written:?}: values are read from under .nuon (for example .nuon.install.inputs.NAME), and an action's run-time inputs from .action.inputs.NAME"
        ));
    }
    let rest = &rest[1..];
    let owned = |s: &[&str]| s.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    let prefix = || Ok(Reference::Prefix(owned(rest)));
    let state = |of: &str, field: &str| fields_of(STATE_FIELDS, of).contains(&field);
    match rest {
        [] => prefix(),
        ["install", "id"] | ["id"] => Ok(Reference::InstallId),
        ["install", "name"] | ["name"] => Ok(Reference::InstallName),
        ["app", "id"] => Ok(Reference::AppId),
        ["app", "name"] => Ok(Reference::AppName),
        ["org", "id"] => Ok(Reference::OrgId),
        [of, field] if state(of, field) => Ok(Reference::State(owned(rest))),
        ["cloud_account"] => prefix(),
        ["cloud_account", cloud, tail @ ..] => {
            let fields = fields_of(CLOUD_ACCOUNT, cloud);
            match tail {
                _ if fields.is_empty() => Err(format!(
                    "unknown template reference {written:?}: .nuon.cloud_account has aws, azure and gcp{}",
                    super::diag::did_you_mean(cloud, CLOUD_ACCOUNT.iter().map(|(c, _)| *c))
                )),
                [] => prefix(),
                [field] if fields.contains(field) => Ok(Reference::CloudAccount(owned(&rest[1..]))),
                [field, ..] => Err(format!(
                    "unknown template reference {written:?}: .nuon.cloud_account.{cloud} has {}{}",
                    fields.join(", "),
                    super::diag::did_you_mean(field, fields.iter().copied())
                )),
            }
        }
        ["install", "inputs", name, ..] | ["inputs", "inputs", name, ..] => {
            Ok(Reference::Input(name.to_string()))
        }
        ["sandbox", "outputs", key @ ..] | ["install", "sandbox", "outputs", key @ ..]
            if !key.is_empty() =>
        {
            Ok(Reference::SandboxOutput(owned(key)))
        }
        ["components", name, tail @ ..] | ["install", "components", name, tail @ ..] => {
            Ok(Reference::ComponentOutput {
                component: name.to_string(),
                path: match tail {
                    ["outputs", key @ ..] => owned(key),
                    _ => Vec::new(),
                },
            })
        }
        ["secrets", name, ..] => Ok(Reference::Secret(name.to_string())),
        ["install_stack", tail @ ..] => Ok(Reference::InstallStackOutput(match tail {
            ["outputs", key @ ..] => owned(key),
            _ => Vec::new(),
        })),
        ["actions", "workflows", name, tail @ ..] => Ok(Reference::ActionOutput {
            workflow: name.to_string(),
            path: match tail {
                ["outputs", key @ ..] => owned(key),
                _ => Vec::new(),
            },
        }),
        ["install"]
        | ["install", "inputs"]
        | ["inputs"]
        | ["inputs", "inputs"]
        | ["sandbox"]
        | ["sandbox", "outputs"]
        | ["install", "sandbox"]
        | ["install", "sandbox", "outputs"]
        | ["components"]
        | ["install", "components"]
        | ["secrets"]
        | ["app"]
        | ["org"]
        | ["runner"]
        | ["domain"]
        | ["actions"]
        | ["actions", "workflows"] => prefix(),
        ["install", other, ..] => {
            let has = ["id", "name", "inputs", "sandbox", "components"]
                .into_iter()
                .chain(
                    fields_of(STATE_FIELDS, "install")
                        .iter()
                        .copied()
                        .filter(|f| !["id", "name"].contains(f)),
                );
            Err(format!(
                "unknown template reference {written:?}: .nuon.install has {}{}",
                has.clone().collect::<Vec<_>>().join(", "),
                super::diag::did_you_mean(other, has)
            ))
        }
        [of @ ("app" | "org" | "runner" | "domain"), other, ..] => {
            let has = fields_of(STATE_FIELDS, of);
            Err(format!(
                "unknown template reference {written:?}: .nuon.{of} has {}{}",
                has.join(", "),
                super::diag::did_you_mean(other, has.iter().copied())
            ))
        }
        ["inputs", other, ..] => Err(format!(
            "unknown template reference {written:?}: write .nuon.install.inputs.NAME (or .nuon.inputs.inputs.NAME){}",
            super::diag::did_you_mean(other, ["inputs"])
        )),
        ["sandbox", ..] => Err(format!(
            "unknown template reference {written:?}: write .nuon.sandbox.outputs.KEY (or .nuon.sandbox.{})",
            fields_of(STATE_FIELDS, "sandbox").join(", .nuon.sandbox.")
        )),
        ["actions", ..] => Err(format!(
            "unknown template reference {written:?}: write .nuon.actions.workflows.NAME.outputs.KEY"
        )),
        [root, ..] => Err(format!(
            "unknown template reference {written:?}{}",
            super::diag::did_you_mean(root, ROOTS.iter().copied())
                .replace("did you mean \"", "did you mean \".nuon.")
        )),
    }
}

/// Whether a value is a template of the config: it has an action and reads
/// something under `.nuon`. As in Nuon, any other text is left as it is
/// (`{{ .Values.x }}` for a chart's own templating, a Kyverno `{{ request.object }}`).
pub fn is_template(text: &str) -> bool {
    text.contains("{{") && (text.contains(".nuon") || text.contains(".action.inputs"))
}

/// Parses `text` as a template: every reference it reads from under
/// `.nuon`, and every problem (a parse error, or a reference that does not
/// resolve).
pub fn scan(text: &str) -> (Vec<Action>, Vec<TemplateError>) {
    let mut actions = Vec::new();
    let mut errors = Vec::new();
    if !is_template(text) {
        return (actions, errors);
    }
    let t = match Template::parse("template", text) {
        Ok(t) => t,
        Err(e) => {
            errors.push(TemplateError {
                offset: e.offset,
                message: e.message,
            });
            return (actions, errors);
        }
    };
    for r in t.references() {
        let written = text[r.offset..r.end].to_string();
        match parse_reference(&written, &r.path) {
            Ok(reference) => actions.push(Action {
                start: r.offset,
                end: r.end,
                written,
                reference,
                printed: r.printed,
            }),
            Err(message) => errors.push(TemplateError {
                offset: r.offset,
                message,
            }),
        }
    }
    (actions, errors)
}

/// Values a template is rendered with.
#[derive(Debug, Clone, Default)]
pub struct RenderContext {
    /// The install's id.
    pub install_id: String,
    /// The install's name.
    pub install_name: String,
    /// The app's id.
    pub app_id: String,
    /// The app's name.
    pub app_name: String,
    /// The org's id.
    pub org_id: String,
    /// The org's name.
    pub org_name: String,
    /// The install's runner's id.
    pub runner_id: String,
    /// The install's inputs.
    pub inputs: BTreeMap<String, Value>,
    /// The sandbox's outputs.
    pub sandbox_outputs: Value,
    /// Each deployed component's outputs.
    pub component_outputs: BTreeMap<String, Value>,
    /// The install's secrets.
    pub secrets: BTreeMap<String, String>,
    /// The install stack's outputs (empty until the stack reports them).
    pub install_stack_outputs: BTreeMap<String, Value>,
    /// Each action's last outputs, by action name.
    pub action_outputs: BTreeMap<String, Value>,
    /// The run-time inputs of the action being rendered (`.action.inputs`).
    pub action_inputs: BTreeMap<String, String>,
    /// The work every render with this context (and its clones) may do
    /// together: one job's values share one budget.
    pub budget: Budget,
}

impl RenderContext {
    /// The data a template sees: everything under `nuon`.
    pub fn data(&self) -> TValue {
        let obj = |pairs: Vec<(&str, Value)>| -> Value {
            Value::Object(pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect())
        };
        let map = |m: &BTreeMap<String, Value>| -> Value {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        };
        let outputs = |v: &Value| match v {
            Value::Null => Value::Object(Default::default()),
            v => v.clone(),
        };
        let inputs = map(&self.inputs);
        let sandbox = obj(vec![("outputs", outputs(&self.sandbox_outputs))]);
        let components = Value::Object(
            self.component_outputs
                .iter()
                .map(|(k, v)| (k.clone(), obj(vec![("outputs", outputs(v))])))
                .collect(),
        );
        let secrets = Value::Object(
            self.secrets
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        );
        let workflows = Value::Object(
            self.action_outputs
                .iter()
                .map(|(k, v)| (k.clone(), obj(vec![("outputs", outputs(v))])))
                .collect(),
        );
        let text = |s: &str| Value::String(s.to_owned());
        let stack = &self.install_stack_outputs;
        let stack_populated = !stack.is_empty();
        let sandbox_populated = !outputs(&self.sandbox_outputs)
            .as_object()
            .is_none_or(|o| o.is_empty());
        // Nuon's state (`pkg/types/state`): every object it has, each field
        // what is known here or empty, `populated` saying which.
        let mut sandbox = sandbox;
        if let Value::Object(s) = &mut sandbox {
            for (k, v) in [
                ("populated", Value::Bool(sandbox_populated)),
                (
                    "status",
                    text(if sandbox_populated { "active" } else { "" }),
                ),
                ("type", text("")),
                ("version", text("")),
                ("recent_runs", Value::Array(Vec::new())),
            ] {
                s.insert(k.into(), v);
            }
        }
        let domain = |f: &str| text(stack.get(f).and_then(Value::as_str).unwrap_or(""));
        let nuon = obj(vec![
            ("id", text(&self.install_id)),
            ("name", text(&self.install_name)),
            (
                "install",
                obj(vec![
                    ("id", text(&self.install_id)),
                    ("name", text(&self.install_name)),
                    ("populated", Value::Bool(true)),
                    ("public_domain", domain("public_domain")),
                    ("internal_domain", domain("internal_domain")),
                    ("inputs", inputs.clone()),
                    ("sandbox", sandbox.clone()),
                    ("components", components.clone()),
                ]),
            ),
            (
                "inputs",
                obj(vec![("inputs", inputs), ("populated", Value::Bool(true))]),
            ),
            (
                "app",
                obj(vec![
                    ("id", text(&self.app_id)),
                    ("name", text(&self.app_name)),
                    ("status", text("active")),
                    ("populated", Value::Bool(true)),
                ]),
            ),
            (
                "org",
                obj(vec![
                    ("id", text(&self.org_id)),
                    ("name", text(&self.org_name)),
                    ("status", text("active")),
                    ("populated", Value::Bool(true)),
                ]),
            ),
            (
                "runner",
                obj(vec![
                    ("id", text(&self.runner_id)),
                    ("runner_group_id", text("")),
                    ("status", text(if stack_populated { "active" } else { "" })),
                    ("populated", Value::Bool(!self.runner_id.is_empty())),
                ]),
            ),
            (
                "domain",
                obj(vec![
                    ("public_domain", domain("public_domain")),
                    ("internal_domain", domain("internal_domain")),
                    (
                        "populated",
                        Value::Bool(stack.contains_key("public_domain")),
                    ),
                ]),
            ),
            ("sandbox", sandbox),
            ("components", components),
            ("secrets", secrets),
            (
                "install_stack",
                obj(vec![
                    ("outputs", map(stack)),
                    ("populated", Value::Bool(stack_populated)),
                    ("status", text(if stack_populated { "active" } else { "" })),
                    ("quick_link_url", text("")),
                    ("template_url", text("")),
                    ("template_json", text("")),
                    ("checksum", text("")),
                ]),
            ),
            ("cloud_account", cloud_account(stack)),
            (
                "actions",
                obj(vec![
                    ("workflows", workflows),
                    ("populated", Value::Bool(true)),
                ]),
            ),
        ]);
        let action_inputs = Value::Object(
            self.action_inputs
                .iter()
                .map(|(k, v)| (k.clone(), text(v)))
                .collect(),
        );
        TValue::from_json(&obj(vec![
            ("nuon", nuon),
            ("action", obj(vec![("inputs", action_inputs)])),
        ]))
    }
}

/// Nuon's `.nuon.cloud_account`: `aws.region`, `azure.location`,
/// `gcp.project_id` and `gcp.region`, from the stack's outputs; every one
/// there (empty until the stack phones home), as in Nuon.
pub fn cloud_account(outputs: &BTreeMap<String, Value>) -> Value {
    let text = |k: &str| outputs.get(k).and_then(Value::as_str).unwrap_or("");
    // Outputs kept before `phone_home_type` was: told by what they have.
    let kind = match text("phone_home_type") {
        "" if outputs.contains_key("account_id") => "aws",
        "" if outputs.contains_key("project_id") => "gcp",
        "" if outputs.contains_key("location") => "azure",
        k => k,
    };
    let on = |cloud: &str, k: &str| Value::String(if kind == cloud { text(k) } else { "" }.into());
    serde_json::json!({
        "aws": {"region": on("aws", "region")},
        "azure": {"location": on("azure", "location")},
        "gcp": {"project_id": on("gcp", "project_id"), "region": on("gcp", "region")},
    })
}

/// What Terraform shows for a value it will know only after an apply;
/// a field of it, or an index into it, renders as it again.
pub const KNOWN_AFTER_APPLY: &str = "(known after apply)";

/// Renders `text` with the install's values. A value printed as it is that
/// has no value is an error naming it.
pub fn render(text: &str, ctx: &RenderContext) -> Result<String, TemplateError> {
    if !is_template(text) {
        return Ok(text.to_string());
    }
    render_with(text, ctx, &ctx.data())
}

/// [`render`] with `data`, the [`RenderContext::data`] of `ctx` made once
/// for many renders (making it is most of a short render's time).
pub fn render_with(
    text: &str,
    ctx: &RenderContext,
    data: &TValue,
) -> Result<String, TemplateError> {
    if !is_template(text) {
        return Ok(text.to_string());
    }
    let err = |e: crate::template::Error| TemplateError {
        offset: e.offset,
        message: e.message,
    };
    let t = Template::parse("template", text)
        .map_err(err)?
        .no_value_is_error(true)
        .unknown(KNOWN_AFTER_APPLY)
        .max_output(16 << 20)
        .budget(ctx.budget.clone());
    t.execute(data).map_err(err)
}

/// Renders `text` once with no install's values (each reads as empty or
/// missing), under `budget`, to find a template that would exhaust any
/// budget whatever the install: the error when it does, `None` otherwise
/// (other errors are the install's values' to decide, at render).
pub fn exhausts_budget(text: &str, budget: &Budget) -> Option<TemplateError> {
    if !is_template(text) {
        return None;
    }
    let t = Template::parse("template", text)
        .ok()?
        .max_output(16 << 20)
        .budget(budget.clone());
    match t.execute(&RenderContext::default().data()) {
        Err(e) if e.kind == ErrorKind::Budget => Some(TemplateError {
            offset: e.offset,
            message: e.message,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refs(text: &str) -> Vec<Reference> {
        let (a, e) = scan(text);
        assert!(e.is_empty(), "{e:?}");
        a.into_iter().map(|a| a.reference).collect()
    }

    fn err(text: &str) -> String {
        let (_, e) = scan(text);
        assert_eq!(e.len(), 1, "{text}: {e:?}");
        e[0].message.clone()
    }

    #[test]
    fn references_are_recognised() {
        assert_eq!(
            refs("id={{ .nuon.install.id }} r={{.nuon.install.inputs.region}}"),
            [Reference::InstallId, Reference::Input("region".into())]
        );
        assert_eq!(
            refs("{{- .nuon.inputs.inputs.x -}}{{ .nuon.secrets.db_password }}"),
            [
                Reference::Input("x".into()),
                Reference::Secret("db_password".into())
            ]
        );
        assert_eq!(
            refs("{{ .nuon.components.db.outputs.endpoint.host }}"),
            [Reference::ComponentOutput {
                component: "db".into(),
                path: vec!["endpoint".into(), "host".into()]
            }]
        );
        assert_eq!(
            refs("{{ .nuon.sandbox.outputs.vpc_id | default \"none\" }}"),
            [Reference::SandboxOutput(vec!["vpc_id".into()])]
        );
        assert_eq!(
            refs(
                "{{ join \",\" (splitList \",\" .nuon.install.inputs.tags) }}{{ with .nuon.sandbox.outputs.cluster }}{{ .name }}{{ end }}"
            ),
            [
                Reference::Input("tags".into()),
                Reference::SandboxOutput(vec!["cluster".into()])
            ]
        );
        assert_eq!(
            refs("{{ index .nuon.components \"db\" }}{{ $.nuon.install_stack.outputs.role_arn }}"),
            [
                Reference::Prefix(vec!["components".into()]),
                Reference::InstallStackOutput(vec!["role_arn".into()])
            ]
        );
        assert_eq!(
            refs("{{ .nuon.actions.workflows.migrate.outputs.version }}"),
            [Reference::ActionOutput {
                workflow: "migrate".into(),
                path: vec!["version".into()]
            }]
        );
        assert!(refs("no templates { here }").is_empty());
    }

    #[test]
    fn bad_templates_say_why() {
        assert!(err("{{ .nuon.install.id").contains("unclosed action"));
        assert!(
            err("{{ .nuon.compnents.db.outputs.x }}")
                .contains("did you mean \".nuon.components\"?")
        );
        assert!(err("{{ .nuon.install.inptus.x }}").contains("did you mean \"inputs\"?"));
        assert!(err("{{ .Values.x }}{{ .nuon.app.id }}").contains("under .nuon"));
        assert!(
            scan("{{ .Values.x }}").1.is_empty(),
            "no .nuon: left as written"
        );
        assert!(err("{{ nosuch .nuon.install.id }}").contains("function \"nosuch\" not defined"));
        assert!(err("{{ env \"HOME\" }}{{ .nuon.app.id }}").contains("never its environment"));
        assert!(err("{{ }}{{ .nuon.app.id }}").contains("missing value"));
    }

    #[test]
    fn rendering_fills_values_and_defaults() {
        let mut ctx = RenderContext {
            install_id: "inst_1".into(),
            ..Default::default()
        };
        ctx.inputs.insert("replicas".into(), Value::from("3"));
        ctx.inputs.insert("tags".into(), Value::from("a,b"));
        ctx.component_outputs.insert(
            "db".into(),
            serde_json::json!({"endpoint": {"host": "db.local"}, "ports": [5432]}),
        );
        ctx.secrets.insert("pw".into(), "hunter2".into());
        let out = render(
            "{{ .nuon.install.id }}/{{ .nuon.install.inputs.replicas }}/{{ .nuon.components.db.outputs.endpoint.host }}:{{ index .nuon.components.db.outputs.ports 0 }}/{{ .nuon.secrets.pw }}/{{ .nuon.sandbox.outputs.x | default \"d\" }}/{{ join \"+\" (splitList \",\" .nuon.install.inputs.tags) | upper }}",
            &ctx,
        )
        .unwrap();
        assert_eq!(out, "inst_1/3/db.local:5432/hunter2/d/A+B");
        let e = render("a {{ .nuon.sandbox.outputs.vpc }}", &ctx).unwrap_err();
        assert_eq!(e.offset, 5);
        assert!(
            e.message
                .ends_with(".nuon.sandbox.outputs.vpc has no value"),
            "{}",
            e.message
        );
    }

    #[test]
    fn nuons_whole_state_is_read_and_rendered() {
        // What Nuon's state has, read as Nuon's templates read it.
        assert_eq!(
            refs("{{ .nuon.id }}-{{ .nuon.name }}-{{ .nuon.org.name }}-{{ .nuon.runner.id }}"),
            [
                Reference::InstallId,
                Reference::InstallName,
                Reference::State(vec!["org".into(), "name".into()]),
                Reference::State(vec!["runner".into(), "id".into()]),
            ]
        );
        assert_eq!(
            refs("{{ .nuon.domain.public_domain }}{{ .nuon.cloud_account.aws.region }}"),
            [
                Reference::State(vec!["domain".into(), "public_domain".into()]),
                Reference::CloudAccount(vec!["aws".into(), "region".into()]),
            ]
        );
        // Suggestions are real alternatives, never the key refused.
        let e = err("{{ .nuon.org.nmae }}");
        assert!(e.contains("did you mean \"name\"?"), "{e}");
        assert!(
            e.contains(".nuon.org has id, name, status, populated"),
            "{e}"
        );
        let e = err("{{ .nuon.cloud_account.aws.regoin }}");
        assert!(e.contains("did you mean \"region\"?"), "{e}");
        let e = err("{{ .nuon.cloud_account.amazon.region }}");
        assert!(e.contains("aws, azure and gcp"), "{e}");
        let e = err("{{ .nuon.runner.group }}");
        assert!(e.contains("id, runner_group_id, status, populated"), "{e}");

        let mut ctx = RenderContext {
            install_id: "inst_1".into(),
            install_name: "acme".into(),
            org_name: "vendor".into(),
            runner_id: "run_1".into(),
            ..Default::default()
        };
        // Before the stack phones home: every field there, empty.
        let out = render(
            "[{{ .nuon.cloud_account.aws.region }}][{{ .nuon.cloud_account.gcp.project_id }}][{{ .nuon.install_stack.populated }}][{{ .nuon.domain.public_domain }}]",
            &ctx,
        )
        .unwrap();
        assert_eq!(out, "[][][false][]");
        ctx.install_stack_outputs = crate::stack::contract::nuon_outputs(
            &[
                ("region".to_owned(), "eu-west-1".to_owned()),
                ("account_id".to_owned(), "1".to_owned()),
            ]
            .into_iter()
            .collect(),
            "aws",
            &Default::default(),
        );
        let out = render(
            "{{ .nuon.id }}/{{ .nuon.name }}/{{ .nuon.org.name }}/{{ .nuon.runner.id }}/{{ .nuon.cloud_account.aws.region }}/{{ len .nuon.install_stack.outputs.break_glass_role_arns }}/{{ .nuon.install_stack.populated }}",
            &ctx,
        )
        .unwrap();
        assert_eq!(out, "inst_1/acme/vendor/run_1/eu-west-1/0/true");
    }

    #[test]
    fn an_actions_run_time_inputs_are_read_as_nuon_reads_them() {
        assert_eq!(
            refs("echo {{ .action.inputs.who }}"),
            [Reference::ActionInput("who".into())]
        );
        assert!(err("{{ .action.outputs.x }}{{ .nuon.app.id }}").contains(".action.inputs.NAME"));
        // Without .nuon or .action.inputs, not a template: left as written.
        assert!(scan("{{ .action.outputs.x }}").0.is_empty());
        let mut ctx = RenderContext::default();
        ctx.action_inputs.insert("who".into(), "world".into());
        assert_eq!(
            render(
                "echo {{ .action.inputs.who }} {{ .action.inputs.level | default \"info\" }}",
                &ctx
            )
            .unwrap(),
            "echo world info"
        );
        let e = render("{{ .action.inputs.nope }}", &ctx).unwrap_err();
        assert!(
            e.message.contains(".action.inputs.nope has no value"),
            "{}",
            e.message
        );
    }
}
