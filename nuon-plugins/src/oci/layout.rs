//! An [`ArtifactStore`] in OCI image layout directories, one per
//! repository (`ROOT/REPO/{oci-layout,index.json,blobs/sha256/…}`): the
//! embedded default for the vendor's store and each install's store, and
//! readable by any OCI tool (`skopeo copy oci:ROOT/REPO:TAG …`).
//!
//! Blobs are written to a temporary file while their digest is checked,
//! then renamed into place, so a blob file is always whole and right
//! when it is written (a later corruption on disk is caught on read).
//! `index.json` is replaced atomically under a lock.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use nuon_core::artifact::{
    ArtifactError, ArtifactStore, BlobReader, Descriptor, Digest, INDEX_MEDIA_TYPE, ImageManifest,
    RawManifest, VerifyingReader,
};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;
use tokio::sync::Mutex;

/// The annotation that names a tag in `index.json`.
const REF_NAME: &str = "org.opencontainers.image.ref.name";

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ArtifactError {
    let what = what.into();
    move |source| ArtifactError::Io { what, source }
}

/// Checks a repository name: lowercase path components of letters, digits
/// and single separators (`.`, `_`, `-`), as OCI distribution allows.
pub fn check_repo(repo: &str) -> Result<(), ArtifactError> {
    let part_ok = |p: &str| {
        !p.is_empty()
            && p.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'.' | b'_' | b'-')
            })
            && p.as_bytes()[0].is_ascii_alphanumeric()
            && p.as_bytes()[p.len() - 1].is_ascii_alphanumeric()
    };
    if !repo.is_empty() && repo.len() <= 255 && repo.split('/').all(part_ok) {
        Ok(())
    } else {
        Err(ArtifactError::Invalid(format!(
            "invalid repository name {:?}: use lowercase letters, digits, '.', '_', '-' and '/'",
            repo.chars().take(80).collect::<String>()
        )))
    }
}

/// A tag: what OCI distribution allows.
fn check_tag(tag: &str) -> Result<(), ArtifactError> {
    let ok = !tag.is_empty()
        && tag.len() <= 128
        && tag.as_bytes()[0] != b'.'
        && tag.as_bytes()[0] != b'-'
        && tag
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(ArtifactError::Invalid(format!("invalid tag {tag:?}")))
    }
}

#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Index {
    schema_version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    media_type: Option<String>,
    #[serde(default)]
    manifests: Vec<Descriptor>,
}

/// OCI image layout directories under one root.
#[derive(Debug)]
pub struct LayoutStore {
    root: PathBuf,
    index_lock: Mutex<()>,
}

impl LayoutStore {
    /// A store under `root` (created when missing).
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, ArtifactError> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(io(format!("cannot create {}", root.display())))?;
        Ok(LayoutStore {
            root,
            index_lock: Mutex::new(()),
        })
    }

    /// The layout directory of a repository.
    pub fn repo_dir(&self, repo: &str) -> Result<PathBuf, ArtifactError> {
        check_repo(repo)?;
        Ok(self.root.join(repo))
    }

    /// The lock on `digest`'s partial file, when no other writer holds it.
    fn partial_lock(
        &self,
        repo: &str,
        digest: &Digest,
    ) -> Result<Option<std::fs::File>, ArtifactError> {
        // Lock files stay (removing one races with its next opener), in a
        // directory of their own, out of the blobs'.
        let locks = self.repo_dir(repo)?.join(".locks");
        std::fs::create_dir_all(&locks)
            .map_err(io(format!("cannot create {}", locks.display())))?;
        let path = locks.join(format!("{}.lock", digest.hex()));
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(io(format!("cannot open {}", path.display())))?;
        match file.try_lock() {
            Ok(()) => Ok(Some(file)),
            Err(std::fs::TryLockError::WouldBlock) => Ok(None),
            Err(std::fs::TryLockError::Error(e)) => {
                Err(io(format!("cannot lock {}", path.display()))(e))
            }
        }
    }

    /// Where an upload of `digest` collects its bytes until they check out.
    pub(crate) fn partial_path(
        &self,
        repo: &str,
        digest: &Digest,
    ) -> Result<PathBuf, ArtifactError> {
        Ok(self
            .repo_dir(repo)?
            .join("blobs/sha256")
            .join(format!(".partial-{}", digest.hex())))
    }

    /// Where a blob of a repository lives.
    pub fn blob_path(&self, repo: &str, digest: &Digest) -> Result<PathBuf, ArtifactError> {
        Ok(self.repo_dir(repo)?.join("blobs/sha256").join(digest.hex()))
    }

    pub(crate) async fn ensure(&self, dir: &Path) -> Result<(), ArtifactError> {
        let blobs = dir.join("blobs/sha256");
        tokio::fs::create_dir_all(&blobs)
            .await
            .map_err(io(format!("cannot create {}", blobs.display())))?;
        let marker = dir.join("oci-layout");
        if tokio::fs::metadata(&marker).await.is_err() {
            write_atomic(&marker, br#"{"imageLayoutVersion":"1.0.0"}"#).await?;
        }
        Ok(())
    }

    async fn read_index(&self, dir: &Path) -> Result<Index, ArtifactError> {
        match tokio::fs::read(dir.join("index.json")).await {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| {
                ArtifactError::Corrupt(format!(
                    "{}/index.json is not an OCI index: {e}",
                    dir.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Index {
                schema_version: 2,
                media_type: Some(INDEX_MEDIA_TYPE.into()),
                manifests: Vec::new(),
            }),
            Err(e) => Err(io(format!("cannot read {}/index.json", dir.display()))(e)),
        }
    }
}

async fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), ArtifactError> {
    // Unique per call: parallel uploads into a new repository all write
    // its marker file.
    let mut rand = [0u8; 8];
    nuon_core::random_bytes(&mut rand);
    let tmp = path.with_extension(format!("tmp-{}", hex_of(&rand)));
    let mut f = tokio::fs::File::create(&tmp)
        .await
        .map_err(io(format!("cannot write {}", tmp.display())))?;
    f.write_all(bytes)
        .await
        .map_err(io(format!("cannot write {}", tmp.display())))?;
    f.sync_all()
        .await
        .map_err(io(format!("cannot sync {}", tmp.display())))?;
    tokio::fs::rename(&tmp, path)
        .await
        .map_err(io(format!("cannot rename into {}", path.display())))
}

#[async_trait]
impl ArtifactStore for LayoutStore {
    async fn has_blob(&self, repo: &str, blob: &Descriptor) -> Result<bool, ArtifactError> {
        let path = self.blob_path(repo, &blob.digest)?;
        Ok(tokio::fs::metadata(&path)
            .await
            .is_ok_and(|m| m.is_file() && m.len() == blob.size))
    }

    async fn open_blob(&self, repo: &str, blob: &Descriptor) -> Result<BlobReader, ArtifactError> {
        let path = self.blob_path(repo, &blob.digest)?;
        let file = tokio::fs::File::open(&path).await.map_err(|e| {
            if e.kind() == std::io::ErrorKind::NotFound {
                ArtifactError::NotFound(format!("no blob {} in {repo}", blob.digest))
            } else {
                io(format!("cannot open {}", path.display()))(e)
            }
        })?;
        Ok(Box::pin(VerifyingReader::new(file, blob.clone())))
    }

    async fn put_blob(
        &self,
        repo: &str,
        blob: &Descriptor,
        reader: BlobReader,
    ) -> Result<(), ArtifactError> {
        self.put_blob_from(repo, blob, 0, reader).await
    }

    async fn partial_len(&self, repo: &str, blob: &Descriptor) -> Result<u64, ArtifactError> {
        let path = self.partial_path(repo, &blob.digest)?;
        // While another copy writes it, it is not ours to resume.
        let Some(_lock) = self.partial_lock(repo, &blob.digest)? else {
            return Ok(0);
        };
        Ok(match tokio::fs::metadata(&path).await {
            Ok(m) if m.len() < blob.size => m.len(),
            Ok(_) => {
                // Longer than the blob: not a prefix of it.
                let _ = tokio::fs::remove_file(&path).await;
                0
            }
            Err(_) => 0,
        })
    }

    /// Writes into `.partial-HEX` next to the blobs, so that a copy cut
    /// off (the runner killed) leaves what it had for the next one to
    /// resume; the file becomes the blob only once its bytes match. One
    /// writer at a time holds `.partial-HEX.lock` (an advisory lock the
    /// system drops when its process dies); a second writer of the same
    /// blob writes a file of its own and does not resume.
    async fn put_blob_from(
        &self,
        repo: &str,
        blob: &Descriptor,
        offset: u64,
        reader: BlobReader,
    ) -> Result<(), ArtifactError> {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let dir = self.repo_dir(repo)?;
        self.ensure(&dir).await?;
        let path = self.blob_path(repo, &blob.digest)?;
        let lock = self.partial_lock(repo, &blob.digest)?;
        let partial = match &lock {
            Some(_) => self.partial_path(repo, &blob.digest)?,
            None if offset > 0 => {
                return Err(ArtifactError::Io {
                    what: format!("resuming {} in {repo}", blob.digest),
                    source: std::io::Error::new(
                        std::io::ErrorKind::WouldBlock,
                        "another copy is writing this blob",
                    ),
                });
            }
            None => {
                let mut rand = [0u8; 8];
                nuon_core::random_bytes(&mut rand);
                dir.join("blobs/sha256")
                    .join(format!(".tmp-{}", hex_of(&rand)))
            }
        };
        let result = async {
            let (mut file, source): (tokio::fs::File, BlobReader) = if offset == 0 {
                let f = tokio::fs::File::create(&partial)
                    .await
                    .map_err(io(format!("cannot create {}", partial.display())))?;
                (f, reader)
            } else {
                let held = tokio::fs::metadata(&partial)
                    .await
                    .map(|m| m.len())
                    .unwrap_or(0);
                if held != offset {
                    return Err(ArtifactError::Io {
                        what: format!("resuming {} in {repo}", blob.digest),
                        source: std::io::Error::other(format!(
                            "{held} bytes are held, not {offset}"
                        )),
                    });
                }
                // The whole blob is checked: what is held, then the rest.
                let head = tokio::fs::File::open(&partial)
                    .await
                    .map_err(io(format!("cannot read {}", partial.display())))?;
                let f = tokio::fs::OpenOptions::new()
                    .append(true)
                    .open(&partial)
                    .await
                    .map_err(io(format!("cannot append to {}", partial.display())))?;
                (f, Box::pin(head.take(offset).chain(reader)))
            };
            let mut checked = VerifyingReader::new(source, blob.clone());
            let mut buf = vec![0u8; 256 * 1024];
            let mut pos = 0u64;
            loop {
                let n = match checked.read(&mut buf).await {
                    Ok(n) => n,
                    Err(e) => {
                        // What arrived is on disk before anyone resumes it.
                        let _ = file.flush().await;
                        return Err(if e.kind() == std::io::ErrorKind::InvalidData {
                            ArtifactError::Corrupt(format!("refused blob for {repo}: {e}"))
                        } else {
                            io(format!("cannot store blob {} in {repo}", blob.digest))(e)
                        });
                    }
                };
                if n == 0 {
                    break;
                }
                let end = pos + n as u64;
                if end > offset {
                    let skip = offset.saturating_sub(pos) as usize;
                    file.write_all(&buf[skip..n])
                        .await
                        .map_err(io(format!("cannot write {}", partial.display())))?;
                }
                pos = end;
            }
            file.sync_all()
                .await
                .map_err(io(format!("cannot sync {}", partial.display())))?;
            tokio::fs::rename(&partial, &path)
                .await
                .map_err(io(format!("cannot rename into {}", path.display())))
        }
        .await;
        // Bad bytes are dropped (and a file of our own); anything else keeps
        // what arrived, to resume.
        if result.is_err() && (lock.is_none() || matches!(result, Err(ArtifactError::Corrupt(_)))) {
            let _ = tokio::fs::remove_file(&partial).await;
        }
        drop(lock);
        result
    }

    async fn get_manifest(
        &self,
        repo: &str,
        reference: &str,
    ) -> Result<Option<RawManifest>, ArtifactError> {
        let dir = self.repo_dir(repo)?;
        let index = self.read_index(&dir).await?;
        let entry = match reference.parse::<Digest>() {
            Ok(d) => index.manifests.iter().find(|m| m.digest == d),
            Err(_) => {
                check_tag(reference)?;
                index
                    .manifests
                    .iter()
                    .find(|m| m.annotations.get(REF_NAME).map(String::as_str) == Some(reference))
            }
        };
        let Some(entry) = entry else {
            return Ok(None);
        };
        let path = self.blob_path(repo, &entry.digest)?;
        let bytes = tokio::fs::read(&path)
            .await
            .map_err(io(format!("cannot read manifest {}", path.display())))?;
        let digest = Digest::of(&bytes);
        if digest != entry.digest {
            return Err(ArtifactError::Corrupt(format!(
                "manifest {} in {repo} is corrupted (its bytes hash to {digest})",
                entry.digest
            )));
        }
        Ok(Some(RawManifest {
            bytes,
            media_type: entry.media_type.clone(),
            digest,
        }))
    }

    async fn put_manifest(
        &self,
        repo: &str,
        manifest: &RawManifest,
        tag: Option<&str>,
    ) -> Result<(), ArtifactError> {
        if let Some(t) = tag {
            check_tag(t)?;
        }
        if Digest::of(&manifest.bytes) != manifest.digest {
            return Err(ArtifactError::Corrupt(format!(
                "manifest bytes do not hash to {}",
                manifest.digest
            )));
        }
        // Everything the manifest names must be here first: an index's
        // manifests, or an image manifest's config and layers.
        let named: Vec<Descriptor> = if nuon_core::artifact::is_index(manifest) {
            let index: nuon_core::artifact::ImageIndex = serde_json::from_slice(&manifest.bytes)
                .map_err(|e| ArtifactError::Invalid(format!("not an OCI image index: {e}")))?;
            index.manifests
        } else {
            let parsed: ImageManifest = serde_json::from_slice(&manifest.bytes)
                .map_err(|e| ArtifactError::Invalid(format!("not an OCI image manifest: {e}")))?;
            std::iter::once(parsed.config)
                .chain(parsed.layers)
                .collect()
        };
        for blob in &named {
            if !self.has_blob(repo, blob).await? {
                return Err(ArtifactError::Invalid(format!(
                    "manifest {} names {} that {repo} does not have: push it first",
                    manifest.digest, blob.digest
                )));
            }
        }
        let dir = self.repo_dir(repo)?;
        self.ensure(&dir).await?;
        let desc = Descriptor {
            media_type: manifest.media_type.clone(),
            digest: manifest.digest.clone(),
            size: manifest.bytes.len() as u64,
            annotations: BTreeMap::new(),
        };
        let blob_path = self.blob_path(repo, &manifest.digest)?;
        // Manifests are small: compare the bytes, so a damaged copy of
        // the same size is replaced too.
        let same = tokio::fs::read(&blob_path)
            .await
            .is_ok_and(|b| b == manifest.bytes);
        if !same {
            write_atomic(&blob_path, &manifest.bytes).await?;
        }
        let _guard = self.index_lock.lock().await;
        let mut index = self.read_index(&dir).await?;
        if let Some(t) = tag {
            // A tag names one manifest: it moves.
            for m in &mut index.manifests {
                if m.annotations.get(REF_NAME).map(String::as_str) == Some(t) {
                    m.annotations.remove(REF_NAME);
                }
            }
        }
        let mut entry = desc;
        if let Some(t) = tag {
            entry.annotations.insert(REF_NAME.into(), t.into());
        }
        let untagged_same =
            |m: &Descriptor| m.digest == entry.digest && !m.annotations.contains_key(REF_NAME);
        index.manifests.retain(|m| !untagged_same(m));
        if tag.is_some() || !index.manifests.iter().any(|m| m.digest == entry.digest) {
            index.manifests.push(entry);
        }
        let bytes = serde_json::to_vec(&index)
            .map_err(|e| ArtifactError::Invalid(format!("cannot encode index.json: {e}")))?;
        write_atomic(&dir.join("index.json"), &bytes).await
    }
}

fn hex_of(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
