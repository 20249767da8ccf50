//! Release bundles for installs with no route to the vendor's store: an
//! OCI image layout directory holding every artifact of an app's release
//! by digest, and `release.json` naming them. Export copies the artifacts
//! out of the vendor's store; import copies them, checked blob by blob,
//! into an install's store, where `sync` jobs then find them whole.

use std::path::Path;

use nuon_core::artifact::{ArtifactError, ArtifactStore, Digest};

use crate::oci::{CopyOptions, copy};
use serde::{Deserialize, Serialize};

use crate::oci::LayoutStore;

/// The name of the bundle's index of artifacts.
pub const RELEASE_FILE: &str = "release.json";

/// One artifact of a release.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseArtifact {
    /// The component, or `sandbox`.
    pub component: String,
    /// Its repository (the same in every store).
    pub repo: String,
    /// Its digest.
    pub digest: Digest,
}

/// What a bundle holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Release {
    /// The app's id.
    pub app: String,
    /// The config version the builds are of.
    pub config_version: u32,
    /// The artifacts.
    pub artifacts: Vec<ReleaseArtifact>,
}

/// Writes `release.json` into the bundle directory `dir`.
pub fn write_release(dir: &Path, release: &Release) -> Result<(), ArtifactError> {
    let text = serde_json::to_vec_pretty(release)
        .map_err(|e| ArtifactError::Invalid(format!("cannot encode the release: {e}")))?;
    std::fs::write(dir.join(RELEASE_FILE), text).map_err(|source| ArtifactError::Io {
        what: format!("cannot write {}", dir.join(RELEASE_FILE).display()),
        source,
    })
}

/// Reads the bundle in `dir`.
pub fn read_release(dir: &Path) -> Result<Release, ArtifactError> {
    let path = dir.join(RELEASE_FILE);
    let text = std::fs::read(&path).map_err(|source| ArtifactError::Io {
        what: format!(
            "{} is not a release bundle (no readable {RELEASE_FILE})",
            dir.display()
        ),
        source,
    })?;
    serde_json::from_slice(&text)
        .map_err(|e| ArtifactError::Invalid(format!("{}: {e}", path.display())))
}

/// Copies every artifact of the bundle in `dir` into `store`, checking
/// every blob's bytes. Returns the release.
pub async fn import_release(
    dir: &Path,
    store: &dyn ArtifactStore,
) -> Result<Release, ArtifactError> {
    let release = read_release(dir)?;
    let bundle = LayoutStore::open(dir)?;
    let opts = CopyOptions {
        verify: true,
        ..CopyOptions::default()
    };
    for a in &release.artifacts {
        // Read back from the bundle, checked: a damaged bundle is refused.
        let r = copy(
            &bundle,
            &a.repo,
            a.digest.as_str(),
            store,
            &a.repo,
            None,
            &opts,
        )
        .await?;
        if r.digest != a.digest {
            return Err(ArtifactError::Corrupt(format!(
                "the bundle's {} is {} where release.json says {}",
                a.repo, r.digest, a.digest
            )));
        }
    }
    Ok(release)
}
