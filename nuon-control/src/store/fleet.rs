//! What of an org's fleet changed since a mark: the installs, runners and
//! workflow summaries written since, read from their `stamp` column, so a
//! replica keeps its view of a fleet of thousands current by reading what
//! moved (the dashboard's overview, `listInstalls`), not every row at each
//! read.
//!
//! Triggers stamp every row written, whoever writes it (an older replica
//! during a rolling upgrade too):
//! - PostgreSQL: the writing transaction's id (`pg_current_xact_id()`); a
//!   mark is the oldest transaction still running when it is taken
//!   (`pg_snapshot_xmin`). A write not seen by reads after the mark was
//!   not committed when it was taken, so its transaction's id is at least
//!   the mark: read again from the mark, it is found. Sequences would not
//!   do: a smaller number may commit after a larger one was read.
//! - SQLite (one writer): a counter (`fleet_clock`) moved by each write; the
//!   mark is the counter after the last write a read sees, plus one.
//!
//! Removals leave no stamp: the counts say how many rows the org has, and
//! a view holding another number reads the whole fleet again.

use super::rows::{Dialect, OrgScoped, Record};
use super::sql::{Sql, Stmt, args};
use super::*;
use nuon_core::model::Install;
use nuon_core::wire::RunnerInfo;

/// The installs, runners and workflow summaries of an org written since a
/// mark ([`FleetStore::fleet_changes`]).
#[derive(Debug, Default)]
pub struct FleetChanges {
    /// Where the next read of changes starts.
    pub mark: i64,
    /// The installs written since the mark (every one from mark 0).
    pub installs: Vec<Install>,
    /// The runners written since (their calls too: `last_seen_at`).
    pub runners: Vec<RunnerInfo>,
    /// The installs' summaries written since (a revision moved, or a
    /// summary saved).
    pub summaries: Vec<CachedSummary>,
    /// How many installs the org has now.
    pub install_count: usize,
    /// How many runners the org has now (revoked ones too).
    pub runner_count: usize,
}

/// An org's fleet read by what changed.
#[async_trait]
pub trait FleetStore: Send + Sync {
    /// What of the org's fleet was written since `mark` (0: all of it),
    /// with the mark to read the next changes from. A row may come again
    /// in a later read; a write is never missed.
    async fn fleet_changes(&self, org: &OrgId, mark: i64) -> Result<FleetChanges>;

    /// The org's installs that have a workflow: those whose summary is
    /// missing and must be made from them (the others have none to make).
    async fn installs_with_workflows(&self, org: &OrgId) -> Result<Vec<InstallId>>;
}

impl Dialect {
    /// The mark changes are read from next, taken before reading them.
    fn fleet_mark(self) -> &'static str {
        match self {
            Dialect::Sqlite => "SELECT v + 1 FROM fleet_clock WHERE id = 1",
            Dialect::Postgres => "SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint",
        }
    }

    /// The org's rows of `T` stamped at or after a mark; parameters: the
    /// org, the mark.
    fn stamped_in_org<T: OrgScoped>(self) -> String {
        let (a, org, mark) = (T::ALIAS, self.p(1), self.p(2));
        format!(
            "SELECT {} FROM {} WHERE {a}org_id = {org} AND {a}stamp >= {mark}",
            T::COLUMNS,
            T::TABLE
        )
    }
}

/// The org's summaries stamped at or after a mark (`$1` the org, `$2` the
/// mark).
fn summaries() -> String {
    format!(
        "SELECT {} FROM install_summaries s JOIN installs i ON i.id = s.install_id \
         WHERE i.org_id = $1 AND s.stamp >= $2",
        CachedSummary::COLUMNS
    )
}

/// How many installs and runners the org (`$1`) has.
const COUNTS: &str = "SELECT (SELECT COUNT(*) FROM installs WHERE org_id = $1), \
     (SELECT COUNT(*) FROM runners WHERE org_id = $1)";

/// Two counts in one row.
struct Counts(i64, i64);

impl Record for Counts {
    const COLUMNS: &'static str = "";
    fn read(r: &impl super::rows::Cells) -> Result<Self> {
        Ok(Counts(r.int(0)?, r.int(1)?))
    }
}

#[async_trait]
impl<S: Sql + 'static> FleetStore for S {
    async fn fleet_changes(&self, org: &OrgId, mark: i64) -> Result<FleetChanges> {
        // The mark first: whatever the reads below miss was written after.
        let next: i64 = self
            .query_one(Stmt::new(S::DIALECT.fleet_mark(), args![]))
            .await?
            .unwrap_or(0);
        let Counts(install_count, runner_count) = self
            .query_one(Stmt::new(COUNTS, args![org.as_str()]))
            .await?
            .unwrap_or(Counts(0, 0));
        let installs = self
            .query(Stmt::new(
                S::DIALECT.stamped_in_org::<Install>(),
                args![org.as_str(), mark],
            ))
            .await?;
        let runners = self
            .query(Stmt::new(
                S::DIALECT.stamped_in_org::<RunnerInfo>(),
                args![org.as_str(), mark],
            ))
            .await?;
        let summaries = self
            .query(Stmt::new(summaries(), args![org.as_str(), mark]))
            .await?;
        let count = |n: i64| usize::try_from(n).unwrap_or(0);
        Ok(FleetChanges {
            mark: next,
            installs,
            runners,
            summaries,
            install_count: count(install_count),
            runner_count: count(runner_count),
        })
    }

    async fn installs_with_workflows(&self, org: &OrgId) -> Result<Vec<InstallId>> {
        let ids: Vec<String> = self
            .query(Stmt::new(
                "SELECT DISTINCT install_id FROM workflows WHERE org_id = $1",
                args![org.as_str()],
            ))
            .await?;
        ids.iter().map(|id| super::shared::parse_id(id)).collect()
    }
}
