//! Builds of components on the org's build runner.

use super::*;

#[async_trait]
impl BuildStore for SqliteStore {
    async fn enqueue_build(
        &self,
        job: NewJob,
        app: &AppId,
        config_version: u32,
        component: &str,
    ) -> Result<BuildInfo> {
        let (app, component) = (app.clone(), component.to_owned());
        self.write(move |conn| {
            insert_job(conn, &job)?;
            conn.execute(
                "INSERT INTO builds (job_id, org_id, app_id, config_version, component, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    job.spec.job_id.as_str(),
                    job.spec.org_id.as_str(),
                    app.as_str(),
                    config_version,
                    component,
                    job.spec.created_at_ms
                ],
            )
            .map_err(db_err)?;
            record(
                conn,
                &format!(
                    "SELECT {} FROM builds b JOIN jobs j ON j.id = b.job_id WHERE b.job_id = ?1",
                    BuildInfo::COLUMNS
                ),
                [job.spec.job_id.as_str()],
            )?
            .ok_or_else(|| shared::corrupt("a build just stored is missing"))
        })
        .await
    }

    async fn list_builds(&self, org: &OrgId, app: &AppId) -> Result<Vec<BuildInfo>> {
        let (org, app) = (org.clone(), app.clone());
        self.read(move |conn| {
            records(
                conn,
                &format!(
                    "SELECT {} FROM builds b JOIN jobs j ON j.id = b.job_id \
                     WHERE b.org_id = ?1 AND b.app_id = ?2 ORDER BY b.created_at DESC, j.seq DESC",
                    BuildInfo::COLUMNS
                ),
                params![org.as_str(), app.as_str()],
            )
        })
        .await
    }

    async fn get_build(&self, org: &OrgId, id: &JobId) -> Result<Option<BuildInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.read(move |conn| {
            record(
                conn,
                &format!(
                    "SELECT {} FROM builds b JOIN jobs j ON j.id = b.job_id \
                     WHERE b.org_id = ?1 AND b.job_id = ?2",
                    BuildInfo::COLUMNS
                ),
                params![org.as_str(), id.as_str()],
            )
        })
        .await
    }
}
