//! What the client asks of a workflow's steps: approve (one, or the rest
//! of the workflow), deny, answer, cancel, retry and skip.

use super::*;

impl ControlClient {
    /// Approves a workflow's waiting step (or `step`).
    pub async fn approve_step(&self, id: &str, step: Option<&str>) -> Result<WorkflowInfo> {
        let req = nuon_core::wire::ApproveSteps {
            step: step.map(str::to_owned),
            all: false,
        };
        self.approve_steps(id, &req).await
    }

    /// Approves a workflow's waiting step (or `req.step`) and, with
    /// `req.all`, every later step of it that would ask.
    pub async fn approve_steps(
        &self,
        id: &str,
        req: &nuon_core::wire::ApproveSteps,
    ) -> Result<WorkflowInfo> {
        self.call::<ep::ApproveWorkflowStep>(&[id], req).await
    }

    /// Denies a workflow's waiting step (or `step`): it and its dependents
    /// are skipped.
    pub async fn deny_step(&self, id: &str, step: Option<&str>) -> Result<WorkflowInfo> {
        self.workflow_act(routes::WORKFLOW_DENY, id, step).await
    }

    /// Answers a workflow's waiting step (or `step`) with one of Nuon's
    /// approval responses.
    pub async fn respond_to_approval(
        &self,
        id: &str,
        step: Option<&str>,
        response: nuon_core::workflow::ApprovalResponse,
    ) -> Result<WorkflowInfo> {
        let req = nuon_core::wire::ApprovalAnswer {
            step: step.map(str::to_owned),
            response,
        };
        self.call::<ep::RespondToApproval>(&[id], &req).await
    }

    /// Cancels a workflow.
    pub async fn cancel_workflow(&self, id: &str) -> Result<WorkflowInfo> {
        self.workflow_act(routes::WORKFLOW_CANCEL, id, None).await
    }

    /// Retries a failed workflow from its failed step (or `step`).
    pub async fn retry_workflow(&self, id: &str, step: Option<&str>) -> Result<WorkflowInfo> {
        self.workflow_act(routes::WORKFLOW_RETRY, id, step).await
    }

    /// Skips a failed workflow's failed step (or `step`) with what it
    /// leads to, and runs the rest.
    pub async fn skip_step(&self, id: &str, step: Option<&str>) -> Result<WorkflowInfo> {
        self.workflow_act(routes::WORKFLOW_SKIP, id, step).await
    }

    async fn workflow_act(
        &self,
        route: &str,
        id: &str,
        step: Option<&str>,
    ) -> Result<WorkflowInfo> {
        let req = StepChoice {
            step: step.map(str::to_owned),
        };
        self.http
            .post(&routes::with_id(route, &seg(id)), &req, Duration::ZERO)
            .await
    }
}
