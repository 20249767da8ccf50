//! An install's health: its runner (there or not, from its last call),
//! each component's last deploy, and each health-check action's last run
//! (an action with a `cron` trigger). Pure: the Control API answers it,
//! and a rollout's bake holds a wave on it.

use nuon_core::app::{AppConfig, ComponentKind};
use nuon_core::wire::{HealthCheck, InstallHealth, RunnerInfo, RunnerStatus, WorkflowInfo};
use nuon_core::workflow::{StepKind, StepStatus, WorkflowKind};

use crate::store::StoredInstall;

fn check(kind: &str, name: &str, status: &str) -> HealthCheck {
    HealthCheck {
        kind: kind.into(),
        name: name.into(),
        status: status.into(),
        detail: None,
        workflow_id: None,
        at_ms: None,
    }
}

/// The health of `install`, from its runner (`status` already derived) and
/// its workflows (newest first).
pub(crate) fn health_of(
    config: &AppConfig,
    install: &StoredInstall,
    runner: Option<&RunnerInfo>,
    workflows: &[WorkflowInfo],
    now_ms: i64,
) -> InstallHealth {
    let mut checks = Vec::new();
    let mut r = check(
        "runner",
        runner.map_or("(gone)", |r| r.name.as_str()),
        "offline",
    );
    r.at_ms = runner.and_then(|r| r.last_seen_at_ms);
    r.detail = Some(match runner.map(|r| (r.status, r.last_seen_at_ms)) {
        None => "the install's runner is not registered".into(),
        Some((RunnerStatus::Revoked, _)) => "its token is revoked".into(),
        Some((_, None)) => "it has never called".into(),
        Some((status, Some(at))) => {
            if status == RunnerStatus::Connected {
                r.status = "ok".into();
            }
            let build = runner
                .and_then(|r| r.session.as_ref())
                .and_then(|s| s.describe_build())
                .map(|b| format!("; {b}"))
                .unwrap_or_default();
            let disabled = runner
                .and_then(|r| r.telemetry.as_ref())
                .and_then(|t| t.disabled.as_ref());
            match disabled {
                Some(why) => {
                    // Calling, but the customer turned it off.
                    r.status = "disabled".into();
                    format!(
                        "disabled by the customer ({why}); last call {} s ago",
                        (now_ms - at).max(0) / 1000
                    )
                }
                None => format!("last call {} s ago{build}", (now_ms - at).max(0) / 1000),
            }
        }
    });
    let online = r.status == "ok";
    let disabled = r.status == "disabled";
    checks.push(r);
    // Each component's last deploy or teardown that ended.
    for c in config.components.iter().filter(|c| install.enabled(c)) {
        let deploys = |s: &nuon_core::wire::WorkflowStepInfo| {
            s.target.as_deref() == Some(c.name.as_str())
                && match c.kind {
                    ComponentKind::ContainerImage => s.kind == StepKind::Sync,
                    _ => matches!(s.kind, StepKind::Apply | StepKind::Destroy),
                }
                && matches!(s.status, StepStatus::Succeeded | StepStatus::Failed)
        };
        let last = workflows
            .iter()
            .filter(|w| w.kind != WorkflowKind::Drift)
            .find_map(|w| w.steps.iter().rev().find(|s| deploys(s)).map(|s| (w, s)));
        let mut k = check("component", &c.name, "unknown");
        match last {
            None => k.detail = Some("never deployed".into()),
            Some((w, s)) => {
                k.workflow_id = Some(w.id.clone());
                k.at_ms = w.finished_at_ms;
                let (status, detail) = match (s.status, s.kind) {
                    (StepStatus::Succeeded, StepKind::Destroy) => ("ok", "torn down".to_owned()),
                    (StepStatus::Succeeded, _) => ("ok", "deployed".to_owned()),
                    _ => (
                        "failed",
                        format!(
                            "{} failed: {}",
                            s.name,
                            s.reason.clone().unwrap_or_default()
                        ),
                    ),
                };
                k.status = status.into();
                k.detail = Some(detail);
            }
        }
        checks.push(k);
    }
    // Each health-check action's last run that ended.
    for a in config
        .actions
        .iter()
        .filter(|a| a.triggers.iter().any(|t| t.kind == "cron"))
    {
        let last = workflows.iter().find(|w| {
            w.kind == WorkflowKind::Action
                && w.component.as_deref() == Some(a.name.as_str())
                && !w.status.is_active()
        });
        let mut k = check("action", &a.name, "unknown");
        match last {
            None => k.detail = Some("never run".into()),
            Some(w) => {
                k.workflow_id = Some(w.id.clone());
                k.at_ms = w.finished_at_ms;
                if w.status == nuon_core::workflow::WorkflowStatus::Succeeded {
                    k.status = "ok".into();
                    k.detail = Some("its last run succeeded".into());
                } else {
                    k.status = "failed".into();
                    let why = w
                        .steps
                        .iter()
                        .find_map(|s| s.reason.clone().filter(|_| s.status == StepStatus::Failed))
                        .unwrap_or_else(|| format!("it ended {}", w.status));
                    k.detail = Some(format!("its last run failed: {why}"));
                }
            }
        }
        checks.push(k);
    }
    let status = if disabled {
        "disabled"
    } else if !online {
        "offline"
    } else if checks.iter().any(|c| c.status == "failed") {
        "unhealthy"
    } else {
        "healthy"
    };
    InstallHealth {
        install: install.name.clone(),
        status: status.into(),
        checks,
    }
}
