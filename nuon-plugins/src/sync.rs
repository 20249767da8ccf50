//! The `sync` job kind: an artifact copied by digest from the vendor's
//! store into the install's store, so that deploys read only the install's
//! own store.
//!
//! What the install's store holds already is checked byte for byte first:
//! an artifact whose blobs all match their digests is used as it is (so a
//! redeploy does not need the vendor's store), and a corrupted blob is
//! copied again from the vendor's store, never deployed.

use std::sync::Arc;

use async_trait::async_trait;
use nuon_core::artifact::{ArtifactError, ArtifactStore, ImageManifest};

use crate::oci::{CopyOptions, copy};
use nuon_core::{Job, JobHost, JobResult, JobSpec, Outcome, Plugin, PluginError, SyncJob};
use serde_json::json;

/// Runs `sync` jobs from `vendor` into `install`.
pub struct SyncPlugin {
    vendor: Option<Arc<dyn ArtifactStore>>,
    install: Arc<dyn ArtifactStore>,
}

impl SyncPlugin {
    /// Copies from `vendor` (`None` when this runner has no route to the
    /// vendor's store: only artifacts already in `install` are usable).
    pub fn new(vendor: Option<Arc<dyn ArtifactStore>>, install: Arc<dyn ArtifactStore>) -> Self {
        SyncPlugin { vendor, install }
    }
}

fn decode(spec: &JobSpec) -> Result<SyncJob, PluginError> {
    spec.payload_as()
        .map_err(|e| PluginError::Invalid(format!("sync: {e}")))
}

/// The blobs of the artifact that are missing or do not match their digest
/// in `store`; `None` when the manifest itself is not there.
async fn damaged_blobs(
    store: &dyn ArtifactStore,
    repo: &str,
    digest: &str,
) -> Result<Option<Vec<String>>, ArtifactError> {
    let Some(manifest) = store.get_manifest(repo, digest).await? else {
        return Ok(None);
    };
    let parsed: ImageManifest = serde_json::from_slice(&manifest.bytes).map_err(|e| {
        ArtifactError::Corrupt(format!("manifest {digest} in {repo} is not readable: {e}"))
    })?;
    let mut bad = Vec::new();
    for blob in std::iter::once(&parsed.config).chain(&parsed.layers) {
        let whole = store.has_blob(repo, blob).await?;
        if !whole || store.verify_blob(repo, blob).await.is_err() {
            bad.push(blob.digest.to_string());
        }
    }
    Ok(Some(bad))
}

#[async_trait]
impl Plugin for SyncPlugin {
    fn kind(&self) -> &'static str {
        SyncJob::KIND
    }

    fn in_process(&self) -> bool {
        true
    }

    fn validate(&self, spec: &JobSpec) -> Result<(), PluginError> {
        decode(spec).map(|_| ())
    }

    async fn run(&self, spec: &JobSpec, host: &mut dyn JobHost) -> Result<JobResult, PluginError> {
        let job = decode(spec)?;
        let a = &job.artifact;
        let digest = a.digest.as_str();
        let failed = |e: ArtifactError| PluginError::Missing(format!("sync: {e}"));
        let found = match damaged_blobs(&*self.install, &a.repo, digest).await {
            Err(ArtifactError::Corrupt(e)) => {
                host.log(&format!("{e}: copying it again"));
                Some(vec![digest.to_owned()])
            }
            other => other.map_err(failed)?,
        };
        match found {
            Some(bad) if bad.is_empty() => {
                host.log(&format!(
                    "{}@{digest} is in the install's store and every blob matches its digest",
                    a.repo
                ));
                if let Some(tag) = &job.tag {
                    let manifest = self.install.get_manifest(&a.repo, digest).await;
                    if let Some(m) = manifest.map_err(failed)? {
                        self.install
                            .put_manifest(&a.repo, &m, Some(tag))
                            .await
                            .map_err(failed)?;
                        host.log(&format!("tagged it {}:{tag}", a.repo));
                    }
                }
                return Ok(JobResult {
                    outcome: Outcome::Succeeded,
                    exit_code: None,
                    reason: None,
                    outputs: json!({"digest": digest, "artifact": a, "copied": 0, "tag": job.tag}),
                });
            }
            Some(bad) => {
                for d in &bad {
                    host.log(&format!(
                        "blob {d} of {}@{digest} in the install's store is missing or does not match its digest: copying it again",
                        a.repo
                    ));
                }
            }
            None => host.log(&format!(
                "copying {}@{digest} into the install's store",
                a.repo
            )),
        }
        let Some(vendor) = &self.vendor else {
            return Ok(JobResult::failed(format!(
                "sync: {}@{digest} is not whole in the install's store and this runner has no vendor store to copy it from (--vendor-store)",
                a.repo
            )));
        };
        let opts = CopyOptions {
            verify: true,
            ..CopyOptions::default()
        };
        let r = copy(
            &**vendor,
            &a.repo,
            digest,
            &*self.install,
            &a.repo,
            job.tag.as_deref(),
            &opts,
        )
        .await
        .map_err(failed)?;
        let (got, copied) = (r.digest, r.blobs_copied);
        host.log(&format!(
            "copied {copied} blob(s) ({} bytes) of {}@{got}{}",
            r.bytes_copied,
            a.repo,
            if r.blobs_resumed > 0 {
                format!(
                    "; {} resumed where an earlier copy stopped",
                    r.blobs_resumed
                )
            } else {
                String::new()
            }
        ));
        Ok(JobResult {
            outcome: Outcome::Succeeded,
            exit_code: None,
            reason: None,
            outputs: json!({
                "digest": got,
                "artifact": a,
                "copied": copied,
                "bytes": r.bytes_copied,
                "resumed": r.blobs_resumed,
                "tag": job.tag,
            }),
        })
    }
}
