//! Runner releases on the Control API: a runner binary the vendor pushed
//! to its artifact store as an OCI artifact (`nuon runners release
//! publish`), signed here with the org's key, and rolled out to install
//! runners in waves by the rollout engine (`kind: runner`). Each runner
//! downloads the binary by digest from the vendor's store, checks the
//! release's signature, and switches to it itself. The service
//! (`service/runner_releases.rs`, `service/runner_binaries.rs`) does
//! them; this is the thin HTTP side.

use axum::Json;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::BytesRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use nuon_core::endpoint as ep;
use nuon_core::rollout::{CreateRollout, RolloutInfo, RolloutList};
use nuon_core::wire::{ErrorCode, PublishRunnerRelease, RunnerReleaseInfo, RunnerReleaseList};

use super::doc::Op;
use super::{ApiAuth, Body, Caller, SharedState, body_of};
use crate::error::Error;
use crate::service::runner_binaries::MAX_RUNNER_BINARY_BYTES;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::PublishRunnerRelease>(post(publish)),
        Op::endpoint::<ep::ListRunnerReleases>(get(list)),
        Op::endpoint::<ep::GetRunnerRelease>(get(get_one)),
        Op::endpoint::<ep::UploadRunnerBinary>(
            put(upload).layer(DefaultBodyLimit::max(MAX_RUNNER_BINARY_BYTES)),
        )
        .takes_bytes("application/octet-stream"),
        Op::endpoint::<ep::CreateRunnerRollout>(post(create_rollout)).or_status(
            200,
            "A dry run: the plan, with status `planned`; nothing is stored or started.",
        ),
        Op::endpoint::<ep::ListRunnerRollouts>(get(list_rollouts)),
    ]
}

async fn publish(
    State(state): State<SharedState>,
    caller: Caller,
    body: Result<Body<PublishRunnerRelease>, Error>,
) -> Result<(StatusCode, Json<RunnerReleaseInfo>), Error> {
    let req = body_of::<ep::PublishRunnerRelease, _>(&state, &caller, &[], body).await?;
    let release = state
        .services()
        .publish_runner_release(&caller, req)
        .await?;
    Ok((StatusCode::CREATED, Json(release)))
}

async fn list(
    State(state): State<SharedState>,
    auth: ApiAuth,
) -> Result<Json<RunnerReleaseList>, Error> {
    Ok(Json(RunnerReleaseList {
        releases: state.services().runner_releases(&auth.0.org_id).await?,
    }))
}

/// The runner release `key` (a version or an id) names.
pub(super) async fn runner_release_of(
    state: &SharedState,
    auth: &ApiAuth,
    key: &str,
) -> Result<RunnerReleaseInfo, Error> {
    state.services().runner_release(&auth.0.org_id, key).await
}

/// A body that could not be read (over the limit) is refused and
/// recorded under the operation, as the service records the rest.
async fn upload(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<RunnerReleaseInfo>, Error> {
    let services = state.services();
    let body = match body {
        Ok(b) => b,
        Err(e) => {
            let refused = if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                Error::refused(
                    ErrorCode::TooLarge,
                    format!("a runner binary is at most {MAX_RUNNER_BINARY_BYTES} bytes"),
                )
            } else {
                Error::bad_request(format!("the binary could not be read: {}", e.body_text()))
            };
            let target = &[key.as_str()];
            return services
                .audited_at::<ep::UploadRunnerBinary, _>(&caller, target, Err(refused))
                .await;
        }
    };
    services
        .upload_runner_binary(&caller, &key, &body)
        .await
        .map(Json)
}

async fn get_one(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<Json<RunnerReleaseInfo>, Error> {
    Ok(Json(runner_release_of(&state, &auth, &key).await?))
}

async fn create_rollout(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Body<CreateRollout>, Error>,
) -> Result<(StatusCode, Json<RolloutInfo>), Error> {
    let req = body_of::<ep::CreateRunnerRollout, _>(&state, &caller, &[&key], body).await?;
    let dry_run = req.dry_run;
    let rollout = state
        .services()
        .create_runner_rollout(&caller, &key, req)
        .await?;
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
        .list_runner_rollouts(&caller, &key)
        .await
        .map(Json)
}
