//! Releases.

use nuon_core::ReleaseId;
use nuon_core::wire::{ReleaseInfo, RunnerReleaseInfo};

use super::*;
use crate::store::ReleaseStore;
use crate::store::releases::{runner_release_doc, runner_release_exists, runner_release_from};

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

    async fn create_runner_release(&self, org: &OrgId, release: &RunnerReleaseInfo) -> Result<()> {
        let (org, r) = (org.clone(), release.clone());
        let doc = runner_release_doc(&r)?;
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO runner_releases (id, org_id, version, doc, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![r.id.as_str(), org.as_str(), r.version, doc, r.created_at_ms],
            )
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    runner_release_exists(&r.version)
                }
                e => db_err(e),
            })?;
            Ok(())
        })
        .await
    }

    async fn list_runner_releases(&self, org: &OrgId) -> Result<Vec<RunnerReleaseInfo>> {
        let org = org.clone();
        self.read(move |conn| {
            all_rows(
                conn,
                "SELECT doc FROM runner_releases WHERE org_id = ?1 ORDER BY created_at DESC, id DESC",
                [org.as_str()],
                |r| r.get::<_, String>(0),
            )?
            .iter()
            .map(|d| runner_release_from(d))
            .collect()
        })
        .await
    }

    async fn get_runner_release(
        &self,
        org: &OrgId,
        key: &str,
    ) -> Result<Option<RunnerReleaseInfo>> {
        let (org, key) = (org.clone(), key.to_owned());
        self.read(move |conn| {
            one_row(
                conn,
                "SELECT doc FROM runner_releases WHERE org_id = ?1 AND (id = ?2 OR version = ?2)",
                params![org.as_str(), key],
                |r| r.get::<_, String>(0),
            )?
            .map(|d| runner_release_from(&d))
            .transpose()
        })
        .await
    }
}
