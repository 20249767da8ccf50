//! The org's people, and OpenID Connect sign-ins in flight.

use nuon_core::UserId;
use nuon_core::now_ms;
use nuon_core::wire::{Role, UserInfo, UserStatus};

use super::orgs::{insert_api_token, new_token_info};
use super::rows::{Cells, Offset, Record};
use super::sql::{Change, Lock, Sql, Stmt, args};
use super::*;

/// A sign-in between its start and the provider's answer: what the
/// callback checks the answer against. Kept by the hash of its `state`,
/// taken once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingSignIn {
    /// The org signed in to.
    pub org_id: OrgId,
    /// The nonce the ID token must carry.
    pub nonce: String,
    /// The PKCE code verifier the token request proves the code with.
    pub verifier: String,
    /// When the start is no longer good.
    pub expires_at_ms: i64,
}

/// Who signed in, as their provider vouched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// The email address (lower case).
    pub email: String,
    /// `iss` and `sub`: the provider's id of the person, bound at the first
    /// sign-in so that a later account with the same address is refused.
    pub subject: String,
    /// Their name, when the provider gave one.
    pub name: Option<String>,
}

/// The org's people, and sign-ins in flight.
#[async_trait]
pub trait UserStore: Send + Sync + 'static {
    /// Invites a person by email address (lower case); a conflict
    /// (`email_taken`) when the org has them already.
    async fn invite_user(
        &self,
        org: &OrgId,
        email: &str,
        role: Role,
        invited_by: &str,
    ) -> Result<UserInfo>;

    /// The org's people, oldest first.
    async fn list_users(&self, org: &OrgId) -> Result<Vec<UserInfo>>;

    /// The org's person with this id or email address.
    async fn find_user(&self, org: &OrgId, id_or_email: &str) -> Result<Option<UserInfo>>;

    /// Changes a person's role (their tokens follow at once); `None` when
    /// the org has no such person. A conflict (`last_owner`) when it would
    /// leave an org that has owners with none.
    async fn set_user_role(&self, org: &OrgId, id: &UserId, role: Role)
    -> Result<Option<UserInfo>>;

    /// Removes a person and revokes every token of theirs, in one step;
    /// `None` when the org has no such person. Refused (`last_owner`) for
    /// the org's last owner.
    async fn remove_user(&self, org: &OrgId, id: &UserId) -> Result<Option<UserInfo>>;

    /// Keeps a sign-in's start under the hash of its state (and forgets
    /// the expired ones).
    async fn begin_sign_in(&self, state_hash: &str, pending: &PendingSignIn) -> Result<()>;

    /// Takes a sign-in's start by the hash of its state: once, and only
    /// before it expires.
    async fn take_sign_in(&self, state_hash: &str) -> Result<Option<PendingSignIn>>;

    /// Signs a person in, in one step: the org's person with the
    /// identity's email address becomes active, bound to its subject, and
    /// gets `token` (its `user_id` is set here). `None` when nobody of
    /// that address was invited; a conflict (`subject_mismatch`) when the
    /// address is bound to another account of the provider.
    async fn sign_in_user(
        &self,
        org: &OrgId,
        who: &Identity,
        token: &NewApiToken,
    ) -> Result<Option<(UserInfo, TokenInfo)>>;
}

impl Record for PendingSignIn {
    const COLUMNS: &'static str = "org_id, nonce, verifier, expires_at";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(PendingSignIn {
            org_id: r.id(0)?,
            nonce: r.text(1)?,
            verifier: r.text(2)?,
            expires_at_ms: r.int(3)?,
        })
    }
}

/// A person as a sign-in finds them: the subject they are bound to, if
/// any, and the rest.
struct SignInRow {
    subject: Option<String>,
    user: UserInfo,
}

impl Record for SignInRow {
    const COLUMNS: &'static str =
        "subject, id, email, role, status, name, invited_by, created_at, last_sign_in_at";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(SignInRow {
            subject: r.opt_text(0)?,
            user: UserInfo::read(&Offset(r, 1))?,
        })
    }
}

/// The org's owners and the person `id`: what a change of that person's
/// role reads, locked, so two changes at once cannot both leave the org
/// without an owner.
fn owners_and(org: &OrgId, id: &UserId) -> Stmt {
    Stmt::new(
        format!(
            "SELECT {} FROM users WHERE org_id = $1 AND (role = 'owner' OR id = $2)",
            UserInfo::COLUMNS
        ),
        args![org.as_str(), id.as_str()],
    )
}

/// [`owners_and`] locked, then read again in a statement of its own: a
/// person made an owner by a change this one waited for is counted too.
fn owners_locked(org: &OrgId, id: &UserId) -> Change {
    Change::after_lock(Lock::Rows(owners_and(org, id)), owners_and(org, id))
}

/// The person `id` among the rows [`owners_and`] read.
fn person(rows: &[UserInfo], id: &UserId) -> Option<UserInfo> {
    rows.iter().find(|u| &u.id == id).cloned()
}

/// Refuses to leave an org that has owners with none: `user` stops being
/// an owner unless `next` is one; `rows` holds every owner of the org.
fn keep_an_owner(rows: &[UserInfo], user: &UserInfo, next: Option<Role>) -> Result<()> {
    if user.role != Role::Owner || next == Some(Role::Owner) {
        return Ok(());
    }
    if rows
        .iter()
        .any(|u| u.role == Role::Owner && u.id != user.id)
    {
        return Ok(());
    }
    Err(shared::last_owner(&user.email))
}

/// The people's store, written once for both databases.
#[async_trait]
impl<S: Sql + 'static> UserStore for S {
    async fn invite_user(
        &self,
        org: &OrgId,
        email: &str,
        role: Role,
        invited_by: &str,
    ) -> Result<UserInfo> {
        let id = UserId::generate();
        self.execute_one(
            Stmt::new(
                "INSERT INTO users (id, org_id, email, role, status, invited_by, created_at) \
                 VALUES ($1, $2, $3, $4, 'invited', $5, $6)",
                args![
                    id.as_str(),
                    org.as_str(),
                    email,
                    role.as_str(),
                    invited_by,
                    now_ms(),
                ],
            )
            .taken(format!("{email} is in this org already")),
        )
        .await
        .map_err(|e| match e {
            // The address is taken: the conflict says so with its own code.
            StoreError::Conflict { .. } => shared::email_taken(email),
            e => e,
        })?;
        self.find_user(org, id.as_str())
            .await?
            .ok_or_else(|| shared::corrupt("an invited person is not there"))
    }

    async fn list_users(&self, org: &OrgId) -> Result<Vec<UserInfo>> {
        self.query(Stmt::new(
            S::DIALECT.list_in_org::<UserInfo>(),
            args![org.as_str()],
        ))
        .await
    }

    async fn find_user(&self, org: &OrgId, id_or_email: &str) -> Result<Option<UserInfo>> {
        self.query_one(Stmt::new(
            S::DIALECT.find_user(),
            args![org.as_str(), id_or_email],
        ))
        .await
    }

    async fn set_user_role(
        &self,
        org: &OrgId,
        id: &UserId,
        role: Role,
    ) -> Result<Option<UserInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.change(owners_locked(&org, &id), move |rows: Vec<UserInfo>| {
            let Some(user) = person(&rows, &id) else {
                return Ok((Vec::new(), None));
            };
            keep_an_owner(&rows, &user, Some(role))?;
            let write = Stmt::new(
                "UPDATE users SET role = $3 WHERE org_id = $1 AND id = $2",
                args![org.as_str(), id.as_str(), role.as_str()],
            );
            Ok((vec![write], Some(UserInfo { role, ..user })))
        })
        .await
    }

    async fn remove_user(&self, org: &OrgId, id: &UserId) -> Result<Option<UserInfo>> {
        let (org, id) = (org.clone(), id.clone());
        self.change(owners_locked(&org, &id), move |rows: Vec<UserInfo>| {
            let Some(user) = person(&rows, &id) else {
                return Ok((Vec::new(), None));
            };
            keep_an_owner(&rows, &user, None)?;
            let writes = vec![
                Stmt::new(
                    "UPDATE api_tokens SET revoked_at = $3 \
                     WHERE org_id = $1 AND user_id = $2 AND revoked_at IS NULL",
                    args![org.as_str(), id.as_str(), now_ms()],
                ),
                Stmt::new(
                    "DELETE FROM users WHERE org_id = $1 AND id = $2",
                    args![org.as_str(), id.as_str()],
                ),
            ];
            Ok((writes, Some(user)))
        })
        .await
    }

    async fn begin_sign_in(&self, state_hash: &str, p: &PendingSignIn) -> Result<()> {
        self.execute(vec![
            Stmt::new(
                "DELETE FROM oidc_sign_ins WHERE expires_at <= $1",
                args![now_ms()],
            ),
            Stmt::new(
                format!(
                    "INSERT INTO oidc_sign_ins (state_hash, {}) VALUES ($1, $2, $3, $4, $5)",
                    PendingSignIn::COLUMNS
                ),
                args![
                    state_hash,
                    p.org_id.as_str(),
                    p.nonce.as_str(),
                    p.verifier.as_str(),
                    p.expires_at_ms,
                ],
            ),
        ])
        .await?;
        Ok(())
    }

    async fn take_sign_in(&self, state_hash: &str) -> Result<Option<PendingSignIn>> {
        let taken: Option<PendingSignIn> = self
            .write_query(Stmt::new(
                format!(
                    "DELETE FROM oidc_sign_ins WHERE state_hash = $1 RETURNING {}",
                    PendingSignIn::COLUMNS
                ),
                args![state_hash],
            ))
            .await?
            .pop();
        Ok(taken.filter(|p| p.expires_at_ms > now_ms()))
    }

    async fn sign_in_user(
        &self,
        org: &OrgId,
        who: &Identity,
        token: &NewApiToken,
    ) -> Result<Option<(UserInfo, TokenInfo)>> {
        let (org, who, token) = (org.clone(), who.clone(), token.clone());
        let read = Stmt::new(
            format!(
                "SELECT {} FROM users WHERE org_id = $1 AND email = $2",
                SignInRow::COLUMNS
            ),
            args![org.as_str(), who.email.as_str()],
        );
        // Read, bind and give the token in one step: the person is locked
        // until the token is theirs.
        self.change_locked(read, move |rows: Vec<SignInRow>| {
            let Some(SignInRow { subject, user }) = rows.into_iter().next() else {
                return Ok((Vec::new(), None));
            };
            if subject.is_some_and(|s| s != who.subject) {
                return Err(shared::subject_mismatch(&who.email));
            }
            Ok(signed_in(&org, &who, user, token))
        })
        .await
    }
}

/// What signing `user` in as `who` writes (the person active and bound to
/// the subject, their new token), and what it answers: both as stored
/// after.
fn signed_in(
    org: &OrgId,
    who: &Identity,
    user: UserInfo,
    token: NewApiToken,
) -> (Vec<Stmt>, Option<(UserInfo, TokenInfo)>) {
    let now = now_ms();
    let token = NewApiToken {
        user_id: Some(user.id.clone()),
        ..token
    };
    let writes = vec![
        Stmt::new(
            "UPDATE users SET status = 'active', subject = $2, name = COALESCE($3, name), \
             last_sign_in_at = $4 WHERE id = $1",
            args![
                user.id.as_str(),
                who.subject.as_str(),
                who.name.clone(),
                now
            ],
        ),
        insert_api_token(org, &token, now),
    ];
    let info = new_token_info(&token, now, Some(user.email.clone()));
    let user = UserInfo {
        status: UserStatus::Active,
        name: who.name.clone().or(user.name),
        last_sign_in_at_ms: Some(now),
        ..user
    };
    (writes, Some((user, info)))
}
