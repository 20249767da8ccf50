//! Runners and their tokens.

use super::*;

/// The runner a runner token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerPrincipal {
    /// The runner.
    pub runner_id: RunnerId,
    /// Its org.
    pub org_id: OrgId,
    /// The session using its token ([`nuon_core::wire::RunnerSession`],
    /// JSON, as stored: what [`RunnerStore::set_runner_session`] compares).
    pub session: Option<String>,
    /// When it last called, ms since the epoch.
    pub last_seen_ms: Option<i64>,
}

/// Runners and their tokens.
#[async_trait]
pub trait RunnerStore: Send + Sync + 'static {
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

    /// Gives a runner of the org the token of hash `token_hash` in place of
    /// its old one (a revoked runner is active again), and forgets its
    /// session. `None` when the org has no such runner.
    async fn rotate_runner_token(
        &self,
        org: &OrgId,
        id: &RunnerId,
        token_hash: &str,
    ) -> Result<Option<RunnerInfo>>;

    /// The runner of a runner token, by the token's hash; `None` when unknown or revoked.
    async fn authenticate_runner(&self, token_hash: &str) -> Result<Option<RunnerPrincipal>>;

    /// The org's build runner.
    async fn build_runner(&self, org: &OrgId) -> Result<Option<RunnerId>>;

    /// Makes `session` (JSON) the one session of the runner's token, if the
    /// stored one is still `expected` (`None`: none yet). Whether it did.
    async fn set_runner_session(
        &self,
        runner: &RunnerId,
        expected: Option<&str>,
        session: &str,
    ) -> Result<bool>;

    /// Keeps the key figures a runner reported (JSON).
    async fn set_runner_telemetry(&self, runner: &RunnerId, telemetry: &str) -> Result<()>;

    /// Every runner whose token is not revoked, of every org, with the
    /// health last recorded for it.
    async fn all_runners(&self) -> Result<Vec<(OrgId, RunnerInfo)>>;

    /// Records a runner's health `health` since `at_ms` if the recorded one
    /// is still `expected` (a transition); whether it was.
    async fn set_runner_health(
        &self,
        runner: &RunnerId,
        expected: RunnerHealth,
        health: RunnerHealth,
        at_ms: i64,
    ) -> Result<bool>;
}
