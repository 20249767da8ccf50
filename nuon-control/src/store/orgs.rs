//! Orgs, their settings, signing keys and API tokens.

use nuon_core::now_ms;
use nuon_core::token::{issue_api_token, issue_runner_token};

use super::rows::{Cells, Record, TokenCheck};
use super::sql::{Arg, Sql, Stmt, args};
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

impl Record for OrgInfo {
    const COLUMNS: &'static str = "id, name";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(OrgInfo {
            id: r.id(0)?,
            name: r.text(1)?,
        })
    }
}

/// The insert of an API token of the org, made at `now`.
pub(super) fn insert_api_token(org: &OrgId, t: &NewApiToken, now: i64) -> Stmt {
    let mut args = args![
        t.id.as_str(),
        org.as_str(),
        t.name.as_str(),
        t.token_hash.as_str(),
        t.scope.as_str(),
        now,
        t.user_id.as_ref().map(|u| u.as_str()),
    ];
    args.push(Arg::Int(t.expires_at_ms));
    Stmt::new(
        "INSERT INTO api_tokens (id, org_id, name, token_hash, scope, created_at, user_id, \
         expires_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        args,
    )
}

/// The token [`insert_api_token`] stores, as listed: `user` is its
/// person's email address.
pub(super) fn new_token_info(t: &NewApiToken, now: i64, user: Option<String>) -> TokenInfo {
    TokenInfo {
        id: t.id.clone(),
        name: t.name.clone(),
        scope: shared::scope_of(t.scope.as_str()),
        created_at_ms: now,
        revoked: false,
        user_id: t.user_id.clone(),
        user,
        expires_at_ms: t.expires_at_ms,
    }
}

/// The org's one row read by `sql` (`$1` the org, `$2` the id).
async fn one_in_org<S: Sql, T: Record + Send + 'static>(
    db: &S,
    sql: String,
    org: &OrgId,
    id: &str,
) -> Result<Option<T>> {
    db.query_one(Stmt::new(sql, args![org.as_str(), id])).await
}

/// The orgs' store, written once for both databases.
#[async_trait]
impl<S: Sql + 'static> OrgStore for S {
    async fn create_org(&self, id: &OrgId, name: &str, signing_key: &[u8]) -> Result<NewOrg> {
        let token_id = TokenId::generate();
        let token = issue_api_token(&token_id);
        let build_id = RunnerId::generate();
        let build_token = issue_runner_token(&build_id);
        let now = now_ms();
        self.execute(vec![
            Stmt::new(
                "INSERT INTO orgs (id, name, signing_key, created_at) VALUES ($1, $2, $3, $4)",
                args![id.as_str(), name, signing_key.to_vec(), now],
            )
            .taken(format!("an org named {name:?} already exists")),
            Stmt::new(
                "INSERT INTO api_tokens (id, org_id, name, token_hash, scope, created_at) \
                 VALUES ($1, $2, 'admin', $3, 'admin', $4)",
                args![token_id.as_str(), id.as_str(), token.hash.as_str(), now],
            ),
            Stmt::new(
                "INSERT INTO runners (id, org_id, name, token_hash, created_at, role) \
                 VALUES ($1, $2, 'build', $3, $4, 'build')",
                args![
                    build_id.as_str(),
                    id.as_str(),
                    build_token.hash.as_str(),
                    now
                ],
            ),
        ])
        .await?;
        Ok(NewOrg {
            org_id: id.clone(),
            admin_token: token,
            build_runner: build_id,
            build_runner_token: build_token,
        })
    }

    async fn set_org_limit(&self, name: &str, max_running: Option<u32>) -> Result<OrgId> {
        let mut args = args![name];
        args.push(Arg::Int(max_running.map(i64::from)));
        let id: Option<String> = self
            .write_query(Stmt::new(
                "UPDATE orgs SET max_running = $2 WHERE name = $1 RETURNING id",
                args,
            ))
            .await?
            .pop();
        shared::parse_id(&id.ok_or_else(|| shared::no_org(name))?)
    }

    async fn count_orgs(&self) -> Result<u64> {
        let n: Option<i64> = self
            .query_one(Stmt::new("SELECT count(*) FROM orgs", Vec::new()))
            .await?;
        Ok(n.unwrap_or(0) as u64)
    }

    async fn setting_or_insert(&self, name: &str, proposed: &str) -> Result<String> {
        self.execute_one(Stmt::new(
            "INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING",
            args![name, proposed],
        ))
        .await?;
        // A new statement: it sees a value another replica stored meanwhile.
        self.query_one(Stmt::new(
            "SELECT value FROM settings WHERE name = $1",
            args![name],
        ))
        .await?
        .ok_or_else(|| shared::corrupt(format!("the setting {name:?} is not there")))
    }

    async fn authenticate_api(&self, token_hash: &str) -> Result<Option<ApiPrincipal>> {
        let check: Option<TokenCheck> = self
            .query_one(Stmt::new(S::DIALECT.authenticate_api(), args![token_hash]))
            .await?;
        Ok(check.and_then(|c| c.0))
    }

    async fn signing_key(&self, org: &OrgId) -> Result<Option<Vec<u8>>> {
        self.query_one(Stmt::new(
            "SELECT signing_key FROM orgs WHERE id = $1",
            args![org.as_str()],
        ))
        .await
    }

    async fn org_named(&self, name: &str) -> Result<OrgId> {
        let id: Option<String> = self
            .query_one(Stmt::new(
                "SELECT id FROM orgs WHERE name = $1",
                args![name],
            ))
            .await?;
        shared::parse_id(&id.ok_or_else(|| shared::no_org(name))?)
    }

    async fn key_rotations(&self, org: &OrgId) -> Result<Vec<SignedRotation>> {
        let text: Option<Option<String>> = self
            .query_one(Stmt::new(
                "SELECT key_rotations FROM orgs WHERE id = $1",
                args![org.as_str()],
            ))
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
        let changed = self
            .execute_one(Stmt::new(
                "UPDATE orgs SET signing_key = $3, key_rotations = $4 \
                 WHERE id = $1 AND signing_key = $2",
                args![
                    org.as_str(),
                    previous.to_vec(),
                    next.to_vec(),
                    shared::rotations_text(rotations),
                ],
            ))
            .await?;
        if changed == 0 {
            return Err(shared::key_rotated_meanwhile(org));
        }
        Ok(())
    }

    async fn get_org(&self, org: &OrgId) -> Result<Option<OrgInfo>> {
        self.query_one(Stmt::new(
            format!("SELECT {} FROM orgs WHERE id = $1", OrgInfo::COLUMNS),
            args![org.as_str()],
        ))
        .await
    }

    async fn create_api_token(&self, org: &OrgId, token: &NewApiToken) -> Result<TokenInfo> {
        self.execute_one(insert_api_token(org, token, now_ms()))
            .await?;
        one_in_org(
            self,
            S::DIALECT.get_in_org::<TokenInfo>(),
            org,
            token.id.as_str(),
        )
        .await?
        .ok_or_else(|| shared::corrupt("a new API token is not there"))
    }

    async fn list_api_tokens(&self, org: &OrgId) -> Result<Vec<TokenInfo>> {
        self.query(Stmt::new(
            S::DIALECT.list_in_org::<TokenInfo>(),
            args![org.as_str()],
        ))
        .await
    }

    async fn revoke_api_token(&self, org: &OrgId, id: &TokenId) -> Result<Option<TokenInfo>> {
        self.execute_one(Stmt::new(
            S::DIALECT.revoke_in_org::<TokenInfo>(),
            args![org.as_str(), id.as_str(), now_ms()],
        ))
        .await?;
        one_in_org(self, S::DIALECT.get_in_org::<TokenInfo>(), org, id.as_str()).await
    }
}
