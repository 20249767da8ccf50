//! Ad-hoc jobs: queued for a runner of the org (signed with the org's
//! key), listed, read, cancelled, and their logs read a page at a time.
//! Queueing and cancelling are for admins, recorded in the audit trail;
//! any token of the org reads.

use nuon_core::endpoint::{self as ep};
use nuon_core::wire::{
    CreateJob, ErrorCode, JobInfo, JobList, LogPage, RunnerInfo, RunnerRole, WorkflowInfo,
};
use nuon_core::{DebugJob, ExecJob, Job, JobId, JobSpec, RetryPolicy, now_ms};

use super::workflows::{job_view, workflow_view};
use super::{Caller, Services, require_admin, valid_name};
use crate::error::Error;

const DEFAULT_TIMEOUT_SECS: u64 = 3600;
const MAX_TIMEOUT_SECS: u64 = 7 * 86_400;
const MAX_ATTEMPTS: u32 = 10;
const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;

impl Services<'_> {
    /// `POST /v1/jobs`: a job for a runner of the org (by its name or id,
    /// or its install's), checked, signed and queued; the runner is woken.
    /// On an install's runner only what `ad_hoc_on` allows. Admins only;
    /// recorded in the audit trail, refusals included.
    pub(crate) async fn create_job(
        &self,
        caller: &Caller,
        req: CreateJob,
    ) -> Result<JobInfo, Error> {
        let result = self.queue_job(caller, req).await;
        self.audited_at::<ep::CreateJob, _>(caller, &[], result)
            .await
    }

    async fn queue_job(&self, caller: &Caller, req: CreateJob) -> Result<JobInfo, Error> {
        require_admin(&caller.principal)?;
        let org = caller.principal.org_id.clone();
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
        let runner = self
            .runner_named(&org, &req.runner)
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
        let job = self.keys.sign(spec).await?;
        let job = self.store.enqueue_job(job).await?;
        self.wakes.runner(&runner.id);
        tracing::debug!(job = %job.id, runner = %runner.id, "job queued");
        Ok(job)
    }

    /// `GET /v1/jobs`: the org's newest jobs, `limit` of them (1 to 1000,
    /// 100 unless said).
    pub(crate) async fn list_jobs(
        &self,
        caller: &Caller,
        limit: Option<u32>,
    ) -> Result<JobList, Error> {
        let limit = limit.unwrap_or(100).clamp(1, 1000);
        let jobs = self
            .store
            .list_jobs(&caller.principal.org_id, limit)
            .await?;
        Ok(JobList {
            jobs: jobs.into_iter().map(job_view).collect(),
        })
    }

    /// `GET /v1/jobs/{id}`: one job of the org.
    pub(crate) async fn get_job(&self, caller: &Caller, key: &str) -> Result<JobInfo, Error> {
        let id = job_id(key)?;
        self.store
            .get_job(&caller.principal.org_id, &id)
            .await?
            .map(job_view)
            .ok_or_else(|| no_job(&id))
    }

    /// The workflow that ran job `id` (its sensitive outputs masked) and
    /// the index of the step that ran it; none for a job of no workflow.
    pub(crate) async fn step_of_job(
        &self,
        caller: &Caller,
        id: &JobId,
    ) -> Result<Option<(WorkflowInfo, u32)>, Error> {
        let org = &caller.principal.org_id;
        let Some((wf, index)) = self.store.step_of_job(org, id).await? else {
            return Ok(None);
        };
        let wf = self.store.get_workflow(org, &wf).await?;
        Ok(wf.map(|w| (workflow_view(w), index)))
    }

    /// `POST /v1/jobs/{id}/cancel`: a queued job cancelled at once, a
    /// running one flagged for its runner (woken, with the job's log
    /// followers). The job after. Admins only; recorded in the audit
    /// trail, refusals included.
    pub(crate) async fn cancel_job(&self, caller: &Caller, key: &str) -> Result<JobInfo, Error> {
        let result = self.stop_job(caller, key).await;
        self.audited_at::<ep::CancelJob, _>(caller, &[key], result)
            .await
    }

    async fn stop_job(&self, caller: &Caller, key: &str) -> Result<JobInfo, Error> {
        require_admin(&caller.principal)?;
        let id = job_id(key)?;
        let job = self
            .store
            .request_cancel(&caller.principal.org_id, &id)
            .await?
            .ok_or_else(|| no_job(&id))?;
        self.wakes.runner(&job.runner_id);
        self.wakes.logs(&job.id);
        Ok(job_view(job))
    }

    /// `GET /v1/jobs/{id}/logs`: a page of the job's log, the lines after
    /// cursor `after`, `limit` of them (1 to 10000, 1000 unless said).
    /// Its live stream (`follow`) is the API's, which holds it open.
    pub(crate) async fn job_log(
        &self,
        caller: &Caller,
        key: &str,
        after: u64,
        limit: Option<u32>,
    ) -> Result<LogPage, Error> {
        let id = job_id(key)?;
        let limit = limit.unwrap_or(1000).clamp(1, 10_000);
        self.store
            .read_logs(&caller.principal.org_id, &id, after, limit)
            .await?
            .ok_or_else(|| no_job(&id))
    }
}

/// The job id `key`; a malformed one is not found.
fn job_id(key: &str) -> Result<JobId, Error> {
    key.parse()
        .map_err(|_| Error::not_found(format!("no job {key:?}")))
}

/// There is no job `id` in the caller's org.
fn no_job(id: &JobId) -> Error {
    Error::not_found(format!("no job {id} in this org"))
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
        Error::refused(
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
