//! An install's own values for its components, over the app config's
//! (Nuon's `[components.NAME]` of an install file): Helm values deep-merged
//! over a chart's, and a `.tfvars` file read last by a Terraform module.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use super::template::{self, Reference};
use super::{AppConfig, ComponentKind, did_you_mean};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What is wrong with `o` as `component`'s override in `config`, each
/// problem a sentence that says how to fix it (empty: it may be set).
pub fn override_problems(
    config: &AppConfig,
    component: &str,
    o: &ComponentOverride,
) -> Vec<String> {
    let Some(c) = config.component(component) else {
        return vec![format!(
            "the app has no component {component:?}{}",
            did_you_mean(component, config.components.iter().map(|c| c.name.as_str()))
        )];
    };
    let mut out = Vec::new();
    if o.helm_values.is_some() && c.kind() != ComponentKind::HelmChart {
        out.push(format!(
            "helm_values: component {component} is a {}, not a helm_chart (a terraform_module takes tf_vars)",
            c.kind().as_str()
        ));
    }
    if o.tf_vars.is_some() && c.kind() != ComponentKind::TerraformModule {
        out.push(format!(
            "tf_vars: component {component} is a {}, not a terraform_module (a helm_chart takes helm_values)",
            c.kind().as_str()
        ));
    }
    let before = config.dependencies_of(component);
    for (key, text) in [("helm_values", &o.helm_values), ("tf_vars", &o.tf_vars)] {
        let Some(text) = text else { continue };
        let (actions, errors) = template::scan(text);
        for e in errors {
            out.push(format!("{key}: {} (at byte {})", e.message, e.offset));
        }
        for a in &actions {
            if let Some(p) = reference_problem(config, component, &before, &a.reference) {
                out.push(format!("{key}: {} {p}", a.written));
            }
        }
        // A template is checked once rendered; plain text now.
        if template::is_template(text) {
            continue;
        }
        let checked = match key {
            "helm_values" => yaml_mapping(text).map(drop),
            _ => tf_vars_file(text).map(drop),
        };
        if let Err(e) = checked {
            out.push(format!("{key}: {e}"));
        }
    }
    out
}

/// Why a reference of an override cannot be rendered when its component
/// deploys, if it cannot.
fn reference_problem(
    config: &AppConfig,
    component: &str,
    before: &BTreeSet<&str>,
    r: &Reference,
) -> Option<String> {
    match r {
        Reference::Input(n) if config.input(n).is_none() => Some(format!(
            "reads unknown input {n:?}{}",
            did_you_mean(n, config.inputs.iter().map(|i| i.name.as_str()))
        )),
        Reference::Secret(n) if !config.secrets.iter().any(|s| s.name == *n) => Some(format!(
            "reads unknown secret {n:?}{}",
            did_you_mean(n, config.secrets.iter().map(|s| s.name.as_str()))
        )),
        Reference::ComponentOutput { component: of, .. } if config.component(of).is_none() => {
            Some(format!(
                "reads unknown component {of:?}{}",
                did_you_mean(of, config.components.iter().map(|c| c.name.as_str()))
            ))
        }
        Reference::ComponentOutput { component: of, .. } if !before.contains(of.as_str()) => {
            Some(format!(
                "reads the outputs of {of}, which {component} does not depend on: it may deploy first (add {of:?} to {component}'s dependencies in the app config)"
            ))
        }
        Reference::ActionOutput {
            workflow: action, ..
        } if config.action(action).is_none() => Some(format!(
            "reads unknown action {action:?}{}",
            did_you_mean(action, config.actions.iter().map(|a| a.name.as_str()))
        )),
        _ => None,
    }
}

/// The mapping a Helm values text holds (empty text: nothing).
pub fn yaml_mapping(text: &str) -> Result<Map<String, Value>, String> {
    let mut docs = crate::policy::manifest_objects(text).map_err(|e| {
        format!(
            "{} (it must be YAML)",
            e.replace("the manifests", "the values")
        )
    })?;
    match (docs.len(), docs.pop()) {
        (0, _) => Ok(Map::new()),
        (1, Some(Value::Object(m))) => Ok(m),
        (1, Some(other)) => Err(format!(
            "the values are a YAML {}, not a mapping of keys to values (write `key: value` lines)",
            kind_of(&other)
        )),
        _ => Err("the values hold more than one YAML document; give one".into()),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "list",
        Value::Object(_) => "mapping",
    }
}

/// Merges `over` into `values` as a later Helm values file does: mappings
/// key by key, all else (lists too) replaced.
pub fn merge_values(values: &mut Map<String, Value>, over: Map<String, Value>) {
    for (k, v) in over {
        match (values.get_mut(&k), v) {
            (Some(Value::Object(mine)), Value::Object(theirs)) => merge_values(mine, theirs),
            (_, v) => {
                values.insert(k, v);
            }
        }
    }
}

/// The `.tfvars` file of an override: HCL as written, or a JSON object
/// written as HCL (a `.tfvars` file is not JSON).
pub fn tf_vars_file(text: &str) -> Result<String, String> {
    let trimmed = text.trim_start();
    if !trimmed.starts_with('{') {
        return Ok(text.to_owned());
    }
    let Ok(Value::Object(m)) = serde_json::from_str::<Value>(trimmed) else {
        return Err(
            "tf_vars starts with `{` but is not a JSON object: write a JSON object of variables, or HCL (`name = \"value\"` lines)".into(),
        );
    };
    let mut out = String::new();
    for (k, v) in &m {
        let ident = k.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !ident {
            return Err(format!(
                "tf_vars: {k:?} is not a Terraform variable name (letters, digits, _ and -, not starting with a digit)"
            ));
        }
        out.push_str(k);
        out.push_str(" = ");
        hcl_value(v, &mut out);
        out.push('\n');
    }
    Ok(out)
}

/// A JSON value as an HCL expression.
fn hcl_value(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => hcl_string(s, out),
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                hcl_value(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                hcl_string(k, out);
                out.push_str(" = ");
                hcl_value(x, out);
            }
            out.push('}');
        }
    }
}

/// A quoted HCL string: escapes as JSON's, and `${`/`%{` kept literal.
fn hcl_string(s: &str, out: &mut String) {
    out.push('"');
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '$' | '%' if chars.peek() == Some(&'{') => {
                out.push(c);
                out.push(c);
            }
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// An install's own values for one of its components, over the app
/// config's: Nuon's `[components.NAME]` of an install file. Both are
/// templates, rendered as the component's values are.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ComponentOverride {
    /// YAML for a `helm_chart` component, deep-merged over its values
    /// (its values files and `[values]`); it wins where both set a key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm_values: Option<String>,
    /// A `.tfvars` file (HCL, or a JSON object) for a `terraform_module`
    /// component, read after its `[vars]` and var files, so it wins.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf_vars: Option<String>,
}

impl ComponentOverride {
    /// Whether it sets nothing (an empty text is nothing).
    pub fn is_empty(&self) -> bool {
        self.helm_values
            .as_deref()
            .is_none_or(|t| t.trim().is_empty())
            && self.tf_vars.as_deref().is_none_or(|t| t.trim().is_empty())
    }

    /// What it sets, an empty text left out; `None` when it sets nothing.
    pub fn normalized(&self) -> Option<ComponentOverride> {
        let keep = |t: &Option<String>| t.clone().filter(|t| !t.trim().is_empty());
        let o = ComponentOverride {
            helm_values: keep(&self.helm_values),
            tf_vars: keep(&self.tf_vars),
        };
        (!o.is_empty()).then_some(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_merge_key_by_key_and_the_override_wins() {
        let mut v = json!({"image": {"tag": "1", "repo": "r"}, "hosts": ["a", "b"], "n": 1})
            .as_object()
            .cloned()
            .unwrap();
        let over = yaml_mapping("image:\n  tag: \"2\"\nhosts: [c]\nextra:\n  on: true\n").unwrap();
        // A YAML bomb (aliases of aliases, "billion laughs") and a deep
        // nesting are refused by the parser's own limits, at once.
        let mut bomb = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        for (i, name) in ["b", "c", "d", "e", "f", "g", "h", "i"].iter().enumerate() {
            let prev = ["a", "b", "c", "d", "e", "f", "g", "h"][i];
            bomb.push_str(&format!("{name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"));
        }
        let e = yaml_mapping(&bomb).unwrap_err();
        assert!(e.contains("repetition limit"), "{e}");
        let deep = format!("a: {}1{}\n", "[".repeat(100_000), "]".repeat(100_000));
        let e = yaml_mapping(&deep).unwrap_err();
        assert!(e.contains("deeper than 128"), "{e}");
        // Brackets in quotes are text, up to the same depth.
        let quoted = format!("a: \"{}\"\n", "[".repeat(100));
        assert_eq!(yaml_mapping(&quoted).unwrap()["a"], "[".repeat(100));
        merge_values(&mut v, over);
        assert_eq!(
            Value::Object(v),
            json!({"image": {"tag": "2", "repo": "r"}, "hosts": ["c"], "n": 1, "extra": {"on": true}})
        );
    }

    #[test]
    fn values_that_are_not_one_mapping_say_so() {
        assert!(yaml_mapping("").unwrap().is_empty());
        assert!(yaml_mapping("# nothing\n").unwrap().is_empty());
        let e = yaml_mapping("- a\n- b\n").unwrap_err();
        assert!(e.contains("a YAML list, not a mapping"), "{e}");
        let e = yaml_mapping("a: 1\n---\nb: 2\n").unwrap_err();
        assert!(e.contains("more than one YAML document"), "{e}");
        let e = yaml_mapping("a: [1, 2\n").unwrap_err();
        assert!(e.contains("must be YAML"), "{e}");
    }

    #[test]
    fn json_tf_vars_become_hcl_and_hcl_is_kept() {
        assert_eq!(tf_vars_file("a = 1\n").unwrap(), "a = 1\n");
        assert_eq!(
            tf_vars_file(r#"{"name": "x\"${y}", "n": 2, "tags": {"k v": [true, null]}}"#).unwrap(),
            "n = 2\nname = \"x\\\"$${y}\"\ntags = {\"k v\" = [true, null]}\n"
        );
        assert!(
            tf_vars_file("{ not json")
                .unwrap_err()
                .contains("not a JSON object")
        );
        assert!(
            tf_vars_file(r#"{"1x": 1}"#)
                .unwrap_err()
                .contains("not a Terraform variable name")
        );
    }
}
