//! Releases.

use nuon_core::ReleaseId;
use nuon_core::wire::{ReleaseInfo, RunnerReleaseInfo};

use super::*;
use crate::store::ReleaseStore;
use crate::store::releases::{runner_release_doc, runner_release_exists, runner_release_from};

const RELEASE: &str = <ReleaseInfo as Record>::COLUMNS;

#[async_trait]
impl ReleaseStore for PostgresStore {
    async fn create_release(&self, org: &OrgId, release: &ReleaseInfo) -> Result<()> {
        let builds = serde_json::to_string(&release.builds)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        sqlx::query(
            "INSERT INTO releases (id, org_id, app_id, config_version, builds, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(release.id.as_str())
        .bind(org.as_str())
        .bind(release.app_id.as_str())
        .bind(i64::from(release.config_version))
        .bind(builds)
        .bind(release.created_at_ms)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn list_releases(&self, org: &OrgId, app: Option<&AppId>) -> Result<Vec<ReleaseInfo>> {
        let rows = match app {
            Some(app) => sqlx::query(AssertSqlSafe(format!(
                "SELECT {RELEASE} FROM releases WHERE org_id = $1 AND app_id = $2 \
                 ORDER BY created_at DESC, id DESC"
            )))
            .bind(org.as_str())
            .bind(app.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(db)?,
            None => sqlx::query(AssertSqlSafe(format!(
                "SELECT {RELEASE} FROM releases WHERE org_id = $1 ORDER BY created_at DESC, id DESC"
            )))
            .bind(org.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(db)?,
        };
        rows.iter().map(ReleaseInfo::read).collect()
    }

    async fn get_release(&self, org: &OrgId, id: &ReleaseId) -> Result<Option<ReleaseInfo>> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {RELEASE} FROM releases WHERE org_id = $1 AND id = $2"
        )))
        .bind(org.as_str())
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        row.as_ref().map(ReleaseInfo::read).transpose()
    }

    async fn create_runner_release(&self, org: &OrgId, release: &RunnerReleaseInfo) -> Result<()> {
        sqlx::query(
            "INSERT INTO runner_releases (id, org_id, version, doc, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(release.id.as_str())
        .bind(org.as_str())
        .bind(&release.version)
        .bind(runner_release_doc(release)?)
        .bind(release.created_at_ms)
        .execute(&self.pool)
        .await
        .map_err(|e| match &e {
            sqlx::Error::Database(d) if d.is_unique_violation() => {
                runner_release_exists(&release.version)
            }
            _ => db(e),
        })?;
        Ok(())
    }

    async fn list_runner_releases(&self, org: &OrgId) -> Result<Vec<RunnerReleaseInfo>> {
        sqlx::query(
            "SELECT doc FROM runner_releases WHERE org_id = $1 ORDER BY created_at DESC, id DESC",
        )
        .bind(org.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?
        .iter()
        .map(|row| runner_release_from(&get::<String>(row, 0)?))
        .collect()
    }

    async fn get_runner_release(
        &self,
        org: &OrgId,
        key: &str,
    ) -> Result<Option<RunnerReleaseInfo>> {
        sqlx::query(
            "SELECT doc FROM runner_releases WHERE org_id = $1 AND (id = $2 OR version = $2)",
        )
        .bind(org.as_str())
        .bind(key)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?
        .map(|row| runner_release_from(&get::<String>(&row, 0)?))
        .transpose()
    }
}
