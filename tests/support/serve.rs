//! The control plane and runners as processes: `nuon-ctl serve` on a
//! data dir, `nuon-runner run` against it, stopped when dropped.

use super::*;

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
    /// The `nuon-ctl` it runs: this build's, or a release's.
    binary: PathBuf,
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
        let ctl = bin("nuon-ctl");
        Self::start_replica_of(&ctl, data_dir, lease, database_url, logs, name, args)
    }

    /// [`Self::start_replica_with`] running `binary` (a release's
    /// `nuon-ctl`: [`release_ctl`]).
    pub fn start_replica_of(
        binary: &Path,
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
            binary,
            data_dir,
            lease,
            ["127.0.0.1:0", "127.0.0.1:0"],
            &dir,
            extra,
            Vec::new(),
        )
    }

    /// Starts on the data dir `data_dir` as it is (a restored one, say,
    /// holding the admin token put back); its log is `logs/ctl.log`.
    pub fn start_on(data_dir: &Path, lease: &str, logs: &Path) -> Result<Self> {
        std::fs::create_dir_all(logs)?;
        Self::spawn(
            &bin("nuon-ctl"),
            data_dir,
            lease,
            ["127.0.0.1:0", "127.0.0.1:0"],
            logs,
            Vec::new(),
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
        Self::start_of(&bin("nuon-ctl"), lease, args, env)
    }

    /// [`Self::start_with_env`] running `binary` (a release's `nuon-ctl`:
    /// [`release_ctl`]).
    pub fn start_of(
        binary: &Path,
        lease: &str,
        args: &[&str],
        env: &[(String, String)],
    ) -> Result<Self> {
        let tmp = tempfile::tempdir()?;
        let data_dir = tmp.path().join("data");
        let mut cp = Self::spawn(
            binary,
            &data_dir,
            lease,
            ["127.0.0.1:0", "127.0.0.1:0"],
            tmp.path(),
            args.iter().map(|a| a.to_string()).collect(),
            env.to_vec(),
        )?;
        cp._tmp = Some(tmp);
        Ok(cp)
    }

    fn spawn(
        binary: &Path,
        data_dir: &Path,
        lease: &str,
        [listen, runner_listen]: [&str; 2],
        logs: &Path,
        extra: Vec<String>,
        env: Vec<(String, String)>,
    ) -> Result<Self> {
        let log = logs.join("ctl.log");
        let log_file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)?;
        let mut child = ours_via(Command::new(binary))
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
            binary: binary.to_owned(),
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

    /// Stops it and starts `binary` in its place (same data dir, ports
    /// and arguments): one replica's step of a rolling upgrade.
    pub fn upgrade_to(&mut self, binary: &Path) -> Result<()> {
        self.stop();
        self.binary = binary.to_owned();
        self.restart()
    }

    /// Stops it as an operator does: `SIGTERM`, then `SIGKILL` if it is
    /// still there after 30 s.
    pub fn stop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = Command::new("kill")
                .args(["-TERM", &c.id().to_string()])
                .status();
            let until = Instant::now() + Duration::from_secs(30);
            while Instant::now() < until {
                if c.try_wait().ok().flatten().is_some() {
                    self.child = None;
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        self.kill9();
    }

    /// The `nuon-ctl` it runs.
    pub fn binary(&self) -> &Path {
        &self.binary
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
                &self.binary,
                &self.data_dir,
                &self.lease,
                [&listen, &runner_listen],
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

    /// A runner named `name`, registered and started against this control
    /// plane: one slot, a 5 s grace, a work dir of its own.
    pub fn start_runner(&self, name: &str) -> Result<Runner> {
        let token = self.create_runner(name)?;
        Runner::start(
            self,
            RunnerOpts {
                token: &token,
                signing_key: &self.signing_key,
                slots: 1,
                grace: "5s",
                work_dir: None,
            },
        )
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
        Self::start_in(None, api, opts, args, env)
    }

    /// [`Runner::start_with_env`], on the host `netns` when given (its
    /// own network namespace, which reaches only its link's host end).
    pub fn start_in(
        netns: Option<&Netns>,
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
        let child = netns
            .map_or_else(|| ours("nuon-runner"), |ns| ns.ours("nuon-runner"))
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
