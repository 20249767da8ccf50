//! Desired against deployed: an install's values changed by a workflow
//! that was denied, failed or was cancelled stay desired and are shown as
//! pending (`InstallInfo::pending`, the health's sync), until a deploy
//! runs them everywhere, `installs apply-pending` deploys them, or
//! `installs discard-pending` returns the deployed ones.

use std::collections::BTreeSet;

use nuon_core::endpoint::{self as ep, path_of};
use nuon_core::model::{InstallState, Unapplied};
use nuon_core::wire::{PendingResolved, PendingValue, WorkflowInfo};
use nuon_core::workflow::WorkflowKind;
use nuon_core::{OrgId, WorkflowId, now_ms};

use super::{Caller, Services, internal, require_admin, require_deployer};
use crate::desired::{keys, pending_view, values_of};
use crate::engine::Start;
use crate::error::Error;
use crate::store::{Overrides, StoredInstall};

/// Whether an install in `state` runs anything a change could be pending
/// on (one never provisioned, torn down or gone takes its values at its
/// next provision).
fn deployed(state: InstallState) -> bool {
    !matches!(
        state,
        InstallState::Created | InstallState::TornDown | InstallState::Deprovisioned
    )
}

impl Services<'_> {
    /// Records that `before`'s values changed (to what the store holds
    /// now) for `components`, which `workflow` deploys (none: a later
    /// deploy will).
    pub(crate) async fn note_change(
        &self,
        org: &OrgId,
        before: &StoredInstall,
        components: Vec<String>,
        workflow: Option<&WorkflowId>,
    ) -> Result<(), Error> {
        if !deployed(before.state) || components.is_empty() {
            return Ok(());
        }
        let mut p = before
            .pending
            .clone()
            .unwrap_or_else(|| Unapplied::begin(values_of(before), now_ms()));
        p.changed(components, workflow.cloned());
        self.store
            .set_install_pending(org, &before.id, Some(&p))
            .await?;
        Ok(())
    }

    /// `POST /v1/installs/{id}/pending/apply`: a redeploy of the
    /// components that do not run the install's values yet (a teardown of
    /// each one turned off). Deployers and admins; audited.
    pub(crate) async fn apply_pending(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<PendingResolved, Error> {
        let result = self.deploy_pending(caller, key).await;
        self.audited::<ep::ApplyInstallPending, _>(
            caller,
            path_of::<ep::ApplyInstallPending>(&[key]),
            result,
        )
        .await
    }

    async fn deploy_pending(&self, caller: &Caller, key: &str) -> Result<PendingResolved, Error> {
        require_deployer(&caller.principal)?;
        let org = &caller.principal.org_id;
        let install = self.find_install(caller, key).await?;
        let (Some(mut p), Some(_)) = (install.pending.clone(), pending_view(&install)) else {
            return Err(nothing_pending(&install));
        };
        let workflows = self
            .redeploy(org, &install, p.waiting.iter().cloned().collect())
            .await?;
        p.changed([], workflows.first().map(|w| w.id.clone()));
        self.store
            .set_install_pending(org, &install.id, Some(&p))
            .await?;
        let message = format!(
            "install {}'s pending values deploy to {}: {}",
            install.name,
            p.waiting.iter().cloned().collect::<Vec<_>>().join(", "),
            started(&workflows)
        );
        self.resolved(caller, &install, workflows, message).await
    }

    /// `POST /v1/installs/{id}/pending/discard`: the deployed values back
    /// (inputs, secrets, toggles, overrides), and the components the
    /// change was for deployed again with them (those that ran the dropped
    /// values change back; the plans of the others show nothing to
    /// change). Admins; audited.
    pub(crate) async fn discard_pending(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<PendingResolved, Error> {
        let result = self.drop_pending(caller, key).await;
        self.audited::<ep::DiscardInstallPending, _>(
            caller,
            path_of::<ep::DiscardInstallPending>(&[key]),
            result,
        )
        .await
    }

    async fn drop_pending(&self, caller: &Caller, key: &str) -> Result<PendingResolved, Error> {
        require_admin(&caller.principal)?;
        let org = &caller.principal.org_id;
        let install = self.find_install(caller, key).await?;
        let (Some(p), Some(view)) = (install.pending.clone(), pending_view(&install)) else {
            return Err(nothing_pending(&install));
        };
        let back = &p.deployed;
        self.store
            .set_install_inputs(org, &install.id, &back.inputs_json, &back.sealed_json)
            .await?;
        for name in keys(&back.toggles, &install.toggles) {
            let was = back.toggles.get(name).copied();
            if was != install.toggles.get(name).copied() {
                self.store
                    .set_install_toggle(org, &install.id, name, was)
                    .await?;
            }
        }
        let was: Overrides = serde_json::from_str(&back.overrides_json)
            .map_err(|e| internal("stored overrides unreadable", e))?;
        for name in keys(&was, &install.overrides) {
            if was.get(name) != install.overrides.get(name) {
                self.store
                    .set_install_override(org, &install.id, name, was.get(name))
                    .await?;
            }
        }
        let restored = self
            .store
            .find_install(org, install.id.as_str())
            .await?
            .ok_or_else(|| Error::not_found(format!("no install {key:?}")))?;
        let dropped: Vec<String> = view.changes.iter().map(PendingValue::line).collect();
        // Those that ran the dropped values run them until deployed again;
        // those that never did are deployed too, their plans confirming
        // that nothing changes (and their last change then succeeded).
        let again = (!p.applied.is_empty()).then(|| {
            let mut again = Unapplied::begin(values_of(&install), now_ms());
            again.changed(p.applied.iter().cloned(), None);
            again
        });
        self.store
            .set_install_pending(org, &install.id, again.as_ref())
            .await?;
        let all: BTreeSet<String> = p.waiting.union(&p.applied).cloned().collect();
        let workflows = self
            .redeploy(org, &restored, all.iter().cloned().collect())
            .await?;
        if let Some(mut again) = again {
            again.changed([], workflows.first().map(|w| w.id.clone()));
            self.store
                .set_install_pending(org, &install.id, Some(&again))
                .await?;
        }
        let message = format!(
            "install {}: dropped {}; back to what is deployed, and {} deployed again to match: {}",
            install.name,
            dropped.join(", "),
            all.into_iter().collect::<Vec<_>>().join(", "),
            started(&workflows)
        );
        self.resolved(caller, &restored, workflows, message).await
    }

    /// Starts what deploys `components` of `install` with its values: one
    /// redeploy of those that are on (with the config version it runs,
    /// and its release's builds when it runs one), and a teardown of each
    /// one turned off.
    pub(crate) async fn redeploy(
        &self,
        org: &OrgId,
        install: &StoredInstall,
        components: Vec<String>,
    ) -> Result<Vec<WorkflowInfo>, Error> {
        let (app, config) = self
            .engine
            .app_config(org, &install.app_id, install.config_version)
            .await?;
        let (on, off): (Vec<String>, Vec<String>) = components
            .into_iter()
            .filter(|c| config.component(c).is_some())
            .partition(|c| config.component(c).is_some_and(|c| install.enabled(c)));
        let release = match self.store.install_releases(org).await?.get(&install.id) {
            Some(id) => self
                .store
                .get_release(org, id)
                .await?
                .filter(|r| r.config_version == install.config_version),
            None => None,
        };
        let mut started = Vec::new();
        if !on.is_empty() {
            let start = Start {
                redeploy: Some(on),
                release: release.as_ref(),
                ..Start::new(
                    install,
                    &app,
                    &config,
                    install.config_version,
                    WorkflowKind::Deploy,
                )
            };
            started.push(self.engine.start(org, start).await?);
        }
        for c in off {
            let start = Start {
                component: Some(c),
                trigger: Some("disable-component"),
                ..Start::new(
                    install,
                    &app,
                    &config,
                    install.config_version,
                    WorkflowKind::Teardown,
                )
            };
            started.push(self.engine.start(org, start).await?);
        }
        Ok(started)
    }

    async fn resolved(
        &self,
        caller: &Caller,
        install: &StoredInstall,
        workflows: Vec<WorkflowInfo>,
        message: String,
    ) -> Result<PendingResolved, Error> {
        let fresh = self
            .store
            .find_install(&caller.principal.org_id, install.id.as_str())
            .await?
            .unwrap_or_else(|| install.clone());
        Ok(PendingResolved {
            install: self.install_view(caller, fresh).await?,
            workflows,
            message,
        })
    }
}

fn nothing_pending(install: &StoredInstall) -> Error {
    Error::api(
        axum::http::StatusCode::CONFLICT,
        nuon_core::wire::ErrorCode::NothingPending,
        format!(
            "install {} has no pending values: what it holds is deployed (`nuon installs get {}` shows it)",
            install.name, install.name
        ),
    )
}

/// `workflow wfl_… started`, or that none was needed.
fn started(workflows: &[WorkflowInfo]) -> String {
    if workflows.is_empty() {
        return "no component of its config runs them now: nothing started".into();
    }
    let ids: Vec<String> = workflows.iter().map(|w| w.id.to_string()).collect();
    format!(
        "{} {} (follow with `nuon workflows watch {}`)",
        if ids.len() == 1 {
            "workflow"
        } else {
            "workflows"
        },
        ids.join(", "),
        ids[0]
    )
}
