//! Kubernetes objects of multi-document YAML (a chart's rendered
//! templates, a manifest, a kustomization's build, Kyverno policies), read
//! with the limits a hostile document needs.

/// The deepest YAML nesting taken. The parser refuses past 128 anyway, but
/// only after work that grows with the square of the depth: a 200 KB line
/// of brackets took seconds.
const MAX_YAML_DEPTH: usize = 128;

/// The deepest nesting of flow collections (`[`, `{`): one pass, before the
/// parser sees the text. Brackets in quoted text count too (a quote cannot
/// be told from an apostrophe without parsing), so a string holding more
/// than [`MAX_YAML_DEPTH`] unclosed brackets is refused with the rest.
fn flow_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for b in text.bytes() {
        match b {
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// The Kubernetes objects of multi-document YAML (rendered Helm
/// templates, a `kubernetes_manifest`), each as JSON; empty documents and
/// comments are left out.
pub fn manifest_objects(yaml: &str) -> Result<Vec<serde_json::Value>, String> {
    let mut docs = vec![String::new()];
    for line in yaml.lines() {
        if line == "---" || line.starts_with("--- ") || line.starts_with("---\t") {
            docs.push(String::new());
        } else if line == "..." {
            continue;
        } else {
            let d = docs.last_mut().expect("never empty");
            d.push_str(line);
            d.push('\n');
        }
    }
    let mut out = Vec::new();
    for (i, d) in docs.iter().enumerate() {
        let meaningful = d
            .lines()
            .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'));
        if !meaningful {
            continue;
        }
        if flow_depth(d) > MAX_YAML_DEPTH {
            return Err(format!(
                "document {} of the manifests nests `[` and `{{` deeper than {MAX_YAML_DEPTH} levels (brackets in quoted text count too)",
                i + 1
            ));
        }
        let v: serde_json::Value = serde_yaml::from_str(d)
            .map_err(|e| format!("document {} of the manifests is not YAML: {e}", i + 1))?;
        if !v.is_null() {
            out.push(v);
        }
    }
    Ok(out)
}
