//! Runners and their tokens.

use super::*;
use nuon_core::wire::ErrorCode;

#[async_trait]
impl RunnerStore for SqliteStore {
    async fn create_runner(
        &self,
        org: &OrgId,
        id: &RunnerId,
        name: &str,
        token_hash: &str,
    ) -> Result<RunnerInfo> {
        let (org, id, name, hash) = (
            org.clone(),
            id.clone(),
            name.to_owned(),
            token_hash.to_owned(),
        );
        self.write(move |conn| {
            let now = now_ms();
            conn.execute(
                "INSERT INTO runners (id, org_id, name, token_hash, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![id.as_str(), org.as_str(), name, hash, now],
            )
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    StoreError::Conflict {
                        code: ErrorCode::NameTaken,
                        message: format!(
                            "a runner named {name:?} already exists in this org; pick another name or revoke it first"
                        ),
                        acked_seq: None,
                    }
                }
                e => db_err(e),
            })?;
            Ok(RunnerInfo {
                id,
                name,
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
        })
        .await
    }

    async fn list_runners(&self, org: &OrgId) -> Result<Vec<RunnerInfo>> {
        self.list_in_org(org).await
    }

    async fn find_runner(&self, org: &OrgId, name_or_id: &str) -> Result<Option<RunnerInfo>> {
        self.find_in_org(org, name_or_id).await
    }

    async fn revoke_runner(&self, org: &OrgId, id: &RunnerId) -> Result<Option<RunnerInfo>> {
        self.revoke_in_org(org, id.as_str()).await
    }

    async fn rotate_runner_token(
        &self,
        org: &OrgId,
        id: &RunnerId,
        token_hash: &str,
    ) -> Result<Option<RunnerInfo>> {
        let (o, i, hash) = (org.clone(), id.clone(), token_hash.to_owned());
        let changed = self
            .write(move |conn| {
                conn.execute(
                    "UPDATE runners SET token_hash = ?3, revoked_at = NULL, session = NULL \
                     WHERE org_id = ?1 AND id = ?2",
                    params![o.as_str(), i.as_str(), hash],
                )
                .map_err(db_err)
            })
            .await?;
        if changed == 0 {
            return Ok(None);
        }
        self.find_in_org(org, id.as_str()).await
    }

    async fn authenticate_runner(&self, token_hash: &str) -> Result<Option<RunnerPrincipal>> {
        let hash = token_hash.to_owned();
        self.read(move |conn| {
            type Row = (String, String, Option<String>, Option<i64>);
            let row: Option<Row> = one_row(
                conn,
                "SELECT id, org_id, session, last_seen_at FROM runners \
                 WHERE token_hash = ?1 AND revoked_at IS NULL",
                [hash],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )?;
            Ok(row.and_then(|(id, org, session, last_seen_ms)| {
                Some(RunnerPrincipal {
                    runner_id: id.parse().ok()?,
                    org_id: org.parse().ok()?,
                    session,
                    last_seen_ms,
                })
            }))
        })
        .await
    }

    async fn build_runner(&self, org: &OrgId) -> Result<Option<RunnerId>> {
        let org = org.clone();
        self.read(move |conn| {
            one_row(conn,
                "SELECT id FROM runners WHERE org_id = ?1 AND role = 'build' AND revoked_at IS NULL \
                 ORDER BY created_at LIMIT 1",
                [org.as_str()],
                |r| id_at(r, 0),
            )
        })
        .await
    }

    async fn set_runner_session(
        &self,
        runner: &RunnerId,
        expected: Option<&str>,
        session: &str,
    ) -> Result<bool> {
        let (runner, expected, session) = (
            runner.clone(),
            expected.map(str::to_owned),
            session.to_owned(),
        );
        self.write(move |conn| {
            let n = conn
                .execute(
                    "UPDATE runners SET session = ?3 WHERE id = ?1 AND session IS ?2",
                    params![runner.as_str(), expected, session],
                )
                .map_err(db_err)?;
            Ok(n == 1)
        })
        .await
    }

    async fn set_runner_telemetry(&self, runner: &RunnerId, telemetry: &str) -> Result<()> {
        let (runner, telemetry) = (runner.clone(), telemetry.to_owned());
        self.write(move |conn| {
            conn.prepare_cached("UPDATE runners SET telemetry = ?2 WHERE id = ?1")
                .and_then(|mut s| s.execute(params![runner.as_str(), telemetry]))
                .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn all_runners(&self) -> Result<Vec<(OrgId, RunnerInfo)>> {
        self.read(|conn| {
            let mut stmt = conn
                .prepare_cached(&format!(
                    "SELECT {}, org_id FROM runners WHERE revoked_at IS NULL",
                    <RunnerInfo as Record>::COLUMNS
                ))
                .map_err(db_err)?;
            let mut rows = stmt.query([]).map_err(db_err)?;
            let mut out = Vec::new();
            while let Some(r) = rows.next().map_err(db_err)? {
                out.push((r.id(10)?, RunnerInfo::read(r)?));
            }
            Ok(out)
        })
        .await
    }

    async fn set_runner_health(
        &self,
        runner: &RunnerId,
        expected: RunnerHealth,
        health: RunnerHealth,
        at_ms: i64,
    ) -> Result<bool> {
        let runner = runner.clone();
        self.write(move |conn| {
            let n = conn
                .execute(
                    "UPDATE runners SET health = ?3, health_since = ?4 \
                     WHERE id = ?1 AND COALESCE(health, 'unknown') = ?2",
                    params![runner.as_str(), expected.as_str(), health.as_str(), at_ms],
                )
                .map_err(db_err)?;
            Ok(n == 1)
        })
        .await
    }
}
