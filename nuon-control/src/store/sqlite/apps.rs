//! Apps and their config versions.

use super::*;

#[async_trait]
impl AppStore for SqliteStore {
    async fn create_app(&self, org: &OrgId, id: &AppId, name: &str) -> Result<AppInfo> {
        let (org, id, name) = (org.clone(), id.clone(), name.to_owned());
        self.write(move |conn| {
            let now = now_ms();
            conn.execute(
                "INSERT INTO apps (id, org_id, name, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![id.as_str(), org.as_str(), name, now],
            )
            .map_err(|e| name_taken(e, "an app", &name))?;
            Ok(AppInfo {
                id,
                name,
                created_at_ms: now,
                latest_config: None,
            })
        })
        .await
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
        let (org, app) = (org.clone(), app.clone());
        self.write(move |conn| {
            let owned: bool = one_row(conn,
                    "SELECT 1 FROM apps WHERE id = ?1 AND org_id = ?2",
                    params![app.as_str(), org.as_str()],
                    |_| Ok(true),
                )?
                .unwrap_or(false);
            if !owned {
                return Err(StoreError::Invalid(format!("no app {app}")));
            }
            let version: u32 = conn
                .query_row(
                    "SELECT COALESCE(MAX(version), 0) + 1 FROM app_configs WHERE app_id = ?1",
                    [app.as_str()],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            let now = now_ms();
            conn.execute(
                "INSERT INTO app_configs (app_id, version, created_at, components, files, config, warnings, sources) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    app.as_str(),
                    version,
                    now,
                    config.components,
                    config.files_json,
                    config.config_json,
                    config.warnings_json,
                    config.sources_json
                ],
            )
            .map_err(db_err)?;
            Ok(StoredConfig {
                version,
                created_at_ms: now,
                ..config
            })
        })
        .await
    }

    async fn list_configs(&self, org: &OrgId, app: &AppId) -> Result<Vec<StoredConfig>> {
        let (org, app) = (org.clone(), app.clone());
        self.read(move |conn| {
            let rows: Vec<ConfigSummary> = records(
                conn,
                &format!(
                    "SELECT {} FROM app_configs c JOIN apps a ON a.id = c.app_id \
                     WHERE a.org_id = ?1 AND c.app_id = ?2 ORDER BY c.version",
                    ConfigSummary::COLUMNS
                ),
                params![org.as_str(), app.as_str()],
            )?;
            Ok(rows.into_iter().map(|c| c.0).collect())
        })
        .await
    }

    async fn get_config(
        &self,
        org: &OrgId,
        app: &AppId,
        version: Option<u32>,
    ) -> Result<Option<StoredConfig>> {
        let (org, app) = (org.clone(), app.clone());
        self.read(move |conn| {
            record(
                conn,
                &format!(
                    "SELECT {} FROM app_configs c JOIN apps a ON a.id = c.app_id \
                     WHERE a.org_id = ?1 AND c.app_id = ?2 AND (?3 IS NULL OR c.version = ?3) \
                     ORDER BY c.version DESC LIMIT 1",
                    StoredConfig::COLUMNS
                ),
                params![org.as_str(), app.as_str(), version],
            )
        })
        .await
    }
}
