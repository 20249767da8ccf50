//! An install's health on the Control API: its runner (there or not, from
//! its last call), each component's last deploy and probes, the checks
//! they require, and each health-check action's last run (an action with a
//! `cron` trigger); and the checks the vendor's systems push.

use axum::Json;
use axum::extract::{Path, State};
use axum::routing::{get, put};
use nuon_core::endpoint as ep;
use nuon_core::wire::{InstallCheck, InstallHealth, PushCheck, check_name};

use super::apps::install_app_config;
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
    let (install, _, _) = install_app_config(&state, &auth, &key).await?;
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
    let (install, _, latest) = install_app_config(&state, &auth, &key).await?;
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
