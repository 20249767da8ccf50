//! A build without a policy engine (nuon-core's `policies` feature off):
//! each policy is refused, never passed over. A config with policies does
//! not check, and a plan with policies is not applied; with no policies
//! there is nothing to evaluate.

use super::{CompileError, PolicySource, Verdict};

/// What this build says of any policy.
const NO_ENGINE: &str = "this build has no policy engine (nuon-core's `policies` feature is off): it cannot check or evaluate Rego or Kyverno policies";

/// Refuses the policy: this build cannot compile it.
pub fn compile(_: &PolicySource) -> Result<(), CompileError> {
    Err(CompileError {
        line: 1,
        col: 1,
        message: NO_ENGINE.to_owned(),
    })
}

/// No verdict when there are policies to evaluate.
pub fn evaluate_objects(
    policies: &[PolicySource],
    _: &[serde_json::Value],
    _: Option<&str>,
) -> Result<Verdict, String> {
    refuse(policies.first())
}

/// No verdict when there are Rego policies to evaluate.
pub fn evaluate(policies: &[PolicySource], _: &serde_json::Value) -> Result<Verdict, String> {
    refuse(policies.iter().find(|p| !p.is_kyverno()))
}

/// Refuses a Kyverno policy: this build cannot read it.
pub fn check_kyverno(_: &str) -> Result<(), String> {
    Err(NO_ENGINE.to_owned())
}

/// Refuses `first`, the first policy there is to evaluate; none, none
/// refused.
fn refuse(first: Option<&PolicySource>) -> Result<Verdict, String> {
    match first {
        None => Ok(Verdict::default()),
        Some(p) => Err(format!("policy {:?}: {NO_ENGINE}", p.name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_an_engine_every_policy_is_refused_and_none_passes() {
        let rego = PolicySource {
            name: "no-public".into(),
            contents: "package nuon\nimport rego.v1\n".into(),
            engine: None,
        };
        let kyverno = PolicySource {
            engine: Some("kyverno".into()),
            name: "limits".into(),
            ..rego.clone()
        };
        let e = compile(&rego).unwrap_err();
        assert!(e.message.contains("`policies` feature"), "{e:?}");
        let plan = serde_json::json!({"resource_changes": []});
        let e = evaluate(std::slice::from_ref(&rego), &plan).unwrap_err();
        assert!(
            e.contains("no-public") && e.contains("no policy engine"),
            "{e}"
        );
        let e =
            evaluate_objects(std::slice::from_ref(&kyverno), &[plan.clone()], None).unwrap_err();
        assert!(e.contains("limits"), "{e}");
        assert!(check_kyverno("kind: ClusterPolicy\n").is_err());
        // Nothing to evaluate: nothing refused.
        assert_eq!(evaluate(&[], &plan), Ok(Verdict::default()));
        assert_eq!(evaluate(&[kyverno], &plan), Ok(Verdict::default()));
        assert_eq!(evaluate_objects(&[], &[plan], None), Ok(Verdict::default()));
    }
}
