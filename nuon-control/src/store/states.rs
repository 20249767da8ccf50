//! Terraform state and its locks, behind the `http` backend.

use super::*;

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

/// Terraform state and its locks, behind the `http` backend.
#[async_trait]
pub trait StateStore: Send + Sync + 'static {
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

    /// The holder of a state token, while its job has not ended.
    async fn authenticate_state(&self, token_hash: &str) -> Result<Option<StatePrincipal>>;

    /// Releases every state lock taken by `job`'s Terraform; returns them.
    async fn release_locks_of_job(&self, job: &JobId) -> Result<Vec<(String, StateLock)>>;
}
