//! The example apps, built into the binary: `nuon dev` without
//! `--app-dir` writes the one it deploys into its data dir on first run,
//! so that it works from any directory, with no checkout of the
//! repository. A test holds these tables to the files under
//! `examples/apps/`.

use std::path::{Path, PathBuf};

/// One file of an example: its path in the app's directory and its text.
macro_rules! example {
    ($app:literal, $path:literal) => {
        (
            $path,
            include_str!(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../examples/apps/",
                $app,
                "/",
                $path
            )),
        )
    };
}

/// `examples/apps/hello`, file by file.
pub(crate) const HELLO: &[(&str, &str)] = &[
    example!("hello", "README.md"),
    example!("hello", "actions/smoke_test.toml"),
    example!("hello", "components/app.toml"),
    example!("hello", "components/database.toml"),
    example!("hello", "inputs.toml"),
    example!("hello", "installs/demo.toml"),
    example!("hello", "metadata.toml"),
    example!("hello", "runner.toml"),
    example!("hello", "sandbox.toml"),
    example!("hello", "sandbox/main.tf"),
    example!("hello", "secrets.toml"),
    example!("hello", "src/app/main.tf"),
    example!("hello", "src/database/main.tf"),
];

/// `examples/apps/aws`, file by file.
pub(crate) const AWS: &[(&str, &str)] = &[
    example!("aws", "README.md"),
    example!("aws", "access/main.tf"),
    example!("aws", "actions/check_secret.toml"),
    example!("aws", "bucket/main.tf"),
    example!("aws", "components/access.toml"),
    example!("aws", "components/bucket.toml"),
    example!("aws", "components/queue.toml"),
    example!("aws", "metadata.toml"),
    example!("aws", "permissions/deprovision.toml"),
    example!("aws", "permissions/maintenance.toml"),
    example!("aws", "permissions/provision.toml"),
    example!("aws", "queue/main.tf"),
    example!("aws", "runner.toml"),
    example!("aws", "sandbox.toml"),
    example!("aws", "sandbox/main.tf"),
    example!("aws", "secrets.toml"),
];

/// The example app `name`'s directory under `data_dir` (`apps/NAME`),
/// written from the binary when it is not there yet; one already there is
/// kept as it is (the user's edits stay). Whether it was written now.
pub(crate) fn write_example(
    data_dir: &Path,
    name: &str,
    files: &[(&str, &str)],
) -> std::io::Result<(PathBuf, bool)> {
    let dir = data_dir.join("apps").join(name);
    if dir.join("metadata.toml").is_file() {
        return Ok((dir, false));
    }
    // Something else there (an edit under way): kept, never overwritten.
    if dir.exists() {
        return Err(std::io::Error::other(format!(
            "{} is there but has no metadata.toml: finish editing it, or remove it to have the example written again",
            dir.display()
        )));
    }
    // Written aside and renamed: a run stopped half-way leaves no app
    // that looks whole.
    let part = data_dir.join("apps").join(format!(".{name}.part"));
    let _ = std::fs::remove_dir_all(&part);
    for (path, text) in files {
        let p = part.join(path);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(p, text)?;
    }
    std::fs::rename(&part, &dir)?;
    Ok((dir, true))
}

/// The app `nuon dev` deploys: `given`, else the example built in (`aws`
/// for a fake AWS account, else `hello`), written to the data dir on first
/// run.
pub(crate) fn app_dir(
    given: Option<&Path>,
    data_dir: &Path,
    fake_aws: bool,
) -> Result<PathBuf, crate::CliError> {
    let app_dir = match given {
        Some(dir) => dir.to_owned(),
        None => {
            let (name, files) = if fake_aws {
                ("aws", AWS)
            } else {
                ("hello", HELLO)
            };
            let (dir, written) =
                write_example(data_dir, name, files).map_err(|e| crate::CliError {
                    message: format!("cannot write the example app into the data dir: {e}"),
                    code: 1,
                    api_code: None,
                })?;
            eprintln!(
                "==> the example app {name}, {} {} (edit it there, or pass --app-dir)",
                if written { "written to" } else { "in" },
                dir.display()
            );
            dir
        }
    };
    if !app_dir.join("metadata.toml").is_file() {
        return Err(crate::CliError::usage(format!(
            "{} is not an app config directory (no metadata.toml): pass the directory of an app's config with --app-dir",
            app_dir.display()
        )));
    }
    Ok(app_dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file under `examples/apps/NAME`, relative, sorted.
    fn on_disk(name: &str) -> Vec<(String, String)> {
        fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, String)>) {
            for e in std::fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    walk(&p, root, out);
                } else {
                    let rel = p.strip_prefix(root).unwrap().to_string_lossy().into_owned();
                    out.push((rel, std::fs::read_to_string(&p).unwrap()));
                }
            }
        }
        let root = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../examples/apps")
            .join(name);
        let mut out = Vec::new();
        walk(&root, &root, &mut out);
        out.sort();
        out
    }

    #[test]
    fn the_built_in_examples_are_the_files_of_examples_apps() {
        for (name, files) in [("hello", HELLO), ("aws", AWS)] {
            let mut built: Vec<(String, String)> = files
                .iter()
                .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
                .collect();
            built.sort();
            let names =
                |v: &[(String, String)]| v.iter().map(|(p, _)| p.clone()).collect::<Vec<_>>();
            assert_eq!(
                names(&built),
                names(&on_disk(name)),
                "examples/apps/{name} and the table in bins/nuon/src/examples.rs list other files: add or remove it there"
            );
            assert!(
                built == on_disk(name),
                "examples/apps/{name}: the texts differ"
            );
        }
    }

    #[test]
    fn an_example_is_written_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (app, written) = write_example(dir.path(), "hello", HELLO).unwrap();
        assert!(written && app.join("metadata.toml").is_file());
        std::fs::write(app.join("metadata.toml"), "edited").unwrap();
        let (again, written) = write_example(dir.path(), "hello", HELLO).unwrap();
        assert!(!written);
        assert_eq!(
            std::fs::read_to_string(again.join("metadata.toml")).unwrap(),
            "edited"
        );
        // A directory of that name without a config is never overwritten.
        std::fs::remove_file(again.join("metadata.toml")).unwrap();
        let e = write_example(dir.path(), "hello", HELLO).unwrap_err();
        assert!(e.to_string().contains("has no metadata.toml"), "{e}");
        assert!(again.join("runner.toml").is_file());
    }
}
