//! `nuon version`, `nuon completion SHELL` and `nuon man DIR`: what this
//! CLI is, how a shell completes it, and its manual pages.

use clap::CommandFactory;

use crate::output::emit_with;
use crate::{Cli, CliError, Global, client};

/// `nuon version`: this CLI's version, and the control plane's (from its
/// OpenAPI document); exit 1 when the control plane cannot say.
pub(crate) async fn version(g: &Global) -> Result<u8, CliError> {
    let ours = env!("CARGO_PKG_VERSION");
    let theirs = match client(g) {
        Ok(c) => c.server_version().await.map_err(CliError::from),
        Err(e) => Err(e),
    };
    let mut v =
        serde_json::json!({"client": ours, "api": g.api_url(), "context": g.target.context});
    match &theirs {
        Ok(t) => v["control_plane"] = t.clone().into(),
        Err(e) => v["control_plane_error"] = e.message.clone().into(),
    }
    emit_with(g, &v, |_| {
        outln!("nuon {ours}");
        match &theirs {
            Ok(t) => match &g.target.context {
                Some(c) => outln!("control plane {t} ({}, context {c})", g.api_url()),
                None => outln!("control plane {t} ({})", g.api_url()),
            },
            Err(e) => eprintln!("control plane at {}: {}", g.api_url(), e.message),
        }
    })?;
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

/// `nuon man DIR`: a page per command, named by its path (`nuon-apps-create.1`).
pub(crate) fn man(g: &Global, dir: &std::path::Path) -> Result<u8, CliError> {
    fn pages(cmd: clap::Command, name: String, out: &mut Vec<(String, clap::Command)>) {
        // `build` gave each its display name, `nuon-apps-create`: the
        // page's title; its usage line is `nuon apps create`.
        for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
            pages(sub.clone(), format!("{name}-{}", sub.get_name()), out);
        }
        out.push((name, cmd));
    }
    let fail = |what: String| CliError {
        message: what,
        code: 74,
        api_code: None,
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| fail(format!("cannot create {}: {e}", dir.display())))?;
    let mut all = Vec::new();
    let mut root = Cli::command();
    root.build();
    pages(root, "nuon".into(), &mut all);
    all.sort_by(|a, b| a.0.cmp(&b.0));
    let mut written = Vec::new();
    for (name, cmd) in all {
        let path = dir.join(format!("{name}.1"));
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd)
            .render(&mut page)
            .map_err(|e| fail(format!("cannot render {name}'s page: {e}")))?;
        std::fs::write(&path, page)
            .map_err(|e| fail(format!("cannot write {}: {e}", path.display())))?;
        written.push(path.display().to_string());
    }
    let doc = serde_json::json!({ "pages": written });
    emit_with(g, &doc, |_| {
        outln!("{} pages in {}", written.len(), dir.display())
    })?;
    Ok(0)
}
