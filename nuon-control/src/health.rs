//! An install's health: its runner (there or not, from its last call),
//! each component's last deploy and health probes (`[health]`, as its last
//! health step or the runner's watch since saw them, whichever is newer),
//! the checks they require as last pushed, and each
//! health-check action's last run
//! (an action with a `cron` trigger). Pure: the Control API answers it,
//! and a rollout's bake holds a wave on it.

use nuon_core::WorkflowId;
use nuon_core::app::{AppConfig, ComponentKind};
use nuon_core::wire::{
    CheckState, HealthCheck, HealthStatus, InstallHealth, InstallState, PendingChange, ProbeSeen,
    RunnerInfo, RunnerStatus, SyncStatus, WorkflowInfo,
};
use nuon_core::workflow::{StepKind, StepStatus, WorkflowKind, WorkflowStatus};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;

use nuon_core::model::Install;

fn check(kind: &str, name: &str, status: CheckState) -> HealthCheck {
    HealthCheck {
        kind: kind.into(),
        name: name.into(),
        status,
        detail: None,
        workflow_id: None,
        at_ms: None,
        pending: None,
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
    /// By `COMPONENT/PROBE`: how each of a component's health probes did
    /// in its last health step that ended.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    probes: BTreeMap<String, Ended>,
    /// By component: how its last change ended when it was not applied
    /// (denied, failed, cancelled, or skipped after a denial); `None` when
    /// it was. The drift from desired, until a later deploy applies it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    changes: BTreeMap<String, Option<PendingChange>>,
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
    /// It destroyed what it was about (a teardown's destroy).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    destroyed: bool,
}

/// Makes the workflow summaries of the org's installs `stale` from their
/// workflows and saves each at the revision given with it (read before
/// its workflows were), in one read of their workflows and one write (a
/// thousand installs a read, five hundred a write): what a read does with
/// stale summaries, and what the engine does with the installs whose
/// workflows ended in a pass, so that the overview after a fleet-wide
/// rollout finds every summary current. The summaries, in the order of
/// `stale`.
pub(crate) async fn remake_summaries(
    store: &dyn crate::store::Store,
    org: &nuon_core::OrgId,
    stale: &[(nuon_core::InstallId, i64)],
) -> Result<Vec<(nuon_core::InstallId, WorkflowSummary)>, crate::store::StoreError> {
    let ids: Vec<nuon_core::InstallId> = stale.iter().map(|(i, _)| i.clone()).collect();
    let mut of: std::collections::HashMap<nuon_core::InstallId, Vec<WorkflowInfo>> =
        std::collections::HashMap::with_capacity(stale.len());
    for w in store.installs_workflows(org, &ids).await? {
        of.entry(w.install_id.clone()).or_default().push(w);
    }
    let mut made = Vec::with_capacity(stale.len());
    let mut texts = Vec::with_capacity(stale.len());
    for (install, rev) in stale {
        let s = WorkflowSummary::of(of.get(install).map_or(&[][..], Vec::as_slice));
        let text = crate::store::SummaryText {
            brief: json(&s.brief())?,
            full: json(&s)?,
        };
        texts.push((install.clone(), *rev, text));
        made.push((install.clone(), s));
    }
    store.save_install_summaries(&texts).await?;
    Ok(made)
}

/// JSON of a part of a summary, as a store error when it fails.
fn json<T: Serialize>(v: &T) -> Result<String, crate::store::StoreError> {
    serde_json::to_string(v).map_err(|e| crate::store::StoreError::Invalid(e.to_string()))
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
                    out.changed(w, s);
                    let ended = matches!(s.status, StepStatus::Succeeded | StepStatus::Failed);
                    let (Some(target), true) = (s.target.as_ref(), ended) else {
                        continue;
                    };
                    if s.kind == StepKind::Health {
                        out.probed(&w.id, w.finished_at_ms, target, &s.outputs);
                        continue;
                    }
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
                        destroyed: ok && s.kind == StepKind::Destroy,
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
                        destroyed: false,
                    }
                });
            }
        }
        out
    }
}

impl WorkflowSummary {
    /// Records how a component's change ended, unless a later one of it
    /// already did: applied, or left desired and not deployed.
    fn changed(&mut self, w: &WorkflowInfo, s: &nuon_core::wire::WorkflowStepInfo) {
        let Some(target) = s.target.as_ref() else {
            return;
        };
        if !matches!(s.kind, StepKind::Apply | StepKind::Destroy)
            || self.changes.contains_key(target)
        {
            return;
        }
        let pending = match s.status {
            StepStatus::Succeeded => None,
            StepStatus::Skipped if nuon_core::workflow::nothing_was_there(s) => None,
            // In a workflow still going: what ended before it decides.
            StepStatus::Pending | StepStatus::WaitingApproval | StepStatus::Running
                if w.status.is_active() =>
            {
                return;
            }
            // Denied, failed, cancelled, skipped after a denial, or never
            // reached by a workflow that ended.
            _ => Some(PendingChange {
                status: s.status,
                workflow_id: w.id.clone(),
                at_ms: w.finished_at_ms,
            }),
        };
        self.changes.insert(target.clone(), pending);
    }

    /// Records each probe of a health step's outputs, unless a later
    /// step already did.
    fn probed(
        &mut self,
        workflow: &WorkflowId,
        at_ms: Option<i64>,
        component: &str,
        outputs: &serde_json::Value,
    ) {
        let rounds = outputs["rounds"].as_u64().unwrap_or_default();
        for p in outputs["probes"].as_array().into_iter().flatten() {
            let Some(name) = p["name"].as_str() else {
                continue;
            };
            let passes = p["passes"].as_u64().unwrap_or_default();
            self.probes
                .entry(format!("{component}/{name}"))
                .or_insert_with(|| Ended {
                    workflow_id: workflow.clone(),
                    at_ms,
                    ok: p["ok"].as_bool().unwrap_or(false),
                    destroyed: false,
                    detail: format!(
                        "{}; passed {passes} of {rounds} rounds after the last deploy",
                        p["detail"].as_str().unwrap_or_default()
                    ),
                });
        }
    }

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
            version: SUMMARY_VERSION,
            failed: [
                failed("deploy", &self.deploys),
                failed("sync", &self.syncs),
                failed("action", &self.actions),
                failed("probe", &self.probes),
            ]
            .concat(),
            probed_at: self
                .probes
                .iter()
                .map(|(name, e)| (name.clone(), e.at_ms.unwrap_or(i64::MAX)))
                .collect(),
            pending: self
                .changes
                .iter()
                .filter(|(_, p)| p.is_some())
                .map(|(name, _)| name.clone())
                .collect(),
            waiting: self.waiting.clone(),
        }
    }
}

/// An install's summary as the dashboard's overview reads it: the brief
/// of every install, the whole only of those it shows.
#[derive(Clone)]
pub(crate) struct InstallSummary {
    /// What decides its health status.
    pub(crate) brief: Brief,
    full: Full,
}

#[derive(Clone)]
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
        let brief: Brief = serde_json::from_str(brief).ok()?;
        (brief.version == SUMMARY_VERSION).then_some(InstallSummary {
            brief,
            full: Full::Stored(full),
        })
    }

    /// The whole summary (empty if what is stored does not read: the
    /// next change of a workflow makes it again).
    pub(crate) fn full(&self) -> WorkflowSummary {
        match &self.full {
            Full::Made(s) => s.clone(),
            Full::Stored(json) => serde_json::from_str(json).unwrap_or_default(),
        }
    }
}

/// The part of a [`WorkflowSummary`] that decides an install's health
/// status: what last ended failed (`deploy:NAME`, `sync:NAME`,
/// `action:NAME`), and the workflows waiting for an approval.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Brief {
    /// The summary's shape ([`SUMMARY_VERSION`]): one stored by an earlier
    /// version is made again.
    #[serde(default)]
    version: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    failed: Vec<String>,
    /// By `COMPONENT/PROBE`: when its last health step ended (the end of
    /// its workflow; the largest time while that runs), to weigh it
    /// against the runner's watch.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    probed_at: BTreeMap<String, i64>,
    /// The components whose last change is desired and not deployed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pending: Vec<String>,
    /// The workflows with a step waiting for an approval, newest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waiting: Vec<(WorkflowId, WorkflowKind)>,
}

/// The shape of the summaries this version stores: 1 added what each
/// component's last change left pending.
const SUMMARY_VERSION: u32 = 1;

/// The keys of [`Brief::failed`] that count for `install` under `config`:
/// its components that are on (a container image by its sync, the others
/// by their deploy, and each of their health probes), and its
/// health-check actions (a `cron` trigger).
/// Read for every install at every overview: nothing is copied but a
/// probe's name.
fn counted<'a>(
    config: &'a AppConfig,
    install: &'a Install,
) -> impl Iterator<Item = (&'static str, Cow<'a, str>)> + 'a {
    let components = (config.components.iter())
        .filter(|c| install.enabled(c))
        .flat_map(|c| {
            let kind = match c.kind() {
                ComponentKind::ContainerImage => "sync",
                _ => "deploy",
            };
            std::iter::once((kind, Cow::Borrowed(c.name.as_str())))
                .chain(probes_of(c).map(|p| ("probe", Cow::Owned(p))))
        });
    let actions = (config.actions.iter())
        .filter(|a| a.triggers.iter().any(|t| t.kind == "cron"))
        .map(|a| ("action", Cow::Borrowed(a.name.as_str())));
    components.chain(actions)
}

/// A component's health probes, as `COMPONENT/PROBE`.
fn probes_of(c: &nuon_core::app::Component) -> impl Iterator<Item = String> + '_ {
    c.health
        .iter()
        .flat_map(|h| &h.probes)
        .map(|p| format!("{}/{}", c.name, p.name))
}

/// What the runner's watch last saw of `COMPONENT/PROBE`, when it is
/// newer than the last health step (which ended at `deployed_at`; `None`:
/// never, or in a workflow still running, which is newer).
fn watched_since<'a>(
    runner: Option<&'a RunnerInfo>,
    name: &str,
    deployed_at: Option<Option<i64>>,
) -> Option<&'a ProbeSeen> {
    let (component, probe) = name.split_once('/')?;
    let seen = runner?
        .telemetry
        .as_ref()?
        .probes
        .iter()
        .find(|p| p.component == component && p.probe == probe)?;
    let deployed_at = match deployed_at {
        None => i64::MIN,
        Some(at) => at.unwrap_or(i64::MAX),
    };
    (seen.at_ms >= deployed_at).then_some(seen)
}

/// The runner's part of an install's health: `ok`, `offline` or
/// `disabled` (calling, but turned off by the customer).
fn runner_state(runner: Option<&RunnerInfo>) -> CheckState {
    match runner {
        Some(r) if r.status != RunnerStatus::Revoked && r.last_seen_at_ms.is_some() => {
            if r.telemetry.as_ref().is_some_and(|t| t.disabled.is_some()) {
                CheckState::Disabled
            } else if r.status == RunnerStatus::Connected {
                CheckState::Ok
            } else {
                CheckState::Offline
            }
        }
        _ => CheckState::Offline,
    }
}

/// An install's health status, as [`health_of`] says it, from its brief.
pub(crate) fn status_of(
    config: &AppConfig,
    install: &Install,
    runner: Option<&RunnerInfo>,
    brief: &Brief,
) -> HealthStatus {
    let any_failed = counted(config, install).any(|(kind, name)| {
        let failed = || {
            brief
                .failed
                .iter()
                .any(|f| f.split_once(':') == Some((kind, &*name)))
        };
        if kind != "probe" {
            return failed();
        }
        let deployed_at = brief.probed_at.get(&*name).map(|at| Some(*at));
        match watched_since(runner, &name, deployed_at) {
            Some(seen) => !seen.ok,
            None => failed(),
        }
    });
    let any_failed =
        any_failed || pushed_checks(config, install).any(|c| c.status == CheckState::Failed);
    status(install.state, runner_state(runner), any_failed)
}

/// Whether what is desired of `install` is deployed, as [`health_of`]
/// says it, from its brief: a component that is on with a change left
/// pending makes it out of sync.
pub(crate) fn sync_of(config: &AppConfig, install: &Install, brief: &Brief) -> SyncStatus {
    let pending = config
        .components
        .iter()
        .filter(|c| install.enabled(c))
        .any(|c| brief.pending.contains(&c.name));
    if pending || crate::desired::pending_view(install).is_some() {
        SyncStatus::OutOfSync
    } else {
        SyncStatus::InSync
    }
}

/// The checks the install's components that are on require, each as its
/// last push left it (`unknown` when never pushed).
fn pushed_checks<'a>(
    config: &'a AppConfig,
    install: &'a Install,
) -> impl Iterator<Item = HealthCheck> + 'a {
    let names: std::collections::BTreeSet<&String> = config
        .components
        .iter()
        .filter(|c| install.enabled(c))
        .flat_map(|c| nuon_core::app::ComponentHealth::required(c.health.as_ref()))
        .collect();
    names.into_iter().map(|name| {
        let mut k = check("check", name, CheckState::Unknown);
        match install.checks.get(name) {
            None => k.detail = Some("never reported".into()),
            Some(c) => {
                k.status = match c.status {
                    nuon_core::wire::CheckStatus::Healthy => CheckState::Ok,
                    nuon_core::wire::CheckStatus::Unhealthy => CheckState::Failed,
                };
                k.detail = Some(c.detail.clone().unwrap_or_else(|| c.status.as_str().into()));
                k.at_ms = Some(c.at_ms);
            }
        }
        k
    })
}

/// The status from the install's state, the runner's and whether a check
/// failed: an install that is not active is never healthy.
fn status(state: InstallState, runner: CheckState, any_failed: bool) -> HealthStatus {
    if let Some(status) = state.health() {
        return status;
    }
    match runner {
        CheckState::Disabled => HealthStatus::Disabled,
        CheckState::Ok if any_failed => HealthStatus::Unhealthy,
        CheckState::Ok => HealthStatus::Healthy,
        _ => HealthStatus::Offline,
    }
}

/// A check from how something last ended, or `unknown` with `never`.
fn ended_check(kind: &str, name: &str, last: Option<&Ended>, never: &str) -> HealthCheck {
    let mut k = check(kind, name, CheckState::Unknown);
    match last {
        None => k.detail = Some(never.into()),
        Some(e) => {
            k.status = match (e.ok, e.destroyed) {
                (true, true) => CheckState::Absent,
                (true, false) => CheckState::Ok,
                (false, _) => CheckState::Failed,
            };
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
    install: &Install,
    runner: Option<&RunnerInfo>,
    workflows: &WorkflowSummary,
    now_ms: i64,
) -> InstallHealth {
    let mut checks = vec![install_check(install)];
    let mut r = check(
        "runner",
        runner.map_or("(gone)", |r| r.name.as_str()),
        CheckState::Offline,
    );
    r.at_ms = runner.and_then(|r| r.last_seen_at_ms);
    r.status = runner_state(runner);
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
    let runner_status = runner_state(runner);
    checks.push(r);
    // Each component's last deploy or teardown that ended (a container
    // image's: its last sync).
    for c in config.components.iter().filter(|c| install.enabled(c)) {
        let by = match c.kind() {
            ComponentKind::ContainerImage => &workflows.syncs,
            _ => &workflows.deploys,
        };
        let mut k = ended_check("component", &c.name, by.get(&c.name), "never deployed");
        if by.get(&c.name).is_none() {
            k.status = CheckState::Absent;
        }
        if let Some(Some(p)) = workflows.changes.get(&c.name) {
            let detail = k.detail.get_or_insert_default();
            let how = match p.status {
                StepStatus::Denied => "was denied",
                StepStatus::Failed => "failed",
                StepStatus::Cancelled => "was cancelled",
                StepStatus::Skipped => "was skipped after a denial",
                _ => "ended before its apply",
            };
            detail.push_str(&format!(
                "; drift from desired: its last change {how} ({})",
                p.workflow_id
            ));
            k.pending = Some(p.clone());
        }
        checks.push(k);
        // Its health probes, as its last health step or the runner's
        // watch since saw them.
        for p in probes_of(c) {
            let deployed = workflows.probes.get(&p);
            let check = match watched_since(runner, &p, deployed.map(|e| e.at_ms)) {
                Some(seen) => {
                    let state = if seen.ok {
                        CheckState::Ok
                    } else {
                        CheckState::Failed
                    };
                    let mut k = check("probe", &p, state);
                    k.detail = Some(format!("{}; seen by the runner's watch", seen.detail));
                    k.at_ms = Some(seen.at_ms);
                    k
                }
                None => ended_check(
                    "probe",
                    &p,
                    deployed,
                    "not probed since it has had [health]",
                ),
            };
            checks.push(check);
        }
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
    // The checks the vendor's systems push that a component requires.
    checks.extend(pushed_checks(config, install));
    let failed = checks.iter().any(|c| c.status == CheckState::Failed);
    let sync = if checks.iter().any(|c| c.pending.is_some())
        || crate::desired::pending_view(install).is_some()
    {
        SyncStatus::OutOfSync
    } else {
        SyncStatus::InSync
    };
    InstallHealth {
        install: install.name.clone(),
        state: install.state,
        status: status(install.state, runner_status, failed),
        sync,
        checks,
    }
}

/// The install's own check: its state.
fn install_check(install: &Install) -> HealthCheck {
    let (status, detail) = match install.state {
        InstallState::Active => (CheckState::Ok, "active: its last workflow succeeded"),
        InstallState::Failed => (
            CheckState::Failed,
            "failed: its last workflow failed or was stopped part way",
        ),
        InstallState::Created => (CheckState::Absent, "created: never provisioned"),
        InstallState::TornDown => (
            CheckState::Absent,
            "torn down: its components are destroyed, its sandbox stays",
        ),
        InstallState::Deprovisioned => (
            CheckState::Absent,
            "deprovisioned: nothing of it is left in the customer's cloud",
        ),
        s => (CheckState::Unknown, s.as_str()),
    };
    let mut k = check("install", &install.name, status);
    k.detail = Some(match install.state {
        InstallState::Provisioning
        | InstallState::Deploying
        | InstallState::TearingDown
        | InstallState::Deprovisioning => format!("{detail}: a workflow changes it"),
        _ => detail.to_owned(),
    });
    // Values changed and not deployed: said, with what to do.
    if let (Some(p), Some(d)) = (crate::desired::pending_view(install), k.detail.as_mut()) {
        d.push_str(&format!(
            "; drift from desired: {} (apply: `{}`, discard: `{}`)",
            p.summary(),
            p.apply,
            p.discard
        ));
    }
    k
}

#[cfg(test)]
pub(crate) mod tests {
    use nuon_appconfig::parse;
    use nuon_core::app::SourceFile;
    use nuon_core::wire::{HealthStatus, RunnerInfo, RunnerStatus, WorkflowInfo};
    use serde_json::json;

    use super::{InstallSummary, WorkflowSummary, health_of, status_of};
    use nuon_core::model::Install;

    /// An active install of app `app_01M8C0AY87516WYXNY8MS8239D`, its runner
    /// `rnr_01M8C0AY87516WYXNY8MS8239D`.
    pub(crate) fn active_install() -> Install {
        Install {
            id: "ins_01M8C0AY87516WYXNY8MS8239D".parse().unwrap(),
            name: "acme".into(),
            app_id: "app_01M8C0AY87516WYXNY8MS8239D".parse().unwrap(),
            config_version: 1,
            runner_id: "rnr_01M8C0AY87516WYXNY8MS8239D".parse().unwrap(),
            state: nuon_core::model::InstallState::Active,
            inputs_json: "{}".into(),
            sealed_json: "{}".into(),
            outputs_json: None,
            created_at_ms: 0,
            approval: nuon_core::model::ApprovalMode::ApproveAll,
            toggles: Default::default(),
            overrides: Default::default(),
            labels: Default::default(),
            checks: Default::default(),
            stack_outputs: None,
            pending: None,
            pending_rev: 0,
        }
    }

    /// The overview counts by `status_of` (the brief, for every install)
    /// and shows `health_of` (the whole summary): the two must agree, for
    /// every runner state and every mix of what failed, including what
    /// does not count (a component turned off, an action without `cron`).
    #[test]
    fn the_brief_and_the_whole_summary_give_the_same_status() {
        let files = [
            SourceFile::new("metadata.toml", "version = \"v2\"\n"),
            SourceFile::new(
                "components/db.toml",
                "name = \"db\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./db\"\n",
            ),
            SourceFile::new(
                "components/api.toml",
                "name = \"api\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./api\"\n[[health.probes]]\ntype = \"tcp\"\nname = \"port\"\nurl = \"127.0.0.1:9\"\n",
            ),
            SourceFile::new(
                "components/cache.toml",
                "name = \"cache\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./cache\"\ntoggleable = true\ndefault_enabled = false\n",
            ),
            SourceFile::new(
                "actions/check.toml",
                "name = \"check\"\ntimeout = \"1m\"\n[[triggers]]\ntype = \"cron\"\ncron_schedule = \"*/5 * * * *\"\n[[steps]]\nname = \"s\"\ncommand = \"true\"\n",
            ),
            SourceFile::new(
                "actions/poke.toml",
                "name = \"poke\"\ntimeout = \"1m\"\n[[triggers]]\ntype = \"manual\"\n[[steps]]\nname = \"s\"\ncommand = \"true\"\n",
            ),
        ];
        let (config, d) = parse(&files);
        let config = config.unwrap_or_else(|| panic!("{d}"));
        let install = active_install();
        let runner = |status: &str, seen: Option<i64>, disabled: bool| -> RunnerInfo {
            let mut r: RunnerInfo = serde_json::from_value(json!({
                "id": "rnr_01M8C0AY87516WYXNY8MS8239D", "name": "r", "created_at_ms": 0,
                "last_seen_at_ms": seen, "revoked": status == "revoked", "role": "install",
            }))
            .unwrap();
            r.status = match status {
                "connected" => RunnerStatus::Connected,
                "revoked" => RunnerStatus::Revoked,
                _ => RunnerStatus::Gone,
            };
            if disabled {
                r.telemetry = Some(
                    serde_json::from_value(json!({"slots": 1, "busy": 0, "spool_backlog": 0, "disabled": "maintenance"}))
                        .unwrap(),
                );
            }
            r
        };
        // Connected, its watch having seen api's probe at 50.
        let watching = |ok: bool| -> RunnerInfo {
            let mut r = runner("connected", Some(1), false);
            r.telemetry = Some(
                serde_json::from_value(json!({"slots": 1, "busy": 0, "spool_backlog": 0, "probes": [
                    {"component": "api", "probe": "port", "ok": ok, "detail": "connected", "at_ms": 50},
                ]}))
                .unwrap(),
            );
            r
        };
        // A workflow whose steps end as given, and an action's run.
        let deploy = |target: &str, kind: &str, status: &str| -> WorkflowInfo {
            serde_json::from_value(json!({
                "id": "wfl_01M8C0AY87516WYXNY8MS8239D", "install_id": "ins_01M8C0AY87516WYXNY8MS8239D",
                "kind": "deploy", "status": "failed", "config_version": 1, "created_at_ms": 1,
                "steps": [{"index": 0, "name": format!("{kind} {target}"), "kind": kind, "target": target,
                           "needs_approval": false, "status": status, "outputs": null}],
            }))
            .unwrap()
        };
        let action = |name: &str, status: &str| -> WorkflowInfo {
            serde_json::from_value(json!({
                "id": "wfl_01M8C0AY87516WYXNY8MS8239E", "install_id": "ins_01M8C0AY87516WYXNY8MS8239D",
                "kind": "action", "status": status, "component": name, "config_version": 1,
                "created_at_ms": 2, "steps": [],
            }))
            .unwrap()
        };
        // A deploy whose health step saw the probe as `ok`.
        let probe = |target: &str, name: &str, ok: bool| -> WorkflowInfo {
            let mut w = deploy(target, "health", "succeeded");
            w.steps[0].outputs = json!({"rounds": 3, "probes": [
                {"name": name, "ok": ok, "detail": "HTTP 503", "passes": 0, "failures": 3}
            ]});
            w
        };
        // One that ended at `at`.
        let probe_at = |target: &str, ok: bool, at: i64| -> WorkflowInfo {
            let mut w = probe(target, "port", ok);
            w.finished_at_ms = Some(at);
            w
        };
        const DENIED: &str = nuon_core::workflow::StepStatus::Denied.as_str();
        let histories: Vec<(&str, Vec<WorkflowInfo>)> = vec![
            ("nothing yet", vec![]),
            ("db deployed", vec![deploy("db", "apply", "succeeded")]),
            ("db failed", vec![deploy("db", "apply", "failed")]),
            (
                "cache (off) failed",
                vec![deploy("cache", "apply", "failed")],
            ),
            (
                "db's sync failed (db is not an image)",
                vec![deploy("db", "sync", "failed")],
            ),
            ("the cron check failed", vec![action("check", "failed")]),
            ("the manual action failed", vec![action("poke", "failed")]),
            ("api's probe failed", vec![probe("api", "port", false)]),
            ("api's probe passed", vec![probe("api", "port", true)]),
            (
                "a probe the config no longer has failed",
                vec![probe("api", "gone", false)],
            ),
            (
                "api's probe failed, then passed",
                vec![probe("api", "port", true), probe("api", "port", false)],
            ),
            (
                "db failed, then deployed",
                vec![
                    deploy("db", "apply", "succeeded"),
                    deploy("db", "apply", "failed"),
                ],
            ),
            ("api's probe failed at 20", vec![probe_at("api", false, 20)]),
            (
                "api's probe passed at 100",
                vec![probe_at("api", true, 100)],
            ),
            ("api's probe passed at 20", vec![probe_at("api", true, 20)]),
            ("db's change denied", vec![deploy("db", "apply", DENIED)]),
            (
                "db's change skipped after a denial",
                vec![deploy("db", "apply", "skipped")],
            ),
            (
                "db's change denied, then applied",
                vec![
                    deploy("db", "apply", "succeeded"),
                    deploy("db", "apply", DENIED),
                ],
            ),
            ("cache (off) denied", vec![deploy("cache", "apply", DENIED)]),
        ];
        let runners = [
            ("no runner", None),
            ("connected", Some(runner("connected", Some(1), false))),
            ("gone", Some(runner("gone", Some(1), false))),
            ("never called", Some(runner("connected", None, false))),
            ("revoked", Some(runner("revoked", Some(1), false))),
            ("disabled", Some(runner("connected", Some(1), true))),
            ("watching, ok at 50", Some(watching(true))),
            ("watching, failed at 50", Some(watching(false))),
        ];
        let mut seen = std::collections::BTreeSet::new();
        let mut synced = std::collections::BTreeSet::new();
        for state in nuon_core::model::InstallState::ALL {
            let install = Install {
                state: *state,
                ..install.clone()
            };
            for (what, workflows) in &histories {
                let summary = WorkflowSummary::of(workflows);
                // As stored and read back, too.
                let stored = InstallSummary::stored(
                    &serde_json::to_string(&summary.brief()).unwrap(),
                    serde_json::to_string(&summary).unwrap(),
                )
                .unwrap();
                for (who, r) in &runners {
                    let whole = health_of(&config, &install, r.as_ref(), &summary, 10);
                    let brief = status_of(&config, &install, r.as_ref(), &stored.brief);
                    assert_eq!(brief, whole.status, "{what}, runner {who}, {state}");
                    let sync = super::sync_of(&config, &install, &stored.brief);
                    assert_eq!(sync, whole.sync, "{what}, runner {who}, {state}");
                    assert_eq!(whole.state, *state);
                    // Only an active install is healthy.
                    if *state != nuon_core::model::InstallState::Active {
                        assert_ne!(
                            brief,
                            HealthStatus::Healthy,
                            "{what}, runner {who}, {state}"
                        );
                    }
                    seen.insert(brief.as_str());
                    synced.insert((what.to_owned(), sync.as_str()));
                }
                assert_eq!(
                    InstallSummary::stored(
                        &serde_json::to_string(&summary.brief()).unwrap(),
                        serde_json::to_string(&summary).unwrap(),
                    )
                    .unwrap()
                    .full(),
                    summary,
                    "{what}"
                );
            }
        }
        let all: std::collections::BTreeSet<&str> =
            HealthStatus::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(seen, all, "every status is reached");
        // A change denied, skipped after a denial or failed is pending
        // until a later one is applied; one of a component that is off
        // does not count.
        let out_of_sync: std::collections::BTreeSet<&str> = synced
            .iter()
            .filter(|(_, s)| *s == "out_of_sync")
            .map(|(w, _)| *w)
            .collect();
        assert_eq!(
            out_of_sync,
            [
                "db failed",
                "db's change denied",
                "db's change skipped after a denial"
            ]
            .into(),
        );
        // The newer of the last health step and the runner's watch counts;
        // a health step in a workflow still running is the newer.
        let cases = [
            (
                vec![probe_at("api", false, 20)],
                true,
                "healthy",
                "seen by the runner's watch",
            ),
            (
                vec![probe_at("api", true, 100)],
                false,
                "healthy",
                "passed 0 of 3 rounds",
            ),
            (
                vec![probe_at("api", true, 20)],
                false,
                "unhealthy",
                "seen by the runner's watch",
            ),
            (vec![], false, "unhealthy", "seen by the runner's watch"),
            (
                vec![probe("api", "port", true)],
                false,
                "healthy",
                "after the last deploy",
            ),
        ];
        for (workflows, ok, status, said) in cases {
            let summary = WorkflowSummary::of(&workflows);
            let h = health_of(&config, &install, Some(&watching(ok)), &summary, 10);
            assert_eq!(h.status, status, "{h:#?}");
            let port = h.checks.iter().find(|c| c.name == "api/port").unwrap();
            assert!(port.detail.as_deref().unwrap().contains(said), "{h:#?}");
        }
    }
}
