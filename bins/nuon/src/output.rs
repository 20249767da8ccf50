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
