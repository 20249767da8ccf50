//! `nuon builds`, the workflow commands of `nuon installs`
//! (provision, deploy, teardown, deprovision, reprovision, outputs) and of
//! `nuon workflows` (approve, deny, cancel, retry, watch), and the live
//! progress of a workflow.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::time::Duration;

use clap::Subcommand;
use nuon_client::ControlClient;
use nuon_core::JobId;
use nuon_core::app::{self, SourceFile};
use nuon_core::wire::{BuildInfo, ConfigFile, CreateWorkflow, InstallOutputs, WorkflowInfo};
use nuon_core::workflow::{StepStatus, WorkflowKind, WorkflowStatus};

use crate::output::{Progress, Render, emit, emit_with, for_machines};
use crate::{CliError, Global, client, fmt_time, jobs::JobsCommand, table};

/// The most source bytes one sync carries (the API takes 4 MiB bodies).
const MAX_SOURCE_BYTES: u64 = 3 * 1024 * 1024;

/// The files of the config's `path` sources, relative to the config
/// directory, for the build runner. Hidden entries and Terraform's working
/// directories are left out.
pub(crate) async fn read_sources(
    dir: &Path,
    files: &[SourceFile],
) -> Result<Vec<ConfigFile>, CliError> {
    let (Some(config), _) = nuon_appconfig::parse(files) else {
        // The server refuses the config with every problem; no sources needed.
        return Ok(Vec::new());
    };
    let mut out: BTreeMap<String, (String, Option<String>)> = BTreeMap::new();
    let mut total = 0u64;
    for (who, path) in app::path_sources(&config) {
        let rel = app::source_dir(&path).map_err(|e| CliError::usage(format!("{who}: {e}")))?;
        let root = dir.join(&rel);
        if !root.is_dir() {
            return Err(CliError::usage(format!(
                "{who}: its path {path:?} is not a directory under {}",
                dir.display()
            )));
        }
        let mut stack = vec![root.clone()];
        while let Some(d) = stack.pop() {
            let entries = std::fs::read_dir(&d)
                .map_err(|e| CliError::usage(format!("cannot read {}: {e}", d.display())))?;
            for entry in entries {
                let entry = entry
                    .map_err(|e| CliError::usage(format!("cannot read {}: {e}", d.display())))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if name.starts_with('.')
                    || name == "terraform.tfstate"
                    || name.ends_with(".tfstate.backup")
                {
                    continue;
                }
                let p = entry.path();
                let meta = std::fs::metadata(&p)
                    .map_err(|e| CliError::usage(format!("cannot read {}: {e}", p.display())))?;
                if meta.is_dir() {
                    stack.push(p);
                    continue;
                }
                total += meta.len();
                if total > MAX_SOURCE_BYTES {
                    return Err(CliError::usage(format!(
                        "the path sources under {} are larger than {} MiB: keep large sources in a git repository ([git] source)",
                        dir.display(),
                        MAX_SOURCE_BYTES >> 20
                    )));
                }
                let bytes = std::fs::read(&p)
                    .map_err(|e| CliError::usage(format!("cannot read {}: {e}", p.display())))?;
                // Text as it is; a binary file (a plugin's .wasm) as base64.
                let file = match String::from_utf8(bytes) {
                    Ok(text) => (text, None),
                    Err(e) => {
                        use base64::Engine as _;
                        let b64 = base64::engine::general_purpose::STANDARD.encode(e.into_bytes());
                        (b64, Some("base64".to_owned()))
                    }
                };
                let rel_path = p
                    .strip_prefix(dir)
                    .unwrap_or(&p)
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(rel_path, file);
            }
        }
    }
    // Files named in `contents`/`inline_contents`: sent with the config,
    // which keeps their text.
    for (who, category, path) in app::file_refs(&config) {
        let candidates = app::file_ref_candidates(category, &path)
            .map_err(|e| CliError::usage(format!("{who}: {e}")))?;
        let Some(rel) = candidates.iter().find(|c| dir.join(c).is_file()).cloned() else {
            return Err(CliError::usage(format!(
                "{who}: file {path:?} named in contents is not in {} (looked for {})",
                dir.display(),
                candidates.join(" and ")
            )));
        };
        if out.contains_key(&rel) {
            continue;
        }
        let p = dir.join(&rel);
        let text = std::fs::read_to_string(&p).map_err(|e| {
            CliError::usage(format!(
                "{who}: cannot read {} (named in contents): {e}",
                p.display()
            ))
        })?;
        total += text.len() as u64;
        if total > MAX_SOURCE_BYTES {
            return Err(CliError::usage(format!(
                "the sources under {} are larger than {} MiB",
                dir.display(),
                MAX_SOURCE_BYTES >> 20
            )));
        }
        out.insert(rel, (text, None));
    }
    // The installer's logo and favicon, read or fetched here.
    let (images, warnings) = nuon_client::app_dir::installer_images(dir, &config)
        .await
        .map_err(CliError::usage)?;
    for w in warnings {
        eprintln!("warning: {w}");
    }
    Ok(out
        .into_iter()
        .map(|(path, (contents, encoding))| ConfigFile {
            path,
            contents,
            encoding,
        })
        .chain(images)
        .collect())
}

#[derive(Debug, Subcommand)]
pub(crate) enum BuildsCommand {
    /// Build an app's components (and sandbox) of its latest config version
    /// on the org's build runner.
    Create {
        /// The app, by name or id.
        #[arg(long)]
        app: String,
        /// Only this component (`sandbox` for the sandbox).
        #[arg(long)]
        component: Option<String>,
        /// Wait until every build has ended; exit 1 when one failed.
        #[arg(long)]
        wait: bool,
    },
    /// An app's builds, newest first.
    List {
        /// The app, by name or id.
        #[arg(long)]
        app: String,
    },
    /// One build.
    Get {
        /// The build's id.
        id: String,
    },
    /// A build's log.
    Logs {
        /// The build's id.
        id: String,
        /// Keep following until the build ends.
        #[arg(long, short)]
        follow: bool,
    },
}

fn show_builds(builds: &[BuildInfo]) {
    table(
        &["ID", "COMPONENT", "CONFIG", "STATUS", "ARTIFACT", "CREATED"],
        builds
            .iter()
            .map(|b| {
                vec![
                    b.id.to_string(),
                    b.component.clone(),
                    format!("v{}", b.config_version),
                    b.status.to_string(),
                    b.artifact.as_ref().map_or_else(
                        || b.reason.clone().unwrap_or_else(|| "-".into()),
                        |a| format!("{}@{}", a.repo, a.digest),
                    ),
                    fmt_time(Some(b.created_at_ms)),
                ]
            })
            .collect(),
    );
}

/// Waits until every build in `builds` has ended.
pub(crate) async fn wait_builds(
    client: &ControlClient,
    builds: Vec<BuildInfo>,
) -> Result<Vec<BuildInfo>, CliError> {
    let mut done = Vec::new();
    for b in builds {
        let mut b = b;
        while !b.status.is_terminal() {
            tokio::time::sleep(Duration::from_millis(50)).await;
            b = client.get_build(b.id.as_str()).await?;
        }
        done.push(b);
    }
    Ok(done)
}

pub(crate) async fn builds(g: &Global, command: &BuildsCommand) -> Result<u8, CliError> {
    let client = client(g)?;
    match command {
        BuildsCommand::Create {
            app,
            component,
            wait,
        } => {
            let mut list = client
                .create_builds(app, component.as_deref())
                .await?
                .builds;
            if *wait {
                list = wait_builds(&client, list).await?;
            }
            emit_with(g, &list, |l| show_builds(l))?;
            let failed = list
                .iter()
                .any(|b| b.status.is_terminal() && b.status != nuon_core::JobStatus::Succeeded);
            Ok(u8::from(failed))
        }
        BuildsCommand::List { app } => {
            let list = client.list_builds(app).await?;
            emit_with(g, &list, |l| show_builds(&l.builds))?;
            Ok(0)
        }
        BuildsCommand::Get { id } => {
            let b = client.get_build(id).await?;
            emit_with(g, &b, |b| show_builds(std::slice::from_ref(b)))?;
            Ok(0)
        }
        BuildsCommand::Logs { id, follow } => {
            crate::jobs::jobs(
                g,
                &JobsCommand::Logs {
                    id: id.clone(),
                    follow: *follow,
                    raw: false,
                },
            )
            .await
        }
    }
}

/// The exit code of a workflow command that waited and stopped at a step
/// waiting for an approval.
pub const EXIT_WAITING_APPROVAL: u8 = 3;
/// The exit code of a workflow that ended partial: a denial left steps out.
pub const EXIT_PARTIAL: u8 = 4;

/// How a workflow ended (or where it stopped), as an exit code: 0 when it
/// succeeded, [`EXIT_WAITING_APPROVAL`] at an approval,
/// [`EXIT_PARTIAL`] when a denial left part of it out, 1 otherwise.
pub(crate) fn exit_of(wf: &WorkflowInfo) -> u8 {
    match wf.status {
        WorkflowStatus::Succeeded => 0,
        WorkflowStatus::Partial => EXIT_PARTIAL,
        s if s.is_active() && waiting_step(wf).is_some() => EXIT_WAITING_APPROVAL,
        _ => 1,
    }
}

/// The step that waits for a person: asking, and not yet approved (an
/// approved one waits for the engine to dispatch it).
fn waiting_step(wf: &WorkflowInfo) -> Option<&nuon_core::wire::WorkflowStepInfo> {
    wf.steps
        .iter()
        .find(|s| s.status == StepStatus::WaitingApproval && s.approved_at_ms.is_none())
}

/// What an operator needs at an approval: the plan's summary and the
/// exact commands that approve or deny it.
fn approval_prompt(wf: &WorkflowInfo) -> Option<String> {
    let step = waiting_step(wf)?;
    let at = wf.steps.iter().position(|s| s.index == step.index)?;
    let plan = nuon_core::workflow::plan_step_of(&wf.steps, at)
        .filter(|p| p.outputs.get("changes").is_some());
    let mut text = format!("{} waits for an approval.", step.name);
    if let Some(p) = plan {
        let c = &p.outputs["changes"];
        text.push_str(&format!(
            " Its plan ({}): {} to add, {} to change, {} to destroy",
            p.name, c["add"], c["change"], c["destroy"]
        ));
        for r in nuon_core::workflow::plan_resources(c).iter().take(20) {
            text.push_str(&format!("\n    {} ({})", r.address, r.actions));
            for v in &r.values {
                text.push_str(&format!("\n      {v}"));
            }
        }
        // What the policies warn of goes with the plan to approve.
        for w in p.outputs["policy_warnings"]
            .as_array()
            .into_iter()
            .flatten()
        {
            text.push_str(&format!(
                "\n  policy warning: {}",
                w.as_str().unwrap_or("?")
            ));
        }
    }
    text.push_str(&format!(
        "\n  approve: nuon workflows approve {id} --step \"{name}\"\n  deny:    nuon workflows deny {id} --step \"{name}\"",
        id = wf.id,
        name = step.name
    ));
    Some(text)
}

fn kind_name(kind: WorkflowKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// How [`watch`] follows a workflow.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Watch {
    /// Print the log lines of its jobs too.
    pub(crate) logs: bool,
    /// Stop at a step that waits for an approval, with its plan and the
    /// commands that answer it.
    pub(crate) stop_at_approval: bool,
    /// Where the steps are shown (standard error under `--json`).
    pub(crate) progress: Progress,
}

impl Watch {
    /// As a command of `g` follows a workflow: to its end or its next
    /// approval, without logs, its progress where `g`'s goes.
    pub(crate) fn of(g: &Global) -> Self {
        Watch {
            logs: false,
            stop_at_approval: true,
            progress: Progress::of(g),
        }
    }
}

/// Follows a workflow until it ends (or waits for an approval, with
/// `stop_at_approval`), printing each step as its status changes and, with
/// `logs`, the log lines of its jobs. On a terminal the step list is
/// redrawn in place; otherwise one line per change.
pub(crate) async fn watch(
    client: &ControlClient,
    id: &str,
    how: Watch,
) -> Result<WorkflowInfo, CliError> {
    let Watch {
        logs,
        stop_at_approval,
        progress: to,
    } = how;
    let progress = || to.writer();
    let tty = to.is_terminal() && !logs;
    // A line is printed when a step's status or reason changes.
    let mut seen: BTreeMap<u32, (StepStatus, Option<String>)> = BTreeMap::new();
    let mut cursors: BTreeMap<JobId, u64> = BTreeMap::new();
    let mut drawn = 0usize;
    let started = std::time::Instant::now();
    loop {
        let wf = client.get_workflow(id).await?;
        let mut out = progress();
        if tty {
            if drawn > 0 {
                let _ = write!(out, "\x1b[{drawn}A\x1b[J");
            }
            let _ = writeln!(
                out,
                "workflow {} ({}) {} [{:.0?}]",
                wf.id,
                kind_name(wf.kind),
                wf.status,
                started.elapsed()
            );
            for s in &wf.steps {
                let mark = match s.status {
                    StepStatus::Succeeded => "✓",
                    StepStatus::Failed => "✗",
                    StepStatus::Running => "…",
                    StepStatus::WaitingApproval => "?",
                    StepStatus::Skipped | StepStatus::Denied | StepStatus::Cancelled => "-",
                    StepStatus::Pending => " ",
                };
                let _ = writeln!(out, " {mark} {}", step_line(s));
            }
            drawn = wf.steps.len() + 1;
        } else {
            // The counter as wide for every step, so the names line up.
            let width = wf.steps.len().to_string().len();
            for s in &wf.steps {
                let now = (s.status, s.reason.clone());
                if seen.get(&s.index) != Some(&now) {
                    seen.insert(s.index, now);
                    if s.status != StepStatus::Pending {
                        let _ = writeln!(
                            out,
                            "[{:>width$}/{}] {}",
                            s.index + 1,
                            wf.steps.len(),
                            step_line(s)
                        );
                    }
                }
                // Each line on stdout, behind its step's line (stderr
                // lines marked `!`, the runner's own with `runner:`).
                if let (true, Some(job)) = (logs && s.status != StepStatus::Pending, &s.job_id) {
                    let cursor = cursors.entry(job.clone()).or_insert(0);
                    print_new_lines(client, &s.name, job, cursor, &mut *out).await?;
                }
            }
        }
        let _ = out.flush();
        drop(out);
        let waiting = waiting_step(&wf).is_some();
        if !wf.status.is_active() || (stop_at_approval && waiting) {
            let mut out = progress();
            if !tty {
                let _ = writeln!(out, "workflow {} {}", wf.id, wf.status);
            }
            if waiting
                && stop_at_approval
                && let Some(prompt) = approval_prompt(&wf)
            {
                let _ = writeln!(out, "{prompt}");
            }
            // A change it did not deploy stays desired: said, with what to
            // do about it.
            let deployed = wf.status == WorkflowStatus::Succeeded
                && !wf.steps.iter().any(|s| s.status == StepStatus::Denied);
            if !wf.status.is_active()
                && !deployed
                && let Ok(i) = client.get_install(wf.install_id.as_str()).await
                && let Some(p) = &i.pending
            {
                let _ = writeln!(
                    out,
                    "install {} holds values not deployed: {}\napply them with `{}`, or go back to what is deployed with `{}`",
                    i.name,
                    crate::terminal_safe(&p.summary()),
                    p.apply,
                    p.discard
                );
            }
            return Ok(wf);
        }
        tokio::time::sleep(Duration::from_millis(if tty { 200 } else { 50 })).await;
    }
}

/// A step as `watch` shows it: its name, status and reason.
fn step_line(s: &nuon_core::wire::WorkflowStepInfo) -> String {
    let why = s
        .reason
        .as_deref()
        .map(|r| format!(" ({r})"))
        .unwrap_or_default();
    format!("{:<32} {}{why}", s.name, s.status)
}

/// Prints the log lines of `job` (of step `step`) from `cursor` on, and
/// moves `cursor` past them.
async fn print_new_lines(
    client: &ControlClient,
    step: &str,
    job: &JobId,
    cursor: &mut u64,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    loop {
        let page = client.job_logs(job, *cursor).await?;
        if page.lines.is_empty() {
            return Ok(());
        }
        *cursor = page.next;
        for l in &page.lines {
            let mark = match l.stream {
                nuon_core::wire::LogStream::Stdout => "|",
                nuon_core::wire::LogStream::Stderr => "!",
                nuon_core::wire::LogStream::System => "| runner:",
            };
            let _ = writeln!(
                out,
                "    {} {mark} {}",
                crate::terminal_safe(step),
                crate::terminal_safe(&l.text)
            );
        }
    }
}

/// Whether a command that starts a workflow follows it, and how.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Follow {
    /// Follow it to its end (or its next approval).
    pub(crate) wait: bool,
    /// With `wait`, print the log lines of its jobs too.
    pub(crate) logs: bool,
}

/// Starts the workflow `req` asks for and, with `follow.wait`, follows it
/// to its end.
pub(crate) async fn start_with(
    g: &Global,
    install: &str,
    req: CreateWorkflow,
    follow: Follow,
) -> Result<u8, CliError> {
    let client = client(g)?;
    let kind = req.kind;
    let wf = client.start_workflow(install, &req).await?;
    if !follow.wait {
        emit_with(g, &wf, |wf| {
            outln!(
                "workflow {} ({}) started with {} steps; follow it with `nuon workflows watch {}`",
                wf.id,
                kind_name(kind),
                wf.steps.len(),
                wf.id
            );
            if let Some(queued) = wf
                .steps
                .first()
                .and_then(|s| s.reason.as_deref())
                .filter(|_| wf.status == WorkflowStatus::Pending)
            {
                outln!("{queued}");
            }
        })?;
        return Ok(0);
    }
    let how = Watch {
        logs: follow.logs,
        ..Watch::of(g)
    };
    let done = watch(&client, wf.id.as_str(), how).await?;
    for_machines(g, &done)?;
    Ok(exit_of(&done))
}

impl Render for InstallOutputs {
    fn render(&self) {
        let mut rows = Vec::new();
        for (k, v) in &self.sandbox {
            rows.push(vec!["sandbox".into(), k.clone(), v.to_string()]);
        }
        for (c, outs) in &self.components {
            for (k, v) in outs {
                rows.push(vec![c.clone(), k.clone(), v.to_string()]);
            }
        }
        for (a, outs) in &self.actions {
            for (k, v) in outs {
                rows.push(vec![format!("action {a}"), k.clone(), v.to_string()]);
            }
        }
        table(&["FROM", "OUTPUT", "VALUE"], rows);
    }
}

pub(crate) async fn outputs(g: &Global, install: &str) -> Result<u8, CliError> {
    emit(g, &client(g)?.install_outputs(install).await?)?;
    Ok(0)
}

#[derive(Debug, Subcommand)]
pub(crate) enum WorkflowActCommand {
    /// Approve the step that waits for an approval (or --step); with
    /// --all, every later step of the workflow that would ask too.
    Approve {
        /// The workflow's id.
        id: String,
        /// The step, by number (as `workflows get` shows it) or name
        /// (`apply database`).
        #[arg(long)]
        step: Option<String>,
        /// Approve the rest of the workflow too: its later applies run
        /// after their plans without asking (each recorded in the audit
        /// trail as approved by you).
        #[arg(long)]
        all: bool,
        /// Follow the workflow to its end (or its next approval: exit 3).
        #[arg(long)]
        wait: bool,
    },
    /// Deny the step that waits for an approval (or --step): it and the
    /// steps that depend on it are skipped.
    Deny {
        /// The workflow's id.
        id: String,
        /// The step, by number (as `workflows get` shows it) or name.
        #[arg(long)]
        step: Option<String>,
        /// Follow the workflow to its end (or its next approval: exit 3).
        #[arg(long)]
        wait: bool,
    },
    /// Answer the step that waits for an approval (or --step) with one of
    /// Nuon's responses: approve; deny (the workflow fails);
    /// deny-skip-current (the step is skipped, the rest runs);
    /// deny-skip-current-and-dependents; retry (plan again, then ask
    /// again).
    Respond {
        /// The workflow's id.
        id: String,
        /// The response.
        #[arg(value_parser = nuon_core::workflow::ApprovalResponse::ALL)]
        response: String,
        /// The step, by number (as `workflows get` shows it) or name.
        #[arg(long)]
        step: Option<String>,
        /// Follow the workflow to its end (or its next approval: exit 3).
        #[arg(long)]
        wait: bool,
    },
    /// Cancel a workflow.
    Cancel {
        /// The workflow's id.
        id: String,
    },
    /// Retry a failed workflow from its failed step (an apply from its plan).
    Retry {
        /// The workflow's id.
        id: String,
        /// The step, by number (as `workflows get` shows it) or name.
        #[arg(long)]
        step: Option<String>,
        /// Follow the workflow to its end.
        #[arg(long)]
        wait: bool,
    },
    /// Skip a failed (or cancelled) workflow's failed step (or --step),
    /// with what it leads to (a plan's apply, an apply's health checks),
    /// and run the rest.
    Skip {
        /// The workflow's id.
        id: String,
        /// The step, by number (as `workflows get` shows it) or name.
        #[arg(long)]
        step: Option<String>,
        /// Follow the workflow to its end.
        #[arg(long)]
        wait: bool,
    },
    /// Follow a workflow's steps until it ends, or waits for an approval
    /// (exit 3, with the plan and the commands that answer it).
    Watch {
        /// The workflow's id.
        id: String,
        /// Print the log lines of its jobs too.
        #[arg(long)]
        logs: bool,
    },
}

/// A step as the API names it: numbers are shown from 1, the API's from 0.
fn step_arg(step: &Option<String>) -> Option<String> {
    step.as_ref().map(|s| match s.parse::<u32>() {
        Ok(n) if n >= 1 => (n - 1).to_string(),
        _ => s.clone(),
    })
}

pub(crate) async fn workflow_act(g: &Global, command: &WorkflowActCommand) -> Result<u8, CliError> {
    let client = client(g)?;
    let (wf, follow) = match command {
        WorkflowActCommand::Approve {
            id,
            step,
            all,
            wait,
        } => {
            let req = nuon_core::wire::ApproveSteps {
                step: step_arg(step),
                all: *all,
            };
            (client.approve_steps(id, &req).await?, *wait)
        }
        WorkflowActCommand::Deny { id, step, wait } => (
            client.deny_step(id, step_arg(step).as_deref()).await?,
            *wait,
        ),
        WorkflowActCommand::Respond {
            id,
            response,
            step,
            wait,
        } => {
            let response = response.parse().map_err(CliError::usage)?;
            (
                client
                    .respond_to_approval(id, step_arg(step).as_deref(), response)
                    .await?,
                *wait,
            )
        }
        WorkflowActCommand::Cancel { id } => (client.cancel_workflow(id).await?, false),
        WorkflowActCommand::Retry { id, step, wait } => (
            client.retry_workflow(id, step_arg(step).as_deref()).await?,
            *wait,
        ),
        WorkflowActCommand::Skip { id, step, wait } => (
            client.skip_step(id, step_arg(step).as_deref()).await?,
            *wait,
        ),
        WorkflowActCommand::Watch { id, logs } => {
            let how = Watch {
                logs: *logs,
                ..Watch::of(g)
            };
            let wf = watch(&client, id, how).await?;
            for_machines(g, &wf)?;
            return Ok(exit_of(&wf));
        }
    };
    if follow {
        let wf = watch(&client, wf.id.as_str(), Watch::of(g)).await?;
        for_machines(g, &wf)?;
        return Ok(exit_of(&wf));
    }
    emit_with(g, &wf, |wf| {
        outln!("workflow {} is {}", wf.id, wf.status);
        for s in wf.steps.iter().filter(|s| s.status != StepStatus::Pending) {
            outln!("  {:<32} {}", s.name, s.status);
        }
    })?;
    Ok(0)
}
