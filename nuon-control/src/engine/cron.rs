//! Cron triggers: the leader starts an action's run when its
//! `cron_schedule` comes due on a provisioned install. Each due time runs
//! once: the store keeps which (install, action, due time) was started,
//! so a leader that takes over never starts a run its predecessor did. A
//! run missed while no replica led (or the control plane was down) still
//! starts if it is at most [`CATCH_UP_MS`] late; older ones are skipped
//! and logged.

use std::collections::HashMap;

use nuon_core::app::AppConfig;
use nuon_core::cron::Schedule;
use nuon_core::workflow::WorkflowKind;
use nuon_core::{AppId, InstallId};

use super::{Engine, EngineError, Result, Start};
use crate::store::StoreError;

/// How late a cron run may still start.
pub(crate) const CATCH_UP_MS: i64 = 15 * 60_000;

/// The due times this replica has tried already, so that a run that cannot
/// start (not built, say) is tried and logged once, not every minute.
#[derive(Default)]
pub(crate) struct Tried(HashMap<(InstallId, String), i64>);

impl Engine {
    /// Starts every cron run due at `now_ms`; returns how many started.
    pub(crate) async fn fire_crons(&self, now_ms: i64, tried: &mut Tried) -> Result<usize> {
        let mut configs: HashMap<(AppId, u32), Option<(String, AppConfig)>> = HashMap::new();
        let mut started = 0;
        for (org, id) in self.store.scheduled_installs().await? {
            let Some(install) = self.store.find_install(&org, id.as_str()).await? else {
                continue;
            };
            let key = (install.app_id.clone(), install.config_version);
            if !configs.contains_key(&key) {
                let loaded = match self.app_config(&org, &key.0, key.1).await {
                    Ok(c) => Some(c),
                    Err(e) => {
                        tracing::warn!(install = %install.id, error = %e, "cannot read the install's config for its cron triggers");
                        None
                    }
                };
                configs.insert(key.clone(), loaded);
            }
            let Some(Some((app_name, config))) = configs.get(&key) else {
                continue;
            };
            for action in &config.actions {
                let due = action
                    .triggers
                    .iter()
                    .filter(|t| t.kind == "cron")
                    .filter_map(|t| t.cron_schedule.as_deref()?.parse::<Schedule>().ok())
                    .filter_map(|s| s.latest_at_or_before(now_ms))
                    .max();
                let Some(due) = due.filter(|d| *d >= install.created_at_ms) else {
                    continue;
                };
                let slot = (install.id.clone(), action.name.clone());
                if tried.0.get(&slot) == Some(&due) {
                    continue;
                }
                tried.0.insert(slot, due);
                if now_ms - due > CATCH_UP_MS {
                    tracing::warn!(install = %install.id, action = %action.name, due, "cron run skipped: it is more than 15 minutes late");
                    continue;
                }
                let start = Start {
                    action: Some(action.name.clone()),
                    trigger: Some("cron"),
                    fire: Some((action.name.clone(), due)),
                    ..Start::new(
                        &install,
                        app_name,
                        config,
                        install.config_version,
                        WorkflowKind::Action,
                    )
                };
                match self.start(&org, start).await {
                    Ok(wf) => {
                        started += 1;
                        tracing::info!(workflow = %wf.id, install = %install.id, action = %action.name, due, "cron run started");
                    }
                    Err(EngineError::Store(StoreError::Conflict {
                        code: "already_started",
                        ..
                    })) => {}
                    Err(e) => {
                        tracing::warn!(install = %install.id, action = %action.name, error = %e, "cron run cannot start")
                    }
                }
            }
        }
        Ok(started)
    }
}
