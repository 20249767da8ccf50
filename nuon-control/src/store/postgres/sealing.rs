//! Values kept sealed: what an earlier version kept in the clear.

use super::*;

#[async_trait]
impl SealingStore for PostgresStore {
    async fn clear_signing_keys(&self) -> Result<Vec<(OrgId, Vec<u8>)>> {
        let rows: Vec<(String, Vec<u8>)> =
            sqlx::query_as("SELECT id, signing_key FROM orgs WHERE length(signing_key) = 32")
                .fetch_all(&self.pool)
                .await
                .map_err(db)?;
        rows.into_iter()
            .map(|(id, key)| Ok((parse_id(&id)?, key)))
            .collect()
    }

    async fn seal_signing_key(&self, org: &OrgId, sealed: &[u8]) -> Result<()> {
        sqlx::query("UPDATE orgs SET signing_key = $2 WHERE id = $1 AND length(signing_key) = 32")
            .bind(org.as_str())
            .bind(sealed)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn clear_job_specs(&self, limit: u32) -> Result<Vec<(JobId, String)>> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT id, spec FROM jobs WHERE payload IS NULL AND spec <> '' ORDER BY seq LIMIT $1",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.into_iter()
            .map(|(id, spec)| Ok((parse_id(&id)?, spec)))
            .collect()
    }

    async fn unended_job_specs(
        &self,
        org: &OrgId,
        after: Option<&JobId>,
        limit: u32,
    ) -> Result<Vec<(JobId, String)>> {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT id, spec FROM jobs WHERE org_id = $1 AND id > $2 \
             AND status IN ('queued', 'running') AND spec <> '' ORDER BY id LIMIT $3",
        )
        .bind(org.as_str())
        .bind(after.map_or("", |a| a.as_str()))
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.into_iter()
            .map(|(id, spec)| Ok((parse_id(&id)?, spec)))
            .collect()
    }

    async fn set_job_signature(&self, job: &JobId, signature: &str) -> Result<()> {
        sqlx::query("UPDATE jobs SET signature = $2 WHERE id = $1")
            .bind(job.as_str())
            .bind(signature)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }

    async fn sealed_values(
        &self,
        column: SealedColumn,
        after: &str,
        limit: u32,
    ) -> Result<Vec<(String, String)>> {
        let p = column.place();
        // The signing key is BYTEA holding the sealed text.
        let value = if column == SealedColumn::SigningKeys {
            format!("convert_from({}, 'UTF8')", p.column)
        } else {
            p.column.to_owned()
        };
        let sql = format!(
            "SELECT {key} AS k, {value} AS v FROM {table} WHERE {filter} AND {column} IS NOT NULL \
             AND ({key}) COLLATE \"C\" > $1 ORDER BY ({key}) COLLATE \"C\" LIMIT $2",
            key = p.key,
            table = p.table,
            filter = p.filter,
            column = p.column,
        );
        let rows: Vec<(String, String)> = // The SQL is built from the fixed places of `SealedColumn` alone.
            sqlx::query_as(AssertSqlSafe(sql))
            .bind(after)
            .bind(i64::from(limit))
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        Ok(rows)
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
            ("convert_to($3, 'UTF8')", "convert_to($2, 'UTF8')")
        } else {
            ("$3", "$2")
        };
        let sql = format!(
            "UPDATE {table} SET {column} = {new_v} WHERE {key} = $1 AND {column} = {old_v}",
            table = p.table,
            column = p.column,
            key = p.key,
        );
        let n = sqlx::query(AssertSqlSafe(sql))
            .bind(key)
            .bind(new)
            .bind(old)
            .execute(&self.pool)
            .await
            .map_err(db)?
            .rows_affected();
        Ok(n > 0)
    }

    async fn seal_job_spec(&self, job: &JobId, sealed: &str, payload: &str) -> Result<()> {
        sqlx::query("UPDATE jobs SET spec = $2, payload = $3 WHERE id = $1 AND payload IS NULL")
            .bind(job.as_str())
            .bind(sealed)
            .bind(payload)
            .execute(&self.pool)
            .await
            .map_err(db)?;
        Ok(())
    }
}
