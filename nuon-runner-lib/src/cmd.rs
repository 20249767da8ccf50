//! The `run` command `nuon-runner` and `nuon-build-runner` share (feature
//! `cmd`): its flags, signals and exit codes (0 after a drain on SIGTERM or
//! SIGINT, 64 for bad configuration, 1 when the runner stops on an error
//! such as a revoked token). Each binary says which plugins its runner has.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::{Error, Runner, RunnerConfig};
use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use nuon_client::ClientConfig;
use nuon_core::PublicKey;
use tokio::signal::unix::{Signal, SignalKind, signal};

mod import;
mod isolation;
mod tools;

pub use import::import;
pub use isolation::IsolationArgs;
pub use tools::TerraformInstallArgs;
pub use tools::open_store;
use tracing_subscriber::EnvFilter;

#[derive(Parser)]
struct Cli<E: Args> {
    #[command(subcommand)]
    command: Command<E>,
}

// Parsed once per process: the size of its largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand)]
enum Command<E: Args> {
    /// Claim and run jobs until SIGTERM or SIGINT, then drain and exit.
    Run {
        #[command(flatten)]
        common: RunArgs,
        #[command(flatten)]
        extra: E,
    },
    /// The runner's audit journal (WORK_DIR/audit.jsonl): every job it
    /// accepted or refused, and how each ended, hash-chained.
    Audit {
        #[command(subcommand)]
        command: AuditCommand,
    },
    /// The customer's switch: the runner (running or not) takes no new
    /// job until `enable`; it keeps calling the control plane, which shows
    /// it disabled with the reason, queues nothing new for it, and fails
    /// steps waiting for it after their bound. Running jobs finish.
    Disable {
        /// Why, for the vendor to read (one line).
        #[arg(long, default_value = "")]
        reason: String,
        #[command(flatten)]
        dir: WorkDirArg,
    },
    /// Turns the customer's switch back on: the runner takes jobs again.
    Enable {
        #[command(flatten)]
        dir: WorkDirArg,
    },
    /// The install's break-glass roles, on the customer's side: a job may
    /// run with one only while it is on; turning one on or off starts the
    /// app's `role-enabled` / `role-disabled` actions.
    BreakGlass {
        #[command(subcommand)]
        command: BreakGlassCommand,
    },
    /// Started by a runner about to switch to a new version (this binary
    /// is the old one): starts the old version again if the new one exits
    /// or is not healthy in time (see `nuon_runner_lib::update`).
    #[command(hide = true)]
    UpdateWatchdog {
        /// The runner's work directory.
        #[arg(long)]
        work_dir: PathBuf,
        /// The process that switches.
        #[arg(long)]
        pid: i32,
        /// The runner's arguments, to start it again with.
        #[arg(last = true, value_parser = clap::value_parser!(std::ffi::OsString))]
        args: Vec<std::ffi::OsString>,
    },
}

#[derive(Subcommand)]
enum BreakGlassCommand {
    /// Turn break-glass role ROLE on.
    Enable {
        /// The role's name, as the install's stack created it.
        role: String,
        #[command(flatten)]
        dir: WorkDirArg,
    },
    /// Turn break-glass role ROLE off.
    Disable {
        /// The role's name.
        role: String,
        #[command(flatten)]
        dir: WorkDirArg,
    },
    /// The break-glass roles that are on.
    List {
        #[command(flatten)]
        dir: WorkDirArg,
    },
}

/// The runner's work directory.
#[derive(Args)]
struct WorkDirArg {
    /// The runner's work directory.
    #[arg(
        long,
        env = "NUON_RUNNER_WORK_DIR",
        default_value = "./nuon-runner-data"
    )]
    work_dir: PathBuf,
}

#[derive(Subcommand)]
enum AuditCommand {
    /// Check the journal's chain; names the first entry that does not
    /// chain (exit 1).
    Verify {
        #[command(flatten)]
        journal: JournalArgs,
    },
    /// Compare the journal with the control plane's record of this
    /// install's jobs (`nuon audit export --install INSTALL > EXPORT`):
    /// jobs on one side only, or ended differently (exit 1).
    Compare {
        /// The control plane's export (NDJSON).
        export: PathBuf,
        #[command(flatten)]
        journal: JournalArgs,
    },
}

/// Where the journal is, and how to print what was found.
#[derive(Args)]
struct JournalArgs {
    /// The runner's work directory.
    #[arg(
        long,
        env = "NUON_RUNNER_WORK_DIR",
        default_value = "./nuon-runner-data"
    )]
    work_dir: PathBuf,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The flags every runner has.
#[derive(Args)]
pub struct RunArgs {
    /// Base URL of the control plane's Runner API; a comma-separated list
    /// names replicas of one control plane, tried in turn when one cannot
    /// be reached.
    #[arg(long, env = "NUON_RUNNER_API_URL")]
    api: String,
    /// Accept a plain `http://` --api on another machine. Without it such
    /// a URL is refused: anyone on the path would read this runner's token
    /// and could serve it altered or replayed answers. For a lab, or TLS
    /// ended by a proxy on this host's network.
    #[arg(long, env = "NUON_ALLOW_INSECURE_HTTP")]
    allow_insecure_http: bool,
    /// This runner's token (`rnr_....SECRET`). Without it: the token a
    /// phone-home stored in the work dir, or --install-token.
    #[arg(long, env = "NUON_RUNNER_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// The one-time token of the install's stack (`stk_...`, from
    /// `nuon installs stack`): the runner phones home with it once, gets
    /// its runner token and keeps it in the work dir. A new one (a stack
    /// applied again) phones home again.
    #[arg(long, env = "NUON_RUNNER_INSTALL_TOKEN", hide_env_values = true)]
    install_token: Option<String>,
    /// The stack's outputs reported on phoning home: KEY=VALUE pairs
    /// separated by blanks (the install's `.nuon.install_stack.outputs.*`).
    #[arg(long, env = "NUON_RUNNER_STACK_OUTPUTS", default_value = "")]
    stack_outputs: String,
    /// How a job gets the cloud role of its operation: `none` (the
    /// runner's own identity), `env` (the role named in its environment:
    /// NUON_JOB_ROLE, NUON_JOB_ROLE_ARN), `aws` (AssumeRole with the AWS
    /// CLI, served to the job's tools from a loopback endpoint and renewed
    /// while it runs). A role the install's stack did not create (by its
    /// outputs), or a break-glass role the customer has not turned on, is
    /// refused.
    #[arg(long, env = "NUON_RUNNER_CREDENTIALS", default_value = "none", value_parser = ["none", "env", "aws"])]
    credentials: String,
    /// With `--credentials aws`: how long each job's session lasts
    /// (STS's `DurationSeconds`; 900 to the role's maximum session
    /// duration).
    #[arg(long, env = "NUON_RUNNER_AWS_SESSION_DURATION", default_value_t = 3600)]
    aws_session_duration: u64,
    /// With `--credentials aws`: a job's session this many seconds from its
    /// end is replaced (AssumeRole again) when the job's tools ask.
    #[arg(long, env = "NUON_RUNNER_AWS_RENEW_BEFORE", default_value_t = 1200)]
    aws_renew_before: u64,
    /// The org's job-signing public key (`ed25519:...`), or a file holding it.
    #[arg(long, env = "NUON_RUNNER_SIGNING_KEY")]
    signing_key: String,
    /// Where the runner keeps its log spool and job work directories.
    #[arg(
        long,
        env = "NUON_RUNNER_WORK_DIR",
        default_value = "./nuon-runner-data"
    )]
    pub work_dir: PathBuf,
    /// How many jobs run at once.
    #[arg(long, env = "NUON_RUNNER_SLOTS", default_value_t = 4)]
    slots: usize,
    /// Time between SIGTERM and SIGKILL when a job is stopped (e.g. 10s, 500ms).
    #[arg(long, default_value = "10s", value_parser = nuon_core::parse_duration)]
    grace: Duration,
    /// How long a shutdown lets running jobs finish (e.g. 10m).
    #[arg(long, default_value = "10m", value_parser = nuon_core::parse_duration)]
    drain_timeout: Duration,
    /// Extra PEM CA certificates to trust for the control plane.
    #[arg(long, env = "NUON_RUNNER_CA_BUNDLE")]
    ca_bundle: Option<PathBuf>,
    /// Refuse to start when the work dir is readable by others (default:
    /// make it private, with a warning).
    #[arg(long, env = "NUON_RUNNER_STRICT_PERMISSIONS")]
    strict_permissions: bool,
    /// Take the runner token over from another process using it (one token,
    /// one live runner): that process is refused from then on and stops.
    /// Without it, this one is refused while the other is seen.
    #[arg(long)]
    replace: bool,
    /// Which commands the vendor's debug and log requests may run here:
    /// `off` (the default: only the app's declared actions run),
    /// `allow-list FILE` (the commands listed in FILE, one per line, each
    /// matched on the whole command line) or `any`.
    #[arg(long, env = "NUON_RUNNER_DEBUG_COMMANDS", num_args = 1..=2, value_names = ["MODE", "FILE"], default_value = "off")]
    debug_commands: Vec<String>,
    /// Serve Prometheus metrics at http://ADDR/metrics (jobs by outcome,
    /// spool backlog, heartbeat round trip).
    #[arg(long, env = "NUON_RUNNER_METRICS_LISTEN")]
    metrics_listen: Option<std::net::SocketAddr>,
    /// Stay on this runner version: an update the control plane asks for
    /// is refused (and reported), and runner rollouts pass this install
    /// over.
    #[arg(long, env = "NUON_RUNNER_PIN_VERSION")]
    pin_version: Option<String>,
    /// How long a new runner version has, once an update switched to it,
    /// to be answered by the control plane; past it (or if it exits
    /// first) the runner goes back to the version before and reports why.
    #[arg(long, env = "NUON_RUNNER_UPDATE_TIMEOUT", default_value = "2m", value_parser = nuon_core::parse_duration)]
    update_timeout: Duration,
    /// How long the server may hold a claim, in ms (for tests).
    #[arg(long, env = "NUON_RUNNER_CLAIM_WAIT_MS", hide = true)]
    claim_wait_ms: Option<u64>,
    /// How jobs are isolated.
    #[command(flatten)]
    pub isolation: IsolationArgs,
}

/// The key text itself, or the path of a file holding it.
fn signing_key(arg: &str) -> anyhow::Result<PublicKey> {
    let text = if arg.trim().starts_with("ed25519:") {
        arg.to_owned()
    } else {
        std::fs::read_to_string(arg).with_context(|| {
            format!("--signing-key {arg:?} is neither a key (ed25519:...) nor a readable file")
        })?
    };
    text.parse().context("--signing-key")
}

/// The `--debug-commands` setting.
fn debug_policy(words: &[String]) -> anyhow::Result<nuon_plugins::debug::DebugPolicy> {
    use nuon_plugins::debug::DebugPolicy;
    match words {
        [mode] if mode == "off" => Ok(DebugPolicy::Off),
        [mode] if mode == "any" => Ok(DebugPolicy::Any),
        [mode, file] if mode == "allow-list" => {
            DebugPolicy::allow_list_file(std::path::Path::new(file)).map_err(anyhow::Error::msg)
        }
        [mode] if mode == "allow-list" => {
            anyhow::bail!(
                "--debug-commands allow-list needs the list's file: --debug-commands allow-list FILE"
            )
        }
        other => anyhow::bail!(
            "--debug-commands {}: expected off, allow-list FILE or any",
            other.join(" ")
        ),
    }
}

/// Where a phone-home keeps the runner token, and the hash of the install
/// token it was got with.
const RUNNER_TOKEN_FILE: &str = "runner-token";
const STACK_TOKEN_FILE: &str = "stack-token.sha256";

/// The runner's token: `--token`, or the one a phone-home stored, or a
/// phone-home now with `--install-token` (again when the install token is
/// not the one the stored token came from).
async fn runner_token(args: &RunArgs) -> anyhow::Result<String> {
    if let Some(t) = &args.token {
        return Ok(t.trim().to_owned());
    }
    let dir = &args.work_dir;
    let stored = std::fs::read_to_string(dir.join(RUNNER_TOKEN_FILE)).ok();
    let redeemed = std::fs::read_to_string(dir.join(STACK_TOKEN_FILE)).ok();
    let Some(install_token) = args.install_token.as_deref().map(str::trim) else {
        return stored.map(|t| t.trim().to_owned()).ok_or_else(|| {
            anyhow::anyhow!(
                "no runner token: give --token (NUON_RUNNER_TOKEN), or the install stack's --install-token (NUON_RUNNER_INSTALL_TOKEN)"
            )
        });
    };
    let hash = nuon_core::token::hash_token(install_token);
    if let Some(t) = stored
        .as_ref()
        .filter(|_| redeemed.as_deref().map(str::trim) == Some(hash.as_str()))
    {
        return Ok(t.trim().to_owned());
    }
    // What the stack reported, and the outputs of its nested stacks (read
    // here, in the customer's account).
    let aws = which::which("aws").ok();
    let (outputs, problems) =
        crate::nested_stacks::with_nested_outputs(stack_outputs(args)?, aws.as_deref()).await;
    for p in problems {
        tracing::warn!("{p}");
    }
    let mut client = ClientConfig::with_replicas(&args.api, install_token).context("--api")?;
    refuse_plain_http(&client, args.allow_insecure_http)?;
    client.ca_bundle = args.ca_bundle.clone();
    let answer = match nuon_client::phone_home(
        client,
        &nuon_core::wire::PhoneHome {
            install_token: install_token.to_owned(),
            outputs,
        },
    )
    .await
    {
        Ok(a) => a,
        // Refused, with a token kept from before (the answer to an earlier
        // phone-home was kept, then the process stopped before it noted
        // the install token): go on with it; the control plane decides.
        Err(e) if stored.is_some() => {
            tracing::warn!(error = %e, "phoning home again was refused; using the runner token kept in the work dir");
            return Ok(stored.unwrap_or_default().trim().to_owned());
        }
        Err(e) => return Err(e).context("phoning home with the install stack's token"),
    };
    {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("create {}", dir.display()))?;
    }
    keep_private(&dir.join(RUNNER_TOKEN_FILE), &answer.runner_token)?;
    keep_private(&dir.join(STACK_TOKEN_FILE), &hash)?;
    tracing::info!(install = %answer.install_id, runner = %answer.runner_id, "phoned home: the runner's token is kept in the work dir");
    Ok(answer.runner_token)
}

/// `--stack-outputs`: `KEY=VALUE` pairs separated by blanks.
fn stack_outputs(args: &RunArgs) -> anyhow::Result<std::collections::BTreeMap<String, String>> {
    let mut outputs = std::collections::BTreeMap::new();
    for pair in args.stack_outputs.split_whitespace() {
        let (k, v) = pair
            .split_once('=')
            .with_context(|| format!("--stack-outputs: {pair:?} is not KEY=VALUE"))?;
        outputs.insert(k.to_owned(), v.to_owned());
    }
    Ok(outputs)
}

/// Refuses an --api that speaks plain HTTP to another machine, unless
/// `allowed`.
fn refuse_plain_http(client: &ClientConfig, allowed: bool) -> anyhow::Result<()> {
    let plain = client.plain_http_off_this_machine();
    match plain.first() {
        Some(url) if !allowed => anyhow::bail!(
            "--api {url} is plain HTTP to another machine: anyone on the path could read this \
             runner's token and serve it altered or replayed jobs; use an https:// URL, or pass \
             --allow-insecure-http (a lab network)"
        ),
        Some(url) => {
            tracing::warn!(%url, "--allow-insecure-http: talking plain HTTP to another machine");
            Ok(())
        }
        None => Ok(()),
    }
}

/// Writes `text` to `path` (0600) atomically, saying which file failed.
fn keep_private(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    crate::sys::write_private(path, text).with_context(|| format!("write {}", path.display()))
}

fn config(args: &RunArgs, token: &str) -> anyhow::Result<RunnerConfig> {
    let key = signing_key(&args.signing_key)?;
    let mut client = ClientConfig::with_replicas(&args.api, token).context("--api")?;
    refuse_plain_http(&client, args.allow_insecure_http)?;
    client.ca_bundle = args.ca_bundle.clone();
    let mut config = RunnerConfig::connect_with(client, key, &args.work_dir, args.replace)?;
    anyhow::ensure!(
        (1..=256).contains(&args.slots),
        "--slots must be between 1 and 256"
    );
    config.slots = args.slots;
    config.grace = args.grace;
    config.drain_timeout = args.drain_timeout;
    config.strict_permissions = args.strict_permissions;
    let outputs = stack_outputs(args)?;
    config.customer_secrets =
        crate::customer_secrets::CustomerSecrets::from_outputs(&outputs, which::which("aws").ok());
    let roles = crate::credentials::StackRoles::from_outputs(&outputs, &args.work_dir);
    let lifetime =
        crate::aws_session::Lifetime::new(args.aws_session_duration, args.aws_renew_before)
            .map_err(anyhow::Error::msg)?;
    config.credentials = crate::credentials::provider(&args.credentials, roles, lifetime)
        .map_err(anyhow::Error::msg)?;
    config
        .plugins
        .register(Arc::new(nuon_plugins::debug::DebugPlugin::new(
            debug_policy(&args.debug_commands)?,
        )));
    if let Some(ms) = args.claim_wait_ms {
        config.claim_wait = Duration::from_millis(ms);
    }
    Ok(config)
}

/// Resolves on SIGTERM or SIGINT; a second one ends the process at once (the
/// orphan guard kills job processes, the spool keeps their logs).
async fn shutdown(mut term: Signal, mut int: Signal) {
    tokio::select! {
        _ = term.recv() => tracing::info!("SIGTERM: draining"),
        _ = int.recv() => tracing::info!("SIGINT: draining"),
    }
    tokio::spawn(async move {
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        tracing::warn!("second signal: exiting without finishing the drain");
        std::process::exit(130);
    });
}

/// Parses the command line of runner binary `name`, then runs the runner
/// with the plugins `plugins` adds for its own flags `E`.
pub async fn main<E: Args>(
    name: &'static str,
    about: &'static str,
    plugins: impl FnOnce(&RunArgs, &E, &mut RunnerConfig) -> anyhow::Result<()>,
) -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    crate::sys::stop_with_parent();
    let command = Cli::<E>::command()
        .name(name)
        .about(about)
        .version(crate::version());
    let parsed = command
        .try_get_matches()
        .and_then(|m| Cli::<E>::from_arg_matches(&m));
    let (args, extra) = match parsed {
        Ok(Cli {
            command: Command::Run { common, extra },
        }) => (common, extra),
        Ok(Cli {
            command: Command::Audit { command },
        }) => return audit(command),
        Ok(Cli {
            command: Command::Disable { reason, dir },
        }) => return switch(&dir.work_dir, Some(&reason)),
        Ok(Cli {
            command: Command::Enable { dir },
        }) => return switch(&dir.work_dir, None),
        Ok(Cli {
            command: Command::BreakGlass { command },
        }) => return break_glass(command),
        Ok(Cli {
            command:
                Command::UpdateWatchdog {
                    work_dir,
                    pid,
                    args,
                },
        }) => return ExitCode::from(crate::update::watchdog(&work_dir, pid, &args)),
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 64 } else { 0 });
        }
    };
    tracing_subscriber::fmt()
        .with_env_filter(EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let stats = Arc::new(crate::RunnerStats::default());
    let updater = crate::update::Updater::new(
        &args.work_dir,
        crate::version(),
        args.pin_version.clone(),
        None,
        args.update_timeout,
        stats.clone(),
    );
    let boot = updater.boot();
    if let crate::update::Boot::Follow(path) = &boot {
        let e = crate::update::follow(path);
        tracing::error!(binary = %path.display(), error = %e, "cannot start the version last updated to; running this one");
    }
    let token = match runner_token(&args).await {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{name}: {e:#}");
            return ExitCode::from(64);
        }
    };
    let config = match config(&args, &token).and_then(|mut c| {
        c.stats = stats.clone();
        if args.isolation.containers() {
            // Commands come from the job's image: none is looked up here.
            c.plugins
                .register(Arc::new(nuon_plugins::exec::ExecPlugin::in_containers()));
        }
        plugins(&args, &extra, &mut c)?;
        if args.isolation.containers()
            && matches!(c.isolation, crate::container::Isolation::Process)
        {
            anyhow::bail!("--isolation container: {name} runs its jobs as process groups only");
        }
        Ok(c)
    }) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{name}: {e:#}");
            return ExitCode::from(64);
        }
    };
    if let Some(addr) = args.metrics_listen {
        match tokio::net::TcpListener::bind(addr).await {
            Ok(listener) => {
                tracing::info!(%addr, "serving metrics at /metrics");
                tokio::spawn(serve_metrics(listener, config.stats.clone()));
            }
            Err(e) => {
                eprintln!("{name}: --metrics-listen {addr}: cannot listen: {e}");
                return ExitCode::from(64);
            }
        }
    }
    let signals =
        signal(SignalKind::terminate()).and_then(|t| Ok((t, signal(SignalKind::interrupt())?)));
    let Ok((term, int)) = signals.inspect_err(|e| eprintln!("{name}: cannot handle signals: {e}"))
    else {
        return ExitCode::FAILURE;
    };
    let updater = updater.with_store(config.update_store.clone());
    if let crate::update::Boot::Trial(switch) = boot {
        let (updater, seen) = (updater.clone(), config.settings_seen.subscribe());
        tokio::spawn(async move { updater.confirm(switch, seen).await });
    }
    // A signal wins over an update at any time, during its drain too: the
    // runner then stops as on any SIGTERM and does not switch.
    let signalled = Arc::new(tokio::sync::Notify::new());
    let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    {
        let (signalled, stopped) = (signalled.clone(), stopped.clone());
        tokio::spawn(async move {
            shutdown(term, int).await;
            stopped.store(true, std::sync::atomic::Ordering::SeqCst);
            signalled.notify_one();
        });
    }
    let pending = Arc::new(std::sync::Mutex::new(None));
    let stop = {
        let (updater, seen, pending) = (
            updater.clone(),
            config.settings_seen.subscribe(),
            pending.clone(),
        );
        let until_done = config.drain_until_done.clone();
        async move {
            tokio::select! {
                () = signalled.notified() => {}
                s = updater.watch(seen) => {
                    tracing::info!(to = %s.to_version, "runner update staged: draining (running jobs finish)");
                    until_done.store(true, std::sync::atomic::Ordering::SeqCst);
                    *pending.lock().unwrap_or_else(|e| e.into_inner()) = Some(s);
                }
            }
        }
    };
    let ran = Runner::new(config).run(stop).await;
    let switch = pending.lock().unwrap_or_else(|e| e.into_inner()).take();
    let signal = stopped.load(std::sync::atomic::Ordering::SeqCst);
    if let (Ok(()), Some(s), false) = (&ran, switch, signal) {
        // Returns only when the switch could not be made (recorded).
        let why = updater.switch(s);
        eprintln!("{name}: {why}");
        return ExitCode::FAILURE;
    }
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{name}: {e}");
            let usage = matches!(
                e,
                Error::Config(_) | Error::Client(_) | Error::WorkDirInUse { .. } | Error::Io { .. }
            );
            ExitCode::from(if usage { 64 } else { 1 })
        }
    }
}

/// Serves the runner's metrics until the process ends.
async fn serve_metrics(listener: tokio::net::TcpListener, stats: Arc<crate::RunnerStats>) {
    use axum::http::header;
    let app = axum::Router::new().route(
        nuon_core::wire::routes::METRICS,
        axum::routing::get(move || {
            let stats = stats.clone();
            async move {
                (
                    [(header::CONTENT_TYPE, nuon_core::metrics::CONTENT_TYPE)],
                    stats.render(),
                )
            }
        }),
    );
    if let Err(e) = axum::serve(listener, app).await {
        tracing::error!(error = %e, "the metrics listener failed");
    }
}

/// `audit verify` and `audit compare`: offline, on the work directory.
/// `disable` (with a reason) or `enable`.
fn switch(work_dir: &std::path::Path, disable: Option<&str>) -> ExitCode {
    use crate::switch;
    let done = switch::check_work_dir(work_dir).and_then(|()| match disable {
        Some(reason) => switch::disable(work_dir, reason).map(|()| {
            format!(
                "disabled: the runner of {} takes no new job (running ones finish); `nuon-runner enable` turns it back on",
                work_dir.display()
            )
        }),
        None => switch::enable(work_dir).map(|was| {
            if was {
                "enabled: the runner takes jobs again".to_owned()
            } else {
                "the runner was not disabled".to_owned()
            }
        }),
    });
    match done {
        Ok(said) => {
            println!("{said}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}: {e}", work_dir.display());
            ExitCode::from(1)
        }
    }
}

fn break_glass(command: BreakGlassCommand) -> ExitCode {
    use crate::switch::{break_glass_roles, check_work_dir, set_break_glass};
    let (dir, done) = match command {
        BreakGlassCommand::Enable { role, dir } => {
            let done = check_work_dir(&dir.work_dir).and_then(|()| set_break_glass(&dir.work_dir, &role, true)).map(|changed| {
                if changed {
                    format!("break-glass role {role} is on: jobs may run with it until `nuon-runner break-glass disable {role}`")
                } else {
                    format!("break-glass role {role} was on already")
                }
            });
            (dir, done)
        }
        BreakGlassCommand::Disable { role, dir } => {
            let done = check_work_dir(&dir.work_dir)
                .and_then(|()| set_break_glass(&dir.work_dir, &role, false))
                .map(|changed| {
                    if changed {
                        format!("break-glass role {role} is off")
                    } else {
                        format!("break-glass role {role} was not on")
                    }
                });
            (dir, done)
        }
        BreakGlassCommand::List { dir } => {
            let roles = break_glass_roles(&dir.work_dir);
            let said = if roles.is_empty() {
                "no break-glass role is on".to_owned()
            } else {
                roles.join("\n")
            };
            (dir, Ok(said))
        }
    };
    match done {
        Ok(said) => {
            println!("{said}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {}: {e}", dir.work_dir.display());
            ExitCode::from(1)
        }
    }
}

fn audit(command: AuditCommand) -> ExitCode {
    use crate::journal::{JOURNAL_FILE, compare, read_entries, verify};
    let run = || -> anyhow::Result<bool> {
        match command {
            AuditCommand::Verify {
                journal: JournalArgs { work_dir, json },
            } => {
                let entries =
                    read_entries(&work_dir.join(JOURNAL_FILE)).map_err(anyhow::Error::msg)?;
                let v = verify(&entries);
                if json {
                    println!("{}", serde_json::to_string_pretty(&v)?);
                } else if let Some(b) = &v.broken {
                    println!("BROKEN at entry {}: {}", b.entry, b.why);
                    println!("{} entries chain before it", v.entries);
                } else {
                    println!("ok: {} entries chain; head {}", v.entries, v.head);
                }
                Ok(v.broken.is_none())
            }
            AuditCommand::Compare {
                export,
                journal: JournalArgs { work_dir, json },
            } => {
                let journal =
                    read_entries(&work_dir.join(JOURNAL_FILE)).map_err(anyhow::Error::msg)?;
                let export = read_entries(&export).map_err(anyhow::Error::msg)?;
                let c = compare(&journal, &export);
                if json {
                    println!("{}", serde_json::to_string_pretty(&c)?);
                } else {
                    println!("{} jobs on both sides", c.matched);
                    for j in &c.only_in_journal {
                        println!(
                            "only in this runner's journal: job {j} (the control plane's record lacks it)"
                        );
                    }
                    for j in &c.only_in_export {
                        println!(
                            "only in the control plane's record: job {j} (this runner's journal lacks it)"
                        );
                    }
                    for (j, here, there) in &c.outcome_differs {
                        println!("job {j}: {here} here, {there} in the control plane's record");
                    }
                    for j in &c.unfinished_here {
                        println!("job {j}: accepted here, not ended yet");
                    }
                    if c.agrees() {
                        println!("the journal and the record agree");
                    }
                }
                Ok(c.agrees())
            }
        }
    };
    match run() {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("audit: {e:#}");
            ExitCode::from(64)
        }
    }
}
