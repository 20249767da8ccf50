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
