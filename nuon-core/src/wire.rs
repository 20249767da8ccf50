//! The JSON types of the Runner API and the Control API, shared by the
//! control plane (`nuon-control`) and the client (`nuon-client`).
//!
//! Runner API (runner token as bearer, on its own listener):
//!
//! | route | body | answer |
//! |---|---|---|
//! | `POST /v1/runner/claim` | [`ClaimRequest`] | [`ClaimResponse`], held up to `wait_ms` |
//! | `POST /v1/runner/heartbeat` | [`HeartbeatRequest`] | [`HeartbeatResponse`], early on cancellation |
//! | `POST /v1/runner/jobs/{id}/logs?attempt=N&first_seq=S` | [`LogBatch`] lines as log records | [`LogAck`]; 409 when the attempt is stale |
//! | `POST /v1/runner/jobs/{id}/complete` | [`Completion`] | [`CompletionAck`]; idempotent; 409 when stale |
//!
//! Control API (API token as bearer), all scoped to the token's org:
//! `POST/GET /v1/runners`, `POST /v1/runners/{id}/revoke`, `POST/GET /v1/jobs`,
//! `GET /v1/jobs/{id}`, `POST /v1/jobs/{id}/cancel`, `GET /v1/jobs/{id}/logs`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use crate::app::{AppConfig, Component, Diagnostic};
pub use crate::app::{ComponentOverride, check_name};
use crate::id::{AppId, DeliveryId, InstallId, JobId, OrgId, RunnerId, TokenId, UserId, WebhookId};
pub use crate::job::DebugPurpose;
use crate::job::{JobResult, JobStatus};
// The domain's states, carried by the wire as they are.
pub use crate::model::*;
/// The API's names of the model's workflow and step.
pub use crate::model::{QueuedJob as JobInfo, Step as WorkflowStepInfo, Workflow as WorkflowInfo};

mod errors;
mod health;
mod installers;
mod installs;
mod releases;
mod runner_releases;
mod secrets;
mod states;
mod telemetry;
mod workflows;
pub use crate::records::{
    LOG_RECORDS_CONTENT_TYPE, LogLine, LogLineRef, LogRecords, LogStream, MAX_LOG_LINE_BYTES,
    RecordError,
};
use crate::workflow::StepRecord;
pub use errors::{ApiError, ApiErrorBody, ErrorCode};
pub use health::{DriftInfo, HealthCheck, InstallDrift, InstallHealth, PendingChange};
pub use installers::{
    CreateInvitation, InstallerInfo, InstallerList, InvitationCreated, InvitationInfo,
    InvitationList,
};
pub use installs::{
    InstallCreated, InstallCursor, InstallInfo, InstallList, PendingResolved, PendingValue,
    PendingValues,
};
pub use releases::{CreateRelease, ReleaseInfo, ReleaseList};
pub use runner_releases::{
    PublishRunnerRelease, RunnerReleaseInfo, RunnerReleaseList, RunnerUpdate,
};
pub use secrets::{InstallSecret, InstallSecrets, UpdateInputs};
pub use states::{ComponentStateInfo, StateList, StateLockInfo, StateUnlocked};
pub use telemetry::{ProbeSeen, RunnerTelemetry, RunnerUpdateFailure, ToolHeld};
pub use workflows::{ApprovalAnswer, ApproveSteps, CreateWorkflow, StepChoice};

/// Route paths, so client and server cannot drift apart.
pub mod routes {
    /// Runner API: long-poll claim.
    pub const CLAIM: &str = "/v1/runner/claim";
    /// Runner API: heartbeat for every lease the runner holds.
    pub const HEARTBEAT: &str = "/v1/runner/heartbeat";
    /// Runner API: append log lines (`{id}` is the job id).
    pub const LOGS: &str = "/v1/runner/jobs/{id}/logs";
    /// Runner API: complete an attempt (`{id}` is the job id).
    pub const COMPLETE: &str = "/v1/runner/jobs/{id}/complete";
    /// Runner API: Terraform's `http` state backend for one component of
    /// the runner's install (GET, POST, LOCK, UNLOCK).
    pub const RUNNER_STATE: &str = "/v1/runner/state/{component}";
    /// Control API: runners.
    pub const RUNNERS: &str = "/v1/runners";
    /// Control API: revoke a runner's token.
    pub const RUNNER_REVOKE: &str = "/v1/runners/{id}/revoke";
    /// Control API: issue a runner a new token (its old one stops working).
    pub const RUNNER_ROTATE_TOKEN: &str = "/v1/runners/{id}/rotate-token";
    /// Control API: jobs.
    pub const JOBS: &str = "/v1/jobs";
    /// Control API: one job.
    pub const JOB: &str = "/v1/jobs/{id}";
    /// Control API: cancel a job.
    pub const JOB_CANCEL: &str = "/v1/jobs/{id}/cancel";
    /// Control API: a job's log (`?after=CURSOR&follow=true`).
    pub const JOB_LOGS: &str = "/v1/jobs/{id}/logs";
    /// Control API: the caller's org.
    pub const ORG: &str = "/v1/org";
    /// Control API: the org's API tokens.
    pub const TOKENS: &str = "/v1/tokens";
    /// Control API: revoke an API token.
    pub const TOKEN_REVOKE: &str = "/v1/tokens/{id}/revoke";
    /// Control API: a one-time code that signs a browser into the
    /// dashboard as the calling token.
    pub const SIGN_IN_CODES: &str = "/v1/sign-in-codes";
    /// Control API: the org's people.
    pub const USERS: &str = "/v1/users";
    /// Control API: one person (by id or email address).
    pub const USER: &str = "/v1/users/{id}";
    /// Control API: start an OpenID Connect sign-in (`?org=NAME`): a
    /// redirect to the provider.
    pub const OIDC_LOGIN: &str = "/v1/auth/oidc/login";
    /// Control API: where the provider sends the browser back.
    pub const OIDC_CALLBACK: &str = "/v1/auth/oidc/callback";
    /// Control API: apps.
    pub const APPS: &str = "/v1/apps";
    /// Control API: one app (by id or name).
    pub const APP: &str = "/v1/apps/{id}";
    /// Control API: an app's config versions (POST syncs a new one).
    pub const APP_CONFIGS: &str = "/v1/apps/{id}/configs";
    /// Control API: one config version of an app.
    pub const APP_CONFIG: &str = "/v1/apps/{id}/configs/{version}";
    /// Control API: the components of an app's latest config.
    pub const APP_COMPONENTS: &str = "/v1/apps/{id}/components";
    /// Control API: installs.
    pub const INSTALLS: &str = "/v1/installs";
    /// Control API: one install (by id or name).
    pub const INSTALL: &str = "/v1/installs/{id}";
    /// Control API: change inputs and secrets and redeploy what reads them.
    pub const INSTALL_UPDATE_INPUTS: &str = "/v1/installs/{id}/update-inputs";
    /// Deploys an install's pending values.
    pub const INSTALL_PENDING_APPLY: &str = "/v1/installs/{id}/pending/apply";
    /// Returns an install's deployed values, dropping the pending ones.
    pub const INSTALL_PENDING_DISCARD: &str = "/v1/installs/{id}/pending/discard";
    /// Control API: remove an install's record only (nothing destroyed).
    pub const INSTALL_FORGET: &str = "/v1/installs/{id}/forget";
    /// Control API: set some of an install's inputs.
    pub const INSTALL_INPUTS: &str = "/v1/installs/{id}/inputs";
    /// Set or remove an install's labels.
    pub const INSTALL_LABELS: &str = "/v1/installs/{id}/labels";
    /// Create and list groups of installs.
    pub const INSTALL_GROUPS: &str = "/v1/install-groups";
    /// One group of installs.
    pub const INSTALL_GROUP: &str = "/v1/install-groups/{name}";
    /// Control API: an install's workflows.
    pub const INSTALL_WORKFLOWS: &str = "/v1/installs/{id}/workflows";
    /// Control API: one workflow with its steps.
    pub const WORKFLOW: &str = "/v1/workflows/{id}";
    /// Control API: approve a workflow's waiting step.
    pub const WORKFLOW_APPROVE: &str = "/v1/workflows/{id}/approve";
    /// Control API: deny a workflow's waiting step.
    pub const WORKFLOW_DENY: &str = "/v1/workflows/{id}/deny";
    /// Control API: answer a workflow's waiting step with any of Nuon's
    /// approval responses.
    pub const WORKFLOW_RESPOND: &str = "/v1/workflows/{id}/respond";
    /// Control API: cancel a workflow.
    pub const WORKFLOW_CANCEL: &str = "/v1/workflows/{id}/cancel";
    /// Control API: retry a workflow's failed step.
    pub const WORKFLOW_RETRY: &str = "/v1/workflows/{id}/retry";
    /// Control API: skip a workflow's failed step and go on.
    pub const WORKFLOW_SKIP: &str = "/v1/workflows/{id}/skip";
    /// Control API: the outputs of an install's sandbox and components.
    pub const INSTALL_OUTPUTS: &str = "/v1/installs/{id}/outputs";
    /// Control API: what a workflow's steps would be given on an install.
    pub const INSTALL_RENDER: &str = "/v1/installs/{id}/render/{workflow}";
    /// Control API: the app's README, rendered for an install.
    pub const INSTALL_README: &str = "/v1/installs/{id}/readme";
    /// An install's secrets: who holds each, and whether it is set.
    pub const INSTALL_SECRETS: &str = "/v1/installs/{id}/secrets";
    /// Control API: an install's health: its runner, its components' last
    /// deploys and its health-check actions.
    pub const INSTALL_HEALTH: &str = "/v1/installs/{id}/health";
    /// Control API: an install's drift: what each drift check found.
    pub const INSTALL_DRIFT: &str = "/v1/installs/{id}/drift";
    /// Control API: an install's components, each on or off.
    pub const INSTALL_COMPONENTS: &str = "/v1/installs/{id}/components";
    /// Control API: turn a toggleable component on for an install.
    pub const INSTALL_COMPONENT_ENABLE: &str = "/v1/installs/{id}/components/{component}/enable";
    /// Control API: turn a toggleable component off for an install.
    pub const INSTALL_COMPONENT_DISABLE: &str = "/v1/installs/{id}/components/{component}/disable";
    /// Control API: an install's own Helm values or Terraform variables
    /// for one component (Nuon's `[components.NAME]` of an install file).
    pub const INSTALL_COMPONENT_OVERRIDES: &str =
        "/v1/installs/{id}/components/{component}/overrides";
    /// Control API: a check the vendor's systems report for an install
    /// (what `[health] required_checks` waits for).
    pub const INSTALL_CHECK: &str = "/v1/installs/{id}/checks/{name}";
    /// Control API: an app's builds.
    pub const APP_BUILDS: &str = "/v1/apps/{id}/builds";
    /// Control API: one build.
    pub const BUILD: &str = "/v1/builds/{id}";
    /// Create and list releases.
    pub const RELEASES: &str = "/v1/releases";
    /// One release.
    pub const RELEASE: &str = "/v1/releases/{id}";
    /// A release's rollouts: start one (or plan it, `dry_run`), list them.
    pub const RELEASE_ROLLOUTS: &str = "/v1/releases/{id}/rollouts";
    /// One rollout, with every install's state.
    pub const ROLLOUT: &str = "/v1/rollouts/{id}";
    /// Go on: start the next wave (one that waits for an approval), or
    /// pass over the installs that failed.
    pub const ROLLOUT_RESUME: &str = "/v1/rollouts/{id}/resume";
    /// Deploy the installs that failed again, then go on.
    pub const ROLLOUT_RETRY: &str = "/v1/rollouts/{id}/retry";
    /// Return every install the rollout reached to its release before.
    pub const ROLLOUT_ROLLBACK: &str = "/v1/rollouts/{id}/rollback";
    /// Start nothing more.
    pub const ROLLOUT_CANCEL: &str = "/v1/rollouts/{id}/cancel";
    /// Control API: the Terraform states of an install.
    pub const INSTALL_STATES: &str = "/v1/installs/{id}/state";
    /// Control API: release a component's state lock by force.
    pub const INSTALL_STATE_UNLOCK: &str = "/v1/installs/{id}/state/{component}/unlock";
    /// Control API: an install's stack (`?format=vm`), with a fresh
    /// one-time token for its phone-home.
    pub const INSTALL_STACK: &str = "/v1/installs/{id}/stack";
    /// Runner API: a stack's first call, with its one-time token (no
    /// runner token yet).
    pub const PHONE_HOME: &str = "/v1/runner/phone-home";
    /// Runner releases: `POST` publishes one, `GET` lists them.
    pub const RUNNER_RELEASES: &str = "/v1/runner-releases";
    /// One runner release, by version.
    pub const RUNNER_RELEASE: &str = "/v1/runner-releases/{version}";
    /// Rollouts of a runner release: `POST` starts one, `GET` lists them.
    pub const RUNNER_RELEASE_ROLLOUTS: &str = "/v1/runner-releases/{version}/rollouts";
    /// Control API: `PUT` a runner release's binary, for the control plane
    /// to serve it to install stacks.
    pub const RUNNER_RELEASE_BINARY: &str = "/v1/runner-releases/{version}/binary";
    /// Runner API: `GET` a runner release's binary (`linux-x86_64`), with
    /// a runner's token or an install stack's one-time token.
    pub const RUNNER_DOWNLOAD: &str = "/v1/runner/releases/{version}/{platform}";
    /// Pause a rollout: what deploys finishes, nothing new starts.
    pub const ROLLOUT_PAUSE: &str = "/v1/rollouts/{id}/pause";
    /// Runner API: the calling runner's settings (its install's
    /// `runner.toml`).
    pub const RUNNER_SETTINGS: &str = "/v1/runner/settings";
    /// Control API: ask an install's runner for logs or to run a debug
    /// command (its runner decides).
    pub const INSTALL_DEBUG: &str = "/v1/installs/{id}/debug";
    /// Control API: the org's audit trail, a page at a time.
    pub const AUDIT: &str = "/v1/audit";
    /// Control API: the org's whole audit trail (or one runner's jobs), as
    /// NDJSON.
    pub const AUDIT_EXPORT: &str = "/v1/audit/export";
    /// Control API: check the org's audit chain.
    pub const AUDIT_VERIFY: &str = "/v1/audit/verify";
    /// Control API: the org's webhooks.
    pub const WEBHOOKS: &str = "/v1/webhooks";
    /// Control API: remove a webhook.
    pub const WEBHOOK_REMOVE: &str = "/v1/webhooks/{id}/remove";
    /// Control API: the org's webhook deliveries, newest first.
    pub const WEBHOOK_DELIVERIES: &str = "/v1/webhooks/deliveries";
    /// Both listeners: Prometheus metrics (no token needed).
    pub const METRICS: &str = "/metrics";
    /// Control API: its OpenAPI 3.1 document (no token needed).
    pub const OPENAPI: &str = "/openapi.json";
    /// Both listeners: liveness.
    pub const HEALTH: &str = "/healthz";

    pub use super::installers::routes::*;

    /// Fills `{id}` in a route.
    pub fn with_id(route: &str, id: &str) -> String {
        route.replace("{id}", id)
    }
}

/// What names of runners, apps, installs and tokens may be: 1 to 64
/// letters, digits, `-`, `_` and `.`.
pub const NAME_PATTERN: &str = "^[A-Za-z0-9._-]{1,64}$";

/// The fewest characters a secret or a sensitive input may have: a shorter
/// value cannot be hidden in a log without hiding ordinary text with it.
pub const MIN_SECRET_CHARS: usize = 4;

/// The header a runner process names its session in, on every Runner API
/// request: `id=ID; host=HOST; pid=PID` (then `; version=V; os=OS;
/// arch=ARCH` from runners that report them), and `; replace` to take the
/// token over from a live session. One token, one live runner: a second
/// session is refused while the first is seen.
pub const SESSION_HEADER: &str = "nuon-runner-session";

/// A runner process using a runner token: the one live session of the
/// token, as the control plane knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunnerSession {
    /// Kept in the runner's work directory: a restart in the same
    /// directory is the same session.
    pub id: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id there.
    pub pid: u32,
    /// The address its requests came from, as the control plane saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addr: Option<String>,
    /// When it took the token, ms since the epoch.
    #[serde(default)]
    pub since_ms: i64,
    /// The runner's version, as it reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Its operating system (`linux`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// Its architecture (`x86_64`, `aarch64`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arch: Option<String>,
}

impl RunnerSession {
    /// The header value ([`SESSION_HEADER`]) naming this session.
    pub fn header(&self, replace: bool) -> String {
        let clean = |s: &str| -> String {
            s.chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'))
                .take(64)
                .collect()
        };
        let mut v = format!(
            "id={}; host={}; pid={}",
            clean(&self.id),
            clean(&self.host),
            self.pid
        );
        for (k, val) in [
            ("version", &self.version),
            ("os", &self.os),
            ("arch", &self.arch),
        ] {
            if let Some(val) = val {
                v.push_str(&format!("; {k}={}", clean(val)));
            }
        }
        if replace {
            v.push_str("; replace");
        }
        v
    }

    /// `VERSION on OS/ARCH`, as far as the runner said.
    pub fn describe_build(&self) -> Option<String> {
        let version = self.version.as_deref()?;
        Some(match (&self.os, &self.arch) {
            (Some(os), Some(arch)) => format!("nuon-runner {version} on {os}/{arch}"),
            _ => format!("nuon-runner {version}"),
        })
    }

    /// Reads a [`SESSION_HEADER`] value: the session, and whether it asks
    /// to take the token over.
    pub fn parse_header(value: &str) -> Result<(RunnerSession, bool), String> {
        let mut s = RunnerSession {
            id: String::new(),
            host: String::new(),
            pid: 0,
            addr: None,
            since_ms: 0,
            version: None,
            os: None,
            arch: None,
        };
        let mut replace = false;
        for part in value.split(';').map(str::trim).filter(|p| !p.is_empty()) {
            match part.split_once('=') {
                Some(("id", v)) => s.id = v.to_owned(),
                Some(("host", v)) => s.host = v.to_owned(),
                Some(("version", v)) => s.version = Some(v.chars().take(64).collect()),
                Some(("os", v)) => s.os = Some(v.chars().take(64).collect()),
                Some(("arch", v)) => s.arch = Some(v.chars().take(64).collect()),
                Some(("pid", v)) => {
                    s.pid = v
                        .parse()
                        .map_err(|_| format!("{SESSION_HEADER}: pid {v:?} is not a number"))?;
                }
                None if part == "replace" => replace = true,
                // Keys a newer runner sends are for a newer control plane.
                _ => {}
            }
        }
        if s.id.is_empty() || s.id.len() > 64 {
            return Err(format!(
                "{SESSION_HEADER}: expected `id=ID; host=HOST; pid=PID` with an id of 1 to 64 characters, got {value:?}"
            ));
        }
        Ok((s, replace))
    }
}

/// The largest request body either API accepts, in bytes.
pub const MAX_BODY_BYTES: usize = 4 * 1024 * 1024;
/// The most lines one [`LogBatch`] may carry.
pub const MAX_LOG_LINES_PER_BATCH: usize = 10_000;

// ---------------------------------------------------------------- Runner API
//
// The bodies a runner sends take fields they do not know and ignore them
// (unlike the Control API's): a runner newer than its control plane, after
// a rollback of the control plane, still claims, beats and completes.

/// Ask for work. The server holds the request until a job is ready or
/// `wait_ms` has passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClaimRequest {
    /// Job kinds this runner can run.
    pub kinds: Vec<String>,
    /// How many jobs it can take now (its free slots).
    pub slots: u32,
    /// How long the server may hold the request, in milliseconds (capped by the server).
    pub wait_ms: u64,
    /// The org signing key the runner trusts as current (`ed25519:BASE64`).
    /// When the org's key has been rotated since, the answer carries the
    /// rotations; a runner that leaves this out gets them whenever there
    /// are any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key: Option<String>,
    /// The runner's key figures, so the vendor sees them without reaching
    /// into the install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<RunnerTelemetry>,
    /// The version of the settings the runner holds. A parked claim of a
    /// runner that sends it is answered (with no job) as soon as its
    /// settings change (an update asked, `env_vars` changed), rather than
    /// at the end of its wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings_version: Option<String>,
}

/// Jobs given to the runner; empty when the wait ran out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClaimResponse {
    /// The claimed jobs, each with a fresh attempt and lease.
    pub jobs: Vec<ClaimedJob>,
    /// The org's signing-key rotations, oldest first, each signed by the
    /// key it replaces; sent when the runner's key is not the current one.
    /// Take them on before checking the jobs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub key_rotations: Vec<crate::SignedRotation>,
    /// The version of the runner's settings now ([`RunnerSettingsInfo`]):
    /// a runner whose settings are of another version fetches them
    /// before it starts the jobs of this answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings_version: Option<String>,
    /// The attempts the control plane's store says this runner holds
    /// (running, confirmed by a heartbeat), told once per runner after a
    /// control plane starts: a runner that ran one of them to its end
    /// reports that end, which a store restored from a backup taken
    /// before then does not know.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub known_leases: Vec<LeaseRef>,
}

/// What the control plane tells a runner to run its jobs with: its
/// install's `runner.toml`, rendered for the install.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunnerSettingsInfo {
    /// Changes whenever the settings may have (claims and heartbeats
    /// carry it).
    pub version: String,
    /// Environment for every job of the runner (`runner.toml`'s
    /// `env_vars`); a job's own environment wins over it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Base64 Ed25519 signature by the org's key of the settings' signed
    /// bytes (the line `nuon-runner-settings`, then the version, the
    /// environment, the update and the watch as JSON): the runner takes no
    /// settings it cannot verify (they reach every job, as signed jobs do).
    #[serde(default)]
    pub signature: String,
    /// The runner version the control plane asks for, while a runner
    /// rollout holds the install: a runner on another version downloads,
    /// checks and switches to it ([`RunnerUpdate`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update: Option<RunnerUpdate>,
    /// The health probes the runner runs between deploys ([`ProbeWatch`]);
    /// none when no deployed component has any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub watch: Option<ProbeWatch>,
}

/// The health probes of an install's deployed components (their
/// `[health]`, rendered), which its runner runs every `interval_ms`
/// between deploys and reports in its telemetry ([`ProbeSeen`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ProbeWatch {
    /// The time between the starts of two rounds, in milliseconds.
    pub interval_ms: u64,
    /// The components watched, each with its probes.
    pub components: Vec<WatchedComponent>,
}

/// One component a runner watches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WatchedComponent {
    /// The component.
    pub component: String,
    /// Its probes, rendered.
    pub probes: Vec<crate::app::HealthProbe>,
}

impl crate::signing::Signed for RunnerSettingsInfo {
    const DOMAIN: &'static str = "nuon-runner-settings";

    /// The version and the environment, and the update and the watch when
    /// there are.
    fn signed_body(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct Signed<'a> {
            version: &'a str,
            env: &'a BTreeMap<String, String>,
            // Left out when none, so that settings without one sign the
            // same bytes as before updates existed; a fixed set of fields
            // when there is one, so that a field added later to a release
            // does not change what a runner of today checks.
            #[serde(skip_serializing_if = "Option::is_none")]
            update: Option<SignedUpdate<'a>>,
            // Left out when none, as the update is; its fields are fixed
            // for the same reason. Exec probes run programs on the
            // runner's host: they are signed as jobs are.
            #[serde(skip_serializing_if = "Option::is_none")]
            watch: Option<SignedWatch<'a>>,
        }
        #[derive(Serialize)]
        struct SignedWatch<'a> {
            interval_ms: u64,
            components: Vec<(&'a str, Vec<SignedProbe<'a>>)>,
        }
        #[derive(Serialize)]
        struct SignedProbe<'a> {
            kind: &'a str,
            name: &'a str,
            url: Option<&'a str>,
            command: &'a [String],
        }
        #[derive(Serialize)]
        struct SignedUpdate<'a> {
            id: &'a str,
            version: &'a str,
            os: &'a str,
            arch: &'a str,
            repository: &'a str,
            digest: &'a str,
            size: u64,
            tries: u32,
        }
        crate::signing::json_body(&Signed {
            version: &self.version,
            env: &self.env,
            update: self.update.as_ref().map(|u| SignedUpdate {
                id: u.release.id.as_str(),
                version: &u.release.version,
                os: &u.release.os,
                arch: &u.release.arch,
                repository: &u.release.repository,
                digest: &u.release.digest,
                size: u.release.size,
                tries: u.tries,
            }),
            watch: self.watch.as_ref().map(|w| SignedWatch {
                interval_ms: w.interval_ms,
                components: w
                    .components
                    .iter()
                    .map(|c| {
                        let probes = c.probes.iter().map(|p| SignedProbe {
                            kind: p.kind.as_str(),
                            name: &p.name,
                            url: p.url.as_deref(),
                            command: &p.command,
                        });
                        (c.component.as_str(), probes.collect())
                    })
                    .collect(),
            }),
        })
    }
}

/// One job as the runner receives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ClaimedJob {
    /// The job.
    pub job_id: JobId,
    /// The attempt number; every later write names it (the fencing token).
    pub attempt: u32,
    /// The exact bytes of the signed [`crate::JobSpec`], as JSON text.
    pub spec: String,
    /// Base64 Ed25519 signature of `spec` by the org's key.
    pub signature: String,
    /// How long the lease lasts without a heartbeat, in milliseconds.
    pub lease_ms: u64,
    /// Base64 Ed25519 signature, by the org's key, of this job's
    /// [`crate::Grant`]: this attempt, for this runner, until
    /// `not_after_ms`. A runner refuses a claim without one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub grant: String,
    /// Until when the runner may start the job (ms since the epoch): the
    /// lease's end and [`crate::Grant::LEEWAY_MS`].
    #[serde(default)]
    pub not_after_ms: i64,
}

/// A lease the runner holds: a job and the attempt it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LeaseRef {
    /// The job.
    pub job_id: JobId,
    /// The attempt.
    pub attempt: u32,
}

/// Extend every lease the runner holds, and wait for cancellations.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HeartbeatRequest {
    /// The leases to extend.
    pub leases: Vec<LeaseRef>,
    /// How long the server may hold the answer when nothing is cancelled, in
    /// milliseconds; it answers at once when one of the jobs is cancelled.
    #[serde(default)]
    pub wait_ms: u64,
    /// The runner's key figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<RunnerTelemetry>,
}

/// What the server says of one lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LeaseState {
    /// Extended; keep working.
    Active,
    /// Extended, but the job was cancelled: stop it and complete as cancelled.
    Cancel,
    /// Not yours any more (expired, given to a newer attempt, or finished): stop the work.
    Stale,
}

/// The server's answer for one lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LeaseStatus {
    /// The job.
    pub job_id: JobId,
    /// The attempt.
    pub attempt: u32,
    /// What to do.
    pub state: LeaseState,
}

/// The answer to a heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct HeartbeatResponse {
    /// One status for each lease in the request, in the same order.
    pub leases: Vec<LeaseStatus>,
    /// The lease length now in force, in milliseconds.
    pub lease_ms: u64,
    /// When the runner should send its next heartbeat at the latest, in milliseconds.
    pub next_heartbeat_ms: u64,
    /// The version of the runner's settings now (see [`ClaimResponse`]);
    /// none in the answer to a heartbeat that waits for nothing (`wait_ms`
    /// 0: the confirmation of a job just claimed, whose claim carried it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings_version: Option<String>,
}

/// Lines `first_seq ..= first_seq + lines.len() - 1` of one attempt's log.
/// Sequence numbers start at 1. Sending a batch twice is harmless: lines the
/// server already has are skipped.
///
/// On the wire the lines are the body, in the record format of
/// [`crate::records`] (content type [`LOG_RECORDS_CONTENT_TYPE`]), and
/// `attempt` and `first_seq` are the query ([`LogBatchQuery`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBatch {
    /// The attempt the lines belong to.
    pub attempt: u32,
    /// The sequence number of the first line.
    pub first_seq: u64,
    /// The lines, in order.
    pub lines: LogRecords,
}

/// The query string of a log batch: `?attempt=N&first_seq=S`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogBatchQuery {
    /// The attempt the lines belong to.
    pub attempt: u32,
    /// The sequence number of the first line.
    pub first_seq: u64,
}

/// The highest sequence number up to which the server holds every line.
/// When `acked_seq + 1 < first_seq` of a batch, the server stored nothing and
/// the runner resends from `acked_seq + 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogAck {
    /// Highest contiguous sequence number stored.
    pub acked_seq: u64,
}

/// Finish an attempt. Idempotent: the same completion twice is accepted once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Completion {
    /// The attempt that finished.
    pub attempt: u32,
    /// How many log lines the attempt wrote in all; the server refuses the
    /// completion (409 `logs_pending`) until it holds them all.
    pub log_lines: u64,
    /// The result.
    pub result: JobResult,
    /// The attempt's last log lines, stored before the completion is
    /// checked: a job whose lines after its last acknowledged batch fit
    /// here ends in one request, not two. A control plane that does not
    /// take them answers 409 `logs_pending`, and the runner sends them as
    /// a batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logs: Option<CompletionLogs>,
}

/// The most bytes of log records a runner puts in a completion; more go in
/// batches first.
pub const MAX_COMPLETION_LOG_BYTES: usize = 64 * 1024;

/// Log lines carried in a [`Completion`]: lines `first_seq ..` of the
/// attempt, as a [`LogBatch`] carries them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CompletionLogs {
    /// The sequence number of the first line.
    pub first_seq: u64,
    /// The lines in the record format of [`crate::records`], at most
    /// [`MAX_COMPLETION_LOG_BYTES`] bytes.
    pub records: String,
}

impl CompletionLogs {
    /// The lines of `batch`.
    pub fn of(batch: &LogBatch) -> Self {
        CompletionLogs {
            first_seq: batch.first_seq,
            records: batch.lines.as_str().to_owned(),
        }
    }

    /// The lines as the batch of `attempt` they are; an error names the
    /// line that is not a record.
    pub fn into_batch(self, attempt: u32) -> Result<LogBatch, String> {
        let first_seq = self.first_seq;
        if self.records.len() > MAX_COMPLETION_LOG_BYTES {
            return Err(format!(
                "a completion may carry at most {MAX_COMPLETION_LOG_BYTES} bytes of log records, got {}: send them as log batches first",
                self.records.len()
            ));
        }
        let lines = LogRecords::parse(self.records.into_bytes()).map_err(|e| {
            format!(
                "line {} of the completion's logs: {}",
                first_seq + e.index as u64,
                e.message
            )
        })?;
        Ok(LogBatch {
            attempt,
            first_seq,
            lines,
        })
    }
}

/// The answer to a completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CompletionAck {
    /// The job's status after the completion.
    pub status: JobStatus,
}

// --------------------------------------------------------------- Control API

/// Register a runner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRunner {
    /// A name unique in the org: letters, digits, `-`, `_`, `.`; at most 64.
    #[schemars(regex(pattern = NAME_PATTERN))]
    pub name: String,
}

/// A runner as the Control API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunnerInfo {
    /// Its id.
    pub id: RunnerId,
    /// Its name.
    pub name: String,
    /// Creation time, ms since the epoch.
    pub created_at_ms: i64,
    /// When it last called the Runner API, ms since the epoch.
    pub last_seen_at_ms: Option<i64>,
    /// Whether its token was revoked.
    pub revoked: bool,
    /// What it is for.
    #[serde(default)]
    pub role: RunnerRole,
    /// The runner process using its token, once one has called.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<RunnerSession>,
    /// Whether it is there now.
    #[serde(default)]
    pub status: RunnerStatus,
    /// Its health from the age of its last call (see [`RunnerHealth`]).
    #[serde(default)]
    pub health: RunnerHealth,
    /// Since when it has had that health (the last recorded transition),
    /// ms since the epoch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_since_ms: Option<i64>,
    /// Its key figures, as its last claim or heartbeat reported them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub telemetry: Option<RunnerTelemetry>,
    /// The name of the install it runs (an install's runner is named
    /// after the install's id, which never changes): filled by
    /// `listRunners`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<String>,
}

/// What a runner is for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RunnerRole {
    /// Registered by hand (`nuon runners create`): runs the jobs it is given.
    #[default]
    Generic,
    /// The runner of one install, made with it.
    Install,
    /// The org's build runner, made with the org: turns component sources
    /// into artifacts.
    Build,
}

impl RunnerRole {
    /// As stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            RunnerRole::Generic => "generic",
            RunnerRole::Install => "install",
            RunnerRole::Build => "build",
        }
    }
}

/// A new runner with its token. The token is shown only here, once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunnerCreated {
    /// The runner.
    pub runner: RunnerInfo,
    /// Its secret token for the Runner API.
    pub token: String,
    /// The org's job-signing public key (`ed25519:BASE64`) to configure it with.
    pub signing_public_key: String,
    /// The Runner API's URL as the control plane knows it (its
    /// `--runner-url`, or its runner listener's address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_api_url: Option<String>,
}

/// A list of runners.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RunnerList {
    /// The runners, oldest first.
    pub runners: Vec<RunnerInfo>,
}

/// Queue a job.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateJob {
    /// The runner, by name or id.
    pub runner: String,
    /// The job kind, e.g. `"exec"`.
    pub kind: String,
    /// The kind's payload, e.g. an [`crate::ExecJob`].
    pub payload: serde_json::Value,
    /// Timeout of one attempt in seconds (default 3600).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
    /// How many attempts in all when attempts are lost (default 1).
    #[serde(default)]
    pub max_attempts: Option<u32>,
    /// Its container image, limits and network, for a runner that runs
    /// jobs in containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<crate::JobSandbox>,
}

/// A list of jobs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct JobList {
    /// The jobs, newest first.
    pub jobs: Vec<JobInfo>,
}

/// One line of a job's log as the Control API returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogEntry {
    /// The attempt that wrote it.
    pub attempt: u32,
    /// Its sequence number within the attempt.
    pub seq: u64,
    /// Its stream.
    pub stream: LogStream,
    /// When the runner read it.
    pub ts_ms: i64,
    /// The text.
    pub text: String,
    /// The cursor to pass as `after` to read what follows this line.
    pub cursor: u64,
}

/// A page of a job's log (`GET /v1/jobs/{id}/logs?after=CURSOR`). With
/// `follow=true` the answer is instead a stream of [`LogEntry`] objects, one
/// JSON object a line, that ends when the job has finished and every line was sent.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogPage {
    /// The lines after the cursor.
    pub lines: Vec<LogEntry>,
    /// The cursor to pass as `after` next time.
    pub next: u64,
    /// Whether the job has finished and this page reaches the end of its log.
    pub complete: bool,
}

// ---------------------------------------------------------------- Orgs and tokens

/// The caller's org.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct OrgInfo {
    /// Its id.
    pub id: OrgId,
    /// Its name.
    pub name: String,
}

/// What an API token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TokenScope {
    /// Read and change everything of the org.
    Admin,
    /// Read everything; start, approve, cancel and retry workflows,
    /// build, release and roll out; every other change is refused (403).
    Deployer,
    /// Read only: every change is refused (403).
    Read,
}

impl TokenScope {
    /// As stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            TokenScope::Admin => "admin",
            TokenScope::Deployer => "deployer",
            TokenScope::Read => "read",
        }
    }
}

/// Create an API token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    /// What it is for.
    #[schemars(regex(pattern = NAME_PATTERN))]
    pub name: String,
    /// What it may do (never more than its person's role allows).
    pub scope: TokenScope,
    /// A service account's token (for CI, scripts), belonging to no
    /// person; admin only. Otherwise a token made with a person's token
    /// is that person's, and one made with a service account's is a
    /// service account's.
    #[serde(default)]
    pub service_account: bool,
}

/// A person's role in an org.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Reads only.
    Viewer,
    /// Reads; starts, approves and cancels workflows, builds, releases and
    /// rolls out.
    Deployer,
    /// Changes everything of the org but its owners.
    Admin,
    /// An admin who may also make and unmake owners.
    Owner,
}

impl Role {
    /// As stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Viewer => "viewer",
            Role::Deployer => "deployer",
            Role::Admin => "admin",
            Role::Owner => "owner",
        }
    }

    /// What a token of this person may do at most.
    pub fn scope(self) -> TokenScope {
        match self {
            Role::Viewer => TokenScope::Read,
            Role::Deployer => TokenScope::Deployer,
            Role::Admin | Role::Owner => TokenScope::Admin,
        }
    }
}

impl std::str::FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "viewer" => Ok(Role::Viewer),
            "deployer" => Ok(Role::Deployer),
            "admin" => Ok(Role::Admin),
            "owner" => Ok(Role::Owner),
            other => Err(format!(
                "{other:?} is not a role: use owner, admin, deployer or viewer"
            )),
        }
    }
}

impl TokenScope {
    /// The lesser of two scopes: a person's token can do no more than
    /// the person's role.
    pub fn at_most(self, other: TokenScope) -> TokenScope {
        let rank = |s: TokenScope| match s {
            TokenScope::Read => 0,
            TokenScope::Deployer => 1,
            TokenScope::Admin => 2,
        };
        if rank(self) <= rank(other) {
            self
        } else {
            other
        }
    }
}

/// Whether a person has signed in yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum UserStatus {
    /// Invited; not signed in yet.
    Invited,
    /// Signed in at least once.
    Active,
}

/// A person of the org.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UserInfo {
    /// Its id.
    pub id: UserId,
    /// The email address the person was invited by (lower case), which
    /// their provider must vouch for at sign-in.
    pub email: String,
    /// What they may do.
    pub role: Role,
    /// Invited, or signed in.
    pub status: UserStatus,
    /// Their name, as their provider gave it at the last sign-in.
    #[serde(default)]
    pub name: Option<String>,
    /// Who invited them (an email address or a token id).
    pub invited_by: String,
    /// When they were invited.
    pub created_at_ms: i64,
    /// When they last signed in.
    #[serde(default)]
    pub last_sign_in_at_ms: Option<i64>,
}

/// Invite a person by email address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InviteUser {
    /// Their email address; their OpenID Connect provider must vouch for
    /// it (`email_verified`) when they sign in.
    pub email: String,
    /// What they may do.
    pub role: Role,
}

/// Change a person's role.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetUserRole {
    /// The new role; it holds for their tokens at once.
    pub role: Role,
}

/// The org's people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UserList {
    /// By email address.
    pub users: Vec<UserInfo>,
}

/// Where an OpenID Connect sign-in starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SignInQuery {
    /// The org to sign in to, by name.
    pub org: String,
}

/// What the provider sends back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SignInCallback {
    /// The authorization code.
    #[serde(default)]
    pub code: Option<String>,
    /// The sign-in's state, as the control plane sent it.
    #[serde(default)]
    pub state: Option<String>,
    /// The provider's error code, when it refused.
    #[serde(default)]
    pub error: Option<String>,
    /// The provider's words about it.
    #[serde(default)]
    pub error_description: Option<String>,
    /// The issuer that answers (RFC 9207), when the provider says: it
    /// must be the configured one.
    #[serde(default)]
    pub iss: Option<String>,
}

/// A finished sign-in: the person, and an API token of theirs that
/// expires (shown only here, once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SignedIn {
    /// Who signed in.
    pub user: UserInfo,
    /// Their new session token.
    pub token: TokenCreated,
}

/// An API token (never its secret).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TokenInfo {
    /// Its id, the part before the dot.
    pub id: TokenId,
    /// What it is for.
    pub name: String,
    /// What it may do.
    pub scope: TokenScope,
    /// When it was made.
    pub created_at_ms: i64,
    /// Whether it was revoked.
    pub revoked: bool,
    /// The person it belongs to (their id); none for a service account's.
    #[serde(default)]
    pub user_id: Option<UserId>,
    /// That person's email address.
    #[serde(default)]
    pub user: Option<String>,
    /// When it stops working (a sign-in's token); none for never.
    #[serde(default)]
    pub expires_at_ms: Option<i64>,
}

/// A new API token with its secret, shown only here, once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TokenCreated {
    /// The token.
    pub token: TokenInfo,
    /// The bearer secret.
    pub secret: String,
}

/// A one-time dashboard sign-in code: the link signs a browser in as the
/// token that made it, once, after the page shows who and which org and
/// the person says yes. A link that was used or is past its time does
/// nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SignInCode {
    /// The code.
    pub code: String,
    /// The link to open: the dashboard's `/login?code=CODE`.
    pub url: String,
    /// When it stops working, ms since the Unix epoch.
    pub expires_at_ms: i64,
}

/// The org's API tokens.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct TokenList {
    /// Oldest first.
    pub tokens: Vec<TokenInfo>,
}

// ---------------------------------------------------------------- Apps and installs

/// Create an app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateApp {
    /// Unique in the org.
    #[schemars(regex(pattern = NAME_PATTERN))]
    pub name: String,
}

/// An app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AppInfo {
    /// Its id.
    pub id: AppId,
    /// Its name.
    pub name: String,
    /// When it was created, ms since the epoch.
    pub created_at_ms: i64,
    /// The newest config version, if one was synced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latest_config: Option<u32>,
}

/// A list of apps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AppList {
    /// The apps, oldest first.
    pub apps: Vec<AppInfo>,
}

/// One file of an app config, as synced.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Relative to the config directory, `/`-separated (`components/db.toml`).
    pub path: String,
    /// The file's text (base64 when `encoding` says so).
    pub contents: String,
    /// `base64` for a binary file of a path source (a plugin's `.wasm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encoding: Option<String>,
}

/// Sync a new config version: the config's files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SyncConfig {
    /// Every file of the config.
    pub files: Vec<ConfigFile>,
    /// The files of the components' `path` sources, relative to the config
    /// directory (`src/app/main.tf`), for the build runner.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<ConfigFile>,
}

/// One immutable config version of an app.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigVersionInfo {
    /// The app.
    pub app_id: AppId,
    /// 1, 2, 3, ... per app.
    pub version: u32,
    /// When it was synced.
    pub created_at_ms: i64,
    /// The config, as the control plane read it.
    pub config: AppConfig,
    /// The files as synced.
    pub files: Vec<ConfigFile>,
    /// Warnings found when it was synced (Nuon keys that are ignored).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Diagnostic>,
    /// Set in the answer of a sync whose files were the latest version's:
    /// no version was made, this is that one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unchanged: bool,
}

/// A config version without its contents, for lists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigVersionSummary {
    /// 1, 2, 3, ... per app.
    pub version: u32,
    /// When it was synced.
    pub created_at_ms: i64,
    /// How many components it has.
    pub components: u32,
}

/// The config versions of an app.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ConfigVersionList {
    /// Oldest first.
    pub configs: Vec<ConfigVersionSummary>,
}

/// The components of an app's latest config, in dependency order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct ComponentList {
    /// The config version they come from.
    pub config_version: u32,
    /// The components.
    pub components: Vec<Component>,
}

/// A change of an install (`PATCH /v1/installs/{id}`): each field that
/// is there.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditInstall {
    /// A new name, unique in the org.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = NAME_PATTERN))]
    pub name: Option<String>,
    /// A new approval mode: `approve-all` or `prompt`. Workflows that
    /// already wait for an approval still wait.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalMode>,
}

/// Create an install of an app, with its runner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateInstall {
    /// The app, by name or id.
    pub app: String,
    /// Unique in the org.
    #[schemars(regex(pattern = NAME_PATTERN))]
    pub name: String,
    /// Input values by name (strings are read as the input's type).
    #[serde(default)]
    pub inputs: BTreeMap<String, serde_json::Value>,
    /// Secret values by name. Write-only: never returned.
    #[serde(default)]
    pub secrets: BTreeMap<String, String>,
    /// `approve-all` (the default: applies run after their plans) or
    /// `prompt` (each apply waits for `nuon workflows approve`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalMode>,
    /// Its labels (`tier = "prod"`), which groups and rollouts select by.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Whether each named toggleable component starts on (Nuon's
    /// `[component_toggles]`); the others start as their
    /// `default_enabled` says.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub components: BTreeMap<String, bool>,
    /// The install's own Helm values or Terraform variables for a
    /// component, by component name (Nuon's `[components.NAME]`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub overrides: BTreeMap<String, ComponentOverride>,
}

/// Set (or, with both texts empty or absent, clear) an install's own
/// values for a component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetComponentOverride {
    /// YAML for a `helm_chart` component (see [`ComponentOverride`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub helm_values: Option<String>,
    /// A `.tfvars` file for a `terraform_module` component.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tf_vars: Option<String>,
    /// Deploy the component with it now (the default) when the install
    /// was provisioned; `false` leaves that to the next deploy.
    #[serde(default = "yes")]
    pub deploy: bool,
}

fn yes() -> bool {
    true
}

impl SetComponentOverride {
    /// The override it sets: `None` when it clears.
    pub fn override_(&self) -> Option<ComponentOverride> {
        ComponentOverride {
            helm_values: self.helm_values.clone(),
            tf_vars: self.tf_vars.clone(),
        }
        .normalized()
    }
}

/// What setting a component's override did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ComponentOverridden {
    /// The component.
    pub component: String,
    /// The override it has now; none when cleared.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrides: Option<ComponentOverride>,
    /// The deploy that applies it; none when the install was never
    /// provisioned, the component is off, or `deploy` was `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowInfo>,
    /// What happened, for people.
    pub message: String,
}

/// A check the vendor's own systems report for an install: a fact only
/// they know (a migration done, a billing account ready). A component's
/// `[health] required_checks` makes its deploy wait until each is
/// reported healthy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PushCheck {
    /// `healthy` or `unhealthy`.
    pub status: CheckStatus,
    /// What it says, for people (at most 1,000 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// Change an install's labels: `set` adds or replaces, `remove` removes
/// (a key not there is no error).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelChange {
    /// Labels to add or replace.
    #[serde(default)]
    pub set: BTreeMap<String, String>,
    /// Keys to remove.
    #[serde(default)]
    pub remove: Vec<String>,
}

impl LabelChange {
    /// The change words make, as `nuon installs label` takes them:
    /// `KEY=VALUE` sets, `KEY-` removes.
    pub fn from_words<S: AsRef<str>>(words: &[S]) -> Result<LabelChange, String> {
        let mut change = LabelChange::default();
        for w in words.iter().map(AsRef::as_ref) {
            if let Some(key) = w.strip_suffix('-').filter(|_| !w.contains('=')) {
                crate::labels::check_key(key)?;
                change.remove.push(key.to_owned());
            } else {
                let (k, v) = crate::labels::parse_label(w)
                    .map_err(|e| format!("{e} (KEY- removes a label)"))?;
                change.set.insert(k, v);
            }
        }
        Ok(change)
    }
}

/// Create a group of installs: every install whose labels match the
/// selector, now and later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateGroup {
    /// Unique in the org.
    #[schemars(regex(pattern = NAME_PATTERN))]
    pub name: String,
    /// A label selector: `region=eu,tier!=trial`, `tier in (prod,staging)`,
    /// `team`, `!legacy`.
    pub selector: String,
}

/// A group of installs and the installs it selects now.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GroupInfo {
    /// Its name.
    pub name: String,
    /// Its selector.
    pub selector: String,
    /// The installs it selects now, by name.
    pub installs: Vec<String>,
    /// When it was created.
    pub created_at_ms: i64,
}

/// The org's groups of installs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct GroupList {
    /// By name.
    pub groups: Vec<GroupInfo>,
}

/// Set some inputs of an install; the others keep their values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetInputs {
    /// Input values by name.
    pub inputs: BTreeMap<String, serde_json::Value>,
}

/// An install removed from the control plane.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstallRemoved {
    /// The install as it was.
    pub install: InstallInfo,
    /// What was not done (a forget destroys nothing).
    pub warning: String,
}

/// What an input or secret change set off.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InputsUpdated {
    /// The install, after (before, on a dry run).
    pub install: InstallInfo,
    /// The components redeployed: those that read a changed value, and
    /// what depends on them.
    pub redeploys: Vec<String>,
    /// The actions of the `pre-update-inputs` and `post-update-inputs`
    /// triggers that run around them (and of `pre-`/`post-secrets-sync`
    /// with a secrets sync).
    pub actions: Vec<String>,
    /// Whether a changed secret is synced into Kubernetes: the workflow
    /// writes the synced secrets again before the redeploys.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub syncs_secrets: bool,
    /// The workflow started (none on a dry run, or when nothing reads the
    /// values and no action is triggered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowInfo>,
    /// Whether this was a dry run.
    #[serde(default)]
    pub dry_run: bool,
}

// ---------------------------------------------------------------- Workflows

/// A component of an install's app, and whether it is on there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InstallComponent {
    /// Its name.
    pub name: String,
    /// Its type (`terraform_module`, `helm_chart`, ...).
    #[serde(rename = "type")]
    pub kind: String,
    /// Whether the install may turn it off (`toggleable`).
    pub toggleable: bool,
    /// Whether it is on for this install.
    pub enabled: bool,
    /// Off because a component it depends on is off (it is skipped by
    /// deploys until that one is on again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_off_by: Option<String>,
    /// Whether an apply of it has recorded outputs on the install.
    pub deployed: bool,
    /// The components it depends on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depends_on: Vec<String>,
    /// The install's own values for it, over the config's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrides: Option<ComponentOverride>,
    /// Its labels, as the config gives them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// An install's components.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InstallComponents {
    /// In dependency order.
    pub components: Vec<InstallComponent>,
}

/// Turn a component on or off.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ToggleComponent {}

/// What turning a component on or off did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ComponentToggled {
    /// The component.
    pub component: String,
    /// Whether it is on now.
    pub enabled: bool,
    /// The workflow that tears it down (off) or deploys it (on); none
    /// when the install was never provisioned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowInfo>,
    /// The components that depend on it: torn down with it, and skipped
    /// by deploys while it is off; deploy them again once it is on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dependents: Vec<String>,
    /// What happened, for people.
    pub message: String,
}

/// The outputs of an install's sandbox and components.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct InstallOutputs {
    /// The sandbox's Terraform outputs.
    #[serde(default)]
    pub sandbox: serde_json::Map<String, serde_json::Value>,
    /// Each applied component's outputs.
    #[serde(default)]
    pub components: BTreeMap<String, serde_json::Map<String, serde_json::Value>>,
    /// The outputs each destroyed component reported at its last apply:
    /// no longer live, kept so that destroying what depended on it can
    /// still render its values.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub destroyed: BTreeMap<String, serde_json::Map<String, serde_json::Value>>,
    /// The outputs Terraform marks sensitive (`sandbox.NAME`,
    /// `COMPONENT.NAME`): the API shows them as `(sensitive)`; they are
    /// rendered into dependents and redacted from their logs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sensitive: Vec<String>,
    /// What each action's last successful run wrote to
    /// `$NUON_ACTIONS_OUTPUT_FILEPATH`, by action name (templates read them
    /// as `.nuon.actions.workflows.NAME.outputs.KEY`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub actions: BTreeMap<String, serde_json::Map<String, serde_json::Value>>,
    /// What the install's stack reported, in Nuon's contract
    /// (`stack::contract`): `.nuon.install_stack.outputs.KEY`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub install_stack: BTreeMap<String, serde_json::Value>,
    /// The Kubernetes Secrets the last secrets sync wrote
    /// (`NAMESPACE/NAME`): what the next one deletes when the config no
    /// longer syncs them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kubernetes_secrets: Vec<String>,
}

impl InstallOutputs {
    /// The outputs `from` reported: `sandbox`, or a component (live, or
    /// as it was at its last apply when destroyed).
    pub fn of(&self, from: &str) -> Option<&serde_json::Map<String, serde_json::Value>> {
        if from == "sandbox" {
            Some(&self.sandbox)
        } else {
            self.components
                .get(from)
                .or_else(|| self.destroyed.get(from))
        }
    }

    /// [`InstallOutputs::of`], to change.
    pub fn of_mut(
        &mut self,
        from: &str,
    ) -> Option<&mut serde_json::Map<String, serde_json::Value>> {
        if from == "sandbox" {
            Some(&mut self.sandbox)
        } else if self.components.contains_key(from) {
            self.components.get_mut(from)
        } else {
            self.destroyed.get_mut(from)
        }
    }

    /// The values of the sensitive outputs.
    pub fn sensitive_values(&self) -> Vec<String> {
        self.sensitive
            .iter()
            .filter_map(|name| {
                let (from, key) = name.split_once('.')?;
                let v = self.of(from)?.get(key)?;
                Some(match v {
                    serde_json::Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
            })
            .collect()
    }

    /// A copy with every sensitive value replaced by `(sensitive)`.
    pub fn masked(&self) -> InstallOutputs {
        let mut out = self.clone();
        for name in &self.sensitive {
            let Some((from, key)) = name.split_once('.') else {
                continue;
            };
            if let Some(v) = out.of_mut(from).and_then(|m| m.get_mut(key)) {
                *v = serde_json::Value::String("(sensitive)".into());
            }
        }
        out
    }
}

/// Build an app's components (of its latest config version).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateBuilds {
    /// Only this component (`sandbox` for the sandbox).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub component: Option<String>,
}

/// A build of a component: a `build` job on the org's build runner.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BuildInfo {
    /// The build's id (its job's id: `nuon builds logs` follows it).
    pub id: JobId,
    /// The app.
    pub app_id: AppId,
    /// The config version it builds.
    pub config_version: u32,
    /// The component, or `sandbox`.
    pub component: String,
    /// Its job's state.
    pub status: JobStatus,
    /// The artifact, once built.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact: Option<crate::job::ArtifactRef>,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was queued.
    pub created_at_ms: i64,
}

/// Builds of an app.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct BuildList {
    /// Newest first.
    pub builds: Vec<BuildInfo>,
}

/// An install's workflows.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WorkflowList {
    /// Newest first.
    pub workflows: Vec<WorkflowInfo>,
}

/// A page of the org's audit trail, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AuditList {
    /// The entries.
    pub entries: Vec<crate::audit::AuditEntry>,
    /// Pass as `after` for the next page; absent on the last one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_after: Option<u64>,
}

/// What checking an audit chain found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct AuditVerification {
    /// How many entries chain, from the first.
    pub entries: u64,
    /// The hash of the last entry that chains: keep it, and a later
    /// rewrite of anything up to it is caught.
    pub head: String,
    /// The first entry that does not chain, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub broken: Option<crate::audit::ChainBreak>,
}

/// Ask an install's runner to run a command; the runner decides
/// (`nuon-runner run --debug-commands off|allow-list FILE|any`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DebugRequest {
    /// The command and its arguments, run without a shell.
    pub command: Vec<String>,
    /// A log request or a debug command.
    #[serde(default)]
    pub purpose: DebugPurpose,
    /// Seconds it may run (default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

/// Add a webhook to the org.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhook {
    /// Where deliveries are posted (`http://` or `https://`).
    pub url: String,
    /// What it is told of (at least one).
    pub events: Vec<crate::webhook::WebhookEvent>,
}

/// A webhook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WebhookInfo {
    /// Its id.
    pub id: WebhookId,
    /// Where deliveries go.
    pub url: String,
    /// What it is told of.
    pub events: Vec<crate::webhook::WebhookEvent>,
    /// When it was added, ms since the epoch.
    pub created_at_ms: i64,
}

/// A webhook just added, with its signing secret (shown only here).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WebhookCreated {
    /// The webhook.
    pub webhook: WebhookInfo,
    /// The HMAC-SHA256 key its deliveries are signed with (`whsec_...`).
    pub secret: String,
}

/// The org's webhooks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WebhookList {
    /// Oldest first.
    pub webhooks: Vec<WebhookInfo>,
}

/// One delivery of an event to a webhook.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DeliveryInfo {
    /// Its id (the `nuon-delivery` header, the same on every try).
    pub id: DeliveryId,
    /// The webhook.
    pub webhook_id: WebhookId,
    /// The event.
    pub event: crate::webhook::WebhookEvent,
    /// `pending` (not yet delivered; retried with backoff), `delivered`,
    /// or `failed` (given up on).
    pub status: DeliveryStatus,
    /// Tries so far.
    pub attempts: u32,
    /// When the event happened, ms since the epoch.
    pub created_at_ms: i64,
    /// When the receiver took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivered_at_ms: Option<i64>,
    /// When it is tried next, while pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_attempt_at_ms: Option<i64>,
    /// Why the last try failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// The body sent.
    pub payload: serde_json::Value,
}

/// Webhook deliveries, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct DeliveryList {
    /// The deliveries.
    pub deliveries: Vec<DeliveryInfo>,
}

/// One file of an install stack.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct StackFile {
    /// Its path in the stack's directory.
    pub path: String,
    /// Its text.
    pub contents: String,
    /// Its mode (`0755` for scripts, `0600` for what holds the token).
    pub mode: u32,
}

/// An install's stack: what the customer applies once in their account to
/// run the install's runner. It carries a one-time token (single use,
/// short-lived, stored hashed): each download issues a new one, and the
/// one before stops working.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct InstallStack {
    /// The install.
    pub install: String,
    /// `vm`: a shell bundle and a systemd unit.
    pub format: String,
    /// The files.
    pub files: Vec<StackFile>,
    /// How to apply it.
    pub instructions: String,
    /// When its one-time token stops working, ms since the epoch.
    pub token_expires_at_ms: i64,
}

/// A stack's first call: its one-time token and the stack's outputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PhoneHome {
    /// The one-time token the stack carries (`stk_...`).
    pub install_token: String,
    /// What the stack made (`region`, `account_id`, role ARNs, ...): the
    /// install's `.nuon.install_stack.outputs.*`.
    #[serde(default)]
    pub outputs: BTreeMap<String, String>,
}

/// What a phone-home gets: the runner's long-lived token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PhoneHomeAnswer {
    /// The install.
    pub install_id: InstallId,
    /// Its runner.
    pub runner_id: RunnerId,
    /// The runner's token (the one before, if any, stops working).
    pub runner_token: String,
    /// The org's job-signing public key.
    pub signing_public_key: String,
}

impl StepRecord for WorkflowStepInfo {
    fn kind(&self) -> StepKind {
        self.kind
    }

    fn target(&self) -> Option<&str> {
        self.target.as_deref()
    }

    fn outputs(&self) -> &serde_json::Value {
        &self.outputs
    }
}

#[cfg(test)]
mod settings_tests {
    use super::*;
    use crate::signing::Signed as _;

    #[test]
    fn a_settings_signature_covers_the_version_and_every_variable() {
        let key = crate::OrgSigningKey::generate();
        let mut s = RunnerSettingsInfo {
            version: "v1".into(),
            env: BTreeMap::from([("TF_VAR_x".to_owned(), "1".to_owned())]),
            signature: String::new(),
            update: None,
            watch: None,
        };
        // Settings without an update sign the bytes they signed before
        // updates existed: older runners verify them.
        assert_eq!(
            s.signed_bytes(),
            b"nuon-runner-settings\n{\"version\":\"v1\",\"env\":{\"TF_VAR_x\":\"1\"}}"
        );
        s.signature = key.sign_now(&s.signed_bytes());
        let public = key.public_key();
        assert!(public.verify(&s.signed_bytes(), &s.signature).is_ok());
        let mut changed = s.clone();
        changed.env.insert("LD_PRELOAD".into(), "/tmp/x.so".into());
        assert!(
            public
                .verify(&changed.signed_bytes(), &s.signature)
                .is_err()
        );
        let mut other = s.clone();
        other.version = "v2".into();
        assert!(public.verify(&other.signed_bytes(), &s.signature).is_err());
        assert!(s.signed_bytes().starts_with(b"nuon-runner-settings\n"));
        // The update asked for is covered too, and a release's own
        // signature never passes for settings (or the other way).
        let release = RunnerReleaseInfo {
            id: crate::ReleaseId::generate(),
            version: "2.0.0".into(),
            os: "linux".into(),
            arch: "x86_64".into(),
            repository: "nuon-runner".into(),
            manifest: format!("sha256:{}", "a".repeat(64)),
            digest: format!("sha256:{}", "b".repeat(64)),
            size: 10,
            signature: String::new(),
            served: false,
            created_at_ms: 0,
            created_by: None,
        };
        let mut asked = s.clone();
        asked.update = Some(RunnerUpdate {
            release: release.clone(),
            tries: 1,
        });
        assert!(public.verify(&asked.signed_bytes(), &s.signature).is_err());
        let mut again = asked.clone();
        again.update.as_mut().unwrap().tries = 2;
        assert_ne!(asked.signed_bytes(), again.signed_bytes());
        let signed = key.sign_now(&release.signed_bytes());
        let mut other = release.clone();
        other.digest = format!("sha256:{}", "c".repeat(64));
        assert!(public.verify(&release.signed_bytes(), &signed).is_ok());
        assert!(public.verify(&other.signed_bytes(), &signed).is_err());
        assert!(public.verify(&asked.signed_bytes(), &signed).is_err());
        // The probes a runner watches are covered, each of their texts:
        // an exec probe runs a program on the runner's host.
        let mut watched = s.clone();
        watched.watch = Some(ProbeWatch {
            interval_ms: 60_000,
            components: vec![WatchedComponent {
                component: "web".into(),
                probes: vec![crate::app::HealthProbe {
                    kind: crate::app::ProbeKind::Exec,
                    name: "ready".into(),
                    url: None,
                    command: vec!["test".into(), "-f".into(), "/ready".into()],
                }],
            }],
        });
        assert!(
            public
                .verify(&watched.signed_bytes(), &s.signature)
                .is_err()
        );
        watched.signature = key.sign_now(&watched.signed_bytes());
        assert!(
            public
                .verify(&watched.signed_bytes(), &watched.signature)
                .is_ok()
        );
        let mut tampered = watched.clone();
        tampered.watch.as_mut().unwrap().components[0].probes[0].command[2] = "/x".into();
        let sig = &watched.signature;
        assert!(public.verify(&tampered.signed_bytes(), sig).is_err());
        let mut slower = watched.clone();
        slower.watch.as_mut().unwrap().interval_ms = 1;
        assert!(public.verify(&slower.signed_bytes(), sig).is_err());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a runner newer than its control plane sends: fields this
    /// version does not know are ignored, in each body and in the result.
    #[test]
    fn runner_bodies_take_fields_they_do_not_know() {
        let claim: ClaimRequest = serde_json::from_value(serde_json::json!({
            "kinds": ["exec"], "slots": 1, "wait_ms": 10, "attempt": 0, "newer": true,
        }))
        .unwrap();
        assert_eq!(claim.kinds, ["exec"]);
        let beat: HeartbeatRequest =
            serde_json::from_value(serde_json::json!({"leases": [], "newer": 1})).unwrap();
        assert!(beat.leases.is_empty());
        let done: Completion = serde_json::from_value(serde_json::json!({
            "attempt": 1, "log_lines": 2, "newer": "x",
            "result": {"outcome": "succeeded", "outputs": {}, "newer": []},
        }))
        .unwrap();
        assert_eq!(done.log_lines, 2);
        // The Control API stays strict.
        assert!(
            serde_json::from_value::<PushCheck>(serde_json::json!({"status": "healthy", "x": 1}))
                .is_err()
        );
    }
}
