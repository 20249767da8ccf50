//! Writing Terraform's JSON syntax: string literals kept literal, raw
//! expressions, `jsonencode` of documents with expressions in them, and
//! the blocks of a configuration.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::snake;

/// `s` as a Terraform string literal's text: `${` and `%{` kept as they
/// are (an IAM policy's `${aws:username}` is not Terraform's).
pub(super) fn lit(s: &str) -> String {
    s.replace("${", "$${").replace("%{", "%%{")
}

/// A raw Terraform expression inside a value given to [`hcl`].
pub(super) fn raw(expr: &str) -> Value {
    Value::String(format!("\u{0}{expr}"))
}

/// `v` as a Terraform expression (strings escaped as literals, [`raw`]
/// ones as written), for `jsonencode(...)`.
pub(super) fn hcl(v: &Value) -> String {
    match v {
        Value::String(s) => match s.strip_prefix('\u{0}') {
            Some(expr) => expr.to_owned(),
            None => lit(&Value::String(s.clone()).to_string()),
        },
        Value::Array(items) => {
            format!("[{}]", items.iter().map(hcl).collect::<Vec<_>>().join(", "))
        }
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{} = {}", Value::String(k.clone()), hcl(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// `"${jsonencode(v)}"`: a policy document with expressions in it.
pub(super) fn encoded(v: &Value) -> Value {
    json!(format!("${{jsonencode({})}}", hcl(v)))
}

/// A Terraform name from a CloudFormation-style logical id.
pub(super) fn tf_name(id: &str) -> String {
    let mut out = String::new();
    for (i, c) in id.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    snake(&out)
}

/// What the configuration is made of, by block kind.
#[derive(Default)]
pub(super) struct Blocks {
    pub(super) variables: Map<String, Value>,
    pub(super) data: BTreeMap<&'static str, Map<String, Value>>,
    pub(super) resources: BTreeMap<&'static str, Map<String, Value>>,
    pub(super) locals: Map<String, Value>,
}

impl Blocks {
    pub(super) fn resource(&mut self, kind: &'static str, name: &str, body: Value) {
        self.resources
            .entry(kind)
            .or_default()
            .insert(name.to_owned(), body);
    }

    pub(super) fn data(&mut self, kind: &'static str, name: &str, body: Value) {
        self.data
            .entry(kind)
            .or_default()
            .insert(name.to_owned(), body);
    }

    pub(super) fn variable(&mut self, name: &str, body: Value) {
        self.variables.insert(name.to_owned(), body);
    }
}
