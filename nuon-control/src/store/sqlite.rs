//! The embedded store: SQLite in WAL mode.
//!
//! - One writer thread owns the only writing connection. Callers send it
//!   closures; it runs as many as are waiting (up to [`MAX_BATCH`]) in one
//!   `BEGIN IMMEDIATE` transaction, each inside its own savepoint so one
//!   failing operation does not undo the others, commits once, and only then
//!   answers the callers. Heartbeats, log batches and claims from many
//!   runners therefore share commits (group commit).
//! - Reads run on a small pool of read-only connections on the blocking pool.
//! - Job logs live in their own database file (`logs.db`), attached to every
//!   connection, so log volume never bloats or locks the main database.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};

use async_trait::async_trait;
use nuon_core::token::{issue_api_token, issue_runner_token};
use nuon_core::wire::{
    AppInfo, BuildInfo, ClaimedJob, Completion, CompletionAck, JobInfo, LeaseRef, LeaseState,
    LeaseStatus, LogAck, LogBatch, LogPage, OrgInfo, RunnerInfo, RunnerRole, TokenInfo, TokenScope,
    WorkflowInfo,
};
use nuon_core::{
    AppId, InstallId, JobId, JobStatus, OrgId, OrgSigningKey, RunnerId, TokenId, WorkflowId, now_ms,
};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::oneshot;

use super::shared::{
    self, AttemptRow, CHUNKS_PER_PAGE, JOB_COLUMNS, JobRow, LogChunk, StepRow, enum_from, enum_str,
    parse_id, role_of, scope_of,
};
use super::{
    ApiPrincipal, Claimed, ComponentState, NewInstall, NewJob, NewOrg, NewWorkflow, Rescued,
    Result, RunnerPrincipal, StateLock, StatePrincipal, StateToken, StepUpdate, Store, StoreError,
    StoredConfig, StoredInstall,
};

/// Most operations one write transaction carries.
const MAX_BATCH: usize = 512;

const SCHEMA: &str = r#"
CREATE TABLE IF NOT EXISTS orgs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    signing_key BLOB NOT NULL,
    created_at INTEGER NOT NULL,
    max_running INTEGER
);
CREATE TABLE IF NOT EXISTS api_tokens (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    scope TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER
);
CREATE TABLE IF NOT EXISTS runners (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL,
    revoked_at INTEGER,
    last_seen_at INTEGER,
    role TEXT NOT NULL DEFAULT 'generic',
    UNIQUE (org_id, name)
);
CREATE TABLE IF NOT EXISTS jobs (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    runner_id TEXT NOT NULL REFERENCES runners(id),
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    signature TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    timeout_secs INTEGER NOT NULL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER,
    reason TEXT,
    outputs TEXT,
    created_at INTEGER NOT NULL,
    started_at INTEGER,
    finished_at INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_queue ON jobs (runner_id, seq) WHERE status = 'queued';
CREATE INDEX IF NOT EXISTS jobs_org ON jobs (org_id, seq);
CREATE INDEX IF NOT EXISTS jobs_running ON jobs (org_id) WHERE status = 'running';
CREATE TABLE IF NOT EXISTS attempts (
    job_id TEXT NOT NULL REFERENCES jobs(id),
    n INTEGER NOT NULL,
    runner_id TEXT NOT NULL,
    state TEXT NOT NULL,
    confirmed INTEGER NOT NULL DEFAULT 0,
    lease_expires INTEGER NOT NULL,
    acked_seq INTEGER NOT NULL DEFAULT 0,
    started_at INTEGER NOT NULL,
    finished_at INTEGER,
    PRIMARY KEY (job_id, n)
);
CREATE INDEX IF NOT EXISTS attempts_leases ON attempts (lease_expires) WHERE state = 'running';
CREATE TABLE IF NOT EXISTS apps (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    name TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    UNIQUE (org_id, name)
);
CREATE TABLE IF NOT EXISTS app_configs (
    app_id TEXT NOT NULL REFERENCES apps(id),
    version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    components INTEGER NOT NULL,
    files TEXT NOT NULL,
    config TEXT NOT NULL,
    warnings TEXT NOT NULL,
    PRIMARY KEY (app_id, version)
);
CREATE TABLE IF NOT EXISTS installs (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    app_id TEXT NOT NULL REFERENCES apps(id),
    name TEXT NOT NULL,
    config_version INTEGER NOT NULL,
    runner_id TEXT NOT NULL REFERENCES runners(id),
    state TEXT NOT NULL,
    inputs TEXT NOT NULL,
    sealed TEXT NOT NULL,
    outputs TEXT,
    created_at INTEGER NOT NULL,
    UNIQUE (org_id, name)
);
CREATE TABLE IF NOT EXISTS workflows (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    install_id TEXT NOT NULL REFERENCES installs(id),
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    config_version INTEGER NOT NULL,
    created_at INTEGER NOT NULL,
    finished_at INTEGER
);
CREATE INDEX IF NOT EXISTS workflows_install ON workflows (install_id, created_at);
CREATE TABLE IF NOT EXISTS workflow_steps (
    workflow_id TEXT NOT NULL REFERENCES workflows(id),
    idx INTEGER NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    target TEXT,
    needs_approval INTEGER NOT NULL,
    status TEXT NOT NULL,
    job_id TEXT,
    approved_at INTEGER,
    PRIMARY KEY (workflow_id, idx)
);
CREATE TABLE IF NOT EXISTS builds (
    job_id TEXT PRIMARY KEY REFERENCES jobs(id),
    org_id TEXT NOT NULL REFERENCES orgs(id),
    app_id TEXT NOT NULL REFERENCES apps(id),
    config_version INTEGER NOT NULL,
    component TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS builds_app ON builds (app_id, config_version, component);
CREATE TABLE IF NOT EXISTS state_tokens (
    token_hash TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs(id),
    install_id TEXT NOT NULL REFERENCES installs(id),
    component TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tf_states (
    install_id TEXT NOT NULL REFERENCES installs(id),
    component TEXT NOT NULL,
    version INTEGER NOT NULL,
    body TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (install_id, component, version)
);
CREATE TABLE IF NOT EXISTS tf_locks (
    install_id TEXT NOT NULL REFERENCES installs(id),
    component TEXT NOT NULL,
    lock_id TEXT NOT NULL,
    info TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (install_id, component)
);
CREATE TABLE IF NOT EXISTS settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS logs.records (
    id INTEGER PRIMARY KEY,
    job_id TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    first_seq INTEGER NOT NULL,
    last_seq INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS logs.records_job ON records (job_id, id);
"#;

type Finish = Box<dyn FnOnce(Option<&rusqlite::Error>) + Send>;
type Op = Box<dyn FnOnce(&Connection) -> Finish + Send>;

/// The embedded SQLite store; see the module docs.
pub struct SqliteStore {
    writer: Mutex<Option<mpsc::Sender<Op>>>,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    readers: Arc<Mutex<Vec<Connection>>>,
    paths: Arc<(PathBuf, PathBuf)>,
}

fn db_err(e: rusqlite::Error) -> StoreError {
    StoreError::Database(Box::new(e))
}

/// Every row of a query, each turned into a `T`.
fn all_rows<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    row: impl FnMut(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Vec<T>> {
    let mut stmt = conn.prepare_cached(sql).map_err(db_err)?;
    let rows = stmt.query_map(params, row).map_err(db_err)?;
    rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
}

/// The row of a query that finds at most one, turned into a `T`.
fn one_row<T>(
    conn: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    row: impl FnOnce(&rusqlite::Row<'_>) -> rusqlite::Result<T>,
) -> Result<Option<T>> {
    conn.query_row(sql, params, row).optional().map_err(db_err)
}

/// An id column, parsed.
fn id_at<T: std::str::FromStr<Err = nuon_core::IdError>>(
    r: &rusqlite::Row<'_>,
    i: usize,
) -> rusqlite::Result<T> {
    let raw: String = r.get(i)?;
    raw.parse().map_err(|e: nuon_core::IdError| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, e.into())
    })
}

const TOKEN_COLUMNS: &str = "id, name, scope, created_at, revoked_at";

fn token_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<TokenInfo> {
    Ok(TokenInfo {
        id: id_at(r, 0)?,
        name: r.get(1)?,
        scope: scope_of(&r.get::<_, String>(2)?),
        created_at_ms: r.get(3)?,
        revoked: r.get::<_, Option<i64>>(4)?.is_some(),
    })
}

const APP_COLUMNS: &str = "a.id, a.name, a.created_at, \
     (SELECT MAX(version) FROM app_configs c WHERE c.app_id = a.id)";

fn app_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<AppInfo> {
    Ok(AppInfo {
        id: id_at(r, 0)?,
        name: r.get(1)?,
        created_at_ms: r.get(2)?,
        latest_config: r.get(3)?,
    })
}

const INSTALL_COLUMNS: &str = "id, name, app_id, config_version, runner_id, state, inputs, sealed, outputs, created_at, approval";

fn install_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StoredInstall> {
    Ok(StoredInstall {
        id: id_at(r, 0)?,
        name: r.get(1)?,
        app_id: id_at(r, 2)?,
        config_version: r.get(3)?,
        runner_id: id_at(r, 4)?,
        state: r.get(5)?,
        inputs_json: r.get(6)?,
        sealed_json: r.get(7)?,
        outputs_json: r.get(8)?,
        created_at_ms: r.get(9)?,
        approval: r.get(10)?,
    })
}

fn load_workflow(conn: &Connection, org: &OrgId, id: &WorkflowId) -> Result<Option<WorkflowInfo>> {
    let row = one_row(
        conn,
        "SELECT install_id, kind, status, config_version, created_at, finished_at, component \
             FROM workflows WHERE id = ?1 AND org_id = ?2",
        params![id.as_str(), org.as_str()],
        |r| {
            Ok((
                id_at::<InstallId>(r, 0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, u32>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, Option<i64>>(5)?,
                r.get::<_, Option<String>>(6)?,
            ))
        },
    )?;
    let Some((install_id, kind, status, config_version, created_at_ms, finished_at_ms, component)) =
        row
    else {
        return Ok(None);
    };
    let mut stmt = conn
        .prepare_cached(
            "SELECT idx, name, kind, target, needs_approval, status, job_id, approved_at, reason, outputs \
             FROM workflow_steps WHERE workflow_id = ?1 ORDER BY idx",
        )
        .map_err(db_err)?;
    let steps = stmt
        .query_map([id.as_str()], |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
                r.get(5)?,
                r.get(6)?,
                r.get(7)?,
                r.get(8)?,
                r.get(9)?,
            ))
        })
        .map_err(db_err)?
        .collect::<rusqlite::Result<Vec<StepRow>>>()
        .map_err(db_err)?
        .into_iter()
        .map(shared::step_info)
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(WorkflowInfo {
        id: id.clone(),
        install_id,
        kind: enum_from(&kind)?,
        status,
        component,
        config_version,
        created_at_ms,
        finished_at_ms,
        steps,
    }))
}

fn current_lock(
    conn: &Connection,
    install: &InstallId,
    component: &str,
) -> Result<Option<StateLock>> {
    one_row(
        conn,
        "SELECT lock_id, info, created_at, job_id FROM tf_locks WHERE install_id = ?1 AND component = ?2",
        params![install.as_str(), component],
        lock_from_row,
    )
}

fn lock_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<StateLock> {
    Ok(StateLock {
        id: r.get(0)?,
        info: r.get(1)?,
        created_at_ms: r.get(2)?,
        job_id: r.get::<_, Option<String>>(3)?.and_then(|j| j.parse().ok()),
    })
}

fn install_in_org(conn: &Connection, org: &OrgId, install: &InstallId) -> Result<bool> {
    conn.query_row(
        "SELECT 1 FROM installs WHERE id = ?1 AND org_id = ?2",
        params![install.as_str(), org.as_str()],
        |_| Ok(()),
    )
    .optional()
    .map(|r| r.is_some())
    .map_err(db_err)
}

/// A unique-constraint failure as a 409 `name_taken`.
fn name_taken(e: rusqlite::Error, what: &str, name: &str) -> StoreError {
    match e {
        rusqlite::Error::SqliteFailure(f, _)
            if f.code == rusqlite::ErrorCode::ConstraintViolation =>
        {
            StoreError::Conflict {
                code: "name_taken",
                message: format!(
                    "{what} named {name:?} already exists in this org; pick another name"
                ),
                acked_seq: None,
            }
        }
        e => db_err(e),
    }
}

fn open_conn(main: &Path, logs: &Path, read_only: bool) -> rusqlite::Result<Connection> {
    let flags = if read_only {
        OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX
    } else {
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX
    };
    let conn = Connection::open_with_flags(main, flags)?;
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    if !read_only {
        conn.pragma_update(None, "journal_mode", "WAL")?;
    }
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    let logs_uri = logs.to_string_lossy().into_owned();
    conn.execute("ATTACH DATABASE ?1 AS logs", [logs_uri])?;
    if !read_only {
        // Log chunks are blobs of up to a few MB: 16 KiB pages write them
        // with a quarter of the WAL frames (and syscalls, and checksums) of
        // the default 4 KiB, for about a third less CPU per stored byte.
        // Larger pages save little more and cost memory (each cached page is
        // a whole page). Only a new logs.db takes it; an existing one keeps
        // its page size.
        conn.execute_batch(
            "PRAGMA logs.page_size = 16384; PRAGMA logs.journal_mode = WAL; PRAGMA logs.synchronous = NORMAL;",
        )?;
    }
    Ok(conn)
}

/// Brings a data dir made by an earlier version up to the schema.
fn migrate(conn: &Connection) -> rusqlite::Result<()> {
    const COLUMNS: [(&str, &str, &str); 8] = [
        ("orgs", "max_running", "INTEGER"),
        ("runners", "role", "TEXT NOT NULL DEFAULT 'generic'"),
        ("app_configs", "sources", "TEXT NOT NULL DEFAULT '[]'"),
        (
            "installs",
            "approval",
            "TEXT NOT NULL DEFAULT 'approve-all'",
        ),
        ("workflows", "component", "TEXT"),
        ("workflow_steps", "reason", "TEXT"),
        ("workflow_steps", "outputs", "TEXT"),
        ("tf_locks", "job_id", "TEXT"),
    ];
    for (table, column, decl) in COLUMNS {
        let has: bool = conn
            .prepare(&format!(
                "SELECT 1 FROM pragma_table_info('{table}') WHERE name = '{column}'"
            ))?
            .exists([])?;
        if !has {
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} {decl}"))?;
        }
    }
    Ok(())
}

impl SqliteStore {
    /// The store's main database file in its data dir.
    pub const DB_FILE: &'static str = "nuon.db";

    /// Opens (creating when needed) the store in `dir`: `nuon.db` and `logs.db`.
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| {
            StoreError::Invalid(format!("cannot create data dir {}: {e}", dir.display()))
        })?;
        let main = dir.join(Self::DB_FILE);
        let logs = dir.join("logs.db");
        let conn = open_conn(&main, &logs, false).map_err(db_err)?;
        conn.execute_batch(SCHEMA).map_err(db_err)?;
        migrate(&conn).map_err(db_err)?;
        let (tx, rx) = mpsc::channel::<Op>();
        let thread = std::thread::Builder::new()
            .name("nuon-store-writer".into())
            .spawn(move || writer_loop(conn, rx))
            .map_err(|e| StoreError::Database(Box::new(e)))?;
        Ok(SqliteStore {
            writer: Mutex::new(Some(tx)),
            writer_thread: Mutex::new(Some(thread)),
            readers: Arc::new(Mutex::new(Vec::new())),
            paths: Arc::new((main, logs)),
        })
    }

    /// Stops the writer after it has committed what it was sent.
    pub fn close(&self) {
        self.writer.lock().expect("writer lock").take();
        if let Some(t) = self.writer_thread.lock().expect("writer lock").take() {
            let _ = t.join();
        }
    }

    /// Runs `f` in the next write transaction and returns its value once that
    /// transaction has committed.
    async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<Result<T>>();
        let op: Op = Box::new(move |conn: &Connection| {
            let result = match conn.execute_batch("SAVEPOINT op") {
                Ok(()) => {
                    let r = f(conn);
                    let end = if r.is_ok() {
                        "RELEASE op"
                    } else {
                        "ROLLBACK TO op; RELEASE op"
                    };
                    match conn.execute_batch(end) {
                        Ok(()) => r,
                        Err(e) => Err(db_err(e)),
                    }
                }
                Err(e) => Err(db_err(e)),
            };
            Box::new(move |commit_error: Option<&rusqlite::Error>| {
                let result = match commit_error {
                    None => result,
                    Some(e) => Err(StoreError::Database(format!("commit failed: {e}").into())),
                };
                let _ = tx.send(result);
            })
        });
        {
            let guard = self.writer.lock().expect("writer lock");
            let sender = guard.as_ref().ok_or(StoreError::Closed)?;
            sender.send(op).map_err(|_| StoreError::Closed)?;
        }
        rx.await.map_err(|_| StoreError::Closed)?
    }

    /// Runs `f` on a pooled read-only connection.
    async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let readers = self.readers.clone();
        let paths = self.paths.clone();
        tokio::task::spawn_blocking(move || {
            let conn = readers.lock().expect("reader pool").pop();
            let conn = match conn {
                Some(c) => c,
                None => open_conn(&paths.0, &paths.1, true).map_err(db_err)?,
            };
            let r = f(&conn);
            readers.lock().expect("reader pool").push(conn);
            r
        })
        .await
        .map_err(|e| StoreError::Database(Box::new(e)))?
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.close();
    }
}

fn writer_loop(conn: Connection, rx: mpsc::Receiver<Op>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(op) => batch.push(op),
                Err(_) => break,
            }
        }
        if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
            // Run nothing: dropping the operations tells every caller the
            // store failed, and nothing was half-written.
            tracing::error!(error = %e, ops = batch.len(), "store: cannot begin a write transaction");
            drop(batch);
            continue;
        }
        let finishes: Vec<Finish> = batch.into_iter().map(|op| op(&conn)).collect();
        let commit = conn.execute_batch("COMMIT").err();
        if commit.is_some() {
            let _ = conn.execute_batch("ROLLBACK");
        }
        for finish in finishes {
            finish(commit.as_ref());
        }
    }
}

// ---------------------------------------------------------------- row mapping

const BUILD_COLUMNS: &str = "b.job_id, b.app_id, b.config_version, b.component, j.status, \
     j.outputs, j.reason, b.created_at";

fn build_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<BuildInfo> {
    let status: String = r.get(4)?;
    let outputs: Option<String> = r.get(5)?;
    Ok(BuildInfo {
        id: id_at(r, 0)?,
        app_id: id_at(r, 1)?,
        config_version: r.get(2)?,
        component: r.get(3)?,
        status: status.parse().map_err(|e: String| {
            rusqlite::Error::FromSqlConversionFailure(4, rusqlite::types::Type::Text, e.into())
        })?,
        artifact: shared::build_artifact(outputs),
        reason: r.get(6)?,
        created_at_ms: r.get(7)?,
    })
}

/// Inserts a queued job (the caller's transaction).
fn insert_job(conn: &Connection, job: &NewJob) -> Result<()> {
    let s = &job.spec;
    conn.execute(
        "INSERT INTO jobs (id, org_id, runner_id, kind, spec, signature, status, max_attempts, \
         timeout_secs, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'queued', ?7, ?8, ?9)",
        params![
            s.job_id.as_str(),
            s.org_id.as_str(),
            s.runner_id.as_str(),
            s.kind,
            job.spec_json,
            job.signature,
            s.retry.max_attempts,
            s.timeout_secs as i64,
            s.created_at_ms
        ],
    )
    .map_err(db_err)?;
    Ok(())
}

fn job_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<Result<JobInfo>> {
    Ok(JobRow {
        id: row.get(0)?,
        runner_id: row.get(1)?,
        kind: row.get(2)?,
        spec: row.get(3)?,
        status: row.get(4)?,
        attempts: row.get(5)?,
        max_attempts: row.get(6)?,
        timeout_secs: row.get(7)?,
        cancel_requested: row.get::<_, i64>(8)? != 0,
        exit_code: row.get(9)?,
        reason: row.get(10)?,
        outputs: row.get(11)?,
        created_at: row.get(12)?,
        started_at: row.get(13)?,
        finished_at: row.get(14)?,
    }
    .into_info())
}

fn runner_from_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<RunnerInfo> {
    let id: String = row.get(0)?;
    Ok(RunnerInfo {
        id: id.parse().map_err(|e: nuon_core::IdError| {
            rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, e.into())
        })?,
        name: row.get(1)?,
        created_at_ms: row.get(2)?,
        last_seen_at_ms: row.get(3)?,
        revoked: row.get::<_, Option<i64>>(4)?.is_some(),
        role: role_of(&row.get::<_, String>(5)?),
    })
}

const RUNNER_COLUMNS: &str = "id, name, created_at, last_seen_at, revoked_at, role";

fn load_job(conn: &Connection, id: &str) -> Result<Option<JobInfo>> {
    one_row(
        conn,
        &format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"),
        [id],
        job_from_row,
    )?
    .transpose()
}

/// The attempt a runner may write to: it must be the job's current attempt,
/// run by this runner, and still running.
fn check_attempt(conn: &Connection, runner: &RunnerId, job: &JobId, n: u32) -> Result<()> {
    let row: Option<(i64, String, String)> = one_row(
        conn,
        "SELECT j.attempts, a.runner_id, a.state FROM jobs j \
             JOIN attempts a ON a.job_id = j.id AND a.n = ?2 WHERE j.id = ?1",
        params![job.as_str(), n],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?;
    let row: Option<AttemptRow<'_>> = row.as_ref().map(|(c, r, s)| (*c, r.as_str(), s.as_str()));
    shared::check_attempt(row, runner, job, n)
}

fn lease_state(
    conn: &Connection,
    runner: &RunnerId,
    lease: &LeaseRef,
) -> rusqlite::Result<LeaseState> {
    let row: Option<(i64, bool, String, String)> = conn
        .query_row(
            "SELECT j.attempts, j.cancel_requested, a.runner_id, a.state FROM jobs j \
             JOIN attempts a ON a.job_id = j.id AND a.n = ?2 WHERE j.id = ?1",
            params![lease.job_id.as_str(), lease.attempt],
            |r| Ok((r.get(0)?, r.get::<_, i64>(1)? != 0, r.get(2)?, r.get(3)?)),
        )
        .optional()?;
    Ok(shared::lease_state(
        row.as_ref()
            .map(|(c, x, r, s)| (*c, *x, r.as_str(), s.as_str())),
        runner,
        lease.attempt,
    ))
}

/// Records that `runner` called the Runner API at `now`.
fn touch_runner(conn: &Connection, runner: &RunnerId, now: i64) -> Result<()> {
    conn.prepare_cached("UPDATE runners SET last_seen_at = ?2 WHERE id = ?1")
        .and_then(|mut s| s.execute(params![runner.as_str(), now]))
        .map(drop)
        .map_err(db_err)
}

#[async_trait]
impl Store for SqliteStore {
    async fn create_org(&self, name: &str) -> Result<NewOrg> {
        let name = name.to_owned();
        self.write(move |conn| {
            let org_id = OrgId::generate();
            let key = OrgSigningKey::generate();
            let token_id = TokenId::generate();
            let token = issue_api_token(&token_id);
            let now = now_ms();
            conn.execute(
                "INSERT INTO orgs (id, name, signing_key, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![org_id.as_str(), name, key.to_bytes().to_vec(), now],
            )
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    StoreError::Conflict {
                        code: "name_taken",
                        message: format!("an org named {name:?} already exists"),
                        acked_seq: None,
                    }
                }
                e => db_err(e),
            })?;
            conn.execute(
                "INSERT INTO api_tokens (id, org_id, name, token_hash, scope, created_at) \
                 VALUES (?1, ?2, 'admin', ?3, 'admin', ?4)",
                params![token_id.as_str(), org_id.as_str(), token.hash, now],
            )
            .map_err(db_err)?;
            let build_id = RunnerId::generate();
            let build_token = issue_runner_token(&build_id);
            conn.execute(
                "INSERT INTO runners (id, org_id, name, token_hash, created_at, role) \
                 VALUES (?1, ?2, 'build', ?3, ?4, 'build')",
                params![build_id.as_str(), org_id.as_str(), build_token.hash, now],
            )
            .map_err(db_err)?;
            Ok(NewOrg {
                org_id,
                admin_token: token,
                signing_key: key,
                build_runner: build_id,
                build_runner_token: build_token,
            })
        })
        .await
    }

    async fn set_org_limit(&self, name: &str, max_running: Option<u32>) -> Result<OrgId> {
        let name = name.to_owned();
        self.write(move |conn| {
            let id: Option<String> = conn
                .query_row(
                    "UPDATE orgs SET max_running = ?2 WHERE name = ?1 RETURNING id",
                    params![name, max_running],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err)?;
            parse_id(&id.ok_or_else(|| shared::no_org(&name))?)
        })
        .await
    }

    async fn setting_or_insert(&self, name: &str, proposed: &str) -> Result<String> {
        let (name, proposed) = (name.to_owned(), proposed.to_owned());
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO settings (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
                params![name, proposed],
            )
            .map_err(db_err)?;
            conn.query_row(
                "SELECT value FROM settings WHERE name = ?1",
                params![name],
                |r| r.get(0),
            )
            .map_err(db_err)
        })
        .await
    }

    async fn count_orgs(&self) -> Result<u64> {
        self.read(|conn| {
            conn.query_row("SELECT count(*) FROM orgs", [], |r| r.get::<_, i64>(0))
                .map(|n| n as u64)
                .map_err(db_err)
        })
        .await
    }

    async fn authenticate_api(&self, token_hash: &str) -> Result<Option<ApiPrincipal>> {
        let hash = token_hash.to_owned();
        self.read(move |conn| {
            let row: Option<(String, String, String)> = one_row(conn,
                    "SELECT org_id, id, scope FROM api_tokens WHERE token_hash = ?1 AND revoked_at IS NULL",
                    [hash],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )?;
            Ok(row.and_then(|(org, tok, scope)| {
                Some(ApiPrincipal {
                    org_id: org.parse().ok()?,
                    token_id: tok.parse().ok()?,
                    scope,
                })
            }))
        })
        .await
    }

    async fn signing_key(&self, org: &OrgId) -> Result<Option<OrgSigningKey>> {
        let org = org.clone();
        self.read(move |conn| {
            let raw: Option<Vec<u8>> = one_row(
                conn,
                "SELECT signing_key FROM orgs WHERE id = ?1",
                [org.as_str()],
                |r| r.get(0),
            )?;
            raw.map(|b| {
                OrgSigningKey::from_bytes(&b).map_err(|e| StoreError::Database(Box::new(e)))
            })
            .transpose()
        })
        .await
    }

    async fn install_of_runner(&self, runner: &RunnerId) -> Result<Option<(OrgId, InstallId)>> {
        let runner = runner.clone();
        self.read(move |conn| {
            one_row(
                conn,
                "SELECT org_id, id FROM installs WHERE runner_id = ?1",
                [runner.as_str()],
                |r| Ok((id_at::<OrgId>(r, 0)?, id_at::<InstallId>(r, 1)?)),
            )
        })
        .await
    }

    async fn get_state(
        &self,
        install: &InstallId,
        component: &str,
    ) -> Result<Option<(u32, String)>> {
        let (install, component) = (install.clone(), component.to_owned());
        self.read(move |conn| {
            one_row(
                conn,
                "SELECT version, body FROM tf_states WHERE install_id = ?1 AND component = ?2 \
                 ORDER BY version DESC LIMIT 1",
                params![install.as_str(), component],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
        })
        .await
    }

    async fn put_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: Option<&str>,
        sealed: String,
    ) -> Result<Result<u32, StateLock>> {
        let (install, component, lock_id) = (
            install.clone(),
            component.to_owned(),
            lock_id.map(str::to_owned),
        );
        self.write(move |conn| {
            if let Some(held) = current_lock(conn, &install, &component)?
                && lock_id.as_deref() != Some(held.id.as_str())
            {
                return Ok(Err(held));
            }
            let version: u32 = conn
                .query_row(
                    "SELECT COALESCE(MAX(version), 0) + 1 FROM tf_states WHERE install_id = ?1 AND component = ?2",
                    params![install.as_str(), component],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            conn.execute(
                "INSERT INTO tf_states (install_id, component, version, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![install.as_str(), component, version, sealed, now_ms()],
            )
            .map_err(db_err)?;
            Ok(Ok(version))
        })
        .await
    }

    async fn lock_state(
        &self,
        install: &InstallId,
        component: &str,
        lock: StateLock,
    ) -> Result<Result<(), StateLock>> {
        let (install, component) = (install.clone(), component.to_owned());
        self.write(move |conn| {
            if let Some(held) = current_lock(conn, &install, &component)? {
                if held.id == lock.id {
                    return Ok(Ok(()));
                }
                // A lock whose job has ended is stale: its Terraform is
                // gone (cancelled, killed, its runner lost).
                let ended = match &held.job_id {
                    Some(j) => one_row(conn,
                            "SELECT status NOT IN ('queued', 'running') FROM jobs WHERE id = ?1",
                            [j.as_str()],
                            |r| r.get::<_, bool>(0),
                        )?
                        .unwrap_or(true),
                    None => false,
                };
                if !ended {
                    return Ok(Err(held));
                }
                tracing::warn!(
                    install = %install,
                    component,
                    lock = %held.id,
                    job = ?held.job_id,
                    "terraform state lock of an ended job released for a new lock"
                );
                conn.execute(
                    "DELETE FROM tf_locks WHERE install_id = ?1 AND component = ?2",
                    params![install.as_str(), component],
                )
                .map_err(db_err)?;
            }
            conn.execute(
                "INSERT INTO tf_locks (install_id, component, lock_id, info, created_at, job_id) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![install.as_str(), component, lock.id, lock.info, lock.created_at_ms, lock.job_id.as_ref().map(|j| j.as_str())],
            )
            .map_err(db_err)?;
            Ok(Ok(()))
        })
        .await
    }

    async fn unlock_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: &str,
    ) -> Result<Result<(), StateLock>> {
        let (install, component, lock_id) =
            (install.clone(), component.to_owned(), lock_id.to_owned());
        self.write(
            move |conn| match current_lock(conn, &install, &component)? {
                Some(held) if held.id != lock_id => Ok(Err(held)),
                Some(_) => {
                    conn.execute(
                        "DELETE FROM tf_locks WHERE install_id = ?1 AND component = ?2",
                        params![install.as_str(), component],
                    )
                    .map_err(db_err)?;
                    Ok(Ok(()))
                }
                None => Ok(Ok(())),
            },
        )
        .await
    }

    async fn force_unlock_state(
        &self,
        org: &OrgId,
        install: &InstallId,
        component: &str,
    ) -> Result<Option<StateLock>> {
        let (org, install, component) = (org.clone(), install.clone(), component.to_owned());
        self.write(move |conn| {
            if !install_in_org(conn, &org, &install)? {
                return Ok(None);
            }
            let held = current_lock(conn, &install, &component)?;
            conn.execute(
                "DELETE FROM tf_locks WHERE install_id = ?1 AND component = ?2",
                params![install.as_str(), component],
            )
            .map_err(db_err)?;
            Ok(held)
        })
        .await
    }

    async fn list_states(&self, org: &OrgId, install: &InstallId) -> Result<Vec<ComponentState>> {
        let (org, install) = (org.clone(), install.clone());
        self.read(move |conn| {
            if !install_in_org(conn, &org, &install)? {
                return Ok(Vec::new());
            }
            let components: Vec<String> = conn
                .prepare_cached(
                    "SELECT component FROM tf_states WHERE install_id = ?1 \
                     UNION SELECT component FROM tf_locks WHERE install_id = ?1 ORDER BY 1",
                )
                .and_then(|mut st| st.query_map([install.as_str()], |r| r.get(0))?.collect())
                .map_err(db_err)?;
            let mut out = Vec::new();
            for component in components {
                let (latest, versions, updated_at_ms): (Option<u32>, u32, Option<i64>) = conn
                    .query_row(
                        "SELECT MAX(version), count(*), MAX(created_at) FROM tf_states \
                         WHERE install_id = ?1 AND component = ?2",
                        params![install.as_str(), component],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )
                    .map_err(db_err)?;
                let lock = current_lock(conn, &install, &component)?;
                out.push(ComponentState {
                    component,
                    latest,
                    versions,
                    updated_at_ms,
                    lock,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn create_workflow(&self, org: &OrgId, new: NewWorkflow) -> Result<WorkflowInfo> {
        let org = org.clone();
        self.write(move |conn| {
            let owned = one_row(conn,
                    "SELECT 1 FROM installs WHERE id = ?1 AND org_id = ?2",
                    params![new.install_id.as_str(), org.as_str()],
                    |_| Ok(()),
                )?;
            if owned.is_none() {
                return Err(StoreError::Invalid(format!("no install {}", new.install_id)));
            }
            let now = now_ms();
            conn.execute(
                "INSERT INTO workflows (id, org_id, install_id, kind, status, config_version, created_at, component) \
                 VALUES (?1, ?2, ?3, ?4, 'pending', ?5, ?6, ?7)",
                params![
                    new.id.as_str(),
                    org.as_str(),
                    new.install_id.as_str(),
                    enum_str(&new.kind),
                    new.config_version,
                    now,
                    new.component
                ],
            )
            .map_err(db_err)?;
            for (i, s) in new.steps.iter().enumerate() {
                conn.execute(
                    "INSERT INTO workflow_steps (workflow_id, idx, name, kind, target, needs_approval, status) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending')",
                    params![new.id.as_str(), i as u32, s.name, enum_str(&s.kind), s.target, s.needs_approval],
                )
                .map_err(db_err)?;
            }
            load_workflow(conn, &org, &new.id)?
                .ok_or_else(|| StoreError::Invalid("the workflow vanished".into()))
        })
        .await
    }

    async fn list_workflows(&self, org: &OrgId, install: &InstallId) -> Result<Vec<WorkflowInfo>> {
        let (org, install) = (org.clone(), install.clone());
        self.read(move |conn| {
            let ids: Vec<String> = conn
                .prepare_cached(
                    "SELECT id FROM workflows WHERE org_id = ?1 AND install_id = ?2 ORDER BY created_at DESC, id DESC",
                )
                .and_then(|mut st| {
                    st.query_map(params![org.as_str(), install.as_str()], |r| r.get(0))?
                        .collect()
                })
                .map_err(db_err)?;
            let mut out = Vec::new();
            for id in ids {
                let id: WorkflowId = id.parse().map_err(|e: nuon_core::IdError| StoreError::Database(Box::new(e)))?;
                out.extend(load_workflow(conn, &org, &id)?);
            }
            Ok(out)
        })
        .await
    }

    async fn get_workflow(&self, org: &OrgId, id: &WorkflowId) -> Result<Option<WorkflowInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.read(move |conn| load_workflow(conn, &org, &id)).await
    }

    async fn active_workflows(&self) -> Result<Vec<(OrgId, WorkflowId)>> {
        self.read(move |conn| {
            all_rows(
                conn,
                "SELECT org_id, id FROM workflows WHERE status IN ('pending', 'running', 'cancelling') \
                 ORDER BY created_at, id",
                [],
                |r| Ok((id_at(r, 0)?, id_at(r, 1)?)),
            )
        })
        .await
    }

    async fn set_workflow_status(&self, org: &OrgId, id: &WorkflowId, status: &str) -> Result<()> {
        let (org, id, status) = (org.clone(), id.clone(), status.to_owned());
        self.write(move |conn| {
            let ended = !matches!(status.as_str(), "pending" | "running" | "cancelling");
            conn.execute(
                "UPDATE workflows SET status = ?3, finished_at = CASE WHEN ?4 THEN ?5 ELSE NULL END \
                 WHERE id = ?1 AND org_id = ?2",
                params![id.as_str(), org.as_str(), status, ended, now_ms()],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn update_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        u: StepUpdate,
    ) -> Result<()> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            let changed = conn
                .execute(
                    "UPDATE workflow_steps SET status = ?4, reason = ?5, \
                     outputs = COALESCE(?6, outputs), \
                     approved_at = CASE ?7 WHEN 1 THEN ?8 WHEN 0 THEN NULL ELSE approved_at END, \
                     job_id = CASE WHEN ?9 THEN NULL ELSE job_id END \
                     WHERE workflow_id = ?1 AND idx = ?3 \
                     AND EXISTS (SELECT 1 FROM workflows w WHERE w.id = ?1 AND w.org_id = ?2)",
                    params![
                        id.as_str(),
                        org.as_str(),
                        index,
                        u.status,
                        u.reason,
                        u.outputs_json,
                        u.approved,
                        now_ms(),
                        u.clear_job
                    ],
                )
                .map_err(db_err)?;
            if changed == 0 {
                return Err(StoreError::Invalid(format!(
                    "no step {index} in workflow {id}"
                )));
            }
            Ok(())
        })
        .await
    }

    async fn dispatch_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        job: NewJob,
        token: Option<StateToken>,
    ) -> Result<()> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            insert_job(conn, &job)?;
            let changed = conn
                .execute(
                    "UPDATE workflow_steps SET status = 'running', job_id = ?4, reason = NULL \
                     WHERE workflow_id = ?1 AND idx = ?3 \
                     AND EXISTS (SELECT 1 FROM workflows w WHERE w.id = ?1 AND w.org_id = ?2 \
                                 AND w.status = 'running')",
                    params![id.as_str(), org.as_str(), index, job.spec.job_id.as_str()],
                )
                .map_err(db_err)?;
            if changed == 0 {
                return Err(StoreError::Invalid(format!(
                    "workflow {id} is not running: step {index} not dispatched"
                )));
            }
            if let Some(t) = token {
                conn.execute(
                    "INSERT INTO state_tokens (token_hash, job_id, install_id, component) VALUES (?1, ?2, ?3, ?4)",
                    params![t.hash, job.spec.job_id.as_str(), t.install_id.as_str(), t.component],
                )
                .map_err(db_err)?;
            }
            Ok(())
        })
        .await
    }

    async fn set_install_outputs(
        &self,
        org: &OrgId,
        id: &InstallId,
        outputs_json: &str,
        state: &str,
    ) -> Result<()> {
        let (org, id, outputs, state) = (
            org.clone(),
            id.clone(),
            outputs_json.to_owned(),
            state.to_owned(),
        );
        self.write(move |conn| {
            conn.execute(
                "UPDATE installs SET outputs = ?3, state = ?4 WHERE id = ?1 AND org_id = ?2",
                params![id.as_str(), org.as_str(), outputs, state],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn set_install_state(&self, org: &OrgId, id: &InstallId, state: &str) -> Result<()> {
        let (org, id, state) = (org.clone(), id.clone(), state.to_owned());
        self.write(move |conn| {
            conn.execute(
                "UPDATE installs SET state = ?3 WHERE id = ?1 AND org_id = ?2",
                params![id.as_str(), org.as_str(), state],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn set_install_config(&self, org: &OrgId, id: &InstallId, version: u32) -> Result<()> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            conn.execute(
                "UPDATE installs SET config_version = ?3 WHERE id = ?1 AND org_id = ?2",
                params![id.as_str(), org.as_str(), version],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn authenticate_state(&self, token_hash: &str) -> Result<Option<StatePrincipal>> {
        let hash = token_hash.to_owned();
        self.read(move |conn| {
            one_row(
                conn,
                "SELECT j.org_id, t.install_id, t.component, t.job_id FROM state_tokens t \
                 JOIN jobs j ON j.id = t.job_id \
                 WHERE t.token_hash = ?1 AND j.status IN ('queued', 'running')",
                [hash],
                |r| {
                    Ok(StatePrincipal {
                        org_id: id_at(r, 0)?,
                        install_id: id_at(r, 1)?,
                        component: r.get(2)?,
                        job_id: id_at(r, 3)?,
                    })
                },
            )
        })
        .await
    }

    async fn release_locks_of_job(&self, job: &JobId) -> Result<Vec<(String, StateLock)>> {
        let job = job.clone();
        self.write(move |conn| {
            let held = all_rows(
                conn,
                "SELECT component, lock_id, info, created_at, job_id FROM tf_locks WHERE job_id = ?1",
                [job.as_str()],
                |r| {
                    let component: String = r.get(0)?;
                    let lock = StateLock {
                        id: r.get(1)?,
                        info: r.get(2)?,
                        created_at_ms: r.get(3)?,
                        job_id: r.get::<_, Option<String>>(4)?.and_then(|j| j.parse().ok()),
                    };
                    Ok((component, lock))
                },
            )?;
            conn.execute("DELETE FROM tf_locks WHERE job_id = ?1", [job.as_str()])
                .map_err(db_err)?;
            conn.execute("DELETE FROM state_tokens WHERE job_id = ?1", [job.as_str()])
                .map_err(db_err)?;
            Ok(held)
        })
        .await
    }

    async fn enqueue_build(
        &self,
        job: NewJob,
        app: &AppId,
        config_version: u32,
        component: &str,
    ) -> Result<BuildInfo> {
        let (app, component) = (app.clone(), component.to_owned());
        self.write(move |conn| {
            insert_job(conn, &job)?;
            conn.execute(
                "INSERT INTO builds (job_id, org_id, app_id, config_version, component, created_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    job.spec.job_id.as_str(),
                    job.spec.org_id.as_str(),
                    app.as_str(),
                    config_version,
                    component,
                    job.spec.created_at_ms
                ],
            )
            .map_err(db_err)?;
            conn.query_row(
                &format!(
                    "SELECT {BUILD_COLUMNS} FROM builds b JOIN jobs j ON j.id = b.job_id WHERE b.job_id = ?1"
                ),
                [job.spec.job_id.as_str()],
                build_from_row,
            )
            .map_err(db_err)
        })
        .await
    }

    async fn list_builds(&self, org: &OrgId, app: &AppId) -> Result<Vec<BuildInfo>> {
        let (org, app) = (org.clone(), app.clone());
        self.read(move |conn| {
            all_rows(
                conn,
                &format!(
                    "SELECT {BUILD_COLUMNS} FROM builds b JOIN jobs j ON j.id = b.job_id \
                     WHERE b.org_id = ?1 AND b.app_id = ?2 ORDER BY b.created_at DESC, j.seq DESC"
                ),
                params![org.as_str(), app.as_str()],
                build_from_row,
            )
        })
        .await
    }

    async fn get_build(&self, org: &OrgId, id: &JobId) -> Result<Option<BuildInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.read(move |conn| {
            one_row(
                conn,
                &format!(
                    "SELECT {BUILD_COLUMNS} FROM builds b JOIN jobs j ON j.id = b.job_id \
                     WHERE b.org_id = ?1 AND b.job_id = ?2"
                ),
                params![org.as_str(), id.as_str()],
                build_from_row,
            )
        })
        .await
    }

    async fn build_runner(&self, org: &OrgId) -> Result<Option<RunnerId>> {
        let org = org.clone();
        self.read(move |conn| {
            one_row(conn,
                "SELECT id FROM runners WHERE org_id = ?1 AND role = 'build' AND revoked_at IS NULL \
                 ORDER BY created_at LIMIT 1",
                [org.as_str()],
                |r| id_at(r, 0),
            )
        })
        .await
    }

    async fn get_org(&self, org: &OrgId) -> Result<Option<OrgInfo>> {
        let org = org.clone();
        self.read(move |conn| {
            one_row(
                conn,
                "SELECT id, name FROM orgs WHERE id = ?1",
                [org.as_str()],
                |r| {
                    Ok(OrgInfo {
                        id: id_at(r, 0)?,
                        name: r.get(1)?,
                    })
                },
            )
        })
        .await
    }

    async fn create_api_token(
        &self,
        org: &OrgId,
        id: &TokenId,
        name: &str,
        scope: TokenScope,
        token_hash: &str,
    ) -> Result<TokenInfo> {
        let (org, id, name, hash) = (
            org.clone(),
            id.clone(),
            name.to_owned(),
            token_hash.to_owned(),
        );
        self.write(move |conn| {
            let now = now_ms();
            conn.execute(
                "INSERT INTO api_tokens (id, org_id, name, token_hash, scope, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![id.as_str(), org.as_str(), name, hash, scope.as_str(), now],
            )
            .map_err(db_err)?;
            Ok(TokenInfo {
                id,
                name,
                scope,
                created_at_ms: now,
                revoked: false,
            })
        })
        .await
    }

    async fn list_api_tokens(&self, org: &OrgId) -> Result<Vec<TokenInfo>> {
        let org = org.clone();
        self.read(move |conn| {
            all_rows(
                conn,
                &format!(
                    "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE org_id = ?1 ORDER BY created_at, id"
                ),
                [org.as_str()],
                token_from_row,
            )
        })
        .await
    }

    async fn revoke_api_token(&self, org: &OrgId, id: &TokenId) -> Result<Option<TokenInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            conn.execute(
                "UPDATE api_tokens SET revoked_at = ?3 WHERE org_id = ?1 AND id = ?2 AND revoked_at IS NULL",
                params![org.as_str(), id.as_str(), now_ms()],
            )
            .map_err(db_err)?;
            one_row(conn,
                &format!("SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE org_id = ?1 AND id = ?2"),
                params![org.as_str(), id.as_str()],
                token_from_row,
            )
        })
        .await
    }

    async fn create_app(&self, org: &OrgId, id: &AppId, name: &str) -> Result<AppInfo> {
        let (org, id, name) = (org.clone(), id.clone(), name.to_owned());
        self.write(move |conn| {
            let now = now_ms();
            conn.execute(
                "INSERT INTO apps (id, org_id, name, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![id.as_str(), org.as_str(), name, now],
            )
            .map_err(|e| name_taken(e, "an app", &name))?;
            Ok(AppInfo {
                id,
                name,
                created_at_ms: now,
                latest_config: None,
            })
        })
        .await
    }

    async fn list_apps(&self, org: &OrgId) -> Result<Vec<AppInfo>> {
        let org = org.clone();
        self.read(move |conn| {
            all_rows(
                conn,
                &format!(
                    "SELECT {APP_COLUMNS} FROM apps a WHERE a.org_id = ?1 ORDER BY a.created_at, a.id"
                ),
                [org.as_str()],
                app_from_row,
            )
        })
        .await
    }

    async fn find_app(&self, org: &OrgId, name_or_id: &str) -> Result<Option<AppInfo>> {
        let (org, key) = (org.clone(), name_or_id.to_owned());
        self.read(move |conn| {
            one_row(conn,
                &format!(
                    "SELECT {APP_COLUMNS} FROM apps a WHERE a.org_id = ?1 AND (a.id = ?2 OR a.name = ?2)"
                ),
                params![org.as_str(), key],
                app_from_row,
            )
        })
        .await
    }

    async fn add_config(
        &self,
        org: &OrgId,
        app: &AppId,
        config: StoredConfig,
    ) -> Result<StoredConfig> {
        let (org, app) = (org.clone(), app.clone());
        self.write(move |conn| {
            let owned: bool = one_row(conn,
                    "SELECT 1 FROM apps WHERE id = ?1 AND org_id = ?2",
                    params![app.as_str(), org.as_str()],
                    |_| Ok(true),
                )?
                .unwrap_or(false);
            if !owned {
                return Err(StoreError::Invalid(format!("no app {app}")));
            }
            let version: u32 = conn
                .query_row(
                    "SELECT COALESCE(MAX(version), 0) + 1 FROM app_configs WHERE app_id = ?1",
                    [app.as_str()],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            let now = now_ms();
            conn.execute(
                "INSERT INTO app_configs (app_id, version, created_at, components, files, config, warnings, sources) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    app.as_str(),
                    version,
                    now,
                    config.components,
                    config.files_json,
                    config.config_json,
                    config.warnings_json,
                    config.sources_json
                ],
            )
            .map_err(db_err)?;
            Ok(StoredConfig {
                version,
                created_at_ms: now,
                ..config
            })
        })
        .await
    }

    async fn list_configs(&self, org: &OrgId, app: &AppId) -> Result<Vec<StoredConfig>> {
        let (org, app) = (org.clone(), app.clone());
        self.read(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT c.version, c.created_at, c.components FROM app_configs c \
                     JOIN apps a ON a.id = c.app_id WHERE a.org_id = ?1 AND c.app_id = ?2 ORDER BY c.version",
                )
                .map_err(db_err)?;
            let rows = stmt
                .query_map(params![org.as_str(), app.as_str()], |r| {
                    Ok(StoredConfig {
                        version: r.get(0)?,
                        created_at_ms: r.get(1)?,
                        components: r.get(2)?,
                        files_json: String::new(),
                        config_json: String::new(),
                        warnings_json: String::new(),
                        sources_json: String::new(),
                    })
                })
                .map_err(db_err)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(db_err)
        })
        .await
    }

    async fn get_config(
        &self,
        org: &OrgId,
        app: &AppId,
        version: Option<u32>,
    ) -> Result<Option<StoredConfig>> {
        let (org, app) = (org.clone(), app.clone());
        self.read(move |conn| {
            one_row(conn,
                "SELECT c.version, c.created_at, c.components, c.files, c.config, c.warnings, c.sources \
                 FROM app_configs c JOIN apps a ON a.id = c.app_id \
                 WHERE a.org_id = ?1 AND c.app_id = ?2 AND (?3 IS NULL OR c.version = ?3) \
                 ORDER BY c.version DESC LIMIT 1",
                params![org.as_str(), app.as_str(), version],
                |r| {
                    Ok(StoredConfig {
                        version: r.get(0)?,
                        created_at_ms: r.get(1)?,
                        components: r.get(2)?,
                        files_json: r.get(3)?,
                        config_json: r.get(4)?,
                        warnings_json: r.get(5)?,
                        sources_json: r.get(6)?,
                    })
                },
            )
        })
        .await
    }

    async fn create_install(&self, org: &OrgId, new: NewInstall) -> Result<StoredInstall> {
        let org = org.clone();
        self.write(move |conn| {
            let now = now_ms();
            conn.execute(
                "INSERT INTO runners (id, org_id, name, token_hash, created_at, role) VALUES (?1, ?2, ?3, ?4, ?5, 'install')",
                params![new.runner_id.as_str(), org.as_str(), new.runner_name, new.runner_token_hash, now],
            )
            .map_err(|e| name_taken(e, "a runner", &new.runner_name))?;
            conn.execute(
                "INSERT INTO installs (id, org_id, app_id, name, config_version, runner_id, state, inputs, sealed, created_at, approval) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'created', ?7, ?8, ?9, ?10)",
                params![
                    new.id.as_str(),
                    org.as_str(),
                    new.app_id.as_str(),
                    new.name,
                    new.config_version,
                    new.runner_id.as_str(),
                    new.inputs_json,
                    new.sealed_json,
                    now,
                    new.approval
                ],
            )
            .map_err(|e| name_taken(e, "an install", &new.name))?;
            Ok(StoredInstall {
                id: new.id,
                name: new.name,
                app_id: new.app_id,
                config_version: new.config_version,
                runner_id: new.runner_id,
                state: "created".into(),
                inputs_json: new.inputs_json,
                sealed_json: new.sealed_json,
                outputs_json: None,
                created_at_ms: now,
                approval: new.approval,
            })
        })
        .await
    }

    async fn list_installs(&self, org: &OrgId) -> Result<Vec<StoredInstall>> {
        let org = org.clone();
        self.read(move |conn| {
            all_rows(
                conn,
                &format!(
                    "SELECT {INSTALL_COLUMNS} FROM installs WHERE org_id = ?1 ORDER BY created_at, id"
                ),
                [org.as_str()],
                install_from_row,
            )
        })
        .await
    }

    async fn find_install(&self, org: &OrgId, name_or_id: &str) -> Result<Option<StoredInstall>> {
        let (org, key) = (org.clone(), name_or_id.to_owned());
        self.read(move |conn| {
            one_row(conn,
                &format!(
                    "SELECT {INSTALL_COLUMNS} FROM installs WHERE org_id = ?1 AND (id = ?2 OR name = ?2)"
                ),
                params![org.as_str(), key],
                install_from_row,
            )
        })
        .await
    }

    async fn set_install_inputs(
        &self,
        org: &OrgId,
        id: &InstallId,
        inputs_json: &str,
        sealed_json: &str,
    ) -> Result<Option<StoredInstall>> {
        let (org, id, inputs, sealed) = (
            org.clone(),
            id.clone(),
            inputs_json.to_owned(),
            sealed_json.to_owned(),
        );
        self.write(move |conn| {
            conn.execute(
                "UPDATE installs SET inputs = ?3, sealed = ?4 WHERE org_id = ?1 AND id = ?2",
                params![org.as_str(), id.as_str(), inputs, sealed],
            )
            .map_err(db_err)?;
            one_row(
                conn,
                &format!("SELECT {INSTALL_COLUMNS} FROM installs WHERE org_id = ?1 AND id = ?2"),
                params![org.as_str(), id.as_str()],
                install_from_row,
            )
        })
        .await
    }

    async fn create_runner(
        &self,
        org: &OrgId,
        id: &RunnerId,
        name: &str,
        token_hash: &str,
    ) -> Result<RunnerInfo> {
        let (org, id, name, hash) = (
            org.clone(),
            id.clone(),
            name.to_owned(),
            token_hash.to_owned(),
        );
        self.write(move |conn| {
            let now = now_ms();
            conn.execute(
                "INSERT INTO runners (id, org_id, name, token_hash, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id.as_str(), org.as_str(), name, hash, now],
            )
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    StoreError::Conflict {
                        code: "name_taken",
                        message: format!(
                            "a runner named {name:?} already exists in this org; pick another name or revoke it first"
                        ),
                        acked_seq: None,
                    }
                }
                e => db_err(e),
            })?;
            Ok(RunnerInfo {
                id,
                name,
                created_at_ms: now,
                last_seen_at_ms: None,
                revoked: false,
                role: RunnerRole::Generic,
            })
        })
        .await
    }

    async fn list_runners(&self, org: &OrgId) -> Result<Vec<RunnerInfo>> {
        let org = org.clone();
        self.read(move |conn| {
            all_rows(
                conn,
                &format!(
                    "SELECT {RUNNER_COLUMNS} FROM runners WHERE org_id = ?1 ORDER BY created_at, id"
                ),
                [org.as_str()],
                runner_from_row,
            )
        })
        .await
    }

    async fn find_runner(&self, org: &OrgId, name_or_id: &str) -> Result<Option<RunnerInfo>> {
        let (org, key) = (org.clone(), name_or_id.to_owned());
        self.read(move |conn| {
            one_row(conn,
                &format!(
                    "SELECT {RUNNER_COLUMNS} FROM runners WHERE org_id = ?1 AND (id = ?2 OR name = ?2) \
                     ORDER BY revoked_at IS NOT NULL LIMIT 1"
                ),
                params![org.as_str(), key],
                runner_from_row,
            )
        })
        .await
    }

    async fn revoke_runner(&self, org: &OrgId, id: &RunnerId) -> Result<Option<RunnerInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            conn.execute(
                "UPDATE runners SET revoked_at = ?3 WHERE org_id = ?1 AND id = ?2 AND revoked_at IS NULL",
                params![org.as_str(), id.as_str(), now_ms()],
            )
            .map_err(db_err)?;
            one_row(conn,
                &format!("SELECT {RUNNER_COLUMNS} FROM runners WHERE org_id = ?1 AND id = ?2"),
                params![org.as_str(), id.as_str()],
                runner_from_row,
            )
        })
        .await
    }

    async fn authenticate_runner(&self, token_hash: &str) -> Result<Option<RunnerPrincipal>> {
        let hash = token_hash.to_owned();
        self.read(move |conn| {
            let row: Option<(String, String)> = one_row(
                conn,
                "SELECT id, org_id FROM runners WHERE token_hash = ?1 AND revoked_at IS NULL",
                [hash],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            Ok(row.and_then(|(id, org)| {
                Some(RunnerPrincipal {
                    runner_id: id.parse().ok()?,
                    org_id: org.parse().ok()?,
                })
            }))
        })
        .await
    }

    async fn enqueue_job(&self, job: NewJob) -> Result<JobInfo> {
        self.write(move |conn| {
            insert_job(conn, &job)?;
            load_job(conn, job.spec.job_id.as_str())?
                .ok_or_else(|| StoreError::Invalid("job vanished after insert".into()))
        })
        .await
    }

    async fn get_job(&self, org: &OrgId, id: &JobId) -> Result<Option<JobInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.read(move |conn| {
            one_row(
                conn,
                &format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1 AND org_id = ?2"),
                params![id.as_str(), org.as_str()],
                job_from_row,
            )?
            .transpose()
        })
        .await
    }

    async fn list_jobs(&self, org: &OrgId, limit: u32) -> Result<Vec<JobInfo>> {
        let org = org.clone();
        self.read(move |conn| {
            all_rows(
                conn,
                &format!(
                    "SELECT {JOB_COLUMNS} FROM jobs WHERE org_id = ?1 ORDER BY seq DESC LIMIT ?2"
                ),
                params![org.as_str(), limit],
                job_from_row,
            )?
            .into_iter()
            .collect()
        })
        .await
    }

    async fn request_cancel(&self, org: &OrgId, id: &JobId) -> Result<Option<JobInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            let now = now_ms();
            conn.execute(
                "UPDATE jobs SET status = 'cancelled', cancel_requested = 1, reason = 'cancelled before it started', \
                 finished_at = ?3 WHERE id = ?1 AND org_id = ?2 AND status = 'queued'",
                params![id.as_str(), org.as_str(), now],
            )
            .map_err(db_err)?;
            conn.execute(
                "UPDATE jobs SET cancel_requested = 1 WHERE id = ?1 AND org_id = ?2 AND status = 'running'",
                params![id.as_str(), org.as_str()],
            )
            .map_err(db_err)?;
            one_row(conn,
                &format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1 AND org_id = ?2"),
                params![id.as_str(), org.as_str()],
                job_from_row,
            )?
            .transpose()
        })
        .await
    }

    async fn read_logs(
        &self,
        org: &OrgId,
        job: &JobId,
        cursor: u64,
        limit: u32,
    ) -> Result<Option<LogPage>> {
        let (org, job) = (org.clone(), job.clone());
        self.read(move |conn| {
            let status: Option<String> = one_row(
                conn,
                "SELECT status FROM jobs WHERE id = ?1 AND org_id = ?2",
                params![job.as_str(), org.as_str()],
                |r| r.get(0),
            )?;
            let Some(status) = status else {
                return Ok(None);
            };
            let terminal = status
                .parse::<JobStatus>()
                .map(JobStatus::is_terminal)
                .unwrap_or(false);
            // The chunks' sizes first, then only the bodies the page needs.
            let sizes = conn
                .prepare_cached(
                    "SELECT id, last_seq - first_seq + 1, octet_length(body) FROM logs.records \
                     WHERE job_id = ?1 AND id >= ?2 ORDER BY id LIMIT ?3",
                )
                .and_then(|mut s| {
                    s.query_map(
                        params![job.as_str(), shared::cursor_chunk(cursor), CHUNKS_PER_PAGE],
                        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                    )?
                    .collect::<rusqlite::Result<Vec<shared::ChunkSize>>>()
                })
                .map_err(db_err)?;
            let (take, more) = shared::chunks_for_page(&sizes, cursor, limit);
            let last = sizes.get(take.wrapping_sub(1)).map_or(-1, |c| c.0);
            let mut stmt = conn
                .prepare_cached(
                    "SELECT id, attempt, first_seq, body FROM logs.records \
                     WHERE job_id = ?1 AND id >= ?2 AND id <= ?3 ORDER BY id",
                )
                .map_err(db_err)?;
            let rows = stmt
                .query_map(
                    params![job.as_str(), shared::cursor_chunk(cursor), last],
                    |r| {
                        Ok((
                            r.get::<_, i64>(0)?,
                            r.get::<_, u32>(1)?,
                            r.get::<_, i64>(2)?,
                            r.get::<_, String>(3)?,
                        ))
                    },
                )
                .map_err(db_err)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(db_err)?;
            let chunks = rows.iter().map(|(id, attempt, first_seq, body)| LogChunk {
                id: *id,
                attempt: *attempt,
                first_seq: *first_seq,
                body,
            });
            Ok(Some(shared::log_page(
                chunks, cursor, limit, more, terminal,
            )))
        })
        .await
    }

    async fn claim(
        &self,
        runner: &RunnerId,
        kinds: &[String],
        max: u32,
        lease_ms: u64,
    ) -> Result<Claimed> {
        let runner = runner.clone();
        let kinds = serde_json::to_string(kinds).unwrap_or_else(|_| "[]".into());
        self.write(move |conn| {
            let now = now_ms();
            touch_runner(conn, &runner, now)?;
            if max == 0 {
                return Ok(Claimed::default());
            }
            let mut stmt = conn
                .prepare_cached(
                    "SELECT seq, id, spec, signature, attempts FROM jobs \
                     WHERE runner_id = ?1 AND status = 'queued' \
                     AND kind IN (SELECT value FROM json_each(?2)) ORDER BY seq LIMIT ?3",
                )
                .map_err(db_err)?;
            let mut picked = stmt
                .query_map(params![runner.as_str(), kinds, max], |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, u32>(4)?,
                    ))
                })
                .map_err(db_err)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(db_err)?;
            if picked.is_empty() {
                return Ok(Claimed::default());
            }
            // The org's limit on running jobs (the writer is the only one, so
            // the count cannot change under us).
            let room = conn
                .prepare_cached(
                    "SELECT o.max_running - (SELECT count(*) FROM jobs j \
                     WHERE j.org_id = o.id AND j.status = 'running') \
                     FROM runners r JOIN orgs o ON o.id = r.org_id \
                     WHERE r.id = ?1 AND o.max_running IS NOT NULL",
                )
                .and_then(|mut s| {
                    s.query_row([runner.as_str()], |r| r.get::<_, i64>(0))
                        .optional()
                })
                .map_err(db_err)?;
            let held_back = shared::hold_back(&mut picked, room);
            let mut claimed = Vec::with_capacity(picked.len());
            for (seq, id, spec, signature, attempts) in picked {
                let n = attempts + 1;
                conn.execute(
                    "UPDATE jobs SET status = 'running', attempts = ?2, started_at = coalesce(started_at, ?3) \
                     WHERE seq = ?1",
                    params![seq, n, now],
                )
                .map_err(db_err)?;
                conn.execute(
                    "INSERT INTO attempts (job_id, n, runner_id, state, lease_expires, started_at) \
                     VALUES (?1, ?2, ?3, 'running', ?4, ?5)",
                    params![id, n, runner.as_str(), now + lease_ms as i64, now],
                )
                .map_err(db_err)?;
                claimed.push(ClaimedJob {
                    job_id: id.parse().map_err(|e: nuon_core::IdError| {
                        StoreError::Database(Box::new(e))
                    })?,
                    attempt: n,
                    spec,
                    signature,
                    lease_ms,
                });
            }
            Ok(Claimed {
                jobs: claimed,
                held_back,
            })
        })
        .await
    }

    async fn heartbeat(
        &self,
        runner: &RunnerId,
        leases: &[LeaseRef],
        lease_ms: u64,
    ) -> Result<Vec<LeaseStatus>> {
        let runner = runner.clone();
        let leases = leases.to_vec();
        self.write(move |conn| {
            let now = now_ms();
            touch_runner(conn, &runner, now)?;
            let mut out = Vec::with_capacity(leases.len());
            for lease in leases {
                let state = lease_state(conn, &runner, &lease).map_err(db_err)?;
                if state != LeaseState::Stale {
                    conn.execute(
                        "UPDATE attempts SET lease_expires = ?3, confirmed = 1 WHERE job_id = ?1 AND n = ?2",
                        params![lease.job_id.as_str(), lease.attempt, now + lease_ms as i64],
                    )
                    .map_err(db_err)?;
                }
                out.push(LeaseStatus {
                    job_id: lease.job_id,
                    attempt: lease.attempt,
                    state,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn lease_states(
        &self,
        runner: &RunnerId,
        leases: &[LeaseRef],
    ) -> Result<Vec<LeaseStatus>> {
        let runner = runner.clone();
        let leases = leases.to_vec();
        self.read(move |conn| {
            leases
                .into_iter()
                .map(|lease| {
                    let state = lease_state(conn, &runner, &lease).map_err(db_err)?;
                    Ok(LeaseStatus {
                        job_id: lease.job_id,
                        attempt: lease.attempt,
                        state,
                    })
                })
                .collect()
        })
        .await
    }

    async fn append_logs(&self, runner: &RunnerId, job: &JobId, batch: LogBatch) -> Result<LogAck> {
        let (runner, job) = (runner.clone(), job.clone());
        self.write(move |conn| {
            check_attempt(conn, &runner, &job, batch.attempt)?;
            let acked: i64 = conn
                .query_row(
                    "SELECT acked_seq FROM attempts WHERE job_id = ?1 AND n = ?2",
                    params![job.as_str(), batch.attempt],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            let Some((skip, first, last)) = shared::new_lines(acked as u64, &batch) else {
                return Ok(LogAck { acked_seq: acked as u64 });
            };
            let body = batch.lines.tail(skip);
            conn.prepare_cached(
                "INSERT INTO logs.records (job_id, attempt, first_seq, last_seq, body) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .and_then(|mut s| {
                s.execute(params![job.as_str(), batch.attempt, first as i64, last as i64, body])
            })
            .map_err(db_err)?;
            conn.execute(
                "UPDATE attempts SET acked_seq = ?3 WHERE job_id = ?1 AND n = ?2",
                params![job.as_str(), batch.attempt, last as i64],
            )
            .map_err(db_err)?;
            Ok(LogAck { acked_seq: last })
        })
        .await
    }

    async fn complete(
        &self,
        runner: &RunnerId,
        job: &JobId,
        completion: Completion,
    ) -> Result<CompletionAck> {
        let (runner, job) = (runner.clone(), job.clone());
        self.write(move |conn| {
            let n = completion.attempt;
            // Idempotence: the same attempt completing again gets the same answer.
            let existing: Option<(String, String, i64)> = one_row(conn,
                    "SELECT a.state, j.status, j.attempts FROM attempts a JOIN jobs j ON j.id = a.job_id \
                     WHERE a.job_id = ?1 AND a.n = ?2 AND a.runner_id = ?3",
                    params![job.as_str(), n, runner.as_str()],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )?;
            if let Some((state, status, current)) = &existing
                && state == "finished"
                && *current == i64::from(n)
            {
                return Ok(CompletionAck {
                    status: status
                        .parse()
                        .map_err(|e: String| StoreError::Database(e.into()))?,
                });
            }
            check_attempt(conn, &runner, &job, n)?;
            let acked: i64 = conn
                .query_row(
                    "SELECT acked_seq FROM attempts WHERE job_id = ?1 AND n = ?2",
                    params![job.as_str(), n],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            if (acked as u64) < completion.log_lines {
                return Err(shared::logs_pending(&job, n, completion.log_lines, acked as u64));
            }
            let now = now_ms();
            let result = completion.result;
            let status = JobStatus::from(result.outcome);
            let outputs = if result.outputs.is_null() {
                None
            } else {
                Some(result.outputs.to_string())
            };
            conn.execute(
                "UPDATE attempts SET state = 'finished', finished_at = ?3 WHERE job_id = ?1 AND n = ?2",
                params![job.as_str(), n, now],
            )
            .map_err(db_err)?;
            conn.execute(
                "UPDATE jobs SET status = ?2, exit_code = ?3, reason = ?4, outputs = ?5, finished_at = ?6 \
                 WHERE id = ?1",
                params![
                    job.as_str(),
                    status.as_str(),
                    result.exit_code,
                    result.reason,
                    outputs,
                    now
                ],
            )
            .map_err(db_err)?;
            Ok(CompletionAck { status })
        })
        .await
    }

    async fn rescue_expired(&self, now_ms: i64) -> Result<Vec<Rescued>> {
        self.write(move |conn| {
            let mut stmt = conn
                .prepare_cached(
                    "SELECT a.job_id, a.n, a.runner_id, a.confirmed, j.cancel_requested, j.max_attempts, \
                     (SELECT count(*) FROM attempts c WHERE c.job_id = a.job_id AND c.confirmed = 1), j.org_id \
                     FROM attempts a JOIN jobs j ON j.id = a.job_id \
                     WHERE a.state = 'running' AND a.lease_expires < ?1",
                )
                .map_err(db_err)?;
            let expired = stmt
                .query_map([now_ms], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, u32>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, i64>(3)? != 0,
                        r.get::<_, i64>(4)? != 0,
                        r.get::<_, u32>(5)?,
                        r.get::<_, u32>(6)?,
                        r.get::<_, String>(7)?,
                    ))
                })
                .map_err(db_err)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(db_err)?;
            let mut out = Vec::new();
            for (job, n, runner, confirmed, cancel, max_attempts, started, org) in expired {
                let fate = shared::expire(n, confirmed, cancel, max_attempts, started);
                conn.execute(
                    "UPDATE attempts SET state = ?3, finished_at = ?4 WHERE job_id = ?1 AND n = ?2",
                    params![job, n, fate.attempt_state, now_ms],
                )
                .map_err(db_err)?;
                let requeue = fate.end.is_none();
                match fate.end {
                    None => {
                        conn.execute("UPDATE jobs SET status = 'queued' WHERE id = ?1", [&job])
                            .map_err(db_err)?;
                    }
                    Some((status, reason)) => {
                        conn.execute(
                            "UPDATE jobs SET status = ?2, reason = ?3, finished_at = ?4 WHERE id = ?1",
                            params![job, status, reason, now_ms],
                        )
                        .map_err(db_err)?;
                    }
                }
                out.push(Rescued {
                    job_id: job.parse().map_err(|e: nuon_core::IdError| StoreError::Database(Box::new(e)))?,
                    runner_id: runner.parse().map_err(|e: nuon_core::IdError| StoreError::Database(Box::new(e)))?,
                    org_id: parse_id(&org)?,
                    requeued: requeue,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn prune(&self, finished_before_ms: i64) -> Result<u64> {
        self.write(move |conn| {
            let logs = conn
                .execute(
                    "DELETE FROM logs.records WHERE job_id IN \
                     (SELECT id FROM jobs WHERE finished_at < ?1)",
                    [finished_before_ms],
                )
                .map_err(db_err)?;
            conn.execute(
                "DELETE FROM attempts WHERE job_id IN (SELECT id FROM jobs j WHERE j.finished_at < ?1 \
                 AND NOT EXISTS (SELECT 1 FROM builds b WHERE b.job_id = j.id) \
                 AND NOT EXISTS (SELECT 1 FROM workflow_steps s WHERE s.job_id = j.id) \
                 AND NOT EXISTS (SELECT 1 FROM state_tokens t WHERE t.job_id = j.id))",
                [finished_before_ms],
            )
            .map_err(db_err)?;
            let jobs = conn
                .execute(
                    "DELETE FROM jobs WHERE finished_at < ?1 \
                     AND NOT EXISTS (SELECT 1 FROM builds b WHERE b.job_id = jobs.id) \
                     AND NOT EXISTS (SELECT 1 FROM workflow_steps s WHERE s.job_id = jobs.id) \
                     AND NOT EXISTS (SELECT 1 FROM state_tokens t WHERE t.job_id = jobs.id)",
                    [finished_before_ms],
                )
                .map_err(db_err)?;
            Ok((logs + jobs) as u64)
        })
        .await
    }

    async fn extend_running_leases(&self, until_ms: i64) -> Result<u64> {
        self.write(move |conn| {
            conn.execute(
                "UPDATE attempts SET lease_expires = ?1 WHERE state = 'running' AND lease_expires < ?1",
                [until_ms],
            )
            .map(|n| n as u64)
            .map_err(db_err)
        })
        .await
    }
}
