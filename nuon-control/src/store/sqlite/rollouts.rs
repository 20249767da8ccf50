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
pub(super) fn save(
    conn: &Connection,
    org: &OrgId,
    r: &RolloutInfo,
    released: &[(InstallId, ReleaseId)],
) -> Result<()> {
    let doc = rollout_doc(r)?;
    let saved = conn
        .execute(
            "UPDATE rollouts SET doc = ?1, status = ?2, version = version + 1 \
             WHERE id = ?3 AND org_id = ?4 AND version = ?5",
            params![
                doc,
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
    let now = now_ms();
    for (install, release, tries) in released_rows(r, released) {
        match tries {
            None => conn.execute(
                "INSERT INTO install_releases (install_id, org_id, release_id, at) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT (install_id) DO UPDATE SET release_id = excluded.release_id, at = excluded.at",
                params![install.as_str(), org.as_str(), release.as_str(), now],
            ),
            Some(tries) => conn.execute(
                "INSERT INTO install_runner_releases (install_id, org_id, release_id, tries, at) \
                 VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (install_id) DO UPDATE SET \
                 release_id = excluded.release_id, tries = excluded.tries, at = excluded.at",
                params![install.as_str(), org.as_str(), release.as_str(), tries, now],
            ),
        }
        .map_err(db_err)?;
    }
    Ok(())
}

#[async_trait]
impl RolloutStore for SqliteStore {
    async fn create_rollout(
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
                save(conn, &org, old, &[])?;
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

    async fn save_rollout(
        &self,
        org: &OrgId,
        rollout: &RolloutInfo,
        released: &[(InstallId, ReleaseId)],
    ) -> Result<()> {
        let (org, r, released) = (org.clone(), rollout.clone(), released.to_vec());
        self.write(move |conn| save(conn, &org, &r, &released))
            .await
    }

    async fn get_rollout(&self, org: &OrgId, id: &RolloutId) -> Result<Option<RolloutInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.read(move |conn| {
            one_row(
                conn,
                "SELECT doc, version FROM rollouts WHERE org_id = ?1 AND id = ?2",
                params![org.as_str(), id.as_str()],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
            )?
            .map(|(doc, v)| rollout_from(&doc, v))
            .transpose()
        })
        .await
    }

    async fn list_rollouts(
        &self,
        org: &OrgId,
        release: Option<&ReleaseId>,
    ) -> Result<Vec<RolloutInfo>> {
        let (org, release) = (org.clone(), release.cloned());
        self.read(move |conn| {
            let rows = all_rows(
                conn,
                "SELECT doc, version FROM rollouts WHERE org_id = ?1 \
                 AND (?2 IS NULL OR release_id = ?2) ORDER BY created_at DESC, id DESC",
                params![org.as_str(), release.as_ref().map(|r| r.as_str())],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
            )?;
            rows.iter().map(|(doc, v)| rollout_from(doc, *v)).collect()
        })
        .await
    }

    async fn active_rollouts(&self) -> Result<Vec<(OrgId, RolloutId)>> {
        self.read(move |conn| {
            all_rows(
                conn,
                &format!(
                    "SELECT org_id, id FROM rollouts WHERE status IN {ACTIVE_ROLLOUT} ORDER BY created_at, id"
                ),
                [],
                |r| Ok((id_at(r, 0)?, id_at(r, 1)?)),
            )
        })
        .await
    }

    async fn install_releases(&self, org: &OrgId) -> Result<BTreeMap<InstallId, ReleaseId>> {
        let org = org.clone();
        self.read(move |conn| {
            Ok(all_rows(
                conn,
                "SELECT install_id, release_id FROM install_releases WHERE org_id = ?1",
                [org.as_str()],
                |r| Ok((id_at(r, 0)?, id_at(r, 1)?)),
            )?
            .into_iter()
            .collect())
        })
        .await
    }

    async fn install_runner_releases(
        &self,
        org: &OrgId,
    ) -> Result<BTreeMap<InstallId, (ReleaseId, u32)>> {
        let org = org.clone();
        self.read(move |conn| {
            Ok(all_rows(
                conn,
                "SELECT install_id, release_id, tries FROM install_runner_releases WHERE org_id = ?1",
                [org.as_str()],
                |r| Ok((id_at(r, 0)?, (id_at(r, 1)?, r.get::<_, u32>(2)?))),
            )?
            .into_iter()
            .collect())
        })
        .await
    }

    async fn runner_release_of(
        &self,
        org: &OrgId,
        install: &InstallId,
    ) -> Result<Option<(ReleaseId, u32)>> {
        let (org, install) = (org.clone(), install.clone());
        self.read(move |conn| {
            one_row(
                conn,
                "SELECT release_id, tries FROM install_runner_releases WHERE org_id = ?1 AND install_id = ?2",
                params![org.as_str(), install.as_str()],
                |r| Ok((id_at(r, 0)?, r.get::<_, u32>(1)?)),
            )
        })
        .await
    }
}
