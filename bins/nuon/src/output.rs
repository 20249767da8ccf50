//! What a command prints: one JSON document with `--json`, else text for
//! people. A type with one way to be shown implements [`Render`]; a
//! command with its own words passes them to [`emit_with`].

use serde::Serialize;

use crate::{CliError, Global, print_json};

/// A value as people read it (a table, or `key: value` lines).
pub(crate) trait Render: Serialize {
    /// Prints it for people.
    fn render(&self);
}

/// Prints `value`: JSON under `--json`, else its [`Render`].
pub(crate) fn emit<T: Render>(g: &Global, value: &T) -> Result<(), CliError> {
    emit_with(g, value, T::render)
}

/// Prints `value`: JSON under `--json`, else what `text` prints.
pub(crate) fn emit_with<T: Serialize>(
    g: &Global,
    value: &T,
    text: impl FnOnce(&T),
) -> Result<(), CliError> {
    if g.json {
        print_json(value)
    } else {
        text(value);
        Ok(())
    }
}

/// The form of machine-readable output (`--output`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Format {
    /// Tables and lines for people.
    #[default]
    Table,
    /// JSON documents (as `--json`).
    Json,
    /// The same documents in YAML.
    Yaml,
}

static FORMAT: std::sync::OnceLock<Format> = std::sync::OnceLock::new();

/// Sets the form of this process's documents (once, at parse time).
pub(crate) fn set_format(format: Format) {
    let _ = FORMAT.set(format);
}

fn yaml() -> bool {
    FORMAT.get() == Some(&Format::Yaml)
}

/// An error's document: YAML opens with `---`, so that after a stream of
/// documents (a followed log) it is a document of its own.
pub(crate) fn error_document(doc: &serde_json::Value) -> String {
    match document(doc, false) {
        Ok(text) if yaml() => format!("---\n{text}"),
        Ok(text) => text,
        Err(_) => doc.to_string(),
    }
}

/// `value` as the one document of a command: YAML under `--output yaml`,
/// else JSON (`pretty` or compact).
pub(crate) fn document<T: Serialize>(value: &T, pretty: bool) -> Result<String, String> {
    if yaml() {
        return serde_yaml::to_string(value)
            .map(|t| t.trim_end().to_owned())
            .map_err(|e| e.to_string());
    }
    let text = if pretty {
        serde_json::to_string_pretty(value)
    } else {
        serde_json::to_string(value)
    };
    text.map_err(|e| e.to_string())
}

/// One item of a stream (a followed log): a compact JSON line, or a YAML
/// document after `---`.
pub(crate) fn stream_item<T: Serialize>(value: &T) -> String {
    match document(value, false) {
        Ok(text) if yaml() => format!("---\n{text}"),
        Ok(text) => text,
        Err(e) => format!("{{\"error\":{:?}}}", e),
    }
}
