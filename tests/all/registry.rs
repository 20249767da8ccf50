//! "Real registries": the registry store against Debian's `docker-registry`
//! on loopback, read back by an independent client (`skopeo`).

use std::path::Path;
use std::process::Command;

use nuon_core::artifact::{ArtifactError, ArtifactStore, Descriptor, Digest};
use nuon_plugins::oci::LayoutStore;
use nuon_plugins::oci::copy_artifact;
use nuon_plugins::oci::modulepkg::{push_module, unpack_module};
use nuon_plugins::oci::registry::{RegistryConfig, RegistryStore};
use nuon_tests::{Registry, have_tool, rt};

const MODULE: &str = "resource \"terraform_data\" \"x\" {\n  input = \"x\"\n}\n";

/// A Terraform module package in a layout store: (store, its digest).
fn module_in_layout(dir: &Path) -> (LayoutStore, Digest) {
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("main.tf"), MODULE).unwrap();
    let store = LayoutStore::open(dir.join("layout")).unwrap();
    let digest = rt()
        .block_on(push_module(&store, "app/db", &src, Some("v1")))
        .unwrap();
    (store, digest)
}

fn skopeo(args: &[&str]) -> std::process::Output {
    Command::new("skopeo").args(args).output().unwrap()
}

#[test]
fn a_module_pushed_to_a_registry_and_synced_to_another_keeps_its_bytes() {
    let Some(a) = Registry::start(None).unwrap() else {
        return;
    };
    let b = Registry::start(None).unwrap().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let (layout, digest) = module_in_layout(tmp.path());
    let ra = RegistryStore::new(&RegistryConfig::new(&a.url)).unwrap();
    let rb = RegistryStore::new(&RegistryConfig::new(&b.url)).unwrap();

    // Push: the build runner's store to the vendor registry.
    let (d, copied) = rt()
        .block_on(copy_artifact(
            &layout,
            "app/db",
            "v1",
            &ra,
            "app/db",
            Some("v1"),
            false,
        ))
        .unwrap();
    assert_eq!((d.clone(), copied), (digest.clone(), 2));
    let raw = rt()
        .block_on(layout.get_manifest("app/db", digest.as_str()))
        .unwrap()
        .unwrap();

    // An independent client reads exactly the bytes we wrote.
    if have_tool("skopeo", "check the registry with an independent client") {
        let out = skopeo(&[
            "inspect",
            "--raw",
            "--tls-verify=false",
            &format!("docker://{}/app/db@{digest}", a.host),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            out.stdout, raw.bytes,
            "skopeo reads the manifest bytes we pushed"
        );
        let out = skopeo(&[
            "inspect",
            "--raw",
            "--tls-verify=false",
            &format!("docker://{}/app/db:v1", a.host),
        ]);
        assert_eq!(out.stdout, raw.bytes, "the tag names the same manifest");
    }

    // Sync into a second registry by digest: same digest, every blob.
    let (d2, copied) = rt()
        .block_on(copy_artifact(
            &ra,
            "app/db",
            digest.as_str(),
            &rb,
            "app/db",
            None,
            false,
        ))
        .unwrap();
    assert_eq!((d2, copied), (digest.clone(), 2));
    let got = rt()
        .block_on(rb.get_manifest("app/db", digest.as_str()))
        .unwrap()
        .unwrap();
    assert_eq!(got.bytes, raw.bytes);
    assert_eq!(got.media_type, "application/vnd.oci.image.manifest.v1+json");

    // A warm sync transfers no blob.
    let (_, copied) = rt()
        .block_on(copy_artifact(
            &ra,
            "app/db",
            digest.as_str(),
            &rb,
            "app/db",
            None,
            false,
        ))
        .unwrap();
    assert_eq!(copied, 0);

    // What the second registry holds unpacks to the module, by digest.
    let out_dir = tmp.path().join("unpacked");
    rt().block_on(unpack_module(&rb, "app/db", &digest, &out_dir))
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(out_dir.join("main.tf")).unwrap(),
        MODULE
    );
    if have_tool(
        "skopeo",
        "copy from the registry with an independent client",
    ) {
        let dest = tmp.path().join("skopeo-layout");
        let out = skopeo(&[
            "copy",
            "--src-tls-verify=false",
            &format!("docker://{}/app/db@{digest}", b.host),
            &format!("oci:{}:v1", dest.display()),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // Bytes that do not match their digest are refused, and nothing is kept.
    let fake = Descriptor {
        media_type: "application/octet-stream".into(),
        digest: Digest::of(b"the real bytes"),
        size: 14,
        annotations: Default::default(),
    };
    let e = rt()
        .block_on(ra.put_blob("app/db", &fake, Box::pin(&b"the fake bytes"[..])))
        .unwrap_err();
    assert!(matches!(e, ArtifactError::Corrupt(_)), "{e}");
    assert!(!rt().block_on(ra.has_blob("app/db", &fake)).unwrap());
    // A missing manifest is None, a missing blob NotFound.
    assert!(
        rt().block_on(ra.get_manifest("app/db", "nope"))
            .unwrap()
            .is_none()
    );
    let e = rt().block_on(ra.open_blob("app/db", &fake)).err().unwrap();
    assert!(matches!(e, ArtifactError::NotFound(_)), "{e}");
}

#[test]
fn a_registry_with_basic_auth_works_with_credentials_and_says_so_without() {
    let Some(r) = Registry::start(Some(("vendor", "s3cret-pass"))).unwrap() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let (layout, digest) = module_in_layout(tmp.path());
    let copy = |store: &RegistryStore| {
        rt().block_on(copy_artifact(
            &layout,
            "app/db",
            "v1",
            store,
            "app/db",
            Some("v1"),
            false,
        ))
    };

    let anonymous = RegistryStore::new(&RegistryConfig::new(&r.url)).unwrap();
    let e = copy(&anonymous).unwrap_err().to_string();
    assert!(e.contains("needs credentials"), "{e}");

    let mut wrong = RegistryConfig::new(&r.url);
    wrong.username = Some("vendor".into());
    wrong.password = Some("nope".into());
    let e = copy(&RegistryStore::new(&wrong).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("refused the credentials"), "{e}");

    // The credentials of a docker config.json.
    use base64::Engine as _;
    let config = tmp.path().join("config.json");
    std::fs::write(
        &config,
        serde_json::json!({"auths": {&r.host: {
            "auth": base64::engine::general_purpose::STANDARD.encode("vendor:s3cret-pass")
        }}})
        .to_string(),
    )
    .unwrap();
    let good = RegistryConfig::new(&r.url)
        .with_docker_config(&config)
        .unwrap();
    let store = RegistryStore::new(&good).unwrap();
    let (d, copied) = copy(&store).unwrap();
    assert_eq!((d, copied), (digest.clone(), 2));
    assert!(
        rt().block_on(store.get_manifest("app/db", "v1"))
            .unwrap()
            .is_some()
    );
}

#[test]
fn registry_urls_are_checked() {
    for (url, says) in [
        ("registry.example", "no scheme"),
        ("http://registry.example", "non-loopback"),
        ("ftp://127.0.0.1:5000", "not http or https"),
    ] {
        let e = RegistryStore::new(&RegistryConfig::new(url))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(says), "{url}: {e}");
    }
}

#[test]
fn an_image_index_is_copied_with_every_platform_and_its_bytes() {
    let Some(a) = Registry::start(None).unwrap() else {
        return;
    };
    let b = Registry::start(None).unwrap().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let layout = LayoutStore::open(tmp.path().join("layout")).unwrap();
    let index = rt()
        .block_on(nuon_tests::make_image(
            &layout,
            "img/app",
            "1.0",
            &[(1 << 20, 7), (3 << 20, 8)],
            &["linux/amd64", "linux/arm64"],
        ))
        .unwrap();
    let ra = RegistryStore::new(&RegistryConfig::new(&a.url)).unwrap();
    let rb = RegistryStore::new(&RegistryConfig::new(&b.url)).unwrap();
    let opts = nuon_plugins::oci::CopyOptions::default();
    let r = rt()
        .block_on(nuon_plugins::oci::copy(
            &layout,
            "img/app",
            "1.0",
            &ra,
            "img/app",
            Some("1.0"),
            &opts,
        ))
        .unwrap();
    assert_eq!(r.digest, index);
    // Two platforms: two configs and four layers; two manifests and the index.
    assert_eq!((r.blobs_copied, r.manifests_written), (6, 3));
    // 8 MiB of layers, and two small configs.
    assert!(
        (8 << 20..(8 << 20) + 4096).contains(&r.bytes_copied),
        "{r:?}"
    );
    let r = rt()
        .block_on(nuon_plugins::oci::copy(
            &ra,
            "img/app",
            "1.0",
            &rb,
            "mirror/app",
            Some("1.0"),
            &opts,
        ))
        .unwrap();
    assert_eq!((r.digest.clone(), r.blobs_copied), (index.clone(), 6));
    let raw = rt()
        .block_on(layout.get_manifest("img/app", index.as_str()))
        .unwrap()
        .unwrap();
    let got = rt()
        .block_on(rb.get_manifest("mirror/app", "1.0"))
        .unwrap()
        .unwrap();
    assert_eq!(got.bytes, raw.bytes, "the index's bytes are kept");
    // Into another repository of the same registry: mounted, not sent.
    let locations = std::sync::Arc::new(nuon_plugins::oci::BlobLocations::default());
    let with_mounts = nuon_plugins::oci::CopyOptions {
        locations: Some(locations),
        ..nuon_plugins::oci::CopyOptions::default()
    };
    let r = rt()
        .block_on(nuon_plugins::oci::copy(
            &ra,
            "img/app",
            "1.0",
            &rb,
            "mirror/app",
            Some("1.0"),
            &with_mounts,
        ))
        .unwrap();
    assert_eq!(r.blobs_copied, 0, "already there: {r:?}");
    let r = rt()
        .block_on(nuon_plugins::oci::copy(
            &ra,
            "img/app",
            "1.0",
            &rb,
            "second/app",
            Some("1.0"),
            &with_mounts,
        ))
        .unwrap();
    assert_eq!(
        (r.blobs_copied, r.blobs_mounted, r.bytes_copied),
        (0, 6, 0),
        "{r:?}"
    );

    // Warm: nothing is sent.
    let r = rt()
        .block_on(nuon_plugins::oci::copy(
            &ra,
            "img/app",
            "1.0",
            &rb,
            "mirror/app",
            Some("1.0"),
            &opts,
        ))
        .unwrap();
    assert_eq!((r.blobs_copied, r.manifests_written), (0, 0));
    if have_tool("skopeo", "check the index with an independent client") {
        let out = skopeo(&[
            "inspect",
            "--raw",
            "--tls-verify=false",
            &format!("docker://{}/mirror/app:1.0", b.host),
        ]);
        assert_eq!(out.stdout, raw.bytes);
        let dest = tmp.path().join("skopeo");
        let out = skopeo(&[
            "copy",
            "--all",
            "--src-tls-verify=false",
            &format!("docker://{}/mirror/app:1.0", b.host),
            &format!("oci:{}:x", dest.display()),
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn large_blobs_go_up_in_chunks() {
    let Some(r) = Registry::start(None).unwrap() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let layout = LayoutStore::open(tmp.path().join("layout")).unwrap();
    let digest = rt()
        .block_on(nuon_tests::make_image(
            &layout,
            "big/app",
            "1",
            &[(3 << 20, 5), (100 << 10, 6)],
            &["linux/amd64"],
        ))
        .unwrap();
    let mut config = RegistryConfig::new(&r.url);
    config.chunk_threshold = Some(1 << 20);
    config.chunk_size = Some(256 << 10);
    let store = RegistryStore::new(&config).unwrap();
    let (d, copied) = rt()
        .block_on(copy_artifact(
            &layout,
            "big/app",
            "1",
            &store,
            "big/app",
            Some("1"),
            false,
        ))
        .unwrap();
    assert_eq!((d.clone(), copied), (digest.clone(), 3));
    // Read back whole, every byte checked against its digest.
    let again = LayoutStore::open(tmp.path().join("again")).unwrap();
    let (d2, _) = rt()
        .block_on(copy_artifact(
            &store, "big/app", "1", &again, "big/app", None, false,
        ))
        .unwrap();
    assert_eq!(d2, digest);
}
