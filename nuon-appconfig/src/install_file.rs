//! An install file (`installs/NAME.toml`): its approval mode, inputs,
//! labels, component toggles and per-component overrides, read into an
//! [`InstallDecl`] (checked against the app's inputs and components by
//! [`super::check`]).

use std::collections::BTreeMap;

use serde_json::Value;

use super::InstallDecl;
use super::loaded::{Item, Loaded, OverrideAt, Place, check_refs};
use super::reader::{Reader, text};
use nuon_core::app::{Diagnostics, SourceFile};

pub(super) fn install(
    mut r: Reader<'_, '_>,
    file: usize,
    d: &mut Diagnostics,
) -> Item<InstallDecl> {
    let mut item = Item::new(file);
    let name = r.name(d, "name");
    let approval = r.str(d, "approval_option");
    if let Some(a) = &approval
        && !["approve-all", "auto", "prompt"].contains(&a.text.as_str())
    {
        d.push(r.file.at(
            &a.span,
            format!(
                "approval_option {:?} is not one of approve-all, auto, prompt",
                a.text
            ),
        ));
    }
    for t in r.tables(d, "inputs") {
        for (key, val) in t.entries() {
            match super::reader::to_json(val.get_ref()) {
                Ok(j) => item.values.push((key, j)),
                Err(e) => d.push(r.file.at(&val.span(), format!("{:?}: {e}", key.text))),
            }
        }
    }
    // Nuon keeps any string; a label that cannot select here (selectors
    // take Kubernetes' rules) is left out with a warning, not an error.
    let mut labels = BTreeMap::new();
    if let Some(t) = r.table(d, "labels") {
        for (key, val) in t.entries() {
            let toml::de::DeValue::String(v) = val.get_ref() else {
                d.push(
                    r.file
                        .at(&val.span(), format!("labels.{} must be a string", key.text)),
                );
                continue;
            };
            let checked = nuon_core::labels::check_key(&key.text)
                .and_then(|()| nuon_core::labels::check_value(&key.text, v));
            match checked {
                Ok(()) if labels.len() < 64 => {
                    labels.insert(key.text.clone(), v.to_string());
                }
                Ok(()) => d.push(r.file.warn(
                    &key.span,
                    format!(
                        "label {:?} is left out: an install has at most 64 labels",
                        key.text
                    ),
                )),
                Err(e) => d.push(r.file.warn(
                    &key.span,
                    format!(
                        "{e}: the label is left out (groups and rollouts could not select by it)"
                    ),
                )),
            }
        }
    }
    // `[component_toggles]`: whether each toggleable component starts on
    // (checked against the components once all are read).
    let mut component_toggles = BTreeMap::new();
    if let Some(t) = r.table(d, "component_toggles") {
        for (key, val) in t.entries() {
            match val.get_ref() {
                toml::de::DeValue::Boolean(on) => {
                    component_toggles.insert(key.text.clone(), *on);
                    item.refs.push(key);
                }
                _ => d.push(r.file.at(
                    &val.span(),
                    format!("component_toggles.{} must be true or false", key.text),
                )),
            }
        }
    }
    // `[components.NAME]`: the install's own Helm values or Terraform
    // variables for a component (checked once all components are read);
    // `enabled` is an older form of `[component_toggles]`.
    let mut overrides = BTreeMap::new();
    if let Some(t) = r.table(d, "components") {
        for (key, val) in t.entries() {
            let toml::de::DeValue::Table(table) = val.get_ref() else {
                d.push(r.file.at(
                    &val.span(),
                    format!(
                        "components.{} must be a table ([components.{}] with helm_values or tf_vars)",
                        key.text, key.text
                    ),
                ));
                continue;
            };
            let mut c = r.nested("components.*", table, val.span());
            let helm_values = c.str(d, "helm_values");
            let tf_vars = c.str(d, "tf_vars");
            if let Some(on) = c.bool(d, "enabled") {
                component_toggles.insert(key.text.clone(), on);
                item.refs.push(key.clone());
            }
            c.finish(d, &[], |_| None);
            if helm_values.is_some() || tf_vars.is_some() {
                overrides.insert(
                    key.text.clone(),
                    super::ComponentOverride {
                        helm_values: helm_values.as_ref().map(|l| l.text.clone()),
                        tf_vars: tf_vars.as_ref().map(|l| l.text.clone()),
                    },
                );
            }
            item.overrides.push(OverrideAt {
                component: key,
                helm_values,
                tf_vars,
            });
        }
    }
    r.finish(
        d,
        &[
            (
                "aws_account",
                "the install's cloud account is the runner's own; nothing is read from this",
            ),
            (
                "gcp_account",
                "the install's cloud account is the runner's own; nothing is read from this",
            ),
            (
                "azure_account",
                "the install's cloud account is the runner's own; nothing is read from this",
            ),
            (
                "stack_overrides",
                "install stacks are made from the app's stack.toml, runner.toml and permissions: per-install overrides are not read",
            ),
            ("telemetry", "this platform sends no telemetry"),
            (
                "app_branch",
                "app branches are part of Nuon's hosted service",
            ),
            (
                "app_branch_group",
                "app branches are part of Nuon's hosted service",
            ),
        ],
        |_| None,
    );
    item.value = name.as_ref().map(|n| InstallDecl {
        name: n.text.clone(),
        approval_option: text(approval),
        inputs: BTreeMap::new(),
        labels,
        component_toggles,
        components: overrides,
    });
    item.name = name;
    item
}

/// Only a toggleable component may be turned off by an install file.
pub(super) fn check_toggles(
    inst: &Item<InstallDecl>,
    loaded: &Loaded,
    components: &BTreeMap<String, Place>,
    file: &SourceFile,
    d: &mut Diagnostics,
) {
    check_refs("component", &inst.refs, components, file, d);
    for r in inst
        .refs
        .iter()
        .filter(|r| components.contains_key(&r.text))
    {
        let toggleable = loaded
            .components
            .iter()
            .filter_map(|c| c.value.as_ref())
            .any(|c| c.name == r.text && c.toggleable);
        if !toggleable {
            d.push(file.at(
                &r.span,
                format!(
                    "component_toggles: component {:?} is not toggleable (give it `toggleable = true`)",
                    r.text
                ),
            ));
        }
    }
}

/// An install file's inputs: each declared and of its declared type, every
/// required one given; the values as their types make them.
pub(super) fn check_inputs(
    inst: &Item<InstallDecl>,
    loaded: &Loaded,
    inputs: &BTreeMap<String, Place>,
    file: &SourceFile,
    d: &mut Diagnostics,
) -> BTreeMap<String, Value> {
    let mut values = BTreeMap::new();
    for (key, raw) in &inst.values {
        let Some(decl) = loaded
            .inputs
            .iter()
            .filter_map(|i| i.value.as_ref())
            .find(|i| i.name == key.text)
        else {
            check_refs("input", std::slice::from_ref(key), inputs, file, d);
            continue;
        };
        match decl.ty.coerce(raw) {
            Ok(v) => {
                values.insert(key.text.clone(), v);
            }
            Err(e) => d.push(file.at(&key.span, format!("input {:?}: {e}", key.text))),
        }
    }
    for decl in loaded.inputs.iter().filter_map(|i| i.value.as_ref()) {
        if decl.required && !values.contains_key(&decl.name) {
            let at = inst.name.as_ref().map(|n| n.span.clone()).unwrap_or(0..0);
            d.push(file.at(
                &at,
                format!(
                    "install {:?} does not give the required input {:?}",
                    inst.name.as_ref().map(|n| n.text.as_str()).unwrap_or(""),
                    decl.name
                ),
            ));
        }
    }
    values
}
