//! `nuon installs health`, `checks` and `drift`: how an install is
//! doing, the checks the vendor's systems report, and what drifted.

use clap::Subcommand;
use nuon_client::ControlClient;
use nuon_core::wire::{CheckState, HealthStatus, InstallDrift, InstallHealth, SyncStatus};

use crate::output::emit_with;
use crate::{CliError, Global, client, fmt_time, table};

#[derive(Debug, Subcommand)]
pub(crate) enum ChecksCommand {
    /// Report a check: healthy or unhealthy, with what it says. A deploy
    /// waiting for it goes on once it is healthy.
    Push {
        /// The install, by name or id.
        install: String,
        /// The check's name (1 to 63 letters, digits, '-', '_' or '.').
        name: String,
        /// What it checks is ready.
        #[arg(
            long,
            conflicts_with = "unhealthy",
            required_unless_present = "unhealthy"
        )]
        healthy: bool,
        /// What it checks is not ready.
        #[arg(long)]
        unhealthy: bool,
        /// What it says, for people.
        #[arg(long)]
        detail: Option<String>,
    },
}

/// `INSTALL`, or every install of the org.
async fn install_names(
    client: &ControlClient,
    install: Option<&str>,
) -> Result<Vec<String>, CliError> {
    Ok(match install {
        Some(i) => vec![i.to_owned()],
        None => client
            .list_installs()
            .await?
            .installs
            .into_iter()
            .map(|i| i.name)
            .collect(),
    })
}

/// The document of one install's answer when one was named, else of the
/// list.
#[derive(serde::Serialize)]
#[serde(untagged)]
enum OneOrAll<'a, T> {
    /// The install named.
    One(&'a T),
    /// Every install's.
    All(&'a [T]),
}

/// `all` as its document: the one answer when `install` was named.
fn one_or_all<'a, T>(install: Option<&str>, all: &'a [T]) -> OneOrAll<'a, T> {
    match (install, all) {
        (Some(_), [one]) => OneOrAll::One(one),
        _ => OneOrAll::All(all),
    }
}

/// `nuon installs health [INSTALL]`: an install's state, health and sync
/// and what they are made of; without INSTALL, every install's, with what
/// is not ok. Exits 1 when one is not healthy (an install that is not
/// active never is).
pub(crate) async fn health(g: &Global, install: Option<&str>) -> Result<u8, CliError> {
    let client = client(g)?;
    let mut all = Vec::new();
    for n in install_names(&client, install).await? {
        all.push(client.install_health(&n).await?);
    }
    let code = u8::from(all.iter().any(|h| h.status != HealthStatus::Healthy));
    emit_with(g, &one_or_all(install, &all), |_| {
        health_table(install, &all)
    })?;
    Ok(code)
}

/// Installs' health as a table: every check of one install named, else
/// what is not ok.
fn health_table(install: Option<&str>, all: &[InstallHealth]) {
    let mut rows = Vec::new();
    for h in all {
        let row = |check: String, status: String, detail: String| {
            vec![
                h.install.clone(),
                h.state.to_string(),
                h.status.to_string(),
                h.sync.to_string(),
                check,
                status,
                detail,
            ]
        };
        for c in &h.checks {
            // One install: every check; all of them: what is not ok.
            if install.is_none() && c.status == CheckState::Ok && c.pending.is_none() {
                continue;
            }
            rows.push(row(
                format!("{} {}", c.kind, c.name),
                c.status.to_string(),
                c.detail.clone().unwrap_or_default(),
            ));
        }
        if install.is_none() && h.status == HealthStatus::Healthy && h.sync == SyncStatus::InSync {
            rows.push(row("-".into(), CheckState::Ok.to_string(), String::new()));
        }
    }
    table(
        &[
            "INSTALL", "STATE", "HEALTH", "SYNC", "CHECK", "STATUS", "DETAIL",
        ],
        rows,
    );
}

/// `nuon installs checks push INSTALL NAME --healthy|--unhealthy`.
pub(crate) async fn checks(g: &Global, command: &ChecksCommand) -> Result<u8, CliError> {
    let ChecksCommand::Push {
        install,
        name,
        healthy,
        unhealthy: _,
        detail,
    } = command;
    let status = if *healthy {
        nuon_core::wire::CheckStatus::Healthy
    } else {
        nuon_core::wire::CheckStatus::Unhealthy
    };
    let req = nuon_core::wire::PushCheck {
        status,
        detail: detail.clone(),
    };
    let check = client(g)?.push_check(install, name, &req).await?;
    emit_with(g, &check, |check| {
        outln!(
            "check {} of install {install} is {}",
            check.name,
            check.status.as_str()
        )
    })?;
    Ok(0)
}

/// `nuon installs drift [INSTALL]`: every target of the install (or of
/// every install) and what its newest drift check found.
pub(crate) async fn drift(g: &Global, install: Option<&str>) -> Result<u8, CliError> {
    let client = client(g)?;
    let mut all = Vec::new();
    for n in install_names(&client, install).await? {
        all.push(client.install_drift(&n).await?);
    }
    emit_with(g, &one_or_all(install, &all), |_| drift_table(&all))?;
    Ok(0)
}

/// What the newest drift check of each target found, as a table.
fn drift_table(all: &[InstallDrift]) {
    let mut rows = Vec::new();
    for d in all {
        for t in &d.targets {
            let c = &t.changes;
            let summary = if c.is_null() {
                t.reason.clone().unwrap_or_default()
            } else {
                // What changed outside, attribute by attribute.
                let drifted: Vec<String> = c["drifted"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|d| {
                        let attrs: Vec<&str> = d["attributes"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|a| a.as_str())
                            .collect();
                        format!(
                            "{} ({})",
                            d["address"].as_str().unwrap_or("?"),
                            attrs.join(", ")
                        )
                    })
                    .collect();
                let mut s = format!(
                    "{} to add, {} to change, {} to destroy",
                    c["add"], c["change"], c["destroy"]
                );
                if !drifted.is_empty() {
                    s.push_str(&format!("; changed outside: {}", drifted.join("; ")));
                }
                s
            };
            rows.push(vec![
                d.install.clone(),
                t.target.clone(),
                t.status.to_string(),
                fmt_time(t.checked_at_ms),
                t.next_check_ms.map_or("-".into(), |n| fmt_time(Some(n))),
                summary,
            ]);
        }
    }
    table(
        &[
            "INSTALL",
            "TARGET",
            "DRIFT",
            "CHECKED",
            "NEXT CHECK",
            "CHANGES",
        ],
        rows,
    );
}
