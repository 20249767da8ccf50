use std::collections::BTreeMap;

use nuon_core::artifact::{
    ArtifactError, ArtifactStore, Descriptor, Digest, EMPTY_MEDIA_TYPE, MANIFEST_MEDIA_TYPE,
    RawManifest,
};

use super::{LayoutStore, copy_artifact};

fn blob(media_type: &str, bytes: &[u8]) -> Descriptor {
    Descriptor {
        media_type: media_type.into(),
        digest: Digest::of(bytes),
        size: bytes.len() as u64,
        annotations: BTreeMap::new(),
    }
}

async fn put(store: &LayoutStore, repo: &str, d: &Descriptor, bytes: &'static [u8]) {
    store.put_blob(repo, d, Box::pin(bytes)).await.unwrap();
}

/// A module-package-like artifact: an empty config and one layer.
async fn push(store: &LayoutStore, repo: &str, layer: &'static [u8], tag: &str) -> RawManifest {
    let config = blob(EMPTY_MEDIA_TYPE, b"{}");
    let layer_d = blob("archive/zip", layer);
    put(store, repo, &config, b"{}").await;
    put(store, repo, &layer_d, layer).await;
    let bytes = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST_MEDIA_TYPE,
        "artifactType": "application/vnd.opentofu.modulepkg",
        "config": config,
        "layers": [layer_d],
    }))
    .unwrap();
    let m = RawManifest {
        digest: Digest::of(&bytes),
        bytes,
        media_type: MANIFEST_MEDIA_TYPE.into(),
    };
    store.put_manifest(repo, &m, Some(tag)).await.unwrap();
    m
}

#[tokio::test]
async fn artifacts_copy_by_digest_skip_what_is_there_and_resync_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let vendor = LayoutStore::open(dir.path().join("vendor")).unwrap();
    let install = LayoutStore::open(dir.path().join("install")).unwrap();
    let m = push(&vendor, "hello/app", b"PK-module-bytes", "build-1").await;

    // By tag and by digest, the same raw bytes.
    let by_tag = vendor
        .get_manifest("hello/app", "build-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_tag, m);
    let by_digest = vendor
        .get_manifest("hello/app", m.digest.as_str())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(by_digest.bytes, m.bytes);

    let (d, copied) = copy_artifact(
        &vendor,
        "hello/app",
        "build-1",
        &install,
        "app",
        None,
        false,
    )
    .await
    .unwrap();
    assert_eq!((d.clone(), copied), (m.digest.clone(), 2));
    // Again: the manifest is there, nothing is copied.
    let (_, copied) = copy_artifact(
        &vendor,
        "hello/app",
        m.digest.as_str(),
        &install,
        "app",
        None,
        false,
    )
    .await
    .unwrap();
    assert_eq!(copied, 0);

    // The vendor store can go away: the install has everything, by digest.
    drop(vendor);
    std::fs::remove_dir_all(dir.path().join("vendor")).unwrap();
    let got = install
        .get_manifest("app", m.digest.as_str())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(got.bytes, m.bytes);
    let layer = blob("archive/zip", b"PK-module-bytes");
    install.verify_blob("app", &layer).await.unwrap();

    // A corrupted blob (same size) is caught on read and re-synced by a
    // verifying copy.
    let path = install.blob_path("app", &layer.digest).unwrap();
    std::fs::write(&path, b"PK-module-bytez").unwrap();
    let e = install.verify_blob("app", &layer).await.unwrap_err();
    assert!(matches!(e, ArtifactError::Corrupt(_)), "{e}");
    assert!(e.to_string().contains("does not match its digest"), "{e}");
    let vendor = LayoutStore::open(dir.path().join("vendor2")).unwrap();
    push(&vendor, "hello/app", b"PK-module-bytes", "build-1").await;
    let (_, copied) = copy_artifact(&vendor, "hello/app", "build-1", &install, "app", None, true)
        .await
        .unwrap();
    assert_eq!(copied, 1, "only the corrupted blob is copied again");
    install.verify_blob("app", &layer).await.unwrap();
}

#[tokio::test]
async fn stores_refuse_bad_bytes_bad_names_and_dangling_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let s = LayoutStore::open(dir.path()).unwrap();
    let d = blob("application/octet-stream", b"right");
    let e = s
        .put_blob("r", &d, Box::pin(&b"wrong"[..]))
        .await
        .unwrap_err();
    assert!(matches!(e, ArtifactError::Corrupt(_)), "{e}");
    assert!(!s.has_blob("r", &d).await.unwrap(), "nothing is kept");
    let leftovers: Vec<_> = std::fs::read_dir(dir.path().join("r/blobs/sha256"))
        .unwrap()
        .collect();
    assert!(leftovers.is_empty(), "no temporary file is left");

    for bad in ["../x", "Upper", "a//b", "-a", ""] {
        assert!(s.repo_dir(bad).is_err(), "{bad}");
    }

    // A manifest naming a blob the store lacks is refused.
    let missing = blob("archive/zip", b"never pushed");
    let config = blob(EMPTY_MEDIA_TYPE, b"{}");
    put(&s, "r", &config, b"{}").await;
    let bytes = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "config": config, "layers": [missing],
    }))
    .unwrap();
    let m = RawManifest {
        digest: Digest::of(&bytes),
        bytes,
        media_type: MANIFEST_MEDIA_TYPE.into(),
    };
    let e = s.put_manifest("r", &m, Some("v1")).await.unwrap_err();
    assert!(e.to_string().contains("push it first"), "{e}");
    // A manifest whose bytes are not its digest is refused.
    let mut lying = m.clone();
    lying.digest = Digest::of(b"other");
    assert!(s.put_manifest("r", &lying, None).await.is_err());
}

#[tokio::test]
async fn tags_move_and_the_layout_is_standard() {
    let dir = tempfile::tempdir().unwrap();
    let s = LayoutStore::open(dir.path()).unwrap();
    let a = push(&s, "app", b"one", "latest").await;
    let b = push(&s, "app", b"two", "latest").await;
    assert_eq!(
        s.get_manifest("app", "latest")
            .await
            .unwrap()
            .unwrap()
            .digest,
        b.digest
    );
    // The older one is still there by digest.
    assert!(
        s.get_manifest("app", a.digest.as_str())
            .await
            .unwrap()
            .is_some()
    );
    assert!(s.get_manifest("app", "nope").await.unwrap().is_none());
    let layout = std::fs::read_to_string(dir.path().join("app/oci-layout")).unwrap();
    assert_eq!(layout, r#"{"imageLayoutVersion":"1.0.0"}"#);
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("app/index.json")).unwrap()).unwrap();
    let tagged: Vec<_> = index["manifests"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["annotations"]["org.opencontainers.image.ref.name"] == "latest")
        .collect();
    assert_eq!(tagged.len(), 1);
    assert_eq!(tagged[0]["digest"], b.digest.as_str());
}

mod modules {
    use std::io::Write;
    use std::path::{Path, PathBuf};

    use nuon_core::artifact::{
        ArtifactError, ArtifactStore, Digest, MANIFEST_MEDIA_TYPE, RawManifest,
    };

    use super::super::LayoutStore;
    use super::super::modulepkg::{MODULE_ARTIFACT_TYPE, push_module, unpack_module};
    use super::{blob, put};

    fn example_module() -> PathBuf {
        std::path::PathBuf::from(
            std::env::var_os("CARGO_MANIFEST_DIR")
                .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into()),
        )
        .join("../examples/apps/hello/src/database")
    }

    fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
        let mut out: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_type().unwrap().is_file())
            .map(|e| {
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        out.sort();
        out
    }

    #[tokio::test]
    async fn modules_package_reproducibly_and_unpack_to_the_same_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = LayoutStore::open(dir.path().join("store")).unwrap();
        let a = push_module(&store, "hello/database", &example_module(), Some("b1"))
            .await
            .unwrap();
        let b = push_module(&store, "hello/database", &example_module(), Some("b2"))
            .await
            .unwrap();
        assert_eq!(a, b, "the same source gives the same digest");
        let m = store
            .get_manifest("hello/database", "b1")
            .await
            .unwrap()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&m.bytes).unwrap();
        assert_eq!(v["artifactType"], MODULE_ARTIFACT_TYPE);
        assert_eq!(v["layers"][0]["mediaType"], "archive/zip");
        assert_eq!(
            v["config"]["mediaType"],
            "application/vnd.oci.empty.v1+json"
        );

        let dest = dir.path().join("work");
        unpack_module(&store, "hello/database", &a, &dest)
            .await
            .unwrap();
        assert_eq!(files(&dest), files(&example_module()));
        // Unpacking again into a used directory is refused.
        assert!(
            unpack_module(&store, "hello/database", &a, &dest)
                .await
                .is_err()
        );

        // Terraform reads the unpacked module.
        if nuon_test_fixtures::have_tool("terraform", "init the unpacked module") {
            let init = std::process::Command::new("terraform")
                .args(["init", "-backend=false", "-input=false"])
                .current_dir(&dest)
                .output()
                .unwrap();
            assert!(
                init.status.success(),
                "{}",
                String::from_utf8_lossy(&init.stderr)
            );
            let validate = std::process::Command::new("terraform")
                .arg("validate")
                .current_dir(&dest)
                .output()
                .unwrap();
            assert!(
                validate.status.success(),
                "{}",
                String::from_utf8_lossy(&validate.stderr)
            );
        } else {
            eprintln!("SKIPPED: terraform is not installed: the unpacked module is not validated");
        }
    }

    #[tokio::test]
    async fn corrupted_or_hostile_packages_are_never_unpacked() {
        let dir = tempfile::tempdir().unwrap();
        let store = LayoutStore::open(dir.path().join("store")).unwrap();
        let d = push_module(&store, "m", &example_module(), None)
            .await
            .unwrap();
        let m = store.get_manifest("m", d.as_str()).await.unwrap().unwrap();
        let v: serde_json::Value = serde_json::from_slice(&m.bytes).unwrap();
        let layer_digest: Digest = v["layers"][0]["digest"].as_str().unwrap().parse().unwrap();
        let path = store.blob_path("m", &layer_digest).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        std::fs::write(&path, bytes).unwrap();
        let dest = dir.path().join("work");
        let e = unpack_module(&store, "m", &d, &dest).await.unwrap_err();
        assert!(matches!(e, ArtifactError::Corrupt(_)), "{e}");
        assert!(e.to_string().contains("not deployed"), "{e}");
        assert!(!dest.exists() || std::fs::read_dir(&dest).unwrap().next().is_none());

        // A zip whose entry climbs out of the module.
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        zip.start_file("../evil.tf", zip::write::SimpleFileOptions::default())
            .unwrap();
        zip.write_all(b"# evil").unwrap();
        let bytes: &'static [u8] = Box::leak(zip.finish().unwrap().into_inner().into_boxed_slice());
        let config = blob("application/vnd.oci.empty.v1+json", b"{}");
        let layer = blob("archive/zip", bytes);
        put(&store, "evil", &config, b"{}").await;
        put(&store, "evil", &layer, bytes).await;
        let mbytes = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": MANIFEST_MEDIA_TYPE,
            "artifactType": MODULE_ARTIFACT_TYPE, "config": config, "layers": [layer],
        }))
        .unwrap();
        let raw = RawManifest {
            digest: Digest::of(&mbytes),
            bytes: mbytes,
            media_type: MANIFEST_MEDIA_TYPE.into(),
        };
        store.put_manifest("evil", &raw, None).await.unwrap();
        let dest = dir.path().join("sandboxed/work");
        let e = unpack_module(&store, "evil", &raw.digest, &dest)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("outside the module"), "{e}");
        assert!(!dir.path().join("sandboxed/evil.tf").exists());

        // Not a module, and links, are refused when packaging.
        let empty = tempfile::tempdir().unwrap();
        std::fs::write(empty.path().join("README.md"), "x").unwrap();
        let e = push_module(&store, "m", empty.path(), None)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("no .tf file"), "{e}");
        std::fs::write(empty.path().join("main.tf"), "").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", empty.path().join("leak.tf")).unwrap();
        let e = push_module(&store, "m", empty.path(), None)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("no links"), "{e}");
    }
}

/// A store whose first upload of each blob fails on I/O, as a dropped
/// connection would.
struct Flaky {
    inner: LayoutStore,
    failed: std::sync::Mutex<std::collections::HashSet<Digest>>,
    attempts: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl ArtifactStore for Flaky {
    async fn has_blob(&self, repo: &str, blob: &Descriptor) -> Result<bool, ArtifactError> {
        self.inner.has_blob(repo, blob).await
    }
    async fn open_blob(
        &self,
        repo: &str,
        blob: &Descriptor,
    ) -> Result<nuon_core::artifact::BlobReader, ArtifactError> {
        self.inner.open_blob(repo, blob).await
    }
    async fn put_blob(
        &self,
        repo: &str,
        blob: &Descriptor,
        reader: nuon_core::artifact::BlobReader,
    ) -> Result<(), ArtifactError> {
        self.attempts
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if self.failed.lock().unwrap().insert(blob.digest.clone()) {
            return Err(ArtifactError::Io {
                what: "uploading".into(),
                source: std::io::Error::new(
                    std::io::ErrorKind::ConnectionReset,
                    "connection reset",
                ),
            });
        }
        self.inner.put_blob(repo, blob, reader).await
    }
    async fn get_manifest(
        &self,
        repo: &str,
        reference: &str,
    ) -> Result<Option<RawManifest>, ArtifactError> {
        self.inner.get_manifest(repo, reference).await
    }
    async fn put_manifest(
        &self,
        repo: &str,
        manifest: &RawManifest,
        tag: Option<&str>,
    ) -> Result<(), ArtifactError> {
        self.inner.put_manifest(repo, manifest, tag).await
    }
}

#[tokio::test]
async fn a_blob_that_fails_on_the_way_is_retried_on_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let src = LayoutStore::open(dir.path().join("src")).unwrap();
    let m = push(&src, "app", b"some layer bytes", "v1").await;
    let dst = Flaky {
        inner: LayoutStore::open(dir.path().join("dst")).unwrap(),
        failed: Default::default(),
        attempts: Default::default(),
    };
    let (d, copied) = copy_artifact(&src, "app", "v1", &dst, "app", None, false)
        .await
        .unwrap();
    assert_eq!((d, copied), (m.digest, 2));
    // Two blobs, each failed once and sent again.
    assert_eq!(dst.attempts.load(std::sync::atomic::Ordering::SeqCst), 4);
}

#[tokio::test]
async fn an_interrupted_upload_resumes_from_what_it_left() {
    let dir = tempfile::tempdir().unwrap();
    let store = LayoutStore::open(dir.path()).unwrap();
    let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    let d = blob("application/octet-stream", &bytes);
    // A copy cut off after 30,000 bytes left them in the partial file.
    let upload = async |from: usize, body: Vec<u8>| {
        store
            .put_blob_from("r", &d, from as u64, Box::pin(std::io::Cursor::new(body)))
            .await
    };
    store.ensure(&store.repo_dir("r").unwrap()).await.unwrap();
    std::fs::write(
        store.partial_path("r", &d.digest).unwrap(),
        &bytes[..30_000],
    )
    .unwrap();
    assert_eq!(store.partial_len("r", &d).await.unwrap(), 30_000);
    upload(30_000, bytes[30_000..].to_vec()).await.unwrap();
    assert!(store.has_blob("r", &d).await.unwrap());
    store.verify_blob("r", &d).await.unwrap();
    assert_eq!(store.partial_len("r", &d).await.unwrap(), 0);

    // A resume whose rest does not make the blob is refused, and the
    // partial bytes are dropped.
    let other: Vec<u8> = bytes.iter().map(|b| b.wrapping_add(1)).collect();
    let d2 = blob("application/octet-stream", &other);
    std::fs::write(store.partial_path("r", &d2.digest).unwrap(), &other[..10]).unwrap();
    let e = store
        .put_blob_from(
            "r",
            &d2,
            10,
            Box::pin(std::io::Cursor::new(bytes[10..].to_vec())),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, ArtifactError::Corrupt(_)), "{e}");
    assert_eq!(store.partial_len("r", &d2).await.unwrap(), 0);
    assert!(!store.has_blob("r", &d2).await.unwrap());
}
