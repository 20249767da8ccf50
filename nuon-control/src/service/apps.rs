//! Apps: made by admins, found by name or id, with their latest config
//! opened and the components it has. Their config versions are in
//! `configs.rs`.

use nuon_core::AppId;
use nuon_core::endpoint::{self as ep};
use nuon_core::wire::{AppInfo, AppList, ComponentList, ConfigFile, ConfigVersionInfo, CreateApp};

use super::{Caller, Services, check_name, internal, require_admin};
use crate::error::Error;
use crate::keys::open_config;
use crate::secrets::SecretBox;
use crate::store::StoredConfig;

impl Services<'_> {
    /// `POST /v1/apps`: an app of the caller's org, with no config yet.
    /// Admins only; recorded in the audit trail, refusals included.
    pub(crate) async fn create_app(
        &self,
        caller: &Caller,
        req: CreateApp,
    ) -> Result<AppInfo, Error> {
        let result = self.make_app(caller, req).await;
        self.audited_at::<ep::CreateApp, _>(caller, &[], result)
            .await
    }

    async fn make_app(&self, caller: &Caller, req: CreateApp) -> Result<AppInfo, Error> {
        require_admin(&caller.principal)?;
        check_name("app", &req.name)?;
        let app = self
            .store
            .create_app(&caller.principal.org_id, &AppId::generate(), &req.name)
            .await?;
        tracing::info!(app = %app.id, name = %app.name, "app created");
        Ok(app)
    }

    /// `GET /v1/apps`: the org's apps.
    pub(crate) async fn list_apps(&self, caller: &Caller) -> Result<AppList, Error> {
        let apps = self.store.list_apps(&caller.principal.org_id).await?;
        Ok(AppList { apps })
    }

    /// `GET /v1/apps/{id}/components`: the components of the app's latest
    /// config, dependencies first, with that config's version.
    pub(crate) async fn list_components(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<ComponentList, Error> {
        let app = self.find_app(caller, key).await?;
        let c = self.latest_config(caller, &app).await?;
        Ok(ComponentList {
            config_version: c.version,
            components: c.config.components,
        })
    }

    /// The app `key` (an id or a name) of the caller's org, or a 404.
    pub(crate) async fn find_app(&self, caller: &Caller, key: &str) -> Result<AppInfo, Error> {
        self.store
            .find_app(&caller.principal.org_id, key)
            .await?
            .ok_or_else(|| Error::not_found(format!("no app {key:?}")))
    }

    /// The names of the org's apps, by id (read once for a list).
    pub(crate) async fn app_names(
        &self,
        org: &nuon_core::OrgId,
    ) -> Result<std::collections::BTreeMap<nuon_core::AppId, String>, Error> {
        Ok(self
            .store
            .list_apps(org)
            .await?
            .into_iter()
            .map(|a| (a.id, a.name))
            .collect())
    }

    /// The app's latest config version, opened, or a 404 that says how to
    /// sync one.
    pub(crate) async fn latest_config(
        &self,
        caller: &Caller,
        app: &AppInfo,
    ) -> Result<ConfigVersionInfo, Error> {
        let c = self
            .store
            .get_config(&caller.principal.org_id, &app.id, None)
            .await?
            .ok_or_else(|| {
                Error::not_found(format!(
                    "app {:?} has no config yet: sync one with `nuon apps sync DIR --app {}`",
                    app.name, app.name
                ))
            })?;
        decode_config(self.secrets, app, c)
    }

    /// The install `key` of the caller's org with its app and the app's
    /// latest config, opened.
    pub(crate) async fn install_app_config(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<(nuon_core::model::Install, AppInfo, ConfigVersionInfo), Error> {
        let install = self.find_install(caller, key).await?;
        let app = self.find_app(caller, install.app_id.as_str()).await?;
        let latest = self.latest_config(caller, &app).await?;
        Ok((install, app, latest))
    }

    /// The installer's image `source` ([`nuon_core::app::LOGO_SOURCE`] or
    /// [`nuon_core::app::FAVICON_SOURCE`]) of the app's latest config: its
    /// media type and bytes, when the sync kept one.
    pub(crate) async fn installer_image(
        &self,
        caller: &Caller,
        app: &AppInfo,
        source: &str,
    ) -> Result<Option<(String, Vec<u8>)>, Error> {
        use base64::Engine as _;
        let Some(c) = self
            .store
            .get_config(&caller.principal.org_id, &app.id, None)
            .await?
        else {
            return Ok(None);
        };
        // The config says whether there is one; only then are the
        // sources (as large as a sync may send) opened.
        let config: nuon_core::app::AppConfig = serde_json::from_str(
            &open_config(self.secrets, &app.id, "config", &c.config_json)
                .map_err(Error::internal)?,
        )
        .map_err(|e| internal("stored config unreadable", e))?;
        let kind = config.installer.and_then(|i| {
            if source == nuon_core::app::LOGO_SOURCE {
                i.logo_type
            } else {
                i.favicon_type
            }
        });
        let Some(kind) = kind else { return Ok(None) };
        let sources = open_config(self.secrets, &app.id, "sources", &c.sources_json)
            .map_err(Error::internal)?;
        let files: Vec<ConfigFile> = serde_json::from_str(&sources)
            .map_err(|e| internal("stored config sources unreadable", e))?;
        Ok(files
            .into_iter()
            .find(|f| f.path == source)
            .and_then(|f| {
                base64::engine::general_purpose::STANDARD
                    .decode(f.contents)
                    .ok()
            })
            .map(|bytes| (kind, bytes)))
    }
}

/// A stored config version, opened (its config and files are sealed at
/// rest, bound to the app).
pub(crate) fn decode_config(
    secrets: &SecretBox,
    app: &AppInfo,
    c: StoredConfig,
) -> Result<ConfigVersionInfo, Error> {
    let open = |part: &str, stored: &str| {
        open_config(secrets, &app.id, part, stored).map_err(Error::internal)
    };
    Ok(ConfigVersionInfo {
        app_id: app.id.clone(),
        version: c.version,
        created_at_ms: c.created_at_ms,
        config: serde_json::from_str(&open("config", &c.config_json)?)
            .map_err(|e| internal("stored config unreadable", e))?,
        files: serde_json::from_str::<Vec<ConfigFile>>(&open("files", &c.files_json)?)
            .map_err(|e| internal("stored config files unreadable", e))?,
        warnings: serde_json::from_str(&c.warnings_json)
            .map_err(|e| internal("stored warnings unreadable", e))?,
        unchanged: false,
    })
}
