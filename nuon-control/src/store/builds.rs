//! Builds of components on the org's build runner.

use super::jobs::job_insert;
use super::rows::Record;
use super::sql::{Sql, Stmt, args};
use super::*;
use nuon_core::JobStatus;

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

/// The builds with their jobs, the rest of the query given.
fn builds_where(rest: &str) -> String {
    format!(
        "SELECT {} FROM builds b JOIN jobs j ON j.id = b.job_id {rest}",
        BuildInfo::COLUMNS
    )
}

/// The builds' store, written once for both databases.
#[async_trait]
impl<S: Sql + 'static> BuildStore for S {
    async fn enqueue_build(
        &self,
        job: NewJob,
        app: &AppId,
        config_version: u32,
        component: &str,
    ) -> Result<BuildInfo> {
        let s = &job.spec;
        self.execute(vec![
            job_insert(&job),
            Stmt::new(
                "INSERT INTO builds (job_id, org_id, app_id, config_version, component, created_at) \
                 VALUES ($1, $2, $3, $4, $5, $6)",
                args![
                    s.job_id.as_str(),
                    s.org_id.as_str(),
                    app.as_str(),
                    config_version,
                    component,
                    s.created_at_ms,
                ],
            ),
        ])
        .await?;
        // What the two rows just written read as: a queued job that has
        // built nothing yet.
        Ok(BuildInfo {
            id: s.job_id.clone(),
            app_id: app.clone(),
            config_version,
            component: component.to_owned(),
            status: JobStatus::Queued,
            artifact: None,
            reason: None,
            created_at_ms: s.created_at_ms,
        })
    }

    async fn list_builds(&self, org: &OrgId, app: &AppId) -> Result<Vec<BuildInfo>> {
        self.query(Stmt::new(
            builds_where(
                "WHERE b.org_id = $1 AND b.app_id = $2 ORDER BY b.created_at DESC, j.seq DESC",
            ),
            args![org.as_str(), app.as_str()],
        ))
        .await
    }

    async fn get_build(&self, org: &OrgId, id: &JobId) -> Result<Option<BuildInfo>> {
        self.query_one(Stmt::new(
            builds_where("WHERE b.org_id = $1 AND b.job_id = $2"),
            args![org.as_str(), id.as_str()],
        ))
        .await
    }
}
