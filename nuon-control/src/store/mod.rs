//! The domain-level [`Store`] the control plane keeps its state in.
//!
//! One trait, one implementation per database ([`SqliteStore`] now; a
//! PostgreSQL one is designed to follow). Every method that reads or writes
//! org data takes the org, and every runner-side method takes the calling
//! runner, so scoping is in the signature, not left to the caller.

mod postgres;
mod shared;
mod sqlite;

use async_trait::async_trait;
use nuon_core::token::IssuedToken;
use nuon_core::wire::{
    AppInfo, BuildInfo, ClaimedJob, Completion, CompletionAck, JobInfo, LeaseRef, LeaseStatus,
    LogAck, LogBatch, LogPage, OrgInfo, RunnerInfo, TokenInfo, TokenScope, WorkflowInfo,
};
use nuon_core::workflow::{PlannedStep, WorkflowKind};
use nuon_core::{
    AppId, InstallId, JobId, JobSpec, OrgId, OrgSigningKey, RunnerId, TokenId, WorkflowId,
};

pub use postgres::{NOTIFY_GAP, PostgresStore};
pub use sqlite::SqliteStore;

/// The result type of store calls.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The write conflicts with the current state (stale attempt, name taken,
    /// logs pending); `code` is the API's error code.
    #[error("{message}")]
    Conflict {
        /// Stable code: `stale_attempt`, `logs_pending`, `name_taken`.
        code: &'static str,
        /// What and how to fix it.
        message: String,
        /// With `logs_pending`, the highest log line held.
        acked_seq: Option<u64>,
    },
    /// The request is invalid against the stored state.
    #[error("{0}")]
    Invalid(String),
    /// The database failed.
    #[error("database error: {0}")]
    Database(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The store was closed (the server is shutting down).
    #[error("store is closed")]
    Closed,
}

impl StoreError {
    pub(crate) fn stale(message: impl Into<String>) -> Self {
        StoreError::Conflict {
            code: "stale_attempt",
            message: message.into(),
            acked_seq: None,
        }
    }
}

/// The org of an API token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiPrincipal {
    /// The org the token belongs to.
    pub org_id: OrgId,
    /// The token's id.
    pub token_id: TokenId,
    /// `admin` or `read`.
    pub scope: String,
}

/// The runner a runner token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerPrincipal {
    /// The runner.
    pub runner_id: RunnerId,
    /// Its org.
    pub org_id: OrgId,
}

/// A new org with its first admin token.
#[derive(Debug, Clone)]
pub struct NewOrg {
    /// The org.
    pub org_id: OrgId,
    /// Its admin API token (the secret, to hand out once).
    pub admin_token: IssuedToken,
    /// Its job-signing key.
    pub signing_key: OrgSigningKey,
    /// Its build runner.
    pub build_runner: RunnerId,
    /// The build runner's token (the secret, to hand out once).
    pub build_runner_token: IssuedToken,
}

/// A job to queue: the spec and the exact bytes the org's key signed.
#[derive(Debug, Clone)]
pub struct NewJob {
    /// The spec.
    pub spec: JobSpec,
    /// `serde_json::to_string(&spec)`, the signed bytes.
    pub spec_json: String,
    /// The signature of `spec_json`.
    pub signature: String,
}

/// The jobs a claim took.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Claimed {
    /// The jobs, each with its new attempt.
    pub jobs: Vec<ClaimedJob>,
    /// Whether the runner has queued jobs that its org's limit on running
    /// jobs held back: it should look again when a job of the org ends.
    pub held_back: bool,
}

/// What the rescuer did with an attempt whose lease expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rescued {
    /// The job.
    pub job_id: JobId,
    /// Its runner (to wake when the job was queued again).
    pub runner_id: RunnerId,
    /// Its org (whose runners held back by its limit look again).
    pub org_id: OrgId,
    /// Whether the job was queued again (otherwise it ended).
    pub requeued: bool,
}

/// A stored config version. The JSON columns are the API's types, encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredConfig {
    /// 1, 2, 3, ... per app.
    pub version: u32,
    /// When it was synced.
    pub created_at_ms: i64,
    /// How many components it has.
    pub components: u32,
    /// `Vec<ConfigFile>` as JSON.
    pub files_json: String,
    /// `AppConfig` as JSON.
    pub config_json: String,
    /// `Vec<Diagnostic>` (warnings) as JSON.
    pub warnings_json: String,
    /// `Vec<ConfigFile>` of the `path` sources as JSON.
    pub sources_json: String,
}

/// A new install and its runner, created together.
#[derive(Debug, Clone)]
pub struct NewInstall {
    /// The install.
    pub id: InstallId,
    /// Its app.
    pub app_id: AppId,
    /// Unique in the org.
    pub name: String,
    /// The config version it runs.
    pub config_version: u32,
    /// Its runner.
    pub runner_id: RunnerId,
    /// The runner's name (unique among the org's runners).
    pub runner_name: String,
    /// The hash of the runner's token.
    pub runner_token_hash: String,
    /// Plain input values, JSON object.
    pub inputs_json: String,
    /// Sealed sensitive inputs and secrets, JSON (see `secrets`).
    pub sealed_json: String,
    /// `approve-all` or `prompt`.
    pub approval: String,
}

/// A stored install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredInstall {
    /// The install.
    pub id: InstallId,
    /// Unique in the org.
    pub name: String,
    /// Its app.
    pub app_id: AppId,
    /// The config version it runs.
    pub config_version: u32,
    /// Its runner.
    pub runner_id: RunnerId,
    /// Its state.
    pub state: String,
    /// Plain input values, JSON object.
    pub inputs_json: String,
    /// Sealed values, JSON.
    pub sealed_json: String,
    /// Outputs, JSON, once deployed.
    pub outputs_json: Option<String>,
    /// When it was created.
    pub created_at_ms: i64,
    /// `approve-all` or `prompt`.
    pub approval: String,
}

/// A new workflow with its planned steps.
#[derive(Debug, Clone)]
pub struct NewWorkflow {
    /// The workflow.
    pub id: WorkflowId,
    /// The install.
    pub install_id: InstallId,
    /// What it does.
    pub kind: WorkflowKind,
    /// The config version it deploys.
    pub config_version: u32,
    /// Only this component, when asked for one.
    pub component: Option<String>,
    /// Its steps, in order.
    pub steps: Vec<PlannedStep>,
}

/// A change to a workflow step, made by the executor.
#[derive(Debug, Clone, Default)]
pub struct StepUpdate {
    /// The new status.
    pub status: String,
    /// Why (a failure, a skip).
    pub reason: Option<String>,
    /// Its job's outputs, JSON.
    pub outputs_json: Option<String>,
    /// Set the approval time to now (`Some(true)`) or clear it.
    pub approved: Option<bool>,
    /// Forget the job (a retry).
    pub clear_job: bool,
}

/// A credential for Terraform's `http` backend, good for one component's
/// state while one job runs.
#[derive(Debug, Clone)]
pub struct StateToken {
    /// The hash of the token.
    pub hash: String,
    /// The install.
    pub install_id: InstallId,
    /// The component, or `sandbox`.
    pub component: String,
}

/// Who a state token was given to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatePrincipal {
    /// The org.
    pub org_id: OrgId,
    /// The install.
    pub install_id: InstallId,
    /// The only state it may touch.
    pub component: String,
    /// The job it was given to.
    pub job_id: JobId,
}

/// Who holds a Terraform state lock: the lock info Terraform sent, as is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateLock {
    /// Terraform's lock id.
    pub id: String,
    /// Terraform's lock info JSON (ID, Operation, Who, Version, Created, ...).
    pub info: String,
    /// When it was taken.
    pub created_at_ms: i64,
    /// The job whose Terraform took it, when it came with a state token.
    pub job_id: Option<JobId>,
}

/// The Terraform state of one component (or the sandbox) of an install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ComponentState {
    /// The component, or `sandbox`.
    pub component: String,
    /// The newest version, if any was written.
    pub latest: Option<u32>,
    /// How many versions are kept.
    pub versions: u32,
    /// When the newest version was written.
    pub updated_at_ms: Option<i64>,
    /// The lock, if held.
    pub lock: Option<StateLock>,
}

/// A wake-up for the waiters of one replica, announced by another that
/// shares the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// A job was queued for this runner, or one of its jobs cancelled.
    Runner(RunnerId),
    /// New log lines of this job, or its end.
    Logs(JobId),
    /// A running job of this org ended: its runners that its limit on
    /// running jobs held back look again.
    Org(OrgId),
    /// A job of a workflow ended, or a workflow changed: the leader looks again.
    Executor,
    /// Announcements may have been missed: every waiter looks again.
    All,
}

/// The control plane's state.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    // ------------------------------------------------------------- replicas
    /// Tells the other replicas sharing this store (none, for an embedded
    /// store) about a wake-up. Never blocks; may be coalesced.
    fn announce(&self, wake: Wake) {
        let _ = wake;
    }
    /// The other replicas' wake-ups, when the store is shared.
    fn wakeups(&self) -> Option<tokio::sync::broadcast::Receiver<Wake>> {
        None
    }
    /// Takes, or keeps, the maintenance lead: `true` while this replica is
    /// the one that rescues leases, prunes and drives workflows. An embedded
    /// store has one replica, always the leader.
    async fn lead(&self) -> Result<bool> {
        Ok(true)
    }
    /// Deletes the logs of jobs that finished before `finished_before_ms`,
    /// and those jobs when nothing refers to them; returns the rows removed.
    async fn prune(&self, finished_before_ms: i64) -> Result<u64>;

    // ------------------------------------------------------------- terraform state
    /// The install whose runner this is, if any.
    async fn install_of_runner(&self, runner: &RunnerId) -> Result<Option<(OrgId, InstallId)>>;
    /// The newest state of a component: its version and sealed body.
    async fn get_state(
        &self,
        install: &InstallId,
        component: &str,
    ) -> Result<Option<(u32, String)>>;
    /// Writes the next state version. Refused (with the holder) when the
    /// state is locked under another id, or locked and `lock_id` is `None`.
    async fn put_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: Option<&str>,
        sealed: String,
    ) -> Result<Result<u32, StateLock>>;
    /// Takes the lock, or answers who holds it.
    async fn lock_state(
        &self,
        install: &InstallId,
        component: &str,
        lock: StateLock,
    ) -> Result<Result<(), StateLock>>;
    /// Releases the lock `lock_id`; answers the holder when it is another.
    async fn unlock_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: &str,
    ) -> Result<Result<(), StateLock>>;
    /// Releases whatever lock is held, for an operator; returns it.
    async fn force_unlock_state(
        &self,
        org: &OrgId,
        install: &InstallId,
        component: &str,
    ) -> Result<Option<StateLock>>;
    /// Every component with a state or a lock.
    async fn list_states(&self, org: &OrgId, install: &InstallId) -> Result<Vec<ComponentState>>;

    // ------------------------------------------------------------- workflows
    /// Stores a new workflow, pending, with its steps.
    async fn create_workflow(&self, org: &OrgId, workflow: NewWorkflow) -> Result<WorkflowInfo>;
    /// An install's workflows, newest first.
    async fn list_workflows(&self, org: &OrgId, install: &InstallId) -> Result<Vec<WorkflowInfo>>;
    /// One workflow of the org.
    async fn get_workflow(&self, org: &OrgId, id: &WorkflowId) -> Result<Option<WorkflowInfo>>;
    /// Every workflow that is `pending` or `running`, oldest first.
    async fn active_workflows(&self) -> Result<Vec<(OrgId, WorkflowId)>>;
    /// Sets a workflow's status (and its end time, for an ending status).
    async fn set_workflow_status(&self, org: &OrgId, id: &WorkflowId, status: &str) -> Result<()>;
    /// Changes one step.
    async fn update_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        update: StepUpdate,
    ) -> Result<()>;
    /// Queues a step's job and marks the step running, in one transaction,
    /// with the state token its Terraform uses.
    async fn dispatch_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        job: NewJob,
        state_token: Option<StateToken>,
    ) -> Result<()>;
    /// Sets an install's outputs (JSON) and state.
    async fn set_install_outputs(
        &self,
        org: &OrgId,
        id: &InstallId,
        outputs_json: &str,
        state: &str,
    ) -> Result<()>;
    /// Sets an install's state (`provisioning`, `active`, `failed`, ...).
    async fn set_install_state(&self, org: &OrgId, id: &InstallId, state: &str) -> Result<()>;
    /// Points an install at another config version.
    async fn set_install_config(&self, org: &OrgId, id: &InstallId, version: u32) -> Result<()>;
    /// The holder of a state token, while its job has not ended.
    async fn authenticate_state(&self, token_hash: &str) -> Result<Option<StatePrincipal>>;
    /// Releases every state lock taken by `job`'s Terraform; returns them.
    async fn release_locks_of_job(&self, job: &JobId) -> Result<Vec<(String, StateLock)>>;

    // ------------------------------------------------------------- builds
    /// Queues a build job and records it as a build of `component`.
    async fn enqueue_build(
        &self,
        job: NewJob,
        app: &AppId,
        config_version: u32,
        component: &str,
    ) -> Result<BuildInfo>;
    /// An app's builds, newest first.
    async fn list_builds(&self, org: &OrgId, app: &AppId) -> Result<Vec<BuildInfo>>;
    /// One build of the org.
    async fn get_build(&self, org: &OrgId, id: &JobId) -> Result<Option<BuildInfo>>;
    /// The org's build runner.
    async fn build_runner(&self, org: &OrgId) -> Result<Option<RunnerId>>;

    // ------------------------------------------------------------- tokens
    /// The org's id and name.
    async fn get_org(&self, org: &OrgId) -> Result<Option<OrgInfo>>;
    /// Stores a new API token of the org (only its hash).
    async fn create_api_token(
        &self,
        org: &OrgId,
        id: &TokenId,
        name: &str,
        scope: TokenScope,
        token_hash: &str,
    ) -> Result<TokenInfo>;
    /// The org's API tokens.
    async fn list_api_tokens(&self, org: &OrgId) -> Result<Vec<TokenInfo>>;
    /// Revokes an API token of the org; it authenticates nothing after.
    async fn revoke_api_token(&self, org: &OrgId, id: &TokenId) -> Result<Option<TokenInfo>>;

    // ------------------------------------------------------------- apps
    /// Creates an app (409 `name_taken` when the org has one of that name).
    async fn create_app(&self, org: &OrgId, id: &AppId, name: &str) -> Result<AppInfo>;
    /// The org's apps, oldest first.
    async fn list_apps(&self, org: &OrgId) -> Result<Vec<AppInfo>>;
    /// An app of the org, by id or name.
    async fn find_app(&self, org: &OrgId, name_or_id: &str) -> Result<Option<AppInfo>>;
    /// Stores a new config version of an app: the next number.
    async fn add_config(
        &self,
        org: &OrgId,
        app: &AppId,
        config: StoredConfig,
    ) -> Result<StoredConfig>;
    /// The config versions of an app (without files and config).
    async fn list_configs(&self, org: &OrgId, app: &AppId) -> Result<Vec<StoredConfig>>;
    /// One config version of an app; the latest when `version` is `None`.
    async fn get_config(
        &self,
        org: &OrgId,
        app: &AppId,
        version: Option<u32>,
    ) -> Result<Option<StoredConfig>>;

    // ------------------------------------------------------------- installs
    /// Creates an install and its runner in one transaction.
    async fn create_install(&self, org: &OrgId, install: NewInstall) -> Result<StoredInstall>;
    /// The org's installs, oldest first.
    async fn list_installs(&self, org: &OrgId) -> Result<Vec<StoredInstall>>;
    /// An install of the org, by id or name.
    async fn find_install(&self, org: &OrgId, name_or_id: &str) -> Result<Option<StoredInstall>>;
    /// Replaces an install's input values (plain and sealed).
    async fn set_install_inputs(
        &self,
        org: &OrgId,
        id: &InstallId,
        inputs_json: &str,
        sealed_json: &str,
    ) -> Result<Option<StoredInstall>>;

    // ------------------------------------------------------------- orgs
    /// Creates an org with a signing key and an admin token.
    async fn create_org(&self, name: &str) -> Result<NewOrg>;
    /// Sets (or, with `None`, lifts) the limit on how many jobs of the org
    /// named `name` run at once; returns the org. Jobs already running are
    /// left alone: the limit holds back the next claims.
    async fn set_org_limit(&self, name: &str, max_running: Option<u32>) -> Result<OrgId>;
    /// How many orgs exist.
    async fn count_orgs(&self) -> Result<u64>;
    /// The setting `name`: `proposed` is stored unless a value is there
    /// already (set by this or another replica); returns what is stored.
    async fn setting_or_insert(&self, name: &str, proposed: &str) -> Result<String>;
    /// The org and scope of an API token, by the token's hash; `None` when
    /// unknown or revoked.
    async fn authenticate_api(&self, token_hash: &str) -> Result<Option<ApiPrincipal>>;
    /// An org's job-signing key.
    async fn signing_key(&self, org: &OrgId) -> Result<Option<OrgSigningKey>>;

    // ---------------------------------------------------------- runners
    /// Registers a runner under `id` with the hash of its token.
    async fn create_runner(
        &self,
        org: &OrgId,
        id: &RunnerId,
        name: &str,
        token_hash: &str,
    ) -> Result<RunnerInfo>;
    /// The org's runners.
    async fn list_runners(&self, org: &OrgId) -> Result<Vec<RunnerInfo>>;
    /// A runner of the org, by name or id.
    async fn find_runner(&self, org: &OrgId, name_or_id: &str) -> Result<Option<RunnerInfo>>;
    /// Revokes a runner's token.
    async fn revoke_runner(&self, org: &OrgId, id: &RunnerId) -> Result<Option<RunnerInfo>>;
    /// The runner of a runner token, by the token's hash; `None` when unknown or revoked.
    async fn authenticate_runner(&self, token_hash: &str) -> Result<Option<RunnerPrincipal>>;

    // ------------------------------------------------------------- jobs
    /// Queues a job.
    async fn enqueue_job(&self, job: NewJob) -> Result<JobInfo>;
    /// One job of the org.
    async fn get_job(&self, org: &OrgId, id: &JobId) -> Result<Option<JobInfo>>;
    /// The org's newest jobs.
    async fn list_jobs(&self, org: &OrgId, limit: u32) -> Result<Vec<JobInfo>>;
    /// Cancels a queued job at once, or flags a running one for its runner.
    async fn request_cancel(&self, org: &OrgId, id: &JobId) -> Result<Option<JobInfo>>;
    /// Up to `limit` log lines of an org's job after `cursor`.
    async fn read_logs(
        &self,
        org: &OrgId,
        job: &JobId,
        cursor: u64,
        limit: u32,
    ) -> Result<Option<LogPage>>;

    // ------------------------------------------------------- runner side
    /// Claims up to `max` queued jobs of the given kinds for `runner`, each
    /// with a new attempt whose lease lasts `lease_ms`, and no more than its
    /// org's limit on running jobs leaves room for.
    async fn claim(
        &self,
        runner: &RunnerId,
        kinds: &[String],
        max: u32,
        lease_ms: u64,
    ) -> Result<Claimed>;
    /// Extends the runner's leases and says, per lease, whether to go on.
    async fn heartbeat(
        &self,
        runner: &RunnerId,
        leases: &[LeaseRef],
        lease_ms: u64,
    ) -> Result<Vec<LeaseStatus>>;
    /// The state of the runner's leases, without extending them.
    async fn lease_states(
        &self,
        runner: &RunnerId,
        leases: &[LeaseRef],
    ) -> Result<Vec<LeaseStatus>>;
    /// Stores a batch of log lines of the runner's current attempt.
    async fn append_logs(&self, runner: &RunnerId, job: &JobId, batch: LogBatch) -> Result<LogAck>;
    /// Completes the runner's attempt. Idempotent.
    async fn complete(
        &self,
        runner: &RunnerId,
        job: &JobId,
        completion: Completion,
    ) -> Result<CompletionAck>;

    // ------------------------------------------------------- maintenance
    /// Ends every running attempt whose lease expired before `now_ms`.
    async fn rescue_expired(&self, now_ms: i64) -> Result<Vec<Rescued>>;
    /// Gives every running lease at least until `until_ms`; used at start-up,
    /// since no runner could heartbeat while the control plane was down.
    async fn extend_running_leases(&self, until_ms: i64) -> Result<u64>;
}

#[cfg(test)]
mod tests;
