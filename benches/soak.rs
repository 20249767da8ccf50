//! Soak: a bounded long run of the real binaries with faults at random
//! times, checking the job loop's invariants at the end and the processes'
//! memory and file descriptors along the way.
//!
//! `cargo bench -p nuon-benches --bench soak -- [--secs 3600] [--rate 5]
//! [--runners 4] [--installs 4] [--rollout-every 180]`: three `nuon-ctl`
//! replicas on a throwaway PostgreSQL (`a` and `b`, and `c`, started with
//! `--no-lead` and never killed: its memory is the control plane's
//! series), `--runners` `nuon-runner` processes (each given every
//! replica), a steady `--rate` of jobs a second through any replica,
//! `--installs` installs of an app of one Terraform module, each with its
//! own runner, given a new release in a rollout every `--rollout-every`
//! seconds (see `soak/rollouts.rs`), and every 20 to 60 s a `kill -9` of a
//! runner (an install's included), of the replica that does not lead, or
//! of the leader, started again 3 to 10 s later (same work dir, same
//! ports). Runner `r0` is never killed: its memory is the runner's series.
//!
//! At the end every job must have ended, none run to its end twice (each
//! job's script marks a file as its last act), and the last attempt of
//! each its whole log, in order. The first 60 s run without faults: their
//! dispatch latency is the quiet baseline the faulty part is compared
//! with. Memory (RSS) and open descriptors are sampled every 10 s; growth
//! is reported from a sixth of the run (the 10th minute of an hour) to the
//! end, for each process that was not restarted in that window. Every
//! rollout must have ended, and every install's workflow. The
//! processes log as the tests' do (`NUON_TEST_RUST_LOG=info` for less).
#![allow(missing_docs)]

#[path = "soak/rollouts.rs"]
mod rollouts;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nuon_benches::dispatch::percentile;
use nuon_client::ControlClient;
use nuon_core::wire::CreateJob;
use nuon_core::{JobId, JobStatus};
use nuon_tests::{ControlPlane, PgCluster, Runner, RunnerOpts, all_logs, rt, wait_for};

struct Args {
    secs: u64,
    rate: f64,
    runners: usize,
    installs: usize,
    rollout_every: u64,
}

fn args() -> Result<Args> {
    let mut a = Args {
        secs: 3600,
        rate: 5.0,
        runners: 4,
        installs: 4,
        rollout_every: 180,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = || it.next().context("a value after the flag");
        match arg.as_str() {
            "--secs" => a.secs = value()?.parse()?,
            "--rate" => a.rate = value()?.parse()?,
            "--runners" => a.runners = value()?.parse()?,
            "--installs" => a.installs = value()?.parse()?,
            "--rollout-every" => a.rollout_every = value()?.parse()?,
            "--bench" => {}
            other => bail!(
                "unknown argument {other} (--secs, --rate, --runners, --installs, --rollout-every)"
            ),
        }
    }
    if a.runners < 2 || a.rate <= 0.0 || a.secs < 120 || a.rollout_every < 30 {
        bail!(
            "--runners at least 2, --rate above 0, --secs at least 120, --rollout-every at least 30"
        );
    }
    Ok(a)
}

/// A small random number generator (xorshift), seeded by the clock.
struct Rng(u64);

impl Rng {
    fn new() -> Rng {
        Rng(nuon_core::now_ms() as u64 | 1)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
    fn secs(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_secs(from + self.below(to - from + 1))
    }
}

/// A replica and where its log stood when it (re)started.
struct Replica {
    cp: ControlPlane,
    name: &'static str,
    log_from: usize,
    started: Instant,
}

impl Replica {
    /// Whether it leads maintenance now (the last of its process's log
    /// lines about it says so).
    fn leads(&self) -> bool {
        let log = self.cp.server_log();
        let own = log.get(self.log_from..).unwrap_or("");
        let took = own.rfind("this replica leads maintenance");
        let lost = own.rfind("no longer leads maintenance");
        took.is_some() && took > lost
    }
}

/// A runner process and how to start it again.
struct SoakRunner {
    proc: Option<Runner>,
    name: String,
    token: String,
    dir: PathBuf,
    api: String,
    /// More arguments of `nuon-runner run` (an install's runner: its store
    /// and the artifact store).
    args: Vec<String>,
    started: Instant,
}

impl SoakRunner {
    fn start(&mut self, key: &str) -> Result<()> {
        let args: Vec<&str> = self.args.iter().map(String::as_str).collect();
        self.proc = Some(Runner::start_with_args(
            &self.api,
            RunnerOpts {
                token: &self.token,
                signing_key: key,
                slots: 4,
                grace: "5s",
                work_dir: Some(&self.dir),
            },
            &args,
        )?);
        self.started = Instant::now();
        Ok(())
    }
}

/// A process's resident memory (KiB) and open descriptors.
fn footprint(pid: u32) -> (u64, usize) {
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    (rss, fds)
}

/// A queued job: its number, id, when it was sent, and whether faults had
/// begun by then.
struct Queued {
    n: u64,
    id: JobId,
    sent_ns: f64,
    faulty: bool,
    runner: usize,
    sent: Instant,
}

fn unix_ns() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_nanos() as f64)
}

/// Queues job `n` through either replica (one may be down): its id, and
/// when the call that queued it was sent (ns since the epoch).
fn queue(clients: &[ControlClient], n: u64, runner: &str, marks: &Path) -> Result<(JobId, f64)> {
    let script = format!(
        "date +%s%N; echo soak-{n}-1; echo soak-{n}-2; echo soak-{n}-3; echo ran >> {}/{n}",
        marks.display()
    );
    let job = CreateJob {
        runner: runner.into(),
        kind: "exec".into(),
        payload: serde_json::json!({"command": "sh", "args": ["-c", script]}),
        timeout_secs: Some(600),
        max_attempts: Some(3),
        sandbox: None,
    };
    let first = (n as usize) % clients.len();
    let mut last = None;
    for i in 0..clients.len() * 3 {
        let c = &clients[(first + i) % clients.len()];
        let sent_ns = unix_ns();
        match rt().block_on(c.create_job(&job)) {
            Ok(j) => return Ok((j.id, sent_ns)),
            Err(e) => last = Some(e),
        }
        // Both tried: a moment before the next round.
        if i % clients.len() == clients.len() - 1 {
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    Err(last.map_or_else(|| anyhow::anyhow!("no replica"), Into::into))
}

fn main() -> Result<()> {
    let args = args()?;
    let Some(pg) = PgCluster::start_with(true)? else {
        bail!("PostgreSQL's server binaries are needed for the soak");
    };
    let tmp = tempfile::tempdir()?;
    let data = tmp.path().join("data");
    let marks = tmp.path().join("marks");
    std::fs::create_dir_all(&marks)?;
    let lease = "10s";
    let start_replica = |name: &'static str, args: &[&str]| -> Result<Replica> {
        let cp = ControlPlane::start_replica_with(&data, lease, &pg.url, tmp.path(), name, args)?;
        Ok(Replica {
            log_from: cp.server_log().len(),
            cp,
            name,
            started: Instant::now(),
        })
    };
    let a = start_replica("a", &[])?;
    wait_for("replica a to lead", Duration::from_secs(30), || {
        a.leads().then_some(())
    })?;
    let b = start_replica("b", &[])?;
    // Never killed, never leading: the control plane's memory series.
    let c = start_replica("c", &["--no-lead"])?;
    let mut replicas = [a, b, c];
    let key = replicas[0].cp.signing_key.clone();
    let urls: Vec<String> = replicas.iter().map(|r| r.cp.runner_url.clone()).collect();
    let clients: Vec<ControlClient> = replicas.iter().map(|r| r.cp.client()).collect();
    let vendor = tmp.path().join("vendor");
    let mut rollouts = rollouts::Rollouts::start(&replicas[2].cp, tmp.path(), &vendor)?;
    let installs = rollouts::Rollouts::installs(&clients[2], args.installs)?;
    let mut runners = Vec::new();
    let named = (0..args.runners).map(|i| (format!("r{i}"), None));
    let of_installs = installs.iter().map(|(n, t)| (n.clone(), Some(t.clone())));
    for (i, (name, install_token)) in named.chain(of_installs).enumerate() {
        let dir = tmp.path().join(&name);
        let (token, args) = match install_token {
            None => (replicas[0].cp.create_runner(&name)?, Vec::new()),
            Some(token) => {
                let store = dir.join("store").to_string_lossy().into_owned();
                let vendor = vendor.to_string_lossy().into_owned();
                let args = ["--store-dir", &store, "--vendor-store", &vendor];
                (token, args.map(str::to_owned).to_vec())
            }
        };
        // Each starts on another replica first.
        let api = (0..urls.len())
            .map(|k| urls[(i + k) % urls.len()].as_str())
            .collect::<Vec<_>>()
            .join(",");
        let mut r = SoakRunner {
            proc: None,
            name,
            token,
            dir,
            api,
            args,
            started: Instant::now(),
        };
        r.start(&key)?;
        runners.push(r);
    }
    std::thread::sleep(Duration::from_secs(2));

    let mut rng = Rng::new();
    let begin = Instant::now();
    let run = Duration::from_secs(args.secs);
    let quiet = Duration::from_secs(60);
    let window_from = run / 6;
    let every = Duration::from_secs_f64(1.0 / args.rate);
    let mut next_fault = begin + quiet + rng.secs(20, 60);
    let rollout_every = Duration::from_secs(args.rollout_every);
    let mut next_rollout = begin + quiet;
    let mut next_look = begin + quiet;
    // A process killed, and when it starts again: a runner's index or a
    // replica's (as `usize::MAX - i`).
    let mut down: Option<(usize, Instant)> = None;
    let mut kills = (0u32, 0u32, 0u32); // runners, replicas not leading, leaders
    // When each runner was down: (runner, killed, started again).
    let mut outages: Vec<(usize, Instant, Instant)> = Vec::new();
    let mut killed_at = begin;
    let mut queued: Vec<Queued> = Vec::new();
    // (seconds, replicas a, b and c, runner r0) footprints.
    let mut samples: Vec<(u64, [(u64, usize); 4])> = Vec::new();
    let mut next_sample = begin;
    let mut n = 0u64;
    let mut next_job = begin;
    while begin.elapsed() < run {
        let now = Instant::now();
        if now >= next_job {
            let runner = (n as usize) % args.runners;
            let (id, sent_ns) = queue(&clients, n, &runners[runner].name, &marks)?;
            queued.push(Queued {
                n,
                id,
                sent_ns,
                faulty: now >= begin + quiet,
                runner,
                sent: now,
            });
            n += 1;
            next_job += every;
        }
        if now >= next_sample {
            let fp = [
                footprint(replicas[0].cp.pid()),
                footprint(replicas[1].cp.pid()),
                footprint(replicas[2].cp.pid()),
                footprint(runners[0].proc.as_ref().map_or(0, |r| r.pid())),
            ];
            samples.push((begin.elapsed().as_secs(), fp));
            next_sample += Duration::from_secs(10);
        }
        if now >= next_rollout {
            rollouts.roll(&replicas[2].cp)?;
            eprintln!(
                "{:>5} s: rollout {} asked for",
                begin.elapsed().as_secs(),
                rollouts.asked()
            );
            next_rollout += rollout_every;
        }
        if now >= next_look {
            rollouts.active(&clients[2])?;
            next_look = now + Duration::from_secs(5);
        }
        if let Some((who, back_at)) = down
            && now >= back_at
        {
            if who >= usize::MAX - 1 {
                let r = &mut replicas[usize::MAX - who];
                r.cp.restart()?;
                r.log_from = r.cp.server_log().len();
                r.started = Instant::now();
                eprintln!(
                    "{:>5} s: replica {} started again",
                    begin.elapsed().as_secs(),
                    r.name
                );
            } else {
                runners[who].start(&key)?;
                outages.push((who, killed_at, Instant::now()));
                eprintln!(
                    "{:>5} s: runner {} started again",
                    begin.elapsed().as_secs(),
                    runners[who].name
                );
            }
            down = None;
            next_fault = now + rng.secs(20, 60);
        }
        if down.is_none() && now >= next_fault {
            // Replica c is never killed (nor leads): `a` and `b` take the
            // replicas' faults.
            let at = begin.elapsed().as_secs();
            match rng.below(3) {
                0 => {
                    let i = 1 + rng.below(runners.len() as u64 - 1) as usize;
                    if let Some(mut p) = runners[i].proc.take() {
                        p.kill9();
                    }
                    kills.0 += 1;
                    killed_at = now;
                    eprintln!("{at:>5} s: kill -9 runner {}", runners[i].name);
                    down = Some((i, now + rng.secs(3, 10)));
                }
                pick => {
                    let leader = replicas.iter().position(Replica::leads);
                    let i = match (pick, leader) {
                        (1, Some(l)) if l < 2 => 1 - l,
                        (_, Some(l)) if l < 2 => l,
                        _ => rng.below(2) as usize,
                    };
                    let was_leader = leader == Some(i);
                    replicas[i].cp.kill9();
                    if was_leader {
                        kills.2 += 1;
                    } else {
                        kills.1 += 1;
                    }
                    eprintln!(
                        "{at:>5} s: kill -9 replica {}{}",
                        replicas[i].name,
                        if was_leader { " (the leader)" } else { "" }
                    );
                    down = Some((usize::MAX - i, now + rng.secs(3, 10)));
                }
            }
        }
        let wake = [next_job, next_sample, next_fault, next_rollout, next_look]
            .into_iter()
            .chain(down.map(|(_, t)| t))
            .min()
            .unwrap_or(now);
        std::thread::sleep(wake.saturating_duration_since(Instant::now()).min(every));
    }
    // Everything back, then every job must end.
    if let Some((who, _)) = down.take() {
        if who >= usize::MAX - 1 {
            let r = &mut replicas[usize::MAX - who];
            r.cp.restart()?;
            r.started = Instant::now();
        } else {
            runners[who].start(&key)?;
            outages.push((who, killed_at, Instant::now()));
        }
    }
    let ended_by = Instant::now() + Duration::from_secs(180);
    let client = &clients[2];
    let (mut succeeded, mut failed, mut stuck, mut twice, mut whole) = (0, 0, 0, 0, 0);
    let mut reasons = std::collections::BTreeMap::<String, u32>::new();
    let (mut quiet_lat, mut faulty_lat, mut live_lat) = (Vec::new(), Vec::new(), Vec::new());
    for q in &queued {
        let job = loop {
            let j = rt().block_on(client.get_job(&q.id))?;
            if j.status.is_terminal() || Instant::now() > ended_by {
                break j;
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let marks_of = std::fs::read_to_string(marks.join(q.n.to_string())).unwrap_or_default();
        if marks_of.lines().count() > 1 {
            twice += 1;
        }
        match job.status {
            JobStatus::Succeeded => succeeded += 1,
            s if s.is_terminal() => {
                failed += 1;
                let why = job.reason.clone().unwrap_or_default();
                *reasons.entry(why.chars().take(60).collect()).or_default() += 1;
            }
            _ => stuck += 1,
        }
        if job.status != JobStatus::Succeeded {
            continue;
        }
        let lines: Vec<String> = all_logs(client, &q.id)?
            .into_iter()
            .filter(|l| l.attempt == job.attempts)
            .map(|l| l.text)
            .collect();
        let want: Vec<String> = (1..=3).map(|k| format!("soak-{}-{k}", q.n)).collect();
        if lines.len() == 4 && lines[1..] == want[..] {
            whole += 1;
            if job.attempts == 1
                && let Ok(started) = lines[0].trim().parse::<f64>()
            {
                let ms = (started - q.sent_ns) / 1e6;
                // Its runner down (killed, not yet back) while it waited:
                // that wait is the outage's, not dispatch's.
                let waited_for_runner = outages.iter().any(|(r, from, to)| {
                    *r == q.runner && *from <= q.sent + Duration::from_secs(1) && *to >= q.sent
                });
                if q.faulty {
                    faulty_lat.push(ms);
                    if !waited_for_runner {
                        live_lat.push(ms);
                    }
                } else {
                    quiet_lat.push(ms);
                }
            }
        }
    }
    quiet_lat.sort_by(f64::total_cmp);
    faulty_lat.sort_by(f64::total_cmp);
    live_lat.sort_by(f64::total_cmp);

    println!(
        "| soak, {} s, {} runners and {} installs' runners, 3 replicas on PostgreSQL, {} jobs/s, a rollout every {} s | result |\n|---|---|",
        args.secs, args.runners, args.installs, args.rate, args.rollout_every
    );
    println!(
        "| jobs queued / succeeded / failed / not ended | {} / {succeeded} / {failed} / {stuck} |",
        queued.len()
    );
    for (why, count) in &reasons {
        println!("| failed: {why}… | {count} |");
    }
    println!("| jobs run to their end twice (marks) | {twice} |");
    println!(
        "| succeeded jobs whose last attempt's log is whole and in order | {whole} of {succeeded} |"
    );
    println!(
        "| kill -9: runners / replica not leading / leader | {} / {} / {} |",
        kills.0, kills.1, kills.2
    );
    for (name, lat) in [
        ("quiet (first 60 s)", &quiet_lat),
        ("under faults, every job", &faulty_lat),
        ("under faults, its runner up", &live_lat),
    ] {
        if !lat.is_empty() {
            println!(
                "| dispatch {name}, queued → process started, {} jobs | p50 {:.1} ms, p99 {:.1} ms |",
                lat.len(),
                percentile(lat, 0.5),
                percentile(lat, 0.99)
            );
        }
    }
    // The rollouts asked for before the end: each ends (resumed past a
    // failed install) within five minutes.
    let rolled_by = Instant::now() + Duration::from_secs(300);
    while rollouts.active(client)? > 0 && Instant::now() < rolled_by {
        std::thread::sleep(Duration::from_secs(2));
    }
    let rollout_rows = rollouts.report(client, &installs);
    for row in rollout_rows.iter().flatten() {
        println!("{row}");
    }
    let names = [
        "replica a",
        "replica b",
        "replica c (--no-lead)",
        "runner r0",
    ];
    let restarted = [
        replicas[0].started.duration_since(begin).as_secs(),
        replicas[1].started.duration_since(begin).as_secs(),
        replicas[2].started.duration_since(begin).as_secs(),
        runners[0].started.duration_since(begin).as_secs(),
    ];
    for (k, name) in names.iter().enumerate() {
        let from = window_from.as_secs().max(restarted[k]);
        // A sample taken while the process was down (read as 0) is not in
        // its window: it starts at the restarted process's first.
        let series: Vec<&(u64, [(u64, usize); 4])> = samples
            .iter()
            .filter(|(t, fp)| *t >= from && fp[k].0 > 0)
            .collect();
        let (Some(first), Some(last)) = (series.first(), series.last()) else {
            println!("| {name}: RSS, fds | restarted too late to measure |");
            continue;
        };
        let (r0, f0) = first.1[k];
        let (r1, f1) = last.1[k];
        let growth = if r0 > 0 {
            (r1 as f64 - r0 as f64) / r0 as f64 * 100.0
        } else {
            0.0
        };
        println!(
            "| {name}: RSS at {} s → {} s, open fds | {:.1} → {:.1} MB ({growth:+.1} %), {f0} → {f1} fds |",
            first.0,
            last.0,
            r0 as f64 / 1024.0,
            r1 as f64 / 1024.0
        );
        // Its shape: a sample every tenth of the window (flat, a plateau,
        // or a line).
        let step = (series.len() / 10).max(1);
        let shape: Vec<String> = (series.iter().step_by(step))
            .map(|(t, fp)| format!("{t} s {:.1}", fp[k].0 as f64 / 1024.0))
            .collect();
        println!(
            "| {name}: RSS (MB) along the window | {} |",
            shape.join(", ")
        );
    }
    if stuck > 0 || twice > 0 || whole < succeeded {
        bail!("the soak broke an invariant (see the table)");
    }
    rollout_rows.map(drop)
}
