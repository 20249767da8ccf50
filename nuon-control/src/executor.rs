//! The workflow executor: one task that moves every active workflow
//! forward, one step at a time.
//!
//! A workflow's steps run in order. A step is dispatched as a signed job to
//! the install's runner (`sync`, `terraform` or `exec`), with its templates
//! rendered from the install's inputs, secrets and the outputs the sandbox
//! and earlier components reported. An apply that needs an approval waits
//! for one (unless its plan changes nothing). When the job ends, its
//! outputs are kept on the step (a plan's changes) and on the install (an
//! apply's Terraform outputs); a failure fails the workflow, which can be
//! retried from the failed step. Only the oldest active workflow of an
//! install moves; the others queue behind it.
//!
//! Every change to workflow state goes through this task (API requests to
//! approve, deny, cancel or retry are messages to it), so two writers never
//! race on a step. Jobs ending, workflows created and approvals wake it;
//! a one-second tick covers anything missed.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use axum::http::StatusCode;
use nuon_core::app::template::{self, Reference, RenderContext};
use nuon_core::app::{AppConfig, Component, ComponentKind};
use nuon_core::wasm::{WasmAction, WasmJob};
use nuon_core::wire::{BuildInfo, InstallOutputs, JobInfo, WorkflowInfo, WorkflowStepInfo};
use nuon_core::workflow::{
    StepKind, StepStatus, WorkflowKind, WorkflowStatus, applies_a_plan, destroys,
    left_out_by_denial,
};
use nuon_core::{
    AppId, ArtifactRef, ExecJob, HelmAction, HelmJob, HttpBackend, Job, JobId, JobSpec, JobStatus,
    OrgId, RetryPolicy, SyncJob, TerraformAction, TerraformJob, WorkflowId, now_ms,
};
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

use crate::api::SharedState;
use crate::api::apps::{Sealed, seal_context};
use crate::error::Error;
use crate::store::{NewJob, StateToken, StepUpdate, StoredInstall};

/// What an operator asks of a workflow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    Approve,
    Deny,
    Cancel,
    Retry,
}

struct Request {
    org: OrgId,
    workflow: WorkflowId,
    act: Act,
    step: Option<String>,
    reply: oneshot::Sender<Result<(), Error>>,
}

enum Msg {
    Wake,
    Act(Request),
}

/// The handle handlers use to reach the executor task.
pub(crate) struct Executor {
    tx: mpsc::UnboundedSender<Msg>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<Msg>>>,
}

impl Executor {
    pub(crate) fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Executor {
            tx,
            rx: Mutex::new(Some(rx)),
        }
    }

    /// Something changed (a job ended, a workflow was created): look again.
    pub(crate) fn wake(&self) {
        let _ = self.tx.send(Msg::Wake);
    }

    /// Applies `act` to a workflow, in the executor's order.
    pub(crate) async fn act(
        &self,
        org: &OrgId,
        workflow: &WorkflowId,
        act: Act,
        step: Option<String>,
    ) -> Result<(), Error> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Act(Request {
                org: org.clone(),
                workflow: workflow.clone(),
                act,
                step,
                reply,
            }))
            .map_err(|_| shutting_down())?;
        rx.await.map_err(|_| shutting_down())?
    }
}

fn shutting_down() -> Error {
    Error::api(
        StatusCode::SERVICE_UNAVAILABLE,
        "shutting_down",
        "the control plane is shutting down; try again when it is back",
    )
}

/// Runs until the server shuts down.
pub(crate) async fn run(state: SharedState) {
    let Some(mut rx) = state.executor.rx.lock().expect("executor lock").take() else {
        return;
    };
    loop {
        if state.is_leader() {
            advance_all(&state).await;
        }
        let msg = tokio::select! {
            m = rx.recv() => m,
            _ = tokio::time::sleep(Duration::from_secs(1)) => Some(Msg::Wake),
            _ = state.shutting_down() => None,
        };
        let Some(msg) = msg else { return };
        let mut next = Some(msg);
        while let Some(m) = next.take() {
            if let Msg::Act(r) = m {
                let result = act(&state, &r).await;
                // The answer shows what the act set off (the approved
                // step dispatched, the skipped ones, the end).
                if result.is_ok() {
                    if state.is_leader() {
                        advance_all(&state).await;
                    } else {
                        // The leader drives what the act set off.
                        state.wake_executor();
                    }
                }
                let _ = r.reply.send(result);
            }
            next = rx.try_recv().ok();
        }
    }
}

async fn advance_all(state: &SharedState) {
    let active = match state.store.active_workflows().await {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %e, "cannot list active workflows");
            return;
        }
    };
    let mut busy = HashSet::new();
    for (org, id) in active {
        let wf = match state.store.get_workflow(&org, &id).await {
            Ok(Some(wf)) => wf,
            Ok(None) => continue,
            Err(e) => {
                tracing::error!(workflow = %id, error = %e, "cannot load workflow");
                continue;
            }
        };
        // The oldest active workflow of an install moves; the rest queue.
        if !busy.insert(wf.install_id.clone()) {
            continue;
        }
        if let Err(e) = advance(state, &org, wf).await {
            tracing::error!(workflow = %id, error = %e, "workflow did not advance");
        }
    }
}

/// What dispatching needs about a workflow's install and app.
struct Ctx {
    org: OrgId,
    wf: WorkflowInfo,
    install: StoredInstall,
    app_name: String,
    config: AppConfig,
    builds: BTreeMap<String, ArtifactRef>,
}

async fn load(state: &SharedState, org: &OrgId, wf: WorkflowInfo) -> Result<Ctx, Error> {
    let install = state
        .store
        .find_install(org, wf.install_id.as_str())
        .await?
        .ok_or_else(|| Error::not_found(format!("install {} is gone", wf.install_id)))?;
    let (app_name, config) = app_config(state, org, &install.app_id, wf.config_version).await?;
    let builds = latest_builds(state, org, &install.app_id, wf.config_version).await?;
    Ok(Ctx {
        org: org.clone(),
        wf,
        install,
        app_name,
        config,
        builds,
    })
}

/// An app's name and one of its config versions.
pub(crate) async fn app_config(
    state: &SharedState,
    org: &OrgId,
    app: &AppId,
    version: u32,
) -> Result<(String, AppConfig), Error> {
    let app_info = state
        .store
        .find_app(org, app.as_str())
        .await?
        .ok_or_else(|| Error::not_found(format!("app {app} is gone")))?;
    let stored = state
        .store
        .get_config(org, app, Some(version))
        .await?
        .ok_or_else(|| Error::not_found(format!("config version {version} of {app} is gone")))?;
    let config = serde_json::from_str(&stored.config_json)
        .map_err(|e| Error::internal(format!("stored config unreadable: {e}")))?;
    Ok((app_info.name, config))
}

/// The artifact of the newest successful build of each component (and
/// `sandbox`) of a config version.
pub(crate) async fn latest_builds(
    state: &SharedState,
    org: &OrgId,
    app: &AppId,
    version: u32,
) -> Result<BTreeMap<String, ArtifactRef>, Error> {
    let mut out = BTreeMap::new();
    for b in state.store.list_builds(org, app).await? {
        if let BuildInfo {
            status: JobStatus::Succeeded,
            artifact: Some(a),
            config_version,
            component,
            ..
        } = b
            && config_version == version
        {
            out.entry(component).or_insert(a);
        }
    }
    Ok(out)
}

fn outputs_of(install: &StoredInstall) -> InstallOutputs {
    install
        .outputs_json
        .as_deref()
        .and_then(|o| serde_json::from_str(o).ok())
        .unwrap_or_default()
}

/// The install's state while a workflow runs (an action leaves it as is).
fn state_during(cx: &Ctx) -> String {
    match cx.wf.kind {
        WorkflowKind::Provision | WorkflowKind::Reprovision => "provisioning".into(),
        WorkflowKind::Deploy => "deploying".into(),
        WorkflowKind::Teardown => "tearing_down".into(),
        WorkflowKind::Deprovision => "deprovisioning".into(),
        WorkflowKind::Action => cx.install.state.clone(),
    }
}

fn update(status: StepStatus, reason: Option<String>) -> StepUpdate {
    StepUpdate {
        status,
        reason,
        ..StepUpdate::default()
    }
}

async fn advance(state: &SharedState, org: &OrgId, wf: WorkflowInfo) -> Result<(), Error> {
    let id = wf.id.clone();
    let mut cx = match load(state, org, wf.clone()).await {
        Ok(cx) => cx,
        // Its install, app or config is gone: it can never move again, and
        // must not block the install's queue.
        Err(Error::Api {
            status: StatusCode::NOT_FOUND,
            message,
            ..
        }) => {
            if let Some(s) = wf.steps.iter().find(|s| !s.status.is_passed()) {
                state
                    .store
                    .update_step(org, &id, s.index, update(StepStatus::Failed, Some(message)))
                    .await?;
            }
            state
                .store
                .set_workflow_status(org, &id, WorkflowStatus::Failed)
                .await?;
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    if cx.wf.status == WorkflowStatus::Cancelling {
        return finish_cancel(state, &mut cx).await;
    }
    if cx.wf.status == WorkflowStatus::Pending {
        state
            .store
            .set_workflow_status(org, &id, WorkflowStatus::Running)
            .await?;
        cx.wf.status = WorkflowStatus::Running;
        state
            .store
            .set_install_state(org, &cx.install.id, &state_during(&cx))
            .await?;
        tracing::info!(workflow = %id, install = %cx.install.id, kind = ?cx.wf.kind, "workflow started");
    }
    for i in 0..cx.wf.steps.len() {
        let step = cx.wf.steps[i].clone();
        match step.status {
            s if s.is_passed() => continue,
            StepStatus::Running => {
                let Some(job_id) = &step.job_id else {
                    return fail(state, &cx, &step, "the step lost its job".into()).await;
                };
                let job = state
                    .store
                    .get_job(org, job_id)
                    .await?
                    .ok_or_else(|| Error::internal(format!("job {job_id} is gone")))?;
                if !job.status.is_terminal() {
                    return Ok(());
                }
                if job.status != JobStatus::Succeeded {
                    let reason = failure_reason(state, &job).await;
                    return fail(state, &cx, &step, reason).await;
                }
                succeeded(state, &mut cx, i, &job).await?;
            }
            StepStatus::WaitingApproval if step.approved_at_ms.is_none() => return Ok(()),
            StepStatus::Pending if step.needs_approval && step.approved_at_ms.is_none() => {
                if plan_changes_nothing(&cx.wf.steps, i) {
                    state
                        .store
                        .update_step(
                            org,
                            &id,
                            step.index,
                            StepUpdate {
                                status: StepStatus::Pending,
                                reason: Some("the plan changes nothing: no approval needed".into()),
                                approved: Some(true),
                                ..StepUpdate::default()
                            },
                        )
                        .await?;
                    return dispatch_or_fail(state, &cx, &step).await;
                }
                state
                    .store
                    .update_step(
                        org,
                        &id,
                        step.index,
                        update(StepStatus::WaitingApproval, None),
                    )
                    .await?;
                tracing::info!(workflow = %id, step = %step.name, "waiting for approval");
                return Ok(());
            }
            StepStatus::Pending | StepStatus::WaitingApproval => {
                return dispatch_or_fail(state, &cx, &step).await;
            }
            _ => {
                // A failed step: the workflow failed with it.
                state
                    .store
                    .set_workflow_status(org, &id, WorkflowStatus::Failed)
                    .await?;
                return Ok(());
            }
        }
    }
    let skipped = cx
        .wf
        .steps
        .iter()
        .any(|s| s.status == StepStatus::Skipped || s.status == StepStatus::Denied);
    let status = if skipped {
        WorkflowStatus::Partial
    } else {
        WorkflowStatus::Succeeded
    };
    state.store.set_workflow_status(org, &id, status).await?;
    let install_state = match cx.wf.kind {
        WorkflowKind::Deprovision if cx.wf.component.is_none() && !skipped => "deprovisioned",
        WorkflowKind::Action => cx.install.state.as_str(),
        _ => "active",
    };
    state
        .store
        .set_install_state(org, &cx.install.id, install_state)
        .await?;
    tracing::info!(workflow = %id, %status, "workflow ended");
    Ok(())
}

/// Ends a cancel once the job that was running has ended: what it did is
/// recorded (an apply that finished anyway keeps its outputs), locks its
/// Terraform left are released, and the install is free again.
async fn finish_cancel(state: &SharedState, cx: &mut Ctx) -> Result<(), Error> {
    let org = cx.org.clone();
    let mut interrupted = false;
    for i in 0..cx.wf.steps.len() {
        let step = cx.wf.steps[i].clone();
        let Some(job_id) = step
            .job_id
            .clone()
            .filter(|_| step.status == StepStatus::Cancelled)
        else {
            continue;
        };
        let Some(job) = state.store.get_job(&org, &job_id).await? else {
            continue;
        };
        if !job.status.is_terminal() {
            return Ok(());
        }
        if job.status == JobStatus::Succeeded {
            succeeded(state, cx, i, &job).await?;
            continue;
        }
        interrupted |= applies_a_plan(step.kind);
        let reason = failure_reason(state, &job).await;
        state
            .store
            .update_step(
                &org,
                &cx.wf.id,
                step.index,
                update(
                    StepStatus::Cancelled,
                    Some(format!("the workflow was cancelled: {reason}")),
                ),
            )
            .await?;
    }
    state
        .store
        .set_workflow_status(&org, &cx.wf.id, WorkflowStatus::Cancelled)
        .await?;
    let install_state = match cx.wf.kind {
        WorkflowKind::Action => cx.install.state.clone(),
        _ if interrupted => "failed".into(),
        _ => "active".into(),
    };
    state
        .store
        .set_install_state(&org, &cx.install.id, &install_state)
        .await?;
    tracing::info!(workflow = %cx.wf.id, "cancelled");
    Ok(())
}

/// Whether the plan an approval step applies changes nothing.
fn plan_changes_nothing(steps: &[WorkflowStepInfo], i: usize) -> bool {
    let Some(plan) = plan_step_of(steps, i) else {
        return false;
    };
    let c = &plan.outputs["changes"];
    ["add", "change", "destroy"]
        .iter()
        .all(|k| c[*k].as_u64() == Some(0))
}

/// The plan step an apply step `i` applies: the nearest earlier plan of
/// its target.
fn plan_step_of(steps: &[WorkflowStepInfo], i: usize) -> Option<&WorkflowStepInfo> {
    let me = &steps[i];
    steps[..i].iter().rev().find(|s| {
        s.target == me.target
            && matches!(
                s.kind,
                StepKind::Plan
                    | StepKind::DestroyPlan
                    | StepKind::SandboxPlan
                    | StepKind::SandboxDestroyPlan
            )
    })
}

async fn failure_reason(state: &SharedState, job: &JobInfo) -> String {
    let mut reason = job
        .reason
        .clone()
        .unwrap_or_else(|| format!("its job ended {}", job.status));
    match state.store.release_locks_of_job(&job.id).await {
        Ok(released) => {
            for (component, lock) in released {
                reason.push_str(&format!(
                    "; the Terraform state lock of {component} its job held ({}) was released",
                    lock.id
                ));
            }
        }
        Err(e) => reason.push_str(&format!(
            "; the state locks of its job could not be checked ({e}): see `nuon installs state list`"
        )),
    }
    reason
}

async fn fail(
    state: &SharedState,
    cx: &Ctx,
    step: &WorkflowStepInfo,
    reason: String,
) -> Result<(), Error> {
    tracing::warn!(workflow = %cx.wf.id, step = %step.name, %reason, "step failed");
    state
        .store
        .update_step(
            &cx.org,
            &cx.wf.id,
            step.index,
            update(StepStatus::Failed, Some(reason)),
        )
        .await?;
    state
        .store
        .set_workflow_status(&cx.org, &cx.wf.id, WorkflowStatus::Failed)
        .await?;
    state
        .store
        .set_install_state(&cx.org, &cx.install.id, &failed_state(cx))
        .await
        .map_err(Into::into)
}

/// The install's state after a failed workflow (a failed action changes
/// nothing deployed).
fn failed_state(cx: &Ctx) -> String {
    if cx.wf.kind == WorkflowKind::Action {
        cx.install.state.clone()
    } else {
        "failed".into()
    }
}

/// The install's outputs as stored now.
async fn current_outputs(state: &SharedState, cx: &Ctx) -> Result<InstallOutputs, Error> {
    Ok(state
        .store
        .find_install(&cx.org, cx.install.id.as_str())
        .await?
        .map(|i| outputs_of(&i))
        .unwrap_or_default())
}

/// Stores the install's outputs (and keeps them in `cx` for rendering).
async fn store_outputs(
    state: &SharedState,
    cx: &mut Ctx,
    all: &InstallOutputs,
) -> Result<(), Error> {
    let json = serde_json::to_string(all)
        .map_err(|e| Error::internal(format!("cannot encode outputs: {e}")))?;
    state
        .store
        .set_install_outputs(&cx.org, &cx.install.id, &json, &state_during(cx))
        .await?;
    cx.install.outputs_json = Some(json);
    Ok(())
}

/// Records a step's success: its outputs, and an apply's or destroy's
/// effect on the install's outputs.
async fn succeeded(
    state: &SharedState,
    cx: &mut Ctx,
    i: usize,
    job: &JobInfo,
) -> Result<(), Error> {
    let step = cx.wf.steps[i].clone();
    let outputs = job.outputs.clone();
    if applies_a_plan(step.kind) {
        let mut all = current_outputs(state, cx).await?;
        let tf: serde_json::Map<String, Value> = job.outputs["outputs"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        let from = match (step.kind, &step.target) {
            (StepKind::SandboxApply | StepKind::SandboxDestroy, _) => "sandbox".to_owned(),
            (_, Some(c)) => c.clone(),
            (_, None) => "sandbox".to_owned(),
        };
        // What this apply reports replaces what it reported before.
        all.sensitive
            .retain(|n| n.split_once('.').is_none_or(|(f, _)| f != from));
        match (step.kind, &step.target) {
            (StepKind::SandboxApply, _) => all.sandbox = tf,
            (StepKind::SandboxDestroy, _) => all.sandbox.clear(),
            (StepKind::Apply, Some(c)) => {
                all.components.insert(c.clone(), tf);
            }
            (StepKind::Destroy, Some(c)) => {
                all.components.remove(c);
            }
            _ => {}
        }
        if matches!(step.kind, StepKind::SandboxApply | StepKind::Apply) {
            for name in job.outputs["sensitive"].as_array().into_iter().flatten() {
                if let Some(n) = name.as_str() {
                    all.sensitive.push(format!("{from}.{n}"));
                }
            }
        }
        store_outputs(state, cx, &all).await?;
        if let Some(c) = wasm_target(cx, &step) {
            let name = c.name.clone();
            let kept = if step.kind == StepKind::Apply {
                job.outputs["state"].clone()
            } else {
                Value::Null
            };
            keep_plugin_state(state, cx, &name, &kept).await?;
        }
    }
    // An image is deployed by its sync: its place in the install's store
    // is the component's output.
    let image = step.kind == StepKind::Sync
        && step
            .target
            .as_deref()
            .and_then(|t| cx.config.component(t))
            .is_some_and(|c| {
                matches!(
                    c.kind,
                    ComponentKind::ContainerImage | ComponentKind::DockerBuild
                )
            });
    if let (true, Some(c), Ok(a)) = (
        image,
        &step.target,
        serde_json::from_value::<ArtifactRef>(job.outputs["artifact"].clone()),
    ) {
        let mut all = current_outputs(state, cx).await?;
        let mut o = serde_json::Map::new();
        o.insert("repository".into(), Value::String(a.repo.clone()));
        o.insert("digest".into(), Value::String(a.digest.to_string()));
        o.insert(
            "image".into(),
            Value::String(format!("{}@{}", a.repo, a.digest)),
        );
        all.components.insert(c.clone(), o);
        store_outputs(state, cx, &all).await?;
    }
    state
        .store
        .update_step(
            &cx.org,
            &cx.wf.id,
            step.index,
            StepUpdate {
                status: StepStatus::Succeeded,
                reason: step.reason.clone(),
                outputs_json: Some(outputs.to_string()),
                ..StepUpdate::default()
            },
        )
        .await?;
    cx.wf.steps[i].status = StepStatus::Succeeded;
    cx.wf.steps[i].outputs = outputs;
    Ok(())
}

async fn dispatch_or_fail(
    state: &SharedState,
    cx: &Ctx,
    step: &WorkflowStepInfo,
) -> Result<(), Error> {
    let plugin_state = match wasm_target(cx, step) {
        Some(c) if !matches!(step.kind, StepKind::Sync) => plugin_state(state, cx, &c.name).await?,
        _ => None,
    };
    match job_for(state, cx, step, plugin_state) {
        Ok((spec, token)) => {
            let spec_json = serde_json::to_string(&spec)
                .map_err(|e| Error::internal(format!("cannot encode job: {e}")))?;
            let signature = state.signing_key(&cx.org).await?.sign(spec_json.as_bytes());
            let job_id = spec.job_id.clone();
            state
                .store
                .dispatch_step(
                    &cx.org,
                    &cx.wf.id,
                    step.index,
                    NewJob {
                        spec,
                        spec_json,
                        signature,
                    },
                    token,
                )
                .await?;
            state.wake_runner(&cx.install.runner_id);
            tracing::info!(workflow = %cx.wf.id, step = %step.name, job = %job_id, "step dispatched");
            Ok(())
        }
        Err(reason) => fail(state, cx, step, reason).await,
    }
}

/// The `wasm` component a step targets, if it targets one.
fn wasm_target<'a>(cx: &'a Ctx, step: &WorkflowStepInfo) -> Option<&'a Component> {
    step.target
        .as_deref()
        .and_then(|t| cx.config.component(t))
        .filter(|c| c.kind == ComponentKind::Wasm)
}

/// The state a plugin's last apply returned, kept (sealed) beside the
/// install's Terraform states.
async fn plugin_state(
    state: &SharedState,
    cx: &Ctx,
    component: &str,
) -> Result<Option<Value>, Error> {
    let Some((_, sealed)) = state.store.get_state(&cx.install.id, component).await? else {
        return Ok(None);
    };
    let text = state
        .secrets
        .open(
            &sealed,
            &crate::api::state::context(&cx.install.id, component),
        )
        .map_err(|e| Error::internal(format!("the state of {component}: {e}")))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| Error::internal(format!("the state of {component} is not JSON: {e}")))?;
    Ok(Some(v).filter(|v| !v.is_null()))
}

/// Keeps what a plugin's apply (or destroy: `null`) left as its state.
async fn keep_plugin_state(
    state: &SharedState,
    cx: &Ctx,
    component: &str,
    value: &Value,
) -> Result<(), Error> {
    let sealed = state.secrets.seal(
        &value.to_string(),
        &crate::api::state::context(&cx.install.id, component),
    );
    match state
        .store
        .put_state(&cx.install.id, component, None, sealed)
        .await?
    {
        Ok(_) => Ok(()),
        Err(lock) => Err(Error::conflict(
            "state_locked",
            format!("the state of {component} is locked by {}", lock.id),
        )),
    }
}

/// An install's sensitive inputs and secrets, unsealed.
type Unsealed = (BTreeMap<String, String>, BTreeMap<String, String>);

fn unseal(state: &SharedState, install: &StoredInstall) -> Result<Unsealed, String> {
    let sealed: Sealed =
        serde_json::from_str(&install.sealed_json).map_err(|e| format!("stored secrets: {e}"))?;
    let open = |kind: &str, name: &str, s: &str| {
        state
            .secrets
            .open(s, &seal_context(&install.id, kind, name))
            .map_err(|e| format!("{kind} {name:?}: {e}"))
    };
    let mut inputs = BTreeMap::new();
    for (name, s) in &sealed.inputs {
        inputs.insert(name.clone(), open("input", name, s)?);
    }
    let mut secrets = BTreeMap::new();
    for (name, s) in &sealed.secrets {
        secrets.insert(name.clone(), open("secret", name, s)?);
    }
    Ok((inputs, secrets))
}

/// The values a job's log must not show: the install's sensitive inputs
/// and secrets.
fn redactions(state: &SharedState, install: &StoredInstall) -> Result<Vec<String>, String> {
    let (inputs, secrets) = unseal(state, install)?;
    Ok(inputs
        .into_values()
        .chain(secrets.into_values())
        .chain(outputs_of(install).sensitive_values())
        .collect())
}

/// The install's values for templates.
pub(crate) fn render_context(
    state: &SharedState,
    org: &OrgId,
    install: &StoredInstall,
    app_name: &str,
) -> Result<RenderContext, String> {
    let mut inputs: BTreeMap<String, Value> =
        serde_json::from_str(&install.inputs_json).map_err(|e| format!("stored inputs: {e}"))?;
    let (sensitive, secrets) = unseal(state, install)?;
    for (name, v) in sensitive {
        inputs.insert(name, Value::String(v));
    }
    let outputs = outputs_of(install);
    Ok(RenderContext {
        install_id: install.id.to_string(),
        install_name: install.name.clone(),
        app_id: install.app_id.to_string(),
        app_name: app_name.to_owned(),
        org_id: org.to_string(),
        inputs,
        sandbox_outputs: Value::Object(outputs.sandbox),
        component_outputs: outputs
            .components
            .into_iter()
            .map(|(k, v)| (k, Value::Object(v)))
            .collect(),
        secrets,
    })
}

/// Renders every string in `v`. A template that renders to nothing is an
/// error: a Terraform variable set to "" by accident deploys wrong.
fn render_value(v: &Value, ctx: &RenderContext, what: &str) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => Value::String(render_text(s, ctx, what)?),
        Value::Array(a) => Value::Array(
            a.iter()
                .enumerate()
                .map(|(i, x)| render_value(x, ctx, &format!("{what}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| Ok((k.clone(), render_value(x, ctx, &format!("{what}.{k}"))?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

fn render_text(s: &str, ctx: &RenderContext, what: &str) -> Result<String, String> {
    let out = template::render(s, ctx).map_err(|e| format!("{what}: {}", e.message))?;
    if out.trim().is_empty() && s.contains("{{") {
        return Err(format!(
            "{what}: {s:?} renders to nothing; give the value it reads (an input, secret or output) a value"
        ));
    }
    Ok(out)
}

/// Checks, before a workflow starts, that every input and secret its
/// templates read has a value (outputs are known only as it runs).
pub(crate) fn precheck_templates(
    config: &AppConfig,
    ctx: &RenderContext,
    targets: &BTreeSet<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut check = |what: String, text: &str| {
        let (actions, _) = template::scan(text);
        for a in actions {
            if a.default.is_some() {
                continue;
            }
            let missing = match &a.reference {
                Reference::Input(n) => ctx
                    .inputs
                    .get(n)
                    .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
                    .then(|| format!("input {n:?} has no value (set it with `nuon installs inputs set`)")),
                Reference::Secret(n) => ctx
                    .secrets
                    .get(n)
                    .is_none_or(|v| v.is_empty())
                    .then(|| format!("secret {n:?} has no value (give it with `nuon installs create --secret {n}=...`)")),
                _ => None,
            };
            if let Some(m) = missing {
                problems.push(format!("{what}: {} renders to nothing: {m}", a.written));
            }
        }
    };
    let mut strings =
        |who: &str, vars: &BTreeMap<String, Value>, env: &BTreeMap<String, String>| {
            for (k, v) in vars {
                for s in strings_of(v) {
                    check(format!("{who} var {k}"), s);
                }
            }
            for (k, v) in env {
                check(format!("{who} env var {k}"), v);
            }
        };
    if let Some(sb) = &config.sandbox
        && targets.contains("sandbox")
    {
        strings("sandbox", &sb.vars, &sb.env_vars);
    }
    for c in config
        .components
        .iter()
        .filter(|c| targets.contains(&c.name))
    {
        strings(&format!("component {}", c.name), &c.vars, &c.env_vars);
    }
    problems
}

fn strings_of(v: &Value) -> Vec<&str> {
    match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().flat_map(strings_of).collect(),
        Value::Object(m) => m.values().flat_map(strings_of).collect(),
        _ => Vec::new(),
    }
}

/// Whether a component deploys through a plugin that exists now.
pub(crate) fn deployable(c: &Component) -> Result<(), String> {
    match c.kind {
        ComponentKind::TerraformModule
        | ComponentKind::ContainerImage
        | ComponentKind::DockerBuild
        | ComponentKind::HelmChart => Ok(()),
        ComponentKind::Wasm => c
            .capabilities
            .as_ref()
            .map(|v| {
                nuon_core::wasm::Capabilities::from_value(
                    v,
                    &format!("component {:?} [capabilities]", c.name),
                )
            })
            .transpose()
            .map(|_| ()),
    }
}

/// Renders every value of `m` (`what KEY` in errors).
fn render_map(
    m: &BTreeMap<String, Value>,
    ctx: &RenderContext,
    what: &str,
) -> Result<BTreeMap<String, Value>, String> {
    m.iter()
        .map(|(k, v)| Ok((k.clone(), render_value(v, ctx, &format!("{what} {k}"))?)))
        .collect()
}

/// Renders each text of `v` (`what N` in errors).
fn render_texts(v: &[String], ctx: &RenderContext, what: &str) -> Result<Vec<String>, String> {
    v.iter()
        .enumerate()
        .map(|(i, t)| render_text(t, ctx, &format!("{what} {i}")))
        .collect()
}

/// What a plan or apply deploys: the artifact its workflow synced (so a
/// newer build of the same config version cannot slip in between), or
/// the build's.
fn synced_artifact(cx: &Ctx, step: &WorkflowStepInfo, target: &str) -> Result<ArtifactRef, String> {
    let synced = cx.wf.steps.iter().rev().find(|s| {
        s.target == step.target
            && matches!(s.kind, StepKind::Sync | StepKind::SandboxSync)
            && s.status == StepStatus::Succeeded
            && s.index < step.index
    });
    match synced {
        Some(s) => serde_json::from_value(s.outputs["artifact"].clone())
            .map_err(|e| format!("the sync of {target} reported no artifact: {e}")),
        None => artifact(cx, target),
    }
}

/// The module of a step's target: its build's artifact.
fn artifact(cx: &Ctx, target: &str) -> Result<ArtifactRef, String> {
    cx.builds.get(target).cloned().ok_or_else(|| {
        format!(
            "{target} has no successful build of config version {}: run `nuon builds create --app {}`",
            cx.wf.config_version, cx.app_name
        )
    })
}

fn timeout_of(text: Option<&str>, default: Duration) -> Result<u64, String> {
    match text {
        Some(t) => nuon_core::parse_duration(t)
            .map(|d| d.as_secs().max(1))
            .map_err(|e| format!("timeout {t:?}: {e}")),
        None => Ok(default.as_secs()),
    }
}

/// The job spec of a step, and the state token its Terraform gets.
fn job_for(
    state: &SharedState,
    cx: &Ctx,
    step: &WorkflowStepInfo,
    plugin_state: Option<Value>,
) -> Result<(JobSpec, Option<StateToken>), String> {
    let target = step.target.clone().unwrap_or_else(|| "sandbox".into());
    // Sync jobs render nothing: only the others carry values to redact.
    let redact = if matches!(step.kind, StepKind::Sync | StepKind::SandboxSync) {
        Vec::new()
    } else {
        redactions(state, &cx.install)?
    };
    let spec = |kind: &str, payload: Value, timeout_secs: u64| JobSpec {
        job_id: JobId::generate(),
        org_id: cx.org.clone(),
        runner_id: cx.install.runner_id.clone(),
        kind: kind.into(),
        payload,
        timeout_secs,
        retry: RetryPolicy { max_attempts: 1 },
        created_at_ms: now_ms(),
        redact: redact.clone(),
    };
    match step.kind {
        StepKind::Sync | StepKind::SandboxSync => {
            let job = SyncJob {
                artifact: artifact(cx, &target)?,
            };
            Ok((spec(SyncJob::KIND, encode(&job)?, 600), None))
        }
        StepKind::Action => {
            let action = cx
                .config
                .actions
                .iter()
                .find(|a| a.name == target)
                .ok_or_else(|| {
                    format!(
                        "action {target:?} is not in config version {}",
                        cx.wf.config_version
                    )
                })?;
            let ctx = render_context(state, &cx.org, &cx.install, &cx.app_name)?;
            let mut script = String::from("set -e\n");
            let mut env = BTreeMap::new();
            for s in &action.steps {
                let what = format!("action {} step {}", action.name, s.name);
                let body = s
                    .command
                    .as_deref()
                    .or(s.inline_contents.as_deref())
                    .ok_or_else(|| format!("{what} has neither command nor inline_contents"))?;
                script.push_str(&format!("echo '--- {}'\n", s.name.replace('\'', "")));
                script.push_str(&render_text(body, &ctx, &what)?);
                script.push('\n');
                for (k, v) in &s.env_vars {
                    env.insert(k.clone(), render_text(v, &ctx, &format!("{what} env {k}"))?);
                }
            }
            let job = ExecJob {
                command: "sh".into(),
                args: vec!["-c".into(), script],
                env,
                dir: None,
            };
            let timeout = timeout_of(Some(&action.timeout), Duration::from_secs(600))?;
            Ok((spec(ExecJob::KIND, encode(&job)?, timeout), None))
        }
        kind if wasm_target(cx, step).is_some() => {
            let c = wasm_target(cx, step).expect("matched");
            let ctx = render_context(state, &cx.org, &cx.install, &cx.app_name)?;
            let who = format!("component {target}");
            let empty = Value::Object(Default::default());
            let config = render_value(
                c.config.as_ref().unwrap_or(&empty),
                &ctx,
                &format!("{who} config"),
            )?;
            let grant = nuon_core::wasm::Capabilities::from_value(
                c.capabilities.as_ref().unwrap_or(&empty),
                &format!("{who} [capabilities]"),
            )?;
            let (_, secrets) = unseal(state, &cx.install)?;
            let mut granted = BTreeMap::new();
            for name in &grant.secrets {
                let v = secrets.get(name).ok_or_else(|| {
                    format!("{who} grants secret {name:?}, which the install does not have")
                })?;
                granted.insert(name.clone(), v.clone());
            }
            let action = match kind {
                StepKind::Plan => WasmAction::Plan,
                StepKind::Apply => WasmAction::Apply,
                StepKind::DestroyPlan => WasmAction::DestroyPlan,
                _ => WasmAction::Destroy,
            };
            let plan = if applies_a_plan(kind) {
                Some(planned(cx, step)?.outputs["plan"].clone())
            } else {
                None
            };
            let job = WasmJob {
                action,
                plugin: synced_artifact(cx, step, &target)?,
                config,
                grant,
                state: plugin_state,
                plan,
                secrets: granted,
            };
            let timeout = timeout_of(c.deploy_timeout.as_deref(), Duration::from_secs(3600))?;
            Ok((spec(WasmJob::KIND, encode(&job)?, timeout), None))
        }
        kind if step
            .target
            .as_deref()
            .and_then(|t| cx.config.component(t))
            .is_some_and(|c| c.kind == ComponentKind::HelmChart) =>
        {
            let c = cx
                .config
                .component(&target)
                .ok_or_else(|| format!("component {target:?} is gone"))?;
            let ctx = render_context(state, &cx.org, &cx.install, &cx.app_name)?;
            let who = format!("component {target}");
            let values = render_map(&c.values, &ctx, &format!("{who} value"))?;
            let values_files = render_texts(&c.values_files, &ctx, &format!("{who} values file"))?;
            let chart = synced_artifact(cx, step, &target)?;
            let action = match kind {
                StepKind::Plan => HelmAction::Plan,
                StepKind::Apply => HelmAction::Apply,
                StepKind::DestroyPlan => HelmAction::DestroyPlan,
                _ => HelmAction::Destroy,
            };
            let release: String = c
                .chart_name
                .clone()
                .unwrap_or_else(|| c.name.clone())
                .to_ascii_lowercase()
                .replace('_', "-");
            let job = HelmJob {
                action,
                chart,
                release,
                namespace: c.namespace.clone().unwrap_or_else(|| "default".into()),
                values,
                values_files,
                kubeconfig: ctx
                    .sandbox_outputs
                    .get("kubeconfig")
                    .and_then(|k| k.as_str())
                    .map(str::to_owned),
            };
            let timeout = timeout_of(c.deploy_timeout.as_deref(), Duration::from_secs(3600))?;
            Ok((spec(HelmJob::KIND, encode(&job)?, timeout), None))
        }
        kind => {
            let (version, vars, env_vars, var_files, deploy_timeout) =
                if target == "sandbox" && step.target.is_none() {
                    let sb = cx
                        .config
                        .sandbox
                        .as_ref()
                        .ok_or("the app config has no sandbox")?;
                    (
                        Some(sb.terraform_version.clone()),
                        &sb.vars,
                        &sb.env_vars,
                        &sb.var_files,
                        None,
                    )
                } else {
                    let c = cx.config.component(&target).ok_or_else(|| {
                        format!(
                            "component {target:?} is not in config version {}",
                            cx.wf.config_version
                        )
                    })?;
                    deployable(c)?;
                    (
                        c.terraform_version.clone(),
                        &c.vars,
                        &c.env_vars,
                        &c.var_files,
                        c.deploy_timeout.as_deref(),
                    )
                };
            let ctx = render_context(state, &cx.org, &cx.install, &cx.app_name)?;
            let who = if step.target.is_none() {
                "sandbox".to_owned()
            } else {
                format!("component {target}")
            };
            let vars = render_map(vars, &ctx, &format!("{who} var"))?;
            let env = env_vars
                .iter()
                .map(|(k, v)| {
                    Ok((
                        k.clone(),
                        render_text(v, &ctx, &format!("{who} env var {k}"))?,
                    ))
                })
                .collect::<Result<BTreeMap<_, _>, String>>()?;
            let var_files = render_texts(var_files, &ctx, &format!("{who} var file"))?;
            let (action, plan) = if applies_a_plan(kind) {
                let plan_step = planned(cx, step)?;
                let plan: ArtifactRef = serde_json::from_value(plan_step.outputs["plan"].clone())
                    .map_err(|e| {
                    format!("the plan of {} is unreadable: {e}", plan_step.name)
                })?;
                (TerraformAction::Apply, Some(plan))
            } else if destroys(kind) {
                (TerraformAction::DestroyPlan, None)
            } else {
                (TerraformAction::Plan, None)
            };
            let token = nuon_core::token::issue_state_token();
            let backend = HttpBackend {
                address: format!(
                    "{}/v1/runner/state/{target}",
                    state.runner_url().trim_end_matches('/')
                ),
                username: "nuon".into(),
                password: token.secret,
            };
            // The module is the one this workflow synced (a newer build
            // of the same config version does not slip in between).
            let module = synced_artifact(cx, step, &target)?;
            let job = TerraformJob {
                action,
                module,
                terraform_version: version.unwrap_or_else(|| ">= 0.0.0".into()),
                vars,
                env,
                var_files,
                backend: Some(backend),
                plan,
            };
            let timeout = timeout_of(deploy_timeout, Duration::from_secs(3600))?;
            let state_token = StateToken {
                hash: token.hash,
                install_id: cx.install.id.clone(),
                component: target,
            };
            Ok((
                spec(TerraformJob::KIND, encode(&job)?, timeout),
                Some(state_token),
            ))
        }
    }
}

/// The successful plan step an apply or destroy step carries out.
fn planned<'a>(cx: &'a Ctx, step: &WorkflowStepInfo) -> Result<&'a WorkflowStepInfo, String> {
    let i = cx
        .wf
        .steps
        .iter()
        .position(|s| s.index == step.index)
        .unwrap_or(0);
    plan_step_of(&cx.wf.steps, i)
        .filter(|p| p.status == StepStatus::Succeeded)
        .ok_or_else(|| format!("{} has no successful plan to apply", step.name))
}

fn encode<T: serde::Serialize>(v: &T) -> Result<Value, String> {
    serde_json::to_value(v).map_err(|e| format!("cannot encode the job: {e}"))
}

/// Finds the step `key` names (an index or a name), or the one `pick`
/// chooses.
fn find_step<'a>(
    wf: &'a WorkflowInfo,
    key: Option<&str>,
    pick: impl Fn(&WorkflowStepInfo) -> bool,
    what: &str,
) -> Result<&'a WorkflowStepInfo, Error> {
    match key {
        Some(k) => wf
            .steps
            .iter()
            .find(|s| s.name == k || s.index.to_string() == k)
            .ok_or_else(|| {
                Error::not_found(format!(
                    "workflow {} has no step {k:?} (steps: {})",
                    wf.id,
                    wf.steps
                        .iter()
                        .map(|s| s.name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            }),
        None => wf.steps.iter().find(|s| pick(s)).ok_or_else(|| {
            Error::conflict(
                "no_such_step",
                format!("workflow {} has no step {what}", wf.id),
            )
        }),
    }
}

async fn act(state: &SharedState, r: &Request) -> Result<(), Error> {
    let org = &r.org;
    let wf = state
        .store
        .get_workflow(org, &r.workflow)
        .await?
        .ok_or_else(|| Error::not_found(format!("no workflow {}", r.workflow)))?;
    let id = &wf.id;
    let active = wf.status == WorkflowStatus::Pending || wf.status == WorkflowStatus::Running;
    match r.act {
        Act::Approve | Act::Deny => {
            if !active {
                return Err(Error::conflict(
                    "workflow_ended",
                    format!(
                        "workflow {id} has ended ({}); nothing waits for approval",
                        wf.status
                    ),
                ));
            }
            let step = find_step(
                &wf,
                r.step.as_deref(),
                |s| s.status == StepStatus::WaitingApproval,
                "waiting for approval",
            )?;
            // An approval is of a plan someone saw: only a waiting step
            // takes one. A denial may come ahead of time.
            let waiting = step.status == StepStatus::WaitingApproval
                || (r.act == Act::Deny
                    && step.status == StepStatus::Pending
                    && step.needs_approval);
            if !waiting || step.approved_at_ms.is_some() {
                let why = if step.needs_approval && step.status == StepStatus::Pending {
                    "its plan has not run yet; approve it once it waits"
                } else {
                    "it does not wait for an approval"
                };
                return Err(Error::conflict(
                    "not_waiting",
                    format!(
                        "step {:?} of workflow {id} is {}: {why}",
                        step.name, step.status
                    ),
                ));
            }
            if r.act == Act::Approve {
                state
                    .store
                    .update_step(
                        org,
                        id,
                        step.index,
                        StepUpdate {
                            status: step.status.clone(),
                            approved: Some(true),
                            ..StepUpdate::default()
                        },
                    )
                    .await?;
                tracing::info!(workflow = %id, step = %step.name, "approved");
            } else {
                deny(state, org, &wf, step).await?;
            }
        }
        Act::Cancel => {
            if !active || wf.status == WorkflowStatus::Cancelling {
                return Err(Error::conflict(
                    "workflow_ended",
                    format!(
                        "workflow {id} has ended ({}); there is nothing to cancel",
                        wf.status
                    ),
                ));
            }
            let mut stopping = false;
            for s in &wf.steps {
                match s.status {
                    StepStatus::Running => {
                        if let Some(j) = &s.job_id {
                            state.store.request_cancel(org, j).await?;
                            state.wake_logs(j);
                            stopping = true;
                        }
                    }
                    StepStatus::Pending | StepStatus::WaitingApproval => {}
                    _ => continue,
                }
                state
                    .store
                    .update_step(
                        org,
                        id,
                        s.index,
                        update(
                            StepStatus::Cancelled,
                            Some("the workflow was cancelled".into()),
                        ),
                    )
                    .await?;
            }
            // With a job still stopping, the install stays busy until it
            // has ended and what it did is recorded (see `finish_cancel`).
            let status = if stopping || wf.status == WorkflowStatus::Running {
                WorkflowStatus::Cancelling
            } else {
                WorkflowStatus::Cancelled
            };
            state.store.set_workflow_status(org, id, status).await?;
            tracing::info!(workflow = %id, %status, "cancel requested");
        }
        Act::Retry => {
            if wf.status != WorkflowStatus::Failed && wf.status != WorkflowStatus::Cancelled {
                let state_now = if active {
                    format!("is {}", wf.status)
                } else {
                    format!("has ended ({})", wf.status)
                };
                return Err(Error::conflict(
                    "not_failed",
                    format!(
                        "workflow {id} {state_now}: only a failed or cancelled workflow can be retried"
                    ),
                ));
            }
            let others = state.store.list_workflows(org, &wf.install_id).await?;
            if let Some(o) = others.iter().find(|o| o.id != *id && o.status.is_active()) {
                return Err(Error::conflict(
                    "install_busy",
                    format!(
                        "workflow {} is {} on this install; retry once it ends (or cancel it)",
                        o.id, o.status
                    ),
                ));
            }
            let unfinished = |s: &WorkflowStepInfo| {
                s.status == StepStatus::Failed || s.status == StepStatus::Cancelled
            };
            let first = find_step(&wf, None, unfinished, "that failed or was cancelled")?;
            let step = find_step(&wf, r.step.as_deref(), unfinished, "that failed")?;
            if step.index > first.index {
                return Err(Error::conflict(
                    "after_the_failure",
                    format!(
                        "step {:?} comes after {:?}, which did not finish: retry from it (or without --step)",
                        step.name, first.name
                    ),
                ));
            }
            let i = wf
                .steps
                .iter()
                .position(|s| s.index == step.index)
                .unwrap_or(0);
            // An apply is retried from its plan: a saved plan is stale once
            // an apply of it has run (even partly).
            let from = if applies_a_plan(step.kind) {
                plan_step_of(&wf.steps, i)
                    .map(|p| p.index)
                    .unwrap_or(step.index)
            } else {
                step.index
            };
            for s in wf.steps.iter().filter(|s| s.index >= from) {
                if s.status == StepStatus::Skipped || s.status == StepStatus::Denied {
                    continue;
                }
                state
                    .store
                    .update_step(
                        org,
                        id,
                        s.index,
                        StepUpdate {
                            status: StepStatus::Pending,
                            approved: Some(false),
                            clear_job: true,
                            ..StepUpdate::default()
                        },
                    )
                    .await?;
            }
            state
                .store
                .set_workflow_status(org, id, WorkflowStatus::Running)
                .await?;
            tracing::info!(workflow = %id, step = %step.name, "retrying");
        }
    }
    Ok(())
}

async fn deny(
    state: &SharedState,
    org: &OrgId,
    wf: &WorkflowInfo,
    step: &WorkflowStepInfo,
) -> Result<(), Error> {
    let install = state
        .store
        .find_install(org, wf.install_id.as_str())
        .await?
        .ok_or_else(|| Error::not_found(format!("install {} is gone", wf.install_id)))?;
    let (_, config) = app_config(state, org, &install.app_id, wf.config_version).await?;
    let (left_out, sandbox_too) =
        left_out_by_denial(&config, step.target.as_deref(), destroys(step.kind));
    state
        .store
        .update_step(
            org,
            &wf.id,
            step.index,
            update(StepStatus::Denied, Some("denied by an operator".into())),
        )
        .await?;
    let why = format!("skipped: {:?} was denied", step.name);
    for s in wf.steps.iter().filter(|s| s.index > step.index) {
        if s.status != StepStatus::Pending && s.status != StepStatus::WaitingApproval {
            continue;
        }
        let out = match (s.kind, &s.target) {
            // An action that reads a left-out component, or hooks on one.
            (StepKind::Action, Some(a)) => config
                .actions
                .iter()
                .find(|x| &x.name == a)
                .is_some_and(|x| {
                    x.depends_on.iter().any(|d| left_out.contains(d))
                        || x.triggers.iter().any(|t| {
                            t.component_name
                                .as_ref()
                                .is_some_and(|c| left_out.contains(c))
                        })
                }),
            (_, Some(c)) => left_out.contains(c),
            (_, None) => sandbox_too,
        };
        if out {
            state
                .store
                .update_step(
                    org,
                    &wf.id,
                    s.index,
                    update(StepStatus::Skipped, Some(why.clone())),
                )
                .await?;
        }
    }
    tracing::info!(workflow = %wf.id, step = %step.name, "denied");
    Ok(())
}
