//! The rule for files only their owner may read: a control plane's data
//! directory (its databases, their WAL, the secrets key, the token files)
//! and a runner's work directory, spool and store. PostgreSQL's own rule
//! for its data directory, applied to ours. The edges do the I/O; this is
//! what they decide.

/// The mode of a private directory.
pub const DIR_MODE: u32 = 0o700;

/// The mode of a private file.
pub const FILE_MODE: u32 = 0o600;

/// What to do about a path's mode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Private already.
    Private,
    /// Too open: set the private mode, and warn with this message.
    Fix(String),
    /// Too open, and the caller asked for strict permissions: refuse to
    /// start with this message.
    Refuse(String),
}

/// The verdict on `path`, of `mode` (its permission bits), a directory or
/// not, under `strict`.
pub fn verdict(path: &str, mode: u32, is_dir: bool, strict: bool) -> Verdict {
    let mode = mode & 0o777;
    if mode & 0o077 == 0 {
        return Verdict::Private;
    }
    let want = if is_dir { DIR_MODE } else { FILE_MODE };
    if strict {
        Verdict::Refuse(format!(
            "{path} is mode {mode:o}: others may read it, and it holds secrets; \
             run `chmod {want:o} {path}` (or start without --strict-permissions to have it fixed)"
        ))
    } else {
        Verdict::Fix(format!(
            "{path} was mode {mode:o}, readable by others: set to {want:o}"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_owner_may_be_in() {
        assert_eq!(verdict("d", 0o40700, true, true), Verdict::Private);
        assert_eq!(verdict("f", 0o100600, false, true), Verdict::Private);
        assert_eq!(verdict("f", 0o400, false, true), Verdict::Private);
        match verdict("nuon.db", 0o644, false, false) {
            Verdict::Fix(m) => assert!(m.contains("mode 644") && m.contains("600"), "{m}"),
            v => panic!("{v:?}"),
        }
        match verdict("data", 0o755, true, true) {
            Verdict::Refuse(m) => assert!(m.contains("chmod 700 data"), "{m}"),
            v => panic!("{v:?}"),
        }
        assert!(matches!(verdict("g", 0o620, false, false), Verdict::Fix(_)));
    }
}
