//! Which of the install stack's roles a job runs with, as Nuon's operation
//! roles decide it: a rule of `operation_roles.toml` for the job's
//! principal and operation, else the component's or sandbox's own
//! `operation_roles`, else a wildcard rule, else an action's own `break_glass_role` or
//! `role`, else the role of the workflow's kind (provision, maintenance,
//! deprovision). No role is declared: the runner's own identity.

use crate::app::{AppConfig, Role};
use crate::workflow::{StepKind, WorkflowKind};

/// The role a job runs with, its name still a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RoleChoice {
    /// The role's name, as the config writes it (templated).
    pub name: String,
    /// `provision`, `maintenance`, `deprovision`, `custom` or `break_glass`.
    pub kind: String,
    /// Why this role.
    pub because: String,
}

/// The operation of a step, in `operation_roles.toml`'s words.
pub fn operation(wf: WorkflowKind, step: StepKind) -> &'static str {
    match step {
        StepKind::Action => "trigger",
        StepKind::SandboxDestroyPlan | StepKind::SandboxDestroy => "deprovision",
        StepKind::SandboxSync | StepKind::SandboxPlan | StepKind::SandboxApply => {
            if wf == WorkflowKind::Reprovision {
                "reprovision"
            } else {
                "provision"
            }
        }
        StepKind::DestroyPlan | StepKind::Destroy => "teardown",
        // The secrets go into the sandbox's cluster with the operation
        // that runs them: provision, reprovision, or an inputs update;
        // a deprovision deletes them.
        StepKind::SecretsSync => match wf {
            WorkflowKind::Provision => "provision",
            WorkflowKind::Reprovision => "reprovision",
            WorkflowKind::Deprovision => "deprovision",
            _ => "deploy",
        },
        _ => "deploy",
    }
}

/// The principal of a step: `nuon::sandbox` (the sandbox's steps, and the
/// secrets sync into its cluster), `nuon::component:NAME` or
/// `nuon::action:NAME`.
pub fn principal(step: StepKind, target: Option<&str>) -> String {
    let t = target.unwrap_or_default();
    match step {
        s if s.is_sandbox() || s == StepKind::SecretsSync => "nuon::sandbox".into(),
        StepKind::Action => format!("nuon::action:{t}"),
        _ => format!("nuon::component:{t}"),
    }
}

/// The role of a step of a workflow of kind `wf` on `target`; an error
/// names a rule or action whose role the config does not declare.
pub fn role_for(
    config: &AppConfig,
    wf: WorkflowKind,
    step: StepKind,
    target: Option<&str>,
) -> Result<Option<RoleChoice>, String> {
    let perms = &config.permissions;
    if perms.roles.is_empty() && perms.break_glass.is_empty() {
        return Ok(None);
    }
    let op = operation(wf, step);
    let who = principal(step, target);
    let declared = |name: &str, because: String| -> Result<RoleChoice, String> {
        let kind = |r: &Role| r.kind.clone().unwrap_or_else(|| "custom".into());
        if let Some(r) = perms
            .roles
            .iter()
            .find(|r| crate::app::same_role(&r.name, name))
        {
            return Ok(RoleChoice {
                name: name.to_owned(),
                kind: kind(r),
                because,
            });
        }
        if perms
            .break_glass
            .iter()
            .any(|r| crate::app::same_role(&r.name, name))
        {
            return Ok(RoleChoice {
                name: name.to_owned(),
                kind: "break_glass".into(),
                because,
            });
        }
        Err(format!(
            "{because} names role {name:?}, which permissions and break_glass do not declare"
        ))
    };
    // A rule for this principal, else one for all of its sort.
    if let Some(rules) = &config.operation_roles {
        let wildcard = who
            .split_once(':')
            .filter(|(_, rest)| rest.contains(':'))
            .map(|_| format!("{}*", &who[..=who.rfind(':').unwrap_or(0)]));
        let exact = rules
            .rules
            .iter()
            .filter(|r| r.operation == op)
            .find(|r| r.principal == who);
        if exact.is_none()
            && let Some(r) = component_role(config, step, target, op)
        {
            return declared(&r.0, r.1).map(Some);
        }
        let found = exact.or_else(|| {
            rules
                .rules
                .iter()
                .filter(|r| r.operation == op)
                .find(|r| Some(&r.principal) == wildcard.as_ref())
        });
        if let Some(rule) = found {
            return declared(
                &rule.role,
                format!(
                    "operation_roles.toml: {} {}",
                    rule.principal, rule.operation
                ),
            )
            .map(Some);
        }
    }
    if let Some(r) = component_role(config, step, target, op) {
        return declared(&r.0, r.1).map(Some);
    }
    if step == StepKind::Action
        && let Some(a) = config.action(target.unwrap_or_default())
    {
        if let Some(r) = &a.break_glass_role {
            return declared(r, format!("action {}'s break_glass_role", a.name)).map(Some);
        }
        if let Some(r) = &a.role {
            return declared(r, format!("action {}'s role", a.name)).map(Some);
        }
    }
    let kind = match wf {
        WorkflowKind::Provision | WorkflowKind::Reprovision => "provision",
        WorkflowKind::Deprovision | WorkflowKind::Teardown => "deprovision",
        _ => "maintenance",
    };
    Ok(perms
        .roles
        .iter()
        .filter(|r| r.enabled_in_stack != Some(false))
        .find(|r| r.kind.as_deref() == Some(kind))
        .map(|r| RoleChoice {
            name: r.name.clone(),
            kind: kind.into(),
            because: format!("the {kind} role: {op} of {who}"),
        }))
}

/// A component's (or the sandbox's) own `operation_roles` entry for
/// `op`: the role, and why.
fn component_role(
    config: &AppConfig,
    step: StepKind,
    target: Option<&str>,
    op: &str,
) -> Option<(String, String)> {
    if step == StepKind::Action {
        return None;
    }
    if principal(step, target) == "nuon::sandbox" {
        let role = config.sandbox.as_ref()?.operation_roles.get(op)?;
        return Some((role.clone(), format!("the sandbox's operation_roles {op}")));
    }
    let c = config.component(target?)?;
    let role = c.operation_roles.get(op)?;
    Some((
        role.clone(),
        format!("component {}'s operation_roles {op}", c.name),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::{OperationRoles, OperationRule, Permissions};

    use crate::stack::test_role as role;

    fn config() -> AppConfig {
        let mut c: AppConfig =
            serde_json::from_value(serde_json::json!({"metadata": {"version": "v2"}})).unwrap();
        c.permissions = Permissions {
            roles: vec![
                role("provision", "p"),
                role("maintenance", "m"),
                role("deprovision", "d"),
                role("custom", "dns"),
            ],
            named_policies: vec![],
            break_glass: vec![role("custom", "bg")],
        };
        c.operation_roles = Some(OperationRoles {
            kind: "matrix".into(),
            rules: vec![
                OperationRule {
                    principal: "nuon::component:web".into(),
                    operation: "deploy".into(),
                    role: "dns".into(),
                },
                OperationRule {
                    principal: "nuon::component:*".into(),
                    operation: "teardown".into(),
                    role: "m".into(),
                },
            ],
        });
        c
    }

    fn name(wf: WorkflowKind, step: StepKind, target: &str) -> Option<String> {
        role_for(&config(), wf, step, Some(target))
            .unwrap()
            .map(|c| c.name)
    }

    #[test]
    fn rules_then_the_workflow_kinds_role() {
        use StepKind::*;
        use WorkflowKind as W;
        assert_eq!(
            name(W::Provision, SandboxApply, "sandbox").as_deref(),
            Some("p")
        );
        assert_eq!(name(W::Provision, Apply, "db").as_deref(), Some("p"));
        assert_eq!(name(W::Deploy, Apply, "db").as_deref(), Some("m"));
        // The exact rule, then the wildcard one.
        assert_eq!(name(W::Deploy, Plan, "web").as_deref(), Some("dns"));
        assert_eq!(name(W::Provision, Plan, "web").as_deref(), Some("dns"));
        assert_eq!(name(W::Deprovision, Destroy, "db").as_deref(), Some("m"));
        assert_eq!(
            name(W::Deprovision, SandboxDestroy, "sandbox").as_deref(),
            Some("d")
        );
        // The secrets sync is the sandbox's: provision's role in a
        // provision, maintenance's in an inputs update, never a rule of
        // `nuon::component:*`.
        assert_eq!(principal(SecretsSync, None), "nuon::sandbox");
        let sync = |wf| {
            role_for(&config(), wf, SecretsSync, None)
                .unwrap()
                .map(|c| c.name)
        };
        assert_eq!(sync(W::Provision).as_deref(), Some("p"));
        assert_eq!(sync(W::Deploy).as_deref(), Some("m"));
        // A deprovision deletes them with deprovision's role.
        assert_eq!(sync(W::Deprovision).as_deref(), Some("d"));
        let bg = role_for(&config(), W::Deploy, Plan, Some("web"))
            .unwrap()
            .unwrap();
        assert!(
            bg.because
                .contains("operation_roles.toml: nuon::component:web deploy")
        );
    }

    /// The sandbox's own `operation_roles` (as Nuon writes them, an array
    /// of tables) are used where no rule of `operation_roles.toml` names
    /// the sandbox; an operation it does not name takes its kind's role.
    #[test]
    fn a_rule_naming_an_undeclared_role_is_an_error_and_no_roles_means_none() {
        let mut c = config();
        c.operation_roles.as_mut().unwrap().rules[0].role = "nope".into();
        let e = role_for(&c, WorkflowKind::Deploy, StepKind::Plan, Some("web")).unwrap_err();
        assert!(e.contains("names role \"nope\""), "{e}");
        c.permissions = Permissions::default();
        assert_eq!(
            role_for(&c, WorkflowKind::Deploy, StepKind::Plan, Some("web")).unwrap(),
            None
        );
    }
}
