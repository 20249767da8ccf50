//! The org's people, and sign-ins in flight.

use nuon_core::UserId;
use nuon_core::wire::{Role, UserInfo};

use super::*;
use crate::store::{Identity, NewApiToken, PendingSignIn, UserStore};

fn user_by(conn: &Connection, org: &OrgId, key: &str) -> Result<Option<UserInfo>> {
    record(
        conn,
        &Dialect::Sqlite.find_user(),
        params![org.as_str(), key],
    )
}

/// Refuses to leave an org that has owners with none: `user` stops being
/// an owner unless `next` is one.
fn keep_an_owner(
    conn: &Connection,
    org: &OrgId,
    user: &UserInfo,
    next: Option<Role>,
) -> Result<()> {
    if user.role != Role::Owner || next == Some(Role::Owner) {
        return Ok(());
    }
    let others: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM users WHERE org_id = ?1 AND role = 'owner' AND id != ?2",
            params![org.as_str(), user.id.as_str()],
            |r| r.get(0),
        )
        .map_err(db_err)?;
    if others == 0 {
        return Err(shared::last_owner(&user.email));
    }
    Ok(())
}

#[async_trait]
impl UserStore for SqliteStore {
    async fn invite_user(
        &self,
        org: &OrgId,
        email: &str,
        role: Role,
        invited_by: &str,
    ) -> Result<UserInfo> {
        let (org, email, by) = (org.clone(), email.to_owned(), invited_by.to_owned());
        self.write(move |conn| {
            let id = UserId::generate();
            conn.execute(
                "INSERT INTO users (id, org_id, email, role, status, invited_by, created_at) \
                 VALUES (?1, ?2, ?3, ?4, 'invited', ?5, ?6)",
                params![
                    id.as_str(),
                    org.as_str(),
                    email,
                    role.as_str(),
                    by,
                    now_ms()
                ],
            )
            .map_err(|e| match e {
                rusqlite::Error::SqliteFailure(f, _)
                    if f.code == rusqlite::ErrorCode::ConstraintViolation =>
                {
                    shared::email_taken(&email)
                }
                e => db_err(e),
            })?;
            user_by(conn, &org, id.as_str())?
                .ok_or_else(|| shared::corrupt("an invited person is not there"))
        })
        .await
    }

    async fn list_users(&self, org: &OrgId) -> Result<Vec<UserInfo>> {
        self.list_in_org(org).await
    }

    async fn find_user(&self, org: &OrgId, id_or_email: &str) -> Result<Option<UserInfo>> {
        let (org, key) = (org.clone(), id_or_email.to_owned());
        self.read(move |conn| user_by(conn, &org, &key)).await
    }

    async fn set_user_role(
        &self,
        org: &OrgId,
        id: &UserId,
        role: Role,
    ) -> Result<Option<UserInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            let Some(user) = user_by(conn, &org, id.as_str())? else {
                return Ok(None);
            };
            keep_an_owner(conn, &org, &user, Some(role))?;
            conn.execute(
                "UPDATE users SET role = ?3 WHERE org_id = ?1 AND id = ?2",
                params![org.as_str(), id.as_str(), role.as_str()],
            )
            .map_err(db_err)?;
            user_by(conn, &org, id.as_str())
        })
        .await
    }

    async fn remove_user(&self, org: &OrgId, id: &UserId) -> Result<Option<UserInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.write(move |conn| {
            let Some(user) = user_by(conn, &org, id.as_str())? else {
                return Ok(None);
            };
            keep_an_owner(conn, &org, &user, None)?;
            conn.execute(
                "UPDATE api_tokens SET revoked_at = ?3 \
                 WHERE org_id = ?1 AND user_id = ?2 AND revoked_at IS NULL",
                params![org.as_str(), id.as_str(), now_ms()],
            )
            .map_err(db_err)?;
            conn.execute(
                "DELETE FROM users WHERE org_id = ?1 AND id = ?2",
                params![org.as_str(), id.as_str()],
            )
            .map_err(db_err)?;
            Ok(Some(user))
        })
        .await
    }

    async fn begin_sign_in(&self, state_hash: &str, pending: &PendingSignIn) -> Result<()> {
        let (hash, p) = (state_hash.to_owned(), pending.clone());
        self.write(move |conn| {
            conn.execute(
                "DELETE FROM oidc_sign_ins WHERE expires_at <= ?1",
                [now_ms()],
            )
            .map_err(db_err)?;
            conn.execute(
                "INSERT INTO oidc_sign_ins (state_hash, org_id, nonce, verifier, expires_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                params![
                    hash,
                    p.org_id.as_str(),
                    p.nonce,
                    p.verifier,
                    p.expires_at_ms
                ],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn take_sign_in(&self, state_hash: &str) -> Result<Option<PendingSignIn>> {
        let hash = state_hash.to_owned();
        self.write(move |conn| {
            let row: Option<(String, String, String, i64)> = one_row(
                conn,
                "DELETE FROM oidc_sign_ins WHERE state_hash = ?1 \
                 RETURNING org_id, nonce, verifier, expires_at",
                [hash],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )?;
            row.filter(|r| r.3 > now_ms())
                .map(|(org, nonce, verifier, expires_at_ms)| {
                    Ok(PendingSignIn {
                        org_id: parse_id(&org)?,
                        nonce,
                        verifier,
                        expires_at_ms,
                    })
                })
                .transpose()
        })
        .await
    }

    async fn sign_in_user(
        &self,
        org: &OrgId,
        who: &Identity,
        token: &NewApiToken,
    ) -> Result<Option<(UserInfo, TokenInfo)>> {
        let (org, who, token) = (org.clone(), who.clone(), token.clone());
        self.write(move |conn| {
            let row: Option<(String, Option<String>)> = one_row(
                conn,
                "SELECT id, subject FROM users WHERE org_id = ?1 AND email = ?2",
                params![org.as_str(), who.email],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?;
            let Some((id, subject)) = row else {
                return Ok(None);
            };
            if subject.is_some_and(|s| s != who.subject) {
                return Err(shared::subject_mismatch(&who.email));
            }
            conn.execute(
                "UPDATE users SET status = 'active', subject = ?2, name = COALESCE(?3, name), \
                 last_sign_in_at = ?4 WHERE id = ?1",
                params![id, who.subject, who.name, now_ms()],
            )
            .map_err(db_err)?;
            let token = NewApiToken {
                user_id: Some(parse_id(&id)?),
                ..token
            };
            let token = super::orgs::insert_api_token(conn, &org, &token)?;
            let user = user_by(conn, &org, &id)?
                .ok_or_else(|| shared::corrupt("a person signing in is not there"))?;
            Ok(Some((user, token)))
        })
        .await
    }
}
