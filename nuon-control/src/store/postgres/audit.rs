//! The org's audit trail. Replicas append under a row lock on the org's
//! chain head, so each chain stays one line.

use std::collections::BTreeMap;

use nuon_core::audit::{AuditEntry, Chain, genesis};

use super::*;
use crate::store::{AuditStore, NewAudit};

#[async_trait]
impl AuditStore for PostgresStore {
    async fn append_audit(&self, entries: Vec<NewAudit>) -> Result<()> {
        if entries.is_empty() {
            return Ok(());
        }
        let mut tx = self.begin().await?;
        // Lock the heads in one order, so two replicas never deadlock.
        let mut heads: BTreeMap<OrgId, Chain> = BTreeMap::new();
        for e in &entries {
            heads.entry(e.org.clone()).or_default();
        }
        for (org, chain) in heads.iter_mut() {
            sqlx::query(
                "INSERT INTO audit_heads (org_id, n, hash) VALUES ($1, 0, $2) ON CONFLICT DO NOTHING",
            )
            .bind(org.as_str())
            .bind(genesis(org.as_str()))
            .execute(&mut *tx)
            .await
            .map_err(db)?;
            let row = sqlx::query("SELECT n, hash FROM audit_heads WHERE org_id = $1 FOR UPDATE")
                .bind(org.as_str())
                .fetch_one(&mut *tx)
                .await
                .map_err(db)?;
            *chain = Chain {
                n: row.int(0)? as u64,
                head: row.text(1)?,
            };
        }
        for NewAudit { org, entry } in entries {
            let e = heads.get_mut(&org).expect("head locked").append(entry);
            sqlx::query(
                "INSERT INTO audit (org_id, n, at, actor, action, target, source, outcome, detail, prev, hash) \
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            )
            .bind(org.as_str())
            .bind(e.n as i64)
            .bind(e.at_ms)
            .bind(&e.actor)
            .bind(&e.action)
            .bind(&e.target)
            .bind(&e.source)
            .bind(&e.outcome)
            .bind(&e.detail)
            .bind(&e.prev)
            .bind(&e.hash)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }
        for (org, chain) in heads {
            sqlx::query("UPDATE audit_heads SET n = $2, hash = $3 WHERE org_id = $1")
                .bind(org.as_str())
                .bind(chain.n as i64)
                .bind(&chain.head)
                .execute(&mut *tx)
                .await
                .map_err(db)?;
        }
        tx.commit().await.map_err(db)
    }

    async fn list_audit(
        &self,
        org: &OrgId,
        after: u64,
        limit: u32,
        actor: Option<&str>,
    ) -> Result<Vec<AuditEntry>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "SELECT {} FROM audit WHERE org_id = $1 AND n > $2 \
             AND ($4::TEXT IS NULL OR actor = $4) ORDER BY n LIMIT $3",
            <AuditEntry as Record>::COLUMNS
        )))
        .bind(org.as_str())
        .bind(i64::try_from(after).unwrap_or(i64::MAX))
        .bind(i64::from(limit))
        .bind(actor)
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter().map(AuditEntry::read).collect()
    }

    async fn audit_head(&self, org: &OrgId) -> Result<Option<(u64, String)>> {
        let row = sqlx::query("SELECT n, hash FROM audit_heads WHERE org_id = $1 AND n > 0")
            .bind(org.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        row.map(|r| Ok((r.int(0)? as u64, r.text(1)?))).transpose()
    }
}
