//! Building images: reproducible layers of host files, and their
//! manifests pushed to a store (tool images for jobs in containers, and
//! the platform's own images).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use nuon_core::artifact::{ArtifactError, ArtifactStore, Descriptor, Digest};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

/// The media type of an image's config.
pub const IMAGE_CONFIG_MEDIA_TYPE: &str = "application/vnd.oci.image.config.v1+json";
/// A gzip-compressed layer.
pub const LAYER_TAR_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
/// The label a tool image names its tool with.
pub const TOOL_LABEL: &str = "dev.nuon.tool";

/// The parts of an image config a job's container needs.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ImageConfig {
    /// `amd64`, `arm64`, ...
    #[serde(default)]
    pub architecture: String,
    /// `linux`.
    #[serde(default)]
    pub os: String,
    /// What a container of it starts with.
    #[serde(default)]
    pub config: ContainerConfig,
    /// The uncompressed digests of the layers, in order.
    #[serde(default)]
    pub rootfs: RootFs,
}

/// The container defaults of an image.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ContainerConfig {
    /// `KEY=VALUE` pairs.
    #[serde(default, rename = "Env", skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// Labels.
    #[serde(default, rename = "Labels", skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// The user its processes run as (`UID:GID`; empty: root).
    #[serde(default, rename = "User", skip_serializing_if = "String::is_empty")]
    pub user: String,
    /// The program a container of it runs.
    #[serde(default, rename = "Entrypoint", skip_serializing_if = "Vec::is_empty")]
    pub entrypoint: Vec<String>,
    /// The program's default arguments.
    #[serde(default, rename = "Cmd", skip_serializing_if = "Vec::is_empty")]
    pub cmd: Vec<String>,
    /// The ports it listens on (`7400/tcp`: `{}`).
    #[serde(
        default,
        rename = "ExposedPorts",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub exposed_ports: BTreeMap<String, serde_json::Value>,
}

/// The layers' uncompressed digests.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RootFs {
    /// Always `layers`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// One per layer.
    #[serde(default)]
    pub diff_ids: Vec<Digest>,
}

pub(super) fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> ArtifactError {
    let what = what.into();
    move |source| ArtifactError::Io { what, source }
}

/// A file to put into a tool image.
#[derive(Debug, Clone)]
pub enum ToolFile {
    /// A file copied from the host.
    Copy {
        /// Its path in the image (no leading `/`).
        path: String,
        /// The host file.
        from: PathBuf,
    },
    /// A symbolic link.
    Link {
        /// Its path in the image.
        path: String,
        /// What it points to.
        target: String,
    },
    /// A file of the given bytes.
    Data {
        /// Its path in the image.
        path: String,
        /// What it holds.
        bytes: Vec<u8>,
        /// Its mode.
        mode: u32,
    },
    /// A directory owned by `owner` (user and group).
    OwnedDir {
        /// Its path in the image.
        path: String,
        /// Its mode.
        mode: u32,
        /// Its user and group id.
        owner: u32,
    },
    /// A directory.
    Dir {
        /// Its path in the image.
        path: String,
        /// Its mode.
        mode: u32,
    },
}

/// The busybox applets a tool image links, for the shells and helpers
/// tools and actions expect.
pub const BUSYBOX_APPLETS: &[&str] = &[
    "sh", "cat", "cp", "echo", "env", "grep", "head", "id", "ls", "mkdir", "mv", "ps", "rm", "sed",
    "sleep", "tail", "test", "touch", "tr", "true", "false", "wc", "wget", "nc", "dd", "find",
    "sort", "uname", "date", "hostname", "kill", "printf", "yes", "seq", "ln", "readlink",
];

/// The files of a minimal tool image: busybox at `/bin/busybox` with its
/// applets linked, `/tmp`, `/etc`, and each `(name, host file)` tool at
/// `/usr/local/bin/NAME`.
pub fn tool_image_files(busybox: &Path, tools: &[(String, PathBuf)]) -> Vec<ToolFile> {
    let mut files = vec![
        ToolFile::Dir {
            path: "bin".into(),
            mode: 0o755,
        },
        ToolFile::Copy {
            path: "bin/busybox".into(),
            from: busybox.to_owned(),
        },
    ];
    for applet in BUSYBOX_APPLETS {
        files.push(ToolFile::Link {
            path: format!("bin/{applet}"),
            target: "busybox".into(),
        });
    }
    for (path, mode) in [
        ("etc", 0o755),
        ("tmp", 0o1777),
        ("usr", 0o755),
        ("usr/local", 0o755),
        ("usr/local/bin", 0o755),
    ] {
        files.push(ToolFile::Dir {
            path: path.into(),
            mode,
        });
    }
    for (name, from) in tools {
        files.push(ToolFile::Copy {
            path: format!("usr/local/bin/{name}"),
            from: from.clone(),
        });
    }
    files
}

/// Writes `files` as one reproducible layer (owner root, time 0):
/// `(gzip bytes, uncompressed digest)`.
pub fn build_layer(files: &[ToolFile]) -> Result<(Vec<u8>, Digest), ArtifactError> {
    struct Hashing<W> {
        inner: W,
        hash: Sha256,
    }
    impl<W: Write> Write for Hashing<W> {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            let n = self.inner.write(buf)?;
            self.hash.update(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            self.inner.flush()
        }
    }
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut tar = tar::Builder::new(Hashing {
        inner: gz,
        hash: Sha256::new(),
    });
    tar.mode(tar::HeaderMode::Deterministic);
    let fail = io_err("cannot write the image layer");
    let mut result = Ok(());
    for f in files {
        let mut h = tar::Header::new_ustar();
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        let r = match f {
            ToolFile::Dir { path, mode } => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(*mode);
                h.set_size(0);
                tar.append_data(&mut h, format!("{path}/"), io::empty())
            }
            ToolFile::Link { path, target } => {
                h.set_entry_type(tar::EntryType::Symlink);
                h.set_mode(0o777);
                h.set_size(0);
                tar.append_link(&mut h, path, target)
            }
            ToolFile::OwnedDir { path, mode, owner } => {
                h.set_entry_type(tar::EntryType::Directory);
                h.set_mode(*mode);
                h.set_uid((*owner).into());
                h.set_gid((*owner).into());
                h.set_size(0);
                tar.append_data(&mut h, format!("{path}/"), io::empty())
            }
            ToolFile::Data { path, bytes, mode } => {
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(*mode);
                h.set_size(bytes.len() as u64);
                tar.append_data(&mut h, path, bytes.as_slice())
            }
            ToolFile::Copy { path, from } => {
                let file = std::fs::File::open(from).map_err(io_err(format!(
                    "cannot read {} for the image",
                    from.display()
                )))?;
                let meta = file
                    .metadata()
                    .map_err(io_err(format!("cannot read {}", from.display())))?;
                use std::os::unix::fs::PermissionsExt;
                h.set_entry_type(tar::EntryType::Regular);
                h.set_mode(if meta.permissions().mode() & 0o111 != 0 {
                    0o755
                } else {
                    0o644
                });
                h.set_size(meta.len());
                tar.append_data(&mut h, path, file)
            }
        };
        if let Err(e) = r {
            result = Err(e);
            break;
        }
    }
    result.map_err(io_err("cannot write the image layer"))?;
    let hashing = tar
        .into_inner()
        .map_err(io_err("cannot finish the image layer"))?;
    let diff_id = Digest::from_sha256(hashing.hash.finalize().into());
    let gz = hashing.inner.finish().map_err(fail)?;
    Ok((gz, diff_id))
}

/// Pushes an image of one layer per entry of `layers` (each
/// `(gzip bytes, uncompressed digest)`) with `env` and `labels` to
/// `store`/`repo`, tagged `tag`: the manifest's digest.
pub async fn push_image(
    store: &dyn ArtifactStore,
    repo: &str,
    tag: Option<&str>,
    layers: Vec<(Vec<u8>, Digest)>,
    env: Vec<String>,
    labels: BTreeMap<String, String>,
) -> Result<Digest, ArtifactError> {
    let config = ContainerConfig {
        env,
        labels,
        ..ContainerConfig::default()
    };
    Ok(push_image_with(store, repo, tag, layers, config).await?.0)
}

/// [`push_image`] with a whole container config: the manifest's digest
/// and size.
pub async fn push_image_with(
    store: &dyn ArtifactStore,
    repo: &str,
    tag: Option<&str>,
    layers: Vec<(Vec<u8>, Digest)>,
    container: ContainerConfig,
) -> Result<(Digest, u64), ArtifactError> {
    let config = ImageConfig {
        architecture: go_arch().into(),
        os: "linux".into(),
        config: container,
        rootfs: RootFs {
            kind: "layers".into(),
            diff_ids: layers.iter().map(|(_, d)| d.clone()).collect(),
        },
    };
    let config_bytes = serde_json::to_vec(&config)
        .map_err(|e| ArtifactError::Invalid(format!("cannot encode the image config: {e}")))?;
    let blob = |bytes: &[u8], media_type: &str| Descriptor {
        media_type: media_type.into(),
        digest: Digest::of(bytes),
        size: bytes.len() as u64,
        annotations: BTreeMap::new(),
    };
    let config_desc = blob(&config_bytes, IMAGE_CONFIG_MEDIA_TYPE);
    let mut descs = Vec::new();
    for (gz, _) in layers {
        let d = blob(&gz, LAYER_TAR_GZIP);
        if !store.has_blob(repo, &d).await? {
            store
                .put_blob(repo, &d, Box::pin(std::io::Cursor::new(gz)))
                .await?;
        }
        descs.push(d);
    }
    if !store.has_blob(repo, &config_desc).await? {
        store
            .put_blob(
                repo,
                &config_desc,
                Box::pin(std::io::Cursor::new(config_bytes)),
            )
            .await?;
    }
    let raw = super::image_manifest(None, config_desc, descs)?;
    store.put_manifest(repo, &raw, tag).await?;
    Ok((raw.digest, raw.bytes.len() as u64))
}

/// Builds and pushes a minimal tool image: busybox and each `(name, host
/// binary)` at `/usr/local/bin/NAME`, labelled with the first tool's name.
pub async fn push_tool_image(
    store: &dyn ArtifactStore,
    repo: &str,
    tag: &str,
    busybox: &Path,
    tools: &[(String, PathBuf)],
) -> Result<Digest, ArtifactError> {
    let files = tool_image_files(busybox, tools);
    let layer = tokio::task::spawn_blocking(move || build_layer(&files))
        .await
        .map_err(|e| ArtifactError::Invalid(format!("building the layer failed: {e}")))??;
    let mut labels = BTreeMap::new();
    if let Some((name, _)) = tools.first() {
        labels.insert(TOOL_LABEL.to_owned(), name.clone());
    }
    push_image(
        store,
        repo,
        Some(tag),
        vec![layer],
        vec!["PATH=/usr/local/bin:/usr/bin:/bin".into()],
        labels,
    )
    .await
}

/// Go's name of this machine's architecture, as image configs spell it.
pub(super) fn go_arch() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}
