//! Apps and their config versions.

use super::*;

#[async_trait]
impl AppStore for PostgresStore {
    async fn create_app(&self, org: &OrgId, id: &AppId, name: &str) -> Result<AppInfo> {
        let now = now_ms();
        sqlx::query("INSERT INTO apps (id, org_id, name, created_at) VALUES ($1, $2, $3, $4)")
            .bind(id.as_str())
            .bind(org.as_str())
            .bind(name)
            .bind(now)
            .execute(&self.pool)
            .await
            .map_err(|e| {
                taken(e, || {
                    format!("an app named {name:?} already exists in this org; pick another name")
                })
            })?;
        Ok(AppInfo {
            id: id.clone(),
            name: name.to_owned(),
            created_at_ms: now,
            latest_config: None,
        })
    }

    async fn list_apps(&self, org: &OrgId) -> Result<Vec<AppInfo>> {
        self.list_in_org(org).await
    }

    async fn find_app(&self, org: &OrgId, name_or_id: &str) -> Result<Option<AppInfo>> {
        self.find_in_org(org, name_or_id).await
    }

    async fn add_config(
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

    async fn list_configs(&self, org: &OrgId, app: &AppId) -> Result<Vec<StoredConfig>> {
        sqlx::query(
            "SELECT c.version, c.created_at, c.components FROM app_configs c \
             JOIN apps a ON a.id = c.app_id WHERE a.org_id = $1 AND c.app_id = $2 ORDER BY c.version",
        )
        .bind(org.as_str())
        .bind(app.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?
        .iter()
        .map(|r| ConfigSummary::read(r).map(|c| c.0))
        .collect()
    }

    async fn get_config(
        &self,
        org: &OrgId,
        app: &AppId,
        version: Option<u32>,
    ) -> Result<Option<StoredConfig>> {
        sqlx::query(
            "SELECT c.version, c.created_at, c.components, c.files, c.config, c.warnings, c.sources \
             FROM app_configs c JOIN apps a ON a.id = c.app_id \
             WHERE a.org_id = $1 AND c.app_id = $2 AND ($3::bigint IS NULL OR c.version = $3) \
             ORDER BY c.version DESC LIMIT 1",
        )
        .bind(org.as_str())
        .bind(app.as_str())
        .bind(version.map(i64::from))
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?
        .map(|r| StoredConfig::read(&r))
        .transpose()
    }
}
