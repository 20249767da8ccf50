//! Load generator for the job loop, on the real binaries over loopback.
//!
//! `cargo bench -p nuon-benches` (release build). Sections can be picked:
//! `cargo bench -p nuon-benches -- dispatch slowLink throughput bigLog redaction idle ceiling terraform containers`
//! (`containers` runs jobs under runc: root, runc, a static busybox and gcc).
//! Prints a Markdown table for BENCHMARKS.md.
#![allow(missing_docs, unsafe_code)]

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nuon_benches::dispatch::{connected, dispatch, dispatch_through, percentile, queue, runner};
use nuon_benches::terraform::{median, terraform_step};
use nuon_client::ControlClient;
use nuon_control::store::prelude::*;
use nuon_control::store::{NewJob, SqliteStore};
use nuon_core::wire::{Completion, CreateJob, LeaseRef};
use nuon_core::{JobId, JobResult, JobSpec, Outcome, RetryPolicy, RunnerId, now_ms};
use nuon_tests::{ControlPlane, Runner, RunnerOpts, all_logs, rt, wait_job};

/// Trivial jobs claimed and completed per second, 4 runners x 4 slots.
fn throughput() -> Result<f64> {
    let cp = ControlPlane::start("60s")?;
    let client = cp.client();
    let mut procs = Vec::new();
    let mut names = Vec::new();
    for i in 0..4 {
        let name = format!("r{i}");
        let token = cp.create_runner(&name)?;
        procs.push(runner(&cp, &token, 4)?);
        names.push(name);
    }
    drain_rate(&client, &names, 2000)
}

/// Queues `n` `true` jobs round-robin on `runners` (all at once,
/// concurrently), waits for them, and gives the rate from the server's own
/// timestamps: first claim to last completion.
fn drain_rate(client: &ControlClient, runners: &[String], n: usize) -> Result<f64> {
    let ids: Vec<JobId> = rt().block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..n {
            let c = client.clone();
            let r = runners[i % runners.len()].clone();
            set.spawn(async move {
                c.create_job(&CreateJob {
                    runner: r,
                    kind: "exec".into(),
                    payload: serde_json::json!({"command": "true"}),
                    timeout_secs: Some(600),
                    max_attempts: Some(1),
                    sandbox: None,
                })
                .await
                .map(|j| j.id)
            });
        }
        let mut ids = Vec::new();
        while let Some(r) = set.join_next().await {
            ids.push(r??);
        }
        Ok::<_, anyhow::Error>(ids)
    })?;
    let mut first_start = i64::MAX;
    let mut last_finish = 0;
    for id in &ids {
        let job = wait_job(client, id, Duration::from_secs(600))?;
        anyhow::ensure!(job.status == nuon_core::JobStatus::Succeeded, "{job:?}");
        first_start = first_start.min(job.started_at_ms.context("started")?);
        last_finish = last_finish.max(job.finished_at_ms.context("finished")?);
    }
    Ok(n as f64 / ((last_finish - first_start) as f64 / 1000.0))
}

/// The store alone: claim + heartbeat + complete, no HTTP, no processes.
fn ceiling() -> Result<f64> {
    let dir = tempfile::tempdir()?;
    let store = SqliteStore::open(dir.path())?;
    rt().block_on(async {
        let secrets = nuon_control::secrets::SecretBox::new([1; 32]);
        let (org, _) = nuon_control::keys::create_org(&store, &secrets, "bench").await?;
        let runner = RunnerId::generate();
        store
            .create_runner(&org.org_id, &runner, "r", "hash")
            .await?;
        let n = 5000;
        for _ in 0..n {
            let spec = JobSpec {
                job_id: JobId::generate(),
                org_id: org.org_id.clone(),
                runner_id: runner.clone(),
                kind: "exec".into(),
                payload: serde_json::json!({"command": "true"}),
                timeout_secs: 60,
                retry: RetryPolicy::default(),
                created_at_ms: now_ms(),
                redact: Vec::new(),
                role: None,
                sandbox: Default::default(),
                customer_secrets: Vec::new(),
            };
            // The store alone: what it keeps is the caller's to seal.
            let sealed_spec = serde_json::to_string(&spec)?;
            store
                .enqueue_job(NewJob {
                    spec,
                    sealed_spec,
                    signature: String::new(),
                    payload: serde_json::Value::Null,
                })
                .await?;
        }
        let store = std::sync::Arc::new(store);
        let start = Instant::now();
        let mut set = tokio::task::JoinSet::new();
        // 16 concurrent workers, as 4 runners x 4 slots.
        for _ in 0..16 {
            let store = store.clone();
            let runner = runner.clone();
            set.spawn(async move {
                let kinds = vec!["exec".to_string()];
                let mut done = 0u32;
                loop {
                    let claimed = store.claim(&runner, &kinds, 1, 60_000).await?.jobs;
                    let Some(job) = claimed.into_iter().next() else {
                        return Ok::<_, anyhow::Error>(done);
                    };
                    let lease = LeaseRef {
                        job_id: job.job_id.clone(),
                        attempt: job.attempt,
                    };
                    store.heartbeat(&runner, &[lease], 60_000).await?;
                    let result = JobResult {
                        outcome: Outcome::Succeeded,
                        exit_code: Some(0),
                        reason: None,
                        outputs: serde_json::Value::Null,
                    };
                    let end = Completion {
                        attempt: job.attempt,
                        log_lines: 0,
                        result,
                        logs: None,
                    };
                    store.complete(&runner, &job.job_id, end).await?;
                    done += 1;
                }
            });
        }
        let mut total = 0;
        while let Some(r) = set.join_next().await {
            total += r??;
        }
        anyhow::ensure!(total == n, "completed {total} of {n}");
        Ok(f64::from(n) / start.elapsed().as_secs_f64())
    })
}

fn rss_kb(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let rest = stat.rsplit_once(')').map(|x| x.1).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
        + f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0)
}

/// What the 200 MB log benchmark measured; times in seconds, medians.
struct BigLog {
    /// The command alone, into /dev/null.
    bare: f64,
    /// The command piped into `cat > /dev/null`: the cost of a pipe.
    pipe: f64,
    /// The command piped into `cat > FILE`: a pipe and a disk file, the
    /// least any capture that keeps the log must do.
    pipe_file: f64,
    /// The job's own wall time under the runner.
    job: f64,
    /// Queue to completion, every line stored.
    e2e: f64,
    /// Peak RSS in KiB of the control plane and the runner.
    peak: u64,
    runner_peak: u64,
}

/// Runs `sh -c script` `n` times; the median wall time.
fn time_sh(script: &str, n: usize) -> Result<f64> {
    let mut times = Vec::new();
    for _ in 0..n {
        let start = Instant::now();
        let st = std::process::Command::new("sh")
            .args(["-c", script])
            .status()?;
        anyhow::ensure!(st.success(), "{script} failed");
        times.push(start.elapsed().as_secs_f64());
    }
    Ok(median(times))
}

/// A job printing 200 MB of lines: the job's own wall time against the same
/// command into /dev/null, into a pipe and into a file; end-to-end time, and
/// peak memory.
fn big_log(script: &str) -> Result<BigLog> {
    let tmp = tempfile::tempdir()?;
    let file = tmp.path().join("out");
    let bare = time_sh(&format!("{script} > /dev/null"), 5)?;
    let pipe = time_sh(&format!("{script} | cat > /dev/null"), 5)?;
    let pipe_file = time_sh(&format!("{script} | cat > '{}'", file.display()), 5)?;
    drop(tmp);

    let cp = ControlPlane::start("60s")?;
    let client = cp.client();
    let token = cp.create_runner("r")?;
    let r = runner(&cp, &token, 1)?;
    let wrapped =
        format!("s=$(date +%s%N); {script}; e=$(date +%s%N); echo; echo \"elapsed_ns $((e - s))\"");
    let mut peak = 0;
    let mut runner_peak = 0;
    let mut jobs = Vec::new();
    let mut e2es = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        let id = queue(&client, "r", "sh", &["-c", &wrapped])?;
        rt().block_on(async {
            loop {
                peak = peak.max(rss_kb(cp.pid(), "VmRSS:"));
                runner_peak = runner_peak.max(rss_kb(r.pid(), "VmRSS:"));
                let job = client.get_job(&id).await?;
                if job.status.is_terminal() {
                    return Ok::<_, anyhow::Error>(());
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })?;
        e2es.push(start.elapsed().as_secs_f64());
        let job = rt().block_on(client.get_job(&id))?;
        anyhow::ensure!(job.status == nuon_core::JobStatus::Succeeded, "{job:?}");
        let last = rt().block_on(async {
            let mut cursor = 0;
            let mut last = None;
            loop {
                let page = client.job_logs(&id, cursor).await?;
                if page.lines.is_empty() {
                    return Ok::<_, anyhow::Error>(last);
                }
                cursor = page.next;
                last = page.lines.last().cloned();
            }
        })?;
        let last = last.context("no log")?;
        let job_ns: f64 = last
            .text
            .strip_prefix("elapsed_ns ")
            .with_context(|| {
                format!(
                    "last line {:?} of job {job:?}",
                    last.text.chars().take(120).collect::<String>()
                )
            })?
            .parse()?;
        jobs.push(job_ns / 1e9);
    }
    Ok(BigLog {
        bare,
        pipe,
        pipe_file,
        job: median(jobs),
        e2e: median(e2es),
        peak,
        runner_peak,
    })
}

/// The job-loop log throughput with redaction: an install's action step
/// printing `script` (about 200 MB), on an install with `secrets` secrets
/// (each one the runner searches the log for, in every form) against the
/// same on an install with none. The job's own wall time and queue to
/// completion, medians of `runs`.
fn redacted_log(script: &str, secrets: usize, runs: usize) -> Result<(f64, f64)> {
    let cp = ControlPlane::start("60s")?;
    let tmp = tempfile::tempdir()?;
    let app = tmp.path().join("app");
    std::fs::create_dir_all(app.join("actions"))?;
    std::fs::write(app.join("metadata.toml"), "version = \"v2\"\n")?;
    let mut declared = String::new();
    let mut given = Vec::new();
    for i in 0..secrets {
        declared.push_str(&format!(
            "[[secret]]\nname = \"s{i}\"\ndescription = \"secret {i}\"\n"
        ));
        // 26 characters, none of them in the log.
        given.push(format!("s{i}=Zq{i:04}vW8kPx3mRt7yLb2nHc9J"));
    }
    if secrets > 0 {
        std::fs::write(app.join("secrets.toml"), declared)?;
    }
    let wrapped =
        format!("s=$(date +%s%N); {script}; e=$(date +%s%N); echo; echo \"elapsed_ns $((e - s))\"");
    std::fs::write(
        app.join("actions/big.toml"),
        format!(
            "name = \"big\"\ntimeout = \"10m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"print\"\ncommand = '''{wrapped}'''\n"
        ),
    )?;
    let ok = |out: std::process::Output| -> Result<String> {
        anyhow::ensure!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    ok(cp.nuon(&["apps", "create", "app"]))?;
    ok(cp.nuon(&["apps", "sync", &app.to_string_lossy(), "--app", "app"]))?;
    let mut create = vec![
        "installs", "create", "--app", "app", "--name", "demo", "--json",
    ];
    for g in &given {
        create.extend(["--secret", g.as_str()]);
    }
    let created: serde_json::Value = serde_json::from_str(&ok(cp.nuon(&create))?)?;
    let token = created["runner_token"]
        .as_str()
        .context("installs create printed no runner token")?
        .to_owned();
    let _runner = runner(&cp, &token, 1)?;
    let client = cp.client();
    let (mut jobs, mut e2es) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let start = Instant::now();
        let ran: serde_json::Value = serde_json::from_str(&ok(cp.nuon(&[
            "installs",
            "run-action",
            "demo",
            "big",
            "--wait",
            "--json",
        ]))?)?;
        e2es.push(start.elapsed().as_secs_f64());
        anyhow::ensure!(ran["status"] == "succeeded", "{ran:#}");
        let job: JobId = ran["steps"]
            .as_array()
            .and_then(|s| s.iter().find_map(|s| s["job_id"].as_str()))
            .context("the step's job")?
            .parse()?;
        let last = all_logs(&client, &job)?.pop().context("no log")?;
        let ns: f64 = last
            .text
            .strip_prefix("elapsed_ns ")
            .with_context(|| format!("last line {:?}", last.text))?
            .parse()?;
        jobs.push(ns / 1e9);
    }
    Ok((median(jobs), median(e2es)))
}

const TF_MODULE: &str = r#"
variable "name" {
  type = string
}

resource "terraform_data" "db" {
  input = "db-${var.name}"
}

output "url" {
  value = "postgres://${terraform_data.db.output}:5432"
}
"#;

/// The same module with one second of work in its apply (as a provider
/// creating a resource would have).
const TF_MODULE_SLOW: &str = r#"
variable "name" {
  type = string
}

resource "terraform_data" "db" {
  input = "db-${var.name}"
  provisioner "local-exec" {
    command = "sleep 1"
  }
}

output "url" {
  value = "postgres://${terraform_data.db.output}:5432"
}
"#;

/// An idle runner long-polling: resident memory and CPU over 10 s.
fn idle() -> Result<(u64, f64)> {
    let cp = ControlPlane::start("60s")?;
    let token = cp.create_runner("r")?;
    let r = runner(&cp, &token, 4)?;
    std::thread::sleep(Duration::from_secs(2));
    let t0 = cpu_ticks(r.pid());
    std::thread::sleep(Duration::from_secs(10));
    let t1 = cpu_ticks(r.pid());
    let ticks_per_sec = 100.0;
    Ok((
        rss_kb(r.pid(), "VmRSS:"),
        (t1 - t0) as f64 / ticks_per_sec / 10.0 * 100.0,
    ))
}

/// Medians of `nuon dev --once` on a fresh data dir, by phase (as it
/// prints them), over `runs` runs.
fn dev_phases(runs: usize) -> Result<Vec<(String, f64)>> {
    let app = nuon_tests::manifest_dir().join("../examples/apps/hello");
    let mut samples: Vec<Vec<(String, f64)>> = Vec::new();
    for _ in 0..runs {
        let tmp = tempfile::tempdir()?;
        let start = Instant::now();
        let out = nuon_tests::ours("nuon")
            .arg("dev")
            .arg("--once")
            .arg("--data-dir")
            .arg(tmp.path().join("data"))
            .arg("--app-dir")
            .arg(&app)
            .args(["--listen", "127.0.0.1:0", "--runner-listen", "127.0.0.1:0"])
            .output()?;
        let wall = start.elapsed().as_secs_f64();
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        anyhow::ensure!(out.status.success(), "nuon dev --once failed: {text}");
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("==> phases: "))
            .context("no phases line")?;
        let mut phases: Vec<(String, f64)> = line
            .split(" (total")
            .next()
            .unwrap_or("")
            .split(", ")
            .filter_map(|p| {
                let (name, secs) = p.rsplit_once(' ')?;
                Some((name.to_owned(), secs.trim_end_matches('s').parse().ok()?))
            })
            .collect();
        phases.push((
            "wall time of `nuon dev --once` (to every process stopped)".into(),
            wall,
        ));
        samples.push(phases);
    }
    let mut out = Vec::new();
    for (i, (name, _)) in samples[0].iter().enumerate() {
        let mut v: Vec<f64> = samples.iter().map(|s| s[i].1).collect();
        v.sort_by(f64::total_cmp);
        out.push((name.clone(), percentile(&v, 0.5)));
    }
    Ok(out)
}

/// Artifact copies between loopback registries, ours against skopeo, side
/// by side: (name, ours in s, skopeo in s) rows. Every cold copy goes to a
/// registry of its own, started for it, so neither tool can mount or skip
/// what an earlier run left.
fn registry_copy(runs: usize) -> Result<Vec<(String, f64, f64)>> {
    use nuon_plugins::oci::registry::{RegistryConfig, RegistryStore};
    use nuon_plugins::oci::{BlobLocations, CopyOptions, copy};
    use nuon_tests::{Registry, make_image};
    anyhow::ensure!(which_ok("skopeo"), "skopeo is not installed");
    let fresh = || -> Result<Registry> {
        Registry::start(None)?.context("docker-registry is not installed")
    };
    let store = |r: &Registry| RegistryStore::new(&RegistryConfig::new(&r.url));
    let a = fresh()?;
    let ra = store(&a)?;
    // The fixture: layers of 1, 10 and 50 MiB of random data.
    rt().block_on(make_image(
        &ra,
        "fx/img",
        "1",
        &[(1 << 20, 41), (10 << 20, 42), (50 << 20, 43)],
        &["linux/amd64"],
    ))?;
    // 20 images with 2 tags each: a shared 10 MiB base layer and a 1 MiB
    // layer of their own.
    for n in 0..20u64 {
        for (t, tag) in ["a", "b"].iter().enumerate() {
            let own = 1000 + n * 2 + t as u64;
            rt().block_on(make_image(
                &ra,
                &format!("many/img{n}"),
                tag,
                &[(10 << 20, 7), (1 << 20, own)],
                &["linux/amd64"],
            ))?;
        }
    }
    let skopeo = |args: &[&str]| -> Result<f64> {
        let start = Instant::now();
        let out = std::process::Command::new("skopeo")
            .args(["--insecure-policy"])
            .args(args)
            .output()?;
        anyhow::ensure!(
            out.status.success(),
            "skopeo {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(start.elapsed().as_secs_f64())
    };
    let tls = ["--src-tls-verify=false", "--dest-tls-verify=false"];
    let sk_copy = |dst: &Registry, repo: &str| {
        let (src, dst) = (
            format!("docker://{}/fx/img:1", a.host),
            format!("docker://{}/{repo}:1", dst.host),
        );
        skopeo(&["copy", "--quiet", tls[0], tls[1], &src, &dst])
    };
    let sk_sync = |src_repo: &str, dst: &Registry, prefix: &str| {
        let (src, dst) = (
            format!("{}/{src_repo}", a.host),
            format!("{}/{prefix}", dst.host),
        );
        skopeo(&[
            "sync", "--src", "docker", "--dest", "docker", tls[0], tls[1], &src, &dst,
        ])
    };
    let ours = |dst: &RegistryStore,
                src_repo: &str,
                tag: &str,
                dst_repo: &str,
                opts: &CopyOptions|
     -> Result<f64> {
        let start = Instant::now();
        rt().block_on(copy(&ra, src_repo, tag, dst, dst_repo, Some(tag), opts))?;
        Ok(start.elapsed().as_secs_f64())
    };
    let opts = CopyOptions::default();
    let (mut cold_ours, mut cold_copy, mut cold_sync) = (vec![], vec![], vec![]);
    let (mut warm_ours, mut warm_copy, mut warm_sync) = (vec![], vec![], vec![]);
    for _ in 0..runs {
        let (b1, b2, b3) = (fresh()?, fresh()?, fresh()?);
        let rb1 = store(&b1)?;
        cold_ours.push(ours(&rb1, "fx/img", "1", "fx/img", &opts)?);
        cold_copy.push(sk_copy(&b2, "fx/img")?);
        cold_sync.push(sk_sync("fx/img:1", &b3, "sync")?);
        warm_ours.push(ours(&rb1, "fx/img", "1", "fx/img", &opts)?);
        warm_copy.push(sk_copy(&b2, "fx/img")?);
        warm_sync.push(sk_sync("fx/img:1", &b3, "sync")?);
    }
    let mut rows = vec![
        (
            "image of 1 + 10 + 50 MiB, cold: ours / skopeo copy".to_owned(),
            median(cold_ours.clone()),
            median(cold_copy),
        ),
        (
            "same, cold: ours / skopeo sync".to_owned(),
            median(cold_ours),
            median(cold_sync),
        ),
        (
            "same, warm (everything there): ours / skopeo copy".to_owned(),
            median(warm_ours.clone()),
            median(warm_copy),
        ),
        (
            "same, warm: ours / skopeo sync".to_owned(),
            median(warm_ours),
            median(warm_sync),
        ),
    ];
    // The 20 images, one run each way (cold on fresh registries, then warm).
    let (b1, b2) = (fresh()?, fresh()?);
    let rb1 = store(&b1)?;
    let with_mounts = CopyOptions {
        locations: Some(std::sync::Arc::new(BlobLocations::default())),
        ..CopyOptions::default()
    };
    let all = || -> Result<f64> {
        let mut t = 0.0;
        for n in 0..20 {
            for tag in ["a", "b"] {
                let repo = format!("many/img{n}");
                t += ours(&rb1, &repo, tag, &repo, &with_mounts)?;
            }
        }
        Ok(t)
    };
    let sync_all = || -> Result<f64> {
        let mut t = 0.0;
        for n in 0..20 {
            t += sk_sync(&format!("many/img{n}"), &b2, "many")?;
        }
        Ok(t)
    };
    let (ours_cold, sk_cold) = (all()?, sync_all()?);
    let (ours_warm, sk_warm) = (all()?, sync_all()?);
    rows.push((
        "20 images × 2 tags sharing a base layer, cold: ours (mounts) / skopeo sync".into(),
        ours_cold,
        sk_cold,
    ));
    rows.push((
        "20 images × 2 tags, warm: ours / skopeo sync".into(),
        ours_warm,
        sk_warm,
    ));
    Ok(rows)
}

/// The WASM host with the example records plugin: first compile, cold
/// load from the on-disk cache, warm calls (a fresh instance each), and
/// memory per live instance.
fn wasm() -> Result<Vec<(String, String)>> {
    use nuon_plugins::wasm::{Call, CallContext, HostConfig, PlanMode, Request, WasmHost};
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    let Some(plugins) = nuon_tests::wasm_plugins() else {
        anyhow::bail!("the wasm32-wasip2 target is not installed");
    };
    let svc = nuon_tests::RecordService::start("t")?;
    let tmp = tempfile::tempdir()?;
    let cache = tmp.path().join("cache");
    let records = std::fs::read(&plugins.records)?;
    let hostile = std::fs::read(&plugins.hostile)?;
    let limits = nuon_core::wasm::Limits {
        memory: 64 << 20,
        timeout: Duration::from_secs(10),
    };
    let mut out = Vec::new();
    nuon_tests::rt().block_on(async {
        let host = WasmHost::new(HostConfig { cache_dir: Some(cache.clone()), max_instances: 256 })?;
        let t = Instant::now();
        let p = host.load(&records, &limits).await?;
        out.push((
            format!("first compile of the records plugin ({} KiB component), load + `info`", records.len() >> 10),
            format!("{:.0} ms", t.elapsed().as_secs_f64() * 1000.0),
        ));
        let mut cold = Vec::new();
        for _ in 0..20 {
            let h = WasmHost::new(HostConfig { cache_dir: Some(cache.clone()), max_instances: 8 })?;
            let t = Instant::now();
            let p = h.load(&records, &limits).await?;
            cold.push(t.elapsed().as_secs_f64() * 1000.0);
            assert_eq!(p.loaded.0, nuon_plugins::wasm::LoadedFrom::DiskCache);
        }
        out.push((
            "cold load from the on-disk compile cache (MAC check, deserialize, link, pre-instantiate, one `info` call), median of 20".into(),
            format!("{:.2} ms", median(cold)),
        ));
        let (log, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let ctx = CallContext {
            work_dir: tmp.path().to_path_buf(),
            env: Vec::new(),
            allowed_hosts: vec!["127.0.0.1".into()],
            secrets: [("records_token".to_string(), "t".to_string())].into(),
            limits: limits.clone(),
            stop: Arc::new(AtomicBool::new(false)),
            log,
        };
        let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
        let config = serde_json::json!({"endpoint": svc.url, "collection": "c", "id": "i", "fields": {"a": 1}, "token_secret": "records_token"});
        let req = Request { config: config.to_string(), state: None };
        let time_calls = |n: usize, call: Call| {
            let (host, p, ctx) = (&host, &p, &ctx);
            async move {
                let mut v = Vec::new();
                for _ in 0..n {
                    let t = Instant::now();
                    host.call(p, ctx, call.clone()).await?;
                    v.push(t.elapsed().as_secs_f64() * 1e6);
                }
                v.sort_by(f64::total_cmp);
                Ok::<_, anyhow::Error>((percentile(&v, 0.5), percentile(&v, 0.99)))
            }
        };
        time_calls(200, Call::Validate(config.to_string())).await?;
        let (p50, p99) = time_calls(2000, Call::Validate(config.to_string())).await?;
        out.push(("warm call, records plugin: fresh instance + `validate` (no I/O)".into(), format!("p50 {p50:.0} µs, p99 {p99:.0} µs")));
        let (p50, p99) = time_calls(1000, Call::Plan(req.clone(), PlanMode::Deploy)).await?;
        out.push(("warm call, records plugin: fresh instance + `plan` (one HTTP GET to a loopback service)".into(), format!("p50 {p50:.0} µs, p99 {p99:.0} µs")));
        let hp = host.load(&hostile, &limits).await?;
        let none = Request { config: r#"{"attack":"none"}"#.into(), state: None };
        let mut v = Vec::new();
        for i in 0..2200 {
            let t = Instant::now();
            host.call(&hp, &ctx, Call::Plan(none.clone(), PlanMode::Deploy)).await?;
            if i >= 200 {
                v.push(t.elapsed().as_secs_f64() * 1e6);
            }
        }
        v.sort_by(f64::total_cmp);
        out.push(("warm call, an SDK plugin whose `plan` does no I/O: fresh instance + `plan`".into(), format!("p50 {:.0} µs, p99 {:.0} µs", percentile(&v, 0.5), percentile(&v, 0.99))));
        let rss = || rss_kb(std::process::id(), "VmRSS:");
        let before = rss();
        let mut held = Vec::new();
        for _ in 0..200 {
            held.push(host.hold_instance(&p, &ctx).await?);
        }
        let after = rss();
        out.push(("memory per live instance of the records plugin (RSS growth over 200 live instances)".into(), format!("{:.0} KiB", (after.saturating_sub(before)) as f64 / 200.0)));
        drop(held);
        drop(ctx);
        let _ = drain.await;
        if let Some(py) = nuon_tests::python_plugin() {
            let bytes = std::fs::read(&py)?;
            let big = nuon_core::wasm::Limits { memory: 256 << 20, timeout: Duration::from_secs(60) };
            let h = WasmHost::new(HostConfig { cache_dir: Some(tmp.path().join("pycache")), max_instances: 8 })?;
            let t = Instant::now();
            h.load(&bytes, &big).await?;
            out.push((format!("Python plugin ({} MiB component): first compile", bytes.len() >> 20), format!("{:.1} s", t.elapsed().as_secs_f64())));
            let h = WasmHost::new(HostConfig { cache_dir: Some(tmp.path().join("pycache")), max_instances: 8 })?;
            let t = Instant::now();
            let pp = h.load(&bytes, &big).await?;
            out.push(("Python plugin: cold load from the compile cache".into(), format!("{:.0} ms", t.elapsed().as_secs_f64() * 1000.0)));
            let (log, mut rx) = tokio::sync::mpsc::unbounded_channel();
            let ctx = CallContext { work_dir: tmp.path().to_path_buf(), env: Vec::new(), allowed_hosts: Vec::new(), secrets: Default::default(), limits: big, stop: Arc::new(AtomicBool::new(false)), log };
            let drain = tokio::spawn(async move { while rx.recv().await.is_some() {} });
            let req = Request { config: r#"{"items":{"a":1}}"#.into(), state: None };
            let mut v = Vec::new();
            for _ in 0..50 {
                let t = Instant::now();
                h.call(&pp, &ctx, Call::Plan(req.clone(), PlanMode::Deploy)).await?;
                v.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            drop(ctx);
            let _ = drain.await;
            out.push(("Python plugin: warm call, fresh instance + `plan`, median of 50".into(), format!("{:.2} ms", median(v))));
        }
        Ok::<_, anyhow::Error>(())
    })?;
    Ok(out)
}

/// A static program printing the wall clock in nanoseconds: busybox's
/// `date` has no `%N`, and a tool image has no libraries.
fn clock_binary(dir: &std::path::Path) -> Result<std::path::PathBuf> {
    let src = dir.join("clock.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\n#include <time.h>\nint main(void){struct timespec t;clock_gettime(CLOCK_REALTIME,&t);printf(\"%lld%09ld\\n\",(long long)t.tv_sec,t.tv_nsec);return 0;}\n",
    )?;
    let bin = dir.join("clock");
    let st = std::process::Command::new("gcc")
        .args(["-static", "-O2", "-o"])
        .arg(&bin)
        .arg(&src)
        .status()?;
    anyhow::ensure!(st.success(), "gcc -static failed (libc6-dev has libc.a)");
    Ok(bin)
}

/// Jobs in containers against process groups, on one control plane: a
/// runner of each, one slot each. Dispatch (queued → the job's first
/// process reads the clock) and a trivial job's end to end (queued →
/// completed), medians of `n`; the first job of a new image digest (its
/// unpack) separately; then `true` jobs through 4 runners × 4 slots of
/// each isolation.
fn containers(n: usize) -> Result<Vec<(String, String)>> {
    let tmp = tempfile::tempdir()?;
    let clock = clock_binary(tmp.path())?;
    let cp = ControlPlane::start("60s")?;
    let client = cp.client();
    let busybox = which::which("busybox").context("busybox (busybox-static)")?;
    let mut rows = Vec::new();
    let start_runner = |name: &str, container: bool, slots: u32| -> Result<(Runner, String)> {
        let token = cp.create_runner(name)?;
        let work = tmp.path().join(name);
        std::fs::create_dir_all(&work)?;
        let store = nuon_plugins::oci::LayoutStore::open(work.join("store"))?;
        let digest = rt().block_on(nuon_plugins::oci::image::push_tool_image(
            &store,
            "nuon-tools/clock",
            "1",
            &busybox,
            &[("clock".into(), clock.clone())],
        ))?;
        let image = format!("nuon-tools/clock@{digest}");
        let mut args = vec![];
        if container {
            args = vec!["--isolation", "container", "--job-image", &image];
        }
        let r = Runner::start_with_args(
            &cp.runner_url,
            RunnerOpts {
                token: &token,
                signing_key: &cp.signing_key,
                slots,
                grace: "5s",
                work_dir: Some(&work),
            },
            &args,
        )?;
        Ok((r, image))
    };
    let (_p, _) = start_runner("process", false, 1)?;
    let (_c, _) = start_runner("container", true, 1)?;
    connected(&client)?;
    let now_ns = || -> Result<f64> {
        Ok(std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_nanos() as f64)
    };
    let clock_path = clock.display().to_string();
    let measure = |runner: &str, program: &str, count: usize| -> Result<(Vec<f64>, Vec<f64>)> {
        let (mut dispatch, mut e2e) = (Vec::new(), Vec::new());
        for _ in 0..count {
            let sent = now_ns()?;
            let started = Instant::now();
            let id = queue(&client, runner, program, &[])?;
            let job = wait_job(&client, &id, Duration::from_secs(60))?;
            anyhow::ensure!(job.status == nuon_core::JobStatus::Succeeded, "{job:?}");
            e2e.push(started.elapsed().as_secs_f64() * 1e3);
            let logs = all_logs(&client, &id)?;
            let line = logs
                .iter()
                .find(|l| l.stream == nuon_core::wire::LogStream::Stdout)
                .context("no clock line")?;
            let at: f64 = line.text.trim().parse()?;
            dispatch.push((at - sent) / 1e6);
        }
        Ok((dispatch, e2e))
    };
    // The first job of the image's digest: fetched, checked, unpacked.
    let (first, first_e2e) = measure("container", "clock", 1)?;
    rows.push((
        "container: the first job of a new image digest (2 MB busybox image), queued → process started / completed".into(),
        format!("{:.1} ms / {:.1} ms", first[0], first_e2e[0]),
    ));
    let (pd, pe) = measure("process", &clock_path, n)?;
    let (cd, ce) = measure("container", "clock", n)?;
    let p50 = |v: &[f64]| {
        let mut v = v.to_vec();
        v.sort_by(f64::total_cmp);
        (percentile(&v, 0.5), percentile(&v, 0.99))
    };
    let ((pd50, pd99), (cd50, cd99)) = (p50(&pd), p50(&cd));
    let ((pe50, pe99), (ce50, ce99)) = (p50(&pe), p50(&ce));
    rows.push((
        format!("dispatch, queued → process started, {n} jobs: process / container (image cached)"),
        format!(
            "p50 {pd50:.1} / {cd50:.1} ms (+{:.1} ms), p99 {pd99:.1} / {cd99:.1} ms",
            cd50 - pd50
        ),
    ));
    rows.push((
        format!("a trivial job end to end, queued → completed, {n} jobs: process / container"),
        format!(
            "p50 {pe50:.1} / {ce50:.1} ms (+{:.1} ms), p99 {pe99:.1} / {ce99:.1} ms",
            ce50 - pe50
        ),
    ));
    drop((_p, _c));
    for container in [false, true] {
        let mut runners = Vec::new();
        let mut names = Vec::new();
        let what = if container { "container" } else { "process" };
        for i in 0..4 {
            let name = format!("{what}-t{i}");
            runners.push(start_runner(&name, container, 4)?.0);
            names.push(name);
        }
        // Each container runner's first job unpacks the image: warm up.
        for name in &names {
            let id = queue(&client, name, "true", &[])?;
            wait_job(&client, &id, Duration::from_secs(60))?;
        }
        let jobs = if container { 400 } else { 2000 };
        let rate = drain_rate(&client, &names, jobs)?;
        rows.push((
            format!(
                "trivial jobs (`true`), 4 runners × 4 slots, {what}, first claim → last completion"
            ),
            format!("{rate:.0} jobs/s ({jobs} jobs)"),
        ));
    }
    Ok(rows)
}

fn which_ok(name: &str) -> bool {
    std::process::Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    // Quiet logs, as in production.
    if std::env::var_os("NUON_TEST_RUST_LOG").is_none() {
        // SAFETY: single-threaded at this point.
        unsafe { std::env::set_var("NUON_TEST_RUST_LOG", "warn") };
    }
    let want = |name: &str| args.is_empty() || args.iter().any(|a| a == name);
    println!("| benchmark | result |\n|---|---|");
    if want("containers") {
        for (what, result) in containers(100)? {
            println!("| {what} | {result} |");
        }
    }
    if want("wasm") {
        for (what, result) in wasm()? {
            println!("| {what} | {result} |");
        }
    }
    if want("dispatch") {
        for n in [1, 100] {
            let (p50, p99, max) = dispatch(n)?;
            println!(
                "| dispatch latency, {n} runner(s), queued → process started | p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms |"
            );
        }
    }
    if want("slowLink") {
        let (p50, p99, max) = dispatch_through(Duration::from_millis(300))?;
        println!(
            "| dispatch latency through a 300 ms RTT link, queued → process started | p50 {p50:.1} ms, p99 {p99:.1} ms, max {max:.1} ms |"
        );
    }
    if want("throughput") {
        let t = throughput()?;
        println!("| trivial jobs (`true`), 4 runners × 4 slots, end to end | {t:.0} jobs/s |");
    }
    if want("ceiling") {
        let t = ceiling()?;
        println!(
            "| raw SQLite store claim + heartbeat + complete, 16 workers, no HTTP | {t:.0} jobs/s |"
        );
    }
    if want("bigLog") {
        let producers = [
            (
                "`yes | head -c 200000000`",
                "yes 'the quick brown fox jumps over the lazy dog, 0123456789 abcdefghijklmnop' | head -c 200000000",
            ),
            (
                "awk printing 2.5 M lines (211 MB)",
                "awk 'BEGIN{for(i=0;i<2500000;i++) printf \"line %d the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnop\\n\", i}'",
            ),
            // The worst case per byte: 25 M lines of 8.5 bytes, each of
            // which costs a record of its own (stream, timestamp).
            ("`seq 1 25000000` (214 MB)", "seq 1 25000000"),
        ];
        for (name, script) in producers {
            let b = big_log(script)?;
            println!("| {name}: bare, into /dev/null | {:.2} s |", b.bare);
            println!(
                "| {name}: into `cat > /dev/null` (a pipe) | {:.2} s |",
                b.pipe
            );
            println!(
                "| {name}: into `cat > FILE` (a pipe and a file) | {:.2} s |",
                b.pipe_file
            );
            println!(
                "| {name}: job wall time under the runner | {:.2} s ({:.2}× bare, {:.2}× pipe, {:.2}× pipe and file) |",
                b.job,
                b.job / b.bare,
                b.job / b.pipe,
                b.job / b.pipe_file
            );
            println!(
                "| {name}: until every line is stored and the job complete | {:.2} s |",
                b.e2e
            );
            println!(
                "| {name}: peak RSS control plane / runner | {} MB / {} MB |",
                b.peak / 1024,
                b.runner_peak / 1024
            );
        }
    }
    if want("redaction") {
        let awk = "awk 'BEGIN{for(i=0;i<2500000;i++) printf \"line %d the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnop\\n\", i}'";
        // Interleaved: none, 50, none, 50, … (each an install of its own).
        let (mut none, mut fifty) = (Vec::new(), Vec::new());
        for _ in 0..4 {
            none.push(redacted_log(awk, 0, 3)?);
            fifty.push(redacted_log(awk, 50, 3)?);
        }
        let pick = |v: &[(f64, f64)], f: fn(&(f64, f64)) -> f64| median(v.iter().map(f).collect());
        let (j0, e0) = (pick(&none, |r| r.0), pick(&none, |r| r.1));
        let (j50, e50) = (pick(&fifty, |r| r.0), pick(&fifty, |r| r.1));
        println!(
            "| action step printing 211 MB (awk, 2.5 M lines): job wall time, no secret / 50 secrets | {j0:.2} s / {j50:.2} s ({:+.1}%) |",
            (j50 / j0 - 1.0) * 100.0
        );
        println!(
            "| the same: run-action to completion, every line stored, no secret / 50 secrets | {e0:.2} s / {e50:.2} s ({:+.1}%) |",
            (e50 / e0 - 1.0) * 100.0
        );
    }
    if want("terraform") {
        for (label, module) in [
            ("", TF_MODULE),
            (", module with 1 s of apply work", TF_MODULE_SLOW),
        ] {
            let (bare_plan, plan, bare_apply, apply) = terraform_step(5, module, &[])?;
            println!(
                "| terraform plan step (init + plan -out){label}: by hand / as a job, queue to completion | {:.0} ms / {:.0} ms ({:.2}×, +{:.0} ms) |",
                bare_plan * 1e3,
                plan * 1e3,
                plan / bare_plan,
                (plan - bare_plan) * 1e3
            );
            println!(
                "| terraform apply step (init + apply of the saved plan){label}: by hand / as a job | {:.0} ms / {:.0} ms ({:.2}×, +{:.0} ms) |",
                bare_apply * 1e3,
                apply * 1e3,
                apply / bare_apply,
                (apply - bare_apply) * 1e3
            );
        }
    }
    if want("dev") {
        for (name, secs) in dev_phases(5)? {
            println!(
                "| `nuon dev --once`, empty data dir: {name} | {:.0} ms |",
                secs * 1e3
            );
        }
    }
    if want("registry") {
        for (name, ours, theirs) in registry_copy(5)? {
            println!(
                "| {name} | {:.3} s / {:.3} s ({:.2}×) |",
                ours,
                theirs,
                ours / theirs
            );
        }
    }
    if want("idle") {
        let (rss, cpu) = idle()?;
        println!(
            "| idle runner long-polling: RSS, CPU over 10 s | {} MB, {cpu:.2} % |",
            rss / 1024
        );
    }
    Ok(())
}
