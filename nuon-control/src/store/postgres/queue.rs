//! The runner side of the job queue: claims, leases, logs, completions.

use super::*;
use crate::store::LogQuota;

#[async_trait]
impl QueueStore for PostgresStore {
    async fn claim(
        &self,
        runner: &RunnerId,
        kinds: &[String],
        max: u32,
        lease_ms: u64,
    ) -> Result<Claimed> {
        let now = now_ms();
        // Most orgs have no limit: then the claim is one statement (one
        // round trip, one commit), which also says whether the org has one.
        let mut conn = self.conn().await?;
        if let Some(Started {
            jobs,
            nothing_left,
            settings,
        }) = start_jobs(
            &mut *conn,
            runner,
            kinds,
            i64::from(max),
            now,
            lease_ms,
            false,
        )
        .await?
        {
            conn.done();
            return Ok(Claimed {
                jobs,
                held_back: false,
                nothing_left,
                settings,
            });
        }
        let mut tx = conn.begin().await.map_err(db)?;
        // The org's row stays locked to the end of the claim, so claims of
        // one limited org (on any replica) take turns, each counting what
        // the last one started.
        let limit: Option<(String, i64)> = sqlx::query_as(
            "SELECT o.id, o.max_running FROM runners r JOIN orgs o ON o.id = r.org_id \
             WHERE r.id = $1 AND o.max_running IS NOT NULL FOR UPDATE OF o",
        )
        .bind(runner.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
        let mut max = i64::from(max);
        let mut held_back = false;
        if let Some((org, limit)) = limit {
            let running: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM jobs WHERE org_id = $1 AND status = 'running'",
            )
            .bind(&org)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
            let room = (limit - running).clamp(0, max);
            if room < max {
                let queued: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM (SELECT 1 FROM jobs WHERE runner_id = $1 \
                     AND status = 'queued' AND kind = ANY($2) LIMIT $3) q",
                )
                .bind(runner.as_str())
                .bind(kinds)
                .bind(room + 1)
                .fetch_one(&mut *tx)
                .await
                .map_err(db)?;
                held_back = queued > room;
                max = room;
            }
        }
        let started = if max == 0 {
            None
        } else {
            start_jobs(&mut *tx, runner, kinds, max, now, lease_ms, true).await?
        };
        let (jobs, settings) = started.map_or((Vec::new(), None), |s| (s.jobs, s.settings));
        tx.commit().await.map_err(db)?;
        conn.done();
        // A limited org's runner looks each time: a job of the org ending
        // makes room without a wake of the runner.
        Ok(Claimed {
            jobs,
            held_back,
            nothing_left: false,
            settings,
        })
    }

    async fn heartbeat(
        &self,
        runner: &RunnerId,
        leases: &[LeaseRef],
        lease_ms: u64,
    ) -> Result<Vec<LeaseStatus>> {
        self.writes.heartbeat(runner, leases, lease_ms).await
    }

    async fn lease_states(
        &self,
        runner: &RunnerId,
        leases: &[LeaseRef],
    ) -> Result<Vec<LeaseStatus>> {
        let mut conn = self.conn().await?;
        let states = lease_states(&mut conn, runner, leases).await?;
        conn.done();
        Ok(states)
    }

    async fn append_logs_within(
        &self,
        runner: &RunnerId,
        job: &JobId,
        batch: LogBatch,
        quota: LogQuota,
    ) -> Result<(LogAck, u64)> {
        self.writes.append_logs(runner, job, batch, quota).await
    }

    async fn complete(
        &self,
        runner: &RunnerId,
        job: &JobId,
        completion: Completion,
    ) -> Result<CompletionAck> {
        self.writes
            .complete(runner, job, None, completion)
            .await
            .map(|(ack, _)| ack)
    }

    async fn complete_with_logs(
        &self,
        runner: &RunnerId,
        job: &JobId,
        logs: LogBatch,
        quota: LogQuota,
        completion: Completion,
    ) -> Result<(CompletionAck, u64)> {
        self.writes
            .complete(runner, job, Some((logs, quota)), completion)
            .await
    }
}
