//! `nuon releases rollout|status|resume|retry|cancel|rollback`: a release
//! rolled out to a label selector in waves, and what an operator does to a
//! rollout. Each command takes a release (its newest rollout) or a
//! rollout id.

use std::time::Duration;

use clap::{Args, Subcommand};
use nuon_client::ControlClient;
use nuon_core::RolloutId;
use nuon_core::rollout::{CreateRollout, RolloutInfo, RolloutStatus};

use crate::output::{Render, emit, for_people};
use crate::{CliError, Global, client};

/// A release's rollout.
#[derive(Debug, Args)]
pub(crate) struct RolloutArgs {
    /// The release's id.
    release: String,
    /// The label selector of the installs to deploy to (of the release's
    /// app): `tier=prod,region in (eu, us)`. Default: all of them.
    #[arg(long, default_value = "")]
    to: String,
    /// How many installs have the release after each wave: counts and
    /// shares, the last 100%.
    #[arg(long, default_value = "100%")]
    waves: String,
    /// At most this many installs deploy at once.
    #[arg(long, default_value_t = 10)]
    max_parallel: u32,
    /// Each wave after the first waits for `nuon releases resume`.
    #[arg(long)]
    approve_each_wave: bool,
    /// How long each install must stay healthy after its deploy before its
    /// wave passes (`10m`).
    #[arg(long)]
    bake: Option<String>,
    /// Only show who gets what, in which wave.
    #[arg(long)]
    dry_run: bool,
    /// Follow it until it ends, stops or waits for an approval (exit 1
    /// unless it succeeded or waits).
    #[arg(long)]
    wait: bool,
}

/// What an operator does to a rollout.
#[derive(Debug, Subcommand)]
pub(crate) enum RolloutCommand {
    /// Roll a release out to the installs a label selector picks, in
    /// waves; each install runs its normal deploy workflow.
    Rollout(RolloutArgs),
    /// Every install's state in a release's newest rollout (or the one
    /// named).
    Status {
        /// A release (its newest rollout) or a rollout id.
        release: String,
    },
    /// Pause a rollout: what deploys finishes, nothing new starts until
    /// `resume`.
    Pause {
        /// A release (its newest rollout) or a rollout id.
        release: String,
    },
    /// Go on: start the next wave of a rollout that waits for an approval,
    /// go on with a paused one, or pass over the installs that failed.
    Resume {
        /// A release (its newest rollout) or a rollout id.
        release: String,
        /// Follow it until it ends, stops or waits for an approval (exit 1
        /// unless it succeeded or waits).
        #[arg(long)]
        wait: bool,
    },
    /// Deploy the installs that failed again (after a fix), then go on.
    Retry {
        /// A release (its newest rollout) or a rollout id.
        release: String,
        /// Follow it until it ends, stops or waits for an approval (exit 1
        /// unless it succeeded or waits).
        #[arg(long)]
        wait: bool,
    },
    /// Start nothing more: the deploys that run finish.
    Cancel {
        /// A release (its newest rollout) or a rollout id.
        release: String,
    },
    /// Return every install the rollout reached to its release before (an
    /// install it gave its first release: to the config version it ran
    /// before).
    Rollback {
        /// A release (its newest rollout) or a rollout id.
        release: String,
        /// Follow it until it ends, stops or waits for an approval (exit 1
        /// unless it succeeded or waits).
        #[arg(long)]
        wait: bool,
    },
}

/// How [`rollout_of`] reads a release's key.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Lookup {
    /// For an act: the release's newest rollout that is not a rollback (a
    /// rollback is named by its id).
    pub(crate) for_act: bool,
    /// The release is a runner version.
    pub(crate) runner: bool,
}

/// The rollout `key` names: a rollout id, or a release's newest rollout
/// (see [`Lookup`]).
pub(crate) async fn rollout_of(
    c: &ControlClient,
    key: &str,
    lookup: Lookup,
) -> Result<String, CliError> {
    let Lookup { for_act, runner } = lookup;
    if key.parse::<RolloutId>().is_ok() {
        return Ok(key.to_owned());
    }
    let list = if runner {
        c.list_runner_rollouts(key).await?
    } else {
        c.list_rollouts(key).await?
    };
    list.rollouts
        .iter()
        .find(|r| !for_act || r.rollback_of.is_none())
        .map(|r| r.id.to_string())
        .ok_or_else(|| {
            CliError::usage(if runner {
                format!(
                    "runner version {key} has no rollout yet: start one with `nuon runners release rollout {key} --wave 10%`"
                )
            } else {
                format!(
                    "release {key} has no rollout yet: start one with `nuon releases rollout {key} --to SELECTOR`"
                )
            })
        })
}

/// What an operator does to an existing rollout.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Act {
    Status,
    Pause,
    Resume,
    Retry,
    Cancel,
    Rollback,
}

/// Whose rollout an act is done to, and what the command does after.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ActOn {
    /// The key names a runner version's rollout, not an app release's.
    pub(crate) runner: bool,
    /// Follow the rollout after (see [`follow`]) rather than show it.
    pub(crate) wait: bool,
}

/// Does `act` to the rollout `key` names (see [`rollout_of`]) and shows
/// the rollout after, or with `on.wait` follows it (see [`follow`]).
pub(crate) async fn act(g: &Global, key: &str, act: Act, on: ActOn) -> Result<u8, CliError> {
    let c = client(g)?;
    let lookup = Lookup {
        for_act: !matches!(act, Act::Status),
        runner: on.runner,
    };
    let id = rollout_of(&c, key, lookup).await?;
    let r = match act {
        Act::Status => c.get_rollout(&id).await?,
        Act::Pause => c.pause_rollout(&id).await?,
        Act::Resume => c.resume_rollout(&id).await?,
        Act::Retry => c.retry_rollout(&id).await?,
        Act::Cancel => c.cancel_rollout(&id).await?,
        Act::Rollback => c.rollback_rollout(&id).await?,
    };
    if on.wait {
        return follow(g, &c, r).await;
    }
    emit(g, &r)?;
    Ok(0)
}

impl Render for RolloutInfo {
    fn render(&self) {
        show(self);
    }
}

/// A rollout, for people: its head, then each install by wave.
fn show(r: &RolloutInfo) {
    outln!("rollout:  {}", r.id);
    match (&r.app_id, &r.runner_version) {
        (Some(app), _) => outln!(
            "release:  {} of {}",
            r.release_id,
            r.app_name.clone().unwrap_or_else(|| app.to_string())
        ),
        (None, v) => outln!(
            "runner:   version {} (release {})",
            v.as_deref().unwrap_or("?"),
            r.release_id
        ),
    }
    if let Some(of) = &r.rollback_of {
        outln!("rolls back: {of}");
    }
    let selector = if r.selector.is_empty() {
        "(every install)"
    } else {
        r.selector.as_str()
    };
    outln!("to:       {selector}");
    outln!(
        "waves:    {} ({} of them), at most {} at once{}{}",
        r.waves,
        r.wave_count,
        r.max_parallel,
        if r.bake_ms > 0 {
            format!(", bake {} s", r.bake_ms / 1000)
        } else {
            String::new()
        },
        if r.approve_each_wave {
            ", each wave approved"
        } else {
            ""
        }
    );
    let wave = if r.wave_count == 0 { 0 } else { r.wave + 1 };
    outln!("status:   {} (wave {wave} of {})", r.status, r.wave_count);
    if let Some(why) = &r.reason {
        outln!("reason:   {why}");
    }
    // A rollback returns each install to its own release (or config).
    let back = r.rollback_of.is_some();
    let mut header = vec![
        "WAVE", "INSTALL", "STATE", "TRIES", "WORKFLOW", "FROM", "REASON",
    ];
    if back {
        header.insert(2, "GETS");
    }
    crate::table(
        &header,
        r.targets
            .iter()
            .map(|t| {
                let mut row = vec![
                    (t.wave + 1).to_string(),
                    t.install.clone(),
                    t.state.to_string(),
                    t.tries.to_string(),
                    t.workflow_id
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_else(|| "-".into()),
                    t.from_release
                        .as_ref()
                        .map(ToString::to_string)
                        .unwrap_or_else(|| "-".into()),
                    t.reason.clone().unwrap_or_default(),
                ];
                if back {
                    row.insert(2, t.gets());
                }
                row
            })
            .collect(),
    );
}

/// Follows a rollout until it no longer runs; its exit code.
pub(crate) async fn follow(
    g: &Global,
    c: &ControlClient,
    mut r: RolloutInfo,
) -> Result<u8, CliError> {
    let mut said = String::new();
    loop {
        let line = format!(
            "{}: wave {} of {}, {}{}",
            r.status,
            r.wave + 1,
            r.wave_count,
            summary(&r),
            r.reason
                .as_deref()
                .map(|why| format!(" ({why})"))
                .unwrap_or_default()
        );
        if line != said {
            for_people(g, || eprintln!("{line}"));
            said = line;
        }
        if r.status != RolloutStatus::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
        r = c.get_rollout(r.id.as_str()).await?;
    }
    emit(g, &r)?;
    Ok(match r.status {
        RolloutStatus::Succeeded | RolloutStatus::AwaitingApproval => 0,
        _ => 1,
    })
}

/// `3 succeeded, 1 running, 4 pending`.
fn summary(r: &RolloutInfo) -> String {
    let mut counts: std::collections::BTreeMap<&str, usize> = Default::default();
    for t in &r.targets {
        *counts.entry(t.state.as_str()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(s, n)| format!("{n} {s}"))
        .collect::<Vec<_>>()
        .join(", ")
}

pub(crate) async fn rollouts(g: &Global, command: &RolloutCommand) -> Result<u8, CliError> {
    let c = client(g)?;
    let r = match command {
        RolloutCommand::Rollout(a) => {
            let req = CreateRollout {
                to: a.to.clone(),
                waves: a.waves.clone(),
                max_parallel: a.max_parallel,
                approve_each_wave: a.approve_each_wave,
                bake: a.bake.clone(),
                dry_run: a.dry_run,
            };
            let r = c.create_rollout(&a.release, &req).await?;
            if a.wait && !a.dry_run {
                return follow(g, &c, r).await;
            }
            r
        }
        RolloutCommand::Status { release } => {
            return act(g, release, Act::Status, ActOn::default()).await;
        }
        RolloutCommand::Pause { release } => {
            return act(g, release, Act::Pause, ActOn::default()).await;
        }
        RolloutCommand::Resume { release, wait } => {
            return act(g, release, Act::Resume, waiting(*wait)).await;
        }
        RolloutCommand::Retry { release, wait } => {
            return act(g, release, Act::Retry, waiting(*wait)).await;
        }
        RolloutCommand::Cancel { release } => {
            return act(g, release, Act::Cancel, ActOn::default()).await;
        }
        RolloutCommand::Rollback { release, wait } => {
            return act(g, release, Act::Rollback, waiting(*wait)).await;
        }
    };
    emit(g, &r)?;
    Ok(0)
}

/// An act on an app release's rollout, followed with `wait`.
fn waiting(wait: bool) -> ActOn {
    ActOn {
        runner: false,
        wait,
    }
}
