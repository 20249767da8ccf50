//! An install's health on the Control API: its runner (there or not, from
//! its last call), each component's last deploy and probes, the checks
//! they require, and each health-check action's last run (an action with a
//! `cron` trigger); and the checks the vendor's systems push.

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::{get, put};
use nuon_core::endpoint as ep;
use nuon_core::wire::{InstallCheck, InstallHealth, PushCheck, check_name};

use super::control::require_admin;
use super::doc::Op;
use super::{ApiAuth, Body, SharedState};
use crate::error::Error;
use crate::health::{InstallSummary, WorkflowSummary, health_of};

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::GetInstallHealth>(get(health)),
        Op::endpoint::<ep::PushInstallCheck>(put(push_check)),
    ]
}

/// The longest detail a pushed check keeps.
const MAX_DETAIL: usize = 1000;

async fn push_check(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path((key, name)): Path<(String, String)>,
    Body(req): Body<PushCheck>,
) -> Result<Json<InstallCheck>, Error> {
    require_admin(&auth)?;
    check_name(&name).map_err(Error::bad_request)?;
    if let Some(d) = &req.detail
        && d.chars().count() > MAX_DETAIL
    {
        return Err(Error::bad_request(format!(
            "the detail of check {name} is {} characters: give at most {MAX_DETAIL}",
            d.chars().count()
        )));
    }
    let (install, _, _) = state
        .services()
        .install_app_config(&auth.caller(), &key)
        .await?;
    let check = InstallCheck {
        name,
        status: req.status,
        detail: req.detail.filter(|d| !d.trim().is_empty()),
        at_ms: nuon_core::now_ms(),
    };
    state
        .store
        .set_install_check(&auth.0.org_id, &install.id, &check)
        .await?;
    // A deploy may wait for it.
    state.engine.wake();
    Ok(Json(check))
}

async fn health(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<Json<InstallHealth>, Error> {
    let (install, _, latest) = state
        .services()
        .install_app_config(&auth.caller(), &key)
        .await?;
    Ok(Json(
        install_health(&state, &auth, &install, &latest.config).await?,
    ))
}

/// An install's health now: its runner as the API shows it, and its
/// workflows (the API's handler and the dashboard's install page).
pub(super) async fn install_health(
    state: &SharedState,
    auth: &ApiAuth,
    install: &crate::store::StoredInstall,
    config: &nuon_core::app::AppConfig,
) -> Result<InstallHealth, Error> {
    let org = &auth.0.org_id;
    let runner = state
        .store
        .find_runner(org, install.runner_id.as_str())
        .await?
        .map(|r| state.runner_view(r));
    let workflows = state.store.list_workflows(org, &install.id).await?;
    Ok(health_of(
        config,
        install,
        runner.as_ref(),
        &WorkflowSummary::of(&workflows),
        nuon_core::now_ms(),
    ))
}

/// What the health of many of an org's installs is made of, read once:
/// each app's newest config, every runner (as the API shows it), and each
/// install's workflow summary (the dashboard's overview, `listInstalls`).
pub(crate) struct Fleet {
    /// By app: its newest config (an app without one is left out).
    pub(crate) configs: std::collections::BTreeMap<nuon_core::AppId, nuon_core::app::AppConfig>,
    /// By id: every runner of the org.
    pub(crate) runners:
        std::collections::BTreeMap<nuon_core::RunnerId, nuon_core::wire::RunnerInfo>,
    /// By install: its workflows' summary.
    pub(crate) summaries: std::collections::HashMap<nuon_core::InstallId, InstallSummary>,
}

impl Fleet {
    /// Reads what the health of `installs` is made of.
    pub(crate) async fn read(
        state: &SharedState,
        auth: &ApiAuth,
        installs: &[crate::store::StoredInstall],
    ) -> Result<Self, Error> {
        let org = &auth.0.org_id;
        let mut configs = std::collections::BTreeMap::new();
        for app in state.store.list_apps(org).await? {
            if let Ok(c) = state.services().latest_config(&auth.caller(), &app).await {
                configs.insert(app.id.clone(), c.config);
            }
        }
        // Every runner of the org in one read, not one per install.
        let runners = state
            .store
            .list_runners(org)
            .await?
            .into_iter()
            .map(|r| (r.id.clone(), state.runner_view(r)))
            .collect();
        Ok(Fleet {
            configs,
            runners,
            summaries: workflow_summaries(state, org, installs).await?,
        })
    }

    /// An install's health and whether what is desired is deployed, from
    /// its brief; `None` when its app has no config.
    pub(crate) fn status(
        &self,
        i: &crate::store::StoredInstall,
    ) -> Option<(nuon_core::wire::HealthStatus, nuon_core::wire::SyncStatus)> {
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
    pub(crate) fn show(
        &self,
        i: &crate::store::StoredInstall,
        mut info: nuon_core::wire::InstallInfo,
    ) -> nuon_core::wire::InstallInfo {
        if let Some((health, sync)) = self.status(i) {
            info.health = Some(health);
            info.sync = Some(sync);
        }
        info
    }
}

/// The summaries of the org's installs' workflows, each from the store's
/// cache while it is fresh, else made from the install's workflows and
/// saved for the next read (see [`crate::store::CachedSummary`]).
pub(crate) async fn workflow_summaries(
    state: &SharedState,
    org: &nuon_core::OrgId,
    installs: &[crate::store::StoredInstall],
) -> Result<std::collections::HashMap<nuon_core::InstallId, InstallSummary>, Error> {
    let cached: std::collections::HashMap<_, _> = state
        .store
        .install_summaries(org)
        .await?
        .into_iter()
        .map(|c| (c.install_id.clone(), c))
        .collect();
    let mut out = std::collections::HashMap::with_capacity(installs.len());
    for i in installs {
        let c = cached.get(&i.id);
        let fresh = c
            .and_then(|c| c.fresh())
            .and_then(|s| InstallSummary::stored(&s.brief, s.full.clone()));
        let summary = match fresh {
            Some(s) => s,
            None => {
                let rev = c.map_or(0, |c| c.rev);
                let s = WorkflowSummary::of(&state.store.list_workflows(org, &i.id).await?);
                let text = crate::store::SummaryText {
                    brief: serde_json::to_string(&s.brief())
                        .map_err(|e| Error::internal(e.to_string()))?,
                    full: serde_json::to_string(&s).map_err(|e| Error::internal(e.to_string()))?,
                };
                state.store.save_install_summary(&i.id, rev, &text).await?;
                InstallSummary::made(s)
            }
        };
        out.insert(i.id.clone(), summary);
    }
    Ok(out)
}
