//! What became of each install a rollout is moving: its workflow, its
//! runner (a runner rollout) or its health while it bakes.

use std::collections::HashMap;

use nuon_core::model::{CheckState, HealthStatus, RunnerHealth, RunnerStatus};
use nuon_core::rollout::{RolloutInfo, RolloutTarget, Seen};
use nuon_core::workflow::WorkflowStatus;
use nuon_core::{OrgId, WorkflowId, now_ms};

use super::rollouts::RUNNER_UPDATE_BOUND_MS;
use super::{Engine, Result};

impl Engine {
    /// What became of an install's runner since it was asked for a
    /// runner release: on it and healthy, the failure it reported, or
    /// nothing yet. `versions` keeps each release's version.
    pub(super) async fn runner_seen(
        &self,
        org: &OrgId,
        t: &RolloutTarget,
        versions: &mut HashMap<nuon_core::ReleaseId, String>,
    ) -> Result<Seen> {
        if !versions.contains_key(&t.release_id) {
            match self
                .store
                .get_runner_release(org, t.release_id.as_str())
                .await?
            {
                Some(rel) => versions.insert(t.release_id.clone(), rel.version),
                None => {
                    return Ok(Seen::Failed(format!(
                        "runner release {} is gone",
                        t.release_id
                    )));
                }
            };
        }
        let version = &versions[&t.release_id];
        let Some(install) = self.store.find_install(org, t.install_id.as_str()).await? else {
            return Ok(Seen::Failed(format!("install {} is gone", t.install)));
        };
        let Some(runner) = self
            .store
            .find_runner(org, install.runner_id.as_str())
            .await?
        else {
            return Ok(Seen::Failed("its runner is gone".into()));
        };
        if let Some(f) = runner
            .telemetry
            .as_ref()
            .and_then(|t| t.update_failed.as_ref())
            && f.release_id == t.release_id
            && f.tries == t.tries
        {
            return Ok(Seen::Failed(format!(
                "its runner did not take version {version}: {}",
                f.reason
            )));
        }
        let now = now_ms();
        let on = runner.session.as_ref().and_then(|s| s.version.clone());
        let healthy =
            self.ops.health(runner.revoked, runner.last_seen_at_ms, now) == RunnerHealth::Healthy;
        if on.as_deref() == Some(version.as_str()) && healthy {
            return Ok(Seen::Succeeded(now));
        }
        let asked = t.started_at_ms.unwrap_or(now);
        if now - asked > RUNNER_UPDATE_BOUND_MS {
            return Ok(Seen::Failed(format!(
                "its runner is still on version {} {} minutes after it was asked for {version}, and reported nothing (is it running? a long job keeps it draining)",
                on.as_deref().unwrap_or("unknown"),
                (now - asked) / 60_000
            )));
        }
        Ok(Seen::Going)
    }

    /// What became of a running install's workflow.
    pub(super) async fn workflow_seen(&self, org: &OrgId, id: Option<&WorkflowId>) -> Result<Seen> {
        let Some(id) = id else {
            return Ok(Seen::Failed("it has no workflow".into()));
        };
        let Some(wf) = self.store.get_workflow(org, id).await? else {
            return Ok(Seen::Failed(format!("its workflow {id} is gone")));
        };
        Ok(match wf.status {
            s if s.is_active() => Seen::Going,
            WorkflowStatus::Succeeded => Seen::Succeeded(wf.finished_at_ms.unwrap_or_else(now_ms)),
            status => {
                let step = wf
                    .steps
                    .iter()
                    .find(|s| {
                        matches!(
                            s.status,
                            nuon_core::workflow::StepStatus::Failed
                                | nuon_core::workflow::StepStatus::Denied
                        )
                    })
                    .map(|s| {
                        format!(
                            ": {} {}{}",
                            s.name,
                            s.status,
                            s.reason
                                .as_deref()
                                .map(|r| format!(" ({r})"))
                                .unwrap_or_default()
                        )
                    })
                    .unwrap_or_default();
                Seen::Failed(format!("workflow {id} ended {status}{step}"))
            }
        })
    }

    /// Whether a baking install stays healthy: its runner calls and its
    /// components' last deploys and health-check actions pass.
    pub(super) async fn bake_seen(&self, org: &OrgId, r: &RolloutInfo, i: usize) -> Result<Seen> {
        let t = &r.targets[i];
        let Some(install) = self.store.find_install(org, t.install_id.as_str()).await? else {
            return Ok(Seen::Failed(format!("install {} is gone", t.install)));
        };
        let (_, config) = self
            .app_config(org, &install.app_id, install.config_version)
            .await?;
        let runner = self
            .store
            .find_runner(org, install.runner_id.as_str())
            .await?
            .map(|mut runner| {
                let now = now_ms();
                runner.status = match self.ops.health(runner.revoked, runner.last_seen_at_ms, now) {
                    nuon_core::model::RunnerHealth::Healthy => RunnerStatus::Connected,
                    _ => RunnerStatus::Gone,
                };
                runner
            });
        let workflows = self.store.list_workflows(org, &install.id).await?;
        let summary = crate::health::WorkflowSummary::of(&workflows);
        let health =
            crate::health::health_of(&config, &install, runner.as_ref(), &summary, now_ms());
        if health.status == HealthStatus::Healthy {
            return Ok(Seen::Going);
        }
        let why: Vec<String> = health
            .checks
            .iter()
            .filter(|c| !matches!(c.status, CheckState::Ok | CheckState::Unknown))
            .map(|c| {
                let detail = c.detail.clone().unwrap_or_else(|| c.status.to_string());
                format!("{} {}: {detail}", c.kind, c.name)
            })
            .collect();
        Ok(Seen::Failed(format!(
            "{} ({})",
            health.status,
            why.join("; ")
        )))
    }
}
