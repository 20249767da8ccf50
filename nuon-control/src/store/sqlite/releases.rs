//! Releases.

use nuon_core::ReleaseId;
use nuon_core::wire::ReleaseInfo;

use super::*;
use crate::store::ReleaseStore;

const RELEASE: &str = <ReleaseInfo as Record>::COLUMNS;

#[async_trait]
impl ReleaseStore for SqliteStore {
    async fn create_release(&self, org: &OrgId, release: &ReleaseInfo) -> Result<()> {
        let org = org.clone();
        let r = release.clone();
        let builds =
            serde_json::to_string(&r.builds).map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO releases (id, org_id, app_id, config_version, builds, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    r.id.as_str(),
                    org.as_str(),
                    r.app_id.as_str(),
                    r.config_version,
                    builds,
                    r.created_at_ms
                ],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn list_releases(&self, org: &OrgId, app: Option<&AppId>) -> Result<Vec<ReleaseInfo>> {
        let (org, app) = (org.clone(), app.cloned());
        self.read(move |conn| match &app {
            Some(app) => records::<ReleaseInfo>(
                conn,
                &format!(
                    "SELECT {RELEASE} FROM releases WHERE org_id = ?1 AND app_id = ?2 \
                     ORDER BY created_at DESC, id DESC"
                ),
                [org.as_str(), app.as_str()],
            ),
            None => records::<ReleaseInfo>(
                conn,
                &format!(
                    "SELECT {RELEASE} FROM releases WHERE org_id = ?1 ORDER BY created_at DESC, id DESC"
                ),
                [org.as_str()],
            ),
        })
        .await
    }

    async fn get_release(&self, org: &OrgId, id: &ReleaseId) -> Result<Option<ReleaseInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.read(move |conn| {
            record::<ReleaseInfo>(
                conn,
                &format!("SELECT {RELEASE} FROM releases WHERE org_id = ?1 AND id = ?2"),
                [org.as_str(), id.as_str()],
            )
        })
        .await
    }
}
