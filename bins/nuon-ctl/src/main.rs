//! `nuon-ctl`: the control plane. Everything it does lives in `nuon-control`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use nuon_control::store::{PostgresStore, SqliteStore, Store};
use nuon_control::{ControlPlane, ServerConfig};

#[derive(Parser)]
#[command(name = "nuon-ctl", version, about = "The nuon control plane")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Control API and the Runner API.
    Serve {
        /// Where the store lives; created on first use. With
        /// --database-url it holds only the secrets key and the first org's
        /// token files: replicas on one database share its `secrets.key`.
        #[arg(long, env = "NUON_DATA_DIR", default_value = "nuon-data")]
        data_dir: PathBuf,
        /// Keep the state in PostgreSQL (postgres://USER[:PASSWORD]@HOST[:PORT]/DB)
        /// instead of the embedded SQLite store; any number of replicas may
        /// serve one database.
        #[arg(long, env = "NUON_DATABASE_URL")]
        database_url: Option<String>,
        /// How long finished jobs and their logs are kept.
        #[arg(long, default_value = "30d", value_parser = nuon_core::parse_duration)]
        retention: Duration,
        /// Address of the Control API.
        #[arg(long, default_value = "127.0.0.1:7400")]
        listen: SocketAddr,
        /// Address of the Runner API.
        #[arg(long, default_value = "127.0.0.1:7401")]
        runner_listen: SocketAddr,
        /// How long a lease lasts without a heartbeat.
        #[arg(long, default_value = "60s", value_parser = nuon_core::parse_duration)]
        lease_timeout: Duration,
        /// The longest a runner's claim is held open.
        #[arg(long, default_value = "50s", value_parser = nuon_core::parse_duration)]
        max_claim_wait: Duration,
        /// The Runner API's URL as runners reach it (Terraform's state
        /// backend address in jobs); default http:// and --runner-listen.
        #[arg(long, env = "NUON_RUNNER_URL")]
        runner_url: Option<String>,
    },
    /// Manage orgs directly in a data dir.
    Orgs {
        #[command(subcommand)]
        command: OrgsCommand,
    },
    /// Print the Control API's OpenAPI 3.1 document (also served at /openapi.json).
    Openapi,
}

#[derive(Subcommand)]
enum OrgsCommand {
    /// Create an org; prints its admin API token (shown once) and signing key.
    Create {
        /// The org's name.
        name: String,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Limit how many jobs of an org run at once, over all its runners (so
    /// one org cannot take every slot of a shared fleet). Jobs past the limit
    /// wait queued and start as running ones end.
    Limit {
        /// The org's name.
        name: String,
        /// Most jobs running at once; `none` lifts the limit.
        #[arg(long, value_name = "N|none", value_parser = parse_limit)]
        max_running: Limit,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// The store an `orgs` command works on, directly (the server may run).
#[derive(clap::Args)]
struct StoreArgs {
    /// The data dir of the control plane.
    #[arg(long, env = "NUON_DATA_DIR", default_value = "nuon-data")]
    data_dir: PathBuf,
    /// The control plane's PostgreSQL database, when it uses one.
    #[arg(long, env = "NUON_DATABASE_URL")]
    database_url: Option<String>,
}

/// A value of `--max-running`.
#[derive(Clone, Copy)]
struct Limit(Option<u32>);

fn parse_limit(raw: &str) -> Result<Limit, String> {
    if raw == "none" {
        return Ok(Limit(None));
    }
    raw.parse().map(|n| Limit(Some(n))).map_err(|_| {
        format!("{raw:?} is not a number of jobs; give e.g. 10, or none to lift the limit")
    })
}

/// An open store of either kind.
enum Direct {
    Sqlite(SqliteStore),
    Postgres(Box<PostgresStore>),
}

impl Direct {
    async fn open(args: &StoreArgs) -> anyhow::Result<Self> {
        Ok(match &args.database_url {
            Some(url) => Direct::Postgres(Box::new(PostgresStore::connect(url).await?)),
            None => {
                // An `orgs` command never makes a store: a data dir without
                // one is a typo, or the data dir of a replica on PostgreSQL.
                if !args.data_dir.join(SqliteStore::DB_FILE).exists() {
                    anyhow::bail!(
                        "{} holds no control-plane store (nuon.db): give the data dir `nuon-ctl serve` uses, \
                         or --database-url (NUON_DATABASE_URL) when the control plane runs on PostgreSQL",
                        args.data_dir.display()
                    );
                }
                Direct::Sqlite(SqliteStore::open(&args.data_dir)?)
            }
        })
    }

    fn store(&self) -> &dyn Store {
        match self {
            Direct::Sqlite(s) => s,
            Direct::Postgres(s) => s.as_ref(),
        }
    }

    async fn close(self) {
        match self {
            Direct::Sqlite(s) => s.close(),
            Direct::Postgres(s) => s.close().await,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let rt = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nuon-ctl: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nuon-ctl: {e:#}");
            ExitCode::from(64)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve {
            data_dir,
            database_url,
            retention,
            listen,
            runner_listen,
            lease_timeout,
            max_claim_wait,
            runner_url,
        } => {
            let mut config = ServerConfig::new(&data_dir);
            config.runner_url = runner_url;
            config.database_url = database_url;
            config.retention = retention;
            config.lease = lease_timeout;
            config.max_claim_wait = max_claim_wait;
            let plane = ControlPlane::open(config).await?;
            raise_open_files_limit();
            let control = bind(listen, "--listen")?;
            let runner = bind(runner_listen, "--runner-listen")?;
            // Tests and scripts read these two lines to find the ports.
            println!("control-api: http://{}", control.local_addr()?);
            println!("runner-api: http://{}", runner.local_addr()?);
            tracing::info!(data_dir = %data_dir.display(), "control plane serving");
            plane.serve(control, runner, shutdown_signal()).await?;
            tracing::info!("control plane stopped");
            Ok(())
        }
        Command::Orgs {
            command: OrgsCommand::Create { name, store },
        } => {
            let direct = Direct::open(&store).await?;
            let org = direct.store().create_org(&name).await;
            direct.close().await;
            let org = org?;
            println!("org: {}", org.org_id);
            println!("admin-token: {}", org.admin_token.secret);
            println!("build-runner: {}", org.build_runner);
            println!("build-runner-token: {}", org.build_runner_token.secret);
            println!("signing-public-key: {}", org.signing_key.public_key());
            Ok(())
        }
        Command::Orgs {
            command:
                OrgsCommand::Limit {
                    name,
                    max_running: Limit(max_running),
                    store,
                },
        } => {
            let direct = Direct::open(&store).await?;
            let org = direct.store().set_org_limit(&name, max_running).await;
            direct.close().await;
            let org = org?;
            match max_running {
                Some(0) => println!(
                    "org {name} ({org}): at most 0 jobs run at once; none of its jobs starts until the limit is raised or lifted (--max-running none)"
                ),
                Some(n) => println!("org {name} ({org}): at most {n} jobs run at once"),
                None => println!("org {name} ({org}): no limit on running jobs"),
            }
            Ok(())
        }
        Command::Openapi => {
            println!(
                "{}",
                serde_json::to_string_pretty(&nuon_control::openapi())?
            );
            Ok(())
        }
    }
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).expect("install SIGTERM handler");
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    tracing::info!("shutting down");
}

/// Pending connections the kernel may queue on each listener (it caps this
/// at `net.core.somaxconn`): a fleet of runners reconnecting after a restart
/// arrives in thousands, and a short queue turns the overflow into connect
/// timeouts and long backoffs.
const LISTEN_BACKLOG: u32 = 8192;

fn bind(addr: SocketAddr, flag: &str) -> anyhow::Result<tokio::net::TcpListener> {
    let listen = || -> std::io::Result<tokio::net::TcpListener> {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        socket.set_reuseaddr(true)?;
        socket.bind(addr)?;
        socket.listen(LISTEN_BACKLOG)
    };
    listen().map_err(|e| anyhow::anyhow!("cannot listen on {addr} ({flag}): {e}"))
}

/// Every parked runner holds a connection, so the default soft limit of
/// open files (often 1,024) would refuse the 1,025th runner: raise it to the
/// hard limit, as servers of many connections do.
#[allow(unsafe_code)]
fn raise_open_files_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct given.
    let raised = unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 || lim.rlim_cur >= lim.rlim_max {
            None
        } else {
            let before = lim.rlim_cur;
            lim.rlim_cur = lim.rlim_max;
            (libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0).then_some((before, lim.rlim_max))
        }
    };
    if let Some((before, after)) = raised {
        tracing::debug!(before, after, "raised the open files limit");
    }
}
