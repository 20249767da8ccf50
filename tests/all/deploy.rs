//! "Terraform apps end to end": `nuon dev` on the example app with the real
//! binaries and real `terraform`: provision in dependency order with
//! outputs flowing, a second run that plans no changes, approvals and
//! denials, teardown and deprovision, deploys from the install's own store
//! only, and broken inputs refused before any job runs.

use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use nuon_client::{ClientConfig, ControlClient};
use nuon_core::wire::WorkflowInfo;
use nuon_core::workflow::WorkflowKind;
use nuon_test_fixtures::mirror::{Flavor, ReleaseMirror};
use nuon_tests::{ControlPlane, bin, have_tool, ours, rt, signal, wait_for};

pub(crate) fn example() -> PathBuf {
    nuon_tests::manifest_dir().join("../examples/apps/hello")
}

pub(crate) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `nuon dev` on `data_dir` with the given extra flags.
pub(crate) fn dev(data_dir: &Path, ports: (u16, u16), extra: &[&str]) -> Command {
    dev_of(&example(), data_dir, ports, extra)
}

/// `nuon dev` of the app in `app_dir`.
pub(crate) fn dev_of(
    app_dir: &Path,
    data_dir: &Path,
    ports: (u16, u16),
    extra: &[&str],
) -> Command {
    let mut c = ours("nuon");
    c.arg("dev")
        .arg("--data-dir")
        .arg(data_dir)
        .arg("--app-dir")
        .arg(app_dir)
        .args(["--listen", &format!("127.0.0.1:{}", ports.0)])
        .args(["--runner-listen", &format!("127.0.0.1:{}", ports.1)])
        .args(extra)
        .stdin(Stdio::null());
    c
}

pub(crate) fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A client of the control plane, once it has written its admin token.
fn client(data_dir: &Path, port: u16) -> Option<ControlClient> {
    let token = std::fs::read_to_string(data_dir.join("control/admin-token")).ok()?;
    let config = ClientConfig::new(&format!("http://127.0.0.1:{port}"), token.trim()).ok()?;
    ControlClient::new(config).ok()
}

pub(crate) fn newest_workflow(c: &ControlClient) -> WorkflowInfo {
    rt().block_on(c.list_workflows("demo"))
        .expect("workflows")
        .workflows
        .into_iter()
        .next()
        .expect("a workflow")
}

pub(crate) fn wait_workflow(
    c: &ControlClient,
    id: &str,
    done: impl Fn(&WorkflowInfo) -> bool,
) -> WorkflowInfo {
    wait_workflow_for(c, id, done, Duration::from_secs(120))
}

/// [`wait_workflow`], waiting up to `limit`.
pub(crate) fn wait_workflow_for(
    c: &ControlClient,
    id: &str,
    done: impl Fn(&WorkflowInfo) -> bool,
    limit: Duration,
) -> WorkflowInfo {
    wait_for("the workflow", limit, || {
        let w = rt().block_on(c.get_workflow(id)).ok()?;
        done(&w).then_some(w)
    })
    .expect("workflow reached the state")
}

pub(crate) fn ended(w: &WorkflowInfo) -> bool {
    !matches!(w.status.as_str(), "pending" | "running" | "cancelling")
}

pub(crate) fn step<'a>(w: &'a WorkflowInfo, name: &str) -> &'a nuon_core::wire::WorkflowStepInfo {
    w.steps
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no step {name} in {w:#?}"))
}

pub(crate) fn run_workflow(c: &ControlClient, kind: WorkflowKind) -> WorkflowInfo {
    run_workflow_for(c, kind, Duration::from_secs(120))
}

/// [`run_workflow`], waiting up to `limit` (a workflow of real cloud
/// providers on a loaded machine takes minutes).
pub(crate) fn run_workflow_for(
    c: &ControlClient,
    kind: WorkflowKind,
    limit: Duration,
) -> WorkflowInfo {
    let wf = rt()
        .block_on(c.create_workflow("demo", kind, None))
        .expect("create workflow");
    wait_workflow_for(c, wf.id.as_str(), ended, limit)
}

/// A `nuon dev` left running (until SIGINT).
struct Dev(Child);

impl Drop for Dev {
    fn drop(&mut self) {
        signal(self.0.id(), SIGINT);
        let _ = wait_for("nuon dev to stop", Duration::from_secs(30), || {
            self.0.try_wait().ok().flatten()
        });
        let _ = self.0.kill();
    }
}

const SIGINT: i32 = 2;

/// A client of the `nuon dev` on `data`, once its provision of the demo
/// has ended.
pub(crate) fn provisioned_by_dev(data: &Path, port: u16) -> ControlClient {
    let c = wait_for("nuon dev to be up", Duration::from_secs(60), || {
        client(data, port)
    })
    .unwrap();
    wait_for(
        "the demo's provision to end",
        Duration::from_secs(180),
        || {
            let w = rt().block_on(c.list_workflows("demo")).ok()?;
            w.workflows.first().filter(|w| ended(w)).map(drop)
        },
    )
    .unwrap();
    c
}

/// An app of one Terraform component, `box`, that makes one resource.
pub(crate) const BOX_APP: [(&str, &str); 3] = [
    METADATA,
    (
        "components/box.toml",
        "name = \"box\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/box\"\n",
    ),
    (
        "src/box/main.tf",
        "resource \"terraform_data\" \"box\" {\n  input = \"box\"\n}\n",
    ),
];

#[test]
fn dev_provisions_the_example_then_redeploys_tears_down_and_deploys_only_from_its_store() {
    if !have_tool("terraform", "run the example app's Terraform") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let ports = (free_port(), free_port());

    // 1. A fresh data dir: provisioned, in dependency order, outputs flowing.
    let out = dev(&data, ports, &["--once"]).output().unwrap();
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    // No hand-started runner: the VM bundle brings it, and the provision
    // waits for its phone-home, then for it to be healthy.
    assert!(log.contains("sh install.sh --no-systemd"), "{log}");
    let order: Vec<usize> = [
        "await install stack",
        "await runner",
        "plan sandbox",
        "apply sandbox",
        "apply database",
        "apply app",
        "action smoke_test",
    ]
    .iter()
    .map(|s| {
        log.find(&format!("{s:<32} succeeded"))
            .unwrap_or_else(|| panic!("{s}: {log}"))
    })
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{log}");
    assert!(log.contains("==> phases:"), "{log}");

    // Second run (kept running for the checks below): no changes planned.
    let said = data.with_extension("stderr");
    let child = dev(&data, ports, &[])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&said).unwrap())
        .spawn()
        .unwrap();
    let dev_proc = Dev(child);
    let c = wait_for("the control plane", Duration::from_secs(30), || {
        let c = client(&data, ports.0)?;
        rt().block_on(c.list_workflows("demo"))
            .ok()
            .filter(|l| l.workflows.len() >= 2)
            .map(|_| c)
    })
    .unwrap();
    let second = newest_workflow(&c);
    let second = wait_workflow(&c, second.id.as_str(), ended);
    assert_eq!(second.status, "succeeded", "{second:#?}");
    for p in ["plan sandbox", "plan database", "plan app"] {
        let ch = &step(&second, p).outputs["changes"];
        assert_eq!(
            (
                ch["add"].as_u64(),
                ch["change"].as_u64(),
                ch["destroy"].as_u64()
            ),
            (Some(0), Some(0), Some(0)),
            "{p} planned changes on the second run: {ch}"
        );
    }
    // It prints a one-time sign-in link for the local admin, never the
    // admin token.
    let admin = std::fs::read_to_string(data.join("control/admin-token")).unwrap();
    let prefix = format!("http://127.0.0.1:{}/login?code=", ports.0);
    let printed = wait_for("the dashboard's link", Duration::from_secs(30), || {
        std::fs::read_to_string(&said)
            .ok()
            .filter(|t| t.contains(&prefix))
    })
    .unwrap();
    assert!(
        !printed.contains(admin.trim()),
        "nuon dev printed the admin token"
    );
    let code = printed.split(&prefix).nth(1).unwrap();
    let code: String = code.chars().take_while(char::is_ascii_hexdigit).collect();
    let page = rt()
        .block_on(async { reqwest::get(format!("{prefix}{code}")).await?.text().await })
        .unwrap();
    assert!(page.contains("Sign in?"), "the printed link's page: {page}");
    let login = rt()
        .block_on(reqwest::get(format!("http://127.0.0.1:{}/login", ports.0)))
        .unwrap();
    assert_eq!(login.status(), 200);
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.components["database"]["admin_dsn"], "(sensitive)");
    assert_eq!(outputs.sensitive, ["database.admin_dsn"]);
    let apply_db = step(&second, "apply database");
    assert_eq!(apply_db.outputs["outputs"]["admin_dsn"], "(sensitive)");
    let network = outputs.sandbox["network_id"].as_str().unwrap().to_owned();
    let db_url = outputs.components["database"]["url"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        db_url.contains(&network),
        "the sandbox's output reached the database: {db_url}"
    );
    let messages = outputs.components["app"]["messages"].to_string();
    assert!(
        messages.contains(&db_url),
        "the database's output reached the app: {messages}"
    );

    // The sensitive input the action reads is redacted on the runner, and
    // not shown in the job's payload either.
    let action = step(&second, "action smoke_test");
    let job = action.job_id.clone().unwrap();
    let logs = nuon_tests::all_logs(&c, &job).unwrap();
    let log: String = logs.iter().map(|l| format!("{}\n", l.text)).collect();
    assert!(log.contains("with key ***"), "{log}");
    assert!(!log.contains("demo-key"), "{log}");
    let info = rt().block_on(c.get_job(&job)).unwrap();
    assert!(
        !info.payload.to_string().contains("demo-key"),
        "{}",
        info.payload
    );

    // 5. A corrupted blob in the install's store is found by digest and
    // copied again, never deployed.
    let store = data.join("installs/demo/store");
    let mut corrupted = 0;
    for entry in walk(&store) {
        if entry.to_string_lossy().contains("/database/blobs/sha256/")
            && std::fs::metadata(&entry)
                .map(|m| m.len() > 100)
                .unwrap_or(false)
        {
            let mut bytes = std::fs::read(&entry).unwrap();
            bytes[50] ^= 0xff;
            std::fs::write(&entry, bytes).unwrap();
            corrupted += 1;
        }
    }
    assert!(corrupted > 0, "no module blob found in {}", store.display());
    let wf = run_workflow(&c, WorkflowKind::Deploy);
    assert_eq!(wf.status, "succeeded", "{wf:#?}");
    assert!(
        step(&wf, "sync database").outputs["copied"].as_u64() >= Some(1),
        "{:#?}",
        step(&wf, "sync database")
    );

    // Deleting the vendor's store does not break a redeploy of the same build.
    std::fs::remove_dir_all(data.join("vendor-store")).unwrap();
    let wf = run_workflow(&c, WorkflowKind::Deploy);
    assert_eq!(wf.status, "succeeded", "{wf:#?}");

    // 3. Deprovision destroys in reverse order and leaves no outputs; a
    // later provision starts clean.
    let wf = run_workflow(&c, WorkflowKind::Deprovision);
    assert_eq!(wf.status, "succeeded", "{wf:#?}");
    let names: Vec<&str> = wf.steps.iter().map(|s| s.name.as_str()).collect();
    let at = |n: &str| names.iter().position(|x| *x == n).unwrap();
    assert!(at("destroy app") < at("destroy database"));
    assert!(at("destroy database") < at("destroy sandbox"));
    let ch = &step(&wf, "plan destroy database").outputs["changes"];
    assert!(ch["destroy"].as_u64() >= Some(1), "{ch}");
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert!(
        outputs.sandbox.is_empty() && outputs.components.is_empty(),
        "{outputs:?}"
    );
    let install = rt().block_on(c.get_install("demo")).unwrap();
    assert_eq!(install.state, "deprovisioned");
    let states = rt().block_on(c.list_states("demo")).unwrap();
    assert!(states.states.iter().all(|s| s.lock.is_none()), "{states:?}");

    // The vendor's store is gone: a provision now needs a rebuild, and says so.
    std::fs::create_dir_all(data.join("vendor-store")).unwrap();
    let wf = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(wf.status, "succeeded", "{wf:#?}");
    let ch = &step(&wf, "plan database").outputs["changes"];
    assert!(
        ch["add"].as_u64() >= Some(1),
        "a provision after deprovision starts clean: {ch}"
    );
    drop(dev_proc);
}

/// Every file under `dir` (symbolic links are not followed: a runner's
/// provider cache links into the machine's provider mirror).
pub(crate) fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(t) = e.file_type() else { continue };
            if t.is_dir() {
                stack.push(e.path());
            } else if t.is_file() {
                out.push(e.path());
            }
        }
    }
    out
}

#[test]
fn prompt_waits_for_approvals_and_a_denial_skips_the_component_and_its_dependents() {
    if !have_tool("terraform", "run the example app's Terraform") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let ports = (free_port(), free_port());
    // The issue "The destroy side and the CLI's contracts", point 5: `nuon
    // dev` takes the install's approval mode from installs/demo.toml.
    let app = tmp.path().join("hello");
    std::fs::create_dir_all(&app).unwrap();
    copy_dir(&example(), &app);
    let decl = app.join("installs/demo.toml");
    let declared = std::fs::read_to_string(&decl).unwrap();
    std::fs::write(
        &decl,
        declared.replace(
            "approval_option = \"approve-all\"",
            "approval_option = \"prompt\"",
        ),
    )
    .unwrap();
    let child = dev_of(&app, &data, ports, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _dev = Dev(child);
    let c = wait_for("the workflow", Duration::from_secs(60), || {
        let c = client(&data, ports.0)?;
        rt().block_on(c.list_workflows("demo"))
            .ok()
            .filter(|l| !l.workflows.is_empty())
            .map(|_| c)
    })
    .unwrap();
    let wf = newest_workflow(&c);
    let id = wf.id.as_str().to_owned();
    let waiting = |name: &'static str| {
        move |w: &WorkflowInfo| {
            w.steps
                .iter()
                .any(|s| s.name == name && s.status == "waiting_approval")
        }
    };
    let w = wait_workflow(&c, &id, waiting("apply sandbox"));
    assert_eq!(step(&w, "plan sandbox").status, "succeeded");
    assert_eq!(
        step(&w, "sync database").status,
        "pending",
        "nothing runs past a waiting step"
    );
    // Approving a step that needs no approval is refused, and so is an
    // approval of an apply whose plan has not run.
    let e = rt()
        .block_on(c.approve_step(&id, Some("plan app")))
        .unwrap_err();
    assert!(e.to_string().contains("does not wait"), "{e}");
    let e = rt()
        .block_on(c.approve_step(&id, Some("apply app")))
        .unwrap_err();
    assert!(e.to_string().contains("plan has not run"), "{e}");
    rt().block_on(c.approve_step(&id, None)).unwrap();
    let w = wait_workflow(&c, &id, waiting("apply database"));
    assert_eq!(step(&w, "apply sandbox").status, "succeeded");
    // The CLI denies it: the database and what depends on it are skipped.
    let out = ours("nuon")
        .args(["--api", &format!("http://127.0.0.1:{}", ports.0)])
        .args([
            "--token",
            std::fs::read_to_string(data.join("control/admin-token"))
                .unwrap()
                .trim(),
        ])
        .args(["workflows", "deny", &id])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let w = wait_workflow(&c, &id, ended);
    assert_eq!(w.status, "partial", "{w:#?}");
    assert_eq!(step(&w, "apply database").status, "denied");
    for s in ["sync app", "plan app", "apply app", "action smoke_test"] {
        assert_eq!(step(&w, s).status, "skipped", "{s}: {w:#?}");
        assert!(
            step(&w, s)
                .reason
                .as_deref()
                .unwrap_or("")
                .contains("denied")
        );
    }
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert!(
        outputs.components.is_empty() && !outputs.sandbox.is_empty(),
        "{outputs:?}"
    );

    // 7. A template that renders to nothing is refused before any job runs.
    let out = ours("nuon")
        .args(["--api", &format!("http://127.0.0.1:{}", ports.0)])
        .args([
            "--token",
            std::fs::read_to_string(data.join("control/admin-token"))
                .unwrap()
                .trim(),
        ])
        .args(["installs", "inputs", "set", "demo", "greeting="])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let before = rt().block_on(c.list_jobs()).unwrap().jobs.len();
    let e = rt()
        .block_on(c.create_workflow("demo", WorkflowKind::Deploy, None))
        .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("greeting") && msg.contains("renders to nothing"),
        "{msg}"
    );
    assert_eq!(
        rt().block_on(c.list_jobs()).unwrap().jobs.len(),
        before,
        "no job ran"
    );
}

/// A control plane with the org's build runner, an app synced from files
/// written here, its builds done, and an install with its runner.
pub(crate) struct Manual {
    pub(crate) cp: ControlPlane,
    pub(crate) dir: tempfile::TempDir,
    build_runner: Child,
    install_runner: Option<Child>,
    install_token: String,
    /// The install runner's vendor store (none: only its own store).
    vendor: Option<String>,
    /// The install runner's store.
    store_dir: PathBuf,
    /// More arguments of the install runner's `nuon-runner run`.
    runner_args: Vec<String>,
    /// More environment of the install runner.
    runner_env: Vec<(String, String)>,
    /// The network namespace the install runner runs in, and the Runner
    /// API's URL as it reaches it from there (none: this host, loopback).
    runner_host: Option<(String, String)>,
}

impl Drop for Manual {
    fn drop(&mut self) {
        for c in [Some(&mut self.build_runner), self.install_runner.as_mut()]
            .into_iter()
            .flatten()
        {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

pub(crate) fn write_files(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let p = root.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

pub(crate) fn ok(out: Output) -> String {
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Manual {
    pub(crate) fn start(files: &[(&str, &str)]) -> Manual {
        Self::start_with(files, None)
    }

    /// With `vendor` (a registry URL) as the vendor's store instead of a
    /// directory.
    pub(crate) fn start_with(files: &[(&str, &str)], vendor: Option<&str>) -> Manual {
        Self::start_full(files, vendor, |_| {}, &[])
    }

    /// With `prepare` called on the app's directory before the sync, and
    /// `install_args` added to `nuon installs create`.
    pub(crate) fn start_full(
        files: &[(&str, &str)],
        vendor: Option<&str>,
        prepare: impl FnOnce(&Path),
        install_args: &[&str],
    ) -> Manual {
        let cp = ControlPlane::start("3s").expect("control plane");
        Self::start_on(cp, files, vendor, prepare, install_args)
    }

    /// [`Self::start_full`] on a control plane of the test's own.
    pub(crate) fn start_on(
        cp: ControlPlane,
        files: &[(&str, &str)],
        vendor: Option<&str>,
        prepare: impl FnOnce(&Path),
        install_args: &[&str],
    ) -> Manual {
        let dir = tempfile::tempdir().unwrap();
        let vendor = vendor.map_or_else(
            || dir.path().join("vendor").to_string_lossy().into_owned(),
            str::to_owned,
        );
        let app = dir.path().join("app");
        write_files(&app, files);
        prepare(&app);
        let token = std::fs::read_to_string(cp.data_dir.join("build-runner-token")).unwrap();
        let build_runner = ours("nuon-build-runner")
            .arg("run")
            .args(["--api", &cp.runner_url, "--signing-key", &cp.signing_key])
            .arg("--work-dir")
            .arg(dir.path().join("build"))
            .args(["--vendor-store", &vendor])
            .env("NUON_RUNNER_TOKEN", token.trim())
            .envs(cp.runner_env())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("build.log")).unwrap())
            .spawn()
            .unwrap();
        ok(cp.nuon(&["apps", "create", "app"]));
        ok(cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]));
        // Builds may fail on purpose; the tests look at them.
        let builds = cp.nuon(&["builds", "create", "--app", "app", "--wait"]);
        let may_fail = files
            .iter()
            .any(|(_, t)| t.contains("docker_build") || t.contains("helm_repo"));
        if !may_fail {
            ok(builds);
        }
        let mut create = vec![
            "installs", "create", "--app", "app", "--name", "demo", "--json",
        ];
        create.extend_from_slice(install_args);
        let created = ok(cp.nuon(&create));
        let v: serde_json::Value = serde_json::from_str(&created).unwrap();
        let install_token = v["runner_token"].as_str().unwrap().to_owned();
        let store_dir = dir.path().join("install-store");
        let mut m = Manual {
            cp,
            dir,
            build_runner,
            install_runner: None,
            install_token,
            vendor: Some(vendor),
            store_dir,
            runner_args: Vec::new(),
            runner_env: Vec::new(),
            runner_host: None,
        };
        m.install_runner = Some(m.runner(None));
        m
    }

    /// Starts the install's runner (with `path` as its PATH when given).
    fn runner(&self, path: Option<&str>) -> Child {
        self.runner_of("install", &self.store_dir, &self.install_token, path)
    }

    /// Starts the runner of another install, by its `token`, with a work
    /// directory, store and log (`NAME.log`) of its own named `name`.
    pub(crate) fn start_runner_of(&self, name: &str, token: &str) -> Child {
        let store = self.dir.path().join(format!("{name}-store"));
        self.runner_of(name, &store, token, None)
    }

    fn runner_of(&self, name: &str, store: &Path, token: &str, path: Option<&str>) -> Child {
        let d = self.dir.path();
        let (mut c, api) = match &self.runner_host {
            Some((netns, api)) => (nuon_tests::ours_in(netns, "nuon-runner"), api.as_str()),
            None => (ours("nuon-runner"), self.cp.runner_url.as_str()),
        };
        c.arg("run")
            .args(["--api", api, "--signing-key", &self.cp.signing_key])
            .arg("--work-dir")
            .arg(d.join(name))
            .arg("--store-dir")
            .arg(store)
            .env("NUON_RUNNER_TOKEN", token)
            .envs(self.cp.runner_env())
            .args(
                self.vendor
                    .iter()
                    .flat_map(|v| ["--vendor-store", v.as_str()]),
            )
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(d.join(format!("{name}.log")))
                    .unwrap(),
            );
        if let Some(p) = path {
            c.env("PATH", p);
        }
        c.args(&self.runner_args);
        c.envs(self.runner_env.iter().map(|(k, v)| (k, v)));
        c.spawn().unwrap()
    }

    /// Restarts the install's runner on the host `netns` (its own network
    /// namespace), reaching the Runner API at `api` (a link's end on the
    /// host, plain HTTP to another host: `--allow-insecure-http`).
    pub(crate) fn restart_runner_in(&mut self, netns: &nuon_tests::Netns, api: &str) {
        self.runner_host = Some((netns.name.clone(), api.to_owned()));
        self.restart_runner_with(&["--allow-insecure-http"]);
    }

    /// Restarts the install's runner with more arguments of `nuon-runner
    /// run` (they stay for later restarts).
    pub(crate) fn restart_runner_with(&mut self, args: &[&str]) {
        self.restart_runner_on(args, None);
    }

    /// [`Self::restart_runner_with`], with `path` as its PATH when given.
    pub(crate) fn restart_runner_on(&mut self, args: &[&str], path: Option<&str>) {
        self.runner_args = args.iter().map(|a| a.to_string()).collect();
        self.restart_runner(path);
    }

    /// [`Self::restart_runner_with`], with `env` added to its environment
    /// (it stays for later restarts).
    pub(crate) fn restart_runner_with_env(&mut self, args: &[&str], env: Vec<(String, String)>) {
        self.runner_env = env;
        self.restart_runner_on(args, None);
    }

    /// Restarts the install's runner with `tools` (a directory of stand-in
    /// executables) first on its PATH.
    pub(crate) fn restart_runner_with_tools(&mut self, tools: &Path) {
        let path = format!(
            "{}:{}",
            tools.display(),
            std::env::var("PATH").unwrap_or_default()
        );
        self.restart_runner(Some(&path));
    }

    /// The install runner's work directory.
    pub(crate) fn runner_work_dir(&self) -> PathBuf {
        self.dir.path().join("install")
    }

    /// The stores the install's runner uses, as the environment of
    /// `nuon-runner run`.
    pub(crate) fn runner_store_env(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![(
            "NUON_RUNNER_STORE_DIR",
            self.store_dir.to_string_lossy().into_owned(),
        )];
        env.extend(
            self.vendor
                .iter()
                .map(|v| ("NUON_RUNNER_VENDOR_STORE", v.clone())),
        );
        env
    }

    /// Stops the install's runner.
    pub(crate) fn stop_runner(&mut self) {
        if let Some(mut c) = self.install_runner.take() {
            signal(c.id(), 15);
            let _ = c.wait();
        }
    }

    pub(crate) fn restart_runner(&mut self, path: Option<&str>) {
        if let Some(mut c) = self.install_runner.take() {
            signal(c.id(), 15);
            let _ = c.wait();
        }
        self.install_runner = Some(self.runner(path));
    }
}

pub(crate) const METADATA: (&str, &str) = ("metadata.toml", "version = \"v2\"\n");

#[test]
fn a_runner_killed_during_an_apply_fails_the_step_releases_its_lock_and_a_retry_completes() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let mut m = Manual::start(&[METADATA, SLOW[0], SLOW[1], SLOW[2]]);
    let c = m.cp.client();
    let wf = rt()
        .block_on(c.create_workflow("demo", WorkflowKind::Provision, None))
        .unwrap();
    let id = wf.id.as_str().to_owned();
    // Once Terraform holds the lock inside the apply, the runner dies.
    wait_for(
        "the apply to hold the state lock",
        Duration::from_secs(60),
        || {
            let w = rt().block_on(c.get_workflow(&id)).ok()?;
            let states = rt().block_on(c.list_states("demo")).ok()?;
            (step(&w, "apply slow").status == "running"
                && states.states.iter().any(|s| s.lock.is_some()))
            .then_some(())
        },
    )
    .unwrap();
    let mut runner = m.install_runner.take().unwrap();
    runner.kill().unwrap();
    runner.wait().unwrap();
    let w = wait_workflow(&c, &id, ended);
    assert_eq!(w.status, "failed", "{w:#?}");
    let reason = step(&w, "apply slow").reason.clone().unwrap_or_default();
    assert!(reason.contains("runner lost"), "{reason}");
    assert!(
        reason.contains("state lock of slow") && reason.contains("released"),
        "{reason}"
    );
    let states = rt().block_on(c.list_states("demo")).unwrap();
    assert!(states.states.iter().all(|s| s.lock.is_none()), "{states:?}");

    // A new runner, a shorter pause, and a retry: the deploy completes.
    m.restart_runner(None);
    ok(m.cp.nuon(&["installs", "inputs", "set", "demo", "pause=0"]));
    let out = m.cp.nuon(&["workflows", "retry", &id, "--wait"]);
    let w = rt().block_on(c.get_workflow(&id)).unwrap();
    assert!(out.status.success(), "{}\n{w:#?}", text(&out));
    assert_eq!(w.status, "succeeded");
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.components["slow"]["done"], 0, "{outputs:?}");
}

#[test]
fn broken_inputs_fail_with_clear_errors() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let component = |name: &str, version: &str| {
        format!(
            "name = \"{name}\"\ntype = \"terraform_module\"\nterraform_version = \"{version}\"\npath = \"./src/{name}\"\n"
        )
    };
    let (future, syntax, fine) = (
        component("future", ">= 99.0"),
        component("syntax", ">= 1.5"),
        component("fine", ">= 1.5"),
    );
    let mut m = Manual::start(&[
        METADATA,
        ("components/future.toml", &future),
        ("components/syntax.toml", &syntax),
        ("components/fine.toml", &fine),
        ("src/future/main.tf", "output \"x\" {\n  value = 1\n}\n"),
        (
            "src/syntax/main.tf",
            "resource \"terraform_data\" \"x\" {\n  input = \n}\n",
        ),
        ("src/fine/main.tf", "output \"x\" {\n  value = 1\n}\n"),
    ]);
    let c = m.cp.client();
    let deploy = |component: &str| {
        let wf = rt()
            .block_on(c.create_workflow("demo", WorkflowKind::Deploy, Some(component)))
            .unwrap();
        wait_workflow(&c, wf.id.as_str(), ended)
    };
    // A terraform_version no installed binary satisfies.
    let w = deploy("future");
    assert_eq!(w.status, "failed");
    let reason = step(&w, "plan future").reason.clone().unwrap_or_default();
    assert!(reason.contains(">= 99.0"), "{reason}");

    // A module with a syntax error: Terraform's own message is in the log.
    let w = deploy("syntax");
    assert_eq!(w.status, "failed");
    let plan = step(&w, "plan syntax");
    assert!(
        plan.reason.as_deref().unwrap_or("").contains("terraform"),
        "{plan:#?}"
    );
    let logs = nuon_tests::all_logs(&c, plan.job_id.as_ref().unwrap()).unwrap();
    let text: String = logs.iter().map(|l| format!("{}\n", l.text)).collect();
    assert!(text.contains("Error:"), "{text}");

    // No terraform on the runner's PATH: the error says what to install.
    let there: Vec<&str> = [
        "/usr/bin/terraform",
        "/bin/terraform",
        "/usr/bin/tofu",
        "/bin/tofu",
    ]
    .into_iter()
    .filter(|p| std::path::Path::new(p).exists())
    .collect();
    assert!(
        there.is_empty(),
        "this test takes terraform away from the runner with PATH=/usr/bin:/bin, and {there:?} is there: install terraform elsewhere (/usr/local/bin)"
    );
    m.restart_runner(Some("/usr/bin:/bin"));
    let w = deploy("fine");
    assert_eq!(w.status, "failed");
    let reason = step(&w, "plan fine").reason.clone().unwrap_or_default();
    assert!(reason.to_lowercase().contains("install"), "{reason}");
    // With terraform back, the same deploy works.
    m.restart_runner(None);
    assert_eq!(deploy("fine").status, "succeeded");

    // No terraform on its PATH, but a release mirror (the machine's own
    // terraform as a signed release): the runner installs the version the
    // component asks for, checks it, plans with it, and says it holds it.
    let out = Command::new("terraform")
        .args(["version", "-json"])
        .output()
        .unwrap();
    let version: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let v = version["terraform_version"].as_str().unwrap().to_owned();
    let machine = which::which("terraform").unwrap();
    let Some(mirror) = ReleaseMirror::start(Flavor::Terraform, &v, &machine).unwrap() else {
        return;
    };
    let key = mirror.key.to_string_lossy().into_owned();
    m.restart_runner_on(
        &[
            "--terraform-install",
            "terraform",
            "--terraform-mirror",
            &mirror.url,
            "--terraform-mirror-key",
            &key,
        ],
        Some("/usr/bin:/bin"),
    );
    let w = deploy("fine");
    let plan = step(&w, "plan fine");
    let logs = nuon_tests::all_logs(&c, plan.job_id.as_ref().unwrap()).unwrap();
    let log: String = logs.iter().map(|l| format!("{}\n", l.text)).collect();
    assert_eq!(w.status, "succeeded", "{log}");
    assert!(log.contains(&format!("installing terraform {v}")), "{log}");
    assert!(log.contains("signature good"), "{log}");
    let held = wait_for(
        "the runner to tell the version it installed",
        Duration::from_secs(60),
        || {
            let runners = rt().block_on(c.list_runners()).ok()?;
            runners.runners.iter().find_map(|r| {
                r.telemetry
                    .as_ref()?
                    .tools
                    .iter()
                    .find(|t| t.installed && t.version == v)
                    .cloned()
            })
        },
    )
    .unwrap();
    assert_eq!(held.name, "terraform");
    let out = m.cp.nuon(&["runners", "list", "--json"]);
    let listed = String::from_utf8_lossy(&out.stdout);
    assert!(listed.contains("\"installed\": true"), "{listed}");
    let page = m.cp.dashboard_page("/runners");
    assert!(
        page.contains(&format!("terraform {v} (installed)")),
        "{page}"
    );
}

/// A provision of the [`SLOW`] app (its apply sleeping `pause` seconds)
/// started on `cp`, once its apply runs: the harness, the workflow's id and
/// the apply's job.
pub(crate) fn slow_provision(cp: ControlPlane, pause: u32) -> (Manual, String, nuon_core::JobId) {
    let m = Manual::start_on(
        cp,
        &[METADATA, SLOW[0], SLOW[1], SLOW[2]],
        None,
        |_| {},
        &["--input", &format!("pause={pause}")],
    );
    let c = m.cp.client();
    let wf = rt()
        .block_on(c.create_workflow("demo", WorkflowKind::Provision, None))
        .unwrap();
    let id = wf.id.as_str().to_owned();
    let w = wait_workflow(&c, &id, |w| step(w, "apply slow").status == "running");
    let apply = step(&w, "apply slow").job_id.clone().unwrap();
    (m, id, apply)
}

pub(crate) const SLOW: [(&str, &str); 3] = [
    (
        "inputs.toml",
        "[[input]]\nname = \"pause\"\ndescription = \"seconds\"\ntype = \"number\"\ndefault = \"30\"\n",
    ),
    (
        "components/slow.toml",
        "name = \"slow\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/slow\"\n\n[vars]\npause = \"{{ .nuon.install.inputs.pause }}\"\n",
    ),
    (
        "src/slow/main.tf",
        "variable \"pause\" {\n  type = number\n}\n\nresource \"terraform_data\" \"slow\" {\n  input = var.pause\n  provisioner \"local-exec\" {\n    command = \"sleep ${var.pause}\"\n  }\n}\n\noutput \"done\" {\n  value = terraform_data.slow.output\n}\n",
    ),
];

#[test]
fn one_workflow_at_a_time_writes_to_an_install_and_a_cancel_lets_the_next_one_run() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let m = Manual::start(&[METADATA, SLOW[0], SLOW[1], SLOW[2]]);
    let c = m.cp.client();
    let first = rt()
        .block_on(c.create_workflow("demo", WorkflowKind::Provision, None))
        .unwrap();
    let first_id = first.id.as_str().to_owned();
    wait_workflow(&c, &first_id, |w| step(w, "apply slow").status == "running");
    // A second workflow queues behind the running one.
    let second = rt()
        .block_on(c.create_workflow("demo", WorkflowKind::Deploy, None))
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let w2 = rt().block_on(c.get_workflow(second.id.as_str())).unwrap();
    assert_eq!(w2.status, "pending", "{w2:#?}");
    assert!(w2.steps.iter().all(|s| s.status == "pending"));

    ok(m.cp.nuon(&["installs", "inputs", "set", "demo", "pause=0"]));
    let out = ok(m.cp.nuon(&["workflows", "cancel", &first_id]));
    assert!(out.contains("is cancel"), "{out}");
    // The install stays busy until the cancelled job has ended.
    let w1 = wait_workflow(&c, &first_id, ended);
    assert_eq!(w1.status, "cancelled");
    let apply = step(&w1, "apply slow");
    assert_eq!(apply.status, "cancelled");
    let job = apply.job_id.clone().unwrap();
    let done = nuon_tests::wait_job(&c, &job, Duration::from_secs(60)).unwrap();
    assert_eq!(done.status, nuon_core::JobStatus::Cancelled, "{done:?}");

    // The queued deploy runs once the install is free, through any lock
    // the cancelled Terraform left behind.
    let w2 = wait_workflow(&c, second.id.as_str(), ended);
    assert_eq!(w2.status, "succeeded", "{w2:#?}");
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.components["slow"]["done"], 0, "{outputs:?}");
    // A cancelled workflow cannot be cancelled again; it can be retried.
    let e = rt().block_on(c.cancel_workflow(&first_id)).unwrap_err();
    assert!(e.to_string().contains("has ended"), "{e}");
}

#[test]
fn components_build_from_git_and_actions_run_by_hand() {
    if !have_tool("terraform", "run Terraform") || !have_tool("git", "clone a source") {
        return;
    }
    let repo = tempfile::tempdir().unwrap();
    write_files(
        repo.path(),
        &[(
            "modules/net/main.tf",
            "resource \"terraform_data\" \"net\" {\n  input = \"net-1\"\n}\n\noutput \"id\" {\n  value = terraform_data.net.output\n}\n",
        )],
    );
    commit_all(repo.path(), "release");
    let component = format!(
        "name = \"net\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\n\n[git]\nrepo = \"file://{}\"\nbranch = \"release\"\ndirectory = \"modules/net\"\n",
        repo.path().display()
    );
    let action = "name = \"hello\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"say\"\ncommand = \"echo hello from {{ .nuon.components.net.outputs.id }}\"\n";
    let m = Manual::start(&[
        METADATA,
        ("components/net.toml", &component),
        ("actions/hello.toml", action),
    ]);
    let c = m.cp.client();
    let builds = rt().block_on(c.list_builds("app")).unwrap().builds;
    assert_eq!(
        builds[0].status,
        nuon_core::JobStatus::Succeeded,
        "{builds:?}"
    );
    let logs = nuon_tests::all_logs(&c, &builds[0].id).unwrap();
    assert!(
        logs.iter().any(|l| l.text.contains("git clone")),
        "{logs:?}"
    );
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    // The action has only a manual trigger: no provision step ran it.
    assert!(
        w.steps
            .iter()
            .all(|s| s.kind != nuon_core::workflow::StepKind::Action)
    );
    let out = m.cp.nuon(&[
        "installs",
        "run-action",
        "demo",
        "hello",
        "--wait",
        "--logs",
    ]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("hello from net-1"), "{t}");
    let install = rt().block_on(c.get_install("demo")).unwrap();
    assert_eq!(
        install.state, "active",
        "an action leaves the install's state"
    );
    // An action without a manual trigger, or unknown, is refused.
    let out = m.cp.nuon(&["installs", "run-action", "demo", "helo"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("did you mean"), "{}", text(&out));
}

#[test]
fn a_registry_as_the_vendor_store_builds_syncs_and_deploys() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(registry) = nuon_tests::Registry::start(None).unwrap() else {
        return;
    };
    let m = Manual::start_with(
        &[
            METADATA,
            (
                "components/net.toml",
                "name = \"net\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/net\"\n",
            ),
            (
                "src/net/main.tf",
                "resource \"terraform_data\" \"net\" {\n  input = \"net-1\"\n}\n\noutput \"id\" {\n  value = terraform_data.net.output\n}\n",
            ),
        ],
        Some(&registry.url),
    );
    let c = m.cp.client();
    let build = rt()
        .block_on(c.list_builds("app"))
        .unwrap()
        .builds
        .remove(0);
    let artifact = build.artifact.clone().expect("built");
    // The build is in the registry, by digest and by the build's tag.
    let store = nuon_plugins::oci::registry::RegistryStore::new(
        &nuon_plugins::oci::registry::RegistryConfig::new(&registry.url),
    )
    .unwrap();
    use nuon_core::artifact::ArtifactStore as _;
    assert!(
        rt().block_on(store.get_manifest(&artifact.repo, artifact.digest.as_str()))
            .unwrap()
            .is_some()
    );
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert_eq!(step(&w, "sync net").outputs["copied"], 2);
    // With the registry gone, a redeploy runs from the install's store.
    drop(registry);
    let w = run_workflow(&c, WorkflowKind::Deploy);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert_eq!(step(&w, "sync net").outputs["copied"], 0);
}

#[test]
fn a_container_image_is_built_from_its_registry_and_synced_with_every_platform() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(source) = nuon_tests::Registry::start(None).unwrap() else {
        return;
    };
    use nuon_core::artifact::ArtifactStore as _;
    let src = nuon_plugins::oci::registry::RegistryStore::new(
        &nuon_plugins::oci::registry::RegistryConfig::new(&source.url),
    )
    .unwrap();
    let index = rt()
        .block_on(nuon_tests::make_image(
            &src,
            "img/app",
            "1.0",
            &[(256 << 10, 1), (512 << 10, 2)],
            &["linux/amd64", "linux/arm64"],
        ))
        .unwrap();
    let component = format!(
        "name = \"img\"\ntype = \"container_image\"\n\n[public]\nimage_url = \"{}/img/app\"\ntag = \"1.0\"\n",
        source.host
    );
    let m = Manual::start(&[METADATA, ("components/img.toml", &component)]);
    let c = m.cp.client();
    let build = rt()
        .block_on(c.list_builds("app"))
        .unwrap()
        .builds
        .remove(0);
    assert_eq!(
        build.artifact.as_ref().map(|a| a.digest.clone()),
        Some(index.clone()),
        "{build:?}"
    );
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert_eq!(
        w.steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        ["await install stack", "await runner", "sync img"]
    );
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.components["img"]["digest"], index.to_string());
    // Nuon's shape: `.outputs.image.repository` and `.outputs.image.tag`,
    // the tag the config names, pointing at the digest in the install's store.
    let repo = build.artifact.clone().unwrap().repo;
    let image = &outputs.components["img"]["image"];
    assert_eq!(image["repository"], repo.as_str(), "{image}");
    assert_eq!(image["tag"], "1.0", "{image}");
    assert_eq!(image["digest"], index.to_string(), "{image}");
    let store = nuon_plugins::oci::LayoutStore::open(m.dir.path().join("install-store")).unwrap();
    let tagged = rt()
        .block_on(store.get_manifest(&repo, "1.0"))
        .unwrap()
        .expect("the tag is in the install's store");
    assert_eq!(tagged.digest, index, "the tag points at the digest synced");
    // The install's store has the index and both platforms' images.
    let raw = rt()
        .block_on(store.get_manifest(&repo, index.as_str()))
        .unwrap()
        .expect("the index is in the install's store");
    let parsed: serde_json::Value = serde_json::from_slice(&raw.bytes).unwrap();
    for child in parsed["manifests"].as_array().unwrap() {
        let d = child["digest"].as_str().unwrap();
        assert!(
            rt().block_on(store.get_manifest(&repo, d))
                .unwrap()
                .is_some()
        );
    }
}

/// Writes `text` to `path` as an executable (0755).
pub(crate) fn write_executable(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Makes `repo` a git repository on `branch` with everything in it committed.
fn commit_all(repo: &Path, branch: &str) {
    for args in [
        &["init", "-q", "-b", branch][..],
        &["add", "."],
        &["commit", "-q", "-m", "test"],
    ] {
        let out = Command::new("git")
            .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
            .args(args)
            .current_dir(repo)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {}", text(&out));
    }
}

/// A stand-in `helm` in a directory of its own: records its arguments, the
/// digest and listing of the chart it gets, the values and values files,
/// `HELM_DRIVER`, and answers like Helm.
pub(crate) fn stand_in_helm() -> (tempfile::TempDir, std::path::PathBuf) {
    let bin = tempfile::tempdir().unwrap();
    let record = bin.path().join("record");
    let script = format!(
        r#"#!/bin/sh
rec="{rec}"
echo "ARGS $*" >> "$rec"
echo "DRIVER ${{HELM_DRIVER:-unset}}" >> "$rec"
for a in "$@"; do
  case "$a" in
    *.tgz) echo "CHART sha256:$(sha256sum "$a" | cut -d' ' -f1)" >> "$rec"; tar tzf "$a" | sed 's/^/FILE /' >> "$rec" ;;
    *values.json) echo "VALUES $(cat "$a")" >> "$rec" ;;
    *values-*.yaml) echo "VALUESFILE $(tr '\n' ' ' < "$a")" >> "$rec" ;;
  esac
done
case "$1" in
  template) printf 'kind: Deployment\nmetadata:\n  name: web\n---\nkind: Service\n' ;;
  upgrade) touch "$rec.installed"; echo "Release \"$3\" has been upgraded. Happy Helming!" ;;
  status)
    [ -e "$rec.installed" ] || {{ echo "Error: release: not found" >&2; exit 1; }}
    case "$*" in *json*) echo '{{"version":1,"info":{{"status":"deployed"}}}}' ;; *) echo "STATUS: deployed" ;; esac ;;
  uninstall) rm -f "$rec.installed"; echo "release \"$2\" uninstalled" ;;
  list) if [ -e "$rec.installed" ]; then echo '[{{"name":"web"}}]'; else echo '[]'; fi ;;
  *) echo "unexpected: $*" >&2; exit 2 ;;
esac
"#,
        rec = record.display()
    );
    write_executable(&bin.path().join("helm"), &script);
    (bin, record)
}

/// Review findings: dotted `[values]` keys, a templated namespace,
/// `storage_driver` and a values file named in `contents` each reached Helm
/// wrong (one literal key, a refused namespace, no driver, the path as the
/// file's text).
#[test]
fn helm_values_namespace_driver_and_values_files_reach_helm_as_nuon_gives_them() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(registry) = nuon_tests::Registry::start(None).unwrap() else {
        return;
    };
    let (bin, record) = stand_in_helm();
    let mut m = Manual::start_with(
        &[
            METADATA,
            (
                "inputs.toml",
                "[[input]]\nname = \"domain\"\ndescription = \"the host\"\ndefault = \"acme.example.com\"\n\n[[input]]\nname = \"replicas\"\ndescription = \"how many\"\ndefault = \"3\"\n",
            ),
            (
                "components/web.toml",
                concat!(
                    "name = \"web\"\ntype = \"helm_chart\"\nchart_name = \"web\"\n",
                    "namespace = \"{{ .nuon.install.name }}-apps\"\nstorage_driver = \"configmap\"\npath = \"./src/web\"\n\n",
                    "[[values_file]]\ncontents = \"./values/web.yaml\"\n\n",
                    "[values]\n\"ingress.host\" = \"{{ .nuon.install.inputs.domain }}\"\n\"ingress.enabled\" = \"true\"\nreplicaCount = \"{{ .nuon.install.inputs.replicas }}\"\n",
                ),
            ),
            (
                "values/web.yaml",
                "greeting: from-the-values-file\nzone: {{ .nuon.install.id }}\n",
            ),
            (
                "src/web/Chart.yaml",
                "apiVersion: v2\nname: web\ndescription: A test chart\nversion: 0.1.0\nappVersion: \"1.0\"\n",
            ),
            (
                "src/web/templates/deployment.yaml",
                "kind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n",
            ),
        ],
        Some(&registry.url),
    );
    let c = m.cp.client();
    m.restart_runner_with_tools(bin.path());
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let rec = std::fs::read_to_string(&record).unwrap();
    assert!(
        rec.contains("--namespace demo-apps"),
        "the namespace is rendered: {rec}"
    );
    assert!(
        rec.contains("DRIVER configmap"),
        "storage_driver is HELM_DRIVER: {rec}"
    );
    assert!(!rec.contains("DRIVER unset"), "{rec}");
    assert!(
        rec.contains(
            r#"VALUES {"ingress":{"enabled":true,"host":"acme.example.com"},"replicaCount":3}"#
        ),
        "dotted keys nest and strings are typed as --set types them: {rec}"
    );
    assert!(
        rec.contains("VALUESFILE greeting: from-the-values-file zone: ins_"),
        "the values file's text, rendered, not its path: {rec}"
    );
    assert!(!rec.contains("./values/web.yaml"), "{rec}");
}

/// An install's own values for its components (Nuon's `[components.NAME]`
/// of an install file): `--tf-vars` is read after the config's `[vars]`
/// and var files, `--helm-values` is deep-merged over the chart's values;
/// both are templates. `nuon installs components override` sets (and
/// deploys), replaces with a JSON object, and clears them; a kind that does
/// not fit the component, or values that are not a mapping, are refused
/// and change nothing.
#[test]
fn an_installs_own_helm_values_and_tf_vars_win_over_the_configs_and_are_set_replaced_and_cleared() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(registry) = nuon_tests::Registry::start(None).unwrap() else {
        return;
    };
    let (bin, record) = stand_in_helm();
    let own = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let p = own.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.to_string_lossy().into_owned()
    };
    let tf = file(
        "db.tfvars",
        "size  = \"large\"\nextra = \"for-{{ .nuon.install.name }}\"\n",
    );
    let helm = file(
        "web.yaml",
        "image:\n  tag: \"2\"\ningress:\n  tls: true\nzone: \"{{ .nuon.install.inputs.domain }}\"\n",
    );
    let tf_arg = format!("db={tf}");
    let helm_arg = format!("web={helm}");
    let mut m = Manual::start_full(
        &[
            METADATA,
            (
                "inputs.toml",
                "[[input]]\nname = \"domain\"\ndescription = \"the host\"\ndefault = \"acme.example.com\"\n",
            ),
            (
                "components/db.toml",
                concat!(
                    "name = \"db\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/db\"\n\n",
                    "[[var_file]]\ncontents = \"tier = \\\"from-the-var-file\\\"\"\n\n",
                    "[[var_file]]\ncontents = \"./vars/db.tfvars\"\n\n",
                    "[vars]\nsize = \"small\"\n",
                ),
            ),
            (
                "vars/db.tfvars",
                "zone = \"file-{{ .nuon.install.name }}\"\n",
            ),
            (
                "src/db/main.tf",
                concat!(
                    "variable \"size\" {\n  type = string\n}\n",
                    "variable \"tier\" {\n  type = string\n}\n",
                    "variable \"extra\" {\n  type    = string\n  default = \"none\"\n}\n",
                    "variable \"zone\" {\n  type    = string\n  default = \"none\"\n}\n",
                    "output \"zone\" {\n  value = var.zone\n}\n",
                    "output \"size\" {\n  value = var.size\n}\n",
                    "output \"tier\" {\n  value = var.tier\n}\n",
                    "output \"extra\" {\n  value = var.extra\n}\n",
                ),
            ),
            (
                "components/web.toml",
                concat!(
                    "name = \"web\"\ntype = \"helm_chart\"\nchart_name = \"web\"\nnamespace = \"apps\"\npath = \"./src/web\"\n\n",
                    "[[values_file]]\ncontents = \"image:\\n  tag: \\\"1\\\"\\n  repo: r\\n\"\n\n",
                    "[values]\n\"ingress.host\" = \"{{ .nuon.install.inputs.domain }}\"\n",
                ),
            ),
            (
                "src/web/Chart.yaml",
                "apiVersion: v2\nname: web\ndescription: A test chart\nversion: 0.1.0\nappVersion: \"1.0\"\n",
            ),
            (
                "src/web/templates/deployment.yaml",
                "kind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n",
            ),
        ],
        Some(&registry.url),
        |_| {},
        &["--tf-vars", &tf_arg, "--helm-values", &helm_arg],
    );
    let c = m.cp.client();
    m.restart_runner_with_tools(bin.path());
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let db = |c: &ControlClient| {
        let o = rt().block_on(c.install_outputs("demo")).unwrap();
        let d = &o.components["db"];
        (d["size"].clone(), d["tier"].clone(), d["extra"].clone())
    };
    assert_eq!(
        db(&c),
        (
            serde_json::json!("large"),
            serde_json::json!("from-the-var-file"),
            serde_json::json!("for-demo")
        ),
        "the install's variables win over [vars], the var file keeps what they do not set, and they are rendered"
    );
    // A var file named by its path in the config reaches Terraform, its
    // template rendered.
    let o = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(o.components["db"]["zone"], "file-demo", "{o:?}");
    let rec = std::fs::read_to_string(&record).unwrap();
    assert!(
        rec.contains(r#"VALUES {"image":{"tag":"2"},"ingress":{"host":"acme.example.com","tls":true},"zone":"acme.example.com"}"#),
        "the install's Helm values merged over [values], rendered, and read after the values file: {rec}"
    );
    assert!(
        rec.contains("VALUESFILE image:   tag: \"1\"   repo: r"),
        "{rec}"
    );

    // Listed with the components.
    let list: serde_json::Value = serde_json::from_str(&ok(m.cp.nuon(&[
        "--json",
        "installs",
        "components",
        "list",
        "demo",
    ])))
    .unwrap();
    let overrides = |list: &serde_json::Value, name: &str| {
        list["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap()["overrides"]
            .clone()
    };
    assert!(
        overrides(&list, "db")["tf_vars"]
            .as_str()
            .unwrap()
            .contains("large"),
        "{list}"
    );
    assert!(overrides(&list, "web")["helm_values"].is_string(), "{list}");

    // A kind that does not fit, and values that are not a mapping: refused.
    let wrong = m.cp.nuon(&[
        "installs",
        "components",
        "override",
        "demo",
        "db",
        "--helm-values",
        &helm,
    ]);
    assert_eq!(wrong.status.code(), Some(1), "{}", text(&wrong));
    assert!(
        text(&wrong).contains("helm_values: component db is a terraform_module, not a helm_chart"),
        "{}",
        text(&wrong)
    );
    let listy = file("list.yaml", "- a\n- b\n");
    let wrong = m.cp.nuon(&[
        "installs",
        "components",
        "override",
        "demo",
        "web",
        "--helm-values",
        &listy,
    ]);
    assert_eq!(wrong.status.code(), Some(1), "{}", text(&wrong));
    assert!(
        text(&wrong).contains("not a mapping of keys to values"),
        "{}",
        text(&wrong)
    );

    // Replaced (a JSON object is a .tfvars file too) and deployed.
    let json_vars = file("db.json", r#"{"size": "huge ${not-interpolated}"}"#);
    let done: serde_json::Value = serde_json::from_str(&ok(m.cp.nuon(&[
        "--json",
        "installs",
        "components",
        "override",
        "demo",
        "db",
        "--tf-vars",
        &json_vars,
        "--wait",
    ])))
    .unwrap();
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(
        db(&c),
        (
            serde_json::json!("huge ${not-interpolated}"),
            serde_json::json!("from-the-var-file"),
            serde_json::json!("none")
        )
    );
    // Cleared: the config's values again.
    let done: serde_json::Value = serde_json::from_str(&ok(m.cp.nuon(&[
        "--json",
        "installs",
        "components",
        "override",
        "demo",
        "db",
        "--clear",
        "--wait",
    ])))
    .unwrap();
    assert_eq!(done["status"], "succeeded", "{done}");
    assert_eq!(db(&c).0, serde_json::json!("small"));
    // Cleared without a deploy: kept for the next one.
    let said: serde_json::Value = serde_json::from_str(&ok(m.cp.nuon(&[
        "--json",
        "installs",
        "components",
        "override",
        "demo",
        "web",
        "--clear",
        "--no-deploy",
    ])))
    .unwrap();
    assert!(said.get("workflow").is_none(), "{said}");
    assert!(
        said["message"]
            .as_str()
            .unwrap()
            .contains("take effect at its next deploy"),
        "{said}"
    );
    let list: serde_json::Value = serde_json::from_str(&ok(m.cp.nuon(&[
        "--json",
        "installs",
        "components",
        "list",
        "demo",
    ])))
    .unwrap();
    assert!(overrides(&list, "db").is_null(), "{list}");
    assert!(overrides(&list, "web").is_null(), "{list}");
}

#[test]
fn a_helm_chart_is_packaged_synced_planned_applied_and_uninstalled_with_a_stand_in_helm() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(registry) = nuon_tests::Registry::start(None).unwrap() else {
        return;
    };
    let (bin, record) = stand_in_helm();
    let mut m = Manual::start_with(
        &[
            METADATA,
            (
                "inputs.toml",
                "[[input]]\nname = \"greeting\"\ndescription = \"what it says\"\ndefault = \"hello\"\n",
            ),
            (
                "components/web.toml",
                "name = \"web\"\ntype = \"helm_chart\"\nchart_name = \"web\"\nnamespace = \"apps\"\npath = \"./src/web\"\n\n[values]\ngreeting = \"{{ .nuon.install.inputs.greeting }}\"\n",
            ),
            (
                "src/web/Chart.yaml",
                "apiVersion: v2\nname: web\ndescription: A test chart\nversion: 0.1.0\nappVersion: \"1.0\"\n",
            ),
            ("src/web/values.yaml", "greeting: hi\n"),
            (
                "src/web/templates/deployment.yaml",
                "kind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n",
            ),
        ],
        Some(&registry.url),
    );
    let c = m.cp.client();
    let build = rt()
        .block_on(c.list_builds("app"))
        .unwrap()
        .builds
        .remove(0);
    let artifact = build.artifact.clone().expect("built");
    // The chart in the vendor's registry: Helm's media types, tagged with
    // the chart's version, read back by skopeo.
    if have_tool("skopeo", "read the chart with an independent client") {
        let out = Command::new("skopeo")
            .args(["inspect", "--raw", "--tls-verify=false"])
            .arg(format!(
                "docker://{}/{}:0.1.0",
                registry.host, artifact.repo
            ))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let m: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            m["config"]["mediaType"],
            "application/vnd.cncf.helm.config.v1+json"
        );
        assert_eq!(
            m["layers"][0]["mediaType"],
            "application/vnd.cncf.helm.chart.content.v1.tar+gzip"
        );
    }

    m.restart_runner_with_tools(bin.path());
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert_eq!(step(&w, "plan web").outputs["changes"]["add"], 2);
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(
        outputs.components["web"]["status"], "deployed",
        "{outputs:?}"
    );
    let rec = std::fs::read_to_string(&record).unwrap();
    assert!(rec.contains("ARGS template web "), "{rec}");
    assert!(rec.contains("ARGS upgrade --install web "), "{rec}");
    assert!(rec.contains("--namespace apps"), "{rec}");
    assert!(rec.contains("--atomic --wait --timeout"), "{rec}");
    assert!(
        rec.contains(r#"VALUES {"greeting":"hello"}"#),
        "values rendered: {rec}"
    );
    assert!(
        rec.contains("FILE web/Chart.yaml") && rec.contains("FILE web/templates/deployment.yaml"),
        "{rec}"
    );
    // The chart helm got is the layer in the install's store, by digest.
    use nuon_core::artifact::ArtifactStore as _;
    let store = nuon_plugins::oci::LayoutStore::open(m.dir.path().join("install-store")).unwrap();
    let raw = rt()
        .block_on(store.get_manifest(&artifact.repo, artifact.digest.as_str()))
        .unwrap()
        .unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(&raw.bytes).unwrap();
    let layer = manifest["layers"][0]["digest"].as_str().unwrap();
    assert!(rec.contains(&format!("CHART {layer}")), "{rec}");

    let w = run_workflow(&c, WorkflowKind::Teardown);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let rec = std::fs::read_to_string(&record).unwrap();
    assert!(
        rec.contains("ARGS uninstall web --namespace apps --wait"),
        "{rec}"
    );
    assert!(
        !rt()
            .block_on(c.install_outputs("demo"))
            .unwrap()
            .components
            .contains_key("web")
    );
}

#[test]
fn a_release_bundle_exported_moved_and_imported_deploys_without_the_vendor_store() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(registry) = nuon_tests::Registry::start(None).unwrap() else {
        return;
    };
    let mut m = Manual::start_with(
        &[
            METADATA,
            (
                "components/net.toml",
                "name = \"net\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/net\"\n",
            ),
            (
                "src/net/main.tf",
                "resource \"terraform_data\" \"net\" {\n  input = \"net-1\"\n}\n\noutput \"id\" {\n  value = terraform_data.net.output\n}\n",
            ),
        ],
        Some(&registry.url),
    );
    let bundle = m.dir.path().join("bundle");
    let out = ok(m.cp.nuon(&[
        "releases",
        "export",
        "--app",
        "app",
        "--vendor-store",
        &registry.url,
        "--out",
        bundle.to_str().unwrap(),
    ]));
    assert!(out.contains("exported 1 artifact"), "{out}");
    // Moved: the vendor's registry is gone from the install's view.
    drop(registry);
    let moved = m.dir.path().join("moved");
    std::fs::rename(&bundle, &moved).unwrap();

    // A damaged copy of the bundle is refused.
    let damaged = m.dir.path().join("damaged");
    let cp = Command::new("cp")
        .arg("-r")
        .arg(&moved)
        .arg(&damaged)
        .status()
        .unwrap();
    assert!(cp.success());
    for f in walk(&damaged) {
        if f.to_string_lossy().contains("/blobs/sha256/")
            && std::fs::metadata(&f)
                .map(|x| x.len() > 200)
                .unwrap_or(false)
        {
            let mut b = std::fs::read(&f).unwrap();
            b[100] ^= 0xff;
            std::fs::write(&f, b).unwrap();
        }
    }
    let import = |bundle: &Path, store: &Path| {
        ours("nuon-runner")
            .arg("import")
            .arg("--bundle")
            .arg(bundle)
            .arg("--store-dir")
            .arg(store)
            .output()
            .unwrap()
    };
    let fresh = m.dir.path().join("air-gapped-store");
    let out = import(&damaged, &fresh);
    assert!(!out.status.success(), "{}", text(&out));
    let why = text(&out);
    assert!(why.contains("corrupted") || why.contains("digest"), "{why}");
    let out = import(&moved, &fresh);
    assert!(out.status.success(), "{}", text(&out));

    // The install's runner with that store and no vendor store deploys.
    m.vendor = None;
    m.store_dir = fresh;
    m.restart_runner(None);
    let c = m.cp.client();
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert_eq!(step(&w, "sync net").outputs["copied"], 0);
}

#[test]
fn a_docker_build_without_buildah_or_docker_says_what_to_install() {
    let have = |b: &str| which::which(b).is_ok();
    // This checks the error when no image builder is there: a machine with
    // buildah, or docker with its buildx plugin, builds the image instead.
    let buildx = have("docker")
        && std::process::Command::new("docker")
            .args(["buildx", "version"])
            .output()
            .is_ok_and(|o| o.status.success());
    if have("buildah") || buildx {
        eprintln!(
            "SKIPPED: {} is installed: the error without an image builder cannot be seen here",
            if buildx { "docker buildx" } else { "buildah" }
        );
        return;
    }
    let m = Manual::start(&[
        METADATA,
        (
            "components/web.toml",
            "name = \"web\"\ntype = \"docker_build\"\ndockerfile = \"Dockerfile\"\npath = \"./src/web\"\n",
        ),
        ("src/web/Dockerfile", "FROM scratch\nCOPY hello /\n"),
        ("src/web/hello", "hi\n"),
    ]);
    let c = m.cp.client();
    let build = rt()
        .block_on(c.list_builds("app"))
        .unwrap()
        .builds
        .remove(0);
    assert_eq!(build.status, nuon_core::JobStatus::Failed, "{build:?}");
    let reason = build.reason.unwrap_or_default();
    // Without buildah: either no docker at all, or (as on these machines)
    // a docker without buildx, and the error says what to install.
    assert!(
        reason.contains("buildah") && reason.contains("install"),
        "{reason}"
    );
    if have("docker") {
        assert!(reason.contains("buildx"), "{reason}");
    }
    // A deploy of it is refused before any job: it has no build.
    let e = rt()
        .block_on(c.create_workflow("demo", WorkflowKind::Provision, None))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no successful build") && e.contains("nuon builds create"),
        "{e}"
    );
}

#[test]
fn a_sync_cut_off_mid_blob_resumes_without_sending_finished_blobs_again() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(source) = nuon_tests::Registry::start(None).unwrap() else {
        return;
    };
    let vendor = nuon_tests::Registry::start(None).unwrap().unwrap();
    use nuon_core::artifact::ArtifactStore as _;
    let src = nuon_plugins::oci::registry::RegistryStore::new(
        &nuon_plugins::oci::registry::RegistryConfig::new(&source.url),
    )
    .unwrap();
    const BIG: usize = 400 << 20;
    let digest = rt()
        .block_on(nuon_tests::make_image(
            &src,
            "img/app",
            "1.0",
            &[(64 << 10, 1), (BIG, 2)],
            &["linux/amd64"],
        ))
        .unwrap();
    let raw = rt()
        .block_on(src.get_manifest("img/app", digest.as_str()))
        .unwrap()
        .unwrap();
    let manifest: serde_json::Value = serde_json::from_slice(&raw.bytes).unwrap();
    let big = manifest["layers"][1]["digest"].as_str().unwrap().to_owned();
    let component = format!(
        "name = \"img\"\ntype = \"container_image\"\n\n[public]\nimage_url = \"{}/img/app\"\ntag = \"1.0\"\n",
        source.host
    );
    let mut m = Manual::start_with(
        &[METADATA, ("components/img.toml", &component)],
        Some(&vendor.url),
    );
    let c = m.cp.client();
    let repo = rt().block_on(c.list_builds("app")).unwrap().builds[0]
        .artifact
        .clone()
        .expect("built")
        .repo;
    let partial = m
        .store_dir
        .join(&repo)
        .join("blobs/sha256")
        .join(format!(".partial-{}", big.trim_start_matches("sha256:")));
    let wf = rt()
        .block_on(c.create_workflow("demo", WorkflowKind::Provision, None))
        .unwrap();
    // Cut the runner off in the middle of the big layer.
    wait_for(
        "the big layer to be half way",
        Duration::from_secs(60),
        || {
            let n = std::fs::metadata(&partial).map(|x| x.len()).unwrap_or(0);
            (n > (16 << 20) && n < (BIG as u64 - (64 << 20))).then_some(())
        },
    )
    .unwrap();
    let mut runner = m.install_runner.take().unwrap();
    runner.kill().unwrap();
    runner.wait().unwrap();
    let held = std::fs::metadata(&partial).unwrap().len();
    let w = wait_workflow(&c, wf.id.as_str(), ended);
    assert_eq!(w.status, "failed", "{w:#?}");
    assert!(
        step(&w, "sync img")
            .reason
            .as_deref()
            .unwrap_or("")
            .contains("runner lost"),
        "{w:#?}"
    );

    // A new runner and a retry: only the big layer is sent, from where the
    // cut-off copy stopped.
    m.restart_runner(None);
    let out = m.cp.nuon(&["workflows", "retry", wf.id.as_str(), "--wait"]);
    let w = rt().block_on(c.get_workflow(wf.id.as_str())).unwrap();
    assert!(out.status.success(), "{}\n{w:#?}", text(&out));
    let sync = step(&w, "sync img");
    assert_eq!(
        sync.outputs["copied"], 1,
        "the finished blobs were not sent again: {sync:#?}"
    );
    assert_eq!(sync.outputs["resumed"], 1, "{sync:#?}");
    let sent = sync.outputs["bytes"].as_u64().unwrap();
    assert!(
        sent <= BIG as u64 - held,
        "sent {sent} bytes with {held} held: {sync:#?}"
    );
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.components["img"]["digest"], digest.to_string());
}

#[test]
fn a_chart_from_a_helm_repository_is_built_checked_against_the_index() {
    if !have_tool("python3", "serve a Helm repository") {
        return;
    }
    let repo = tempfile::tempdir().unwrap();
    let chart = tempfile::tempdir().unwrap();
    write_files(
        chart.path(),
        &[
            ("Chart.yaml", "apiVersion: v2\nname: web\nversion: 0.1.0\n"),
            ("templates/x.yaml", "kind: ConfigMap\n"),
        ],
    );
    let tgz = nuon_plugins::oci::helmpkg::package_chart(chart.path(), "web").unwrap();
    let sha = nuon_core::artifact::Digest::of(&tgz);
    std::fs::write(repo.path().join("web-0.1.0.tgz"), &tgz).unwrap();
    std::fs::write(repo.path().join("web-0.2.0.tgz"), &tgz).unwrap();
    std::fs::write(
        repo.path().join("index.yaml"),
        format!(
            "apiVersion: v1\nentries:\n  web:\n  - name: web\n    version: 0.2.0\n    digest: {}\n    urls:\n    - web-0.2.0.tgz\n  - name: web\n    version: 0.1.0\n    digest: {}\n    urls:\n    - web-0.1.0.tgz\n",
            "0".repeat(64),
            sha.hex()
        ),
    )
    .unwrap();
    let port = free_port();
    let mut server = Command::new("python3")
        .args([
            "-m",
            "http.server",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--directory",
        ])
        .arg(repo.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("the Helm repository", Duration::from_secs(20), || {
        std::net::TcpStream::connect(("127.0.0.1", port)).ok()
    })
    .unwrap();
    let component = |name: &str, version: &str| {
        format!(
            "name = \"{name}\"\ntype = \"helm_chart\"\nchart_name = \"web\"\n\n[helm_repo]\nrepo_url = \"http://127.0.0.1:{port}\"\nchart = \"web\"\nversion = \"{version}\"\n"
        )
    };
    let (good, bad) = (component("good", "0.1.0"), component("bad", "0.2.0"));
    let m = Manual::start(&[
        METADATA,
        ("components/good.toml", &good),
        ("components/bad.toml", &bad),
    ]);
    let c = m.cp.client();
    let builds = rt().block_on(c.list_builds("app")).unwrap().builds;
    let of = |n: &str| builds.iter().find(|b| b.component == n).unwrap().clone();
    let good = of("good");
    assert_eq!(good.status, nuon_core::JobStatus::Succeeded, "{good:?}");
    let bad = of("bad");
    assert_eq!(bad.status, nuon_core::JobStatus::Failed, "{bad:?}");
    assert!(
        bad.reason
            .unwrap_or_default()
            .contains("does not match the digest")
    );
    // The chart's archive is the layer, byte for byte.
    use nuon_core::artifact::ArtifactStore as _;
    let vendor = nuon_plugins::oci::LayoutStore::open(m.dir.path().join("vendor")).unwrap();
    let a = good.artifact.unwrap();
    let raw = rt()
        .block_on(vendor.get_manifest(&a.repo, "0.1.0"))
        .unwrap()
        .expect("tagged with the chart's version");
    let manifest: serde_json::Value = serde_json::from_slice(&raw.bytes).unwrap();
    assert_eq!(manifest["layers"][0]["digest"], sha.to_string());
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.cncf.helm.config.v1+json"
    );
    let _ = server.kill();
    let _ = server.wait();
}

#[test]
fn a_deprovision_destroys_what_was_deployed_even_if_a_newer_config_dropped_it() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let module = "resource \"terraform_data\" \"x\" {\n  input = \"x\"\n}\n";
    let component = |n: &str| {
        format!(
            "name = \"{n}\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/{n}\"\n"
        )
    };
    let (a, b) = (component("a"), component("b"));
    let m = Manual::start(&[
        METADATA,
        ("components/a.toml", &a),
        ("components/b.toml", &b),
        ("src/a/main.tf", module),
        ("src/b/main.tf", module),
    ]);
    let c = m.cp.client();
    assert_eq!(
        run_workflow(&c, WorkflowKind::Provision).status,
        "succeeded"
    );
    // Config v2 drops b.
    let app = m.dir.path().join("app");
    std::fs::remove_file(app.join("components/b.toml")).unwrap();
    ok(m.cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]));
    let w = run_workflow(&c, WorkflowKind::Deprovision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert_eq!(
        w.config_version, 1,
        "destroyed with the config it was deployed with"
    );
    assert_eq!(step(&w, "destroy b").status, "succeeded");
    let states = rt().block_on(c.list_states("demo")).unwrap();
    assert!(states.states.iter().all(|s| s.lock.is_none()));
}

/// Copies directory `from` into `to`.
pub(crate) fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let e = entry.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&dest).unwrap();
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), dest).unwrap();
        }
    }
}

#[test]
fn wasm_component_plans_waits_applies_feeds_a_dependent_and_destroys() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(plugins) = nuon_tests::wasm_plugins() else {
        return;
    };
    let svc = nuon_tests::RecordService::start("s3cret-token").unwrap();
    let example = nuon_tests::repo_root().join("examples/apps/records");
    let endpoint = format!("records_endpoint={}", svc.url);
    let m = Manual::start_full(
        &[],
        None,
        |app| {
            copy_dir(&example, app);
            std::fs::copy(&plugins.records, app.join("plugin/records.wasm")).unwrap();
        },
        &[
            "--approval",
            "prompt",
            "--input",
            &endpoint,
            "--input",
            "seats=12",
            "--secret",
            "records_token=s3cret-token",
        ],
    );
    let c = m.cp.client();
    let builds = rt().block_on(c.list_builds("app")).unwrap().builds;
    assert!(
        builds
            .iter()
            .all(|b| b.status == nuon_core::JobStatus::Succeeded),
        "{builds:?}"
    );
    let wf = rt()
        .block_on(c.create_workflow("demo", WorkflowKind::Provision, None))
        .unwrap();
    let id = wf.id.as_str().to_owned();
    let waiting = |name: &'static str| {
        move |w: &WorkflowInfo| {
            ended(w)
                || w.steps
                    .iter()
                    .any(|s| s.name == name && s.status == "waiting_approval")
        }
    };
    // The plugin planned (validate + plan), and nothing changed yet.
    let w = wait_workflow(&c, &id, waiting("apply license"));
    let plan = step(&w, "plan license");
    assert_eq!(plan.status, "succeeded", "{w:#?}");
    assert_eq!(plan.outputs["changes"]["add"], 1, "{:?}", plan.outputs);
    assert_eq!(plan.outputs["plan"]["changes"][0]["action"], "create");
    let install = rt().block_on(c.get_install("demo")).unwrap();
    assert!(
        svc.get("licenses", install.id.as_str()).is_none(),
        "a plan changes nothing"
    );
    rt().block_on(c.approve_step(&id, Some("apply license")))
        .unwrap();
    let w = wait_workflow(&c, &id, waiting("apply app"));
    let record = svc
        .get("licenses", install.id.as_str())
        .expect("the record exists");
    assert_eq!(record["fields"]["seats"], "12");
    assert_eq!(record["fields"]["customer"], "demo");
    assert_eq!(step(&w, "apply license").outputs["outputs"]["revision"], 1);
    rt().block_on(c.approve_step(&id, Some("apply app")))
        .unwrap();
    let w = wait_workflow(&c, &id, ended);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    // The plugin's outputs fed the Terraform component.
    let out = ok(m.cp.nuon(&["installs", "outputs", "demo", "--json"]));
    let outputs: serde_json::Value = serde_json::from_str(&out).unwrap();
    let license = outputs["components"]["license"].clone();
    assert_eq!(license["revision"], 1, "{outputs}");
    let app = outputs["components"]["app"]["license"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        app.contains(&format!("/records/licenses/{}", install.id)),
        "{app}"
    );
    assert!(app.contains("(revision 1)"), "{app}");
    // The plugin's log reached the job's, and the secret did not.
    let apply_job = step(&w, "apply license").job_id.clone().unwrap();
    let logs = nuon_tests::all_logs(&c, &apply_job).unwrap();
    let text: Vec<&str> = logs.iter().map(|l| l.text.as_str()).collect();
    assert!(
        text.iter()
            .any(|l| l.contains("[plugin progress 1/1] record written")),
        "{text:?}"
    );
    assert!(
        text.iter().any(|l| l.contains("plugin records 0.1.0")),
        "{text:?}"
    );
    assert!(!text.iter().any(|l| l.contains("s3cret-token")), "{text:?}");

    // Teardown: the plugin destroys the record it manages.
    let wf = rt()
        .block_on(c.create_workflow("demo", WorkflowKind::Teardown, None))
        .unwrap();
    let id = wf.id.as_str().to_owned();
    for name in ["destroy app", "destroy license"] {
        let w = wait_workflow(&c, &id, waiting(name));
        assert!(!ended(&w), "{w:#?}");
        rt().block_on(c.approve_step(&id, Some(name))).unwrap();
    }
    let w = wait_workflow(&c, &id, ended);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert!(
        svc.get("licenses", install.id.as_str()).is_none(),
        "destroyed"
    );
    assert_eq!(
        step(&w, "plan destroy license").outputs["changes"]["destroy"],
        1
    );
}

#[test]
fn hostile_wasm_components_fail_with_clear_reasons_and_the_runner_carries_on() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(plugins) = nuon_tests::wasm_plugins() else {
        return;
    };
    let manifest = |timeout: &str, hosts: &str| {
        format!(
            "name = \"hostile\"\nversion = \"0.1.0\"\nwasm = \"hostile.wasm\"\n\n[capabilities]\nmemory = \"32MiB\"\ntimeout = \"{timeout}\"\nallowed_hosts = [{hosts}]\n"
        )
    };
    let component = |name: &str, attack: &str, grant_hosts: &str| {
        format!(
            "name = \"{name}\"\ntype = \"wasm\"\npath = \"./{name}\"\n\n[config]\nattack = \"{attack}\"\n\n[capabilities]\nmemory = \"32MiB\"\ntimeout = \"2s\"\nallowed_hosts = [{grant_hosts}]\n"
        )
    };
    let spin = manifest("1s", "");
    let bomb = manifest("2s", "");
    let greedy = manifest("2s", "\"api.example.com\"");
    let mut m = Manual::start_full(
        &[
            METADATA,
            ("components/spin.toml", &component("spin", "loop", "")),
            ("spin/plugin.toml", &spin),
            ("components/bomb.toml", &component("bomb", "memory", "")),
            ("bomb/plugin.toml", &bomb),
            ("components/greedy.toml", &component("greedy", "none", "")),
            ("greedy/plugin.toml", &greedy),
        ],
        None,
        |app| {
            for d in ["spin", "bomb", "greedy"] {
                std::fs::copy(&plugins.hostile, app.join(d).join("hostile.wasm")).unwrap();
            }
        },
        &[],
    );
    let c = m.cp.client();
    let deploy = |component: &str| {
        let wf = rt()
            .block_on(c.create_workflow("demo", WorkflowKind::Deploy, Some(component)))
            .unwrap();
        wait_workflow(&c, wf.id.as_str(), ended)
    };
    for (component, reason) in [
        ("spin", "ran past its deadline of 1s"),
        ("bomb", "reached its memory limit of 32 MiB"),
        (
            "greedy",
            "asks for more than it is granted, so it was not run: host \"api.example.com\"",
        ),
    ] {
        let t = std::time::Instant::now();
        let w = deploy(component);
        assert_eq!(w.status, "failed", "{w:#?}");
        let plan = step(&w, &format!("plan {component}"));
        let why = plan.reason.clone().unwrap_or_default();
        assert!(why.contains(reason), "{component}: {why}");
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "{component} took {:?}",
            t.elapsed()
        );
    }
    // The runner is the same process, alive, and still runs jobs.
    let mut runner = m.install_runner.take().unwrap();
    assert!(runner.try_wait().unwrap().is_none(), "the runner died");
    let w = deploy("greedy");
    assert_eq!(w.status, "failed");
    let _ = runner.kill();
    let _ = runner.wait();
}

/// Every `--json` command prints exactly one JSON document on standard
/// output, with `--wait` (progress goes to standard error) and when it
/// fails (`{"error", "code", "exit_code"}`).
#[test]
fn every_json_command_prints_one_json_document() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let component = "name = \"box\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/box\"\n";
    let module = "resource \"terraform_data\" \"box\" {\n  input = \"box-1\"\n}\n\noutput \"id\" {\n  value = terraform_data.box.output\n}\n";
    let action = "name = \"hello\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"say\"\ncommand = \"echo hello\"\n";
    let m = Manual::start(&[
        METADATA,
        ("components/box.toml", component),
        ("src/box/main.tf", module),
        ("actions/hello.toml", action),
    ]);
    let one_document = |args: &[&str]| -> (serde_json::Value, std::process::ExitStatus) {
        let mut args = args.to_vec();
        args.push("--json");
        let out = m.cp.nuon(&args);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let v: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
            panic!(
                "nuon {}: stdout is not one JSON document ({e}):\n{stdout}\nstderr:\n{}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr)
            )
        });
        (v, out.status)
    };
    let mut walked = 0;
    for args in [
        &["installs", "provision", "demo", "--wait"][..],
        &["installs", "deploy", "demo", "--wait", "--logs"],
        &[
            "installs",
            "run-action",
            "demo",
            "hello",
            "--wait",
            "--logs",
        ],
        &["installs", "teardown", "demo", "--wait", "--yes"],
        &["installs", "deprovision", "demo", "--wait", "--yes"],
        &["installs", "list"],
        &["installs", "get", "demo"],
        &["installs", "outputs", "demo"],
        &["workflows", "list", "--install", "demo"],
        &["apps", "list"],
        &["builds", "list", "--app", "app"],
        &["runners", "list"],
        &["jobs", "list"],
    ] {
        let (v, status) = one_document(args);
        assert!(status.success(), "nuon {args:?}: {v}");
        walked += 1;
    }
    let (wf, _) = one_document(&["workflows", "list", "--install", "demo"]);
    let newest = wf["workflows"][0]["id"]
        .as_str()
        .or_else(|| wf[0]["id"].as_str())
        .unwrap_or_else(|| panic!("{wf}"))
        .to_owned();
    let (watched, status) = one_document(&["workflows", "watch", &newest]);
    assert!(status.success(), "{watched}");
    assert_eq!(watched["id"], newest.as_str());
    // Failures are JSON too, with the API's code.
    for (args, code) in [
        (&["installs", "get", "nope"][..], "not_found"),
        (&["installs", "provision", "nope", "--wait"], "not_found"),
        (&["workflows", "watch", "wf_nope"], ""),
        (&["installs", "no-such-command"], "usage"),
    ] {
        let (v, status) = one_document(args);
        assert!(!status.success(), "nuon {args:?} should fail: {v}");
        assert!(v["error"].is_string(), "{v}");
        if !code.is_empty() {
            assert_eq!(v["code"], code, "{v}");
        }
        walked += 1;
    }
    eprintln!("{walked} --json commands walked, each printed one JSON document");
}

/// The issue "The destroy side and the CLI's contracts", points 1 and 2: a
/// destroy always completes. A component never applied (its provision
/// failed before it) or destroyed already is skipped and says so; a
/// dependent's destroy renders with the outputs its dependency reported at
/// its last apply, though that dependency is gone; and a config version
/// that cannot destroy (`prevent_destroy`) is replaced by a fixed one with
/// `--config VERSION`, checked before any job.
#[test]
fn a_destroy_always_completes_and_a_fixed_config_destroys_what_a_broken_one_left() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let db = |module: &str| -> [(String, String); 2] {
        [
            (
                "components/database.toml".into(),
                "name = \"database\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/database\"\n".into(),
            ),
            ("src/database/main.tf".into(), module.into()),
        ]
    };
    // v1 cannot be destroyed, and its apply fails after creating a resource.
    let broken = "resource \"terraform_data\" \"db\" {\n  input = \"db\"\n  lifecycle {\n    prevent_destroy = true\n  }\n}\n\nresource \"terraform_data\" \"boom\" {\n  input = \"boom\"\n  depends_on = [terraform_data.db]\n  provisioner \"local-exec\" {\n    command = \"exit 3\"\n  }\n}\n\noutput \"url\" {\n  value = \"postgres://db\"\n}\n";
    let fixed = "resource \"terraform_data\" \"db\" {\n  input = \"db\"\n}\n\noutput \"url\" {\n  value = \"postgres://db\"\n}\n";
    let app_toml = "name = \"app\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/app\"\n\n[vars]\ndatabase_url = \"{{ .nuon.components.database.outputs.url }}\"\n";
    let app_tf = "variable \"database_url\" {\n  type = string\n}\n\nresource \"terraform_data\" \"app\" {\n  input = var.database_url\n}\n";
    let v1 = db(broken);
    let m = Manual::start(&[
        METADATA,
        (&v1[0].0, &v1[0].1),
        (&v1[1].0, &v1[1].1),
        ("components/app.toml", app_toml),
        ("src/app/main.tf", app_tf),
    ]);
    let c = m.cp.client();
    let deprovision = |extra: &[&str]| -> (serde_json::Value, Option<i32>) {
        let mut args = vec![
            "installs",
            "deprovision",
            "demo",
            "--wait",
            "--json",
            "--yes",
        ];
        args.extend_from_slice(extra);
        let out = m.cp.nuon(&args);
        let v =
            serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
        (v, out.status.code())
    };
    let step_of = |w: &serde_json::Value, name: &str| -> serde_json::Value {
        w["steps"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"].as_str().unwrap().starts_with(name))
            .cloned()
            .unwrap_or_else(|| panic!("no step {name} in {w:#}"))
    };

    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "failed", "{w:#?}");
    assert_eq!(step(&w, "plan app").status, "pending");

    // A version that does not exist is refused before anything runs.
    let before = rt()
        .block_on(c.list_workflows("demo"))
        .unwrap()
        .workflows
        .len();
    let (err, code) = deprovision(&["--config", "9"]);
    assert_ne!(code, Some(0));
    assert_eq!(err["code"], "not_found", "{err}");
    assert!(
        err["error"]
            .as_str()
            .unwrap()
            .contains("no config version 9"),
        "{err}"
    );
    let after = rt()
        .block_on(c.list_workflows("demo"))
        .unwrap()
        .workflows
        .len();
    assert_eq!(before, after, "no workflow was queued");

    // v1: the app was never applied, so its destroy is skipped (it would
    // need the database's outputs, which never existed); the database's
    // own destroy is refused by its config.
    let (w, code) = deprovision(&[]);
    assert_ne!(code, Some(0), "{w:#}");
    let skipped = step_of(&w, "destroy app");
    assert_eq!(skipped["status"], "skipped", "{w:#}");
    let why = skipped["reason"].as_str().unwrap();
    assert!(
        why.contains("nothing to destroy") && why.contains("app"),
        "{why}"
    );
    let plan = step_of(&w, "plan destroy database");
    assert_eq!(plan["status"], "failed", "{w:#}");
    // Point 8: the failure names its job, the command and Terraform's own
    // error, not "exit code 1; see the job's log".
    let why = plan["reason"].as_str().unwrap();
    let job = plan["job_id"].as_str().unwrap();
    assert!(why.starts_with(&format!("job {job}: ")), "{why}");
    assert!(why.contains("`terraform plan -no-color"), "{why}");
    assert!(why.contains("-destroy` failed (exit code 1)"), "{why}");
    assert!(
        why.contains("Error: Instance cannot be destroyed: Resource terraform_data.db has lifecycle.prevent_destroy set"),
        "{why}"
    );

    // The fix, synced and built as v2, destroys what v1 left.
    let app = m.dir.path().join("app");
    std::fs::write(app.join("src/database/main.tf"), fixed).unwrap();
    ok(m.cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]));
    ok(m.cp.nuon(&["builds", "create", "--app", "app", "--wait"]));
    let (w, code) = deprovision(&["--config", "2"]);
    assert_eq!(code, Some(0), "{w:#}");
    assert_eq!(w["status"], "succeeded", "{w:#}");
    assert_eq!(w["config_version"], 2);
    assert_eq!(step_of(&w, "destroy database")["status"], "succeeded");
    let install = rt().block_on(c.get_install("demo")).unwrap();
    assert_eq!(install.state, "deprovisioned");

    let teardown = |extra: &[&str]| -> serde_json::Value {
        let mut args = vec!["installs", "teardown", "demo", "--wait", "--json", "--yes"];
        args.extend_from_slice(extra);
        let out = m.cp.nuon(&args);
        assert!(out.status.success(), "{}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let names = |w: &serde_json::Value| -> Vec<String> {
        w["steps"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["name"].as_str().unwrap().to_owned())
            .collect()
    };

    // The issue's own case: a teardown, then a deprovision, which finds
    // everything gone already and still completes.
    assert_eq!(
        run_workflow(&c, WorkflowKind::Provision).status,
        "succeeded"
    );
    teardown(&[]);
    // Polish: an install whose components are all torn down says so.
    let install = rt().block_on(c.get_install("demo")).unwrap();
    assert_eq!(install.state, "torn_down");
    let (w, code) = deprovision(&[]);
    assert_eq!(code, Some(0), "{w:#}");
    assert_eq!(w["status"], "succeeded", "{w:#}");
    for name in ["plan destroy app", "destroy app", "plan destroy database"] {
        assert_eq!(step_of(&w, name)["status"], "skipped", "{name}: {w:#}");
    }
    let install = rt().block_on(c.get_install("demo")).unwrap();
    assert_eq!(install.state, "deprovisioned");

    // Point 7: a teardown of the database takes the app, which depends on
    // it, down first.
    assert_eq!(
        run_workflow(&c, WorkflowKind::Provision).status,
        "succeeded"
    );
    let w = teardown(&["--component", "database"]);
    assert_eq!(
        names(&w),
        [
            "sync app",
            "plan destroy app",
            "destroy app",
            "sync database",
            "plan destroy database",
            "destroy database"
        ],
        "{w:#}"
    );
    assert_eq!(w["status"], "succeeded", "{w:#}");

    // With --only, the database alone goes, and the app stays deployed on
    // it; the deprovision after renders the app's destroy with the url the
    // database reported at its last apply.
    assert_eq!(
        run_workflow(&c, WorkflowKind::Provision).status,
        "succeeded"
    );
    let w = teardown(&["--component", "database", "--only"]);
    assert_eq!(
        names(&w),
        ["sync database", "plan destroy database", "destroy database"],
        "{w:#}"
    );
    let (w, code) = deprovision(&[]);
    assert_eq!(code, Some(0), "{w:#}");
    assert_eq!(step_of(&w, "destroy app")["status"], "succeeded", "{w:#}");
    let db_skipped = step_of(&w, "destroy database");
    assert_eq!(db_skipped["status"], "skipped", "{w:#}");
    assert!(
        db_skipped["reason"]
            .as_str()
            .unwrap()
            .contains("destroyed already"),
        "{w:#}"
    );
    let install = rt().block_on(c.get_install("demo")).unwrap();
    assert_eq!(install.state, "deprovisioned");

    // A deploy takes a config version the app has (any earlier one:
    // `daily::a_first_release_rolls_back_and_a_deploy_takes_any_version`),
    // and a teardown no --only without --component.
    let out = m.cp.nuon(&["installs", "deploy", "demo", "--config", "9"]);
    assert!(
        !out.status.success() && text(&out).contains("app app has no config version 9"),
        "{}",
        text(&out)
    );
    let out =
        m.cp.nuon(&["installs", "teardown", "demo", "--only", "--yes"]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
}

/// Points 6 and 13: a runner's state is what it is (never seen, connected,
/// gone, with the process using its token); a step whose job waits for a
/// runner that is gone says so instead of "running"; and an install
/// runner's token is reissued with `nuon runners rotate-token`, the old one
/// refused with a message that names that command.
#[test]
fn a_step_waiting_for_a_runner_that_is_gone_says_so_and_a_reissued_token_brings_it_back() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    // A short claim wait: a runner counts as gone 5 s after its last call.
    let cp = ControlPlane::start_with("3s", &["--max-claim-wait", "2s"]).unwrap();
    let mut m = Manual::start_on(cp, &BOX_APP, None, |_| {}, &[]);
    let c = m.cp.client();
    let runners = |m: &Manual| -> serde_json::Value {
        serde_json::from_str(&ok(m.cp.nuon(&["runners", "list", "--json"]))).unwrap()
    };
    let install_runner = |list: &serde_json::Value| -> serde_json::Value {
        list["runners"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["role"] == "install")
            .cloned()
            .unwrap_or_else(|| panic!("no install runner in {list:#}"))
    };
    ok(m.cp.nuon(&["runners", "create", "--name", "idle"]));
    let pid = m.install_runner.as_ref().unwrap().id();
    let seen = wait_for(
        "the install runner to be connected",
        Duration::from_secs(30),
        || {
            let r = install_runner(&runners(&m));
            (r["status"] == "connected" && r["session"]["pid"] == pid).then_some(r)
        },
    )
    .unwrap();
    let name = seen["name"].as_str().unwrap().to_owned();
    let list = runners(&m);
    let idle = list["runners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "idle")
        .unwrap();
    assert_eq!(idle["status"], "never_seen", "{list:#}");
    let table = ok(m.cp.nuon(&["runners", "list"]));
    assert!(table.contains("never seen"), "{table}");
    assert!(table.contains(&format!("pid {pid} on ")), "{table}");

    // The install runner stops; a provision waits for it, and says so.
    let mut runner = m.install_runner.take().unwrap();
    signal(runner.id(), 15);
    runner.wait().unwrap();
    wait_for(
        "the install runner to be gone",
        Duration::from_secs(30),
        || (install_runner(&runners(&m))["status"] == "gone").then_some(()),
    )
    .unwrap();
    let wf = rt()
        .block_on(c.create_workflow("demo", WorkflowKind::Provision, None))
        .unwrap();
    let waiting = wait_for("the step to say it waits", Duration::from_secs(30), || {
        let w = rt().block_on(c.get_workflow(wf.id.as_str())).ok()?;
        let s = w.steps.iter().find(|s| s.status == "running")?;
        s.reason
            .clone()
            .filter(|r| r.contains("waiting for runner"))
    })
    .unwrap();
    assert!(waiting.contains(&name), "{waiting}");
    assert!(waiting.contains("last seen"), "{waiting}");

    // Its token reissued: the old one is refused, naming the command; the
    // new one brings the runner back and the provision completes.
    // By the install's name: an install's runner is found by it.
    let rotated: serde_json::Value = serde_json::from_str(&ok(m.cp.nuon(&[
        "runners",
        "rotate-token",
        "demo",
        "--json",
    ])))
    .unwrap();
    assert_eq!(rotated["runner"]["name"], name.as_str());
    let mut old = m.runner(None);
    let refused = wait_for(
        "the old token to be refused",
        Duration::from_secs(30),
        || {
            let log = std::fs::read_to_string(m.dir.path().join("install.log")).ok()?;
            log.contains("nuon runners rotate-token").then_some(log)
        },
    )
    .unwrap();
    assert!(
        refused.contains("invalid or revoked runner token"),
        "{refused}"
    );
    let _ = old.kill();
    let _ = old.wait();
    m.install_token = rotated["token"].as_str().unwrap().to_owned();
    m.install_runner = Some(m.runner(None));
    let w = wait_workflow(&c, wf.id.as_str(), ended);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert!(
        w.steps.iter().all(|s| s
            .reason
            .as_deref()
            .is_none_or(|r| !r.contains("waiting for runner"))),
        "{w:#?}"
    );
    // Polish: jobs go to an install's runner by the install's name.
    let out =
        m.cp.nuon(&["jobs", "exec", "--runner", "demo", "--", "true"]);
    assert!(out.status.success(), "{}", text(&out));
}

/// Point 5: `--wait` stops at an approval with its own exit code, the
/// plan's summary and the exact commands; a workflow queued behind another
/// says so; an apply whose plan changes nothing says its approval was
/// skipped, not "approved"; a denied workflow does not exit 0.
#[test]
fn approvals_say_what_they_approve_and_queued_workflows_say_what_they_wait_for() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    // A policy's warnings go with the plan to approve.
    let mut files = BOX_APP.to_vec();
    files.push((
        "policies/tags.toml",
        "type = \"terraform_module\"\nengine = \"opa\"\ncontents = \"./tags.rego\"\ncomponents = [\"*\"]\n",
    ));
    files.push((
        "policies/tags.rego",
        "package nuon.tags\nimport rego.v1\n\nwarn contains \"resources carry no owner tag\" if { true }\n",
    ));
    let m = Manual::start_full(&files, None, |_| {}, &["--approval", "prompt"]);
    // Polish: the install shows its approval mode.
    let shown = ok(m.cp.nuon(&["installs", "get", "demo"]));
    assert!(shown.contains("approval: prompt"), "{shown}");
    // ... and its app by name, as the list does.
    assert!(shown.contains("app:      app (app_"), "{shown}");
    let listed = ok(m.cp.nuon(&["installs", "list"]));
    let row = listed.lines().find(|l| l.contains(" demo ")).unwrap();
    assert!(row.contains(" app "), "{listed}");
    let out = m.cp.nuon(&["installs", "provision", "demo", "--wait"]);
    let said = text(&out);
    assert_eq!(out.status.code(), Some(3), "{said}");
    assert!(said.contains("apply box waits for an approval"), "{said}");
    assert!(
        said.contains("1 to add, 0 to change, 0 to destroy"),
        "{said}"
    );
    assert!(said.contains("terraform_data.box (create)"), "{said}");
    assert!(
        said.contains("policy warning: tags: resources carry no owner tag"),
        "{said}"
    );
    let c = m.cp.client();
    let first = newest_workflow(&c);
    let approve = format!("nuon workflows approve {} --step \"apply box\"", first.id);
    assert!(said.contains(&approve), "{said}");
    assert!(
        said.contains(&format!(
            "nuon workflows deny {} --step \"apply box\"",
            first.id
        )),
        "{said}"
    );

    // A deploy asked for meanwhile is queued, and says behind what.
    let queued = ok(m.cp.nuon(&["installs", "deploy", "demo"]));
    assert!(
        queued.contains(&format!(
            "queued behind workflow {} (provision, running)",
            first.id
        )),
        "{queued}"
    );
    let second = newest_workflow(&c);
    ok(m.cp.nuon(&[
        "workflows",
        "approve",
        first.id.as_str(),
        "--step",
        "apply box",
    ]));
    assert_eq!(
        wait_workflow(&c, first.id.as_str(), ended).status,
        "succeeded"
    );

    // The deploy's plan changes nothing: its apply runs without an
    // approval, and says so.
    let out = m.cp.nuon(&["workflows", "watch", second.id.as_str()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let shown = ok(m.cp.nuon(&["workflows", "get", second.id.as_str()]));
    let apply = shown.lines().find(|l| l.contains("apply box")).unwrap();
    assert!(apply.contains("skipped: no changes"), "{shown}");
    assert!(!apply.contains(" approved "), "{shown}");

    // A teardown denied at its approval ends partial, and not with 0.
    let out =
        m.cp.nuon(&["installs", "teardown", "demo", "--wait", "--yes"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let teardown = newest_workflow(&c);
    ok(m.cp.nuon(&["workflows", "deny", teardown.id.as_str()]));
    let out = m.cp.nuon(&["workflows", "watch", teardown.id.as_str()]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    assert!(text(&out).contains("partial"), "{}", text(&out));
}

/// Points 10 and 13: a second `nuon dev` on a data dir in use is refused
/// before it touches any file (the running one's log stays whole); a
/// re-run appends to the logs of the run before; `--once` says that what
/// it started stops.
#[test]
fn a_second_nuon_dev_on_a_data_dir_is_refused_and_logs_are_appended() {
    if !have_tool("terraform", "run the example app's Terraform") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let ports = (free_port(), free_port());
    // Polish: flags meant for another control plane are refused, not
    // ignored, before anything starts.
    let out = dev(&data, ports, &["--json", "--api", "http://elsewhere:7400"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    assert!(
        text(&out).contains("--json, --api do not apply"),
        "{}",
        text(&out)
    );
    assert!(!data.exists(), "nothing was touched");
    let child = dev(&data, ports, &[])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let first = Dev(child);
    provisioned_by_dev(&data, ports.0);
    // The logs `nuon dev` writes: the control plane's and each runner's.
    let logs = || -> Vec<(PathBuf, Vec<u8>)> {
        std::fs::read_dir(&data)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "log"))
            .map(|p| {
                let bytes = std::fs::read(&p).unwrap();
                (p, bytes)
            })
            .collect()
    };
    let before = logs();
    assert!(before.len() >= 3, "{before:?}");

    let out = dev(&data, (free_port(), free_port()), &["--once"])
        .output()
        .unwrap();
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("another `nuon dev` is running on"), "{said}");
    assert!(said.contains(&format!("(pid {})", first.0.id())), "{said}");
    for (path, was) in &before {
        let now = std::fs::read(path).unwrap();
        assert!(now.starts_with(was), "{} was rewritten", path.display());
        assert!(!now.contains(&0), "{} holds NUL bytes", path.display());
    }
    drop(first);

    // A re-run (the install exists) appends to every log.
    let before = logs();
    let out = dev(&data, (free_port(), free_port()), &["--once"])
        .output()
        .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("--once: the control plane and the runners stop now"),
        "{said}"
    );
    for (path, was) in &before {
        let now = std::fs::read(path).unwrap();
        assert!(now.len() > was.len(), "{} did not grow", path.display());
        assert!(now.starts_with(was), "{} was truncated", path.display());
    }
}

/// The sh blocks of the tutorial marked `<!-- walkthrough` (the comment just
/// before the block).
fn walkthrough_blocks(readme: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = readme;
    while let Some(at) = rest.find("<!-- walkthrough") {
        rest = &rest[at..];
        let Some(start) = rest.find("```sh\n") else {
            break;
        };
        let body = &rest[start + 6..];
        let end = body.find("```").expect("a closed sh block");
        out.push(body[..end].to_owned());
        rest = &body[end..];
    }
    out
}

/// Point 12: the tutorial's walkthrough (`docs/src/tutorial.md`) after `nuon dev`, each line run as
/// written (the CLI at ./target/debug/nuon swapped for the one under test,
/// `WORKFLOW` for the workflow it names, and demo2's runner started with
/// the command `installs create` printed), from a fresh directory.
#[test]
fn the_tutorial_walkthrough_runs_as_written() {
    if !have_tool("terraform", "run the example app's Terraform") {
        return;
    }
    // The walkthrough is the book's tutorial (the README points to it).
    let readme =
        std::fs::read_to_string(nuon_tests::repo_root().join("docs/src/tutorial.md")).unwrap();
    let blocks = walkthrough_blocks(&readme);
    assert!(
        blocks.len() >= 2,
        "the tutorial marks its walkthrough: {blocks:?}"
    );
    let tmp = tempfile::tempdir().unwrap();
    let cwd = tmp.path();
    std::os::unix::fs::symlink(
        nuon_tests::repo_root().join("examples"),
        cwd.join("examples"),
    )
    .unwrap();
    let ports = (free_port(), free_port());
    let child = ours("nuon")
        .arg("dev")
        .args(["--listen", &format!("127.0.0.1:{}", ports.0)])
        .args(["--runner-listen", &format!("127.0.0.1:{}", ports.1)])
        .current_dir(cwd)
        .env_remove("NUON_TOKEN")
        .env_remove("NUON_API_URL")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _dev = Dev(child);
    let data = cwd.join("nuon-data");
    let c = provisioned_by_dev(&data, ports.0);

    let api = format!("http://127.0.0.1:{}", ports.0);
    let nuon = bin("nuon");
    // What each line printed, newest last.
    let mut printed: Vec<String> = Vec::new();
    let mut started: Vec<Child> = Vec::new();
    let mut ran = 0;
    for line in blocks.iter().flat_map(|b| b.lines()) {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('#') {
            if line.contains("start demo2's runner") {
                // The command as `installs create` printed it, joined.
                let created = printed
                    .iter()
                    .rev()
                    .find(|p| p.contains("NUON_RUNNER_TOKEN="))
                    .unwrap_or_else(|| panic!("no runner command printed:\n{printed:?}"));
                let at = created.find("NUON_RUNNER_TOKEN=").unwrap();
                let command: String = created[at..]
                    .lines()
                    .scan(true, |more, l| {
                        let go = *more;
                        *more = l.trim_end().ends_with('\\');
                        go.then(|| l.trim_end().trim_end_matches('\\').to_owned())
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
                assert!(!command.contains("RUNNER_API_URL"), "{command}");
                assert!(!command.contains("VENDOR_STORE"), "{command}");
                // Run as printed: it names the runner by its path beside
                // `nuon`, so it works with no nuon-runner on PATH.
                assert!(
                    command.contains(&bin("nuon-runner").display().to_string()),
                    "{command}"
                );
                started.push(
                    Command::new("sh")
                        .args(["-c", &command])
                        .process_group(0)
                        .current_dir(cwd)
                        .stdout(Stdio::null())
                        .stderr(std::fs::File::create(cwd.join("demo2-runner.log")).unwrap())
                        .spawn()
                        .unwrap(),
                );
            }
            continue;
        }
        let (command, comment) = line.split_once(" # ").unwrap_or((line, ""));
        let expect: i32 = comment
            .split("exit code ")
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        let mut command = command
            .trim()
            .replace("./target/debug/nuon", &nuon.display().to_string());
        if command.contains("WORKFLOW") {
            let newest = rt().block_on(c.list_workflows("demo2")).unwrap().workflows;
            command = command.replace("WORKFLOW", newest[0].id.as_str());
        }
        let out = Command::new("sh")
            .args(["-c", &command])
            .current_dir(cwd)
            .env("NUON_API_URL", &api)
            .env_remove("NUON_TOKEN")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let said = text(&out);
        assert_eq!(
            out.status.code(),
            Some(expect),
            "tutorial line `{line}`:\n{said}"
        );
        printed.push(said);
        ran += 1;
    }
    // The shell and the runner it started: the whole group.
    for mut c in started {
        nuon_tests::signal_group(c.id(), libc::SIGKILL);
        let _ = c.kill();
        let _ = c.wait();
    }
    assert!(ran >= 12, "{ran} lines ran");
    eprintln!("{ran} tutorial lines ran as written");
}

/// Point 3's last part: an apply that cannot find its plan (the runner now
/// keeps another store) says so, names the job that made the plan and the
/// command that plans again; that command completes the workflow.
#[test]
fn an_apply_whose_plan_is_in_another_store_names_where_it_came_from() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let mut m = Manual::start_full(&BOX_APP, None, |_| {}, &["--approval", "prompt"]);
    let c = m.cp.client();
    let out = m.cp.nuon(&["installs", "provision", "demo", "--wait"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let wf = newest_workflow(&c);
    // The runner comes back on another store: a copy of its own without the
    // plan (as another process of the runner, with its own store, had).
    let digest = step(&wf, "plan box").outputs["plan"]["digest"]
        .as_str()
        .unwrap()
        .trim_start_matches("sha256:")
        .to_owned();
    let another = m.dir.path().join("another-store");
    std::fs::create_dir_all(&another).unwrap();
    copy_dir(&m.store_dir, &another);
    let mut removed = 0;
    for f in walk(&another) {
        if f.file_name().is_some_and(|n| n == digest.as_str()) {
            std::fs::remove_file(f).unwrap();
            removed += 1;
        }
    }
    assert_eq!(removed, 1, "the plan blob {digest}");
    m.store_dir = another;
    m.restart_runner(None);
    ok(m.cp.nuon(&["workflows", "approve", wf.id.as_str()]));
    let failed = wait_workflow(&c, wf.id.as_str(), ended);
    assert_eq!(failed.status, "failed", "{failed:#?}");
    let why = step(&failed, "apply box").reason.clone().unwrap();
    let plan_job = step(&failed, "plan box").job_id.clone().unwrap();
    assert!(
        why.contains("the plan to apply is not in this runner's store"),
        "{why}"
    );
    assert!(
        why.contains(&format!("its plan came from job {plan_job} (plan box)")),
        "{why}"
    );
    let retry = format!("nuon workflows retry {} --step \"sync box\"", wf.id);
    assert!(why.contains(&retry), "{why}");
    ok(m.cp.nuon(&["workflows", "retry", wf.id.as_str(), "--step", "sync box"]));
    let waiting = wait_for("the new plan's approval", Duration::from_secs(60), || {
        let w = rt().block_on(c.get_workflow(wf.id.as_str())).ok()?;
        (step(&w, "apply box").status == "waiting_approval").then_some(())
    });
    waiting.unwrap();
    ok(m.cp.nuon(&["workflows", "approve", wf.id.as_str()]));
    let done = wait_workflow(&c, wf.id.as_str(), ended);
    assert_eq!(done.status, "succeeded", "{done:#?}");
}

/// A stand-in `kubectl`: records its arguments and the manifest it gets,
/// and answers like kubectl (`-o name` lines of what the manifest holds;
/// `diff` exits 1 with a `diff` header an object).
pub(crate) fn stand_in_kubectl() -> (tempfile::TempDir, std::path::PathBuf) {
    let bin = tempfile::tempdir().unwrap();
    let record = bin.path().join("record");
    let script = format!(
        r#"#!/bin/sh
rec="{rec}"
echo "ARGS $*" >> "$rec"
f=""; prev=""
for a in "$@"; do [ "$prev" = "-f" ] && f="$a"; prev="$a"; done
[ -n "$f" ] && echo "MANIFEST $(tr '\n' ' ' < "$f")" >> "$rec"
names() {{ awk '/^kind:/{{k=tolower($2)}} /^  name:/{{print k"/"$2}}' "$f"; }}
case "$1" in
  apply) names ;;
  diff) names | sed 's/^/diff -u -N live\//'; exit 1 ;;
  delete) echo "deleted" ;;
  *) echo "unexpected: $*" >&2; exit 2 ;;
esac
"#,
        rec = record.display()
    );
    write_executable(&bin.path().join("kubectl"), &script);
    (bin, record)
}

/// A `kubernetes_manifest` component: its inline manifest is packaged,
/// synced, rendered, planned (`kubectl diff`) and applied server-side; a
/// later config that renders less prunes the rest; a teardown deletes what
/// was applied. Against a stand-in `kubectl` (no Kubernetes API server runs
/// here).
#[test]
fn a_kubernetes_manifest_is_applied_server_side_pruned_and_deleted_with_a_stand_in_kubectl() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(registry) = nuon_tests::Registry::start(None).unwrap() else {
        return;
    };
    let (bin, record) = stand_in_kubectl();
    let two = concat!(
        "name = \"cfg\"\ntype = \"kubernetes_manifest\"\nnamespace = \"{{ .nuon.install.name }}\"\n",
        "manifest = \"\"\"\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\n",
        "data:\n  greeting: \"{{ .nuon.install.inputs.greeting | upper }}\"\n---\n",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  ports:\n  - port: 80\n\"\"\"\n",
    );
    let mut m = Manual::start_with(
        &[
            METADATA,
            (
                "inputs.toml",
                "[[input]]\nname = \"greeting\"\ndescription = \"what it says\"\ndefault = \"hello\"\n",
            ),
            ("components/cfg.toml", two),
        ],
        Some(&registry.url),
    );
    let c = m.cp.client();
    m.restart_runner_with_tools(bin.path());
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert_eq!(
        w.steps.iter().map(|s| s.name.as_str()).collect::<Vec<_>>(),
        [
            "await install stack",
            "await runner",
            "sync cfg",
            "plan cfg",
            "apply cfg"
        ]
    );
    assert_eq!(step(&w, "plan cfg").outputs["changes"]["add"], 2);
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(
        outputs.components["cfg"]["objects"],
        serde_json::json!(["configmap/app-config", "service/web"]),
        "{outputs:?}"
    );
    let rec = std::fs::read_to_string(&record).unwrap();
    assert!(
        rec.contains("ARGS apply --server-side --field-manager=nuon --namespace demo -f ")
            && rec.contains("--dry-run=server -o name"),
        "{rec}"
    );
    assert!(
        rec.contains("ARGS diff --server-side --field-manager=nuon --namespace demo -f "),
        "{rec}"
    );
    assert!(rec.contains("--force-conflicts -o name"), "{rec}");
    assert!(
        rec.contains("greeting: \"HELLO\""),
        "the manifest is rendered: {rec}"
    );

    // Config v2 renders only the ConfigMap: the Service is pruned.
    let app = m.dir.path().join("app");
    let one = two.split("---").next().unwrap().to_owned() + "\"\"\"\n";
    std::fs::write(app.join("components/cfg.toml"), one).unwrap();
    ok(m.cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]));
    ok(m.cp.nuon(&["builds", "create", "--app", "app", "--wait"]));
    std::fs::write(&record, "").unwrap();
    let w = run_workflow(&c, WorkflowKind::Deploy);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert_eq!(
        step(&w, "plan cfg").outputs["changes"]["destroy"],
        1,
        "{w:#?}"
    );
    let rec = std::fs::read_to_string(&record).unwrap();
    assert!(
        rec.contains("ARGS delete --ignore-not-found --namespace demo service/web"),
        "the object no longer rendered is pruned: {rec}"
    );
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(
        outputs.components["cfg"]["objects"],
        serde_json::json!(["configmap/app-config"])
    );

    // A teardown deletes what the last apply made.
    std::fs::write(&record, "").unwrap();
    let w = run_workflow(&c, WorkflowKind::Teardown);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let rec = std::fs::read_to_string(&record).unwrap();
    assert!(
        rec.contains("ARGS delete --ignore-not-found --wait --namespace demo configmap/app-config"),
        "{rec}"
    );
}

/// A `kubernetes_manifest` with `[kustomize]`: without `kustomize` on the
/// runner's PATH its plan fails saying what to install; with it (a
/// stand-in that records its arguments and prints the kustomization's
/// resource), the packaged directory is built and what it printed is
/// applied server-side. Against stand-in `kustomize` and `kubectl`.
#[test]
fn a_kustomization_is_built_with_kustomize_or_the_plan_says_what_to_install() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(registry) = nuon_tests::Registry::start(None).unwrap() else {
        return;
    };
    let (bin, record) = stand_in_kubectl();
    let kust = "name = \"kust\"\ntype = \"kubernetes_manifest\"\nnamespace = \"shop\"\npath = \"k8s\"\n\n[kustomize]\npath = \"overlays/prod\"\nenable_helm = true\n";
    let mut m = Manual::start_with(
        &[
            METADATA,
            ("components/kust.toml", kust),
            (
                "k8s/overlays/prod/kustomization.yaml",
                "resources:\n- cm.yaml\n",
            ),
            (
                "k8s/overlays/prod/cm.yaml",
                "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-kustomize\ndata:\n  tier: prod\n",
            ),
        ],
        Some(&registry.url),
    );
    let c = m.cp.client();
    m.restart_runner_with_tools(bin.path());
    let w = run_workflow(&c, WorkflowKind::Provision);
    if which::which("kustomize").is_ok() {
        eprintln!("NOTE: a real kustomize is on PATH here: its absence is not checked");
    } else {
        assert_eq!(w.status, "failed", "{w:#?}");
        let plan = step(&w, "plan kust");
        let reason = plan.reason.clone().unwrap_or_default();
        assert!(
            reason.contains("the `kustomize` binary is not on PATH; install it (https://kubectl.docs.kubernetes.io/installation/kustomize/)"),
            "{reason}"
        );
    }
    // With kustomize: the retry builds the packaged overlay and applies it.
    write_executable(
        &bin.path().join("kustomize"),
        &format!(
            "#!/bin/sh\necho \"ARGS kustomize $*\" >> \"{}\"\n[ \"$1\" = build ] || exit 2\ncat \"$2/cm.yaml\"\n",
            record.display()
        ),
    );
    m.restart_runner_with_tools(bin.path());
    if w.status == "failed" {
        ok(m.cp.nuon(&["workflows", "retry", w.id.as_str(), "--wait"]));
    }
    let w = rt().block_on(c.get_workflow(w.id.as_str())).unwrap();
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let rec = std::fs::read_to_string(&record).unwrap();
    let build = rec
        .lines()
        .find(|l| l.starts_with("ARGS kustomize build "))
        .unwrap_or_else(|| panic!("kustomize did not run: {rec}"));
    assert!(
        build.contains("/source/overlays/prod") && build.ends_with(" --enable-helm"),
        "{build}"
    );
    assert!(
        rec.contains("ARGS apply --server-side --field-manager=nuon --namespace shop -f ")
            && rec.contains("name: from-kustomize"),
        "{rec}"
    );
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(
        outputs.components["kust"]["objects"],
        serde_json::json!(["configmap/from-kustomize"]),
        "{outputs:?}"
    );
}

/// An action's outputs: what its steps write to
/// `$NUON_ACTIONS_OUTPUT_FILEPATH` (a JSON object, or KEY=VALUE lines) are
/// the install's `actions` outputs, read by later templates as
/// `.nuon.actions.workflows.NAME.outputs.KEY`; an outputs file that is
/// neither fails the run saying so. A step script named in
/// `inline_contents` runs as a script.
#[test]
fn an_action_writes_outputs_that_later_templates_read() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let produce = "name = \"produce\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"write\"\ncommand = \"printf '{\\\"version\\\": \\\"1.2.3\\\", \\\"build\\\": 7}' > \\\"$NUON_ACTIONS_OUTPUT_FILEPATH\\\"\"\n";
    let lines = "name = \"lines\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"script\"\ninline_contents = \"./scripts/lines.sh\"\n";
    let consume = "name = \"consume\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"read\"\ncommand = \"echo consumed {{ .nuon.actions.workflows.produce.outputs.version }} on {{ .nuon.actions.workflows.lines.outputs.channel }}\"\n";
    let bad = "name = \"bad\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"write\"\ncommand = \"echo 'no equals sign' > \\\"$NUON_ACTIONS_OUTPUT_FILEPATH\\\"\"\n";
    let m = Manual::start(&[
        METADATA,
        ("actions/produce.toml", produce),
        ("actions/lines.toml", lines),
        ("actions/consume.toml", consume),
        ("actions/bad.toml", bad),
        (
            "scripts/lines.sh",
            "#!/bin/sh\n# a script of the config, run as a script\necho \"channel=stable\" >> \"$NUON_ACTIONS_OUTPUT_FILEPATH\"\necho \"# a comment\" >> \"$NUON_ACTIONS_OUTPUT_FILEPATH\"\n",
        ),
    ]);
    let c = m.cp.client();
    for a in ["produce", "lines"] {
        let out = m.cp.nuon(&["installs", "run-action", "demo", a, "--wait"]);
        assert!(out.status.success(), "{a}: {}", text(&out));
    }
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(
        outputs.actions["produce"]["version"], "1.2.3",
        "{outputs:?}"
    );
    assert_eq!(outputs.actions["produce"]["build"], 7);
    assert_eq!(outputs.actions["lines"]["channel"], "stable");
    let shown = ok(m.cp.nuon(&["installs", "outputs", "demo"]));
    assert!(
        shown
            .lines()
            .any(|l| l.contains("action produce") && l.contains("version") && l.contains("1.2.3")),
        "{shown}"
    );
    let out = m.cp.nuon(&[
        "installs",
        "run-action",
        "demo",
        "consume",
        "--wait",
        "--logs",
    ]);
    let t = text(&out);
    assert!(out.status.success(), "{t}");
    assert!(t.contains("consumed 1.2.3 on stable"), "{t}");
    let out =
        m.cp.nuon(&["installs", "run-action", "demo", "bad", "--wait"]);
    let t = text(&out);
    assert!(!out.status.success(), "{t}");
    let w = newest_workflow(&c);
    let reason = step(&w, "action bad").reason.clone().unwrap_or_default();
    assert!(
        reason.contains("not KEY=VALUE") && reason.contains("NUON_ACTIONS_OUTPUT_FILEPATH"),
        "{reason}"
    );
}

/// Review findings: a secret's `format = "base64"` was checked in the
/// config and never applied, and Nuon's secret `default` was refused. A
/// generated base64 secret is base64, a given one must be, and a default
/// is the value when the install gives none.
#[test]
fn secret_formats_and_defaults_apply() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let secrets = concat!(
        "[[secret]]\nname = \"gen\"\ndescription = \"generated\"\nauto_generate = true\nformat = \"base64\"\n\n",
        "[[secret]]\nname = \"given\"\ndescription = \"given\"\nformat = \"base64\"\n\n",
        "[[secret]]\nname = \"fallback\"\ndescription = \"defaulted\"\ndefault = \"the-default\"\n",
    );
    let report = concat!(
        "name = \"report\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"measure\"\n",
        "command = \"\"\"\n",
        "gen='{{ .nuon.secrets.gen }}'\n",
        "printf 'gen_chars=%s\\\\n' \"${#gen}\" >> \"$NUON_ACTIONS_OUTPUT_FILEPATH\"\n",
        "printf '%s' \"$gen\" | base64 -d > /dev/null && echo gen_decodes=yes >> \"$NUON_ACTIONS_OUTPUT_FILEPATH\"\n",
        "echo 'fallback={{ .nuon.secrets.fallback }}' >> \"$NUON_ACTIONS_OUTPUT_FILEPATH\"\n",
        "\"\"\"\n",
    );
    let files = [
        METADATA,
        ("secrets.toml", secrets),
        ("actions/report.toml", report),
    ];
    let m = Manual::start_full(
        &files,
        None,
        |_| {},
        &["--secret", "given=aGVsbG8gd29ybGQ="],
    );
    let c = m.cp.client();
    let out =
        m.cp.nuon(&["installs", "run-action", "demo", "report", "--wait"]);
    assert!(out.status.success(), "{}", text(&out));
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    let a = &outputs.actions["report"];
    assert_eq!(a["gen_chars"], "32", "24 random bytes in base64: {a:?}");
    assert_eq!(a["gen_decodes"], "yes", "{a:?}");
    assert_eq!(a["fallback"], "the-default", "{a:?}");
    // A given value that is not base64 is refused, saying why.
    let out = m.cp.nuon(&[
        "installs",
        "create",
        "--app",
        "app",
        "--name",
        "demo2",
        "--secret",
        "given=not base64!",
    ]);
    assert!(!out.status.success());
    assert!(text(&out).contains("is not base64"), "{}", text(&out));
}

/// Rego policies (`engine = "opa"`) are evaluated by the install's runner
/// against `terraform show -json` of each plan: `deny` fails the plan with
/// the policy's messages, `warn` is kept with a plan that passes.
#[test]
fn a_rego_policy_denies_a_terraform_plan_before_its_apply() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let module =
        "variable \"value\" {}\nresource \"terraform_data\" \"x\" {\n  input = var.value\n}\n";
    let component = |name: &str, value: &str| {
        format!(
            "name = \"{name}\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/m\"\n\n[vars]\nvalue = \"{value}\"\n"
        )
    };
    let (ok_c, bad_c) = (component("ok", "fine"), component("zbad", "forbidden"));
    let rego = concat!(
        "package nuon.guard\nimport rego.v1\n\n",
        "deny contains msg if {\n  some r in input.resource_changes\n  r.type == \"terraform_data\"\n",
        "  r.change.after.input == \"forbidden\"\n  msg := sprintf(\"%s sets a forbidden input\", [r.address])\n}\n\n",
        "warn contains \"terraform_data is for tests\" if {\n  some r in input.resource_changes\n  r.type == \"terraform_data\"\n}\n",
    );
    let m = Manual::start(&[
        METADATA,
        ("components/ok.toml", &ok_c),
        ("components/zbad.toml", &bad_c),
        ("src/m/main.tf", module),
        (
            "policies/guard.toml",
            "type = \"terraform_module\"\nengine = \"opa\"\ncontents = \"./guard.rego\"\ncomponents = [\"*\"]\n",
        ),
        ("policies/guard.rego", rego),
    ]);
    let c = m.cp.client();
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "failed", "{w:#?}");
    let ok_plan = step(&w, "plan ok");
    assert_eq!(ok_plan.status, "succeeded", "{w:#?}");
    assert_eq!(
        ok_plan.outputs["policy_warnings"],
        serde_json::json!(["guard: terraform_data is for tests"])
    );
    assert_eq!(step(&w, "apply ok").status, "succeeded");
    let bad = step(&w, "plan zbad");
    assert_eq!(bad.status, "failed", "{w:#?}");
    let reason = bad.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("denied by policy")
            && reason.contains("guard: terraform_data.x sets a forbidden input"),
        "{reason}"
    );
    assert!(
        w.steps
            .iter()
            .all(|s| s.name != "apply zbad" || s.status != "succeeded"),
        "a denied plan is never applied: {w:#?}"
    );
}

/// Review finding: an action step's repository (`[steps.git]`,
/// `[steps.public_repo]`) was parsed and never checked out. A step with
/// one runs in the directory it names of a fresh clone.
#[test]
fn an_action_step_runs_in_its_repository() {
    if !have_tool("terraform", "run Terraform") || !have_tool("git", "clone a source") {
        return;
    }
    let repo = tempfile::tempdir().unwrap();
    write_files(
        repo.path(),
        &[
            (
                "ops/check.sh",
                "#!/bin/sh\necho \"checked=$(cat version.txt)\" >> \"$NUON_ACTIONS_OUTPUT_FILEPATH\"\n",
            ),
            ("ops/version.txt", "v7\n"),
        ],
    );
    let script = repo.path().join("ops/check.sh");
    write_executable(&script, &std::fs::read_to_string(&script).unwrap());
    commit_all(repo.path(), "ops");
    let action = format!(
        "name = \"check\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"in-repo\"\ncommand = \"./check.sh\"\n\n[steps.git]\nrepo = \"file://{0}\"\nbranch = \"ops\"\ndirectory = \"ops\"\n\n[[steps]]\nname = \"after\"\ncommand = \"echo after=$(test -e version.txt && echo in-repo || echo back) >> \\\"$NUON_ACTIONS_OUTPUT_FILEPATH\\\"\"\n\n[[steps]]\nname = \"public\"\ncommand = \"echo public=$(cat version.txt) >> \\\"$NUON_ACTIONS_OUTPUT_FILEPATH\\\"\"\n\n[steps.public_repo]\nrepo = \"file://{0}\"\nbranch = \"ops\"\ndirectory = \"./ops\"\n",
        repo.path().display()
    );
    let m = Manual::start(&[METADATA, ("actions/check.toml", &action)]);
    let c = m.cp.client();
    let out =
        m.cp.nuon(&["installs", "run-action", "demo", "check", "--wait"]);
    assert!(out.status.success(), "{}", text(&out));
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.actions["check"]["checked"], "v7", "{outputs:?}");
    assert_eq!(
        outputs.actions["check"]["after"], "back",
        "the next step is back where it was: {outputs:?}"
    );
    // `[steps.public_repo]`, as Nuon spells it (here by URL: nothing
    // reaches GitHub from a test), is checked out too.
    assert_eq!(outputs.actions["check"]["public"], "v7", "{outputs:?}");
}
