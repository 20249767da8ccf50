//! Test support: build and start the real binaries on loopback, drive them,
//! and clean up after. Every wait is bounded, so a broken build fails a test
//! instead of hanging it.
//!
//! The fixtures unit tests need too (a throwaway PostgreSQL cluster, the
//! rule for missing tools) live in the light `nuon-test-fixtures` crate and
//! are re-exported here.
#![allow(missing_docs, unsafe_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nuon_client::{ClientConfig, ControlClient};
use nuon_core::JobId;
use nuon_core::wire::{JobInfo, LogEntry};
pub use nuon_test_fixtures::{PgCluster, have_python_module, have_tool, require_all};

pub mod webdriver;

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
fn cargo() -> Command {
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
fn log_filter(default: &str) -> String {
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
    let mut cmd = Command::new(bin(name));
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

/// Waits until `f` returns `Some`, checking every 20 ms, for at most `limit`.
pub fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> Result<T> {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return Ok(v);
        }
        if start.elapsed() > limit {
            bail!("timed out after {limit:?} waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn process_alive(pid: i32) -> bool {
    // A zombie is dead for our purposes.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with('Z'))
            .unwrap_or(false),
        Err(_) => false,
    }
}

pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a pid we started; no memory is involved.
    unsafe {
        libc::kill(pid as i32, sig);
    }
}

/// Sends `sig` to every process of the group `pgid` (a group this test
/// started with `process_group(0)`). Groups 0 and 1 are refused: they
/// would reach far more than the test's own processes.
pub fn signal_group(pgid: u32, sig: i32) {
    let pgid = i32::try_from(pgid).unwrap_or(0);
    assert!(pgid > 1, "refusing to signal process group {pgid}");
    // SAFETY: kill(2) with a negative pid (a group the test started); no
    // memory is involved.
    unsafe {
        libc::kill(-pgid, sig);
    }
}

/// A `nuon-ctl serve` process on a data dir.
pub struct ControlPlane {
    child: Option<Child>,
    pub data_dir: PathBuf,
    pub control_url: String,
    pub runner_url: String,
    pub admin_token: String,
    pub signing_key: String,
    /// The PEM CA its TLS certificate is signed by, when it serves TLS:
    /// given to the CLI, the clients and the runners the tests start.
    pub ca_bundle: Option<PathBuf>,
    lease: String,
    extra: Vec<String>,
    env: Vec<(String, String)>,
    _tmp: Option<tempfile::TempDir>,
    log: PathBuf,
}

impl ControlPlane {
    /// Starts a replica on PostgreSQL at `database_url`, sharing `data_dir`
    /// (the secrets key and the first org's files) with the other replicas;
    /// its log is `logs/ctl-NAME.log`.
    pub fn start_replica(
        data_dir: &Path,
        lease: &str,
        database_url: &str,
        logs: &Path,
        name: &str,
    ) -> Result<Self> {
        Self::start_replica_with(data_dir, lease, database_url, logs, name, &[])
    }

    /// [`Self::start_replica`] with more arguments to `nuon-ctl serve`.
    pub fn start_replica_with(
        data_dir: &Path,
        lease: &str,
        database_url: &str,
        logs: &Path,
        name: &str,
        args: &[&str],
    ) -> Result<Self> {
        let dir = logs.join(name);
        std::fs::create_dir_all(&dir)?;
        let mut extra = vec!["--database-url".to_owned(), database_url.to_owned()];
        extra.extend(args.iter().map(|a| a.to_string()));
        Self::spawn(
            data_dir,
            lease,
            "127.0.0.1:0",
            "127.0.0.1:0",
            &dir,
            extra,
            Vec::new(),
        )
    }

    /// Starts on a fresh data dir with the given lease.
    pub fn start(lease: &str) -> Result<Self> {
        Self::start_with(lease, &[])
    }

    /// [`Self::start`] with more arguments to `nuon-ctl serve`.
    pub fn start_with(lease: &str, args: &[&str]) -> Result<Self> {
        Self::start_with_env(lease, args, &[])
    }

    /// [`Self::start_with`] with `env` added to `nuon-ctl`'s environment
    /// (the AWS keys and endpoint of a template bucket).
    pub fn start_with_env(lease: &str, args: &[&str], env: &[(String, String)]) -> Result<Self> {
        let tmp = tempfile::tempdir()?;
        let data_dir = tmp.path().join("data");
        let mut cp = Self::spawn(
            &data_dir,
            lease,
            "127.0.0.1:0",
            "127.0.0.1:0",
            tmp.path(),
            args.iter().map(|a| a.to_string()).collect(),
            env.to_vec(),
        )?;
        cp._tmp = Some(tmp);
        Ok(cp)
    }

    fn spawn(
        data_dir: &Path,
        lease: &str,
        listen: &str,
        runner_listen: &str,
        logs: &Path,
        extra: Vec<String>,
        env: Vec<(String, String)>,
    ) -> Result<Self> {
        let log = logs.join("ctl.log");
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let mut child = ours("nuon-ctl")
            .args(["serve", "--data-dir"])
            .arg(data_dir)
            .args(["--listen", listen, "--runner-listen", runner_listen])
            .args(["--lease-timeout", lease])
            .args(&extra)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("RUST_LOG", log_filter("info,nuon_control=debug"))
            .stdout(Stdio::piped())
            .stderr(log_file)
            .spawn()
            .context("start nuon-ctl")?;
        let stdout = child.stdout.take().expect("piped");
        let mut lines = BufReader::new(stdout).lines();
        let mut next = |prefix: &str| -> Result<String> {
            let line = lines
                .next()
                .context("nuon-ctl exited before printing its addresses")??;
            line.strip_prefix(prefix)
                .map(str::to_owned)
                .with_context(|| format!("unexpected line {line:?}"))
        };
        let control_url = next("control-api: ")?;
        let runner_url = next("runner-api: ")?;
        let admin_token = std::fs::read_to_string(data_dir.join("admin-token"))?
            .trim()
            .to_owned();
        let signing_key = std::fs::read_to_string(data_dir.join("org-signing-key.pub"))?
            .trim()
            .to_owned();
        Ok(ControlPlane {
            child: Some(child),
            data_dir: data_dir.to_owned(),
            control_url,
            runner_url,
            admin_token,
            signing_key,
            ca_bundle: None,
            lease: lease.to_owned(),
            extra,
            env,
            _tmp: None,
            log,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts again on the same data dir and ports (after [`Self::kill9`]).
    pub fn restart(&mut self) -> Result<()> {
        self.kill9();
        let address = |url: &str| url.split_once("://").map_or(url, |(_, a)| a).to_owned();
        let listen = address(&self.control_url);
        let runner_listen = address(&self.runner_url);
        let logs = self.log.parent().expect("log dir").to_owned();
        let fresh = wait_for("ports to be free again", Duration::from_secs(10), || {
            Self::spawn(
                &self.data_dir,
                &self.lease,
                &listen,
                &runner_listen,
                &logs,
                self.extra.clone(),
                self.env.clone(),
            )
            .ok()
        })?;
        let mut fresh = fresh;
        self.child = fresh.child.take();
        Ok(())
    }

    pub fn client(&self) -> ControlClient {
        self.client_with(&self.admin_token)
    }

    /// The admin's dashboard session, signed in through the sign-in form
    /// as a browser would: the `nuon_session` cookie's value.
    pub fn dashboard_session(&self) -> String {
        rt().block_on(async {
            let http = self.browser();
            let base = &self.control_url;
            let form = http.get(format!("{base}/login")).send().await.unwrap();
            let login = cookie_of(&form, "nuon_login");
            let signed = http
                .post(format!("{base}/login"))
                .header(reqwest::header::COOKIE, format!("nuon_login={login}"))
                .form(&[
                    ("csrf", login.as_str()),
                    ("token", self.admin_token.as_str()),
                ])
                .send()
                .await
                .unwrap();
            assert_eq!(signed.status(), 303, "signing in");
            cookie_of(&signed, "nuon_session")
        })
    }

    /// A dashboard page (`path`) as the admin sees it, signed in through
    /// the sign-in form as a browser would: its HTML.
    pub fn dashboard_page(&self, path: &str) -> String {
        let session = self.dashboard_session();
        rt().block_on(async {
            let page = self
                .browser()
                .get(format!("{}{path}", self.control_url))
                .header(reqwest::header::COOKIE, format!("nuon_session={session}"))
                .send()
                .await
                .unwrap();
            assert_eq!(page.status(), 200, "{path}");
            page.text().await.unwrap()
        })
    }

    /// An HTTP client as a browser of the dashboard: it follows no
    /// redirect, and trusts this control plane's CA.
    pub fn browser(&self) -> reqwest::Client {
        no_redirects(self.ca_bundle.as_deref())
    }

    pub fn client_with(&self, token: &str) -> ControlClient {
        let mut config = ClientConfig::new(&self.control_url, token).expect("config");
        config.ca_bundle = self.ca_bundle.clone();
        ControlClient::new(config).expect("client")
    }

    /// Runs the `nuon` CLI against this control plane.
    pub fn nuon(&self, args: &[&str]) -> Output {
        self.nuon_as(&self.admin_token, args)
    }

    /// Runs the `nuon` CLI against this control plane with `token`.
    pub fn nuon_as(&self, token: &str, args: &[&str]) -> Output {
        let mut c = ours("nuon");
        c.args(args)
            .env("NUON_API_URL", &self.control_url)
            .env("NUON_TOKEN", token)
            .stdin(Stdio::null());
        if let Some(ca) = &self.ca_bundle {
            c.env("NUON_CA_BUNDLE", ca);
        }
        c.output().expect("run nuon")
    }

    /// The environment a runner of this control plane needs beyond its
    /// flags: `NUON_RUNNER_CA_BUNDLE` when it serves TLS.
    pub fn runner_env(&self) -> Vec<(String, String)> {
        (self.ca_bundle.iter())
            .map(|ca| {
                let ca = ca.to_string_lossy().into_owned();
                ("NUON_RUNNER_CA_BUNDLE".to_owned(), ca)
            })
            .collect()
    }

    /// Registers a runner through the CLI and returns its token.
    pub fn create_runner(&self, name: &str) -> Result<String> {
        let out = self.nuon(&["runners", "create", "--name", name, "--json"]);
        if !out.status.success() {
            bail!(
                "runners create failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        Ok(v["token"].as_str().context("token")?.to_owned())
    }

    /// Creates another org in this control plane's data dir with
    /// `nuon-ctl orgs create`; returns its admin token.
    pub fn create_org(&self, name: &str) -> Result<String> {
        let out = ours("nuon-ctl")
            .args(["orgs", "create", name, "--data-dir"])
            .arg(&self.data_dir)
            .args(self.store_args())
            .output()?;
        if !out.status.success() {
            bail!(
                "orgs create failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("admin-token: "))
            .map(str::to_owned)
            .context("no admin-token line in the output of nuon-ctl orgs create")
    }

    /// The arguments naming this control plane's store, for `nuon-ctl`'s
    /// other commands: `--database-url URL` when on PostgreSQL.
    pub fn store_args(&self) -> Vec<String> {
        let at = self.extra.iter().position(|a| a == "--database-url");
        at.map(|i| self.extra[i..i + 2].to_vec())
            .unwrap_or_default()
    }

    pub fn server_log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A `nuon-runner run` process.
pub struct Runner {
    child: Option<Child>,
    pub work_dir: PathBuf,
    _tmp: Option<tempfile::TempDir>,
    pub log: PathBuf,
}

/// How to start a runner.
pub struct RunnerOpts<'a> {
    pub token: &'a str,
    pub signing_key: &'a str,
    pub slots: u32,
    pub grace: &'a str,
    pub work_dir: Option<&'a Path>,
}

impl Runner {
    pub fn start(cp: &ControlPlane, opts: RunnerOpts<'_>) -> Result<Self> {
        Self::start_with_api(&cp.runner_url, opts)
    }

    /// Starts one against `api` (a Runner API URL, or a comma-separated list
    /// of replicas' URLs).
    pub fn start_with_api(api: &str, opts: RunnerOpts<'_>) -> Result<Self> {
        Self::start_with_args(api, opts, &[])
    }

    /// Starts one against `api` with more arguments of `nuon-runner run`
    /// (`--replace`, say).
    pub fn start_with_args(api: &str, opts: RunnerOpts<'_>, args: &[&str]) -> Result<Self> {
        Self::start_with_env(api, opts, args, &[])
    }

    /// [`Runner::start_with_args`] with `env` added to the runner's
    /// environment (jobs inherit what the runner passes on: the AWS
    /// region and endpoint, `TF_CLI_CONFIG_FILE`).
    pub fn start_with_env(
        api: &str,
        opts: RunnerOpts<'_>,
        args: &[&str],
        env: &[(String, String)],
    ) -> Result<Self> {
        let tmp = tempfile::tempdir()?;
        let work_dir = opts
            .work_dir
            .map(Path::to_owned)
            .unwrap_or_else(|| tmp.path().join("work"));
        let log = tmp.path().join("runner.log");
        let log_file = std::fs::File::create(&log)?;
        let child = ours("nuon-runner")
            .arg("run")
            .args(["--api", api, "--token", opts.token])
            .args(["--signing-key", opts.signing_key])
            .arg("--work-dir")
            .arg(&work_dir)
            .args(["--slots", &opts.slots.to_string(), "--grace", opts.grace])
            .args(args)
            .env("RUST_LOG", log_filter("info,nuon_runner_lib=debug"))
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .context("start nuon-runner")?;
        Ok(Runner {
            child: Some(child),
            work_dir,
            _tmp: Some(tmp),
            log,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().map(|c| c.id()).unwrap_or(0)
    }

    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Waits for the process to exit and returns its exit code.
    pub fn wait_exit(&mut self, limit: Duration) -> Result<Option<i32>> {
        let child = self.child.as_mut().context("runner not running")?;
        let status = wait_for("runner to exit", limit, || child.try_wait().ok().flatten())?;
        self.child = None;
        Ok(status.code())
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// One shared tokio runtime for the async client in sync tests. Shared, so
/// a client's pooled connections outlive each `block_on`.
pub fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// Waits (by following the job's log to its end) until the job finishes.
pub fn wait_job(client: &ControlClient, id: &JobId, limit: Duration) -> Result<JobInfo> {
    rt().block_on(async {
        tokio::time::timeout(limit, async {
            let mut f = client.follow_logs(id, 0);
            while f.next().await?.is_some() {}
            loop {
                let job = client.get_job(id).await?;
                if job.status.is_terminal() {
                    return Ok::<_, anyhow::Error>(job);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .with_context(|| format!("job {id} did not finish within {limit:?}"))?
    })
}

/// Every log line of a job.
pub fn all_logs(client: &ControlClient, id: &JobId) -> Result<Vec<LogEntry>> {
    rt().block_on(async {
        let mut out = Vec::new();
        let mut cursor = 0;
        loop {
            let page = client.job_logs(id, cursor).await?;
            if page.lines.is_empty() {
                return Ok(out);
            }
            cursor = page.next;
            out.extend(page.lines);
        }
    })
}

/// Reads a pid a job wrote into `path`, waiting for it to appear.
pub fn read_pid(path: &Path) -> Result<i32> {
    wait_for("the job to write its pid", Duration::from_secs(20), || {
        std::fs::read_to_string(path)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    })
}

/// A Distribution registry (`docker-registry`, Debian's package) on a
/// loopback port, with its storage in a temporary directory; with
/// `htpasswd`, it wants basic credentials (`USER`, `PASSWORD`).
pub struct Registry {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// `127.0.0.1:PORT`, as skopeo names it.
    pub host: String,
    _tmp: tempfile::TempDir,
}

impl Registry {
    /// Starts one; `None` when `docker-registry` is not installed (said
    /// loudly; a failure under `NUON_TEST_REQUIRE=all`).
    pub fn start(htpasswd: Option<(&str, &str)>) -> Result<Option<Self>> {
        if !have_tool("docker-registry", "run a loopback OCI registry") {
            return Ok(None);
        }
        let tmp = tempfile::tempdir()?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut config = format!(
            "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: 127.0.0.1:{port}\n",
            tmp.path().join("data").display()
        );
        if let Some((user, password)) = htpasswd {
            anyhow::ensure!(
                have_tool("htpasswd", "write a registry's password file"),
                "htpasswd is missing"
            );
            let out = Command::new("htpasswd")
                .args(["-Bbn", user, password])
                .output()?;
            anyhow::ensure!(out.status.success(), "htpasswd failed");
            std::fs::write(tmp.path().join("htpasswd"), &out.stdout)?;
            config.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: nuon-test\n    path: {}\n",
                tmp.path().join("htpasswd").display()
            ));
        }
        let config_path = tmp.path().join("config.yml");
        std::fs::write(&config_path, config)?;
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&config_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(tmp.path().join("registry.log"))?)
            .spawn()
            .context("start docker-registry")?;
        let host = format!("127.0.0.1:{port}");
        wait_for("the registry to listen", Duration::from_secs(20), || {
            std::net::TcpStream::connect(&host).ok()
        })?;
        Ok(Some(Registry {
            child,
            url: format!("http://{host}"),
            host,
            _tmp: tmp,
        }))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Pseudo-random bytes (xorshift), the same for the same seed: layers
/// that do not compress and do not repeat across fixtures.
pub fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Puts an image into `store`/`repo` under `tag`: for each platform, a
/// config and random layers, one per `(size, seed)` (the same seed makes
/// the same layer, to share it between images); with more than one
/// platform, an OCI index of them. Returns the digest the tag names.
pub async fn make_image(
    store: &dyn nuon_core::artifact::ArtifactStore,
    repo: &str,
    tag: &str,
    layers: &[(usize, u64)],
    platforms: &[&str],
) -> Result<nuon_core::artifact::Digest> {
    use nuon_core::artifact::{
        Descriptor, Digest, INDEX_MEDIA_TYPE, MANIFEST_MEDIA_TYPE, RawManifest,
    };
    let put = |bytes: Vec<u8>, media_type: &str| {
        let d = Descriptor {
            media_type: media_type.into(),
            digest: Digest::of(&bytes),
            size: bytes.len() as u64,
            annotations: Default::default(),
        };
        async move {
            store
                .put_blob(repo, &d, Box::pin(std::io::Cursor::new(bytes)))
                .await?;
            Ok::<_, anyhow::Error>(d)
        }
    };
    let mut children = Vec::new();
    for (p, platform) in platforms.iter().enumerate() {
        let (os, arch) = platform.split_once('/').unwrap_or(("linux", platform));
        let config = serde_json::to_vec(&serde_json::json!({
            "architecture": arch, "os": os, "rootfs": {"type": "layers", "diff_ids": []},
            "config": {"Labels": {"nuon.test/tag": tag}},
        }))?;
        let config = put(config, "application/vnd.oci.image.config.v1+json").await?;
        let mut descs = Vec::new();
        for (size, seed) in layers {
            let bytes = random_bytes(*size, seed ^ ((p as u64) << 32));
            descs.push(put(bytes, "application/vnd.oci.image.layer.v1.tar").await?);
        }
        let bytes = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2, "mediaType": MANIFEST_MEDIA_TYPE,
            "config": config, "layers": descs,
        }))?;
        let m = RawManifest {
            digest: Digest::of(&bytes),
            bytes,
            media_type: MANIFEST_MEDIA_TYPE.into(),
        };
        let single = platforms.len() == 1;
        store.put_manifest(repo, &m, single.then_some(tag)).await?;
        if single {
            return Ok(m.digest);
        }
        children.push(serde_json::json!({
            "mediaType": MANIFEST_MEDIA_TYPE, "digest": m.digest, "size": m.bytes.len(),
            "platform": {"os": os, "architecture": arch},
        }));
    }
    let bytes = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2, "mediaType": INDEX_MEDIA_TYPE, "manifests": children,
    }))?;
    let index = RawManifest {
        digest: Digest::of(&bytes),
        bytes,
        media_type: INDEX_MEDIA_TYPE.into(),
    };
    store.put_manifest(repo, &index, Some(tag)).await?;
    Ok(index.digest)
}

/// The `tests` package's directory: cargo's at run time (a binary built in
/// another checkout of the tree keeps that checkout's path in `env!`).
pub fn manifest_dir() -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|| env!("CARGO_MANIFEST_DIR").into())
        .into()
}

/// The WASM plugins the tests run, built for `wasm32-wasip2`.
#[derive(Debug, Clone)]
pub struct WasmPlugins {
    /// The example plugin of `examples/plugins/records`.
    pub records: PathBuf,
    /// `tests/plugins/hostile`: its config picks an attack.
    pub hostile: PathBuf,
    /// `tests/plugins/compat`: built against the frozen 0.1.0 contract.
    pub compat: PathBuf,
    /// `tests/plugins/other-world`: a WASI command, not a plugin.
    pub other_world: PathBuf,
}

/// The repository's root.
pub fn repo_root() -> PathBuf {
    manifest_dir()
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// Where the plugins are built: a target directory of their own (so the
/// build does not wait on the lock of the one running the tests).
fn plugin_target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(d) => PathBuf::from(d).join("wasm-plugins"),
        None => repo_root().join("target").join("wasm-plugins"),
    }
}

/// Builds the Rust plugins (once per test process, incrementally across
/// runs). `None`, said loudly, when the `wasm32-wasip2` target is not
/// installed (a failure under `NUON_TEST_REQUIRE=all`).
pub fn wasm_plugins() -> Option<WasmPlugins> {
    static BUILT: OnceLock<Result<WasmPlugins, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        let sysroot = Command::new("rustc")
            .args(["--print", "sysroot"])
            .output()
            .map_err(|e| format!("rustc: {e}"))?;
        let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_owned();
        if !Path::new(&sysroot)
            .join("lib/rustlib/wasm32-wasip2")
            .is_dir()
        {
            return Err(
                "the wasm32-wasip2 target is not installed (rustup target add wasm32-wasip2)"
                    .into(),
            );
        }
        let target = plugin_target_dir();
        let out = cargo()
            .current_dir(repo_root())
            .args([
                "build",
                "--release",
                "--target",
                "wasm32-wasip2",
                "-p",
                "records-plugin",
                "-p",
                "hostile-plugin",
                "-p",
                "compat-plugin",
                "-p",
                "other-world",
                "--target-dir",
            ])
            .arg(&target)
            .output()
            .map_err(|e| format!("cargo: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "building the test plugins failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let dir = target.join("wasm32-wasip2/release");
        Ok(WasmPlugins {
            records: dir.join("records_plugin.wasm"),
            hostile: dir.join("hostile_plugin.wasm"),
            compat: dir.join("compat_plugin.wasm"),
            other_world: dir.join("other-world.wasm"),
        })
    });
    match built {
        Ok(p) => Some(p.clone()),
        Err(e) if e.contains("not installed") => {
            assert!(!require_all(), "{e} (NUON_TEST_REQUIRE=all)");
            eprintln!("SKIPPED: {e}");
            None
        }
        Err(e) => panic!("{e}"),
    }
}

/// The Python example plugin (`examples/plugins/inventory-py`) built with
/// componentize-py; `None`, said loudly, when componentize-py is missing.
pub fn python_plugin() -> Option<PathBuf> {
    static BUILT: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    if !have_tool("componentize-py", "build the Python plugin") {
        return None;
    }
    let built = BUILT.get_or_init(|| {
        let src = repo_root().join("examples/plugins/inventory-py");
        let out_dir = plugin_target_dir();
        std::fs::create_dir_all(&out_dir).map_err(|e| e.to_string())?;
        let out = out_dir.join("inventory.wasm");
        let fresh = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
        if fresh(&out).is_some() && fresh(&out) >= fresh(&src.join("app.py")) {
            return Ok(out);
        }
        let wit = repo_root().join("nuon-plugins/sdk/wit");
        let run = Command::new("componentize-py")
            .arg("-d")
            .arg(&wit)
            .args(["-w", "nuon-plugin", "componentize", "app", "-p"])
            .arg(&src)
            .arg("-o")
            .arg(&out)
            .output()
            .map_err(|e| format!("componentize-py: {e}"))?;
        if !run.status.success() {
            return Err(format!(
                "componentize-py failed:\n{}",
                String::from_utf8_lossy(&run.stderr)
            ));
        }
        Ok(out)
    });
    Some(built.clone().unwrap_or_else(|e| panic!("{e}")))
}

/// A record service on a loopback port: the HTTP API the records example
/// plugin manages (`GET|PUT|DELETE /records/{collection}/{id}`, a bearer
/// token), in memory. It counts every request it is sent.
pub struct RecordService {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The bearer token it wants.
    pub token: String,
    state: std::sync::Arc<std::sync::Mutex<RecordState>>,
    _stop: tokio::sync::oneshot::Sender<()>,
}

#[derive(Default)]
struct RecordState {
    records: std::collections::BTreeMap<String, serde_json::Value>,
    requests: usize,
}

impl RecordService {
    /// Starts one on its own thread.
    pub fn start(token: &str) -> Result<RecordService> {
        use axum::extract::{Path as UrlPath, State};
        use axum::http::{HeaderMap, StatusCode};
        use axum::routing::get;
        use axum::{Json, Router};
        type Shared = std::sync::Arc<std::sync::Mutex<RecordState>>;
        let state: Shared = Default::default();
        let want = format!("Bearer {token}");
        let authed = move |h: &HeaderMap| {
            h.get("authorization").and_then(|v| v.to_str().ok()) == Some(want.as_str())
        };
        let (a1, a2, a3) = (authed.clone(), authed.clone(), authed);
        let app = Router::new()
            .route(
                "/records/{collection}/{id}",
                get(
                    move |State(s): State<Shared>,
                          UrlPath((c, id)): UrlPath<(String, String)>,
                          h: HeaderMap| async move {
                        let mut s = s.lock().unwrap();
                        s.requests += 1;
                        if !a1(&h) {
                            return Err(StatusCode::UNAUTHORIZED);
                        }
                        s.records
                            .get(&format!("{c}/{id}"))
                            .cloned()
                            .map(Json)
                            .ok_or(StatusCode::NOT_FOUND)
                    },
                )
                .put(
                    move |State(s): State<Shared>,
                          UrlPath((c, id)): UrlPath<(String, String)>,
                          h: HeaderMap,
                          Json(body): Json<serde_json::Value>| async move {
                        let mut s = s.lock().unwrap();
                        s.requests += 1;
                        if !a2(&h) {
                            return Err(StatusCode::UNAUTHORIZED);
                        }
                        let key = format!("{c}/{id}");
                        let revision = s
                            .records
                            .get(&key)
                            .and_then(|r| r["revision"].as_u64())
                            .unwrap_or(0)
                            + 1;
                        let record =
                            serde_json::json!({"fields": body["fields"], "revision": revision});
                        s.records.insert(key, record.clone());
                        Ok(Json(record))
                    },
                )
                .delete(
                    move |State(s): State<Shared>,
                          UrlPath((c, id)): UrlPath<(String, String)>,
                          h: HeaderMap| async move {
                        let mut s = s.lock().unwrap();
                        s.requests += 1;
                        if !a3(&h) {
                            return StatusCode::UNAUTHORIZED;
                        }
                        match s.records.remove(&format!("{c}/{id}")) {
                            Some(_) => StatusCode::NO_CONTENT,
                            None => StatusCode::NOT_FOUND,
                        }
                    },
                ),
            )
            .with_state(state.clone());
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).expect("listener");
                let _ = axum::serve(listener, app)
                    .with_graceful_shutdown(async {
                        let _ = stopped.await;
                    })
                    .await;
            });
        });
        Ok(RecordService {
            url,
            token: token.into(),
            state,
            _stop: stop,
        })
    }

    /// Record `collection/id`, if there is one.
    pub fn get(&self, collection: &str, id: &str) -> Option<serde_json::Value> {
        self.state
            .lock()
            .unwrap()
            .records
            .get(&format!("{collection}/{id}"))
            .cloned()
    }

    /// How many requests it has been sent.
    pub fn requests(&self) -> usize {
        self.state.lock().unwrap().requests
    }
}

/// An HTTP client that shows redirects instead of following them.
fn no_redirects(ca: Option<&Path>) -> reqwest::Client {
    let mut b = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none());
    if let Some(ca) = ca {
        let pem = std::fs::read(ca).expect("the CA bundle");
        b = b.add_root_certificate(reqwest::Certificate::from_pem(&pem).expect("a PEM CA"));
    }
    b.build().unwrap()
}

/// The value of the cookie `name` a response sets.
fn cookie_of(r: &reqwest::Response, name: &str) -> String {
    r.headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find_map(|v| v.strip_prefix(&format!("{name}=")))
        .and_then(|v| v.split(';').next())
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no {name} cookie"))
}
