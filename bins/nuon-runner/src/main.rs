//! `nuon-runner`: an install's runner. Everything it does lives in `nuon-runner-lib`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use nuon_client::ClientConfig;
use nuon_core::PublicKey;
use nuon_runner_lib::{Runner, RunnerConfig};

#[derive(Parser)]
#[command(name = "nuon-runner", version, about = "Runs an install's jobs")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Claim and run jobs until SIGTERM or Ctrl-C, then drain.
    Run(RunArgs),
}

#[derive(clap::Args)]
struct RunArgs {
    /// The control plane's Runner API URL.
    #[arg(long, env = "NUON_RUNNER_API_URL")]
    api: String,
    /// This runner's token.
    #[arg(long, env = "NUON_RUNNER_TOKEN", hide_env_values = true)]
    token: String,
    /// The org's job-signing public key (`ed25519:...`), or a file holding it.
    #[arg(long, env = "NUON_RUNNER_SIGNING_KEY")]
    signing_key: String,
    /// Where jobs run and logs are spooled.
    #[arg(long, env = "NUON_RUNNER_WORK_DIR", default_value = "nuon-runner-data")]
    work_dir: PathBuf,
    /// How many jobs run at once.
    #[arg(long, default_value_t = 4)]
    slots: usize,
    /// Time between SIGTERM and SIGKILL when a job is stopped.
    #[arg(long, default_value = "10s", value_parser = nuon_core::parse_duration)]
    grace: Duration,
    /// How long a drain lets running jobs finish.
    #[arg(long, default_value = "10m", value_parser = nuon_core::parse_duration)]
    drain_timeout: Duration,
    /// Extra PEM CA certificates to trust.
    #[arg(long, env = "NUON_RUNNER_CA_BUNDLE")]
    ca_bundle: Option<PathBuf>,
}

fn main() -> ExitCode {
    let Cli {
        command: Command::Run(args),
    } = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let config = match configure(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("nuon-runner: {e:#}");
            return ExitCode::from(64);
        }
    };
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nuon-runner: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(Runner::new(config).run(shutdown_signal())) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nuon-runner: {e}");
            ExitCode::FAILURE
        }
    }
}

fn configure(args: &RunArgs) -> anyhow::Result<RunnerConfig> {
    let key_text = if args.signing_key.trim().starts_with("ed25519:") {
        args.signing_key.clone()
    } else {
        std::fs::read_to_string(&args.signing_key).map_err(|e| {
            anyhow::anyhow!(
                "--signing-key {:?} is neither a key (ed25519:...) nor a readable file: {e}",
                args.signing_key
            )
        })?
    };
    let key: PublicKey = key_text.trim().parse()?;
    let mut client = ClientConfig::new(&args.api, &args.token)?;
    client.ca_bundle = args.ca_bundle.clone();
    let mut config = RunnerConfig::connect(client, key, &args.work_dir)?;
    anyhow::ensure!(
        (1..=256).contains(&args.slots),
        "--slots must be between 1 and 256"
    );
    config.slots = args.slots;
    config.grace = args.grace;
    config.drain_timeout = args.drain_timeout;
    if let Some(ms) = std::env::var("NUON_RUNNER_CLAIM_WAIT_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        config.claim_wait = Duration::from_millis(ms);
    }
    Ok(config)
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = term.recv() => {}
                _ = tokio::signal::ctrl_c() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
    tracing::info!("shutdown requested: draining");
}
