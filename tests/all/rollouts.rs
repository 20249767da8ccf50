//! Rollouts across a fleet: a release deployed to the installs a label
//! selector picks, in waves, each by its normal deploy workflow with real
//! Terraform on a runner of its own; a failure stops the rollout, a retry
//! after the fix completes it, a `kill -9` of the control plane mid-wave
//! deploys no install twice, and a rollback returns the installs to the
//! release they had before.

use std::process::{Child, Output};
use std::time::Duration;

use nuon_tests::{have_tool, wait_for};
use serde_json::Value;

use crate::deploy::{METADATA, Manual, ok, text};

const INPUTS: (&str, &str) = (
    "inputs.toml",
    "[[input]]\nname = \"size\"\ndescription = \"how big\"\ntype = \"number\"\ndefault = \"1\"\n",
);

const BOX: (&str, &str) = (
    "components/box.toml",
    "name = \"box\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/box\"\n\n[vars]\nsize = \"{{ .nuon.install.inputs.size }}\"\n",
);

/// The box's Terraform at `version`, taking `pause` seconds to apply.
fn box_tf(version: &str, pause: u32) -> String {
    format!(
        "variable \"size\" {{\n  type = number\n  validation {{\n    condition     = var.size < 100\n    error_message = \"size must be below 100\"\n  }}\n}}\n\n\
         resource \"terraform_data\" \"box\" {{\n  input = \"{version}-${{var.size}}\"\n  provisioner \"local-exec\" {{\n    command = \"sleep {pause}\"\n  }}\n}}\n\n\
         output \"version\" {{\n  value = \"{version}\"\n}}\n"
    )
}

/// Runners killed when the test ends.
struct Fleet(Vec<Child>);

impl Drop for Fleet {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn json_of(out: Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
}

#[test]
fn a_release_rolls_out_in_waves_stops_on_a_failure_retries_survives_a_restart_and_rolls_back() {
    if !have_tool("terraform", "deploy the installs of a rollout") {
        return;
    }
    let tf = box_tf("v1", 0);
    let mut m = Manual::start(&[METADATA, INPUTS, BOX, ("src/box/main.tf", &tf)]);
    let json = |m: &Manual, args: &[&str]| -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        serde_json::from_str(&ok(m.cp.nuon(&all))).unwrap()
    };
    let prod: Vec<String> = (1..=8).map(|i| format!("p{i:02}")).collect();
    let trial: Vec<String> = (1..=4).map(|i| format!("t{i:02}")).collect();
    let mut fleet = Fleet(Vec::new());
    for (name, tier) in prod
        .iter()
        .map(|n| (n, "prod"))
        .chain(trial.iter().map(|n| (n, "trial")))
    {
        let label = format!("tier={tier}");
        let created = json(
            &m,
            &[
                "installs", "create", "--app", "app", "--name", name, "--label", &label,
            ],
        );
        let token = created["runner_token"].as_str().unwrap();
        fleet.0.push(m.start_runner_of(name, token));
    }
    let r1 = json(&m, &["releases", "create", "--app", "app"])["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // A dry run says who gets what, in which wave, and stores nothing.
    let plan = json(
        &m,
        &[
            "releases",
            "rollout",
            &r1,
            "--to",
            "tier=prod",
            "--waves",
            "1,25%,100%",
            "--dry-run",
        ],
    );
    assert_eq!(plan["status"], "planned");
    let waves: Vec<(String, u64)> = plan["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["install"].as_str().unwrap().to_owned(),
                t["wave"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, u64)> = prod
        .iter()
        .zip([0, 1, 2, 2, 2, 2, 2, 2])
        .map(|(n, w)| (n.clone(), w))
        .collect();
    assert_eq!(waves, expected);
    let out = m.cp.nuon(&["releases", "status", &r1]);
    assert!(!out.status.success());
    assert!(text(&out).contains("has no rollout yet"), "{}", text(&out));

    // Release 1 to every prod install, in one wave.
    let first = json_of(m.cp.nuon(&[
        "--json",
        "releases",
        "rollout",
        &r1,
        "--to",
        "tier=prod",
        "--max-parallel",
        "8",
        "--wait",
    ]));
    assert_eq!(first["status"], "succeeded", "{first:#}");
    for p in &prod {
        let i = json(&m, &["installs", "get", p]);
        assert_eq!(i["release_id"], r1.as_str(), "{p}");
        assert_eq!(i["outputs"]["components"]["box"]["version"], "v1", "{p}");
    }

    // Release 2 (slower to apply), with p02 (wave 2) given a broken input.
    let app = m.dir.path().join("app");
    std::fs::write(app.join("src/box/main.tf"), box_tf("v2", 3)).unwrap();
    ok(m.cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]));
    ok(m.cp.nuon(&["builds", "create", "--app", "app", "--wait"]));
    let r2 = json(&m, &["releases", "create", "--app", "app"])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    ok(m.cp.nuon(&["installs", "inputs", "set", "p02", "size=500"]));
    let out = m.cp.nuon(&[
        "--json",
        "releases",
        "rollout",
        &r2,
        "--to",
        "tier=prod",
        "--waves",
        "1,25%,100%",
        "--max-parallel",
        "3",
        "--wait",
    ]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "a stopped rollout exits 1: {}",
        text(&out)
    );
    let stopped = json_of(out);
    assert_eq!(stopped["status"], "stopped", "{stopped:#}");
    assert_eq!(stopped["wave"], 1);
    let state = |r: &Value, name: &str| -> String {
        r["targets"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["install"] == name)
            .map(|t| t["state"].as_str().unwrap().to_owned())
            .unwrap()
    };
    assert_eq!(state(&stopped, "p01"), "succeeded");
    assert_eq!(state(&stopped, "p02"), "failed");
    // The third wave never started.
    for p in &prod[2..] {
        assert_eq!(state(&stopped, p), "pending", "{p}");
    }
    // `releases status` says why.
    let shown = ok(m.cp.nuon(&["releases", "status", &r2]));
    assert!(shown.contains("install p02 failed in wave 2"), "{shown}");
    assert!(shown.contains("Invalid value for variable"), "{shown}");

    // Fixed and retried; the control plane killed while wave 3 deploys.
    ok(m.cp.nuon(&["installs", "inputs", "set", "p02", "size=2"]));
    let retried = json(&m, &["releases", "retry", &r2]);
    assert_eq!(retried["status"], "running");
    let ro2 = retried["id"].as_str().unwrap().to_owned();
    wait_for("wave 3 to deploy", Duration::from_secs(180), || {
        let r = json(&m, &["releases", "status", &ro2]);
        let deploying = r["targets"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["wave"] == 2 && t["state"] == "running");
        deploying.then_some(())
    })
    .unwrap();
    m.cp.kill9();
    m.cp.restart().unwrap();
    let done = wait_for(
        "the rollout to end after the restart",
        Duration::from_secs(300),
        || {
            let r = json(&m, &["releases", "status", &ro2]);
            (r["status"] != "running").then_some(r)
        },
    )
    .unwrap();
    assert_eq!(done["status"], "succeeded", "{done:#}");

    // Every prod install has release 2, each deployed once (p02 twice: its
    // failure and its retry); the trial installs were never touched.
    for p in &prod {
        let i = json(&m, &["installs", "get", p]);
        assert_eq!(i["release_id"], r2.as_str(), "{p}");
        assert_eq!(i["outputs"]["components"]["box"]["version"], "v2", "{p}");
        let wfs = json(&m, &["workflows", "list", "--install", p]);
        let of_r2 = wfs["workflows"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["release_id"] == r2.as_str())
            .count();
        assert_eq!(of_r2, if p == "p02" { 2 } else { 1 }, "{p}: {wfs:#}");
    }
    for t in &trial {
        let i = json(&m, &["installs", "get", t]);
        assert!(i.get("release_id").is_none(), "{t}: {i:#}");
        let wfs = json(&m, &["workflows", "list", "--install", t]);
        assert!(
            wfs["workflows"].as_array().unwrap().is_empty(),
            "{t}: {wfs:#}"
        );
    }

    // A rollback returns every install to release 1's outputs.
    let back = json(&m, &["releases", "rollback", &r2]);
    assert_eq!(back["rollback_of"], ro2.as_str());
    let back_id = back["id"].as_str().unwrap().to_owned();
    let ended = wait_for("the rollback to end", Duration::from_secs(300), || {
        let r = json(&m, &["releases", "status", &back_id]);
        (r["status"] != "running").then_some(r)
    })
    .unwrap();
    assert_eq!(ended["status"], "succeeded", "{ended:#}");
    assert_eq!(
        json(&m, &["releases", "status", &ro2])["status"],
        "rolled_back"
    );
    for p in &prod {
        let i = json(&m, &["installs", "get", p]);
        assert_eq!(i["release_id"], r1.as_str(), "{p}");
        assert_eq!(i["outputs"]["components"]["box"]["version"], "v1", "{p}");
    }

    // An install whose deploys ask a person holds its rollout there, and
    // the rollout says where and how to approve; the approval lets it end.
    ok(m.cp.nuon(&["installs", "update", "t01", "--approval", "prompt"]));
    let ro3 = json(&m, &["releases", "rollout", &r1, "--to", "tier=trial"])["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let held = wait_for(
        "the rollout to wait for t01's approval",
        Duration::from_secs(300),
        || {
            let r = json(&m, &["releases", "status", &ro3]);
            r["reason"]
                .as_str()
                .is_some_and(|why| why.contains("waiting for approval at t01/"))
                .then_some(r)
        },
    )
    .unwrap();
    let t01 = held["targets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["install"] == "t01")
        .unwrap();
    let wf = t01["workflow_id"].as_str().unwrap();
    let why = t01["reason"].as_str().unwrap();
    assert!(
        why.contains(&format!("nuon workflows approve {wf} --step")),
        "{held:#}"
    );
    ok(m.cp.nuon(&["workflows", "approve", wf]));
    let ended = wait_for("the held rollout to end", Duration::from_secs(300), || {
        let r = json(&m, &["releases", "status", &ro3]);
        (r["status"] != "running").then_some(r)
    })
    .unwrap();
    assert_eq!(ended["status"], "succeeded", "{ended:#}");
}
