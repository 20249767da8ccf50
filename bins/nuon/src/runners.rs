//! `nuon runners`: register, list, revoke runners and rotate their tokens.

use clap::Subcommand;

use nuon_core::wire::RunnerList;

use crate::output::{Render, emit, emit_with};
use crate::*;

#[derive(Debug, Subcommand)]
pub(crate) enum RunnersCommand {
    /// Register a runner; prints its id, its token (shown once) and the signing public key.
    Create {
        /// A name unique in the org.
        #[arg(long)]
        name: String,
    },
    /// List the org's runners.
    List,
    /// Revoke a runner's token (by name or id).
    Revoke {
        /// The runner.
        runner: String,
    },
    /// Issue a runner (by name or id; an install's runner is named after
    /// the install) a new token; the old one stops working at once.
    RotateToken {
        /// The runner.
        runner: String,
    },
    /// Runner versions: publish one (signed by the org's key), roll it out
    /// to install runners in waves, pause, resume or roll it back.
    Release {
        #[command(subcommand)]
        command: runner_releases::RunnerReleaseCommand,
    },
}

pub(crate) async fn runners(g: &Global, command: &RunnersCommand) -> Result<u8, CliError> {
    let client = client(g)?;
    match command {
        RunnersCommand::Create { name } | RunnersCommand::RotateToken { runner: name } => {
            let created = match command {
                RunnersCommand::Create { .. } => client.create_runner(name).await?,
                _ => client.rotate_runner_token(name).await?,
            };
            emit_with(g, &created, |created| {
                outln!("runner id:          {}", created.runner.id);
                outln!("runner token:       {}", created.token);
                outln!("signing public key: {}", created.signing_public_key);
                eprintln!(
                    "\nThe token is shown only now. Start the runner (again) with:\n  NUON_RUNNER_TOKEN={} nuon-runner run --api {} --signing-key {}",
                    created.token,
                    created
                        .runner_api_url
                        .as_deref()
                        .unwrap_or("RUNNER_API_URL"),
                    created.signing_public_key
                );
            })?;
        }
        RunnersCommand::List => {
            let list = client.list_runners().await?;
            emit(g, &list)?;
        }
        RunnersCommand::Release { command } => {
            return runner_releases::runner_releases(g, command).await;
        }
        RunnersCommand::Revoke { runner } => {
            let r = client.revoke_runner(runner).await?;
            emit_with(g, &r, |r| outln!("revoked runner {} ({})", r.name, r.id))?;
        }
    }
    Ok(0)
}

impl Render for RunnerList {
    fn render(&self) {
        table(
            &[
                "ID",
                "NAME",
                "INSTALL",
                "ROLE",
                "LAST SEEN",
                "STATE",
                "HEALTH",
                "JOBS",
                "TOOLS",
                "PROCESS",
            ],
            self.runners
                .iter()
                .map(|r| {
                    let jobs = r.telemetry.as_ref().map_or_else(
                        || "-".into(),
                        |t| {
                            format!(
                                "{}/{} running, {} unshipped",
                                t.busy, t.slots, t.spool_backlog
                            )
                        },
                    );
                    vec![
                        r.id.to_string(),
                        r.name.clone(),
                        r.install.clone().unwrap_or_else(|| "-".into()),
                        r.role.as_str().into(),
                        fmt_time(r.last_seen_at_ms),
                        r.status.as_str().replace('_', " "),
                        match r.telemetry.as_ref().and_then(|t| t.disabled.as_ref()) {
                            Some(_) => format!("{} (disabled)", r.health.as_str()),
                            None => r.health.as_str().into(),
                        },
                        jobs,
                        r.telemetry
                            .as_ref()
                            .filter(|t| !t.tools.is_empty())
                            .map_or_else(
                                || "-".into(),
                                |t| {
                                    let tools: Vec<String> =
                                        t.tools.iter().map(ToString::to_string).collect();
                                    tools.join(", ")
                                },
                            ),
                        r.session
                            .as_ref()
                            .map(|s| {
                                let v = s
                                    .version
                                    .as_ref()
                                    .map(|v| format!(" v{v}"))
                                    .unwrap_or_default();
                                format!("pid {} on {}{v}", s.pid, s.host)
                            })
                            .unwrap_or_else(|| "-".into()),
                    ]
                })
                .collect(),
        );
    }
}
