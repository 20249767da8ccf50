//! How a runner isolates its jobs: `--isolation` and the container
//! settings.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

/// How jobs are isolated: `--isolation` and the container settings.
#[derive(Args)]
pub struct IsolationArgs {
    /// How jobs run: `process` (each job a process group on this host) or
    /// `container` (each process of a job in a runc container of its own,
    /// from the job's tool image in the install's store; needs runc).
    #[arg(long, env = "NUON_RUNNER_ISOLATION", default_value = "process", value_parser = ["process", "container"])]
    pub isolation: String,
    /// The runc binary (default: `runc` on PATH).
    #[arg(long, env = "NUON_RUNNER_RUNC")]
    pub runc: Option<PathBuf>,
    /// The tool image of jobs that name none, from the install's store
    /// (`REPOSITORY@sha256:HEX`, as `nuon images tool` prints it).
    #[arg(long, env = "NUON_RUNNER_JOB_IMAGE")]
    pub job_image: Option<nuon_core::ImageRef>,
    /// A job container's memory limit, unless the job sets one (e.g. 512MiB).
    #[arg(long, env = "NUON_RUNNER_JOB_MEMORY", default_value = "2GiB", value_parser = parse_job_memory)]
    pub job_memory: u64,
    /// A job container's CPU limit, unless the job sets one (e.g. 0.5, 2).
    #[arg(long, env = "NUON_RUNNER_JOB_CPUS", default_value = "2", value_parser = parse_cpus)]
    pub job_cpus: u64,
    /// A job container's limit on processes and threads, unless the job
    /// sets one.
    #[arg(long, env = "NUON_RUNNER_JOB_PIDS", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..))]
    pub job_pids: u64,
    /// Whether `exec` jobs (actions, commands) may use the network: `on`
    /// (unless a job says it needs none) or `off` (never, whatever a job
    /// asks). Other kinds need it (Terraform's providers and state, Helm
    /// and kubectl talk to their APIs).
    #[arg(long, env = "NUON_RUNNER_EXEC_NETWORK", default_value = "on", value_parser = ["on", "off"])]
    pub exec_network: String,
    /// The most disk the unpacked tool images may take; the least recently
    /// used go first.
    #[arg(long, env = "NUON_RUNNER_IMAGE_CACHE_SIZE", default_value = "10GiB", value_parser = nuon_core::wasm::parse_size)]
    pub image_cache_size: u64,
    /// Unpacked tool images unused for this long are removed (e.g. 7d).
    #[arg(long, env = "NUON_RUNNER_IMAGE_CACHE_AGE", default_value = "7d", value_parser = nuon_core::parse_duration)]
    pub image_cache_age: Duration,
}

/// A memory limit: a size of at least 4 MiB (no process starts in less).
fn parse_job_memory(text: &str) -> Result<u64, String> {
    let bytes = nuon_core::wasm::parse_size(text)?;
    if bytes < 4 << 20 {
        return Err(format!("{text:?}: a job needs at least 4MiB"));
    }
    Ok(bytes)
}

/// `0.5`, `2`, `1500m`: thousandths of a CPU.
fn parse_cpus(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let milli = match t.strip_suffix('m') {
        Some(m) => m.parse::<u64>().ok(),
        None => t
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite() && *f > 0.0)
            .map(|f| (f * 1000.0).round() as u64),
    };
    milli.filter(|m| *m >= 10).ok_or_else(|| {
        format!(
            "{text:?} is not a CPU count: a number like 0.5 or 2, or thousandths like 500m (at least 0.01)"
        )
    })
}

impl IsolationArgs {
    /// Whether jobs run in containers.
    pub fn containers(&self) -> bool {
        self.isolation == "container"
    }

    /// The cache of unpacked tool images under `work_dir`, reading images
    /// from the install's `store`, synced first from the vendor's `source`
    /// when the install's lacks them.
    pub fn image_cache(
        &self,
        store: Arc<dyn nuon_core::artifact::ArtifactStore>,
        source: Option<Arc<dyn nuon_core::artifact::ArtifactStore>>,
        work_dir: &std::path::Path,
    ) -> nuon_plugins::oci::image::RootfsCache {
        let work_dir = std::path::absolute(work_dir).unwrap_or_else(|_| work_dir.to_owned());
        nuon_plugins::oci::image::RootfsCache::new(
            store,
            work_dir.join("containers").join("images"),
            self.image_cache_size,
            self.image_cache_age,
        )
        .with_source(source)
    }

    /// The isolation these flags ask for, with tool images read from the
    /// install's `store` (synced first from the vendor's `source`) and
    /// unpacked under `work_dir`.
    pub fn from_stores(
        &self,
        store: Arc<dyn nuon_core::artifact::ArtifactStore>,
        source: Option<Arc<dyn nuon_core::artifact::ArtifactStore>>,
        work_dir: &std::path::Path,
    ) -> anyhow::Result<crate::container::Isolation> {
        self.isolation(Arc::new(self.image_cache(store, source, work_dir)))
    }

    /// The isolation these flags ask for, with images from `images`.
    pub fn isolation(
        &self,
        images: Arc<dyn nuon_core::ImageRoots>,
    ) -> anyhow::Result<crate::container::Isolation> {
        use crate::container::{ContainerOptions, Isolation, Limits};
        if !self.containers() {
            return Ok(Isolation::Process);
        }
        let runc = match &self.runc {
            Some(p) => p.clone(),
            None => crate::container::find_runc().map_err(anyhow::Error::msg)?,
        };
        Ok(Isolation::Container(ContainerOptions {
            runc,
            images,
            default_image: self.job_image.clone(),
            limits: Limits {
                memory_bytes: self.job_memory,
                millicpus: self.job_cpus,
                pids: self.job_pids,
            },
            exec_network: self.exec_network == "on",
        }))
    }
}
