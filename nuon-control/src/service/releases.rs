//! Releases: a config version of an app and the newest successful build
//! of each of its components (and its sandbox), frozen when the release
//! is made, so that whatever is synced or built later, the release
//! deploys the same artifacts by digest.

use nuon_core::endpoint::{self as ep};
use nuon_core::wire::{CreateRelease, ErrorCode, ReleaseInfo, ReleaseList};
use nuon_core::{OrgId, ReleaseId, now_ms};

use super::apps::decode_config;
use super::{Caller, Services, require_deployer};
use crate::error::Error;

impl Services<'_> {
    /// `POST /v1/releases`: a release of `req.app` at its config version
    /// `req.config_version` (default: the latest), with the newest
    /// successful build of each component and the sandbox; a 409
    /// `not_built` while one has none. Deployers and admins; recorded in
    /// the audit trail, refusals included.
    pub(crate) async fn create_release(
        &self,
        caller: &Caller,
        req: CreateRelease,
    ) -> Result<ReleaseInfo, Error> {
        let result = self.freeze_release(caller, req).await;
        self.audited_at::<ep::CreateRelease, _>(caller, &[], result)
            .await
    }

    async fn freeze_release(
        &self,
        caller: &Caller,
        req: CreateRelease,
    ) -> Result<ReleaseInfo, Error> {
        require_deployer(&caller.principal)?;
        let org = &caller.principal.org_id;
        let app = self.find_app(caller, &req.app).await?;
        let stored = self
            .store
            .get_config(org, &app.id, req.config_version)
            .await?
            .ok_or_else(|| {
                Error::not_found(match req.config_version {
                    Some(v) => format!("app {:?} has no config version {v}", app.name),
                    None => format!("app {:?} has no config yet: `nuon apps sync` one", app.name),
                })
            })?;
        let version = decode_config(self.secrets, &app, stored)?;
        let config = version.config;
        let mut wanted: Vec<String> = config.components.iter().map(|c| c.name.clone()).collect();
        if config.sandbox.is_some() {
            wanted.push("sandbox".into());
        }
        let built = self
            .engine
            .latest_builds(org, &app.id, version.version)
            .await?;
        let unbuilt: Vec<&str> = wanted
            .iter()
            .filter(|c| !built.contains_key(*c))
            .map(String::as_str)
            .collect();
        if !unbuilt.is_empty() {
            let latest = self
                .store
                .get_config(org, &app.id, None)
                .await?
                .map(|c| c.version);
            // Builds are made of the latest version only.
            let fix = if latest == Some(version.version) {
                format!("run `nuon builds create --app {} --wait` first", app.name)
            } else {
                format!(
                    "builds are made of the latest config version only (v{}): release that one, or sync v{}'s files again so that they become the latest",
                    latest.unwrap_or_default(),
                    version.version
                )
            };
            return Err(Error::refused(
                ErrorCode::NotBuilt,
                format!(
                    "a release needs a successful build of every component: config version {} of app {:?} has none of {}; {fix}",
                    version.version,
                    app.name,
                    unbuilt.join(", "),
                ),
            ));
        }
        let builds = built
            .into_iter()
            .filter(|(c, _)| wanted.contains(c))
            .collect();
        let release = ReleaseInfo {
            id: ReleaseId::generate(),
            app_id: app.id.clone(),
            app_name: Some(app.name.clone()),
            config_version: version.version,
            builds,
            created_at_ms: now_ms(),
        };
        self.store.create_release(org, &release).await?;
        tracing::info!(release = %release.id, app = %app.name, version = release.config_version, "release created");
        Ok(release)
    }

    /// `GET /v1/releases`: the org's releases (of app `app`, by name or
    /// id, when given), newest first, with their apps' names.
    pub(crate) async fn list_releases(
        &self,
        caller: &Caller,
        app: Option<&str>,
    ) -> Result<ReleaseList, Error> {
        let org = &caller.principal.org_id;
        let app = match app {
            Some(key) => Some(self.find_app(caller, key).await?.id),
            None => None,
        };
        let releases = self.store.list_releases(org, app.as_ref()).await?;
        Ok(ReleaseList {
            releases: self.releases_named(org, releases).await?,
        })
    }

    /// `GET /v1/releases/{id}`: one release with its app's name.
    pub(crate) async fn get_release(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<ReleaseInfo, Error> {
        let org = &caller.principal.org_id;
        let missing = || Error::not_found(format!("no release {key:?} (see `nuon releases list`)"));
        let id: ReleaseId = key.parse().map_err(|_| missing())?;
        let found = self
            .store
            .get_release(org, &id)
            .await?
            .ok_or_else(missing)?;
        Ok(self.releases_named(org, vec![found]).await?.remove(0))
    }

    /// Releases with their apps' names (the org's apps read once).
    async fn releases_named(
        &self,
        org: &OrgId,
        mut releases: Vec<ReleaseInfo>,
    ) -> Result<Vec<ReleaseInfo>, Error> {
        let apps = self.app_names(org).await?;
        for r in &mut releases {
            r.app_name = apps.get(&r.app_id).cloned();
        }
        Ok(releases)
    }
}
