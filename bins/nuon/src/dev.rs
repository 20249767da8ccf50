//! `nuon dev`: the whole loop on one machine. Starts the control plane on an
//! embedded store in a local directory and a local runner (child processes),
//! runs a demo job with its log live, and keeps both running until Ctrl-C
//! (`--once` stops after the demo).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nuon_client::{ClientConfig, ControlClient};
use nuon_core::wire::CreateJob;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

use crate::{CliError, job_exit_code, print_log_line};

/// Options of `nuon dev`.
#[derive(Debug, clap::Args)]
pub struct DevArgs {
    /// Where the control plane keeps its store and the runner its work dir.
    #[arg(long, default_value = "nuon-data")]
    data_dir: PathBuf,
    /// Exit after the demo instead of running until Ctrl-C.
    #[arg(long)]
    once: bool,
    /// Address of the Control API.
    #[arg(long, default_value = "127.0.0.1:7400")]
    listen: String,
    /// Address of the Runner API.
    #[arg(long, default_value = "127.0.0.1:7401")]
    runner_listen: String,
}

const DEMO: &str = r#"echo "hello from job $NUON_JOB_ID on $(uname -n)"
for step in fetch plan apply; do echo "step: $step"; sleep 0.3; done
echo "a line on stderr" >&2
echo done"#;

fn sibling(name: &str) -> Result<PathBuf, CliError> {
    let exe = std::env::current_exe().map_err(|e| CliError::usage(e.to_string()))?;
    let path = exe.with_file_name(name);
    if path.exists() {
        Ok(path)
    } else {
        Err(CliError::usage(format!(
            "{name} not found next to {}; build all binaries with `cargo build --bins`",
            exe.display()
        )))
    }
}

fn io(what: &str) -> impl FnOnce(std::io::Error) -> CliError + '_ {
    move |e| CliError {
        message: format!("{what}: {e}"),
        code: 1,
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
    std::fs::create_dir_all(&args.data_dir).map_err(io("cannot create the data dir"))?;
    let data_dir = args
        .data_dir
        .canonicalize()
        .map_err(io("cannot resolve the data dir"))?;
    eprintln!(
        "==> starting the control plane (data in {})",
        args.data_dir.display()
    );
    let mut ctl = Command::new(sibling("nuon-ctl")?)
        .args(["serve", "--data-dir"])
        .arg(data_dir.join("control"))
        .args([
            "--listen",
            &args.listen,
            "--runner-listen",
            &args.runner_listen,
        ])
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(data_dir.join("control.log")).map_err(io("log file"))?)
        .kill_on_drop(true)
        .spawn()
        .map_err(io("cannot start nuon-ctl"))?;
    let mut lines = BufReader::new(ctl.stdout.take().expect("piped")).lines();
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
                });
            }
        }
    }
    let (control_url, runner_url) = (urls[0].clone(), urls[1].clone());
    let admin = read(&data_dir.join("control/admin-token"))?;
    let client = ControlClient::new(ClientConfig::new(&control_url, &admin)?)?;
    let token = runner_token(&client, &data_dir).await?;

    eprintln!("==> starting a local runner");
    let mut runner = Command::new(sibling("nuon-runner")?)
        .arg("run")
        .args(["--api", &runner_url, "--signing-key"])
        .arg(data_dir.join("control/org-signing-key.pub"))
        .arg("--work-dir")
        .arg(data_dir.join("runner"))
        // In the environment, not the command line, where `ps` would show it.
        .env("NUON_RUNNER_TOKEN", &token)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(data_dir.join("runner.log")).map_err(io("log file"))?)
        .kill_on_drop(true)
        .spawn()
        .map_err(io("cannot start nuon-runner"))?;

    eprintln!("==> running a demo job on it, log live:");
    let job = client
        .create_job(&CreateJob {
            runner: "local".into(),
            kind: "exec".into(),
            payload: serde_json::json!({"command": "sh", "args": ["-c", DEMO]}),
            timeout_secs: Some(120),
            max_attempts: Some(1),
        })
        .await?;
    let mut follower = client.follow_logs(&job.id, 0);
    while let Some(line) = follower.next().await? {
        print_log_line(&line);
    }
    let done = client.get_job(&job.id).await?;
    eprintln!("==> job {} {}", done.id, done.status);
    let me = std::env::current_exe()
        .ok()
        .and_then(|p| {
            let cwd = std::env::current_dir().ok()?;
            Some(match p.strip_prefix(&cwd) {
                Ok(rel) => format!("./{}", rel.display()),
                Err(_) => p.display().to_string(),
            })
        })
        .unwrap_or_else(|| "nuon".into());
    let api = if control_url == "http://127.0.0.1:7400" {
        String::new()
    } else {
        format!(" --api {control_url}")
    };
    eprintln!(
        "\nThe control plane is at {control_url} (Control API) and {runner_url} (Runner API); logs in {dir}/.\nTry, from this directory (the CLI finds the admin token in {dir}/control/admin-token):\n  {me}{api} jobs list\n  {me}{api} jobs exec --runner local --wait -- uname -a\n  {me}{api} apps validate examples/apps/hello",
        dir = args.data_dir.display()
    );
    if !args.once {
        eprintln!("\nRunning until Ctrl-C.");
        let _ = tokio::signal::ctrl_c().await;
    }
    eprintln!("==> stopping");
    stop(&mut runner).await;
    stop(&mut ctl).await;
    Ok(job_exit_code(&done))
}

fn read(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_owned())
        .map_err(io("cannot read the control plane's files"))
}

/// The local runner's token: created on first use and kept in the data dir.
async fn runner_token(client: &ControlClient, data_dir: &Path) -> Result<String, CliError> {
    let path = data_dir.join("runner-token");
    if let Ok(t) = std::fs::read_to_string(&path) {
        return Ok(t.trim().to_owned());
    }
    let created = client.create_runner("local").await?;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
        .map_err(io("cannot store the runner token"))?;
    std::io::Write::write_all(&mut f, created.token.as_bytes()).map_err(io("write token"))?;
    Ok(created.token)
}
