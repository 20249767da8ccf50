//! `inputs.toml` (or `inputs/` and `input_groups/`): the inputs an
//! install gives, their groups, and the types their values are read as.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `[[group]]` of `inputs.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InputGroup {
    /// What inputs name in `group`.
    pub name: String,
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// One sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// The type of an input's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum InputType {
    /// Text (the default).
    #[default]
    String,
    /// An integer or a decimal number.
    Number,
    /// `true` or `false`.
    Bool,
    /// A list of values.
    List,
    /// Any JSON document.
    Json,
}

impl InputType {
    /// Every type, as written in `type = "…"`.
    pub const ALL: [&str; 5] = ["string", "number", "bool", "list", "json"];

    /// The input type spelled `s` in an input's `type`, if it is one.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "string" => InputType::String,
            "number" => InputType::Number,
            "bool" => InputType::Bool,
            "list" => InputType::List,
            "json" => InputType::Json,
            _ => return None,
        })
    }

    /// Checks a value given for an input of this type (in TOML, JSON, or
    /// Nuon's style of strings for everything: `"3"`, `"true"`) and returns
    /// it in its proper JSON shape.
    pub fn coerce(self, v: &Value) -> Result<Value, String> {
        match (self, v) {
            (InputType::String, Value::String(_)) => Ok(v.clone()),
            (InputType::String, other) => {
                Err(format!("expected a string, found {}", json_kind(other)))
            }
            (InputType::Number, Value::Number(_)) => Ok(v.clone()),
            (InputType::Number, Value::String(s)) => s
                .trim()
                .parse::<serde_json::Number>()
                .map(Value::Number)
                .map_err(|_| format!("expected a number, found {s:?}")),
            (InputType::Number, other) => {
                Err(format!("expected a number, found {}", json_kind(other)))
            }
            (InputType::Bool, Value::Bool(_)) => Ok(v.clone()),
            (InputType::Bool, Value::String(s)) if s == "true" || s == "false" => {
                Ok(Value::Bool(s == "true"))
            }
            (InputType::Bool, other) => Err(format!(
                "expected true or false, found {}",
                match other {
                    Value::String(s) => format!("{s:?}"),
                    o => json_kind(o).to_string(),
                }
            )),
            (InputType::List, Value::Array(_)) => Ok(v.clone()),
            (InputType::List, Value::String(s)) => Ok(Value::Array(
                s.split(',')
                    .map(|x| x.trim())
                    .filter(|x| !x.is_empty())
                    .map(|x| Value::String(x.into()))
                    .collect(),
            )),
            (InputType::List, other) => Err(format!(
                "expected a list (an array, or a comma-separated string), found {}",
                json_kind(other)
            )),
            (InputType::Json, Value::String(s)) => serde_json::from_str(s)
                .map_err(|e| format!("expected a JSON document, but it does not parse: {e}")),
            (InputType::Json, other) => Ok(other.clone()),
        }
    }
}

fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}

/// `[[input]]` of `inputs.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InputDecl {
    /// What templates read: `{{ .nuon.install.inputs.NAME }}`.
    pub name: String,
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// One sentence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The `[[group]]` it is shown in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// The value when an install gives none, already of `type`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Value>,
    /// An install must give a value (there is no default).
    #[serde(default)]
    pub required: bool,
    /// Never shown after it is set: not in API answers, not in logs.
    #[serde(default)]
    pub sensitive: bool,
    /// Set by the vendor only, not shown to the customer.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub internal: bool,
    /// Asked of the customer in Nuon's install stack.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub user_configurable: bool,
    /// The type of its value.
    #[serde(rename = "type", default)]
    pub ty: InputType,
}
