//! SQL that both stores run alike, written once: the statements in
//! PostgreSQL's placeholders (`$1`, `$2`, …, which the SQLite store reads
//! as `?1`, `?2`, …), their arguments as [`Arg`]s, and the rows read as
//! [`Record`]s. Each store implements [`Sql`], how it runs a statement;
//! what differs between the dialects is asked of [`Dialect`]. A domain
//! whose methods are all plain SQL is implemented once, for every `Sql`
//! (see `installs.rs`); the queue, claims and group commit stay per
//! dialect, where the two databases really differ.

use std::borrow::Cow;

use async_trait::async_trait;

use super::{Result, StoreError};
use nuon_core::wire::ErrorCode;
use nuon_core::{OrgId, now_ms};

use super::rows::{Cells, Dialect, OrgScoped, Record, Revocable};

/// A value bound to a statement's parameter. A NULL is typed, as
/// PostgreSQL wants it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Arg {
    /// `TEXT`, or NULL.
    Text(Option<String>),
    /// `BIGINT` (`INTEGER` on SQLite), or NULL.
    Int(Option<i64>),
    /// `BYTEA` (`BLOB` on SQLite).
    Bytes(Vec<u8>),
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_owned()))
    }
}

impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}

impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Arg::Text(v)
    }
}

impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_owned))
    }
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}

impl From<Vec<u8>> for Arg {
    fn from(v: Vec<u8>) -> Self {
        Arg::Bytes(v)
    }
}

impl From<u32> for Arg {
    fn from(v: u32) -> Self {
        Arg::Int(Some(i64::from(v)))
    }
}

/// The arguments of a statement, each turned into an [`Arg`].
macro_rules! args {
    ($($e:expr),* $(,)?) => { vec![$($crate::store::sql::Arg::from($e)),*] };
}
pub(super) use args;

/// One statement with its arguments.
#[derive(Debug, Clone)]
pub(super) struct Stmt {
    /// In PostgreSQL's placeholders; a hot statement's made once, then
    /// borrowed.
    pub(super) sql: Cow<'static, str>,
    pub(super) args: Vec<Arg>,
    /// What a unique-constraint failure means here, said to the caller as
    /// a 409 `name_taken`; without it such a failure is the database's.
    pub(super) taken: Option<String>,
    /// The conflict it is when it changes no row (a write over a version
    /// read earlier that another change moved on); without it, changing
    /// none is no error.
    pub(super) must_change: Option<(ErrorCode, String)>,
}

impl Stmt {
    pub(super) fn new(sql: impl Into<Cow<'static, str>>, args: Vec<Arg>) -> Self {
        Stmt {
            sql: sql.into(),
            args,
            taken: None,
            must_change: None,
        }
    }

    /// Changing no row is a conflict: `code`, said with `message`.
    pub(super) fn must_change(mut self, code: ErrorCode, message: String) -> Self {
        self.must_change = Some((code, message));
        self
    }

    /// `changed`, the rows it changed, or the conflict changing none is.
    pub(super) fn changed(&self, changed: u64) -> Result<u64> {
        match &self.must_change {
            Some((code, message)) if changed == 0 => Err(StoreError::Conflict {
                code: *code,
                message: message.clone(),
                acked_seq: None,
            }),
            _ => Ok(changed),
        }
    }

    /// A unique-constraint failure of it is a conflict: `message`.
    pub(super) fn taken(mut self, message: String) -> Self {
        self.taken = Some(message);
        self
    }

    /// A unique-constraint failure of it is `what` (`a group`) named
    /// `name` existing already.
    pub(super) fn name_taken(self, what: &str, name: &str) -> Self {
        self.taken(format!(
            "{what} named {name:?} already exists in this org; pick another name"
        ))
    }
}

/// What a read-then-write transaction ([`Sql::change`]) does before its
/// change is made: it takes `lock`, runs `first`, then reads. The two databases keep a change from racing another
/// differently: SQLite's one writer runs one change at a time, so nothing
/// is locked there; PostgreSQL locks rows with `FOR UPDATE`, and a
/// statement that waited for a lock sees only the rows committed when it
/// began (a row it locked is read as it is now, but a row another change
/// added is not seen). So a change that counts or looks for rows others
/// add locks a row they all lock first (`lock`), and reads in a statement
/// of its own.
#[derive(Debug, Clone)]
pub(super) struct Change {
    /// Run after the lock and before the read, in order (a row that must
    /// be there for the read to lock it, a write the read must see).
    pub(super) first: Vec<Stmt>,
    /// What is locked until the end (SQLite takes no lock).
    pub(super) lock: Option<Lock>,
    /// What the change is made of, read after the lock.
    pub(super) read: Stmt,
    /// Whether `read` locks its rows too (`FOR UPDATE`, so it reads rows
    /// of tables, with no aggregate or outer join).
    pub(super) read_locks: bool,
}

impl Change {
    /// Reads the rows of `read` locked: nothing else changes them until
    /// this change ends.
    pub(super) fn locked_read(read: Stmt) -> Self {
        Change {
            first: Vec::new(),
            lock: None,
            read,
            read_locks: true,
        }
    }

    /// Locks the rows of `lock`, then reads `read` in a statement of its
    /// own, which sees every change that held the lock before.
    pub(super) fn after_lock(lock: Lock, read: Stmt) -> Self {
        Change {
            first: Vec::new(),
            lock: Some(lock),
            read,
            read_locks: false,
        }
    }

    /// Reads what `write` answers (`... RETURNING`): a write that locks
    /// the rows it answers, so nothing else changes them until this
    /// change ends (PostgreSQL only: SQLite has no `RETURNING` here).
    pub(super) fn read_by_write(write: Stmt) -> Self {
        Change {
            first: Vec::new(),
            lock: None,
            read: write,
            read_locks: false,
        }
    }

    /// Runs `first` after the lock, before the read.
    pub(super) fn first(mut self, first: Vec<Stmt>) -> Self {
        self.first = first;
        self
    }
}

/// What a [`Change`] locks before it reads.
#[derive(Debug, Clone)]
pub(super) enum Lock {
    /// The rows of a query (PostgreSQL: `FOR UPDATE`).
    Rows(Stmt),
    /// A name every change of one thing takes, for a thing that may have
    /// no row to lock yet (PostgreSQL: an advisory lock on the name's
    /// hash, held until the transaction ends). The names are kept as
    /// they are: replicas of an earlier version lock by them too.
    Name(String),
}

/// How a store runs SQL.
#[async_trait]
pub(super) trait Sql: Send + Sync {
    /// Its dialect, for what the two spell differently.
    const DIALECT: Dialect;

    /// Runs a query that changes nothing; its rows read as `T`.
    async fn query<T: Record + Send + 'static>(&self, stmt: Stmt) -> Result<Vec<T>>;

    /// Runs a statement that changes rows and answers some
    /// (`... RETURNING`), in a write transaction of its own.
    async fn write_query<T: Record + Send + 'static>(&self, stmt: Stmt) -> Result<Vec<T>>;

    /// Runs statements in one transaction: all of them or none; how many
    /// rows each changed.
    async fn execute(&self, stmts: Vec<Stmt>) -> Result<Vec<u64>>;

    /// One change read and written in a transaction (see [`Change`]):
    /// takes the lock, runs `first`, reads, then runs the statements
    /// `change` makes of what it read; what `change` answers. An error
    /// from `change` or from a statement undoes all.
    async fn change<T, R, F>(&self, plan: Change, change: F) -> Result<R>
    where
        T: Record + Send + 'static,
        R: Send + 'static,
        F: FnOnce(Vec<T>) -> Result<(Vec<Stmt>, R)> + Send + 'static;

    /// Reads the rows of `read` locked against any other change until
    /// this one ends, then runs the statements `change` makes of them, all
    /// in one transaction (see [`Change::locked_read`]).
    async fn change_locked<T, R, F>(&self, read: Stmt, change: F) -> Result<R>
    where
        T: Record + Send + 'static,
        R: Send + 'static,
        F: FnOnce(Vec<T>) -> Result<(Vec<Stmt>, R)> + Send + 'static,
    {
        self.change(Change::locked_read(read), change).await
    }

    /// Runs `stmts` in one transaction if `read` finds a row, which stays
    /// locked until they ran; `Invalid(missing)` if it finds none.
    async fn write_if_found(&self, read: Stmt, stmts: Vec<Stmt>, missing: String) -> Result<()> {
        self.change_locked(read, move |found: Vec<i64>| {
            if found.is_empty() {
                return Err(StoreError::Invalid(missing));
            }
            Ok((stmts, ()))
        })
        .await
    }

    /// The row of a query that finds at most one.
    async fn query_one<T: Record + Send + 'static>(&self, stmt: Stmt) -> Result<Option<T>> {
        Ok(self.query(stmt).await?.into_iter().next())
    }

    /// Runs one statement; how many rows it changed.
    async fn execute_one(&self, stmt: Stmt) -> Result<u64> {
        Ok(self.execute(vec![stmt]).await?.pop().unwrap_or(0))
    }

    /// The org's rows of `T`, oldest first.
    async fn list_in_org<T: OrgScoped + Send + 'static>(&self, org: &OrgId) -> Result<Vec<T>> {
        let sql = Self::DIALECT.list_in_org::<T>();
        self.query(Stmt::new(sql, args![org.as_str()])).await
    }

    /// The org's row of `T` with this name or id.
    async fn find_in_org<T: OrgScoped + Send + 'static>(
        &self,
        org: &OrgId,
        name_or_id: &str,
    ) -> Result<Option<T>> {
        let sql = Self::DIALECT.find_in_org::<T>();
        self.query_one(Stmt::new(sql, args![org.as_str(), name_or_id]))
            .await
    }

    /// Revokes the org's row `id` of `T` (once: a second revoke keeps the
    /// first time) and returns it, or `None` when the org has no such row.
    async fn revoke_in_org<T: Revocable + Send + 'static>(
        &self,
        org: &OrgId,
        id: &str,
    ) -> Result<Option<T>> {
        let revoke = Self::DIALECT.revoke_in_org::<T>();
        self.execute_one(Stmt::new(revoke, args![org.as_str(), id, now_ms()]))
            .await?;
        let sql = Self::DIALECT.get_in_org::<T>();
        self.query_one(Stmt::new(sql, args![org.as_str(), id]))
            .await
    }
}

/// `sql` with the arguments `first` (`$1`, ...) and, for its `IN (IDS)`,
/// the `ids` as one more, a JSON array (see [`Dialect::json_texts`]); none
/// when there are no ids. One statement text however many ids: a list of
/// placeholders was a statement of its own at each length, prepared anew
/// on each connection and pushing the prepared statements that are used
/// all the time out of the connection's cache.
pub(super) fn in_list(dialect: Dialect, first: &[&str], ids: &[&str], sql: &str) -> Option<Stmt> {
    if ids.is_empty() {
        return None;
    }
    let mut args: Vec<Arg> = first.iter().map(|a| Arg::from(*a)).collect();
    args.push(Arg::from(
        serde_json::to_string(ids).expect("strings serialize"),
    ));
    let list = dialect.json_texts(&format!("${}", args.len()));
    Some(Stmt::new(sql.replace("IDS", &list), args))
}

/// `sql` in SQLite's numbered placeholders: `$3` is `?3`.
pub(super) fn sqlite_placeholders(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push('?');
        } else {
            out.push(c);
        }
    }
    out
}

/// A row of one column read as a plain value.
macro_rules! one_column {
    ($($t:ty => $cell:ident),* $(,)?) => {$(
        impl Record for $t {
            const COLUMNS: &'static str = "";
            fn read(r: &impl Cells) -> Result<Self> {
                r.$cell(0)
            }
        }
    )*};
}

one_column! {
    String => text,
    Option<String> => opt_text,
    i64 => int,
    Option<i64> => opt_int,
    u32 => u32,
    bool => flag,
    Vec<u8> => bytes,
}

/// Two ids of a row, as a record.
pub(super) struct IdPair<A, B>(pub(super) A, pub(super) B);

impl<A, B> Record for IdPair<A, B>
where
    A: std::str::FromStr<Err = nuon_core::IdError>,
    B: std::str::FromStr<Err = nuon_core::IdError>,
{
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(IdPair(r.id(0)?, r.id(1)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_alike() {
        assert_eq!(
            sqlite_placeholders("UPDATE t SET a = $3 WHERE id = $1 AND org = $12"),
            "UPDATE t SET a = ?3 WHERE id = ?1 AND org = ?12"
        );
        // A dollar not before a digit stays.
        assert_eq!(sqlite_placeholders("SELECT '$.a', $1"), "SELECT '$.a', ?1");
    }
}
