//! Runner binaries the control plane serves (`GET
//! /v1/runner/releases/{version}/{platform}` on the Runner API): a
//! published runner release's bytes, kept in the database in parts so
//! that every replica serves them and a download streams part by part.

use std::collections::BTreeSet;

use super::sql::{Sql, Stmt, args};
use super::*;

/// The size of one stored part.
pub const BINARY_PART_BYTES: usize = 1024 * 1024;

/// The runner binaries of an org, by digest (`sha256:…`).
#[async_trait]
pub trait RunnerBinaryStore: Send + Sync + 'static {
    /// Keeps `parts` (in order) as the binary of `digest`, all or none.
    /// Kept already: nothing changes (the same digest is the same bytes).
    async fn put_runner_binary(&self, org: &OrgId, digest: &str, parts: Vec<Vec<u8>>)
    -> Result<()>;

    /// How many parts the binary of `digest` has (0: not kept).
    async fn runner_binary_parts(&self, org: &OrgId, digest: &str) -> Result<u32>;

    /// Part `part` of the binary of `digest`.
    async fn runner_binary_part(
        &self,
        org: &OrgId,
        digest: &str,
        part: u32,
    ) -> Result<Option<Vec<u8>>>;

    /// The digests of every binary the org keeps.
    async fn runner_binaries(&self, org: &OrgId) -> Result<BTreeSet<String>>;
}

#[async_trait]
impl<S: Sql + 'static> RunnerBinaryStore for S {
    async fn put_runner_binary(
        &self,
        org: &OrgId,
        digest: &str,
        parts: Vec<Vec<u8>>,
    ) -> Result<()> {
        if parts.is_empty() || self.runner_binary_parts(org, digest).await? > 0 {
            return Ok(());
        }
        // One transaction: a binary is kept whole or not at all. Two
        // uploads of the same digest at once: the second's first insert
        // conflicts on the key, and the first one's bytes stay.
        let stmts = parts
            .into_iter()
            .enumerate()
            .map(|(i, bytes)| {
                Stmt::new(
                    "INSERT INTO runner_binaries (org_id, digest, part, bytes) \
                     VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING",
                    args![org.as_str(), digest, i as i64, bytes],
                )
            })
            .collect();
        self.execute(stmts).await?;
        Ok(())
    }

    async fn runner_binary_parts(&self, org: &OrgId, digest: &str) -> Result<u32> {
        let n: Option<u32> = self
            .query_one(Stmt::new(
                "SELECT COUNT(*) FROM runner_binaries WHERE org_id = $1 AND digest = $2",
                args![org.as_str(), digest],
            ))
            .await?;
        Ok(n.unwrap_or(0))
    }

    async fn runner_binary_part(
        &self,
        org: &OrgId,
        digest: &str,
        part: u32,
    ) -> Result<Option<Vec<u8>>> {
        self.query_one(Stmt::new(
            "SELECT bytes FROM runner_binaries WHERE org_id = $1 AND digest = $2 AND part = $3",
            args![org.as_str(), digest, part],
        ))
        .await
    }

    async fn runner_binaries(&self, org: &OrgId) -> Result<BTreeSet<String>> {
        let rows: Vec<String> = self
            .query(Stmt::new(
                "SELECT DISTINCT digest FROM runner_binaries WHERE org_id = $1",
                args![org.as_str()],
            ))
            .await?;
        Ok(rows.into_iter().collect())
    }
}
