//! Debug requests: a command the vendor asks an install's runner to run
//! for its logs or to debug, as a signed job. The runner decides
//! (`nuon-runner run --debug-commands`); a refusal fails the job with its
//! reason.

use nuon_core::endpoint::{self as ep};
use nuon_core::wire::{DebugRequest, JobInfo};
use nuon_core::{DebugJob, Job, JobId, JobSpec, RetryPolicy, now_ms};

use super::{Caller, Services, require_admin};
use crate::error::Error;

/// The longest a debug command may run.
const MAX_DEBUG_SECS: u64 = 3600;

/// How long a debug command may run when the request does not say.
const DEFAULT_DEBUG_SECS: u64 = 300;

impl Services<'_> {
    /// `POST /v1/installs/{id}/debug`: `req.command` queued as a job for
    /// install `key`'s runner. Admins only; recorded in the audit trail,
    /// refusals included.
    pub(crate) async fn request_install_debug(
        &self,
        caller: &Caller,
        key: &str,
        req: DebugRequest,
    ) -> Result<JobInfo, Error> {
        let result = self.queue_debug(caller, key, req).await;
        self.audited_at::<ep::RequestInstallDebug, _>(caller, &[key], result)
            .await
    }

    async fn queue_debug(
        &self,
        caller: &Caller,
        key: &str,
        req: DebugRequest,
    ) -> Result<JobInfo, Error> {
        require_admin(&caller.principal)?;
        if req.command.is_empty() || req.command[0].trim().is_empty() {
            return Err(Error::bad_request(
                "command is empty: give the program and its arguments, e.g. [\"journalctl\", \"-u\", \"app\", \"-n\", \"100\"]",
            ));
        }
        if req.command.iter().any(|a| a.contains('\0')) {
            return Err(Error::bad_request("command: an argument holds a NUL byte"));
        }
        let timeout_secs = req.timeout_secs.unwrap_or(DEFAULT_DEBUG_SECS);
        if timeout_secs == 0 || timeout_secs > MAX_DEBUG_SECS {
            return Err(Error::bad_request(format!(
                "timeout_secs must be between 1 and {MAX_DEBUG_SECS}, got {timeout_secs}"
            )));
        }
        let install = self.find_install(caller, key).await?;
        let payload = DebugJob {
            purpose: req.purpose,
            command: req.command,
        };
        let spec = JobSpec {
            job_id: JobId::generate(),
            org_id: caller.principal.org_id.clone(),
            runner_id: install.runner_id.clone(),
            kind: DebugJob::KIND.into(),
            payload: serde_json::to_value(&payload)
                .map_err(|e| Error::internal(format!("cannot encode the request: {e}")))?,
            timeout_secs,
            retry: RetryPolicy { max_attempts: 1 },
            created_at_ms: now_ms(),
            redact: Vec::new(),
            role: None,
            sandbox: Default::default(),
            customer_secrets: Vec::new(),
        };
        let job = self.keys.sign(spec).await?;
        let job = self.store.enqueue_job(job).await?;
        self.wakes.runner(&install.runner_id);
        tracing::info!(job = %job.id, install = %install.name, "debug request queued for the install's runner");
        Ok(job)
    }
}
