//! Builds, workflows and outputs on the Control API: starting a workflow
//! (checked before any job runs: components that deploy, builds, inputs
//! and secrets its templates read), approving, denying, cancelling and
//! retrying its steps (through the executor), an install's outputs, and
//! building an app's components on the org's build runner.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use nuon_core::endpoint as ep;
use nuon_core::wire::{
    ApprovalAnswer, ApproveSteps, BuildInfo, BuildList, CreateBuilds, CreateWorkflow,
    InstallOutputs, StepChoice, WorkflowInfo,
};

use super::doc::Op;
use super::{Body, Caller, SharedState, body_of};
use crate::error::Error;
use crate::service::workflows::WorkflowAct;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::CreateWorkflow>(post(create_workflow)),
        Op::endpoint::<ep::ApproveWorkflowStep>(post(approve)),
        Op::endpoint::<ep::DenyWorkflowStep>(post(deny)),
        Op::endpoint::<ep::RespondToApproval>(post(respond)),
        Op::endpoint::<ep::CancelWorkflow>(post(cancel)),
        Op::endpoint::<ep::RetryWorkflow>(post(retry)),
        Op::endpoint::<ep::SkipWorkflowStep>(post(skip)),
        Op::endpoint::<ep::GetInstallOutputs>(get(outputs)),
        Op::endpoint::<ep::CreateBuilds>(post(create_builds)),
        Op::endpoint::<ep::ListBuilds>(get(list_builds)),
        Op::endpoint::<ep::GetBuild>(get(get_build)),
    ]
}

pub(super) async fn create_workflow(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Body<CreateWorkflow>, Error>,
) -> Result<(StatusCode, Json<WorkflowInfo>), Error> {
    let req = body_of::<ep::CreateWorkflow, _>(&state, &caller, &[&key], body).await?;
    let wf = state.services().start_workflow(&caller, &key, req).await?;
    Ok((StatusCode::CREATED, Json(wf)))
}

/// Does `act` to workflow `raw` for the caller, through its service.
async fn act(
    state: &SharedState,
    caller: &Caller,
    raw: &str,
    act: WorkflowAct,
    step: Option<String>,
) -> Result<Json<WorkflowInfo>, Error> {
    let services = state.services();
    services
        .act_on_workflow(caller, raw, act, step)
        .await
        .map(Json)
}

async fn approve(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
    body: Result<Body<ApproveSteps>, Error>,
) -> Result<Json<WorkflowInfo>, Error> {
    let req = body_of::<ep::ApproveWorkflowStep, _>(&state, &caller, &[&raw], body).await?;
    let approve = WorkflowAct::Approve { all: req.all };
    act(&state, &caller, &raw, approve, req.step).await
}

async fn deny(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
    body: Result<Body<StepChoice>, Error>,
) -> Result<Json<WorkflowInfo>, Error> {
    let req = body_of::<ep::DenyWorkflowStep, _>(&state, &caller, &[&raw], body).await?;
    act(&state, &caller, &raw, WorkflowAct::Deny, req.step).await
}

async fn respond(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
    body: Result<Body<ApprovalAnswer>, Error>,
) -> Result<Json<WorkflowInfo>, Error> {
    let req = body_of::<ep::RespondToApproval, _>(&state, &caller, &[&raw], body).await?;
    let answer = WorkflowAct::Respond(req.response);
    act(&state, &caller, &raw, answer, req.step).await
}

async fn cancel(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
    body: Result<Body<StepChoice>, Error>,
) -> Result<Json<WorkflowInfo>, Error> {
    let req = body_of::<ep::CancelWorkflow, _>(&state, &caller, &[&raw], body).await?;
    act(&state, &caller, &raw, WorkflowAct::Cancel, req.step).await
}

async fn retry(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
    body: Result<Body<StepChoice>, Error>,
) -> Result<Json<WorkflowInfo>, Error> {
    let req = body_of::<ep::RetryWorkflow, _>(&state, &caller, &[&raw], body).await?;
    act(&state, &caller, &raw, WorkflowAct::Retry, req.step).await
}

async fn skip(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
    body: Result<Body<StepChoice>, Error>,
) -> Result<Json<WorkflowInfo>, Error> {
    let req = body_of::<ep::SkipWorkflowStep, _>(&state, &caller, &[&raw], body).await?;
    act(&state, &caller, &raw, WorkflowAct::Skip, req.step).await
}

async fn outputs(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<InstallOutputs>, Error> {
    state
        .services()
        .install_outputs(&caller, &key)
        .await
        .map(Json)
}

async fn create_builds(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Body<CreateBuilds>, Error>,
) -> Result<(StatusCode, Json<BuildList>), Error> {
    let req = body_of::<ep::CreateBuilds, _>(&state, &caller, &[&key], body).await?;
    let builds = state.services().create_builds(&caller, &key, req).await?;
    Ok((StatusCode::CREATED, Json(builds)))
}

async fn list_builds(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<BuildList>, Error> {
    state.services().list_builds(&caller, &key).await.map(Json)
}

async fn get_build(
    State(state): State<SharedState>,
    caller: Caller,
    Path(raw): Path<String>,
) -> Result<Json<BuildInfo>, Error> {
    state.services().get_build(&caller, &raw).await.map(Json)
}
