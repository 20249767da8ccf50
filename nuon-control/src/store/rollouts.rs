//! Rollouts, each stored under a version, and the release each install
//! has.
//!
//! A rollout is its head (`rollouts.doc`: every field but its installs)
//! and one row per install (`rollout_targets`), so that starting one
//! install of 10,000 writes that install's row and the head, not the
//! whole rollout ([`RolloutSave`]). A rollout stored whole in its `doc` (by
//! an earlier version) is read as it is; its first save writes its rows.
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

use nuon_core::rollout::{RolloutInfo, RolloutTarget};
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
        replacing: Option<&RolloutSave>,
    ) -> Result<()>;

    /// Saves a rollout over the version it was read at (`save.head.version`,
    /// which the store then raises by one): its head and the installs the
    /// save holds. Records that each of `released` now has its release. A
    /// conflict `stale_rollout` when someone saved it in between.
    async fn save_rollout(
        &self,
        org: &OrgId,
        save: &RolloutSave,
        released: &[(InstallId, ReleaseId)],
    ) -> Result<()>;

    /// One rollout of the org.
    async fn get_rollout(&self, org: &OrgId, id: &RolloutId) -> Result<Option<RolloutInfo>>;

    /// The version of one rollout of the org, and whether its installs
    /// are stored as rows (a rollout stored whole by an earlier version is
    /// not, until its first whole save): what a reader that keeps the
    /// rollout checks before reading it again.
    async fn rollout_version(&self, org: &OrgId, id: &RolloutId) -> Result<Option<(u64, bool)>>;

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

/// What a save of a rollout writes: its head, and the installs that
/// changed since it was read (each with its index), or all of them.
#[derive(Debug, Clone)]
pub struct RolloutSave {
    /// The rollout without its installs, at the version it was read at.
    pub head: RolloutInfo,
    /// The installs written, each with its index in the rollout.
    pub targets: Vec<(usize, RolloutTarget)>,
}

impl RolloutSave {
    /// All of `r`: its head and every install.
    pub fn whole(r: &RolloutInfo) -> RolloutSave {
        RolloutSave {
            head: r.head(),
            targets: r.targets.iter().cloned().enumerate().collect(),
        }
    }

    /// `r`'s head and the installs of `changed` (indexes into its
    /// targets; repeats and out-of-range ones left out).
    pub fn of(r: &RolloutInfo, changed: impl IntoIterator<Item = usize>) -> RolloutSave {
        let mut idx: Vec<usize> = changed
            .into_iter()
            .filter(|&i| i < r.targets.len())
            .collect();
        idx.sort_unstable();
        idx.dedup();
        RolloutSave {
            head: r.head(),
            targets: idx.into_iter().map(|i| (i, r.targets[i].clone())).collect(),
        }
    }

    /// The rollout's id.
    pub fn id(&self) -> &RolloutId {
        &self.head.id
    }
}

/// Where a save records the release of `released`: an app's release is
/// what the install has; a runner release is what its runner is asked
/// for, with the ask's number (the target's tries, from the save).
pub(crate) fn released_rows<'a>(
    save: &'a RolloutSave,
    released: &'a [(InstallId, ReleaseId)],
) -> impl Iterator<Item = (&'a InstallId, &'a ReleaseId, Option<u32>)> {
    released.iter().map(move |(install, release)| {
        let tries = (save.head.kind == nuon_core::rollout::RolloutKind::Runner).then(|| {
            save.targets
                .iter()
                .find(|(_, t)| &t.install_id == install)
                .map_or(1, |(_, t)| t.tries)
        });
        (install, release, tries)
    })
}

/// The statements that write `targets` of rollout `id` as rows, many to a
/// statement.
fn target_stmts(id: &RolloutId, targets: &[(usize, RolloutTarget)]) -> Result<Vec<Stmt>> {
    const ROWS: usize = 500;
    let mut out = Vec::new();
    for chunk in targets.chunks(ROWS) {
        let mut values = Vec::with_capacity(chunk.len());
        let mut a = Vec::with_capacity(chunk.len() * 3);
        for (n, (i, t)) in chunk.iter().enumerate() {
            values.push(format!("(${}, ${}, ${})", 3 * n + 1, 3 * n + 2, 3 * n + 3));
            a.extend(args![
                id.as_str(),
                *i as i64,
                serde_json::to_string(t).map_err(|e| StoreError::Invalid(e.to_string()))?,
            ]);
        }
        out.push(Stmt::new(
            format!(
                "INSERT INTO rollout_targets (rollout_id, idx, doc) VALUES {} \
                 ON CONFLICT (rollout_id, idx) DO UPDATE SET doc = excluded.doc",
                values.join(", ")
            ),
            a,
        ));
    }
    Ok(out)
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

/// A rollout read from its row (with the installs its `doc` holds, when
/// it was stored whole).
struct RolloutRow(RolloutInfo);

impl Record for RolloutRow {
    const COLUMNS: &'static str = "doc, version";
    fn read(r: &impl Cells) -> Result<Self> {
        rollout_from(&r.text(0)?, r.int(1)?).map(RolloutRow)
    }
}

/// One install of a rollout, from its row (read in order of its index).
struct TargetRow(RolloutId, RolloutTarget);

impl Record for TargetRow {
    const COLUMNS: &'static str = "rollout_id, idx, doc";
    fn read(r: &impl Cells) -> Result<Self> {
        let target =
            serde_json::from_str(&r.text(2)?).map_err(|e| StoreError::Database(Box::new(e)))?;
        Ok(TargetRow(r.id(0)?, target))
    }
}

/// `heads` with their installs from `rows` (ordered by rollout and index).
fn with_targets(heads: Vec<RolloutRow>, rows: Vec<TargetRow>) -> Vec<RolloutInfo> {
    let mut by_id: std::collections::HashMap<RolloutId, Vec<RolloutTarget>> =
        std::collections::HashMap::new();
    for TargetRow(id, t) in rows {
        by_id.entry(id).or_default().push(t);
    }
    heads
        .into_iter()
        .map(|RolloutRow(mut r)| {
            if let Some(targets) = by_id.remove(&r.id) {
                r.targets.extend(targets);
            }
            r
        })
        .collect()
}

/// The version of a rollout and whether its installs are rows.
struct VersionRow(i64, bool);

impl Record for VersionRow {
    const COLUMNS: &'static str =
        "version, EXISTS (SELECT 1 FROM rollout_targets t WHERE t.rollout_id = rollouts.id)";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(VersionRow(r.int(0)?, r.flag(1)?))
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
    save: &RolloutSave,
    released: &[(InstallId, ReleaseId)],
) -> Result<Vec<Stmt>> {
    let r = &save.head;
    let head = Stmt::new(
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
    let targets = target_stmts(&r.id, &save.targets)?;
    let releases = released_rows(save, released).map(|(install, release, tries)| match tries {
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
    Ok(std::iter::once(head)
        .chain(targets)
        .chain(releases)
        .collect())
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
        replacing: Option<&RolloutSave>,
    ) -> Result<()> {
        // One new rollout of the org at a time, so that the check of the
        // installs the org's active rollouts hold sees every other's. (A
        // lock by name, not the org's row: a row lock would wait on, and
        // deadlock with, every insert that references the org.)
        let mut first = Vec::new();
        if let Some(old) = replacing {
            let save = save_stmts(org, old, &[])?.into_iter();
            // The head's update must find its version; the rows follow.
            let mut save = save;
            if let Some(head) = save.next() {
                first.push(head.must_change(ErrorCode::StaleRollout, stale_message(old.id())));
            }
            first.extend(save);
        }
        // The installs the org's active rollouts hold, whole or as rows.
        let read = Stmt::new(
            format!(
                "SELECT id, doc, version, -1 FROM rollouts WHERE org_id = $1 AND status IN {ACTIVE_ROLLOUT} \
                 UNION ALL SELECT t.rollout_id, t.doc, 0, t.idx FROM rollout_targets t \
                 JOIN rollouts r ON r.id = t.rollout_id \
                 WHERE r.org_id = $1 AND r.status IN {ACTIVE_ROLLOUT} ORDER BY 4"
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
                rollout_doc(&rollout.head())?,
                rollout.created_at_ms,
            ],
        );
        let all: Vec<(usize, RolloutTarget)> =
            rollout.targets.iter().cloned().enumerate().collect();
        let rows = target_stmts(&rollout.id, &all)?;
        let rollout = rollout.clone();
        self.change(plan, move |found: Vec<ActiveRow>| {
            let active = ActiveRow::assemble(found)?;
            overlap(&rollout, &active)?;
            Ok((std::iter::once(insert).chain(rows).collect(), ()))
        })
        .await
    }

    async fn save_rollout(
        &self,
        org: &OrgId,
        save: &RolloutSave,
        released: &[(InstallId, ReleaseId)],
    ) -> Result<()> {
        let stmts = save_stmts(org, save, released)?;
        let (id, version) = (save.id().clone(), save.head.version as i64);
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
        let Some(row) = row else {
            return Ok(None);
        };
        let rows: Vec<TargetRow> = self
            .query(Stmt::new(
                format!(
                    "SELECT {} FROM rollout_targets WHERE rollout_id = $1 ORDER BY idx",
                    TargetRow::COLUMNS
                ),
                args![id.as_str()],
            ))
            .await?;
        Ok(with_targets(vec![row], rows).pop())
    }

    async fn rollout_version(&self, org: &OrgId, id: &RolloutId) -> Result<Option<(u64, bool)>> {
        let row: Option<VersionRow> = self
            .query_one(Stmt::new(
                format!(
                    "SELECT {} FROM rollouts WHERE org_id = $1 AND id = $2",
                    VersionRow::COLUMNS
                ),
                args![org.as_str(), id.as_str()],
            ))
            .await?;
        Ok(row.map(|VersionRow(v, rows)| (v as u64, rows)))
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
        let targets: Vec<TargetRow> = self
            .query(Stmt::new(
                format!(
                    "SELECT {} FROM rollout_targets WHERE rollout_id IN \
                     (SELECT id FROM rollouts WHERE org_id = $1 \
                     AND (CAST($2 AS TEXT) IS NULL OR release_id = $2)) ORDER BY rollout_id, idx",
                    TargetRow::COLUMNS
                ),
                args![org.as_str(), release.map(|r| r.as_str())],
            ))
            .await?;
        Ok(with_targets(rows, targets))
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

/// A row of the active rollouts a new one is checked against: a head
/// (`idx` -1, with its version) or one install of one (its index).
struct ActiveRow(RolloutId, String, i64, i64);

impl Record for ActiveRow {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(ActiveRow(r.id(0)?, r.text(1)?, r.int(2)?, r.int(3)?))
    }
}

impl ActiveRow {
    /// The rollouts the rows make (heads first, then installs in order).
    fn assemble(rows: Vec<ActiveRow>) -> Result<Vec<RolloutInfo>> {
        let mut out: Vec<RolloutInfo> = Vec::new();
        for ActiveRow(id, doc, version, idx) in rows {
            if idx < 0 {
                out.push(rollout_from(&doc, version)?);
            } else if let Some(r) = out.iter_mut().find(|r| r.id == id) {
                r.targets.push(
                    serde_json::from_str(&doc).map_err(|e| StoreError::Database(Box::new(e)))?,
                );
            }
        }
        Ok(out)
    }
}
