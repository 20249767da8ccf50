//! Our binaries, built once per test process the way `cargo install`
//! builds each, and commands that run them.

use super::*;

/// The packages of the binaries the tests and benches start, with their
/// binaries. Each is built alone, as
/// `cargo install --path bins/DIR` builds it: cargo unifies the features
/// of shared crates over the packages a build names, so a build of all
/// four together would make other binaries than an install does, and the
/// install test would build everything again.
const BINARIES: [(&str, &str); 4] = [
    ("nuon-ctl", "nuon-ctl"),
    ("nuon-runner", "nuon-runner"),
    ("nuon-build-runner", "nuon-build-runner"),
    ("nuon-cli", "nuon"),
];

/// `cargo build -q -p PACKAGE` of each binary's package, one at a time
/// (see [`BINARIES`]).
fn build_binaries(release: bool, only: Option<&str>, version: Option<&str>) {
    for (package, _) in BINARIES {
        if only.is_some_and(|o| o != package) {
            continue;
        }
        let mut cmd = cargo();
        cmd.args(["build", "-q", "-p", package]);
        if release {
            cmd.arg("--release");
        }
        match version {
            Some(v) => cmd.env("NUON_RUNNER_VERSION", v),
            None => cmd.env_remove("NUON_RUNNER_VERSION"),
        };
        let status = cmd.status().expect("run cargo build for the binaries");
        assert!(status.success(), "building {package} failed");
    }
}

/// A `cargo` command as a shell would run it. A test or bench runs with the
/// variables cargo sets for the target it runs (`CARGO_MANIFEST_DIR`,
/// `CARGO_PKG_*`, ...); build scripts that watch them (ring's does) would
/// find them changed from a build made in a shell, and everything above
/// them (rustls, reqwest, sqlx, our crates) would be built again: minutes
/// of release build at every `cargo bench`. Cargo's own settings
/// (`CARGO_HOME`, `CARGO_TARGET_DIR`, `CARGO_BUILD_*`, ...) are kept.
pub(crate) fn cargo() -> Command {
    let mut cmd = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    for (k, _) in std::env::vars_os() {
        let Some(k) = k.to_str() else { continue };
        let set_for_the_target = matches!(
            k,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_MANIFEST_LINKS"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "CARGO_RUSTC_CURRENT_DIR"
                | "OUT_DIR"
        ) || k.starts_with("CARGO_PKG_")
            || k.starts_with("CARGO_BIN_EXE_");
        if set_for_the_target {
            cmd.env_remove(k);
        }
    }
    // Hermetic: no runner of a test installs Terraform from the internet;
    // the tests of installs give a loopback mirror with the flags.
    cmd.env("NUON_RUNNER_TERRAFORM_INSTALL", "off");
    // Nor does the CLI read the contexts of whoever runs the tests.
    cmd.env(
        "NUON_CONFIG_DIR",
        std::env::temp_dir().join("nuon-tests-have-no-contexts"),
    );
    cmd
}

/// `cargo install --locked --offline --debug --path bins/DIR --root ROOT`
/// of each of `dirs`, as a user installs them from a checkout: the
/// installed binaries are in `ROOT/bin`. In this run's target directory:
/// [`bin_dir`] built each package alone, as an install does, so the
/// install finds them built (the tests run hard links of their own, which
/// an install's copy into `target/<profile>` does not touch).
pub fn cargo_install(dirs: &[&str], root: &Path) -> Result<()> {
    let profile = target_dir();
    let target = profile.parent().context("the target dir")?;
    for package in dirs {
        let out = cargo()
            .args([
                "install",
                "--locked",
                "--offline",
                "--debug",
                "--quiet",
                "--path",
            ])
            .arg(repo_root().join("bins").join(package))
            .arg("--root")
            .arg(root)
            .env("CARGO_TARGET_DIR", target)
            .output()
            .context("run cargo install")?;
        if !out.status.success() {
            bail!(
                "cargo install --path bins/{package} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
    Ok(())
}

/// `target/<profile>` of this test binary (`target/<profile>/deps/e2e-HASH`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// The directory holding the built binaries (building them once per test
/// run): hard links of this run's own, `target/<profile>/test-bins`, so
/// that a build or an install that replaces `target/<profile>/nuon` while
/// tests run changes nothing under them.
pub fn bin_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        if let Ok(dir) = std::env::var("NUON_TEST_BIN_DIR") {
            return PathBuf::from(dir);
        }
        let dir = target_dir();
        build_binaries(dir.file_name().is_some_and(|n| n == "release"), None, None);
        build_runner_next(&dir);
        let ours = dir.join("test-bins");
        std::fs::create_dir_all(&ours).expect("create target/<profile>/test-bins");
        let names = BINARIES
            .iter()
            .map(|(_, bin)| *bin)
            .chain(["nuon-runner-next"]);
        for name in names {
            let to = ours.join(name);
            let _ = std::fs::remove_file(&to);
            if std::fs::hard_link(dir.join(name), &to).is_err() {
                std::fs::copy(dir.join(name), &to).expect("copy a binary into test-bins");
            }
        }
        ours
    })
}

/// The version the second build of `nuon-runner` reports (see
/// [`runner_next`]).
pub const RUNNER_NEXT_VERSION: &str = "99.0.0-next";

/// The `nuon-runner` binary built a second time, as version
/// [`RUNNER_NEXT_VERSION`] (`NUON_RUNNER_VERSION` at build time), for the
/// runner update tests.
pub fn runner_next() -> PathBuf {
    bin_dir().join("nuon-runner-next")
}

/// Builds `nuon-runner` again as [`RUNNER_NEXT_VERSION`], keeps it as
/// `nuon-runner-next`, then builds it back as itself: done once per build
/// of the first (a key of its size and time is kept beside the copy),
/// before any test starts a binary.
fn build_runner_next(dir: &Path) {
    let runner = dir.join("nuon-runner");
    let next = dir.join("nuon-runner-next");
    let key_file = dir.join("nuon-runner-next.key");
    let key_of = |p: &Path| {
        std::fs::metadata(p)
            .map(|m| format!("{} {:?}", m.len(), m.modified().ok()))
            .unwrap_or_default()
    };
    if next.is_file() && std::fs::read_to_string(&key_file).ok() == Some(key_of(&runner)) {
        return;
    }
    let release = dir.file_name().is_some_and(|n| n == "release");
    build_binaries(release, Some("nuon-runner"), Some(RUNNER_NEXT_VERSION));
    std::fs::copy(&runner, &next).expect("keep the second build of nuon-runner");
    build_binaries(release, Some("nuon-runner"), None);
    std::fs::write(&key_file, key_of(&runner)).expect("write the key of nuon-runner-next");
}

/// The log filter for the started binaries (`NUON_TEST_RUST_LOG` overrides).
pub(crate) fn log_filter(default: &str) -> String {
    std::env::var("NUON_TEST_RUST_LOG").unwrap_or_else(|_| default.to_owned())
}

pub fn bin(name: &str) -> PathBuf {
    bin_dir().join(name)
}

/// A command running one of our binaries, without the `NUON_*` variables
/// of the shell that runs the tests (`NUON_SECRETS_KEY`,
/// `NUON_DATABASE_URL`, `NUON_TOKEN`...): a test's result does not depend
/// on them. `NUON_TEST_REQUIRE` is kept.
pub fn ours(name: &str) -> Command {
    ours_via(Command::new(bin(name)))
}

/// `cmd` (one of our binaries, or a program that runs one: `ip netns
/// exec`) with the environment of [`ours`].
pub fn ours_via(mut cmd: Command) -> Command {
    for (k, _) in std::env::vars_os() {
        if k.to_str()
            .is_some_and(|k| k.starts_with("NUON_") && k != "NUON_TEST_REQUIRE")
        {
            cmd.env_remove(k);
        }
    }
    // Hermetic: no runner of a test installs Terraform from the internet;
    // the tests of installs give a loopback mirror with the flags.
    cmd.env("NUON_RUNNER_TERRAFORM_INSTALL", "off");
    // Nor does the CLI read the contexts of whoever runs the tests.
    cmd.env(
        "NUON_CONFIG_DIR",
        std::env::temp_dir().join("nuon-tests-have-no-contexts"),
    );
    cmd
}

/// `nuon-ctl` of the tagged release `tag` (`tests/releases/TAG/commit`
/// names its commit), built once from that commit and cached under the
/// target directory (`releases/COMMIT/nuon-ctl`; CI's target directory is
/// kept between runs, so CI builds each release once). `None`, loudly, when
/// the commit is not in this clone's history (a shallow clone): a failure
/// under `NUON_TEST_REQUIRE=all`.
///
/// Built with this run's target directory, so the release shares every
/// crate of crates.io this run built; this run's own `nuon-ctl` is built
/// again after it (its binary in `target/<profile>` would otherwise be
/// the release's).
pub fn release_ctl(tag: &str) -> Option<PathBuf> {
    static BUILT: std::sync::Mutex<Vec<(String, PathBuf)>> = std::sync::Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, p)) = built.iter().find(|(t, _)| t == tag) {
        return Some(p.clone());
    }
    let root = repo_root();
    let commit_file = root.join("tests/releases").join(tag).join("commit");
    let commit = std::fs::read_to_string(&commit_file)
        .unwrap_or_else(|e| panic!("read {}: {e}", commit_file.display()))
        .trim()
        .to_owned();
    // Our own binaries first: built before the release, so that building
    // them again after it is a relink at most.
    let ours = bin_dir();
    let dir = target_dir().join("releases").join(&commit);
    let ctl = dir.join("nuon-ctl");
    if ctl.is_file() {
        built.push((tag.to_owned(), ctl.clone()));
        return Some(ctl);
    }
    let known = Command::new("git")
        .arg("-C")
        .arg(&root)
        .args(["cat-file", "-e"])
        .arg(format!("{commit}^{{commit}}"))
        .status()
        .is_ok_and(|s| s.success());
    if !known {
        let msg = format!(
            "release {tag}'s commit {commit} is not in this clone's history (a shallow clone?): \
             cannot build it; fetch the full history (git fetch --unshallow)"
        );
        assert!(!require_all(), "{msg} (NUON_TEST_REQUIRE=all)");
        eprintln!("SKIPPED: {msg}");
        return None;
    }
    let src = dir.join("src");
    let _ = std::fs::remove_dir_all(&src);
    std::fs::create_dir_all(&src).expect("create the release's source dir");
    let archive = Command::new("sh")
        .arg("-c")
        .arg("git -C \"$1\" archive --format=tar \"$2\" | tar -x -C \"$3\"")
        .args(["sh"])
        .arg(&root)
        .arg(&commit)
        .arg(&src)
        .status()
        .expect("run git archive");
    assert!(archive.success(), "git archive of {tag} ({commit}) failed");
    let profile = target_dir();
    let release = profile.file_name().is_some_and(|n| n == "release");
    let mut cmd = cargo();
    cmd.current_dir(&src)
        .args(["build", "-q", "--locked", "--offline", "-p", "nuon-ctl"])
        .env(
            "CARGO_TARGET_DIR",
            profile.parent().expect("the target dir"),
        );
    if release {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("run cargo build for a release");
    assert!(
        status.success(),
        "building nuon-ctl of release {tag} failed"
    );
    std::fs::copy(profile.join("nuon-ctl"), &ctl).expect("keep the release's nuon-ctl");
    let _ = std::fs::remove_dir_all(&src);
    // Ours back in target/<profile> (the copy in test-bins was never
    // touched).
    build_binaries(release, Some("nuon-ctl"), None);
    let back = Command::new(profile.join("nuon-ctl"))
        .arg("--version")
        .output()
        .expect("run nuon-ctl --version");
    let mine = Command::new(ours.join("nuon-ctl"))
        .arg("--version")
        .output()
        .expect("run nuon-ctl --version");
    assert_eq!(
        back.stdout, mine.stdout,
        "target/<profile>/nuon-ctl is this run's own again"
    );
    built.push((tag.to_owned(), ctl.clone()));
    Some(ctl)
}
