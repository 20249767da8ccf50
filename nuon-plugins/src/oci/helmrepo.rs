//! Charts from a classic Helm repository (`index.yaml` and `.tgz` files
//! over HTTP), for `[helm_repo]` sources: the chart version is picked from
//! the index, its archive downloaded and checked against the index's
//! digest, and pushed as a Helm OCI chart with the archive as its layer.
//!
//! `index.yaml` is read line by line for what this needs (each entry's
//! name, version, urls and digest), as `helm repo index` writes it.

pub use super::helmpkg::{chart_yaml_of, push_chart_archive};

/// One version of a chart in an index.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexEntry {
    /// The chart's version.
    pub version: String,
    /// Where its archive is (absolute, or relative to the repository).
    pub urls: Vec<String>,
    /// The archive's sha256, hex, when the index gives it.
    pub digest: Option<String>,
}

fn unquote(v: &str) -> String {
    let v = v.trim();
    v.strip_prefix('"')
        .and_then(|x| x.strip_suffix('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
        .unwrap_or(v)
        .to_owned()
}

/// The versions of `chart` in an `index.yaml`.
pub fn index_entries(index: &str, chart: &str) -> Vec<IndexEntry> {
    let mut out = Vec::new();
    let mut in_entries = false;
    let mut in_chart = false;
    let mut item_indent = None;
    let mut current: Option<IndexEntry> = None;
    let mut in_urls = false;
    for line in index.lines() {
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let indent = line.len() - line.trim_start().len();
        let t = line.trim_start();
        if indent == 0 {
            in_entries = t.starts_with("entries:");
            in_chart = false;
            continue;
        }
        if !in_entries {
            continue;
        }
        // A chart's name: `  NAME:` directly under `entries:`.
        if !t.starts_with('-') && t.ends_with(':') && item_indent.is_none_or(|i| indent <= i) {
            if let Some(e) = current.take() {
                out.push(e);
            }
            in_chart = unquote(t.trim_end_matches(':')) == chart;
            item_indent = None;
            continue;
        }
        if !in_chart {
            continue;
        }
        let (t, starts_item) = match t.strip_prefix("- ") {
            Some(rest) if item_indent.is_none_or(|i| indent <= i) => {
                item_indent = Some(indent);
                (rest, true)
            }
            _ => (t, false),
        };
        if starts_item {
            if let Some(e) = current.take() {
                out.push(e);
            }
            current = Some(IndexEntry::default());
            in_urls = false;
        }
        let Some(e) = current.as_mut() else { continue };
        if in_urls && let Some(u) = t.strip_prefix("- ") {
            e.urls.push(unquote(u));
            continue;
        }
        in_urls = false;
        if let Some((k, v)) = t.split_once(':') {
            match k.trim() {
                "version" => e.version = unquote(v),
                "digest" => e.digest = Some(unquote(v)),
                "urls" => {
                    let v = v.trim();
                    if v.is_empty() {
                        in_urls = true;
                    } else {
                        e.urls.extend(
                            v.trim_matches(['[', ']'])
                                .split(',')
                                .map(unquote)
                                .filter(|u| !u.is_empty()),
                        );
                    }
                }
                _ => {}
            }
        }
    }
    out.extend(current);
    out.retain(|e| !e.version.is_empty() && !e.urls.is_empty());
    out
}

/// Whether version `a` sorts after `b` (numeric parts compared as numbers).
fn newer(a: &str, b: &str) -> bool {
    let key = |v: &str| -> Vec<(u64, String)> {
        v.trim_start_matches('v')
            .split(['.', '-', '+'])
            .map(|p| (p.parse().unwrap_or(0), p.to_owned()))
            .collect()
    };
    key(a) > key(b)
}

/// Picks `version` (or, as Helm does, the newest that is not a
/// pre-release) of `chart` from an index.
pub fn pick(entries: &[IndexEntry], version: Option<&str>) -> Option<IndexEntry> {
    match version {
        Some(v) => entries.iter().find(|e| e.version == v).cloned(),
        None => entries
            .iter()
            .filter(|e| !e.version.contains('-'))
            .fold(None::<&IndexEntry>, |best, e| match best {
                Some(b) if !newer(&e.version, &b.version) => Some(b),
                _ => Some(e),
            })
            .cloned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INDEX: &str = r#"apiVersion: v1
entries:
  other:
  - name: other
    urls:
    - other-1.0.0.tgz
    version: 1.0.0
  web:
  - apiVersion: v2
    created: "2024-01-01T00:00:00Z"
    digest: abc123
    name: web
    urls:
    - https://charts.example/web-0.2.0.tgz
    version: 0.2.0
  - apiVersion: v2
    name: web
    urls: ["web-0.10.0.tgz"]
    version: "0.10.0"
  - name: web
    urls:
    - web-0.1.0.tgz
    version: 0.1.0
generated: "2024-01-01T00:00:00Z"
"#;

    #[test]
    fn an_index_yields_each_version_with_its_urls_and_digest() {
        let e = index_entries(INDEX, "web");
        assert_eq!(e.len(), 3, "{e:?}");
        assert_eq!(e[0].version, "0.2.0");
        assert_eq!(e[0].digest.as_deref(), Some("abc123"));
        assert_eq!(e[0].urls, ["https://charts.example/web-0.2.0.tgz"]);
        assert_eq!(e[1].urls, ["web-0.10.0.tgz"]);
        assert_eq!(
            pick(&e, None).unwrap().version,
            "0.10.0",
            "numeric, not text, order"
        );
        let pre = vec![
            IndexEntry {
                version: "1.0.0-rc.1".into(),
                urls: vec!["a".into()],
                digest: None,
            },
            IndexEntry {
                version: "0.9.0".into(),
                urls: vec!["b".into()],
                digest: None,
            },
        ];
        assert_eq!(
            pick(&pre, None).unwrap().version,
            "0.9.0",
            "no pre-release unless asked"
        );
        assert_eq!(pick(&pre, Some("1.0.0-rc.1")).unwrap().urls, ["a"]);
        assert_eq!(pick(&e, Some("0.1.0")).unwrap().urls, ["web-0.1.0.tgz"]);
        assert!(pick(&e, Some("9.9.9")).is_none());
        assert_eq!(index_entries(INDEX, "other").len(), 1);
        assert!(index_entries(INDEX, "nope").is_empty());
    }

    #[test]
    fn a_packaged_chart_reads_back_its_chart_yaml() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("Chart.yaml"),
            "apiVersion: v2\nname: web\nversion: 0.3.0\n",
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("templates")).unwrap();
        std::fs::write(dir.path().join("templates/x.yaml"), "kind: X\n").unwrap();
        let tgz = super::super::helmpkg::package_chart(dir.path(), "web").unwrap();
        let yaml = chart_yaml_of(&tgz).unwrap();
        assert!(yaml.contains("version: 0.3.0"), "{yaml}");
        assert!(chart_yaml_of(b"not gzip").is_err());
    }
}
