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
use nuon_tests::{ControlPlane, Runner, RunnerOpts, ours, rt, wait_for, wait_job};

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

    let out = ours("nuon-ctl")
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

/// Every value kept at `column` by the store of `data_dir`, with its row
/// key.
pub(crate) fn all_values(
    data_dir: &std::path::Path,
    database_url: Option<&str>,
    column: nuon_control::store::SealedColumn,
) -> Vec<(String, String)> {
    rt().block_on(async {
        let s = OpenStore::existing(data_dir, database_url).await.unwrap();
        let mut all: Vec<(String, String)> = Vec::new();
        loop {
            let after = all.last().map(|(k, _)| k.clone()).unwrap_or_default();
            let batch = s.store().sealed_values(column, &after, 1000).await.unwrap();
            if batch.is_empty() {
                break;
            }
            all.extend(batch);
        }
        s.close().await;
        all
    })
}

/// How many values of `column` open with `key` alone.
pub(crate) fn under(
    values: &[(String, String)],
    column: nuon_control::store::SealedColumn,
    key: [u8; 32],
) -> usize {
    let only = nuon_control::secrets::SecretBox::new(key);
    values
        .iter()
        .filter(|(k, v)| nuon_control::reseal::reseal_value(&only, column, k, v) == Ok(None))
        .count()
}

pub(crate) fn hex_of(key: &[u8; 32]) -> String {
    key.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn unhex(text: &str) -> [u8; 32] {
    let text = text.trim();
    let mut key = [0u8; 32];
    for (i, b) in key.iter_mut().enumerate() {
        *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).unwrap();
    }
    key
}

/// Queues `n` trivial jobs on `runner` through `client` and waits for them
/// all to succeed.
fn run_jobs(client: &ControlClient, runner: &str, n: usize) {
    let ids: Vec<JobId> = (0..n)
        .map(|_| queue_sh(client, runner, "true", 1).id)
        .collect();
    for id in &ids {
        let job = wait_job(client, id, LONG).unwrap();
        assert_eq!(job.status, JobStatus::Succeeded, "{job:?}");
    }
}

fn rotate_secrets(cp: &ControlPlane, new_key: &str, extra: &[&str]) -> Command {
    let mut c = ours("nuon-ctl");
    c.args(["rotate-secrets-key", "--new-key", new_key, "--grace", "1s"])
        .args(extra)
        .arg("--data-dir")
        .arg(&cp.data_dir)
        .args(cp.store_args())
        .env_remove("NUON_SECRETS_KEY");
    c
}

fn secrets_key_rotation_killed_halfway(
    replicas: &mut [ControlPlane],
    database_url: Option<&str>,
    runner_api: &str,
) {
    use nuon_control::store::SealedColumn;
    use std::io::BufRead;
    let token = replicas[0].create_runner("s1").unwrap();
    let _runner = Runner::start_with_api(
        runner_api,
        RunnerOpts {
            token: &token,
            signing_key: &replicas[0].signing_key,
            slots: 4,
            grace: "5s",
            work_dir: None,
        },
    )
    .unwrap();
    let clients: Vec<ControlClient> = replicas.iter().map(ControlPlane::client).collect();
    // 300 jobs: each spec is kept sealed until the retention window.
    run_jobs(&clients[0], "s1", 300);
    let cp = &replicas[0];
    let key_file = cp.data_dir.join(nuon_control::secrets::SECRETS_KEY_FILE);
    let old = unhex(&std::fs::read_to_string(&key_file).unwrap());
    let new = [0x5a; 32];
    let new_hex = hex_of(&new);

    // Stopped (kill -9) once it has sealed some specs again.
    let mut child = rotate_secrets(cp, &new_hex, &["--batch", "10"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    for line in stderr.lines() {
        let line = line.unwrap();
        if line.starts_with("resealed ")
            && line.ends_with("of jobs.spec")
            && !line.starts_with("resealed 0 ")
        {
            break;
        }
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let specs = all_values(&cp.data_dir, database_url, SealedColumn::JobSpecs);
    let (by_new, by_old) = (
        under(&specs, SealedColumn::JobSpecs, new),
        under(&specs, SealedColumn::JobSpecs, old),
    );
    eprintln!(
        "secrets key rotation stopped halfway: {by_new} specs under the new key, {by_old} under the old"
    );
    assert!(by_new > 0 && by_old > 0, "{by_new} new, {by_old} old");
    assert_eq!(by_new + by_old, specs.len());

    // Half rotated, every replica still opens both and serves.
    for client in &clients {
        run_jobs(client, "s1", 10);
    }

    // Run again: it finishes.
    let out = rotate_secrets(cp, &new_hex, &["--json"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap();
    assert!(report["resealed"].as_u64().unwrap() > 0, "{report}");
    assert_eq!(unhex(&std::fs::read_to_string(&key_file).unwrap()), new);
    assert_eq!(std::fs::read_to_string(&key_file).unwrap().trim(), new_hex);

    // Every value in every place opens with the new key, none with the old.
    let mut checked = 0;
    for column in SealedColumn::ALL {
        let values = all_values(&cp.data_dir, database_url, column);
        assert_eq!(under(&values, column, new), values.len(), "{column:?}");
        assert_eq!(under(&values, column, old), 0, "{column:?}");
        checked += values.len();
    }
    eprintln!("secrets key rotation finished: {checked} sealed values, all under the new key");
    assert!(checked > 300);

    // The replicas follow the file: they serve on, and start again on it.
    for client in &clients {
        run_jobs(client, "s1", 10);
    }
    replicas[0].restart().unwrap();
    run_jobs(&replicas[0].client(), "s1", 10);
}

#[test]
fn secrets_key_rotation_on_sqlite() {
    let cp = ControlPlane::start_with("10s", &["--key-refresh", "300ms"]).unwrap();
    let api = cp.runner_url.clone();
    secrets_key_rotation_killed_halfway(&mut [cp], None, &api);
}

#[test]
fn secrets_key_rotation_on_postgres_with_replicas() {
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
    secrets_key_rotation_killed_halfway(&mut [a, b], Some(&pg.url), &api);
}
