//! Dispatch latency on the real binaries: a job queued, the time its
//! process starts (it reads the clock as its first act), over loopback or
//! through a link that delays (`nuon_tests::Link`).

use std::time::Duration;

use anyhow::{Context, Result};
use nuon_client::ControlClient;
use nuon_core::JobId;
use nuon_core::wire::CreateJob;
use nuon_tests::{ControlPlane, Runner, RunnerOpts, all_logs, rt, wait_job};

/// The `p` quantile (0 to 1) of `sorted`, nearest rank.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// A runner of `slots` for `token` on `cp`, over loopback.
pub fn runner(cp: &ControlPlane, token: &str, slots: u32) -> Result<Runner> {
    runner_at(&cp.runner_url, cp, token, slots)
}

/// [`runner`] reaching the Runner API at `api` (a link's end).
pub fn runner_at(api: &str, cp: &ControlPlane, token: &str, slots: u32) -> Result<Runner> {
    Runner::start_with_api(
        api,
        RunnerOpts {
            token,
            signing_key: &cp.signing_key,
            slots,
            grace: "5s",
            work_dir: None,
        },
    )
}

/// Queues `command ARGS` as an `exec` job on `runner`.
pub fn queue(client: &ControlClient, runner: &str, command: &str, args: &[&str]) -> Result<JobId> {
    let job = rt().block_on(client.create_job(&CreateJob {
        runner: runner.into(),
        kind: "exec".into(),
        payload: serde_json::json!({"command": command, "args": args}),
        timeout_secs: Some(600),
        max_attempts: Some(1),
        sandbox: None,
    }))?;
    Ok(job.id)
}

/// Job queued (the client's send time) → job process started (the time the
/// process itself reads from the clock as its first act).
pub fn dispatch(runners: usize) -> Result<(f64, f64, f64)> {
    let cp = ControlPlane::start("60s")?;
    let client = cp.client();
    let mut procs = Vec::new();
    for i in 0..runners {
        let token = cp.create_runner(&format!("r{i}"))?;
        procs.push(runner(&cp, &token, 1)?);
    }
    connected(&client)?;
    std::thread::sleep(Duration::from_millis(500));
    latencies(&client, runners)
}

/// [`dispatch`] to one runner whose link to the Runner API has a round
/// trip of `rtt` (a delaying proxy, `nuon_tests::Link`): the claim's
/// answer takes half of it to reach the runner.
pub fn dispatch_through(rtt: Duration) -> Result<(f64, f64, f64)> {
    let cp = ControlPlane::start("60s")?;
    let client = cp.client();
    let link = nuon_tests::Link::bind(std::net::Ipv4Addr::LOCALHOST)?;
    link.to(&cp.runner_url)?;
    link.latency(rtt);
    let token = cp.create_runner("r0")?;
    let _runner = runner_at(&link.url(), &cp, &token, 1)?;
    connected(&client)?;
    std::thread::sleep(Duration::from_secs(2));
    latencies(&client, 1)
}

/// 200 `date +%s%N` jobs in sequence over runners `r0..rN`: queued (the
/// client's send time) → process started, p50, p99 and max in ms.
pub fn latencies(client: &ControlClient, runners: usize) -> Result<(f64, f64, f64)> {
    let mut lat = Vec::new();
    for i in 0..200 {
        let target = format!("r{}", i % runners);
        let sent_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos() as f64;
        let id = queue(client, &target, "date", &["+%s%N"])?;
        wait_job(client, &id, Duration::from_secs(30))?;
        let logs = all_logs(client, &id)?;
        let started_ns: f64 = logs.first().context("no output")?.text.trim().parse()?;
        lat.push((started_ns - sent_ns) / 1e6);
    }
    lat.sort_by(|a, b| a.total_cmp(b));
    Ok((
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat[lat.len() - 1],
    ))
}

/// Waits until every runner started (not the org's build runner, which no
/// benchmark starts) has called the control plane.
pub fn connected(client: &ControlClient) -> Result<()> {
    nuon_tests::wait_for("runners to connect", Duration::from_secs(60), || {
        let list = rt().block_on(client.list_runners()).ok()?;
        list.runners
            .iter()
            .filter(|r| r.role == nuon_core::wire::RunnerRole::Generic)
            .all(|r| r.last_seen_at_ms.is_some())
            .then_some(())
    })?;
    Ok(())
}
