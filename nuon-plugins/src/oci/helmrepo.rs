//! Charts from a classic Helm repository (`index.yaml` and `.tgz` files
//! over HTTP), for `[helm_repo]` sources: the chart version is picked from
//! the index, its archive downloaded and checked against the index's
//! digest, and pushed as a Helm OCI chart with the archive as its layer.
//!
//! `index.yaml` is read line by line for what this needs (each entry's
//! name, version, urls and digest), as `helm repo index` writes it.

use std::collections::BTreeMap;
use std::io::Read;

use nuon_core::artifact::{
    ArtifactError, ArtifactStore, Descriptor, Digest, ImageManifest, MANIFEST_MEDIA_TYPE,
    RawManifest,
};

use super::helmpkg::{HELM_CHART_MEDIA_TYPE, HELM_CONFIG_MEDIA_TYPE, chart_metadata};

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

/// `Chart.yaml` of the chart archive `tgz` (the first `*/Chart.yaml`).
pub fn chart_yaml_of(tgz: &[u8]) -> Result<String, ArtifactError> {
    let bad = |why: &str| ArtifactError::Invalid(format!("the chart archive {why}"));
    let mut tar = Vec::new();
    flate2::read::GzDecoder::new(tgz)
        .read_to_end(&mut tar)
        .map_err(|e| bad(&format!("is not gzip: {e}")))?;
    let mut at = 0;
    while at + 512 <= tar.len() {
        let h = &tar[at..at + 512];
        if h.iter().all(|&b| b == 0) {
            break;
        }
        let field = |from: usize, len: usize| {
            let f = &h[from..from + len];
            let end = f.iter().position(|&b| b == 0).unwrap_or(len);
            String::from_utf8_lossy(&f[..end]).into_owned()
        };
        let name = {
            let (prefix, base) = (field(345, 155), field(0, 100));
            if prefix.is_empty() {
                base
            } else {
                format!("{prefix}/{base}")
            }
        };
        let size = u64::from_str_radix(field(124, 12).trim(), 8)
            .map_err(|_| bad("has a bad tar header"))? as usize;
        let body = at + 512;
        if body + size > tar.len() {
            return Err(bad("is cut short"));
        }
        if name.split('/').nth(1) == Some("Chart.yaml") && name.matches('/').count() == 1 {
            return Ok(String::from_utf8_lossy(&tar[body..body + size]).into_owned());
        }
        at = body + size.div_ceil(512) * 512;
    }
    Err(bad("has no NAME/Chart.yaml"))
}

/// Pushes the chart archive `tgz` to `store`/`repo` as a Helm OCI chart
/// tagged with its version and `extra_tag`; returns the manifest's digest.
pub async fn push_chart_archive(
    store: &dyn ArtifactStore,
    repo: &str,
    tgz: Vec<u8>,
    extra_tag: Option<&str>,
) -> Result<Digest, ArtifactError> {
    let meta = chart_metadata(&chart_yaml_of(&tgz)?)?;
    let config_bytes = serde_json::to_vec(&meta)
        .map_err(|e| ArtifactError::Invalid(format!("cannot encode the chart metadata: {e}")))?;
    let blob = |bytes: &[u8], media_type: &str| Descriptor {
        media_type: media_type.into(),
        digest: Digest::of(bytes),
        size: bytes.len() as u64,
        annotations: BTreeMap::new(),
    };
    let config = blob(&config_bytes, HELM_CONFIG_MEDIA_TYPE);
    let layer = blob(&tgz, HELM_CHART_MEDIA_TYPE);
    if !store.has_blob(repo, &config).await? {
        store
            .put_blob(repo, &config, Box::pin(std::io::Cursor::new(config_bytes)))
            .await?;
    }
    if !store.has_blob(repo, &layer).await? {
        store
            .put_blob(repo, &layer, Box::pin(std::io::Cursor::new(tgz)))
            .await?;
    }
    let bytes = serde_json::to_vec(&ImageManifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.into()),
        artifact_type: None,
        config,
        layers: vec![layer],
    })
    .map_err(|e| ArtifactError::Invalid(format!("cannot encode the manifest: {e}")))?;
    let raw = RawManifest {
        digest: Digest::of(&bytes),
        bytes,
        media_type: MANIFEST_MEDIA_TYPE.into(),
    };
    let version = meta["version"]
        .as_str()
        .unwrap_or_default()
        .replace('+', "_");
    store.put_manifest(repo, &raw, Some(&version)).await?;
    if let Some(t) = extra_tag {
        store.put_manifest(repo, &raw, Some(t)).await?;
    }
    Ok(raw.digest)
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
