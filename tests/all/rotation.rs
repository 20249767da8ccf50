//! "Keys and secrets at rest", rotation of an org's signing key: three
//! runners keep running jobs while `nuon-ctl orgs rotate-signing-key`
//! gives the org a new key. No job is refused during the overlap, no runner
//! is restarted or given the new key by hand, and once the window closes a
//! job signed by the old key is refused. On SQLite, and on PostgreSQL with
//! two replicas.

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nuon_client::ControlClient;
use nuon_control::OpenStore;
use nuon_core::{JobId, JobStatus, OrgSigningKey};
use nuon_test_fixtures::PgCluster;
use nuon_tests::{ControlPlane, Runner, RunnerOpts, bin, rt, wait_for, wait_job};

use crate::{LONG, queue_sh};

/// How long the old key is accepted after the rotation.
const OVERLAP_MS: i64 = 6_000;

/// The store of the control plane, opened as `nuon-ctl` does.
async fn open(cp: &ControlPlane, database_url: Option<&str>) -> OpenStore {
    OpenStore::existing(&cp.data_dir, database_url)
        .await
        .expect("open the store")
}

/// The org's private key as the store keeps it: what an insider with the
/// secrets key could sign with.
fn current_private_key(cp: &ControlPlane, database_url: Option<&str>) -> OrgSigningKey {
    rt().block_on(async {
        let s = open(cp, database_url).await;
        let secrets = s.secrets(&cp.data_dir).await.unwrap();
        let org = s.store().org_named("default").await.unwrap();
        let sealed = s.store().signing_key(&org).await.unwrap().unwrap();
        let key = nuon_control::keys::open_signing_key(&secrets, &org, &sealed).unwrap();
        s.close().await;
        key
    })
}

/// Signs the queued job `id` again with `key` (its stored spec opened with
/// the secrets key), as a forger holding an old key would.
fn sign_with(cp: &ControlPlane, database_url: Option<&str>, id: &JobId, key: &OrgSigningKey) {
    rt().block_on(async {
        let s = open(cp, database_url).await;
        let secrets = s.secrets(&cp.data_dir).await.unwrap();
        let org = s.store().org_named("default").await.unwrap();
        let mut found = None;
        for (job, sealed) in s.store().unended_job_specs(&org, None, 1000).await.unwrap() {
            if job == *id {
                found = Some(sealed);
            }
        }
        let sealed = found.expect("the job is queued");
        let spec = secrets
            .open(&sealed, &nuon_control::keys::spec_context(id))
            .unwrap();
        s.store()
            .set_job_signature(id, &key.sign_now(spec.as_bytes()))
            .await
            .unwrap();
        s.close().await;
    })
}

/// Queues a job on the one-slot runner `r4` behind a job that keeps it
/// busy, so its signature can be replaced before `r4` claims it.
fn queue_behind(client: &ControlClient, script: &str) -> JobId {
    let busy = queue_sh(client, "r4", "sleep 1.5", 1);
    wait_for("the busy job to start", LONG, || {
        let j = rt().block_on(client.get_job(&busy.id)).ok()?;
        (j.status == JobStatus::Running).then_some(())
    })
    .unwrap();
    queue_sh(client, "r4", script, 1).id
}

fn rotation_under_running_runners(
    replicas: &[ControlPlane],
    database_url: Option<&str>,
    runner_api: &str,
) {
    let cp = &replicas[0];
    let old = current_private_key(cp, database_url);
    assert_eq!(old.public_key().to_string(), cp.signing_key);
    let mut runners: Vec<Runner> = Vec::new();
    for (name, slots) in [("r1", 2), ("r2", 2), ("r3", 2), ("r4", 1)] {
        let token = cp.create_runner(name).unwrap();
        runners.push(
            Runner::start_with_api(
                runner_api,
                RunnerOpts {
                    token: &token,
                    signing_key: &cp.signing_key,
                    slots,
                    grace: "5s",
                    work_dir: None,
                },
            )
            .unwrap(),
        );
    }
    let pids: Vec<u32> = runners.iter().map(Runner::pid).collect();

    // A steady stream of jobs to the three runners, through every replica,
    // before, during and after the rotation.
    let queued: Arc<Mutex<Vec<JobId>>> = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let stream = {
        let clients: Vec<ControlClient> = replicas.iter().map(ControlPlane::client).collect();
        let (queued, stop) = (queued.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                let runner = ["r1", "r2", "r3"][i % 3];
                let job = queue_sh(&clients[i % clients.len()], runner, "echo streamed", 1);
                queued.lock().unwrap().push(job.id);
                i += 1;
                std::thread::sleep(Duration::from_millis(60));
            }
        })
    };
    std::thread::sleep(Duration::from_secs(2));

    let out = Command::new(bin("nuon-ctl"))
        .args(["orgs", "rotate-signing-key", "default", "--json"])
        .args(["--overlap", &format!("{OVERLAP_MS}ms")])
        .arg("--data-dir")
        .arg(&cp.data_dir)
        .args(cp.store_args())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let rotated: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let new_key = rotated["key"].as_str().unwrap().to_owned();
    let until = rotated["previous_until_ms"].as_i64().unwrap();
    assert_eq!(rotated["previous"], cp.signing_key.as_str());
    assert_ne!(new_key, cp.signing_key);
    let file = std::fs::read_to_string(cp.data_dir.join(nuon_control::SIGNING_KEY_FILE)).unwrap();
    assert_eq!(
        file.trim(),
        new_key,
        "org-signing-key.pub holds the new key"
    );

    // Within the window a job signed by the old key still runs.
    let client = cp.client();
    let in_window = queue_behind(&client, "echo old key in the window");
    sign_with(cp, database_url, &in_window, &old);
    let job = wait_job(&client, &in_window, LONG).unwrap();
    assert_eq!(job.status, JobStatus::Succeeded, "{job:?}");
    assert!(
        nuon_core::now_ms() < until,
        "the window closed too early for this check"
    );

    // Past the window, with the stream still going.
    wait_for("the overlap window to close", LONG, || {
        (nuon_core::now_ms() > until + 500).then_some(())
    })
    .unwrap();
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    stream.join().unwrap();

    let forged = queue_behind(&client, "echo old key after the window");
    sign_with(cp, database_url, &forged, &old);
    let job = wait_job(&client, &forged, LONG).unwrap();
    assert_eq!(job.status, JobStatus::Failed, "{job:?}");
    let reason = job.reason.unwrap_or_default();
    assert!(reason.contains("previous signing key"), "{reason}");

    // Every streamed job ran: none refused while the key changed.
    let ids = queued.lock().unwrap().clone();
    assert!(ids.len() > 100, "only {} jobs streamed", ids.len());
    for id in &ids {
        let job = wait_job(&client, id, LONG).unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{job:?}");
    }
    // The same runner processes throughout, each trusting the new key.
    for (runner, pid) in runners.iter().zip(&pids) {
        assert_eq!(runner.pid(), *pid);
        assert!(
            nuon_tests::process_alive(*pid as i32),
            "{}",
            runner.log_text()
        );
        assert!(
            runner.log_text().contains("signing key was rotated"),
            "{}",
            runner.log_text()
        );
        let trusted = std::fs::read_to_string(runner.work_dir.join("trusted-keys.json")).unwrap();
        let trusted: serde_json::Value = serde_json::from_str(&trusted).unwrap();
        assert_eq!(trusted["current"], new_key.as_str());
    }
    eprintln!(
        "rotation: {} jobs streamed through {} replica(s), none refused; an old-key job ran in the window and was refused after it",
        ids.len(),
        replicas.len()
    );
}

#[test]
fn signing_key_rotation_on_sqlite() {
    let cp = ControlPlane::start_with("10s", &["--key-refresh", "300ms"]).unwrap();
    let api = cp.runner_url.clone();
    rotation_under_running_runners(std::slice::from_ref(&cp), None, &api);
}

#[test]
fn signing_key_rotation_on_postgres_with_replicas() {
    let Some(pg) = PgCluster::start().expect("start PostgreSQL") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let args = ["--key-refresh", "300ms"];
    let a =
        ControlPlane::start_replica_with(&data, "10s", &pg.url, tmp.path(), "a", &args).unwrap();
    let b =
        ControlPlane::start_replica_with(&data, "10s", &pg.url, tmp.path(), "b", &args).unwrap();
    let api = format!("{},{}", a.runner_url, b.runner_url);
    rotation_under_running_runners(&[a, b], Some(&pg.url), &api);
}
