//! `nuon`: the command-line interface. The commands live in the `nuon_cli` library.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match nuon_cli::Cli::try_parse_args() {
        Ok(cli) => cli,
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
            // Under --json a usage error is one JSON document too.
            let args: Vec<String> = std::env::args().collect();
            if usage && nuon_cli::Cli::wants_document(&args) {
                let error = nuon_cli::CliError::usage(e.kind().to_string());
                println!("{}", error.to_json());
            }
            return ExitCode::from(if usage { 64 } else { 0 });
        }
    };
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nuon: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    ExitCode::from(rt.block_on(nuon_cli::run_to_exit(cli)))
}
