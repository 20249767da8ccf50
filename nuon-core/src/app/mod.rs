//! The model of an app config: what a vendor's directory of TOML files, in
//! Nuon's format, describes (an app's sandbox, runner, inputs, secrets,
//! components, actions, installs, stack, permissions, policies,
//! runbooks, installer page), as the store keeps it, the engine plans
//! and renders from it and the wire shows it.
//!
//! Reading and checking the files into it is the loader's
//! (`nuon-appconfig`: every problem at once, each as `file:line:col:
//! message`); this module keeps the types, the checks the engine makes
//! at run time (a probe's target, a window, a name), and the render
//! context of Nuon's templates ([`template`]).

mod component;
mod diag;
mod files;
mod graph;
mod health;
mod inputs;
mod installer;
mod overrides;
mod platform;
mod policies;
mod runbooks;
mod secrets;
mod sources;
pub mod template;
mod triggers;
mod values;

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use component::{
    Component, ComponentKind, ComponentSpec, DockerBuildSpec, HelmSpec, Kustomize,
    MAX_AUTO_RETRIES, ManifestSpec, PulumiSpec, TerraformSpec, WasmSpec,
};
pub use diag::{Diagnostic, Diagnostics, SourceFile, did_you_mean};
pub use files::{file_ref_candidates, file_refs, inline_file_refs, is_file_ref};
pub use graph::components_reading;
pub use health::{
    ComponentHealth, DEFAULT_WINDOW, HealthProbe, MAX_WINDOW, ProbeKind, check_name, http_url,
    parse_window, tcp_address,
};
pub use inputs::{InputDecl, InputGroup, InputType};
pub use installer::{
    FAVICON_SOURCE, IMAGE_KEYS, Installer, LOGO_SOURCE, MAX_IMAGE_BYTES, image_type, is_web_url,
};
pub use overrides::{
    ComponentOverride, merge_values, override_problems, tf_vars_file, yaml_mapping,
};
pub use platform::{
    KubernetesContext, NestedStack, OperationRoles, OperationRule, Permissions, Policy, Role, Stack,
};
pub use policies::{KYVERNO_TYPES, policies_for, policy_engine};
pub use runbooks::{Runbook, inline_action_name};
pub use secrets::SecretHolder;
pub use sources::{public_repo_url, source_dir};
pub use triggers::{OLD_TRIGGERS, TRIGGERS};
pub use values::{helm_values, set_typed};

/// The config version this project reads every other as.
pub const CONFIG_VERSION: &str = "v2";

/// Whether two role names (templates) are the same role: as written,
/// spaces aside, as Nuon compares them.
pub fn same_role(a: &str, b: &str) -> bool {
    a.chars()
        .filter(|c| *c != ' ')
        .eq(b.chars().filter(|c| *c != ' '))
}

/// The versions a `metadata.toml` may give without a warning: Nuon's
/// directory layout is the same for both.
pub const CONFIG_VERSIONS: &[&str] = &["v1", "v2"];

/// A whole, valid app config.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AppConfig {
    /// `metadata.toml`.
    pub metadata: Metadata,
    /// `sandbox.toml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<Sandbox>,
    /// `runner.toml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<RunnerSettings>,
    /// `[[group]]` of `inputs.toml`.
    #[serde(default)]
    pub input_groups: Vec<InputGroup>,
    /// `[[input]]` of `inputs.toml`.
    #[serde(default)]
    pub inputs: Vec<InputDecl>,
    /// `secrets.toml` or `secrets/*.toml`.
    #[serde(default)]
    pub secrets: Vec<SecretDecl>,
    /// `components/*.toml`, in dependency order (dependencies first).
    #[serde(default)]
    pub components: Vec<Component>,
    /// `actions/*.toml`.
    #[serde(default)]
    pub actions: Vec<Action>,
    /// `installs/*.toml`.
    #[serde(default)]
    pub installs: Vec<InstallDecl>,
    /// `stack.toml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<Stack>,
    /// `permissions.toml` (or `permissions/`) and `break_glass.toml` (or
    /// `break_glass/`).
    #[serde(default, skip_serializing_if = "Permissions::is_empty")]
    pub permissions: Permissions,
    /// `operation_roles.toml`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operation_roles: Option<OperationRoles>,
    /// `policies.toml` or `policies/`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<Policy>,
    /// `kubernetes_contexts.toml` or `kubernetes_contexts/`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kubernetes_contexts: Vec<KubernetesContext>,
    /// `runbooks/*.toml`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub runbooks: Vec<Runbook>,
    /// `installer.toml`: the customer's installer page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installer: Option<Installer>,
}

impl AppConfig {
    /// The action named `name`.
    pub fn action(&self, name: &str) -> Option<&Action> {
        self.actions.iter().find(|a| a.name == name)
    }

    /// The input named `name`.
    pub fn input(&self, name: &str) -> Option<&InputDecl> {
        self.inputs.iter().find(|i| i.name == name)
    }
}

/// `metadata.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// As written: one of [`CONFIG_VERSIONS`], or another text read as
    /// [`CONFIG_VERSION`] (with a warning).
    pub version: String,
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// One paragraph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Markdown, or the path of a Markdown file of the config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readme: Option<String>,
}

/// Where a component's (or the sandbox's) source comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Source {
    /// `path = "./src/db"`: a directory next to the config, for development.
    Path {
        /// Relative to the config directory.
        path: String,
    },
    /// `[public_repo]`: a public GitHub repository, `owner/name` (or a
    /// clone URL: [`public_repo_url`]).
    PublicRepo {
        /// `owner/name`.
        repo: String,
        /// The directory inside the repository.
        directory: String,
        /// The branch.
        branch: String,
    },
    /// `[git]`: any git repository by URL (`https://`, `ssh://`, `file://`).
    Git {
        /// The clone URL.
        repo: String,
        /// The directory inside the repository.
        directory: String,
        /// The branch.
        branch: String,
    },
    /// `[helm_repo]`: a chart from a Helm repository.
    HelmRepo {
        /// The repository URL.
        repo_url: String,
        /// The chart's name there.
        chart: String,
        /// The chart version; the newest when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<String>,
    },
    /// `[public]`: a container image anyone can pull.
    Image {
        /// `registry/repository`.
        image_url: String,
        /// The tag.
        tag: String,
    },
    /// `oci = "registry/repository:tag"` (or `@sha256:…`): an artifact
    /// already in an OCI registry.
    Oci {
        /// The reference.
        reference: String,
    },
    /// The component's content is in its config: a `kubernetes_manifest`'s
    /// inline `manifest`, packaged by its build.
    Inline,
}

/// Every `path` source of `config`: (`sandbox` or the component, directory).
pub fn path_sources(config: &AppConfig) -> Vec<(String, String)> {
    let sandbox = config
        .sandbox
        .iter()
        .map(|s| ("sandbox".to_owned(), &s.source));
    let components = config
        .components
        .iter()
        .map(|c| (c.name.clone(), &c.source));
    sandbox
        .chain(components)
        .filter_map(|(who, src)| match src {
            Source::Path { path } => Some((who, path.clone())),
            _ => None,
        })
        .collect()
}

/// `sandbox.toml`: the install's base infrastructure, a Terraform module
/// (or, with `type = "pulumi"`, a Pulumi program).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Sandbox {
    /// The Terraform version the module needs (none for a Pulumi program).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terraform_version: Option<String>,
    /// A Pulumi sandbox's program settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pulumi: Option<Pulumi>,
    /// Where the module comes from.
    pub source: Source,
    /// `[vars]`, templated.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vars: BTreeMap<String, Value>,
    /// `[env_vars]`, templated.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_vars: BTreeMap<String, String>,
    /// `[[var_file]] contents`: inline tfvars or a path in the config.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub var_files: Vec<String>,
    /// When the control plane plans it to find drift (cron, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_schedule: Option<String>,
    /// `operation_roles`: the role (by name, templated) each of its
    /// operations (`provision`, `deprovision`, `reprovision`) runs with,
    /// unless a rule of `operation_roles.toml` names the sandbox.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub operation_roles: BTreeMap<String, String>,
    /// How many times a failed sandbox step (of a provision, reprovision
    /// or deprovision) is tried again on its own, with backoff.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_auto_retries: u32,
    /// Its apply needs no approval when its plan passed every Rego policy
    /// of type `sandbox` (and there is one).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_approve_on_policies_passing: bool,
}

/// `runner.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunnerSettings {
    /// Where install runners run: `aws`, `azure`, `gcp` or `local`.
    pub runner_type: String,
    /// How Helm stores releases: `configmap` or `secret`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm_driver: Option<String>,
    /// A script that sets the runner's machine up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub init_script_url: Option<String>,
    /// Environment for every job of the runner.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_vars: BTreeMap<String, String>,
    /// The machine type of a VM runner (`t3a.medium`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// The tool image each job kind runs in on a runner that runs jobs in
    /// containers: job kind (`terraform`, `helm`, `kubernetes_manifest`,
    /// `pulumi`, `exec`, or `default` for the others) to a `container_image`
    /// component of the app, whose build is the image.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub job_images: BTreeMap<String, String>,
}

/// The job kinds `[job_images]` of `runner.toml` may name, and `default`.
pub const JOB_IMAGE_KINDS: &[&str] = &[
    "terraform",
    "helm",
    "kubernetes_manifest",
    "pulumi",
    "exec",
    "default",
];

impl RunnerSettings {
    /// The component whose image jobs of `kind` run in, if any.
    pub fn job_image(&self, kind: &str) -> Option<&str> {
        self.job_images
            .get(kind)
            .or_else(|| self.job_images.get("default"))
            .map(String::as_str)
    }
}

/// A secret an install provides (`secrets.toml`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SecretDecl {
    /// What templates read: `{{ .nuon.secrets.NAME }}`.
    pub name: String,
    /// A name for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// What it is for.
    pub description: String,
    /// An install must give it.
    #[serde(default)]
    pub required: bool,
    /// The control plane makes a random value when the install gives none.
    #[serde(default)]
    pub auto_generate: bool,
    /// `base64`: the value is base64 (a given one is checked; a generated
    /// one is random bytes in base64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
    /// The value when the install gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Where the install's value is synced into the sandbox's cluster
    /// (`kubernetes_sync_targets`, or `kubernetes_sync` with its
    /// namespace and name): each a key of a Kubernetes Secret.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kubernetes: Vec<KubernetesSecretTarget>,
    /// Who keeps the value (`held_by`): the customer, in their cloud's
    /// secret store (entered in the install stack; the control plane
    /// knows only its name and where it is), or the vendor's control
    /// plane (sealed). Unset in `secrets.toml`: the customer on AWS runner
    /// types (their install stack makes the secret), the vendor on the
    /// others. A loaded config always has it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_by: Option<SecretHolder>,
}

/// A Kubernetes Secret a secret's value is written to: the key `key` of
/// Secret `name` in each of `namespaces` (each may be a template).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubernetesSecretTarget {
    /// The namespaces the Secret is made in.
    pub namespaces: Vec<String>,
    /// The Secret's name.
    pub name: String,
    /// The key of its data the value is written to.
    pub key: String,
}

/// Whether `s` is a Kubernetes object name (RFC 1123 subdomain):
/// lowercase letters, digits, `-` and `.`, starting and ending with a
/// letter or digit, at most 253 bytes.
pub fn kubernetes_name_ok(s: &str) -> bool {
    let edge = |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    s.len() <= 253
        && edge(s.as_bytes().first())
        && edge(s.as_bytes().last())
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
}

/// Whether `s` is a Kubernetes namespace (RFC 1123 label): lowercase
/// letters, digits and `-`, starting and ending with a letter or digit,
/// at most 63 bytes.
pub fn kubernetes_namespace_ok(s: &str) -> bool {
    s.len() <= 63 && !s.contains('.') && kubernetes_name_ok(s)
}

/// Whether `s` is a key of a Kubernetes Secret's data.
pub fn secret_key_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A Pulumi program's settings: a `pulumi` component's (`runtime`,
/// `pulumi_version`, `[config]`), or a Pulumi sandbox's (`[pulumi_config]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Pulumi {
    /// The program's language: one of [`PULUMI_RUNTIMES`].
    pub runtime: String,
    /// The Pulumi CLI version the program is written for (`3.100.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pulumi_version: Option<String>,
    /// The stack's configuration, `namespace:key` to a value (templated);
    /// a key without a namespace is the project's own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, String>,
}

/// The language runtimes a Pulumi program may be written in.
pub const PULUMI_RUNTIMES: &[&str] = &["go", "nodejs", "python", "dotnet", "java", "yaml"];

/// `[[triggers]]` of an action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    /// `manual`, `cron`, `pre-deploy-component`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// For `cron`: five fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron_schedule: Option<String>,
    /// For the `*-component` hooks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component_name: Option<String>,
}

/// `[[steps]]` of an action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Step {
    /// Unique in the action.
    pub name: String,
    /// A command to run (templated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// A script to run, inline or a path in the config (templated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inline_contents: Option<String>,
    /// `[steps.env_vars]`, templated.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_vars: BTreeMap<String, String>,
    /// Where the step's files come from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<Source>,
}

/// `actions/NAME.toml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Action {
    /// Unique in the app.
    pub name: String,
    /// How long one run may take (`30s`, `5m`).
    pub timeout: String,
    /// When it runs.
    pub triggers: Vec<Trigger>,
    /// What it runs, in order.
    pub steps: Vec<Step>,
    /// The written dependencies.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
    /// Every component it needs: written, and read by its templates.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// `[[inputs]]`: values given when it is run (`nuon installs
    /// run-action --input k=v`), passed to its steps as environment
    /// variables of the same name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inputs: Vec<ActionInput>,
    /// The cloud role its jobs run with (a role of `permissions`, by name;
    /// templated), unless `operation_roles.toml` says otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// A break-glass role it runs with (the customer must have enabled it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub break_glass_role: Option<String>,
    /// What it does, for people (shown with its runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its labels: kept with the config and given to its steps as
    /// `NUON_ACTION_LABEL_<KEY>` (the key upper-cased, `-`/`.` as `_`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Its steps get `KUBECONFIG`: the kubeconfig of its
    /// `kubernetes_context`, else the sandbox's `kubeconfig` output.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub enable_kube_config: bool,
    /// A context of `kubernetes_contexts.toml`, by name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_context: Option<String>,
}

/// An `[[inputs]]` table of an action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionInput {
    /// The variable's name.
    pub name: String,
    /// For people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The value when a run gives none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<String>,
    /// Whether a run must give it (when it has no default).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub required: bool,
}

/// `installs/NAME.toml`: an install the config describes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InstallDecl {
    /// Unique in the app.
    pub name: String,
    /// `approve-all`, `auto` or `prompt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval_option: Option<String>,
    /// Input values (from every `[[inputs]]` table), typed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, Value>,
    /// Its labels (`labels = { tier = "prod" }`), given to the install
    /// made from this file.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// `[component_toggles]`: whether each toggleable component starts on
    /// in the install made from this file.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub component_toggles: BTreeMap<String, bool>,
    /// `[components.NAME]`: the install's own Helm values or Terraform
    /// variables for a component.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub components: BTreeMap<String, ComponentOverride>,
}
