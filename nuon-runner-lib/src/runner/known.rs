//! Ends reported without a spool: those a restored store did not know,
//! and refusals of claims of an attempt this runner took or ran.
//!
//! A control plane restored from a backup taken while a job ran believes
//! its attempt still runs. The runner ran it to its end after the backup
//! (its journal says so), so it heartbeats it no more, and the store would
//! wait for the lease to lapse and call the runner lost. Instead, at each
//! runner's first claim, a control plane that starts lists the attempts
//! its store says the runner holds (`ClaimResponse::known_leases`), and
//! the runner completes each one it ran to its end as failed, with why:
//! its outputs and last lines went with the newer store, and a job runs
//! once, so its step must be run again to do its work anew.
//!
//! A claim of an attempt this runner already took or ran (an answer
//! served again) is refused the same way: that attempt's spool and end
//! belong to the run, so the refusal is reported by itself.

use std::sync::Arc;

use nuon_core::wire::{Completion, LeaseRef};
use nuon_core::{JobId, JobResult};

use super::{Key, Shared, lock};

/// How many times a report is sent before the lease is left to lapse.
const TRIES: u32 = 5;

impl Shared {
    /// Reports the end of each of `known` this runner ran to its end: not
    /// running here, its completion not being shipped.
    pub(super) fn report_known_ends(self: &Arc<Self>, known: &[LeaseRef]) {
        for lease in known {
            let key: Key = (lease.job_id.clone(), lease.attempt);
            if lock(&self.jobs).contains_key(&key) || lock(&self.shippers).contains_key(&key) {
                continue;
            }
            let Some(done) = self.accepted.finished(&lease.job_id) else {
                continue;
            };
            if done.attempt != lease.attempt {
                continue;
            }
            let reason = format!(
                "this runner ran attempt {} of this job to its end ({}, {} s ago; its journal, {}, \
                 records it), but the control plane's store did not know: it was restored from a \
                 backup taken before then. The attempt's outputs and last log lines went with the \
                 newer store, and a job runs once: to do its work anew, run its step again",
                done.attempt,
                done.outcome(),
                (nuon_core::now_ms() - done.at_ms).max(0) / 1000,
                self.journal.path().display()
            );
            tracing::warn!(job = %lease.job_id, attempt = lease.attempt, "{reason}");
            self.journal.record(
                "job.reported",
                lease.job_id.as_str(),
                "failed",
                format!("attempt {}; {reason}", lease.attempt),
            );
            self.report_end(
                lease.job_id.clone(),
                lease.attempt,
                JobResult::failed(reason),
            );
        }
    }

    /// Completes `attempt` of `job` with `result` and no log lines, without
    /// its spool: an end this runner reports for an attempt it does not
    /// run (the lines the store holds are all there will be), once no
    /// shipper of that attempt is left. Tried [`TRIES`] times, then the
    /// lease is left to lapse.
    pub(super) fn report_end(self: &Arc<Self>, job: JobId, attempt: u32, result: JobResult) {
        let shared = self.clone();
        let completion = Completion {
            attempt,
            log_lines: 0,
            result,
            logs: None,
        };
        let key: Key = (job.clone(), attempt);
        tokio::spawn(async move {
            // While the attempt's own end is still being shipped, that end
            // is the one that counts: report after it, and the control
            // plane answers with the end it holds.
            loop {
                let changed = shared.shippers_changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                if !lock(&shared.shippers).contains_key(&key) {
                    break;
                }
                let _ = tokio::time::timeout(std::time::Duration::from_secs(10), changed).await;
            }
            let mut backoff = shared.backoff();
            for _ in 0..TRIES {
                match shared.config.transport.complete(&job, &completion).await {
                    Ok(_) => return,
                    Err(e) if e.is_retryable() => {
                        tokio::time::sleep(backoff.next_delay()).await;
                    }
                    Err(e) => {
                        tracing::warn!(job = %job, attempt, error = %e, "the control plane refused the report of an attempt's end");
                        return;
                    }
                }
            }
        });
    }
}
