//! What a workflow's plans say, as the rules and people read them: a
//! plan's resources and the attributes they change, the plan an apply
//! applies, and whether there was anything to do.

use super::{StepKind, StepRecord, TURNED_OFF};

/// Whether the plan an approval step `i` applies changes nothing.
pub fn plan_changes_nothing<S: StepRecord>(steps: &[S], i: usize) -> bool {
    let Some(plan) = plan_step_of(steps, i) else {
        return false;
    };
    let c = &plan.outputs()["changes"];
    ["add", "change", "destroy"]
        .iter()
        .all(|k| c[*k].as_u64() == Some(0))
}

/// One resource of a plan, as its `changes` output lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanResource {
    /// Its address (`terraform_data.queue`).
    pub address: String,
    /// Its actions (`update`; `delete, create` for a replace).
    pub actions: String,
    /// Each attribute it changes, as `PATH: BEFORE → AFTER` (sensitive
    /// values masked, unknown ones `(known after apply)`).
    pub values: Vec<String>,
}

/// A plan's resources as its `changes` output lists them: each one's
/// address, its actions and the attributes it changes.
pub fn plan_resources(changes: &serde_json::Value) -> Vec<PlanResource> {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or("?").to_owned();
    changes["resources"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            let actions: Vec<&str> = r["actions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str())
                .collect();
            PlanResource {
                address: text(&r["address"]),
                actions: actions.join(", "),
                values: r["values"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|v| {
                        format!(
                            "{}: {} \u{2192} {}",
                            text(&v["path"]),
                            text(&v["before"]),
                            text(&v["after"])
                        )
                    })
                    .collect(),
            }
        })
        .collect()
}

/// The plan step an apply step `i` applies: the nearest earlier plan of
/// its target.
pub fn plan_step_of<S: StepRecord>(steps: &[S], i: usize) -> Option<&S> {
    let me = &steps[i];
    steps[..i].iter().rev().find(|s| {
        s.target() == me.target()
            && matches!(
                s.kind(),
                StepKind::Plan
                    | StepKind::DestroyPlan
                    | StepKind::SandboxPlan
                    | StepKind::SandboxDestroyPlan
            )
    })
}

/// The reason an apply that needed an approval carries when its plan
/// changes nothing: it ran without one.
pub const NO_CHANGES: &str = "approval skipped: the plan has no changes";

/// The mark a step skipped for having nothing to destroy carries in its
/// outputs.
pub const NOTHING_TO_DESTROY: &str = "nothing_to_destroy";

/// Whether a skipped step left nothing out: there was nothing to destroy,
/// or its component is turned off.
pub fn nothing_was_there<S: StepRecord>(step: &S) -> bool {
    step.outputs()[NOTHING_TO_DESTROY] == serde_json::Value::Bool(true)
        || step.outputs()[TURNED_OFF] == serde_json::Value::Bool(true)
}
