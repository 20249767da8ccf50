//! Faults on purpose: kill -9 of a runner, kill -9 of the control plane, a
//! runner frozen past its lease.

use std::time::{Duration, Instant};

use nuon_core::JobStatus;
use nuon_tests::{
    Runner, RunnerOpts, all_logs, process_alive, read_pid, signal, wait_for, wait_job,
};

use crate::{LONG, queue_sh, setup};

/// Acceptance 3: kill -9 of the runner mid-job. The attempt is lost when its
/// lease expires, the job fails with "runner lost" (or is requeued when its
/// retry policy allows), lines shipped before the crash are kept, and no
/// process of the job survives the runner.
#[test]
fn a_runner_killed_mid_job_loses_the_attempt_and_leaves_no_process() {
    let mut s = setup("2s", "r1", 2, "5s");
    let client = s.cp.client();
    let dir = tempfile::tempdir().unwrap();
    let once = queue_sh(
        &client,
        "r1",
        &format!(
            "echo before; sleep 600 & echo $! > {}/once; wait",
            dir.path().display()
        ),
        1,
    );
    let retried = queue_sh(
        &client,
        "r1",
        &format!(
            "if [ -e {d}/second ]; then echo second-attempt; exit 0; fi; touch {d}/second; echo first-attempt; sleep 600 & echo $! > {d}/retried; wait",
            d = dir.path().display()
        ),
        2,
    );
    let pid_once = read_pid(&dir.path().join("once")).unwrap();
    let pid_retried = read_pid(&dir.path().join("retried")).unwrap();
    wait_for("the first lines to be shipped", LONG, || {
        let a = all_logs(&client, &once.id).ok()?;
        let b = all_logs(&client, &retried.id).ok()?;
        (!a.is_empty() && !b.is_empty()).then_some(())
    })
    .unwrap();
    s.runner.kill9();
    for pid in [pid_once, pid_retried] {
        wait_for(
            "the job's processes to die with the runner",
            Duration::from_secs(10),
            || (!process_alive(pid)).then_some(()),
        )
        .unwrap();
    }

    let lost = wait_job(&client, &once.id, LONG).unwrap();
    assert_eq!(lost.status, JobStatus::Failed);
    assert!(
        lost.reason.as_deref().unwrap_or("").contains("runner lost"),
        "{lost:?}"
    );
    let logs = all_logs(&client, &once.id).unwrap();
    assert_eq!(logs[0].text, "before");

    // The retryable job waits, queued, for the runner to come back.
    wait_for("the retryable job to be queued again", LONG, || {
        let j = nuon_tests::rt()
            .block_on(client.get_job(&retried.id))
            .ok()?;
        (j.status == JobStatus::Queued).then_some(())
    })
    .unwrap();
    // Another work dir is another session: it takes the token over from
    // the dead one, which the control plane saw moments ago.
    let _again = Runner::start_with_args(
        &s.cp.runner_url,
        RunnerOpts {
            token: &s.token,
            signing_key: &s.cp.signing_key,
            slots: 2,
            grace: "5s",
            work_dir: None,
        },
        &["--replace"],
    )
    .unwrap();
    let done = wait_job(&client, &retried.id, LONG).unwrap();
    assert_eq!(done.status, JobStatus::Succeeded, "{done:?}");
    assert_eq!(done.attempts, 2);
    let texts: Vec<_> = all_logs(&client, &retried.id)
        .unwrap()
        .into_iter()
        .map(|l| (l.attempt, l.text))
        .collect();
    assert_eq!(
        texts,
        [
            (1, "first-attempt".to_string()),
            (2, "second-attempt".to_string())
        ]
    );
}

/// Acceptance 4: kill -9 of the control plane mid-job and a restart on the
/// same data dir: the job goes on, every line arrives once and in order, the
/// result is recorded once, and the runner reconnects by itself.
#[test]
fn a_control_plane_killed_mid_job_loses_nothing() {
    let mut s = setup("10s", "r1", 2, "5s");
    let client = s.cp.client();
    let job = queue_sh(
        &client,
        "r1",
        "i=1; while [ $i -le 400 ]; do echo line $i; i=$((i+1)); sleep 0.01; done",
        1,
    );
    wait_for("some lines to arrive", LONG, || {
        (all_logs(&client, &job.id).ok()?.len() > 20).then_some(())
    })
    .unwrap();
    s.cp.kill9();
    std::thread::sleep(Duration::from_secs(1));
    s.cp.restart().unwrap();
    let done = wait_job(&client, &job.id, LONG).unwrap();
    assert_eq!(
        done.status,
        JobStatus::Succeeded,
        "{done:?}\n{}",
        s.runner.log_text()
    );
    assert_eq!(done.attempts, 1);
    let texts: Vec<_> = all_logs(&client, &job.id)
        .unwrap()
        .into_iter()
        .map(|l| l.text)
        .collect();
    let expected: Vec<_> = (1..=400).map(|i| format!("line {i}")).collect();
    assert_eq!(texts, expected);
}

/// Acceptance 5: a runner frozen past its lease cannot write into the job
/// once a newer attempt has it, and stops its stale work when it wakes.
#[test]
fn a_frozen_runner_is_fenced_off_and_stops_its_stale_job() {
    let s = setup("2s", "r1", 1, "1s");
    let client = s.cp.client();
    let dir = tempfile::tempdir().unwrap();
    let job = queue_sh(
        &client,
        "r1",
        &format!(
            "if [ -e {d}/first ]; then echo attempt-two; exit 0; fi; echo $$ > {d}/first; \
             i=0; while true; do echo tick $i; i=$((i+1)); sleep 0.1; done",
            d = dir.path().display()
        ),
        2,
    );
    let stale_pid = read_pid(&dir.path().join("first")).unwrap();
    wait_for("ticks to arrive", LONG, || {
        (all_logs(&client, &job.id).ok()?.len() >= 3).then_some(())
    })
    .unwrap();
    signal(s.runner.pid(), libc::SIGSTOP);
    wait_for(
        "the lease to expire and the job to be queued again",
        LONG,
        || {
            let j = nuon_tests::rt().block_on(client.get_job(&job.id)).ok()?;
            (j.status == JobStatus::Queued).then_some(())
        },
    )
    .unwrap();
    // A replacement process of the same runner takes attempt 2.
    let _replacement = Runner::start_with_args(
        &s.cp.runner_url,
        RunnerOpts {
            token: &s.token,
            signing_key: &s.cp.signing_key,
            slots: 1,
            grace: "1s",
            work_dir: None,
        },
        &["--replace"],
    )
    .unwrap();
    let done = wait_job(&client, &job.id, LONG).unwrap();
    assert_eq!(done.status, JobStatus::Succeeded);
    assert_eq!(done.attempts, 2);
    let woke = Instant::now();
    let woke_ms = nuon_core::now_ms();
    signal(s.runner.pid(), libc::SIGCONT);
    wait_for(
        "the stale job to be stopped",
        Duration::from_secs(15),
        || (!process_alive(stale_pid)).then_some(()),
    )
    .unwrap();
    // Give the woken runner time to try shipping what it buffered while frozen.
    std::thread::sleep(Duration::from_secs(1).saturating_sub(woke.elapsed()));
    let logs = all_logs(&client, &job.id).unwrap();
    let late: Vec<_> = logs
        .iter()
        .filter(|l| l.attempt == 1 && l.ts_ms >= woke_ms)
        .collect();
    assert!(
        late.is_empty(),
        "stale attempt wrote after waking: {late:?}"
    );
    let job = nuon_tests::rt().block_on(client.get_job(&job.id)).unwrap();
    assert_eq!(
        job.status,
        JobStatus::Succeeded,
        "the stale runner overwrote the result"
    );
    assert_eq!(logs.last().map(|l| l.text.as_str()), Some("attempt-two"));
}
