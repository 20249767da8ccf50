//! Action files (`actions/NAME.toml`): triggers, steps, run-time inputs,
//! roles and the kubeconfig.

use super::loaded::Item;
use super::reader::{Reader, duration, text};
use super::sources::source;
use super::{Action, ActionInput, Step, Trigger};
use nuon_core::app::{Diagnostics, did_you_mean};
use nuon_core::app::{OLD_TRIGGERS, TRIGGERS};

/// An action file (`actions/NAME.toml`).
pub(super) fn action(mut r: Reader<'_, '_>, file: usize, d: &mut Diagnostics) -> Item<Action> {
    let mut item = Item::new(file);
    let name = r.name(d, "name");
    let timeout = if r.get("timeout").is_some() {
        duration(&mut r, d, "timeout")
    } else {
        r.req_str(d, "timeout");
        None
    };
    item.deps = r.str_list(d, "dependencies");
    let mut triggers = Vec::new();
    let trigger_tables = r.tables(d, "triggers");
    if trigger_tables.is_empty() && r.get("triggers").is_none() {
        d.push(r.file.at(
            &r.span(),
            "missing [[triggers]]: say when the action runs (type = \"manual\", \"cron\", ...)",
        ));
    }
    let mut ok = name.is_some() && timeout.is_some();
    for mut t in trigger_tables {
        let kind = t.req_str(d, "type");
        let cron = t.str(d, "cron_schedule");
        let component = t.str(d, "component_name");
        t.know(&["index"]);
        let tspan = t.span();
        let file = t.file;
        t.finish(d, &[], |_| None);
        let Some(mut kind) = kind else {
            ok = false;
            continue;
        };
        // The names Nuon still takes for backwards compatibility, and
        // rewrites when it syncs.
        if let Some((_, new)) = OLD_TRIGGERS.iter().find(|(old, _)| *old == kind.text) {
            d.push(file.warn(
                &kind.span,
                format!(
                    "trigger type {:?} is the old name of {new:?}: read as {new:?}",
                    kind.text
                ),
            ));
            kind.text = (*new).to_owned();
        }
        if !TRIGGERS.contains(&kind.text.as_str()) {
            d.push(file.at(
                &kind.span,
                format!(
                    "unknown trigger type {:?}{}",
                    kind.text,
                    did_you_mean(&kind.text, TRIGGERS.iter().copied())
                ),
            ));
            ok = false;
            continue;
        }
        if kind.text == "cron" {
            match &cron {
                None => {
                    d.push(file.at(
                        &tspan,
                        "a cron trigger needs cron_schedule (five fields, e.g. \"0 * * * *\")",
                    ));
                    ok = false;
                }
                Some(c) => {
                    if let Err(e) = c.text.parse::<nuon_core::cron::Schedule>() {
                        d.push(file.at(&c.span, format!("cron_schedule {e}")));
                        ok = false;
                    }
                }
            }
        } else if let Some(c) = &cron {
            d.push(file.warn(
                &c.span,
                format!(
                    "cron_schedule is for cron triggers: a {} trigger ignores it",
                    kind.text
                ),
            ));
        }
        let per_component = kind.text.ends_with("-component");
        match (&component, per_component) {
            (None, true) => {
                d.push(file.at(
                    &tspan,
                    format!("a {} trigger needs component_name", kind.text),
                ));
                ok = false;
            }
            (Some(c), false) => d.push(file.at(
                &c.span,
                format!(
                    "component_name applies only to *-component triggers, not {}",
                    kind.text
                ),
            )),
            (Some(c), true) => item.refs.push(c.clone()),
            (None, false) => {}
        }
        triggers.push(Trigger {
            kind: kind.text,
            cron_schedule: text(cron),
            component_name: text(component),
        });
    }
    let inputs = action_inputs(&mut r, d);
    let mut steps = Vec::new();
    let step_tables = r.tables(d, "steps");
    if step_tables.is_empty() && r.get("steps").is_none() {
        d.push(r.file.at(
            &r.span(),
            "missing [[steps]]: an action runs at least one step",
        ));
        ok = false;
    }
    // A step may ask for the kubeconfig too, as Nuon's apps write it: the
    // action's script then has it.
    let mut step_kube_config = false;
    for mut s in step_tables {
        let sname = s.name(d, "name");
        step_kube_config |= s.bool(d, "enable_kube_config").unwrap_or(false);
        let command = s.str(d, "command");
        let inline = s.str(d, "inline_contents");
        let env_vars = s.str_map(d, "env_vars", &mut item.strings);
        let src = source(&mut s, d, &["path", "public_repo", "git"], false);
        if command.is_none() && inline.is_none() {
            d.push(
                s.file
                    .at(&s.span(), "a step needs command or inline_contents"),
            );
            ok = false;
        }
        s.finish(
            d,
            &[(
                "connected_repo",
                "use [steps.public_repo], [steps.git] or path",
            )],
            |_| None,
        );
        item.strings.extend(command.iter().cloned());
        item.strings.extend(inline.iter().cloned());
        match sname {
            Some(n) => steps.push(Step {
                name: n.text,
                command: text(command),
                inline_contents: text(inline),
                env_vars,
                source: src,
            }),
            None => ok = false,
        }
    }
    let description = text(r.str(d, "description"));
    let labels = r.str_map(d, "labels", &mut Vec::new());
    let enable_kube_config = r.bool(d, "enable_kube_config").unwrap_or(false);
    item.context = r.str(d, "kubernetes_context");
    let kubernetes_context = item.context.clone();
    let role = text(r.str(d, "role"));
    let break_glass_role = text(r.str(d, "break_glass_role"));
    r.finish(
        d,
        &[(
            "image",
            "steps run on the runner's host; running them in an image comes with container jobs",
        )],
        |_| None,
    );
    if ok && let (Some(n), Some(timeout)) = (&name, timeout) {
        item.value = Some(Action {
            name: n.text.clone(),
            timeout,
            triggers,
            steps,
            dependencies: item.deps.iter().map(|l| l.text.clone()).collect(),
            depends_on: Vec::new(),
            inputs,
            role,
            break_glass_role,
            description,
            labels,
            // A context implies a kubeconfig.
            enable_kube_config: enable_kube_config
                || step_kube_config
                || kubernetes_context.is_some(),
            kubernetes_context: kubernetes_context.map(|k| k.text),
        });
    }
    item.name = name;
    item
}

/// An action's `[[inputs]]`: each a name an environment variable may
/// have, once.
fn action_inputs(r: &mut Reader<'_, '_>, d: &mut Diagnostics) -> Vec<ActionInput> {
    let mut out: Vec<ActionInput> = Vec::new();
    for mut t in r.tables(d, "inputs") {
        let name = t.req_str(d, "name");
        let description = t.str(d, "description");
        let default = t.str(d, "default");
        let required = t.bool(d, "required").unwrap_or(false);
        t.finish(
            d,
            &[("display_name", "action inputs are shown by name here")],
            |_| None,
        );
        let Some(name) = name else { continue };
        let valid = !name.text.is_empty()
            && !name.text.starts_with(|c: char| c.is_ascii_digit())
            && name
                .text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            d.push(t.file.at(
                &name.span,
                format!(
                    "action input {:?} is not a valid environment variable name (letters, digits and _, not starting with a digit)",
                    name.text
                ),
            ));
            continue;
        }
        if out.iter().any(|i| i.name == name.text) {
            d.push(t.file.at(
                &name.span,
                format!("action input {:?} is declared twice", name.text),
            ));
            continue;
        }
        out.push(ActionInput {
            name: name.text,
            description: text(description),
            default: text(default),
            required,
        });
    }
    out
}
