//! Replicas and upkeep: wake-ups, the lead, rescue and pruning.

use super::*;

/// What the rescuer did with an attempt whose lease expired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rescued {
    /// The job.
    pub job_id: JobId,
    /// Its runner (to wake when the job was queued again).
    pub runner_id: RunnerId,
    /// Its org (whose runners held back by its limit look again).
    pub org_id: OrgId,
    /// Whether the job was queued again (otherwise it ended).
    pub requeued: bool,
}

/// The wake-ups of one notification from another replica, as they are
/// handed on: one message of the channel each, not one a wake-up (a busy
/// replica's notification carries hundreds, and a channel of single
/// wake-ups fell behind and woke everything).
pub type Wakes = std::sync::Arc<[Wake]>;

/// A wake-up for the waiters of one replica, announced by another that
/// shares the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// A job was queued for this runner, or one of its jobs cancelled.
    Runner(RunnerId),
    /// New log lines of this job, or its end.
    Logs(JobId),
    /// A running job of this org ended: its runners that its limit on
    /// running jobs held back look again.
    Org(OrgId),
    /// Something the workflows wait on changed: the leader looks at every
    /// active workflow again.
    Executor,
    /// This workflow changed (a person's act, its start): the leader moves
    /// it. A replica of a release before it ignores it, and finds the
    /// change on its next full pass, within a second.
    Workflow(OrgId, WorkflowId),
    /// This job ended: the leader moves the workflow whose step ran it (a
    /// replica of a release before it finds it on its next full pass).
    JobEnded(JobId),
    /// Announcements may have been missed: every waiter looks again.
    All,
}

/// What the store holds now, for `/metrics`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Gauges {
    /// Jobs queued and running: `(status, kind, count)`.
    pub jobs: Vec<(String, String, u64)>,
    /// Runners whose token is not revoked: never seen, healthy,
    /// unhealthy, offline (by the age of their last call).
    pub runners: [u64; 4],
    /// Bytes the job logs take in the store.
    pub log_bytes: u64,
}

/// Replicas and upkeep: wake-ups, the lead, rescue and pruning.
#[async_trait]
pub trait MaintenanceStore: Send + Sync + 'static {
    /// Tells the other replicas sharing this store (none, for an embedded
    /// store) about a wake-up. Never blocks; may be coalesced.
    fn announce(&self, wake: Wake) {
        let _ = wake;
    }

    /// The other replicas' wake-ups, when the store is shared: those of
    /// each notification together.
    fn wakeups(&self) -> Option<tokio::sync::broadcast::Receiver<Wakes>> {
        None
    }

    /// Takes, or keeps, the maintenance lead: `true` while this replica is
    /// the one that rescues leases, prunes and drives workflows. An embedded
    /// store has one replica, always the leader.
    async fn lead(&self) -> Result<bool> {
        Ok(true)
    }

    /// Deletes the logs of jobs that finished before `finished_before_ms`,
    /// and those jobs when nothing refers to them; the others lose their
    /// spec (their result stays). Returns the rows removed or emptied.
    async fn prune(&self, finished_before_ms: i64) -> Result<u64>;

    /// Ends every running attempt whose lease expired before `now_ms`.
    async fn rescue_expired(&self, now_ms: i64) -> Result<Vec<Rescued>>;

    /// Gives every running lease at least until `until_ms`; used at start-up,
    /// since no runner could heartbeat while the control plane was down.
    async fn extend_running_leases(&self, until_ms: i64) -> Result<u64>;

    /// Counts for `/metrics`: a runner last seen before `unhealthy_before`
    /// is unhealthy, before `offline_before` offline.
    async fn gauges(&self, unhealthy_before: i64, offline_before: i64) -> Result<Gauges>;
}
