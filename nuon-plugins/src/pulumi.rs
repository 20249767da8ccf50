//! The `pulumi` job kind: a Pulumi program from the install's store (its
//! directory, by digest) run with the `pulumi` CLI, found with `which` (or
//! in the job's image).
//!
//! - preview: `pulumi preview --json`, its `changeSummary` counted as a
//!   plan's changes (`create` adds, `update` and `replace` change, `delete`
//!   destroys);
//! - up: `pulumi up --yes --skip-preview`, then `pulumi stack output
//!   --json` twice: with `--show-secrets` for the values, without to know
//!   which of them are secret;
//! - destroy preview: the resources the stack's state holds (what a
//!   destroy removes), counted without running the program;
//! - destroy: `pulumi destroy --yes --skip-preview`.
//!
//! State. Without a backend of the customer's own, each job works on a
//! fresh local backend in its work directory (`PULUMI_BACKEND_URL=file://…`)
//! and the control plane keeps the stack between jobs, as it keeps
//! Terraform's: under the state's lock, the job reads what it keeps (the
//! checkpoint, the stack's encryption salt and its passphrase), creates the
//! stack, imports the checkpoint (`pulumi stack import`), runs, and after an
//! up or a destroy (failed or not: a failed up may have made resources)
//! exports it (`pulumi stack export`) and writes it back. With
//! `PULUMI_BACKEND_URL` in the job's environment (`s3://…`, `gs://…`,
//! `azblob://…`) that backend keeps the stack and none of this happens.
//!
//! The stack's config is written into `Pulumi.STACK.yaml` (a file only the
//! job's user reads, as Helm values are): keys are `namespace:key`, and a
//! key without a namespace is the project's own (`name` of `Pulumi.yaml`).
//!
//! There is no `pulumi` binary on the machines that test this project: the
//! tests run the plugin against a stand-in `pulumi` executable that keeps a
//! stack in its backend directory and records what it is given.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use nuon_core::artifact::ArtifactStore;
use nuon_core::{
    HttpBackend, Job, JobHost, JobResult, JobSpec, Outcome, Plugin, PluginError, ProcessExit,
    PulumiAction, PulumiJob,
};
use serde_json::{Map, Value, json};

/// The environment variable naming a Pulumi backend.
pub const BACKEND_VAR: &str = "PULUMI_BACKEND_URL";

/// What the control plane keeps of a stack between jobs (sealed, as it
/// keeps Terraform's state).
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct Kept {
    /// `pulumi stack export` of the stack's last run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checkpoint: Option<Value>,
    /// The stack's `encryptionsalt`: its secrets are sealed with it and
    /// the passphrase.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    encryptionsalt: Option<String>,
    /// The passphrase of the stack's secrets (made at its first job).
    passphrase: String,
}

/// The key the kept stack is under in the state document (the rest of the
/// document is Terraform's shape, so a state view can tell them apart).
const KEPT_KEY: &str = "pulumi";

/// Runs `pulumi` jobs against the install's store.
pub struct PulumiPlugin {
    store: Arc<dyn ArtifactStore>,
    containers: bool,
    http: reqwest::Client,
}

impl PulumiPlugin {
    /// A plugin reading programs from `store`. The control plane's state
    /// backend is trusted through the system's roots and, when set,
    /// `SSL_CERT_FILE`.
    pub fn new(store: Arc<dyn ArtifactStore>) -> Self {
        let mut builder = reqwest::Client::builder()
            .user_agent(concat!("nuon-runner/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(std::time::Duration::from_secs(15))
            .timeout(std::time::Duration::from_secs(300));
        if let Some(pem) = std::env::var_os("SSL_CERT_FILE").and_then(|p| std::fs::read(p).ok()) {
            for cert in reqwest::Certificate::from_pem_bundle(&pem).unwrap_or_default() {
                builder = builder.add_root_certificate(cert);
            }
        }
        PulumiPlugin {
            store,
            containers: false,
            http: builder.build().unwrap_or_default(),
        }
    }

    /// With `on`, `pulumi` comes from each job's container image, and none
    /// is looked up on this host.
    pub fn in_containers(mut self, on: bool) -> Self {
        self.containers = on;
        self
    }
}

fn decode(spec: &JobSpec) -> Result<PulumiJob, PluginError> {
    spec.payload_as()
        .map_err(|e| PluginError::Invalid(format!("pulumi: {e}")))
}

const INSTALL: &str = "install the Pulumi CLI on the runner's PATH \
                       (https://www.pulumi.com/docs/iac/download-install/), \
                       or run its jobs in a tool image that has it";

fn pulumi() -> Result<PathBuf, PluginError> {
    which::which("pulumi").map_err(|_| {
        PluginError::Missing(format!(
            "pulumi: the `pulumi` binary is not on this runner's PATH: {INSTALL}"
        ))
    })
}

/// Whether `s` is a Pulumi stack name: letters, digits, `-`, `_`, `.`.
fn stack_name_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

fn ok(outputs: Value) -> JobResult {
    JobResult {
        outcome: Outcome::Succeeded,
        exit_code: Some(0),
        reason: None,
        outputs,
    }
}

fn failed(reason: String) -> JobResult {
    JobResult {
        outcome: Outcome::Failed,
        exit_code: None,
        reason: Some(reason),
        outputs: Value::Null,
    }
}

/// The control plane's state backend of one job: read, locked, written,
/// unlocked, as Terraform's `http` backend does.
struct StateBackend<'a> {
    http: &'a reqwest::Client,
    backend: &'a HttpBackend,
    lock_id: String,
}

impl StateBackend<'_> {
    fn call(&self, method: &str, url: &str) -> reqwest::RequestBuilder {
        let method = reqwest::Method::from_bytes(method.as_bytes()).expect("a valid method");
        self.http
            .request(method, url)
            .basic_auth(&self.backend.username, Some(&self.backend.password))
    }

    fn lock_body(&self, job: &PulumiJob) -> String {
        json!({
            "ID": self.lock_id,
            "Operation": format!("pulumi {:?}", job.action).to_lowercase(),
            "Who": "nuon-runner",
            "Info": format!("stack {} of {}", job.stack, job.component),
        })
        .to_string()
    }

    async fn lock(&self, job: &PulumiJob) -> Result<(), String> {
        let resp = self
            .call("LOCK", &self.backend.address)
            .body(self.lock_body(job))
            .send()
            .await
            .map_err(|e| format!("cannot lock the stack's state: {e}"))?;
        match resp.status().as_u16() {
            200 => Ok(()),
            423 | 409 => Err(format!(
                "the stack's state is locked by another job ({}): wait for it, or release the lock (`nuon installs state unlock`)",
                resp.text().await.unwrap_or_default()
            )),
            s => Err(format!("locking the stack's state answered HTTP {s}")),
        }
    }

    async fn unlock(&self, job: &PulumiJob) -> Result<(), String> {
        let resp = self
            .call("UNLOCK", &self.backend.address)
            .body(self.lock_body(job))
            .send()
            .await
            .map_err(|e| format!("cannot unlock the stack's state: {e}"))?;
        match resp.status().as_u16() {
            200 => Ok(()),
            s => Err(format!("unlocking the stack's state answered HTTP {s}")),
        }
    }

    /// What the control plane keeps of the stack, if anything.
    async fn read(&self) -> Result<Option<Kept>, String> {
        let resp = self
            .call("GET", &self.backend.address)
            .send()
            .await
            .map_err(|e| format!("cannot read the stack's state: {e}"))?;
        match resp.status().as_u16() {
            404 => Ok(None),
            200 => {
                let doc: Value = resp
                    .json()
                    .await
                    .map_err(|e| format!("the stack's state is not JSON: {e}"))?;
                let kept = doc.get(KEPT_KEY).cloned().ok_or(
                    "the state kept under this name is not a Pulumi stack's (a Terraform state?): \
                     a component that changed engine needs its state moved or removed first",
                )?;
                serde_json::from_value(kept)
                    .map(Some)
                    .map_err(|e| format!("the kept Pulumi stack is unreadable: {e}"))
            }
            s => Err(format!("reading the stack's state answered HTTP {s}")),
        }
    }

    async fn write(&self, kept: &Kept) -> Result<(), String> {
        let body = json!({ KEPT_KEY: kept }).to_string();
        let resp = self
            .call(
                "POST",
                &format!("{}?ID={}", self.backend.address, self.lock_id),
            )
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .map_err(|e| format!("cannot write the stack's state: {e}"))?;
        match resp.status().as_u16() {
            200 => Ok(()),
            s => Err(format!(
                "writing the stack's state answered HTTP {s}: {}",
                resp.text().await.unwrap_or_default()
            )),
        }
    }
}

/// One job's `pulumi`: the binary, its environment and the program's
/// directory.
struct Cli {
    bin: PathBuf,
    env: Vec<(String, String)>,
    program: PathBuf,
    stack: String,
}

impl Cli {
    /// `pulumi ARGS --stack S --cwd PROGRAM --non-interactive`; `Err` with
    /// the job's result when it did not succeed.
    async fn run(
        &self,
        host: &mut dyn JobHost,
        args: &[&str],
        stdout_file: Option<&str>,
    ) -> Result<Result<(), JobResult>, PluginError> {
        let mut all: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        all.extend([
            "--stack".to_owned(),
            self.stack.clone(),
            "--cwd".to_owned(),
            self.program.to_string_lossy().into_owned(),
            "--non-interactive".to_owned(),
        ]);
        Ok(
            match crate::exec::run_tool(host, &self.bin, &self.env, &all, stdout_file).await? {
                ProcessExit::Exited(0) => Ok(()),
                other => Err(crate::exec::tool_failed(
                    &format!("pulumi {}", args.first().copied().unwrap_or_default()),
                    other,
                )),
            },
        )
    }
}

/// The YAML (or JSON) file `path` as JSON, if it is there.
fn read_yaml(path: &Path) -> Result<Option<Value>, String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Ok(None);
    };
    let docs = nuon_core::policy::manifest_objects(&text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(docs.into_iter().next())
}

/// The project's name, from `Pulumi.yaml` (or `Pulumi.yml`).
fn project_name(program: &Path) -> Result<String, String> {
    for file in ["Pulumi.yaml", "Pulumi.yml"] {
        if let Some(v) = read_yaml(&program.join(file))? {
            return v["name"].as_str().map(str::to_owned).ok_or_else(|| {
                format!("{file} of the program has no `name`: a Pulumi project names itself")
            });
        }
    }
    Err("the program has no Pulumi.yaml at its root: is its directory a Pulumi project?".into())
}

/// The stack's config as Pulumi reads it: `namespace:key`, a bare key
/// under the project's namespace.
fn stack_config(
    project: &str,
    config: &std::collections::BTreeMap<String, String>,
) -> Map<String, Value> {
    config
        .iter()
        .map(|(k, v)| {
            let key = if k.contains(':') {
                k.clone()
            } else {
                format!("{project}:{k}")
            };
            (key, Value::String(v.clone()))
        })
        .collect()
}

/// Counts a preview's `changeSummary` as a plan's changes.
fn changes_of(summary: &Value) -> Value {
    let n = |k: &str| summary[k].as_u64().unwrap_or(0);
    json!({
        "add": n("create"),
        "change": n("update") + n("replace"),
        "destroy": n("delete"),
    })
}

/// The resources of a checkpoint a destroy removes: all but the stack
/// itself and its providers.
fn resources_of(checkpoint: Option<&Value>) -> Vec<String> {
    checkpoint
        .and_then(|c| c["deployment"]["resources"].as_array())
        .into_iter()
        .flatten()
        .filter(|r| {
            let t = r["type"].as_str().unwrap_or_default();
            t != "pulumi:pulumi:Stack" && !t.starts_with("pulumi:providers:")
        })
        .filter_map(|r| r["urn"].as_str().map(str::to_owned))
        .collect()
}

#[async_trait]
impl Plugin for PulumiPlugin {
    fn kind(&self) -> &'static str {
        PulumiJob::KIND
    }

    fn validate(&self, spec: &JobSpec) -> Result<(), PluginError> {
        let job = decode(spec)?;
        if !stack_name_ok(&job.stack) {
            return Err(PluginError::Invalid(format!(
                "pulumi: stack {:?} must be letters, digits, '-', '_' and '.' (at most 100)",
                job.stack
            )));
        }
        if let Some(bad) = job.config.keys().find(|k| k.is_empty() || k.contains('\0')) {
            return Err(PluginError::Invalid(format!(
                "pulumi: config key {bad:?} is not a key"
            )));
        }
        if job.backend.is_none() && !job.env.contains_key(BACKEND_VAR) {
            return Err(PluginError::Invalid(format!(
                "pulumi: the job names no backend: the control plane's state backend, or {BACKEND_VAR} in its environment"
            )));
        }
        if self.containers {
            return Ok(());
        }
        pulumi().map(|_| ())
    }

    async fn run(&self, spec: &JobSpec, host: &mut dyn JobHost) -> Result<JobResult, PluginError> {
        let job = decode(spec)?;
        let bin = crate::exec::find_tool(host, "pulumi", || match pulumi() {
            Err(e) => e,
            Ok(_) => PluginError::Missing("pulumi: not found".into()),
        })?;
        let work = host.work_dir().to_path_buf();
        let program = work.join("program");
        crate::oci::modulepkg::unpack_module(
            &*self.store,
            &job.program.repo,
            &job.program.digest,
            &program,
        )
        .await
        .map_err(|e| PluginError::Missing(format!("pulumi: the program: {e}")))?;
        let project =
            project_name(&program).map_err(|e| PluginError::Invalid(format!("pulumi: {e}")))?;
        host.log(&format!(
            "Pulumi project {project} ({}), stack {}",
            job.runtime, job.stack
        ));
        let state = job.backend.as_ref().map(|backend| StateBackend {
            http: &self.http,
            backend,
            lock_id: spec.job_id.to_string(),
        });
        let Some(state) = state else {
            host.log("the stack's state is kept by the backend the job's environment names");
            return self
                .run_locked(&job, host, bin, program, &project, None)
                .await;
        };
        if let Err(e) = state.lock(&job).await {
            return Ok(failed(format!("pulumi: {e}")));
        }
        let result = self
            .run_locked(&job, host, bin, program, &project, Some(&state))
            .await;
        if let Err(e) = state.unlock(&job).await {
            host.log(&format!("pulumi: {e}; the lock ends with the job"));
        }
        result
    }
}

impl PulumiPlugin {
    /// The job, its state (when the control plane keeps it) locked.
    async fn run_locked(
        &self,
        job: &PulumiJob,
        host: &mut dyn JobHost,
        bin: PathBuf,
        program: PathBuf,
        project: &str,
        state: Option<&StateBackend<'_>>,
    ) -> Result<JobResult, PluginError> {
        let work = host.work_dir().to_path_buf();
        let kept = match state {
            Some(s) => match s.read().await {
                Ok(k) => k,
                Err(e) => return Ok(failed(format!("pulumi: {e}"))),
            },
            None => None,
        };
        let fresh = kept.is_none();
        let mut kept = kept.unwrap_or_else(|| {
            let mut b = [0u8; 24];
            nuon_core::random_bytes(&mut b);
            Kept {
                passphrase: b.iter().map(|x| format!("{x:02x}")).collect(),
                ..Kept::default()
            }
        });
        let mut env: Vec<(String, String)> = job
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        env.push(("PULUMI_SKIP_UPDATE_CHECK".into(), "true".into()));
        if state.is_some() {
            let backend = work.join("backend");
            std::fs::create_dir_all(&backend).map_err(|e| {
                PluginError::Missing(format!("pulumi: cannot make its backend: {e}"))
            })?;
            env.push((BACKEND_VAR.into(), format!("file://{}", backend.display())));
            env.push(("PULUMI_CONFIG_PASSPHRASE".into(), kept.passphrase.clone()));
        }
        let cli = Cli {
            bin,
            env,
            program: program.clone(),
            stack: job.stack.clone(),
        };
        self.check_version(host, &cli, job).await?;
        // The stack: made afresh on the job's own backend (its checkpoint
        // imported below), or selected on the customer's.
        let made = if state.is_some() {
            cli.run(host, &["stack", "init"], None).await?
        } else {
            cli.run(host, &["stack", "select", "--create"], None)
                .await?
        };
        if let Err(r) = made {
            return Ok(r);
        }
        // Its config, with the salt its secrets are sealed with.
        let file = program.join(format!("Pulumi.{}.yaml", job.stack));
        let mut settings = match read_yaml(&file) {
            Ok(Some(Value::Object(m))) => m,
            Ok(_) => Map::new(),
            Err(e) => return Ok(failed(format!("pulumi: {e}"))),
        };
        match &kept.encryptionsalt {
            Some(salt) => {
                settings.insert("encryptionsalt".into(), Value::String(salt.clone()));
            }
            None => {
                kept.encryptionsalt = settings
                    .get("encryptionsalt")
                    .and_then(|s| s.as_str())
                    .map(str::to_owned);
            }
        }
        let mut config = match settings.remove("config") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        config.extend(stack_config(project, &job.config));
        settings.insert("config".into(), Value::Object(config));
        let text = serde_json::to_string_pretty(&Value::Object(settings)).unwrap_or_default();
        crate::private::write_private(&file, &[text.as_bytes()]).map_err(|e| {
            PluginError::Missing(format!("pulumi: cannot write {}: {e}", file.display()))
        })?;
        if let Some(checkpoint) = &kept.checkpoint {
            let path = crate::exec::write_work_file(
                &work,
                "checkpoint.json",
                &checkpoint.to_string(),
                "pulumi",
            )?;
            if let Err(r) = cli
                .run(host, &["stack", "import", "--file", &path], None)
                .await?
            {
                return Ok(r);
            }
        } else if state.is_some() {
            host.log("a new stack: no state is kept for it yet");
        }
        let ran = match job.action {
            PulumiAction::Preview => {
                match cli
                    .run(host, &["preview", "--json"], Some("preview.json"))
                    .await?
                {
                    Err(r) => Err(r),
                    Ok(()) => Ok(self.previewed(host, &work)),
                }
            }
            PulumiAction::DestroyPreview => {
                let gone = resources_of(kept.checkpoint.as_ref());
                for urn in &gone {
                    host.log(&format!("destroys {urn}"));
                }
                host.log(&format!(
                    "destroy preview: {} resource(s) to remove",
                    gone.len()
                ));
                Ok(ok(
                    json!({"changes": {"add": 0, "change": 0, "destroy": gone.len()}}),
                ))
            }
            PulumiAction::Up => {
                match cli
                    .run(host, &["up", "--yes", "--skip-preview"], None)
                    .await?
                {
                    Err(r) => Err(r),
                    Ok(()) => self.outputs(host, &cli, &work).await?,
                }
            }
            PulumiAction::Destroy => {
                match cli
                    .run(host, &["destroy", "--yes", "--skip-preview"], None)
                    .await?
                {
                    Err(r) => Err(r),
                    Ok(()) => Ok(ok(json!({"stack": job.stack, "destroyed": true}))),
                }
            }
        };
        // What an up or a destroy did (or did in part) is kept.
        if let Some(state) = state
            && matches!(job.action, PulumiAction::Up | PulumiAction::Destroy)
        {
            let out = work.join("exported.json").to_string_lossy().into_owned();
            let exported = cli
                .run(host, &["stack", "export", "--file", &out], None)
                .await?;
            let checkpoint = std::fs::read(&out)
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
            match (exported, checkpoint) {
                (Ok(()), Some(c)) => {
                    kept.checkpoint = Some(c);
                    if let Err(e) = state.write(&kept).await {
                        return Ok(failed(format!(
                            "pulumi: {e}; the stack's resources are made but its state is not kept: run the step again"
                        )));
                    }
                    host.log("the stack's state is kept by the control plane");
                }
                (Err(r), _) => return Ok(r),
                (Ok(()), None) => {
                    return Ok(failed(
                        "pulumi: `pulumi stack export` wrote no JSON checkpoint".into(),
                    ));
                }
            }
        } else if fresh && let Some(state) = state {
            // Keep the passphrase and salt a preview made, so that the
            // up after it seals secrets the same way.
            if let Err(e) = state.write(&kept).await {
                return Ok(failed(format!("pulumi: {e}")));
            }
        }
        Ok(ran.unwrap_or_else(|r| r))
    }

    /// Logs the CLI's version; a program pinned to another is warned of.
    async fn check_version(
        &self,
        host: &mut dyn JobHost,
        cli: &Cli,
        job: &PulumiJob,
    ) -> Result<(), PluginError> {
        let args = vec!["version".to_owned()];
        let exit =
            crate::exec::run_tool(host, &cli.bin, &cli.env, &args, Some("version.txt")).await?;
        let said = std::fs::read_to_string(host.work_dir().join("version.txt")).unwrap_or_default();
        let have = said.trim().trim_start_matches('v').to_owned();
        if exit != ProcessExit::Exited(0) {
            return Err(PluginError::Missing(format!(
                "pulumi: `pulumi version` did not answer: {INSTALL}"
            )));
        }
        if let Some(want) = &job.pulumi_version
            && want.trim_start_matches('v') != have
        {
            host.log(&format!(
                "warning: the program pins Pulumi CLI {want}; this runner has {have}"
            ));
        }
        Ok(())
    }

    /// A preview's changes, from `preview.json`.
    fn previewed(&self, host: &mut dyn JobHost, work: &Path) -> JobResult {
        let preview: Value = std::fs::read(work.join("preview.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or(Value::Null);
        for step in preview["steps"].as_array().into_iter().flatten() {
            if let (Some(op), Some(urn)) = (step["op"].as_str(), step["urn"].as_str())
                && op != "same"
            {
                host.log(&format!("{op} {urn}"));
            }
        }
        let changes = changes_of(&preview["changeSummary"]);
        host.log(&format!(
            "preview: {} to add, {} to change, {} to destroy",
            changes["add"], changes["change"], changes["destroy"]
        ));
        ok(json!({"changes": changes}))
    }

    /// The stack's outputs after an up, and which of them are secret.
    async fn outputs(
        &self,
        host: &mut dyn JobHost,
        cli: &Cli,
        work: &Path,
    ) -> Result<Result<JobResult, JobResult>, PluginError> {
        let read = |name: &str| -> Map<String, Value> {
            std::fs::read(work.join(name))
                .ok()
                .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default()
        };
        let shown = ["stack", "output", "--json", "--show-secrets"];
        if let Err(r) = cli.run(host, &shown, Some("outputs.json")).await? {
            return Ok(Err(r));
        }
        if let Err(r) = cli
            .run(host, &["stack", "output", "--json"], Some("masked.json"))
            .await?
        {
            return Ok(Err(r));
        }
        let sensitive: Vec<String> = read("masked.json")
            .into_iter()
            .filter(|(_, v)| v.as_str() == Some("[secret]"))
            .map(|(k, _)| k)
            .collect();
        let outputs = read("outputs.json");
        host.log(&format!("up: {} output(s)", outputs.len()));
        Ok(Ok(ok(json!({"outputs": outputs, "sensitive": sensitive}))))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bare_config_key_is_the_projects() {
        let config = [
            ("gcp:project".to_owned(), "p".to_owned()),
            ("bucketName".to_owned(), "b".to_owned()),
        ]
        .into_iter()
        .collect();
        let m = stack_config("gcs", &config);
        assert_eq!(m["gcp:project"], "p");
        assert_eq!(m["gcs:bucketName"], "b");
    }

    #[test]
    fn a_preview_counts_as_a_plan() {
        let c =
            changes_of(&json!({"create": 2, "update": 1, "replace": 1, "delete": 3, "same": 9}));
        assert_eq!(c, json!({"add": 2, "change": 2, "destroy": 3}));
    }

    #[test]
    fn a_destroy_removes_all_but_the_stack_and_its_providers() {
        let c = json!({"deployment": {"resources": [
            {"urn": "urn:pulumi:s::p::pulumi:pulumi:Stack::p-s", "type": "pulumi:pulumi:Stack"},
            {"urn": "urn:pulumi:s::p::pulumi:providers:gcp::default", "type": "pulumi:providers:gcp"},
            {"urn": "urn:pulumi:s::p::gcp:storage/bucket:Bucket::b", "type": "gcp:storage/bucket:Bucket"},
        ]}});
        assert_eq!(
            resources_of(Some(&c)),
            ["urn:pulumi:s::p::gcp:storage/bucket:Bucket::b"]
        );
        assert!(resources_of(None).is_empty());
    }

    #[test]
    fn stack_names_are_checked() {
        assert!(stack_name_ok("inl0123abc"));
        assert!(stack_name_ok("dev.us-east_1"));
        assert!(!stack_name_ok(""));
        assert!(!stack_name_ok("a/b"));
        assert!(!stack_name_ok("a b"));
    }
}
