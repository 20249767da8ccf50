//! The `wasm` job kind: a vendor plugin from the install's store, by
//! digest, run by the [`WasmHost`] with what its manifest asks for, once
//! the component's grant and the runner's policy allow it.
//!
//! Before anything of the plugin runs, the job checks, in order: the
//! artifact (every byte against its digest), the manifest's request
//! against the grant and the policy, the component (that it is one, and of
//! the `nuon:plugin` world), and the config against the plugin's schema.
//! Each failure is a failed job with a reason that says what to fix.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use nuon_core::artifact::ArtifactStore;
use nuon_core::wasm::{Capabilities, WasmAction, WasmJob};
use nuon_core::{Job, JobHost, JobResult, JobSpec, Outcome, Plugin, PluginError};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{
    CallContext, ChangeAction, ChangePlan, LoadedFrom, LoadedPlugin, PlanMode, PlannedChange,
    PluginError as WitError, Reply, Request, WasmError, WasmHost,
};

/// How many times a transient plugin error is tried in all.
const ATTEMPTS: u32 = 3;

/// What the customer who runs the runner allows plugins.
#[derive(Debug, Clone)]
pub struct WasmPolicy {
    /// Whether plugins run at all.
    pub enabled: bool,
    /// When set, the only hosts any plugin may call (as
    /// `Capabilities::allowed_hosts`); a plugin asking for another is refused.
    pub allowed_hosts: Option<Vec<String>>,
}

impl Default for WasmPolicy {
    fn default() -> Self {
        WasmPolicy {
            enabled: true,
            allowed_hosts: None,
        }
    }
}

/// Runs `wasm` jobs.
pub struct WasmPlugin {
    host: Arc<WasmHost>,
    store: Arc<dyn ArtifactStore>,
    policy: WasmPolicy,
}

impl WasmPlugin {
    /// A plugin running components from `store` on `host` under `policy`.
    pub fn new(host: Arc<WasmHost>, store: Arc<dyn ArtifactStore>, policy: WasmPolicy) -> Self {
        WasmPlugin {
            host,
            store,
            policy,
        }
    }
}

fn decode(spec: &JobSpec) -> Result<WasmJob, PluginError> {
    let job: WasmJob = spec
        .payload_as()
        .map_err(|e| PluginError::Invalid(format!("wasm: {e}")))?;
    if matches!(job.action, WasmAction::Apply | WasmAction::Destroy) && job.plan.is_none() {
        return Err(PluginError::Invalid(
            "wasm: apply and destroy carry the plan they carry out".into(),
        ));
    }
    if !job.config.is_object() {
        return Err(PluginError::Invalid(
            "wasm: the config must be an object".into(),
        ));
    }
    Ok(job)
}

/// The plan as the platform keeps it (in the plan step's outputs).
pub fn plan_to_json(p: &ChangePlan) -> Value {
    let changes: Vec<Value> = p
        .changes
        .iter()
        .map(|c| {
            json!({
                "action": action_name(c.action),
                "target": c.target,
                "summary": c.summary,
            })
        })
        .collect();
    json!({
        "mode": match p.mode { PlanMode::Deploy => "deploy", PlanMode::Destroy => "destroy" },
        "changes": changes,
        "data": serde_json::from_str::<Value>(&p.data).unwrap_or(Value::String(p.data.clone())),
    })
}

fn action_name(a: ChangeAction) -> &'static str {
    match a {
        ChangeAction::Create => "create",
        ChangeAction::Update => "update",
        ChangeAction::Replace => "replace",
        ChangeAction::Delete => "delete",
    }
}

/// The plan a plan step returned, back in the plugin's terms.
pub fn plan_from_json(v: &Value) -> Result<ChangePlan, String> {
    let mode = match v["mode"].as_str() {
        Some("deploy") => PlanMode::Deploy,
        Some("destroy") => PlanMode::Destroy,
        other => {
            return Err(format!(
                "the plan's mode {other:?} is neither deploy nor destroy"
            ));
        }
    };
    let changes = v["changes"]
        .as_array()
        .ok_or("the plan has no list of changes")?
        .iter()
        .map(|c| {
            let action = match c["action"].as_str() {
                Some("create") => ChangeAction::Create,
                Some("update") => ChangeAction::Update,
                Some("replace") => ChangeAction::Replace,
                Some("delete") => ChangeAction::Delete,
                other => return Err(format!("unknown change action {other:?}")),
            };
            Ok(PlannedChange {
                action,
                target: c["target"].as_str().unwrap_or_default().to_owned(),
                summary: c["summary"].as_str().unwrap_or_default().to_owned(),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(ChangePlan {
        mode,
        changes,
        data: v["data"].to_string(),
    })
}

/// The `changes` summary approvals read (as Terraform's plans give it).
fn change_counts(p: &ChangePlan) -> Value {
    let count = |f: fn(ChangeAction) -> bool| p.changes.iter().filter(|c| f(c.action)).count();
    json!({
        "add": count(|a| a == ChangeAction::Create),
        "change": count(|a| matches!(a, ChangeAction::Update | ChangeAction::Replace)),
        "destroy": count(|a| matches!(a, ChangeAction::Delete | ChangeAction::Replace)),
    })
}

fn failed(reason: String) -> JobResult {
    JobResult::failed(reason)
}

/// Everything the plugin asks for that the grant or the policy does not
/// give, one line each.
pub fn refusals(asked: &Capabilities, grant: &Capabilities, policy: &WasmPolicy) -> Vec<String> {
    let mut out = asked.beyond(grant);
    if let Some(allowed) = &policy.allowed_hosts {
        let ceiling = Capabilities {
            allowed_hosts: allowed.clone(),
            ..asked.clone()
        };
        for h in asked.beyond(&ceiling) {
            out.push(format!("{h} (this runner's --wasm-allowed-hosts)"));
        }
    }
    out
}

impl WasmPlugin {
    /// Runs `call`, draining the plugin's log into the job's and stopping it
    /// when the job must stop. Transient errors are tried again.
    async fn call(
        &self,
        plugin: &LoadedPlugin,
        ctx: &CallContext,
        lines: &mut mpsc::UnboundedReceiver<String>,
        host: &mut dyn JobHost,
        call: super::Call,
    ) -> Result<Reply, WasmError> {
        let mut attempt = 1;
        loop {
            let result = {
                let work = self.host.call(plugin, ctx, call.clone());
                tokio::pin!(work);
                let mut check = tokio::time::interval(Duration::from_millis(50));
                loop {
                    tokio::select! {
                        r = &mut work => break r,
                        Some(line) = lines.recv() => host.log(&line),
                        _ = check.tick() => {
                            if let Some(reason) = host.stop_requested() {
                                tracing::info!(?reason, "stopping the plugin");
                                ctx.stop.store(true, Ordering::Relaxed);
                            }
                        }
                    }
                }
            };
            while let Ok(line) = lines.try_recv() {
                host.log(&line);
            }
            match result {
                Err(WasmError::Plugin(WitError::Transient(m))) if attempt < ATTEMPTS => {
                    host.log(&format!(
                        "transient failure (attempt {attempt} of {ATTEMPTS}): {m}; trying again"
                    ));
                    tokio::time::sleep(Duration::from_secs(u64::from(attempt))).await;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }
}

#[async_trait]
impl Plugin for WasmPlugin {
    fn kind(&self) -> &'static str {
        WasmJob::KIND
    }

    fn in_process(&self) -> bool {
        true
    }

    fn validate(&self, spec: &JobSpec) -> Result<(), PluginError> {
        decode(spec)?;
        if !self.policy.enabled {
            return Err(PluginError::Invalid(
                "wasm: this runner does not run WASM plugins (it was started with --wasm-plugins off)"
                    .into(),
            ));
        }
        Ok(())
    }

    async fn run(&self, spec: &JobSpec, host: &mut dyn JobHost) -> Result<JobResult, PluginError> {
        let job = decode(spec)?;
        // 1. The artifact, every byte against its digest.
        let (manifest, wasm) = match crate::oci::pluginpkg::fetch_plugin(
            &*self.store,
            &job.plugin.repo,
            &job.plugin.digest,
        )
        .await
        {
            Ok(p) => p,
            Err(e) => return Ok(failed(format!("wasm: {e}"))),
        };
        // 2. What it asks for, against the grant and the runner's policy.
        let refused = refusals(&manifest.capabilities, &job.grant, &self.policy);
        if !refused.is_empty() {
            return Ok(failed(format!(
                "wasm: plugin {} asks for more than it is granted, so it was not run: {}; grant it in the component's [capabilities] or change its plugin.toml",
                manifest.name,
                refused.join("; ")
            )));
        }
        let limits = match manifest.capabilities.limits() {
            Ok(l) => l,
            Err(e) => return Ok(failed(format!("wasm: plugin {}: {e}", manifest.name))),
        };
        // 3. A component of our world (compiling it, or the cache).
        let plugin = match self.host.load(&wasm, &limits).await {
            Ok(p) => p,
            Err(e) => return Ok(failed(format!("wasm: plugin {}: {e}", manifest.name))),
        };
        let (from, took) = plugin.loaded;
        host.log(&format!(
            "plugin {} {} ({} bytes, sha256 {}): {} in {:.1} ms; memory {} MiB, {}s per call",
            plugin.info.name,
            plugin.info.version,
            wasm.len(),
            &plugin.sha256[..12],
            match from {
                LoadedFrom::Compiled => "compiled",
                LoadedFrom::DiskCache => "loaded from the compile cache",
                LoadedFrom::Memory => "already loaded",
            },
            took.as_secs_f64() * 1000.0,
            limits.memory >> 20,
            limits.timeout.as_secs()
        ));
        // 4. The config against the plugin's schema.
        let problems = super::schema::check(&plugin.info.config_schema, &job.config);
        if !problems.is_empty() {
            return Ok(failed(format!(
                "wasm: the config of plugin {} does not match its schema: {}",
                plugin.info.name,
                problems.join("; ")
            )));
        }
        let secrets: BTreeMap<String, String> = job
            .secrets
            .iter()
            .filter(|(k, _)| manifest.capabilities.secrets.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let (log, mut lines) = mpsc::unbounded_channel();
        let ctx = CallContext {
            work_dir: host.work_dir().to_path_buf(),
            env: Vec::new(),
            allowed_hosts: manifest.capabilities.allowed_hosts.clone(),
            secrets,
            limits,
            stop: Arc::new(AtomicBool::new(false)),
            log,
        };
        let request = Request {
            config: job.config.to_string(),
            state: job
                .state
                .as_ref()
                .filter(|s| !s.is_null())
                .map(Value::to_string),
        };
        let plan_of_job = || -> Result<ChangePlan, String> {
            plan_from_json(job.plan.as_ref().unwrap_or(&Value::Null))
        };
        macro_rules! call {
            ($c:expr) => {
                self.call(&plugin, &ctx, &mut lines, host, $c).await
            };
        }
        let result = match job.action {
            WasmAction::Plan => match call!(super::Call::Validate(request.config.clone())) {
                Ok(_) => call!(super::Call::Plan(request, PlanMode::Deploy)),
                Err(e) => Err(e),
            },
            WasmAction::DestroyPlan => call!(super::Call::Plan(request, PlanMode::Destroy)),
            WasmAction::Apply | WasmAction::Destroy => match plan_of_job() {
                Ok(plan) if job.action == WasmAction::Apply => {
                    call!(super::Call::Apply(request, plan))
                }
                Ok(plan) => call!(super::Call::Destroy(request, plan)),
                Err(e) => return Ok(failed(format!("wasm: the plan to carry out: {e}"))),
            },
        };
        let outputs = match result {
            Ok(Reply::Plan(p)) => {
                for c in &p.changes {
                    host.log(&format!(
                        "  {} {}: {}",
                        action_name(c.action),
                        c.target,
                        c.summary
                    ));
                }
                if p.changes.is_empty() {
                    host.log("no changes");
                }
                json!({"plan": plan_to_json(&p), "changes": change_counts(&p)})
            }
            Ok(Reply::Applied(a)) => {
                let outputs: Value = match serde_json::from_str(&a.outputs) {
                    Ok(v @ Value::Object(_)) => v,
                    _ => {
                        return Ok(failed(format!(
                            "wasm: plugin {} returned outputs that are not a JSON object",
                            plugin.info.name
                        )));
                    }
                };
                let state: Value = match serde_json::from_str(&a.state) {
                    Ok(v) => v,
                    Err(e) => {
                        return Ok(failed(format!(
                            "wasm: plugin {} returned a state that is not JSON: {e}",
                            plugin.info.name
                        )));
                    }
                };
                json!({"outputs": outputs, "state": state})
            }
            Ok(_) => json!({"outputs": {}, "state": null}),
            Err(e) => {
                let mut r = failed(format!("wasm: plugin {}: {e}", plugin.info.name));
                if let WasmError::Stopped(_) = e {
                    r.outcome = Outcome::Cancelled;
                }
                return Ok(r);
            }
        };
        Ok(JobResult {
            outcome: Outcome::Succeeded,
            exit_code: Some(0),
            reason: None,
            outputs,
        })
    }
}
