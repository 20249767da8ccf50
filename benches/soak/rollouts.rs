//! The soak's installs and rollouts: an app of one Terraform module, a
//! build runner, `--installs` installs each with its own `nuon-runner`,
//! and every `--rollout-every` seconds a new config version built,
//! released and rolled out to all of them in two waves. A rollout that
//! stops on a failed install (its runner killed mid-deploy) is resumed past
//! it, as an operator would; at the end none may still be active, and every
//! deploy workflow must have ended.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use anyhow::{Context, Result, bail};
use nuon_benches::nuon_ok;
use nuon_client::ControlClient;
use nuon_core::rollout::{CreateRollout, RolloutInfo, RolloutStatus};
use nuon_core::wire::CreateInstall;
use nuon_tests::{ControlPlane, ours, rt};

/// The module each release changes: a `terraform_data` resource (the
/// built-in provider: nothing to download) whose input is the release's
/// number, so every deploy applies a change.
fn module(n: u64) -> String {
    format!("resource \"terraform_data\" \"box\" {{\n  input = \"{n}\"\n}}\n")
}

/// The app, the build runner, and what the rollouts did.
pub(crate) struct Rollouts {
    app: PathBuf,
    build_runner: Child,
    next_version: u64,
    /// Each rollout started: its id, and how many times it was resumed.
    started: Vec<(String, u32)>,
    /// Rollouts not started, by the reason.
    not_started: BTreeMap<String, u32>,
}

impl Drop for Rollouts {
    fn drop(&mut self) {
        let _ = self.build_runner.kill();
        let _ = self.build_runner.wait();
    }
}

impl Rollouts {
    /// The app synced and built through `cp` (the replica that is never
    /// killed), with a build runner of its own under `dir`; `vendor` is the
    /// artifact store the install runners share with it.
    pub(crate) fn start(cp: &ControlPlane, dir: &Path, vendor: &Path) -> Result<Rollouts> {
        let app = dir.join("app");
        for (path, text) in [
            ("metadata.toml", "version = \"v2\"\n".to_owned()),
            (
                "components/box.toml",
                "name = \"box\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/box\"\n".to_owned(),
            ),
            ("src/box/main.tf", module(0)),
        ] {
            let p = app.join(path);
            std::fs::create_dir_all(p.parent().context("a parent")?)?;
            std::fs::write(p, text)?;
        }
        let token = std::fs::read_to_string(cp.data_dir.join("build-runner-token"))?;
        let build_runner = ours("nuon-build-runner")
            .arg("run")
            .args(["--api", &cp.runner_url, "--signing-key", &cp.signing_key])
            .arg("--work-dir")
            .arg(dir.join("build"))
            .arg("--vendor-store")
            .arg(vendor)
            .env("NUON_RUNNER_TOKEN", token.trim())
            .envs(cp.runner_env())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("build-runner.log"))?)
            .spawn()
            .context("start nuon-build-runner")?;
        let app_path = app.to_str().context("a UTF-8 path")?.to_owned();
        let r = Rollouts {
            app,
            build_runner,
            next_version: 1,
            started: Vec::new(),
            not_started: BTreeMap::new(),
        };
        nuon_ok(cp, &["apps", "create", "app"])?;
        nuon_ok(cp, &["apps", "sync", &app_path, "--app", "app"])?;
        nuon_ok(cp, &["builds", "create", "--app", "app", "--wait"])?;
        Ok(r)
    }

    /// `n` installs of the app, labelled `soak=yes`: their runners' tokens.
    pub(crate) fn installs(client: &ControlClient, n: usize) -> Result<Vec<(String, String)>> {
        let mut tokens = Vec::new();
        for i in 0..n {
            let name = format!("i{i}");
            let created = rt().block_on(client.create_install(&CreateInstall {
                app: "app".into(),
                name: name.clone(),
                inputs: Default::default(),
                secrets: Default::default(),
                approval: None,
                labels: [("soak".to_owned(), "yes".to_owned())].into(),
                components: Default::default(),
                overrides: Default::default(),
            }))?;
            tokens.push((name, created.runner_token));
        }
        Ok(tokens)
    }

    /// A new config version synced, built, released and rolled out to
    /// every install in two waves (one install, then the rest), unless a
    /// rollout is still active (then none: counted as not started).
    pub(crate) fn roll(&mut self, cp: &ControlPlane) -> Result<()> {
        let client = &cp.client();
        if self.active(client)? > 0 {
            *self
                .not_started
                .entry("the one before still active".into())
                .or_default() += 1;
            return Ok(());
        }
        let n = self.next_version;
        self.next_version += 1;
        std::fs::write(self.app.join("src/box/main.tf"), module(n))?;
        let app = self.app.to_str().context("a UTF-8 path")?.to_owned();
        let made = nuon_ok(cp, &["apps", "sync", &app, "--app", "app"])
            .and_then(|_| nuon_ok(cp, &["builds", "create", "--app", "app", "--wait"]))
            .and_then(|_| {
                let release = rt().block_on(client.create_release("app", None))?;
                let rollout = rt().block_on(client.create_rollout(
                    release.id.as_str(),
                    &CreateRollout {
                        to: "soak=yes".into(),
                        waves: "1,100%".into(),
                        max_parallel: 4,
                        ..CreateRollout::default()
                    },
                ))?;
                Ok(rollout)
            });
        match made {
            Ok(r) => self.started.push((r.id.as_str().to_owned(), 0)),
            Err(e) => {
                let why: String = format!("{e:#}").chars().take(80).collect();
                *self.not_started.entry(why).or_default() += 1;
            }
        }
        Ok(())
    }

    /// How many rollouts were asked for so far.
    pub(crate) fn asked(&self) -> usize {
        self.started.len() + self.not_started.values().sum::<u32>() as usize
    }

    /// How many rollouts are still active; a stopped one (an install
    /// failed) is resumed past its failed installs.
    pub(crate) fn active(&mut self, client: &ControlClient) -> Result<usize> {
        let mut active = 0;
        for (id, resumes) in &mut self.started {
            let r = rt().block_on(client.get_rollout(id))?;
            if r.status == RolloutStatus::Stopped {
                rt().block_on(client.resume_rollout(id))?;
                *resumes += 1;
            }
            if r.status.is_active() {
                active += 1;
            }
        }
        Ok(active)
    }

    /// The rollouts' and their workflows' ends, as table rows; an error
    /// when a rollout is still active or a workflow has not ended.
    pub(crate) fn report(
        &self,
        client: &ControlClient,
        installs: &[(String, String)],
    ) -> Result<Vec<String>> {
        let mut rows = Vec::new();
        let mut by_status = BTreeMap::<&'static str, u32>::new();
        let mut resumed = 0;
        let mut still = 0;
        let mut reasons = BTreeMap::<String, u32>::new();
        let mut took = Vec::new();
        for (id, resumes) in &self.started {
            let r: RolloutInfo = rt().block_on(client.get_rollout(id))?;
            *by_status.entry(r.status.as_str()).or_default() += 1;
            resumed += u32::from(*resumes > 0);
            if r.status.is_active() {
                still += 1;
            } else {
                took.push((r.updated_at_ms - r.created_at_ms) as f64 / 1e3);
            }
            if let Some(why) = r.reason {
                *reasons.entry(why.chars().take(80).collect()).or_default() += 1;
            }
        }
        let statuses: Vec<String> = by_status.iter().map(|(s, n)| format!("{n} {s}")).collect();
        rows.push(format!(
            "| rollouts started (each a new config version built and released) | {}: {} ({resumed} resumed past a failed install) |",
            self.started.len(),
            statuses.join(", ")
        ));
        took.sort_by(f64::total_cmp);
        if let (Some(first), Some(last)) = (took.first(), took.last()) {
            rows.push(format!(
                "| a rollout, created → ended | p50 {:.1} s, shortest {first:.1} s, longest {last:.1} s |",
                took[took.len() / 2]
            ));
        }
        for (why, n) in &self.not_started {
            rows.push(format!("| rollouts not started: {why} | {n} |"));
        }
        for (why, n) in &reasons {
            rows.push(format!("| rollouts' reasons: {why} | {n} |"));
        }
        let mut workflows = BTreeMap::<&'static str, u32>::new();
        let mut failed_why = BTreeMap::<String, u32>::new();
        let mut not_ended = 0;
        for (install, _) in installs {
            let list = rt().block_on(client.list_workflows(install))?;
            for w in list.workflows {
                *workflows.entry(w.status.as_str()).or_default() += 1;
                if w.status.is_active() {
                    not_ended += 1;
                }
                let failed_step = w.steps.iter().find_map(|s| s.reason.clone());
                if w.status.as_str() == "failed"
                    && let Some(why) = failed_step
                {
                    *failed_why
                        .entry(why.chars().take(70).collect())
                        .or_default() += 1;
                }
            }
        }
        let counts: Vec<String> = workflows.iter().map(|(s, n)| format!("{n} {s}")).collect();
        rows.push(format!(
            "| the installs' workflows | {} |",
            counts.join(", ")
        ));
        for (why, n) in &failed_why {
            rows.push(format!("| a workflow failed: {why}… | {n} |"));
        }
        if still > 0 || not_ended > 0 {
            bail!(
                "{still} rollout(s) still active and {not_ended} workflow(s) not ended at the end of the soak"
            );
        }
        Ok(rows)
    }
}
