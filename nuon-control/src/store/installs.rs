//! Installs: their inputs, state, config version and outputs.

use super::rows::{Cells, Record};
use super::sql::{Arg, IdPair, Sql, Stmt, args, in_list};
use super::*;
use nuon_core::model::{ApprovalMode, InstallState};
use nuon_core::{ReleaseId, now_ms};

/// A new install and its runner, created together.
#[derive(Debug, Clone)]
pub struct NewInstall {
    /// The install.
    pub id: InstallId,
    /// Its app.
    pub app_id: AppId,
    /// Unique in the org.
    pub name: String,
    /// The config version it runs.
    pub config_version: u32,
    /// Its runner.
    pub runner_id: RunnerId,
    /// The runner's name (unique among the org's runners).
    pub runner_name: String,
    /// The hash of the runner's token.
    pub runner_token_hash: String,
    /// Plain input values, JSON object.
    pub inputs_json: String,
    /// Sealed sensitive inputs and secrets, JSON (see `secrets`).
    pub sealed_json: String,
    /// Its labels.
    pub labels: nuon_core::labels::Labels,
    /// Whether its applies wait for a person.
    pub approval: ApprovalMode,
    /// Toggleable components it starts with on or off.
    pub toggles: std::collections::BTreeMap<String, bool>,
    /// Its own Helm values or Terraform variables, by component.
    pub overrides: Overrides,
}

/// What [`InstallStore::update_install`] changes: each field that is
/// there.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InstallChange {
    /// A new name, unique in the org.
    pub name: Option<String>,
    /// A new approval mode.
    pub approval: Option<ApprovalMode>,
}

/// An install's columns holding a JSON object keyed by component.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Keyed {
    /// `toggles`: each component on or off.
    Toggles,
    /// `overrides`: each component's own values.
    Overrides,
    /// `checks`: the checks pushed for it.
    Checks,
}

impl Keyed {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Keyed::Toggles => "toggles",
            Keyed::Overrides => "overrides",
            Keyed::Checks => "checks",
        }
    }
}

/// The `toggles` column of an install: a JSON object, or NULL when none
/// was set (the same in every store).
pub(crate) fn toggles_json<T: serde::Serialize>(
    t: &std::collections::BTreeMap<String, T>,
) -> Option<String> {
    (!t.is_empty()).then(|| serde_json::to_string(t).unwrap_or_else(|_| "{}".into()))
}

/// Installs: their inputs, state, config version and outputs.
#[async_trait]
pub trait InstallStore: Send + Sync + 'static {
    /// Creates an install and its runner in one transaction.
    async fn create_install(&self, org: &OrgId, install: NewInstall) -> Result<Install>;

    /// The org's installs, oldest first.
    async fn list_installs(&self, org: &OrgId) -> Result<Vec<Install>>;

    /// An install of the org, by id or name.
    async fn find_install(&self, org: &OrgId, name_or_id: &str) -> Result<Option<Install>>;

    /// The org's installs among `ids` (in no set order; one gone, or
    /// another org's, is not in the answer): one read for many.
    async fn find_installs(&self, org: &OrgId, ids: &[InstallId]) -> Result<Vec<Install>>;

    /// The install whose runner is `runner` (none for a build runner).
    async fn find_install_of_runner(
        &self,
        org: &OrgId,
        runner: &RunnerId,
    ) -> Result<Option<Install>>;

    /// What the settings' version of the install's runner `runner` is made
    /// of, in one read (none for a build runner): what a claim's answer
    /// carries, so lighter than the install and its runner release apart.
    async fn settings_basis_of_runner(
        &self,
        org: &OrgId,
        runner: &RunnerId,
    ) -> Result<Option<SettingsBasis>>;

    /// Replaces an install's input values (plain and sealed).
    async fn set_install_inputs(
        &self,
        org: &OrgId,
        id: &InstallId,
        inputs_json: &str,
        sealed_json: &str,
    ) -> Result<Option<Install>>;

    /// Sets an install's state (`provisioning`, `active`, `failed`, ...).
    async fn set_install_state(
        &self,
        org: &OrgId,
        id: &InstallId,
        state: InstallState,
    ) -> Result<()>;

    /// Renames an install and sets its approval mode, each when given, in
    /// one step: the install as it is after, or `None` when it is not
    /// there. A name another install of the org has is
    /// [`StoreError::Conflict`].
    async fn update_install(
        &self,
        org: &OrgId,
        id: &InstallId,
        change: &InstallChange,
    ) -> Result<Option<Install>>;

    /// Turns a component on (`Some(true)`) or off for an install, or
    /// back to its `default_enabled` (`None`).
    async fn set_install_toggle(
        &self,
        org: &OrgId,
        id: &InstallId,
        component: &str,
        enabled: Option<bool>,
    ) -> Result<()>;

    /// Sets an install's own values for a component (`Some`), or clears
    /// them (`None`).
    async fn set_install_override(
        &self,
        org: &OrgId,
        id: &InstallId,
        component: &str,
        values: Option<&nuon_core::wire::ComponentOverride>,
    ) -> Result<()>;

    /// Points an install at another config version.
    async fn set_install_config(&self, org: &OrgId, id: &InstallId, version: u32) -> Result<()>;

    /// Every install of every org that is provisioned (not `created`,
    /// `deprovisioning` or `deprovisioned`): where cron actions run. Each
    /// with its app and config version, so that the installs of a config
    /// with nothing scheduled are passed over without reading them.
    async fn scheduled_installs(&self) -> Result<Vec<Scheduled>>;

    /// The install whose runner this is, if any.
    async fn install_of_runner(&self, runner: &RunnerId) -> Result<Option<(OrgId, InstallId)>>;
}

/// A provisioned install, as cron looks at it first
/// ([`InstallStore::scheduled_installs`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scheduled {
    /// Its org.
    pub org: OrgId,
    /// The install.
    pub id: InstallId,
    /// Its app.
    pub app_id: nuon_core::AppId,
    /// The config version it runs.
    pub config_version: u32,
}

impl Record for Scheduled {
    const COLUMNS: &'static str = "org_id, id, app_id, config_version";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(Scheduled {
            org: r.id(0)?,
            id: r.id(1)?,
            app_id: r.id(2)?,
            config_version: r.int(3)? as u32,
        })
    }
}

/// What an install runs against what it desires: the values it changed
/// and did not deploy, and the release it runs.
#[async_trait]
pub trait DeployedStore: Send + Sync + 'static {
    /// Sets (`Some`) or clears what an install has changed and not
    /// deployed, over revision `rev` of it: `false` (nothing written)
    /// when it changed since.
    async fn set_install_pending(
        &self,
        org: &OrgId,
        id: &InstallId,
        pending: Option<&nuon_core::model::Unapplied>,
        rev: i64,
    ) -> Result<bool>;
}

/// The checks the vendor's own systems push for an install.
#[async_trait]
pub trait CheckStore: Send + Sync + 'static {
    /// Records a check as just reported (replacing the one before of its
    /// name).
    async fn set_install_check(
        &self,
        org: &OrgId,
        id: &InstallId,
        check: &nuon_core::model::InstallCheck,
    ) -> Result<()>;
}

/// The installs' store, written once for both databases.
#[async_trait]
impl<S: Sql + 'static> InstallStore for S {
    async fn create_install(&self, org: &OrgId, new: NewInstall) -> Result<Install> {
        let now = now_ms();
        self.execute(vec![
            Stmt::new(
                "INSERT INTO runners (id, org_id, name, token_hash, created_at, role) \
                 VALUES ($1, $2, $3, $4, $5, 'install')",
                args![
                    new.runner_id.as_str(),
                    org.as_str(),
                    new.runner_name.as_str(),
                    new.runner_token_hash.as_str(),
                    now,
                ],
            )
            .taken(format!(
                "a runner named {:?} already exists in this org; pick another name",
                new.runner_name
            )),
            Stmt::new(
                "INSERT INTO installs (id, org_id, app_id, name, config_version, runner_id, state, \
                 inputs, sealed, created_at, approval, labels, toggles, overrides) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
                args![
                    new.id.as_str(),
                    org.as_str(),
                    new.app_id.as_str(),
                    new.name.as_str(),
                    new.config_version,
                    new.runner_id.as_str(),
                    InstallState::Created.as_str(),
                    new.inputs_json.as_str(),
                    new.sealed_json.as_str(),
                    now,
                    new.approval.as_str(),
                    serde_json::to_string(&new.labels).unwrap_or_else(|_| "{}".into()),
                    toggles_json(&new.toggles),
                    toggles_json(&new.overrides),
                ],
            )
            .taken(format!(
                "an install named {:?} already exists in this org; pick another name",
                new.name
            )),
        ])
        .await?;
        Ok(Install {
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
            pending: None,
            pending_rev: 0,
        })
    }

    async fn list_installs(&self, org: &OrgId) -> Result<Vec<Install>> {
        self.query(Stmt::new(
            S::DIALECT.list_in_org::<Install>(),
            args![org.as_str()],
        ))
        .await
    }

    async fn find_install(&self, org: &OrgId, name_or_id: &str) -> Result<Option<Install>> {
        self.query_one(Stmt::new(
            S::DIALECT.find_in_org::<Install>(),
            args![org.as_str(), name_or_id],
        ))
        .await
    }

    async fn find_installs(&self, org: &OrgId, ids: &[InstallId]) -> Result<Vec<Install>> {
        let sql = format!(
            "SELECT {} FROM installs WHERE org_id = $1 AND id IN (IDS)",
            Install::COLUMNS
        );
        let ids: Vec<&str> = ids.iter().map(|i| i.as_str()).collect();
        let mut out = Vec::with_capacity(ids.len());
        if let Some(stmt) = in_list(S::DIALECT, &[org.as_str()], &ids, &sql) {
            out.extend(self.query::<Install>(stmt).await?);
        }
        Ok(out)
    }

    async fn find_install_of_runner(
        &self,
        org: &OrgId,
        runner: &RunnerId,
    ) -> Result<Option<Install>> {
        let sql = format!(
            "SELECT {} FROM installs WHERE org_id = $1 AND runner_id = $2",
            Install::COLUMNS
        );
        self.query_one(Stmt::new(sql, args![org.as_str(), runner.as_str()]))
            .await
    }

    async fn settings_basis_of_runner(
        &self,
        org: &OrgId,
        runner: &RunnerId,
    ) -> Result<Option<SettingsBasis>> {
        let sql = format!(
            "SELECT {} FROM installs i LEFT JOIN install_runner_releases r \
               ON r.org_id = i.org_id AND r.install_id = i.id \
             WHERE i.org_id = $1 AND i.runner_id = $2",
            SettingsBasis::COLUMNS
        );
        self.query_one(Stmt::new(sql, args![org.as_str(), runner.as_str()]))
            .await
    }

    async fn set_install_inputs(
        &self,
        org: &OrgId,
        id: &InstallId,
        inputs_json: &str,
        sealed_json: &str,
    ) -> Result<Option<Install>> {
        let sql = format!(
            "UPDATE installs SET inputs = $3, sealed = $4 WHERE org_id = $1 AND id = $2 \
             RETURNING {}",
            Install::COLUMNS
        );
        let stmt = Stmt::new(
            sql,
            args![org.as_str(), id.as_str(), inputs_json, sealed_json],
        );
        Ok(self.write_query(stmt).await?.pop())
    }

    async fn set_install_state(
        &self,
        org: &OrgId,
        id: &InstallId,
        state: InstallState,
    ) -> Result<()> {
        self.execute_one(Stmt::new(
            "UPDATE installs SET state = $3 WHERE id = $1 AND org_id = $2",
            args![id.as_str(), org.as_str(), state.as_str()],
        ))
        .await
        .map(drop)
    }

    async fn update_install(
        &self,
        org: &OrgId,
        id: &InstallId,
        change: &InstallChange,
    ) -> Result<Option<Install>> {
        let sql = format!(
            "UPDATE installs SET name = COALESCE($3, name), approval = COALESCE($4, approval) \
             WHERE id = $1 AND org_id = $2 RETURNING {}",
            Install::COLUMNS
        );
        let stmt = Stmt::new(
            sql,
            args![
                id.as_str(),
                org.as_str(),
                change.name.as_deref(),
                change.approval.map(ApprovalMode::as_str),
            ],
        )
        .taken(format!(
            "an install named {:?} already exists in this org; pick another name",
            change.name.as_deref().unwrap_or("")
        ));
        Ok(self.write_query(stmt).await?.pop())
    }

    async fn set_install_toggle(
        &self,
        org: &OrgId,
        id: &InstallId,
        component: &str,
        enabled: Option<bool>,
    ) -> Result<()> {
        let value = enabled.map(|on| on.to_string());
        set_install_key(self, Keyed::Toggles, org, id, component, value).await
    }

    async fn set_install_override(
        &self,
        org: &OrgId,
        id: &InstallId,
        component: &str,
        values: Option<&nuon_core::wire::ComponentOverride>,
    ) -> Result<()> {
        let value = values.map(|v| serde_json::to_string(v).unwrap_or_else(|_| "{}".into()));
        set_install_key(self, Keyed::Overrides, org, id, component, value).await
    }

    async fn set_install_config(&self, org: &OrgId, id: &InstallId, version: u32) -> Result<()> {
        self.execute_one(Stmt::new(
            "UPDATE installs SET config_version = $3 WHERE id = $1 AND org_id = $2",
            args![id.as_str(), org.as_str(), version],
        ))
        .await
        .map(drop)
    }

    async fn scheduled_installs(&self) -> Result<Vec<Scheduled>> {
        self.query(Stmt::new(
            format!(
                "SELECT {} FROM installs \
                 WHERE state NOT IN ('created', 'deprovisioning', 'deprovisioned') \
                 ORDER BY created_at, id",
                Scheduled::COLUMNS
            ),
            Vec::new(),
        ))
        .await
    }

    async fn install_of_runner(&self, runner: &RunnerId) -> Result<Option<(OrgId, InstallId)>> {
        let row: Option<IdPair<OrgId, InstallId>> = self
            .query_one(Stmt::new(
                "SELECT org_id, id FROM installs WHERE runner_id = $1",
                args![runner.as_str()],
            ))
            .await?;
        Ok(row.map(|IdPair(o, i)| (o, i)))
    }
}

#[async_trait]
impl<S: Sql + 'static> DeployedStore for S {
    async fn set_install_pending(
        &self,
        org: &OrgId,
        id: &InstallId,
        pending: Option<&nuon_core::model::Unapplied>,
        rev: i64,
    ) -> Result<bool> {
        let json = pending
            .map(serde_json::to_string)
            .transpose()
            .map_err(|e| StoreError::Invalid(format!("cannot encode pending values: {e}")))?;
        let n = self
            .execute_one(Stmt::new(
                "UPDATE installs SET pending = $3, pending_rev = pending_rev + 1 \
                 WHERE id = $1 AND org_id = $2 AND pending_rev = $4",
                args![id.as_str(), org.as_str(), json, rev],
            ))
            .await?;
        Ok(n == 1)
    }
}

#[async_trait]
impl<S: Sql + 'static> CheckStore for S {
    async fn set_install_check(
        &self,
        org: &OrgId,
        id: &InstallId,
        check: &nuon_core::model::InstallCheck,
    ) -> Result<()> {
        let value = serde_json::to_string(check).unwrap_or_else(|_| "{}".into());
        set_install_key(self, Keyed::Checks, org, id, &check.name, Some(value)).await
    }
}

/// Sets (`Some`, JSON) or removes one key of an install's keyed column.
async fn set_install_key<S: Sql>(
    db: &S,
    column: Keyed,
    org: &OrgId,
    id: &InstallId,
    key: &str,
    value: Option<String>,
) -> Result<()> {
    let (sql, key) = S::DIALECT.set_json_key(column.name(), key, value.is_some());
    let mut args = args![id.as_str(), org.as_str(), key];
    args.extend(value.map(Arg::from));
    if db.execute_one(Stmt::new(sql, args)).await? == 0 {
        return Err(StoreError::Invalid(format!("no install {id}")));
    }
    Ok(())
}

/// What a runner's settings' version is made of: its install's values and
/// the runner release it is asked for (with the ask's number). The version
/// changes when any of them does.
#[derive(Debug, Clone, PartialEq)]
pub struct SettingsBasis {
    /// The install's config version.
    pub config_version: u32,
    /// Its input values, as stored.
    pub inputs_json: String,
    /// Its sealed input values, as stored.
    pub sealed_json: String,
    /// Its outputs, as stored.
    pub outputs_json: Option<String>,
    /// Its stack's outputs, as stored.
    pub stack_outputs: Option<String>,
    /// Its toggles.
    pub toggles: std::collections::BTreeMap<String, bool>,
    /// The runner release its runner is asked for, with the ask's number.
    pub asked: Option<(ReleaseId, u32)>,
}

impl SettingsBasis {
    /// The basis of an install read whole, and the release asked of it.
    pub fn of(install: &Install, asked: Option<(ReleaseId, u32)>) -> Self {
        SettingsBasis {
            config_version: install.config_version,
            inputs_json: install.inputs_json.clone(),
            sealed_json: install.sealed_json.clone(),
            outputs_json: install.outputs_json.clone(),
            stack_outputs: install.stack_outputs.clone(),
            toggles: install.toggles.clone(),
            asked,
        }
    }

    /// The settings' version: a hash of every part, each with its length.
    pub fn version(&self) -> String {
        let asked = (self.asked.as_ref()).map(|(r, tries)| format!("{r}#{tries}"));
        let mut all = String::new();
        for part in [
            self.config_version.to_string().as_str(),
            &self.inputs_json,
            &self.sealed_json,
            self.outputs_json.as_deref().unwrap_or(""),
            self.stack_outputs.as_deref().unwrap_or(""),
            asked.as_deref().unwrap_or(""),
            &serde_json::to_string(&self.toggles).unwrap_or_default(),
        ] {
            all.push_str(&format!("{}:{part};", part.len()));
        }
        nuon_core::token::hash_token(&all)[..16].to_owned()
    }
}

impl Record for SettingsBasis {
    const COLUMNS: &'static str = "i.config_version, i.inputs, i.sealed, i.outputs, \
         i.stack_outputs, i.toggles, r.release_id, r.tries";
    fn read(r: &impl super::rows::Cells) -> Result<Self> {
        let release: Option<String> = r.opt_text(6)?;
        let asked = match release {
            Some(id) => Some((id.parse().map_err(shared::corrupt)?, r.u32(7)?)),
            None => None,
        };
        Ok(SettingsBasis {
            config_version: r.u32(0)?,
            inputs_json: r.text(1)?,
            sealed_json: r.text(2)?,
            outputs_json: r.opt_text(3)?,
            stack_outputs: r.opt_text(4)?,
            toggles: super::rows::json_list(r.opt_text(5)?)?,
            asked,
        })
    }
}
