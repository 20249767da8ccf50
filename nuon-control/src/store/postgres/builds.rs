//! Builds of components on the org's build runner.

use super::*;

#[async_trait]
impl BuildStore for PostgresStore {
    async fn enqueue_build(
        &self,
        job: NewJob,
        app: &AppId,
        config_version: u32,
        component: &str,
    ) -> Result<BuildInfo> {
        let mut tx = self.begin().await?;
        insert_job(&mut tx, &job).await?;
        sqlx::query(
            "INSERT INTO builds (job_id, org_id, app_id, config_version, component, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(job.spec.job_id.as_str())
        .bind(job.spec.org_id.as_str())
        .bind(app.as_str())
        .bind(i64::from(config_version))
        .bind(component)
        .bind(job.spec.created_at_ms)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {} FROM builds b JOIN jobs j ON j.id = b.job_id WHERE b.job_id = $1",
            BuildInfo::COLUMNS
        )))
        .bind(job.spec.job_id.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        let build = BuildInfo::read(&row)?;
        tx.commit().await.map_err(db)?;
        Ok(build)
    }

    async fn list_builds(&self, org: &OrgId, app: &AppId) -> Result<Vec<BuildInfo>> {
        sqlx::query(AssertSqlSafe(format!(
            "SELECT {} FROM builds b JOIN jobs j ON j.id = b.job_id \
             WHERE b.org_id = $1 AND b.app_id = $2 ORDER BY b.created_at DESC, j.seq DESC",
            BuildInfo::COLUMNS
        )))
        .bind(org.as_str())
        .bind(app.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?
        .iter()
        .map(BuildInfo::read)
        .collect()
    }

    async fn get_build(&self, org: &OrgId, id: &JobId) -> Result<Option<BuildInfo>> {
        sqlx::query(AssertSqlSafe(format!(
            "SELECT {} FROM builds b JOIN jobs j ON j.id = b.job_id \
             WHERE b.org_id = $1 AND b.job_id = $2",
            BuildInfo::COLUMNS
        )))
        .bind(org.as_str())
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?
        .map(|r| BuildInfo::read(&r))
        .transpose()
    }
}
