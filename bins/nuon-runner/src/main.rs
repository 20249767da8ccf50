//! `nuon-runner run --api URL --token rnr_... --signing-key ed25519:...`: claims
//! an install's signed jobs (`exec`, `sync`, `terraform`), runs them and
//! ships their logs and results back. Terraform modules and plans are read
//! from and kept in the install's own store; `sync` jobs copy artifacts into
//! it from the vendor's store.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use nuon_plugins::kubernetes::KubernetesPlugin;
use nuon_plugins::pulumi::PulumiPlugin;
use nuon_plugins::sync::SyncPlugin;
use nuon_plugins::terraform::TerraformPlugin;
use nuon_plugins::wasm::job::{WasmPlugin, WasmPolicy};
use nuon_plugins::wasm::{HostConfig, WasmHost, default_cache_dir};
use nuon_plugins::{health::HealthPlugin, helm::HelmPlugin};
use nuon_runner_lib::cmd::{TerraformInstallArgs, open_store};

/// The install runner's own flags.
#[derive(Args)]
struct InstallArgs {
    /// The install's artifact store (an OCI image layout directory per
    /// repository) that Terraform modules and plans are read from and kept
    /// in. Default: `store/` in the work directory.
    #[arg(long, env = "NUON_RUNNER_STORE_DIR")]
    store_dir: Option<PathBuf>,
    /// The vendor's artifact store that `sync` jobs copy from: an OCI
    /// registry URL or a layout directory. Without it, only artifacts
    /// already in the install's store deploy.
    #[arg(long, env = "NUON_RUNNER_VENDOR_STORE")]
    vendor_store: Option<String>,
    /// Whether this runner runs vendors' WASM plugins (`wasm` components):
    /// `on` or `off`.
    #[arg(long, env = "NUON_RUNNER_WASM_PLUGINS", default_value = "on", value_parser = ["on", "off"])]
    wasm_plugins: String,
    /// The only hosts any WASM plugin may call (comma-separated `host` or
    /// `host:port`); a plugin asking for another is refused. Unset: what
    /// each component grants.
    #[arg(long, env = "NUON_RUNNER_WASM_ALLOWED_HOSTS", value_delimiter = ',')]
    wasm_allowed_hosts: Option<Vec<String>>,
    /// `--terraform-install`, `--terraform-mirror`, `--terraform-mirror-key`.
    #[command(flatten)]
    terraform: TerraformInstallArgs,
}

#[tokio::main]
async fn main() -> ExitCode {
    let version = option_env!("NUON_RUNNER_VERSION").unwrap_or(env!("CARGO_PKG_VERSION"));
    nuon_runner_lib::set_version(version);
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some("import") {
        return nuon_runner_lib::cmd::import(&argv[1..]).await;
    }
    nuon_runner_lib::cmd::main::<InstallArgs>(
        "nuon-runner",
        "Runs an install's nuon jobs (`run`). `nuon-runner import --bundle DIR --store-dir STORE` \
         copies a release bundle (from `nuon releases export`) into the install's store.",
        |common, args, config| {
            let dir = args
                .store_dir
                .clone()
                .unwrap_or_else(|| common.work_dir.join("store"));
            let store = open_store(&dir.to_string_lossy(), "--store-dir")?;
            let vendor = (args.vendor_store.as_deref())
                .map(|v| open_store(v, "--vendor-store"))
                .transpose()?;
            config.update_store = vendor.clone(); // where updates download from
            // Under --isolation container the tools come from each job's
            // image in the install's store, unpacked once per digest.
            let containers = common.isolation.containers();
            config.isolation =
                common
                    .isolation
                    .from_stores(store.clone(), vendor.clone(), &common.work_dir)?;
            let terraform = TerraformPlugin::new(store.clone())
                .in_containers(containers)
                .backend_ca(common.ca_bundle_pem()?);
            config
                .plugins
                .register(Arc::new(args.terraform.apply(terraform, &common.work_dir)?))
                .register(Arc::new(
                    HelmPlugin::new(store.clone()).in_containers(containers),
                ))
                .register(Arc::new(
                    KubernetesPlugin::new(store.clone()).in_containers(containers),
                ))
                .register(Arc::new(
                    PulumiPlugin::new(store.clone()).in_containers(containers),
                ))
                .register(Arc::new(SyncPlugin::new(vendor, store.clone())))
                .register(Arc::new(HealthPlugin::new()));
            // Registered even when off, so that a wasm job fails with the
            // reason instead of waiting for a runner that never claims it.
            let host = WasmHost::new(HostConfig {
                cache_dir: Some(default_cache_dir(&common.work_dir)),
                max_instances: 32,
            })?;
            let policy = WasmPolicy {
                enabled: args.wasm_plugins == "on",
                allowed_hosts: args.wasm_allowed_hosts.clone(),
            };
            config
                .plugins
                .register(Arc::new(WasmPlugin::new(host, store, policy)));
            Ok(())
        },
    )
    .await
}
