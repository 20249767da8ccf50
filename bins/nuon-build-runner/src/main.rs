//! `nuon-build-runner run --api URL --token rnr_... --signing-key ... --vendor-store DIR`:
//! the org's build runner. It is the runner library in build mode: it has
//! only the `build` plugin, so it claims only build jobs. Each build
//! packages a component's source (files synced with the app config, or a
//! git repository cloned with `git`) and pushes it to the vendor's store.

use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use nuon_plugins::build::BuildPlugin;
use nuon_runner_lib::PluginRegistry;
use nuon_runner_lib::cmd::open_store;

/// The build runner's own flags.
#[derive(Args)]
struct BuildArgs {
    /// The vendor's artifact store that builds are pushed to: an OCI
    /// registry URL (credentials from the docker config.json) or a layout
    /// directory. Default: `vendor-store/` in the work directory. The same
    /// variable as the install runner's (`NUON_VENDOR_STORE`, its earlier
    /// name, is still read).
    #[arg(long, env = "NUON_RUNNER_VENDOR_STORE")]
    vendor_store: Option<String>,
}

#[tokio::main]
async fn main() -> ExitCode {
    nuon_runner_lib::cmd::main::<BuildArgs>(
        "nuon-build-runner",
        "Builds an org's components into OCI artifacts in the vendor's store.",
        |common, args, config| {
            let earlier = std::env::var("NUON_VENDOR_STORE").ok();
            let dir = args.vendor_store.clone().or(earlier).unwrap_or_else(|| {
                common
                    .work_dir
                    .join("vendor-store")
                    .to_string_lossy()
                    .into_owned()
            });
            let store = open_store(&dir, "--vendor-store")?;
            let mut plugins = PluginRegistry::new();
            plugins.register(Arc::new(BuildPlugin::new(store)));
            config.plugins = plugins;
            Ok(())
        },
    )
    .await
}
