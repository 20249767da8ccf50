//! Rego policies (Nuon's `engine = "opa"`), checked with regorus: compiled
//! when a config is checked, evaluated by the install's runner before the
//! apply against a Terraform plan (`terraform show -json`), or against
//! each Kubernetes object a Helm chart or a `kubernetes_manifest` renders.
//!
//! A policy's `deny` rule gives the messages that fail the step; its `warn`
//! rule the messages shown with the plan. Rego v1 (`deny contains msg if
//! { … }`) is read first; a policy in the older syntax (`deny[msg] { … }`)
//! is read as such when v1 refuses it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A policy as a job carries it: its name, engine and text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicySource {
    /// Its name, in messages.
    pub name: String,
    /// The Rego module, or the Kyverno policies (YAML).
    pub contents: String,
    /// `kyverno` for Kyverno policies ([`crate::kyverno`]); Rego when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
}

impl PolicySource {
    /// Whether it is Kyverno's (checks Kubernetes objects only).
    pub fn is_kyverno(&self) -> bool {
        self.engine.as_deref() == Some("kyverno")
    }
}

/// Why a policy does not compile: where, and what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileError {
    /// 1-based line in the policy.
    pub line: usize,
    /// 1-based column.
    pub col: usize,
    /// What was expected or found.
    pub message: String,
}

/// What the policies say of an input.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// `deny` messages, each prefixed with its policy's name.
    pub deny: Vec<String>,
    /// `warn` messages, each prefixed with its policy's name.
    pub warn: Vec<String>,
}

/// Whether a policy's text is Rego (its first statement is a `package`
/// declaration), for a policy that names no engine.
pub fn looks_like_rego(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
        .is_some_and(|l| l.starts_with("package ") || l.starts_with("package\t"))
}

pub use crate::manifests::manifest_objects;

#[cfg(feature = "policies")]
mod engine;
#[cfg(feature = "policies")]
pub use engine::{check_kyverno, compile, evaluate, evaluate_objects};
#[cfg(not(feature = "policies"))]
mod none;
#[cfg(not(feature = "policies"))]
pub use none::{check_kyverno, compile, evaluate, evaluate_objects};
