//! Installs: their inputs, state, config version and outputs.

use super::*;
use crate::store::installs::StackTokenRow;
use crate::store::{StackRedeem, StackStore};

#[async_trait]
impl StackStore for SqliteStore {
    async fn set_stack_token(
        &self,
        org: &OrgId,
        id: &InstallId,
        token_hash: &str,
        expires_ms: i64,
    ) -> Result<()> {
        let (org, id, hash) = (org.clone(), id.clone(), token_hash.to_owned());
        self.write(move |conn| {
            conn.execute(
                "UPDATE installs SET stack_token = ?3, stack_token_expires = ?4, stack_token_used = NULL \
                 WHERE id = ?1 AND org_id = ?2",
                params![id.as_str(), org.as_str(), hash, expires_ms],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn peek_stack_token(&self, token_hash: &str, now: i64) -> Result<StackRedeem> {
        let hash = token_hash.to_owned();
        self.read(move |conn| stack_token_state(conn, &hash, now))
            .await
    }

    async fn redeem_stack_token(
        &self,
        token_hash: &str,
        now: i64,
        runner_token_hash: &str,
        outputs: &str,
    ) -> Result<StackRedeem> {
        let (hash, runner_hash, outputs) = (
            token_hash.to_owned(),
            runner_token_hash.to_owned(),
            outputs.to_owned(),
        );
        self.write(move |conn| {
            let state = stack_token_state(conn, &hash, now)?;
            let StackRedeem::Redeemed {
                install, runner, ..
            } = &state
            else {
                return Ok(state);
            };
            let rotated = conn
                .execute(
                    "UPDATE runners SET token_hash = ?2, session = NULL \
                     WHERE id = ?1 AND revoked_at IS NULL",
                    params![runner.as_str(), runner_hash],
                )
                .map_err(db_err)?;
            if rotated == 0 {
                return Ok(StackRedeem::RunnerRevoked);
            }
            conn.execute(
                "UPDATE installs SET stack_token_used = ?2, stack_outputs = ?3 \
                 WHERE id = ?1 AND stack_token_used IS NULL",
                params![install.as_str(), now, outputs],
            )
            .map_err(db_err)?;
            Ok(state)
        })
        .await
    }
}

/// What spending stack token `hash` at `now` would give.
fn stack_token_state(conn: &Connection, hash: &str, now: i64) -> Result<StackRedeem> {
    let row = one_row(
        conn,
        "SELECT i.org_id, i.id, i.runner_id, i.stack_token_expires, i.stack_token_used, \
         r.revoked_at FROM installs i JOIN runners r ON r.id = i.runner_id \
         WHERE i.stack_token = ?1",
        [hash],
        |r| {
            Ok(StackTokenRow {
                org: id_at(r, 0)?,
                install: id_at(r, 1)?,
                runner: id_at(r, 2)?,
                expires_ms: r.get(3)?,
                used_ms: r.get(4)?,
                runner_revoked: r.get::<_, Option<i64>>(5)?.is_some(),
            })
        },
    )?;
    Ok(StackTokenRow::state(row, now))
}
