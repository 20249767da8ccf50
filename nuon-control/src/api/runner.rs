//! The Runner API: long-poll claims, heartbeats, logs and completions, each
//! scoped to the calling runner and fenced by attempt.

use nuon_core::Signed as _;
use nuon_core::wire::ErrorCode;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::{FromRequest, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::routing::{get, post};
use axum::{Json, Router};
use nuon_core::audit::AuditEntry;
use nuon_core::wire::{
    ClaimRequest, ClaimResponse, ClaimedJob, Completion, CompletionAck, HeartbeatRequest,
    HeartbeatResponse, LOG_RECORDS_CONTENT_TYPE, LeaseState, LogAck, LogBatch, LogBatchQuery,
    LogRecords, MAX_BODY_BYTES, MAX_LOG_LINES_PER_BATCH, ProbeWatch, RunnerSettingsInfo, routes,
};
use nuon_core::{JobId, JobResult, JobStatus, OrgId};

use super::{Body, RunnerAuth, SharedState, Source, path_id};
use crate::engine::render::{render_context, render_env, watched_probes};
use crate::error::Error;
use crate::store::{RunnerPrincipal, SettingsBasis};

const MAX_KINDS: usize = 64;
const MAX_SLOTS: u32 = 1024;
const MAX_LEASES: usize = 4096;

pub(super) fn routes() -> Router<SharedState> {
    Router::new()
        .route(routes::CLAIM, post(claim))
        .route(routes::HEARTBEAT, post(heartbeat))
        .route(routes::LOGS, post(append_logs))
        .route(routes::COMPLETE, post(complete))
        .route(routes::RUNNER_SETTINGS, get(settings))
}

fn lease_ms(state: &SharedState) -> u64 {
    state.timings.lease.as_millis() as u64
}

/// Holds the request until a job for this runner is queued or the wait ends.
async fn claim(
    State(state): State<SharedState>,
    RunnerAuth(runner): RunnerAuth,
    Body(req): Body<ClaimRequest>,
) -> Result<Json<ClaimResponse>, Error> {
    if req.kinds.is_empty() || req.kinds.len() > MAX_KINDS {
        return Err(Error::bad_request(format!(
            "claim must name between 1 and {MAX_KINDS} job kinds"
        )));
    }
    if let Some(key) = req.signing_key.as_deref()
        && let Some(current) = state.keys.foreign_key(&runner.org_id, key).await
    {
        // Caught at the first claim, not job by job.
        return Err(Error::conflict(
            ErrorCode::WrongSigningKey,
            format!(
                "this runner verifies jobs with {key}, a key its org never signed with; the org signs with {current}: restart the runner with --signing-key {current} (the control plane's DATA_DIR/org-signing-key.pub)"
            ),
        ));
    }
    state
        .runner_telemetry(&runner.org_id, &runner.runner_id, req.telemetry.clone())
        .await;
    let known_leases = known_leases(&state, &runner).await?;
    if !known_leases.is_empty() {
        // Before any job: what the runner says of these may end them.
        return Ok(Json(ClaimResponse {
            jobs: Vec::new(),
            key_rotations: Vec::new(),
            settings_version: settings_version(&state, &runner).await?,
            known_leases,
        }));
    }
    let _parked = state.metrics.park();
    let slots = req.slots.min(MAX_SLOTS);
    let wait = Duration::from_millis(req.wait_ms).min(state.timings.max_claim_wait);
    // Runners that connected together (after a restart) would otherwise come
    // back together every wait, for ever: end each wait up to a tenth early.
    let wait = wait.saturating_sub(nuon_core::random_below(wait / 10));
    let deadline = tokio::time::Instant::now() + wait;
    let sub = state.wakes.runners.subscribe(&runner.runner_id);
    // Taken once the org's limit on running jobs holds this runner's jobs
    // back: then the end of any job of the org is worth a look.
    let mut org_sub: Option<crate::hub::Subscription<'_, OrgId>> = None;
    let mut watch_org = false;
    // Woken for this runner: a job queued, or its settings changed.
    let mut woken = false;
    // A runner whose last look here found nothing queued, with no wake
    // since (a job queued for it always wakes it), waits before it looks:
    // a runner that just ended its job claims again at once, before its
    // next step is dispatched. Not for long: the look also says the
    // runner is there (its `last_seen_at`).
    let mut look = slots == 0
        || !state
            .wakes
            .runners
            .quiet(&runner.runner_id, quiet_for(&state));
    loop {
        if watch_org && org_sub.is_none() {
            org_sub = Some(state.wakes.orgs.subscribe(&runner.org_id));
        }
        // Register for wake-ups before looking, so a job queued (or ended)
        // between the look and the wait is not missed.
        let notified = sub.notify().notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let org_notified = org_sub.as_ref().map(|s| s.notify().notified());
        tokio::pin!(org_notified);
        if let Some(n) = org_notified.as_mut().as_pin_mut() {
            n.enable();
        }
        let claimed = match std::mem::replace(&mut look, true) {
            true => {
                let started = std::time::Instant::now();
                let n = state.wakes.runners.looking(&runner.runner_id);
                let claimed = state
                    .store
                    .claim(&runner.runner_id, &req.kinds, slots, lease_ms(&state))
                    .await?;
                state
                    .wakes
                    .runners
                    .looked(&runner.runner_id, n, claimed.nothing_left);
                state.metrics.store_write("claim", started.elapsed());
                claimed
            }
            false => crate::store::Claimed::default(),
        };
        if !claimed.jobs.is_empty() || slots == 0 {
            // Read with the jobs where the store could (PostgreSQL).
            let settings_version = match claimed.settings {
                Some(basis) => basis.map(|b| b.version()),
                None => settings_version(&state, &runner).await?,
            };
            if !claimed.jobs.is_empty() {
                tracing::debug!(runner = %runner.runner_id, count = claimed.jobs.len(), "jobs claimed");
            }
            let now = nuon_core::now_ms();
            for j in claimed.jobs.iter().filter(|j| j.attempt == 1) {
                let waited = (now - j.job_id.created_at_ms()).max(0) as u64;
                state.metrics.dispatched(Duration::from_millis(waited));
            }
            let mut opened = state.keys.open_claimed(claimed.jobs);
            state
                .keys
                .grant(&runner.org_id, &runner.runner_id, &mut opened)
                .await?;
            for (job, why) in opened.refused {
                refuse_unopened(&state, &runner, job, why).await?;
            }
            let key_rotations = state
                .keys
                .rotations_for(
                    &runner.org_id,
                    req.signing_key.as_deref(),
                    &opened.signed_by,
                )
                .await;
            return Ok(Json(ClaimResponse {
                jobs: opened.jobs,
                key_rotations,
                settings_version,
                known_leases: Vec::new(),
            }));
        }
        if claimed.held_back && !watch_org {
            // Look once more with the org's wake-up registered.
            watch_org = true;
            continue;
        }
        // A wake with no job: its settings may have changed (an update
        // asked). A runner that said what it holds hears of it now.
        if std::mem::take(&mut woken) && req.settings_version.is_some() {
            let now = settings_version(&state, &runner).await?;
            if now.is_some() && now != req.settings_version {
                return Ok(Json(ClaimResponse {
                    jobs: Vec::new(),
                    key_rotations: state
                        .keys
                        .rotations_for(&runner.org_id, req.signing_key.as_deref(), &[])
                        .await,
                    settings_version: now,
                    known_leases: Vec::new(),
                }));
            }
        }
        let org_ended = async {
            match org_notified.as_mut().as_pin_mut() {
                Some(n) => n.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = &mut notified => woken = true,
            () = org_ended => {}
            _ = tokio::time::sleep_until(deadline) => break,
            _ = state.shutting_down() => break,
        }
    }
    // Nothing to run; a runner behind on the org's key learns of it now,
    // before its next job needs it.
    Ok(Json(ClaimResponse {
        jobs: Vec::new(),
        key_rotations: state
            .keys
            .rotations_for(&runner.org_id, req.signing_key.as_deref(), &[])
            .await,
        settings_version: settings_version(&state, &runner).await?,
        known_leases: Vec::new(),
    }))
}

/// How long a claim that found nothing queued for its runner stands in
/// for the runner's next look (without a wake between): a quarter of the
/// time after which a runner not seen is called unhealthy, since the look
/// is what sees it.
fn quiet_for(state: &SharedState) -> Duration {
    state.ops.runner_unhealthy_after / 4
}

/// At a runner's first claim since this process started, the attempts the
/// store says it holds; otherwise none. A runner that ran one of them to its
/// end reports it: a store restored from a backup taken while they ran
/// would otherwise wait for their leases to lapse and call them lost.
async fn known_leases(
    state: &SharedState,
    runner: &RunnerPrincipal,
) -> Result<Vec<nuon_core::wire::LeaseRef>, Error> {
    let told = || state.told_leases.lock().unwrap_or_else(|e| e.into_inner());
    if told().contains(&runner.runner_id) {
        return Ok(Vec::new());
    }
    let held = state.store.held_attempts(&runner.runner_id).await?;
    // Another claim of the runner may have been told meanwhile.
    let first = told().insert(runner.runner_id.clone());
    Ok(if first { held } else { Vec::new() })
}

/// Extends every lease at once, then holds the answer until one of the jobs
/// is cancelled or the wait ends.
async fn heartbeat(
    State(state): State<SharedState>,
    RunnerAuth(runner): RunnerAuth,
    Body(req): Body<HeartbeatRequest>,
) -> Result<Json<HeartbeatResponse>, Error> {
    if req.leases.len() > MAX_LEASES {
        return Err(Error::bad_request(format!(
            "a heartbeat may carry at most {MAX_LEASES} leases"
        )));
    }
    let lease = state.timings.lease;
    // Never hold a heartbeat for more than a third of the lease, so the next
    // one always arrives in time.
    let wait = Duration::from_millis(req.wait_ms)
        .min(state.timings.max_heartbeat_wait)
        .min(lease / 3);
    let next_heartbeat_ms = (lease / 3).as_millis() as u64;
    state
        .runner_telemetry(&runner.org_id, &runner.runner_id, req.telemetry.clone())
        .await;
    let deadline = tokio::time::Instant::now() + wait;
    let sub = state.wakes.runners.subscribe(&runner.runner_id);
    let notified = sub.notify().notified();
    tokio::pin!(notified);
    notified.as_mut().enable();
    let started = std::time::Instant::now();
    let mut leases = state
        .store
        .heartbeat(&runner.runner_id, &req.leases, lease_ms(&state))
        .await?;
    state.metrics.store_write("heartbeat", started.elapsed());
    loop {
        let done = leases.iter().any(|l| l.state != LeaseState::Active) || wait.is_zero();
        if done {
            break;
        }
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep_until(deadline) => break,
            _ = state.shutting_down() => break,
        }
        notified.set(sub.notify().notified());
        notified.as_mut().enable();
        leases = state
            .store
            .lease_states(&runner.runner_id, &req.leases)
            .await?;
    }
    // A heartbeat that waits for nothing confirms a job just claimed: the
    // claim's answer carried the settings' version a moment ago.
    let settings_version = match req.wait_ms {
        0 => None,
        _ => settings_version(&state, &runner).await?,
    };
    Ok(Json(HeartbeatResponse {
        leases,
        lease_ms: lease_ms(&state),
        next_heartbeat_ms,
        settings_version,
    }))
}

/// The version of a runner's settings: a digest of what they are made
/// from (its install's config version, inputs, secrets, outputs and
/// component toggles), so
/// claims and heartbeats carry it for one indexed read. A build runner has
/// none. A store error leaves it out (the answer may carry leased jobs:
/// it must not fail); the next answer carries it.
async fn settings_version(
    state: &SharedState,
    runner: &RunnerPrincipal,
) -> Result<Option<String>, Error> {
    let found = state
        .store
        .settings_basis_of_runner(&runner.org_id, &runner.runner_id);
    match found.await {
        Ok(basis) => Ok(basis.map(|b| b.version())),
        Err(e) => {
            tracing::warn!(runner = %runner.runner_id, error = %e, "cannot read the runner's settings version");
            Ok(None)
        }
    }
}

/// The calling runner's settings: its install's `runner.toml` (`env_vars`)
/// rendered for the install, the runner release it is asked for, and the
/// health probes it watches between deploys.
async fn settings(
    State(state): State<SharedState>,
    RunnerAuth(runner): RunnerAuth,
) -> Result<Json<RunnerSettingsInfo>, Error> {
    let Some(install) = state
        .store
        .find_install_of_runner(&runner.org_id, &runner.runner_id)
        .await?
    else {
        return Ok(Json(RunnerSettingsInfo {
            version: "none".into(),
            ..RunnerSettingsInfo::default()
        }));
    };
    let asked = state
        .store
        .runner_release_of(&runner.org_id, &install.id)
        .await?;
    let version = SettingsBasis::of(&install, asked.clone()).version();
    let update = match asked {
        Some((id, tries)) => state
            .store
            .get_runner_release(&runner.org_id, id.as_str())
            .await?
            .map(|release| nuon_core::wire::RunnerUpdate { release, tries }),
        None => None,
    };
    let (app_name, config) = state
        .engine
        .app_config(&runner.org_id, &install.app_id, install.config_version)
        .await?;
    let org_name = state.engine.org_name(&runner.org_id).await?;
    let owner = crate::engine::render::Owner {
        org: &org_name,
        app: &app_name,
        secrets: &config.secrets,
    };
    let ctx = render_context(&state.secrets, &runner.org_id, &install, owner, false);
    let env = match config.runner.as_ref().map(|r| &r.env_vars) {
        Some(vars) if !vars.is_empty() => ctx
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|ctx| render_env(vars, ctx, "runner.toml env_vars"))
            .map_err(|e| Error::conflict(ErrorCode::SettingsNotRendered, e))?,
        _ => Default::default(),
    };
    let components = ctx
        .map(|ctx| watched_probes(&config, &install, &ctx))
        .unwrap_or_default();
    let watch = (!components.is_empty()).then(|| ProbeWatch {
        interval_ms: state.ops.probe_interval.as_millis() as u64,
        components,
    });
    let mut settings = RunnerSettingsInfo {
        version,
        env,
        signature: String::new(),
        update,
        watch,
    };
    let signer = state
        .keys
        .signer(&runner.org_id)
        .await
        .map_err(|e| Error::internal(format!("cannot sign the runner's settings: {e}")))?;
    settings.signature = signer
        .sign(&settings.signed_bytes())
        .await
        .map_err(|e| Error::internal(format!("cannot sign the runner's settings: {e}")))?;
    Ok(Json(settings))
}

/// A log batch as it comes over the wire: the query names the attempt and
/// the first sequence number, the body is log records.
struct LogBatchBody(LogBatch);

impl FromRequest<SharedState> for LogBatchBody {
    type Rejection = Error;

    async fn from_request(req: Request, state: &SharedState) -> Result<Self, Error> {
        let query = Query::<LogBatchQuery>::try_from_uri(req.uri())
            .map_err(|e| Error::bad_request(format!("invalid log batch query: {}", e.body_text())))?
            .0;
        let content_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if content_type != LOG_RECORDS_CONTENT_TYPE {
            return Err(Error::refused(
                ErrorCode::UnsupportedMediaType,
                format!(
                    "a log batch must be sent as `Content-Type: {LOG_RECORDS_CONTENT_TYPE}`, not {content_type:?}"
                ),
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                Error::refused(
                    ErrorCode::TooLarge,
                    format!("request body is larger than {MAX_BODY_BYTES} bytes"),
                )
            } else {
                Error::bad_request(format!(
                    "cannot read the request body: {}",
                    rejection.body_text()
                ))
            }
        })?;
        let lines = LogRecords::parse(Vec::from(bytes)).map_err(|e| {
            Error::bad_request(format!(
                "line {} of the batch: {}",
                query.first_seq + e.index as u64,
                e.message
            ))
        })?;
        if lines.len() > MAX_LOG_LINES_PER_BATCH {
            return Err(Error::bad_request(format!(
                "a log batch may carry at most {MAX_LOG_LINES_PER_BATCH} lines, got {}",
                lines.len()
            )));
        }
        Ok(LogBatchBody(LogBatch {
            attempt: query.attempt,
            first_seq: query.first_seq,
            lines,
        }))
    }
}

async fn append_logs(
    State(state): State<SharedState>,
    RunnerAuth(runner): RunnerAuth,
    Path(raw): Path<String>,
    LogBatchBody(batch): LogBatchBody,
) -> Result<Json<LogAck>, Error> {
    let job: JobId = path_id("job", &raw)?;
    let had_lines = !batch.lines.is_empty();
    let started = std::time::Instant::now();
    let quota = state.log_quota(&runner.runner_id);
    let (ack, wrote) = state
        .store
        .append_logs_within(&runner.runner_id, &job, batch, quota)
        .await?;
    state.metrics.store_write("append_logs", started.elapsed());
    state.charge_log(&runner.runner_id, wrote);
    if had_lines {
        state.wake_logs(&job);
    }
    Ok(Json(ack))
}

/// Ends a claimed job whose stored spec does not open, on its runner's
/// behalf: it is never sent, and says why.
async fn refuse_unopened(
    state: &SharedState,
    runner: &RunnerPrincipal,
    job: ClaimedJob,
    why: String,
) -> Result<(), Error> {
    tracing::error!(job = %job.job_id, runner = %runner.runner_id, "{why}");
    let completion = Completion {
        attempt: job.attempt,
        logs: None,
        log_lines: 0,
        result: JobResult::failed(why.clone()),
    };
    state
        .store
        .complete(&runner.runner_id, &job.job_id, completion)
        .await?;
    let entry = AuditEntry::new(
        nuon_core::now_ms(),
        "control-plane",
        "job.finished",
        format!("job:{}", job.job_id),
        "",
        "failed",
    )
    .with_detail(format!("never sent to runner {}: {why}", runner.runner_id));
    state.auditor.record(&runner.org_id, entry).await;
    state.wake_logs(&job.job_id);
    state.wake_org(&runner.org_id);
    state.engine.job_ended(&job.job_id);
    Ok(())
}

async fn complete(
    State(state): State<SharedState>,
    Source(source): Source,
    RunnerAuth(runner): RunnerAuth,
    Path(raw): Path<String>,
    Body(mut completion): Body<Completion>,
) -> Result<Json<CompletionAck>, Error> {
    let job: JobId = path_id("job", &raw)?;
    // PostgreSQL's text cannot hold NUL; a reason is for people, so NUL is
    // shown as U+FFFD, on either store.
    if let Some(reason) = &mut completion.result.reason
        && reason.contains('\0')
    {
        *reason = reason.replace('\0', "\u{FFFD}");
    }
    // Values Terraform marks sensitive are kept sealed.
    state.keys.seal_job_outputs(&mut completion.result.outputs);
    let outcome = completion.result.outcome;
    let (attempt, exit_code) = (completion.attempt, completion.result.exit_code);
    let reason = completion.result.reason.clone();
    // The attempt's last lines, stored first, where a batch would be.
    let logs = match completion.logs.take() {
        Some(l) => Some(l.into_batch(attempt).map_err(Error::bad_request)?),
        None => None,
    };
    let started = std::time::Instant::now();
    let answer = match logs {
        Some(batch) => {
            let quota = state.log_quota(&runner.runner_id);
            state
                .store
                .complete_with_logs(&runner.runner_id, &job, batch, quota, completion)
                .await
                .map(|(ack, wrote)| {
                    state.charge_log(&runner.runner_id, wrote);
                    ack
                })
        }
        None => {
            state
                .store
                .complete(&runner.runner_id, &job, completion)
                .await
        }
    };
    state.metrics.store_write("complete", started.elapsed());
    // Lines stored before a refused completion are news too.
    state.wake_logs(&job);
    let ack = answer?;
    if ack.status != JobStatus::Running {
        state.wake_org(&runner.org_id);
        state.engine.job_ended(&job);
        tracing::info!(job = %job, runner = %runner.runner_id, ?outcome, "job finished");
        let outcome = ack.status.as_str();
        state.metrics.job_ended(outcome);
        let mut detail = format!("attempt {attempt}");
        if let Some(code) = exit_code {
            detail.push_str(&format!("; exit code {code}"));
        }
        if let Some(r) = reason {
            detail.push_str("; ");
            detail.push_str(&r.chars().take(500).collect::<String>());
        }
        let entry = AuditEntry::new(
            nuon_core::now_ms(),
            format!("runner:{}", runner.runner_id),
            "job.finished",
            format!("job:{job}"),
            source,
            outcome,
        )
        .with_detail(detail);
        state.auditor.record(&runner.org_id, entry).await;
    }
    Ok(Json(ack))
}
