//! Runner updates: the real `nuon-runner` built twice (two versions, see
//! `nuon_tests::runner_next`) published to the vendor's store, signed by
//! the org's key, and rolled out to three install runners in two waves
//! while jobs keep arriving; a pinned install is left as it is; a paused
//! rollout starts nothing new until resumed; a bad version (it exits at
//! start) is switched to, fails, is replaced by the version before by the
//! runner itself, and stops its rollout with the reason; rollbacks return
//! the runners to the versions they had.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nuon_tests::{RUNNER_NEXT_VERSION, bin, have_tool, ours, runner_next, wait_for};
use serde_json::Value;

use crate::deploy::{METADATA, Manual, ok, text};

const V1: &str = env!("CARGO_PKG_VERSION");
const BAD: &str = "99.1.0-bad";
const HANGS: &str = "99.2.0-hangs";
const RUNNERS: [&str; 3] = ["a1", "a2", "a3"];

/// Processes killed when the test ends: the runners this test started,
/// and the ones a watchdog started in their place (by pid).
struct Fleet(Vec<Child>, Vec<u32>);

impl Drop for Fleet {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
        for pid in &self.1 {
            let _ = Command::new("kill")
                .args(["-9", &pid.to_string()])
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn json(m: &Manual, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(m.cp.nuon(&all))).unwrap()
}

/// The id of install `name`'s runner.
fn runner_id(m: &Manual, name: &str) -> String {
    json(m, &["installs", "get", name])["runner_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// The runner of install `name`: (version it calls with, healthy, pid).
fn runner(m: &Manual, name: &str) -> (String, bool, u32) {
    let id = runner_id(m, name);
    let list = json(m, &["runners", "list"]);
    let r = list["runners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == id.as_str())
        .unwrap_or_else(|| panic!("no runner {name}: {list}"))
        .clone();
    (
        r["session"]["version"].as_str().unwrap_or("").to_owned(),
        r["health"] == "healthy",
        r["session"]["pid"].as_u64().unwrap_or(0) as u32,
    )
}

/// Waits up to `secs` for `f`, else fails with what `what` says.
fn until(secs: u64, f: impl Fn() -> bool, what: impl Fn() -> String) {
    if wait_for("the test's condition", Duration::from_secs(secs), || {
        f().then_some(())
    })
    .is_err()
    {
        panic!("{}", what());
    }
}

fn wait_on(m: &Manual, name: &str, version: &str, secs: u64) {
    if wait_for("a runner's version", Duration::from_secs(secs), || {
        let (v, healthy, _) = runner(m, name);
        (v == version && healthy).then_some(())
    })
    .is_err()
    {
        panic!(
            "runner {name} is not on {version}: {:?}\n{}",
            runner(m, name),
            std::fs::read_to_string(m.dir.path().join(format!("{name}.log"))).unwrap_or_default()
        );
    }
}

fn start_runner(m: &Manual, name: &str, token: &str) -> Child {
    let d = m.dir.path();
    ours("nuon-runner")
        .arg("run")
        .args([
            "--api",
            &m.cp.runner_url,
            "--signing-key",
            &m.cp.signing_key,
        ])
        .arg("--work-dir")
        .arg(d.join(name))
        .arg("--store-dir")
        .arg(d.join(format!("{name}-store")))
        .arg("--vendor-store")
        .arg(d.join("vendor"))
        .args(["--update-timeout", "15s", "--drain-timeout", "60s"])
        // The test's commands are ad hoc: an install's runner runs them as
        // debug commands, which its operator allows here.
        .args(["--debug-commands", "any"])
        .env("NUON_RUNNER_TOKEN", token)
        .stdout(Stdio::null())
        .stderr(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(d.join(format!("{name}.log")))
                .unwrap(),
        )
        .spawn()
        .unwrap()
}

/// Sends exec jobs to the three runners until `stop`: each appends its
/// job id to `ran`. Their ids, in order.
fn keep_sending(
    cp_nuon: impl Fn(&[&str]) -> std::process::Output + Send + 'static,
    runners: Vec<String>,
    ran: &Path,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<Vec<String>> {
    let ran = ran.to_path_buf();
    std::thread::spawn(move || {
        let mut ids = Vec::new();
        let line = format!("echo \"$NUON_JOB_ID\" >> {}", ran.display());
        let mut i = 0;
        while !stop.load(Ordering::Relaxed) {
            let runner = &runners[i % runners.len()];
            i += 1;
            let out = cp_nuon(&[
                "--json", "jobs", "exec", "--runner", runner, "--", "sh", "-c", &line,
            ]);
            assert!(out.status.success(), "{}", text(&out));
            let v: Value = serde_json::from_slice(&out.stdout).unwrap();
            ids.push(v["id"].as_str().unwrap().to_owned());
            std::thread::sleep(Duration::from_millis(150));
        }
        ids
    })
}

#[test]
fn runners_update_in_waves_and_a_bad_version_goes_back_by_itself_and_stops_the_rollout() {
    if !have_tool("terraform", "build the example app of the runner updates") {
        return;
    }
    let tf = "resource \"terraform_data\" \"box\" {\n  input = \"v1\"\n}\n";
    let mut m = Manual::start(&[
        METADATA,
        (
            "components/box.toml",
            "name = \"box\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/box\"\n",
        ),
        ("src/box/main.tf", tf),
    ]);
    // The customer of `demo` pins its runner to the version it runs.
    m.restart_runner_with(&["--pin-version", V1]);
    let mut fleet = Fleet(Vec::new(), Vec::new());
    for name in RUNNERS {
        let ring = if name == "a3" {
            "ring=canary"
        } else {
            "ring=main"
        };
        let created = json(
            &m,
            &[
                "installs", "create", "--app", "app", "--name", name, "--label", ring,
            ],
        );
        let token = created["runner_token"].as_str().unwrap().to_owned();
        fleet.0.push(start_runner(&m, name, &token));
    }
    for name in RUNNERS.iter().chain(&["demo"]) {
        wait_on(&m, name, V1, 60);
    }
    let vendor = m.dir.path().join("vendor");
    let vendor = vendor.to_str().unwrap();

    // Publish: v1 and the second build, and a bad version: a binary that
    // exits at start. The CLI checks what a binary says it is.
    let bad = m.dir.path().join("bad-runner");
    std::fs::write(&bad, "#!/bin/sh\necho 'this build is broken' >&2\nexit 3\n").unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&bad, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let wrong = m.cp.nuon(&[
        "runners",
        "release",
        "publish",
        "--version",
        "1.2.3",
        "--binary",
        runner_next().to_str().unwrap(),
        "--store",
        vendor,
    ]);
    assert_eq!(wrong.status.code(), Some(64), "{}", text(&wrong));
    assert!(
        text(&wrong).contains("not version 1.2.3"),
        "{}",
        text(&wrong)
    );
    // And one that starts but never answers the control plane.
    let hangs = m.dir.path().join("hanging-runner");
    std::fs::write(
        &hangs,
        "#!/bin/sh
exec sleep 600
",
    )
    .unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&hangs, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut published = Vec::new();
    for (version, binary) in [
        (V1, bin("nuon-runner")),
        (RUNNER_NEXT_VERSION, runner_next()),
        (BAD, bad.clone()),
        (HANGS, hangs.clone()),
    ] {
        let r = json(
            &m,
            &[
                "runners",
                "release",
                "publish",
                "--version",
                version,
                "--binary",
                binary.to_str().unwrap(),
                "--store",
                vendor,
            ],
        );
        assert_eq!(r["version"], version);
        assert!(r["digest"].as_str().unwrap().starts_with("sha256:"));
        assert!(!r["signature"].as_str().unwrap().is_empty());
        published.push(r);
    }
    let again = m.cp.nuon(&[
        "runners",
        "release",
        "publish",
        "--version",
        V1,
        "--binary",
        bin("nuon-runner").to_str().unwrap(),
        "--store",
        vendor,
    ]);
    assert!(
        text(&again).contains("runner_release_exists"),
        "{}",
        text(&again)
    );
    let list = json(&m, &["runners", "release", "list"]);
    assert_eq!(list["releases"].as_array().unwrap().len(), 4);

    // The plan: 50% of the four installs in the first wave, the rest in
    // the second; the pinned one passed over.
    let plan = json(
        &m,
        &[
            "runners",
            "release",
            "rollout",
            RUNNER_NEXT_VERSION,
            "--wave",
            "50%",
            "--dry-run",
        ],
    );
    assert_eq!(plan["status"], "planned");
    assert_eq!(plan["kind"], "runner");
    let targets: Vec<(String, u64, String)> = plan["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["install"].as_str().unwrap().to_owned(),
                t["wave"].as_u64().unwrap(),
                t["state"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let expect = |n: &str, w, s: &str| (n.to_owned(), w, s.to_owned());
    assert_eq!(
        targets,
        [
            expect("a1", 0, "pending"),
            expect("a2", 0, "pending"),
            expect("a3", 1, "pending"),
            expect("demo", 1, "skipped"),
        ]
    );

    // Jobs keep arriving while the runners update.
    let ran = m.dir.path().join("ran.txt");
    let stop = Arc::new(AtomicBool::new(false));
    let nuon = {
        let (url, token) = (m.cp.control_url.clone(), m.cp.admin_token.clone());
        move |args: &[&str]| {
            ours("nuon")
                .args(args)
                .env("NUON_API_URL", &url)
                .env("NUON_TOKEN", &token)
                .stdin(Stdio::null())
                .output()
                .unwrap()
        }
    };
    let ids: Vec<String> = RUNNERS.iter().map(|n| runner_id(&m, n)).collect();
    let sender = keep_sending(nuon, ids, &ran, stop.clone());

    // Started, then paused at once: the first wave finishes, nothing new.
    let started = json(
        &m,
        &[
            "runners",
            "release",
            "rollout",
            RUNNER_NEXT_VERSION,
            "--wave",
            "50%",
        ],
    );
    let rollout = started["id"].as_str().unwrap().to_owned();
    let paused = json(&m, &["runners", "release", "pause", RUNNER_NEXT_VERSION]);
    assert_eq!(paused["status"], "paused");
    wait_on(&m, "a1", RUNNER_NEXT_VERSION, 90);
    wait_on(&m, "a2", RUNNER_NEXT_VERSION, 90);
    std::thread::sleep(Duration::from_secs(3));
    let status = json(&m, &["runners", "release", "status", &rollout]);
    assert_eq!(status["status"], "paused", "{status}");
    assert_eq!(status["targets"][2]["state"], "pending", "{status}");
    assert_eq!(runner(&m, "a3").0, V1);
    let resumed = m.cp.nuon(&["runners", "release", "resume", &rollout]);
    ok(resumed);
    until(
        120,
        || json(&m, &["runners", "release", "status", &rollout])["status"] == "succeeded",
        || json(&m, &["runners", "release", "status", &rollout]).to_string(),
    );
    for name in RUNNERS {
        wait_on(&m, name, RUNNER_NEXT_VERSION, 10);
    }
    let done = json(&m, &["runners", "release", "status", &rollout]);
    assert_eq!(done["targets"][3]["state"], "skipped");
    assert!(
        done["targets"][3]["reason"]
            .as_str()
            .unwrap()
            .contains("pinned"),
        "{done}"
    );
    assert_eq!(runner(&m, "demo").0, V1, "the pinned install is untouched");

    // A bad version: each runner of the first wave downloads and checks
    // it, drains, switches; it exits at start; the runner's watchdog
    // starts the version before in its place, which reports why. The
    // rollout stops on the first failed wave.
    let out = m.cp.nuon(&[
        "runners", "release", "rollout", BAD, "--wave", "50%", "--wait",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    // The rest of the wave finishes (it fails the same way).
    let settled = || {
        let r = json(&m, &["runners", "release", "status", BAD]);
        r["targets"].as_array().unwrap()[..2]
            .iter()
            .all(|t| t["state"] == "failed")
    };
    until(60, settled, || {
        json(&m, &["runners", "release", "status", BAD]).to_string()
    });
    let bad_rollout = json(&m, &["runners", "release", "status", BAD]);
    assert_eq!(bad_rollout["status"], "stopped", "{bad_rollout}");
    for t in &bad_rollout["targets"].as_array().unwrap()[..2] {
        let reason = t["reason"].as_str().unwrap_or("");
        assert!(
            reason.contains("exited before it was healthy") && reason.contains(RUNNER_NEXT_VERSION),
            "{bad_rollout}"
        );
    }
    assert_eq!(
        bad_rollout["targets"][2]["state"], "pending",
        "the second wave never started"
    );
    for name in ["a1", "a2"] {
        wait_on(&m, name, RUNNER_NEXT_VERSION, 30);
        fleet.1.push(runner(&m, name).2);
    }
    assert_eq!(runner(&m, "a3").0, RUNNER_NEXT_VERSION);

    // Roll back the bad rollout (its runners are on the version before
    // already): it no longer holds the installs.
    let back = json(&m, &["runners", "release", "rollback", BAD]);
    let back_id = back["id"].as_str().unwrap().to_owned();
    until(
        60,
        || json(&m, &["runners", "release", "status", &back_id])["status"] == "succeeded",
        || json(&m, &["runners", "release", "status", &back_id]).to_string(),
    );

    // A version that starts but is never healthy: past the bound
    // (--update-timeout 15s) the watchdog stops it and starts the version
    // before. Only the canary ring is asked.
    let out = m.cp.nuon(&[
        "runners",
        "release",
        "rollout",
        HANGS,
        "--to",
        "ring=canary",
        "--wait",
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let hung = json(&m, &["runners", "release", "status", HANGS]);
    assert_eq!(hung["status"], "stopped", "{hung}");
    assert_eq!(hung["targets"].as_array().unwrap().len(), 1, "{hung}");
    let reason = hung["targets"][0]["reason"].as_str().unwrap_or("");
    assert!(reason.contains("not healthy within the bound"), "{hung}");
    wait_on(&m, "a3", RUNNER_NEXT_VERSION, 30);
    fleet.1.push(runner(&m, "a3").2);
    let back = json(&m, &["runners", "release", "rollback", HANGS]);
    let back_id = back["id"].as_str().unwrap().to_owned();
    until(
        60,
        || json(&m, &["runners", "release", "status", &back_id])["status"] == "succeeded",
        || json(&m, &["runners", "release", "status", &back_id]).to_string(),
    );

    // Jobs: every one sent ran exactly once and succeeded, across the updates, the failed ones and the rollbacks.
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let ids = sender.join().unwrap();
    assert!(ids.len() > 20, "only {} jobs were sent", ids.len());
    for id in &ids {
        until(
            60,
            || json(&m, &["jobs", "get", id])["finished_at_ms"].is_number(),
            || format!("job {id}: {}", json(&m, &["jobs", "get", id])),
        );
        // A claim answered while its runner stops claiming (to switch)
        // is not lost: its lease runs out and the job is claimed again
        // (a second attempt number); it still runs once, below.
        let job = json(&m, &["jobs", "get", id]);
        assert_eq!(job["status"], "succeeded", "{job}");
    }
    let lines = std::fs::read_to_string(&ran).unwrap();
    let mut seen: Vec<&str> = lines.lines().collect();
    seen.sort_unstable();
    let mut sent: Vec<&str> = ids.iter().map(String::as_str).collect();
    sent.sort_unstable();
    assert_eq!(seen, sent, "each job ran exactly once");

    // Then the good one: every runner back on v1.
    let back = json(&m, &["runners", "release", "rollback", &rollout]);
    let back_id = back["id"].as_str().unwrap().to_owned();
    until(
        120,
        || json(&m, &["runners", "release", "status", &back_id])["status"] == "succeeded",
        || json(&m, &["runners", "release", "status", &back_id]).to_string(),
    );
    for name in RUNNERS {
        wait_on(&m, name, V1, 10);
        fleet.1.push(runner(&m, name).2);
    }
}
