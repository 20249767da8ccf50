//! `nuon installs delete|forget|update-inputs|apply-pending|discard-pending|secrets
//! set` and `nuon apps delete`: the end of an install's life, and the
//! value changes that start the workflow Nuon starts for them (and what
//! becomes of them when it does not deploy them).

use std::time::Duration;

use clap::Subcommand;
use nuon_core::wire::{InputsUpdated, InstallSecrets, UpdateInputs};

use crate::deploy::{Watch, exit_of, watch};
use crate::output::{Render, emit, emit_with, for_machines, for_people};
use crate::{CliError, Global, client, parse_env};

/// The lifecycle verbs of `nuon installs`.
#[derive(Debug, Subcommand)]
pub(crate) enum LifecycleCommand {
    /// Delete an install: deprovision it (components torn down, sandbox
    /// destroyed), then remove it and revoke its runner.
    Delete {
        /// The install, by name or id.
        install: String,
        /// Follow the deprovision until the install is gone (or it fails).
        #[arg(long)]
        wait: bool,
        /// Do not ask: without it, a terminal asks for the install's name
        /// and anything else refuses.
        #[arg(long)]
        yes: bool,
    },
    /// Remove an install's record only. Nothing in the customer's cloud is
    /// destroyed: use it for an install whose cloud account is gone.
    Forget {
        /// The install, by name or id.
        install: String,
        /// Do not ask: without it, a terminal asks for the install's name
        /// and anything else refuses.
        #[arg(long)]
        yes: bool,
    },
    /// Change inputs and redeploy what reads them: the actions of the
    /// pre-update-inputs and post-update-inputs triggers run around a
    /// deploy of the components that read the changed inputs (and what
    /// depends on them). What will run is shown first.
    UpdateInputs {
        /// The install, by name or id.
        install: String,
        /// The new values.
        #[arg(value_name = "NAME=VALUE", value_parser = parse_env, required = true)]
        values: Vec<(String, String)>,
        /// Only show what would run.
        #[arg(long)]
        dry_run: bool,
        /// Follow the workflow to its end.
        #[arg(long)]
        wait: bool,
    },
    /// Deploy the install's pending values (changed by a workflow that was
    /// denied, failed or cancelled; `installs get` shows them): the
    /// components that do not run them yet are deployed again.
    ApplyPending {
        /// The install, by name or id.
        install: String,
        /// Follow the workflows to their end.
        #[arg(long)]
        wait: bool,
    },
    /// Drop the install's pending values: its inputs, secrets, toggles and
    /// overrides go back to what is deployed, and the components the
    /// change was for are deployed again with them.
    DiscardPending {
        /// The install, by name or id.
        install: String,
        /// Follow the workflows to their end.
        #[arg(long)]
        wait: bool,
    },
    /// An install's secrets.
    Secrets {
        #[command(subcommand)]
        command: SecretsCommand,
    },
}

/// `nuon installs secrets`.
#[derive(Debug, Subcommand)]
pub(crate) enum SecretsCommand {
    /// List the install's secrets: who holds each (the customer, in their
    /// cloud's secret store; or the vendor, sealed by the control plane),
    /// whether it is set, and where. Never a value.
    List {
        /// The install, by name or id.
        install: String,
    },
    /// Set a secret, read from standard input (or --from-file), and
    /// redeploy what reads it, as update-inputs does.
    Set {
        /// The install, by name or id.
        install: String,
        /// The secret's name.
        name: String,
        /// Read the value from this file (default: standard input).
        #[arg(long, value_name = "PATH", default_value = "-")]
        from_file: String,
        /// Only show what would run.
        #[arg(long)]
        dry_run: bool,
        /// Follow the workflow to its end.
        #[arg(long)]
        wait: bool,
    },
}

pub(crate) async fn lifecycle(g: &Global, command: &LifecycleCommand) -> Result<u8, CliError> {
    let c = client(g)?;
    match command {
        LifecycleCommand::Delete { install, wait, yes } => {
            let what = "destroys the install's components and sandbox in the customer's cloud, then removes it";
            crate::input::confirm_destroy(&c, install, "delete", what, *yes).await?;
            let wf = c.delete_install(install).await?;
            if !wait {
                emit_with(g, &wf, |wf| {
                    outln!(
                        "deprovisioning {install} (workflow {}); it is deleted when that succeeds",
                        wf.id
                    )
                })?;
                return Ok(0);
            }
            eprintln!("deprovisioning {install} (workflow {})", wf.id);
            // The workflow goes with the install: gone means deleted.
            let mut succeeded_polls = 0;
            loop {
                let gone = match c.get_workflow(wf.id.as_str()).await {
                    Ok(w) if w.status.is_active() => false,
                    // Succeeded: the install is removed right after.
                    Ok(w) if w.status == nuon_core::workflow::WorkflowStatus::Succeeded => {
                        let gone = matches!(c.get_install(install).await, Err(e) if e.status() == Some(404));
                        succeeded_polls += 1;
                        if !gone && succeeded_polls > 60 {
                            eprintln!(
                                "{install} is deprovisioned but still listed (the control plane's log says why): `nuon installs forget {install}` removes it"
                            );
                            return Ok(1);
                        }
                        gone
                    }
                    Ok(w) => {
                        for_machines(g, &w)?;
                        eprintln!(
                            "the deprovision ended {}: {install} is not deleted; see `nuon workflows get {}`, retry it with `nuon workflows retry {} --wait`",
                            w.status, w.id, w.id
                        );
                        return Ok(1);
                    }
                    Err(e) if e.status() == Some(404) => true,
                    Err(e) => return Err(e.into()),
                };
                if gone {
                    let doc = serde_json::json!({"install": install, "deleted": true});
                    emit_with(g, &doc, |_| outln!("{install} deprovisioned and deleted"))?;
                    return Ok(0);
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        LifecycleCommand::Forget { install, yes } => {
            let what = "removes the install's record, its workflows and its runner's token (nothing in the customer's cloud is destroyed)";
            crate::input::confirm_destroy(&c, install, "forget", what, *yes).await?;
            let removed = c.forget_install(install).await?;
            eprintln!("warning: {}", removed.warning);
            emit_with(g, &removed, |r| outln!("{} forgotten", r.install.name))?;
            Ok(0)
        }
        LifecycleCommand::UpdateInputs {
            install,
            values,
            dry_run,
            wait,
        } => {
            let req = UpdateInputs {
                inputs: values
                    .iter()
                    .map(|(k, v)| (k.clone(), serde_json::Value::String(v.clone())))
                    .collect(),
                secrets: Default::default(),
                dry_run: *dry_run,
            };
            update(g, &c, install, req, *wait).await
        }
        LifecycleCommand::ApplyPending { install, wait } => {
            let done = c.apply_pending(install).await?;
            resolved(g, &c, done, *wait).await
        }
        LifecycleCommand::DiscardPending { install, wait } => {
            let done = c.discard_pending(install).await?;
            resolved(g, &c, done, *wait).await
        }
        LifecycleCommand::Secrets {
            command: SecretsCommand::List { install },
        } => {
            emit(g, &c.install_secrets(install).await?)?;
            Ok(0)
        }
        LifecycleCommand::Secrets {
            command:
                SecretsCommand::Set {
                    install,
                    name,
                    from_file,
                    dry_run,
                    wait,
                },
        } => {
            let value = crate::input::read_secret(name, from_file)?;
            let req = UpdateInputs {
                inputs: Default::default(),
                secrets: [(name.clone(), value)].into(),
                dry_run: *dry_run,
            };
            update(g, &c, install, req, *wait).await
        }
    }
}

impl Render for InstallSecrets {
    fn render(&self) {
        outln!("secrets of {}:", self.install);
        for s in &self.secrets {
            let state = match (s.held_by.as_str(), s.set, &s.location) {
                ("customer", _, Some(at)) => format!("in the customer's account: {at}"),
                ("customer", _, None) => {
                    "entered by the customer in the install stack (not reported yet)".into()
                }
                (_, true, _) => "set (sealed by the control plane)".into(),
                (_, false, _) if s.required => "NOT SET (required)".into(),
                _ => "not set".into(),
            };
            outln!("  {:<24} {:<8} {state}", s.name, s.held_by);
        }
    }
}

/// What a change will run, for people.
fn show(u: &InputsUpdated) {
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.join(", ")
        }
    };
    let verb = if u.dry_run {
        "would redeploy"
    } else {
        "redeploys"
    };
    outln!("{verb}: {}", list(&u.redeploys));
    outln!("actions:   {}", list(&u.actions));
    if u.syncs_secrets {
        let verb = if u.dry_run { "would write" } else { "writes" };
        outln!("{verb} the secrets synced into Kubernetes again");
    }
    match &u.workflow {
        Some(w) => {
            outln!("workflow {} ({}):", w.id, w.status);
            for s in &w.steps {
                outln!("  {:<32} {}", s.name, s.status);
            }
        }
        None if !u.dry_run => outln!("nothing reads the changed values: no workflow started"),
        None => {}
    }
}

async fn update(
    g: &Global,
    c: &nuon_client::ControlClient,
    install: &str,
    req: UpdateInputs,
    wait: bool,
) -> Result<u8, CliError> {
    let u = c.update_inputs(install, &req).await?;
    for_people(g, || show(&u));
    if let (true, Some(w)) = (wait, &u.workflow) {
        let w = watch(c, w.id.as_str(), Watch::of(g)).await?;
        for_machines(g, &w)?;
        return Ok(exit_of(&w));
    }
    for_machines(g, &u)?;
    Ok(0)
}

/// What applying or discarding pending values did; with `wait`, each
/// workflow it started followed in turn (the exit of the first that did
/// not succeed).
async fn resolved(
    g: &Global,
    c: &nuon_client::ControlClient,
    done: nuon_core::wire::PendingResolved,
    wait: bool,
) -> Result<u8, CliError> {
    for_people(g, || outln!("{}", done.message));
    if !wait {
        for_machines(g, &done)?;
        return Ok(0);
    }
    let mut ended = Vec::new();
    for w in &done.workflows {
        let w = watch(c, w.id.as_str(), Watch::of(g)).await?;
        let code = exit_of(&w);
        ended.push(w);
        if code != 0 {
            for_machines(g, &ended)?;
            return Ok(code);
        }
    }
    for_machines(g, &ended)?;
    Ok(0)
}

/// `nuon apps delete APP`.
pub(crate) async fn delete_app(g: &Global, app: &str) -> Result<u8, CliError> {
    let removed = client(g)?.delete_app(app).await?;
    emit_with(g, &removed, |r| outln!("app {} deleted", r.name))?;
    Ok(0)
}
