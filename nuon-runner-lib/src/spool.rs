//! The on-disk log spool: every line a job writes is on disk before it is
//! shipped, so a control-plane outage or a runner restart loses nothing.
//!
//! One file per attempt, `spool/JOBID-ATTEMPT.log`, append-only, one record
//! a line:
//!
//! - a log line: the stream code ([`LogStream::code`]), the timestamp in
//!   ms, a space, the text. A line's sequence number is its line number,
//!   from 1;
//! - when the attempt has ended, a last record: `R` and the JSON of
//!   [`ResultFile`] (`{"log_lines": N, "result": {...}}`), written after the
//!   last lines and synced to disk with them (one `fdatasync`). Its
//!   presence means no more lines will come; a torn one (no newline) is
//!   no result.
//!
//! Beside it, `JOBID-ATTEMPT.acked`: the shipper's progress, `SEQ OFFSET`
//! (advisory: a restart resumes from there instead of resending
//! everything).
//!
//! The file's name says whose attempt it is. A job costs the disk one file
//! created, one sync and one unlink: the job loop's rate on a disk was
//! bound by the files an attempt made (a directory, a meta file, a result
//! file, each written through a temporary and synced). A directory
//! `spool/JOBID-ATTEMPT/` of that earlier layout (`meta.json`, `lines`,
//! `result.json`, `acked`) is moved to this one when the runner starts.

use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use nuon_core::wire::{LogLine, LogRecords, LogStream, MAX_LOG_LINE_BYTES};
use nuon_core::{JobId, JobResult};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

/// The extension of an attempt's log file.
const LOG: &str = "log";
/// The extension of the shipper's progress beside it.
const ACKED: &str = "acked";
/// The first byte of the record that ends an attempt.
const RESULT: u8 = b'R';

/// How long written lines may wait in memory before they reach the file.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_millis(50);

/// Which attempt a spool file belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Meta {
    pub(crate) job_id: JobId,
    pub(crate) attempt: u32,
}

impl Meta {
    /// The attempt a spool file's name (`JOBID-ATTEMPT.log`) names.
    fn of(path: &Path) -> Option<Meta> {
        let stem = path.file_stem()?.to_str()?;
        let (job, attempt) = stem.rsplit_once('-')?;
        Some(Meta {
            job_id: job.parse().ok()?,
            attempt: attempt.parse().ok()?,
        })
    }
}

/// The end of an attempt, as its last record holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ResultFile {
    pub(crate) log_lines: u64,
    pub(crate) result: JobResult,
}

impl ResultFile {
    /// Reads a result record (`R` and JSON, without its newline).
    fn parse(record: &[u8]) -> io::Result<ResultFile> {
        serde_json::from_slice(&record[1..]).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the attempt's result record is not readable: {e}"),
            )
        })
    }
}

/// The log file of one attempt under the spool root.
pub(crate) fn attempt_path(root: &Path, job: &JobId, attempt: u32) -> PathBuf {
    root.join(format!("{job}-{attempt}.{LOG}"))
}

fn acked_path(log: &Path) -> PathBuf {
    log.with_extension(ACKED)
}

/// The attempt's result, if it has ended: the file's last complete record,
/// when it is a result record.
pub(crate) fn read_result(path: &Path) -> io::Result<Option<ResultFile>> {
    let mut file = File::open(path)?;
    match crate::tail::last_line(&mut file)? {
        // Nothing is written after a result: a torn last line means the
        // writer stopped before it.
        Some((record, true)) if record.first() == Some(&RESULT) => {
            ResultFile::parse(&record).map(Some)
        }
        _ => Ok(None),
    }
}

/// The shipper's saved progress: the highest acknowledged line and the byte
/// offset just after it.
pub(crate) fn read_acked(path: &Path) -> (u64, u64) {
    fs::read_to_string(acked_path(path))
        .ok()
        .and_then(|s| {
            let (seq, off) = s.trim().split_once(' ')?;
            Some((seq.parse().ok()?, off.parse().ok()?))
        })
        .unwrap_or((0, 0))
}

/// Saves the shipper's progress, through a temporary file and a rename.
/// Not synced to disk: losing it to a machine crash costs only a resend of
/// lines the control plane takes again idempotently (an empty or
/// unreadable file reads as no progress).
pub(crate) fn write_acked(path: &Path, seq: u64, offset: u64) -> io::Result<()> {
    let acked = acked_path(path);
    let tmp = acked.with_extension("acked.tmp");
    fs::write(&tmp, format!("{seq} {offset}\n"))?;
    fs::rename(&tmp, acked)
}

/// Removes an attempt's files (after completion, or when it is stale).
pub(crate) fn remove(path: &Path) {
    for file in [path.to_path_buf(), acked_path(path)] {
        if let Err(e) = fs::remove_file(&file)
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(file = %file.display(), error = %e, "cannot remove a spool file");
        }
    }
}

/// Every attempt under the spool root, with whose it is. A directory of
/// the earlier layout is moved to a file first; anything else that is not
/// an attempt's file is reported and skipped.
pub(crate) fn list(root: &Path) -> io::Result<Vec<(PathBuf, Meta)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(root)? {
        let mut path = entry?.path();
        if path.is_dir() {
            match upgrade(&path) {
                Ok(file) => path = file,
                Err(e) => {
                    tracing::warn!(dir = %path.display(), error = %e,
                        "skipping a spool directory of the earlier layout that cannot be moved to a file; remove it by hand if it is not needed");
                    continue;
                }
            }
        }
        let ext = path.extension().and_then(|e| e.to_str());
        if ext == Some("tmp") {
            // A progress file half saved when the runner stopped.
            let _ = fs::remove_file(&path);
            continue;
        }
        match Meta::of(&path) {
            Some(meta) if ext == Some(LOG) => out.push((path, meta)),
            _ if ext == Some(ACKED) => {}
            _ => tracing::warn!(
                file = %path.display(),
                "skipping a file in the spool that is not an attempt's log (JOBID-ATTEMPT.log); remove it by hand if it is not needed"
            ),
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// Moves an attempt's directory of the earlier layout (`meta.json`,
/// `lines`, `result.json`, `acked`) to a log file beside it, and returns
/// the file. The result, if there is one, becomes the file's last record.
fn upgrade(dir: &Path) -> io::Result<PathBuf> {
    // `meta.json` held a [`Meta`].
    let meta: Meta =
        serde_json::from_slice(&fs::read(dir.join("meta.json"))?).map_err(io::Error::other)?;
    let path = attempt_path(dir.parent().unwrap_or(dir), &meta.job_id, meta.attempt);
    let lines = dir.join("lines");
    if !lines.exists() {
        File::create(&lines)?;
    }
    match fs::read(dir.join("result.json")) {
        Ok(result) => {
            let file = ResultFile::parse(&[&[RESULT][..], &result].concat())?;
            let mut w = SpoolWriter::reopen(&lines, Arc::new(Notify::new()))?;
            w.lines = file.log_lines.min(w.lines);
            w.finish(&file.result)?;
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if let Ok(acked) = fs::read(dir.join("acked")) {
        let _ = fs::write(acked_path(&path), acked);
    }
    fs::rename(&lines, &path)?;
    fs::remove_dir_all(dir)?;
    Ok(path)
}

/// Splits `text` into log lines: at newlines, and at character boundaries
/// so that no line is longer than [`MAX_LOG_LINE_BYTES`].
fn split_text(text: &str, mut each: impl FnMut(&str)) {
    for line in text.split('\n') {
        let mut rest = line;
        loop {
            if rest.len() <= MAX_LOG_LINE_BYTES {
                each(rest);
                break;
            }
            let mut cut = MAX_LOG_LINE_BYTES;
            while !rest.is_char_boundary(cut) {
                cut -= 1;
            }
            each(&rest[..cut]);
            rest = &rest[cut..];
        }
    }
}

/// A line kept back from the spool file (see [`SpoolWriter::set_redact`]).
struct Held {
    stream: LogStream,
    ts_ms: i64,
    text: String,
}

/// Appends an attempt's log lines to its spool file.
pub(crate) struct SpoolWriter {
    path: PathBuf,
    file: BufWriter<File>,
    lines: u64,
    dirty: bool,
    last_flush: Instant,
    notify: Arc<Notify>,
    broken: bool,
    /// Finds the job's secrets, in every form, to replace with `***`.
    redactor: nuon_core::redact::Redactor,
    /// While there are secrets to hide, the last line is kept back until
    /// the next one (or a flush): a value a line break splits has a piece
    /// on each side.
    held: Option<Held>,
    /// The last stderr lines of the latest process, redacted.
    stderr_tail: std::collections::VecDeque<String>,
}

impl SpoolWriter {
    /// Replaces each of `values`, in every form one template function
    /// away from it ([`nuon_core::redact::forms`]), with `***` in every line
    /// written from now on, before it reaches the spool file (and so before
    /// it leaves the machine). Every value, whatever its length: the control
    /// plane refuses secrets too short to tell from ordinary text, so a
    /// short one here is a sensitive output, and it is hidden all the same.
    pub(crate) fn set_redact(&mut self, values: &[String]) {
        self.release_held();
        self.redactor = nuon_core::redact::Redactor::new(values);
    }

    /// Creates the log file of a new attempt.
    pub(crate) fn create(root: &Path, meta: &Meta, notify: Arc<Notify>) -> io::Result<Self> {
        let path = attempt_path(root, &meta.job_id, meta.attempt);
        // Fails when the attempt already has a file: never mix two
        // writers in one log.
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)?;
        Ok(Self::new(path, file, 0, notify))
    }

    /// Reopens an attempt whose writer died (the runner restarted, or its
    /// task failed): drops a torn last record and counts the lines.
    pub(crate) fn reopen(path: &Path, notify: Arc<Notify>) -> io::Result<Self> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let mut lines = 0u64;
        let mut complete_len = 0u64;
        let mut pos = 0u64;
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let n = file.read(&mut buf)?;
            if n == 0 {
                break;
            }
            for (i, b) in buf[..n].iter().enumerate() {
                if *b == b'\n' {
                    lines += 1;
                    complete_len = pos + i as u64 + 1;
                }
            }
            pos += n as u64;
        }
        if complete_len < pos {
            file.set_len(complete_len)?;
        }
        file.seek(SeekFrom::End(0))?;
        Ok(Self::new(path.to_path_buf(), file, lines, notify))
    }

    fn new(path: PathBuf, file: File, lines: u64, notify: Arc<Notify>) -> Self {
        SpoolWriter {
            path,
            file: BufWriter::with_capacity(256 * 1024, file),
            lines,
            dirty: false,
            last_flush: Instant::now(),
            notify,
            broken: false,
            redactor: Default::default(),
            held: None,
            stderr_tail: std::collections::VecDeque::new(),
        }
    }

    /// The attempt's log file.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// How many lines were written.
    pub(crate) fn lines(&self) -> u64 {
        self.lines
    }

    fn fail(&mut self, e: &io::Error) {
        if !self.broken {
            tracing::error!(
                file = %self.path.display(),
                error = %e,
                "cannot write the job's log spool; further log lines of this attempt are dropped"
            );
        }
        self.broken = true;
    }

    /// Appends `text` as one or more lines (split at newlines and at
    /// [`MAX_LOG_LINE_BYTES`]), stamped `ts_ms`.
    pub(crate) fn append_at(&mut self, stream: LogStream, ts_ms: i64, text: &str) {
        if self.broken {
            return;
        }
        if self.redactor.is_empty() {
            return self.write_text(stream, ts_ms, text);
        }
        // The held line joins these when it is of the same stream: a value
        // split between them is masked in both.
        let held = self.held.take();
        let joins = held.as_ref().is_some_and(|h| h.stream == stream);
        let mut lines: Vec<std::borrow::Cow<'_, str>> = Vec::new();
        if let Some(h) = held.as_ref().filter(|_| joins) {
            lines.push(std::borrow::Cow::Borrowed(h.text.as_str()));
        } else if let Some(h) = &held {
            self.write_text(h.stream, h.ts_ms, &h.text);
        }
        lines.extend(text.split('\n').map(std::borrow::Cow::Borrowed));
        self.redactor.redact_lines(&mut lines);
        let last = lines.pop().map(std::borrow::Cow::into_owned);
        for (i, line) in lines.iter().enumerate() {
            let ts = match &held {
                Some(h) if joins && i == 0 => h.ts_ms,
                _ => ts_ms,
            };
            self.write_text(stream, ts, line);
        }
        let ts_ms = match &held {
            Some(h) if joins && lines.is_empty() => h.ts_ms,
            _ => ts_ms,
        };
        if let Some(text) = last {
            self.held = Some(Held {
                stream,
                ts_ms,
                text,
            });
            self.dirty = true;
        }
    }

    /// Writes the held line, if any.
    fn release_held(&mut self) {
        if let Some(h) = self.held.take() {
            self.write_text(h.stream, h.ts_ms, &h.text);
        }
    }

    /// Writes `text` (redacted already) as one or more lines.
    fn write_text(&mut self, stream: LogStream, ts_ms: i64, text: &str) {
        if self.broken {
            return;
        }
        let code = stream.code();
        let mut result = Ok(());
        let mut written = 0;
        let keep = stream == LogStream::Stderr;
        let mut kept = Vec::new();
        split_text(text, |line| {
            if result.is_ok() {
                result = writeln!(self.file, "{code}{ts_ms} {line}");
                written += 1;
            }
            if keep {
                kept.push(line.to_owned());
            }
        });
        for line in kept {
            self.remember_stderr(line);
        }
        match result {
            Ok(()) => {
                self.lines += written;
                self.dirty = true;
            }
            Err(e) => self.fail(&e),
        }
    }

    /// Appends raw process output (one line, without its newline), replacing
    /// invalid UTF-8.
    pub(crate) fn append_bytes(&mut self, stream: LogStream, ts_ms: i64, bytes: &[u8]) {
        self.append_at(stream, ts_ms, &String::from_utf8_lossy(bytes));
    }

    /// Appends a block of complete lines of process output, each ending in
    /// a newline, all stamped `ts_ms`. This is the hot path of a chatty job:
    /// the block is checked for UTF-8 once and each line is copied as is;
    /// only lines that are invalid UTF-8 or too long take the slow path.
    pub(crate) fn append_lines(&mut self, stream: LogStream, ts_ms: i64, block: &[u8]) {
        if self.broken || block.is_empty() {
            return;
        }
        debug_assert_eq!(block.last(), Some(&b'\n'));
        let mut block = block;
        if !self.redactor.is_empty() {
            let held = self.held.as_ref().filter(|h| h.stream == stream);
            let held_text = held.map_or("", |h| h.text.as_str());
            if self.redactor.finds_in_block(held_text, block) {
                // The slow path: masked line by line.
                let text = String::from_utf8_lossy(&block[..block.len() - 1]).into_owned();
                return self.append_at(stream, ts_ms, &text);
            }
            // Nothing to hide: the lines go as they are, but for the last,
            // held back for what comes next.
            self.release_held();
            let body = &block[..block.len() - 1];
            let cut = memchr::memrchr(b'\n', body).map_or(0, |i| i + 1);
            self.held = Some(Held {
                stream,
                ts_ms,
                text: String::from_utf8_lossy(&body[cut..]).into_owned(),
            });
            self.dirty = true;
            block = &block[..cut];
            if block.is_empty() {
                return;
            }
        }
        let valid = std::str::from_utf8(block).is_ok();
        let mut prefix = [0u8; 24];
        let prefix = {
            let mut cur = io::Cursor::new(&mut prefix[..]);
            // An i64 and a one-byte code always fit in 24 bytes.
            let _ = write!(cur, "{}{ts_ms} ", stream.code());
            let n = cur.position() as usize;
            &prefix[..n]
        };
        let mut start = 0;
        let mut result = Ok(());
        for end in memchr::memchr_iter(b'\n', block) {
            let line = &block[start..end];
            start = end + 1;
            if valid && line.len() <= MAX_LOG_LINE_BYTES {
                result = self
                    .file
                    .write_all(prefix)
                    .and_then(|()| self.file.write_all(&block[end - line.len()..=end]));
                if result.is_err() {
                    break;
                }
                self.lines += 1;
                if stream == LogStream::Stderr {
                    self.remember_stderr(String::from_utf8_lossy(line).into_owned());
                }
            } else {
                self.write_text(stream, ts_ms, &String::from_utf8_lossy(line));
            }
        }
        match result {
            Ok(()) => self.dirty = true,
            Err(e) => self.fail(&e),
        }
    }

    fn remember_stderr(&mut self, line: String) {
        if self.stderr_tail.len() == nuon_core::STDERR_TAIL_LINES {
            self.stderr_tail.pop_front();
        }
        self.stderr_tail.push_back(line);
    }

    /// The last stderr lines written since the last call, redacted; forgets
    /// them.
    pub(crate) fn take_stderr_tail(&mut self) -> Vec<String> {
        self.release_held();
        self.stderr_tail.drain(..).collect()
    }

    /// Appends a line on the `system` stream and flushes it at once.
    pub(crate) fn system(&mut self, text: &str) {
        self.append_at(LogStream::System, nuon_core::now_ms(), text);
        self.flush();
    }

    /// When the buffered lines must reach the file, if any are buffered.
    pub(crate) fn flush_deadline(&self) -> Option<Instant> {
        self.dirty.then(|| self.last_flush + FLUSH_EVERY)
    }

    /// Flushes if lines have waited [`FLUSH_EVERY`].
    pub(crate) fn maybe_flush(&mut self) {
        if self.dirty && self.last_flush.elapsed() >= FLUSH_EVERY {
            self.flush();
        }
    }

    /// Writes buffered lines to the file and wakes the shipper.
    pub(crate) fn flush(&mut self) {
        self.release_held();
        self.last_flush = Instant::now();
        if !self.dirty {
            return;
        }
        self.dirty = false;
        if let Err(e) = self.file.flush() {
            self.fail(&e);
        }
        self.notify.notify_one();
    }

    /// Stops writing: lines appended after this are dropped. Returns the
    /// file and how many lines were written.
    pub(crate) fn close(&mut self) -> (PathBuf, u64) {
        self.flush();
        self.broken = true;
        (self.path.clone(), self.lines)
    }

    /// Ends the attempt: appends the result record after the lines and
    /// syncs them to disk together. Lines appended after this are dropped
    /// (they could not be shipped: the result counts the lines).
    pub(crate) fn finish(&mut self, result: &JobResult) -> io::Result<()> {
        self.flush();
        if !self.broken {
            tracing::debug!(file = %self.path.display(), "spool finished; later lines are dropped");
        }
        self.broken = true;
        let mut record = vec![RESULT];
        serde_json::to_writer(
            &mut record,
            &ResultFile {
                log_lines: self.lines,
                result: result.clone(),
            },
        )
        .map_err(io::Error::other)?;
        record.push(b'\n');
        self.file.write_all(&record)?;
        self.file.flush()?;
        self.file.get_ref().sync_data()?;
        self.notify.notify_one();
        Ok(())
    }
}

/// A [`SpoolWriter`] shared by the threads that drain a job's pipes and
/// the task that runs the job.
#[derive(Clone)]
pub(crate) struct SharedSpool(Arc<Mutex<SpoolWriter>>);

impl SharedSpool {
    pub(crate) fn new(writer: SpoolWriter) -> Self {
        SharedSpool(Arc::new(Mutex::new(writer)))
    }

    /// The writer. A thread that panicked while holding it left at worst a
    /// line half in the buffer: keep using it.
    pub(crate) fn lock(&self) -> MutexGuard<'_, SpoolWriter> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Parses one record of the `lines` file (without its newline).
fn parse_record(raw: &[u8]) -> LogLine {
    let text = String::from_utf8_lossy(raw);
    let parsed = (|| {
        let mut chars = text.chars();
        let stream = LogStream::from_code(chars.next()?)?;
        let rest = chars.as_str();
        let (ts, msg) = rest.split_once(' ')?;
        Some(LogLine {
            stream,
            ts_ms: ts.parse().ok()?,
            text: msg.to_owned(),
        })
    })();
    parsed.unwrap_or_else(|| LogLine {
        stream: LogStream::System,
        ts_ms: nuon_core::now_ms(),
        text: format!("<unreadable spool record> {text}"),
    })
}

/// A line read back from the spool.
#[cfg(test)]
#[derive(Debug, Clone)]
pub(crate) struct SpooledLine {
    /// Its sequence number.
    pub(crate) seq: u64,
    /// The line.
    pub(crate) line: LogLine,
}

/// Reads an attempt's lines back, in order, from some position on; lines
/// still being written (no newline yet) are left for a later read.
pub(crate) struct SpoolReader {
    file: BufReader<File>,
    partial: Vec<u8>,
    next_seq: u64,
    offset: u64,
    /// The attempt's result, once the reader has reached it: nothing
    /// follows.
    result: Option<ResultFile>,
}

impl SpoolReader {
    /// Opens an attempt's log file positioned just after line `after_seq`,
    /// which ends at byte `offset` if the caller knows it (0 otherwise).
    pub(crate) fn open(path: &Path, after_seq: u64, offset: u64) -> io::Result<Self> {
        let mut file = File::open(path)?;
        let len = file.metadata()?.len();
        let trusted = after_seq > 0 && offset > 0 && offset <= len && {
            let mut b = [0u8; 1];
            file.seek(SeekFrom::Start(offset - 1))?;
            file.read_exact(&mut b)?;
            b[0] == b'\n'
        };
        let mut reader = SpoolReader {
            file: BufReader::with_capacity(256 * 1024, file),
            partial: Vec::new(),
            next_seq: 1,
            offset: 0,
            result: None,
        };
        if trusted {
            reader.file.seek(SeekFrom::Start(offset))?;
            reader.next_seq = after_seq + 1;
            reader.offset = offset;
        } else {
            reader.file.seek(SeekFrom::Start(0))?;
            reader.skip_to(after_seq)?;
        }
        Ok(reader)
    }

    /// Skips lines until the next one read is `after_seq + 1` (or the end
    /// of what is written).
    pub(crate) fn skip_to(&mut self, after_seq: u64) -> io::Result<()> {
        while self.next_seq <= after_seq {
            if self.next_raw()?.is_none() {
                break;
            }
        }
        Ok(())
    }

    /// The sequence number the next line read will have.
    pub(crate) fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// The byte offset after the last complete line read.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// The attempt's result, once every line before it is read.
    pub(crate) fn result(&self) -> Option<&ResultFile> {
        self.result.as_ref()
    }

    /// Reads the rest of a record into `partial`; whether a complete line
    /// record is there (`false` at the end of what is written, or at the
    /// result record, which is taken).
    fn read_record(&mut self) -> io::Result<bool> {
        if self.result.is_some() {
            return Ok(false);
        }
        let n = self.file.read_until(b'\n', &mut self.partial)?;
        if n == 0 || self.partial.last() != Some(&b'\n') {
            return Ok(false);
        }
        if self.partial[0] == RESULT {
            let record = std::mem::take(&mut self.partial);
            self.result = Some(ResultFile::parse(&record[..record.len() - 1])?);
            return Ok(false);
        }
        Ok(true)
    }

    /// The next complete record with its newline, if one is written.
    fn next_raw(&mut self) -> io::Result<Option<Vec<u8>>> {
        if !self.read_record()? {
            return Ok(None);
        }
        self.offset += self.partial.len() as u64;
        self.next_seq += 1;
        Ok(Some(std::mem::take(&mut self.partial)))
    }

    /// Appends the complete records that are read ahead, up to `max_lines`
    /// and `max_bytes` (at least one), to `out`, and the byte offset just
    /// after each to `ends`; how many. The records are checked in bulk (one
    /// pass for UTF-8, one for newlines), so a chatty job's log is not read
    /// back a line at a time; a damaged record, or one that straddles the
    /// read-ahead buffer, goes through [`Self::next_into`].
    pub(crate) fn next_run_into(
        &mut self,
        out: &mut LogRecords,
        ends: &mut VecDeque<u64>,
        max_lines: usize,
        max_bytes: usize,
    ) -> io::Result<usize> {
        if max_lines == 0 || self.result.is_some() {
            return Ok(0);
        }
        if self.partial.is_empty() {
            let buf = self.file.fill_buf()?;
            let first = ends.len();
            let mut take = 0;
            for nl in memchr::memchr_iter(b'\n', buf) {
                if ends.len() - first == max_lines
                    || (take > 0 && nl + 1 > max_bytes)
                    || buf[take] == RESULT
                {
                    break;
                }
                take = nl + 1;
                ends.push_back(self.offset + take as u64);
            }
            let good = match out.push_records(&buf[..take]) {
                Ok(()) => take,
                // Take the records before the damaged one; it goes the
                // slow way below.
                Err(e) => {
                    ends.truncate(first + e.index);
                    let good = ends
                        .range(first..)
                        .last()
                        .map_or(0, |end| (end - self.offset) as usize);
                    if good > 0 && out.push_records(&buf[..good]).is_ok() {
                        good
                    } else {
                        ends.truncate(first);
                        0
                    }
                }
            };
            if good > 0 {
                let lines = ends.len() - first;
                self.file.consume(good);
                self.offset += good as u64;
                self.next_seq += lines as u64;
                return Ok(lines);
            }
        }
        match self.next_into(out)? {
            Some(end) => {
                ends.push_back(end);
                Ok(1)
            }
            None => Ok(0),
        }
    }

    /// Appends the next complete record to `out`, if one is written, and
    /// returns the byte offset just after it. A record that is not valid
    /// (the file was damaged) goes out as a `system` line saying so, so
    /// sequence numbers stay the line numbers of the file.
    pub(crate) fn next_into(&mut self, out: &mut LogRecords) -> io::Result<Option<u64>> {
        if !self.read_record()? {
            return Ok(None);
        }
        if out.push_record(&self.partial).is_err() {
            let line = parse_record(&self.partial[..self.partial.len() - 1]);
            let mut cut = line.text.len().min(MAX_LOG_LINE_BYTES);
            while !line.text.is_char_boundary(cut) {
                cut -= 1;
            }
            if out
                .push(line.stream, line.ts_ms, &line.text[..cut])
                .is_err()
            {
                // Cannot happen (the text is cut and has no newline); keep
                // the numbering anyway.
                let _ = out.push(LogStream::System, line.ts_ms, "<unreadable spool record>");
            }
        }
        self.offset += self.partial.len() as u64;
        self.next_seq += 1;
        self.partial.clear();
        Ok(Some(self.offset))
    }

    /// The next complete line, if one is written.
    #[cfg(test)]
    pub(crate) fn next_line(&mut self) -> io::Result<Option<SpooledLine>> {
        let Some(raw) = self.next_raw()? else {
            return Ok(None);
        };
        let line = parse_record(&raw[..raw.len() - 1]);
        Ok(Some(SpooledLine {
            seq: self.next_seq - 1,
            line,
        }))
    }
}

#[cfg(test)]
mod tests {
    use nuon_core::Outcome;

    use super::*;

    fn meta() -> Meta {
        Meta {
            job_id: JobId::generate(),
            attempt: 2,
        }
    }

    fn read_all(path: &Path, after: u64, offset: u64) -> Vec<(u64, LogLine)> {
        let mut r = SpoolReader::open(path, after, offset).unwrap();
        let mut out = Vec::new();
        while let Some(l) = r.next_line().unwrap() {
            out.push((l.seq, l.line));
        }
        out
    }

    #[test]
    fn lines_round_trip_split_and_resume() {
        let root = tempfile::tempdir().unwrap();
        let m = meta();
        let mut w = SpoolWriter::create(root.path(), &m, Arc::new(Notify::new())).unwrap();
        w.append_at(LogStream::Stdout, 5, "one");
        w.append_at(LogStream::Stderr, 6, "two\nthree");
        w.append_at(LogStream::Stdout, 7, "");
        let long = "é".repeat(MAX_LOG_LINE_BYTES); // twice the limit in bytes
        w.append_at(LogStream::Stdout, 8, &long);
        w.append_bytes(LogStream::Stdout, 9, b"bad \xff utf8 \r");
        w.system("refused");
        let path = w.path().to_path_buf();
        assert_eq!(Meta::of(&path), Some(m));
        assert_eq!(read_result(&path).unwrap(), None);
        w.flush();
        let lines = read_all(&path, 0, 0);
        let texts: Vec<_> = lines.iter().map(|(_, l)| l.text.as_str()).collect();
        assert_eq!(texts.len(), 8);
        assert_eq!(texts[..4], ["one", "two", "three", ""]);
        assert!(texts[4].len() <= MAX_LOG_LINE_BYTES && texts[5].len() <= MAX_LOG_LINE_BYTES);
        assert_eq!(format!("{}{}", texts[4], texts[5]), long);
        assert_eq!(texts[6], "bad \u{fffd} utf8 \r");
        assert_eq!(lines[7].1.stream, LogStream::System);
        assert_eq!(lines[1].1.stream, LogStream::Stderr);
        assert_eq!(lines[0].1.ts_ms, 5);
        let seqs: Vec<_> = lines.iter().map(|(s, _)| *s).collect();
        assert_eq!(seqs, (1..=8).collect::<Vec<_>>());

        // Resume after line 3, by scanning and by a saved offset.
        let mut r = SpoolReader::open(&path, 3, 0).unwrap();
        assert_eq!(r.next_seq(), 4);
        let off = r.offset();
        assert_eq!(r.next_line().unwrap().unwrap().line.text, "");
        assert_eq!(read_all(&path, 3, off)[0].0, 4);
        // A wrong offset is not trusted.
        assert_eq!(read_all(&path, 3, off + 1)[0].0, 4);

        w.finish(&JobResult::failed("x")).unwrap();
        let res = read_result(&path).unwrap().unwrap();
        assert_eq!(res.log_lines, 8);
        assert_eq!(res.result.outcome, Outcome::Failed);
        // A reader stops at the result record, in bulk as line by line,
        // and holds the result: nothing comes after it.
        w.append_at(LogStream::Stdout, 10, "after the end");
        w.flush();
        assert_eq!(read_all(&path, 0, 0).len(), 8);
        let mut r = SpoolReader::open(&path, 0, 0).unwrap();
        let (mut out, mut ends) = (LogRecords::new(), VecDeque::new());
        let mut n = 0;
        loop {
            let got = r
                .next_run_into(&mut out, &mut ends, 100, usize::MAX)
                .unwrap();
            if got == 0 {
                break;
            }
            n += got;
        }
        assert_eq!(n, 8);
        assert_eq!(r.result().unwrap().log_lines, 8);
        assert_eq!(r.next_seq(), 9);
        // The one file of the attempt, and the one sync: the result
        // record is the file's last line.
        let raw = fs::read(&path).unwrap();
        assert_eq!(raw.iter().filter(|b| **b == b'\n').count(), 9);
        assert_eq!(fs::read_dir(root.path()).unwrap().count(), 1);
    }

    #[test]
    fn secrets_are_redacted_before_they_reach_the_spool() {
        let root = tempfile::tempdir().unwrap();
        let mut w = SpoolWriter::create(root.path(), &meta(), Arc::new(Notify::new())).unwrap();
        w.set_redact(&["hunter22".into(), "hunter22-long".into(), "abc".into()]);
        w.append_lines(
            LogStream::Stdout,
            1,
            b"plain\npw=hunter22 and hunter22-long\nabc goes too\n",
        );
        w.append_at(LogStream::Stderr, 2, "again hunter22");
        w.system("system hunter22-long");
        let path = w.path().to_path_buf();
        w.flush();
        let got: Vec<String> = read_all(&path, 0, 0)
            .into_iter()
            .map(|(_, l)| l.text)
            .collect();
        assert_eq!(
            got,
            [
                "plain",
                "pw=*** and ***",
                "*** goes too",
                "again ***",
                "system ***"
            ]
        );
        let raw = std::fs::read_to_string(&path).unwrap();
        assert!(!raw.contains("hunter22"), "{raw}");
    }

    #[test]
    fn encoded_and_split_secrets_are_redacted_across_writes() {
        use base64::Engine as _;
        let root = tempfile::tempdir().unwrap();
        let mut w = SpoolWriter::create(root.path(), &meta(), Arc::new(Notify::new())).unwrap();
        let secret = "db-Passw0rd-4f9a1c";
        w.set_redact(&[secret.into()]);
        let b64 = base64::engine::general_purpose::STANDARD.encode(secret);
        let upper = secret.to_uppercase();
        let hex = hex::encode(secret);
        w.append_lines(
            LogStream::Stdout,
            1,
            format!("b64 {b64}\nup {upper}\nhex {hex}\nwrapped db-Pass\n").as_bytes(),
        );
        // The rest of the wrapped value comes in the next read of the pipe.
        w.append_lines(LogStream::Stdout, 2, b"w0rd-4f9a1c end\nplain\n");
        w.append_at(LogStream::Stderr, 3, "other stream");
        let path = w.path().to_path_buf();
        w.flush();
        let got: Vec<String> = read_all(&path, 0, 0)
            .into_iter()
            .map(|(_, l)| l.text)
            .collect();
        assert_eq!(
            got,
            [
                "b64 ***",
                "up ***",
                "hex ***",
                "wrapped ***",
                "*** end",
                "plain",
                "other stream"
            ]
        );
    }

    #[test]
    fn blocks_of_lines_take_the_fast_path_and_keep_the_slow_cases() {
        let root = tempfile::tempdir().unwrap();
        let mut w = SpoolWriter::create(root.path(), &meta(), Arc::new(Notify::new())).unwrap();
        w.append_lines(LogStream::Stdout, 11, b"a\n\nb c\r\n");
        let long = "x".repeat(MAX_LOG_LINE_BYTES + 5);
        w.append_lines(LogStream::Stderr, -3, format!("{long}\nok\n").as_bytes());
        w.append_lines(LogStream::Stdout, 12, b"bad \xff\nfine\n");
        w.append_lines(LogStream::Stdout, 13, b"");
        assert_eq!(w.lines(), 8);
        let path = w.path().to_path_buf();
        w.flush();
        let lines = read_all(&path, 0, 0);
        let got: Vec<_> = lines
            .iter()
            .map(|(s, l)| {
                // Long lines by their length.
                let t = &l.text;
                let t = if t.len() > 20 {
                    t.len().to_string()
                } else {
                    t.clone()
                };
                (*s, l.stream, l.ts_ms, t)
            })
            .collect();
        let o = LogStream::Stdout;
        let e = LogStream::Stderr;
        let n = |s: &str| s.to_owned();
        assert_eq!(
            got,
            vec![
                (1, o, 11, n("a")),
                (2, o, 11, n("")),
                (3, o, 11, n("b c\r")),
                (4, e, -3, MAX_LOG_LINE_BYTES.to_string()),
                (5, e, -3, n("xxxxx")),
                (6, e, -3, n("ok")),
                (7, o, 12, n("bad \u{fffd}")),
                (8, o, 12, n("fine")),
            ]
        );
    }

    #[test]
    fn partial_records_wait_and_torn_tails_are_dropped_on_reopen() {
        let root = tempfile::tempdir().unwrap();
        let m = meta();
        let w = SpoolWriter::create(root.path(), &m, Arc::new(Notify::new())).unwrap();
        let path = w.path().to_path_buf();
        drop(w);
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"o1 first\no2 sec").unwrap();
        let mut r = SpoolReader::open(&path, 0, 0).unwrap();
        assert_eq!(r.next_line().unwrap().unwrap().line.text, "first");
        assert!(r.next_line().unwrap().is_none());
        f.write_all(b"ond\n").unwrap();
        assert_eq!(r.next_line().unwrap().unwrap().line.text, "second");
        f.write_all(b"o3 torn").unwrap();
        assert_eq!(read_result(&path).unwrap(), None);

        let mut w = SpoolWriter::reopen(&path, Arc::new(Notify::new())).unwrap();
        assert_eq!(w.lines(), 2);
        w.system("runner restarted");
        w.finish(&JobResult::failed("restarted")).unwrap();
        let texts: Vec<_> = read_all(&path, 0, 0)
            .into_iter()
            .map(|(_, l)| l.text)
            .collect();
        assert_eq!(texts, ["first", "second", "runner restarted"]);
        assert_eq!(read_result(&path).unwrap().unwrap().log_lines, 3);
    }

    #[test]
    fn acked_progress_and_listing() {
        let root = tempfile::tempdir().unwrap();
        let m = meta();
        let w = SpoolWriter::create(root.path(), &m, Arc::new(Notify::new())).unwrap();
        let path = w.path().to_path_buf();
        assert_eq!(read_acked(&path), (0, 0));
        write_acked(&path, 7, 120).unwrap();
        assert_eq!(read_acked(&path), (7, 120));
        fs::write(root.path().join("junk"), "").unwrap();
        fs::write(root.path().join("job_x-1.log"), "").unwrap();
        fs::write(root.path().join("a.acked.tmp"), "").unwrap();
        let listed = list(root.path()).unwrap();
        assert_eq!(listed, vec![(path.clone(), m)]);
        assert!(!root.path().join("a.acked.tmp").exists());
        remove(&path);
        assert!(!path.exists() && !acked_path(&path).exists());
    }

    /// A directory an earlier runner left (`meta.json`, `lines`,
    /// `result.json`, `acked`) becomes an attempt's file, its result the
    /// last record; one without a result stays unfinished.
    #[test]
    fn directories_of_the_earlier_layout_are_moved_to_files() {
        let root = tempfile::tempdir().unwrap();
        let (ended, running) = (meta(), meta());
        for (m, result) in [(&ended, true), (&running, false)] {
            let dir = root.path().join(format!("{}-{}", m.job_id, m.attempt));
            fs::create_dir(&dir).unwrap();
            fs::write(dir.join("meta.json"), serde_json::to_vec(m).unwrap()).unwrap();
            fs::write(dir.join("lines"), "o1 one\no2 two\no3 tor").unwrap();
            fs::write(dir.join("acked"), "1 7\n").unwrap();
            if result {
                let r = serde_json::json!({"log_lines": 2, "result": JobResult::failed("x")});
                fs::write(dir.join("result.json"), r.to_string()).unwrap();
            }
        }
        let listed = list(root.path()).unwrap();
        assert_eq!(listed.len(), 2);
        for (path, m) in &listed {
            assert_eq!(path.extension().unwrap(), LOG);
            assert_eq!(read_acked(path), (1, 7));
            let texts: Vec<_> = read_all(path, 0, 0)
                .into_iter()
                .map(|(_, l)| l.text)
                .collect();
            let result = read_result(path).unwrap();
            if *m == ended {
                assert_eq!(texts, ["one", "two"]);
                assert_eq!(result.unwrap().log_lines, 2);
            } else {
                assert_eq!(texts, ["one", "two"], "the torn tail waits for reopen");
                assert!(result.is_none());
            }
        }
        let dirs = fs::read_dir(root.path())
            .unwrap()
            .flatten()
            .filter(|e| e.path().is_dir())
            .count();
        assert_eq!(dirs, 0);
    }

    #[test]
    fn runs_are_read_in_bulk_around_damage_and_budgets() {
        let root = tempfile::tempdir().unwrap();
        let path = root.path().join("a.log");
        // 3 good records, a damaged one, a record longer than the reader's
        // read-ahead buffer (it straddles it), 2 good ones, a partial tail.
        let long = format!("o4 {}\n", "x".repeat(300 * 1024));
        let mut bytes = b"o1 a\ne2 b\no3 c\nz bad\n".to_vec();
        bytes.extend_from_slice(long.as_bytes());
        bytes.extend_from_slice(b"o5 d\no6 e\no7 tai");
        fs::write(&path, &bytes).unwrap();
        let mut r = SpoolReader::open(&path, 0, 0).unwrap();
        let mut out = LogRecords::new();
        let mut ends = VecDeque::new();
        // A line budget of 2 stops the first run early.
        assert_eq!(
            r.next_run_into(&mut out, &mut ends, 2, usize::MAX).unwrap(),
            2
        );
        // The rest of the good run, then the damaged record alone.
        assert_eq!(
            r.next_run_into(&mut out, &mut ends, 100, usize::MAX)
                .unwrap(),
            1
        );
        assert_eq!(
            r.next_run_into(&mut out, &mut ends, 100, usize::MAX)
                .unwrap(),
            1
        );
        // A byte budget smaller than a record still takes one.
        let mut total = 0;
        while total < 3 {
            let n = r.next_run_into(&mut out, &mut ends, 100, 1).unwrap();
            assert!(n == 1, "{n}");
            total += n;
        }
        assert_eq!(
            r.next_run_into(&mut out, &mut ends, 100, usize::MAX)
                .unwrap(),
            0
        );
        assert_eq!(r.next_seq(), 8);
        let lines: Vec<_> = out
            .iter()
            .map(|l| (l.stream, l.ts_ms, l.text.len()))
            .collect();
        assert_eq!(
            &lines[..3],
            [
                (LogStream::Stdout, 1, 1),
                (LogStream::Stderr, 2, 1),
                (LogStream::Stdout, 3, 1)
            ]
        );
        let bad = out.iter().nth(3).unwrap();
        assert_eq!(bad.stream, LogStream::System);
        assert!(bad.text.contains("unreadable spool record"), "{}", bad.text);
        assert_eq!(out.len(), 7);
        // Each end is the offset just after its record in the file.
        let want: Vec<u64> = bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i as u64 + 1)
            .collect();
        assert_eq!(ends.iter().copied().collect::<Vec<_>>(), want);
        assert_eq!(r.offset(), want[6]);
        // The tail is taken once it is complete.
        let mut f = OpenOptions::new().append(true).open(&path).unwrap();
        f.write_all(b"l\n").unwrap();
        assert_eq!(
            r.next_run_into(&mut out, &mut ends, 100, usize::MAX)
                .unwrap(),
            1
        );
        assert_eq!(out.iter().last().unwrap().text, "tail");
    }

    #[test]
    fn bad_records_become_system_lines() {
        let line = parse_record(b"zzz");
        assert_eq!(line.stream, LogStream::System);
        assert!(line.text.contains("zzz"));
        let line = parse_record(b"e-5 x y");
        assert_eq!(
            (line.stream, line.ts_ms, line.text.as_str()),
            (LogStream::Stderr, -5, "x y")
        );
    }
}
