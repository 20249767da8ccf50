//! A loopback Distribution registry and images put into it.

use super::*;

/// A Distribution registry (`docker-registry`, Debian's package) on a
/// loopback port, with its storage in a temporary directory; with
/// `htpasswd`, it wants basic credentials (`USER`, `PASSWORD`).
pub struct Registry {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// `127.0.0.1:PORT`, as skopeo names it.
    pub host: String,
    _tmp: tempfile::TempDir,
}

impl Registry {
    /// Starts one; `None` when `docker-registry` is not installed (said
    /// loudly; a failure under `NUON_TEST_REQUIRE=all`).
    pub fn start(htpasswd: Option<(&str, &str)>) -> Result<Option<Self>> {
        if !have_tool("docker-registry", "run a loopback OCI registry") {
            return Ok(None);
        }
        let tmp = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            tmp.path().join("data").display()
        );
        if let Some((user, password)) = htpasswd {
            anyhow::ensure!(
                have_tool("htpasswd", "write a registry's password file"),
                "htpasswd is missing"
            );
            let out = Command::new("htpasswd")
                .args(["-Bbn", user, password])
                .output()?;
            anyhow::ensure!(out.status.success(), "htpasswd failed");
            std::fs::write(tmp.path().join("htpasswd"), &out.stdout)?;
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: nuon-test\n    path: {}\n",
                tmp.path().join("htpasswd").display()
            ));
        }
        let config_path = tmp.path().join("config.yml");
        std::fs::write(&config_path, config)?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(tmp.path().join("registry.log"))?)
            .spawn()
            .context("start docker-registry")?;
        let host = format!("127.0.0.1:{port}");
        wait_for("the registry to listen", Duration::from_secs(20), || {
            std::net::TcpStream::connect(&host).ok()
        })?;
        Ok(Some(Registry {
            child,
            url: format!("http://{host}"),
            host,
            _tmp: tmp,
        }))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Pseudo-random bytes (xorshift), the same for the same seed: layers
/// that do not compress and do not repeat across fixtures.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Puts an image into `store`/`repo` under `tag`: for each platform, a
/// config and random layers, one per `(size, seed)` (the same seed makes
/// the same layer, to share it between images); with more than one
/// platform, an OCI index of them. Returns the digest the tag names.
pub async fn make_image(
    store: &dyn nuon_core::artifact::ArtifactStore,
    repo: &str,
    tag: &str,
    layers: &[(usize, u64)],
    platforms: &[&str],
) -> Result<nuon_core::artifact::Digest> {
    use nuon_core::artifact::{
        Descriptor, Digest, INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, RawManifest,
    };
    let put = |bytes: Vec<u8>, media_type: &str| {
        let d = Descriptor {
            media_type: media_type.into(),
            digest: Digest::of(&bytes),
            size: bytes.len() as u64,
            annotations: Default::default(),
        };
        async move {
            store
                .put_blob(repo, &d, Box::pin(std::io::Cursor::new(bytes)))
                .await?;
            Ok::<_, anyhow::Error>(d)
        }
    };
    let mut children = Vec::new();
    for (p, platform) in platforms.iter().enumerate() {
        let (os, arch) = platform.split_once('/').unwrap_or(("linux", platform));
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": arch, "os": os, "rootfs": {"type": "layers", "diff_ids": []},
            "config": {"Labels": {"nuon.test/tag": tag}},
        }))?;
        let config = put(config, "application/vnd.oci.image.config.v1+json").await?;
        let mut descs = Vec::new();
        for (size, seed) in layers {
            let bytes = random_bytes(*size, seed ^ ((p as u64) << 32));
            descs.push(put(bytes, "application/vnd.oci.image.layer.v1.tar").await?);
        }
        let bytes = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": MANIFEST_MEDIA_TYPE,
            "config": config, "layers": descs,
        }))?;
        let m = RawManifest {
            digest: Digest::of(&bytes),
            bytes,
            media_type: MANIFEST_MEDIA_TYPE.into(),
        };
        let single = platforms.len() == 1;
        store.put_manifest(repo, &m, single.then_some(tag)).await?;
        if single {
            return Ok(m.digest);
        }
        children.push(serde_json::json!({
            "mediaType": MANIFEST_MEDIA_TYPE, "digest": m.digest, "size": m.bytes.len(),
            "platform": {"os": os, "architecture": arch},
        }));
    }
    let bytes = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": children,
    }))?;
    let index = RawManifest {
        digest: Digest::of(&bytes),
        bytes,
        media_type: INDEX_MEDIA_TYPE.into(),
    };
    store.put_manifest(repo, &index, Some(tag)).await?;
    Ok(index.digest)
}
