//! The PostgreSQL store, for several control-plane replicas on one database.
//!
//! - Claims take queued jobs `FOR UPDATE SKIP LOCKED`, so replicas never
//!   wait on each other's claims. The runners' heartbeats, log batches and
//!   completions are group-committed ([`group`]): what many runners send at
//!   once shares one transaction. Every other call is one transaction of
//!   its own on a pooled connection.
//! - Wake-ups cross replicas with `LISTEN/NOTIFY` on one channel: a
//!   publisher task coalesces what this replica announces into at most one
//!   `NOTIFY` per [`NOTIFY_GAP`] (so a queue is never notified more often,
//!   and a burst of queued jobs costs one notification, not one each); a
//!   listener task turns what the others announce into local wake-ups, and
//!   after its connection is lost it wakes everything for a full claim pass.
//! - Maintenance runs on one replica at a time: the one holding a
//!   session-level advisory lock on its own connection. When that replica
//!   dies, its connection closes and the lock passes to the next replica
//!   that asks.
//! - Migrations are numbered and applied once, under an advisory lock, so
//!   replicas starting together do not race.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use nuon_core::token::{issue_api_token, issue_runner_token};
use nuon_core::wire::{
    AppInfo, BuildInfo, ClaimedJob, Completion, CompletionAck, JobInfo, LeaseRef, LeaseStatus,
    LogAck, LogBatch, LogPage, OrgInfo, RunnerInfo, RunnerRole, TokenInfo, TokenScope,
    WorkflowInfo,
};
use nuon_core::{
    AppId, InstallId, JobId, JobStatus, OrgId, OrgSigningKey, RunnerId, TokenId, WorkflowId, now_ms,
};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgRow};
use sqlx::{AssertSqlSafe, Connection, PgConnection, Postgres, Row, Transaction};
use tokio::sync::{broadcast, mpsc};

use super::shared::{
    self, CHUNKS_PER_PAGE, JOB_COLUMNS, JobRow, LogChunk, StepRow, corrupt, enum_from, enum_str,
    parse_id, role_of, scope_of,
};
use super::{
    ApiPrincipal, Claimed, ComponentState, NewInstall, NewJob, NewOrg, NewWorkflow, Rescued,
    Result, RunnerPrincipal, StateLock, StatePrincipal, StateToken, StepUpdate, Store, StoreError,
    StoredConfig, StoredInstall, Wake,
};

mod group;

/// Group-commit tasks per replica: while one commits, the next gathers.
const COMMITTERS: usize = 2;
/// The channel replicas announce wake-ups on.
const CHANNEL: &str = "nuon_wake";
/// The shortest time between two notifications of this replica.
pub const NOTIFY_GAP: Duration = Duration::from_millis(5);
/// `NOTIFY` payloads must stay under 8000 bytes.
const MAX_PAYLOAD: usize = 7000;
/// The advisory lock of the maintenance leader.
const LEADER_LOCK: i64 = 0x6e75_6f6e_6c65_6164; // "nuonlead"
/// The advisory lock migrations run under.
const MIGRATE_LOCK: i64 = 0x6e75_6f6e_6d69_6772; // "nuonmigr"

/// Numbered migrations; each runs once, in order, in one transaction.
const MIGRATIONS: &[(i64, &str)] = &[
    (
        1,
        r#"
CREATE TABLE orgs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    signing_key BYTEA NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE TABLE api_tokens (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    scope TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT
);
CREATE TABLE runners (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    name TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL,
    revoked_at BIGINT,
    last_seen_at BIGINT,
    role TEXT NOT NULL DEFAULT 'generic',
    UNIQUE (org_id, name)
);
CREATE TABLE jobs (
    seq BIGSERIAL PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    runner_id TEXT NOT NULL REFERENCES runners(id),
    kind TEXT NOT NULL,
    spec TEXT NOT NULL,
    signature TEXT NOT NULL,
    status TEXT NOT NULL,
    attempts BIGINT NOT NULL DEFAULT 0,
    max_attempts BIGINT NOT NULL,
    timeout_secs BIGINT NOT NULL,
    cancel_requested BOOLEAN NOT NULL DEFAULT false,
    exit_code INTEGER,
    reason TEXT,
    outputs TEXT,
    created_at BIGINT NOT NULL,
    started_at BIGINT,
    finished_at BIGINT
);
CREATE INDEX jobs_queue ON jobs (runner_id, seq) WHERE status = 'queued';
CREATE INDEX jobs_org ON jobs (org_id, seq);
CREATE INDEX jobs_finished ON jobs (finished_at) WHERE finished_at IS NOT NULL;
CREATE TABLE attempts (
    job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
    n BIGINT NOT NULL,
    runner_id TEXT NOT NULL,
    state TEXT NOT NULL,
    confirmed BOOLEAN NOT NULL DEFAULT false,
    lease_expires BIGINT NOT NULL,
    acked_seq BIGINT NOT NULL DEFAULT 0,
    started_at BIGINT NOT NULL,
    finished_at BIGINT,
    PRIMARY KEY (job_id, n)
);
CREATE INDEX attempts_leases ON attempts (lease_expires) WHERE state = 'running';
CREATE TABLE apps (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    name TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    UNIQUE (org_id, name)
);
CREATE TABLE app_configs (
    app_id TEXT NOT NULL REFERENCES apps(id),
    version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    components BIGINT NOT NULL,
    files TEXT NOT NULL,
    config TEXT NOT NULL,
    warnings TEXT NOT NULL,
    sources TEXT NOT NULL,
    PRIMARY KEY (app_id, version)
);
CREATE TABLE installs (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    app_id TEXT NOT NULL REFERENCES apps(id),
    name TEXT NOT NULL,
    config_version BIGINT NOT NULL,
    runner_id TEXT NOT NULL REFERENCES runners(id),
    state TEXT NOT NULL,
    inputs TEXT NOT NULL,
    sealed TEXT NOT NULL,
    outputs TEXT,
    created_at BIGINT NOT NULL,
    approval TEXT NOT NULL,
    UNIQUE (org_id, name)
);
CREATE TABLE workflows (
    id TEXT PRIMARY KEY,
    org_id TEXT NOT NULL REFERENCES orgs(id),
    install_id TEXT NOT NULL REFERENCES installs(id),
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    config_version BIGINT NOT NULL,
    created_at BIGINT NOT NULL,
    finished_at BIGINT,
    component TEXT
);
CREATE INDEX workflows_install ON workflows (install_id, created_at);
CREATE INDEX workflows_active ON workflows (created_at) WHERE status IN ('pending', 'running', 'cancelling');
CREATE TABLE workflow_steps (
    workflow_id TEXT NOT NULL REFERENCES workflows(id),
    idx BIGINT NOT NULL,
    name TEXT NOT NULL,
    kind TEXT NOT NULL,
    target TEXT,
    needs_approval BOOLEAN NOT NULL,
    status TEXT NOT NULL,
    job_id TEXT,
    approved_at BIGINT,
    reason TEXT,
    outputs TEXT,
    PRIMARY KEY (workflow_id, idx)
);
CREATE TABLE builds (
    job_id TEXT PRIMARY KEY REFERENCES jobs(id),
    org_id TEXT NOT NULL REFERENCES orgs(id),
    app_id TEXT NOT NULL REFERENCES apps(id),
    config_version BIGINT NOT NULL,
    component TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX builds_app ON builds (app_id, config_version, component);
CREATE TABLE state_tokens (
    token_hash TEXT PRIMARY KEY,
    job_id TEXT NOT NULL REFERENCES jobs(id),
    install_id TEXT NOT NULL REFERENCES installs(id),
    component TEXT NOT NULL
);
CREATE TABLE tf_states (
    install_id TEXT NOT NULL REFERENCES installs(id),
    component TEXT NOT NULL,
    version BIGINT NOT NULL,
    body TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (install_id, component, version)
);
CREATE TABLE tf_locks (
    install_id TEXT NOT NULL REFERENCES installs(id),
    component TEXT NOT NULL,
    lock_id TEXT NOT NULL,
    info TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    job_id TEXT,
    PRIMARY KEY (install_id, component)
);
CREATE TABLE log_records (
    id BIGSERIAL PRIMARY KEY,
    job_id TEXT NOT NULL,
    attempt BIGINT NOT NULL,
    first_seq BIGINT NOT NULL,
    last_seq BIGINT NOT NULL,
    body BYTEA NOT NULL
);
CREATE INDEX log_records_job ON log_records (job_id, id);
"#,
    ),
    (
        2,
        r#"
ALTER TABLE orgs ADD COLUMN max_running BIGINT;
CREATE INDEX jobs_running ON jobs (org_id) WHERE status = 'running';
"#,
    ),
    (
        3,
        r#"
CREATE TABLE settings (
    name TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
"#,
    ),
];

fn db(e: sqlx::Error) -> StoreError {
    StoreError::Database(Box::new(e))
}

/// A unique-constraint failure as a 409 `name_taken` with `message`.
fn taken(e: sqlx::Error, message: impl FnOnce() -> String) -> StoreError {
    match &e {
        sqlx::Error::Database(d) if d.is_unique_violation() => StoreError::Conflict {
            code: "name_taken",
            message: message(),
            acked_seq: None,
        },
        _ => db(e),
    }
}

fn get<'r, T>(row: &'r PgRow, i: usize) -> Result<T>
where
    T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    row.try_get(i).map_err(db)
}

/// A `BIGINT` column that holds a `u32`.
fn get_u32(row: &PgRow, i: usize) -> Result<u32> {
    let v: i64 = get(row, i)?;
    u32::try_from(v).map_err(|_| corrupt(format!("column {i}: {v} is out of range")))
}

fn opt_u32(row: &PgRow, i: usize) -> Result<Option<u32>> {
    let v: Option<i64> = get(row, i)?;
    v.map(|v| u32::try_from(v).map_err(|_| corrupt(format!("column {i}: {v} is out of range"))))
        .transpose()
}

fn job_from_row(row: &PgRow) -> Result<JobInfo> {
    JobRow {
        id: get(row, 0)?,
        runner_id: get(row, 1)?,
        kind: get(row, 2)?,
        spec: get(row, 3)?,
        status: get(row, 4)?,
        attempts: get_u32(row, 5)?,
        max_attempts: get_u32(row, 6)?,
        timeout_secs: get(row, 7)?,
        cancel_requested: get(row, 8)?,
        exit_code: get(row, 9)?,
        reason: get(row, 10)?,
        outputs: get(row, 11)?,
        created_at: get(row, 12)?,
        started_at: get(row, 13)?,
        finished_at: get(row, 14)?,
    }
    .into_info()
}

const TOKEN_COLUMNS: &str = "id, name, scope, created_at, revoked_at";

fn token_from_row(r: &PgRow) -> Result<TokenInfo> {
    Ok(TokenInfo {
        id: parse_id(&get::<String>(r, 0)?)?,
        name: get(r, 1)?,
        scope: scope_of(&get::<String>(r, 2)?),
        created_at_ms: get(r, 3)?,
        revoked: get::<Option<i64>>(r, 4)?.is_some(),
    })
}

const APP_COLUMNS: &str = "a.id, a.name, a.created_at, \
     (SELECT MAX(version) FROM app_configs c WHERE c.app_id = a.id)";

fn app_from_row(r: &PgRow) -> Result<AppInfo> {
    Ok(AppInfo {
        id: parse_id(&get::<String>(r, 0)?)?,
        name: get(r, 1)?,
        created_at_ms: get(r, 2)?,
        latest_config: opt_u32(r, 3)?,
    })
}

const INSTALL_COLUMNS: &str = "id, name, app_id, config_version, runner_id, state, inputs, sealed, outputs, created_at, approval";

fn install_from_row(r: &PgRow) -> Result<StoredInstall> {
    Ok(StoredInstall {
        id: parse_id(&get::<String>(r, 0)?)?,
        name: get(r, 1)?,
        app_id: parse_id(&get::<String>(r, 2)?)?,
        config_version: get_u32(r, 3)?,
        runner_id: parse_id(&get::<String>(r, 4)?)?,
        state: get(r, 5)?,
        inputs_json: get(r, 6)?,
        sealed_json: get(r, 7)?,
        outputs_json: get(r, 8)?,
        created_at_ms: get(r, 9)?,
        approval: get(r, 10)?,
    })
}

const RUNNER_COLUMNS: &str = "id, name, created_at, last_seen_at, revoked_at, role";

fn runner_from_row(r: &PgRow) -> Result<RunnerInfo> {
    Ok(RunnerInfo {
        id: parse_id(&get::<String>(r, 0)?)?,
        name: get(r, 1)?,
        created_at_ms: get(r, 2)?,
        last_seen_at_ms: get(r, 3)?,
        revoked: get::<Option<i64>>(r, 4)?.is_some(),
        role: role_of(&get::<String>(r, 5)?),
    })
}

const BUILD_COLUMNS: &str = "b.job_id, b.app_id, b.config_version, b.component, j.status, \
     j.outputs, j.reason, b.created_at";

fn build_from_row(r: &PgRow) -> Result<BuildInfo> {
    Ok(BuildInfo {
        id: parse_id(&get::<String>(r, 0)?)?,
        app_id: parse_id(&get::<String>(r, 1)?)?,
        config_version: get_u32(r, 2)?,
        component: get(r, 3)?,
        status: get::<String>(r, 4)?.parse().map_err(corrupt)?,
        artifact: shared::build_artifact(get(r, 5)?),
        reason: get(r, 6)?,
        created_at_ms: get(r, 7)?,
    })
}

fn lock_from_row(r: &PgRow, at: usize) -> Result<StateLock> {
    Ok(StateLock {
        id: get(r, at)?,
        info: get(r, at + 1)?,
        created_at_ms: get(r, at + 2)?,
        job_id: get::<Option<String>>(r, at + 3)?.and_then(|j| j.parse().ok()),
    })
}

fn config_from_row(r: &PgRow, full: bool) -> Result<StoredConfig> {
    let text = |i: usize| -> Result<String> { if full { get(r, i) } else { Ok(String::new()) } };
    Ok(StoredConfig {
        version: get_u32(r, 0)?,
        created_at_ms: get(r, 1)?,
        components: get_u32(r, 2)?,
        files_json: text(3)?,
        config_json: text(4)?,
        warnings_json: text(5)?,
        sources_json: text(6)?,
    })
}

type Tx = Transaction<'static, Postgres>;

/// The PostgreSQL store; see the module docs.
pub struct PostgresStore {
    pool: PgPool,
    options: PgConnectOptions,
    /// This replica's name in the notifications it sends.
    replica: String,
    wakes: broadcast::Sender<Wake>,
    outbox: mpsc::UnboundedSender<Wake>,
    leader: tokio::sync::Mutex<Option<(PgConnection, bool)>>,
    /// Heartbeats, log batches and completions, committed in groups.
    writes: group::GroupCommit,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("replica", &self.replica)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:password@host:port/database`),
    /// brings the schema up to date, and starts listening for the other
    /// replicas' wake-ups.
    pub async fn connect(url: &str) -> Result<Self> {
        if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
            return Err(StoreError::Invalid(format!(
                "database URL {:?} is not a PostgreSQL URL; expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE",
                redact_url(url)
            )));
        }
        let options: PgConnectOptions = url.parse().map_err(|e| {
            StoreError::Invalid(format!(
                "database URL {:?} is not valid: {e}; expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE",
                redact_url(url)
            ))
        })?;
        let options = options.application_name("nuon-ctl");
        // One connection first: its error says what is wrong (refused,
        // password, no such database), where the pool only times out.
        PgConnection::connect_with(&options)
            .await
            .map_err(|e| {
                StoreError::Invalid(format!(
                    "cannot connect to PostgreSQL at {}: {e}",
                    redact_url(url)
                ))
            })?
            .close()
            .await
            .map_err(db)?;
        let pool = PgPoolOptions::new()
            .max_connections(16)
            .min_connections(2)
            .acquire_timeout(Duration::from_secs(10))
            // No ping before each use: it was one more round trip in every
            // store call (a quarter of a job's). A connection that broke
            // fails its call, the caller retries, the pool replaces it.
            .test_before_acquire(false)
            .connect_with(options.clone())
            .await
            .map_err(|e| {
                StoreError::Invalid(format!(
                    "cannot connect to PostgreSQL at {}: {e}",
                    redact_url(url)
                ))
            })?;
        migrate(&pool).await?;
        let (wakes, _) = broadcast::channel(4096);
        let (outbox, rx) = mpsc::unbounded_channel();
        let replica = RunnerId::generate().to_string();
        let mut listener = PgListener::connect_with(&pool).await.map_err(db)?;
        listener.listen(CHANNEL).await.map_err(db)?;
        let (writes, mut tasks) = group::GroupCommit::start(&pool, COMMITTERS);
        tasks.push(tokio::spawn(publish(pool.clone(), replica.clone(), rx)));
        tasks.push(tokio::spawn(listen(
            listener,
            replica.clone(),
            wakes.clone(),
        )));
        Ok(PostgresStore {
            pool,
            options,
            replica,
            wakes,
            outbox,
            leader: tokio::sync::Mutex::new(None),
            writes,
            tasks: Mutex::new(tasks),
        })
    }

    /// Stops the background tasks and closes every connection.
    pub async fn close(&self) {
        for t in self.tasks.lock().expect("tasks lock").drain(..) {
            t.abort();
        }
        if let Some((conn, _)) = self.leader.lock().await.take() {
            let _ = conn.close().await;
        }
        self.pool.close().await;
    }

    async fn begin(&self) -> Result<Tx> {
        self.pool.begin().await.map_err(db)
    }

    /// The rows of `sql`, whose `$1` is the org, each made by `from_row`.
    async fn org_rows<T>(
        &self,
        sql: String,
        org: &OrgId,
        from_row: fn(&PgRow) -> Result<T>,
    ) -> Result<Vec<T>> {
        sqlx::query(AssertSqlSafe(sql))
            .bind(org.as_str())
            .fetch_all(&self.pool)
            .await
            .map_err(db)?
            .iter()
            .map(from_row)
            .collect()
    }

    /// Revokes row `id` of the org in `table` (once; a second revoke keeps
    /// the first time) and returns it, or `None` when the org has no such row.
    async fn revoke<T>(
        &self,
        table: &str,
        columns: &str,
        org: &OrgId,
        id: &str,
        from_row: fn(&PgRow) -> Result<T>,
    ) -> Result<Option<T>> {
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE {table} SET revoked_at = $3 WHERE org_id = $1 AND id = $2 AND revoked_at IS NULL"
        )))
        .bind(org.as_str())
        .bind(id)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(db)?;
        self.org_row(
            format!("SELECT {columns} FROM {table} WHERE org_id = $1 AND id = $2"),
            org,
            id,
            from_row,
        )
        .await
    }

    /// The row of `sql`, whose `$1` is the org and `$2` a name or id.
    async fn org_row<T>(
        &self,
        sql: String,
        org: &OrgId,
        name_or_id: &str,
        from_row: fn(&PgRow) -> Result<T>,
    ) -> Result<Option<T>> {
        sqlx::query(AssertSqlSafe(sql))
            .bind(org.as_str())
            .bind(name_or_id)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .map(|r| from_row(&r))
            .transpose()
    }
}

impl Drop for PostgresStore {
    fn drop(&mut self) {
        for t in self.tasks.lock().expect("tasks lock").drain(..) {
            t.abort();
        }
    }
}

/// `url` without its password, for error messages.
fn redact_url(url: &str) -> String {
    let start = url.find("://").map_or(0, |s| s + 3);
    match url.rfind('@') {
        Some(at) if at > start => {
            let userinfo = &url[start..at];
            let user = userinfo.split(':').next().unwrap_or_default();
            format!("{}{user}:***{}", &url[..start], &url[at..])
        }
        _ => url.to_owned(),
    }
}

async fn migrate(pool: &PgPool) -> Result<()> {
    let mut conn = pool.acquire().await.map_err(db)?;
    // `CREATE ... IF NOT EXISTS` would log a notice on every start.
    sqlx::query("SET client_min_messages = warning")
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(MIGRATE_LOCK)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    let result = async {
        sqlx::query(
            "CREATE TABLE IF NOT EXISTS nuon_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL)",
        )
        .execute(&mut *conn)
        .await
        .map_err(db)?;
        let done: Option<i64> = sqlx::query_scalar("SELECT MAX(version) FROM nuon_migrations")
            .fetch_one(&mut *conn)
            .await
            .map_err(db)?;
        let done = done.unwrap_or(0);
        if let Some(&(newest, _)) = MIGRATIONS.last()
            && done > newest
        {
            return Err(StoreError::Invalid(format!(
                "the database's schema is version {done}, newer than this nuon-ctl knows ({newest}); run a newer nuon-ctl"
            )));
        }
        for &(version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > done) {
            let mut tx = conn.begin().await.map_err(db)?;
            sqlx::raw_sql(sql).execute(&mut *tx).await.map_err(db)?;
            sqlx::query("INSERT INTO nuon_migrations (version, applied_at) VALUES ($1, $2)")
                .bind(version)
                .bind(now_ms())
                .execute(&mut *tx)
                .await
                .map_err(db)?;
            tx.commit().await.map_err(db)?;
            tracing::info!(version, "database schema migrated");
        }
        Ok(())
    }
    .await;
    let _ = sqlx::query("SELECT pg_advisory_unlock($1)")
        .bind(MIGRATE_LOCK)
        .execute(&mut *conn)
        .await;
    result
}

/// One notification's text for a wake-up: `R <runner>`, `L <job>`, `X`, `A`.
fn encode_wake(w: &Wake) -> String {
    match w {
        Wake::Runner(r) => format!("R {r}"),
        Wake::Logs(j) => format!("L {j}"),
        Wake::Org(o) => format!("O {o}"),
        Wake::Executor => "X".into(),
        Wake::All => "A".into(),
    }
}

fn decode_wake(s: &str) -> Option<Wake> {
    let (tag, rest) = s.split_once(' ').unwrap_or((s, ""));
    match tag {
        "R" => rest.parse().ok().map(Wake::Runner),
        "L" => rest.parse().ok().map(Wake::Logs),
        "O" => rest.parse().ok().map(Wake::Org),
        "X" => Some(Wake::Executor),
        "A" => Some(Wake::All),
        _ => None,
    }
}

/// Sends this replica's wake-ups: everything announced since the last
/// notification, each once, at most one `NOTIFY` (per 7 KB) every
/// [`NOTIFY_GAP`].
async fn publish(pool: PgPool, replica: String, mut rx: mpsc::UnboundedReceiver<Wake>) {
    while let Some(first) = rx.recv().await {
        let mut pending = BTreeSet::new();
        pending.insert(encode_wake(&first));
        while let Ok(w) = rx.try_recv() {
            pending.insert(encode_wake(&w));
        }
        let mut payloads = vec![replica.clone()];
        for item in pending {
            let last = payloads.last_mut().expect("one payload");
            if last.len() + item.len() + 1 > MAX_PAYLOAD {
                payloads.push(format!("{replica}\n{item}"));
            } else {
                last.push('\n');
                last.push_str(&item);
            }
        }
        for payload in payloads {
            let sent = sqlx::query("SELECT pg_notify($1, $2)")
                .bind(CHANNEL)
                .bind(&payload)
                .execute(&pool)
                .await;
            if let Err(e) = sent {
                // The others fall back to their poll; nothing is lost for good.
                tracing::warn!(error = %e, "cannot notify the other replicas");
            }
        }
        tokio::time::sleep(NOTIFY_GAP).await;
    }
}

/// Turns the other replicas' notifications into local wake-ups.
async fn listen(mut listener: PgListener, replica: String, wakes: broadcast::Sender<Wake>) {
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => {
                let mut lines = n.payload().lines();
                if lines.next() == Some(replica.as_str()) {
                    continue;
                }
                for w in lines.filter_map(decode_wake) {
                    let _ = wakes.send(w);
                }
            }
            Ok(None) => {
                // The connection was lost: whatever was announced meanwhile is
                // gone, so every waiter looks again.
                tracing::warn!("lost the notification connection; reconnecting");
                let _ = wakes.send(Wake::All);
            }
            Err(e) => {
                tracing::warn!(error = %e, "notification listener failed; retrying in 1s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                let _ = wakes.send(Wake::All);
            }
        }
    }
}

async fn current_lock(
    tx: &mut Tx,
    install: &InstallId,
    component: &str,
) -> Result<Option<StateLock>> {
    sqlx::query(
        "SELECT lock_id, info, created_at, job_id FROM tf_locks WHERE install_id = $1 AND component = $2 FOR UPDATE",
    )
    .bind(install.as_str())
    .bind(component)
    .fetch_optional(&mut **tx)
    .await
    .map_err(db)?
    .map(|r| lock_from_row(&r, 0))
    .transpose()
}

async fn install_in_org<'e, E>(e: E, org: &OrgId, install: &InstallId) -> Result<bool>
where
    E: sqlx::Executor<'e, Database = Postgres>,
{
    Ok(
        sqlx::query("SELECT 1 FROM installs WHERE id = $1 AND org_id = $2")
            .bind(install.as_str())
            .bind(org.as_str())
            .fetch_optional(e)
            .await
            .map_err(db)?
            .is_some(),
    )
}

async fn load_workflow(
    conn: &mut PgConnection,
    org: &OrgId,
    id: &WorkflowId,
) -> Result<Option<WorkflowInfo>> {
    let Some(r) = sqlx::query(
        "SELECT install_id, kind, status, config_version, created_at, finished_at, component \
         FROM workflows WHERE id = $1 AND org_id = $2",
    )
    .bind(id.as_str())
    .bind(org.as_str())
    .fetch_optional(&mut *conn)
    .await
    .map_err(db)?
    else {
        return Ok(None);
    };
    let steps = sqlx::query(
        "SELECT idx, name, kind, target, needs_approval, status, job_id, approved_at, reason, outputs \
         FROM workflow_steps WHERE workflow_id = $1 ORDER BY idx",
    )
    .bind(id.as_str())
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?
    .iter()
    .map(|s| {
        let row: StepRow = (
            get_u32(s, 0)?,
            get(s, 1)?,
            get(s, 2)?,
            get(s, 3)?,
            get(s, 4)?,
            get(s, 5)?,
            get(s, 6)?,
            get(s, 7)?,
            get(s, 8)?,
            get(s, 9)?,
        );
        shared::step_info(row)
    })
    .collect::<Result<Vec<_>>>()?;
    Ok(Some(WorkflowInfo {
        id: id.clone(),
        install_id: parse_id(&get::<String>(&r, 0)?)?,
        kind: enum_from(&get::<String>(&r, 1)?)?,
        status: get(&r, 2)?,
        component: get(&r, 6)?,
        config_version: get_u32(&r, 3)?,
        created_at_ms: get(&r, 4)?,
        finished_at_ms: get(&r, 5)?,
        steps,
    }))
}

async fn insert_job(tx: &mut Tx, job: &NewJob) -> Result<()> {
    let s = &job.spec;
    sqlx::query(
        "INSERT INTO jobs (id, org_id, runner_id, kind, spec, signature, status, max_attempts, \
         timeout_secs, created_at) VALUES ($1, $2, $3, $4, $5, $6, 'queued', $7, $8, $9)",
    )
    .bind(s.job_id.as_str())
    .bind(s.org_id.as_str())
    .bind(s.runner_id.as_str())
    .bind(&s.kind)
    .bind(&job.spec_json)
    .bind(&job.signature)
    .bind(i64::from(s.retry.max_attempts))
    .bind(s.timeout_secs as i64)
    .bind(s.created_at_ms)
    .execute(&mut **tx)
    .await
    .map_err(db)?;
    Ok(())
}

async fn load_job<'e, E>(e: E, id: &str, org: Option<&OrgId>) -> Result<Option<JobInfo>>
where
    E: sqlx::Executor<'e, Database = Postgres>,
{
    sqlx::query(AssertSqlSafe(format!(
        "SELECT {JOB_COLUMNS} FROM jobs WHERE id = $1 AND ($2::text IS NULL OR org_id = $2)"
    )))
    .bind(id)
    .bind(org.map(|o| o.as_str()))
    .fetch_optional(e)
    .await
    .map_err(db)?
    .map(|r| job_from_row(&r))
    .transpose()
}

async fn lease_states(
    conn: &mut PgConnection,
    runner: &RunnerId,
    leases: &[LeaseRef],
) -> Result<Vec<LeaseStatus>> {
    let ids: Vec<&str> = leases.iter().map(|l| l.job_id.as_str()).collect();
    let rows = sqlx::query(
        "SELECT j.id, a.n, j.attempts, j.cancel_requested, a.runner_id, a.state FROM jobs j \
         JOIN attempts a ON a.job_id = j.id WHERE j.id = ANY($1) AND a.runner_id = $2",
    )
    .bind(&ids)
    .bind(runner.as_str())
    .fetch_all(&mut *conn)
    .await
    .map_err(db)?;
    let mut found = std::collections::HashMap::new();
    for r in &rows {
        let key: (&str, i64) = (get(r, 0)?, get(r, 1)?);
        found.insert(key, (get(r, 2)?, get(r, 3)?, get(r, 4)?, get(r, 5)?));
    }
    Ok(leases
        .iter()
        .map(|l| LeaseStatus {
            job_id: l.job_id.clone(),
            attempt: l.attempt,
            state: shared::lease_state(
                found
                    .get(&(l.job_id.as_str(), i64::from(l.attempt)))
                    .copied(),
                runner,
                l.attempt,
            ),
        })
        .collect())
}

/// Starts up to `max` of `runner`'s queued jobs of `kinds`, oldest first,
/// in one statement: the runner is seen, the jobs taken `FOR UPDATE SKIP
/// LOCKED`, their attempts begun. Unless `limit_checked`, `None` (and
/// nothing started) when the runner's org has a limit on running jobs,
/// which the caller must count first.
async fn start_jobs<'e, E>(
    e: E,
    runner: &RunnerId,
    kinds: &[String],
    max: i64,
    now: i64,
    lease_ms: u64,
    limit_checked: bool,
) -> Result<Option<Vec<ClaimedJob>>>
where
    E: sqlx::Executor<'e, Database = Postgres>,
{
    let rows = sqlx::query(
        "WITH seen AS (UPDATE runners SET last_seen_at = $4 WHERE id = $1 RETURNING org_id), \
         limited AS (SELECT 1 FROM seen JOIN orgs o ON o.id = seen.org_id \
            WHERE o.max_running IS NOT NULL AND NOT $6), \
         picked AS (SELECT seq FROM jobs \
            WHERE runner_id = $1 AND status = 'queued' AND kind = ANY($2) \
            AND NOT EXISTS (SELECT 1 FROM limited) \
            ORDER BY seq LIMIT $3 FOR UPDATE SKIP LOCKED), \
         taken AS (UPDATE jobs j SET status = 'running', attempts = j.attempts + 1, \
            started_at = COALESCE(j.started_at, $4) \
            FROM picked WHERE j.seq = picked.seq \
            RETURNING j.seq, j.id, j.spec, j.signature, j.attempts), \
         begun AS (INSERT INTO attempts (job_id, n, runner_id, state, lease_expires, started_at) \
            SELECT id, attempts, $1, 'running', $5, $4 FROM taken) \
         SELECT seq, id, spec, signature, attempts, false FROM taken \
         UNION ALL SELECT 0, '', '', '', 0, true FROM limited",
    )
    .bind(runner.as_str())
    .bind(kinds)
    .bind(max)
    .bind(now)
    .bind(now + lease_ms as i64)
    .bind(limit_checked)
    .fetch_all(e)
    .await
    .map_err(db)?;
    let mut taken = Vec::with_capacity(rows.len());
    for r in &rows {
        if get::<bool>(r, 5)? {
            return Ok(None);
        }
        taken.push((get::<i64>(r, 0)?, get::<String>(r, 1)?, r));
    }
    taken.sort_by_key(|t| t.0);
    taken
        .into_iter()
        .map(|(_, id, r)| {
            Ok(ClaimedJob {
                job_id: parse_id(&id)?,
                attempt: get::<i64>(r, 4)? as u32,
                spec: get(r, 2)?,
                signature: get(r, 3)?,
                lease_ms,
            })
        })
        .collect::<Result<_>>()
        .map(Some)
}

#[async_trait]
impl Store for PostgresStore {
    fn announce(&self, wake: Wake) {
        let _ = self.outbox.send(wake);
    }

    fn wakeups(&self) -> Option<broadcast::Receiver<Wake>> {
        Some(self.wakes.subscribe())
    }

    async fn lead(&self) -> Result<bool> {
        let mut slot = self.leader.lock().await;
        if slot.is_none() {
            let conn = PgConnection::connect_with(&self.options)
                .await
                .map_err(db)?;
            *slot = Some((conn, false));
        }
        let (conn, held) = slot.as_mut().expect("a leader connection");
        let answer = if *held {
            sqlx::query("SELECT 1")
                .execute(&mut *conn)
                .await
                .map(|_| true)
        } else {
            sqlx::query_scalar::<_, bool>("SELECT pg_try_advisory_lock($1)")
                .bind(LEADER_LOCK)
                .fetch_one(&mut *conn)
                .await
        };
        match answer {
            Ok(lead) => {
                *held = lead;
                Ok(lead)
            }
            Err(e) => {
                // The connection is gone, and the lock with it.
                *slot = None;
                Err(db(e))
            }
        }
    }

    async fn prune(&self, finished_before_ms: i64) -> Result<u64> {
        let mut tx = self.begin().await?;
        let logs = sqlx::query(
            "DELETE FROM log_records l USING jobs j WHERE l.job_id = j.id \
             AND j.finished_at < $1",
        )
        .bind(finished_before_ms)
        .execute(&mut *tx)
        .await
        .map_err(db)?
        .rows_affected();
        let jobs = sqlx::query(
            "DELETE FROM jobs j WHERE j.finished_at < $1 \
             AND NOT EXISTS (SELECT 1 FROM builds b WHERE b.job_id = j.id) \
             AND NOT EXISTS (SELECT 1 FROM workflow_steps s WHERE s.job_id = j.id) \
             AND NOT EXISTS (SELECT 1 FROM state_tokens t WHERE t.job_id = j.id)",
        )
        .bind(finished_before_ms)
        .execute(&mut *tx)
        .await
        .map_err(db)?
        .rows_affected();
        tx.commit().await.map_err(db)?;
        Ok(logs + jobs)
    }

    async fn create_org(&self, name: &str) -> Result<NewOrg> {
        let mut tx = self.begin().await?;
        let org_id = OrgId::generate();
        let key = OrgSigningKey::generate();
        let token_id = TokenId::generate();
        let token = issue_api_token(&token_id);
        let now = now_ms();
        sqlx::query("INSERT INTO orgs (id, name, signing_key, created_at) VALUES ($1, $2, $3, $4)")
            .bind(org_id.as_str())
            .bind(name)
            .bind(key.to_bytes().to_vec())
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(|e| taken(e, || format!("an org named {name:?} already exists")))?;
        sqlx::query(
            "INSERT INTO api_tokens (id, org_id, name, token_hash, scope, created_at) \
             VALUES ($1, $2, 'admin', $3, 'admin', $4)",
        )
        .bind(token_id.as_str())
        .bind(org_id.as_str())
        .bind(&token.hash)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let build_id = RunnerId::generate();
        let build_token = issue_runner_token(&build_id);
        sqlx::query(
            "INSERT INTO runners (id, org_id, name, token_hash, created_at, role) \
             VALUES ($1, $2, 'build', $3, $4, 'build')",
        )
        .bind(build_id.as_str())
        .bind(org_id.as_str())
        .bind(&build_token.hash)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(NewOrg {
            org_id,
            admin_token: token,
            signing_key: key,
            build_runner: build_id,
            build_runner_token: build_token,
        })
    }

    async fn set_org_limit(&self, name: &str, max_running: Option<u32>) -> Result<OrgId> {
        let id: Option<String> =
            sqlx::query_scalar("UPDATE orgs SET max_running = $2 WHERE name = $1 RETURNING id")
                .bind(name)
                .bind(max_running.map(i64::from))
                .fetch_optional(&self.pool)
                .await
                .map_err(db)?;
        parse_id(&id.ok_or_else(|| shared::no_org(name))?)
    }

    async fn setting_or_insert(&self, name: &str, proposed: &str) -> Result<String> {
        sqlx::query(
            "INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(proposed)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        // A new statement: it sees a value another replica stored meanwhile.
        sqlx::query_scalar("SELECT value FROM settings WHERE name = $1")
            .bind(name)
            .fetch_one(&self.pool)
            .await
            .map_err(db)
    }

    async fn count_orgs(&self) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM orgs")
            .fetch_one(&self.pool)
            .await
            .map_err(db)?;
        Ok(n as u64)
    }

    async fn authenticate_api(&self, token_hash: &str) -> Result<Option<ApiPrincipal>> {
        let row = sqlx::query(
            "SELECT org_id, id, scope FROM api_tokens WHERE token_hash = $1 AND revoked_at IS NULL",
        )
        .bind(token_hash)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        row.map(|r| {
            Ok(ApiPrincipal {
                org_id: parse_id(&get::<String>(&r, 0)?)?,
                token_id: parse_id(&get::<String>(&r, 1)?)?,
                scope: get(&r, 2)?,
            })
        })
        .transpose()
    }

    async fn signing_key(&self, org: &OrgId) -> Result<Option<OrgSigningKey>> {
        let raw: Option<Vec<u8>> = sqlx::query_scalar("SELECT signing_key FROM orgs WHERE id = $1")
            .bind(org.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        raw.map(|b| OrgSigningKey::from_bytes(&b).map_err(corrupt))
            .transpose()
    }

    async fn install_of_runner(&self, runner: &RunnerId) -> Result<Option<(OrgId, InstallId)>> {
        sqlx::query("SELECT org_id, id FROM installs WHERE runner_id = $1")
            .bind(runner.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .map(|r| {
                Ok((
                    parse_id(&get::<String>(&r, 0)?)?,
                    parse_id(&get::<String>(&r, 1)?)?,
                ))
            })
            .transpose()
    }

    async fn get_state(
        &self,
        install: &InstallId,
        component: &str,
    ) -> Result<Option<(u32, String)>> {
        sqlx::query(
            "SELECT version, body FROM tf_states WHERE install_id = $1 AND component = $2 \
             ORDER BY version DESC LIMIT 1",
        )
        .bind(install.as_str())
        .bind(component)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?
        .map(|r| Ok((get_u32(&r, 0)?, get(&r, 1)?)))
        .transpose()
    }

    async fn put_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: Option<&str>,
        sealed: String,
    ) -> Result<Result<u32, StateLock>> {
        let mut tx = self.begin().await?;
        // Writers of one state queue here, so versions never collide.
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(format!("state:{install}:{component}"))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        if let Some(held) = current_lock(&mut tx, install, component).await?
            && lock_id != Some(held.id.as_str())
        {
            return Ok(Err(held));
        }
        let version: i64 = sqlx::query_scalar(
            "SELECT COALESCE(MAX(version), 0) + 1 FROM tf_states WHERE install_id = $1 AND component = $2",
        )
        .bind(install.as_str())
        .bind(component)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        sqlx::query(
            "INSERT INTO tf_states (install_id, component, version, body, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(install.as_str())
        .bind(component)
        .bind(version)
        .bind(&sealed)
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(Ok(version as u32))
    }

    async fn lock_state(
        &self,
        install: &InstallId,
        component: &str,
        lock: StateLock,
    ) -> Result<Result<(), StateLock>> {
        let mut tx = self.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(format!("state:{install}:{component}"))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        if let Some(held) = current_lock(&mut tx, install, component).await? {
            if held.id == lock.id {
                return Ok(Ok(()));
            }
            // A lock whose job has ended is stale: its Terraform is gone.
            let ended = match &held.job_id {
                Some(j) => sqlx::query_scalar::<_, bool>(
                    "SELECT status NOT IN ('queued', 'running') FROM jobs WHERE id = $1",
                )
                .bind(j.as_str())
                .fetch_optional(&mut *tx)
                .await
                .map_err(db)?
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
            sqlx::query("DELETE FROM tf_locks WHERE install_id = $1 AND component = $2")
                .bind(install.as_str())
                .bind(component)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        sqlx::query(
            "INSERT INTO tf_locks (install_id, component, lock_id, info, created_at, job_id) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(install.as_str())
        .bind(component)
        .bind(&lock.id)
        .bind(&lock.info)
        .bind(lock.created_at_ms)
        .bind(lock.job_id.as_ref().map(|j| j.as_str()))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(Ok(()))
    }

    async fn unlock_state(
        &self,
        install: &InstallId,
        component: &str,
        lock_id: &str,
    ) -> Result<Result<(), StateLock>> {
        let mut tx = self.begin().await?;
        let answer = match current_lock(&mut tx, install, component).await? {
            Some(held) if held.id != lock_id => Err(held),
            Some(_) => {
                sqlx::query("DELETE FROM tf_locks WHERE install_id = $1 AND component = $2")
                    .bind(install.as_str())
                    .bind(component)
                    .execute(&mut *tx)
                    .await
                    .map_err(db)?;
                Ok(())
            }
            None => Ok(()),
        };
        tx.commit().await.map_err(db)?;
        Ok(answer)
    }

    async fn force_unlock_state(
        &self,
        org: &OrgId,
        install: &InstallId,
        component: &str,
    ) -> Result<Option<StateLock>> {
        let mut tx = self.begin().await?;
        if !install_in_org(&mut *tx, org, install).await? {
            return Ok(None);
        }
        let held = current_lock(&mut tx, install, component).await?;
        sqlx::query("DELETE FROM tf_locks WHERE install_id = $1 AND component = $2")
            .bind(install.as_str())
            .bind(component)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(held)
    }

    async fn list_states(&self, org: &OrgId, install: &InstallId) -> Result<Vec<ComponentState>> {
        if !install_in_org(&self.pool, org, install).await? {
            return Ok(Vec::new());
        }
        let rows = sqlx::query(
            "SELECT c.component, s.latest, COALESCE(s.versions, 0), s.updated, \
                    l.lock_id, l.info, l.created_at, l.job_id \
             FROM (SELECT component FROM tf_states WHERE install_id = $1 \
                   UNION SELECT component FROM tf_locks WHERE install_id = $1) c \
             LEFT JOIN (SELECT component, MAX(version) AS latest, count(*) AS versions, \
                               MAX(created_at) AS updated \
                        FROM tf_states WHERE install_id = $1 GROUP BY component) s \
                    ON s.component = c.component \
             LEFT JOIN tf_locks l ON l.install_id = $1 AND l.component = c.component \
             ORDER BY c.component",
        )
        .bind(install.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|r| {
                Ok(ComponentState {
                    component: get(r, 0)?,
                    latest: opt_u32(r, 1)?,
                    versions: get_u32(r, 2)?,
                    updated_at_ms: get(r, 3)?,
                    lock: match get::<Option<String>>(r, 4)? {
                        Some(_) => Some(lock_from_row(r, 4)?),
                        None => None,
                    },
                })
            })
            .collect()
    }

    async fn create_workflow(&self, org: &OrgId, new: NewWorkflow) -> Result<WorkflowInfo> {
        let mut tx = self.begin().await?;
        if !install_in_org(&mut *tx, org, &new.install_id).await? {
            return Err(StoreError::Invalid(format!(
                "no install {}",
                new.install_id
            )));
        }
        sqlx::query(
            "INSERT INTO workflows (id, org_id, install_id, kind, status, config_version, created_at, component) \
             VALUES ($1, $2, $3, $4, 'pending', $5, $6, $7)",
        )
        .bind(new.id.as_str())
        .bind(org.as_str())
        .bind(new.install_id.as_str())
        .bind(enum_str(&new.kind))
        .bind(i64::from(new.config_version))
        .bind(now_ms())
        .bind(&new.component)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        for (i, s) in new.steps.iter().enumerate() {
            sqlx::query(
                "INSERT INTO workflow_steps (workflow_id, idx, name, kind, target, needs_approval, status) \
                 VALUES ($1, $2, $3, $4, $5, $6, 'pending')",
            )
            .bind(new.id.as_str())
            .bind(i as i64)
            .bind(&s.name)
            .bind(enum_str(&s.kind))
            .bind(&s.target)
            .bind(s.needs_approval)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }
        let wf = load_workflow(&mut tx, org, &new.id)
            .await?
            .ok_or_else(|| StoreError::Invalid("the workflow vanished".into()))?;
        tx.commit().await.map_err(db)?;
        Ok(wf)
    }

    async fn list_workflows(&self, org: &OrgId, install: &InstallId) -> Result<Vec<WorkflowInfo>> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM workflows WHERE org_id = $1 AND install_id = $2 ORDER BY created_at DESC, id DESC",
        )
        .bind(org.as_str())
        .bind(install.as_str())
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
        let mut out = Vec::new();
        for id in ids {
            out.extend(load_workflow(&mut conn, org, &parse_id(&id)?).await?);
        }
        Ok(out)
    }

    async fn get_workflow(&self, org: &OrgId, id: &WorkflowId) -> Result<Option<WorkflowInfo>> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        load_workflow(&mut conn, org, id).await
    }

    async fn active_workflows(&self) -> Result<Vec<(OrgId, WorkflowId)>> {
        sqlx::query(
            "SELECT org_id, id FROM workflows WHERE status IN ('pending', 'running', 'cancelling') \
             ORDER BY created_at, id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db)?
        .iter()
        .map(|r| {
            Ok((
                parse_id(&get::<String>(r, 0)?)?,
                parse_id(&get::<String>(r, 1)?)?,
            ))
        })
        .collect()
    }

    async fn set_workflow_status(&self, org: &OrgId, id: &WorkflowId, status: &str) -> Result<()> {
        let ended = !matches!(status, "pending" | "running" | "cancelling");
        sqlx::query(
            "UPDATE workflows SET status = $3, finished_at = CASE WHEN $4 THEN $5::bigint ELSE NULL END \
             WHERE id = $1 AND org_id = $2",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(status)
        .bind(ended)
        .bind(now_ms())
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn update_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        u: StepUpdate,
    ) -> Result<()> {
        let changed = sqlx::query(
            "UPDATE workflow_steps SET status = $4, reason = $5, \
             outputs = COALESCE($6, outputs), \
             approved_at = CASE WHEN $7::boolean IS NULL THEN approved_at \
                                WHEN $7 THEN $8::bigint ELSE NULL END, \
             job_id = CASE WHEN $9 THEN NULL ELSE job_id END \
             WHERE workflow_id = $1 AND idx = $3 \
             AND EXISTS (SELECT 1 FROM workflows w WHERE w.id = $1 AND w.org_id = $2)",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(i64::from(index))
        .bind(&u.status)
        .bind(&u.reason)
        .bind(&u.outputs_json)
        .bind(u.approved)
        .bind(now_ms())
        .bind(u.clear_job)
        .execute(&self.pool)
        .await
        .map_err(db)?
        .rows_affected();
        if changed == 0 {
            return Err(StoreError::Invalid(format!(
                "no step {index} in workflow {id}"
            )));
        }
        Ok(())
    }

    async fn dispatch_step(
        &self,
        org: &OrgId,
        id: &WorkflowId,
        index: u32,
        job: NewJob,
        token: Option<StateToken>,
    ) -> Result<()> {
        let mut tx = self.begin().await?;
        insert_job(&mut tx, &job).await?;
        let changed = sqlx::query(
            "UPDATE workflow_steps SET status = 'running', job_id = $4, reason = NULL \
             WHERE workflow_id = $1 AND idx = $3 \
             AND EXISTS (SELECT 1 FROM workflows w WHERE w.id = $1 AND w.org_id = $2 \
                         AND w.status = 'running')",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(i64::from(index))
        .bind(job.spec.job_id.as_str())
        .execute(&mut *tx)
        .await
        .map_err(db)?
        .rows_affected();
        if changed == 0 {
            return Err(StoreError::Invalid(format!(
                "workflow {id} is not running: step {index} not dispatched"
            )));
        }
        if let Some(t) = token {
            sqlx::query(
                "INSERT INTO state_tokens (token_hash, job_id, install_id, component) VALUES ($1, $2, $3, $4)",
            )
            .bind(&t.hash)
            .bind(job.spec.job_id.as_str())
            .bind(t.install_id.as_str())
            .bind(&t.component)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }
        tx.commit().await.map_err(db)?;
        Ok(())
    }

    async fn set_install_outputs(
        &self,
        org: &OrgId,
        id: &InstallId,
        outputs_json: &str,
        state: &str,
    ) -> Result<()> {
        sqlx::query("UPDATE installs SET outputs = $3, state = $4 WHERE id = $1 AND org_id = $2")
            .bind(id.as_str())
            .bind(org.as_str())
            .bind(outputs_json)
            .bind(state)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn set_install_state(&self, org: &OrgId, id: &InstallId, state: &str) -> Result<()> {
        sqlx::query("UPDATE installs SET state = $3 WHERE id = $1 AND org_id = $2")
            .bind(id.as_str())
            .bind(org.as_str())
            .bind(state)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn set_install_config(&self, org: &OrgId, id: &InstallId, version: u32) -> Result<()> {
        sqlx::query("UPDATE installs SET config_version = $3 WHERE id = $1 AND org_id = $2")
            .bind(id.as_str())
            .bind(org.as_str())
            .bind(i64::from(version))
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn authenticate_state(&self, token_hash: &str) -> Result<Option<StatePrincipal>> {
        sqlx::query(
            "SELECT j.org_id, t.install_id, t.component, t.job_id FROM state_tokens t \
             JOIN jobs j ON j.id = t.job_id \
             WHERE t.token_hash = $1 AND j.status IN ('queued', 'running')",
        )
        .bind(token_hash)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?
        .map(|r| {
            Ok(StatePrincipal {
                org_id: parse_id(&get::<String>(&r, 0)?)?,
                install_id: parse_id(&get::<String>(&r, 1)?)?,
                component: get(&r, 2)?,
                job_id: parse_id(&get::<String>(&r, 3)?)?,
            })
        })
        .transpose()
    }

    async fn release_locks_of_job(&self, job: &JobId) -> Result<Vec<(String, StateLock)>> {
        let mut tx = self.begin().await?;
        let held = sqlx::query(
            "DELETE FROM tf_locks WHERE job_id = $1 RETURNING component, lock_id, info, created_at, job_id",
        )
        .bind(job.as_str())
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?
        .iter()
        .map(|r| Ok((get(r, 0)?, lock_from_row(r, 1)?)))
        .collect::<Result<Vec<_>>>()?;
        sqlx::query("DELETE FROM state_tokens WHERE job_id = $1")
            .bind(job.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(held)
    }

    async fn enqueue_build(
        &self,
        job: NewJob,
        app: &AppId,
        config_version: u32,
        component: &str,
    ) -> Result<BuildInfo> {
        let mut tx = self.begin().await?;
        insert_job(&mut tx, &job).await?;
        sqlx::query(
            "INSERT INTO builds (job_id, org_id, app_id, config_version, component, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(job.spec.job_id.as_str())
        .bind(job.spec.org_id.as_str())
        .bind(app.as_str())
        .bind(i64::from(config_version))
        .bind(component)
        .bind(job.spec.created_at_ms)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT {BUILD_COLUMNS} FROM builds b JOIN jobs j ON j.id = b.job_id WHERE b.job_id = $1"
        )))
        .bind(job.spec.job_id.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        let build = build_from_row(&row)?;
        tx.commit().await.map_err(db)?;
        Ok(build)
    }

    async fn list_builds(&self, org: &OrgId, app: &AppId) -> Result<Vec<BuildInfo>> {
        sqlx::query(AssertSqlSafe(format!(
            "SELECT {BUILD_COLUMNS} FROM builds b JOIN jobs j ON j.id = b.job_id \
             WHERE b.org_id = $1 AND b.app_id = $2 ORDER BY b.created_at DESC, j.seq DESC"
        )))
        .bind(org.as_str())
        .bind(app.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?
        .iter()
        .map(build_from_row)
        .collect()
    }

    async fn get_build(&self, org: &OrgId, id: &JobId) -> Result<Option<BuildInfo>> {
        sqlx::query(AssertSqlSafe(format!(
            "SELECT {BUILD_COLUMNS} FROM builds b JOIN jobs j ON j.id = b.job_id \
             WHERE b.org_id = $1 AND b.job_id = $2"
        )))
        .bind(org.as_str())
        .bind(id.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?
        .map(|r| build_from_row(&r))
        .transpose()
    }

    async fn build_runner(&self, org: &OrgId) -> Result<Option<RunnerId>> {
        let id: Option<String> = sqlx::query_scalar(
            "SELECT id FROM runners WHERE org_id = $1 AND role = 'build' AND revoked_at IS NULL \
             ORDER BY created_at LIMIT 1",
        )
        .bind(org.as_str())
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        id.as_deref().map(parse_id).transpose()
    }

    async fn get_org(&self, org: &OrgId) -> Result<Option<OrgInfo>> {
        sqlx::query("SELECT id, name FROM orgs WHERE id = $1")
            .bind(org.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .map(|r| {
                Ok(OrgInfo {
                    id: parse_id(&get::<String>(&r, 0)?)?,
                    name: get(&r, 1)?,
                })
            })
            .transpose()
    }

    async fn create_api_token(
        &self,
        org: &OrgId,
        id: &TokenId,
        name: &str,
        scope: TokenScope,
        token_hash: &str,
    ) -> Result<TokenInfo> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO api_tokens (id, org_id, name, token_hash, scope, created_at) VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(name)
        .bind(token_hash)
        .bind(scope.as_str())
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(TokenInfo {
            id: id.clone(),
            name: name.to_owned(),
            scope,
            created_at_ms: now,
            revoked: false,
        })
    }

    async fn list_api_tokens(&self, org: &OrgId) -> Result<Vec<TokenInfo>> {
        self.org_rows(
            format!(
                "SELECT {TOKEN_COLUMNS} FROM api_tokens WHERE org_id = $1 ORDER BY created_at, id"
            ),
            org,
            token_from_row,
        )
        .await
    }

    async fn revoke_api_token(&self, org: &OrgId, id: &TokenId) -> Result<Option<TokenInfo>> {
        self.revoke(
            "api_tokens",
            TOKEN_COLUMNS,
            org,
            id.as_str(),
            token_from_row,
        )
        .await
    }

    async fn create_app(&self, org: &OrgId, id: &AppId, name: &str) -> Result<AppInfo> {
        let now = now_ms();
        sqlx::query("INSERT INTO apps (id, org_id, name, created_at) VALUES ($1, $2, $3, $4)")
            .bind(id.as_str())
            .bind(org.as_str())
            .bind(name)
            .bind(now)
            .execute(&self.pool)
            .await
            .map_err(|e| {
                taken(e, || {
                    format!("an app named {name:?} already exists in this org; pick another name")
                })
            })?;
        Ok(AppInfo {
            id: id.clone(),
            name: name.to_owned(),
            created_at_ms: now,
            latest_config: None,
        })
    }

    async fn list_apps(&self, org: &OrgId) -> Result<Vec<AppInfo>> {
        self.org_rows(
            format!(
                "SELECT {APP_COLUMNS} FROM apps a WHERE a.org_id = $1 ORDER BY a.created_at, a.id"
            ),
            org,
            app_from_row,
        )
        .await
    }

    async fn find_app(&self, org: &OrgId, name_or_id: &str) -> Result<Option<AppInfo>> {
        self.org_row(
            format!(
                "SELECT {APP_COLUMNS} FROM apps a WHERE a.org_id = $1 AND (a.id = $2 OR a.name = $2)"
            ),
            org,
            name_or_id,
            app_from_row,
        )
        .await
    }

    async fn add_config(
        &self,
        org: &OrgId,
        app: &AppId,
        config: StoredConfig,
    ) -> Result<StoredConfig> {
        let mut tx = self.begin().await?;
        // Locks the app row: concurrent syncs of one app take turns.
        let owned = sqlx::query("SELECT 1 FROM apps WHERE id = $1 AND org_id = $2 FOR UPDATE")
            .bind(app.as_str())
            .bind(org.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
        if owned.is_none() {
            return Err(StoreError::Invalid(format!("no app {app}")));
        }
        let version: i64 = sqlx::query_scalar(
            "SELECT COALESCE(MAX(version), 0) + 1 FROM app_configs WHERE app_id = $1",
        )
        .bind(app.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;
        let now = now_ms();
        sqlx::query(
            "INSERT INTO app_configs (app_id, version, created_at, components, files, config, warnings, sources) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(app.as_str())
        .bind(version)
        .bind(now)
        .bind(i64::from(config.components))
        .bind(&config.files_json)
        .bind(&config.config_json)
        .bind(&config.warnings_json)
        .bind(&config.sources_json)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(StoredConfig {
            version: version as u32,
            created_at_ms: now,
            ..config
        })
    }

    async fn list_configs(&self, org: &OrgId, app: &AppId) -> Result<Vec<StoredConfig>> {
        sqlx::query(
            "SELECT c.version, c.created_at, c.components FROM app_configs c \
             JOIN apps a ON a.id = c.app_id WHERE a.org_id = $1 AND c.app_id = $2 ORDER BY c.version",
        )
        .bind(org.as_str())
        .bind(app.as_str())
        .fetch_all(&self.pool)
        .await
        .map_err(db)?
        .iter()
        .map(|r| config_from_row(r, false))
        .collect()
    }

    async fn get_config(
        &self,
        org: &OrgId,
        app: &AppId,
        version: Option<u32>,
    ) -> Result<Option<StoredConfig>> {
        sqlx::query(
            "SELECT c.version, c.created_at, c.components, c.files, c.config, c.warnings, c.sources \
             FROM app_configs c JOIN apps a ON a.id = c.app_id \
             WHERE a.org_id = $1 AND c.app_id = $2 AND ($3::bigint IS NULL OR c.version = $3) \
             ORDER BY c.version DESC LIMIT 1",
        )
        .bind(org.as_str())
        .bind(app.as_str())
        .bind(version.map(i64::from))
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?
        .map(|r| config_from_row(&r, true))
        .transpose()
    }

    async fn create_install(&self, org: &OrgId, new: NewInstall) -> Result<StoredInstall> {
        let mut tx = self.begin().await?;
        let now = now_ms();
        sqlx::query(
            "INSERT INTO runners (id, org_id, name, token_hash, created_at, role) VALUES ($1, $2, $3, $4, $5, 'install')",
        )
        .bind(new.runner_id.as_str())
        .bind(org.as_str())
        .bind(&new.runner_name)
        .bind(&new.runner_token_hash)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            taken(e, || {
                format!(
                    "a runner named {:?} already exists in this org; pick another name",
                    new.runner_name
                )
            })
        })?;
        sqlx::query(
            "INSERT INTO installs (id, org_id, app_id, name, config_version, runner_id, state, inputs, sealed, created_at, approval) \
             VALUES ($1, $2, $3, $4, $5, $6, 'created', $7, $8, $9, $10)",
        )
        .bind(new.id.as_str())
        .bind(org.as_str())
        .bind(new.app_id.as_str())
        .bind(&new.name)
        .bind(i64::from(new.config_version))
        .bind(new.runner_id.as_str())
        .bind(&new.inputs_json)
        .bind(&new.sealed_json)
        .bind(now)
        .bind(&new.approval)
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            taken(e, || {
                format!(
                    "an install named {:?} already exists in this org; pick another name",
                    new.name
                )
            })
        })?;
        tx.commit().await.map_err(db)?;
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
    }

    async fn list_installs(&self, org: &OrgId) -> Result<Vec<StoredInstall>> {
        self.org_rows(
            format!(
                "SELECT {INSTALL_COLUMNS} FROM installs WHERE org_id = $1 ORDER BY created_at, id"
            ),
            org,
            install_from_row,
        )
        .await
    }

    async fn find_install(&self, org: &OrgId, name_or_id: &str) -> Result<Option<StoredInstall>> {
        self.org_row(
            format!(
                "SELECT {INSTALL_COLUMNS} FROM installs WHERE org_id = $1 AND (id = $2 OR name = $2)"
            ),
            org,
            name_or_id,
            install_from_row,
        )
        .await
    }

    async fn set_install_inputs(
        &self,
        org: &OrgId,
        id: &InstallId,
        inputs_json: &str,
        sealed_json: &str,
    ) -> Result<Option<StoredInstall>> {
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE installs SET inputs = $3, sealed = $4 WHERE org_id = $1 AND id = $2 \
             RETURNING {INSTALL_COLUMNS}"
        )))
        .bind(org.as_str())
        .bind(id.as_str())
        .bind(inputs_json)
        .bind(sealed_json)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?
        .map(|r| install_from_row(&r))
        .transpose()
    }

    async fn create_runner(
        &self,
        org: &OrgId,
        id: &RunnerId,
        name: &str,
        token_hash: &str,
    ) -> Result<RunnerInfo> {
        let now = now_ms();
        sqlx::query(
            "INSERT INTO runners (id, org_id, name, token_hash, created_at) VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(name)
        .bind(token_hash)
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(|e| {
            taken(e, || {
                format!(
                    "a runner named {name:?} already exists in this org; pick another name or revoke it first"
                )
            })
        })?;
        Ok(RunnerInfo {
            id: id.clone(),
            name: name.to_owned(),
            created_at_ms: now,
            last_seen_at_ms: None,
            revoked: false,
            role: RunnerRole::Generic,
        })
    }

    async fn list_runners(&self, org: &OrgId) -> Result<Vec<RunnerInfo>> {
        self.org_rows(
            format!(
                "SELECT {RUNNER_COLUMNS} FROM runners WHERE org_id = $1 ORDER BY created_at, id"
            ),
            org,
            runner_from_row,
        )
        .await
    }

    async fn find_runner(&self, org: &OrgId, name_or_id: &str) -> Result<Option<RunnerInfo>> {
        self.org_row(
            format!(
                "SELECT {RUNNER_COLUMNS} FROM runners WHERE org_id = $1 AND (id = $2 OR name = $2) \
             ORDER BY revoked_at IS NOT NULL LIMIT 1"
            ),
            org,
            name_or_id,
            runner_from_row,
        )
        .await
    }

    async fn revoke_runner(&self, org: &OrgId, id: &RunnerId) -> Result<Option<RunnerInfo>> {
        self.revoke("runners", RUNNER_COLUMNS, org, id.as_str(), runner_from_row)
            .await
    }

    async fn authenticate_runner(&self, token_hash: &str) -> Result<Option<RunnerPrincipal>> {
        let row = sqlx::query(
            "SELECT id, org_id FROM runners WHERE token_hash = $1 AND revoked_at IS NULL",
        )
        .bind(token_hash)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        Ok(row.and_then(|r| {
            Some(RunnerPrincipal {
                runner_id: get::<String>(&r, 0).ok()?.parse().ok()?,
                org_id: get::<String>(&r, 1).ok()?.parse().ok()?,
            })
        }))
    }

    async fn enqueue_job(&self, job: NewJob) -> Result<JobInfo> {
        let mut tx = self.begin().await?;
        insert_job(&mut tx, &job).await?;
        let info = load_job(&mut *tx, job.spec.job_id.as_str(), None)
            .await?
            .ok_or_else(|| StoreError::Invalid("job vanished after insert".into()))?;
        tx.commit().await.map_err(db)?;
        Ok(info)
    }

    async fn get_job(&self, org: &OrgId, id: &JobId) -> Result<Option<JobInfo>> {
        load_job(&self.pool, id.as_str(), Some(org)).await
    }

    async fn list_jobs(&self, org: &OrgId, limit: u32) -> Result<Vec<JobInfo>> {
        sqlx::query(AssertSqlSafe(format!(
            "SELECT {JOB_COLUMNS} FROM jobs WHERE org_id = $1 ORDER BY seq DESC LIMIT $2"
        )))
        .bind(org.as_str())
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?
        .iter()
        .map(job_from_row)
        .collect()
    }

    async fn request_cancel(&self, org: &OrgId, id: &JobId) -> Result<Option<JobInfo>> {
        let mut tx = self.begin().await?;
        sqlx::query(
            "UPDATE jobs SET status = 'cancelled', cancel_requested = true, reason = 'cancelled before it started', \
             finished_at = $3 WHERE id = $1 AND org_id = $2 AND status = 'queued'",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        sqlx::query(
            "UPDATE jobs SET cancel_requested = true WHERE id = $1 AND org_id = $2 AND status = 'running'",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let job = load_job(&mut *tx, id.as_str(), Some(org)).await?;
        tx.commit().await.map_err(db)?;
        Ok(job)
    }

    async fn read_logs(
        &self,
        org: &OrgId,
        job: &JobId,
        cursor: u64,
        limit: u32,
    ) -> Result<Option<LogPage>> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        let status: Option<String> =
            sqlx::query_scalar("SELECT status FROM jobs WHERE id = $1 AND org_id = $2")
                .bind(job.as_str())
                .bind(org.as_str())
                .fetch_optional(&mut *conn)
                .await
                .map_err(db)?;
        let Some(status) = status else {
            return Ok(None);
        };
        let terminal = status
            .parse::<JobStatus>()
            .map(JobStatus::is_terminal)
            .unwrap_or(false);
        // The chunks' sizes first, then only the bodies the page needs.
        let sizes: Vec<shared::ChunkSize> = sqlx::query_as(
            "SELECT id, last_seq - first_seq + 1, octet_length(body)::bigint FROM log_records \
             WHERE job_id = $1 AND id >= $2 ORDER BY id LIMIT $3",
        )
        .bind(job.as_str())
        .bind(shared::cursor_chunk(cursor))
        .bind(CHUNKS_PER_PAGE)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
        let (take, more) = shared::chunks_for_page(&sizes, cursor, limit);
        let last = sizes.get(take.wrapping_sub(1)).map_or(-1, |c| c.0);
        let rows = sqlx::query(
            "SELECT id, attempt, first_seq, body FROM log_records \
             WHERE job_id = $1 AND id >= $2 AND id <= $3 ORDER BY id",
        )
        .bind(job.as_str())
        .bind(shared::cursor_chunk(cursor))
        .bind(last)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
        let mut chunks = Vec::with_capacity(rows.len());
        for r in &rows {
            let body: &[u8] = r.try_get(3).map_err(db)?;
            chunks.push(LogChunk {
                id: get(r, 0)?,
                attempt: get_u32(r, 1)?,
                first_seq: get(r, 2)?,
                body: std::str::from_utf8(body).map_err(corrupt)?,
            });
        }
        Ok(Some(shared::log_page(
            chunks, cursor, limit, more, terminal,
        )))
    }

    async fn claim(
        &self,
        runner: &RunnerId,
        kinds: &[String],
        max: u32,
        lease_ms: u64,
    ) -> Result<Claimed> {
        let now = now_ms();
        // Most orgs have no limit: then the claim is one statement (one
        // round trip, one commit), which also says whether the org has one.
        if let Some(jobs) = start_jobs(
            &self.pool,
            runner,
            kinds,
            i64::from(max),
            now,
            lease_ms,
            false,
        )
        .await?
        {
            return Ok(Claimed {
                jobs,
                held_back: false,
            });
        }
        let mut tx = self.begin().await?;
        // The org's row stays locked to the end of the claim, so claims of
        // one limited org (on any replica) take turns, each counting what
        // the last one started.
        let limit: Option<(String, i64)> = sqlx::query_as(
            "SELECT o.id, o.max_running FROM runners r JOIN orgs o ON o.id = r.org_id \
             WHERE r.id = $1 AND o.max_running IS NOT NULL FOR UPDATE OF o",
        )
        .bind(runner.as_str())
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
        let mut max = i64::from(max);
        let mut held_back = false;
        if let Some((org, limit)) = limit {
            let running: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM jobs WHERE org_id = $1 AND status = 'running'",
            )
            .bind(&org)
            .fetch_one(&mut *tx)
            .await
            .map_err(db)?;
            let room = (limit - running).clamp(0, max);
            if room < max {
                let queued: i64 = sqlx::query_scalar(
                    "SELECT count(*) FROM (SELECT 1 FROM jobs WHERE runner_id = $1 \
                     AND status = 'queued' AND kind = ANY($2) LIMIT $3) q",
                )
                .bind(runner.as_str())
                .bind(kinds)
                .bind(room + 1)
                .fetch_one(&mut *tx)
                .await
                .map_err(db)?;
                held_back = queued > room;
                max = room;
            }
        }
        let jobs = if max == 0 {
            Vec::new()
        } else {
            start_jobs(&mut *tx, runner, kinds, max, now, lease_ms, true)
                .await?
                .unwrap_or_default()
        };
        tx.commit().await.map_err(db)?;
        Ok(Claimed { jobs, held_back })
    }

    async fn heartbeat(
        &self,
        runner: &RunnerId,
        leases: &[LeaseRef],
        lease_ms: u64,
    ) -> Result<Vec<LeaseStatus>> {
        self.writes.heartbeat(runner, leases, lease_ms).await
    }

    async fn lease_states(
        &self,
        runner: &RunnerId,
        leases: &[LeaseRef],
    ) -> Result<Vec<LeaseStatus>> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        lease_states(&mut conn, runner, leases).await
    }

    async fn append_logs(&self, runner: &RunnerId, job: &JobId, batch: LogBatch) -> Result<LogAck> {
        self.writes.append_logs(runner, job, batch).await
    }

    async fn complete(
        &self,
        runner: &RunnerId,
        job: &JobId,
        completion: Completion,
    ) -> Result<CompletionAck> {
        self.writes.complete(runner, job, completion).await
    }

    async fn rescue_expired(&self, now_ms: i64) -> Result<Vec<Rescued>> {
        let mut tx = self.begin().await?;
        let expired = sqlx::query(
            "SELECT a.job_id, a.n, a.runner_id, a.confirmed, j.cancel_requested, j.max_attempts, \
             (SELECT count(*) FROM attempts c WHERE c.job_id = a.job_id AND c.confirmed), j.org_id \
             FROM attempts a JOIN jobs j ON j.id = a.job_id \
             WHERE a.state = 'running' AND a.lease_expires < $1 \
             FOR UPDATE OF a, j SKIP LOCKED",
        )
        .bind(now_ms)
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
        let mut out = Vec::new();
        for r in &expired {
            let job: String = get(r, 0)?;
            let n = get_u32(r, 1)?;
            let runner: String = get(r, 2)?;
            let fate = shared::expire(n, get(r, 3)?, get(r, 4)?, get_u32(r, 5)?, get_u32(r, 6)?);
            sqlx::query(
                "UPDATE attempts SET state = $3, finished_at = $4 WHERE job_id = $1 AND n = $2",
            )
            .bind(&job)
            .bind(i64::from(n))
            .bind(fate.attempt_state)
            .bind(now_ms)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
            let requeued = fate.end.is_none();
            match fate.end {
                None => {
                    sqlx::query("UPDATE jobs SET status = 'queued' WHERE id = $1")
                        .bind(&job)
                        .execute(&mut *tx)
                        .await
                        .map_err(db)?;
                }
                Some((status, reason)) => {
                    sqlx::query(
                        "UPDATE jobs SET status = $2, reason = $3, finished_at = $4 WHERE id = $1",
                    )
                    .bind(&job)
                    .bind(status)
                    .bind(reason)
                    .bind(now_ms)
                    .execute(&mut *tx)
                    .await
                    .map_err(db)?;
                }
            }
            out.push(Rescued {
                job_id: parse_id(&job)?,
                runner_id: parse_id(&runner)?,
                org_id: parse_id(&get::<String>(r, 7)?)?,
                requeued,
            });
        }
        tx.commit().await.map_err(db)?;
        Ok(out)
    }

    async fn extend_running_leases(&self, until_ms: i64) -> Result<u64> {
        Ok(sqlx::query(
            // Locked in key order, as group commits lock them, so the two
            // cannot deadlock.
            "UPDATE attempts a SET lease_expires = $1 FROM ( \
                SELECT job_id, n FROM attempts WHERE state = 'running' AND lease_expires < $1 \
                ORDER BY job_id, n FOR UPDATE) r \
             WHERE a.job_id = r.job_id AND a.n = r.n",
        )
        .bind(until_ms)
        .execute(&self.pool)
        .await
        .map_err(db)?
        .rows_affected())
    }
}
