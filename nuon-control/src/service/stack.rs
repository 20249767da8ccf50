//! Install stacks: what the customer applies once in their own account to
//! run an install's runner, made by `nuon_core::stack` from the app's
//! config rendered for the install, each download with a new one-time
//! token for the stack's phone-home.

use nuon_core::app::RunnerSettings;
use nuon_core::audit::AuditEntry;
use nuon_core::rendered::render_part;
use std::collections::BTreeSet;

use nuon_core::stack::{RunnerDownload, StackFormat, StackSpec, generate};
use nuon_core::token::issue_stack_token;
use nuon_core::wire::{ErrorCode, InstallStack};
use nuon_core::{OrgId, now_ms};

use super::runner_binaries::platform_of;
use super::{Caller, Services, require_admin};
use crate::engine::render::render_context;
use crate::error::Error;
use nuon_core::model::Install;

impl Services<'_> {
    /// `GET /v1/installs/{id}/stack`: the install's stack in `format`
    /// (default: the one its runner type asks for), with a new one-time
    /// token (the one before stops working). Admins only, though a read:
    /// it issues a credential, which the audit trail records.
    pub(crate) async fn install_stack(
        &self,
        caller: &Caller,
        key: &str,
        format: Option<StackFormat>,
    ) -> Result<InstallStack, Error> {
        require_admin(&caller.principal)?;
        let install = self.find_install(caller, key).await?;
        self.stack_of(caller, &install, format).await
    }

    /// The runner release a stack in `format` downloads from the control
    /// plane: the newest one served for the platform the stack's machine
    /// runs (the AWS stacks' Amazon Linux on x86_64; for a VM bundle
    /// linux-x86_64 first, else any, its installer checking the machine's),
    /// none for a chart (it runs an image).
    async fn stack_runner_download(
        &self,
        org: &OrgId,
        api: &str,
        format: StackFormat,
    ) -> Result<Option<RunnerDownload>, Error> {
        let x86 = BTreeSet::from(["linux-x86_64".to_owned()]);
        let release = match format {
            StackFormat::Helm => return Ok(None),
            StackFormat::CloudFormation | StackFormat::Terraform => {
                self.stack_runner_release(org, &x86).await?
            }
            // linux-x86_64 when there is one; else the newest of any.
            StackFormat::Vm => match self.stack_runner_release(org, &x86).await? {
                Some(r) => Some(r),
                None => self.stack_runner_release(org, &BTreeSet::new()).await?,
            },
        };
        Ok(release.and_then(|r| RunnerDownload::new(api, &r.version, &platform_of(&r), &r.digest)))
    }

    /// `install`'s stack, for a caller already allowed it (an admin, or
    /// the customer whose invitation made the install).
    pub(crate) async fn stack_of(
        &self,
        caller: &Caller,
        install: &Install,
        format: Option<StackFormat>,
    ) -> Result<InstallStack, Error> {
        let org = &caller.principal.org_id;
        let Rendered {
            app_name,
            runner,
            permissions,
            stack: stack_toml,
            secrets,
        } = self.rendered_for(org, install).await?;
        let format = format.unwrap_or_else(|| StackFormat::for_runner_type(&runner.runner_type));
        // What can fail first: the token before stays good until a new one
        // is handed out.
        let api = self.engine.runner_url_known().ok_or_else(|| {
            Error::internal(
                "the Runner API's address is not known yet: the control plane is starting",
            )
        })?;
        let signing_key = self.keys.signer(org).await?.public_key().to_string();
        let runner_download = self.stack_runner_download(org, api, format).await?;
        let token = issue_stack_token();
        let ttl = self.engine.stack_token_ttl();
        let expires = now_ms() + i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        let spec = StackSpec {
            install_id: install.id.to_string(),
            install_name: install.name.clone(),
            app_name,
            runner_api: api.to_owned(),
            signing_key,
            install_token: token.secret.clone(),
            token_expires_at_ms: expires,
            token_ttl: crate::engine::in_words(ttl),
            version: env!("CARGO_PKG_VERSION").into(),
            runner_download,
            runner,
            stack: stack_toml,
            permissions,
            secrets,
            org_id: org.to_string(),
        };
        // Made before the token is stored: a stack that cannot be made
        // leaves the token before working.
        let made = generate(&spec, format).map_err(|e| {
            Error::bad_request(format!(
                "the {format} stack of install {} cannot be made from its app's config: {e}",
                install.name
            ))
        })?;
        self.store
            .set_stack_token(org, &install.id, &token.hash, expires)
            .await?;
        // A GET, so not in the write layer's record: a credential was issued.
        let entry = AuditEntry::new(
            now_ms(),
            caller.principal.actor(),
            "getInstallStack",
            format!("/v1/installs/{}/stack", install.id),
            caller.source.clone(),
            "200",
        )
        .with_detail(format!(
            "a new one-time stack token for install {} (the one before stops working)",
            install.name
        ));
        self.auditor.record(org, entry).await;
        Ok(made)
    }

    /// What `install`'s stack is made from.
    pub(crate) async fn rendered_for(
        &self,
        org: &OrgId,
        install: &Install,
    ) -> Result<Rendered, Error> {
        let (app_name, config) = self
            .engine
            .app_config(org, &install.app_id, install.config_version)
            .await?;
        let runner = config.runner.clone().unwrap_or_else(RunnerSettings::local);
        // Role names and documents are templates (`{{ .nuon.install.id }}`).
        // Without the stack's own outputs: a stack is made before them, and
        // made again when they are refused (that is how they are given anew).
        let without_outputs = Install {
            stack_outputs: None,
            pending: None,
            pending_rev: 0,
            ..install.clone()
        };
        let org_name = self.engine.org_name(org).await?;
        let owner = crate::engine::render::Owner {
            org: &org_name,
            app: &app_name,
            secrets: &config.secrets,
        };
        let ctx = render_context(self.secrets, org, &without_outputs, owner, false)
            .map_err(|e| Error::conflict(ErrorCode::StackNotMade, e))?;
        // Rendering is a tenant's work: off the runtime's threads.
        let (permissions, stack) = {
            let (permissions, stack) = (config.permissions.clone(), config.stack.clone());
            crate::render_pool::blocking(move || {
                let permissions = render_part(&permissions, &ctx, "permissions")?;
                let stack_toml = stack
                    .as_ref()
                    .map(|s| render_part(s, &ctx, "stack.toml"))
                    .transpose()?;
                Ok::<_, String>((permissions, stack_toml))
            })
            .await
            .map_err(Error::internal)?
            .map_err(Error::bad_request)?
        };
        Ok(Rendered {
            app_name,
            runner,
            permissions,
            stack,
            secrets: config.secrets.clone(),
        })
    }
}

/// What a stack is made from: the install's runner settings, and its cloud
/// roles and `stack.toml` with their templates rendered for the install.
pub(crate) struct Rendered {
    pub(crate) app_name: String,
    pub(crate) runner: RunnerSettings,
    pub(crate) permissions: nuon_core::app::Permissions,
    pub(crate) stack: Option<nuon_core::app::Stack>,
    pub(crate) secrets: Vec<nuon_core::app::SecretDecl>,
}
