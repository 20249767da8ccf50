//! Apps and their config versions.

use super::rows::{Cells, ConfigSummary, Record};
use super::sql::{Arg, Change, Lock, Sql, Stmt, args};
use super::*;
use nuon_core::now_ms;

/// A stored config version. The JSON columns are the API's types, encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredConfig {
    /// 1, 2, 3, ... per app.
    pub version: u32,
    /// When it was synced.
    pub created_at_ms: i64,
    /// How many components it has.
    pub components: u32,
    /// `Vec<ConfigFile>` as JSON.
    pub files_json: String,
    /// `AppConfig` as JSON.
    pub config_json: String,
    /// `Vec<Diagnostic>` (warnings) as JSON.
    pub warnings_json: String,
    /// `Vec<ConfigFile>` of the `path` sources as JSON.
    pub sources_json: String,
}

/// Apps and their config versions.
#[async_trait]
pub trait AppStore: Send + Sync + 'static {
    /// Creates an app (409 `name_taken` when the org has one of that name).
    async fn create_app(&self, org: &OrgId, id: &AppId, name: &str) -> Result<AppInfo>;

    /// The org's apps, oldest first.
    async fn list_apps(&self, org: &OrgId) -> Result<Vec<AppInfo>>;

    /// An app of the org, by id or name.
    async fn find_app(&self, org: &OrgId, name_or_id: &str) -> Result<Option<AppInfo>>;

    /// Stores a new config version of an app: the next number.
    async fn add_config(
        &self,
        org: &OrgId,
        app: &AppId,
        config: StoredConfig,
    ) -> Result<StoredConfig>;

    /// The config versions of an app (without files and config).
    async fn list_configs(&self, org: &OrgId, app: &AppId) -> Result<Vec<StoredConfig>>;

    /// One config version of an app; the latest when `version` is `None`.
    async fn get_config(
        &self,
        org: &OrgId,
        app: &AppId,
        version: Option<u32>,
    ) -> Result<Option<StoredConfig>>;
}

/// Whether the org has the app, and the number of its next config
/// version.
struct NextVersion(bool, u32);

impl Record for NextVersion {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(NextVersion(r.int(0)? > 0, r.u32(1)?))
    }
}

/// The apps' store, written once for both databases.
#[async_trait]
impl<S: Sql + 'static> AppStore for S {
    async fn create_app(&self, org: &OrgId, id: &AppId, name: &str) -> Result<AppInfo> {
        let now = now_ms();
        self.execute_one(
            Stmt::new(
                "INSERT INTO apps (id, org_id, name, created_at) VALUES ($1, $2, $3, $4)",
                args![id.as_str(), org.as_str(), name, now],
            )
            .name_taken("an app", name),
        )
        .await?;
        Ok(AppInfo {
            id: id.clone(),
            name: name.to_owned(),
            created_at_ms: now,
            latest_config: None,
        })
    }

    async fn list_apps(&self, org: &OrgId) -> Result<Vec<AppInfo>> {
        self.query(Stmt::new(
            S::DIALECT.list_in_org::<AppInfo>(),
            args![org.as_str()],
        ))
        .await
    }

    async fn find_app(&self, org: &OrgId, name_or_id: &str) -> Result<Option<AppInfo>> {
        self.query_one(Stmt::new(
            S::DIALECT.find_in_org::<AppInfo>(),
            args![org.as_str(), name_or_id],
        ))
        .await
    }

    async fn add_config(
        &self,
        org: &OrgId,
        app: &AppId,
        config: StoredConfig,
    ) -> Result<StoredConfig> {
        // The app's row locked, then its highest version read in a
        // statement of its own: concurrent syncs of one app take turns,
        // and each sees the version the one before took.
        let lock = Lock::Rows(Stmt::new(
            "SELECT id FROM apps WHERE id = $1 AND org_id = $2",
            args![app.as_str(), org.as_str()],
        ));
        let read = Stmt::new(
            "SELECT (SELECT COUNT(*) FROM apps WHERE id = $1 AND org_id = $2), \
             COALESCE((SELECT MAX(version) FROM app_configs WHERE app_id = $1), 0) + 1",
            args![app.as_str(), org.as_str()],
        );
        let app = app.clone();
        self.change(
            Change::after_lock(lock, read),
            move |rows: Vec<NextVersion>| {
                let Some(NextVersion(true, version)) = rows.into_iter().next() else {
                    return Err(StoreError::Invalid(format!("no app {app}")));
                };
                let now = now_ms();
                let insert = Stmt::new(
                    "INSERT INTO app_configs (app_id, version, created_at, components, files, \
                 config, warnings, sources) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                    args![
                        app.as_str(),
                        version,
                        now,
                        config.components,
                        config.files_json.as_str(),
                        config.config_json.as_str(),
                        config.warnings_json.as_str(),
                        config.sources_json.as_str(),
                    ],
                );
                let stored = StoredConfig {
                    version,
                    created_at_ms: now,
                    ..config
                };
                Ok((vec![insert], stored))
            },
        )
        .await
    }

    async fn list_configs(&self, org: &OrgId, app: &AppId) -> Result<Vec<StoredConfig>> {
        let rows: Vec<ConfigSummary> = self
            .query(Stmt::new(
                format!(
                    "SELECT {} FROM app_configs c JOIN apps a ON a.id = c.app_id \
                     WHERE a.org_id = $1 AND c.app_id = $2 ORDER BY c.version",
                    ConfigSummary::COLUMNS
                ),
                args![org.as_str(), app.as_str()],
            ))
            .await?;
        Ok(rows.into_iter().map(|c| c.0).collect())
    }

    async fn get_config(
        &self,
        org: &OrgId,
        app: &AppId,
        version: Option<u32>,
    ) -> Result<Option<StoredConfig>> {
        // No version: the latest.
        self.query_one(Stmt::new(
            format!(
                "SELECT {} FROM app_configs c JOIN apps a ON a.id = c.app_id \
                 WHERE a.org_id = $1 AND c.app_id = $2 \
                 AND (CAST($3 AS BIGINT) IS NULL OR c.version = $3) \
                 ORDER BY c.version DESC LIMIT 1",
                StoredConfig::COLUMNS
            ),
            args![org.as_str(), app.as_str(), Arg::Int(version.map(i64::from))],
        ))
        .await
    }
}
