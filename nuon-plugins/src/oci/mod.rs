//! OCI artifacts on the runner side: the OCI image layout store (the
//! embedded default for the vendor's and each install's store) and
//! Terraform modules packaged as OpenTofu module packages.

mod build;
mod copy;
pub mod helmpkg;
#[cfg(feature = "registry")]
pub mod helmrepo;
pub mod image;
pub mod layout;
pub mod modulepkg;
pub mod platform;
pub mod pluginpkg;
#[cfg(feature = "registry")]
pub mod registry;

pub use copy::{BLOB_ATTEMPTS, BlobLocations, CopyOptions, CopyReport, copy, copy_artifact};
pub use layout::LayoutStore;

use nuon_core::artifact::{
    ArtifactError, Descriptor, Digest, ImageManifest, MANIFEST_MEDIA_TYPE, RawManifest,
};

/// The OCI image manifest of an artifact of `artifact_type` with `config`
/// and `layers`, as the bytes to store.
pub(crate) fn image_manifest(
    artifact_type: Option<&str>,
    config: Descriptor,
    layers: Vec<Descriptor>,
) -> Result<RawManifest, ArtifactError> {
    let bytes = serde_json::to_vec(&ImageManifest {
        schema_version: 2,
        media_type: Some(MANIFEST_MEDIA_TYPE.into()),
        artifact_type: artifact_type.map(Into::into),
        config,
        layers,
    })
    .map_err(|e| ArtifactError::Invalid(format!("cannot encode the manifest: {e}")))?;
    Ok(RawManifest {
        digest: Digest::of(&bytes),
        bytes,
        media_type: MANIFEST_MEDIA_TYPE.into(),
    })
}

/// The artifact store `spec` names: an OCI registry (`https://HOST`, or
/// `http://127.0.0.1:PORT` on loopback; credentials from the docker
/// `config.json` in `$DOCKER_CONFIG` or `~/.docker`), or else an OCI image
/// layout directory (created when missing).
#[cfg(feature = "registry")]
pub fn open_store(
    spec: &str,
) -> Result<
    std::sync::Arc<dyn nuon_core::artifact::ArtifactStore>,
    nuon_core::artifact::ArtifactError,
> {
    use registry::{RegistryConfig, RegistryStore};
    if spec.starts_with("http://") || spec.starts_with("https://") {
        let config = RegistryConfig::new(spec).with_default_docker_config()?;
        return Ok(std::sync::Arc::new(RegistryStore::new(&config)?));
    }
    Ok(std::sync::Arc::new(LayoutStore::open(spec)?))
}

#[cfg(test)]
mod tests;
