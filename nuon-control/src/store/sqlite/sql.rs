//! How the SQLite store runs the SQL both stores share ([`Sql`]): reads
//! on the reader pool, writes on the one writer, each in its savepoint.

use nuon_core::wire::ErrorCode;
use rusqlite::types::{ToSqlOutput, Value, ValueRef};

use super::*;
use crate::store::rows::Record;
use crate::store::sql::{Arg, Change, Sql, Stmt, sqlite_placeholders};

impl rusqlite::ToSql for Arg {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match self {
            Arg::Text(Some(s)) => ToSqlOutput::Borrowed(ValueRef::Text(s.as_bytes())),
            Arg::Int(Some(i)) => ToSqlOutput::Owned(Value::Integer(*i)),
            Arg::Bytes(b) => ToSqlOutput::Borrowed(ValueRef::Blob(b)),
            Arg::Text(None) | Arg::Int(None) => ToSqlOutput::Owned(Value::Null),
        })
    }
}

/// `e` of `stmt`: a conflict when it broke a unique constraint and the
/// statement says what that means.
fn failed(e: rusqlite::Error, stmt: &Stmt) -> StoreError {
    match (&e, &stmt.taken) {
        (rusqlite::Error::SqliteFailure(f, _), Some(message))
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                || f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY =>
        {
            StoreError::Conflict {
                code: ErrorCode::NameTaken,
                message: message.clone(),
                acked_seq: None,
            }
        }
        _ => db_err(e),
    }
}

fn rows_of<T: Record>(conn: &Connection, stmt: &Stmt) -> Result<Vec<T>> {
    let sql = sqlite_placeholders(&stmt.sql);
    let mut prepared = conn.prepare_cached(&sql).map_err(db_err)?;
    let mut rows = prepared
        .query(rusqlite::params_from_iter(stmt.args.iter()))
        .map_err(|e| failed(e, stmt))?;
    let mut out = Vec::new();
    while let Some(r) = rows.next().map_err(|e| failed(e, stmt))? {
        out.push(T::read(r)?);
    }
    Ok(out)
}

/// Runs `stmts` in order; how many rows each changed.
fn run_all(conn: &Connection, stmts: &[Stmt]) -> Result<Vec<u64>> {
    stmts
        .iter()
        .map(|s| {
            conn.prepare_cached(&sqlite_placeholders(&s.sql))
                .and_then(|mut p| p.execute(rusqlite::params_from_iter(s.args.iter())))
                .map_err(|e| failed(e, s))
                .and_then(|n| s.changed(n as u64))
        })
        .collect()
}

#[async_trait]
impl Sql for SqliteStore {
    const DIALECT: Dialect = Dialect::Sqlite;

    async fn query<T: Record + Send + 'static>(&self, stmt: Stmt) -> Result<Vec<T>> {
        self.read(move |conn| rows_of(conn, &stmt)).await
    }

    async fn write_query<T: Record + Send + 'static>(&self, stmt: Stmt) -> Result<Vec<T>> {
        self.write(move |conn| rows_of(conn, &stmt)).await
    }

    async fn execute(&self, stmts: Vec<Stmt>) -> Result<Vec<u64>> {
        self.write(move |conn| run_all(conn, &stmts)).await
    }

    async fn change<T, R, F>(&self, plan: Change, change: F) -> Result<R>
    where
        T: Record + Send + 'static,
        R: Send + 'static,
        F: FnOnce(Vec<T>) -> Result<(Vec<Stmt>, R)> + Send + 'static,
    {
        // The one writer runs one closure at a time: nothing changes the
        // rows between the read and the writes, so nothing is locked.
        self.write(move |conn| {
            run_all(conn, &plan.first)?;
            let (stmts, answer) = change(rows_of(conn, &plan.read)?)?;
            run_all(conn, &stmts)?;
            Ok(answer)
        })
        .await
    }
}
