//! The Terraform plugin's binary: found with `which` (`terraform`, else
//! OpenTofu's `tofu`), its version read from `version -json` and checked
//! against the component's `terraform_version` before anything runs.

use std::ffi::OsString;
use std::path::PathBuf;

mod changes;
#[cfg(feature = "oci")]
pub mod install;
#[cfg(feature = "oci")]
pub mod lockfile;

pub use changes::{SENSITIVE, UNKNOWN, changed_values};
use nuon_core::PluginError;
use nuon_core::version::{Constraint, Version};

/// A Terraform (or OpenTofu) binary that satisfies a constraint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Terraform {
    /// The binary.
    pub path: PathBuf,
    /// Its version.
    pub version: Version,
}

/// The binaries tried, in order.
pub const BINARIES: [&str; 2] = ["terraform", "tofu"];

/// Finds a binary on `PATH` that satisfies `constraint`.
pub fn find(constraint: &str) -> Result<Terraform, PluginError> {
    find_in(std::env::var_os("PATH"), constraint)
}

/// Every binary of [`BINARIES`] on `path`, with its version (those that
/// do not answer are left out).
pub fn all_in(path: Option<OsString>) -> Vec<Terraform> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    BINARIES
        .iter()
        .filter_map(|b| which::which_in(b, path.clone(), &cwd).ok())
        .filter_map(|bin| {
            let version = version_of(&bin).ok()?;
            Some(Terraform { path: bin, version })
        })
        .collect()
}

/// [`find`] with another `PATH`.
pub fn find_in(path: Option<OsString>, constraint: &str) -> Result<Terraform, PluginError> {
    let wanted: Constraint = constraint
        .parse()
        .map_err(|e: String| PluginError::Invalid(format!("terraform_version: {e}")))?;
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let found: Vec<PathBuf> = BINARIES
        .iter()
        .filter_map(|b| which::which_in(b, path.clone(), &cwd).ok())
        .collect();
    if found.is_empty() {
        return Err(PluginError::Missing(
            "neither terraform nor tofu is on this runner's PATH: install Terraform \
             (https://developer.hashicorp.com/terraform/install) or OpenTofu \
             (https://opentofu.org/docs/intro/install/)"
                .into(),
        ));
    }
    let mut seen = Vec::new();
    for bin in found {
        let version = version_of(&bin)?;
        if wanted.matches(&version) {
            return Ok(Terraform { path: bin, version });
        }
        seen.push(format!("{} {version}", bin.display()));
    }
    Err(PluginError::Missing(format!(
        "no Terraform on this runner satisfies terraform_version {:?} (found {}): install a matching version, or change terraform_version",
        wanted.to_string(),
        seen.join(", ")
    )))
}

/// The version a binary reports with `version -json`.
fn version_of(bin: &std::path::Path) -> Result<Version, PluginError> {
    let out = std::process::Command::new(bin)
        .args(["version", "-json"])
        .env("CHECKPOINT_DISABLE", "1")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| PluginError::Missing(format!("cannot run {}: {e}", bin.display())))?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| {
        PluginError::Missing(format!(
            "{} version -json did not answer JSON ({e}): {}",
            bin.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    })?;
    let text = v["terraform_version"].as_str().ok_or_else(|| {
        PluginError::Missing(format!(
            "{} version -json has no terraform_version",
            bin.display()
        ))
    })?;
    text.parse()
        .map_err(|e: String| PluginError::Missing(format!("{}: {e}", bin.display())))
}

/// Terraform's own diagnoses among a command's last stderr lines: each
/// `Error:` summary with its detail, the last paragraph of its frame
/// (after the `on main.tf line 3:` location and the source excerpt).
#[cfg(feature = "oci")]
fn errors_of(stderr: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut lines = stderr.iter().map(|l| l.trim_end()).peekable();
    while let Some(line) = lines.next() {
        let Some(summary) = line
            .trim_start_matches(['╷', '│'])
            .trim_start()
            .strip_prefix("Error: ")
        else {
            continue;
        };
        // The frame's paragraphs, to its end (`╵`) or the next error.
        let mut paragraphs: Vec<Vec<&str>> = vec![Vec::new()];
        while let Some(next) = lines.peek() {
            let text = next.trim_start_matches(['╷', '│']).trim();
            if next.starts_with('╵') || text.starts_with("Error: ") {
                break;
            }
            lines.next();
            match paragraphs.last_mut() {
                Some(p) if !text.is_empty() => p.push(text),
                _ => paragraphs.push(Vec::new()),
            }
        }
        let detail = paragraphs
            .iter()
            .rev()
            .find(|p| p.first().is_some_and(|l| !l.starts_with("on ")))
            .map(|p| p.join(" "));
        out.push(match detail {
            Some(d) => format!("Error: {summary}: {d}"),
            None => format!("Error: {summary}"),
        });
    }
    out
}

/// The most attribute paths told of one resource.
const MAX_PATHS: usize = 20;

/// The attribute paths where `before` and `after` differ (`tags.team`,
/// `ingress[0].port`), in order, at most twenty: what a plan
/// changes, or what changed outside Terraform. Only the paths: the values
/// can be secret.
pub fn changed_paths(before: &serde_json::Value, after: &serde_json::Value) -> Vec<String> {
    fn walk(b: &serde_json::Value, a: &serde_json::Value, at: &str, out: &mut Vec<String>) {
        use serde_json::Value;
        if out.len() >= MAX_PATHS || b == a {
            return;
        }
        let join = |k: &str| {
            if at.is_empty() {
                k.to_owned()
            } else {
                format!("{at}.{k}")
            }
        };
        match (b, a) {
            (Value::Object(bm), Value::Object(am)) => {
                let keys: std::collections::BTreeSet<&String> =
                    bm.keys().chain(am.keys()).collect();
                for k in keys {
                    let null = Value::Null;
                    walk(
                        bm.get(k).unwrap_or(&null),
                        am.get(k).unwrap_or(&null),
                        &join(k),
                        out,
                    );
                }
            }
            (Value::Array(bv), Value::Array(av)) if bv.len() == av.len() => {
                for (i, (x, y)) in bv.iter().zip(av).enumerate() {
                    walk(x, y, &format!("{at}[{i}]"), out);
                }
            }
            _ => out.push(if at.is_empty() {
                "(whole value)".into()
            } else {
                at.to_owned()
            }),
        }
    }
    let mut out = Vec::new();
    walk(before, after, "", &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_paths_name_what_differs_and_nothing_else() {
        let before = serde_json::json!({
            "bucket": "data-demo",
            "tags": {"nuon:install": "tampered", "team": "a"},
            "rules": [{"port": 80}, {"port": 443}],
            "versioning": [{"enabled": false}],
        });
        let after = serde_json::json!({
            "bucket": "data-demo",
            "tags": {"nuon:install": "demo", "team": "a"},
            "rules": [{"port": 80}, {"port": 8443}],
            "versioning": [],
            "extra": null,
        });
        assert_eq!(
            changed_paths(&before, &after),
            ["rules[1].port", "tags.nuon:install", "versioning"]
        );
        assert!(changed_paths(&after, &after).is_empty());
        let many_b: serde_json::Map<String, serde_json::Value> = (0..50)
            .map(|i| (format!("k{i:02}"), serde_json::json!(i)))
            .collect();
        let many = changed_paths(&serde_json::Value::Object(many_b), &serde_json::json!({}));
        assert_eq!(many.len(), MAX_PATHS);
    }

    #[test]
    #[cfg(feature = "oci")]
    fn a_failure_quotes_terraforms_own_errors() {
        let stderr: Vec<String> = [
            "╷",
            "│ Error: Instance cannot be destroyed",
            "│ ",
            "│   on main.tf line 1:",
            "│    1: resource \"terraform_data\" \"db\" {",
            "│ ",
            "│ Resource terraform_data.db has lifecycle.prevent_destroy set, but the plan",
            "│ calls for this resource to be destroyed.",
            "╵",
            "╷",
            "│ Error: No value for required variable",
            "╵",
            "noise",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            errors_of(&stderr),
            [
                "Error: Instance cannot be destroyed: Resource terraform_data.db has \
                 lifecycle.prevent_destroy set, but the plan calls for this resource to be \
                 destroyed.",
                "Error: No value for required variable",
            ]
        );
        assert!(errors_of(&["plain failure".to_owned()]).is_empty());
    }

    #[test]
    fn missing_or_mismatched_terraform_says_what_to_install() {
        let empty = tempfile::tempdir().unwrap();
        let e = find_in(Some(empty.path().into()), ">= 1.5")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("neither terraform nor tofu") && e.contains("install"),
            "{e}"
        );
        let e = find_in(Some(empty.path().into()), "latest")
            .unwrap_err()
            .to_string();
        assert!(e.contains("terraform_version"), "{e}");

        if !nuon_test_fixtures::have_tool("terraform", "check its version") {
            return;
        }
        let t = find(">= 1.0").unwrap();
        assert!(t.path.ends_with("terraform"));
        assert!(t.version.parts[0] >= 1);
        let e = find(">= 99.0").unwrap_err().to_string();
        assert!(e.contains("satisfies terraform_version \">= 99.0\""), "{e}");
        assert!(
            e.contains(&t.version.to_string()),
            "the version found is named: {e}"
        );
    }
}

#[cfg(feature = "oci")]
pub use plugin::TerraformPlugin;

/// The `terraform` job kind: plan and apply a module from the install's
/// store, with the state where the job says.
#[cfg(feature = "oci")]
mod plugin {
    use std::collections::BTreeMap;
    use std::path::{Path, PathBuf};
    use std::sync::Arc;

    use async_trait::async_trait;
    use nuon_core::artifact::Descriptor;
    use nuon_core::{
        ArtifactRef, Job, JobHost, JobResult, JobSpec, Outcome, Plugin, PluginError, ProcessExit,
        ProcessSpec, TerraformAction, TerraformJob,
    };
    use serde_json::{Value, json};

    use super::find_in;
    use super::install::Installer;
    use super::lockfile;
    use crate::oci::modulepkg::unpack_module;

    /// The media type of a saved Terraform plan kept in the store.
    pub const PLAN_MEDIA_TYPE: &str = "application/vnd.nuon.terraform.plan";

    /// Runs `terraform` jobs against the install's store.
    pub struct TerraformPlugin {
        store: Arc<dyn nuon_core::artifact::ArtifactStore>,
        /// Terraform comes from each job's container image.
        containers: bool,
        /// The binary found for each constraint: `version -json` costs a
        /// process per call, and every job checks before it runs.
        found: std::sync::Mutex<BTreeMap<String, super::Terraform>>,
        /// The `PATH` binaries are looked up on; none: the runner's own.
        path: Option<std::ffi::OsString>,
        /// What is on that `PATH`, asked once (for [`Plugin::tools`]).
        on_path: std::sync::OnceLock<Vec<super::Terraform>>,
        /// Installs the version a job pins when no binary satisfies it.
        installer: Option<Arc<Installer>>,
        /// Where the providers jobs install are kept for the next jobs
        /// (`plugins/`), with each module's lock file (`locks/`).
        providers: Option<PathBuf>,
        /// One `init` at a time uses the provider cache: Terraform's cache
        /// is not safe for two installs of one provider at once.
        init_lock: tokio::sync::Mutex<()>,
        /// PEM CA certificates the state backend (the Runner API) is
        /// checked against (Terraform trusts these alone: the runner adds
        /// the system's bundle).
        backend_ca: Option<String>,
    }

    impl TerraformPlugin {
        /// A plugin reading modules from, and keeping plans in, `store`.
        pub fn new(store: Arc<dyn nuon_core::artifact::ArtifactStore>) -> Self {
            TerraformPlugin {
                store,
                containers: false,
                found: std::sync::Mutex::new(BTreeMap::new()),
                path: None,
                on_path: std::sync::OnceLock::new(),
                installer: None,
                providers: None,
                init_lock: tokio::sync::Mutex::new(()),
                backend_ca: None,
            }
        }

        /// Trusts `pem` (the runner's `--ca-bundle`) for the state backend,
        /// the control plane's Runner API, as the runner does.
        pub fn backend_ca(mut self, pem: Option<String>) -> Self {
            self.backend_ca = pem;
            self
        }

        /// Keeps the providers jobs install in `dir` (`plugins/`, given to
        /// Terraform as `TF_PLUGIN_CACHE_DIR`), and each module's lock file
        /// (`locks/`), so that the next job of a module links its providers
        /// from the cache, pinned to the kept lock's versions, instead of
        /// installing them again; the checksum Terraform records for each
        /// linked package is checked against the kept lock's (a changed
        /// cache fails the job by name).
        pub fn provider_cache(mut self, dir: impl Into<PathBuf>) -> Self {
            self.providers = Some(dir.into());
            self
        }

        /// Looks binaries up on `path` instead of the runner's `PATH`.
        pub fn search_path(mut self, path: impl Into<std::ffi::OsString>) -> Self {
            self.path = Some(path.into());
            self
        }

        /// When no binary satisfies a job's `terraform_version`, installs
        /// it with `installer` (cached, and shared by every job).
        pub fn installer(mut self, installer: Installer) -> Self {
            self.installer = Some(Arc::new(installer));
            self
        }

        /// With `on`, Terraform comes from each job's container image (its
        /// version checked there), and none is looked up or installed on
        /// this host.
        pub fn in_containers(mut self, on: bool) -> Self {
            self.containers = on;
            self
        }

        /// The Terraform of the job's container image that satisfies
        /// `constraint`: `terraform`, else `tofu`, on the image's `PATH`,
        /// its version asked in a container.
        async fn find_in_image(
            host: &mut dyn JobHost,
            constraint: &str,
        ) -> Result<super::Terraform, PluginError> {
            let wanted: nuon_core::version::Constraint = constraint
                .parse()
                .map_err(|e: String| PluginError::Invalid(format!("terraform_version: {e}")))?;
            let mut seen = Vec::new();
            for name in super::BINARIES {
                let Some(path) = host.find_program(name) else {
                    continue;
                };
                let mut p = ProcessSpec::new(&path);
                p.args = vec!["version".into(), "-json".into()];
                p.env.insert("CHECKPOINT_DISABLE".into(), "1".into());
                p.stdout_file = Some("terraform-version.json".into());
                let exit = host.run_process(p).await?;
                let text = std::fs::read(host.work_dir().join("terraform-version.json"))
                    .unwrap_or_default();
                let version = serde_json::from_slice::<Value>(&text)
                    .ok()
                    .and_then(|v| v["terraform_version"].as_str()?.parse().ok());
                let Some(version) = version.filter(|_| exit == ProcessExit::Exited(0)) else {
                    seen.push(format!("{} (no version: {exit:?})", path.display()));
                    continue;
                };
                if wanted.matches(&version) {
                    return Ok(super::Terraform { path, version });
                }
                seen.push(format!("{} {version}", path.display()));
            }
            Err(PluginError::Missing(if seen.is_empty() {
                "neither terraform nor tofu is in the job's container image (on its PATH): use a tool image that has one (`nuon images tool --terraform-binary`)".into()
            } else {
                format!(
                    "no Terraform in the job's container image satisfies terraform_version {:?} (found {}): use a matching tool image, or change terraform_version",
                    wanted.to_string(),
                    seen.join(", ")
                )
            }))
        }

        /// A binary on `PATH` or in the installer's cache that satisfies
        /// `constraint`.
        fn find(&self, constraint: &str) -> Result<super::Terraform, PluginError> {
            let mut cache = self.found.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(t) = cache.get(constraint)
                && t.path.is_file()
            {
                return Ok(t.clone());
            }
            let path = self.path.clone().or_else(|| std::env::var_os("PATH"));
            let t = match find_in(path, constraint) {
                Ok(t) => t,
                Err(PluginError::Missing(why)) => {
                    let held = self.installer.as_ref().and_then(|i| {
                        i.find(&constraint.parse::<nuon_core::version::Constraint>().ok()?)
                    });
                    held.ok_or(PluginError::Missing(why))?
                }
                Err(e) => return Err(e),
            };
            cache.insert(constraint.to_owned(), t.clone());
            Ok(t)
        }

        /// [`Self::find`], else the version installed from the mirror
        /// (its steps written to the job's log).
        async fn find_or_install(
            &self,
            constraint: &str,
            host: &mut dyn JobHost,
        ) -> Result<super::Terraform, PluginError> {
            let missing = match self.find(constraint) {
                Ok(t) => return Ok(t),
                Err(PluginError::Missing(why)) => why,
                Err(e) => return Err(e),
            };
            let Some(installer) = &self.installer else {
                return Err(PluginError::Missing(missing));
            };
            let wanted = constraint
                .parse()
                .map_err(|e: String| PluginError::Invalid(format!("terraform_version: {e}")))?;
            let installed = installer.install(&wanted).await?;
            for note in &installed.notes {
                host.log(note);
            }
            Ok(installed.terraform)
        }
    }

    fn decode(spec: &JobSpec) -> Result<TerraformJob, PluginError> {
        let job: TerraformJob = spec
            .payload_as()
            .map_err(|e| PluginError::Invalid(format!("terraform: {e}")))?;
        if job.action == TerraformAction::Apply && job.plan.is_none() {
            return Err(PluginError::Invalid(
                "terraform: apply needs the plan to apply (\"plan\")".into(),
            ));
        }
        Ok(job)
    }

    fn store_err(e: nuon_core::artifact::ArtifactError) -> PluginError {
        PluginError::Missing(format!("terraform: {e}"))
    }

    /// One Terraform command; a failure ends the job with what failed.
    async fn tf(
        host: &mut dyn JobHost,
        bin: &Path,
        env: &BTreeMap<String, String>,
        args: &[&str],
        stdout_file: Option<&str>,
    ) -> Result<Option<JobResult>, PluginError> {
        host.log(&format!("$ terraform {}", args.join(" ")));
        let mut p = ProcessSpec::new(bin);
        p.args = args.iter().map(|a| a.to_string()).collect();
        p.env = env.clone();
        p.cwd = Some("module".into());
        // Relative to the work directory (the process runs in module/).
        p.stdout_file = stdout_file.map(Into::into);
        let exit = host.run_process(p).await?;
        Ok(match exit {
            ProcessExit::Exited(0) => None,
            other => {
                let errors = super::errors_of(&host.stderr_tail());
                let mut r = crate::exec::result_of(other);
                let why = r.reason.unwrap_or_default();
                let command = format!("terraform {}", args.join(" "));
                r.reason = Some(if errors.is_empty() {
                    format!("`{command}` failed ({why}); see the job's log")
                } else {
                    format!("`{command}` failed ({why}): {}", errors.join("; "))
                });
                Some(r)
            }
        })
    }

    /// Counts and addresses of the changes in `terraform show -json` of a plan.
    fn summary(plan: &Value) -> Value {
        let (mut add, mut change, mut destroy) = (0, 0, 0);
        let mut resources = Vec::new();
        for rc in plan["resource_changes"].as_array().into_iter().flatten() {
            let actions: Vec<&str> = rc["change"]["actions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str())
                .collect();
            if actions == ["no-op"] || actions == ["read"] {
                continue;
            }
            if actions.contains(&"create") {
                add += 1;
            }
            if actions.contains(&"update") {
                change += 1;
            }
            if actions.contains(&"delete") {
                destroy += 1;
            }
            let mut entry = json!({"address": rc["address"], "actions": actions});
            if actions.contains(&"update") {
                entry["attributes"] = json!(super::changed_paths(
                    &rc["change"]["before"],
                    &rc["change"]["after"]
                ));
            }
            // Each changed attribute's value before and after (an update,
            // or a replace), sensitive ones masked.
            if actions.contains(&"update")
                || actions == ["delete", "create"]
                || actions == ["create", "delete"]
            {
                entry["values"] = json!(super::changed_values(&rc["change"]));
            }
            resources.push(entry);
        }
        // What changed outside Terraform since its last run, as the
        // refresh found it: drift, attribute by attribute.
        let drifted: Vec<Value> = plan["resource_drift"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|rd| {
                let attributes =
                    super::changed_paths(&rd["change"]["before"], &rd["change"]["after"]);
                json!({"address": rd["address"], "attributes": attributes})
            })
            .collect();
        let mut out =
            json!({"add": add, "change": change, "destroy": destroy, "resources": resources});
        if !drifted.is_empty() {
            out["drifted"] = json!(drifted);
        }
        out
    }

    impl TerraformPlugin {
        /// `terraform init`, with the runner's provider cache when it has
        /// one (not in a job's container: the cache is the host's): the
        /// module's kept lock file goes in first (its versions: see
        /// [`lockfile`]) unless the module brings its own, and a lock that
        /// no longer fits the module's constraints is dropped and the init
        /// run again; the lock file the init leaves is kept for the
        /// module's next job.
        async fn init(
            &self,
            host: &mut dyn JobHost,
            bin: &Path,
            env: &mut BTreeMap<String, String>,
            job: &TerraformJob,
            module: &Path,
        ) -> Result<Option<JobResult>, PluginError> {
            let args = ["init", "-no-color"];
            let dir = match &self.providers {
                Some(dir) if !host.isolated() && !env.contains_key("TF_PLUGIN_CACHE_DIR") => dir,
                _ => return tf(host, bin, env, &args, None).await,
            };
            let plugins = dir.join("plugins");
            let locks = dir.join("locks");
            for d in [&plugins, &locks] {
                std::fs::create_dir_all(d).map_err(|e| {
                    PluginError::Missing(format!(
                        "terraform: cannot make the provider cache {}: {e}",
                        d.display()
                    ))
                })?;
            }
            env.insert(
                "TF_PLUGIN_CACHE_DIR".into(),
                plugins.to_string_lossy().into_owned(),
            );
            let kept = locks.join(format!(
                "{}.terraform.lock.hcl",
                job.module.repo.replace(['/', ':', '\\'], "_")
            ));
            let lock = module.join(".terraform.lock.hcl");
            let brought = lock.is_file();
            // The kept lock's versions go in, not its hashes: Terraform
            // then links each cached provider and hashes it once (into the
            // lock it writes), and the hashes are compared here after.
            let mut kept_text = std::fs::read_to_string(&kept)
                .ok()
                .filter(|_| !brought)
                .filter(|text| std::fs::write(&lock, lockfile::without_hashes(text)).is_ok());
            let mut init_env = env.clone();
            if kept_text.is_some() {
                init_env.insert(
                    "TF_PLUGIN_CACHE_MAY_BREAK_DEPENDENCY_LOCK_FILE".into(),
                    "true".into(),
                );
            }
            let _one = self.init_lock.lock().await;
            let mut failed = tf(host, bin, &init_env, &args, None).await?;
            if failed.is_some() && kept_text.take().is_some() {
                host.log(
                    "the lock file kept from this module's last init does not fit it now: initialising without it",
                );
                let _ = std::fs::remove_file(&lock);
                failed = tf(host, bin, env, &args, None).await?;
            }
            if failed.is_none()
                && let Some(kept_text) = &kept_text
            {
                let now = std::fs::read_to_string(&lock).unwrap_or_default();
                if let Err(e) = lockfile::check(kept_text, &now) {
                    host.log(&e);
                    return Ok(Some(JobResult::failed(e)));
                }
                if lockfile::same_selections(kept_text, &now) {
                    // The kept lock stays as it was (with every checksum
                    // of its first install), and goes in for what follows.
                    let _ = std::fs::write(&lock, kept_text);
                    return Ok(None);
                }
            }
            // A module with no providers leaves no lock file: nothing to keep.
            if failed.is_none() && !brought && lock.is_file() {
                // Kept whole or not at all: a torn lock file would fail
                // the next init.
                let tmp = kept.with_file_name(format!(
                    ".{}.{}",
                    kept.file_name().unwrap_or_default().to_string_lossy(),
                    std::process::id()
                ));
                let kept_now =
                    std::fs::copy(&lock, &tmp).and_then(|_| std::fs::rename(&tmp, &kept));
                if let Err(e) = kept_now {
                    host.log(&format!(
                        "warning: the module's lock file is not kept for its next job ({e}): that job installs its providers again"
                    ));
                }
            }
            Ok(failed)
        }
    }

    #[async_trait]
    impl Plugin for TerraformPlugin {
        fn kind(&self) -> &'static str {
            TerraformJob::KIND
        }

        fn validate(&self, spec: &JobSpec) -> Result<(), PluginError> {
            let job = decode(spec)?;
            if self.containers {
                return job
                    .terraform_version
                    .parse::<nuon_core::version::Constraint>()
                    .map(|_| ())
                    .map_err(|e| PluginError::Invalid(format!("terraform_version: {e}")));
            }
            match self.find(&job.terraform_version) {
                // The run installs what the mirror has.
                Err(PluginError::Missing(_)) if self.installer.is_some() => Ok(()),
                other => other.map(|_| ()),
            }
        }

        fn tools(&self) -> Vec<nuon_core::wire::ToolHeld> {
            let path = self.path.clone().or_else(|| std::env::var_os("PATH"));
            let on_path = self.on_path.get_or_init(|| super::all_in(path));
            let held = self
                .installer
                .as_ref()
                .map(|i| i.held())
                .unwrap_or_default();
            let tool = |t: &super::Terraform, installed: bool| nuon_core::wire::ToolHeld {
                name: t
                    .path
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                version: t.version.to_string(),
                installed,
            };
            on_path
                .iter()
                .map(|t| tool(t, false))
                .chain(held.iter().map(|t| tool(t, true)))
                .collect()
        }

        async fn run(
            &self,
            spec: &JobSpec,
            host: &mut dyn JobHost,
        ) -> Result<JobResult, PluginError> {
            let job = decode(spec)?;
            let bin = if host.isolated() {
                Self::find_in_image(host, &job.terraform_version).await?
            } else {
                self.find_or_install(&job.terraform_version, host).await?
            };
            host.log(&format!("using {} {}", bin.path.display(), bin.version));
            let work = host.work_dir().to_path_buf();
            let module = work.join("module");
            unpack_module(&*self.store, &job.module.repo, &job.module.digest, &module)
                .await
                .map_err(store_err)?;
            let write = |name: &str, text: &str| {
                std::fs::write(module.join(name), text).map_err(|e| {
                    PluginError::Missing(format!("terraform: cannot write {name}: {e}"))
                })
            };
            write(
                "_nuon.auto.tfvars.json",
                &serde_json::to_string(&job.vars).unwrap_or_else(|_| "{}".into()),
            )?;
            // Terraform reads *.auto.tfvars in the lexical order of their
            // names: zero-padded, the 11th file is read after the 2nd.
            for (i, contents) in job.var_files.iter().enumerate() {
                write(&format!("_nuon_{i:04}.auto.tfvars"), contents)?;
            }
            let mut env = job.env.clone();
            env.insert("TF_IN_AUTOMATION".into(), "1".into());
            env.insert("TF_INPUT".into(), "0".into());
            env.insert("CHECKPOINT_DISABLE".into(), "1".into());
            if let Some(b) = &job.backend {
                // The CA goes in the file, not the environment: with the
                // system's bundle it is past the kernel's 128 KiB limit
                // on one variable.
                let ca = (self.backend_ca.as_deref()).map_or(String::new(), |pem| {
                    let pem = pem.replace("${", "$${").replace("%{", "%%{");
                    format!("    client_ca_certificate_pem = <<-NUON_CA\n{pem}\nNUON_CA\n")
                });
                write(
                    "_nuon_backend_override.tf",
                    &format!("terraform {{\n  backend \"http\" {{\n{ca}  }}\n}}\n"),
                )?;
                for (k, v) in [
                    ("TF_HTTP_ADDRESS", &b.address),
                    ("TF_HTTP_LOCK_ADDRESS", &b.address),
                    ("TF_HTTP_UNLOCK_ADDRESS", &b.address),
                    ("TF_HTTP_USERNAME", &b.username),
                    ("TF_HTTP_PASSWORD", &b.password),
                ] {
                    env.insert(k.into(), v.clone());
                }
            }
            if let Some(failed) = self.init(host, &bin.path, &mut env, &job, &module).await? {
                return Ok(failed);
            }
            match job.action {
                TerraformAction::Plan | TerraformAction::DestroyPlan => {
                    let mut args = vec!["plan", "-no-color", "-out=../plan.tfplan"];
                    if job.action == TerraformAction::DestroyPlan {
                        args.push("-destroy");
                    }
                    if let Some(failed) = tf(host, &bin.path, &env, &args, None).await? {
                        return Ok(failed);
                    }
                    let show = ["show", "-json", "-no-color", "../plan.tfplan"];
                    if let Some(failed) =
                        tf(host, &bin.path, &env, &show, Some("plan.json")).await?
                    {
                        return Ok(failed);
                    }
                    let plan_json: Value = std::fs::read(work.join("plan.json"))
                        .ok()
                        .and_then(|b| serde_json::from_slice(&b).ok())
                        .unwrap_or(Value::Null);
                    let changes = summary(&plan_json);
                    host.log(&format!(
                        "plan: {} to add, {} to change, {} to destroy",
                        changes["add"], changes["change"], changes["destroy"]
                    ));
                    // Policies: `deny` fails the plan, `warn` goes with it.
                    let verdict = nuon_core::policy::evaluate(&job.policies, &plan_json);
                    let warnings = match crate::policy::gate(host, &job.policies, "plan", verdict) {
                        Ok(w) => w,
                        Err(failed) => return Ok(failed),
                    };
                    // Keep the plan in the install's store, by digest.
                    let bytes = std::fs::read(work.join("plan.tfplan")).map_err(|e| {
                        PluginError::Missing(format!("terraform: the plan file: {e}"))
                    })?;
                    let blob = Descriptor {
                        media_type: PLAN_MEDIA_TYPE.into(),
                        digest: nuon_core::artifact::Digest::of(&bytes),
                        size: bytes.len() as u64,
                        annotations: BTreeMap::new(),
                    };
                    let file = tokio::fs::File::open(work.join("plan.tfplan"))
                        .await
                        .map_err(|e| {
                            PluginError::Missing(format!("terraform: the plan file: {e}"))
                        })?;
                    self.store
                        .put_blob(&job.module.repo, &blob, Box::pin(file))
                        .await
                        .map_err(store_err)?;
                    let plan = ArtifactRef {
                        repo: job.module.repo.clone(),
                        digest: blob.digest,
                        size: Some(blob.size),
                    };
                    Ok(JobResult {
                        outcome: Outcome::Succeeded,
                        exit_code: Some(0),
                        reason: None,
                        outputs: json!({"plan": plan, "changes": changes, "policy_warnings": warnings}),
                    })
                }
                TerraformAction::Apply => {
                    let plan = job.plan.as_ref().expect("decode checked it");
                    let blob = Descriptor {
                        media_type: PLAN_MEDIA_TYPE.into(),
                        digest: plan.digest.clone(),
                        size: plan.size.unwrap_or(0),
                        annotations: BTreeMap::new(),
                    };
                    let mut reader = self
                        .store
                        .open_blob(&plan.repo, &blob)
                        .await
                        .map_err(|e| match e {
                            nuon_core::artifact::ArtifactError::NotFound(m) => {
                                PluginError::Missing(format!(
                                    "terraform: the plan to apply is not in this runner's store ({m}): \
                                     the runner process that made it kept it in another store (another \
                                     --store-dir or work dir, or a store wiped since); plan again"
                                ))
                            }
                            e => store_err(e),
                        })?;
                    let mut out = tokio::fs::File::create(work.join("plan.tfplan"))
                        .await
                        .map_err(|e| {
                            PluginError::Missing(format!("terraform: the plan file: {e}"))
                        })?;
                    tokio::io::copy(&mut reader, &mut out).await.map_err(|e| {
                        PluginError::Missing(format!(
                            "terraform: the plan {} is not usable: {e}",
                            plan.digest
                        ))
                    })?;
                    let apply = ["apply", "-no-color", "../plan.tfplan"];
                    if let Some(failed) = tf(host, &bin.path, &env, &apply, None).await? {
                        return Ok(failed);
                    }
                    let output = ["output", "-json", "-no-color"];
                    if let Some(failed) =
                        tf(host, &bin.path, &env, &output, Some("outputs.json")).await?
                    {
                        return Ok(failed);
                    }
                    let raw: Value = std::fs::read(work.join("outputs.json"))
                        .ok()
                        .and_then(|b| serde_json::from_slice(&b).ok())
                        .unwrap_or(Value::Null);
                    let outputs: serde_json::Map<String, Value> = raw
                        .as_object()
                        .into_iter()
                        .flatten()
                        .map(|(k, v)| (k.clone(), v["value"].clone()))
                        .collect();
                    let sensitive: Vec<&String> = raw
                        .as_object()
                        .into_iter()
                        .flatten()
                        .filter(|(_, v)| v["sensitive"].as_bool() == Some(true))
                        .map(|(k, _)| k)
                        .collect();
                    Ok(JobResult {
                        outcome: Outcome::Succeeded,
                        exit_code: Some(0),
                        reason: None,
                        outputs: json!({"outputs": outputs, "sensitive": sensitive}),
                    })
                }
            }
        }
    }
}
