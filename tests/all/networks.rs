//! Runners on real links: each runner here has a host of its own (a
//! network namespace) and reaches the control plane only through a link
//! that delays, loses packets, is cut off, resets connections or goes
//! through a proxy (`tests/support/net.rs`). Whatever the link does, every
//! job runs once, every log line arrives once and in order, no lease is
//! taken from a live runner, and a workflow goes on when the link is back.

use std::path::Path;
use std::time::Duration;

use nuon_core::JobStatus;
use nuon_core::workflow::WorkflowKind;
use nuon_tests::{
    ConnectProxy, ControlPlane, Link, Netns, Runner, RunnerOpts, all_logs, have_tool, rt, wait_for,
    wait_job,
};

use crate::deploy::{METADATA, Manual, copy_dir, ended, run_workflow_for, step, wait_workflow_for};
use crate::queue_sh;
use crate::tls::{ca_in, good, install, serving};

fn opts<'a>(token: &'a str, cp: &'a ControlPlane) -> RunnerOpts<'a> {
    RunnerOpts {
        token,
        signing_key: &cp.signing_key,
        slots: 2,
        grace: "5s",
        work_dir: None,
    }
}

/// The text of each line of a job's log.
fn log_lines(c: &nuon_client::ControlClient, job: &nuon_core::JobId) -> Vec<String> {
    all_logs(c, job)
        .unwrap()
        .into_iter()
        .map(|l| l.text)
        .collect()
}

/// How many times a job's script wrote its mark in `marks`.
fn times_ran(marks: &Path, name: &str) -> usize {
    std::fs::read_to_string(marks.join(name))
        .unwrap_or_default()
        .lines()
        .count()
}

/// A NAT (or a proxy) that resets every connection 10 s after it was
/// made: the runner's first claim, held for the 50 s it asks, is cut; it
/// learns to ask for less and claims again at once, so jobs queued later
/// are taken, and each runs once.
#[test]
fn a_link_that_resets_every_connection_after_10_s_does_not_stop_long_polls() {
    let Some(ns) = Netns::create("put a runner behind a link that resets its connections") else {
        return;
    };
    let cp = ControlPlane::start("20s").unwrap();
    let link = Link::bind(ns.host_ip).unwrap();
    link.to(&cp.runner_url).unwrap();
    link.cut_after(Some(Duration::from_secs(10)));
    let token = cp.create_runner("r1").unwrap();
    let runner = Runner::start_in(
        Some(&ns),
        &link.url(),
        opts(&token, &cp),
        &["--allow-insecure-http"],
        &[],
    )
    .unwrap();
    wait_for(
        "the runner to learn that the link cuts held claims",
        Duration::from_secs(60),
        || runner.log_text().contains("was cut after").then_some(()),
    )
    .unwrap();
    let before = runner.log_text();
    assert!(
        !before.contains("claiming jobs failed"),
        "a cut is not the control plane failing: {before}"
    );

    let client = cp.client();
    let marks = tempfile::tempdir().unwrap();
    let mut jobs = Vec::new();
    for i in 0..6 {
        std::thread::sleep(Duration::from_secs(4));
        let script = format!(
            "echo ran >> {}/ran-{i}; echo job-{i}",
            marks.path().display()
        );
        jobs.push(queue_sh(&client, "r1", &script, 1));
    }
    for (i, job) in jobs.iter().enumerate() {
        let done = wait_job(&client, &job.id, Duration::from_secs(90)).unwrap();
        assert_eq!(done.status, JobStatus::Succeeded, "{done:?}");
        assert_eq!(
            times_ran(marks.path(), &format!("ran-{i}")),
            1,
            "job {i} ran once"
        );
        assert_eq!(log_lines(&client, &job.id), [format!("job-{i}")]);
    }
    assert!(link.cuts() >= 2, "the link cut {} connections", link.cuts());
}

/// A runner whose host reaches the control plane only through an HTTP
/// `CONNECT` proxy (`HTTPS_PROXY`): its claims, heartbeats, logs and
/// completion all go through the proxy's tunnels.
#[test]
fn a_runner_behind_an_https_connect_proxy_works() {
    let Some(ns) = Netns::create("put a runner behind an HTTPS proxy") else {
        return;
    };
    let certs = tempfile::tempdir().unwrap();
    let (ca, ca_file) = ca_in(certs.path());
    let (cert, key) = install(certs.path(), &good(&ca));
    let mut cp = ControlPlane::start_with("10s", &serving(&cert, &key, &[])).unwrap();
    cp.ca_bundle = Some(ca_file);
    let proxy = ConnectProxy::start(ns.host_ip).unwrap();
    let token = cp.create_runner("r1").unwrap();
    let mut env = cp.runner_env();
    env.push(("HTTPS_PROXY".into(), proxy.url()));
    let _runner =
        Runner::start_in(Some(&ns), &cp.runner_url, opts(&token, &cp), &[], &env).unwrap();

    let client = cp.client();
    let job = queue_sh(&client, "r1", "echo through the proxy", 1);
    let done = wait_job(&client, &job.id, Duration::from_secs(60)).unwrap();
    assert_eq!(done.status, JobStatus::Succeeded, "{done:?}");
    assert_eq!(log_lines(&client, &job.id), ["through the proxy"]);
    // From its namespace the control plane's address is the namespace's own
    // loopback, where nothing listens: everything went through the proxy.
    let port = cp.runner_url.rsplit(':').next().unwrap().to_owned();
    let tunnels = proxy.tunnels();
    assert!(!tunnels.is_empty());
    assert!(
        tunnels.iter().all(|t| t.ends_with(&format!(":{port}"))),
        "{tunnels:?}"
    );
}

/// `examples/apps/hello` provisioned by a runner 300 ms of round trip
/// away (the link's proxy) on a link that loses 5% of its packets each way
/// (iptables in the runner's namespace).
#[test]
fn a_runner_behind_300_ms_rtt_and_5_percent_loss_provisions_the_example_app() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(ns) = Netns::create("put a runner behind a slow lossy link") else {
        return;
    };
    let link = Link::bind(ns.host_ip).unwrap();
    link.latency(Duration::from_millis(300));
    // Terraform's state backend, named in each job, is the link's end too.
    let cp = ControlPlane::start_with("60s", &["--runner-url", &link.url()]).unwrap();
    link.to(&cp.runner_url).unwrap();
    let hello = nuon_tests::manifest_dir().join("../examples/apps/hello");
    let mut m = Manual::start_on(
        cp,
        &[],
        None,
        |app| copy_dir(&hello, app),
        &["--input", "api_key=demo-key-1"],
    );
    ns.loss(0.05).unwrap();
    m.restart_runner_in(&ns, &link.url());
    let c = m.cp.client();
    let w = run_workflow_for(&c, WorkflowKind::Provision, Duration::from_secs(600));
    assert_eq!(w.status.as_str(), "succeeded", "{w:#?}");
    // Each step's job ran once: one attempt, none lost on the way.
    for s in &w.steps {
        assert!(s.attempts.is_empty(), "{} was not retried: {s:#?}", s.name);
        if let Some(job) = &s.job_id {
            let job = rt().block_on(c.get_job(job)).unwrap();
            assert_eq!(job.attempts, 1, "{}: {job:?}", s.name);
        }
    }
    assert!(link.connections() > 0, "the runner's traffic took the link");
    // The loss is taken away as it was put (a second time too).
    ns.loss(0.02).unwrap();
    ns.loss(0.0).unwrap();
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert!(!outputs.components.is_empty(), "{outputs:?}");
}

/// An apply that prints a line a second for 150 s, with the runner's link
/// cut off for 2 minutes in the middle: the apply runs on, its lease (3
/// minutes) is kept, and when the link is back the lines held meanwhile
/// arrive: the apply ran once, its log is whole and in order, and the
/// workflow succeeds.
#[test]
fn a_two_minute_partition_in_the_middle_of_an_apply_loses_nothing() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(ns) = Netns::create("cut a runner's link during an apply") else {
        return;
    };
    const LINES: u32 = 150;
    let marks = tempfile::tempdir().unwrap();
    let component = "name = \"lines\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/lines\"\n".to_owned();
    let module = format!(
        "resource \"terraform_data\" \"lines\" {{\n  provisioner \"local-exec\" {{\n    command = \"echo applied >> {}/applied; i=1; while [ $i -le {LINES} ]; do echo line-$i; i=$((i+1)); sleep 1; done\"\n  }}\n}}\n",
        marks.path().display()
    );
    let link = Link::bind(ns.host_ip).unwrap();
    let cp = ControlPlane::start_with("3m", &["--runner-url", &link.url()]).unwrap();
    link.to(&cp.runner_url).unwrap();
    let mut m = Manual::start_on(
        cp,
        &[
            METADATA,
            ("components/lines.toml", &component),
            ("src/lines/main.tf", &module),
        ],
        None,
        |_| {},
        &[],
    );
    m.restart_runner_in(&ns, &link.url());
    let c = m.cp.client();
    let wf = rt()
        .block_on(c.create_workflow("demo", WorkflowKind::Provision, None))
        .unwrap();
    let id = wf.id.as_str().to_owned();
    let w = wait_workflow_for(
        &c,
        &id,
        |w| step(w, "apply lines").status == "running",
        Duration::from_secs(120),
    );
    let job = step(&w, "apply lines")
        .job_id
        .clone()
        .expect("the apply's job");
    wait_for(
        "the apply to print its fifth line",
        Duration::from_secs(120),
        || {
            let lines = all_logs(&c, &job).ok()?;
            lines
                .iter()
                .any(|l| l.text.ends_with("line-5"))
                .then_some(())
        },
    )
    .unwrap();

    ns.partition(true).unwrap();
    std::thread::sleep(Duration::from_secs(120));
    let during = rt().block_on(c.get_workflow(&id)).unwrap();
    assert_eq!(
        step(&during, "apply lines").status,
        "running",
        "{during:#?}"
    );
    ns.partition(false).unwrap();

    let w = wait_workflow_for(&c, &id, ended, Duration::from_secs(300));
    assert_eq!(w.status.as_str(), "succeeded", "{w:#?}");
    let apply = step(&w, "apply lines");
    assert!(apply.attempts.is_empty(), "not retried: {apply:#?}");
    assert_eq!(times_ran(marks.path(), "applied"), 1, "the apply ran once");
    let numbered: Vec<u32> = log_lines(&c, &job)
        .iter()
        .filter_map(|l| {
            l.rsplit_once("line-")
                .and_then(|(_, n)| n.trim().parse().ok())
        })
        .collect();
    assert_eq!(
        numbered,
        (1..=LINES).collect::<Vec<_>>(),
        "every line once, in order"
    );
    let info = rt().block_on(c.get_job(&job)).unwrap();
    assert_eq!(
        info.attempts, 1,
        "the lease stayed with the live runner: {info:?}"
    );
}
