//! Installs: their inputs, state, config version and outputs.

use super::*;
use crate::store::installs::StackTokenRow;
use crate::store::{StackRedeem, StackStore};

#[async_trait]
impl StackStore for PostgresStore {
    async fn set_stack_token(
        &self,
        org: &OrgId,
        id: &InstallId,
        token_hash: &str,
        expires_ms: i64,
    ) -> Result<()> {
        sqlx::query(
            "UPDATE installs SET stack_token = $3, stack_token_expires = $4, stack_token_used = NULL \
             WHERE id = $1 AND org_id = $2",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(token_hash)
        .bind(expires_ms)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        Ok(())
    }

    async fn peek_stack_token(&self, token_hash: &str, now: i64) -> Result<StackRedeem> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        stack_token_state(&mut conn, token_hash, now, false).await
    }

    async fn redeem_stack_token(
        &self,
        token_hash: &str,
        now: i64,
        runner_token_hash: &str,
        outputs: &str,
    ) -> Result<StackRedeem> {
        let mut tx = self.begin().await?;
        let state = stack_token_state(&mut tx, token_hash, now, true).await?;
        let StackRedeem::Redeemed {
            install, runner, ..
        } = &state
        else {
            return Ok(state);
        };
        let rotated = sqlx::query(
            "UPDATE runners SET token_hash = $2, session = NULL WHERE id = $1 AND revoked_at IS NULL",
        )
        .bind(runner.as_str())
        .bind(runner_token_hash)
        .execute(&mut *tx)
        .await
        .map_err(db)?
        .rows_affected();
        if rotated == 0 {
            return Ok(StackRedeem::RunnerRevoked);
        }
        sqlx::query("UPDATE installs SET stack_token_used = $2, stack_outputs = $3 WHERE id = $1")
            .bind(install.as_str())
            .bind(now)
            .bind(outputs)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(state)
    }
}

/// What spending stack token `hash` at `now` would give; `lock` holds the
/// install's row for the transaction.
async fn stack_token_state(
    conn: &mut sqlx::PgConnection,
    hash: &str,
    now: i64,
    lock: bool,
) -> Result<StackRedeem> {
    let sql = format!(
        "SELECT i.org_id, i.id, i.runner_id, i.stack_token_expires, i.stack_token_used, r.revoked_at \
         FROM installs i JOIN runners r ON r.id = i.runner_id WHERE i.stack_token = $1{}",
        if lock { " FOR UPDATE OF i" } else { "" }
    );
    let row = sqlx::query(AssertSqlSafe(sql))
        .bind(hash)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    let row = match row {
        Some(r) => Some(StackTokenRow {
            org: r.id(0)?,
            install: r.id(1)?,
            runner: r.id(2)?,
            expires_ms: r.int(3)?,
            used_ms: r.opt_int(4)?,
            runner_revoked: r.opt_int(5)?.is_some(),
        }),
        None => None,
    };
    Ok(StackTokenRow::state(row, now))
}
