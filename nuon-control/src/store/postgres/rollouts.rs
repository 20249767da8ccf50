//! Storing a new rollout under an advisory lock per org, so one at a time
//! ([`RolloutCreation`]); the rest of `RolloutStore` is written once.

use nuon_core::rollout::RolloutInfo;

use super::*;
use crate::store::rollouts::{
    ACTIVE_ROLLOUT, RolloutCreation, SAVE_ROLLOUT, overlap, rollout_doc, rollout_from,
    stale_rollout,
};

/// Saves `r` over its version (in the caller's transaction).
async fn save_over(tx: &mut Tx, org: &OrgId, r: &RolloutInfo) -> Result<()> {
    let saved = sqlx::query(SAVE_ROLLOUT)
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
    Ok(())
}

fn rollout_row(row: &PgRow) -> Result<RolloutInfo> {
    rollout_from(&get::<String>(row, 0)?, get::<i64>(row, 1)?)
}

#[async_trait]
impl RolloutCreation for PostgresStore {
    async fn insert_rollout(
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
            save_over(&mut tx, org, old).await?;
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
}
