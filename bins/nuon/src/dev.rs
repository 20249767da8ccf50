//! `nuon dev`: the whole product on one machine. Starts the control plane
//! on an embedded store in a local directory, the org's build runner and a
//! local install runner (child processes); syncs an example app, builds
//! it, creates an install and provisions it with live progress; prints the
//! outputs and the time of each phase, and keeps everything running until
//! Ctrl-C (`--once` stops after the workflow).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nuon_client::{ClientConfig, ControlClient};
use nuon_core::STOP_WITH_PARENT_ENV;
use nuon_core::model::ApprovalMode;
use nuon_core::wire::{ConfigFile, CreateInstall};
use nuon_core::workflow::WorkflowKind;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::CliError;

/// Options of `nuon dev`.
#[derive(Debug, clap::Args)]
pub struct DevArgs {
    /// Where the control plane keeps its store and the runner its work dir.
    #[arg(long, default_value = "nuon-data")]
    data_dir: PathBuf,
    /// Exit after the workflow instead of running until Ctrl-C.
    #[arg(long)]
    once: bool,
    /// The app config directory to deploy (default: the example app built
    /// in, `hello`, or `aws` with `--cloud aws-fake`, written to
    /// DATA_DIR/apps/ on first run).
    #[arg(long)]
    app_dir: Option<PathBuf>,
    /// The customer's cloud: `none` (the install's runner from its VM
    /// bundle, on this machine) or `aws-fake` (a fake AWS account on
    /// loopback, moto with IAM enforced: the install stack is applied to
    /// it in its Terraform form, and every job acts in it as its
    /// operation's role; it prints how to look into it with the AWS CLI).
    #[arg(long, default_value = "none", value_parser = ["none", "aws-fake"])]
    cloud: String,
    /// The app's name (default: the directory's name).
    #[arg(long)]
    app: Option<String>,
    /// The install's name; its inputs come from the app's installs/NAME.toml.
    #[arg(long, default_value = "demo")]
    install: String,
    /// `approve-all`, or `prompt` to approve each apply with
    /// `nuon workflows approve` (default: the install's `approval_option`
    /// in installs/NAME.toml, else approve-all).
    #[arg(long, value_parser = ApprovalMode::from_config)]
    approval: Option<ApprovalMode>,
    /// Print the log lines of the workflow's jobs.
    #[arg(long)]
    logs: bool,
    /// Address of the Control API.
    #[arg(long, default_value = "127.0.0.1:7400")]
    listen: String,
    /// Address of the Runner API.
    #[arg(long, default_value = "127.0.0.1:7401")]
    runner_listen: String,
    /// How the install's runner runs jobs: `process` or `container` (each
    /// job's processes in runc containers of a tool image packaged from
    /// this machine's `terraform` and a static busybox into the install's
    /// store; the runner's own PATH then has no Terraform). Needs root and
    /// runc.
    #[arg(long, default_value = "process", value_parser = ["process", "container"])]
    isolation: String,
}

/// Our binary `name`: beside this one (a build's target dir, an install's
/// bin dir), else on PATH.
pub(crate) fn sibling(name: &str) -> Result<PathBuf, CliError> {
    let exe = std::env::current_exe().map_err(|e| CliError::usage(e.to_string()))?;
    let path = exe.with_file_name(name);
    if path.exists() {
        return Ok(path);
    }
    which::which(name).map_err(|_| {
        CliError::usage(format!(
            "{name} is not next to {} nor on PATH: install it beside nuon (`cargo install --path bins/{name}`, or `cargo build --bins` in the repository)",
            exe.display()
        ))
    })
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> CliError + '_ {
    move |e| CliError {
        message: format!("{what}: {e}"),
        code: 1,
        api_code: None,
    }
}

async fn stop(child: &mut Child) {
    if let Some(pid) = child.id() {
        // Ask for a drain first; kill only when it does not come.
        let _ = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
    }
    if tokio::time::timeout(Duration::from_secs(20), child.wait())
        .await
        .is_err()
    {
        let _ = child.kill().await;
    }
}

/// Runs `nuon dev`.
pub async fn run(args: &DevArgs) -> Result<u8, CliError> {
    // Ctrl-C or SIGTERM (a supervisor's, or `kill`) at any point, even in
    // the middle of provisioning, stops the child processes before `nuon
    // dev` exits; none is left behind.
    let (tx, rx) = tokio::sync::watch::channel(false);
    let signal = tokio::spawn(async move {
        if crate::stop_asked().await {
            let _ = tx.send(true);
        }
    });
    let mut children = Vec::new();
    let mut interrupted = rx.clone();
    let result = tokio::select! {
        r = run_children(args, &mut children, rx) => r,
        _ = interrupted.wait_for(|v| *v) => {
            eprintln!("\n==> interrupted");
            Ok(130)
        }
    };
    eprintln!("==> stopping");
    for child in children.iter_mut().rev() {
        stop(child).await;
    }
    signal.abort();
    result
}

/// Everything `nuon dev` does; the processes it starts go into `children`.
async fn run_children(
    args: &DevArgs,
    children: &mut Vec<Child>,
    mut interrupt: tokio::sync::watch::Receiver<bool>,
) -> Result<u8, CliError> {
    let t0 = Instant::now();
    let fake_aws = args.cloud == "aws-fake";
    std::fs::create_dir_all(&args.data_dir).map_err(io("cannot create the data dir"))?;
    let app_dir = crate::examples::app_dir(args.app_dir.as_deref(), &args.data_dir, fake_aws)?;
    let data_dir = args
        .data_dir
        .canonicalize()
        .map_err(io("cannot resolve the data dir"))?;
    // Before any other file of the data dir is touched: another `nuon dev`
    // on it keeps its logs and its control plane.
    let _lock = lock_data_dir(&data_dir)?;
    eprintln!(
        "==> starting the control plane (data in {})",
        args.data_dir.display()
    );
    let mut ctl = Command::new(sibling("nuon-ctl")?)
        .env(STOP_WITH_PARENT_ENV, std::process::id().to_string())
        .args(["serve", "--data-dir"])
        .arg(data_dir.join("control"))
        .args([
            "--listen",
            &args.listen,
            "--runner-listen",
            &args.runner_listen,
        ])
        .stdout(Stdio::piped())
        .stderr(append(&data_dir.join("control.log"))?)
        .kill_on_drop(true)
        .spawn()
        .map_err(io("cannot start nuon-ctl"))?;
    let mut lines = BufReader::new(ctl.stdout.take().expect("piped")).lines();
    children.push(ctl);
    let mut urls = Vec::new();
    while urls.len() < 2 {
        match lines.next_line().await.map_err(io("reading nuon-ctl"))? {
            Some(line) => urls.push(
                line.split_once(": ")
                    .map(|x| x.1.to_owned())
                    .unwrap_or(line),
            ),
            None => {
                // Say why, from the control plane's own log.
                let log_path = data_dir.join("control.log");
                let log = std::fs::read_to_string(&log_path).unwrap_or_default();
                let why = log
                    .lines()
                    .rev()
                    .find(|l| l.contains("nuon-ctl:") || l.contains("ERROR"))
                    .map(|l| format!(": {}", l.trim()))
                    .unwrap_or_default();
                return Err(CliError {
                    message: format!(
                        "the control plane exited at start{why} (full log: {})",
                        log_path.display()
                    ),
                    code: 1,
                    api_code: None,
                });
            }
        }
    }
    let (control_url, runner_url) = (urls[0].clone(), urls[1].clone());
    let admin = read(&data_dir.join("control/admin-token"))?;
    let client = ControlClient::new(ClientConfig::new(&control_url, &admin)?)?;

    let phase = |name: &str, since: Instant, phases: &mut Vec<(String, Duration)>| {
        phases.push((name.to_owned(), since.elapsed()));
    };
    let mut phases = Vec::new();
    phase("start control plane", t0, &mut phases);

    let t = Instant::now();
    let vendor_store = data_dir.join("vendor-store");
    let build_token = read(&data_dir.join("control/build-runner-token"))?;
    eprintln!(
        "==> starting the build runner (vendor store in {})",
        args.data_dir.join("vendor-store").display()
    );
    children.push(spawn_runner(
        "nuon-build-runner",
        &runner_url,
        &data_dir,
        &build_token,
        &data_dir.join("build-runner"),
        &[("--vendor-store", &vendor_store)],
    )?);

    let app_dir = &app_dir;
    let app_name = args.app.clone().unwrap_or_else(|| {
        app_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "app".into())
    });
    eprintln!("==> syncing {} as app {app_name}", app_dir.display());
    let files = nuon_client::app_dir::read_dir(app_dir).map_err(|d| {
        for x in &d.0 {
            eprintln!("{x}");
        }
        CliError::usage(format!(
            "cannot read the app config in {}",
            app_dir.display()
        ))
    })?;
    let sources = crate::deploy::read_sources(app_dir, &files).await?;
    let config_files = files
        .iter()
        .map(|f| ConfigFile {
            path: f.name.clone(),
            contents: f.text.clone(),
            encoding: None,
        })
        .collect();
    if client.get_app(&app_name).await.is_err() {
        client.create_app(&app_name).await?;
    }
    let version = client.sync_config(&app_name, config_files, sources).await?;
    eprintln!(
        "    config v{}: {} components",
        version.version,
        version.config.components.len()
    );
    phase("sync app", t, &mut phases);

    let t = Instant::now();
    eprintln!("==> building its components on the build runner");
    let builds = client.create_builds(&app_name, None).await?.builds;
    let builds = crate::deploy::wait_builds(&client, builds).await?;
    for b in &builds {
        match &b.artifact {
            Some(a) => eprintln!("    {:<10} {}@{}", b.component, a.repo, a.digest),
            None => {
                return Err(CliError {
                    message: format!(
                        "the build of {} {}: {} (see `nuon builds logs {}`)",
                        b.component,
                        b.status,
                        b.reason.clone().unwrap_or_default(),
                        b.id
                    ),
                    code: 1,
                    api_code: None,
                });
            }
        }
    }
    phase("build", t, &mut phases);

    let t = Instant::now();
    let install_dir = data_dir.join("installs").join(&args.install);
    std::fs::create_dir_all(&install_dir).map_err(io("cannot create the install's directory"))?;
    // The install's runner comes from its stack (the VM bundle), as it
    // would in a customer's account: `install.sh --no-systemd` installs
    // the binary under the install's directory and starts it; it phones
    // home with the stack's one-time token. Each run downloads the stack
    // again (the Runner API's address may have changed) and applies it:
    // the runner phones home anew and its token is rotated, as when a
    // customer updates their stack.
    let stack_dir = install_dir.join("stack");
    if client.get_install(&args.install).await.is_ok() {
        eprintln!("==> install {} exists; provisioning it again", args.install);
    } else {
        eprintln!("==> creating install {}", args.install);
        let decl = version
            .config
            .installs
            .iter()
            .find(|i| i.name == args.install);
        let inputs = decl.map(|d| d.inputs.clone()).unwrap_or_default();
        // The flag, else what the app's installs/NAME.toml says (`auto`
        // is Nuon's name for approve-all).
        let approval = match (
            args.approval,
            decl.and_then(|d| d.approval_option.as_deref()),
        ) {
            (Some(a), _) => a,
            (None, Some(text)) => ApprovalMode::from_config(text).map_err(|e| {
                CliError::usage(format!(
                    "installs/{}.toml: approval_option: {e}",
                    args.install
                ))
            })?,
            (None, None) => ApprovalMode::ApproveAll,
        };
        if approval == ApprovalMode::Prompt {
            eprintln!(
                "==> approvals: each apply waits for `nuon workflows approve` (approval_option = \"prompt\"; --approval approve-all to skip)"
            );
        }
        // Local secrets: random values, kept only sealed on the control
        // plane. A customer-held one is entered in the install stack.
        let secrets = version
            .config
            .secrets
            .iter()
            .filter(|s| !s.held_by_customer())
            .map(|s| (s.name.clone(), random_secret()))
            .collect();
        client
            .create_install(&CreateInstall {
                app: app_name.clone(),
                name: args.install.clone(),
                inputs,
                secrets,
                approval: Some(approval),
                labels: decl.map(|d| d.labels.clone()).unwrap_or_default(),
                components: decl
                    .map(|d| d.component_toggles.clone())
                    .unwrap_or_default(),
                overrides: decl.map(|d| d.components.clone()).unwrap_or_default(),
            })
            .await?;
    }
    phase("create install", t, &mut phases);

    eprintln!("==> provisioning {}", args.install);
    let wf = client
        .create_workflow(&args.install, WorkflowKind::Provision, None)
        .await?;
    let store_dir = install_dir.join("store");
    let mut fake = None;
    let mut stack_began_ms = None;
    let mut runner = if fake_aws {
        let moto_log = data_dir.join("fake-aws.log");
        eprintln!(
            "==> starting the customer's fake AWS account (moto on loopback, IAM enforced; log {})",
            moto_log.display()
        );
        let aws = crate::fake_aws::FakeAws::start(children, &moto_log).await?;
        let stack_dir = crate::fake_aws::stack_dir(&install_dir);
        eprintln!(
            "==> downloading the install's stack (terraform) into {}",
            stack_dir.display()
        );
        let stack = client
            .install_stack(&args.install, Some("terraform"))
            .await?;
        crate::ops::write_stack(&stack, &stack_dir)?;
        // The customer's side: the values only they know.
        let entered: Vec<(String, String)> = version
            .config
            .secrets
            .iter()
            .filter(|s| s.held_by_customer() && !s.auto_generate)
            .map(|s| (s.name.clone(), random_secret()))
            .collect();
        for (name, _) in &entered {
            eprintln!(
                "    the customer enters secret {name}: it stays in the fake account's Secrets Manager"
            );
        }
        let ts = Instant::now();
        stack_began_ms = Some(nuon_core::now_ms());
        let tf_log = data_dir.join("stack-terraform.log");
        eprintln!(
            "==> applying it as the customer's administrator: terraform apply (log {})",
            tf_log.display()
        );
        aws.apply_stack(&stack_dir, &entered, &tf_log).await?;
        phase("apply install stack (terraform)", ts, &mut phases);
        eprintln!(
            "==> starting the runner the stack configured (its launch template's user data), as the account's runner host"
        );
        let settings = aws.runner_settings().await?;
        let work = install_dir.join("runner");
        let mut cmd = Command::new(sibling("nuon-runner")?);
        cmd.env(STOP_WITH_PARENT_ENV, std::process::id().to_string());
        cmd.arg("run")
            .arg("--work-dir")
            .arg(&work)
            .envs(settings)
            .envs(aws.runner_env())
            .env("NUON_RUNNER_STORE_DIR", &store_dir)
            .env("NUON_RUNNER_VENDOR_STORE", &vendor_store)
            .stdout(Stdio::null())
            .stderr(append(&log_of(&data_dir, &install_dir, "-runner"))?)
            .kill_on_drop(true);
        let runner = cmd.spawn().map_err(io("cannot start nuon-runner"))?;
        fake = Some(aws);
        runner
    } else {
        eprintln!(
            "==> downloading the install's stack (vm) into {}",
            stack_dir.display()
        );
        let stack = client.install_stack(&args.install, Some("vm")).await?;
        crate::ops::write_stack(&stack, &stack_dir)?;
        eprintln!(
            "==> applying it: sh install.sh --no-systemd (the runner's store in {})",
            store_dir.display()
        );
        vm_runner(
            args,
            &stack_dir,
            &install_dir,
            &data_dir,
            &store_dir,
            &vendor_store,
        )
        .await?
    };
    // From here: the runner phones home, and the provision runs.
    let t = Instant::now();
    // A runner that stops (a refused token, a bad path) says so at once,
    // rather than the provision waiting for a phone-home.
    let how = crate::deploy::Watch {
        logs: args.logs,
        stop_at_approval: false,
        progress: crate::output::Progress::Stdout,
    };
    let watched = crate::deploy::watch(&client, wf.id.as_str(), how);
    let done = tokio::select! {
        done = watched => done?,
        status = runner.wait() => {
            return Err(CliError {
                message: format!(
                    "the install's runner stopped before the provision ended ({}): see {}",
                    status.map_or_else(|e| e.to_string(), |s| s.to_string()),
                    log_of(&data_dir, &install_dir, "-runner").display()
                ),
                code: 1,
                api_code: None,
            });
        }
    };
    children.push(runner);
    phase("provision", t, &mut phases);
    if let Some(began) = stack_began_ms {
        runner_healthy_since(&client, began).await;
    }
    let code = crate::deploy::exit_of(&done);
    if code == 0 {
        let outputs = client.install_outputs(&args.install).await?;
        eprintln!("==> outputs");
        for (k, v) in &outputs.sandbox {
            eprintln!("    sandbox.{k} = {v}");
        }
        for (c, o) in &outputs.components {
            for (k, v) in o {
                eprintln!("    {c}.{k} = {v}");
            }
        }
    } else {
        eprintln!(
            "==> workflow {} {}: see `nuon workflows get {}`",
            done.id, done.status, done.id
        );
    }
    let total: Duration = phases.iter().map(|p| p.1).sum();
    eprintln!(
        "==> phases: {} (total {:.2}s)",
        phases
            .iter()
            .map(|(n, d)| format!("{n} {:.3}s", d.as_secs_f64()))
            .collect::<Vec<_>>()
            .join(", "),
        total.as_secs_f64()
    );
    let me = crate::our_binary("nuon");
    let api = if control_url == "http://127.0.0.1:7400" {
        String::new()
    } else {
        format!(" --api {control_url}")
    };
    // The CLI finds the admin token by itself only in ./nuon-data.
    let token = if args.data_dir == Path::new("nuon-data") {
        format!(
            "from this directory (the CLI finds the admin token in {}/control/admin-token)",
            args.data_dir.display()
        )
    } else {
        format!(
            "after `export NUON_TOKEN=$(cat {}/control/admin-token)`",
            args.data_dir.display()
        )
    };
    let commands = format!(
        "  {me}{api} workflows get {wf}\n  {me}{api} installs outputs {inst}\n  {me}{api} installs state list {inst}\n  {me}{api} installs deploy {inst} --wait --logs\n  {me}{api} installs deprovision {inst} --wait",
        wf = done.id,
        inst = args.install,
    );
    if args.once {
        // What it started stops now: the commands are for the next run.
        eprintln!(
            "\n--once: the control plane and the runners stop now; their data and logs stay in {dir}/. \
             `{me} dev --data-dir {dir}` starts them again on it (the install is found and provisioned again); \
             then, {token}:\n{commands}",
            dir = args.data_dir.display(),
        );
    } else {
        // A one-time code, not the admin token: a link in a terminal's
        // scrollback or a shared screen signs nobody in later.
        let sign_in = match client.create_sign_in_code().await {
            Ok(link) => format!(
                "{} (once, within 10 minutes; `{me}{api} orgs sign-in-link` makes another)",
                link.url
            ),
            Err(e) => format!("{control_url}/login (no sign-in link: {e})"),
        };
        eprintln!(
            "\nThe control plane is at {control_url} (Control API) and {runner_url} (Runner API); logs in {dir}/.\nThe dashboard, signed in as the local admin: {sign_in}\nTry, {token}:\n{commands}",
            dir = args.data_dir.display(),
        );
    }
    if let Some(aws) = &fake {
        eprintln!("\n{}", aws.how_to_look());
    }
    if !args.once {
        eprintln!("\nRunning until Ctrl-C.");
        let _ = interrupt.wait_for(|v| *v).await;
    }
    Ok(code)
}

/// The install's runner from its VM bundle in `stack_dir` (in containers
/// of a tool image with `--isolation container`).
async fn vm_runner(
    args: &DevArgs,
    stack_dir: &Path,
    install_dir: &Path,
    data_dir: &Path,
    store_dir: &Path,
    vendor_store: &Path,
) -> Result<Child, CliError> {
    let mut runner_env: Vec<(&str, std::ffi::OsString)> = vec![
        (
            "NUON_RUNNER_STORE_DIR",
            store_dir.to_path_buf().into_os_string(),
        ),
        (
            "NUON_RUNNER_VENDOR_STORE",
            vendor_store.to_path_buf().into_os_string(),
        ),
    ];
    if args.isolation == "container" {
        let (image, path) = container_tools(store_dir).await?;
        eprintln!(
            "==> jobs run in containers of {image} (from the install's store); the runner's PATH has no terraform"
        );
        runner_env.push(("NUON_RUNNER_ISOLATION", "container".into()));
        runner_env.push(("NUON_RUNNER_JOB_IMAGE", image.into()));
        runner_env.push(("PATH", path));
    }
    apply_vm_stack(stack_dir, install_dir, data_dir, &runner_env)
}

/// Applies the install's VM bundle in `stack_dir`: `install.sh
/// --no-systemd` installs the runner under `install_dir` and runs it in
/// the foreground (the child is the runner once the script execs it).
fn apply_vm_stack(
    stack_dir: &Path,
    install_dir: &Path,
    data_dir: &Path,
    env: &[(&str, std::ffi::OsString)],
) -> Result<Child, CliError> {
    let log = log_of(data_dir, install_dir, "-runner");
    // install.sh takes absolute paths of plain characters only.
    let install_dir =
        &std::path::absolute(install_dir).map_err(io("cannot resolve the install's directory"))?;
    let plain = install_dir.to_str().is_some_and(|p| {
        p.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/-".contains(c))
    });
    if !plain {
        return Err(CliError::usage(format!(
            "--data-dir: the install's stack cannot be applied under {} (install.sh takes paths of letters, digits, . _ - and / only): give another --data-dir",
            install_dir.display()
        )));
    }
    let mut cmd = Command::new("sh");
    cmd.env(STOP_WITH_PARENT_ENV, std::process::id().to_string())
        .arg(stack_dir.join("install.sh"))
        .arg("--no-systemd")
        .arg("--binary")
        .arg(sibling("nuon-runner")?)
        .arg("--prefix")
        .arg(install_dir.join("runner-bin"))
        .arg("--work-dir")
        .arg(install_dir.join("runner"));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.stdout(Stdio::null())
        .stderr(append(&log)?)
        .kill_on_drop(true)
        .spawn()
        .map_err(io("cannot apply the install's stack"))
}

/// For `--isolation container`: this machine's `terraform` and a static
/// busybox packaged as a tool image into the install's store at
/// `store_dir`; the image (`REPOSITORY@DIGEST`) and the `PATH` the runner
/// gets, with no directory that has a Terraform.
async fn container_tools(store_dir: &Path) -> Result<(String, std::ffi::OsString), CliError> {
    let missing = |what: &str| CliError::usage(format!("--isolation container: {what}"));
    which::which("runc")
        .map_err(|_| missing("needs runc on PATH (Debian: apt-get install runc), and root"))?;
    let terraform = which::which("terraform")
        .map_err(|_| missing("needs terraform on PATH, to package it into the jobs' tool image"))?;
    let busybox = which::which("busybox").map_err(|_| {
        missing("needs a static busybox on PATH (Debian: apt-get install busybox-static)")
    })?;
    let store = nuon_plugins::oci::LayoutStore::open(store_dir)
        .map_err(|e| CliError::usage(format!("the install's store: {e}")))?;
    let digest = nuon_plugins::oci::image::push_tool_image(
        &store,
        "nuon-tools/terraform",
        "dev",
        &busybox,
        &[("terraform".into(), terraform)],
    )
    .await
    .map_err(|e| CliError {
        message: format!("cannot build the jobs' tool image: {e}"),
        code: 1,
        api_code: None,
    })?;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let kept: Vec<PathBuf> = std::env::split_paths(&path)
        .filter(|d| !["terraform", "tofu"].iter().any(|b| d.join(b).exists()))
        .collect();
    let path = std::env::join_paths(kept).map_err(|e| CliError::usage(e.to_string()))?;
    Ok((format!("nuon-tools/terraform@{digest}"), path))
}

/// The log of what runs in `dir` (under `data_dir`): `DATA_DIR/a-b{suffix}.log`.
fn log_of(data_dir: &Path, dir: &Path, suffix: &str) -> std::path::PathBuf {
    let name = dir
        .strip_prefix(data_dir)
        .unwrap_or(dir)
        .to_string_lossy()
        .replace('/', "-");
    data_dir.join(format!("{name}{suffix}.log"))
}

/// Starts runner binary `bin` against the Runner API.
fn spawn_runner(
    bin: &str,
    runner_url: &str,
    data_dir: &Path,
    token: &str,
    work_dir: &Path,
    extra: &[(&str, &Path)],
) -> Result<Child, CliError> {
    let log = log_of(data_dir, work_dir, "");
    let mut cmd = Command::new(sibling(bin)?);
    cmd.env(STOP_WITH_PARENT_ENV, std::process::id().to_string());
    cmd.arg("run")
        .args(["--api", runner_url, "--signing-key"])
        .arg(data_dir.join("control/org-signing-key.pub"))
        .arg("--work-dir")
        .arg(work_dir);
    for (flag, path) in extra {
        cmd.arg(flag).arg(path);
    }
    // In the environment, not the command line, where `ps` would show it.
    cmd.env("NUON_RUNNER_TOKEN", token)
        .stdout(Stdio::null())
        .stderr(append(&log)?)
        .kill_on_drop(true)
        .spawn()
        .map_err(io("cannot start a runner"))
}

/// The lock of a data dir `nuon dev` runs on, held as long as it runs; it
/// names the process holding it.
fn lock_data_dir(data_dir: &Path) -> Result<std::fs::File, CliError> {
    use std::io::{Read, Seek, Write};
    let path = data_dir.join("dev.lock");
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io("cannot open the data dir's lock"))?;
    match f.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut holder = String::new();
            let _ = f.read_to_string(&mut holder);
            let holder = holder.trim();
            let who = if holder.is_empty() {
                String::new()
            } else {
                format!(" (pid {holder})")
            };
            return Err(CliError {
                message: format!(
                    "another `nuon dev` is running on {}{who}; stop it (Ctrl-C) first, or pass another --data-dir",
                    data_dir.display()
                ),
                code: 1,
                api_code: Some("data_dir_in_use".into()),
            });
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(io("cannot lock the data dir")(e));
        }
    }
    f.set_len(0)
        .and_then(|()| f.rewind())
        .and_then(|()| writeln!(f, "{}", std::process::id()))
        .map_err(io("cannot write the data dir's lock"))?;
    Ok(f)
}

/// A log file, appended to: an earlier run's lines stay.
fn append(path: &Path) -> Result<std::fs::File, CliError> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io("log file"))
}

fn random_secret() -> String {
    let mut raw = [0u8; 16];
    nuon_core::random_bytes(&mut raw);
    raw.iter().map(|b| format!("{b:02x}")).collect()
}

fn read(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(io("cannot read the control plane's files"))
}

/// Says how long after the stack's apply began the runner it configured
/// was healthy (it phoned home and called since).
async fn runner_healthy_since(client: &ControlClient, began_ms: i64) {
    let Ok(list) = client.list_runners().await else {
        return;
    };
    let healthy = list.runners.iter().filter_map(|r| {
        let install = r.role != nuon_core::wire::RunnerRole::Build;
        let healthy = r.health == nuon_core::wire::RunnerHealth::Healthy;
        r.health_since_ms
            .filter(|since| install && healthy && *since >= began_ms)
    });
    if let Some(healthy) = healthy.min() {
        eprintln!(
            "==> the install's runner was healthy {:.2}s after the stack's apply began",
            (healthy - began_ms) as f64 / 1000.0
        );
    }
}
