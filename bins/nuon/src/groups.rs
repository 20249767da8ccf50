//! `nuon installs label`, `nuon installs groups` and `nuon installs
//! list`: install labels, groups of installs selected by them, and the
//! org's installs (those a selector matches), all or a page at a time.

use clap::Subcommand;
use nuon_core::wire::{GroupInfo, GroupList, InstallCursor, InstallList, LabelChange};

use crate::output::{Render, emit, emit_with};
use crate::{CliError, Global, client, fmt_time, table};

/// `nuon installs list`.
#[derive(Debug, clap::Args)]
pub(crate) struct ListArgs {
    /// A label selector: `tier=prod,region!=us`, `tier in (a,b)`.
    #[arg(long)]
    selector: Option<String>,
    /// Show a page of at most this many (1 to 1000) and where the next
    /// starts.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(InstallCursor::MAX_PAGE)))]
    limit: Option<u32>,
    /// Where the page starts: the `next` of the page before.
    #[arg(long, value_name = "CURSOR", requires = "limit", value_parser = parse_cursor)]
    after: Option<InstallCursor>,
}

/// `nuon installs list`: every install (that the selector matches), or
/// a page, and on stderr the command for the page after it.
pub(crate) async fn list(g: &Global, args: &ListArgs) -> Result<(), CliError> {
    let ListArgs {
        selector,
        limit,
        after,
    } = args;
    if let Some(s) = selector {
        s.parse::<nuon_core::labels::Selector>()
            .map_err(CliError::usage)?;
    }
    let client = client(g)?;
    let list = match (limit, selector) {
        (Some(limit), s) => {
            (client.list_installs_page(s.as_deref(), after.as_ref(), *limit)).await?
        }
        (None, Some(s)) => client.list_installs_matching(s).await?,
        (None, None) => client.list_installs().await?,
    };
    emit(g, &list)?;
    if let (Some(next), Some(limit)) = (&list.next, limit) {
        // On stderr: what stdout holds stays the page alone.
        let selector =
            (selector.as_deref()).map_or(String::new(), |s| format!(" --selector '{s}'"));
        eprintln!(
            "more: the next page is `nuon installs list{selector} --limit {limit} --after {next}`"
        );
    }
    Ok(())
}

impl Render for InstallList {
    fn render(&self) {
        table(
            &[
                "ID", "NAME", "APP", "CONFIG", "STATE", "HEALTH", "SYNC", "LABELS", "CREATED",
            ],
            self.installs
                .iter()
                .map(|i| {
                    vec![
                        i.id.to_string(),
                        i.name.clone(),
                        i.app_name.clone().unwrap_or_else(|| i.app_id.to_string()),
                        format!("v{}", i.config_version),
                        i.state.to_string(),
                        i.health.map_or("-".into(), |h| h.to_string()),
                        i.sync.map_or("-".into(), |s| s.to_string()),
                        labels_text(&i.labels),
                        fmt_time(Some(i.created_at_ms)),
                    ]
                })
                .collect(),
        );
    }
}

/// `--after`: a page's `next`.
fn parse_cursor(s: &str) -> Result<InstallCursor, String> {
    s.parse()
}

/// `nuon installs label INSTALL k=v... [k-]...`.
#[derive(Debug, clap::Args)]
pub(crate) struct LabelArgs {
    /// The install, by name or id.
    install: String,
    /// `KEY=VALUE` sets a label; `KEY-` removes one (as kubectl does).
    #[arg(required = true, num_args = 1.., value_name = "KEY=VALUE|KEY-")]
    changes: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum GroupsCommand {
    /// Create a group: the installs whose labels match a selector, now and
    /// as labels change.
    Create {
        /// Unique in the org.
        name: String,
        /// `region=eu,tier!=trial`, `tier in (prod,staging)`, `team`,
        /// `!legacy` (every requirement must hold).
        #[arg(long)]
        selector: String,
    },
    /// List the org's groups with the installs each selects.
    List,
    /// Show one group and the installs it selects.
    Get {
        /// The group.
        name: String,
    },
    /// Delete a group (its installs stay).
    Delete {
        /// The group.
        name: String,
    },
}

/// The change `KEY=VALUE` and `KEY-` words make.
fn change_of(words: &[String]) -> Result<LabelChange, CliError> {
    LabelChange::from_words(words).map_err(CliError::usage)
}

pub(crate) async fn label(g: &Global, args: &LabelArgs) -> Result<u8, CliError> {
    let change = change_of(&args.changes)?;
    let install = client(g)?
        .set_install_labels(&args.install, &change)
        .await?;
    emit_with(g, &install, |i| {
        outln!("{}: {}", i.name, labels_text(&i.labels))
    })?;
    Ok(0)
}

/// `k=v,k2=v2`, or `-` for none.
pub(crate) fn labels_text(labels: &std::collections::BTreeMap<String, String>) -> String {
    if labels.is_empty() {
        return "-".into();
    }
    labels
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

impl Render for GroupInfo {
    fn render(&self) {
        outln!("name:     {}", self.name);
        outln!(
            "selector: {}",
            if self.selector.is_empty() {
                "(every install)"
            } else {
                &self.selector
            }
        );
        outln!("installs: {}", self.installs.len());
        for i in &self.installs {
            outln!("  {i}");
        }
    }
}

impl Render for GroupList {
    fn render(&self) {
        table(
            &["NAME", "SELECTOR", "INSTALLS"],
            self.groups
                .iter()
                .map(|g| {
                    vec![
                        g.name.clone(),
                        g.selector.clone(),
                        if g.installs.is_empty() {
                            "-".into()
                        } else {
                            g.installs.join(",")
                        },
                    ]
                })
                .collect(),
        );
    }
}

pub(crate) async fn groups(g: &Global, command: &GroupsCommand) -> Result<u8, CliError> {
    let client = client(g)?;
    let one = match command {
        GroupsCommand::Create { name, selector } => {
            // Checked here too, so a typo is told before any request.
            selector
                .parse::<nuon_core::labels::Selector>()
                .map_err(CliError::usage)?;
            client.create_group(name, selector).await?
        }
        GroupsCommand::Get { name } => client.get_group(name).await?,
        GroupsCommand::Delete { name } => client.delete_group(name).await?,
        GroupsCommand::List => {
            emit(g, &client.list_groups().await?)?;
            return Ok(0);
        }
    };
    emit(g, &one)?;
    Ok(0)
}
