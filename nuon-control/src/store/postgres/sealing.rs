//! Values kept sealed: what an earlier version kept in the clear.

use super::*;

#[async_trait]
impl SealingStore for PostgresStore {
    async fn clear_signing_keys(&self) -> Result<Vec<(OrgId, Vec<u8>)>> {
        let rows: Vec<(String, Vec<u8>)> =
            sqlx::query_as("SELECT id, signing_key FROM orgs WHERE length(signing_key) = 32")
                .fetch_all(&self.pool)
                .await
                .map_err(db)?;
        rows.into_iter()
            .map(|(id, key)| Ok((parse_id(&id)?, key)))
            .collect()
    }

    async fn seal_signing_key(&self, org: &OrgId, sealed: &[u8]) -> Result<()> {
        sqlx::query("UPDATE orgs SET signing_key = $2 WHERE id = $1 AND length(signing_key) = 32")
            .bind(org.as_str())
            .bind(sealed)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn clear_job_specs(&self, limit: u32) -> Result<Vec<(JobId, String)>> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT id, spec FROM jobs WHERE payload IS NULL AND spec <> '' ORDER BY seq LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.into_iter()
            .map(|(id, spec)| Ok((parse_id(&id)?, spec)))
            .collect()
    }

    async fn unended_job_specs(
        &self,
        org: &OrgId,
        after: Option<&JobId>,
        limit: u32,
    ) -> Result<Vec<(JobId, String)>> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT id, spec FROM jobs WHERE org_id = $1 AND id > $2 \
             AND status IN ('queued', 'running') AND spec <> '' ORDER BY id LIMIT $3",
        )
        .bind(org.as_str())
        .bind(after.map_or("", |a| a.as_str()))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.into_iter()
            .map(|(id, spec)| Ok((parse_id(&id)?, spec)))
            .collect()
    }

    async fn set_job_signature(&self, job: &JobId, signature: &str) -> Result<()> {
        sqlx::query("UPDATE jobs SET signature = $2 WHERE id = $1")
            .bind(job.as_str())
            .bind(signature)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn seal_job_spec(&self, job: &JobId, sealed: &str, payload: &str) -> Result<()> {
        sqlx::query("UPDATE jobs SET spec = $2, payload = $3 WHERE id = $1 AND payload IS NULL")
            .bind(job.as_str())
            .bind(sealed)
            .bind(payload)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }
}
