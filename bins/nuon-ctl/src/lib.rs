//! `nuon-ctl`'s commands: serve the control plane, manage orgs directly in
//! its store, print the OpenAPI document. Everything they do lives in
//! `nuon-control`; `main.rs` only starts the runtime.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use nuon_control::{ControlPlane, OpenStore, ServerConfig};

/// The command line.
#[derive(Parser)]
#[command(name = "nuon-ctl", version, about = "The nuon control plane")]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once at start: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
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
        /// Serve both APIs over HTTPS with this PEM certificate chain (the
        /// server's certificate first); read again when it changes, within
        /// --key-refresh. Plain HTTP sent to them is answered 400 with the
        /// https:// URL to use.
        #[arg(long, env = "NUON_TLS_CERT", requires = "tls_key")]
        tls_cert: Option<PathBuf>,
        /// The PEM private key of --tls-cert.
        #[arg(long, env = "NUON_TLS_KEY", requires = "tls_cert")]
        tls_key: Option<PathBuf>,
        /// Serve both APIs but never lead maintenance (rescuing leases,
        /// pruning, driving workflows and rollouts, crons, webhooks): a
        /// replica kept for API traffic alone. Another replica on the
        /// database must lead.
        #[arg(long, requires = "database_url")]
        no_lead: bool,
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
        /// Refuse to start when the data dir or a file in it is readable by
        /// others (default: set it private, with a warning).
        #[arg(long, env = "NUON_STRICT_PERMISSIONS")]
        strict_permissions: bool,
        /// How soon a rotation of an org's signing key made by another
        /// command or replica, or a renewed --tls-cert, is picked up (the
        /// orgs' keys and the certificate are read again this often).
        #[arg(long, default_value = "10s", value_parser = nuon_core::parse_duration)]
        key_refresh: Duration,
        /// A runner silent this long is unhealthy (recorded in the audit
        /// trail, told to `runner_unhealthy` webhooks).
        #[arg(long, default_value = "90s", value_parser = nuon_core::parse_duration)]
        runner_unhealthy_after: Duration,
        /// A runner silent this long is offline.
        #[arg(long, default_value = "5m", value_parser = nuon_core::parse_duration)]
        runner_offline_after: Duration,
        /// How long a step waits for its install's runner: a provision's
        /// `await runner` step, and any step whose runner the customer
        /// disabled (`nuon-runner disable`). Then it fails, saying why.
        #[arg(long, default_value = "15m", value_parser = nuon_core::parse_duration)]
        await_runner_timeout: Duration,
        /// How long a downloaded install stack's one-time token works (a
        /// provision's `await install stack` step waits as long).
        #[arg(long, default_value = "24h", value_parser = nuon_core::parse_duration)]
        stack_token_ttl: Duration,
        /// An S3 bucket (`s3://BUCKET[/PREFIX]`) for the templates of the
        /// installer page's CloudFormation "Launch stack" links (AWS's
        /// console reads a quick-create template from S3 only; without a
        /// bucket the page offers the download alone). The keys that put
        /// them there come from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY
        /// (an IAM user's: read once, not renewed); AWS_ENDPOINT_URL names
        /// another S3 (MinIO, a test's).
        #[arg(long, value_name = "S3_URL")]
        stack_template_bucket: Option<String>,
        /// The template bucket's region (default AWS_REGION).
        #[arg(long, requires = "stack_template_bucket")]
        stack_template_region: Option<String>,
        /// A plan older than this when its apply is about to run is planned
        /// again (and asks for its approval again) before anything is
        /// applied.
        #[arg(long, default_value = "72h", value_parser = nuon_core::parse_duration)]
        plan_max_age: Duration,
        /// The longest wait between two tries of a webhook delivery (the
        /// waits double from 1s up to it; a delivery is given up after 3 days).
        #[arg(long, default_value = "5m", value_parser = nuon_core::parse_duration)]
        webhook_max_backoff: Duration,
        /// Let webhooks point at loopback, private and link-local addresses
        /// (refused by default: an org's webhook must not reach into the
        /// control plane's own network).
        #[arg(long)]
        webhook_allow_private_networks: bool,
        /// How often an install's runner runs its components' health probes
        /// (`[health]`) between deploys, and reports what they say.
        #[arg(long, default_value = "60s", value_parser = nuon_core::parse_duration)]
        probe_interval: Duration,
        /// Close a new connection that has not sent its first request's
        /// head within this time (slow or silent clients), on both listeners.
        #[arg(long, default_value = "10s", value_parser = nuon_core::parse_duration)]
        header_timeout: Duration,
        /// Close a kept-alive connection with no request in flight for this
        /// long (a runner's parked claim is a request in flight).
        #[arg(long, default_value = "75s", value_parser = nuon_core::parse_duration)]
        idle_timeout: Duration,
        /// The most connections held open on each listener. A new one past
        /// it closes the connection idle longest; when every one has a
        /// request in flight, the new one is closed. Give at least one per
        /// runner, plus the dashboard's and tools'.
        #[arg(long, default_value_t = 16_384)]
        max_connections: usize,
        /// Failed sign-ins and token checks an address may make at once;
        /// past them it is answered 429 with Retry-After (an account, the
        /// id before a token's dot, gets half).
        #[arg(long, default_value_t = 20)]
        auth_failure_burst: u32,
        /// Failed sign-ins and token checks an address may make per minute
        /// after the burst (an account gets half).
        #[arg(long, default_value_t = 30)]
        auth_failures_per_minute: u32,
        /// Log kept per job attempt (e.g. 256MiB); past it the job's log
        /// ends with a line saying it was truncated, and the job goes on.
        #[arg(long, default_value = "256MiB", value_parser = nuon_core::wasm::parse_size)]
        log_quota_per_job: u64,
        /// Log a runner may ship per hour across its jobs (e.g. 4GiB); past
        /// it its jobs' logs are truncated the same way.
        #[arg(long, default_value = "4GiB", value_parser = nuon_core::wasm::parse_size)]
        log_quota_per_runner: u64,
        #[command(flatten)]
        oidc: OidcArgs,
    },
    /// Manage orgs directly in a data dir.
    Orgs {
        #[command(subcommand)]
        command: OrgsCommand,
    },
    /// Rotate the secrets key: put the new key first in the data dir's
    /// secrets.key (the old one after it, so both open), wait for running
    /// control planes to read it, seal every stored secret again with the
    /// new key, then leave the new key alone in the file. Safe to stop and
    /// run again; control planes keep serving throughout.
    RotateSecretsKey {
        /// The new key: 64 hex characters (e.g. `openssl rand -hex 32`).
        #[arg(long, value_name = "HEX")]
        new_key: String,
        /// How long to wait for running control planes to read the new key
        /// (longer than their --key-refresh).
        #[arg(long, default_value = "15s", value_parser = nuon_core::parse_duration)]
        grace: Duration,
        /// Values sealed again per batch.
        #[arg(long, default_value_t = 500)]
        batch: u32,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Back up the embedded store while it serves: one private file (a tar
    /// archive) with a consistent copy of its databases and a manifest of
    /// their sizes and digests; never the secrets key or a token, so what
    /// the store seals stays sealed. A PostgreSQL store is backed up with
    /// pg_dump instead.
    Backup {
        /// The backup file to write; it must not exist.
        #[arg(long, value_name = "FILE")]
        to: PathBuf,
        /// Print the backup's manifest as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Restore a backup into a new data dir (one that does not exist or is
    /// empty): the archive checked whole and the store opened with the
    /// secrets key it was sealed with before anything is moved into place.
    /// With --database-url instead of --from, check a PostgreSQL database
    /// restored with pg_restore the same way, and make the new data dir its
    /// replicas start with.
    Restore {
        /// The backup file (`nuon-ctl backup --to`).
        #[arg(long, value_name = "FILE", required_unless_present = "database_url")]
        from: Option<PathBuf>,
        /// A PostgreSQL database restored with pg_restore, to check.
        #[arg(long, env = "NUON_DATABASE_URL", conflicts_with = "from")]
        database_url: Option<String>,
        /// The new data dir.
        #[arg(long, env = "NUON_DATA_DIR")]
        data_dir: PathBuf,
        /// The secrets key the store was sealed with (a copy of the old
        /// data dir's secrets.key), copied into the new data dir; or set
        /// NUON_SECRETS_KEY.
        #[arg(long, value_name = "FILE")]
        secrets_key_file: Option<PathBuf>,
        /// Print what was restored as JSON.
        #[arg(long)]
        json: bool,
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
    /// Give an org a new job-signing key. Runners learn it from a message
    /// the old key signs (no key is pasted again, no runner restarted) and
    /// accept jobs signed by the old key until the overlap ends; jobs not
    /// ended yet are signed again with the new key. Running control planes
    /// pick the new key up within 10 s.
    RotateSigningKey {
        /// The org's name.
        name: String,
        /// How long runners keep accepting jobs signed by the old key.
        #[arg(long, default_value = "24h", value_parser = nuon_core::parse_duration)]
        overlap: Duration,
        /// Print the result as JSON.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// The OpenID Connect provider people sign in through.
#[derive(clap::Args)]
struct OidcArgs {
    /// The provider's issuer URL (its discovery document is under
    /// `/.well-known/openid-configuration`); https, or http on loopback.
    /// Without it, people cannot sign in (API tokens still work).
    #[arg(long, env = "NUON_OIDC_ISSUER", requires = "oidc_client_id")]
    oidc_issuer: Option<String>,
    /// The client id registered with the provider.
    #[arg(long, env = "NUON_OIDC_CLIENT_ID", requires = "oidc_issuer")]
    oidc_client_id: Option<String>,
    /// A file holding the client secret (or set NUON_OIDC_CLIENT_SECRET).
    #[arg(long)]
    oidc_client_secret_file: Option<PathBuf>,
    /// The redirect URI registered with the provider (default: the
    /// Control API's URL and /v1/auth/oidc/callback).
    #[arg(long, env = "NUON_OIDC_REDIRECT_URL")]
    oidc_redirect_url: Option<String>,
    /// How long the API token a sign-in hands out works.
    #[arg(long, default_value = "12h", value_parser = nuon_core::parse_duration)]
    session_ttl: Duration,
}

impl OidcArgs {
    /// The provider's configuration, when one is given.
    fn config(self) -> anyhow::Result<Option<nuon_control::OidcConfig>> {
        let (Some(issuer), Some(client_id)) = (self.oidc_issuer, self.oidc_client_id) else {
            return Ok(None);
        };
        let secret = match (
            &self.oidc_client_secret_file,
            std::env::var("NUON_OIDC_CLIENT_SECRET"),
        ) {
            (Some(path), _) => std::fs::read_to_string(path).map_err(|e| {
                anyhow::anyhow!("--oidc-client-secret-file {}: {e}", path.display())
            })?,
            (None, Ok(s)) => s,
            (None, Err(_)) => anyhow::bail!(
                "--oidc-issuer needs the client secret: --oidc-client-secret-file FILE or NUON_OIDC_CLIENT_SECRET"
            ),
        };
        let config = nuon_control::OidcConfig {
            issuer,
            client_id,
            client_secret: secret.trim().to_owned(),
            redirect_url: self.oidc_redirect_url,
            session_ttl: self.session_ttl,
        };
        // Checked when the control plane opens (`Oidc::new`), so a library
        // user gets the same refusal.
        Ok(Some(config))
    }
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

impl StoreArgs {
    /// The store, which must exist (the server may be running on it).
    async fn open(&self) -> anyhow::Result<OpenStore> {
        OpenStore::existing(&self.data_dir, self.database_url.as_deref())
            .await
            .map_err(|e| anyhow::anyhow!("{e}"))
    }
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

/// Runs a command to its end.
pub async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve {
            data_dir,
            database_url,
            retention,
            listen,
            runner_listen,
            tls_cert,
            tls_key,
            no_lead,
            lease_timeout,
            max_claim_wait,
            runner_url,
            strict_permissions,
            key_refresh,
            runner_unhealthy_after,
            runner_offline_after,
            await_runner_timeout,
            stack_token_ttl,
            stack_template_bucket,
            stack_template_region,
            plan_max_age,
            webhook_max_backoff,
            webhook_allow_private_networks,
            probe_interval,
            header_timeout,
            idle_timeout,
            max_connections,
            auth_failure_burst,
            auth_failures_per_minute,
            log_quota_per_job,
            log_quota_per_runner,
            oidc,
        } => {
            if runner_offline_after <= runner_unhealthy_after {
                anyhow::bail!(
                    "--runner-offline-after ({runner_offline_after:?}) must be longer than --runner-unhealthy-after ({runner_unhealthy_after:?})"
                );
            }
            let mut config = ServerConfig::new(&data_dir);
            config.runner_url = runner_url;
            config.database_url = database_url;
            config.retention = retention;
            config.lease = lease_timeout;
            config.lead = !no_lead;
            config.max_claim_wait = max_claim_wait;
            config.strict_permissions = strict_permissions;
            config.key_refresh = key_refresh;
            config.ops.runner_unhealthy_after = runner_unhealthy_after;
            config.ops.runner_offline_after = runner_offline_after;
            config.ops.await_runner_timeout = await_runner_timeout;
            config.ops.stack_token_ttl = stack_token_ttl;
            config.ops.stack_templates = stack_template_bucket
                .map(|b| {
                    nuon_control::s3::TemplateBucket::new(
                        &b,
                        stack_template_region.as_deref(),
                        |k| std::env::var(k).ok(),
                    )
                })
                .transpose()
                .map_err(|e| anyhow::anyhow!("--stack-template-bucket: {e}"))?;
            config.ops.plan_max_age = plan_max_age;
            config.ops.webhook_max_backoff = webhook_max_backoff;
            config.ops.webhook_allow_private = webhook_allow_private_networks;
            if probe_interval < Duration::from_secs(1) {
                anyhow::bail!(
                    "--probe-interval ({probe_interval:?}) must be at least 1s: give how often runners probe, like 60s"
                );
            }
            config.ops.probe_interval = probe_interval;
            if header_timeout < Duration::from_millis(100)
                || idle_timeout < Duration::from_millis(100)
            {
                anyhow::bail!(
                    "--header-timeout ({header_timeout:?}) and --idle-timeout ({idle_timeout:?}) must be at least 100ms: give e.g. 10s and 75s"
                );
            }
            if max_connections == 0 {
                anyhow::bail!("--max-connections must be at least 1: give e.g. 16384");
            }
            if auth_failure_burst == 0 || auth_failures_per_minute == 0 {
                anyhow::bail!(
                    "--auth-failure-burst and --auth-failures-per-minute must be at least 1: give e.g. 20 and 30"
                );
            }
            config.ops.sign_in_throttle = nuon_control::ThrottleConfig {
                burst: auth_failure_burst,
                per_minute: auth_failures_per_minute,
            };
            config.ops.log_quota_per_job = log_quota_per_job;
            config.ops.log_quota_per_runner = log_quota_per_runner;
            config.connections = nuon_control::ConnLimits {
                header_timeout,
                idle_timeout,
                max_connections,
            };
            config.oidc = oidc.config()?;
            config.tls = tls_cert
                .zip(tls_key)
                .map(|(cert, key)| nuon_control::tls::TlsFiles { cert, key });
            if let Some(b) = &config.ops.stack_templates {
                tracing::info!(bucket = ?b, "quick-create templates go to the template bucket");
            }
            let plane = ControlPlane::open(config).await?;
            nuon_control::sys::raise_open_files_limit();
            let control = bind(listen, "--listen")?;
            let runner = bind(runner_listen, "--runner-listen")?;
            // Tests and scripts read these two lines to find the ports.
            let scheme = plane.scheme();
            println!("control-api: {scheme}://{}", control.local_addr()?);
            println!("runner-api: {scheme}://{}", runner.local_addr()?);
            tracing::info!(data_dir = %data_dir.display(), "control plane serving");
            plane.serve(control, runner, shutdown_signal()).await?;
            tracing::info!("control plane stopped");
            Ok(())
        }
        Command::Orgs {
            command: OrgsCommand::Create { name, store },
        } => {
            let direct = store.open().await?;
            let org = direct.create_org(&store.data_dir, &name).await;
            direct.close().await;
            let (org, public_key) = org?;
            println!("org: {}", org.org_id);
            println!("admin-token: {}", org.admin_token.secret);
            println!("build-runner: {}", org.build_runner);
            println!("build-runner-token: {}", org.build_runner_token.secret);
            println!("signing-public-key: {public_key}");
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
            let direct = store.open().await?;
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
        Command::Orgs {
            command:
                OrgsCommand::RotateSigningKey {
                    name,
                    overlap,
                    json,
                    store,
                },
        } => {
            let direct = store.open().await?;
            let rotated = direct
                .rotate_signing_key(&store.data_dir, &name, overlap)
                .await;
            direct.close().await;
            let rotated = rotated?;
            if json {
                println!("{}", serde_json::to_string_pretty(&rotated)?);
            } else {
                println!(
                    "org {name} ({}): new signing key {}",
                    rotated.org, rotated.key
                );
                println!(
                    "runners accept jobs signed by the previous key {} for {} s more; {} jobs not ended were signed again",
                    rotated.previous,
                    overlap.as_secs(),
                    rotated.resigned
                );
                println!("signing-public-key: {}", rotated.key);
            }
            Ok(())
        }
        Command::RotateSecretsKey {
            new_key,
            grace,
            batch,
            json,
            store,
        } => {
            let direct = store.open().await?;
            let how = nuon_control::reseal::RotateSecrets {
                new_key,
                grace,
                batch,
            };
            let mut on_batch = |column: nuon_control::store::SealedColumn, done: u64| {
                // Progress, a line a batch, on stderr (tests read it).
                eprintln!("resealed {done} of {}", column.name());
            };
            let rotated = direct
                .rotate_secrets_key(&store.data_dir, &how, &mut on_batch)
                .await;
            direct.close().await;
            let rotated = rotated?;
            if json {
                println!("{}", serde_json::to_string(&rotated)?);
            } else {
                println!(
                    "secrets key rotated: {} values sealed again, {} were already under the new key ({} passes); {}",
                    rotated.resealed, rotated.current, rotated.passes, rotated.key
                );
            }
            Ok(())
        }
        Command::Backup { to, json, store } => {
            if store.database_url.is_some() {
                anyhow::bail!(
                    "a PostgreSQL store is backed up with pg_dump (`pg_dump --format=custom --file FILE \"$NUON_DATABASE_URL\"`) \
                     and restored with pg_restore into an empty database; keep the data dir's secrets.key apart from it \
                     (see the book's backups page)"
                );
            }
            let info = nuon_control::backup::backup(&store.data_dir, &to)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&info)?);
            } else {
                let bytes: u64 = info.files.iter().map(|f| f.bytes).sum();
                println!(
                    "backed up {} to {} ({} files, {bytes} bytes); restore it with the secrets key \
                     (`nuon-ctl restore --from {} --data-dir NEW_DIR --secrets-key-file KEY`)",
                    store.data_dir.display(),
                    to.display(),
                    info.files.len(),
                    to.display()
                );
            }
            Ok(())
        }
        Command::Restore {
            from,
            database_url,
            data_dir,
            secrets_key_file,
            json,
        } => {
            let key = secrets_key_file.as_deref();
            let (restored, what, serve) = match (&from, &database_url) {
                (Some(from), _) => (
                    nuon_control::backup::restore(from, &data_dir, key).await?,
                    from.display().to_string(),
                    String::new(),
                ),
                (None, Some(url)) => (
                    nuon_control::backup::check_database(url, &data_dir, key).await?,
                    "the database".to_owned(),
                    " --database-url URL".to_owned(),
                ),
                (None, None) => anyhow::bail!("give --from FILE, or --database-url URL"),
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&restored)?);
            } else {
                println!(
                    "restored {what} into {} ({} orgs); serve it with `nuon-ctl serve --data-dir {}{serve}`",
                    restored.data_dir, restored.orgs, restored.data_dir
                );
                println!(
                    "left out, as every backup does: {} (put them back from where you keep them; the tokens people hold still work)",
                    restored.left_out.join(", ")
                );
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

fn bind(addr: SocketAddr, flag: &str) -> anyhow::Result<tokio::net::TcpListener> {
    nuon_control::sys::listen(addr)
        .map_err(|e| anyhow::anyhow!("cannot listen on {addr} ({flag}): {e}"))
}
