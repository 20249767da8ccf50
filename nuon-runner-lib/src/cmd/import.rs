//! `nuon-runner import`: a release bundle copied into the install's store.

use std::path::PathBuf;
use std::process::ExitCode;

use super::open_store;

/// `nuon-runner import --bundle DIR --store-dir STORE`: copies a release
/// bundle (from `nuon releases export`) into the install's store, every
/// blob checked; then deploys of that release need no vendor store.
#[derive(clap::Parser)]
#[command(name = "nuon-runner import")]
struct ImportArgs {
    /// The bundle directory.
    #[arg(long)]
    bundle: PathBuf,
    /// The install's store (as `run --store-dir`).
    #[arg(long)]
    store_dir: PathBuf,
}

/// `nuon-runner import`'s main: ARGS from `import` on.
pub async fn import(args: &[String]) -> ExitCode {
    use clap::Parser as _;
    let a = match ImportArgs::try_parse_from(args) {
        Ok(a) => a,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 64 } else { 0 });
        }
    };
    let store = match open_store(&a.store_dir.to_string_lossy(), "--store-dir") {
        Ok(s) => s,
        Err(e) => {
            eprintln!("nuon-runner import: {e:#}");
            return ExitCode::from(64);
        }
    };
    match nuon_plugins::release::import_release(&a.bundle, &*store).await {
        Ok(r) => {
            println!(
                "imported {} artifact(s) of config v{} into {}",
                r.artifacts.len(),
                r.config_version,
                a.store_dir.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("nuon-runner import: {e}");
            ExitCode::FAILURE
        }
    }
}
