//! Rollouts: a release deployed to the installs a label selector picks, in
//! waves, and the rules that move one along.
//!
//! Waves: `1,10%,50%,100%` says how many installs have the release after
//! each wave, as a count or a share of all the installs the rollout
//! selects (rounded up, so 10% of 8 is 1, never 0). Each wave deploys the
//! installs that bring the total to its size; a wave that adds nobody is
//! left out. The last wave must reach every install.
//!
//! [`RolloutInfo::advance`] is the whole of a rollout's logic, pure: given
//! what became of each install's workflow and health, it moves installs
//! through [`TargetState`], passes, holds or stops waves, and says which
//! installs to start. The control plane's leader calls it, starts those
//! workflows, and stores the rollout after each change under its version,
//! so two leaders in turn never start an install twice.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::id::{AppId, InstallId, ReleaseId, RolloutId, WorkflowId};

mod back;
mod waves;

pub use waves::{WaveSize, Waves};

/// What a rollout rolls out.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RolloutKind {
    /// An app's release: each install runs its normal deploy workflow.
    #[default]
    Release,
    /// A runner version (`nuon runners release rollout`): each install's
    /// runner is asked, through its signed settings, to update itself, and
    /// passes when it calls back on that version.
    Runner,
}

/// Where a rollout is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RolloutStatus {
    /// A dry run: what a rollout would do; never stored.
    Planned,
    /// Deploying its current wave.
    Running,
    /// A wave passed; the next starts when someone resumes it
    /// (`--approve-each-wave`).
    AwaitingApproval,
    /// An install failed: the rest of its wave finishes, nothing new
    /// starts until it is retried, resumed or rolled back.
    Stopped,
    /// Paused by someone: what deploys finishes, nothing new starts until
    /// `resume`.
    Paused,
    /// Every install has the release.
    Succeeded,
    /// Cancelled while installs deploy: nothing new starts, and it ends
    /// `cancelled` once they have.
    Cancelling,
    /// Cancelled: nothing new starts.
    Cancelled,
    /// Rolled back: a rollback rollout returns its installs to their
    /// release before.
    RolledBack,
}

impl RolloutStatus {
    /// Whether the rollout still holds its installs (another rollout may
    /// not take them) and the leader still looks at it.
    pub fn is_active(self) -> bool {
        matches!(
            self,
            RolloutStatus::Running
                | RolloutStatus::AwaitingApproval
                | RolloutStatus::Stopped
                | RolloutStatus::Paused
                | RolloutStatus::Cancelling
        )
    }

    /// As stored and shown: `running`, `awaiting_approval`.
    pub fn as_str(self) -> &'static str {
        match self {
            RolloutStatus::Planned => "planned",
            RolloutStatus::Running => "running",
            RolloutStatus::AwaitingApproval => "awaiting_approval",
            RolloutStatus::Stopped => "stopped",
            RolloutStatus::Paused => "paused",
            RolloutStatus::Cancelling => "cancelling",
            RolloutStatus::Succeeded => "succeeded",
            RolloutStatus::Cancelled => "cancelled",
            RolloutStatus::RolledBack => "rolled_back",
        }
    }
}

impl fmt::Display for RolloutStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where one install of a rollout is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TargetState {
    /// Its wave has not reached it.
    Pending,
    /// Its deploy workflow runs (or queues behind another of the install).
    Running,
    /// Deployed; it must stay healthy for the bake time.
    Baking,
    /// It has the release.
    Succeeded,
    /// Its workflow failed, or it turned unhealthy while baking.
    Failed,
    /// It failed and the rollout was resumed past it.
    Skipped,
}

impl TargetState {
    /// As shown: `pending`, `running`.
    pub fn as_str(self) -> &'static str {
        match self {
            TargetState::Pending => "pending",
            TargetState::Running => "running",
            TargetState::Baking => "baking",
            TargetState::Succeeded => "succeeded",
            TargetState::Failed => "failed",
            TargetState::Skipped => "skipped",
        }
    }
}

impl fmt::Display for TargetState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One install of a rollout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RolloutTarget {
    /// The install.
    pub install_id: InstallId,
    /// Its name.
    pub install: String,
    /// Its wave, from 0.
    pub wave: u32,
    /// The release it gets.
    pub release_id: ReleaseId,
    /// The release it had before, if it had one (what a rollback returns
    /// it to).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_release: Option<ReleaseId>,
    /// The app config version it ran before (what a rollback returns it
    /// to when it had no release before: its first release).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_config: Option<u32>,
    /// Set in a rollback: the install gets this config version (with its
    /// newest builds) instead of a release, and `release_id` is the
    /// release it leaves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<u32>,
    /// Where it is.
    pub state: TargetState,
    /// Its deploy workflow (the newest, after a retry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_id: Option<WorkflowId>,
    /// How many deploy workflows it was given.
    #[serde(default)]
    pub tries: u32,
    /// Why it failed or was passed over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When its newest workflow started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at_ms: Option<i64>,
    /// When its newest workflow ended (a bake counts from there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended_at_ms: Option<i64>,
}

impl RolloutTarget {
    /// An install (id, name) that wave `wave` will give `release`, with
    /// the release it has now.
    pub fn pending(
        (install_id, install): (InstallId, String),
        wave: u32,
        release_id: ReleaseId,
        from_release: Option<ReleaseId>,
    ) -> Self {
        RolloutTarget {
            install_id,
            install,
            wave,
            release_id,
            from_release,
            from_config: None,
            config_version: None,
            state: TargetState::Pending,
            workflow_id: None,
            tries: 0,
            reason: None,
            started_at_ms: None,
            ended_at_ms: None,
        }
    }
}

impl RolloutTarget {
    /// What it gets, in words: its release, or (a rollback of its first
    /// release) the config version it ran before.
    pub fn gets(&self) -> String {
        match self.config_version {
            Some(v) => format!("config v{v}"),
            None => self.release_id.to_string(),
        }
    }
}

/// A rollout: a release deployed in waves to the installs a selector
/// picks, each by its normal deploy workflow.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RolloutInfo {
    /// Its id.
    pub id: RolloutId,
    /// What it rolls out.
    #[serde(default)]
    pub kind: RolloutKind,
    /// The release it deploys (a rollback: the release it undoes): an
    /// app's release, or a runner release (`kind: runner`).
    pub release_id: ReleaseId,
    /// The runner version of a runner rollout (a rollback: the version it
    /// undoes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner_version: Option<String>,
    /// The app (a release's; none for a runner rollout, which may reach
    /// installs of every app).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_id: Option<AppId>,
    /// The app's name, where known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_name: Option<String>,
    /// The label selector that picked its installs, as it prints.
    pub selector: String,
    /// The waves, as given (`1,10%,100%`).
    pub waves: String,
    /// At most this many installs deploy at once.
    pub max_parallel: u32,
    /// Each wave after the first starts only when someone resumes it.
    pub approve_each_wave: bool,
    /// How long each install must stay healthy after its deploy.
    pub bake_ms: u64,
    /// The rollout this one rolls back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rollback_of: Option<RolloutId>,
    /// Where it is.
    pub status: RolloutStatus,
    /// The wave it deploys, from 0.
    pub wave: u32,
    /// How many waves it has.
    pub wave_count: u32,
    /// Why it waits or stopped, and what to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Its installs, wave by wave.
    pub targets: Vec<RolloutTarget>,
    /// Who started it (the API token's id).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_by: Option<String>,
    /// When it was made.
    pub created_at_ms: i64,
    /// When it last changed.
    pub updated_at_ms: i64,
    /// Its version in the store: every change adds one.
    pub version: u64,
}

/// What became of an install's deploy that runs, or bakes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// Its workflow is still pending or running; or it bakes, healthy.
    Going,
    /// Its workflow succeeded at this time.
    Succeeded(i64),
    /// Its workflow failed or was cancelled (why); or it turned unhealthy
    /// while baking.
    Failed(String),
}

/// What [`RolloutInfo::advance`] asks of the caller.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Advance {
    /// The rollout changed: store it.
    pub changed: bool,
    /// Installs (by index in `targets`) to start a deploy workflow for,
    /// in order, while the rollout lets them.
    pub start: Vec<usize>,
    /// Installs (by index) that now have their release.
    pub released: Vec<usize>,
    /// Installs (by index) whose state changed: what a save writes.
    pub touched: Vec<usize>,
}

/// The body of `POST /v1/releases/{id}/rollouts`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct CreateRollout {
    /// The label selector of the installs (of the release's app) it
    /// deploys to: `tier=prod,region in (eu, us)`; empty: all of them.
    #[serde(default)]
    pub to: String,
    /// The waves (default `100%`: one wave).
    #[serde(default = "all_at_once")]
    pub waves: String,
    /// At most this many installs deploy at once (default 10).
    #[serde(default = "ten")]
    pub max_parallel: u32,
    /// Each wave after the first waits for someone to resume it.
    #[serde(default)]
    pub approve_each_wave: bool,
    /// How long each install must stay healthy after its deploy before
    /// its wave passes (`10m`, `30s`; default none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bake: Option<String>,
    /// Only say who gets what, in which wave: nothing is stored or started.
    #[serde(default)]
    pub dry_run: bool,
}

fn all_at_once() -> String {
    "100%".into()
}

fn ten() -> u32 {
    10
}

impl Default for CreateRollout {
    fn default() -> Self {
        CreateRollout {
            to: String::new(),
            waves: all_at_once(),
            max_parallel: ten(),
            approve_each_wave: false,
            bake: None,
            dry_run: false,
        }
    }
}

/// Rollouts, newest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct RolloutList {
    /// Newest first.
    pub rollouts: Vec<RolloutInfo>,
}

/// One install a new rollout selects: its id, name, and the release it
/// has now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selected {
    /// The install.
    pub id: InstallId,
    /// Its name (installs deploy in name order).
    pub name: String,
    /// The release it has now.
    pub release: Option<ReleaseId>,
    /// The app config version it runs now.
    pub config_version: Option<u32>,
    /// The version its customer pinned its runner to (`nuon-runner run
    /// --pin-version`): a runner rollout passes it over.
    pub pinned: Option<String>,
}

/// A rollout to plan: everything but its installs.
#[derive(Debug, Clone)]
pub struct NewRollout {
    /// Its id.
    pub id: RolloutId,
    /// What it rolls out.
    pub kind: RolloutKind,
    /// The release.
    pub release_id: ReleaseId,
    /// The runner version (a runner rollout).
    pub runner_version: Option<String>,
    /// The release's app (an app's release).
    pub app_id: Option<AppId>,
    /// The selector, as it prints.
    pub selector: String,
    /// The waves.
    pub waves: Waves,
    /// At most this many at once (at least 1).
    pub max_parallel: u32,
    /// Each wave after the first waits for a resume.
    pub approve_each_wave: bool,
    /// The bake time.
    pub bake_ms: u64,
    /// Who starts it.
    pub created_by: Option<String>,
}

impl NewRollout {
    /// The rollout of `installs`, split into waves in name order.
    pub fn plan(self, mut installs: Vec<Selected>, now: i64) -> RolloutInfo {
        installs.sort_by(|a, b| a.name.cmp(&b.name).then_with(|| a.id.cmp(&b.id)));
        let waves = self.waves.plan(&installs);
        let mut targets = Vec::new();
        for (w, wave) in waves.iter().enumerate() {
            for i in wave {
                let mut t = RolloutTarget::pending(
                    (i.id.clone(), i.name.clone()),
                    w as u32,
                    self.release_id.clone(),
                    i.release.clone(),
                );
                t.from_config = i.config_version;
                if let (RolloutKind::Runner, Some(pin)) = (self.kind, &i.pinned) {
                    t.state = TargetState::Skipped;
                    t.reason = Some(format!(
                        "its runner is pinned to version {pin} by the customer (nuon-runner run --pin-version): left as it is"
                    ));
                }
                targets.push(t);
            }
        }
        RolloutInfo {
            id: self.id,
            kind: self.kind,
            release_id: self.release_id,
            runner_version: self.runner_version,
            app_id: self.app_id,
            app_name: None,
            selector: self.selector,
            waves: self.waves.to_string(),
            max_parallel: self.max_parallel.max(1),
            approve_each_wave: self.approve_each_wave,
            bake_ms: self.bake_ms,
            rollback_of: None,
            status: RolloutStatus::Running,
            wave: 0,
            wave_count: waves.len() as u32,
            reason: None,
            targets,
            created_by: self.created_by,
            created_at_ms: now,
            updated_at_ms: now,
            version: 0,
        }
    }
}

/// What [`RolloutInfo::advance`] learns of the installs in its one walk.
#[derive(Default)]
struct Walk {
    /// Installs that run now.
    running: usize,
    /// Installs that run or bake.
    live: usize,
    /// The first failed install.
    failed: Option<usize>,
    /// The first pending install.
    first_pending: Option<usize>,
    /// The lowest wave with an install neither succeeded nor skipped.
    first_undone_wave: Option<u32>,
}

impl Walk {
    /// Counts install `i` as it is after the walk moved it.
    fn count(&mut self, i: usize, t: &RolloutTarget) {
        match t.state {
            TargetState::Running => {
                self.running += 1;
                self.live += 1;
            }
            TargetState::Baking => self.live += 1,
            TargetState::Failed => {
                self.failed.get_or_insert(i);
            }
            TargetState::Pending => {
                self.first_pending.get_or_insert(i);
            }
            _ => {}
        }
        if !matches!(t.state, TargetState::Succeeded | TargetState::Skipped) {
            self.first_undone_wave = Some(self.first_undone_wave.map_or(t.wave, |w| w.min(t.wave)));
        }
    }
}

impl RolloutTarget {
    /// Moves this install (`i`, running or baking) as `seen` says at
    /// `now`, noting in `out` what changed.
    fn moved(&mut self, i: usize, now: i64, bake_ms: u64, seen: Seen, out: &mut Advance) {
        match (self.state, seen) {
            (TargetState::Running, Seen::Succeeded(at)) => {
                self.ended_at_ms = Some(at);
                if bake_ms == 0 {
                    self.state = TargetState::Succeeded;
                    out.released.push(i);
                } else {
                    self.state = TargetState::Baking;
                }
            }
            (TargetState::Running, Seen::Failed(why)) => {
                self.state = TargetState::Failed;
                self.ended_at_ms = Some(now);
                self.reason = Some(why);
            }
            (TargetState::Baking, Seen::Failed(why)) => {
                self.state = TargetState::Failed;
                self.reason = Some(format!("turned unhealthy while baking: {why}"));
            }
            (TargetState::Baking, _) if now >= self.ended_at_ms.unwrap_or(now) + bake_ms as i64 => {
                self.state = TargetState::Succeeded;
                out.released.push(i);
            }
            _ => return,
        }
        out.touched.push(i);
        out.changed = true;
    }
}

impl RolloutInfo {
    /// The installs of `wave`.
    pub fn in_wave(&self, wave: u32) -> impl Iterator<Item = &RolloutTarget> {
        self.targets.iter().filter(move |t| t.wave == wave)
    }

    /// How many installs deploy now.
    pub fn running(&self) -> usize {
        self.targets
            .iter()
            .filter(|t| t.state == TargetState::Running)
            .count()
    }

    /// Whether an install of it still deploys or bakes.
    pub fn deploying(&self) -> bool {
        self.targets
            .iter()
            .any(|t| matches!(t.state, TargetState::Running | TargetState::Baking))
    }

    /// Moves the rollout along at `now`: `seen(target)` says what became
    /// of each install that runs or bakes (and is asked of no other).
    pub fn advance(&mut self, now: i64, seen: impl Fn(&RolloutTarget) -> Seen) -> Advance {
        let mut out = Advance::default();
        if !self.status.is_active() {
            return out;
        }
        // One walk over the installs (a rollout may have 10,000): each live
        // one moved, and what the rest of the pass asks of them all.
        let mut walk = Walk::default();
        for (i, t) in self.targets.iter_mut().enumerate() {
            if matches!(t.state, TargetState::Running | TargetState::Baking) {
                t.moved(i, now, self.bake_ms, seen(t), &mut out);
            }
            walk.count(i, t);
        }
        if self.status == RolloutStatus::Running
            && let Some(t) = walk.failed.map(|i| &self.targets[i])
        {
            self.status = RolloutStatus::Stopped;
            self.reason = Some(format!(
                "install {} failed in wave {}: {}. The rest of the wave finishes and nothing new starts: \
                 fix it and `retry`, `resume` to go on without it, or `rollback`",
                t.install,
                t.wave + 1,
                t.reason.as_deref().unwrap_or("no reason given")
            ));
            out.changed = true;
        }
        if self.status == RolloutStatus::Cancelling && walk.live == 0 {
            self.status = RolloutStatus::Cancelled;
            self.reason = Some("cancelled: nothing new started; what ran has finished".into());
            out.changed = true;
        }
        // Every wave before the first with an install not done is through.
        while self.status == RolloutStatus::Running
            && walk.first_undone_wave.is_none_or(|w| w > self.wave)
        {
            out.changed = true;
            if self.wave + 1 >= self.wave_count {
                self.status = RolloutStatus::Succeeded;
                self.reason = None;
            } else if self.approve_each_wave {
                self.status = RolloutStatus::AwaitingApproval;
                self.reason = Some(format!(
                    "wave {} of {} passed; `resume` starts wave {}",
                    self.wave + 1,
                    self.wave_count,
                    self.wave + 2
                ));
            } else {
                self.wave += 1;
            }
        }
        if self.status == RolloutStatus::Running {
            let room = (self.max_parallel as usize).saturating_sub(walk.running);
            let from = walk.first_pending.unwrap_or(self.targets.len());
            out.start = self.targets[from..]
                .iter()
                .enumerate()
                .filter(|(_, t)| t.state == TargetState::Pending && t.wave <= self.wave)
                .map(|(i, _)| from + i)
                .take(room)
                .collect();
        }
        out
    }

    /// The rollout without its installs (`targets` empty): what a save
    /// writes beside the installs that changed.
    pub fn head(&self) -> RolloutInfo {
        RolloutInfo {
            id: self.id.clone(),
            kind: self.kind,
            release_id: self.release_id.clone(),
            runner_version: self.runner_version.clone(),
            app_id: self.app_id.clone(),
            app_name: self.app_name.clone(),
            selector: self.selector.clone(),
            waves: self.waves.clone(),
            max_parallel: self.max_parallel,
            approve_each_wave: self.approve_each_wave,
            bake_ms: self.bake_ms,
            rollback_of: self.rollback_of.clone(),
            status: self.status,
            wave: self.wave,
            wave_count: self.wave_count,
            reason: self.reason.clone(),
            targets: Vec::new(),
            created_by: self.created_by.clone(),
            created_at_ms: self.created_at_ms,
            updated_at_ms: self.updated_at_ms,
            version: self.version,
        }
    }

    /// Marks install `i` as started by workflow `id` at `now`.
    pub fn started(&mut self, i: usize, id: WorkflowId, now: i64) {
        let t = &mut self.targets[i];
        t.state = TargetState::Running;
        t.workflow_id = Some(id);
        t.tries += 1;
        t.started_at_ms = Some(now);
        t.ended_at_ms = None;
        t.reason = None;
    }

    /// Marks install `i`'s runner as asked at `now` for the release of a
    /// runner rollout (there is no workflow: the runner updates itself).
    pub fn asked(&mut self, i: usize, now: i64) {
        let t = &mut self.targets[i];
        t.state = TargetState::Running;
        t.workflow_id = None;
        t.tries += 1;
        t.started_at_ms = Some(now);
        t.ended_at_ms = None;
        t.reason = None;
    }

    /// Marks install `i` as failed before its workflow could start.
    pub fn not_started(&mut self, i: usize, why: String, now: i64) {
        let t = &mut self.targets[i];
        t.state = TargetState::Failed;
        t.tries += 1;
        t.ended_at_ms = Some(now);
        t.reason = Some(format!("its deploy could not start: {why}"));
    }

    /// Pauses a running rollout: what deploys finishes (and is recorded),
    /// nothing new starts until [`RolloutInfo::resume`].
    pub fn pause(&mut self) -> Result<(), String> {
        if !matches!(
            self.status,
            RolloutStatus::Running | RolloutStatus::AwaitingApproval
        ) {
            return Err(self.cannot("pause", self.status));
        }
        self.status = RolloutStatus::Paused;
        self.reason = Some(format!(
            "paused in wave {} of {}: what deploys finishes, nothing new starts; `resume` goes on",
            self.wave + 1,
            self.wave_count
        ));
        Ok(())
    }

    /// Goes on: starts the next wave of a rollout that waits for an
    /// approval, goes on with a paused one, or passes over the installs
    /// that failed.
    pub fn resume(&mut self) -> Result<(), String> {
        match self.status {
            RolloutStatus::Paused => {}
            RolloutStatus::AwaitingApproval => {
                self.wave += 1;
            }
            RolloutStatus::Stopped => {
                for t in &mut self.targets {
                    if t.state == TargetState::Failed {
                        t.state = TargetState::Skipped;
                        t.reason = Some(format!(
                            "passed over by resume after: {}",
                            t.reason.as_deref().unwrap_or("it failed")
                        ));
                    }
                }
            }
            s => return Err(self.cannot("resume", s)),
        }
        self.status = RolloutStatus::Running;
        self.reason = None;
        Ok(())
    }

    /// Deploys the installs that failed (or were passed over) again, then
    /// goes on.
    pub fn retry(&mut self) -> Result<usize, String> {
        if !matches!(
            self.status,
            RolloutStatus::Stopped | RolloutStatus::Running | RolloutStatus::AwaitingApproval
        ) {
            return Err(self.cannot("retry", self.status));
        }
        let mut again = 0;
        for t in &mut self.targets {
            if matches!(t.state, TargetState::Failed | TargetState::Skipped) {
                t.state = TargetState::Pending;
                again += 1;
            }
        }
        if again == 0 {
            return Err(format!(
                "rollout {} has no failed install to retry",
                self.id
            ));
        }
        if self.status == RolloutStatus::Stopped {
            self.status = RolloutStatus::Running;
            self.reason = None;
        }
        Ok(again)
    }

    /// Starts nothing more; what deploys finishes (and is recorded), then
    /// the rollout is `cancelled`.
    pub fn cancel(&mut self) -> Result<(), String> {
        if !self.status.is_active() || self.status == RolloutStatus::Cancelling {
            return Err(self.cannot("cancel", self.status));
        }
        if self.deploying() {
            self.status = RolloutStatus::Cancelling;
            self.reason = Some("cancelling: nothing new starts; what deploys finishes".into());
        } else {
            self.status = RolloutStatus::Cancelled;
            self.reason = Some("cancelled: nothing new starts".into());
        }
        Ok(())
    }

    pub(crate) fn cannot(&self, what: &str, status: RolloutStatus) -> String {
        format!(
            "rollout {} is {status}: there is nothing to {what}",
            self.id
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes(waves: &str, n: usize) -> Vec<usize> {
        let all: Vec<usize> = (0..n).collect();
        waves
            .parse::<Waves>()
            .unwrap()
            .plan(&all)
            .iter()
            .map(Vec::len)
            .collect()
    }

    #[test]
    fn waves_split_the_installs_cumulatively_rounding_up() {
        // The issue's own example: 8 prod installs in waves 1, 25%, 100%.
        assert_eq!(sizes("1,25%,100%", 8), [1, 1, 6]);
        assert_eq!(sizes("1,10%,50%,100%", 1000), [1, 99, 400, 500]);
        // 10% of 8 rounds up to 1: the same as the first wave, left out.
        assert_eq!(sizes("1,10%,100%", 8), [1, 7]);
        assert_eq!(sizes("100%", 3), [3]);
        assert_eq!(sizes("5,100%", 3), [3]);
        assert_eq!(sizes("1,100%", 0), Vec::<usize>::new());
        // A count after a larger share never goes back.
        assert_eq!(sizes("50%,2,100%", 10), [5, 5]);
        let all: Vec<&str> = vec!["a", "b", "c", "d"];
        let plan = "1,50%,100%".parse::<Waves>().unwrap().plan(&all);
        assert_eq!(plan, vec![vec!["a"], vec!["b"], vec!["c", "d"]]);
        assert_eq!(
            "1,10%,100%".parse::<Waves>().unwrap().to_string(),
            "1,10%,100%"
        );
    }

    fn rollout(
        n: usize,
        waves: &str,
        max_parallel: u32,
        approve: bool,
        bake_ms: u64,
    ) -> RolloutInfo {
        let installs = (0..n)
            .map(|i| Selected {
                id: InstallId::generate(),
                name: format!("i{i:02}"),
                release: Some(ReleaseId::generate()),
                config_version: Some(1),
                pinned: None,
            })
            .collect();
        NewRollout {
            id: RolloutId::generate(),
            kind: RolloutKind::Release,
            release_id: ReleaseId::generate(),
            runner_version: None,
            app_id: Some(AppId::generate()),
            selector: "tier=prod".into(),
            waves: waves.parse().unwrap(),
            max_parallel,
            approve_each_wave: approve,
            bake_ms,
            created_by: None,
        }
        .plan(installs, 0)
    }

    /// Starts what `advance` asks, as the leader does. `seen` is asked of
    /// no install that neither runs nor bakes (the leader knows of no
    /// other).
    fn drive(r: &mut RolloutInfo, now: i64, seen: impl Fn(&RolloutTarget) -> Seen) -> Advance {
        let a = r.advance(now, |t| {
            assert!(
                matches!(t.state, TargetState::Running | TargetState::Baking),
                "asked of {} ({})",
                t.install,
                t.state
            );
            seen(t)
        });
        for &i in &a.start {
            r.started(i, WorkflowId::generate(), now);
        }
        a
    }

    fn states(r: &RolloutInfo) -> String {
        r.targets
            .iter()
            .map(|t| match t.state {
                TargetState::Pending => '.',
                TargetState::Running => 'R',
                TargetState::Baking => 'B',
                TargetState::Succeeded => 'S',
                TargetState::Failed => 'F',
                TargetState::Skipped => 'K',
            })
            .collect()
    }

    #[test]
    fn waves_deploy_in_turn_within_max_parallel() {
        let mut r = rollout(8, "1,25%,100%", 4, false, 0);
        assert_eq!(r.wave_count, 3);
        let a = drive(&mut r, 1, |_| Seen::Going);
        assert_eq!(a.start, [0]);
        assert_eq!(states(&r), "R.......");
        // Nothing more starts while the canary runs.
        assert!(drive(&mut r, 2, |_| Seen::Going).start.is_empty());
        let a = drive(&mut r, 3, |_| Seen::Succeeded(3));
        assert_eq!(a.released, [0]);
        assert_eq!((r.wave, states(&r).as_str()), (1, "SR......"));
        drive(&mut r, 4, |_| Seen::Succeeded(4));
        // Wave 3 has 6 installs; 4 at once.
        assert_eq!((r.wave, states(&r).as_str()), (2, "SSRRRR.."));
        drive(&mut r, 5, |t| {
            if t.install == "i02" {
                Seen::Succeeded(5)
            } else {
                Seen::Going
            }
        });
        assert_eq!(states(&r), "SSSRRRR.");
        assert!(r.running() <= 4);
        drive(&mut r, 6, |_| Seen::Succeeded(6));
        drive(&mut r, 7, |_| Seen::Succeeded(7));
        assert_eq!(states(&r), "SSSSSSSS");
        assert_eq!(r.status, RolloutStatus::Succeeded);
        assert!(!r.advance(8, |_| Seen::Going).changed);
    }

    #[test]
    fn a_failure_stops_the_rollout_and_retry_finishes_it() {
        let mut r = rollout(8, "1,25%,100%", 10, false, 0);
        drive(&mut r, 1, |_| Seen::Going);
        drive(&mut r, 2, |_| Seen::Succeeded(2));
        assert_eq!(states(&r), "SR......");
        let a = drive(&mut r, 3, |_| Seen::Failed("apply failed".into()));
        assert!(a.start.is_empty() && a.changed);
        assert_eq!(r.status, RolloutStatus::Stopped);
        assert_eq!(r.wave, 1);
        let why = r.reason.clone().unwrap();
        assert!(
            why.contains("install i01 failed in wave 2: apply failed"),
            "{why}"
        );
        // Nothing new starts while stopped.
        assert!(drive(&mut r, 4, |_| Seen::Going).start.is_empty());
        assert_eq!(r.retry().unwrap(), 1);
        let a = drive(&mut r, 5, |_| Seen::Going);
        assert_eq!(a.start, [1]);
        assert_eq!(r.targets[1].tries, 2);
        drive(&mut r, 6, |_| Seen::Succeeded(6));
        assert_eq!(states(&r), "SSRRRRRR");
        drive(&mut r, 7, |_| Seen::Succeeded(7));
        assert_eq!(r.status, RolloutStatus::Succeeded);
        assert!(r.retry().unwrap_err().contains("succeeded"));
    }

    #[test]
    fn the_rest_of_a_failed_wave_finishes_and_resume_passes_over_it() {
        let mut r = rollout(4, "1,100%", 10, false, 0);
        drive(&mut r, 1, |_| Seen::Going);
        drive(&mut r, 2, |_| Seen::Succeeded(2));
        assert_eq!(states(&r), "SRRR");
        drive(&mut r, 3, |t| {
            if t.install == "i02" {
                Seen::Failed("broken".into())
            } else {
                Seen::Going
            }
        });
        assert_eq!(
            (r.status, states(&r).as_str()),
            (RolloutStatus::Stopped, "SRFR")
        );
        drive(&mut r, 4, |_| Seen::Succeeded(4));
        assert_eq!(
            (r.status, states(&r).as_str()),
            (RolloutStatus::Stopped, "SSFS")
        );
        r.resume().unwrap();
        drive(&mut r, 5, |_| Seen::Going);
        assert_eq!(
            (r.status, states(&r).as_str()),
            (RolloutStatus::Succeeded, "SSKS")
        );
        assert!(r.targets[2].reason.as_deref().unwrap().contains("broken"));
    }

    #[test]
    fn each_wave_waits_for_approval_when_asked() {
        let mut r = rollout(3, "1,100%", 10, true, 0);
        drive(&mut r, 1, |_| Seen::Going);
        drive(&mut r, 2, |_| Seen::Succeeded(2));
        assert_eq!(r.status, RolloutStatus::AwaitingApproval);
        assert!(
            r.reason
                .as_deref()
                .unwrap()
                .contains("`resume` starts wave 2")
        );
        assert!(drive(&mut r, 3, |_| Seen::Going).start.is_empty());
        r.resume().unwrap();
        assert_eq!(drive(&mut r, 4, |_| Seen::Going).start, [1, 2]);
        drive(&mut r, 5, |_| Seen::Succeeded(5));
        assert_eq!(r.status, RolloutStatus::Succeeded);
        assert!(r.resume().is_err());
    }

    #[test]
    fn a_bake_holds_the_wave_and_ill_health_fails_it() {
        let mut r = rollout(2, "1,100%", 10, false, 1000);
        drive(&mut r, 0, |_| Seen::Going);
        let a = drive(&mut r, 10, |_| Seen::Succeeded(10));
        assert!(a.released.is_empty());
        assert_eq!(states(&r), "B.");
        drive(&mut r, 500, |_| Seen::Going);
        assert_eq!(states(&r), "B.");
        let a = drive(&mut r, 1010, |_| Seen::Going);
        assert_eq!(a.released, [0]);
        assert_eq!(states(&r), "SR");
        drive(&mut r, 1020, |_| Seen::Succeeded(1020));
        drive(&mut r, 1030, |_| Seen::Failed("runner offline".into()));
        assert_eq!(
            (r.status, states(&r).as_str()),
            (RolloutStatus::Stopped, "SF")
        );
        assert!(
            r.targets[1]
                .reason
                .as_deref()
                .unwrap()
                .contains("unhealthy while baking: runner offline")
        );
    }

    #[test]
    fn rollback_returns_each_install_reached_to_its_release_before() {
        let mut r = rollout(4, "1,100%", 10, false, 0);
        // i02's first release: back to the config version it ran; i03
        // had neither.
        r.targets[2].from_release = None;
        r.targets[3].from_release = None;
        r.targets[3].from_config = None;
        drive(&mut r, 1, |_| Seen::Going);
        drive(&mut r, 2, |_| Seen::Succeeded(2));
        drive(&mut r, 3, |t| {
            if t.install == "i01" {
                Seen::Failed("x".into())
            } else {
                Seen::Going
            }
        });
        // i02 still deploys: no rollback yet.
        assert!(
            r.rollback(RolloutId::generate(), 4, None)
                .unwrap_err()
                .contains("i02 still deploys")
        );
        drive(&mut r, 5, |_| Seen::Succeeded(5));
        // What each install runs now: what the rollout gave it, or (i01
        // failed) what it had.
        let mut current = std::collections::BTreeMap::new();
        for t in &r.targets {
            let now = match t.state {
                TargetState::Succeeded => Some(t.release_id.clone()),
                _ => t.from_release.clone(),
            };
            if let Some(now) = now {
                current.insert(t.install_id.clone(), now);
            }
        }
        let mut moved = current.clone();
        moved.insert(r.targets[0].install_id.clone(), ReleaseId::generate());
        let e = r
            .rollback(RolloutId::generate(), 6, Some(&moved))
            .unwrap_err();
        assert!(
            e.contains("i00 (now on rel_") && e.contains("roll back the newer rollout first"),
            "{e}"
        );
        // i02 deployed outside releases since its first release.
        let mut moved = current.clone();
        moved.remove(&r.targets[2].install_id);
        let e = r
            .rollback(RolloutId::generate(), 6, Some(&moved))
            .unwrap_err();
        assert!(e.contains("i02 (deployed outside releases since)"), "{e}");
        let back = r
            .rollback(RolloutId::generate(), 6, Some(&current))
            .unwrap();
        assert_eq!(r.status, RolloutStatus::RolledBack);
        assert_eq!(back.rollback_of.as_ref(), Some(&r.id));
        let to: Vec<_> = back
            .targets
            .iter()
            .map(|t| (t.install.as_str(), &t.release_id, t.config_version))
            .collect();
        assert_eq!(
            to,
            [
                ("i00", r.targets[0].from_release.as_ref().unwrap(), None),
                ("i01", r.targets[1].from_release.as_ref().unwrap(), None),
                ("i02", &r.release_id, Some(1)),
            ]
        );
        let left = back.reason.as_deref().unwrap();
        assert!(left.contains("i03") && !left.contains("i02"), "{left}");
        assert!(r.rollback(RolloutId::generate(), 7, None).is_err());
    }

    #[test]
    fn a_start_that_fails_stops_like_a_failed_workflow() {
        let mut r = rollout(2, "100%", 10, false, 0);
        let a = r.advance(0, |_| Seen::Going);
        assert_eq!(a.start, [0, 1]);
        r.started(0, WorkflowId::generate(), 0);
        r.not_started(1, "not built".into(), 0);
        r.advance(1, |_| Seen::Going);
        assert_eq!(r.status, RolloutStatus::Stopped);
        assert!(
            r.reason
                .as_deref()
                .unwrap()
                .contains("could not start: not built")
        );
        // Cancelled while install 0 deploys: it is still followed, and
        // the rollout ends cancelled once it has.
        r.cancel().unwrap();
        assert_eq!(r.status, RolloutStatus::Cancelling);
        assert!(r.cancel().is_err());
        let a = r.advance(2, |_| Seen::Succeeded(2));
        assert!(a.start.is_empty());
        assert_eq!(a.released, [0]);
        assert_eq!(r.status, RolloutStatus::Cancelled);
        assert!(r.cancel().is_err());
    }

    #[test]
    fn bad_waves_say_what_is_wrong() {
        for (text, says) in [
            ("1,10%", "last wave must be 100%"),
            ("0,100%", "neither a number"),
            ("1,150%", "from 1% to 100%"),
            ("50%,10%,100%", "never shrink"),
            ("5,2,100%", "never shrink"),
            ("", "neither a number"),
            ("1,,100%", "neither a number"),
        ] {
            let err = text.parse::<Waves>().unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn a_paused_rollout_finishes_what_runs_and_starts_nothing_until_resumed() {
        let mut r = rollout(4, "100%", 2, false, 0);
        let a = drive(&mut r, 0, |_| Seen::Going);
        assert_eq!(a.start, [0, 1]);
        r.pause().unwrap();
        assert_eq!(r.status, RolloutStatus::Paused);
        assert!(r.status.is_active());
        // The two that run end; nothing new starts while paused.
        let a = drive(&mut r, 1, |_| Seen::Succeeded(1));
        assert!(a.start.is_empty());
        assert_eq!(a.released, [0, 1]);
        assert!(r.pause().is_err());
        r.resume().unwrap();
        let a = drive(&mut r, 2, |_| Seen::Going);
        assert_eq!(a.start, [2, 3]);
        let _ = drive(&mut r, 3, |_| Seen::Succeeded(3));
        assert_eq!(r.status, RolloutStatus::Succeeded);
    }

    #[test]
    fn a_runner_rollout_passes_over_pinned_installs() {
        let installs: Vec<Selected> = ["a", "b", "c"]
            .iter()
            .map(|n| Selected {
                id: InstallId::generate(),
                name: (*n).into(),
                release: None,
                config_version: None,
                pinned: (*n == "b").then(|| "1.0.0".to_owned()),
            })
            .collect();
        let mut r = NewRollout {
            id: RolloutId::generate(),
            kind: RolloutKind::Runner,
            release_id: ReleaseId::generate(),
            runner_version: Some("2.0.0".into()),
            app_id: None,
            selector: String::new(),
            waves: "50%,100%".parse().unwrap(),
            max_parallel: 10,
            approve_each_wave: false,
            bake_ms: 0,
            created_by: None,
        }
        .plan(installs, 0);
        assert_eq!(r.targets[1].state, TargetState::Skipped);
        assert!(
            r.targets[1]
                .reason
                .as_deref()
                .unwrap()
                .contains("pinned to version 1.0.0")
        );
        // Wave 1 is a and b (b passed over): only a starts.
        let a = drive(&mut r, 0, |_| Seen::Going);
        assert_eq!(a.start, [0]);
        let a = drive(&mut r, 1, |_| Seen::Succeeded(1));
        assert_eq!(a.start, [2]);
        let _ = drive(&mut r, 2, |_| Seen::Succeeded(2));
        assert_eq!(r.status, RolloutStatus::Succeeded);
        assert_eq!(r.targets[1].tries, 0, "the pinned install was never asked");
    }
}
