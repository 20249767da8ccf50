//! The `build` job kind of the build runner: a component's source (files
//! synced with its app config, or a git repository cloned with the `git`
//! binary) packaged as an OpenTofu module package and pushed to the
//! vendor's store, tagged with the build's id.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use nuon_core::artifact::ArtifactStore;
use nuon_core::{
    ArtifactRef, BuildJob, BuildSource, Job, JobHost, JobResult, JobSpec, Outcome, Plugin,
    PluginError, ProcessExit, ProcessSpec,
};
use serde_json::json;

use crate::oci::modulepkg::push_module;

/// Runs `build` jobs into the vendor's store.
pub struct BuildPlugin {
    store: Arc<dyn ArtifactStore>,
}

impl BuildPlugin {
    /// A plugin pushing to `store`.
    pub fn new(store: Arc<dyn ArtifactStore>) -> Self {
        BuildPlugin { store }
    }
}

fn decode(spec: &JobSpec) -> Result<BuildJob, PluginError> {
    spec.payload_as()
        .map_err(|e| PluginError::Invalid(format!("build: {e}")))
}

/// `rel` joined to `root`, refused when it is absolute or leaves `root`.
fn inside(root: &Path, rel: &str) -> Result<PathBuf, PluginError> {
    let mut out = root.to_path_buf();
    for part in rel.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(PluginError::Invalid(format!(
                    "build: {rel:?} leaves the source directory"
                )));
            }
            p => out.push(p),
        }
    }
    if rel.starts_with('/') {
        return Err(PluginError::Invalid(format!(
            "build: {rel:?} is an absolute path"
        )));
    }
    Ok(out)
}

fn git() -> Result<PathBuf, PluginError> {
    which::which("git").map_err(|_| {
        PluginError::Missing(
            "build: `git` is not on PATH; install git (apt-get install git) to build components from a repository".into(),
        )
    })
}

/// A build's result: its artifact in the vendor's store.
fn built(job: &BuildJob, digest: nuon_core::artifact::Digest) -> JobResult {
    let artifact = ArtifactRef {
        repo: job.repo.clone(),
        digest,
        size: None,
    };
    JobResult {
        outcome: Outcome::Succeeded,
        exit_code: None,
        reason: None,
        outputs: json!({ "artifact": artifact }),
    }
}

/// The binary that builds images: `buildah`, else `docker` (with buildx).
/// How a `docker_build` image is built.
struct ImageOptions<'a> {
    dockerfile: &'a str,
    target: Option<&'a str>,
    build_args: &'a std::collections::BTreeMap<String, String>,
}

/// The commands that build an image into the OCI layout `out`: with
/// buildah (`bud`, `push oci:`, `rmi`) or with `docker buildx build`.
fn image_build_steps(
    buildah: bool,
    opts: &ImageOptions<'_>,
    file: String,
    dir: String,
    out: String,
    name: String,
) -> Vec<Vec<String>> {
    let mut build: Vec<String> = vec!["-f".into(), file];
    if let Some(t) = opts.target {
        build.extend(["--target".into(), t.to_owned()]);
    }
    for (k, v) in opts.build_args {
        build.extend(["--build-arg".into(), format!("{k}={v}")]);
    }
    if buildah {
        let mut bud = vec!["bud".to_owned()];
        bud.extend(build);
        bud.extend(["-t".into(), name.clone(), dir]);
        vec![
            bud,
            vec!["push".into(), name.clone(), format!("oci:{out}:latest")],
            // The local image is not needed once pushed.
            vec!["rmi".into(), name],
        ]
    } else {
        let mut bx = vec!["buildx".to_owned(), "build".to_owned()];
        bx.extend(build);
        bx.extend([
            "--output".into(),
            format!("type=oci,tar=false,dest={out}"),
            dir,
        ]);
        vec![bx]
    }
}

fn image_builder() -> Result<(PathBuf, bool), PluginError> {
    if let Ok(b) = which::which("buildah") {
        return Ok((b, true));
    }
    if let Ok(d) = which::which("docker") {
        // `docker buildx` is a CLI plugin, in one of these places.
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let mut places: Vec<PathBuf> = [
            "/usr/local/lib/docker/cli-plugins",
            "/usr/local/libexec/docker/cli-plugins",
            "/usr/lib/docker/cli-plugins",
            "/usr/libexec/docker/cli-plugins",
        ]
        .iter()
        .map(PathBuf::from)
        .collect();
        places.extend(home.map(|h| h.join(".docker/cli-plugins")));
        if places.iter().any(|p| p.join("docker-buildx").is_file()) {
            return Ok((d, false));
        }
        return Err(PluginError::Missing(format!(
            "build: {} has no buildx plugin (docker buildx builds the OCI image): install docker-buildx, or buildah (apt-get install buildah)",
            d.display()
        )));
    }
    Err(PluginError::Missing(
        "build: neither `buildah` nor `docker` is on PATH: install buildah (apt-get install buildah) or Docker with buildx to build docker_build components".into(),
    ))
}

impl BuildPlugin {
    /// A chart from a Helm repository: picked from its `index.yaml`,
    /// downloaded, checked against the index's digest, pushed as an OCI
    /// chart (the archive as it came is the layer).
    async fn pull_chart(
        &self,
        job: &BuildJob,
        repo_url: &str,
        chart: &str,
        version: Option<&str>,
        host: &mut dyn JobHost,
    ) -> Result<JobResult, PluginError> {
        use crate::oci::helmrepo::{index_entries, pick, push_chart_archive};
        let base = repo_url.trim_end_matches('/');
        let client = reqwest::Client::builder()
            .connect_timeout(std::time::Duration::from_secs(15))
            .timeout(std::time::Duration::from_secs(300))
            .build()
            .map_err(|e| PluginError::Missing(format!("build: {e}")))?;
        let get = |url: String| {
            let client = client.clone();
            async move {
                let resp =
                    client.get(&url).send().await.map_err(|e| {
                        PluginError::Missing(format!("build: cannot fetch {url}: {e}"))
                    })?;
                if !resp.status().is_success() {
                    return Err(PluginError::Missing(format!(
                        "build: {url} answered {}",
                        resp.status()
                    )));
                }
                // A chart (or an index) is small: refuse what is not.
                const MAX: usize = 64 << 20;
                if resp.content_length().is_some_and(|n| n > MAX as u64) {
                    return Err(PluginError::Missing(format!(
                        "build: {url} is larger than {} MiB",
                        MAX >> 20
                    )));
                }
                let bytes = resp
                    .bytes()
                    .await
                    .map_err(|e| PluginError::Missing(format!("build: reading {url}: {e}")))?;
                if bytes.len() > MAX {
                    return Err(PluginError::Missing(format!(
                        "build: {url} is larger than {} MiB",
                        MAX >> 20
                    )));
                }
                Ok(bytes.to_vec())
            }
        };
        host.log(&format!("reading {base}/index.yaml"));
        let index = String::from_utf8_lossy(&get(format!("{base}/index.yaml")).await?).into_owned();
        let entries = index_entries(&index, chart);
        let Some(entry) = pick(&entries, version) else {
            let have: Vec<&str> = entries.iter().map(|e| e.version.as_str()).collect();
            return Ok(JobResult::failed(format!(
                "build: {base} has no chart {chart:?}{} (versions there: {})",
                version.map(|v| format!(" version {v}")).unwrap_or_default(),
                if have.is_empty() {
                    "none".into()
                } else {
                    have.join(", ")
                }
            )));
        };
        let url = &entry.urls[0];
        let url = if url.contains("://") {
            url.clone()
        } else {
            format!("{base}/{url}")
        };
        host.log(&format!("downloading {chart} {} from {url}", entry.version));
        let tgz = get(url.clone()).await?;
        if let Some(want) = &entry.digest {
            let got = nuon_core::artifact::Digest::of(&tgz);
            if got.hex() != want {
                return Ok(JobResult::failed(format!(
                    "build: {url} does not match the digest the index gives (sha256:{want}, got {got})"
                )));
            }
        }
        let (digest, _) = push_chart_archive(&*self.store, &job.repo, tgz, Some(&job.tag))
            .await
            .map_err(|e| PluginError::Missing(format!("build: {e}")))?;
        host.log(&format!("built {}@{digest}", job.repo));
        Ok(built(job, digest))
    }

    /// A `docker_build`: the image built into an OCI layout in the work
    /// directory, then copied into the vendor's store like any image.
    async fn build_image(
        &self,
        job: &BuildJob,
        dir: &Path,
        opts: &ImageOptions<'_>,
        host: &mut dyn JobHost,
    ) -> Result<JobResult, PluginError> {
        let dockerfile = opts.dockerfile;
        let (bin, buildah) = image_builder()?;
        let file = inside(dir, dockerfile)?;
        if !file.is_file() {
            return Ok(JobResult::failed(format!(
                "build: the source of {} has no Dockerfile {dockerfile:?}",
                job.component
            )));
        }
        let work = host.work_dir().to_path_buf();
        let layout = work.join("image-layout");
        let name = format!("nuon-build-{}", job.tag);
        let (f, d, out) = (
            file.to_string_lossy().into_owned(),
            dir.to_string_lossy().into_owned(),
            layout.join("image").to_string_lossy().into_owned(),
        );
        let steps = image_build_steps(buildah, opts, f, d, out, name);
        for args in steps {
            host.log(&format!("$ {} {}", bin.display(), args.join(" ")));
            let mut p = ProcessSpec::new(&bin);
            p.args = args;
            match host.run_process(p).await? {
                ProcessExit::Exited(0) => {}
                other => {
                    let mut r = crate::exec::result_of(other);
                    r.reason = Some(format!(
                        "building the image of {} failed: {}; see the job's log",
                        job.component,
                        r.reason.unwrap_or_default()
                    ));
                    return Ok(r);
                }
            }
        }
        let image = crate::oci::LayoutStore::open(&layout)
            .map_err(|e| PluginError::Missing(format!("build: {e}")))?;
        let opts = crate::oci::CopyOptions::default();
        let r = crate::oci::copy(
            &image,
            "image",
            "latest",
            &*self.store,
            &job.repo,
            Some(&job.tag),
            &opts,
        )
        .await
        .map_err(|e| PluginError::Missing(format!("build: the built image: {e}")))?;
        host.log(&format!("built {}@{}", job.repo, r.digest));
        Ok(built(job, r.digest))
    }

    /// An image build: the image (an index with every platform, or one
    /// manifest) copied byte for byte from its registry into the vendor's
    /// store.
    async fn copy_image(
        &self,
        job: &BuildJob,
        reference: &str,
        host: &mut dyn JobHost,
    ) -> Result<JobResult, PluginError> {
        use crate::oci::registry::{RegistryConfig, RegistryStore, parse_image_ref};
        let invalid =
            |e: nuon_core::artifact::ArtifactError| PluginError::Invalid(format!("build: {e}"));
        let (base, repo, tag) = parse_image_ref(reference).map_err(invalid)?;
        let config = RegistryConfig::new(&base)
            .with_default_docker_config()
            .map_err(invalid)?;
        let source = RegistryStore::new(&config).map_err(invalid)?;
        host.log(&format!(
            "copying {base}/{repo}:{tag} into {}:{}",
            job.repo, job.tag
        ));
        let opts = crate::oci::CopyOptions::default();
        let r = crate::oci::copy(
            &source,
            &repo,
            &tag,
            &*self.store,
            &job.repo,
            Some(&job.tag),
            &opts,
        )
        .await
        .map_err(|e| PluginError::Missing(format!("build: copying {reference}: {e}")))?;
        host.log(&format!(
            "copied {}@{}: {} blob(s), {} bytes, {} manifest(s)",
            job.repo, r.digest, r.blobs_copied, r.bytes_copied, r.manifests_written
        ));
        Ok(built(job, r.digest))
    }
}

#[async_trait]
impl Plugin for BuildPlugin {
    fn kind(&self) -> &'static str {
        BuildJob::KIND
    }

    fn validate(&self, spec: &JobSpec) -> Result<(), PluginError> {
        let job = decode(spec)?;
        if let BuildSource::Git { .. } = job.source {
            git()?;
        }
        if let nuon_core::Package::DockerImage { .. } = job.package {
            image_builder()?;
        }
        Ok(())
    }

    async fn run(&self, spec: &JobSpec, host: &mut dyn JobHost) -> Result<JobResult, PluginError> {
        let job = decode(spec)?;
        if let BuildSource::Image { reference } = &job.source {
            return self.copy_image(&job, reference, host).await;
        }
        if let BuildSource::HelmRepo {
            repo_url,
            chart,
            version,
        } = &job.source
        {
            return self
                .pull_chart(&job, repo_url, chart, version.as_deref(), host)
                .await;
        }
        let work = host.work_dir().to_path_buf();
        let dir = match &job.source {
            BuildSource::Image { .. } | BuildSource::HelmRepo { .. } => {
                unreachable!("handled above")
            }
            BuildSource::Files { files } => {
                let root = work.join("src");
                host.log(&format!(
                    "writing {} source file(s) of {}",
                    files.len(),
                    job.component
                ));
                for f in files {
                    let path = inside(&root, &f.path)?;
                    if let Some(parent) = path.parent() {
                        std::fs::create_dir_all(parent).map_err(|e| {
                            PluginError::Missing(format!(
                                "build: cannot create {}: {e}",
                                parent.display()
                            ))
                        })?;
                    }
                    let bytes = match f.encoding.as_deref() {
                        None => f.contents.clone().into_bytes(),
                        Some("base64") => {
                            use base64::Engine as _;
                            base64::engine::general_purpose::STANDARD
                                .decode(&f.contents)
                                .map_err(|e| {
                                    PluginError::Invalid(format!(
                                        "build: {}: bad base64: {e}",
                                        f.path
                                    ))
                                })?
                        }
                        Some(other) => {
                            return Err(PluginError::Invalid(format!(
                                "build: {}: unknown encoding {other:?}",
                                f.path
                            )));
                        }
                    };
                    std::fs::write(&path, bytes).map_err(|e| {
                        PluginError::Missing(format!("build: cannot write {}: {e}", f.path))
                    })?;
                }
                root
            }
            BuildSource::Git {
                url,
                branch,
                directory,
            } => {
                let git = git()?;
                host.log(&format!("$ git clone --depth 1 --branch {branch} {url}"));
                let mut p = ProcessSpec::new(git).args([
                    "clone", "--quiet", "--depth", "1", "--branch", branch, "--", url, "repo",
                ]);
                p.env.insert("GIT_TERMINAL_PROMPT".into(), "0".into());
                match host.run_process(p).await? {
                    ProcessExit::Exited(0) => {}
                    other => {
                        let mut r = crate::exec::result_of(other);
                        r.reason = Some(format!(
                            "git clone of {url} (branch {branch}) failed: {}; see the job's log",
                            r.reason.unwrap_or_default()
                        ));
                        return Ok(r);
                    }
                }
                let dir = inside(&work.join("repo"), directory)?;
                if !dir.is_dir() {
                    return Ok(JobResult::failed(format!(
                        "build: the repository {url} (branch {branch}) has no directory {directory:?}"
                    )));
                }
                // A symlink in the repository must not lead the package
                // out of it (to the runner's own files).
                let real = dir.canonicalize().ok();
                let root = work.join("repo").canonicalize().ok();
                match (real, root) {
                    (Some(real), Some(root)) if real.starts_with(&root) => real,
                    _ => {
                        return Ok(JobResult::failed(format!(
                            "build: directory {directory:?} of {url} leads out of the repository (a symlink?)"
                        )));
                    }
                }
            }
        };
        let digest = match &job.package {
            nuon_core::Package::DockerImage {
                dockerfile,
                target,
                build_args,
            } => {
                let opts = ImageOptions {
                    dockerfile,
                    target: target.as_deref(),
                    build_args,
                };
                return self.build_image(&job, &dir, &opts, host).await;
            }
            nuon_core::Package::TerraformModule => {
                host.log(&format!(
                    "packaging {} as an OpenTofu module package into {}:{}",
                    job.component, job.repo, job.tag
                ));
                push_module(&*self.store, &job.repo, &dir, Some(&job.tag)).await
            }
            nuon_core::Package::Directory => {
                host.log(&format!(
                    "packaging {} into {}:{}",
                    job.component, job.repo, job.tag
                ));
                crate::oci::modulepkg::push_directory(&*self.store, &job.repo, &dir, Some(&job.tag))
                    .await
            }
            nuon_core::Package::WasmPlugin => {
                host.log(&format!(
                    "packaging {} as a WASM plugin into {}:{}",
                    job.component, job.repo, job.tag
                ));
                crate::oci::pluginpkg::push_plugin(&*self.store, &job.repo, &dir, Some(&job.tag))
                    .await
            }
            nuon_core::Package::HelmChart => {
                host.log(&format!(
                    "packaging {} as a Helm OCI chart into {}:{}",
                    job.component, job.repo, job.tag
                ));
                crate::oci::helmpkg::push_chart(&*self.store, &job.repo, &dir, Some(&job.tag))
                    .await
                    .map(|(d, meta)| {
                        host.log(&format!(
                            "chart {} version {}",
                            meta["name"].as_str().unwrap_or("?"),
                            meta["version"].as_str().unwrap_or("?")
                        ));
                        d
                    })
            }
        }
        .map_err(|e| PluginError::Missing(format!("build: {e}")))?;
        host.log(&format!("built {}@{digest}", job.repo));
        Ok(built(&job, digest))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_docker_build_gives_its_target_and_build_args_to_either_builder() {
        let mut args = std::collections::BTreeMap::new();
        args.insert("GREETING".to_owned(), "hi there".to_owned());
        args.insert("VERSION".to_owned(), "1.2".to_owned());
        let opts = ImageOptions {
            dockerfile: "Dockerfile",
            target: Some("runtime"),
            build_args: &args,
        };
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let buildah =
            image_build_steps(true, &opts, "F".into(), "D".into(), "O".into(), "N".into());
        assert_eq!(
            buildah[0],
            s(&[
                "bud",
                "-f",
                "F",
                "--target",
                "runtime",
                "--build-arg",
                "GREETING=hi there",
                "--build-arg",
                "VERSION=1.2",
                "-t",
                "N",
                "D"
            ])
        );
        assert_eq!(buildah[1], s(&["push", "N", "oci:O:latest"]));
        let docker =
            image_build_steps(false, &opts, "F".into(), "D".into(), "O".into(), "N".into());
        assert_eq!(
            docker,
            [s(&[
                "buildx",
                "build",
                "-f",
                "F",
                "--target",
                "runtime",
                "--build-arg",
                "GREETING=hi there",
                "--build-arg",
                "VERSION=1.2",
                "--output",
                "type=oci,tar=false,dest=O",
                "D"
            ])]
        );
    }
}
