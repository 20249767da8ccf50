//! A config's policies: the engine each is read with, the ones a part's
//! plan is checked against, and their check when the config is.

use super::{AppConfig, ComponentKind, Policy, is_file_ref};
use crate::policy::PolicySource;

/// The engine a policy is read with: its `engine` (`opa` and `rego` are
/// Rego), else Rego when it reads as Rego (a `.rego` file it names, or text
/// that starts with `package`), else Kyverno, Nuon's default.
pub fn policy_engine<'a>(p: &'a Policy, text: &str) -> &'a str {
    match p.engine.as_deref() {
        Some("opa" | "rego") => "opa",
        Some(other) => other,
        None if is_file_ref(text) && text.ends_with(".rego") => "opa",
        None if crate::policy::looks_like_rego(text) => "opa",
        None => "kyverno",
    }
}

/// The policy types a Kyverno policy checks: the objects charts and
/// manifests render (`kubernetes_cluster`: those of every component).
pub const KYVERNO_TYPES: &[&str] = &["kubernetes_cluster", "helm_chart", "kubernetes_manifest"];

/// The policies that apply to a part, as a job carries them: for the
/// sandbox (`None`), its Rego policies; for a component, those of its type
/// naming it or `*`, and for a chart or manifest the Kyverno policies of
/// `kubernetes_cluster` too.
pub fn policies_for(config: &AppConfig, component: Option<&str>) -> Vec<PolicySource> {
    let target = component.and_then(|c| config.component(c));
    let names = |p: &Policy, c: &str| p.components.iter().any(|x| x == "*" || x == c);
    config
        .policies
        .iter()
        .filter_map(|p| {
            let kyverno = match policy_engine(p, &p.contents) {
                "opa" => false,
                "kyverno" => true,
                _ => return None,
            };
            let applies = match target {
                None => component.is_none() && p.kind == "sandbox" && !kyverno,
                Some(c) if kyverno => {
                    matches!(
                        c.kind(),
                        ComponentKind::HelmChart | ComponentKind::KubernetesManifest
                    ) && ((p.kind == "kubernetes_cluster"
                        && (p.components.is_empty() || names(p, &c.name)))
                        || (p.kind == c.kind().as_str() && names(p, &c.name)))
                }
                Some(c) => p.kind == c.kind().as_str() && names(p, &c.name),
            };
            applies.then(|| PolicySource {
                name: p.name.clone().unwrap_or_else(|| p.kind.clone()),
                contents: p.contents.clone(),
                engine: kyverno.then(|| "kyverno".to_owned()),
            })
        })
        .collect()
}
