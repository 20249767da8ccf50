//! The copy engine: an artifact from one [`ArtifactStore`] to another,
//! every platform of an index, blobs the destination lacks uploaded a few
//! at a time (largest first), mounted when the destination holds them in
//! another repository, resumed after an interruption, retried
//! [`BLOB_ATTEMPTS`] times; then the manifests' exact bytes, children
//! before their index. What `sync` jobs, builds, release bundles and
//! `nuon releases` copy with.

use nuon_core::artifact::{
    ArtifactError, ArtifactStore, Descriptor, Digest, ImageIndex, ImageManifest, RawManifest,
    is_index,
};

/// Which repositories of a destination store hold which blobs, learned
/// while copying: a later copy into another repository of the same store
/// mounts those blobs instead of sending them. Share one across the
/// copies of a sync.
#[derive(Debug, Default)]
pub struct BlobLocations(std::sync::Mutex<std::collections::HashMap<Digest, String>>);

impl BlobLocations {
    fn get(&self, d: &Digest) -> Option<String> {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(d)
            .cloned()
    }

    fn note(&self, d: &Digest, repo: &str) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(d.clone(), repo.to_owned());
    }
}

/// How a copy runs.
#[derive(Debug, Clone)]
pub struct CopyOptions {
    /// Re-check (read and hash) blobs the destination already has.
    pub verify: bool,
    /// Blobs uploaded at once (largest first).
    pub concurrency: usize,
    /// Where the destination holds blobs already, for mounts.
    pub locations: Option<std::sync::Arc<BlobLocations>>,
}

impl Default for CopyOptions {
    fn default() -> Self {
        CopyOptions {
            verify: false,
            concurrency: 6,
            locations: None,
        }
    }
}

/// What a copy did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyReport {
    /// The digest of the manifest (or index) copied.
    pub digest: Digest,
    /// Blobs sent.
    pub blobs_copied: usize,
    /// Bytes of the blobs sent.
    pub bytes_copied: u64,
    /// Blobs mounted from another repository of the destination.
    pub blobs_mounted: usize,
    /// Blobs whose interrupted copy was resumed where it stopped.
    pub blobs_resumed: usize,
    /// Manifests written (an index and its children count one each).
    pub manifests_written: usize,
}

/// Copies the artifact `reference` (tag or digest) from `src`/`src_repo`
/// to `dst`/`dst_repo` (see [`copy`]); returns the manifest's digest
/// and how many blobs were sent.
pub async fn copy_artifact(
    src: &dyn ArtifactStore,
    src_repo: &str,
    reference: &str,
    dst: &dyn ArtifactStore,
    dst_repo: &str,
    tag: Option<&str>,
    verify: bool,
) -> Result<(Digest, usize), ArtifactError> {
    let opts = CopyOptions {
        verify,
        ..CopyOptions::default()
    };
    let r = copy(src, src_repo, reference, dst, dst_repo, tag, &opts).await?;
    Ok((r.digest, r.blobs_copied))
}

/// Copies an artifact: nothing when the destination has the manifest
/// already (unless `verify` asks to re-check its blobs); otherwise, for an
/// index every manifest it names (every platform), and for a manifest
/// every blob the destination lacks (or, with `verify`, has damaged),
/// uploaded `concurrency` at a time, largest first; then the manifests'
/// exact bytes, children before their index, then `tag`.
pub async fn copy(
    src: &dyn ArtifactStore,
    src_repo: &str,
    reference: &str,
    dst: &dyn ArtifactStore,
    dst_repo: &str,
    tag: Option<&str>,
    opts: &CopyOptions,
) -> Result<CopyReport, ArtifactError> {
    let manifest = src
        .get_manifest(src_repo, reference)
        .await?
        .ok_or_else(|| ArtifactError::NotFound(format!("no artifact {reference} in {src_repo}")))?;
    let mut report = CopyReport {
        digest: manifest.digest.clone(),
        blobs_copied: 0,
        bytes_copied: 0,
        blobs_mounted: 0,
        blobs_resumed: 0,
        manifests_written: 0,
    };
    let present = has_manifest(dst, dst_repo, &manifest.digest).await?;
    if !present || opts.verify {
        copy_tree(
            src,
            src_repo,
            &manifest,
            dst,
            dst_repo,
            tag,
            opts,
            &mut report,
        )
        .await?;
    } else {
        if let Some(t) = tag {
            dst.put_manifest(dst_repo, &manifest, Some(t)).await?;
        }
        // Nothing to send, but the blobs are known to be there now: later
        // copies into other repositories can mount them.
        if let Some(l) = &opts.locations {
            note_tree(src, src_repo, &manifest, dst_repo, l).await?;
        }
    }
    Ok(report)
}

/// Notes every blob `manifest` names (through its index) as held by
/// `dst_repo`.
async fn note_tree(
    src: &dyn ArtifactStore,
    src_repo: &str,
    manifest: &RawManifest,
    dst_repo: &str,
    locations: &BlobLocations,
) -> Result<(), ArtifactError> {
    if is_index(manifest) {
        let index: ImageIndex = serde_json::from_slice(&manifest.bytes).map_err(|e| {
            ArtifactError::Invalid(format!("index {} is not readable: {e}", manifest.digest))
        })?;
        for child in &index.manifests {
            if let Some(m) = src.get_manifest(src_repo, child.digest.as_str()).await? {
                Box::pin(note_tree(src, src_repo, &m, dst_repo, locations)).await?;
            }
        }
    } else if let Ok(m) = serde_json::from_slice::<ImageManifest>(&manifest.bytes) {
        for b in std::iter::once(&m.config).chain(&m.layers) {
            locations.note(&b.digest, dst_repo);
        }
    }
    Ok(())
}

/// Whether `dst` has the manifest (a damaged copy counts as none).
async fn has_manifest(
    dst: &dyn ArtifactStore,
    repo: &str,
    digest: &Digest,
) -> Result<bool, ArtifactError> {
    match dst.get_manifest(repo, digest.as_str()).await {
        Ok(m) => Ok(m.is_some()),
        Err(ArtifactError::Corrupt(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Copies what `manifest` names, then the manifest itself (under `tag`).
#[allow(clippy::too_many_arguments)]
async fn copy_tree(
    src: &dyn ArtifactStore,
    src_repo: &str,
    manifest: &RawManifest,
    dst: &dyn ArtifactStore,
    dst_repo: &str,
    tag: Option<&str>,
    opts: &CopyOptions,
    report: &mut CopyReport,
) -> Result<(), ArtifactError> {
    if is_index(manifest) {
        let index: ImageIndex = serde_json::from_slice(&manifest.bytes).map_err(|e| {
            ArtifactError::Invalid(format!("index {} is not readable: {e}", manifest.digest))
        })?;
        for child in &index.manifests {
            if !opts.verify && has_manifest(dst, dst_repo, &child.digest).await? {
                continue;
            }
            let m = src
                .get_manifest(src_repo, child.digest.as_str())
                .await?
                .ok_or_else(|| {
                    ArtifactError::NotFound(format!(
                        "index {} names manifest {} that {src_repo} does not have",
                        manifest.digest, child.digest
                    ))
                })?;
            Box::pin(copy_tree(
                src, src_repo, &m, dst, dst_repo, None, opts, report,
            ))
            .await?;
        }
    } else {
        let parsed: ImageManifest = serde_json::from_slice(&manifest.bytes).map_err(|e| {
            ArtifactError::Invalid(format!(
                "manifest {} is not an OCI image manifest: {e}",
                manifest.digest
            ))
        })?;
        copy_blobs(
            src,
            src_repo,
            std::iter::once(&parsed.config).chain(&parsed.layers),
            dst,
            dst_repo,
            opts,
            report,
        )
        .await?;
    }
    dst.put_manifest(dst_repo, manifest, tag).await?;
    report.manifests_written += 1;
    Ok(())
}

/// Whether `dst` has `b` whole (and, with `verify`, with the right bytes).
async fn check_blob<'a>(
    dst: &'a dyn ArtifactStore,
    repo: &'a str,
    b: &'a Descriptor,
    verify: bool,
) -> Result<(&'a Descriptor, bool), ArtifactError> {
    let good = dst.has_blob(repo, b).await? && (!verify || dst.verify_blob(repo, b).await.is_ok());
    Ok((b, good))
}

/// How many times one blob is tried when the transfer fails on I/O.
pub const BLOB_ATTEMPTS: u32 = 3;

/// How a blob reached the destination.
enum Sent {
    Uploaded { bytes: u64, resumed: bool },
    Mounted,
}

/// Mounts one blob from another repository of `dst` that has it, or
/// streams it from `src`.
async fn send_blob(
    src: &dyn ArtifactStore,
    src_repo: &str,
    dst: &dyn ArtifactStore,
    dst_repo: &str,
    b: &Descriptor,
    locations: Option<&BlobLocations>,
) -> Result<Sent, ArtifactError> {
    // A mount that fails (a registry without them, a token that cannot
    // read the other repository) costs nothing: the blob is uploaded.
    if let Some(from) = locations.and_then(|l| l.get(&b.digest))
        && from != dst_repo
        && dst.mount_blob(dst_repo, &from, b).await.unwrap_or(false)
    {
        return Ok(Sent::Mounted);
    }
    // Each blob is retried on its own: a dropped connection costs that
    // blob, not the copy. Bad bytes, a missing blob or a refusal are not
    // retried.
    // What an interrupted copy left in `dst` is kept: only the rest is
    // read from `src` (a ranged read), and the whole is checked.
    let mut attempt = 0;
    let mut resumed_from = 0;
    loop {
        attempt += 1;
        let sent = async {
            let have = dst.partial_len(dst_repo, b).await.unwrap_or(0);
            let reader = if have > 0 {
                src.open_blob_from(src_repo, b, have).await?
            } else {
                src.open_blob(src_repo, b).await?
            };
            resumed_from = have;
            dst.put_blob_from(dst_repo, b, have, reader).await
        }
        .await;
        match sent {
            Ok(()) => break,
            Err(ArtifactError::Io { .. }) if attempt < BLOB_ATTEMPTS => {
                tokio::time::sleep(std::time::Duration::from_millis(100 << attempt)).await;
            }
            // What an earlier copy left did not make the blob (the store
            // dropped it): once more, from the start.
            Err(ArtifactError::Corrupt(_)) if resumed_from > 0 && attempt < BLOB_ATTEMPTS => {}
            Err(e) => return Err(e),
        }
    }
    if let Some(l) = locations {
        l.note(&b.digest, dst_repo);
    }
    Ok(Sent::Uploaded {
        bytes: b.size - resumed_from.min(b.size),
        resumed: resumed_from > 0,
    })
}

/// Sends the blobs `dst` lacks, largest first, `opts.concurrency` at a time.
async fn copy_blobs<'a>(
    src: &dyn ArtifactStore,
    src_repo: &str,
    blobs: impl Iterator<Item = &'a Descriptor>,
    dst: &dyn ArtifactStore,
    dst_repo: &str,
    opts: &CopyOptions,
    report: &mut CopyReport,
) -> Result<(), ArtifactError> {
    use futures_util::StreamExt as _;
    let mut unique: Vec<&Descriptor> = Vec::new();
    for b in blobs {
        if !unique.iter().any(|u| u.digest == b.digest) {
            unique.push(b);
        }
    }
    let checks: Vec<_> = unique
        .into_iter()
        .map(|b| check_blob(dst, dst_repo, b, opts.verify))
        .collect();
    let checks = futures_util::stream::iter(checks)
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    let mut missing = Vec::new();
    for c in checks {
        let (b, good) = c?;
        if good {
            if let Some(l) = &opts.locations {
                l.note(&b.digest, dst_repo);
            }
        } else {
            missing.push(b);
        }
    }
    missing.sort_by_key(|b| std::cmp::Reverse(b.size));
    let sends: Vec<_> = missing
        .into_iter()
        .map(|b| send_blob(src, src_repo, dst, dst_repo, b, opts.locations.as_deref()))
        .collect();
    let sent = futures_util::stream::iter(sends)
        .buffer_unordered(opts.concurrency.max(1))
        .collect::<Vec<_>>()
        .await;
    for r in sent {
        match r? {
            Sent::Uploaded { bytes, resumed } => {
                report.bytes_copied += bytes;
                report.blobs_copied += 1;
                report.blobs_resumed += usize::from(resumed);
            }
            Sent::Mounted => report.blobs_mounted += 1,
        }
    }
    Ok(())
}
