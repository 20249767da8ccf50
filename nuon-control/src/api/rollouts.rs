//! Rollouts on the Control API: a release deployed to the installs a label
//! selector picks, in waves (`POST /v1/releases/{id}/rollouts`, or a dry
//! run of it), each install's state (`GET /v1/rollouts/{id}`), and what an
//! operator does to one: resume, retry, cancel, roll back. The service
//! ([`crate::service::rollouts`]) does them; this is the thin HTTP side.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post};
use nuon_core::endpoint as ep;
use nuon_core::rollout::{CreateRollout, RolloutInfo, RolloutList};

use super::doc::Op;
use super::{Body, Caller, SharedState, body_of};
use crate::engine::RolloutAct;
use crate::error::Error;

/// The operation `E`, which does `act` to a rollout.
fn act<E: nuon_core::endpoint::Endpoint>(act: RolloutAct) -> Op {
    Op::endpoint::<E>(post(
        move |state: State<SharedState>, caller: Caller, key: Path<String>| {
            rollout_act(state, caller, key, act)
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

async fn create_rollout(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Body<CreateRollout>, Error>,
) -> Result<(StatusCode, Json<RolloutInfo>), Error> {
    let req = body_of::<ep::CreateRollout, _>(&state, &caller, &[&key], body).await?;
    let dry_run = req.dry_run;
    let rollout = state.services().create_rollout(&caller, &key, req).await?;
    let status = if dry_run {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, Json(rollout)))
}

async fn list_rollouts(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<RolloutList>, Error> {
    state
        .services()
        .list_rollouts(&caller, &key)
        .await
        .map(Json)
}

async fn get_rollout(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<RolloutInfo>, Error> {
    state.services().get_rollout(&caller, &key).await.map(Json)
}

async fn rollout_act(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    act: RolloutAct,
) -> Result<Json<RolloutInfo>, Error> {
    state
        .services()
        .act_on_rollout(&caller, &key, act)
        .await
        .map(Json)
}
