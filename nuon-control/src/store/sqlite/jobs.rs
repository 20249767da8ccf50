//! Jobs as the Control API sees them: queue, read, cancel, logs.

use super::*;

#[async_trait]
impl JobStore for SqliteStore {
    async fn enqueue_job(&self, job: NewJob) -> Result<JobInfo> {
        self.write(move |conn| {
            insert_job(conn, &job)?;
            load_job(conn, job.spec.job_id.as_str())?
                .ok_or_else(|| StoreError::Invalid("job vanished after insert".into()))
        })
        .await
    }

    async fn get_job(&self, org: &OrgId, id: &JobId) -> Result<Option<JobInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.read(move |conn| {
            record(
                conn,
                &format!(
                    "SELECT {} FROM jobs WHERE id = ?1 AND org_id = ?2",
                    JobInfo::COLUMNS
                ),
                params![id.as_str(), org.as_str()],
            )
        })
        .await
    }

    async fn list_jobs(&self, org: &OrgId, limit: u32) -> Result<Vec<JobInfo>> {
        let org = org.clone();
        self.read(move |conn| {
            records(
                conn,
                &format!(
                    "SELECT {} FROM jobs WHERE org_id = ?1 ORDER BY seq DESC LIMIT ?2",
                    JobInfo::COLUMNS
                ),
                params![org.as_str(), limit],
            )
        })
        .await
    }

    async fn request_cancel(&self, org: &OrgId, id: &JobId) -> Result<Option<JobInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            let now = now_ms();
            conn.execute(
                "UPDATE jobs SET status = 'cancelled', cancel_requested = 1, reason = 'cancelled before it started', \
                 finished_at = ?3 WHERE id = ?1 AND org_id = ?2 AND status = 'queued'",
                params![id.as_str(), org.as_str(), now],
            )
            .map_err(db_err)?;
            conn.execute(
                "UPDATE jobs SET cancel_requested = 1 WHERE id = ?1 AND org_id = ?2 AND status = 'running'",
                params![id.as_str(), org.as_str()],
            )
            .map_err(db_err)?;
            record(
                conn,
                &format!("SELECT {} FROM jobs WHERE id = ?1 AND org_id = ?2", JobInfo::COLUMNS),
                params![id.as_str(), org.as_str()],
            )
        })
        .await
    }

    async fn read_logs(
        &self,
        org: &OrgId,
        job: &JobId,
        cursor: u64,
        limit: u32,
    ) -> Result<Option<LogPage>> {
        let (org, job) = (org.clone(), job.clone());
        self.read(move |conn| {
            let status: Option<String> = one_row(
                conn,
                "SELECT status FROM jobs WHERE id = ?1 AND org_id = ?2",
                params![job.as_str(), org.as_str()],
                |r| r.get(0),
            )?;
            let Some(status) = status else {
                return Ok(None);
            };
            let terminal = status
                .parse::<JobStatus>()
                .map(JobStatus::is_terminal)
                .unwrap_or(false);
            // The chunks' sizes first, then only the bodies the page needs.
            let sizes = conn
                .prepare_cached(
                    "SELECT id, last_seq - first_seq + 1, octet_length(body) FROM logs.records \
                     WHERE job_id = ?1 AND id >= ?2 ORDER BY id LIMIT ?3",
                )
                .and_then(|mut s| {
                    s.query_map(
                        params![job.as_str(), shared::cursor_chunk(cursor), CHUNKS_PER_PAGE],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )?
                    .collect::<rusqlite::Result<Vec<shared::ChunkSize>>>()
                })
                .map_err(db_err)?;
            let (take, more) = shared::chunks_for_page(&sizes, cursor, limit);
            let last = sizes.get(take.wrapping_sub(1)).map_or(-1, |c| c.0);
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, attempt, first_seq, body FROM logs.records \
                     WHERE job_id = ?1 AND id >= ?2 AND id <= ?3 ORDER BY id",
                )
                .map_err(db_err)?;
            let rows = stmt
                .query_map(
                    params![job.as_str(), shared::cursor_chunk(cursor), last],
                    |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            r.get::<_, u32>(1)?,
                            r.get::<_, i64>(2)?,
                            r.get::<_, String>(3)?,
                        ))
                    },
                )
                .map_err(db_err)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(db_err)?;
            let chunks = rows.iter().map(|(id, attempt, first_seq, body)| LogChunk {
                id: *id,
                attempt: *attempt,
                first_seq: *first_seq,
                body,
            });
            Ok(Some(shared::log_page(
                chunks, cursor, limit, more, terminal,
            )))
        })
        .await
    }
}
