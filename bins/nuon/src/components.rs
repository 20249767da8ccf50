//! `nuon installs components`: an install's components, turned on or
//! off, and the install's own values for them.

use nuon_client::ControlClient;
use nuon_core::wire::{InstallComponents, WorkflowInfo};

use crate::deploy::{Follow, Watch, exit_of, watch};
use crate::input::read_values;
use crate::output::{Render, emit, emit_with, for_machines, for_people};
use crate::{CliError, Global, client, table};

#[derive(Debug, clap::Subcommand)]
pub(crate) enum InstallComponentsCommand {
    /// Each component of the install: on or off, deployed or not.
    List {
        /// The install, by name or id.
        install: String,
    },
    /// Turn a toggleable component off: it (and what depends on it) is
    /// torn down, and deploys skip it until it is on again.
    Disable(ToggleArgs),
    /// Turn a toggleable component on again: it is deployed.
    Enable(ToggleArgs),
    /// Set the install's own values for a component, over the app
    /// config's: Helm values (YAML, deep-merged) for a helm_chart, a
    /// .tfvars file (read last) for a terraform_module. The component is
    /// deployed with them.
    Override(OverrideArgs),
}

/// What `nuon installs components enable|disable` take.
#[derive(Debug, clap::Args)]
pub(crate) struct ToggleArgs {
    /// The install, by name or id.
    pub(crate) install: String,
    /// The component.
    pub(crate) component: String,
    /// Follow the workflow it starts until it ends.
    #[arg(long)]
    pub(crate) wait: bool,
    /// With --wait, print the log lines of its jobs too.
    #[arg(long)]
    pub(crate) logs: bool,
}

/// What `nuon installs components override` takes.
#[derive(Debug, clap::Args)]
pub(crate) struct OverrideArgs {
    /// The install, by name or id.
    pub(crate) install: String,
    /// The component.
    pub(crate) component: String,
    /// A YAML file of Helm values (`-` for standard input).
    #[arg(long, value_name = "FILE", conflicts_with = "clear")]
    pub(crate) helm_values: Option<String>,
    /// A .tfvars file, HCL or a JSON object (`-` for standard input).
    #[arg(long, value_name = "FILE", conflicts_with = "clear")]
    pub(crate) tf_vars: Option<String>,
    /// Remove the install's overrides of the component: the config's
    /// values apply again.
    #[arg(long)]
    pub(crate) clear: bool,
    /// Keep them for the component's next deploy; deploy nothing now.
    #[arg(long)]
    pub(crate) no_deploy: bool,
    /// Follow the deploy it starts until it ends.
    #[arg(long)]
    pub(crate) wait: bool,
    /// With --wait, print the log lines of its jobs too.
    #[arg(long)]
    pub(crate) logs: bool,
}

/// `nuon installs components list|disable|enable`.
pub(crate) async fn install_components(
    g: &Global,
    command: &InstallComponentsCommand,
) -> Result<u8, CliError> {
    use InstallComponentsCommand as C;
    let client = client(g)?;
    let (a, on) = match command {
        C::List { install } => {
            emit(g, &client.install_components(install).await?)?;
            return Ok(0);
        }
        C::Override(a) => return set_override(g, &client, a).await,
        C::Disable(a) => (a, false),
        C::Enable(a) => (a, true),
    };
    let r = client
        .toggle_component(&a.install, &a.component, on)
        .await?;
    follow_or_say(
        g,
        &client,
        r.workflow.as_ref(),
        &r.message,
        Follow {
            wait: a.wait,
            logs: a.logs,
        },
        &r,
    )
    .await
}

/// With `follow.wait` and a workflow, says `message` and follows it to its
/// end (its logs too, with `follow.logs`); else prints `answer` (`--json`)
/// or the message.
async fn follow_or_say<T: serde::Serialize>(
    g: &Global,
    client: &ControlClient,
    workflow: Option<&WorkflowInfo>,
    message: &str,
    follow: Follow,
    answer: &T,
) -> Result<u8, CliError> {
    match (workflow, follow.wait) {
        (Some(wf), true) => {
            for_people(g, || outln!("{message}"));
            let how = Watch {
                logs: follow.logs,
                ..Watch::of(g)
            };
            let done = watch(client, wf.id.as_str(), how).await?;
            for_machines(g, &done)?;
            Ok(exit_of(&done))
        }
        _ => {
            emit_with(g, answer, |_| outln!("{message}"))?;
            Ok(0)
        }
    }
}

impl Render for InstallComponents {
    fn render(&self) {
        let rows = self
            .components
            .iter()
            .map(|c| {
                let state = match (&c.held_off_by, c.enabled) {
                    (Some(by), _) => format!("off (needs {by})"),
                    (None, true) => "on".into(),
                    (None, false) => "off".into(),
                };
                let overrides = match &c.overrides {
                    Some(o) if o.helm_values.is_some() => "helm values",
                    Some(o) if o.tf_vars.is_some() => "tf vars",
                    _ => "-",
                };
                let labels = if c.labels.is_empty() {
                    "-".to_owned()
                } else {
                    let pairs: Vec<String> =
                        c.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    pairs.join(",")
                };
                vec![
                    c.name.clone(),
                    c.kind.clone(),
                    state,
                    if c.toggleable { "yes" } else { "no" }.into(),
                    if c.deployed { "yes" } else { "no" }.into(),
                    overrides.into(),
                    labels,
                ]
            })
            .collect();
        table(
            &[
                "COMPONENT",
                "TYPE",
                "STATE",
                "TOGGLEABLE",
                "DEPLOYED",
                "OVERRIDES",
                "LABELS",
            ],
            rows,
        );
    }
}

/// `nuon installs components override`.
async fn set_override(
    g: &Global,
    client: &ControlClient,
    a: &OverrideArgs,
) -> Result<u8, CliError> {
    if !a.clear && a.helm_values.is_none() && a.tf_vars.is_none() {
        return Err(CliError::usage(
            "give --helm-values FILE (a helm_chart), --tf-vars FILE (a terraform_module), or --clear",
        ));
    }
    let req = nuon_core::wire::SetComponentOverride {
        helm_values: a
            .helm_values
            .as_deref()
            .map(|p| read_values("helm-values", p))
            .transpose()?,
        tf_vars: a
            .tf_vars
            .as_deref()
            .map(|p| read_values("tf-vars", p))
            .transpose()?,
        deploy: !a.no_deploy,
    };
    if !a.clear && req.override_().is_none() {
        return Err(CliError::usage(
            "the file is empty: to remove the install's overrides of the component, use --clear",
        ));
    }
    let r = client
        .set_component_override(&a.install, &a.component, &req)
        .await?;
    follow_or_say(
        g,
        client,
        r.workflow.as_ref(),
        &r.message,
        Follow {
            wait: a.wait,
            logs: a.logs,
        },
        &r,
    )
    .await
}
