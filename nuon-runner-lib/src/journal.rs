//! The runner's own audit journal: `WORK_DIR/audit.jsonl`, one JSON
//! [`AuditEntry`] per line, hash-chained like the control plane's trail.
//! Every job the runner accepted or refused is in it, and how each ended,
//! with the digest of its signed spec and the key that signed it. The
//! customer verifies it offline (`nuon-runner audit verify`) and compares
//! it with the vendor's record for the install (`nuon-runner audit compare
//! EXPORT`): nothing ran that the vendor's record lacks, and the reverse.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use nuon_core::audit::{AuditEntry, Chain, ChainBreak, Verifier};
use nuon_core::{Grant, JobId, RunnerId, now_ms};
use serde::Serialize;

/// The journal's file name in the work directory.
pub const JOURNAL_FILE: &str = "audit.jsonl";

/// The journal of one runner, appended to as jobs are accepted, refused
/// and finished.
pub struct Journal {
    path: PathBuf,
    actor: String,
    inner: Mutex<(Chain, File)>,
}

impl Journal {
    /// Opens (or starts) the journal in `work_dir`, continuing its chain.
    pub fn open(work_dir: &Path, runner: &RunnerId) -> std::io::Result<Journal> {
        use std::os::unix::fs::OpenOptionsExt;
        let path = work_dir.join(JOURNAL_FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .mode(0o600)
            .open(&path)?;
        let actor = format!("runner:{runner}");
        let chain = match crate::tail::last_line(&mut file)? {
            None => Chain::new(&actor),
            Some((line, _)) => {
                let e: AuditEntry = serde_json::from_slice(&line).map_err(|e| {
                    std::io::Error::other(format!(
                        "the last line of {} is not a journal entry ({e}); move the file away to start a new journal, and keep it to verify",
                        path.display()
                    ))
                })?;
                Chain {
                    n: e.n,
                    head: e.hash,
                }
            }
        };
        Ok(Journal {
            path,
            actor,
            inner: Mutex::new((chain, file)),
        })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends an entry about `job` (written and flushed before it returns;
    /// a write that fails is logged, and the job goes on).
    pub fn record(&self, action: &str, job: &str, outcome: &str, detail: String) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let (chain, file) = &mut *inner;
        let mut next = chain.clone();
        let entry = next.append(
            AuditEntry::new(
                now_ms(),
                self.actor.as_str(),
                action,
                format!("job:{job}"),
                "",
                outcome,
            )
            .with_detail(detail),
        );
        let mut line = serde_json::to_vec(&entry).expect("an entry encodes");
        line.push(b'\n');
        let before = file.metadata().map(|m| m.len());
        match file.write_all(&line).and_then(|()| file.sync_data()) {
            Ok(()) => *chain = next,
            Err(e) => {
                // A torn line would break every entry after it: cut it off.
                if let Ok(len) = before {
                    let _ = file.set_len(len);
                }
                tracing::error!(path = %self.path.display(), error = %e, job, action, "cannot write to the runner's audit journal")
            }
        }
    }
}

/// How much of the journal's end is read at start for the attempts
/// accepted lately: far more than the entries of the longest grant
/// ([`Grant::MAX_LEASE_MS`] and its leeway) at any job rate a runner
/// sustains.
const RECENT_BYTES: u64 = 64 << 20;

/// The attempts this runner accepted whose grants may still be live, and
/// the jobs it finished: what it refuses to accept again. Read from the
/// journal (the durable record) at start, and kept as jobs are accepted
/// and end.
pub(crate) struct Accepted {
    seen: Mutex<std::collections::HashMap<(JobKey, u32), i64>>,
    finished: Mutex<FinishedJobs>,
}

/// A job id as the runner keeps it in memory, for as many jobs as it
/// ever ran: its 26 base32 characters packed 5 bits each into 17 bytes
/// (the prefix is the same for every job), no allocation of its own. With
/// the ids and outcomes kept as strings, a runner running jobs at a steady
/// rate grew by about 420 bytes a job (the soak's runner: +11 % in an
/// hour); with the 26 characters as bytes, by about 270 (+5.4 %).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct JobKey([u8; 17]);

impl JobKey {
    fn of(job: &JobId) -> JobKey {
        let id = job.as_str().as_bytes();
        let ulid = &id[id.len().saturating_sub(26)..];
        let mut key = [0u8; 17];
        for (n, c) in ulid.iter().enumerate() {
            // A job id holds these characters only (it is checked when
            // parsed); each is its 5 bits, at 5 × n in the key.
            let v = nuon_core::CROCKFORD
                .iter()
                .position(|a| a == c)
                .unwrap_or(0) as u16;
            let (byte, bit) = (n * 5 / 8, n * 5 % 8);
            let v = v << bit;
            key[byte] |= v as u8;
            if let Some(next) = key.get_mut(byte + 1) {
                *next |= (v >> 8) as u8;
            }
        }
        JobKey(key)
    }
}

/// The jobs finished here. Past [`MAX_FINISHED`] the oldest tenth (by
/// when they finished) goes, found in one pass: no queue of the order
/// beside the map.
#[derive(Default)]
struct FinishedJobs {
    by_job: std::collections::HashMap<JobKey, Finished>,
}

impl FinishedJobs {
    fn insert(&mut self, job: &JobId, done: Finished) {
        if self.by_job.len() >= MAX_FINISHED {
            let cut = MAX_FINISHED / 10;
            let mut ends: Vec<i64> = self.by_job.values().map(|f| f.at_ms).collect();
            let (older, &mut at, _) = ends.select_nth_unstable(cut);
            // All that ended before `at` go, and as many that ended at it
            // as make a tenth (jobs finish many to a millisecond).
            let mut ties = cut - older.iter().filter(|t| **t < at).count();
            self.by_job.retain(|_, f| {
                let goes = f.at_ms < at || (f.at_ms == at && ties > 0);
                if f.at_ms == at && goes {
                    ties -= 1;
                }
                !goes
            });
        }
        self.by_job.insert(JobKey::of(job), done);
    }

    fn drop_attempt(&mut self, job: &JobId, attempt: u32) {
        let key = JobKey::of(job);
        if self.by_job.get(&key).is_some_and(|f| f.attempt == attempt) {
            self.by_job.remove(&key);
        }
    }
}

/// A job this runner ran to its end and completed (`job.finished`, not
/// followed by `job.dropped` for that attempt). A control plane never
/// hands out a job again once an attempt of it completed, so a claim of
/// one comes from a store that lost that completion: a control plane
/// restored from a backup taken before it. Its grant is new and its
/// attempt may be too, so only this record tells it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Finished {
    /// The attempt that ran.
    pub attempt: u32,
    /// How it ended; `None` for a word no job status has (a journal
    /// written by hand): [`Finished::outcome`].
    status: Option<nuon_core::JobStatus>,
    /// When, ms since the Unix epoch.
    pub at_ms: i64,
}

impl Finished {
    fn new(attempt: u32, outcome: &str, at_ms: i64) -> Finished {
        Finished {
            attempt,
            status: outcome.parse().ok(),
            at_ms,
        }
    }

    /// How it ended (`succeeded`, `failed`, ...), `ended` for a word no
    /// job status has.
    pub(crate) fn outcome(&self) -> &'static str {
        self.status.map_or("ended", |s| s.as_str())
    }
}

/// The most finished jobs kept in memory; past it the oldest go first
/// (the journal keeps every one).
const MAX_FINISHED: usize = 100_000;

/// The attempt an entry's detail names (`attempt N; ...` or `attempt N:`).
fn attempt_of(detail: &str) -> Option<u32> {
    let rest = detail.strip_prefix("attempt ")?;
    let end = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    rest[..end].parse().ok()
}

impl Accepted {
    /// The attempts the journal at `path` records as accepted within the
    /// longest grant before `now`.
    pub(crate) fn from_journal(path: &Path, now: i64) -> std::io::Result<Accepted> {
        let window = Grant::MAX_LEASE_MS + Grant::LEEWAY_MS;
        let mut seen = std::collections::HashMap::new();
        let mut file = match File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(Accepted {
                    seen: Mutex::new(seen),
                    finished: Mutex::default(),
                });
            }
            Err(e) => return Err(e),
        };
        let len = file.seek(SeekFrom::End(0))?;
        let start = len.saturating_sub(RECENT_BYTES);
        file.seek(SeekFrom::Start(start))?;
        let mut lines = BufReader::new(file).lines();
        if start > 0 {
            // A line cut in two.
            lines.next();
        }
        let mut finished = FinishedJobs::default();
        for line in lines {
            let Ok(e) = serde_json::from_str::<AuditEntry>(&line?) else {
                continue;
            };
            let job = e.target.strip_prefix("job:").and_then(|j| j.parse().ok());
            let (Some(job), Some(attempt)) = (job, attempt_of(&e.detail)) else {
                continue;
            };
            match e.action.as_str() {
                "job.accepted" if e.at_ms >= now - window => {
                    seen.insert((JobKey::of(&job), attempt), e.at_ms + window);
                }
                "job.finished" => {
                    finished.insert(&job, Finished::new(attempt, &e.outcome, e.at_ms));
                }
                "job.dropped" => finished.drop_attempt(&job, attempt),
                _ => {}
            }
        }
        Ok(Accepted {
            seen: Mutex::new(seen),
            finished: Mutex::new(finished),
        })
    }

    /// How `job` ended here, if this runner finished an attempt of it.
    pub(crate) fn finished(&self, job: &JobId) -> Option<Finished> {
        let finished = self.finished.lock().unwrap_or_else(|e| e.into_inner());
        finished.by_job.get(&JobKey::of(job)).copied()
    }

    /// Records that `attempt` of `job` ran to its end with `outcome`.
    pub(crate) fn finish(&self, job: &JobId, attempt: u32, outcome: &str) {
        let done = Finished::new(attempt, outcome, now_ms());
        let mut finished = self.finished.lock().unwrap_or_else(|e| e.into_inner());
        finished.insert(job, done);
    }

    /// Forgets that `attempt` of `job` finished: its end was never
    /// completed (its lease went to a newer attempt).
    pub(crate) fn dropped(&self, job: &JobId, attempt: u32) {
        let mut finished = self.finished.lock().unwrap_or_else(|e| e.into_inner());
        finished.drop_attempt(job, attempt);
    }

    /// Whether `attempt` of `job` is one this runner took before or ran to
    /// its end: that attempt's spool and its end belong to that run, and a
    /// refusal of a claim of it (an answer served again) must touch
    /// neither.
    pub(crate) fn holds(&self, job: &JobId, attempt: u32) -> bool {
        if self.finished(job).is_some_and(|f| f.attempt == attempt) {
            return true;
        }
        let seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        seen.contains_key(&(JobKey::of(job), attempt))
    }

    /// Takes `attempt` of `job`, granted until `not_after_ms`; refuses one
    /// taken before.
    pub(crate) fn take(&self, job: &JobId, attempt: u32, not_after_ms: i64) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= seen.capacity().max(64) {
            // Those past their grant are refused by their time anyway:
            // dropped before the table would grow, which it does only
            // when more than half of it is still granted (a steady job
            // rate keeps it the size of a grant's time of jobs).
            let now = now_ms();
            seen.retain(|_, until| *until >= now);
            if seen.len() > seen.capacity() / 2 {
                let more = seen.capacity();
                seen.reserve(more);
            }
        }
        seen.insert((JobKey::of(job), attempt), not_after_ms)
            .is_none()
    }
}

/// Reads a journal or an export: one JSON entry per line, blank lines
/// skipped. A line that is not an entry is an error naming it.
pub fn read_entries(path: &Path) -> Result<Vec<AuditEntry>, String> {
    let file = File::open(path).map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        let e = serde_json::from_str(&line)
            .map_err(|e| format!("{}:{}: not an audit entry ({e})", path.display(), i + 1))?;
        out.push(e);
    }
    Ok(out)
}

/// What verifying a journal found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Verified {
    /// Entries that chain, from the first.
    pub entries: u64,
    /// The hash of the last of them.
    pub head: String,
    /// The first entry that does not chain.
    pub broken: Option<ChainBreak>,
}

/// Checks a journal's chain, entry by entry, from the start of the chain
/// of the runner its first entry names.
pub fn verify(entries: &[AuditEntry]) -> Verified {
    let mut v = entries
        .first()
        .map(|e| Verifier::new(&e.actor))
        .unwrap_or_default();
    let broken = entries.iter().find_map(|e| v.check(e).err());
    Verified {
        entries: v.count(),
        head: v.head().to_owned(),
        broken,
    }
}

/// What comparing the runner's journal with the control plane's export
/// found. Jobs are named by id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Comparison {
    /// Jobs the runner accepted or refused that both sides record as ended.
    pub matched: usize,
    /// Jobs that ended here but that the control plane's record lacks.
    pub only_in_journal: Vec<String>,
    /// Jobs the control plane records as ended by this runner that this
    /// journal lacks.
    pub only_in_export: Vec<String>,
    /// Jobs both sides have whose outcome differs: `(job, here, there)`.
    pub outcome_differs: Vec<(String, String, String)>,
    /// Jobs accepted here without an end yet (running, or their result not
    /// yet delivered): not counted as a difference.
    pub unfinished_here: Vec<String>,
}

impl Comparison {
    /// Whether both sides agree.
    pub fn agrees(&self) -> bool {
        self.only_in_journal.is_empty()
            && self.only_in_export.is_empty()
            && self.outcome_differs.is_empty()
    }
}

fn job_of(e: &AuditEntry) -> Option<&str> {
    e.target.strip_prefix("job:")
}

/// Compares the jobs of a runner's journal with those the control plane
/// records for it (`nuon audit export --install INSTALL`: its
/// `job.finished` entries by `runner:ID`).
pub fn compare(journal: &[AuditEntry], export: &[AuditEntry]) -> Comparison {
    let mut here: BTreeMap<&str, &str> = BTreeMap::new();
    let mut accepted: BTreeSet<&str> = BTreeSet::new();
    for e in journal {
        let Some(job) = job_of(e) else { continue };
        match e.action.as_str() {
            "job.accepted" => {
                accepted.insert(job);
            }
            // `job.reported`: an end told again, to a store restored
            // from an older backup.
            "job.finished" | "job.refused" | "job.reported" => {
                here.insert(job, e.outcome.as_str());
            }
            // Its lease was lost after it ended here: the control plane
            // never took this attempt's end.
            "job.dropped" => {
                here.remove(job);
            }
            _ => {}
        }
    }
    let mut there: BTreeMap<&str, &str> = BTreeMap::new();
    for e in export {
        if e.action == "job.finished"
            && e.actor.starts_with("runner:")
            && let Some(job) = job_of(e)
        {
            there.insert(job, e.outcome.as_str());
        }
    }
    let mut c = Comparison::default();
    for (job, outcome) in &here {
        match there.get(job) {
            None => c.only_in_journal.push((*job).to_owned()),
            Some(o) if !same_outcome(outcome, o) => {
                c.outcome_differs
                    .push(((*job).to_owned(), (*outcome).to_owned(), (*o).to_owned()))
            }
            Some(_) => c.matched += 1,
        }
    }
    for job in there.keys() {
        if !here.contains_key(job) {
            if accepted.contains(job) {
                c.outcome_differs.push((
                    (*job).to_owned(),
                    "no end recorded".into(),
                    there[job].to_owned(),
                ));
            } else {
                c.only_in_export.push((*job).to_owned());
            }
        }
    }
    c.unfinished_here = accepted
        .iter()
        .filter(|j| !here.contains_key(*j) && !there.contains_key(*j))
        .map(|j| (*j).to_owned())
        .collect();
    c
}

/// A refusal here is a failed job there.
fn same_outcome(here: &str, there: &str) -> bool {
    here == there || (here == "refused" && there == "failed")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(action: &str, job: &str, outcome: &str, actor: &str) -> AuditEntry {
        AuditEntry::new(0, actor, action, format!("job:{job}"), "", outcome)
    }

    #[test]
    fn the_journal_continues_its_chain_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let runner = RunnerId::generate();
        let j = Journal::open(dir.path(), &runner).unwrap();
        j.record("job.accepted", "job_a", "accepted", "x".into());
        drop(j);
        let j = Journal::open(dir.path(), &runner).unwrap();
        j.record("job.finished", "job_a", "succeeded", String::new());
        let entries = read_entries(&dir.path().join(JOURNAL_FILE)).unwrap();
        assert_eq!(entries.len(), 2);
        let v = verify(&entries);
        assert_eq!((v.entries, v.broken), (2, None));
    }

    #[test]
    fn a_finished_job_is_known_past_its_grant_and_a_dropped_end_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let j = Journal::open(dir.path(), &RunnerId::generate()).unwrap();
        let (a, b, c) = (JobId::generate(), JobId::generate(), JobId::generate());
        let at = |job: &JobId, action: &str, outcome: &str, detail: &str| {
            j.record(action, job.as_str(), outcome, detail.to_owned());
        };
        at(&a, "job.accepted", "accepted", "attempt 1; spec sha256:00");
        at(&a, "job.finished", "succeeded", "attempt 1; exit code 0");
        at(&b, "job.accepted", "accepted", "attempt 2; spec sha256:00");
        at(&b, "job.finished", "failed", "attempt 2; exit code 1");
        at(&b, "job.dropped", "stale", "attempt 2: not completed here");
        at(&c, "job.accepted", "accepted", "attempt 1; spec sha256:00");
        // Read now: the attempts accepted within their grant are held.
        let acc = Accepted::from_journal(j.path(), now_ms()).unwrap();
        assert!(!acc.take(&c, 1, now_ms() + 60_000), "a claim served again");
        assert!(acc.take(&c, 2, now_ms() + 60_000), "a new attempt");
        // Read ten days later: past every grant, as after a restore of an
        // old backup.
        let later = now_ms() + 10 * 24 * 3_600_000;
        let acc = Accepted::from_journal(j.path(), later).unwrap();
        let done = acc.finished(&a).unwrap();
        assert_eq!((done.attempt, done.outcome()), (1, "succeeded"));
        assert!(
            acc.take(&a, 1, later + 1000),
            "the attempt itself is past its grant: only the finished record refuses it"
        );
        assert_eq!(
            acc.finished(&b),
            None,
            "its end was dropped: a newer attempt may run"
        );
        assert_eq!(acc.finished(&c), None, "accepted, never finished here");
        // Kept as jobs end, and forgotten for the attempt dropped only.
        acc.finish(&c, 1, "cancelled");
        assert_eq!(acc.finished(&c).unwrap().outcome(), "cancelled");
        acc.dropped(&c, 2);
        assert!(acc.finished(&c).is_some());
        acc.dropped(&c, 1);
        assert_eq!(acc.finished(&c), None);
    }

    #[test]
    fn the_finished_jobs_kept_in_memory_are_bounded_oldest_first() {
        let mut f = FinishedJobs::default();
        let jobs: Vec<JobId> = (0..MAX_FINISHED + 2).map(|_| JobId::generate()).collect();
        for (i, job) in jobs.iter().enumerate() {
            let done = Finished::new(1, "succeeded", i as i64);
            f.insert(job, done);
        }
        // The oldest tenth went when the map was full.
        assert_eq!(f.by_job.len(), MAX_FINISHED - MAX_FINISHED / 10 + 2);
        let kept = |n: usize| f.by_job.contains_key(&JobKey::of(&jobs[n]));
        assert!(!kept(0) && !kept(MAX_FINISHED / 10 - 1));
        assert!(kept(MAX_FINISHED / 10) && kept(MAX_FINISHED + 1));
        // Ended all in one millisecond: still a tenth goes.
        let mut f = FinishedJobs::default();
        for job in &jobs {
            let done = Finished::new(1, "succeeded", 7);
            f.insert(job, done);
        }
        assert_eq!(f.by_job.len(), MAX_FINISHED - MAX_FINISHED / 10 + 2);
    }

    #[test]
    fn the_attempts_taken_are_kept_as_long_as_their_grants_only() {
        let none = tempfile::tempdir().unwrap();
        let acc = Accepted::from_journal(&none.path().join("journal"), now_ms()).unwrap();
        // Jobs at a steady rate whose grants have all passed but the
        // newest 10: the table stays the size of those granted, not of
        // every job taken.
        let jobs: Vec<JobId> = (0..5_000).map(|_| JobId::generate()).collect();
        for (n, job) in jobs.iter().enumerate() {
            let until = if n >= jobs.len() - 10 {
                now_ms() + 60_000
            } else {
                1
            };
            assert!(acc.take(job, 1, until));
        }
        let seen = acc.seen.lock().unwrap();
        assert!(seen.capacity() < 256, "capacity {}", seen.capacity());
        drop(seen);
        // A grant still live is refused again; a passed one was dropped
        // (its own time refuses it).
        assert!(!acc.take(&jobs[4_999], 1, now_ms() + 60_000));
        assert!(!acc.holds(&jobs[0], 1));
        // All still granted: the table grows to hold them.
        let acc = Accepted::from_journal(&none.path().join("journal"), now_ms()).unwrap();
        for job in &jobs {
            assert!(acc.take(job, 1, now_ms() + 60_000));
        }
        assert_eq!(acc.seen.lock().unwrap().len(), 5_000);
        assert!(jobs.iter().all(|j| !acc.take(j, 1, now_ms() + 60_000)));
    }

    #[test]
    fn a_job_key_holds_every_bit_of_the_id() {
        // Ids that differ in one character, anywhere, are other keys.
        let id = JobId::generate();
        let base = id.as_str().to_owned();
        let at = base.len() - 26;
        let mut keys = std::collections::HashSet::new();
        for n in 0..26 {
            for c in ["0", "Z"] {
                let mut other = base.clone();
                other.replace_range(at + n..at + n + 1, c);
                let other: JobId = other.parse().unwrap();
                keys.insert((other.as_str().to_owned(), JobKey::of(&other)));
            }
        }
        let ids: std::collections::HashSet<_> = keys.iter().map(|(s, _)| s).collect();
        let packed: std::collections::HashSet<_> = keys.iter().map(|(_, k)| k.0).collect();
        assert_eq!(ids.len(), packed.len());
    }

    #[test]
    fn a_finished_job_is_kept_by_its_whole_id_and_its_outcome_by_name() {
        // Two ids made in one millisecond differ in their last characters
        // only; a key of fewer characters would take one for the other.
        let (a, b) = (JobId::generate(), JobId::generate());
        let none = tempfile::tempdir().unwrap();
        let acc = Accepted::from_journal(&none.path().join("journal"), now_ms()).unwrap();
        acc.finish(&a, 3, "timed_out");
        assert_eq!(acc.finished(&b), None);
        let done = acc.finished(&a).unwrap();
        assert_eq!((done.attempt, done.outcome()), (3, "timed_out"));
        acc.finish(&b, 1, "no such status");
        assert_eq!(acc.finished(&b).unwrap().outcome(), "ended");
        assert!(acc.take(&a, 4, now_ms() + 1000) && !acc.take(&a, 4, now_ms() + 1000));
        assert!(acc.holds(&a, 4) && acc.holds(&a, 3) && !acc.holds(&b, 4));
    }

    #[test]
    fn compare_names_jobs_on_one_side_only() {
        let r = "runner:rnr_x";
        let journal = vec![
            entry("job.accepted", "a", "accepted", r),
            entry("job.finished", "a", "succeeded", r),
            entry("job.refused", "b", "refused", r),
            entry("job.accepted", "c", "accepted", r),
            entry("job.finished", "c", "succeeded", r),
            entry("job.accepted", "d", "accepted", r),
            entry("job.accepted", "f", "accepted", r),
            entry("job.finished", "f", "succeeded", r),
            entry("job.dropped", "f", "stale", r),
            // Ended here, and told again as failed to a store restored
            // from an older backup: the export has that end.
            entry("job.accepted", "g", "accepted", r),
            entry("job.finished", "g", "succeeded", r),
            entry("job.reported", "g", "failed", r),
        ];
        let export = vec![
            entry("job.finished", "g", "failed", r),
            entry("job.finished", "a", "succeeded", r),
            entry("job.finished", "b", "failed", r),
            entry("job.finished", "e", "succeeded", r),
            entry("deployInstall", "z", "201", "tok_1"),
        ];
        let c = compare(&journal, &export);
        assert_eq!(c.matched, 3);
        assert_eq!(c.only_in_journal, vec!["c"]);
        assert_eq!(c.only_in_export, vec!["e"]);
        assert_eq!(c.unfinished_here, vec!["d", "f"]);
        assert!(!c.agrees());
    }
}
