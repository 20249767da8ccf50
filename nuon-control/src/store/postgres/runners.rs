//! Runners and their tokens.

use super::*;

#[async_trait]
impl RunnerStore for PostgresStore {
    async fn create_runner(
        &self,
        org: &OrgId,
        id: &RunnerId,
        name: &str,
        token_hash: &str,
    ) -> Result<RunnerInfo> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO runners (id, org_id, name, token_hash, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(name)
        .bind(token_hash)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(|e| {
            taken(e, || {
                format!(
                    "a runner named {name:?} already exists in this org; pick another name or revoke it first"
                )
            })
        })?;
        Ok(RunnerInfo {
            id: id.clone(),
            name: name.to_owned(),
            created_at_ms: now,
            last_seen_at_ms: None,
            revoked: false,
            role: RunnerRole::Generic,
            session: None,
            status: Default::default(),
            health: Default::default(),
            health_since_ms: None,
            telemetry: None,
            install: None,
        })
    }

    async fn list_runners(&self, org: &OrgId) -> Result<Vec<RunnerInfo>> {
        self.list_in_org(org).await
    }

    async fn find_runner(&self, org: &OrgId, name_or_id: &str) -> Result<Option<RunnerInfo>> {
        self.find_in_org(org, name_or_id).await
    }

    async fn revoke_runner(&self, org: &OrgId, id: &RunnerId) -> Result<Option<RunnerInfo>> {
        self.revoke_in_org(org, id.as_str()).await
    }

    async fn rotate_runner_token(
        &self,
        org: &OrgId,
        id: &RunnerId,
        token_hash: &str,
    ) -> Result<Option<RunnerInfo>> {
        let done = sqlx::query(
            "UPDATE runners SET token_hash = $3, revoked_at = NULL, session = NULL \
             WHERE org_id = $1 AND id = $2",
        )
        .bind(org.as_str())
        .bind(id.as_str())
        .bind(token_hash)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        self.find_in_org(org, id.as_str()).await
    }

    async fn authenticate_runner(&self, token_hash: &str) -> Result<Option<RunnerPrincipal>> {
        let row = sqlx::query(
            "SELECT id, org_id, session, last_seen_at FROM runners \
             WHERE token_hash = $1 AND revoked_at IS NULL",
        )
        .bind(token_hash)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        Ok(row.and_then(|r| {
            Some(RunnerPrincipal {
                runner_id: get::<String>(&r, 0).ok()?.parse().ok()?,
                org_id: get::<String>(&r, 1).ok()?.parse().ok()?,
                session: get::<Option<String>>(&r, 2).ok()?,
                last_seen_ms: get::<Option<i64>>(&r, 3).ok()?,
            })
        }))
    }

    async fn build_runner(&self, org: &OrgId) -> Result<Option<RunnerId>> {
        let id: Option<String> = sqlx::query_scalar(
            "SELECT id FROM runners WHERE org_id = $1 AND role = 'build' AND revoked_at IS NULL \
             ORDER BY created_at LIMIT 1",
        )
        .bind(org.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        id.as_deref().map(parse_id).transpose()
    }

    async fn set_runner_session(
        &self,
        runner: &RunnerId,
        expected: Option<&str>,
        session: &str,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE runners SET session = $3 WHERE id = $1 AND session IS NOT DISTINCT FROM $2",
        )
        .bind(runner.as_str())
        .bind(expected)
        .bind(session)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(done.rows_affected() == 1)
    }

    async fn set_runner_telemetry(&self, runner: &RunnerId, telemetry: &str) -> Result<()> {
        sqlx::query("UPDATE runners SET telemetry = $2 WHERE id = $1")
            .bind(runner.as_str())
            .bind(telemetry)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn all_runners(&self) -> Result<Vec<(OrgId, RunnerInfo)>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {}, org_id FROM runners WHERE revoked_at IS NULL",
            <RunnerInfo as Record>::COLUMNS
        )))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|r| Ok((r.id(10)?, RunnerInfo::read(r)?)))
            .collect()
    }

    async fn set_runner_health(
        &self,
        runner: &RunnerId,
        expected: RunnerHealth,
        health: RunnerHealth,
        at_ms: i64,
    ) -> Result<bool> {
        let done = sqlx::query(
            "UPDATE runners SET health = $3, health_since = $4 \
             WHERE id = $1 AND COALESCE(health, 'unknown') = $2",
        )
        .bind(runner.as_str())
        .bind(expected.as_str())
        .bind(health.as_str())
        .bind(at_ms)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(done.rows_affected() == 1)
    }
}
