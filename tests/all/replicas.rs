//! Two `nuon-ctl` replicas on one throwaway PostgreSQL cluster, real
//! runners spread over both.

use std::time::{Duration, Instant};

use nuon_core::JobStatus;
use nuon_core::wire::CreateJob;
use nuon_tests::{ControlPlane, PgCluster, Runner, RunnerOpts, rt, wait_for};

const JOBS: usize = 2000;

/// Acceptance 2, 3 and 4 of the scale-out issue: 2,000 jobs queued through
/// both replicas run exactly once; killing the leading replica mid-run loses
/// no job, log line or result (its runners move to the other one), and the
/// other replica takes over maintenance; an org with 10% of the backlog
/// still gets its jobs started.
#[test]
fn two_replicas_run_every_job_once_and_survive_losing_the_leader() {
    let Some(pg) = PgCluster::start().expect("start PostgreSQL") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut a = ControlPlane::start_replica(&data, "3s", &pg.url, tmp.path(), "a").unwrap();
    wait_for("replica a to lead", Duration::from_secs(10), || {
        a.server_log()
            .contains("this replica leads maintenance")
            .then_some(())
    })
    .unwrap();
    let b = ControlPlane::start_replica(&data, "3s", &pg.url, tmp.path(), "b").unwrap();
    let both = |first: &ControlPlane, second: &ControlPlane| {
        format!("{},{}", first.runner_url, second.runner_url)
    };

    // The big org: four runners, two preferring each replica.
    let mut runners = Vec::new();
    let mut names = Vec::new();
    for i in 0..4 {
        let name = format!("big-{i}");
        let token = a.create_runner(&name).unwrap();
        let api = if i % 2 == 0 {
            both(&a, &b)
        } else {
            both(&b, &a)
        };
        runners.push(
            Runner::start_with_api(
                &api,
                RunnerOpts {
                    token: &token,
                    signing_key: &a.signing_key,
                    slots: 4,
                    grace: "5s",
                    work_dir: None,
                },
            )
            .unwrap(),
        );
        names.push(name);
    }
    // The small org: one runner on replica b.
    let small_admin = b.create_org("small").unwrap();
    let small = b.client_with(&small_admin);
    let created = rt().block_on(small.create_runner("small-0")).unwrap();
    runners.push(
        Runner::start_with_api(
            &both(&b, &a),
            RunnerOpts {
                token: &created.token,
                signing_key: &created.signing_public_key,
                slots: 2,
                grace: "5s",
                work_dir: None,
            },
        )
        .unwrap(),
    );

    // 90% of the backlog for the big org, through both replicas, then the
    // small org's 10%.
    let (ca, cb) = (a.client(), b.client());
    let big = JOBS * 9 / 10;
    let queued_at = Instant::now();
    let mut jobs = Vec::with_capacity(JOBS);
    for i in 0..big {
        let client = if i % 2 == 0 { &ca } else { &cb };
        let job = rt()
            .block_on(client.create_job(&CreateJob {
                runner: names[i % names.len()].clone(),
                kind: "exec".into(),
                payload: serde_json::json!({"command": "sh", "args": ["-c", format!("echo job-{i}")]}),
                timeout_secs: Some(600),
                max_attempts: Some(1),
                sandbox: None,
            }))
            .unwrap();
        jobs.push((i, job.id, false));
    }
    let mut small_jobs = Vec::new();
    let small_queued_at = Instant::now();
    for i in big..JOBS {
        let job = rt()
            .block_on(small.create_job(&CreateJob {
                runner: "small-0".into(),
                kind: "exec".into(),
                payload: serde_json::json!({"command": "sh", "args": ["-c", format!("echo job-{i}")]}),
                timeout_secs: Some(600),
                max_attempts: Some(1),
                sandbox: None,
            }))
            .unwrap();
        small_jobs.push(job.id.clone());
        jobs.push((i, job.id, true));
    }
    eprintln!("queued {JOBS} jobs in {:?}", queued_at.elapsed());

    // Fairness: the small org's first job starts while the big backlog waits.
    let first_small = wait_for(
        "the small org's first job to start",
        Duration::from_secs(60),
        || {
            let j = rt().block_on(small.get_job(&small_jobs[0])).ok()?;
            (j.status != JobStatus::Queued).then(Instant::now)
        },
    )
    .unwrap();
    eprintln!(
        "the small org's first job started {:?} after it was queued, behind the big org's {big}",
        first_small - small_queued_at
    );

    // Kill the leader once a quarter of the jobs have finished (each
    // runner's queue runs in order).
    let quarter = jobs[JOBS / 4].1.clone();
    wait_for(
        "a quarter of the jobs to finish",
        Duration::from_secs(300),
        || {
            let j = rt().block_on(cb.get_job(&quarter)).ok()?;
            j.status.is_terminal().then_some(())
        },
    )
    .unwrap();
    a.kill9();
    let killed = Instant::now();
    wait_for(
        "replica b to take the lead",
        Duration::from_secs(30),
        || {
            b.server_log()
                .contains("this replica leads maintenance")
                .then_some(())
        },
    )
    .unwrap();
    eprintln!(
        "replica b took the lead {:?} after the leader was killed",
        killed.elapsed()
    );

    // Every job ends, succeeded, with its one line exactly once.
    let admin_b = b.client();
    let deadline = Instant::now() + Duration::from_secs(600);
    for (i, id, is_small) in &jobs {
        let client = if *is_small { &small } else { &admin_b };
        let job = nuon_tests::wait_job(
            client,
            id,
            deadline.saturating_duration_since(Instant::now()),
        )
        .unwrap();
        assert_eq!(
            job.status,
            JobStatus::Succeeded,
            "job {i} ({id}): {:?}\nreplica b:\n{}",
            job.reason,
            b.server_log()
        );
        let lines = nuon_tests::all_logs(client, id).unwrap();
        let texts: Vec<&str> = lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts, [format!("job-{i}")], "job {i} ({id})");
    }
    eprintln!(
        "all {JOBS} jobs done {:?} after queueing",
        queued_at.elapsed()
    );
    drop(runners);
}

/// Fairness, second half: an org's limit on running jobs (`nuon-ctl orgs
/// limit`) holds its jobs to that many at once over all its runners, on
/// either replica; a runner held back is woken, across replicas, the moment
/// a job of its org ends; lifting the limit lifts it.
#[test]
fn an_org_limit_holds_its_running_jobs_across_runners_and_replicas() {
    let Some(pg) = PgCluster::start().expect("start PostgreSQL") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let a = ControlPlane::start_replica(&data, "60s", &pg.url, tmp.path(), "a").unwrap();
    let b = ControlPlane::start_replica(&data, "60s", &pg.url, tmp.path(), "b").unwrap();
    let ctl = |args: &[&str]| {
        nuon_tests::ours("nuon-ctl")
            .args(["orgs", "limit"])
            .args(args)
            .args(["--database-url", &pg.url])
            .output()
            .unwrap()
    };
    // Bad input is refused, saying why.
    let out = ctl(&["default", "--max-running", "lots"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("not a number of jobs"),
        "{out:?}"
    );
    let out = ctl(&["nope", "--max-running", "1"]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no org is named \"nope\""),
        "{out:?}"
    );
    // A data dir that holds no store is refused, not made into an empty one
    // (the data dir of a replica on PostgreSQL holds none).
    let empty = tmp.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = nuon_tests::ours("nuon-ctl")
        .args([
            "orgs",
            "limit",
            "default",
            "--max-running",
            "1",
            "--data-dir",
        ])
        .arg(&empty)
        .env_remove("NUON_DATABASE_URL")
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("holds no control-plane store"),
        "{out:?}"
    );
    assert!(!empty.join("nuon.db").exists());
    // A third replica without the others' secrets key refuses to start.
    let alone = tmp.path().join("alone");
    let started = ControlPlane::start_replica(&alone, "60s", &pg.url, tmp.path(), "c");
    assert!(
        started.is_err(),
        "a replica without the secrets key started"
    );
    let log = std::fs::read_to_string(tmp.path().join("c").join("ctl.log")).unwrap();
    assert!(log.contains("has no secrets key"), "{log}");
    assert!(!alone.join("secrets.key").exists());
    // One with a key of its own (not the one the secrets are sealed with)
    // refuses too.
    let other = tmp.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("secrets.key"), "ab".repeat(32)).unwrap();
    let started = ControlPlane::start_replica(&other, "60s", &pg.url, tmp.path(), "d");
    assert!(
        started.is_err(),
        "a replica with another secrets key started"
    );
    let log = std::fs::read_to_string(tmp.path().join("d").join("ctl.log")).unwrap();
    assert!(
        log.contains("is not the one this store's secrets are sealed with"),
        "{log}"
    );
    // The first org may run one job at a time; set while the replicas run.
    let out = ctl(&["default", "--max-running", "1"]);
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("at most 1 jobs run at once"));

    // Two runners with two slots each, one on each replica.
    let mut runners = Vec::new();
    for (name, first, second) in [("r0", &a, &b), ("r1", &b, &a)] {
        let token = a.create_runner(name).unwrap();
        runners.push(
            Runner::start_with_api(
                &format!("{},{}", first.runner_url, second.runner_url),
                RunnerOpts {
                    token: &token,
                    signing_key: &a.signing_key,
                    slots: 2,
                    grace: "5s",
                    work_dir: None,
                },
            )
            .unwrap(),
        );
    }
    let (ca, cb) = (a.client(), b.client());
    // Each job prints when it starts and when it ends (ns).
    let run = |count: usize, sleep: &str| -> Vec<(u128, u128)> {
        let ids: Vec<_> = (0..count)
            .map(|i| {
                let client = if i % 2 == 0 { &ca } else { &cb };
                rt().block_on(client.create_job(&CreateJob {
                    runner: format!("r{}", i % 2),
                    kind: "exec".into(),
                    payload: serde_json::json!({"command": "sh", "args": ["-c",
                        format!("date +%s%N; sleep {sleep}; date +%s%N")]}),
                    timeout_secs: Some(60),
                    max_attempts: Some(1),
                    sandbox: None,
                }))
                .unwrap()
                .id
            })
            .collect();
        let mut spans: Vec<(u128, u128)> = ids
            .iter()
            .map(|id| {
                let job = nuon_tests::wait_job(&ca, id, Duration::from_secs(120)).unwrap();
                assert_eq!(job.status, JobStatus::Succeeded, "{job:?}");
                let lines = nuon_tests::all_logs(&ca, id).unwrap();
                let t: Vec<u128> = lines
                    .iter()
                    .map(|l| l.text.trim().parse().unwrap())
                    .collect();
                (t[0], t[1])
            })
            .collect();
        spans.sort();
        spans
    };
    let spans = run(6, "0.2");
    let mut idle_ms = 0.0;
    for pair in spans.windows(2) {
        assert!(
            pair[1].0 >= pair[0].1,
            "two jobs of the org ran at once under a limit of 1: {spans:?}"
        );
        idle_ms += (pair[1].0 - pair[0].1) as f64 / 1e6;
    }
    // Held-back runners are woken by the end of the job before (across
    // replicas), not by the 10 s fallback poll: five hand-overs would take
    // about 25 s that way.
    assert!(
        idle_ms < 5_000.0,
        "the hand-overs took {idle_ms:.0} ms in all: {spans:?}"
    );
    eprintln!("limit 1: 6 jobs, one at a time; {idle_ms:.0} ms between them in all");

    // Lifted, the four slots run the org's jobs at once again.
    let out = ctl(&["default", "--max-running", "none"]);
    assert!(out.status.success(), "{out:?}");
    let spans = run(4, "1");
    let overlapping = spans.windows(2).any(|p| p[1].0 < p[0].1);
    assert!(
        overlapping,
        "no two jobs ran at once without a limit: {spans:?}"
    );
    drop(runners);
}

/// Running leases are extended by the replica that takes the maintenance
/// lead (runners may have reached nobody while the lead was vacant), not by
/// a replica starting beside a live leader: that one would only delay the
/// rescue of runners that really died.
#[test]
fn leases_are_extended_by_the_replica_taking_the_lead_not_by_one_starting_beside_it() {
    let Some(pg) = PgCluster::start().expect("start PostgreSQL") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let mut a = ControlPlane::start_replica(&data, "20s", &pg.url, tmp.path(), "a").unwrap();
    let leads = |cp: &ControlPlane| cp.server_log().contains("this replica leads maintenance");
    wait_for("replica a to lead", Duration::from_secs(10), || {
        leads(&a).then_some(())
    })
    .unwrap();
    let token = a.create_runner("r").unwrap();
    let runner = Runner::start_with_api(
        &a.runner_url,
        RunnerOpts {
            token: &token,
            signing_key: &a.signing_key,
            slots: 1,
            grace: "1s",
            work_dir: None,
        },
    )
    .unwrap();
    let ca = a.client();
    let job = rt()
        .block_on(ca.create_job(&CreateJob {
            runner: "r".into(),
            kind: "exec".into(),
            payload: serde_json::json!({"command": "sleep", "args": ["600"]}),
            timeout_secs: Some(900),
            max_attempts: Some(1),
            sandbox: None,
        }))
        .unwrap();
    wait_for("the job to run", Duration::from_secs(30), || {
        let j = rt().block_on(ca.get_job(&job.id)).ok()?;
        (j.status == JobStatus::Running).then_some(())
    })
    .unwrap();

    // b starts beside the leader and runs its maintenance loop a few times.
    let b = ControlPlane::start_replica(&data, "20s", &pg.url, tmp.path(), "b").unwrap();
    std::thread::sleep(Duration::from_secs(3));
    let log_b = b.server_log();
    assert!(!leads(&b), "b leads beside a live leader:\n{log_b}");
    assert!(
        !log_b.contains("extended"),
        "b extended leases without taking the lead:\n{log_b}"
    );

    // The leader dies: b takes the lead and extends the running lease.
    a.kill9();
    wait_for(
        "replica b to take the lead",
        Duration::from_secs(30),
        || leads(&b).then_some(()),
    )
    .unwrap();
    let log_b = b.server_log();
    let line = log_b
        .lines()
        .find(|l| l.contains("extended the leases of running attempts on taking the lead"))
        .unwrap_or_else(|| panic!("b took the lead without extending leases:\n{log_b}"));
    assert!(line.contains("count=1"), "{line}");
    assert_eq!(
        rt().block_on(b.client().get_job(&job.id)).unwrap().status,
        JobStatus::Running
    );
    drop(runner);
}

/// `nuon-ctl serve --no-lead`: a replica that serves both APIs and never
/// leads, alone on the database, beside a leader, and after the leader is
/// killed; a runner on it runs its jobs all the same. Refused without a
/// database (on the embedded store the one process must lead).
#[test]
fn a_replica_started_with_no_lead_serves_and_never_leads() {
    let refused = nuon_tests::ours("nuon-ctl")
        .args(["serve", "--no-lead", "--data-dir"])
        .arg(tempfile::tempdir().unwrap().path().join("data"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && said.contains("--database-url"),
        "{said}"
    );
    let Some(pg) = PgCluster::start().expect("start PostgreSQL") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let leads = |cp: &ControlPlane| cp.server_log().contains("this replica leads maintenance");
    let c = ControlPlane::start_replica_with(&data, "5s", &pg.url, tmp.path(), "c", &["--no-lead"])
        .unwrap();
    let token = c.create_runner("r").unwrap();
    let _runner = Runner::start_with_api(
        &c.runner_url,
        RunnerOpts {
            token: &token,
            signing_key: &c.signing_key,
            slots: 1,
            grace: "1s",
            work_dir: None,
        },
    )
    .unwrap();
    let cc = c.client();
    let run = |what: &str| {
        let job = rt()
            .block_on(cc.create_job(&CreateJob {
                runner: "r".into(),
                kind: "exec".into(),
                payload: serde_json::json!({"command": "echo", "args": [what]}),
                timeout_secs: Some(60),
                max_attempts: Some(1),
                sandbox: None,
            }))
            .unwrap();
        let j = nuon_tests::wait_job(&cc, &job.id, Duration::from_secs(30)).unwrap();
        assert_eq!(j.status, JobStatus::Succeeded, "{what}: {j:?}");
    };
    // Alone: it serves, and never takes the vacant lead.
    run("alone");
    std::thread::sleep(Duration::from_secs(3));
    let log_c = c.server_log();
    assert!(
        log_c.contains("never leads maintenance (--no-lead)"),
        "{log_c}"
    );
    assert!(!leads(&c), "c took the lead:\n{log_c}");
    // A replica that may lead takes it, and loses it to nobody when killed.
    let mut a = ControlPlane::start_replica(&data, "5s", &pg.url, tmp.path(), "a").unwrap();
    wait_for("replica a to lead", Duration::from_secs(10), || {
        leads(&a).then_some(())
    })
    .unwrap();
    run("beside a leader");
    a.kill9();
    std::thread::sleep(Duration::from_secs(3));
    run("the leader killed");
    assert!(!leads(&c), "c took the lead:\n{}", c.server_log());
}

/// Cron triggers on two replicas of one PostgreSQL: the leading replica
/// alone starts each due run; the other one, serving the same install,
/// starts none. When the leader dies, the other takes over: it starts the
/// next due run, and not again the one its predecessor started (which it
/// finds due as well, within the catch-up window).
#[test]
fn two_replicas_start_each_cron_run_once() {
    use crate::deploy::{METADATA, Manual, ended, run_workflow};
    use nuon_core::workflow::WorkflowKind;
    let Some(pg) = PgCluster::start().expect("start PostgreSQL") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let a = ControlPlane::start_replica(&data, "3s", &pg.url, tmp.path(), "a").unwrap();
    wait_for("replica a to lead", Duration::from_secs(10), || {
        a.server_log()
            .contains("this replica leads maintenance")
            .then_some(())
    })
    .unwrap();
    let b = ControlPlane::start_replica(&data, "3s", &pg.url, tmp.path(), "b").unwrap();
    let tick = "name = \"tick\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"cron\"\ncron_schedule = \"* * * * *\"\n\n[[steps]]\nname = \"tock\"\ncommand = \"echo tock\"\n";
    let mut m = Manual::start_on(
        a,
        &[METADATA, ("actions/tick.toml", tick)],
        None,
        |_| {},
        &[],
    );
    let c = m.cp.client();
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let crons = |c: &nuon_client::ControlClient| {
        rt().block_on(c.list_workflows("demo"))
            .unwrap()
            .workflows
            .into_iter()
            .filter(|w| w.trigger.as_deref() == Some("cron"))
            .collect::<Vec<_>>()
    };
    let first = wait_for("the first cron run", Duration::from_secs(100), || {
        crons(&c).into_iter().find(ended)
    })
    .unwrap();
    assert_eq!(first.status, "succeeded", "{first:#?}");
    // The schedule has been looked at many times since.
    std::thread::sleep(Duration::from_secs(5));
    let once_a_minute = |b: &ControlPlane| {
        let seen = crons(&b.client());
        let mut minutes: Vec<i64> = seen.iter().map(|w| w.created_at_ms / 60_000).collect();
        minutes.sort();
        let runs = minutes.len();
        minutes.dedup();
        assert_eq!(minutes.len(), runs, "one run per due minute: {seen:#?}");
        seen
    };
    once_a_minute(&b);
    assert!(
        !b.server_log().contains("this replica leads maintenance"),
        "b follows: {}",
        b.server_log()
    );
    // The leader dies: b takes over, finds the minute a started due too,
    // does not start it again, and starts the next one.
    let started = first.created_at_ms / 60_000;
    m.cp.kill9();
    wait_for(
        "replica b to take the lead",
        Duration::from_secs(30),
        || {
            b.server_log()
                .contains("this replica leads maintenance")
                .then_some(())
        },
    )
    .unwrap();
    wait_for(
        "b to start the next due run",
        Duration::from_secs(100),
        || {
            crons(&b.client())
                .into_iter()
                .find(|w| w.created_at_ms / 60_000 > started)
        },
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs(5));
    let seen = once_a_minute(&b);
    assert_eq!(
        seen.iter()
            .filter(|w| w.created_at_ms / 60_000 == started)
            .count(),
        1,
        "{seen:#?}"
    );
}
