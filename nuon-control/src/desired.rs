//! Desired against deployed, below the services and the health: the
//! values an install holds ([`values_of`]) and what of them is not
//! deployed yet, value by value ([`pending_view`]).

use std::collections::{BTreeMap, BTreeSet};

use nuon_core::model::InstallValues;
use nuon_core::wire::{PendingValue, PendingValues};
use serde_json::Value;

use crate::secrets::Sealed;
use crate::store::StoredInstall;

/// A value as text: a string as is, anything else as JSON.
pub(crate) fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The values `install` holds now.
pub(crate) fn values_of(install: &StoredInstall) -> InstallValues {
    InstallValues {
        inputs_json: install.inputs_json.clone(),
        sealed_json: install.sealed_json.clone(),
        toggles: install.toggles.clone(),
        overrides_json: serde_json::to_string(&install.overrides).unwrap_or_else(|_| "{}".into()),
    }
}

/// What `install` has changed and not deployed, value by value; none when
/// nothing differs from what is deployed.
pub(crate) fn pending_view(install: &StoredInstall) -> Option<PendingValues> {
    let p = install.pending.as_ref()?;
    let mut changes = Vec::new();
    let was: BTreeMap<String, Value> = serde_json::from_str(&p.deployed.inputs_json).ok()?;
    let now: BTreeMap<String, Value> = serde_json::from_str(&install.inputs_json).ok()?;
    let shown = |v: Option<&Value>| v.map(as_text);
    for name in keys(&was, &now) {
        if was.get(name) != now.get(name) {
            changes.push(PendingValue {
                kind: "input".into(),
                name: name.clone(),
                deployed: shown(was.get(name)),
                desired: shown(now.get(name)),
            });
        }
    }
    // Sealed values by name only: a value set again counts as changed.
    let was: Sealed = serde_json::from_str(&p.deployed.sealed_json).ok()?;
    let now: Sealed = serde_json::from_str(&install.sealed_json).ok()?;
    for (kind, was, now) in [
        ("sensitive_input", &was.inputs, &now.inputs),
        ("secret", &was.secrets, &now.secrets),
    ] {
        for name in keys(was, now) {
            if was.get(name) != now.get(name) {
                changes.push(named(kind, name));
            }
        }
    }
    let side = |on: Option<&bool>| {
        Some(match on {
            Some(true) => "on".to_owned(),
            Some(false) => "off".to_owned(),
            None => "default".to_owned(),
        })
    };
    for name in keys(&p.deployed.toggles, &install.toggles) {
        let (was, now) = (p.deployed.toggles.get(name), install.toggles.get(name));
        if was != now {
            changes.push(PendingValue {
                kind: "component".into(),
                name: name.clone(),
                deployed: side(was),
                desired: side(now),
            });
        }
    }
    let was: BTreeMap<String, Value> =
        serde_json::from_str(&p.deployed.overrides_json).unwrap_or_default();
    let now: BTreeMap<String, Value> =
        serde_json::from_str(&values_of(install).overrides_json).unwrap_or_default();
    for name in keys(&was, &now) {
        if was.get(name) != now.get(name) {
            changes.push(named("overrides", name));
        }
    }
    if changes.is_empty() {
        return None;
    }
    Some(PendingValues {
        changes,
        components: p.waiting.iter().cloned().collect(),
        applied: p.applied.iter().cloned().collect(),
        workflow_id: p.workflow.clone(),
        ended: p.ended.clone(),
        since_ms: p.since_ms,
        apply: format!("nuon installs apply-pending {}", install.name),
        discard: format!("nuon installs discard-pending {}", install.name),
    })
}

fn named(kind: &str, name: &str) -> PendingValue {
    PendingValue {
        kind: kind.into(),
        name: name.into(),
        deployed: None,
        desired: None,
    }
}

/// The keys of two maps, once each, in order.
pub(crate) fn keys<'a, T>(
    a: &'a BTreeMap<String, T>,
    b: &'a BTreeMap<String, T>,
) -> BTreeSet<&'a String> {
    a.keys().chain(b.keys()).collect()
}
