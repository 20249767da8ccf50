//! Container images for jobs that run in containers.
//!
//! [`push_tool_image`] (in `build.rs`) builds a minimal tool image (busybox
//! and one host binary, for `nuon images tool`) as an OCI image in a store.
//! [`RootfsCache`] turns an image of the install's store into a root
//! filesystem on the runner, once per digest: the manifest is checked
//! against its digest, every layer against its digest as it is read and,
//! uncompressed, against the config's `diff_ids`, all before the first file
//! is written; layers are applied in order with their whiteouts, and
//! nothing escapes the root (links are checked by the `tar` crate, device
//! nodes are skipped). Entries are evicted by age and total size, never
//! while a job holds one.

use std::collections::HashMap;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use nuon_core::artifact::{
    ArtifactError, ArtifactStore, Digest, ImageManifest, MANIFEST_MEDIA_TYPE,
};
use nuon_core::{ImageRef, ImageRoots, PreparedRoot};
use sha2::{Digest as _, Sha256};

pub use super::build::{
    BUSYBOX_APPLETS, ContainerConfig, IMAGE_CONFIG_MEDIA_TYPE, ImageConfig, LAYER_TAR_GZIP, RootFs,
    TOOL_LABEL, ToolFile, build_layer, push_image, push_tool_image, tool_image_files,
};
use super::build::{go_arch, io_err};

/// An uncompressed layer.
const LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
/// Docker's gzip-compressed layer.
const DOCKER_LAYER_TAR_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
/// Docker's manifest, accepted as the OCI one (same fields).
const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";

/// Reads an image's manifest (checked against its digest) and config.
async fn manifest_and_config(
    store: &dyn ArtifactStore,
    image: &ImageRef,
) -> Result<(ImageManifest, ImageConfig), ArtifactError> {
    let m = store
        .get_manifest(&image.repository, image.digest.as_str())
        .await?
        .ok_or_else(|| {
            ArtifactError::NotFound(format!(
                "no image {image} in the install's store: sync it first (or `nuon-runner import` a release bundle that has it)"
            ))
        })?;
    if Digest::of(&m.bytes) != image.digest {
        return Err(ArtifactError::Corrupt(format!(
            "the manifest of {image} in the install's store does not match its digest"
        )));
    }
    if m.media_type != MANIFEST_MEDIA_TYPE && m.media_type != DOCKER_MANIFEST {
        return Err(ArtifactError::Invalid(format!(
            "{image} is a {}, not an image manifest (an index? name the digest of one platform's image)",
            m.media_type
        )));
    }
    let manifest: ImageManifest = serde_json::from_slice(&m.bytes).map_err(|e| {
        ArtifactError::Invalid(format!(
            "{image}: the manifest is not an image manifest: {e}"
        ))
    })?;
    let mut bytes = Vec::new();
    let mut r = store.open_blob(&image.repository, &manifest.config).await?;
    tokio::io::AsyncReadExt::read_to_end(&mut r, &mut bytes)
        .await
        .map_err(|e| corrupt_or_io(e, &format!("{image}: the image config")))?;
    let config: ImageConfig = serde_json::from_slice(&bytes)
        .map_err(|e| ArtifactError::Invalid(format!("{image}: the image config: {e}")))?;
    if !config.os.is_empty() && config.os != "linux" {
        return Err(ArtifactError::Invalid(format!(
            "{image} is an image for {}, not linux",
            config.os
        )));
    }
    if !config.architecture.is_empty() && config.architecture != go_arch() {
        return Err(ArtifactError::Invalid(format!(
            "{image} is an image for {}; this runner is {}",
            config.architecture,
            go_arch()
        )));
    }
    if config.rootfs.diff_ids.len() != manifest.layers.len() {
        return Err(ArtifactError::Invalid(format!(
            "{image}: the config names {} layer digests for {} layers",
            config.rootfs.diff_ids.len(),
            manifest.layers.len()
        )));
    }
    Ok((manifest, config))
}

fn corrupt_or_io(e: io::Error, what: &str) -> ArtifactError {
    if e.kind() == io::ErrorKind::InvalidData {
        ArtifactError::Corrupt(format!("{what}: {e}"))
    } else {
        ArtifactError::Io {
            what: format!("cannot read {what}"),
            source: e,
        }
    }
}

/// Downloads every layer into `dir` (each checked against its digest
/// while it streams, then uncompressed against its diff id): the files,
/// in order.
async fn fetch_layers(
    store: &dyn ArtifactStore,
    image: &ImageRef,
    manifest: &ImageManifest,
    config: &ImageConfig,
    dir: &Path,
) -> Result<Vec<(PathBuf, bool)>, ArtifactError> {
    let mut out = Vec::new();
    for (i, (layer, diff_id)) in manifest
        .layers
        .iter()
        .zip(&config.rootfs.diff_ids)
        .enumerate()
    {
        let gzip = match layer.media_type.as_str() {
            LAYER_TAR_GZIP | DOCKER_LAYER_TAR_GZIP => true,
            LAYER_TAR => false,
            other => {
                return Err(ArtifactError::Invalid(format!(
                    "{image}: layer {} is {other}; this runner unpacks tar and tar+gzip layers",
                    i + 1
                )));
            }
        };
        let path = dir.join(format!("layer-{i}"));
        let mut file = tokio::fs::File::create(&path)
            .await
            .map_err(io_err("cannot create a layer file"))?;
        let mut reader = store.open_blob(&image.repository, layer).await?;
        tokio::io::copy(&mut reader, &mut file).await.map_err(|e| {
            corrupt_or_io(
                e,
                &format!(
                    "{image}: layer {} ({}); the image is refused",
                    i + 1,
                    layer.digest
                ),
            )
        })?;
        drop(file);
        // The uncompressed bytes against the config's diff id.
        let check = path.clone();
        let want = diff_id.clone();
        let got = tokio::task::spawn_blocking(move || -> io::Result<Digest> {
            let f = std::fs::File::open(&check)?;
            let mut r: Box<dyn Read> = if gzip {
                Box::new(flate2::read::GzDecoder::new(io::BufReader::new(f)))
            } else {
                Box::new(io::BufReader::new(f))
            };
            let mut h = Sha256::new();
            let mut buf = vec![0u8; 256 * 1024];
            loop {
                let n = r.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
            Ok(Digest::from_sha256(h.finalize().into()))
        })
        .await
        .map_err(|e| ArtifactError::Invalid(format!("checking a layer failed: {e}")))?
        .map_err(|e| {
            ArtifactError::Corrupt(format!(
                "{image}: layer {} does not uncompress ({e}); the image is refused",
                i + 1
            ))
        })?;
        if got != want {
            return Err(ArtifactError::Corrupt(format!(
                "{image}: layer {} uncompressed is {got}, but the image config says {want}; the image is refused",
                i + 1
            )));
        }
        out.push((path, gzip));
    }
    Ok(out)
}

/// The path of a tar entry inside the root: only normal components.
fn inside(root: &Path, name: &Path) -> Option<PathBuf> {
    let mut p = root.to_path_buf();
    for c in name.components() {
        match c {
            Component::Normal(n) => p.push(n),
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => return None,
        }
    }
    Some(p)
}

/// Whether every directory between `root` and `path` is a real directory
/// (no symbolic link a whiteout could be steered through).
fn no_links_between(root: &Path, path: &Path) -> bool {
    let Ok(rest) = path.strip_prefix(root) else {
        return false;
    };
    let mut p = root.to_path_buf();
    let mut comps: Vec<_> = rest.components().collect();
    comps.pop();
    for c in comps {
        p.push(c);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_dir() => {}
            _ => return false,
        }
    }
    true
}

fn remove_any(p: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(p) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(p),
        Ok(_) => std::fs::remove_file(p),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

/// Applies one layer to `root`: whiteouts remove what lower layers put
/// there; device nodes and entries that would leave the root are skipped.
fn apply_layer(root: &Path, layer: &Path, gzip: bool) -> io::Result<()> {
    let f = std::fs::File::open(layer)?;
    let r: Box<dyn Read> = if gzip {
        Box::new(flate2::read::GzDecoder::new(io::BufReader::new(f)))
    } else {
        Box::new(io::BufReader::new(f))
    };
    // What this layer wrote: its own whiteouts never remove those (they
    // hide what lower layers have, whatever the order in the archive).
    let mut written: std::collections::HashSet<PathBuf> = std::collections::HashSet::new();
    let mut archive = tar::Archive::new(r);
    archive.set_preserve_permissions(true);
    archive.set_preserve_ownerships(true);
    archive.set_preserve_mtime(true);
    archive.set_unpack_xattrs(false);
    archive.set_overwrite(true);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let name = entry.path()?.into_owned();
        let Some(target) = inside(root, &name) else {
            continue;
        };
        let base = name
            .file_name()
            .map(|b| b.to_string_lossy().into_owned())
            .unwrap_or_default();
        if let Some(hidden) = base.strip_prefix(".wh.") {
            if !no_links_between(root, &target)
                || hidden.is_empty()
                || hidden == "."
                || hidden == ".."
            {
                continue;
            }
            let dir = target.parent().unwrap_or(root);
            if hidden == ".wh..opq" {
                // An opaque directory: nothing of the lower layers in it.
                if let Ok(rd) = std::fs::read_dir(dir) {
                    for e in rd.flatten() {
                        let p = e.path();
                        if !written.iter().any(|w| w.starts_with(&p)) {
                            remove_any(&p)?;
                        }
                    }
                }
            } else if !written.contains(&dir.join(hidden)) {
                remove_any(&dir.join(hidden))?;
            }
            continue;
        }
        match entry.header().entry_type() {
            tar::EntryType::Char | tar::EntryType::Block | tar::EntryType::Fifo => continue,
            _ => {}
        }
        // A file replaces whatever a lower layer had at its place, except
        // a directory by a directory.
        if let Ok(m) = std::fs::symlink_metadata(&target)
            && !(m.is_dir() && entry.header().entry_type().is_dir())
            && no_links_between(root, &target)
        {
            remove_any(&target)?;
        }
        written.insert(target.clone());
        entry.unpack_in(root).map_err(|e| {
            // The tar crate keeps the cause in the error's source.
            let cause = std::error::Error::source(&e)
                .map(|s| format!(": {s}"))
                .unwrap_or_default();
            io::Error::new(e.kind(), format!("{e}{cause}"))
        })?;
    }
    Ok(())
}

/// The size of a directory tree in bytes (files only, links not followed).
fn tree_size(p: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![p.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(e.path()),
                Ok(t) if t.is_file() => total += e.metadata().map_or(0, |m| m.len()),
                _ => {}
            }
        }
    }
    total
}

/// Root filesystems of the install's images on this runner, one directory
/// per digest under `dir`: `HEX/rootfs`, `HEX/env.json`, `HEX/size`, and
/// `HEX/used` (its modification time is the entry's last use).
pub struct RootfsCache {
    store: Arc<dyn ArtifactStore>,
    /// The vendor's store, that images missing from the install's are
    /// synced from (by digest) before they are unpacked.
    source: Option<Arc<dyn ArtifactStore>>,
    dir: PathBuf,
    max_bytes: u64,
    max_age: Duration,
    /// Jobs holding each digest, and one lock per digest being unpacked.
    state: Arc<Mutex<HashMap<String, usize>>>,
    unpacking: tokio::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// Releases a job's hold on a cache entry.
struct Hold {
    hex: String,
    state: Arc<Mutex<HashMap<String, usize>>>,
}

impl Drop for Hold {
    fn drop(&mut self) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = s.get_mut(&self.hex) {
            *n -= 1;
            if *n == 0 {
                s.remove(&self.hex);
            }
        }
    }
}

impl RootfsCache {
    /// A cache in `dir` of images read from `store`, evicting entries unused
    /// for `max_age` and the least recently used past `max_bytes`.
    pub fn new(
        store: Arc<dyn ArtifactStore>,
        dir: PathBuf,
        max_bytes: u64,
        max_age: Duration,
    ) -> Self {
        RootfsCache {
            store,
            source: None,
            dir,
            max_bytes,
            max_age,
            state: Arc::new(Mutex::new(HashMap::new())),
            unpacking: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Images missing from the install's store are first synced from
    /// `source` (the vendor's store), by digest.
    pub fn with_source(mut self, source: Option<Arc<dyn ArtifactStore>>) -> Self {
        self.source = source;
        self
    }

    /// Copies `image` from the vendor's store when the install's lacks it:
    /// whether it did.
    async fn sync(&self, image: &ImageRef) -> Result<bool, ArtifactError> {
        if self
            .store
            .get_manifest(&image.repository, image.digest.as_str())
            .await?
            .is_some()
        {
            return Ok(false);
        }
        let Some(source) = &self.source else {
            return Ok(false);
        };
        super::copy_artifact(
            &**source,
            &image.repository,
            image.digest.as_str(),
            &*self.store,
            &image.repository,
            None,
            true,
        )
        .await
        .map_err(|e| {
            ArtifactError::NotFound(format!(
                "{image} is not in the install's store and cannot be synced from the vendor's: {e}"
            ))
        })?;
        Ok(true)
    }

    fn hold(&self, hex: &str) -> Hold {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        *s.entry(hex.to_owned()).or_insert(0) += 1;
        Hold {
            hex: hex.to_owned(),
            state: self.state.clone(),
        }
    }

    fn read_env(entry: &Path) -> Option<Vec<String>> {
        let bytes = std::fs::read(entry.join("env.json")).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    /// Unpacks `image` into `entry` (through a temporary directory renamed
    /// into place only when every layer checked out and applied).
    async fn unpack(&self, image: &ImageRef, entry: &Path) -> Result<(), ArtifactError> {
        let (manifest, config) = manifest_and_config(&*self.store, image).await?;
        std::fs::create_dir_all(&self.dir).map_err(io_err(format!(
            "cannot create the image cache {}",
            self.dir.display()
        )))?;
        let tmp = tempfile::Builder::new()
            .prefix(".unpacking-")
            .tempdir_in(&self.dir)
            .map_err(io_err("cannot create a directory in the image cache"))?;
        let layers = fetch_layers(&*self.store, image, &manifest, &config, tmp.path()).await?;
        let stage = tmp.path().join("entry");
        let root = stage.join("rootfs");
        let env = config.config.env.clone();
        let apply_root = root.clone();
        let what = image.to_string();
        let size = tokio::task::spawn_blocking(move || -> Result<u64, ArtifactError> {
            std::fs::create_dir_all(&apply_root).map_err(io_err("cannot create the rootfs"))?;
            for (i, (layer, gzip)) in layers.iter().enumerate() {
                apply_layer(&apply_root, layer, *gzip).map_err(|e| {
                    ArtifactError::Invalid(format!(
                        "{what}: layer {} cannot be unpacked: {e}",
                        i + 1
                    ))
                })?;
                let _ = std::fs::remove_file(layer);
            }
            Ok(tree_size(&apply_root))
        })
        .await
        .map_err(|e| ArtifactError::Invalid(format!("unpacking failed: {e}")))??;
        let meta = |name: &str, bytes: Vec<u8>| {
            std::fs::write(stage.join(name), bytes)
                .map_err(io_err(format!("cannot write {name} in the image cache")))
        };
        meta(
            "env.json",
            serde_json::to_vec(&env).unwrap_or_else(|_| b"[]".to_vec()),
        )?;
        meta("size", size.to_string().into_bytes())?;
        meta("used", Vec::new())?;
        std::fs::rename(&stage, entry).map_err(io_err(format!(
            "cannot move the unpacked image to {}",
            entry.display()
        )))?;
        Ok(())
    }

    /// Evicts entries unused for longer than the maximum age, then the least
    /// recently used while the cache is over its size; never one in use.
    pub fn evict(&self) {
        evict_in(&self.dir, &self.state, self.max_bytes, self.max_age);
    }
}

/// [`RootfsCache::evict`] of the cache in `dir`.
fn evict_in(dir: &Path, state: &Mutex<HashMap<String, usize>>, max_bytes: u64, max_age: Duration) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let held: Vec<String> = state
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .keys()
        .cloned()
        .collect();
    let now = SystemTime::now();
    // (last use, size, path, held by a job)
    let mut entries: Vec<(SystemTime, u64, PathBuf, bool)> = Vec::new();
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            // A temporary directory of an unpack that a crash left.
            let stale = e.metadata().and_then(|m| m.modified()).is_ok_and(|t| {
                now.duration_since(t).unwrap_or_default() > Duration::from_secs(3600)
            });
            if stale {
                let _ = std::fs::remove_dir_all(e.path());
            }
            continue;
        }
        let p = e.path();
        let used = std::fs::metadata(p.join("used"))
            .and_then(|m| m.modified())
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let size = std::fs::read_to_string(p.join("size"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        entries.push((used, size, p, held.contains(&name)));
    }
    entries.sort();
    // What a job holds counts toward the size, and stays.
    let mut total: u64 = entries.iter().map(|(_, s, _, _)| s).sum();
    for (used, size, p, held) in entries {
        if held {
            continue;
        }
        let old = now.duration_since(used).unwrap_or_default() > max_age;
        if old || total > max_bytes {
            let name = p
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            // Renamed first so a half-removed entry is never used, and
            // under the lock holds are taken with: a job that took the
            // entry since the list above keeps it.
            let doomed = p.with_file_name(format!(".evicting-{name}"));
            let renamed = {
                let s = state.lock().unwrap_or_else(|e| e.into_inner());
                !s.contains_key(&name) && std::fs::rename(&p, &doomed).is_ok()
            };
            if renamed {
                let _ = std::fs::remove_dir_all(&doomed);
                total = total.saturating_sub(size);
            }
        }
    }
}

#[async_trait]
impl ImageRoots for RootfsCache {
    async fn prepare(&self, image: &ImageRef) -> Result<PreparedRoot, String> {
        let hex = image.digest.hex().to_owned();
        let entry = self.dir.join(&hex);
        let lock = {
            let mut m = self.unpacking.lock().await;
            m.entry(hex.clone()).or_default().clone()
        };
        let _one = lock.lock().await;
        let hold = self.hold(&hex);
        let mut unpacked = false;
        let synced = self.sync(image).await.map_err(|e| e.to_string())?;
        let env = match Self::read_env(&entry) {
            Some(env) if entry.join("rootfs").is_dir() => env,
            _ => {
                let _ = remove_any(&entry);
                self.unpack(image, &entry)
                    .await
                    .map_err(|e| e.to_string())?;
                unpacked = true;
                Self::read_env(&entry).unwrap_or_default()
            }
        };
        // The entry's last use, for eviction.
        let _ = std::fs::File::options()
            .write(true)
            .open(entry.join("used"))
            .and_then(|f| f.set_modified(SystemTime::now()));
        if unpacked {
            let (dir, state) = (self.dir.clone(), self.state.clone());
            let (max_bytes, max_age) = (self.max_bytes, self.max_age);
            let _ = tokio::task::spawn_blocking(move || evict_in(&dir, &state, max_bytes, max_age))
                .await;
        }
        Ok(PreparedRoot {
            rootfs: entry.join("rootfs"),
            env,
            unpacked,
            synced,
            lease: Box::new(hold),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::io::Write;

    use super::*;
    use crate::oci::LayoutStore;

    fn layer_of(entries: &[(&str, &[u8])]) -> (Vec<u8>, Digest) {
        let mut tar = tar::Builder::new(Vec::new());
        for (name, data) in entries {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            h.set_uid(0);
            h.set_gid(0);
            h.set_mtime(0);
            h.set_entry_type(tar::EntryType::Regular);
            tar.append_data(&mut h, name, *data).unwrap();
        }
        let raw = tar.into_inner().unwrap();
        let diff = Digest::of(&raw);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&raw).unwrap();
        (gz.finish().unwrap(), diff)
    }

    #[tokio::test]
    async fn layers_apply_in_order_with_whiteouts_and_a_corrupt_layer_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ArtifactStore> =
            Arc::new(LayoutStore::open(dir.path().join("store")).unwrap());
        let l1 = layer_of(&[("a/keep", b"1"), ("a/gone", b"2"), ("b/x", b"3")]);
        // The opaque marker after this layer's own b/y: it hides only what
        // lower layers had. `.wh...` would name `..`: ignored.
        let l2 = layer_of(&[
            ("a/.wh.gone", b""),
            ("b/y", b"4"),
            ("b/.wh..wh..opq", b""),
            ("a/.wh...", b""),
            ("c", b"5"),
        ]);
        let digest = push_image(
            &*store,
            "tools/t",
            Some("v1"),
            vec![l1.clone(), l2],
            vec!["PATH=/bin".into()],
            BTreeMap::new(),
        )
        .await
        .unwrap();
        let cache = RootfsCache::new(
            store.clone(),
            dir.path().join("cache"),
            u64::MAX,
            Duration::from_secs(3600),
        );
        let image = ImageRef {
            repository: "tools/t".into(),
            digest,
        };
        let got = cache.prepare(&image).await.unwrap();
        assert!(got.unpacked);
        assert_eq!(got.env, vec!["PATH=/bin".to_string()]);
        let read = |p: &str| std::fs::read_to_string(got.rootfs.join(p)).ok();
        assert_eq!(read("a/keep").as_deref(), Some("1"));
        assert_eq!(read("a/gone"), None);
        assert_eq!(read("b/x"), None);
        assert_eq!(read("b/y").as_deref(), Some("4"));
        assert_eq!(read("c").as_deref(), Some("5"));
        let again = cache.prepare(&image).await.unwrap();
        assert!(!again.unpacked, "a second job of the digest uses the cache");

        // A layer whose bytes are not its digest's: refused, nothing kept.
        let bad = layer_of(&[("evil", b"x")]);
        let digest = push_image(
            &*store,
            "tools/bad",
            None,
            vec![bad.clone()],
            vec![],
            BTreeMap::new(),
        )
        .await
        .unwrap();
        let blob = dir
            .path()
            .join("store/tools/bad/blobs/sha256")
            .join(Digest::of(&bad.0).hex());
        let mut bytes = std::fs::read(&blob).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&blob, bytes).unwrap();
        let image = ImageRef {
            repository: "tools/bad".into(),
            digest,
        };
        let err = cache.prepare(&image).await.unwrap_err();
        assert!(err.contains("refused") || err.contains("digest"), "{err}");
        assert!(!dir.path().join("cache").join(image.digest.hex()).exists());
    }

    #[tokio::test]
    async fn the_cache_evicts_the_least_recently_used_past_its_size_never_one_in_use() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn ArtifactStore> =
            Arc::new(LayoutStore::open(dir.path().join("store")).unwrap());
        let mut images = Vec::new();
        for i in 0..3u8 {
            let data = vec![i; 64 << 10];
            let layer = layer_of(&[("blob", &data)]);
            let digest = push_image(
                &*store,
                "tools/t",
                None,
                vec![layer],
                vec![],
                BTreeMap::new(),
            )
            .await
            .unwrap();
            images.push(ImageRef {
                repository: "tools/t".into(),
                digest,
            });
        }
        // Room for two 64 KiB images.
        let cache = RootfsCache::new(
            store.clone(),
            dir.path().join("cache"),
            150 << 10,
            Duration::from_secs(3600),
        );
        let entry = |i: usize| dir.path().join("cache").join(images[i].digest.hex());
        let held = cache.prepare(&images[0]).await.unwrap();
        drop(cache.prepare(&images[1]).await.unwrap());
        std::thread::sleep(Duration::from_millis(20));
        drop(cache.prepare(&images[2]).await.unwrap());
        // Over size: image 1 (least recently used and not held) went;
        // image 0 is held by a job, so it stays.
        assert!(entry(0).exists(), "an entry in use is never evicted");
        assert!(!entry(1).exists(), "the least recently used goes");
        assert!(entry(2).exists());
        drop(held);
        // By age: nothing unused is kept past the maximum age.
        let aged = RootfsCache::new(store, dir.path().join("cache"), u64::MAX, Duration::ZERO);
        std::thread::sleep(Duration::from_millis(20));
        aged.evict();
        assert!(!entry(0).exists() && !entry(2).exists());
    }

    #[test]
    fn entries_cannot_leave_the_root() {
        let root = Path::new("/r");
        assert_eq!(inside(root, Path::new("../etc/passwd")), None);
        assert_eq!(
            inside(root, Path::new("/etc/passwd")),
            Some(PathBuf::from("/r/etc/passwd"))
        );
    }
}
