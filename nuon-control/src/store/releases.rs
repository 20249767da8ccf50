//! Releases: a config version of an app and its builds, frozen.

use nuon_core::ReleaseId;
use nuon_core::wire::ErrorCode;
use nuon_core::wire::{ReleaseInfo, RunnerReleaseInfo};

use super::*;

/// Releases of the org's apps.
#[async_trait]
pub trait ReleaseStore: Send + Sync {
    /// Stores a release (its `app_name` is not kept).
    async fn create_release(&self, org: &OrgId, release: &ReleaseInfo) -> Result<()>;

    /// The org's releases, of `app` when given, newest first.
    async fn list_releases(&self, org: &OrgId, app: Option<&AppId>) -> Result<Vec<ReleaseInfo>>;

    /// One release of the org.
    async fn get_release(&self, org: &OrgId, id: &ReleaseId) -> Result<Option<ReleaseInfo>>;

    /// Stores a runner release. A conflict `runner_release_exists` when the
    /// org has one of that version already (versions are never replaced).
    async fn create_runner_release(&self, org: &OrgId, release: &RunnerReleaseInfo) -> Result<()>;

    /// The org's runner releases, newest first.
    async fn list_runner_releases(&self, org: &OrgId) -> Result<Vec<RunnerReleaseInfo>>;

    /// One runner release of the org, by id or version.
    async fn get_runner_release(&self, org: &OrgId, key: &str)
    -> Result<Option<RunnerReleaseInfo>>;
}

/// A runner release as its column keeps it.
pub(crate) fn runner_release_doc(r: &RunnerReleaseInfo) -> Result<String> {
    serde_json::to_string(r).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// A runner release from its column.
pub(crate) fn runner_release_from(doc: &str) -> Result<RunnerReleaseInfo> {
    serde_json::from_str(doc).map_err(|e| StoreError::Database(Box::new(e)))
}

/// The refusal of a second runner release of a version.
pub(crate) fn runner_release_exists(version: &str) -> StoreError {
    StoreError::Conflict {
        code: ErrorCode::RunnerReleaseExists,
        message: format!(
            "runner version {version} is published already: versions are never replaced; publish the new binary as another version"
        ),
        acked_seq: None,
    }
}
