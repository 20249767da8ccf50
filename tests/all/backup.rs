//! Issue "Fleet scale and real networks", backups that restore: a backup
//! of the embedded store taken while the control plane serves, restored
//! into a new data dir with the secrets key, and served from there: what
//! the backup saw is there (a finished job and its whole log, a runner and
//! its token), what came after is not, and the restored control plane
//! signs and runs new jobs (its sealed keys open); a job queued before the
//! backup and run after it is refused by its runner when the restored
//! store asks for it again (its journal says it ran), so nothing runs
//! twice. Every refusal (no key,
//! another key, a data dir that holds files, a damaged archive, a backup
//! over an existing file) leaves nothing behind. On PostgreSQL, a
//! `pg_dump` restored with `pg_restore` is checked the same way.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use nuon_core::JobStatus;
use nuon_test_fixtures::PgCluster;
use nuon_tests::{ControlPlane, Runner, RunnerOpts, all_logs, have_tool, ours, rt, wait_job};

use crate::{LONG, queue_sh};

/// `nuon-ctl ARGS` with no secrets key in its environment.
pub(crate) fn ctl(args: &[&str]) -> Output {
    ours("nuon-ctl")
        .args(args)
        .env_remove("NUON_SECRETS_KEY")
        .env_remove("NUON_DATA_DIR")
        .env_remove("NUON_DATABASE_URL")
        .output()
        .expect("run nuon-ctl")
}

/// `nuon-ctl backup --data-dir DIR --to FILE`, then `more`.
fn backup(dir: &Path, file: &Path, more: &[&str]) -> Output {
    let mut args = vec![
        "backup",
        "--data-dir",
        dir.to_str().unwrap(),
        "--to",
        file.to_str().unwrap(),
    ];
    args.extend_from_slice(more);
    ctl(&args)
}

/// `nuon-ctl restore --from FILE --data-dir DIR --secrets-key-file KEY`,
/// then `more`.
pub(crate) fn restore(file: &Path, dir: &Path, key: &Path, more: &[&str]) -> Output {
    let mut args = vec![
        "restore",
        "--from",
        file.to_str().unwrap(),
        "--data-dir",
        dir.to_str().unwrap(),
        "--secrets-key-file",
        key.to_str().unwrap(),
    ];
    args.extend_from_slice(more);
    ctl(&args)
}

pub(crate) fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Runs `nuon-ctl restore` into `dir` expecting a refusal that says
/// `says`, and that nothing was made.
fn refused(from: &Path, dir: &Path, key: Option<&Path>, says: &str) {
    let mut args = vec![
        "restore".to_owned(),
        "--from".into(),
        from.display().to_string(),
        "--data-dir".into(),
        dir.display().to_string(),
    ];
    if let Some(k) = key {
        args.extend(["--secrets-key-file".into(), k.display().to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = ctl(&args);
    assert!(!out.status.success(), "restore should fail: {}", text(&out));
    assert!(
        text(&out).contains(says),
        "expected {says:?}: {}",
        text(&out)
    );
    let beside: Vec<_> = std::fs::read_dir(dir.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".nuon-restore-"))
        .collect();
    assert!(beside.is_empty(), "a refused restore left {beside:?}");
}

#[test]
fn a_backup_taken_while_serving_restores_into_a_new_data_dir_with_its_key() {
    let cp = ControlPlane::start("30s").unwrap();
    let client = cp.client();
    let token = cp.create_runner("r1").unwrap();
    let work = tempfile::tempdir().unwrap();
    // The runner's machine: its work dir stays when the control plane is
    // restored elsewhere.
    let runner_dir = work.path().join("runner");
    std::fs::create_dir(&runner_dir).unwrap();
    // A runner on its machine (`dir`, its work dir), with its token.
    let start_on = |cp: &ControlPlane, token: &str, dir: &Path| {
        let opts = RunnerOpts {
            token,
            signing_key: &cp.signing_key,
            slots: 1,
            grace: "5s",
            work_dir: Some(dir),
        };
        Runner::start(cp, opts).unwrap()
    };
    let start_runner = |cp: &ControlPlane| start_on(cp, &token, &runner_dir);
    let runner = start_runner(&cp);
    let before = queue_sh(
        &client,
        "r1",
        "for i in 1 2 3 4 5; do echo line-$i; done",
        1,
    );
    let done = wait_job(&client, &before.id, LONG).unwrap();
    assert_eq!(done.status, JobStatus::Succeeded, "{done:?}");
    // A job queued before the backup that runs after it, on a second
    // runner started only then (with a work dir of its own).
    let token2 = cp.create_runner("r2").unwrap();
    let runner2_dir = work.path().join("runner2");
    std::fs::create_dir(&runner2_dir).unwrap();
    let start_runner2 = |cp: &ControlPlane| start_on(cp, &token2, &runner2_dir);
    let pending = queue_sh(&client, "r2", "echo ran-once", 1);

    // Taken while it serves.
    let file = work.path().join("nuon.backup");
    let out = backup(&cp.data_dir, &file, &["--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let manifest: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = manifest["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["nuon.db", "logs.db", "org-signing-key.pub"],
        "{manifest}"
    );
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&file).unwrap().permissions());
    assert_eq!(mode & 0o077, 0, "a backup is private: {mode:o}");
    let archive = std::fs::read(&file).unwrap();
    let key_hex = std::fs::read_to_string(cp.data_dir.join("secrets.key")).unwrap();
    let admin = std::fs::read_to_string(cp.data_dir.join("admin-token")).unwrap();
    for secret in [key_hex.trim(), admin.trim()] {
        assert!(
            !archive
                .windows(secret.len())
                .any(|w| w == secret.as_bytes()),
            "the backup holds neither the secrets key nor a token"
        );
    }
    // Never over an existing file.
    let out = backup(&cp.data_dir, &file, &[]);
    assert!(
        !out.status.success() && text(&out).contains("exists already"),
        "{}",
        text(&out)
    );
    assert_eq!(
        std::fs::read(&file).unwrap(),
        archive,
        "the first backup is untouched"
    );
    // A PostgreSQL store is pg_dump's.
    let out = backup(
        &cp.data_dir,
        &work.path().join("pg.backup"),
        &["--database-url", "postgres://u@127.0.0.1:1/db"],
    );
    assert!(
        !out.status.success() && text(&out).contains("pg_dump"),
        "{}",
        text(&out)
    );

    // After the backup: not in it.
    let after = queue_sh(&client, "r1", "echo after", 1);
    wait_job(&client, &after.id, LONG).unwrap();
    let runner2 = start_runner2(&cp);
    let ran = wait_job(&client, &pending.id, LONG).unwrap();
    assert_eq!(ran.status, JobStatus::Succeeded, "{ran:?}");
    drop(runner2);

    // Refusals leave nothing.
    let new_dir = work.path().join("restored");
    refused(&file, &new_dir, None, "needs the secrets key");
    assert!(!new_dir.exists());
    let other_key = work.path().join("other.key");
    std::fs::write(&other_key, "11".repeat(32)).unwrap();
    refused(
        &file,
        &new_dir,
        Some(&other_key),
        "not the one this store's secrets are sealed with",
    );
    assert!(!new_dir.exists());
    let old_key = work.path().join("old.key");
    std::fs::write(&old_key, &key_hex).unwrap();
    let full = work.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep.txt"), "mine").unwrap();
    refused(&file, &full, Some(&old_key), "holds files already");
    assert_eq!(
        std::fs::read_to_string(full.join("keep.txt")).unwrap(),
        "mine"
    );
    let damaged = work.path().join("damaged.backup");
    let mut bytes = archive.clone();
    let at = bytes.len() / 2;
    bytes[at] ^= 0xff;
    std::fs::write(&damaged, &bytes).unwrap();
    refused(&damaged, &new_dir, Some(&old_key), "damaged");
    let cut = work.path().join("cut.backup");
    std::fs::write(&cut, &archive[..archive.len() / 3]).unwrap();
    refused(&cut, &new_dir, Some(&old_key), "cut short");
    assert!(!new_dir.exists());

    // The restore.
    let out = restore(&file, &new_dir, &old_key, &["--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let restored: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(restored["orgs"], 1, "{restored}");
    assert_eq!(
        restored["left_out"],
        serde_json::json!(["admin-token", "build-runner-token"])
    );
    drop(runner);
    drop(cp);

    // Served from the new data dir, with the admin's token put back.
    std::fs::write(new_dir.join("admin-token"), &admin).unwrap();
    let cp = ControlPlane::start_on(&new_dir, "30s", &work.path().join("logs")).unwrap();
    let client = cp.client();
    let job = rt().block_on(client.get_job(&before.id)).unwrap();
    assert_eq!(job.status, JobStatus::Succeeded);
    let lines: Vec<String> = all_logs(&client, &before.id)
        .unwrap()
        .into_iter()
        .map(|l| l.text)
        .collect();
    assert_eq!(lines, ["line-1", "line-2", "line-3", "line-4", "line-5"]);
    assert!(
        rt().block_on(client.get_job(&after.id)).is_err(),
        "a job made after the backup is not in it"
    );
    // The runner, started again on its machine, calls the restored control
    // plane with its token, and the org's key, opened with the secrets
    // key, signs what it runs.
    let runner = start_runner(&cp);
    let again = queue_sh(&client, "r1", "echo restored", 1);
    let again = wait_job(&client, &again.id, LONG).unwrap_or_else(|e| {
        panic!(
            "{e:#}\nrunner:\n{}\nserver:\n{}",
            runner.log_text(),
            cp.server_log()
        )
    });
    assert_eq!(again.status, JobStatus::Succeeded, "{again:?}");

    // The job queued before the backup and run after it is queued again
    // in the restored store. Its runner's journal says it ran to its end,
    // so nothing of it runs twice: it is refused, and ends failed with why.
    let queued = rt().block_on(client.get_job(&pending.id)).unwrap();
    assert_eq!(queued.status, JobStatus::Queued, "{queued:?}");
    let runner2 = start_runner2(&cp);
    let asked = wait_job(&client, &pending.id, LONG).unwrap();
    assert_eq!(asked.status, JobStatus::Failed, "{asked:?}");
    let reason = asked.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("ran attempt 1 of this job to its end (succeeded")
            && reason.contains("a job runs once"),
        "{reason}"
    );
    let entries = journal_of(&runner2_dir, &pending.id);
    let entries: Vec<(&str, &str)> = entries
        .iter()
        .map(|(a, o)| (a.as_str(), o.as_str()))
        .collect();
    assert_eq!(
        entries,
        [
            ("job.accepted", "accepted"),
            ("job.finished", "succeeded"),
            ("job.refused", "refused")
        ],
        "the runner's journal: run once, then refused"
    );
    drop(runner2);
}

/// Runs `tool ARGS`, which must succeed.
pub(crate) fn run(tool: &str, args: &[&str]) {
    let out = std::process::Command::new(tool)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{tool} {args:?}: {}", text(&out));
}

#[test]
fn a_pg_dump_restored_with_pg_restore_is_checked_with_the_secrets_key() {
    if !have_tool("pg_dump", "dump the PostgreSQL store")
        || !have_tool("pg_restore", "restore the dump")
        || !have_tool("psql", "make the database to restore into")
    {
        return;
    }
    let Some(pg) = PgCluster::start().expect("start PostgreSQL") else {
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let data = work.path().join("data");
    let logs = work.path().join("logs");
    let cp = ControlPlane::start_replica(&data, "30s", &pg.url, &logs, "a").unwrap();
    let client = cp.client();
    let _runner = cp.start_runner("r1").unwrap();
    let job = queue_sh(&client, "r1", "echo one; echo two", 1);
    assert_eq!(
        wait_job(&client, &job.id, LONG).unwrap().status,
        JobStatus::Succeeded
    );

    let dump = work.path().join("nuon.pgdump");
    run(
        "pg_dump",
        &["--format=custom", "--file", dump.to_str().unwrap(), &pg.url],
    );
    run("psql", &[&pg.url, "-c", "CREATE DATABASE restored"]);
    let restored_url = pg.url.replace("/postgres", "/restored");
    run(
        "pg_restore",
        &[
            "--no-owner",
            "--dbname",
            &restored_url,
            dump.to_str().unwrap(),
        ],
    );

    let new_dir = work.path().join("replica");
    let other_key = work.path().join("other.key");
    std::fs::write(&other_key, "22".repeat(32)).unwrap();
    let restore = |key: &Path| {
        ctl(&[
            "restore",
            "--database-url",
            &restored_url,
            "--data-dir",
            new_dir.to_str().unwrap(),
            "--secrets-key-file",
            key.to_str().unwrap(),
            "--json",
        ])
    };
    let out = restore(&other_key);
    assert!(
        !out.status.success()
            && text(&out).contains("not the one this store's secrets are sealed with"),
        "{}",
        text(&out)
    );
    assert!(!new_dir.exists(), "a refused check makes no data dir");
    let out = restore(&data.join("secrets.key"));
    assert!(out.status.success(), "{}", text(&out));
    let said: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(said["orgs"], 1, "{said}");
    assert!(new_dir.join("secrets.key").exists());

    // A replica on the restored database, with the first org's files put
    // back, serves what the dump held.
    for f in ["admin-token", "org-signing-key.pub"] {
        std::fs::copy(data.join(f), new_dir.join(f)).unwrap();
    }
    let restored = ControlPlane::start_replica(&new_dir, "30s", &restored_url, &logs, "b").unwrap();
    let client = restored.client();
    assert_eq!(
        rt().block_on(client.get_job(&job.id)).unwrap().status,
        JobStatus::Succeeded
    );
    let lines: Vec<String> = all_logs(&client, &job.id)
        .unwrap()
        .into_iter()
        .map(|l| l.text)
        .collect();
    assert_eq!(lines, ["one", "two"]);
}

/// The journal entries (action, outcome) of `job` in the runner's audit
/// journal in `work_dir`.
fn journal_of(work_dir: &Path, job: &nuon_core::JobId) -> Vec<(String, String)> {
    let journal = std::fs::read_to_string(work_dir.join("audit.jsonl")).unwrap();
    let target = format!("job:{job}");
    journal
        .lines()
        .map(|l| serde_json::from_str::<nuon_core::audit::AuditEntry>(l).unwrap())
        .filter(|e| e.target == target)
        .map(|e| (e.action, e.outcome))
        .collect()
}

/// Acceptance: a backup taken during a provision (its apply running),
/// restored into a new data dir and served. The apply ran to its end after
/// the backup, so the restored store believes it still runs; at the
/// runner's first claim the control plane lists what it believes the
/// runner holds, the runner reports the end its journal records, and the
/// provision ends `failed` with that reason at once (not when the lease
/// lapses, as "runner lost"). Nothing runs twice.
#[test]
fn a_backup_taken_during_a_provision_is_restored_and_the_provision_ends_with_why() {
    use crate::deploy::{ended, slow_provision, step, wait_workflow, wait_workflow_for};

    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let (mut m, id, apply) = slow_provision(ControlPlane::start("60s").unwrap(), 6);
    let c = m.cp.client();
    nuon_tests::wait_for("the apply's first lines", LONG, || {
        (!all_logs(&c, &apply).ok()?.is_empty()).then_some(())
    })
    .unwrap();

    let work = tempfile::tempdir().unwrap();
    let file = work.path().join("during.tar");
    let out = backup(&m.cp.data_dir, &file, &[]);
    assert!(out.status.success(), "{}", text(&out));
    let done = wait_workflow(&c, &id, ended);
    assert_eq!(done.status.as_str(), "succeeded", "{done:#?}");

    let new_dir = work.path().join("restored");
    let out = restore(&file, &new_dir, &m.cp.data_dir.join("secrets.key"), &[]);
    assert!(out.status.success(), "{}", text(&out));
    std::fs::write(new_dir.join("admin-token"), &m.cp.admin_token).unwrap();
    let restored = ControlPlane::start_on(&new_dir, "60s", &work.path().join("logs")).unwrap();
    drop(std::mem::replace(&mut m.cp, restored));
    // The install's runner, on the same machine (its work dir and journal),
    // calls the restored control plane.
    m.restart_runner(None);
    let c = m.cp.client();
    // Well inside the 60 s lease: the runner's report ends it.
    let w = wait_workflow_for(&c, &id, ended, Duration::from_secs(45));
    assert_eq!(w.status.as_str(), "failed", "{w:#?}");
    let reason = step(&w, "apply slow").reason.clone().unwrap_or_default();
    assert!(
        reason.contains("ran attempt 1 of this job to its end (succeeded")
            && reason.contains("restored from a backup"),
        "{reason}"
    );
    let journal = journal_of(&m.runner_work_dir(), &apply);
    let journal: Vec<(&str, &str)> = journal
        .iter()
        .map(|(a, o)| (a.as_str(), o.as_str()))
        .collect();
    assert_eq!(
        journal,
        [
            ("job.accepted", "accepted"),
            ("job.finished", "succeeded"),
            ("job.reported", "failed")
        ],
        "the runner's journal: the apply ran once, its end reported"
    );
    // No job of the workflow ran twice.
    for s in done.steps.iter().filter_map(|s| s.job_id.as_ref()) {
        let accepted = journal_of(&m.runner_work_dir(), s)
            .iter()
            .filter(|(a, _)| a == "job.accepted")
            .count();
        assert!(accepted <= 1, "{s} accepted {accepted} times");
    }
}
