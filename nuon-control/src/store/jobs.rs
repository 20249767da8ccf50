//! Jobs as the Control API sees them: queue, read, cancel, logs.

use super::rows::{Cells, Record};
use super::shared::{self, CHUNKS_PER_PAGE, LogChunk, corrupt};
use super::sql::{Sql, Stmt, args, in_list};
use super::*;
use nuon_core::model::QueuedJob;
use nuon_core::wire::{LeaseRef, LogPage};
use nuon_core::{JobStatus, now_ms};

/// A job to queue: its spec, the signed bytes sealed, and the payload as
/// the Control API shows it (made by [`crate::keys`]).
#[derive(Debug, Clone)]
pub struct NewJob {
    /// The spec.
    pub spec: JobSpec,
    /// `serde_json::to_string(&spec)`, the signed bytes, sealed: what a
    /// claim hands out, opened on the way to the runner.
    pub sealed_spec: String,
    /// The signature of the signed bytes.
    pub signature: String,
    /// The payload as the Control API shows it (no secret in it).
    pub payload: serde_json::Value,
}

/// Jobs as the Control API sees them: queue, read, cancel, logs.
#[async_trait]
pub trait JobStore: Send + Sync + 'static {
    /// Queues a job.
    async fn enqueue_job(&self, job: NewJob) -> Result<QueuedJob>;

    /// One job of the org.
    async fn get_job(&self, org: &OrgId, id: &JobId) -> Result<Option<QueuedJob>>;

    /// The org's newest jobs.
    async fn list_jobs(&self, org: &OrgId, limit: u32) -> Result<Vec<QueuedJob>>;

    /// Cancels a queued job at once, or flags a running one for its runner.
    async fn request_cancel(&self, org: &OrgId, id: &JobId) -> Result<Option<QueuedJob>>;

    /// Up to `limit` log lines of an org's job after `cursor`.
    async fn read_logs(
        &self,
        org: &OrgId,
        job: &JobId,
        cursor: u64,
        limit: u32,
    ) -> Result<Option<LogPage>>;

    /// The attempts `runner` holds as the store says: running, confirmed
    /// by a heartbeat (at most 1,000).
    async fn held_attempts(&self, runner: &RunnerId) -> Result<Vec<LeaseRef>>;

    /// The runners that have a job queued: what a replica's sweep wakes
    /// when a wake-up from another replica may have been lost.
    async fn queued_runners(&self) -> Result<Vec<RunnerId>>;

    /// Those of these jobs (of any org) still queued or running: the
    /// leader's check, in one read, of the workflows it left waiting on
    /// them.
    async fn live_jobs(&self, jobs: &[JobId]) -> Result<Vec<JobId>>;
}

/// The most attempts [`JobStore::held_attempts`] lists.
pub const MAX_KNOWN_LEASES: u32 = 1000;

/// An attempt a runner holds.
struct HeldRow(LeaseRef);

impl Record for HeldRow {
    const COLUMNS: &'static str = "job_id, n";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(HeldRow(LeaseRef {
            job_id: shared::parse_id(&r.text(0)?)?,
            attempt: r.u32(1)?,
        }))
    }
}

/// The statement that queues `job`, as both stores write it (in the
/// caller's transaction, with what the job is for).
pub(super) fn job_insert(job: &NewJob) -> Stmt {
    job_insert_from(job, "")
}

/// The insert of a new job (`$1`: its id, to `$10`) as a `SELECT` with
/// `from` after it (`FROM ...`: the job is inserted once for each row).
pub(super) fn job_insert_from(job: &NewJob, from: &str) -> Stmt {
    let s = &job.spec;
    Stmt::new(
        format!(
            "INSERT INTO jobs (id, org_id, runner_id, kind, spec, signature, status, max_attempts, \
             timeout_secs, created_at, payload) \
             SELECT $1, $2, $3, $4, $5, $6, 'queued', $7, $8, $9, $10 {from}"
        ),
        args![
            s.job_id.as_str(),
            s.org_id.as_str(),
            s.runner_id.as_str(),
            s.kind.as_str(),
            job.sealed_spec.as_str(),
            job.signature.as_str(),
            s.retry.max_attempts,
            i64::try_from(s.timeout_secs).unwrap_or(i64::MAX),
            s.created_at_ms,
            job.payload.to_string(),
        ],
    )
}

/// The org's job `id`.
fn job_of(org: &OrgId, id: &JobId) -> Stmt {
    Stmt::new(
        format!(
            "SELECT {} FROM jobs WHERE id = $1 AND org_id = $2",
            QueuedJob::COLUMNS
        ),
        args![id.as_str(), org.as_str()],
    )
}

/// A log chunk as stored: its id, attempt, first line and body.
struct ChunkRow(i64, u32, i64, Vec<u8>);

impl Record for ChunkRow {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(ChunkRow(r.int(0)?, r.u32(1)?, r.int(2)?, r.bytes(3)?))
    }
}

/// A log chunk's size: its id, lines and bytes.
struct SizeRow(shared::ChunkSize);

impl Record for SizeRow {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(SizeRow((r.int(0)?, r.int(1)?, r.int(2)?)))
    }
}

/// Jobs, written once for both databases.
#[async_trait]
impl<S: Sql + 'static> JobStore for S {
    async fn enqueue_job(&self, job: NewJob) -> Result<QueuedJob> {
        self.execute_one(job_insert(&job)).await?;
        self.query_one(job_of(&job.spec.org_id, &job.spec.job_id))
            .await?
            .ok_or_else(|| StoreError::Invalid("job vanished after insert".into()))
    }

    async fn get_job(&self, org: &OrgId, id: &JobId) -> Result<Option<QueuedJob>> {
        self.query_one(job_of(org, id)).await
    }

    async fn held_attempts(&self, runner: &RunnerId) -> Result<Vec<LeaseRef>> {
        let held: Vec<HeldRow> = self
            .query(Stmt::new(
                format!(
                    "SELECT {} FROM attempts WHERE state = 'running' AND confirmed = TRUE \
                     AND runner_id = $1 ORDER BY job_id, n LIMIT $2",
                    HeldRow::COLUMNS
                ),
                args![runner.as_str(), MAX_KNOWN_LEASES],
            ))
            .await?;
        Ok(held.into_iter().map(|h| h.0).collect())
    }

    async fn queued_runners(&self) -> Result<Vec<RunnerId>> {
        let ids: Vec<String> = self
            .query(Stmt::new(
                "SELECT DISTINCT runner_id FROM jobs WHERE status = 'queued'",
                args![],
            ))
            .await?;
        ids.iter().map(|id| shared::parse_id(id)).collect()
    }

    async fn live_jobs(&self, jobs: &[JobId]) -> Result<Vec<JobId>> {
        let ids: Vec<&str> = jobs.iter().map(JobId::as_str).collect();
        let mut live = Vec::new();
        if let Some(stmt) = in_list(
            S::DIALECT,
            &[],
            &ids,
            "SELECT id FROM jobs WHERE id IN (IDS) AND status IN ('queued', 'running')",
        ) {
            let rows: Vec<String> = self.query(stmt).await?;
            for id in rows {
                live.push(shared::parse_id(&id)?);
            }
        }
        Ok(live)
    }

    async fn list_jobs(&self, org: &OrgId, limit: u32) -> Result<Vec<QueuedJob>> {
        self.query(Stmt::new(
            format!(
                "SELECT {} FROM jobs WHERE org_id = $1 ORDER BY seq DESC LIMIT $2",
                QueuedJob::COLUMNS
            ),
            args![org.as_str(), limit],
        ))
        .await
    }

    async fn request_cancel(&self, org: &OrgId, id: &JobId) -> Result<Option<QueuedJob>> {
        self.execute(vec![
            Stmt::new(
                "UPDATE jobs SET status = 'cancelled', cancel_requested = TRUE, \
                 reason = 'cancelled before it started', finished_at = $3 \
                 WHERE id = $1 AND org_id = $2 AND status = 'queued'",
                args![id.as_str(), org.as_str(), now_ms()],
            ),
            Stmt::new(
                "UPDATE jobs SET cancel_requested = TRUE \
                 WHERE id = $1 AND org_id = $2 AND status = 'running'",
                args![id.as_str(), org.as_str()],
            ),
        ])
        .await?;
        self.query_one(job_of(org, id)).await
    }

    async fn read_logs(
        &self,
        org: &OrgId,
        job: &JobId,
        cursor: u64,
        limit: u32,
    ) -> Result<Option<LogPage>> {
        let status: Option<String> = self
            .query_one(Stmt::new(
                "SELECT status FROM jobs WHERE id = $1 AND org_id = $2",
                args![job.as_str(), org.as_str()],
            ))
            .await?;
        let Some(status) = status else {
            return Ok(None);
        };
        let terminal = status
            .parse::<JobStatus>()
            .map(JobStatus::is_terminal)
            .unwrap_or(false);
        let (table, body) = (S::DIALECT.log_records(), S::DIALECT.log_body());
        let first = shared::cursor_chunk(cursor);
        // The chunks' sizes first, then only the bodies the page needs.
        let sizes: Vec<SizeRow> = self
            .query(Stmt::new(
                format!(
                    "SELECT id, last_seq - first_seq + 1, octet_length(body) FROM {table} \
                     WHERE job_id = $1 AND id >= $2 ORDER BY id LIMIT $3"
                ),
                args![job.as_str(), first, CHUNKS_PER_PAGE],
            ))
            .await?;
        let sizes: Vec<shared::ChunkSize> = sizes.into_iter().map(|SizeRow(s)| s).collect();
        let (take, more) = shared::chunks_for_page(&sizes, cursor, limit);
        let last = sizes.get(take.wrapping_sub(1)).map_or(-1, |c| c.0);
        let rows: Vec<ChunkRow> = self
            .query(Stmt::new(
                format!(
                    "SELECT id, attempt, first_seq, {body} FROM {table} \
                     WHERE job_id = $1 AND id >= $2 AND id <= $3 ORDER BY id"
                ),
                args![job.as_str(), first, last],
            ))
            .await?;
        let mut chunks = Vec::with_capacity(rows.len());
        for ChunkRow(id, attempt, first_seq, body) in &rows {
            chunks.push(LogChunk {
                id: *id,
                attempt: *attempt,
                first_seq: *first_seq,
                body: std::str::from_utf8(body).map_err(corrupt)?,
            });
        }
        Ok(Some(shared::log_page(
            chunks, cursor, limit, more, terminal,
        )))
    }
}
