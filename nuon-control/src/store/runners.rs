//! Runners and their tokens.

use super::rows::{Cells, Record};
use super::sql::{Sql, Stmt, args};
use super::*;
use nuon_core::model::RunnerHealth;
use nuon_core::now_ms;
use nuon_core::wire::RunnerRole;

/// The runner a runner token belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunnerPrincipal {
    /// The runner.
    pub runner_id: RunnerId,
    /// Its org.
    pub org_id: OrgId,
    /// The session using its token ([`nuon_core::wire::RunnerSession`],
    /// JSON, as stored: what [`RunnerStore::set_runner_session`] compares).
    pub session: Option<String>,
    /// That session, read (none when it does not parse): read once a
    /// token's check, not at every request.
    pub current: Option<nuon_core::wire::RunnerSession>,
    /// When it last called, ms since the epoch.
    pub last_seen_ms: Option<i64>,
}

/// Runners and their tokens.
#[async_trait]
pub trait RunnerStore: Send + Sync + 'static {
    /// Registers a runner under `id` with the hash of its token.
    async fn create_runner(
        &self,
        org: &OrgId,
        id: &RunnerId,
        name: &str,
        token_hash: &str,
    ) -> Result<RunnerInfo>;

    /// The org's runners.
    async fn list_runners(&self, org: &OrgId) -> Result<Vec<RunnerInfo>>;

    /// A runner of the org, by name or id.
    async fn find_runner(&self, org: &OrgId, name_or_id: &str) -> Result<Option<RunnerInfo>>;

    /// Revokes a runner's token.
    async fn revoke_runner(&self, org: &OrgId, id: &RunnerId) -> Result<Option<RunnerInfo>>;

    /// Gives a runner of the org the token of hash `token_hash` in place of
    /// its old one (a revoked runner is active again), and forgets its
    /// session. `None` when the org has no such runner.
    async fn rotate_runner_token(
        &self,
        org: &OrgId,
        id: &RunnerId,
        token_hash: &str,
    ) -> Result<Option<RunnerInfo>>;

    /// The runner of a runner token, by the token's hash; `None` when unknown or revoked.
    async fn authenticate_runner(&self, token_hash: &str) -> Result<Option<RunnerPrincipal>>;

    /// The org's build runner.
    async fn build_runner(&self, org: &OrgId) -> Result<Option<RunnerId>>;

    /// Makes `session` (JSON) the one session of the runner's token, if the
    /// stored one is still `expected` (`None`: none yet). Whether it did.
    async fn set_runner_session(
        &self,
        runner: &RunnerId,
        expected: Option<&str>,
        session: &str,
    ) -> Result<bool>;

    /// Keeps the key figures a runner reported (JSON).
    async fn set_runner_telemetry(&self, runner: &RunnerId, telemetry: &str) -> Result<()>;

    /// Every runner whose token is not revoked, of every org, with the
    /// health last recorded for it.
    async fn all_runners(&self) -> Result<Vec<(OrgId, RunnerInfo)>>;

    /// Records each runner's health since `at_ms`, `(runner, expected,
    /// health)`, where the recorded one is still `expected` (a
    /// transition: another replica may have recorded it first), in one
    /// statement; the runners it moved. At most [`MAX_HEALTH_MOVES`].
    async fn set_runners_health(
        &self,
        moves: &[(RunnerId, RunnerHealth, RunnerHealth)],
        at_ms: i64,
    ) -> Result<Vec<RunnerId>>;
}

/// The most transitions [`RunnerStore::set_runners_health`] takes at once
/// (three values each, within SQLite's 999 placeholders).
pub const MAX_HEALTH_MOVES: usize = 300;

/// A runner token's runner as stored; ids that do not parse authenticate
/// nothing.
struct PrincipalRow(Option<RunnerPrincipal>);

impl Record for PrincipalRow {
    const COLUMNS: &'static str = "id, org_id, session, last_seen_at";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(PrincipalRow(
            match (r.text(0)?.parse(), r.text(1)?.parse()) {
                (Ok(runner_id), Ok(org_id)) => {
                    let session = r.opt_text(2)?;
                    Some(RunnerPrincipal {
                        runner_id,
                        org_id,
                        current: session
                            .as_deref()
                            .and_then(|s| serde_json::from_str(s).ok()),
                        session,
                        last_seen_ms: r.opt_int(3)?,
                    })
                }
                _ => None,
            },
        ))
    }
}

/// A runner with the org it is of, as a record.
struct OfOrg(OrgId, RunnerInfo);

impl Record for OfOrg {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(OfOrg(r.id(10)?, RunnerInfo::read(r)?))
    }
}

#[async_trait]
impl<S: Sql + 'static> RunnerStore for S {
    async fn create_runner(
        &self,
        org: &OrgId,
        id: &RunnerId,
        name: &str,
        token_hash: &str,
    ) -> Result<RunnerInfo> {
        let now = now_ms();
        self.execute_one(
            Stmt::new(
                "INSERT INTO runners (id, org_id, name, token_hash, created_at) \
                 VALUES ($1, $2, $3, $4, $5)",
                args![id.as_str(), org.as_str(), name, token_hash, now],
            )
            .taken(format!(
                "a runner named {name:?} already exists in this org; pick another name or \
                 revoke it first"
            )),
        )
        .await?;
        Ok(RunnerInfo {
            id: id.clone(),
            name: name.to_owned(),
            created_at_ms: now,
            last_seen_at_ms: None,
            revoked: false,
            role: RunnerRole::Generic,
            session: None,
            status: Default::default(),
            health: Default::default(),
            health_since_ms: None,
            telemetry: None,
            install: None,
        })
    }

    async fn list_runners(&self, org: &OrgId) -> Result<Vec<RunnerInfo>> {
        Sql::list_in_org(self, org).await
    }

    async fn find_runner(&self, org: &OrgId, name_or_id: &str) -> Result<Option<RunnerInfo>> {
        Sql::find_in_org(self, org, name_or_id).await
    }

    async fn revoke_runner(&self, org: &OrgId, id: &RunnerId) -> Result<Option<RunnerInfo>> {
        Sql::revoke_in_org(self, org, id.as_str()).await
    }

    async fn rotate_runner_token(
        &self,
        org: &OrgId,
        id: &RunnerId,
        token_hash: &str,
    ) -> Result<Option<RunnerInfo>> {
        let changed = self
            .execute_one(Stmt::new(
                "UPDATE runners SET token_hash = $3, revoked_at = NULL, session = NULL \
                 WHERE org_id = $1 AND id = $2",
                args![org.as_str(), id.as_str(), token_hash],
            ))
            .await?;
        if changed == 0 {
            return Ok(None);
        }
        Sql::find_in_org(self, org, id.as_str()).await
    }

    async fn authenticate_runner(&self, token_hash: &str) -> Result<Option<RunnerPrincipal>> {
        let sql = format!(
            "SELECT {} FROM runners WHERE token_hash = $1 AND revoked_at IS NULL",
            PrincipalRow::COLUMNS
        );
        let row: Option<PrincipalRow> = self.query_one(Stmt::new(sql, args![token_hash])).await?;
        Ok(row.and_then(|PrincipalRow(p)| p))
    }

    async fn build_runner(&self, org: &OrgId) -> Result<Option<RunnerId>> {
        let id: Option<String> = self
            .query_one(Stmt::new(
                "SELECT id FROM runners WHERE org_id = $1 AND role = 'build' \
                 AND revoked_at IS NULL ORDER BY created_at LIMIT 1",
                args![org.as_str()],
            ))
            .await?;
        id.as_deref().map(super::shared::parse_id).transpose()
    }

    async fn set_runner_session(
        &self,
        runner: &RunnerId,
        expected: Option<&str>,
        session: &str,
    ) -> Result<bool> {
        let n = self
            .execute_one(Stmt::new(
                "UPDATE runners SET session = $3 \
                 WHERE id = $1 AND session IS NOT DISTINCT FROM $2",
                args![runner.as_str(), expected, session],
            ))
            .await?;
        Ok(n == 1)
    }

    async fn set_runner_telemetry(&self, runner: &RunnerId, telemetry: &str) -> Result<()> {
        self.execute_one(Stmt::new(
            "UPDATE runners SET telemetry = $2 WHERE id = $1",
            args![runner.as_str(), telemetry],
        ))
        .await?;
        Ok(())
    }

    async fn all_runners(&self) -> Result<Vec<(OrgId, RunnerInfo)>> {
        let sql = format!(
            "SELECT {}, org_id FROM runners WHERE revoked_at IS NULL",
            RunnerInfo::COLUMNS
        );
        let rows: Vec<OfOrg> = self.query(Stmt::new(sql, Vec::new())).await?;
        Ok(rows.into_iter().map(|OfOrg(o, r)| (o, r)).collect())
    }

    async fn set_runners_health(
        &self,
        moves: &[(RunnerId, RunnerHealth, RunnerHealth)],
        at_ms: i64,
    ) -> Result<Vec<RunnerId>> {
        if moves.is_empty() {
            return Ok(Vec::new());
        }
        if moves.len() > MAX_HEALTH_MOVES {
            return Err(StoreError::Invalid(format!(
                "{} runner health transitions at once: at most {MAX_HEALTH_MOVES}",
                moves.len()
            )));
        }
        let mut args = args![at_ms];
        let rows: Vec<String> = (moves.iter().enumerate())
            .map(|(n, (runner, expected, health))| {
                args.extend(args![runner.as_str(), expected.as_str(), health.as_str()]);
                format!("(${}, ${}, ${})", 3 * n + 2, 3 * n + 3, 3 * n + 4)
            })
            .collect();
        // Both stores name a VALUES list's columns column1, column2, ...
        let moved: Vec<String> = self
            .write_query(Stmt::new(
                format!(
                    "UPDATE runners SET health = v.column3, health_since = $1 \
                     FROM (VALUES {}) AS v \
                     WHERE runners.id = v.column1 AND COALESCE(runners.health, 'unknown') = v.column2 \
                     RETURNING id",
                    rows.join(", ")
                ),
                args,
            ))
            .await?;
        moved.iter().map(|id| super::shared::parse_id(id)).collect()
    }
}
