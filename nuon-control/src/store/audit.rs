//! The org's audit trail: one hash chain per org, appended to in batches.

use nuon_core::audit::{AuditEntry, Verifier};
use nuon_core::wire::AuditVerification;

use super::rows::{Cells, Dialect, Record};
use super::shared::corrupt;
use std::collections::BTreeMap;

use nuon_core::audit::{Chain, genesis};

use super::sql::{Arg, Change, Sql, Stmt, args};
use super::*;

/// An entry to append to an org's chain (its `n`, `prev` and `hash` are
/// set by the store).
#[derive(Debug, Clone)]
pub struct NewAudit {
    /// Whose chain.
    pub org: OrgId,
    /// The entry.
    pub entry: AuditEntry,
}

/// The org's audit trail.
#[async_trait]
pub trait AuditStore: Send + Sync + 'static {
    /// Appends entries, each to its org's chain, in the order given, in one
    /// transaction: all of them or none. `heads` are the heads this writer
    /// left at its last appends, kept up to date here: a writer that keeps
    /// them appends a batch of one org in one statement while no other
    /// writer moved that org's head (PostgreSQL).
    async fn append_audit(&self, entries: Vec<NewAudit>, heads: &mut AuditHeads) -> Result<()>;

    /// Up to `limit` entries of the org's chain after number `after`, in
    /// order; only those of `actor` when given.
    async fn list_audit(
        &self,
        org: &OrgId,
        after: u64,
        limit: u32,
        actor: Option<&str>,
    ) -> Result<Vec<AuditEntry>>;

    /// The number and hash of the org's newest entry, as the chain's head
    /// records them (`None`: no entry yet).
    async fn audit_head(&self, org: &OrgId) -> Result<Option<(u64, String)>>;
}

/// The heads of the chains one writer appended to, as it left them.
///
/// With them, the writer's next batch of one org is linked to the head it
/// knows and written in one statement that moves the head only from there
/// (no lock taken first, no transaction around it). When another writer
/// moved the head meanwhile, that statement writes nothing and answers the
/// head it found; the batch is linked again from it, and after
/// three tries the locked append takes over.
#[derive(Debug, Default)]
pub struct AuditHeads(BTreeMap<OrgId, Chain>);

/// Tries of the append from a known head before the locked one.
const KNOWN_HEAD_TRIES: usize = 3;

/// Rows read per page while verifying.
const VERIFY_PAGE: u32 = 20_000;

/// Checks the org's whole chain, from its first entry to its recorded head.
pub async fn verify_audit<S: AuditStore + ?Sized>(
    store: &S,
    org: &OrgId,
) -> Result<AuditVerification> {
    // The head is read before and after the walk: entries appended while
    // it runs are the trail going on, not tampering.
    let first = store.audit_head(org).await?;
    let mut v = Verifier::new(org.as_str());
    let mut at_first = None;
    let mut broken = None;
    'pages: loop {
        let page = store.list_audit(org, v.count(), VERIFY_PAGE, None).await?;
        let last_page = page.len() < VERIFY_PAGE as usize;
        if page.is_empty() {
            break;
        }
        for e in &page {
            if let Err(b) = v.check(e) {
                broken = Some(b);
                break 'pages;
            }
            if first.as_ref().is_some_and(|(n, _)| *n == e.n) {
                at_first = Some(e.hash.clone());
            }
        }
        if last_page {
            break;
        }
    }
    if broken.is_none() {
        let count = v.count();
        let at = |entry: u64, why: String| Some(nuon_core::audit::ChainBreak { entry, why });
        let changed = |entry: u64| {
            at(
                entry,
                "changed: the chain's head records another hash for it".into(),
            )
        };
        let last = store.audit_head(org).await?;
        broken = match (&first, &last) {
            (_, None) if count > 0 => at(
                count,
                format!("the chain has {count} entries but no head: its head row was deleted"),
            ),
            (Some((n, _)), _) if *n > count => at(
                count + 1,
                format!(
                    "missing: the chain's head records {n} entries, but it ends at entry {count}"
                ),
            ),
            (_, Some((n, _))) if *n < count => at(
                n + 1,
                format!(
                    "added behind the store's back: the chain's head records {n} entries, but it goes on to entry {count}"
                ),
            ),
            (_, Some((n, hash))) if *n == count && hash != v.head() => changed(*n),
            (Some((n, hash)), _) if at_first.as_ref().is_some_and(|h| h != hash) => changed(*n),
            _ => None,
        };
    }
    Ok(AuditVerification {
        entries: v.count(),
        head: v.head().to_owned(),
        broken,
    })
}

/// The number and hash of a chain's newest entry.
struct AuditHead(u64, String);

impl Record for AuditHead {
    const COLUMNS: &'static str = "n, hash";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(AuditHead(
            u64::try_from(r.int(0)?).map_err(corrupt)?,
            r.text(1)?,
        ))
    }
}

/// An org's chain as its head row holds it.
struct HeadOf(OrgId, Chain);

impl Record for HeadOf {
    const COLUMNS: &'static str = "org_id, n, hash";
    fn read(r: &impl Cells) -> Result<Self> {
        let n = u64::try_from(r.int(1)?).map_err(corrupt)?;
        Ok(HeadOf(
            r.id(0)?,
            Chain {
                n,
                head: r.text(2)?,
            },
        ))
    }
}

/// Entries one insert holds at most: 11 values each, well under either
/// database's bound on a statement's parameters.
const ROWS_PER_INSERT: usize = 1000;

/// Links `entries` to their orgs' chains in `heads`, moving the heads on:
/// the rows of the `audit` table they make (11 values each).
fn link(heads: &mut BTreeMap<OrgId, Chain>, entries: Vec<NewAudit>) -> Result<Vec<Vec<Arg>>> {
    let mut rows = Vec::with_capacity(entries.len());
    for NewAudit { org, entry } in entries {
        let Some(chain) = heads.get_mut(&org) else {
            return Err(corrupt(format!("the audit chain of org {org} has no head")));
        };
        let e = chain.append(entry);
        rows.push(args![
            org.as_str(),
            i64::try_from(e.n).map_err(corrupt)?,
            e.at_ms,
            e.actor,
            e.action,
            e.target,
            e.source,
            e.outcome,
            e.detail,
            e.prev,
            e.hash,
        ]);
    }
    Ok(rows)
}

/// The columns of an `audit` row, in the order [`link`] binds them.
const AUDIT_COLUMNS: &str =
    "org_id, n, at, actor, action, target, source, outcome, detail, prev, hash";

/// The statements that write `rows` and move the heads on to `heads`.
fn appends(
    dialect: Dialect,
    heads: &BTreeMap<OrgId, Chain>,
    rows: Vec<Vec<Arg>>,
) -> Result<Vec<Stmt>> {
    let mut stmts: Vec<Stmt> = Vec::new();
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        stmts.push(values_stmt(
            &format!("INSERT INTO audit ({AUDIT_COLUMNS}) VALUES "),
            chunk,
            0,
        ));
    }
    let moved: Vec<Vec<Arg>> = heads
        .iter()
        .map(|(org, chain)| {
            Ok(args![
                org.as_str(),
                i64::try_from(chain.n).map_err(corrupt)?,
                chain.head.as_str()
            ])
        })
        .collect::<Result<_>>()?;
    match dialect {
        // The heads moved in the statement of the last insert: one round
        // trip for a batch of up to a thousand entries.
        Dialect::Postgres => {
            let Some(last) = stmts.pop() else {
                return Ok(stmts);
            };
            let heads = values_stmt("", &moved, last.args.len());
            stmts.push(Stmt::new(
                format!(
                    "WITH added AS ({}) UPDATE audit_heads AS h SET n = v.n, hash = v.hash \
                     FROM (VALUES {}) AS v(org_id, n, hash) WHERE h.org_id = v.org_id",
                    last.sql, heads.sql
                ),
                last.args.into_iter().chain(heads.args).collect(),
            ));
        }
        Dialect::Sqlite => stmts.extend(moved.into_iter().map(|head| {
            Stmt::new(
                "UPDATE audit_heads SET n = $2, hash = $3 WHERE org_id = $1",
                head,
            )
        })),
    }
    Ok(stmts)
}

/// `prefix` and a row of placeholders per row of `rows` (`($1, $2), ($3,
/// $4)`), all bound; numbered from `$(after + 1)` when the statement
/// holds `after` parameters before them.
fn values_stmt(prefix: &str, rows: &[Vec<Arg>], after: usize) -> Stmt {
    let mut sql = String::from(prefix);
    let mut args = Vec::new();
    for (i, row) in rows.iter().enumerate() {
        sql.push_str(if i == 0 { "(" } else { ", (" });
        for (j, a) in row.iter().enumerate() {
            if j > 0 {
                sql.push_str(", ");
            }
            args.push(a.clone());
            sql.push_str(&format!("${}", after + args.len()));
        }
        sql.push(')');
    }
    Stmt::new(sql, args)
}

/// What an append from a known head found: whether it moved the head
/// (and wrote its rows), and the head as its statement's snapshot saw it.
struct Appended {
    moved: bool,
    head: Chain,
}

impl Record for Appended {
    const COLUMNS: &'static str = "";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(Appended {
            moved: r.flag(0)?,
            head: Chain {
                n: u64::try_from(r.int(1)?).map_err(corrupt)?,
                head: r.text(2)?,
            },
        })
    }
}

/// One PostgreSQL statement that appends `rows` (linked from `from`) to
/// `org`'s chain and moves its head on to `to`, only if the head is still
/// `from`: the update takes the head's row lock for the statement, so no
/// other append comes between; if the head moved, nothing is written.
/// It answers [`Appended`] (no row: the org has no head yet).
fn append_from(org: &OrgId, from: &Chain, to: &Chain, rows: Vec<Vec<Arg>>) -> Result<Stmt> {
    let head = args![
        org.as_str(),
        i64::try_from(from.n).map_err(corrupt)?,
        from.head.as_str(),
        i64::try_from(to.n).map_err(corrupt)?,
        to.head.as_str()
    ];
    let values = values_stmt("", &rows, head.len());
    Ok(Stmt::new(
        format!(
            "WITH moved AS (UPDATE audit_heads SET n = $4, hash = $5 \
               WHERE org_id = $1 AND n = $2 AND hash = $3 RETURNING org_id), \
             added AS (INSERT INTO audit ({AUDIT_COLUMNS}) \
               SELECT * FROM (VALUES {}) AS v({AUDIT_COLUMNS}) WHERE EXISTS (SELECT 1 FROM moved)) \
             SELECT EXISTS (SELECT 1 FROM moved), n, hash FROM audit_heads WHERE org_id = $1",
            values.sql
        ),
        head.into_iter().chain(values.args).collect(),
    ))
}

/// The audit trail's store, written once for both databases.
#[async_trait]
impl<S: Sql + 'static> AuditStore for S {
    async fn append_audit(&self, entries: Vec<NewAudit>, known: &mut AuditHeads) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let org = entries[0].org.clone();
        let one_org = entries.iter().all(|e| e.org == org);
        if S::DIALECT == Dialect::Postgres && one_org && entries.len() <= ROWS_PER_INSERT {
            for _ in 0..KNOWN_HEAD_TRIES {
                let Some(from) = known.0.get(&org) else {
                    break;
                };
                let mut heads = BTreeMap::from([(org.clone(), from.clone())]);
                let rows = link(&mut heads, entries.clone())?;
                let found: Vec<Appended> = self
                    .write_query(append_from(&org, from, &heads[&org], rows)?)
                    .await?;
                match found.into_iter().next() {
                    Some(Appended { moved: true, .. }) => {
                        known.0.extend(heads);
                        return Ok(());
                    }
                    // Another writer moved the head: link again from it.
                    Some(Appended { head, .. }) => known.0.insert(org.clone(), head),
                    None => known.0.remove(&org),
                };
            }
        }
        let orgs: std::collections::BTreeSet<&OrgId> = entries.iter().map(|e| &e.org).collect();
        let plan = match S::DIALECT {
            // Each org's head made if it has none and locked, in org order
            // (two appends never deadlock), and read: one statement (an
            // upsert that changes nothing of a head it finds).
            Dialect::Postgres => {
                let heads: Vec<Vec<Arg>> = orgs
                    .iter()
                    .map(|org| args![org.as_str(), genesis(org.as_str())])
                    .collect();
                let heads = values_stmt("", &heads, 0);
                Change::read_by_write(Stmt::new(
                    format!(
                        "INSERT INTO audit_heads (org_id, n, hash) \
                         SELECT org_id, 0, hash FROM (VALUES {}) AS v(org_id, hash) \
                         ON CONFLICT (org_id) DO UPDATE SET n = audit_heads.n RETURNING {}",
                        heads.sql,
                        HeadOf::COLUMNS
                    ),
                    heads.args,
                ))
            }
            // A head for an org that has none yet, so that two replicas
            // appending an org's first entries take turns on its row; then
            // the heads locked in one order, so that two never deadlock.
            Dialect::Sqlite => {
                let first = orgs
                    .iter()
                    .map(|org| {
                        Stmt::new(
                            "INSERT INTO audit_heads (org_id, n, hash) VALUES ($1, 0, $2) \
                             ON CONFLICT (org_id) DO NOTHING",
                            args![org.as_str(), genesis(org.as_str())],
                        )
                    })
                    .collect();
                let marks: Vec<String> = (1..=orgs.len()).map(|i| format!("${i}")).collect();
                let read = Stmt::new(
                    format!(
                        "SELECT {} FROM audit_heads WHERE org_id IN ({}) ORDER BY org_id",
                        HeadOf::COLUMNS,
                        marks.join(", ")
                    ),
                    orgs.iter().map(|o| Arg::from(o.as_str())).collect(),
                );
                Change::locked_read(read).first(first)
            }
        };
        let moved = self
            .change(plan, move |rows: Vec<HeadOf>| {
                let mut heads = rows.into_iter().map(|HeadOf(o, c)| (o, c)).collect();
                let rows = link(&mut heads, entries)?;
                Ok((appends(S::DIALECT, &heads, rows)?, heads))
            })
            .await?;
        known.0.extend(moved);
        Ok(())
    }

    async fn list_audit(
        &self,
        org: &OrgId,
        after: u64,
        limit: u32,
        actor: Option<&str>,
    ) -> Result<Vec<AuditEntry>> {
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        self.query(Stmt::new(
            format!(
                "SELECT {} FROM audit WHERE org_id = $1 AND n > $2 \
                 AND (CAST($4 AS TEXT) IS NULL OR actor = $4) ORDER BY n LIMIT $3",
                AuditEntry::COLUMNS
            ),
            args![org.as_str(), after, limit, actor],
        ))
        .await
    }

    async fn audit_head(&self, org: &OrgId) -> Result<Option<(u64, String)>> {
        // Not a head of no entry: an append makes one (n = 0) before an
        // org's first entries.
        let head: Option<AuditHead> = self
            .query_one(Stmt::new(
                format!(
                    "SELECT {} FROM audit_heads WHERE org_id = $1 AND n > 0",
                    AuditHead::COLUMNS
                ),
                args![org.as_str()],
            ))
            .await?;
        Ok(head.map(|AuditHead(n, hash)| (n, hash)))
    }
}
