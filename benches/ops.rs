//! The operations layer's costs: audit appends on SQLite under job-loop
//! load, verifying a chain of 1,000,000 entries, and `/metrics` scrapes
//! with 10,000 runners.
//!
//! `cargo bench -p nuon-benches --bench ops` (release build); sections can
//! be picked: `-- append verify metrics phonehome`. Prints Markdown for
//! BENCHMARKS.md.
#![allow(missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Result;
use nuon_control::store::prelude::*;
use nuon_control::store::{AuditHeads, NewAudit, NewJob, SqliteStore, verify_audit};
use nuon_control::{Auditor, ControlPlane, ServerConfig};
use nuon_core::audit::AuditEntry;
use nuon_core::wire::Completion;
use nuon_core::{JobId, JobResult, JobSpec, OrgId, Outcome, RetryPolicy, RunnerId, now_ms};

fn entry(i: u64) -> AuditEntry {
    AuditEntry::new(
        now_ms(),
        "tok_01JBENCHBENCHBENCHBENCHBENC",
        "deployInstall",
        format!("/v1/installs/bench-{i}/deploy"),
        "127.0.0.1",
        "201",
    )
}

async fn org(store: &dyn Store) -> Result<(OrgId, RunnerId)> {
    let org = store
        .create_org(&OrgId::generate(), "bench", b"key")
        .await?
        .org_id;
    let runner = RunnerId::generate();
    store.create_runner(&org, &runner, "r", "hash").await?;
    Ok((org, runner))
}

/// The job loop's writes, as fast as one task can drive them: queue a job,
/// claim it, complete it. Jobs per second.
async fn job_loop(
    store: Arc<dyn Store>,
    org: OrgId,
    runner: RunnerId,
    stop: Arc<AtomicBool>,
) -> Result<u64> {
    let mut done = 0;
    while !stop.load(Ordering::Relaxed) {
        let id = JobId::generate();
        let spec = JobSpec {
            job_id: id.clone(),
            org_id: org.clone(),
            runner_id: runner.clone(),
            kind: "exec".into(),
            payload: serde_json::json!({"command": "true"}),
            timeout_secs: 60,
            retry: RetryPolicy { max_attempts: 1 },
            created_at_ms: now_ms(),
            redact: Vec::new(),
            role: None,
            sandbox: Default::default(),
            customer_secrets: Vec::new(),
        };
        store
            .enqueue_job(NewJob {
                payload: spec.payload.clone(),
                sealed_spec: "sealed".into(),
                signature: "sig".into(),
                spec,
            })
            .await?;
        let claimed = store.claim(&runner, &["exec".into()], 1, 60_000).await?;
        for j in claimed.jobs {
            store
                .complete(
                    &runner,
                    &j.job_id,
                    Completion {
                        attempt: j.attempt,
                        logs: None,
                        log_lines: 0,
                        result: JobResult {
                            outcome: Outcome::Succeeded,
                            exit_code: Some(0),
                            reason: None,
                            outputs: serde_json::Value::Null,
                        },
                    },
                )
                .await?;
            done += 1;
        }
    }
    Ok(done)
}

/// Audit entries per second through the batching writer, from `callers`
/// tasks each waiting for its entry, while job-loop tasks write to the same
/// store.
async fn append(callers: usize, loops: usize, secs: u64) -> Result<(f64, f64)> {
    let dir = tempfile::tempdir()?;
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(dir.path())?);
    let (org, runner) = org(&*store).await?;
    let auditor = Auditor::start(store.clone());
    let stop = Arc::new(AtomicBool::new(false));
    let mut jobs = Vec::new();
    for _ in 0..loops {
        jobs.push(tokio::spawn(job_loop(
            store.clone(),
            org.clone(),
            runner.clone(),
            stop.clone(),
        )));
    }
    let recorded = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..callers {
        let (auditor, org, stop, recorded) =
            (auditor.clone(), org.clone(), stop.clone(), recorded.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = c as u64;
            while !stop.load(Ordering::Relaxed) {
                auditor.record(&org, entry(i)).await;
                recorded.fetch_add(1, Ordering::Relaxed);
                i += callers as u64;
            }
        }));
    }
    tokio::time::sleep(Duration::from_secs(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let elapsed = started.elapsed().as_secs_f64();
    for t in tasks {
        t.await?;
    }
    let mut job_count = 0;
    for j in jobs {
        job_count += j.await??;
    }
    let v = verify_audit(&*store, &org).await?;
    assert!(v.broken.is_none(), "the chain holds: {:?}", v.broken);
    Ok((
        recorded.load(Ordering::Relaxed) as f64 / elapsed,
        job_count as f64 / elapsed,
    ))
}

/// Seconds to verify a chain of `n` entries (written in batches of 10,000).
async fn verify(n: u64) -> Result<(f64, f64)> {
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(dir.path())?;
    let (org, _) = org(&store).await?;
    let started = Instant::now();
    let mut heads = AuditHeads::default();
    let mut i = 0;
    while i < n {
        let batch: Vec<NewAudit> = (i..(i + 10_000).min(n))
            .map(|k| NewAudit {
                org: org.clone(),
                entry: entry(k),
            })
            .collect();
        i += batch.len() as u64;
        store.append_audit(batch, &mut heads).await?;
    }
    let wrote = started.elapsed().as_secs_f64();
    let started = Instant::now();
    let v = verify_audit(&store, &org).await?;
    let took = started.elapsed().as_secs_f64();
    assert_eq!((v.entries, v.broken), (n, None));
    Ok((wrote, took))
}

/// `/metrics` scrape times with `runners` runners that called just now:
/// (median reading the store, median from the one-second cache).
async fn metrics(runners: usize) -> Result<(f64, f64, usize)> {
    let dir = tempfile::tempdir()?;
    let plane = ControlPlane::open(ServerConfig::new(dir.path())).await?;
    let store = plane.store();
    let org = store.org_named("default").await?;
    for i in 0..runners {
        let id = RunnerId::generate();
        store
            .create_runner(&org, &id, &format!("r{i}"), &format!("h{i}"))
            .await?;
        // A claim records the call.
        store.claim(&id, &["exec".into()], 0, 60_000).await?;
    }
    let control = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let runner = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/metrics", control.local_addr()?);
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(plane.serve(control, runner, async move {
        let _ = rx.await;
    }));
    let http = reqwest::Client::new();
    let scrape = || async {
        let t = Instant::now();
        let body = http.get(&url).send().await?.text().await?;
        Ok::<_, anyhow::Error>((t.elapsed().as_secs_f64() * 1000.0, body))
    };
    let (_, body) = scrape().await?;
    assert!(
        body.contains(&format!("nuon_runners{{health=\"healthy\"}} {runners}")),
        "{body}"
    );
    let mut cold = Vec::new();
    let mut warm = Vec::new();
    for _ in 0..15 {
        tokio::time::sleep(Duration::from_millis(1100)).await;
        cold.push(scrape().await?.0);
        for _ in 0..20 {
            warm.push(scrape().await?.0);
        }
    }
    let _ = tx.send(());
    server.await??;
    Ok((median(cold), median(warm), body.len()))
}

/// Phone-home to runner healthy, `runs` times: each a fresh download of
/// the install's stack (a new one-time token) and a fresh `nuon-runner run
/// --install-token` process, timed from its start to the control plane
/// seeing it call (healthy). Milliseconds, each run.
fn phone_home(runs: usize) -> Result<Vec<f64>> {
    use nuon_tests::{ours, rt};
    let cp = nuon_tests::ControlPlane::start("10s")?;
    let dir = tempfile::tempdir()?;
    let app = dir.path().join("app");
    std::fs::create_dir_all(app.join("actions"))?;
    std::fs::write(app.join("metadata.toml"), "version = \"v2\"\n")?;
    std::fs::write(
        app.join("actions/hello.toml"),
        "name = \"hello\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"say\"\ncommand = \"echo hello\"\n",
    )?;
    let run = |args: &[&str]| -> Result<()> {
        let out = cp.nuon(args);
        anyhow::ensure!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(())
    };
    run(&["apps", "create", "app"])?;
    run(&[
        "apps",
        "sync",
        app.to_str().unwrap_or_default(),
        "--app",
        "app",
    ])?;
    run(&["installs", "create", "--app", "app", "--name", "demo"])?;
    let c = cp.client();
    let runner = rt().block_on(c.get_install("demo"))?.runner_id;
    let mut times = Vec::new();
    for i in 0..runs {
        let stack = rt().block_on(c.install_stack("demo", Some("vm")))?;
        let env = &stack
            .files
            .iter()
            .find(|f| f.path == "nuon-runner.env")
            .ok_or_else(|| anyhow::anyhow!("no settings file"))?
            .contents;
        let token = env
            .lines()
            .find_map(|l| l.strip_prefix("NUON_RUNNER_INSTALL_TOKEN="))
            .ok_or_else(|| anyhow::anyhow!("no token"))?;
        let started_ms = now_ms();
        let t = Instant::now();
        let mut child = ours("nuon-runner")
            .arg("run")
            .args(["--api", &cp.runner_url, "--signing-key", &cp.signing_key])
            .arg("--work-dir")
            .arg(dir.path().join(format!("work-{i}")))
            .env("NUON_RUNNER_INSTALL_TOKEN", token)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(
                dir.path().join(format!("runner-{i}.log")),
            )?)
            .spawn()?;
        let seen = nuon_tests::wait_for("the runner to call", Duration::from_secs(30), || {
            let list = rt().block_on(c.list_runners()).ok()?;
            list.runners
                .iter()
                .find(|r| r.id == runner)
                .and_then(|r| r.last_seen_at_ms)
                .filter(|at| *at >= started_ms)
                .map(|_| ())
        });
        if let Err(e) = seen {
            let log = std::fs::read_to_string(dir.path().join(format!("runner-{i}.log")))
                .unwrap_or_default();
            anyhow::bail!("{e}: {log}");
        }
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        let _ = child.kill();
        let _ = child.wait();
    }
    Ok(times)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() -> Result<()> {
    let picked: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let want = |s: &str| picked.is_empty() || picked.iter().any(|p| p == s);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    println!("| what | result |\n|---|---|");
    if want("append") {
        let (alone, _) = rt.block_on(append(256, 0, 5))?;
        println!("| audit append, SQLite, 256 callers, no other load | {alone:.0} entries/s |");
        let (loaded, jobs) = rt.block_on(append(256, 4, 5))?;
        println!(
            "| audit append, SQLite, 256 callers, under 4 job-loop tasks ({jobs:.0} jobs/s queued, claimed and completed meanwhile) | {loaded:.0} entries/s |"
        );
    }
    if want("verify") {
        let (wrote, took) = rt.block_on(verify(1_000_000))?;
        println!("| write 1,000,000 audit entries (batches of 10,000) | {wrote:.2} s |");
        println!("| `verify` 1,000,000 audit entries | {took:.2} s |");
    }
    if want("phonehome") {
        let times = phone_home(5)?;
        let shown: Vec<String> = times.iter().map(|t| format!("{t:.0}")).collect();
        println!(
            "| install stack: phone-home to runner healthy (process start to its first call seen; median of 5) | {:.0} ms ({} ms) |",
            median(times.clone()),
            shown.join(", ")
        );
    }
    if want("metrics") {
        let (cold, warm, bytes) = rt.block_on(metrics(10_000))?;
        println!(
            "| `/metrics` with 10,000 runners, reading the store (median of 15) | {cold:.2} ms ({bytes} bytes) |"
        );
        println!(
            "| `/metrics` with 10,000 runners, from the 1 s cache (median of 300) | {warm:.2} ms |"
        );
    }
    Ok(())
}
