//! The store conformance suite: every behaviour of the `Store` trait, run
//! against the SQLite store and against the PostgreSQL store (each test on
//! a throwaway cluster of its own, started with `initdb` and `pg_ctl`).

use nuon_core::wire::{Completion, LeaseRef, LeaseState, LogBatch, LogRecords, LogStream};
use nuon_core::{JobId, JobResult, JobSpec, JobStatus, OrgId, RetryPolicy, RunnerId, now_ms};

#[cfg(feature = "postgres")]
use super::PostgresStore;
use super::*;

/// What keeps a store's database alive for a test.
enum Backing {
    Sqlite {
        dir: tempfile::TempDir,
    },
    #[cfg(feature = "postgres")]
    Postgres {
        cluster: nuon_test_fixtures::PgCluster,
    },
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
        Backing::Sqlite { dir },
    )];
    #[cfg(feature = "postgres")]
    if let Some(pg) = nuon_test_fixtures::PgCluster::start().unwrap() {
        let store = PostgresStore::connect(&pg.url).await.unwrap();
        out.push((Box::new(store), Backing::Postgres { cluster: pg }));
    }
    out
}

/// A fixture on each kind of store: an org with a runner `r`.
async fn fixtures() -> Vec<Fixture> {
    let mut out = Vec::new();
    for (store, backing) in empty_stores().await {
        let org = store
            .create_org(&OrgId::generate(), "o", b"sealed key of o")
            .await
            .unwrap()
            .org_id;
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

/// A new deploy workflow `id` of `install` at config version 1, with these
/// steps and nothing else set.
fn new_workflow(
    id: &nuon_core::WorkflowId,
    install: &InstallId,
    steps: Vec<nuon_core::workflow::PlannedStep>,
) -> crate::store::NewWorkflow {
    crate::store::NewWorkflow {
        id: id.clone(),
        install_id: install.clone(),
        kind: nuon_core::workflow::WorkflowKind::Deploy,
        config_version: 1,
        component: None,
        steps,
        inputs: Default::default(),
        trigger: None,
        fire: None,
        release: None,
        rollout: None,
    }
}

/// A plan step of component `db`.
fn step(name: &str) -> nuon_core::workflow::PlannedStep {
    nuon_core::workflow::PlannedStep {
        name: name.into(),
        kind: nuon_core::workflow::StepKind::Plan,
        target: Some("db".into()),
        needs_approval: false,
        skipped: None,
    }
}

/// A new workflow of `install`, pending: a plan and an apply of `db`.
async fn pending(f: &Fixture, install: &InstallId) -> nuon_core::WorkflowId {
    let wf = nuon_core::WorkflowId::generate();
    let steps = vec![step("plan db"), step("apply db")];
    let new = new_workflow(&wf, install, steps);
    f.store.create_workflow(&f.org, new).await.unwrap();
    wf
}

/// An install `name` of `app` to create, with its own runner.
fn new_install(app: &AppId, name: &str, labels: nuon_core::labels::Labels) -> NewInstall {
    NewInstall {
        id: InstallId::generate(),
        app_id: app.clone(),
        name: name.into(),
        config_version: 1,
        runner_id: RunnerId::generate(),
        runner_name: format!("install-{name}"),
        runner_token_hash: format!("hash-{name}-{app}"),
        inputs_json: "{}".into(),
        sealed_json: "{}".into(),
        approval: nuon_core::model::ApprovalMode::ApproveAll,
        toggles: Default::default(),
        overrides: Default::default(),
        labels,
    }
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

mod builds;
mod catalog;
mod fleet;
mod invitations;
mod labels;
mod logs;
mod ops;
mod queue;
#[cfg(feature = "postgres")]
mod replicas;
mod sealing;
mod states;
mod steps;
mod summaries;
mod workflows;

impl Fixture {
    fn kind(&self) -> &'static str {
        match self.backing {
            Backing::Sqlite { .. } => "SQLite",
            #[cfg(feature = "postgres")]
            Backing::Postgres { .. } => "PostgreSQL",
        }
    }

    /// One column of a job's row, read past the store (`sql` selects it
    /// by the job's id, `?` for the parameter).
    async fn raw_text(&self, sql: &str, job: &JobId) -> Option<String> {
        self.raw(sql, job.as_str()).await
    }

    /// One column of a row, read (or written) past the store: `sql` takes
    /// `key` as its one parameter, `?`.
    async fn raw(&self, sql: &str, key: &str) -> Option<String> {
        match &self.backing {
            Backing::Sqlite { dir } => {
                let conn =
                    rusqlite::Connection::open(dir.path().join(SqliteStore::DB_FILE)).unwrap();
                conn.query_row(&sql.replace('?', "?1"), [key], |r| r.get(0))
                    .unwrap()
            }
            #[cfg(feature = "postgres")]
            Backing::Postgres { cluster } => {
                let pool = sqlx::PgPool::connect(&cluster.url).await.unwrap();
                let v = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.replace('?', "$1")))
                    .bind(key)
                    .fetch_one(&pool)
                    .await
                    .unwrap();
                pool.close().await;
                v
            }
        }
    }

    async fn queue(&self, max_attempts: u32) -> JobId {
        self.queue_for(&self.runner, max_attempts).await
    }

    async fn queue_for(&self, runner: &RunnerId, max_attempts: u32) -> JobId {
        let job = self.new_job(runner, "exec", max_attempts);
        let id = job.spec.job_id.clone();
        self.store.enqueue_job(job).await.unwrap();
        id
    }

    /// A job of `kind` for `runner`, not yet queued.
    fn new_job(&self, runner: &RunnerId, kind: &str, max_attempts: u32) -> NewJob {
        let spec = JobSpec {
            job_id: JobId::generate(),
            org_id: self.org.clone(),
            runner_id: runner.clone(),
            kind: kind.into(),
            payload: serde_json::json!({"command": "true"}),
            timeout_secs: 60,
            retry: RetryPolicy { max_attempts },
            created_at_ms: now_ms(),
            redact: Vec::new(),
            role: None,
            sandbox: Default::default(),
            customer_secrets: Vec::new(),
        };
        NewJob {
            sealed_spec: serde_json::to_string(&spec).unwrap(),
            payload: spec.payload.clone(),
            spec,
            signature: "s".into(),
        }
    }

    /// An app `web` and an install of it named `name`, with its runner.
    async fn install(&self, name: &str) -> Install {
        let app = match self.store.find_app(&self.org, "web").await.unwrap() {
            Some(app) => app,
            None => self
                .store
                .create_app(&self.org, &nuon_core::AppId::generate(), "web")
                .await
                .unwrap(),
        };
        self.store
            .create_install(
                &self.org,
                NewInstall {
                    approval: nuon_core::model::ApprovalMode::Prompt,
                    ..new_install(&app.id, name, Default::default())
                },
            )
            .await
            .unwrap()
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
