//! Orgs, their settings, signing keys and API tokens.

use super::*;

/// The org of an API token, and the person it belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiPrincipal {
    /// The org the token belongs to.
    pub org_id: OrgId,
    /// The token's id.
    pub token_id: TokenId,
    /// `admin`, `deployer` or `read`: the token's scope, never more than
    /// its person's role allows now.
    pub scope: String,
    /// The person; none for a service account's token.
    pub user: Option<PrincipalUser>,
    /// A customer acting through the invitation's link on the installer
    /// page (with no token: `token_id` is then an id no token has, and
    /// `scope` is `customer`, which no check of the API lets through).
    pub customer: Option<nuon_core::InvitationId>,
}

impl ApiPrincipal {
    /// Who acts, as the audit trail and records name them: the person's
    /// email address, the service account's token id, or the customer and
    /// their invitation.
    pub fn actor(&self) -> String {
        match (&self.customer, &self.user) {
            (Some(inv), _) => format!("customer (invitation {inv})"),
            (None, Some(u)) => u.email.clone(),
            (None, None) => self.token_id.to_string(),
        }
    }
}

/// The person behind an API token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrincipalUser {
    /// Their id.
    pub id: nuon_core::UserId,
    /// Their email address.
    pub email: String,
    /// Their role now.
    pub role: nuon_core::wire::Role,
}

/// An API token to store (only its hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewApiToken {
    /// Its id.
    pub id: TokenId,
    /// What it is for.
    pub name: String,
    /// What it may do.
    pub scope: TokenScope,
    /// The hash of its secret.
    pub token_hash: String,
    /// The person it belongs to; none for a service account's.
    pub user_id: Option<nuon_core::UserId>,
    /// When it stops working; none for never.
    pub expires_at_ms: Option<i64>,
}

/// A new org with its first admin token.
#[derive(Debug, Clone)]
pub struct NewOrg {
    /// The org.
    pub org_id: OrgId,
    /// Its admin API token (the secret, to hand out once).
    pub admin_token: IssuedToken,
    /// Its build runner.
    pub build_runner: RunnerId,
    /// The build runner's token (the secret, to hand out once).
    pub build_runner_token: IssuedToken,
}

/// Orgs, their settings, signing keys and API tokens.
#[async_trait]
pub trait OrgStore: Send + Sync + 'static {
    /// Creates the org `id` with its signing key (as it is kept: sealed,
    /// see [`crate::keys`]) and an admin token.
    async fn create_org(&self, id: &OrgId, name: &str, signing_key: &[u8]) -> Result<NewOrg>;

    /// Sets (or, with `None`, lifts) the limit on how many jobs of the org
    /// named `name` run at once; returns the org. Jobs already running are
    /// left alone: the limit holds back the next claims.
    async fn set_org_limit(&self, name: &str, max_running: Option<u32>) -> Result<OrgId>;

    /// How many orgs exist.
    async fn count_orgs(&self) -> Result<u64>;

    /// The setting `name`: `proposed` is stored unless a value is there
    /// already (set by this or another replica); returns what is stored.
    async fn setting_or_insert(&self, name: &str, proposed: &str) -> Result<String>;

    /// The org, scope and person of an API token, by the token's hash;
    /// `None` when unknown, revoked, expired, or its person was removed.
    async fn authenticate_api(&self, token_hash: &str) -> Result<Option<ApiPrincipal>>;

    /// An org's job-signing key, as it is kept (sealed).
    async fn signing_key(&self, org: &OrgId) -> Result<Option<Vec<u8>>>;

    /// The org named `name`.
    async fn org_named(&self, name: &str) -> Result<OrgId>;

    /// The rotations of the org's signing key, oldest first, each signed
    /// by the key it replaced (see [`crate::keys::rotate_signing_key`]).
    async fn key_rotations(&self, org: &OrgId) -> Result<Vec<SignedRotation>>;

    /// Replaces the org's signing key `previous` (as kept) by `next`, and
    /// its rotations by `rotations`. A conflict when the key is no longer
    /// `previous` (another rotation won).
    async fn rotate_signing_key(
        &self,
        org: &OrgId,
        previous: &[u8],
        next: &[u8],
        rotations: &[SignedRotation],
    ) -> Result<()>;

    /// The org's id and name.
    async fn get_org(&self, org: &OrgId) -> Result<Option<OrgInfo>>;

    /// Stores a new API token of the org (only its hash).
    async fn create_api_token(&self, org: &OrgId, token: &NewApiToken) -> Result<TokenInfo>;

    /// The org's API tokens.
    async fn list_api_tokens(&self, org: &OrgId) -> Result<Vec<TokenInfo>>;

    /// Revokes an API token of the org; it authenticates nothing after.
    async fn revoke_api_token(&self, org: &OrgId, id: &TokenId) -> Result<Option<TokenInfo>>;
}
