//! Orgs, their settings, signing keys and API tokens.

use super::*;

/// The org of an API token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiPrincipal {
    /// The org the token belongs to.
    pub org_id: OrgId,
    /// The token's id.
    pub token_id: TokenId,
    /// `admin` or `read`.
    pub scope: String,
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

    /// The org and scope of an API token, by the token's hash; `None` when
    /// unknown or revoked.
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
    async fn create_api_token(
        &self,
        org: &OrgId,
        id: &TokenId,
        name: &str,
        scope: TokenScope,
        token_hash: &str,
    ) -> Result<TokenInfo>;

    /// The org's API tokens.
    async fn list_api_tokens(&self, org: &OrgId) -> Result<Vec<TokenInfo>>;

    /// Revokes an API token of the org; it authenticates nothing after.
    async fn revoke_api_token(&self, org: &OrgId, id: &TokenId) -> Result<Option<TokenInfo>>;
}
