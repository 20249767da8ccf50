//! WASM plugins as OCI artifacts of their own type
//! ([`PLUGIN_ARTIFACT_TYPE`]): the manifest (`plugin.toml`, as JSON) is the
//! config blob, the component the one layer.

use std::collections::BTreeMap;
use std::path::Path;

use nuon_core::artifact::{ArtifactError, ArtifactStore, Descriptor, Digest, ImageManifest};
use nuon_core::wasm::{
    PLUGIN_ARTIFACT_TYPE, PLUGIN_COMPONENT_MEDIA_TYPE, PLUGIN_MANIFEST_MEDIA_TYPE, PluginManifest,
};
use tokio::io::AsyncReadExt;

/// The largest component a plugin may be.
pub const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// The manifest's file name in a plugin's directory.
pub const MANIFEST_FILE: &str = "plugin.toml";

/// Reads `dir/plugin.toml` and the component it names (which must stay
/// inside `dir` and be a WebAssembly component).
pub fn read_plugin_dir(dir: &Path) -> Result<(PluginManifest, Vec<u8>), ArtifactError> {
    let path = dir.join(MANIFEST_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        ArtifactError::Invalid(format!(
            "{}: {e}; a wasm component's source holds a {MANIFEST_FILE} naming its .wasm",
            path.display()
        ))
    })?;
    let manifest = PluginManifest::from_toml(&text, &path.display().to_string())
        .map_err(ArtifactError::Invalid)?;
    let wasm = dir.join(&manifest.wasm);
    let real = wasm.canonicalize().map_err(|e| {
        ArtifactError::Invalid(format!(
            "{}: the component {} named by {MANIFEST_FILE}: {e} (build it first: cargo build --release --target wasm32-wasip2)",
            dir.display(),
            wasm.display()
        ))
    })?;
    let root = dir
        .canonicalize()
        .map_err(|e| ArtifactError::Invalid(format!("{}: {e}", dir.display())))?;
    if !real.starts_with(&root) {
        return Err(ArtifactError::Invalid(format!(
            "{}: {} leaves the plugin's directory",
            path.display(),
            manifest.wasm
        )));
    }
    let len = std::fs::metadata(&real).map(|m| m.len()).unwrap_or(0);
    if len > MAX_COMPONENT_BYTES {
        return Err(ArtifactError::Invalid(format!(
            "{}: {} MiB is more than a plugin may be ({} MiB)",
            real.display(),
            len >> 20,
            MAX_COMPONENT_BYTES >> 20
        )));
    }
    let bytes = std::fs::read(&real).map_err(|e| ArtifactError::Io {
        what: format!("cannot read {}", real.display()),
        source: e,
    })?;
    if !is_component(&bytes) {
        return Err(ArtifactError::Invalid(format!(
            "{} is not a WebAssembly component (a plugin is what `cargo build --target wasm32-wasip2` or componentize-py makes)",
            real.display()
        )));
    }
    Ok((manifest, bytes))
}

/// Whether `bytes` start like a WebAssembly component.
pub fn is_component(bytes: &[u8]) -> bool {
    matches!(bytes.get(..8), Some([0, b'a', b's', b'm', _, _, 1, 0]))
}

/// Packages the plugin in `dir` and pushes it to `store`/`repo` (and
/// `tag`). Returns the manifest's digest.
pub async fn push_plugin(
    store: &dyn ArtifactStore,
    repo: &str,
    dir: &Path,
    tag: Option<&str>,
) -> Result<Digest, ArtifactError> {
    let dir = dir.to_owned();
    let (manifest, wasm) = tokio::task::spawn_blocking(move || read_plugin_dir(&dir))
        .await
        .map_err(|e| ArtifactError::Invalid(format!("packaging failed: {e}")))??;
    push_parts(store, repo, &manifest, wasm, tag).await
}

/// Pushes a plugin given as its manifest and component bytes.
pub async fn push_parts(
    store: &dyn ArtifactStore,
    repo: &str,
    manifest: &PluginManifest,
    wasm: Vec<u8>,
    tag: Option<&str>,
) -> Result<Digest, ArtifactError> {
    let config_bytes = serde_json::to_vec(manifest)
        .map_err(|e| ArtifactError::Invalid(format!("cannot encode the manifest: {e}")))?;
    let blob = |media: &str, bytes: &[u8]| Descriptor {
        media_type: media.into(),
        digest: Digest::of(bytes),
        size: bytes.len() as u64,
        annotations: BTreeMap::new(),
    };
    let config = blob(PLUGIN_MANIFEST_MEDIA_TYPE, &config_bytes);
    let mut layer = blob(PLUGIN_COMPONENT_MEDIA_TYPE, &wasm);
    layer.annotations.insert(
        "org.opencontainers.image.title".into(),
        manifest
            .wasm
            .rsplit('/')
            .next()
            .unwrap_or("plugin.wasm")
            .into(),
    );
    for (d, bytes) in [(&config, config_bytes), (&layer, wasm)] {
        if !store.has_blob(repo, d).await? {
            store
                .put_blob(repo, d, Box::pin(std::io::Cursor::new(bytes)))
                .await?;
        }
    }
    let raw = super::image_manifest(Some(PLUGIN_ARTIFACT_TYPE), config, vec![layer])?;
    store.put_manifest(repo, &raw, tag).await?;
    Ok(raw.digest)
}

async fn read_blob(
    store: &dyn ArtifactStore,
    repo: &str,
    d: &Descriptor,
    what: &str,
) -> Result<Vec<u8>, ArtifactError> {
    let mut out = Vec::with_capacity(d.size.min(MAX_COMPONENT_BYTES) as usize);
    let mut r = store.open_blob(repo, d).await?;
    r.read_to_end(&mut out).await.map_err(|e| {
        if e.kind() == std::io::ErrorKind::InvalidData {
            ArtifactError::Corrupt(format!(
                "the {what} of the plugin in {repo} does not match its digest {}: {e}; nothing was run (sync it again)",
                d.digest
            ))
        } else {
            ArtifactError::Io {
                what: format!("cannot read the plugin's {what}"),
                source: e,
            }
        }
    })?;
    if Digest::of(&out) != d.digest {
        return Err(ArtifactError::Corrupt(format!(
            "the {what} of the plugin in {repo} does not match its digest {}; nothing was run (sync it again)",
            d.digest
        )));
    }
    Ok(out)
}

/// Reads plugin `digest` of `store`/`repo`: its manifest and component,
/// every byte checked against its digest.
pub async fn fetch_plugin(
    store: &dyn ArtifactStore,
    repo: &str,
    digest: &Digest,
) -> Result<(PluginManifest, Vec<u8>), ArtifactError> {
    let m = store
        .get_manifest(repo, digest.as_str())
        .await?
        .ok_or_else(|| {
            ArtifactError::NotFound(format!("no plugin {digest} in {repo}: sync it first"))
        })?;
    if &Digest::of(&m.bytes) != digest {
        return Err(ArtifactError::Corrupt(format!(
            "the manifest stored as {digest} in {repo} does not match that digest; nothing was run (sync it again)"
        )));
    }
    let parsed: ImageManifest = serde_json::from_slice(&m.bytes).map_err(|e| {
        ArtifactError::Invalid(format!("manifest {digest} is not an OCI manifest: {e}"))
    })?;
    if parsed.artifact_type.as_deref() != Some(PLUGIN_ARTIFACT_TYPE)
        || parsed.config.media_type != PLUGIN_MANIFEST_MEDIA_TYPE
    {
        return Err(ArtifactError::Invalid(format!(
            "{digest} is not a nuon plugin (artifact type {:?}); a wasm component deploys an artifact its build made",
            parsed.artifact_type
        )));
    }
    let [layer] = parsed.layers.as_slice() else {
        return Err(ArtifactError::Invalid(format!(
            "plugin {digest} must have one layer, it has {}",
            parsed.layers.len()
        )));
    };
    if layer.media_type != PLUGIN_COMPONENT_MEDIA_TYPE || layer.size > MAX_COMPONENT_BYTES {
        return Err(ArtifactError::Invalid(format!(
            "plugin {digest}: its layer must be one {PLUGIN_COMPONENT_MEDIA_TYPE} of at most {} MiB",
            MAX_COMPONENT_BYTES >> 20
        )));
    }
    let config = read_blob(store, repo, &parsed.config, "manifest").await?;
    let manifest: PluginManifest = serde_json::from_slice(&config).map_err(|e| {
        ArtifactError::Invalid(format!("plugin {digest}: its manifest does not parse: {e}"))
    })?;
    manifest
        .check(&format!("plugin {digest}"))
        .map_err(ArtifactError::Invalid)?;
    let wasm = read_blob(store, repo, layer, "component").await?;
    Ok((manifest, wasm))
}
