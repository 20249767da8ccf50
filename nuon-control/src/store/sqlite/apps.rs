//! An app's next config version (see [`ConfigVersions`]).

use super::*;
use crate::store::apps::ConfigVersions;

#[async_trait]
impl ConfigVersions for SqliteStore {
    async fn insert_next_config(
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
}
