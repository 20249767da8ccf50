//! The book (`docs/`): its reference pages are made from the code, so they
//! cannot drift, and it builds with no broken link.
//!
//! - `docs/src/reference/config.md`: every key the app config loader reads
//!   ([`nuon_appconfig::key_table`] over every config of the repository), with what
//!   it holds, and its words from `docs/config-keys.toml`;
//! - `docs/src/reference/cli.md`: every command of the four binaries, as
//!   clap prints its help;
//! - `docs/src/reference/api.md`: every operation of the Control API's
//!   OpenAPI document, and its schemas.
//!
//! `NUON_BLESS=1 cargo test -p nuon-tests --test e2e -- reference` writes
//! the pages after a change; review the diff.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use nuon_appconfig::KeyTable;
use nuon_core::app::{self, SourceFile};
use nuon_tests::{bin, have_tool, repo_root};
use serde_json::Value;

/// Where the words of the config keys are kept.
const KEY_WORDS: &str = "docs/config-keys.toml";

/// Every config of the repository: the examples, the apps of the tests,
/// and the cases of the validator's table.
fn corpus() -> Vec<(String, Vec<SourceFile>)> {
    let root = repo_root();
    let mut out = Vec::new();
    for dir in ["examples/apps", "tests/apps"] {
        for app in sorted_entries(&root.join(dir)) {
            if app.is_dir() {
                let files = nuon_client::app_dir::read_dir(&app)
                    .unwrap_or_else(|d| panic!("{}: {d}", app.display()));
                out.push((app.display().to_string(), files));
            }
        }
    }
    for case in sorted_entries(&root.join("nuon-client/tests/app_configs")) {
        if case.extension().is_some_and(|e| e == "case") {
            let text = std::fs::read_to_string(&case).unwrap();
            out.push((case.display().to_string(), case_files(&text)));
        }
    }
    out
}

fn sorted_entries(dir: &Path) -> Vec<PathBuf> {
    let mut all: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    all.sort();
    all
}

/// A `.case` file's config: its sections but `expected` and directories.
fn case_files(text: &str) -> Vec<SourceFile> {
    let mut d = app::Diagnostics::default();
    nuon_test_fixtures::case_sections(text)
        .into_iter()
        .filter(|(name, _)| name != "expected" && !name.ends_with('/'))
        .filter_map(|(name, body)| nuon_appconfig::source_file(name, Ok(body.into_bytes()), &mut d))
        .collect()
}

/// The words of each key: `["TABLE"] KEY = "..."`.
fn key_words() -> BTreeMap<String, BTreeMap<String, String>> {
    let path = repo_root().join(KEY_WORDS);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    toml::from_str(&text).unwrap_or_else(|e| panic!("{KEY_WORDS}: {e}"))
}

/// The keys every loader call site names (`.str(d, "key")`, `("key",
/// K::Str)`, `know(&["a", "b"])`): a table of the format that no config
/// of the corpus has would leave its keys out of the capture; this finds
/// them.
fn keys_in_source() -> BTreeMap<String, String> {
    let dir = repo_root().join("nuon-core/src/app");
    let mut out = BTreeMap::new();
    let reads = [
        ".str(d, \"",
        ".req_str(d, \"",
        ".name(d, \"",
        ".bool(d, \"",
        ".int(d, \"",
        ".str_list(d, \"",
        ".any(d, \"",
        ".map(d, \"",
        ".str_map(d, \"",
        ".table(d, \"",
        ".tables(d, \"",
        "duration(&mut r, d, \"",
        "(\"",
    ];
    for file in sorted_entries(&dir) {
        let text = std::fs::read_to_string(&file).unwrap();
        let shipped = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (n, line) in shipped.lines().enumerate() {
            for read in reads {
                let mut rest = line;
                while let Some(at) = rest.find(read) {
                    rest = &rest[at + read.len()..];
                    let key: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                        .collect();
                    let after = rest[key.len()..].chars().next();
                    // `("key", K::...)`: a schema's entry; other
                    // parenthesized strings are not keys.
                    let is_key = match read {
                        "(\"" => rest[key.len()..].starts_with("\", K::"),
                        _ => after == Some('"'),
                    };
                    if is_key && !key.is_empty() {
                        out.entry(key).or_insert_with(|| {
                            format!(
                                "nuon-core/src/app/{}:{}",
                                file.file_name().unwrap().to_string_lossy(),
                                n + 1
                            )
                        });
                    }
                }
            }
        }
    }
    out
}

/// The config reference, and what it lacks.
fn config_reference() -> (String, Vec<String>) {
    let corpus = corpus();
    let table: KeyTable = nuon_appconfig::key_table(corpus.iter().map(|(_, f)| f.as_slice()));
    let words = key_words();
    let mut problems = Vec::new();
    let mut read_anywhere = BTreeSet::new();
    for (at, keys) in &table.tables {
        for key in keys.keys.keys().chain(keys.ignored.keys()) {
            read_anywhere.insert(key.clone());
        }
        for key in keys.keys.keys() {
            let said = words.get(at).and_then(|w| w.get(key));
            if said.is_none_or(|s| s.trim().is_empty()) {
                problems.push(format!(
                    "config key `{key}` of `{at}` has no words: add to {KEY_WORDS} under [\"{at}\"]: {key} = \"...\""
                ));
            }
        }
    }
    for (at, keys) in &words {
        for key in keys.keys() {
            if !table
                .tables
                .get(at)
                .is_some_and(|t| t.keys.contains_key(key))
            {
                problems.push(format!(
                    "{KEY_WORDS} has words for `{key}` of `{at}`, which the loader does not read there: remove or move them"
                ));
            }
        }
    }
    for (key, place) in keys_in_source() {
        if !read_anywhere.contains(&key) {
            problems.push(format!(
                "config key `{key}` ({place}) is in no table of the reference: no config of the corpus (examples/apps, tests/apps, nuon-client/tests/app_configs) has the table that reads it; add a case that does"
            ));
        }
    }

    let mut md = String::new();
    md.push_str("# App config\n\n");
    md.push_str(GENERATED);
    md.push_str(
        "An app config is a directory of TOML files. This page lists every table the \
loader reads, every key of each, what it holds, and the keys of Nuon's format that are \
read here and ignored (with why: `nuon apps validate` says the same as a warning). A key \
no table lists is unknown: it is a warning, with the nearest known key.\n\n\
Tables are named by file (`metadata.toml`, `components/*.toml` for every file of \
`components/`) and then by key (`.var_file[]` for each `[[var_file]]` table).\n",
    );
    for (at, keys) in &table.tables {
        let _ = write!(md, "\n## `{at}`\n\n");
        if !keys.keys.is_empty() {
            md.push_str("| Key | Holds | Description |\n|---|---|---|\n");
            for (key, holds) in &keys.keys {
                let mut holds: Vec<&str> = holds.iter().map(String::as_str).collect();
                // "required" reads last: "a string, required".
                holds.sort_by_key(|h| *h == "required");
                let mut holds = holds.join(", ");
                if at == "components/*.toml" {
                    let kinds = nuon_appconfig::component_kinds_of(key);
                    if !kinds.is_empty() {
                        let _ = write!(holds, " ({} only)", kinds.join(", "));
                    }
                }
                let said = words
                    .get(at)
                    .and_then(|w| w.get(key))
                    .map(|s| s.trim().replace('\n', " "))
                    .unwrap_or_default();
                let _ = writeln!(md, "| `{key}` | {holds} | {said} |");
            }
        }
        if !keys.ignored.is_empty() {
            md.push_str("\nNuon's keys read here and ignored:\n\n");
            for (key, why) in &keys.ignored {
                let _ = writeln!(md, "- `{key}`: {why}.");
            }
        }
    }
    (md, problems)
}

const GENERATED: &str = "<!-- Made from the code by `NUON_BLESS=1 cargo test -p nuon-tests --test e2e -- reference`: do not edit by hand. -->\n\n";

/// Every command of `binary` (and itself), as `(path, help)`, by clap.
fn commands(binary: &str, path: &mut Vec<String>, out: &mut Vec<(String, String)>) {
    let output = Command::new(bin(binary))
        .args(path.iter())
        .arg("--help")
        .env_clear()
        .output()
        .expect("run --help");
    let help = String::from_utf8_lossy(&output.stdout).into_owned();
    let name = std::iter::once(binary.to_owned())
        .chain(path.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ");
    assert!(output.status.success(), "{name} --help failed: {help}");
    let subs: Vec<String> = help
        .split("\nCommands:\n")
        .nth(1)
        .map(|rest| {
            rest.lines()
                .take_while(|l| !l.trim().is_empty())
                // Two spaces of indent: a command; deeper: its wrapped words.
                .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
                .filter_map(|l| l.split_whitespace().next())
                .filter(|c| *c != "help")
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    out.push((name, help));
    for sub in subs {
        path.push(sub);
        commands(binary, path, out);
        path.pop();
    }
}

/// The CLI reference, and what it lacks.
fn cli_reference() -> (String, Vec<String>) {
    let mut md = String::from("# CLI\n\n");
    md.push_str(GENERATED);
    md.push_str(
        "Every command of the four binaries, as its `--help` prints it: `nuon` (the CLI), \
`nuon-ctl` (the control plane), `nuon-runner` (an install's runner) and \
`nuon-build-runner` (the org's build runner). `nuon man DIR` writes the same as man pages; \
`nuon completion bash|zsh|fish` prints a completion script.\n",
    );
    let mut problems = Vec::new();
    for binary in ["nuon", "nuon-ctl", "nuon-runner", "nuon-build-runner"] {
        let _ = write!(md, "\n## {binary}\n");
        let mut all = Vec::new();
        commands(binary, &mut Vec::new(), &mut all);
        for (name, help) in all {
            if help.starts_with("Usage:") {
                problems.push(format!(
                    "command `{name}` says nothing of what it does: give it a doc comment (clap's about)"
                ));
            }
            let _ = write!(md, "\n### {name}\n\n```text\n{}\n```\n", help.trim_end());
        }
    }
    (md, problems)
}

/// The Control API reference, and what it lacks.
fn api_reference() -> (String, Vec<String>) {
    let doc = nuon_control::openapi();
    let mut md = String::from("# Control API\n\n");
    md.push_str(GENERATED);
    let _ = write!(
        md,
        "Every operation of the Control API ({} {}), from its OpenAPI 3.1 document \
(`GET /openapi.json` of a control plane, or `nuon-ctl openapi`). {} Requests and answers \
are JSON; an error is an [ApiError](#apierror).\n\n## Operations\n",
        doc["info"]["title"].as_str().unwrap_or_default(),
        doc["info"]["version"].as_str().unwrap_or_default(),
        doc["info"]["description"].as_str().unwrap_or_default(),
    );
    let mut problems = Vec::new();
    let paths = doc["paths"].as_object().expect("paths");
    for (path, item) in paths {
        for (method, op) in item.as_object().expect("a path item") {
            if method == "parameters" {
                continue;
            }
            let id = op["operationId"].as_str().unwrap_or_default();
            let upper = method.to_uppercase();
            let summary = op["summary"].as_str().unwrap_or_default();
            if id.is_empty() || summary.trim().is_empty() {
                problems.push(format!(
                    "API operation {upper} {path} has no operationId or summary: give it one in its Op entry"
                ));
            }
            let _ = write!(md, "\n### {id}\n\n`{upper} {path}`\n\n{}\n", summary.trim());
            if let Some(d) = op["description"].as_str() {
                let _ = write!(md, "\n{}\n", d.trim());
            }
            if let Some(params) = op["parameters"].as_array().filter(|p| !p.is_empty()) {
                md.push_str("\n| Parameter | In | Required | Description |\n|---|---|---|---|\n");
                for p in params {
                    let _ = writeln!(
                        md,
                        "| `{}` | {} | {} | {} |",
                        p["name"].as_str().unwrap_or_default(),
                        p["in"].as_str().unwrap_or_default(),
                        if p["required"].as_bool() == Some(true) {
                            "yes"
                        } else {
                            "no"
                        },
                        cell(p["description"].as_str().unwrap_or_default())
                    );
                }
            }
            if let Some(body) = op["requestBody"]["content"].as_object() {
                for (media, c) in body {
                    let _ = write!(md, "\nRequest: `{media}` {}\n", schema_name(&c["schema"]));
                }
            }
            if let Some(responses) = op["responses"].as_object() {
                md.push_str("\n| Status | Answer |\n|---|---|\n");
                for (status, r) in responses {
                    let schema = r["content"]
                        .as_object()
                        .and_then(|c| c.values().next())
                        .map(|c| schema_name(&c["schema"]))
                        .unwrap_or_default();
                    let _ = writeln!(
                        md,
                        "| {status} | {} {schema} |",
                        cell(r["description"].as_str().unwrap_or_default())
                    );
                }
            }
        }
    }
    md.push_str("\n## Schemas\n");
    if let Some(schemas) = doc["components"]["schemas"].as_object() {
        for (name, s) in schemas {
            let _ = write!(md, "\n### {name}\n");
            if let Some(d) = s["description"].as_str() {
                let _ = write!(md, "\n{}\n", d.trim());
            }
            let required: BTreeSet<&str> = s["required"]
                .as_array()
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            if let Some(props) = s["properties"].as_object().filter(|p| !p.is_empty()) {
                md.push_str("\n| Field | Type | Description |\n|---|---|---|\n");
                for (field, p) in props {
                    let req = if required.contains(field.as_str()) {
                        ", required"
                    } else {
                        ""
                    };
                    let _ = writeln!(
                        md,
                        "| `{field}` | {}{req} | {} |",
                        schema_name(p),
                        cell(p["description"].as_str().unwrap_or_default())
                    );
                }
                tagged_kinds(&mut md, s);
            } else if let Some(values) = s["enum"].as_array() {
                let values: Vec<String> = values.iter().map(|v| format!("`{v}`")).collect();
                let _ = write!(md, "\nOne of {}.\n", values.join(", "));
            } else {
                let _ = write!(md, "\n{}\n", schema_name(s));
            }
        }
    }
    (md, problems)
}

/// The kinds of a schema whose fields are the common ones beside a tag
/// (a component's `type`): each kind's tag, its own fields' schema and
/// what it is.
fn tagged_kinds(md: &mut String, s: &Value) {
    let Some(kinds) = s["oneOf"].as_array() else {
        return;
    };
    let mut rows = Vec::new();
    let mut tag_name = "";
    for k in kinds {
        let Some((tag, value)) = k["properties"]
            .as_object()
            .into_iter()
            .flatten()
            .find_map(|(name, p)| Some((name, p["const"].as_str()?)))
        else {
            continue;
        };
        tag_name = tag;
        let own = match k.get("$ref") {
            Some(_) => schema_name(&serde_json::json!({ "$ref": k["$ref"] })),
            None => "none".to_owned(),
        };
        rows.push(format!(
            "| `{value}` | {own} | {} |",
            cell(k["description"].as_str().unwrap_or_default())
        ));
    }
    if rows.is_empty() {
        return;
    }
    let _ = write!(
        md,
        "\nBy its `{tag_name}` (required), one of these, with the fields of its kind beside the ones above:\n\n| `{tag_name}` | Its own fields | Description |\n|---|---|---|\n{}\n",
        rows.join("\n")
    );
}

/// A table cell's text: one line, no `|`.
fn cell(text: &str) -> String {
    text.trim().replace('\n', " ").replace('|', "\\|")
}

/// A schema in words: a link to a named one, else its type.
fn schema_name(s: &Value) -> String {
    if let Some(r) = s["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap_or(r);
        return format!("[{name}](#{})", name.to_lowercase());
    }
    if let Some(any) = s["oneOf"].as_array().or(s["anyOf"].as_array()) {
        let parts: Vec<String> = any.iter().map(schema_name).collect();
        return parts.join(" or ");
    }
    match s["type"].clone() {
        Value::String(t) if t == "array" => format!("array of {}", schema_name(&s["items"])),
        Value::String(t) => match s["format"].as_str() {
            Some(f) => format!("{t} ({f})"),
            None => t,
        },
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ if s.get("additionalProperties").is_some() => "object".into(),
        _ => "any".into(),
    }
}

/// Point: "a tidy test fails when a config key, CLI command or API
/// operation has no reference entry". The pages are what the code makes
/// now (written again under `NUON_BLESS=1`), and everything the code has
/// is described.
#[test]
fn the_reference_is_made_from_the_code_and_lacks_nothing() {
    let bless = std::env::var("NUON_BLESS").is_ok_and(|v| v == "1");
    let dir = repo_root().join("docs/src/reference");
    let mut problems = Vec::new();
    for (page, (made, lacks)) in [
        ("config.md", config_reference()),
        ("cli.md", cli_reference()),
        ("api.md", api_reference()),
    ] {
        problems.extend(lacks);
        let path = dir.join(page);
        if bless {
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(&path, &made).unwrap();
            continue;
        }
        let have = std::fs::read_to_string(&path).unwrap_or_default();
        if have != made {
            let line = have
                .lines()
                .zip(made.lines())
                .position(|(a, b)| a != b)
                .unwrap_or_else(|| have.lines().count().min(made.lines().count()));
            problems.push(format!(
                "docs/src/reference/{page} is not what the code makes (first difference at line {}): run NUON_BLESS=1 cargo test -p nuon-tests --test e2e -- reference, and review the diff",
                line + 1
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "the reference:\n{}",
        problems.join("\n")
    );
}

/// Point: "the book builds in CI with no broken link". `mdbook build`,
/// then every `href` and `src` of every page is followed offline: the file
/// must exist and a `#fragment` must be an `id` in it. Links that leave the
/// book are counted, not fetched.
#[test]
fn the_book_builds_with_no_broken_link() {
    if !have_tool(
        "mdbook",
        "build the book (cargo install mdbook --version 0.5.4 --locked --no-default-features --features search)",
    ) {
        return;
    }
    let out = tempfile::tempdir().unwrap();
    let build = Command::new("mdbook")
        .arg("build")
        .arg(repo_root().join("docs"))
        .arg("--dest-dir")
        .arg(out.path())
        .output()
        .expect("run mdbook");
    let said = String::from_utf8_lossy(&build.stderr);
    assert!(build.status.success(), "mdbook build failed:\n{said}");
    assert!(
        !said.contains("WARN") && !said.contains("ERROR"),
        "mdbook build warned:\n{said}"
    );
    let mut pages = Vec::new();
    html_files(out.path(), &mut pages);
    assert!(pages.len() >= 20, "the book has {} pages", pages.len());
    let mut broken = Vec::new();
    let mut followed = 0;
    let mut outside = 0;
    let mut ids: BTreeMap<PathBuf, BTreeSet<String>> = BTreeMap::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for link in attribute_values(&text, &["href=\"", "src=\""]) {
            if link.starts_with("http://")
                || link.starts_with("https://")
                || link.starts_with("mailto:")
            {
                outside += 1;
                continue;
            }
            if link.starts_with("javascript:") || link.starts_with("data:") {
                continue;
            }
            let (file, fragment) = match link.split_once('#') {
                Some((f, frag)) => (f, Some(frag)),
                None => (link.as_str(), None),
            };
            let file = file.split('?').next().unwrap_or_default();
            let target = if file.is_empty() {
                page.clone()
            } else if let Some(abs) = file.strip_prefix('/') {
                out.path().join(abs)
            } else {
                page.parent().unwrap().join(file)
            };
            let target = if target.is_dir() {
                target.join("index.html")
            } else {
                target
            };
            followed += 1;
            let Ok(target) = target.canonicalize() else {
                broken.push(format!("{}: {link} (no such file)", rel(out.path(), page)));
                continue;
            };
            if let Some(fragment) = fragment.filter(|f| !f.is_empty())
                && target.extension().is_some_and(|e| e == "html")
            {
                let have = ids.entry(target.clone()).or_insert_with(|| {
                    let text = std::fs::read_to_string(&target).unwrap_or_default();
                    attribute_values(&text, &["id=\""]).into_iter().collect()
                });
                if !have.contains(fragment) {
                    broken.push(format!(
                        "{}: {link} (no id {fragment:?} in {})",
                        rel(out.path(), page),
                        rel(out.path(), &target)
                    ));
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "broken links in the book:\n{}",
        broken.join("\n")
    );
    assert!(followed > 500, "only {followed} links followed");
    eprintln!(
        "{} pages, {followed} links followed, {outside} leave the book (not fetched)",
        pages.len()
    );
}

fn html_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in sorted_entries(dir) {
        if entry.is_dir() {
            html_files(&entry, out);
        } else if entry.extension().is_some_and(|e| e == "html") {
            out.push(entry.canonicalize().unwrap());
        }
    }
}

/// The values of the attributes that start with one of `starts`.
fn attribute_values(html: &str, starts: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for start in starts {
        let mut rest = html;
        while let Some(at) = rest.find(start) {
            rest = &rest[at + start.len()..];
            if let Some(end) = rest.find('"') {
                out.push(unescape(&rest[..end]));
            }
        }
    }
    out
}

/// The few entities mdBook writes in attributes.
fn unescape(v: &str) -> String {
    v.replace("&amp;", "&")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
}

fn rel(root: &Path, p: &Path) -> String {
    let root = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    p.strip_prefix(&root).unwrap_or(p).display().to_string()
}
