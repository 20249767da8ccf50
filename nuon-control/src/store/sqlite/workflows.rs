//! Workflows and their steps.

use super::*;
use crate::store::workflows::summary_sql;
use crate::store::{CachedSummary, SummaryText};

#[async_trait]
impl WorkflowStore for SqliteStore {
    async fn install_summaries(&self, org: &OrgId) -> Result<Vec<CachedSummary>> {
        let org = org.clone();
        self.read(move |conn| {
            all_rows(conn, summary_sql::LIST, [org.as_str()], |r| {
                let at: Option<i64> = r.get(2)?;
                let brief: Option<String> = r.get(3)?;
                let full: Option<String> = r.get(4)?;
                Ok(CachedSummary {
                    install_id: id_at(r, 0)?,
                    rev: r.get(1)?,
                    summary: at.zip(
                        brief
                            .zip(full)
                            .map(|(brief, full)| SummaryText { brief, full }),
                    ),
                })
            })
        })
        .await
    }

    async fn save_install_summary(
        &self,
        install: &InstallId,
        rev: i64,
        summary: &SummaryText,
    ) -> Result<()> {
        let (install, s) = (install.clone(), summary.clone());
        self.write(move |conn| {
            conn.execute(
                summary_sql::SAVE,
                params![install.as_str(), rev, s.brief, s.full],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn create_workflow(&self, org: &OrgId, new: NewWorkflow) -> Result<WorkflowInfo> {
        let org = org.clone();
        self.write(move |conn| {
            let owned = one_row(conn,
                    "SELECT 1 FROM installs WHERE id = ?1 AND org_id = ?2",
                    params![new.install_id.as_str(), org.as_str()],
                    |_| Ok(()),
                )?;
            if owned.is_none() {
                return Err(StoreError::Invalid(format!("no install {}", new.install_id)));
            }
            let now = now_ms();
            if let Some((action, at)) = &new.fire {
                let fresh = conn
                    .execute(
                        "INSERT INTO cron_fires (install_id, action, fire_at, workflow_id) VALUES (?1, ?2, ?3, ?4) \
                         ON CONFLICT DO NOTHING",
                        params![new.install_id.as_str(), action, at, new.id.as_str()],
                    )
                    .map_err(db_err)?;
                if fresh == 0 {
                    return Err(already_started(action, *at));
                }
            }
            if let Some(r) = &new.rollout {
                super::rollouts::save(conn, &org, r, &[])?;
            }
            conn.execute(
                "UPDATE installs SET config_version = ?2 WHERE id = ?1 AND config_version != ?2",
                params![new.install_id.as_str(), new.config_version],
            )
            .map_err(db_err)?;
            conn.execute(
                "INSERT INTO workflows (id, org_id, install_id, kind, status, config_version, created_at, component, inputs, trigger, release_id) \
                 VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?6, ?7, ?8, ?9, ?10)",
                params![
                    new.id.as_str(),
                    org.as_str(),
                    new.install_id.as_str(),
                    enum_str(&new.kind),
                    new.config_version,
                    now,
                    new.component,
                    inputs_column(&new.inputs),
                    new.trigger,
                    new.release.as_ref().map(|r| r.as_str())
                ],
            )
            .map_err(db_err)?;
            for (i, s) in new.steps.iter().enumerate() {
                let (status, outputs) = shared::planned_status(s);
                conn.execute(
                    "INSERT INTO workflow_steps (workflow_id, idx, name, kind, target, needs_approval, status, reason, outputs) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    params![new.id.as_str(), i as u32, s.name, enum_str(&s.kind), s.target, s.needs_approval, status, s.skipped, outputs],
                )
                .map_err(db_err)?;
            }
            conn.execute(summary_sql::BUMP_INSTALL, [new.install_id.as_str()])
                .map_err(db_err)?;
            load_workflow(conn, &org, &new.id)?
                .ok_or_else(|| StoreError::Invalid("the workflow vanished".into()))
        })
        .await
    }

    async fn list_workflows(&self, org: &OrgId, install: &InstallId) -> Result<Vec<WorkflowInfo>> {
        let (org, install) = (org.clone(), install.clone());
        self.read(move |conn| {
            let ids: Vec<String> = conn
                .prepare_cached(
                    "SELECT id FROM workflows WHERE org_id = ?1 AND install_id = ?2 ORDER BY created_at DESC, id DESC",
                )
                .and_then(|mut st| {
                    st.query_map(params![org.as_str(), install.as_str()], |r| r.get(0))?
                        .collect()
                })
                .map_err(db_err)?;
            let mut out = Vec::new();
            for id in ids {
                let id: WorkflowId = id.parse().map_err(|e: nuon_core::IdError| StoreError::Database(Box::new(e)))?;
                out.extend(load_workflow(conn, &org, &id)?);
            }
            Ok(out)
        })
        .await
    }

    async fn get_workflow(&self, org: &OrgId, id: &WorkflowId) -> Result<Option<WorkflowInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.read(move |conn| load_workflow(conn, &org, &id)).await
    }

    async fn active_workflows(&self) -> Result<Vec<(OrgId, WorkflowId)>> {
        self.read(move |conn| {
            all_rows(
                conn,
                "SELECT org_id, id FROM workflows WHERE status IN ('pending', 'running', 'cancelling') \
                 ORDER BY created_at, id",
                [],
                |r| Ok((id_at(r, 0)?, id_at(r, 1)?)),
            )
        })
        .await
    }

    async fn set_workflow_status(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        status: WorkflowStatus,
    ) -> Result<()> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            let ended = !status.is_active();
            conn.execute(
                "UPDATE workflows SET status = ?3, finished_at = CASE WHEN ?4 THEN ?5 ELSE NULL END \
                 WHERE id = ?1 AND org_id = ?2",
                params![id.as_str(), org.as_str(), status.as_str(), ended, now_ms()],
            )
            .map_err(db_err)?;
            conn.execute(summary_sql::BUMP_WORKFLOW, [id.as_str()])
                .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn update_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        u: StepUpdate,
    ) -> Result<()> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            let changed = conn
                .execute(
                    "UPDATE workflow_steps SET status = ?4, reason = ?5, \
                     outputs = COALESCE(?6, outputs), \
                     approved_at = CASE ?7 WHEN 1 THEN ?8 WHEN 0 THEN NULL ELSE approved_at END, \
                     approved_by = CASE ?7 WHEN 1 THEN ?11 WHEN 0 THEN NULL ELSE approved_by END, \
                     job_id = CASE WHEN ?9 THEN NULL ELSE job_id END, \
                     attempts = COALESCE(?10, attempts) \
                     WHERE workflow_id = ?1 AND idx = ?3 \
                     AND EXISTS (SELECT 1 FROM workflows w WHERE w.id = ?1 AND w.org_id = ?2)",
                    params![
                        id.as_str(),
                        org.as_str(),
                        index,
                        u.status.as_str(),
                        u.reason,
                        u.outputs_json,
                        u.approved,
                        now_ms(),
                        u.clear_job,
                        u.attempts_json(),
                        u.approved_by
                    ],
                )
                .map_err(db_err)?;
            if changed == 0 {
                return Err(StoreError::Invalid(format!(
                    "no step {index} in workflow {id}"
                )));
            }
            conn.execute(summary_sql::BUMP_WORKFLOW, [id.as_str()])
                .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn dispatch_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        job: NewJob,
        token: Option<StateToken>,
    ) -> Result<()> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            insert_job(conn, &job)?;
            let changed = conn
                .execute(
                    "UPDATE workflow_steps SET status = 'running', job_id = ?4, reason = NULL \
                     WHERE workflow_id = ?1 AND idx = ?3 \
                     AND EXISTS (SELECT 1 FROM workflows w WHERE w.id = ?1 AND w.org_id = ?2 \
                                 AND w.status = 'running')",
                    params![id.as_str(), org.as_str(), index, job.spec.job_id.as_str()],
                )
                .map_err(db_err)?;
            if changed == 0 {
                return Err(StoreError::Invalid(format!(
                    "workflow {id} is not running: step {index} not dispatched"
                )));
            }
            if let Some(t) = token {
                conn.execute(
                    "INSERT INTO state_tokens (token_hash, job_id, install_id, component) VALUES (?1, ?2, ?3, ?4)",
                    params![t.hash, job.spec.job_id.as_str(), t.install_id.as_str(), t.component],
                )
                .map_err(db_err)?;
            }
            conn.execute(summary_sql::BUMP_WORKFLOW, [id.as_str()])
                .map_err(db_err)?;
            Ok(())
        })
        .await
    }
}
