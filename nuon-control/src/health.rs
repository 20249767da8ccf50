//! An install's health: its runner (there or not, from its last call),
//! each component's last deploy, and each health-check action's last run
//! (an action with a `cron` trigger). Pure: the Control API answers it,
//! and a rollout's bake holds a wave on it.

use nuon_core::WorkflowId;
use nuon_core::app::{AppConfig, ComponentKind};
use nuon_core::wire::{HealthCheck, InstallHealth, RunnerInfo, RunnerStatus, WorkflowInfo};
use nuon_core::workflow::{StepKind, StepStatus, WorkflowKind, WorkflowStatus};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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

/// What an install's workflows say of its health, without its config or
/// runner: each target's last deploy (or teardown) and last sync that
/// ended, each action's last run that ended, and the workflows that wait
/// for an approval. Small, so the dashboard's overview keeps one per
/// install (`install_summaries`) instead of reading every workflow.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct WorkflowSummary {
    /// By target: its last `apply`/`destroy` step that ended.
    deploys: BTreeMap<String, Ended>,
    /// By target: its last `sync` step that ended.
    syncs: BTreeMap<String, Ended>,
    /// By action: its last run that ended.
    actions: BTreeMap<String, Ended>,
    /// The workflows with a step waiting for an approval, newest first.
    pub waiting: Vec<(WorkflowId, WorkflowKind)>,
}

/// How a step or an action's run ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Ended {
    workflow_id: WorkflowId,
    at_ms: Option<i64>,
    ok: bool,
    detail: String,
}

impl WorkflowSummary {
    /// The summary of an install's workflows (newest first).
    pub(crate) fn of(workflows: &[WorkflowInfo]) -> Self {
        let mut out = Self::default();
        for w in workflows {
            if w.steps
                .iter()
                .any(|s| s.status == StepStatus::WaitingApproval)
            {
                out.waiting.push((w.id.clone(), w.kind));
            }
            if w.kind != WorkflowKind::Drift {
                for s in w.steps.iter().rev() {
                    let ended = matches!(s.status, StepStatus::Succeeded | StepStatus::Failed);
                    let (Some(target), true) = (s.target.as_ref(), ended) else {
                        continue;
                    };
                    let into = match s.kind {
                        StepKind::Sync => &mut out.syncs,
                        StepKind::Apply | StepKind::Destroy => &mut out.deploys,
                        _ => continue,
                    };
                    let ok = s.status == StepStatus::Succeeded;
                    into.entry(target.clone()).or_insert_with(|| Ended {
                        workflow_id: w.id.clone(),
                        at_ms: w.finished_at_ms,
                        ok,
                        detail: match (ok, s.kind) {
                            (true, StepKind::Destroy) => "torn down".into(),
                            (true, _) => "deployed".into(),
                            _ => format!(
                                "{} failed: {}",
                                s.name,
                                s.reason.clone().unwrap_or_default()
                            ),
                        },
                    });
                }
            }
            if let (WorkflowKind::Action, Some(name), false) =
                (w.kind, w.component.as_ref(), w.status.is_active())
            {
                out.actions.entry(name.clone()).or_insert_with(|| {
                    let ok = w.status == WorkflowStatus::Succeeded;
                    let detail = if ok {
                        "its last run succeeded".into()
                    } else {
                        let why = w
                            .steps
                            .iter()
                            .find_map(|s| {
                                s.reason.clone().filter(|_| s.status == StepStatus::Failed)
                            })
                            .unwrap_or_else(|| format!("it ended {}", w.status));
                        format!("its last run failed: {why}")
                    };
                    Ended {
                        workflow_id: w.id.clone(),
                        at_ms: w.finished_at_ms,
                        ok,
                        detail,
                    }
                });
            }
        }
        out
    }
}

impl WorkflowSummary {
    /// What of it decides an install's health status and its waiting
    /// approvals: small, so the overview reads it for every install and
    /// the whole summary only for the installs it shows.
    pub(crate) fn brief(&self) -> Brief {
        let failed = |kind: &str, by: &BTreeMap<String, Ended>| {
            by.iter()
                .filter(|(_, e)| !e.ok)
                .map(|(name, _)| format!("{kind}:{name}"))
                .collect::<Vec<_>>()
        };
        Brief {
            failed: [
                failed("deploy", &self.deploys),
                failed("sync", &self.syncs),
                failed("action", &self.actions),
            ]
            .concat(),
            waiting: self.waiting.clone(),
        }
    }
}

/// An install's summary as the dashboard's overview reads it: the brief
/// of every install, the whole only of those it shows.
pub(crate) struct InstallSummary {
    /// What decides its health status.
    pub(crate) brief: Brief,
    full: Full,
}

enum Full {
    /// Made now, from the install's workflows.
    Made(WorkflowSummary),
    /// As stored (JSON), read when asked for.
    Stored(String),
}

impl InstallSummary {
    /// One just made.
    pub(crate) fn made(summary: WorkflowSummary) -> Self {
        InstallSummary {
            brief: summary.brief(),
            full: Full::Made(summary),
        }
    }

    /// One as stored: `None` when its brief does not read (it is made
    /// again).
    pub(crate) fn stored(brief: &str, full: String) -> Option<Self> {
        Some(InstallSummary {
            brief: serde_json::from_str(brief).ok()?,
            full: Full::Stored(full),
        })
    }

    /// The whole summary (empty if what is stored does not read: the
    /// next change of a workflow makes it again).
    pub(crate) fn full(self) -> WorkflowSummary {
        match self.full {
            Full::Made(s) => s,
            Full::Stored(json) => serde_json::from_str(&json).unwrap_or_default(),
        }
    }
}

/// The part of a [`WorkflowSummary`] that decides an install's health
/// status: what last ended failed (`deploy:NAME`, `sync:NAME`,
/// `action:NAME`), and the workflows waiting for an approval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Brief {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    failed: Vec<String>,
    /// The workflows with a step waiting for an approval, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<(WorkflowId, WorkflowKind)>,
}

/// The keys of [`Brief::failed`] that count for `install` under `config`:
/// its components that are on (a container image by its sync, the others
/// by their deploy), and its health-check actions (a `cron` trigger).
fn counted(
    config: &AppConfig,
    install: &StoredInstall,
) -> impl Iterator<Item = (&'static str, String)> {
    let components = config
        .components
        .iter()
        .filter(|c| install.enabled(c))
        .map(|c| match c.kind {
            ComponentKind::ContainerImage => ("sync", c.name.clone()),
            _ => ("deploy", c.name.clone()),
        })
        .collect::<Vec<_>>();
    let actions = config
        .actions
        .iter()
        .filter(|a| a.triggers.iter().any(|t| t.kind == "cron"))
        .map(|a| ("action", a.name.clone()))
        .collect::<Vec<_>>();
    components.into_iter().chain(actions)
}

/// The runner's part of an install's health: `ok`, `offline` or
/// `disabled` (calling, but turned off by the customer).
fn runner_state(runner: Option<&RunnerInfo>) -> &'static str {
    match runner {
        Some(r) if r.status != RunnerStatus::Revoked && r.last_seen_at_ms.is_some() => {
            if r.telemetry.as_ref().is_some_and(|t| t.disabled.is_some()) {
                "disabled"
            } else if r.status == RunnerStatus::Connected {
                "ok"
            } else {
                "offline"
            }
        }
        _ => "offline",
    }
}

/// An install's health status, as [`health_of`] says it, from its brief.
pub(crate) fn status_of(
    config: &AppConfig,
    install: &StoredInstall,
    runner: Option<&RunnerInfo>,
    brief: &Brief,
) -> &'static str {
    let any_failed = !brief.failed.is_empty()
        && counted(config, install).any(|(kind, name)| {
            brief
                .failed
                .iter()
                .any(|f| f.split_once(':') == Some((kind, name.as_str())))
        });
    status(runner_state(runner), any_failed)
}

/// The status from the runner's state and whether a check failed.
fn status(runner: &str, any_failed: bool) -> &'static str {
    match runner {
        "disabled" => "disabled",
        "ok" if any_failed => "unhealthy",
        "ok" => "healthy",
        _ => "offline",
    }
}

/// A check from how something last ended, or `unknown` with `never`.
fn ended_check(kind: &str, name: &str, last: Option<&Ended>, never: &str) -> HealthCheck {
    let mut k = check(kind, name, "unknown");
    match last {
        None => k.detail = Some(never.into()),
        Some(e) => {
            k.status = if e.ok { "ok" } else { "failed" }.into();
            k.detail = Some(e.detail.clone());
            k.workflow_id = Some(e.workflow_id.clone());
            k.at_ms = e.at_ms;
        }
    }
    k
}

/// The health of `install`, from its runner (`status` already derived) and
/// the summary of its workflows.
pub(crate) fn health_of(
    config: &AppConfig,
    install: &StoredInstall,
    runner: Option<&RunnerInfo>,
    workflows: &WorkflowSummary,
    now_ms: i64,
) -> InstallHealth {
    let mut checks = Vec::new();
    let mut r = check(
        "runner",
        runner.map_or("(gone)", |r| r.name.as_str()),
        "offline",
    );
    r.at_ms = runner.and_then(|r| r.last_seen_at_ms);
    r.status = runner_state(runner).into();
    r.detail = Some(match runner.map(|r| (r.status, r.last_seen_at_ms)) {
        None => "the install's runner is not registered".into(),
        Some((RunnerStatus::Revoked, _)) => "its token is revoked".into(),
        Some((_, None)) => "it has never called".into(),
        Some((_, Some(at))) => {
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
                    format!(
                        "disabled by the customer ({why}); last call {} s ago",
                        (now_ms - at).max(0) / 1000
                    )
                }
                None => format!("last call {} s ago{build}", (now_ms - at).max(0) / 1000),
            }
        }
    });
    let runner = runner_state(runner);
    checks.push(r);
    // Each component's last deploy or teardown that ended (a container
    // image's: its last sync).
    for c in config.components.iter().filter(|c| install.enabled(c)) {
        let by = match c.kind {
            ComponentKind::ContainerImage => &workflows.syncs,
            _ => &workflows.deploys,
        };
        checks.push(ended_check(
            "component",
            &c.name,
            by.get(&c.name),
            "never deployed",
        ));
    }
    // Each health-check action's last run that ended.
    for a in config
        .actions
        .iter()
        .filter(|a| a.triggers.iter().any(|t| t.kind == "cron"))
    {
        checks.push(ended_check(
            "action",
            &a.name,
            workflows.actions.get(&a.name),
            "never run",
        ));
    }
    let status = status(runner, checks.iter().any(|c| c.status == "failed"));
    InstallHealth {
        install: install.name.clone(),
        status: status.into(),
        checks,
    }
}
