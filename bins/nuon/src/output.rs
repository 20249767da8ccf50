//! What a command prints: one JSON document with `--json`, else text for
//! people. A type with one way to be shown implements [`Render`]; a
//! command with its own words passes them to [`emit_with`]. What is for
//! one of the two alone goes through [`for_people`] (progress, notes) or
//! [`for_machines`] (the document at the end of a followed workflow), a
//! followed log through [`emit_item`], a workflow's progress to
//! [`Progress`]. This is the one file that asks whether `--json` was
//! given (tidy: `cli_output_is_chosen_in_one_place`).

use std::io::{IsTerminal, Write};

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
    try_emit_with(g, value, |v| {
        text(v);
        Ok(())
    })
}

/// Prints `value`: JSON under `--json`, else what `text` prints, which may
/// fail (it writes files too).
pub(crate) fn try_emit_with<T: Serialize>(
    g: &Global,
    value: &T,
    text: impl FnOnce(&T) -> Result<(), CliError>,
) -> Result<(), CliError> {
    if g.json {
        print_json(value)
    } else {
        text(value)
    }
}

/// Prints `value` under `--json`, and nothing for people: they have seen
/// it as it came (a followed workflow's progress, a job's log).
pub(crate) fn for_machines<T: Serialize>(g: &Global, value: &T) -> Result<(), CliError> {
    emit_with(g, value, |_| {})
}

/// Runs `text` for people only (without `--json`): a line of progress, a
/// note on standard error, a log shown as it comes. Under `--json` the
/// command's document says it, or nothing does.
pub(crate) fn for_people(g: &Global, text: impl FnOnce()) {
    if !g.json {
        text();
    }
}

/// One item of a stream (a followed log): under `--json` a compact
/// document a line (see [`stream_item`]), else what `text` prints.
pub(crate) fn emit_item<T: Serialize>(g: &Global, item: &T, text: impl FnOnce(&T)) {
    if g.json {
        outln!("{}", stream_item(item));
    } else {
        text(item);
    }
}

/// Where the progress of a command goes (a followed workflow's steps):
/// standard output for people; under `--json` standard error, as standard
/// output then carries the one document alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// Standard output: text for people.
    Stdout,
    /// Standard error: beside a document on standard output.
    Stderr,
}

impl Progress {
    /// Where the progress of `g`'s command goes.
    pub(crate) fn of(g: &Global) -> Self {
        if g.json {
            Progress::Stderr
        } else {
            Progress::Stdout
        }
    }

    /// A writer to it, locked while it lives.
    pub(crate) fn writer(self) -> Box<dyn Write> {
        match self {
            Progress::Stdout => Box::new(std::io::stdout().lock()),
            Progress::Stderr => Box::new(std::io::stderr().lock()),
        }
    }

    /// Whether it is a terminal (where a list can be redrawn in place).
    pub(crate) fn is_terminal(self) -> bool {
        match self {
            Progress::Stdout => std::io::stdout().is_terminal(),
            Progress::Stderr => std::io::stderr().is_terminal(),
        }
    }
}

/// How a failed command is told, read from its command line before it
/// runs (the command takes the line).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Report {
    /// Under `--json`: the error's document on standard output too.
    document: bool,
}

impl Report {
    /// How `g`'s command tells of a failure.
    pub(crate) fn of(g: &Global) -> Self {
        Report { document: g.json }
    }

    /// Tells of `e`: under `--json` its document on standard output
    /// ([`CliError::to_json`]); its message on standard error always.
    pub(crate) fn tell(self, e: &CliError) {
        if self.document {
            println!("{}", e.to_json());
        }
        eprintln!("nuon: {}", e.message);
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

/// Settles what `g`'s flags ask for, once, at parse time: the form of the
/// process's documents, and `--output json|yaml` means `--json`.
pub(crate) fn settle(g: &mut Global) {
    set_format(g.output.unwrap_or_default());
    g.json |= g.output.is_some_and(|o| o != Format::Table);
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
