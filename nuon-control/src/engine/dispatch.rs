//! Dispatching a step: the signed job each kind of step sends to the
//! install's runner (a sync, an action's script, a plugin call, a Helm
//! release, a Terraform run), rendered from the install's values.

use nuon_core::wire::ErrorCode;
use std::collections::BTreeMap;
use std::time::Duration;

use nuon_core::app::template::RenderContext;
use nuon_core::app::{Action, Component, ComponentKind, SecretDecl, Source};
use nuon_core::model::Step;
use nuon_core::rendered;
use nuon_core::wasm::{Capabilities, WasmAction, WasmJob};
use nuon_core::workflow::{StepKind, WorkflowKind, applies_a_plan, destroys};
use nuon_core::{
    ArtifactRef, ExecJob, HealthJob, HelmAction, HelmJob, ImageRef, Job, JobId, JobSandbox,
    JobSpec, KubernetesJob, KustomizeBuild, RetryPolicy, SyncJob, TerraformAction, TerraformJob,
    now_ms,
};
use serde_json::Value;

use super::render::{self, Values, kubeconfig_of, render_env, render_text, render_value};
use super::rules;
use super::{Ctx, Engine, EngineError, Result};
use crate::secrets::state_context;
use crate::store::StateToken;

/// A step's job, or why it cannot be sent (the step fails with it).
type Made = std::result::Result<(JobSpec, Option<StateToken>), String>;

impl Engine {
    /// Sends a step's job to the install's runner, or fails the step with
    /// why it cannot run; either carries what is held back for the
    /// workflow's next write ([`Ctx::carry`]).
    pub(super) async fn dispatch_or_fail(&self, cx: &Ctx, step: &Step) -> Result<()> {
        let plugin_state = match wasm_target(cx, step) {
            Some(c) if step.kind != StepKind::Sync => self.stored_state(cx, &c.name).await?,
            _ => None,
        };
        // Rendering is a tenant's work: off the runtime's threads. Twice:
        // for the runner, and with stand-ins for what the API shows.
        let (made, shown) = crate::render_pool::in_place(|| {
            let made = self.job_for(cx, step, plugin_state.clone(), Values::Real);
            let shown = made
                .is_ok()
                .then(|| self.job_for(cx, step, plugin_state, Values::StandIns));
            (made, shown)
        })
        .await;
        let (spec, token) = match made {
            Ok(made) => made,
            Err(reason) if destroys(step.kind) => {
                let hint = "a destroy renders with the install's inputs and the outputs each \
                            component reported at its last apply: give the missing value \
                            (`nuon installs inputs set`), or destroy with a config version \
                            that does not need it (`--config VERSION`)";
                return self.fail(cx, step, format!("{reason}; {hint}")).await;
            }
            Err(reason) => return self.fail(cx, step, reason).await,
        };
        let job_id = spec.job_id.clone();
        let shown = match shown {
            Some(Ok((view, _))) => crate::keys::hidden(view.payload, &spec.redact),
            // A template that reads a secret's value (`b64dec`, `fromJson`)
            // may not render from a stand-in: then nothing of it is shown.
            Some(Err(why)) => serde_json::json!({
                "hidden": format!(
                    "the payload is rendered from the install's secrets in a way that \
                     cannot be shown with stand-ins ({why}); the job's log shows what ran"
                )
            }),
            None => crate::keys::shown_payload(&spec),
        };
        let job = self.keys.sign_shown(spec, shown).await?;
        let carried = cx.take_carried();
        self.store
            .dispatch_step(&cx.org, &cx.wf.id, step.index, job, token, carried)
            .await?;
        self.notifier.job_queued(&cx.install.runner_id);
        tracing::info!(workflow = %cx.wf.id, step = %step.name, job = %job_id, "step dispatched");
        Ok(())
    }

    /// The job spec of a step, and the state token its Terraform gets.
    fn job_for(&self, cx: &Ctx, step: &Step, plugin_state: Option<Value>, from: Values) -> Made {
        let target = step.target.clone().unwrap_or_else(|| "sandbox".into());
        // Sync jobs render nothing: only the others carry values to redact.
        let redact = if matches!(step.kind, StepKind::Sync | StepKind::SandboxSync) {
            Vec::new()
        } else {
            render::redactions(&self.secrets, &cx.install)?
        };
        let role = render::job_role(&self.secrets, cx, step)?;
        let job = Spec { cx, redact, role };
        if matches!(step.kind, StepKind::Sync | StepKind::SandboxSync) {
            let artifact = artifact(cx, &target)?;
            let tag = (cx.config.component(&target)).and_then(|c| c.image_tag(&artifact.digest));
            let sync = SyncJob { artifact, tag };
            return job.make(&sync, Duration::from_secs(600), None);
        }
        let values = || {
            render::render_context_as(
                &self.secrets,
                &cx.org,
                &cx.install,
                cx.owner(),
                destroys(step.kind),
                from,
            )
        };
        if step.kind == StepKind::SecretsSync {
            let mut open = render::unseal_as(&self.secrets, &cx.install, from)?;
            render::customer_placeholders(&cx.config.secrets, &mut open.secrets);
            let before = render::outputs_of(&self.secrets, &cx.install)?.kubernetes_secrets;
            let (sync, encoded) =
                super::secrets_sync::secrets_job(cx, &values()?, &open.secrets, &before)?;
            // The values reach the job base64: hidden as they are.
            let mut job = job;
            job.redact.extend(encoded);
            return job.make(&sync, Duration::from_secs(600), None);
        }
        if step.kind == StepKind::Health {
            let c = cx.config.component(&target).ok_or_else(|| {
                format!(
                    "component {target:?} is not in config version {}",
                    cx.wf.config_version
                )
            })?;
            let (health, timeout) = health_job(c, &values()?)?;
            return job.make(&health, timeout, None);
        }
        if step.kind == StepKind::Action {
            let action = cx
                .config
                .actions
                .iter()
                .find(|a| a.name == target)
                .ok_or_else(|| {
                    format!(
                        "action {target:?} is not in config version {}",
                        cx.wf.config_version
                    )
                })?;
            // Run-time inputs: the workflow's own, for the action it was
            // started for; a runbook's, for each of its actions (as
            // variables of their names, and for the action's inputs of the
            // same names); else each input's default. Its steps read them
            // as `.action.inputs.NAME` and get them as variables.
            let given = match cx.wf.kind {
                WorkflowKind::Action => cx.wf.inputs.clone(),
                WorkflowKind::Runbook => cx
                    .wf
                    .inputs
                    .iter()
                    .filter(|(k, _)| action.inputs.iter().any(|i| &i.name == *k))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                _ => BTreeMap::new(),
            };
            let inputs = render::action_inputs(&cx.config, &action.name, &given)?;
            let mut ctx = values()?;
            ctx.action_inputs = inputs.clone();
            let (mut exec, timeout) = action_job(action, &ctx)?;
            if action.enable_kube_config {
                let kubeconfig = kubeconfig_of(cx, &ctx, action.kubernetes_context.as_deref())?
                    .ok_or_else(|| format!(
                        "action {} has enable_kube_config, and the sandbox reports no `kubeconfig` output: give it a kubernetes_context, or output the kubeconfig from the sandbox",
                        action.name
                    ))?;
                exec.env.insert(KUBECONFIG_VAR.into(), kubeconfig);
            }
            if cx.wf.kind == WorkflowKind::Runbook {
                exec.env.extend(cx.wf.inputs.clone());
            }
            exec.env.extend(inputs);
            return job.make(&exec, timeout, None);
        }
        if let Some(c) = wasm_target(cx, step) {
            let mut secrets = render::unseal_as(&self.secrets, &cx.install, from)?.secrets;
            render::customer_placeholders(&cx.config.secrets, &mut secrets);
            let plugin = wasm_job(cx, step, c, &values()?, &secrets, plugin_state)?;
            return job.make(&plugin, deploy_timeout(c.deploy_timeout.as_deref())?, None);
        }
        if let Some(c) = step
            .target
            .as_deref()
            .and_then(|t| cx.config.component(t))
            .filter(|c| c.kind() == ComponentKind::HelmChart)
        {
            let helm = helm_job(cx, step, c, &values()?)?;
            return job.make(&helm, deploy_timeout(c.deploy_timeout.as_deref())?, None);
        }
        if let Some(c) = step
            .target
            .as_deref()
            .and_then(|t| cx.config.component(t))
            .filter(|c| c.kind() == ComponentKind::KubernetesManifest)
        {
            let k = kubernetes_job(cx, step, c, &values()?)?;
            return job.make(&k, deploy_timeout(c.deploy_timeout.as_deref())?, None);
        }
        let pulumi = match step.target.as_deref() {
            None => (cx.config.sandbox.as_ref()).is_some_and(|s| s.pulumi.is_some()),
            Some(t) => (cx.config.component(t)).is_some_and(|c| c.kind() == ComponentKind::Pulumi),
        };
        if pulumi {
            let (p, timeout, token) = self.pulumi_job(cx, step, &target, &values()?)?;
            return job.make(&p, timeout, token);
        }
        let (tf, timeout, token) = self.terraform_job(cx, step, &target, &values()?)?;
        job.make(&tf, timeout, Some(token))
    }

    /// A Terraform plan, apply or destroy plan of the sandbox or a
    /// module, with the control plane as its state backend.
    fn terraform_job(
        &self,
        cx: &Ctx,
        step: &Step,
        target: &str,
        ctx: &RenderContext,
    ) -> std::result::Result<(TerraformJob, Duration, StateToken), String> {
        let (version, timeout) = if target == "sandbox" && step.target.is_none() {
            let sb = cx
                .config
                .sandbox
                .as_ref()
                .ok_or("the app config has no sandbox")?;
            (sb.terraform_version.clone(), None)
        } else {
            let c = cx.config.component(target).ok_or_else(|| {
                format!(
                    "component {target:?} is not in config version {}",
                    cx.wf.config_version
                )
            })?;
            render::deployable(c)?;
            (
                c.terraform().map(|t| t.terraform_version.clone()),
                c.deploy_timeout.as_deref(),
            )
        };
        let (action, plan) = if applies_a_plan(step.kind) {
            let plan_step = rules::planned(&cx.wf.steps, step)?;
            let plan: ArtifactRef = serde_json::from_value(plan_step.outputs["plan"].clone())
                .map_err(|e| format!("the plan of {} is unreadable: {e}", plan_step.name))?;
            (TerraformAction::Apply, Some(plan))
        } else if destroys(step.kind) {
            (TerraformAction::DestroyPlan, None)
        } else {
            (TerraformAction::Plan, None)
        };
        let (backend, state_token) = self.state_backend(cx, target);
        // The install's own variables: read last, so they win.
        let over = step
            .target
            .as_deref()
            .and_then(|t| cx.install.overrides.get(t))
            .map(|o| (o, cx.install.name.as_str()));
        let inputs = rendered::terraform_inputs(&cx.config, step.target.as_deref(), over, ctx)?;
        let job = TerraformJob {
            action,
            // The module this workflow synced (a newer build of the same
            // config version does not slip in between).
            module: synced_artifact(cx, step, target)?,
            terraform_version: version.unwrap_or_else(|| ">= 0.0.0".into()),
            vars: inputs.vars,
            env: inputs.env,
            var_files: inputs.var_files,
            backend: Some(backend),
            plan,
            // A plan (not a destroy plan) passes the part's Rego policies.
            policies: if (step.kind == StepKind::Plan || step.kind == StepKind::SandboxPlan)
                && cx.wf.kind != WorkflowKind::Drift
            {
                nuon_core::app::policies_for(&cx.config, step.target.as_deref())
            } else {
                Vec::new()
            },
        };
        Ok((job, deploy_timeout(timeout)?, state_token))
    }

    /// The state a component's last run left, kept sealed: Terraform's (the
    /// control plane is its backend), or what a plugin's last apply
    /// returned.
    pub(super) async fn stored_state(&self, cx: &Ctx, component: &str) -> Result<Option<Value>> {
        let Some((_, sealed)) = self.store.get_state(&cx.install.id, component).await? else {
            return Ok(None);
        };
        let text = self
            .secrets
            .open(&sealed, &state_context(&cx.install.id, component))
            .map_err(|e| EngineError::Internal(format!("the state of {component}: {e}")))?;
        let v: Value = serde_json::from_str(&text).map_err(|e| {
            EngineError::Internal(format!("the state of {component} is not JSON: {e}"))
        })?;
        Ok(Some(v).filter(|v| !v.is_null()))
    }

    /// Keeps what a plugin's apply (or destroy: `null`) left as its state.
    pub(super) async fn keep_plugin_state(
        &self,
        cx: &Ctx,
        component: &str,
        value: &Value,
    ) -> Result<()> {
        let sealed = self.secrets.seal(
            &value.to_string(),
            &state_context(&cx.install.id, component),
        );
        match self
            .store
            .put_state(&cx.install.id, component, None, sealed)
            .await?
        {
            Ok(_) => Ok(()),
            Err(lock) => Err(EngineError::conflict(
                ErrorCode::StateLocked,
                format!("the state of {component} is locked by {}", lock.id),
            )),
        }
    }
}

/// What every job of a step shares: its runner, org and what its log must
/// not show.
struct Spec<'a> {
    cx: &'a Ctx,
    redact: Vec<String>,
    role: Option<nuon_core::JobRole>,
}

impl Spec<'_> {
    fn make<J: Job>(&self, job: &J, timeout: Duration, token: Option<StateToken>) -> Made {
        let payload =
            serde_json::to_value(job).map_err(|e| format!("cannot encode the job: {e}"))?;
        let sandbox = JobSandbox {
            image: job_image(self.cx, J::KIND)?,
            ..JobSandbox::default()
        };
        // What the runner fills from the customer's secret store.
        let customer_secrets =
            SecretDecl::printed_in(&self.cx.config.secrets, &payload.to_string());
        let spec = JobSpec {
            job_id: JobId::generate(),
            org_id: self.cx.org.clone(),
            runner_id: self.cx.install.runner_id.clone(),
            kind: J::KIND.into(),
            payload,
            timeout_secs: timeout.as_secs(),
            retry: RetryPolicy { max_attempts: 1 },
            created_at_ms: now_ms(),
            redact: self.redact.clone(),
            role: self.role.clone(),
            sandbox,
            customer_secrets,
        };
        Ok((spec, token))
    }
}

/// A component's health probes, rendered after its apply (they may read
/// its outputs), and the job's timeout: the window and a minute.
fn health_job(
    c: &Component,
    ctx: &RenderContext,
) -> std::result::Result<(HealthJob, Duration), String> {
    let h = c
        .health
        .as_ref()
        .ok_or_else(|| format!("component {} has no [health]", c.name))?;
    let window = render::health_window(&c.name, h, ctx)?;
    let probes = render::health_probes(&c.name, h, ctx)?;
    let job = HealthJob {
        component: c.name.clone(),
        probes,
        window_ms: window.as_millis() as u64,
        interval_ms: HealthJob::interval_for(window).as_millis() as u64,
        hold_rounds: HealthJob::HOLD_ROUNDS,
        block_deploy: h.block_deploy,
    };
    Ok((job, window + Duration::from_secs(60)))
}

/// An action's steps as one `sh -c` script, each step announced.
fn action_job(
    action: &Action,
    ctx: &RenderContext,
) -> std::result::Result<(ExecJob, Duration), String> {
    let mut script = String::from("set -e\n");
    if action.enable_kube_config {
        // The kubeconfig's text arrives in the environment; its steps get
        // a private file of the job's directory, as `KUBECONFIG`.
        script.push_str(&format!(
            "(umask 077; printf '%s\\n' \"${KUBECONFIG_VAR}\" > \"$PWD/kubeconfig\")\nexport KUBECONFIG=\"$PWD/kubeconfig\"\nunset {KUBECONFIG_VAR}\n"
        ));
    }
    let mut env: BTreeMap<String, String> = action
        .labels
        .iter()
        .map(|(k, v)| {
            let key = k.to_ascii_uppercase().replace(['-', '.', '/'], "_");
            (format!("NUON_ACTION_LABEL_{key}"), v.clone())
        })
        .collect();
    for s in &action.steps {
        let what = format!("action {} step {}", action.name, s.name);
        script.push_str(&format!("echo '--- {}'\n", s.name.replace('\'', "")));
        // A step with a repository runs in a subshell, in the directory it
        // names of a fresh shallow clone.
        let repo = match &s.source {
            None => None,
            Some(Source::Git {
                repo,
                directory,
                branch,
            }) => Some((repo.clone(), directory, branch)),
            Some(Source::PublicRepo {
                repo,
                directory,
                branch,
            }) => Some((nuon_core::app::public_repo_url(repo), directory, branch)),
            Some(other) => {
                return Err(format!(
                    "{what}: a step's source must be [steps.public_repo] or [steps.git], not {other:?}"
                ));
            }
        };
        if let Some((url, directory, branch)) = &repo {
            script.push_str(&format!(
                "(\nnuon_src=$(mktemp -d)\ngit clone --quiet --depth 1 --branch {} {} \"$nuon_src\"\ncd \"$nuon_src\"/{}\n",
                shell_quote(branch),
                shell_quote(url),
                shell_quote(directory.trim_start_matches("./"))
            ));
        }
        match (&s.command, &s.inline_contents) {
            (Some(command), _) => script.push_str(&render_text(command, ctx, &what)?),
            // A script (inline, or the text of the file it names, kept
            // with the config version): written out and run, by its `#!`
            // line when it has one.
            (None, Some(contents)) => {
                let body = render_text(contents, ctx, &what)?;
                let mut fence = String::from("NUON_SCRIPT");
                while body.contains(&fence) {
                    fence.push('_');
                }
                script.push_str(&format!(
                    "nuon_step=$(mktemp)\ncat > \"$nuon_step\" <<'{fence}'\n{body}\n{fence}\nchmod 700 \"$nuon_step\"\n"
                ));
                if body.starts_with("#!") {
                    script.push_str("\"$nuon_step\"\n");
                } else {
                    script.push_str("sh \"$nuon_step\"\n");
                }
            }
            (None, None) => return Err(format!("{what} has neither command nor inline_contents")),
        }
        script.push('\n');
        if repo.is_some() {
            script.push_str(")\n");
        }
        env.extend(render_env(&s.env_vars, ctx, &format!("{what} env"))?);
    }
    let job = ExecJob {
        command: "sh".into(),
        args: vec!["-c".into(), script],
        env,
        dir: None,
        outputs_file: true,
    };
    let timeout = timeout_of(Some(&action.timeout), Duration::from_secs(600))?;
    Ok((job, timeout))
}

/// `s` as one word of `sh`, single-quoted.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// A plugin call: its rendered config, the capabilities and secrets it is
/// granted, its last state and (for an apply) the plan it applies.
fn wasm_job(
    cx: &Ctx,
    step: &Step,
    c: &Component,
    ctx: &RenderContext,
    secrets: &BTreeMap<String, String>,
    state: Option<Value>,
) -> std::result::Result<WasmJob, String> {
    let who = format!("component {}", c.name);
    let empty = Value::Object(Default::default());
    let config = render_value(
        c.wasm().and_then(|w| w.config.as_ref()).unwrap_or(&empty),
        ctx,
        &format!("{who} config"),
    )?;
    let grant = Capabilities::from_value(
        c.wasm()
            .and_then(|w| w.capabilities.as_ref())
            .unwrap_or(&empty),
        &format!("{who} [capabilities]"),
    )?;
    let mut granted = BTreeMap::new();
    for name in &grant.secrets {
        let v = secrets.get(name).ok_or_else(|| {
            format!("{who} grants secret {name:?}, which the install does not have")
        })?;
        granted.insert(name.clone(), v.clone());
    }
    let action = match step.kind {
        StepKind::Plan => WasmAction::Plan,
        StepKind::Apply => WasmAction::Apply,
        StepKind::DestroyPlan => WasmAction::DestroyPlan,
        _ => WasmAction::Destroy,
    };
    let plan = if applies_a_plan(step.kind) {
        Some(rules::planned(&cx.wf.steps, step)?.outputs["plan"].clone())
    } else {
        None
    };
    Ok(WasmJob {
        action,
        plugin: synced_artifact(cx, step, &c.name)?,
        config,
        grant,
        state,
        plan,
        secrets: granted,
    })
}

/// What a Helm release or a manifest does at a step.
fn release_action(kind: StepKind) -> HelmAction {
    match kind {
        StepKind::Plan => HelmAction::Plan,
        StepKind::Apply => HelmAction::Apply,
        StepKind::DestroyPlan => HelmAction::DestroyPlan,
        _ => HelmAction::Destroy,
    }
}

/// A Helm release of a chart component, its values rendered.
fn helm_job(
    cx: &Ctx,
    step: &Step,
    c: &Component,
    ctx: &RenderContext,
) -> std::result::Result<HelmJob, String> {
    // The install's own values: merged over the config's (its values
    // files too, as values.json is read after them).
    let over = cx
        .install
        .overrides
        .get(&c.name)
        .map(|o| (o, cx.install.name.as_str()));
    let inputs = rendered::helm_inputs(c, over, ctx)?;
    Ok(HelmJob {
        action: release_action(step.kind),
        chart: synced_artifact(cx, step, &c.name)?,
        release: inputs.release,
        namespace: inputs.namespace,
        values: inputs.values.into_iter().collect(),
        values_files: inputs.values_files,
        kubeconfig: kubeconfig_of(cx, ctx, c.kubernetes_context.as_deref())?,
        storage_driver: c.helm().and_then(|h| h.storage_driver.clone()),
        take_ownership: c.helm().is_some_and(|h| h.take_ownership),
        policies: plan_policies(cx, step),
    })
}

/// The Rego policies a plan step (not a destroy plan) of a component
/// checks what it renders against.
fn plan_policies(cx: &Ctx, step: &Step) -> Vec<nuon_core::policy::PolicySource> {
    if step.kind == StepKind::Plan && cx.wf.kind != WorkflowKind::Drift {
        nuon_core::app::policies_for(&cx.config, step.target.as_deref())
    } else {
        Vec::new()
    }
}

/// Kubernetes objects of a manifest component: the manifest rendered (or
/// the kustomization from its artifact), and what its last apply made.
fn kubernetes_job(
    cx: &Ctx,
    step: &Step,
    c: &Component,
    ctx: &RenderContext,
) -> std::result::Result<KubernetesJob, String> {
    let who = format!("component {}", c.name);
    let action = release_action(step.kind);
    let destroying = matches!(step.kind, StepKind::DestroyPlan | StepKind::Destroy);
    let manifest = match destroying {
        false => rendered::manifest_text(c, ctx)?,
        true => None,
    };
    let kustomize = match (c.manifest().and_then(|m| m.kustomize.as_ref()), destroying) {
        (Some(k), false) => Some(KustomizeBuild {
            artifact: synced_artifact(cx, step, &c.name)?,
            path: k.path.clone(),
            enable_helm: k.enable_helm,
            load_restrictor: k.load_restrictor.clone(),
        }),
        _ => None,
    };
    let applied = ctx
        .component_outputs
        .get(&c.name)
        .and_then(|o| o.get("objects"))
        .and_then(|o| o.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Ok(KubernetesJob {
        action,
        component: c.name.clone(),
        // A destroy needs no manifest: it deletes what the last apply made.
        manifest,
        kustomize,
        namespace: c
            .spec
            .namespace()
            .map(|ns| render_text(ns, ctx, &format!("{who} namespace")))
            .transpose()?,
        kubeconfig: kubeconfig_of(cx, ctx, c.kubernetes_context.as_deref())?,
        applied,
        policies: plan_policies(cx, step),
        delete_namespaced: Vec::new(),
    })
}

/// The variable an action's script reads its kubeconfig's text from
/// (`enable_kube_config`): the script writes it to a private file of the
/// job's directory and sets `KUBECONFIG` to that file.
const KUBECONFIG_VAR: &str = "NUON_KUBECONFIG_CONTENTS";

/// The `wasm` component a step targets, if it targets one.
pub(super) fn wasm_target<'a>(cx: &'a Ctx, step: &Step) -> Option<&'a Component> {
    step.target
        .as_deref()
        .and_then(|t| cx.config.component(t))
        .filter(|c| c.kind() == ComponentKind::Wasm)
}

/// What a plan or apply deploys: the artifact its workflow synced (so a
/// newer build of the same config version cannot slip in between), or
/// the build's.
pub(super) fn synced_artifact(
    cx: &Ctx,
    step: &Step,
    target: &str,
) -> std::result::Result<ArtifactRef, String> {
    rules::synced_before(&cx.wf.steps, step).unwrap_or_else(|| artifact(cx, target))
}

/// The tool image jobs of `kind` run in on a runner that runs jobs in
/// containers: the build of the `container_image` component the app's
/// `runner.toml` names for the kind (`[job_images]`). The runner syncs it
/// from the vendor's store into the install's by digest before the job.
fn job_image(cx: &Ctx, kind: &str) -> std::result::Result<Option<ImageRef>, String> {
    // Syncs and WASM plugins work in the runner's own process.
    if kind == "default" || !nuon_core::app::JOB_IMAGE_KINDS.contains(&kind) {
        return Ok(None);
    }
    let Some(component) = cx.config.runner.as_ref().and_then(|r| r.job_image(kind)) else {
        return Ok(None);
    };
    let built = cx.builds.get(component).ok_or_else(|| {
        format!(
            "the job image of {kind} jobs is component {component:?} (runner.toml [job_images]), which has no successful build of config version {}: run `nuon builds create --app {}`",
            cx.wf.config_version, cx.app_name
        )
    })?;
    Ok(Some(ImageRef {
        repository: built.repo.clone(),
        digest: built.digest.clone(),
    }))
}

/// The newest build's artifact of a step's target.
fn artifact(cx: &Ctx, target: &str) -> std::result::Result<ArtifactRef, String> {
    cx.builds.get(target).cloned().ok_or_else(|| {
        format!(
            "{target} has no successful build of config version {}: run `nuon builds create --app {}`",
            cx.wf.config_version, cx.app_name
        )
    })
}

/// A component's `deploy_timeout`, an hour when it gives none.
pub(super) fn deploy_timeout(text: Option<&str>) -> std::result::Result<Duration, String> {
    timeout_of(text, Duration::from_secs(3600))
}

fn timeout_of(text: Option<&str>, default: Duration) -> std::result::Result<Duration, String> {
    match text {
        Some(t) => nuon_core::parse_duration(t)
            .map(|d| Duration::from_secs(d.as_secs().max(1)))
            .map_err(|e| format!("timeout {t:?}: {e}")),
        None => Ok(default),
    }
}
