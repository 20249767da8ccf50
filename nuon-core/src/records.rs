//! Log lines in the record format, the one encoding of a job's log from the
//! runner's spool to the control plane's store.
//!
//! One record a line: the stream code ([`LogStream::code`]), the timestamp in
//! milliseconds since the Unix epoch, one space, the text, a newline:
//!
//! ```text
//! o1763800000000 Apply complete! Resources: 3 added, 0 changed, 0 destroyed.
//! e1763800000004 warning: provider is deprecated
//! ```
//!
//! The runner appends records to its spool as the job prints, ships runs of
//! them as they are (`POST /v1/runner/jobs/{id}/logs` with the
//! [`LOG_RECORDS_CONTENT_TYPE`] body), and the control plane stores them as
//! they arrived. A chatty job's log is therefore checked once per hop (one
//! UTF-8 pass, one scan for newlines) and never re-encoded: shipping 200 MB
//! of lines costs a few copies, not millions of JSON objects.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The media type of a body of log records.
pub const LOG_RECORDS_CONTENT_TYPE: &str = "application/vnd.nuon.log-records";

/// The longest log line kept; longer lines are split by the runner.
pub const MAX_LOG_LINE_BYTES: usize = 16 * 1024;

/// Where a log line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum LogStream {
    /// The job process's standard output.
    Stdout,
    /// The job process's standard error.
    Stderr,
    /// The runner itself (spec refused, binary missing, timeout, ...).
    System,
}

impl LogStream {
    /// A one-letter code for compact encodings.
    pub fn code(self) -> char {
        match self {
            LogStream::Stdout => 'o',
            LogStream::Stderr => 'e',
            LogStream::System => 's',
        }
    }

    /// The inverse of [`LogStream::code`].
    pub fn from_code(c: char) -> Option<Self> {
        match c {
            'o' => Some(LogStream::Stdout),
            'e' => Some(LogStream::Stderr),
            's' => Some(LogStream::System),
            _ => None,
        }
    }
}

/// One line of a job's log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogLine {
    /// Which stream.
    #[serde(rename = "s")]
    pub stream: LogStream,
    /// When the runner read it, milliseconds since the Unix epoch.
    #[serde(rename = "t")]
    pub ts_ms: i64,
    /// The text, without its newline.
    #[serde(rename = "m")]
    pub text: String,
}

/// Why a run of records is malformed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    /// The 0-based index of the bad record.
    pub index: usize,
    /// What is wrong with it.
    pub message: String,
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "log record {}: {}", self.index, self.message)
    }
}

impl std::error::Error for RecordError {}

/// One line borrowed from a run of records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogLineRef<'a> {
    /// Which stream.
    pub stream: LogStream,
    /// When the runner read it, milliseconds since the Unix epoch.
    pub ts_ms: i64,
    /// The text, without its newline.
    pub text: &'a str,
}

impl LogLineRef<'_> {
    /// An owned copy.
    pub fn to_line(&self) -> LogLine {
        LogLine {
            stream: self.stream,
            ts_ms: self.ts_ms,
            text: self.text.to_owned(),
        }
    }
}

/// The longest timestamp: `-9223372036854775808`.
const MAX_TS_CHARS: usize = 20;

/// Checks one record, without its newline, and splits it.
fn parse_one(raw: &str) -> Result<LogLineRef<'_>, String> {
    let bytes = raw.as_bytes();
    let Some(&code) = bytes.first() else {
        return Err("empty record".into());
    };
    let stream = if code.is_ascii() {
        LogStream::from_code(code as char)
    } else {
        None
    };
    let Some(stream) = stream else {
        let code = raw.chars().next().unwrap_or_default();
        return Err(format!("unknown stream code {code:?} (expected o, e or s)"));
    };
    // The code is one ASCII byte, so index 1 is a character boundary, and
    // so is the ASCII space found after it.
    let space = bytes[1..]
        .iter()
        .take(MAX_TS_CHARS + 1)
        .position(|b| *b == b' ')
        .ok_or("no space between the timestamp and the text")?;
    let ts = &raw[1..1 + space];
    let text = &raw[2 + space..];
    let ts_ms = ts
        .parse::<i64>()
        .map_err(|_| format!("timestamp {ts:?} is not an integer"))?;
    if text.len() > MAX_LOG_LINE_BYTES {
        return Err(format!(
            "the text is {} bytes, longer than {MAX_LOG_LINE_BYTES}; split it",
            text.len()
        ));
    }
    Ok(LogLineRef {
        stream,
        ts_ms,
        text,
    })
}

/// A run of complete, valid records: UTF-8, each ending in a newline.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct LogRecords {
    text: String,
    count: usize,
}

impl fmt::Debug for LogRecords {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LogRecords")
            .field("count", &self.count)
            .field("bytes", &self.text.len())
            .finish()
    }
}

impl LogRecords {
    /// No records.
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks every record of `bytes` and takes them.
    pub fn parse(bytes: Vec<u8>) -> Result<Self, RecordError> {
        let text = match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(e) => {
                let bad = e.utf8_error().valid_up_to();
                let index = memchr::memchr_iter(b'\n', &e.as_bytes()[..bad]).count();
                return Err(RecordError {
                    index,
                    message: "not valid UTF-8".into(),
                });
            }
        };
        let count = check_records(&text)?;
        Ok(LogRecords { text, count })
    }

    /// Appends a run of raw records, each with its newline, after checking
    /// them all; nothing is taken when one is bad. One pass for UTF-8 and
    /// one for the newlines, however many records: this is how a reader of
    /// stored records takes them in bulk. The error's index counts from the
    /// start of `raw`.
    pub fn push_records(&mut self, raw: &[u8]) -> Result<(), RecordError> {
        let text = std::str::from_utf8(raw).map_err(|e| RecordError {
            index: memchr::memchr_iter(b'\n', &raw[..e.valid_up_to()]).count(),
            message: "not valid UTF-8".into(),
        })?;
        let count = check_records(text)?;
        self.text.push_str(text);
        self.count += count;
        Ok(())
    }

    /// Appends one line. A text with newlines or longer than
    /// [`MAX_LOG_LINE_BYTES`] is refused: split it first.
    pub fn push(&mut self, stream: LogStream, ts_ms: i64, text: &str) -> Result<(), RecordError> {
        let fail = |message: String| RecordError {
            index: self.count,
            message,
        };
        if text.contains('\n') {
            return Err(fail("the text contains a newline".into()));
        }
        if text.len() > MAX_LOG_LINE_BYTES {
            return Err(fail(format!(
                "the text is {} bytes, longer than {MAX_LOG_LINE_BYTES}; split it",
                text.len()
            )));
        }
        use fmt::Write as _;
        let _ = writeln!(self.text, "{}{ts_ms} {text}", stream.code());
        self.count += 1;
        Ok(())
    }

    /// Appends one raw record with its newline, after checking it.
    pub fn push_record(&mut self, raw: &[u8]) -> Result<(), RecordError> {
        let fail = |message: &str| RecordError {
            index: self.count,
            message: message.into(),
        };
        let Some(body) = raw.strip_suffix(b"\n") else {
            return Err(fail("the record has no newline"));
        };
        let body = std::str::from_utf8(body).map_err(|_| fail("not valid UTF-8"))?;
        if memchr::memchr(b'\n', body.as_bytes()).is_some() {
            return Err(fail("more than one record"));
        }
        parse_one(body).map_err(|message| RecordError {
            index: self.count,
            message,
        })?;
        self.text.push_str(body);
        self.text.push('\n');
        self.count += 1;
        Ok(())
    }

    /// Drops the first `n` lines (all of them when there are fewer).
    pub fn remove_front(&mut self, n: usize) {
        let keep = tail_str(&self.text, n).len();
        self.text.drain(..self.text.len() - keep);
        self.count = self.count.saturating_sub(n);
    }

    /// How many lines.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are no lines.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The records as bytes, ready to send or store.
    pub fn as_bytes(&self) -> &[u8] {
        self.text.as_bytes()
    }

    /// The records as text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Empties the run, keeping its memory.
    pub fn clear(&mut self) {
        self.text.clear();
        self.count = 0;
    }

    /// The lines, in order.
    pub fn iter(&self) -> impl Iterator<Item = LogLineRef<'_>> + '_ {
        iter_str(&self.text)
    }

    /// The records after the first `n`.
    pub fn tail(&self, n: usize) -> &str {
        tail_str(&self.text, n)
    }
}

/// Checks every record of `text` (each must end in a newline); the number
/// of records.
fn check_records(text: &str) -> Result<usize, RecordError> {
    let bytes = text.as_bytes();
    let mut count = 0;
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', bytes) {
        // Both ends are at ASCII newlines (or 0), so character boundaries.
        parse_one(&text[start..end]).map_err(|message| RecordError {
            index: count,
            message,
        })?;
        count += 1;
        start = end + 1;
    }
    if start < bytes.len() {
        return Err(RecordError {
            index: count,
            message: "the last record has no newline".into(),
        });
    }
    Ok(count)
}

/// The lines of records already checked (by [`LogRecords::parse`] before
/// they were stored). A record that does not parse is skipped: stored
/// records always parse.
pub fn iter_str(records: &str) -> impl Iterator<Item = LogLineRef<'_>> + '_ {
    records
        .split_terminator('\n')
        .filter_map(|raw| parse_one(raw).ok())
}

/// The longest run of whole records at the start of `records` that is at
/// most `max_bytes` long, and how many records it holds.
pub fn head_within(records: &str, max_bytes: usize) -> (&str, usize) {
    let mut end = 0;
    let mut n = 0;
    for nl in memchr::memchr_iter(b'\n', records.as_bytes()) {
        if nl + 1 > max_bytes {
            break;
        }
        end = nl + 1;
        n += 1;
    }
    (&records[..end], n)
}

/// The records of `records` after the first `n`.
pub fn tail_str(records: &str, n: usize) -> &str {
    if n == 0 {
        return records;
    }
    match memchr::memchr_iter(b'\n', records.as_bytes()).nth(n - 1) {
        Some(i) => &records[i + 1..],
        None => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_within_keeps_whole_records() {
        let text = "o1 ab\no2 cd\no3 ef\n";
        assert_eq!(head_within(text, 0), ("", 0));
        assert_eq!(head_within(text, 5), ("", 0));
        assert_eq!(head_within(text, 6), ("o1 ab\n", 1));
        assert_eq!(head_within(text, 13), ("o1 ab\no2 cd\n", 2));
        assert_eq!(head_within(text, 100), (text, 3));
    }

    #[test]
    fn records_round_trip() {
        let mut r = LogRecords::new();
        r.push(LogStream::Stdout, 5, "one").unwrap();
        r.push(LogStream::Stderr, -2, "").unwrap();
        r.push_record(b"s9 with space \r\n").unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!(r.as_str(), "o5 one\ne-2 \ns9 with space \r\n");
        let again = LogRecords::parse(r.as_bytes().to_vec()).unwrap();
        assert_eq!(again, r);
        let lines: Vec<_> = r.iter().map(|l| (l.stream, l.ts_ms, l.text)).collect();
        assert_eq!(
            lines,
            [
                (LogStream::Stdout, 5, "one"),
                (LogStream::Stderr, -2, ""),
                (LogStream::System, 9, "with space \r"),
            ]
        );
        assert_eq!(r.tail(0), r.as_str());
        assert_eq!(r.tail(2), "s9 with space \r\n");
        assert_eq!(r.tail(3), "");
        assert_eq!(r.tail(9), "");
        let mut front = r.clone();
        front.remove_front(1);
        assert_eq!(
            (front.len(), front.as_str()),
            (2, "e-2 \ns9 with space \r\n")
        );
        front.remove_front(5);
        assert!(front.is_empty() && front.as_str().is_empty());
        assert_eq!(LogRecords::parse(Vec::new()).unwrap().len(), 0);
    }

    #[test]
    fn bad_records_name_the_record_and_the_fault() {
        let cases: &[(&[u8], usize, &str)] = &[
            (b"o1 a\nx1 b\n", 1, "unknown stream code 'x'"),
            (b"o1 a\no1b\n", 1, "no space"),
            (b"oz a\n", 0, "timestamp \"z\" is not an integer"),
            (b"o1 a\no2 b", 1, "no newline"),
            (b"o1 a\no2 \xff\n", 1, "UTF-8"),
            (b"\n", 0, "empty record"),
            ("\u{e9}1 a\n".as_bytes(), 0, "unknown stream code '\u{e9}'"),
            (b"o123456789012345678901 a\n", 0, "no space"),
        ];
        for (bytes, index, msg) in cases {
            let e = LogRecords::parse(bytes.to_vec()).unwrap_err();
            assert_eq!(e.index, *index, "{e}");
            assert!(e.message.contains(msg), "{e}");
        }
        let long = format!("o1 {}\n", "x".repeat(MAX_LOG_LINE_BYTES + 1));
        assert!(LogRecords::parse(long.into_bytes()).is_err());
        for (bytes, index, msg) in cases {
            let mut r = LogRecords::new();
            r.push(LogStream::Stdout, 0, "kept").unwrap();
            let e = r.push_records(bytes).unwrap_err();
            assert_eq!(
                (e.index, r.len(), r.as_str()),
                (*index, 1, "o0 kept\n"),
                "{e}"
            );
            assert!(e.message.contains(msg), "{e}");
        }
        let mut r = LogRecords::new();
        r.push_records(b"o1 a\ne2 b c\n").unwrap();
        r.push_records(b"").unwrap();
        r.push_records(b"s3 \n").unwrap();
        assert_eq!((r.len(), r.as_str()), (3, "o1 a\ne2 b c\ns3 \n"));
        let mut r = LogRecords::new();
        assert!(r.push(LogStream::Stdout, 1, "a\nb").is_err());
        assert!(r.push_record(b"o1 a\no2 b\n").is_err());
        assert!(r.push_record(b"o1 a").is_err());
        assert!(r.is_empty());
    }
}
