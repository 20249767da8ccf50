//! Orgs, their settings, signing keys and API tokens.

use super::*;
use crate::store::NewApiToken;
use crate::store::rows::TokenCheck;
use nuon_core::wire::ErrorCode;

/// Stores an API token of the org; the token as listed.
pub(super) fn insert_api_token(
    conn: &Connection,
    org: &OrgId,
    t: &NewApiToken,
) -> Result<TokenInfo> {
    conn.execute(
        "INSERT INTO api_tokens (id, org_id, name, token_hash, scope, created_at, user_id, expires_at) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            t.id.as_str(),
            org.as_str(),
            t.name,
            t.token_hash,
            t.scope.as_str(),
            now_ms(),
            t.user_id.as_ref().map(|u| u.as_str()),
            t.expires_at_ms
        ],
    )
    .map_err(db_err)?;
    record(
        conn,
        &Dialect::Sqlite.get_in_org::<TokenInfo>(),
        params![org.as_str(), t.id.as_str()],
    )?
    .ok_or_else(|| shared::corrupt("a new API token is not there"))
}

#[async_trait]
impl OrgStore for SqliteStore {
    async fn create_org(&self, id: &OrgId, name: &str, signing_key: &[u8]) -> Result<NewOrg> {
        let name = name.to_owned();
        let org_id = id.clone();
        let key = signing_key.to_vec();
        self.write(move |conn| {
            let token_id = TokenId::generate();
            let token = issue_api_token(&token_id);
            let now = now_ms();
            conn.execute(
                "INSERT INTO orgs (id, name, signing_key, created_at) VALUES (?1, ?2, ?3, ?4)",
                params![org_id.as_str(), name, key, now],
            )
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    StoreError::Conflict {
                        code: ErrorCode::NameTaken,
                        message: format!("an org named {name:?} already exists"),
                        acked_seq: None,
                    }
                }
                e => db_err(e),
            })?;
            conn.execute(
                "INSERT INTO api_tokens (id, org_id, name, token_hash, scope, created_at) \
                 VALUES (?1, ?2, 'admin', ?3, 'admin', ?4)",
                params![token_id.as_str(), org_id.as_str(), token.hash, now],
            )
            .map_err(db_err)?;
            let build_id = RunnerId::generate();
            let build_token = issue_runner_token(&build_id);
            conn.execute(
                "INSERT INTO runners (id, org_id, name, token_hash, created_at, role) \
                 VALUES (?1, ?2, 'build', ?3, ?4, 'build')",
                params![build_id.as_str(), org_id.as_str(), build_token.hash, now],
            )
            .map_err(db_err)?;
            Ok(NewOrg {
                org_id,
                admin_token: token,
                build_runner: build_id,
                build_runner_token: build_token,
            })
        })
        .await
    }

    async fn set_org_limit(&self, name: &str, max_running: Option<u32>) -> Result<OrgId> {
        let name = name.to_owned();
        self.write(move |conn| {
            let id: Option<String> = conn
                .query_row(
                    "UPDATE orgs SET max_running = ?2 WHERE name = ?1 RETURNING id",
                    params![name, max_running],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err)?;
            parse_id(&id.ok_or_else(|| shared::no_org(&name))?)
        })
        .await
    }

    async fn count_orgs(&self) -> Result<u64> {
        self.read(|conn| {
            conn.query_row("SELECT count(*) FROM orgs", [], |r| r.get::<_, i64>(0))
                .map(|n| n as u64)
                .map_err(db_err)
        })
        .await
    }

    async fn setting_or_insert(&self, name: &str, proposed: &str) -> Result<String> {
        let (name, proposed) = (name.to_owned(), proposed.to_owned());
        self.write(move |conn| {
            conn.execute(
                "INSERT INTO settings (name, value) VALUES (?1, ?2) ON CONFLICT (name) DO NOTHING",
                params![name, proposed],
            )
            .map_err(db_err)?;
            conn.query_row(
                "SELECT value FROM settings WHERE name = ?1",
                params![name],
                |r| r.get(0),
            )
            .map_err(db_err)
        })
        .await
    }

    async fn authenticate_api(&self, token_hash: &str) -> Result<Option<ApiPrincipal>> {
        let hash = token_hash.to_owned();
        self.read(move |conn| {
            let check: Option<TokenCheck> =
                record(conn, &Dialect::Sqlite.authenticate_api(), [hash])?;
            Ok(check.and_then(|c| c.0))
        })
        .await
    }

    async fn signing_key(&self, org: &OrgId) -> Result<Option<Vec<u8>>> {
        let org = org.clone();
        self.read(move |conn| {
            one_row(
                conn,
                "SELECT signing_key FROM orgs WHERE id = ?1",
                [org.as_str()],
                |r| r.get(0),
            )
        })
        .await
    }

    async fn org_named(&self, name: &str) -> Result<OrgId> {
        let name = name.to_owned();
        self.read(move |conn| {
            let id: Option<String> =
                one_row(conn, "SELECT id FROM orgs WHERE name = ?1", [&name], |r| {
                    r.get(0)
                })?;
            parse_id(&id.ok_or_else(|| shared::no_org(&name))?)
        })
        .await
    }

    async fn key_rotations(&self, org: &OrgId) -> Result<Vec<SignedRotation>> {
        let org = org.clone();
        let text: Option<Option<String>> = self
            .read(move |conn| {
                one_row(
                    conn,
                    "SELECT key_rotations FROM orgs WHERE id = ?1",
                    [org.as_str()],
                    |r| r.get(0),
                )
            })
            .await?;
        shared::rotations_from(text.flatten())
    }

    async fn rotate_signing_key(
        &self,
        org: &OrgId,
        previous: &[u8],
        next: &[u8],
        rotations: &[SignedRotation],
    ) -> Result<()> {
        let (org, previous, next) = (org.clone(), previous.to_vec(), next.to_vec());
        let rotations = shared::rotations_text(rotations);
        self.write(move |conn| {
            let changed = conn
                .execute(
                    "UPDATE orgs SET signing_key = ?3, key_rotations = ?4 \
                     WHERE id = ?1 AND signing_key = ?2",
                    params![org.as_str(), previous, next, rotations],
                )
                .map_err(db_err)?;
            if changed == 0 {
                return Err(shared::key_rotated_meanwhile(&org));
            }
            Ok(())
        })
        .await
    }

    async fn get_org(&self, org: &OrgId) -> Result<Option<OrgInfo>> {
        let org = org.clone();
        self.read(move |conn| {
            one_row(
                conn,
                "SELECT id, name FROM orgs WHERE id = ?1",
                [org.as_str()],
                |r| {
                    Ok(OrgInfo {
                        id: id_at(r, 0)?,
                        name: r.get(1)?,
                    })
                },
            )
        })
        .await
    }

    async fn create_api_token(&self, org: &OrgId, token: &NewApiToken) -> Result<TokenInfo> {
        let (org, token) = (org.clone(), token.clone());
        self.write(move |conn| insert_api_token(conn, &org, &token))
            .await
    }

    async fn list_api_tokens(&self, org: &OrgId) -> Result<Vec<TokenInfo>> {
        self.list_in_org(org).await
    }

    async fn revoke_api_token(&self, org: &OrgId, id: &TokenId) -> Result<Option<TokenInfo>> {
        self.revoke_in_org(org, id.as_str()).await
    }
}
