//! A workflow's acts: approve, deny, answer, cancel, retry and skip, each
//! one operation of the Control API, from the API and from the dashboard
//! alike, and how a workflow and a job are shown (sensitive outputs
//! masked).

use nuon_core::WorkflowId;
use nuon_core::endpoint::{self as ep, Endpoint, path_of};
use nuon_core::wire::{JobInfo, WorkflowInfo, WorkflowStepInfo};
use nuon_core::workflow::ApprovalResponse;

use super::{Caller, Services, record, require_deployer};
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
                self.audited_on::<ep::ApproveWorkflowStep, _>(caller, raw, result)
                    .await
            }
            WorkflowAct::Deny => {
                self.audited_on::<ep::DenyWorkflowStep, _>(caller, raw, result)
                    .await
            }
            WorkflowAct::Respond(_) => {
                self.audited_on::<ep::RespondToApproval, _>(caller, raw, result)
                    .await
            }
            WorkflowAct::Cancel => {
                self.audited_on::<ep::CancelWorkflow, _>(caller, raw, result)
                    .await
            }
            WorkflowAct::Retry => {
                self.audited_on::<ep::RetryWorkflow, _>(caller, raw, result)
                    .await
            }
            WorkflowAct::Skip => {
                self.audited_on::<ep::SkipWorkflowStep, _>(caller, raw, result)
                    .await
            }
        }
    }

    /// `result` of operation `E` on workflow `raw`, recorded under the
    /// operation's path.
    async fn audited_on<E: Endpoint, T>(
        &self,
        caller: &Caller,
        raw: &str,
        result: Result<T, Error>,
    ) -> Result<T, Error> {
        self.audited::<E, T>(caller, path_of::<E>(&[raw]), result)
            .await
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
