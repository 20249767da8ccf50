//! Apps and their config versions.

use super::*;

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
