//! Workflows: the ordered steps of an install operation, planned from the
//! app config. Provision builds the sandbox then every component in
//! dependency order; deploy does the components; teardown destroys them in
//! reverse order; deprovision also destroys the sandbox. Every change is a
//! plan step then an apply of exactly that plan; an apply can wait for an
//! approval. Actions run where their triggers say.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::app::{AppConfig, ComponentKind};
pub use crate::model::{StepKind, StepStatus, WorkflowKind, WorkflowStatus};

mod plans;
pub use plans::{
    NO_CHANGES, NOTHING_TO_DESTROY, PlanResource, nothing_was_there, plan_changes_nothing,
    plan_resources, plan_step_of,
};

/// One planned step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct PlannedStep {
    /// For people: `plan database`, `action smoke_test`.
    pub name: String,
    /// What it does.
    pub kind: StepKind,
    /// The component or action, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Whether it waits for an approval before it runs.
    pub needs_approval: bool,
    /// Why it is skipped before it starts (its component is turned off on
    /// the install, or depends on one that is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

/// The mark a step skipped for a component turned off on the install
/// carries in its outputs: the workflow still succeeds.
pub const TURNED_OFF: &str = "turned_off";

/// The name of a deprovision's secrets step: it deletes the Kubernetes
/// Secrets the install's syncs wrote.
pub const REMOVE_SECRETS: &str = "remove kubernetes secrets";

fn step(kind: StepKind, target: Option<&str>, needs_approval: bool) -> PlannedStep {
    let verb = match kind {
        StepKind::SandboxSync => "sync sandbox",
        StepKind::Sync => "sync",
        StepKind::SandboxPlan => "plan sandbox",
        StepKind::SandboxApply => "apply sandbox",
        StepKind::SandboxDestroyPlan => "plan destroy sandbox",
        StepKind::SandboxDestroy => "destroy sandbox",
        StepKind::Plan => "plan",
        StepKind::Apply => "apply",
        StepKind::DestroyPlan => "plan destroy",
        StepKind::Destroy => "destroy",
        StepKind::Action => "action",
        StepKind::AwaitStack => "await install stack",
        StepKind::AwaitRunner => "await runner",
        StepKind::SecretsSync => "sync kubernetes secrets",
        StepKind::Health => "check health",
        StepKind::AwaitChecks => "await checks",
        StepKind::Unknown => "unknown step",
    };
    PlannedStep {
        name: match target {
            Some(t) => format!("{verb} {t}"),
            None => verb.to_owned(),
        },
        kind,
        target: target.map(str::to_owned),
        needs_approval,
        skipped: None,
    }
}

/// The action steps a lifecycle `trigger` fires (of `component`, for a
/// `*-component` trigger), in file order.
pub fn trigger_steps(
    config: &AppConfig,
    trigger: &str,
    component: Option<&str>,
) -> Vec<PlannedStep> {
    let mut out = Vec::new();
    actions(config, trigger, component, &mut out);
    out
}

/// The secrets sync (with the actions of its `pre-`/`post-secrets-sync`
/// triggers) when the config syncs a secret into Kubernetes, else nothing.
pub fn secrets_sync_steps(config: &AppConfig) -> Vec<PlannedStep> {
    let mut out = Vec::new();
    if config.secrets.iter().any(|s| !s.kubernetes.is_empty()) {
        actions(config, "pre-secrets-sync", None, &mut out);
        out.push(step(StepKind::SecretsSync, None, false));
        actions(config, "post-secrets-sync", None, &mut out);
    }
    out
}

/// The health steps of a component: its probes, then the checks it
/// requires.
fn health(c: &crate::app::Component, out: &mut Vec<PlannedStep>) {
    if crate::app::ComponentHealth::watched(c.health.as_ref()) {
        out.push(step(StepKind::Health, Some(&c.name), false));
    }
    if !crate::app::ComponentHealth::required(c.health.as_ref()).is_empty() {
        out.push(step(StepKind::AwaitChecks, Some(&c.name), false));
    }
}

fn actions(config: &AppConfig, trigger: &str, component: Option<&str>, out: &mut Vec<PlannedStep>) {
    for a in &config.actions {
        let fires = a
            .triggers
            .iter()
            .any(|t| t.kind == trigger && t.component_name.as_deref() == component);
        if fires {
            out.push(step(StepKind::Action, Some(&a.name), false));
        }
    }
}

/// The steps of a workflow of `kind` for `config`; with `only`, of that
/// one component (no sandbox, no workflow-wide hooks), or for
/// [`WorkflowKind::Action`] the action to run. With `approvals`,
/// every apply and destroy waits for an approval of its plan. Each
/// component is synced (its artifact copied into the install's store),
/// planned, then applied.
pub fn plan(
    config: &AppConfig,
    kind: WorkflowKind,
    approvals: bool,
    only: Option<&str>,
) -> Vec<PlannedStep> {
    plan_with(config, kind, approvals, only, false)
}

/// [`plan`], and with `dependents` a teardown of `only` tears down the
/// components that depend on it first (what a deprovision would do to
/// them), so none is left deployed on top of a destroyed dependency.
pub fn plan_with(
    config: &AppConfig,
    kind: WorkflowKind,
    approvals: bool,
    only: Option<&str>,
    dependents: bool,
) -> Vec<PlannedStep> {
    let mut out = Vec::new();
    let destroying = matches!(kind, WorkflowKind::Teardown | WorkflowKind::Deprovision);
    let with_dependents = match only {
        Some(c) if dependents && destroying => left_out_by_denial(config, Some(c), false).0,
        _ => std::collections::BTreeSet::new(),
    };
    // A runbook's `only` names the runbook: its `deploy` steps deploy every
    // component.
    let one_component = only.filter(|_| kind != WorkflowKind::Runbook);
    let picked = |c: &&crate::app::Component| {
        one_component.is_none_or(|o| o == c.name) || with_dependents.contains(&c.name)
    };
    let deploy = |out: &mut Vec<PlannedStep>| {
        for c in config.components.iter().filter(picked) {
            let name = Some(c.name.as_str());
            actions(config, "pre-deploy-component", name, out);
            out.push(step(StepKind::Sync, name, false));
            // An image is deployed by copying it into the install's store.
            if c.kind() != ComponentKind::ContainerImage {
                out.push(step(StepKind::Plan, name, false));
                out.push(step(StepKind::Apply, name, approvals));
                health(c, out);
            }
            actions(config, "post-deploy-component", name, out);
        }
    };
    let teardown = |out: &mut Vec<PlannedStep>| {
        if only.is_none() {
            actions(config, "pre-teardown-all-components", None, out);
        }
        for c in config
            .components
            .iter()
            .rev()
            .filter(picked)
            .filter(|c| c.kind() != ComponentKind::ContainerImage)
        {
            let name = Some(c.name.as_str());
            actions(config, "pre-teardown-component", name, out);
            out.push(step(StepKind::Sync, name, false));
            out.push(step(StepKind::DestroyPlan, name, false));
            out.push(step(StepKind::Destroy, name, approvals));
            actions(config, "post-teardown-component", name, out);
        }
        if only.is_none() {
            actions(config, "post-teardown-all-components", None, out);
        }
    };
    if let (WorkflowKind::Action, Some(action)) = (kind, only) {
        out.push(step(StepKind::Action, Some(action), false));
        return out;
    }
    if kind == WorkflowKind::Runbook {
        let Some(rb) = config
            .runbooks
            .iter()
            .find(|r| Some(r.name.as_str()) == only)
        else {
            return out;
        };
        let deploy_one = |c: &crate::app::Component, out: &mut Vec<PlannedStep>| {
            out.push(step(StepKind::Sync, Some(&c.name), false));
            if c.kind() != ComponentKind::ContainerImage {
                out.push(step(StepKind::Plan, Some(&c.name), false));
                out.push(step(StepKind::Apply, Some(&c.name), approvals));
                health(c, out);
            }
        };
        let sandbox = |out: &mut Vec<PlannedStep>, destroy: bool| {
            out.push(step(StepKind::SandboxSync, None, false));
            if destroy {
                out.push(step(StepKind::SandboxDestroyPlan, None, false));
                out.push(step(StepKind::SandboxDestroy, None, approvals));
            } else {
                out.push(step(StepKind::SandboxPlan, None, false));
                out.push(step(StepKind::SandboxApply, None, approvals));
            }
        };
        for st in &rb.steps {
            let component = st["component_name"].as_str();
            let flag = |k: &str| st[k].as_bool() == Some(true);
            match st["type"].as_str().unwrap_or_default() {
                "component_deploy" => {
                    if let Some(c) = component.and_then(|c| config.component(c)) {
                        deploy_one(c, &mut out);
                    }
                }
                // Nuon's `deploy`: the component named (after what it
                // depends on, with `deploy_dependencies`), or every one.
                "deploy" => match component.and_then(|c| config.component(c)) {
                    Some(c) => {
                        let mut names = std::collections::BTreeSet::from([c.name.as_str()]);
                        if flag("deploy_dependencies") {
                            names.extend(config.dependencies_of(&c.name));
                        }
                        for d in config
                            .components
                            .iter()
                            .filter(|d| names.contains(d.name.as_str()))
                        {
                            deploy_one(d, &mut out);
                        }
                    }
                    None => deploy(&mut out),
                },
                "component_tear_down" => {
                    if let Some(c) = component.and_then(|c| config.component(c))
                        && c.kind() != ComponentKind::ContainerImage
                    {
                        out.push(step(StepKind::Sync, Some(&c.name), false));
                        out.push(step(StepKind::DestroyPlan, Some(&c.name), false));
                        out.push(step(StepKind::Destroy, Some(&c.name), approvals));
                    }
                }
                "action" => {
                    if let Some(a) = st["action_name"].as_str() {
                        out.push(step(StepKind::Action, Some(a), false));
                    }
                }
                // As Nuon: the sandbox, then the components on top of it
                // unless `skip_component_deploys`.
                "sandbox_provision" | "sandbox_reprovision" if config.sandbox.is_some() => {
                    sandbox(&mut out, false);
                    if !flag("skip_component_deploys") {
                        deploy(&mut out);
                    }
                }
                "sandbox_deprovision" if config.sandbox.is_some() => sandbox(&mut out, true),
                _ => {}
            }
        }
        return out;
    }
    if kind == WorkflowKind::Drift {
        match only {
            Some(SANDBOX) | None => {
                if config.sandbox.is_some() {
                    out.push(step(StepKind::SandboxSync, None, false));
                    out.push(step(StepKind::SandboxPlan, None, false));
                }
            }
            Some(c) => {
                out.push(step(StepKind::Sync, Some(c), false));
                out.push(step(StepKind::Plan, Some(c), false));
            }
        }
        return out;
    }
    if only.is_some() {
        match kind {
            WorkflowKind::Teardown | WorkflowKind::Deprovision => teardown(&mut out),
            _ => deploy(&mut out),
        }
        return out;
    }
    match kind {
        WorkflowKind::Provision | WorkflowKind::Reprovision => {
            let re = if kind == WorkflowKind::Reprovision {
                "re"
            } else {
                ""
            };
            // Nuon's order: the install's stack phones home, its runner
            // is healthy, then the sandbox and the components.
            if re.is_empty() {
                out.push(step(StepKind::AwaitStack, None, false));
            }
            out.push(step(StepKind::AwaitRunner, None, false));
            actions(config, &format!("pre-{re}provision"), None, &mut out);
            if config.sandbox.is_some() {
                if !re.is_empty() {
                    actions(config, "pre-reprovision-sandbox", None, &mut out);
                }
                out.push(step(StepKind::SandboxSync, None, false));
                out.push(step(StepKind::SandboxPlan, None, false));
                out.push(step(StepKind::SandboxApply, None, approvals));
                actions(
                    config,
                    &format!("post-{re}provision-sandbox"),
                    None,
                    &mut out,
                );
            }
            // Nuon's order: the secrets are in the cluster before the
            // components that read them.
            out.extend(secrets_sync_steps(config));
            actions(config, "pre-deploy-all-components", None, &mut out);
            deploy(&mut out);
            actions(config, "post-deploy-all-components", None, &mut out);
            actions(config, &format!("post-{re}provision"), None, &mut out);
        }
        WorkflowKind::Deploy => {
            actions(config, "pre-deploy-all-components", None, &mut out);
            deploy(&mut out);
            actions(config, "post-deploy-all-components", None, &mut out);
        }
        WorkflowKind::Teardown => teardown(&mut out),
        // An action workflow names its action (`only`); a drift check and
        // a runbook returned above.
        WorkflowKind::Action | WorkflowKind::Drift | WorkflowKind::Runbook => {}
        WorkflowKind::Deprovision => {
            actions(config, "pre-deprovision", None, &mut out);
            teardown(&mut out);
            // The Secrets the syncs wrote go before the sandbox: its
            // cluster may outlive it (a cluster the customer brought).
            if config.secrets.iter().any(|s| !s.kubernetes.is_empty()) {
                out.push(PlannedStep {
                    name: REMOVE_SECRETS.into(),
                    ..step(StepKind::SecretsSync, None, false)
                });
            }
            if config.sandbox.is_some() {
                actions(config, "pre-deprovision-sandbox", None, &mut out);
                out.push(step(StepKind::SandboxSync, None, false));
                out.push(step(StepKind::SandboxDestroyPlan, None, false));
                out.push(step(StepKind::SandboxDestroy, None, approvals));
                actions(config, "post-deprovision-sandbox", None, &mut out);
            }
            actions(config, "post-deprovision", None, &mut out);
        }
    }
    out
}

/// A step as it ran, as the rules over a workflow's steps read it: what
/// it does, to what, and what its job reported. The store's and the
/// API's step types carry it.
pub trait StepRecord {
    /// What the step does.
    fn kind(&self) -> StepKind;
    /// The component it works on (none for the sandbox and the install).
    fn target(&self) -> Option<&str>;
    /// What its job reported (a plan's `changes`, ...).
    fn outputs(&self) -> &serde_json::Value;
}

/// How many automatic retries a failed step of `kind` on `target` gets:
/// its component's `max_auto_retries`, or the sandbox's for a sandbox
/// step.
pub fn max_auto_retries_of(config: &AppConfig, kind: StepKind, target: Option<&str>) -> u32 {
    match (kind, target) {
        (StepKind::Action, _) => 0,
        (k, None) if k.is_sandbox() => config.sandbox.as_ref().map_or(0, |s| s.max_auto_retries),
        (_, Some(c)) => config.component(c).map_or(0, |c| c.max_auto_retries),
        (_, None) => 0,
    }
}

/// Whether a step of `kind` changes infrastructure from the plan before it.
pub fn applies_a_plan(kind: StepKind) -> bool {
    matches!(
        kind,
        StepKind::SandboxApply | StepKind::SandboxDestroy | StepKind::Apply | StepKind::Destroy
    )
}

/// What a drift check of the sandbox names as its target.
pub const SANDBOX: &str = "sandbox";

/// Whether a workflow of `kind` leaves the install's state as it was (an
/// action, a drift check).
pub fn leaves_state(kind: WorkflowKind) -> bool {
    matches!(kind, WorkflowKind::Action | WorkflowKind::Drift)
}

/// The trigger of a plan-only run (`--plan-only`): it plans and stops,
/// and changes nothing on the install.
pub const PLAN_ONLY: &str = "plan-only";

/// The trigger of the workflow an input or secret change starts: the
/// components that read them, redeployed between the actions of the
/// `pre-update-inputs` and `post-update-inputs` triggers.
pub const UPDATE_INPUTS: &str = "update-inputs";

/// The trigger of an install's deletion: a deprovision that removes the
/// install when it succeeds.
pub const DELETE: &str = "delete";

/// Whether a step of `kind` stays in a plan-only run: the syncs and the
/// plans.
pub fn plans_only(kind: StepKind) -> bool {
    matches!(
        kind,
        StepKind::Sync
            | StepKind::SandboxSync
            | StepKind::Plan
            | StepKind::SandboxPlan
            | StepKind::DestroyPlan
            | StepKind::SandboxDestroyPlan
    )
}

/// What an operator answers a step that waits for an approval, as Nuon
/// has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ApprovalResponse {
    /// Apply the plan.
    Approve,
    /// Fail the workflow: nothing after the step runs.
    Deny,
    /// Skip the step (and the rest of its component); the workflow goes
    /// on with the others, what depends on it included.
    DenySkipCurrent,
    /// Skip the step and every step that depends on it; the workflow goes
    /// on with the others.
    DenySkipCurrentAndDependents,
    /// Plan again (a plan gone stale), then ask again.
    Retry,
}

impl ApprovalResponse {
    /// Every response, as written.
    pub const ALL: [&'static str; 5] = [
        "approve",
        "deny",
        "deny-skip-current",
        "deny-skip-current-and-dependents",
        "retry",
    ];
}

impl std::str::FromStr for ApprovalResponse {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "approve" => ApprovalResponse::Approve,
            "deny" => ApprovalResponse::Deny,
            "deny-skip-current" => ApprovalResponse::DenySkipCurrent,
            "deny-skip-current-and-dependents" => ApprovalResponse::DenySkipCurrentAndDependents,
            "retry" => ApprovalResponse::Retry,
            other => {
                return Err(format!(
                    "{other:?} is not an approval response (one of {})",
                    Self::ALL.join(", ")
                ));
            }
        })
    }
}

/// Whether a workflow of `kind` destroys what it touches (a teardown or a
/// deprovision).
pub fn destroys_all(kind: WorkflowKind) -> bool {
    matches!(kind, WorkflowKind::Teardown | WorkflowKind::Deprovision)
}

/// Whether a step of `kind` destroys.
pub fn destroys(kind: StepKind) -> bool {
    matches!(
        kind,
        StepKind::SandboxDestroyPlan
            | StepKind::SandboxDestroy
            | StepKind::DestroyPlan
            | StepKind::Destroy
    )
}

/// The components a denial of `denied` (a component, or `None` for the
/// sandbox) takes out of a workflow with it. Deploying, those are the
/// components that depend on it (everything, for the sandbox); destroying,
/// the components it depends on, which must outlive it (and the sandbox,
/// marked by `None` in the answer's second part).
pub fn left_out_by_denial(
    config: &AppConfig,
    denied: Option<&str>,
    destroying: bool,
) -> (std::collections::BTreeSet<String>, bool) {
    use std::collections::BTreeSet;
    let deps_of = |c: &crate::app::Component| -> BTreeSet<String> {
        c.dependencies
            .iter()
            .chain(&c.depends_on)
            .cloned()
            .collect()
    };
    let mut out: BTreeSet<String> = BTreeSet::new();
    let Some(denied) = denied else {
        // The sandbox: everything after it.
        return (
            config.components.iter().map(|c| c.name.clone()).collect(),
            true,
        );
    };
    out.insert(denied.to_owned());
    loop {
        let before = out.len();
        for c in &config.components {
            if destroying {
                if out.contains(&c.name) {
                    out.extend(deps_of(c));
                }
            } else if deps_of(c).iter().any(|d| out.contains(d)) {
                out.insert(c.name.clone());
            }
        }
        if out.len() == before {
            break;
        }
    }
    (out, destroying)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workflow_kinds_are_spelled_as_serde_spells_them() {
        for k in [
            WorkflowKind::Provision,
            WorkflowKind::Deploy,
            WorkflowKind::Teardown,
            WorkflowKind::Deprovision,
            WorkflowKind::Reprovision,
            WorkflowKind::Action,
            WorkflowKind::Drift,
            WorkflowKind::Runbook,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
        }
    }

    #[test]
    fn statuses_are_spelled_once_and_read_back() {
        for s in WorkflowStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(s.as_str().parse::<WorkflowStatus>(), Ok(*s));
            assert_eq!(*s, s.to_string().as_str());
        }
        for s in StepStatus::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(s.as_str().parse::<StepStatus>(), Ok(*s));
        }
        assert!("done".parse::<StepStatus>().is_err());
        let active: Vec<_> = WorkflowStatus::ALL
            .iter()
            .filter(|s| s.is_active())
            .collect();
        assert_eq!(
            active,
            [
                &WorkflowStatus::Pending,
                &WorkflowStatus::Running,
                &WorkflowStatus::Cancelling
            ]
        );
        let passed: Vec<_> = StepStatus::ALL.iter().filter(|s| s.is_passed()).collect();
        assert_eq!(
            passed,
            [
                &StepStatus::Succeeded,
                &StepStatus::Skipped,
                &StepStatus::Denied,
                &StepStatus::Cancelled
            ]
        );
    }
}
