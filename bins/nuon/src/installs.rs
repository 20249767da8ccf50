//! `nuon installs`: an app's installs, their inputs, labels, components,
//! checks, state and workflows.

use std::collections::BTreeMap;
use std::path::Path;

use clap::Subcommand;
use nuon_core::model::ApprovalMode;
use nuon_core::wire::{CreateInstall, InstallInfo, StateList, SyncStatus};

use crate::deploy::{Follow, start_with};
use crate::input::{read_secret, read_values};
use crate::output::{Render, emit, emit_with};

use crate::{CliError, Global, client, fmt_time, parse_env, table};

#[derive(Debug, Subcommand)]
pub(crate) enum InstallsCommand {
    /// Create an install of an app, with its runner.
    Create {
        /// The app, by name or id.
        #[arg(long)]
        app: String,
        /// Unique in the org.
        #[arg(long)]
        name: String,
        /// An input value (repeatable); read as the input's type.
        #[arg(long = "input", value_name = "NAME=VALUE", value_parser = parse_env)]
        inputs: Vec<(String, String)>,
        /// A secret value (repeatable). Never shown again. Prefer
        /// --secret-file: a value here stays in your shell's history.
        #[arg(long = "secret", value_name = "NAME=VALUE", value_parser = parse_env)]
        secrets: Vec<(String, String)>,
        /// A secret read from a file (repeatable; one trailing newline is
        /// dropped), `-` for standard input.
        #[arg(long = "secret-file", value_name = "NAME=PATH", value_parser = parse_env)]
        secret_files: Vec<(String, String)>,
        /// `approve-all` (applies follow their plans) or `prompt` (each
        /// apply waits for `nuon workflows approve`).
        #[arg(long, default_value_t = ApprovalMode::ApproveAll, value_parser = ApprovalMode::from_config)]
        approval: ApprovalMode,
        /// A label (repeatable), which groups and rollouts select by.
        #[arg(long = "label", value_name = "KEY=VALUE", value_parser = nuon_core::labels::parse_label)]
        labels: Vec<(String, String)>,
        /// Start a toggleable component on or off (repeatable; the others
        /// as their default_enabled says), as `[component_toggles]` does.
        #[arg(long = "component", value_name = "NAME=on|off", value_parser = parse_toggle)]
        components: Vec<(String, bool)>,
        /// The install's own Helm values for a helm_chart component, a
        /// YAML file merged over the config's (repeatable; `-` for
        /// standard input), as an install file's `[components.NAME]`.
        #[arg(long = "helm-values", value_name = "COMPONENT=FILE", value_parser = parse_env)]
        helm_values: Vec<(String, String)>,
        /// The install's own Terraform variables for a terraform_module
        /// component, a .tfvars file read after the config's (repeatable).
        #[arg(long = "tf-vars", value_name = "COMPONENT=FILE", value_parser = parse_env)]
        tf_vars: Vec<(String, String)>,
    },
    /// Set (KEY=VALUE) or remove (KEY-) labels of an install.
    Label(crate::groups::LabelArgs),
    /// Invite a customer: a link to the installer page, where they set the
    /// inputs the app lets them set and get the install stack.
    Invite(crate::installers::InviteArgs),
    /// Groups of installs: a name and a label selector.
    Groups {
        #[command(subcommand)]
        command: crate::groups::GroupsCommand,
    },
    /// Provision: the sandbox, then every component in dependency order.
    Provision(WorkflowArgs),
    /// Deploy every component (or --component): the app's latest config,
    /// or a release (--release), or any config version (--config).
    Deploy(DeployArgs),
    /// Tear down every component (or --component), dependents first.
    Teardown(DestroyArgs),
    /// Tear down every component, then destroy the sandbox.
    Deprovision(DestroyArgs),
    /// Provision again.
    Reprovision(WorkflowArgs),
    /// The outputs of the install's sandbox and components.
    Outputs {
        /// The install, by name or id.
        install: String,
    },
    /// Run an action by hand (it needs a `manual` trigger).
    RunAction {
        /// The install, by name or id.
        install: String,
        /// The action.
        action: String,
        /// Follow it until it ends.
        #[arg(long)]
        wait: bool,
        /// With --wait, print its log too.
        #[arg(long)]
        logs: bool,
        /// A run-time input the action declares in its [[inputs]]
        /// (repeatable); its steps see it as an environment variable.
        #[arg(long = "input", value_name = "NAME=VALUE", value_parser = parse_env)]
        inputs: Vec<(String, String)>,
    },
    /// Drift: what the newest drift check of each component (and the
    /// sandbox) found, for one install or every install; --check starts a
    /// check (a plan that is never applied). Remediate with `nuon installs
    /// deploy INSTALL --component C`.
    Drift {
        /// The install, by name or id (default: every install of the org).
        install: Option<String>,
        /// Check this component (or `sandbox`) now.
        #[arg(long, value_name = "COMPONENT", requires = "install")]
        check: Option<String>,
        /// With --check, follow the check until it ends.
        #[arg(long, requires = "check")]
        wait: bool,
        /// With --wait, print its log too.
        #[arg(long, requires = "wait")]
        logs: bool,
    },
    /// The install's stack: what the customer applies once to run its
    /// runner (format vm: install.sh, a systemd unit and its settings),
    /// with a new one-time token for the runner's phone-home.
    Stack(crate::ops::StackArgs),
    /// Ask the install's runner for logs: it runs the command after -- (no
    /// shell) if its operator allows it (`nuon-runner run --debug-commands`)
    /// and the output is shown here.
    LogsRequest(crate::ops::DebugArgs),
    /// Ask the install's runner to run a debug command (after --, no
    /// shell); its operator decides (`nuon-runner run --debug-commands`),
    /// and a refusal exits 1 with the runner's reason.
    Debug(crate::ops::DebugArgs),
    /// Health: healthy, unhealthy or offline, from the install's runner,
    /// its components' last deploys and health probes, the checks they
    /// require, and its health-check actions (those with a cron trigger);
    /// every install of the org without INSTALL.
    Health {
        /// The install, by name or id (default: every install of the org).
        install: Option<String>,
    },
    /// Checks the vendor's own systems report for an install: what a
    /// component's `[health] required_checks` waits for.
    Checks {
        #[command(subcommand)]
        command: crate::health::ChecksCommand,
    },
    /// Run a runbook of the app: its steps (component deploys and
    /// teardowns, sandbox reprovisions, actions) as one workflow, in order,
    /// stopping at the first failure.
    RunRunbook {
        /// The install, by name or id.
        install: String,
        /// The runbook.
        runbook: String,
        /// Follow it until it ends.
        #[arg(long)]
        wait: bool,
        /// With --wait, print its log too.
        #[arg(long)]
        logs: bool,
        /// A run-time input the runbook declares in its [[input]]
        /// (repeatable); its actions' steps see it as an environment
        /// variable, and an action input of the same name gets it.
        #[arg(long = "input", value_name = "NAME=VALUE", value_parser = parse_env)]
        inputs: Vec<(String, String)>,
    },
    /// An install's components: list them, turn a toggleable one off or on.
    Components {
        #[command(subcommand)]
        command: crate::components::InstallComponentsCommand,
    },
    /// List the org's installs (those matching --selector), oldest first:
    /// all of them, or a page of them (--limit, then --after).
    List(crate::groups::ListArgs),
    /// Show one install (sensitive inputs and secrets only by name).
    Get {
        /// The install, by name or id.
        install: String,
    },
    /// What each step of a workflow would be given on this install,
    /// rendered with its values and real outputs (secrets as stand-ins;
    /// nothing runs). Exits 1 when a value does not render.
    Render {
        /// The install, by name or id.
        install: String,
        /// provision, deploy, teardown, deprovision or reprovision.
        #[arg(long, default_value = "deploy")]
        workflow: String,
    },
    /// The app's README rendered for this install, as Nuon renders it:
    /// what does not render is a warning (on stderr), and the README is
    /// then shown as written.
    Readme {
        /// The install, by name or id.
        install: String,
    },
    /// Rename an install or change its approval mode (admin). Its id,
    /// runner and workflows stay.
    Update {
        /// The install, by name or id.
        install: String,
        /// Its new name (unique in the org).
        #[arg(long)]
        name: Option<String>,
        /// `approve-all` (applies follow their plans) or `prompt` (each
        /// apply waits for `nuon workflows approve`).
        #[arg(long, value_parser = ApprovalMode::from_config)]
        approval: Option<ApprovalMode>,
    },
    /// An install's inputs.
    Inputs {
        #[command(subcommand)]
        command: InputsCommand,
    },
    #[command(flatten)]
    Lifecycle(crate::lifecycle::LifecycleCommand),
    /// An install's Terraform states (kept on the control plane).
    State {
        #[command(subcommand)]
        command: StateCommand,
    },
}

/// What the workflow commands of `nuon installs` take.
#[derive(Debug, clap::Args)]
pub(crate) struct WorkflowArgs {
    /// The install, by name or id.
    install: String,
    /// Only this component.
    #[arg(long)]
    component: Option<String>,
    /// Follow the workflow until it ends (or waits for an approval).
    #[arg(long)]
    wait: bool,
    /// With --wait, print the log lines of its jobs too.
    #[arg(long)]
    logs: bool,
    /// Plan and stop: the plans run (and their policies), nothing is
    /// applied or destroyed, and the install's state stays as it is.
    #[arg(long)]
    plan_only: bool,
}

impl WorkflowArgs {
    /// Whether to follow the workflow, and its logs.
    fn follow(&self) -> Follow {
        Follow {
            wait: self.wait,
            logs: self.logs,
        }
    }
}

/// A deploy's arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct DeployArgs {
    #[command(flatten)]
    workflow: WorkflowArgs,
    /// Deploy this release (`rel_…`, see `nuon releases list`): its config
    /// version and its builds.
    #[arg(long, value_name = "RELEASE", conflicts_with = "config")]
    release: Option<String>,
    /// Deploy this app config version with its newest builds (`nuon apps
    /// configs APP` lists them): back to any earlier version.
    #[arg(long = "config", value_name = "VERSION")]
    config: Option<u32>,
}

/// A teardown's or a deprovision's arguments.
#[derive(Debug, clap::Args)]
pub(crate) struct DestroyArgs {
    #[command(flatten)]
    workflow: WorkflowArgs,
    /// Destroy with this app config version (default: the one the install
    /// was deployed with): a fix synced and built since destroys what a
    /// broken version left.
    #[arg(long = "config", value_name = "VERSION")]
    config: Option<u32>,
    /// With --component, tear down that component alone, leaving the
    /// components that depend on it deployed (by default they are torn
    /// down first).
    #[arg(long, requires = "component")]
    only: bool,
    /// Do not ask: without it, a terminal asks for the install's name and
    /// anything else refuses (a --plan-only run destroys nothing and
    /// asks nothing).
    #[arg(long)]
    yes: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum StateCommand {
    /// Each component's state: versions kept, and who holds its lock.
    List {
        /// The install, by name or id.
        install: String,
    },
    /// Release a component's state lock by force, when the run that took it
    /// died (say who held it first, with `state list`).
    Unlock {
        /// The install, by name or id.
        install: String,
        /// The component (or `sandbox`).
        #[arg(long)]
        component: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum InputsCommand {
    /// Set some inputs; the others keep their values.
    Set {
        /// The install, by name or id.
        install: String,
        /// NAME=VALUE, read as the input's type.
        #[arg(required = true, value_name = "NAME=VALUE", value_parser = parse_env)]
        values: Vec<(String, String)>,
    },
}

fn values(pairs: &[(String, String)]) -> BTreeMap<String, serde_json::Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
        .collect()
}

impl Render for InstallInfo {
    fn render(&self) {
        let i = self;
        outln!("id:       {}", i.id);
        outln!("name:     {}", i.name);
        match &i.app_name {
            Some(name) => outln!(
                "app:      {name} ({}, config v{})",
                i.app_id,
                i.config_version
            ),
            None => outln!("app:      {} (config v{})", i.app_id, i.config_version),
        }
        outln!("runner:   {}", i.runner_id);
        outln!("state:    {}", i.state);
        if let Some(h) = i.health {
            match i.sync {
                Some(SyncStatus::OutOfSync) => outln!(
                    "health:   {h}, out of sync (a component's last change was not applied: `nuon installs health {}`)",
                    i.name
                ),
                _ => outln!("health:   {h}"),
            }
        }
        if let Some(r) = &i.release_id {
            outln!("release:  {r}");
        }
        if let Some(p) = &i.pending {
            outln!("pending:  {}", p.summary());
            outln!(
                "          apply with `{}`, or go back to what is deployed with `{}`",
                p.apply,
                p.discard
            );
        }
        outln!("approval: {}", i.approval);
        if !i.labels.is_empty() {
            outln!("labels:   {}", crate::groups::labels_text(&i.labels));
        }
        // Who set an input: the customer on the installer page, or the vendor.
        let by = |k: &str| {
            if i.customer_inputs.iter().any(|c| c == k) {
                "  (set by the customer)"
            } else {
                ""
            }
        };
        for (k, v) in &i.inputs {
            let v = match v {
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            outln!("input:    {k} = {v}{}", by(k));
        }
        for k in &i.sensitive_inputs {
            outln!("input:    {k} = (sensitive, set){}", by(k));
        }
        for k in &i.secrets {
            outln!("secret:   {k} (set)");
        }
    }
}

pub(crate) async fn installs(g: &Global, command: &InstallsCommand) -> Result<u8, CliError> {
    use nuon_core::workflow::WorkflowKind;
    let (kind, a) = match command {
        InstallsCommand::Provision(a) => (WorkflowKind::Provision, a),
        InstallsCommand::Deploy(d) => {
            let release = match &d.release {
                Some(r) => Some(r.parse::<nuon_core::ReleaseId>().map_err(|_| {
                    CliError::usage(format!(
                        "--release {r:?} is not a release id (`rel_…`; `nuon releases list` shows them)"
                    ))
                })?),
                None => None,
            };
            let a = &d.workflow;
            let req = nuon_core::wire::CreateWorkflow {
                kind: WorkflowKind::Deploy,
                component: a.component.clone(),
                action: None,
                only: false,
                config_version: d.config,
                release,
                runbook: None,
                inputs: Default::default(),
                plan_only: a.plan_only,
            };
            return start_with(g, &a.install, req, a.follow()).await;
        }
        InstallsCommand::Teardown(a) | InstallsCommand::Deprovision(a) => {
            let kind = if matches!(command, InstallsCommand::Teardown(_)) {
                WorkflowKind::Teardown
            } else {
                WorkflowKind::Deprovision
            };
            let w = &a.workflow;
            if !w.plan_only {
                let (verb, what) = match kind {
                    WorkflowKind::Teardown => (
                        "teardown",
                        "destroys what the install's components run in the customer's cloud",
                    ),
                    _ => (
                        "deprovision",
                        "destroys the install's components and sandbox in the customer's cloud",
                    ),
                };
                crate::input::confirm_destroy(&client(g)?, &w.install, verb, what, a.yes).await?;
            }
            let req = nuon_core::wire::CreateWorkflow {
                kind,
                component: w.component.clone(),
                action: None,
                only: a.only,
                config_version: a.config,
                release: None,
                runbook: None,
                inputs: Default::default(),
                plan_only: w.plan_only,
            };
            return start_with(g, &w.install, req, w.follow()).await;
        }
        InstallsCommand::Reprovision(a) => (WorkflowKind::Reprovision, a),
        InstallsCommand::Outputs { install } => return crate::deploy::outputs(g, install).await,
        InstallsCommand::RunAction {
            install,
            action,
            wait,
            logs,
            inputs,
        } => {
            let req = nuon_core::wire::CreateWorkflow {
                kind: WorkflowKind::Action,
                component: None,
                action: Some(action.clone()),
                only: false,
                config_version: None,
                release: None,
                runbook: None,
                inputs: inputs.iter().cloned().collect(),
                plan_only: false,
            };
            let follow = Follow {
                wait: *wait,
                logs: *logs,
            };
            return start_with(g, install, req, follow).await;
        }
        InstallsCommand::Components { command } => {
            return crate::components::install_components(g, command).await;
        }
        InstallsCommand::Health { install } => {
            return crate::health::health(g, install.as_deref()).await;
        }
        InstallsCommand::Checks { command } => {
            return crate::health::checks(g, command).await;
        }
        InstallsCommand::Stack(args) => {
            return crate::ops::stack(g, args).await;
        }
        InstallsCommand::LogsRequest(args) => {
            return crate::ops::debug_request(g, nuon_core::wire::DebugPurpose::Logs, args).await;
        }
        InstallsCommand::Debug(args) => {
            return crate::ops::debug_request(g, nuon_core::wire::DebugPurpose::Debug, args).await;
        }
        InstallsCommand::RunRunbook {
            install,
            runbook,
            wait,
            logs,
            inputs,
        } => {
            let req = nuon_core::wire::CreateWorkflow {
                kind: WorkflowKind::Runbook,
                component: None,
                action: None,
                only: false,
                config_version: None,
                release: None,
                runbook: Some(runbook.clone()),
                inputs: inputs.iter().cloned().collect(),
                plan_only: false,
            };
            let follow = Follow {
                wait: *wait,
                logs: *logs,
            };
            return start_with(g, install, req, follow).await;
        }
        InstallsCommand::Drift {
            install,
            check,
            wait,
            logs,
        } => {
            if let (Some(i), Some(target)) = (install, check) {
                let req = nuon_core::wire::CreateWorkflow {
                    kind: WorkflowKind::Drift,
                    component: Some(target.clone()),
                    action: None,
                    only: false,
                    config_version: None,
                    release: None,
                    runbook: None,
                    inputs: Default::default(),
                    plan_only: false,
                };
                let follow = Follow {
                    wait: *wait,
                    logs: *logs,
                };
                return start_with(g, i, req, follow).await;
            }
            return crate::health::drift(g, install.as_deref()).await;
        }
        other => return installs_other(g, other).await,
    };
    let req = nuon_core::wire::CreateWorkflow {
        kind,
        component: a.component.clone(),
        action: None,
        only: false,
        config_version: None,
        release: None,
        runbook: None,
        inputs: Default::default(),
        plan_only: a.plan_only,
    };
    start_with(g, &a.install, req, a.follow()).await
}

async fn installs_other(g: &Global, command: &InstallsCommand) -> Result<u8, CliError> {
    let client = client(g)?;
    match command {
        InstallsCommand::Create {
            app,
            name,
            inputs,
            secrets,
            secret_files,
            approval,
            labels,
            components,
            helm_values,
            tf_vars,
        } => {
            let mut overrides: BTreeMap<String, nuon_core::wire::ComponentOverride> =
                BTreeMap::new();
            for (name, path) in helm_values {
                overrides.entry(name.clone()).or_default().helm_values =
                    Some(read_values("helm-values", path)?);
            }
            for (name, path) in tf_vars {
                overrides.entry(name.clone()).or_default().tf_vars =
                    Some(read_values("tf-vars", path)?);
            }
            let mut all: BTreeMap<String, String> = secrets.iter().cloned().collect();
            for (secret, path) in secret_files {
                all.insert(secret.clone(), read_secret(secret, path)?);
            }
            let created = client
                .create_install(&CreateInstall {
                    app: app.clone(),
                    name: name.clone(),
                    inputs: values(inputs),
                    secrets: all,
                    approval: Some(*approval),
                    labels: labels.iter().cloned().collect(),
                    components: components.iter().cloned().collect(),
                    overrides,
                })
                .await?;
            emit_with(g, &created, |created| {
                created.install.render();
                // Where `nuon dev` keeps the vendor's artifacts, when it
                // runs here.
                let local_store = Path::new("nuon-data/vendor-store");
                let vendor = if local_store.is_dir() {
                    format!(" \\\n      --vendor-store ./{}", local_store.display())
                } else {
                    " \\\n      --vendor-store VENDOR_STORE    # the build runner's store".into()
                };
                // The customer's way first, as `nuon dev` does it: the
                // install's stack; then the runner by hand, with the token.
                eprintln!(
                    "\nIts runner is started by its install stack, applied where it runs (as `nuon dev` does):\n  {nuon} installs stack {name}\nOr start it here by hand; the runner token is shown only now:\n  NUON_RUNNER_TOKEN={} {} run --api {} --signing-key {} \\\n      --work-dir ./nuon-runner-{name}{vendor}",
                    created.runner_token,
                    crate::our_binary("nuon-runner"),
                    created
                        .runner_api_url
                        .as_deref()
                        .unwrap_or("RUNNER_API_URL"),
                    created.signing_public_key,
                    nuon = crate::our_binary("nuon"),
                    name = created.install.name,
                );
            })?;
        }
        InstallsCommand::Label(args) => return crate::groups::label(g, args).await,
        InstallsCommand::Invite(args) => return crate::installers::invite(g, args).await,
        InstallsCommand::Lifecycle(command) => {
            return crate::lifecycle::lifecycle(g, command).await;
        }
        InstallsCommand::Groups { command } => return crate::groups::groups(g, command).await,
        InstallsCommand::List(args) => crate::groups::list(g, args).await?,
        InstallsCommand::Get { install } => {
            let i = client.get_install(install).await?;
            emit(g, &i)?;
        }
        InstallsCommand::Render { install, workflow } => {
            let r = client.render_install(install, workflow).await?;
            crate::render::show(g, None, &r.artifacts, &r.problems, &[])?;
            return Ok(u8::from(!r.problems.is_empty()));
        }
        InstallsCommand::Readme { install } => {
            let r = client.install_readme(install).await?;
            emit_with(g, &r, |r| {
                for w in &r.warnings {
                    eprintln!("warning: {w}");
                }
                println!("{}", r.rendered.trim_end());
            })?;
        }
        InstallsCommand::Update {
            install,
            name,
            approval,
        } => {
            if name.is_none() && approval.is_none() {
                return Err(CliError::usage(
                    "nothing to change: give --name NEW-NAME, --approval approve-all|prompt, or both",
                ));
            }
            let change = nuon_core::wire::EditInstall {
                name: name.clone(),
                approval: *approval,
            };
            let i = client.update_install(install, &change).await?;
            emit(g, &i)?;
        }
        InstallsCommand::State {
            command: StateCommand::List { install },
        } => {
            emit(g, &client.list_states(install).await?)?;
        }
        InstallsCommand::State {
            command: StateCommand::Unlock { install, component },
        } => {
            let r = client.force_unlock_state(install, component).await?;
            emit_with(g, &r, |r| outln!("{}", r.message))?;
        }
        InstallsCommand::Inputs {
            command: InputsCommand::Set { install, values: v },
        } => {
            let i = client.set_inputs(install, values(v)).await?;
            emit(g, &i)?;
        }
        InstallsCommand::Provision(_)
        | InstallsCommand::Deploy(_)
        | InstallsCommand::Teardown(_)
        | InstallsCommand::Deprovision(_)
        | InstallsCommand::Reprovision(_)
        | InstallsCommand::Outputs { .. }
        | InstallsCommand::RunAction { .. }
        | InstallsCommand::Components { .. }
        | InstallsCommand::Drift { .. }
        | InstallsCommand::RunRunbook { .. }
        | InstallsCommand::Stack(_)
        | InstallsCommand::LogsRequest(_)
        | InstallsCommand::Debug(_)
        | InstallsCommand::Checks { .. }
        | InstallsCommand::Health { .. } => unreachable!("handled by installs()"),
    }
    Ok(0)
}

impl Render for StateList {
    fn render(&self) {
        table(
            &["COMPONENT", "VERSION", "VERSIONS", "UPDATED", "LOCKED BY"],
            self.states
                .iter()
                .map(|s| {
                    vec![
                        s.component.clone(),
                        s.latest_version.map_or("-".into(), |v| v.to_string()),
                        s.versions.to_string(),
                        fmt_time(s.updated_at_ms),
                        s.lock.as_ref().map_or("-".into(), |l| {
                            let who = l.info.get("Who").and_then(|w| w.as_str()).unwrap_or("?");
                            format!("{who} ({})", l.id)
                        }),
                    ]
                })
                .collect(),
        );
    }
}

/// `NAME=on` or `NAME=off` (`true`/`false` too).
fn parse_toggle(s: &str) -> Result<(String, bool), String> {
    let (name, v) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?} is not NAME=on or NAME=off"))?;
    let on = match v {
        "on" | "true" => true,
        "off" | "false" => false,
        other => return Err(format!("{other:?} is not on or off (in {s:?})")),
    };
    Ok((name.to_owned(), on))
}
