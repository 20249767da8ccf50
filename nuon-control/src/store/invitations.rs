//! Invitations: the links a vendor sends its customers to the installer
//! page. A link's token is kept as its hash; spending it (the customer
//! making the install) is one conditional write, so a link makes one
//! install however many browsers race on it.

use super::rows::{Cells, Record, json_list};
use super::sql::{Sql, Stmt, args};
use super::*;
use nuon_core::InvitationId;
use nuon_core::model::InvitationState;

/// An invitation as stored (never its token, only the token's hash).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredInvitation {
    /// Its id.
    pub id: InvitationId,
    /// Its org.
    pub org_id: OrgId,
    /// The app it installs.
    pub app_id: AppId,
    /// The install it made, or the one it finishes.
    pub install_id: Option<InstallId>,
    /// The install's name, when the vendor chose it.
    pub name: Option<String>,
    /// Whom it is for.
    pub email: Option<String>,
    /// Who made it (the audit trail's actor).
    pub created_by: String,
    /// When it was made.
    pub created_at_ms: i64,
    /// When its link stops working.
    pub expires_at_ms: i64,
    /// When the customer spent it.
    pub used_at_ms: Option<i64>,
    /// When the vendor took it back.
    pub revoked_at_ms: Option<i64>,
    /// The hash of the cookie of the browser that spent it: that browser
    /// goes on seeing its install through the link.
    pub browser_hash: Option<String>,
    /// The inputs the customer set, by name.
    pub customer_inputs: Vec<String>,
}

impl StoredInvitation {
    /// Where it is at `now_ms`.
    pub fn state(&self, now_ms: i64) -> InvitationState {
        if self.revoked_at_ms.is_some() {
            InvitationState::Revoked
        } else if self.used_at_ms.is_some() {
            InvitationState::Used
        } else if now_ms >= self.expires_at_ms {
            InvitationState::Expired
        } else {
            InvitationState::Pending
        }
    }
}

impl Record for StoredInvitation {
    const COLUMNS: &'static str = "id, org_id, app_id, install_id, name, email, created_by, \
         created_at, expires_at, used_at, revoked_at, browser_hash, customer_inputs";
    fn read(r: &impl Cells) -> Result<Self> {
        Ok(StoredInvitation {
            id: r.id(0)?,
            org_id: r.id(1)?,
            app_id: r.id(2)?,
            install_id: r.opt_text(3)?.map(|t| shared_id(&t)).transpose()?,
            name: r.opt_text(4)?,
            email: r.opt_text(5)?,
            created_by: r.text(6)?,
            created_at_ms: r.int(7)?,
            expires_at_ms: r.int(8)?,
            used_at_ms: r.opt_int(9)?,
            revoked_at_ms: r.opt_int(10)?,
            browser_hash: r.opt_text(11)?,
            customer_inputs: json_list(r.opt_text(12)?)?,
        })
    }
}

fn shared_id<T: std::str::FromStr<Err = nuon_core::IdError>>(raw: &str) -> Result<T> {
    super::shared::parse_id(raw)
}

/// What spending an invitation's link found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Spend {
    /// Spent now, by this browser: make (or take over) the install.
    Spent(StoredInvitation),
    /// Not spent: the invitation as it is (used, expired or revoked).
    Refused(StoredInvitation),
    /// No invitation has this token.
    Unknown,
}

/// The invitations' store, written once for both databases.
#[async_trait]
pub trait InvitationStore: Send + Sync + 'static {
    /// Keeps a new invitation, with its link's token's hash.
    async fn create_invitation(&self, new: &StoredInvitation, token_hash: &str) -> Result<()>;

    /// The org's invitations, newest first.
    async fn list_invitations(&self, org: &OrgId) -> Result<Vec<StoredInvitation>>;

    /// One of the org's invitations.
    async fn get_invitation(
        &self,
        org: &OrgId,
        id: &InvitationId,
    ) -> Result<Option<StoredInvitation>>;

    /// Takes an invitation back at `now_ms` (once; a second time leaves
    /// it as it was); the invitation after.
    async fn revoke_invitation(
        &self,
        org: &OrgId,
        id: &InvitationId,
        now_ms: i64,
    ) -> Result<Option<StoredInvitation>>;

    /// The invitation whose link's token hashes to `token_hash`, of any
    /// org (the link is all the customer has).
    async fn invitation_by_token(&self, token_hash: &str) -> Result<Option<StoredInvitation>>;

    /// Spends the invitation at `now_ms` for the browser `browser_hash`:
    /// once, while pending and not expired.
    async fn spend_invitation(
        &self,
        token_hash: &str,
        now_ms: i64,
        browser_hash: &str,
    ) -> Result<Spend>;

    /// Gives a spent invitation back (the install it was spent for could
    /// not be made): pending again, as if never spent.
    async fn unspend_invitation(&self, id: &InvitationId) -> Result<()>;

    /// Records the install a spent invitation made, and the inputs the
    /// customer set.
    async fn set_invitation_install(
        &self,
        id: &InvitationId,
        install: &InstallId,
        customer_inputs: &[String],
    ) -> Result<()>;

    /// The inputs the customer set on an install, by name (none when no
    /// invitation made it).
    async fn customer_inputs(&self, org: &OrgId, install: &InstallId) -> Result<Vec<String>>;

    /// Gives a spent invitation a new stack-template link (its token's
    /// hash, good until `expires_at_ms`); the one before stops working.
    async fn set_invitation_template(
        &self,
        id: &InvitationId,
        template_hash: &str,
        expires_at_ms: i64,
    ) -> Result<()>;

    /// Spends a stack-template link at `now_ms`: once, before it expires,
    /// while its invitation is not revoked; the invitation it belongs to.
    async fn spend_invitation_template(
        &self,
        template_hash: &str,
        now_ms: i64,
    ) -> Result<Option<StoredInvitation>>;
}

fn select(filter: &str) -> String {
    format!(
        "SELECT {} FROM invitations WHERE {filter}",
        StoredInvitation::COLUMNS
    )
}

#[async_trait]
impl<S: Sql + 'static> InvitationStore for S {
    async fn create_invitation(&self, new: &StoredInvitation, token_hash: &str) -> Result<()> {
        let inputs = serde_json::to_string(&new.customer_inputs).map_err(shared::corrupt)?;
        self.execute_one(Stmt::new(
            "INSERT INTO invitations (id, org_id, app_id, install_id, name, email, created_by, \
             created_at, expires_at, token_hash, customer_inputs) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            args![
                new.id.as_str(),
                new.org_id.as_str(),
                new.app_id.as_str(),
                new.install_id.as_ref().map(|i| i.as_str()),
                new.name.clone(),
                new.email.clone(),
                new.created_by.as_str(),
                new.created_at_ms,
                new.expires_at_ms,
                token_hash,
                inputs,
            ],
        ))
        .await?;
        Ok(())
    }

    async fn list_invitations(&self, org: &OrgId) -> Result<Vec<StoredInvitation>> {
        self.query(Stmt::new(
            select("org_id = $1 ORDER BY created_at DESC, id DESC"),
            args![org.as_str()],
        ))
        .await
    }

    async fn get_invitation(
        &self,
        org: &OrgId,
        id: &InvitationId,
    ) -> Result<Option<StoredInvitation>> {
        self.query_one(Stmt::new(
            select("org_id = $1 AND id = $2"),
            args![org.as_str(), id.as_str()],
        ))
        .await
    }

    async fn revoke_invitation(
        &self,
        org: &OrgId,
        id: &InvitationId,
        now_ms: i64,
    ) -> Result<Option<StoredInvitation>> {
        self.execute_one(Stmt::new(
            "UPDATE invitations SET revoked_at = $3 \
             WHERE org_id = $1 AND id = $2 AND revoked_at IS NULL",
            args![org.as_str(), id.as_str(), now_ms],
        ))
        .await?;
        self.get_invitation(org, id).await
    }

    async fn invitation_by_token(&self, token_hash: &str) -> Result<Option<StoredInvitation>> {
        self.query_one(Stmt::new(select("token_hash = $1"), args![token_hash]))
            .await
    }

    async fn spend_invitation(
        &self,
        token_hash: &str,
        now_ms: i64,
        browser_hash: &str,
    ) -> Result<Spend> {
        let spent = self
            .execute_one(Stmt::new(
                "UPDATE invitations SET used_at = $2, browser_hash = $3 \
                 WHERE token_hash = $1 AND used_at IS NULL AND revoked_at IS NULL \
                 AND expires_at > $2",
                args![token_hash, now_ms, browser_hash],
            ))
            .await?;
        Ok(match self.invitation_by_token(token_hash).await? {
            None => Spend::Unknown,
            Some(i) if spent == 1 => Spend::Spent(i),
            Some(i) => Spend::Refused(i),
        })
    }

    async fn unspend_invitation(&self, id: &InvitationId) -> Result<()> {
        self.execute_one(Stmt::new(
            "UPDATE invitations SET used_at = NULL, browser_hash = NULL \
             WHERE id = $1 AND install_id IS NULL",
            args![id.as_str()],
        ))
        .await?;
        Ok(())
    }

    async fn set_invitation_install(
        &self,
        id: &InvitationId,
        install: &InstallId,
        customer_inputs: &[String],
    ) -> Result<()> {
        let inputs = serde_json::to_string(customer_inputs).map_err(shared::corrupt)?;
        self.execute_one(Stmt::new(
            "UPDATE invitations SET install_id = $2, customer_inputs = $3 WHERE id = $1",
            args![id.as_str(), install.as_str(), inputs],
        ))
        .await?;
        Ok(())
    }

    async fn customer_inputs(&self, org: &OrgId, install: &InstallId) -> Result<Vec<String>> {
        let found: Vec<StoredInvitation> = self
            .query(Stmt::new(
                select("org_id = $1 AND install_id = $2 AND used_at IS NOT NULL"),
                args![org.as_str(), install.as_str()],
            ))
            .await?;
        let mut names: Vec<String> = found.into_iter().flat_map(|i| i.customer_inputs).collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    async fn set_invitation_template(
        &self,
        id: &InvitationId,
        template_hash: &str,
        expires_at_ms: i64,
    ) -> Result<()> {
        self.execute_one(Stmt::new(
            "UPDATE invitations SET template_hash = $2, template_expires = $3 \
             WHERE id = $1 AND install_id IS NOT NULL AND revoked_at IS NULL",
            args![id.as_str(), template_hash, expires_at_ms],
        ))
        .await?;
        Ok(())
    }

    async fn spend_invitation_template(
        &self,
        template_hash: &str,
        now_ms: i64,
    ) -> Result<Option<StoredInvitation>> {
        // One statement: a fetch racing another, a revocation or the expiry
        // sees the row as it is when written.
        let spent = self
            .write_query(Stmt::new(
                format!(
                    "UPDATE invitations SET template_hash = NULL, template_expires = NULL \
                 WHERE template_hash = $1 AND template_expires > $2 AND revoked_at IS NULL \
                 AND install_id IS NOT NULL RETURNING {}",
                    StoredInvitation::COLUMNS
                ),
                args![template_hash, now_ms],
            ))
            .await?;
        Ok(spent.into_iter().next())
    }
}
