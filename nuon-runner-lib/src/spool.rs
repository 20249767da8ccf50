//! The on-disk log spool: every line a job writes is on disk before it is
//! shipped, so a control-plane outage or a runner restart loses nothing.
//!
//! One directory per attempt, `spool/JOBID-ATTEMPT/`:
//!
//! - `meta.json`: `{"job_id": "...", "attempt": N}`;
//! - `lines`: append-only, one record a line: the stream code
//!   ([`LogStream::code`]), the timestamp in ms, a space, the text. A line's
//!   sequence number is its line number, from 1;
//! - `acked`: the shipper's progress, `SEQ OFFSET` (advisory: a restart
//!   resumes from there instead of resending everything);
//! - `result.json`: `{"log_lines": N, "result": {...}}`, written atomically
//!   when the attempt ends. Its presence means no more lines will come.

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

const META: &str = "meta.json";
const LINES: &str = "lines";
const ACKED: &str = "acked";
const RESULT: &str = "result.json";

/// How long written lines may wait in memory before they reach the file.
pub(crate) const FLUSH_EVERY: Duration = Duration::from_millis(50);

/// Which attempt a spool directory belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Meta {
    pub(crate) job_id: JobId,
    pub(crate) attempt: u32,
}

/// The end of an attempt, as `result.json` holds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct ResultFile {
    pub(crate) log_lines: u64,
    pub(crate) result: JobResult,
}

/// The directory of one attempt under the spool root.
pub(crate) fn attempt_dir(root: &Path, job: &JobId, attempt: u32) -> PathBuf {
    root.join(format!("{job}-{attempt}"))
}

/// Writes `bytes` to `dir/name` through a temporary file and a rename, so
/// readers see the old content or the new, never a part, even after a
/// power loss.
fn write_atomic(dir: &Path, name: &str, bytes: &[u8]) -> io::Result<()> {
    write_renamed(dir, name, bytes, true)
}

/// [`write_atomic`], with the data synced to disk before the rename only
/// when `durable`: without it, a crash of the machine (not of the process)
/// may leave the file empty.
fn write_renamed(dir: &Path, name: &str, bytes: &[u8], durable: bool) -> io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let mut f = File::create(&tmp)?;
    f.write_all(bytes)?;
    if durable {
        f.sync_data()?;
    }
    fs::rename(&tmp, dir.join(name))
}

/// Reads `meta.json` of an attempt directory.
pub(crate) fn read_meta(dir: &Path) -> io::Result<Meta> {
    let bytes = fs::read(dir.join(META))?;
    serde_json::from_slice(&bytes).map_err(io::Error::other)
}

/// Reads `result.json`, if the attempt has ended.
pub(crate) fn read_result(dir: &Path) -> io::Result<Option<ResultFile>> {
    match fs::read(dir.join(RESULT)) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(io::Error::other),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The shipper's saved progress: the highest acknowledged line and the byte
/// offset just after it.
pub(crate) fn read_acked(dir: &Path) -> (u64, u64) {
    fs::read_to_string(dir.join(ACKED))
        .ok()
        .and_then(|s| {
            let (seq, off) = s.trim().split_once(' ')?;
            Some((seq.parse().ok()?, off.parse().ok()?))
        })
        .unwrap_or((0, 0))
}

/// Saves the shipper's progress. Not synced to disk: it is written at
/// every acknowledgement, and losing it to a machine crash costs only a
/// resend of lines the control plane takes again idempotently (an empty or
/// unreadable file reads as no progress).
pub(crate) fn write_acked(dir: &Path, seq: u64, offset: u64) -> io::Result<()> {
    write_renamed(dir, ACKED, format!("{seq} {offset}\n").as_bytes(), false)
}

/// Removes an attempt's directory (after completion, or when it is stale).
pub(crate) fn remove(dir: &Path) {
    if let Err(e) = fs::remove_dir_all(dir)
        && e.kind() != io::ErrorKind::NotFound
    {
        tracing::warn!(dir = %dir.display(), error = %e, "cannot remove spool directory");
    }
}

/// Every attempt directory under the spool root, with its meta. Directories
/// without a readable `meta.json` are reported and skipped.
pub(crate) fn list(root: &Path) -> io::Result<Vec<(PathBuf, Meta)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(root)? {
        let path = entry?.path();
        if !path.is_dir() {
            continue;
        }
        match read_meta(&path) {
            Ok(meta) => out.push((path, meta)),
            Err(e) => tracing::warn!(
                dir = %path.display(),
                error = %e,
                "skipping spool directory without a readable meta.json; remove it by hand if it is not needed"
            ),
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
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
    dir: PathBuf,
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

    /// Creates the directory of a new attempt.
    pub(crate) fn create(root: &Path, meta: &Meta, notify: Arc<Notify>) -> io::Result<Self> {
        let dir = attempt_dir(root, &meta.job_id, meta.attempt);
        // Fails when the attempt already has a directory: never mix two
        // writers in one log.
        fs::create_dir(&dir)?;
        let file = File::create(dir.join(LINES))?;
        write_atomic(
            &dir,
            META,
            &serde_json::to_vec(meta).map_err(io::Error::other)?,
        )?;
        Ok(Self::new(dir, file, 0, notify))
    }

    /// Reopens an attempt whose writer died (the runner restarted, or its
    /// task failed): drops a torn last record and counts the lines.
    pub(crate) fn reopen(dir: &Path, notify: Arc<Notify>) -> io::Result<Self> {
        let path = dir.join(LINES);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
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
        Ok(Self::new(dir.to_path_buf(), file, lines, notify))
    }

    fn new(dir: PathBuf, file: File, lines: u64, notify: Arc<Notify>) -> Self {
        SpoolWriter {
            dir,
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

    /// The attempt's directory.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir
    }

    /// How many lines were written.
    pub(crate) fn lines(&self) -> u64 {
        self.lines
    }

    fn fail(&mut self, e: &io::Error) {
        if !self.broken {
            tracing::error!(
                dir = %self.dir.display(),
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
    /// directory and how many lines were written.
    pub(crate) fn close(&mut self) -> (PathBuf, u64) {
        self.flush();
        self.broken = true;
        (self.dir.clone(), self.lines)
    }

    /// Ends the attempt: flushes the lines to disk and writes `result.json`.
    /// Lines appended after this are dropped (they could not be shipped: the
    /// result counts the lines).
    pub(crate) fn finish(&mut self, result: &JobResult) -> io::Result<()> {
        self.dirty = true;
        self.flush();
        if !self.broken {
            tracing::debug!(dir = %self.dir.display(), "spool finished; later lines are dropped");
        }
        self.broken = true;
        self.file.get_ref().sync_data()?;
        let file = ResultFile {
            log_lines: self.lines,
            result: result.clone(),
        };
        let bytes = serde_json::to_vec(&file).map_err(io::Error::other)?;
        write_atomic(&self.dir, RESULT, &bytes)?;
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
}

impl SpoolReader {
    /// Opens the lines file positioned just after line `after_seq`, which
    /// ends at byte `offset` if the caller knows it (0 otherwise).
    pub(crate) fn open(dir: &Path, after_seq: u64, offset: u64) -> io::Result<Self> {
        let mut file = File::open(dir.join(LINES))?;
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

    /// The next complete record with its newline, if one is written.
    fn next_raw(&mut self) -> io::Result<Option<Vec<u8>>> {
        let n = self.file.read_until(b'\n', &mut self.partial)?;
        if n == 0 || self.partial.last() != Some(&b'\n') {
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
        if max_lines == 0 {
            return Ok(0);
        }
        if self.partial.is_empty() {
            let buf = self.file.fill_buf()?;
            let first = ends.len();
            let mut take = 0;
            for nl in memchr::memchr_iter(b'\n', buf) {
                if ends.len() - first == max_lines || (take > 0 && nl + 1 > max_bytes) {
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
        let n = self.file.read_until(b'\n', &mut self.partial)?;
        if n == 0 || self.partial.last() != Some(&b'\n') {
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

    fn read_all(dir: &Path, after: u64, offset: u64) -> Vec<(u64, LogLine)> {
        let mut r = SpoolReader::open(dir, after, offset).unwrap();
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
        let dir = w.dir().to_path_buf();
        assert_eq!(read_meta(&dir).unwrap(), m);
        assert_eq!(read_result(&dir).unwrap(), None);
        w.flush();
        let lines = read_all(&dir, 0, 0);
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
        let mut r = SpoolReader::open(&dir, 3, 0).unwrap();
        assert_eq!(r.next_seq(), 4);
        let off = r.offset();
        assert_eq!(r.next_line().unwrap().unwrap().line.text, "");
        assert_eq!(read_all(&dir, 3, off)[0].0, 4);
        // A wrong offset is not trusted.
        assert_eq!(read_all(&dir, 3, off + 1)[0].0, 4);

        w.finish(&JobResult::failed("x")).unwrap();
        let res = read_result(&dir).unwrap().unwrap();
        assert_eq!(res.log_lines, 8);
        assert_eq!(res.result.outcome, Outcome::Failed);
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
        let dir = w.dir().to_path_buf();
        w.flush();
        let got: Vec<String> = read_all(&dir, 0, 0)
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
        let raw = std::fs::read_to_string(dir.join(LINES)).unwrap();
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
        let dir = w.dir().to_path_buf();
        w.flush();
        let got: Vec<String> = read_all(&dir, 0, 0)
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
        let dir = w.dir().to_path_buf();
        w.flush();
        let lines = read_all(&dir, 0, 0);
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
        let dir = w.dir().to_path_buf();
        drop(w);
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.join(LINES))
            .unwrap();
        f.write_all(b"o1 first\no2 sec").unwrap();
        let mut r = SpoolReader::open(&dir, 0, 0).unwrap();
        assert_eq!(r.next_line().unwrap().unwrap().line.text, "first");
        assert!(r.next_line().unwrap().is_none());
        f.write_all(b"ond\n").unwrap();
        assert_eq!(r.next_line().unwrap().unwrap().line.text, "second");
        f.write_all(b"o3 torn").unwrap();

        let mut w = SpoolWriter::reopen(&dir, Arc::new(Notify::new())).unwrap();
        assert_eq!(w.lines(), 2);
        w.system("runner restarted");
        w.finish(&JobResult::failed("restarted")).unwrap();
        let texts: Vec<_> = read_all(&dir, 0, 0)
            .into_iter()
            .map(|(_, l)| l.text)
            .collect();
        assert_eq!(texts, ["first", "second", "runner restarted"]);
        assert_eq!(read_result(&dir).unwrap().unwrap().log_lines, 3);
    }

    #[test]
    fn acked_progress_and_listing() {
        let root = tempfile::tempdir().unwrap();
        let m = meta();
        let w = SpoolWriter::create(root.path(), &m, Arc::new(Notify::new())).unwrap();
        let dir = w.dir().to_path_buf();
        assert_eq!(read_acked(&dir), (0, 0));
        write_acked(&dir, 7, 120).unwrap();
        assert_eq!(read_acked(&dir), (7, 120));
        fs::create_dir(root.path().join("junk")).unwrap();
        let listed = list(root.path()).unwrap();
        assert_eq!(listed, vec![(dir.clone(), m)]);
        remove(&dir);
        assert!(!dir.exists());
    }

    #[test]
    fn runs_are_read_in_bulk_around_damage_and_budgets() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("a");
        fs::create_dir(&dir).unwrap();
        // 3 good records, a damaged one, a record longer than the reader's
        // read-ahead buffer (it straddles it), 2 good ones, a partial tail.
        let long = format!("o4 {}\n", "x".repeat(300 * 1024));
        let mut bytes = b"o1 a\ne2 b\no3 c\nz bad\n".to_vec();
        bytes.extend_from_slice(long.as_bytes());
        bytes.extend_from_slice(b"o5 d\no6 e\no7 tai");
        fs::write(dir.join(LINES), &bytes).unwrap();
        let mut r = SpoolReader::open(&dir, 0, 0).unwrap();
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
        let mut f = OpenOptions::new()
            .append(true)
            .open(dir.join(LINES))
            .unwrap();
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
