//! A component of an app: the fields every kind has, beside
//! [`ComponentSpec`], which carries what only its kind has.
//!
//! The stored and wire form is flat, as the config file is: `type` names
//! the kind and the kind's own keys stand beside the common ones.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ComponentHealth, Pulumi, Source, is_zero};

/// The kinds of component this project deploys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ComponentKind {
    /// A Terraform (or OpenTofu) module.
    TerraformModule,
    /// A Helm chart.
    HelmChart,
    /// An existing container image, copied into the install.
    ContainerImage,
    /// A container image built from a Dockerfile.
    DockerBuild,
    /// A vendor's WebAssembly plugin.
    Wasm,
    /// Kubernetes objects (an inline manifest, or a kustomization),
    /// applied server-side with `kubectl`.
    KubernetesManifest,
    /// A Pulumi program, deployed with the `pulumi` CLI.
    Pulumi,
}

impl ComponentKind {
    /// Every kind, as written in `type = "…"`.
    pub const ALL: [&str; 7] = [
        "terraform_module",
        "helm_chart",
        "container_image",
        "docker_build",
        "wasm",
        "kubernetes_manifest",
        "pulumi",
    ];

    /// The kind spelled `s` in a component's `type`, if it is one.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "terraform_module" => ComponentKind::TerraformModule,
            "helm_chart" => ComponentKind::HelmChart,
            "container_image" | "external_image" => ComponentKind::ContainerImage,
            "docker_build" => ComponentKind::DockerBuild,
            "wasm" => ComponentKind::Wasm,
            "kubernetes_manifest" => ComponentKind::KubernetesManifest,
            "pulumi" => ComponentKind::Pulumi,
            _ => return None,
        })
    }

    /// As written in `type = "…"`.
    pub fn as_str(self) -> &'static str {
        match self {
            ComponentKind::TerraformModule => "terraform_module",
            ComponentKind::HelmChart => "helm_chart",
            ComponentKind::ContainerImage => "container_image",
            ComponentKind::DockerBuild => "docker_build",
            ComponentKind::Wasm => "wasm",
            ComponentKind::KubernetesManifest => "kubernetes_manifest",
            ComponentKind::Pulumi => "pulumi",
        }
    }
}

/// `components/NAME.toml`: the keys every kind has; `type` and the keys
/// of its kind stand beside them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Component {
    /// Unique in the app; what dependencies and templates name.
    pub name: String,
    /// `type = "…"` and the keys only that kind has.
    #[serde(flatten)]
    pub spec: ComponentSpec,
    /// The dependencies written in the file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<String>,
    /// Every dependency: the written ones and every component whose outputs
    /// a template reads; sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// Where it comes from.
    pub source: Source,
    /// `readme`: Markdown about it (or `./FILE` of the config), a template
    /// of the install's state, shown under the app's README.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readme: Option<String>,
    /// How long a build may take (`10m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub build_timeout: Option<String>,
    /// How long a deploy may take (`30m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy_timeout: Option<String>,
    /// How many times a failed step of its deploy or teardown is tried
    /// again on its own, with backoff, before the workflow fails.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub max_auto_retries: u32,
    /// Its apply needs no approval when its plan passed every policy that
    /// applies to it (and at least one does), whatever the install's
    /// `approval_option`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_approve_on_policies_passing: bool,
    /// Whether an install may turn it off (`nuon installs components
    /// disable`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub toggleable: bool,
    /// Whether a new install has it on; only a toggleable component may
    /// start off.
    #[serde(default = "yes", skip_serializing_if = "Clone::clone")]
    pub default_enabled: bool,
    /// When the control plane plans it to find drift (cron, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drift_schedule: Option<String>,
    /// `[operation_roles]`: the role (by name, templated) each of its
    /// operations (`deploy`, `teardown`) runs with.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub operation_roles: BTreeMap<String, String>,
    /// The cluster its Kubernetes objects go to (a helm_chart's, a
    /// kubernetes_manifest's), a context of `kubernetes_contexts.toml` (the
    /// sandbox's `kubeconfig` output when absent); of any kind, it orders
    /// the component after the context's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes_context: Option<String>,
    /// `[health]`: the probes its deploy watches after the apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health: Option<ComponentHealth>,
    /// Its labels (`[labels]`), shown with it (an install's components,
    /// the dashboard).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

fn yes() -> bool {
    true
}

/// The most automatic retries a component may ask for.
pub const MAX_AUTO_RETRIES: u32 = 10;

/// What a component of each kind is made of beyond the common fields.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ComponentSpec {
    /// A Terraform (or OpenTofu) module.
    TerraformModule(TerraformSpec),
    /// A Helm chart.
    HelmChart(HelmSpec),
    /// An existing container image, copied into the install.
    ContainerImage,
    /// A container image built from a Dockerfile.
    DockerBuild(DockerBuildSpec),
    /// A vendor's WebAssembly plugin.
    Wasm(WasmSpec),
    /// Kubernetes objects (an inline manifest, or a kustomization),
    /// applied server-side with `kubectl`.
    KubernetesManifest(ManifestSpec),
    /// A Pulumi program, deployed with the `pulumi` CLI.
    Pulumi(PulumiSpec),
}

/// A `terraform_module` component's own keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TerraformSpec {
    /// The Terraform version (`1.9.8`, or a constraint).
    pub terraform_version: String,
    /// `[vars]`, templated.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub vars: BTreeMap<String, Value>,
    /// `[env_vars]`, templated.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_vars: BTreeMap<String, String>,
    /// `[[var_file]] contents`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub var_files: Vec<String>,
}

/// A `helm_chart` component's own keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HelmSpec {
    /// The chart's name.
    pub chart_name: String,
    /// The namespace (templated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// `configmap` or `secret`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_driver: Option<String>,
    /// `[values]`, templated.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, Value>,
    /// `[[values_file]] contents`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values_files: Vec<String>,
    /// Adopt objects another release or tool made (`helm upgrade
    /// --take-ownership`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub take_ownership: bool,
}

/// A `docker_build` component's own keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DockerBuildSpec {
    /// The Dockerfile's path in the source.
    pub dockerfile: String,
    /// The Dockerfile stage to build (`--target`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// `[build_args]`, given as `--build-arg` (over `[env_vars]`, which are
    /// build arguments too, as in Nuon).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub build_args: BTreeMap<String, String>,
    /// `[env_vars]`, templated.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_vars: BTreeMap<String, String>,
}

/// A `wasm` component's own keys.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct WasmSpec {
    /// `[config]`, passed to the plugin (templated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<Value>,
    /// `[capabilities]` the plugin is granted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<Value>,
}

/// A `kubernetes_manifest` component's own keys: one of `manifest` and
/// `kustomize`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ManifestSpec {
    /// The namespace (templated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The objects, multi-document YAML (templated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
    /// `[kustomize]`, built from the source.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kustomize: Option<Kustomize>,
}

/// A `pulumi` component's own keys.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PulumiSpec {
    /// The program's runtime, CLI version and stack config.
    pub pulumi: Pulumi,
    /// `[env_vars]`, templated.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env_vars: BTreeMap<String, String>,
}

impl ComponentSpec {
    /// Its kind.
    pub fn kind(&self) -> ComponentKind {
        match self {
            ComponentSpec::TerraformModule(_) => ComponentKind::TerraformModule,
            ComponentSpec::HelmChart(_) => ComponentKind::HelmChart,
            ComponentSpec::ContainerImage => ComponentKind::ContainerImage,
            ComponentSpec::DockerBuild(_) => ComponentKind::DockerBuild,
            ComponentSpec::Wasm(_) => ComponentKind::Wasm,
            ComponentSpec::KubernetesManifest(_) => ComponentKind::KubernetesManifest,
            ComponentSpec::Pulumi(_) => ComponentKind::Pulumi,
        }
    }

    /// Its `[env_vars]`: a Terraform module's, a Docker build's or a
    /// Pulumi program's; none for other kinds.
    pub fn env_vars(&self) -> Option<&BTreeMap<String, String>> {
        match self {
            ComponentSpec::TerraformModule(t) => Some(&t.env_vars),
            ComponentSpec::DockerBuild(b) => Some(&b.env_vars),
            ComponentSpec::Pulumi(p) => Some(&p.env_vars),
            _ => None,
        }
    }

    /// The namespace its objects go to: a Helm chart's, a manifest's.
    pub fn namespace(&self) -> Option<&str> {
        match self {
            ComponentSpec::HelmChart(h) => h.namespace.as_deref(),
            ComponentSpec::KubernetesManifest(m) => m.namespace.as_deref(),
            _ => None,
        }
    }
}

impl Component {
    /// Its kind.
    pub fn kind(&self) -> ComponentKind {
        self.spec.kind()
    }

    /// A Terraform module's own keys.
    pub fn terraform(&self) -> Option<&TerraformSpec> {
        match &self.spec {
            ComponentSpec::TerraformModule(t) => Some(t),
            _ => None,
        }
    }

    /// A Helm chart's own keys.
    pub fn helm(&self) -> Option<&HelmSpec> {
        match &self.spec {
            ComponentSpec::HelmChart(h) => Some(h),
            _ => None,
        }
    }

    /// A Kubernetes manifest's own keys.
    pub fn manifest(&self) -> Option<&ManifestSpec> {
        match &self.spec {
            ComponentSpec::KubernetesManifest(m) => Some(m),
            _ => None,
        }
    }

    /// A Pulumi program's own keys.
    pub fn pulumi(&self) -> Option<&PulumiSpec> {
        match &self.spec {
            ComponentSpec::Pulumi(p) => Some(p),
            _ => None,
        }
    }

    /// A WebAssembly plugin's own keys.
    pub fn wasm(&self) -> Option<&WasmSpec> {
        match &self.spec {
            ComponentSpec::Wasm(w) => Some(w),
            _ => None,
        }
    }

    /// A Docker build's own keys.
    pub fn docker_build(&self) -> Option<&DockerBuildSpec> {
        match &self.spec {
            ComponentSpec::DockerBuild(b) => Some(b),
            _ => None,
        }
    }
}

/// `[kustomize]` of a `kubernetes_manifest` component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Kustomize {
    /// The kustomization's directory in the source.
    pub path: String,
    /// Patch files applied over it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub patches: Vec<String>,
    /// `kustomize build --enable-helm`.
    #[serde(default)]
    pub enable_helm: bool,
    /// `rootOnly` (the default) or `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_restrictor: Option<String>,
}
