//! `nuon apps validate`: offline, every problem at once, exit codes scripts
//! can trust.

use std::path::Path;

use nuon_tests::{ours, rt};

use crate::deploy::walk;

fn validate(dir: &Path, json: bool) -> std::process::Output {
    let mut cmd = ours("nuon");
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
    let examples = nuon_tests::manifest_dir().join("../examples/apps/hello");
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
            "components/api.toml:3:1: warning: unknown key \"chart_nme\" is ignored, did you mean \"chart_name\"?",
            "components/db.toml:3:24: unknown component \"cache\"",
            &format!(
                "{} is not a valid app config: 2 errors, 1 warning",
                dir.path().display()
            ),
        ]
    );

    let out = validate(dir.path(), true);
    assert_eq!(out.status.code(), Some(65));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["valid"], false);
    assert_eq!(v["errors"], 2);
    assert_eq!(v["diagnostics"][2]["line"], 3);
    assert_eq!(v["diagnostics"][2]["col"], 24);

    let out = validate(&dir.path().join("missing"), false);
    assert_eq!(out.status.code(), Some(65));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the config directory"));
}

fn ok(out: &std::process::Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

fn example() -> std::path::PathBuf {
    nuon_tests::manifest_dir().join("../examples/apps/hello")
}

/// Acceptance 2 and 6: an example config syncs, and what is read back is
/// what was synced; the CLI's --json of each read command is the API's JSON.
#[test]
fn an_example_config_syncs_and_reads_back_as_synced() {
    let cp = nuon_tests::ControlPlane::start("10s").unwrap();
    let client = cp.client();
    ok(&cp.nuon(&["apps", "create", "hello", "--json"]));
    let synced = ok(&cp.nuon(&[
        "apps",
        "sync",
        example().to_str().unwrap(),
        "--app",
        "hello",
        "--json",
    ]));
    assert_eq!(synced["version"], 1);

    // Read back: the same config the validator builds locally, and the same files.
    let (local, _) = nuon_client::app_dir::validate_dir(&example());
    let mut local = local.unwrap();
    // A version keeps the text of each file the config names (the README).
    let read = |p: &str| std::fs::read_to_string(example().join(p)).ok();
    assert!(nuon_core::app::inline_file_refs(&mut local, &read).is_empty());
    assert!(
        local
            .metadata
            .readme
            .as_deref()
            .is_some_and(|r| r.starts_with("# Hello"))
    );
    let back = rt().block_on(client.get_config("hello", None)).unwrap();
    assert_eq!(back.config, local);
    let files = nuon_client::app_dir::read_dir(&example()).unwrap();
    let sent: Vec<(String, String)> = files.into_iter().map(|f| (f.name, f.text)).collect();
    let got: Vec<(String, String)> = back
        .files
        .iter()
        .map(|f| (f.path.clone(), f.contents.clone()))
        .collect();
    assert_eq!(got, sent);
    assert_eq!(serde_json::to_value(&back).unwrap(), synced);

    // A second sync of the same files makes no version (polish of "The
    // destroy side and the CLI's contracts"); versions are immutable.
    let again = ok(&cp.nuon(&[
        "apps",
        "sync",
        example().to_str().unwrap(),
        "--app",
        "hello",
        "--json",
    ]));
    assert_eq!(again["version"], 1);
    assert_eq!(again["unchanged"], true);
    let said = cp.nuon(&[
        "apps",
        "sync",
        example().to_str().unwrap(),
        "--app",
        "hello",
    ]);
    assert!(
        String::from_utf8_lossy(&said.stdout).contains("is config v1 of app hello already"),
        "{}",
        String::from_utf8_lossy(&said.stdout)
    );
    let listed = rt().block_on(client.list_configs("hello")).unwrap();
    assert_eq!(listed.configs.len(), 1);
    let v1 = rt().block_on(client.get_config("hello", Some(1))).unwrap();
    assert_eq!(v1.config, local);

    // A broken config is refused with every problem, and stores nothing.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), "metadata.toml", "version = \"v2\"\n");
    write(
        dir.path(),
        "components/a.toml",
        "name = \"a\"\ntype = \"helm_chart\"\nchart_nme = \"x\"\noci = \"r/a:1\"\n",
    );
    let out = cp.nuon(&[
        "apps",
        "sync",
        dir.path().to_str().unwrap(),
        "--app",
        "hello",
    ]);
    assert_eq!(out.status.code(), Some(65));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "components/a.toml:3:1: warning: unknown key \"chart_nme\" is ignored, did you mean \"chart_name\"?"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("components/a.toml:1:1: missing required key \"chart_name\""),
        "{stderr}"
    );

    // --json of every read command is exactly the API's answer.
    assert_eq!(
        ok(&cp.nuon(&["apps", "list", "--json"])),
        serde_json::to_value(rt().block_on(client.list_apps()).unwrap()).unwrap()
    );
    assert_eq!(
        ok(&cp.nuon(&["apps", "get", "hello", "--json"])),
        serde_json::to_value(rt().block_on(client.get_app("hello")).unwrap()).unwrap()
    );
    let configs = ok(&cp.nuon(&["apps", "configs", "hello", "--json"]));
    assert_eq!(configs["configs"].as_array().unwrap().len(), 1);
    assert_eq!(
        configs,
        serde_json::to_value(rt().block_on(client.list_configs("hello")).unwrap()).unwrap()
    );
    let comps = ok(&cp.nuon(&["components", "list", "--app", "hello", "--json"]));
    let names: Vec<&str> = comps["components"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["database", "app"]);
    assert_eq!(
        comps["components"][1]["depends_on"],
        serde_json::json!(["database"])
    );
}

/// Acceptance 3: installs check their inputs; sensitive inputs and secrets
/// are never in an answer or a log, and are encrypted at rest.
#[test]
fn installs_check_inputs_and_never_show_secrets() {
    let cp = nuon_tests::ControlPlane::start("10s").unwrap();
    let client = cp.client();
    ok(&cp.nuon(&["apps", "create", "hello"]));
    ok(&cp.nuon(&[
        "apps",
        "sync",
        example().to_str().unwrap(),
        "--app",
        "hello",
    ]));

    // Missing the required (sensitive) input: refused, saying which.
    let out = cp.nuon(&["installs", "create", "--app", "hello", "--name", "acme"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("missing required input \"api_key\""),
        "{stderr}"
    );
    // Wrong type, unknown input with a suggestion, unknown secret: all at once.
    let out = cp.nuon(&[
        "installs",
        "create",
        "--app",
        "hello",
        "--name",
        "acme",
        "--input",
        "api_key=k3y-demo",
        "--input",
        "replicas=many",
        "--input",
        "greting=hi",
        "--secret",
        "db_pasword=x",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("input \"replicas\": expected a number, found \"many\""),
        "{stderr}"
    );
    assert!(
        stderr.contains("unknown input \"greting\", did you mean \"greeting\"?"),
        "{stderr}"
    );
    assert!(
        stderr.contains("unknown secret \"db_pasword\", did you mean \"db_password\"?"),
        "{stderr}"
    );
    // Nothing was created.
    assert!(
        !rt()
            .block_on(client.list_installs())
            .unwrap()
            .installs
            .iter()
            .any(|i| i.name == "acme")
    );

    const API_KEY: &str = "sk-live-5f1e0c9a-very-secret";
    const DB_PASSWORD: &str = "pw-7d3b8e21-also-secret";
    let created = ok(&cp.nuon(&[
        "installs",
        "create",
        "--app",
        "hello",
        "--name",
        "acme",
        "--json",
        "--input",
        &format!("api_key={API_KEY}"),
        "--input",
        "replicas=3",
        "--secret",
        &format!("db_password={DB_PASSWORD}"),
    ]));
    let install = &created["install"];
    assert_eq!(install["inputs"]["replicas"], 3);
    assert_eq!(
        install["inputs"]["greeting"], "hello",
        "defaults are filled in"
    );
    assert!(install["inputs"].get("api_key").is_none());
    assert_eq!(install["sensitive_inputs"], serde_json::json!(["api_key"]));
    assert_eq!(install["secrets"], serde_json::json!(["db_password"]));
    assert!(
        created["runner_token"]
            .as_str()
            .unwrap()
            .starts_with("rnr_")
    );

    // The name is the install's: a second one is refused as such, and a
    // runner's name never blocks an install's.
    let again = cp.nuon(&[
        "installs",
        "create",
        "--app",
        "hello",
        "--name",
        "acme",
        "--input",
        "api_key=k3y-demo",
    ]);
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(
        stderr.contains("an install named \"acme\" already exists"),
        "{stderr}"
    );
    // Secrets from a file (not the command line), and a clear error for a
    // file that is not there.
    let secret_dir = tempfile::tempdir().unwrap();
    let secret_file = secret_dir.path().join("db_password");
    std::fs::write(&secret_file, format!("{DB_PASSWORD}\n")).unwrap();
    let filed = ok(&cp.nuon(&[
        "installs",
        "create",
        "--app",
        "hello",
        "--name",
        "filed",
        "--input",
        "api_key=k3y-demo",
        "--secret-file",
        &format!("db_password={}", secret_file.display()),
        "--json",
    ]));
    assert_eq!(
        filed["install"]["secrets"],
        serde_json::json!(["db_password"])
    );
    let missing = cp.nuon(&[
        "installs",
        "create",
        "--app",
        "hello",
        "--name",
        "nofile",
        "--input",
        "api_key=k3y-demo",
        "--secret-file",
        "db_password=/nonexistent/secret",
    ]);
    assert_eq!(missing.status.code(), Some(64));
    assert!(
        String::from_utf8_lossy(&missing.stderr).contains("cannot read secret \"db_password\"")
    );
    // Point 11 of "The destroy side and the CLI's contracts": a secret or
    // sensitive input too short to hide in a log is refused, its value not
    // shown; so is an empty value for a required input.
    let short = cp.nuon(&[
        "installs",
        "create",
        "--app",
        "hello",
        "--name",
        "short",
        "--input",
        "api_key=k",
        "--secret",
        "db_password=pw",
    ]);
    let said = String::from_utf8_lossy(&short.stderr);
    assert_ne!(short.status.code(), Some(0), "{said}");
    assert!(
        said.contains("input \"api_key\" is shorter than 4 characters"),
        "{said}"
    );
    assert!(
        said.contains("secret \"db_password\" is shorter than 4 characters"),
        "{said}"
    );
    assert!(!said.contains("=pw") && !said.contains("\"pw\""), "{said}");
    let empty = cp.nuon(&[
        "installs", "create", "--app", "hello", "--name", "empty", "--input", "api_key=",
    ]);
    let said = String::from_utf8_lossy(&empty.stderr);
    assert!(
        said.contains("input \"api_key\" is required and was given an empty value"),
        "{said}"
    );
    ok(&cp.nuon(&["runners", "create", "--name", "install-other", "--json"]));
    ok(&cp.nuon(&[
        "installs",
        "create",
        "--app",
        "hello",
        "--name",
        "other",
        "--input",
        "api_key=k3y-demo",
        "--json",
    ]));

    let set = ok(&cp.nuon(&[
        "installs",
        "inputs",
        "set",
        "acme",
        "greeting=hey",
        "--json",
    ]));
    assert_eq!(set["inputs"]["greeting"], "hey");
    assert_eq!(set["sensitive_inputs"], serde_json::json!(["api_key"]));
    let out = cp.nuon(&["installs", "inputs", "set", "acme", "replicas=lots"]);
    assert_eq!(out.status.code(), Some(1));

    // Every answer and the server's log: no secret value anywhere.
    let mut seen = vec![created.to_string(), set.to_string()];
    for args in [
        vec!["installs", "list", "--json"],
        vec!["installs", "get", "acme", "--json"],
        vec!["installs", "get", "acme"],
        vec!["apps", "configs", "hello", "--json"],
    ] {
        let out = cp.nuon(&args);
        seen.push(String::from_utf8_lossy(&out.stdout).into_owned());
        seen.push(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    assert_eq!(
        ok(&cp.nuon(&["installs", "get", "acme", "--json"])),
        serde_json::to_value(rt().block_on(client.get_install("acme")).unwrap()).unwrap()
    );
    seen.push(cp.server_log());
    for text in &seen {
        assert!(
            !text.contains(API_KEY) && !text.contains(DB_PASSWORD),
            "a secret leaked: {text}"
        );
    }
    // At rest: encrypted in the database files.
    for entry in std::fs::read_dir(&cp.data_dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(API_KEY) && !text.contains(DB_PASSWORD));
    }
}

/// Acceptance 6: the --json output of every read command parses and is
/// exactly what the API answers.
#[test]
fn every_read_command_prints_the_api_json() {
    let cp = nuon_tests::ControlPlane::start("10s").unwrap();
    let c = cp.client();
    ok(&cp.nuon(&["apps", "create", "hello"]));
    ok(&cp.nuon(&[
        "apps",
        "sync",
        example().to_str().unwrap(),
        "--app",
        "hello",
    ]));
    ok(&cp.nuon(&[
        "installs",
        "create",
        "--app",
        "hello",
        "--name",
        "demo",
        "--input",
        "api_key=k3y-demo",
    ]));
    ok(&cp.nuon(&["runners", "create", "--name", "r1", "--json"]));
    let job = ok(&cp.nuon(&["--json", "jobs", "exec", "--runner", "r1", "--", "true"]));
    let job_id = job["id"].as_str().unwrap().to_owned();
    ok(&cp.nuon(&["orgs", "tokens", "create", "--name", "reader", "--json"]));

    let cases: Vec<(Vec<&str>, serde_json::Value)> = vec![
        (vec!["apps", "list"], api(c.list_apps())),
        (vec!["apps", "get", "hello"], api(c.get_app("hello"))),
        (
            vec!["apps", "configs", "hello"],
            api(c.list_configs("hello")),
        ),
        (
            vec!["components", "list", "--app", "hello"],
            api(c.list_components("hello")),
        ),
        (vec!["installs", "list"], api(c.list_installs())),
        (vec!["installs", "get", "demo"], api(c.get_install("demo"))),
        (vec!["orgs", "get"], api(c.get_org())),
        (vec!["orgs", "tokens", "list"], api(c.list_tokens())),
        (vec!["runners", "list"], api(c.list_runners())),
        (
            vec!["workflows", "list", "--install", "demo"],
            api(c.list_workflows("demo")),
        ),
    ];
    for (args, api) in cases {
        let mut all = args.clone();
        all.push("--json");
        assert_eq!(ok(&cp.nuon(&all)), api, "nuon {}", args.join(" "));
    }
    // No runner process runs here, so the job stays queued and comparable.
    let id: nuon_core::JobId = job_id.parse().unwrap();
    assert_eq!(
        ok(&cp.nuon(&["jobs", "get", &job_id, "--json"])),
        api(c.get_job(&id))
    );
}

/// What the API answers, as JSON.
fn api<T: serde::Serialize>(
    call: impl std::future::Future<Output = nuon_client::Result<T>>,
) -> serde_json::Value {
    serde_json::to_value(rt().block_on(call).unwrap()).unwrap()
}

/// `nuon installs create --component NAME=off` (Nuon's
/// `[component_toggles]`): the install starts with that toggleable
/// component off; a component that is not toggleable is refused, naming
/// those that are. `installs/NAME.toml`'s `[component_toggles]` is checked
/// the same way at validate.
#[test]
fn an_install_starts_with_the_toggleable_components_it_names_off() {
    let dir = tempfile::tempdir().unwrap();
    let component = |name: &str, extra: &str| {
        format!(
            "name = \"{name}\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./tf\"\n{extra}"
        )
    };
    write(dir.path(), "metadata.toml", "version = \"v2\"\n");
    write(
        dir.path(),
        "tf/main.tf",
        "output \"ok\" {\n  value = true\n}\n",
    );
    write(
        dir.path(),
        "components/metrics.toml",
        &component("metrics", "toggleable = true\n"),
    );
    write(dir.path(), "components/web.toml", &component("web", ""));
    write(
        dir.path(),
        "installs/edge.toml",
        "name = \"edge\"\n\n[component_toggles]\nmetrics = false\nweb = false\nnope = true\n",
    );
    let out = validate(dir.path(), false);
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(65), "{said}");
    assert!(
        said.contains(
            "installs/edge.toml:5:1: component_toggles: component \"web\" is not toggleable"
        ) && said.contains("installs/edge.toml:6:1: unknown component \"nope\""),
        "{said}"
    );
    write(
        dir.path(),
        "installs/edge.toml",
        "name = \"edge\"\n\n[component_toggles]\nmetrics = false\n",
    );
    let out = validate(dir.path(), false);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let cp = nuon_tests::ControlPlane::start("10s").unwrap();
    ok(&cp.nuon(&["apps", "create", "toggles"]));
    ok(&cp.nuon(&[
        "apps",
        "sync",
        dir.path().to_str().unwrap(),
        "--app",
        "toggles",
    ]));
    let out = cp.nuon(&[
        "installs",
        "create",
        "--app",
        "toggles",
        "--name",
        "edge",
        "--component",
        "web=off",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("component \"web\" is not toggleable (toggleable: metrics;"),
        "{stderr}"
    );
    ok(&cp.nuon(&[
        "--json",
        "installs",
        "create",
        "--app",
        "toggles",
        "--name",
        "edge",
        "--component",
        "metrics=off",
    ]));
    let list = ok(&cp.nuon(&["--json", "installs", "components", "list", "edge"]));
    let enabled = |name: &str| {
        list["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {list}"))["enabled"]
            .clone()
    };
    assert_eq!(enabled("metrics"), false);
    assert_eq!(enabled("web"), true);
}

/// The text of `what` of `step` in a render's JSON (`nuon apps render` or
/// `nuon installs render`).
pub(crate) fn rendered(got: &serde_json::Value, step: &str, what: &str) -> serde_json::Value {
    got["artifacts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["step"] == step && a["what"] == what)
        .unwrap_or_else(|| panic!("no {step}: {what} in {got:#}"))["text"]
        .clone()
}

/// `nuon apps render DIR ARGS --json`, offline.
fn render(dir: &Path, args: &[&str]) -> std::process::Output {
    ours("nuon")
        .args(["apps", "render"])
        .arg(dir)
        .args(args)
        .env("NUON_API_URL", "http://127.0.0.1:9")
        .env_remove("NUON_TOKEN")
        .output()
        .unwrap()
}

#[test]
fn render_shows_offline_what_each_step_of_a_workflow_would_be_given() {
    let hello = nuon_tests::manifest_dir().join("../examples/apps/hello");
    let out = render(&hello, &["--install", "installs/demo.toml", "--json"]);
    let got = ok(&out);
    let find = |step: &str, what: &str| rendered(&got, step, what);
    // The install file's inputs over the defaults; stand-ins for what is
    // known only later (ids, secrets, outputs).
    assert_eq!(find("plan app", "var greeting"), "hi");
    assert_eq!(find("plan app", "var replicas"), "2");
    assert_eq!(find("plan app", "env TF_VAR_api_key"), "demo-key");
    assert_eq!(find("plan app", "var database_url"), "(known after apply)");
    assert_eq!(
        find("plan database", "var password"),
        "(secret db_password)"
    );
    assert_eq!(
        find("plan database", "var name"),
        "ins_00000000000000000000000000-db"
    );
    assert!(got["problems"].as_array().unwrap().is_empty(), "{got:#}");

    // Given outputs are used as they are: a key they lack is an error,
    // with where it is read, as a deploy would fail.
    let dir = tempfile::tempdir().unwrap();
    let outputs = dir.path().join("outputs.json");
    std::fs::write(
        &outputs,
        r#"{"components": {"database": {"host": "db.internal"}}, "sandbox": {"network_id": "net-1"}}"#,
    )
    .unwrap();
    let out = render(
        &hello,
        &[
            "--install",
            "demo",
            "--outputs",
            outputs.to_str().unwrap(),
            "--workflow",
            "deploy",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("components/app.toml:9:20: ")
            && err.contains("plan app: component app var database_url")
            && err.contains(".nuon.components.database.outputs.url has no value"),
        "{err}"
    );
    // What renders is still shown, and can be written to files.
    let rendered = dir.path().join("rendered");
    let out = render(
        &hello,
        &["--install", "demo", "--out", rendered.to_str().unwrap()],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(rendered.join("plan_app").join("var_greeting")).unwrap(),
        "hi"
    );
    // A workflow it does not know, or an install file that is not there:
    // usage errors that say what to give.
    let out = render(&hello, &["--workflow", "explode"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("give provision, deploy"));
    let out = render(&hello, &["--install", "nope"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("it has: demo"));
}

/// The apps of `tests/apps/`, sorted; with `gaps`, those of [`CORPUS_GAPS`] too.
fn corpus(gaps: bool) -> Vec<String> {
    let root = nuon_tests::repo_root().join("tests/apps");
    let mut apps: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .filter(|e| e.path().join("metadata.toml").is_file())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|a| gaps || !CORPUS_GAPS.iter().any(|(g, _)| g == a))
        .collect();
    apps.sort();
    apps
}

/// The apps of `tests/apps/` Nuon accepts and this platform does not yet,
/// each with the start of the error it gets today. The corpus test fails
/// when one of them starts to pass, so that it comes off this list.
const CORPUS_GAPS: &[(&str, &str)] = &[];

/// Every app of `tests/apps/` (written the way Nuon's documentation and
/// example apps write them, one per shape) validates, and renders its
/// provision, deploy and deprovision offline with no error, as its golden
/// files under `rendered/` say. `NUON_BLESS=1` writes the goldens.
#[test]
fn the_nuon_app_corpus_validates_and_renders_as_its_goldens() {
    let root = nuon_tests::repo_root().join("tests/apps");
    let bless = std::env::var("NUON_BLESS").is_ok_and(|v| v == "1");
    let apps = corpus(true);
    assert!(apps.len() >= 30, "the corpus has {} apps", apps.len());
    let mut failed = Vec::new();
    for app in &apps {
        let dir = root.join(app);
        let out = validate(&dir, false);
        let said = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if let Some((_, gap)) = CORPUS_GAPS.iter().find(|(a, _)| a == app) {
            if out.status.success() || !said.contains(gap) {
                failed.push(format!(
                    "{app}: listed in CORPUS_GAPS ({gap:?}) but validate now says: {said}"
                ));
            }
            continue;
        }
        if !out.status.success() {
            failed.push(format!("{app}: validate failed: {said}"));
            continue;
        }
        let install = std::fs::read_dir(dir.join("installs"))
            .unwrap()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .min()
            .unwrap_or_else(|| panic!("{app} has an install file"));
        let install = install.file_stem().unwrap().to_string_lossy().into_owned();
        for workflow in ["provision", "deploy", "deprovision"] {
            let out = ours("nuon")
                .args(["apps", "render"])
                .arg(&dir)
                .args(["--workflow", workflow, "--install", &install])
                .env("NUON_API_URL", "http://127.0.0.1:9")
                .output()
                .unwrap();
            let rendered = String::from_utf8_lossy(&out.stdout).into_owned();
            if !out.status.success() {
                failed.push(format!(
                    "{app} {workflow}: render failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
                continue;
            }
            let golden = dir.join("rendered").join(format!("{workflow}.txt"));
            if bless {
                std::fs::create_dir_all(golden.parent().unwrap()).unwrap();
                std::fs::write(&golden, &rendered).unwrap();
                continue;
            }
            match std::fs::read_to_string(&golden) {
                Ok(want) if want == rendered => {}
                Ok(want) => failed.push(format!(
                    "{app} {workflow}: the render is not {} (NUON_BLESS=1 rewrites it after a review)\n--- want\n{want}\n--- got\n{rendered}",
                    golden.display()
                )),
                Err(e) => failed.push(format!("{app} {workflow}: {}: {e}", golden.display())),
            }
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// Outputs the corpus's AWS apps read from their install stack that our
/// CloudFormation stack does not declare yet, each with why. The test
/// fails when one is declared (or read by no app any more), so that it
/// comes off this list.
const STACK_OUTPUT_GAPS: &[(&str, &str)] = &[];

/// The install stack of each AWS app of `tests/apps/` renders offline
/// (`nuon apps render --workflow provision`), passes `cfn-lint`, and
/// declares every output the app's sandbox, components and actions read
/// (`.nuon.install_stack.outputs.NAME`: an output of the template, or one
/// Nuon's contract adds when the stack phones home), but for the listed
/// gaps; and the provision renders against those outputs alone
/// (`--stack-outputs`, each a stand-in value).
#[test]
fn the_corpus_install_stacks_pass_cfn_lint_and_declare_what_the_apps_read() {
    if !nuon_tests::have_tool("cfn-lint", "check CloudFormation templates") {
        return;
    }
    let root = nuon_tests::repo_root().join("tests/apps");
    let tmp = tempfile::tempdir().unwrap();
    let contract = [
        "phone_home_type",
        "break_glass_role_arns",
        "custom_role_arns",
        "install_inputs",
        "runner_subnet",
    ];
    let mut failed = Vec::new();
    let mut gaps_read = std::collections::BTreeSet::new();
    let mut aws = 0;
    let apps = corpus(false);
    for app in &apps {
        let dir = root.join(app);
        let out = ours("nuon")
            .args(["apps", "render"])
            .arg(&dir)
            .args(["--workflow", "provision", "--json"])
            .env("NUON_API_URL", "http://127.0.0.1:9")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{app}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let template = v["artifacts"].as_array().unwrap().iter().find_map(|a| {
            let text = a["text"].as_str()?;
            let parsed: serde_json::Value = serde_json::from_str(text).ok()?;
            (a["what"].as_str()?.starts_with("install stack")
                && parsed.get("AWSTemplateFormatVersion").is_some())
            .then_some((text.to_owned(), parsed))
        });
        let Some((text, parsed)) = template else {
            continue; // a Helm chart or a VM bundle: not AWS
        };
        aws += 1;
        let file = tmp.path().join(format!("{app}.json"));
        std::fs::write(&file, &text).unwrap();
        let lint = std::process::Command::new("cfn-lint")
            .arg(&file)
            .output()
            .unwrap();
        // cfn-lint: 2 errors, 4 warnings, 8 informational.
        if lint.status.code().unwrap_or(2) & 6 != 0 {
            failed.push(format!(
                "{app}: cfn-lint:\n{}",
                String::from_utf8_lossy(&lint.stdout)
            ));
        }
        let declared: std::collections::BTreeSet<String> = parsed["Outputs"]
            .as_object()
            .unwrap()
            .values()
            .filter_map(|o| {
                o["Description"]
                    .as_str()?
                    .strip_prefix(".nuon.install_stack.outputs.")
            })
            .map(str::to_owned)
            .chain(contract.iter().map(|s| s.to_string()))
            .collect();
        // Each nested stack is reported by its id; the runner reads its
        // outputs into Nuon's `custom_nested_stacks` map.
        let mut declared = declared;
        if declared
            .iter()
            .any(|d| d.starts_with("custom_nested_stack_id."))
        {
            declared.insert("custom_nested_stacks".to_owned());
        }
        let mut read = std::collections::BTreeSet::new();
        for f in walk(&dir) {
            if f.components().any(|c| c.as_os_str() == "rendered") {
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&f) else {
                continue;
            };
            for (i, _) in text.match_indices("install_stack.outputs.") {
                let name: String = text[i + "install_stack.outputs.".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() && name != "NAME_arn" {
                    read.insert(name);
                }
            }
        }
        // The provision renders against what this stack reports (each of
        // its outputs, a stand-in value; each nested stack with the
        // outputs the app reads of it), made Nuon's contract.
        let mut reported = serde_json::Map::new();
        let made_by_contract = |n: &str| contract.contains(&n) || n == "custom_nested_stacks";
        for name in declared.iter().filter(|n| !made_by_contract(n)) {
            let value = if name.ends_with("_arn") || name.contains("iam_role_arn") {
                format!("arn:aws:iam::000000000000:role/{name}")
            } else {
                format!("stand-in-{name}")
            };
            reported.insert(name.clone(), value.into());
        }
        for f in walk(&dir) {
            let text = std::fs::read_to_string(&f).unwrap_or_default();
            for (i, _) in text.match_indices("install_stack.outputs.custom_nested_stacks.") {
                let path: String = text[i + "install_stack.outputs.".len()..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
                    .collect();
                reported.insert(path, "stand-in-nested-output".into());
            }
        }
        let outputs_file = tmp.path().join(format!("{app}-outputs.json"));
        std::fs::write(
            &outputs_file,
            serde_json::Value::Object(reported).to_string(),
        )
        .unwrap();
        let out = ours("nuon")
            .args(["apps", "render"])
            .arg(&dir)
            .args(["--workflow", "provision", "--stack-outputs"])
            .arg(&outputs_file)
            .env("NUON_API_URL", "http://127.0.0.1:9")
            .output()
            .unwrap();
        if !out.status.success() {
            failed.push(format!(
                "{app}: the provision does not render against the stack's own outputs: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        for name in read.difference(&declared) {
            if STACK_OUTPUT_GAPS.iter().any(|(g, _)| g == name) {
                gaps_read.insert(name.clone());
            } else {
                failed.push(format!("{app}: reads install_stack.outputs.{name}, which its stack does not declare (it declares {declared:?})"));
            }
        }
    }
    assert!(aws >= 10, "only {aws} AWS apps in the corpus");
    for (gap, why) in STACK_OUTPUT_GAPS {
        if !gaps_read.contains(*gap) {
            failed.push(format!("STACK_OUTPUT_GAPS lists {gap} ({why}), which the stack now declares or no app reads: take it off"));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n\n"));
}

/// Each app of `tests/apps/` (but the listed gaps) syncs to a control
/// plane as `nuon apps sync` sends it, and an install is created from its
/// install file: its inputs, labels and component toggles (secrets a
/// customer would enter given stand-ins).
#[test]
fn the_corpus_syncs_and_each_app_gets_an_install_from_its_install_file() {
    let cp = nuon_tests::ControlPlane::start("10s").unwrap();
    let root = nuon_tests::repo_root().join("tests/apps");
    let apps = corpus(false);
    let mut failed = Vec::new();
    for app in &apps {
        let dir = root.join(app);
        ok(&cp.nuon(&["apps", "create", app]));
        let out = cp.nuon(&["apps", "sync", dir.to_str().unwrap(), "--app", app]);
        if !out.status.success() {
            failed.push(format!(
                "{app}: sync: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
            continue;
        }
        let (config, _) = nuon_client::app_dir::validate_dir(&dir);
        let config = config.unwrap();
        let install = config
            .installs
            .first()
            .unwrap_or_else(|| panic!("{app} has an install file"));
        let mut args: Vec<String> = [
            "installs",
            "create",
            "--app",
            app,
            "--name",
            &install.name,
            "--json",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        for (k, v) in &install.inputs {
            let text = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            args.extend(["--input".into(), format!("{k}={text}")]);
        }
        for (k, v) in &install.labels {
            args.extend(["--label".into(), format!("{k}={v}")]);
        }
        for (k, on) in &install.component_toggles {
            args.extend([
                "--component".into(),
                format!("{k}={}", if *on { "on" } else { "off" }),
            ]);
        }
        for s in config
            .secrets
            .iter()
            .filter(|s| s.required && !s.auto_generate && s.default.is_none())
            // A customer-held secret is entered in the install stack.
            .filter(|s| !s.held_by_customer())
        {
            args.extend(["--secret".into(), format!("{}=corpus-stand-in", s.name)]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = cp.nuon(&args);
        if !out.status.success() {
            failed.push(format!(
                "{app}: installs create: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
    let installs = rt().block_on(cp.client().list_installs()).unwrap();
    assert_eq!(installs.installs.len(), apps.len());
}
