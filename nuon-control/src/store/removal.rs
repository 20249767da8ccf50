//! Removing an install or an app, with everything that is only theirs.
//!
//! Both stores run the same statements, in one transaction: an install's
//! workflows and steps, cron runs, Terraform states, locks and state
//! tokens and its release go; its runner's token is revoked (the runner
//! row stays, for the jobs it ran and the audit trail); then the install.
//! An app goes with its config versions, builds, releases and their
//! rollouts, and only once it has no install.

use super::rows::{Cells, Record};
use super::sql::{Change, Lock, Sql, Stmt, args};
use super::*;
use nuon_core::now_ms;
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
/// (`$1`); the invitations' and the runner's also take the time (`$2`).
const INSTALL_ROWS: [&str; 12] = [
    "DELETE FROM workflow_steps WHERE workflow_id IN (SELECT id FROM workflows WHERE install_id = $1)",
    "DELETE FROM install_summaries WHERE install_id = $1",
    "DELETE FROM cron_fires WHERE install_id = $1",
    "DELETE FROM workflows WHERE install_id = $1",
    "DELETE FROM state_tokens WHERE install_id = $1",
    "DELETE FROM tf_locks WHERE install_id = $1",
    "DELETE FROM tf_states WHERE install_id = $1",
    "DELETE FROM install_releases WHERE install_id = $1",
    "DELETE FROM install_runner_releases WHERE install_id = $1",
    "UPDATE invitations SET revoked_at = COALESCE(revoked_at, $2) WHERE install_id = $1",
    "UPDATE runners SET revoked_at = COALESCE(revoked_at, $2) \
     WHERE id = (SELECT runner_id FROM installs WHERE id = $1)",
    "DELETE FROM installs WHERE id = $1",
];

/// What goes with an app, in order, each keyed by the app's id (`$1`).
const APP_ROWS: [&str; 7] = [
    "DELETE FROM invitations WHERE app_id = $1",
    "DELETE FROM rollout_targets WHERE rollout_id IN (SELECT id FROM rollouts \
     WHERE release_id IN (SELECT id FROM releases WHERE app_id = $1))",
    "DELETE FROM rollouts WHERE release_id IN (SELECT id FROM releases WHERE app_id = $1)",
    "DELETE FROM releases WHERE app_id = $1",
    "DELETE FROM builds WHERE app_id = $1",
    "DELETE FROM app_configs WHERE app_id = $1",
    "DELETE FROM apps WHERE id = $1",
];

/// The refusal of removing an install that a workflow holds.
fn install_busy(id: &InstallId) -> StoreError {
    StoreError::Conflict {
        code: ErrorCode::InstallBusy,
        message: format!(
            "install {id} has a workflow pending or running: let it end or cancel it (`nuon workflows cancel`), then try again"
        ),
        acked_seq: None,
    }
}

/// The refusal of removing an app that has installs.
fn app_has_installs(names: &[String]) -> StoreError {
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
const ACTIVE: &str = "('pending', 'running', 'cancelling')";

/// Whether the org has the row, and how many rows stand in the way.
struct Found(bool, i64);

impl Record for Found {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(Found(r.int(0)? > 0, r.int(1)?))
    }
}

/// An app's install, by name, on a row of the app (none: a row of the app
/// alone).
struct InstallOf(Option<String>);

impl Record for InstallOf {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(InstallOf(r.opt_text(1)?))
    }
}

/// `sql` with its arguments: the row's id, and the time when it asks.
fn removal(sql: &'static str, id: &str, now: i64) -> Stmt {
    let args = if sql.contains("$2") {
        args![id, now]
    } else {
        args![id]
    };
    Stmt::new(sql, args)
}

/// Removing installs and apps, written once for both databases. The row
/// is locked, then what stands in the way is read in a statement of its
/// own: a workflow created for the install, or an install created for the
/// app, meanwhile is seen.
#[async_trait]
impl<S: Sql + 'static> RemovalStore for S {
    async fn remove_install(&self, org: &OrgId, id: &InstallId) -> Result<bool> {
        let lock = Lock::Rows(Stmt::new(
            "SELECT id FROM installs WHERE id = $1 AND org_id = $2",
            args![id.as_str(), org.as_str()],
        ));
        let read = Stmt::new(
            format!(
                "SELECT (SELECT COUNT(*) FROM installs WHERE id = $1 AND org_id = $2), \
                 (SELECT COUNT(*) FROM workflows WHERE install_id = $1 AND status IN {ACTIVE})"
            ),
            args![id.as_str(), org.as_str()],
        );
        let id = id.clone();
        self.change(Change::after_lock(lock, read), move |rows: Vec<Found>| {
            match rows.into_iter().next() {
                Some(Found(true, 0)) => {}
                Some(Found(true, _)) => return Err(install_busy(&id)),
                _ => return Ok((Vec::new(), false)),
            }
            let now = now_ms();
            let stmts = INSTALL_ROWS
                .iter()
                .map(|sql| removal(sql, id.as_str(), now))
                .collect();
            Ok((stmts, true))
        })
        .await
    }

    async fn remove_app(&self, org: &OrgId, id: &AppId) -> Result<bool> {
        let lock = Lock::Rows(Stmt::new(
            "SELECT id FROM apps WHERE id = $1 AND org_id = $2",
            args![id.as_str(), org.as_str()],
        ));
        let read = Stmt::new(
            "SELECT a.id, i.name FROM apps a LEFT JOIN installs i ON i.app_id = a.id \
             WHERE a.id = $1 AND a.org_id = $2 ORDER BY i.name",
            args![id.as_str(), org.as_str()],
        );
        let id = id.clone();
        self.change(
            Change::after_lock(lock, read),
            move |rows: Vec<InstallOf>| {
                if rows.is_empty() {
                    return Ok((Vec::new(), false));
                }
                let names: Vec<String> = rows.into_iter().filter_map(|InstallOf(n)| n).collect();
                if !names.is_empty() {
                    return Err(app_has_installs(&names));
                }
                let stmts = APP_ROWS
                    .iter()
                    .map(|sql| removal(sql, id.as_str(), 0))
                    .collect();
                Ok((stmts, true))
            },
        )
        .await
    }
}
