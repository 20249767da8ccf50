//! "Terraform apps end to end": `nuon dev` on the example app with the real
//! binaries and real `terraform`: provision in dependency order with
//! outputs flowing, a second run that plans no changes, approvals and
//! denials, teardown and deprovision, deploys from the install's own store
//! only, and broken inputs refused before any job runs.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use nuon_client::{ClientConfig, ControlClient};
use nuon_core::wire::WorkflowInfo;
use nuon_core::workflow::WorkflowKind;
use nuon_tests::{bin, have_tool, rt, signal, wait_for};

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples/apps/hello")
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `nuon dev` on `data_dir` with the given extra flags.
fn dev(data_dir: &Path, ports: (u16, u16), extra: &[&str]) -> Command {
    let mut c = Command::new(bin("nuon"));
    c.arg("dev")
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--app-dir")
        .arg(example())
        .args(["--listen", &format!("127.0.0.1:{}", ports.0)])
        .args(["--runner-listen", &format!("127.0.0.1:{}", ports.1)])
        .args(extra)
        .stdin(Stdio::null());
    c
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A client of the control plane, once it has written its admin token.
fn client(data_dir: &Path, port: u16) -> Option<ControlClient> {
    let token = std::fs::read_to_string(data_dir.join("control/admin-token")).ok()?;
    let config = ClientConfig::new(&format!("http://127.0.0.1:{port}"), token.trim()).ok()?;
    ControlClient::new(config).ok()
}

fn newest_workflow(c: &ControlClient) -> WorkflowInfo {
    rt().block_on(c.list_workflows("demo"))
        .expect("workflows")
        .workflows
        .into_iter()
        .next()
        .expect("a workflow")
}

fn wait_workflow(
    c: &ControlClient,
    id: &str,
    done: impl Fn(&WorkflowInfo) -> bool,
) -> WorkflowInfo {
    wait_for("the workflow", Duration::from_secs(120), || {
        let w = rt().block_on(c.get_workflow(id)).ok()?;
        done(&w).then_some(w)
    })
    .expect("workflow reached the state")
}

fn ended(w: &WorkflowInfo) -> bool {
    !matches!(w.status.as_str(), "pending" | "running")
}

fn step<'a>(w: &'a WorkflowInfo, name: &str) -> &'a nuon_core::wire::WorkflowStepInfo {
    w.steps
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no step {name} in {w:#?}"))
}

fn run_workflow(c: &ControlClient, kind: WorkflowKind) -> WorkflowInfo {
    let wf = rt()
        .block_on(c.create_workflow("demo", kind, None))
        .expect("create workflow");
    wait_workflow(c, wf.id.as_str(), ended)
}

/// A `nuon dev` left running (until SIGINT).
struct Dev(Child);

impl Drop for Dev {
    fn drop(&mut self) {
        signal(self.0.id(), SIGINT);
        let _ = wait_for("nuon dev to stop", Duration::from_secs(30), || {
            self.0.try_wait().ok().flatten()
        });
        let _ = self.0.kill();
    }
}

const SIGINT: i32 = 2;

#[test]
fn dev_provisions_the_example_then_redeploys_tears_down_and_deploys_only_from_its_store() {
    if !have_tool("terraform", "run the example app's Terraform") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let ports = (free_port(), free_port());

    // 1. A fresh data dir: provisioned, in dependency order, outputs flowing.
    let out = dev(&data, ports, &["--once"]).output().unwrap();
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    let order: Vec<usize> = [
        "plan sandbox",
        "apply sandbox",
        "apply database",
        "apply app",
        "action smoke_test",
    ]
    .iter()
    .map(|s| {
        log.find(&format!("{s:<32} succeeded"))
            .unwrap_or_else(|| panic!("{s}: {log}"))
    })
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{log}");
    assert!(log.contains("==> phases:"), "{log}");

    // Second run (kept running for the checks below): no changes planned.
    let child = dev(&data, ports, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let dev_proc = Dev(child);
    let c = wait_for("the control plane", Duration::from_secs(30), || {
        let c = client(&data, ports.0)?;
        rt().block_on(c.list_workflows("demo"))
            .ok()
            .filter(|l| l.workflows.len() >= 2)
            .map(|_| c)
    })
    .unwrap();
    let second = newest_workflow(&c);
    let second = wait_workflow(&c, second.id.as_str(), ended);
    assert_eq!(second.status, "succeeded", "{second:#?}");
    for p in ["plan sandbox", "plan database", "plan app"] {
        let ch = &step(&second, p).outputs["changes"];
        assert_eq!(
            (
                ch["add"].as_u64(),
                ch["change"].as_u64(),
                ch["destroy"].as_u64()
            ),
            (Some(0), Some(0), Some(0)),
            "{p} planned changes on the second run: {ch}"
        );
    }
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    let network = outputs.sandbox["network_id"].as_str().unwrap().to_owned();
    let db_url = outputs.components["database"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        db_url.contains(&network),
        "the sandbox's output reached the database: {db_url}"
    );
    let messages = outputs.components["app"]["messages"].to_string();
    assert!(
        messages.contains(&db_url),
        "the database's output reached the app: {messages}"
    );

    // 5. A corrupted blob in the install's store is found by digest and
    // copied again, never deployed.
    let store = data.join("installs/demo/store");
    let mut corrupted = 0;
    for entry in walk(&store) {
        if entry.to_string_lossy().contains("/database/blobs/sha256/")
            && std::fs::metadata(&entry)
                .map(|m| m.len() > 100)
                .unwrap_or(false)
        {
            let mut bytes = std::fs::read(&entry).unwrap();
            bytes[50] ^= 0xff;
            std::fs::write(&entry, bytes).unwrap();
            corrupted += 1;
        }
    }
    assert!(corrupted > 0, "no module blob found in {}", store.display());
    let wf = run_workflow(&c, WorkflowKind::Deploy);
    assert_eq!(wf.status, "succeeded", "{wf:#?}");
    assert!(
        step(&wf, "sync database").outputs["copied"].as_u64() >= Some(1),
        "{:#?}",
        step(&wf, "sync database")
    );

    // Deleting the vendor's store does not break a redeploy of the same build.
    std::fs::remove_dir_all(data.join("vendor-store")).unwrap();
    let wf = run_workflow(&c, WorkflowKind::Deploy);
    assert_eq!(wf.status, "succeeded", "{wf:#?}");

    // 3. Deprovision destroys in reverse order and leaves no outputs; a
    // later provision starts clean.
    let wf = run_workflow(&c, WorkflowKind::Deprovision);
    assert_eq!(wf.status, "succeeded", "{wf:#?}");
    let names: Vec<&str> = wf.steps.iter().map(|s| s.name.as_str()).collect();
    let at = |n: &str| names.iter().position(|x| *x == n).unwrap();
    assert!(at("destroy app") < at("destroy database"));
    assert!(at("destroy database") < at("destroy sandbox"));
    let ch = &step(&wf, "plan destroy database").outputs["changes"];
    assert!(ch["destroy"].as_u64() >= Some(1), "{ch}");
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert!(
        outputs.sandbox.is_empty() && outputs.components.is_empty(),
        "{outputs:?}"
    );
    let install = rt().block_on(c.get_install("demo")).unwrap();
    assert_eq!(install.state, "deprovisioned");
    let states = rt().block_on(c.list_states("demo")).unwrap();
    assert!(states.states.iter().all(|s| s.lock.is_none()), "{states:?}");

    // The vendor's store is gone: a provision now needs a rebuild, and says so.
    std::fs::create_dir_all(data.join("vendor-store")).unwrap();
    let wf = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(wf.status, "succeeded", "{wf:#?}");
    let ch = &step(&wf, "plan database").outputs["changes"];
    assert!(
        ch["add"].as_u64() >= Some(1),
        "a provision after deprovision starts clean: {ch}"
    );
    drop(dev_proc);
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn prompt_waits_for_approvals_and_a_denial_skips_the_component_and_its_dependents() {
    if !have_tool("terraform", "run the example app's Terraform") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let ports = (free_port(), free_port());
    let child = dev(&data, ports, &["--approval", "prompt"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _dev = Dev(child);
    let c = wait_for("the workflow", Duration::from_secs(60), || {
        let c = client(&data, ports.0)?;
        rt().block_on(c.list_workflows("demo"))
            .ok()
            .filter(|l| !l.workflows.is_empty())
            .map(|_| c)
    })
    .unwrap();
    let wf = newest_workflow(&c);
    let id = wf.id.as_str().to_owned();
    let waiting = |name: &'static str| {
        move |w: &WorkflowInfo| {
            w.steps
                .iter()
                .any(|s| s.name == name && s.status == "waiting_approval")
        }
    };
    let w = wait_workflow(&c, &id, waiting("apply sandbox"));
    assert_eq!(step(&w, "plan sandbox").status, "succeeded");
    assert_eq!(
        step(&w, "sync database").status,
        "pending",
        "nothing runs past a waiting step"
    );
    // Approving a step that needs no approval is refused.
    let e = rt()
        .block_on(c.approve_step(&id, Some("plan app")))
        .unwrap_err();
    assert!(e.to_string().contains("does not wait"), "{e}");
    rt().block_on(c.approve_step(&id, None)).unwrap();
    let w = wait_workflow(&c, &id, waiting("apply database"));
    assert_eq!(step(&w, "apply sandbox").status, "succeeded");
    // The CLI denies it: the database and what depends on it are skipped.
    let out = Command::new(bin("nuon"))
        .args(["--api", &format!("http://127.0.0.1:{}", ports.0)])
        .args([
            "--token",
            std::fs::read_to_string(data.join("control/admin-token"))
                .unwrap()
                .trim(),
        ])
        .args(["workflows", "deny", &id])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let w = wait_workflow(&c, &id, ended);
    assert_eq!(w.status, "partial", "{w:#?}");
    assert_eq!(step(&w, "apply database").status, "denied");
    for s in ["sync app", "plan app", "apply app", "action smoke_test"] {
        assert_eq!(step(&w, s).status, "skipped", "{s}: {w:#?}");
        assert!(
            step(&w, s)
                .reason
                .as_deref()
                .unwrap_or("")
                .contains("denied")
        );
    }
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert!(
        outputs.components.is_empty() && !outputs.sandbox.is_empty(),
        "{outputs:?}"
    );

    // 7. A template that renders to nothing is refused before any job runs.
    let out = Command::new(bin("nuon"))
        .args(["--api", &format!("http://127.0.0.1:{}", ports.0)])
        .args([
            "--token",
            std::fs::read_to_string(data.join("control/admin-token"))
                .unwrap()
                .trim(),
        ])
        .args(["installs", "inputs", "set", "demo", "greeting="])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let before = rt().block_on(c.list_jobs()).unwrap().jobs.len();
    let e = rt()
        .block_on(c.create_workflow("demo", WorkflowKind::Deploy, None))
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("greeting") && msg.contains("renders to nothing"),
        "{msg}"
    );
    assert_eq!(
        rt().block_on(c.list_jobs()).unwrap().jobs.len(),
        before,
        "no job ran"
    );
}
