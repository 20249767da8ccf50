//! Rollouts on the Control API: a release deployed to the installs a label
//! selector picks, in waves (`POST /v1/releases/{id}/rollouts`, or a dry
//! run of it), each install's state (`GET /v1/rollouts/{id}`), and what an
//! operator does to one: resume, retry, cancel, roll back. The engine
//! ([`crate::engine`]) plans and drives them; this is the thin HTTP side.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use nuon_core::endpoint as ep;
use nuon_core::rollout::{CreateRollout, RolloutInfo, RolloutList};
use nuon_core::{ReleaseId, RolloutId};

use super::apps::app_names;
use super::control::require_deployer;
use super::doc::Op;
use super::{ApiAuth, Body, SharedState};
use crate::engine::RolloutAct;
use crate::error::Error;

/// The operation `E`, which does `act` to a rollout.
fn act<E: nuon_core::endpoint::Endpoint>(act: RolloutAct) -> Op {
    Op::endpoint::<E>(post(
        move |state: State<SharedState>, auth: ApiAuth, key: Path<String>| {
            rollout_act(state, auth, key, act)
        },
    ))
}

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::CreateRollout>(post(create_rollout)).or_status(
            200,
            "A dry run: the plan, with status `planned`; nothing is stored or started.",
        ),
        Op::endpoint::<ep::ListRollouts>(get(list_rollouts)),
        Op::endpoint::<ep::GetRollout>(get(get_rollout)),
        act::<ep::ResumeRollout>(RolloutAct::Resume),
        act::<ep::PauseRollout>(RolloutAct::Pause),
        act::<ep::RetryRollout>(RolloutAct::Retry),
        act::<ep::CancelRollout>(RolloutAct::Cancel),
        act::<ep::RollbackRollout>(RolloutAct::Rollback),
    ]
}

/// Rollouts with their apps' names (read once, when one lacks it).
async fn named(
    state: &SharedState,
    auth: &ApiAuth,
    mut rollouts: Vec<RolloutInfo>,
) -> Result<Vec<RolloutInfo>, Error> {
    if rollouts
        .iter()
        .any(|r| r.app_name.is_none() && r.app_id.is_some())
    {
        let apps = app_names(state, auth).await?;
        for r in rollouts.iter_mut().filter(|r| r.app_name.is_none()) {
            r.app_name = r.app_id.as_ref().and_then(|a| apps.get(a)).cloned();
        }
    }
    for r in rollouts
        .iter_mut()
        .filter(|r| r.status == nuon_core::rollout::RolloutStatus::Running)
    {
        waiting_approvals(state, auth, r).await?;
    }
    Ok(rollouts)
}

/// Says of each install of a running rollout whose deploy waits for a
/// person where it waits (`waiting for approval at INSTALL/STEP`), and
/// the rollout with it: a rollout at an approval does not just run.
async fn waiting_approvals(
    state: &SharedState,
    auth: &ApiAuth,
    r: &mut RolloutInfo,
) -> Result<(), Error> {
    let mut at = Vec::new();
    for t in r
        .targets
        .iter_mut()
        .filter(|t| t.state == nuon_core::rollout::TargetState::Running)
    {
        let Some(wf) = &t.workflow_id else { continue };
        let Some(wf) = state.store.get_workflow(&auth.0.org_id, wf).await? else {
            continue;
        };
        let waiting = wf.steps.iter().find(|s| {
            s.status == nuon_core::workflow::StepStatus::WaitingApproval
                && s.approved_at_ms.is_none()
        });
        if let Some(s) = waiting {
            let said = format!("waiting for approval at {}/{}", t.install, s.name);
            t.reason = Some(format!(
                "{said}: `nuon workflows approve {} --step \"{}\"`",
                wf.id, s.name
            ));
            at.push(said);
        }
    }
    if !at.is_empty() && r.reason.is_none() {
        r.reason = Some(at.join("; "));
    }
    Ok(())
}

/// One rollout with its app's name.
async fn named_one(
    state: &SharedState,
    auth: &ApiAuth,
    r: RolloutInfo,
) -> Result<RolloutInfo, Error> {
    Ok(named(state, auth, vec![r]).await?.remove(0))
}

async fn release_of(
    state: &SharedState,
    auth: &ApiAuth,
    key: &str,
) -> Result<nuon_core::wire::ReleaseInfo, Error> {
    let missing = || Error::not_found(format!("no release {key:?} (see `nuon releases list`)"));
    let id: ReleaseId = key.parse().map_err(|_| missing())?;
    let mut release = state
        .store
        .get_release(&auth.0.org_id, &id)
        .await?
        .ok_or_else(missing)?;
    release.app_name = app_names(state, auth).await?.get(&release.app_id).cloned();
    Ok(release)
}

fn rollout_id(key: &str) -> Result<RolloutId, Error> {
    key.parse().map_err(|_| {
        Error::not_found(format!(
            "no rollout {key:?} (see `nuon releases status REL`)"
        ))
    })
}

pub(super) async fn create_rollout(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
    Body(req): Body<CreateRollout>,
) -> Result<(StatusCode, Json<RolloutInfo>), Error> {
    if !req.dry_run {
        require_deployer(&auth)?;
    }
    let release = release_of(&state, &auth, &key).await?;
    let rollout = state
        .engine
        .create_rollout(&auth.0.org_id, &release, &req, Some(auth.0.actor()))
        .await?;
    let status = if req.dry_run {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(rollout)))
}

async fn list_rollouts(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<Json<RolloutList>, Error> {
    let release = release_of(&state, &auth, &key).await?;
    let rollouts = state
        .store
        .list_rollouts(&auth.0.org_id, Some(&release.id))
        .await?;
    Ok(Json(RolloutList {
        rollouts: named(&state, &auth, rollouts).await?,
    }))
}

pub(super) async fn get_rollout(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<Json<RolloutInfo>, Error> {
    let id = rollout_id(&key)?;
    let found = state
        .store
        .get_rollout(&auth.0.org_id, &id)
        .await?
        .ok_or_else(|| {
            Error::not_found(format!(
                "no rollout {key:?} (see `nuon releases status REL`)"
            ))
        })?;
    Ok(Json(named_one(&state, &auth, found).await?))
}

pub(super) async fn rollout_act(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
    act: RolloutAct,
) -> Result<Json<RolloutInfo>, Error> {
    require_deployer(&auth)?;
    let id = rollout_id(&key)?;
    let r = state
        .engine
        .rollout_act(&auth.0.org_id, &id, act, Some(auth.0.actor()))
        .await?;
    Ok(Json(named_one(&state, &auth, r).await?))
}
