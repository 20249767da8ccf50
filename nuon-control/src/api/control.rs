//! The Control API: runners, jobs and logs of the caller's org.

use nuon_core::endpoint as ep;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use nuon_core::JobId;
use nuon_core::wire::{
    CreateJob, CreateRunner, JobInfo, JobList, LogEntry, RunnerCreated, RunnerInfo, RunnerList,
};
use serde::Deserialize;
use serde_json::json;

use super::doc::Op;
use super::{Body, Caller, Q, SharedState, body_of};
use crate::error::Error;

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

async fn create_runner(
    State(state): State<SharedState>,
    caller: Caller,
    body: Result<Body<CreateRunner>, Error>,
) -> Result<(StatusCode, Json<RunnerCreated>), Error> {
    let req = body_of::<ep::CreateRunner, _>(&state, &caller, &[], body).await?;
    let made = state.services().create_runner(&caller, req).await?;
    Ok((StatusCode::CREATED, Json(made)))
}

async fn list_runners(
    State(state): State<SharedState>,
    caller: Caller,
) -> Result<Json<RunnerList>, Error> {
    state.services().list_runners(&caller).await.map(Json)
}

async fn revoke_runner(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<RunnerInfo>, Error> {
    state
        .services()
        .revoke_runner(&caller, &key)
        .await
        .map(Json)
}

async fn rotate_runner_token(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<RunnerCreated>, Error> {
    state
        .services()
        .rotate_runner_token(&caller, &key)
        .await
        .map(Json)
}

async fn create_job(
    State(state): State<SharedState>,
    caller: Caller,
    body: Result<Body<CreateJob>, Error>,
) -> Result<(StatusCode, Json<JobInfo>), Error> {
    let req = body_of::<ep::CreateJob, _>(&state, &caller, &[], body).await?;
    let job = state.services().create_job(&caller, req).await?;
    Ok((StatusCode::CREATED, Json(job)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    limit: Option<u32>,
}

async fn list_jobs(
    State(state): State<SharedState>,
    caller: Caller,
    Q(q): Q<ListQuery>,
) -> Result<Json<JobList>, Error> {
    state.services().list_jobs(&caller, q.limit).await.map(Json)
}

async fn get_job(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<JobInfo>, Error> {
    state.services().get_job(&caller, &key).await.map(Json)
}

async fn cancel_job(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<JobInfo>, Error> {
    state.services().cancel_job(&caller, &key).await.map(Json)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LogQuery {
    after: Option<u64>,
    limit: Option<u32>,
    follow: Option<bool>,
}

/// A page of a job's log, read by the service; with `follow`, its live
/// stream, which the API holds open (`follow`).
async fn job_logs(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    Q(q): Q<LogQuery>,
) -> Result<Response, Error> {
    let after = q.after.unwrap_or(0);
    if !q.follow.unwrap_or(false) {
        let page = state
            .services()
            .job_log(&caller, &key, after, q.limit)
            .await?;
        return Ok(Json(page).into_response());
    }
    // Check the job exists before starting a stream, so a bad id is a 404.
    let id = state.services().get_job(&caller, &key).await?.id;
    let org = caller.principal.org_id;
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

/// Lines a follower reads from the store at once.
const FOLLOW_PAGE: u32 = 2000;

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
