//! Go's `text/template` language with sprig's functions, as Nuon's app
//! configs (and Helm charts) use it.
//!
//! The whole language: actions, pipelines and parenthesized calls,
//! variables (`$x :=`, `$x =`, `$`), `if`/`else if`/`else`, `with`/`else`,
//! `range` over lists and maps (with `break` and `continue`), `define`,
//! `template` and `block`, comments and `{{-`/`-}}` trimming; Go's builtins
//! and sprig 3's library. Values behave as Go's do: JSON numbers are
//! `float64` (so `eq .n 3` is an error, as in Go), maps iterate in key
//! order, `printf` has Go's verbs, and a missing key prints `<no value>`.
//! `tests/templates/` holds the differential test against Go 1.19 and
//! sprig 3.2.3 themselves.
//!
//! ```
//! use nuon_template::{Template, Value};
//!
//! let t = Template::parse("example", r#"{{ range $i, $r := .regions }}{{ if $i }},{{ end }}{{ upper $r }}{{ end }}"#)?;
//! let data = Value::from_json(&serde_json::json!({"regions": ["us", "eu"]}));
//! assert_eq!(t.execute(&data)?, "US,EU");
//! # Ok::<(), nuon_template::Error>(())
//! ```
//!
//! Not provided: functions that read the control plane's environment
//! (`env`, `expandenv`), look up hosts, or generate keys and certificates
//! (a parse error says why); time zones other than UTC; methods on values
//! (`.Major` of `semver` is a map key here).

mod budget;
mod exec;
mod fmt;
mod funcs;
mod lex;
mod parse;
pub mod time;
mod value;

use std::collections::HashSet;

pub use budget::Budget;
pub use fmt::{json, quote, sprintf};
pub use value::{Elem, IntType, Value};

/// What a missing map key gives: Go's `missingkey` option.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum MissingKey {
    /// `<no value>` when printed (Go's default).
    #[default]
    Default,
    /// The zero value of the map's element type.
    Zero,
    /// An error.
    Error,
}

/// What kind of error a template gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorKind {
    /// The text is not a template (Go's parse errors).
    Parse,
    /// Executing it failed (a function's error, a missing value...).
    #[default]
    Exec,
    /// Executing it ran out of its [`Budget`] of steps or time.
    Budget,
}

/// A parse or execution error, at a place in the template's text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name}:{line}:{col}: {message}")]
pub struct Error {
    /// What kind of error it is.
    pub kind: ErrorKind,
    /// The template's name (for a config, its file and key).
    pub name: String,
    /// 1-based line inside the template.
    pub line: usize,
    /// 1-based column (in characters).
    pub col: usize,
    /// Byte offset inside the template.
    pub offset: usize,
    /// What went wrong; an execution error says where (`at <.x>`).
    pub message: String,
}

/// A parsed template.
#[derive(Debug, Clone)]
pub struct Template {
    name: String,
    source: String,
    trees: parse::Trees,
    missing_key: MissingKey,
    no_value_is_error: bool,
    max_output: usize,
    budget: Option<Budget>,
    unknown: Option<String>,
}

/// A field chain the template reads from its data (`.nuon.install.id` is
/// `["nuon", "install", "id"]`), where the template says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRef {
    /// The keys, from the data's root.
    pub path: Vec<String>,
    /// Byte offset in the template.
    pub offset: usize,
    /// Byte offset just past the chain.
    pub end: usize,
    /// Whether the chain is printed as it is (`{{ .a.b }}`), rather than
    /// handed to a function or tested (`{{ .a.b | default "x" }}`,
    /// `{{ if .a.b }}`).
    pub printed: bool,
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

impl Template {
    /// Parses `text`; `name` names it in errors (`components/db.toml`).
    pub fn parse(name: &str, text: &str) -> Result<Template, Error> {
        let is_func = |n: &str| funcs::exists(n);
        match parse::parse(text, &is_func) {
            Ok(trees) => Ok(Template {
                name: name.into(),
                source: text.into(),
                trees,
                missing_key: MissingKey::Default,
                no_value_is_error: false,
                unknown: None,
                max_output: 64 << 20,
                budget: None,
            }),
            Err(e) => {
                let mut message = e.message;
                let why = message
                    .strip_prefix("function \"")
                    .and_then(|m| m.strip_suffix("\" not defined"))
                    .and_then(funcs::not_provided);
                if let Some(why) = why {
                    message = format!("{message}: {why}");
                }
                Err(Self::error_at(ErrorKind::Parse, name, text, e.pos, message))
            }
        }
    }

    fn error_at(kind: ErrorKind, name: &str, text: &str, offset: usize, message: String) -> Error {
        let (line, col) = line_col(text, offset);
        Error {
            kind,
            name: name.into(),
            line,
            col,
            offset,
            message,
        }
    }

    /// Sets what a missing map key gives (Go's `Option("missingkey=…")`).
    pub fn missing_key(mut self, m: MissingKey) -> Self {
        self.missing_key = m;
        self
    }

    /// Makes an action that prints no value (`<no value>` in Go) an error
    /// naming what it read, so a typo in a config cannot render silently.
    pub fn no_value_is_error(mut self, yes: bool) -> Self {
        self.no_value_is_error = yes;
        self
    }

    /// Names the text that stands for a value not known yet (Terraform's
    /// `(known after apply)`): a field of it, or an index into it, is that
    /// text again, as Terraform's unknowns propagate, so a template that
    /// reads into an output not known yet renders as not known rather
    /// than failing.
    pub fn unknown(mut self, marker: &str) -> Self {
        self.unknown = Some(marker.to_owned());
        self
    }

    /// Whether `v` is the text [`Template::unknown`] names.
    pub(crate) fn is_unknown(&self, v: &value::Value) -> bool {
        matches!((v, &self.unknown), (value::Value::Str(s), Some(m)) if **s == **m)
    }

    /// Caps the output (64 MiB unless set).
    pub fn max_output(mut self, bytes: usize) -> Self {
        self.max_output = bytes;
        self
    }

    /// Renders under `budget`, shared with every other render that holds
    /// a clone of it. Unless set, each render has a [`Budget::default`]
    /// of its own.
    pub fn budget(mut self, budget: Budget) -> Self {
        self.budget = Some(budget);
        self
    }

    /// The template's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the text has any action at all (plain text renders as is).
    pub fn is_plain(&self) -> bool {
        self.trees.defined.is_empty()
            && self
                .trees
                .main
                .iter()
                .all(|n| matches!(n, parse::Node::Text(_)))
    }

    /// Renders the template with `data`.
    pub fn execute(&self, data: &Value) -> Result<String, Error> {
        let meter = match &self.budget {
            Some(b) => b.start(),
            None => budget::Meter::own(),
        };
        let mut state = exec::State::new(self, data, meter);
        let (kind, pos, end, msg) = match state.walk_list(data, &self.trees.main) {
            Ok(()) => return Ok(std::mem::take(&mut state.out)),
            Err(exec::Stop::Err(pos, end, msg)) => (ErrorKind::Exec, pos, end, msg),
            Err(exec::Stop::Exhausted(pos, end, msg)) => (ErrorKind::Budget, pos, end, msg),
            Err(_) => {
                return Err(Self::error_at(
                    ErrorKind::Exec,
                    &self.name,
                    &self.source,
                    0,
                    "break or continue outside range".into(),
                ));
            }
        };
        let at = &self.source[pos.min(self.source.len())
            ..end.min(self.source.len()).max(pos.min(self.source.len()))];
        let message = if at.is_empty() {
            format!("executing {:?}: {msg}", self.name)
        } else {
            format!("executing {:?} at <{at}>: {msg}", self.name)
        };
        Err(Self::error_at(kind, &self.name, &self.source, pos, message))
    }

    /// Renders the template with JSON data, read as Go's `encoding/json`
    /// reads it into `interface{}`.
    pub fn execute_json(&self, data: &serde_json::Value) -> Result<String, Error> {
        self.execute(&Value::from_json(data))
    }

    /// Every function the template calls.
    pub fn functions(&self) -> HashSet<String> {
        let mut out = HashSet::new();
        parse::collect_idents(&self.trees.main, &mut out);
        for t in self.trees.defined.values() {
            parse::collect_idents(t, &mut out);
        }
        out
    }

    /// Every field chain read from the data's root: `.a.b` where dot is the
    /// root, and `$.a.b` anywhere.
    pub fn references(&self) -> Vec<FieldRef> {
        let mut out = Vec::new();
        parse::collect_refs(&self.trees.main, true, &mut out);
        for t in self.trees.defined.values() {
            parse::collect_refs(t, false, &mut out);
        }
        out
    }
}

/// Renders `text` once with `data` (parse and execute).
pub fn render(name: &str, text: &str, data: &Value) -> Result<String, Error> {
    Template::parse(name, text)?.execute(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fails(text: &str) -> Error {
        let data = serde_json::json!({"list": [1, 2], "m": {"a": 1}});
        Template::parse("components/api.toml vars.x", text)
            .and_then(|t| t.execute_json(&data))
            .unwrap_err()
    }

    /// An error while rendering says the template, its line and column
    /// (1-based: Go counts columns from 0), the action it was executing
    /// and the function or field, in the words of Go's `text/template`.
    #[test]
    fn errors_while_rendering_say_where_and_which_function() {
        let at = "components/api.toml vars.x";
        for (text, line, col, said) in [
            (
                "a\n  {{ required \"the domain is needed\" .nope }}",
                2,
                6,
                "at <required \"the domain is needed\" .nope>: error calling required: the domain is needed",
            ),
            (
                "{{ fail \"boom\" }}",
                1,
                4,
                "at <fail \"boom\">: error calling fail: boom",
            ),
            (
                "x {{ index .list 5 }}",
                1,
                6,
                "at <index .list 5>: error calling index: index out of range: 5",
            ),
            (
                "{{ .m.a.b }}",
                1,
                4,
                "at <.m.a.b>: can't evaluate field b in type float64",
            ),
        ] {
            let e = fails(text);
            assert_eq!((e.line, e.col), (line, col), "{text:?}: {e}");
            assert_eq!(e.message, format!("executing {at:?} {said}"), "{text:?}");
            assert_eq!(e.to_string(), format!("{at}:{line}:{col}: {}", e.message));
        }
    }

    /// A value not known yet stays not known through a field or an index,
    /// as Terraform's unknowns do; any other text still fails as Go's.
    #[test]
    fn an_unknown_value_propagates_through_fields_and_index() {
        let data = serde_json::json!({"out": "(unknown)", "s": "text"});
        let run = |text: &str| {
            Template::parse("t", text)
                .unwrap()
                .unknown("(unknown)")
                .execute_json(&data)
        };
        assert_eq!(run("{{ .out.tags.name }}").unwrap(), "(unknown)");
        assert_eq!(run("{{ index .out \"a/b\" 0 }}").unwrap(), "(unknown)");
        assert_eq!(run("x={{ (index .out \"k\").v }}").unwrap(), "x=(unknown)");
        assert!(run("{{ .s.field }}").is_err());
        assert!(run("{{ index .s \"k\" }}").is_err());
        let plain = Template::parse("t", "{{ .out.tags }}").unwrap();
        assert!(plain.execute_json(&data).is_err(), "only when asked");
    }

    /// `now` is the time of the render (Go's `time.Now`, formatted by
    /// `date` and read by `unixEpoch`).
    #[test]
    fn now_is_the_time_of_the_render() {
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let data = serde_json::json!({});
        let out = Template::parse("t", "{{ now | unixEpoch }}")
            .and_then(|t| t.execute_json(&data))
            .unwrap();
        let epoch: i64 = out.parse().unwrap();
        assert!((before..=before + 5).contains(&epoch), "{out} vs {before}");
        let year = Template::parse("t", "{{ now | date \"2006\" }}")
            .and_then(|t| t.execute_json(&data))
            .unwrap();
        let want = 1970 + before / 31_556_952;
        assert!(
            year.parse::<i64>().is_ok_and(|y| (y - want).abs() <= 1),
            "{year}"
        );
    }
}

#[cfg(test)]
mod budget_tests {
    use std::time::Duration;

    use super::*;

    fn run(text: &str, budget: &Budget) -> Result<String, Error> {
        Template::parse("t", text)?
            .budget(budget.clone())
            .execute_json(&serde_json::json!({"n": 3}))
    }

    /// Nested ranges that print nothing stop at the budget's steps,
    /// naming where they were and the budget.
    #[test]
    fn work_that_prints_nothing_stops_at_the_budget() {
        let b = Budget::new(10_000, Duration::from_secs(60));
        let e = run(
            "a\n{{ range until 1000000 }}{{ range until 1000000 }}{{ end }}{{ end }}",
            &b,
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Budget, "{e}");
        assert_eq!(e.line, 2, "{e}");
        assert!(e.message.contains("over 10000 steps"), "{e}");
        assert!(b.is_spent());
        // A small render under the same budget is refused too: it is shared.
        assert_eq!(run("{{ .n }}", &b).unwrap_err().kind, ErrorKind::Budget);
        // A fresh one renders it.
        assert_eq!(run("{{ .n }}", &Budget::default()).unwrap(), "3");
    }

    /// A function's result counts by its size: a loop of big lists runs
    /// out long before it has made them all.
    #[test]
    fn a_functions_result_counts_by_its_size() {
        let b = Budget::new(100_000, Duration::from_secs(60));
        let e = run(
            "{{ range until 1000 }}{{ $x := until 100000 }}{{ end }}",
            &b,
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Budget, "{e}");
        assert!(b.used() < 300_000, "{}", b.used());
    }

    /// Time counts as well as steps: a budget of many steps and little
    /// time stops on time.
    #[test]
    fn the_time_budget_stops_a_render_too() {
        let b = Budget::new(u64::MAX / 2, Duration::from_millis(20));
        let e = run(
            "{{ range until 1000000 }}{{ range until 1000000 }}{{ end }}{{ end }}",
            &b,
        )
        .unwrap_err();
        assert_eq!(e.kind, ErrorKind::Budget, "{e}");
        assert!(
            e.message.contains("time budget exhausted: over 20 ms"),
            "{e}"
        );
        assert!(b.spent() >= Duration::from_millis(20));
    }

    /// Ordinary templates are far inside the default budget.
    #[test]
    fn ordinary_templates_use_little_of_the_budget() {
        let b = Budget::default();
        let out = run(
            "{{ range $i, $r := list \"a\" \"b\" \"c\" }}{{ if $i }},{{ end }}{{ upper $r }}{{ end }}",
            &b,
        )
        .unwrap();
        assert_eq!(out, "A,B,C");
        assert!(b.used() < 100, "{}", b.used());
    }

    /// Runs `f` on a thread with tokio's blocking-pool stack (2 MiB), the
    /// one renders run on.
    fn on_small_stack<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
        std::thread::Builder::new()
            .stack_size(2 << 20)
            .spawn(f)
            .unwrap()
            .join()
            .unwrap()
    }

    /// Nesting deep enough to overflow a render thread's stack is refused
    /// with an error: in the text (parenthesized pipelines, control
    /// structures) and at run time (a template calling itself from inside
    /// nested bodies).
    #[test]
    fn deep_nesting_in_the_text_is_an_error_not_a_stack_overflow() {
        for text in [
            format!("{{{{ {}1{} }}}}", "(".repeat(20_000), ")".repeat(20_000)),
            format!(
                "{}x{}",
                "{{ if 1 }}".repeat(20_000),
                "{{ end }}".repeat(20_000)
            ),
        ] {
            let e = on_small_stack(move || Template::parse("t", &text).unwrap_err());
            assert!(e.message.contains("max expression depth exceeded"), "{e}");
        }
    }

    #[test]
    fn deep_nesting_at_run_time_is_an_error_not_a_stack_overflow() {
        let text = format!(
            "{{{{ define \"a\" }}}}{}{{{{ template \"a\" . }}}}{}{{{{ end }}}}{{{{ template \"a\" 1 }}}}",
            format!("{{{{ if {} }}}}", "(".repeat(8) + "1" + &")".repeat(8)).repeat(90),
            "{{ end }}".repeat(90)
        );
        let e = on_small_stack(move || {
            Template::parse("t", &text)
                .unwrap()
                .execute_json(&serde_json::json!({}))
                .unwrap_err()
        });
        assert!(e.message.contains("exceeded maximum nesting (200"), "{e}");
    }

    /// Arithmetic on a template's numbers wraps as Go's ints do, never
    /// panics (the fuzz build checks overflow): ranges at the ends of
    /// int64, a durations past int64 nanoseconds, version parts at the end
    /// of uint64, abbreviation offsets, negative `*` widths and precisions.
    #[test]
    fn numbers_at_the_ends_of_their_range_do_not_panic() {
        let r = |text: &str| {
            Template::parse("t", text)
                .unwrap()
                .execute_json(&serde_json::json!({}))
                .map_err(|e| e.message)
        };
        assert_eq!(r("[{{ seq 9223372036854775807 }}]").unwrap(), "[]");
        assert_eq!(r("[{{ seq -9223372036854775808 }}]").unwrap(), "[]");
        let e = r("{{ untilStep 0 9223372036854775807 4611686018427387904 }}").unwrap_err();
        assert!(e.contains("over a million items"), "{e}");
        let e = r(r#"{{ mustDateModify "999999999999999999999999h" now }}"#).unwrap_err();
        assert!(e.contains("invalid duration"), "{e}");
        r(r#"{{ ago (dateModify "-999999999999999999999999h" now) }}"#).unwrap();
        assert_eq!(
            r(r#"{{ semverCompare "~18446744073709551615" "1.0.0" }}"#).unwrap(),
            "false"
        );
        r(r#"{{ abbrevboth -9223372036854775808 5 "abcdefghijklmn" }}"#).unwrap();
        assert_eq!(r(r#"[{{ printf "%*d" -5 1 }}]"#).unwrap(), "[1    ]");
        assert_eq!(r(r#"{{ printf "%.*d" -1 1 }}"#).unwrap(), "%!(BADPREC)1");
        assert_eq!(r(r#"{{ printf "%.3d" 1 }}"#).unwrap(), "001");
        // `range ... =` sets variables declared before it, and only those.
        assert_eq!(
            r("{{ $i := 0 }}{{ $v := 0 }}{{ range $i, $v = list 7 8 }}{{ end }}{{ $i }}{{ $v }}")
                .unwrap(),
            "18"
        );
        let e = r("{{ and 0 ($v := 1) }}{{ range $i, $v = list 1 2 }}{{ end }}").unwrap_err();
        assert!(e.contains("undefined variable"), "{e}");
    }

    /// A bomb in one call is refused before it is made (the budget counts
    /// a result once it exists): results that would be huge, values
    /// nested deep or holding themselves, text of a value shared many
    /// times inside itself. Each of these took gigabytes or minutes.
    #[test]
    fn one_call_cannot_make_a_bomb() {
        let r = |text: &str| {
            let text = text.to_owned();
            on_small_stack(move || {
                Template::parse("t", &text)
                    .unwrap()
                    .execute_json(&serde_json::json!({}))
                    .map_err(|e| e.message)
            })
        };
        for (text, want) in [
            (
                r#"{{ replace "a" (repeat 10000 "x") (repeat 1000000 "a") }}"#,
                "replace would make",
            ),
            (
                r#"{{ regexReplaceAll "a" (repeat 1000000 "a") (repeat 10000 "x") }}"#,
                "regexReplaceAll would make",
            ),
            (
                r#"{{ indent 65536 (repeat 1000000 "\n") }}"#,
                "indent would make",
            ),
            (
                r#"{{ wrapWith 1 (repeat 1000000 "x") (repeat 1000000 "a ") }}"#,
                "wrapWith would make",
            ),
            (
                r#"{{ join (repeat 1000000 "x") (until 100000) }}"#,
                "join would make",
            ),
            (r#"{{ split "" (repeat 16000000 "a") }}"#, "over a million"),
            (
                r#"{{ regexFindAll "" (repeat 16000000 "a") -1 }}"#,
                "over a million",
            ),
            (
                r#"{{ regexMatch "[a-m][A-Za-z]{300}[^A-Za-z]" (repeat 16 (randAlpha 65536)) }}"#,
                "too much work",
            ),
            (
                r#"{{ $x := list }}{{ range until 100000 }}{{ $x = list $x }}{{ end }}"#,
                "over 100 levels",
            ),
            (
                r#"{{ $d := dict }}{{ $_ := set $d "a" $d }}{{ $d }}"#,
                "a cycle",
            ),
            (
                r#"{{ $x := list 1 }}{{ range until 40 }}{{ $x = list $x $x }}{{ end }}{{ deepCopy $x }}"#,
                "deepCopy would make",
            ),
            (
                r#"{{ $x := list 1 }}{{ range until 40 }}{{ $x = list $x $x }}{{ end }}{{ $x }}"#,
                "output is over",
            ),
            (
                r#"{{ $x := list 1 }}{{ range until 40 }}{{ $x = list $x $x }}{{ end }}{{ toJson $x }}"#,
                "over",
            ),
        ] {
            // Slow builds reach the time budget first: refused either way.
            let e = r(text).unwrap_err();
            assert!(
                e.contains(want) || e.contains("budget exhausted"),
                "{text}: {e}"
            );
        }
        // What they are made of still works at a config's sizes.
        assert_eq!(r(r#"{{ replace "a" "bb" "aXa" }}"#).unwrap(), "bbXbb");
        assert_eq!(
            r(r#"{{ regexReplaceAll "a(x*)b" "-ab-axxb-" "${1}W" }}"#).unwrap(),
            "-W-xxW-"
        );
        assert_eq!(
            r(r#"{{ list 1 1 "1" 2.0 (list 1) (list 1) | uniq }}"#).unwrap(),
            "[1 1 2 [1]]"
        );
        assert_eq!(r(r#"{{ trimAll "$x" "$$5.00x$" }}"#).unwrap(), "5.00");
        assert_eq!(
            r(r#"{{ regexMatch "^[a-z]+[0-9]?$" (repeat 1000000 "a") }}"#).unwrap(),
            "true"
        );
    }
}
