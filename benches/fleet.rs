//! Fleet load generator: thousands of simulated runners against real
//! `nuon-ctl` processes.
//!
//! Each simulated runner is a real client of the Runner API with its own
//! token and connection: it long-polls for work, confirms each claimed job
//! with a heartbeat, completes it with its one log line, and backs off with
//! the runner's own jittered backoff when the control plane is away. Only
//! the job process is left out, so what is measured is the control plane.
//!
//! ```text
//! cargo bench -p nuon-benches --bench fleet -- [SECTION...] [--runners N] [--rate R] [--secs S]
//!     sqlite    N runners (default 10,000) on one control plane on SQLite: connect, idle,
//!               R jobs/s (default 200) for S seconds (default 30), then a restart storm
//!     pgbench   the raw SKIP LOCKED claim + complete rate of PostgreSQL (pgbench)
//!     pg        throughput on PostgreSQL with 1 and with 2 replicas (--jobs J, default 12,000),
//!               then dispatch latency at --rate R jobs/s for 10 s
//!     rollout   a release rolled out to --installs N installs (default 1,000) on SQLite, in
//!               waves 1,10%,50%,100% at --max-parallel P (default 50), each install's runner
//!               simulated (its build, sync, plan and apply jobs succeed at once); with --pg,
//!               on PostgreSQL with two replicas, the runners split between them: the
//!               replicas' CPU per install, their memory with the runners parked, and the
//!               overview and `installs list --selector` at that size; --to SELECTOR
//!               (default `tier=prod`: all) rolls out to some of them (each install also
//!               has `ring=0`..`ring=9`, a tenth of the fleet each, and `cell=0`..`cell=99`);
//!               --statements (with --pg) counts PostgreSQL's statements of the parked
//!               window and of the rollout, per install (`pg_stat_statements`, psql); --pin
//!               (with --pg) puts the replicas alone on CPU 0 (`taskset`), as beside a remote DB
//!     dashboard --installs N installs (default 1,000) of an app of 10 components, all deployed
//!               by simulated runners: the dashboard's server time and page weights, and the
//!               overview's first paint in headless Chromium
//!     runners   a runner version rolled out to the runners of --installs N installs (default
//!               1,000) in 10 waves (`--wave 10%`), each runner simulated: it hears of the
//!               new version from its settings and calls again on it, as a real runner does
//!               after its re-exec; the control plane's extra CPU and the time per wave
//!     livelog   a job printing 10,000 lines/s until --lines N (default 1,000,000), followed
//!               live on its dashboard page in headless Chromium: how far the page lags, and
//!               the tab's memory at the end
//! ```
//!
//! Prints Markdown for BENCHMARKS.md. With no section, runs them all.
#![allow(missing_docs)]

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nuon_client::{ClientConfig, ControlClient, RunnerClient};
use nuon_core::records::LogRecords;
use nuon_core::wire::{
    ClaimRequest, ClaimedJob, Completion, CompletionLogs, CreateJob, HeartbeatRequest, LeaseRef,
    LogBatch, LogStream,
};
use nuon_core::{JobResult, JobSpec, Outcome, Transport, TransportError, now_ms};
use nuon_runner_lib::Backoff;
use nuon_tests::{ControlPlane, PgCluster};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;

#[path = "fleet/args.rs"]
mod args;
#[path = "fleet/rollout.rs"]
mod rollout;
use args::{Args, args};
use rollout::rollout;

/// How long a simulated runner's claim is held, as the real runner asks.
const CLAIM_WAIT_MS: u64 = 50_000;

fn main() -> Result<()> {
    let args = args()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let want = |s: &str| args.sections.is_empty() || args.sections.iter().any(|a| a == s);
    if want("sqlite") {
        rt.block_on(sqlite_fleet(&args))?;
    }
    let mut raw = None;
    if want("pgbench") {
        raw = pgbench()?;
    }
    if want("pg") {
        rt.block_on(pg_throughput(&args, raw))?;
    }
    if want("rollout") {
        rt.block_on(rollout(&args))?;
    }
    if want("dashboard") {
        rt.block_on(dashboard(&args))?;
    }
    if want("livelog") {
        rt.block_on(livelog(&args))?;
    }
    if want("runners") {
        rt.block_on(runner_rollout(&args))?;
    }
    Ok(())
}

// ------------------------------------------------------------------ the fleet

/// What the simulated runners saw.
#[derive(Default)]
struct Stats {
    /// Job queued (the generator's clock when it sent the create) → claim
    /// answered (the simulated runner's clock), in ms.
    latencies: Mutex<Vec<f64>>,
    claimed: AtomicU64,
    completed: AtomicU64,
    /// Requests that failed and were retried after a backoff.
    retries: AtomicU64,
    /// Why requests failed, by message, to explain the retries.
    errors: Mutex<HashMap<String, u64>>,
}

impl Stats {
    fn failed(&self, e: &TransportError) {
        self.retries.fetch_add(1, Ordering::Relaxed);
        let mut key = e.to_string();
        if let Some(i) = key.find("error sending request") {
            key.drain(..i);
        }
        key.truncate(240);
        *self.errors.lock().expect("stats").entry(key).or_default() += 1;
    }

    /// The failures since the last call, most frequent first.
    fn take_errors(&self) -> String {
        let mut v: Vec<(String, u64)> = std::mem::take(&mut *self.errors.lock().expect("stats"))
            .into_iter()
            .collect();
        v.sort_by_key(|e| std::cmp::Reverse(e.1));
        v.iter()
            .take(3)
            .map(|(m, n)| format!("{n}× {m}"))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

fn unix_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// The runner's default backoff (`RunnerConfig`): 250 ms doubling to 30 s.
fn backoff() -> Backoff {
    Backoff::new(Duration::from_millis(250), Duration::from_secs(30))
}

/// Retries `f` with the runner's backoff until it succeeds or is refused.
async fn retry<T, F, Fut>(stats: &Stats, mut f: F) -> Result<T, TransportError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, TransportError>>,
{
    let mut backoff = backoff();
    loop {
        match f().await {
            Err(e) if e.is_retryable() => {
                stats.failed(&e);
                tokio::time::sleep(backoff.next_delay()).await;
            }
            other => return other,
        }
    }
}

/// One simulated runner: claims up to `slots` jobs at a time and runs each
/// through the protocol (confirming heartbeat, the completion with its one
/// log line).
async fn sim_runner(client: RunnerClient, slots: u32, stats: Arc<Stats>) {
    let client = Arc::new(client);
    let mut backoff = backoff();
    let req = ClaimRequest {
        kinds: SIM_KINDS.iter().map(|k| k.to_string()).collect(),
        slots,
        wait_ms: CLAIM_WAIT_MS,
        signing_key: None,
        telemetry: None,
        settings_version: None,
    };
    loop {
        let jobs = match client.claim(&req).await {
            Ok(resp) => {
                backoff.reset();
                resp.jobs
            }
            Err(TransportError::Unauthorized(e)) => {
                eprintln!("simulated runner refused: {e}");
                return;
            }
            Err(e) => {
                stats.failed(&e);
                tokio::time::sleep(backoff.next_delay()).await;
                continue;
            }
        };
        let now = unix_ns();
        let mut running = JoinSet::new();
        for job in jobs {
            stats.claimed.fetch_add(1, Ordering::Relaxed);
            if let Some(sent) = sent_at(&job) {
                let ms = now.saturating_sub(sent) as f64 / 1e6;
                stats.latencies.lock().expect("stats").push(ms);
            }
            let (client, stats) = (client.clone(), stats.clone());
            running.spawn(async move {
                if let Err(e) = run_job(&client, &job, &stats).await {
                    eprintln!("job {} not completed: {e}", job.job_id);
                } else {
                    stats.completed.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        running.join_all().await;
    }
}

/// The job kinds a simulated runner claims: commands, and every job of a
/// build and a deploy.
const SIM_KINDS: [&str; 7] = [
    "build",
    "exec",
    "helm",
    "kubernetes",
    "sync",
    "terraform",
    "wasm",
];

/// What a simulated job reports: nothing for a command; for the jobs of a
/// build or a deploy, what the control plane reads of each (the artifact
/// of a build or a sync, a plan and its changes, an apply's outputs), all
/// in one.
fn sim_outputs(job: &ClaimedJob) -> serde_json::Value {
    let kind = serde_json::from_str::<JobSpec>(&job.spec)
        .map(|s| s.kind)
        .unwrap_or_default();
    if kind == "exec" {
        return serde_json::Value::Null;
    }
    serde_json::json!({
        "artifact": {"repo": "app/box", "digest": format!("sha256:{}", "a".repeat(64)), "size": 2},
        "plan": {"repo": "app/box", "digest": format!("sha256:{}", "b".repeat(64)), "size": 2},
        "changes": {"add": 1, "change": 0, "destroy": 0},
        "outputs": {"version": "v1"},
    })
}

/// The generator's send time, which it puts in the job's first argument.
fn sent_at(job: &ClaimedJob) -> Option<u128> {
    let spec: JobSpec = serde_json::from_str(&job.spec).ok()?;
    spec.payload.get("args")?.get(0)?.as_str()?.parse().ok()
}

async fn run_job(
    client: &RunnerClient,
    job: &ClaimedJob,
    stats: &Stats,
) -> Result<(), TransportError> {
    let lease = LeaseRef {
        job_id: job.job_id.clone(),
        attempt: job.attempt,
    };
    let beat = HeartbeatRequest {
        leases: vec![lease],
        wait_ms: 0,
        telemetry: None,
    };
    retry(stats, || client.heartbeat(&beat)).await?;
    let mut lines = LogRecords::new();
    lines
        .push(LogStream::Stdout, now_ms(), "simulated job ran")
        .map_err(|e| TransportError::Rejected {
            status: 0,
            message: e.to_string(),
        })?;
    let batch = LogBatch {
        attempt: job.attempt,
        first_seq: 1,
        lines,
    };
    // Its one line rides in the completion, as a runner's last lines do.
    let done = Completion {
        attempt: job.attempt,
        logs: Some(CompletionLogs::of(&batch)),
        log_lines: 1,
        result: JobResult {
            outcome: Outcome::Succeeded,
            exit_code: Some(0),
            reason: None,
            outputs: sim_outputs(job),
        },
    };
    retry(stats, || client.complete(&job.job_id, &done)).await?;
    Ok(())
}

/// The simulated runners of one fleet, and their tasks.
struct Fleet {
    names: Vec<String>,
    stats: Arc<Stats>,
    /// Held so the runners live as long as the fleet (dropping it aborts them).
    _tasks: JoinSet<()>,
}

impl Fleet {
    /// Registers `n` runners through `control` (many at once).
    async fn register(control: &ControlClient, n: usize) -> Result<Vec<(String, String)>> {
        let sem = Arc::new(Semaphore::new(32));
        let mut set = JoinSet::new();
        for i in 0..n {
            let (control, sem) = (control.clone(), sem.clone());
            set.spawn(async move {
                let _permit = sem.acquire_owned().await?;
                let name = format!("sim-{i}");
                let created = control.create_runner(&name).await?;
                anyhow::Ok((name, created.token))
            });
        }
        let mut out = Vec::with_capacity(n);
        while let Some(r) = set.join_next().await {
            out.push(r??);
        }
        out.sort_by_key(|(name, _)| name[4..].parse::<usize>().unwrap_or(0));
        Ok(out)
    }

    /// Starts one simulated runner per `(name, token)`, runner `i` talking
    /// to `urls[i % urls.len()]` first (the others as its fallbacks).
    fn start(runners: &[(String, String)], urls: &[String], slots: u32) -> Result<Fleet> {
        let stats = Arc::new(Stats::default());
        let mut tasks = JoinSet::new();
        let http = RunnerClient::http_client(&ClientConfig::new(&urls[0], "x")?)?;
        for (i, (_, token)) in runners.iter().enumerate() {
            let mut order: Vec<&str> = urls.iter().map(String::as_str).collect();
            order.rotate_left(i % urls.len());
            let mut config = ClientConfig::with_replicas(&order.join(","), token)?;
            config.request_timeout = Duration::from_secs(30);
            let client = RunnerClient::with_http_client(config, http.clone());
            tasks.spawn(sim_runner(client, slots, stats.clone()));
        }
        Ok(Fleet {
            names: runners.iter().map(|(n, _)| n.clone()).collect(),
            stats,
            _tasks: tasks,
        })
    }

    fn latencies(&self) -> Vec<f64> {
        let mut v = std::mem::take(&mut *self.stats.latencies.lock().expect("stats"));
        v.sort_by(f64::total_cmp);
        v
    }
}

/// Queues `count` jobs at `rate` per second (0: as fast as the API takes
/// them), round-robin over `runners`, through the `controls` in turn.
async fn queue_jobs(
    controls: &[ControlClient],
    runners: &[String],
    count: usize,
    rate: f64,
) -> Result<Duration> {
    let sem = Arc::new(Semaphore::new(64));
    let mut set = JoinSet::new();
    let start = Instant::now();
    for i in 0..count {
        if rate > 0.0 {
            let due = start + Duration::from_secs_f64(i as f64 / rate);
            tokio::time::sleep_until(due.into()).await;
        }
        let permit = sem.clone().acquire_owned().await?;
        let control = controls[i % controls.len()].clone();
        let runner = runners[(i * 7919) % runners.len()].clone();
        set.spawn(async move {
            let _permit = permit;
            let job = CreateJob {
                runner,
                kind: "exec".into(),
                payload: serde_json::json!({"command": "true", "args": [unix_ns().to_string()]}),
                timeout_secs: Some(600),
                max_attempts: Some(1),
                sandbox: None,
            };
            control.create_job(&job).await.map(drop)
        });
        while let Some(r) = set.try_join_next() {
            r??;
        }
    }
    while let Some(r) = set.join_next().await {
        r??;
    }
    Ok(start.elapsed())
}

async fn wait_completed(stats: &Stats, count: u64, limit: Duration) -> Result<Duration> {
    let start = Instant::now();
    while stats.completed.load(Ordering::Relaxed) < count {
        if start.elapsed() > limit {
            bail!(
                "only {} of {count} jobs completed after {limit:?}",
                stats.completed.load(Ordering::Relaxed)
            );
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(start.elapsed())
}

/// How many of `names` the control plane has seen since `since_ms`.
async fn seen_since(control: &ControlClient, names: &[String], since_ms: i64) -> Result<usize> {
    let list = control.list_runners().await?;
    let seen: HashMap<&str, Option<i64>> = list
        .runners
        .iter()
        .map(|r| (r.name.as_str(), r.last_seen_at_ms))
        .collect();
    Ok(names
        .iter()
        .filter(|n| {
            seen.get(n.as_str())
                .copied()
                .flatten()
                .is_some_and(|t| t >= since_ms)
        })
        .count())
}

async fn wait_seen(
    control: &ControlClient,
    names: &[String],
    since_ms: i64,
    limit: Duration,
) -> Result<Duration> {
    let start = Instant::now();
    loop {
        // The control plane may be starting: a failed look is not an answer.
        if let Ok(n) = seen_since(control, names, since_ms).await
            && n == names.len()
        {
            return Ok(start.elapsed());
        }
        if start.elapsed() > limit {
            bail!("not every runner was served within {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

// ------------------------------------------------------------ process probes

/// CPU time (user + system) and bytes written to disk by a process, at a moment.
#[derive(Clone, Copy)]
struct Sample {
    at: Instant,
    cpu_ticks: u64,
    write_bytes: u64,
}

fn sample(pid: u32) -> Sample {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are fields 14 and 15 of the line; 12 and 13 here.
    let cpu_ticks = ticks(11) + ticks(12);
    let io = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    let write_bytes = io
        .lines()
        .find_map(|l| l.strip_prefix("write_bytes: "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0);
    Sample {
        at: Instant::now(),
        cpu_ticks,
        write_bytes,
    }
}

/// CPU use in % of one core, and bytes written to disk per second, between two samples.
fn rates(a: Sample, b: Sample) -> (f64, f64) {
    let secs = b.at.duration_since(a.at).as_secs_f64().max(1e-9);
    // Linux reports CPU time in ticks of 1/100 s.
    let cpu = (b.cpu_ticks - a.cpu_ticks) as f64 / 100.0 / secs * 100.0;
    let write = (b.write_bytes - a.write_bytes) as f64 / secs;
    (cpu, write)
}

/// Resident and peak resident memory of a process, in MB.
fn memory(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (kb("VmRSS:") / 1024.0, kb("VmHWM:") / 1024.0)
}

/// An app of `components` Terraform components (each one `terraform_data`)
/// synced and built on a simulated build runner, and `n` installs of it
/// (labelled `tier=prod`), each with its simulated runner: the build
/// runner's fleet and the installs'.
async fn installs_of(cp: &ControlPlane, n: usize, components: usize) -> Result<(Fleet, Fleet)> {
    let (builder, tokens) = make_installs(cp, n, components).await?;
    let fleet = Fleet::start(&tokens, std::slice::from_ref(&cp.runner_url), 1)?;
    Ok((builder, fleet))
}

/// [`installs_of`] without starting the installs' runners: their names and
/// tokens.
async fn make_installs(
    cp: &ControlPlane,
    n: usize,
    components: usize,
) -> Result<(Fleet, Vec<(String, String)>)> {
    use nuon_core::wire::CreateInstall;

    let control = cp.client();
    let app = tempfile::tempdir()?;
    let mut files = vec![
        ("metadata.toml".to_owned(), "version = \"v2\"\n".to_owned()),
        (
            "src/box/main.tf".to_owned(),
            "resource \"terraform_data\" \"box\" {}\n".to_owned(),
        ),
    ];
    for c in 0..components {
        let name = if components == 1 {
            "box".to_owned()
        } else {
            format!("c{c}")
        };
        files.push((
            format!("components/{name}.toml"),
            format!("name = \"{name}\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/box\"\n"),
        ));
    }
    for (path, text) in &files {
        let p = app.path().join(path);
        std::fs::create_dir_all(p.parent().context("a parent")?)?;
        std::fs::write(p, text)?;
    }
    let nuon = |a: &[&str]| nuon_benches::nuon_ok(cp, a).map(drop);
    nuon(&["apps", "create", "app"])?;
    nuon(&[
        "apps",
        "sync",
        app.path().to_str().context("a path")?,
        "--app",
        "app",
    ])?;
    let build_token = std::fs::read_to_string(cp.data_dir.join("build-runner-token"))?;
    let tokens = vec![("build".to_owned(), build_token.trim().to_owned())];
    let builder = Fleet::start(&tokens, std::slice::from_ref(&cp.runner_url), 4)?;
    nuon(&["builds", "create", "--app", "app", "--wait"])?;

    let t = Instant::now();
    let sem = Arc::new(Semaphore::new(32));
    let mut set = JoinSet::new();
    for i in 0..n {
        let (control, sem) = (control.clone(), sem.clone());
        set.spawn(async move {
            let _permit = sem.acquire_owned().await?;
            let name = format!("i{i:04}");
            let (ring, cell) = ((i % 10).to_string(), (i % 100).to_string());
            let created = control
                .create_install(&CreateInstall {
                    app: "app".into(),
                    name: name.clone(),
                    inputs: Default::default(),
                    secrets: Default::default(),
                    approval: None,
                    labels: [("tier", "prod".to_owned()), ("ring", ring), ("cell", cell)]
                        .map(|(k, v)| (k.to_owned(), v))
                        .into(),
                    components: Default::default(),
                    overrides: Default::default(),
                })
                .await?;
            anyhow::Ok((name, created.runner_token))
        });
    }
    let mut tokens = Vec::new();
    while let Some(r) = set.join_next().await {
        tokens.push(r??);
    }
    println!(
        "| create {n} installs with their runners (32 at a time) | {:.1} s |",
        t.elapsed().as_secs_f64()
    );
    Ok((builder, tokens))
}

/// The dashboard's overview of `--installs N` installs (default 1,000) of
/// an app of 10 components, every component deployed (a rollout through
/// simulated runners): server time of the overview and the other pages,
/// what each page weighs, and the overview's first paint in Chromium.
async fn dashboard(args: &Args) -> Result<()> {
    use nuon_core::rollout::{CreateRollout, RolloutStatus};

    let n = args.installs;
    println!("\n## Dashboard on SQLite: {n} installs × 10 components, all deployed\n");
    let cp = ControlPlane::start("60s")?;
    let control = cp.client();
    let (_builder, _fleet) = installs_of(&cp, n, 10).await?;
    let release = control.create_release("app", None).await?;
    let t = Instant::now();
    let rollout = control
        .create_rollout(
            release.id.as_str(),
            &CreateRollout {
                to: "tier=prod".into(),
                waves: "100%".into(),
                max_parallel: 200,
                ..CreateRollout::default()
            },
        )
        .await?;
    loop {
        let r = control.get_rollout(rollout.id.as_str()).await?;
        if r.status == RolloutStatus::Succeeded {
            break;
        }
        if r.status != RolloutStatus::Running || t.elapsed() > Duration::from_secs(3600) {
            bail!("the rollout ended {} ({:?})", r.status, r.reason);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    println!(
        "| deploy every install's 10 components (one rollout) | {:.1} s |",
        t.elapsed().as_secs_f64()
    );

    let browser = Browser::sign_in(&cp).await?;
    let base = cp.control_url.clone();
    let get = |path: String| {
        let browser = &browser;
        async move { browser.get(&path).await }
    };
    let install = control.get_install("i0000").await?;
    let workflow = control
        .list_workflows("i0000")
        .await?
        .workflows
        .into_iter()
        .next()
        .context("a workflow")?;
    let job = workflow
        .steps
        .iter()
        .rev()
        .find_map(|s| s.job_id.clone())
        .context("a job")?;
    // The first overview after the rollout makes every install's summary
    // again (each was changed by its deploy); the later ones read them.
    let (cold, _) = get("/".to_owned()).await?;
    println!(
        "| overview, the first after the rollout (every install's workflow summary made again and saved) | {cold:.1} ms |"
    );
    for (what, path, times) in [
        (
            "overview (100 of the installs, counts over all)",
            "/".to_owned(),
            100,
        ),
        ("install page", format!("/installs/{}", install.id), 50),
        (
            "workflow page (30 steps)",
            format!("/workflows/{}", workflow.id),
            50,
        ),
        ("job log page", format!("/jobs/{job}"), 50),
        ("runners page", "/runners".to_owned(), 20),
    ] {
        let mut ms = Vec::new();
        let mut size = 0;
        for _ in 0..times {
            let (t, b) = get(path.clone()).await?;
            ms.push(t);
            size = b;
        }
        ms.sort_by(f64::total_cmp);
        println!(
            "| {what}: server time | p50 {:.1} ms, p99 {:.1} ms ({times} GETs); {:.0} KB |",
            percentile(&ms, 0.50),
            percentile(&ms, 0.99),
            size as f64 / 1024.0
        );
    }

    // The overview's first paint in headless Chromium, signed in (the
    // driver's client blocks: off the runtime's threads).
    let token = cp.admin_token.clone();
    tokio::task::spawn_blocking(move || first_paint(&base, &token)).await?;
    Ok(())
}

/// How fast the live log's job prints, in lines a second.
const LOG_RATE: u64 = 10_000;

/// A job printing [`LOG_RATE`] lines a second until `--lines`, its runner
/// simulated (each batch of lines shipped through the Runner API as the
/// runner ships them), followed live on its dashboard page in headless
/// Chromium: the page's lag behind the job, sampled every 2 s, and the
/// tab's memory once every line is in.
async fn livelog(args: &Args) -> Result<()> {
    const BATCH: u64 = 500;
    let total = args.lines;
    println!("\n## The dashboard's live log: {LOG_RATE} lines/s, {total} lines\n");
    let cp = ControlPlane::start("60s")?;
    let control = cp.client();
    let created = control.create_runner("printer").await?;
    let job = control
        .create_job(&CreateJob {
            runner: "printer".into(),
            kind: "exec".into(),
            payload: serde_json::json!({"command": "true"}),
            timeout_secs: Some(3600),
            max_attempts: Some(1),
            sandbox: None,
        })
        .await?;
    let runner = RunnerClient::new(ClientConfig::new(&cp.runner_url, &created.token)?)?;
    let claimed = runner
        .claim(&ClaimRequest {
            kinds: vec!["exec".into()],
            slots: 1,
            wait_ms: 5_000,
            signing_key: None,
            telemetry: None,
            settings_version: None,
        })
        .await?
        .jobs
        .into_iter()
        .next()
        .context("the job is claimed")?;
    let beat = HeartbeatRequest {
        leases: vec![LeaseRef {
            job_id: claimed.job_id.clone(),
            attempt: claimed.attempt,
        }],
        wait_ms: 0,
        telemetry: None,
    };
    runner.heartbeat(&beat).await?;

    // The browser signs in and opens the job's page before it prints.
    let base = cp.control_url.clone();
    let token = cp.admin_token.clone();
    let page = format!("{base}/jobs/{}", job.id);
    let chrome = tokio::task::spawn_blocking(move || {
        let b = nuon_tests::webdriver::Chrome::start()?;
        b.goto(&format!("{base}/login"));
        b.type_into("#token", &token);
        b.click("form[action='/login'] button");
        b.wait_until("signed in", Duration::from_secs(20), |b| {
            !b.url().contains("/login")
        });
        b.goto(&page);
        b.cdp("Performance.enable", serde_json::json!({}));
        Some(b)
    })
    .await?;
    let Some(chrome) = chrome else {
        println!("(no chromium: skipped)");
        return Ok(());
    };

    // The job prints: a batch every BATCH / LOG_RATE seconds, on the clock.
    let sent = Arc::new(AtomicU64::new(0));
    let printing = {
        let sent = sent.clone();
        let job_id = claimed.job_id.clone();
        let attempt = claimed.attempt;
        tokio::spawn(async move {
            let start = Instant::now();
            let mut seq = 1u64;
            let mut beat_at = Instant::now();
            while seq <= total {
                let due = start + Duration::from_secs_f64((seq - 1) as f64 / LOG_RATE as f64);
                tokio::time::sleep_until(due.into()).await;
                let mut lines = LogRecords::new();
                let end = (seq + BATCH - 1).min(total);
                for n in seq..=end {
                    let stream = if n % 10 == 0 {
                        LogStream::Stderr
                    } else {
                        LogStream::Stdout
                    };
                    lines.push(
                        stream,
                        now_ms(),
                        &format!(
                            "line {n}: building layer {} of the image, {} bytes so far",
                            n % 97,
                            n * 4096
                        ),
                    )?;
                }
                let batch = LogBatch {
                    attempt,
                    first_seq: seq,
                    lines,
                };
                runner.append_logs(&job_id, &batch).await?;
                sent.store(end, Ordering::Relaxed);
                seq = end + 1;
                if beat_at.elapsed() > Duration::from_secs(10) {
                    runner.heartbeat(&beat).await?;
                    beat_at = Instant::now();
                }
            }
            let rate = total as f64 / start.elapsed().as_secs_f64();
            let done = Completion {
                attempt,
                logs: None,
                log_lines: total,
                result: JobResult {
                    outcome: Outcome::Succeeded,
                    exit_code: Some(0),
                    reason: None,
                    outputs: serde_json::Value::Null,
                },
            };
            runner.complete(&job_id, &done).await?;
            anyhow::Ok((rate, Instant::now()))
        })
    };

    // The page, every 2 s: the last line it shows, against the last sent.
    let watch = {
        let sent = sent.clone();
        tokio::task::spawn_blocking(move || {
            let shown = |b: &nuon_tests::webdriver::Chrome| {
                b.exec(
                    "const r = document.querySelector('#log tbody tr:last-child'); \
                     return [r ? Number(r.id.split('-')[1]) : 0, document.getElementById('log').hasAttribute('data-complete')];",
                    serde_json::json!([]),
                )
            };
            let mut lags = Vec::new();
            let mut memory = vec![chrome.renderer_memory().unwrap_or_default()];
            loop {
                std::thread::sleep(Duration::from_secs(2));
                let at = sent.load(Ordering::Relaxed);
                let v = shown(&chrome);
                let line = v[0].as_u64().unwrap_or(0);
                lags.push(at.saturating_sub(line));
                memory.push(chrome.renderer_memory().unwrap_or_default());
                if v[1] == serde_json::json!(true) || lags.len() > 3600 {
                    break;
                }
            }
            let done_at = Instant::now();
            let metrics = chrome.cdp("Performance.getMetrics", serde_json::json!({}));
            let metric = |name: &str| {
                metrics["metrics"]
                    .as_array()
                    .and_then(|m| m.iter().find(|x| x["name"] == name))
                    .and_then(|x| x["value"].as_f64())
                    .unwrap_or(f64::NAN)
            };
            let rows = chrome.exec(
                "return document.querySelectorAll('#log tbody tr').length;",
                serde_json::json!([]),
            );
            (
                lags,
                done_at,
                metric("JSHeapUsedSize"),
                metric("Nodes"),
                memory,
                rows,
            )
        })
    };
    let (rate, printed_at) = printing.await??;
    let (lags, done_at, heap, nodes, memory, rows) = watch.await?;
    let worst = lags.iter().copied().max().unwrap_or(0);
    let mut sorted = lags.clone();
    sorted.sort_unstable();
    let median = sorted.get(sorted.len() / 2).copied().unwrap_or(0);
    println!("| lines printed, at | {total} at {rate:.0} lines/s |");
    println!(
        "| the page's lag behind the job (every 2 s, {} samples) | median {median} lines ({:.2} s), worst {worst} lines ({:.2} s) |",
        lags.len(),
        median as f64 / LOG_RATE as f64,
        worst as f64 / LOG_RATE as f64
    );
    println!(
        "| the job's end to the page's last line | under {:.1} s (sampled every 2 s) |",
        done_at.saturating_duration_since(printed_at).as_secs_f64()
    );
    let mb = |b: u64| b as f64 / 1048576.0;
    let (private, resident) = memory.last().copied().unwrap_or_default();
    println!(
        "| the tab after {total} lines: its renderer's private memory (Chromium's footprint) | {:.0} MB (before the job printed: {:.0} MB; highest: {:.0} MB) |",
        mb(private),
        mb(memory[0].0),
        mb(memory.iter().map(|m| m.0).max().unwrap_or(0)),
    );
    println!(
        "| the tab after {total} lines: resident (shared libraries included), JS heap, DOM | {:.0} MB (highest {:.0} MB); JS heap {:.1} MB; {nodes:.0} DOM nodes; {rows} rows kept |",
        mb(resident),
        mb(memory.iter().map(|m| m.1).max().unwrap_or(0)),
        heap / 1048576.0
    );
    let series: Vec<String> = memory.iter().map(|m| format!("{:.0}", mb(m.0))).collect();
    println!(
        "(the renderer's private MB every 2 s: {})",
        series.join(" ")
    );
    Ok(())
}

/// The overview's first contentful paint, median of five loads.
fn first_paint(base: &str, token: &str) {
    if let Some(b) = nuon_tests::webdriver::Chrome::start() {
        b.goto(&format!("{base}/login"));
        b.type_into("#token", token);
        b.click("form[action='/login'] button");
        b.wait_until("signed in", Duration::from_secs(20), |b| {
            !b.url().contains("/login")
        });
        if let Some((m, measure)) = b.first_paint(&format!("{base}/"), 5) {
            println!("| overview in headless Chromium: {measure} (median of 5) | {m:.0} ms |");
        }
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

fn latency_summary(sorted: &[f64]) -> String {
    format!(
        "p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} jobs)",
        percentile(sorted, 0.5),
        percentile(sorted, 0.9),
        percentile(sorted, 0.99),
        sorted.last().copied().unwrap_or(f64::NAN),
        sorted.len()
    )
}

fn mb(bytes_per_s: f64) -> String {
    format!("{:.2} MB/s", bytes_per_s / 1e6)
}

// ------------------------------------------------------------ SQLite, 10,000

async fn sqlite_fleet(args: &Args) -> Result<()> {
    let n = args.runners;
    println!("\n## Fleet on SQLite: {n} simulated runners, one control plane\n");
    println!("| what | result |\n|---|---|");
    let mut cp = ControlPlane::start("60s")?;
    let control = cp.client();
    let (rss0, _) = memory(cp.pid());
    println!("| control plane at start, no runner | {rss0:.0} MB resident |");

    let t = Instant::now();
    let runners = Fleet::register(&control, n).await?;
    let took = t.elapsed();
    println!(
        "| register {n} runners over the Control API (32 at a time) | {:.1} s ({:.0}/s) |",
        took.as_secs_f64(),
        n as f64 / took.as_secs_f64()
    );

    let since = now_ms();
    let t = Instant::now();
    let fleet = Fleet::start(&runners, &[cp.runner_url.clone()], 1)?;
    let took = wait_seen(&control, &fleet.names, since, Duration::from_secs(300)).await?;
    let (rss, _) = memory(cp.pid());
    println!(
        "| all {n} connected and long-polling (each seen by the control plane) | {:.1} s after the first started |",
        took.max(t.elapsed()).as_secs_f64()
    );
    println!("| control plane with {n} parked long polls | {rss:.0} MB resident |");

    // Idle: nothing queued; every runner re-polls once per claim wait, so
    // the window spans more than one.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let idle_secs = 60;
    let a = sample(cp.pid());
    tokio::time::sleep(Duration::from_secs(idle_secs)).await;
    let b = sample(cp.pid());
    let (cpu, write) = rates(a, b);
    println!(
        "| idle, {idle_secs} s: control-plane CPU / disk writes | {cpu:.1} % of one core / {} |",
        mb(write)
    );

    // Load: jobs arriving at a steady rate to runners picked across the fleet.
    let count = (args.rate * args.secs as f64) as usize;
    let a = sample(cp.pid());
    let queued = queue_jobs(
        std::slice::from_ref(&control),
        &fleet.names,
        count,
        args.rate,
    )
    .await?;
    let drained = wait_completed(&fleet.stats, count as u64, Duration::from_secs(300)).await?;
    let b = sample(cp.pid());
    let (cpu, write) = rates(a, b);
    let (rss, peak) = memory(cp.pid());
    let lat = fleet.latencies();
    let secs = (queued + drained).as_secs_f64();
    println!(
        "| load: {count} jobs at {:.0}/s to random runners: dispatch, queued → claimed | {} |",
        args.rate,
        latency_summary(&lat)
    );
    println!(
        "| load: completed / control-plane CPU / disk writes | {:.0} jobs/s / {cpu:.0} % of one core / {} |",
        count as f64 / secs,
        mb(write)
    );
    println!("| control plane after the load | {rss:.0} MB resident, {peak:.0} MB peak |");
    let errors = fleet.stats.take_errors();
    if !errors.is_empty() {
        eprintln!("failed requests during the load: {errors}");
    }

    // The storm: the control plane dies and comes back on the same data
    // dir; every runner finds its connection gone and comes back on its own
    // backoff.
    let retries = fleet.stats.retries.load(Ordering::Relaxed);
    let killed = Instant::now();
    cp.kill9();
    let since = now_ms();
    tokio::task::block_in_place(|| cp.restart())?;
    let up = killed.elapsed();
    let served = wait_seen(&control, &fleet.names, since, Duration::from_secs(300)).await?;
    let (rss, _) = memory(cp.pid());
    eprintln!(
        "failed requests during the storm: {}",
        fleet.stats.take_errors()
    );
    println!(
        "| restart storm: `kill -9`, restart on the same data dir ({:.2} s to listen again) → all {n} runners served again | {:.1} s after the restart ({} failed tries, backoff 250 ms doubling to 30 s, full jitter) |",
        up.as_secs_f64(),
        served.as_secs_f64(),
        fleet.stats.retries.load(Ordering::Relaxed) - retries
    );
    println!("| control plane after the storm | {rss:.0} MB resident |");
    // A job after the storm still dispatches at once.
    let before = fleet.stats.completed.load(Ordering::Relaxed);
    queue_jobs(std::slice::from_ref(&control), &fleet.names, 200, 50.0).await?;
    wait_completed(&fleet.stats, before + 200, Duration::from_secs(60)).await?;
    println!(
        "| after the storm: 200 jobs at 50/s, dispatch | {} |",
        latency_summary(&fleet.latencies())
    );
    drop(fleet);
    Ok(())
}

// ------------------------------------------------------------------ pgbench

/// The raw claim + complete rate: pgbench clients taking rows with
/// `FOR UPDATE SKIP LOCKED` and marking them done, durable commits.
/// Returns jobs/s for one job per transaction.
fn pgbench() -> Result<Option<f64>> {
    let Some(pg) = PgCluster::start_with(true)? else {
        return Ok(None);
    };
    let psql = |sql: &str| -> Result<String> {
        let out = Command::new("psql")
            .args([
                "-X",
                "-q",
                "-A",
                "-t",
                "-v",
                "ON_ERROR_STOP=1",
                &pg.url,
                "-c",
                sql,
            ])
            .output()
            .context("run psql")?;
        if !out.status.success() {
            bail!("psql failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    };
    let dir = tempfile::tempdir()?;
    let single = dir.path().join("single.sql");
    // One transaction claims (the SELECT locks, the UPDATE takes), the next
    // completes: two durable commits per job, as a runner needs.
    std::fs::write(
        &single,
        "BEGIN;\n\
         SELECT id FROM q WHERE status = 0 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED \\gset\n\
         UPDATE q SET status = 1, claimed_at = now() WHERE id = :id;\n\
         COMMIT;\n\
         UPDATE q SET status = 2, done_at = now() WHERE id = :id;\n",
    )?;
    let batch = dir.path().join("batch.sql");
    std::fs::write(
        &batch,
        "WITH c AS (SELECT id FROM q WHERE status = 0 ORDER BY id LIMIT 10 FOR UPDATE SKIP LOCKED), \
         u AS (UPDATE q SET status = 1, claimed_at = now() FROM c WHERE q.id = c.id RETURNING q.id) \
         SELECT string_agg(id::text, ',') AS ids FROM u \\gset\n\
         UPDATE q SET status = 2, done_at = now() WHERE id IN (:ids);\n",
    )?;
    let run = |script: &Path, per_tx: f64| -> Result<f64> {
        psql("DROP TABLE IF EXISTS q")?;
        psql(
            "CREATE TABLE q (id bigserial PRIMARY KEY, status int NOT NULL, payload text, \
             claimed_at timestamptz, done_at timestamptz)",
        )?;
        psql(
            "INSERT INTO q (status, payload) SELECT 0, 'job ' || g FROM generate_series(1, 400000) g",
        )?;
        psql("CREATE INDEX q_queued ON q (id) WHERE status = 0")?;
        psql("VACUUM ANALYZE q")?;
        let out = Command::new("pgbench")
            .args(["-n", "-c", "16", "-j", "2", "-T", "15", "-f"])
            .arg(script)
            .arg(&pg.url)
            .output()
            .context("run pgbench")?;
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        if !out.status.success() {
            bail!(
                "pgbench failed: {}{}",
                text,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let tps: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("tps = "))
            .and_then(|l| l.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no tps in pgbench's output: {text}"))?;
        Ok(tps * per_tx)
    };
    if !nuon_tests::have_tool("pgbench", "measure the raw PostgreSQL rate")
        || !nuon_tests::have_tool("psql", "measure the raw PostgreSQL rate")
    {
        return Ok(None);
    }
    let one = run(&single, 1.0)?;
    let ten = run(&batch, 10.0)?;
    println!("\n## PostgreSQL raw claim + complete rate (pgbench, durable commits)\n");
    println!("| what | jobs/s |\n|---|---|");
    println!(
        "| pgbench, 16 clients, claim (`FOR UPDATE SKIP LOCKED`) and complete, one job per claim | {one:.0} |"
    );
    println!("| the same, 10 jobs per claim and per completion | {ten:.0} |");
    Ok(Some(one))
}

// ------------------------------------------------------------- PostgreSQL

async fn pg_throughput(args: &Args, raw: Option<f64>) -> Result<()> {
    println!("\n## Throughput on PostgreSQL (durable commits)\n");
    println!(
        "| replicas | jobs | queueing (64 at a time) | run: claimed to completed | control-plane CPU | PostgreSQL commits/s, WAL | vs raw |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut dispatch = Vec::new();
    for replicas in [1, 2] {
        let Some(pg) = PgCluster::start_with(true)? else {
            return Ok(());
        };
        let logs = tempfile::tempdir()?;
        let data = logs.path().join("data");
        let mut cps = Vec::new();
        for i in 0..replicas {
            cps.push(ControlPlane::start_replica(
                &data,
                "60s",
                &pg.url,
                logs.path(),
                &format!("r{i}"),
            )?);
        }
        let controls: Vec<ControlClient> = cps.iter().map(ControlPlane::client).collect();
        let runners = Fleet::register(&controls[0], 64).await?;
        let names: Vec<String> = runners.iter().map(|(n, _)| n.clone()).collect();
        let jobs = args.jobs;
        let queued = queue_jobs(&controls, &names, jobs, 0.0).await?;

        let db = |sql: &str| -> Result<f64> {
            let out = Command::new("psql")
                .args(["-X", "-A", "-t", &pg.url, "-c", sql])
                .output()?;
            Ok(String::from_utf8_lossy(&out.stdout)
                .trim()
                .parse()
                .unwrap_or(0.0))
        };
        let commits_sql = "SELECT sum(xact_commit) FROM pg_stat_database";
        let wal_sql = "SELECT wal_bytes FROM pg_stat_wal";
        let (c0, w0) = (db(commits_sql)?, db(wal_sql)?);
        let a: Vec<Sample> = cps.iter().map(|c| sample(c.pid())).collect();
        let t = Instant::now();
        let urls: Vec<String> = cps.iter().map(|c| c.runner_url.clone()).collect();
        let fleet = Fleet::start(&runners, &urls, 4)?;
        wait_completed(&fleet.stats, jobs as u64, Duration::from_secs(600)).await?;
        let secs = t.elapsed().as_secs_f64();
        let b: Vec<Sample> = cps.iter().map(|c| sample(c.pid())).collect();
        let (c1, w1) = (db(commits_sql)?, db(wal_sql)?);
        let cpu: Vec<String> = a
            .iter()
            .zip(&b)
            .map(|(a, b)| format!("{:.0} %", rates(*a, *b).0))
            .collect();
        let rate = jobs as f64 / secs;
        println!(
            "| {replicas} | {jobs} | {:.0} jobs/s | {rate:.0} jobs/s (64 runners × 4 slots) | {} | {:.0}/s, {} | {} |",
            jobs as f64 / queued.as_secs_f64(),
            cpu.join(" + "),
            (c1 - c0) / secs,
            mb((w1 - w0) / secs),
            raw.map_or("-".into(), |r| format!("{:.2}×", rate / r)),
        );
        // Dispatch with the runners parked: jobs at a steady rate, queued
        // through the replicas in turn, so with two replicas half of them
        // reach their runner through the other replica's NOTIFY.
        let _ = fleet.latencies(); // the backlog's, taken and dropped
        let count = (args.rate * 10.0) as usize;
        let before = fleet.stats.completed.load(Ordering::Relaxed);
        queue_jobs(&controls, &names, count, args.rate).await?;
        wait_completed(
            &fleet.stats,
            before + count as u64,
            Duration::from_secs(120),
        )
        .await?;
        dispatch.push(format!(
            "| {replicas} | {count} jobs at {:.0}/s | {} |",
            args.rate,
            latency_summary(&fleet.latencies())
        ));
        drop(fleet);
        for mut cp in cps {
            cp.kill9();
        }
    }
    println!(
        "\n| replicas | load (queued through the replicas in turn) | dispatch, queued → claim answered |"
    );
    println!("|---|---|---|");
    for row in dispatch {
        println!("{row}");
    }
    Ok(())
}

/// A browser signed in to a control plane's dashboard (the form's cookie
/// and CSRF field, then the session cookie on every GET).
struct Browser {
    http: reqwest::Client,
    base: String,
    session: String,
}

impl Browser {
    async fn sign_in(cp: &ControlPlane) -> Result<Browser> {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let base = cp.control_url.clone();
        let login = http.get(format!("{base}/login")).send().await?;
        let cookie = |r: &reqwest::Response, name: &str| {
            r.headers()
                .get_all("set-cookie")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .find_map(|v| v.strip_prefix(&format!("{name}=")))
                .and_then(|v| v.split(';').next())
                .map(str::to_owned)
        };
        let csrf = cookie(&login, "nuon_login").context("the sign-in form's cookie")?;
        let signed = http
            .post(format!("{base}/login"))
            .header("cookie", format!("nuon_login={csrf}"))
            .form(&[("token", cp.admin_token.as_str()), ("csrf", csrf.as_str())])
            .send()
            .await?;
        let session = cookie(&signed, "nuon_session").context("a session")?;
        Ok(Browser {
            http,
            base,
            session,
        })
    }

    /// GETs `path`: the time to the whole answer in ms, and its size.
    async fn get(&self, path: &str) -> Result<(f64, usize)> {
        let t = Instant::now();
        let r = self
            .http
            .get(format!("{}{path}", self.base))
            .header("cookie", format!("nuon_session={}", self.session))
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("{path}: {}", r.status());
        }
        let bytes = r.bytes().await?.len();
        Ok((t.elapsed().as_secs_f64() * 1e3, bytes))
    }
}

/// How often a simulated updating runner calls (its claim's wait).
const UPDATE_POLL_MS: u64 = 2_000;

/// A simulated install runner that updates itself: it claims with a short
/// wait (so it hears of a new settings version within [`UPDATE_POLL_MS`]),
/// fetches its settings when their version changes, and when they ask for
/// another runner version "switches": its calls from then on carry the new
/// version in its session (the same session), as the real runner's do
/// after its re-exec. The binary is not downloaded: what is measured is the
/// control plane.
async fn sim_updating_runner(
    config: ClientConfig,
    http: reqwest::Client,
    index: usize,
    switched: Arc<AtomicU64>,
    stats: Arc<Stats>,
) {
    use nuon_core::wire::RunnerSession;
    let session = |version: &str| RunnerSession {
        id: format!("sim{index:05}"),
        host: "bench".into(),
        pid: index as u32 + 1,
        addr: None,
        since_ms: 0,
        version: Some(version.into()),
        os: Some(std::env::consts::OS.into()),
        arch: Some(std::env::consts::ARCH.into()),
    };
    let connect = |version: &str| {
        RunnerClient::with_http_client(config.clone(), http.clone())
            .with_session(&session(version), false)
    };
    let mut version = "1.0.0".to_owned();
    let Ok(mut client) = connect(&version) else {
        return;
    };
    let mut req = ClaimRequest {
        kinds: vec!["exec".into()],
        slots: 1,
        wait_ms: UPDATE_POLL_MS,
        signing_key: None,
        telemetry: None,
        settings_version: None,
    };
    let mut held: Option<String> = None;
    let mut backoff = backoff();
    loop {
        // What it holds: a parked claim answers as soon as that changes.
        req.settings_version = held.clone();
        match client.claim(&req).await {
            Ok(resp) => {
                backoff.reset();
                if resp.settings_version.is_none() || resp.settings_version == held {
                    continue;
                }
                match client.settings().await {
                    Ok(s) => {
                        held = Some(s.version.clone());
                        if let Some(u) = s.update
                            && u.release.version != version
                        {
                            version = u.release.version;
                            match connect(&version) {
                                Ok(c) => client = c,
                                Err(_) => return,
                            }
                            switched.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(e) => stats.failed(&e),
                }
            }
            Err(TransportError::Unauthorized(e)) => {
                eprintln!("simulated runner refused: {e}");
                return;
            }
            Err(e) => {
                stats.failed(&e);
                tokio::time::sleep(backoff.next_delay()).await;
            }
        }
    }
}

/// A runner version rolled out to `--installs N` simulated install runners
/// in 10 waves: the control plane's CPU over the idle fleet's, and the
/// time each wave takes.
async fn runner_rollout(args: &Args) -> Result<()> {
    use nuon_core::rollout::{CreateRollout, RolloutStatus, TargetState};
    use nuon_core::wire::PublishRunnerRelease;

    let n = args.installs;
    println!(
        "\n## Runner rollout on SQLite: {n} simulated install runners, `--wave 10%`, at most 100 at once\n"
    );
    println!("| what | result |\n|---|---|");
    let cp = ControlPlane::start("60s")?;
    let control = cp.client();
    let (_builder, tokens) = make_installs(&cp, n, 1).await?;
    let http = RunnerClient::http_client(&ClientConfig::new(&cp.runner_url, "x")?)?;
    let switched = Arc::new(AtomicU64::new(0));
    let stats = Arc::new(Stats::default());
    let mut tasks = JoinSet::new();
    for (i, (_, token)) in tokens.iter().enumerate() {
        let mut config = ClientConfig::new(&cp.runner_url, token)?;
        config.request_timeout = Duration::from_secs(30);
        tasks.spawn(sim_updating_runner(
            config,
            http.clone(),
            i,
            switched.clone(),
            stats.clone(),
        ));
    }
    let publish = |version: &str, fill: char| PublishRunnerRelease {
        version: version.into(),
        os: std::env::consts::OS.into(),
        arch: std::env::consts::ARCH.into(),
        repository: "nuon-runner".into(),
        manifest: format!("sha256:{}", fill.to_string().repeat(64)),
        digest: format!("sha256:{}", fill.to_string().repeat(64)),
        size: 20 << 20,
    };
    control
        .publish_runner_release(&publish("1.0.0", 'a'))
        .await?;
    control
        .publish_runner_release(&publish("2.0.0", 'b'))
        .await?;
    // Every runner calls on 1.0.0 first.
    tokio::time::sleep(Duration::from_millis(UPDATE_POLL_MS * 3)).await;
    let pid = cp.pid();
    let a = sample(pid);
    tokio::time::sleep(Duration::from_secs(10)).await;
    let b = sample(pid);
    let (idle_cpu, _) = rates(a, b);

    let t = Instant::now();
    let start = sample(pid);
    let created = control
        .create_runner_rollout(
            "2.0.0",
            &CreateRollout {
                waves: "10%,20%,30%,40%,50%,60%,70%,80%,90%,100%".into(),
                max_parallel: 100,
                ..CreateRollout::default()
            },
        )
        .await?;
    let planned = t.elapsed();
    let mut wave_ends = Vec::new();
    let mut last_wave = 0;
    let ended = loop {
        let r = control.get_rollout(created.id.as_str()).await?;
        if r.wave != last_wave {
            wave_ends.push(t.elapsed());
            last_wave = r.wave;
        }
        if r.status != RolloutStatus::Running {
            wave_ends.push(t.elapsed());
            break r;
        }
        if t.elapsed() > Duration::from_secs(1800) {
            bail!("the runner rollout did not end within 30 minutes");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let took = t.elapsed();
    let end = sample(pid);
    let (busy_cpu, _) = rates(start, end);
    if ended.status != RolloutStatus::Succeeded {
        bail!(
            "the runner rollout ended {}: {:?}",
            ended.status,
            ended.reason
        );
    }
    let done = ended
        .targets
        .iter()
        .filter(|t| t.state == TargetState::Succeeded)
        .count();
    println!(
        "| plan and store the rollout ({n} installs, {} waves) | {:.0} ms |",
        ended.wave_count,
        planned.as_secs_f64() * 1e3
    );
    println!(
        "| whole rollout: {done} runners on 2.0.0 ({} switches seen by the runners) | {:.1} s |",
        switched.load(Ordering::Relaxed),
        took.as_secs_f64()
    );
    let mut spans: Vec<f64> = Vec::new();
    let mut before = Duration::ZERO;
    for end in &wave_ends {
        spans.push(end.saturating_sub(before).as_secs_f64());
        before = *end;
    }
    let mut sorted = spans.clone();
    sorted.sort_by(f64::total_cmp);
    println!(
        "| time per wave of {} runners: median / slowest | {:.1} s / {:.1} s (each: {}) |",
        n.div_ceil(10),
        percentile(&sorted, 0.5),
        sorted.last().copied().unwrap_or(0.0),
        spans
            .iter()
            .map(|s| format!("{s:.1}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "| `nuon-ctl` CPU, {n} runners calling every {} s: idle / during the rollout | {idle_cpu:.1}% / {busy_cpu:.1}% of one core (extra {:.1}%) |",
        UPDATE_POLL_MS / 1000,
        busy_cpu - idle_cpu
    );
    println!(
        "| retried requests | {} {} |",
        stats.retries.load(Ordering::Relaxed),
        stats.take_errors()
    );
    drop(tasks);
    Ok(())
}
