//! Jobs as the Control API sees them: queue, read, cancel, logs.

use super::*;

#[async_trait]
impl JobStore for PostgresStore {
    async fn enqueue_job(&self, job: NewJob) -> Result<JobInfo> {
        let mut tx = self.begin().await?;
        insert_job(&mut tx, &job).await?;
        let info = load_job(&mut *tx, job.spec.job_id.as_str(), None)
            .await?
            .ok_or_else(|| StoreError::Invalid("job vanished after insert".into()))?;
        tx.commit().await.map_err(db)?;
        Ok(info)
    }

    async fn get_job(&self, org: &OrgId, id: &JobId) -> Result<Option<JobInfo>> {
        load_job(&self.pool, id.as_str(), Some(org)).await
    }

    async fn list_jobs(&self, org: &OrgId, limit: u32) -> Result<Vec<JobInfo>> {
        sqlx::query(AssertSqlSafe(format!(
            "SELECT {} FROM jobs WHERE org_id = $1 ORDER BY seq DESC LIMIT $2",
            JobInfo::COLUMNS
        )))
        .bind(org.as_str())
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?
        .iter()
        .map(JobInfo::read)
        .collect()
    }

    async fn request_cancel(&self, org: &OrgId, id: &JobId) -> Result<Option<JobInfo>> {
        let mut tx = self.begin().await?;
        sqlx::query(
            "UPDATE jobs SET status = 'cancelled', cancel_requested = true, reason = 'cancelled before it started', \
             finished_at = $3 WHERE id = $1 AND org_id = $2 AND status = 'queued'",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        sqlx::query(
            "UPDATE jobs SET cancel_requested = true WHERE id = $1 AND org_id = $2 AND status = 'running'",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let job = load_job(&mut *tx, id.as_str(), Some(org)).await?;
        tx.commit().await.map_err(db)?;
        Ok(job)
    }

    async fn read_logs(
        &self,
        org: &OrgId,
        job: &JobId,
        cursor: u64,
        limit: u32,
    ) -> Result<Option<LogPage>> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        let status: Option<String> =
            sqlx::query_scalar("SELECT status FROM jobs WHERE id = $1 AND org_id = $2")
                .bind(job.as_str())
                .bind(org.as_str())
                .fetch_optional(&mut *conn)
                .await
                .map_err(db)?;
        let Some(status) = status else {
            return Ok(None);
        };
        let terminal = status
            .parse::<JobStatus>()
            .map(JobStatus::is_terminal)
            .unwrap_or(false);
        // The chunks' sizes first, then only the bodies the page needs.
        let sizes: Vec<shared::ChunkSize> = sqlx::query_as(
            "SELECT id, last_seq - first_seq + 1, octet_length(body)::bigint FROM log_records \
             WHERE job_id = $1 AND id >= $2 ORDER BY id LIMIT $3",
        )
        .bind(job.as_str())
        .bind(shared::cursor_chunk(cursor))
        .bind(CHUNKS_PER_PAGE)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
        let (take, more) = shared::chunks_for_page(&sizes, cursor, limit);
        let last = sizes.get(take.wrapping_sub(1)).map_or(-1, |c| c.0);
        let rows = sqlx::query(
            "SELECT id, attempt, first_seq, body FROM log_records \
             WHERE job_id = $1 AND id >= $2 AND id <= $3 ORDER BY id",
        )
        .bind(job.as_str())
        .bind(shared::cursor_chunk(cursor))
        .bind(last)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
        let mut chunks = Vec::with_capacity(rows.len());
        for r in &rows {
            let body: &[u8] = r.try_get(3).map_err(db)?;
            chunks.push(LogChunk {
                id: get(r, 0)?,
                attempt: r.u32(1)?,
                first_seq: get(r, 2)?,
                body: std::str::from_utf8(body).map_err(corrupt)?,
            });
        }
        Ok(Some(shared::log_page(
            chunks, cursor, limit, more, terminal,
        )))
    }
}
