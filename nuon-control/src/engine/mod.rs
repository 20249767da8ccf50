//! The workflow engine: one task that moves every active workflow forward,
//! one step at a time. It sits below the APIs: it takes a store, the
//! secrets box, the org signing keys and a [`Notifier`], and knows nothing
//! of HTTP; the API maps its [`EngineError`]s to answers.
//!
//! A workflow's steps run in order. A step is dispatched as a signed job to
//! the install's runner (`sync`, `terraform`, `helm`, `wasm` or `exec`),
//! with its templates rendered from the install's inputs, secrets and the
//! outputs the sandbox and earlier components reported. An apply that
//! needs an approval waits for one (unless its plan changes nothing). When
//! the job ends, its outputs are kept on the step (a plan's changes) and on
//! the install (an apply's Terraform outputs); a failure fails the
//! workflow, which can be retried from the failed step. Only the oldest
//! active workflow of an install moves; the others queue behind it.
//!
//! Every change to workflow state goes through this task: the commands
//! ([`Engine::approve`], [`Engine::deny`], [`Engine::cancel`],
//! [`Engine::retry`]) are messages to it, so two writers never race on a
//! step. [`Engine::start`] and [`Engine::job_ended`] wake it, and a
//! one-second tick covers anything missed.
//!
//! - [`rules`]: the pure rules (what runs next, what a denial skips, what
//!   a retry redoes), table-tested.
//! - `advance`: moving one workflow (a job ended, an approval came).
//! - `ends`: what a workflow writes beyond a step (its status and what
//!   goes with it, what an advance held back, the summaries of installs
//!   whose workflows ended, pending values settled).
//! - `acts`: the operator's commands.
//! - `dispatch`: the job each kind of step sends.
//! - [`render`]: templates, secrets and the checks before a start.

mod acts;
mod advance;
mod awaits;
pub(crate) use awaits::in_words;
pub(crate) mod cron;
mod destroy;
mod dispatch;
mod ends;
mod passes;
mod pulumi;
pub(crate) mod render;
mod rollout_seen;
mod rollouts;
pub(crate) use rollouts::RolloutAct;
pub(crate) mod rules;
mod secrets_sync;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use nuon_core::app::AppConfig;
use nuon_core::model::{Install, Workflow};
use nuon_core::wire::{BuildInfo, ErrorCode, ReleaseInfo, RunnerInfo};
use nuon_core::workflow::{self, StepKind, WorkflowKind};
use nuon_core::{AppId, ArtifactRef, JobId, JobStatus, OrgId, RunnerId, WorkflowId};
use tokio::sync::{mpsc, oneshot, watch};

use crate::keys::{JobKeys, KeyError};
use crate::secrets::SecretBox;
use crate::store::{Carried, NewWorkflow, Store, StoreError, Wake};

/// What the engine tells the rest of the control plane.
pub(crate) trait Notifier: Send + Sync + 'static {
    /// A job was queued for `runner`: its parked claims should look.
    fn job_queued(&self, runner: &RunnerId);
    /// A job was asked to stop: its runner's heartbeat and its log's
    /// followers should hear it.
    fn cancel_requested(&self, job: &JobId);
}

/// Why a command or a step failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EngineError {
    /// The request cannot be met as asked.
    #[error("{0}")]
    Invalid(String),
    /// A workflow, step, install, app or config is not there.
    #[error("{0}")]
    NotFound(String),
    /// The workflow is not in a state that takes this command.
    #[error("{message}")]
    Conflict {
        /// A stable code (`not_waiting`, `install_busy`, ...).
        code: ErrorCode,
        /// What, and what to do instead.
        message: String,
    },
    /// The engine has stopped.
    #[error("the control plane is shutting down; try again when it is back")]
    ShuttingDown,
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Stored data the engine cannot read, or cannot write.
    #[error("{0}")]
    Internal(String),
}

impl From<KeyError> for EngineError {
    fn from(e: KeyError) -> Self {
        match e {
            KeyError::NoOrg(org) => EngineError::NotFound(format!("org {org} not found")),
            KeyError::Store(e) => EngineError::Store(e),
            e @ (KeyError::Sealed(_) | KeyError::Sign(_)) => EngineError::Internal(e.to_string()),
        }
    }
}

impl EngineError {
    pub(crate) fn conflict(code: ErrorCode, message: impl Into<String>) -> Self {
        EngineError::Conflict {
            code,
            message: message.into(),
        }
    }

    /// Its stable code, as the API answers it.
    #[cfg(test)]
    pub(crate) fn code(&self) -> ErrorCode {
        match self {
            EngineError::Invalid(_) => ErrorCode::BadRequest,
            EngineError::NotFound(_) => ErrorCode::NotFound,
            EngineError::Conflict { code, .. } => *code,
            EngineError::ShuttingDown => ErrorCode::ShuttingDown,
            EngineError::Store(_) | EngineError::Internal(_) => ErrorCode::Internal,
        }
    }
}

type Result<T, E = EngineError> = std::result::Result<T, E>;

/// What an operator asks of a workflow (`all`: approve the later too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Act {
    Approve {
        all: bool,
    },
    Deny(rules::Denial),
    /// Plan the waiting apply again, then ask again.
    Replan,
    Cancel,
    Retry,
    /// Skip the failed step (and the rest of what it was doing), then go on.
    Skip,
}

struct Request {
    org: OrgId,
    workflow: WorkflowId,
    act: Act,
    step: Option<String>,
    /// Who asks: a person's email address, a service account's token id.
    by: String,
    reply: oneshot::Sender<Result<()>>,
}

enum Msg {
    Wake,
    Act(Request),
}

/// A workflow to start on an install: the API has found the install, its
/// app and the config version it runs.
pub(crate) struct Start<'a> {
    pub(crate) install: &'a Install,
    pub(crate) app_name: &'a str,
    pub(crate) config: &'a AppConfig,
    pub(crate) config_version: u32,
    pub(crate) kind: WorkflowKind,
    /// Only this component.
    pub(crate) component: Option<String>,
    /// A teardown of `component` alone, leaving what depends on it.
    pub(crate) only: bool,
    /// The action an `action` workflow runs.
    pub(crate) action: Option<String>,
    /// The runbook a `runbook` workflow runs.
    pub(crate) runbook: Option<String>,
    /// An action's run-time inputs.
    pub(crate) inputs: BTreeMap<String, String>,
    /// What starts it, when not a person: `cron` (with `fire`, the
    /// action and the time it was due), `enable-component` or
    /// `disable-component` (the actions of those triggers run around it).
    pub(crate) trigger: Option<&'static str>,
    /// A cron run's action and due time.
    pub(crate) fire: Option<(String, i64)>,
    /// The release it deploys: its config version and builds.
    pub(crate) release: Option<&'a ReleaseInfo>,
    /// A rollout's start: the workflow's id, and the save of the rollout
    /// with it marked started, stored with the workflow.
    pub(crate) rollout: Option<(WorkflowId, crate::store::RolloutSave)>,
    /// Plan and stop: only the syncs and plans run.
    pub(crate) plan_only: bool,
    /// An `update-inputs` deploy: of these components only, between the
    /// actions of the `pre-update-inputs` and `post-update-inputs`
    /// triggers.
    pub(crate) redeploy: Option<Vec<String>>,
    /// With `redeploy`: a changed secret is synced into Kubernetes, so the
    /// secrets sync (and its triggers' actions) runs first.
    pub(crate) sync_secrets: bool,
}

impl<'a> Start<'a> {
    /// A person's start of a `kind` workflow.
    pub(crate) fn new(
        install: &'a Install,
        app_name: &'a str,
        config: &'a AppConfig,
        config_version: u32,
        kind: WorkflowKind,
    ) -> Self {
        Start {
            install,
            app_name,
            config,
            config_version,
            kind,
            component: None,
            only: false,
            action: None,
            runbook: None,
            inputs: BTreeMap::new(),
            trigger: None,
            fire: None,
            release: None,
            rollout: None,
            plan_only: false,
            redeploy: None,
            sync_secrets: false,
        }
    }
}

/// The engine: its task's inbox and what it works with.
pub(crate) struct Engine {
    store: Arc<dyn Store>,
    secrets: Arc<SecretBox>,
    keys: Arc<JobKeys>,
    notifier: Arc<dyn Notifier>,
    leader: Arc<AtomicBool>,
    metrics: Arc<crate::ops::Metrics>,
    /// The runner health thresholds an await-runner step reads.
    ops: crate::ops::OpsConfig,
    runner_url: OnceLock<String>,
    tx: mpsc::UnboundedSender<Msg>,
    rx: Mutex<Option<mpsc::UnboundedReceiver<Msg>>>,
    /// The active rollouts the leader drives, as it last read or saved
    /// them: read again only when their stored version moved.
    rollouts: std::sync::Mutex<
        std::collections::HashMap<nuon_core::RolloutId, nuon_core::rollout::RolloutInfo>,
    >,
    /// What the leader's next pass moves.
    touched: std::sync::Mutex<passes::Touched>,
    /// The workflows this engine ended since its pass began: the pass
    /// knows which of those it moved ended without reading them again.
    ended_here: std::sync::Mutex<std::collections::HashSet<nuon_core::WorkflowId>>,
    /// The installs one of whose workflows ended, with the revision their
    /// summary has after it (none when unknown), whose summaries are to be
    /// made again ([`Engine::make_summaries`]).
    unsummed: std::sync::Mutex<Vec<(OrgId, nuon_core::InstallId, Option<i64>)>>,
    /// What never changes once stored, as read: config versions (opened
    /// and parsed), apps' and orgs' names, releases' builds.
    kept: std::sync::Mutex<render::Kept>,
    /// The workflows the leader's last advance left waiting on a job still
    /// queued or running, with that job: a timed pass looks at them only
    /// when the job ended ([`passes::Waiting`]).
    waiting: std::sync::Mutex<passes::Waiting>,
}

impl Engine {
    /// An engine that moves workflows while `leader` is set.
    pub(crate) fn new(
        store: Arc<dyn Store>,
        secrets: Arc<SecretBox>,
        keys: Arc<JobKeys>,
        notifier: Arc<dyn Notifier>,
        leader: Arc<AtomicBool>,
        metrics: Arc<crate::ops::Metrics>,
        ops: crate::ops::OpsConfig,
    ) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        Engine {
            store,
            secrets,
            keys,
            notifier,
            leader,
            metrics,
            ops,
            runner_url: OnceLock::new(),
            tx,
            rx: Mutex::new(Some(rx)),
            rollouts: Default::default(),
            touched: std::sync::Mutex::new(passes::Touched::everything()),
            ended_here: Default::default(),
            unsummed: Default::default(),
            kept: Default::default(),
            waiting: Default::default(),
        }
    }

    fn touched(&self) -> std::sync::MutexGuard<'_, passes::Touched> {
        self.touched.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn ended_here(
        &self,
    ) -> std::sync::MutexGuard<'_, std::collections::HashSet<nuon_core::WorkflowId>> {
        self.ended_here.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The Runner API's base URL as runners reach it (the state backend
    /// of Terraform jobs); set once, when serving starts.
    pub(crate) fn set_runner_url(&self, url: String) {
        let _ = self.runner_url.set(url);
    }

    /// The Runner API's base URL, when serving has set it.
    pub(crate) fn runner_url_known(&self) -> Option<&str> {
        self.runner_url.get().map(String::as_str)
    }

    fn runner_url(&self) -> &str {
        self.runner_url
            .get()
            .map(String::as_str)
            .unwrap_or("http://127.0.0.1:7401")
    }

    fn is_leader(&self) -> bool {
        self.leader.load(Ordering::Relaxed)
    }

    /// Something changed: look at every active workflow again, here.
    pub(crate) fn wake(&self) {
        self.touched().all = true;
        let _ = self.tx.send(Msg::Wake);
    }

    /// Something changed: look at every active workflow again, on
    /// whichever replica leads.
    pub(crate) fn wake_everywhere(&self) {
        self.wake();
        self.store.announce(Wake::Executor);
    }

    /// A workflow changed: move it, on whichever replica leads.
    pub(crate) fn touch(&self, org: &OrgId, wf: &WorkflowId) {
        self.touched_here(org.clone(), wf.clone());
        self.store.announce(Wake::Workflow(org.clone(), wf.clone()));
    }

    /// A workflow changed: move it, here.
    pub(crate) fn touched_here(&self, org: OrgId, wf: WorkflowId) {
        self.touched().workflows.insert((org, wf));
        let _ = self.tx.send(Msg::Wake);
    }

    /// A job ended: the step it ran moves on, on whichever replica leads.
    pub(crate) fn job_ended(&self, job: &JobId) {
        self.job_ended_here(job.clone());
        self.store.announce(Wake::JobEnded(job.clone()));
    }

    /// A job ended: the step it ran moves on, here.
    pub(crate) fn job_ended_here(&self, job: JobId) {
        self.touched().jobs.insert(job);
        let _ = self.tx.send(Msg::Wake);
    }

    /// Plans a workflow, checks it can run (its components deploy, they
    /// are built, the inputs and secrets its templates read have values)
    /// and queues it on the install.
    pub(crate) async fn start(&self, org: &OrgId, s: Start<'_>) -> Result<Workflow> {
        let config = s.config;
        let app = s.app_name;
        if s.kind == WorkflowKind::Drift {
            match s.component.as_deref().map(|c| (c, config.component(c))) {
                None => {
                    return Err(EngineError::Invalid(
                        "a drift check names a component (\"component\"), or \"sandbox\"".into(),
                    ));
                }
                Some((workflow::SANDBOX, _)) if config.sandbox.is_none() => {
                    return Err(EngineError::Invalid(format!(
                        "app {app} has no sandbox to check for drift"
                    )));
                }
                Some((_, Some(c))) if c.kind() == nuon_core::app::ComponentKind::ContainerImage => {
                    return Err(EngineError::Invalid(format!(
                        "component {} is a container_image: it has no plan to check for drift",
                        c.name
                    )));
                }
                _ => {}
            }
        }
        if let Some(c) = &s.component
            && config.component(c).is_none()
            && !(s.kind == WorkflowKind::Drift && c == workflow::SANDBOX)
        {
            let names: Vec<&str> = config.components.iter().map(|c| c.name.as_str()).collect();
            let sandbox = if c == "sandbox" {
                "; the sandbox goes with the whole install: `nuon installs provision` or `deprovision`"
            } else {
                ""
            };
            return Err(EngineError::NotFound(format!(
                "app {app} has no component {c:?}{} (components: {}){sandbox}",
                nuon_core::app::did_you_mean(c, names.iter().copied()),
                names.join(", ")
            )));
        }
        let only = if s.kind == WorkflowKind::Action {
            let Some(name) = &s.action else {
                return Err(EngineError::Invalid(
                    "an action workflow names its action (\"action\")".into(),
                ));
            };
            let Some(action) = config.actions.iter().find(|a| &a.name == name) else {
                let names: Vec<&str> = config.actions.iter().map(|a| a.name.as_str()).collect();
                return Err(EngineError::NotFound(format!(
                    "app {app} has no action {name:?}{} (actions: {})",
                    nuon_core::app::did_you_mean(name, names.iter().copied()),
                    names.join(", ")
                )));
            };
            let by = match (s.fire.is_some(), s.trigger) {
                (true, _) => "cron",
                (false, Some(t @ ("role-enabled" | "role-disabled"))) => t,
                _ => "manual",
            };
            if !action.triggers.iter().any(|t| t.kind == by) {
                return Err(EngineError::Invalid(format!(
                    "action {name:?} has no manual trigger: add `[[triggers]] type = \"manual\"` to run it by hand"
                )));
            }
            Some(name.clone())
        } else if s.kind == WorkflowKind::Runbook {
            let Some(name) = &s.runbook else {
                return Err(EngineError::Invalid(
                    "a runbook workflow names its runbook (\"runbook\")".into(),
                ));
            };
            if !config.runbooks.iter().any(|r| &r.name == name) {
                let names: Vec<&str> = config.runbooks.iter().map(|r| r.name.as_str()).collect();
                return Err(EngineError::NotFound(format!(
                    "app {app} has no runbook {name:?}{} (runbooks: {})",
                    nuon_core::app::did_you_mean(name, names.iter().copied()),
                    if names.is_empty() {
                        "none".into()
                    } else {
                        names.join(", ")
                    }
                )));
            }
            Some(name.clone())
        } else if s.action.is_some() || s.runbook.is_some() {
            return Err(EngineError::Invalid(
                "\"action\" is for action workflows (kind \"action\"), \"runbook\" for runbook workflows (kind \"runbook\")".into(),
            ));
        } else {
            s.component.clone()
        };
        let inputs = match (&only, s.kind) {
            (Some(a), WorkflowKind::Action) => {
                render::action_inputs(config, a, &s.inputs).map_err(EngineError::Invalid)?
            }
            (Some(r), WorkflowKind::Runbook) => {
                render::runbook_inputs(config, r, &s.inputs).map_err(EngineError::Invalid)?
            }
            _ if !s.inputs.is_empty() => {
                return Err(EngineError::Invalid(
                    "\"inputs\" are the run-time inputs of an action (kind \"action\") or a runbook (kind \"runbook\"); an install's inputs are set with `nuon installs inputs set`".into(),
                ));
            }
            _ => BTreeMap::new(),
        };
        let install = s.install;
        let mut steps = workflow::plan_with(
            config,
            s.kind,
            install.approval == nuon_core::model::ApprovalMode::Prompt,
            only.as_deref(),
            !s.only,
        );
        if let (Some(c), Some(trigger)) = (&only, s.trigger) {
            let mut around = workflow::trigger_steps(config, &format!("pre-{trigger}"), Some(c));
            around.append(&mut steps);
            around.extend(workflow::trigger_steps(
                config,
                &format!("post-{trigger}"),
                Some(c),
            ));
            steps = around;
        }
        let mut trigger = s.trigger;
        if s.plan_only {
            if matches!(
                s.kind,
                WorkflowKind::Action | WorkflowKind::Drift | WorkflowKind::Runbook
            ) || s.fire.is_some()
            {
                return Err(EngineError::Invalid(
                    "plan_only is for provision, deploy, teardown, deprovision and reprovision workflows".into(),
                ));
            }
            steps.retain(|step| workflow::plans_only(step.kind));
            trigger = Some(workflow::PLAN_ONLY);
        }
        if let Some(names) = &s.redeploy {
            steps.retain(|step| {
                step.kind != StepKind::Action
                    && step.target.as_ref().is_some_and(|t| names.contains(t))
            });
            let mut around = workflow::trigger_steps(config, "pre-update-inputs", None);
            if s.sync_secrets {
                around.extend(workflow::secrets_sync_steps(config));
            }
            around.append(&mut steps);
            around.extend(workflow::trigger_steps(config, "post-update-inputs", None));
            steps = around;
            trigger = Some(workflow::UPDATE_INPUTS);
        }
        if !workflow::destroys_all(s.kind) {
            render::skip_turned_off(config, install, only.as_deref(), &mut steps)
                .map_err(EngineError::Invalid)?;
        }
        if steps.is_empty() {
            return Err(EngineError::Invalid(format!(
                "a {:?} workflow of app {app} has no steps: the app has no sandbox and no components",
                s.kind
            )));
        }
        let mut targets = BTreeSet::new();
        let mut problems = Vec::new();
        for step in steps.iter().filter(|s| s.skipped.is_none()) {
            match (step.kind, &step.target) {
                (StepKind::SandboxSync, _) => {
                    targets.insert("sandbox".to_owned());
                }
                (StepKind::Sync, Some(c)) => {
                    if let Some(comp) = config.component(c)
                        && let Err(e) = render::deployable(comp)
                    {
                        problems.push(e);
                    }
                    targets.insert(c.clone());
                }
                _ => {}
            }
        }
        if !problems.is_empty() {
            return Err(EngineError::Invalid(problems.join("; ")));
        }
        let builds = match s.release {
            Some(r) => r.builds.clone(),
            None => {
                self.latest_builds(org, &install.app_id, s.config_version)
                    .await?
            }
        };
        let unbuilt: Vec<&str> = targets
            .iter()
            .filter(|t| !builds.contains_key(*t))
            .map(String::as_str)
            .collect();
        if !unbuilt.is_empty() {
            return Err(EngineError::conflict(
                ErrorCode::NotBuilt,
                format!(
                    "config version {} of app {app} has no successful build of {}: run `nuon builds create --app {app} --wait` first",
                    s.config_version,
                    unbuilt.join(", "),
                ),
            ));
        }
        // What cannot be rendered from (a stack output changed in the store)
        // refuses the workflow before it starts.
        let org_name = self.org_name(org).await?;
        let owner = render::Owner {
            org: &org_name,
            app,
            secrets: &config.secrets,
        };
        let ctx = render::render_context(&self.secrets, org, install, owner, false)
            .map_err(|e| EngineError::conflict(ErrorCode::InstallValuesRefused, e))?;
        let problems = render::precheck_templates(config, &ctx, &targets);
        if !problems.is_empty() {
            return Err(EngineError::Invalid(format!(
                "the workflow would fail before it starts: {}",
                problems.join("; ")
            )));
        }
        // The install runs the workflow's config version from now: the
        // store sets it with the workflow, in one transaction.
        let (id, rollout) = match s.rollout {
            Some((id, r)) => (id, Some(r)),
            None => (WorkflowId::generate(), None),
        };
        let wf = self
            .store
            .create_workflow(
                org,
                NewWorkflow {
                    id,
                    install_id: install.id.clone(),
                    kind: s.kind,
                    config_version: s.config_version,
                    component: only,
                    steps,
                    inputs,
                    trigger: trigger.map(str::to_owned),
                    fire: s.fire,
                    release: s.release.map(|r| r.id.clone()),
                    rollout,
                },
            )
            .await?;
        tracing::info!(workflow = %wf.id, install = %install.id, kind = ?wf.kind, "workflow created");
        self.touch(org, &wf.id);
        Ok(wf)
    }

    /// Runs until `shutdown` turns true.
    pub(crate) async fn run(&self, mut shutdown: watch::Receiver<bool>) {
        let Some(mut rx) = self.rx.lock().expect("engine lock").take() else {
            return;
        };
        let mut last_full: Option<std::time::Instant> = None;
        loop {
            self.pass(&mut last_full).await;
            let msg = tokio::select! {
                m = rx.recv() => m,
                _ = tokio::time::sleep(Duration::from_secs(1)) => Some(Msg::Wake),
                _ = shutdown.wait_for(|down| *down) => None,
            };
            let Some(msg) = msg else { return };
            let mut next = Some(msg);
            while let Some(m) = next.take() {
                if let Msg::Act(r) = m {
                    let result = self.act(&r).await;
                    // The answer shows what the act set off (the approved
                    // step dispatched, the skipped ones, the end).
                    if result.is_ok() {
                        if self.is_leader() {
                            self.touched_here(r.org.clone(), r.workflow.clone());
                            self.pass(&mut last_full).await;
                        } else {
                            // The leader drives what the act set off.
                            self.touch(&r.org, &r.workflow);
                        }
                    }
                    let _ = r.reply.send(result);
                }
                next = rx.try_recv().ok();
            }
        }
    }

    /// The artifact of the newest successful build of each component (and
    /// `sandbox`) of a config version.
    pub(crate) async fn latest_builds(
        &self,
        org: &OrgId,
        app: &AppId,
        version: u32,
    ) -> Result<BTreeMap<String, ArtifactRef>> {
        let mut out = BTreeMap::new();
        for b in self.store.list_builds(org, app).await? {
            if let BuildInfo {
                status: JobStatus::Succeeded,
                artifact: Some(a),
                config_version,
                component,
                ..
            } = b
                && config_version == version
            {
                out.entry(component).or_insert(a);
            }
        }
        Ok(out)
    }

    /// What moving a workflow needs about its install and app.
    async fn load(
        &self,
        org: &OrgId,
        wf: Workflow,
        install: Option<Install>,
        runner: Option<RunnerInfo>,
    ) -> Result<Ctx> {
        let install = install
            .ok_or_else(|| EngineError::NotFound(format!("install {} is gone", wf.install_id)))?;
        let (app_name, config) = self
            .app_config(org, &install.app_id, wf.config_version)
            .await?;
        let builds = match &wf.release_id {
            Some(id) => self.release_builds(org, id).await?,
            None => {
                self.latest_builds(org, &install.app_id, wf.config_version)
                    .await?
            }
        };
        Ok(Ctx {
            org: org.clone(),
            org_name: self.org_name(org).await?,
            wf,
            install,
            app_name,
            config,
            builds,
            runner: Some(runner),
            ended: None,
            carried: Default::default(),
        })
    }
}

/// A workflow being moved, with its install and app.
struct Ctx {
    org: OrgId,
    org_name: String,
    wf: Workflow,
    install: Install,
    app_name: String,
    config: Arc<AppConfig>,
    builds: BTreeMap<String, ArtifactRef>,
    /// The install's runner as read with the workflow, until the first
    /// look at it takes it (a later look reads it again): `Some(None)`
    /// when the install has none.
    runner: Option<Option<RunnerInfo>>,
    /// The job of a step this advance found ended, and when it ended.
    ended: Option<(JobId, Option<i64>)>,
    /// A write of the workflow held back for the next one to carry (see
    /// [`Engine::write_carried`]): behind a lock, as the helpers that
    /// write first what it holds see the workflow by shared reference.
    carried: Mutex<Option<Carried>>,
}

impl Ctx {
    /// Holds `w` back for the workflow's next write to carry; nothing may
    /// be held already (what was is written first: [`Engine::write_carried`]).
    fn carry(&self, w: Carried) {
        let mut held = self.carried.lock().unwrap_or_else(|e| e.into_inner());
        debug_assert!(held.is_none(), "a carried write was overwritten");
        *held = Some(w);
    }

    /// What is held back for the next write, taken: that write carries it.
    fn take_carried(&self) -> Option<Carried> {
        (self.carried.lock().unwrap_or_else(|e| e.into_inner())).take()
    }
}
