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

mod maintenance;
mod pool;
mod queue;
mod schema;
mod sql;

use nuon_core::wire::ErrorCode;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use async_trait::async_trait;
use nuon_core::wire::{
    ClaimedJob, Completion, CompletionAck, LeaseRef, LeaseStatus, LogAck, LogBatch,
};
use nuon_core::{JobId, RunnerId, now_ms};
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgRow};
use sqlx::{AssertSqlSafe, Connection, PgConnection, Postgres, Row, Transaction};
use tokio::sync::{broadcast, mpsc};

use super::rows::{Cells, Dialect, Offset, Record};
use super::shared::{self, parse_id};
use super::{
    Claimed, MaintenanceStore, QueueStore, Rescued, Result, SettingsBasis, StoreError, Wake, Wakes,
};

mod group;
#[cfg(test)]
pub(crate) use group::pause as group_pause;

/// Group-commit tasks per replica: while one commits, the next gathers.
const COMMITTERS: usize = 2;
/// The most connections the store's calls run on at once ([`pool`]).
const CONNS: usize = 16;
/// The channel replicas announce wake-ups on.
const CHANNEL: &str = "nuon_wake";
/// The shortest time between two notifications of this replica.
pub const NOTIFY_GAP: Duration = Duration::from_millis(5);
/// `NOTIFY` payloads must stay under 8000 bytes.
const MAX_PAYLOAD: usize = 7000;
/// The advisory lock of the maintenance leader.
const LEADER_LOCK: i64 = 0x6e75_6f6e_6c65_6164; // "nuonlead"
fn db(e: sqlx::Error) -> StoreError {
    StoreError::Database(Box::new(e))
}

/// A unique-constraint failure as a 409 `name_taken` with `message`.
fn taken(e: sqlx::Error, message: impl FnOnce() -> String) -> StoreError {
    match &e {
        sqlx::Error::Database(d) if d.is_unique_violation() => StoreError::Conflict {
            code: ErrorCode::NameTaken,
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

type Tx = Transaction<'static, Postgres>;

/// The PostgreSQL store; see the module docs.
pub struct PostgresStore {
    pool: PgPool,
    /// The connections the hot calls run on (see [`pool`]).
    conns: pool::Conns,
    options: PgConnectOptions,
    /// This replica's name in the notifications it sends.
    replica: String,
    wakes: broadcast::Sender<Wakes>,
    outbox: mpsc::UnboundedSender<Wake>,
    leader: tokio::sync::Mutex<Option<(PgConnection, bool)>>,
    /// The version this replica announces in `nuon_replicas`: the lead
    /// goes to the newest version running.
    version: String,
    /// The newer version seen beside this one, once told.
    newer_seen: Mutex<Option<String>>,
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
            // Migrations, maintenance and the listener: the calls run on
            // `conns`.
            .max_connections(4)
            .min_connections(1)
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
        schema::migrate(&pool).await?;
        // A notification a message: at a busy fleet's 100 to 200 a
        // second, seconds of them.
        let (wakes, _) = broadcast::channel(1024);
        let (outbox, rx) = mpsc::unbounded_channel();
        let replica = RunnerId::generate().to_string();
        let mut listener = PgListener::connect_with(&pool).await.map_err(db)?;
        listener.listen(CHANNEL).await.map_err(db)?;
        let conns = pool::Conns::new(options.clone(), CONNS);
        let (writes, mut tasks) = group::GroupCommit::start(&conns, COMMITTERS);
        tasks.push(tokio::spawn(publish(conns.clone(), replica.clone(), rx)));
        tasks.push(tokio::spawn(listen(
            listener,
            replica.clone(),
            wakes.clone(),
        )));
        Ok(PostgresStore {
            conns,
            pool,
            options,
            replica,
            wakes,
            outbox,
            leader: tokio::sync::Mutex::new(None),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            newer_seen: Mutex::new(None),
            writes,
            tasks: Mutex::new(tasks),
        })
    }

    /// Announces `version` instead of this build's: for tests of rolling
    /// upgrades, where two builds of one version stand for two releases.
    #[doc(hidden)]
    pub fn announcing_version(mut self, version: impl Into<String>) -> Self {
        self.version = version.into();
        self
    }

    /// Stops the background tasks and closes every connection.
    pub async fn close(&self) {
        for t in self.tasks.lock().expect("tasks lock").drain(..) {
            t.abort();
        }
        if let Some((conn, _)) = self.leader.lock().await.take() {
            let _ = conn.close().await;
        }
        self.conns.close().await;
        self.pool.close().await;
    }

    async fn begin(&self) -> Result<Tx> {
        self.pool.begin().await.map_err(db)
    }

    /// A connection for one call (see [`pool`]).
    async fn conn(&self) -> Result<pool::Conn> {
        self.conns.get().await
    }
}

impl Cells for PgRow {
    fn opt_text(&self, i: usize) -> Result<Option<String>> {
        self.try_get(i).map_err(db)
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        use sqlx::{TypeInfo, ValueRef};
        let v = self.try_get_raw(i).map_err(db)?;
        if v.is_null() {
            return Ok(None);
        }
        let ty = v.type_info().name().to_owned();
        match ty.as_str() {
            "INT2" => self.try_get::<i16, _>(i).map(|v| Some(i64::from(v))),
            "INT4" => self.try_get::<i32, _>(i).map(|v| Some(i64::from(v))),
            _ => self.try_get::<i64, _>(i).map(Some),
        }
        .map_err(db)
    }
    fn flag(&self, i: usize) -> Result<bool> {
        self.try_get(i).map_err(db)
    }
    fn bytes(&self, i: usize) -> Result<Vec<u8>> {
        self.try_get(i).map_err(db)
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

/// One notification's text for a wake-up: `R <runner>`, `L <job>`, `O <org>`,
/// `X`, `W <org> <workflow>`, `E <job>`, `A`.
fn encode_wake(w: &Wake) -> String {
    match w {
        Wake::Runner(r) => format!("R {r}"),
        Wake::Logs(j) => format!("L {j}"),
        Wake::Org(o) => format!("O {o}"),
        Wake::Executor => "X".into(),
        Wake::Workflow(o, w) => format!("W {o} {w}"),
        Wake::JobEnded(j) => format!("E {j}"),
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
        "W" => {
            let (org, wf) = rest.split_once(' ')?;
            Some(Wake::Workflow(org.parse().ok()?, wf.parse().ok()?))
        }
        "E" => rest.parse().ok().map(Wake::JobEnded),
        "A" => Some(Wake::All),
        _ => None,
    }
}

/// Sends this replica's wake-ups: everything announced since the last
/// notification, each once, at most one `NOTIFY` (per 7 KB) every
/// [`NOTIFY_GAP`].
async fn publish(conns: pool::Conns, replica: String, mut rx: mpsc::UnboundedReceiver<Wake>) {
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
            let sent = async {
                let mut conn = conns.get().await?;
                sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(CHANNEL)
                    .bind(&payload)
                    .execute(&mut *conn)
                    .await
                    .map_err(db)?;
                conn.done();
                Ok::<_, StoreError>(())
            }
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
async fn listen(mut listener: PgListener, replica: String, wakes: broadcast::Sender<Wakes>) {
    let all = || Wakes::from([Wake::All]);
    loop {
        match listener.try_recv().await {
            Ok(Some(n)) => {
                let mut lines = n.payload().lines();
                if lines.next() == Some(replica.as_str()) {
                    continue;
                }
                let got: Wakes = lines.filter_map(decode_wake).collect();
                if !got.is_empty() {
                    let _ = wakes.send(got);
                }
            }
            Ok(None) => {
                // The connection was lost: whatever was announced meanwhile is
                // gone, so every waiter looks again.
                tracing::warn!("lost the notification connection; reconnecting");
                let _ = wakes.send(all());
            }
            Err(e) => {
                tracing::warn!(error = %e, "notification listener failed; retrying in 1s");
                tokio::time::sleep(Duration::from_secs(1)).await;
                let _ = wakes.send(all());
            }
        }
    }
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

/// What [`start_jobs`] started.
struct Started {
    /// The jobs, each with its new attempt.
    jobs: Vec<ClaimedJob>,
    /// Whether no queued job of the runner (of any kind) is left.
    nothing_left: bool,
    /// The runner's settings' basis, read when it took a job.
    settings: Option<Option<SettingsBasis>>,
}

/// Starts up to `max` of `runner`'s queued jobs of `kinds`, oldest first,
/// in one statement: the runner is seen, the jobs taken `FOR UPDATE SKIP
/// LOCKED`, their attempts begun, and, when it took any, what the
/// runner's settings' version is made of read (the answer carries it).
/// Unless `limit_checked`, `None` (and nothing started) when the runner's
/// org has a limit on running jobs, which the caller must count first.
async fn start_jobs<'e, E>(
    e: E,
    runner: &RunnerId,
    kinds: &[String],
    max: i64,
    now: i64,
    lease_ms: u64,
    limit_checked: bool,
) -> Result<Option<Started>>
where
    E: sqlx::Executor<'e, Database = Postgres>,
{
    // Each row: the job's (or a marker's) six columns, then the basis's
    // (one row at most, so the answer's rows stay one a job).
    static SQL: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
        format!(
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
            SELECT id, attempts, $1, 'running', $5, $4 FROM taken), \
         basis AS (SELECT {} FROM installs i LEFT JOIN install_runner_releases r \
            ON r.org_id = i.org_id AND r.install_id = i.id \
            WHERE i.runner_id = $1 AND i.org_id = (SELECT org_id FROM seen) \
            AND EXISTS (SELECT 1 FROM taken) LIMIT 1), \
         answer AS (SELECT seq, id, spec, signature, attempts, false AS limited FROM taken \
         UNION ALL SELECT 0, '', '', '', 0, true FROM limited \
         UNION ALL SELECT -1, '', '', '', 0, false WHERE NOT EXISTS (SELECT 1 FROM jobs \
            WHERE runner_id = $1 AND status = 'queued' AND seq NOT IN (SELECT seq FROM picked))) \
         SELECT answer.*, basis.* FROM answer LEFT JOIN basis ON true",
            SettingsBasis::COLUMNS
        )
    });
    let rows = sqlx::query(AssertSqlSafe(SQL.as_str()))
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
    // The row that says no queued job of the runner is left (seq -1).
    let mut nothing_left = false;
    for r in &rows {
        if get::<bool>(r, 5)? {
            return Ok(None);
        }
        let seq = get::<i64>(r, 0)?;
        if seq < 0 {
            nothing_left = true;
            continue;
        }
        taken.push((seq, get::<String>(r, 1)?, r));
    }
    taken.sort_by_key(|t| t.0);
    // Read with the jobs: on each of their rows, null for a runner of no
    // install (its `config_version`, never null for an install, tells).
    let settings = match taken.first() {
        Some((_, _, r)) => Some(match get::<Option<i64>>(r, 6)? {
            Some(_) => Some(SettingsBasis::read(&Offset(*r, 6))?),
            None => None,
        }),
        None => None,
    };
    let jobs = taken
        .into_iter()
        .map(|(_, id, r)| {
            Ok(ClaimedJob {
                job_id: parse_id(&id)?,
                attempt: get::<i64>(r, 4)? as u32,
                spec: get(r, 2)?,
                signature: get(r, 3)?,
                lease_ms,
                grant: String::new(),
                not_after_ms: 0,
            })
        })
        .collect::<Result<_>>()?;
    Ok(Some(Started {
        jobs,
        nothing_left,
        settings,
    }))
}
