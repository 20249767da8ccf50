//! The lifecycle verbs: an input or secret change starts the workflow
//! Nuon starts (the update-inputs triggers around a redeploy of what reads
//! the values, shown first), an install is forgotten (nothing destroyed)
//! or deleted (deprovisioned, then removed, its runner revoked), and an
//! app is deleted only once it has no install.

use nuon_tests::{have_tool, rt};
use serde_json::Value;

use crate::deploy::{METADATA, Manual, ok, text};

const FILES: [(&str, &str); 9] = [
    METADATA,
    (
        "inputs.toml",
        "[[input]]\nname = \"greeting\"\ndescription = \"what the app says\"\ndefault = \"hello\"\n",
    ),
    (
        "secrets.toml",
        "[[secret]]\nname = \"token\"\ndescription = \"the db's token\"\ndefault = \"first-token-value\"\n",
    ),
    (
        "components/db.toml",
        "name = \"db\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/db\"\n\n[vars]\ntoken = \"{{ .nuon.secrets.token }}\"\n",
    ),
    (
        "src/db/main.tf",
        "variable \"token\" {\n  type      = string\n  sensitive = true\n}\n\nresource \"terraform_data\" \"db\" {\n  input = sha256(var.token)\n}\n\noutput \"token_sha\" {\n  value = terraform_data.db.output\n}\n",
    ),
    (
        "components/app.toml",
        "name = \"app\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/app\"\ndependencies = [\"db\"]\n\n[vars]\ngreeting = \"{{ .nuon.install.inputs.greeting }}\"\n",
    ),
    (
        "src/app/main.tf",
        "variable \"greeting\" {\n  type = string\n}\n\nresource \"terraform_data\" \"app\" {\n  input = var.greeting\n}\n\noutput \"says\" {\n  value = terraform_data.app.output\n}\n",
    ),
    (
        "actions/before.toml",
        "name = \"before\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"pre-update-inputs\"\n\n[[steps]]\nname = \"note\"\ncommand = \"echo inputs change\"\n",
    ),
    (
        "actions/after.toml",
        "name = \"after\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"post-update-inputs\"\n\n[[steps]]\nname = \"note\"\ncommand = \"echo inputs changed\"\n",
    ),
];

fn json(m: &Manual, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(m.cp.nuon(&all))).unwrap()
}

fn names(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect()
}

#[test]
fn value_changes_redeploy_what_reads_them_and_installs_and_apps_are_deleted() {
    if !have_tool("terraform", "deploy the app") {
        return;
    }
    let m = Manual::start(&FILES);
    let c = m.cp.client();
    let w = crate::deploy::run_workflow(&c, nuon_core::workflow::WorkflowKind::Deploy);
    assert_eq!(w.status.as_str(), "succeeded", "{w:#?}");

    // Shown first: a dry run changes nothing and starts nothing.
    let dry = json(
        &m,
        &[
            "installs",
            "update-inputs",
            "demo",
            "greeting=hi",
            "--dry-run",
        ],
    );
    assert_eq!(names(&dry["redeploys"]), ["app"]);
    assert_eq!(names(&dry["actions"]), ["before", "after"]);
    assert!(dry.get("workflow").is_none());
    assert_eq!(
        json(&m, &["installs", "get", "demo"])["inputs"]["greeting"],
        "hello"
    );
    let shown = ok(m.cp.nuon(&[
        "installs",
        "update-inputs",
        "demo",
        "greeting=hi",
        "--dry-run",
    ]));
    assert!(shown.contains("would redeploy: app"), "{shown}");

    // The change: the pre-update-inputs action, the app alone redeploys,
    // then the post-update-inputs action.
    let w = json(
        &m,
        &["installs", "update-inputs", "demo", "greeting=hi", "--wait"],
    );
    assert_eq!(w["status"], "succeeded", "{w:#}");
    assert_eq!(w["trigger"], "update-inputs");
    let steps: Vec<&str> = w["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        steps,
        [
            "action before",
            "sync app",
            "plan app",
            "apply app",
            "action after"
        ],
        "{w:#}"
    );
    let i = json(&m, &["installs", "get", "demo"]);
    assert_eq!(i["inputs"]["greeting"], "hi");
    assert_eq!(i["outputs"]["components"]["app"]["says"], "hi");

    // A secret, from a file: the db reads it, and the app depends on the db.
    let before = i["outputs"]["components"]["db"]["token_sha"].clone();
    let file = m.dir.path().join("token");
    std::fs::write(&file, "second-token-value\n").unwrap();
    let w = json(
        &m,
        &[
            "installs",
            "secrets",
            "set",
            "demo",
            "token",
            "--from-file",
            file.to_str().unwrap(),
            "--wait",
        ],
    );
    assert_eq!(w["status"], "succeeded", "{w:#}");
    let steps: Vec<&str> = w["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert!(
        steps.contains(&"apply db") && steps.contains(&"apply app"),
        "{steps:?}"
    );
    let i = json(&m, &["installs", "get", "demo"]);
    assert_ne!(i["outputs"]["components"]["db"]["token_sha"], before);
    // A bad name is refused with the names there are.
    let out =
        m.cp.nuon(&["installs", "update-inputs", "demo", "greting=x"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("did you mean \"greeting\""),
        "{}",
        text(&out)
    );

    // An app with installs is not deleted; it names them.
    let other = json(
        &m,
        &["installs", "create", "--app", "app", "--name", "other"],
    );
    let out = m.cp.nuon(&["apps", "delete", "app"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("demo, other"), "{}", text(&out));

    // Forget: the record goes, nothing is destroyed, and it says so.
    let out =
        m.cp.nuon(&["--json", "installs", "forget", "other", "--yes"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("not deprovisioned"), "{said}");
    let out = m.cp.nuon(&["installs", "get", "other"]);
    assert!(!out.status.success());
    let runner = other["install"]["runner_id"].as_str().unwrap();
    let r = rt().block_on(c.list_runners()).unwrap();
    assert!(
        r.runners
            .iter()
            .any(|x| x.id.as_str() == runner && x.revoked),
        "the forgotten install's runner is revoked"
    );

    // Delete: deprovisioned, then removed.
    let out =
        m.cp.nuon(&["installs", "delete", "demo", "--wait", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("deprovisioned and deleted"),
        "{}",
        text(&out)
    );
    let out = m.cp.nuon(&["installs", "get", "demo"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("no install"), "{}", text(&out));

    // Now the app goes too.
    let gone = json(&m, &["apps", "delete", "app"]);
    assert_eq!(gone["name"], "app");
    assert!(!m.cp.nuon(&["apps", "get", "app"]).status.success());
}
