//! Opening a data directory and serving both APIs.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::Router;
use nuon_core::now_ms;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::api::{AppState, SharedState, Timings, control_router, runner_router};
use crate::error::{Error, Result};
use crate::keys::{OrgSigners, SealedKeys};
use crate::private::{
    ADMIN_TOKEN_FILE, BUILD_RUNNER_TOKEN_FILE, SIGNING_KEY_FILE, write_file, write_private,
};
use crate::secrets::SecretBox;
#[cfg(feature = "postgres")]
use crate::store::PostgresStore;
use crate::store::{SqliteStore, Store, StoreError};

/// How to run the control plane.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Where the embedded store lives, and the secrets key (replicas on one
    /// database must share the same `secrets.key`).
    pub data_dir: PathBuf,
    /// A PostgreSQL URL (`postgres://...`): keep the state there instead of
    /// the embedded SQLite store, so several replicas can share it.
    pub database_url: Option<String>,
    /// How long finished jobs and their logs are kept (default 30 days).
    pub retention: Duration,
    /// How long a lease lasts without a heartbeat (default 60 s).
    pub lease: Duration,
    /// The longest a claim is held open (default 50 s).
    pub max_claim_wait: Duration,
    /// The longest a heartbeat is held open (default 20 s; never more than a third of the lease).
    pub max_heartbeat_wait: Duration,
    /// How often expired leases are looked for (default 1 s).
    pub rescue_interval: Duration,
    /// The Runner API's base URL as runners reach it, for the Terraform
    /// state backend address in jobs (default: `http://` and the runner
    /// listener's address).
    pub runner_url: Option<String>,
    /// Signs the orgs' jobs (default: each org's key, sealed in the store;
    /// see [`crate::keys`]). A vendor's own, over a KMS or an HSM, goes here.
    pub signers: Option<Arc<dyn OrgSigners>>,
    /// Refuse to start when the data dir or a file in it is readable by
    /// others, instead of fixing the mode with a warning.
    pub strict_permissions: bool,
    /// How soon a rotation of an org's signing key made elsewhere (by
    /// `nuon-ctl orgs rotate-signing-key`, another replica) is picked up
    /// (default [`crate::keys::KEY_REFRESH`], 10 s).
    pub key_refresh: Duration,
    /// Runner health thresholds and webhook retries.
    pub ops: crate::ops::OpsConfig,
    /// The OpenID Connect provider people sign in through (none: people
    /// cannot sign in; API tokens still work).
    pub oidc: Option<crate::oidc::OidcConfig>,
    /// Header and idle timeouts and the connection cap of both listeners.
    pub connections: crate::listen::ConnLimits,
    /// Serve both listeners over TLS with this certificate and key (read
    /// again when they change, as often as `key_refresh`); none: plain HTTP,
    /// for loopback or behind a TLS proxy.
    pub tls: Option<crate::tls::TlsFiles>,
    /// Seek the maintenance lead (default). Off: a replica that serves both
    /// APIs and never leads (rescues no lease, drives no workflow, delivers
    /// no webhook); another replica on the database must. PostgreSQL only.
    pub lead: bool,
}

impl ServerConfig {
    /// Defaults for a data directory.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        ServerConfig {
            data_dir: data_dir.into(),
            database_url: None,
            retention: Duration::from_secs(30 * 24 * 3600),
            lease: Duration::from_secs(60),
            max_claim_wait: Duration::from_secs(50),
            max_heartbeat_wait: Duration::from_secs(20),
            rescue_interval: Duration::from_secs(1),
            runner_url: None,
            signers: None,
            strict_permissions: false,
            key_refresh: crate::keys::KEY_REFRESH,
            ops: crate::ops::OpsConfig::default(),
            oidc: None,
            connections: crate::listen::ConnLimits::default(),
            tls: None,
            lead: true,
        }
    }
}

/// A control plane with its store open, ready to serve.
pub struct ControlPlane {
    state: SharedState,
    shutdown_tx: watch::Sender<bool>,
    config: ServerConfig,
    backend: OpenStore,
    tls: Option<Arc<crate::tls::Tls>>,
}

/// The store as opened, to close it the way it needs.
enum Backend {
    Sqlite(Arc<SqliteStore>),
    #[cfg(feature = "postgres")]
    Postgres(Arc<PostgresStore>),
}

/// A control plane's store, open: the embedded SQLite store of a data
/// directory, or a PostgreSQL database. What `serve` works on, and what
/// `nuon-ctl orgs` commands change directly.
pub struct OpenStore {
    kind: Backend,
    store: Arc<dyn Store>,
}

impl OpenStore {
    /// Opens (creating it when new) the store of `data_dir`, or the
    /// database at `database_url` (the data dir then holds only the
    /// secrets key and token files).
    pub async fn open(data_dir: &Path, database_url: Option<&str>) -> Result<Self> {
        match database_url {
            None => {
                let s = Arc::new(SqliteStore::open(data_dir)?);
                Ok(OpenStore {
                    kind: Backend::Sqlite(s.clone()),
                    store: s,
                })
            }
            #[cfg(feature = "postgres")]
            Some(url) => {
                crate::private::secure_data_dir(data_dir, false)?;
                let s = Arc::new(PostgresStore::connect(url).await?);
                Ok(OpenStore {
                    kind: Backend::Postgres(s.clone()),
                    store: s,
                })
            }
            #[cfg(not(feature = "postgres"))]
            Some(_) => Err(Error::DataDir {
                path: data_dir.display().to_string(),
                message: "this nuon-ctl was built without PostgreSQL support (cargo feature \
                          `postgres`); leave out --database-url to use the embedded store, or \
                          build with the feature"
                    .into(),
            }),
        }
    }

    /// Opens a store that must exist already: a data dir without one is a
    /// typo, or the data dir of a replica on PostgreSQL.
    pub async fn existing(data_dir: &Path, database_url: Option<&str>) -> Result<Self> {
        if database_url.is_none() && !data_dir.join(SqliteStore::DB_FILE).exists() {
            return Err(Error::DataDir {
                path: data_dir.display().to_string(),
                message: "holds no control-plane store (nuon.db): give the data dir `nuon-ctl serve` uses, \
                          or --database-url (NUON_DATABASE_URL) when the control plane runs on PostgreSQL"
                    .into(),
            });
        }
        Self::open(data_dir, database_url).await
    }

    /// The store.
    pub fn store(&self) -> Arc<dyn Store> {
        self.store.clone()
    }

    /// The secrets key this store's secrets are sealed with: from
    /// `NUON_SECRETS_KEY`, or `secrets.key` in the data dir (made there for
    /// a new store). A key that does not open the store's check value is
    /// refused.
    pub async fn secrets(&self, data_dir: &Path) -> Result<SecretBox> {
        let secrets = match SecretBox::load(data_dir)? {
            Some(b) => b,
            // A replica joining a database that already serves orgs must
            // use the key the others seal secrets with: a new one could
            // not open them.
            None if !matches!(self.kind, Backend::Sqlite(_))
                && self.store.count_orgs().await? > 0 =>
            {
                return Err(Error::DataDir {
                    path: data_dir.display().to_string(),
                    message: format!(
                        "this database already serves orgs, but this replica has no secrets key: \
                         set {} to the key the other replicas use (or copy their secrets.key \
                         into the data dir)",
                        crate::secrets::SECRETS_KEY_ENV
                    ),
                });
            }
            None => SecretBox::create(data_dir)?,
        };
        // The key must be the one the store's secrets are sealed with: the
        // first start seals a check value, every later one opens it.
        let check = self
            .store
            .setting_or_insert(KEY_CHECK, &secrets.seal(KEY_CHECK, KEY_CHECK))
            .await?;
        if secrets.open(&check, KEY_CHECK).is_err() {
            return Err(Error::DataDir {
                path: data_dir.display().to_string(),
                message: format!(
                    "the secrets key is not the one this store's secrets are sealed with: set {} \
                     (or secrets.key in the data dir) to that key; with another, no stored secret \
                     could be opened",
                    crate::secrets::SECRETS_KEY_ENV
                ),
            });
        }
        Ok(secrets)
    }

    /// Creates an org (its signing key sealed with the store's secrets
    /// key) and answers it with the public key its runners verify with.
    pub async fn create_org(
        &self,
        data_dir: &Path,
        name: &str,
    ) -> Result<(crate::store::NewOrg, nuon_core::PublicKey)> {
        let secrets = self.secrets(data_dir).await?;
        Ok(crate::keys::create_org(&*self.store, &secrets, name).await?)
    }

    /// Rotates the signing key of the org named `name` (see
    /// [`crate::keys::rotate_signing_key`]); the data dir's
    /// `org-signing-key.pub`, when it holds the old key, gets the new one.
    pub async fn rotate_signing_key(
        &self,
        data_dir: &Path,
        name: &str,
        overlap: Duration,
    ) -> Result<crate::keys::Rotated> {
        let secrets = self.secrets(data_dir).await?;
        let org = self.store.org_named(name).await?;
        let rotated = crate::keys::rotate_signing_key(&*self.store, &secrets, &org, overlap)
            .await
            .map_err(|e| match e {
                crate::keys::KeyError::Store(e) => Error::Store(e),
                e => Error::DataDir {
                    path: data_dir.display().to_string(),
                    message: e.to_string(),
                },
            })?;
        let file = data_dir.join(SIGNING_KEY_FILE);
        if std::fs::read_to_string(&file).is_ok_and(|k| k.trim() == rotated.previous) {
            write_file(&file, &rotated.key, 0o644)?;
        }
        Ok(rotated)
    }

    /// Rotates the secrets key of this store (see [`crate::reseal`]);
    /// `on_batch` hears of each batch sealed again.
    pub async fn rotate_secrets_key(
        &self,
        data_dir: &Path,
        how: &crate::reseal::RotateSecrets,
        on_batch: crate::reseal::OnBatch<'_>,
    ) -> Result<crate::reseal::Resealed> {
        crate::reseal::rotate_secrets_key(&*self.store, data_dir, how, on_batch).await
    }

    /// Closes it: SQLite checkpoints, PostgreSQL's pool drains.
    pub async fn close(&self) {
        match &self.kind {
            Backend::Sqlite(s) => s.close(),
            #[cfg(feature = "postgres")]
            Backend::Postgres(s) => s.close().await,
        }
    }
}

impl ControlPlane {
    /// Opens the data directory (creating the store, and on first use an org
    /// with its admin token and signing key files).
    pub async fn open(config: ServerConfig) -> Result<Self> {
        if config.lease < Duration::from_millis(300) {
            return Err(Error::DataDir {
                path: config.data_dir.display().to_string(),
                message: "lease must be at least 300ms".into(),
            });
        }
        if !config.lead && config.database_url.is_none() {
            return Err(Error::DataDir {
                path: config.data_dir.display().to_string(),
                message: "a replica that never leads (--no-lead) needs a database that replicas share (--database-url): on the embedded store this process is the only one, and it must lead".into(),
            });
        }
        crate::private::secure_data_dir(&config.data_dir, config.strict_permissions)?;
        // A certificate that cannot be served stops the start, before the
        // store is touched.
        let tls = config.tls.as_ref().map(crate::tls::Tls::load).transpose()?;
        let backend = OpenStore::open(&config.data_dir, config.database_url.as_deref()).await?;
        let store = backend.store();
        let secrets = Arc::new(backend.secrets(&config.data_dir).await?);
        let sealed = crate::keys::seal_legacy(&*store, &secrets)
            .await
            .map_err(|e| Error::DataDir {
                path: config.data_dir.display().to_string(),
                message: format!("cannot seal what an earlier version kept in the clear: {e}"),
            })?;
        if sealed > 0 {
            tracing::info!(
                values = sealed,
                "sealed signing keys and job specs an earlier version kept in the clear"
            );
        }
        bootstrap(&*store, &secrets, &config.data_dir).await?;
        // What the store and the bootstrap made is private too.
        crate::private::secure_data_dir(&config.data_dir, config.strict_permissions)?;
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let timings = Timings {
            lease: config.lease,
            max_claim_wait: config.max_claim_wait,
            max_heartbeat_wait: config.max_heartbeat_wait,
            fallback_poll: match backend.kind {
                Backend::Sqlite(_) => None,
                #[cfg(feature = "postgres")]
                Backend::Postgres(_) => Some(FALLBACK_POLL),
            },
        };
        let signers = config.signers.clone().unwrap_or_else(|| {
            Arc::new(SealedKeys::new(
                store.clone(),
                secrets.clone(),
                config.key_refresh,
            ))
        });
        let mut state = AppState::new(
            store,
            timings,
            shutdown_rx,
            secrets,
            signers,
            config.ops.clone(),
        );
        if let Some(oidc) = &config.oidc {
            let oidc = crate::oidc::Oidc::new(oidc.clone()).map_err(Error::bad_request)?;
            state.oidc = Some(Arc::new(oidc));
        }
        let state = Arc::new(state);
        Ok(ControlPlane {
            state,
            shutdown_tx,
            config,
            backend,
            tls,
        })
    }

    /// `https` when the listeners serve TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// The store, for embedders and tests.
    pub fn store(&self) -> Arc<dyn Store> {
        self.state.store.clone()
    }

    /// The Control API router.
    pub fn control_router(&self) -> Router {
        control_router(self.state.clone())
    }

    /// The Runner API router.
    pub fn runner_router(&self) -> Router {
        runner_router(self.state.clone())
    }

    /// Serves the Control API on `control` and the Runner API on `runner`
    /// until `shutdown` resolves; then ends long polls at once, finishes
    /// requests in flight and closes the store.
    pub async fn serve(
        self,
        control: TcpListener,
        runner: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<()> {
        let scheme = self.scheme();
        let url = match &self.config.runner_url {
            // Without a trailing slash: stacks append paths to it, and
            // their scripts match downloads against it.
            Some(u) => u.trim_end_matches('/').to_owned(),
            None => format!("{scheme}://{}", runner.local_addr()?),
        };
        self.state.engine.set_runner_url(url);
        let _ = self
            .state
            .control_url
            .set(format!("{scheme}://{}", control.local_addr()?));
        let maintenance = if self.config.lead {
            Some(tokio::spawn(maintenance_loop(
                self.state.clone(),
                self.config.rescue_interval,
                self.config.retention,
            )))
        } else {
            tracing::info!(
                "this replica never leads maintenance (--no-lead): another replica must"
            );
            None
        };
        let wakeups = self
            .state
            .store
            .wakeups()
            .map(|rx| tokio::spawn(forward_wakeups(self.state.clone(), rx)));
        // A rotation of the secrets key rewrites the key file, a renewal
        // the certificate's: follow both.
        let secrets = self.state.secrets.clone();
        let every = self.config.key_refresh;
        let tls = self.tls.clone();
        let key_file = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if let Err(e) = secrets.reload_if_changed() {
                    tracing::error!(error = %e, "cannot read the changed secrets key; keeping the keys read before");
                }
                match tls.as_ref().map(|t| (t, t.reload_if_changed())) {
                    Some((t, Ok(true))) => {
                        tracing::info!(cert = %t.files().cert.display(), "serving the renewed TLS certificate");
                    }
                    Some((_, Err(e))) => {
                        tracing::error!(error = %e, "cannot serve the changed TLS certificate; keeping the one read before");
                    }
                    _ => {}
                }
            }
        });
        let operations = tokio::spawn(operations(self.state.clone()));
        let sweep = (self.state.timings.fallback_poll)
            .map(|every| tokio::spawn(sweep_parked(self.state.clone(), every)));
        let engine = self.state.engine.clone();
        let engine_shutdown = self.state.shutdown.clone();
        let engine = tokio::spawn(async move { engine.run(engine_shutdown).await });
        let tx = self.shutdown_tx.clone();
        let state = self.state.clone();
        tokio::spawn(async move {
            shutdown.await;
            let _ = tx.send(true);
            state.wakes.runners.wake_all();
            state.wakes.logs.wake_all();
        });
        let stop = |state: SharedState| async move { state.shutting_down().await };
        let limits = self.config.connections;
        // The audit trail and runner sessions name the address each call
        // came from: both listeners record it.
        let control_srv = crate::listen::serve(
            control,
            self.control_router(),
            limits,
            self.tls.clone(),
            stop(self.state.clone()),
        );
        let runner_srv = crate::listen::serve(
            runner,
            self.runner_router(),
            limits,
            self.tls.clone(),
            stop(self.state.clone()),
        );
        let (a, b) = tokio::join!(control_srv, runner_srv);
        if let Some(m) = maintenance {
            m.abort();
        }
        operations.abort();
        key_file.abort();
        // What the last requests recorded is written before the store closes.
        self.state.auditor.flush(Duration::from_secs(5)).await;
        engine.abort();
        for task in [wakeups, sweep].into_iter().flatten() {
            task.abort();
        }
        self.backend.close().await;
        a?;
        b?;
        Ok(())
    }
}

/// How often a replica on a shared store sweeps for the queued jobs of
/// the runners parked on it.
#[cfg(feature = "postgres")]
const FALLBACK_POLL: Duration = Duration::from_secs(10);
/// The setting holding a value sealed with the secrets key, to check the key.
const KEY_CHECK: &str = "secrets_key_check";
/// How often the leader prunes finished jobs.
const PRUNE_EVERY: Duration = Duration::from_secs(3600);

/// Applies the other replicas' wake-ups here.
async fn forward_wakeups(
    state: SharedState,
    mut rx: tokio::sync::broadcast::Receiver<crate::store::Wakes>,
) {
    use tokio::sync::broadcast::error::RecvError;
    loop {
        match rx.recv().await {
            Ok(ws) => {
                for w in ws.iter() {
                    state.apply_wake(w);
                }
            }
            // Fell behind: some were dropped, so everyone looks again.
            Err(RecvError::Lagged(n)) => {
                tracing::warn!(
                    notifications = n,
                    "fell behind the other replicas' wake-ups; every waiter here looks again"
                );
                state.apply_wake(&crate::store::Wake::All);
            }
            Err(RecvError::Closed) => return,
        }
    }
}

/// Every `every`, wakes the claims parked here of the runners that have a
/// job queued: a wake-up another replica sent and this one lost is late
/// by at most `every`. One statement a sweep, however many runners are
/// parked (a claim that looked by itself cost one each).
async fn sweep_parked(state: SharedState, every: Duration) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = state.shutting_down() => return,
        }
        match state.store.queued_runners().await {
            Ok(runners) => {
                for r in &runners {
                    state.wakes.runners.wake(r);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot look for queued jobs of the runners parked here")
            }
        }
    }
}

/// Holds or seeks the maintenance lead; while leading, rescues expired
/// leases every tick and prunes old jobs every [`PRUNE_EVERY`].
async fn maintenance_loop(state: SharedState, every: Duration, retention: Duration) {
    use std::sync::atomic::Ordering;
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_prune: Option<tokio::time::Instant> = None;
    // Cron runs are due on the minute: looked for once a minute, and on
    // taking the lead.
    let mut cron_minute: Option<i64> = None;
    let mut cron_tried = crate::engine::cron::Tried::default();
    loop {
        tick.tick().await;
        let leading = match state.store.lead().await {
            Ok(l) => l,
            Err(e) => {
                tracing::warn!(error = %e, "cannot reach the store to take the maintenance lead");
                false
            }
        };
        let was = state.leader.swap(leading, Ordering::Relaxed);
        if leading && !was {
            // Runners may have reached no control plane while the lead was
            // vacant (every replica down, or the leader's runners moving to
            // another): give running attempts a full lease from now before
            // any is called lost.
            let until = now_ms() + state.timings.lease.as_millis() as i64;
            match state.store.extend_running_leases(until).await {
                Ok(0) => {}
                Ok(count) => {
                    tracing::info!(
                        count,
                        "extended the leases of running attempts on taking the lead"
                    )
                }
                Err(e) => {
                    tracing::warn!(error = %e, "cannot extend running leases on taking the lead; trying again");
                    state.leader.store(false, Ordering::Relaxed);
                    continue;
                }
            }
        }
        if leading != was {
            if leading {
                tracing::info!(
                    "this replica leads maintenance (rescuing leases, pruning, driving workflows)"
                );
                state.engine.wake();
            } else {
                tracing::warn!("this replica no longer leads maintenance");
            }
        }
        if !leading {
            cron_minute = None;
            continue;
        }
        let minute = now_ms() / 60_000;
        if cron_minute != Some(minute) {
            cron_minute = Some(minute);
            if let Err(e) = state.engine.fire_crons(now_ms(), &mut cron_tried).await {
                tracing::error!(error = %e, "starting the cron runs that are due failed");
                cron_minute = None;
            }
        }
        if last_prune.is_none_or(|t| t.elapsed() >= PRUNE_EVERY) {
            last_prune = Some(tokio::time::Instant::now());
            let before = now_ms() - retention.as_millis() as i64;
            match state.store.prune(before).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(rows = n, "pruned finished jobs and logs past retention"),
                Err(e) => tracing::error!(error = %e, "pruning failed"),
            }
        }
        match state.store.rescue_expired(now_ms()).await {
            Ok(rescued) => {
                for r in rescued {
                    tracing::warn!(
                        job = %r.job_id,
                        runner = %r.runner_id,
                        requeued = r.requeued,
                        "lease expired: attempt lost"
                    );
                    if r.requeued {
                        state.wake_runner(&r.runner_id);
                    } else {
                        state.engine.job_ended(&r.job_id);
                    }
                    state.wake_org(&r.org_id);
                    state.wake_logs(&r.job_id);
                }
            }
            Err(e) => tracing::error!(error = %e, "rescuing expired leases failed"),
        }
    }
}

/// On an empty store: the first org, its admin token and public key files.
async fn bootstrap(store: &dyn Store, secrets: &SecretBox, dir: &Path) -> Result<()> {
    if store.count_orgs().await? > 0 {
        return Ok(());
    }
    let (org, public_key) = match crate::keys::create_org(store, secrets, "default").await {
        Ok(org) => org,
        // Another replica made it first.
        Err(StoreError::Conflict { .. }) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    write_private(&dir.join(ADMIN_TOKEN_FILE), &org.admin_token.secret)?;
    write_private(
        &dir.join(BUILD_RUNNER_TOKEN_FILE),
        &org.build_runner_token.secret,
    )?;
    write_file(&dir.join(SIGNING_KEY_FILE), &public_key.to_string(), 0o644)?;
    tracing::info!(
        org = %org.org_id,
        admin_token = %dir.join(ADMIN_TOKEN_FILE).display(),
        "created the first org"
    );
    Ok(())
}

/// The leader's operations loop: runner health every `health_every`,
/// webhook deliveries every second (and at once after a busy pass).
async fn operations(state: SharedState) {
    let health_every = (state.ops.runner_unhealthy_after / 4)
        .clamp(Duration::from_millis(250), Duration::from_secs(10));
    let mut last_health: Option<Instant> = None;
    loop {
        let leading = state.leader.load(Ordering::Relaxed);
        let mut busy = false;
        if leading {
            if last_health.is_none_or(|t| t.elapsed() >= health_every) {
                last_health = Some(Instant::now());
                if let Err(e) = crate::ops::check_runners(state.fleet()).await {
                    tracing::warn!(error = %e, "cannot check the runners' health");
                }
            }
            match crate::ops::deliver_webhooks(state.fleet()).await {
                Ok(n) => busy = n > 0,
                Err(e) => {
                    tracing::warn!(error = %e, "cannot read the webhook deliveries that are due")
                }
            }
        }
        let pause = if busy {
            Duration::from_millis(50)
        } else {
            Duration::from_millis(250).min(health_every)
        };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = state.shutting_down() => return,
        }
    }
}
