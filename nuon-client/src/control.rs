use std::collections::VecDeque;
use std::time::Duration;

use nuon_core::endpoint::{self as ep, Endpoint, GetInstall, UpdateInstall};
use nuon_core::rollout::{CreateRollout, RolloutInfo, RolloutList};
use nuon_core::webhook::WebhookEvent;
use nuon_core::wire::{
    AppInfo, AppList, BuildInfo, BuildList, ComponentList, ComponentToggled, ConfigFile,
    ConfigVersionInfo, ConfigVersionList, CreateApp, CreateBuilds, CreateInstall, CreateJob,
    CreateRunner, CreateToken, CreateWorkflow, InstallCheck, InstallComponents, InstallCreated,
    InstallDrift, InstallHealth, InstallInfo, InstallList, InstallOutputs, JobInfo, JobList,
    LogEntry, LogPage, OrgInfo, PushCheck, RunnerCreated, RunnerInfo, RunnerList, SetInputs,
    StateList, StateUnlocked, StepChoice, SyncConfig, ToggleComponent, TokenCreated, TokenInfo,
    TokenList, TokenScope, WorkflowInfo, WorkflowList, routes,
};
use nuon_core::wire::{
    AuditList, AuditVerification, CreateWebhook, DebugPurpose, DebugRequest, DeliveryList,
    WebhookCreated, WebhookInfo, WebhookList,
};
use nuon_core::wire::{ComponentOverridden, EditInstall, SetComponentOverride};
use nuon_core::wire::{CreateRelease, ReleaseInfo, ReleaseList};
use nuon_core::workflow::WorkflowKind;
use nuon_core::{JobId, WebhookId};

use crate::config::ClientConfig;
use crate::error::{Error, Result};
use crate::http::Http;

mod groups;
mod installers;
mod lifecycle;
mod renders;
mod rollouts;
mod workflows;

/// A name or id as one path segment: anything but letters, digits, `-`,
/// `_` and `.` is percent-encoded.
fn seg(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    nuon_core::endpoint::push_segment(&mut out, s);
    out
}

/// A client of the Control API, scoped to the org of its API token.
#[derive(Debug, Clone)]
pub struct ControlClient {
    http: Http,
}

impl ControlClient {
    /// A client for the configured control plane.
    pub fn new(config: ClientConfig) -> Result<Self> {
        Ok(ControlClient {
            http: Http::new(config)?,
        })
    }

    /// Calls any operation of the Control API that [`nuon_core::endpoint`]
    /// declares, with its path parameters in order (an id or a name each)
    /// and its request (`&()` when it takes none). The named methods below
    /// are the same calls, spelled for people.
    ///
    /// ```no_run
    /// # async fn f(c: nuon_client::ControlClient) -> nuon_client::Result<()> {
    /// use nuon_core::endpoint::GetInstall;
    /// let install = c.call::<GetInstall>(&["demo"], &()).await?;
    /// println!("{} is {}", install.name, install.state);
    /// # Ok(()) }
    /// ```
    pub async fn call<E: Endpoint>(
        &self,
        params: &[&str],
        req: &E::Request,
    ) -> Result<E::Response> {
        self.http.call::<E>(params, req).await
    }

    /// The control plane's version, as its OpenAPI document gives it.
    pub async fn server_version(&self) -> Result<String> {
        let doc: serde_json::Value = self.http.get(nuon_core::wire::routes::OPENAPI).await?;
        doc["info"]["version"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| crate::Error::Protocol {
                url: nuon_core::wire::routes::OPENAPI.into(),
                message: "the OpenAPI document has no info.version".into(),
            })
    }

    /// Registers a runner; the answer holds its token, shown only this once.
    pub async fn create_runner(&self, name: &str) -> Result<RunnerCreated> {
        let body = CreateRunner { name: name.into() };
        self.call::<ep::CreateRunner>(&[], &body).await
    }

    /// The org's runners.
    pub async fn list_runners(&self) -> Result<RunnerList> {
        self.call::<ep::ListRunners>(&[], &()).await
    }

    /// Revokes a runner's token (by name or id); the runner can make no call after.
    pub async fn revoke_runner(&self, runner: &str) -> Result<RunnerInfo> {
        self.call::<ep::RevokeRunner>(&[runner], &()).await
    }

    /// Issues a runner (by name or id) a new token, shown only in this
    /// answer; its old token stops working.
    pub async fn rotate_runner_token(&self, runner: &str) -> Result<RunnerCreated> {
        self.call::<ep::RotateRunnerToken>(&[runner], &()).await
    }

    /// The token's org.
    pub async fn get_org(&self) -> Result<OrgInfo> {
        self.call::<ep::GetOrg>(&[], &()).await
    }

    /// A one-time link that signs a browser into the dashboard as this
    /// client's token (it works once, for 10 minutes, after its page asks).
    pub async fn create_sign_in_code(&self) -> Result<nuon_core::wire::SignInCode> {
        self.call::<ep::CreateSignInCode>(&[], &()).await
    }

    /// Creates an API token; the answer holds its secret, shown only this once.
    pub async fn create_token(&self, name: &str, scope: TokenScope) -> Result<TokenCreated> {
        let body = CreateToken {
            name: name.into(),
            scope,
            service_account: false,
        };
        self.call::<ep::CreateToken>(&[], &body).await
    }

    /// Creates a service account's API token (for CI, scripts): it
    /// belongs to no person. Admin only.
    pub async fn create_service_account_token(
        &self,
        name: &str,
        scope: TokenScope,
    ) -> Result<TokenCreated> {
        let body = CreateToken {
            name: name.into(),
            scope,
            service_account: true,
        };
        self.call::<ep::CreateToken>(&[], &body).await
    }

    /// The org's people.
    pub async fn list_users(&self) -> Result<nuon_core::wire::UserList> {
        self.call::<ep::ListUsers>(&[], &()).await
    }

    /// Invites a person by email address with a role; they sign in through
    /// the org's OpenID Connect provider.
    pub async fn invite_user(
        &self,
        email: &str,
        role: nuon_core::wire::Role,
    ) -> Result<nuon_core::wire::UserInfo> {
        let body = nuon_core::wire::InviteUser {
            email: email.into(),
            role,
        };
        self.call::<ep::InviteUser>(&[], &body).await
    }

    /// Changes a person's role (by id or email address).
    pub async fn set_user_role(
        &self,
        user: &str,
        role: nuon_core::wire::Role,
    ) -> Result<nuon_core::wire::UserInfo> {
        let body = nuon_core::wire::SetUserRole { role };
        self.call::<ep::SetUserRole>(&[user], &body).await
    }

    /// Removes a person (by id or email address) and revokes their tokens.
    pub async fn remove_user(&self, user: &str) -> Result<nuon_core::wire::UserInfo> {
        self.call::<ep::RemoveUser>(&[user], &()).await
    }

    /// The org's API tokens.
    pub async fn list_tokens(&self) -> Result<TokenList> {
        self.call::<ep::ListTokens>(&[], &()).await
    }

    /// Revokes an API token by id.
    pub async fn revoke_token(&self, id: &str) -> Result<TokenInfo> {
        self.call::<ep::RevokeToken>(&[id], &()).await
    }

    /// Creates an app.
    pub async fn create_app(&self, name: &str) -> Result<AppInfo> {
        let body = CreateApp { name: name.into() };
        self.call::<ep::CreateApp>(&[], &body).await
    }

    /// The org's apps.
    pub async fn list_apps(&self) -> Result<AppList> {
        self.call::<ep::ListApps>(&[], &()).await
    }

    /// One app, by name or id.
    pub async fn get_app(&self, app: &str) -> Result<AppInfo> {
        self.call::<ep::GetApp>(&[app], &()).await
    }

    /// Syncs a new config version of an app from its files (and the files
    /// of its `path` sources, for builds). An invalid config is refused
    /// with every problem in [`Error::Api`]'s `diagnostics`.
    pub async fn sync_config(
        &self,
        app: &str,
        files: Vec<ConfigFile>,
        sources: Vec<ConfigFile>,
    ) -> Result<ConfigVersionInfo> {
        let path = routes::with_id(routes::APP_CONFIGS, &seg(app));
        self.http
            .post(&path, &SyncConfig { files, sources }, Duration::ZERO)
            .await
    }

    /// Builds an app's components (or one; `sandbox` for the sandbox).
    pub async fn create_builds(&self, app: &str, component: Option<&str>) -> Result<BuildList> {
        let path = routes::with_id(routes::APP_BUILDS, &seg(app));
        let req = CreateBuilds {
            component: component.map(str::to_owned),
        };
        self.http.post(&path, &req, Duration::ZERO).await
    }

    /// An app's builds, newest first.
    pub async fn list_builds(&self, app: &str) -> Result<BuildList> {
        self.call::<ep::ListBuilds>(&[app], &()).await
    }

    /// One build.
    pub async fn get_build(&self, id: &str) -> Result<BuildInfo> {
        self.call::<ep::GetBuild>(&[id], &()).await
    }

    /// Starts a workflow on an install.
    pub async fn create_workflow(
        &self,
        install: &str,
        kind: WorkflowKind,
        component: Option<&str>,
    ) -> Result<WorkflowInfo> {
        let req = CreateWorkflow {
            kind,
            component: component.map(str::to_owned),
            action: None,
            only: false,
            config_version: None,
            release: None,
            runbook: None,
            inputs: Default::default(),
            plan_only: false,
        };
        self.start_workflow(install, &req).await
    }

    /// Starts a workflow on an install, everything about it said in `req`
    /// (a teardown or deprovision with another config version, say).
    pub async fn start_workflow(
        &self,
        install: &str,
        req: &CreateWorkflow,
    ) -> Result<WorkflowInfo> {
        self.call::<ep::CreateWorkflow>(&[install], req).await
    }

    /// Runs an action of an install by hand (it needs a `manual` trigger),
    /// with run-time `inputs` it declares.
    pub async fn run_action(
        &self,
        install: &str,
        action: &str,
        inputs: std::collections::BTreeMap<String, String>,
    ) -> Result<WorkflowInfo> {
        let req = CreateWorkflow {
            kind: WorkflowKind::Action,
            component: None,
            action: Some(action.to_owned()),
            only: false,
            config_version: None,
            release: None,
            runbook: None,
            inputs,
            plan_only: false,
        };
        self.start_workflow(install, &req).await
    }

    /// Runs a runbook of an install's app as one workflow.
    pub async fn run_runbook(&self, install: &str, runbook: &str) -> Result<WorkflowInfo> {
        let req = CreateWorkflow {
            kind: WorkflowKind::Runbook,
            component: None,
            action: None,
            only: false,
            config_version: None,
            release: None,
            runbook: Some(runbook.to_owned()),
            inputs: Default::default(),
            plan_only: false,
        };
        self.start_workflow(install, &req).await
    }

    /// An install's health: its runner, its components' last deploys and
    /// its health-check actions.
    pub async fn install_health(&self, install: &str) -> Result<InstallHealth> {
        self.call::<ep::GetInstallHealth>(&[install], &()).await
    }

    /// What the newest drift check of an install's sandbox and of each
    /// component found.
    pub async fn install_drift(&self, install: &str) -> Result<InstallDrift> {
        self.call::<ep::GetInstallDrift>(&[install], &()).await
    }

    /// Starts a drift check (a plan that is never applied) of a component
    /// of an install, or of its `sandbox`.
    pub async fn check_drift(&self, install: &str, target: &str) -> Result<WorkflowInfo> {
        self.create_workflow(install, WorkflowKind::Drift, Some(target))
            .await
    }

    /// An install's components, each on or off.
    pub async fn install_components(&self, install: &str) -> Result<InstallComponents> {
        self.call::<ep::ListInstallComponents>(&[install], &())
            .await
    }

    /// Turns a toggleable component of an install on (`true`: it is
    /// deployed) or off (it and its dependents are torn down).
    pub async fn toggle_component(
        &self,
        install: &str,
        component: &str,
        on: bool,
    ) -> Result<ComponentToggled> {
        let (params, body) = ([install, component], ToggleComponent::default());
        if on {
            self.call::<ep::EnableInstallComponent>(&params, &body)
                .await
        } else {
            self.call::<ep::DisableInstallComponent>(&params, &body)
                .await
        }
    }

    /// Sets an install's own values for a component (`helm_values` for a
    /// helm_chart, `tf_vars` for a terraform_module; both empty clears
    /// them); with `deploy`, the component is deployed with them.
    pub async fn set_component_override(
        &self,
        install: &str,
        component: &str,
        req: &SetComponentOverride,
    ) -> Result<ComponentOverridden> {
        self.call::<ep::SetInstallComponentOverrides>(&[install, component], req)
            .await
    }

    /// Reports a check for an install from the vendor's own systems
    /// (what a component's `[health] required_checks` waits for).
    pub async fn push_check(
        &self,
        install: &str,
        name: &str,
        req: &PushCheck,
    ) -> Result<InstallCheck> {
        self.call::<ep::PushInstallCheck>(&[install, name], req)
            .await
    }

    /// The outputs of an install's sandbox and components.
    pub async fn install_outputs(&self, install: &str) -> Result<InstallOutputs> {
        self.call::<ep::GetInstallOutputs>(&[install], &()).await
    }

    /// The config versions of an app.
    pub async fn list_configs(&self, app: &str) -> Result<ConfigVersionList> {
        self.call::<ep::ListAppConfigs>(&[app], &()).await
    }

    /// One config version of an app; the latest for `None`.
    pub async fn get_config(&self, app: &str, version: Option<u32>) -> Result<ConfigVersionInfo> {
        let v = version.map_or_else(|| "latest".to_owned(), |v| v.to_string());
        let path = routes::with_id(routes::APP_CONFIG, &seg(app)).replace("{version}", &v);
        self.http.get(&path).await
    }

    /// The components of an app's latest config, dependencies first.
    pub async fn list_components(&self, app: &str) -> Result<ComponentList> {
        self.call::<ep::ListComponents>(&[app], &()).await
    }

    /// Creates an install of an app, with its runner; the answer holds the
    /// runner's token, shown only this once.
    pub async fn create_install(&self, req: &CreateInstall) -> Result<InstallCreated> {
        self.call::<ep::CreateInstall>(&[], req).await
    }

    /// The org's installs.
    pub async fn list_installs(&self) -> Result<InstallList> {
        self.call::<ep::ListInstalls>(&[], &()).await
    }

    /// One install, by name or id.
    pub async fn get_install(&self, install: &str) -> Result<InstallInfo> {
        self.call::<GetInstall>(&[install], &()).await
    }

    /// Renames an install and changes its approval mode (each when given);
    /// its id, runner and workflows stay. Admin only.
    pub async fn update_install(&self, install: &str, change: &EditInstall) -> Result<InstallInfo> {
        self.call::<UpdateInstall>(&[install], change).await
    }

    /// An install's workflows, newest first.
    pub async fn list_workflows(&self, install: &str) -> Result<WorkflowList> {
        self.call::<ep::ListInstallWorkflows>(&[install], &()).await
    }

    /// One workflow with its steps.
    pub async fn get_workflow(&self, id: &str) -> Result<WorkflowInfo> {
        self.call::<ep::GetWorkflow>(&[id], &()).await
    }

    /// The Terraform states of an install (versions and locks).
    pub async fn list_states(&self, install: &str) -> Result<StateList> {
        self.call::<ep::ListInstallStates>(&[install], &()).await
    }

    /// Releases a component's state lock by force.
    pub async fn force_unlock_state(
        &self,
        install: &str,
        component: &str,
    ) -> Result<StateUnlocked> {
        self.call::<ep::ForceUnlockState>(&[install, component], &())
            .await
    }

    /// Queues a job.
    pub async fn create_job(&self, job: &CreateJob) -> Result<JobInfo> {
        self.call::<ep::CreateJob>(&[], job).await
    }

    /// One job.
    pub async fn get_job(&self, id: &JobId) -> Result<JobInfo> {
        self.call::<ep::GetJob>(&[id.as_str()], &()).await
    }

    /// The org's jobs, newest first.
    pub async fn list_jobs(&self) -> Result<JobList> {
        self.call::<ep::ListJobs>(&[], &()).await
    }

    /// Cancels a job: a queued job at once, a running one through its runner.
    pub async fn cancel_job(&self, id: &JobId) -> Result<JobInfo> {
        self.call::<ep::CancelJob>(&[id.as_str()], &()).await
    }

    /// An install's stack in `format` (`vm`), with a new one-time token
    /// for its phone-home (the one before stops working).
    pub async fn install_stack(
        &self,
        install: &str,
        format: Option<&str>,
    ) -> Result<nuon_core::wire::InstallStack> {
        let mut req = self.http.request(
            reqwest::Method::GET,
            &routes::with_id(routes::INSTALL_STACK, &seg(install)),
        );
        if let Some(format) = format {
            req = req.query(&[("format", format)]);
        }
        self.http.send(req).await
    }

    /// Asks an install's runner to run `command` for its logs
    /// ([`DebugPurpose::Logs`]) or to debug; the runner decides. Follow the
    /// job's log for the answer; a refusal fails the job with the runner's
    /// reason.
    pub async fn request_debug(
        &self,
        install: &str,
        purpose: DebugPurpose,
        command: Vec<String>,
        timeout_secs: Option<u64>,
    ) -> Result<JobInfo> {
        let body = DebugRequest {
            command,
            purpose,
            timeout_secs,
        };
        self.http
            .post(
                &routes::with_id(routes::INSTALL_DEBUG, &seg(install)),
                &body,
                Duration::ZERO,
            )
            .await
    }

    /// A page of the org's audit trail after entry `after`; only `actor`'s
    /// entries when given.
    pub async fn list_audit(
        &self,
        after: u64,
        limit: u32,
        actor: Option<&str>,
    ) -> Result<AuditList> {
        let mut query = vec![("after", after.to_string()), ("limit", limit.to_string())];
        if let Some(a) = actor {
            query.push(("actor", a.to_owned()));
        }
        let req = self
            .http
            .request(reqwest::Method::GET, routes::AUDIT)
            .query(&query);
        self.http.send(req).await
    }

    /// The org's whole audit trail, or only the jobs of one runner or of
    /// one install's runner (`runner` or `install`), as NDJSON, written to
    /// `out` as it arrives. How many entries.
    pub async fn export_audit(
        &self,
        runner: Option<&str>,
        install: Option<&str>,
        out: &mut (dyn std::io::Write + Send),
    ) -> Result<u64> {
        let mut query = Vec::new();
        if let Some(r) = runner {
            query.push(("runner", r));
        }
        if let Some(i) = install {
            query.push(("install", i));
        }
        let req = self
            .http
            .request(reqwest::Method::GET, routes::AUDIT_EXPORT)
            .timeout(Duration::from_secs(3600))
            .query(&query);
        let mut resp = self.http.execute(req).await?;
        let url = resp.url().to_string();
        let mut lines = 0u64;
        while let Some(chunk) = resp.chunk().await.map_err(|source| Error::Connect {
            url: url.clone(),
            source,
        })? {
            lines += chunk.iter().filter(|b| **b == b'\n').count() as u64;
            out.write_all(&chunk)
                .map_err(|e| Error::Config(format!("cannot write the export: {e}")))?;
        }
        Ok(lines)
    }

    /// Checks the org's audit chain.
    pub async fn verify_audit(&self) -> Result<AuditVerification> {
        self.call::<ep::VerifyAudit>(&[], &()).await
    }

    /// Adds a webhook; the answer carries its signing secret, shown once.
    pub async fn create_webhook(
        &self,
        url: &str,
        events: Vec<WebhookEvent>,
    ) -> Result<WebhookCreated> {
        let body = CreateWebhook {
            url: url.to_owned(),
            events,
        };
        self.call::<ep::CreateWebhook>(&[], &body).await
    }

    /// The org's webhooks.
    pub async fn list_webhooks(&self) -> Result<WebhookList> {
        self.call::<ep::ListWebhooks>(&[], &()).await
    }

    /// Removes a webhook.
    pub async fn remove_webhook(&self, id: &WebhookId) -> Result<WebhookInfo> {
        self.call::<ep::RemoveWebhook>(&[id.as_str()], &()).await
    }

    /// The org's webhook deliveries, newest first; of one webhook when given.
    pub async fn list_deliveries(
        &self,
        webhook: Option<&WebhookId>,
        limit: u32,
    ) -> Result<DeliveryList> {
        let mut query = vec![("limit", limit.to_string())];
        if let Some(w) = webhook {
            query.push(("webhook", w.to_string()));
        }
        let req = self
            .http
            .request(reqwest::Method::GET, routes::WEBHOOK_DELIVERIES)
            .query(&query);
        self.http.send(req).await
    }

    /// A page of a job's log after `cursor` (0 for the start).
    pub async fn job_logs(&self, id: &JobId, after: u64) -> Result<LogPage> {
        let path = routes::with_id(routes::JOB_LOGS, id.as_str());
        let req = self
            .http
            .request(reqwest::Method::GET, &path)
            .query(&[("after", after.to_string())]);
        self.http.send(req).await
    }

    /// Follows a job's log live from `after` until the job has finished and
    /// every line was read. A broken connection is resumed from the last line
    /// read, so no line is lost or shown twice.
    pub fn follow_logs(&self, id: &JobId, after: u64) -> LogFollower {
        LogFollower {
            client: self.clone(),
            job: id.clone(),
            cursor: after,
            resp: None,
            buf: Vec::new(),
            ready: VecDeque::new(),
            done: false,
            failures: 0,
        }
    }
}

/// A live view of a job's log; see [`ControlClient::follow_logs`].
#[derive(Debug)]
pub struct LogFollower {
    client: ControlClient,
    job: JobId,
    cursor: u64,
    resp: Option<reqwest::Response>,
    buf: Vec<u8>,
    ready: VecDeque<LogEntry>,
    done: bool,
    failures: u32,
}

impl LogFollower {
    /// The cursor after the last line returned.
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// The next line, or `None` when the job has finished and its log was read.
    pub async fn next(&mut self) -> Result<Option<LogEntry>> {
        loop {
            if let Some(entry) = self.ready.pop_front() {
                self.cursor = entry.cursor;
                return Ok(Some(entry));
            }
            if self.done {
                return Ok(None);
            }
            if self.resp.is_none() {
                match self.open().await {
                    Ok(resp) => self.resp = Some(resp),
                    Err(e) => {
                        self.retry_or_fail(e).await?;
                        continue;
                    }
                }
            }
            let resp = self.resp.as_mut().expect("opened above");
            match resp.chunk().await {
                Ok(Some(chunk)) => {
                    self.failures = 0;
                    self.buf.extend_from_slice(&chunk);
                    self.parse_lines()?;
                }
                Ok(None) => {
                    // The server ends the stream only when the job has
                    // finished and every line was sent.
                    self.resp = None;
                    if !self.buf.is_empty() {
                        // A cut mid-line: drop the partial line and reopen from the cursor.
                        self.buf.clear();
                        continue;
                    }
                    self.done = true;
                }
                Err(e) => {
                    self.resp = None;
                    self.buf.clear();
                    let url = e.url().map(|u| u.to_string()).unwrap_or_default();
                    self.retry_or_fail(Error::Connect { url, source: e })
                        .await?;
                }
            }
        }
    }

    async fn open(&self) -> Result<reqwest::Response> {
        let http = &self.client.http;
        let path = routes::with_id(routes::JOB_LOGS, self.job.as_str());
        let req = http
            .client
            .get(http.url(&path))
            .bearer_auth(&http.config.token)
            .query(&[
                ("after", self.cursor.to_string()),
                ("follow", "true".to_string()),
            ]);
        http.execute(req).await
    }

    async fn retry_or_fail(&mut self, e: Error) -> Result<()> {
        // API errors (404, 401) are final; connection errors are retried for a while,
        // so a control-plane restart does not end a `--follow`.
        if matches!(e, Error::Api { .. }) || self.failures >= 60 {
            return Err(e);
        }
        self.failures += 1;
        tokio::time::sleep(Duration::from_millis(250 * u64::from(self.failures.min(8)))).await;
        Ok(())
    }

    fn parse_lines(&mut self) -> Result<()> {
        let mut start = 0;
        while let Some(pos) = self.buf[start..].iter().position(|b| *b == b'\n') {
            let line = &self.buf[start..start + pos];
            start += pos + 1;
            if line.is_empty() {
                continue;
            }
            let entry: LogEntry = serde_json::from_slice(line).map_err(|e| Error::Protocol {
                url: format!("log stream of {}", self.job),
                message: format!("bad log line: {e}"),
            })?;
            self.ready.push_back(entry);
        }
        self.buf.drain(..start);
        Ok(())
    }
}
