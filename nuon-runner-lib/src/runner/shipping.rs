//! The shippers of the runner's attempts: one task per spool, sending its
//! lines and its end until the control plane has them all.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::{Instant, sleep_until};

use super::{Key, Shared, lock};
use crate::shipper::{ShipEnd, Shipper};
use crate::spool::Meta;

impl Shared {
    /// Starts the shipper of an attempt's spool.
    pub(super) fn spawn_shipper(self: &Arc<Self>, path: PathBuf, meta: Meta, notify: Arc<Notify>) {
        let key: Key = (meta.job_id.clone(), meta.attempt);
        let shipper = Shipper {
            transport: self.config.transport.clone(),
            path,
            meta,
            notify,
            backoff: self.backoff(),
        };
        let shared = self.clone();
        let task_key = key.clone();
        // Insert under the lock, so the task cannot remove its entry first.
        let mut shippers = lock(&self.shippers);
        let handle = tokio::spawn(async move {
            match shipper.run().await {
                ShipEnd::Unauthorized(e) => shared.report_fatal(e),
                ShipEnd::Dropped => shared.completion_refused(&task_key),
                ShipEnd::Completed | ShipEnd::Failed => {}
            }
            lock(&shared.shippers).remove(&task_key);
            shared.count();
            shared.shippers_changed.notify_waiters();
        });
        shippers.insert(key, handle);
        drop(shippers);
        self.count();
    }

    /// The control plane refused a finished attempt's completion (its
    /// lease went to a newer attempt, or it no longer knows the job): the
    /// attempt's end never counted, so it is not a job this runner
    /// finished, and a newer attempt of it may run.
    pub(super) fn completion_refused(&self, (job, attempt): &Key) {
        if self
            .accepted
            .finished(job)
            .is_none_or(|f| f.attempt != *attempt)
        {
            return;
        }
        self.journal.record(
            "job.dropped",
            job.as_str(),
            "stale",
            format!(
                "attempt {attempt}: the control plane refused its completion (its lease went to a newer attempt, or it does not know the job); not completed here"
            ),
        );
        self.accepted.dropped(job, *attempt);
    }

    /// Stops an attempt's shipper and waits until it has.
    pub(super) async fn abort_shipper(&self, key: &Key) {
        let handle = lock(&self.shippers).remove(key);
        if let Some(handle) = handle {
            handle.abort();
            let _ = handle.await;
        }
        self.shippers_changed.notify_waiters();
    }

    /// Waits until every shipper has finished, or `deadline`.
    pub(super) async fn wait_shippers(&self, deadline: Instant) -> bool {
        loop {
            let notified = self.shippers_changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if lock(&self.shippers).is_empty() {
                return true;
            }
            tokio::select! {
                () = notified => {}
                () = sleep_until(deadline) => return lock(&self.shippers).is_empty(),
            }
        }
    }

    pub(super) async fn abort_all_shippers(&self) {
        let handles: Vec<JoinHandle<()>> = lock(&self.shippers).drain().map(|(_, h)| h).collect();
        for h in &handles {
            h.abort();
        }
        for h in handles {
            let _ = h.await;
        }
    }
}
