//! The `kubernetes_manifest` job kind: Kubernetes objects applied
//! server-side with the `kubectl` binary (found with `which`), under the
//! field manager `nuon`.
//!
//! - the manifest is the job's rendered inline manifest, or `kustomize
//!   build` of the component's packaged source (from the install's store, by
//!   digest), which needs the `kustomize` binary;
//! - plan: `kubectl apply --server-side --dry-run=server -o name` (what the
//!   manifest makes) and `kubectl diff --server-side` (what would change):
//!   adds, changes and the objects the last apply made that are no longer
//!   rendered (destroys);
//! - apply: `kubectl apply --server-side --force-conflicts -o name`, then
//!   `kubectl delete` of what the component no longer renders (pruning),
//!   and of the objects the job names with their namespaces (what a
//!   secrets sync no longer writes); the objects applied are the
//!   component's output `objects`;
//! - destroy plan and destroy: what the last apply made, and `kubectl
//!   delete --ignore-not-found` of it.
//!
//! A kubeconfig from the sandbox's outputs is written to the work
//! directory (0600) and given as `KUBECONFIG`. There is no Kubernetes API
//! server on the machines that test this project: the tests run the plugin
//! against a stand-in `kubectl` that records its arguments and answers
//! like kubectl.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use nuon_core::artifact::ArtifactStore;
use nuon_core::{
    HelmAction, Job, JobHost, JobResult, JobSpec, KubernetesJob, Outcome, Plugin, PluginError,
    ProcessExit,
};
use serde_json::{Value, json};

/// Runs `kubernetes_manifest` jobs against the install's store.
pub struct KubernetesPlugin {
    store: Arc<dyn ArtifactStore>,
    containers: bool,
}

impl KubernetesPlugin {
    /// A plugin reading packaged kustomizations from `store`.
    pub fn new(store: Arc<dyn ArtifactStore>) -> Self {
        KubernetesPlugin {
            store,
            containers: false,
        }
    }

    /// With `on`, `kubectl` and `kustomize` come from each job's container
    /// image, and none is looked up on this host.
    pub fn in_containers(mut self, on: bool) -> Self {
        self.containers = on;
        self
    }
}

fn decode(spec: &JobSpec) -> Result<KubernetesJob, PluginError> {
    spec.payload_as()
        .map_err(|e| PluginError::Invalid(format!("kubernetes_manifest: {e}")))
}

fn tool(name: &str, how: &str) -> Result<PathBuf, PluginError> {
    which::which(name).map_err(|_| {
        PluginError::Missing(format!(
            "kubernetes_manifest: the `{name}` binary is not on PATH; install it ({how})"
        ))
    })
}

fn kubectl() -> Result<PathBuf, PluginError> {
    tool("kubectl", "https://kubernetes.io/docs/tasks/tools/")
}

use crate::exec::{run_tool as run, tool_failed as failed};

fn ok(outputs: Value) -> JobResult {
    JobResult {
        outcome: Outcome::Succeeded,
        exit_code: Some(0),
        reason: None,
        outputs,
    }
}

/// The object names `kubectl -o name` wrote, one a line.
fn names_in(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| l.split_whitespace().next().unwrap_or("").to_owned())
        .filter(|l| l.contains('/'))
        .collect()
}

fn work_file(work: &Path, name: &str, text: &str) -> Result<String, PluginError> {
    crate::exec::write_work_file(work, name, text, "kubernetes_manifest")
}

/// Deletes each `NAMESPACE/KIND/NAME` in its namespace (objects a job
/// wrote in namespaces of their own, such as synced Secrets); what it
/// deleted, or the failed job.
async fn delete_namespaced(
    host: &mut dyn JobHost,
    bin: &Path,
    env: &[(String, String)],
    objects: &[String],
) -> Result<Result<Vec<String>, JobResult>, PluginError> {
    let mut gone = Vec::new();
    for o in objects {
        let Some((namespace, object)) = o.split_once('/') else {
            continue;
        };
        let args = [
            "delete",
            "--ignore-not-found",
            "--namespace",
            namespace,
            object,
        ]
        .map(str::to_owned);
        match run(host, bin, env, &args, None).await? {
            ProcessExit::Exited(0) => gone.push(o.clone()),
            other => return Ok(Err(failed("kubectl delete (in its namespace)", other))),
        }
    }
    Ok(Ok(gone))
}

#[async_trait]
impl Plugin for KubernetesPlugin {
    fn kind(&self) -> &'static str {
        KubernetesJob::KIND
    }

    fn validate(&self, spec: &JobSpec) -> Result<(), PluginError> {
        let job = decode(spec)?;
        if let Some(ns) = &job.namespace {
            let ok = !ns.is_empty()
                && ns.len() <= 63
                && ns
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !ok {
                return Err(PluginError::Invalid(format!(
                    "kubernetes_manifest: namespace {ns:?} must be lowercase letters, digits and '-' (at most 63)"
                )));
            }
        }
        let builds = matches!(job.action, HelmAction::Plan | HelmAction::Apply);
        if builds && job.manifest.is_none() && job.kustomize.is_none() {
            return Err(PluginError::Invalid(
                "kubernetes_manifest: the job has neither a manifest nor a kustomization".into(),
            ));
        }
        if self.containers {
            return Ok(());
        }
        kubectl().map(|_| ())
    }

    async fn run(&self, spec: &JobSpec, host: &mut dyn JobHost) -> Result<JobResult, PluginError> {
        let job = decode(spec)?;
        let bin = crate::exec::find_tool(host, "kubectl", || match kubectl() {
            Err(e) => e,
            Ok(_) => PluginError::Missing("kubectl: not found".into()),
        })?;
        let work = host.work_dir().to_path_buf();
        let mut env = Vec::new();
        if let Some(k) = &job.kubeconfig {
            env.push(("KUBECONFIG".to_owned(), work_file(&work, "kubeconfig", k)?));
        }
        let ns: Vec<String> = job
            .namespace
            .iter()
            .flat_map(|n| ["--namespace".to_owned(), n.clone()])
            .collect();
        let applied: BTreeSet<String> = job.applied.iter().cloned().collect();
        if matches!(job.action, HelmAction::DestroyPlan | HelmAction::Destroy) {
            if job.action == HelmAction::DestroyPlan {
                for o in applied.iter().chain(&job.delete_namespaced) {
                    host.log(&format!("would delete {o}"));
                }
                let destroy = applied.len() + job.delete_namespaced.len();
                return Ok(ok(
                    json!({"changes": {"add": 0, "change": 0, "destroy": destroy}}),
                ));
            }
            let mut deleted: Vec<String> = Vec::new();
            if !applied.is_empty() {
                let args = [
                    vec![
                        "delete".to_owned(),
                        "--ignore-not-found".to_owned(),
                        "--wait".to_owned(),
                    ],
                    ns,
                    applied.iter().cloned().collect(),
                ]
                .concat();
                match run(host, &bin, &env, &args, None).await? {
                    ProcessExit::Exited(0) => deleted.extend(applied),
                    other => return Ok(failed("kubectl delete", other)),
                }
            }
            return Ok(
                match delete_namespaced(host, &bin, &env, &job.delete_namespaced).await? {
                    Ok(gone) => {
                        deleted.extend(gone);
                        ok(json!({"deleted": deleted}))
                    }
                    Err(failed) => failed,
                },
            );
        }
        // The manifest: inline, or built from the packaged kustomization.
        let manifest = match (&job.manifest, &job.kustomize) {
            (Some(text), _) => work_file(&work, "manifest.yaml", text)?,
            (None, Some(k)) => {
                let kustomize = crate::exec::find_tool(host, "kustomize", || {
                    match tool(
                        "kustomize",
                        "https://kubectl.docs.kubernetes.io/installation/kustomize/",
                    ) {
                        Err(e) => e,
                        Ok(_) => PluginError::Missing("kustomize: not found".into()),
                    }
                })?;
                let src = work.join("source");
                crate::oci::modulepkg::unpack_module(
                    &*self.store,
                    &k.artifact.repo,
                    &k.artifact.digest,
                    &src,
                )
                .await
                .map_err(|e| PluginError::Missing(format!("kubernetes_manifest: {e}")))?;
                let dir = nuon_core::app::source_dir(&k.path).map_err(|e| {
                    PluginError::Invalid(format!("kubernetes_manifest: kustomize {e}"))
                })?;
                let mut args = vec![
                    "build".to_owned(),
                    src.join(dir).to_string_lossy().into_owned(),
                ];
                if k.enable_helm {
                    args.push("--enable-helm".into());
                }
                if k.load_restrictor.as_deref() == Some("none") {
                    args.extend(["--load-restrictor".into(), "LoadRestrictionsNone".into()]);
                }
                match run(host, &kustomize, &env, &args, Some("manifest.yaml")).await? {
                    ProcessExit::Exited(0) => {
                        work.join("manifest.yaml").to_string_lossy().into_owned()
                    }
                    other => return Ok(failed("kustomize build", other)),
                }
            }
            (None, None) => unreachable!("validated"),
        };
        let base = |verb: &[&str]| -> Vec<String> {
            let mut a: Vec<String> = verb.iter().map(|s| s.to_string()).collect();
            a.extend(["--server-side".into(), "--field-manager=nuon".into()]);
            a.extend(ns.iter().cloned());
            a.extend(["-f".into(), manifest.clone()]);
            a
        };
        match job.action {
            HelmAction::Plan => {
                // The objects pass the component's policies before kubectl
                // sees them.
                let text = std::fs::read_to_string(&manifest).unwrap_or_default();
                let namespace = job.namespace.as_deref();
                let warnings = match crate::policy::gate_manifests(
                    host,
                    &job.policies,
                    "manifest",
                    &text,
                    namespace,
                ) {
                    Ok(w) => w,
                    Err(failed) => return Ok(failed),
                };
                let mut list = base(&["apply"]);
                list.extend(["--dry-run=server".into(), "-o".into(), "name".into()]);
                match run(host, &bin, &env, &list, Some("names.txt")).await? {
                    ProcessExit::Exited(0) => {}
                    other => return Ok(failed("kubectl apply --dry-run=server", other)),
                }
                let now: BTreeSet<String> = names_in(&work.join("names.txt")).into_iter().collect();
                // `kubectl diff`: 0 no differences, 1 differences, more an error.
                let changed =
                    match run(host, &bin, &env, &base(&["diff"]), Some("diff.txt")).await? {
                        ProcessExit::Exited(0) => 0,
                        ProcessExit::Exited(1) => std::fs::read_to_string(work.join("diff.txt"))
                            .unwrap_or_default()
                            .lines()
                            .filter(|l| l.starts_with("diff "))
                            .count(),
                        other => return Ok(failed("kubectl diff", other)),
                    };
                let add = now.difference(&applied).count();
                let gone: Vec<&String> = applied.difference(&now).collect();
                for o in &now {
                    host.log(&format!("renders {o}"));
                }
                for o in &gone {
                    host.log(&format!("prunes {o}: no longer rendered"));
                }
                Ok(ok(json!({
                    "changes": {"add": add, "change": changed.saturating_sub(add), "destroy": gone.len()},
                    "objects": now,
                    "policy_warnings": warnings,
                })))
            }
            HelmAction::Apply => {
                let mut args = base(&["apply"]);
                args.extend(["--force-conflicts".into(), "-o".into(), "name".into()]);
                match run(host, &bin, &env, &args, Some("applied.txt")).await? {
                    ProcessExit::Exited(0) => {}
                    other => return Ok(failed("kubectl apply", other)),
                }
                let now: BTreeSet<String> =
                    names_in(&work.join("applied.txt")).into_iter().collect();
                let mut gone: Vec<String> = applied.difference(&now).cloned().collect();
                if !gone.is_empty() {
                    let args = [
                        vec!["delete".to_owned(), "--ignore-not-found".to_owned()],
                        ns.clone(),
                        gone.clone(),
                    ]
                    .concat();
                    match run(host, &bin, &env, &args, None).await? {
                        ProcessExit::Exited(0) => {}
                        other => return Ok(failed("kubectl delete (pruning)", other)),
                    }
                }
                match delete_namespaced(host, &bin, &env, &job.delete_namespaced).await? {
                    Ok(deleted) => gone.extend(deleted),
                    Err(failed) => return Ok(failed),
                }
                Ok(ok(json!({
                    "outputs": {
                        "objects": now,
                        "namespace": job.namespace,
                    },
                    "pruned": gone,
                })))
            }
            HelmAction::DestroyPlan | HelmAction::Destroy => unreachable!("handled above"),
        }
    }
}
