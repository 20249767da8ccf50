//! Builds of components on the org's build runner.

use super::*;

/// Builds of components on the org's build runner.
#[async_trait]
pub trait BuildStore: Send + Sync + 'static {
    /// Queues a build job and records it as a build of `component`.
    async fn enqueue_build(
        &self,
        job: NewJob,
        app: &AppId,
        config_version: u32,
        component: &str,
    ) -> Result<BuildInfo>;

    /// An app's builds, newest first.
    async fn list_builds(&self, org: &OrgId, app: &AppId) -> Result<Vec<BuildInfo>>;

    /// One build of the org.
    async fn get_build(&self, org: &OrgId, id: &JobId) -> Result<Option<BuildInfo>>;
}
