//! Replicas and upkeep: wake-ups, the lead, rescue and pruning.

use super::*;
use crate::store::Gauges;

#[async_trait]
impl MaintenanceStore for SqliteStore {
    async fn prune(&self, finished_before_ms: i64) -> Result<u64> {
        self.write(move |conn| {
            let logs = conn
                .execute(
                    "DELETE FROM logs.records WHERE job_id IN \
                     (SELECT id FROM jobs WHERE finished_at < ?1)",
                    [finished_before_ms],
                )
                .map_err(db_err)?;
            conn.execute(
                "DELETE FROM attempts WHERE job_id IN (SELECT id FROM jobs j WHERE j.finished_at < ?1 \
                 AND NOT EXISTS (SELECT 1 FROM builds b WHERE b.job_id = j.id) \
                 AND NOT EXISTS (SELECT 1 FROM workflow_steps s WHERE s.job_id = j.id) \
                 AND NOT EXISTS (SELECT 1 FROM state_tokens t WHERE t.job_id = j.id))",
                [finished_before_ms],
            )
            .map_err(db_err)?;
            let jobs = conn
                .execute(
                    "DELETE FROM jobs WHERE finished_at < ?1 \
                     AND NOT EXISTS (SELECT 1 FROM builds b WHERE b.job_id = jobs.id) \
                     AND NOT EXISTS (SELECT 1 FROM workflow_steps s WHERE s.job_id = jobs.id) \
                     AND NOT EXISTS (SELECT 1 FROM state_tokens t WHERE t.job_id = jobs.id)",
                    [finished_before_ms],
                )
                .map_err(db_err)?;
            // Jobs kept for their build, step or state lock keep their
            // result, not what they were sent.
            let specs = conn
                .execute(
                    "UPDATE jobs SET spec = '' WHERE finished_at < ?1 AND spec <> ''",
                    [finished_before_ms],
                )
                .map_err(db_err)?;
            Ok((logs + jobs + specs) as u64)
        })
        .await
    }

    async fn rescue_expired(&self, now_ms: i64) -> Result<Vec<Rescued>> {
        self.write(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT a.job_id, a.n, a.runner_id, a.confirmed, j.cancel_requested, j.max_attempts, \
                     (SELECT count(*) FROM attempts c WHERE c.job_id = a.job_id AND c.confirmed = 1), j.org_id \
                     FROM attempts a JOIN jobs j ON j.id = a.job_id \
                     WHERE a.state = 'running' AND a.lease_expires < ?1",
                )
                .map_err(db_err)?;
            let expired = stmt
                .query_map([now_ms], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, u32>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)? != 0,
                        r.get::<_, i64>(4)? != 0,
                        r.get::<_, u32>(5)?,
                        r.get::<_, u32>(6)?,
                        r.get::<_, String>(7)?,
                    ))
                })
                .map_err(db_err)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(db_err)?;
            let mut out = Vec::new();
            for (job, n, runner, confirmed, cancel, max_attempts, started, org) in expired {
                let fate = shared::expire(n, confirmed, cancel, max_attempts, started);
                conn.execute(
                    "UPDATE attempts SET state = ?3, finished_at = ?4 WHERE job_id = ?1 AND n = ?2",
                    params![job, n, fate.attempt_state, now_ms],
                )
                .map_err(db_err)?;
                let requeue = fate.end.is_none();
                match fate.end {
                    None => {
                        conn.execute("UPDATE jobs SET status = 'queued' WHERE id = ?1", [&job])
                            .map_err(db_err)?;
                    }
                    Some((status, reason)) => {
                        conn.execute(
                            "UPDATE jobs SET status = ?2, reason = ?3, finished_at = ?4 WHERE id = ?1",
                            params![job, status, reason, now_ms],
                        )
                        .map_err(db_err)?;
                    }
                }
                out.push(Rescued {
                    job_id: job.parse().map_err(|e: nuon_core::IdError| StoreError::Database(Box::new(e)))?,
                    runner_id: runner.parse().map_err(|e: nuon_core::IdError| StoreError::Database(Box::new(e)))?,
                    org_id: parse_id(&org)?,
                    requeued: requeue,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn extend_running_leases(&self, until_ms: i64) -> Result<u64> {
        self.write(move |conn| {
            conn.execute(
                "UPDATE attempts SET lease_expires = ?1 WHERE state = 'running' AND lease_expires < ?1",
                [until_ms],
            )
            .map(|n| n as u64)
            .map_err(db_err)
        })
        .await
    }

    async fn gauges(&self, unhealthy_before: i64, offline_before: i64) -> Result<Gauges> {
        self.read(move |conn| {
            let mut jobs = Vec::new();
            // One status at a time, so each count reads its partial index.
            for status in ["queued", "running"] {
                let rows = all_rows(
                    conn,
                    &format!(
                        "SELECT kind, COUNT(*) FROM jobs WHERE status = '{status}' GROUP BY kind"
                    ),
                    [],
                    |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64)),
                )?;
                jobs.extend(rows.into_iter().map(|(k, n)| (status.to_owned(), k, n)));
            }
            let runners = one_row(
                conn,
                "SELECT COALESCE(SUM(last_seen_at IS NULL), 0), \
                 COALESCE(SUM(last_seen_at >= ?1), 0), \
                 COALESCE(SUM(last_seen_at < ?1 AND last_seen_at >= ?2), 0), \
                 COALESCE(SUM(last_seen_at < ?2), 0) FROM runners WHERE revoked_at IS NULL",
                params![unhealthy_before, offline_before],
                |r| {
                    Ok([
                        r.get::<_, i64>(0)? as u64,
                        r.get::<_, i64>(1)? as u64,
                        r.get::<_, i64>(2)? as u64,
                        r.get::<_, i64>(3)? as u64,
                    ])
                },
            )?
            .unwrap_or_default();
            let pages: i64 = conn
                .query_row("PRAGMA logs.page_count", [], |r| r.get(0))
                .map_err(db_err)?;
            let size: i64 = conn
                .query_row("PRAGMA logs.page_size", [], |r| r.get(0))
                .map_err(db_err)?;
            Ok(Gauges {
                jobs,
                runners,
                log_bytes: (pages * size) as u64,
            })
        })
        .await
    }
}
