//! Appending to the orgs' audit chains (see [`AuditChains`]).

use std::collections::HashMap;

use nuon_core::audit::{Chain, genesis};

use super::*;
use crate::store::NewAudit;
use crate::store::audit::AuditChains;

#[async_trait]
impl AuditChains for SqliteStore {
    async fn append_to_chains(&self, entries: Vec<NewAudit>) -> Result<()> {
        self.write(move |conn| {
            let mut heads: HashMap<OrgId, Chain> = HashMap::new();
            let mut insert = conn
                .prepare_cached(
                    "INSERT INTO audit (org_id, n, at, actor, action, target, source, outcome, detail, prev, hash) \
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                )
                .map_err(db_err)?;
            for NewAudit { org, entry } in entries {
                if !heads.contains_key(&org) {
                    let head = one_row(
                        conn,
                        "SELECT n, hash FROM audit_heads WHERE org_id = ?1",
                        [org.as_str()],
                        |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, String>(1)?)),
                    )?
                    .unwrap_or_else(|| (0, genesis(org.as_str())));
                    heads.insert(org.clone(), Chain { n: head.0, head: head.1 });
                }
                let chain = heads.get_mut(&org).expect("head loaded");
                let e = chain.append(entry);
                insert
                    .execute(params![
                        org.as_str(),
                        e.n as i64,
                        e.at_ms,
                        e.actor,
                        e.action,
                        e.target,
                        e.source,
                        e.outcome,
                        e.detail,
                        e.prev,
                        e.hash
                    ])
                    .map_err(db_err)?;
            }
            for (org, chain) in heads {
                conn.prepare_cached(
                    "INSERT INTO audit_heads (org_id, n, hash) VALUES (?1, ?2, ?3) \
                     ON CONFLICT (org_id) DO UPDATE SET n = excluded.n, hash = excluded.hash",
                )
                .and_then(|mut s| s.execute(params![org.as_str(), chain.n as i64, chain.head]))
                .map_err(db_err)?;
            }
            Ok(())
        })
        .await
    }
}
