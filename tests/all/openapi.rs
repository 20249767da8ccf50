//! The Control API as its OpenAPI document describes it: every route is
//! walked, so a new route is covered without touching this test.
//! Acceptance 4 of "Apps, components and installs": a token of org A gets
//! 404 on org B's resources, a read-only token 403 on every write.

use std::process::Command;

use serde_json::{Value, json};

use nuon_tests::{ControlPlane, ours, rt};

fn example() -> std::path::PathBuf {
    nuon_tests::manifest_dir().join("../examples/apps/hello")
}

fn nuon(cp: &ControlPlane, token: &str, args: &[&str]) -> Value {
    let out = ours("nuon")
        .arg("--json")
        .args(args)
        .env("NUON_API_URL", &cp.control_url)
        .env("NUON_TOKEN", token)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "nuon {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// What org B owns, by the names and ids a request could carry.
struct OrgB {
    /// Path parameter values by parameter name and route.
    app: String,
    install: String,
    runner: String,
    job: String,
    token: String,
    workflow: String,
    webhook: String,
    release: String,
    rollout: String,
    user: String,
    invitation: String,
    /// Every id and name of B, none of which may appear in an answer to A.
    secrets: Vec<String>,
}

fn send(
    cp: &ControlPlane,
    method: &str,
    path: &str,
    token: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    rt().block_on(async {
        let http = reqwest::Client::new();
        let url = format!("{}{path}", cp.control_url);
        let mut req = match method {
            "get" => http.get(url),
            "post" => http.post(url),
            "patch" => http.patch(url),
            "put" => http.put(url),
            "delete" => http.delete(url),
            other => panic!("method {other} is not handled by this test"),
        }
        .bearer_auth(token);
        if let Some(b) = body {
            req = req.json(b);
        } else if method != "get" && method != "delete" {
            req = req.header("content-type", "application/json").body("{}");
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    })
}

/// A runner release of `version` (a binary no runner downloads here).
fn runner_release(version: &str) -> Value {
    json!({
        "version": version, "os": "linux", "arch": "x86_64", "repository": "nuon-runner",
        "manifest": format!("sha256:{}", "a".repeat(64)),
        "digest": format!("sha256:{}", "b".repeat(64)),
        "size": 10,
    })
}

/// A body the operation accepts, naming B's resources where it names any.
fn body_for(op: &str, b: &OrgB) -> Option<Value> {
    Some(match op {
        "createRunner" => json!({"name": "a-runner"}),
        "createJob" => json!({"runner": b.runner, "kind": "exec", "payload": {"command": "true"}}),
        "createApp" => json!({"name": "a-app"}),
        "syncAppConfig" => {
            json!({"files": [{"path": "metadata.toml", "contents": "version = \"v2\"\n"}]})
        }
        "createInstall" => json!({"app": b.app, "name": "a-install"}),
        "setInstallInputs" => json!({"inputs": {}}),
        "setInstallLabels" => json!({"set": {"tier": "prod"}, "remove": ["old"]}),
        "updateInstall" => json!({"approval": "prompt"}),
        "createInstallGroup" => json!({"name": "a-group", "selector": "tier=prod"}),
        "createRelease" => json!({"app": b.app}),
        "updateInstallInputs" => json!({"inputs": {}, "dry_run": false}),
        "respondToApproval" => json!({"response": "approve"}),
        "createRollout" => json!({"to": "tier=prod", "waves": "1,100%"}),
        "createRunnerRollout" => json!({"waves": "50%,100%"}),
        "publishRunnerRelease" => runner_release("a-1.0.0"),
        "createToken" => json!({"name": "a-token", "scope": "read"}),
        "inviteUser" => json!({"email": "ann@example.com", "role": "viewer"}),
        "setUserRole" => json!({"role": "deployer"}),
        "createWorkflow" => json!({"kind": "deploy"}),
        "createWebhook" => {
            json!({"url": "https://hooks.example.com/a", "events": ["workflow_failed"]})
        }
        "requestInstallDebug" => json!({"command": ["true"]}),
        "setInstallComponentOverrides" => json!({"tf_vars": "a = 1\n"}),
        "pushInstallCheck" => json!({"status": "healthy", "detail": "ready"}),
        "createInvitation" => json!({"app": b.app}),
        "revokeRunner"
        | "rotateRunnerToken"
        | "cancelJob"
        | "revokeToken"
        | "createSignInCode"
        | "forceUnlockState"
        | "createBuilds"
        | "approveWorkflowStep"
        | "denyWorkflowStep"
        | "cancelWorkflow"
        | "retryWorkflow"
        | "skipWorkflowStep"
        | "disableInstallComponent"
        | "enableInstallComponent"
        | "removeWebhook"
        | "deleteInstallGroup"
        | "deleteInstall"
        | "forgetInstall"
        | "applyInstallPending"
        | "discardInstallPending"
        | "deleteApp"
        | "resumeRollout"
        | "pauseRollout"
        | "retryRollout"
        | "cancelRollout"
        | "rollbackRollout"
        | "removeUser"
        | "revokeInvitation"
        | "uploadRunnerBinary" => {
            return None;
        }
        other => panic!("no request body known for write operation {other}: add one to this test"),
    })
}

#[test]
fn every_route_is_scoped_to_the_token_org_and_read_tokens_cannot_write() {
    let cp = ControlPlane::start("10s").unwrap();
    let a_admin = cp.admin_token.clone();
    let b_admin = cp.create_org("org-b").unwrap();

    // Org B: an app with a config, an install (with its runner), a job, a token.
    nuon(&cp, &b_admin, &["apps", "create", "b-app"]);
    nuon(
        &cp,
        &b_admin,
        &[
            "apps",
            "sync",
            example().to_str().unwrap(),
            "--app",
            "b-app",
        ],
    );
    let inst = nuon(
        &cp,
        &b_admin,
        &[
            "installs",
            "create",
            "--app",
            "b-app",
            "--name",
            "b-install",
            "--input",
            "api_key=k3y-demo",
        ],
    );
    let runner = inst["install"]["runner_id"].as_str().unwrap().to_owned();
    let job = nuon(
        &cp,
        &b_admin,
        &["jobs", "exec", "--runner", &runner, "--", "true"],
    );
    let token = nuon(
        &cp,
        &b_admin,
        &["orgs", "tokens", "create", "--name", "b-reader"],
    );
    let webhook = nuon(
        &cp,
        &b_admin,
        &[
            "orgs",
            "webhooks",
            "add",
            "https://hooks.example.com/b",
            "--events",
            "workflow_failed",
        ],
    );
    nuon(
        &cp,
        &b_admin,
        &[
            "installs",
            "groups",
            "create",
            "b-group",
            "--selector",
            "tier=prod",
        ],
    );
    let user = nuon(
        &cp,
        &b_admin,
        &["users", "invite", "bea@example.com", "--role", "viewer"],
    );
    let invitation = nuon(
        &cp,
        &b_admin,
        &[
            "installs",
            "invite",
            "--app",
            "b-app",
            "--email",
            "b@customer.test",
        ],
    );
    let mut b = OrgB {
        invitation: invitation["invitation"]["id"].as_str().unwrap().to_owned(),
        user: user["id"].as_str().unwrap().to_owned(),
        webhook: webhook["webhook"]["id"].as_str().unwrap().to_owned(),
        app: "b-app".into(),
        install: "b-install".into(),
        runner: runner.clone(),
        job: job["id"].as_str().unwrap().to_owned(),
        token: token["token"]["id"].as_str().unwrap().to_owned(),
        workflow: nuon_core::WorkflowId::generate().to_string(),
        // Org B has no release (nothing is built): any id is someone else's.
        release: nuon_core::ReleaseId::generate().to_string(),
        rollout: nuon_core::RolloutId::generate().to_string(),
        secrets: vec![
            "b-app".into(),
            inst["install"]["app_id"].as_str().unwrap().into(),
            "b-install".into(),
            inst["install"]["id"].as_str().unwrap().into(),
            runner,
            job["id"].as_str().unwrap().into(),
            token["token"]["id"].as_str().unwrap().into(),
            webhook["webhook"]["id"].as_str().unwrap().into(),
            "b-group".into(),
            "bea@example.com".into(),
            invitation["invitation"]["id"].as_str().unwrap().into(),
            invitation["url"].as_str().unwrap().into(),
            "b@customer.test".into(),
        ],
    };
    // Org B's runner version "1": org A asking for its version "1" (the
    // `{version}` below) gets none of it.
    let (status, published) = send(
        &cp,
        "post",
        "/v1/runner-releases",
        &b_admin,
        Some(&runner_release("1")),
    );
    assert_eq!(status, 201, "{published}");
    b.secrets.push(published["id"].as_str().unwrap().to_owned());
    // Org A: a read-only token.
    let a_read = nuon(
        &cp,
        &a_admin,
        &["orgs", "tokens", "create", "--name", "a-reader"],
    )["secret"]
        .as_str()
        .unwrap()
        .to_owned();

    // A's audit trail after entry `after`: the entries of operation `id`
    // only, and the last entry's number.
    let recorded = |after: u64, id: &str| -> (Vec<Value>, u64) {
        let (status, list) = send(
            &cp,
            "get",
            &format!("/v1/audit?after={after}"),
            &a_admin,
            None,
        );
        assert_eq!(status, 200, "{list}");
        let entries = list["entries"].as_array().cloned().unwrap_or_default();
        let last = entries
            .last()
            .and_then(|e| e["n"].as_u64())
            .unwrap_or(after);
        let of_id = entries.into_iter().filter(|e| e["action"] == id).collect();
        (of_id, last)
    };
    let (_, mut seen) = recorded(0, "");

    let (status, doc) = send(&cp, "get", "/openapi.json", "no-token-needed", None);
    assert_eq!(status, 200);
    let mut walked = 0;
    let mut writes = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap();
            // Signing in needs no token and belongs to no org until it
            // ends: tests/all/people.rs walks it.
            if op["security"].as_array().is_some_and(|s| s.is_empty()) {
                continue;
            }
            let write = method != "get";
            // Fill path parameters with B's resources.
            let mut url = path.clone();
            let mut has_params = false;
            for seg in path.split('/') {
                let value = match seg {
                    "{id}" if path.starts_with("/v1/apps") => &b.app,
                    "{id}" if path.starts_with("/v1/installs") => &b.install,
                    "{id}" if path.starts_with("/v1/runners") => &b.runner,
                    "{id}" if path.starts_with("/v1/jobs") => &b.job,
                    // A build's id is its job's: B's job is no build of A's.
                    "{id}" if path.starts_with("/v1/builds") => &b.job,
                    "{id}" if path.starts_with("/v1/tokens") => &b.token,
                    "{id}" if path.starts_with("/v1/users") => &b.user,
                    // Org B has no workflow yet: any id is someone else's.
                    "{id}" if path.starts_with("/v1/workflows") => &b.workflow,
                    "{id}" if path.starts_with("/v1/webhooks") => &b.webhook,
                    "{id}" if path.starts_with("/v1/invitations") => &b.invitation,
                    "{id}" if path.starts_with("/v1/installers") => &b.app,
                    "{name}" if path.starts_with("/v1/install-groups") => "b-group",
                    "{id}" if path.starts_with("/v1/releases") => &b.release,
                    "{id}" if path.starts_with("/v1/rollouts") => &b.rollout,
                    "{version}" => "1",
                    "{component}" => "app",
                    "{workflow}" => "deploy",
                    "{name}" if path.starts_with("/v1/installs") => "ready",
                    s if s.starts_with('{') => panic!("no value known for {s} in {path}: add one"),
                    _ => continue,
                };
                has_params = true;
                url = url.replace(seg, value);
            }
            let body = if write { body_for(id, &b) } else { None };
            let names_b = op["requestBody"].is_object()
                && body.as_ref().is_some_and(|v| {
                    let t = v.to_string();
                    b.secrets.iter().any(|s| t.contains(s.as_str()))
                });

            // A's admin token on B's resources: not found, never B's data.
            let (status, answer) = send(&cp, method, &url, &a_admin, body.as_ref());
            if has_params || names_b {
                assert_eq!(
                    status, 404,
                    "{method} {url} ({id}) with org A's token: {answer}"
                );
                let msg = answer["error"]["message"].as_str().unwrap_or("");
                assert!(
                    !msg.starts_with("no route"),
                    "{method} {url} is not served: {answer}"
                );
            } else {
                assert!(status < 300, "{method} {url} ({id}): {status} {answer}");
                // A's audit trail echoes the paths A itself asked for
                // (B's names among them, refused): A's own record.
                let text = if path.starts_with("/v1/audit") {
                    String::new()
                } else {
                    answer.to_string()
                };
                for s in &b.secrets {
                    assert!(
                        !text.contains(s.as_str()),
                        "{method} {url} shows org B's {s}: {text}"
                    );
                }
            }

            // Every write is recorded once in the audit trail (by its
            // service operation), refusals too.
            if write {
                let (entries, last) = recorded(seen, id);
                assert_eq!(
                    entries.len(),
                    1,
                    "{method} {url} ({id}) with org A's admin token is recorded {} times: {entries:?}",
                    entries.len()
                );
                assert_eq!(entries[0]["outcome"], status.to_string(), "{entries:?}");
                seen = last;
            }

            // A's read-only token: every write is forbidden.
            if write {
                let own = url.replace(&b.app, "a-app");
                let (status, answer) = send(&cp, method, &own, &a_read, body.as_ref());
                assert_eq!(
                    status, 403,
                    "{method} {own} ({id}) with a read-only token: {answer}"
                );
                assert_eq!(answer["error"]["code"], "forbidden");
                let (entries, last) = recorded(seen, id);
                assert_eq!(
                    entries.len(),
                    1,
                    "{method} {own} ({id}) refused to a read-only token is recorded {} times: {entries:?}",
                    entries.len()
                );
                assert_eq!(entries[0]["outcome"], "403", "{entries:?}");
                seen = last;
                writes += 1;
            }
            walked += 1;
        }
    }
    assert!(
        walked >= 20 && writes >= 9,
        "walked {walked} operations, {writes} writes"
    );
    // B's things are all still there and unchanged for B.
    let (status, list) = send(&cp, "get", "/v1/installs", &b_admin, None);
    assert_eq!(status, 200);
    assert_eq!(list["installs"][0]["name"], "b-install");
}

/// Acceptance 5: the document validates (openapi-spec-validator), and
/// schemathesis, generating requests from it against a live server with
/// data in it, finds no answer that breaks it and no server error.
#[test]
fn the_document_validates_and_schemathesis_finds_no_answer_that_breaks_it() {
    if !nuon_tests::have_tool("st", "run schemathesis (pip install schemathesis)") {
        return;
    }
    let cp = ControlPlane::start("10s").unwrap();
    let admin = cp.admin_token.clone();
    nuon(&cp, &admin, &["apps", "create", "hello"]);
    nuon(
        &cp,
        &admin,
        &[
            "apps",
            "sync",
            example().to_str().unwrap(),
            "--app",
            "hello",
        ],
    );
    nuon(
        &cp,
        &admin,
        &[
            "installs",
            "create",
            "--app",
            "hello",
            "--name",
            "demo",
            "--input",
            "api_key=k3y-demo",
        ],
    );
    let runner = nuon(&cp, &admin, &["runners", "create", "--name", "r1"]);
    nuon(
        &cp,
        &admin,
        &["jobs", "exec", "--runner", "r1", "--", "true"],
    );
    let _ = runner;

    let dir = tempfile::tempdir().unwrap();
    let doc_path = dir.path().join("openapi.json");
    let (status, doc) = send(&cp, "get", "/openapi.json", "none", None);
    assert_eq!(status, 200);
    std::fs::write(&doc_path, doc.to_string()).unwrap();
    let check = Command::new("python3")
        .args([
            "-c",
            "import json, sys; from openapi_spec_validator import validate; validate(json.load(open(sys.argv[1]))); print('valid')",
        ])
        .arg(&doc_path)
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "the OpenAPI document does not validate (pip install openapi-spec-validator):\n{}",
        String::from_utf8_lossy(&check.stderr)
    );

    let out = Command::new("st")
        // Its cache goes to the working directory: keep it out of the tree.
        .current_dir(dir.path())
        .args(["run", &format!("{}/openapi.json", cp.control_url)])
        .args(["-H", &format!("Authorization: Bearer {admin}")])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
            "--max-examples",
            "25",
            "--seed",
            "1",
        ])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "schemathesis found problems:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = stdout
        .lines()
        .find(|l| l.contains(" generated, "))
        .unwrap_or_default()
        .to_owned();
    eprintln!("schemathesis: {summary}");
    assert!(
        summary.contains("passed") && !summary.contains("failed"),
        "{stdout}"
    );
    assert!(
        !cp.server_log().contains("internal error"),
        "{}",
        cp.server_log()
    );
}
