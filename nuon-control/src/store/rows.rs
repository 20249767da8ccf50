//! Rows as both stores read them: each row type's columns and its mapping
//! are written once here, over [`Cells`], which each database's row type
//! implements. The org-scoped list, find-by-name-or-id and revoke queries
//! are written once too, in each dialect's placeholders.

use nuon_core::model::{Install, QueuedJob, Step};
use nuon_core::wire::{AppInfo, BuildInfo, Role, RunnerInfo, TokenInfo, UserInfo};

use super::shared::{self, JobRow, corrupt, enum_from, json_or_null, parse_id, role_of, scope_of};
use super::{ApiPrincipal, PrincipalUser, Result, StateLock, StatePrincipal, StoredConfig};

/// The cells of one result row, by column index, as either database gives
/// them. Integers are read whatever their width; a flag is SQLite's
/// `INTEGER` 0/1 or PostgreSQL's `BOOLEAN`.
pub(super) trait Cells {
    /// A text column that may be `NULL`.
    fn opt_text(&self, i: usize) -> Result<Option<String>>;
    /// An integer column that may be `NULL`.
    fn opt_int(&self, i: usize) -> Result<Option<i64>>;
    /// A true/false column.
    fn flag(&self, i: usize) -> Result<bool>;
    /// A byte column (`BLOB`, `BYTEA`) that is never `NULL`.
    fn bytes(&self, i: usize) -> Result<Vec<u8>>;

    /// A text column that is never `NULL`.
    fn text(&self, i: usize) -> Result<String> {
        self.opt_text(i)?.ok_or_else(|| null(i))
    }
    /// An integer column that is never `NULL`.
    fn int(&self, i: usize) -> Result<i64> {
        self.opt_int(i)?.ok_or_else(|| null(i))
    }
    /// An integer column that holds a `u32`.
    fn u32(&self, i: usize) -> Result<u32> {
        narrow(i, self.int(i)?)
    }
    /// An integer column that holds a `u32`, or `NULL`.
    fn opt_u32(&self, i: usize) -> Result<Option<u32>> {
        self.opt_int(i)?.map(|v| narrow(i, v)).transpose()
    }
    /// An id column, parsed.
    fn id<T: std::str::FromStr<Err = nuon_core::IdError>>(&self, i: usize) -> Result<T>
    where
        Self: Sized,
    {
        parse_id(&self.text(i)?)
    }
}

fn null(i: usize) -> super::StoreError {
    corrupt(format!("column {i} is NULL"))
}

fn narrow(i: usize, v: i64) -> Result<u32> {
    u32::try_from(v).map_err(|_| corrupt(format!("column {i}: {v} is out of range")))
}

/// The cells of a row from column `at` on: a row type read after others in
/// a joined row.
pub(super) struct Offset<'a, C>(pub &'a C, pub usize);

impl<C: Cells> Cells for Offset<'_, C> {
    fn opt_text(&self, i: usize) -> Result<Option<String>> {
        self.0.opt_text(self.1 + i)
    }
    fn opt_int(&self, i: usize) -> Result<Option<i64>> {
        self.0.opt_int(self.1 + i)
    }
    fn flag(&self, i: usize) -> Result<bool> {
        self.0.flag(self.1 + i)
    }
    fn bytes(&self, i: usize) -> Result<Vec<u8>> {
        self.0.bytes(self.1 + i)
    }
}

/// A row type: its columns, and how it is made from them.
pub(super) trait Record: Sized {
    /// The columns, in the order [`Record::read`] takes them.
    const COLUMNS: &'static str;
    /// The row type from the cells of one row.
    fn read(r: &impl Cells) -> Result<Self>;
}

/// A row type kept per org, with a name: listed, found by name or id, and
/// (with [`Revocable`]) revoked by the same queries in both stores.
pub(super) trait OrgScoped: Record {
    /// The table, with the alias [`Record::COLUMNS`] uses, if any.
    const TABLE: &'static str;
    /// The alias with its dot (`a.`), or nothing.
    const ALIAS: &'static str = "";
    /// What picks one row when a name matches several (revoked ones).
    const FIND_ORDER: &'static str = "";
}

/// An [`OrgScoped`] row type with a `revoked_at` column.
pub(super) trait Revocable: OrgScoped {}

/// How a database spells the `n`th parameter of a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Dialect {
    /// `?1`
    Sqlite,
    /// `$1`
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Postgres,
}

impl Dialect {
    pub(super) fn p(self, n: u8) -> String {
        match self {
            Dialect::Sqlite => format!("?{n}"),
            Dialect::Postgres => format!("${n}"),
        }
    }

    /// The org's rows, oldest first; parameter 1 is the org.
    pub(super) fn list_in_org<T: OrgScoped>(self) -> String {
        let (a, org) = (T::ALIAS, self.p(1));
        format!(
            "SELECT {} FROM {} WHERE {a}org_id = {org} ORDER BY {a}created_at, {a}id",
            T::COLUMNS,
            T::TABLE
        )
    }

    /// The org's row of a name or id; parameters: the org, the name or id.
    pub(super) fn find_in_org<T: OrgScoped>(self) -> String {
        let (a, org, key) = (T::ALIAS, self.p(1), self.p(2));
        format!(
            "SELECT {} FROM {} WHERE {a}org_id = {org} AND ({a}id = {key} OR {a}name = {key}){}",
            T::COLUMNS,
            T::TABLE,
            T::FIND_ORDER
        )
    }

    /// An API token's principal by the hash of its secret; parameter 1 is
    /// the hash.
    pub(super) fn authenticate_api(self) -> String {
        format!(
            "SELECT {} FROM api_tokens t LEFT JOIN users u ON u.id = t.user_id \
             WHERE t.token_hash = {} AND t.revoked_at IS NULL",
            TokenCheck::COLUMNS,
            self.p(1)
        )
    }

    /// The org's person of an id or email address; parameters: the org,
    /// the id or address.
    pub(super) fn find_user(self) -> String {
        let (org, key) = (self.p(1), self.p(2));
        format!(
            "SELECT {} FROM users WHERE org_id = {org} AND (id = {key} OR email = {key})",
            UserInfo::COLUMNS
        )
    }

    /// The org's row of an id; parameters: the org, the id.
    pub(super) fn get_in_org<T: OrgScoped>(self) -> String {
        let (a, org, key) = (T::ALIAS, self.p(1), self.p(2));
        format!(
            "SELECT {} FROM {} WHERE {a}org_id = {org} AND {a}id = {key}",
            T::COLUMNS,
            T::TABLE
        )
    }

    /// Sets (`Some`) or removes the key of a JSON object in column `c`
    /// (NULL counting as `{}`) of the org's install; parameters: the
    /// install, the org, the key as this gives it, and with a value, its
    /// JSON. `c` is a column's name, never input.
    pub(super) fn set_json_key(self, c: &str, key: &str, set: bool) -> (String, String) {
        match (self, set) {
            (Dialect::Sqlite, true) => (
                format!(
                    "UPDATE installs SET {c} = json_set(COALESCE({c}, '{{}}'), $3, json($4)) \
                     WHERE id = $1 AND org_id = $2"
                ),
                format!("$.{}", serde_json::Value::String(key.to_owned())),
            ),
            (Dialect::Sqlite, false) => (
                format!(
                    "UPDATE installs SET {c} = json_remove(COALESCE({c}, '{{}}'), $3) \
                     WHERE id = $1 AND org_id = $2"
                ),
                format!("$.{}", serde_json::Value::String(key.to_owned())),
            ),
            (Dialect::Postgres, true) => (
                format!(
                    "UPDATE installs SET {c} = (COALESCE({c}, '{{}}')::jsonb \
                     || jsonb_build_object($3::text, $4::jsonb))::text \
                     WHERE id = $1 AND org_id = $2"
                ),
                key.to_owned(),
            ),
            (Dialect::Postgres, false) => (
                format!(
                    "UPDATE installs SET {c} = (COALESCE({c}, '{{}}')::jsonb - $3::text)::text \
                     WHERE id = $1 AND org_id = $2"
                ),
                key.to_owned(),
            ),
        }
    }

    /// Revokes the org's row of an id, once (a second revoke keeps the
    /// first time); parameters: the org, the id, the time.
    pub(super) fn revoke_in_org<T: Revocable>(self) -> String {
        let (org, id, now) = (self.p(1), self.p(2), self.p(3));
        format!(
            "UPDATE {} SET revoked_at = {now} WHERE org_id = {org} AND id = {id} AND revoked_at IS NULL",
            T::TABLE
        )
    }

    /// The texts of the parameter `p` (`$2`), a JSON array of strings, as
    /// a one-column subquery: `id IN ({})`.
    pub(super) fn json_texts(self, p: &str) -> String {
        match self {
            Dialect::Sqlite => format!("SELECT value FROM json_each({p})"),
            Dialect::Postgres => format!("SELECT jsonb_array_elements_text({p}::jsonb)"),
        }
    }

    /// The bytes column `c` (`BLOB`, `BYTEA`) holding UTF-8 text, read as
    /// text. `c` is a column's name, never input.
    pub(super) fn bytes_as_text(self, c: &str) -> String {
        match self {
            Dialect::Sqlite => format!("CAST({c} AS TEXT)"),
            Dialect::Postgres => format!("convert_from({c}, 'UTF8')"),
        }
    }

    /// The text parameter `p` (`$2`) as the bytes of its UTF-8, for a
    /// bytes column.
    pub(super) fn text_as_bytes(self, p: &str) -> String {
        match self {
            Dialect::Sqlite => format!("CAST({p} AS BLOB)"),
            Dialect::Postgres => format!("convert_to({p}, 'UTF8')"),
        }
    }

    /// The table of the jobs' log chunks (SQLite keeps them in a database
    /// file of their own, attached as `logs`).
    pub(super) fn log_records(self) -> &'static str {
        match self {
            Dialect::Sqlite => "logs.records",
            Dialect::Postgres => "log_records",
        }
    }

    /// A log chunk's body as bytes (SQLite keeps it as text, PostgreSQL
    /// as `bytea`).
    pub(super) fn log_body(self) -> &'static str {
        match self {
            Dialect::Sqlite => "CAST(body AS BLOB)",
            Dialect::Postgres => "body",
        }
    }

    /// The text expression `e` compared and ordered byte by byte (SQLite's
    /// own way; PostgreSQL's `C` collation), whatever the database's
    /// collation. `e` is built from column names, never input.
    pub(super) fn bytewise(self, e: &str) -> String {
        match self {
            Dialect::Sqlite => e.to_owned(),
            Dialect::Postgres => format!("({e}) COLLATE \"C\""),
        }
    }
}

impl Record for TokenInfo {
    const COLUMNS: &'static str = "id, name, scope, created_at, revoked_at, user_id, \
         (SELECT email FROM users WHERE users.id = api_tokens.user_id), expires_at";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(TokenInfo {
            id: r.id(0)?,
            name: r.text(1)?,
            scope: scope_of(&r.text(2)?),
            created_at_ms: r.int(3)?,
            revoked: r.opt_int(4)?.is_some(),
            user_id: r.opt_text(5)?.map(|u| parse_id(&u)).transpose()?,
            user: r.opt_text(6)?,
            expires_at_ms: r.opt_int(7)?,
        })
    }
}

impl Record for UserInfo {
    const COLUMNS: &'static str =
        "id, email, role, status, name, invited_by, created_at, last_sign_in_at";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(UserInfo {
            id: r.id(0)?,
            email: r.text(1)?,
            role: r.text(2)?.parse().map_err(corrupt)?,
            status: enum_from(&r.text(3)?)?,
            name: r.opt_text(4)?,
            invited_by: r.text(5)?,
            created_at_ms: r.int(6)?,
            last_sign_in_at_ms: r.opt_int(7)?,
        })
    }
}

impl OrgScoped for UserInfo {
    const TABLE: &'static str = "users";
}

/// An API token's check ([`Dialect::authenticate_api`]): its principal,
/// or `None` when it expired or its person was removed.
pub(super) struct TokenCheck(pub(super) Option<ApiPrincipal>);

impl Record for TokenCheck {
    const COLUMNS: &'static str =
        "t.org_id, t.id, t.scope, t.expires_at, t.user_id, u.email, u.role";
    fn read(r: &impl Cells) -> Result<Self> {
        if r.opt_int(3)?.is_some_and(|at| at <= nuon_core::now_ms()) {
            return Ok(TokenCheck(None));
        }
        let mut scope = scope_of(&r.text(2)?);
        let user = match r.opt_text(4)? {
            None => None,
            Some(id) => {
                let (Some(email), Some(role)) = (r.opt_text(5)?, r.opt_text(6)?) else {
                    return Ok(TokenCheck(None));
                };
                let role: Role = role.parse().map_err(corrupt)?;
                scope = scope.at_most(role.scope());
                Some(PrincipalUser {
                    id: parse_id(&id)?,
                    email,
                    role,
                })
            }
        };
        Ok(TokenCheck(Some(ApiPrincipal {
            org_id: r.id(0)?,
            token_id: r.id(1)?,
            scope: scope.as_str().to_owned(),
            user,
            customer: None,
        })))
    }
}

impl OrgScoped for TokenInfo {
    const TABLE: &'static str = "api_tokens";
}

impl Revocable for TokenInfo {}

impl Record for RunnerInfo {
    const COLUMNS: &'static str = "id, name, created_at, last_seen_at, revoked_at, role, session, \
         health, health_since, telemetry";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(RunnerInfo {
            id: r.id(0)?,
            name: r.text(1)?,
            created_at_ms: r.int(2)?,
            last_seen_at_ms: r.opt_int(3)?,
            revoked: r.opt_int(4)?.is_some(),
            role: role_of(&r.text(5)?),
            session: r.opt_text(6)?.and_then(|s| serde_json::from_str(&s).ok()),
            status: Default::default(),
            health: r
                .opt_text(7)?
                .and_then(|h| h.parse().ok())
                .unwrap_or_default(),
            health_since_ms: r.opt_int(8)?,
            telemetry: r.opt_text(9)?.and_then(|t| serde_json::from_str(&t).ok()),
            install: None,
        })
    }
}

impl OrgScoped for RunnerInfo {
    const TABLE: &'static str = "runners";
    const FIND_ORDER: &'static str = " ORDER BY revoked_at IS NOT NULL LIMIT 1";
}

impl Revocable for RunnerInfo {}

impl Record for nuon_core::audit::AuditEntry {
    const COLUMNS: &'static str =
        "n, at, actor, action, target, source, outcome, detail, prev, hash";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(nuon_core::audit::AuditEntry {
            n: u64::try_from(r.int(0)?).map_err(corrupt)?,
            at_ms: r.int(1)?,
            actor: r.text(2)?,
            action: r.text(3)?,
            target: r.text(4)?,
            source: r.text(5)?,
            outcome: r.text(6)?,
            detail: r.text(7)?,
            prev: r.text(8)?,
            hash: r.text(9)?,
        })
    }
}

impl Record for nuon_core::wire::WebhookInfo {
    const COLUMNS: &'static str = "id, url, events, created_at";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(nuon_core::wire::WebhookInfo {
            id: r.id(0)?,
            url: r.text(1)?,
            events: shared::events_of(&r.text(2)?)?,
            created_at_ms: r.int(3)?,
        })
    }
}

/// A webhook delivery with the body it posts.
pub(super) struct DeliveryRow {
    pub(super) info: nuon_core::wire::DeliveryInfo,
    pub(super) body: String,
}

impl Record for DeliveryRow {
    const COLUMNS: &'static str = "d.id, d.webhook_id, d.event, d.status, d.attempts, d.created_at, \
         d.delivered_at, d.next_at, d.last_error, d.body";
    fn read(r: &impl Cells) -> Result<Self> {
        let body = r.text(9)?;
        Ok(DeliveryRow {
            info: nuon_core::wire::DeliveryInfo {
                id: r.id(0)?,
                webhook_id: r.id(1)?,
                event: r.text(2)?.parse().map_err(corrupt)?,
                status: r.text(3)?.parse().map_err(corrupt)?,
                attempts: r.u32(4)?,
                created_at_ms: r.int(5)?,
                delivered_at_ms: r.opt_int(6)?,
                next_attempt_at_ms: r.opt_int(7)?,
                last_error: r.opt_text(8)?,
                payload: serde_json::from_str(&body).unwrap_or(serde_json::Value::Null),
            },
            body,
        })
    }
}

impl Record for AppInfo {
    const COLUMNS: &'static str = "a.id, a.name, a.created_at, \
         (SELECT MAX(version) FROM app_configs c WHERE c.app_id = a.id)";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(AppInfo {
            id: r.id(0)?,
            name: r.text(1)?,
            created_at_ms: r.int(2)?,
            latest_config: r.opt_u32(3)?,
        })
    }
}

impl OrgScoped for AppInfo {
    const TABLE: &'static str = "apps a";
    const ALIAS: &'static str = "a.";
}

/// A JSON column holding a list (or a map), empty when `NULL`.
pub(super) fn json_list<T: serde::de::DeserializeOwned + Default>(
    raw: Option<String>,
) -> Result<T> {
    match raw {
        Some(t) => serde_json::from_str(&t).map_err(corrupt),
        None => Ok(T::default()),
    }
}

impl Record for Install {
    const COLUMNS: &'static str = "id, name, app_id, config_version, runner_id, state, inputs, \
         sealed, outputs, created_at, approval, toggles, stack_outputs, labels, overrides, checks, \
         pending, pending_rev";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(Install {
            id: r.id(0)?,
            name: r.text(1)?,
            app_id: r.id(2)?,
            config_version: r.u32(3)?,
            runner_id: r.id(4)?,
            state: r.text(5)?.parse().map_err(corrupt)?,
            inputs_json: r.text(6)?,
            sealed_json: r.text(7)?,
            outputs_json: r.opt_text(8)?,
            created_at_ms: r.int(9)?,
            approval: r.text(10)?.parse().map_err(corrupt)?,
            toggles: json_list(r.opt_text(11)?)?,
            stack_outputs: r.opt_text(12)?,
            labels: json_list(r.opt_text(13)?)?,
            overrides: json_list(r.opt_text(14)?)?,
            checks: json_list(r.opt_text(15)?)?,
            pending: r
                .opt_text(16)?
                .map(|p| serde_json::from_str(&p))
                .transpose()
                .map_err(corrupt)?,
            pending_rev: r.int(17)?,
        })
    }
}

impl OrgScoped for Install {
    const TABLE: &'static str = "installs";
}

impl Record for BuildInfo {
    const COLUMNS: &'static str = "b.job_id, b.app_id, b.config_version, b.component, j.status, \
         j.outputs, j.reason, b.created_at";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(BuildInfo {
            id: r.id(0)?,
            app_id: r.id(1)?,
            config_version: r.u32(2)?,
            component: r.text(3)?,
            status: r.text(4)?.parse().map_err(corrupt)?,
            artifact: shared::build_artifact(r.opt_text(5)?),
            reason: r.opt_text(6)?,
            created_at_ms: r.int(7)?,
        })
    }
}

impl Record for nuon_core::wire::ReleaseInfo {
    const COLUMNS: &'static str = "id, app_id, config_version, builds, created_at";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(nuon_core::wire::ReleaseInfo {
            id: r.id(0)?,
            app_id: r.id(1)?,
            app_name: None,
            config_version: r.u32(2)?,
            builds: serde_json::from_str(&r.text(3)?).map_err(corrupt)?,
            created_at_ms: r.int(4)?,
        })
    }
}

impl Record for QueuedJob {
    const COLUMNS: &'static str = "id, runner_id, kind, payload, status, attempts, max_attempts, \
         timeout_secs, cancel_requested, exit_code, reason, outputs, created_at, started_at, \
         finished_at";
    fn read(r: &impl Cells) -> Result<Self> {
        JobRow {
            id: r.text(0)?,
            runner_id: r.text(1)?,
            kind: r.text(2)?,
            payload: r.opt_text(3)?,
            status: r.text(4)?,
            attempts: r.u32(5)?,
            max_attempts: r.u32(6)?,
            timeout_secs: r.int(7)?,
            cancel_requested: r.flag(8)?,
            exit_code: r
                .opt_int(9)?
                .map(|c| i32::try_from(c).map_err(|_| corrupt(format!("exit code {c}"))))
                .transpose()?,
            reason: r.opt_text(10)?,
            outputs: r.opt_text(11)?,
            created_at: r.int(12)?,
            started_at: r.opt_int(13)?,
            finished_at: r.opt_int(14)?,
        }
        .into_info()
    }
}

impl Record for StateLock {
    const COLUMNS: &'static str = "lock_id, info, created_at, job_id";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(StateLock {
            id: r.text(0)?,
            info: r.text(1)?,
            created_at_ms: r.int(2)?,
            job_id: r.opt_text(3)?.and_then(|j| j.parse().ok()),
        })
    }
}

/// A lock with the component it locks.
pub(super) struct HeldLock(pub String, pub StateLock);

impl Record for HeldLock {
    const COLUMNS: &'static str = "component, lock_id, info, created_at, job_id";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(HeldLock(r.text(0)?, StateLock::read(&Offset(r, 1))?))
    }
}

impl Record for StatePrincipal {
    const COLUMNS: &'static str = "j.org_id, t.install_id, t.component, t.job_id";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(StatePrincipal {
            org_id: r.id(0)?,
            install_id: r.id(1)?,
            component: r.text(2)?,
            job_id: r.id(3)?,
        })
    }
}

impl Record for StoredConfig {
    const COLUMNS: &'static str = "c.version, c.created_at, c.components, c.files, c.config, \
         c.warnings, c.sources";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(StoredConfig {
            version: r.u32(0)?,
            created_at_ms: r.int(1)?,
            components: r.u32(2)?,
            files_json: r.text(3)?,
            config_json: r.text(4)?,
            warnings_json: r.text(5)?,
            sources_json: r.text(6)?,
        })
    }
}

/// A config version without its files and config, for lists.
pub(super) struct ConfigSummary(pub StoredConfig);

impl Record for ConfigSummary {
    const COLUMNS: &'static str = "c.version, c.created_at, c.components";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(ConfigSummary(StoredConfig {
            version: r.u32(0)?,
            created_at_ms: r.int(1)?,
            components: r.u32(2)?,
            files_json: String::new(),
            config_json: String::new(),
            warnings_json: String::new(),
            sources_json: String::new(),
        }))
    }
}

impl Record for Step {
    const COLUMNS: &'static str = "idx, name, kind, target, needs_approval, status, job_id, approved_at, reason, outputs, \
         attempts, approved_by";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(Step {
            index: r.u32(0)?,
            name: r.text(1)?,
            kind: enum_from(&r.text(2)?)?,
            target: r.opt_text(3)?,
            needs_approval: r.flag(4)?,
            status: r.text(5)?.parse().map_err(corrupt)?,
            job_id: r.opt_text(6)?.as_deref().map(parse_id).transpose()?,
            approved_at_ms: r.opt_int(7)?,
            reason: r.opt_text(8)?,
            outputs: json_or_null(r.opt_text(9)?),
            attempts: json_list(r.opt_text(10)?)?,
            approved_by: r.opt_text(11)?,
        })
    }
}

/// A workflow without its steps (read from `workflows`).
pub(super) struct WorkflowHead {
    pub install_id: nuon_core::InstallId,
    pub kind: nuon_core::workflow::WorkflowKind,
    pub status: nuon_core::workflow::WorkflowStatus,
    pub config_version: u32,
    pub created_at_ms: i64,
    pub finished_at_ms: Option<i64>,
    pub component: Option<String>,
    pub inputs: std::collections::BTreeMap<String, String>,
    pub trigger: Option<String>,
    pub release_id: Option<nuon_core::ReleaseId>,
}

impl Record for WorkflowHead {
    const COLUMNS: &'static str = "install_id, kind, status, config_version, created_at, finished_at, \
         component, inputs, trigger, release_id";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(WorkflowHead {
            install_id: r.id(0)?,
            kind: enum_from(&r.text(1)?)?,
            status: r.text(2)?.parse().map_err(corrupt)?,
            config_version: r.u32(3)?,
            created_at_ms: r.int(4)?,
            finished_at_ms: r.opt_int(5)?,
            component: r.opt_text(6)?,
            inputs: json_list(r.opt_text(7)?)?,
            trigger: r.opt_text(8)?,
            release_id: r.opt_text(9)?.as_deref().map(parse_id).transpose()?,
        })
    }
}

impl WorkflowHead {
    /// The workflow with its steps.
    pub(super) fn with_steps(
        self,
        id: nuon_core::WorkflowId,
        steps: Vec<Step>,
    ) -> nuon_core::model::Workflow {
        nuon_core::model::Workflow {
            id,
            install_id: self.install_id,
            kind: self.kind,
            status: self.status,
            component: self.component,
            config_version: self.config_version,
            created_at_ms: self.created_at_ms,
            finished_at_ms: self.finished_at_ms,
            inputs: self.inputs,
            trigger: self.trigger,
            release_id: self.release_id,
            steps,
        }
    }
}
