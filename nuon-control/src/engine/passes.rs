//! The leader's passes over the active workflows: a full one once a
//! second (what time moves, and wake-ups lost between replicas), and in
//! between only the workflows an event touched.

use std::collections::{HashMap, HashSet, VecDeque};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use nuon_core::workflow::WorkflowStatus;
use nuon_core::{InstallId, JobId, OrgId, WorkflowId};

use super::Engine;
use crate::store::{ActiveWorkflow, Moving};

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

    /// Whether the next pass looks at `a` for what was said of it (or of
    /// every workflow); a job's end, not yet traced to its workflow, is
    /// not counted.
    fn has(&self, a: &ActiveWorkflow) -> bool {
        self.all || self.workflows.contains(&(a.org.clone(), a.id.clone()))
    }
}

/// Each line with its oldest workflow as `found` in a read together
/// (`Some(None)`: gone), or, when that read failed (`found` none), left
/// to be read alone.
fn paired<M>(
    lines: Vec<Vec<&ActiveWorkflow>>,
    mut found: Option<HashMap<WorkflowId, M>>,
) -> VecDeque<(Vec<&ActiveWorkflow>, Option<Option<M>>)> {
    (lines.into_iter())
        .map(|l| {
            let first = found.as_mut().map(|f| f.remove(&l[0].id));
            (l, first)
        })
        .collect()
}

/// How often the leader walks every active workflow even when nothing
/// says it changed: what time moves (a retry's backoff, a wait's bound, a
/// rollout's bake) and a wake-up lost between replicas.
const FULL_PASS_EVERY: Duration = Duration::from_secs(1);

/// How many installs' workflows a pass moves at once: a few of the store's
/// connections (the runners' calls keep the rest).
const INSTALLS_AT_ONCE: usize = 8;

/// How many installs' oldest workflows a pass reads to move in one
/// statement: a rollout's pass moves tens of them, each once read alone.
/// Few enough that the last of them is moved soon after it is read; what
/// changed meanwhile is seen all the same: a job's end touches its
/// workflow for the next pass, and one touched (an act) is read again
/// alone before its advance ([`Engine::fresh`]).
const READ_AT_ONCE: usize = 64;

/// An install's active workflows, oldest first, with its oldest as read
/// together with others' (`Some(None)`: gone), or `None` to read it alone.
type Line<'a> = (Vec<&'a ActiveWorkflow>, Option<Option<Moving>>);

/// How often a timed pass looks at the workflows left waiting on a job
/// that still runs too (see [`Waiting`]).
const WALK_ALL_EVERY: Duration = Duration::from_secs(10);

/// The workflows the leader's last advance of each left waiting on a job
/// still queued or running. Such a workflow has nothing to do until the
/// job ends (its advance reads it, finds the job live and returns), and
/// in a busy fleet they are most of the active workflows: a timed pass
/// asks the store which of their jobs are still live, in one read, and
/// passes those over instead of reading each workflow. What else could
/// move one is seen all the same: a cancel changes its status (read with
/// the active workflows), every act of an operator asks for a pass over
/// everything, and a touched workflow is never passed over. Every
/// [`WALK_ALL_EVERY`], a timed pass looks at every workflow.
#[derive(Debug, Default)]
pub(super) struct Waiting {
    on: HashMap<WorkflowId, JobId>,
    walked: Option<std::time::Instant>,
}

impl Waiting {
    /// Of the active workflows, those that may be passed over, with the
    /// job each waits on: running, not `touched`, left waiting.
    fn to_check(
        &self,
        active: &[ActiveWorkflow],
        touched: &HashSet<WorkflowId>,
    ) -> Vec<(WorkflowId, JobId)> {
        (active.iter())
            .filter(|a| a.status == WorkflowStatus::Running && !touched.contains(&a.id))
            .filter_map(|a| self.on.get(&a.id).map(|j| (a.id.clone(), j.clone())))
            .collect()
    }

    /// Those of `on` whose job is `live`.
    fn still(on: Vec<(WorkflowId, JobId)>, live: Vec<JobId>) -> HashSet<WorkflowId> {
        let live: HashSet<JobId> = live.into_iter().collect();
        (on.into_iter())
            .filter(|(_, j)| live.contains(j))
            .map(|(w, _)| w)
            .collect()
    }
}

/// Which active workflows a pass moves.
#[derive(Debug, Clone, Copy)]
enum Walk<'a> {
    /// Every one.
    All,
    /// Every one but those left waiting on a job still live and not
    /// touched since (these).
    Timed(&'a HashSet<WorkflowId>),
    /// These, and the next of their installs when they end.
    Only(&'a HashSet<WorkflowId>),
}

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
            let now = std::time::Instant::now();
            *last_full = Some(now);
            let walk = {
                let mut waiting = self.waiting();
                if touched.all || waiting.walked.is_none_or(|t| now - t >= WALK_ALL_EVERY) {
                    waiting.walked = Some(now);
                    Walk::All
                } else {
                    Walk::Timed(&only)
                }
            };
            self.advance_all(walk).await;
        } else if !only.is_empty() {
            self.advance_all(Walk::Only(&only)).await;
        }
    }

    fn waiting(&self) -> std::sync::MutexGuard<'_, Waiting> {
        self.waiting.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The workflow's advance left it waiting on `job`, still queued or
    /// running.
    pub(super) fn left_waiting(&self, workflow: &WorkflowId, job: &JobId) {
        self.waiting().on.insert(workflow.clone(), job.clone());
    }

    /// The workflow moves: what its last advance left is forgotten.
    pub(super) fn not_waiting(&self, workflow: &WorkflowId) {
        self.waiting().on.remove(workflow);
    }

    /// Of the active workflows, those a timed pass passes over: running,
    /// not `touched`, and left waiting on a job the store says is still
    /// queued or running (one read). None when the read fails: then every
    /// one is looked at.
    async fn still_waiting(
        &self,
        active: &[ActiveWorkflow],
        touched: &HashSet<WorkflowId>,
    ) -> HashSet<WorkflowId> {
        let on = self.waiting().to_check(active, touched);
        if on.is_empty() {
            return HashSet::new();
        }
        let jobs: Vec<JobId> = on.iter().map(|(_, j)| j.clone()).collect();
        match self.store.live_jobs(&jobs).await {
            Ok(live) => Waiting::still(on, live),
            Err(e) => {
                tracing::warn!(jobs = jobs.len(), error = %e, "cannot check the jobs workflows wait on; looking at every workflow");
                HashSet::new()
            }
        }
    }

    /// Moves the oldest active workflow of each install (the rest queue
    /// behind it) that the walk takes; then the rollouts, when a workflow
    /// ended or on a full pass. Installs move side by side, at
    /// most [`INSTALLS_AT_ONCE`]: each advance is a few round trips to the
    /// store, and one after another the leader's threads parked and woke at
    /// each of them.
    async fn advance_all(&self, walk: Walk<'_>) {
        let active = match self.store.active_workflows().await {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(error = %e, "cannot list active workflows");
                return;
            }
        };
        // Whatever ended before this pass is not in `active`.
        self.ended_here().clear();
        let passed_over = match walk {
            Walk::Only(_) => HashSet::new(),
            Walk::All | Walk::Timed(_) => {
                // What a workflow that is over left is forgotten.
                let ids: HashSet<&WorkflowId> = active.iter().map(|a| &a.id).collect();
                self.waiting().on.retain(|w, _| ids.contains(w));
                match walk {
                    Walk::Timed(touched) => self.still_waiting(&active, touched).await,
                    _ => HashSet::new(),
                }
            }
        };
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
        // The lines whose oldest workflow the walk moves, their oldest read
        // [`READ_AT_ONCE`] at a time.
        let mut lines = lines.into_iter().filter(|line| {
            let a = line[0];
            let left_out = matches!(walk, Walk::Only(o) if !o.contains(&a.id));
            !left_out && !passed_over.contains(&a.id)
        });
        let mut read = VecDeque::new();
        let mut going = FuturesUnordered::new();
        let mut ended = false;
        loop {
            while going.len() < INSTALLS_AT_ONCE {
                if read.is_empty() {
                    let next: Vec<_> = lines.by_ref().take(READ_AT_ONCE).collect();
                    if next.is_empty() {
                        break;
                    }
                    read = self.read_to_move(next).await;
                    continue;
                }
                let Some(next) = read.pop_front() else {
                    break;
                };
                let (line, first) = self.fresh(next);
                going.push(self.advance_install(line, first));
            }
            match going.next().await {
                Some(e) => ended |= e,
                None => break,
            }
        }
        self.make_summaries().await;
        if !matches!(walk, Walk::Only(_)) || ended {
            self.drive_rollouts().await;
        }
    }

    /// Each of these lines with its oldest workflow read to move, in one
    /// read: `Some(None)` for one that is gone. When that read fails (one
    /// row this build cannot decode fails it), each is left to be read
    /// alone (`None`), so one bad workflow stops only its own install.
    async fn read_to_move<'a>(&self, lines: Vec<Vec<&'a ActiveWorkflow>>) -> VecDeque<Line<'a>> {
        let keys: Vec<(OrgId, WorkflowId)> = (lines.iter())
            .map(|l| (l[0].org.clone(), l[0].id.clone()))
            .collect();
        let found: Option<HashMap<WorkflowId, Moving>> = match self
            .store
            .workflows_to_move(&keys)
            .await
        {
            Ok(found) => Some(
                found
                    .into_iter()
                    .map(|m| (m.workflow.id.clone(), m))
                    .collect(),
            ),
            Err(e) => {
                tracing::warn!(workflows = keys.len(), error = %e, "cannot load the workflows to move together; reading each alone");
                None
            }
        };
        paired(lines, found)
    }

    /// What was read together of `line`'s oldest workflow, unless it was
    /// touched since (an act on any replica, a wake-up to look at every
    /// workflow): then it is read again alone, as close to its advance as
    /// a read of its own ever was.
    fn fresh<'a>(&self, (line, first): Line<'a>) -> Line<'a> {
        match self.touched().has(line[0]) {
            true => (line, None),
            false => (line, first),
        }
    }

    /// Moves one install's oldest active workflow (`first`, as read, `Some(None)`
    /// when it is gone; `None` to read it here) and, each time the one
    /// moved ends, the next in its line. Whether any ended.
    async fn advance_install(
        &self,
        line: Vec<&ActiveWorkflow>,
        mut first: Option<Option<Moving>>,
    ) -> bool {
        let mut ended = false;
        for a in line {
            let moving = match first.take() {
                Some(read) => read,
                None => match crate::store::workflow_to_move(&*self.store, &a.org, &a.id).await {
                    Ok(m) => m,
                    Err(e) => {
                        tracing::error!(workflow = %a.id, error = %e, "cannot load workflow");
                        break;
                    }
                },
            };
            let Some(moving) = moving else {
                break;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn active(status: WorkflowStatus) -> ActiveWorkflow {
        ActiveWorkflow {
            org: OrgId::generate(),
            id: WorkflowId::generate(),
            install: InstallId::generate(),
            status,
        }
    }

    /// A timed pass passes over only a running workflow left waiting on a
    /// job the store says is live, and not touched since: one cancelled
    /// meanwhile, touched, never left waiting or whose job ended is moved.
    #[test]
    fn a_timed_pass_passes_over_only_what_waits_on_a_live_job() {
        let [waits, cancelling, touched, ended, fresh] = [
            WorkflowStatus::Running,
            WorkflowStatus::Cancelling,
            WorkflowStatus::Running,
            WorkflowStatus::Running,
            WorkflowStatus::Running,
        ]
        .map(active);
        let job = |_: &ActiveWorkflow| JobId::generate();
        let mut w = Waiting::default();
        let jobs: Vec<JobId> = [&waits, &cancelling, &touched, &ended].map(job).into();
        for (a, j) in [&waits, &cancelling, &touched, &ended].iter().zip(&jobs) {
            w.on.insert(a.id.clone(), j.clone());
        }
        let all = [waits.clone(), cancelling, touched.clone(), ended, fresh];
        let on = w.to_check(&all, &HashSet::from([touched.id.clone()]));
        let ids: Vec<&WorkflowId> = on.iter().map(|(w, _)| w).collect();
        assert_eq!(
            ids,
            [&waits.id, &all[3].id],
            "running, left waiting, not touched"
        );
        // The store says the first's job is live, the other's ended (a
        // job it never names, whatever its status).
        let live = vec![jobs[0].clone(), jobs[1].clone(), JobId::generate()];
        assert_eq!(Waiting::still(on, live), HashSet::from([waits.id.clone()]));
        assert!(Waiting::still(Vec::new(), jobs).is_empty());
    }

    /// What was read together goes to its line; a line whose workflow is
    /// gone says so; when the read together failed, each line reads its
    /// own, so one row that fails the read stops only its install.
    #[test]
    fn a_failed_read_together_leaves_each_line_to_read_its_own() {
        let [a, b] = [WorkflowStatus::Running; 2].map(active);
        let lines = || vec![vec![&a], vec![&b]];
        let found = HashMap::from([(a.id.clone(), "a as read")]);
        let got: Vec<_> = paired(lines(), Some(found)).into_iter().collect();
        assert_eq!(got[0].1, Some(Some("a as read")));
        assert_eq!(got[1].1, Some(None), "b is gone");
        let got: Vec<_> = paired::<&str>(lines(), None).into_iter().collect();
        assert!(got.iter().all(|(_, first)| first.is_none()));
        assert_eq!(got.len(), 2);
    }

    /// A workflow read together is read again alone when something was
    /// said of it (or of every workflow) since; a job's end is not.
    #[test]
    fn what_was_touched_since_the_read_is_read_again() {
        let [a, b] = [WorkflowStatus::Running; 2].map(active);
        let mut t = Touched::default();
        t.jobs.insert(JobId::generate());
        assert!(!t.has(&a));
        t.workflows.insert((a.org.clone(), a.id.clone()));
        assert!(t.has(&a) && !t.has(&b));
        // The same id in another org is another workflow.
        let other = ActiveWorkflow {
            org: OrgId::generate(),
            ..a.clone()
        };
        assert!(!t.has(&other));
        assert!(Touched::everything().has(&b));
    }
}
