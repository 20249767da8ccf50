//! The dashboard's sessions.

use super::*;
use crate::store::{WebSession, WebSessionStore};

#[async_trait]
impl WebSessionStore for PostgresStore {
    async fn create_web_session(&self, s: &WebSession) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM web_sessions WHERE expires_at <= $1")
            .bind(now_ms())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        sqlx::query(
            "INSERT INTO web_sessions (id_hash, token_hash, csrf, created_at, last_seen_at, expires_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
        )
        .bind(&s.id_hash)
        .bind(&s.token_hash)
        .bind(&s.csrf)
        .bind(s.created_at_ms)
        .bind(s.last_seen_at_ms)
        .bind(s.expires_at_ms)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)
    }

    async fn web_session(&self, id_hash: &str) -> Result<Option<WebSession>> {
        let row = sqlx::query(
            "SELECT id_hash, token_hash, csrf, created_at, last_seen_at, expires_at \
             FROM web_sessions WHERE id_hash = $1 AND expires_at > $2",
        )
        .bind(id_hash)
        .bind(now_ms())
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        row.map(|r| {
            Ok(WebSession {
                id_hash: get(&r, 0)?,
                token_hash: get(&r, 1)?,
                csrf: get(&r, 2)?,
                created_at_ms: get(&r, 3)?,
                last_seen_at_ms: get(&r, 4)?,
                expires_at_ms: get(&r, 5)?,
            })
        })
        .transpose()
    }

    async fn touch_web_session(&self, id_hash: &str, now: i64) -> Result<()> {
        sqlx::query("UPDATE web_sessions SET last_seen_at = $2 WHERE id_hash = $1")
            .bind(id_hash)
            .bind(now)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn end_web_session(&self, id_hash: &str) -> Result<bool> {
        let done = sqlx::query("DELETE FROM web_sessions WHERE id_hash = $1")
            .bind(id_hash)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(done.rows_affected() > 0)
    }
}
