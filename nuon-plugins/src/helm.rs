//! The `helm` job kind: a Helm chart from the install's store (by digest)
//! driven through the `helm` binary, found with `which`.
//!
//! - plan: `helm template` with the rendered values (the manifests go to
//!   the job's log, their count to the outputs);
//! - apply: `helm upgrade --install --atomic --wait --timeout`, then
//!   `helm status -o json` for the outputs;
//! - destroy plan: `helm status` (whether there is a release to remove);
//! - destroy: `helm uninstall --wait`.
//!
//! Values are written as JSON (which YAML reads) after the values files, so
//! they win. A `storage_driver` is given to Helm as `HELM_DRIVER`;
//! `take_ownership` adds `--take-ownership` to the upgrade. A
//! kubeconfig from the sandbox's outputs is written to the work directory
//! (0600) and given as `KUBECONFIG`.
//!
//! There is no Kubernetes cluster and no `helm` binary on the machines that
//! test this project: the tests run the plugin against a stand-in `helm`
//! executable that records its arguments and checks its inputs.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use nuon_core::artifact::ArtifactStore;
use nuon_core::{
    HelmAction, HelmJob, Job, JobHost, JobResult, JobSpec, Outcome, Plugin, PluginError,
    ProcessExit,
};
use serde_json::{Value, json};

use crate::oci::helmpkg::fetch_chart;

/// Runs `helm` jobs against the install's store.
pub struct HelmPlugin {
    store: Arc<dyn ArtifactStore>,
    containers: bool,
}

impl HelmPlugin {
    /// A plugin reading charts from `store`.
    pub fn new(store: Arc<dyn ArtifactStore>) -> Self {
        HelmPlugin {
            store,
            containers: false,
        }
    }

    /// With `on`, `helm` comes from each job's container image, and none is
    /// looked up on this host.
    pub fn in_containers(mut self, on: bool) -> Self {
        self.containers = on;
        self
    }
}

fn decode(spec: &JobSpec) -> Result<HelmJob, PluginError> {
    spec.payload_as()
        .map_err(|e| PluginError::Invalid(format!("helm: {e}")))
}

fn helm() -> Result<PathBuf, PluginError> {
    which::which("helm").map_err(|_| {
        PluginError::Missing(
            "helm: the `helm` binary is not on PATH; install Helm 3 (https://helm.sh/docs/intro/install/)".into(),
        )
    })
}

/// Runs `helm ARGS`; `Some(result)` when it failed.
async fn run_helm(
    host: &mut dyn JobHost,
    bin: &Path,
    env: &[(String, String)],
    args: &[String],
    stdout_file: Option<&str>,
) -> Result<Option<JobResult>, PluginError> {
    Ok(
        match crate::exec::run_tool(host, bin, env, args, stdout_file).await? {
            ProcessExit::Exited(0) => None,
            other => Some(crate::exec::tool_failed(
                &format!("helm {}", args[0]),
                other,
            )),
        },
    )
}

fn ok(outputs: Value) -> JobResult {
    JobResult {
        outcome: Outcome::Succeeded,
        exit_code: Some(0),
        reason: None,
        outputs,
    }
}

#[async_trait]
impl Plugin for HelmPlugin {
    fn kind(&self) -> &'static str {
        HelmJob::KIND
    }

    fn validate(&self, spec: &JobSpec) -> Result<(), PluginError> {
        let job = decode(spec)?;
        let name_ok = |s: &str| {
            !s.is_empty()
                && s.len() <= 53
                && s.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        };
        if !name_ok(&job.release) || !name_ok(&job.namespace) {
            return Err(PluginError::Invalid(format!(
                "helm: release {:?} and namespace {:?} must be lowercase letters, digits and '-' (at most 53)",
                job.release, job.namespace
            )));
        }
        if self.containers {
            return Ok(());
        }
        helm().map(|_| ())
    }

    async fn run(&self, spec: &JobSpec, host: &mut dyn JobHost) -> Result<JobResult, PluginError> {
        let job = decode(spec)?;
        let bin = crate::exec::find_tool(host, "helm", || match helm() {
            Err(e) => e,
            Ok(_) => PluginError::Missing("helm: not found".into()),
        })?;
        let work = host.work_dir().to_path_buf();
        // Values and the kubeconfig can hold secrets: only the job's user
        // reads them.
        let write =
            |name: &str, text: &str| crate::exec::write_work_file(&work, name, text, "helm");
        let mut env = Vec::new();
        if let Some(driver) = &job.storage_driver {
            env.push(("HELM_DRIVER".to_owned(), driver.clone()));
        }
        if let Some(k) = &job.kubeconfig {
            let p = write("kubeconfig", k)?;
            env.push(("KUBECONFIG".to_owned(), p));
        }
        let ns = vec!["--namespace".to_owned(), job.namespace.clone()];
        if matches!(job.action, HelmAction::DestroyPlan | HelmAction::Destroy) {
            // Whether the release is there: `helm list` must succeed (an
            // unreachable cluster is an error, not an absent release).
            let list = [
                vec![
                    "list".to_owned(),
                    "--filter".to_owned(),
                    format!("^{}$", job.release),
                    "--output".to_owned(),
                    "json".to_owned(),
                ],
                ns.clone(),
            ]
            .concat();
            if let Some(failed) = run_helm(host, &bin, &env, &list, Some("releases.json")).await? {
                return Ok(failed);
            }
            let present = std::fs::read(work.join("releases.json"))
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .and_then(|v| v.as_array().map(|a| !a.is_empty()))
                .ok_or_else(|| {
                    PluginError::Missing(
                        "helm: `helm list --output json` answered no JSON list".into(),
                    )
                })?;
            if job.action == HelmAction::DestroyPlan || !present {
                if !present {
                    host.log(&format!(
                        "release {} is not installed: nothing to remove",
                        job.release
                    ));
                }
                let n = u64::from(present);
                return Ok(ok(
                    json!({"changes": {"add": 0, "change": 0, "destroy": n}}),
                ));
            }
            let args = [
                vec!["uninstall".to_owned(), job.release.clone()],
                ns,
                vec!["--wait".to_owned()],
            ]
            .concat();
            if let Some(failed) = run_helm(host, &bin, &env, &args, None).await? {
                return Ok(failed);
            }
            return Ok(ok(json!({"release": job.release, "uninstalled": true})));
        }
        let chart = work.join("chart.tgz");
        fetch_chart(&*self.store, &job.chart.repo, &job.chart.digest, &chart)
            .await
            .map_err(|e| PluginError::Missing(format!("helm: {e}")))?;
        let chart = chart.to_string_lossy().into_owned();
        let mut values = Vec::new();
        for (i, text) in job.values_files.iter().enumerate() {
            values.push("--values".to_owned());
            values.push(write(&format!("values-{i}.yaml"), text)?);
        }
        let json = serde_json::to_string(&job.values).unwrap_or_else(|_| "{}".into());
        values.push("--values".to_owned());
        values.push(write("values.json", &json)?);
        match job.action {
            HelmAction::Plan => {
                let args = [
                    vec!["template".to_owned(), job.release.clone(), chart],
                    ns,
                    values,
                ]
                .concat();
                if let Some(failed) =
                    run_helm(host, &bin, &env, &args, Some("rendered.yaml")).await?
                {
                    return Ok(failed);
                }
                // The rendered manifests can hold secrets (base64 in a
                // Secret's data): the log gets what they are, not their text.
                let rendered =
                    std::fs::read_to_string(work.join("rendered.yaml")).unwrap_or_default();
                let kinds: Vec<&str> = rendered
                    .lines()
                    .filter_map(|l| l.strip_prefix("kind:"))
                    .map(str::trim)
                    .collect();
                for k in &kinds {
                    host.log(&format!("renders a {k}"));
                }
                let resources = kinds.len();
                host.log(&format!(
                    "plan: {resources} Kubernetes resource(s) rendered"
                ));
                let warnings = match crate::policy::gate_manifests(
                    host,
                    &job.policies,
                    "rendered chart",
                    &rendered,
                    Some(&job.namespace),
                ) {
                    Ok(w) => w,
                    Err(failed) => return Ok(failed),
                };
                Ok(ok(json!({
                    "changes": {"add": resources, "change": 0, "destroy": 0},
                    "chart": job.chart,
                    "policy_warnings": warnings,
                })))
            }
            HelmAction::Apply => {
                let timeout = format!("{}s", spec.timeout_secs.saturating_sub(30).max(30));
                let mut args = [
                    vec![
                        "upgrade".to_owned(),
                        "--install".to_owned(),
                        job.release.clone(),
                        chart,
                    ],
                    ns.clone(),
                    vec![
                        "--create-namespace".to_owned(),
                        "--atomic".to_owned(),
                        "--wait".to_owned(),
                        "--timeout".to_owned(),
                        timeout,
                    ],
                    values,
                ]
                .concat();
                // Adopt objects another release or tool made (Helm 3.17+).
                if job.take_ownership {
                    args.push("--take-ownership".to_owned());
                }
                if let Some(failed) = run_helm(host, &bin, &env, &args, None).await? {
                    return Ok(failed);
                }
                let status = [
                    vec!["status".to_owned(), job.release.clone()],
                    ns,
                    vec!["--output".to_owned(), "json".to_owned()],
                ]
                .concat();
                if let Some(failed) =
                    run_helm(host, &bin, &env, &status, Some("status.json")).await?
                {
                    return Ok(failed);
                }
                let s: Value = std::fs::read(work.join("status.json"))
                    .ok()
                    .and_then(|b| serde_json::from_slice(&b).ok())
                    .unwrap_or(Value::Null);
                Ok(ok(json!({"outputs": {
                    "release": job.release,
                    "namespace": job.namespace,
                    "revision": s["version"],
                    "status": s["info"]["status"],
                    "chart": job.chart.digest,
                }})))
            }
            HelmAction::DestroyPlan | HelmAction::Destroy => unreachable!("handled above"),
        }
    }
}
