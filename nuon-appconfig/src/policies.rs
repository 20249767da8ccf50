//! Checking a config's policies: each Rego policy compiles, each Kyverno
//! policy is one this platform evaluates.

use nuon_core::app::*;
use nuon_core::policy::PolicySource;

/// The policies of `config`, their contents read through `read` when they
/// name a file: every Rego policy that does not compile and every Kyverno
/// policy that is not one this platform evaluates, as a diagnostic at its
/// file (the policy's file, or `policy NAME (inline)`), line and column.
pub fn check_policies(
    config: &AppConfig,
    read: &dyn Fn(&str) -> Option<String>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for p in &config.policies {
        let name = p.name.clone().unwrap_or_else(|| p.kind.clone());
        let (file, text) = if is_file_ref(&p.contents) {
            let found = file_ref_candidates("policies", &p.contents)
                .ok()
                .and_then(|c| c.into_iter().find_map(|f| read(&f).map(|t| (f, t))));
            match found {
                Some(ft) => ft,
                None => continue, // reported as a missing file elsewhere
            }
        } else {
            (format!("policy {name:?} (inline)"), p.contents.clone())
        };
        let at = |line: usize, col: usize, message: String| Diagnostic {
            file: file.clone(),
            line: line as u32,
            col: col as u32,
            warning: false,
            message,
        };
        match policy_engine(p, &text) {
            "kyverno" => {
                if let Err(e) = nuon_core::policy::check_kyverno(&text) {
                    out.push(at(1, 1, format!("Kyverno policy {name:?}: {e}")));
                }
            }
            "opa" => {
                let source = PolicySource {
                    name: name.clone(),
                    contents: text.clone(),
                    engine: None,
                };
                if let Err(e) = nuon_core::policy::compile(&source) {
                    out.push(at(
                        e.line,
                        e.col,
                        format!("policy {name:?} does not compile: {}", e.message),
                    ));
                }
            }
            _ => {} // reported when the config was read
        }
    }
    out
}
