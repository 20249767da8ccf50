//! Files a config names in a `contents` (and the like) rather than holding
//! the text: which they are, where they may be, and the config with their
//! text in place (what a config version keeps).

use serde_json::Value;

use super::{AppConfig, ComponentSpec, source_dir};

/// Whether a `contents` (of `[[var_file]]`, `[[values_file]]`), a step's
/// `inline_contents` or a `readme` names a file of the config (`./values/web.yaml`)
/// rather than holding the text itself: one word, no template, shaped like
/// a path.
pub fn is_file_ref(s: &str) -> bool {
    const EXTS: &[&str] = &[
        "tfvars", "json", "yaml", "yml", "sh", "bash", "py", "txt", "hcl", "tf", "env", "toml",
        "md",
    ];
    let s = s.trim();
    !s.is_empty()
        && !s.contains(char::is_whitespace)
        && !s.contains(['=', '{', '}', ':', '"', '\'', '$', ';', '|', '&'])
        && (s.starts_with("./")
            || s.starts_with("../")
            || s.rsplit_once('.')
                .is_some_and(|(_, ext)| EXTS.contains(&ext)))
}

/// Where a file named in a `contents` of a part written in `category`
/// (`components`, `actions`, `policies`, or `""` at the top) may be, in
/// order: next to the part's file first (as Nuon reads it), then at the
/// top of the config.
pub fn file_ref_candidates(category: &str, path: &str) -> Result<Vec<String>, String> {
    let top = source_dir(path)?;
    let mut out = Vec::new();
    // `permissions/policies`, then `permissions`, then the top.
    let mut dir = category;
    while !dir.is_empty() {
        if let Ok(near) = source_dir(&format!("{dir}/{path}"))
            && !out.contains(&near)
        {
            out.push(near);
        }
        dir = dir.rsplit_once('/').map_or("", |(parent, _)| parent);
    }
    if !out.contains(&top) {
        out.push(top);
    }
    Ok(out)
}

/// Every file a config names in a `contents`, `inline_contents` or
/// `permissions_boundary`: (who, the category it is written in, path as
/// written).
pub fn file_refs(config: &AppConfig) -> Vec<(String, &'static str, String)> {
    let mut out = Vec::new();
    let mut config = config.clone();
    visit_file_refs(&mut config, &mut |who, category, v| {
        out.push((who.to_owned(), category, v.clone()));
    });
    out
}

/// Calls `f` with every file reference of `config`, which it may rewrite.
fn visit_file_refs(config: &mut AppConfig, f: &mut dyn FnMut(&str, &'static str, &mut String)) {
    let mut one = |who: &str, category: &'static str, v: &mut String| {
        if is_file_ref(v) {
            f(who, category, v);
        }
    };
    if let Some(v) = &mut config.metadata.readme {
        one("metadata.toml readme", "", v);
    }
    if let Some(i) = &mut config.installer {
        for (key, v) in [
            ("post_install_markdown", &mut i.post_install_markdown),
            ("copyright_markdown", &mut i.copyright_markdown),
            ("footer_markdown", &mut i.footer_markdown),
        ] {
            if let Some(v) = v {
                one(&format!("installer.toml {key}"), "", v);
            }
        }
    }
    for r in &mut config.runbooks {
        if let Some(v) = &mut r.readme {
            one(&format!("runbook {:?} readme", r.name), "runbooks", v);
        }
    }
    if let Some(s) = &mut config.sandbox {
        for v in &mut s.var_files {
            one("the sandbox", "", v);
        }
    }
    for c in &mut config.components {
        let who = format!("component {:?}", c.name);
        let of_kind: Vec<&mut String> = match &mut c.spec {
            ComponentSpec::TerraformModule(t) => t.var_files.iter_mut().collect(),
            ComponentSpec::HelmChart(h) => h.values_files.iter_mut().collect(),
            ComponentSpec::KubernetesManifest(m) => m.manifest.iter_mut().collect(),
            _ => Vec::new(),
        };
        for v in c.readme.iter_mut().chain(of_kind) {
            one(&who, "components", v);
        }
    }
    for a in &mut config.actions {
        for st in &mut a.steps {
            let who = format!("action {:?} step {:?}", a.name, st.name);
            if let Some(v) = &mut st.inline_contents {
                one(&who, "actions", v);
            }
        }
    }
    for p in &mut config.policies {
        let who = format!("policy {:?}", p.name.as_deref().unwrap_or(&p.kind));
        one(&who, "policies", &mut p.contents);
    }
    let perms = &mut config.permissions;
    let roles = perms.roles.iter_mut().chain(perms.break_glass.iter_mut());
    for r in roles {
        let who = format!("role {:?}", r.name);
        if let Some(b) = &mut r.permissions_boundary {
            one(&who, "permissions", b);
        }
        for c in r.policies.iter_mut().filter_map(|p| p.get_mut("contents")) {
            if let Value::String(c) = c {
                one(&who, "permissions", c);
            }
        }
    }
    for p in &mut perms.named_policies {
        let who = format!(
            "named policy {:?}",
            p.get("name").and_then(Value::as_str).unwrap_or("")
        );
        if let Some(Value::String(c)) = p.get_mut("contents") {
            one(&who, "permissions/policies", c);
        }
    }
}

/// Replaces every file a config names in a `contents` (and the like) by
/// the file's text, as `read` gives it for a path relative to the config
/// directory ([`file_ref_candidates`] in order): what a config version
/// keeps, so a deploy never sees the path. Returns the problems (a file not
/// given).
pub fn inline_file_refs(
    config: &mut AppConfig,
    read: &dyn Fn(&str) -> Option<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    visit_file_refs(config, &mut |who, category, v| {
        match file_ref_candidates(category, v) {
            Ok(candidates) => match candidates.iter().find_map(|c| read(c)) {
                Some(text) => *v = text,
                None => problems.push(format!(
                    "{who}: file {v:?} named in contents was not given with the config (sync from the config's directory with `nuon apps sync`)"
                )),
            },
            Err(e) => problems.push(format!("{who}: {e}")),
        }
    });
    problems
}
