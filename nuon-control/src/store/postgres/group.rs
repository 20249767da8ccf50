//! Group commit of the runners' writes: heartbeats, log batches and
//! completions from many runners share one transaction.
//!
//! A call queues its write and waits for the answer. A few committer tasks
//! take whatever is waiting (up to [`MAX_BATCH`] writes or
//! [`MAX_BATCH_LOG_BYTES`] of log lines) and apply it, however many writes
//! it holds, in two round trips and no transaction (optimistically):
//!
//! 1. one statement sees the heartbeating runners (their rows locked in id
//!    order, for that statement only) and reads every attempt the writes
//!    name, with its job, as one snapshot;
//! 2. each write is decided in order, in memory, against those rows (the
//!    fence, the log high mark, a completion's idempotence), so that a
//!    refused write refuses only itself;
//! 3. one statement locks the attempts the batch changes, in key order,
//!    keeping only those still as step 1 read them, and stores the
//!    changes of those alone: their new leases, high marks and ends, their
//!    log chunks and their jobs' results.
//!
//! An attempt another write moved between 1 and 3 (a log batch or a
//! completion through the other replica, the lease reaper) is not written:
//! the writes that name it are applied again, in their order, the
//! pessimistic way: in one transaction of at most five round trips that
//! locks the runners' rows, then the attempts' (each in key order), reads
//! them, decides, and writes. Every committer locks runner rows, then
//! attempt rows, then job rows, each in key order, so two batches (of
//! this replica or another) wait on each other at most once and never
//! deadlock. A batch the database refuses is applied again write by
//! write, so one bad write fails alone; every write is safe to send
//! again.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use nuon_core::wire::{
    Completion, CompletionAck, LeaseRef, LeaseState, LeaseStatus, LogAck, LogBatch,
};
use nuon_core::{JobId, JobStatus, RunnerId, now_ms};
use sqlx::Connection;
use tokio::sync::{Mutex, mpsc, oneshot};

use super::pool::Conns;
use super::{db, get};
use crate::store::shared::{self, corrupt};
use crate::store::{LogQuota, Result, StoreError};

/// The most writes one transaction applies.
pub(super) const MAX_BATCH: usize = 256;
/// A batch stops taking log batches once it holds this many bytes of lines.
pub(super) const MAX_BATCH_LOG_BYTES: usize = 8 * 1024 * 1024;
/// Writes queued beyond this make callers wait (back-pressure).
const QUEUE: usize = 4096;

/// One runner's write.
enum Op {
    Heartbeat {
        runner: RunnerId,
        leases: Vec<LeaseRef>,
        lease_ms: u64,
    },
    Logs {
        runner: RunnerId,
        job: JobId,
        batch: LogBatch,
        quota: LogQuota,
    },
    Complete {
        runner: RunnerId,
        job: JobId,
        /// The attempt's last lines, stored first.
        logs: Option<(LogBatch, LogQuota)>,
        completion: Completion,
    },
}

impl Op {
    /// The log bytes the write carries.
    fn log_bytes(&self) -> usize {
        match self {
            Op::Logs { batch, .. }
            | Op::Complete {
                logs: Some((batch, _)),
                ..
            } => batch.lines.as_bytes().len(),
            _ => 0,
        }
    }
}

/// The answer to one [`Op`].
enum Answer {
    Leases(Vec<LeaseStatus>),
    Logs(LogAck, u64),
    /// With the bytes of log the completion's lines stored.
    Completed(CompletionAck, u64),
}

struct Write {
    op: Op,
    reply: oneshot::Sender<Result<Answer>>,
}

/// The queue in front of the committers.
pub(super) struct GroupCommit {
    queue: mpsc::Sender<Write>,
}

impl GroupCommit {
    /// Starts `committers` tasks applying batches on `conns`.
    pub(super) fn start(
        conns: &Conns,
        committers: usize,
    ) -> (GroupCommit, Vec<tokio::task::JoinHandle<()>>) {
        let (queue, rx) = mpsc::channel(QUEUE);
        let rx = Arc::new(Mutex::new(rx));
        let tasks = (0..committers.max(1))
            .map(|_| tokio::spawn(committer(conns.clone(), rx.clone())))
            .collect();
        (GroupCommit { queue }, tasks)
    }

    async fn submit(&self, op: Op) -> Result<Answer> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Write { op, reply })
            .await
            .map_err(|_| StoreError::Closed)?;
        answer.await.map_err(|_| StoreError::Closed)?
    }

    pub(super) async fn heartbeat(
        &self,
        runner: &RunnerId,
        leases: &[LeaseRef],
        lease_ms: u64,
    ) -> Result<Vec<LeaseStatus>> {
        let op = Op::Heartbeat {
            runner: runner.clone(),
            leases: leases.to_vec(),
            lease_ms,
        };
        match self.submit(op).await? {
            Answer::Leases(states) => Ok(states),
            _ => Err(mismatch()),
        }
    }

    pub(super) async fn append_logs(
        &self,
        runner: &RunnerId,
        job: &JobId,
        batch: LogBatch,
        quota: LogQuota,
    ) -> Result<(LogAck, u64)> {
        let op = Op::Logs {
            runner: runner.clone(),
            job: job.clone(),
            batch,
            quota,
        };
        match self.submit(op).await? {
            Answer::Logs(ack, wrote) => Ok((ack, wrote)),
            _ => Err(mismatch()),
        }
    }

    pub(super) async fn complete(
        &self,
        runner: &RunnerId,
        job: &JobId,
        logs: Option<(LogBatch, LogQuota)>,
        completion: Completion,
    ) -> Result<(CompletionAck, u64)> {
        let op = Op::Complete {
            runner: runner.clone(),
            job: job.clone(),
            logs,
            completion,
        };
        match self.submit(op).await? {
            Answer::Completed(ack, wrote) => Ok((ack, wrote)),
            _ => Err(mismatch()),
        }
    }
}

fn mismatch() -> StoreError {
    StoreError::Invalid("internal error: a write was answered as another kind".into())
}

/// Takes what is waiting, applies it, answers; until the queue closes.
async fn committer(conns: Conns, rx: Arc<Mutex<mpsc::Receiver<Write>>>) {
    loop {
        let mut batch = Vec::new();
        {
            let mut rx = rx.lock().await;
            let Some(first) = rx.recv().await else {
                return;
            };
            let mut bytes = first.op.log_bytes();
            batch.push(first);
            while batch.len() < MAX_BATCH && bytes < MAX_BATCH_LOG_BYTES {
                match rx.try_recv() {
                    Ok(w) => {
                        bytes += w.op.log_bytes();
                        batch.push(w);
                    }
                    Err(_) => break,
                }
            }
        }
        let ops: Vec<&Op> = batch.iter().map(|w| &w.op).collect();
        match apply(&conns, &ops).await {
            Ok(answers) => {
                for (w, a) in batch.into_iter().zip(answers) {
                    let _ = w.reply.send(a);
                }
            }
            Err(e) if batch.len() == 1 => {
                let _ = batch.pop().map(|w| w.reply.send(Err(e)));
            }
            Err(e) => {
                // One write the database refuses must not fail the others
                // (every runner's heartbeats with it): each on its own.
                tracing::warn!(writes = batch.len(), error = %e, "a group commit failed; applying its writes one by one");
                for w in batch {
                    let answer = apply(&conns, &[&w.op])
                        .await
                        .and_then(|mut a| a.pop().unwrap_or_else(|| Err(mismatch())));
                    let _ = w.reply.send(answer);
                }
            }
        }
    }
}

/// An attempt row as the batch sees it: read at the start, changed by each
/// write in turn, written back at the end when `dirty`.
struct Attempt {
    /// The job's current attempt number.
    current: i64,
    cancel: bool,
    runner: String,
    state: String,
    acked: i64,
    /// The job's status.
    status: String,
    /// The bytes of log stored (`LOG_TRUNCATED` once cut at a quota).
    log_bytes: i64,
    /// A heartbeat extended the lease to this.
    lease_until: Option<i64>,
    finished_at: Option<i64>,
    dirty: bool,
    /// The high mark, state and log bytes as read: the row is written only
    /// while it still holds them.
    read: (i64, String, i64),
}

/// A job's end, as a completion records it.
struct JobEnd {
    job: String,
    attempt: i64,
    status: &'static str,
    exit_code: Option<i32>,
    reason: Option<String>,
    outputs: Option<String>,
}

/// A log chunk to insert.
struct Chunk<'a> {
    job: &'a str,
    attempt: i64,
    first: i64,
    last: i64,
    body: std::borrow::Cow<'a, str>,
}

/// Everything a batch writes, decided in memory.
#[derive(Default)]
struct Plan<'a> {
    chunks: Vec<Chunk<'a>>,
    ends: Vec<JobEnd>,
}

type Key = (String, i64);

/// Applies `ops`; one answer per op, in order. An `Err` is the database's:
/// what of the batch was stored is safe to store again.
async fn apply(conns: &Conns, ops: &[&Op]) -> Result<Vec<Result<Answer>>> {
    let (mut answers, moved) = apply_as_read(conns, ops).await?;
    if moved.is_empty() {
        return Ok(answers);
    }
    tracing::debug!(
        attempts = moved.len(),
        "attempts moved under a group commit; their writes again under locks"
    );
    // Each write naming a moved attempt, again, in order: a heartbeat with
    // only those of its leases (the others' are stored).
    let mut again: Vec<(usize, Option<Op>)> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let keys = keys_of(op);
        if !keys.iter().any(|k| moved.contains(k)) {
            continue;
        }
        let part = match op {
            Op::Heartbeat {
                runner,
                leases,
                lease_ms,
            } => Some(Op::Heartbeat {
                runner: runner.clone(),
                leases: leases
                    .iter()
                    .filter(|l| moved.contains(&key(&l.job_id, l.attempt)))
                    .cloned()
                    .collect(),
                lease_ms: *lease_ms,
            }),
            _ => None,
        };
        again.push((i, part));
    }
    let refs: Vec<&Op> = again
        .iter()
        .map(|(i, part)| part.as_ref().unwrap_or(ops[*i]))
        .collect();
    let redone = apply_locked(conns, &refs).await?;
    for ((i, part), answer) in again.iter().zip(redone) {
        match (part, &mut answers[*i], answer) {
            (Some(_), Ok(Answer::Leases(all)), Ok(Answer::Leases(some))) => {
                for s in some {
                    if let Some(l) = all
                        .iter_mut()
                        .find(|l| l.job_id == s.job_id && l.attempt == s.attempt)
                    {
                        *l = s;
                    }
                }
            }
            (_, slot, answer) => *slot = answer,
        }
    }
    Ok(answers)
}

fn key(job: &JobId, attempt: u32) -> Key {
    (job.as_str().to_owned(), i64::from(attempt))
}

/// The attempts a write names.
fn keys_of(op: &Op) -> Vec<Key> {
    match op {
        Op::Heartbeat { leases, .. } => leases.iter().map(|l| key(&l.job_id, l.attempt)).collect(),
        Op::Logs { job, batch, .. } => vec![key(job, batch.attempt)],
        Op::Complete {
            job, completion, ..
        } => vec![key(job, completion.attempt)],
    }
}

/// The heartbeating runners and the attempts `ops` name, each in key order.
fn named<'o>(ops: &[&'o Op]) -> (Vec<&'o str>, BTreeSet<Key>) {
    let mut runners = BTreeSet::new();
    let mut keys = BTreeSet::new();
    for op in ops {
        if let Op::Heartbeat { runner, .. } = op {
            runners.insert(runner.as_str());
        }
        keys.extend(keys_of(op));
    }
    (runners.into_iter().collect(), keys)
}

/// The attempt rows `rows` hold, as [`attempts!`] selects them.
fn attempts_of(rows: &[sqlx::postgres::PgRow]) -> Result<HashMap<Key, Attempt>> {
    let mut attempts = HashMap::with_capacity(rows.len());
    for r in rows {
        let (acked, state, log_bytes): (i64, String, i64) = (get(r, 6)?, get(r, 5)?, get(r, 8)?);
        attempts.insert(
            (get(r, 0)?, get(r, 1)?),
            Attempt {
                current: get(r, 2)?,
                cancel: get(r, 3)?,
                runner: get(r, 4)?,
                read: (acked, state.clone(), log_bytes),
                state,
                acked,
                status: get(r, 7)?,
                log_bytes,
                lease_until: None,
                finished_at: None,
                dirty: false,
            },
        );
    }
    Ok(attempts)
}

/// The columns of an attempt and its job a batch decides on (a macro, for
/// `concat!`: sqlx takes a query's text as a `&'static str`).
macro_rules! attempts {
    () => {
        "SELECT a.job_id, a.n, j.attempts, j.cancel_requested, a.runner_id, \
            a.state, a.acked_seq, j.status, a.log_bytes \
         FROM attempts a JOIN jobs j ON j.id = a.job_id \
         WHERE (a.job_id, a.n) IN (SELECT * FROM UNNEST($1::text[], $2::bigint[]))"
    };
}

/// Applies `ops` against one snapshot, without a transaction: the answers,
/// and the attempts another write moved before this one's changes could
/// be stored (those changes are not; the caller applies their writes
/// again).
async fn apply_as_read(conns: &Conns, ops: &[&Op]) -> Result<(Vec<Result<Answer>>, BTreeSet<Key>)> {
    let now = now_ms();
    let (runners, keys) = named(ops);
    let (job_ids, ns): (Vec<&str>, Vec<i64>) = keys.iter().map(|(j, n)| (j.as_str(), *n)).unzip();
    let mut conn = conns.get().await?;
    // The runners' rows are locked in id order, for this statement alone:
    // it locks nothing else.
    let rows = sqlx::query(concat!(
        "WITH seen AS ( \
            UPDATE runners r SET last_seen_at = $3 FROM ( \
                SELECT id FROM runners WHERE id = ANY($4) ORDER BY id FOR UPDATE) s \
            WHERE r.id = s.id) ",
        attempts!()
    ))
    .bind(&job_ids)
    .bind(&ns)
    .bind(now)
    .bind(&runners)
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    let mut attempts = attempts_of(&rows)?;
    #[cfg(test)]
    pause::between_read_and_write(&keys).await;
    let mut plan = Plan::default();
    let answers: Vec<Result<Answer>> = ops
        .iter()
        .map(|op| decide(op, now, &mut attempts, &mut plan))
        .collect();
    let moved = write(&mut conn, now, &attempts, &plan).await?;
    conn.done();
    Ok((answers, moved))
}

/// Applies `ops` in one transaction that locks what it reads; one answer
/// per op, in order. An `Err` is the database's: nothing of the batch was
/// stored.
async fn apply_locked(conns: &Conns, ops: &[&Op]) -> Result<Vec<Result<Answer>>> {
    let now = now_ms();
    let (runners, keys) = named(ops);
    let mut conn = conns.get().await?;
    let mut tx = conn.begin().await.map_err(db)?;
    if !runners.is_empty() {
        sqlx::query(
            "UPDATE runners r SET last_seen_at = $2 FROM ( \
                SELECT id FROM runners WHERE id = ANY($1) ORDER BY id FOR UPDATE) s \
             WHERE r.id = s.id",
        )
        .bind(&runners)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    }
    let (job_ids, ns): (Vec<&str>, Vec<i64>) = keys.iter().map(|(j, n)| (j.as_str(), *n)).unzip();
    let rows = sqlx::query(concat!(
        attempts!(),
        " ORDER BY a.job_id, a.n FOR UPDATE OF a"
    ))
    .bind(&job_ids)
    .bind(&ns)
    .fetch_all(&mut *tx)
    .await
    .map_err(db)?;
    let mut attempts = attempts_of(&rows)?;
    // A completion of another batch may have ended one of these attempts
    // while this one waited for its lock: the attempt row read is the new
    // one, the job row the old one. A new statement sees the job's end.
    let ended: Vec<&str> = attempts
        .iter()
        .filter(|(_, a)| a.state == "finished" && !status_is_final(&a.status))
        .map(|(k, _)| k.0.as_str())
        .collect();
    if !ended.is_empty() {
        let rows: Vec<(String, String)> =
            sqlx::query_as("SELECT id, status FROM jobs WHERE id = ANY($1)")
                .bind(&ended)
                .fetch_all(&mut *tx)
                .await
                .map_err(db)?;
        let rows: HashMap<String, String> = rows.into_iter().collect();
        for ((job, _), a) in attempts.iter_mut() {
            if let Some(status) = rows.get(job) {
                a.status.clone_from(status);
            }
        }
    }
    let mut plan = Plan::default();
    let answers: Vec<Result<Answer>> = ops
        .iter()
        .map(|op| decide(op, now, &mut attempts, &mut plan))
        .collect();
    // The rows are locked: none can have moved.
    if !write(&mut tx, now, &attempts, &plan).await?.is_empty() {
        return Err(StoreError::Invalid(
            "internal error: an attempt locked by a group commit changed under it".into(),
        ));
    }
    tx.commit().await.map_err(db)?;
    conn.done();
    Ok(answers)
}

fn status_is_final(status: &str) -> bool {
    status
        .parse::<JobStatus>()
        .is_ok_and(JobStatus::is_terminal)
}

/// Decides one write against the attempts as the writes before it left them.
fn decide<'a>(
    op: &'a Op,
    now: i64,
    attempts: &mut HashMap<Key, Attempt>,
    plan: &mut Plan<'a>,
) -> Result<Answer> {
    match op {
        Op::Heartbeat {
            runner,
            leases,
            lease_ms,
        } => Ok(Answer::Leases(
            leases
                .iter()
                .map(|l| {
                    let key = (l.job_id.as_str().to_owned(), i64::from(l.attempt));
                    let row = attempts.get_mut(&key);
                    let state = shared::lease_state(
                        row.as_ref()
                            .map(|a| (a.current, a.cancel, a.runner.as_str(), a.state.as_str())),
                        runner,
                        l.attempt,
                    );
                    if let Some(a) = row
                        && state != LeaseState::Stale
                    {
                        a.lease_until = Some(now + *lease_ms as i64);
                        a.dirty = true;
                    }
                    LeaseStatus {
                        job_id: l.job_id.clone(),
                        attempt: l.attempt,
                        state,
                    }
                })
                .collect(),
        )),
        Op::Logs {
            runner,
            job,
            batch,
            quota,
        } => {
            let (ack, wrote) = decide_logs(runner, job, batch, *quota, attempts, plan)?;
            Ok(Answer::Logs(ack, wrote))
        }
        Op::Complete {
            runner,
            job,
            logs,
            completion,
        } => {
            let n = completion.attempt;
            // Idempotence: the same attempt completing again gets the same
            // answer (its lines were stored the first time).
            if let Some(a) = attempts.get(&key(job, n))
                && a.runner == runner.as_str()
                && a.state == "finished"
                && a.current == i64::from(n)
            {
                return Ok(Answer::Completed(
                    CompletionAck {
                        status: a.status.parse().map_err(corrupt)?,
                    },
                    0,
                ));
            }
            let wrote = match logs {
                Some((batch, quota)) => decide_logs(runner, job, batch, *quota, attempts, plan)?.1,
                None => 0,
            };
            let a = fenced(attempts, runner, job, n)?;
            if (a.acked as u64) < completion.log_lines {
                return Err(shared::logs_pending(
                    job,
                    n,
                    completion.log_lines,
                    a.acked as u64,
                ));
            }
            let result = &completion.result;
            let status = JobStatus::from(result.outcome);
            a.state = "finished".into();
            a.status = status.as_str().into();
            a.finished_at = Some(now);
            a.dirty = true;
            plan.ends.push(JobEnd {
                job: job.as_str().to_owned(),
                attempt: i64::from(n),
                status: status.as_str(),
                exit_code: result.exit_code,
                reason: result.reason.clone(),
                outputs: (!result.outputs.is_null()).then(|| result.outputs.to_string()),
            });
            Ok(Answer::Completed(CompletionAck { status }, wrote))
        }
    }
}

/// Decides one log batch: the lines past the attempt's high mark, as far
/// as `quota` lets them; the new mark and the bytes stored.
fn decide_logs<'a>(
    runner: &RunnerId,
    job: &'a JobId,
    batch: &'a LogBatch,
    quota: LogQuota,
    attempts: &mut HashMap<Key, Attempt>,
    plan: &mut Plan<'a>,
) -> Result<(LogAck, u64)> {
    let a = fenced(attempts, runner, job, batch.attempt)?;
    let Some((skip, first, last)) = shared::new_lines(a.acked as u64, batch) else {
        let acked_seq = a.acked as u64;
        return Ok((LogAck { acked_seq }, 0));
    };
    let kept = shared::within_quota(batch.lines.tail(skip), (first, last), a.log_bytes, quota);
    let mut wrote = 0;
    if let Some(kept) = kept {
        wrote = kept.body.len() as u64;
        plan.chunks.push(Chunk {
            job: job.as_str(),
            attempt: i64::from(batch.attempt),
            first: first as i64,
            last: kept.last as i64,
            body: kept.body,
        });
        a.log_bytes = kept.log_bytes;
    }
    a.acked = last as i64;
    a.dirty = true;
    Ok((LogAck { acked_seq: last }, wrote))
}

/// The attempt a runner may write to, or why not (the fence).
fn fenced<'m>(
    attempts: &'m mut HashMap<Key, Attempt>,
    runner: &RunnerId,
    job: &JobId,
    n: u32,
) -> Result<&'m mut Attempt> {
    let a = attempts.get_mut(&(job.as_str().to_owned(), i64::from(n)));
    shared::check_attempt(
        a.as_ref()
            .map(|a| (a.current, a.runner.as_str(), a.state.as_str())),
        runner,
        job,
        n,
    )?;
    a.ok_or_else(|| StoreError::stale(format!("job {job} has no attempt {n} of this runner")))
}

/// Writes what the batch decided, in one statement: the changed attempts
/// still as the batch read them are locked in key order and written, with
/// their log chunks and their jobs' ends; those another write moved are
/// left, with theirs, and returned.
async fn write(
    conn: &mut sqlx::PgConnection,
    now: i64,
    attempts: &HashMap<Key, Attempt>,
    plan: &Plan<'_>,
) -> Result<BTreeSet<Key>> {
    let dirty: Vec<(&Key, &Attempt)> = attempts.iter().filter(|(_, a)| a.dirty).collect();
    if dirty.is_empty() {
        // Chunks and ends are only ever of a changed attempt.
        return Ok(BTreeSet::new());
    }
    let c = &plan.chunks;
    let e = &plan.ends;
    let written: Vec<(String, i64)> = sqlx::query_as(
        "WITH locked AS ( \
            SELECT a.job_id, a.n FROM attempts a \
            JOIN UNNEST($6::text[], $7::bigint[], $13::bigint[], $14::text[], $15::bigint[]) \
                AS w(id, n, acked, state, bytes) ON a.job_id = w.id AND a.n = w.n \
            WHERE a.acked_seq = w.acked AND a.state = w.state AND a.log_bytes = w.bytes \
            ORDER BY a.job_id, a.n FOR UPDATE OF a), \
         att AS ( \
            UPDATE attempts a SET acked_seq = t.acked, state = t.state, log_bytes = t.bytes, \
                lease_expires = COALESCE(t.lease, a.lease_expires), \
                confirmed = a.confirmed OR t.lease IS NOT NULL, \
                finished_at = COALESCE(t.finished, a.finished_at) \
            FROM locked l, UNNEST($6::text[], $7::bigint[], $8::bigint[], $9::text[], \
                $10::bigint[], $11::bigint[], $12::bigint[]) \
                AS t(id, n, acked, state, lease, finished, bytes) \
            WHERE a.job_id = l.job_id AND a.n = l.n AND a.job_id = t.id AND a.n = t.n \
            RETURNING a.job_id, a.n), \
         chunks AS ( \
            INSERT INTO log_records (job_id, attempt, first_seq, last_seq, body) \
            SELECT c.id, c.n, c.f, c.l, c.b FROM UNNEST($1::text[], $2::bigint[], \
                $3::bigint[], $4::bigint[], $5::bytea[]) WITH ORDINALITY AS c(id, n, f, l, b, ord) \
            JOIN att ON att.job_id = c.id AND att.n = c.n ORDER BY c.ord), \
         ends AS ( \
            UPDATE jobs j SET status = e.status, exit_code = e.code, reason = e.reason, \
                outputs = e.outputs, finished_at = $16 \
            FROM UNNEST($17::text[], $18::bigint[], $19::text[], $20::int[], $21::text[], \
                $22::text[]) AS e(id, n, status, code, reason, outputs) \
            JOIN att ON att.job_id = e.id AND att.n = e.n \
            WHERE j.id = e.id) \
         SELECT job_id, n FROM att",
    )
    .bind(c.iter().map(|c| c.job).collect::<Vec<_>>())
    .bind(c.iter().map(|c| c.attempt).collect::<Vec<_>>())
    .bind(c.iter().map(|c| c.first).collect::<Vec<_>>())
    .bind(c.iter().map(|c| c.last).collect::<Vec<_>>())
    .bind(c.iter().map(|c| c.body.as_bytes()).collect::<Vec<_>>())
    .bind(dirty.iter().map(|(k, _)| k.0.as_str()).collect::<Vec<_>>())
    .bind(dirty.iter().map(|(k, _)| k.1).collect::<Vec<_>>())
    .bind(dirty.iter().map(|(_, a)| a.acked).collect::<Vec<_>>())
    .bind(
        dirty
            .iter()
            .map(|(_, a)| a.state.as_str())
            .collect::<Vec<_>>(),
    )
    .bind(dirty.iter().map(|(_, a)| a.lease_until).collect::<Vec<_>>())
    .bind(dirty.iter().map(|(_, a)| a.finished_at).collect::<Vec<_>>())
    .bind(dirty.iter().map(|(_, a)| a.log_bytes).collect::<Vec<_>>())
    .bind(dirty.iter().map(|(_, a)| a.read.0).collect::<Vec<_>>())
    .bind(
        dirty
            .iter()
            .map(|(_, a)| a.read.1.as_str())
            .collect::<Vec<_>>(),
    )
    .bind(dirty.iter().map(|(_, a)| a.read.2).collect::<Vec<_>>())
    .bind(now)
    .bind(e.iter().map(|e| e.job.as_str()).collect::<Vec<_>>())
    .bind(e.iter().map(|e| e.attempt).collect::<Vec<_>>())
    .bind(e.iter().map(|e| e.status).collect::<Vec<_>>())
    .bind(e.iter().map(|e| e.exit_code).collect::<Vec<_>>())
    .bind(e.iter().map(|e| e.reason.as_deref()).collect::<Vec<_>>())
    .bind(e.iter().map(|e| e.outputs.as_deref()).collect::<Vec<_>>())
    .fetch_all(conn)
    .await
    .map_err(db)?;
    let mut moved: BTreeSet<Key> = dirty.into_iter().map(|(k, _)| k.clone()).collect();
    for k in written {
        moved.remove(&k);
    }
    Ok(moved)
}

/// A pause between a batch's read and its write, for the tests that move
/// an attempt in that window.
#[cfg(test)]
pub(crate) mod pause {
    use std::collections::{BTreeSet, HashMap};
    use std::sync::Mutex;

    use futures_util::future::BoxFuture;

    static PAUSES: Mutex<Option<HashMap<String, BoxFuture<'static, ()>>>> = Mutex::new(None);

    /// The next batch naming `job` runs `then` between its read and its
    /// write.
    pub(crate) fn before_writing(job: &nuon_core::JobId, then: BoxFuture<'static, ()>) {
        let mut pauses = PAUSES.lock().unwrap();
        pauses
            .get_or_insert_with(HashMap::new)
            .insert(job.as_str().to_owned(), then);
    }

    pub(in crate::store::postgres) async fn between_read_and_write(keys: &BTreeSet<super::Key>) {
        let then = {
            let mut pauses = PAUSES.lock().unwrap();
            let Some(pauses) = pauses.as_mut() else {
                return;
            };
            keys.iter().find_map(|(job, _)| pauses.remove(job))
        };
        if let Some(then) = then {
            then.await;
        }
    }
}
