//! Where a problem is: files, positions, and the list of every problem found.

use std::fmt;
use std::ops::Range;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One problem in an app config, at a place in one of its files.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
pub struct Diagnostic {
    /// The file, relative to the config directory (`components/db.toml`).
    pub file: String,
    /// 1-based line.
    pub line: u32,
    /// 1-based column, in characters.
    pub col: u32,
    /// A warning does not make the config invalid: something Nuon has that
    /// is ignored here.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub warning: bool,
    /// What is wrong, and how to fix it when we can tell.
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.warning { "warning: " } else { "" };
        write!(
            f,
            "{}:{}:{}: {kind}{}",
            self.file, self.line, self.col, self.message
        )
    }
}

/// Every problem of a config, sorted by file and position.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// Whether nothing at all was found.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether any problem is an error (not a warning).
    pub fn has_errors(&self) -> bool {
        self.0.iter().any(|d| !d.warning)
    }

    /// The errors only.
    pub fn errors(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| !d.warning)
    }

    /// The warnings only.
    pub fn warnings(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter().filter(|d| d.warning)
    }

    /// How many problems.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The problems.
    pub fn iter(&self) -> impl Iterator<Item = &Diagnostic> {
        self.0.iter()
    }

    /// Adds one problem.
    pub fn push(&mut self, d: Diagnostic) {
        self.0.push(d);
    }

    /// Sorts by file and position and drops exact repeats.
    pub fn finish(mut self) -> Self {
        self.0.sort();
        self.0.dedup();
        self
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.0 {
            writeln!(f, "{d}")?;
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

/// One file of a config, with what it takes to turn offsets into lines and
/// columns.
#[derive(Debug, Clone)]
pub struct SourceFile {
    /// The path relative to the config directory, with `/` separators.
    pub name: String,
    /// The text.
    pub text: String,
    line_starts: Vec<usize>,
}

impl SourceFile {
    /// A file named `name` holding `text`.
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        let text = text.into();
        let line_starts = std::iter::once(0)
            .chain(memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1))
            .collect();
        SourceFile {
            name: name.into(),
            text,
            line_starts,
        }
    }

    /// The 1-based line and column (in characters) of a byte offset.
    pub fn position(&self, offset: usize) -> (u32, u32) {
        let offset = offset.min(self.text.len());
        let line = self.line_starts.partition_point(|s| *s <= offset) - 1;
        let start = self.line_starts[line];
        let mut end = offset;
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let col = self.text[start..end].chars().count() + 1;
        (line as u32 + 1, col as u32)
    }

    /// A diagnostic at a byte offset of this file.
    pub fn diag(&self, offset: usize, message: impl Into<String>) -> Diagnostic {
        let (line, col) = self.position(offset);
        Diagnostic {
            file: self.name.clone(),
            line,
            col,
            warning: false,
            message: message.into(),
        }
    }

    /// A warning at the start of a span.
    pub fn warn(&self, span: &Range<usize>, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            warning: true,
            ..self.diag(span.start, message)
        }
    }

    /// A diagnostic at the start of a span.
    pub fn at(&self, span: &Range<usize>, message: impl Into<String>) -> Diagnostic {
        self.diag(span.start, message)
    }
}

/// The closest of `candidates` to `word`, when it is close enough to be a
/// likely typo.
pub(crate) fn suggest<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    candidates
        .into_iter()
        .map(|c| (strsim::jaro_winkler(word, c), c))
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

/// `, did you mean "x"?` or nothing.
pub fn did_you_mean<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> String {
    suggest(word, candidates)
        .map(|s| format!(", did you mean {s:?}?"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_count_lines_and_characters() {
        let f = SourceFile::new("a.toml", "x = 1\né = \"y\"\n\nz");
        assert_eq!(f.position(0), (1, 1));
        assert_eq!(f.position(4), (1, 5));
        assert_eq!(f.position(6), (2, 1));
        // After "é = " (é is two bytes): the fifth character.
        assert_eq!(f.position(11), (2, 5));
        assert_eq!(f.position(15), (3, 1));
        assert_eq!(f.position(16), (4, 1));
        assert_eq!(f.position(999), (4, 2));
        let d = f.diag(11, "bad");
        assert_eq!(d.to_string(), "a.toml:2:5: bad");
    }

    #[test]
    fn suggestions_catch_typos_only() {
        let keys = ["chart_name", "namespace", "values"];
        assert_eq!(suggest("chart_nme", keys), Some("chart_name"));
        assert_eq!(suggest("namespce", keys), Some("namespace"));
        assert_eq!(suggest("replicas", keys), None);
        assert_eq!(did_you_mean("valeus", keys), ", did you mean \"values\"?");
    }
}
