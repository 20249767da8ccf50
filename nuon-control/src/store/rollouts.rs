//! Rollouts, each stored whole under a version, and the release each
//! install has.
//!
//! A rollout is written only over the version it was read at
//! ([`RolloutStore::save_rollout`], and [`NewWorkflow::rollout`] with the
//! workflow it starts, in the same transaction), so a leader that took
//! over from another, or one that restarted mid-rollout, never starts an
//! install's deploy twice: its stale write is refused (`stale_rollout`).

use nuon_core::wire::ErrorCode;
use std::collections::BTreeMap;

use nuon_core::rollout::RolloutInfo;
use nuon_core::{ReleaseId, RolloutId};

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
        message: format!("rollout {id} changed meanwhile: read it again"),
        acked_seq: None,
    }
}
