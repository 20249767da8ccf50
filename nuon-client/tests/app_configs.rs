//! The app config table: every `tests/app_configs/*.case` file is a config
//! (its files as `-- NAME --` sections) and, in its `-- expected --`
//! section, every diagnostic `nuon apps validate` must print for it, in
//! order, exactly; `ok` when the config is valid without a warning.
//!
//! `NUON_BLESS=1 cargo test -p nuon-client --test app_configs` rewrites the
//! expected sections from what the validator says now: review the diff.

use std::path::{Path, PathBuf};

use nuon_client::app_dir;
use nuon_core::app;

struct Case {
    path: PathBuf,
    files: Vec<(String, String)>,
    expected: String,
}

fn parse_case(path: &Path) -> Case {
    let text = std::fs::read_to_string(path).unwrap();
    let mut files = nuon_test_fixtures::case_sections(&text);
    let expected = files
        .iter()
        .position(|(n, _)| n == "expected")
        .map(|i| files.remove(i).1);
    Case {
        path: path.to_owned(),
        files,
        expected: expected
            .unwrap_or_else(|| panic!("{}: no -- expected -- section", path.display())),
    }
}

fn run(case: &Case) -> String {
    let dir = tempfile::tempdir().unwrap();
    for (name, body) in &case.files {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        if let Some(d) = name.strip_suffix("/") {
            std::fs::create_dir_all(dir.path().join(d)).unwrap();
        } else {
            std::fs::write(p, body).unwrap();
        }
    }
    let (config, diags) = app_dir::validate_dir(dir.path());
    let mut out = diags.to_string();
    if diags.is_empty() {
        out = "ok\n".into();
    }
    if let Some(config) = config {
        // A valid config survives a JSON round trip unchanged.
        let json = serde_json::to_string(&config).unwrap();
        let back: app::AppConfig = serde_json::from_str(&json).unwrap();
        assert_eq!(back, config, "{}", case.path.display());
    } else {
        assert!(
            diags.has_errors(),
            "{}: no config and no error",
            case.path.display()
        );
    }
    out
}

#[test]
fn every_case_gives_exactly_its_expected_diagnostics() {
    let dir = manifest_dir().join("tests/app_configs");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "case"))
        .collect();
    paths.sort();
    assert!(
        paths.len() >= 40,
        "the table has {} cases; keep at least 40",
        paths.len()
    );
    let bless = std::env::var_os("NUON_BLESS").is_some();
    let mut failures = Vec::new();
    let (mut valid, mut broken) = (0, 0);
    for path in &paths {
        let case = parse_case(path);
        let got = run(&case);
        if got.trim() == "ok" || got.lines().all(|l| l.contains(": warning: ")) {
            valid += 1;
        } else {
            broken += 1;
        }
        if got.trim_end() != case.expected.trim_end() {
            if bless {
                let text = std::fs::read_to_string(path).unwrap();
                let at = text.find("-- expected --").unwrap();
                std::fs::write(path, format!("{}-- expected --\n{got}", &text[..at])).unwrap();
            } else {
                failures.push(format!(
                    "{}\n--- expected\n{}--- got\n{got}",
                    path.display(),
                    case.expected
                ));
            }
        }
    }
    assert!(valid >= 5 && broken >= 30, "valid {valid}, broken {broken}");
    assert!(
        failures.is_empty(),
        "{} cases differ:\n\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_example_app_config_is_valid_without_warnings_and_round_trips() {
    let root = manifest_dir().join("../examples/apps");
    let mut seen = 0;
    for entry in std::fs::read_dir(&root).unwrap() {
        let dir = entry.unwrap().path();
        let (config, diags) = app_dir::validate_dir(&dir);
        assert!(diags.is_empty(), "{}:\n{diags}", dir.display());
        let config = config.unwrap();
        let json = serde_json::to_value(&config).unwrap();
        let back: app::AppConfig = serde_json::from_value(json).unwrap();
        assert_eq!(back, config);
        seen += 1;
    }
    assert!(seen >= 1, "no example app config in {}", root.display());
}

/// This package's directory: cargo's at run time (a binary built in
/// another checkout of the tree keeps that checkout's path in `env!`).
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
        .into()
}
