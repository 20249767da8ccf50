//! What both stores decide the same way: turning rows into API types, the
//! fencing of attempts, the idempotence of log batches, the fate of an
//! expired lease, and paging through a job's log. Each store only reads the
//! rows and writes the outcome.

use nuon_core::model::QueuedJob;
use nuon_core::records;
use nuon_core::wire::ErrorCode;
use nuon_core::wire::{LeaseState, LogBatch, LogEntry, LogPage, RunnerRole, TokenScope};
use nuon_core::{JobId, JobStatus, OrgId, RunnerId, SignedRotation};

use super::{Result, StoreError};

/// The state of an attempt that holds its lease (the others: `lost`,
/// `abandoned`, or how its job ended).
pub(super) const ATTEMPT_RUNNING: &str = "running";

/// Bits of a log cursor that address a line inside a chunk.
pub(super) const CURSOR_LINE_BITS: u32 = 20;

/// A job row as both stores read it (`QueuedJob`'s columns in `rows.rs`, in order).
pub(super) struct JobRow {
    pub id: String,
    pub runner_id: String,
    pub kind: String,
    pub payload: Option<String>,
    pub status: String,
    pub attempts: u32,
    pub max_attempts: u32,
    pub timeout_secs: i64,
    pub cancel_requested: bool,
    pub exit_code: Option<i32>,
    pub reason: Option<String>,
    pub outputs: Option<String>,
    pub created_at: i64,
    pub started_at: Option<i64>,
    pub finished_at: Option<i64>,
}

/// A stored value the store cannot make sense of.
/// An install's labels after a change (`set`, then `remove`), or why the
/// change is refused: the same in every store.
pub(super) fn changed_labels(
    stored: Option<String>,
    set: &nuon_core::labels::Labels,
    remove: &[String],
    max: usize,
) -> Result<nuon_core::labels::Labels> {
    let mut labels: nuon_core::labels::Labels = match stored {
        Some(t) => serde_json::from_str(&t).map_err(corrupt)?,
        None => Default::default(),
    };
    labels.extend(set.clone());
    for k in remove {
        labels.remove(k);
    }
    if labels.len() > max {
        return Err(StoreError::Invalid(format!(
            "an install has at most {max} labels; this change would make {}",
            labels.len()
        )));
    }
    Ok(labels)
}

pub(super) fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Database(what.to_string().into())
}

/// A conflict: the org has a person of this address already.
pub(super) fn email_taken(email: &str) -> StoreError {
    StoreError::Conflict {
        code: ErrorCode::EmailTaken,
        message: format!(
            "{email} is in this org already; change their role instead (`nuon users set-role`)"
        ),
        acked_seq: None,
    }
}

/// A conflict: the change would leave an org that has owners with none.
pub(super) fn last_owner(email: &str) -> StoreError {
    StoreError::Conflict {
        code: ErrorCode::LastOwner,
        message: format!("{email} is the org's last owner: make another person owner first"),
        acked_seq: None,
    }
}

/// A conflict: the address signed in before from another account of the
/// provider.
pub(super) fn subject_mismatch(email: &str) -> StoreError {
    StoreError::Conflict {
        code: ErrorCode::SubjectMismatch,
        message: format!(
            "{email} signed in before as another account of the identity provider; an owner or admin can remove and invite them again"
        ),
        acked_seq: None,
    }
}

/// An id column, parsed.
pub(super) fn parse_id<T: std::str::FromStr<Err = nuon_core::IdError>>(raw: &str) -> Result<T> {
    raw.parse().map_err(|e: nuon_core::IdError| corrupt(e))
}

/// The error for an org name that names none.
/// A conflict: the org's signing key was rotated by another command.
pub(super) fn key_rotated_meanwhile(org: &OrgId) -> StoreError {
    StoreError::Conflict {
        code: ErrorCode::KeyRotated,
        message: format!(
            "the signing key of org {org} was rotated by another command meanwhile; nothing was \
             changed: run the rotation again if a further one is wanted"
        ),
        acked_seq: None,
    }
}

/// The rotations of an org's key as the store keeps them (JSON text, none
/// when empty).
pub(super) fn rotations_text(rotations: &[SignedRotation]) -> Option<String> {
    (!rotations.is_empty()).then(|| serde_json::to_string(rotations).unwrap_or_default())
}

/// The rotations of an org's key from what the store keeps.
pub(super) fn rotations_from(text: Option<String>) -> Result<Vec<SignedRotation>> {
    match text {
        None => Ok(Vec::new()),
        Some(t) => serde_json::from_str(&t)
            .map_err(|e| StoreError::Invalid(format!("the stored key rotations do not read: {e}"))),
    }
}

pub(super) fn no_org(name: &str) -> StoreError {
    StoreError::Invalid(format!(
        "no org is named {name:?}; check the name it was created with"
    ))
}

/// Keeps of the `picked` jobs only as many as the org has `room` for (its
/// limit on running jobs less those running; `None`: no limit); whether any
/// was held back.
pub(super) fn hold_back<T>(picked: &mut Vec<T>, room: Option<i64>) -> bool {
    let Some(room) = room else {
        return false;
    };
    let room = usize::try_from(room.max(0)).unwrap_or(usize::MAX);
    let held_back = picked.len() > room;
    picked.truncate(room);
    held_back
}

impl JobRow {
    /// The job as the Control API shows it (its payload was stored as
    /// shown: see `crate::keys`).
    pub(super) fn into_info(self) -> Result<QueuedJob> {
        Ok(QueuedJob {
            id: parse_id(&self.id)?,
            runner_id: parse_id(&self.runner_id)?,
            kind: self.kind,
            payload: json_or_null(self.payload),
            status: self.status.parse().map_err(corrupt)?,
            attempts: self.attempts,
            max_attempts: self.max_attempts,
            timeout_secs: self.timeout_secs as u64,
            cancel_requested: self.cancel_requested,
            exit_code: self.exit_code,
            reason: self.reason,
            outputs: json_or_null(self.outputs),
            created_at_ms: self.created_at,
            started_at_ms: self.started_at,
            finished_at_ms: self.finished_at,
        })
    }
}

/// A JSON column, or `null` when empty or unreadable.
pub(super) fn json_or_null(raw: Option<String>) -> serde_json::Value {
    raw.and_then(|o| serde_json::from_str(&o).ok())
        .unwrap_or(serde_json::Value::Null)
}

/// The artifact a build job's outputs name.
pub(super) fn build_artifact(outputs: Option<String>) -> Option<nuon_core::ArtifactRef> {
    serde_json::from_value(json_or_null(outputs)["artifact"].clone()).ok()
}

/// A runner's stored role.
pub(super) fn role_of(s: &str) -> RunnerRole {
    match s {
        "install" => RunnerRole::Install,
        "build" => RunnerRole::Build,
        _ => RunnerRole::Generic,
    }
}

/// A token's stored scope.
pub(super) fn scope_of(s: &str) -> TokenScope {
    match s {
        "admin" => TokenScope::Admin,
        "deployer" => TokenScope::Deployer,
        _ => TokenScope::Read,
    }
}

/// A unit enum as its serde name (`"provision"`).
pub(super) fn enum_str<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The events a webhook takes, as stored: names, comma-separated.
pub(super) fn events_column(events: &[nuon_core::webhook::WebhookEvent]) -> String {
    events
        .iter()
        .map(|e| e.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// The events of an [`events_column`].
pub(super) fn events_of(raw: &str) -> Result<Vec<nuon_core::webhook::WebhookEvent>> {
    raw.split(',')
        .filter(|e| !e.is_empty())
        .map(|e| e.parse().map_err(corrupt))
        .collect()
}

/// The body of a webhook delivery: its id, the event, the org, when, and
/// what happened.
pub(super) fn delivery_body(
    id: &nuon_core::DeliveryId,
    org: &OrgId,
    event: nuon_core::webhook::WebhookEvent,
    data: &serde_json::Value,
) -> String {
    serde_json::json!({
        "id": id,
        "event": event,
        "org_id": org,
        "at_ms": nuon_core::now_ms(),
        "data": data,
    })
    .to_string()
}

/// A unit enum from its serde name.
pub(super) fn enum_from<T: serde::de::DeserializeOwned>(s: &str) -> Result<T> {
    serde_json::from_value(serde_json::Value::String(s.to_owned())).map_err(corrupt)
}

/// The attempt row a runner's write is checked against: the job's current
/// attempt number, and the attempt's runner and state.
pub(super) type AttemptRow<'a> = (i64, &'a str, &'a str);

/// The fence: a runner may write only to the job's current attempt, its
/// own, while it runs.
pub(super) fn check_attempt(
    row: Option<AttemptRow<'_>>,
    runner: &RunnerId,
    job: &JobId,
    n: u32,
) -> Result<()> {
    match row {
        None => Err(StoreError::stale(format!(
            "job {job} has no attempt {n} of this runner"
        ))),
        Some((_, owner, _)) if owner != runner.as_str() => Err(StoreError::stale(format!(
            "attempt {n} of job {job} belongs to another runner"
        ))),
        Some((current, _, _)) if current != i64::from(n) => Err(StoreError::stale(format!(
            "attempt {n} of job {job} was superseded by attempt {current}"
        ))),
        Some((_, _, state)) if state != ATTEMPT_RUNNING => Err(StoreError::stale(format!(
            "attempt {n} of job {job} is {state}, no longer running"
        ))),
        Some(_) => Ok(()),
    }
}

/// What a heartbeat answers for one lease, given the job's current attempt,
/// whether a cancel was asked, and the attempt's runner and state.
pub(super) fn lease_state(
    row: Option<(i64, bool, &str, &str)>,
    runner: &RunnerId,
    attempt: u32,
) -> LeaseState {
    match row {
        Some((current, cancel, owner, state))
            if current == i64::from(attempt)
                && owner == runner.as_str()
                && state == ATTEMPT_RUNNING =>
        {
            if cancel {
                LeaseState::Cancel
            } else {
                LeaseState::Active
            }
        }
        _ => LeaseState::Stale,
    }
}

/// The part of a log batch to store after `acked` lines are held: the lines
/// to skip and the sequence numbers of the first and last line kept.
/// `None` stores nothing: a gap (the runner resends from `acked + 1`) or
/// lines already held.
pub(super) fn new_lines(acked: u64, batch: &LogBatch) -> Option<(usize, u64, u64)> {
    if batch.first_seq == 0 || batch.first_seq > acked + 1 {
        return None;
    }
    let skip = (acked + 1 - batch.first_seq) as usize;
    if skip >= batch.lines.len() {
        return None;
    }
    Some((skip, acked + 1, acked + (batch.lines.len() - skip) as u64))
}

/// An attempt's stored log bytes once its log was cut at a quota: nothing
/// more is stored for it.
pub(super) const LOG_TRUNCATED: i64 = i64::MAX;

/// What of a batch's new records (`body`, lines `first..=last`) a log quota
/// lets in, given the attempt's bytes `stored` so far.
pub(super) struct Kept<'a> {
    /// The records to store.
    pub body: std::borrow::Cow<'a, str>,
    /// The sequence number of the last record stored.
    pub last: u64,
    /// The attempt's stored log bytes after it ([`LOG_TRUNCATED`] once cut).
    pub log_bytes: i64,
}

/// `None` when nothing is stored (the attempt's log was cut before). The
/// batch that crosses the quota keeps the whole records that fit and ends
/// with a line saying which quota cut the log.
pub(super) fn within_quota<'a>(
    body: &'a str,
    (first, last): (u64, u64),
    stored: i64,
    quota: super::LogQuota,
) -> Option<Kept<'a>> {
    use std::fmt::Write as _;
    let stored_u = u64::try_from(stored).unwrap_or(0);
    if stored == LOG_TRUNCATED {
        return None;
    }
    let len = body.len() as u64;
    let room_job = quota.per_attempt.saturating_sub(stored_u);
    let room = room_job.min(quota.runner_room);
    if len <= room {
        return Some(Kept {
            body: std::borrow::Cow::Borrowed(body),
            last,
            log_bytes: stored.saturating_add(len as i64),
        });
    }
    let (head, n) = records::head_within(body, usize::try_from(room).unwrap_or(usize::MAX));
    let ts = records::iter_str(&body[head.len()..])
        .next()
        .map_or(0, |l| l.ts_ms);
    let why = if room_job <= quota.runner_room {
        format!(
            "this attempt's log reached the control plane's quota of {} bytes per job (nuon-ctl serve --log-quota-per-job)",
            quota.per_attempt
        )
    } else {
        "its runner shipped more log than the control plane's quota per runner and hour (nuon-ctl serve --log-quota-per-runner)".to_owned()
    };
    let mut text = head.to_owned();
    let _ = writeln!(
        text,
        "s{ts} log truncated: {why}; the lines after this one are not kept, and the job goes on"
    );
    Some(Kept {
        body: std::borrow::Cow::Owned(text),
        last: first + n as u64,
        log_bytes: LOG_TRUNCATED,
    })
}

/// The error of a completion that comes before all its log lines.
pub(super) fn logs_pending(job: &JobId, n: u32, wrote: u64, acked: u64) -> StoreError {
    StoreError::Conflict {
        code: ErrorCode::LogsPending,
        message: format!(
            "attempt {n} of job {job} wrote {wrote} log lines but the server holds {acked}; send the rest first"
        ),
        acked_seq: Some(acked),
    }
}

/// What happens to a job whose attempt `n` lost its lease.
pub(super) struct Expiry {
    /// The attempt's new state: `lost`, or `abandoned` when it never
    /// confirmed with a heartbeat.
    pub attempt_state: &'static str,
    /// `None`: queued again. Otherwise the job's end: status and reason.
    pub end: Option<(&'static str, String)>,
}

/// Decides an expired attempt's fate: an attempt that never confirmed with
/// a heartbeat never started work, so its job may always be queued again;
/// otherwise the retry policy decides, and a cancelled job ends cancelled.
pub(super) fn expire(
    n: u32,
    confirmed: bool,
    cancel: bool,
    max_attempts: u32,
    started: u32,
) -> Expiry {
    let attempt_state = if confirmed { "lost" } else { "abandoned" };
    let requeue = !cancel && (!confirmed || started < max_attempts);
    let end = if requeue {
        None
    } else if cancel {
        Some((
            JobStatus::Cancelled.as_str(),
            format!("cancelled; runner lost during attempt {n}"),
        ))
    } else {
        Some((
            JobStatus::Failed.as_str(),
            format!("runner lost: no heartbeat before the lease of attempt {n} expired"),
        ))
    };
    Expiry { attempt_state, end }
}

/// One stored chunk of log records: its id, attempt, first sequence number
/// and body.
pub(super) struct LogChunk<'a> {
    pub id: i64,
    pub attempt: u32,
    pub first_seq: i64,
    pub body: &'a str,
}

/// How many chunks one page looks at, at most.
pub(super) const CHUNKS_PER_PAGE: i64 = 64;
/// The most bytes of log text one page carries (but always one line): a
/// page of long lines stops early, and a reader's memory stays bounded
/// however chatty the job was.
pub(super) const MAX_PAGE_BYTES: usize = 1024 * 1024;

/// The chunk a cursor points into (the first chunk to read).
pub(super) fn cursor_chunk(cursor: u64) -> i64 {
    (cursor >> CURSOR_LINE_BITS) as i64
}

/// The lines of [`cursor_chunk`] the cursor has already passed.
fn cursor_skip(cursor: u64) -> usize {
    (cursor & ((1 << CURSOR_LINE_BITS) - 1)) as usize
}

/// A stored chunk's size, read before any body: its id, lines and bytes.
pub(super) type ChunkSize = (i64, i64, i64);

/// Of the chunks from the cursor's on (their sizes, in order, at most
/// [`CHUNKS_PER_PAGE`]), how many a page of `limit` lines reads, and whether
/// chunks beyond those may hold more lines.
pub(super) fn chunks_for_page(sizes: &[ChunkSize], cursor: u64, limit: u32) -> (usize, bool) {
    let (first, skip) = (cursor_chunk(cursor), cursor_skip(cursor) as i64);
    let (mut lines, mut bytes) = (0, 0);
    let mut take = sizes.len();
    for (i, &(id, count, size)) in sizes.iter().enumerate() {
        if lines > 0 && (lines >= i64::from(limit) || bytes >= MAX_PAGE_BYTES as i64) {
            take = i;
            break;
        }
        // The cursor's chunk may be read to its end already: it adds
        // nothing, and must not use up the page.
        let fresh = if id == first { count - skip } else { count };
        if fresh > 0 {
            lines += fresh;
            bytes += size;
        }
    }
    (
        take,
        take < sizes.len() || sizes.len() as i64 >= CHUNKS_PER_PAGE,
    )
}

/// Pages through chunks read from [`cursor_chunk`] on, in order: up to
/// `limit` lines (or [`MAX_PAGE_BYTES`]) after `cursor`. `more`: chunks
/// after these were not read. `terminal`: the job has ended, so a page that
/// reaches the end completes the log.
pub(super) fn log_page<'a>(
    chunks: impl IntoIterator<Item = LogChunk<'a>>,
    cursor: u64,
    limit: u32,
    more: bool,
    terminal: bool,
) -> LogPage {
    let chunk_after = cursor_chunk(cursor);
    let skip_in_chunk = cursor_skip(cursor);
    let mut lines = Vec::new();
    let mut bytes = 0;
    let mut next = cursor;
    let mut exhausted = true;
    for chunk in chunks {
        let start = if chunk.id == chunk_after {
            skip_in_chunk
        } else {
            0
        };
        for (i, line) in records::iter_str(chunk.body).enumerate().skip(start) {
            if lines.len() as u32 >= limit || bytes >= MAX_PAGE_BYTES {
                exhausted = false;
                break;
            }
            next = ((chunk.id as u64) << CURSOR_LINE_BITS) | (i + 1) as u64;
            bytes += line.text.len();
            lines.push(LogEntry {
                attempt: chunk.attempt,
                seq: chunk.first_seq as u64 + i as u64,
                stream: line.stream,
                ts_ms: line.ts_ms,
                text: line.text.to_owned(),
                cursor: next,
            });
        }
        if !exhausted {
            break;
        }
    }
    // A full page, or one that left chunks unread, may have more behind it.
    if exhausted && (more || lines.len() as u32 >= limit || bytes >= MAX_PAGE_BYTES) {
        exhausted = false;
    }
    LogPage {
        lines,
        next,
        complete: terminal && exhausted,
    }
}

/// The conflict of a cron run stored before.
pub(super) fn already_started(action: &str, at_ms: i64) -> StoreError {
    StoreError::Conflict {
        code: ErrorCode::AlreadyStarted,
        message: format!("the cron run of action {action} due at {at_ms} ms was started before"),
        acked_seq: None,
    }
}

/// A workflow's run-time inputs as stored: `NULL` when there are none.
pub(super) fn inputs_column(inputs: &std::collections::BTreeMap<String, String>) -> Option<String> {
    (!inputs.is_empty()).then(|| serde_json::to_string(inputs).unwrap_or_default())
}

/// A planned step's first status, and its outputs when it is skipped
/// before it starts (marked so the workflow still succeeds).
pub(super) fn planned_status(
    s: &nuon_core::workflow::PlannedStep,
) -> (&'static str, Option<String>) {
    use nuon_core::workflow::{StepStatus, TURNED_OFF};
    match s.skipped {
        Some(_) => (
            StepStatus::Skipped.as_str(),
            Some(serde_json::json!({ TURNED_OFF: true }).to_string()),
        ),
        None => (StepStatus::Pending.as_str(), None),
    }
}
