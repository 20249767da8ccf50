//! What a step's job is rendered from: the install's inputs (sensitive
//! ones unsealed), its secrets, and the outputs its sandbox and components
//! reported; the checks a workflow passes before it starts.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use nuon_core::app::template::{self, Reference, RenderContext};
use nuon_core::app::{AppConfig, Component, ComponentKind, ComponentSpec};
pub(crate) use nuon_core::rendered::{render_env, render_text, render_texts, render_value};
use nuon_core::wire::InstallOutputs;
use nuon_core::{AppId, ArtifactRef, OrgId, ReleaseId};
use serde_json::Value;

use super::{EngineError, Result};
use crate::secrets::{Sealed, SecretBox, seal_context};
use nuon_core::model::Install;

/// The install's outputs, its sensitive ones opened.
pub(crate) fn outputs_of(secrets: &SecretBox, install: &Install) -> Result<InstallOutputs, String> {
    let mut all: InstallOutputs = install
        .outputs_json
        .as_deref()
        .and_then(|o| serde_json::from_str(o).ok())
        .unwrap_or_default();
    crate::keys::open_outputs(secrets, &mut all)?;
    Ok(all)
}

/// What the install's stack reported when it phoned home. They are kept
/// sealed, so a value changed in the store (a role ARN swapped for
/// another) does not open, and is refused rather than used.
pub(crate) fn stack_outputs(
    secrets: &SecretBox,
    install: &Install,
) -> Result<BTreeMap<String, Value>, String> {
    let Some(sealed) = &install.stack_outputs else {
        return Ok(BTreeMap::new());
    };
    let text = secrets
        .open(sealed, &crate::secrets::stack_context(&install.id))
        .map_err(|e| {
            format!(
                "the outputs of install {}'s stack were changed outside the control plane and are refused ({e}): \
                 apply the install's stack again (`nuon installs stack {}`) so it phones home anew",
                install.name, install.name
            )
        })?;
    serde_json::from_str(&text).map_err(|e| format!("stored stack outputs: {e}"))
}

/// The cloud role a step's job runs with (`nuon_core::stack::roles`): its
/// name rendered for the install, its ARN the one the stack reported (or
/// made from the stack's `account_id`).
pub(super) fn job_role(
    secrets: &SecretBox,
    cx: &super::Ctx,
    step: &nuon_core::model::Step,
) -> Result<Option<nuon_core::JobRole>, String> {
    let Some(choice) = nuon_core::stack::roles::role_for(
        &cx.config,
        cx.wf.kind,
        step.kind,
        step.target.as_deref(),
    )?
    else {
        return Ok(None);
    };
    let ctx = render_context(secrets, &cx.org, &cx.install, cx.owner(), false)?;
    let name = render_text(&choice.name, &ctx, "the job's role")?;
    let outputs = stack_outputs(secrets, &cx.install)?;
    let suffix = format!(":role/{name}");
    let arn = outputs
        .values()
        .filter_map(Value::as_str)
        .find(|v| v.ends_with(&suffix))
        .map(str::to_owned)
        .or_else(|| {
            outputs
                .get("account_id")
                .and_then(Value::as_str)
                .map(|a| format!("arn:aws:iam::{a}:role/{name}"))
        });
    Ok(Some(nuon_core::JobRole {
        name,
        kind: choice.kind,
        arn,
        because: choice.because,
    }))
}

/// An install's sensitive inputs and secrets, unsealed.
pub(crate) struct Unsealed {
    pub(crate) inputs: BTreeMap<String, String>,
    pub(crate) secrets: BTreeMap<String, String>,
}

pub(crate) fn unseal(secrets: &SecretBox, install: &Install) -> Result<Unsealed, String> {
    unseal_as(secrets, install, Values::Real)
}

/// Which values a job is rendered from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Values {
    /// The install's own: what its runner gets, signed and sealed.
    Real,
    /// Stand-ins for the secret ones (`(secret)` for a secret,
    /// `(sensitive)` for a sensitive input or output): what the Control API
    /// shows of the job. Rendered from these, no form of a secret a
    /// template makes (glued, encoded, cased) can reach the view.
    StandIns,
}

/// The stand-in of a secret.
pub(crate) const SECRET_STAND_IN: &str = "(secret)";

/// The stand-in of a sensitive input or output.
pub(crate) const SENSITIVE_STAND_IN: &str = "(sensitive)";

/// [`unseal`], or the stand-ins of the same names.
pub(crate) fn unseal_as(
    secrets: &SecretBox,
    install: &Install,
    values: Values,
) -> Result<Unsealed, String> {
    if values == Values::StandIns {
        let sealed: Sealed = serde_json::from_str(&install.sealed_json)
            .map_err(|e| format!("stored secrets: {e}"))?;
        let names = |m: &BTreeMap<String, String>, with: &str| {
            m.keys().map(|k| (k.clone(), with.to_owned())).collect()
        };
        return Ok(Unsealed {
            inputs: names(&sealed.inputs, SENSITIVE_STAND_IN),
            secrets: names(&sealed.secrets, SECRET_STAND_IN),
        });
    }
    let sealed: Sealed =
        serde_json::from_str(&install.sealed_json).map_err(|e| format!("stored secrets: {e}"))?;
    let open = |kind: &str, name: &str, s: &str| {
        secrets
            .open(s, &seal_context(&install.id, kind, name))
            .map_err(|e| format!("{kind} {name:?}: {e}"))
    };
    let mut out = Unsealed {
        inputs: BTreeMap::new(),
        secrets: BTreeMap::new(),
    };
    for (name, s) in &sealed.inputs {
        out.inputs.insert(name.clone(), open("input", name, s)?);
    }
    for (name, s) in &sealed.secrets {
        out.secrets.insert(name.clone(), open("secret", name, s)?);
    }
    Ok(out)
}

/// The values a job's log must not show: the install's sensitive inputs,
/// secrets and sensitive outputs.
pub(crate) fn redactions(secrets: &SecretBox, install: &Install) -> Result<Vec<String>, String> {
    let open = unseal(secrets, install)?;
    Ok(open
        .inputs
        .into_values()
        .chain(open.secrets.into_values())
        .chain(outputs_of(secrets, install)?.sensitive_values())
        .collect())
}

/// The names of what an install belongs to, as templates read them
/// (`.nuon.org.name`, `.nuon.app.name`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Owner<'a> {
    pub(crate) org: &'a str,
    pub(crate) app: &'a str,
    /// The secrets the install's config declares: a customer-held one
    /// renders as its placeholder, which the runner fills.
    pub(crate) secrets: &'a [nuon_core::app::SecretDecl],
}

/// Each customer-held secret of `decls` as its placeholder in `values`
/// (over anything sealed for it before it was the customer's).
pub(crate) fn customer_placeholders(
    decls: &[nuon_core::app::SecretDecl],
    values: &mut BTreeMap<String, String>,
) {
    for d in decls.iter().filter(|d| d.held_by_customer()) {
        values.insert(
            d.name.clone(),
            nuon_core::app::SecretDecl::placeholder(&d.name),
        );
    }
}

impl super::Ctx {
    /// Whose install it is, by name.
    pub(super) fn owner(&self) -> Owner<'_> {
        Owner {
            org: &self.org_name,
            app: &self.app_name,
            secrets: &self.config.secrets,
        }
    }
}

/// What the engine keeps of what never changes once stored: a config
/// version, an app's or org's name (neither is ever renamed; an app goes
/// only once its installs have, and every workflow loads its install
/// first), a release's builds (frozen by digest). Read once, not at every
/// step of every workflow.
#[derive(Default)]
pub(crate) struct Kept {
    configs: HashMap<(OrgId, AppId, u32), Arc<AppConfig>>,
    apps: HashMap<(OrgId, AppId), String>,
    orgs: HashMap<OrgId, String>,
    releases: HashMap<(OrgId, ReleaseId), BTreeMap<String, ArtifactRef>>,
}

/// Keeps `value` at `key` in `map`, which is let go whole when it holds
/// `most` already (a fleet moves few apps' versions at once).
fn keep<K: std::hash::Hash + Eq, V>(map: &mut HashMap<K, V>, most: usize, key: K, value: V) {
    if map.len() >= most {
        map.clear();
    }
    map.insert(key, value);
}

/// How many config versions the engine keeps read.
const KEPT_CONFIGS: usize = 64;

/// How many names and releases' builds the engine keeps read.
const KEPT_NAMES: usize = 4096;

impl super::Engine {
    /// An app's name and one of its config versions.
    pub(crate) async fn app_config(
        &self,
        org: &OrgId,
        app: &AppId,
        version: u32,
    ) -> Result<(String, Arc<AppConfig>)> {
        let name = self.app_name(org, app).await?;
        let key = (org.clone(), app.clone(), version);
        if let Some(config) = self.kept().configs.get(&key) {
            return Ok((name, config.clone()));
        }
        let stored = self
            .store
            .get_config(org, app, Some(version))
            .await?
            .ok_or_else(|| {
                EngineError::NotFound(format!("config version {version} of {app} is gone"))
            })?;
        let text = crate::keys::open_config(&self.secrets, app, "config", &stored.config_json)
            .map_err(EngineError::Internal)?;
        let config: Arc<AppConfig> = serde_json::from_str(&text)
            .map_err(|e| EngineError::Internal(format!("stored config unreadable: {e}")))?;
        keep(&mut self.kept().configs, KEPT_CONFIGS, key, config.clone());
        Ok((name, config))
    }

    fn kept(&self) -> std::sync::MutexGuard<'_, Kept> {
        self.kept.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// An app's name.
    async fn app_name(&self, org: &OrgId, app: &AppId) -> Result<String> {
        let key = (org.clone(), app.clone());
        if let Some(name) = self.kept().apps.get(&key) {
            return Ok(name.clone());
        }
        let name = (self.store.find_app(org, app.as_str()).await?)
            .ok_or_else(|| EngineError::NotFound(format!("app {app} is gone")))?
            .name;
        keep(&mut self.kept().apps, KEPT_NAMES, key, name.clone());
        Ok(name)
    }

    /// The org's name (what `.nuon.org.name` reads).
    pub(crate) async fn org_name(&self, org: &OrgId) -> Result<String> {
        if let Some(name) = self.kept().orgs.get(org) {
            return Ok(name.clone());
        }
        let Some(found) = self.store.get_org(org).await? else {
            return Ok(String::new());
        };
        keep(
            &mut self.kept().orgs,
            KEPT_NAMES,
            org.clone(),
            found.name.clone(),
        );
        Ok(found.name)
    }

    /// A release's builds, by component.
    pub(crate) async fn release_builds(
        &self,
        org: &OrgId,
        id: &ReleaseId,
    ) -> Result<BTreeMap<String, ArtifactRef>> {
        let key = (org.clone(), id.clone());
        if let Some(builds) = self.kept().releases.get(&key) {
            return Ok(builds.clone());
        }
        let builds = (self.store.get_release(org, id).await?)
            .ok_or_else(|| EngineError::NotFound(format!("release {id} is gone")))?
            .builds;
        keep(&mut self.kept().releases, KEPT_NAMES, key, builds.clone());
        Ok(builds)
    }
}

/// The install's values for templates. `destroying`, a component's
/// outputs are those of its last apply even when it is destroyed already:
/// a dependent's destroy renders as it was applied.
pub(crate) fn render_context(
    secrets: &SecretBox,
    org: &OrgId,
    install: &Install,
    owner: Owner<'_>,
    destroying: bool,
) -> Result<RenderContext, String> {
    render_context_as(secrets, org, install, owner, destroying, Values::Real)
}

/// [`render_context`], from `values`.
pub(crate) fn render_context_as(
    secrets: &SecretBox,
    org: &OrgId,
    install: &Install,
    owner: Owner<'_>,
    destroying: bool,
    values: Values,
) -> Result<RenderContext, String> {
    let mut inputs: BTreeMap<String, Value> =
        serde_json::from_str(&install.inputs_json).map_err(|e| format!("stored inputs: {e}"))?;
    let mut open = unseal_as(secrets, install, values)?;
    customer_placeholders(owner.secrets, &mut open.secrets);
    for (name, v) in open.inputs {
        inputs.insert(name, Value::String(v));
    }
    let mut outputs = outputs_of(secrets, install)?;
    if values == Values::StandIns {
        outputs = outputs.masked();
    }
    if destroying {
        for (c, last) in std::mem::take(&mut outputs.destroyed) {
            outputs.components.entry(c).or_insert(last);
        }
    }
    Ok(RenderContext {
        install_id: install.id.to_string(),
        install_name: install.name.clone(),
        app_id: install.app_id.to_string(),
        app_name: owner.app.to_owned(),
        org_id: org.to_string(),
        org_name: owner.org.to_owned(),
        runner_id: install.runner_id.to_string(),
        inputs,
        sandbox_outputs: Value::Object(outputs.sandbox),
        component_outputs: outputs
            .components
            .into_iter()
            .map(|(k, v)| (k, Value::Object(v)))
            .collect(),
        secrets: open.secrets,
        action_outputs: outputs
            .actions
            .into_iter()
            .map(|(k, v)| (k, Value::Object(v)))
            .collect(),
        install_stack_outputs: stack_outputs(secrets, install)?,
        action_inputs: BTreeMap::new(),
        budget: Default::default(),
    })
}

/// A component's health window (`[health] stabilization_window`),
/// rendered and checked.
pub(crate) fn health_window(
    component: &str,
    health: &nuon_core::app::ComponentHealth,
    ctx: &RenderContext,
) -> Result<std::time::Duration, String> {
    let what = format!("component {component} health");
    let text = render_text(
        &health.stabilization_window,
        ctx,
        &format!("{what} stabilization_window"),
    )?;
    nuon_core::app::parse_window(text.trim()).map_err(|e| format!("{what}: {e}"))
}

/// A component's health probes (`[[health.probes]]`), rendered, each
/// target checked once rendered.
pub(crate) fn health_probes(
    component: &str,
    health: &nuon_core::app::ComponentHealth,
    ctx: &RenderContext,
) -> Result<Vec<nuon_core::app::HealthProbe>, String> {
    use nuon_core::app::{HealthProbe, ProbeKind, http_url, tcp_address};
    let what = format!("component {component} health");
    let mut probes = Vec::with_capacity(health.probes.len());
    for (i, p) in health.probes.iter().enumerate() {
        let at = format!("{what} probe {i}");
        let url = p
            .url
            .as_deref()
            .map(|u| render_text(u, ctx, &format!("{at} url")))
            .transpose()?;
        let checked = match (p.kind, &url) {
            (ProbeKind::Http, Some(u)) => http_url(u),
            (ProbeKind::Tcp, Some(u)) => tcp_address(u).map(drop),
            _ => Ok(()),
        };
        checked.map_err(|e| format!("{at} renders a target that cannot be probed: {e}"))?;
        probes.push(HealthProbe {
            kind: p.kind,
            name: render_text(&p.name, ctx, &format!("{at} name"))?,
            url,
            command: render_texts(&p.command, ctx, &format!("{at} command"))?,
        });
    }
    Ok(probes)
}

/// The probes of `install`'s components that its runner watches between
/// deploys: of each component that is on, has `[health]` probes and is
/// deployed (its outputs are in `ctx`). One whose probes do not render
/// is left out, with a warning: its last deploy's health step said why.
pub(crate) fn watched_probes(
    config: &AppConfig,
    install: &Install,
    ctx: &RenderContext,
) -> Vec<nuon_core::wire::WatchedComponent> {
    let watched = config.components.iter().filter(|c| {
        install.enabled(c)
            && nuon_core::app::ComponentHealth::watched(c.health.as_ref())
            && ctx.component_outputs.contains_key(&c.name)
    });
    watched
        .filter_map(|c| {
            let health = c.health.as_ref()?;
            match health_probes(&c.name, health, ctx) {
                Ok(probes) => Some(nuon_core::wire::WatchedComponent {
                    component: c.name.clone(),
                    probes,
                }),
                Err(e) => {
                    tracing::warn!(install = %install.id, component = %c.name, error = %e, "its health probes are not watched");
                    None
                }
            }
        })
        .collect()
}

/// Checks, before a workflow starts, that every input and secret its
/// templates read has a value (outputs are known only as it runs).
pub(crate) fn precheck_templates(
    config: &AppConfig,
    ctx: &RenderContext,
    targets: &BTreeSet<String>,
) -> Vec<String> {
    let mut problems = Vec::new();
    let mut check = |what: String, text: &str| {
        let (actions, _) = template::scan(text);
        for a in actions {
            if !a.printed {
                continue;
            }
            let missing = match &a.reference {
                Reference::Input(n) => ctx
                    .inputs
                    .get(n)
                    .is_none_or(|v| v.is_null() || v.as_str() == Some(""))
                    .then(|| format!("input {n:?} has no value (set it with `nuon installs inputs set`)")),
                Reference::Secret(n) => ctx
                    .secrets
                    .get(n)
                    .is_none_or(|v| v.is_empty())
                    .then(|| format!("secret {n:?} has no value (give it with `nuon installs create --secret {n}=...`)")),
                _ => None,
            };
            if let Some(m) = missing {
                problems.push(format!("{what}: {} renders to nothing: {m}", a.written));
            }
        }
    };
    let mut strings =
        |who: &str, vars: &BTreeMap<String, Value>, env: &BTreeMap<String, String>| {
            for (k, v) in vars {
                for s in strings_of(v) {
                    check(format!("{who} var {k}"), s);
                }
            }
            for (k, v) in env {
                check(format!("{who} env var {k}"), v);
            }
        };
    if let Some(sb) = &config.sandbox
        && targets.contains("sandbox")
    {
        strings("sandbox", &sb.vars, &sb.env_vars);
    }
    let (no_vars, no_env) = (BTreeMap::new(), BTreeMap::new());
    for c in config
        .components
        .iter()
        .filter(|c| targets.contains(&c.name))
    {
        let (vars, env) = match &c.spec {
            ComponentSpec::TerraformModule(t) => (&t.vars, &t.env_vars),
            spec => (&no_vars, spec.env_vars().unwrap_or(&no_env)),
        };
        strings(&format!("component {}", c.name), vars, env);
    }
    problems
}

fn strings_of(v: &Value) -> Vec<&str> {
    match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().flat_map(strings_of).collect(),
        Value::Object(m) => m.values().flat_map(strings_of).collect(),
        _ => Vec::new(),
    }
}

/// Whether a component deploys through a plugin that exists now.
pub(crate) fn deployable(c: &Component) -> Result<(), String> {
    match c.kind() {
        ComponentKind::TerraformModule
        | ComponentKind::ContainerImage
        | ComponentKind::DockerBuild
        | ComponentKind::HelmChart
        | ComponentKind::KubernetesManifest
        | ComponentKind::Pulumi => Ok(()),
        ComponentKind::Wasm => c
            .wasm()
            .and_then(|w| w.capabilities.as_ref())
            .map(|v| {
                nuon_core::wasm::Capabilities::from_value(
                    v,
                    &format!("component {:?} [capabilities]", c.name),
                )
            })
            .transpose()
            .map(|_| ()),
    }
}

/// An action run's inputs: `given` checked against the action's
/// `[[inputs]]`, with their defaults filled in.
pub(crate) fn action_inputs(
    config: &AppConfig,
    action: &str,
    given: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    let Some(a) = config.actions.iter().find(|a| a.name == action) else {
        return Err(format!("no action {action:?}"));
    };
    let declared: Vec<&str> = a.inputs.iter().map(|i| i.name.as_str()).collect();
    let mut problems = Vec::new();
    for name in given.keys() {
        if !declared.contains(&name.as_str()) {
            let known = if declared.is_empty() {
                "it declares none".to_owned()
            } else {
                format!("it declares {}", declared.join(", "))
            };
            problems.push(format!(
                "action {action:?} has no input {name:?}{} ({known} in [[inputs]])",
                nuon_core::app::did_you_mean(name, declared.iter().copied())
            ));
        }
    }
    let mut out = BTreeMap::new();
    for i in &a.inputs {
        match given.get(&i.name).or(i.default.as_ref()) {
            Some(v) => {
                out.insert(i.name.clone(), v.clone());
            }
            None if i.required => problems.push(format!(
                "action {action:?} needs input {:?}: give it with --input {}=VALUE",
                i.name, i.name
            )),
            None => {}
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems.join("; "))
    }
}

/// A runbook's run-time inputs: those `given`, each declared by the
/// runbook's `[[input]]`, and the defaults of the others; a required one
/// missing is refused, as an unknown one is.
pub(crate) fn runbook_inputs(
    config: &AppConfig,
    runbook: &str,
    given: &BTreeMap<String, String>,
) -> Result<BTreeMap<String, String>, String> {
    let Some(rb) = config.runbooks.iter().find(|r| r.name == runbook) else {
        return Err(format!("no runbook {runbook:?}"));
    };
    let declared: Vec<&str> = rb
        .inputs
        .iter()
        .filter_map(|i| i["name"].as_str())
        .collect();
    let mut problems = Vec::new();
    for name in given.keys() {
        if !declared.contains(&name.as_str()) {
            let known = if declared.is_empty() {
                "it declares none".to_owned()
            } else {
                format!("it declares {}", declared.join(", "))
            };
            problems.push(format!(
                "runbook {runbook:?} has no input {name:?}{} ({known} in [[input]])",
                nuon_core::app::did_you_mean(name, declared.iter().copied())
            ));
        }
    }
    let mut out = BTreeMap::new();
    for i in &rb.inputs {
        let Some(name) = i["name"].as_str() else {
            continue;
        };
        let default = match &i["default"] {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        };
        match given.get(name).cloned().or(default) {
            Some(v) => {
                out.insert(name.to_owned(), v);
            }
            None if i["required"] == Value::Bool(true) => problems.push(format!(
                "runbook {runbook:?} needs input {name:?}: give it with --input {name}=VALUE"
            )),
            None => {}
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems.join("; "))
    }
}

/// Marks the steps of components turned off on `install` (and of the
/// components and actions that depend on them) as skipped, saying why. A
/// workflow of `only` one component that is off is refused.
pub(crate) fn skip_turned_off(
    config: &AppConfig,
    install: &Install,
    only: Option<&str>,
    steps: &mut [nuon_core::workflow::PlannedStep],
) -> Result<(), String> {
    use nuon_core::workflow::{StepKind, left_out_by_denial};
    // Each component left out: why, and the component turned off.
    let mut why: BTreeMap<String, (String, String)> = BTreeMap::new();
    for c in config.components.iter().filter(|c| !install.enabled(c)) {
        let reason = format!("component {} is turned off on this install", c.name);
        why.insert(c.name.clone(), (reason, c.name.clone()));
    }
    let off: Vec<String> = why.keys().cloned().collect();
    for c in &off {
        for d in left_out_by_denial(config, Some(c), false).0 {
            why.entry(d.clone()).or_insert_with(|| {
                let reason =
                    format!("component {d} depends on {c}, which is turned off on this install");
                (reason, c.clone())
            });
        }
    }
    if let Some((reason, root)) = only.and_then(|o| why.get(o)) {
        return Err(format!(
            "{reason}: turn it on with `nuon installs components enable {} {root}`",
            install.name
        ));
    }
    for s in steps.iter_mut() {
        let Some(t) = &s.target else { continue };
        let reason = if s.kind == StepKind::Action {
            config
                .actions
                .iter()
                .find(|a| &a.name == t)
                .and_then(|a| a.depends_on.iter().find_map(|d| why.get(d)))
                .map(|(r, _)| r.clone())
        } else {
            why.get(t).map(|(r, _)| r.clone())
        };
        if let Some(r) = reason {
            s.skipped = Some(r);
        }
    }
    Ok(())
}

/// The kubeconfig a job works with: the `kubeconfig` output of the
/// component its kubernetes `context` names, else the sandbox's.
pub(super) fn kubeconfig_of(
    cx: &super::Ctx,
    ctx: &RenderContext,
    context: Option<&str>,
) -> std::result::Result<Option<String>, String> {
    let Some(name) = context else {
        return Ok(ctx
            .sandbox_outputs
            .get("kubeconfig")
            .and_then(|k| k.as_str())
            .map(str::to_owned));
    };
    let k = cx
        .config
        .kubernetes_contexts
        .iter()
        .find(|k| k.name == name)
        .ok_or_else(|| {
            format!(
                "kubernetes context {name:?} is not in config version {}",
                cx.wf.config_version
            )
        })?;
    match ctx
        .component_outputs
        .get(&k.component)
        .and_then(|o| o.get("kubeconfig"))
    {
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(_) => Err(format!(
            "kubernetes context {name:?}: the `kubeconfig` output of component {} is not a string (a kubeconfig's text)",
            k.component
        )),
        None => Err(format!(
            "kubernetes context {name:?} reads the `kubeconfig` output of component {}, which has none: deploy {} first, or output the kubeconfig from it",
            k.component, k.component
        )),
    }
}
