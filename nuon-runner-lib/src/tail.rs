//! The last line of an append-only file, read from its end: the journal
//! continues its chain from it, and the spool finds an attempt's result in
//! it, however long the file.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

/// The last line of `file` that is not empty, without its newline, and
/// whether it has one (one without is torn: its writer stopped in the
/// middle of it). `None` for a file of no lines.
pub(crate) fn last_line(file: &mut File) -> io::Result<Option<(Vec<u8>, bool)>> {
    let len = file.seek(SeekFrom::End(0))?;
    let mut back = 4096u64;
    loop {
        let start = len.saturating_sub(back);
        file.seek(SeekFrom::Start(start))?;
        let mut buf = Vec::new();
        Read::by_ref(file).take(len - start).read_to_end(&mut buf)?;
        let body = buf.len() - buf.iter().rev().take_while(|b| **b == b'\n').count();
        let whole = body < buf.len();
        match memchr::memrchr(b'\n', &buf[..body]) {
            Some(i) => return Ok(Some((buf[i + 1..body].to_vec(), whole))),
            None if start == 0 => return Ok((body > 0).then(|| (buf[..body].to_vec(), whole))),
            None => back *= 4,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn last(bytes: &[u8]) -> Option<(String, bool)> {
        let mut f = tempfile::tempfile().unwrap();
        f.write_all(bytes).unwrap();
        last_line(&mut f)
            .unwrap()
            .map(|(l, whole)| (String::from_utf8(l).unwrap(), whole))
    }

    #[test]
    fn the_last_line_whole_or_torn_however_long_the_file() {
        assert_eq!(last(b""), None);
        assert_eq!(last(b"\n\n"), None);
        assert_eq!(last(b"one"), Some(("one".into(), false)));
        assert_eq!(last(b"one\ntwo\n\n"), Some(("two".into(), true)));
        assert_eq!(last(b"one\ntw"), Some(("tw".into(), false)));
        let long = "x".repeat(20_000);
        let text = format!("{}\n{long}\n", "y".repeat(50_000));
        assert_eq!(last(text.as_bytes()), Some((long, true)));
    }
}
