//! Running jobs: output, exit codes, environment, cancel, timeout, stale leases.

use std::collections::BTreeMap;
use std::time::Instant;

use nuon_core::Outcome;
use nuon_core::wire::{LeaseState, LogStream};

use crate::fake::{Harness, alive, eventually, secs, spool_file};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_arrive_in_order_with_streams_and_exit_code() {
    let h = Harness::new();
    let runner = h.start(h.config());
    let key = h.enqueue_spec(&h.sh(
        "i=1; while [ $i -le 20000 ]; do echo \"line $i\"; i=$((i+1)); done; \
         echo 'to stderr' >&2; printf 'no newline'; exit 3",
    ));
    let done = h.fake.completion(&key.0, secs(60)).await;
    assert_eq!(done.result.outcome, Outcome::Failed);
    assert_eq!(done.result.exit_code, Some(3));
    assert_eq!(done.result.reason.as_deref(), Some("exit code 3"));
    h.fake.with(|s| {
        let mut expected: Vec<String> = (1..=20000).map(|i| format!("line {i}")).collect();
        expected.push("no newline".into());
        assert_eq!(s.texts(&key, LogStream::Stdout), expected);
        assert_eq!(s.texts(&key, LogStream::Stderr), ["to stderr"]);
        assert_eq!(done.log_lines, s.logs[&key].len() as u64);
        assert!(
            s.batches
                .iter()
                .all(|(_, n)| *n <= nuon_core::wire::MAX_LOG_LINES_PER_BATCH),
            "{:?}",
            s.batches
        );
        assert!(
            s.claims
                .iter()
                .all(|c| c.kinds == ["exec"] && c.wait_ms == 5000)
        );
    });
    let work = h.work_dir();
    eventually("spool file removed", secs(10), || {
        !spool_file(&work, &key).exists()
    })
    .await;
    assert_eq!(std::fs::read_dir(work.join("jobs")).unwrap().count(), 0);
    runner.stop(secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn environment_and_directory_are_the_configured_ones() {
    let h = Harness::new();
    let mut config = h.config();
    config.env = BTreeMap::from([
        ("PATH".into(), std::env::var("PATH").unwrap()),
        ("BASE".into(), "base".into()),
    ]);
    let runner = h.start(config);
    let spec = h.spec(
        serde_json::json!({
            "command": "sh",
            "args": ["-c", "echo \"$BASE $JOB $NUON_JOB_ATTEMPT\"; pwd; echo \"home=$HOME\""],
            "env": {"JOB": "job"},
            "dir": "sub/dir",
        }),
        60,
    );
    let key = h.enqueue_spec(&spec);
    let done = h.fake.completion(&key.0, secs(30)).await;
    assert_eq!(done.result.outcome, Outcome::Succeeded, "{done:?}");
    assert_eq!(done.result.exit_code, Some(0));
    let out = h.fake.with(|s| s.texts(&key, LogStream::Stdout));
    assert_eq!(out[0], "base job 1");
    assert!(out[1].ends_with("/sub/dir"), "{out:?}");
    assert!(out[1].contains(&format!("{}-1-", key.0)), "{out:?}");
    // Only the configured environment: nothing of the runner's own.
    assert_eq!(out[2], "home=");
    runner.stop(secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_command_fails_with_the_reason_in_the_log() {
    let h = Harness::new();
    let runner = h.start(h.config());
    let key = h.enqueue_spec(&h.spec(serde_json::json!({"command": "no-such-command-nuon"}), 60));
    let done = h.fake.completion(&key.0, secs(30)).await;
    assert_eq!(done.result.outcome, Outcome::Failed);
    let reason = done.result.reason.unwrap();
    assert!(
        reason
            .starts_with("exec: command \"no-such-command-nuon\" not found on the runner's PATH ("),
        "{reason}"
    );
    assert_eq!(h.fake.with(|s| s.texts(&key, LogStream::System)), [reason]);
    runner.stop(secs(30)).await.unwrap();
}

/// Reads the two pids a `echo $$; sleep 1000 & echo $!` job prints.
async fn pids(h: &Harness, key: &crate::fake::Key) -> (u32, u32) {
    h.fake
        .wait_for("two pids in the log", secs(30), |s| {
            let out = s.texts(key, LogStream::Stdout);
            (out.len() >= 2).then(|| (out[0].parse().unwrap(), out[1].parse().unwrap()))
        })
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_stops_the_whole_process_group() {
    let h = Harness::new();
    let runner = h.start(h.config());
    let key = h.enqueue_spec(&h.sh("echo $$; sleep 1000 & echo $!; wait"));
    let (main, background) = pids(&h, &key).await;
    assert!(alive(main) && alive(background));
    let asked = Instant::now();
    h.fake
        .with(|s| s.leases.insert(key.clone(), LeaseState::Cancel));
    let done = h.fake.completion(&key.0, secs(10)).await;
    assert_eq!(done.result.outcome, Outcome::Cancelled, "{done:?}");
    assert!(
        asked.elapsed() < secs(5),
        "cancel took {:?}",
        asked.elapsed()
    );
    eventually("job processes gone", secs(5), || {
        !alive(main) && !alive(background)
    })
    .await;
    let system = h.fake.with(|s| s.texts(&key, LogStream::System));
    assert!(
        system[0].starts_with("job cancelled: sending SIGTERM"),
        "{system:?}"
    );
    runner.stop(secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_escalates_to_sigkill() {
    let h = Harness::new();
    let runner = h.start(h.config());
    // The shell and its child ignore SIGTERM: only SIGKILL ends them.
    let spec = h.spec(
        serde_json::json!({"command": "sh", "args": ["-c", "trap '' TERM; echo $$; sleep 1000 & echo $!; wait"]}),
        1,
    );
    let started = Instant::now();
    let key = h.enqueue_spec(&spec);
    let (main, background) = pids(&h, &key).await;
    let done = h.fake.completion(&key.0, secs(20)).await;
    assert_eq!(done.result.outcome, Outcome::TimedOut, "{done:?}");
    // One second of timeout, one of grace.
    assert!(started.elapsed() >= secs(2), "{:?}", started.elapsed());
    eventually("job processes gone", secs(5), || {
        !alive(main) && !alive(background)
    })
    .await;
    let system = h.fake.with(|s| s.texts(&key, LogStream::System));
    assert!(
        system[0].starts_with("job timed out after 1s"),
        "{system:?}"
    );
    assert!(system[1].contains("sending SIGKILL"), "{system:?}");
    runner.stop(secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_processes_die_with_the_main_process() {
    let h = Harness::new();
    let runner = h.start(h.config());
    // The background sleep keeps stdout open; the job still ends.
    let key = h.enqueue_spec(&h.sh("sleep 1000 & echo $!"));
    let done = h.fake.completion(&key.0, secs(20)).await;
    assert_eq!(done.result.outcome, Outcome::Succeeded, "{done:?}");
    let pid: u32 = h
        .fake
        .with(|s| s.texts(&key, LogStream::Stdout)[0].parse().unwrap());
    eventually("background process gone", secs(5), || !alive(pid)).await;
    runner.stop(secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_lease_kills_the_job_and_never_completes_it() {
    let h = Harness::new();
    let runner = h.start(h.config());
    let key = h.enqueue_spec(&h.sh("echo $$; sleep 1000 & echo $!; wait"));
    let (main, background) = pids(&h, &key).await;
    h.fake
        .with(|s| s.leases.insert(key.clone(), LeaseState::Stale));
    eventually("job processes gone", secs(10), || {
        !alive(main) && !alive(background)
    })
    .await;
    let work = h.work_dir();
    eventually("spool dropped", secs(10), || {
        !spool_file(&work, &key).exists()
    })
    .await;
    // Nothing can complete it any more: its spool is gone. Drain to be sure.
    runner.stop(secs(30)).await.unwrap();
    assert!(h.fake.with(|s| s.completions.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slots_free_up_and_the_next_claim_goes_out_at_once() {
    let h = Harness::new();
    let mut config = h.config();
    config.slots = 1;
    let runner = h.start(config);
    let keys: Vec<_> = (0..5)
        .map(|i| h.enqueue_spec(&h.sh(&format!("echo {i}"))))
        .collect();
    let started = Instant::now();
    for key in &keys {
        let done = h.fake.completion(&key.0, secs(30)).await;
        assert_eq!(done.result.outcome, Outcome::Succeeded);
    }
    // No poll interval anywhere: five jobs one after the other are quick.
    assert!(started.elapsed() < secs(5), "{:?}", started.elapsed());
    h.fake
        .with(|s| assert!(s.claims.iter().all(|c| c.slots == 1)));
    runner.stop(secs(30)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_work_directory_serves_one_runner() {
    let h = Harness::new();
    let first = h.start(h.config());
    h.fake
        .wait_for("first claim", secs(10), |s| {
            (!s.claims.is_empty()).then_some(())
        })
        .await;
    let err = nuon_runner_lib::Runner::new(h.config())
        .run(std::future::pending())
        .await
        .unwrap_err();
    assert!(
        matches!(err, nuon_runner_lib::Error::WorkDirInUse { .. }),
        "{err}"
    );
    first.stop(secs(30)).await.unwrap();
}

/// A plugin that reads a process's stdout back (as the Terraform plugin
/// reads `terraform output -json`): stdout goes to a file, not the log.
struct CapturePlugin;

#[async_trait::async_trait]
impl nuon_core::Plugin for CapturePlugin {
    fn kind(&self) -> &'static str {
        "capture"
    }

    fn validate(&self, _: &nuon_core::JobSpec) -> Result<(), nuon_core::PluginError> {
        Ok(())
    }

    async fn run(
        &self,
        _: &nuon_core::JobSpec,
        host: &mut dyn nuon_core::JobHost,
    ) -> Result<nuon_core::JobResult, nuon_core::PluginError> {
        let mut p = nuon_core::ProcessSpec::new("sh");
        p.args = vec![
            "-c".into(),
            "echo '{\"answer\": 42}'; echo 'to the log' >&2".into(),
        ];
        p.stdout_file = Some("out.json".into());
        host.run_process(p).await?;
        let text = std::fs::read_to_string(host.work_dir().join("out.json"))
            .map_err(|e| nuon_core::PluginError::Missing(e.to_string()))?;
        let outputs: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| nuon_core::PluginError::Invalid(e.to_string()))?;
        Ok(nuon_core::JobResult {
            outcome: Outcome::Succeeded,
            exit_code: Some(0),
            reason: None,
            outputs,
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_can_read_a_process_stdout_back_instead_of_logging_it() {
    let h = Harness::new();
    let mut config = h.config();
    config.plugins.register(std::sync::Arc::new(CapturePlugin));
    let runner = h.start(config);
    let mut spec = h.sh("unused");
    spec.kind = "capture".into();
    let key = h.enqueue_spec(&spec);
    let done = h.fake.completion(&key.0, secs(30)).await;
    assert_eq!(done.result.outcome, Outcome::Succeeded, "{:?}", done.result);
    assert_eq!(done.result.outputs, serde_json::json!({"answer": 42}));
    h.fake.with(|s| {
        assert!(s.texts(&key, LogStream::Stdout).is_empty());
        assert_eq!(s.texts(&key, LogStream::Stderr), ["to the log"]);
    });
    runner.stop(secs(30)).await.unwrap();
}
