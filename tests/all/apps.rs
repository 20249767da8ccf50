//! `nuon apps validate`: offline, every problem at once, exit codes scripts
//! can trust.

use std::path::Path;
use std::process::Command;

use nuon_tests::bin;

fn validate(dir: &Path, json: bool) -> std::process::Output {
    let mut cmd = Command::new(bin("nuon"));
    cmd.args(["apps", "validate"]).arg(dir);
    if json {
        cmd.arg("--json");
    }
    // Offline: no control plane, no token, an address nothing listens on.
    cmd.env("NUON_API_URL", "http://127.0.0.1:9")
        .env_remove("NUON_TOKEN")
        .output()
        .unwrap()
}

fn write(dir: &Path, name: &str, text: &str) {
    let p = dir.join(name);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn validate_works_offline_and_reports_every_error_at_once() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/apps/hello");
    let out = validate(&examples, false);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("is a valid app config: 2 components, 3 inputs"),
        "{stdout}"
    );

    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "metadata.toml", "version = \"v2\"\n");
    write(
        dir.path(),
        "components/api.toml",
        "name = \"api\"\ntype = \"helm_chart\"\nchart_nme = \"api\"\noci = \"r/api:1\"\n",
    );
    write(
        dir.path(),
        "components/db.toml",
        "name = \"db\"\ntype = \"container_image\"\ndependencies = [\"api\", \"cache\"]\noci = \"r/db:1\"\n",
    );
    let out = validate(dir.path(), false);
    assert_eq!(out.status.code(), Some(65));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(
        lines,
        [
            "components/api.toml:1:1: missing required key \"chart_name\"",
            "components/api.toml:3:1: unknown key \"chart_nme\", did you mean \"chart_name\"?",
            "components/db.toml:3:24: unknown component \"cache\"",
            &format!(
                "{} is not a valid app config: 3 errors, 0 warnings",
                dir.path().display()
            ),
        ]
    );

    let out = validate(dir.path(), true);
    assert_eq!(out.status.code(), Some(65));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(v["errors"], 3);
    assert_eq!(v["diagnostics"][2]["line"], 3);
    assert_eq!(v["diagnostics"][2]["col"], 24);

    let out = validate(&dir.path().join("missing"), false);
    assert_eq!(out.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the config directory"));
}
