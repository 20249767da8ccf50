//! Rollouts on the workflow engine: the leader moves every active rollout
//! along on each pass, by [`RolloutInfo::advance`], and starts each
//! install's normal deploy workflow pinned to the release (its plans,
//! policies and approvals as the install's `approval_option` says).
//!
//! A runner rollout (`kind: runner`) goes through the same waves, bake and
//! acts; starting an install records the runner release its runner is
//! asked for (its signed settings carry it), and the install passes when
//! its runner calls on that version, healthy, or fails with the reason the
//! runner reports (a download, signature or trial that failed, a new
//! version that was not healthy in time and was rolled back), or when it
//! has not moved within [`RUNNER_UPDATE_BOUND_MS`].
//!
//! Every change is saved over the version it was read at, and a start is
//! saved with its workflow in one transaction, so a leader that restarts
//! or takes over mid-rollout goes on from what is stored and never
//! deploys an install twice. The commands (`create`, `resume`, `retry`,
//! `cancel`, `rollback`) read, change and save the same way, again on a
//! conflict.

use nuon_core::wire::ErrorCode;
use std::collections::HashMap;

use nuon_core::labels::Selector;
use nuon_core::model::Install;
use nuon_core::rollout::{
    CreateRollout, NewRollout, RolloutInfo, RolloutKind, RolloutStatus, Seen, Selected,
    TargetState, Waves,
};
use nuon_core::wire::{ReleaseInfo, RunnerReleaseInfo};
use nuon_core::workflow::{WorkflowKind, WorkflowStatus};
use nuon_core::{InstallId, OrgId, RolloutId, WorkflowId, now_ms};

use super::{Engine, EngineError, Result, Start};
use crate::store::{RolloutSave, StoreError};

/// What an operator asks of a rollout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RolloutAct {
    /// Start the next wave, go on after a pause, or pass over the failed
    /// installs.
    Resume,
    /// Start nothing new until resumed.
    Pause,
    /// Deploy the failed installs again.
    Retry,
    /// Start nothing more.
    Cancel,
    /// Return the installs reached to their release before.
    Rollback,
}

/// How often a command reads and saves again when the leader saved the
/// rollout in between.
const TRIES: usize = 5;

/// How long a runner has, once asked for a version, to call on it: past
/// this its install fails in the rollout (a runner that is off, or stuck
/// draining a long job).
pub(crate) const RUNNER_UPDATE_BOUND_MS: i64 = 30 * 60 * 1000;

/// A rollout's settings from its request, checked.
struct Plan {
    selector: Selector,
    waves: Waves,
    bake_ms: u64,
}

impl Plan {
    fn of(req: &CreateRollout) -> Result<Plan> {
        let selector: Selector = req
            .to
            .parse()
            .map_err(|e: String| EngineError::Invalid(format!("--to: {e}")))?;
        let waves: Waves = req
            .waves
            .parse()
            .map_err(|e: String| EngineError::Invalid(format!("--waves: {e}")))?;
        if req.max_parallel == 0 {
            return Err(EngineError::Invalid(
                "--max-parallel must be at least 1".into(),
            ));
        }
        let bake_ms = match &req.bake {
            None => 0,
            Some(text) => {
                let d = nuon_core::parse_duration(text)
                    .map_err(|e| EngineError::Invalid(format!("--bake: {e}")))?;
                if d > std::time::Duration::from_secs(7 * 86_400) {
                    return Err(EngineError::Invalid(format!(
                        "--bake {text}: at most 7 days"
                    )));
                }
                d.as_millis() as u64
            }
        };
        Ok(Plan {
            selector,
            waves,
            bake_ms,
        })
    }

    fn rollout(
        self,
        req: &CreateRollout,
        kind: RolloutKind,
        release_id: nuon_core::ReleaseId,
        created_by: Option<String>,
    ) -> NewRollout {
        NewRollout {
            id: RolloutId::generate(),
            kind,
            release_id,
            runner_version: None,
            app_id: None,
            selector: self.selector.to_string(),
            waves: self.waves,
            max_parallel: req.max_parallel,
            approve_each_wave: req.approve_each_wave,
            bake_ms: self.bake_ms,
            created_by,
        }
    }
}

fn stale(e: &EngineError) -> bool {
    matches!(
        e,
        EngineError::Store(StoreError::Conflict {
            code: ErrorCode::StaleRollout,
            ..
        })
    )
}

impl Engine {
    /// Plans a rollout of `release` and, unless it is a dry run, stores it
    /// for the leader to drive.
    pub(crate) async fn create_rollout(
        &self,
        org: &OrgId,
        release: &ReleaseInfo,
        req: &CreateRollout,
        created_by: Option<String>,
    ) -> Result<RolloutInfo> {
        let plan = Plan::of(req)?;
        let releases = self.store.install_releases(org).await?;
        let installs: Vec<Selected> = self
            .store
            .select_installs(org, &plan.selector)
            .await?
            .into_iter()
            .filter(|i| i.app_id == release.app_id)
            .filter(|i| !i.state.is_leaving())
            .map(|i| Selected {
                release: releases.get(&i.id).cloned(),
                config_version: Some(i.config_version),
                id: i.id,
                name: i.name,
                pinned: None,
            })
            .collect();
        if installs.is_empty() {
            return Err(EngineError::Invalid(format!(
                "the selector {:?} picks no install of the release's app (deprovisioned ones are left out): see `nuon installs list --selector '{}'`",
                plan.selector.to_string(),
                plan.selector
            )));
        }
        let mut new = plan.rollout(req, RolloutKind::Release, release.id.clone(), created_by);
        new.app_id = Some(release.app_id.clone());
        let mut rollout = new.plan(installs, now_ms());
        rollout.app_name = release.app_name.clone();
        self.keep_rollout(org, rollout, req.dry_run).await
    }

    /// Plans a rollout of runner release `release` to the installs of
    /// every app the selector picks (pinned runners passed over) and,
    /// unless it is a dry run, stores it for the leader to drive.
    pub(crate) async fn create_runner_rollout(
        &self,
        org: &OrgId,
        release: &RunnerReleaseInfo,
        req: &CreateRollout,
        created_by: Option<String>,
    ) -> Result<RolloutInfo> {
        let plan = Plan::of(req)?;
        let asked = self.store.install_runner_releases(org).await?;
        let by_version: HashMap<String, nuon_core::ReleaseId> = self
            .store
            .list_runner_releases(org)
            .await?
            .into_iter()
            .map(|r| (r.version, r.id))
            .collect();
        let runners: HashMap<_, _> = self
            .store
            .list_runners(org)
            .await?
            .into_iter()
            .map(|r| (r.id.clone(), r))
            .collect();
        let installs: Vec<Selected> = self
            .store
            .select_installs(org, &plan.selector)
            .await?
            .into_iter()
            .filter(|i| !i.state.is_leaving())
            .map(|i| {
                let runner = runners.get(&i.runner_id);
                // What it has (what a rollback returns it to): the release
                // of the version it runs, else the one it was last asked
                // for (a version published after it started).
                let running = runner
                    .and_then(|r| r.session.as_ref())
                    .and_then(|s| s.version.as_ref())
                    .and_then(|v| by_version.get(v));
                Selected {
                    release: running.or(asked.get(&i.id).map(|(r, _)| r)).cloned(),
                    config_version: None,
                    pinned: runner
                        .and_then(|r| r.telemetry.as_ref())
                        .and_then(|t| t.pinned.clone()),
                    id: i.id,
                    name: i.name,
                }
            })
            .collect();
        if installs.is_empty() {
            return Err(EngineError::Invalid(format!(
                "the selector {:?} picks no install (deprovisioned ones are left out): see `nuon installs list --selector '{}'`",
                plan.selector.to_string(),
                plan.selector
            )));
        }
        let mut new = plan.rollout(req, RolloutKind::Runner, release.id.clone(), created_by);
        new.runner_version = Some(release.version.clone());
        let rollout = new.plan(installs, now_ms());
        self.keep_rollout(org, rollout, req.dry_run).await
    }

    /// Stores a planned rollout for the leader (a dry run: only says it).
    async fn keep_rollout(
        &self,
        org: &OrgId,
        mut rollout: RolloutInfo,
        dry_run: bool,
    ) -> Result<RolloutInfo> {
        if dry_run {
            rollout.status = RolloutStatus::Planned;
            return Ok(rollout);
        }
        // An install takes one rollout at a time: the store refuses
        // another (`install_in_rollout`) in the same transaction.
        self.store.create_rollout(org, &rollout, None).await?;
        rollout.version = 1;
        tracing::info!(rollout = %rollout.id, kind = ?rollout.kind, release = %rollout.release_id, installs = rollout.targets.len(), waves = rollout.wave_count, "rollout created");
        self.wake_everywhere();
        Ok(rollout)
    }

    /// Applies an operator's `act` to a rollout; the rollout after (with a
    /// rollback, the new rollout that rolls it back).
    pub(crate) async fn rollout_act(
        &self,
        org: &OrgId,
        id: &RolloutId,
        act: RolloutAct,
        by: Option<String>,
    ) -> Result<RolloutInfo> {
        for _ in 0..TRIES {
            let mut r = self
                .store
                .get_rollout(org, id)
                .await?
                .ok_or_else(|| EngineError::NotFound(format!("no rollout {id}")))?;
            let now = now_ms();
            let done = match act {
                RolloutAct::Resume => r.resume().map(|_| None),
                RolloutAct::Pause => r.pause().map(|_| None),
                RolloutAct::Retry => r.retry().map(|_| None),
                RolloutAct::Cancel => r.cancel().map(|_| None),
                RolloutAct::Rollback => {
                    let current = match r.kind {
                        RolloutKind::Release => self.store.install_releases(org).await?,
                        RolloutKind::Runner => self
                            .store
                            .install_runner_releases(org)
                            .await?
                            .into_iter()
                            .map(|(i, (r, _))| (i, r))
                            .collect(),
                    };
                    r.rollback(RolloutId::generate(), now, Some(&current))
                        .map(Some)
                }
            }
            .map_err(|e| EngineError::conflict(ErrorCode::RolloutState, e))?;
            r.updated_at_ms = now;
            let saved = match done {
                None => self
                    .store
                    .save_rollout(org, &RolloutSave::whole(&r), &[])
                    .await
                    .map(|_| {
                        r.version += 1;
                        r
                    }),
                Some(mut back) => {
                    back.created_by = by.clone();
                    self.store
                        .create_rollout(org, &back, Some(&RolloutSave::whole(&r)))
                        .await
                        .map(|_| {
                            back.version = 1;
                            back
                        })
                }
            };
            match saved.map_err(EngineError::from) {
                Ok(r) => {
                    tracing::info!(rollout = %id, ?act, status = %r.status, "rollout changed by hand");
                    self.wake_everywhere();
                    return Ok(r);
                }
                Err(e) if stale(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        Err(EngineError::conflict(
            ErrorCode::StaleRollout,
            format!("rollout {id} keeps changing under this request: try again"),
        ))
    }

    /// The active rollout that holds `install`, if one does.
    pub(crate) async fn rollout_holding(
        &self,
        org: &OrgId,
        install: &nuon_core::InstallId,
    ) -> Result<Option<RolloutInfo>> {
        for (o, id) in self.store.active_rollouts().await? {
            if &o != org {
                continue;
            }
            if let Some(r) = self.store.get_rollout(org, &id).await?
                && r.targets.iter().any(|t| &t.install_id == install)
            {
                return Ok(Some(r));
            }
        }
        Ok(None)
    }

    /// Moves every active rollout along (the leader, on each pass).
    pub(super) async fn drive_rollouts(&self) {
        let active = match self.store.active_rollouts().await {
            Ok(a) => a,
            Err(e) => {
                tracing::error!(error = %e, "cannot list active rollouts");
                return;
            }
        };
        self.kept_rollouts()
            .retain(|id, _| active.iter().any(|(_, a)| a == id));
        for (org, id) in active {
            let Some(r) = self.rollout_to_drive(&org, &id).await.transpose() else {
                continue;
            };
            let driven = match r {
                Ok(r) => self.drive_rollout(&org, r).await,
                Err(e) => Err(e),
            };
            match driven {
                // Kept as saved, for the next pass.
                Ok(r) => {
                    self.kept_rollouts().insert(id, r);
                }
                Err(e) if stale(&e) => {}
                Err(e) => tracing::error!(rollout = %id, error = %e, "rollout did not advance"),
            }
        }
    }

    /// The leader's kept rollouts.
    fn kept_rollouts(&self) -> std::sync::MutexGuard<'_, HashMap<RolloutId, RolloutInfo>> {
        self.rollouts.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The rollout as stored: the one kept from the last pass while its
    /// version has not moved (a pass reads one row, not 10,000), else read
    /// again. One stored whole by an earlier version is saved whole first,
    /// so that every later save writes only the installs it changes.
    async fn rollout_to_drive(&self, org: &OrgId, id: &RolloutId) -> Result<Option<RolloutInfo>> {
        let Some((version, in_rows)) = self.store.rollout_version(org, id).await? else {
            return Ok(None);
        };
        let kept = self.kept_rollouts().remove(id);
        if let Some(r) = kept.filter(|r| r.version == version) {
            return Ok(Some(r));
        }
        let Some(mut r) = self.store.get_rollout(org, id).await? else {
            return Ok(None);
        };
        if !in_rows && !r.targets.is_empty() {
            self.store
                .save_rollout(org, &RolloutSave::whole(&r), &[])
                .await?;
            r.version += 1;
        }
        Ok(Some(r))
    }

    /// Moves one rollout along; the rollout as saved after.
    async fn drive_rollout(&self, org: &OrgId, mut r: RolloutInfo) -> Result<RolloutInfo> {
        let mut seen = HashMap::new();
        let mut versions = HashMap::new();
        // The installs that run or bake: one walk of the 10,000 a rollout
        // may have.
        let live: Vec<usize> = (r.targets.iter().enumerate())
            .filter(|(_, t)| matches!(t.state, TargetState::Running | TargetState::Baking))
            .map(|(i, _)| i)
            .collect();
        // The deploying installs' workflows in one read; only a failed
        // one is read whole, for its reason.
        let deploying: Vec<WorkflowId> = (live.iter().map(|&i| &r.targets[i]))
            .filter(|t| t.state == TargetState::Running && r.kind != RolloutKind::Runner)
            .filter_map(|t| t.workflow_id.clone())
            .collect();
        let statuses: HashMap<WorkflowId, (WorkflowStatus, Option<i64>)> = self
            .store
            .workflow_statuses(org, &deploying)
            .await?
            .into_iter()
            .map(|(id, status, at)| (id, (status, at)))
            .collect();
        for &i in &live {
            let t = &r.targets[i];
            let s = match t.state {
                TargetState::Running if r.kind == RolloutKind::Runner => {
                    self.runner_seen(org, t, &mut versions).await?
                }
                TargetState::Running => {
                    match t.workflow_id.as_ref().and_then(|w| statuses.get(w)) {
                        Some((status, _)) if status.is_active() => Seen::Going,
                        Some((WorkflowStatus::Succeeded, at)) => {
                            Seen::Succeeded(at.unwrap_or_else(now_ms))
                        }
                        _ => self.workflow_seen(org, t.workflow_id.as_ref()).await?,
                    }
                }
                TargetState::Baking => self.bake_seen(org, &r, i).await?,
                _ => continue,
            };
            seen.insert(t.install_id.clone(), s);
        }
        let now = now_ms();
        let was = r.status;
        let advance = r.advance(now, |t| {
            seen.get(&t.install_id).cloned().unwrap_or(Seen::Going)
        });
        if advance.changed {
            r.updated_at_ms = now;
            // The release an install runs is recorded when its deploy
            // succeeds (a deploy since, during the bake, is not written
            // over); a runner's, when it is asked.
            let released: Vec<_> = advance
                .released
                .iter()
                .filter(|_| r.kind == RolloutKind::Runner)
                .map(|&i| {
                    (
                        r.targets[i].install_id.clone(),
                        r.targets[i].release_id.clone(),
                    )
                })
                .collect();
            let save = RolloutSave::of(&r, advance.touched.iter().copied());
            self.store.save_rollout(org, &save, &released).await?;
            r.version += 1;
            if r.status != was {
                tracing::info!(rollout = %r.id, status = %r.status, wave = r.wave + 1, reason = r.reason.as_deref().unwrap_or(""), "rollout moved");
            }
        }
        if r.kind == RolloutKind::Runner {
            for i in advance.start {
                r = self.ask_runner(org, &r, i).await?;
            }
            return Ok(r);
        }
        let mut releases: HashMap<_, ReleaseInfo> = HashMap::new();
        // The installs it starts, in one read.
        let ids: Vec<InstallId> = (advance.start.iter())
            .map(|&i| r.targets[i].install_id.clone())
            .collect();
        let installs: HashMap<InstallId, Install> = (self.store.find_installs(org, &ids))
            .await?
            .into_iter()
            .map(|i| (i.id.clone(), i))
            .collect();
        for i in advance.start {
            let target = r.targets[i].clone();
            if !releases.contains_key(&target.release_id) {
                let found = self
                    .store
                    .get_release(org, &target.release_id)
                    .await?
                    .ok_or_else(|| {
                        EngineError::NotFound(format!("release {} is gone", target.release_id))
                    });
                match found {
                    Ok(rel) => {
                        releases.insert(target.release_id.clone(), rel);
                    }
                    Err(e) => {
                        self.not_started(org, &mut r, i, e).await?;
                        break;
                    }
                }
            }
            let release = &releases[&target.release_id];
            let workflow = WorkflowId::generate();
            // Marked started in place (not a copy of 10,000 installs), and
            // put back as it was when the start is refused.
            let updated = r.updated_at_ms;
            r.started(i, workflow.clone(), now_ms());
            r.updated_at_ms = now_ms();
            let save = RolloutSave::of(&r, [i]);
            let install = installs.get(&target.install_id).cloned();
            match self
                .start_target(org, &target, install, release, workflow, save)
                .await
            {
                Ok(()) => {
                    r.version += 1;
                    tracing::info!(rollout = %r.id, install = %target.install, wave = target.wave + 1, "rollout deploys an install");
                }
                Err(
                    e @ (EngineError::Invalid(_)
                    | EngineError::NotFound(_)
                    | EngineError::Conflict { .. }),
                ) if !stale(&e) => {
                    r.targets[i] = target;
                    r.updated_at_ms = updated;
                    self.not_started(org, &mut r, i, e).await?;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(r)
    }

    /// Starts the deploy of one install of a rollout (`install`, as read
    /// with the others of its start: none when it is gone), saving the
    /// rollout (`save`, with it started) with the workflow.
    async fn start_target(
        &self,
        org: &OrgId,
        target: &nuon_core::rollout::RolloutTarget,
        install: Option<Install>,
        release: &ReleaseInfo,
        workflow: WorkflowId,
        save: RolloutSave,
    ) -> Result<()> {
        let install = install
            .ok_or_else(|| EngineError::NotFound(format!("install {} is gone", target.install)))?;
        // A rollback of an install's first release: the config version
        // it ran before, with that version's newest builds.
        let (version, release) = match target.config_version {
            Some(v) => (v, None),
            None => (release.config_version, Some(release)),
        };
        let (app_name, config) = self.app_config(org, &install.app_id, version).await?;
        let start = Start {
            release,
            rollout: Some((workflow, save)),
            ..Start::new(&install, &app_name, &config, version, WorkflowKind::Deploy)
        };
        self.start(org, start).await.map(|_| ())
    }

    /// Asks install `i`'s runner for the rollout's runner release: the
    /// rollout (saved with the ask, in one transaction) after. A runner
    /// pinned since the rollout was planned is passed over.
    async fn ask_runner(&self, org: &OrgId, r: &RolloutInfo, i: usize) -> Result<RolloutInfo> {
        let target = &r.targets[i];
        let mut doc = r.clone();
        let now = now_ms();
        doc.updated_at_ms = now;
        let (runner_id, pinned) = match self
            .store
            .find_install(org, target.install_id.as_str())
            .await?
        {
            Some(install) => {
                let pinned = self
                    .store
                    .find_runner(org, install.runner_id.as_str())
                    .await?
                    .and_then(|r| r.telemetry)
                    .and_then(|t| t.pinned);
                (install.runner_id, pinned)
            }
            None => {
                doc.not_started(i, format!("install {} is gone", target.install), now);
                self.store
                    .save_rollout(org, &RolloutSave::of(&doc, [i]), &[])
                    .await?;
                doc.version += 1;
                return Ok(doc);
            }
        };
        if let Some(pin) = pinned {
            let t = &mut doc.targets[i];
            t.state = TargetState::Skipped;
            t.reason = Some(format!(
                "its runner is pinned to version {pin} by the customer (nuon-runner run --pin-version): left as it is"
            ));
            self.store
                .save_rollout(org, &RolloutSave::of(&doc, [i]), &[])
                .await?;
        } else {
            doc.asked(i, now);
            // The ask's number goes up for the install whatever the
            // rollout: a runner that gave up on this release in another
            // rollout tries it again.
            if let Some((release, n)) = self
                .store
                .runner_release_of(org, &target.install_id)
                .await?
                && release == target.release_id
                && n >= doc.targets[i].tries
            {
                doc.targets[i].tries = n + 1;
            }
            self.store
                .save_rollout(
                    org,
                    &RolloutSave::of(&doc, [i]),
                    &[(target.install_id.clone(), target.release_id.clone())],
                )
                .await?;
            // Its parked claim answers now with the new settings version.
            self.notifier.job_queued(&runner_id);
            tracing::info!(rollout = %r.id, install = %target.install, wave = target.wave + 1, "rollout asks an install's runner to update");
        }
        doc.version += 1;
        Ok(doc)
    }

    /// Records that install `i` could not start, and why.
    async fn not_started(
        &self,
        org: &OrgId,
        r: &mut RolloutInfo,
        i: usize,
        why: EngineError,
    ) -> Result<()> {
        tracing::warn!(rollout = %r.id, install = %r.targets[i].install, error = %why, "a rollout's deploy could not start");
        r.not_started(i, why.to_string(), now_ms());
        r.updated_at_ms = now_ms();
        self.store
            .save_rollout(org, &RolloutSave::of(r, [i]), &[])
            .await?;
        r.version += 1;
        Ok(())
    }
}
