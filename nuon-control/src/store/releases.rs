//! Releases: a config version of an app and its builds, frozen.

use nuon_core::ReleaseId;
use nuon_core::wire::ErrorCode;
use nuon_core::wire::{ReleaseInfo, RunnerReleaseInfo};

use super::rows::Record;
use super::sql::{Sql, Stmt, args};
use super::*;

/// Releases of the org's apps.
#[async_trait]
pub trait ReleaseStore: Send + Sync {
    /// Stores a release (its `app_name` is not kept).
    async fn create_release(&self, org: &OrgId, release: &ReleaseInfo) -> Result<()>;

    /// The org's releases, of `app` when given, newest first.
    async fn list_releases(&self, org: &OrgId, app: Option<&AppId>) -> Result<Vec<ReleaseInfo>>;

    /// One release of the org.
    async fn get_release(&self, org: &OrgId, id: &ReleaseId) -> Result<Option<ReleaseInfo>>;

    /// Stores a runner release. A conflict `runner_release_exists` when the
    /// org has one of that version already (versions are never replaced).
    async fn create_runner_release(&self, org: &OrgId, release: &RunnerReleaseInfo) -> Result<()>;

    /// The org's runner releases, newest first.
    async fn list_runner_releases(&self, org: &OrgId) -> Result<Vec<RunnerReleaseInfo>>;

    /// One runner release of the org, by id or version.
    async fn get_runner_release(&self, org: &OrgId, key: &str)
    -> Result<Option<RunnerReleaseInfo>>;
}

/// A runner release as its column keeps it.
fn runner_release_doc(r: &RunnerReleaseInfo) -> Result<String> {
    serde_json::to_string(r).map_err(|e| StoreError::Invalid(e.to_string()))
}

/// A runner release from its column.
fn runner_release_from(doc: &str) -> Result<RunnerReleaseInfo> {
    serde_json::from_str(doc).map_err(|e| StoreError::Database(Box::new(e)))
}

/// The refusal of a second runner release of a version.
fn runner_release_exists(version: &str) -> StoreError {
    StoreError::Conflict {
        code: ErrorCode::RunnerReleaseExists,
        message: format!(
            "runner version {version} is published already: versions are never replaced; publish the new binary as another version"
        ),
        acked_seq: None,
    }
}

/// The org's releases, the rest of the query given.
fn releases_where(rest: &str) -> String {
    format!(
        "SELECT {} FROM releases WHERE org_id = $1 {rest}",
        ReleaseInfo::COLUMNS
    )
}

/// The releases' store, written once for both databases.
#[async_trait]
impl<S: Sql + 'static> ReleaseStore for S {
    async fn create_release(&self, org: &OrgId, release: &ReleaseInfo) -> Result<()> {
        let builds = serde_json::to_string(&release.builds)
            .map_err(|e| StoreError::Invalid(e.to_string()))?;
        self.execute_one(Stmt::new(
            "INSERT INTO releases (id, org_id, app_id, config_version, builds, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6)",
            args![
                release.id.as_str(),
                org.as_str(),
                release.app_id.as_str(),
                release.config_version,
                builds,
                release.created_at_ms,
            ],
        ))
        .await
        .map(drop)
    }

    async fn list_releases(&self, org: &OrgId, app: Option<&AppId>) -> Result<Vec<ReleaseInfo>> {
        let stmt = match app {
            Some(app) => Stmt::new(
                releases_where("AND app_id = $2 ORDER BY created_at DESC, id DESC"),
                args![org.as_str(), app.as_str()],
            ),
            None => Stmt::new(
                releases_where("ORDER BY created_at DESC, id DESC"),
                args![org.as_str()],
            ),
        };
        self.query(stmt).await
    }

    async fn get_release(&self, org: &OrgId, id: &ReleaseId) -> Result<Option<ReleaseInfo>> {
        self.query_one(Stmt::new(
            releases_where("AND id = $2"),
            args![org.as_str(), id.as_str()],
        ))
        .await
    }

    async fn create_runner_release(&self, org: &OrgId, release: &RunnerReleaseInfo) -> Result<()> {
        let insert = Stmt::new(
            "INSERT INTO runner_releases (id, org_id, version, doc, created_at) \
             VALUES ($1, $2, $3, $4, $5)",
            args![
                release.id.as_str(),
                org.as_str(),
                release.version.as_str(),
                runner_release_doc(release)?,
                release.created_at_ms,
            ],
        )
        // A unique-constraint failure is a second release of the version.
        .taken(String::new());
        match self.execute_one(insert).await {
            Err(StoreError::Conflict { .. }) => Err(runner_release_exists(&release.version)),
            done => done.map(drop),
        }
    }

    async fn list_runner_releases(&self, org: &OrgId) -> Result<Vec<RunnerReleaseInfo>> {
        let docs: Vec<String> = self
            .query(Stmt::new(
                "SELECT doc FROM runner_releases WHERE org_id = $1 ORDER BY created_at DESC, id DESC",
                args![org.as_str()],
            ))
            .await?;
        docs.iter().map(|d| runner_release_from(d)).collect()
    }

    async fn get_runner_release(
        &self,
        org: &OrgId,
        key: &str,
    ) -> Result<Option<RunnerReleaseInfo>> {
        let doc: Option<String> = self
            .query_one(Stmt::new(
                "SELECT doc FROM runner_releases WHERE org_id = $1 AND (id = $2 OR version = $2)",
                args![org.as_str(), key],
            ))
            .await?;
        doc.map(|d| runner_release_from(&d)).transpose()
    }
}
