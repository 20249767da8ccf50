//! The dashboard's sign-in sessions: each kept by the hash of its cookie,
//! acting with the API token it was opened with (by that token's hash), so
//! revoking the token, demoting or removing its person ends what the
//! session may do at once.

use super::rows::{Cells, Record};
use super::sql::{Sql, Stmt, args};
use super::*;
use nuon_core::now_ms;

/// A dashboard session as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebSession {
    /// The hash of the cookie's secret.
    pub id_hash: String,
    /// The hash of the API token it acts with.
    pub token_hash: String,
    /// The token every form of the session carries.
    pub csrf: String,
    /// When it was opened.
    pub created_at_ms: i64,
    /// When it was last used (to the minute).
    pub last_seen_at_ms: i64,
    /// When it ends, used or not.
    pub expires_at_ms: i64,
}

/// The dashboard's sessions.
#[async_trait]
pub trait WebSessionStore: Send + Sync + 'static {
    /// Keeps a new session (and forgets the expired ones).
    async fn create_web_session(&self, session: &WebSession) -> Result<()>;

    /// The session of a cookie's hash, unless it expired.
    async fn web_session(&self, id_hash: &str) -> Result<Option<WebSession>>;

    /// Records that the session was used at `now`.
    async fn touch_web_session(&self, id_hash: &str, now_ms: i64) -> Result<()>;

    /// Ends a session (signing out); whether there was one.
    async fn end_web_session(&self, id_hash: &str) -> Result<bool>;
}

impl Record for WebSession {
    const COLUMNS: &'static str = "id_hash, token_hash, csrf, created_at, last_seen_at, expires_at";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(WebSession {
            id_hash: r.text(0)?,
            token_hash: r.text(1)?,
            csrf: r.text(2)?,
            created_at_ms: r.int(3)?,
            last_seen_at_ms: r.int(4)?,
            expires_at_ms: r.int(5)?,
        })
    }
}

#[async_trait]
impl<S: Sql + 'static> WebSessionStore for S {
    async fn create_web_session(&self, s: &WebSession) -> Result<()> {
        self.execute(vec![
            Stmt::new(
                "DELETE FROM web_sessions WHERE expires_at <= $1",
                args![now_ms()],
            ),
            Stmt::new(
                format!(
                    "INSERT INTO web_sessions ({}) VALUES ($1, $2, $3, $4, $5, $6)",
                    WebSession::COLUMNS
                ),
                args![
                    s.id_hash.as_str(),
                    s.token_hash.as_str(),
                    s.csrf.as_str(),
                    s.created_at_ms,
                    s.last_seen_at_ms,
                    s.expires_at_ms,
                ],
            ),
        ])
        .await?;
        Ok(())
    }

    async fn web_session(&self, id_hash: &str) -> Result<Option<WebSession>> {
        self.query_one(Stmt::new(
            format!(
                "SELECT {} FROM web_sessions WHERE id_hash = $1 AND expires_at > $2",
                WebSession::COLUMNS
            ),
            args![id_hash, now_ms()],
        ))
        .await
    }

    async fn touch_web_session(&self, id_hash: &str, now: i64) -> Result<()> {
        self.execute_one(Stmt::new(
            "UPDATE web_sessions SET last_seen_at = $2 WHERE id_hash = $1",
            args![id_hash, now],
        ))
        .await?;
        Ok(())
    }

    async fn end_web_session(&self, id_hash: &str) -> Result<bool> {
        let n = self
            .execute_one(Stmt::new(
                "DELETE FROM web_sessions WHERE id_hash = $1",
                args![id_hash],
            ))
            .await?;
        Ok(n > 0)
    }
}
