//! The store conformance suite: every behaviour of the `Store` trait, run
//! against the SQLite store and against the PostgreSQL store (each test on
//! a throwaway cluster of its own, started with `initdb` and `pg_ctl`).

use nuon_core::wire::{Completion, LeaseRef, LeaseState, LogBatch, LogRecords, LogStream};
use nuon_core::{JobId, JobResult, JobSpec, JobStatus, OrgId, RetryPolicy, RunnerId, now_ms};

use super::{NewJob, PostgresStore, SqliteStore, Store, StoreError};

/// What keeps a store's database alive for a test.
enum Backing {
    Sqlite { _dir: tempfile::TempDir },
    Postgres { _cluster: nuon_tests::PgCluster },
}

struct Fixture {
    // Dropped before the database it lives in.
    store: Box<dyn Store>,
    backing: Backing,
    org: OrgId,
    runner: RunnerId,
}

/// An empty store of each kind: the SQLite one, then the PostgreSQL one
/// when PostgreSQL is installed.
async fn empty_stores() -> Vec<(Box<dyn Store>, Backing)> {
    let dir = tempfile::tempdir().unwrap();
    let mut out: Vec<(Box<dyn Store>, Backing)> = vec![(
        Box::new(SqliteStore::open(dir.path()).unwrap()),
        Backing::Sqlite { _dir: dir },
    )];
    if let Some(pg) = nuon_tests::PgCluster::start().unwrap() {
        let store = PostgresStore::connect(&pg.url).await.unwrap();
        out.push((Box::new(store), Backing::Postgres { _cluster: pg }));
    }
    out
}

/// A fixture on each kind of store: an org with a runner `r`.
async fn fixtures() -> Vec<Fixture> {
    let mut out = Vec::new();
    for (store, backing) in empty_stores().await {
        let org = store.create_org("o").await.unwrap().org_id;
        let runner = RunnerId::generate();
        store.create_runner(&org, &runner, "r", "h").await.unwrap();
        out.push(Fixture {
            store,
            backing,
            org,
            runner,
        });
    }
    out
}

/// Runs a check on every kind of store, naming the store when it fails.
macro_rules! conformance {
    ($(async fn $name:ident($f:ident: Fixture) $body:block)*) => {$(
        #[tokio::test]
        async fn $name() {
            for $f in fixtures().await {
                let kind = $f.kind();
                let run = async move { $body };
                if let Err(panic) = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(run)).await {
                    eprintln!("failed on the {kind} store");
                    std::panic::resume_unwind(panic);
                }
            }
        }
    )*};
}

impl Fixture {
    fn kind(&self) -> &'static str {
        match self.backing {
            Backing::Sqlite { .. } => "SQLite",
            Backing::Postgres { .. } => "PostgreSQL",
        }
    }

    async fn queue(&self, max_attempts: u32) -> JobId {
        self.queue_for(&self.runner, max_attempts).await
    }

    async fn queue_for(&self, runner: &RunnerId, max_attempts: u32) -> JobId {
        let spec = JobSpec {
            job_id: JobId::generate(),
            org_id: self.org.clone(),
            runner_id: runner.clone(),
            kind: "exec".into(),
            payload: serde_json::json!({"command": "true"}),
            timeout_secs: 60,
            retry: RetryPolicy { max_attempts },
            created_at_ms: now_ms(),
            redact: Vec::new(),
        };
        let spec_json = serde_json::to_string(&spec).unwrap();
        let id = spec.job_id.clone();
        self.store
            .enqueue_job(NewJob {
                spec,
                spec_json,
                signature: "s".into(),
            })
            .await
            .unwrap();
        id
    }

    async fn claim_one(&self, lease_ms: u64) -> (JobId, u32) {
        let claimed = self
            .store
            .claim(&self.runner, &["exec".into()], 1, lease_ms)
            .await
            .unwrap();
        let j = &claimed.jobs[0];
        (j.job_id.clone(), j.attempt)
    }

    fn batch(attempt: u32, first_seq: u64, texts: &[&str]) -> LogBatch {
        let mut lines = LogRecords::new();
        for t in texts {
            lines.push(LogStream::Stdout, 0, t).unwrap();
        }
        LogBatch {
            attempt,
            first_seq,
            lines,
        }
    }

    async fn texts(&self, job: &JobId) -> Vec<String> {
        let page = self
            .store
            .read_logs(&self.org, job, 0, 100)
            .await
            .unwrap()
            .unwrap();
        page.lines.into_iter().map(|l| l.text).collect()
    }
}

fn ok_result() -> JobResult {
    JobResult {
        outcome: nuon_core::Outcome::Succeeded,
        exit_code: Some(0),
        reason: None,
        outputs: serde_json::Value::Null,
    }
}

conformance! {
    async fn log_batches_are_idempotent_and_gaps_store_nothing(f: Fixture) {
        let job = f.queue(1).await;
        let (job2, n) = f.claim_one(60_000).await;
        assert_eq!(job, job2);
        // check(batch, expected ack) in order; the log must end as a, b, c, d.
        let cases: [(u64, &[&str], u64); 5] = [
            (1, &["a", "b"], 2),
            (1, &["a", "b"], 2), // a resend: nothing new
            (2, &["b", "c"], 3), // overlap: only "c" is new
            (5, &["e"], 3),      // a gap: nothing stored
            (4, &["d"], 4),
        ];
        for (first, texts, expected) in cases {
            let ack = f
                .store
                .append_logs(&f.runner, &job, Fixture::batch(n, first, texts))
                .await
                .unwrap();
            assert_eq!(ack.acked_seq, expected, "batch from {first}");
        }
        assert_eq!(f.texts(&job).await, ["a", "b", "c", "d"]);
    }
}

conformance! {
    async fn completion_waits_for_logs_and_is_idempotent(f: Fixture) {
        let job = f.queue(1).await;
        let (_, n) = f.claim_one(60_000).await;
        f.store
            .append_logs(&f.runner, &job, Fixture::batch(n, 1, &["a"]))
            .await
            .unwrap();
        let done = || Completion {
            attempt: n,
            log_lines: 2,
            result: ok_result(),
        };
        match f.store.complete(&f.runner, &job, done()).await {
            Err(StoreError::Conflict {
                code: "logs_pending",
                acked_seq: Some(1),
                ..
            }) => {}
            other => panic!("expected logs_pending, got {other:?}"),
        }
        f.store
            .append_logs(&f.runner, &job, Fixture::batch(n, 2, &["b"]))
            .await
            .unwrap();
        let first = f.store.complete(&f.runner, &job, done()).await.unwrap();
        let again = f.store.complete(&f.runner, &job, done()).await.unwrap();
        assert_eq!(
            (first.status, again.status),
            (JobStatus::Succeeded, JobStatus::Succeeded)
        );
        // A finished attempt takes no more lines.
        let late = f
            .store
            .append_logs(&f.runner, &job, Fixture::batch(n, 3, &["c"]))
            .await;
        assert!(
            matches!(
                late,
                Err(StoreError::Conflict {
                    code: "stale_attempt",
                    ..
                })
            ),
            "{late:?}"
        );
    }
}

conformance! {
    async fn writes_arriving_together_are_each_answered_as_if_alone(f: Fixture) {
        // Many runners' writes at once, as a group commit takes them:
        // each job gets its log lines (and a resend of them) and its
        // completion together; one write is stale, one completion comes
        // early. Each is answered on its own.
        let jobs = 12;
        for _ in 0..jobs {
            f.queue(1).await;
        }
        let claimed = f
            .store
            .claim(&f.runner, &["exec".into()], jobs, 60_000)
            .await
            .unwrap()
            .jobs;
        assert_eq!(claimed.len(), jobs as usize);
        let mut leases: Vec<LeaseRef> = claimed
            .iter()
            .map(|c| LeaseRef {
                job_id: c.job_id.clone(),
                attempt: c.attempt,
            })
            .collect();
        leases.push(LeaseRef {
            job_id: claimed[0].job_id.clone(),
            attempt: 7,
        });
        let store = &f.store;
        let runner = &f.runner;
        let heartbeat = store.heartbeat(runner, &leases, 60_000);
        let logs = claimed.iter().flat_map(|c| {
            let once = store.append_logs(runner, &c.job_id, Fixture::batch(c.attempt, 1, &["a", "b"]));
            let again = store.append_logs(runner, &c.job_id, Fixture::batch(c.attempt, 2, &["b"]));
            [once, again]
        });
        let stale = store.append_logs(runner, &claimed[1].job_id, Fixture::batch(9, 1, &["x"]));
        let (states, acks, stale) = tokio::join!(
            heartbeat,
            futures_util::future::join_all(logs),
            stale
        );
        let states = states.unwrap();
        assert_eq!(states.len(), leases.len());
        assert!(states[..jobs as usize].iter().all(|s| s.state == LeaseState::Active));
        assert_eq!(states[jobs as usize].state, LeaseState::Stale);
        assert!(acks.iter().all(|a| a.as_ref().unwrap().acked_seq == 2), "{acks:?}");
        assert!(
            matches!(stale, Err(StoreError::Conflict { code: "stale_attempt", .. })),
            "{stale:?}"
        );
        let done = |i: usize, log_lines| {
            let c = &claimed[i];
            store.complete(
                runner,
                &c.job_id,
                Completion {
                    attempt: c.attempt,
                    log_lines,
                    result: ok_result(),
                },
            )
        };
        // The last job's completion comes once too early (before a line it
        // names), then as it should; the first job's comes twice.
        let mut ends = vec![done(claimed.len() - 1, 3), done(0, 2)];
        ends.extend((0..claimed.len()).map(|i| done(i, 2)));
        let mut ends = futures_util::future::join_all(ends).await;
        let early = ends.remove(0);
        assert!(
            matches!(early, Err(StoreError::Conflict { code: "logs_pending", acked_seq: Some(2), .. })),
            "{early:?}"
        );
        assert!(
            ends.iter().all(|e| e.as_ref().unwrap().status == JobStatus::Succeeded),
            "{ends:?}"
        );
        for c in &claimed {
            assert_eq!(f.texts(&c.job_id).await, ["a", "b"]);
            let job = f.store.get_job(&f.org, &c.job_id).await.unwrap().unwrap();
            assert_eq!((job.status, job.exit_code), (JobStatus::Succeeded, Some(0)));
        }
    }
}

conformance! {
    async fn expired_leases_requeue_or_fail_by_policy_and_fence_the_old_attempt(f: Fixture) {
        let once = f.queue(1).await;
        let twice = f.queue(2).await;
        let never_confirmed = f.queue(1).await;
        let claimed = f
            .store
            .claim(&f.runner, &["exec".into()], 3, 1)
            .await
            .unwrap()
            .jobs;
        assert_eq!(claimed.len(), 3);
        // The first two confirm with a heartbeat (work started); the third never does.
        let leases: Vec<_> = claimed[..2]
            .iter()
            .map(|c| LeaseRef {
                job_id: c.job_id.clone(),
                attempt: c.attempt,
            })
            .collect();
        let states = f.store.heartbeat(&f.runner, &leases, 1).await.unwrap();
        assert!(states.iter().all(|s| s.state == LeaseState::Active));
        let rescued = f.store.rescue_expired(now_ms() + 10).await.unwrap();
        assert_eq!(rescued.len(), 3);
        let status = |id: JobId| {
            let (store, org) = (&f.store, f.org.clone());
            async move { store.get_job(&org, &id).await.unwrap().unwrap() }
        };
        let lost = status(once.clone()).await;
        assert_eq!(lost.status, JobStatus::Failed);
        assert!(lost.reason.unwrap().contains("runner lost"));
        assert_eq!(status(twice.clone()).await.status, JobStatus::Queued);
        assert_eq!(
            status(never_confirmed.clone()).await.status,
            JobStatus::Queued
        );
        // The old attempt of the requeued job is fenced off.
        let stale = f
            .store
            .heartbeat(&f.runner, &leases[1..], 60_000)
            .await
            .unwrap();
        assert_eq!(stale[0].state, LeaseState::Stale);
        let write = f
            .store
            .append_logs(&f.runner, &twice, Fixture::batch(1, 1, &["x"]))
            .await;
        assert!(
            matches!(
                write,
                Err(StoreError::Conflict {
                    code: "stale_attempt",
                    ..
                })
            ),
            "{write:?}"
        );
        let next = f
            .store
            .claim(&f.runner, &["exec".into()], 5, 60_000)
            .await
            .unwrap()
            .jobs;
        let twice_next = next.iter().find(|c| c.job_id == twice).unwrap();
        assert_eq!(twice_next.attempt, 2);
    }
}

conformance! {
    async fn an_org_limit_caps_its_running_jobs_across_its_runners(f: Fixture) {
        let second = RunnerId::generate();
        f.store
            .create_runner(&f.org, &second, "r2", "h2")
            .await
            .unwrap();
        for _ in 0..3 {
            f.queue(1).await;
        }
        let seconds = f.queue_for(&second, 1).await;
        let claim = |runner: RunnerId| {
            let store = &f.store;
            async move {
                store
                    .claim(&runner, &["exec".into()], 5, 60_000)
                    .await
                    .unwrap()
            }
        };
        assert_eq!(f.store.set_org_limit("o", Some(2)).await.unwrap(), f.org);
        // Two of the org's jobs may run: the first runner takes both places.
        let first = claim(f.runner.clone()).await;
        assert_eq!((first.jobs.len(), first.held_back), (2, true));
        let none = claim(second.clone()).await;
        assert_eq!((none.jobs.len(), none.held_back), (0, true));
        // A job that ends makes room for one more, whichever runner asks.
        let done = Completion {
            attempt: first.jobs[0].attempt,
            log_lines: 0,
            result: ok_result(),
        };
        f.store
            .complete(&f.runner, &first.jobs[0].job_id, done)
            .await
            .unwrap();
        let next = claim(second.clone()).await;
        assert_eq!(next.jobs.len(), 1);
        assert_eq!(next.jobs[0].job_id, seconds);
        assert!(!next.held_back, "the second runner has nothing left queued");
        let full = claim(f.runner.clone()).await;
        assert_eq!((full.jobs.len(), full.held_back), (0, true));
        // So do lost attempts: both running ones (never confirmed, so
        // queued again) leave room for the first runner's two queued jobs.
        let rescued = f.store.rescue_expired(now_ms() + 120_000).await.unwrap();
        assert_eq!(rescued.len(), 2);
        assert!(rescued.iter().all(|r| r.org_id == f.org));
        let after = claim(f.runner.clone()).await;
        assert_eq!((after.jobs.len(), after.held_back), (2, false));
        // Lifting the limit lifts it; a limit of an unknown org is refused.
        f.store.set_org_limit("o", Some(0)).await.unwrap();
        f.queue(1).await;
        assert!(claim(f.runner.clone()).await.held_back);
        f.store.set_org_limit("o", None).await.unwrap();
        assert_eq!(claim(f.runner.clone()).await.jobs.len(), 1);
        let unknown = f.store.set_org_limit("nope", Some(1)).await;
        assert!(
            matches!(&unknown, Err(StoreError::Invalid(m)) if m.contains("nope")),
            "{unknown:?}"
        );
    }
}

conformance! {
    async fn queries_are_scoped_by_org_and_runner(f: Fixture) {
        let job = f.queue(1).await;
        let other_org = f.store.create_org("other").await.unwrap().org_id;
        assert!(f.store.get_job(&other_org, &job).await.unwrap().is_none());
        assert!(f.store.list_jobs(&other_org, 10).await.unwrap().is_empty());
        assert!(
            f.store
                .read_logs(&other_org, &job, 0, 10)
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            f.store
                .request_cancel(&other_org, &job)
                .await
                .unwrap()
                .is_none()
        );
        let stranger = RunnerId::generate();
        f.store
            .create_runner(&f.org, &stranger, "s", "h2")
            .await
            .unwrap();
        assert!(
            f.store
                .claim(&stranger, &["exec".into()], 5, 1000)
                .await
                .unwrap()
                .jobs
                .is_empty()
        );
        assert_eq!(
            f.store
                .claim(&f.runner, &["other-kind".into()], 5, 1000)
                .await
                .unwrap()
                .jobs
                .len(),
            0
        );
    }
}

conformance! {
    async fn orgs_come_with_a_build_runner_and_api_tokens_have_scopes_and_can_be_revoked(f: Fixture) {
        use nuon_core::TokenId;
        use nuon_core::token::{hash_token, issue_api_token};
        use nuon_core::wire::{RunnerRole, TokenScope};

        let store = &f.store;
        let org = store.create_org("o2").await.unwrap();
        let runners = store.list_runners(&org.org_id).await.unwrap();
        assert_eq!(runners.len(), 1);
        assert_eq!(
            (runners[0].name.as_str(), runners[0].role),
            ("build", RunnerRole::Build)
        );
        let who = store
            .authenticate_runner(&org.build_runner_token.hash)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(who.runner_id, org.build_runner);

        let id = TokenId::generate();
        let token = issue_api_token(&id);
        let info = store
            .create_api_token(&org.org_id, &id, "reader", TokenScope::Read, &token.hash)
            .await
            .unwrap();
        assert_eq!(info.scope, TokenScope::Read);
        let p = store
            .authenticate_api(&hash_token(&token.secret))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (p.org_id.clone(), p.scope.as_str()),
            (org.org_id.clone(), "read")
        );
        // Another org can neither see nor revoke it.
        let other = store.create_org("other").await.unwrap().org_id;
        assert!(store.revoke_api_token(&other, &id).await.unwrap().is_none());
        assert!(
            store
                .list_api_tokens(&other)
                .await
                .unwrap()
                .iter()
                .all(|t| t.id != id)
        );
        assert!(store.authenticate_api(&token.hash).await.unwrap().is_some());
        let revoked = store
            .revoke_api_token(&org.org_id, &id)
            .await
            .unwrap()
            .unwrap();
        assert!(revoked.revoked);
        assert!(store.authenticate_api(&token.hash).await.unwrap().is_none());
    }
}

conformance! {
    async fn config_versions_count_per_app_and_apps_and_installs_are_org_scoped(f: Fixture) {
        use nuon_core::wire::RunnerRole;
        use nuon_core::{AppId, InstallId};

        use super::{NewInstall, StoredConfig};

        let other = f.store.create_org("other").await.unwrap().org_id;
        let app = f
            .store
            .create_app(&f.org, &AppId::generate(), "web")
            .await
            .unwrap();
        let dup = f
            .store
            .create_app(&f.org, &AppId::generate(), "web")
            .await
            .unwrap_err();
        assert!(
            matches!(
                dup,
                StoreError::Conflict {
                    code: "name_taken",
                    ..
                }
            ),
            "{dup}"
        );
        // The same name in another org is fine.
        f.store
            .create_app(&other, &AppId::generate(), "web")
            .await
            .unwrap();

        let cfg = |n: &str| StoredConfig {
            version: 0,
            created_at_ms: 0,
            components: 1,
            files_json: "[]".into(),
            config_json: n.into(),
            warnings_json: "[]".into(),
            sources_json: "[]".into(),
        };
        assert_eq!(
            f.store
                .add_config(&f.org, &app.id, cfg("a"))
                .await
                .unwrap()
                .version,
            1
        );
        assert_eq!(
            f.store
                .add_config(&f.org, &app.id, cfg("b"))
                .await
                .unwrap()
                .version,
            2
        );
        assert!(matches!(
            f.store.add_config(&other, &app.id, cfg("x")).await,
            Err(StoreError::Invalid(_))
        ));
        let latest = f
            .store
            .get_config(&f.org, &app.id, None)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((latest.version, latest.config_json.as_str()), (2, "b"));
        let first = f
            .store
            .get_config(&f.org, &app.id, Some(1))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.config_json, "a");
        assert!(
            f.store
                .get_config(&other, &app.id, None)
                .await
                .unwrap()
                .is_none()
        );
        assert_eq!(
            f.store.list_configs(&f.org, &app.id).await.unwrap().len(),
            2
        );
        assert!(
            f.store
                .list_configs(&other, &app.id)
                .await
                .unwrap()
                .is_empty()
        );
        assert_eq!(
            f.store
                .find_app(&f.org, "web")
                .await
                .unwrap()
                .unwrap()
                .latest_config,
            Some(2)
        );

        let new = |name: &str, runner: &str| NewInstall {
            id: InstallId::generate(),
            app_id: app.id.clone(),
            name: name.into(),
            config_version: 2,
            runner_id: RunnerId::generate(),
            runner_name: runner.into(),
            runner_token_hash: format!("hash-{name}"),
            inputs_json: "{}".into(),
            sealed_json: "{}".into(),
            approval: "approve-all".into(),
        };
        let inst = f
            .store
            .create_install(&f.org, new("acme", "install-acme"))
            .await
            .unwrap();
        let runner = f
            .store
            .find_runner(&f.org, "install-acme")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (runner.id, runner.role),
            (inst.runner_id.clone(), RunnerRole::Install)
        );
        // A taken name leaves nothing behind: neither install nor runner.
        let e = f
            .store
            .create_install(&f.org, new("acme", "install-acme2"))
            .await
            .unwrap_err();
        assert!(
            matches!(
                e,
                StoreError::Conflict {
                    code: "name_taken",
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            f.store
                .find_runner(&f.org, "install-acme2")
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            f.store
                .find_install(&other, "acme")
                .await
                .unwrap()
                .is_none()
        );
        assert!(
            f.store
                .set_install_inputs(&other, &inst.id, "{\"x\":1}", "{}")
                .await
                .unwrap()
                .is_none()
        );
        let set = f
            .store
            .set_install_inputs(&f.org, &inst.id, "{\"x\":1}", "{}")
            .await
            .unwrap()
            .unwrap();
        assert_eq!(set.inputs_json, "{\"x\":1}");
    }
}

#[tokio::test]
async fn a_data_dir_of_an_earlier_version_is_migrated() {
    let dir = tempfile::tempdir().unwrap();
    {
        let store = SqliteStore::open(dir.path()).unwrap();
        store.create_org("o").await.unwrap();
        store.close();
    }
    // The runners table as an earlier version made it.
    let conn = rusqlite::Connection::open(dir.path().join("nuon.db")).unwrap();
    conn.execute_batch("ALTER TABLE runners DROP COLUMN role")
        .unwrap();
    drop(conn);
    let store = SqliteStore::open(dir.path()).unwrap();
    let org = store.create_org("p").await.unwrap().org_id;
    assert_eq!(store.list_runners(&org).await.unwrap()[0].name, "build");
}

conformance! {
    async fn workflows_keep_their_planned_steps_and_belong_to_one_org(f: Fixture) {
        use nuon_core::workflow::{PlannedStep, StepKind, WorkflowKind};
        use nuon_core::{AppId, InstallId, WorkflowId};

        use super::{NewInstall, NewWorkflow};

        let other = f.store.create_org("other").await.unwrap().org_id;
        let app = f
            .store
            .create_app(&f.org, &AppId::generate(), "web")
            .await
            .unwrap();
        let inst = f
            .store
            .create_install(
                &f.org,
                NewInstall {
                    id: InstallId::generate(),
                    app_id: app.id.clone(),
                    name: "acme".into(),
                    config_version: 1,
                    runner_id: RunnerId::generate(),
                    runner_name: "install-acme".into(),
                    runner_token_hash: "h-acme".into(),
                    inputs_json: "{}".into(),
                    sealed_json: "{}".into(),
                    approval: "prompt".into(),
                },
            )
            .await
            .unwrap();
        let steps = vec![
            PlannedStep {
                name: "plan db".into(),
                kind: StepKind::Plan,
                target: Some("db".into()),
                needs_approval: false,
            },
            PlannedStep {
                name: "apply db".into(),
                kind: StepKind::Apply,
                target: Some("db".into()),
                needs_approval: true,
            },
        ];
        let new = |id: &WorkflowId| NewWorkflow {
            id: id.clone(),
            install_id: inst.id.clone(),
            kind: WorkflowKind::Provision,
            config_version: 1,
            component: None,
            steps: steps.clone(),
        };
        let id = WorkflowId::generate();
        let w = f.store.create_workflow(&f.org, new(&id)).await.unwrap();
        assert_eq!(
            (w.status.as_str(), w.kind, w.steps.len()),
            ("pending", WorkflowKind::Provision, 2)
        );
        assert_eq!(w.steps[1].kind, StepKind::Apply);
        assert!(w.steps[1].needs_approval);
        assert_eq!(
            f.store.get_workflow(&f.org, &id).await.unwrap(),
            Some(w.clone())
        );
        assert_eq!(
            f.store.list_workflows(&f.org, &inst.id).await.unwrap(),
            vec![w]
        );
        assert!(f.store.get_workflow(&other, &id).await.unwrap().is_none());
        assert!(
            f.store
                .list_workflows(&other, &inst.id)
                .await
                .unwrap()
                .is_empty()
        );
        let e = f
            .store
            .create_workflow(&other, new(&WorkflowId::generate()))
            .await
            .unwrap_err();
        assert!(matches!(e, StoreError::Invalid(_)), "{e}");
    }
}

conformance! {
    async fn pruning_removes_old_finished_jobs_and_their_logs_only(f: Fixture) {
        let old = f.queue(1).await;
        let (_, n) = f.claim_one(60_000).await;
        f.store
            .append_logs(&f.runner, &old, Fixture::batch(n, 1, &["a", "b"]))
            .await
            .unwrap();
        f.store
            .complete(
                &f.runner,
                &old,
                Completion {
                    attempt: n,
                    log_lines: 2,
                    result: ok_result(),
                },
            )
            .await
            .unwrap();
        let queued = f.queue(1).await;
        // Nothing finished before an hour ago.
        assert_eq!(f.store.prune(now_ms() - 3_600_000).await.unwrap(), 0);
        assert_eq!(f.texts(&old).await, ["a", "b"]);
        // The finished job and its log go; the queued one stays.
        assert!(f.store.prune(now_ms() + 1).await.unwrap() >= 2);
        assert!(f.store.get_job(&f.org, &old).await.unwrap().is_none());
        assert!(f.store.read_logs(&f.org, &old, 0, 10).await.unwrap().is_none());
        assert_eq!(
            f.store.get_job(&f.org, &queued).await.unwrap().unwrap().status,
            JobStatus::Queued
        );
    }
}

conformance! {
    async fn a_log_longer_than_one_page_of_chunks_is_not_complete_early(f: Fixture) {
        let job = f.queue(1).await;
        let (_, n) = f.claim_one(60_000).await;
        // 100 batches of one line: more chunks than one page reads.
        for i in 1..=100u64 {
            let text = format!("line {i}");
            f.store
                .append_logs(&f.runner, &job, Fixture::batch(n, i, &[text.as_str()]))
                .await
                .unwrap();
        }
        f.store
            .complete(
                &f.runner,
                &job,
                Completion {
                    attempt: n,
                    log_lines: 100,
                    result: ok_result(),
                },
            )
            .await
            .unwrap();
        let mut cursor = 0;
        let mut seen = Vec::new();
        loop {
            let page = f.store.read_logs(&f.org, &job, cursor, 1000).await.unwrap().unwrap();
            seen.extend(page.lines.iter().map(|l| l.seq));
            cursor = page.next;
            if page.complete {
                break;
            }
            assert!(!page.lines.is_empty(), "a page that is not complete moves on");
        }
        assert_eq!(seen, (1..=100).collect::<Vec<_>>());
    }
}

conformance! {
    async fn a_page_of_long_lines_stops_at_its_byte_budget(f: Fixture) {
        let job = f.queue(1).await;
        let (_, n) = f.claim_one(60_000).await;
        // Three batches of 130 lines of 16,000 bytes: chunks of 2 MB, each
        // more than a page holds, 6.2 MB in all.
        let lines: Vec<String> = (0..390).map(|i| format!("{i:05}{}", "x".repeat(15_995))).collect();
        for (b, chunk) in lines.chunks(130).enumerate() {
            let texts: Vec<&str> = chunk.iter().map(String::as_str).collect();
            f.store
                .append_logs(&f.runner, &job, Fixture::batch(n, 1 + 130 * b as u64, &texts))
                .await
                .unwrap();
        }
        let done = Completion {
            attempt: n,
            log_lines: 390,
            result: ok_result(),
        };
        f.store.complete(&f.runner, &job, done).await.unwrap();
        let (mut cursor, mut seen, mut pages) = (0, Vec::new(), 0);
        loop {
            let page = f.store.read_logs(&f.org, &job, cursor, 10_000).await.unwrap().unwrap();
            let bytes: usize = page.lines.iter().map(|l| l.text.len()).sum();
            assert!(
                bytes <= super::shared::MAX_PAGE_BYTES + 16_000,
                "a page of {bytes} bytes"
            );
            let moved = page.next != cursor;
            seen.extend(page.lines.into_iter().map(|l| l.text));
            cursor = page.next;
            pages += 1;
            if page.complete {
                break;
            }
            assert!(moved, "page {pages} is not complete and does not move on");
        }
        assert_eq!(seen.len(), lines.len());
        assert!(seen == lines, "the lines came back out of order");
        assert!(pages >= 6, "6.2 MB came in {pages} page(s)");
    }
}

conformance! {
    async fn a_write_the_database_refuses_fails_alone(f: Fixture) {
        // PostgreSQL's text cannot hold NUL: the completion carrying one
        // may fail (SQLite takes it), but the writes arriving with it must
        // not fail with it.
        for _ in 0..2 {
            f.queue(1).await;
        }
        let claimed = f
            .store
            .claim(&f.runner, &["exec".into()], 2, 60_000)
            .await
            .unwrap()
            .jobs;
        let (a, b) = (&claimed[0], &claimed[1]);
        let lease = [LeaseRef {
            job_id: a.job_id.clone(),
            attempt: a.attempt,
        }];
        let mut poisoned = ok_result();
        poisoned.reason = Some("bad\0reason".into());
        let (beat, logs, end) = tokio::join!(
            f.store.heartbeat(&f.runner, &lease, 60_000),
            f.store.append_logs(&f.runner, &a.job_id, Fixture::batch(a.attempt, 1, &["a"])),
            f.store.complete(
                &f.runner,
                &b.job_id,
                Completion {
                    attempt: b.attempt,
                    log_lines: 0,
                    result: poisoned,
                },
            ),
        );
        assert_eq!(beat.unwrap()[0].state, LeaseState::Active);
        assert_eq!(logs.unwrap().acked_seq, 1);
        assert!(matches!(end, Ok(_) | Err(StoreError::Database(_))), "{end:?}");
        assert_eq!(f.texts(&a.job_id).await, ["a"]);
    }
}

conformance! {
    async fn a_setting_is_stored_once_and_kept(f: Fixture) {
        assert_eq!(f.store.setting_or_insert("k", "first").await.unwrap(), "first");
        assert_eq!(f.store.setting_or_insert("k", "second").await.unwrap(), "first");
        assert_eq!(f.store.setting_or_insert("other", "x").await.unwrap(), "x");
    }
}

/// Two PostgreSQL stores on one database, as two replicas would hold them.
async fn two_replicas() -> Option<(nuon_tests::PgCluster, PostgresStore, PostgresStore)> {
    let pg = nuon_tests::PgCluster::start().unwrap()?;
    let a = PostgresStore::connect(&pg.url).await.unwrap();
    let b = PostgresStore::connect(&pg.url).await.unwrap();
    Some((pg, a, b))
}

#[tokio::test]
async fn an_attempt_completed_on_two_replicas_at_once_gets_its_status_from_both() {
    let Some((pg, a, b)) = two_replicas().await else {
        return;
    };
    let org = a.create_org("o").await.unwrap().org_id;
    let runner = RunnerId::generate();
    a.create_runner(&org, &runner, "r", "h").await.unwrap();
    // Replica a as a fixture (which keeps the cluster); b beside it.
    let f = Fixture {
        store: Box::new(a),
        backing: Backing::Postgres { _cluster: pg },
        org,
        runner,
    };
    // The same completion sent twice, through each replica, at once: one
    // stores it, the other waits on its lock and must answer the same.
    for _ in 0..40 {
        f.queue(1).await;
        let (job, n) = f.claim_one(60_000).await;
        let done = || Completion {
            attempt: n,
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
        let w = tokio::time::timeout(std::time::Duration::from_secs(5), at_b.recv())
            .await
            .expect("the other replica hears within 5s")
            .unwrap();
        if !got.contains(&w) {
            got.push(w);
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
