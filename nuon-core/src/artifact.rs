//! Artifacts: OCI content (blobs and manifests, addressed by digest) and
//! the [`ArtifactStore`] trait every store implements (an OCI image layout
//! directory now, registries later).
//!
//! Manifests travel as their raw bytes and are never re-serialized, so a
//! digest names exactly the bytes that were built. Every blob is hashed
//! while it streams ([`VerifyingReader`]): a store never keeps, and a
//! reader never accepts, bytes that do not match their digest.

use std::fmt;
use std::pin::Pin;
use std::str::FromStr;
use std::task::{Context, Poll};

use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use tokio::io::{AsyncRead, ReadBuf};

/// The media type of an OCI image manifest.
pub const MANIFEST_MEDIA_TYPE: &str = "application/vnd.oci.image.manifest.v1+json";
/// The media type of an OCI image index.
pub const INDEX_MEDIA_TYPE: &str = "application/vnd.oci.image.index.v1+json";
/// The media type of the empty config of artifacts that need none.
pub const EMPTY_MEDIA_TYPE: &str = "application/vnd.oci.empty.v1+json";

/// A content digest: `sha256:` and 64 lowercase hex characters.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[serde(try_from = "String", into = "String")]
pub struct Digest(String);

impl Digest {
    /// The digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Digest(format!("sha256:{}", hex::encode(Sha256::digest(bytes))))
    }

    /// The digest whose SHA-256 hash is `hash`.
    pub fn from_sha256(hash: [u8; 32]) -> Self {
        Digest(format!("sha256:{}", hex::encode(hash)))
    }

    /// The 64 hex characters.
    pub fn hex(&self) -> &str {
        &self.0["sha256:".len()..]
    }

    /// The whole digest.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Digest {
    type Err = ArtifactError;

    fn from_str(s: &str) -> Result<Self, ArtifactError> {
        let ok = s.strip_prefix("sha256:").is_some_and(|h| {
            h.len() == 64
                && h.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        });
        if ok {
            Ok(Digest(s.to_owned()))
        } else {
            Err(ArtifactError::Invalid(format!(
                "{:?} is not a digest: expected sha256: and 64 lowercase hex characters",
                s.chars().take(80).collect::<String>()
            )))
        }
    }
}

impl TryFrom<String> for Digest {
    type Error = ArtifactError;
    fn try_from(s: String) -> Result<Self, ArtifactError> {
        s.parse()
    }
}

impl From<Digest> for String {
    fn from(d: Digest) -> String {
        d.0
    }
}

/// What a manifest says of one blob.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Descriptor {
    /// The blob's media type.
    pub media_type: String,
    /// Its digest.
    pub digest: Digest,
    /// Its size in bytes.
    pub size: u64,
    /// Annotations, if any.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub annotations: std::collections::BTreeMap<String, String>,
}

/// The parts of an image manifest a copy needs: its config and layers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageManifest {
    /// Always 2.
    pub schema_version: u32,
    /// [`MANIFEST_MEDIA_TYPE`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media_type: Option<String>,
    /// What the artifact is (`application/vnd.opentofu.modulepkg`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub artifact_type: Option<String>,
    /// The config blob.
    pub config: Descriptor,
    /// The layers.
    pub layers: Vec<Descriptor>,
}

/// A manifest as stored: its exact bytes, media type and digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawManifest {
    /// The bytes, as built.
    pub bytes: Vec<u8>,
    /// Its media type.
    pub media_type: String,
    /// The digest of `bytes`.
    pub digest: Digest,
}

/// Why an artifact operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// Not in the store.
    #[error("{0}")]
    NotFound(String),
    /// Bytes that do not match their digest or size.
    #[error("{0}")]
    Corrupt(String),
    /// A malformed digest, reference, manifest or repository name.
    #[error("{0}")]
    Invalid(String),
    /// The store's I/O failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
}

/// A stream of a blob's bytes.
pub type BlobReader = Pin<Box<dyn AsyncRead + Send>>;

/// A store of OCI content, by repository.
#[async_trait]
pub trait ArtifactStore: Send + Sync {
    /// Whether the store has the blob, whole (by size; see
    /// [`ArtifactStore::verify_blob`] for its bytes).
    async fn has_blob(&self, repo: &str, blob: &Descriptor) -> Result<bool, ArtifactError>;

    /// The blob's bytes. The reader fails at its end when the bytes do not
    /// match the digest, so a corrupted blob is never taken for good.
    async fn open_blob(&self, repo: &str, blob: &Descriptor) -> Result<BlobReader, ArtifactError>;

    /// Stores a blob from `reader`, checking its size and digest while it
    /// streams: on a mismatch nothing is kept.
    async fn put_blob(
        &self,
        repo: &str,
        blob: &Descriptor,
        reader: BlobReader,
    ) -> Result<(), ArtifactError>;

    /// A manifest by tag or digest.
    async fn get_manifest(
        &self,
        repo: &str,
        reference: &str,
    ) -> Result<Option<RawManifest>, ArtifactError>;

    /// Stores a manifest's exact bytes (every blob it names must be there
    /// already) and points `tag` at it when given.
    async fn put_manifest(
        &self,
        repo: &str,
        manifest: &RawManifest,
        tag: Option<&str>,
    ) -> Result<(), ArtifactError>;

    /// The blob's bytes from `offset` on (to resume a copy). The default
    /// reads and drops the first `offset` bytes; the reader still checks
    /// the whole blob's digest at its end.
    async fn open_blob_from(
        &self,
        repo: &str,
        blob: &Descriptor,
        offset: u64,
    ) -> Result<BlobReader, ArtifactError> {
        use tokio::io::AsyncReadExt as _;
        let mut r = self.open_blob(repo, blob).await?;
        let mut head = (&mut r).take(offset);
        tokio::io::copy(&mut head, &mut tokio::io::sink())
            .await
            .map_err(|e| ArtifactError::Corrupt(format!("blob {} in {repo}: {e}", blob.digest)))?;
        Ok(r)
    }

    /// How many bytes of `blob` an interrupted upload left here, to resume
    /// from (0: start afresh).
    async fn partial_len(&self, repo: &str, blob: &Descriptor) -> Result<u64, ArtifactError> {
        let _ = (repo, blob);
        Ok(0)
    }

    /// Finishes an interrupted upload: `reader` has the bytes from
    /// `offset` on; the whole blob is checked against its digest.
    async fn put_blob_from(
        &self,
        repo: &str,
        blob: &Descriptor,
        offset: u64,
        reader: BlobReader,
    ) -> Result<(), ArtifactError> {
        if offset == 0 {
            return self.put_blob(repo, blob, reader).await;
        }
        Err(ArtifactError::Invalid(format!(
            "this store cannot resume the upload of {} to {repo}",
            blob.digest
        )))
    }

    /// Makes `blob`, which `from_repo` of this same store has, part of
    /// `repo` without sending it (a registry's cross-repository mount).
    /// `Ok(false)` when the store cannot or will not; the caller uploads.
    async fn mount_blob(
        &self,
        repo: &str,
        from_repo: &str,
        blob: &Descriptor,
    ) -> Result<bool, ArtifactError> {
        let _ = (repo, from_repo, blob);
        Ok(false)
    }

    /// Reads the whole blob and checks its digest.
    async fn verify_blob(&self, repo: &str, blob: &Descriptor) -> Result<(), ArtifactError> {
        let mut r = self.open_blob(repo, blob).await?;
        tokio::io::copy(&mut r, &mut tokio::io::sink())
            .await
            .map_err(|e| ArtifactError::Corrupt(format!("blob {} in {repo}: {e}", blob.digest)))?;
        Ok(())
    }
}

/// The digest and size of everything `r` yields (read in 256 KiB pieces).
pub fn digest_of_reader(r: &mut impl std::io::Read) -> std::io::Result<(Digest, u64)> {
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let n = match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((
        Digest(format!("sha256:{}", hex::encode(hasher.finalize()))),
        size,
    ))
}

/// A reader that hashes what passes through it and, at the end, fails with
/// `InvalidData` when the bytes are not `size` bytes with digest `digest`.
pub struct VerifyingReader<R> {
    inner: R,
    hasher: Sha256,
    read: u64,
    expected: Descriptor,
    done: bool,
}

impl<R> VerifyingReader<R> {
    /// Checks `inner` against `expected`.
    pub fn new(inner: R, expected: Descriptor) -> Self {
        VerifyingReader {
            inner,
            hasher: Sha256::new(),
            read: 0,
            expected,
            done: false,
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for VerifyingReader<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                let new = &buf.filled()[before..];
                this.read += new.len() as u64;
                if this.read > this.expected.size {
                    // An error must come with no bytes read.
                    buf.set_filled(before);
                    return Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "blob {} is longer than its {} bytes",
                            this.expected.digest, this.expected.size
                        ),
                    )));
                }
                this.hasher.update(new);
                if new.is_empty() && !this.done {
                    this.done = true;
                    let got = format!("sha256:{}", hex::encode(this.hasher.clone().finalize()));
                    if this.read != this.expected.size || got != this.expected.digest.as_str() {
                        return Poll::Ready(Err(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!(
                                "blob {} does not match its digest: {} bytes hashing to {got}",
                                this.expected.digest, this.read
                            ),
                        )));
                    }
                }
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

/// An image index (or a Docker manifest list): the manifests it names.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageIndex {
    /// Always 2.
    pub schema_version: u32,
    /// The manifests, one per platform (or artifact).
    pub manifests: Vec<Descriptor>,
}

/// The Docker manifest list media type (an index, as Docker names it).
pub const DOCKER_LIST_MEDIA_TYPE: &str =
    "application/vnd.docker.distribution.manifest.list.v2+json";

/// Whether a manifest is an index (OCI or Docker), by its media type or,
/// failing that, by its `manifests` field.
pub fn is_index(m: &RawManifest) -> bool {
    if m.media_type == INDEX_MEDIA_TYPE || m.media_type == DOCKER_LIST_MEDIA_TYPE {
        return true;
    }
    serde_json::from_slice::<serde_json::Value>(&m.bytes)
        .is_ok_and(|v| v.get("manifests").is_some() && v.get("layers").is_none())
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    fn desc(bytes: &[u8]) -> Descriptor {
        Descriptor {
            media_type: "application/octet-stream".into(),
            digest: Digest::of(bytes),
            size: bytes.len() as u64,
            annotations: Default::default(),
        }
    }

    async fn read(bytes: &'static [u8], expected: Descriptor) -> std::io::Result<Vec<u8>> {
        let mut r = VerifyingReader::new(bytes, expected);
        let mut out = Vec::new();
        r.read_to_end(&mut out).await.map(|_| out)
    }

    #[tokio::test]
    async fn readers_accept_only_the_bytes_of_the_digest() {
        assert_eq!(read(b"hello", desc(b"hello")).await.unwrap(), b"hello");
        let e = read(b"hellO", desc(b"hello")).await.unwrap_err();
        assert!(e.to_string().contains("does not match its digest"), "{e}");
        let e = read(b"hello!", desc(b"hello")).await.unwrap_err();
        assert!(e.to_string().contains("longer"), "{e}");
        let e = read(b"hell", desc(b"hello")).await.unwrap_err();
        assert!(e.to_string().contains("4 bytes"), "{e}");
    }

    #[test]
    fn digests_parse_strictly() {
        let d = Digest::of(b"{}");
        assert_eq!(
            d.as_str(),
            "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
        );
        assert_eq!(d.as_str().parse::<Digest>().unwrap(), d);
        assert!("sha256:ABC".parse::<Digest>().is_err());
        assert!(
            "md5:44136fa355b3678a1146ad16f7e8649e"
                .parse::<Digest>()
                .is_err()
        );
        assert!(
            "sha256:44136FA355B3678A1146AD16F7E8649E94FB4FC21FE77E8310C060F61CAAFF8A"
                .parse::<Digest>()
                .is_err()
        );
    }
}
