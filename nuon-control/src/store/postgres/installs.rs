//! Installs: their inputs, state, config version and outputs.

use super::*;
use crate::store::installs::{InstallChange, Keyed, StackTokenRow};
use crate::store::{CheckStore, StackRedeem, StackStore};
use nuon_core::model::{ApprovalMode, InstallState};

#[async_trait]
impl InstallStore for PostgresStore {
    async fn create_install(&self, org: &OrgId, new: NewInstall) -> Result<StoredInstall> {
        let mut tx = self.begin().await?;
        let now = now_ms();
        sqlx::query(
            "INSERT INTO runners (id, org_id, name, token_hash, created_at, role) VALUES ($1, $2, $3, $4, $5, 'install')",
        )
        .bind(new.runner_id.as_str())
        .bind(org.as_str())
        .bind(&new.runner_name)
        .bind(&new.runner_token_hash)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            taken(e, || {
                format!(
                    "a runner named {:?} already exists in this org; pick another name",
                    new.runner_name
                )
            })
        })?;
        sqlx::query(
            "INSERT INTO installs (id, org_id, app_id, name, config_version, runner_id, state, inputs, sealed, created_at, approval, labels, toggles, overrides) \
             VALUES ($1, $2, $3, $4, $5, $6, 'created', $7, $8, $9, $10, $11, $12, $13)",
        )
        .bind(new.id.as_str())
        .bind(org.as_str())
        .bind(new.app_id.as_str())
        .bind(&new.name)
        .bind(i64::from(new.config_version))
        .bind(new.runner_id.as_str())
        .bind(&new.inputs_json)
        .bind(&new.sealed_json)
        .bind(now)
        .bind(new.approval.as_str())
        .bind(serde_json::to_string(&new.labels).unwrap_or_else(|_| "{}".into()))
        .bind(crate::store::installs::toggles_json(&new.toggles))
        .bind(crate::store::installs::toggles_json(&new.overrides))
        .execute(&mut *tx)
        .await
        .map_err(|e| {
            taken(e, || {
                format!(
                    "an install named {:?} already exists in this org; pick another name",
                    new.name
                )
            })
        })?;
        tx.commit().await.map_err(db)?;
        Ok(StoredInstall {
            id: new.id,
            name: new.name,
            app_id: new.app_id,
            config_version: new.config_version,
            runner_id: new.runner_id,
            state: InstallState::Created,
            inputs_json: new.inputs_json,
            sealed_json: new.sealed_json,
            outputs_json: None,
            created_at_ms: now,
            approval: new.approval,
            toggles: new.toggles,
            overrides: new.overrides,
            labels: new.labels,
            checks: Default::default(),
            stack_outputs: None,
        })
    }

    async fn list_installs(&self, org: &OrgId) -> Result<Vec<StoredInstall>> {
        self.list_in_org(org).await
    }

    async fn find_install(&self, org: &OrgId, name_or_id: &str) -> Result<Option<StoredInstall>> {
        self.find_in_org(org, name_or_id).await
    }

    async fn find_install_of_runner(
        &self,
        org: &OrgId,
        runner: &RunnerId,
    ) -> Result<Option<StoredInstall>> {
        let sql = format!(
            "SELECT {} FROM installs WHERE org_id = $1 AND runner_id = $2",
            StoredInstall::COLUMNS
        );
        self.one_in_org(sql, org, runner.as_str()).await
    }

    async fn set_install_inputs(
        &self,
        org: &OrgId,
        id: &InstallId,
        inputs_json: &str,
        sealed_json: &str,
    ) -> Result<Option<StoredInstall>> {
        sqlx::query(AssertSqlSafe(format!(
            "UPDATE installs SET inputs = $3, sealed = $4 WHERE org_id = $1 AND id = $2 \
             RETURNING {}",
            StoredInstall::COLUMNS
        )))
        .bind(org.as_str())
        .bind(id.as_str())
        .bind(inputs_json)
        .bind(sealed_json)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?
        .map(|r| StoredInstall::read(&r))
        .transpose()
    }

    async fn set_install_outputs(
        &self,
        org: &OrgId,
        id: &InstallId,
        outputs_json: &str,
        state: InstallState,
    ) -> Result<()> {
        sqlx::query("UPDATE installs SET outputs = $3, state = $4 WHERE id = $1 AND org_id = $2")
            .bind(id.as_str())
            .bind(org.as_str())
            .bind(outputs_json)
            .bind(state.as_str())
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn set_install_state(
        &self,
        org: &OrgId,
        id: &InstallId,
        state: InstallState,
    ) -> Result<()> {
        sqlx::query("UPDATE installs SET state = $3 WHERE id = $1 AND org_id = $2")
            .bind(id.as_str())
            .bind(org.as_str())
            .bind(state.as_str())
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn update_install(
        &self,
        org: &OrgId,
        id: &InstallId,
        change: &InstallChange,
    ) -> Result<Option<StoredInstall>> {
        let updated = sqlx::query(
            "UPDATE installs SET name = COALESCE($3, name), approval = COALESCE($4, approval) \
             WHERE id = $1 AND org_id = $2",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(change.name.as_deref())
        .bind(change.approval.map(ApprovalMode::as_str))
        .execute(&self.pool)
        .await
        .map_err(|e| {
            taken(e, || {
                format!(
                    "an install named {:?} already exists in this org; pick another name",
                    change.name.as_deref().unwrap_or("")
                )
            })
        })?;
        if updated.rows_affected() == 0 {
            return Ok(None);
        }
        self.find_install(org, id.as_str()).await
    }

    async fn set_install_toggle(
        &self,
        org: &OrgId,
        id: &InstallId,
        component: &str,
        enabled: Option<bool>,
    ) -> Result<()> {
        let value = enabled.map(|on| on.to_string());
        self.set_install_key(Keyed::Toggles, org, id, component, value)
            .await
    }

    async fn set_install_override(
        &self,
        org: &OrgId,
        id: &InstallId,
        component: &str,
        values: Option<&nuon_core::wire::ComponentOverride>,
    ) -> Result<()> {
        let value = values.map(|v| serde_json::to_string(v).unwrap_or_else(|_| "{}".into()));
        self.set_install_key(Keyed::Overrides, org, id, component, value)
            .await
    }

    async fn set_install_config(&self, org: &OrgId, id: &InstallId, version: u32) -> Result<()> {
        sqlx::query("UPDATE installs SET config_version = $3 WHERE id = $1 AND org_id = $2")
            .bind(id.as_str())
            .bind(org.as_str())
            .bind(i64::from(version))
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn scheduled_installs(&self) -> Result<Vec<(OrgId, InstallId)>> {
        sqlx::query(
            "SELECT org_id, id FROM installs \
             WHERE state NOT IN ('created', 'deprovisioning', 'deprovisioned') ORDER BY created_at, id",
        )
        .fetch_all(&self.pool)
        .await
        .map_err(db)?
        .iter()
        .map(id_pair)
        .collect()
    }

    async fn install_of_runner(&self, runner: &RunnerId) -> Result<Option<(OrgId, InstallId)>> {
        sqlx::query("SELECT org_id, id FROM installs WHERE runner_id = $1")
            .bind(runner.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .map(|r| {
                Ok((
                    parse_id(&get::<String>(&r, 0)?)?,
                    parse_id(&get::<String>(&r, 1)?)?,
                ))
            })
            .transpose()
    }
}

#[async_trait]
impl CheckStore for PostgresStore {
    async fn set_install_check(
        &self,
        org: &OrgId,
        id: &InstallId,
        check: &nuon_core::wire::InstallCheck,
    ) -> Result<()> {
        let value = serde_json::to_string(check).unwrap_or_else(|_| "{}".into());
        self.set_install_key(Keyed::Checks, org, id, &check.name, Some(value))
            .await
    }
}

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

impl PostgresStore {
    /// Sets (`Some`, JSON text) or removes one key of an install's
    /// JSON-object column, as jsonb in one statement.
    async fn set_install_key(
        &self,
        column: Keyed,
        org: &OrgId,
        id: &InstallId,
        key: &str,
        value: Option<String>,
    ) -> Result<()> {
        // The column is one of `Keyed`'s names, never input.
        let c = column.name();
        let changed = sqlx::query(AssertSqlSafe(format!(
            "UPDATE installs SET {c} = (CASE WHEN $4::text IS NULL \
                 THEN COALESCE({c}, '{{}}')::jsonb - $3 \
                 ELSE COALESCE({c}, '{{}}')::jsonb || jsonb_build_object($3::text, $4::jsonb) END)::text \
             WHERE id = $1 AND org_id = $2"
        )))
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(key)
        .bind(value)
        .execute(&self.pool)
        .await
        .map_err(db)?
        .rows_affected();
        if changed == 0 {
            return Err(StoreError::Invalid(format!("no install {id}")));
        }
        Ok(())
    }
}
