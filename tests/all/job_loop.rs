//! The happy path and the controls of the loop: exec, dispatch, cancel, drain.

use std::time::Duration;

use nuon_core::JobStatus;
use nuon_core::wire::LogStream;
use nuon_tests::{
    Runner, RunnerOpts, all_logs, process_alive, read_pid, rt, signal, wait_for, wait_job,
};

use crate::{LONG, queue_sh, setup};

/// Acceptance 1: both lines in order, the job's exit code, status failed.
#[test]
fn exec_wait_streams_both_streams_in_order_and_exits_with_the_job_code() {
    let s = setup("10s", "r1", 2, "5s");
    let out = s.cp.nuon(&[
        "jobs",
        "exec",
        "--runner",
        "r1",
        "--wait",
        "--",
        "sh",
        "-c",
        "echo out; echo err >&2; exit 3",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(3),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert_eq!(stdout.trim(), "out");
    assert!(stderr.lines().any(|l| l == "err"), "{stderr}");

    let list = s.cp.nuon(&["jobs", "list", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&list.stdout).unwrap();
    let id = v["jobs"][0]["id"].as_str().unwrap().to_owned();
    let get = s.cp.nuon(&["jobs", "get", &id, "--json"]);
    let job: serde_json::Value = serde_json::from_slice(&get.stdout).unwrap();
    assert_eq!(job["status"], "failed");
    assert_eq!(job["exit_code"], 3);

    let logs = all_logs(&s.cp.client(), &id.parse().unwrap()).unwrap();
    let lines: Vec<_> = logs.iter().map(|l| (l.stream, l.text.as_str())).collect();
    assert_eq!(
        lines,
        [(LogStream::Stdout, "out"), (LogStream::Stderr, "err")]
    );
    assert_eq!(logs.iter().map(|l| l.seq).collect::<Vec<_>>(), [1, 2]);

    // Output into a closed pipe (`nuon … | head`) ends the command quietly.
    for args in [
        &["jobs", "get", &id, "--json"][..],
        &["jobs", "logs", &id],
        &["jobs", "list"],
    ] {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = nuon_tests::ours("nuon")
            .args(args)
            .env("NUON_API_URL", &s.cp.control_url)
            .env("NUON_TOKEN", &s.cp.admin_token)
            .stdin(std::process::Stdio::null())
            .stdout(writer)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "{args:?}: {stderr}");
        assert!(stderr.is_empty(), "{args:?}: {stderr}");
    }
}

/// Acceptance 2: a runner long-polls with a 50 s wait; a job queued while it
/// waits starts at once, so nothing in the path waits for a poll interval.
#[test]
fn a_job_queued_while_the_runner_waits_starts_at_once() {
    let s = setup("10s", "r1", 1, "5s");
    let client = s.cp.client();
    // Let the runner settle into its long poll first.
    wait_for("the runner to connect", LONG, || {
        let list = nuon_tests::rt().block_on(client.list_runners()).ok()?;
        let r1 = list.runners.iter().find(|r| r.name == "r1")?;
        r1.last_seen_at_ms.map(|_| ())
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    for _ in 0..5 {
        let job = queue_sh(&client, "r1", "true", 1);
        let done = wait_job(&client, &job.id, LONG).unwrap();
        assert_eq!(done.status, JobStatus::Succeeded);
        let waited = done.started_at_ms.unwrap() - done.created_at_ms;
        // The claim is held for up to 50 s; answering in under one second
        // shows the wake-up, not a timeout, delivered the job.
        assert!(waited < 1000, "job waited {waited} ms before it started");
    }
}

/// Acceptance 6: cancel ends a running job within the grace period, even one
/// that ignores SIGTERM, and leaves no process behind.
#[test]
fn cancel_stops_a_running_job_and_its_whole_process_group() {
    let s = setup("10s", "r1", 2, "1s");
    let dir = tempfile::tempdir().unwrap();
    let client = s.cp.client();
    let polite = queue_sh(
        &client,
        "r1",
        &format!("echo $$ > {}/a; exec sleep 600", dir.path().display()),
        1,
    );
    let stubborn = queue_sh(
        &client,
        "r1",
        &format!(
            "trap '' TERM; sleep 600 & echo $! > {}/b; wait",
            dir.path().display()
        ),
        1,
    );
    let a = read_pid(&dir.path().join("a")).unwrap();
    let b = read_pid(&dir.path().join("b")).unwrap();
    for job in [&polite, &stubborn] {
        let out = s.cp.nuon(&["jobs", "cancel", job.id.as_str()]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    for job in [&polite, &stubborn] {
        let done = wait_job(&client, &job.id, Duration::from_secs(20)).unwrap();
        assert_eq!(done.status, JobStatus::Cancelled, "{done:?}");
    }
    for pid in [a, b] {
        wait_for(
            "the job's processes to be gone",
            Duration::from_secs(5),
            || (!process_alive(pid)).then_some(()),
        )
        .unwrap();
    }
}

/// Acceptance 7: SIGTERM drains: no new claim, the running job finishes, exit 0.
#[test]
fn sigterm_drains_the_runner() {
    let mut s = setup("10s", "r1", 2, "5s");
    let client = s.cp.client();
    let dir = tempfile::tempdir().unwrap();
    let running = queue_sh(
        &client,
        "r1",
        &format!(
            "touch {}/started; sleep 2; echo finished",
            dir.path().display()
        ),
        1,
    );
    wait_for("the job to start", LONG, || {
        dir.path().join("started").exists().then_some(())
    })
    .unwrap();
    signal(s.runner.pid(), libc::SIGTERM);
    std::thread::sleep(Duration::from_millis(200));
    let later = queue_sh(&client, "r1", "echo should-not-run", 1);
    assert_eq!(
        s.runner.wait_exit(LONG).unwrap(),
        Some(0),
        "{}",
        s.runner.log_text()
    );
    let done = nuon_tests::rt()
        .block_on(client.get_job(&running.id))
        .unwrap();
    assert_eq!(done.status, JobStatus::Succeeded, "{done:?}");
    let logs = all_logs(&client, &running.id).unwrap();
    assert!(logs.iter().any(|l| l.text == "finished"));
    let later = nuon_tests::rt()
        .block_on(client.get_job(&later.id))
        .unwrap();
    assert_eq!(later.status, JobStatus::Queued);
}

/// Acceptance 8, as the issue "The destroy side and the CLI's contracts"
/// (point 3) changed it: one token, one live runner. A second process of a
/// runner is refused, naming the first; one started with `--replace` takes
/// the token over and the first is fenced off (refused, it stops); 500
/// short jobs then each run exactly once.
#[test]
fn one_token_one_live_runner_and_five_hundred_jobs_run_exactly_once() {
    let mut s = setup("10s", "r1", 4, "5s");
    let client = s.cp.client();
    let opts = |slots| RunnerOpts {
        token: &s.token,
        signing_key: &s.cp.signing_key,
        slots,
        grace: "5s",
        work_dir: None,
    };
    let holder = |pid: u32| {
        wait_for("the runner's session", LONG, || {
            let list = rt().block_on(client.list_runners()).ok()?;
            let r = list.runners.into_iter().find(|r| r.name == "r1")?;
            (r.session?.pid == pid).then_some(())
        })
    };
    holder(s.runner.pid()).unwrap();

    let mut second = Runner::start(&s.cp, opts(4)).unwrap();
    let code = second.wait_exit(LONG).unwrap();
    let log = second.log_text();
    assert_ne!(code, Some(0), "{log}");
    assert!(
        log.contains(&format!(
            "is already running as pid {} on host",
            s.runner.pid()
        )),
        "{log}"
    );
    assert!(log.contains("--replace"), "{log}");

    let third = Runner::start_with_args(&s.cp.runner_url, opts(4), &["--replace"]).unwrap();
    holder(third.pid()).unwrap();
    let code = s.runner.wait_exit(LONG).unwrap();
    let log = s.runner.log_text();
    assert_ne!(code, Some(0), "the first runner goes on: {log}");
    assert!(
        log.contains(&format!(
            "is already running as pid {} on host",
            third.pid()
        )),
        "{log}"
    );

    let dir = tempfile::tempdir().unwrap();
    let jobs: Vec<_> = (0..500)
        .map(|i| {
            queue_sh(
                &client,
                "r1",
                &format!("echo run >> {}/{i}", dir.path().display()),
                1,
            )
        })
        .collect();
    for job in &jobs {
        let done = wait_job(&client, &job.id, LONG).unwrap();
        assert_eq!(done.status, JobStatus::Succeeded, "{done:?}");
        assert_eq!(done.attempts, 1);
    }
    for i in 0..500 {
        let text = std::fs::read_to_string(dir.path().join(i.to_string())).unwrap();
        assert_eq!(text, "run\n", "job {i} ran {} times", text.lines().count());
    }
    drop(third);
}

/// Acceptance 12: the README's first command (`nuon dev`) runs the whole loop
/// on a fresh directory: control plane, runners, the example app deployed
/// with its progress live.
#[test]
fn nuon_dev_runs_the_demo_end_to_end() {
    if !nuon_tests::have_tool("terraform", "deploy the example app") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let app = nuon_tests::manifest_dir().join("../examples/apps/hello");
    let out = nuon_tests::ours("nuon")
        .args([
            "dev",
            "--once",
            "--listen",
            "127.0.0.1:0",
            "--runner-listen",
            "127.0.0.1:0",
        ])
        .arg("--app-dir")
        .arg(app)
        .current_dir(dir.path())
        .env_remove("NUON_TOKEN")
        .env_remove("NUON_API_URL")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains("apply database"), "{stdout}");
    assert!(stdout.contains("succeeded"), "{stdout}");
    assert!(stderr.contains("==> outputs"), "{stderr}");
    assert!(dir.path().join("nuon-data/control/admin-token").exists());
}
