//! Drift checks at fleet scale: N installs of an app of five Terraform
//! components, each on a one-minute `drift_schedule`, against one real
//! `nuon-ctl` on SQLite. Each install's runner is a simulated one (a real
//! Runner API client with its own token) that answers sync and plan jobs
//! at once with a plan of no changes, and the org's build runner is
//! simulated the same way; only Terraform is left out, so what is measured
//! is the control plane: its CPU while the schedule fires, and the
//! schedule's slip (due minute → drift workflow created → ended).
//!
//! ```text
//! cargo bench -p nuon-benches --bench drift -- [--installs N] [--minutes M]
//! ```
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nuon_client::{ClientConfig, RunnerClient};
use nuon_core::wire::{
    ClaimRequest, ClaimedJob, Completion, CreateInstall, HeartbeatRequest, LeaseRef,
};
use nuon_core::workflow::WorkflowKind;
use nuon_core::{JobResult, JobSpec, Outcome, Transport, TransportError, now_ms};
use nuon_tests::ControlPlane;
use serde_json::json;
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

const COMPONENTS: usize = 5;

/// What a simulated runner answers a job with.
fn outputs(job: &ClaimedJob) -> serde_json::Value {
    let digest = format!("sha256:{}", "ab".repeat(32));
    let Ok(spec) = serde_json::from_str::<JobSpec>(&job.spec) else {
        return serde_json::Value::Null;
    };
    match spec.kind.as_str() {
        "build" => {
            json!({"artifact": {"repo": format!("drifty/{}", job.job_id), "digest": digest}})
        }
        "sync" => json!({"digest": digest, "artifact": spec.payload["artifact"], "copied": 0}),
        "terraform" => json!({
            "plan": {"repo": "plans", "digest": digest, "size": 1},
            "changes": {"add": 0, "change": 0, "destroy": 0},
        }),
        _ => serde_json::Value::Null,
    }
}

/// A simulated runner: claims, confirms with a heartbeat, completes at once.
async fn sim(client: RunnerClient, kinds: Vec<String>, done: Arc<AtomicU64>) {
    let client = Arc::new(client);
    let req = ClaimRequest {
        kinds,
        slots: 4,
        wait_ms: 50_000,
        signing_key: None,
        telemetry: None,
        settings_version: None,
    };
    loop {
        let jobs = match client.claim(&req).await {
            Ok(r) => r.jobs,
            Err(TransportError::Unauthorized(e)) => {
                eprintln!("simulated runner refused: {e}");
                return;
            }
            Err(_) => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let mut running = JoinSet::new();
        for job in jobs {
            let (client, done) = (client.clone(), done.clone());
            running.spawn(async move {
                let beat = HeartbeatRequest {
                    leases: vec![LeaseRef {
                        job_id: job.job_id.clone(),
                        attempt: job.attempt,
                    }],
                    wait_ms: 0,
                    telemetry: None,
                };
                if client.heartbeat(&beat).await.is_err() {
                    return;
                }
                let result = Completion {
                    attempt: job.attempt,
                    logs: None,
                    log_lines: 0,
                    result: JobResult {
                        outcome: Outcome::Succeeded,
                        exit_code: Some(0),
                        reason: None,
                        outputs: outputs(&job),
                    },
                };
                for _ in 0..5 {
                    if client.complete(&job.job_id, &result).await.is_ok() {
                        done.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            });
        }
        running.join_all().await;
    }
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    t(11) + t(12)
}

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn main() -> Result<()> {
    let installs = arg("--installs", 1000) as usize;
    let minutes = arg("--minutes", 3);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let cp = ControlPlane::start("60s")?;
    let dir = tempfile::tempdir()?;
    let app = dir.path().join("app");
    std::fs::create_dir_all(app.join("components"))?;
    std::fs::create_dir_all(app.join("tf"))?;
    std::fs::write(app.join("metadata.toml"), "version = \"v2\"\n")?;
    std::fs::write(
        app.join("tf/main.tf"),
        "resource \"terraform_data\" \"x\" {\n  input = \"up\"\n}\n",
    )?;
    for c in 0..COMPONENTS {
        std::fs::write(
            app.join(format!("components/c{c}.toml")),
            format!(
                "name = \"c{c}\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"tf\"\ndrift_schedule = \"* * * * *\"\n"
            ),
        )?;
    }
    let ok = |out: std::process::Output| -> Result<String> {
        if !out.status.success() {
            bail!("{}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    ok(cp.nuon(&["apps", "create", "drifty"]))?;
    ok(cp.nuon(&[
        "apps",
        "sync",
        app.to_str().context("utf-8 path")?,
        "--app",
        "drifty",
    ]))?;
    let done = Arc::new(AtomicU64::new(0));
    let mut sims = JoinSet::new();
    let _guard = rt.enter();
    let http = RunnerClient::http_client(&ClientConfig::new(&cp.runner_url, "x")?)?;
    let mut runner = |token: &str, kinds: &[&str]| -> Result<()> {
        let mut config = ClientConfig::new(&cp.runner_url, token)?;
        config.request_timeout = Duration::from_secs(70);
        let client = RunnerClient::with_http_client(config, http.clone());
        sims.spawn(sim(
            client,
            kinds.iter().map(|k| k.to_string()).collect(),
            done.clone(),
        ));
        Ok(())
    };
    let build_token = std::fs::read_to_string(cp.data_dir.join("build-runner-token"))?;
    runner(build_token.trim(), &["build"])?;
    ok(cp.nuon(&["builds", "create", "--app", "drifty", "--wait"]))?;

    let control = cp.client();
    let t = Instant::now();
    let tokens: Vec<String> = rt.block_on(async {
        let sem = Arc::new(Semaphore::new(32));
        let mut set = JoinSet::new();
        for i in 0..installs {
            let (control, sem) = (control.clone(), sem.clone());
            set.spawn(async move {
                let _p = sem.acquire_owned().await?;
                let created = control
                    .create_install(&CreateInstall {
                        app: "drifty".into(),
                        name: format!("i{i}"),
                        inputs: Default::default(),
                        secrets: Default::default(),
                        approval: None,
                        labels: Default::default(),
                        components: Default::default(),
                        overrides: Default::default(),
                    })
                    .await?;
                anyhow::Ok(created.runner_token)
            });
        }
        let mut out = Vec::new();
        while let Some(r) = set.join_next().await {
            out.push(r??);
        }
        anyhow::Ok(out)
    })?;
    let created = t.elapsed();
    for token in &tokens {
        runner(token, &["sync", "terraform"])?;
    }
    println!(
        "\n## Drift checks at scale: {installs} installs × {COMPONENTS} components, each on a 1-minute `drift_schedule`\n"
    );
    println!("| what | result |\n|---|---|");
    println!(
        "| create {installs} installs over the Control API (32 at a time) | {:.1} s |",
        created.as_secs_f64()
    );
    // Drift is checked on provisioned installs: provision them all.
    let t = Instant::now();
    rt.block_on(async {
        let sem = Arc::new(Semaphore::new(32));
        let mut set = JoinSet::new();
        for i in 0..installs {
            let (control, sem) = (control.clone(), sem.clone());
            set.spawn(async move {
                let _p = sem.acquire_owned().await?;
                control
                    .create_workflow(&format!("i{i}"), WorkflowKind::Provision, None)
                    .await?;
                anyhow::Ok(())
            });
        }
        while let Some(r) = set.join_next().await {
            r??;
        }
        loop {
            let list = control.list_installs().await?;
            let active = list.installs.iter().filter(|i| i.state == "active").count();
            if active == installs {
                break;
            }
            if t.elapsed() > Duration::from_secs(1800) {
                bail!("only {active} of {installs} installs provisioned after 30 min");
            }
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        anyhow::Ok(())
    })?;
    println!(
        "| provision them (5 syncs, plans and applies each: {} jobs) | {:.1} s |",
        installs * COMPONENTS * 3,
        t.elapsed().as_secs_f64()
    );
    // From the next minute on, for `minutes` minutes.
    let next = (now_ms() / 60_000 + 1) * 60_000;
    std::thread::sleep(Duration::from_millis((next - now_ms()).max(0) as u64));
    let from = now_ms();
    let ticks0 = cpu_ticks(cp.pid());
    let done0 = done.load(Ordering::Relaxed);
    std::thread::sleep(Duration::from_secs(60 * minutes));
    let ticks1 = cpu_ticks(cp.pid());
    let done1 = done.load(Ordering::Relaxed);
    let until = now_ms();
    let cpu = (ticks1 - ticks0) as f64 / 100.0 / ((until - from) as f64 / 1000.0) * 100.0;
    // Every drift workflow of the window: created how long after its
    // minute, and ended how long after.
    let workflows = rt.block_on(async {
        let sem = Arc::new(Semaphore::new(16));
        let mut set = JoinSet::new();
        for i in 0..installs {
            let (control, sem) = (control.clone(), sem.clone());
            set.spawn(async move {
                let _p = sem.acquire_owned().await?;
                anyhow::Ok(control.list_workflows(&format!("i{i}")).await?.workflows)
            });
        }
        let mut out = Vec::new();
        while let Some(r) = set.join_next().await {
            out.extend(r??);
        }
        anyhow::Ok(out)
    })?;
    let mut slip = Vec::new();
    let mut ended = Vec::new();
    let mut unfinished = 0;
    for w in workflows
        .iter()
        .filter(|w| w.trigger.as_deref() == Some("drift"))
        .filter(|w| w.created_at_ms >= from && w.created_at_ms < until)
    {
        let minute = w.created_at_ms / 60_000 * 60_000;
        slip.push((w.created_at_ms - minute) as f64 / 1000.0);
        match w.finished_at_ms {
            Some(f) if w.status == "succeeded" => ended.push((f - minute) as f64 / 1000.0),
            _ => unfinished += 1,
        }
    }
    slip.sort_by(f64::total_cmp);
    ended.sort_by(f64::total_cmp);
    let expected = installs * COMPONENTS * minutes as usize;
    println!(
        "| drift workflows started in {minutes} min (expected {expected}) | {} ({} ended in success, {unfinished} not) |",
        slip.len(),
        ended.len()
    );
    println!(
        "| schedule slip: due minute → workflow created, p50 / p99 / max | {:.1} s / {:.1} s / {:.1} s |",
        percentile(&slip, 0.5),
        percentile(&slip, 0.99),
        slip.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "| due minute → check ended (queued behind the install's other checks), p50 / p99 / max | {:.1} s / {:.1} s / {:.1} s |",
        percentile(&ended, 0.5),
        percentile(&ended, 0.99),
        ended.last().copied().unwrap_or(f64::NAN)
    );
    println!(
        "| control-plane CPU over the {minutes} min / jobs completed | {cpu:.0} % of one core / {} ({:.0}/s) |",
        done1 - done0,
        (done1 - done0) as f64 / ((until - from) as f64 / 1000.0)
    );
    sims.abort_all();
    Ok(())
}
