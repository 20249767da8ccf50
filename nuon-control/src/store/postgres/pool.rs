//! The connections the store's calls run on, kept between calls.
//!
//! sqlx's pool sends each connection a round trip of its own when a call
//! gives it back (a `Sync`, answered by the server), whatever the call did:
//! for a call of one statement that is half its round trips, on both
//! sides. Here a call that ended as it should ([`Conn::done`]) gives its
//! connection straight back; only one that did not (an error, a dropped
//! future, a transaction left open) has it checked (its `ROLLBACK` sent,
//! its answers read) before another call may take it, and closed when that
//! fails.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::Connection;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::db;
use crate::store::{Result, StoreError};

/// How long a call waits for a connection when all are taken.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(10);

/// At most `max` connections to one server, opened as calls need them.
#[derive(Clone)]
pub(super) struct Conns {
    inner: Arc<Inner>,
}

struct Inner {
    options: PgConnectOptions,
    idle: Mutex<Vec<PgConnection>>,
    permits: Arc<Semaphore>,
}

impl Inner {
    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<PgConnection>> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn give_back(&self, conn: PgConnection) {
        if !self.permits.is_closed() {
            self.idle().push(conn);
        }
    }
}

impl Conns {
    pub(super) fn new(options: PgConnectOptions, max: usize) -> Self {
        Conns {
            inner: Arc::new(Inner {
                options,
                idle: Mutex::new(Vec::new()),
                permits: Arc::new(Semaphore::new(max)),
            }),
        }
    }

    /// A connection for one call: an idle one, or a new one.
    pub(super) async fn get(&self) -> Result<Conn> {
        let permits = self.inner.permits.clone();
        let permit = match tokio::time::timeout(ACQUIRE_TIMEOUT, permits.acquire_owned()).await {
            Ok(Ok(p)) => p,
            Ok(Err(_)) => return Err(StoreError::Closed),
            // As sqlx's pool says it.
            Err(_) => return Err(db(sqlx::Error::PoolTimedOut)),
        };
        let idle = self.inner.idle().pop();
        let conn = match idle {
            Some(c) => c,
            None => PgConnection::connect_with(&self.inner.options)
                .await
                .map_err(db)?,
        };
        Ok(Conn {
            conn: Some(conn),
            inner: self.inner.clone(),
            permit: Some(permit),
            done: false,
        })
    }

    /// Closes the idle connections; calls after it fail.
    pub(super) async fn close(&self) {
        self.inner.permits.close();
        let idle: Vec<PgConnection> = std::mem::take(&mut *self.inner.idle());
        for c in idle {
            let _ = c.close().await;
        }
    }
}

/// One call's connection; given back when dropped.
pub(super) struct Conn {
    conn: Option<PgConnection>,
    inner: Arc<Inner>,
    permit: Option<OwnedSemaphorePermit>,
    done: bool,
}

impl Conn {
    /// The call ended as it should: the connection waits for nothing.
    pub(super) fn done(&mut self) {
        self.done = true;
    }
}

impl std::ops::Deref for Conn {
    type Target = PgConnection;
    fn deref(&self) -> &PgConnection {
        self.conn.as_ref().expect("a connection until dropped")
    }
}

impl std::ops::DerefMut for Conn {
    fn deref_mut(&mut self) -> &mut PgConnection {
        self.conn.as_mut().expect("a connection until dropped")
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        let permit = self.permit.take();
        let clean = self.done && !conn.is_in_transaction() && !conn.should_flush();
        if clean {
            self.inner.give_back(conn);
            drop(permit);
            return;
        }
        // What is queued is sent and answered now (a transaction's
        // locks are not held while it waits for its next call); a
        // connection that cannot is closed. The permit is held until
        // then, so no call counts it free before.
        let inner = self.inner.clone();
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                if conn.ping().await.is_ok() {
                    inner.give_back(conn);
                }
                drop(permit);
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn pid(conn: &mut Conn) -> i32 {
        sqlx::query_scalar("SELECT pg_backend_pid()")
            .fetch_one(&mut **conn)
            .await
            .unwrap()
    }

    /// Two pools of one connection each on one server: in the first a
    /// call waits for the one before to give it back, however that one
    /// ended; the second looks from beside.
    async fn one_connection() -> Option<(nuon_test_fixtures::PgCluster, Conns, Conns)> {
        let pg = nuon_test_fixtures::PgCluster::start().unwrap()?;
        let options: PgConnectOptions = pg.url.parse().unwrap();
        Some((pg, Conns::new(options.clone(), 1), Conns::new(options, 1)))
    }

    #[tokio::test]
    async fn a_call_that_ended_well_gives_its_connection_back_as_it_is() {
        let Some((_pg, conns, _)) = one_connection().await else {
            return;
        };
        let mut a = conns.get().await.unwrap();
        let first = pid(&mut a).await;
        a.done();
        drop(a);
        let mut b = conns.get().await.unwrap();
        assert_eq!(pid(&mut b).await, first, "the same connection, kept");
    }

    #[tokio::test]
    async fn a_call_dropped_in_a_transaction_leaves_no_lock_behind() {
        let Some((_pg, conns, other)) = one_connection().await else {
            return;
        };
        let mut a = conns.get().await.unwrap();
        let first = pid(&mut a).await;
        let mut tx = a.begin().await.unwrap();
        sqlx::query("SELECT pg_advisory_xact_lock(42)")
            .execute(&mut *tx)
            .await
            .unwrap();
        // As a future dropped at an await would leave them.
        drop(tx);
        drop(a);
        // The next call waits for the check, and gets the connection out of
        // its transaction.
        let mut b = conns.get().await.unwrap();
        assert_eq!(pid(&mut b).await, first);
        assert!(!b.is_in_transaction());
        let mut c = other.get().await.unwrap();
        let free: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock(42)")
            .fetch_one(&mut *c)
            .await
            .unwrap();
        assert!(free, "the dropped transaction's lock is released");
    }

    #[tokio::test]
    async fn a_broken_connection_is_closed_not_given_back() {
        let Some((_pg, conns, other)) = one_connection().await else {
            return;
        };
        let mut a = conns.get().await.unwrap();
        let first = pid(&mut a).await;
        let mut killer = other.get().await.unwrap();
        sqlx::query("SELECT pg_terminate_backend($1)")
            .bind(first)
            .execute(&mut *killer)
            .await
            .unwrap();
        let failed = sqlx::query("SELECT 1").execute(&mut *a).await;
        assert!(failed.is_err(), "the server ended it");
        drop(a);
        let mut b = conns.get().await.unwrap();
        assert_ne!(pid(&mut b).await, first, "a new connection");
        conns.close().await;
        assert!(matches!(conns.get().await, Err(StoreError::Closed)));
    }
}
