//! The log record format (`nuon_core::records`): the decoder the control
//! plane runs on every runner's `POST .../logs` body, and that the runner's
//! spool runs on its file. Checks what its callers rely on: a run that
//! parses yields exactly its records and re-encodes to the same lines; a
//! bad run takes nothing, and its error's index is a record whose
//! predecessors are the good prefix the spool salvages.
#![no_main]

use libfuzzer_sys::fuzz_target;
use nuon_core::records::{self, LogRecords};

fuzz_target!(|bytes: &[u8]| {
    let parsed = LogRecords::parse(bytes.to_vec());
    let mut pushed = LogRecords::new();
    let bulk = pushed.push_records(bytes);
    match (&parsed, &bulk) {
        (Ok(p), Ok(())) => assert_eq!(p, &pushed),
        (Err(a), Err(b)) => assert_eq!(a, b),
        _ => panic!("parse and push_records disagree: {parsed:?} vs {bulk:?}"),
    }

    let newlines = memchr_count(bytes);
    match parsed {
        Ok(r) => {
            assert_eq!(r.as_bytes(), bytes);
            assert_eq!(r.len(), newlines);
            let lines: Vec<_> = r.iter().collect();
            assert_eq!(lines.len(), r.len(), "a stored record did not parse back");
            assert_eq!(records::iter_str(r.as_str()).count(), r.len());

            // One at a time, raw: the same run.
            let mut one = LogRecords::new();
            for raw in r.as_bytes().split_inclusive(|b| *b == b'\n') {
                one.push_record(raw).expect("a record of a good run");
            }
            assert_eq!(one, r);

            // Re-encoded from the parsed fields: the same lines (the
            // timestamp may be spelled differently: `+5`, `005`).
            let mut again = LogRecords::new();
            for l in &lines {
                again
                    .push(l.stream, l.ts_ms, l.text)
                    .expect("a parsed line re-encodes");
            }
            let back: Vec<_> = again.iter().collect();
            assert_eq!(back, lines);
            let reparsed = LogRecords::parse(again.as_bytes().to_vec()).expect("re-encoded run");
            assert_eq!(reparsed, again);

            // Dropping a prefix leaves the rest.
            let n = bytes.first().map_or(0, |b| usize::from(*b) % (r.len() + 2));
            assert_eq!(records::tail_str(r.as_str(), n), r.tail(n));
            let mut rest = r.clone();
            rest.remove_front(n);
            assert_eq!(rest.len(), r.len().saturating_sub(n));
            assert_eq!(rest.as_str(), r.tail(n));
            let kept: Vec<_> = rest.iter().collect();
            assert_eq!(kept[..], lines[n.min(lines.len())..]);
        }
        Err(e) => {
            // Nothing is taken from a bad run.
            assert!(pushed.is_empty() && pushed.as_bytes().is_empty());
            // The index names a record that is there (the last one may be
            // the unterminated tail).
            assert!(e.index <= newlines, "{e:?} with {newlines} newlines");
            // The spool's salvage: the records before the bad one either
            // all parse, or one of them is bad too (a UTF-8 error is found
            // before any record is checked).
            let prefix_end = nth_newline_end(bytes, e.index);
            let mut prefix = LogRecords::new();
            match prefix.push_records(&bytes[..prefix_end]) {
                Ok(()) => assert_eq!(prefix.len(), e.index),
                Err(p) => assert!(p.index < e.index, "prefix error {p:?} for {e:?}"),
            }
        }
    }

    // The readers of stored records never fail on anything.
    let text = String::from_utf8_lossy(bytes);
    let _ = records::iter_str(&text).count();
    let _ = records::tail_str(&text, usize::from(bytes.last().copied().unwrap_or(0)));
});

fn memchr_count(bytes: &[u8]) -> usize {
    bytes.iter().filter(|b| **b == b'\n').count()
}

/// The byte offset just after the `n`th newline (0 for `n == 0`).
fn nth_newline_end(bytes: &[u8], n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .nth(n - 1)
        .map_or(bytes.len(), |(i, _)| i + 1)
}
