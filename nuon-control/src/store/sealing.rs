//! Values kept sealed: what an earlier version kept in the clear, found
//! and sealed at start (see [`crate::keys`]).

use super::rows::{Cells, Record};
use super::sql::{Sql, Stmt, args};
use super::*;

/// Every place the store keeps values sealed under the secrets key: what a
/// rotation of the secrets key reads and seals again. Each holds a sealed
/// text, or a JSON document with sealed values inside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SealedColumn {
    /// `orgs.signing_key`, by org id.
    SigningKeys,
    /// `jobs.spec`, by job id.
    JobSpecs,
    /// `jobs.outputs` (sensitive outputs inside), by job id.
    JobOutputs,
    /// `installs.sealed` (sensitive inputs and secrets inside), by install id.
    InstallSecrets,
    /// `installs.outputs`, by install id.
    InstallOutputs,
    /// `workflow_steps.outputs`, by `WORKFLOW/IDX`.
    StepOutputs,
    /// `tf_states.body` (Terraform and plugin state), by `INSTALL/COMPONENT/VERSION`.
    States,
    /// `app_configs.files`, by `APP/VERSION`.
    ConfigFiles,
    /// `app_configs.config`, by `APP/VERSION`.
    ConfigConfig,
    /// `app_configs.sources`, by `APP/VERSION`.
    ConfigSources,
    /// The setting that checks the key, by its name.
    KeyCheck,
    /// `webhooks.secret`, by webhook id.
    WebhookSecrets,
    /// `installs.stack_outputs` (what the install's stack reported), by install id.
    StackOutputs,
    /// `installs.pending` (the sealed values deployed before a pending
    /// change inside), by install id.
    InstallPending,
}

impl SealedColumn {
    /// All of them.
    pub const ALL: [SealedColumn; 14] = [
        SealedColumn::SigningKeys,
        SealedColumn::JobSpecs,
        SealedColumn::JobOutputs,
        SealedColumn::InstallSecrets,
        SealedColumn::InstallOutputs,
        SealedColumn::StepOutputs,
        SealedColumn::States,
        SealedColumn::ConfigFiles,
        SealedColumn::ConfigConfig,
        SealedColumn::ConfigSources,
        SealedColumn::KeyCheck,
        SealedColumn::WebhookSecrets,
        SealedColumn::StackOutputs,
        SealedColumn::InstallPending,
    ];

    /// Where it is: table, the row's key as one text, the column, which
    /// rows hold a sealed value.
    pub(crate) fn place(self) -> Place {
        let p = |table, key, column, filter| Place {
            table,
            key,
            column,
            filter,
        };
        match self {
            SealedColumn::SigningKeys => p("orgs", "id", "signing_key", "true"),
            SealedColumn::JobSpecs => p("jobs", "id", "spec", "spec <> '' AND payload IS NOT NULL"),
            SealedColumn::JobOutputs => p("jobs", "id", "outputs", "outputs LIKE '%$sealed%'"),
            SealedColumn::InstallSecrets => p("installs", "id", "sealed", "true"),
            SealedColumn::InstallOutputs => {
                p("installs", "id", "outputs", "outputs LIKE '%$sealed%'")
            }
            SealedColumn::StepOutputs => p(
                "workflow_steps",
                "workflow_id || '/' || idx",
                "outputs",
                "outputs LIKE '%$sealed%'",
            ),
            SealedColumn::States => p(
                "tf_states",
                "install_id || '/' || component || '/' || version",
                "body",
                "true",
            ),
            SealedColumn::ConfigFiles => {
                p("app_configs", "app_id || '/' || version", "files", "true")
            }
            SealedColumn::ConfigConfig => {
                p("app_configs", "app_id || '/' || version", "config", "true")
            }
            SealedColumn::ConfigSources => {
                p("app_configs", "app_id || '/' || version", "sources", "true")
            }
            SealedColumn::KeyCheck => p("settings", "name", "value", "name = 'secrets_key_check'"),
            SealedColumn::WebhookSecrets => p("webhooks", "id", "secret", "true"),
            SealedColumn::StackOutputs => p(
                "installs",
                "id",
                "stack_outputs",
                "stack_outputs IS NOT NULL",
            ),
            SealedColumn::InstallPending => p("installs", "id", "pending", "pending IS NOT NULL"),
        }
    }

    /// `table.column`, for messages.
    pub fn name(self) -> String {
        let p = self.place();
        format!("{}.{}", p.table, p.column)
    }
}

/// Where a [`SealedColumn`] is.
pub(crate) struct Place {
    pub(crate) table: &'static str,
    pub(crate) key: &'static str,
    pub(crate) column: &'static str,
    pub(crate) filter: &'static str,
}

/// Values kept sealed: finding and sealing what an earlier version kept in
/// the clear, and what a rotation of the secrets key seals again.
#[async_trait]
pub trait SealingStore: Send + Sync + 'static {
    /// Orgs whose signing key is kept in the clear (its 32 bytes).
    async fn clear_signing_keys(&self) -> Result<Vec<(OrgId, Vec<u8>)>>;

    /// Replaces an org's signing key kept in the clear by its sealed form.
    async fn seal_signing_key(&self, org: &OrgId, sealed: &[u8]) -> Result<()>;

    /// Up to `limit` jobs whose spec is kept in the clear (no payload as
    /// shown stored beside it), with that spec.
    async fn clear_job_specs(&self, limit: u32) -> Result<Vec<(JobId, String)>>;

    /// Replaces a job's spec kept in the clear by its sealed form, and
    /// stores its payload as the Control API shows it.
    async fn seal_job_spec(&self, job: &JobId, sealed: &str, payload: &str) -> Result<()>;

    /// Up to `limit` jobs of `org` that have not ended (queued or
    /// running), after `after` in id order, with their sealed specs: the
    /// jobs to sign again when the org's key is rotated.
    async fn unended_job_specs(
        &self,
        org: &OrgId,
        after: Option<&JobId>,
        limit: u32,
    ) -> Result<Vec<(JobId, String)>>;

    /// Replaces a job's signature.
    async fn set_job_signature(&self, job: &JobId, signature: &str) -> Result<()>;

    /// Up to `limit` values of `column` whose row key is after `after`, in
    /// key order, each with its row key.
    async fn sealed_values(
        &self,
        column: SealedColumn,
        after: &str,
        limit: u32,
    ) -> Result<Vec<(String, String)>>;

    /// Replaces the value of `column` at `key` by `new` if it is still
    /// `old`; answers whether it was (a write since leaves it alone).
    async fn replace_sealed(
        &self,
        column: SealedColumn,
        key: &str,
        old: &str,
        new: &str,
    ) -> Result<bool>;
}

/// An org's signing key as kept, as a record.
struct OrgKey(OrgId, Vec<u8>);

impl Record for OrgKey {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(OrgKey(r.id(0)?, r.bytes(1)?))
    }
}

/// A job's spec as kept, as a record.
struct JobSpecRow(JobId, String);

impl Record for JobSpecRow {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(JobSpecRow(r.id(0)?, r.text(1)?))
    }
}

/// A sealed value with its row's key, as a record.
struct KeyedValue(String, String);

impl Record for KeyedValue {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(KeyedValue(r.text(0)?, r.text(1)?))
    }
}

/// The jobs' specs of a query, as pairs.
async fn job_specs<S: Sql>(db: &S, stmt: Stmt) -> Result<Vec<(JobId, String)>> {
    let rows: Vec<JobSpecRow> = db.query(stmt).await?;
    Ok(rows
        .into_iter()
        .map(|JobSpecRow(id, spec)| (id, spec))
        .collect())
}

/// The sealing store, written once for both databases.
#[async_trait]
impl<S: Sql + 'static> SealingStore for S {
    async fn clear_signing_keys(&self) -> Result<Vec<(OrgId, Vec<u8>)>> {
        let rows: Vec<OrgKey> = self
            .query(Stmt::new(
                "SELECT id, signing_key FROM orgs WHERE length(signing_key) = 32",
                Vec::new(),
            ))
            .await?;
        Ok(rows.into_iter().map(|OrgKey(id, key)| (id, key)).collect())
    }

    async fn seal_signing_key(&self, org: &OrgId, sealed: &[u8]) -> Result<()> {
        self.execute_one(Stmt::new(
            "UPDATE orgs SET signing_key = $2 WHERE id = $1 AND length(signing_key) = 32",
            args![org.as_str(), sealed.to_vec()],
        ))
        .await?;
        Ok(())
    }

    async fn clear_job_specs(&self, limit: u32) -> Result<Vec<(JobId, String)>> {
        let stmt = Stmt::new(
            "SELECT id, spec FROM jobs WHERE payload IS NULL AND spec <> '' ORDER BY seq LIMIT $1",
            args![limit],
        );
        job_specs(self, stmt).await
    }

    async fn seal_job_spec(&self, job: &JobId, sealed: &str, payload: &str) -> Result<()> {
        self.execute_one(Stmt::new(
            "UPDATE jobs SET spec = $2, payload = $3 WHERE id = $1 AND payload IS NULL",
            args![job.as_str(), sealed, payload],
        ))
        .await?;
        Ok(())
    }

    async fn unended_job_specs(
        &self,
        org: &OrgId,
        after: Option<&JobId>,
        limit: u32,
    ) -> Result<Vec<(JobId, String)>> {
        let stmt = Stmt::new(
            "SELECT id, spec FROM jobs WHERE org_id = $1 AND id > $2 \
             AND status IN ('queued', 'running') AND spec <> '' ORDER BY id LIMIT $3",
            args![org.as_str(), after.map_or("", |a| a.as_str()), limit],
        );
        job_specs(self, stmt).await
    }

    async fn set_job_signature(&self, job: &JobId, signature: &str) -> Result<()> {
        self.execute_one(Stmt::new(
            "UPDATE jobs SET signature = $2 WHERE id = $1",
            args![job.as_str(), signature],
        ))
        .await?;
        Ok(())
    }

    async fn sealed_values(
        &self,
        column: SealedColumn,
        after: &str,
        limit: u32,
    ) -> Result<Vec<(String, String)>> {
        let p = column.place();
        // The signing key is bytes (BLOB, BYTEA) holding the sealed text.
        let value = if column == SealedColumn::SigningKeys {
            S::DIALECT.bytes_as_text(p.column)
        } else {
            p.column.to_owned()
        };
        // The SQL is built from the fixed places of `SealedColumn` alone.
        let sql = format!(
            "SELECT {key} AS k, {value} AS v FROM {table} WHERE {filter} AND {column} IS NOT NULL \
             AND {order} > $1 ORDER BY {order} LIMIT $2",
            key = p.key,
            table = p.table,
            filter = p.filter,
            column = p.column,
            order = S::DIALECT.bytewise(p.key),
        );
        let rows: Vec<KeyedValue> = self.query(Stmt::new(sql, args![after, limit])).await?;
        Ok(rows.into_iter().map(|KeyedValue(k, v)| (k, v)).collect())
    }

    async fn replace_sealed(
        &self,
        column: SealedColumn,
        key: &str,
        old: &str,
        new: &str,
    ) -> Result<bool> {
        let p = column.place();
        let (old_v, new_v) = if column == SealedColumn::SigningKeys {
            (
                S::DIALECT.text_as_bytes("$3"),
                S::DIALECT.text_as_bytes("$2"),
            )
        } else {
            ("$3".to_owned(), "$2".to_owned())
        };
        let sql = format!(
            "UPDATE {table} SET {column} = {new_v} WHERE {key} = $1 AND {column} = {old_v}",
            table = p.table,
            column = p.column,
            key = p.key,
        );
        let n = self
            .execute_one(Stmt::new(sql, args![key, new, old]))
            .await?;
        Ok(n > 0)
    }
}
