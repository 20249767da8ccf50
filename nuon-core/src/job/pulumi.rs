//! The `pulumi` job: a Pulumi program run with the `pulumi` CLI.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ArtifactRef, HttpBackend, Job};

/// What a `pulumi` job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PulumiAction {
    /// `pulumi preview`: the changes, counted as a plan's are.
    Preview,
    /// `pulumi up`, then the stack's outputs.
    Up,
    /// What a destroy would remove: the resources the stack's state holds.
    DestroyPreview,
    /// `pulumi destroy`.
    Destroy,
}

/// The `pulumi` job: a Pulumi program from the install's store (its
/// directory, by digest) run with the `pulumi` CLI on one stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PulumiJob {
    /// What to do.
    pub action: PulumiAction,
    /// The component (or `sandbox`), for messages.
    pub component: String,
    /// The program's directory (`Pulumi.yaml` at its root), packaged.
    pub program: ArtifactRef,
    /// The stack's name.
    pub stack: String,
    /// The program's language runtime.
    pub runtime: String,
    /// The Pulumi CLI version the program is written for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pulumi_version: Option<String>,
    /// The stack's configuration, rendered (`namespace:key`; a bare key
    /// is the project's).
    #[serde(default)]
    pub config: BTreeMap<String, String>,
    /// Environment for `pulumi` and the program, rendered.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Where the stack's state is kept between jobs: the control plane's
    /// state backend (the checkpoint is imported before and exported
    /// after, under its lock). Absent when `env` names the customer's own
    /// backend (`PULUMI_BACKEND_URL`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<HttpBackend>,
}

impl Job for PulumiJob {
    const KIND: &'static str = "pulumi";
}
