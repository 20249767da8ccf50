//! Desired against deployed: an install's values changed by a workflow
//! that was denied, failed or was cancelled stay desired and are shown as
//! pending (`InstallInfo::pending`, the health's sync), until a deploy
//! runs them everywhere, `installs apply-pending` deploys them, or
//! `installs discard-pending` returns the deployed ones.

use std::collections::{BTreeMap, BTreeSet};

use nuon_core::app::AppConfig;
use nuon_core::endpoint::{self as ep};
use nuon_core::model::{Install, InstallState, InstallValues, Overrides, Unapplied};
use nuon_core::wire::{ErrorCode, PendingResolved, PendingValue, WorkflowInfo};
use nuon_core::workflow::WorkflowKind;
use nuon_core::{InstallId, OrgId, WorkflowId, now_ms};

use super::{Caller, Services, internal, require_admin, require_deployer};
use crate::desired::{keys, pending_view, update_pending, values_of};
use crate::engine::Start;
use crate::error::Error;
use crate::secrets::{Sealed, SecretBox, seal_context};

/// Whether an install in `state` runs anything a change could be pending
/// on (one never provisioned, torn down or gone takes its values at its
/// next provision).
fn deployed(state: InstallState) -> bool {
    !matches!(
        state,
        InstallState::Created | InstallState::TornDown | InstallState::Deprovisioned
    )
}

/// The sensitive inputs (`input:NAME`) and secrets (`secret:NAME`) whose
/// values differ between two sealed documents of `install`, opened to
/// compare (a value that cannot be opened counts as changed).
fn sealed_changed(
    secrets: &SecretBox,
    install: &InstallId,
    was: &str,
    now: &str,
) -> BTreeSet<String> {
    let (was, now): (Sealed, Sealed) = (
        serde_json::from_str(was).unwrap_or_default(),
        serde_json::from_str(now).unwrap_or_default(),
    );
    let mut changed = BTreeSet::new();
    for (kind, was, now) in [
        ("input", &was.inputs, &now.inputs),
        ("secret", &was.secrets, &now.secrets),
    ] {
        let open = |v: Option<&String>, name: &str| {
            v.map(|v| secrets.open(v, &seal_context(install, kind, name)).ok())
        };
        for name in keys(was, now) {
            let (a, b) = (open(was.get(name), name), open(now.get(name), name));
            if a != b || a.as_ref().is_some_and(Option::is_none) {
                changed.insert(format!("{kind}:{name}"));
            }
        }
    }
    changed
}

/// The components a redeploy is asked for, split by what becomes of them.
struct Redeploy {
    app: String,
    config: AppConfig,
    /// On: deployed again.
    on: Vec<String>,
    /// Turned off: torn down.
    off: Vec<String>,
    /// Not in the config the install runs: nothing to deploy.
    gone: Vec<String>,
}

impl Services<'_> {
    /// Records that `before`'s values changed (to what the store holds
    /// now) for `components`, which `workflow` deploys (none: a later
    /// deploy will).
    pub(crate) async fn note_change(
        &self,
        org: &OrgId,
        before: &Install,
        components: Vec<String>,
        workflow: Option<&WorkflowId>,
    ) -> Result<(), Error> {
        if !deployed(before.state) || components.is_empty() {
            return Ok(());
        }
        let at = now_ms();
        update_pending(self.store, org, &before.id, |p, now| {
            let mut p = p.unwrap_or_else(|| Unapplied::begin(values_of(before), at));
            p.changed(components.clone(), workflow.cloned(), at);
            p.sealed_changed = sealed_changed(
                self.secrets,
                &before.id,
                &p.deployed.sealed_json,
                &now.sealed_json,
            );
            Some(p)
        })
        .await?;
        // Its workflow may have ended already.
        if let Some(w) = workflow {
            self.engine.settle_pending(org, &before.id, w).await?;
        }
        Ok(())
    }

    /// `POST /v1/installs/{id}/pending/apply`: a redeploy of the
    /// components that do not run the install's values yet (a teardown of
    /// each one turned off, which only an admin starts). Deployers and
    /// admins; audited.
    pub(crate) async fn apply_pending(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<PendingResolved, Error> {
        let result = self.deploy_pending(caller, key).await;
        self.audited_at::<ep::ApplyInstallPending, _>(caller, &[key], result)
            .await
    }

    async fn deploy_pending(&self, caller: &Caller, key: &str) -> Result<PendingResolved, Error> {
        require_deployer(&caller.principal)?;
        let org = &caller.principal.org_id;
        let install = self.find_install(caller, key).await?;
        let (Some(p), Some(_)) = (install.pending.clone(), pending_view(&install)) else {
            return Err(nothing_pending(&install));
        };
        if !deployed(install.state) {
            return Err(Error::refused(
                ErrorCode::NothingPending,
                format!(
                    "install {} is {}: nothing of it runs, its next provision deploys its values",
                    install.name, install.state
                ),
            ));
        }
        let plan = self
            .plan_redeploy(org, &install, p.waiting.keys().cloned().collect())
            .await?;
        if !plan.off.is_empty() {
            // Tearing down is an admin's.
            require_admin(&caller.principal)?;
        }
        let workflows = self.start_redeploy(org, &install, &plan).await?;
        let at = now_ms();
        update_pending(self.store, org, &install.id, |p, _| {
            let mut p = p?;
            let left = p.forget(plan.gone.iter().map(String::as_str));
            p.changed([], workflows.first().map(|w| w.id.clone()), at);
            left.then_some(p)
        })
        .await?;
        self.settle(org, &install, &workflows).await?;
        let mut message = format!(
            "install {}'s pending values deploy to {}: {}",
            install.name,
            plan.on
                .iter()
                .chain(&plan.off)
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
            started_text(&workflows)
        );
        if !plan.gone.is_empty() {
            message.push_str(&format!(
                "; {} left its config (v{}): nothing to deploy there",
                plan.gone.join(", "),
                install.config_version
            ));
        }
        self.resolved(caller, &install, workflows, message).await
    }

    /// `POST /v1/installs/{id}/pending/discard`: the deployed values back
    /// (inputs, secrets, toggles, overrides), and the components the
    /// change was for deployed again with them (those that ran the dropped
    /// values change back; the plans of the others show nothing to
    /// change). Nothing changes when that cannot start. Admins; audited.
    pub(crate) async fn discard_pending(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<PendingResolved, Error> {
        let result = self.drop_pending(caller, key).await;
        self.audited_at::<ep::DiscardInstallPending, _>(caller, &[key], result)
            .await
    }

    async fn drop_pending(&self, caller: &Caller, key: &str) -> Result<PendingResolved, Error> {
        require_admin(&caller.principal)?;
        let org = &caller.principal.org_id;
        let install = self.find_install(caller, key).await?;
        let (Some(p), Some(view)) = (install.pending.clone(), pending_view(&install)) else {
            return Err(nothing_pending(&install));
        };
        let dropped = values_of(&install);
        self.set_values(org, &install.id, &dropped, &p.deployed)
            .await?;
        let restored = self
            .store
            .find_install(org, install.id.as_str())
            .await?
            .ok_or_else(|| Error::not_found(format!("no install {key:?}")))?;
        // Those that ran the dropped values change back; those that never
        // did are deployed too, their plans confirming that nothing
        // changes (and their last change then succeeded).
        let all: BTreeSet<String> = p.waiting.keys().chain(&p.applied).cloned().collect();
        let started = async {
            let plan = self
                .plan_redeploy(org, &restored, all.iter().cloned().collect())
                .await?;
            self.start_redeploy(org, &restored, &plan).await
        }
        .await;
        let workflows = match started {
            Ok(w) => w,
            Err(e) => {
                // Nothing half done: the dropped values back as they were.
                self.set_values(org, &install.id, &p.deployed, &dropped)
                    .await?;
                return Err(e);
            }
        };
        // What ran the dropped values runs them until deployed again.
        let at = now_ms();
        let again = (!p.applied.is_empty()).then(|| {
            let mut again = Unapplied::begin(dropped.clone(), at);
            again.changed(
                p.applied.iter().cloned(),
                workflows.first().map(|w| w.id.clone()),
                at,
            );
            again.sealed_changed = sealed_changed(
                self.secrets,
                &install.id,
                &dropped.sealed_json,
                &restored.sealed_json,
            );
            again
        });
        update_pending(self.store, org, &install.id, |_, _| again.clone()).await?;
        self.settle(org, &install, &workflows).await?;
        let lines: Vec<String> = view.changes.iter().map(PendingValue::line).collect();
        let message = format!(
            "install {}: dropped {}; back to what is deployed, and {} deployed again to match: {}",
            install.name,
            if lines.is_empty() {
                "nothing (its values were changed back)".to_owned()
            } else {
                lines.join(", ")
            },
            all.into_iter().collect::<Vec<_>>().join(", "),
            started_text(&workflows)
        );
        self.resolved(caller, &restored, workflows, message).await
    }

    /// Writes `to` over an install's values `now`: its inputs and sealed
    /// values, and each toggle and override that differs.
    async fn set_values(
        &self,
        org: &OrgId,
        id: &InstallId,
        now: &InstallValues,
        to: &InstallValues,
    ) -> Result<(), Error> {
        self.store
            .set_install_inputs(org, id, &to.inputs_json, &to.sealed_json)
            .await?;
        for name in keys(&to.toggles, &now.toggles) {
            let was = to.toggles.get(name).copied();
            if was != now.toggles.get(name).copied() {
                self.store.set_install_toggle(org, id, name, was).await?;
            }
        }
        let read = |json: &str| -> Result<Overrides, Error> {
            serde_json::from_str(json).map_err(|e| internal("stored overrides unreadable", e))
        };
        let (was, is): (Overrides, Overrides) =
            (read(&to.overrides_json)?, read(&now.overrides_json)?);
        let both: BTreeMap<&String, ()> = was.keys().chain(is.keys()).map(|k| (k, ())).collect();
        for name in both.into_keys() {
            if was.get(name) != is.get(name) {
                self.store
                    .set_install_override(org, id, name, was.get(name))
                    .await?;
            }
        }
        Ok(())
    }

    /// What deploys `components` of `install` with its values: those on,
    /// those turned off, those its config (the version it runs) no longer
    /// has.
    async fn plan_redeploy(
        &self,
        org: &OrgId,
        install: &Install,
        components: Vec<String>,
    ) -> Result<Redeploy, Error> {
        let (app, config) = self
            .engine
            .app_config(org, &install.app_id, install.config_version)
            .await?;
        let (mut on, mut off, mut gone) = (Vec::new(), Vec::new(), Vec::new());
        for c in components {
            match config.component(&c) {
                Some(comp) if install.enabled(comp) => on.push(c),
                Some(_) => off.push(c),
                None => gone.push(c),
            }
        }
        Ok(Redeploy {
            app,
            config: std::sync::Arc::unwrap_or_clone(config),
            on,
            off,
            gone,
        })
    }

    /// Starts `plan` on `install`: one redeploy of the components that
    /// are on (with the config version it runs, and its release's builds
    /// when it runs one), and a teardown of each one turned off.
    async fn start_redeploy(
        &self,
        org: &OrgId,
        install: &Install,
        plan: &Redeploy,
    ) -> Result<Vec<WorkflowInfo>, Error> {
        let release = self.running_release(org, install).await?;
        let mut started = Vec::new();
        if !plan.on.is_empty() {
            let start = Start {
                redeploy: Some(plan.on.clone()),
                release: release.as_ref(),
                ..Start::new(
                    install,
                    &plan.app,
                    &plan.config,
                    install.config_version,
                    WorkflowKind::Deploy,
                )
            };
            started.push(self.engine.start(org, start).await?);
        }
        for c in &plan.off {
            let start = Start {
                component: Some(c.clone()),
                trigger: Some("disable-component"),
                ..Start::new(
                    install,
                    &plan.app,
                    &plan.config,
                    install.config_version,
                    WorkflowKind::Teardown,
                )
            };
            started.push(self.engine.start(org, start).await?);
        }
        Ok(started)
    }

    /// The release `install` runs, when it runs one at the config version
    /// it has: a redeploy takes its builds, not the newest.
    pub(crate) async fn running_release(
        &self,
        org: &OrgId,
        install: &Install,
    ) -> Result<Option<nuon_core::wire::ReleaseInfo>, Error> {
        Ok(
            match self.store.install_releases(org).await?.get(&install.id) {
                Some(id) => self
                    .store
                    .get_release(org, id)
                    .await?
                    .filter(|r| r.config_version == install.config_version),
                None => None,
            },
        )
    }

    /// What `workflows` deployed, should they have ended already.
    async fn settle(
        &self,
        org: &OrgId,
        install: &Install,
        workflows: &[WorkflowInfo],
    ) -> Result<(), Error> {
        for w in workflows {
            self.engine.settle_pending(org, &install.id, &w.id).await?;
        }
        Ok(())
    }

    async fn resolved(
        &self,
        caller: &Caller,
        install: &Install,
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

fn nothing_pending(install: &Install) -> Error {
    Error::refused(
        nuon_core::wire::ErrorCode::NothingPending,
        format!(
            "install {} has no pending values: what it holds is deployed (`nuon installs get {}` shows it)",
            install.name, install.name
        ),
    )
}

/// `workflow wfl_… started`, or that none was needed.
fn started_text(workflows: &[WorkflowInfo]) -> String {
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
