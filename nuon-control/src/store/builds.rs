//! Builds of components on the org's build runner.

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

/// The statement that queues `job`, as both stores write it.
pub(super) fn job_insert(job: &NewJob) -> Stmt {
    let s = &job.spec;
    Stmt::new(
        "INSERT INTO jobs (id, org_id, runner_id, kind, spec, signature, status, max_attempts, \
         timeout_secs, created_at, payload) \
         VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7, $8, $9, $10)",
        args![
            s.job_id.as_str(),
            s.org_id.as_str(),
            s.runner_id.as_str(),
            s.kind.as_str(),
            job.sealed_spec.as_str(),
            job.signature.as_str(),
            s.retry.max_attempts,
            s.timeout_secs as i64,
            s.created_at_ms,
            job.payload.to_string(),
        ],
    )
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
