//! `nuon-ctl`: the control plane. Its commands live in the crate's library
//! (and everything they do in `nuon-control`); this starts the runtime.

use std::process::ExitCode;

use clap::Parser;
use nuon_ctl::{Cli, run};

fn main() -> ExitCode {
    nuon_control::sys::stop_with_parent();
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nuon-ctl: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nuon-ctl: {e:#}");
            ExitCode::from(64)
        }
    }
}
