//! Storing a new rollout on SQLite's one writer, so one at a time
//! ([`RolloutCreation`]); the rest of `RolloutStore` is written once.

use nuon_core::rollout::RolloutInfo;

use super::*;
use crate::store::rollouts::{
    ACTIVE_ROLLOUT, RolloutCreation, SAVE_ROLLOUT, overlap, rollout_doc, rollout_from,
    stale_rollout,
};
use crate::store::sql::sqlite_placeholders;

/// Saves `r` over its version (in the caller's transaction).
fn save_over(conn: &Connection, org: &OrgId, r: &RolloutInfo) -> Result<()> {
    let saved = conn
        .execute(
            &sqlite_placeholders(SAVE_ROLLOUT),
            params![
                rollout_doc(r)?,
                r.status.as_str(),
                r.id.as_str(),
                org.as_str(),
                r.version as i64
            ],
        )
        .map_err(db_err)?;
    if saved == 0 {
        return Err(stale_rollout(&r.id));
    }
    Ok(())
}

#[async_trait]
impl RolloutCreation for SqliteStore {
    async fn insert_rollout(
        &self,
        org: &OrgId,
        rollout: &RolloutInfo,
        replacing: Option<&RolloutInfo>,
    ) -> Result<()> {
        let org = org.clone();
        let (r, old) = (rollout.clone(), replacing.cloned());
        let doc = rollout_doc(&r)?;
        self.write(move |conn| {
            if let Some(old) = &old {
                save_over(conn, &org, old)?;
            }
            let active = all_rows(
                conn,
                &format!(
                    "SELECT doc, version FROM rollouts WHERE org_id = ?1 AND status IN {ACTIVE_ROLLOUT}"
                ),
                [org.as_str()],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
            )?
            .iter()
            .map(|(doc, v)| rollout_from(doc, *v))
            .collect::<Result<Vec<_>>>()?;
            overlap(&r, &active)?;
            conn.execute(
                "INSERT INTO rollouts (id, org_id, release_id, status, version, doc, created_at) \
                 VALUES (?1, ?2, ?3, ?4, 1, ?5, ?6)",
                params![
                    r.id.as_str(),
                    org.as_str(),
                    r.release_id.as_str(),
                    r.status.as_str(),
                    doc,
                    r.created_at_ms
                ],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }
}
