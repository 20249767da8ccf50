//! Runbook steps that carry their script inline, as Nuon's runbooks write
//! them: a step of `type = "action"` with `command` or `inline_contents`
//! (and perhaps `role`, `env_vars`, `timeout`) and no `action_name`. Each
//! runs as an action of its own, made here when the config is read, with
//! no trigger (only its runbook runs it) and named after its runbook and
//! step ([`inline_action_name`]); the step then names it.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A runbook: component deploys, teardowns and actions run in order.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Runbook {
    /// Unique in the app.
    pub name: String,
    /// What it is for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Markdown, or a file of the config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readme: Option<String>,
    /// Labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// `[[input]]`: values given when it runs.
    #[serde(default, rename = "input", skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<Value>,
    /// The written dependencies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
    /// `[[steps]]`, in order.
    #[serde(default)]
    pub steps: Vec<Value>,
}

/// The action an inline step of runbook `runbook` runs as.
pub fn inline_action_name(runbook: &str, step: &str) -> String {
    format!("runbook-{runbook}-{step}")
}
