//! Desired against deployed, below the services and the health: the
//! values an install holds ([`values_of`]) and what of them is not
//! deployed yet, value by value ([`pending_view`]).

use std::collections::{BTreeMap, BTreeSet};

use nuon_core::model::{Install, InstallValues, Unapplied};
use nuon_core::wire::{PendingValue, PendingValues};
use nuon_core::{InstallId, OrgId};
use serde_json::Value;

use crate::store::{Store, StoreError};

/// A value as text: a string as is, anything else as JSON.
pub(crate) fn as_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The values `install` holds now.
pub(crate) fn values_of(install: &Install) -> InstallValues {
    InstallValues {
        inputs_json: install.inputs_json.clone(),
        sealed_json: install.sealed_json.clone(),
        toggles: install.toggles.clone(),
        overrides_json: serde_json::to_string(&install.overrides).unwrap_or_else(|_| "{}".into()),
    }
}

/// What `install` has changed and not deployed, value by value (and the
/// components that do not run it yet); none when nothing is pending.
pub(crate) fn pending_view(install: &Install) -> Option<PendingValues> {
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
    // Sealed values by name only, as the one who opened them found them.
    for key in &p.sealed_changed {
        match key.split_once(':') {
            Some(("input", name)) => changes.push(named("sensitive_input", name)),
            Some(("secret", name)) => changes.push(named("secret", name)),
            _ => {}
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
    // Values changed back still wait where something runs another.
    if changes.is_empty() && p.waiting.is_empty() {
        return None;
    }
    Some(PendingValues {
        changes,
        components: p.waiting.keys().cloned().collect(),
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

/// Changes what `install` has pending with `f` (given it as it is, and the
/// install), over its revision: read and written again when another
/// change came between. The pending values after.
pub(crate) async fn update_pending(
    store: &dyn Store,
    org: &OrgId,
    install: &InstallId,
    f: impl FnMut(Option<Unapplied>, &Install) -> Option<Unapplied>,
) -> Result<Option<Unapplied>, StoreError> {
    update_pending_from(store, org, install, None, f).await
}

/// [`update_pending`], tried first on `known`, the install as its caller
/// read it a moment ago (no read): a write over its revision is refused
/// when another change came since, and the install is read again. Where
/// `f` changes nothing of `known`'s pending values nothing is written: a
/// value set since stays pending (what a caller that read before it ran
/// did not run).
pub(crate) async fn update_pending_from(
    store: &dyn Store,
    org: &OrgId,
    install: &InstallId,
    mut known: Option<&Install>,
    mut f: impl FnMut(Option<Unapplied>, &Install) -> Option<Unapplied>,
) -> Result<Option<Unapplied>, StoreError> {
    for _ in 0..50 {
        let read;
        let now = match known.take() {
            Some(i) => i,
            None => {
                let Some(found) = store.find_install(org, install.as_str()).await? else {
                    return Ok(None);
                };
                read = found;
                &read
            }
        };
        let next = f(now.pending.clone(), now);
        if next == now.pending
            || store
                .set_install_pending(org, install, next.as_ref(), now.pending_rev)
                .await?
        {
            return Ok(next);
        }
    }
    Err(StoreError::Conflict {
        code: nuon_core::wire::ErrorCode::InstallBusy,
        message: format!(
            "the pending values of install {install} kept changing under this change: try again"
        ),
        acked_seq: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn install(inputs: &str, sealed: &str, pending: Option<Unapplied>) -> Install {
        Install {
            inputs_json: inputs.into(),
            sealed_json: sealed.into(),
            toggles: [("cache".to_owned(), false)].into(),
            pending,
            ..crate::health::tests::active_install()
        }
    }

    #[test]
    fn pending_values_are_told_one_by_one_and_sealed_ones_by_name_only() {
        let sealed_was = r#"{"inputs":{"api_key":"SEALED-A"},"secrets":{"db":"SEALED-B"}}"#;
        let sealed_now = r#"{"inputs":{"api_key":"SEALED-C"},"secrets":{"db":"SEALED-D"}}"#;
        let mut p = Unapplied::begin(
            InstallValues {
                inputs_json: r#"{"size":"5","gone":"x"}"#.into(),
                sealed_json: sealed_was.into(),
                toggles: Default::default(),
                overrides_json: "{}".into(),
            },
            1,
        );
        p.changed(["queue".to_owned()], None, 2);
        // Only the sealed values whoever opened them found changed.
        p.sealed_changed = ["input:api_key".to_owned()].into();
        let i = install(r#"{"size":9}"#, sealed_now, Some(p.clone()));
        let v = pending_view(&i).unwrap();
        let lines: Vec<String> = v.changes.iter().map(PendingValue::line).collect();
        assert_eq!(
            lines,
            [
                "input gone: x → (unset)",
                "input size: 5 → 9",
                "sensitive_input api_key: changed",
                "component cache: default → off",
            ]
        );
        let shown = serde_json::to_string(&v).unwrap();
        assert!(!shown.contains("SEALED"), "{shown}");
        assert_eq!(v.components, ["queue"]);
        assert_eq!(v.discard, "nuon installs discard-pending acme");
        // Values changed back still show while a component waits; once
        // none waits and nothing differs, nothing is pending.
        let mut same = install(r#"{"size":"5","gone":"x"}"#, sealed_was, Some(p.clone()));
        same.toggles.clear();
        same.pending.as_mut().unwrap().sealed_changed.clear();
        assert_eq!(pending_view(&same).unwrap().changes, []);
        same.pending.as_mut().unwrap().forget(["queue"]);
        assert_eq!(pending_view(&same), None);
        assert_eq!(pending_view(&install("{}", "{}", None)), None);
    }
}
