//! Replicas and upkeep: wake-ups, the lead, rescue and pruning.

use super::*;
use crate::store::Gauges;

#[async_trait]
impl MaintenanceStore for PostgresStore {
    fn announce(&self, wake: Wake) {
        let _ = self.outbox.send(wake);
    }

    fn wakeups(&self) -> Option<broadcast::Receiver<Wakes>> {
        Some(self.wakes.subscribe())
    }

    async fn lead(&self) -> Result<bool> {
        let mut slot = self.leader.lock().await;
        if let Some(newer) = self.newer_replica().await? {
            // A rolling upgrade: the newer release leads (it knows every
            // step kind either plans). Closing the connection lets go of
            // the lock.
            let told = self
                .newer_seen
                .lock()
                .expect("newer_seen lock")
                .replace(newer.clone());
            if told.as_ref() != Some(&newer) {
                tracing::info!(
                    newer = %newer,
                    ours = %self.version,
                    "a replica of a newer nuon-ctl runs beside this one: the lead is left to it"
                );
            }
            *slot = None;
            return Ok(false);
        }
        self.newer_seen.lock().expect("newer_seen lock").take();
        if slot.is_none() {
            let conn = PgConnection::connect_with(&self.options)
                .await
                .map_err(db)?;
            *slot = Some((conn, false));
        }
        let (conn, held) = slot.as_mut().expect("a leader connection");
        let answer = if *held {
            sqlx::query("SELECT 1")
                .execute(&mut *conn)
                .await
                .map(|_| true)
        } else {
            sqlx::query_scalar::<_, bool>("SELECT pg_try_advisory_lock($1)")
                .bind(LEADER_LOCK)
                .fetch_one(&mut *conn)
                .await
        };
        match answer {
            Ok(lead) => {
                *held = lead;
                Ok(lead)
            }
            Err(e) => {
                // The connection is gone, and the lock with it.
                *slot = None;
                Err(db(e))
            }
        }
    }

    async fn prune(&self, finished_before_ms: i64) -> Result<u64> {
        sqlx::query("DELETE FROM nuon_replicas WHERE seen_at < $1")
            .bind(finished_before_ms.min(now_ms() - REPLICA_SEEN_WITHIN_MS))
            .execute(&self.pool)
            .await
            .map_err(db)?;
        let mut tx = self.begin().await?;
        let logs = sqlx::query(
            "DELETE FROM log_records l USING jobs j WHERE l.job_id = j.id \
             AND j.finished_at < $1",
        )
        .bind(finished_before_ms)
        .execute(&mut *tx)
        .await
        .map_err(db)?
        .rows_affected();
        let jobs = sqlx::query(
            "DELETE FROM jobs j WHERE j.finished_at < $1 \
             AND NOT EXISTS (SELECT 1 FROM builds b WHERE b.job_id = j.id) \
             AND NOT EXISTS (SELECT 1 FROM workflow_steps s WHERE s.job_id = j.id) \
             AND NOT EXISTS (SELECT 1 FROM state_tokens t WHERE t.job_id = j.id)",
        )
        .bind(finished_before_ms)
        .execute(&mut *tx)
        .await
        .map_err(db)?
        .rows_affected();
        // Jobs kept for their build, step or state lock keep their result,
        // not what they were sent.
        let specs = sqlx::query("UPDATE jobs SET spec = '' WHERE finished_at < $1 AND spec <> ''")
            .bind(finished_before_ms)
            .execute(&mut *tx)
            .await
            .map_err(db)?
            .rows_affected();
        tx.commit().await.map_err(db)?;
        Ok(logs + jobs + specs)
    }

    async fn rescue_expired(&self, now_ms: i64) -> Result<Vec<Rescued>> {
        let mut tx = self.begin().await?;
        let expired = sqlx::query(
            "SELECT a.job_id, a.n, a.runner_id, a.confirmed, j.cancel_requested, j.max_attempts, \
             (SELECT count(*) FROM attempts c WHERE c.job_id = a.job_id AND c.confirmed), j.org_id \
             FROM attempts a JOIN jobs j ON j.id = a.job_id \
             WHERE a.state = 'running' AND a.lease_expires < $1 \
             FOR UPDATE OF a, j SKIP LOCKED",
        )
        .bind(now_ms)
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
        let mut out = Vec::new();
        for r in &expired {
            let job: String = get(r, 0)?;
            let n = r.u32(1)?;
            let runner: String = get(r, 2)?;
            let fate = shared::expire(n, get(r, 3)?, get(r, 4)?, r.u32(5)?, r.u32(6)?);
            sqlx::query(
                "UPDATE attempts SET state = $3, finished_at = $4 WHERE job_id = $1 AND n = $2",
            )
            .bind(&job)
            .bind(i64::from(n))
            .bind(fate.attempt_state)
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
            let requeued = fate.end.is_none();
            match fate.end {
                None => {
                    sqlx::query("UPDATE jobs SET status = 'queued' WHERE id = $1")
                        .bind(&job)
                        .execute(&mut *tx)
                        .await
                        .map_err(db)?;
                }
                Some((status, reason)) => {
                    sqlx::query(
                        "UPDATE jobs SET status = $2, reason = $3, finished_at = $4 WHERE id = $1",
                    )
                    .bind(&job)
                    .bind(status)
                    .bind(reason)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await
                    .map_err(db)?;
                }
            }
            out.push(Rescued {
                job_id: parse_id(&job)?,
                runner_id: parse_id(&runner)?,
                org_id: parse_id(&get::<String>(r, 7)?)?,
                requeued,
            });
        }
        tx.commit().await.map_err(db)?;
        Ok(out)
    }

    async fn extend_running_leases(&self, until_ms: i64) -> Result<u64> {
        Ok(sqlx::query(
            // Locked in key order, as group commits lock them, so the two
            // cannot deadlock.
            "UPDATE attempts a SET lease_expires = $1 FROM ( \
                SELECT job_id, n FROM attempts WHERE state = 'running' AND lease_expires < $1 \
                ORDER BY job_id, n FOR UPDATE) r \
             WHERE a.job_id = r.job_id AND a.n = r.n",
        )
        .bind(until_ms)
        .execute(&self.pool)
        .await
        .map_err(db)?
        .rows_affected())
    }

    async fn gauges(&self, unhealthy_before: i64, offline_before: i64) -> Result<Gauges> {
        let rows = sqlx::query(
            "SELECT status, kind, COUNT(*) FROM jobs WHERE status IN ('queued', 'running') GROUP BY status, kind",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        let jobs = rows
            .iter()
            .map(|r| Ok((r.text(0)?, r.text(1)?, r.int(2)? as u64)))
            .collect::<Result<Vec<_>>>()?;
        let r = sqlx::query(
            "SELECT COUNT(*) FILTER (WHERE last_seen_at IS NULL), \
             COUNT(*) FILTER (WHERE last_seen_at >= $1), \
             COUNT(*) FILTER (WHERE last_seen_at < $1 AND last_seen_at >= $2), \
             COUNT(*) FILTER (WHERE last_seen_at < $2), \
             pg_total_relation_size('log_records') FROM runners WHERE revoked_at IS NULL",
        )
        .bind(unhealthy_before)
        .bind(offline_before)
        .fetch_one(&self.pool)
        .await
        .map_err(db)?;
        Ok(Gauges {
            jobs,
            runners: [
                r.int(0)? as u64,
                r.int(1)? as u64,
                r.int(2)? as u64,
                r.int(3)? as u64,
            ],
            log_bytes: r.int(4)? as u64,
        })
    }
}

/// A replica seen in `nuon_replicas` this recently still runs.
const REPLICA_SEEN_WITHIN_MS: i64 = 30_000;

impl PostgresStore {
    /// Marks this replica as running (with its version), and returns the
    /// newest version of another running replica when it is newer than
    /// this one's.
    async fn newer_replica(&self) -> Result<Option<String>> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO nuon_replicas (id, version, seen_at) VALUES ($1, $2, $3) \
             ON CONFLICT (id) DO UPDATE SET version = EXCLUDED.version, seen_at = EXCLUDED.seen_at",
        )
        .bind(&self.replica)
        .bind(&self.version)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        let running: Vec<String> = sqlx::query_scalar(
            "SELECT DISTINCT version FROM nuon_replicas WHERE seen_at >= $1 AND id <> $2",
        )
        .bind(now - REPLICA_SEEN_WITHIN_MS)
        .bind(&self.replica)
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        let ours = release_order(&self.version);
        Ok(running
            .into_iter()
            .filter(|v| release_order(v) > ours)
            .max_by_key(|v| release_order(v)))
    }
}

/// A version (`MAJOR.MINOR.PATCH[-PRE]`) as something that sorts the way
/// releases follow each other: `0.2.0-dev` after `0.1.0`, before `0.2.0`.
/// What does not parse sorts first.
pub(super) fn release_order(version: &str) -> (u64, u64, u64, bool, String) {
    let (core, pre) = match version.split_once('-') {
        Some((c, p)) => (c, Some(p)),
        None => (version, None),
    };
    let mut parts = core.split('.').map(|p| p.parse::<u64>().ok());
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some(Some(a)), Some(Some(b)), Some(Some(c)), None) => {
            (a, b, c, pre.is_none(), pre.unwrap_or_default().to_owned())
        }
        _ => (0, 0, 0, false, String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::release_order;

    #[test]
    fn releases_sort_in_the_order_they_follow_each_other() {
        let order = [
            "junk",
            "0.1.0-dev",
            "0.1.0",
            "0.1.1",
            "0.2.0-dev",
            "0.2.0",
            "0.10.0",
            "1.0.0",
        ];
        for pair in order.windows(2) {
            assert!(
                release_order(pair[0]) < release_order(pair[1]),
                "{} before {}",
                pair[0],
                pair[1]
            );
        }
    }
}
