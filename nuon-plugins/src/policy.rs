//! The policy gate of a plan: what the policies said of what the plan
//! would do is logged, a `deny` fails the plan, and the warnings go with
//! its outputs (the approval shows them).

use nuon_core::policy::{PolicySource, Verdict};
use nuon_core::{JobHost, JobResult};

/// Logs `verdict` (the policies' answer on the plan of `what`); `Err` with
/// the failed result when a policy denies it (or could not be evaluated),
/// else the warnings.
pub(crate) fn gate(
    host: &mut dyn JobHost,
    policies: &[PolicySource],
    what: &str,
    verdict: Result<Verdict, String>,
) -> Result<Vec<String>, JobResult> {
    if policies.is_empty() {
        return Ok(Vec::new());
    }
    let verdict = verdict.map_err(|e| JobResult::failed(format!("policies: {e}")))?;
    for w in &verdict.warn {
        host.log(&format!("policy warning: {w}"));
    }
    if !verdict.deny.is_empty() {
        for d in &verdict.deny {
            host.log(&format!("policy denies: {d}"));
        }
        return Err(JobResult::failed(format!(
            "the {what} is denied by policy: {}",
            verdict.deny.join("; ")
        )));
    }
    host.log(&format!(
        "the {what} passes {} polic{}",
        policies.len(),
        if policies.len() == 1 { "y" } else { "ies" }
    ));
    Ok(verdict.warn)
}

/// [`gate`] on each Kubernetes object of multi-document YAML (objects
/// that name no namespace go to `namespace`).
#[cfg(feature = "helm")]
pub(crate) fn gate_manifests(
    host: &mut dyn JobHost,
    policies: &[PolicySource],
    what: &str,
    yaml: &str,
    namespace: Option<&str>,
) -> Result<Vec<String>, JobResult> {
    if policies.is_empty() {
        return Ok(Vec::new());
    }
    let verdict = nuon_core::policy::manifest_objects(yaml)
        .and_then(|objects| nuon_core::policy::evaluate_objects(policies, &objects, namespace));
    gate(host, policies, what, verdict)
}
