//! Nuon's template syntax in config values: `{{ .nuon.install.inputs.region }}`.
//!
//! A value may hold any number of actions `{{ … }}` (with Go's `{{-`/`-}}`
//! trim markers accepted and ignored). An action is one reference, optionally
//! piped into `default "fallback"`:
//!
//! | reference | value |
//! |---|---|
//! | `.nuon.install.id`, `.nuon.install.name` | the install's id and name |
//! | `.nuon.app.id`, `.nuon.app.name`, `.nuon.org.id` | the app and org |
//! | `.nuon.install.inputs.NAME`, `.nuon.inputs.inputs.NAME` | an input of the install |
//! | `.nuon.sandbox.outputs.KEY…` (or `.nuon.install.sandbox.outputs.KEY…`) | an output of the install's sandbox |
//! | `.nuon.components.NAME.outputs.KEY…` (or `.nuon.install.components.…`) | an output of another component (a dependency) |
//! | `.nuon.secrets.NAME` | a secret of the install |
//!
//! Checking happens when a config is validated ([`scan`] finds the
//! references, the config check resolves them); rendering happens on the
//! control plane when a job is dispatched ([`render`]).

use std::collections::BTreeMap;

use serde_json::Value;

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
}

/// One `{{ … }}` of a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Action {
    /// Byte offset of `{{` in the text.
    pub start: usize,
    /// Byte offset just after `}}`.
    pub end: usize,
    /// The reference, as written (`.nuon.install.id`).
    pub written: String,
    /// What it points at.
    pub reference: Reference,
    /// The `default "…"` fallback, if any.
    pub default: Option<String>,
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
    "install",
    "inputs",
    "app",
    "org",
    "sandbox",
    "components",
    "secrets",
];

/// Nuon values we do not provide yet.
const NOT_YET: &[&str] = &["install_stack", "cloud_account", "runner", "actions"];

fn parse_reference(path: &str) -> Result<Reference, String> {
    let parts: Vec<&str> = path.trim_start_matches('.').split('.').collect();
    if parts.first() != Some(&"nuon") {
        return Err(format!(
            "unknown template reference {path:?}: values are read from under .nuon (for example .nuon.install.inputs.NAME)"
        ));
    }
    let rest = &parts[1..];
    let owned = |s: &[&str]| s.iter().map(|p| p.to_string()).collect::<Vec<_>>();
    let bad = |hint: &str| Err(format!("template reference {path:?} is incomplete: {hint}"));
    match rest {
        ["install", "id"] => Ok(Reference::InstallId),
        ["install", "name"] => Ok(Reference::InstallName),
        ["app", "id"] => Ok(Reference::AppId),
        ["app", "name"] => Ok(Reference::AppName),
        ["org", "id"] => Ok(Reference::OrgId),
        ["install", "inputs", name] | ["inputs", "inputs", name] => {
            Ok(Reference::Input(name.to_string()))
        }
        ["install", "inputs", ..] | ["inputs", ..] => {
            bad("write .nuon.install.inputs.NAME, one input name")
        }
        // Nuon's older spellings, still common in its example configs.
        ["sandbox", "outputs", key @ ..] | ["install", "sandbox", "outputs", key @ ..]
            if !key.is_empty() =>
        {
            Ok(Reference::SandboxOutput(owned(key)))
        }
        ["sandbox", ..] => bad("write .nuon.sandbox.outputs.KEY"),
        ["components", name, "outputs", key @ ..]
        | ["install", "components", name, "outputs", key @ ..]
            if !key.is_empty() =>
        {
            Ok(Reference::ComponentOutput {
                component: name.to_string(),
                path: owned(key),
            })
        }
        ["components", ..] => bad("write .nuon.components.NAME.outputs.KEY"),
        ["secrets", name] => Ok(Reference::Secret(name.to_string())),
        ["secrets", ..] => bad("write .nuon.secrets.NAME, one secret name"),
        ["install", other, ..] => Err(format!(
            "unknown template reference {path:?}: .nuon.install has id, name, inputs, sandbox and components{}",
            super::diag::did_you_mean(other, ["id", "name", "inputs", "sandbox", "components"])
        )),
        [root, ..] if NOT_YET.contains(root) => Err(format!(
            "template reference {path:?} is a Nuon value not provided here yet"
        )),
        [root, ..] => Err(format!(
            "unknown template reference {path:?}{}",
            super::diag::did_you_mean(root, ROOTS.iter().copied())
                .replace("did you mean \"", "did you mean \".nuon.")
        )),
        [] => bad("name a value under .nuon"),
    }
}

/// Splits the inside of an action into words, keeping quoted strings whole.
fn words(inner: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = inner.char_indices().peekable();
    while let Some(&(_, c)) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
            continue;
        }
        if c == '|' {
            chars.next();
            out.push("|".into());
            continue;
        }
        if c == '"' {
            chars.next();
            let mut s = String::from("\"");
            let mut closed = false;
            while let Some((_, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            s.push(match n {
                                'n' => '\n',
                                't' => '\t',
                                other => other,
                            });
                        }
                    }
                    '"' => {
                        closed = true;
                        break;
                    }
                    other => s.push(other),
                }
            }
            if !closed {
                return Err("unterminated string in template".into());
            }
            out.push(s);
            continue;
        }
        let mut w = String::new();
        while let Some(&(_, c)) = chars.peek() {
            if c.is_whitespace() || c == '|' || c == '"' {
                break;
            }
            w.push(c);
            chars.next();
        }
        out.push(w);
    }
    Ok(out)
}

fn parse_action(inner: &str) -> Result<(String, Reference, Option<String>), String> {
    let inner = inner.strip_prefix('-').unwrap_or(inner);
    let inner = inner.strip_suffix('-').unwrap_or(inner);
    let words = words(inner)?;
    let (reference, rest) = match words.split_first() {
        Some((r, rest)) if r.starts_with('.') => (r, rest),
        Some((f, _)) => {
            return Err(format!(
                "template function {f:?} is not supported: an action is a reference under .nuon, optionally piped to `default \"value\"`"
            ));
        }
        None => return Err("empty template action {{ }}".into()),
    };
    let parsed = parse_reference(reference)?;
    let default = match rest {
        [] => None,
        [pipe, f, lit] if pipe == "|" && f == "default" && lit.starts_with('"') => {
            Some(lit[1..].to_string())
        }
        [pipe, f, ..] if pipe == "|" => {
            return Err(format!(
                "template function {f:?} is not supported: only `| default \"value\"` is"
            ));
        }
        _ => {
            return Err(format!(
                "unexpected {:?} after the reference {reference}",
                rest.join(" ")
            ));
        }
    };
    Ok((reference.clone(), parsed, default))
}

/// Every action of `text`, or the first problem of each bad one.
pub fn scan(text: &str) -> (Vec<Action>, Vec<TemplateError>) {
    let mut actions = Vec::new();
    let mut errors = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find("{{") {
        let start = from + i;
        let Some(j) = text[start + 2..].find("}}") else {
            errors.push(TemplateError {
                offset: start,
                message: "unclosed template action: \"{{\" without \"}}\"".into(),
            });
            break;
        };
        let end = start + 2 + j + 2;
        match parse_action(&text[start + 2..end - 2]) {
            Ok((written, reference, default)) => actions.push(Action {
                start,
                end,
                written,
                reference,
                default,
            }),
            Err(message) => errors.push(TemplateError {
                offset: start,
                message,
            }),
        }
        from = end;
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
    /// The install's inputs.
    pub inputs: BTreeMap<String, Value>,
    /// The sandbox's outputs.
    pub sandbox_outputs: Value,
    /// Each deployed component's outputs.
    pub component_outputs: BTreeMap<String, Value>,
    /// The install's secrets.
    pub secrets: BTreeMap<String, String>,
}

fn lookup<'v>(mut v: &'v Value, path: &[String]) -> Option<&'v Value> {
    for p in path {
        v = match v {
            Value::Object(m) => m.get(p)?,
            Value::Array(a) => a.get(p.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(v)
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Renders `text`: every action replaced by the value it names. A value that
/// is missing and has no default is an error naming the reference.
pub fn render(text: &str, ctx: &RenderContext) -> Result<String, TemplateError> {
    let (actions, errors) = scan(text);
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for a in actions {
        out.push_str(&text[at..a.start]);
        let found: Option<String> = match &a.reference {
            Reference::InstallId => Some(ctx.install_id.clone()),
            Reference::InstallName => Some(ctx.install_name.clone()),
            Reference::AppId => Some(ctx.app_id.clone()),
            Reference::AppName => Some(ctx.app_name.clone()),
            Reference::OrgId => Some(ctx.org_id.clone()),
            Reference::Input(n) => ctx.inputs.get(n).map(text_of),
            Reference::SandboxOutput(p) => lookup(&ctx.sandbox_outputs, p).map(text_of),
            Reference::ComponentOutput { component, path } => ctx
                .component_outputs
                .get(component)
                .and_then(|o| lookup(o, path))
                .map(text_of),
            Reference::Secret(n) => ctx.secrets.get(n).cloned(),
        };
        match found.or_else(|| a.default.clone()) {
            Some(v) => out.push_str(&v),
            None => {
                return Err(TemplateError {
                    offset: a.start,
                    message: format!("{} has no value", a.written),
                });
            }
        }
        at = a.end;
    }
    out.push_str(&text[at..]);
    Ok(out)
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
                "{{.nuon.install.sandbox.outputs.dns.zone}}{{ .nuon.install.components.db.outputs.url }}"
            ),
            [
                Reference::SandboxOutput(vec!["dns".into(), "zone".into()]),
                Reference::ComponentOutput {
                    component: "db".into(),
                    path: vec!["url".into()]
                }
            ]
        );
        assert!(refs("no templates { here }").is_empty());
    }

    #[test]
    fn bad_templates_say_why() {
        assert!(err("{{ .nuon.install.id").contains("unclosed"));
        assert!(
            err("{{ .nuon.compnents.db.outputs.x }}")
                .contains("did you mean \".nuon.components\"?")
        );
        assert!(err("{{ .nuon.install.inptus.x }}").contains("did you mean \"inputs\"?"));
        assert!(err("{{ .Values.x }}").contains("under .nuon"));
        assert!(err("{{ toJson .nuon.install.id }}").contains("\"toJson\" is not supported"));
        assert!(err("{{ .nuon.install.id | upper }}").contains("\"upper\" is not supported"));
        assert!(err("{{ .nuon.components.db }}").contains("incomplete"));
        assert!(err("{{ .nuon.install_stack.outputs.x }}").contains("not provided here yet"));
        assert!(err("{{ }}").contains("empty"));
    }

    #[test]
    fn rendering_fills_values_and_defaults() {
        let mut ctx = RenderContext {
            install_id: "inst_1".into(),
            ..Default::default()
        };
        ctx.inputs.insert("replicas".into(), Value::from(3));
        ctx.component_outputs.insert(
            "db".into(),
            serde_json::json!({"endpoint": {"host": "db.local"}, "ports": [5432]}),
        );
        ctx.secrets.insert("pw".into(), "hunter2".into());
        let out = render(
            "{{ .nuon.install.id }}/{{ .nuon.install.inputs.replicas }}/{{ .nuon.components.db.outputs.endpoint.host }}:{{ .nuon.components.db.outputs.ports.0 }}/{{ .nuon.secrets.pw }}/{{ .nuon.sandbox.outputs.x | default \"d\" }}",
            &ctx,
        )
        .unwrap();
        assert_eq!(out, "inst_1/3/db.local:5432/hunter2/d");
        let e = render("a {{ .nuon.sandbox.outputs.vpc }}", &ctx).unwrap_err();
        assert_eq!(
            (e.offset, e.message.as_str()),
            (2, ".nuon.sandbox.outputs.vpc has no value")
        );
    }
}
