//! The `nuon` CLI's commands, as a library so tests and embedders can run them.
//!
//! Every command takes `--json`: standard output then carries exactly one
//! JSON document (the API's JSON; with `--wait` the finished workflow or
//! job, its progress on standard error), a failure included:
//! `{"error": MESSAGE, "code": CODE, "exit_code": N}`, `CODE` the API's
//! stable error code or `usage`, `unreachable`, `failed`. (`jobs logs
//! --follow --json` streams a document a line.)
//! Exit codes: 0 success, 1 an API or connection error, 64 bad usage or
//! configuration, 65 an invalid app config (`apps validate`); `jobs exec --wait` exits with the job's own exit code
//! (124 when it timed out, 130 when it was cancelled, 1 when it failed without one).
//! Output into a closed pipe (`nuon jobs logs ID | head`) ends the command
//! quietly with 141, as a process killed by SIGPIPE would.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

/// `println!` for a command's output, through [`write_stdout`].
macro_rules! outln {
    () => {
        $crate::write_stdout(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::write_stdout(format_args!($($arg)*))
    };
}

mod apps;
mod deploy;
mod dev;
mod groups;
mod images;
mod lifecycle;
mod ops;
mod plugins;
mod releases;
mod rollouts;
mod runner_releases;
mod users;
use nuon_client::{ClientConfig, ControlClient};
use nuon_core::wire::{CreateJob, JobInfo, LogEntry, LogStream};
use nuon_core::{ExecJob, Job, JobId, JobStatus};

/// The command line.
#[derive(Debug, Parser)]
#[command(name = "nuon", version, about = "Drive a nuon control plane")]
pub struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

impl Cli {
    /// Parses the process arguments.
    pub fn try_parse_args() -> Result<Self, clap::Error> {
        <Cli as Parser>::try_parse()
    }

    /// Whether `--json` was given: standard output then carries exactly
    /// one JSON document, an error included ([`CliError::to_json`]).
    pub fn json(&self) -> bool {
        self.global.json
    }
}

#[derive(Debug, Args)]
pub(crate) struct Global {
    /// Control API URL.
    #[arg(
        long,
        global = true,
        env = "NUON_API_URL",
        default_value = "http://127.0.0.1:7400"
    )]
    api: String,
    /// API token. Without one, the admin token of a `nuon dev` control plane
    /// in ./nuon-data is used when there is one.
    #[arg(long, global = true, env = "NUON_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Extra PEM CA certificates to trust.
    #[arg(long, global = true, env = "NUON_CA_BUNDLE")]
    ca_bundle: Option<PathBuf>,
    /// Print the API's JSON instead of a table.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the control plane and a local runner on this machine, with a demo job.
    Dev(dev::DevArgs),
    /// Runners: one per install, one build runner per org.
    Runners {
        #[command(subcommand)]
        command: RunnersCommand,
    },
    /// Jobs and their logs.
    Jobs {
        #[command(subcommand)]
        command: JobsCommand,
    },
    /// Apps and their config versions.
    Apps {
        #[command(subcommand)]
        command: apps::AppsCommand,
    },
    /// Installs: one customer's copy of an app each.
    Installs {
        #[command(subcommand)]
        command: apps::InstallsCommand,
    },
    /// The components of an app.
    Components {
        #[command(subcommand)]
        command: apps::ComponentsCommand,
    },
    /// Releases, their rollouts across the fleet in waves, and release
    /// bundles for installs with no route to the vendor's store.
    Releases {
        #[command(subcommand)]
        command: releases::ReleasesCommand,
    },
    /// WASM plugins: run one locally, as the runner would.
    Plugins {
        #[command(subcommand)]
        command: plugins::PluginsCommand,
    },
    /// Builds of an app's components into the vendor's artifact store.
    Builds {
        #[command(subcommand)]
        command: deploy::BuildsCommand,
    },
    /// The workflows of installs (provision, deploy, teardown, deprovision).
    Workflows {
        #[command(subcommand)]
        command: apps::WorkflowsCommand,
    },
    /// The token's org and its API tokens.
    Orgs {
        #[command(subcommand)]
        command: apps::OrgsCommand,
    },
    /// The org's people: invite by email address with a role, change
    /// roles, remove.
    Users {
        #[command(subcommand)]
        command: users::UsersCommand,
    },
    /// Sign in to an org through its OpenID Connect provider: prints the
    /// URL to open; the page it ends on shows an API token of your own.
    Login(users::LoginArgs),
    /// The org's audit trail: list, export, verify.
    Audit {
        #[command(subcommand)]
        command: ops::AuditCommand,
    },
    /// Container images of jobs that run in containers: tool images.
    Images {
        #[command(subcommand)]
        command: images::ImagesCommand,
    },
}

#[derive(Debug, Subcommand)]
enum RunnersCommand {
    /// Register a runner; prints its id, its token (shown once) and the signing public key.
    Create {
        /// A name unique in the org.
        #[arg(long)]
        name: String,
    },
    /// List the org's runners.
    List,
    /// Revoke a runner's token (by name or id).
    Revoke {
        /// The runner.
        runner: String,
    },
    /// Issue a runner (by name or id; an install's runner is named after
    /// the install) a new token; the old one stops working at once.
    RotateToken {
        /// The runner.
        runner: String,
    },
    /// Runner versions: publish one (signed by the org's key), roll it out
    /// to install runners in waves, pause, resume or roll it back.
    Release {
        #[command(subcommand)]
        command: runner_releases::RunnerReleaseCommand,
    },
}

// Parsed once per process: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum JobsCommand {
    /// Run a command on a runner.
    Exec {
        /// The runner, by name or id.
        #[arg(long)]
        runner: String,
        /// Timeout of one attempt (e.g. 30s, 10m, 2h).
        #[arg(long, default_value = "1h", value_parser = nuon_core::parse_duration)]
        timeout: Duration,
        /// Attempts in all when an attempt is lost with its runner.
        #[arg(long, default_value_t = 1)]
        max_attempts: u32,
        /// Environment for the command (repeatable).
        #[arg(long = "env", value_name = "KEY=VALUE", value_parser = parse_env)]
        env: Vec<(String, String)>,
        /// Working directory inside the job's work directory.
        #[arg(long)]
        dir: Option<String>,
        /// Stream the log live and exit with the job's exit code.
        #[arg(long)]
        wait: bool,
        /// On a runner that runs jobs in containers: the image to run the
        /// command in, from the install's store (REPOSITORY@sha256:HEX).
        #[arg(long)]
        image: Option<nuon_core::ImageRef>,
        /// Its container's memory limit (e.g. 64MiB).
        #[arg(long, value_parser = nuon_core::wasm::parse_size)]
        memory: Option<u64>,
        /// Its container's CPU limit in thousandths of a CPU (e.g. 500).
        #[arg(long)]
        millicpus: Option<u64>,
        /// Its container's limit on processes and threads.
        #[arg(long)]
        pids: Option<u64>,
        /// Whether it may use the network: on or off (default: the runner's
        /// policy for commands).
        #[arg(long, value_parser = ["on", "off"])]
        network: Option<String>,
        /// The command and its arguments.
        #[arg(last = true, required = true, num_args = 1..)]
        command: Vec<String>,
    },
    /// Show one job.
    Get {
        /// The job id.
        id: String,
    },
    /// Print a job's log.
    Logs {
        /// The job id.
        id: String,
        /// Keep printing new lines until the job finishes.
        #[arg(long, short)]
        follow: bool,
        /// Print the job's output as it is, terminal control sequences
        /// and all (they are taken out unless this is given).
        #[arg(long)]
        raw: bool,
    },
    /// Cancel a job.
    Cancel {
        /// The job id.
        id: String,
    },
    /// List the org's newest jobs.
    List {
        /// How many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
}

pub(crate) fn parse_env(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("expected KEY=VALUE, got {s:?}"))?;
    if k.is_empty() {
        return Err(format!("empty variable name in {s:?}"));
    }
    Ok((k.to_owned(), v.to_owned()))
}

/// A failed command: what to print and the exit code.
#[derive(Debug)]
pub struct CliError {
    /// The message for stderr.
    pub message: String,
    /// The process exit code.
    pub code: u8,
    /// The API's stable error code, when the API refused.
    pub api_code: Option<String>,
}

impl CliError {
    /// The error as the one JSON document of a `--json` command:
    /// `{"error": MESSAGE, "code": CODE, "exit_code": N}`, `CODE` the API's
    /// stable error code, or what kind of failure it was.
    pub fn to_json(&self) -> String {
        let code = self.api_code.clone().unwrap_or_else(|| {
            match self.code {
                64 => "usage",
                65 => "invalid_config",
                69 => "unavailable",
                74 => "io_error",
                _ => "failed",
            }
            .to_owned()
        });
        serde_json::json!({"error": self.message, "code": code, "exit_code": self.code}).to_string()
    }

    /// A usage error (exit code 64).
    pub fn usage(message: impl Into<String>) -> Self {
        CliError {
            message: message.into(),
            code: 64,
            api_code: None,
        }
    }
}

impl From<nuon_client::Error> for CliError {
    fn from(e: nuon_client::Error) -> Self {
        let code = if matches!(e, nuon_client::Error::Config(_)) {
            64
        } else {
            1
        };
        let api_code = match &e {
            nuon_client::Error::Api { code, .. } => Some(code.clone()),
            nuon_client::Error::Connect { .. } => Some("unreachable".into()),
            _ => None,
        };
        CliError {
            message: e.to_string(),
            code,
            api_code,
        }
    }
}

fn job_id(raw: &str) -> Result<JobId, CliError> {
    raw.parse()
        .map_err(|e: nuon_core::IdError| CliError::usage(e.to_string()))
}

impl Global {
    /// The Control API's URL, without a trailing slash.
    pub(crate) fn api_url(&self) -> &str {
        self.api.trim_end_matches('/')
    }
}

pub(crate) fn client(global: &Global) -> Result<ControlClient, CliError> {
    let token = match &global.token {
        Some(t) if t.trim().is_empty() => {
            return Err(CliError::usage(
                "the API token is empty: NUON_TOKEN (or --token) is set to nothing; set it to a \
                 token from `nuon tokens create`, or unset it to use a local control plane's \
                 admin token",
            ));
        }
        Some(t) => t.clone(),
        None => std::fs::read_to_string("nuon-data/control/admin-token")
            .map(|t| t.trim().to_owned())
            .map_err(|_| {
                CliError::usage(
                    "no API token: pass --token or set NUON_TOKEN (a local control plane keeps its admin token in DATA_DIR/admin-token; `nuon dev` in ./nuon-data/control)",
                )
            })?,
    };
    let mut config = ClientConfig::new(&global.api, &token)?;
    config.ca_bundle = global.ca_bundle.clone();
    Ok(ControlClient::new(config)?)
}

/// Writes one line to standard output. When that is a closed pipe (the
/// reader, such as `head`, has what it wanted) the command ends at once and
/// quietly with 141, as Unix tools killed by SIGPIPE do, instead of
/// panicking or (when following a log) going on for ever.
pub(crate) fn write_stdout(args: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    // Standard output is line-buffered: the newline writes the line out.
    let written = out.write_fmt(args).and_then(|()| out.write_all(b"\n"));
    if let Err(e) = written {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(141);
        }
        eprintln!("nuon: cannot write to standard output: {e}");
        std::process::exit(74);
    }
}

pub(crate) fn print_json<T: serde::Serialize>(value: &T) -> Result<(), CliError> {
    let text = serde_json::to_string_pretty(value).map_err(|e| CliError {
        message: format!("cannot encode JSON: {e}"),
        code: 1,
        api_code: None,
    })?;
    outln!("{text}");
    Ok(())
}

pub(crate) fn fmt_time(ms: Option<i64>) -> String {
    match ms {
        None => "-".into(),
        Some(ms) => {
            let ago = (nuon_core::now_ms() - ms).max(0) / 1000;
            match ago {
                0..60 => format!("{ago}s ago"),
                60..3600 => format!("{}m ago", ago / 60),
                3600..86400 => format!("{}h ago", ago / 3600),
                _ => format!("{}d ago", ago / 86400),
            }
        }
    }
}

/// Prints rows as columns padded to their widest cell.
pub(crate) fn table(header: &[&str], rows: Vec<Vec<String>>) {
    if rows.is_empty() {
        outln!("(none)");
        return;
    }
    let rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| {
            r.iter()
                .map(|c| terminal_safe(c).replace('\n', " "))
                .collect()
        })
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                s.push_str(cell);
            } else {
                s.push_str(&format!("{cell:<w$}  ", w = *w));
            }
        }
        outln!("{}", s.trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row);
    }
}

/// The exit code a finished job maps to.
pub fn job_exit_code(job: &JobInfo) -> u8 {
    match job.status {
        JobStatus::Succeeded => 0,
        JobStatus::TimedOut => 124,
        JobStatus::Cancelled => 130,
        _ => match job.exit_code {
            Some(c) if (1..=255).contains(&c) => c as u8,
            _ => 1,
        },
    }
}

/// Prints a job's log line; its control sequences are taken out unless
/// `raw` (a job's output must not drive the reader's terminal).
pub(crate) fn print_log_line(line: &LogEntry, raw: bool) {
    let text = if raw {
        std::borrow::Cow::Borrowed(line.text.as_str())
    } else {
        terminal_safe(&line.text)
    };
    match line.stream {
        LogStream::Stdout => outln!("{text}"),
        LogStream::Stderr => eprintln!("{text}"),
        LogStream::System => eprintln!("[runner] {text}"),
    }
}

/// `text` with what a terminal would take as a command taken out: escape
/// sequences (CSI, OSC, DCS and the rest, 7-bit and 8-bit), other control
/// characters but tab and newline, and the bidirectional overrides that
/// reorder what is shown. A job's output, a name or a value from the
/// control plane cannot then retitle the window, rewrite lines already
/// shown, write to the clipboard or hide text.
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        (c.is_control() && c != '\t' && c != '\n')
            || ('\u{202a}'..='\u{202e}').contains(&c)
            || ('\u{2066}'..='\u{2069}').contains(&c)
    };
    if !text.chars().any(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    // Skips a string command up to its terminator (BEL, ESC \ or ST).
    fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
        while let Some(c) = chars.next() {
            match c {
                '\u{7}' | '\u{9c}' => return,
                '\u{1b}' if chars.peek() == Some(&'\\') => {
                    chars.next();
                    return;
                }
                _ => {}
            }
        }
    }
    // Skips a control sequence's parameters up to its final byte.
    fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
        for c in chars.by_ref() {
            if ('\u{40}'..='\u{7e}').contains(&c) {
                return;
            }
        }
    }
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']' | 'P' | '_' | '^' | 'X') => skip_string(&mut chars),
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            c if unsafe_char(c) => {}
            c => out.push(c),
        }
    }
    std::borrow::Cow::Owned(out)
}

async fn follow_to_end(client: &ControlClient, id: &JobId, print: bool) -> Result<(), CliError> {
    let mut follower = client.follow_logs(id, 0);
    while let Some(line) = follower.next().await? {
        if print {
            print_log_line(&line, false);
        }
    }
    Ok(())
}

/// Runs a parsed command line; returns the process exit code.
pub async fn run(cli: Cli) -> Result<u8, CliError> {
    let g = &cli.global;
    match &cli.command {
        Command::Runners { command } => {
            let client = client(g)?;
            match command {
                RunnersCommand::Create { name } | RunnersCommand::RotateToken { runner: name } => {
                    let created = match command {
                        RunnersCommand::Create { .. } => client.create_runner(name).await?,
                        _ => client.rotate_runner_token(name).await?,
                    };
                    if g.json {
                        print_json(&created)?;
                    } else {
                        outln!("runner id:          {}", created.runner.id);
                        outln!("runner token:       {}", created.token);
                        outln!("signing public key: {}", created.signing_public_key);
                        eprintln!(
                            "\nThe token is shown only now. Start the runner (again) with:\n  NUON_RUNNER_TOKEN={} nuon-runner run --api {} --signing-key {}",
                            created.token,
                            created
                                .runner_api_url
                                .as_deref()
                                .unwrap_or("RUNNER_API_URL"),
                            created.signing_public_key
                        );
                    }
                }
                RunnersCommand::List => {
                    let list = client.list_runners().await?;
                    if g.json {
                        print_json(&list)?;
                    } else {
                        table(
                            &[
                                "ID",
                                "NAME",
                                "ROLE",
                                "LAST SEEN",
                                "STATE",
                                "HEALTH",
                                "JOBS",
                                "PROCESS",
                            ],
                            list.runners
                                .into_iter()
                                .map(|r| {
                                    let jobs = r.telemetry.as_ref().map_or_else(
                                        || "-".into(),
                                        |t| {
                                            format!(
                                                "{}/{} running, {} unshipped",
                                                t.busy, t.slots, t.spool_backlog
                                            )
                                        },
                                    );
                                    vec![
                                        r.id.to_string(),
                                        r.name,
                                        r.role.as_str().into(),
                                        fmt_time(r.last_seen_at_ms),
                                        r.status.as_str().replace('_', " "),
                                        match r.telemetry.as_ref().and_then(|t| t.disabled.as_ref())
                                        {
                                            Some(_) => format!("{} (disabled)", r.health.as_str()),
                                            None => r.health.as_str().into(),
                                        },
                                        jobs,
                                        r.session
                                            .map(|s| {
                                                let v = s
                                                    .version
                                                    .map(|v| format!(" v{v}"))
                                                    .unwrap_or_default();
                                                format!("pid {} on {}{v}", s.pid, s.host)
                                            })
                                            .unwrap_or_else(|| "-".into()),
                                    ]
                                })
                                .collect(),
                        );
                    }
                }
                RunnersCommand::Release { command } => {
                    return runner_releases::runner_releases(g, command).await;
                }
                RunnersCommand::Revoke { runner } => {
                    let r = client.revoke_runner(runner).await?;
                    if g.json {
                        print_json(&r)?;
                    } else {
                        outln!("revoked runner {} ({})", r.name, r.id);
                    }
                }
            }
            Ok(0)
        }
        Command::Jobs { command } => jobs(g, command).await,
        Command::Apps { command } => apps::apps(g, command).await,
        Command::Installs { command } => apps::installs(g, command).await,
        Command::Components { command } => apps::components(g, command).await,
        Command::Orgs { command } => apps::orgs(g, command).await,
        Command::Audit { command } => ops::audit(g, command).await,
        Command::Users { command } => users::users(g, command).await,
        Command::Login(args) => users::login(g, args),
        Command::Workflows { command } => apps::workflows(g, command).await,
        Command::Builds { command } => deploy::builds(g, command).await,
        Command::Releases { command } => releases::releases(g, command).await,
        Command::Plugins { command } => plugins::plugins(command).await,
        Command::Images { command } => images::images(g, command).await,
        Command::Dev(args) => {
            // Flags for a control plane elsewhere mean nothing to the one
            // `nuon dev` starts: say so rather than ignore them.
            let given: Vec<&str> = ["--json", "--api", "--token", "--ca-bundle"]
                .into_iter()
                .filter(|f| std::env::args().any(|a| a == *f || a.starts_with(&format!("{f}="))))
                .collect();
            if !given.is_empty() {
                return Err(CliError::usage(format!(
                    "nuon dev starts a control plane of its own, so {} do not apply: it listens on --listen and --runner-listen, keeps its admin token in DATA_DIR/control/admin-token, and prints its progress, not JSON",
                    given.join(", ")
                )));
            }
            dev::run(args).await
        }
    }
}

/// The exit code of `apps validate` when the config has errors (sysexits'
/// EX_DATAERR).
pub const EXIT_INVALID_CONFIG: u8 = 65;

pub(crate) fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

async fn jobs(g: &Global, command: &JobsCommand) -> Result<u8, CliError> {
    let client = client(g)?;
    match command {
        JobsCommand::Exec {
            runner,
            timeout,
            max_attempts,
            env,
            dir,
            wait,
            image,
            memory,
            millicpus,
            pids,
            network,
            command,
        } => {
            let sandbox = nuon_core::JobSandbox {
                image: image.clone(),
                memory_bytes: *memory,
                millicpus: *millicpus,
                pids: *pids,
                network: network.as_deref().map(|n| n == "on"),
            };
            let (program, args) = command
                .split_first()
                .ok_or_else(|| CliError::usage("missing command after --"))?;
            let payload = ExecJob {
                command: program.clone(),
                args: args.to_vec(),
                env: env.iter().cloned().collect::<BTreeMap<_, _>>(),
                dir: dir.clone(),
                outputs_file: false,
            };
            let job = client
                .create_job(&CreateJob {
                    runner: runner.clone(),
                    kind: ExecJob::KIND.into(),
                    payload: serde_json::to_value(&payload).map_err(|e| CliError {
                        message: e.to_string(),
                        code: 1,
                        api_code: None,
                    })?,
                    timeout_secs: Some(timeout.as_secs().max(1)),
                    max_attempts: Some(*max_attempts),
                    sandbox: (!sandbox.is_unset()).then_some(sandbox),
                })
                .await?;
            if !wait {
                if g.json {
                    print_json(&job)?;
                } else {
                    outln!("{}", job.id);
                    eprintln!(
                        "queued on runner {runner}; follow with: nuon jobs logs {} --follow",
                        job.id
                    );
                }
                return Ok(0);
            }
            see_job_through(g, &client, &job.id).await
        }
        JobsCommand::Get { id } => {
            let job = client.get_job(&job_id(id)?).await?;
            if g.json {
                print_json(&job)?;
            } else {
                outln!("id:        {}", job.id);
                outln!("runner:    {}", job.runner_id);
                outln!("kind:      {}", job.kind);
                outln!("status:    {}", job.status);
                outln!("attempts:  {}/{}", job.attempts, job.max_attempts);
                outln!(
                    "exit code: {}",
                    job.exit_code.map(|c| c.to_string()).unwrap_or("-".into())
                );
                if let Some(reason) = &job.reason {
                    outln!("reason:    {reason}");
                }
                outln!("created:   {}", fmt_time(Some(job.created_at_ms)));
                outln!("finished:  {}", fmt_time(job.finished_at_ms));
            }
            Ok(0)
        }
        JobsCommand::Logs { id, follow, raw } => {
            let id = job_id(id)?;
            if *follow {
                let mut follower = client.follow_logs(&id, 0);
                while let Some(line) = follower.next().await? {
                    if g.json {
                        // A stream: one compact document a line.
                        outln!("{}", serde_json::to_string(&line).unwrap_or_default());
                    } else {
                        print_log_line(&line, *raw);
                    }
                }
                return Ok(0);
            }
            let mut cursor = 0;
            let mut all = Vec::new();
            loop {
                let page = client.job_logs(&id, cursor).await?;
                let empty = page.lines.is_empty();
                cursor = page.next;
                if g.json {
                    all.extend(page.lines);
                } else {
                    page.lines.iter().for_each(|l| print_log_line(l, *raw));
                }
                if empty {
                    break;
                }
            }
            if g.json {
                print_json(&all)?;
            }
            Ok(0)
        }
        JobsCommand::Cancel { id } => {
            let job = client.cancel_job(&job_id(id)?).await?;
            if g.json {
                print_json(&job)?;
            } else if job.status.is_terminal() {
                outln!("job {} is {}", job.id, job.status);
            } else {
                outln!(
                    "cancel requested for job {}; its runner stops it now",
                    job.id
                );
            }
            Ok(0)
        }
        JobsCommand::List { limit } => {
            let mut list = client.list_jobs().await?;
            list.jobs.truncate(*limit as usize);
            if g.json {
                print_json(&list)?;
            } else {
                table(
                    &["ID", "KIND", "STATUS", "EXIT", "CREATED", "RUNNER"],
                    list.jobs
                        .into_iter()
                        .map(|j| {
                            vec![
                                j.id.to_string(),
                                j.kind,
                                j.status.to_string(),
                                j.exit_code.map(|c| c.to_string()).unwrap_or("-".into()),
                                fmt_time(Some(j.created_at_ms)),
                                j.runner_id.to_string(),
                            ]
                        })
                        .collect(),
                );
            }
            Ok(0)
        }
    }
}

/// Shows a job's log as it comes (not under --json), then how it ended;
/// answers its exit code.
pub(crate) async fn see_job_through(
    g: &Global,
    client: &ControlClient,
    id: &JobId,
) -> Result<u8, CliError> {
    follow_to_end(client, id, !g.json).await?;
    let done = wait_finished(client, id).await?;
    if g.json {
        print_json(&done)?;
    } else if done.status != JobStatus::Succeeded {
        eprintln!(
            "job {} {}{}",
            done.id,
            done.status,
            done.reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        );
    }
    Ok(job_exit_code(&done))
}

/// Waits until the job is terminal. The log stream ending means it is, but a
/// stream can also end with a connection, so check and wait a little if not.
async fn wait_finished(client: &ControlClient, id: &JobId) -> Result<JobInfo, CliError> {
    let mut delay = Duration::from_millis(20);
    loop {
        let job = client.get_job(id).await?;
        if job.status.is_terminal() {
            return Ok(job);
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_secs(1));
    }
}

#[cfg(test)]
mod tests {
    use super::terminal_safe;

    /// What a job's output could do to the reader's terminal is taken out;
    /// text, tabs, newlines and non-ASCII letters stay.
    #[test]
    fn control_sequences_are_taken_out_of_what_is_printed() {
        for (given, shown) in [
            ("plain text\twith a tab", "plain text\twith a tab"),
            ("héllo wörld ✓", "héllo wörld ✓"),
            ("\x1b[31mred\x1b[0m", "red"),
            ("\x1b[2J\x1b[Hcleared", "cleared"),
            ("title\x1b]0;owned\x07 after", "title after"),
            ("clip\x1b]52;c;ZXZpbA==\x1b\\ after", "clip after"),
            ("dcs\x1bPq#0;2;0;0;0\x1b\\ end", "dcs end"),
            ("8-bit\u{9b}31mcsi", "8-bitcsi"),
            ("8-bit\u{9d}0;t\u{9c}osc", "8-bitosc"),
            ("over\rwrite", "overwrite"),
            ("bell\x07 and del\x7f", "bell and del"),
            ("a\u{202e}fdp.exe", "afdp.exe"),
            ("keeps\nnewlines", "keeps\nnewlines"),
            ("unterminated \x1b]0;title", "unterminated "),
            ("lone esc at end\x1b", "lone esc at end"),
        ] {
            assert_eq!(terminal_safe(given), shown, "{given:?}");
        }
        assert!(matches!(
            terminal_safe("nothing to do"),
            std::borrow::Cow::Borrowed(_)
        ));
    }
}
