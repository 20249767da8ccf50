//! `nuon apps render`: every value the steps of a workflow would be given,
//! rendered offline from a config directory, as the control plane renders
//! them when it dispatches (`nuon_core::rendered`): Terraform
//! variables, environment and var files, Helm values, manifests and action
//! scripts. Outputs not given are `(known after apply)`, as Terraform shows
//! them; the install stack's are stand-ins in Nuon's contract.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use nuon_appconfig::stand_in_id;
use nuon_core::app::template::RenderContext;
use nuon_core::app::{self, AppConfig, SourceFile};
use nuon_core::rendered::{self, Artifact, Problem};
use nuon_core::stack::contract;
use nuon_core::wire::InstallOutputs;
use nuon_core::workflow::WorkflowKind;
use serde_json::Value;

use crate::output::try_emit_with;
use crate::{CliError, EXIT_INVALID_CONFIG, Global};

/// What `nuon apps render` takes.
#[derive(Debug, clap::Args)]
pub(crate) struct RenderArgs {
    /// The config directory (the one with metadata.toml).
    pub(crate) dir: PathBuf,
    /// The install file whose inputs and overrides to render with
    /// (`installs/NAME.toml`, or NAME); without it, each input's default.
    #[arg(long)]
    pub(crate) install: Option<String>,
    /// The install stack's outputs: a JSON object, as the stack reports
    /// them (`{"region": "eu-west-1", ...}`) or in Nuon's contract.
    /// Without it, stand-ins.
    #[arg(long, value_name = "FILE")]
    pub(crate) stack_outputs: Option<PathBuf>,
    /// Outputs of the sandbox, components and actions, as `nuon installs
    /// outputs INSTALL --json` prints them. Without it, `(known after
    /// apply)`.
    #[arg(long, value_name = "FILE")]
    pub(crate) outputs: Option<PathBuf>,
    /// The workflow whose steps to render: provision, deploy, teardown,
    /// deprovision or reprovision.
    #[arg(long, default_value = "provision")]
    pub(crate) workflow: String,
    /// Write each rendered value to a file of DIR (`STEP/WHAT`) instead of
    /// printing it.
    #[arg(long, value_name = "DIR")]
    pub(crate) out: Option<PathBuf>,
}

fn usage(message: String) -> CliError {
    CliError {
        message,
        code: 64,
        api_code: None,
    }
}

fn read_json(flag: &str, path: &Path) -> Result<Value, CliError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("--{flag}: cannot read {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| usage(format!("--{flag}: {} is not JSON: {e}", path.display())))
}

pub(crate) fn render(g: &Global, a: &RenderArgs) -> Result<u8, CliError> {
    let kind: WorkflowKind =
        serde_json::from_value(Value::String(a.workflow.clone())).map_err(|_| {
            usage(format!(
                "--workflow {:?}: give provision, deploy, teardown, deprovision or reprovision",
                a.workflow
            ))
        })?;
    let files = nuon_client::app_dir::read_dir(&a.dir).map_err(|d| invalid(&a.dir, &d.0))?;
    let (config, diags) = nuon_appconfig::parse(&files);
    let Some(mut config) = config else {
        return Err(invalid(&a.dir, &diags.0));
    };
    let by_name: BTreeMap<&str, &str> = files
        .iter()
        .map(|f| (f.name.as_str(), f.text.as_str()))
        .collect();
    // Files a `contents` names, as `nuon apps sync` sends them: from the directory.
    let missing = app::inline_file_refs(&mut config, &|p| {
        (by_name.get(p).map(|t| t.to_string()))
            .or_else(|| std::fs::read_to_string(a.dir.join(p)).ok())
    });
    if !missing.is_empty() {
        return Err(usage(missing.join("; ")));
    }
    let (ctx, install) = context(&config, a, &files)?;
    let overrides = install
        .as_ref()
        .map(|i| i.components.clone())
        .unwrap_or_default();
    let name = ctx.install_name.clone();
    let (artifacts, problems) = rendered::render_workflow(&config, kind, &ctx, &overrides, &name);
    show(g, a.out.as_deref(), &artifacts, &problems, &files)?;
    Ok(if problems.is_empty() { 0 } else { 1 })
}

fn invalid(dir: &Path, diags: &[app::Diagnostic]) -> CliError {
    for d in diags {
        eprintln!("{d}");
    }
    CliError {
        message: format!("{} is not a valid app config", dir.display()),
        code: EXIT_INVALID_CONFIG,
        api_code: None,
    }
}

/// The values a render reads: the install file's inputs over the
/// defaults, stand-ins for ids and secrets, and the outputs given or
/// stood in for.
fn context(
    config: &AppConfig,
    a: &RenderArgs,
    files: &[SourceFile],
) -> Result<(RenderContext, Option<app::InstallDecl>), CliError> {
    let install = match &a.install {
        None => None,
        Some(want) => {
            let stem = want
                .trim_start_matches("./")
                .trim_start_matches("installs/")
                .trim_end_matches(".toml");
            let found = config.installs.iter().find(|i| i.name == stem).or_else(|| {
                // By its file's name, when the file names it otherwise.
                let file = format!("installs/{stem}.toml");
                files.iter().find(|f| f.name == file).and_then(|f| {
                    config
                        .installs
                        .iter()
                        .find(|i| f.text.contains(&format!("{:?}", i.name)))
                })
            });
            Some(found.cloned().ok_or_else(|| {
                let known: Vec<&str> = config.installs.iter().map(|i| i.name.as_str()).collect();
                usage(format!(
                    "--install {want:?}: no such install file in {} (it has: {})",
                    a.dir.display(),
                    if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    }
                ))
            })?)
        }
    };
    let mut inputs: BTreeMap<String, Value> = config
        .inputs
        .iter()
        .filter_map(|i| i.default.clone().map(|d| (i.name.clone(), d)))
        .collect();
    if let Some(i) = &install {
        inputs.extend(i.inputs.clone());
    }
    let mut ctx = RenderContext {
        install_id: stand_in_id(nuon_core::InstallId::PREFIX),
        install_name: install
            .as_ref()
            .map_or("install".into(), |i| i.name.clone()),
        app_id: stand_in_id(nuon_core::AppId::PREFIX),
        app_name: a
            .dir
            .file_name()
            .map_or("app".into(), |n| n.to_string_lossy().into_owned()),
        org_id: stand_in_id(nuon_core::OrgId::PREFIX),
        org_name: "(org)".into(),
        runner_id: stand_in_id(nuon_core::RunnerId::PREFIX),
        inputs,
        secrets: config
            .secrets
            .iter()
            .map(|s| (s.name.clone(), format!("(secret {})", s.name)))
            .collect(),
        ..Default::default()
    };
    if let Some(path) = &a.outputs {
        let o: InstallOutputs = serde_json::from_value(read_json("outputs", path)?)
            .map_err(|e| usage(format!("--outputs {}: {e}", path.display())))?;
        ctx.sandbox_outputs = Value::Object(o.sandbox);
        ctx.component_outputs = o
            .components
            .into_iter()
            .map(|(k, v)| (k, Value::Object(v)))
            .collect();
        ctx.action_outputs = o
            .actions
            .into_iter()
            .map(|(k, v)| (k, Value::Object(v)))
            .collect();
        ctx.install_stack_outputs = o.install_stack;
    }
    // The roles as they render for this install: what the stack's maps
    // are keyed by.
    let runner_type = config
        .runner
        .as_ref()
        .map_or("local", |r| r.runner_type.as_str());
    let permissions: app::Permissions = serde_json::to_value(&config.permissions)
        .ok()
        .and_then(|v| rendered::render_value(&v, &ctx, "permissions").ok())
        .and_then(|v| serde_json::from_value(v).ok())
        .unwrap_or_default();
    let stack_given = a.stack_outputs.is_some() || !ctx.install_stack_outputs.is_empty();
    match &a.stack_outputs {
        Some(path) => {
            let given = read_json("stack-outputs", path)?;
            let Value::Object(m) = given else {
                return Err(usage(format!(
                    "--stack-outputs {}: give a JSON object",
                    path.display()
                )));
            };
            let reported: Option<BTreeMap<String, String>> = m
                .iter()
                .map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_owned())))
                .collect();
            ctx.install_stack_outputs = match reported {
                // Flat text, as a stack reports it: made Nuon's contract.
                Some(r) => contract::nuon_outputs(&r, runner_type, &permissions),
                None => m.into_iter().collect(),
            };
        }
        None if ctx.install_stack_outputs.is_empty() => {
            ctx.install_stack_outputs = contract::stand_in_outputs(runner_type, &permissions);
        }
        None => {}
    }
    rendered::fill_unknown_outputs(config, &mut ctx, stack_given);
    Ok((ctx, install))
}

/// Where a problem is: the first place in the config's files that writes
/// the reference its message names, as FILE:LINE:COL; the file of the part
/// the message is about first (`sandbox …` in sandbox.toml, `component web
/// …` in the file naming "web").
fn place(files: &[SourceFile], message: &str) -> Option<String> {
    let at = message
        .find(".nuon.")
        .or_else(|| message.find(".action."))?;
    let token: String = message[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .collect();
    let words: Vec<&str> = message.split_whitespace().take(2).collect();
    let about = |f: &&SourceFile| match words[..] {
        ["sandbox", ..] => f.name == "sandbox.toml",
        [_, name] => f.text.contains(&format!("\"{name}\"")),
        _ => false,
    };
    files.iter().filter(about).chain(files).find_map(|f| {
        let i = f.text.find(&token)?;
        let line = f.text[..i].matches('\n').count() + 1;
        let col = f.text[..i]
            .rsplit('\n')
            .next()
            .map_or(0, |l| l.chars().count())
            + 1;
        Some(format!("{}:{line}:{col}", f.name))
    })
}

/// Prints rendered values (or writes them under `out`) and each problem,
/// placed in `files` when they are given.
pub(crate) fn show(
    g: &Global,
    out: Option<&Path>,
    artifacts: &[Artifact],
    problems: &[Problem],
    files: &[SourceFile],
) -> Result<(), CliError> {
    let placed: Vec<(Option<String>, &Problem)> = problems
        .iter()
        .map(|p| (place(files, &p.message), p))
        .collect();
    let problems_doc: Vec<Value> = placed
        .iter()
        .map(|(at, p)| serde_json::json!({"at": at, "step": p.step, "message": p.message}))
        .collect();
    let doc = serde_json::json!({"artifacts": artifacts, "problems": problems_doc});
    try_emit_with(g, &doc, |_| {
        match out {
            Some(out) => write_artifacts(out, artifacts)?,
            None => {
                for x in artifacts {
                    outln!("--- {}: {}", x.step, x.what);
                    outln!("{}", x.text);
                }
            }
        }
        for (at, p) in &placed {
            eprintln!(
                "{}: {}: {}",
                at.as_deref().unwrap_or("-"),
                p.step,
                p.message
            );
        }
        Ok(())
    })
}

/// Writes rendered values under `out`, a directory a step, a file a value.
fn write_artifacts(out: &Path, artifacts: &[Artifact]) -> Result<(), CliError> {
    for x in artifacts {
        let safe = |s: &str| s.replace(['/', ' '], "_");
        let dir = out.join(safe(&x.step));
        std::fs::create_dir_all(&dir)
            .and_then(|()| std::fs::write(dir.join(safe(&x.what)), &x.text))
            .map_err(|e| usage(format!("--out {}: {e}", out.display())))?;
    }
    outln!(
        "wrote {} rendered values to {}",
        artifacts.len(),
        out.display()
    );
    Ok(())
}
