//! Releases: a config version of an app and its builds, frozen.

use nuon_core::ReleaseId;
use nuon_core::wire::ReleaseInfo;

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
}
