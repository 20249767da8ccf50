//! An install's health: its runner (there or not, from its last call),
//! each component's last deploy and probes, the checks they require, and
//! each health-check action's last run (an action with a `cron`
//! trigger); the checks the vendor's systems push; and what the health of
//! many installs is made of, read once (the overview, `listInstalls`).

use std::collections::BTreeMap;
use std::sync::Arc;

use nuon_core::app::AppConfig;
use nuon_core::endpoint::{self as ep};
use nuon_core::wire::{
    HealthStatus, InstallCheck, InstallHealth, InstallInfo, PushCheck, RunnerInfo, SyncStatus,
    check_name,
};
use nuon_core::{AppId, InstallId, RunnerId};

use super::fleet::FleetView;
use super::{Caller, Services, require_admin};
use crate::error::Error;
use crate::health::{InstallSummary, WorkflowSummary, health_of};
use nuon_core::model::Install;

/// The longest detail a pushed check keeps.
const MAX_DETAIL: usize = 1000;

impl Services<'_> {
    /// `PUT /v1/installs/{id}/checks/{name}`: a check the vendor's systems
    /// report; admins. Recorded in the audit trail, refusals included.
    pub(crate) async fn push_check(
        &self,
        caller: &Caller,
        key: &str,
        name: &str,
        req: PushCheck,
    ) -> Result<InstallCheck, Error> {
        let result = self.set_check(caller, key, name, req).await;
        self.audited_at::<ep::PushInstallCheck, _>(caller, &[key, name], result)
            .await
    }

    async fn set_check(
        &self,
        caller: &Caller,
        key: &str,
        name: &str,
        req: PushCheck,
    ) -> Result<InstallCheck, Error> {
        require_admin(&caller.principal)?;
        check_name(name).map_err(Error::bad_request)?;
        if let Some(d) = &req.detail
            && d.chars().count() > MAX_DETAIL
        {
            return Err(Error::bad_request(format!(
                "the detail of check {name} is {} characters: give at most {MAX_DETAIL}",
                d.chars().count()
            )));
        }
        let (install, _, _) = self.install_app_config(caller, key).await?;
        let check = InstallCheck {
            name: name.to_owned(),
            status: req.status,
            detail: req.detail.filter(|d| !d.trim().is_empty()),
            at_ms: nuon_core::now_ms(),
        };
        self.store
            .set_install_check(&caller.principal.org_id, &install.id, &check)
            .await?;
        // A deploy may wait for it.
        self.engine.wake();
        Ok(check)
    }

    /// `GET /v1/installs/{id}/health`: the install's health now.
    pub(crate) async fn get_install_health(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<InstallHealth, Error> {
        let (install, _, latest) = self.install_app_config(caller, key).await?;
        self.install_health(caller, &install, &latest.config).await
    }

    /// An install's health now: its runner as the API shows it, and its
    /// workflows (the API's answer and the dashboard's install page).
    pub(crate) async fn install_health(
        &self,
        caller: &Caller,
        install: &Install,
        config: &AppConfig,
    ) -> Result<InstallHealth, Error> {
        let org = &caller.principal.org_id;
        let runner = self
            .store
            .find_runner(org, install.runner_id.as_str())
            .await?
            .map(|r| self.runner_view(r));
        let workflows = self.store.list_workflows(org, &install.id).await?;
        Ok(health_of(
            config,
            install,
            runner.as_ref(),
            &WorkflowSummary::of(&workflows),
            nuon_core::now_ms(),
        ))
    }

    /// What the health of the org's installs is made of: each app's
    /// newest config, and the fleet as this replica keeps it (see
    /// [`super::fleet`]), its runners as the API shows them now.
    pub(crate) async fn fleet(&self, caller: &Caller) -> Result<Fleet, Error> {
        let org = &caller.principal.org_id;
        let mut configs = BTreeMap::new();
        let mut names = BTreeMap::new();
        for app in self.store.list_apps(org).await? {
            if let Some(c) = self.newest_config(caller, &app).await {
                configs.insert(app.id.clone(), c);
            }
            names.insert(app.id, app.name);
        }
        let view = self.fleet_view_with(org, Some(&configs)).await?;
        Ok(Fleet {
            configs: configs.into_iter().map(|(app, (_, c))| (app, c)).collect(),
            names,
            view,
        })
    }

    /// The app's newest config and its version, opened once a version
    /// (a version never changes) and kept; `None` when it has none, or it
    /// does not open (said once a read).
    async fn newest_config(
        &self,
        caller: &Caller,
        app: &nuon_core::wire::AppInfo,
    ) -> Option<(u32, Arc<AppConfig>)> {
        let version = app.latest_config?;
        if let Some(kept) = self.fleet_views.config(&app.id, version) {
            return Some((version, kept));
        }
        match self.latest_config(caller, app).await {
            Ok(c) => {
                let config = Arc::new(c.config);
                self.fleet_views
                    .keep_config(&app.id, c.version, config.clone());
                Some((c.version, config))
            }
            Err(e) => {
                tracing::warn!(app = %app.name, error = %e, "cannot open the app's newest config");
                None
            }
        }
    }
}

/// What the health of many of an org's installs is made of, read once:
/// each app's newest config, and the installs with their runners (as the
/// API shows them) and workflow summaries (the dashboard's overview,
/// `listInstalls`).
pub(crate) struct Fleet {
    /// By app: its newest config (an app without one is left out).
    pub(crate) configs: BTreeMap<AppId, Arc<AppConfig>>,
    /// Every app's name, by id.
    pub(crate) names: BTreeMap<AppId, String>,
    /// The installs, their runners and their summaries.
    view: Arc<FleetView>,
}

impl Fleet {
    /// The org's installs, oldest first.
    pub(crate) fn installs(&self) -> &[Install] {
        self.view.installs()
    }

    /// An install's workflow summary.
    pub(crate) fn summary(&self, id: &InstallId) -> Option<&InstallSummary> {
        self.view.summary(id)
    }

    /// The whole fleet's counts ([`super::fleet::FleetView::counts`]).
    pub(crate) fn counts(&self) -> Option<super::fleet::FleetCounts> {
        self.view.counts()
    }

    /// A runner as the API shows it.
    pub(crate) fn runner(&self, id: &RunnerId) -> Option<&RunnerInfo> {
        self.view.runner(id)
    }

    /// An install's health and whether what is desired is deployed, from
    /// its brief; `None` when its app has no config.
    pub(crate) fn status(&self, i: &Install) -> Option<(HealthStatus, SyncStatus)> {
        let config = self.configs.get(&i.app_id)?;
        let sync = self.with_brief(i, |brief| crate::health::sync_of(config, i, brief));
        Some((self.health(i)?, sync))
    }

    /// An install's health status alone (what the overview counts), from
    /// its brief; `None` when its app has no config.
    pub(crate) fn health(&self, i: &Install) -> Option<HealthStatus> {
        if let Some(kept) = self.view.status(&i.id) {
            return Some(kept);
        }
        let config = self.configs.get(&i.app_id)?;
        let runner = self.runner(&i.runner_id);
        Some(self.with_brief(i, |b| crate::health::status_of(config, i, runner, b)))
    }

    /// `f` of the install's brief (an empty one when it has no summary).
    fn with_brief<T>(&self, i: &Install, f: impl FnOnce(&crate::health::Brief) -> T) -> T {
        match self.summary(&i.id) {
            Some(s) => f(&s.brief),
            None => f(&crate::health::Brief::default()),
        }
    }

    /// `info` with the health and sync of `i`, its stored install.
    pub(crate) fn show(&self, i: &Install, mut info: InstallInfo) -> InstallInfo {
        if let Some((health, sync)) = self.status(i) {
            info.health = Some(health);
            info.sync = Some(sync);
        }
        info
    }
}
