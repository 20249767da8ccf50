//! An install's drift: what the newest drift check of the sandbox and of
//! each component found (drift checks are workflows of kind `drift`,
//! started by `drift_schedule` or by hand), and when each is checked next.

use nuon_core::app::AppConfig;
use nuon_core::cron::Schedule;
use nuon_core::wire::{DriftInfo, DriftStatus, InstallDrift, WorkflowInfo};
use nuon_core::workflow::{SANDBOX, StepKind, WorkflowKind, WorkflowStatus};

use super::{Caller, Services};
use crate::error::Error;

impl Services<'_> {
    /// `GET /v1/installs/{id}/drift`: install `key`'s drift, target by
    /// target, by its app's latest config.
    pub(crate) async fn install_drift(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<InstallDrift, Error> {
        let (install, _, latest) = self.install_app_config(caller, key).await?;
        let workflows = self
            .store
            .list_workflows(&caller.principal.org_id, &install.id)
            .await?;
        Ok(InstallDrift {
            install: install.name.clone(),
            targets: drift_of(&latest.config, &workflows, nuon_core::now_ms()),
        })
    }
}

/// What `wf`, a drift check, found.
fn found(wf: &WorkflowInfo) -> (DriftStatus, serde_json::Value, Option<String>) {
    let plan = wf
        .steps
        .iter()
        .find(|s| matches!(s.kind, StepKind::Plan | StepKind::SandboxPlan));
    match wf.status {
        s if s.is_active() => (DriftStatus::Checking, serde_json::Value::Null, None),
        WorkflowStatus::Succeeded => {
            let changes = plan
                .map(|p| p.outputs["changes"].clone())
                .unwrap_or_default();
            let status = if crate::engine::rules::has_changes(&changes) {
                DriftStatus::Drifted
            } else {
                DriftStatus::InSync
            };
            (status, changes, None)
        }
        _ => {
            let reason = wf
                .steps
                .iter()
                .find_map(|s| s.reason.clone().filter(|_| !s.status.is_passed()));
            (DriftStatus::CheckFailed, serde_json::Value::Null, reason)
        }
    }
}

/// Each target's drift: the sandbox, then the components, each with a
/// schedule or a check of its own.
fn drift_of(config: &AppConfig, workflows: &[WorkflowInfo], now_ms: i64) -> Vec<DriftInfo> {
    let mut targets: Vec<(String, Option<String>)> = Vec::new();
    if let Some(sb) = &config.sandbox {
        targets.push((SANDBOX.into(), sb.drift_schedule.clone()));
    }
    for c in &config.components {
        targets.push((c.name.clone(), c.drift_schedule.clone()));
    }
    targets
        .into_iter()
        .filter_map(|(target, schedule)| {
            // Workflows come newest first.
            let newest = workflows.iter().find(|w| {
                w.kind == WorkflowKind::Drift && w.component.as_deref() == Some(target.as_str())
            });
            if newest.is_none() && schedule.is_none() {
                return None;
            }
            let next_check_ms = schedule
                .as_deref()
                .and_then(|s| s.parse::<Schedule>().ok())
                .and_then(|s| s.next_after(now_ms));
            let (status, changes, reason) = newest.map_or(
                (DriftStatus::NeverChecked, serde_json::Value::Null, None),
                found,
            );
            Some(DriftInfo {
                target,
                status,
                changes,
                workflow_id: newest.map(|w| w.id.clone()),
                checked_at_ms: newest.map(|w| w.created_at_ms),
                reason,
                schedule,
                next_check_ms,
            })
        })
        .collect()
}
