//! The leader's passes over the active workflows: a full one once a
//! second (what time moves, and wake-ups lost between replicas), and in
//! between only the workflows an event touched.

use std::collections::HashSet;
use std::time::Duration;

use nuon_core::{JobId, OrgId, WorkflowId};

use super::Engine;

/// What changed since the leader's last pass: everything (a pass over
/// every active workflow), or these workflows and the workflows of these
/// jobs. A job's end moves its own workflow, not all of them: a fleet-wide
/// rollout's thousands of job ends each cost one workflow's read.
#[derive(Debug, Default)]
pub(super) struct Touched {
    pub(super) all: bool,
    pub(super) workflows: HashSet<(OrgId, WorkflowId)>,
    pub(super) jobs: HashSet<JobId>,
}

impl Touched {
    /// Everything: what a new leader looks at first.
    pub(super) fn everything() -> Self {
        Touched {
            all: true,
            ..Touched::default()
        }
    }
}

/// How often the leader walks every active workflow even when nothing
/// says it changed: what time moves (a retry's backoff, a wait's bound, a
/// rollout's bake) and a wake-up lost between replicas.
const FULL_PASS_EVERY: Duration = Duration::from_secs(1);

impl Engine {
    /// The leader's pass: every active workflow when a full pass is due
    /// (or something asked for one), else only those touched since the
    /// last pass. A follower forgets what was touched: the leader hears of
    /// it too.
    pub(super) async fn pass(&self, last_full: &mut Option<std::time::Instant>) {
        let touched = std::mem::take(&mut *self.touched());
        if !self.is_leader() {
            // Taking the lead starts with a full pass.
            *last_full = None;
            return;
        }
        let mut full = touched.all || last_full.is_none_or(|t| t.elapsed() >= FULL_PASS_EVERY);
        let mut only: HashSet<WorkflowId> = touched.workflows.into_iter().map(|(_, w)| w).collect();
        for job in &touched.jobs {
            if full {
                break;
            }
            match self.store.workflow_of_job(job).await {
                Ok(Some((_, wf))) => {
                    only.insert(wf);
                }
                // Not a step's job (a build a step waits for): everything.
                Ok(None) => full = true,
                Err(e) => {
                    tracing::warn!(job = %job, error = %e, "cannot find the workflow of a job that ended; looking at every workflow");
                    full = true;
                }
            }
        }
        if full {
            *last_full = Some(std::time::Instant::now());
            self.advance_all(None).await;
        } else if !only.is_empty() {
            self.advance_all(Some(&only)).await;
        }
    }

    /// Moves the oldest active workflow of each install (the rest queue
    /// behind it), or of those `only` names; then the rollouts, when a
    /// workflow ended or on a full pass.
    async fn advance_all(&self, only: Option<&HashSet<WorkflowId>>) {
        let active = match self.store.active_workflows().await {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(error = %e, "cannot list active workflows");
                return;
            }
        };
        // Whatever ended before this pass is not in `active`.
        self.ended_here().clear();
        let mut queued: std::collections::HashMap<&nuon_core::InstallId, usize> =
            std::collections::HashMap::new();
        for a in &active {
            *queued.entry(&a.install).or_default() += 1;
        }
        // Installs whose oldest workflow was looked at, and those whose
        // looked-at workflow ended in this pass (the next one may start).
        let mut busy = HashSet::new();
        let mut freed = HashSet::new();
        let mut ended = false;
        for a in &active {
            let next_in_line = freed.remove(&a.install);
            if !busy.insert(&a.install) && !next_in_line {
                continue;
            }
            if !next_in_line && only.is_some_and(|o| !o.contains(&a.id)) {
                continue;
            }
            let wf = match self.store.get_workflow(&a.org, &a.id).await {
                Ok(Some(wf)) => wf,
                Ok(None) => continue,
                Err(e) => {
                    tracing::error!(workflow = %a.id, error = %e, "cannot load workflow");
                    continue;
                }
            };
            if let Err(e) = self.advance(&a.org, wf).await {
                tracing::error!(workflow = %a.id, error = %e, "workflow did not advance");
                continue;
            }
            // Whether it ended (every end is this engine's `set_status`):
            // the next of its install may start, and a touched pass looks
            // at the rollouts.
            if self.ended_here().remove(&a.id) {
                ended = true;
                if queued.get(&a.install).is_some_and(|n| *n > 1) {
                    freed.insert(&a.install);
                }
            }
        }
        if only.is_none() || ended {
            self.drive_rollouts().await;
        }
    }
}
