//! Upgrades across releases: a rolling upgrade of two replicas from the
//! previous release's `nuon-ctl` to this build's, on one PostgreSQL, while
//! a provision runs; and the store of each tagged release
//! (`tests/releases/TAG/`) brought up to this build's schema.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nuon_tests::{ControlPlane, PgCluster, have_tool, release_ctl, rt, wait_for};

use crate::deploy::{ended, slow_provision, step, wait_workflow};

/// The release before this build: the one a rolling upgrade starts from.
const PREVIOUS: &str = "v0.1.0";

/// Every call either replica answered with an error while the upgrade
/// ran: a poller reads the workflow from both, every 100 ms. A replica
/// that is down (connection refused while it restarts) is no answer.
struct Watch {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<(u32, Vec<String>)>>,
}

impl Watch {
    fn start(urls: Vec<nuon_client::ControlClient>, workflow: String) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut answered = 0;
            let mut errors = Vec::new();
            while !flag.load(Ordering::Relaxed) {
                for (i, c) in urls.iter().enumerate() {
                    match rt().block_on(c.get_workflow(&workflow)) {
                        Ok(_) => answered += 1,
                        Err(nuon_client::Error::Connect { .. }) => {}
                        Err(e) => errors.push(format!("replica {i}: {e}")),
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            (answered, errors)
        });
        Watch {
            stop,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> (u32, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// The acceptance: replicas of the previous release and of this
/// build on one PostgreSQL; a provision started while the older replica
/// leads; the newer one starts beside it and takes the lead; the older is
/// upgraded; the workflow succeeds, every step's job ran one attempt, and
/// neither replica answered a call with an error.
#[test]
fn a_provision_runs_through_a_rolling_upgrade_from_the_previous_release() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(pg) = PgCluster::start().expect("start PostgreSQL") else {
        return;
    };
    let Some(older) = release_ctl(PREVIOUS) else {
        return;
    };
    let newer = nuon_tests::bin("nuon-ctl");
    let version = |bin: &std::path::Path| {
        let out = std::process::Command::new(bin)
            .arg("--version")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_ne!(version(&older), version(&newer), "two releases");
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let a = ControlPlane::start_replica_of(&older, &data, "60s", &pg.url, tmp.path(), "a", &[])
        .unwrap();
    wait_for("the older replica to lead", Duration::from_secs(10), || {
        a.server_log()
            .contains("this replica leads maintenance")
            .then_some(())
    })
    .unwrap();
    // The older replica drives it to the apply.
    let (mut m, id, _) = slow_provision(a, 12);

    let b = ControlPlane::start_replica_of(&newer, &data, "60s", &pg.url, tmp.path(), "b", &[])
        .unwrap();
    let watch = Watch::start(vec![m.cp.client(), b.client()], id.clone());
    wait_for(
        "the lead to pass to the newer replica",
        Duration::from_secs(20),
        || {
            (b.server_log().contains("this replica leads maintenance")
                && m.cp
                    .server_log()
                    .contains("a replica of a newer nuon-ctl runs beside this one"))
            .then_some(())
        },
    )
    .unwrap();
    // The older replica's step of the upgrade: stopped, and this build
    // started in its place (same ports: its runners call it again).
    m.cp.upgrade_to(&newer).unwrap();
    let c = m.cp.client();
    let done = wait_workflow(&c, &id, ended);
    let (answered, errors) = watch.finish();
    assert_eq!(done.status.as_str(), "succeeded", "{done:#?}");
    assert!(
        errors.is_empty(),
        "error answers during the upgrade: {errors:#?}"
    );
    assert!(
        answered > 20,
        "the replicas were asked ({answered} answers)"
    );
    for s in &done.steps {
        assert!(s.attempts.is_empty(), "{} was not retried: {s:#?}", s.name);
        if let Some(job) = &s.job_id {
            let job = rt().block_on(c.get_job(job)).unwrap();
            assert_eq!(job.attempts, 1, "{}: {job:?}", s.name);
        }
    }
    // Neither replica's log has a refused read.
    for log in [m.cp.server_log(), b.server_log()] {
        assert!(!log.contains("corrupt"), "{log}");
    }
}

/// What a release's fixture store holds, as the release's control plane
/// answered when it was made (`expect.json`).
#[derive(Debug, serde::Serialize, serde::Deserialize)]
struct Expect {
    workflow: String,
    status: String,
    steps: Vec<(String, String)>,
    job: String,
    first_line: String,
}

/// The two stores of a release's fixture: the embedded one (a
/// `nuon-ctl backup` archive) and PostgreSQL's (a `pg_dump`), each beside
/// the data dir files it needs (`secrets.key`, `admin-token`,
/// `org-signing-key.pub`) and its `expect.json`.
const STORES: [&str; 2] = ["sqlite", "postgres"];

/// Writes `tests/releases/$NUON_WRITE_RELEASE_FIXTURE/{sqlite,postgres}/`
/// with that release's own `nuon-ctl`: a provision of a small app run to
/// its end, then the store saved. Run once per release, when it is tagged:
/// `NUON_WRITE_RELEASE_FIXTURE=v0.1.0 cargo test -p nuon-tests --test e2e
/// -- --ignored write_release_fixture`.
#[test]
#[ignore = "writes a release's fixture stores (NUON_WRITE_RELEASE_FIXTURE=TAG)"]
fn write_release_fixture() {
    let tag = std::env::var("NUON_WRITE_RELEASE_FIXTURE")
        .expect("NUON_WRITE_RELEASE_FIXTURE=TAG names the release to write");
    let ctl = release_ctl(&tag).expect("the release's nuon-ctl");
    let root = nuon_tests::repo_root().join("tests/releases").join(&tag);
    let pg = PgCluster::start()
        .expect("start PostgreSQL")
        .expect("PostgreSQL for the release's PostgreSQL store");
    let tmp = tempfile::tempdir().unwrap();
    for store in STORES {
        let out = root.join(store);
        let _ = std::fs::remove_dir_all(&out);
        std::fs::create_dir_all(&out).unwrap();
        let cp = match store {
            "sqlite" => ControlPlane::start_of(&ctl, "60s", &[], &[]).unwrap(),
            _ => ControlPlane::start_replica_of(
                &ctl,
                &tmp.path().join("pg-data"),
                "60s",
                &pg.url,
                tmp.path(),
                "a",
                &[],
            )
            .unwrap(),
        };
        let (m, id, _) = slow_provision(cp, 1);
        let c = m.cp.client();
        let done = wait_workflow(&c, &id, ended);
        assert_eq!(done.status.as_str(), "succeeded", "{done:#?}");
        let job = step(&done, "apply slow").job_id.clone().unwrap();
        // A line of the apply's own (the first few name the tools'
        // paths on the machine that wrote the fixture).
        let first_line = nuon_tests::all_logs(&c, &job)
            .unwrap()
            .into_iter()
            .map(|l| l.text)
            .find(|t| t.contains("terraform_data.slow"))
            .expect("the apply's log names its resource");
        let expect = Expect {
            workflow: done.id.to_string(),
            status: done.status.as_str().to_owned(),
            steps: done
                .steps
                .iter()
                .map(|s| (s.name.clone(), s.status.as_str().to_owned()))
                .collect(),
            job: job.to_string(),
            first_line,
        };
        std::fs::write(
            out.join("expect.json"),
            serde_json::to_string_pretty(&expect).unwrap() + "\n",
        )
        .unwrap();
        let data = &m.cp.data_dir;
        for f in ["secrets.key", "admin-token", "org-signing-key.pub"] {
            std::fs::copy(data.join(f), out.join(f)).unwrap();
        }
        if store == "sqlite" {
            let saved = nuon_tests::ours_via(std::process::Command::new(&ctl))
                .args(["backup", "--data-dir"])
                .arg(data)
                .arg("--to")
                .arg(out.join("nuon.backup"))
                .output()
                .unwrap();
            assert!(saved.status.success(), "{}", crate::backup::text(&saved));
        } else {
            crate::backup::run(
                "pg_dump",
                &[
                    "--format=custom",
                    "--file",
                    out.join("nuon.pgdump").to_str().unwrap(),
                    &pg.url,
                ],
            );
        }
    }
}

/// The issue's "a fixture store from each tagged release is migrated by
/// the test suite": each release's stores (`tests/releases/TAG/`) restored
/// and served by this build, which brings them up to its schema; what the
/// release's control plane answered is answered the same, and new work
/// runs on them (the sealed keys open).
#[test]
fn the_stores_of_every_tagged_release_are_served_by_this_build() {
    let Some(pg) = PgCluster::start().expect("start PostgreSQL") else {
        return;
    };
    if !have_tool("pg_restore", "restore a release's PostgreSQL store")
        || !have_tool("psql", "make the database to restore into")
    {
        return;
    }
    let releases = nuon_tests::repo_root().join("tests/releases");
    let mut tags: Vec<String> = std::fs::read_dir(&releases)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    tags.sort();
    assert!(tags.iter().any(|t| t == PREVIOUS), "{tags:?}");
    let work = tempfile::tempdir().unwrap();
    for tag in &tags {
        for store in STORES {
            let from = releases.join(tag).join(store);
            let expect: Expect =
                serde_json::from_slice(&std::fs::read(from.join("expect.json")).unwrap())
                    .unwrap_or_else(|e| panic!("{tag}/{store}/expect.json: {e}"));
            let dir = work.path().join(tag).join(store);
            let logs = work.path().join(tag).join(format!("{store}-logs"));
            let cp = if store == "sqlite" {
                let out = crate::backup::restore(
                    &from.join("nuon.backup"),
                    &dir,
                    &from.join("secrets.key"),
                    &[],
                );
                assert!(out.status.success(), "{tag}: {}", crate::backup::text(&out));
                std::fs::copy(from.join("admin-token"), dir.join("admin-token")).unwrap();
                ControlPlane::start_on(&dir, "60s", &logs).unwrap()
            } else {
                let db = format!("restored_{}", tag.replace(['.', '-'], "_"));
                crate::backup::run("psql", &[&pg.url, "-c", &format!("CREATE DATABASE {db}")]);
                let url = pg.url.replace("/postgres", &format!("/{db}"));
                crate::backup::run(
                    "pg_restore",
                    &[
                        "--no-owner",
                        "--dbname",
                        &url,
                        from.join("nuon.pgdump").to_str().unwrap(),
                    ],
                );
                let out = crate::backup::ctl(&[
                    "restore",
                    "--database-url",
                    &url,
                    "--data-dir",
                    dir.to_str().unwrap(),
                    "--secrets-key-file",
                    from.join("secrets.key").to_str().unwrap(),
                ]);
                assert!(out.status.success(), "{tag}: {}", crate::backup::text(&out));
                for f in ["admin-token", "org-signing-key.pub"] {
                    std::fs::copy(from.join(f), dir.join(f)).unwrap();
                }
                ControlPlane::start_replica(&dir, "60s", &url, &logs, "a").unwrap()
            };
            served_as_the_release_left_it(&cp, &expect, &format!("{tag} ({store})"));
        }
    }
}

/// `cp` answers what `expect` says its release answered, and runs new
/// work.
fn served_as_the_release_left_it(cp: &ControlPlane, expect: &Expect, what: &str) {
    use nuon_core::JobStatus;
    use nuon_tests::{all_logs, wait_job};

    let c = cp.client();
    let w = rt().block_on(c.get_workflow(&expect.workflow)).unwrap();
    assert_eq!(w.status.as_str(), expect.status, "{what}: {w:#?}");
    let steps: Vec<(String, String)> = w
        .steps
        .iter()
        .map(|s| (s.name.clone(), s.status.as_str().to_owned()))
        .collect();
    assert_eq!(steps, expect.steps, "{what}");
    let job: nuon_core::JobId = expect.job.parse().unwrap();
    let lines = all_logs(&c, &job).unwrap();
    let first = lines
        .iter()
        .find(|l| l.text.contains("terraform_data.slow"));
    assert_eq!(
        first.map(|l| l.text.as_str()),
        Some(expect.first_line.as_str()),
        "{what}"
    );
    let installs = cp.nuon(&["installs", "list", "--json"]);
    assert!(
        String::from_utf8_lossy(&installs.stdout).contains("\"demo\""),
        "{what}: {}",
        crate::backup::text(&installs)
    );
    // New work: a runner registered and a job signed and run.
    let _runner = cp.start_runner("after-upgrade").unwrap();
    let job = crate::queue_sh(&c, "after-upgrade", "echo on-the-new-schema", 1);
    let done = wait_job(&c, &job.id, crate::LONG).unwrap();
    assert_eq!(done.status, JobStatus::Succeeded, "{what}: {done:?}");
}

/// A step of a kind this build does not know (a newer release planned it,
/// during a rolling upgrade) is read, not refused: the API shows it as
/// `unknown`, the workflow is left as it is, and it goes on once a build
/// that knows the kind drives it (here, the kind written back).
#[test]
fn a_workflow_with_a_step_of_a_newer_release_is_left_for_a_replica_that_knows_it() {
    if !have_tool("terraform", "run Terraform")
        || !have_tool("sqlite3", "edit a step past the store")
    {
        return;
    }
    let (mut m, id, apply) = slow_provision(ControlPlane::start("60s").unwrap(), 4);
    let c = m.cp.client();
    let set_kind = |cp: &ControlPlane, kind: &str| {
        crate::backup::run(
            "sqlite3",
            &[
                "-cmd",
                ".timeout 10000",
                cp.data_dir.join("nuon.db").to_str().unwrap(),
                &format!(
                    "UPDATE workflow_steps SET kind = '{kind}' WHERE workflow_id = '{id}' AND name = 'apply slow'"
                ),
            ],
        )
    };
    set_kind(&m.cp, "kind_of_a_newer_release");
    wait_for("the apply's job to end", crate::LONG, || {
        let job = rt().block_on(c.get_job(&apply)).ok()?;
        job.status.is_terminal().then_some(())
    })
    .unwrap();
    wait_for("the engine to leave it", Duration::from_secs(20), || {
        m.cp.server_log()
            .contains("a step of a kind this nuon-ctl does not know")
            .then_some(())
    })
    .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let w = rt().block_on(c.get_workflow(&id)).unwrap();
    assert_eq!(w.status.as_str(), "running", "left as it was: {w:#?}");
    let s = step(&w, "apply slow");
    assert_eq!(
        (s.kind, s.status.as_str()),
        (nuon_core::workflow::StepKind::Unknown, "running"),
        "{s:#?}"
    );
    // A build that knows the kind: the step's end is recorded, and the
    // workflow goes on.
    set_kind(&m.cp, "apply");
    m.cp.restart().unwrap();
    let c = m.cp.client();
    let done = wait_workflow(&c, &id, ended);
    assert_eq!(done.status.as_str(), "succeeded", "{done:#?}");
    let job = rt().block_on(c.get_job(&apply)).unwrap();
    assert_eq!(job.attempts, 1, "the apply ran once: {job:?}");
    // Where the workflow ended, the engine made its install's summary
    // again: current before any overview asked (none has).
    let out = std::process::Command::new("sqlite3")
        .args(["-cmd", ".timeout 10000"])
        .arg(m.cp.data_dir.join("nuon.db"))
        .arg("SELECT rev, summary_rev FROM install_summaries")
        .output()
        .unwrap();
    let rows = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let (rev, made) = rows.split_once('|').unwrap_or_else(|| panic!("{rows:?}"));
    assert_eq!(rev, made, "the summary is current: {rows}");
}
