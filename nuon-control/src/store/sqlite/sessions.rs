//! The dashboard's sessions.

use super::*;
use crate::store::{WebSession, WebSessionStore};

#[async_trait]
impl WebSessionStore for SqliteStore {
    async fn create_web_session(&self, s: &WebSession) -> Result<()> {
        let s = s.clone();
        self.write(move |conn| {
            conn.execute("DELETE FROM web_sessions WHERE expires_at <= ?1", [now_ms()])
                .map_err(db_err)?;
            conn.execute(
                "INSERT INTO web_sessions (id_hash, token_hash, csrf, created_at, last_seen_at, expires_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![s.id_hash, s.token_hash, s.csrf, s.created_at_ms, s.last_seen_at_ms, s.expires_at_ms],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn web_session(&self, id_hash: &str) -> Result<Option<WebSession>> {
        let hash = id_hash.to_owned();
        self.read(move |conn| {
            one_row(
                conn,
                "SELECT id_hash, token_hash, csrf, created_at, last_seen_at, expires_at \
                 FROM web_sessions WHERE id_hash = ?1 AND expires_at > ?2",
                params![hash, now_ms()],
                |r| {
                    Ok(WebSession {
                        id_hash: r.get(0)?,
                        token_hash: r.get(1)?,
                        csrf: r.get(2)?,
                        created_at_ms: r.get(3)?,
                        last_seen_at_ms: r.get(4)?,
                        expires_at_ms: r.get(5)?,
                    })
                },
            )
        })
        .await
    }

    async fn touch_web_session(&self, id_hash: &str, now: i64) -> Result<()> {
        let hash = id_hash.to_owned();
        self.write(move |conn| {
            conn.execute(
                "UPDATE web_sessions SET last_seen_at = ?2 WHERE id_hash = ?1",
                params![hash, now],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn end_web_session(&self, id_hash: &str) -> Result<bool> {
        let hash = id_hash.to_owned();
        self.write(move |conn| {
            let n = conn
                .execute("DELETE FROM web_sessions WHERE id_hash = ?1", [hash])
                .map_err(db_err)?;
            Ok(n > 0)
        })
        .await
    }
}
