//! Appending to the orgs' audit chains (see [`AuditChains`]). Replicas
//! append under a row lock on the org's chain head, so each chain stays
//! one line.

use std::collections::BTreeMap;

use nuon_core::audit::{Chain, genesis};

use super::*;
use crate::store::NewAudit;
use crate::store::audit::AuditChains;

#[async_trait]
impl AuditChains for PostgresStore {
    async fn append_to_chains(&self, entries: Vec<NewAudit>) -> Result<()> {
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
}
