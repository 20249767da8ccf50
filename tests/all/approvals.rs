//! Nuon's approval responses, one each, on a real deploy of two Terraform
//! components (`app` depends on `db`) on an install that asks for every
//! approval; `auto_approve_on_policies_passing` with a Rego policy that
//! passes; a plan gone stale planned again before its apply; and a
//! plan-only run that plans and changes nothing.

use std::time::Duration;

use nuon_core::wire::WorkflowInfo;
use nuon_tests::{ControlPlane, have_tool, rt};

use crate::deploy::{METADATA, Manual, ended, ok, step, text, wait_workflow};

/// `db`, and `app` reading it; each plan has a change (a timestamp), so
/// every apply asks for its approval.
pub(crate) const FILES: [(&str, &str); 7] = [
    METADATA,
    (
        "components/db.toml",
        "name = \"db\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/db\"\n",
    ),
    (
        "src/db/main.tf",
        "resource \"terraform_data\" \"db\" {\n  input = timestamp()\n}\n\noutput \"at\" {\n  value = terraform_data.db.output\n}\n",
    ),
    (
        "components/app.toml",
        "name = \"app\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/app\"\ndependencies = [\"db\"]\nauto_approve_on_policies_passing = true\n\n[vars]\ndb = \"{{ .nuon.components.db.outputs.at }}\"\n",
    ),
    (
        "src/app/main.tf",
        "variable \"db\" {\n  type    = string\n  default = \"\"\n}\n\nresource \"terraform_data\" \"app\" {\n  input = \"${var.db} ${timestamp()}\"\n}\n",
    ),
    (
        "policies/keep.toml",
        "type = \"terraform_module\"\nengine = \"opa\"\ncontents = \"./keep.rego\"\ncomponents = [\"app\"]\n",
    ),
    (
        "policies/keep.rego",
        "package nuon.keep\nimport rego.v1\n\ndeny contains \"nothing is destroyed\" if {\n  some rc in input.resource_changes\n  \"delete\" in rc.change.actions\n  not \"create\" in rc.change.actions\n}\n",
    ),
];

const AUTO: &str = "approved: its plan passed every policy (auto_approve_on_policies_passing)";

pub(crate) fn deploy(m: &Manual) -> String {
    let c = m.cp.client();
    let wf = rt()
        .block_on(c.create_workflow("demo", nuon_core::workflow::WorkflowKind::Deploy, None))
        .expect("deploy");
    wf.id.to_string()
}

/// Waits for `name` to wait for its approval.
pub(crate) fn waiting(m: &Manual, wf: &str, name: &str) -> WorkflowInfo {
    wait_workflow(&m.cp.client(), wf, |w| {
        ended(w) || step(w, name).status.as_str() == "waiting_approval"
    })
}

fn respond(m: &Manual, wf: &str, response: &str) -> WorkflowInfo {
    let out = m.cp.nuon(&["--json", "workflows", "respond", wf, response]);
    serde_json::from_str(&ok(out)).unwrap()
}

fn status(w: &WorkflowInfo, name: &str) -> String {
    step(w, name).status.to_string()
}

#[test]
fn each_approval_response_does_what_nuons_does() {
    if !have_tool("terraform", "deploy the app") {
        return;
    }
    let cp = ControlPlane::start_with("3s", &["--plan-max-age", "15s"]).unwrap();
    let m = Manual::start_on(cp, &FILES, None, |_| {}, &["--approval", "prompt"]);
    let c = m.cp.client();

    // retry: the plan runs again, then the apply asks again; approve: it
    // applies. The app's apply needs nobody: its plan passed its policy.
    let wf = deploy(&m);
    let w = waiting(&m, &wf, "apply db");
    let first_plan = step(&w, "plan db").job_id.clone().unwrap();

    // Who may answer: a read-only token may not (403), a deployer may
    // (though it creates no token), and the audit trail names who did.
    let token = |name: &str, scope| {
        let t = rt().block_on(c.create_token(name, scope)).unwrap();
        (t.token.id.to_string(), m.cp.client_with(&t.secret))
    };
    let (_, reader) = token("viewer", nuon_core::wire::TokenScope::Read);
    let (deployer_id, deployer) = token("deployer", nuon_core::wire::TokenScope::Deployer);
    let approve = nuon_core::workflow::ApprovalResponse::Approve;
    let e = rt()
        .block_on(reader.respond_to_approval(&wf, None, approve))
        .unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    let e = rt()
        .block_on(deployer.create_token("more", nuon_core::wire::TokenScope::Admin))
        .unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    assert!(e.to_string().contains("needs an admin token"), "{e}");
    let retry = nuon_core::workflow::ApprovalResponse::Retry;
    rt().block_on(deployer.respond_to_approval(&wf, None, retry))
        .unwrap();
    // The trail is written in batches: it shows both answers soon after.
    nuon_tests::wait_for("the audit trail", Duration::from_secs(20), || {
        let trail = rt().block_on(c.list_audit(0, 1000, None)).ok()?;
        let answered: Vec<(String, String)> = trail
            .entries
            .iter()
            .filter(|e| e.action == "respondToApproval")
            .map(|e| (e.actor.clone(), e.outcome.clone()))
            .collect();
        (answered.contains(&(deployer_id.clone(), "200".into()))
            && answered.iter().any(|(_, o)| o == "403"))
        .then_some(())
    })
    .unwrap();
    let w = waiting(&m, &wf, "apply db");
    let again = step(&w, "plan db");
    assert_ne!(again.job_id.as_ref(), Some(&first_plan), "planned again");
    // The earlier plan is kept with the step's tries, saying why.
    assert_eq!(again.attempts.len(), 1, "{again:?}");
    assert_eq!(again.attempts[0].job_id.as_ref(), Some(&first_plan));
    assert_eq!(
        again.attempts[0].reason,
        format!("planned again: {deployer_id} answered retry")
    );
    respond(&m, &wf, "approve");
    let w = wait_workflow(&c, &wf, ended);
    assert_eq!(w.status.as_str(), "succeeded", "{w:#?}");
    assert_eq!(step(&w, "apply app").reason.as_deref(), Some(AUTO));
    assert_eq!(
        step(&w, "apply app").approved_by.as_deref(),
        Some("control-plane")
    );
    assert!(step(&w, "apply app").approved_at_ms.is_some());

    // deny-skip-current: the database's apply is skipped, the app (which
    // depends on it) still deploys.
    let wf = deploy(&m);
    waiting(&m, &wf, "apply db");
    respond(&m, &wf, "deny-skip-current");
    let w = wait_workflow(&c, &wf, ended);
    assert_eq!(w.status.as_str(), "partial", "{w:#?}");
    assert_eq!(status(&w, "apply db"), "denied");
    assert_eq!(status(&w, "apply app"), "succeeded");

    // deny-skip-current-and-dependents: the app is skipped too.
    let wf = deploy(&m);
    waiting(&m, &wf, "apply db");
    respond(&m, &wf, "deny-skip-current-and-dependents");
    let w = wait_workflow(&c, &wf, ended);
    assert_eq!(w.status.as_str(), "partial", "{w:#?}");
    assert_eq!(status(&w, "apply db"), "denied");
    assert_eq!(status(&w, "plan app"), "skipped");
    assert_eq!(status(&w, "apply app"), "skipped");

    // deny: the workflow fails, nothing after the step runs.
    let wf = deploy(&m);
    waiting(&m, &wf, "apply db");
    let w = respond(&m, &wf, "deny");
    assert_eq!(w.status.as_str(), "failed", "{w:#?}");
    assert_eq!(status(&w, "apply db"), "denied");
    assert_eq!(status(&w, "apply app"), "skipped");
    // It has ended: no response is taken any more.
    let out = m.cp.nuon(&["workflows", "respond", &wf, "approve"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("has ended"), "{}", text(&out));
    let out = m.cp.nuon(&["workflows", "respond", &wf, "maybe"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("deny-skip-current"), "{}", text(&out));

    // A plan older than --plan-max-age is planned again before it applies,
    // and the apply asks again.
    let wf = deploy(&m);
    let w = waiting(&m, &wf, "apply db");
    let stale = step(&w, "plan db").job_id.clone().unwrap();
    std::thread::sleep(Duration::from_secs(16));
    respond(&m, &wf, "approve");
    let w = wait_workflow(&c, &wf, |w| {
        ended(w)
            || (step(w, "plan db").job_id.as_ref() != Some(&stale)
                && status(w, "apply db") == "waiting_approval")
    });
    let plan = step(&w, "plan db");
    let said = &plan.attempts.last().expect("the stale plan is kept").reason;
    assert!(said.contains("more than --plan-max-age (15 s)"), "{plan:?}");
    assert!(step(&w, "apply db").approved_at_ms.is_none());
    respond(&m, &wf, "deny");
}

#[test]
fn a_plan_only_run_plans_and_changes_nothing() {
    if !have_tool("terraform", "plan the app") {
        return;
    }
    let m = Manual::start(&FILES);
    let c = m.cp.client();
    let w = crate::deploy::run_workflow(&c, nuon_core::workflow::WorkflowKind::Deploy);
    assert_eq!(w.status.as_str(), "succeeded", "{w:#?}");
    let before = rt().block_on(c.get_install("demo")).unwrap();
    let out = m.cp.nuon(&[
        "--json",
        "installs",
        "deploy",
        "demo",
        "--plan-only",
        "--wait",
    ]);
    let w: WorkflowInfo = serde_json::from_str(&ok(out)).unwrap();
    assert_eq!(w.status.as_str(), "succeeded", "{w:#?}");
    assert_eq!(w.trigger.as_deref(), Some("plan-only"));
    let names: Vec<&str> = w.steps.iter().map(|s| s.name.as_str()).collect();
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("sync ") || n.starts_with("plan ")),
        "{names:?}"
    );
    assert!(names.contains(&"plan app"), "{names:?}");
    // The plan says what it would do; the install is as it was.
    let changes = &step(&w, "plan db").outputs["changes"];
    let n = |k: &str| changes[k].as_u64().unwrap_or(0);
    assert_eq!(n("add") + n("change"), 1, "{changes}");
    let after = rt().block_on(c.get_install("demo")).unwrap();
    assert_eq!(after.state, before.state);
    assert_eq!(after.outputs, before.outputs);
    // Not for an action.
    let out =
        m.cp.nuon(&["installs", "run-action", "demo", "x", "--wait"]);
    assert!(!out.status.success());
}
