//! `nuon version` and `nuon completion SHELL`: what this CLI is, and how a
//! shell completes it.

use clap::CommandFactory;

use crate::{Cli, CliError, Global, client, print_json};

/// `nuon version`: this CLI's version, and the control plane's (from its
/// OpenAPI document); exit 1 when the control plane cannot say.
pub(crate) async fn version(g: &Global) -> Result<u8, CliError> {
    let ours = env!("CARGO_PKG_VERSION");
    let theirs = match client(g) {
        Ok(c) => c.server_version().await.map_err(CliError::from),
        Err(e) => Err(e),
    };
    if g.json {
        let mut v =
            serde_json::json!({"client": ours, "api": g.api_url(), "context": g.target.context});
        match &theirs {
            Ok(t) => v["control_plane"] = t.clone().into(),
            Err(e) => v["control_plane_error"] = e.message.clone().into(),
        }
        print_json(&v)?;
    } else {
        outln!("nuon {ours}");
        match &theirs {
            Ok(t) => match &g.target.context {
                Some(c) => outln!("control plane {t} ({}, context {c})", g.api_url()),
                None => outln!("control plane {t} ({})", g.api_url()),
            },
            Err(e) => eprintln!("control plane at {}: {}", g.api_url(), e.message),
        }
    }
    Ok(if theirs.is_ok() { 0 } else { 1 })
}

/// `nuon completion SHELL`: the completion script, on standard output.
pub(crate) fn completion(shell: clap_complete::Shell) -> Result<u8, CliError> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "nuon", &mut out);
    use std::io::Write as _;
    std::io::stdout().write_all(&out).map_err(|e| CliError {
        message: format!("standard output: {e}"),
        code: 74,
        api_code: None,
    })?;
    Ok(0)
}
