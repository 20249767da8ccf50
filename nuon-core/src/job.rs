//! Job specs, the states of jobs and attempts, and typed job payloads.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::id::{JobId, OrgId, RunnerId};

mod pulumi;
pub use pulumi::{PulumiAction, PulumiJob};

/// A typed job payload: the `payload` of a [`JobSpec`] of kind [`Job::KIND`].
///
/// A plugin that handles a kind usually defines one `Job` type for it, so the
/// control plane (which builds specs) and the plugin (which runs them) agree
/// on the shape through the compiler, not through loose JSON.
pub trait Job: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The job kind this payload belongs to, e.g. `"exec"`.
    const KIND: &'static str;
}

/// What to do when an attempt is lost (its runner stopped heartbeating).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RetryPolicy {
    /// How many attempts the job may have in all. `1` means never retry.
    pub max_attempts: u32,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self { max_attempts: 1 }
    }
}

/// Everything a runner needs to run a job. This is what the org's key signs:
/// the control plane serializes it once, signs those exact bytes, and the
/// runner verifies the same bytes before it parses them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// The job this spec belongs to; a runner refuses a spec whose id differs
    /// from the job it claimed.
    pub job_id: JobId,
    /// The org that owns the job.
    pub org_id: OrgId,
    /// The only runner allowed to run it.
    pub runner_id: RunnerId,
    /// The job kind, which selects the plugin (`"exec"`, later `"terraform"`, ...).
    pub kind: String,
    /// Kind-specific payload (for `exec`, an [`ExecJob`]).
    pub payload: serde_json::Value,
    /// Wall-clock limit for one attempt, in seconds.
    pub timeout_secs: u64,
    /// Retry policy for lost attempts.
    #[serde(default)]
    pub retry: RetryPolicy,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_at_ms: i64,
    /// Values the runner replaces with `***` in the job's log before it
    /// leaves the machine: the install's secrets and sensitive inputs the
    /// job was given (values shorter than 4 characters are not redacted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub redact: Vec<String>,
    /// The cloud role the job runs with: its operation's, as the install's
    /// stack created it. The runner's credentials provider hands it to the
    /// job, or refuses it. `None`: the runner's own identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<JobRole>,
    /// How the job is confined on a runner that runs jobs in containers
    /// (`nuon-runner run --isolation container`): its tool image, limits
    /// and network. A runner that runs jobs as process groups applies none
    /// of it, and says so in the job's log.
    #[serde(default, skip_serializing_if = "JobSandbox::is_unset")]
    pub sandbox: JobSandbox,
    /// The customer-held secrets the payload prints (by name): the runner
    /// reads each from the customer's secret store (the ARN its install
    /// stack reported as `NAME_arn`), with the job's role, and puts the
    /// value where `__nuon_customer_secret__NAME__` stands (its base64
    /// where `__nuon_customer_secret_base64__NAME__` does). The control
    /// plane never has the values.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub customer_secrets: Vec<String>,
}

/// How one job is confined in its container. Unset limits are the
/// runner's defaults (`--job-memory`, `--job-cpus`, `--job-pids`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct JobSandbox {
    /// The tool image the job's processes run in, from the install's
    /// store. Unset: the runner's default image (`--job-image`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageRef>,
    /// Memory limit in bytes; the kernel kills the job past it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// CPU limit in thousandths of a CPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub millicpus: Option<u64>,
    /// Most processes and threads at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
    /// Whether the job may open network connections (unset: yes). The
    /// runner's policy wins: `--exec-network off` denies it to commands
    /// whatever they ask.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<bool>,
}

impl JobSandbox {
    /// Nothing asked for.
    pub fn is_unset(&self) -> bool {
        *self == JobSandbox::default()
    }
}

/// An image in the install's store: a repository and its manifest's
/// digest, written `REPOSITORY@sha256:HEX`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ImageRef {
    /// The repository, e.g. `nuon-tools/terraform`.
    pub repository: String,
    /// The digest of its manifest.
    pub digest: crate::artifact::Digest,
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.repository, self.digest)
    }
}

impl FromStr for ImageRef {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (repository, digest) = s.rsplit_once('@').ok_or_else(|| {
            format!("{s:?} is not an image by digest: expected REPOSITORY@sha256:HEX (`nuon images tool` prints one)")
        })?;
        if repository.is_empty()
            || !repository
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"._-/".contains(&b))
        {
            return Err(format!(
                "{repository:?} is not a repository name: lowercase letters, digits and . _ - /"
            ));
        }
        let digest = digest
            .parse()
            .map_err(|e| format!("{s:?}: the digest: {e}"))?;
        Ok(ImageRef {
            repository: repository.to_owned(),
            digest,
        })
    }
}

/// A job's cloud identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct JobRole {
    /// The role's name, as the stack created it.
    pub name: String,
    /// `provision`, `maintenance`, `deprovision`, `custom` or `break_glass`.
    pub kind: String,
    /// Its ARN, when the stack reported it (or the account it is in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arn: Option<String>,
    /// Why this role: the operation, or the rule that chose it.
    pub because: String,
}

impl JobSpec {
    /// Decodes the payload as the typed job `J`, checking the kind first.
    pub fn payload_as<J: Job>(&self) -> Result<J, PayloadError> {
        if self.kind != J::KIND {
            return Err(PayloadError::WrongKind {
                expected: J::KIND,
                found: self.kind.clone(),
            });
        }
        serde_json::from_value(self.payload.clone()).map_err(|source| PayloadError::Invalid {
            kind: J::KIND,
            source,
        })
    }
}

/// A payload that does not fit its kind.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    /// The spec is of another kind.
    #[error("job is of kind {found:?}, expected {expected:?}")]
    WrongKind {
        /// The kind the caller asked for.
        expected: &'static str,
        /// The kind the spec has.
        found: String,
    },
    /// The payload JSON does not match the kind's schema.
    #[error("invalid {kind} payload: {source}")]
    Invalid {
        /// The kind whose schema was applied.
        kind: &'static str,
        /// What serde found wrong.
        #[source]
        source: serde_json::Error,
    },
}

/// Run a command with arguments, environment and a working directory inside
/// the job's work directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecJob {
    /// The program (looked up on the runner's `PATH` when it has no slash).
    pub command: String,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables for the process.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory relative to the job's work directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<String>,
    /// Give the process `NUON_ACTIONS_OUTPUT_FILEPATH`, a file of its work
    /// directory: what it writes there (a JSON object, or `KEY=VALUE`
    /// lines) becomes the job's `outputs` (an action's outputs).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub outputs_file: bool,
}

/// A command the vendor asked an install's runner to run, to read logs or
/// to debug. The runner decides whether it runs: its `--debug-commands`
/// setting (`off` by default) is the customer's, not the control plane's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DebugJob {
    /// A log request or a debug command.
    pub purpose: DebugPurpose,
    /// The program and its arguments, run without a shell.
    pub command: Vec<String>,
}

impl Job for DebugJob {
    const KIND: &'static str = "debug";
}

/// The variable an action's steps write their outputs to the file of.
pub const ACTION_OUTPUTS_VAR: &str = "NUON_ACTIONS_OUTPUT_FILEPATH";

/// What an action wrote to its outputs file: a JSON object, or `KEY=VALUE`
/// lines (blank lines and `#` comments skipped). Anything else is an error
/// saying what was found.
pub fn parse_action_outputs(
    text: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, String> {
    let t = text.trim();
    if t.is_empty() {
        return Ok(serde_json::Map::new());
    }
    if t.starts_with('{') {
        return match serde_json::from_str::<serde_json::Value>(t) {
            Ok(serde_json::Value::Object(m)) => Ok(m),
            Ok(_) => Err("the outputs file holds JSON that is not an object".into()),
            Err(e) => Err(format!("the outputs file is not valid JSON: {e}")),
        };
    }
    let mut out = serde_json::Map::new();
    for (i, line) in t.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(format!(
                "line {} of the outputs file is not KEY=VALUE (nor is the file a JSON object)",
                i + 1
            ));
        };
        out.insert(k.trim().to_owned(), serde_json::Value::String(v.to_owned()));
    }
    Ok(out)
}

impl Job for ExecJob {
    const KIND: &'static str = "exec";
}

/// Watch a component's health after its apply: every `interval_ms`, run
/// each probe; health holds once every probe passed `hold_rounds` rounds
/// in a row. The job ends then, or when `window_ms` has passed: failed
/// if `block_deploy`, else succeeded with what it saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HealthJob {
    /// The component it watches (for its log and outputs).
    pub component: String,
    /// The probes, rendered.
    pub probes: Vec<crate::app::HealthProbe>,
    /// How long to watch.
    pub window_ms: u64,
    /// The time between the starts of two rounds.
    pub interval_ms: u64,
    /// How many healthy rounds in a row make health hold.
    pub hold_rounds: u32,
    /// Whether health that does not hold fails the job.
    #[serde(default)]
    pub block_deploy: bool,
}

impl HealthJob {
    /// The healthy rounds in a row that make health hold.
    pub const HOLD_ROUNDS: u32 = 3;

    /// The time between rounds for a window: a thirtieth of it, from one
    /// to five seconds.
    pub fn interval_for(window: std::time::Duration) -> std::time::Duration {
        (window / 30).clamp(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(5),
        )
    }
}

impl Job for HealthJob {
    const KIND: &'static str = "health";
}

/// What a `terraform` job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TerraformAction {
    /// Plan the changes; the plan file is kept in the install's store and
    /// its digest reported, with a summary of the changes.
    Plan,
    /// Plan the destruction of everything, kept the same way.
    DestroyPlan,
    /// Apply exactly the plan named by `plan`, then report the outputs.
    Apply,
}

/// Terraform's `http` state backend settings of a job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpBackend {
    /// The state address (also the lock and unlock address).
    pub address: String,
    /// The basic-auth user name.
    pub username: String,
    /// The basic-auth password.
    pub password: String,
}

/// An artifact by repository and digest in the runner's install store.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ArtifactRef {
    /// The repository in the store.
    pub repo: String,
    /// The manifest (or, for a plan, blob) digest.
    pub digest: crate::artifact::Digest,
    /// The blob's size, for a plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// Run Terraform on a module from the install's store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TerraformJob {
    /// What to do.
    pub action: TerraformAction,
    /// The module package.
    pub module: ArtifactRef,
    /// The version constraint the binary must meet.
    pub terraform_version: String,
    /// Input variables, rendered.
    #[serde(default)]
    pub vars: BTreeMap<String, serde_json::Value>,
    /// Environment for Terraform, rendered.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// tfvars files, their contents, rendered.
    #[serde(default)]
    pub var_files: Vec<String>,
    /// Where the state lives; a local state in the work directory without.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<HttpBackend>,
    /// For `apply`: the plan to apply.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<ArtifactRef>,
    /// Rego policies a plan must pass (`deny` fails the plan; `warn` is
    /// shown with it), evaluated on `terraform show -json` of the plan.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<crate::policy::PolicySource>,
}

impl Job for TerraformJob {
    const KIND: &'static str = "terraform";
}

/// A file of a component's source, as synced with its app config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SourceFileContents {
    /// Relative to the source directory, `/`-separated.
    pub path: String,
    /// The file's text (base64 when `encoding` says so).
    pub contents: String,
    /// `base64` for a binary file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
}

/// Where a build takes a component's source from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum BuildSource {
    /// The files of a `path` source, synced with the config.
    Files {
        /// Every file of the directory.
        files: Vec<SourceFileContents>,
    },
    /// A chart version from a classic Helm repository (`index.yaml`).
    HelmRepo {
        /// The repository's URL.
        repo_url: String,
        /// The chart's name.
        chart: String,
        /// The version; the newest when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        version: Option<String>,
    },
    /// An image (every platform) copied from a registry.
    Image {
        /// `HOST/REPOSITORY:TAG` or `HOST/REPOSITORY@sha256:...`.
        reference: String,
    },
    /// A git repository, cloned with the `git` binary.
    Git {
        /// Clone URL (`https://...`, `git@...`, `file://...`).
        url: String,
        /// Branch (or tag) to check out.
        branch: String,
        /// The module's directory in the repository (`.` for its root).
        directory: String,
    },
}

/// The `build` job: package a component's source as an OCI artifact in the
/// vendor's store. Outputs `{"artifact": ArtifactRef}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BuildJob {
    /// The component (or `sandbox`), for the log.
    pub component: String,
    /// The repository of the vendor store to push to.
    pub repo: String,
    /// The tag to point at the artifact (the build's id).
    pub tag: String,
    /// Where the source comes from.
    pub source: BuildSource,
    /// What a source directory is packaged as.
    #[serde(default)]
    pub package: Package,
}

/// What a build packages a source directory as.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Package {
    /// An OpenTofu module package.
    #[default]
    TerraformModule,
    /// A Helm OCI chart (tagged with the chart's version too).
    HelmChart,
    /// A container image built from a Dockerfile (with `buildah`, or
    /// `docker buildx`) in the source directory.
    DockerImage {
        /// The Dockerfile, relative to the source directory.
        dockerfile: String,
        /// The stage to build (`--target`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        target: Option<String>,
        /// `--build-arg NAME=VALUE`s.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        build_args: BTreeMap<String, String>,
    },
    /// A WASM plugin (`plugin.toml` and the component it names) as an OCI
    /// artifact of type `application/vnd.nuon.plugin.v1`.
    WasmPlugin,
    /// Any directory, zipped as a module package is (a
    /// `kubernetes_manifest`'s manifest or kustomization).
    Directory,
}

/// What a `helm` job does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HelmAction {
    /// Render the chart with its values (`helm template`).
    Plan,
    /// `helm upgrade --install --atomic --wait`.
    Apply,
    /// What an uninstall would remove (`helm status`).
    DestroyPlan,
    /// `helm uninstall`.
    Destroy,
}

/// The `helm` job: a chart from the install's store, by digest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HelmJob {
    /// What to do.
    pub action: HelmAction,
    /// The chart, in the install's store.
    pub chart: ArtifactRef,
    /// The release's name.
    pub release: String,
    /// Its namespace.
    pub namespace: String,
    /// Values, rendered (they override the values files).
    #[serde(default)]
    pub values: BTreeMap<String, serde_json::Value>,
    /// Values files' contents, rendered, in order.
    #[serde(default)]
    pub values_files: Vec<String>,
    /// A kubeconfig (from the sandbox's outputs), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<String>,
    /// Where Helm keeps the release (`HELM_DRIVER`: `secret` or
    /// `configmap`); Helm's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_driver: Option<String>,
    /// Adopt objects another release or tool made (`helm upgrade
    /// --take-ownership`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub take_ownership: bool,
    /// Rego policies each rendered object must pass (a plan: `deny` fails
    /// it; `warn` is kept with it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<crate::policy::PolicySource>,
}

/// The `kubernetes_manifest` job: Kubernetes objects applied server-side
/// with `kubectl` (field manager `nuon`), pruning what the component no
/// longer renders.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KubernetesJob {
    /// What to do (the same four steps as a Helm release).
    pub action: HelmAction,
    /// The component, for messages.
    pub component: String,
    /// The objects, rendered (an inline manifest).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
    /// A kustomization to build instead, from the component's artifact.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kustomize: Option<KustomizeBuild>,
    /// The namespace objects without one go to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// A kubeconfig (from the sandbox's outputs), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<String>,
    /// The objects the last apply made (`kind.group/name`, as `kubectl -o
    /// name` gives them): what an apply prunes and a destroy deletes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<String>,
    /// Rego policies each object must pass (a plan: `deny` fails it;
    /// `warn` is kept with it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<crate::policy::PolicySource>,
    /// Objects of other namespaces deleted after an apply
    /// (`NAMESPACE/kind/name`): what a secrets sync no longer writes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub delete_namespaced: Vec<String>,
}

/// A kustomization of a `kubernetes_manifest` job.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct KustomizeBuild {
    /// The component's source, packaged by its build, in the install's store.
    pub artifact: ArtifactRef,
    /// The kustomization's directory in it.
    pub path: String,
    /// `--enable-helm`.
    #[serde(default)]
    pub enable_helm: bool,
    /// `--load-restrictor LoadRestrictionsNone` when `none`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load_restrictor: Option<String>,
}

impl Job for KubernetesJob {
    const KIND: &'static str = "kubernetes_manifest";
}

impl Job for HelmJob {
    const KIND: &'static str = "helm";
}

impl Job for BuildJob {
    const KIND: &'static str = "build";
}

/// The `sync` job: copy an artifact by digest from the vendor's store into
/// the install's store, re-checking the blobs already there. Outputs
/// `{"digest": ..., "copied": N}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncJob {
    /// The artifact, by digest, in the same repository of both stores.
    pub artifact: ArtifactRef,
    /// The tag it gets in the install's store (an image's:
    /// [`crate::app::Component::image_tag`]), so that what reads
    /// `.outputs.image.tag` pulls exactly this digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

impl Job for SyncJob {
    const KIND: &'static str = "sync";
}

/// The state of a job as the control plane and the API report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum JobStatus {
    /// Waiting for its runner to claim it.
    Queued,
    /// An attempt holds a lease and runs it.
    Running,
    /// Finished with exit code 0.
    Succeeded,
    /// Finished with an error, a non-zero exit code, or its runner was lost.
    Failed,
    /// Cancelled through the API.
    Cancelled,
    /// Stopped at its timeout.
    TimedOut,
}

impl JobStatus {
    /// Every status, in lifecycle order.
    pub const ALL: [JobStatus; 6] = [
        JobStatus::Queued,
        JobStatus::Running,
        JobStatus::Succeeded,
        JobStatus::Failed,
        JobStatus::Cancelled,
        JobStatus::TimedOut,
    ];

    /// Whether the job can change no more.
    pub fn is_terminal(self) -> bool {
        !matches!(self, JobStatus::Queued | JobStatus::Running)
    }

    /// The status as the API spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            JobStatus::Queued => "queued",
            JobStatus::Running => "running",
            JobStatus::Succeeded => "succeeded",
            JobStatus::Failed => "failed",
            JobStatus::Cancelled => "cancelled",
            JobStatus::TimedOut => "timed_out",
        }
    }
}

impl fmt::Display for JobStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for JobStatus {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        JobStatus::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| format!("unknown job status {s:?}"))
    }
}

/// How an attempt ended, as the runner reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The work succeeded.
    Succeeded,
    /// The work failed (non-zero exit, plugin error, refused spec).
    Failed,
    /// The work was stopped because the job was cancelled.
    Cancelled,
    /// The work was stopped at its timeout.
    TimedOut,
}

impl From<Outcome> for JobStatus {
    fn from(o: Outcome) -> JobStatus {
        match o {
            Outcome::Succeeded => JobStatus::Succeeded,
            Outcome::Failed => JobStatus::Failed,
            Outcome::Cancelled => JobStatus::Cancelled,
            Outcome::TimedOut => JobStatus::TimedOut,
        }
    }
}

/// The result of one attempt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobResult {
    /// How it ended.
    pub outcome: Outcome,
    /// The exit code of the job's main process, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// A human-readable reason for anything but success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Structured outputs of the job.
    #[serde(default)]
    pub outputs: serde_json::Value,
}

impl JobResult {
    /// A failed result with a reason and no exit code.
    pub fn failed(reason: impl Into<String>) -> Self {
        JobResult {
            outcome: Outcome::Failed,
            exit_code: None,
            reason: Some(reason.into()),
            outputs: serde_json::Value::Null,
        }
    }
}

/// What a debug request asks of an install's runner.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DebugPurpose {
    /// Logs (`kubectl logs ...`, `journalctl ...`).
    Logs,
    /// A debug command.
    #[default]
    Debug,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_strings_round_trip() {
        for st in JobStatus::ALL {
            assert_eq!(st.as_str().parse::<JobStatus>().unwrap(), st);
            assert_eq!(serde_json::to_value(st).unwrap(), st.as_str());
        }
        assert!("done".parse::<JobStatus>().is_err());
    }

    #[test]
    fn payload_is_checked_against_kind() {
        let spec = JobSpec {
            job_id: JobId::generate(),
            org_id: OrgId::generate(),
            runner_id: RunnerId::generate(),
            kind: "exec".into(),
            payload: serde_json::json!({"command": "true", "bogus": 1}),
            timeout_secs: 1,
            retry: RetryPolicy::default(),
            created_at_ms: 0,
            redact: Vec::new(),
            role: None,
            sandbox: Default::default(),
            customer_secrets: Vec::new(),
        };
        let err = spec.payload_as::<ExecJob>().unwrap_err();
        assert!(err.to_string().contains("unknown field `bogus`"), "{err}");
    }
}
