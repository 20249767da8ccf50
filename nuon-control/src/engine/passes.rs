//! The leader's passes over the active workflows: a full one once a
//! second (what time moves, and wake-ups lost between replicas), and in
//! between only the workflows an event touched.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use nuon_core::{InstallId, JobId, OrgId, WorkflowId};

use super::Engine;
use crate::store::ActiveWorkflow;

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

/// How many installs' workflows a pass moves at once: a few of the store's
/// connections (the runners' calls keep the rest).
const INSTALLS_AT_ONCE: usize = 8;

impl Engine {
    /// The leader's pass: every active workflow when a full pass is due
    /// (or something asked for one), else only those touched since the
    /// last pass. A follower forgets what was touched: the leader hears of
    /// it too.
    pub(super) async fn pass(&self, last_full: &mut Option<std::time::Instant>) {
        // What ended outside a pass (an act on any replica).
        self.make_summaries().await;
        let touched = std::mem::take(&mut *self.touched());
        if !self.is_leader() {
            // Taking the lead starts with a full pass.
            *last_full = None;
            return;
        }
        let mut full = touched.all || last_full.is_none_or(|t| t.elapsed() >= FULL_PASS_EVERY);
        let mut only: HashSet<WorkflowId> = touched.workflows.into_iter().map(|(_, w)| w).collect();
        if !full && !touched.jobs.is_empty() {
            let jobs: Vec<JobId> = touched.jobs.into_iter().collect();
            match self.store.workflows_of_jobs(&jobs).await {
                // A job of no step (a build a step waits for): everything.
                Ok(found) if found.len() < jobs.len() => full = true,
                Ok(found) => only.extend(found.into_iter().map(|(_, _, wf)| wf)),
                Err(e) => {
                    tracing::warn!(jobs = jobs.len(), error = %e, "cannot find the workflows of jobs that ended; looking at every workflow");
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
    /// workflow ended or on a full pass. Installs move side by side, at
    /// most [`INSTALLS_AT_ONCE`]: each advance is a few round trips to the
    /// store, and one after another the leader's threads parked and woke at
    /// each of them.
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
        // Each install's active workflows, oldest first (as listed).
        let mut lines: Vec<Vec<&ActiveWorkflow>> = Vec::new();
        let mut line_of: HashMap<&InstallId, usize> = HashMap::new();
        for a in &active {
            let i = *line_of.entry(&a.install).or_insert_with(|| {
                lines.push(Vec::new());
                lines.len() - 1
            });
            lines[i].push(a);
        }
        let mut lines = lines.into_iter();
        let mut going = FuturesUnordered::new();
        let mut ended = false;
        loop {
            while going.len() < INSTALLS_AT_ONCE
                && let Some(line) = lines.next()
            {
                going.push(self.advance_install(line, only));
            }
            match going.next().await {
                Some(e) => ended |= e,
                None => break,
            }
        }
        self.make_summaries().await;
        if only.is_none() || ended {
            self.drive_rollouts().await;
        }
    }

    /// Moves one install's oldest active workflow (when `only` names it,
    /// or always when `only` is none) and, each time the one moved ends,
    /// the next in its line. Whether any ended.
    async fn advance_install(
        &self,
        line: Vec<&ActiveWorkflow>,
        only: Option<&HashSet<WorkflowId>>,
    ) -> bool {
        let mut ended = false;
        for (i, a) in line.into_iter().enumerate() {
            if i == 0 && only.is_some_and(|o| !o.contains(&a.id)) {
                return false;
            }
            let moving = match self.store.workflow_to_move(&a.org, &a.id).await {
                Ok(Some(m)) => m,
                Ok(None) => break,
                Err(e) => {
                    tracing::error!(workflow = %a.id, error = %e, "cannot load workflow");
                    break;
                }
            };
            if let Err(e) = self.advance(&a.org, moving).await {
                tracing::error!(workflow = %a.id, error = %e, "workflow did not advance");
                break;
            }
            // Whether it ended (every end is this engine's `set_status`):
            // the next of its install may start, and a touched pass looks
            // at the rollouts.
            if !self.ended_here().remove(&a.id) {
                break;
            }
            ended = true;
        }
        ended
    }
}
