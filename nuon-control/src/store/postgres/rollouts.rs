//! Rollouts and the release of each install.

use std::collections::BTreeMap;

use nuon_core::rollout::RolloutInfo;
use nuon_core::{ReleaseId, RolloutId};

use super::*;
use crate::store::RolloutStore;
use crate::store::rollouts::{
    ACTIVE_ROLLOUT, overlap, released_rows, rollout_doc, rollout_from, stale_rollout,
};

/// Saves `r` over its version, and records the releases of `released`
/// (in the caller's transaction).
pub(super) async fn save(
    tx: &mut Tx,
    org: &OrgId,
    r: &RolloutInfo,
    released: &[(InstallId, ReleaseId)],
) -> Result<()> {
    let saved = sqlx::query(
        "UPDATE rollouts SET doc = $1, status = $2, version = version + 1 \
         WHERE id = $3 AND org_id = $4 AND version = $5",
    )
    .bind(rollout_doc(r)?)
    .bind(r.status.as_str())
    .bind(r.id.as_str())
    .bind(org.as_str())
    .bind(r.version as i64)
    .execute(&mut **tx)
    .await
    .map_err(db)?
    .rows_affected();
    if saved == 0 {
        return Err(stale_rollout(&r.id));
    }
    let now = now_ms();
    for (install, release, tries) in released_rows(r, released) {
        let q = match tries {
            None => sqlx::query(
                "INSERT INTO install_releases (install_id, org_id, release_id, at) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT (install_id) DO UPDATE SET release_id = excluded.release_id, at = excluded.at",
            )
            .bind(install.as_str())
            .bind(org.as_str())
            .bind(release.as_str())
            .bind(now),
            Some(tries) => sqlx::query(
                "INSERT INTO install_runner_releases (install_id, org_id, release_id, tries, at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (install_id) DO UPDATE SET \
                 release_id = excluded.release_id, tries = excluded.tries, at = excluded.at",
            )
            .bind(install.as_str())
            .bind(org.as_str())
            .bind(release.as_str())
            .bind(tries as i32)
            .bind(now),
        };
        q.execute(&mut **tx).await.map_err(db)?;
    }
    Ok(())
}

fn rollout_row(row: &PgRow) -> Result<RolloutInfo> {
    rollout_from(&get::<String>(row, 0)?, get::<i64>(row, 1)?)
}

#[async_trait]
impl RolloutStore for PostgresStore {
    async fn create_rollout(
        &self,
        org: &OrgId,
        rollout: &RolloutInfo,
        replacing: Option<&RolloutInfo>,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        // One new rollout of the org at a time: the check below sees every
        // other's installs.
        // (An advisory lock, not the org's row: a row lock would wait on,
        // and deadlock with, every insert that references the org.)
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext('rollouts:' || $1))")
            .bind(org.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        if let Some(old) = replacing {
            save(&mut tx, org, old, &[]).await?;
        }
        let active = sqlx::query(AssertSqlSafe(format!(
            "SELECT doc, version FROM rollouts WHERE org_id = $1 AND status IN {ACTIVE_ROLLOUT}"
        )))
        .bind(org.as_str())
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?
        .iter()
        .map(rollout_row)
        .collect::<Result<Vec<_>>>()?;
        overlap(rollout, &active)?;
        sqlx::query(
            "INSERT INTO rollouts (id, org_id, release_id, status, version, doc, created_at) \
             VALUES ($1, $2, $3, $4, 1, $5, $6)",
        )
        .bind(rollout.id.as_str())
        .bind(org.as_str())
        .bind(rollout.release_id.as_str())
        .bind(rollout.status.as_str())
        .bind(rollout_doc(rollout)?)
        .bind(rollout.created_at_ms)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)
    }

    async fn save_rollout(
        &self,
        org: &OrgId,
        rollout: &RolloutInfo,
        released: &[(InstallId, ReleaseId)],
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        save(&mut tx, org, rollout, released).await?;
        tx.commit().await.map_err(db)
    }

    async fn get_rollout(&self, org: &OrgId, id: &RolloutId) -> Result<Option<RolloutInfo>> {
        sqlx::query("SELECT doc, version FROM rollouts WHERE org_id = $1 AND id = $2")
            .bind(org.as_str())
            .bind(id.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .as_ref()
            .map(rollout_row)
            .transpose()
    }

    async fn list_rollouts(
        &self,
        org: &OrgId,
        release: Option<&ReleaseId>,
    ) -> Result<Vec<RolloutInfo>> {
        sqlx::query(
            "SELECT doc, version FROM rollouts WHERE org_id = $1 \
             AND ($2::TEXT IS NULL OR release_id = $2) ORDER BY created_at DESC, id DESC",
        )
        .bind(org.as_str())
        .bind(release.map(|r| r.as_str()))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?
        .iter()
        .map(rollout_row)
        .collect()
    }

    async fn active_rollouts(&self) -> Result<Vec<(OrgId, RolloutId)>> {
        sqlx::query(AssertSqlSafe(format!(
            "SELECT org_id, id FROM rollouts WHERE status IN {ACTIVE_ROLLOUT} ORDER BY created_at, id"
        )))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?
        .iter()
        .map(id_pair)
        .collect()
    }

    async fn install_releases(&self, org: &OrgId) -> Result<BTreeMap<InstallId, ReleaseId>> {
        sqlx::query("SELECT install_id, release_id FROM install_releases WHERE org_id = $1")
            .bind(org.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(db)?
            .iter()
            .map(id_pair)
            .collect()
    }

    async fn install_runner_releases(
        &self,
        org: &OrgId,
    ) -> Result<BTreeMap<InstallId, (ReleaseId, u32)>> {
        sqlx::query(
            "SELECT install_id, release_id, tries FROM install_runner_releases WHERE org_id = $1",
        )
        .bind(org.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?
        .iter()
        .map(|row| {
            let (install, release) = id_pair(row)?;
            Ok((install, (release, get::<i32>(row, 2)? as u32)))
        })
        .collect()
    }

    async fn runner_release_of(
        &self,
        org: &OrgId,
        install: &InstallId,
    ) -> Result<Option<(ReleaseId, u32)>> {
        sqlx::query(
            "SELECT release_id, tries FROM install_runner_releases WHERE org_id = $1 AND install_id = $2",
        )
        .bind(org.as_str())
        .bind(install.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?
        .map(|row| {
            Ok((
                parse_id(&get::<String>(&row, 0)?)?,
                get::<i32>(&row, 1)? as u32,
            ))
        })
        .transpose()
    }
}
