//! The flags of a runner's Terraform installs (`--terraform-install`,
//! `--terraform-mirror`, `--terraform-mirror-key`): the version a
//! component pins, installed from a mirror when nothing on the runner
//! satisfies it; the CA its state backend is checked against; the stores
//! a runner opens.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;

use nuon_plugins::terraform::TerraformPlugin;
use nuon_plugins::terraform::install::{Installer, Product};

/// How the runner installs the Terraform a component pins.
#[derive(clap::Args, Debug, Clone)]
pub struct TerraformInstallArgs {
    /// When nothing on this runner satisfies a component's
    /// `terraform_version`: install that version of `terraform`
    /// (HashiCorp's releases) or of `opentofu`, into `tools/` in the work
    /// directory, shared by every job; or `off` (the job fails and says
    /// what to install).
    #[arg(long, env = "NUON_RUNNER_TERRAFORM_INSTALL", default_value = "terraform", value_parser = ["terraform", "opentofu", "off"])]
    terraform_install: String,
    /// Where those releases come from, laid out as the product's own
    /// release site (`VERSION/terraform_VERSION_SHA256SUMS` …). Default:
    /// <https://releases.hashicorp.com/terraform>, or OpenTofu's GitHub
    /// releases.
    #[arg(long, env = "NUON_RUNNER_TERRAFORM_MIRROR")]
    terraform_mirror: Option<String>,
    /// The OpenPGP public key (armored or binary) that must have signed
    /// each release's SHA256SUMS. Default: the product's own release key,
    /// fetched from its site and refused unless it has the fingerprint the
    /// product publishes.
    #[arg(long, env = "NUON_RUNNER_TERRAFORM_MIRROR_KEY")]
    terraform_mirror_key: Option<PathBuf>,
}

impl TerraformInstallArgs {
    /// The installer `--terraform-install` asks for, caching in
    /// `tools/` of `work_dir`; none when it is `off`.
    pub fn installer(&self, work_dir: &std::path::Path) -> anyhow::Result<Option<Installer>> {
        if self.terraform_install == "off" {
            return Ok(None);
        }
        let product: Product = self
            .terraform_install
            .parse()
            .map_err(|e: String| anyhow::anyhow!("--terraform-install: {e}"))?;
        let mut installer = Installer::new(product, work_dir.join("tools"));
        if let Some(url) = &self.terraform_mirror {
            installer = installer.mirror(url);
        }
        if let Some(path) = &self.terraform_mirror_key {
            let bytes = std::fs::read(path)
                .map_err(|e| anyhow::anyhow!("--terraform-mirror-key {}: {e}", path.display()))?;
            installer = installer
                .key(&bytes)
                .map_err(|e| anyhow::anyhow!("--terraform-mirror-key {}: {e}", path.display()))?;
        }
        Ok(Some(installer))
    }

    /// `plugin`, installing as the flags ask, with the runner's provider
    /// cache in `tools/terraform-providers/`.
    pub fn apply(
        &self,
        plugin: TerraformPlugin,
        work_dir: &std::path::Path,
    ) -> anyhow::Result<TerraformPlugin> {
        // Providers are installed once per runner, into `tools/`.
        let plugin = plugin.provider_cache(work_dir.join("tools").join("terraform-providers"));
        Ok(match self.installer(work_dir)? {
            Some(installer) => plugin.installer(installer),
            None => plugin,
        })
    }
}

impl super::RunArgs {
    /// The PEM of `--ca-bundle` followed by the system's CA bundle, for
    /// tools that reach the control plane themselves (Terraform's state
    /// backend trusts only the PEM it is given; the runner's own client
    /// trusts both).
    pub fn ca_bundle_pem(&self) -> anyhow::Result<Option<String>> {
        let Some(path) = &self.ca_bundle else {
            return Ok(None);
        };
        let mut pem = std::fs::read_to_string(path)
            .with_context(|| format!("--ca-bundle {}", path.display()))?;
        let system = std::env::var_os("SSL_CERT_FILE")
            .map(PathBuf::from)
            .into_iter()
            .chain(SYSTEM_BUNDLES.iter().map(PathBuf::from))
            .find_map(|p| std::fs::read_to_string(p).ok());
        if let Some(system) = system {
            pem.push('\n');
            pem.push_str(&system);
        }
        Ok(Some(pem))
    }
}

/// Where distributions keep the system's CA bundle (Debian, RHEL, Alpine
/// and SUSE's).
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
    "/etc/ssl/ca-bundle.pem",
];

/// Opens the artifact store flag `flag` names: an OCI registry
/// (`https://HOST`, or `http://127.0.0.1:PORT` on loopback; credentials
/// from the docker `config.json` in `$DOCKER_CONFIG` or `~/.docker`), or
/// else an OCI image layout directory.
pub fn open_store(
    spec: &str,
    flag: &str,
) -> anyhow::Result<Arc<dyn nuon_core::artifact::ArtifactStore>> {
    nuon_plugins::oci::open_store(spec).with_context(|| format!("{flag} {spec}"))
}
