//! The org's people, and sign-ins in flight.

use nuon_core::UserId;
use nuon_core::wire::{Role, UserInfo};

use super::*;
use crate::store::{Identity, NewApiToken, PendingSignIn, UserStore};

async fn user_by(conn: &mut PgConnection, org: &OrgId, key: &str) -> Result<Option<UserInfo>> {
    sqlx::query(AssertSqlSafe(Dialect::Postgres.find_user()))
        .bind(org.as_str())
        .bind(key)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?
        .map(|r| UserInfo::read(&r))
        .transpose()
}

/// The person, with the org's owners locked until `tx` ends, so two
/// changes at once cannot both leave the org without one.
async fn locked_user(tx: &mut Tx, org: &OrgId, id: &UserId) -> Result<Option<UserInfo>> {
    sqlx::query(
        "SELECT id FROM users WHERE org_id = $1 AND (role = 'owner' OR id = $2) FOR UPDATE",
    )
    .bind(org.as_str())
    .bind(id.as_str())
    .execute(&mut **tx)
    .await
    .map_err(db)?;
    user_by(tx, org, id.as_str()).await
}

/// Refuses to leave an org that has owners with none: `user` stops being
/// an owner unless `next` is one.
async fn keep_an_owner(
    tx: &mut Tx,
    org: &OrgId,
    user: &UserInfo,
    next: Option<Role>,
) -> Result<()> {
    if user.role != Role::Owner || next == Some(Role::Owner) {
        return Ok(());
    }
    let others: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM users WHERE org_id = $1 AND role = 'owner' AND id != $2",
    )
    .bind(org.as_str())
    .bind(user.id.as_str())
    .fetch_one(&mut **tx)
    .await
    .map_err(db)?;
    if others == 0 {
        return Err(shared::last_owner(&user.email));
    }
    Ok(())
}

#[async_trait]
impl UserStore for PostgresStore {
    async fn invite_user(
        &self,
        org: &OrgId,
        email: &str,
        role: Role,
        invited_by: &str,
    ) -> Result<UserInfo> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        let id = UserId::generate();
        sqlx::query(
            "INSERT INTO users (id, org_id, email, role, status, invited_by, created_at) \
             VALUES ($1, $2, $3, $4, 'invited', $5, $6)",
        )
        .bind(id.as_str())
        .bind(org.as_str())
        .bind(email)
        .bind(role.as_str())
        .bind(invited_by)
        .bind(now_ms())
        .execute(&mut *conn)
        .await
        .map_err(|e| match &e {
            sqlx::Error::Database(d) if d.is_unique_violation() => shared::email_taken(email),
            _ => db(e),
        })?;
        user_by(&mut conn, org, id.as_str())
            .await?
            .ok_or_else(|| corrupt("an invited person is not there"))
    }

    async fn list_users(&self, org: &OrgId) -> Result<Vec<UserInfo>> {
        self.list_in_org(org).await
    }

    async fn find_user(&self, org: &OrgId, id_or_email: &str) -> Result<Option<UserInfo>> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        user_by(&mut conn, org, id_or_email).await
    }

    async fn set_user_role(
        &self,
        org: &OrgId,
        id: &UserId,
        role: Role,
    ) -> Result<Option<UserInfo>> {
        let mut tx = self.begin().await?;
        let Some(user) = locked_user(&mut tx, org, id).await? else {
            return Ok(None);
        };
        keep_an_owner(&mut tx, org, &user, Some(role)).await?;
        sqlx::query("UPDATE users SET role = $3 WHERE org_id = $1 AND id = $2")
            .bind(org.as_str())
            .bind(id.as_str())
            .bind(role.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let user = user_by(&mut tx, org, id.as_str()).await?;
        tx.commit().await.map_err(db)?;
        Ok(user)
    }

    async fn remove_user(&self, org: &OrgId, id: &UserId) -> Result<Option<UserInfo>> {
        let mut tx = self.begin().await?;
        let Some(user) = locked_user(&mut tx, org, id).await? else {
            return Ok(None);
        };
        keep_an_owner(&mut tx, org, &user, None).await?;
        sqlx::query(
            "UPDATE api_tokens SET revoked_at = $3 \
             WHERE org_id = $1 AND user_id = $2 AND revoked_at IS NULL",
        )
        .bind(org.as_str())
        .bind(id.as_str())
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        sqlx::query("DELETE FROM users WHERE org_id = $1 AND id = $2")
            .bind(org.as_str())
            .bind(id.as_str())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        tx.commit().await.map_err(db)?;
        Ok(Some(user))
    }

    async fn begin_sign_in(&self, state_hash: &str, p: &PendingSignIn) -> Result<()> {
        let mut tx = self.begin().await?;
        sqlx::query("DELETE FROM oidc_sign_ins WHERE expires_at <= $1")
            .bind(now_ms())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        sqlx::query(
            "INSERT INTO oidc_sign_ins (state_hash, org_id, nonce, verifier, expires_at) \
             VALUES ($1, $2, $3, $4, $5)",
        )
        .bind(state_hash)
        .bind(p.org_id.as_str())
        .bind(&p.nonce)
        .bind(&p.verifier)
        .bind(p.expires_at_ms)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)
    }

    async fn take_sign_in(&self, state_hash: &str) -> Result<Option<PendingSignIn>> {
        let row = sqlx::query(
            "DELETE FROM oidc_sign_ins WHERE state_hash = $1 \
             RETURNING org_id, nonce, verifier, expires_at",
        )
        .bind(state_hash)
        .fetch_optional(&self.pool)
        .await
        .map_err(db)?;
        let Some(r) = row else { return Ok(None) };
        let pending = PendingSignIn {
            org_id: parse_id(&get::<String>(&r, 0)?)?,
            nonce: get(&r, 1)?,
            verifier: get(&r, 2)?,
            expires_at_ms: get(&r, 3)?,
        };
        Ok(Some(pending).filter(|p| p.expires_at_ms > now_ms()))
    }

    async fn sign_in_user(
        &self,
        org: &OrgId,
        who: &Identity,
        token: &NewApiToken,
    ) -> Result<Option<(UserInfo, TokenInfo)>> {
        let mut tx = self.begin().await?;
        let row = sqlx::query(
            "SELECT id, subject FROM users WHERE org_id = $1 AND email = $2 FOR UPDATE",
        )
        .bind(org.as_str())
        .bind(&who.email)
        .fetch_optional(&mut *tx)
        .await
        .map_err(db)?;
        let Some(row) = row else { return Ok(None) };
        let (id, subject): (String, Option<String>) = (get(&row, 0)?, get(&row, 1)?);
        if subject.is_some_and(|s| s != who.subject) {
            return Err(shared::subject_mismatch(&who.email));
        }
        sqlx::query(
            "UPDATE users SET status = 'active', subject = $2, name = COALESCE($3, name), \
             last_sign_in_at = $4 WHERE id = $1",
        )
        .bind(&id)
        .bind(&who.subject)
        .bind(&who.name)
        .bind(now_ms())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        let token = NewApiToken {
            user_id: Some(parse_id(&id)?),
            ..token.clone()
        };
        let token = super::orgs::insert_api_token(&mut tx, org, &token).await?;
        let user = user_by(&mut tx, org, &id)
            .await?
            .ok_or_else(|| corrupt("a person signing in is not there"))?;
        tx.commit().await.map_err(db)?;
        Ok(Some((user, token)))
    }
}
