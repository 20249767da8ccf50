//! Rollouts, each stored whole under a version, and the release each
//! install has.
//!
//! A rollout is written only over the version it was read at
//! ([`RolloutStore::save_rollout`], and [`NewWorkflow::rollout`] with the
//! workflow it starts, in the same transaction), so a leader that took
//! over from another, or one that restarted mid-rollout, never starts an
//! install's deploy twice: its stale write is refused (`stale_rollout`).
//!
//! Written once for both databases; a new rollout of an org is stored one
//! at a time, under a lock by the org's name (see [`Lock::Name`]).

use nuon_core::wire::ErrorCode;
use std::collections::BTreeMap;

use nuon_core::rollout::RolloutInfo;
use nuon_core::{ReleaseId, RolloutId, now_ms};

use super::rows::{Cells, Record};
use super::sql::{Change, IdPair, Lock, Sql, Stmt, args};
use super::*;

/// Rollouts and the release of each install (and of its runner).
#[async_trait]
pub trait RolloutStore: Send + Sync {
    /// Stores a new rollout (at version 1). With `replacing`, that rollout
    /// is saved in the same transaction, over its version (a rollback and
    /// the rollout it ends). An install takes one active rollout at a
    /// time: a conflict `install_in_rollout`, naming them, when another
    /// active rollout of the org holds one of its installs (checked in the
    /// same transaction).
    async fn create_rollout(
        &self,
        org: &OrgId,
        rollout: &RolloutInfo,
        replacing: Option<&RolloutInfo>,
    ) -> Result<()>;

    /// Saves a rollout over the version it was read at (`rollout.version`,
    /// which the store then raises by one), and records that each of
    /// `released` now has its release. A conflict `stale_rollout` when
    /// someone saved it in between.
    async fn save_rollout(
        &self,
        org: &OrgId,
        rollout: &RolloutInfo,
        released: &[(InstallId, ReleaseId)],
    ) -> Result<()>;

    /// One rollout of the org.
    async fn get_rollout(&self, org: &OrgId, id: &RolloutId) -> Result<Option<RolloutInfo>>;

    /// The org's rollouts (of `release`, when given), newest first.
    async fn list_rollouts(
        &self,
        org: &OrgId,
        release: Option<&ReleaseId>,
    ) -> Result<Vec<RolloutInfo>>;

    /// Every rollout that is running, awaits an approval or stopped, oldest
    /// first.
    async fn active_rollouts(&self) -> Result<Vec<(OrgId, RolloutId)>>;

    /// The release each install of the org has (from the rollouts that
    /// reached it).
    async fn install_releases(&self, org: &OrgId) -> Result<BTreeMap<InstallId, ReleaseId>>;

    /// The runner release each install's runner is asked for (a runner
    /// rollout records it when it asks), with the ask's number.
    async fn install_runner_releases(
        &self,
        org: &OrgId,
    ) -> Result<BTreeMap<InstallId, (ReleaseId, u32)>>;

    /// The runner release one install's runner is asked for.
    async fn runner_release_of(
        &self,
        org: &OrgId,
        install: &InstallId,
    ) -> Result<Option<(ReleaseId, u32)>>;
}

/// Where a save records the release of `released`: an app's release is
/// what the install has; a runner release is what its runner is asked
/// for, with the ask's number (the target's tries).
pub(crate) fn released_rows<'a>(
    r: &'a RolloutInfo,
    released: &'a [(InstallId, ReleaseId)],
) -> impl Iterator<Item = (&'a InstallId, &'a ReleaseId, Option<u32>)> {
    released.iter().map(move |(install, release)| {
        let tries = (r.kind == nuon_core::rollout::RolloutKind::Runner).then(|| {
            r.targets
                .iter()
                .find(|t| &t.install_id == install)
                .map_or(1, |t| t.tries)
        });
        (install, release, tries)
    })
}

/// A rollout as its column keeps it.
pub(crate) fn rollout_doc(r: &RolloutInfo) -> Result<String> {
    serde_json::to_string(r).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// A rollout from its column and version.
pub(crate) fn rollout_from(doc: &str, version: i64) -> Result<RolloutInfo> {
    let mut r: RolloutInfo =
        serde_json::from_str(doc).map_err(|e| StoreError::Database(Box::new(e)))?;
    r.version = version as u64;
    Ok(r)
}

/// The refusal of a new rollout whose installs an active one holds.
pub(crate) fn overlap(new: &RolloutInfo, active: &[RolloutInfo]) -> Result<()> {
    for other in active.iter().filter(|o| o.id != new.id) {
        let taken: Vec<&str> = other
            .targets
            .iter()
            .filter(|t| new.targets.iter().any(|n| n.install_id == t.install_id))
            .map(|t| t.install.as_str())
            .collect();
        if !taken.is_empty() {
            return Err(StoreError::Conflict {
                code: ErrorCode::InstallInRollout,
                message: format!(
                    "rollout {} ({}) still holds {}: let it finish, or `nuon releases cancel` or `rollback` it first",
                    other.id,
                    other.status,
                    taken.join(", ")
                ),
                acked_seq: None,
            });
        }
    }
    Ok(())
}

/// The active statuses, as SQL.
pub(crate) const ACTIVE_ROLLOUT: &str =
    "('running', 'awaiting_approval', 'stopped', 'paused', 'cancelling')";

/// The refusal of a save over a version that is gone.
pub(crate) fn stale_rollout(id: &RolloutId) -> StoreError {
    StoreError::Conflict {
        code: ErrorCode::StaleRollout,
        message: stale_message(id),
        acked_seq: None,
    }
}

/// What [`stale_rollout`] says.
fn stale_message(id: &RolloutId) -> String {
    format!("rollout {id} changed meanwhile: read it again")
}

/// Saves a rollout over the version it was read at; parameters: its
/// document, its status, its id, the org, that version.
pub(super) const SAVE_ROLLOUT: &str = "UPDATE rollouts SET doc = $1, status = $2, \
     version = version + 1 WHERE id = $3 AND org_id = $4 AND version = $5";

/// A rollout read from its row.
struct RolloutRow(RolloutInfo);

impl Record for RolloutRow {
    const COLUMNS: &'static str = "doc, version";
    fn read(r: &impl Cells) -> Result<Self> {
        rollout_from(&r.text(0)?, r.int(1)?).map(RolloutRow)
    }
}

/// The runner release an install's runner is asked for, with the ask's
/// number.
struct RunnerAsk(InstallId, ReleaseId, u32);

impl Record for RunnerAsk {
    const COLUMNS: &'static str = "install_id, release_id, tries";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(RunnerAsk(r.id(0)?, r.id(1)?, r.u32(2)?))
    }
}

/// The statements that save `r` over its version and record the release
/// of each of `released` (see [`released_rows`]), to run in one
/// transaction after reading its version locked (as [`saved_version`]).
pub(super) fn save_stmts(
    org: &OrgId,
    r: &RolloutInfo,
    released: &[(InstallId, ReleaseId)],
) -> Result<Vec<Stmt>> {
    let save = Stmt::new(
        SAVE_ROLLOUT,
        args![
            rollout_doc(r)?,
            r.status.as_str(),
            r.id.as_str(),
            org.as_str(),
            r.version as i64,
        ],
    );
    let now = now_ms();
    let releases = released_rows(r, released).map(|(install, release, tries)| match tries {
        None => Stmt::new(
            "INSERT INTO install_releases (install_id, org_id, release_id, at) \
             VALUES ($1, $2, $3, $4) ON CONFLICT (install_id) DO UPDATE SET \
             release_id = excluded.release_id, at = excluded.at",
            args![install.as_str(), org.as_str(), release.as_str(), now],
        ),
        Some(tries) => Stmt::new(
            "INSERT INTO install_runner_releases (install_id, org_id, release_id, tries, at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT (install_id) DO UPDATE SET \
             release_id = excluded.release_id, tries = excluded.tries, at = excluded.at",
            args![install.as_str(), org.as_str(), release.as_str(), tries, now],
        ),
    });
    Ok(std::iter::once(save).chain(releases).collect())
}

/// The version of the org's rollout `id`, read before saving over it.
fn saved_version(org: &OrgId, id: &RolloutId) -> Stmt {
    Stmt::new(
        "SELECT version FROM rollouts WHERE id = $1 AND org_id = $2",
        args![id.as_str(), org.as_str()],
    )
}

/// Rollouts, written once for both databases.
#[async_trait]
impl<S: Sql + 'static> RolloutStore for S {
    async fn create_rollout(
        &self,
        org: &OrgId,
        rollout: &RolloutInfo,
        replacing: Option<&RolloutInfo>,
    ) -> Result<()> {
        // One new rollout of the org at a time, so that the check of the
        // installs the org's active rollouts hold sees every other's. (A
        // lock by name, not the org's row: a row lock would wait on, and
        // deadlock with, every insert that references the org.)
        let mut first = Vec::new();
        if let Some(old) = replacing {
            let save = save_stmts(org, old, &[])?.into_iter();
            first.extend(
                save.map(|s| s.must_change(ErrorCode::StaleRollout, stale_message(&old.id))),
            );
        }
        let read = Stmt::new(
            format!(
                "SELECT {} FROM rollouts WHERE org_id = $1 AND status IN {ACTIVE_ROLLOUT}",
                RolloutRow::COLUMNS
            ),
            args![org.as_str()],
        );
        let plan = Change::after_lock(Lock::Name(format!("rollouts:{org}")), read).first(first);
        let insert = Stmt::new(
            "INSERT INTO rollouts (id, org_id, release_id, status, version, doc, created_at) \
             VALUES ($1, $2, $3, $4, 1, $5, $6)",
            args![
                rollout.id.as_str(),
                org.as_str(),
                rollout.release_id.as_str(),
                rollout.status.as_str(),
                rollout_doc(rollout)?,
                rollout.created_at_ms,
            ],
        );
        let rollout = rollout.clone();
        self.change(plan, move |rows: Vec<RolloutRow>| {
            let active: Vec<RolloutInfo> = rows.into_iter().map(|RolloutRow(r)| r).collect();
            overlap(&rollout, &active)?;
            Ok((vec![insert], ()))
        })
        .await
    }

    async fn save_rollout(
        &self,
        org: &OrgId,
        rollout: &RolloutInfo,
        released: &[(InstallId, ReleaseId)],
    ) -> Result<()> {
        let stmts = save_stmts(org, rollout, released)?;
        let (id, version) = (rollout.id.clone(), rollout.version as i64);
        // Read locked, so that no other save comes between the check and
        // the write.
        self.change_locked(saved_version(org, &id), move |saved: Vec<i64>| {
            if saved.first() != Some(&version) {
                return Err(stale_rollout(&id));
            }
            Ok((stmts, ()))
        })
        .await
    }

    async fn get_rollout(&self, org: &OrgId, id: &RolloutId) -> Result<Option<RolloutInfo>> {
        let row: Option<RolloutRow> = self
            .query_one(Stmt::new(
                format!(
                    "SELECT {} FROM rollouts WHERE org_id = $1 AND id = $2",
                    RolloutRow::COLUMNS
                ),
                args![org.as_str(), id.as_str()],
            ))
            .await?;
        Ok(row.map(|r| r.0))
    }

    async fn list_rollouts(
        &self,
        org: &OrgId,
        release: Option<&ReleaseId>,
    ) -> Result<Vec<RolloutInfo>> {
        let rows: Vec<RolloutRow> = self
            .query(Stmt::new(
                format!(
                    "SELECT {} FROM rollouts WHERE org_id = $1 \
                     AND (CAST($2 AS TEXT) IS NULL OR release_id = $2) \
                     ORDER BY created_at DESC, id DESC",
                    RolloutRow::COLUMNS
                ),
                args![org.as_str(), release.map(|r| r.as_str())],
            ))
            .await?;
        Ok(rows.into_iter().map(|r| r.0).collect())
    }

    async fn active_rollouts(&self) -> Result<Vec<(OrgId, RolloutId)>> {
        let rows: Vec<IdPair<OrgId, RolloutId>> = self
            .query(Stmt::new(
                format!(
                    "SELECT org_id, id FROM rollouts WHERE status IN {ACTIVE_ROLLOUT} \
                     ORDER BY created_at, id"
                ),
                Vec::new(),
            ))
            .await?;
        Ok(rows.into_iter().map(|IdPair(o, r)| (o, r)).collect())
    }

    async fn install_releases(&self, org: &OrgId) -> Result<BTreeMap<InstallId, ReleaseId>> {
        let rows: Vec<IdPair<InstallId, ReleaseId>> = self
            .query(Stmt::new(
                "SELECT install_id, release_id FROM install_releases WHERE org_id = $1",
                args![org.as_str()],
            ))
            .await?;
        Ok(rows.into_iter().map(|IdPair(i, r)| (i, r)).collect())
    }

    async fn install_runner_releases(
        &self,
        org: &OrgId,
    ) -> Result<BTreeMap<InstallId, (ReleaseId, u32)>> {
        let rows: Vec<RunnerAsk> = self
            .query(Stmt::new(
                format!(
                    "SELECT {} FROM install_runner_releases WHERE org_id = $1",
                    RunnerAsk::COLUMNS
                ),
                args![org.as_str()],
            ))
            .await?;
        Ok(rows.into_iter().map(|a| (a.0, (a.1, a.2))).collect())
    }

    async fn runner_release_of(
        &self,
        org: &OrgId,
        install: &InstallId,
    ) -> Result<Option<(ReleaseId, u32)>> {
        let row: Option<RunnerAsk> = self
            .query_one(Stmt::new(
                format!(
                    "SELECT {} FROM install_runner_releases WHERE org_id = $1 AND install_id = $2",
                    RunnerAsk::COLUMNS
                ),
                args![org.as_str(), install.as_str()],
            ))
            .await?;
        Ok(row.map(|a| (a.1, a.2)))
    }
}
