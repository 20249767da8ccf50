//! Runner releases on the Control API: a runner binary the vendor pushed
//! to its artifact store as an OCI artifact (`nuon runners release
//! publish`), signed here with the org's key, and rolled out to install
//! runners in waves by the rollout engine (`kind: runner`). Each runner
//! downloads the binary by digest from the vendor's store, checks the
//! release's signature, and switches to it itself.

use axum::Json;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::{get, post, put};
use nuon_core::Signed as _;
use nuon_core::endpoint as ep;
use nuon_core::rollout::{CreateRollout, RolloutInfo, RolloutList};
use nuon_core::wire::{PublishRunnerRelease, RunnerReleaseInfo, RunnerReleaseList};
use nuon_core::{ReleaseId, now_ms};

use super::control::{require_admin, require_deployer};
use super::doc::Op;
use super::{ApiAuth, Body, Caller, SharedState};
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

/// A version as a runner reports it: `1.4.0`, `1.4.0-rc.1+abc`.
fn check_version(v: &str) -> Result<(), Error> {
    let ok = !v.is_empty()
        && v.len() <= 64
        && v.starts_with(|c: char| c.is_ascii_alphanumeric())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '+' | '_'));
    // Releases are looked up by version or id: a version is never an id.
    if ok && v.parse::<ReleaseId>().is_err() {
        Ok(())
    } else {
        Err(Error::bad_request(format!(
            "version {v:?}: letters, digits, '.', '-', '+' and '_', starting with a letter or digit, at most 64 (as `nuon-runner --version` prints it)"
        )))
    }
}

/// A platform word (`linux`, `x86_64`).
fn check_word(what: &str, v: &str) -> Result<(), Error> {
    if !v.is_empty() && v.len() <= 32 && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(())
    } else {
        Err(Error::bad_request(format!(
            "{what} {v:?}: one word of letters, digits and '_' (as Rust names it: linux, x86_64, aarch64)"
        )))
    }
}

fn check_digest(what: &str, v: &str) -> Result<(), Error> {
    v.parse::<nuon_core::artifact::Digest>()
        .map(|_| ())
        .map_err(|e| Error::bad_request(format!("{what}: {e}")))
}

async fn publish(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Body(req): Body<PublishRunnerRelease>,
) -> Result<(StatusCode, Json<RunnerReleaseInfo>), Error> {
    // A runner binary runs in every install it reaches: an admin's act.
    require_admin(&auth)?;
    check_version(&req.version)?;
    check_word("os", &req.os)?;
    check_word("arch", &req.arch)?;
    check_digest("manifest", &req.manifest)?;
    check_digest("digest", &req.digest)?;
    let repo_ok = !req.repository.is_empty()
        && req.repository.len() <= 255
        && req.repository.split('/').all(|part| {
            !part.is_empty()
                && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                && part.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
                })
        });
    if !repo_ok {
        return Err(Error::bad_request(format!(
            "repository {:?}: an OCI repository name (lower-case letters, digits, '.', '_', '-', parts separated by '/')",
            req.repository
        )));
    }
    if req.size == 0 {
        return Err(Error::bad_request("size: a runner binary is not empty"));
    }
    let org = &auth.0.org_id;
    let mut release = RunnerReleaseInfo {
        id: ReleaseId::generate(),
        version: req.version,
        os: req.os,
        arch: req.arch,
        repository: req.repository,
        manifest: req.manifest,
        digest: req.digest,
        size: req.size,
        signature: String::new(),
        served: false,
        created_at_ms: now_ms(),
        created_by: Some(auth.0.actor()),
    };
    let signer = state
        .keys
        .signer(org)
        .await
        .map_err(|e| Error::internal(format!("cannot sign the runner release: {e}")))?;
    release.signature = signer
        .sign(&release.signed_bytes())
        .await
        .map_err(|e| Error::internal(format!("cannot sign the runner release: {e}")))?;
    state.store.create_runner_release(org, &release).await?;
    tracing::info!(version = %release.version, digest = %release.digest, "runner release published");
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

async fn upload(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Bytes,
) -> Result<Json<RunnerReleaseInfo>, Error> {
    Ok(Json(
        state
            .services()
            .upload_runner_binary(&caller, &key, &body)
            .await?,
    ))
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
    auth: ApiAuth,
    Path(key): Path<String>,
    Body(req): Body<CreateRollout>,
) -> Result<(StatusCode, Json<RolloutInfo>), Error> {
    if !req.dry_run {
        require_deployer(&auth)?;
    }
    let release = runner_release_of(&state, &auth, &key).await?;
    let rollout = state
        .engine
        .create_runner_rollout(&auth.0.org_id, &release, &req, Some(auth.0.actor()))
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
    let release = runner_release_of(&state, &auth, &key).await?;
    let rollouts = state
        .store
        .list_rollouts(&auth.0.org_id, Some(&release.id))
        .await?;
    Ok(Json(RolloutList { rollouts }))
}
