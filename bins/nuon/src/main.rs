//! `nuon`: the command-line interface. The commands live in the `nuon_cli` library.

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = match nuon_cli::Cli::try_parse_args() {
        Ok(cli) => cli,
        Err(e) => {
            let usage = e.use_stderr();
            let _ = e.print();
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
    match rt.block_on(nuon_cli::run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(e) => {
            eprintln!("nuon: {}", e.message);
            ExitCode::from(e.code)
        }
    }
}
