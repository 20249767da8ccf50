//! The embedded store: SQLite in WAL mode.
//!
//! - One writer thread owns the only writing connection. Callers send it
//!   closures; it runs as many as are waiting (up to [`MAX_BATCH`]) in one
//!   `BEGIN IMMEDIATE` transaction, each inside its own savepoint so one
//!   failing operation does not undo the others, commits once, and only then
//!   answers the callers. Heartbeats, log batches and claims from many
//!   runners therefore share commits (group commit).
//! - Reads run on a small pool of read-only connections on the blocking pool.
//! - The write-ahead logs are copied back into their databases (checkpoints)
//!   by a thread of their own, not by the commit that found them long:
//!   SQLite's automatic checkpoint runs inside that commit, with its
//!   syncs, and every caller of the batch waited for it (a claim answered
//!   10 to 20 ms late every few hundred writes).
//! - Job logs live in their own database file (`logs.db`), attached to every
//!   connection, so log volume never bloats or locks the main database.

mod maintenance;
mod queue;
mod schema;
mod sql;

use std::cell::Cell;
use std::ffi::c_int;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use nuon_core::wire::{
    ClaimedJob, Completion, CompletionAck, LeaseRef, LeaseState, LeaseStatus, LogAck, LogBatch,
};
use nuon_core::{JobId, JobStatus, RunnerId, now_ms};
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use tokio::sync::oneshot;

use super::rows::{Cells, Dialect};
use super::shared::{self, AttemptRow, parse_id};
use super::{Claimed, MaintenanceStore, QueueStore, Rescued, Result, StoreError};

/// Most operations one write transaction carries.
const MAX_BATCH: usize = 512;

/// Frames in a write-ahead log past which a commit asks the checkpointer
/// to copy it back: SQLite's own automatic checkpoint's (1,000 pages).
const CHECKPOINT_FRAMES: c_int = 1000;

/// The least time between two checkpoints: a log that grows faster is
/// copied back in larger steps, not after every commit.
const CHECKPOINT_GAP: Duration = Duration::from_millis(100);

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

impl Cells for rusqlite::Row<'_> {
    fn opt_text(&self, i: usize) -> Result<Option<String>> {
        self.get(i).map_err(db_err)
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        self.get(i).map_err(db_err)
    }
    fn flag(&self, i: usize) -> Result<bool> {
        Ok(self.get::<_, i64>(i).map_err(db_err)? != 0)
    }
    fn bytes(&self, i: usize) -> Result<Vec<u8>> {
        self.get(i).map_err(db_err)
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

impl SqliteStore {
    /// The store's main database file in its data dir.
    pub const DB_FILE: &'static str = "nuon.db";
    /// The store's database of job logs in its data dir.
    pub const LOGS_FILE: &'static str = "logs.db";

    /// Copies the store of `dir` into the directory `out` (its
    /// [`DB_FILE`](Self::DB_FILE) and [`LOGS_FILE`](Self::LOGS_FILE)) while
    /// a control plane may serve from it: each database a consistent
    /// snapshot (`VACUUM INTO`, a read transaction that blocks no writer),
    /// the main one first, so that the copy's logs hold every line its
    /// jobs shipped before they ended (and maybe later lines of jobs it
    /// thinks still run).
    pub fn snapshot(dir: &Path, out: &Path) -> Result<()> {
        let conn = open_conn(&dir.join(Self::DB_FILE), &dir.join(Self::LOGS_FILE), true)
            .map_err(db_err)?;
        for (schema, file) in [("main", Self::DB_FILE), ("logs", Self::LOGS_FILE)] {
            let to = out.join(file).to_string_lossy().into_owned();
            conn.execute(&format!("VACUUM {schema} INTO ?1"), [to])
                .map_err(db_err)?;
        }
        Ok(())
    }

    /// Checks both databases of the store in `dir` whole (`PRAGMA
    /// integrity_check`): an error names what SQLite found wrong.
    pub fn check_integrity(dir: &Path) -> Result<()> {
        let conn = open_conn(&dir.join(Self::DB_FILE), &dir.join(Self::LOGS_FILE), true)
            .map_err(db_err)?;
        for (schema, file) in [("main", Self::DB_FILE), ("logs", Self::LOGS_FILE)] {
            let said: String = conn
                .query_row(&format!("PRAGMA {schema}.integrity_check(1)"), [], |r| {
                    r.get(0)
                })
                .map_err(db_err)?;
            if said != "ok" {
                return Err(StoreError::Invalid(format!("{file} is damaged: {said}")));
            }
        }
        Ok(())
    }

    /// Opens (creating when needed) the store in `dir`: `nuon.db` and `logs.db`.
    pub fn open(dir: &Path) -> Result<Self> {
        use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
        let cannot = |what: &Path, e: std::io::Error| {
            StoreError::Invalid(format!("cannot create {}: {e}", what.display()))
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(nuon_core::private::DIR_MODE)
            .create(dir)
            .map_err(|e| cannot(dir, e))?;
        let main = dir.join(Self::DB_FILE);
        let logs = dir.join(Self::LOGS_FILE);
        // Made private before SQLite opens them: their WAL and shared
        // memory files take the database file's mode.
        for file in [&main, &logs] {
            std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .mode(nuon_core::private::FILE_MODE)
                .open(file)
                .map_err(|e| cannot(file, e))?;
        }
        let conn = open_conn(&main, &logs, false).map_err(db_err)?;
        conn.execute_batch(schema::SCHEMA).map_err(db_err)?;
        schema::migrate(&conn).map_err(db_err)?;
        // Replaces the automatic checkpoint (the same hook) on the writer.
        conn.wal_hook(Some(note_wal_frames));
        let checkpointer = Checkpointer::start(open_conn(&main, &logs, false).map_err(db_err)?)?;
        let (tx, rx) = mpsc::channel::<Op>();
        let thread = std::thread::Builder::new()
            .name("nuon-store-writer".into())
            .spawn(move || writer_loop(conn, rx, checkpointer))
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

thread_local! {
    /// The most frames a write-ahead log held at a commit of this thread's
    /// connection since it was last taken; see [`note_wal_frames`].
    static WAL_FRAMES: Cell<c_int> = const { Cell::new(0) };
}

/// The writer's write-ahead log hook: SQLite calls it after each commit,
/// for each database the commit wrote, with the frames its log now holds.
fn note_wal_frames(_: &rusqlite::hooks::Wal, frames: c_int) -> rusqlite::Result<()> {
    WAL_FRAMES.with(|f| f.set(f.get().max(frames)));
    Ok(())
}

/// The thread that checkpoints both databases' write-ahead logs, on its
/// own connection, when the writer finds one long. A passive checkpoint
/// takes no lock a writer waits for: commits go on while it copies and
/// syncs.
struct Checkpointer {
    asks: mpsc::SyncSender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl Checkpointer {
    fn start(conn: Connection) -> Result<Self> {
        let (asks, rx) = mpsc::sync_channel::<()>(1);
        let thread = std::thread::Builder::new()
            .name("nuon-store-checkpoint".into())
            .spawn(move || {
                // Ends with the writer, at once. What the logs still hold
                // then is copied back by the last connection to close, or
                // read from the log at the next open: nothing is lost.
                let mut asked = rx.recv().is_ok();
                while asked {
                    checkpoint(&conn);
                    // The gap; an ask in it is served after it.
                    let until = Instant::now() + CHECKPOINT_GAP;
                    asked = false;
                    while let Some(left) = until.checked_duration_since(Instant::now()) {
                        match rx.recv_timeout(left) {
                            Ok(()) => asked = true,
                            Err(mpsc::RecvTimeoutError::Timeout) => break,
                            Err(mpsc::RecvTimeoutError::Disconnected) => return,
                        }
                    }
                    asked = asked || rx.recv().is_ok();
                }
            })
            .map_err(|e| StoreError::Database(Box::new(e)))?;
        Ok(Checkpointer { asks, thread })
    }

    /// Asks for a checkpoint if the last commit left a log long; an ask
    /// already waiting serves.
    fn after_commit(&self) {
        if WAL_FRAMES.with(|f| f.replace(0)) >= CHECKPOINT_FRAMES {
            let _ = self.asks.try_send(());
        }
    }

    /// Stops the thread once its checkpoint in progress is done.
    fn stop(self) {
        drop(self.asks);
        let _ = self.thread.join();
    }
}

/// Copies what both write-ahead logs hold back into their databases, as
/// far as no reader still needs it.
fn checkpoint(conn: &Connection) {
    for schema in ["main", "logs"] {
        let done = conn.query_row(
            &format!("PRAGMA {schema}.wal_checkpoint(PASSIVE)"),
            [],
            |_| Ok(()),
        );
        if let Err(e) = done {
            tracing::warn!(error = %e, database = schema, "store: cannot checkpoint the write-ahead log");
        }
    }
}

fn writer_loop(conn: Connection, rx: mpsc::Receiver<Op>, checkpointer: Checkpointer) {
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
        checkpointer.after_commit();
    }
    checkpointer.stop();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes of the main database file in `dir` (not its log's).
    fn db_len(dir: &Path) -> u64 {
        std::fs::metadata(dir.join(SqliteStore::DB_FILE)).map_or(0, |m| m.len())
    }

    #[tokio::test]
    async fn a_long_write_ahead_log_is_copied_back_by_the_checkpointer() {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(dir.path()).unwrap();
        let before = db_len(dir.path());
        // About 2,000 pages of 4 KiB in one commit: past CHECKPOINT_FRAMES.
        store
            .write(|conn| {
                conn.execute_batch("CREATE TABLE filler (b BLOB)")
                    .map_err(db_err)?;
                for _ in 0..80 {
                    conn.execute("INSERT INTO filler VALUES (zeroblob(100000))", [])
                        .map_err(db_err)?;
                }
                Ok(())
            })
            .await
            .unwrap();
        // The commit is answered; the writer's connection no longer copies
        // its log back itself (the hook replaced SQLite's automatic
        // checkpoint), so only the checkpointer grows the database file.
        let by = Instant::now() + Duration::from_secs(10);
        while db_len(dir.path()) < before + 7_000_000 {
            assert!(
                Instant::now() < by,
                "the log was not copied back in 10 s: the database file is {} bytes",
                db_len(dir.path())
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}
