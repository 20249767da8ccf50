//! The org's people, and OpenID Connect sign-ins in flight.

use nuon_core::UserId;
use nuon_core::wire::{Role, UserInfo};

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
