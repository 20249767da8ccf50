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
mod components;
mod context;
mod deploy;
mod dev;
mod examples;
mod fake_aws;
mod groups;
mod health;
mod images;
mod input;
mod installers;
mod installs;
mod jobs;
mod lifecycle;
mod meta;
mod ops;
mod orgs;
mod output;
mod plugins;
mod releases;
mod render;
mod rollouts;
mod runner_releases;
mod runners;
mod users;
mod workflows;
use nuon_client::{ClientConfig, ControlClient};
use nuon_core::wire::{CreateJob, JobInfo, LogEntry, LogStream};
use nuon_core::{ExecJob, Job, JobStatus};

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
    /// Parses the process arguments. `--output json|yaml` means `--json`
    /// (each machine-readable document in that form).
    pub fn try_parse_args() -> Result<Self, clap::Error> {
        let mut cli = <Cli as Parser>::try_parse()?;
        output::settle(&mut cli.global);
        Ok(cli)
    }

    /// Whether `args` (the process's) ask for a document (`--json`,
    /// `--output json|yaml`), for an error found before they parse; sets
    /// the document's form.
    pub fn wants_document(args: &[String]) -> bool {
        let mut asked = None;
        for (i, a) in args.iter().enumerate() {
            let value = match a.as_str() {
                "--json" => Some("json"),
                "--output" | "-o" => args.get(i + 1).map(String::as_str),
                a => a.strip_prefix("--output=").or_else(|| a.strip_prefix("-o")),
            };
            match value {
                Some("json") => asked = Some(output::Format::Json),
                Some("yaml") => asked = Some(output::Format::Yaml),
                _ => {}
            }
        }
        asked.inspect(|f| output::set_format(*f)).is_some()
    }
}

#[derive(Debug, Args)]
pub(crate) struct Global {
    /// Control API URL (default: the current context's, see `nuon context`;
    /// else http://127.0.0.1:7400).
    #[arg(long, global = true, env = "NUON_API_URL")]
    api: Option<String>,
    /// The context (a control plane and its token, `nuon context add`) of
    /// this command, instead of the current one.
    #[arg(long, global = true, env = "NUON_CONTEXT")]
    context: Option<String>,
    /// What the flags, the environment and the context say, resolved once
    /// before the command runs.
    #[arg(skip)]
    target: context::Target,
    /// API token. Without one, the admin token of a `nuon dev` control plane
    /// in ./nuon-data is used when there is one.
    #[arg(long, global = true, env = "NUON_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Extra PEM CA certificates to trust.
    #[arg(long, global = true, env = "NUON_CA_BUNDLE")]
    ca_bundle: Option<PathBuf>,
    /// Print the API's JSON instead of a table (`--output json`).
    #[arg(long, global = true)]
    json: bool,
    /// How to print results: `table` (the default), `json` (as --json) or
    /// `yaml` (the same document in YAML).
    #[arg(long, short = 'o', global = true, value_enum, conflicts_with = "json")]
    output: Option<output::Format>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Control planes by name, each with its token (kept in a 0600 file):
    /// `add`, `use`, `list`, `remove`.
    Context {
        #[command(subcommand)]
        command: context::ContextCommand,
    },
    /// This CLI's version and the control plane's (`--json`: both).
    Version,
    /// Print a shell's completion script: `source <(nuon completion bash)`;
    /// zsh: `nuon completion zsh > "${fpath[1]}/_nuon"`; fish: `nuon
    /// completion fish > ~/.config/fish/completions/nuon.fish`.
    Completion {
        /// bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
    /// Write a man page for nuon and each of its commands (nuon.1,
    /// nuon-apps.1, nuon-apps-create.1, ...) into DIR: `nuon man
    /// /usr/local/share/man/man1`.
    Man {
        /// Where the pages go (created when missing).
        dir: PathBuf,
    },
    /// Run the whole platform on this machine (control plane, build runner,
    /// an install's runner) and deploy an example app to the install `demo`.
    Dev(dev::DevArgs),
    /// Runners: one per install, one build runner per org.
    Runners {
        #[command(subcommand)]
        command: runners::RunnersCommand,
    },
    /// Jobs and their logs.
    Jobs {
        #[command(subcommand)]
        command: jobs::JobsCommand,
    },
    /// Apps and their config versions.
    Apps {
        #[command(subcommand)]
        command: apps::AppsCommand,
    },
    /// Installs: one customer's copy of an app each.
    Installs {
        #[command(subcommand)]
        command: installs::InstallsCommand,
    },
    /// Installers: the page a customer installs an app from
    /// (`installer.toml`).
    Installers {
        #[command(subcommand)]
        command: installers::InstallersCommand,
    },
    /// Invitations: the links to the installer page sent to customers.
    Invitations {
        #[command(subcommand)]
        command: installers::InvitationsCommand,
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
        command: workflows::WorkflowsCommand,
    },
    /// The token's org and its API tokens.
    Orgs {
        #[command(subcommand)]
        command: orgs::OrgsCommand,
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
    /// Container images: tool images for jobs that run in containers, and
    /// the platform's own (`nuon-ctl`, `nuon-runner`).
    Images {
        #[command(subcommand)]
        command: images::ImagesCommand,
    },
}

// Parsed once per process: the size of its largest variant costs nothing.
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
    /// The error as the one document of a `--json` (or `--output yaml`)
    /// command: `{"error": MESSAGE, "code": CODE, "exit_code": N}`, `CODE`
    /// the API's stable error code, or what kind of failure it was.
    pub fn to_json(&self) -> String {
        let code = self.api_code.clone().unwrap_or_else(|| {
            match self.code {
                64 => "usage",
                65 => nuon_core::wire::ErrorCode::InvalidConfig.as_str(),
                69 => "unavailable",
                74 => "io_error",
                _ => "failed",
            }
            .to_owned()
        });
        let doc = serde_json::json!({"error": self.message, "code": code, "exit_code": self.code});
        output::error_document(&doc)
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

impl Global {
    /// The Control API's URL, without a trailing slash.
    pub(crate) fn api_url(&self) -> &str {
        self.target.api.trim_end_matches('/')
    }
}

pub(crate) fn client(global: &Global) -> Result<ControlClient, CliError> {
    let token = match &global.target.token {
        Some(t) if t.trim().is_empty() => {
            return Err(CliError::usage(
                "the API token is empty: NUON_TOKEN (or --token) is set to nothing; set it to a \
                 token from `nuon orgs tokens create`, or unset it to use a local control plane's \
                 admin token",
            ));
        }
        Some(t) => t.clone(),
        // A local control plane's admin token goes to this machine only.
        None if !context::is_local(global.api_url()) => {
            return Err(CliError::usage(format!(
                "no API token for {}: pass --token, set NUON_TOKEN, or keep one in a context (`nuon context add NAME --api URL --token TOKEN`)",
                global.api_url()
            )));
        }
        None => std::fs::read_to_string("nuon-data/control/admin-token")
            .map(|t| t.trim().to_owned())
            .map_err(|_| {
                CliError::usage(
                    "no API token: pass --token or set NUON_TOKEN (a local control plane keeps its admin token in DATA_DIR/admin-token; `nuon dev` in ./nuon-data/control)",
                )
            })?,
    };
    let mut config = ClientConfig::new(global.api_url(), &token)?;
    config.ca_bundle = global.target.ca_bundle.clone();
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
    let text = output::document(value, true).map_err(|e| CliError {
        message: format!("cannot encode the output: {e}"),
        code: 1,
        api_code: None,
    })?;
    outln!("{text}");
    Ok(())
}

/// A time as people read it: `5m ago` in the past, `in 7d` ahead.
pub(crate) fn fmt_time(ms: Option<i64>) -> String {
    match ms {
        None => "-".into(),
        Some(ms) => relative_time(ms - nuon_core::now_ms()),
    }
}

/// `delta_ms` from now as people read it: `5m ago` (negative), `in 7d`.
pub(crate) fn relative_time(delta_ms: i64) -> String {
    let secs = delta_ms.unsigned_abs() / 1000;
    let amount = match secs {
        0..60 => format!("{secs}s"),
        60..3600 => format!("{}m", secs / 60),
        3600..86400 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86400),
    };
    if delta_ms > 0 && secs > 0 {
        format!("in {amount}")
    } else {
        format!("{amount} ago")
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

/// Runs a parsed command line to the process exit code, telling of a
/// failure: its message on standard error and, under `--json` (or
/// `--output json|yaml`), its document on standard output, the one
/// document there ([`CliError::to_json`]).
pub async fn run_to_exit(cli: Cli) -> u8 {
    let report = output::Report::of(&cli.global);
    match run(cli).await {
        Ok(code) => code,
        Err(e) => {
            report.tell(&e);
            e.code
        }
    }
}

/// Runs a parsed command line; returns the process exit code.
pub async fn run(mut cli: Cli) -> Result<u8, CliError> {
    // `nuon context` and `nuon completion` work whatever the contexts say
    // (a context named that is gone, a file to fix).
    let resolved = context::resolve(&cli.global);
    cli.global.target = match (&cli.command, resolved) {
        (_, Ok(t)) => t,
        (Command::Context { .. } | Command::Completion { .. } | Command::Man { .. }, Err(_)) => {
            context::Target::default()
        }
        (_, Err(e)) => return Err(e),
    };
    let g = &cli.global;
    match &cli.command {
        Command::Context { command } => context::context(g, command),
        Command::Version => meta::version(g).await,
        Command::Completion { shell } => meta::completion(*shell),
        Command::Man { dir } => meta::man(g, dir),
        Command::Runners { command } => runners::runners(g, command).await,
        Command::Jobs { command } => jobs::jobs(g, command).await,
        Command::Apps { command } => apps::apps(g, command).await,
        Command::Installs { command } => installs::installs(g, command).await,
        Command::Components { command } => apps::components(g, command).await,
        Command::Orgs { command } => orgs::orgs(g, command).await,
        Command::Audit { command } => ops::audit(g, command).await,
        Command::Users { command } => users::users(g, command).await,
        Command::Login(args) => users::login(g, args),
        Command::Workflows { command } => workflows::workflows(g, command).await,
        Command::Builds { command } => deploy::builds(g, command).await,
        Command::Releases { command } => releases::releases(g, command).await,
        Command::Plugins { command } => plugins::plugins(command).await,
        Command::Images { command } => images::images(g, command).await,
        Command::Installers { command } => installers::installers(g, command).await,
        Command::Invitations { command } => installers::invitations(g, command).await,
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

/// Waits for Ctrl-C or SIGTERM (a supervisor's, or `kill`); false when
/// neither can be listened for.
pub(crate) async fn stop_asked() -> bool {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                r = tokio::signal::ctrl_c() => return r.is_ok(),
                _ = term.recv() => return true,
            }
        }
    }
    tokio::signal::ctrl_c().await.is_ok()
}

/// How a command to paste names `name`, one of our binaries: its path
/// beside this `nuon` (`./target/debug/nuon-runner` when under the working
/// directory) when it is there, else the bare name (found on PATH).
pub(crate) fn our_binary(name: &str) -> String {
    let beside = std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name(name))
        .filter(|p| p.is_file());
    let Some(path) = beside else {
        return name.to_owned();
    };
    match std::env::current_dir().ok().and_then(|cwd| {
        path.strip_prefix(cwd)
            .ok()
            .map(std::path::Path::to_path_buf)
    }) {
        Some(rel) => format!("./{}", rel.display()),
        None => path.display().to_string(),
    }
}

pub(crate) fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        return format!("{n} {what}");
    }
    // entry → entries, but key → keys; process → processes.
    let consonant_y = what.strip_suffix('y').filter(|stem| {
        stem.chars()
            .last()
            .is_some_and(|c| !"aeiou".contains(c.to_ascii_lowercase()))
    });
    match consonant_y {
        Some(stem) => format!("{n} {stem}ies"),
        None if ["s", "x", "ch", "sh"].iter().any(|e| what.ends_with(e)) => {
            format!("{n} {what}es")
        }
        None => format!("{n} {what}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::{plural, relative_time, terminal_safe};

    #[test]
    fn plurals_read_as_english() {
        for (n, word, said) in [
            (226, "entry", "226 entries"),
            (1, "entry", "1 entry"),
            (2, "key", "2 keys"),
            (0, "install", "0 installs"),
            (3, "process", "3 processes"),
            (2, "patch", "2 patches"),
        ] {
            assert_eq!(plural(n, word), said);
        }
    }

    /// A time ahead reads "in", one behind "ago" (a stack token with 24
    /// hours left once read "expires 0s ago").
    #[test]
    fn relative_times_read_right_both_ways() {
        for (delta_ms, shown) in [
            (24 * 3_600_000 - 5, "in 23h"),
            (7 * 86_400_000, "in 7d"),
            (90_000, "in 1m"),
            (1_500, "in 1s"),
            (400, "0s ago"),
            (0, "0s ago"),
            (-5_000, "5s ago"),
            (-3 * 3_600_000, "3h ago"),
            (-40 * 86_400_000, "40d ago"),
        ] {
            assert_eq!(relative_time(delta_ms), shown, "{delta_ms}");
        }
    }

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
