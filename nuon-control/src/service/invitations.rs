//! Installers (an app's `installer.toml`) and the invitations a vendor
//! sends its customers: a link to the installer page, kept as its hash,
//! bound to one org, one app (or one install to finish) and an expiry.

use std::collections::BTreeMap;
use std::time::Duration;

use nuon_core::app::AppConfig;
use nuon_core::audit::AuditEntry;
use nuon_core::endpoint::{self as ep, Endpoint, path_of};
use nuon_core::model::{InstallState, InvitationState};
use nuon_core::token::issue_invitation_token;
use nuon_core::wire::{
    AppInfo, CreateInstall, CreateInvitation, ErrorCode, InstallerInfo, InstallerList,
    InvitationCreated, InvitationInfo, InvitationList, routes,
};
use nuon_core::workflow::WorkflowKind;
use nuon_core::{InvitationId, TokenId, now_ms};
use serde_json::Value;

use super::{Caller, Services, check_name, require_admin};
use crate::engine::Start;
use crate::error::Error;
use crate::store::{ApiPrincipal, Spend, StoredInvitation};

/// How long a link works when the vendor does not say.
pub(crate) const DEFAULT_EXPIRY: Duration = Duration::from_secs(7 * 24 * 3600);
/// The longest a link may work.
pub(crate) const MAX_EXPIRY: Duration = Duration::from_secs(90 * 24 * 3600);

impl Services<'_> {
    /// `GET /v1/installers`: every app whose latest config has an
    /// `installer.toml`.
    pub(crate) async fn list_installers(&self, caller: &Caller) -> Result<InstallerList, Error> {
        let mut installers = Vec::new();
        for app in self.store.list_apps(&caller.principal.org_id).await? {
            if let Some(i) = self.installer_of(caller, &app).await? {
                installers.push(i);
            }
        }
        installers.sort_by(|a, b| a.app_name.cmp(&b.app_name));
        Ok(InstallerList { installers })
    }

    /// `GET /v1/installers/{id}`.
    pub(crate) async fn get_installer(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<InstallerInfo, Error> {
        let app = self.find_app(caller, key).await?;
        self.installer_of(caller, &app).await?.ok_or_else(|| {
            Error::not_found(format!(
                "app {:?} has no installer: its latest config has no installer.toml (its invitations show the app's own name and description)",
                app.name
            ))
        })
    }

    async fn installer_of(
        &self,
        caller: &Caller,
        app: &AppInfo,
    ) -> Result<Option<InstallerInfo>, Error> {
        let Some(stored) = self
            .store
            .get_config(&caller.principal.org_id, &app.id, None)
            .await?
        else {
            return Ok(None);
        };
        let version = super::apps::decode_config(self.secrets, app, stored)?;
        Ok(version.config.installer.map(|installer| InstallerInfo {
            app_id: app.id.clone(),
            app_name: app.name.clone(),
            config_version: version.version,
            installer,
        }))
    }

    /// `POST /v1/invitations`: a link for a customer, `base` being the
    /// control plane's address as the caller reached it. Admins only;
    /// recorded in the audit trail, refusals included.
    pub(crate) async fn create_invitation(
        &self,
        caller: &Caller,
        req: CreateInvitation,
        base: &str,
    ) -> Result<InvitationCreated, Error> {
        let target = format!("app {}", req.app);
        let result = self.make_invitation(caller, req, base).await;
        self.audited::<ep::CreateInvitation, _>(caller, target, result)
            .await
    }

    async fn make_invitation(
        &self,
        caller: &Caller,
        req: CreateInvitation,
        base: &str,
    ) -> Result<InvitationCreated, Error> {
        require_admin(&caller.principal)?;
        let app = self.find_app(caller, &req.app).await?;
        // The customer installs from the latest config: there must be one.
        self.latest_config(caller, &app).await?;
        let expires_in = match req.expires_in.as_deref() {
            None => DEFAULT_EXPIRY,
            Some(text) => nuon_core::parse_duration(text).map_err(|e| {
                Error::bad_request(format!(
                    "invalid expiry {text:?}: {e} (write 30m, 12h or 7d)"
                ))
            })?,
        };
        if expires_in < Duration::from_secs(60) || expires_in > MAX_EXPIRY {
            return Err(Error::bad_request(format!(
                "an invitation's expiry must be between 1m and 90d, not {}",
                req.expires_in.as_deref().unwrap_or_default()
            )));
        }
        if let Some(name) = &req.name {
            check_name("install", name)?;
            if req.install.is_none()
                && self
                    .store
                    .find_install(&caller.principal.org_id, name)
                    .await?
                    .is_some()
            {
                return Err(Error::conflict(
                    ErrorCode::NameTaken,
                    format!(
                        "the org has an install named {name:?} already: pick another name, or invite to finish it with --install {name}"
                    ),
                ));
            }
        }
        if let Some(email) = &req.email
            && (email.len() > 254 || !email.contains('@') || email.chars().any(char::is_whitespace))
        {
            return Err(Error::bad_request(format!(
                "invalid email address {:?}",
                email.chars().take(80).collect::<String>()
            )));
        }
        let install = match &req.install {
            None => None,
            Some(key) => {
                let i = self.find_install(caller, key).await?;
                if i.app_id != app.id {
                    return Err(Error::bad_request(format!(
                        "install {:?} is not of app {:?}",
                        i.name, app.name
                    )));
                }
                if i.state != InstallState::Created {
                    // A conflict with the install's state, under the code
                    // that names what is wrong with the install.
                    return Err(Error::conflict(
                        ErrorCode::InvalidInstall,
                        format!(
                            "install {:?} is {}: a customer can finish only an install that was never provisioned",
                            i.name, i.state
                        ),
                    ));
                }
                Some(i)
            }
        };
        let now = now_ms();
        let token = issue_invitation_token();
        let stored = StoredInvitation {
            id: InvitationId::generate(),
            org_id: caller.principal.org_id.clone(),
            app_id: app.id.clone(),
            name: req
                .name
                .or_else(|| install.as_ref().map(|i| i.name.clone())),
            install_id: install.map(|i| i.id),
            email: req.email,
            created_by: caller.principal.actor(),
            created_at_ms: now,
            expires_at_ms: now
                .saturating_add(i64::try_from(expires_in.as_millis()).unwrap_or(i64::MAX)),
            used_at_ms: None,
            revoked_at_ms: None,
            browser_hash: None,
            customer_inputs: Vec::new(),
        };
        self.store.create_invitation(&stored, &token.hash).await?;
        tracing::info!(invitation = %stored.id, app = %app.id, "invitation made");
        Ok(InvitationCreated {
            url: format!(
                "{}{}",
                base.trim_end_matches('/'),
                routes::INSTALLER_PAGE.replace("{token}", &token.secret)
            ),
            invitation: invitation_info(stored, Some(app.name), now),
        })
    }

    /// `GET /v1/invitations`.
    pub(crate) async fn list_invitations(&self, caller: &Caller) -> Result<InvitationList, Error> {
        let org = &caller.principal.org_id;
        let apps = self.store.list_apps(org).await?;
        let now = now_ms();
        let invitations = self
            .store
            .list_invitations(org)
            .await?
            .into_iter()
            .map(|i| {
                let name = apps
                    .iter()
                    .find(|a| a.id == i.app_id)
                    .map(|a| a.name.clone());
                invitation_info(i, name, now)
            })
            .collect();
        Ok(InvitationList { invitations })
    }

    /// `DELETE /v1/invitations/{id}`: the link stops working. Admins only;
    /// recorded in the audit trail.
    pub(crate) async fn revoke_invitation(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<InvitationInfo, Error> {
        let result = async {
            require_admin(&caller.principal)?;
            let org = &caller.principal.org_id;
            let id: InvitationId = key
                .parse()
                .map_err(|e| Error::bad_request(format!("{e}")))?;
            let found = self
                .store
                .revoke_invitation(org, &id, now_ms())
                .await?
                .ok_or_else(|| Error::not_found(format!("no invitation {key:?}")))?;
            let app = self.store.find_app(org, found.app_id.as_str()).await?;
            Ok(invitation_info(found, app.map(|a| a.name), now_ms()))
        }
        .await;
        self.audited_at::<ep::RevokeInvitation, _>(caller, &[key], result)
            .await
    }
}

/// An invitation as the vendor sees it at `now`.
pub(crate) fn invitation_info(
    i: StoredInvitation,
    app_name: Option<String>,
    now: i64,
) -> InvitationInfo {
    InvitationInfo {
        state: i.state(now),
        id: i.id,
        app_id: i.app_id,
        app_name,
        install_id: i.install_id,
        name: i.name,
        email: i.email,
        created_by: i.created_by,
        created_at_ms: i.created_at_ms,
        expires_at_ms: i.expires_at_ms,
        used_at_ms: i.used_at_ms,
        revoked_at_ms: i.revoked_at_ms,
    }
}

/// What the customer's page says of a link it cannot use.
pub(crate) fn refusal(state: InvitationState) -> &'static str {
    match state {
        InvitationState::Pending => "This link works.",
        InvitationState::Used => {
            "This link was used already: it made an install, and works only in the browser that made it. Ask the vendor for a new link."
        }
        InvitationState::Expired => "This link has expired. Ask the vendor for a new one.",
        InvitationState::Revoked => "This link was revoked by the vendor. Ask them for a new one.",
    }
}

/// The customer acting through invitation `inv`: the audit trail names
/// them so. No check of the API lets the `customer` scope through; the
/// installer page calls the operations it may.
pub(crate) fn customer_caller(inv: &StoredInvitation, source: String) -> Caller {
    Caller {
        principal: ApiPrincipal {
            org_id: inv.org_id.clone(),
            // No token: an id no token has.
            token_id: TokenId::generate(),
            scope: "customer".into(),
            user: None,
            customer: Some(inv.id.clone()),
        },
        source,
    }
}

/// What a customer sends from the installer page.
#[derive(Debug, Clone, Default)]
pub(crate) struct CustomerInstall {
    /// The install's name (the invitation's, when it names one).
    pub(crate) name: String,
    /// The inputs they set, as typed (an empty one takes its default).
    pub(crate) inputs: BTreeMap<String, String>,
}

/// What accepting an invitation came to.
#[derive(Debug)]
pub(crate) enum Accepted {
    /// The install is made (or taken over) and its provision started.
    Installed,
    /// The link cannot be used: used, expired or revoked.
    Refused(InvitationState),
    /// No invitation has this link.
    Unknown,
}

impl Services<'_> {
    /// The customer accepts the invitation whose link's token hashes to
    /// `token_hash`, from the browser whose cookie hashes to
    /// `browser_hash`: the link is spent (once), the install made with
    /// the inputs they set and its provision started (it waits for the
    /// runner the install stack starts). A refusal of the install gives
    /// the link back, unspent.
    pub(crate) async fn accept_invitation(
        &self,
        token_hash: &str,
        browser_hash: &str,
        form: CustomerInstall,
        source: String,
    ) -> Result<Accepted, Error> {
        let inv = match self
            .store
            .spend_invitation(token_hash, now_ms(), browser_hash)
            .await?
        {
            Spend::Unknown => return Ok(Accepted::Unknown),
            Spend::Refused(i) => return Ok(Accepted::Refused(i.state(now_ms()))),
            Spend::Spent(i) => i,
        };
        match self.install_for(&inv, form, source).await {
            Ok(()) => Ok(Accepted::Installed),
            Err(e) => {
                if let Err(u) = self.store.unspend_invitation(&inv.id).await {
                    tracing::error!(invitation = %inv.id, error = %u, "a refused install left its invitation spent");
                }
                Err(e)
            }
        }
    }

    async fn install_for(
        &self,
        inv: &StoredInvitation,
        form: CustomerInstall,
        source: String,
    ) -> Result<(), Error> {
        let caller = customer_caller(inv, source);
        let org = &inv.org_id;
        let app = self.find_app(&caller, inv.app_id.as_str()).await?;
        let install = match &inv.install_id {
            // An install to finish: the vendor set its values.
            Some(id) => self.find_install(&caller, id.as_str()).await?,
            None => {
                let version = self.latest_config(&caller, &app).await?;
                let (inputs, problems) = customer_inputs(&version.config, &form.inputs);
                if !problems.is_empty() {
                    return Err(Error::refused(
                        ErrorCode::InvalidInputs,
                        problems.join("; "),
                    ));
                }
                let set: Vec<String> = inputs.keys().cloned().collect();
                let req = CreateInstall {
                    app: app.id.to_string(),
                    name: inv
                        .name
                        .clone()
                        .unwrap_or_else(|| form.name.trim().to_owned()),
                    inputs,
                    secrets: BTreeMap::new(),
                    approval: None,
                    labels: BTreeMap::new(),
                    components: BTreeMap::new(),
                    overrides: BTreeMap::new(),
                };
                let result = self.insert_install(&caller, req).await;
                let detail = if set.is_empty() {
                    format!("invitation {}: no input set by the customer", inv.id)
                } else {
                    format!(
                        "invitation {}: inputs set by the customer: {}",
                        inv.id,
                        set.join(", ")
                    )
                };
                self.record_customer::<ep::CreateInstall>(
                    &caller,
                    "/v1/installs",
                    detail,
                    result.as_ref().err(),
                )
                .await;
                let made = result?;
                self.store
                    .set_invitation_install(&inv.id, &made.install.id, &set)
                    .await?;
                self.find_install(&caller, made.install.id.as_str()).await?
            }
        };
        // Its provision waits for the runner the install stack starts.
        if install.state == InstallState::Created {
            let (app_name, config) = self
                .engine
                .app_config(org, &install.app_id, install.config_version)
                .await?;
            let started = self
                .engine
                .start(
                    org,
                    Start::new(
                        &install,
                        &app_name,
                        &config,
                        install.config_version,
                        WorkflowKind::Provision,
                    ),
                )
                .await
                .map_err(Error::from);
            let target = path_of::<ep::CreateWorkflow>(&[install.id.as_str()]);
            let detail = format!(
                "invitation {}: provision of install {}",
                inv.id, install.name
            );
            self.record_customer::<ep::CreateWorkflow>(
                &caller,
                &target,
                detail,
                started.as_ref().err(),
            )
            .await;
            started?;
        }
        Ok(())
    }

    /// Records a customer's operation `E` in the audit trail.
    async fn record_customer<E: Endpoint>(
        &self,
        caller: &Caller,
        target: &str,
        detail: String,
        error: Option<&Error>,
    ) {
        let outcome = error.map_or(E::STATUS, |e| e.status().as_u16());
        let entry = AuditEntry::new(
            now_ms(),
            caller.principal.actor(),
            E::ID,
            target.to_owned(),
            caller.source.clone(),
            outcome.to_string(),
        )
        .with_detail(detail);
        self.auditor.record(&caller.principal.org_id, entry).await;
    }
}

/// The inputs a customer may set, from what they typed: only
/// `user_configurable` ones the vendor does not keep for itself; an
/// empty one is left to its default. The values, and every problem.
pub(crate) fn customer_inputs(
    config: &AppConfig,
    typed: &BTreeMap<String, String>,
) -> (BTreeMap<String, Value>, Vec<String>) {
    let mut inputs = BTreeMap::new();
    let mut problems = Vec::new();
    for (name, value) in typed {
        if value.trim().is_empty() {
            continue;
        }
        match config.input(name) {
            Some(i) if i.user_configurable && !i.internal => {
                inputs.insert(name.clone(), Value::String(value.clone()));
            }
            Some(_) => problems.push(format!(
                "input {name:?} is set by the vendor, not on this page"
            )),
            None => problems.push(format!("the app has no input {name:?}")),
        }
    }
    (inputs, problems)
}
