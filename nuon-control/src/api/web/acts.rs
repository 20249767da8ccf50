//! A workflow's actions from its page: approve (one step, or the rest of
//! the workflow), deny, retry, skip and cancel, each asked first on a
//! confirmation page and done by the API's own handler.

use axum::extract::{Form, Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{Markup, html};
use nuon_core::workflow::StepStatus;
use serde::Deserialize;

use super::cells::plan_summary;
use super::layout::page;
use super::pages::{Confirm, confirmation, workflow_of};
use super::{Web, csrf_refused, error_page, op_path};
use crate::api::{SharedState, Source};
use crate::error::Error;

#[derive(Deserialize)]
pub(super) struct ActForm {
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    step: Option<String>,
    /// `yes` once the person confirmed on the confirmation page.
    #[serde(default)]
    confirm: Option<String>,
    /// Approve: `yes` to approve the rest of the workflow too.
    #[serde(default)]
    all: Option<String>,
}

/// Approve, deny, retry, skip or cancel, from a workflow's page: the
/// service the API calls does it (the same refusals, and the audit trail
/// records it under the API's operation).
pub(super) async fn workflow_act(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Path((id, act)): Path<(String, String)>,
    Form(form): Form<ActForm>,
) -> Response {
    if let Some(r) = csrf_refused(&web, &form.csrf) {
        return r;
    }
    use crate::service::workflows::WorkflowAct;
    let (act, op) = match act.as_str() {
        "approve" => (
            WorkflowAct::Approve {
                all: form.all.as_deref() == Some("yes"),
            },
            "approveWorkflowStep",
        ),
        "deny" => (WorkflowAct::Deny, "denyWorkflowStep"),
        "retry" => (WorkflowAct::Retry, "retryWorkflow"),
        "skip" => (WorkflowAct::Skip, "skipWorkflowStep"),
        "cancel" => (WorkflowAct::Cancel, "cancelWorkflow"),
        other => {
            return error_page(Error::not_found(format!("no workflow action {other:?}")));
        }
    };
    let step = form.step.filter(|s| !s.is_empty());
    if form.confirm.as_deref() != Some("yes") {
        // Refused as the API refuses it, before anything is asked.
        if let Err(e) = crate::service::require_deployer(&web.auth.0) {
            return error_page(e);
        }
        let verb = op_path(op);
        let all = form.all.as_deref() == Some("yes");
        return page(confirm(&state, &web, &id, verb, step.as_deref(), all).await);
    }
    let caller = web.auth.caller_at(source);
    let services = state.services();
    match services.act_on_workflow(&caller, &id, act, step).await {
        Ok(_) => Redirect::to(&format!("/workflows/{id}")).into_response(),
        Err(e) => error_page(e),
    }
}

/// What a workflow action asks before it is done: what it will do (an
/// approval shows the plan it applies), and Yes / No.
async fn confirm(
    state: &SharedState,
    web: &Web,
    raw: &str,
    verb: &str,
    step: Option<&str>,
    all: bool,
) -> Result<Markup, Error> {
    let wf = workflow_of(state, web, raw).await?;
    let target = step
        .and_then(|n| wf.steps.iter().position(|s| s.name == n))
        .or_else(|| {
            wf.steps
                .iter()
                .position(|s| s.status == StepStatus::WaitingApproval)
        });
    let plan = target
        .and_then(|i| nuon_core::workflow::plan_step_of(&wf.steps, i))
        .and_then(|p| p.outputs.get("changes").filter(|c| c.is_object()));
    let name = target.map(|i| wf.steps[i].name.clone()).unwrap_or_default();
    let (question, what, button, class) = match verb {
        "approve" if all => (
            format!("Approve {name} and the rest of this workflow?"),
            "It runs next, applying the plan below; every later apply of this workflow runs after its plan without asking, each recorded as approved by you.",
            "Yes, approve all",
            "primary",
        ),
        "approve" => (
            format!("Approve {name}?"),
            "It runs next, applying the plan below.",
            "Yes, approve",
            "primary",
        ),
        "deny" => (
            format!("Deny {name}?"),
            "It is skipped, and so is every step that depends on it.",
            "Yes, deny",
            "danger",
        ),
        "cancel" => (
            "Cancel this workflow?".to_owned(),
            "Its running job is asked to stop; its other steps will not run.",
            "Yes, cancel it",
            "danger",
        ),
        "skip" => (
            format!("Skip {name} and go on?"),
            "It is skipped with what it leads to (a plan's apply, an apply's health checks); the rest of the workflow runs.",
            "Yes, skip it",
            "danger",
        ),
        _ => (
            "Retry this workflow?".to_owned(),
            "It runs again from its failed step (an apply from its plan).",
            "Yes, retry",
            "primary",
        ),
    };
    let what = html! {
        p { (what) }
        @if let Some(c) = plan { div { "Plan: " (plan_summary(c)) } }
    };
    let hidden: Vec<(String, String)> = step
        .map(|s| ("step".to_owned(), s.to_owned()))
        .into_iter()
        .chain(all.then(|| ("all".to_owned(), "yes".to_owned())))
        .collect();
    Ok(confirmation(
        web,
        &Confirm {
            question: &question,
            what,
            action: &format!("/workflows/{}/{verb}", wf.id),
            button,
            class,
            hidden: &hidden,
            type_name: None,
            back: &format!("/workflows/{}", wf.id),
        },
    ))
}

/// Apply or discard an install's pending values, from its page: the
/// service's own operations (the same refusals and audit records), then
/// back to the install.
pub(super) async fn pending_act(
    State(state): State<SharedState>,
    Source(source): Source,
    web: Web,
    Path((id, act)): Path<(String, String)>,
    Form(form): Form<ActForm>,
) -> Response {
    if let Some(r) = csrf_refused(&web, &form.csrf) {
        return r;
    }
    let (services, caller) = (state.services(), web.auth.caller_at(source));
    let done = match act.as_str() {
        "apply" => services.apply_pending(&caller, &id).await,
        "discard" => services.discard_pending(&caller, &id).await,
        other => Err(Error::not_found(format!(
            "no action {other:?} on pending values"
        ))),
    };
    match done {
        Ok(d) => Redirect::to(&format!("/installs/{}", d.install.id)).into_response(),
        Err(e) => error_page(e),
    }
}
