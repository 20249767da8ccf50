//! Logs and completions get through outages and restarts; drain; revoked tokens.

use std::time::Instant;

use nuon_core::wire::{LeaseState, LogStream};
use nuon_core::{JobId, JobResult, Outcome};
use nuon_runner_lib::Error;

use crate::fake::{Harness, Key, alive, eventually, secs, spool_ended, spool_file, within};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_loses_no_line_and_duplicates_none() {
    let h = Harness::new();
    let runner = h.start(h.config());
    let go = h.dir.path().join("go");
    let key = h.enqueue_spec(&h.sh(&format!(
        "i=1; while [ $i -le 3000 ]; do echo \"line $i\"; i=$((i+1)); done; \
         while [ ! -e '{go}' ]; do sleep 0.05; done; \
         while [ $i -le 6000 ]; do echo \"line $i\"; i=$((i+1)); done",
        go = go.display()
    )));
    h.fake
        .wait_for("first half shipped", secs(30), |s| {
            (s.logs.get(&key).map_or(0, Vec::len) >= 3000).then_some(())
        })
        .await;
    // The control plane goes away; the job goes on and ends meanwhile.
    h.end_while_away(&go, &key).await;
    h.fake
        .wait_for("retries during the outage", secs(30), |s| {
            (s.failed_calls >= 5).then_some(())
        })
        .await;
    // Back, acknowledging less than it is sent once.
    h.fake.with(|s| {
        s.unavailable = false;
        s.short_ack_once = true;
    });
    let done = h.fake.completion(&key.0, secs(30)).await;
    assert_eq!(done.result.outcome, Outcome::Succeeded, "{done:?}");
    assert_eq!(done.log_lines, 6000);
    h.fake.with(|s| {
        let expected: Vec<String> = (1..=6000).map(|i| format!("line {i}")).collect();
        assert_eq!(s.texts(&key, LogStream::Stdout), expected);
        assert_eq!(s.logs[&key].len(), 6000);
        assert!(!s.short_ack_once, "no batch was acknowledged short");
        // Batches follow each other, a resend starting right after the ack.
        let mut next = 1;
        for (first, n) in &s.batches {
            assert!(
                *first <= next,
                "gap before batch at {first} (expected {next})"
            );
            next = next.max(first + *n as u64);
        }
    });
    runner.stop(secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_last_lines_ride_in_the_completion_or_go_as_a_batch_where_they_are_not_taken() {
    for ignores in [false, true] {
        let h = Harness::new();
        h.fake.with(|s| s.ignores_completion_logs = ignores);
        let runner = h.start(h.config());
        let go = h.dir.path().join("go");
        let key = h.enqueue_spec(&h.sh(&format!(
            "echo a; while [ ! -e '{go}' ]; do sleep 0.05; done; echo b; echo c",
            go = go.display()
        )));
        h.fake
            .wait_for("the job to run", secs(30), |s| {
                (s.logs.get(&key).map_or(0, Vec::len) == 1).then_some(())
            })
            .await;
        // The control plane is away while the job prints its last lines
        // and ends: once back, those are left to send.
        h.end_while_away(&go, &key).await;
        h.fake.with(|s| s.unavailable = false);
        let done = h.fake.completion(&key.0, secs(30)).await;
        assert_eq!(
            (done.result.outcome, done.log_lines),
            (Outcome::Succeeded, 3)
        );
        h.fake.with(|s| {
            assert_eq!(s.texts(&key, LogStream::Stdout), ["a", "b", "c"]);
            if ignores {
                // Sent with the completion, not taken: then as a batch.
                assert!(s.carried.is_empty());
                assert_eq!(s.batches, [(1, 1), (2, 2)]);
            } else {
                assert_eq!(s.carried, [(2, 2)], "one request: the completion");
                assert_eq!(s.batches, [(1, 1)]);
            }
        });
        runner.stop(secs(30)).await.unwrap();
    }
}

/// The spool directory of an attempt in the layout of earlier runners.
fn old_spool_dir(work: &std::path::Path, key: &Key) -> std::path::PathBuf {
    work.join("spool").join(format!("{}-{}", key.0, key.1))
}

/// Writes a spool directory the way a runner of the earlier layout that
/// died would leave it (the runner that starts moves it to a file).
fn leftover(work: &std::path::Path, key: &Key, lines: &[&str], result: Option<(u64, JobResult)>) {
    let dir = old_spool_dir(work, key);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("meta.json"),
        serde_json::json!({"job_id": key.0, "attempt": key.1}).to_string(),
    )
    .unwrap();
    let mut text = String::new();
    for l in lines {
        text.push_str(&format!("o1700000000000 {l}\n"));
    }
    std::fs::write(dir.join("lines"), text).unwrap();
    if let Some((log_lines, result)) = result {
        std::fs::write(
            dir.join("result.json"),
            serde_json::json!({"log_lines": log_lines, "result": result}).to_string(),
        )
        .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_completes_what_the_previous_runner_left() {
    let h = Harness::new();
    let work = h.work_dir();
    let unfinished: Key = (JobId::generate(), 1);
    let finished: Key = (JobId::generate(), 2);
    let stale: Key = (JobId::generate(), 1);
    // Died mid-job, with a torn last record.
    leftover(&work, &unfinished, &["one", "two"], None);
    let lines = old_spool_dir(&work, &unfinished).join("lines");
    let mut torn = std::fs::read(&lines).unwrap();
    torn.extend_from_slice(b"o17000000 tor");
    std::fs::write(&lines, torn).unwrap();
    // Ended, but not delivered.
    let ok = JobResult {
        outcome: Outcome::Succeeded,
        exit_code: Some(0),
        reason: None,
        outputs: serde_json::json!({"k": "v"}),
    };
    leftover(&work, &finished, &["done"], Some((1, ok.clone())));
    // Ended, but the control plane gave the job to a newer attempt since.
    leftover(&work, &stale, &["old"], Some((1, JobResult::failed("x"))));
    h.fake.with(|s| {
        s.leases.insert(unfinished.clone(), LeaseState::Active);
        s.leases.insert(finished.clone(), LeaseState::Active);
    });

    let runner = h.start(h.config());
    let done = h.fake.completion(&unfinished.0, secs(30)).await;
    assert_eq!(done.result.outcome, Outcome::Failed);
    assert_eq!(
        done.result.reason.as_deref(),
        Some("runner restarted while the job was running")
    );
    assert_eq!(done.log_lines, 3);
    h.fake.with(|s| {
        assert_eq!(s.texts(&unfinished, LogStream::Stdout), ["one", "two"]);
        let system = s.texts(&unfinished, LogStream::System);
        assert!(
            system[0].starts_with("runner restarted while the job was running"),
            "{system:?}"
        );
    });
    let done = h.fake.completion(&finished.0, secs(30)).await;
    assert_eq!(done.attempt, 2);
    assert_eq!(done.result, ok);
    assert_eq!(done.log_lines, 1);
    for key in [&unfinished, &finished, &stale] {
        eventually("spool removed", secs(10), || {
            !spool_file(&work, key).exists() && !old_spool_dir(&work, key).exists()
        })
        .await;
    }
    runner.stop(secs(30)).await.unwrap();
    assert!(h.fake.with(|s| !s.completions.contains_key(&stale.0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_waits_for_running_jobs_and_claims_nothing_more() {
    let h = Harness::new();
    let mut runner = h.start(h.config());
    let key = h.enqueue_spec(&h.sh("echo started; sleep 1; echo done"));
    h.fake.line(&key, secs(30), |l| l.text == "started").await;
    runner.shutdown();
    // The runner gives up its held claim, then more work is offered.
    h.fake
        .wait_for("the held claim dropped", secs(10), |s| {
            (s.claims_abandoned == 1).then_some(())
        })
        .await;
    let claims = h.fake.with(|s| s.claims.len());
    let later = h.enqueue_spec(&h.sh("echo later"));
    runner.join(secs(30)).await.unwrap();
    h.fake.with(|s| {
        let done = &s.completions[&key.0];
        assert_eq!(done.result.outcome, Outcome::Succeeded);
        assert_eq!(s.texts(&key, LogStream::Stdout), ["started", "done"]);
        assert!(!s.completions.contains_key(&later.0));
        assert_eq!(
            s.queue.len(),
            1,
            "the job queued after the shutdown was claimed"
        );
        assert_eq!(s.claims.len(), claims);
    });
    assert!(!spool_file(&h.work_dir(), &key).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drain_timeout_stops_jobs_and_still_delivers_them() {
    let h = Harness::new();
    let mut config = h.config();
    config.drain_timeout = std::time::Duration::from_millis(300);
    let runner = h.start(config);
    let key = h.enqueue_spec(&h.sh("echo $$; exec sleep 1000"));
    let pid: u32 = h
        .fake
        .line(&key, secs(30), |l| l.stream == LogStream::Stdout)
        .await
        .parse()
        .unwrap();
    let start = Instant::now();
    runner.stop(secs(30)).await.unwrap();
    assert!(start.elapsed() < secs(10), "{:?}", start.elapsed());
    assert!(!alive(pid));
    let done = h.fake.with(|s| s.completions[&key.0].clone());
    assert_eq!(done.result.outcome, Outcome::Failed);
    assert!(done.result.reason.unwrap().contains("runner shut down"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_revoked_token_stops_the_runner_with_an_error() {
    let h = Harness::new();
    let runner = h.start(h.config());
    let key = h.enqueue_spec(&h.sh("echo $$; exec sleep 1000"));
    let pid: u32 = h
        .fake
        .line(&key, secs(30), |l| l.stream == LogStream::Stdout)
        .await
        .parse()
        .unwrap();
    h.fake.with(|s| s.unauthorized = true);
    let err = within("runner to stop", secs(30), runner.join(secs(30)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Unauthorized(_)), "{err}");
    assert!(err.to_string().contains("revoked"), "{err}");
    eventually("job processes gone", secs(5), || !alive(pid)).await;
    // The attempt stays in the spool for a later start.
    assert!(spool_ended(&h.work_dir(), &key));
}
