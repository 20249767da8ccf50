//! Schedules: the leader starts an action's run when its `cron_schedule`
//! comes due on a provisioned install, and a drift check (a plan that is
//! never applied) of the sandbox or a component when its `drift_schedule`
//! does. A drift check never overlaps another workflow of the install: it
//! queues behind it (and says so in its first step), and a check due while
//! the one before still waits is skipped (and logged). Each due time runs
//! once: the store keeps which (install, action, due time) was started,
//! so a leader that takes over never starts a run its predecessor did. A
//! run missed while no replica led (or the control plane was down) still
//! starts if it is at most [`CATCH_UP_MS`] late; older ones are skipped
//! and logged.

use nuon_core::wire::ErrorCode;
use std::collections::HashMap;

use nuon_core::app::AppConfig;
use nuon_core::cron::Schedule;
use nuon_core::workflow::{SANDBOX, WorkflowKind, WorkflowStatus};
use nuon_core::{AppId, InstallId, OrgId, WorkflowId};

use super::{Engine, EngineError, Result, Start};
use crate::store::StoreError;
use nuon_core::model::Install;

/// How late a cron run may still start.
pub(crate) const CATCH_UP_MS: i64 = 15 * 60_000;

/// The due times this replica has tried already, so that a run that cannot
/// start (not built, say) is tried and logged once, not every minute.
#[derive(Default)]
pub(crate) struct Tried(HashMap<(InstallId, String), i64>);

/// An app's name and one of its config versions, as the engine keeps them.
type Named = (String, std::sync::Arc<AppConfig>);

impl Engine {
    /// A drift check of `target` on the install that has not started yet
    /// (it waits behind another workflow), if any.
    async fn drift_queued(
        &self,
        org: &OrgId,
        install: &InstallId,
        target: &str,
    ) -> Result<Option<WorkflowId>> {
        Ok(self
            .store
            .list_workflows(org, install)
            .await?
            .into_iter()
            .find(|w| {
                w.kind == WorkflowKind::Drift
                    && w.status == WorkflowStatus::Pending
                    && w.component.as_deref() == Some(target)
            })
            .map(|w| w.id))
    }

    /// Opens config `key` into `configs` once a pass (`None` when it does
    /// not open: said once, naming the install that asked for it).
    async fn load_config(
        &self,
        configs: &mut HashMap<(AppId, u32), Option<Named>>,
        org: &OrgId,
        key: &(AppId, u32),
        install: &InstallId,
    ) {
        if configs.contains_key(key) {
            return;
        }
        let loaded = match self.app_config(org, &key.0, key.1).await {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::warn!(%install, error = %e, "cannot read the install's config for its cron triggers");
                None
            }
        };
        configs.insert(key.clone(), loaded);
    }

    /// Starts every cron run due at `now_ms`; returns how many started.
    pub(crate) async fn fire_crons(&self, now_ms: i64, tried: &mut Tried) -> Result<usize> {
        let mut configs: HashMap<(AppId, u32), Option<Named>> = HashMap::new();
        let mut started = 0;
        for s in self.store.scheduled_installs().await? {
            // An install of a config with nothing scheduled is not read
            // (a fleet of 10,000 such installs was 10,000 reads a minute).
            let listed = (s.app_id.clone(), s.config_version);
            self.load_config(&mut configs, &s.org, &listed, &s.id).await;
            if let Some(Some((_, c))) = configs.get(&listed)
                && !schedules_anything(c)
            {
                continue;
            }
            let org = s.org;
            let Some(install) = self.store.find_install(&org, s.id.as_str()).await? else {
                continue;
            };
            let key = (install.app_id.clone(), install.config_version);
            self.load_config(&mut configs, &org, &key, &install.id)
                .await;
            let Some(Some((app_name, config))) = configs.get(&key) else {
                continue;
            };
            // What is scheduled: each action's cron triggers, and each
            // drift check (the sandbox's, and those of components that are
            // on for the install).
            let mut due_runs: Vec<(WorkflowKind, String, Option<i64>)> = Vec::new();
            for action in &config.actions {
                let due = action
                    .triggers
                    .iter()
                    .filter(|t| t.kind == "cron")
                    .filter_map(|t| latest(t.cron_schedule.as_deref(), now_ms))
                    .max();
                due_runs.push((WorkflowKind::Action, action.name.clone(), due));
            }
            if let Some(sb) = &config.sandbox {
                let due = latest(sb.drift_schedule.as_deref(), now_ms);
                due_runs.push((WorkflowKind::Drift, SANDBOX.to_owned(), due));
            }
            for c in config.components.iter().filter(|c| install.enabled(c)) {
                let due = latest(c.drift_schedule.as_deref(), now_ms);
                due_runs.push((WorkflowKind::Drift, c.name.clone(), due));
            }
            for (kind, target, due) in due_runs {
                let Some(due) = due.filter(|d| *d >= install.created_at_ms) else {
                    continue;
                };
                // Drift checks and action runs are kept apart in the store.
                let key = match kind {
                    WorkflowKind::Drift => format!("drift:{target}"),
                    _ => target.clone(),
                };
                let slot = (install.id.clone(), key.clone());
                if tried.0.get(&slot) == Some(&due) {
                    continue;
                }
                tried.0.insert(slot, due);
                if now_ms - due > CATCH_UP_MS {
                    tracing::warn!(install = %install.id, %target, due, "scheduled run skipped: it is more than 15 minutes late");
                    continue;
                }
                if kind == WorkflowKind::Drift
                    && let Some(w) = self.drift_queued(&org, &install.id, &target).await?
                {
                    tracing::info!(install = %install.id, %target, due, waiting = %w, "drift check skipped: the one before it still waits to run");
                    continue;
                }
                let (action, component, trigger) = match kind {
                    WorkflowKind::Drift => (None, Some(target.clone()), "drift"),
                    _ => (Some(target.clone()), None, "cron"),
                };
                let start = Start {
                    action,
                    component,
                    trigger: Some(trigger),
                    fire: Some((key, due)),
                    ..Start::new(&install, app_name, config, install.config_version, kind)
                };
                match self.start(&org, start).await {
                    Ok(wf) => {
                        started += 1;
                        tracing::info!(workflow = %wf.id, install = %install.id, %target, due, "{trigger} run started");
                    }
                    Err(EngineError::Store(StoreError::Conflict {
                        code: ErrorCode::AlreadyStarted,
                        ..
                    })) => {}
                    Err(e) => {
                        tracing::warn!(install = %install.id, %target, error = %e, "scheduled run cannot start")
                    }
                }
            }
        }
        Ok(started)
    }
}

impl Engine {
    /// Starts the actions of `install` triggered by `trigger`
    /// (`role-enabled` or `role-disabled`: the customer turned a
    /// break-glass role on or off). How many started.
    pub(crate) async fn fire_trigger(
        &self,
        org: &OrgId,
        install: &Install,
        trigger: &'static str,
    ) -> Result<usize> {
        let (app_name, config) = self
            .app_config(org, &install.app_id, install.config_version)
            .await?;
        let mut started = 0;
        for action in config
            .actions
            .iter()
            .filter(|a| a.triggers.iter().any(|t| t.kind == trigger))
        {
            let start = Start {
                action: Some(action.name.clone()),
                trigger: Some(trigger),
                ..Start::new(
                    install,
                    &app_name,
                    &config,
                    install.config_version,
                    WorkflowKind::Action,
                )
            };
            let wf = self.start(org, start).await?;
            tracing::info!(workflow = %wf.id, install = %install.id, action = %action.name, "{trigger} run started");
            started += 1;
        }
        Ok(started)
    }
}

/// The latest due time at or before `now_ms` of a schedule, if any.
fn latest(schedule: Option<&str>, now_ms: i64) -> Option<i64> {
    schedule?
        .parse::<Schedule>()
        .ok()?
        .latest_at_or_before(now_ms)
}

/// Whether a config schedules anything: an action's cron trigger, or a
/// drift check of the sandbox or of a component.
fn schedules_anything(config: &AppConfig) -> bool {
    let cron = config
        .actions
        .iter()
        .any(|a| a.triggers.iter().any(|t| t.kind == "cron"));
    let sandbox = config
        .sandbox
        .as_ref()
        .is_some_and(|s| s.drift_schedule.is_some());
    let components = config.components.iter().any(|c| c.drift_schedule.is_some());
    cron || sandbox || components
}
