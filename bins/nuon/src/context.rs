//! `nuon context add|use|list|remove`: control planes by name, each with
//! its token, as kubectl keeps clusters. They are kept in
//! `$NUON_CONFIG_DIR/contexts.json` (default `$XDG_CONFIG_HOME/nuon`, else
//! `~/.config/nuon`), a file only its owner reads (0600): it holds tokens.
//!
//! What a command talks to: `--api`/`NUON_API_URL` and `--token`/
//! `NUON_TOKEN` when given; else the context `--context`/`NUON_CONTEXT`
//! names, else the current one; else a local control plane
//! (`http://127.0.0.1:7400`, the admin token of `nuon dev` in
//! `./nuon-data`). A context's token is never sent to another address
//! than its own.

use std::collections::BTreeMap;
use std::path::PathBuf;

use clap::Subcommand;
use serde::{Deserialize, Serialize};

use crate::output::emit_with;
use crate::{CliError, Global};

/// The address of a control plane when nothing names one.
const LOCAL_API: &str = "http://127.0.0.1:7400";

#[derive(Debug, Subcommand)]
pub(crate) enum ContextCommand {
    /// Keep a control plane by name: `nuon context add prod --api URL
    /// --token TOKEN [--ca-bundle PEM]` (the global flags); the first one
    /// added becomes the current one.
    Add {
        /// Its name: letters, digits, `-`, `_`, `.`.
        name: String,
    },
    /// Make NAME the current context.
    Use {
        /// A context's name.
        name: String,
    },
    /// The contexts, the current one marked (tokens are never shown).
    List,
    /// Forget a context (and its token).
    Remove {
        /// A context's name.
        name: String,
    },
}

/// One control plane.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Context {
    api: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    ca_bundle: Option<PathBuf>,
}

/// The contexts file.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Contexts {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    current: Option<String>,
    #[serde(default)]
    contexts: BTreeMap<String, Context>,
}

/// What a command talks to, resolved.
#[derive(Debug, Clone, Default)]
pub(crate) struct Target {
    pub(crate) api: String,
    pub(crate) token: Option<String>,
    pub(crate) ca_bundle: Option<PathBuf>,
    /// The context it came from, if any.
    pub(crate) context: Option<String>,
}

fn dir() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("NUON_CONFIG_DIR")
        .or_else(|| var("XDG_CONFIG_HOME").map(|d| d.join("nuon")))
        .or_else(|| var("HOME").map(|h| h.join(".config/nuon")))
}

fn file() -> Result<PathBuf, CliError> {
    dir().map(|d| d.join("contexts.json")).ok_or_else(|| {
        CliError::usage("no place for contexts: set HOME, XDG_CONFIG_HOME or NUON_CONFIG_DIR")
    })
}

fn io_error(what: String) -> impl FnOnce(std::io::Error) -> CliError {
    move |e| CliError {
        message: format!("{what}: {e}"),
        code: 74,
        api_code: None,
    }
}

fn load() -> Result<Contexts, CliError> {
    let Some(path) = dir().map(|d| d.join("contexts.json")) else {
        return Ok(Contexts::default());
    };
    match std::fs::read_to_string(&path) {
        Ok(text) => serde_json::from_str(&text).map_err(|e| {
            CliError::usage(format!(
                "{}: not a contexts file ({e}); fix it, or remove it and add the contexts again",
                path.display()
            ))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Contexts::default()),
        Err(e) => Err(io_error(path.display().to_string())(e)),
    }
}

/// Writes the file whole, readable by its owner only, renamed into place.
fn save(c: &Contexts) -> Result<PathBuf, CliError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let path = file()?;
    let parent = path.parent().map(PathBuf::from).unwrap_or_default();
    std::fs::create_dir_all(&parent).map_err(io_error(parent.display().to_string()))?;
    let part = parent.join(format!(".contexts.json.{}", std::process::id()));
    let text = serde_json::to_string_pretty(c).unwrap_or_default() + "\n";
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&part)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&part, &path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&part);
        return Err(io_error(path.display().to_string())(e));
    }
    Ok(path)
}

/// What `g`'s command talks to.
pub(crate) fn resolve(g: &Global) -> Result<Target, CliError> {
    let contexts = load()?;
    let named = match &g.context {
        Some(n) => Some(n.clone()),
        None if g.api.is_none() => contexts.current.clone(),
        None => None,
    };
    let context = match &named {
        Some(n) => Some(contexts.contexts.get(n).ok_or_else(|| {
            CliError::usage(format!(
                "no context {n:?}: `nuon context list` shows them, `nuon context add {n} --api URL --token TOKEN` adds it"
            ))
        })?),
        None => None,
    };
    let api = g
        .api
        .clone()
        .or_else(|| context.map(|c| c.api.clone()))
        .unwrap_or_else(|| LOCAL_API.to_owned());
    // A context's token goes to its own address only; and a token from the
    // environment does not go to a context's address (NUON_TOKEN set for
    // one control plane while another context is current): there only a
    // `--token` on the command line counts.
    let same = |c: &&Context| c.api.trim_end_matches('/') == api.trim_end_matches('/');
    let given = if g.api.is_none() && context.is_some() {
        g.token.clone().filter(|_| flag_given("--token"))
    } else {
        g.token.clone()
    };
    Ok(Target {
        token: given.or_else(|| context.filter(same).and_then(|c| c.token.clone())),
        ca_bundle: g
            .ca_bundle
            .clone()
            .or_else(|| context.filter(same).and_then(|c| c.ca_bundle.clone())),
        context: named,
        api,
    })
}

/// Whether `flag` is on the command line (not only in the environment).
fn flag_given(flag: &str) -> bool {
    std::env::args().any(|a| a == flag || a.starts_with(&format!("{flag}=")))
}

/// Whether `api` is this machine's (where `nuon dev`'s admin token in
/// `./nuon-data` may go).
pub(crate) fn is_local(api: &str) -> bool {
    let host = api
        .split_once("://")
        .map_or(api, |(_, rest)| rest)
        .split(['/', '?'])
        .next()
        .unwrap_or("");
    let host = host.rsplit_once(':').map_or(host, |(h, port)| {
        if port.chars().all(|c| c.is_ascii_digit()) {
            h
        } else {
            host
        }
    });
    matches!(host, "127.0.0.1" | "localhost" | "[::1]")
}

fn check_name(name: &str) -> Result<(), CliError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(CliError::usage(format!(
            "context name {name:?}: letters, digits, '-', '_' and '.', at most 64"
        )))
    }
}

/// `nuon context ...`.
pub(crate) fn context(g: &Global, command: &ContextCommand) -> Result<u8, CliError> {
    let mut all = load()?;
    match command {
        ContextCommand::Add { name } => {
            check_name(name)?;
            let Some(api) = g.api.clone() else {
                return Err(CliError::usage(
                    "nuon context add NAME needs --api URL (and --token TOKEN, unless the control plane takes none)",
                ));
            };
            nuon_client::ClientConfig::new(&api, "x")
                .map_err(|e| CliError::usage(format!("--api {api}: {e}")))?;
            all.contexts.insert(
                name.clone(),
                Context {
                    api,
                    // Only a token given here: one from the environment
                    // may be another control plane's.
                    token: g.token.clone().filter(|_| flag_given("--token")),
                    ca_bundle: g.ca_bundle.clone(),
                },
            );
            if all.current.is_none() {
                all.current = Some(name.clone());
            }
            let path = save(&all)?;
            done(
                g,
                &all,
                &format!("context {name} kept in {}", path.display()),
            )
        }
        ContextCommand::Use { name } => {
            if !all.contexts.contains_key(name) {
                return Err(CliError::usage(format!(
                    "no context {name:?}: `nuon context list` shows them"
                )));
            }
            all.current = Some(name.clone());
            save(&all)?;
            done(g, &all, &format!("now using context {name}"))
        }
        ContextCommand::Remove { name } => {
            if all.contexts.remove(name).is_none() {
                return Err(CliError::usage(format!(
                    "no context {name:?}: `nuon context list` shows them"
                )));
            }
            if all.current.as_deref() == Some(name) {
                all.current = None;
            }
            save(&all)?;
            done(g, &all, &format!("context {name} removed"))
        }
        ContextCommand::List => {
            emit_with(g, &listing(&all), |_| {
                crate::table(
                    &["CURRENT", "NAME", "API", "TOKEN"],
                    all.contexts
                        .iter()
                        .map(|(n, c)| {
                            vec![
                                if all.current.as_deref() == Some(n) {
                                    "*"
                                } else {
                                    ""
                                }
                                .into(),
                                n.clone(),
                                c.api.clone(),
                                if c.token.is_some() { "kept" } else { "none" }.into(),
                            ]
                        })
                        .collect(),
                );
            })?;
            Ok(0)
        }
    }
}

/// The contexts as `--json` shows them: no token.
fn listing(all: &Contexts) -> serde_json::Value {
    serde_json::json!({
        "current": all.current,
        "contexts": all.contexts.iter().map(|(n, c)| serde_json::json!({
            "name": n, "api": c.api, "token": c.token.is_some(), "ca_bundle": c.ca_bundle,
        })).collect::<Vec<_>>(),
    })
}

/// Says what was done: the contexts under `--json`, else `said`.
fn done(g: &Global, all: &Contexts, said: &str) -> Result<u8, CliError> {
    emit_with(g, &listing(all), |_| outln!("{said}"))?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::is_local;

    #[test]
    fn only_this_machines_addresses_are_local() {
        for api in [
            "http://127.0.0.1:7400",
            "http://localhost",
            "https://[::1]:8443/x",
            "127.0.0.1",
        ] {
            assert!(is_local(api), "{api}");
        }
        for api in [
            "https://nuon.example.com",
            "http://127.0.0.1.evil.example:7400",
            "http://10.0.0.1:7400",
            "http://localhost.example",
        ] {
            assert!(!is_local(api), "{api}");
        }
    }
}
