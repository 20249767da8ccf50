//! The writes of a Terraform state that PostgreSQL serializes with an
//! advisory lock per state ([`StateWrites`]); the rest of `StateStore` is
//! written once.

use super::*;
use crate::store::states::StateWrites;

#[async_trait]
impl StateWrites for PostgresStore {
    async fn write_state(
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

    async fn take_state_lock(
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
}
