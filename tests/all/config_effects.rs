//! What the keys of a Nuon config do at run time, with real Terraform:
//! `max_auto_retries`, `toggleable`/`default_enabled` with `nuon installs
//! components`, an action's `[[inputs]]` given with `--input`, cron
//! triggers the control plane starts, and Rego policies over rendered Helm
//! and Kubernetes manifests, secrets synced into Kubernetes with their
//! triggers, kubernetes contexts and actions' kubeconfigs (against
//! stand-in `helm` and `kubectl`: no Kubernetes API server runs here), and
//! components' health probes.

use std::time::Duration;

use nuon_core::workflow::WorkflowKind;
use nuon_tests::{ControlPlane, have_tool, rt, wait_for};

use crate::deploy::{
    METADATA, Manual, ended, newest_workflow, ok, run_workflow, stand_in_helm, stand_in_kubectl,
    step, text, write_executable,
};

/// A Terraform module whose apply fails until `marker` exists (the first
/// failure creates it), or always with `marker = ""`.
const FLAKY_TF: &str = r#"variable "marker" {
  type = string
}

resource "terraform_data" "try" {
  input = var.marker
  provisioner "local-exec" {
    command = "test -n '${var.marker}' && test -f '${var.marker}' || { [ -n '${var.marker}' ] && touch '${var.marker}'; echo 'the service is not ready yet' >&2; exit 1; }"
  }
}

output "ok" {
  value = true
}
"#;

/// A Terraform module with one resource and its output `up`.
const UP_TF: &str = "resource \"terraform_data\" \"x\" {\n  input = \"up\"\n}\n\noutput \"up\" {\n  value = terraform_data.x.output\n}\n";

/// The first workflow of the install `trigger` started that has ended.
fn ended_run_of(c: &nuon_client::ControlClient, trigger: &str) -> nuon_core::wire::WorkflowInfo {
    wait_for(
        &format!("a run started by {trigger}"),
        Duration::from_secs(100),
        || {
            let list = rt().block_on(c.list_workflows("demo")).ok()?;
            list.workflows
                .into_iter()
                .find(|w| w.trigger.as_deref() == Some(trigger) && ended(w))
        },
    )
    .unwrap()
}

fn component(name: &str, extra: &str) -> String {
    format!(
        "name = \"{name}\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"tf\"\n{extra}"
    )
}

#[test]
fn a_failed_apply_is_retried_on_its_own_and_every_try_is_kept() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let marker = tempfile::tempdir().unwrap();
    let marker = marker.path().join("first-try-failed");
    let flaky = component(
        "flaky",
        &format!(
            "max_auto_retries = 2\n[vars]\nmarker = \"{}\"\n",
            marker.display()
        ),
    );
    let broken = component(
        "broken",
        "max_auto_retries = 1\ndependencies = [\"flaky\"]\n[vars]\nmarker = \"\"\n",
    );
    // zeta comes after broken, and runs once broken is skipped.
    let zeta = component(
        "zeta",
        &format!(
            "dependencies = [\"broken\"]\n[vars]\nmarker = \"{}\"\n",
            marker.display()
        ),
    );
    let m = Manual::start(&[
        METADATA,
        ("components/flaky.toml", &flaky),
        ("components/broken.toml", &broken),
        ("components/zeta.toml", &zeta),
        ("tf/main.tf", FLAKY_TF),
    ]);
    let c = m.cp.client();
    let w = run_workflow(&c, WorkflowKind::Provision);
    // flaky: its first apply failed, it was planned and applied again on
    // its own, and succeeded.
    let apply = step(&w, "apply flaky");
    assert_eq!(apply.status, "succeeded", "{w:#?}");
    assert_eq!(apply.attempts.len(), 1, "{apply:#?}");
    let first = &apply.attempts[0];
    assert!(
        first.reason.contains("the service is not ready yet"),
        "{first:?}"
    );
    let job = first.job_id.clone().expect("the try's job");
    assert_ne!(
        Some(&job),
        apply.job_id.as_ref(),
        "a new job for the second try"
    );
    let waited = first.retry_at_ms.unwrap() - first.failed_at_ms;
    assert_eq!(waited, 2_000, "the first backoff");
    assert!(marker.exists());
    // broken: its one automatic retry failed too; the workflow failed,
    // saying so, with both tries kept.
    assert_eq!(w.status, "failed", "{w:#?}");
    let apply = step(&w, "apply broken");
    assert_eq!(apply.status, "failed");
    assert_eq!(apply.attempts.len(), 1, "{apply:#?}");
    let reason = apply.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("the service is not ready yet")
            && reason.contains("try 2 of 2: every automatic retry failed"),
        "{reason}"
    );
    // Each try is shown by `workflows get`, and in its JSON.
    let shown = ok(m.cp.nuon(&["workflows", "get", w.id.as_str(), "--json"]));
    let v: serde_json::Value = serde_json::from_str(&shown).unwrap();
    let tries = v["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "apply flaky")
        .unwrap()["attempts"]
        .clone();
    assert_eq!(tries[0]["job_id"], job.as_str(), "{shown}");
    let shown = ok(m.cp.nuon(&["workflows", "get", w.id.as_str()]));
    assert!(
        shown.contains("earlier tries of apply flaky:")
            && shown.contains(&format!("1. job {job} failed"))
            && shown.contains("(retried automatically): "),
        "{shown}"
    );
    // A retry by hand keeps the failed try with the others, and starts
    // the automatic retries afresh.
    let out = m.cp.nuon(&["workflows", "retry", w.id.as_str(), "--wait"]);
    assert!(!out.status.success(), "{}", text(&out));
    let w = rt().block_on(c.get_workflow(w.id.as_str())).unwrap();
    let apply = step(&w, "apply broken");
    assert_eq!(apply.attempts.len(), 3, "{apply:#?}");
    assert_eq!(
        apply
            .attempts
            .iter()
            .map(|a| a.retry_at_ms.is_some())
            .collect::<Vec<_>>(),
        [true, false, true],
        "auto, by hand, auto"
    );
    // Skipped by hand: broken's apply is skipped (its tries kept, saying
    // who skipped it), what comes after runs, and the workflow ends
    // partial (exit 4), as one with a step skipped does.
    assert_eq!(step(&w, "plan zeta").status, "pending", "{w:#?}");
    // The failed workflow's page offers it too.
    let page = m.cp.dashboard_page(&format!("/workflows/{}", w.id));
    assert!(
        page.contains("Skip apply broken and go on")
            && page.contains(&format!("action=\"/workflows/{}/skip\"", w.id)),
        "{page}"
    );
    let out =
        m.cp.nuon(&["workflows", "skip", w.id.as_str(), "--wait", "--json"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "partial", "{v}");
    let w = rt().block_on(c.get_workflow(w.id.as_str())).unwrap();
    let apply = step(&w, "apply broken");
    assert_eq!(apply.status, "skipped", "{w:#?}");
    assert!(
        apply
            .reason
            .as_deref()
            .unwrap_or_default()
            .starts_with("skipped by ")
            && apply
                .reason
                .as_deref()
                .unwrap_or_default()
                .ends_with(" after it failed"),
        "{apply:#?}"
    );
    assert_eq!(apply.attempts.len(), 4, "{apply:#?}");
    assert_eq!(step(&w, "apply zeta").status, "succeeded", "{w:#?}");
    // A workflow that ended so has nothing more to skip.
    let again = m.cp.nuon(&["workflows", "skip", w.id.as_str()]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(
        text(&again).contains("only a failed or cancelled workflow"),
        "{}",
        text(&again)
    );
}

/// The sandbox's own `max_auto_retries` (Nuon's, on `sandbox.toml`): its
/// failed apply is planned and applied again on its own, and the
/// provision goes on.
#[test]
fn a_failed_sandbox_apply_is_retried_on_its_own() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let marker = tempfile::tempdir().unwrap();
    let marker = marker.path().join("first-try-failed");
    let sandbox = format!(
        "terraform_version = \">= 1.5\"\npath = \"sbx\"\nmax_auto_retries = 1\n[vars]\nmarker = \"{}\"\n",
        marker.display()
    );
    let m = Manual::start(&[
        METADATA,
        ("sandbox.toml", &sandbox),
        ("sbx/main.tf", FLAKY_TF),
        ("components/web.toml", &component("web", "")),
        ("tf/main.tf", UP_TF),
    ]);
    let c = m.cp.client();
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let apply = step(&w, "apply sandbox");
    assert_eq!(apply.status, "succeeded", "{w:#?}");
    assert_eq!(apply.attempts.len(), 1, "{apply:#?}");
    assert!(
        apply.attempts[0]
            .reason
            .contains("the service is not ready yet"),
        "{apply:#?}"
    );
    assert!(
        apply.attempts[0].retry_at_ms.is_some(),
        "retried on its own"
    );
    assert_eq!(step(&w, "apply web").status, "succeeded", "{w:#?}");
}

/// The actions of every lifecycle trigger a provision, a reprovision and
/// a deprovision place run there, in order, with real Terraform: one
/// action per trigger, named as it (the component triggers name web).
#[test]
fn lifecycle_actions_run_at_their_points() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let provision = [
        "pre-provision",
        "post-provision-sandbox",
        "pre-deploy-all-components",
        "pre-deploy-component",
        "post-deploy-component",
        "post-deploy-all-components",
        "post-provision",
    ];
    let reprovision = [
        "pre-reprovision",
        "pre-reprovision-sandbox",
        "post-reprovision-sandbox",
        "pre-deploy-all-components",
        "pre-deploy-component",
        "post-deploy-component",
        "post-deploy-all-components",
        "post-reprovision",
    ];
    let deprovision = [
        "pre-deprovision",
        "pre-teardown-all-components",
        "pre-teardown-component",
        "post-teardown-component",
        "post-teardown-all-components",
        "pre-deprovision-sandbox",
        "post-deprovision-sandbox",
        "post-deprovision",
    ];
    let mut all: Vec<&str> = [&provision[..], &reprovision, &deprovision].concat();
    all.sort();
    all.dedup();
    let actions: Vec<(String, String)> = all
        .iter()
        .map(|t| {
            let web = if t.ends_with("-component") {
                "component_name = \"web\"\n"
            } else {
                ""
            };
            (
                format!("actions/{t}.toml"),
                format!("name = \"{t}\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"{t}\"\n{web}\n[[steps]]\nname = \"say\"\ncommand = \"echo {t}\"\n"),
            )
        })
        .collect();
    let web = component("web", "");
    let mut files: Vec<(&str, &str)> = vec![
        METADATA,
        (
            "sandbox.toml",
            "terraform_version = \">= 1.5\"\npath = \"tf\"\n",
        ),
        ("components/web.toml", &web),
        ("tf/main.tf", UP_TF),
    ];
    files.extend(actions.iter().map(|(p, t)| (p.as_str(), t.as_str())));
    let m = Manual::start(&files);
    let c = m.cp.client();
    for (kind, want) in [
        (WorkflowKind::Provision, &provision[..]),
        (WorkflowKind::Reprovision, &reprovision),
        (WorkflowKind::Deprovision, &deprovision),
    ] {
        let w = run_workflow(&c, kind);
        assert_eq!(w.status, "succeeded", "{kind:?}: {w:#?}");
        let ran: Vec<&str> = w
            .steps
            .iter()
            .filter_map(|s| s.name.strip_prefix("action "))
            .collect();
        assert_eq!(ran, want, "{kind:?}");
        assert!(
            w.steps.iter().all(|s| s.status == "succeeded"),
            "{kind:?}: {w:#?}"
        );
        let at = |name: &str| w.steps.iter().position(|s| s.name == name).unwrap();
        let (sandbox, deploy) = match kind {
            WorkflowKind::Deprovision => ("destroy sandbox", "destroy web"),
            _ => ("apply sandbox", "apply web"),
        };
        let first = format!("action {}", want[0]);
        let last = format!("action {}", want[want.len() - 1]);
        assert!(
            at(&first) < at(deploy) && at(deploy) < at(&last),
            "{kind:?}"
        );
        assert!(
            at(&first) < at(sandbox) && at(sandbox) < at(&last),
            "{kind:?}"
        );
    }
}

#[test]
fn a_toggleable_component_is_turned_off_torn_down_skipped_and_turned_on_again() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let db = component("db", "toggleable = true\n");
    let api = component("api", "dependencies = [\"db\"]\n");
    let cache = component("cache", "toggleable = true\ndefault_enabled = false\n");
    let web = component("web", "");
    let bye = "name = \"bye\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"pre-disable-component\"\ncomponent_name = \"db\"\n\n[[steps]]\nname = \"say\"\ncommand = \"echo db goes\"\n";
    // An action of db's `trigger`.
    let hook = |name: &str, trigger: &str| {
        format!(
            "name = \"{name}\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"{trigger}\"\ncomponent_name = \"db\"\n\n[[steps]]\nname = \"say\"\ncommand = \"echo {name}\"\n"
        )
    };
    let m = Manual::start(&[
        METADATA,
        ("components/db.toml", &db),
        ("components/api.toml", &api),
        ("components/cache.toml", &cache),
        ("components/web.toml", &web),
        ("actions/bye.toml", bye),
        ("actions/gone.toml", &hook("gone", "post-disable-component")),
        ("actions/hi.toml", &hook("hi", "pre-enable-component")),
        ("actions/back.toml", &hook("back", "post-enable-component")),
        ("tf/main.tf", UP_TF),
    ]);
    let c = m.cp.client();
    // cache starts off: provisioning skips it and still succeeds.
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let skipped = step(&w, "apply cache");
    assert_eq!(skipped.status, "skipped");
    assert_eq!(
        skipped.reason.as_deref(),
        Some("component cache is turned off on this install")
    );
    assert_eq!(step(&w, "apply db").status, "succeeded");
    let list = || {
        let out =
            ok(m.cp.nuon(&["installs", "components", "list", "demo", "--json"]));
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["components"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let name = c["name"].as_str().unwrap().to_owned();
                (
                    name,
                    (
                        c["enabled"].as_bool().unwrap(),
                        c["deployed"].as_bool().unwrap(),
                    ),
                )
            })
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let l = list();
    assert_eq!(l["cache"], (false, false));
    assert_eq!(l["db"], (true, true));

    // A component that is not toggleable cannot be turned off.
    let out =
        m.cp.nuon(&["installs", "components", "disable", "demo", "web"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("not toggleable"), "{}", text(&out));

    // db off: its pre-disable action runs, then api (which depends on it)
    // and db are torn down; api is named as a dependent.
    let out =
        m.cp.nuon(&["installs", "components", "disable", "demo", "db", "--json"]);
    let r: serde_json::Value = serde_json::from_str(&ok(out)).unwrap();
    assert_eq!(r["dependents"], serde_json::json!(["api"]), "{r}");
    assert!(
        r["message"].as_str().unwrap().contains("api depend on it"),
        "{r}"
    );
    let id = r["workflow"]["id"].as_str().unwrap().to_owned();
    let w = crate::deploy::wait_workflow(&c, &id, ended);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert_eq!(w.trigger.as_deref(), Some("disable-component"));
    let names: Vec<&str> = w.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names.first(), Some(&"action bye"), "{names:?}");
    assert_eq!(names.last(), Some(&"action gone"), "{names:?}");
    assert!(
        names.contains(&"destroy api") && names.contains(&"destroy db"),
        "{names:?}"
    );
    let l = list();
    assert_eq!(l["db"], (false, false));
    assert!(!l["api"].1, "api is torn down with db");
    // A deploy skips db and api, and succeeds.
    let w = run_workflow(&c, WorkflowKind::Deploy);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert_eq!(step(&w, "apply db").status, "skipped");
    assert_eq!(
        step(&w, "apply api").reason.as_deref(),
        Some("component api depends on db, which is turned off on this install")
    );
    assert_eq!(step(&w, "apply web").status, "succeeded");
    // Deploying api alone says what to turn on.
    let out =
        m.cp.nuon(&["installs", "deploy", "demo", "--component", "api"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("nuon installs components enable demo db"),
        "{}",
        text(&out)
    );

    // db on again: it is deployed.
    let out =
        m.cp.nuon(&["installs", "components", "enable", "demo", "db", "--wait"]);
    assert!(out.status.success(), "{}", text(&out));
    let w = newest_workflow(&c);
    assert_eq!(w.trigger.as_deref(), Some("enable-component"));
    assert_eq!(step(&w, "apply db").status, "succeeded");
    let names: Vec<&str> = w.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names.first(), Some(&"action hi"), "{names:?}");
    assert_eq!(names.last(), Some(&"action back"), "{names:?}");
    assert!(w.steps.iter().all(|s| s.status == "succeeded"), "{w:#?}");
    assert_eq!(list()["db"], (true, true));
}

#[test]
fn action_inputs_are_given_at_run_time_and_cron_triggers_fire() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let greet = "name = \"greet\"\ntimeout = \"1m\"\n\n[[inputs]]\nname = \"WHO\"\nrequired = true\n\n[[inputs]]\nname = \"LEVEL\"\ndefault = \"info\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"say\"\ncommand = \"echo \\\"hello $WHO at $LEVEL\\\"\"\n\n[[steps]]\nname = \"read\"\nenable_kube_config = false\ncommand = \"echo \\\"{{ .action.inputs.WHO }} read by template, {{ .action.inputs.LEVEL }} by default\\\"\"\n";
    let tick = "name = \"tick\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"cron\"\ncron_schedule = \"* * * * *\"\n\n[[steps]]\nname = \"tock\"\ncommand = \"echo tock\"\n";
    let m = Manual::start(&[
        METADATA,
        ("components/web.toml", &component("web", "")),
        ("actions/greet.toml", greet),
        ("actions/tick.toml", tick),
        ("tf/main.tf", "output \"ok\" {\n  value = true\n}\n"),
    ]);
    let c = m.cp.client();
    let out = m.cp.nuon(&[
        "installs",
        "run-action",
        "demo",
        "greet",
        "--input",
        "WHO=world",
        "--wait",
        "--logs",
    ]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("hello world at info"), "{t}");
    // As Nuon's actions read them: `.action.inputs.NAME`.
    assert!(t.contains("world read by template, info by default"), "{t}");
    let w = newest_workflow(&c);
    assert_eq!(w.inputs["WHO"], "world");
    // A missing required input and one the action does not declare are
    // refused before anything runs.
    let out = m.cp.nuon(&["installs", "run-action", "demo", "greet"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("needs input \"WHO\": give it with --input WHO=VALUE"),
        "{}",
        text(&out)
    );
    let out = m.cp.nuon(&[
        "installs",
        "run-action",
        "demo",
        "greet",
        "--input",
        "WHO=x",
        "--input",
        "WHOM=y",
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("has no input \"WHOM\"") && text(&out).contains("did you mean"),
        "{}",
        text(&out)
    );
    // A cron action is not run by hand, and starts on its own once the
    // install is provisioned.
    let out = m.cp.nuon(&["installs", "run-action", "demo", "tick"]);
    assert!(!out.status.success());
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let cron = ended_run_of(&c, "cron");
    assert_eq!(cron.status, "succeeded", "{cron:#?}");
    assert_eq!(cron.component.as_deref(), Some("tick"));
    // One run per due minute.
    let runs = rt().block_on(c.list_workflows("demo")).unwrap();
    let crons: Vec<_> = runs
        .workflows
        .iter()
        .filter(|w| w.trigger.as_deref() == Some("cron"))
        .collect();
    assert!(crons.len() <= 2, "{crons:#?}");
}

/// Restarts the install's runner with `dirs` (stand-in tools) first on its
/// `PATH`, then provisions the install.
fn provision_with_tools(
    m: &mut Manual,
    dirs: &[&std::path::Path],
) -> nuon_core::wire::WorkflowInfo {
    let mut path: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    path.push(std::env::var("PATH").unwrap_or_default());
    m.restart_runner(Some(&path.join(":")));
    run_workflow(&m.cp.client(), WorkflowKind::Provision)
}

#[test]
fn rego_policies_check_what_helm_and_kubernetes_manifests_render() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(registry) = nuon_tests::Registry::start(None).unwrap() else {
        return;
    };
    let (helm_bin, _) = stand_in_helm();
    let (kubectl_bin, record) = stand_in_kubectl();
    let manifest = concat!(
        "name = \"edge\"\ntype = \"kubernetes_manifest\"\nnamespace = \"edge\"\n",
        "manifest = \"\"\"\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  type: LoadBalancer\n\"\"\"\n",
    );
    // The Helm policy names no engine: it reads as Rego, so it is one.
    let replicas = concat!(
        "# every Deployment says how many replicas it wants\npackage nuon.replicas\nimport rego.v1\n\n",
        "warn contains msg if {\n  input.kind == \"Deployment\"\n  not input.spec.replicas\n",
        "  msg := sprintf(\"%s sets no replicas\", [input.metadata.name])\n}\n",
    );
    let no_lb = concat!(
        "package nuon.edge\nimport rego.v1\n\n",
        "deny contains \"load balancers are made by the sandbox\" if {\n",
        "  input.kind == \"Service\"\n  input.spec.type == \"LoadBalancer\"\n}\n",
    );
    let mut m = Manual::start_with(
        &[
            METADATA,
            (
                "components/web.toml",
                "name = \"web\"\ntype = \"helm_chart\"\nchart_name = \"web\"\nnamespace = \"apps\"\npath = \"./src/web\"\n",
            ),
            (
                "src/web/Chart.yaml",
                "apiVersion: v2\nname: web\ndescription: A test chart\nversion: 0.1.0\n",
            ),
            (
                "src/web/templates/deployment.yaml",
                "kind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n",
            ),
            (
                "components/zedge.toml",
                &manifest.replace("name = \"edge\"", "name = \"zedge\""),
            ),
            (
                "policies/replicas.toml",
                "type = \"helm_chart\"\ncontents = \"./replicas.rego\"\ncomponents = [\"*\"]\n",
            ),
            ("policies/replicas.rego", replicas),
            (
                "policies/edge.toml",
                "type = \"kubernetes_manifest\"\nengine = \"opa\"\ncontents = \"./edge.rego\"\ncomponents = [\"zedge\"]\n",
            ),
            ("policies/edge.rego", no_lb),
        ],
        Some(&registry.url),
    );
    let w = provision_with_tools(&mut m, &[helm_bin.path(), kubectl_bin.path()]);
    assert_eq!(w.status, "failed", "{w:#?}");
    // The chart's rendered Deployment (the stand-in renders `web` with no
    // replicas) passes with a warning, kept with the plan.
    let plan = step(&w, "plan web");
    assert_eq!(plan.status, "succeeded", "{w:#?}");
    assert_eq!(
        plan.outputs["policy_warnings"],
        serde_json::json!(["Deployment/web: replicas: web sets no replicas"])
    );
    assert_eq!(step(&w, "apply web").status, "succeeded");
    // The manifest's LoadBalancer is denied before kubectl sees it.
    let plan = step(&w, "plan zedge");
    assert_eq!(plan.status, "failed", "{w:#?}");
    let reason = plan.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("the manifest is denied by policy")
            && reason.contains("Service/web: edge: load balancers are made by the sandbox"),
        "{reason}"
    );
    let rec = std::fs::read_to_string(&record).unwrap_or_default();
    assert!(
        !rec.contains("LoadBalancer"),
        "kubectl was never run on it: {rec}"
    );
}

/// A `helm` stand-in whose `template` prints the chart's own templates
/// (each starts with `---`), the rest as [`stand_in_helm`]'s.
fn stand_in_helm_printing_templates() -> (tempfile::TempDir, tempfile::TempDir, std::path::PathBuf)
{
    let (inner, record) = stand_in_helm();
    let outer = tempfile::tempdir().unwrap();
    let script = format!(
        "#!/bin/sh\nif [ \"$1\" = template ]; then\n  for a in \"$@\"; do case \"$a\" in *.tgz) tar xzOf \"$a\" --wildcards '*/templates/*' ;; esac; done\n  exit 0\nfi\nexec {} \"$@\"\n",
        inner.path().join("helm").display()
    );
    write_executable(&outer.path().join("helm"), &script);
    (outer, inner, record)
}

#[test]
fn kyverno_policies_check_what_charts_render_and_enforce_fails_the_plan() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(registry) = nuon_tests::Registry::start(None).unwrap() else {
        return;
    };
    let (helm_bin, _inner, record) = stand_in_helm_printing_templates();
    let chart = |name: &str, limits: &str| {
        format!(
            "---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {name}\nspec:\n  template:\n    spec:\n      containers:\n      - name: app\n        image: nginx:1.27\n        resources:\n          limits:\n{limits}"
        )
    };
    // Kyverno's own example: a Pod rule, which checks Deployments' pods too.
    let limits = concat!(
        "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata:\n  name: require-limits\n",
        "spec:\n  validationFailureAction: Enforce\n  rules:\n  - name: memory\n    match:\n      any:\n",
        "      - resources:\n          kinds:\n          - Pod\n    validate:\n",
        "      message: \"{{ request.object.metadata.name }}: every container sets a memory limit\"\n",
        "      pattern:\n        spec:\n          containers:\n          - resources:\n              limits:\n                memory: \"?*\"\n",
    );
    let team = concat!(
        "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata:\n  name: team\n",
        "spec:\n  validationFailureAction: Audit\n  rules:\n  - name: label\n    match:\n      any:\n",
        "      - resources:\n          kinds: [Deployment]\n    validate:\n      message: \"name a team\"\n",
        "      pattern:\n        metadata:\n          labels:\n            team: \"?*\"\n",
    );
    let component = |name: &str| {
        format!(
            "name = \"{name}\"\ntype = \"helm_chart\"\nchart_name = \"{name}\"\nnamespace = \"apps\"\npath = \"./src/{name}\"\n"
        )
    };
    let chart_yaml = |name: &str| format!("apiVersion: v2\nname: {name}\nversion: 0.1.0\n");
    let (web, zapi) = (component("web"), component("zapi"));
    let (web_chart, zapi_chart) = (chart_yaml("web"), chart_yaml("zapi"));
    let web_deploy = chart("web", "            memory: 256Mi\n");
    let zapi_deploy = chart("zapi", "            cpu: 500m\n");
    let mut m = Manual::start_with(
        &[
            METADATA,
            ("components/web.toml", &web),
            ("src/web/Chart.yaml", &web_chart),
            ("src/web/templates/deployment.yaml", &web_deploy),
            ("components/zapi.toml", &zapi),
            ("src/zapi/Chart.yaml", &zapi_chart),
            ("src/zapi/templates/deployment.yaml", &zapi_deploy),
            // No engine, not Rego: Kyverno, as Nuon reads it.
            (
                "policies/limits.toml",
                "type = \"kubernetes_cluster\"\ncontents = \"./limits.yaml\"\n",
            ),
            ("policies/limits.yaml", limits),
            (
                "policies/team.toml",
                "type = \"helm_chart\"\nengine = \"kyverno\"\ncontents = \"./team.yaml\"\ncomponents = [\"web\"]\n",
            ),
            ("policies/team.yaml", team),
        ],
        Some(&registry.url),
    );
    let w = provision_with_tools(&mut m, &[helm_bin.path()]);
    assert_eq!(w.status, "failed", "{w:#?}");
    // web sets its limits: it passes the Enforce policy, and the Audit one
    // warns (kept with the plan).
    let plan = step(&w, "plan web");
    assert_eq!(plan.status, "succeeded", "{w:#?}");
    assert_eq!(
        plan.outputs["policy_warnings"],
        serde_json::json!([
            "Deployment/web: team/label: name a team (at /metadata/labels/: is missing)"
        ])
    );
    assert_eq!(step(&w, "apply web").status, "succeeded");
    // zapi's pod sets no memory limit: the plan fails, and nothing of it
    // reaches Helm's upgrade.
    let plan = step(&w, "plan zapi");
    assert_eq!(plan.status, "failed", "{w:#?}");
    let reason = plan.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("the rendered chart is denied by policy")
            && reason.contains("Deployment/zapi: limits: require-limits/autogen-memory: zapi: every container sets a memory limit")
            && reason.contains("/spec/containers/0/resources/limits/memory/: is missing"),
        "{reason}"
    );
    let rec = std::fs::read_to_string(&record).unwrap_or_default();
    assert!(
        !rec.contains("ARGS upgrade zapi"),
        "helm never upgraded zapi: {rec}"
    );
}

#[test]
fn a_component_and_an_action_stop_at_their_timeouts() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let slow_tf = "resource \"terraform_data\" \"x\" {\n  provisioner \"local-exec\" {\n    command = \"sleep 60\"\n  }\n}\n";
    // Nuon's `timeout` on a component is its deploy timeout.
    let slow = component("slow", "timeout = \"8s\"\n");
    let wait = "name = \"wait\"\ntimeout = \"2s\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"nap\"\ncommand = \"sleep 30\"\n";
    let m = Manual::start(&[
        METADATA,
        ("components/slow.toml", &slow),
        ("actions/wait.toml", wait),
        ("tf/main.tf", slow_tf),
    ]);
    let c = m.cp.client();
    let out =
        m.cp.nuon(&["installs", "run-action", "demo", "wait", "--wait"]);
    assert!(!out.status.success(), "{}", text(&out));
    let w = newest_workflow(&c);
    let reason = step(&w, "action wait").reason.clone().unwrap_or_default();
    assert!(reason.contains("its timeout was 2s"), "{reason}");
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "failed", "{w:#?}");
    let reason = step(&w, "apply slow").reason.clone().unwrap_or_default();
    assert!(
        reason.contains("timed out") && reason.contains("its timeout was 8s"),
        "{reason}"
    );
}

#[test]
fn drift_is_found_by_plans_that_never_apply_on_demand_and_on_schedule() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("changed-outside");
    let tf = format!(
        "resource \"terraform_data\" \"x\" {{\n  input = fileexists(\"{}\") ? \"changed\" : \"as deployed\"\n}}\n",
        marker.display()
    );
    let watched = component("watched", "drift_schedule = \"* * * * *\"\n");
    let m = Manual::start(&[
        METADATA,
        ("components/watched.toml", &watched),
        ("tf/main.tf", &tf),
    ]);
    let c = m.cp.client();
    let drift = |target: &str| {
        let d = rt().block_on(c.install_drift("demo")).unwrap();
        d.targets.into_iter().find(|t| t.target == target).unwrap()
    };
    assert_eq!(drift("watched").status, "never_checked");
    assert!(drift("watched").next_check_ms.is_some());
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let check = || {
        let out =
            m.cp.nuon(&["installs", "drift", "demo", "--check", "watched", "--wait"]);
        assert!(out.status.success(), "{}", text(&out));
        newest_workflow(&c)
    };
    // Nothing changed: in sync.
    let w = check();
    assert_eq!(w.kind, WorkflowKind::Drift);
    assert_eq!(
        w.steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["sync watched", "plan watched"],
        "a drift check never applies"
    );
    assert_eq!(drift("watched").status, "in_sync");
    // Changed outside: the plan has a change; the install is untouched.
    std::fs::write(&marker, "x").unwrap();
    check();
    let d = drift("watched");
    assert_eq!(d.status, "drifted", "{d:?}");
    assert_eq!(d.changes["change"], 1, "{d:?}");
    assert_eq!(
        d.changes["resources"][0]["address"], "terraform_data.x",
        "{d:?}"
    );
    let shown = ok(m.cp.nuon(&["installs", "drift"]));
    assert!(
        shown
            .lines()
            .any(|l| l.contains("demo") && l.contains("watched") && l.contains("drifted")),
        "{shown}"
    );
    let install = rt().block_on(c.get_install("demo")).unwrap();
    assert_eq!(install.state, "active");
    // The schedule checks it too, once a minute.
    let scheduled = ended_run_of(&c, "drift");
    assert_eq!(scheduled.status, "succeeded", "{scheduled:#?}");
    assert_eq!(drift("watched").status, "drifted");
    // A deploy remediates it through the normal plan and apply.
    let out = m.cp.nuon(&[
        "installs",
        "deploy",
        "demo",
        "--component",
        "watched",
        "--wait",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    check();
    assert_eq!(drift("watched").status, "in_sync");
}

#[test]
fn a_runbook_runs_its_steps_in_order_and_stops_at_the_first_failure() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let action = |name: &str, command: &str| {
        format!(
            "name = \"{name}\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"run\"\ncommand = \"{command}\"\n"
        )
    };
    let runbook = |name: &str, steps: &[(&str, &str, &str)]| {
        let mut t = format!("name = \"{name}\"\ndescription = \"test\"\n");
        for (step, kind, extra) in steps {
            t.push_str(&format!(
                "\n[[steps]]\nname = \"{step}\"\ntype = \"{kind}\"\n{extra}\n"
            ));
        }
        t
    };
    // Its inputs reach its actions' steps.
    let cycle = runbook(
        "cycle",
        &[
            ("announce", "action", "action_name = \"hello\""),
            ("up", "component_deploy", "component_name = \"web\""),
            ("down", "component_tear_down", "component_name = \"web\""),
            ("again", "component_deploy", "component_name = \"web\""),
            // Inline, as Nuon's runbooks write it: no action of its own.
            (
                "inline",
                "action",
                "command = \"echo inline step for $REASON\"",
            ),
        ],
    ) + "\n[[input]]\nname = \"REASON\"\ndisplay_name = \"Reason\"\nrequired = true\n\n[[input]]\nname = \"WHO\"\ndefault = \"ops\"\n";
    let broken = runbook(
        "broken",
        &[
            ("first", "action", "action_name = \"hello\""),
            ("boom", "action", "action_name = \"fail\""),
            ("never", "component_tear_down", "component_name = \"web\""),
        ],
    );
    let m = Manual::start(&[
        METADATA,
        ("components/web.toml", &component("web", "")),
        ("tf/main.tf", UP_TF),
        (
            "actions/hello.toml",
            &action(
                "hello",
                "echo hello from the runbook because $REASON by $WHO",
            ),
        ),
        (
            "actions/fail.toml",
            &action("fail", "echo broken >&2; exit 3"),
        ),
        ("runbooks/cycle.toml", &cycle),
        ("runbooks/broken.toml", &broken),
    ]);
    let c = m.cp.client();
    let out = m.cp.nuon(&[
        "installs",
        "run-runbook",
        "demo",
        "cycle",
        "--input",
        "REASON=maintenance",
        "--wait",
        "--logs",
    ]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("hello from the runbook because maintenance by ops"),
        "{t}"
    );
    let w = newest_workflow(&c);
    assert_eq!(w.kind, WorkflowKind::Runbook);
    assert_eq!(w.component.as_deref(), Some("cycle"));
    assert_eq!(
        w.steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        [
            "action hello",
            "sync web",
            "plan web",
            "apply web",
            "sync web",
            "plan destroy web",
            "destroy web",
            "sync web",
            "plan web",
            "apply web",
            "action runbook-cycle-inline",
        ]
    );
    assert!(w.steps.iter().all(|s| s.status == "succeeded"), "{w:#?}");
    assert!(t.contains("inline step for maintenance"), "{t}");
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.components["web"]["up"], "up", "{outputs:?}");

    // The first failure stops it: what comes after does not run.
    let out =
        m.cp.nuon(&["installs", "run-runbook", "demo", "broken", "--wait"]);
    assert!(!out.status.success(), "{}", text(&out));
    let w = newest_workflow(&c);
    assert_eq!(w.status, "failed");
    assert_eq!(step(&w, "action hello").status, "succeeded");
    let failed = step(&w, "action fail");
    assert_eq!(failed.status, "failed");
    assert!(
        failed
            .reason
            .clone()
            .unwrap_or_default()
            .contains("exit code 3"),
        "{failed:?}"
    );
    assert_eq!(step(&w, "destroy web").status, "pending");
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert!(
        outputs.components.contains_key("web"),
        "web is still deployed"
    );

    // A required input missing, and one it does not declare, are refused
    // before anything runs.
    let out = m.cp.nuon(&["installs", "run-runbook", "demo", "cycle"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains(
            "runbook \"cycle\" needs input \"REASON\": give it with --input REASON=VALUE"
        ),
        "{}",
        text(&out)
    );
    let out = m.cp.nuon(&[
        "installs",
        "run-runbook",
        "demo",
        "cycle",
        "--input",
        "REASON=x",
        "--input",
        "WHOM=y",
    ]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("has no input \"WHOM\", did you mean \"WHO\"?"),
        "{}",
        text(&out)
    );

    // A runbook the app does not have.
    let out = m.cp.nuon(&["installs", "run-runbook", "demo", "cycel"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("no runbook \"cycel\", did you mean \"cycle\"?"),
        "{}",
        text(&out)
    );
}

#[test]
fn install_health_follows_the_runner_the_deploys_and_the_health_check_actions() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("service-up");
    // A health check: a cron action (here due once a year), also run by
    // hand.
    let probe = format!(
        "name = \"probe\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"cron\"\ncron_schedule = \"0 0 1 1 *\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"check\"\ncommand = \"test -f {} || {{ echo 'the service does not answer' >&2; exit 1; }}\"\n",
        marker.display()
    );
    let mut m = Manual::start(&[
        METADATA,
        ("components/web.toml", &component("web", "")),
        ("tf/main.tf", "output \"ok\" {\n  value = true\n}\n"),
        ("actions/probe.toml", &probe),
    ]);
    let c = m.cp.client();
    let health = || rt().block_on(c.install_health("demo")).unwrap();
    // A check by name, or the runner's by `runner`.
    let of = |h: &nuon_core::wire::InstallHealth, name: &str| {
        h.checks
            .iter()
            .find(|c| c.name == name || (name == "runner" && c.kind == "runner"))
            .unwrap()
            .clone()
    };
    wait_for("the runner to call", Duration::from_secs(30), || {
        (of(&health(), "runner").status == "ok").then_some(())
    })
    .unwrap_or_else(|_| panic!("{:#?}", health()));
    let h = health();
    // The runner says what it is.
    let build = format!(
        "nuon-runner {} on {}/{}",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::OS,
        std::env::consts::ARCH
    );
    assert!(
        of(&h, "runner").detail.unwrap_or_default().contains(&build),
        "{h:#?}"
    );
    assert_eq!(of(&h, "web").status, "absent");
    assert_eq!(of(&h, "web").detail.as_deref(), Some("never deployed"));
    // Made, never provisioned: not deployed, and so not healthy.
    assert_eq!(h.status, "not_deployed", "{h:#?}");
    assert_eq!(of(&h, "probe").detail.as_deref(), Some("never run"));
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert_eq!(of(&health(), "web").status, "ok");
    // The health check fails: unhealthy, saying why; the CLI exits 1.
    let out =
        m.cp.nuon(&["installs", "run-action", "demo", "probe", "--wait"]);
    assert!(!out.status.success());
    let h = health();
    assert_eq!(h.status, "unhealthy", "{h:#?}");
    let probe = of(&h, "probe");
    assert_eq!(probe.status, "failed");
    assert!(
        probe.detail.unwrap_or_default().contains("exit code 1"),
        "{h:#?}"
    );
    let out = m.cp.nuon(&["installs", "health"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out)
            .lines()
            .any(|l| l.contains("demo") && l.contains("unhealthy") && l.contains("action probe")),
        "{}",
        text(&out)
    );
    // It passes again: healthy.
    std::fs::write(&marker, "up").unwrap();
    ok(m.cp.nuon(&["installs", "run-action", "demo", "probe", "--wait"]));
    let out = m.cp.nuon(&["installs", "health", "demo", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_str(&ok(out)).unwrap();
    assert_eq!(v["status"], "healthy", "{v}");
    // The runner goes away: offline, once it has not called for a live
    // runner's longest wait.
    m.stop_runner();
    let h = wait_for(
        "the install to be offline",
        Duration::from_secs(120),
        || {
            let h = health();
            (h.status == "offline").then_some(h)
        },
    )
    .unwrap();
    assert!(
        of(&h, "runner")
            .detail
            .unwrap_or_default()
            .starts_with("last call "),
        "{h:#?}"
    );
}

/// A loopback HTTP server answering every request with the status `now`
/// holds; its port.
fn switchable_http_server(now: std::sync::Arc<std::sync::atomic::AtomicU16>) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in listener.incoming() {
            let Ok(mut s) = s else { return };
            let mut buf = [0u8; 2048];
            let _ = s.read(&mut buf);
            let status = now.load(std::sync::atomic::Ordering::SeqCst);
            let _ = write!(
                s,
                "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            );
        }
    });
    port
}

/// A component's `[health]`: after its apply, the runner runs its probes
/// (http, tcp, exec; templates that read the component's own outputs)
/// until they pass three rounds in a row. With `block_deploy`, health
/// that does not hold within the window fails the deploy, and a retry
/// runs the probes again; without, the deploy goes on and the install's
/// health shows the probe that failed. Then the deploy waits for the
/// checks the component requires (`required_checks`), pushed by the
/// vendor's systems with `nuon installs checks push`.
#[test]
fn a_components_health_probes_gate_its_deploy_and_show_in_the_installs_health() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU16, Ordering};
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let status = Arc::new(AtomicU16::new(503));
    let port = switchable_http_server(status.clone());
    let tf =
        "variable \"port\" {\n  type = string\n}\n\noutput \"port\" {\n  value = var.port\n}\n";
    let marker_dir = tempfile::tempdir().unwrap();
    let marker = marker_dir.path().join("ready");
    std::fs::write(&marker, "").unwrap();
    let api = component(
        "api",
        &format!(
            "[vars]\nport = \"{port}\"\n\n[health]\nstabilization_window = \"3s\"\nrequired_checks = [\"api-ready\"]\n\n[[health.probes]]\ntype = \"exec\"\nname = \"migrations\"\ncommand = [\"sh\", \"-c\", \"echo 'migrations are pending' >&2; exit 3\"]\n"
        ),
    );
    let web = component(
        "web",
        &format!(
            "dependencies = [\"api\"]\nlabels = {{ tier = \"frontend\" }}\n[vars]\nport = \"{port}\"\n\n[health]\nstabilization_window = \"{{{{ .nuon.install.inputs.window }}}}\"\nblock_deploy = true\nrequired_checks = [\"billing-ready\"]\n\n[[health.probes]]\ntype = \"http\"\nname = \"healthz\"\nurl = \"http://127.0.0.1:{{{{ .nuon.components.web.outputs.port }}}}/healthz\"\n\n[[health.probes]]\ntype = \"tcp\"\nurl = \"127.0.0.1:{port}\"\n\n[[health.probes]]\ntype = \"exec\"\ncommand = [\"test\", \"-f\", \"{}\"]\n",
            marker.display()
        ),
    );
    let inputs = "[[input]]\nname = \"window\"\ndescription = \"how long web's health may take\"\ndefault = \"20s\"\n";
    // The runner watches the probes between deploys every second.
    let cp = ControlPlane::start_with(
        "3s",
        &["--probe-interval", "1s", "--webhook-allow-private-networks"],
    )
    .unwrap();
    let m = Manual::start_on(
        cp,
        &[
            METADATA,
            ("inputs.toml", inputs),
            ("components/api.toml", &api),
            ("components/web.toml", &web),
            ("tf/main.tf", tf),
        ],
        None,
        |_| {},
        &[],
    );
    let c = m.cp.client();
    let w = run_workflow(&c, WorkflowKind::Provision);
    // api's probe fails, but its health does not block: the deploy goes
    // on, and the step says what it saw.
    let api_health = step(&w, "check health api");
    assert_eq!(api_health.status, "succeeded", "{w:#?}");
    assert_eq!(api_health.outputs["held"], false, "{api_health:#?}");
    assert_eq!(api_health.outputs["rounds"], 3, "{api_health:#?}");
    let p = &api_health.outputs["probes"][0];
    assert_eq!(p["failures"], 3, "{p}");
    assert!(
        p["detail"]
            .as_str()
            .unwrap()
            .contains("exit code 3: migrations are pending"),
        "{p}"
    );
    // api requires a check nobody reports: after its window, the deploy
    // goes on (it does not block), saying so.
    let api_checks = step(&w, "await checks api");
    assert_eq!(api_checks.status, "succeeded", "{w:#?}");
    let said = api_checks.reason.clone().unwrap_or_default();
    assert!(
        said.contains("not reported healthy within 3 s: api-ready was never reported")
            && said.contains("block_deploy is off"),
        "{said}"
    );
    // web's HTTP probe answers 503 for the whole window: the deploy fails,
    // after web's apply, saying which probe and why.
    assert_eq!(w.status, "failed", "{w:#?}");
    assert_eq!(step(&w, "apply web").status, "succeeded");
    let web_health = step(&w, "check health web");
    assert_eq!(web_health.status, "failed", "{w:#?}");
    let reason = web_health.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("the health of web did not hold within 20s")
            && reason.contains("probe healthz failed 20 of 20 rounds, last: HTTP 503")
            && reason.contains("block_deploy"),
        "{reason}"
    );
    assert!(
        !reason.contains("127.0.0.1:"),
        "passing probes are not blamed: {reason}"
    );
    let h = rt().block_on(c.install_health("demo")).unwrap();
    let of = |h: &nuon_core::wire::InstallHealth, name: &str| {
        h.checks
            .iter()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no check {name} in {h:#?}"))
            .clone()
    };
    assert_eq!(h.status, "unhealthy", "{h:#?}");
    assert_eq!(of(&h, "web/healthz").status, "failed");
    assert_eq!(of(&h, "web/healthz").kind, "probe");
    assert_eq!(of(&h, &format!("web/127.0.0.1:{port}")).status, "ok");
    assert_eq!(of(&h, "web/test").status, "ok");
    assert_eq!(of(&h, "api/migrations").status, "failed");
    // The service comes up: a retry runs web's probes again, and its
    // health holds in three rounds.
    status.store(200, Ordering::SeqCst);
    ok(m.cp.nuon(&["workflows", "retry", w.id.as_str()]));
    // Then it waits for the check web requires, which the vendor's
    // systems push: unhealthy first (it goes on waiting, saying why), then
    // healthy.
    let waiting_for = |text: &str| {
        wait_for(
            &format!("await checks web to say {text:?}"),
            Duration::from_secs(60),
            || {
                let w = rt().block_on(c.get_workflow(w.id.as_str())).ok()?;
                let s = step(&w, "await checks web").clone();
                (s.status == "running" && s.reason.as_deref().unwrap_or_default().contains(text))
                    .then_some(())
            },
        )
        .unwrap_or_else(|e| panic!("{e}: {:#?}", rt().block_on(c.get_workflow(w.id.as_str()))));
    };
    waiting_for(
        "billing-ready was never reported; report them with `nuon installs checks push demo NAME --healthy`",
    );
    let pushed = ok(m.cp.nuon(&[
        "installs",
        "checks",
        "push",
        "demo",
        "billing-ready",
        "--unhealthy",
        "--detail",
        "card declined",
        "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&pushed).unwrap();
    assert_eq!(v["status"], "unhealthy", "{pushed}");
    waiting_for("billing-ready is unhealthy (card declined)");
    let bad = m.cp.nuon(&[
        "installs",
        "checks",
        "push",
        "demo",
        "no spaces",
        "--healthy",
    ]);
    assert_eq!(bad.status.code(), Some(1), "{}", text(&bad));
    assert!(
        text(&bad).contains("check name \"no spaces\""),
        "{}",
        text(&bad)
    );
    ok(m.cp.nuon(&[
        "installs",
        "checks",
        "push",
        "demo",
        "billing-ready",
        "--healthy",
    ]));
    let w = wait_for("the retry to end", Duration::from_secs(60), || {
        let w = rt().block_on(c.get_workflow(w.id.as_str())).ok()?;
        ended(&w).then_some(w)
    })
    .unwrap();
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let web_checks = step(&w, "await checks web");
    assert_eq!(
        web_checks.reason.as_deref(),
        Some("reported healthy: billing-ready"),
        "{web_checks:#?}"
    );
    let web_health = step(&w, "check health web");
    assert_eq!(web_health.outputs["held"], true, "{web_health:#?}");
    assert_eq!(web_health.outputs["rounds"], 3, "{web_health:#?}");
    assert_eq!(web_health.attempts.len(), 1, "the failed try is kept");
    // The install's health: web's probes pass; api's, which does not
    // block, still fails, and the CLI says so.
    let out = m.cp.nuon(&["installs", "health", "demo", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["status"], "unhealthy", "{v}");
    let checks = v["checks"].as_array().unwrap();
    let probe = |name: &str| checks.iter().find(|c| c["name"] == name).unwrap().clone();
    assert_eq!(probe("web/healthz")["status"], "ok", "{v}");
    assert!(
        probe("web/healthz")["detail"]
            .as_str()
            .unwrap()
            .starts_with("HTTP 200"),
        "{v}"
    );
    assert_eq!(probe("api/migrations")["status"], "failed", "{v}");
    assert_eq!(probe("billing-ready")["kind"], "check", "{v}");
    assert_eq!(probe("billing-ready")["status"], "ok", "{v}");
    assert_eq!(probe("api-ready")["status"], "unknown", "{v}");
    assert_eq!(probe("api-ready")["detail"], "never reported", "{v}");
    let out = m.cp.nuon(&["installs", "health"]);
    assert!(
        text(&out)
            .lines()
            .any(|l| l.contains("demo") && l.contains("probe api/migrations")),
        "{}",
        text(&out)
    );
    // The dashboard shows each probe with its component, and on the
    // overview.
    let install = rt().block_on(c.get_install("demo")).unwrap();
    let page = m.cp.dashboard_page(&format!("/installs/{}", install.id));
    assert!(
        page.contains("web/healthz: ok") && page.contains("api/migrations: failed"),
        "{page}"
    );
    assert!(
        page.contains("exit code 3: migrations are pending"),
        "{page}"
    );
    // web's labels are kept with it: on its page, and in the list of the
    // install's components.
    assert!(page.contains("<code>tier=frontend</code>"), "{page}");
    assert!(
        page.contains("billing-ready: ok") && page.contains("api-ready: unknown"),
        "{page}"
    );
    let listed = ok(m.cp.nuon(&["installs", "components", "list", "demo"]));
    assert!(
        listed
            .lines()
            .any(|l| l.starts_with("web ") && l.trim_end().ends_with("tier=frontend")),
        "{listed}"
    );
    let overview = m.cp.dashboard_page("/");
    assert!(overview.contains("api/migrations: failed"), "{overview}");
    // Between deploys the runner watches the probes: web's service goes
    // down, and the install's health says so within a round or two,
    // with no workflow run; it comes back, and so does web's probe.
    let runs = rt()
        .block_on(c.list_workflows("demo"))
        .unwrap()
        .workflows
        .len();
    // The vendor's webhook is told when a probe fails and recovers.
    let addr = crate::ops::free_port();
    let added = ok(m.cp.nuon(&[
        "orgs",
        "webhooks",
        "add",
        &format!("http://{addr}/hook"),
        "--events",
        "probe_failed,probe_recovered",
        "--json",
    ]));
    let secret = serde_json::from_str::<serde_json::Value>(&added).unwrap()["secret"]
        .as_str()
        .unwrap()
        .to_owned();
    let told = crate::ops::Received::default();
    let server = crate::ops::receiver(addr, secret, told.clone());
    status.store(503, Ordering::SeqCst);
    let watched = |want: &str| {
        wait_for(
            &format!("the runner's watch to see web/healthz {want}"),
            Duration::from_secs(30),
            || {
                let h = rt().block_on(c.install_health("demo")).ok()?;
                let k = h.checks.iter().find(|k| k.name == "web/healthz")?.clone();
                let by_watch = k
                    .detail
                    .as_deref()?
                    .ends_with("; seen by the runner's watch");
                (k.status == want && by_watch).then_some((h, k))
            },
        )
        .unwrap_or_else(|e| panic!("{e}: {:#?}", rt().block_on(c.install_health("demo"))))
    };
    let (h, k) = watched("failed");
    assert!(
        k.detail.as_deref().unwrap().starts_with("HTTP 503 in "),
        "{k:?}"
    );
    assert_eq!(k.workflow_id, None, "{k:?}");
    assert_eq!(h.status, "unhealthy", "{h:#?}");
    assert_eq!(of(&h, &format!("web/127.0.0.1:{port}")).status, "ok");
    assert!(
        of(&h, "api/migrations")
            .detail
            .unwrap()
            .contains("exit code 3: migrations are pending"),
        "{h:#?}"
    );
    // The CLI says so too (and exits 1: the install is unhealthy).
    let out = m.cp.nuon(&["installs", "health", "demo", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("HTTP 503"), "{}", text(&out));
    status.store(200, Ordering::SeqCst);
    let (_, k) = watched("ok");
    assert!(
        k.detail.as_deref().unwrap().starts_with("HTTP 200 in "),
        "{k:?}"
    );
    let page = m.cp.dashboard_page(&format!("/installs/{}", install.id));
    assert!(page.contains("web/healthz: ok"), "{page}");
    assert!(page.contains("seen by the runner's watch"), "{page}");
    let now = rt()
        .block_on(c.list_workflows("demo"))
        .unwrap()
        .workflows
        .len();
    assert_eq!(now, runs, "watching runs no workflow");
    // Signed deliveries: web/healthz failed, then recovered; nothing else
    // changed (api/migrations kept failing).
    let got = told.at_least(2, "the probe_failed and probe_recovered deliveries");
    std::thread::sleep(Duration::from_secs(2));
    let got_later = told.all();
    server.abort();
    assert_eq!(got_later.len(), got.len(), "{got_later:#?}");
    let events: Vec<(&str, &serde_json::Value)> = got
        .iter()
        .map(|(e, _, body, _)| (e.as_str(), &body["data"]))
        .collect();
    assert_eq!(
        events.iter().map(|(e, _)| *e).collect::<Vec<_>>(),
        ["probe_failed", "probe_recovered"],
        "{got:#?}"
    );
    for (_, data) in &events {
        assert_eq!(data["install"], "demo", "{data}");
        assert_eq!(data["component"], "web", "{data}");
        assert_eq!(data["probe"], "healthz", "{data}");
    }
    assert!(
        events[0].1["detail"]
            .as_str()
            .unwrap()
            .starts_with("HTTP 503")
    );
    assert!(got.iter().all(|(_, _, _, signed)| *signed), "{got:#?}");
}

/// Secrets synced into Kubernetes (`kubernetes_sync_targets`, and the
/// single `kubernetes_sync` form) are written as Secrets by a `sync
/// secrets` step after the sandbox, between the actions of the
/// `pre-`/`post-secrets-sync` triggers, and again when one changes; a
/// component's `kubernetes_context` deploys it with the context
/// component's kubeconfig; an action with `enable_kube_config` gets a
/// private `KUBECONFIG` and its labels. Against stand-in `kubectl` and
/// `helm` that record the kubeconfig they were given.
#[test]
fn secrets_sync_into_kubernetes_with_their_triggers_and_contexts_choose_the_cluster() {
    use base64::Engine as _;
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(registry) = nuon_tests::Registry::start(None).unwrap() else {
        return;
    };
    let (inner_kubectl, kubectl_record) = stand_in_kubectl();
    let (inner_helm, helm_record) = stand_in_helm();
    // Each tool records the kubeconfig it was given (and the names of the
    // objects of a manifest it applies), then answers as the stand-in
    // does.
    let bin = tempfile::tempdir().unwrap();
    let seen = bin.path().join("kubeconfigs");
    for (tool, inner) in [("kubectl", &inner_kubectl), ("helm", &inner_helm)] {
        write_executable(
            &bin.path().join(tool),
            &format!(
                "#!/bin/sh\nf=''; prev=''\nfor a in \"$@\"; do [ \"$prev\" = -f ] && f=\"$a\"; prev=\"$a\"; done\nnames=''; [ -n \"$f\" ] && names=$(awk '/^  name:/{{printf \" %s\", $2}}' \"$f\")\necho \"{tool} $1 $(cat \"$KUBECONFIG\")$names\" >> '{}'\nexec '{}' \"$@\"\n",
                seen.display(),
                inner.path().join(tool).display()
            ),
        );
    }
    let out_tf = |what: &str| format!("output \"kubeconfig\" {{\n  value = \"{what}\"\n}}\n");
    let sandbox_tf = out_tf("sandbox-cluster");
    let cluster_tf = out_tf("workload-cluster");
    let announce = "name = \"announce\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"pre-secrets-sync\"\n\n[[steps]]\nname = \"say\"\ncommand = \"echo secrets coming\"\n";
    let check = r#"name = "check"
timeout = "1m"
description = "Looks at the cluster once the secrets are there"
enable_kube_config = true
labels = { team = "platform" }

[[triggers]]
type = "post-secrets-sync"

[[steps]]
name = "look"
command = '''printf 'kube=%s\nteam=%s\nmode=%s\n' "$(cat "$KUBECONFIG")" "$NUON_ACTION_LABEL_TEAM" "$(stat -c %a "$KUBECONFIG")" > "$NUON_ACTIONS_OUTPUT_FILEPATH"'''
"#;
    let secrets = r#"[[secret]]
name = "api_key"
description = "The API key"
kubernetes_sync_targets = [
  { namespaces = ["app", "{{ .nuon.install.name }}"], name = "api", key = "api-key" },
]

[[secret]]
name = "db_password"
description = "The database's password"
kubernetes_sync = true
kubernetes_secret_name = "db"
kubernetes_secret_namespace = "app"
"#;
    let mut m = Manual::start_full(
        &[
            METADATA,
            (
                "sandbox.toml",
                "terraform_version = \">= 1.5\"\npath = \"./sandbox\"\n",
            ),
            ("sandbox/main.tf", &sandbox_tf),
            ("secrets.toml", secrets),
            (
                "kubernetes_contexts.toml",
                "[[kubernetes_context]]\nname = \"workload\"\ncomponent = \"cluster\"\n",
            ),
            ("components/cluster.toml", &component("cluster", "")),
            ("tf/main.tf", &cluster_tf),
            (
                "components/web.toml",
                "name = \"web\"\ntype = \"helm_chart\"\nchart_name = \"web\"\nnamespace = \"apps\"\npath = \"./src/web\"\nkubernetes_context = \"workload\"\ntake_ownership = true\n",
            ),
            (
                "src/web/Chart.yaml",
                "apiVersion: v2\nname: web\ndescription: A test chart\nversion: 0.1.0\n",
            ),
            ("actions/announce.toml", announce),
            ("actions/check.toml", check),
            // Manifests: one in its context's cluster, one in the
            // sandbox's.
            (
                "components/cfg.toml",
                "name = \"cfg\"\ntype = \"kubernetes_manifest\"\nnamespace = \"apps\"\nkubernetes_context = \"workload\"\nmanifest = \"\"\"\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n\"\"\"\n",
            ),
            (
                "components/plain.toml",
                "name = \"plain\"\ntype = \"kubernetes_manifest\"\nnamespace = \"apps\"\nmanifest = \"\"\"\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: plain\n\"\"\"\n",
            ),
        ],
        Some(&registry.url),
        |_| {},
        &[
            "--secret",
            "api_key=first-key",
            "--secret",
            "db_password=hunter2",
        ],
    );
    let c = m.cp.client();
    m.restart_runner_with_tools(bin.path());
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    // Nuon's order: the sandbox, then the secrets between their triggers'
    // actions, then the components (the context's first: web needs it).
    let at = |name: &str| {
        w.steps
            .iter()
            .position(|s| s.name == name)
            .unwrap_or_else(|| panic!("no step {name}: {w:#?}"))
    };
    assert!(at("apply sandbox") < at("action announce"));
    assert!(at("action announce") < at("sync kubernetes secrets"));
    assert!(at("sync kubernetes secrets") < at("action check"));
    assert!(at("action check") < at("apply cluster"));
    assert!(at("apply cluster") < at("apply web"));
    let b64 = |v: &str| base64::engine::general_purpose::STANDARD.encode(v);
    let rec = std::fs::read_to_string(&kubectl_record).unwrap();
    let manifest = rec
        .lines()
        .find(|l| l.starts_with("MANIFEST") && l.contains(r#""kind":"Secret""#))
        .unwrap_or_else(|| panic!("no Secret applied: {rec}"));
    for part in [
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"app"}}"#.to_owned(),
        r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"demo"}}"#.to_owned(),
        r#""name":"api","namespace":"app""#.to_owned(),
        r#""name":"api","namespace":"demo""#.to_owned(),
        r#""name":"db","namespace":"app""#.to_owned(),
        format!(r#""api-key":"{}""#, b64("first-key")),
        format!(r#""value":"{}""#, b64("hunter2")),
    ] {
        assert!(manifest.contains(&part), "{part} in {manifest}");
    }
    // What the API shows of the job hides the values, base64 too.
    let sync = step(&w, "sync kubernetes secrets");
    let job = rt()
        .block_on(c.get_job(sync.job_id.as_ref().expect("the sync's job")))
        .unwrap();
    let shown = serde_json::to_string(&job.payload).unwrap();
    assert!(
        !shown.contains(&b64("hunter2")) && !shown.contains(&b64("first-key")),
        "{shown}"
    );
    assert!(
        rec.lines()
            .any(|l| l.starts_with("ARGS apply --server-side --field-manager=nuon")),
        "{rec}"
    );
    assert!(
        !rec.contains("hunter2"),
        "only base64 reaches kubectl: {rec}"
    );
    // The secrets went to the sandbox's cluster; web to its context's.
    let kube = std::fs::read_to_string(&seen).unwrap();
    assert!(kube.contains("kubectl apply sandbox-cluster"), "{kube}");
    assert!(kube.contains("helm upgrade workload-cluster"), "{kube}");
    assert!(!kube.contains("helm upgrade sandbox-cluster"), "{kube}");
    // A manifest's plan and apply reach its context's cluster (cfg), or
    // the sandbox's (plain).
    assert!(at("apply cluster") < at("plan cfg"));
    for line in [
        "kubectl diff workload-cluster cfg",
        "kubectl apply workload-cluster cfg",
        "kubectl diff sandbox-cluster plain",
        "kubectl apply sandbox-cluster plain",
    ] {
        assert!(kube.lines().any(|l| l == line), "{line} in {kube}");
    }
    assert!(
        !kube.contains("sandbox-cluster cfg") && !kube.contains("workload-cluster plain"),
        "{kube}"
    );
    let helm = std::fs::read_to_string(&helm_record).unwrap();
    assert!(
        helm.lines()
            .any(|l| l.starts_with("ARGS upgrade") && l.contains("--take-ownership")),
        "{helm}"
    );
    // The action's kubeconfig: a private file, the sandbox's; its labels.
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    let got = &outputs.actions["check"];
    assert_eq!(got["kube"], "sandbox-cluster", "{got:?}");
    assert_eq!(got["team"], "platform", "{got:?}");
    assert_eq!(got["mode"], "600", "{got:?}");
    // A changed synced secret is written again, between the same actions.
    let file = m.dir.path().join("new-key");
    std::fs::write(&file, "second-key\n").unwrap();
    let out = m.cp.nuon(&[
        "installs",
        "secrets",
        "set",
        "demo",
        "api_key",
        "--from-file",
        file.to_str().unwrap(),
        "--wait",
    ]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(
        t.contains("writes the secrets synced into Kubernetes again"),
        "{t}"
    );
    let w = newest_workflow(&c);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let names: Vec<&str> = w.steps.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        ["action announce", "sync kubernetes secrets", "action check"],
        "{w:#?}"
    );
    let rec = std::fs::read_to_string(&kubectl_record).unwrap();
    let last = rec
        .lines()
        .rfind(|l| l.starts_with("MANIFEST") && l.contains(r#""kind":"Secret""#))
        .unwrap();
    assert!(
        last.contains(&format!(r#""api-key":"{}""#, b64("second-key"))),
        "{last}"
    );
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(
        outputs.kubernetes_secrets,
        ["app/api", "app/db", "demo/api"],
        "{outputs:?}"
    );
    // A config that no longer syncs db_password: the next sync deletes
    // its Secret, in its namespace.
    let app = m.dir.path().join("app");
    let fewer = secrets.replace(
        "kubernetes_sync = true\nkubernetes_secret_name = \"db\"\nkubernetes_secret_namespace = \"app\"\n",
        "",
    );
    assert_ne!(fewer, secrets);
    std::fs::write(app.join("secrets.toml"), fewer).unwrap();
    ok(m.cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]));
    ok(m.cp.nuon(&["builds", "create", "--app", "app", "--wait"]));
    let w = run_workflow(&c, WorkflowKind::Reprovision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let rec = std::fs::read_to_string(&kubectl_record).unwrap();
    assert!(
        rec.lines()
            .any(|l| l == "ARGS delete --ignore-not-found --namespace app secret/db"),
        "{rec}"
    );
    let last = rec
        .lines()
        .rfind(|l| l.starts_with("MANIFEST") && l.contains(r#""kind":"Secret""#))
        .unwrap();
    assert!(!last.contains(r#""name":"db""#), "{last}");
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.kubernetes_secrets, ["app/api", "demo/api"]);
    // A deprovision deletes the Secrets the syncs wrote, each in its
    // namespace, after the components and before the sandbox (whose
    // cluster a customer may keep).
    let w = run_workflow(&c, WorkflowKind::Deprovision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let at = |name: &str| {
        w.steps
            .iter()
            .position(|s| s.name == name)
            .unwrap_or_else(|| panic!("no step {name}: {w:#?}"))
    };
    assert!(
        at("destroy web") < at("remove kubernetes secrets"),
        "{w:#?}"
    );
    assert!(
        at("remove kubernetes secrets") < at("destroy sandbox"),
        "{w:#?}"
    );
    let rec = std::fs::read_to_string(&kubectl_record).unwrap();
    for gone in ["--namespace app secret/api", "--namespace demo secret/api"] {
        assert!(
            rec.lines()
                .any(|l| l == format!("ARGS delete --ignore-not-found {gone}")),
            "{rec}"
        );
    }
    let deleted = rec
        .lines()
        .filter(|l| l.starts_with("ARGS delete --ignore-not-found --namespace"))
        .count();
    assert_eq!(
        deleted, 3,
        "db once (no longer synced), api in app and demo: {rec}"
    );
}
