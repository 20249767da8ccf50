//! Helm charts as Helm OCI charts: config `application/vnd.cncf.helm.config.v1+json`
//! (the chart's metadata as JSON), one layer
//! `application/vnd.cncf.helm.chart.content.v1.tar+gzip` (the chart
//! directory as `NAME/...`), tagged with the chart's version, so that
//! `helm pull oci://...` works against any store holding it.
//!
//! The archive is reproducible: entries sorted, owner 0, time 0, modes
//! 0644 or 0755.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use nuon_core::artifact::{ArtifactError, ArtifactStore, Descriptor, Digest, ImageManifest};

/// The config media type of a Helm chart.
pub const HELM_CONFIG_MEDIA_TYPE: &str = "application/vnd.cncf.helm.config.v1+json";
/// The layer media type of a Helm chart.
pub const HELM_CHART_MEDIA_TYPE: &str = "application/vnd.cncf.helm.chart.content.v1.tar+gzip";

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ArtifactError {
    let what = what.into();
    move |source| ArtifactError::Io { what, source }
}

/// The top-level scalar fields of a `Chart.yaml` (`name`, `version`,
/// `apiVersion`, `description`, `appVersion`, `type`, ...), as JSON.
/// Nested values (dependencies, maintainers) are not read.
pub fn chart_metadata(
    chart_yaml: &str,
) -> Result<serde_json::Map<String, serde_json::Value>, ArtifactError> {
    let mut out = serde_json::Map::new();
    for line in chart_yaml.lines() {
        if line.starts_with([' ', '\t', '-', '#']) || line.trim().is_empty() {
            continue;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.split(" #").next().unwrap_or("").trim();
        if v.is_empty() {
            continue;
        }
        let v = v
            .strip_prefix('"')
            .and_then(|x| x.strip_suffix('"'))
            .or_else(|| v.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')))
            .unwrap_or(v);
        // Helm's metadata has one boolean (`deprecated`); the rest are text.
        let value = match (k.trim(), v) {
            ("deprecated", "true") => serde_json::Value::Bool(true),
            ("deprecated", "false") => serde_json::Value::Bool(false),
            _ => serde_json::Value::String(v.to_owned()),
        };
        out.insert(k.trim().to_owned(), value);
    }
    for required in ["name", "version"] {
        if !out.contains_key(required) {
            return Err(ArtifactError::Invalid(format!(
                "Chart.yaml has no {required}: a Helm chart needs a name and a version"
            )));
        }
    }
    Ok(out)
}

/// Every file under `dir`, sorted, relative and `/`-separated; symlinks
/// are refused.
fn files_of(dir: &Path) -> Result<Vec<(String, PathBuf, bool)>, ArtifactError> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).map_err(io(format!("cannot read {}", d.display())))? {
            let e = e.map_err(io(format!("cannot read {}", d.display())))?;
            let p = e.path();
            let meta = std::fs::symlink_metadata(&p)
                .map_err(io(format!("cannot read {}", p.display())))?;
            if meta.file_type().is_symlink() {
                return Err(ArtifactError::Invalid(format!(
                    "{} is a symlink: charts are packaged without links",
                    p.display()
                )));
            }
            if meta.is_dir() {
                stack.push(p);
            } else {
                let rel = p
                    .strip_prefix(dir)
                    .unwrap_or(&p)
                    .to_string_lossy()
                    .replace('\\', "/");
                use std::os::unix::fs::PermissionsExt;
                out.push((rel, p, meta.permissions().mode() & 0o111 != 0));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// One ustar header.
fn header(name: &str, size: u64, exec: bool) -> Result<[u8; 512], ArtifactError> {
    let mut h = [0u8; 512];
    let (prefix, base) = if name.len() <= 100 {
        ("", name)
    } else {
        let cut = name[..name.len().min(155)]
            .rfind('/')
            .filter(|&i| name.len() - i - 1 <= 100)
            .ok_or_else(|| {
                ArtifactError::Invalid(format!("path too long for a chart archive: {name}"))
            })?;
        (&name[..cut], &name[cut + 1..])
    };
    let put =
        |h: &mut [u8; 512], at: usize, bytes: &[u8]| h[at..at + bytes.len()].copy_from_slice(bytes);
    put(&mut h, 0, base.as_bytes());
    put(
        &mut h,
        100,
        format!("{:07o}\0", if exec { 0o755 } else { 0o644 }).as_bytes(),
    );
    put(&mut h, 108, b"0000000\0");
    put(&mut h, 116, b"0000000\0");
    put(&mut h, 124, format!("{size:011o}\0").as_bytes());
    put(&mut h, 136, b"00000000000\0");
    put(&mut h, 148, b"        ");
    h[156] = b'0';
    put(&mut h, 257, b"ustar\0");
    put(&mut h, 263, b"00");
    put(&mut h, 345, prefix.as_bytes());
    let sum: u32 = h.iter().map(|&b| u32::from(b)).sum();
    put(&mut h, 148, format!("{sum:06o}\0 ").as_bytes());
    Ok(h)
}

/// The chart in `dir` as a reproducible `.tgz` with its files under `NAME/`.
pub fn package_chart(dir: &Path, name: &str) -> Result<Vec<u8>, ArtifactError> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = gz;
    for (rel, path, exec) in files_of(dir)? {
        let bytes = std::fs::read(&path).map_err(io(format!("cannot read {}", path.display())))?;
        let full = format!("{name}/{rel}");
        tar.write_all(&header(&full, bytes.len() as u64, exec)?)
            .map_err(io("cannot write the chart archive"))?;
        tar.write_all(&bytes)
            .map_err(io("cannot write the chart archive"))?;
        let pad = (512 - bytes.len() % 512) % 512;
        tar.write_all(&vec![0u8; pad])
            .map_err(io("cannot write the chart archive"))?;
    }
    tar.write_all(&[0u8; 1024])
        .map_err(io("cannot write the chart archive"))?;
    tar.finish().map_err(io("cannot finish the chart archive"))
}

/// Packages the chart in `dir` and pushes it to `store`/`repo`, tagged with
/// the chart's version and `extra_tag`. Returns the manifest's digest and
/// the chart's metadata.
pub async fn push_chart(
    store: &dyn ArtifactStore,
    repo: &str,
    dir: &Path,
    extra_tag: Option<&str>,
) -> Result<(Digest, serde_json::Map<String, serde_json::Value>), ArtifactError> {
    let chart_yaml = std::fs::read_to_string(dir.join("Chart.yaml"))
        .map_err(io(format!("{} has no readable Chart.yaml", dir.display())))?;
    let name = chart_metadata(&chart_yaml)?["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let dir = dir.to_owned();
    let archive = tokio::task::spawn_blocking(move || package_chart(&dir, &name))
        .await
        .map_err(|e| ArtifactError::Invalid(format!("packaging failed: {e}")))??;
    push_chart_archive(store, repo, archive, extra_tag).await
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
/// (the archive as it is, as the layer) tagged with its version and
/// `extra_tag`; returns the manifest's digest and the chart's metadata.
pub async fn push_chart_archive(
    store: &dyn ArtifactStore,
    repo: &str,
    tgz: Vec<u8>,
    extra_tag: Option<&str>,
) -> Result<(Digest, serde_json::Map<String, serde_json::Value>), ArtifactError> {
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
    let raw = super::image_manifest(None, config, vec![layer])?;
    let version = meta["version"]
        .as_str()
        .unwrap_or_default()
        .replace('+', "_");
    store.put_manifest(repo, &raw, Some(&version)).await?;
    if let Some(t) = extra_tag {
        store.put_manifest(repo, &raw, Some(t)).await?;
    }
    Ok((raw.digest, meta))
}

/// Writes the chart archive of the chart `digest` of `store`/`repo` to
/// `dest` (checked against its digest as it is read).
pub async fn fetch_chart(
    store: &dyn ArtifactStore,
    repo: &str,
    digest: &Digest,
    dest: &Path,
) -> Result<(), ArtifactError> {
    let m = store
        .get_manifest(repo, digest.as_str())
        .await?
        .ok_or_else(|| ArtifactError::NotFound(format!("no chart {digest} in {repo}")))?;
    let parsed: ImageManifest = serde_json::from_slice(&m.bytes)
        .map_err(|e| ArtifactError::Invalid(format!("{digest} is not a chart manifest: {e}")))?;
    let layer = parsed
        .layers
        .iter()
        .find(|l| l.media_type == HELM_CHART_MEDIA_TYPE)
        .ok_or_else(|| ArtifactError::Invalid(format!("{digest} in {repo} is not a Helm chart")))?;
    let mut reader = store.open_blob(repo, layer).await?;
    let mut file = tokio::fs::File::create(dest)
        .await
        .map_err(io(format!("cannot create {}", dest.display())))?;
    tokio::io::copy(&mut reader, &mut file)
        .await
        .map_err(|e| ArtifactError::Corrupt(format!("chart {digest} in {repo}: {e}")))?;
    Ok(())
}
