//! A workflow's acts: approve, deny, answer, cancel, retry and skip, each
//! one operation of the Control API, from the API and from the dashboard
//! alike, and how a workflow and a job are shown (sensitive outputs
//! masked).

use crate::engine::Start;
use nuon_core::endpoint::{self as ep, Endpoint, path_of};
use nuon_core::wire::RunnerStatus;
use nuon_core::wire::{
    CreateWorkflow, ErrorCode, InstallOutputs, JobInfo, WorkflowInfo, WorkflowStepInfo,
};
use nuon_core::workflow::ApprovalResponse;
use nuon_core::workflow::WorkflowKind;
use nuon_core::{OrgId, WorkflowId};

use super::apps::decode_config;
use super::{Caller, Services, record, require_admin, require_deployer};
use crate::error::Error;

/// What a person does to a workflow (at `step`, or the one waiting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WorkflowAct {
    /// With `all`, the later steps that would ask too, each recorded in
    /// the audit trail as its own approval.
    Approve {
        /// Whether the rest of the workflow is approved with it.
        all: bool,
    },
    /// Refuse the step: the workflow fails.
    Deny,
    /// Answer an approval that asks for one.
    Respond(ApprovalResponse),
    /// Stop the workflow.
    Cancel,
    /// Run a failed step again.
    Retry,
    /// Go on past a failed step.
    Skip,
}

impl Services<'_> {
    /// `POST /v1/workflows/{id}/approve` and the other acts: done by the
    /// engine, for deployers and admins; recorded in the audit trail under
    /// the act's operation, refusals included. The workflow after.
    pub(crate) async fn act_on_workflow(
        &self,
        caller: &Caller,
        raw: &str,
        act: WorkflowAct,
        step: Option<String>,
    ) -> Result<WorkflowInfo, Error> {
        let result = self.act(caller, raw, act, step).await;
        match act {
            WorkflowAct::Approve { .. } => {
                self.audited_at::<ep::ApproveWorkflowStep, _>(caller, &[raw], result)
                    .await
            }
            WorkflowAct::Deny => {
                self.audited_at::<ep::DenyWorkflowStep, _>(caller, &[raw], result)
                    .await
            }
            WorkflowAct::Respond(_) => {
                self.audited_at::<ep::RespondToApproval, _>(caller, &[raw], result)
                    .await
            }
            WorkflowAct::Cancel => {
                self.audited_at::<ep::CancelWorkflow, _>(caller, &[raw], result)
                    .await
            }
            WorkflowAct::Retry => {
                self.audited_at::<ep::RetryWorkflow, _>(caller, &[raw], result)
                    .await
            }
            WorkflowAct::Skip => {
                self.audited_at::<ep::SkipWorkflowStep, _>(caller, &[raw], result)
                    .await
            }
        }
    }

    /// [`workflow_view`], and a running step whose job waits for a runner
    /// that is not there says so: "running" would say it runs.
    pub(crate) async fn workflow_live(
        &self,
        org: &OrgId,
        wf: WorkflowInfo,
    ) -> Result<WorkflowInfo, Error> {
        let mut wf = workflow_view(wf);
        if wf.status == nuon_core::workflow::WorkflowStatus::Pending {
            // One workflow at a time writes to an install: say which one this
            // one waits for.
            let ahead = self
                .store
                .list_workflows(org, &wf.install_id)
                .await?
                .into_iter()
                .filter(|w| w.id != wf.id && w.status.is_active())
                .filter(|w| w.created_at_ms <= wf.created_at_ms)
                .min_by_key(|w| w.created_at_ms);
            if let (Some(a), Some(first)) = (ahead, wf.steps.first_mut()) {
                first.reason = Some(format!(
                    "queued behind workflow {} ({}, {}): it starts when that one ends",
                    a.id,
                    format!("{:?}", a.kind).to_lowercase(),
                    a.status
                ));
            }
        }
        for s in &mut wf.steps {
            let Some(job) = s
                .job_id
                .as_ref()
                .filter(|_| s.status == nuon_core::workflow::StepStatus::Running)
            else {
                continue;
            };
            let Some(job) = self.store.get_job(org, job).await? else {
                continue;
            };
            if job.status != nuon_core::JobStatus::Queued {
                continue;
            }
            let Some(r) = self.store.find_runner(org, job.runner_id.as_str()).await? else {
                continue;
            };
            let r = self.runner_view(r);
            let seen = match r.last_seen_at_ms {
                Some(at) => format!(
                    "last seen {} s ago",
                    (nuon_core::now_ms() - at).max(0) / 1000
                ),
                None => "never seen".to_owned(),
            };
            s.reason = match r.status {
                RunnerStatus::Connected => continue,
                RunnerStatus::Revoked => Some(format!(
                    "waiting for runner {}, whose token is revoked: issue it a new one (`nuon runners rotate-token {}`)",
                    r.name, r.name
                )),
                _ => Some(format!(
                    "waiting for runner {} ({seen}): start it, or see `nuon runners list`",
                    r.name
                )),
            };
        }
        Ok(wf)
    }

    /// `POST /v1/installs/{id}/workflows`: starts a workflow, checked
    /// before any job runs (components that deploy, builds, inputs and
    /// secrets its templates read); deployers and admins, destroying an
    /// admin's. Recorded in the audit trail, refusals included.
    pub(crate) async fn start_workflow(
        &self,
        caller: &Caller,
        key: &str,
        req: CreateWorkflow,
    ) -> Result<WorkflowInfo, Error> {
        let result = self.start(caller, key, req).await;
        self.audited_at::<ep::CreateWorkflow, _>(caller, &[key], result)
            .await
    }

    async fn start(
        &self,
        caller: &Caller,
        key: &str,
        req: CreateWorkflow,
    ) -> Result<WorkflowInfo, Error> {
        require_deployer(&caller.principal)?;
        if matches!(req.kind, WorkflowKind::Teardown | WorkflowKind::Deprovision) {
            // Destroying is an admin's.
            require_admin(&caller.principal)?;
        }
        let org = &caller.principal.org_id;
        let install = self.find_install(caller, key).await?;
        let app = self.find_app(caller, install.app_id.as_str()).await?;
        // Destroying works from the config the install was deployed with, so
        // a component a newer config dropped is still torn down; everything
        // else from the app's latest config.
        let destroying = matches!(req.kind, WorkflowKind::Teardown | WorkflowKind::Deprovision);
        if req.only && !(destroying && req.component.is_some()) {
            return Err(Error::bad_request(
                "\"only\" is for a teardown of one component (\"component\"): it leaves the components that depend on it deployed",
            ));
        }
        let deploying = req.kind == WorkflowKind::Deploy;
        if let (false, Some(v)) = (destroying || deploying, req.config_version) {
            return Err(Error::bad_request(format!(
                "\"config_version\" ({v}) is for a deploy, a teardown or a deprovision; a {} uses the app's latest config (sync and build another to change it)",
                format!("{:?}", req.kind).to_lowercase()
            )));
        }
        if req.plan_only && (req.release.is_some() || (deploying && req.config_version.is_some())) {
            return Err(Error::bad_request(
                "a plan-only run plans the install's own config version: deploy a release or a config version without \"plan_only\"",
            ));
        }
        if req.release.is_some() && req.component.is_some() {
            return Err(Error::bad_request(
                "a release deploys every component: drop \"component\" (or deploy one component of the app's latest config)",
            ));
        }
        let release = match &req.release {
            None => None,
            Some(_) if !deploying => {
                return Err(Error::bad_request(
                    "\"release\" is for a deploy (`nuon installs deploy INSTALL --release REL`)",
                ));
            }
            Some(_) if req.config_version.is_some() => {
                return Err(Error::bad_request(
                    "name a release or a config version, not both: a release deploys its own config version",
                ));
            }
            Some(id) => Some(
                self.store
                    .get_release(org, id)
                    .await?
                    .filter(|r| r.app_id == install.app_id)
                    .ok_or_else(|| {
                        Error::not_found(format!(
                            "app {} has no release {id} (`nuon releases list --app {}` lists them)",
                            app.name, app.name
                        ))
                    })?,
            ),
        };
        // A release's config version, one asked for, or (destroying) the one
        // the install was deployed with; else the app's latest.
        let pinned = match (&release, req.config_version) {
            (Some(r), _) => Some(r.config_version),
            (None, Some(v)) => Some(v),
            (None, None) if destroying => Some(install.config_version),
            (None, None) => None,
        };
        let latest = match pinned {
            Some(version) => {
                let stored = self
                    .store
                    .get_config(org, &app.id, Some(version))
                    .await?
                    .ok_or_else(|| match req.config_version {
                        Some(v) => Error::not_found(format!(
                            "app {} has no config version {v} (the install runs {}; `nuon apps configs {}` lists them)",
                            app.name, install.config_version, app.name
                        )),
                        None => Error::not_found(format!(
                            "config v{version} of app {} is gone",
                            app.name
                        )),
                    })?;
                decode_config(self.secrets, &app, stored)?
            }
            None => self.latest_config(caller, &app).await?,
        };
        let wf = self
            .engine
            .start(
                org,
                Start {
                    component: req.component,
                    only: req.only,
                    action: req.action,
                    runbook: req.runbook,
                    inputs: req.inputs,
                    plan_only: req.plan_only,
                    release: release.as_ref(),
                    ..Start::new(
                        &install,
                        &app.name,
                        &latest.config,
                        latest.version,
                        req.kind,
                    )
                },
            )
            .await?;
        self.workflow_live(org, wf).await
    }

    /// `GET /v1/installs/{id}/outputs`: the install's outputs, sensitive
    /// ones masked, with its stack's.
    pub(crate) async fn install_outputs(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<InstallOutputs, Error> {
        let install = self.find_install(caller, key).await?;
        let mut outputs: InstallOutputs = install
            .outputs_json
            .as_deref()
            .and_then(|o| serde_json::from_str(o).ok())
            .unwrap_or_default();
        outputs.install_stack = crate::engine::render::stack_outputs(self.secrets, &install)
            .map_err(|e| Error::refused(ErrorCode::StackOutputsRefused, e))?;
        Ok(outputs.masked())
    }

    async fn act(
        &self,
        caller: &Caller,
        raw: &str,
        act: WorkflowAct,
        step: Option<String>,
    ) -> Result<WorkflowInfo, Error> {
        require_deployer(&caller.principal)?;
        let id: WorkflowId = raw
            .parse()
            .map_err(|_| Error::not_found(format!("no workflow {raw:?}")))?;
        let org = &caller.principal.org_id;
        let (engine, by) = (self.engine, &caller.principal.actor());
        // The steps approved before, to record each one `all` approves.
        let before = match act {
            WorkflowAct::Approve { all: true } => self.store.get_workflow(org, &id).await?,
            _ => None,
        };
        match act {
            WorkflowAct::Approve { all } => engine.approve(org, &id, step, all, by).await?,
            WorkflowAct::Deny => engine.deny(org, &id, step, by).await?,
            WorkflowAct::Respond(r) => engine.respond(org, &id, step, r, by).await?,
            WorkflowAct::Cancel => engine.cancel(org, &id, by).await?,
            WorkflowAct::Retry => engine.retry(org, &id, step, by).await?,
            WorkflowAct::Skip => engine.skip(org, &id, step, by).await?,
        }
        let wf = self
            .store
            .get_workflow(org, &id)
            .await?
            .ok_or_else(|| Error::not_found(format!("no workflow {raw:?}")))?;
        if let Some(before) = before {
            self.record_approved_rest(caller, &before, &wf).await;
        }
        Ok(workflow_view(wf))
    }

    /// Records in the audit trail each later step an approval of the rest
    /// of a workflow approved, as its own approval (the request itself is
    /// recorded as any is): one record per step, as if each were approved
    /// by hand.
    async fn record_approved_rest(
        &self,
        caller: &Caller,
        before: &WorkflowInfo,
        after: &WorkflowInfo,
    ) {
        let newly: Vec<&WorkflowStepInfo> = after
            .steps
            .iter()
            .filter(|s| s.approved_at_ms.is_some())
            .filter(|s| {
                before
                    .steps
                    .iter()
                    .any(|b| b.index == s.index && b.approved_at_ms.is_none())
            })
            .collect();
        // The first is the step the request named (or the one waiting):
        // the request's own record is its.
        for s in newly.iter().skip(1) {
            let target = format!(
                "{}?step={}",
                path_of::<ep::ApproveWorkflowStep>(&[after.id.as_str()]),
                s.index
            );
            record(
                self.auditor,
                &caller.principal,
                ep::ApproveWorkflowStep::ID,
                target,
                caller.source.clone(),
                axum::http::StatusCode::OK,
            )
            .await;
        }
    }
}

/// Every value named in `outputs["sensitive"]` shown as `(sensitive)`.
pub(crate) fn mask_sensitive_outputs(outputs: &mut serde_json::Value) {
    let names: Vec<String> = outputs["sensitive"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str().map(str::to_owned))
        .collect();
    for n in names {
        if let Some(v) = outputs.get_mut("outputs").and_then(|o| o.get_mut(&n)) {
            *v = serde_json::Value::String("(sensitive)".into());
        }
    }
}

/// A job as the API shows it: sensitive outputs masked.
pub(crate) fn job_view(mut job: JobInfo) -> JobInfo {
    mask_sensitive_outputs(&mut job.outputs);
    job
}

/// A workflow as the API shows it: sensitive outputs of its steps masked.
pub(crate) fn workflow_view(mut wf: WorkflowInfo) -> WorkflowInfo {
    for s in &mut wf.steps {
        mask_sensitive_outputs(&mut s.outputs);
    }
    wf
}
