//! The engine's rules, as pure functions of a workflow's steps: what runs
//! next, what an approval or a denial applies to, what a denial skips,
//! what a cancel stops, what a retry redoes, and what the install's state
//! and outputs become. No store, no clock, no I/O: the table tests at the
//! bottom run them directly.

use nuon_core::app::AppConfig;
use nuon_core::model::{InstallState, Step, Workflow};
use nuon_core::wire::ErrorCode;
use nuon_core::wire::InstallOutputs;
use nuon_core::workflow::{
    StepKind, StepStatus, WorkflowKind, WorkflowStatus, applies_a_plan, destroys,
    left_out_by_denial, nothing_was_there,
};
pub(crate) use nuon_core::workflow::{plan_changes_nothing, plan_step_of};
use nuon_core::{ArtifactRef, JobId, JobStatus};
use serde_json::Value;

use super::EngineError;

/// What a workflow does next, read from its steps alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Next {
    /// Step `i`'s job runs: whether it has ended decides.
    Job(usize),
    /// Step `i` waits for an operator's approval.
    Waiting(usize),
    /// Step `i` needs an approval it has not asked for yet.
    Ask(usize),
    /// Step `i` needs an approval, but its plan changes nothing: it runs
    /// without one.
    NoApprovalNeeded(usize),
    /// Step `i` runs now.
    Dispatch(usize),
    /// Step `i` is the control plane's own wait (for the install's stack,
    /// for its runner): it looks whether what it waits for is there.
    Await(usize),
    /// Step `i` failed, and the workflow with it.
    Failed(usize),
    /// Every step is behind: the workflow ends so.
    End(WorkflowStatus),
}

/// Whether a plan's summary (`add`, `change`, `destroy`) has any change.
pub(crate) fn has_changes(changes: &serde_json::Value) -> bool {
    ["add", "change", "destroy"]
        .iter()
        .any(|k| changes[*k].as_u64().unwrap_or(0) > 0)
}

/// What a workflow does next: its first step that is not passed decides.
pub(crate) fn next(steps: &[Step]) -> Next {
    for (i, step) in steps.iter().enumerate() {
        let approved = step.approved_at_ms.is_some();
        if step.kind.is_await() && matches!(step.status, StepStatus::Pending | StepStatus::Running)
        {
            return Next::Await(i);
        }
        return match step.status {
            s if s.is_passed() => continue,
            StepStatus::Running => Next::Job(i),
            StepStatus::WaitingApproval if !approved => Next::Waiting(i),
            StepStatus::Pending if step.needs_approval && !approved => {
                if plan_changes_nothing(steps, i) {
                    Next::NoApprovalNeeded(i)
                } else {
                    Next::Ask(i)
                }
            }
            StepStatus::Pending | StepStatus::WaitingApproval => Next::Dispatch(i),
            _ => Next::Failed(i),
        };
    }
    Next::End(if left_something_out(steps) {
        WorkflowStatus::Partial
    } else {
        WorkflowStatus::Succeeded
    })
}

/// Whether a denial (or nothing to do) left steps out. A destroy skipped
/// because there was nothing to destroy left nothing out.
fn left_something_out(steps: &[Step]) -> bool {
    steps.iter().any(|s| {
        (s.status == StepStatus::Skipped && !nothing_was_there(s)) || s.status == StepStatus::Denied
    })
}

/// The steps that destroy one target, when step `i` starts them: its sync
/// (if `i` is the sync just before a destroy plan), its destroy plan and
/// the destroy that applies it. Skipped together when there is nothing to
/// destroy.
pub(crate) fn destroy_group(steps: &[Step], i: usize) -> Option<Vec<usize>> {
    let me = steps.get(i)?;
    let plan = match me.kind {
        StepKind::Sync | StepKind::SandboxSync => {
            let next = steps.get(i + 1)?;
            (next.target == me.target
                && matches!(
                    next.kind,
                    StepKind::DestroyPlan | StepKind::SandboxDestroyPlan
                ))
            .then_some(i + 1)?
        }
        StepKind::DestroyPlan | StepKind::SandboxDestroyPlan => i,
        _ => return None,
    };
    let apply = steps[plan + 1..].iter().position(|s| {
        s.target == me.target && matches!(s.kind, StepKind::Destroy | StepKind::SandboxDestroy)
    })?;
    Some((i..=plan).chain([plan + 1 + apply]).collect())
}

/// The successful plan step an apply or destroy step carries out.
pub(crate) fn planned<'a>(steps: &'a [Step], step: &Step) -> Result<&'a Step, String> {
    let i = position(steps, step.index);
    plan_step_of(steps, i)
        .filter(|p| p.status == StepStatus::Succeeded)
        .ok_or_else(|| format!("{} has no successful plan to apply", step.name))
}

/// The artifact the workflow's sync of `step`'s target reported before
/// `step`, if it synced it.
pub(crate) fn synced_before(steps: &[Step], step: &Step) -> Option<Result<ArtifactRef, String>> {
    let synced = steps.iter().rev().find(|s| {
        s.target == step.target
            && matches!(s.kind, StepKind::Sync | StepKind::SandboxSync)
            && s.status == StepStatus::Succeeded
            && s.index < step.index
    })?;
    Some(
        serde_json::from_value(synced.outputs["artifact"].clone()).map_err(|e| {
            format!(
                "the sync of {} reported no artifact: {e}",
                step.target.as_deref().unwrap_or("sandbox")
            )
        }),
    )
}

fn position(steps: &[Step], index: u32) -> usize {
    steps.iter().position(|s| s.index == index).unwrap_or(0)
}

/// Finds the step `key` names (an index or a name), or the one `pick`
/// chooses.
pub(crate) fn find_step<'a>(
    wf: &'a Workflow,
    key: Option<&str>,
    pick: impl Fn(&Step) -> bool,
    what: &str,
) -> Result<&'a Step, EngineError> {
    match key {
        Some(k) => wf
            .steps
            .iter()
            .find(|s| s.name == k || s.index.to_string() == k)
            .ok_or_else(|| {
                EngineError::NotFound(format!(
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
            EngineError::conflict(
                ErrorCode::NoSuchStep,
                format!("workflow {} has no step {what}", wf.id),
            )
        }),
    }
}

/// Whether the workflow still takes approvals and cancels.
fn takes_acts(wf: &Workflow) -> bool {
    wf.status == WorkflowStatus::Pending || wf.status == WorkflowStatus::Running
}

/// How a denial leaves the rest of a workflow (Nuon's `deny`,
/// `deny-skip-current`, `deny-skip-current-and-dependents`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Denial {
    /// Nothing after the step runs; the workflow fails.
    Fail,
    /// The step (and the rest of its target) is skipped; the others run.
    SkipCurrent,
    /// The step and every step that depends on it are skipped.
    SkipDependents,
}

/// The steps a re-plan of `waiting` (an apply or destroy that waits for an
/// approval) runs again: its plan, then itself.
pub(crate) fn replan(steps: &[Step], waiting: &Step) -> Result<[u32; 2], EngineError> {
    if !nuon_core::workflow::applies_a_plan(waiting.kind) {
        return Err(EngineError::conflict(
            ErrorCode::NotAPlan,
            format!(
                "step {:?} applies no plan: there is nothing to plan again",
                waiting.name
            ),
        ));
    }
    let plan = steps
        .iter()
        .rev()
        .filter(|s| s.index < waiting.index && s.target == waiting.target)
        .find(|s| {
            matches!(
                s.kind,
                StepKind::Plan
                    | StepKind::SandboxPlan
                    | StepKind::DestroyPlan
                    | StepKind::SandboxDestroyPlan
            )
        })
        .ok_or_else(|| {
            EngineError::Internal(format!("step {:?} has no plan before it", waiting.name))
        })?;
    Ok([plan.index, waiting.index])
}

/// Whether the apply at `i`, which would ask for an approval, is approved
/// by its component's (or the sandbox's) `auto_approve_on_policies_passing`:
/// at least one policy applies to it, and its plan (which a `deny` would
/// have failed) succeeded.
pub(crate) fn auto_approved(config: &AppConfig, steps: &[Step], i: usize) -> bool {
    let step = &steps[i];
    let (on, component) = match (step.kind, step.target.as_deref()) {
        (StepKind::SandboxApply, None) => (
            config
                .sandbox
                .as_ref()
                .is_some_and(|s| s.auto_approve_on_policies_passing),
            None,
        ),
        (StepKind::Apply, Some(t)) => match config.component(t) {
            Some(c) => (c.auto_approve_on_policies_passing, Some(c.name.as_str())),
            None => return false,
        },
        _ => return false,
    };
    on && !nuon_core::app::policies_for(config, component).is_empty()
        && replan(steps, step).is_ok_and(|[plan, _]| {
            steps
                .iter()
                .any(|s| s.index == plan && s.status == StepStatus::Succeeded)
        })
}

/// The step an approval (or, with `deny`, a denial) of `wf` applies to:
/// the one `key` names, or the one that waits. An approval is of a plan
/// someone saw, so only a waiting step takes one; a denial may come ahead
/// of time.
pub(crate) fn approval_step<'a>(
    wf: &'a Workflow,
    key: Option<&str>,
    deny: bool,
) -> Result<&'a Step, EngineError> {
    let id = &wf.id;
    if !takes_acts(wf) {
        return Err(EngineError::conflict(
            ErrorCode::WorkflowEnded,
            format!(
                "workflow {id} has ended ({}); nothing waits for approval",
                wf.status
            ),
        ));
    }
    let step = find_step(
        wf,
        key,
        |s| s.status == StepStatus::WaitingApproval,
        "waiting for approval",
    )?;
    let waiting = step.status == StepStatus::WaitingApproval
        || (deny && step.status == StepStatus::Pending && step.needs_approval);
    if !waiting || step.approved_at_ms.is_some() {
        let why = if step.needs_approval && step.status == StepStatus::Pending {
            "its plan has not run yet; approve it once it waits"
        } else {
            "it does not wait for an approval"
        };
        return Err(EngineError::conflict(
            ErrorCode::NotWaiting,
            format!(
                "step {:?} of workflow {id} is {}: {why}",
                step.name, step.status
            ),
        ));
    }
    Ok(step)
}

/// The steps after `denied` that its denial skips: those still to run
/// that deploy or destroy what the denial leaves out, and the actions
/// that read or hook on it.
pub(crate) fn skipped_by_denial(
    config: &AppConfig,
    steps: &[Step],
    denied: &Step,
    how: Denial,
) -> Vec<u32> {
    let later = || {
        steps
            .iter()
            .filter(|s| s.index > denied.index)
            .filter(|s| s.status == StepStatus::Pending || s.status == StepStatus::WaitingApproval)
    };
    match how {
        Denial::Fail => return later().map(|s| s.index).collect(),
        Denial::SkipCurrent => {
            return later()
                .filter(|s| {
                    s.target == denied.target
                        && !matches!(s.kind, StepKind::Action | StepKind::SecretsSync)
                })
                .map(|s| s.index)
                .collect();
        }
        Denial::SkipDependents => {}
    }
    let (left_out, sandbox_too) =
        left_out_by_denial(config, denied.target.as_deref(), destroys(denied.kind));
    steps
        .iter()
        .filter(|s| s.index > denied.index)
        .filter(|s| s.status == StepStatus::Pending || s.status == StepStatus::WaitingApproval)
        .filter(|s| match (s.kind, &s.target) {
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
        })
        .map(|s| s.index)
        .collect()
}

/// What a cancel does: the steps it marks cancelled (with the job to stop,
/// for one that runs) and the workflow's status after it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Cancel {
    /// Each step cancelled, and its running job.
    pub(crate) steps: Vec<(u32, Option<JobId>)>,
    /// `cancelling` while a job stops (the install stays busy until it has
    /// ended and what it did is recorded), else `cancelled`.
    pub(crate) status: WorkflowStatus,
}

/// What cancelling `wf` does.
pub(crate) fn cancel(wf: &Workflow) -> Result<Cancel, EngineError> {
    if !takes_acts(wf) {
        return Err(EngineError::conflict(
            ErrorCode::WorkflowEnded,
            format!(
                "workflow {} has ended ({}); there is nothing to cancel",
                wf.id, wf.status
            ),
        ));
    }
    let mut stopping = false;
    let mut steps = Vec::new();
    for s in &wf.steps {
        match s.status {
            StepStatus::Running => {
                stopping |= s.job_id.is_some();
                steps.push((s.index, s.job_id.clone()));
            }
            StepStatus::Pending | StepStatus::WaitingApproval => steps.push((s.index, None)),
            _ => {}
        }
    }
    let status = if stopping || wf.status == WorkflowStatus::Running {
        WorkflowStatus::Cancelling
    } else {
        WorkflowStatus::Cancelled
    };
    Ok(Cancel { steps, status })
}

/// What a retry of `wf` redoes: the step it retries (the one `key` names,
/// or the first that did not finish) and every step it sets back to
/// pending. An apply is retried from its plan: a saved plan is stale once
/// an apply of it has run (even partly). `others` are the install's
/// workflows: one still active keeps the install busy.
pub(crate) fn retry<'a>(
    wf: &'a Workflow,
    key: Option<&str>,
    others: &[Workflow],
) -> Result<(&'a Step, Vec<u32>), EngineError> {
    let id = &wf.id;
    if wf.status != WorkflowStatus::Failed && wf.status != WorkflowStatus::Cancelled {
        let now = if takes_acts(wf) {
            format!("is {}", wf.status)
        } else {
            format!("has ended ({})", wf.status)
        };
        return Err(EngineError::conflict(
            ErrorCode::NotFailed,
            format!("workflow {id} {now}: only a failed or cancelled workflow can be retried"),
        ));
    }
    if let Some(o) = others.iter().find(|o| o.id != *id && o.status.is_active()) {
        return Err(EngineError::conflict(
            ErrorCode::InstallBusy,
            format!(
                "workflow {} is {} on this install; retry once it ends (or cancel it)",
                o.id, o.status
            ),
        ));
    }
    let unfinished = |s: &Step| s.status == StepStatus::Failed || s.status == StepStatus::Cancelled;
    let first = find_step(wf, None, unfinished, "that failed or was cancelled")?;
    let step = find_step(wf, key, unfinished, "that failed")?;
    if step.index > first.index {
        return Err(EngineError::conflict(
            ErrorCode::AfterTheFailure,
            format!(
                "step {:?} comes after {:?}, which did not finish: retry from it (or without --step)",
                step.name, first.name
            ),
        ));
    }
    let from = if applies_a_plan(step.kind) {
        plan_step_of(&wf.steps, position(&wf.steps, step.index))
            .map(|p| p.index)
            .unwrap_or(step.index)
    } else {
        step.index
    };
    let redo = wf
        .steps
        .iter()
        .filter(|s| s.index >= from)
        .filter(|s| s.status != StepStatus::Skipped && s.status != StepStatus::Denied)
        .map(|s| s.index)
        .collect();
    Ok((step, redo))
}

/// What a skip of `wf`'s failed step (or the one `key` names) does: the
/// step, the later steps it takes with it (of its target: a plan's apply,
/// an apply's health checks; the sandbox's for a sandbox step) and the
/// steps that run again (the rest that did not finish). It may be asked
/// of what a retry may be asked of.
pub(crate) fn skip<'a>(
    wf: &'a Workflow,
    key: Option<&str>,
    others: &[Workflow],
) -> Result<(&'a Step, Vec<u32>, Vec<u32>), EngineError> {
    let (step, _) = retry(wf, key, others)?;
    if !matches!(step.status, StepStatus::Failed | StepStatus::Cancelled) {
        return Err(EngineError::conflict(
            ErrorCode::NotFailedStep,
            format!(
                "step {:?} of workflow {} is {}: only a step that failed or was cancelled can be skipped",
                step.name, wf.id, step.status
            ),
        ));
    }
    let with_it = |s: &Step| match &step.target {
        Some(t) => {
            s.target.as_ref() == Some(t)
                && !matches!(s.kind, StepKind::Action | StepKind::SecretsSync)
                && !matches!(step.kind, StepKind::Action | StepKind::SecretsSync)
        }
        None => step.kind.is_sandbox() && s.kind.is_sandbox() && s.target.is_none(),
    };
    let later = wf.steps.iter().filter(|s| {
        s.index > step.index
            && matches!(
                s.status,
                StepStatus::Pending | StepStatus::Cancelled | StepStatus::Failed
            )
    });
    let (taken, redo): (Vec<&Step>, Vec<&Step>) = later.partition(|s| with_it(s));
    Ok((
        step,
        taken.iter().map(|s| s.index).collect(),
        redo.iter().map(|s| s.index).collect(),
    ))
}

/// The first automatic retry waits this long; each next one twice as long.
pub(crate) const RETRY_BACKOFF_MS: i64 = 2_000;
/// The longest wait between automatic retries.
pub(crate) const RETRY_BACKOFF_MAX_MS: i64 = 60_000;

/// How long the automatic retry after `failed` earlier tries waits.
pub(crate) fn retry_backoff_ms(failed: usize) -> i64 {
    let doublings = failed.min(16) as u32;
    (RETRY_BACKOFF_MS << doublings).min(RETRY_BACKOFF_MAX_MS)
}

/// An automatic retry of step `i`, whose job failed: `Some` with the
/// steps it sets back to pending (an apply from its plan, as a retry by
/// hand does), when its component's (or the sandbox's) `max_auto_retries`
/// leaves a try.
pub(crate) fn auto_retry(
    config: &AppConfig,
    steps: &[Step],
    i: usize,
    status: JobStatus,
) -> Option<Vec<u32>> {
    let step = &steps[i];
    if status == JobStatus::Cancelled || step.kind == StepKind::Action {
        return None;
    }
    let max = nuon_core::workflow::max_auto_retries_of(config, step.kind, step.target.as_deref());
    if auto_tries(&step.attempts) >= max as usize {
        return None;
    }
    let from = if applies_a_plan(step.kind) {
        plan_step_of(steps, i).map_or(step.index, |p| p.index)
    } else {
        step.index
    };
    Some(
        steps
            .iter()
            .filter(|s| s.index >= from && s.index <= step.index)
            .map(|s| s.index)
            .collect(),
    )
}

/// The tries that failed since the step was last started by a person (each
/// start by hand gets `max_auto_retries` again).
pub(crate) fn auto_tries(attempts: &[nuon_core::model::StepAttempt]) -> usize {
    attempts
        .iter()
        .rev()
        .take_while(|a| a.retry_at_ms.is_some())
        .count()
}

/// `step`'s tries with the one that just failed added: its job, its
/// reason, when, and (for an automatic retry) when the next may start.
pub(crate) fn with_failed_try(
    step: &Step,
    reason: String,
    failed_at_ms: i64,
    retry_at_ms: Option<i64>,
) -> Vec<nuon_core::model::StepAttempt> {
    let mut all = step.attempts.clone();
    all.push(nuon_core::model::StepAttempt {
        job_id: step.job_id.clone(),
        reason,
        failed_at_ms,
        retry_at_ms,
    });
    all
}

/// When the automatic retry a workflow waits for may start, if it waits
/// for one: the newest try of a step set back to pending, not yet due.
pub(crate) fn retry_due(steps: &[Step], now_ms: i64) -> Option<i64> {
    steps
        .iter()
        .filter(|s| s.status == StepStatus::Pending)
        .filter_map(|s| s.attempts.last()?.retry_at_ms)
        .filter(|at| *at > now_ms)
        .max()
}

/// The install's state while a workflow of `kind` runs (an action leaves
/// it as it was).
pub(crate) fn install_state_during(kind: WorkflowKind, now: InstallState) -> InstallState {
    match kind {
        WorkflowKind::Provision | WorkflowKind::Reprovision => InstallState::Provisioning,
        WorkflowKind::Deploy | WorkflowKind::Runbook => InstallState::Deploying,
        WorkflowKind::Teardown => InstallState::TearingDown,
        WorkflowKind::Deprovision => InstallState::Deprovisioning,
        WorkflowKind::Action | WorkflowKind::Drift => now,
    }
}

/// What a workflow that succeeded makes of the release its install runs:
/// a whole deploy, provision or reprovision by hand or by a rollout sets
/// it to the workflow's (none when it deployed outside releases); a
/// partial or plan-only run leaves it (`None`).
pub(crate) fn release_after(wf: &Workflow) -> Option<Option<nuon_core::ReleaseId>> {
    let whole = matches!(
        wf.kind,
        WorkflowKind::Deploy | WorkflowKind::Provision | WorkflowKind::Reprovision
    ) && wf.component.is_none()
        && wf.trigger.is_none();
    whole.then(|| wf.release_id.clone())
}

/// How a workflow that ended with `status` ended for a change it carried
/// (`denied` when a step of it was), and the components it deployed: each
/// one applied or destroyed (or found with nothing to destroy), and each
/// deployed by its sync alone (an image).
pub(crate) fn what_ran(wf: &Workflow, status: WorkflowStatus) -> (&'static str, Vec<&str>) {
    let denied = wf.steps.iter().any(|s| s.status == StepStatus::Denied);
    let applied = |s: &Step| matches!(s.kind, StepKind::Apply | StepKind::Destroy);
    let deployed = wf
        .steps
        .iter()
        .filter(|s| match (s.kind, s.status) {
            (StepKind::Apply | StepKind::Destroy, StepStatus::Succeeded) => true,
            (StepKind::Destroy, StepStatus::Skipped) => {
                s.outputs[nuon_core::workflow::NOTHING_TO_DESTROY] == Value::Bool(true)
            }
            (StepKind::Sync, StepStatus::Succeeded) => {
                !wf.steps.iter().any(|o| applied(o) && o.target == s.target)
            }
            _ => false,
        })
        .filter_map(|s| s.target.as_deref())
        .collect();
    let how = if denied {
        StepStatus::Denied.as_str()
    } else {
        status.as_str()
    };
    (how, deployed)
}

/// Whether `wf` is a plan-only run (`--plan-only`).
pub(crate) fn plan_only(wf: &Workflow) -> bool {
    wf.trigger.as_deref() == Some(nuon_core::workflow::PLAN_ONLY)
}

/// The install's state once its workflow ended with `status`: `whole`
/// when it was not about one component, `interrupted` when a cancel
/// stopped an apply or destroy part way. An action changes nothing
/// deployed.
pub(crate) fn install_state_after(
    wf: &Workflow,
    status: WorkflowStatus,
    interrupted: bool,
    now: InstallState,
) -> InstallState {
    match (wf.kind, status) {
        (kind, _) if nuon_core::workflow::leaves_state(kind) || plan_only(wf) => now,
        (_, WorkflowStatus::Failed) => InstallState::Failed,
        (_, WorkflowStatus::Cancelled) if interrupted => InstallState::Failed,
        (WorkflowKind::Deprovision, WorkflowStatus::Succeeded) if wf.component.is_none() => {
            InstallState::Deprovisioned
        }
        // Every component is down; the sandbox stays.
        (WorkflowKind::Teardown, WorkflowStatus::Succeeded) if wf.component.is_none() => {
            InstallState::TornDown
        }
        _ => InstallState::Active,
    }
}

/// Folds what a successful apply or destroy step reported into the
/// install's outputs: what it reports replaces what it reported before.
pub(crate) fn record_outputs(all: &mut InstallOutputs, step: &Step, job: &Value) {
    let tf: serde_json::Map<String, Value> =
        job["outputs"].as_object().cloned().unwrap_or_default();
    // An action's run: what it wrote to its outputs file.
    if let (StepKind::Action, Some(a)) = (step.kind, &step.target) {
        all.actions.insert(a.clone(), tf);
        return;
    }
    let from = match (step.kind, &step.target) {
        (StepKind::SandboxApply | StepKind::SandboxDestroy, _) | (_, None) => "sandbox".to_owned(),
        (_, Some(c)) => c.clone(),
    };
    // A destroyed component's outputs (and which of them are sensitive)
    // are kept apart: a later destroy of what depended on it renders with
    // them.
    if step.kind != StepKind::Destroy {
        all.sensitive
            .retain(|n| n.split_once('.').is_none_or(|(f, _)| f != from));
    }
    match (step.kind, &step.target) {
        (StepKind::SandboxApply, _) => all.sandbox = tf,
        (StepKind::SandboxDestroy, _) => all.sandbox.clear(),
        (StepKind::Apply, Some(c)) => {
            all.destroyed.remove(c);
            all.components.insert(c.clone(), tf);
        }
        (StepKind::Destroy, Some(c)) => {
            if let Some(last) = all.components.remove(c) {
                all.destroyed.insert(c.clone(), last);
            }
        }
        _ => {}
    }
    if matches!(step.kind, StepKind::SandboxApply | StepKind::Apply) {
        for name in job["sensitive"].as_array().into_iter().flatten() {
            if let Some(n) = name.as_str() {
                all.sensitive.push(format!("{from}.{n}"));
            }
        }
    }
}

/// An image component's outputs once its sync put it in the install's
/// registry: where it is, in Nuon's shape (`image`: its
/// `OCIArtifactOutputs`, read as `.outputs.image.repository` and
/// `.outputs.image.tag`) and ours beside it (`repository`, `digest`, `tag`,
/// `reference` as `repository@digest`).
pub(crate) fn image_outputs(a: &ArtifactRef, tag: Option<&str>) -> serde_json::Map<String, Value> {
    let tag = tag.unwrap_or_default();
    let image = serde_json::json!({
        "tag": tag,
        "repository": a.repo,
        "media_type": "application/vnd.oci.image.manifest.v1+json",
        "digest": a.digest.to_string(),
        "size": a.size.unwrap_or_default(),
        "urls": [],
        "annotations": {},
        "artifact_type": "",
        "platform": {"architecture": "", "os": "", "os_version": "", "variant": "", "os_features": []},
    });
    let mut o = serde_json::Map::new();
    o.insert("repository".into(), Value::String(a.repo.clone()));
    o.insert("digest".into(), Value::String(a.digest.to_string()));
    o.insert("tag".into(), Value::String(tag.to_owned()));
    o.insert(
        "reference".into(),
        Value::String(format!("{}@{}", a.repo, a.digest)),
    );
    o.insert("image".into(), image);
    o
}

#[cfg(test)]
mod tests {
    use nuon_appconfig::parse;
    use nuon_core::app::SourceFile;
    use nuon_core::workflow::NOTHING_TO_DESTROY;
    use nuon_core::{InstallId, WorkflowId};
    use serde_json::json;

    use super::*;

    use StepKind as K;
    use StepStatus as S;

    /// A step: `(kind, target, status)`; applies and destroys need an
    /// approval.
    fn step(i: u32, kind: StepKind, target: Option<&str>, status: StepStatus) -> Step {
        Step {
            index: i,
            name: format!("{kind:?} {}", target.unwrap_or("sandbox")).to_lowercase(),
            kind,
            target: target.map(str::to_owned),
            needs_approval: applies_a_plan(kind),
            status,
            job_id: (status == S::Running).then(JobId::generate),
            approved_at_ms: None,
            approved_by: None,
            reason: None,
            outputs: Value::Null,
            attempts: Vec::new(),
        }
    }

    /// A deploy of `db` (plan, apply) then `app` (plan, apply), with these
    /// statuses.
    fn deploy(statuses: [StepStatus; 4]) -> Vec<Step> {
        let shape = [
            (K::Plan, "db"),
            (K::Apply, "db"),
            (K::Plan, "app"),
            (K::Apply, "app"),
        ];
        steps_of(&shape, &statuses)
    }

    /// Steps of these kinds and targets, with these statuses.
    fn steps_of(shape: &[(StepKind, &str)], statuses: &[StepStatus]) -> Vec<Step> {
        shape
            .iter()
            .zip(statuses)
            .enumerate()
            .map(|(i, ((k, t), s))| step(i as u32, *k, Some(t), *s))
            .collect()
    }

    fn workflow(status: WorkflowStatus, steps: Vec<Step>) -> Workflow {
        Workflow {
            id: WorkflowId::generate(),
            install_id: InstallId::generate(),
            kind: WorkflowKind::Deploy,
            status,
            component: None,
            config_version: 1,
            created_at_ms: 0,
            finished_at_ms: None,
            inputs: Default::default(),
            trigger: None,
            release_id: None,
            steps,
        }
    }

    fn changes(add: u64) -> Value {
        json!({"changes": {"add": add, "change": 0, "destroy": 0}})
    }

    #[test]
    fn what_runs_next() {
        let approved = |mut s: Vec<Step>, i: usize| {
            s[i].approved_at_ms = Some(1);
            s
        };
        let planned = |mut s: Vec<Step>, i: usize, add: u64| {
            s[i].outputs = changes(add);
            s
        };
        let table: Vec<(&str, Vec<Step>, Next)> = vec![
            (
                "a new workflow plans first",
                deploy([S::Pending; 4]),
                Next::Dispatch(0),
            ),
            (
                "a running job decides",
                deploy([S::Running, S::Pending, S::Pending, S::Pending]),
                Next::Job(0),
            ),
            (
                "an apply whose plan changes something asks",
                planned(
                    deploy([S::Succeeded, S::Pending, S::Pending, S::Pending]),
                    0,
                    2,
                ),
                Next::Ask(1),
            ),
            (
                "an apply whose plan changes nothing runs without asking",
                planned(
                    deploy([S::Succeeded, S::Pending, S::Pending, S::Pending]),
                    0,
                    0,
                ),
                Next::NoApprovalNeeded(1),
            ),
            (
                "a waiting step waits",
                deploy([S::Succeeded, S::WaitingApproval, S::Pending, S::Pending]),
                Next::Waiting(1),
            ),
            (
                "an approved step runs",
                approved(
                    deploy([S::Succeeded, S::WaitingApproval, S::Pending, S::Pending]),
                    1,
                ),
                Next::Dispatch(1),
            ),
            (
                "an approved pending step runs (a retry keeps no approval, but a plan that changed nothing gave one)",
                approved(
                    deploy([S::Succeeded, S::Pending, S::Pending, S::Pending]),
                    1,
                ),
                Next::Dispatch(1),
            ),
            (
                "a failed step fails the workflow",
                deploy([S::Succeeded, S::Failed, S::Pending, S::Pending]),
                Next::Failed(1),
            ),
            (
                "a denied step is passed",
                deploy([S::Succeeded, S::Denied, S::Pending, S::Pending]),
                Next::Dispatch(2),
            ),
            (
                "skipped steps are passed",
                deploy([S::Skipped, S::Skipped, S::Pending, S::Pending]),
                Next::Dispatch(2),
            ),
            (
                "all succeeded",
                deploy([S::Succeeded; 4]),
                Next::End(WorkflowStatus::Succeeded),
            ),
            (
                "a denial leaves the end partial",
                deploy([S::Succeeded, S::Denied, S::Succeeded, S::Succeeded]),
                Next::End(WorkflowStatus::Partial),
            ),
            (
                "a skip leaves the end partial",
                deploy([S::Succeeded, S::Succeeded, S::Skipped, S::Skipped]),
                Next::End(WorkflowStatus::Partial),
            ),
            (
                "no steps end at once",
                Vec::new(),
                Next::End(WorkflowStatus::Succeeded),
            ),
        ];
        for (what, steps, want) in table {
            assert_eq!(next(&steps), want, "{what}");
        }
    }

    #[test]
    fn what_a_denial_skips() {
        let module = |name: &str, deps: &str| {
            SourceFile::new(
                format!("components/{name}.toml"),
                format!(
                    "name = \"{name}\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\ndependencies = [{deps}]\npath = \"./{name}\"\n"
                ),
            )
        };
        let action = |name: &str, extra: &str| {
            SourceFile::new(
                format!("actions/{name}.toml"),
                format!(
                    "name = \"{name}\"\ntimeout = \"1m\"\n{extra}[[triggers]]\ntype = \"manual\"\n[[steps]]\nname = \"s\"\ncommand = \"true\"\n"
                ),
            )
        };
        let files = [
            SourceFile::new("metadata.toml", "version = \"v2\"\n"),
            module("db", ""),
            module("app", "\"db\""),
            module("cache", ""),
            action("smoke", "dependencies = [\"app\"]\n"),
            action(
                "hook",
                "[[triggers]]\ntype = \"post-deploy-component\"\ncomponent_name = \"db\"\n",
            ),
            action("other", ""),
        ];
        let (config, d) = parse(&files);
        let config = config.unwrap_or_else(|| panic!("{d}"));
        let steps = vec![
            step(0, K::Plan, Some("db"), S::Succeeded),
            step(1, K::Apply, Some("db"), S::WaitingApproval),
            step(2, K::Plan, Some("cache"), S::Pending),
            step(3, K::Apply, Some("cache"), S::Pending),
            step(4, K::Plan, Some("app"), S::Pending),
            step(5, K::Apply, Some("app"), S::Pending),
            step(6, K::Action, Some("smoke"), S::Pending),
            step(7, K::Action, Some("hook"), S::Pending),
            step(8, K::Action, Some("other"), S::Pending),
        ];
        use Denial as D;
        let table: Vec<(&str, usize, Denial, Vec<u32>)> = vec![
            (
                "denying the database skips what depends on it and the actions on it",
                1,
                D::SkipDependents,
                vec![4, 5, 6, 7],
            ),
            (
                "denying a leaf skips nothing after it",
                3,
                D::SkipDependents,
                vec![],
            ),
            (
                "denying the app skips the action that reads it",
                5,
                D::SkipDependents,
                vec![6],
            ),
            (
                "a plain denial skips everything after it (the workflow fails)",
                1,
                D::Fail,
                vec![2, 3, 4, 5, 6, 7, 8],
            ),
            (
                "skipping the current apply leaves its dependents to run",
                1,
                D::SkipCurrent,
                vec![],
            ),
            (
                "skipping the current plan skips its apply, not the others",
                2,
                D::SkipCurrent,
                vec![3],
            ),
        ];
        for (what, denied, how, want) in table {
            assert_eq!(
                skipped_by_denial(&config, &steps, &steps[denied], how),
                want,
                "{what}"
            );
        }
        // Skipping the sandbox's apply skips its plan's kin, not the
        // secrets sync (no target either) nor the components after it.
        let sandbox = vec![
            step(0, K::SandboxPlan, None, S::Succeeded),
            step(1, K::SandboxApply, None, S::WaitingApproval),
            step(2, K::SecretsSync, None, S::Pending),
            step(3, K::Plan, Some("db"), S::Pending),
        ];
        assert_eq!(
            skipped_by_denial(&config, &sandbox, &sandbox[1], D::SkipCurrent),
            Vec::<u32>::new()
        );
        // A re-plan of the waiting apply runs its plan, then asks again.
        assert_eq!(replan(&steps, &steps[1]).unwrap(), [0, 1]);
        assert_eq!(replan(&steps, &steps[0]).unwrap_err().code(), "not_a_plan");
        // No component asks for an approval on passing policies here.
        assert!(!auto_approved(&config, &steps, 1));
    }

    /// The sandbox's own `max_auto_retries` and
    /// `auto_approve_on_policies_passing` take effect on its steps, as a
    /// component's do on its own.
    #[test]
    fn the_sandbox_retries_and_is_approved_as_its_config_says() {
        let files = [
            SourceFile::new("metadata.toml", "version = \"v2\"\n"),
            SourceFile::new(
                "sandbox.toml",
                "terraform_version = \"1.9.0\"\npath = \"sandbox\"\nmax_auto_retries = 2\nauto_approve_on_policies_passing = true\n",
            ),
            SourceFile::new("sandbox/main.tf", ""),
            SourceFile::new(
                "policies.toml",
                "[[policy]]\nname = \"guard\"\ntype = \"sandbox\"\nengine = \"opa\"\ncontents = \"package nuon.guard\\nimport rego.v1\\ndeny contains msg if { false; msg := \\\"never\\\" }\\n\"\n",
            ),
        ];
        let (config, d) = nuon_appconfig::parse(&files);
        let config = config.unwrap_or_else(|| panic!("{d}"));
        let steps = vec![
            step(0, K::SandboxPlan, None, S::Succeeded),
            step(1, K::SandboxApply, None, S::WaitingApproval),
        ];
        assert!(auto_approved(&config, &steps, 1));
        let mut failed = steps.clone();
        failed[1].status = S::Failed;
        assert_eq!(
            auto_retry(&config, &failed, 1, JobStatus::Failed),
            Some(vec![0, 1]),
            "an apply from its plan"
        );
        let tried = |n: usize| {
            let mut s = failed.clone();
            for _ in 0..n {
                s[1].attempts = with_failed_try(&s[1], "no".into(), 1, Some(2));
            }
            auto_retry(&config, &s, 1, JobStatus::Failed)
        };
        assert!(tried(1).is_some());
        assert_eq!(tried(2), None, "two retries, then the workflow fails");
        // Without them: asked, and not retried.
        let (plain, d) = nuon_appconfig::parse(&files[..3]);
        let mut plain = plain.unwrap_or_else(|| panic!("{d}"));
        assert!(!auto_approved(&plain, &steps, 1), "no policy applies");
        plain.sandbox.as_mut().unwrap().max_auto_retries = 0;
        assert_eq!(auto_retry(&plain, &failed, 1, JobStatus::Failed), None);
    }

    #[test]
    fn what_a_retry_redoes() {
        use WorkflowStatus as W;
        /// The step retried and those redone, or the refusal's code.
        type Redo = Result<(u32, Vec<u32>), ErrorCode>;
        let table: Vec<(&str, Workflow, Option<&str>, Redo)> = vec![
            (
                "a failed plan is redone from itself",
                workflow(
                    W::Failed,
                    deploy([S::Succeeded, S::Succeeded, S::Failed, S::Pending]),
                ),
                None,
                Ok((2, vec![2, 3])),
            ),
            (
                "a failed apply is redone from its plan",
                workflow(
                    W::Failed,
                    deploy([S::Succeeded, S::Succeeded, S::Succeeded, S::Failed]),
                ),
                None,
                Ok((3, vec![2, 3])),
            ),
            (
                "a cancelled workflow is redone from its first cancelled step",
                workflow(
                    W::Cancelled,
                    deploy([S::Succeeded, S::Cancelled, S::Cancelled, S::Cancelled]),
                ),
                None,
                Ok((1, vec![0, 1, 2, 3])),
            ),
            (
                "denied and skipped steps stay as they are",
                workflow(
                    W::Failed,
                    deploy([S::Failed, S::Denied, S::Skipped, S::Pending]),
                ),
                None,
                Ok((0, vec![0, 3])),
            ),
            (
                "a step named by its index",
                workflow(
                    W::Failed,
                    deploy([S::Succeeded, S::Succeeded, S::Failed, S::Pending]),
                ),
                Some("2"),
                Ok((2, vec![2, 3])),
            ),
            (
                "a step after the failure is refused",
                workflow(
                    W::Failed,
                    deploy([S::Failed, S::Succeeded, S::Failed, S::Pending]),
                ),
                Some("2"),
                Err(ErrorCode::AfterTheFailure),
            ),
            (
                "a running workflow is refused",
                workflow(
                    W::Running,
                    deploy([S::Running, S::Pending, S::Pending, S::Pending]),
                ),
                None,
                Err(ErrorCode::NotFailed),
            ),
            (
                "a succeeded workflow is refused",
                workflow(W::Succeeded, deploy([S::Succeeded; 4])),
                None,
                Err(ErrorCode::NotFailed),
            ),
            (
                "an unknown step is not found",
                workflow(
                    W::Failed,
                    deploy([S::Failed, S::Pending, S::Pending, S::Pending]),
                ),
                Some("nope"),
                Err(ErrorCode::NotFound),
            ),
        ];
        for (what, wf, key, want) in table {
            let got = retry(&wf, key, &[])
                .map(|(s, redo)| (s.index, redo))
                .map_err(|e| e.code());
            assert_eq!(got, want, "{what}");
        }
        // Another active workflow of the install keeps it busy.
        let failed = workflow(
            W::Failed,
            deploy([S::Failed, S::Pending, S::Pending, S::Pending]),
        );
        let busy = workflow(W::Pending, deploy([S::Pending; 4]));
        assert_eq!(
            retry(&failed, None, &[busy])
                .map(|_| ())
                .map_err(|e| e.code()),
            Err(ErrorCode::InstallBusy)
        );
    }

    #[test]
    fn what_a_skip_takes_with_it_and_runs_again() {
        use WorkflowStatus as W;
        /// The step skipped, those it takes with it, those that run, or
        /// the refusal's code.
        type Skip = Result<(u32, Vec<u32>, Vec<u32>), ErrorCode>;
        let with_health = [
            (K::Plan, "db"),
            (K::Apply, "db"),
            (K::Health, "db"),
            (K::AwaitChecks, "db"),
            (K::Plan, "app"),
            (K::Apply, "app"),
        ];
        let table: Vec<(&str, Workflow, Option<&str>, Skip)> = vec![
            (
                "a failed plan takes its apply with it",
                workflow(
                    W::Failed,
                    deploy([S::Succeeded, S::Succeeded, S::Failed, S::Pending]),
                ),
                None,
                Ok((2, vec![3], vec![])),
            ),
            (
                "a failed apply: the next component runs",
                workflow(
                    W::Failed,
                    deploy([S::Succeeded, S::Failed, S::Pending, S::Pending]),
                ),
                None,
                Ok((1, vec![], vec![2, 3])),
            ),
            (
                "a failed apply takes its health checks with it",
                workflow(
                    W::Failed,
                    steps_of(
                        &with_health,
                        &[
                            S::Succeeded,
                            S::Failed,
                            S::Pending,
                            S::Pending,
                            S::Pending,
                            S::Pending,
                        ],
                    ),
                ),
                None,
                Ok((1, vec![2, 3], vec![4, 5])),
            ),
            (
                "a failed sandbox plan takes the sandbox's apply",
                workflow(
                    W::Failed,
                    vec![
                        step(0, K::SandboxPlan, None, S::Failed),
                        step(1, K::SandboxApply, None, S::Pending),
                        step(2, K::Plan, Some("db"), S::Pending),
                    ],
                ),
                None,
                Ok((0, vec![1], vec![2])),
            ),
            (
                "a failed removal of Secrets takes nothing: the sandbox is destroyed",
                workflow(
                    W::Failed,
                    vec![
                        step(0, K::SecretsSync, None, S::Failed),
                        step(1, K::SandboxDestroyPlan, None, S::Pending),
                        step(2, K::SandboxDestroy, None, S::Pending),
                    ],
                ),
                None,
                Ok((0, vec![], vec![1, 2])),
            ),
            (
                "a cancelled workflow runs its other cancelled steps",
                workflow(
                    W::Cancelled,
                    deploy([S::Succeeded, S::Cancelled, S::Cancelled, S::Cancelled]),
                ),
                None,
                Ok((1, vec![], vec![2, 3])),
            ),
            (
                "denied steps stay denied",
                workflow(
                    W::Failed,
                    deploy([S::Failed, S::Denied, S::Pending, S::Pending]),
                ),
                None,
                Ok((0, vec![], vec![2, 3])),
            ),
            (
                "a running workflow is refused",
                workflow(
                    W::Running,
                    deploy([S::Running, S::Pending, S::Pending, S::Pending]),
                ),
                None,
                Err(ErrorCode::NotFailed),
            ),
            (
                "a step after the failure is refused",
                workflow(
                    W::Failed,
                    deploy([S::Failed, S::Pending, S::Pending, S::Pending]),
                ),
                Some("3"),
                Err(ErrorCode::AfterTheFailure),
            ),
            (
                "a step that succeeded is refused",
                workflow(
                    W::Failed,
                    deploy([S::Succeeded, S::Failed, S::Pending, S::Pending]),
                ),
                Some("0"),
                Err(ErrorCode::NotFailedStep),
            ),
        ];
        for (what, wf, key, want) in table {
            let got = skip(&wf, key, &[])
                .map(|(s, taken, redo)| (s.index, taken, redo))
                .map_err(|e| e.code());
            assert_eq!(got, want, "{what}");
        }
    }

    #[test]
    fn what_an_approval_and_a_cancel_apply_to() {
        use WorkflowStatus as W;
        let waiting = workflow(
            W::Running,
            deploy([S::Succeeded, S::WaitingApproval, S::Pending, S::Pending]),
        );
        assert_eq!(
            approval_step(&waiting, None, false).map(|s| s.index).ok(),
            Some(1)
        );
        // An apply whose plan has not run takes a denial, not an approval.
        let early = workflow(
            W::Running,
            deploy([S::Running, S::Pending, S::Pending, S::Pending]),
        );
        assert_eq!(
            approval_step(&early, Some("1"), false)
                .map(|_| ())
                .map_err(|e| e.code()),
            Err(ErrorCode::NotWaiting)
        );
        assert_eq!(
            approval_step(&early, Some("1"), true).map(|s| s.index).ok(),
            Some(1)
        );
        assert_eq!(
            approval_step(&early, None, false)
                .map(|_| ())
                .map_err(|e| e.code()),
            Err(ErrorCode::NoSuchStep)
        );
        let ended = workflow(W::Succeeded, deploy([S::Succeeded; 4]));
        assert_eq!(
            approval_step(&ended, None, true)
                .map(|_| ())
                .map_err(|e| e.code()),
            Err(ErrorCode::WorkflowEnded)
        );

        // A cancel stops the running job and marks what is still to run.
        let c = cancel(&early).expect("cancels");
        assert_eq!(c.status, W::Cancelling);
        assert_eq!(
            c.steps,
            vec![
                (0, early.steps[0].job_id.clone()),
                (1, None),
                (2, None),
                (3, None)
            ]
        );
        assert!(c.steps[0].1.is_some());
        // A pending workflow has nothing to stop.
        let queued = workflow(W::Pending, deploy([S::Pending; 4]));
        assert_eq!(cancel(&queued).expect("cancels").status, W::Cancelled);
        assert_eq!(
            cancel(&ended).map(|_| ()).map_err(|e| e.code()),
            Err(ErrorCode::WorkflowEnded)
        );
    }

    #[test]
    fn what_the_install_becomes() {
        use WorkflowKind as WK;
        use WorkflowStatus as W;
        let mut wf = workflow(W::Running, Vec::new());
        let table = [
            (WK::Deploy, None, W::Succeeded, false, "active"),
            (WK::Deploy, None, W::Partial, false, "active"),
            (WK::Deploy, None, W::Failed, false, "failed"),
            (WK::Deploy, None, W::Cancelled, false, "active"),
            (WK::Deploy, None, W::Cancelled, true, "failed"),
            (WK::Deprovision, None, W::Succeeded, false, "deprovisioned"),
            (WK::Deprovision, None, W::Partial, false, "active"),
            (WK::Deprovision, Some("db"), W::Succeeded, false, "active"),
            (WK::Teardown, None, W::Succeeded, false, "torn_down"),
            (WK::Teardown, None, W::Partial, false, "active"),
            (WK::Teardown, Some("db"), W::Succeeded, false, "active"),
            // An action leaves the state it found ("created" here).
            (WK::Action, None, W::Failed, false, "created"),
            (WK::Action, None, W::Cancelled, true, "created"),
        ];
        for (kind, component, status, interrupted, want) in table {
            wf.kind = kind;
            wf.component = component.map(str::to_owned);
            assert_eq!(
                install_state_after(&wf, status, interrupted, InstallState::Created),
                want,
                "{kind:?} {component:?} {status} interrupted={interrupted}"
            );
        }
        assert_eq!(
            install_state_during(WK::Reprovision, InstallState::Active),
            "provisioning"
        );
        assert_eq!(
            install_state_during(WK::Action, InstallState::Failed),
            "failed"
        );
    }

    #[test]
    fn an_apply_replaces_what_it_reported_before() {
        let mut all = InstallOutputs::default();
        let apply = step(1, K::Apply, Some("db"), S::Running);
        record_outputs(
            &mut all,
            &apply,
            &json!({"outputs": {"host": "a", "password": "p"}, "sensitive": ["password"]}),
        );
        assert_eq!(all.components["db"]["host"], "a");
        assert_eq!(all.sensitive, vec!["db.password"]);
        record_outputs(&mut all, &apply, &json!({"outputs": {"host": "b"}}));
        assert_eq!(all.components["db"]["host"], "b");
        assert!(all.sensitive.is_empty(), "{:?}", all.sensitive);
        let destroy = step(3, K::Destroy, Some("db"), S::Running);
        record_outputs(&mut all, &destroy, &json!({}));
        assert!(all.components.is_empty());
        // What it reported last is kept apart for the destroys after it.
        assert_eq!(all.destroyed["db"]["host"], "b");
        assert_eq!(all.of("db").unwrap()["host"], "b");
        record_outputs(
            &mut all,
            &apply,
            &json!({"outputs": {"host": "c", "password": "q"}, "sensitive": ["password"]}),
        );
        assert!(all.destroyed.is_empty());
        // A destroyed component's sensitive outputs stay known as such.
        record_outputs(&mut all, &destroy, &json!({}));
        assert_eq!(all.sensitive, vec!["db.password"]);
        assert_eq!(all.sensitive_values(), vec!["q"]);
        assert_eq!(all.masked().destroyed["db"]["password"], "(sensitive)");
    }

    /// A teardown of `app` then `db`: sync, destroy plan, destroy each.
    fn teardown(statuses: [StepStatus; 6]) -> Vec<Step> {
        let shape = [
            (K::Sync, "app"),
            (K::DestroyPlan, "app"),
            (K::Destroy, "app"),
            (K::Sync, "db"),
            (K::DestroyPlan, "db"),
            (K::Destroy, "db"),
        ];
        steps_of(&shape, &statuses)
    }

    #[test]
    fn a_destroy_with_nothing_there_is_skipped_whole_and_leaves_nothing_out() {
        let steps = teardown([S::Pending; 6]);
        // From the sync, or from the destroy plan: through its destroy.
        assert_eq!(destroy_group(&steps, 0), Some(vec![0, 1, 2]));
        assert_eq!(destroy_group(&steps, 4), Some(vec![4, 5]));
        assert_eq!(destroy_group(&steps, 2), None);
        // A deploy's sync starts no destroy.
        assert_eq!(destroy_group(&deploy([S::Pending; 4]), 0), None);
        // Skipped for nothing there: the workflow succeeded, not partial.
        let mut steps = teardown([
            S::Skipped,
            S::Skipped,
            S::Skipped,
            S::Succeeded,
            S::Succeeded,
            S::Succeeded,
        ]);
        for s in &mut steps[..3] {
            s.outputs = json!({ NOTHING_TO_DESTROY: true });
        }
        assert_eq!(next(&steps), Next::End(WorkflowStatus::Succeeded));
        // Skipped by a denial: partial.
        steps[0].outputs = Value::Null;
        assert_eq!(next(&steps), Next::End(WorkflowStatus::Partial));
    }
}
