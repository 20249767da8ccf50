//! Replicas sharing one PostgreSQL database.

use super::*;

/// Two PostgreSQL stores on one database, as two replicas would hold them.
async fn two_replicas() -> Option<(nuon_test_fixtures::PgCluster, PostgresStore, PostgresStore)> {
    let pg = nuon_test_fixtures::PgCluster::start().unwrap()?;
    let a = PostgresStore::connect(&pg.url).await.unwrap();
    let b = PostgresStore::connect(&pg.url).await.unwrap();
    Some((pg, a, b))
}

/// Replica a as a fixture (which keeps the cluster: b must be closed
/// first), with an org and a runner; replica b beside it.
async fn fixture_and_replica() -> Option<(Fixture, PostgresStore)> {
    let (pg, a, b) = two_replicas().await?;
    let org = a
        .create_org(&OrgId::generate(), "o", b"sealed key of o")
        .await
        .unwrap()
        .org_id;
    let runner = RunnerId::generate();
    a.create_runner(&org, &runner, "r", "h").await.unwrap();
    let f = Fixture {
        store: Box::new(a),
        backing: Backing::Postgres { cluster: pg },
        org,
        runner,
    };
    Some((f, b))
}

#[tokio::test]
async fn an_attempt_completed_on_two_replicas_at_once_gets_its_status_from_both() {
    let Some((f, b)) = fixture_and_replica().await else {
        return;
    };
    // The same completion sent twice, through each replica, at once: one
    // stores it, the other finds the attempt moved (or waits on its lock)
    // and must answer the same.
    for _ in 0..40 {
        f.queue(1).await;
        let (job, n) = f.claim_one(60_000).await;
        let done = || Completion {
            attempt: n,
            logs: None,
            log_lines: 0,
            result: ok_result(),
        };
        let (x, y) = tokio::join!(
            f.store.complete(&f.runner, &job, done()),
            b.complete(&f.runner, &job, done())
        );
        assert_eq!(
            (x.unwrap().status, y.unwrap().status),
            (JobStatus::Succeeded, JobStatus::Succeeded)
        );
    }
    // b goes before the cluster the fixture holds.
    b.close().await;
}

#[tokio::test]
async fn a_bad_database_url_says_what_is_wrong_and_hides_the_password() {
    for url in [
        "nuon:s3cret@127.0.0.1:1/nuon",
        "mysql://nuon:s3cret@127.0.0.1:1/nuon",
    ] {
        let e = PostgresStore::connect(url).await.unwrap_err().to_string();
        assert!(e.contains("is not a PostgreSQL URL"), "{e}");
        assert!(!e.contains("s3cret"), "{e}");
    }
    // Nothing listens on port 1: the error names the refused connection.
    let e = PostgresStore::connect("postgres://nuon:s3cret@127.0.0.1:1/nuon")
        .await
        .unwrap_err()
        .to_string();
    assert!(e.to_lowercase().contains("refused"), "{e}");
    assert!(e.contains("nuon:***@127.0.0.1:1"), "{e}");
}

#[tokio::test]
async fn replicas_wake_each_other_and_not_themselves() {
    use super::Wake;
    let Some((_pg, a, b)) = two_replicas().await else {
        return;
    };
    let mut at_a = a.wakeups().unwrap();
    let mut at_b = b.wakeups().unwrap();
    let runner = RunnerId::generate();
    let job = JobId::generate();
    // A burst is coalesced, but every distinct wake-up arrives.
    for _ in 0..50 {
        a.announce(Wake::Runner(runner.clone()));
    }
    a.announce(Wake::Logs(job.clone()));
    a.announce(Wake::Executor);
    let mut got = Vec::new();
    while got.len() < 3 {
        let ws = tokio::time::timeout(std::time::Duration::from_secs(5), at_b.recv())
            .await
            .expect("the other replica hears within 5s")
            .unwrap();
        for w in ws.iter() {
            if !got.contains(w) {
                got.push(w.clone());
            }
        }
    }
    assert!(got.contains(&Wake::Runner(runner)));
    assert!(got.contains(&Wake::Logs(job)));
    assert!(got.contains(&Wake::Executor));
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(at_a.try_recv().is_err(), "a replica does not wake itself");
}

#[tokio::test]
async fn one_replica_leads_and_the_lead_passes_on_when_it_goes() {
    let Some((_pg, a, b)) = two_replicas().await else {
        return;
    };
    assert!(a.lead().await.unwrap());
    assert!(!b.lead().await.unwrap());
    assert!(a.lead().await.unwrap(), "the leader keeps the lead");
    a.close().await;
    drop(a);
    let start = std::time::Instant::now();
    while !b.lead().await.unwrap() {
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_lead_passes_to_a_replica_of_a_newer_release_and_back_when_it_goes() {
    let Some(pg) = nuon_test_fixtures::PgCluster::start().unwrap() else {
        return;
    };
    let older = PostgresStore::connect(&pg.url)
        .await
        .unwrap()
        .announcing_version("0.1.0");
    assert!(older.lead().await.unwrap());
    let newer = PostgresStore::connect(&pg.url)
        .await
        .unwrap()
        .announcing_version("0.2.0-dev");
    // The lock is still the older's: the newer waits, and says it runs.
    assert!(!newer.lead().await.unwrap());
    assert!(
        !older.lead().await.unwrap(),
        "the older lets go of the lead"
    );
    let start = std::time::Instant::now();
    while !newer.lead().await.unwrap() {
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        !older.lead().await.unwrap(),
        "nor takes it back while the newer runs"
    );
    assert!(newer.lead().await.unwrap());
    // A replica of the same release beside the newer one is no reason to
    // let go.
    let same = PostgresStore::connect(&pg.url)
        .await
        .unwrap()
        .announcing_version("0.2.0-dev");
    assert!(!same.lead().await.unwrap());
    assert!(newer.lead().await.unwrap(), "the leader keeps the lead");
    same.close().await;
    // When the newer release is gone (a rollback), the older leads again.
    newer.close().await;
    drop(newer);
    sqlx_forget_replicas(&pg.url).await;
    let start = std::time::Instant::now();
    while !older.lead().await.unwrap() {
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// Ages every replica's mark past the time a replica counts as running
/// (30 s), as a stopped replica's mark ages.
async fn sqlx_forget_replicas(url: &str) {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query("UPDATE nuon_replicas SET seen_at = seen_at - 60000")
        .execute(&mut conn)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_replica_runs_on_a_newer_schema_while_it_only_expanded_and_refuses_one_that_contracted() {
    use sqlx::Connection;
    let Some(pg) = nuon_test_fixtures::PgCluster::start().unwrap() else {
        return;
    };
    PostgresStore::connect(&pg.url).await.unwrap().close().await;
    let mut conn = sqlx::PgConnection::connect(&pg.url).await.unwrap();
    // A newer release's expanding migration.
    sqlx::query("INSERT INTO nuon_migrations (version, applied_at) VALUES (10000, 0)")
        .execute(&mut conn)
        .await
        .unwrap();
    let store = PostgresStore::connect(&pg.url).await.unwrap();
    let org = OrgId::generate();
    store.create_org(&org, "o", b"sealed").await.unwrap();
    store.close().await;
    // Its contracting one: this build can no longer read the schema.
    sqlx::query("UPDATE nuon_schema SET readers_from = 10000")
        .execute(&mut conn)
        .await
        .unwrap();
    let err = PostgresStore::connect(&pg.url)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("newer than this nuon-ctl knows") && err.contains("version 10000 or later"),
        "{err}"
    );
}

#[tokio::test]
async fn writes_whose_attempt_moved_after_their_read_are_applied_again_under_locks() {
    use crate::store::postgres::group_pause;
    let Some((f, b)) = fixture_and_replica().await else {
        return;
    };
    let b = std::sync::Arc::new(b);
    f.queue(1).await;
    let (job, n) = f.claim_one(60_000).await;
    let lease = [LeaseRef {
        job_id: job.clone(),
        attempt: n,
    }];
    // Between a's read of the attempt and its write, b stores two of the
    // three lines a is storing: a stores the third alone, once.
    let (b2, runner, j) = (b.clone(), f.runner.clone(), job.clone());
    group_pause::before_writing(
        &job,
        Box::pin(async move {
            let ack = b2
                .append_logs(&runner, &j, Fixture::batch(n, 1, &["a", "b"]))
                .await;
            assert_eq!(ack.unwrap().acked_seq, 2);
        }),
    );
    let ack = f
        .store
        .append_logs(&f.runner, &job, Fixture::batch(n, 1, &["a", "b", "c"]))
        .await
        .unwrap();
    assert_eq!(ack.acked_seq, 3);
    assert_eq!(f.texts(&job).await, ["a", "b", "c"]);
    // Attempt `n`'s end, with `log_lines` lines.
    let done = |n, log_lines| Completion {
        attempt: n,
        logs: None,
        log_lines,
        result: ok_result(),
    };
    // b ends attempt `n` of `job` in the window of a's next batch naming it.
    let b_ends_in_the_window = |job: &JobId, n, log_lines| {
        let (b, runner, j) = (b.clone(), f.runner.clone(), job.clone());
        group_pause::before_writing(
            job,
            Box::pin(async move {
                let end = b.complete(&runner, &j, done(n, log_lines)).await;
                assert_eq!(end.unwrap().status, JobStatus::Succeeded);
            }),
        );
    };
    // Between a heartbeat's read (the attempt running) and its write, b
    // ends the attempt: the heartbeat extends nothing and says stale.
    b_ends_in_the_window(&job, n, 3);
    let beat = f.store.heartbeat(&f.runner, &lease, 60_000).await.unwrap();
    assert_eq!(beat[0].state, LeaseState::Stale);
    // A completion read before b's and written after it: the same answer,
    // the job ended once.
    f.queue(1).await;
    let (job, n) = f.claim_one(60_000).await;
    b_ends_in_the_window(&job, n, 0);
    let end = f.store.complete(&f.runner, &job, done(n, 0)).await.unwrap();
    assert_eq!(end.status, JobStatus::Succeeded);
    let row = f.store.get_job(&f.org, &job).await.unwrap().unwrap();
    assert_eq!((row.status, row.exit_code), (JobStatus::Succeeded, Some(0)));
    std::sync::Arc::into_inner(b)
        .expect("the pauses ran and let b go")
        .close()
        .await;
}
