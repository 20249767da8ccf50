//! `nuon workflows`: an install's workflows, their steps and approvals.

use clap::Subcommand;
use nuon_core::wire::{WorkflowInfo, WorkflowList};

use crate::output::{Render, emit, emit_with};
use crate::{CliError, Global, client, fmt_time, table};

#[derive(Debug, Subcommand)]
pub(crate) enum WorkflowsCommand {
    /// An install's workflows, newest first.
    List {
        /// The install, by name or id.
        #[arg(long)]
        install: String,
    },
    /// One workflow with its steps.
    Get {
        /// The workflow's id.
        id: String,
    },
    #[command(flatten)]
    Act(crate::deploy::WorkflowActCommand),
}

pub(crate) async fn workflows(g: &Global, command: &WorkflowsCommand) -> Result<u8, CliError> {
    let client = client(g)?;
    match command {
        WorkflowsCommand::Act(act) => return crate::deploy::workflow_act(g, act).await,
        WorkflowsCommand::List { install } => emit(g, &client.list_workflows(install).await?)?,
        WorkflowsCommand::Get { id } => emit_with(g, &client.get_workflow(id).await?, show)?,
    }
    Ok(0)
}

impl Render for WorkflowList {
    fn render(&self) {
        table(
            &["ID", "KIND", "STATUS", "CONFIG", "STEPS", "CREATED"],
            self.workflows
                .iter()
                .map(|w| {
                    vec![
                        w.id.to_string(),
                        serde_json::to_value(w.kind)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_owned))
                            .unwrap_or_default(),
                        w.status.to_string(),
                        format!("v{}", w.config_version),
                        w.steps.len().to_string(),
                        fmt_time(Some(w.created_at_ms)),
                    ]
                })
                .collect(),
        );
    }
}

/// A workflow as `workflows get` shows it: its head, its steps, then each
/// step's earlier tries.
fn show(w: &WorkflowInfo) {
    let by = match &w.trigger {
        Some(t) => format!(", started by {t}"),
        None => String::new(),
    };
    outln!(
        "workflow {} ({}), config v{}{by}",
        w.id,
        w.status,
        w.config_version
    );
    for (k, v) in &w.inputs {
        outln!("input {k}={v}");
    }
    // Each step's earlier tries, after the table.
    let tries: Vec<(String, Vec<nuon_core::wire::StepAttempt>)> = w
        .steps
        .iter()
        .filter(|s| !s.attempts.is_empty())
        .map(|s| (s.name.clone(), s.attempts.clone()))
        .collect();
    // An apply that ran without its approval because its plan
    // changed nothing.
    let no_changes: Vec<bool> = (0..w.steps.len())
        .map(|i| {
            w.steps[i].needs_approval && nuon_core::workflow::plan_changes_nothing(&w.steps, i)
        })
        .collect();
    table(
        &["#", "STEP", "STATUS", "APPROVAL", "JOB", "WHY"],
        w.steps
            .iter()
            .zip(no_changes)
            .map(|(s, no_changes)| {
                use nuon_core::workflow::StepStatus;
                let approval = match (s.needs_approval, s.approved_at_ms, s.status) {
                    (false, _, _) => "-".into(),
                    (true, Some(_), _) if no_changes => "skipped: no changes".into(),
                    (true, Some(_), _) => match &s.approved_by {
                        Some(by) => format!("approved by {by}"),
                        None => "approved".into(),
                    },
                    (true, None, StepStatus::Denied) => StepStatus::Denied.to_string(),
                    (true, None, StepStatus::Skipped | StepStatus::Cancelled) => "-".into(),
                    (true, None, _) => "needed".to_string(),
                };
                vec![
                    (s.index + 1).to_string(),
                    s.name.clone(),
                    s.status.to_string(),
                    approval,
                    s.job_id.as_ref().map_or("-".into(), |j| j.to_string()),
                    s.reason.clone().unwrap_or_default(),
                ]
            })
            .collect(),
    );
    for (name, attempts) in tries {
        outln!("earlier tries of {name}:");
        for (i, a) in attempts.iter().enumerate() {
            let how = if a.retry_at_ms.is_some() {
                "retried automatically"
            } else {
                "retried by hand"
            };
            outln!(
                "  {}. job {} failed {} ({how}): {}",
                i + 1,
                a.job_id.as_ref().map_or("-".into(), |j| j.to_string()),
                fmt_time(Some(a.failed_at_ms)),
                a.reason
            );
        }
    }
}
