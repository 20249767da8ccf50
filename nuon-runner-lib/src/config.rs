//! The runner's configuration and its plugin registry.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use nuon_client::{ClientConfig, RunnerClient};
use nuon_core::wire::RunnerSession;
use nuon_core::{Plugin, PublicKey, RunnerId, Transport};

use crate::error::{Error, Result};

/// The plugins a runner has, by job kind. The runner claims only these kinds.
#[derive(Clone, Default)]
pub struct PluginRegistry {
    plugins: HashMap<String, Arc<dyn Plugin>>,
}

impl PluginRegistry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// A registry with the built-in plugins (`exec`).
    pub fn with_builtin() -> Self {
        let mut registry = Self::new();
        registry.register(Arc::new(nuon_plugins::exec::ExecPlugin::new()));
        registry
    }

    /// Adds a plugin, replacing any plugin of the same kind.
    pub fn register(&mut self, plugin: Arc<dyn Plugin>) -> &mut Self {
        self.plugins.insert(plugin.kind().to_owned(), plugin);
        self
    }

    /// The tool versions the plugins hold.
    pub fn tools(&self) -> Vec<nuon_core::wire::ToolHeld> {
        let mut kinds: Vec<&String> = self.plugins.keys().collect();
        kinds.sort();
        kinds
            .into_iter()
            .flat_map(|k| self.plugins[k].tools())
            .collect()
    }

    /// The plugin for `kind`.
    pub fn get(&self, kind: &str) -> Option<&Arc<dyn Plugin>> {
        self.plugins.get(kind)
    }

    /// The kinds the registry has, sorted.
    pub fn kinds(&self) -> Vec<String> {
        let mut kinds: Vec<String> = self.plugins.keys().cloned().collect();
        kinds.sort();
        kinds
    }
}

impl fmt::Debug for PluginRegistry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginRegistry")
            .field("kinds", &self.kinds())
            .finish()
    }
}

/// Variables of the runner's own environment that jobs inherit by default.
/// Everything else (the runner's token above all) stays out of job processes.
const INHERITED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "TZ",
    "TMPDIR",
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    // The cloud the runner is in, and its own Terraform CLI settings
    // (mirrors, a provider cache); never credentials: a job's come from
    // its role.
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_CA_BUNDLE",
    "TF_CLI_CONFIG_FILE",
];

/// Everything a [`crate::Runner`] needs. Build it with [`RunnerConfig::new`]
/// (or [`RunnerConfig::connect`]) and change the public fields as needed.
#[derive(Clone)]
pub struct RunnerConfig {
    /// The way to the control plane's Runner API.
    pub transport: Arc<dyn Transport>,
    /// The org's job-signing public key; jobs not signed by it are refused.
    /// When the org's key is rotated the runner learns the new one from the
    /// control plane (signed by this one) and keeps it in the work dir
    /// (`trusted-keys.json`).
    pub signing_key: PublicKey,
    /// This runner's id (from its token); jobs for another runner are refused.
    pub runner_id: RunnerId,
    /// Where the runner keeps its state: the log spool in `spool/`, job work
    /// directories in `jobs/`, and a lock file.
    pub work_dir: PathBuf,
    /// How many jobs run at once (default 4).
    pub slots: usize,
    /// How long the server may hold a claim (default 50 s).
    pub claim_wait: Duration,
    /// How long the server may hold a heartbeat (default 10 s).
    pub heartbeat_wait: Duration,
    /// Between SIGTERM and SIGKILL when a job is stopped (default 10 s).
    pub grace: Duration,
    /// How long a shutdown lets running jobs finish before it stops them
    /// (default 10 min).
    pub drain_timeout: Duration,
    /// How long a shutdown then waits for logs and completions to be
    /// delivered; what is left stays in the spool for the next start
    /// (default 30 s).
    pub ship_timeout: Duration,
    /// First delay of the retry backoff after a control-plane error (default 250 ms).
    pub backoff_base: Duration,
    /// Largest delay of the retry backoff (default 30 s).
    pub backoff_cap: Duration,
    /// The environment every job process starts with (default:
    /// [`RunnerConfig::default_env`]); the job's own variables are added to it.
    pub env: BTreeMap<String, String>,
    /// The plugins, which decide the job kinds the runner claims.
    pub plugins: PluginRegistry,
    /// Refuse to start when the work dir, spool or jobs dir is readable by
    /// others, instead of making it private with a warning (default off).
    pub strict_permissions: bool,
    /// What the runner counts of itself (sent with its claims and
    /// heartbeats; shown at `--metrics-listen`).
    pub stats: Arc<crate::RunnerStats>,
    /// How a job gets the cloud role its spec names (default: none, the
    /// runner's own identity).
    pub credentials: Arc<dyn crate::credentials::CredentialsProvider>,
    /// Where the customer-held secrets a job prints are (the stack's
    /// `NAME_arn` outputs); read with the job's role.
    pub customer_secrets: crate::customer_secrets::CustomerSecrets,
    /// How jobs are isolated (default: process groups).
    pub isolation: crate::container::Isolation,
    /// The settings each time the runner takes them from the control
    /// plane (verified): what runner updates watch.
    pub settings_seen: tokio::sync::watch::Sender<Option<nuon_core::wire::RunnerSettingsInfo>>,
    /// Set before a shutdown that is an update's drain: running jobs are
    /// never stopped at `drain_timeout`, the drain waits for them to end.
    pub drain_until_done: Arc<std::sync::atomic::AtomicBool>,
    /// Where runner binaries are downloaded from on an update (the
    /// vendor's store; none: updates are refused, with that reason).
    pub update_store: Option<Arc<dyn nuon_core::artifact::ArtifactStore>>,
}

impl RunnerConfig {
    /// A configuration with defaults for everything but the essentials.
    pub fn new(
        transport: Arc<dyn Transport>,
        signing_key: PublicKey,
        runner_id: RunnerId,
        work_dir: impl Into<PathBuf>,
    ) -> Self {
        RunnerConfig {
            transport,
            signing_key,
            runner_id,
            work_dir: work_dir.into(),
            slots: 4,
            claim_wait: Duration::from_secs(50),
            heartbeat_wait: Duration::from_secs(10),
            grace: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(600),
            ship_timeout: Duration::from_secs(30),
            backoff_base: Duration::from_millis(250),
            backoff_cap: Duration::from_secs(30),
            env: Self::default_env(),
            plugins: PluginRegistry::with_builtin(),
            strict_permissions: false,
            stats: Arc::default(),
            credentials: Arc::new(crate::credentials::NoCredentials),
            customer_secrets: Default::default(),
            isolation: crate::container::Isolation::Process,
            settings_seen: tokio::sync::watch::channel(None).0,
            drain_until_done: Arc::default(),
            update_store: None,
        }
    }

    /// A configuration talking HTTP to the control plane described by
    /// `client` (whose token must be a runner token).
    ///
    /// The process names its session on every request: one token, one live
    /// runner. While another process of the token is seen, this one is
    /// refused (and stops, saying which); a restart in the same work dir on
    /// the same host is the same session.
    pub fn connect(
        client: ClientConfig,
        signing_key: PublicKey,
        work_dir: impl Into<PathBuf>,
    ) -> Result<Self> {
        Self::connect_with(client, signing_key, work_dir, false)
    }

    /// [`RunnerConfig::connect`], and with `replace` this process takes
    /// the token over from a live one (`nuon-runner run --replace`), which
    /// is refused from then on.
    pub fn connect_with(
        client: ClientConfig,
        signing_key: PublicKey,
        work_dir: impl Into<PathBuf>,
        replace: bool,
    ) -> Result<Self> {
        let work_dir = work_dir.into();
        let runner_id = Self::runner_id_from_token(&client.token)?;
        let transport = RunnerClient::new(client)
            .and_then(|c| c.with_session(&session_of(&work_dir), replace))
            .map_err(Error::Client)?;
        Ok(Self::new(
            Arc::new(transport),
            signing_key,
            runner_id,
            work_dir,
        ))
    }

    /// The runner id a runner token names.
    pub fn runner_id_from_token(token: &str) -> Result<RunnerId> {
        nuon_core::token::runner_id_of_token(token.trim()).ok_or_else(|| {
            Error::Config(
                "the runner token is not of the form rnr_<26 characters>.<secret>; \
                 use the token printed when the runner was created"
                    .into(),
            )
        })
    }

    /// The part of the runner's own environment jobs inherit: `PATH`,
    /// `HOME`, locale, time zone, `TMPDIR`, proxy and CA settings, the
    /// AWS region and endpoint, and `TF_CLI_CONFIG_FILE`.
    pub fn default_env() -> BTreeMap<String, String> {
        let mut env: BTreeMap<String, String> = INHERITED_ENV
            .iter()
            .filter_map(|k| Some(((*k).to_owned(), std::env::var(k).ok()?)))
            .collect();
        env.entry("PATH".into())
            .or_insert_with(|| "/usr/local/bin:/usr/bin:/bin".into());
        env
    }
}

/// This process's session: its id is the same for every start on this host
/// in this work dir (whose lock lets one process use it at a time).
fn session_of(work_dir: &std::path::Path) -> RunnerSession {
    let dir = std::path::absolute(work_dir).unwrap_or_else(|_| work_dir.to_owned());
    RunnerSession {
        version: Some(crate::version().to_owned()),
        ..nuon_client::session_of_this_process(&dir.display().to_string())
    }
}

impl fmt::Debug for RunnerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunnerConfig")
            .field("signing_key", &self.signing_key)
            .field("runner_id", &self.runner_id)
            .field("work_dir", &self.work_dir)
            .field("slots", &self.slots)
            .field("claim_wait", &self.claim_wait)
            .field("heartbeat_wait", &self.heartbeat_wait)
            .field("grace", &self.grace)
            .field("drain_timeout", &self.drain_timeout)
            .field("ship_timeout", &self.ship_timeout)
            .field("backoff_base", &self.backoff_base)
            .field("backoff_cap", &self.backoff_cap)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("plugins", &self.plugins)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_has_exec_and_tokens_name_runners() {
        assert_eq!(PluginRegistry::with_builtin().kinds(), ["exec"]);
        assert!(PluginRegistry::new().kinds().is_empty());
        let id = RunnerId::generate();
        let token = nuon_core::token::issue_runner_token(&id);
        assert_eq!(
            RunnerConfig::runner_id_from_token(&token.secret).unwrap(),
            id
        );
        let err = RunnerConfig::runner_id_from_token("tok_x.y").unwrap_err();
        assert!(err.to_string().contains("not of the form rnr_"), "{err}");
        assert!(RunnerConfig::default_env().contains_key("PATH"));
    }
}
