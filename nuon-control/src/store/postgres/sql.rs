//! How the PostgreSQL store runs the SQL both stores share ([`Sql`]).

use sqlx::postgres::PgArguments;
use sqlx::query::Query;

use super::*;
use crate::store::rows::Record;
use crate::store::sql::{Arg, Change, Lock, Sql, Stmt};

/// `stmt`'s SQL with its arguments bound, moved out of it: what is left
/// (what a failure or an answer of it means) reads the outcome.
fn bound(stmt: &mut Stmt) -> Query<'static, Postgres, PgArguments> {
    let sql = std::mem::take(&mut stmt.sql);
    std::mem::take(&mut stmt.args)
        .into_iter()
        .fold(sqlx::query(AssertSqlSafe(sql)), |q, a| match a {
            Arg::Text(v) => q.bind(v),
            Arg::Int(v) => q.bind(v),
            Arg::Bytes(v) => q.bind(v),
        })
}

/// `e` of `stmt`: a conflict when it broke a unique constraint and the
/// statement says what that means.
fn failed(e: sqlx::Error, stmt: &Stmt) -> StoreError {
    match &stmt.taken {
        Some(message) => taken(e, || message.clone()),
        None => db(e),
    }
}

#[async_trait]
impl Sql for PostgresStore {
    const DIALECT: Dialect = Dialect::Postgres;

    async fn query<T: Record + Send + 'static>(&self, mut stmt: Stmt) -> Result<Vec<T>> {
        let mut conn = self.conn().await?;
        let rows = bound(&mut stmt)
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| failed(e, &stmt))?;
        conn.done();
        rows.iter().map(T::read).collect()
    }

    async fn write_query<T: Record + Send + 'static>(&self, stmt: Stmt) -> Result<Vec<T>> {
        self.query(stmt).await
    }

    async fn execute(&self, mut stmts: Vec<Stmt>) -> Result<Vec<u64>> {
        let mut conn = self.conn().await?;
        // One statement is atomic alone: no `BEGIN` and `COMMIT` round
        // trips around it. A `must_change` it fails changed nothing.
        if let [s] = stmts.as_mut_slice() {
            let done = bound(s)
                .execute(&mut *conn)
                .await
                .map_err(|e| failed(e, s))?;
            conn.done();
            return Ok(vec![s.changed(done.rows_affected())?]);
        }
        let mut tx = conn.begin().await.map_err(db)?;
        let mut changed = Vec::with_capacity(stmts.len());
        for s in &mut stmts {
            let done = bound(s).execute(&mut *tx).await.map_err(|e| failed(e, s))?;
            changed.push(s.changed(done.rows_affected())?);
        }
        tx.commit().await.map_err(db)?;
        conn.done();
        Ok(changed)
    }

    async fn change<T, R, F>(&self, plan: Change, change: F) -> Result<R>
    where
        T: Record + Send + 'static,
        R: Send + 'static,
        F: FnOnce(Vec<T>) -> Result<(Vec<Stmt>, R)> + Send + 'static,
    {
        let for_update = |s: Stmt| Stmt {
            sql: format!("{} FOR UPDATE", s.sql).into(),
            ..s
        };
        let mut conn = self.conn().await?;
        let mut tx = conn.begin().await.map_err(db)?;
        let lock = match plan.lock {
            Some(Lock::Rows(rows)) => Some(for_update(rows)),
            Some(Lock::Name(name)) => Some(Stmt::new(
                "SELECT pg_advisory_xact_lock(hashtext($1))",
                vec![Arg::Text(Some(name))],
            )),
            None => None,
        };
        if let Some(mut lock) = lock {
            bound(&mut lock)
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| failed(e, &lock))?;
        }
        let mut first = plan.first;
        for s in &mut first {
            let done = bound(s).execute(&mut *tx).await.map_err(|e| failed(e, s))?;
            s.changed(done.rows_affected())?;
        }
        let mut read = if plan.read_locks {
            for_update(plan.read)
        } else {
            plan.read
        };
        let rows = bound(&mut read)
            .fetch_all(&mut *tx)
            .await
            .map_err(|e| failed(e, &read))?
            .iter()
            .map(T::read)
            .collect::<Result<Vec<T>>>()?;
        let (mut stmts, answer) = change(rows)?;
        for s in &mut stmts {
            let done = bound(s).execute(&mut *tx).await.map_err(|e| failed(e, s))?;
            s.changed(done.rows_affected())?;
        }
        tx.commit().await.map_err(db)?;
        conn.done();
        Ok(answer)
    }
}
