//! Terraform state and its locks, behind the `http` backend.

use super::*;

#[async_trait]
impl StateStore for PostgresStore {
    async fn get_state(
        &self,
        install: &InstallId,
        component: &str,
    ) -> Result<Option<(u32, String)>> {
        sqlx::query(
            "SELECT version, body FROM tf_states WHERE install_id = $1 AND component = $2 \
             ORDER BY version DESC LIMIT 1",
        )
        .bind(install.as_str())
        .bind(component)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?
        .map(|r| Ok((r.u32(0)?, get(&r, 1)?)))
        .transpose()
    }

    async fn put_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: Option<&str>,
        sealed: String,
    ) -> Result<Result<u32, StateLock>> {
        let mut tx = self.begin().await?;
        // Writers of one state queue here, so versions never collide.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(format!("state:{install}:{component}"))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        if let Some(held) = current_lock(&mut tx, install, component).await?
            && lock_id != Some(held.id.as_str())
        {
            return Ok(Err(held));
        }
        let version: i64 = sqlx::query_scalar(
            "SELECT COALESCE(MAX(version), 0) + 1 FROM tf_states WHERE install_id = $1 AND component = $2",
        )
        .bind(install.as_str())
        .bind(component)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        sqlx::query(
            "INSERT INTO tf_states (install_id, component, version, body, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(install.as_str())
        .bind(component)
        .bind(version)
        .bind(&sealed)
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(Ok(version as u32))
    }

    async fn lock_state(
        &self,
        install: &InstallId,
        component: &str,
        lock: StateLock,
    ) -> Result<Result<(), StateLock>> {
        let mut tx = self.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(format!("state:{install}:{component}"))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        if let Some(held) = current_lock(&mut tx, install, component).await? {
            if held.id == lock.id {
                return Ok(Ok(()));
            }
            // A lock whose job has ended is stale: its Terraform is gone.
            let ended = match &held.job_id {
                Some(j) => sqlx::query_scalar::<_, bool>(
                    "SELECT status NOT IN ('queued', 'running') FROM jobs WHERE id = $1",
                )
                .bind(j.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(db)?
                .unwrap_or(true),
                None => false,
            };
            if !ended {
                return Ok(Err(held));
            }
            tracing::warn!(
                install = %install,
                component,
                lock = %held.id,
                job = ?held.job_id,
                "terraform state lock of an ended job released for a new lock"
            );
            sqlx::query("DELETE FROM tf_locks WHERE install_id = $1 AND component = $2")
                .bind(install.as_str())
                .bind(component)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        sqlx::query(
            "INSERT INTO tf_locks (install_id, component, lock_id, info, created_at, job_id) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(install.as_str())
        .bind(component)
        .bind(&lock.id)
        .bind(&lock.info)
        .bind(lock.created_at_ms)
        .bind(lock.job_id.as_ref().map(|j| j.as_str()))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(Ok(()))
    }

    async fn unlock_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: &str,
    ) -> Result<Result<(), StateLock>> {
        let mut tx = self.begin().await?;
        let answer = match current_lock(&mut tx, install, component).await? {
            Some(held) if held.id != lock_id => Err(held),
            Some(_) => {
                sqlx::query("DELETE FROM tf_locks WHERE install_id = $1 AND component = $2")
                    .bind(install.as_str())
                    .bind(component)
                    .execute(&mut *tx)
                    .await
                    .map_err(db)?;
                Ok(())
            }
            None => Ok(()),
        };
        tx.commit().await.map_err(db)?;
        Ok(answer)
    }

    async fn force_unlock_state(
        &self,
        org: &OrgId,
        install: &InstallId,
        component: &str,
    ) -> Result<Option<StateLock>> {
        let mut tx = self.begin().await?;
        if !install_in_org(&mut *tx, org, install).await? {
            return Ok(None);
        }
        let held = current_lock(&mut tx, install, component).await?;
        sqlx::query("DELETE FROM tf_locks WHERE install_id = $1 AND component = $2")
            .bind(install.as_str())
            .bind(component)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(held)
    }

    async fn list_states(&self, org: &OrgId, install: &InstallId) -> Result<Vec<ComponentState>> {
        if !install_in_org(&self.pool, org, install).await? {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(
            "SELECT c.component, s.latest, COALESCE(s.versions, 0), s.updated, \
                    l.lock_id, l.info, l.created_at, l.job_id \
             FROM (SELECT component FROM tf_states WHERE install_id = $1 \
                   UNION SELECT component FROM tf_locks WHERE install_id = $1) c \
             LEFT JOIN (SELECT component, MAX(version) AS latest, count(*) AS versions, \
                               MAX(created_at) AS updated \
                        FROM tf_states WHERE install_id = $1 GROUP BY component) s \
                    ON s.component = c.component \
             LEFT JOIN tf_locks l ON l.install_id = $1 AND l.component = c.component \
             ORDER BY c.component",
        )
        .bind(install.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|r| {
                Ok(ComponentState {
                    component: get(r, 0)?,
                    latest: r.opt_u32(1)?,
                    versions: r.u32(2)?,
                    updated_at_ms: get(r, 3)?,
                    lock: match get::<Option<String>>(r, 4)? {
                        Some(_) => Some(StateLock::read(&Offset(r, 4))?),
                        None => None,
                    },
                })
            })
            .collect()
    }

    async fn authenticate_state(&self, token_hash: &str) -> Result<Option<StatePrincipal>> {
        sqlx::query(AssertSqlSafe(format!(
            "SELECT {} FROM state_tokens t JOIN jobs j ON j.id = t.job_id \
             WHERE t.token_hash = $1 AND j.status IN ('queued', 'running')",
            StatePrincipal::COLUMNS
        )))
        .bind(token_hash)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?
        .map(|r| StatePrincipal::read(&r))
        .transpose()
    }

    async fn release_locks_of_job(&self, job: &JobId) -> Result<Vec<(String, StateLock)>> {
        let mut tx = self.begin().await?;
        let held = sqlx::query(AssertSqlSafe(format!(
            "DELETE FROM tf_locks WHERE job_id = $1 RETURNING {}",
            HeldLock::COLUMNS
        )))
        .bind(job.as_str())
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?
        .iter()
        .map(|r| HeldLock::read(r).map(|h| (h.0, h.1)))
        .collect::<Result<Vec<_>>>()?;
        sqlx::query("DELETE FROM state_tokens WHERE job_id = $1")
            .bind(job.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(held)
    }
}
