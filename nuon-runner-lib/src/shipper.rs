//! Ships one attempt's spooled log and its completion to the control plane.
//!
//! One task per attempt, one request in flight: it reads the spool from the
//! last acknowledged line, sends what is there (up to [`MAX_BATCH_LINES`]
//! lines or about [`MAX_BATCH_BYTES`]), and sends again as soon as the answer
//! comes, so batches grow by themselves when a job writes fast. When the
//! attempt has ended, it sends the completion with the lines not yet
//! acknowledged (up to [`MAX_COMPLETION_LOG_BYTES`]; more go as batches
//! first), and removes the attempt's spool files. A control plane that
//! does not take lines in a completion (a release before it) answers that
//! it misses them: they go as batches, then the completion alone.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nuon_core::wire::{
    Completion, CompletionLogs, LogBatch, LogRecords, MAX_COMPLETION_LOG_BYTES,
    MAX_LOG_LINES_PER_BATCH,
};
use nuon_core::{Transport, TransportError};
use tokio::sync::Notify;

use crate::backoff::Backoff;
use crate::spool::{self, Meta, SpoolReader};

/// The most lines one batch carries.
pub(crate) const MAX_BATCH_LINES: usize = MAX_LOG_LINES_PER_BATCH;
/// About the most bytes of log records one batch carries.
pub(crate) const MAX_BATCH_BYTES: usize = 2 * 1024 * 1024;
/// How long the shipper sleeps without a wake-up before it looks at the
/// spool anyway (a safety net; flushes wake it at once).
const IDLE_RECHECK: Duration = Duration::from_secs(1);
/// How often the shipping progress is saved while lines are acknowledged:
/// it is advisory (a restart without it resends what the control plane
/// already holds, and it takes them again idempotently), and a job that
/// ends within this time costs the disk no progress file at all.
const SAVE_ACKED_EVERY: Duration = Duration::from_secs(1);

/// How a shipper ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ShipEnd {
    /// The completion was accepted; the spool files are gone.
    Completed,
    /// The control plane says the attempt is not ours any more (or gone);
    /// the spool files are gone.
    Dropped,
    /// The runner token was refused; the spool stays for a later start.
    Unauthorized(TransportError),
    /// The spool could not be read; it stays for a later start.
    Failed,
}

/// What a shipper needs.
pub(crate) struct Shipper {
    pub(crate) transport: Arc<dyn Transport>,
    /// The attempt's log file in the spool.
    pub(crate) path: PathBuf,
    pub(crate) meta: Meta,
    pub(crate) notify: Arc<Notify>,
    pub(crate) backoff: Backoff,
}

/// Lines read from the spool and not yet acknowledged, oldest first, as
/// the batch that carries them.
struct Pending {
    batch: LogBatch,
    /// The spool offset just after each line of the batch.
    ends: VecDeque<u64>,
}

impl Pending {
    fn new(attempt: u32) -> Self {
        Pending {
            batch: LogBatch {
                attempt,
                first_seq: 0,
                lines: LogRecords::new(),
            },
            ends: VecDeque::new(),
        }
    }

    /// Reads the next lines of the spool into the batch, as many as are
    /// read ahead and fit; whether there were any.
    fn read(&mut self, reader: &mut SpoolReader) -> std::io::Result<bool> {
        let seq = reader.next_seq();
        let was_empty = self.ends.is_empty();
        let max_lines = MAX_BATCH_LINES.saturating_sub(self.ends.len());
        let max_bytes = MAX_BATCH_BYTES.saturating_sub(self.batch.lines.as_bytes().len());
        let n =
            reader.next_run_into(&mut self.batch.lines, &mut self.ends, max_lines, max_bytes)?;
        if n > 0 && was_empty {
            self.batch.first_seq = seq;
        }
        Ok(n > 0)
    }

    fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    fn full(&self) -> bool {
        self.ends.len() >= MAX_BATCH_LINES || self.batch.lines.as_bytes().len() >= MAX_BATCH_BYTES
    }

    /// The sequence number of the last line.
    fn last_seq(&self) -> u64 {
        self.batch.first_seq + self.ends.len() as u64 - 1
    }

    /// Drops lines up to `seq`; returns the end offset of the last one dropped.
    fn drop_through(&mut self, seq: u64) -> Option<u64> {
        if self.is_empty() || seq < self.batch.first_seq {
            return None;
        }
        let n = ((seq - self.batch.first_seq + 1) as usize).min(self.ends.len());
        let end = self.ends[n - 1];
        self.ends.drain(..n);
        self.batch.lines.remove_front(n);
        self.batch.first_seq += n as u64;
        Some(end)
    }

    fn clear(&mut self) {
        self.ends.clear();
        self.batch.lines.clear();
    }
}

fn is_gone(e: &TransportError) -> bool {
    matches!(e, TransportError::Stale(_))
        || matches!(
            e,
            TransportError::Rejected {
                status: 404 | 410,
                ..
            }
        )
}

impl Shipper {
    fn job(&self) -> &nuon_core::JobId {
        &self.meta.job_id
    }

    fn reader(&self, after: u64, offset: u64) -> Result<SpoolReader, ShipEnd> {
        SpoolReader::open(&self.path, after, offset).map_err(|e| {
            tracing::error!(job = %self.job(), attempt = self.meta.attempt, file = %self.path.display(), error = %e,
                "cannot read the job's log spool; it stays on disk for the next start");
            ShipEnd::Failed
        })
    }

    async fn pause(&mut self, what: &str, e: &TransportError) {
        let delay = self.backoff.next_delay();
        tracing::warn!(job = %self.job(), attempt = self.meta.attempt, error = %e,
            retry_in_ms = delay.as_millis() as u64, "{what} failed; will retry");
        tokio::time::sleep(delay).await;
    }

    fn save_ack(path: &Path, seq: u64, offset: u64) {
        if let Err(e) = spool::write_acked(path, seq, offset) {
            tracing::debug!(file = %path.display(), error = %e, "cannot save shipping progress");
        }
    }

    /// Ships until the attempt is completed, dropped, or shipping cannot go on.
    pub(crate) async fn run(mut self) -> ShipEnd {
        let (mut acked, acked_offset) = spool::read_acked(&self.path);
        let mut saved = Instant::now();
        let mut reader = match self.reader(acked, acked_offset) {
            Ok(r) => r,
            Err(end) => return end,
        };
        // The saved progress may be ahead of the file only if it is corrupt.
        if reader.next_seq() <= acked {
            acked = reader.next_seq() - 1;
        }
        let attempt = self.meta.attempt;
        let mut pending = Pending::new(attempt);
        // Whether the last lines go with the completion.
        let mut carry = true;
        loop {
            while !pending.full() {
                match pending.read(&mut reader) {
                    Ok(true) => {}
                    Ok(false) => break,
                    Err(e) => {
                        tracing::error!(job = %self.job(), attempt, error = %e, "cannot read the job's log spool");
                        return ShipEnd::Failed;
                    }
                }
            }

            // Rewinds to just after `seq` when the server holds less than we thought.
            let mut rewind_to: Option<u64> = None;

            // The attempt ended and its last lines are all read: they go
            // with the completion.
            let carried = carry
                && !pending.is_empty()
                && !pending.full()
                && pending.batch.lines.as_bytes().len() <= MAX_COMPLETION_LOG_BYTES
                && reader.result().is_some();
            if !pending.is_empty() && !carried {
                let first = pending.batch.first_seq;
                let last = pending.last_seq();
                let answer = match self.transport.append_logs(self.job(), &pending.batch).await {
                    Ok(ack) => Ok(ack.acked_seq),
                    Err(TransportError::LogsPending { acked_seq }) => Ok(acked_seq),
                    Err(e) => Err(e),
                };
                match answer {
                    Ok(server) => {
                        self.backoff.reset();
                        if server >= first.saturating_sub(1) && server <= last {
                            if let Some(end) = pending.drop_through(server) {
                                acked = server;
                                if saved.elapsed() >= SAVE_ACKED_EVERY {
                                    Self::save_ack(&self.path, acked, end);
                                    saved = Instant::now();
                                }
                            } else {
                                // Nothing taken: do not hammer the server with the same batch.
                                let e = TransportError::Unavailable(format!(
                                    "control plane stored none of lines {first}..={last}"
                                ));
                                self.pause("sending log lines", &e).await;
                            }
                        } else if server > last {
                            // The server already had more (a resend after a restart).
                            pending.clear();
                            if let Err(e) = reader.skip_to(server) {
                                tracing::error!(job = %self.job(), attempt, error = %e, "cannot read the job's log spool");
                                return ShipEnd::Failed;
                            }
                            acked = reader.next_seq() - 1;
                            Self::save_ack(&self.path, acked, reader.offset());
                        } else {
                            rewind_to = Some(server);
                        }
                    }
                    Err(TransportError::Unauthorized(m)) => {
                        return ShipEnd::Unauthorized(TransportError::Unauthorized(m));
                    }
                    Err(e) if is_gone(&e) => {
                        tracing::warn!(job = %self.job(), attempt, error = %e,
                            "control plane refused the attempt's log lines: the attempt is stale; dropping its spool");
                        spool::remove(&self.path);
                        return ShipEnd::Dropped;
                    }
                    Err(e) => {
                        self.pause("sending log lines", &e).await;
                        continue;
                    }
                }
            } else {
                // Everything written so far is acknowledged or carried;
                // the result record comes after the last line.
                let Some(result) = reader.result().cloned() else {
                    let _ = tokio::time::timeout(IDLE_RECHECK, self.notify.notified()).await;
                    continue;
                };
                let held = if carried { pending.last_seq() } else { acked };
                let mut log_lines = result.log_lines;
                if log_lines > held {
                    tracing::error!(job = %self.job(), attempt, expected = log_lines, found = held,
                        "the spool holds fewer log lines than the attempt wrote; completing with those it holds");
                    log_lines = held;
                }
                let completion = Completion {
                    attempt,
                    log_lines,
                    result: result.result,
                    logs: carried.then(|| CompletionLogs::of(&pending.batch)),
                };
                match self.transport.complete(self.job(), &completion).await {
                    Ok(ack) => {
                        tracing::info!(job = %self.job(), attempt, status = %ack.status, log_lines,
                            "job completion delivered");
                        spool::remove(&self.path);
                        return ShipEnd::Completed;
                    }
                    Err(TransportError::LogsPending { acked_seq }) if carried => {
                        // Not taken with the completion (an older control
                        // plane, or lines it misses before them): as
                        // batches from what it holds, then the completion.
                        tracing::debug!(job = %self.job(), attempt, acked_seq,
                            "control plane did not take the log lines with the completion; sending them as batches");
                        carry = false;
                        rewind_to = Some(acked_seq);
                    }
                    Err(e @ TransportError::LogsPending { acked_seq }) => {
                        if acked_seq >= log_lines {
                            // It holds them all and still says no: wait and ask again.
                            self.pause("sending the job's completion", &e).await;
                            continue;
                        }
                        tracing::warn!(job = %self.job(), attempt, acked_seq, log_lines,
                            "control plane is missing log lines; resending them");
                        rewind_to = Some(acked_seq);
                    }
                    Err(TransportError::Unauthorized(m)) => {
                        return ShipEnd::Unauthorized(TransportError::Unauthorized(m));
                    }
                    Err(e) if is_gone(&e) => {
                        tracing::warn!(job = %self.job(), attempt, error = %e,
                            "control plane refused the completion: the attempt is stale; dropping its spool");
                        spool::remove(&self.path);
                        return ShipEnd::Dropped;
                    }
                    Err(e) => {
                        self.pause("sending the job's completion", &e).await;
                        continue;
                    }
                }
            }

            if let Some(seq) = rewind_to {
                pending.clear();
                reader = match self.reader(seq, 0) {
                    Ok(r) => r,
                    Err(end) => return end,
                };
                acked = reader.next_seq() - 1;
                Self::save_ack(&self.path, acked, reader.offset());
            }
        }
    }
}
