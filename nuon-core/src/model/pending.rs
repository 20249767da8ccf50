//! An install's values changed and not yet deployed: what was deployed
//! before (what a discard returns to), the components that do not run the
//! change yet, and those that do.
//!
//! Inputs, secrets, toggles and overrides are the install's desired
//! values; they change at once, and a workflow deploys them. When that
//! workflow is denied, fails or is cancelled, the change stays desired
//! and is shown as pending, with the commands to apply it (deploy the
//! components it waits on) or discard it (the deployed values back, and
//! the components that ran the change deployed with them again).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::WorkflowId;

/// An install's desired values, as stored (each as its own JSON).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallValues {
    /// Plain inputs, a JSON object.
    pub inputs_json: String,
    /// Sensitive inputs and secrets, sealed, JSON.
    pub sealed_json: String,
    /// Components turned on or off.
    #[serde(default)]
    pub toggles: BTreeMap<String, bool>,
    /// Each component's own values, a JSON object by component.
    #[serde(default)]
    pub overrides_json: String,
}

/// A change of an install's values that is not deployed everywhere yet.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unapplied {
    /// The values deployed before the first change (what a discard
    /// returns to).
    pub deployed: InstallValues,
    /// The components that do not run the change yet, each with when it
    /// began to wait: only a workflow started since then deploys it.
    #[serde(default)]
    pub waiting: BTreeMap<String, i64>,
    /// The components deployed with the change already (a discard deploys
    /// them again).
    #[serde(default)]
    pub applied: BTreeSet<String>,
    /// The sensitive inputs (`input:NAME`) and secrets (`secret:NAME`)
    /// whose value differs from the deployed one (they are sealed, so
    /// whoever opened them said so).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub sealed_changed: BTreeSet<String>,
    /// The newest workflow that deploys it, if one was started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowId>,
    /// How that workflow ended, once it did and the change is still
    /// waiting: `denied`, `failed`, `cancelled` or `succeeded` (the
    /// component was skipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// When the first change was made.
    pub since_ms: i64,
}

impl Unapplied {
    /// A change made at `now` over the values `deployed`.
    pub fn begin(deployed: InstallValues, now: i64) -> Self {
        Unapplied {
            deployed,
            waiting: BTreeMap::new(),
            applied: BTreeSet::new(),
            sealed_changed: BTreeSet::new(),
            workflow: None,
            ended: None,
            since_ms: now,
        }
    }

    /// `components` take a change at `at`, which `workflow` deploys (none:
    /// it waits for a later deploy). A workflow's own start is its time
    /// (its id's), so it counts for what it deploys.
    pub fn changed(
        &mut self,
        components: impl IntoIterator<Item = String>,
        workflow: Option<WorkflowId>,
        at: i64,
    ) {
        let at = workflow.as_ref().map_or(at, |w| w.created_at_ms().min(at));
        for c in components {
            self.applied.remove(&c);
            self.waiting.insert(c, at);
        }
        self.workflow = workflow;
        self.ended = None;
    }

    /// Workflow `workflow` ended (`how`: `succeeded`, `failed`,
    /// `cancelled`, or `denied` when a step of it was), having deployed
    /// `deployed`: those that waited since before it started run the
    /// change now. Whether anything is still waiting.
    pub fn ran<'a>(
        &mut self,
        workflow: &WorkflowId,
        how: &str,
        deployed: impl IntoIterator<Item = &'a str>,
    ) -> bool {
        let started = workflow.created_at_ms();
        for c in deployed {
            if self.waiting.get(c).is_some_and(|since| *since <= started) {
                self.waiting.remove(c);
                self.applied.insert(c.to_owned());
            }
        }
        if self.workflow.as_ref() == Some(workflow) {
            self.ended = Some(how.to_owned());
        }
        !self.waiting.is_empty()
    }

    /// Stops waiting for `components` (gone from the config, or the
    /// install torn down): whether anything is still waiting.
    pub fn forget<'a>(&mut self, components: impl IntoIterator<Item = &'a str>) -> bool {
        for c in components {
            self.waiting.remove(c);
        }
        !self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_waits_until_a_workflow_started_since_deploys_it() {
        let mut p = Unapplied::begin(InstallValues::default(), 1);
        // A workflow that ran already when the change was made deploys
        // nothing of it.
        let before = WorkflowId::generate();
        std::thread::sleep(std::time::Duration::from_millis(3));
        let w1 = WorkflowId::generate();
        p.changed(
            ["queue".into(), "worker".into()],
            Some(w1.clone()),
            i64::MAX,
        );
        assert!(p.ran(&before, "succeeded", ["queue"]));
        assert_eq!(p.waiting.len(), 2);
        // Denied at worker's apply: queue runs it, worker waits.
        assert!(p.ran(&w1, "denied", ["queue"]));
        assert_eq!(p.ended.as_deref(), Some("denied"));
        assert_eq!(p.waiting.keys().collect::<Vec<_>>(), ["worker"]);
        assert_eq!(p.applied, BTreeSet::from(["queue".to_owned()]));
        // Another workflow (not the one that deploys it) leaves `ended`;
        // what it deployed that does not wait changes nothing.
        let other = WorkflowId::generate();
        assert!(p.ran(&other, "failed", ["cache"]));
        assert_eq!(p.ended.as_deref(), Some("denied"));
        assert_eq!(p.applied.len(), 1);
        // A later change of queue makes it wait again.
        std::thread::sleep(std::time::Duration::from_millis(3));
        let w2 = WorkflowId::generate();
        p.changed(["queue".into()], Some(w2.clone()), i64::MAX);
        assert_eq!(p.ended, None);
        assert_eq!(p.waiting.len(), 2);
        assert!(p.applied.is_empty());
        assert!(p.ran(&w2, "failed", []));
        assert_eq!(p.ended.as_deref(), Some("failed"));
        assert!(!p.ran(&w2, "succeeded", ["queue", "worker"]));
        // Forgotten components wait no more.
        p.changed(["gone".into()], None, 5);
        assert!(!p.forget(["gone"]));
    }
}
