//! The operations served by `nuon-control/src/api/control.rs`.

use super::{Endpoint, Method};
use crate::wire::routes;

endpoints! {
    /// `POST /v1/runners`.
    CreateRunner: Post routes::RUNNERS, "createRunner",
        crate::wire::CreateRunner => crate::wire::RunnerCreated, status = 201, body = true,
        summary = "Register a runner; its token is shown only in this answer.";
    /// `GET /v1/runners`.
    ListRunners: Get routes::RUNNERS, "listRunners",
        () => crate::wire::RunnerList, body = false,
        summary = "The org's runners.";
    /// `POST /v1/runners/{id}/revoke`.
    RevokeRunner: Post routes::RUNNER_REVOKE, "revokeRunner",
        () => crate::wire::RunnerInfo, body = false,
        summary = "Revoke a runner's token.";
    /// `POST /v1/runners/{id}/rotate-token`.
    RotateRunnerToken: Post routes::RUNNER_ROTATE_TOKEN, "rotateRunnerToken",
        () => crate::wire::RunnerCreated, body = false,
        summary = "Issue a runner a new token, shown only in this answer; the old one stops working at once (a revoked runner is active again). For an install's runner too, which `createRunner` cannot reissue.";
    /// `POST /v1/jobs`.
    CreateJob: Post routes::JOBS, "createJob",
        crate::wire::CreateJob => crate::wire::JobInfo, status = 201, body = true,
        summary = "Queue a signed job for a runner.";
    /// `GET /v1/jobs`.
    ListJobs: Get routes::JOBS, "listJobs",
        () => crate::wire::JobList, body = false,
        summary = "The org's newest jobs.";
    /// `GET /v1/jobs/{id}`.
    GetJob: Get routes::JOB, "getJob",
        () => crate::wire::JobInfo, body = false,
        summary = "One job.";
    /// `POST /v1/jobs/{id}/cancel`.
    CancelJob: Post routes::JOB_CANCEL, "cancelJob",
        () => crate::wire::JobInfo, body = false,
        summary = "Cancel a job.";
    /// `GET /v1/jobs/{id}/logs`.
    GetJobLogs: Get routes::JOB_LOGS, "getJobLogs",
        () => crate::wire::LogPage, body = false,
        summary = "A page of a job's log, or with follow=true its live stream (NDJSON).";
}
