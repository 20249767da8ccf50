//! Values kept sealed: what an earlier version kept in the clear.

use super::*;

#[async_trait]
impl SealingStore for SqliteStore {
    async fn clear_signing_keys(&self) -> Result<Vec<(OrgId, Vec<u8>)>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare("SELECT id, signing_key FROM orgs WHERE length(signing_key) = 32")
                .map_err(db_err)?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?))
                })
                .map_err(db_err)?;
            rows.map(|r| {
                let (id, key) = r.map_err(db_err)?;
                Ok((parse_id(&id)?, key))
            })
            .collect()
        })
        .await
    }

    async fn seal_signing_key(&self, org: &OrgId, sealed: &[u8]) -> Result<()> {
        let org = org.clone();
        let sealed = sealed.to_vec();
        self.write(move |conn| {
            conn.execute(
                "UPDATE orgs SET signing_key = ?2 WHERE id = ?1 AND length(signing_key) = 32",
                params![org.as_str(), sealed],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn clear_job_specs(&self, limit: u32) -> Result<Vec<(JobId, String)>> {
        self.read(move |conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT id, spec FROM jobs WHERE payload IS NULL AND spec <> '' \
                     ORDER BY seq LIMIT ?1",
                )
                .map_err(db_err)?;
            let rows = stmt
                .query_map([limit], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                })
                .map_err(db_err)?;
            rows.map(|r| {
                let (id, spec) = r.map_err(db_err)?;
                Ok((parse_id(&id)?, spec))
            })
            .collect()
        })
        .await
    }

    async fn unended_job_specs(
        &self,
        org: &OrgId,
        after: Option<&JobId>,
        limit: u32,
    ) -> Result<Vec<(JobId, String)>> {
        let org = org.clone();
        let after = after.map_or_else(String::new, |a| a.as_str().to_owned());
        self.read(move |conn| {
            let mut stmt = conn
                .prepare(
                    "SELECT id, spec FROM jobs WHERE org_id = ?1 AND id > ?2 \
                     AND status IN ('queued', 'running') AND spec <> '' ORDER BY id LIMIT ?3",
                )
                .map_err(db_err)?;
            let rows = stmt
                .query_map(params![org.as_str(), after, limit], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                })
                .map_err(db_err)?;
            rows.map(|r| {
                let (id, spec) = r.map_err(db_err)?;
                Ok((parse_id(&id)?, spec))
            })
            .collect()
        })
        .await
    }

    async fn set_job_signature(&self, job: &JobId, signature: &str) -> Result<()> {
        let (job, signature) = (job.clone(), signature.to_owned());
        self.write(move |conn| {
            conn.execute(
                "UPDATE jobs SET signature = ?2 WHERE id = ?1",
                params![job.as_str(), signature],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn sealed_values(
        &self,
        column: SealedColumn,
        after: &str,
        limit: u32,
    ) -> Result<Vec<(String, String)>> {
        let p = column.place();
        // The signing key is a BLOB holding the sealed text.
        let value = if column == SealedColumn::SigningKeys {
            format!("CAST({} AS TEXT)", p.column)
        } else {
            p.column.to_owned()
        };
        let sql = format!(
            "SELECT {key}, {value} FROM {table} WHERE {filter} AND {column} IS NOT NULL \
             AND {key} > ?1 ORDER BY {key} LIMIT ?2",
            key = p.key,
            table = p.table,
            filter = p.filter,
            column = p.column,
        );
        let after = after.to_owned();
        self.read(move |conn| {
            let mut stmt = conn.prepare(&sql).map_err(db_err)?;
            let rows = stmt
                .query_map(params![after, limit], |r| Ok((r.get(0)?, r.get(1)?)))
                .map_err(db_err)?;
            rows.map(|r| r.map_err(db_err)).collect()
        })
        .await
    }

    async fn replace_sealed(
        &self,
        column: SealedColumn,
        key: &str,
        old: &str,
        new: &str,
    ) -> Result<bool> {
        let p = column.place();
        let value = if column == SealedColumn::SigningKeys {
            "CAST(?{} AS BLOB)"
        } else {
            "?{}"
        };
        let (old_v, new_v) = (value.replace("{}", "3"), value.replace("{}", "2"));
        let sql = format!(
            "UPDATE {table} SET {column} = {new_v} WHERE {key} = ?1 AND {column} = {old_v}",
            table = p.table,
            column = p.column,
            key = p.key,
        );
        let (key, old, new) = (key.to_owned(), old.to_owned(), new.to_owned());
        self.write(move |conn| {
            let n = conn.execute(&sql, params![key, new, old]).map_err(db_err)?;
            Ok(n > 0)
        })
        .await
    }

    async fn seal_job_spec(&self, job: &JobId, sealed: &str, payload: &str) -> Result<()> {
        let (job, sealed, payload) = (job.clone(), sealed.to_owned(), payload.to_owned());
        self.write(move |conn| {
            conn.execute(
                "UPDATE jobs SET spec = ?2, payload = ?3 WHERE id = ?1 AND payload IS NULL",
                params![job.as_str(), sealed, payload],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }
}
