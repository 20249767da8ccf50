//! Backups of the embedded store, and their restore into a new data dir.
//!
//! A backup is one file, a tar archive of the store's databases as they
//! were at one moment (taken while the control plane serves, see
//! [`SqliteStore::snapshot`]), the org's public key file and a manifest
//! (`backup.json`: the format, when, by which version, each file's size
//! and SHA-256). It holds no key and no secret in the clear: the secrets
//! key and the token files of the data dir stay out, and what the store
//! seals stays sealed, so a restore needs the secrets key the store was
//! sealed with.
//!
//! A restore checks the whole archive (its manifest, sizes and digests,
//! SQLite's integrity check, and that the secrets key opens the store)
//! in a directory beside the new data dir, and only then moves it into
//! place: it never leaves a half-restored data dir, and never writes into
//! one that holds anything.
//!
//! A PostgreSQL store is backed up with `pg_dump` (see the book's
//! backups page); its data dir holds only the secrets key and token files.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::private::write_private;
use crate::secrets::{SECRETS_KEY_ENV, SECRETS_KEY_FILE, SecretBox};
use crate::store::SqliteStore;
use crate::{
    ADMIN_TOKEN_FILE, BUILD_RUNNER_TOKEN_FILE, Error, OpenStore, Result, SIGNING_KEY_FILE,
};

/// The manifest's name in a backup.
const MANIFEST: &str = "backup.json";
/// The format this version writes and reads.
pub const BACKUP_FORMAT: u32 = 1;

/// What a backup holds, as its manifest says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackupInfo {
    /// The archive's format ([`BACKUP_FORMAT`]).
    pub format: u32,
    /// When the snapshot was taken, milliseconds since the Unix epoch.
    pub taken_at_ms: i64,
    /// The version of the control plane that took it.
    pub version: String,
    /// Its files, in the archive's order.
    pub files: Vec<BackedUpFile>,
}

/// One file of a backup.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackedUpFile {
    /// Its name in the data dir.
    pub name: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// Its SHA-256, hex.
    pub sha256: String,
}

/// What a restore made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Restored {
    /// The new data dir.
    pub data_dir: String,
    /// The backup's manifest (none for a database checked in place).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backup: Option<BackupInfo>,
    /// How many orgs the restored store serves.
    pub orgs: u64,
    /// The files of the data dir a backup leaves out, to put back by hand
    /// where they are used (the first org's admin and build runner
    /// tokens; the tokens themselves are kept in the store as hashes, so
    /// the ones people hold still work).
    pub left_out: Vec<String>,
}

/// The files of a data dir a backup carries besides the databases: public.
const PUBLIC_FILES: [&str; 1] = [SIGNING_KEY_FILE];

/// Writes a backup of the embedded store in `data_dir` to `to`, which must
/// not exist (it is made private, atomically: no partial file is left).
pub fn backup(data_dir: &Path, to: &Path) -> Result<BackupInfo> {
    let dir_error = |message: String| Error::DataDir {
        path: data_dir.display().to_string(),
        message,
    };
    if !data_dir.join(SqliteStore::DB_FILE).exists() {
        return Err(dir_error(format!(
            "holds no control-plane store ({}): give the data dir `nuon-ctl serve` uses",
            SqliteStore::DB_FILE
        )));
    }
    let to_error = |message: String| Error::Backup {
        path: to.display().to_string(),
        message,
    };
    if to.exists() {
        return Err(to_error(
            "exists already: a backup never replaces a file; give a new name".into(),
        ));
    }
    let parent = parent_of(to);
    let work = tempfile::Builder::new()
        .prefix(".nuon-backup-")
        .tempdir_in(&parent)
        .map_err(|e| to_error(format!("cannot write beside it: {e}")))?;
    SqliteStore::snapshot(data_dir, work.path())?;
    let mut names = vec![
        SqliteStore::DB_FILE.to_owned(),
        SqliteStore::LOGS_FILE.to_owned(),
    ];
    for name in PUBLIC_FILES {
        if data_dir.join(name).exists() {
            std::fs::copy(data_dir.join(name), work.path().join(name))
                .map_err(|e| dir_error(format!("cannot copy {name}: {e}")))?;
            names.push(name.to_owned());
        }
    }
    let files = names
        .iter()
        .map(|name| described(&work.path().join(name), name))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| to_error(format!("cannot read the snapshot: {e}")))?;
    let info = BackupInfo {
        format: BACKUP_FORMAT,
        taken_at_ms: nuon_core::now_ms(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        files,
    };
    let mut out = tempfile::Builder::new()
        .prefix(".nuon-backup-")
        .tempfile_in(&parent)
        .map_err(|e| to_error(format!("cannot write beside it: {e}")))?;
    {
        let mut tar = tar::Builder::new(out.as_file_mut());
        let manifest = serde_json::to_vec_pretty(&info).expect("a manifest serializes");
        let mut header = tar::Header::new_gnu();
        header.set_size(manifest.len() as u64);
        header.set_mode(0o600);
        header.set_mtime((info.taken_at_ms / 1000) as u64);
        header.set_cksum();
        tar.append_data(&mut header, MANIFEST, manifest.as_slice())
            .and_then(|()| {
                names.iter().try_for_each(|name| {
                    let mut f = std::fs::File::open(work.path().join(name))?;
                    tar.append_file(name, &mut f)
                })
            })
            .and_then(|()| tar.finish())
            .map_err(|e| to_error(format!("cannot write the backup: {e}")))?;
    }
    out.as_file_mut()
        .flush()
        .and_then(|()| out.as_file().sync_all())
        .map_err(|e| to_error(format!("cannot write the backup: {e}")))?;
    out.persist_noclobber(to)
        .map_err(|e| to_error(format!("cannot put the backup in place: {}", e.error)))?;
    Ok(info)
}

/// Restores the backup `from` into `data_dir`, which must not exist or be
/// empty. The secrets key the store was sealed with comes from
/// `secrets_key_file` (copied into the data dir as `secrets.key`) or from
/// `NUON_SECRETS_KEY`; without either, or with another key, nothing is
/// restored.
pub async fn restore(
    from: &Path,
    data_dir: &Path,
    secrets_key_file: Option<&Path>,
) -> Result<Restored> {
    let from_error = |message: String| Error::Backup {
        path: from.display().to_string(),
        message,
    };
    let key = secrets_key(secrets_key_file).map_err(from_error)?;
    let work = beside(data_dir)?;
    let backup = unpack(from, work.path()).map_err(from_error)?;
    SqliteStore::check_integrity(work.path())
        .map_err(|e| from_error(format!("is not a whole backup: {e}")))?;
    let orgs = checked(work.path(), key.as_deref(), None)
        .await
        .map_err(|e| said_of(e, from_error))?;
    into_place(work, data_dir)?;
    Ok(Restored {
        data_dir: data_dir.display().to_string(),
        backup: Some(backup),
        orgs,
        left_out: [ADMIN_TOKEN_FILE, BUILD_RUNNER_TOKEN_FILE]
            .iter()
            .map(|f| f.to_string())
            .collect(),
    })
}

/// Checks a PostgreSQL database restored with `pg_restore` (or any copy
/// of one) as [`restore`] checks a backup, the same way: it opens as
/// `serve` opens it (migrated when older), and the secrets key opens the
/// value it sealed. Then makes the new `data_dir` a replica starts with,
/// holding the key given as `secrets_key_file` (or none, with
/// `NUON_SECRETS_KEY`).
pub async fn check_database(
    database_url: &str,
    data_dir: &Path,
    secrets_key_file: Option<&Path>,
) -> Result<Restored> {
    let db_error = |message: String| Error::Backup {
        path: "the database".into(),
        message,
    };
    let key = secrets_key(secrets_key_file).map_err(db_error)?;
    let work = beside(data_dir)?;
    let orgs = checked(work.path(), key.as_deref(), Some(database_url))
        .await
        .map_err(|e| said_of(e, db_error))?;
    into_place(work, data_dir)?;
    Ok(Restored {
        data_dir: data_dir.display().to_string(),
        backup: None,
        orgs,
        left_out: [ADMIN_TOKEN_FILE, BUILD_RUNNER_TOKEN_FILE, SIGNING_KEY_FILE]
            .iter()
            .map(|f| f.to_string())
            .collect(),
    })
}

/// The secrets key to restore with: the file's text, or none when
/// `NUON_SECRETS_KEY` holds it; an error when neither is given.
fn secrets_key(file: Option<&Path>) -> std::result::Result<Option<String>, String> {
    match file {
        Some(path) => std::fs::read_to_string(path)
            .map(Some)
            .map_err(|e| format!("cannot read the secrets key {}: {e}", path.display())),
        None if std::env::var_os(SECRETS_KEY_ENV).is_some() => Ok(None),
        None => Err(format!(
            "restoring needs the secrets key the store was sealed with: give \
             --secrets-key-file FILE (a copy of the old data dir's {SECRETS_KEY_FILE}) or set \
             {SECRETS_KEY_ENV}; a backup never holds it"
        )),
    }
}

/// A new directory beside `data_dir` to make the restored one in, when
/// `data_dir` does not exist or is empty.
fn beside(data_dir: &Path) -> Result<tempfile::TempDir> {
    let dir_error = |message: String| Error::DataDir {
        path: data_dir.display().to_string(),
        message,
    };
    if let Ok(mut entries) = std::fs::read_dir(data_dir) {
        if entries.next().is_some() {
            return Err(dir_error(
                "holds files already: a restore makes a new data dir; give one that does not exist or is empty".into(),
            ));
        }
    } else if data_dir.exists() {
        return Err(dir_error("is not a directory".into()));
    }
    let parent = parent_of(data_dir);
    std::fs::create_dir_all(&parent)
        .map_err(|e| dir_error(format!("cannot make its parent directory: {e}")))?;
    tempfile::Builder::new()
        .prefix(".nuon-restore-")
        .tempdir_in(&parent)
        .map_err(|e| dir_error(format!("cannot write beside it: {e}")))
}

/// Opens the store of `dir` (or of `database_url`) as `serve` does, with
/// `key` written there as its secrets key, and checks that the key opens
/// the value the store sealed: the number of orgs it serves.
async fn checked(dir: &Path, key: Option<&str>, database_url: Option<&str>) -> Result<u64> {
    if let Some(key) = key {
        write_private(&dir.join(SECRETS_KEY_FILE), key.trim())?;
    }
    if SecretBox::load(dir)?.is_none() {
        return Err(Error::DataDir {
            path: dir.display().to_string(),
            message: format!("no secrets key: set {SECRETS_KEY_ENV}"),
        });
    }
    let store = OpenStore::open(dir, database_url).await?;
    let result = async {
        store.secrets(dir).await?;
        Ok::<_, Error>(store.store().count_orgs().await?)
    }
    .await;
    store.close().await;
    result
}

/// `e` said of what is restored: the directory it was checked in is gone.
fn said_of(e: Error, what: impl Fn(String) -> Error) -> Error {
    match e {
        Error::DataDir { message, .. } => what(message),
        other => other,
    }
}

/// Moves the checked directory `work` to `data_dir` (an empty one is
/// replaced).
fn into_place(work: tempfile::TempDir, data_dir: &Path) -> Result<()> {
    let dir_error = |message: String| Error::DataDir {
        path: data_dir.display().to_string(),
        message,
    };
    if data_dir.exists() {
        std::fs::remove_dir(data_dir)
            .map_err(|e| dir_error(format!("cannot replace the empty directory: {e}")))?;
    }
    let made = work.keep();
    if let Err(e) = std::fs::rename(&made, data_dir) {
        let _ = std::fs::remove_dir_all(&made);
        return Err(dir_error(format!(
            "cannot move the restored store into place: {e}"
        )));
    }
    Ok(())
}

/// Unpacks the backup `from` into `dir`: its manifest first, then exactly
/// the files it lists, each of its size and digest.
fn unpack(from: &Path, dir: &Path) -> std::result::Result<BackupInfo, String> {
    let file = std::fs::File::open(from).map_err(|e| format!("cannot open the backup: {e}"))?;
    let mut archive = tar::Archive::new(file);
    let mut entries = archive
        .entries()
        .map_err(|e| format!("is not a backup (a tar archive): {e}"))?;
    let not_ours = |e: &dyn std::fmt::Display| format!("is not a backup of nuon-ctl: {e}");
    let mut first = entries
        .next()
        .ok_or_else(|| not_ours(&"it is empty"))?
        .map_err(|e| not_ours(&e))?;
    if first.path().map_err(|e| not_ours(&e))?.as_os_str() != MANIFEST {
        return Err(not_ours(&format!("its first file is not {MANIFEST}")));
    }
    let mut text = String::new();
    first
        .by_ref()
        .take(1 << 20)
        .read_to_string(&mut text)
        .map_err(|e| not_ours(&e))?;
    let info: BackupInfo = serde_json::from_str(&text).map_err(|e| not_ours(&e))?;
    if info.format != BACKUP_FORMAT {
        return Err(format!(
            "is a backup of format {}; this nuon-ctl reads format {BACKUP_FORMAT}: restore it with the version that took it ({})",
            info.format, info.version
        ));
    }
    let allowed = [
        SqliteStore::DB_FILE,
        SqliteStore::LOGS_FILE,
        SIGNING_KEY_FILE,
    ];
    let mut seen = Vec::new();
    for entry in entries {
        let mut entry = entry.map_err(|e| format!("is cut short or damaged: {e}"))?;
        let name = entry
            .path()
            .map_err(|e| not_ours(&e))?
            .to_string_lossy()
            .into_owned();
        let Some(listed) = info.files.iter().find(|f| f.name == name) else {
            return Err(not_ours(&format!(
                "it holds {name:?}, which its manifest does not list"
            )));
        };
        if !allowed.contains(&name.as_str()) || seen.contains(&name) {
            return Err(not_ours(&format!(
                "it holds {name:?} where a backup holds none"
            )));
        }
        let path = dir.join(&name);
        let mut out =
            std::fs::File::create(&path).map_err(|e| format!("cannot unpack {name}: {e}"))?;
        std::io::copy(&mut entry, &mut out)
            .map_err(|e| format!("is cut short or damaged: {name}: {e}"))?;
        let got = described(&path, &name).map_err(|e| format!("cannot read {name}: {e}"))?;
        if got.bytes < listed.bytes {
            return Err(format!(
                "is cut short: {name} holds {} of its {} bytes",
                got.bytes, listed.bytes
            ));
        }
        if got != *listed {
            return Err(format!(
                "is damaged: {name} is {} bytes with SHA-256 {}, its manifest says {} bytes with {}",
                got.bytes, got.sha256, listed.bytes, listed.sha256
            ));
        }
        seen.push(name);
    }
    if let Some(missing) = info.files.iter().find(|f| !seen.contains(&f.name)) {
        return Err(format!("is cut short: {} is missing", missing.name));
    }
    for db in [SqliteStore::DB_FILE, SqliteStore::LOGS_FILE] {
        if !seen.iter().any(|s| s == db) {
            return Err(not_ours(&format!("it holds no {db}")));
        }
    }
    Ok(info)
}

/// The size and SHA-256 of the file at `path`, named `name`.
fn described(path: &Path, name: &str) -> std::io::Result<BackedUpFile> {
    let mut f = std::fs::File::open(path)?;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 1 << 16];
    let mut bytes = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
        bytes += n as u64;
    }
    Ok(BackedUpFile {
        name: name.to_owned(),
        bytes,
        sha256: hex::encode(ctx.finish()),
    })
}

/// The directory `path` is in (`.` for a bare name).
fn parent_of(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_owned(),
        _ => PathBuf::from("."),
    }
}
