//! An install's and an app's lifecycle on the Control API: deleting an
//! install (deprovision, then remove), forgetting one (remove the record
//! only), changing inputs and secrets with the workflow Nuon starts for
//! it (the `update-inputs` triggers around a redeploy of what reads the
//! values), and deleting an app that has no install left.

use nuon_core::endpoint as ep;
use nuon_core::wire::ErrorCode;
use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{delete, post};
use nuon_core::wire::{
    AppInfo, InputsUpdated, InstallRemoved, PendingResolved, UpdateInputs, WorkflowInfo,
};
use nuon_core::workflow::{self, WorkflowKind};
use serde_json::Value;

use super::apps::{
    app_of, install_app_config, install_info, internal, resolve_inputs, resolve_secrets,
    with_app_name,
};
use super::control::require_admin;
use super::doc::Op;
use super::{ApiAuth, Body, SharedState};
use crate::engine::Start;
use crate::error::Error;
use crate::secrets::Sealed;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::DeleteInstall>(delete(delete_install)),
        Op::endpoint::<ep::ForgetInstall>(post(forget_install)),
        Op::endpoint::<ep::UpdateInstallInputs>(post(update_inputs)),
        Op::endpoint::<ep::ApplyInstallPending>(post(apply_pending)).audited_by_service(),
        Op::endpoint::<ep::DiscardInstallPending>(post(discard_pending)).audited_by_service(),
        Op::endpoint::<ep::DeleteApp>(delete(delete_app)),
    ]
}

pub(super) async fn delete_install(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<(StatusCode, Json<WorkflowInfo>), Error> {
    require_admin(&auth)?;
    let (install, app, latest) = install_app_config(&state, &auth, &key).await?;
    // Destroyed with the config it was deployed with.
    let org = &auth.0.org_id;
    if let Some(r) = state.engine.rollout_holding(org, &install.id).await? {
        return Err(Error::api(
            StatusCode::CONFLICT,
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
        let (_, config) = state
            .engine
            .app_config(org, &install.app_id, install.config_version)
            .await?;
        (install.config_version, config)
    };
    let wf = state
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
    Ok((StatusCode::ACCEPTED, Json(super::workflow_view(wf))))
}

pub(super) async fn forget_install(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<Json<InstallRemoved>, Error> {
    require_admin(&auth)?;
    let install = super::apps::install_of(&state, &auth, &key).await?;
    let info = with_app_name(&state, &auth, install_info(install.clone())?).await?;
    if !state
        .store
        .remove_install(&auth.0.org_id, &install.id)
        .await?
    {
        return Err(Error::not_found(format!("no install {key:?}")));
    }
    let warning = format!(
        "install {} is forgotten, not deprovisioned: whatever it deployed in the customer's cloud is still there, and its runner's token no longer works",
        install.name
    );
    tracing::warn!(install = %install.name, "install forgotten");
    Ok(Json(InstallRemoved {
        install: info,
        warning,
    }))
}

pub(super) async fn update_inputs(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
    Body(req): Body<UpdateInputs>,
) -> Result<Json<InputsUpdated>, Error> {
    if !req.dry_run {
        require_admin(&auth)?;
    }
    let org = &auth.0.org_id;
    let (install, app, _) = install_app_config(&state, &auth, &key).await?;
    if req.inputs.is_empty() && req.secrets.is_empty() {
        return Err(Error::bad_request(
            "name at least one input (`inputs`) or secret (`secrets`) to change",
        ));
    }
    let (_, config) = state
        .engine
        .app_config(org, &install.app_id, install.config_version)
        .await?;
    let mut plain: BTreeMap<String, Value> = serde_json::from_str(&install.inputs_json)
        .map_err(|e| internal("stored inputs unreadable", e))?;
    let mut sealed: Sealed = serde_json::from_str(&install.sealed_json)
        .map_err(|e| internal("stored secrets unreadable", e))?;
    let mut problems = Vec::new();
    let b = &state.secrets;
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
        return Err(Error::api(
            StatusCode::BAD_REQUEST,
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
        return Ok(Json(InputsUpdated {
            install: with_app_name(&state, &auth, install_info(install)?).await?,
            redeploys,
            actions,
            syncs_secrets: sync_secrets,
            workflow: None,
            dry_run: true,
        }));
    }
    let updated = state
        .store
        .set_install_inputs(
            org,
            &install.id,
            &serde_json::to_string(&plain).map_err(|e| internal("cannot encode inputs", e))?,
            &serde_json::to_string(&sealed).map_err(|e| internal("cannot encode secrets", e))?,
        )
        .await?
        .ok_or_else(|| Error::not_found(format!("no install {key:?}")))?;
    let workflow = if redeploys.is_empty() && actions.is_empty() && !sync_secrets {
        None
    } else {
        // The install's release, when it runs one: its builds, not the
        // newest.
        let release = state.services().running_release(org, &updated).await?;
        let started = state
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
                state
                    .services()
                    .note_change(org, &install, redeploys.clone(), Some(&wf.id))
                    .await?;
                Some(super::workflow_view(wf))
            }
            Err(e) => {
                // Nothing changes when the redeploy cannot start.
                state
                    .store
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
    Ok(Json(InputsUpdated {
        install: with_app_name(&state, &auth, install_info(updated)?).await?,
        redeploys,
        actions,
        syncs_secrets: sync_secrets,
        workflow,
        dry_run: false,
    }))
}

async fn apply_pending(
    State(state): State<SharedState>,
    caller: crate::service::Caller,
    Path(key): Path<String>,
) -> Result<Json<PendingResolved>, Error> {
    Ok(Json(state.services().apply_pending(&caller, &key).await?))
}

async fn discard_pending(
    State(state): State<SharedState>,
    caller: crate::service::Caller,
    Path(key): Path<String>,
) -> Result<Json<PendingResolved>, Error> {
    Ok(Json(state.services().discard_pending(&caller, &key).await?))
}

pub(super) async fn delete_app(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<Json<AppInfo>, Error> {
    require_admin(&auth)?;
    let app = app_of(&state, &auth, &key).await?;
    if !state.store.remove_app(&auth.0.org_id, &app.id).await? {
        return Err(Error::not_found(format!("no app {key:?}")));
    }
    tracing::info!(app = %app.name, "app deleted");
    Ok(Json(app))
}
