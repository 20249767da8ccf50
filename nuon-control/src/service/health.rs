//! An install's health: its runner (there or not, from its last call),
//! each component's last deploy and probes, the checks they require, and
//! each health-check action's last run (an action with a `cron`
//! trigger); the checks the vendor's systems push; and what the health of
//! many installs is made of, read once (the overview, `listInstalls`).

use std::collections::{BTreeMap, HashMap};

use nuon_core::app::AppConfig;
use nuon_core::endpoint::{self as ep};
use nuon_core::wire::{
    HealthStatus, InstallCheck, InstallHealth, InstallInfo, PushCheck, RunnerInfo, SyncStatus,
    check_name,
};
use nuon_core::{AppId, InstallId, OrgId, RunnerId};

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

    /// Reads what the health of `installs` is made of.
    pub(crate) async fn fleet(
        &self,
        caller: &Caller,
        installs: &[Install],
    ) -> Result<Fleet, Error> {
        let org = &caller.principal.org_id;
        let mut configs = BTreeMap::new();
        for app in self.store.list_apps(org).await? {
            if let Ok(c) = self.latest_config(caller, &app).await {
                configs.insert(app.id.clone(), c.config);
            }
        }
        // Every runner of the org in one read, not one per install.
        let runners = self
            .store
            .list_runners(org)
            .await?
            .into_iter()
            .map(|r| (r.id.clone(), self.runner_view(r)))
            .collect();
        Ok(Fleet {
            configs,
            runners,
            summaries: self.workflow_summaries(org, installs).await?,
        })
    }

    /// The summaries of the org's installs' workflows, each from the
    /// store's cache while it is fresh, else made from the install's
    /// workflows and saved for the next read (see
    /// [`crate::store::CachedSummary`]).
    async fn workflow_summaries(
        &self,
        org: &OrgId,
        installs: &[Install],
    ) -> Result<HashMap<InstallId, InstallSummary>, Error> {
        let cached: HashMap<_, _> = self
            .store
            .install_summaries(org)
            .await?
            .into_iter()
            .map(|c| (c.install_id.clone(), c))
            .collect();
        let mut out = HashMap::with_capacity(installs.len());
        for i in installs {
            let c = cached.get(&i.id);
            let fresh = c
                .and_then(|c| c.fresh())
                .and_then(|s| InstallSummary::stored(&s.brief, s.full.clone()));
            let summary = match fresh {
                Some(s) => s,
                None => {
                    let rev = c.map_or(0, |c| c.rev);
                    InstallSummary::made(
                        crate::health::remake_summary(self.store, org, &i.id, rev).await?,
                    )
                }
            };
            out.insert(i.id.clone(), summary);
        }
        Ok(out)
    }
}

/// What the health of many of an org's installs is made of, read once:
/// each app's newest config, every runner (as the API shows it), and each
/// install's workflow summary (the dashboard's overview, `listInstalls`).
pub(crate) struct Fleet {
    /// By app: its newest config (an app without one is left out).
    pub(crate) configs: BTreeMap<AppId, AppConfig>,
    /// By id: every runner of the org.
    pub(crate) runners: BTreeMap<RunnerId, RunnerInfo>,
    /// By install: its workflows' summary.
    pub(crate) summaries: HashMap<InstallId, InstallSummary>,
}

impl Fleet {
    /// An install's health and whether what is desired is deployed, from
    /// its brief; `None` when its app has no config.
    pub(crate) fn status(&self, i: &Install) -> Option<(HealthStatus, SyncStatus)> {
        let config = self.configs.get(&i.app_id)?;
        let none = crate::health::Brief::default();
        let brief = self.summaries.get(&i.id).map_or(&none, |s| &s.brief);
        let runner = self.runners.get(&i.runner_id);
        Some((
            crate::health::status_of(config, i, runner, brief),
            crate::health::sync_of(config, i, brief),
        ))
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
