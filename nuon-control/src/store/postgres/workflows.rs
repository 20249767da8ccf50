//! Workflows and their steps.

use super::*;
use crate::store::removal::dollars;
use crate::store::workflows::summary_sql;
use crate::store::{CachedSummary, SummaryText};

/// Marks the summary of a workflow's install stale, in `tx`.
async fn bump(tx: &mut Tx, workflow: &WorkflowId) -> Result<()> {
    sqlx::query(AssertSqlSafe(dollars(summary_sql::BUMP_WORKFLOW)))
        .bind(workflow.as_str())
        .execute(&mut **tx)
        .await
        .map_err(db)?;
    Ok(())
}

#[async_trait]
impl WorkflowStore for PostgresStore {
    async fn install_summaries(&self, org: &OrgId) -> Result<Vec<CachedSummary>> {
        sqlx::query(AssertSqlSafe(dollars(summary_sql::LIST)))
            .bind(org.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(db)?
            .iter()
            .map(|r| {
                let at: Option<i64> = get(r, 2)?;
                let brief: Option<String> = get(r, 3)?;
                let full: Option<String> = get(r, 4)?;
                Ok(CachedSummary {
                    install_id: parse_id(&get::<String>(r, 0)?)?,
                    rev: get(r, 1)?,
                    summary: at.zip(
                        brief
                            .zip(full)
                            .map(|(brief, full)| SummaryText { brief, full }),
                    ),
                })
            })
            .collect()
    }

    async fn save_install_summary(
        &self,
        install: &InstallId,
        rev: i64,
        summary: &SummaryText,
    ) -> Result<()> {
        sqlx::query(AssertSqlSafe(dollars(summary_sql::SAVE)))
            .bind(install.as_str())
            .bind(rev)
            .bind(&summary.brief)
            .bind(&summary.full)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn create_workflow(&self, org: &OrgId, new: NewWorkflow) -> Result<WorkflowInfo> {
        let mut tx = self.begin().await?;
        if !install_in_org(&mut *tx, org, &new.install_id).await? {
            return Err(StoreError::Invalid(format!(
                "no install {}",
                new.install_id
            )));
        }
        if let Some((action, at)) = &new.fire {
            let fresh = sqlx::query(
                "INSERT INTO cron_fires (install_id, action, fire_at, workflow_id) VALUES ($1, $2, $3, $4) \
                 ON CONFLICT DO NOTHING",
            )
            .bind(new.install_id.as_str())
            .bind(action)
            .bind(at)
            .bind(new.id.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db)?
            .rows_affected();
            if fresh == 0 {
                return Err(already_started(action, *at));
            }
        }
        if let Some(r) = &new.rollout {
            super::rollouts::save(&mut tx, org, r, &[]).await?;
        }
        sqlx::query(
            "UPDATE installs SET config_version = $2 WHERE id = $1 AND config_version != $2",
        )
        .bind(new.install_id.as_str())
        .bind(i64::from(new.config_version))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        sqlx::query(
            "INSERT INTO workflows (id, org_id, install_id, kind, status, config_version, created_at, component, inputs, trigger, release_id) \
             VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7, $8, $9, $10)",
        )
        .bind(new.id.as_str())
        .bind(org.as_str())
        .bind(new.install_id.as_str())
        .bind(enum_str(&new.kind))
        .bind(i64::from(new.config_version))
        .bind(now_ms())
        .bind(&new.component)
        .bind(inputs_column(&new.inputs))
        .bind(&new.trigger)
        .bind(new.release.as_ref().map(|r| r.as_str()))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        for (i, s) in new.steps.iter().enumerate() {
            let (status, outputs) = shared::planned_status(s);
            sqlx::query(
                "INSERT INTO workflow_steps (workflow_id, idx, name, kind, target, needs_approval, status, reason, outputs) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
            )
            .bind(new.id.as_str())
            .bind(i as i64)
            .bind(&s.name)
            .bind(enum_str(&s.kind))
            .bind(&s.target)
            .bind(s.needs_approval)
            .bind(status)
            .bind(&s.skipped)
            .bind(outputs)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }
        sqlx::query(AssertSqlSafe(dollars(summary_sql::BUMP_INSTALL)))
            .bind(new.install_id.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let wf = load_workflow(&mut tx, org, &new.id)
            .await?
            .ok_or_else(|| StoreError::Invalid("the workflow vanished".into()))?;
        tx.commit().await.map_err(db)?;
        Ok(wf)
    }

    async fn list_workflows(&self, org: &OrgId, install: &InstallId) -> Result<Vec<WorkflowInfo>> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM workflows WHERE org_id = $1 AND install_id = $2 ORDER BY created_at DESC, id DESC",
        )
        .bind(org.as_str())
        .bind(install.as_str())
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
        let mut out = Vec::new();
        for id in ids {
            out.extend(load_workflow(&mut conn, org, &parse_id(&id)?).await?);
        }
        Ok(out)
    }

    async fn get_workflow(&self, org: &OrgId, id: &WorkflowId) -> Result<Option<WorkflowInfo>> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        load_workflow(&mut conn, org, id).await
    }

    async fn active_workflows(&self) -> Result<Vec<(OrgId, WorkflowId)>> {
        sqlx::query(
            "SELECT org_id, id FROM workflows WHERE status IN ('pending', 'running', 'cancelling') \
             ORDER BY created_at, id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db)?
        .iter()
        .map(id_pair)
        .collect()
    }

    async fn set_workflow_status(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        status: WorkflowStatus,
    ) -> Result<()> {
        let ended = !status.is_active();
        let mut tx = self.begin().await?;
        sqlx::query(
            "UPDATE workflows SET status = $3, finished_at = CASE WHEN $4 THEN $5::bigint ELSE NULL END \
             WHERE id = $1 AND org_id = $2",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(status.as_str())
        .bind(ended)
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        bump(&mut tx, id).await?;
        tx.commit().await.map_err(db)?;
        Ok(())
    }

    async fn update_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        u: StepUpdate,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        let changed = sqlx::query(
            "UPDATE workflow_steps SET status = $4, reason = $5, \
             outputs = COALESCE($6, outputs), \
             approved_at = CASE WHEN $7::boolean IS NULL THEN approved_at \
                                WHEN $7 THEN $8::bigint ELSE NULL END, \
             approved_by = CASE WHEN $7::boolean IS NULL THEN approved_by \
                                WHEN $7 THEN $11 ELSE NULL END, \
             job_id = CASE WHEN $9 THEN NULL ELSE job_id END, \
             attempts = COALESCE($10, attempts) \
             WHERE workflow_id = $1 AND idx = $3 \
             AND EXISTS (SELECT 1 FROM workflows w WHERE w.id = $1 AND w.org_id = $2)",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(i64::from(index))
        .bind(u.status.as_str())
        .bind(&u.reason)
        .bind(&u.outputs_json)
        .bind(u.approved)
        .bind(now_ms())
        .bind(u.clear_job)
        .bind(u.attempts_json())
        .bind(&u.approved_by)
        .execute(&mut *tx)
        .await
        .map_err(db)?
        .rows_affected();
        if changed == 0 {
            return Err(StoreError::Invalid(format!(
                "no step {index} in workflow {id}"
            )));
        }
        bump(&mut tx, id).await?;
        tx.commit().await.map_err(db)?;
        Ok(())
    }

    async fn dispatch_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        job: NewJob,
        token: Option<StateToken>,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        insert_job(&mut tx, &job).await?;
        let changed = sqlx::query(
            "UPDATE workflow_steps SET status = 'running', job_id = $4, reason = NULL \
             WHERE workflow_id = $1 AND idx = $3 \
             AND EXISTS (SELECT 1 FROM workflows w WHERE w.id = $1 AND w.org_id = $2 \
                         AND w.status = 'running')",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(i64::from(index))
        .bind(job.spec.job_id.as_str())
        .execute(&mut *tx)
        .await
        .map_err(db)?
        .rows_affected();
        if changed == 0 {
            return Err(StoreError::Invalid(format!(
                "workflow {id} is not running: step {index} not dispatched"
            )));
        }
        if let Some(t) = token {
            sqlx::query(
                "INSERT INTO state_tokens (token_hash, job_id, install_id, component) VALUES ($1, $2, $3, $4)",
            )
            .bind(&t.hash)
            .bind(job.spec.job_id.as_str())
            .bind(t.install_id.as_str())
            .bind(&t.component)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }
        bump(&mut tx, id).await?;
        tx.commit().await.map_err(db)?;
        Ok(())
    }
}
