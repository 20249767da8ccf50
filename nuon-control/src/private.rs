//! The data directory kept private: the directory 0700, its files 0600
//! (the public key file excepted), at creation and at every start. A
//! wider mode is fixed with a warning, or refused under
//! `--strict-permissions`.

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::Path;

use nuon_core::private::{DIR_MODE, FILE_MODE, Verdict, verdict};

use crate::error::{Error, Result};

/// File in the data dir holding the first org's admin API token (mode 0600).
pub const ADMIN_TOKEN_FILE: &str = "admin-token";
/// The file the first org's build runner token is written to.
pub const BUILD_RUNNER_TOKEN_FILE: &str = "build-runner-token";
/// File in the data dir holding the first org's job-signing public key.
pub const SIGNING_KEY_FILE: &str = "org-signing-key.pub";

fn io(path: &Path) -> impl Fn(std::io::Error) -> Error + '_ {
    move |e| Error::DataDir {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

/// Makes `dir` (when missing) and checks it and the files in it.
pub(crate) fn secure_data_dir(dir: &Path, strict: bool) -> Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)
        .map_err(io(dir))?;
    check(dir, true, strict)?;
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let is_file = entry.file_type().map_err(io(dir))?.is_file();
        if is_file && entry.file_name() != SIGNING_KEY_FILE {
            check(&entry.path(), false, strict)?;
        }
    }
    Ok(())
}

fn check(path: &Path, is_dir: bool, strict: bool) -> Result<()> {
    let mode = std::fs::symlink_metadata(path)
        .map_err(io(path))?
        .permissions()
        .mode();
    match verdict(&path.display().to_string(), mode, is_dir, strict) {
        Verdict::Private => Ok(()),
        Verdict::Fix(message) => {
            let want = if is_dir { DIR_MODE } else { FILE_MODE };
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(want))
                .map_err(io(path))?;
            tracing::warn!("{message}");
            Ok(())
        }
        Verdict::Refuse(message) => Err(Error::DataDir {
            path: path.display().to_string(),
            message,
        }),
    }
}

/// Writes `text` and a newline to `path` atomically, readable by its
/// owner only: the one way the control plane writes a private file.
pub(crate) fn write_private(path: &Path, text: &str) -> Result<()> {
    write_file(path, text, 0o600)
}

/// Writes `text` and a newline to `path` atomically with the given mode.
pub(crate) fn write_file(path: &Path, text: &str, mode: u32) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |e: std::io::Error| Error::DataDir {
        path: path.display().to_string(),
        message: e.to_string(),
    };
    // Next to it, named after all of it: `a.b` and `a.c` never share one.
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)
        .map_err(err)?;
    f.write_all(text.as_bytes()).map_err(err)?;
    f.write_all(b"\n").map_err(err)?;
    f.sync_all().map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o777
    }

    #[test]
    fn wider_modes_are_fixed_or_refused() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("data");
        secure_data_dir(&dir, true).unwrap();
        assert_eq!(mode(&dir), 0o700);
        std::fs::write(dir.join("nuon.db"), "").unwrap();
        std::fs::set_permissions(dir.join("nuon.db"), std::fs::Permissions::from_mode(0o644))
            .unwrap();
        std::fs::write(dir.join(SIGNING_KEY_FILE), "ed25519:x").unwrap();
        std::fs::set_permissions(
            dir.join(SIGNING_KEY_FILE),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let e = secure_data_dir(&dir, true).unwrap_err().to_string();
        assert!(e.contains("nuon.db") && e.contains("chmod 600"), "{e}");
        assert_eq!(mode(&dir.join("nuon.db")), 0o644, "strict changes nothing");
        secure_data_dir(&dir, false).unwrap();
        assert_eq!(mode(&dir.join("nuon.db")), 0o600);
        assert_eq!(
            mode(&dir.join(SIGNING_KEY_FILE)),
            0o644,
            "the public key stays readable"
        );
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        secure_data_dir(&dir, false).unwrap();
        assert_eq!(mode(&dir), 0o700);
    }
}
