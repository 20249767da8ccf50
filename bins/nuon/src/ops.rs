//! Operations commands: the org's audit trail (`nuon audit`), webhooks
//! (`nuon orgs webhooks`), and log and debug requests to an install's
//! runner (`nuon installs logs-request` and `nuon installs debug`).

use std::io::Write;

use clap::Subcommand;
use nuon_core::WebhookId;
use nuon_core::webhook::WebhookEvent;
use nuon_core::wire::{AuditList, DebugPurpose, DeliveryList, DeliveryStatus, WebhookList};

use crate::output::{Render, emit, emit_with, for_people};
use crate::{CliError, Global, client, fmt_time, table};

#[derive(Debug, Subcommand)]
pub(crate) enum AuditCommand {
    /// The org's audit trail, oldest first: every state-changing API call
    /// and every job, each entry chained to the one before by its hash.
    List {
        /// Entries after this number.
        #[arg(long, default_value_t = 0)]
        after: u64,
        /// How many.
        #[arg(long, default_value_t = 100)]
        limit: u32,
        /// Only this actor's (a token id, or runner:ID).
        #[arg(long)]
        actor: Option<String>,
    },
    /// The whole trail as NDJSON (to stdout, or --out FILE); with
    /// --install, what that install's runner ran: the file `nuon-runner
    /// audit compare` takes.
    Export {
        /// Only the jobs of this runner (name or id).
        #[arg(long, conflicts_with = "install")]
        runner: Option<String>,
        /// Only the jobs of this install's runner (name or id).
        #[arg(long)]
        install: Option<String>,
        /// Write to this file instead of stdout.
        #[arg(long)]
        out: Option<std::path::PathBuf>,
    },
    /// Check the chain from its first entry; names the first entry that
    /// does not chain (exit 1).
    Verify,
}

#[derive(Debug, Subcommand)]
pub(crate) enum WebhooksCommand {
    /// Add a webhook; its signing secret is shown only now.
    Add {
        /// Where deliveries are posted.
        url: String,
        /// What it is told of, comma-separated: approval_needed,
        /// workflow_failed, drift_detected, runner_unhealthy, runner_healthy,
        /// probe_failed, probe_recovered.
        #[arg(long, value_delimiter = ',', required = true)]
        events: Vec<WebhookEvent>,
    },
    /// The org's webhooks.
    List,
    /// Remove a webhook (its pending deliveries are given up).
    Remove {
        /// The webhook's id (`whk_…`).
        id: String,
    },
    /// Deliveries, newest first: event, status, tries, last error.
    Deliveries {
        /// Only this webhook's.
        #[arg(long)]
        webhook: Option<String>,
        /// How many.
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
}

fn webhook_id(raw: &str) -> Result<WebhookId, CliError> {
    raw.parse()
        .map_err(|e: nuon_core::IdError| CliError::usage(e.to_string()))
}

pub(crate) async fn audit(g: &Global, command: &AuditCommand) -> Result<u8, CliError> {
    let client = client(g)?;
    match command {
        AuditCommand::List {
            after,
            limit,
            actor,
        } => {
            let page = client.list_audit(*after, *limit, actor.as_deref()).await?;
            emit(g, &page)?;
            Ok(0)
        }
        AuditCommand::Export {
            runner,
            install,
            out,
        } => {
            let count = match out {
                Some(path) => {
                    let mut f = std::fs::File::create(path)
                        .map_err(|e| CliError::usage(format!("--out {}: {e}", path.display())))?;
                    let n = client
                        .export_audit(runner.as_deref(), install.as_deref(), &mut f)
                        .await?;
                    f.flush()
                        .map_err(|e| CliError::usage(format!("--out {}: {e}", path.display())))?;
                    n
                }
                None => {
                    let mut stdout = std::io::stdout();
                    client
                        .export_audit(runner.as_deref(), install.as_deref(), &mut stdout)
                        .await?
                }
            };
            eprintln!("{} exported", crate::plural(count as usize, "entry"));
            Ok(0)
        }
        AuditCommand::Verify => {
            let v = client.verify_audit().await?;
            emit_with(g, &v, |v| match &v.broken {
                Some(b) => {
                    outln!("BROKEN at entry {}: {}", b.entry, b.why);
                    outln!(
                        "{} chain before it",
                        crate::plural(v.entries as usize, "entry")
                    );
                }
                None => outln!(
                    "ok: {} chain; head {}",
                    crate::plural(v.entries as usize, "entry"),
                    v.head
                ),
            })?;
            Ok(if v.broken.is_some() { 1 } else { 0 })
        }
    }
}

pub(crate) async fn webhooks(g: &Global, command: &WebhooksCommand) -> Result<u8, CliError> {
    let client = client(g)?;
    match command {
        WebhooksCommand::Add { url, events } => {
            let created = client.create_webhook(url, events.clone()).await?;
            emit_with(g, &created, |created| {
                outln!("webhook: {}", created.webhook.id);
                outln!("secret:  {}", created.secret);
                eprintln!(
                    "\nThe secret is shown only now. Each delivery carries `{}: t=UNIX_SECONDS,v1=HEX`, HEX being HMAC-SHA256 under the secret over UNIX_SECONDS, '.' and the body.",
                    nuon_core::webhook::SIGNATURE_HEADER
                );
            })?;
        }
        WebhooksCommand::List => emit(g, &client.list_webhooks().await?)?,
        WebhooksCommand::Remove { id } => {
            let w = client.remove_webhook(&webhook_id(id)?).await?;
            emit_with(g, &w, |w| outln!("removed webhook {} ({})", w.id, w.url))?;
        }
        WebhooksCommand::Deliveries { webhook, limit } => {
            let hook = webhook.as_deref().map(webhook_id).transpose()?;
            emit(g, &client.list_deliveries(hook.as_ref(), *limit).await?)?;
        }
    }
    Ok(0)
}

impl Render for AuditList {
    fn render(&self) {
        table(
            &["N", "WHEN", "ACTOR", "ACTION", "TARGET", "OUTCOME", "FROM"],
            self.entries
                .iter()
                .map(|e| {
                    vec![
                        e.n.to_string(),
                        fmt_time(Some(e.at_ms)),
                        e.actor.clone(),
                        e.action.clone(),
                        e.target.clone(),
                        e.outcome.clone(),
                        if e.source.is_empty() {
                            "-".into()
                        } else {
                            e.source.clone()
                        },
                    ]
                })
                .collect(),
        );
        if let Some(next) = self.next_after {
            eprintln!("more: nuon audit list --after {next}");
        }
    }
}

impl Render for WebhookList {
    fn render(&self) {
        table(
            &["ID", "URL", "EVENTS", "ADDED"],
            self.webhooks
                .iter()
                .map(|w| {
                    vec![
                        w.id.to_string(),
                        w.url.clone(),
                        w.events
                            .iter()
                            .map(|e| e.as_str())
                            .collect::<Vec<_>>()
                            .join(","),
                        fmt_time(Some(w.created_at_ms)),
                    ]
                })
                .collect(),
        );
    }
}

impl Render for DeliveryList {
    fn render(&self) {
        table(
            &["ID", "EVENT", "STATUS", "TRIES", "WHEN", "LAST ERROR"],
            self.deliveries
                .iter()
                .map(|d| {
                    let status = match (d.status, d.next_attempt_at_ms) {
                        (DeliveryStatus::Pending, Some(at)) => {
                            format!("{} (next {})", d.status, fmt_time(Some(at)))
                        }
                        (s, _) => s.to_string(),
                    };
                    vec![
                        d.id.to_string(),
                        d.event.to_string(),
                        status,
                        d.attempts.to_string(),
                        fmt_time(Some(d.created_at_ms)),
                        d.last_error.clone().unwrap_or_else(|| "-".into()),
                    ]
                })
                .collect(),
        );
    }
}

/// What `installs logs-request` and `installs debug` take.
#[derive(Debug, clap::Args)]
pub(crate) struct DebugArgs {
    /// The install, by name or id.
    install: String,
    /// How long the command may run.
    #[arg(long, default_value = "5m", value_parser = nuon_core::parse_duration)]
    timeout: std::time::Duration,
    /// The command and its arguments, run without a shell, e.g. -- journalctl -u app -n 100.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// `installs logs-request` and `installs debug`: ask, follow the answer,
/// end as the job did (a refusal exits 1 with the runner's reason).
pub(crate) async fn debug_request(
    g: &Global,
    purpose: DebugPurpose,
    args: &DebugArgs,
) -> Result<u8, CliError> {
    let client = client(g)?;
    let job = client
        .request_debug(
            &args.install,
            purpose,
            args.command.clone(),
            Some(args.timeout.as_secs().max(1)),
        )
        .await?;
    for_people(g, || {
        eprintln!(
            "asked the runner of {} (job {}); its answer:",
            args.install, job.id
        )
    });
    crate::jobs::see_job_through(g, &client, &job.id).await
}

/// What `installs stack` takes.
#[derive(Debug, clap::Args)]
pub(crate) struct StackArgs {
    /// The install, by name or id.
    install: String,
    /// The flavour: cloudformation (AWS), terraform (the same AWS stack as
    /// a Terraform configuration), helm (a chart for a Kubernetes cluster)
    /// or vm (a shell bundle and a systemd unit); by default the one the
    /// app's runner_type asks for.
    #[arg(long, value_parser = ["cloudformation", "terraform", "helm", "vm"])]
    format: Option<String>,
    /// Write the stack's files here (made if missing) instead of listing them.
    #[arg(long)]
    out: Option<std::path::PathBuf>,
}

/// Writes the stack's files under `dir` (made if missing), each with its
/// mode set before its text (a file there before keeps its mode on open).
pub(crate) fn write_stack(
    stack: &nuon_core::wire::InstallStack,
    dir: &std::path::Path,
) -> Result<(), CliError> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let fail = |e: std::io::Error, p: &std::path::Path| {
        CliError::usage(format!("cannot write {}: {e}", p.display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| fail(e, dir))?;
    for f in &stack.files {
        // Relative paths under DIR only, whatever the server says.
        let rel = std::path::Path::new(&f.path);
        if !rel
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
        {
            return Err(CliError::usage(format!(
                "the stack names a file outside its directory: {:?}",
                f.path
            )));
        }
        let path = dir.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| fail(e, parent))?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(f.mode)
            .open(&path)
            .map_err(|e| fail(e, &path))?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(f.mode))
            .map_err(|e| fail(e, &path))?;
        file.write_all(f.contents.as_bytes())
            .map_err(|e| fail(e, &path))?;
    }
    Ok(())
}

/// `installs stack`: the install's stack, with a new one-time token.
pub(crate) async fn stack(g: &Global, args: &StackArgs) -> Result<u8, CliError> {
    let client = client(g)?;
    let stack = client
        .install_stack(&args.install, args.format.as_deref())
        .await?;
    if let Some(dir) = &args.out {
        write_stack(&stack, dir)?;
    }
    emit_with(g, &stack, |stack| {
        match &args.out {
            Some(dir) => {
                for f in &stack.files {
                    println!("{}", dir.join(&f.path).display());
                }
            }
            None => {
                for f in &stack.files {
                    println!("==> {} (mode {:o})\n{}", f.path, f.mode, f.contents);
                }
            }
        }
        eprintln!(
            "\n{}\nIts one-time token expires {}.",
            stack.instructions,
            fmt_time(Some(stack.token_expires_at_ms))
        );
    })?;
    Ok(0)
}
