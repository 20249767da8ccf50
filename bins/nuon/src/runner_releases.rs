//! `nuon runners release publish|upload|list|rollout|status|pause|resume|retry|cancel|rollback`:
//! runner versions, published as OCI artifacts in the vendor's store and
//! signed by the org's key, rolled out to install runners in waves (the
//! rollout engine's runner rollouts; each runner updates itself).

use clap::{Args, Subcommand};
use nuon_core::artifact::{ArtifactStore, Descriptor, Digest, RawManifest};
use nuon_core::rollout::CreateRollout;
use nuon_core::wire::{PublishRunnerRelease, RunnerReleaseInfo, RunnerReleaseList};

use crate::output::{Render, emit};
use crate::rollouts::{Act, ActOn, act, follow};
use crate::{CliError, Global, client};

/// An act on a runner version's rollout: it is shown after.
const RUNNER: ActOn = ActOn {
    runner: true,
    wait: false,
};

/// The artifact type of a runner binary's manifest.
pub const RUNNER_ARTIFACT_TYPE: &str = "application/vnd.nuon.runner.v1";
/// The media type of its one layer: the binary.
pub const RUNNER_BINARY_TYPE: &str = "application/vnd.nuon.runner.binary.v1";
const RUNNER_CONFIG_TYPE: &str = "application/vnd.nuon.runner.config.v1+json";

/// A runner version's rollout.
#[derive(Debug, Args)]
pub(crate) struct RunnerRolloutArgs {
    /// The runner version.
    version: String,
    /// Each wave updates this share of the installs (`10%`: ten waves),
    /// the last reaching all of them.
    #[arg(long, conflicts_with = "waves")]
    wave: Option<String>,
    /// Or the waves as `nuon releases rollout` takes them: how many
    /// installs have the version after each (`1,10%,100%`).
    #[arg(long)]
    waves: Option<String>,
    /// The label selector of the installs (of every app) whose runners
    /// update. Default: all of them.
    #[arg(long, default_value = "")]
    to: String,
    /// At most this many runners update at once.
    #[arg(long, default_value_t = 10)]
    max_parallel: u32,
    /// Each wave after the first waits for `nuon runners release resume`.
    #[arg(long)]
    approve_each_wave: bool,
    /// How long each install must stay healthy on the new version before
    /// its wave passes (`10m`).
    #[arg(long)]
    bake: Option<String>,
    /// Only show whose runner updates, in which wave (pinned ones are
    /// passed over).
    #[arg(long)]
    dry_run: bool,
    /// Follow it until it ends, stops or waits (exit 1 unless it
    /// succeeded or waits).
    #[arg(long)]
    wait: bool,
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunnerReleaseCommand {
    /// Publish a runner version: push BINARY to the vendor's store as an
    /// OCI artifact (REPOSITORY:VERSION) and have the control plane sign
    /// the release with the org's key.
    Publish {
        /// The version the binary reports (`nuon-runner --version`).
        #[arg(long)]
        version: String,
        /// The runner binary.
        #[arg(long)]
        binary: std::path::PathBuf,
        /// The vendor's store the install runners download from (their
        /// `--vendor-store`): a registry URL or an OCI layout directory.
        #[arg(long)]
        store: String,
        /// The repository in the store.
        #[arg(long, default_value = "nuon-runner")]
        repository: String,
        /// The OS the binary runs on (default: this machine's).
        #[arg(long, default_value = std::env::consts::OS)]
        os: String,
        /// The CPU it runs on (default: this machine's).
        #[arg(long, default_value = std::env::consts::ARCH)]
        arch: String,
    },
    /// Upload a published version's binary for the control plane to serve
    /// to install stacks (`publish` does it; this finishes one whose
    /// upload failed).
    Upload {
        /// The version.
        version: String,
        /// The binary that was published.
        #[arg(long)]
        binary: std::path::PathBuf,
    },
    /// List the published runner versions, newest first.
    List,
    /// Update the runners of the installs a selector picks to a version,
    /// in waves; the first failure stops it.
    Rollout(RunnerRolloutArgs),
    /// Every install's state in a version's newest rollout (or the one
    /// named).
    Status {
        /// A version (its newest rollout) or a rollout id.
        rollout: String,
    },
    /// Pause: what updates finishes, nothing new starts until `resume`.
    Pause {
        /// A version (its newest rollout) or a rollout id.
        rollout: String,
    },
    /// Go on after a pause, an approval, or past the installs that failed.
    Resume {
        /// A version (its newest rollout) or a rollout id.
        rollout: String,
    },
    /// Ask the runners that failed again (each tries the version once
    /// more), then go on.
    Retry {
        /// A version (its newest rollout) or a rollout id.
        rollout: String,
    },
    /// Start nothing more.
    Cancel {
        /// A version (its newest rollout) or a rollout id.
        rollout: String,
    },
    /// Return every runner the rollout reached to its version before.
    Rollback {
        /// A version (its newest rollout) or a rollout id.
        rollout: String,
    },
}

/// `--wave 10%`: the cumulative waves `10%,20%,...,100%`.
fn uniform_waves(share: &str) -> Result<String, CliError> {
    let p = share
        .trim()
        .strip_suffix('%')
        .and_then(|p| p.trim().parse::<u32>().ok())
        .filter(|p| (1..=100).contains(p))
        .ok_or_else(|| {
            CliError::usage(format!(
                "--wave {share:?}: a share of the installs per wave, from 1% to 100% (for counts, use --waves 1,10,100%)"
            ))
        })?;
    let mut waves: Vec<String> = (1..)
        .map(|i| i * p)
        .take_while(|&s| s < 100)
        .map(|s| format!("{s}%"))
        .collect();
    waves.push("100%".into());
    Ok(waves.join(","))
}

impl Render for RunnerReleaseInfo {
    fn render(&self) {
        let r = self;
        outln!("version:  {}", r.version);
        outln!("id:       {}", r.id);
        outln!("platform: {}/{}", r.os, r.arch);
        outln!("artifact: {}@{} ({} bytes)", r.repository, r.digest, r.size);
        outln!("manifest: {}", r.manifest);
        outln!(
            "served:   {}",
            if r.served {
                "yes: install stacks download it from the control plane"
            } else {
                "no (`nuon runners release upload` serves it)"
            }
        );
        outln!("created:  {}", crate::fmt_time(Some(r.created_at_ms)));
    }
}

impl Render for RunnerReleaseList {
    fn render(&self) {
        crate::table(
            &[
                "VERSION", "PLATFORM", "ARTIFACT", "SIZE", "SERVED", "CREATED",
            ],
            self.releases
                .iter()
                .map(|r| {
                    vec![
                        r.version.clone(),
                        format!("{}/{}", r.os, r.arch),
                        format!("{}@{}", r.repository, r.digest),
                        r.size.to_string(),
                        if r.served { "yes" } else { "no" }.into(),
                        crate::fmt_time(Some(r.created_at_ms)),
                    ]
                })
                .collect(),
        );
    }
}

/// Uploads `binary` as runner release `version`'s, for the control plane
/// to serve to install stacks.
async fn upload(
    c: &nuon_client::ControlClient,
    version: &str,
    binary: &std::path::Path,
) -> Result<RunnerReleaseInfo, CliError> {
    let bytes = tokio::fs::read(binary).await.map_err(|e| CliError {
        message: format!("{}: {e}", binary.display()),
        code: 74,
        api_code: None,
    })?;
    Ok(c.upload_runner_binary(version, bytes).await?)
}

/// What `BINARY --version` says, when it runs here: refuses a binary that
/// reports another version; one that does not run here (another
/// platform, a broken build) is published with a warning.
async fn check_binary_version(binary: &std::path::Path, version: &str) -> Result<(), CliError> {
    let run = tokio::process::Command::new(binary)
        .arg("--version")
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(std::time::Duration::from_secs(10), run).await {
        Ok(Ok(out)) if out.status.success() => {
            let said = String::from_utf8_lossy(&out.stdout);
            let words: Vec<&str> = said.split_whitespace().collect();
            if words.contains(&version) {
                Ok(())
            } else {
                Err(CliError::usage(format!(
                    "{} says it is {:?}, not version {version}: publish it as the version it reports",
                    binary.display(),
                    said.trim()
                )))
            }
        }
        Ok(Ok(out)) => {
            eprintln!(
                "warning: `{} --version` exited with {}: publishing it anyway (a runner that cannot start it goes back to its version and says why)",
                binary.display(),
                out.status
            );
            Ok(())
        }
        Ok(Err(e)) => {
            eprintln!(
                "warning: cannot run `{} --version` here ({e}): publishing it unchecked",
                binary.display()
            );
            Ok(())
        }
        Err(_) => {
            eprintln!(
                "warning: `{} --version` did not answer within 10 s: publishing it unchecked",
                binary.display()
            );
            Ok(())
        }
    }
}

/// Pushes `binary` to `store` as `repository:version`: its descriptor
/// and the manifest's digest.
async fn push(
    store: &dyn ArtifactStore,
    binary: &std::path::Path,
    repository: &str,
    (version, os, arch): (&str, &str, &str),
) -> Result<(Descriptor, Digest), CliError> {
    let io = |e: std::io::Error| CliError {
        message: format!("{}: {e}", binary.display()),
        code: 74,
        api_code: None,
    };
    let store_err = |e: nuon_core::artifact::ArtifactError| CliError {
        message: format!("pushing to the store: {e}"),
        code: 1,
        api_code: None,
    };
    let (digest, size) = {
        let mut f = std::fs::File::open(binary).map_err(io)?;
        nuon_core::artifact::digest_of_reader(&mut f).map_err(io)?
    };
    if size == 0 {
        return Err(CliError::usage(format!(
            "{} is empty: not a runner binary",
            binary.display()
        )));
    }
    let mut layer = Descriptor {
        media_type: RUNNER_BINARY_TYPE.into(),
        digest,
        size,
        annotations: Default::default(),
    };
    layer.annotations.insert(
        "org.opencontainers.image.title".into(),
        "nuon-runner".into(),
    );
    let file = tokio::fs::File::open(binary).await.map_err(io)?;
    store
        .put_blob(repository, &layer, Box::pin(file))
        .await
        .map_err(store_err)?;
    let config_bytes = serde_json::to_vec(&serde_json::json!({
        "version": version, "os": os, "arch": arch,
    }))
    .unwrap_or_default();
    let config = Descriptor {
        media_type: RUNNER_CONFIG_TYPE.into(),
        digest: Digest::of(&config_bytes),
        size: config_bytes.len() as u64,
        annotations: Default::default(),
    };
    store
        .put_blob(
            repository,
            &config,
            Box::pin(std::io::Cursor::new(config_bytes)),
        )
        .await
        .map_err(store_err)?;
    let manifest = serde_json::to_vec(&serde_json::json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "artifactType": RUNNER_ARTIFACT_TYPE,
        "config": config,
        "layers": [layer],
        "annotations": {"org.opencontainers.image.version": version},
    }))
    .unwrap_or_default();
    let raw = RawManifest {
        digest: Digest::of(&manifest),
        bytes: manifest,
        media_type: "application/vnd.oci.image.manifest.v1+json".into(),
    };
    store
        .put_manifest(repository, &raw, Some(version))
        .await
        .map_err(store_err)?;
    Ok((layer, raw.digest))
}

pub(crate) async fn runner_releases(
    g: &Global,
    command: &RunnerReleaseCommand,
) -> Result<u8, CliError> {
    match command {
        RunnerReleaseCommand::Publish {
            version,
            binary,
            store,
            repository,
            os,
            arch,
        } => {
            let c = client(g)?;
            check_binary_version(binary, version).await?;
            let opened = nuon_plugins::oci::open_store(store)
                .map_err(|e| CliError::usage(format!("--store {store}: {e}")))?;
            let (layer, manifest) = push(&*opened, binary, repository, (version, os, arch)).await?;
            c.publish_runner_release(&PublishRunnerRelease {
                version: version.clone(),
                os: os.clone(),
                arch: arch.clone(),
                repository: repository.clone(),
                manifest: manifest.to_string(),
                digest: layer.digest.to_string(),
                size: layer.size,
            })
            .await?;
            // The control plane serves it to install stacks too; a failed
            // upload leaves the release published (and says how to finish).
            let r = upload(&c, version, binary).await.map_err(|e| CliError {
                message: format!(
                    "runner version {version} is published and signed, but the control plane does not serve its binary: {}; finish with `nuon runners release upload {version} --binary {}`",
                    e.message,
                    binary.display()
                ),
                ..e
            })?;
            emit(g, &r)?;
            Ok(0)
        }
        RunnerReleaseCommand::Upload { version, binary } => {
            emit(g, &upload(&client(g)?, version, binary).await?)?;
            Ok(0)
        }
        RunnerReleaseCommand::List => {
            emit(g, &client(g)?.list_runner_releases().await?)?;
            Ok(0)
        }
        RunnerReleaseCommand::Rollout(a) => {
            let waves = match (&a.wave, &a.waves) {
                (Some(w), _) => uniform_waves(w)?,
                (None, Some(w)) => w.clone(),
                (None, None) => "100%".into(),
            };
            let req = CreateRollout {
                to: a.to.clone(),
                waves,
                max_parallel: a.max_parallel,
                approve_each_wave: a.approve_each_wave,
                bake: a.bake.clone(),
                dry_run: a.dry_run,
            };
            let c = client(g)?;
            let r = c.create_runner_rollout(&a.version, &req).await?;
            if a.wait && !a.dry_run {
                return follow(g, &c, r).await;
            }
            emit(g, &r)?;
            Ok(0)
        }
        RunnerReleaseCommand::Status { rollout } => act(g, rollout, Act::Status, RUNNER).await,
        RunnerReleaseCommand::Pause { rollout } => act(g, rollout, Act::Pause, RUNNER).await,
        RunnerReleaseCommand::Resume { rollout } => act(g, rollout, Act::Resume, RUNNER).await,
        RunnerReleaseCommand::Retry { rollout } => act(g, rollout, Act::Retry, RUNNER).await,
        RunnerReleaseCommand::Cancel { rollout } => act(g, rollout, Act::Cancel, RUNNER).await,
        RunnerReleaseCommand::Rollback { rollout } => act(g, rollout, Act::Rollback, RUNNER).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uniform_wave_adds_its_share_each_time_and_ends_at_all() {
        assert_eq!(
            uniform_waves("10%").unwrap(),
            "10%,20%,30%,40%,50%,60%,70%,80%,90%,100%"
        );
        assert_eq!(uniform_waves("50%").unwrap(), "50%,100%");
        assert_eq!(uniform_waves("30%").unwrap(), "30%,60%,90%,100%");
        assert_eq!(uniform_waves("100%").unwrap(), "100%");
        assert!(uniform_waves("0%").is_err());
        assert!(uniform_waves("5").is_err());
    }
}
