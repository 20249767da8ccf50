//! The parts of an app that describe the install's cloud platform and
//! operations rather than what it runs: `stack.toml`, `permissions`,
//! `break_glass`, `operation_roles.toml`, `policies`,
//! `kubernetes_contexts` (the loader reads them key by key against their
//! schemas: `nuon-appconfig`'s `platform.rs`).

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `stack.toml`: the install stack the customer applies once.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Stack {
    /// `aws-cloudformation`, `azure-bicep` or `gcp-terraform`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The stack's name (templated).
    pub name: String,
    /// What it is (templated).
    pub description: String,
    /// A VPC template to nest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vpc_nested_template_url: Option<String>,
    /// A runner template to nest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_nested_template_url: Option<String>,
    /// `resource_group` or `subscription` (Azure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment_scope: Option<String>,
    /// `[[custom_nested_stacks]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub custom_nested_stacks: Vec<NestedStack>,
}

/// One of `[[custom_nested_stacks]]`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct NestedStack {
    /// Unique in the stack.
    pub name: String,
    /// The template.
    pub template_url: String,
    /// Its place among the nested stacks.
    #[serde(default)]
    pub index: i64,
    /// Its parameters (templated).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
}

/// A cloud role the install stack creates: for an operation (provision,
/// maintenance, deprovision), a custom one, or a break-glass one.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Role {
    /// `provision`, `maintenance`, `deprovision` or `custom`.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// `aws`, `azure` or `gcp` (the runner's type when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_platform: Option<String>,
    /// The role's name (templated).
    pub name: String,
    /// What it is for.
    pub description: String,
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// `[[policies]]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<Value>,
    /// An AWS permissions boundary (a policy document, or a file of the config).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions_boundary: Option<String>,
    /// Whether the install stack creates it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled_in_stack: Option<bool>,
    /// `[[named_policies]]`: names of the config's named policies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub named_policies: Vec<Value>,
}

/// `permissions.toml` or `permissions/` and `break_glass`: the cloud roles
/// of the install.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Permissions {
    /// Every role, each with its `type`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roles: Vec<Role>,
    /// `[[named_policies]]` (and `permissions/policies/`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub named_policies: Vec<Value>,
    /// Break-glass roles (`break_glass.toml` or `break_glass/`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub break_glass: Vec<Role>,
}

impl Permissions {
    /// Whether nothing is declared.
    pub fn is_empty(&self) -> bool {
        self.roles.is_empty() && self.named_policies.is_empty() && self.break_glass.is_empty()
    }
}

/// `operation_roles.toml`: which role each operation of each part runs with.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OperationRoles {
    /// Always `matrix`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `[[rules]]`.
    #[serde(default)]
    pub rules: Vec<OperationRule>,
}

/// One rule of `operation_roles.toml`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OperationRule {
    /// `nuon::component:NAME`, `nuon::component:*`, `nuon::sandbox`,
    /// `nuon::action:NAME` or `nuon::action:*`.
    pub principal: String,
    /// `provision`, `deprovision`, `reprovision`, `deploy`, `teardown` or `trigger`.
    pub operation: String,
    /// The role's name (templated).
    pub role: String,
}

/// A policy checked before an apply.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Policy {
    /// What it checks: `terraform_module`, `helm_chart`,
    /// `kubernetes_manifest`, `docker_build`, `container_image`, `sandbox`,
    /// `kubernetes_cluster` or `pulumi`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `opa` (Rego; also written `rego`) or `kyverno` (Nuon's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<String>,
    /// Its name (the file's name when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The policy itself, or a file of the config holding it.
    pub contents: String,
    /// The components it applies to (`*`: every one of its type).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub components: Vec<String>,
}

/// A cluster a component or action can run against: the `kubeconfig`
/// output of a component (a kubeconfig's text, as the sandbox's is).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct KubernetesContext {
    /// What components and actions name in `kubernetes_context`.
    pub name: String,
    /// The component whose outputs describe the cluster.
    pub component: String,
}

impl super::RunnerSettings {
    /// The runner of an app with no `runner.toml`: a machine of the
    /// customer's own (`local`).
    pub fn local() -> Self {
        super::RunnerSettings {
            runner_type: "local".into(),
            helm_driver: None,
            init_script_url: None,
            env_vars: Default::default(),
            instance_type: None,
            job_images: Default::default(),
        }
    }
}
