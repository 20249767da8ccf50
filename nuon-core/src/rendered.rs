//! What a step is given, rendered for an install: a Terraform module's
//! variables, environment and var files; a chart's release, namespace,
//! values and values files; a manifest; a Pulumi program's stack config.
//! The control plane's jobs are made from these ([`terraform_inputs`],
//! [`helm_inputs`], [`manifest_text`], [`pulumi_inputs`]),
//! and `nuon apps render` shows them offline ([`render_workflow`]), so what
//! a vendor sees in CI is what a runner gets.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::app::template::{self, RenderContext};
use crate::app::{AppConfig, Component, ComponentKind, ComponentOverride};
use crate::workflow::{self, StepKind, WorkflowKind};

/// Renders every string in `v`. A template that renders to nothing is an
/// error: a Terraform variable set to "" by accident deploys wrong.
pub fn render_value(v: &Value, ctx: &RenderContext, what: &str) -> Result<Value, String> {
    Ok(match v {
        Value::String(s) => Value::String(render_text(s, ctx, what)?),
        Value::Array(a) => Value::Array(
            a.iter()
                .enumerate()
                .map(|(i, x)| render_value(x, ctx, &format!("{what}[{i}]")))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| Ok((k.clone(), render_value(x, ctx, &format!("{what}.{k}"))?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// Renders one text (`what` in errors).
pub fn render_text(s: &str, ctx: &RenderContext, what: &str) -> Result<String, String> {
    let out = template::render(s, ctx).map_err(|e| format!("{what}: {}", e.message))?;
    if out.trim().is_empty() && s.contains("{{") {
        return Err(format!(
            "{what}: {s:?} renders to nothing; give the value it reads (an input, secret or output) a value"
        ));
    }
    Ok(out)
}

/// Renders every value of `m` (`what KEY` in errors).
pub fn render_map(
    m: &BTreeMap<String, Value>,
    ctx: &RenderContext,
    what: &str,
) -> Result<BTreeMap<String, Value>, String> {
    m.iter()
        .map(|(k, v)| Ok((k.clone(), render_value(v, ctx, &format!("{what} {k}"))?)))
        .collect()
}

/// Renders every value of a map of texts (`what KEY` in errors).
pub fn render_env(
    m: &BTreeMap<String, String>,
    ctx: &RenderContext,
    what: &str,
) -> Result<BTreeMap<String, String>, String> {
    m.iter()
        .map(|(k, v)| Ok((k.clone(), render_text(v, ctx, &format!("{what} {k}"))?)))
        .collect()
}

/// Renders each text of `v` (`what N` in errors).
pub fn render_texts(v: &[String], ctx: &RenderContext, what: &str) -> Result<Vec<String>, String> {
    v.iter()
        .enumerate()
        .map(|(i, t)| render_text(t, ctx, &format!("{what} {i}")))
        .collect()
}

/// A Terraform module's inputs, rendered.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct TerraformInputs {
    /// `[vars]`.
    pub vars: BTreeMap<String, Value>,
    /// `[env_vars]`.
    pub env: BTreeMap<String, String>,
    /// The var files, in order; the install's own `tf_vars` last.
    pub var_files: Vec<String>,
}

/// The inputs of the sandbox (`component` none) or a module component,
/// with the install's own `tf_vars` (`over`, of install `install`) read
/// last so they win.
pub fn terraform_inputs(
    config: &AppConfig,
    component: Option<&str>,
    over: Option<(&ComponentOverride, &str)>,
    ctx: &RenderContext,
) -> Result<TerraformInputs, String> {
    let (who, vars, env, files) = match component {
        None => {
            let sb = config
                .sandbox
                .as_ref()
                .ok_or("the app config has no sandbox")?;
            ("sandbox".to_owned(), &sb.vars, &sb.env_vars, &sb.var_files)
        }
        Some(name) => {
            let t = config
                .component(name)
                .ok_or_else(|| format!("no component {name:?}"))?
                .terraform()
                .ok_or_else(|| format!("component {name} is not a terraform_module"))?;
            (
                format!("component {name}"),
                &t.vars,
                &t.env_vars,
                &t.var_files,
            )
        }
    };
    let mut var_files = render_texts(files, ctx, &format!("{who} var file"))?;
    if let Some((o, install)) = over
        && let Some(text) = o.tf_vars.as_deref()
    {
        let what = format!("{who} tf_vars override of install {install}");
        let text = render_text(text, ctx, &what)?;
        var_files.push(crate::app::tf_vars_file(&text).map_err(|e| format!("{what}: {e}"))?);
    }
    Ok(TerraformInputs {
        vars: render_map(vars, ctx, &format!("{who} var"))?,
        env: render_env(env, ctx, &format!("{who} env var"))?,
        var_files,
    })
}

/// A Pulumi program's inputs, rendered.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PulumiInputs {
    /// The runtime, the CLI version and the stack's config, rendered.
    pub settings: crate::app::Pulumi,
    /// `[env_vars]`.
    pub env: BTreeMap<String, String>,
}

/// The inputs of the Pulumi sandbox (`component` none) or a `pulumi`
/// component.
pub fn pulumi_inputs(
    config: &AppConfig,
    component: Option<&str>,
    ctx: &RenderContext,
) -> Result<PulumiInputs, String> {
    let (who, settings, env) = match component {
        None => {
            let sb = config
                .sandbox
                .as_ref()
                .ok_or("the app config has no sandbox")?;
            ("sandbox".to_owned(), sb.pulumi.as_ref(), &sb.env_vars)
        }
        Some(name) => {
            let p = config
                .component(name)
                .ok_or_else(|| format!("no component {name:?}"))?
                .pulumi()
                .ok_or_else(|| format!("component {name} is not a Pulumi program"))?;
            (format!("component {name}"), Some(&p.pulumi), &p.env_vars)
        }
    };
    let settings = settings.ok_or_else(|| format!("{who} is not a Pulumi program"))?;
    Ok(PulumiInputs {
        settings: crate::app::Pulumi {
            config: render_env(&settings.config, ctx, &format!("{who} config"))?,
            ..settings.clone()
        },
        env: render_env(env, ctx, &format!("{who} env var"))?,
    })
}

/// A chart's inputs, rendered.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct HelmInputs {
    /// The release's name.
    pub release: String,
    /// Its namespace (`default` when the config gives none).
    pub namespace: String,
    /// `[values]`, with the install's own Helm values merged over them.
    pub values: Map<String, Value>,
    /// The values files, in order.
    pub values_files: Vec<String>,
}

/// A chart component's inputs, with the install's own Helm values
/// (`over`, of install `install`) merged over the config's.
pub fn helm_inputs(
    c: &Component,
    over: Option<(&ComponentOverride, &str)>,
    ctx: &RenderContext,
) -> Result<HelmInputs, String> {
    let who = format!("component {}", c.name);
    let h = c
        .helm()
        .ok_or_else(|| format!("{who} is not a helm_chart"))?;
    let mut values = crate::app::helm_values(&render_map(&h.values, ctx, &format!("{who} value"))?)
        .map_err(|e| format!("{who}: {e}"))?;
    if let Some((o, install)) = over
        && let Some(text) = o.helm_values.as_deref()
    {
        let what = format!("{who} helm_values override of install {install}");
        let text = render_text(text, ctx, &what)?;
        let over = crate::app::yaml_mapping(&text).map_err(|e| format!("{what}: {e}"))?;
        crate::app::merge_values(&mut values, over);
    }
    Ok(HelmInputs {
        release: h.chart_name.to_ascii_lowercase().replace('_', "-"),
        namespace: match &h.namespace {
            Some(ns) => render_text(ns, ctx, &format!("{who} namespace"))?,
            None => "default".into(),
        },
        values,
        values_files: render_texts(&h.values_files, ctx, &format!("{who} values file"))?,
    })
}

/// A manifest component's manifest, rendered (none for a kustomization).
pub fn manifest_text(c: &Component, ctx: &RenderContext) -> Result<Option<String>, String> {
    c.manifest()
        .and_then(|m| m.manifest.as_deref())
        .map(|m| render_text(m, ctx, &format!("component {} manifest", c.name)))
        .transpose()
}

/// One thing a workflow's step is given, rendered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Artifact {
    /// The step (`plan web`, `action migrate`).
    pub step: String,
    /// What it is (`var region`, `values`, `manifest`, `step run command`).
    pub what: String,
    /// Its text (JSON for a variable or values that are not text).
    pub text: String,
}

/// A value of a step that does not render.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Problem {
    /// The step.
    pub step: String,
    /// What went wrong, naming the value.
    pub message: String,
}

/// What a workflow's steps would be given, rendered for an install
/// (`GET /v1/installs/{id}/render/{workflow}`): secrets and sensitive
/// values as stand-ins, outputs not known yet as [`KNOWN_AFTER_APPLY`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RenderedWorkflow {
    /// The workflow rendered.
    pub workflow: WorkflowKind,
    /// Each value, by step.
    pub artifacts: Vec<Artifact>,
    /// Each value that does not render.
    pub problems: Vec<Problem>,
}

/// Every value each step of a `kind` workflow would be given, rendered
/// with `ctx` (the install's overrides in `overrides`, by component): the
/// offline twin of what the control plane renders as it dispatches.
pub fn render_workflow(
    config: &AppConfig,
    kind: WorkflowKind,
    ctx: &RenderContext,
    overrides: &BTreeMap<String, ComponentOverride>,
    install: &str,
) -> (Vec<Artifact>, Vec<Problem>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    let text_of = |v: &Value| match v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    };
    for step in workflow::plan(config, kind, false, None) {
        let mut add = |what: String, text: String| {
            out.push(Artifact {
                step: step.name.clone(),
                what,
                text,
            })
        };
        let over = step
            .target
            .as_deref()
            .and_then(|t| overrides.get(t))
            .map(|o| (o, install));
        let component = step.target.as_deref().and_then(|t| config.component(t));
        let done: Result<(), String> = (|| {
            match step.kind {
                StepKind::AwaitStack => {
                    for f in install_stack(config, ctx)?.files {
                        add(format!("install stack {}", f.path), f.contents);
                    }
                }
                StepKind::SandboxPlan | StepKind::SandboxDestroyPlan
                    if config.sandbox.as_ref().is_some_and(|s| s.pulumi.is_some()) =>
                {
                    pulumi(&mut add, pulumi_inputs(config, None, ctx)?);
                }
                StepKind::SandboxPlan | StepKind::SandboxDestroyPlan => {
                    terraform(
                        &mut add,
                        terraform_inputs(config, None, None, ctx)?,
                        &text_of,
                    );
                }
                StepKind::Plan | StepKind::DestroyPlan => match component {
                    Some(c) if c.kind() == ComponentKind::HelmChart => {
                        let h = helm_inputs(c, over, ctx)?;
                        add(
                            "release".into(),
                            format!("{} in namespace {}", h.release, h.namespace),
                        );
                        add("values".into(), text_of(&Value::Object(h.values)));
                        for (i, f) in h.values_files.into_iter().enumerate() {
                            add(format!("values file {i}"), f);
                        }
                    }
                    Some(c) if c.kind() == ComponentKind::KubernetesManifest => {
                        if let Some(ns) = c.spec.namespace() {
                            let who = format!("component {} namespace", c.name);
                            add("namespace".into(), render_text(ns, ctx, &who)?);
                        }
                        if let Some(m) = manifest_text(c, ctx)? {
                            add("manifest".into(), m);
                        }
                        // Built by the runner from the synced source.
                        if let Some(k) = c.manifest().and_then(|m| m.kustomize.as_ref()) {
                            let helm = if k.enable_helm { ", --enable-helm" } else { "" };
                            add(
                                "kustomization".into(),
                                format!(
                                    "{} of the component's source (kustomize build{helm})",
                                    k.path
                                ),
                            );
                        }
                    }
                    Some(c) if c.kind() == ComponentKind::TerraformModule => {
                        let t = terraform_inputs(config, Some(&c.name), over, ctx)?;
                        terraform(&mut add, t, &text_of);
                    }
                    Some(c) if c.kind() == ComponentKind::Pulumi => {
                        pulumi(&mut add, pulumi_inputs(config, Some(&c.name), ctx)?);
                    }
                    _ => {}
                },
                StepKind::Action => {
                    let Some(a) = step
                        .target
                        .as_deref()
                        .and_then(|t| config.actions.iter().find(|a| a.name == t))
                    else {
                        return Ok(());
                    };
                    for s in &a.steps {
                        let who = format!("action {} step {}", a.name, s.name);
                        for (key, text) in [
                            ("command", &s.command),
                            ("inline_contents", &s.inline_contents),
                        ] {
                            if let Some(t) = text {
                                add(format!("step {} {key}", s.name), render_text(t, ctx, &who)?);
                            }
                        }
                        for (k, v) in render_env(&s.env_vars, ctx, &format!("{who} env var"))? {
                            add(format!("step {} env {k}", s.name), v);
                        }
                    }
                }
                _ => {}
            }
            Ok(())
        })();
        if let Err(message) = done {
            problems.push(Problem {
                step: step.name.clone(),
                message,
            });
        }
    }
    (out, problems)
}

fn terraform(
    add: &mut dyn FnMut(String, String),
    t: TerraformInputs,
    text_of: &dyn Fn(&Value) -> String,
) {
    for (k, v) in &t.vars {
        add(format!("var {k}"), text_of(v));
    }
    for (k, v) in t.env {
        add(format!("env {k}"), v);
    }
    for (i, f) in t.var_files.into_iter().enumerate() {
        add(format!("var file {i}"), f);
    }
}

fn pulumi(add: &mut dyn FnMut(String, String), p: PulumiInputs) {
    let program = match &p.settings.pulumi_version {
        Some(v) => format!("{}, Pulumi CLI {v}", p.settings.runtime),
        None => p.settings.runtime.clone(),
    };
    add("program".into(), program);
    for (k, v) in p.settings.config {
        add(format!("config {k}"), v);
    }
    for (k, v) in p.env {
        add(format!("env {k}"), v);
    }
}

pub use crate::app::template::KNOWN_AFTER_APPLY;

/// A text rendered the way Nuon renders an app's README for an install
/// (`GET /v1/installs/{id}/readme`): a reference that does not resolve is
/// not an error there but a warning, and the text is then shown as
/// written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct RenderedReadme {
    /// What it renders to; the original when a warning says why not.
    pub rendered: String,
    /// The text as the config writes it.
    pub original: String,
    /// Each reference that does not render, and why; when there is one,
    /// `rendered` is the original.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

/// Renders `text` as Nuon renders a README: each reference alone first;
/// any that fails is a warning (`{{ REF }}: why`) and the text stays as
/// written; else the whole text, whose own failure (a function's) is the
/// one warning.
pub fn render_with_warnings(text: &str, ctx: &RenderContext) -> RenderedReadme {
    let shown_as_written = |warnings: Vec<String>| RenderedReadme {
        rendered: text.to_owned(),
        original: text.to_owned(),
        warnings,
    };
    let (actions, errors) = template::scan(text);
    let mut warnings: Vec<String> = errors
        .into_iter()
        .map(|e| {
            format!(
                "at byte {}: {}; the text is shown as written",
                e.offset, e.message
            )
        })
        .collect();
    // A reference with a `default` (or under an `if`) may lack a value.
    let data = ctx.data();
    for a in actions.iter().filter(|a| a.printed) {
        let alone = format!("{{{{ {} }}}}", a.written);
        if let Err(e) = template::render_with(&alone, ctx, &data) {
            let w = format!("{alone}: {}; the text is shown as written", e.message);
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
    }
    if !warnings.is_empty() {
        return shown_as_written(warnings);
    }
    match template::render_with(text, ctx, &data) {
        Ok(rendered) => RenderedReadme {
            rendered,
            original: text.to_owned(),
            warnings: Vec::new(),
        },
        Err(e) => shown_as_written(vec![format!(
            "at byte {}: {}; the text is shown as written",
            e.offset, e.message
        )]),
    }
}

/// A part of a config (the cloud roles, `stack.toml`) with every text
/// rendered for the install (`{{ .nuon.install.id }}-provision`).
pub fn render_part<T: Serialize + serde::de::DeserializeOwned>(
    part: &T,
    ctx: &RenderContext,
    what: &str,
) -> Result<T, String> {
    let v = serde_json::to_value(part).map_err(|e| format!("{what}: {e}"))?;
    let v = render_value(&v, ctx, what)?;
    serde_json::from_value(v).map_err(|e| format!("{what}: {e}"))
}

/// The org's id in a stack made offline.
pub const STAND_IN_ORG_ID: &str = "org_00000000000000000000000000";

/// The Runner API's address in a stack made offline.
pub const STAND_IN_RUNNER_API: &str = "https://runner-api.example.invalid";

/// The install stack a provision waits for, made offline as the control
/// plane makes it (`stack.toml`, `runner.toml` and the cloud roles rendered
/// for the install, in the flavour its runner type asks for), with
/// stand-ins for what only the control plane has: the Runner API's
/// address, the org's key and the one-time token.
pub fn install_stack(
    config: &AppConfig,
    ctx: &RenderContext,
) -> Result<crate::wire::InstallStack, String> {
    let runner = config
        .runner
        .clone()
        .unwrap_or_else(crate::app::RunnerSettings::local);
    let format = crate::stack::StackFormat::for_runner_type(&runner.runner_type);
    let spec = crate::stack::StackSpec {
        install_id: ctx.install_id.clone(),
        install_name: ctx.install_name.clone(),
        app_name: ctx.app_name.clone(),
        runner_api: STAND_IN_RUNNER_API.into(),
        signing_key: "0".repeat(64),
        install_token: "stk_stand-in".into(),
        token_expires_at_ms: 0,
        token_ttl: "24 h".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        runner_download: None,
        permissions: render_part(&config.permissions, ctx, "permissions")?,
        stack: (config.stack.as_ref())
            .map(|s| render_part(s, ctx, "stack.toml"))
            .transpose()?,
        runner,
        secrets: config.secrets.clone(),
        org_id: STAND_IN_ORG_ID.into(),
    };
    crate::stack::generate(&spec, format)
}

/// Stand-ins for the outputs templates read that are not given: each path
/// a template of `config` reads under the outputs of a component, the
/// sandbox or an action that `ctx` has none of, and (unless `stack_given`)
/// under the install stack's, gets [`KNOWN_AFTER_APPLY`]. Outputs that are
/// given stay as they are: reading a key they lack is an error, as it
/// would be in a deploy.
pub fn fill_unknown_outputs(config: &AppConfig, ctx: &mut RenderContext, stack_given: bool) {
    use template::Reference;
    let given_sandbox = ctx
        .sandbox_outputs
        .as_object()
        .is_some_and(|o| !o.is_empty());
    let given_components: Vec<String> = ctx.component_outputs.keys().cloned().collect();
    let given_actions: Vec<String> = ctx.action_outputs.keys().cloned().collect();
    let mut texts = Vec::new();
    strings(
        &serde_json::to_value(config).unwrap_or_default(),
        &mut texts,
    );
    for text in texts {
        for a in template::scan(&text).0 {
            let (root, path): (&mut Value, Vec<String>) = match a.reference {
                Reference::SandboxOutput(p) if !given_sandbox => (&mut ctx.sandbox_outputs, p),
                Reference::ComponentOutput { component, path }
                    if !path.is_empty() && !given_components.contains(&component) =>
                {
                    (
                        ctx.component_outputs
                            .entry(component)
                            .or_insert_with(|| Value::Object(Map::new())),
                        path,
                    )
                }
                Reference::ActionOutput { workflow, path }
                    if !path.is_empty() && !given_actions.contains(&workflow) =>
                {
                    (
                        ctx.action_outputs
                            .entry(workflow)
                            .or_insert_with(|| Value::Object(Map::new())),
                        path,
                    )
                }
                Reference::InstallStackOutput(path) if !path.is_empty() && !stack_given => {
                    let mut v = Value::Object(
                        std::mem::take(&mut ctx.install_stack_outputs)
                            .into_iter()
                            .collect(),
                    );
                    stand_in(&mut v, &path);
                    if let Value::Object(m) = v {
                        ctx.install_stack_outputs = m.into_iter().collect();
                    }
                    continue;
                }
                _ => continue,
            };
            stand_in(root, &path);
        }
    }
}

/// Puts [`KNOWN_AFTER_APPLY`] at `path` under `v` where nothing is.
fn stand_in(v: &mut Value, path: &[String]) {
    let Some((first, rest)) = path.split_first() else {
        return;
    };
    if !v.is_object() {
        if !v.is_null() {
            return;
        }
        *v = Value::Object(Map::new());
    }
    let Value::Object(m) = v else { return };
    if rest.is_empty() {
        m.entry(first.clone())
            .or_insert_with(|| Value::String(KNOWN_AFTER_APPLY.into()));
    } else {
        let next = m.entry(first.clone()).or_insert(Value::Null);
        if next.is_string() && next.as_str() == Some(KNOWN_AFTER_APPLY) {
            *next = Value::Null;
        }
        stand_in(next, rest);
    }
}

fn strings(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) if s.contains("{{") => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
        Value::Object(m) => m.values().for_each(|x| strings(x, out)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_readme_renders_or_is_shown_as_written_with_each_reference_that_does_not() {
        let mut ctx = RenderContext {
            install_name: "acme".into(),
            ..Default::default()
        };
        ctx.inputs.insert("region".into(), Value::from("us-east-2"));
        let ok = render_with_warnings(
            "# {{ .nuon.install.name }} in {{ .nuon.install.inputs.region }} ({{ .nuon.sandbox.outputs.dns | default \"no DNS\" }})",
            &ctx,
        );
        assert_eq!(ok.rendered, "# acme in us-east-2 (no DNS)");
        assert!(ok.warnings.is_empty());
        let text = "# {{ .nuon.install.name }}: {{ .nuon.sandbox.outputs.url }} {{ .nuon.install.inputs.nope }}";
        let bad = render_with_warnings(text, &ctx);
        assert_eq!(bad.rendered, text, "shown as written");
        assert_eq!(bad.original, text);
        assert_eq!(bad.warnings.len(), 2, "{:?}", bad.warnings);
        assert!(
            bad.warnings[0].starts_with("{{ .nuon.sandbox.outputs.url }}: ")
                && bad.warnings[0].contains("has no value")
        );
        assert!(bad.warnings[1].contains(".nuon.install.inputs.nope"));
        // Text that is not a template of the config stays as it is.
        let plain = render_with_warnings("Run `helm get values {{ .Release.Name }}`", &ctx);
        assert_eq!(plain.rendered, "Run `helm get values {{ .Release.Name }}`");
        assert!(plain.warnings.is_empty());
    }
}
