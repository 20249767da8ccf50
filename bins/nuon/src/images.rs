//! `nuon images tool`: host binaries packaged as a minimal tool image
//! (busybox and the tools) for jobs that run in containers
//! (`nuon-runner run --isolation container`), for customers with no route
//! to a public registry and for the tests. `nuon images platform`: the
//! control plane's and the runner's images, built by our OCI code.

use std::path::{Path, PathBuf};

use clap::Subcommand;
use nuon_core::ImageRef;

use crate::output::{emit_with, for_machines, for_people};
use crate::{CliError, Global};

#[derive(Debug, Subcommand)]
pub(crate) enum ImagesCommand {
    /// Package host binaries into a minimal tool image (a static busybox
    /// and each tool at /usr/local/bin/NAME; busybox alone when no tool is
    /// named) in a store; prints
    /// REPOSITORY@DIGEST, the image a job or `nuon-runner run --job-image`
    /// names.
    Tool {
        /// A Terraform (or OpenTofu) binary, at /usr/local/bin/terraform.
        #[arg(long)]
        terraform_binary: Option<PathBuf>,
        /// Another binary as NAME=PATH (repeatable), e.g. helm=/usr/bin/helm.
        #[arg(long = "binary", value_name = "NAME=PATH", value_parser = crate::parse_env)]
        binaries: Vec<(String, String)>,
        /// The tag.
        #[arg(long)]
        tag: String,
        /// The store: a registry URL or an OCI layout directory (the
        /// vendor's store, or an install's own).
        #[arg(long, env = "NUON_STORE")]
        store: String,
        /// The repository (default: `nuon-tools/` and the first tool's name).
        #[arg(long)]
        repository: Option<String>,
        /// A statically linked busybox (default: `busybox` on PATH; Debian's
        /// `busybox-static` package).
        #[arg(long)]
        busybox: Option<PathBuf>,
    },
    /// Build the platform's images, `nuon-ctl` and `nuon-runner`: each
    /// binary on a minimal base of exactly what it links, run as user
    /// 65532, with OCI labels and an SPDX SBOM
    /// (/usr/share/doc/nuon/sbom.spdx.json); push each as an image index
    /// to REGISTRY/[PREFIX/]NAME:TAG. For this machine's platform.
    Platform {
        /// Where to push: a registry (https://registry.example,
        /// http://127.0.0.1:5000 on loopback) or an OCI layout directory.
        #[arg(long, value_name = "REGISTRY")]
        push: String,
        /// A path before each image's name: `acme` pushes acme/nuon-ctl.
        #[arg(long, default_value = "")]
        prefix: String,
        /// The tag (default: this nuon's version).
        #[arg(long)]
        tag: Option<String>,
        /// Where nuon-ctl and nuon-runner are (default: beside this nuon,
        /// else on PATH).
        #[arg(long)]
        bin_dir: Option<PathBuf>,
        /// A static busybox, the runner image's shell for jobs' commands
        /// (default: `busybox` on PATH; Debian's `busybox-static`).
        #[arg(long)]
        busybox: Option<PathBuf>,
    },
}

/// Whether the file is an ELF executable that needs no dynamic loader
/// (none is in a tool image): `Err` says why it cannot be used.
fn check_static(path: &Path) -> Result<(), CliError> {
    let bytes = std::fs::read(path)
        .map_err(|e| CliError::usage(format!("cannot read {}: {e}", path.display())))?;
    let bad = |why: &str| CliError::usage(format!("{}: {why}", path.display()));
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" {
        return Err(bad("not an ELF executable"));
    }
    if bytes[4] != 2 || bytes[5] != 1 {
        return Err(bad("not a 64-bit little-endian ELF executable"));
    }
    let u16_at = |o: usize| u16::from_le_bytes([bytes[o], bytes[o + 1]]) as usize;
    let u64_at = |o: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&bytes[o..o + 8]);
        u64::from_le_bytes(b) as usize
    };
    let (phoff, phentsize, phnum) = (u64_at(32), u16_at(54), u16_at(56));
    for i in 0..phnum {
        let at = phoff + i * phentsize;
        if at + 4 > bytes.len() {
            return Err(bad("a truncated ELF file"));
        }
        // PT_INTERP: the program asks for a dynamic loader.
        if u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]) == 3 {
            return Err(bad(
                "dynamically linked; a tool image has no libraries: use a statically linked build (for busybox, Debian's busybox-static)",
            ));
        }
    }
    Ok(())
}

pub(crate) async fn images(g: &Global, command: &ImagesCommand) -> Result<u8, CliError> {
    let (terraform_binary, binaries, tag, store, repository, busybox) = match command {
        ImagesCommand::Tool {
            terraform_binary,
            binaries,
            tag,
            store,
            repository,
            busybox,
        } => (terraform_binary, binaries, tag, store, repository, busybox),
        ImagesCommand::Platform {
            push,
            prefix,
            tag,
            bin_dir,
            busybox,
        } => return platform(g, push, prefix, tag.as_deref(), bin_dir.as_deref(), busybox).await,
    };
    let mut tools: Vec<(String, PathBuf)> = Vec::new();
    if let Some(t) = terraform_binary {
        tools.push(("terraform".into(), t.clone()));
    }
    for (name, path) in binaries {
        if name.is_empty() || name.contains('/') {
            return Err(CliError::usage(format!(
                "--binary {name}={path}: the name is a file name in /usr/local/bin"
            )));
        }
        tools.push((name.clone(), PathBuf::from(path)));
    }
    // With no tool: busybox alone, for commands and actions.
    let first = tools
        .first()
        .map_or("busybox".to_owned(), |(name, _)| name.clone());
    let busybox = static_busybox(busybox)?;
    for (_, path) in &tools {
        check_static(path)?;
    }
    let repository = repository
        .clone()
        .unwrap_or_else(|| format!("nuon-tools/{first}"));
    let store = nuon_plugins::oci::open_store(store)
        .map_err(|e| CliError::usage(format!("--store {store}: {e}")))?;
    let digest =
        nuon_plugins::oci::image::push_tool_image(&*store, &repository, tag, &busybox, &tools)
            .await
            .map_err(|e| CliError {
                message: format!("cannot build the tool image: {e}"),
                code: 1,
                api_code: None,
            })?;
    let image = ImageRef { repository, digest };
    let doc = serde_json::json!({
        "image": image.to_string(),
        "repository": image.repository,
        "digest": image.digest,
        "tag": tag,
        "tools": tools.iter().map(|(n, _)| n).collect::<Vec<_>>(),
    });
    emit_with(g, &doc, |_| outln!("{image}"))?;
    Ok(0)
}

/// `--busybox`, else `busybox` on PATH: statically linked.
fn static_busybox(given: &Option<PathBuf>) -> Result<PathBuf, CliError> {
    let busybox = match given {
        Some(b) => b.clone(),
        None => which::which("busybox").map_err(|_| {
            CliError::usage(
                "no busybox on PATH: install a static one (Debian: apt-get install busybox-static) or give --busybox PATH",
            )
        })?,
    };
    check_static(&busybox)?;
    Ok(busybox)
}

/// `nuon images platform`.
async fn platform(
    g: &Global,
    push: &str,
    prefix: &str,
    tag: Option<&str>,
    bin_dir: Option<&Path>,
    busybox: &Option<PathBuf>,
) -> Result<u8, CliError> {
    use nuon_plugins::oci::platform::{PlatformImage, push_platform_image};
    let version = env!("CARGO_PKG_VERSION");
    let tag = tag.unwrap_or(version);
    let find = |name: &str| match bin_dir {
        Some(dir) => {
            let path = dir.join(name);
            path.is_file().then_some(path).ok_or_else(|| {
                CliError::usage(format!(
                    "--bin-dir {}: no {name} there (cargo build --bins puts it in target/debug)",
                    dir.display()
                ))
            })
        }
        None => crate::dev::sibling(name),
    };
    let images = [
        PlatformImage {
            name: "nuon-ctl".into(),
            binary: find("nuon-ctl")?,
            description:
                "The nuon control plane: the Control API, the Runner API and the dashboard".into(),
            ports: vec![7400, 7401],
            cmd: [
                "serve",
                "--data-dir=/var/lib/nuon",
                "--listen=0.0.0.0:7400",
                "--runner-listen=0.0.0.0:7401",
            ]
            .map(String::from)
            .to_vec(),
            busybox: None,
        },
        PlatformImage {
            name: "nuon-runner".into(),
            binary: find("nuon-runner")?,
            description:
                "The nuon install runner: runs an install's jobs in the customer's account".into(),
            ports: Vec::new(),
            cmd: vec!["run".into()],
            busybox: Some(static_busybox(busybox)?),
        },
    ];
    let store = nuon_plugins::oci::open_store(push)
        .map_err(|e| CliError::usage(format!("--push {push}: {e}")))?;
    let prefix = prefix.trim_matches('/');
    let mut pushed = Vec::new();
    for image in &images {
        let repository = match prefix {
            "" => image.name.clone(),
            p => format!("{p}/{}", image.name),
        };
        let done = push_platform_image(&*store, &repository, tag, version, image)
            .await
            .map_err(|e| CliError {
                message: format!("cannot build the {} image: {e}", image.name),
                code: 1,
                api_code: None,
            })?;
        for_people(g, || {
            outln!(
                "{}:{} {} ({}, {} files; manifest {})",
                done.repository,
                done.tag,
                done.index,
                done.platform,
                done.files,
                done.manifest
            )
        });
        pushed.push(done);
    }
    for_machines(g, &serde_json::json!({ "images": pushed }))?;
    Ok(0)
}
