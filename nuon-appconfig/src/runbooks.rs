//! Reading runbooks: their steps' types and what each needs, and each
//! inline step made an action of its own.

use nuon_core::app::*;
use serde_json::Value;

use crate::reader::{Located, Reader};
use crate::schema::{K, Spec};

const RUNBOOK_INPUT: Spec = Spec {
    keys: &[
        ("name", K::Str),
        ("display_name", K::Str),
        ("description", K::Str),
        ("default", K::Any),
        ("required", K::Bool),
        ("sensitive", K::Bool),
        ("type", K::Str),
    ],
    required: &["name"],
};

const RUNBOOK_STEP: Spec = Spec {
    keys: &[
        ("name", K::Str),
        ("type", K::Str),
        ("component_name", K::Str),
        ("deploy_dependents", K::Bool),
        ("tear_down_dependents", K::Bool),
        ("deploy_dependencies", K::Bool),
        ("skip_component_deploys", K::Bool),
        ("action_name", K::Str),
        ("command", K::Str),
        ("inline_contents", K::Str),
        ("env_vars", K::StrMap),
        ("timeout", K::Str),
        ("role", K::Str),
        ("enable_kube_config", K::Bool),
    ],
    required: &["name", "type"],
};

/// A file of `runbooks/`.
pub(crate) const RUNBOOK: Spec = Spec {
    keys: &[
        ("name", K::Str),
        ("description", K::Str),
        ("readme", K::Str),
        ("labels", K::StrMap),
        ("input", K::Tables(&RUNBOOK_INPUT)),
        ("dependencies", K::StrList),
        ("steps", K::Tables(&RUNBOOK_STEP)),
    ],
    required: &["name"],
};

/// The step types of a runbook.
const RUNBOOK_STEP_TYPES: &[&str] = &[
    "component_deploy",
    "deploy",
    "component_tear_down",
    "action",
    "sandbox_provision",
    "sandbox_reprovision",
    "sandbox_deprovision",
];

/// A runbook's own checks: its step types, what each needs, and the
/// components and actions its steps name (into `refs`, for the cross-file
/// checks).
pub(crate) fn check(
    rb: &Runbook,
    r: &Reader<'_, '_>,
    d: &mut Diagnostics,
    file: usize,
    refs: &mut Vec<(usize, Located, &'static str)>,
) {
    if rb.steps.is_empty() {
        d.push(r.file.at(
            &r.span(),
            "missing [[steps]]: a runbook runs at least one step",
        ));
    }
    for st in &rb.steps {
        let t = st["type"].as_str().unwrap_or_default();
        let at = r.file.text.find(&format!("{t:?}")).unwrap_or(0);
        if !RUNBOOK_STEP_TYPES.contains(&t) {
            d.push(r.file.diag(
                at,
                format!(
                    "runbook step type {t:?} is not one of {}",
                    RUNBOOK_STEP_TYPES.join(", ")
                ),
            ));
        }
        let needs = match t {
            "component_deploy" | "component_tear_down" => Some("component_name"),
            "action" if st["command"].is_null() && st["inline_contents"].is_null() => {
                Some("action_name")
            }
            _ => None,
        };
        if let Some(key) = needs
            && st[key].as_str().is_none()
        {
            d.push(
                r.file
                    .diag(at, format!("a runbook step of type {t:?} needs {key}")),
            );
        }
        for (key, kind) in [("component_name", "component"), ("action_name", "action")] {
            if let Some(n) = st[key].as_str() {
                let at = r.file.text.find(&format!("{n:?}")).unwrap_or(0);
                refs.push((
                    file,
                    Located {
                        text: n.to_owned(),
                        span: at..at,
                    },
                    kind,
                ));
            }
        }
    }
    for i in &rb.inputs {
        let name = i["name"].as_str().unwrap_or_default();
        let valid = !name.is_empty()
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with("NUON_");
        if !valid {
            let at = r.file.text.find(&format!("{name:?}")).unwrap_or(0);
            d.push(r.file.diag(
                    at,
                    format!("runbook input {name:?} is not a valid environment variable name of its own (letters, digits and _, not starting with a digit or NUON_): its actions get it as one"),
                ));
        }
    }
}

/// How long an inline step may run when it does not say.
const INLINE_TIMEOUT: &str = "30m";

/// Makes the action of each inline runbook step and points the step at it.
/// A made action whose name an action of the config has is an error.
pub(crate) fn inline_actions(config: &mut AppConfig, d: &mut Diagnostics) {
    let mut made = Vec::new();
    for rb in &mut config.runbooks {
        for st in &mut rb.steps {
            let inline = st["command"].is_string() || st["inline_contents"].is_string();
            if st["type"] != "action" || !st["action_name"].is_null() || !inline {
                continue;
            }
            let text = |k: &str| st[k].as_str().map(str::to_owned);
            let step = text("name").unwrap_or_default();
            let name = inline_action_name(&rb.name, &step);
            made.push(Action {
                name: name.clone(),
                timeout: text("timeout").unwrap_or_else(|| INLINE_TIMEOUT.to_owned()),
                triggers: Vec::new(),
                steps: vec![Step {
                    name: step,
                    command: text("command"),
                    inline_contents: text("inline_contents"),
                    env_vars: serde_json::from_value(st["env_vars"].clone()).unwrap_or_default(),
                    source: None,
                }],
                dependencies: Vec::new(),
                depends_on: Vec::new(),
                inputs: Vec::new(),
                role: text("role"),
                break_glass_role: None,
                description: Some(format!("an inline step of runbook {}", rb.name)),
                labels: Default::default(),
                enable_kube_config: st["enable_kube_config"] == Value::Bool(true),
                kubernetes_context: None,
            });
            st["action_name"] = Value::String(name);
        }
    }
    for a in made {
        if config.actions.iter().any(|b| b.name == a.name) {
            d.push(Diagnostic {
                file: "runbooks".into(),
                line: 1,
                col: 1,
                warning: false,
                message: format!(
                    "an inline runbook step runs as action {:?}, and the config has an action of that name: rename one",
                    a.name
                ),
            });
        } else {
            config.actions.push(a);
        }
    }
}
