//! An install's own settings, `PATCH /v1/installs/{id}`: the first
//! operation declared once (`nuon_core::endpoint::UpdateInstall`) and run
//! by the service layer. Renamed and its approval mode changed from the
//! CLI with `--json`, through the client's generic `call`, and from the
//! dashboard's form; refused for a read-only token, a name taken, a bad
//! name and a change of nothing; every attempt in the audit trail under
//! `updateInstall`, with how it ended.

use std::process::Output;
use std::time::Duration;

use nuon_core::audit::AuditEntry;
use nuon_core::endpoint::UpdateInstall;
use nuon_core::model::ApprovalMode;
use nuon_core::wire::EditInstall;
use nuon_tests::webdriver::Chrome;
use nuon_tests::{ControlPlane, rt};
use serde_json::{Value, json};

use crate::deploy::{example, ok, text};

fn failed(out: &Output) -> Value {
    assert!(!out.status.success(), "{}", text(out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("not one JSON document: {}", text(out)))
}

fn api_code(e: nuon_client::Error) -> (u16, String) {
    match e {
        nuon_client::Error::Api { status, code, .. } => (status, code),
        other => panic!("not an API refusal: {other}"),
    }
}

/// A control plane with the example app synced as `hello`.
fn with_hello() -> ControlPlane {
    let cp = ControlPlane::start("10s").unwrap();
    ok(cp.nuon(&["apps", "create", "hello"]));
    ok(cp.nuon(&[
        "apps",
        "sync",
        example().to_str().unwrap(),
        "--app",
        "hello",
    ]));
    cp
}

#[test]
fn an_install_is_renamed_and_its_approvals_changed_from_the_cli_the_client_and_the_dashboard() {
    let cp = with_hello();
    for name in ["a", "b"] {
        ok(cp.nuon(&[
            "installs",
            "create",
            "--app",
            "hello",
            "--name",
            name,
            "--input",
            "api_key=k3y-demo",
        ]));
    }
    let json = |args: &[&str]| -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&ok(cp.nuon(&all))).unwrap()
    };
    let a = json(&["installs", "get", "a"]);
    assert_eq!(
        (&a["state"], &a["approval"]),
        (&json!("created"), &json!("approve-all"))
    );
    let id = a["id"].as_str().unwrap().to_owned();

    // The CLI, with --json: the install as it is after.
    let changed = json(&[
        "installs",
        "update",
        "a",
        "--name",
        "a2",
        "--approval",
        "prompt",
    ]);
    assert_eq!(changed["id"], id.as_str());
    assert_eq!(changed["name"], "a2");
    assert_eq!(changed["approval"], "prompt");
    assert_eq!(changed["app_name"], "hello", "{changed:#}");
    assert_eq!(json(&["installs", "get", "a2"])["approval"], "prompt");
    let gone = failed(&cp.nuon(&["--json", "installs", "get", "a"]));
    assert_eq!(gone["code"], "not_found", "{gone}");
    // By id, and Nuon's `auto`; only what is given changes.
    let auto = json(&["installs", "update", &id, "--approval", "auto"]);
    assert_eq!(
        (&auto["name"], &auto["approval"]),
        (&json!("a2"), &json!("approve-all"))
    );

    // A name another install has: 409, and nothing changed (the approval
    // given with it included).
    let taken = failed(&cp.nuon(&[
        "--json",
        "installs",
        "update",
        "a2",
        "--name",
        "b",
        "--approval",
        "prompt",
    ]));
    assert_eq!(taken["code"], "name_taken", "{taken}");
    assert!(
        taken["error"].as_str().unwrap().contains("\"b\""),
        "{taken}"
    );
    let a2 = json(&["installs", "get", "a2"]);
    assert_eq!(
        (&a2["name"], &a2["approval"]),
        (&json!("a2"), &json!("approve-all"))
    );
    // Nothing to change: the CLI says so before asking (64); the API
    // refuses it too (400), as it refuses a bad name and a bad mode.
    let nothing = cp.nuon(&["installs", "update", "a2"]);
    assert_eq!(nothing.status.code(), Some(64), "{}", text(&nothing));
    assert!(text(&nothing).contains("--approval"), "{}", text(&nothing));
    let c = cp.client();
    let (status, code) = api_code(
        rt().block_on(c.call::<UpdateInstall>(&["a2"], &EditInstall::default()))
            .unwrap_err(),
    );
    assert_eq!((status, code.as_str()), (400, "bad_request"));
    let bad = EditInstall {
        name: Some("a/2".into()),
        approval: None,
    };
    let (status, _) = api_code(rt().block_on(c.update_install("a2", &bad)).unwrap_err());
    assert_eq!(status, 400);
    let raw = rt().block_on(async {
        reqwest::Client::new()
            .patch(format!("{}/v1/installs/a2", cp.control_url))
            .bearer_auth(&cp.admin_token)
            .json(&json!({"approval": "manual"}))
            .send()
            .await
            .unwrap()
    });
    assert_eq!(raw.status().as_u16(), 400);
    let body = rt().block_on(raw.text()).unwrap();
    assert!(
        body.contains("approve-all") && body.contains("prompt"),
        "{body}"
    );
    // The generic call and the named method are the same call.
    let same = rt()
        .block_on(c.call::<nuon_core::endpoint::GetInstall>(&["a2"], &()))
        .unwrap();
    assert_eq!(same, rt().block_on(c.get_install(&id)).unwrap());

    // A read-only token may look, not change.
    let reader = json(&["orgs", "tokens", "create", "--name", "reader"]);
    let reader = cp.client_with(reader["secret"].as_str().unwrap());
    let prompt = EditInstall {
        name: None,
        approval: Some(ApprovalMode::Prompt),
    };
    let (status, code) = api_code(
        rt().block_on(reader.update_install("a2", &prompt))
            .unwrap_err(),
    );
    assert_eq!((status, code.as_str()), (403, "forbidden"));
    assert_eq!(json(&["installs", "get", "a2"])["approval"], "approve-all");

    // Every attempt is in the trail under the operation's id, once, with
    // how it ended.
    let trail = json(&["audit", "list", "--limit", "1000"]);
    let entries: Vec<AuditEntry> = serde_json::from_value(trail["entries"].clone()).unwrap();
    let mut updates: Vec<(&str, &str)> = entries
        .iter()
        .filter(|e| e.action == "updateInstall")
        .map(|e| (e.target.as_str(), e.outcome.as_str()))
        .collect();
    updates.sort();
    let by_id = format!("/v1/installs/{id}");
    let mut want = vec![
        ("/v1/installs/a", "200"),
        (by_id.as_str(), "200"),
        ("/v1/installs/a2", "409"),
        ("/v1/installs/a2", "400"),
        ("/v1/installs/a2", "400"),
        ("/v1/installs/a2", "400"),
        ("/v1/installs/a2", "403"),
    ];
    want.sort();
    assert_eq!(updates, want, "{entries:#?}");
    assert!(
        entries
            .iter()
            .filter(|e| e.action == "updateInstall")
            .all(|e| e.source == "127.0.0.1"),
        "{entries:#?}"
    );

    // The dashboard's form: the same operation, recorded the same way.
    let Some(b) = Chrome::start() else { return };
    let base = cp.control_url.clone();
    b.goto(&format!("{base}/login"));
    b.type_into("#token", &cp.admin_token);
    b.click("form[action='/login'] button");
    b.wait_until("the overview", Duration::from_secs(10), |b| {
        b.url() == format!("{base}/")
    });
    b.goto(&format!("{base}/installs/{id}"));
    b.exec(
        "const n = document.getElementById('install-name'); n.value = 'a3'; n.closest('details').open = true; document.getElementById('install-approval').value = 'prompt';",
        json!([]),
    );
    b.click("form[action$='/settings'] button");
    b.wait_until("the renamed install's page", Duration::from_secs(10), |b| {
        b.text("h1").contains("Install a3")
    });
    let a3 = json(&["installs", "get", "a3"]);
    assert_eq!((&a3["id"], &a3["approval"]), (&json!(id), &json!("prompt")));
    let trail = json(&["audit", "list", "--limit", "1000"]);
    let entries: Vec<AuditEntry> = serde_json::from_value(trail["entries"].clone()).unwrap();
    let from_page = entries
        .iter()
        .filter(|e| e.action == "updateInstall" && e.outcome == "200")
        .count();
    assert_eq!(from_page, 3, "{entries:#?}");
}

/// `nuon installs render`: a live install's workflow rendered through the
/// API with its own values and outputs, nothing run, secrets and sensitive
/// inputs as stand-ins, for a read-only token too.
#[test]
fn an_installs_workflow_renders_without_running_and_shows_no_secret() {
    let cp = with_hello();
    ok(cp.nuon(&[
        "installs",
        "create",
        "--app",
        "hello",
        "--name",
        "r",
        "--input",
        "api_key=k3y-demo",
        "--input",
        "greeting=howdy",
        "--secret",
        "db_password=s3cret-pw",
    ]));
    let id = rt()
        .block_on(cp.client().get_install("r"))
        .unwrap()
        .id
        .to_string();
    let out = ok(cp.nuon(&[
        "--json",
        "installs",
        "render",
        "r",
        "--workflow",
        "provision",
    ]));
    assert!(
        !out.contains("s3cret-pw") && !out.contains("k3y-demo"),
        "{out}"
    );
    let got: Value = serde_json::from_str(&out).unwrap();
    let find = |step: &str, what: &str| crate::apps::rendered(&got, step, what);
    assert_eq!(find("plan app", "var greeting"), "howdy");
    assert_eq!(
        find("plan database", "var name"),
        format!("{id}-db").as_str()
    );
    assert_eq!(find("plan database", "var password"), "(secret)");
    assert_eq!(find("plan app", "env TF_VAR_api_key"), "(sensitive)");
    assert_eq!(find("plan app", "var database_url"), "(known after apply)");
    assert_eq!(got["problems"], json!([]));

    // A read-only token renders too (it sees what a job's view shows).
    let read = rt()
        .block_on(
            cp.client()
                .create_token("reader", nuon_core::wire::TokenScope::Read),
        )
        .unwrap();
    let r = rt()
        .block_on(cp.client_with(&read.secret).render_install(&id, "deploy"))
        .unwrap();
    assert_eq!(r.workflow, nuon_core::workflow::WorkflowKind::Deploy);
    assert!(r.artifacts.iter().any(|a| a.step == "plan app"), "{r:?}");
    // The dashboard's page of the install shows the same.
    let page = cp.dashboard_page("/installs/r/render?workflow=provision");
    assert!(page.contains("plan app: var greeting"), "{page}");
    assert!(
        page.contains("howdy") && page.contains("(known after apply)"),
        "{page}"
    );
    assert!(
        !page.contains("s3cret-pw") && !page.contains("k3y-demo"),
        "{page}"
    );
    assert!(cp.dashboard_page("/installs/r").contains("/installs/"));
    // A workflow it does not render: refused, saying what to give.
    let e = rt()
        .block_on(cp.client().render_install("r", "runbook"))
        .unwrap_err();
    let (status, _) = api_code(e);
    assert_eq!(status, 400);
}

/// `nuon installs readme`: the app's README (a file the config names,
/// kept with the version) rendered for an install as Nuon renders it:
/// secrets as stand-ins; a reference that does not render is a warning and
/// the README is shown as written; the same on the dashboard; no README is
/// a 404 that says where to give one.
#[test]
fn an_installs_readme_renders_and_what_does_not_render_is_a_warning() {
    let cp = ControlPlane::start("10s").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path();
    crate::deploy::write_files(
        app,
        &[
            (
                "metadata.toml",
                "version = \"v2\"\nreadme = \"./README.md\"\n",
            ),
            (
                "README.md",
                "# {{ .nuon.install.name }}\n\nSay {{ .nuon.install.inputs.greeting | upper }}; the password is {{ .nuon.secrets.db_password }}.\n",
            ),
            (
                "inputs.toml",
                "[[input]]\nname = \"greeting\"\ndescription = \"what it says\"\ndefault = \"hi\"\n",
            ),
            (
                "secrets.toml",
                "[[secret]]\nname = \"db_password\"\ndescription = \"the database's\"\n",
            ),
            (
                "components/web.toml",
                "name = \"web\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"tf\"\nreadme = \"./web.md\"\n",
            ),
            (
                "components/web.md",
                "The web says {{ .nuon.install.inputs.greeting }}.\n",
            ),
            ("tf/main.tf", "output \"ok\" {\n  value = true\n}\n"),
        ],
    );
    ok(cp.nuon(&["apps", "create", "docs"]));
    ok(cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "docs"]));
    ok(cp.nuon(&[
        "installs",
        "create",
        "--app",
        "docs",
        "--name",
        "d",
        "--input",
        "greeting=howdy",
        "--secret",
        "db_password=s3cret-pw",
    ]));
    let out = ok(cp.nuon(&["installs", "readme", "d"]));
    assert!(
        out.starts_with("# d\n\nSay HOWDY; the password is "),
        "{out}"
    );
    assert!(!out.contains("s3cret-pw"), "{out}");
    assert!(
        out.ends_with(".\n\n## web\n\nThe web says howdy.\n"),
        "a component's README follows the app's, under its name: {out}"
    );
    let read = rt()
        .block_on(
            cp.client()
                .create_token("reader", nuon_core::wire::TokenScope::Read),
        )
        .unwrap();
    let r = rt()
        .block_on(cp.client_with(&read.secret).install_readme("d"))
        .unwrap();
    assert!(
        r.warnings.is_empty() && r.rendered.contains("HOWDY"),
        "{r:?}"
    );

    // A version whose README reads what the install does not have yet.
    std::fs::write(
        app.join("README.md"),
        "Open {{ .nuon.sandbox.outputs.url }} as {{ .nuon.install.name }}\n",
    )
    .unwrap();
    ok(cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "docs"]));
    ok(cp.nuon(&[
        "installs",
        "create",
        "--app",
        "docs",
        "--name",
        "e",
        "--secret",
        "db_password=pass-word",
    ]));
    let out = cp.nuon(&["--json", "installs", "readme", "e"]);
    let got: Value = serde_json::from_str(&ok(out)).unwrap();
    assert_eq!(
        got["rendered"],
        "Open {{ .nuon.sandbox.outputs.url }} as {{ .nuon.install.name }}\n\n## web\n\nThe web says hi.\n",
        "the app's shown as written, the component's rendered: {got}"
    );
    let warning = got["warnings"][0].as_str().unwrap();
    assert!(
        warning.starts_with("{{ .nuon.sandbox.outputs.url }}: ")
            && warning.contains("shown as written"),
        "{warning}"
    );
    let page = cp.dashboard_page("/installs/e/readme");
    assert!(
        page.contains("What does not render") && page.contains(".nuon.sandbox.outputs.url"),
        "{page}"
    );
    assert!(cp.dashboard_page("/installs/d").contains("/installs/"));

    // No README: a 404 that says where to give one.
    std::fs::write(app.join("metadata.toml"), "version = \"v2\"\n").unwrap();
    std::fs::write(
        app.join("components/web.toml"),
        "name = \"web\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"tf\"\n",
    )
    .unwrap();
    ok(cp.nuon(&["apps", "create", "bare"]));
    ok(cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "bare"]));
    ok(cp.nuon(&[
        "installs",
        "create",
        "--app",
        "bare",
        "--name",
        "b",
        "--secret",
        "db_password=pass-word",
    ]));
    let e = rt().block_on(cp.client().install_readme("b")).unwrap_err();
    match e {
        nuon_client::Error::Api {
            status, message, ..
        } => {
            assert_eq!(status, 404);
            assert!(message.contains("metadata.toml"), "{message}");
        }
        other => panic!("{other}"),
    }
}
