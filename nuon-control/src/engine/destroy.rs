//! What a destroy skips: a component (or sandbox) that was never applied,
//! or is destroyed already, has nothing to destroy. Its sync, destroy plan
//! and destroy are skipped together, and say so, so that a teardown or a
//! deprovision always completes, whatever a failed or cancelled workflow
//! left.

use nuon_core::wire::InstallOutputs;
use nuon_core::workflow::StepStatus;
use serde_json::{Value, json};

use super::rules;
use super::{Ctx, Engine, Result};
use crate::store::StepUpdate;
use nuon_core::workflow::NOTHING_TO_DESTROY;

impl Engine {
    /// Skips step `i` and the rest of its destroy when what it destroys is
    /// not there. Whether it did.
    pub(super) async fn skip_if_nothing_to_destroy(&self, cx: &mut Ctx, i: usize) -> Result<bool> {
        let Some(group) = rules::destroy_group(&cx.wf.steps, i) else {
            return Ok(false);
        };
        let target = cx.wf.steps[i].target.clone();
        let Some(reason) = self.nothing_to_destroy(cx, target.as_deref()).await? else {
            return Ok(false);
        };
        let outputs = json!({ NOTHING_TO_DESTROY: true });
        for j in group {
            let index = cx.wf.steps[j].index;
            let u = StepUpdate {
                status: StepStatus::Skipped,
                reason: Some(reason.clone()),
                outputs_json: Some(outputs.to_string()),
                ..StepUpdate::default()
            };
            self.set_step(cx, index, u).await?;
        }
        tracing::info!(workflow = %cx.wf.id, target = target.as_deref().unwrap_or("sandbox"), %reason, "destroy skipped");
        Ok(true)
    }

    /// Why `target` (a component, or `None` for the sandbox) has nothing
    /// to destroy, if it has not: no outputs recorded by an apply, and a
    /// state (Terraform's, or a plugin's) that is missing or holds no
    /// resources.
    async fn nothing_to_destroy(&self, cx: &Ctx, target: Option<&str>) -> Result<Option<String>> {
        let outputs: InstallOutputs = cx
            .install
            .outputs_json
            .as_deref()
            .and_then(|o| serde_json::from_str(o).ok())
            .unwrap_or_default();
        let (what, live) = match target {
            None => ("the sandbox".to_owned(), !outputs.sandbox.is_empty()),
            Some(c) => (format!("component {c}"), outputs.components.contains_key(c)),
        };
        if live {
            return Ok(None);
        }
        let state = self.stored_state(cx, target.unwrap_or("sandbox")).await?;
        Ok(match state {
            None => Some(format!(
                "nothing to destroy: {what} has no state (never applied, or destroyed already)"
            )),
            Some(s) if holds_resources(&s) => None,
            Some(_) => Some(format!(
                "nothing to destroy: {what} is destroyed already (its state holds no resources)"
            )),
        })
    }
}

/// Whether a stored state holds something to destroy: a Terraform state
/// with resources, or any plugin's state.
fn holds_resources(state: &Value) -> bool {
    match state.get("resources") {
        Some(Value::Array(r)) => !r.is_empty(),
        // A Terraform state without resources (the key is there, or the
        // state says which Terraform wrote it).
        Some(_) => false,
        None => state.get("terraform_version").is_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_a_state_holds() {
        assert!(holds_resources(
            &json!({"terraform_version": "1.5.7", "resources": [{"type": "x"}]})
        ));
        assert!(!holds_resources(
            &json!({"terraform_version": "1.5.7", "resources": []})
        ));
        assert!(!holds_resources(&json!({"terraform_version": "1.5.7"})));
        // A plugin's own state: something it made.
        assert!(holds_resources(&json!({"release": "web"})));
    }
}
