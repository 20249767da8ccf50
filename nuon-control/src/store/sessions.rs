//! The dashboard's sign-in sessions: each kept by the hash of its cookie,
//! acting with the API token it was opened with (by that token's hash), so
//! revoking the token, demoting or removing its person ends what the
//! session may do at once.

use super::*;

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
