//! Moving one workflow: starting it, recording a step's job as it ends,
//! asking for approvals, dispatching the next step, and ending it.

use nuon_core::app::ComponentKind;
use nuon_core::model::{QueuedJob, Step};
use nuon_core::webhook::WebhookEvent;
use nuon_core::wire::InstallOutputs;
use nuon_core::workflow::{StepKind, StepStatus, WorkflowKind, WorkflowStatus, applies_a_plan};
use nuon_core::{ArtifactRef, JobStatus, OrgId};
use serde_json::Value;

use super::ends::StatusWith;
use super::rules::{self, Next};
use super::{Ctx, Engine, EngineError, Result, render};
use crate::store::{Carried, Moving, StepUpdate};

/// A step update to `status`, with a reason.
pub(super) fn update(status: StepStatus, reason: Option<String>) -> StepUpdate {
    StepUpdate {
        status,
        reason,
        ..StepUpdate::default()
    }
}

impl Engine {
    /// Moves a workflow as far as it goes now, from what one read found
    /// of it (its install, runner and running jobs with it).
    pub(super) async fn advance(&self, org: &OrgId, moving: Moving) -> Result<()> {
        let Moving {
            workflow: wf,
            install,
            runner,
            mut jobs,
        } = moving;
        let id = wf.id.clone();
        self.not_waiting(&id);
        // A newer replica planned it, during a rolling upgrade: only a
        // replica that knows every step moves it (the lead passes to the
        // newest replica: `MaintenanceStore::lead`), so this one leaves it be.
        if let Some(s) = wf.steps.iter().find(|s| s.kind == StepKind::Unknown) {
            tracing::warn!(
                workflow = %id,
                step = %s.name,
                "the workflow has a step of a kind this nuon-ctl does not know (a newer replica's); left for a replica that knows it: upgrade this one"
            );
            return Ok(());
        }
        // Its step's job still runs: nothing to do, and nothing to load
        // (what a full pass finds of most of a busy fleet's workflows).
        // An ended job found here is the one the step reads below.
        let mut ended_job = None;
        if wf.status == WorkflowStatus::Running
            && let Next::Job(i) = rules::next(&wf.steps)
            && let Some(job_id) = &wf.steps[i].job_id
        {
            let job = match jobs.iter().position(|j| &j.id == job_id) {
                Some(at) => Some(jobs.swap_remove(at)),
                None => self.store.get_job(org, job_id).await?,
            };
            match job {
                Some(job) if !job.status.is_terminal() => {
                    self.left_waiting(&id, &job.id);
                    return Ok(());
                }
                job => ended_job = job,
            }
        }
        let mut cx = match self.load(org, wf.clone(), install, runner).await {
            Ok(cx) => cx,
            // Its install, app or config is gone: it can never move again,
            // and must not block the install's queue.
            Err(EngineError::NotFound(message)) => {
                if let Some(s) = wf.steps.iter().find(|s| !s.status.is_passed()) {
                    self.store
                        .update_step(org, &id, s.index, update(StepStatus::Failed, Some(message)))
                        .await?;
                }
                let failed = WorkflowStatus::Failed;
                (self.set_status(org, &id, &wf.install_id, failed, StatusWith::default())).await?;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        if cx.wf.status == WorkflowStatus::Cancelling {
            return self.finish_cancel(&mut cx).await;
        }
        if cx.wf.status == WorkflowStatus::Pending {
            // Its start: the dispatch of its first step carries it (one
            // statement on PostgreSQL), any other write after it.
            cx.wf.status = WorkflowStatus::Running;
            cx.carry(Carried::Started(state_during(&cx)));
            tracing::info!(workflow = %id, install = %cx.install.id, kind = ?cx.wf.kind, "workflow started");
        }
        let moved = self.move_on(&mut cx, ended_job).await;
        // What no write carried (a path that wrote nothing after it).
        if moved.is_ok() {
            self.write_carried(&cx).await?;
        }
        moved
    }

    /// Moves a workflow that runs as far as it goes now. A step's success
    /// is held back (with the workflow's start, in [`Ctx::carry`]): the
    /// dispatch of the next step or the workflow's end carries it (one
    /// statement on PostgreSQL), any other write writes it first.
    async fn move_on(&self, cx: &mut Ctx, mut ended_job: Option<QueuedJob>) -> Result<()> {
        let (org, id) = (&cx.org.clone(), cx.wf.id.clone());
        loop {
            let next = rules::next(&cx.wf.steps);
            if !matches!(next, Next::Dispatch(_) | Next::End(_)) {
                self.write_carried(cx).await?;
            }
            match next {
                Next::Job(i) => {
                    let step = cx.wf.steps[i].clone();
                    let Some(job_id) = &step.job_id else {
                        return self.fail(cx, &step, "the step lost its job".into()).await;
                    };
                    let job = match ended_job.take().filter(|j| &j.id == job_id) {
                        Some(job) => job,
                        None => self.store.get_job(org, job_id).await?.ok_or_else(|| {
                            EngineError::Internal(format!("job {job_id} is gone"))
                        })?,
                    };
                    if !job.status.is_terminal() {
                        self.left_waiting(&cx.wf.id, &job.id);
                        return Ok(());
                    }
                    cx.ended = Some((job.id.clone(), job.finished_at_ms));
                    if let (Some(a), Some(b)) = (job.started_at_ms, job.finished_at_ms) {
                        self.metrics.step(
                            step_kind_name(step.kind),
                            std::time::Duration::from_millis((b - a).max(0) as u64),
                        );
                    }
                    if job.status != JobStatus::Succeeded {
                        let mut reason = self.failure_reason(&job).await;
                        // An apply names the plan it applied, and where it
                        // came from.
                        if applies_a_plan(step.kind)
                            && let Some(plan) = rules::plan_step_of(&cx.wf.steps, i)
                            && let Some(made_by) = &plan.job_id
                        {
                            // Again from the sync, when there is one: the
                            // module may be missing where the plan is.
                            let from = cx.wf.steps[..i]
                                .iter()
                                .rev()
                                .find(|s| {
                                    s.target == step.target
                                        && matches!(s.kind, StepKind::Sync | StepKind::SandboxSync)
                                })
                                .unwrap_or(plan);
                            reason.push_str(&format!(
                                "; its plan came from job {made_by} ({}): plan again with `nuon workflows retry {} --step \"{}\"`",
                                plan.name, cx.wf.id, from.name
                            ));
                        }
                        if let Some(redo) =
                            rules::auto_retry(&cx.config, &cx.wf.steps, i, job.status)
                        {
                            self.retry_later(cx, i, &redo, reason).await?;
                            continue;
                        }
                        let tries = rules::auto_tries(&step.attempts);
                        if tries > 0 {
                            reason.push_str(&format!(
                                " (try {} of {}: every automatic retry failed)",
                                tries + 1,
                                tries + 1
                            ));
                        }
                        // A health step's failure keeps what its probes saw:
                        // the install's health reads it.
                        let outputs = (step.kind == StepKind::Health && !job.outputs.is_null())
                            .then(|| job.outputs.to_string());
                        return self.fail_with(cx, &step, reason, outputs).await;
                    }
                    let (index, u) = self.success_of(cx, i, &job).await?;
                    cx.carry(Carried::Ended(index, u));
                }
                Next::Waiting(_) => return Ok(()),
                Next::Await(i) => {
                    if !self.await_step(cx, i).await? {
                        return Ok(());
                    }
                }
                Next::Dispatch(_) | Next::Ask(_) | Next::NoApprovalNeeded(_)
                    if rules::retry_due(&cx.wf.steps, nuon_core::now_ms()).is_some() =>
                {
                    // Backing off before an automatic retry: the tick
                    // looks again.
                    return Ok(());
                }
                Next::NoApprovalNeeded(i) | Next::Dispatch(i)
                    if self.held_by_customer(cx, i).await? =>
                {
                    return Ok(());
                }
                // Approved by its policies: it dispatches, so it waits for a
                // runner the customer disabled like any other.
                Next::Ask(i)
                    if rules::auto_approved(&cx.config, &cx.wf.steps, i)
                        && self.held_by_customer(cx, i).await? =>
                {
                    return Ok(());
                }
                Next::NoApprovalNeeded(i) => {
                    return self
                        .approve_and_dispatch(cx, i, nuon_core::workflow::NO_CHANGES)
                        .await;
                }
                Next::Ask(i) if rules::auto_approved(&cx.config, &cx.wf.steps, i) => {
                    tracing::info!(workflow = %id, step = %cx.wf.steps[i].name, "approved: its plan passed every policy");
                    return self.approve_and_dispatch(cx, i, AUTO_APPROVED).await;
                }
                Next::Ask(i) => {
                    let step = &cx.wf.steps[i];
                    self.store
                        .update_step(
                            org,
                            &id,
                            step.index,
                            update(StepStatus::WaitingApproval, None),
                        )
                        .await?;
                    tracing::info!(workflow = %id, step = %step.name, "waiting for approval");
                    let data = self.event_data(cx, Some(step));
                    crate::ops::emit(&*self.store, org, WebhookEvent::ApprovalNeeded, data).await;
                    return Ok(());
                }
                Next::Dispatch(i) => {
                    if self.skip_if_nothing_to_destroy(cx, i).await? {
                        continue;
                    }
                    if self.replan_if_stale(cx, i).await? {
                        return Ok(());
                    }
                    return self.dispatch_or_fail(cx, &cx.wf.steps[i]).await;
                }
                Next::Failed(i) => {
                    let (failed, with) = (WorkflowStatus::Failed, StatusWith::default());
                    (self.set_status(org, &id, &cx.install.id, failed, with)).await?;
                    self.settle_pending(org, &cx.install.id, &id).await?;
                    let data = self.event_data(cx, cx.wf.steps.get(i));
                    crate::ops::emit(&*self.store, org, WebhookEvent::WorkflowFailed, data).await;
                    return Ok(());
                }
                Next::End(status) => {
                    // The install's state with it: whoever sees the
                    // workflow ended sees the install as it left it.
                    let after = rules::install_state_after(&cx.wf, status, false, cx.install.state);
                    // And the release it runs, when it runs a release now.
                    let release = (status == WorkflowStatus::Succeeded)
                        .then(|| rules::release_after(&cx.wf))
                        .flatten();
                    let with = StatusWith {
                        install_state: Some(after),
                        release: release.as_ref().map(Option::as_ref),
                        // The success of its last step with it; a start
                        // held back (it ends as it starts) the end writes
                        // over.
                        step: match cx.take_carried() {
                            Some(Carried::Ended(index, u)) => Some((index, u)),
                            Some(Carried::Started(_)) | None => None,
                        },
                    };
                    (self.set_status(org, &id, &cx.install.id, status, with)).await?;
                    cx.wf.status = status;
                    cx.install.state = after;
                    self.settle_pending_of(org, &cx.install, &cx.wf).await?;
                    tracing::info!(workflow = %id, %status, "workflow ended");
                    if status == WorkflowStatus::Succeeded
                        && cx.wf.trigger.as_deref() == Some(nuon_core::workflow::DELETE)
                    {
                        // Deprovisioned for its deletion: the record goes.
                        match self.store.remove_install(org, &cx.install.id).await {
                            Ok(_) => {
                                tracing::info!(install = %cx.install.name, "install deprovisioned and deleted")
                            }
                            Err(e) => {
                                tracing::warn!(install = %cx.install.name, error = %e, "install deprovisioned but not deleted: `nuon installs forget` removes it")
                            }
                        }
                        return Ok(());
                    }
                    if cx.wf.kind == WorkflowKind::Drift && status == WorkflowStatus::Succeeded {
                        let plan = cx
                            .wf
                            .steps
                            .iter()
                            .find(|s| matches!(s.kind, StepKind::Plan | StepKind::SandboxPlan));
                        if let Some(p) = plan.filter(|p| rules::has_changes(&p.outputs["changes"]))
                        {
                            let mut data = self.event_data(cx, Some(p));
                            data["changes"] = p.outputs["changes"].clone();
                            crate::ops::emit(&*self.store, org, WebhookEvent::DriftDetected, data)
                                .await;
                        }
                    }
                    return Ok(());
                }
            }
        }
    }

    /// Sets the steps `redo` back to pending for an automatic retry of
    /// step `i` after its backoff, recording the try that failed.
    async fn retry_later(
        &self,
        cx: &mut Ctx,
        i: usize,
        redo: &[u32],
        reason: String,
    ) -> Result<()> {
        let now = nuon_core::now_ms();
        let step = cx.wf.steps[i].clone();
        let max =
            nuon_core::workflow::max_auto_retries_of(&cx.config, step.kind, step.target.as_deref());
        let tries = rules::auto_tries(&step.attempts);
        let retry_at = now + rules::retry_backoff_ms(tries);
        let attempts = rules::with_failed_try(&step, reason.clone(), now, Some(retry_at));
        let said = format!(
            "try {} of {} failed; retrying in {} s (max_auto_retries = {max}): {reason}",
            tries + 1,
            max + 1,
            (retry_at - now) / 1000
        );
        tracing::warn!(workflow = %cx.wf.id, step = %step.name, %said, "automatic retry");
        for &index in redo {
            let me = index == step.index;
            let u = StepUpdate {
                status: StepStatus::Pending,
                reason: me.then(|| said.clone()),
                approved: Some(false),
                clear_job: true,
                attempts: me.then(|| attempts.clone()),
                ..StepUpdate::default()
            };
            self.set_step(cx, index, u).await?;
        }
        Ok(())
    }

    /// Updates step `index` of the workflow in the store, and in `cx` as
    /// the store did.
    pub(super) async fn set_step(&self, cx: &mut Ctx, index: u32, u: StepUpdate) -> Result<()> {
        self.write_carried(cx).await?;
        self.store
            .update_step(&cx.org, &cx.wf.id, index, u.clone())
            .await?;
        if let Some(s) = cx.wf.steps.iter_mut().find(|s| s.index == index) {
            u.apply_to(s);
        }
        Ok(())
    }

    /// Ends a cancel once the job that was running has ended: what it did
    /// is recorded (an apply that finished anyway keeps its outputs), locks
    /// its Terraform left are released, and the install is free again.
    async fn finish_cancel(&self, cx: &mut Ctx) -> Result<()> {
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
            let Some(job) = self.store.get_job(&org, &job_id).await? else {
                continue;
            };
            if !job.status.is_terminal() {
                return Ok(());
            }
            if job.status == JobStatus::Succeeded {
                self.succeeded(cx, i, &job).await?;
                continue;
            }
            interrupted |= applies_a_plan(step.kind);
            let reason = self.failure_reason(&job).await;
            self.store
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
        let status = WorkflowStatus::Cancelled;
        let after = rules::install_state_after(&cx.wf, status, interrupted, cx.install.state);
        let with = StatusWith::state(after);
        (self.set_status(&org, &cx.wf.id, &cx.install.id, status, with)).await?;
        self.settle_pending(&org, &cx.install.id, &cx.wf.id).await?;
        tracing::info!(workflow = %cx.wf.id, "cancelled");
        Ok(())
    }

    /// Why a job failed, and the Terraform state locks it held, released.
    async fn failure_reason(&self, job: &QueuedJob) -> String {
        let mut reason = format!(
            "job {}: {}",
            job.id,
            job.reason
                .clone()
                .unwrap_or_else(|| format!("it ended {}", job.status))
        );
        if job.status == JobStatus::TimedOut {
            reason.push_str(&format!(
                "; its timeout was {}s (a component's deploy_timeout, an action's timeout)",
                job.timeout_secs
            ));
        }
        match self.store.release_locks_of_job(&job.id).await {
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

    /// Fails a step, its workflow and (unless it is an action) the install.
    pub(super) async fn fail(&self, cx: &Ctx, step: &Step, reason: String) -> Result<()> {
        self.fail_with(cx, step, reason, None).await
    }

    /// [`fail`](Self::fail), keeping the outputs its job reported.
    async fn fail_with(
        &self,
        cx: &Ctx,
        step: &Step,
        reason: String,
        outputs_json: Option<String>,
    ) -> Result<()> {
        tracing::warn!(workflow = %cx.wf.id, step = %step.name, %reason, "step failed");
        self.write_carried(cx).await?;
        let u = StepUpdate {
            outputs_json,
            ..update(StepStatus::Failed, Some(reason.clone()))
        };
        let status = WorkflowStatus::Failed;
        // The step's failure with it.
        let after = rules::install_state_after(&cx.wf, status, false, cx.install.state);
        let with = StatusWith {
            step: Some((step.index, u)),
            ..StatusWith::state(after)
        };
        (self.set_status(&cx.org, &cx.wf.id, &cx.install.id, status, with)).await?;
        self.settle_pending(&cx.org, &cx.install.id, &cx.wf.id)
            .await?;
        let mut data = self.event_data(cx, Some(step));
        data["reason"] = Value::String(reason);
        crate::ops::emit(&*self.store, &cx.org, WebhookEvent::WorkflowFailed, data).await;
        Ok(())
    }

    /// What a webhook is told of a workflow (and one of its steps).
    fn event_data(&self, cx: &Ctx, step: Option<&Step>) -> Value {
        serde_json::json!({
            "workflow_id": cx.wf.id,
            "workflow_kind": cx.wf.kind,
            "install_id": cx.install.id,
            "install": cx.install.name,
            "step": step.map(|s| s.name.clone()),
            "target": step.and_then(|s| s.target.clone()),
        })
    }

    /// The install's outputs as stored now, opened: as read with the
    /// workflow at the start of this advance, and kept by
    /// [`Self::stage_outputs`] since (only the workflow that moves an
    /// install, one at a time, writes its outputs), so no read.
    fn current_outputs(&self, cx: &Ctx) -> Result<InstallOutputs> {
        render::outputs_of(&self.secrets, &cx.install).map_err(EngineError::Internal)
    }

    /// The install's outputs after this step, the sensitive ones sealed:
    /// kept in `cx` (for rendering, and for the step's update to write with
    /// it).
    fn stage_outputs(&self, cx: &mut Ctx, all: &InstallOutputs) -> Result<()> {
        let mut all = all.clone();
        crate::keys::seal_outputs(&self.secrets, &mut all);
        let json = serde_json::to_string(&all)
            .map_err(|e| EngineError::Internal(format!("cannot encode outputs: {e}")))?;
        cx.install.outputs_json = Some(json);
        Ok(())
    }

    /// Records a step's success: its outputs, and an apply's or destroy's
    /// effect on the install's outputs (and a plugin's state).
    async fn succeeded(&self, cx: &mut Ctx, i: usize, job: &QueuedJob) -> Result<()> {
        let (index, u) = self.success_of(cx, i, job).await?;
        self.write_carried(cx).await?;
        Ok(self.store.update_step(&cx.org, &cx.wf.id, index, u).await?)
    }

    /// Step `i` succeeded with `job`: what it and the install keep of it,
    /// in `cx` now and as the step's update to write (the next write of
    /// the workflow carries it: [`Engine::write_carried`] when none does).
    async fn success_of(
        &self,
        cx: &mut Ctx,
        i: usize,
        job: &QueuedJob,
    ) -> Result<(u32, StepUpdate)> {
        let step = cx.wf.steps[i].clone();
        let outputs = job.outputs.clone();
        // Whether the install's outputs changed: written with the step.
        let mut staged = false;
        if applies_a_plan(step.kind) || step.kind == StepKind::Action {
            let mut all = self.current_outputs(cx)?;
            rules::record_outputs(&mut all, &step, &job.outputs);
            self.stage_outputs(cx, &all)?;
            staged = true;
            if let Some(c) = super::dispatch::wasm_target(cx, &step) {
                let name = c.name.clone();
                let kept = if step.kind == StepKind::Apply {
                    job.outputs["state"].clone()
                } else {
                    Value::Null
                };
                self.keep_plugin_state(cx, &name, &kept).await?;
            }
        }
        // The Secrets a secrets sync wrote: what the next one deletes when
        // the config no longer syncs them.
        if step.kind == StepKind::SecretsSync {
            // Rendered as the dispatch did; should that fail now (a value
            // changed meanwhile), the list stays as it was. A deprovision
            // wrote none (it deleted them all).
            let written =
                render::render_context(&self.secrets, &cx.org, &cx.install, cx.owner(), false)
                    .and_then(|ctx| {
                        super::secrets_sync::secret_objects(cx, &ctx, &Default::default())
                    });
            match written {
                Ok((objects, _)) => {
                    let mut all = self.current_outputs(cx)?;
                    all.kubernetes_secrets = objects
                        .keys()
                        .map(|(ns, name)| format!("{ns}/{name}"))
                        .collect();
                    self.stage_outputs(cx, &all)?;
                    staged = true;
                }
                Err(e) => {
                    tracing::warn!(workflow = %cx.wf.id, error = %e, "cannot list the Secrets the sync wrote");
                }
            }
        }
        // An image is deployed by its sync: its place in the install's
        // registry is the component's output.
        let image = step.kind == StepKind::Sync
            && step
                .target
                .as_deref()
                .and_then(|t| cx.config.component(t))
                .is_some_and(|c| {
                    matches!(
                        c.kind(),
                        ComponentKind::ContainerImage | ComponentKind::DockerBuild
                    )
                });
        if let (true, Some(c), Ok(a)) = (
            image,
            &step.target,
            serde_json::from_value::<ArtifactRef>(job.outputs["artifact"].clone()),
        ) {
            let mut all = self.current_outputs(cx)?;
            let tag = job.outputs["tag"].as_str();
            all.components
                .insert(c.clone(), rules::image_outputs(&a, tag));
            self.stage_outputs(cx, &all)?;
            staged = true;
        }
        let update = StepUpdate {
            status: StepStatus::Succeeded,
            // An apply its policies approved says so for good (the
            // reason set with the approval is cleared on dispatch).
            reason: step.reason.clone().or_else(|| {
                (step.needs_approval && rules::auto_approved(&cx.config, &cx.wf.steps, i))
                    .then(|| AUTO_APPROVED.to_owned())
            }),
            outputs_json: Some(outputs.to_string()),
            install_outputs: staged.then(|| {
                let json = cx.install.outputs_json.clone().unwrap_or_default();
                (json, state_during(cx))
            }),
            ..StepUpdate::default()
        };
        cx.wf.steps[i].status = StepStatus::Succeeded;
        cx.wf.steps[i].outputs = outputs;
        Ok((step.index, update))
    }
}

/// The install's state while its workflow runs.
fn state_during(cx: &Ctx) -> nuon_core::model::InstallState {
    if rules::plan_only(&cx.wf) {
        return cx.install.state;
    }
    rules::install_state_during(cx.wf.kind, cx.install.state)
}

/// The reason an apply approved by its passing policies carries.
const AUTO_APPROVED: &str =
    "approved: its plan passed every policy (auto_approve_on_policies_passing)";

impl Engine {
    /// Approves step `i` without a person (`why`) and dispatches it.
    async fn approve_and_dispatch(&self, cx: &Ctx, i: usize, why: &str) -> Result<()> {
        let step = &cx.wf.steps[i];
        self.store
            .update_step(
                &cx.org,
                &cx.wf.id,
                step.index,
                StepUpdate {
                    status: StepStatus::Pending,
                    reason: Some(why.into()),
                    approved: Some(true),
                    approved_by: Some("control-plane".into()),
                    ..StepUpdate::default()
                },
            )
            .await?;
        self.dispatch_or_fail(cx, step).await
    }

    /// Plans again, before it applies, the plan of step `i` when it is
    /// older than `--plan-max-age`; whether it did.
    async fn replan_if_stale(&self, cx: &Ctx, i: usize) -> Result<bool> {
        let step = &cx.wf.steps[i];
        if !applies_a_plan(step.kind) {
            return Ok(false);
        }
        let Ok([plan, _]) = rules::replan(&cx.wf.steps, step) else {
            return Ok(false);
        };
        let Some(job) = cx
            .wf
            .steps
            .iter()
            .find(|s| s.index == plan)
            .and_then(|s| s.job_id.as_ref())
        else {
            return Ok(false);
        };
        // The plan's job ended in this advance, most often: its end is
        // known without reading it again.
        let made = match &cx.ended {
            Some((ended, at)) if ended == job => *at,
            _ => (self.store.get_job(&cx.org, job).await?).and_then(|j| j.finished_at_ms),
        };
        let Some(made) = made else {
            return Ok(false);
        };
        let age = std::time::Duration::from_millis((nuon_core::now_ms() - made).max(0) as u64);
        if age <= self.ops.plan_max_age {
            return Ok(false);
        }
        let why = format!(
            "the plan was {} old when {:?} was to run, more than --plan-max-age ({})",
            super::in_words(age),
            step.name,
            super::in_words(self.ops.plan_max_age)
        );
        tracing::info!(workflow = %cx.wf.id, step = %step.name, %why, "planning again");
        self.write_carried(cx).await?;
        self.replan(&cx.org, &cx.wf, [plan, step.index], why)
            .await?;
        Ok(true)
    }
}

/// A step kind's name, for metrics.
fn step_kind_name(kind: StepKind) -> &'static str {
    match kind {
        StepKind::SandboxSync => "sandbox_sync",
        StepKind::Sync => "sync",
        StepKind::SandboxPlan => "sandbox_plan",
        StepKind::SandboxApply => "sandbox_apply",
        StepKind::SandboxDestroyPlan => "sandbox_destroy_plan",
        StepKind::SandboxDestroy => "sandbox_destroy",
        StepKind::Plan => "plan",
        StepKind::Apply => "apply",
        StepKind::DestroyPlan => "destroy_plan",
        StepKind::Destroy => "destroy",
        StepKind::Action => "action",
        StepKind::AwaitStack => "await_stack",
        StepKind::AwaitRunner => "await_runner",
        StepKind::SecretsSync => "secrets_sync",
        StepKind::Health => "health",
        StepKind::AwaitChecks => "await_checks",
        StepKind::Unknown => "unknown",
    }
}
