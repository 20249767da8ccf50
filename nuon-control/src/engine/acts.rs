//! The operator's commands, applied in the engine's task: approving,
//! denying, cancelling, retrying and skipping. The rules decide what each touches;
//! this records it.

use nuon_core::model::{Step, Workflow};
use nuon_core::wire::ErrorCode;
use nuon_core::workflow::{self, StepStatus};
use nuon_core::{OrgId, WorkflowId};
use tokio::sync::oneshot;

use super::advance::update;
use super::rules;
use super::{Act, Engine, EngineError, Msg, Request, Result};
use crate::store::StepUpdate;

impl Engine {
    /// Approves the waiting step (or the one named); `all`: the later too.
    pub(crate) async fn approve(
        &self,
        org: &OrgId,
        wf: &WorkflowId,
        step: Option<String>,
        all: bool,
        by: &str,
    ) -> Result<()> {
        self.send(org, wf, Act::Approve { all }, step, by).await
    }

    /// Denies the step that waits for an approval (or the one named): it
    /// and every step that depends on it are skipped.
    pub(crate) async fn deny(
        &self,
        org: &OrgId,
        wf: &WorkflowId,
        step: Option<String>,
        by: &str,
    ) -> Result<()> {
        self.send(org, wf, Act::Deny(rules::Denial::SkipDependents), step, by)
            .await
    }

    /// Answers the step that waits for an approval (or the one named) with
    /// one of Nuon's responses.
    pub(crate) async fn respond(
        &self,
        org: &OrgId,
        wf: &WorkflowId,
        step: Option<String>,
        response: workflow::ApprovalResponse,
        by: &str,
    ) -> Result<()> {
        use workflow::ApprovalResponse as R;
        let act = match response {
            R::Approve => Act::Approve { all: false },
            R::Deny => Act::Deny(rules::Denial::Fail),
            R::DenySkipCurrent => Act::Deny(rules::Denial::SkipCurrent),
            R::DenySkipCurrentAndDependents => Act::Deny(rules::Denial::SkipDependents),
            R::Retry => Act::Replan,
        };
        self.send(org, wf, act, step, by).await
    }

    /// Cancels a workflow: its running job is asked to stop, its other
    /// steps will not run.
    pub(crate) async fn cancel(&self, org: &OrgId, wf: &WorkflowId, by: &str) -> Result<()> {
        self.send(org, wf, Act::Cancel, None, by).await
    }

    /// Retries a failed or cancelled workflow from its failed step (or the
    /// one named; an apply from its plan).
    pub(crate) async fn retry(
        &self,
        org: &OrgId,
        wf: &WorkflowId,
        step: Option<String>,
        by: &str,
    ) -> Result<()> {
        self.send(org, wf, Act::Retry, step, by).await
    }

    /// Skips the failed (or cancelled) step of a workflow, or the one
    /// named, and what it leads to (a plan's apply, an apply's health
    /// checks), and runs the rest (Nuon's `skip-step`).
    pub(crate) async fn skip(
        &self,
        org: &OrgId,
        wf: &WorkflowId,
        step: Option<String>,
        by: &str,
    ) -> Result<()> {
        self.send(org, wf, Act::Skip, step, by).await
    }

    /// Applies `act` to a workflow, in the engine's order.
    async fn send(
        &self,
        org: &OrgId,
        workflow: &WorkflowId,
        act: Act,
        step: Option<String>,
        by: &str,
    ) -> Result<()> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Msg::Act(Request {
                org: org.clone(),
                workflow: workflow.clone(),
                act,
                step,
                by: by.to_owned(),
                reply,
            }))
            .map_err(|_| EngineError::ShuttingDown)?;
        rx.await.map_err(|_| EngineError::ShuttingDown)??;
        self.wake_everywhere();
        Ok(())
    }

    pub(super) async fn act(&self, r: &Request) -> Result<()> {
        let org = &r.org;
        let wf = self
            .store
            .get_workflow(org, &r.workflow)
            .await?
            .ok_or_else(|| EngineError::NotFound(format!("no workflow {}", r.workflow)))?;
        let id = &wf.id;
        match r.act {
            Act::Approve { all } => {
                let step = rules::approval_step(&wf, r.step.as_deref(), false)?;
                // With `all`, the later steps that would ask are approved
                // now: they run after their plans.
                let later = wf.steps.iter().filter(|s| {
                    all && s.index > step.index
                        && s.needs_approval
                        && s.approved_at_ms.is_none()
                        && matches!(s.status, StepStatus::Pending | StepStatus::WaitingApproval)
                });
                for s in std::iter::once(step).chain(later) {
                    self.store
                        .update_step(
                            org,
                            id,
                            s.index,
                            StepUpdate {
                                status: s.status,
                                approved: Some(true),
                                approved_by: Some(r.by.clone()),
                                ..StepUpdate::default()
                            },
                        )
                        .await?;
                    tracing::info!(workflow = %id, step = %s.name, by = %r.by, "approved");
                }
            }
            Act::Deny(how) => {
                let step = rules::approval_step(&wf, r.step.as_deref(), true)?;
                self.record_denial(org, &wf, step, how, &r.by).await?;
            }
            Act::Replan => {
                let step = rules::approval_step(&wf, r.step.as_deref(), false)?;
                let redo = rules::replan(&wf.steps, step)?;
                self.replan(org, &wf, redo, format!("{} answered retry", r.by))
                    .await?;
                tracing::info!(workflow = %id, step = %step.name, "planning again");
            }
            Act::Cancel => {
                let cancel = rules::cancel(&wf)?;
                for (index, job) in &cancel.steps {
                    if let Some(j) = job {
                        self.store.request_cancel(org, j).await?;
                        self.notifier.cancel_requested(j);
                    }
                    self.store
                        .update_step(
                            org,
                            id,
                            *index,
                            update(
                                StepStatus::Cancelled,
                                Some("the workflow was cancelled".into()),
                            ),
                        )
                        .await?;
                }
                // With a job still stopping, the install stays busy until
                // it has ended and what it did is recorded.
                let with = super::ends::StatusWith::default();
                (self.set_status(org, id, &wf.install_id, cancel.status, with)).await?;
                tracing::info!(workflow = %id, status = %cancel.status, "cancel requested");
            }
            Act::Retry => {
                let others = self.store.list_workflows(org, &wf.install_id).await?;
                let (step, redo) = rules::retry(&wf, r.step.as_deref(), &others)?;
                self.run_again(org, &wf, &redo).await?;
                tracing::info!(workflow = %id, step = %step.name, "retrying");
            }
            Act::Skip => {
                let others = self.store.list_workflows(org, &wf.install_id).await?;
                let (step, taken, redo) = rules::skip(&wf, r.step.as_deref(), &others)?;
                // The failed try is kept with the step, which says who
                // skipped it.
                let said = format!("skipped by {} after it {}", r.by, step.status);
                let u = StepUpdate {
                    attempts: failed_try(&wf, step),
                    ..update(StepStatus::Skipped, Some(said))
                };
                self.store.update_step(org, id, step.index, u).await?;
                let why = format!("skipped: {:?} was skipped", step.name);
                for index in taken {
                    let u = update(StepStatus::Skipped, Some(why.clone()));
                    self.store.update_step(org, id, index, u).await?;
                }
                self.run_again(org, &wf, &redo).await?;
                tracing::info!(workflow = %id, step = %step.name, by = %r.by, "skipped; going on");
            }
        }
        Ok(())
    }

    /// Sets the steps `redo` back to pending (a step that failed keeps its
    /// try with the others) and the workflow running: what a retry and a
    /// skip do to the rest.
    async fn run_again(&self, org: &OrgId, wf: &Workflow, redo: &[u32]) -> Result<()> {
        for step in wf.steps.iter().filter(|s| redo.contains(&s.index)) {
            let u = StepUpdate {
                status: StepStatus::Pending,
                approved: Some(false),
                clear_job: true,
                attempts: failed_try(wf, step),
                ..StepUpdate::default()
            };
            self.store.update_step(org, &wf.id, step.index, u).await?;
        }
        self.store
            .set_workflow_status(
                org,
                &wf.id,
                nuon_core::workflow::WorkflowStatus::Running,
                None,
                None,
                None,
            )
            .await?;
        Ok(())
    }

    /// Sets a plan and the step that applies it (`redo`) back to pending:
    /// the plan runs again (its earlier run kept with its tries, saying
    /// why), then the apply asks again.
    pub(super) async fn replan(
        &self,
        org: &OrgId,
        wf: &Workflow,
        redo: [u32; 2],
        why: String,
    ) -> Result<()> {
        let said = format!("planned again: {why}");
        for (n, index) in redo.into_iter().enumerate() {
            let attempts = wf
                .steps
                .iter()
                .find(|s| s.index == index)
                .filter(|_| n == 0)
                .map(|s| rules::with_failed_try(s, said.clone(), nuon_core::now_ms(), None));
            self.store
                .update_step(
                    org,
                    &wf.id,
                    index,
                    StepUpdate {
                        status: StepStatus::Pending,
                        reason: (n == 0).then(|| said.clone()),
                        approved: Some(false),
                        clear_job: true,
                        attempts,
                        ..StepUpdate::default()
                    },
                )
                .await?;
        }
        Ok(())
    }

    /// Denies `step`, and skips what the denial leaves out (`how`); a
    /// plain denial fails the workflow.
    async fn record_denial(
        &self,
        org: &OrgId,
        wf: &Workflow,
        step: &Step,
        how: rules::Denial,
        by: &str,
    ) -> Result<()> {
        let install = self
            .store
            .find_install(org, wf.install_id.as_str())
            .await?
            .ok_or_else(|| EngineError::NotFound(format!("install {} is gone", wf.install_id)))?;
        if how == rules::Denial::Fail
            && let Some(running) = wf.steps.iter().find(|s| s.status == StepStatus::Running)
        {
            return Err(EngineError::conflict(
                ErrorCode::StepRunning,
                format!(
                    "step {:?} of workflow {} still runs: deny {:?} when it waits for its approval, or cancel the workflow",
                    running.name, wf.id, step.name
                ),
            ));
        }
        let (_, config) = self
            .app_config(org, &install.app_id, wf.config_version)
            .await?;
        let skipped = rules::skipped_by_denial(&config, &wf.steps, step, how);
        self.store
            .update_step(
                org,
                &wf.id,
                step.index,
                update(StepStatus::Denied, Some(format!("denied by {by}"))),
            )
            .await?;
        let why = format!("skipped: {:?} was denied", step.name);
        for index in skipped {
            self.store
                .update_step(
                    org,
                    &wf.id,
                    index,
                    update(StepStatus::Skipped, Some(why.clone())),
                )
                .await?;
        }
        if how == rules::Denial::Fail {
            // Ended as a failure ends one: the install's state after it,
            // and the webhook.
            let status = nuon_core::workflow::WorkflowStatus::Failed;
            let after = rules::install_state_after(wf, status, false, install.state);
            let with = super::ends::StatusWith::state(after);
            (self.set_status(org, &wf.id, &install.id, status, with)).await?;
            let data = serde_json::json!({
                "workflow_id": wf.id,
                "workflow_kind": wf.kind,
                "install_id": install.id,
                "install": install.name,
                "step": step.name,
                "target": step.target,
                "reason": format!("denied by {by}"),
            });
            crate::ops::emit(
                &*self.store,
                org,
                nuon_core::webhook::WebhookEvent::WorkflowFailed,
                data,
            )
            .await;
        }
        tracing::info!(workflow = %wf.id, step = %step.name, ?how, "approval denied");
        Ok(())
    }
}

/// A failed step's tries with its last one (its reason, at the workflow's
/// end) added; none for a step that did not fail.
fn failed_try(wf: &Workflow, step: &Step) -> Option<Vec<nuon_core::model::StepAttempt>> {
    (step.status == StepStatus::Failed).then(|| {
        let at = wf.finished_at_ms.unwrap_or_else(nuon_core::now_ms);
        rules::with_failed_try(step, step.reason.clone().unwrap_or_default(), at, None)
    })
}
