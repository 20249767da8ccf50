//! Removing an install or an app, with everything that is only theirs.
//!
//! Both stores run the same statements, in one transaction: an install's
//! workflows and steps, cron runs, Terraform states, locks and state
//! tokens and its release go; its runner's token is revoked (the runner
//! row stays, for the jobs it ran and the audit trail); then the install.
//! An app goes with its config versions, builds, releases and their
//! rollouts, and only once it has no install.

use super::*;
use nuon_core::wire::ErrorCode;

/// Removing installs and apps.
#[async_trait]
pub trait RemovalStore: Send + Sync {
    /// Removes an install and what is only its (see the module docs);
    /// whether there was one. A conflict `install_busy` while a workflow
    /// of it is pending or running.
    async fn remove_install(&self, org: &OrgId, id: &InstallId) -> Result<bool>;

    /// Removes an app and what is only its; whether there was one. A
    /// conflict `app_has_installs` (naming them) while it has installs.
    async fn remove_app(&self, org: &OrgId, id: &AppId) -> Result<bool>;
}

/// What goes with an install, in order, each keyed by the install's id
/// (`?1`); the invitations' and the runner's also take the time (`?2`).
pub(crate) const INSTALL_ROWS: [&str; 12] = [
    "DELETE FROM workflow_steps WHERE workflow_id IN (SELECT id FROM workflows WHERE install_id = ?1)",
    "DELETE FROM install_summaries WHERE install_id = ?1",
    "DELETE FROM cron_fires WHERE install_id = ?1",
    "DELETE FROM workflows WHERE install_id = ?1",
    "DELETE FROM state_tokens WHERE install_id = ?1",
    "DELETE FROM tf_locks WHERE install_id = ?1",
    "DELETE FROM tf_states WHERE install_id = ?1",
    "DELETE FROM install_releases WHERE install_id = ?1",
    "DELETE FROM install_runner_releases WHERE install_id = ?1",
    "UPDATE invitations SET revoked_at = COALESCE(revoked_at, ?2) WHERE install_id = ?1",
    "UPDATE runners SET revoked_at = COALESCE(revoked_at, ?2) \
     WHERE id = (SELECT runner_id FROM installs WHERE id = ?1)",
    "DELETE FROM installs WHERE id = ?1",
];

/// What goes with an app, in order, each keyed by the app's id (`?1`).
pub(crate) const APP_ROWS: [&str; 6] = [
    "DELETE FROM invitations WHERE app_id = ?1",
    "DELETE FROM rollouts WHERE release_id IN (SELECT id FROM releases WHERE app_id = ?1)",
    "DELETE FROM releases WHERE app_id = ?1",
    "DELETE FROM builds WHERE app_id = ?1",
    "DELETE FROM app_configs WHERE app_id = ?1",
    "DELETE FROM apps WHERE id = ?1",
];

/// The statement for PostgreSQL: `$n` for `?n`.
pub(crate) fn dollars(sql: &str) -> String {
    sql.replace('?', "$")
}

/// The refusal of removing an install that a workflow holds.
pub(crate) fn install_busy(id: &InstallId) -> StoreError {
    StoreError::Conflict {
        code: ErrorCode::InstallBusy,
        message: format!(
            "install {id} has a workflow pending or running: let it end or cancel it (`nuon workflows cancel`), then try again"
        ),
        acked_seq: None,
    }
}

/// The refusal of removing an app that has installs.
pub(crate) fn app_has_installs(names: &[String]) -> StoreError {
    StoreError::Conflict {
        code: ErrorCode::AppHasInstalls,
        message: format!(
            "the app still has {} install(s): {}; delete them first (`nuon installs delete NAME`, or `forget` one whose cloud is gone)",
            names.len(),
            names.join(", ")
        ),
        acked_seq: None,
    }
}

/// The workflow statuses that hold an install.
pub(crate) const ACTIVE: &str = "('pending', 'running', 'cancelling')";
