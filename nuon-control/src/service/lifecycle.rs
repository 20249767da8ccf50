//! An install's and an app's lifecycle: deleting an install (deprovision,
//! then remove), forgetting one (remove the record only), changing inputs
//! and secrets with the workflow Nuon starts for it (the `update-inputs`
//! triggers around a redeploy of what reads the values), and deleting an
//! app that has no install left.

use nuon_core::endpoint::{self as ep};
use nuon_core::wire::{
    AppInfo, ErrorCode, InputsUpdated, InstallRemoved, UpdateInputs, WorkflowInfo,
};
use nuon_core::workflow::{self, WorkflowKind};

use super::installs::{resolve_inputs, resolve_secrets, stored_values};
use super::workflows::workflow_view;
use super::{Caller, Services, require_admin};
use crate::engine::Start;
use crate::error::Error;

impl Services<'_> {
    /// `DELETE /v1/installs/{id}`: a deprovision of the install, with the
    /// config it was deployed with; the install goes when it succeeds.
    /// Refused while a rollout holds it. Admins only; recorded in the
    /// audit trail, refusals included. The workflow (202).
    pub(crate) async fn delete_install(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<WorkflowInfo, Error> {
        let result = self.start_deprovision(caller, key).await;
        self.audited_at::<ep::DeleteInstall, _>(caller, &[key], result)
            .await
    }

    async fn start_deprovision(&self, caller: &Caller, key: &str) -> Result<WorkflowInfo, Error> {
        require_admin(&caller.principal)?;
        let (install, app, latest) = self.install_app_config(caller, key).await?;
        // Destroyed with the config it was deployed with.
        let org = &caller.principal.org_id;
        if let Some(r) = self.engine.rollout_holding(org, &install.id).await? {
            return Err(Error::refused(
                ErrorCode::InstallInRollout,
                format!(
                    "rollout {} ({}) still holds {}: let it finish, or `nuon releases cancel {}` first",
                    r.id, r.status, install.name, r.id
                ),
            ));
        }
        let (version, config) = if install.config_version == latest.version {
            (latest.version, latest.config)
        } else {
            let (_, config) = self
                .engine
                .app_config(org, &install.app_id, install.config_version)
                .await?;
            (
                install.config_version,
                std::sync::Arc::unwrap_or_clone(config),
            )
        };
        let wf = self
            .engine
            .start(
                org,
                Start {
                    trigger: Some(workflow::DELETE),
                    ..Start::new(
                        &install,
                        &app.name,
                        &config,
                        version,
                        WorkflowKind::Deprovision,
                    )
                },
            )
            .await?;
        Ok(workflow_view(wf))
    }

    /// `POST /v1/installs/{id}/forget`: the install's record removed, and
    /// nothing in the customer's cloud destroyed (the answer warns of it).
    /// Admins only; recorded in the audit trail, refusals included.
    pub(crate) async fn forget_install(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<InstallRemoved, Error> {
        let result = self.forget_record(caller, key).await;
        self.audited_at::<ep::ForgetInstall, _>(caller, &[key], result)
            .await
    }

    async fn forget_record(&self, caller: &Caller, key: &str) -> Result<InstallRemoved, Error> {
        require_admin(&caller.principal)?;
        let install = self.find_install(caller, key).await?;
        let info = self.install_view(caller, install.clone()).await?;
        if !self
            .store
            .remove_install(&caller.principal.org_id, &install.id)
            .await?
        {
            return Err(Error::not_found(format!("no install {key:?}")));
        }
        let warning = format!(
            "install {} is forgotten, not deprovisioned: whatever it deployed in the customer's cloud is still there, and its runner's token no longer works",
            install.name
        );
        tracing::warn!(install = %install.name, "install forgotten");
        Ok(InstallRemoved {
            install: info,
            warning,
        })
    }

    /// `POST /v1/installs/{id}/update-inputs`: inputs and secrets changed,
    /// checked against the config the install runs (every problem said at
    /// once), and the workflow started that redeploys what reads them
    /// between the `update-inputs` triggers' actions. With `dry_run`, only
    /// what would run (any token may ask). Admins only; recorded in the
    /// audit trail, dry runs and refusals included.
    pub(crate) async fn update_install_inputs(
        &self,
        caller: &Caller,
        key: &str,
        req: UpdateInputs,
    ) -> Result<InputsUpdated, Error> {
        let result = self.change_inputs(caller, key, req).await;
        self.audited_at::<ep::UpdateInstallInputs, _>(caller, &[key], result)
            .await
    }

    /// What a change of inputs and secrets of install `key` (`req` as a
    /// dry run) would redeploy and run. Nothing changes, and nothing is
    /// recorded: the dashboard shows it before the person confirms.
    pub(crate) async fn plan_inputs_update(
        &self,
        caller: &Caller,
        key: &str,
        req: UpdateInputs,
    ) -> Result<InputsUpdated, Error> {
        let req = UpdateInputs {
            dry_run: true,
            ..req
        };
        self.change_inputs(caller, key, req).await
    }

    async fn change_inputs(
        &self,
        caller: &Caller,
        key: &str,
        req: UpdateInputs,
    ) -> Result<InputsUpdated, Error> {
        if !req.dry_run {
            require_admin(&caller.principal)?;
        }
        let org = &caller.principal.org_id;
        let (install, app, _) = self.install_app_config(caller, key).await?;
        if req.inputs.is_empty() && req.secrets.is_empty() {
            return Err(Error::bad_request(
                "name at least one input (`inputs`) or secret (`secrets`) to change",
            ));
        }
        let (_, config) = self
            .engine
            .app_config(org, &install.app_id, install.config_version)
            .await?;
        let (mut plain, mut sealed) = stored_values(&install)?;
        let mut problems = Vec::new();
        let b = self.secrets;
        resolve_inputs(
            &config,
            &install.id,
            &req.inputs,
            &mut plain,
            &mut sealed,
            b,
            &mut problems,
        );
        resolve_secrets(
            &config,
            &install.id,
            &req.secrets,
            &mut sealed,
            b,
            &mut problems,
        );
        if !problems.is_empty() {
            return Err(Error::refused(
                ErrorCode::InvalidInputs,
                format!("install {:?}: {}", install.name, problems.join("; ")),
            ));
        }
        let inputs: Vec<String> = req.inputs.keys().cloned().collect();
        let secrets: Vec<String> = req.secrets.keys().cloned().collect();
        let redeploys: Vec<String> = nuon_core::app::components_reading(&config, &inputs, &secrets)
            .into_iter()
            .filter(|c| config.component(c).is_some_and(|c| install.enabled(c)))
            .collect();
        // A changed secret synced into Kubernetes is written there again.
        let sync_secrets = config
            .secrets
            .iter()
            .any(|s| !s.kubernetes.is_empty() && req.secrets.contains_key(&s.name));
        let mut triggers = vec!["pre-update-inputs", "post-update-inputs"];
        if sync_secrets {
            triggers.extend(["pre-secrets-sync", "post-secrets-sync"]);
        }
        let actions: Vec<String> = triggers
            .iter()
            .flat_map(|t| workflow::trigger_steps(&config, t, None))
            .filter_map(|s| s.target)
            .collect();
        if req.dry_run {
            return Ok(InputsUpdated {
                install: self.install_view(caller, install).await?,
                redeploys,
                actions,
                syncs_secrets: sync_secrets,
                workflow: None,
                dry_run: true,
            });
        }
        let updated = self
            .write_values(org, &install, key, &plain, &sealed)
            .await?;
        let workflow = if redeploys.is_empty() && actions.is_empty() && !sync_secrets {
            None
        } else {
            // The install's release, when it runs one: its builds, not the
            // newest.
            let release = self.running_release(org, &updated).await?;
            let started = self
                .engine
                .start(
                    org,
                    Start {
                        redeploy: Some(redeploys.clone()),
                        sync_secrets,
                        release: release.as_ref(),
                        ..Start::new(
                            &updated,
                            &app.name,
                            &config,
                            updated.config_version,
                            WorkflowKind::Deploy,
                        )
                    },
                )
                .await;
            match started {
                Ok(wf) => {
                    self.note_change(org, &install, redeploys.clone(), Some(&wf.id))
                        .await?;
                    Some(workflow_view(wf))
                }
                Err(e) => {
                    // Nothing changes when the redeploy cannot start.
                    self.store
                        .set_install_inputs(
                            org,
                            &install.id,
                            &install.inputs_json,
                            &install.sealed_json,
                        )
                        .await?;
                    return Err(e.into());
                }
            }
        };
        Ok(InputsUpdated {
            install: self.install_view(caller, updated).await?,
            redeploys,
            actions,
            syncs_secrets: sync_secrets,
            workflow,
            dry_run: false,
        })
    }

    /// `DELETE /v1/apps/{id}`: the app with its config versions, builds
    /// and releases; refused while it has installs. Admins only; recorded
    /// in the audit trail, refusals included. The app as it was.
    pub(crate) async fn delete_app(&self, caller: &Caller, key: &str) -> Result<AppInfo, Error> {
        let result = self.delete_empty_app(caller, key).await;
        self.audited_at::<ep::DeleteApp, _>(caller, &[key], result)
            .await
    }

    async fn delete_empty_app(&self, caller: &Caller, key: &str) -> Result<AppInfo, Error> {
        require_admin(&caller.principal)?;
        let app = self.find_app(caller, key).await?;
        if !self
            .store
            .remove_app(&caller.principal.org_id, &app.id)
            .await?
        {
            return Err(Error::not_found(format!("no app {key:?}")));
        }
        tracing::info!(app = %app.name, "app deleted");
        Ok(app)
    }
}
