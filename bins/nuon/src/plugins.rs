//! `nuon plugins run`: a WASM plugin on this machine, through the same host
//! the runner uses, for plugin authors to try before they publish.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use clap::Subcommand;
use nuon_core::wasm::{Capabilities, PluginManifest};
use nuon_plugins::oci::pluginpkg::{MANIFEST_FILE, read_plugin_dir};
use nuon_plugins::wasm::job::{plan_from_json, plan_to_json};
use nuon_plugins::wasm::{Call, CallContext, HostConfig, PlanMode, Reply, Request, WasmHost};
use serde_json::{Value, json};

use crate::CliError;

#[derive(Debug, Subcommand)]
pub(crate) enum PluginsCommand {
    /// Run one call of a plugin locally and print its result as JSON. The
    /// plugin gets what its plugin.toml asks for (a bare .wasm: nothing).
    Run {
        /// The plugin's directory (with plugin.toml) or its .wasm file.
        plugin: PathBuf,
        /// info, validate, plan, destroy-plan, apply (plans first unless
        /// --plan is given) or destroy (likewise).
        #[arg(long, default_value = "plan", value_parser = ["info", "validate", "plan", "destroy-plan", "apply", "destroy"])]
        action: String,
        /// The config: a JSON file, or `-` for standard input.
        #[arg(long)]
        config: Option<PathBuf>,
        /// The config as JSON text.
        #[arg(long, conflicts_with = "config")]
        config_json: Option<String>,
        /// The state of the last apply (a JSON file).
        #[arg(long)]
        state: Option<PathBuf>,
        /// The plan to carry out (a JSON file, as `plan` printed it).
        #[arg(long)]
        plan: Option<PathBuf>,
        /// A secret the plugin may read (repeatable), if its plugin.toml
        /// declares it.
        #[arg(long = "secret", value_name = "NAME=VALUE", value_parser = crate::parse_env)]
        secrets: Vec<(String, String)>,
        /// The work directory the plugin sees (default: a new empty one).
        #[arg(long)]
        work_dir: Option<PathBuf>,
    },
}

fn read_json(path: &PathBuf, what: &str) -> Result<Value, CliError> {
    let text = if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|e| CliError::usage(format!("cannot read the {what} {}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| CliError::usage(format!("the {what} {} is not JSON: {e}", path.display())))
}

pub(crate) async fn plugins(command: &PluginsCommand) -> Result<u8, CliError> {
    let PluginsCommand::Run {
        plugin,
        action,
        config,
        config_json,
        state,
        plan,
        secrets,
        work_dir,
    } = command;
    let (manifest, wasm) = if plugin.is_dir() {
        read_plugin_dir(plugin).map_err(|e| CliError::usage(e.to_string()))?
    } else {
        let bytes = std::fs::read(plugin)
            .map_err(|e| CliError::usage(format!("cannot read {}: {e}", plugin.display())))?;
        let m = PluginManifest {
            name: plugin
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default(),
            version: "local".into(),
            wasm: String::new(),
            capabilities: Capabilities::default(),
        };
        eprintln!(
            "nuon: {} has no {MANIFEST_FILE}: it runs with no hosts and no secrets",
            plugin.display()
        );
        (m, bytes)
    };
    let limits = manifest.capabilities.limits().map_err(CliError::usage)?;
    let config = match (config, config_json) {
        (Some(p), _) => read_json(p, "config")?,
        (None, Some(t)) => serde_json::from_str(t)
            .map_err(|e| CliError::usage(format!("--config-json is not JSON: {e}")))?,
        (None, None) => json!({}),
    };
    let state = state.as_ref().map(|p| read_json(p, "state")).transpose()?;
    let plan = plan.as_ref().map(|p| read_json(p, "plan")).transpose()?;
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .map(|d| d.join("nuon").join("wasm-cache"));
    let host = WasmHost::new(HostConfig {
        cache_dir: cache,
        max_instances: 4,
    })
    .map_err(|e| CliError::usage(e.to_string()))?;
    let failed = |e: nuon_plugins::wasm::WasmError| CliError {
        message: e.to_string(),
        code: 1,
        api_code: None,
    };
    let loaded = host.load(&wasm, &limits).await.map_err(failed)?;
    if action == "info" {
        let i = &loaded.info;
        crate::print_json(&json!({
            "name": i.name, "version": i.version,
            "component_types": i.component_types, "config_schema": i.config_schema,
        }))?;
        return Ok(0);
    }
    let problems = nuon_plugins::wasm::schema::check(&loaded.info.config_schema, &config);
    if !problems.is_empty() {
        return Err(CliError::usage(format!(
            "the config does not match the plugin's schema: {}",
            problems.join("; ")
        )));
    }
    let tmp = tempfile::tempdir()
        .map_err(|e| CliError::usage(format!("cannot make a work directory: {e}")))?;
    let work = work_dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let granted: BTreeMap<String, String> = secrets
        .iter()
        .filter(|(k, _)| manifest.capabilities.secrets.contains(k))
        .cloned()
        .collect();
    let (log, mut lines) = tokio::sync::mpsc::unbounded_channel();
    let printer = tokio::spawn(async move {
        while let Some(l) = lines.recv().await {
            eprintln!("{l}");
        }
    });
    let ctx = CallContext {
        work_dir: work,
        env: Vec::new(),
        allowed_hosts: manifest.capabilities.allowed_hosts.clone(),
        secrets: granted,
        limits,
        stop: Arc::new(AtomicBool::new(false)),
        log,
    };
    let request = || Request {
        config: config.to_string(),
        state: state.as_ref().map(Value::to_string),
    };
    let mode = |a: &str| {
        if a.starts_with("destroy") {
            PlanMode::Destroy
        } else {
            PlanMode::Deploy
        }
    };
    let result = async {
        Ok::<Value, nuon_plugins::wasm::WasmError>(match action.as_str() {
            "validate" => {
                host.call(&loaded, &ctx, Call::Validate(config.to_string())).await?;
                json!({"valid": true})
            }
            "plan" | "destroy-plan" => match host.call(&loaded, &ctx, Call::Plan(request(), mode(action))).await? {
                Reply::Plan(p) => plan_to_json(&p),
                _ => Value::Null,
            },
            _ => {
                let p = match &plan {
                    Some(p) => plan_from_json(p).map_err(nuon_plugins::wasm::WasmError::Host)?,
                    None => match host.call(&loaded, &ctx, Call::Plan(request(), mode(action))).await? {
                        Reply::Plan(p) => p,
                        _ => unreachable!("plan answers a plan"),
                    },
                };
                let call = if action == "apply" {
                    Call::Apply(request(), p)
                } else {
                    Call::Destroy(request(), p)
                };
                match host.call(&loaded, &ctx, call).await? {
                    Reply::Applied(a) => json!({
                        "outputs": serde_json::from_str::<Value>(&a.outputs).unwrap_or(Value::String(a.outputs)),
                        "state": serde_json::from_str::<Value>(&a.state).unwrap_or(Value::String(a.state)),
                    }),
                    _ => json!({"destroyed": true}),
                }
            }
        })
    }
    .await;
    drop(ctx);
    let _ = printer.await;
    let v = result.map_err(failed)?;
    crate::print_json(&v)?;
    Ok(0)
}
