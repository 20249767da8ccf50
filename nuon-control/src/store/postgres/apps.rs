//! An app's next config version (see [`ConfigVersions`]).

use super::*;
use crate::store::apps::ConfigVersions;

#[async_trait]
impl ConfigVersions for PostgresStore {
    async fn insert_next_config(
        &self,
        org: &OrgId,
        app: &AppId,
        config: StoredConfig,
    ) -> Result<StoredConfig> {
        let mut tx = self.begin().await?;
        // Locks the app row: concurrent syncs of one app take turns.
        let owned = sqlx::query("SELECT 1 FROM apps WHERE id = $1 AND org_id = $2 FOR UPDATE")
            .bind(app.as_str())
            .bind(org.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
        if owned.is_none() {
            return Err(StoreError::Invalid(format!("no app {app}")));
        }
        let version: i64 = sqlx::query_scalar(
            "SELECT COALESCE(MAX(version), 0) + 1 FROM app_configs WHERE app_id = $1",
        )
        .bind(app.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        let now = now_ms();
        sqlx::query(
            "INSERT INTO app_configs (app_id, version, created_at, components, files, config, warnings, sources) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(app.as_str())
        .bind(version)
        .bind(now)
        .bind(i64::from(config.components))
        .bind(&config.files_json)
        .bind(&config.config_json)
        .bind(&config.warnings_json)
        .bind(&config.sources_json)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(StoredConfig {
            version: version as u32,
            created_at_ms: now,
            ..config
        })
    }
}
