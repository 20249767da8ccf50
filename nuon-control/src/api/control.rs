//! The Control API: runners, jobs and logs of the caller's org.

use nuon_core::endpoint as ep;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use nuon_core::token::issue_runner_token;
use nuon_core::wire::ErrorCode;
use nuon_core::wire::{
    CreateJob, CreateRunner, JobList, LogEntry, RunnerCreated, RunnerInfo, RunnerList, RunnerRole,
};
use nuon_core::{DebugJob, ExecJob, Job, JobId, JobSpec, RetryPolicy, RunnerId, now_ms};
use serde::Deserialize;
use serde_json::json;

use super::doc::Op;
use super::{ApiAuth, Body, Q, SharedState, path_id};
use crate::error::Error;

const DEFAULT_TIMEOUT_SECS: u64 = 3600;
const MAX_TIMEOUT_SECS: u64 = 7 * 86_400;
const MAX_ATTEMPTS: u32 = 10;
const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::CreateRunner>(post(create_runner)),
        Op::endpoint::<ep::ListRunners>(get(list_runners)),
        Op::endpoint::<ep::RevokeRunner>(post(revoke_runner)),
        Op::endpoint::<ep::RotateRunnerToken>(post(rotate_runner_token)),
        Op::endpoint::<ep::CreateJob>(post(create_job)),
        Op::endpoint::<ep::ListJobs>(get(list_jobs)).query(
            "limit",
            json!({"type": "integer", "minimum": 0}),
            "How many (1 to 1000, default 100).",
        ),
        Op::endpoint::<ep::GetJob>(get(get_job)),
        Op::endpoint::<ep::CancelJob>(post(cancel_job)),
        Op::endpoint::<ep::GetJobLogs>(get(job_logs))
            .query(
                "after",
                json!({"type": "integer", "minimum": 0}),
                "The cursor of the last line read (0 for the start).",
            )
            .query(
                "limit",
                json!({"type": "integer", "minimum": 0}),
                "Lines per page (1 to 10000).",
            )
            .query(
                "follow",
                json!({"type": "boolean"}),
                "Stream lines until the job has finished.",
            )
            .streams::<LogEntry>("application/x-ndjson"),
    ]
}

pub(super) use crate::service::valid_name;

/// See [`crate::service::require_admin`].
pub(super) fn require_admin(auth: &ApiAuth) -> Result<(), Error> {
    crate::service::require_admin(&auth.0)
}

/// See [`crate::service::require_deployer`].
pub(super) fn require_deployer(auth: &ApiAuth) -> Result<(), Error> {
    crate::service::require_deployer(&auth.0)
}

async fn create_runner(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Body(req): Body<CreateRunner>,
) -> Result<(StatusCode, Json<RunnerCreated>), Error> {
    require_admin(&auth)?;
    if !valid_name(&req.name) {
        return Err(Error::bad_request(format!(
            "invalid runner name {:?}: use 1 to 64 letters, digits, '-', '_' or '.'",
            req.name.chars().take(80).collect::<String>()
        )));
    }
    let org = &auth.0.org_id;
    let id = RunnerId::generate();
    let token = issue_runner_token(&id);
    let runner = state
        .store
        .create_runner(org, &id, &req.name, &token.hash)
        .await?;
    let key = state.signing_public_key(org).await?;
    tracing::info!(runner = %id, name = %req.name, org = %org, "runner registered");
    Ok((
        StatusCode::CREATED,
        Json(RunnerCreated {
            runner,
            token: token.secret,
            signing_public_key: key.to_string(),
            runner_api_url: state.engine.runner_url_known().map(str::to_owned),
        }),
    ))
}

async fn list_runners(
    State(state): State<SharedState>,
    auth: ApiAuth,
) -> Result<Json<RunnerList>, Error> {
    let runners = state.store.list_runners(&auth.0.org_id).await?;
    // An install's runner is named after the install's id: say its name.
    let installs: std::collections::HashMap<_, _> = state
        .store
        .list_installs(&auth.0.org_id)
        .await?
        .into_iter()
        .map(|i| (i.runner_id, i.name))
        .collect();
    Ok(Json(RunnerList {
        runners: runners
            .into_iter()
            .map(|r| {
                let install = installs.get(&r.id).cloned();
                RunnerInfo {
                    install,
                    ..state.runner_view(r)
                }
            })
            .collect(),
    }))
}

async fn revoke_runner(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(raw): Path<String>,
) -> Result<Json<nuon_core::wire::RunnerInfo>, Error> {
    require_admin(&auth)?;
    let org = &auth.0.org_id;
    let runner = runner_named(&state, org, &raw)
        .await?
        .ok_or_else(|| Error::not_found(format!("no runner {raw:?} in this org")))?;
    let revoked = state
        .store
        .revoke_runner(org, &runner.id)
        .await?
        .ok_or_else(|| Error::not_found(format!("no runner {raw:?} in this org")))?;
    state.forget_runner_tokens(&runner.id);
    state.wake_runner(&runner.id);
    tracing::info!(runner = %runner.id, "runner token revoked");
    Ok(Json(state.runner_view(revoked)))
}

/// A runner of the org by its name or id, or by the name or id of the
/// install it runs for (an install's runner is named after the install's
/// id).
async fn runner_named(
    state: &SharedState,
    org: &nuon_core::OrgId,
    raw: &str,
) -> Result<Option<RunnerInfo>, Error> {
    if let Some(r) = state.store.find_runner(org, raw).await? {
        return Ok(Some(r));
    }
    match state.store.find_install(org, raw).await? {
        Some(i) => Ok(state.store.find_runner(org, i.runner_id.as_str()).await?),
        None => Ok(None),
    }
}

async fn rotate_runner_token(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(raw): Path<String>,
) -> Result<Json<RunnerCreated>, Error> {
    require_admin(&auth)?;
    let org = &auth.0.org_id;
    let no_such = || Error::not_found(format!("no runner {raw:?} in this org"));
    let runner = runner_named(&state, org, &raw).await?.ok_or_else(no_such)?;
    let token = issue_runner_token(&runner.id);
    let runner = state
        .store
        .rotate_runner_token(org, &runner.id, &token.hash)
        .await?
        .ok_or_else(no_such)?;
    // The old token stops here at once; other replicas within their cache.
    state.forget_runner_tokens(&runner.id);
    state.wake_runner(&runner.id);
    let key = state.signing_public_key(org).await?;
    tracing::info!(runner = %runner.id, "runner token rotated");
    Ok(Json(RunnerCreated {
        runner: state.runner_view(runner),
        token: token.secret,
        signing_public_key: key.to_string(),
        runner_api_url: state.engine.runner_url_known().map(str::to_owned),
    }))
}

/// What an ad-hoc job may be on `runner`. An install's runner runs, in the
/// customer's account, what a workflow of the install's app config makes
/// and what its operator's `--debug-commands` allows, nothing else: an
/// `exec` job for it becomes a debug command (which the runner runs only
/// when its operator allows that command line), a `debug` job stays one,
/// and any other kind is refused. Generic and build runners run what they
/// are given.
fn ad_hoc_on(
    runner: &RunnerInfo,
    kind: String,
    payload: serde_json::Value,
) -> Result<(String, serde_json::Value), Error> {
    if runner.role != RunnerRole::Install || kind == DebugJob::KIND {
        return Ok((kind, payload));
    }
    let refuse = |why: String| {
        Error::api(
            StatusCode::FORBIDDEN,
            ErrorCode::InstallRunnerPolicy,
            format!(
                "runner {} is an install's runner: it runs the steps of the install's workflows, and only the commands its operator allows besides ({why}). Run a command there with `nuon installs debug INSTALL -- COMMAND...` (POST /v1/installs/{{id}}/debug), which the runner's --debug-commands decides",
                runner.name
            ),
        )
    };
    if kind != ExecJob::KIND {
        return Err(refuse(format!("an ad-hoc {kind:?} job is not one of them")));
    }
    let exec: ExecJob = serde_json::from_value(payload)
        .map_err(|e| Error::bad_request(format!("exec payload: {e}")))?;
    if !exec.env.is_empty() || exec.dir.is_some() || exec.outputs_file {
        return Err(refuse(
            "a command with env, dir or outputs_file is not a debug command line".into(),
        ));
    }
    let debug = DebugJob {
        purpose: nuon_core::wire::DebugPurpose::Debug,
        command: std::iter::once(exec.command).chain(exec.args).collect(),
    };
    let payload = serde_json::to_value(&debug)
        .map_err(|e| Error::internal(format!("cannot encode the command: {e}")))?;
    Ok((DebugJob::KIND.into(), payload))
}

async fn create_job(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Body(req): Body<CreateJob>,
) -> Result<(StatusCode, Json<nuon_core::wire::JobInfo>), Error> {
    require_admin(&auth)?;
    let org = auth.0.org_id.clone();
    if !valid_name(&req.kind) {
        return Err(Error::bad_request(format!(
            "invalid job kind {:?}: expected a name like \"exec\"",
            req.kind.chars().take(80).collect::<String>()
        )));
    }
    if !req.payload.is_object() {
        return Err(Error::bad_request(
            "job payload must be a JSON object (for exec: {\"command\": ..., \"args\": [...]})",
        ));
    }
    if req.payload.to_string().len() > MAX_PAYLOAD_BYTES {
        return Err(Error::bad_request(format!(
            "job payload is larger than {MAX_PAYLOAD_BYTES} bytes"
        )));
    }
    let timeout_secs = req.timeout_secs.unwrap_or(DEFAULT_TIMEOUT_SECS);
    if timeout_secs == 0 || timeout_secs > MAX_TIMEOUT_SECS {
        return Err(Error::bad_request(format!(
            "timeout_secs must be between 1 and {MAX_TIMEOUT_SECS} (7 days), got {timeout_secs}"
        )));
    }
    let max_attempts = req.max_attempts.unwrap_or(1);
    if max_attempts == 0 || max_attempts > MAX_ATTEMPTS {
        return Err(Error::bad_request(format!(
            "max_attempts must be between 1 and {MAX_ATTEMPTS}, got {max_attempts}"
        )));
    }
    let sandbox = req.sandbox.unwrap_or_default();
    for (name, value) in [
        ("memory_bytes", sandbox.memory_bytes),
        ("millicpus", sandbox.millicpus),
        ("pids", sandbox.pids),
    ] {
        if value == Some(0) {
            return Err(Error::bad_request(format!(
                "sandbox.{name} must be more than 0 (leave it out for the runner's default)"
            )));
        }
    }
    if sandbox.millicpus.is_some_and(|m| m < 10) {
        return Err(Error::bad_request(
            "sandbox.millicpus must be at least 10 (0.01 CPU): the kernel takes no smaller quota",
        ));
    }
    if sandbox.memory_bytes.is_some_and(|m| m < 4 << 20) {
        return Err(Error::bad_request(
            "sandbox.memory_bytes must be at least 4 MiB: no process starts in less",
        ));
    }
    let runner = runner_named(&state, &org, &req.runner)
        .await?
        .filter(|r| !r.revoked)
        .ok_or_else(|| {
            Error::not_found(format!(
                "no runner {:?} in this org (see `nuon runners list`)",
                req.runner
            ))
        })?;
    let (kind, payload) = ad_hoc_on(&runner, req.kind, req.payload)?;
    let spec = JobSpec {
        job_id: JobId::generate(),
        org_id: org.clone(),
        runner_id: runner.id.clone(),
        kind,
        payload,
        timeout_secs,
        retry: RetryPolicy { max_attempts },
        created_at_ms: now_ms(),
        redact: Vec::new(),
        role: None,
        sandbox,
        customer_secrets: Vec::new(),
    };
    let job = state.keys.sign(spec).await?;
    let job = state.store.enqueue_job(job).await?;
    state.wake_runner(&runner.id);
    tracing::debug!(job = %job.id, runner = %runner.id, "job queued");
    Ok((StatusCode::CREATED, Json(job)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    limit: Option<u32>,
}

async fn list_jobs(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Q(q): Q<ListQuery>,
) -> Result<Json<JobList>, Error> {
    let limit = q.limit.unwrap_or(100).clamp(1, 1000);
    let jobs = state.store.list_jobs(&auth.0.org_id, limit).await?;
    Ok(Json(JobList {
        jobs: jobs.into_iter().map(super::job_view).collect(),
    }))
}

async fn get_job(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(raw): Path<String>,
) -> Result<Json<nuon_core::wire::JobInfo>, Error> {
    let id: JobId = path_id("job", &raw)?;
    state
        .store
        .get_job(&auth.0.org_id, &id)
        .await?
        .map(|j| Json(super::job_view(j)))
        .ok_or_else(|| Error::not_found(format!("no job {id} in this org")))
}

async fn cancel_job(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(raw): Path<String>,
) -> Result<Json<nuon_core::wire::JobInfo>, Error> {
    require_admin(&auth)?;
    let id: JobId = path_id("job", &raw)?;
    let job = state
        .store
        .request_cancel(&auth.0.org_id, &id)
        .await?
        .ok_or_else(|| Error::not_found(format!("no job {id} in this org")))?;
    state.wake_runner(&job.runner_id);
    state.wake_logs(&job.id);
    Ok(Json(super::job_view(job)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LogQuery {
    after: Option<u64>,
    limit: Option<u32>,
    follow: Option<bool>,
}

const FOLLOW_PAGE: u32 = 2000;

async fn job_logs(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(raw): Path<String>,
    Q(q): Q<LogQuery>,
) -> Result<Response, Error> {
    let id: JobId = path_id("job", &raw)?;
    let org = auth.0.org_id;
    let after = q.after.unwrap_or(0);
    if !q.follow.unwrap_or(false) {
        let limit = q.limit.unwrap_or(1000).clamp(1, 10_000);
        let page = state
            .store
            .read_logs(&org, &id, after, limit)
            .await?
            .ok_or_else(|| Error::not_found(format!("no job {id} in this org")))?;
        return Ok(Json(page).into_response());
    }
    // Check the job exists before starting a stream, so a bad id is a 404.
    if state.store.get_job(&org, &id).await?.is_none() {
        return Err(Error::not_found(format!("no job {id} in this org")));
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::spawn(follow(state, org, id, after, tx));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    let mut resp = axum::body::Body::from_stream(stream).into_response();
    resp.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/x-ndjson"),
    );
    Ok(resp)
}

/// Streams a job's log as NDJSON until the job has finished and every line
/// was sent, the client went away, or the server shuts down.
pub(super) async fn follow(
    state: SharedState,
    org: nuon_core::OrgId,
    job: JobId,
    mut cursor: u64,
    tx: tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
) {
    let sub = state.wakes.logs.subscribe(&job);
    loop {
        let notified = sub.notify().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let page = match state.store.read_logs(&org, &job, cursor, FOLLOW_PAGE).await {
            Ok(Some(page)) => page,
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(job = %job, error = %e, "log follow failed");
                let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                return;
            }
        };
        if !page.lines.is_empty() {
            let mut buf = Vec::with_capacity(page.lines.len() * 96);
            for line in &page.lines {
                if serde_json::to_writer(&mut buf, line).is_err() {
                    return;
                }
                buf.push(b'\n');
            }
            cursor = page.next;
            if tx.send(Ok(Bytes::from(buf))).await.is_err() {
                return;
            }
        }
        if page.complete {
            return;
        }
        if page.lines.len() as u32 >= FOLLOW_PAGE {
            continue;
        }
        tokio::select! {
            _ = &mut notified => {}
            _ = tx.closed() => return,
            _ = state.shutting_down() => {
                // End the stream abnormally, so the client resumes from its
                // cursor on the next server instead of taking this as the end.
                let _ = tx.send(Err(std::io::Error::other("control plane shutting down"))).await;
                return;
            }
            // A safety net for wake-ups from another process on the same store.
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
        }
    }
}
