//! Terraform modules as OpenTofu module packages: an OCI artifact of type
//! `application/vnd.opentofu.modulepkg` with an empty config and one
//! `archive/zip` layer holding the module directory.
//!
//! Packaging is reproducible: entries in path order, a fixed timestamp and
//! only two file modes (0644, or 0755 for executables), so the same source
//! gives the same digest. Unpacking checks the layer's digest while it
//! streams and refuses entries that would land outside the destination,
//! links, and archives that inflate past [`MAX_UNPACKED_BYTES`].

use std::collections::BTreeMap;
use std::io::{Read, Seek, Write};

use std::path::{Component, Path, PathBuf};

use nuon_core::artifact::{
    ArtifactError, ArtifactStore, Descriptor, Digest, EMPTY_MEDIA_TYPE, ImageManifest,
};

/// The artifact type of a module package.
pub const MODULE_ARTIFACT_TYPE: &str = "application/vnd.opentofu.modulepkg";
/// The media type of its one layer.
pub const ZIP_MEDIA_TYPE: &str = "archive/zip";
/// The most bytes a package may unpack to.
pub const MAX_UNPACKED_BYTES: u64 = 1 << 30;

/// Names never packaged: Terraform's working data and state, and VCS data.
fn skipped(name: &str) -> bool {
    matches!(name, ".terraform" | ".git") || name.starts_with("terraform.tfstate")
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ArtifactError {
    let what = what.into();
    move |source| ArtifactError::Io { what, source }
}

fn walk(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> Result<(), ArtifactError> {
    let dir = root.join(rel);
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .map_err(io(format!("cannot read {}", dir.display())))?
        .collect::<Result<_, _>>()
        .map_err(io(format!("cannot read {}", dir.display())))?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        let Some(name_str) = name.to_str() else {
            return Err(ArtifactError::Invalid(format!(
                "{}: file names must be UTF-8",
                e.path().display()
            )));
        };
        if skipped(name_str) {
            continue;
        }
        let kind = e
            .file_type()
            .map_err(io(format!("cannot stat {}", e.path().display())))?;
        let path = rel.join(&name);
        if kind.is_symlink() {
            return Err(ArtifactError::Invalid(format!(
                "{}: a module package holds no links; copy the file in instead",
                e.path().display()
            )));
        } else if kind.is_dir() {
            walk(root, &path, out)?;
        } else if kind.is_file() {
            out.push(path);
        }
    }
    Ok(())
}

/// Writes the zip of module directory `dir` to `out` (`module`: it must
/// hold a `.tf` file).
fn zip_module<W: Write + Seek>(dir: &Path, out: W, module: bool) -> Result<W, ArtifactError> {
    use std::os::unix::fs::PermissionsExt;
    let mut files = Vec::new();
    walk(dir, Path::new(""), &mut files)?;
    if module
        && !files
            .iter()
            .any(|f| f.extension().is_some_and(|e| e == "tf" || e == "json"))
    {
        return Err(ArtifactError::Invalid(format!(
            "{} has no .tf file: is it a Terraform module?",
            dir.display()
        )));
    }
    let mut zip = zip::ZipWriter::new(out);
    let zerr = |e: zip::result::ZipError| ArtifactError::Io {
        what: "cannot write the module package".into(),
        source: std::io::Error::other(e),
    };
    for rel in files {
        let full = dir.join(&rel);
        let meta =
            std::fs::metadata(&full).map_err(io(format!("cannot stat {}", full.display())))?;
        let mode = if meta.permissions().mode() & 0o111 != 0 {
            0o755
        } else {
            0o644
        };
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .last_modified_time(zip::DateTime::default())
            .unix_permissions(mode)
            .large_file(meta.len() >= u32::MAX as u64);
        let name = rel.to_string_lossy().replace('\\', "/");
        zip.start_file(name, options).map_err(zerr)?;
        let mut f =
            std::fs::File::open(&full).map_err(io(format!("cannot read {}", full.display())))?;
        std::io::copy(&mut f, &mut zip).map_err(io(format!("cannot pack {}", full.display())))?;
    }
    zip.finish().map_err(zerr)
}

/// Packages the module in `dir` and pushes it to `store`/`repo` (and
/// `tag`). Returns the manifest's digest.
pub async fn push_module(
    store: &dyn ArtifactStore,
    repo: &str,
    dir: &Path,
    tag: Option<&str>,
) -> Result<Digest, ArtifactError> {
    push_zip(store, repo, dir, tag, true).await
}

/// Packages any directory the way [`push_module`] packages a module (a
/// `kubernetes_manifest`'s source), unpacked by [`unpack_module`].
pub async fn push_directory(
    store: &dyn ArtifactStore,
    repo: &str,
    dir: &Path,
    tag: Option<&str>,
) -> Result<Digest, ArtifactError> {
    push_zip(store, repo, dir, tag, false).await
}

async fn push_zip(
    store: &dyn ArtifactStore,
    repo: &str,
    dir: &Path,
    tag: Option<&str>,
    module: bool,
) -> Result<Digest, ArtifactError> {
    let dir = dir.to_owned();
    let (file, layer) = tokio::task::spawn_blocking(move || -> Result<_, ArtifactError> {
        let tmp = tempfile::tempfile().map_err(io("cannot create a temporary file"))?;
        let mut file = zip_module(&dir, tmp, module)?;
        file.rewind()
            .map_err(io("cannot read the module package"))?;
        let (digest, size) = nuon_core::artifact::digest_of_reader(&mut file)
            .map_err(io("cannot hash the module package"))?;
        file.rewind()
            .map_err(io("cannot read the module package"))?;
        Ok((
            file,
            Descriptor {
                media_type: ZIP_MEDIA_TYPE.into(),
                digest,
                size,
                annotations: BTreeMap::new(),
            },
        ))
    })
    .await
    .map_err(|e| ArtifactError::Invalid(format!("packaging failed: {e}")))??;
    let config = Descriptor {
        media_type: EMPTY_MEDIA_TYPE.into(),
        digest: Digest::of(b"{}"),
        size: 2,
        annotations: BTreeMap::new(),
    };
    if !store.has_blob(repo, &config).await? {
        store.put_blob(repo, &config, Box::pin(&b"{}"[..])).await?;
    }
    if !store.has_blob(repo, &layer).await? {
        let file = tokio::fs::File::from_std(file);
        store.put_blob(repo, &layer, Box::pin(file)).await?;
    }
    let raw = super::image_manifest(Some(MODULE_ARTIFACT_TYPE), config, vec![layer])?;
    store.put_manifest(repo, &raw, tag).await?;
    Ok(raw.digest)
}

/// Unpacks the module package `digest` of `store`/`repo` into `dest`, which
/// must not exist yet or be empty.
pub async fn unpack_module(
    store: &dyn ArtifactStore,
    repo: &str,
    digest: &Digest,
    dest: &Path,
) -> Result<(), ArtifactError> {
    let m = store
        .get_manifest(repo, digest.as_str())
        .await?
        .ok_or_else(|| {
            ArtifactError::NotFound(format!("no artifact {digest} in {repo}: sync it first"))
        })?;
    let parsed: ImageManifest = serde_json::from_slice(&m.bytes).map_err(|e| {
        ArtifactError::Invalid(format!("manifest {digest} is not an OCI manifest: {e}"))
    })?;
    if parsed.artifact_type.as_deref() != Some(MODULE_ARTIFACT_TYPE) {
        return Err(ArtifactError::Invalid(format!(
            "{digest} is not a module package (artifact type {:?})",
            parsed.artifact_type
        )));
    }
    let [layer] = parsed.layers.as_slice() else {
        return Err(ArtifactError::Invalid(format!(
            "module package {digest} must have one layer, it has {}",
            parsed.layers.len()
        )));
    };
    if layer.media_type != ZIP_MEDIA_TYPE {
        return Err(ArtifactError::Invalid(format!(
            "module package {digest}: the layer is {}, not {ZIP_MEDIA_TYPE}",
            layer.media_type
        )));
    }
    // The whole layer, checked against its digest, before anything is unpacked.
    let tmp = tempfile::tempfile().map_err(io("cannot create a temporary file"))?;
    let mut file = tokio::fs::File::from_std(tmp);
    let mut reader = store.open_blob(repo, layer).await?;
    tokio::io::copy(&mut reader, &mut file).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidData {
            ArtifactError::Corrupt(format!(
                "module package {digest} in {repo}: {e}; it is not deployed (sync it again)"
            ))
        } else {
            io(format!("cannot read module package {digest}"))(e)
        }
    })?;
    let file = file.into_std().await;
    let dest = dest.to_owned();
    tokio::task::spawn_blocking(move || extract(file, &dest))
        .await
        .map_err(|e| ArtifactError::Invalid(format!("unpacking failed: {e}")))?
}

fn extract(mut file: std::fs::File, dest: &Path) -> Result<(), ArtifactError> {
    use std::os::unix::fs::PermissionsExt;
    file.rewind()
        .map_err(io("cannot read the module package"))?;
    let mut zip = zip::ZipArchive::new(file)
        .map_err(|e| ArtifactError::Corrupt(format!("the module package is not a zip: {e}")))?;
    std::fs::create_dir_all(dest).map_err(io(format!("cannot create {}", dest.display())))?;
    if std::fs::read_dir(dest)
        .map_err(io(format!("cannot read {}", dest.display())))?
        .next()
        .is_some()
    {
        return Err(ArtifactError::Invalid(format!(
            "{} is not empty",
            dest.display()
        )));
    }
    let mut total = 0u64;
    for i in 0..zip.len() {
        let mut entry = zip
            .by_index(i)
            .map_err(|e| ArtifactError::Corrupt(format!("module package entry {i}: {e}")))?;
        let name = entry.name().to_owned();
        let rel = entry
            .enclosed_name()
            .filter(|p| p.components().all(|c| matches!(c, Component::Normal(_))))
            .ok_or_else(|| {
                ArtifactError::Invalid(format!(
                    "module package entry {name:?} would land outside the module"
                ))
            })?;
        let mode = entry.unix_mode().unwrap_or(0o644);
        if mode & 0o170000 == 0o120000 {
            return Err(ArtifactError::Invalid(format!(
                "module package entry {name:?} is a link"
            )));
        }
        let path = dest.join(&rel);
        if entry.is_dir() {
            std::fs::create_dir_all(&path)
                .map_err(io(format!("cannot create {}", path.display())))?;
            continue;
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(io(format!("cannot create {}", parent.display())))?;
        }
        let mut out =
            std::fs::File::create(&path).map_err(io(format!("cannot write {}", path.display())))?;
        let limit = MAX_UNPACKED_BYTES - total;
        let n = std::io::copy(&mut (&mut entry).take(limit + 1), &mut out)
            .map_err(|e| ArtifactError::Corrupt(format!("module package entry {name:?}: {e}")))?;
        total += n;
        if total > MAX_UNPACKED_BYTES {
            return Err(ArtifactError::Invalid(format!(
                "the module package unpacks to more than {MAX_UNPACKED_BYTES} bytes"
            )));
        }
        let perm = if mode & 0o111 != 0 { 0o755 } else { 0o644 };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(perm))
            .map_err(io(format!("cannot set the mode of {}", path.display())))?;
    }
    Ok(())
}
