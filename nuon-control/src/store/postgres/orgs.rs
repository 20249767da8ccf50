//! Orgs, their settings, signing keys and API tokens.

use super::*;
use crate::store::NewApiToken;
use crate::store::rows::TokenCheck;

/// Stores an API token of the org in `tx`; the token as listed.
pub(super) async fn insert_api_token(
    tx: &mut PgConnection,
    org: &OrgId,
    t: &NewApiToken,
) -> Result<TokenInfo> {
    sqlx::query(
        "INSERT INTO api_tokens (id, org_id, name, token_hash, scope, created_at, user_id, expires_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(t.id.as_str())
    .bind(org.as_str())
    .bind(&t.name)
    .bind(&t.token_hash)
    .bind(t.scope.as_str())
    .bind(now_ms())
    .bind(t.user_id.as_ref().map(|u| u.as_str()))
    .bind(t.expires_at_ms)
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    sqlx::query(AssertSqlSafe(Dialect::Postgres.get_in_org::<TokenInfo>()))
        .bind(org.as_str())
        .bind(t.id.as_str())
        .fetch_one(&mut *tx)
        .await
        .map_err(db)
        .and_then(|r| TokenInfo::read(&r))
}

#[async_trait]
impl OrgStore for PostgresStore {
    async fn create_org(&self, id: &OrgId, name: &str, signing_key: &[u8]) -> Result<NewOrg> {
        let mut tx = self.begin().await?;
        let org_id = id.clone();
        let token_id = TokenId::generate();
        let token = issue_api_token(&token_id);
        let now = now_ms();
        sqlx::query("INSERT INTO orgs (id, name, signing_key, created_at) VALUES ($1, $2, $3, $4)")
            .bind(org_id.as_str())
            .bind(name)
            .bind(signing_key)
            .bind(now)
            .execute(&mut *tx)
            .await
            .map_err(|e| taken(e, || format!("an org named {name:?} already exists")))?;
        sqlx::query(
            "INSERT INTO api_tokens (id, org_id, name, token_hash, scope, created_at) \
             VALUES ($1, $2, 'admin', $3, 'admin', $4)",
        )
        .bind(token_id.as_str())
        .bind(org_id.as_str())
        .bind(&token.hash)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let build_id = RunnerId::generate();
        let build_token = issue_runner_token(&build_id);
        sqlx::query(
            "INSERT INTO runners (id, org_id, name, token_hash, created_at, role) \
             VALUES ($1, $2, 'build', $3, $4, 'build')",
        )
        .bind(build_id.as_str())
        .bind(org_id.as_str())
        .bind(&build_token.hash)
        .bind(now)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(NewOrg {
            org_id,
            admin_token: token,
            build_runner: build_id,
            build_runner_token: build_token,
        })
    }

    async fn set_org_limit(&self, name: &str, max_running: Option<u32>) -> Result<OrgId> {
        let id: Option<String> =
            sqlx::query_scalar("UPDATE orgs SET max_running = $2 WHERE name = $1 RETURNING id")
                .bind(name)
                .bind(max_running.map(i64::from))
                .fetch_optional(&self.pool)
                .await
                .map_err(db)?;
        parse_id(&id.ok_or_else(|| shared::no_org(name))?)
    }

    async fn count_orgs(&self) -> Result<u64> {
        let n: i64 = sqlx::query_scalar("SELECT count(*) FROM orgs")
            .fetch_one(&self.pool)
            .await
            .map_err(db)?;
        Ok(n as u64)
    }

    async fn setting_or_insert(&self, name: &str, proposed: &str) -> Result<String> {
        sqlx::query(
            "INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
        )
        .bind(name)
        .bind(proposed)
        .execute(&self.pool)
        .await
        .map_err(db)?;
        // A new statement: it sees a value another replica stored meanwhile.
        sqlx::query_scalar("SELECT value FROM settings WHERE name = $1")
            .bind(name)
            .fetch_one(&self.pool)
            .await
            .map_err(db)
    }

    async fn authenticate_api(&self, token_hash: &str) -> Result<Option<ApiPrincipal>> {
        let row = sqlx::query(AssertSqlSafe(Dialect::Postgres.authenticate_api()))
            .bind(token_hash)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        Ok(row
            .map(|r| TokenCheck::read(&r))
            .transpose()?
            .and_then(|c| c.0))
    }

    async fn signing_key(&self, org: &OrgId) -> Result<Option<Vec<u8>>> {
        sqlx::query_scalar("SELECT signing_key FROM orgs WHERE id = $1")
            .bind(org.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)
    }

    async fn org_named(&self, name: &str) -> Result<OrgId> {
        let id: Option<String> = sqlx::query_scalar("SELECT id FROM orgs WHERE name = $1")
            .bind(name)
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?;
        parse_id(&id.ok_or_else(|| shared::no_org(name))?)
    }

    async fn key_rotations(&self, org: &OrgId) -> Result<Vec<SignedRotation>> {
        let text: Option<Option<String>> =
            sqlx::query_scalar("SELECT key_rotations FROM orgs WHERE id = $1")
                .bind(org.as_str())
                .fetch_optional(&self.pool)
                .await
                .map_err(db)?;
        shared::rotations_from(text.flatten())
    }

    async fn rotate_signing_key(
        &self,
        org: &OrgId,
        previous: &[u8],
        next: &[u8],
        rotations: &[SignedRotation],
    ) -> Result<()> {
        let changed = sqlx::query(
            "UPDATE orgs SET signing_key = $3, key_rotations = $4 \
             WHERE id = $1 AND signing_key = $2",
        )
        .bind(org.as_str())
        .bind(previous)
        .bind(next)
        .bind(shared::rotations_text(rotations))
        .execute(&self.pool)
        .await
        .map_err(db)?
        .rows_affected();
        if changed == 0 {
            return Err(shared::key_rotated_meanwhile(org));
        }
        Ok(())
    }

    async fn get_org(&self, org: &OrgId) -> Result<Option<OrgInfo>> {
        sqlx::query("SELECT id, name FROM orgs WHERE id = $1")
            .bind(org.as_str())
            .fetch_optional(&self.pool)
            .await
            .map_err(db)?
            .map(|r| {
                Ok(OrgInfo {
                    id: parse_id(&get::<String>(&r, 0)?)?,
                    name: get(&r, 1)?,
                })
            })
            .transpose()
    }

    async fn create_api_token(&self, org: &OrgId, token: &NewApiToken) -> Result<TokenInfo> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        insert_api_token(&mut conn, org, token).await
    }

    async fn list_api_tokens(&self, org: &OrgId) -> Result<Vec<TokenInfo>> {
        self.list_in_org(org).await
    }

    async fn revoke_api_token(&self, org: &OrgId, id: &TokenId) -> Result<Option<TokenInfo>> {
        self.revoke_in_org(org, id.as_str()).await
    }
}
