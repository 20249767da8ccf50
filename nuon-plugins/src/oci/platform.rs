//! The platform's own images (`nuon images platform`): `nuon-ctl` and
//! `nuon-runner`, each its binary on a minimal base made of exactly what
//! the binary links (its dynamic loader and shared libraries, as `ldd`
//! finds them on the machine that built it; nothing for a static binary),
//! a non-root user, OCI labels and an SPDX SBOM of every file, pushed as
//! an image index (one platform per index entry).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use nuon_core::artifact::{ArtifactError, ArtifactStore, Digest, INDEX_MEDIA_TYPE, RawManifest};
use sha2::{Digest as _, Sha256};

use super::build::{
    BUSYBOX_APPLETS, ContainerConfig, ToolFile, build_layer, go_arch, push_image_with,
};

/// The user the platform's images run as (distroless's `nonroot`).
pub const NONROOT: u32 = 65532;
/// Where an image keeps its SBOM (also named by the `dev.nuon.sbom` label).
pub const SBOM_PATH: &str = "usr/share/doc/nuon/sbom.spdx.json";

/// One image of the platform.
#[derive(Debug, Clone)]
pub struct PlatformImage {
    /// The repository's last part and the binary's name: `nuon-ctl`.
    pub name: String,
    /// The binary.
    pub binary: PathBuf,
    /// What it says it is (the `description` label).
    pub description: String,
    /// The ports it listens on by default.
    pub ports: Vec<u16>,
    /// Its default arguments.
    pub cmd: Vec<String>,
    /// A static busybox for a shell (the runner's jobs run commands).
    pub busybox: Option<PathBuf>,
}

/// What was pushed for one image.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PushedImage {
    /// `PREFIX/NAME`.
    pub repository: String,
    /// The tag.
    pub tag: String,
    /// The index's digest (what the tag names).
    pub index: Digest,
    /// The platform's manifest.
    pub manifest: Digest,
    /// `linux/amd64`.
    pub platform: String,
    /// The entries of its layer: directories, files and links.
    pub files: usize,
}

/// The shared libraries `binary` needs, as `(path in the image, file on
/// this machine)`: the loader at the path the binary asks for, each
/// library where the loader found it. Empty for a static binary.
pub fn shared_libraries(binary: &Path) -> Result<Vec<(String, PathBuf)>, ArtifactError> {
    let out = std::process::Command::new("ldd")
        .arg(binary)
        .output()
        .map_err(|e| ArtifactError::Io {
            what: "cannot run ldd (glibc's libc-bin) to find what the binary links".into(),
            source: e,
        })?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        if text.contains("statically linked") || said.contains("not a dynamic executable") {
            return Ok(Vec::new());
        }
        return Err(ArtifactError::Invalid(format!(
            "ldd {}: {}",
            binary.display(),
            said.trim()
        )));
    }
    parse_ldd(&text).map_err(|e| ArtifactError::Invalid(format!("{}: {e}", binary.display())))
}

/// `ldd`'s lines: `NAME => PATH (ADDR)`, `PATH (ADDR)` for the loader,
/// `linux-vdso.so.1 (ADDR)` (in the kernel, not a file).
fn parse_ldd(text: &str) -> Result<Vec<(String, PathBuf)>, String> {
    let mut libs = Vec::new();
    for line in text.lines().map(str::trim) {
        let path = match line.split_once("=>") {
            Some((name, rest)) => {
                let path = rest.trim().split(" (").next().unwrap_or_default().trim();
                if path == "not found" || path.is_empty() {
                    return Err(format!(
                        "needs {}, which this machine does not have",
                        name.trim()
                    ));
                }
                path
            }
            None if line.starts_with('/') => line.split(" (").next().unwrap_or_default(),
            None => continue,
        };
        libs.push((path.trim_start_matches('/').to_owned(), PathBuf::from(path)));
    }
    Ok(libs)
}

fn sha256_of(path: &Path) -> Result<String, ArtifactError> {
    let bytes = std::fs::read(path).map_err(|e| ArtifactError::Io {
        what: format!("cannot read {}", path.display()),
        source: e,
    })?;
    Ok(hex::encode(Sha256::digest(&bytes)))
}

/// Every directory above `path`, outermost first.
fn parents(path: &str) -> impl Iterator<Item = String> + '_ {
    path.match_indices('/')
        .map(move |(i, _)| path[..i].to_owned())
}

/// The files of `image`'s one layer, its SBOM (SPDX 2.3 JSON) among them.
fn files_of(image: &PlatformImage, version: &str) -> Result<Vec<ToolFile>, ArtifactError> {
    let bin_path = format!("usr/local/bin/{}", image.name);
    let mut copies: BTreeMap<String, PathBuf> = BTreeMap::new();
    copies.insert(bin_path.clone(), image.binary.clone());
    for (at, from) in shared_libraries(&image.binary)? {
        copies.insert(at, from);
    }
    if let Some(busybox) = &image.busybox {
        copies.insert("bin/busybox".into(), busybox.clone());
    }
    // The roots Go tools (Terraform, Helm) check TLS against.
    let bundle = Path::new("/etc/ssl/certs/ca-certificates.crt");
    if bundle.is_file() {
        copies.insert(
            "etc/ssl/certs/ca-certificates.crt".into(),
            bundle.to_owned(),
        );
    }
    let passwd = format!(
        "root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:{NONROOT}:{NONROOT}:nonroot:/home/nonroot:/sbin/nologin\n"
    );
    let group = format!("root:x:0:\nnonroot:x:{NONROOT}:\n");
    let mut data: BTreeMap<String, (Vec<u8>, u32)> = BTreeMap::new();
    data.insert("etc/passwd".into(), (passwd.into_bytes(), 0o644));
    data.insert("etc/group".into(), (group.into_bytes(), 0o644));

    let mut packages = Vec::new();
    for (at, from) in &copies {
        let name = at.rsplit('/').next().unwrap_or(at);
        packages.push(serde_json::json!({
            "SPDXID": format!(
                "SPDXRef-File-{}",
                at.replace(|c: char| !c.is_ascii_alphanumeric() && c != '.', "-")
            ),
            "name": name,
            "versionInfo": if *at == bin_path { version } else { "" },
            "downloadLocation": "NOASSERTION",
            "filesAnalyzed": false,
            "checksums": [{"algorithm": "SHA256", "checksumValue": sha256_of(from)?}],
            "comment": format!("/{at}"),
        }));
    }
    let sbom = serde_json::json!({
        "spdxVersion": "SPDX-2.3",
        "dataLicense": "CC0-1.0",
        "SPDXID": "SPDXRef-DOCUMENT",
        "name": format!("{}-{version}", image.name),
        "documentNamespace": format!("urn:nuon:sbom:{}:{version}", image.name),
        "creationInfo": {"created": "1970-01-01T00:00:00Z", "creators": ["Tool: nuon images platform"]},
        "packages": packages,
    });
    let sbom_bytes = serde_json::to_vec_pretty(&sbom)
        .map_err(|e| ArtifactError::Invalid(format!("cannot write the SBOM: {e}")))?;
    data.insert(SBOM_PATH.into(), (sbom_bytes, 0o644));

    let mut dirs: BTreeSet<String> = ["tmp"].map(String::from).into();
    for path in copies.keys().chain(data.keys()) {
        dirs.extend(parents(path));
    }
    dirs.extend(parents("home/nonroot"));
    let mut files: Vec<ToolFile> = dirs
        .into_iter()
        .map(|path| {
            let mode = match path.as_str() {
                "tmp" => 0o1777,
                _ => 0o755,
            };
            ToolFile::Dir { path, mode }
        })
        .collect();
    // HOME, the user's own (Helm and kubectl keep caches there).
    files.push(ToolFile::OwnedDir {
        path: "home/nonroot".into(),
        mode: 0o700,
        owner: NONROOT,
    });
    files.extend(
        copies
            .into_iter()
            .map(|(path, from)| ToolFile::Copy { path, from }),
    );
    files.extend(
        data.into_iter()
            .map(|(path, (bytes, mode))| ToolFile::Data { path, bytes, mode }),
    );
    if image.busybox.is_some() {
        files.extend(BUSYBOX_APPLETS.iter().map(|applet| ToolFile::Link {
            path: format!("bin/{applet}"),
            target: "busybox".into(),
        }));
    }
    Ok(files)
}

/// Builds `image` for this machine's platform and pushes it to
/// `store`/`repository` as an index tagged `tag`.
pub async fn push_platform_image(
    store: &dyn ArtifactStore,
    repository: &str,
    tag: &str,
    version: &str,
    image: &PlatformImage,
) -> Result<PushedImage, ArtifactError> {
    let files = files_of(image, version)?;
    let count = files.len();
    let layer = tokio::task::spawn_blocking(move || build_layer(&files))
        .await
        .map_err(|e| ArtifactError::Invalid(format!("building the layer failed: {e}")))??;
    let labels: BTreeMap<String, String> = [
        ("org.opencontainers.image.title", image.name.clone()),
        (
            "org.opencontainers.image.description",
            image.description.clone(),
        ),
        ("org.opencontainers.image.version", version.to_owned()),
        ("org.opencontainers.image.licenses", "Apache-2.0".to_owned()),
        ("dev.nuon.sbom", format!("/{SBOM_PATH}")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let config = ContainerConfig {
        env: vec!["PATH=/usr/local/bin:/usr/bin:/bin".into()],
        labels,
        user: format!("{NONROOT}:{NONROOT}"),
        entrypoint: vec![format!("/usr/local/bin/{}", image.name)],
        cmd: image.cmd.clone(),
        exposed_ports: (image.ports.iter())
            .map(|p| (format!("{p}/tcp"), serde_json::json!({})))
            .collect(),
    };
    let (manifest, size) = push_image_with(store, repository, None, vec![layer], config).await?;
    let index = serde_json::json!({
        "schemaVersion": 2,
        "mediaType": INDEX_MEDIA_TYPE,
        "manifests": [{
            "mediaType": nuon_core::artifact::MANIFEST_MEDIA_TYPE,
            "digest": manifest.to_string(),
            "size": size,
            "platform": {"architecture": go_arch(), "os": "linux"},
        }],
        "annotations": {"org.opencontainers.image.version": version},
    });
    let bytes = serde_json::to_vec(&index)
        .map_err(|e| ArtifactError::Invalid(format!("cannot encode the index: {e}")))?;
    let raw = RawManifest {
        digest: Digest::of(&bytes),
        bytes,
        media_type: INDEX_MEDIA_TYPE.into(),
    };
    store.put_manifest(repository, &raw, Some(tag)).await?;
    Ok(PushedImage {
        repository: repository.to_owned(),
        tag: tag.to_owned(),
        index: raw.digest,
        manifest,
        platform: format!("linux/{}", go_arch()),
        files: count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_lines_name_the_loader_and_each_library_where_it_was_found() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibgcc_s.so.1 => /lib/x86_64-linux-gnu/libgcc_s.so.1 (0x00007f)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f)\n";
        let libs = parse_ldd(text).unwrap();
        let at: Vec<&str> = libs.iter().map(|(a, _)| a.as_str()).collect();
        assert_eq!(
            at,
            [
                "lib/x86_64-linux-gnu/libgcc_s.so.1",
                "lib/x86_64-linux-gnu/libc.so.6",
                "lib64/ld-linux-x86-64.so.2"
            ]
        );
        let missing = parse_ldd("\tlibssl.so.3 => not found\n").unwrap_err();
        assert!(missing.contains("needs libssl.so.3"), "{missing}");
        assert_eq!(
            parents("a/b/c").collect::<Vec<_>>(),
            ["a".to_owned(), "a/b".to_owned()]
        );
    }
}
