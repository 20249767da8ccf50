//! The `rollout` section: a release rolled out in waves to a fleet of
//! installs whose runners are simulated, on SQLite or on PostgreSQL with two
//! replicas.

use super::*;

/// A release rolled out to `--installs` installs in waves, every install's
/// runner simulated: what the control plane adds per install and per wave,
/// and that it never deploys more than `--max-parallel` at once. A run
/// that fails keeps the replicas' logs, and says where.
pub(super) async fn rollout(args: &Args) -> Result<()> {
    let logs = tempfile::tempdir()?;
    let run = rollout_logged(args, logs.path()).await;
    if run.is_err() {
        eprintln!("the replicas' logs are kept in {}", logs.keep().display());
    }
    run
}

async fn rollout_logged(args: &Args, logs: &std::path::Path) -> Result<()> {
    use nuon_core::rollout::{CreateRollout, RolloutStatus, TargetState};

    let n = args.installs;
    let waves = "1,10%,50%,100%";
    let store = if args.pg {
        "PostgreSQL, two replicas"
    } else {
        "SQLite"
    };
    println!(
        "\n## Rollout on {store}: {n} installs, to `{}`, waves {waves}, at most {} at once\n",
        args.to, args.max_parallel
    );
    let pg = if args.pg {
        let counting = match args.statements {
            true => "-c shared_preload_libraries=pg_stat_statements -c pg_stat_statements.max=1000",
            false => "",
        };
        Some(PgCluster::start_with_settings(true, counting)?.context("PostgreSQL for --pg")?)
    } else {
        None
    };
    // Before the replicas start: they are this process's children, and
    // PostgreSQL's backends its postmaster's.
    let cpus = match (&pg, args.pin) {
        (Some(pg), true) => Some(pin_apart(pg)?),
        _ => None,
    };
    let cps = match &pg {
        Some(pg) => {
            let data = logs.join("data");
            let mut cps = Vec::new();
            for name in ["a", "b"] {
                cps.push(ControlPlane::start_replica(
                    &data, "60s", &pg.url, logs, name,
                )?);
            }
            cps
        }
        None => vec![ControlPlane::start("60s")?],
    };
    if let Some(ours) = &cpus {
        for cp in &cps {
            pin(cp.pid(), ours)?;
        }
    }
    let cp = &cps[0];
    let control = cp.client();
    let (_builder, tokens) = make_installs(cp, n, 1).await?;
    let urls: Vec<String> = cps.iter().map(|c| c.runner_url.clone()).collect();
    let fleet = Fleet::start(&tokens, &urls, 1)?;
    let release = control.create_release("app", None).await?;
    // The runners parked (each long-polls), before the rollout.
    tokio::time::sleep(Duration::from_secs(10)).await;
    // What the parked runners alone cost, to tell the rollout's own share:
    // over one whole claim wait, so that every runner's next claim (they
    // connected together, and come back together) is in it.
    let counted = pg.as_ref().filter(|_| args.statements);
    if let Some(pg) = counted {
        statements::reset(&pg.url)?;
    }
    let idle_from: Vec<Sample> = cps.iter().map(|c| sample(c.pid())).collect();
    let idle_span = Duration::from_millis(CLAIM_WAIT_MS);
    tokio::time::sleep(idle_span).await;
    let cpu_before: Vec<Sample> = cps.iter().map(|c| sample(c.pid())).collect();
    let idle_statements = match counted {
        Some(pg) => {
            let read = statements::read(&pg.url)?;
            statements::reset(&pg.url)?;
            read
        }
        None => Vec::new(),
    };
    let idle_ms: f64 = (idle_from.iter().zip(&cpu_before))
        .map(|(a, b)| (b.cpu_ticks - a.cpu_ticks) as f64 * 10.0)
        .sum();

    let t = Instant::now();
    let created = control
        .create_rollout(
            release.id.as_str(),
            &CreateRollout {
                to: args.to.clone(),
                waves: waves.into(),
                max_parallel: args.max_parallel,
                ..CreateRollout::default()
            },
        )
        .await?;
    let planned = t.elapsed();
    let mut wave_ends = Vec::new();
    let mut most = 0;
    let mut reads = 0u64;
    let mut last_wave = 0;
    // Polled as `--wait` follows a rollout (every 500 ms), and
    // less often past a thousand targets (a rollout of thousands reads as
    // megabytes): not at a rate that makes the GET the bench's load.
    let poll = Duration::from_millis(500 * (created.targets.len() as u64 / 1000).max(1));
    let ended = loop {
        let r = control.get_rollout(created.id.as_str()).await?;
        reads += 1;
        most = most.max(r.running());
        if r.wave != last_wave {
            wave_ends.push(t.elapsed());
            last_wave = r.wave;
        }
        if r.status != RolloutStatus::Running {
            wave_ends.push(t.elapsed());
            break r;
        }
        if t.elapsed() > Duration::from_secs(3600) {
            bail!("the rollout did not end within an hour");
        }
        tokio::time::sleep(poll).await;
    };
    let took = t.elapsed();
    let cpu_after: Vec<Sample> = cps.iter().map(|c| sample(c.pid())).collect();
    let rollout_statements = match counted {
        Some(pg) => statements::read(&pg.url)?,
        None => Vec::new(),
    };
    if ended.status != RolloutStatus::Succeeded {
        bail!("the rollout ended {}: {:?}", ended.status, ended.reason);
    }
    let done = ended
        .targets
        .iter()
        .filter(|t| t.state == TargetState::Succeeded)
        .count();
    let deployed = ended.targets.len().max(1);
    println!(
        "| plan and store the rollout ({deployed} of {n} installs, {} waves) | {:.0} ms |",
        ended.wave_count,
        planned.as_secs_f64() * 1e3
    );
    println!(
        "| whole rollout: {done} installs deployed (sync, plan, apply each) | {:.1} s: {:.1} ms per install |",
        took.as_secs_f64(),
        took.as_secs_f64() * 1e3 / deployed as f64
    );
    let mut before = Duration::ZERO;
    for (w, end) in wave_ends.iter().enumerate() {
        let size = ended.in_wave(w as u32).count();
        let spent = end.saturating_sub(before);
        println!(
            "| wave {} ({size} installs) | {:.1} s: {:.1} ms per install |",
            w + 1,
            spent.as_secs_f64(),
            spent.as_secs_f64() * 1e3 / size.max(1) as f64
        );
        before = *end;
    }
    println!(
        "| most installs deploying at once (sampled {reads} times) | {most} (max-parallel {}) |",
        args.max_parallel
    );
    println!(
        "| simulated jobs completed / retried requests | {} / {} |",
        fleet.stats.completed.load(Ordering::Relaxed),
        fleet.stats.retries.load(Ordering::Relaxed)
    );
    if pg.is_some() {
        println!(
            "| the replicas' warnings and errors (their logs, by message) | {} |",
            warnings(logs, &["a", "b"])
        );
    }
    // What the replicas spent: CPU time (user and system, of the rollout's
    // span, with the runners' idle calls in it) per install.
    let cpu_ms: Vec<f64> = cpu_before
        .iter()
        .zip(&cpu_after)
        .map(|(a, b)| (b.cpu_ticks - a.cpu_ticks) as f64 * 10.0)
        .collect();
    let total: f64 = cpu_ms.iter().sum();
    println!(
        "| control-plane CPU time during the rollout | {}: **{:.2} ms per install** |",
        cpu_ms
            .iter()
            .map(|ms| format!("{:.1} s", ms / 1e3))
            .collect::<Vec<_>>()
            .join(" + "),
        total / deployed as f64
    );
    let idle_rate = idle_ms / idle_span.as_secs_f64();
    println!(
        "| the same less the runners' idle calls ({n} parked: {:.1}% of a core before the rollout) | **{:.2} ms per install** |",
        idle_rate / 10.0,
        (total - idle_rate * took.as_secs_f64()).max(0.0) / deployed as f64
    );
    let parked = n / cps.len();
    let rss: Vec<String> = cps
        .iter()
        .map(|c| {
            let (now, peak) = memory(c.pid());
            format!("{now:.0} MB (peak {peak:.0} MB)")
        })
        .collect();
    println!(
        "| each replica's memory, about {parked} runners parked on each | {} |",
        rss.join("; ")
    );
    // The overview and a selector over the fleet, on the replica that did
    // not create the installs.
    let reader = cps.last().context("a replica")?;
    let browser = Browser::sign_in(reader).await?;
    let (first, _) = browser.get("/").await?;
    let mut ms = Vec::new();
    for _ in 0..100 {
        ms.push(browser.get("/").await?.0);
    }
    ms.sort_by(f64::total_cmp);
    println!(
        "| overview: the first after the rollout; then 100 GETs | {first:.1} ms; p50 {:.1} ms, p99 {:.1} ms |",
        percentile(&ms, 0.50),
        percentile(&ms, 0.99)
    );
    let client = reader.client();
    let mut ms = Vec::new();
    let mut found = 0;
    for _ in 0..20 {
        let t = Instant::now();
        found = client
            .list_installs_matching("tier=prod,name!=i0001")
            .await?
            .installs
            .len();
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    println!(
        "| `installs list --selector tier=prod,name!=i0001` ({found} installs), 20 calls | p50 {:.1} ms, p99 {:.1} ms |",
        percentile(&ms, 0.50),
        percentile(&ms, 0.99)
    );
    // The same selection a page of 100 at a time, every page to the end.
    let (mut ms, mut after, mut seen) = (Vec::new(), None, 0);
    let walk = Instant::now();
    loop {
        let t = Instant::now();
        let page = client
            .list_installs_page(Some("tier=prod,name!=i0001"), after.as_ref(), 100)
            .await?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        seen += page.installs.len();
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
        if ms.len() > found / 100 + 1 {
            bail!(
                "the pages of {found} installs did not end after {} pages",
                ms.len()
            );
        }
    }
    let walk = walk.elapsed().as_secs_f64() * 1e3;
    if seen != found {
        bail!("the pages held {seen} installs, the whole list {found}");
    }
    ms.sort_by(f64::total_cmp);
    println!(
        "| the same, `--limit 100` page after page ({} pages, {seen} installs) | a page p50 {:.1} ms, p99 {:.1} ms; all of them {walk:.0} ms |",
        ms.len(),
        percentile(&ms, 0.50),
        percentile(&ms, 0.99)
    );
    if counted.is_some() {
        statements::report(
            &idle_statements,
            idle_span,
            &rollout_statements,
            took,
            deployed,
        );
    }
    if most > args.max_parallel as usize {
        bail!("the rollout deployed {most} at once, over --max-parallel");
    }
    drop(fleet);
    drop(cps);
    drop(pg);
    Ok(())
}

/// The warnings and errors in the logs of the replicas `names`
/// (`logs/NAME/ctl.log`), counted by message (the fields after it left
/// out): what the run's numbers are read with (a hand-on of wake-ups that
/// fell behind wakes every parked runner; a lost notification connection).
fn warnings(logs: &std::path::Path, names: &[&str]) -> String {
    let mut by: std::collections::BTreeMap<String, usize> = Default::default();
    for name in names {
        let text = std::fs::read_to_string(logs.join(name).join("ctl.log")).unwrap_or_default();
        for line in text.lines() {
            let Some(at) = line.find(" WARN ").or_else(|| line.find(" ERROR ")) else {
                continue;
            };
            let said = line[at..].trim_start();
            // `LEVEL target: message field=value ...`
            let said = said.split_once(": ").map_or(said, |(_, m)| m);
            let message = match said.find('=') {
                Some(eq) => said[..eq].rsplit_once(' ').map_or(said, |(m, _)| m),
                None => said,
            };
            let message = message.trim().replace('|', "/");
            *by.entry(format!("{name}: {message}")).or_default() += 1;
        }
    }
    if by.is_empty() {
        return "none".into();
    }
    by.iter()
        .map(|(m, n)| format!("{m} ×{n}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// PostgreSQL's own count of the statements it ran (`pg_stat_statements`,
/// read with `psql`): what a window of the bench cost the database.
mod statements {
    use std::collections::HashMap;
    use std::process::Command;
    use std::time::Duration;

    use anyhow::{Context, Result, bail};

    /// One statement as PostgreSQL normalizes it: its calls and the time
    /// they took in the server, ms.
    pub(super) struct Counted {
        pub(super) query: String,
        pub(super) calls: u64,
        pub(super) ms: f64,
    }

    fn psql(url: &str, sql: &str) -> Result<String> {
        let out = Command::new("psql")
            .args([url, "-X", "-At", "-F", "\t", "-c", sql])
            .output()
            .context("psql (the PostgreSQL client) for --statements")?;
        if !out.status.success() {
            bail!(
                "psql: {} (--statements needs pg_stat_statements, which ships with PostgreSQL's server)",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Starts counting from zero.
    pub(super) fn reset(url: &str) -> Result<()> {
        psql(url, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")?;
        psql(url, "SELECT pg_stat_statements_reset()")?;
        Ok(())
    }

    /// Every statement counted since the reset (the count's own left out).
    pub(super) fn read(url: &str) -> Result<Vec<Counted>> {
        let text = psql(
            url,
            "SELECT calls, total_exec_time, regexp_replace(query, '\\s+', ' ', 'g') \
             FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat_statements%'",
        )?;
        Ok(text
            .lines()
            .filter_map(|l| {
                let mut f = l.splitn(3, '\t');
                Some(Counted {
                    calls: f.next()?.parse().ok()?,
                    ms: f.next()?.parse().ok()?,
                    query: f.next()?.to_owned(),
                })
            })
            .collect())
    }

    /// The rollout's statements per install, less what the parked runners
    /// ran at the parked window's rate, the most called first.
    pub(super) fn report(
        idle: &[Counted],
        idle_span: Duration,
        rollout: &[Counted],
        took: Duration,
        installs: usize,
    ) {
        let scale = took.as_secs_f64() / idle_span.as_secs_f64();
        let idle_calls: HashMap<&str, f64> = idle
            .iter()
            .map(|c| (c.query.as_str(), c.calls as f64 * scale))
            .collect();
        let per = |n: f64| n / installs as f64;
        let mut rows: Vec<(f64, &Counted)> = rollout
            .iter()
            .map(|c| {
                let less = idle_calls.get(c.query.as_str()).copied().unwrap_or(0.0);
                ((c.calls as f64 - less).max(0.0), c)
            })
            .collect();
        rows.sort_by(|a, b| b.0.total_cmp(&a.0));
        let all: f64 = rows.iter().map(|(n, _)| n).sum();
        let idle_all: u64 = idle.iter().map(|c| c.calls).sum();
        println!(
            "| PostgreSQL statements: parked ({} s) / the rollout less the parked rate | {:.0} a second / **{:.1} per install** |",
            idle_span.as_secs(),
            idle_all as f64 / idle_span.as_secs_f64(),
            per(all)
        );
        println!(
            "\n| statement (the rollout's, less the parked rate) | per install | mean ms |\n|---|---|---|"
        );
        for (n, c) in rows.iter().take(30) {
            let mut q: String = c.query.chars().take(140).collect();
            q = q.replace('|', "\\|");
            println!(
                "| `{q}` | {:.2} | {:.3} |",
                per(*n),
                c.ms / c.calls.max(1) as f64
            );
        }
    }
}

/// `--pin`: this process (the simulated runners) and PostgreSQL (its
/// postmaster and the processes it has started) on every CPU but the
/// first, which the replicas get (`pin` them once started): the replicas'
/// CPU list.
fn pin_apart(pg: &PgCluster) -> Result<String> {
    let n = std::thread::available_parallelism().map_or(1, |n| n.get());
    if n < 2 {
        bail!("--pin needs at least two CPUs; this machine has {n}");
    }
    let rest = match n {
        2 => "1".to_owned(),
        n => format!("1-{}", n - 1),
    };
    let ours = "0".to_owned();
    pin(std::process::id(), &rest)?;
    let postmaster = pg
        .postmaster_pid()
        .context("PostgreSQL's postmaster.pid is not readable")?;
    pin(postmaster, &rest)?;
    let children = Command::new("pgrep")
        .args(["-P", &postmaster.to_string()])
        .output()
        .context("pgrep (procps) lists PostgreSQL's processes for --pin")?;
    for pid in String::from_utf8_lossy(&children.stdout).split_whitespace() {
        pin(pid.parse()?, &rest)?;
    }
    println!(
        "| CPUs (`--pin`) | replicas on {ours}; PostgreSQL and the simulated runners on {rest} |"
    );
    Ok(ours)
}

/// Every thread of process `pid` on the CPUs `list` (`taskset`); the
/// threads and processes it starts after inherit them.
fn pin(pid: u32, list: &str) -> Result<()> {
    let out = Command::new("taskset")
        .args(["-a", "-p", "-c", list, &pid.to_string()])
        .output()
        .context("taskset (util-linux) pins processes for --pin")?;
    if !out.status.success() {
        bail!(
            "taskset -a -p -c {list} {pid} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}
