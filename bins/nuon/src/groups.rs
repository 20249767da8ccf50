//! `nuon installs label` and `nuon installs groups`: install labels and
//! groups of installs selected by them.

use clap::Subcommand;
use nuon_core::wire::{GroupInfo, GroupList, LabelChange};

use crate::output::{Render, emit, emit_with};
use crate::{CliError, Global, client, table};

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
