//! The runner side of the job queue: claims, leases, logs, completions.

use super::*;
use crate::store::LogQuota;

#[async_trait]
impl QueueStore for SqliteStore {
    async fn claim(
        &self,
        runner: &RunnerId,
        kinds: &[String],
        max: u32,
        lease_ms: u64,
    ) -> Result<Claimed> {
        let runner = runner.clone();
        let kinds = serde_json::to_string(kinds).unwrap_or_else(|_| "[]".into());
        self.write(move |conn| {
            let now = now_ms();
            touch_runner(conn, &runner, now)?;
            if max == 0 {
                return Ok(Claimed::default());
            }
            // Whether any job of the runner is still queued, of any kind.
            let nothing_left = |conn: &rusqlite::Connection| {
                conn.prepare_cached(
                    "SELECT NOT EXISTS (SELECT 1 FROM jobs WHERE runner_id = ?1 AND status = 'queued')",
                )
                .and_then(|mut s| s.query_row([runner.as_str()], |r| r.get::<_, bool>(0)))
                .map_err(db_err)
            };
            let mut stmt = conn
                .prepare_cached(
                    "SELECT seq, id, spec, signature, attempts FROM jobs \
                     WHERE runner_id = ?1 AND status = 'queued' \
                     AND kind IN (SELECT value FROM json_each(?2)) ORDER BY seq LIMIT ?3",
                )
                .map_err(db_err)?;
            let mut picked = stmt
                .query_map(params![runner.as_str(), kinds, max], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, u32>(4)?,
                    ))
                })
                .map_err(db_err)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(db_err)?;
            if picked.is_empty() {
                return Ok(Claimed {
                    nothing_left: nothing_left(conn)?,
                    ..Claimed::default()
                });
            }
            // The org's limit on running jobs (the writer is the only one, so
            // the count cannot change under us).
            let room = conn
                .prepare_cached(
                    "SELECT o.max_running - (SELECT count(*) FROM jobs j \
                     WHERE j.org_id = o.id AND j.status = 'running') \
                     FROM runners r JOIN orgs o ON o.id = r.org_id \
                     WHERE r.id = ?1 AND o.max_running IS NOT NULL",
                )
                .and_then(|mut s| {
                    s.query_row([runner.as_str()], |r| r.get::<_, i64>(0))
                        .optional()
                })
                .map_err(db_err)?;
            let held_back = shared::hold_back(&mut picked, room);
            let mut claimed = Vec::with_capacity(picked.len());
            for (seq, id, spec, signature, attempts) in picked {
                let n = attempts + 1;
                conn.execute(
                    "UPDATE jobs SET status = 'running', attempts = ?2, started_at = coalesce(started_at, ?3) \
                     WHERE seq = ?1",
                    params![seq, n, now],
                )
                .map_err(db_err)?;
                conn.execute(
                    "INSERT INTO attempts (job_id, n, runner_id, state, lease_expires, started_at) \
                     VALUES (?1, ?2, ?3, 'running', ?4, ?5)",
                    params![id, n, runner.as_str(), now + lease_ms as i64, now],
                )
                .map_err(db_err)?;
                claimed.push(ClaimedJob {
                    job_id: id.parse().map_err(|e: nuon_core::IdError| {
                        StoreError::Database(Box::new(e))
                    })?,
                    attempt: n,
                    spec,
                    signature,
                    lease_ms,
                    grant: String::new(),
                    not_after_ms: 0,
                });
            }
            Ok(Claimed {
                jobs: claimed,
                held_back,
                nothing_left: nothing_left(conn)?,
                settings: None,
            })
        })
        .await
    }

    async fn heartbeat(
        &self,
        runner: &RunnerId,
        leases: &[LeaseRef],
        lease_ms: u64,
    ) -> Result<Vec<LeaseStatus>> {
        let runner = runner.clone();
        let leases = leases.to_vec();
        self.write(move |conn| {
            let now = now_ms();
            touch_runner(conn, &runner, now)?;
            let mut out = Vec::with_capacity(leases.len());
            for lease in leases {
                let state = lease_state(conn, &runner, &lease).map_err(db_err)?;
                if state != LeaseState::Stale {
                    conn.execute(
                        "UPDATE attempts SET lease_expires = ?3, confirmed = 1 WHERE job_id = ?1 AND n = ?2",
                        params![lease.job_id.as_str(), lease.attempt, now + lease_ms as i64],
                    )
                    .map_err(db_err)?;
                }
                out.push(LeaseStatus {
                    job_id: lease.job_id,
                    attempt: lease.attempt,
                    state,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn lease_states(
        &self,
        runner: &RunnerId,
        leases: &[LeaseRef],
    ) -> Result<Vec<LeaseStatus>> {
        let runner = runner.clone();
        let leases = leases.to_vec();
        self.read(move |conn| {
            leases
                .into_iter()
                .map(|lease| {
                    let state = lease_state(conn, &runner, &lease).map_err(db_err)?;
                    Ok(LeaseStatus {
                        job_id: lease.job_id,
                        attempt: lease.attempt,
                        state,
                    })
                })
                .collect()
        })
        .await
    }

    async fn append_logs_within(
        &self,
        runner: &RunnerId,
        job: &JobId,
        batch: LogBatch,
        quota: LogQuota,
    ) -> Result<(LogAck, u64)> {
        let (runner, job) = (runner.clone(), job.clone());
        self.write(move |conn| {
            check_attempt(conn, &runner, &job, batch.attempt)?;
            let (acked, stored): (i64, i64) = conn
                .query_row(
                    "SELECT acked_seq, log_bytes FROM attempts WHERE job_id = ?1 AND n = ?2",
                    params![job.as_str(), batch.attempt],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )
                .map_err(db_err)?;
            let Some((skip, first, last)) = shared::new_lines(acked as u64, &batch) else {
                return Ok((LogAck { acked_seq: acked as u64 }, 0));
            };
            let kept = shared::within_quota(batch.lines.tail(skip), (first, last), stored, quota);
            let mut wrote = 0;
            if let Some(kept) = &kept {
                conn.prepare_cached(
                    "INSERT INTO logs.records (job_id, attempt, first_seq, last_seq, body) VALUES (?1, ?2, ?3, ?4, ?5)",
                )
                .and_then(|mut s| {
                    s.execute(params![
                        job.as_str(),
                        batch.attempt,
                        first as i64,
                        kept.last as i64,
                        kept.body.as_ref()
                    ])
                })
                .map_err(db_err)?;
                wrote = kept.body.len() as u64;
            }
            conn.execute(
                "UPDATE attempts SET acked_seq = ?3, log_bytes = ?4 WHERE job_id = ?1 AND n = ?2",
                params![
                    job.as_str(),
                    batch.attempt,
                    last as i64,
                    kept.map_or(stored, |k| k.log_bytes)
                ],
            )
            .map_err(db_err)?;
            Ok((LogAck { acked_seq: last }, wrote))
        })
        .await
    }

    async fn complete(
        &self,
        runner: &RunnerId,
        job: &JobId,
        completion: Completion,
    ) -> Result<CompletionAck> {
        let (runner, job) = (runner.clone(), job.clone());
        self.write(move |conn| {
            let n = completion.attempt;
            // Idempotence: the same attempt completing again gets the same answer.
            let existing: Option<(String, String, i64)> = one_row(conn,
                    "SELECT a.state, j.status, j.attempts FROM attempts a JOIN jobs j ON j.id = a.job_id \
                     WHERE a.job_id = ?1 AND a.n = ?2 AND a.runner_id = ?3",
                    params![job.as_str(), n, runner.as_str()],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )?;
            if let Some((state, status, current)) = &existing
                && state == "finished"
                && *current == i64::from(n)
            {
                return Ok(CompletionAck {
                    status: status
                        .parse()
                        .map_err(|e: String| StoreError::Database(e.into()))?,
                });
            }
            check_attempt(conn, &runner, &job, n)?;
            let acked: i64 = conn
                .query_row(
                    "SELECT acked_seq FROM attempts WHERE job_id = ?1 AND n = ?2",
                    params![job.as_str(), n],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            if (acked as u64) < completion.log_lines {
                return Err(shared::logs_pending(&job, n, completion.log_lines, acked as u64));
            }
            let now = now_ms();
            let result = completion.result;
            let status = JobStatus::from(result.outcome);
            let outputs = if result.outputs.is_null() {
                None
            } else {
                Some(result.outputs.to_string())
            };
            conn.execute(
                "UPDATE attempts SET state = 'finished', finished_at = ?3 WHERE job_id = ?1 AND n = ?2",
                params![job.as_str(), n, now],
            )
            .map_err(db_err)?;
            conn.execute(
                "UPDATE jobs SET status = ?2, exit_code = ?3, reason = ?4, outputs = ?5, finished_at = ?6 \
                 WHERE id = ?1",
                params![
                    job.as_str(),
                    status.as_str(),
                    result.exit_code,
                    result.reason,
                    outputs,
                    now
                ],
            )
            .map_err(db_err)?;
            Ok(CompletionAck { status })
        })
        .await
    }
}
