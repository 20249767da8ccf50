//! The operations served by `nuon-control/src/api/workflows.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `POST /v1/installs/{id}/workflows`.
    CreateWorkflow: Post routes::INSTALL_WORKFLOWS, "createWorkflow",
        crate::wire::CreateWorkflow => crate::wire::WorkflowInfo, status = 201, body = true,
        summary = "Start a workflow (provision, deploy, teardown, deprovision, reprovision) on an install; it queues behind the install's running workflow.";
    /// `POST /v1/workflows/{id}/approve`.
    ApproveWorkflowStep: Post routes::WORKFLOW_APPROVE, "approveWorkflowStep",
        crate::wire::ApproveSteps => crate::wire::WorkflowInfo, body = true,
        summary = "Approve the step that waits for an approval (or the one named); with `all`, every later step of the workflow that would ask too (each recorded in the audit trail).";
    /// `POST /v1/workflows/{id}/deny`.
    DenyWorkflowStep: Post routes::WORKFLOW_DENY, "denyWorkflowStep",
        crate::wire::StepChoice => crate::wire::WorkflowInfo, body = true,
        summary = "Deny the step that waits for an approval: it and every step that depends on it are skipped (the response `deny-skip-current-and-dependents`).";
    /// `POST /v1/workflows/{id}/respond`.
    RespondToApproval: Post routes::WORKFLOW_RESPOND, "respondToApproval",
        crate::wire::ApprovalAnswer => crate::wire::WorkflowInfo, body = true,
        summary = "Answer the step that waits for an approval (or the one named) with one of Nuon's responses: `approve`; `deny` (the workflow fails); `deny-skip-current` (the step is skipped, the rest runs); `deny-skip-current-and-dependents`; `retry` (plan again, then ask again).";
    /// `POST /v1/workflows/{id}/cancel`.
    CancelWorkflow: Post routes::WORKFLOW_CANCEL, "cancelWorkflow",
        crate::wire::StepChoice => crate::wire::WorkflowInfo, body = true,
        summary = "Cancel a workflow: its running job is cancelled, its other steps will not run.";
    /// `POST /v1/workflows/{id}/retry`.
    RetryWorkflow: Post routes::WORKFLOW_RETRY, "retryWorkflow",
        crate::wire::StepChoice => crate::wire::WorkflowInfo, body = true,
        summary = "Retry a failed or cancelled workflow from its failed step (an apply from its plan).";
    /// `POST /v1/workflows/{id}/skip`.
    SkipWorkflowStep: Post routes::WORKFLOW_SKIP, "skipWorkflowStep",
        crate::wire::StepChoice => crate::wire::WorkflowInfo, body = true,
        summary = "Skip the failed (or cancelled) step of a workflow, or the one named, with what it leads to (a plan's apply, an apply's health checks), and run the rest (Nuon's `skip-step`).";
    /// `GET /v1/installs/{id}/outputs`.
    GetInstallOutputs: Get routes::INSTALL_OUTPUTS, "getInstallOutputs",
        () => crate::wire::InstallOutputs, body = false,
        summary = "The Terraform outputs of an install's sandbox and components.";
    /// `POST /v1/apps/{id}/builds`.
    CreateBuilds: Post routes::APP_BUILDS, "createBuilds",
        crate::wire::CreateBuilds => crate::wire::BuildList, status = 201, body = true,
        summary = "Build the components (and sandbox) of the app's latest config version on the org's build runner.";
    /// `GET /v1/apps/{id}/builds`.
    ListBuilds: Get routes::APP_BUILDS, "listBuilds",
        () => crate::wire::BuildList, body = false,
        summary = "An app's builds, newest first.";
    /// `GET /v1/builds/{id}`.
    GetBuild: Get routes::BUILD, "getBuild",
        () => crate::wire::BuildInfo, body = false,
        summary = "One build.";
}
