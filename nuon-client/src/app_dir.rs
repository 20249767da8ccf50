//! Reading an app config directory from disk: the loader that walks it and
//! hands its files to `nuon_core::app`, which parses and checks them
//! without touching the file system.

use std::path::{Path, PathBuf};

use nuon_core::app::{self, AppConfig, Diagnostics, SourceFile};

/// Reads the config files of directory `dir` (those
/// [`app::reads_file`] names: the layout's files, and Nuon's other files so
/// they can be reported). Everything else is left alone.
pub fn read_dir(dir: &Path) -> Result<Vec<SourceFile>, Diagnostics> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| app::unreadable_dir(&dir.display().to_string(), &e))?;
    let mut names = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if path.is_dir() {
            if app::reads_dir(&name) {
                collect(&path, &name, &mut names);
            }
        } else if app::reads_file(&name) {
            names.push((name, path));
        }
    }
    names.sort();
    app::check_file_count(names.len())?;
    let mut d = Diagnostics::default();
    let mut out = Vec::new();
    for (name, path) in names {
        let read = std::fs::read(&path).map_err(|e| e.to_string());
        out.extend(app::source_file(name, read, &mut d));
    }
    if d.has_errors() { Err(d) } else { Ok(out) }
}

/// Every file under `dir` the loader reads, named `prefix/...`.
fn collect(dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = format!("{prefix}/{}", entry.file_name().to_string_lossy());
        let path = entry.path();
        if path.is_dir() {
            collect(&path, &name, out);
        } else if app::reads_file(&name) {
            out.push((name, path));
        }
    }
}

/// Reads and checks the config in `dir`, and that the sources and files
/// it names exist next to it: the config when it has no error, and every
/// problem found (warnings too).
pub fn validate_dir(dir: &Path) -> (Option<AppConfig>, Diagnostics) {
    match read_dir(dir) {
        Ok(files) => {
            let (config, mut d) = app::validate(&files, &|path, is_dir| {
                let full = dir.join(path);
                if is_dir {
                    full.is_dir()
                } else {
                    full.is_file()
                }
            });
            // Rego policies compile, with their files read from the directory.
            let Some(c) = config else { return (None, d) };
            let bad = app::check_policies(&c, &|rel| std::fs::read_to_string(dir.join(rel)).ok());
            if bad.is_empty() {
                return (Some(c), d);
            }
            d.0.extend(bad);
            d.0.sort();
            (None, d)
        }
        Err(d) => (None, d),
    }
}
