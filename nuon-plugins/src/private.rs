//! The one way the plugins write a file that may hold a secret (values,
//! kubeconfigs, manifests, the compile cache's key and files).

use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `parts` to `path` whole, readable by its owner alone: into a
/// temporary file beside it (named after all of it, this process and a
/// counter, so no two writers share one), synced, then renamed over it. A
/// reader sees the old file or the new one, never a part.
pub(crate) fn write_private(path: &Path, parts: &[&[u8]]) -> io::Result<()> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = path.with_file_name(name);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            for p in parts {
                f.write_all(p)?;
            }
            f.sync_all()
        })
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn writes_whole_files_readable_by_the_owner_alone() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("values.yaml");
        std::fs::write(&p, "old, and world-readable").unwrap();
        super::write_private(&p, &[b"a: ", b"1\n"]).unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "a: 1\n");
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // No temporary file stays behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        // A missing directory is an error, not a half-written file.
        assert!(super::write_private(&dir.path().join("no/such"), &[b"x"]).is_err());
    }
}
