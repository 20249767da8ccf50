//! Installs: their inputs, state, config version and outputs.

use super::*;
use crate::store::installs::{InstallChange, Keyed, StackTokenRow, toggles_json};
use crate::store::{CheckStore, StackRedeem, StackStore};
use nuon_core::model::{ApprovalMode, InstallState};

#[async_trait]
impl InstallStore for SqliteStore {
    async fn create_install(&self, org: &OrgId, new: NewInstall) -> Result<StoredInstall> {
        let org = org.clone();
        self.write(move |conn| {
            let now = now_ms();
            conn.execute(
                "INSERT INTO runners (id, org_id, name, token_hash, created_at, role) VALUES (?1, ?2, ?3, ?4, ?5, 'install')",
                params![new.runner_id.as_str(), org.as_str(), new.runner_name, new.runner_token_hash, now],
            )
            .map_err(|e| name_taken(e, "a runner", &new.runner_name))?;
            conn.execute(
                "INSERT INTO installs (id, org_id, app_id, name, config_version, runner_id, state, inputs, sealed, created_at, approval, labels, toggles, overrides) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'created', ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![
                    new.id.as_str(),
                    org.as_str(),
                    new.app_id.as_str(),
                    new.name,
                    new.config_version,
                    new.runner_id.as_str(),
                    new.inputs_json,
                    new.sealed_json,
                    now,
                    new.approval.as_str(),
                    serde_json::to_string(&new.labels).unwrap_or_else(|_| "{}".into()),
                    toggles_json(&new.toggles),
                    toggles_json(&new.overrides),
                ],
            )
            .map_err(|e| name_taken(e, "an install", &new.name))?;
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
        })
        .await
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
        let (org, runner) = (org.clone(), runner.clone());
        self.read(move |conn| {
            record(
                conn,
                &format!(
                    "SELECT {} FROM installs WHERE org_id = ?1 AND runner_id = ?2",
                    StoredInstall::COLUMNS
                ),
                params![org.as_str(), runner.as_str()],
            )
        })
        .await
    }

    async fn set_install_inputs(
        &self,
        org: &OrgId,
        id: &InstallId,
        inputs_json: &str,
        sealed_json: &str,
    ) -> Result<Option<StoredInstall>> {
        let (org, id, inputs, sealed) = (
            org.clone(),
            id.clone(),
            inputs_json.to_owned(),
            sealed_json.to_owned(),
        );
        self.write(move |conn| {
            conn.execute(
                "UPDATE installs SET inputs = ?3, sealed = ?4 WHERE org_id = ?1 AND id = ?2",
                params![org.as_str(), id.as_str(), inputs, sealed],
            )
            .map_err(db_err)?;
            record(
                conn,
                &format!(
                    "SELECT {} FROM installs WHERE org_id = ?1 AND id = ?2",
                    StoredInstall::COLUMNS
                ),
                params![org.as_str(), id.as_str()],
            )
        })
        .await
    }

    async fn set_install_outputs(
        &self,
        org: &OrgId,
        id: &InstallId,
        outputs_json: &str,
        state: InstallState,
    ) -> Result<()> {
        let (org, id, outputs, state) = (
            org.clone(),
            id.clone(),
            outputs_json.to_owned(),
            state.as_str(),
        );
        self.write(move |conn| {
            conn.execute(
                "UPDATE installs SET outputs = ?3, state = ?4 WHERE id = ?1 AND org_id = ?2",
                params![id.as_str(), org.as_str(), outputs, state],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn set_install_state(
        &self,
        org: &OrgId,
        id: &InstallId,
        state: InstallState,
    ) -> Result<()> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            conn.execute(
                "UPDATE installs SET state = ?3 WHERE id = ?1 AND org_id = ?2",
                params![id.as_str(), org.as_str(), state.as_str()],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn update_install(
        &self,
        org: &OrgId,
        id: &InstallId,
        change: &InstallChange,
    ) -> Result<Option<StoredInstall>> {
        let (org, id, change) = (org.clone(), id.clone(), change.clone());
        self.write(move |conn| {
            let changed = conn
                .execute(
                    "UPDATE installs SET name = COALESCE(?3, name), approval = COALESCE(?4, approval) \
                     WHERE id = ?1 AND org_id = ?2",
                    params![
                        id.as_str(),
                        org.as_str(),
                        change.name,
                        change.approval.map(ApprovalMode::as_str),
                    ],
                )
                .map_err(|e| name_taken(e, "an install", change.name.as_deref().unwrap_or("")))?;
            if changed == 0 {
                return Ok(None);
            }
            record(
                conn,
                &format!(
                    "SELECT {} FROM installs WHERE org_id = ?1 AND id = ?2",
                    StoredInstall::COLUMNS
                ),
                params![org.as_str(), id.as_str()],
            )
        })
        .await
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
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            conn.execute(
                "UPDATE installs SET config_version = ?3 WHERE id = ?1 AND org_id = ?2",
                params![id.as_str(), org.as_str(), version],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn scheduled_installs(&self) -> Result<Vec<(OrgId, InstallId)>> {
        self.read(move |conn| {
            all_rows(
                conn,
                "SELECT org_id, id FROM installs \
                 WHERE state NOT IN ('created', 'deprovisioning', 'deprovisioned') ORDER BY created_at, id",
                [],
                |r| Ok((id_at::<OrgId>(r, 0)?, id_at::<InstallId>(r, 1)?)),
            )
        })
        .await
    }

    async fn install_of_runner(&self, runner: &RunnerId) -> Result<Option<(OrgId, InstallId)>> {
        let runner = runner.clone();
        self.read(move |conn| {
            one_row(
                conn,
                "SELECT org_id, id FROM installs WHERE runner_id = ?1",
                [runner.as_str()],
                |r| Ok((id_at::<OrgId>(r, 0)?, id_at::<InstallId>(r, 1)?)),
            )
        })
        .await
    }
}

#[async_trait]
impl CheckStore for SqliteStore {
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

impl SqliteStore {
    /// Sets (`Some`, JSON text) or removes one key of an install's
    /// JSON-object column.
    async fn set_install_key(
        &self,
        column: Keyed,
        org: &OrgId,
        id: &InstallId,
        key: &str,
        value: Option<String>,
    ) -> Result<()> {
        let (org, id) = (org.clone(), id.clone());
        let path = format!("$.{}", serde_json::Value::String(key.to_owned()));
        let c = column.name();
        self.write(move |conn| {
            let changed = match value {
                Some(v) => conn.execute(
                    &format!(
                        "UPDATE installs SET {c} = json_set(COALESCE({c}, '{{}}'), ?3, json(?4)) \
                         WHERE id = ?1 AND org_id = ?2"
                    ),
                    params![id.as_str(), org.as_str(), path, v],
                ),
                None => conn.execute(
                    &format!(
                        "UPDATE installs SET {c} = json_remove(COALESCE({c}, '{{}}'), ?3) \
                         WHERE id = ?1 AND org_id = ?2"
                    ),
                    params![id.as_str(), org.as_str(), path],
                ),
            }
            .map_err(db_err)?;
            if changed == 0 {
                return Err(StoreError::Invalid(format!("no install {id}")));
            }
            Ok(())
        })
        .await
    }
}
