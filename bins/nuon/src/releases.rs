//! `nuon releases create|list|get`: releases, frozen config versions and
//! their builds (their rollouts are in `rollouts.rs`).
//!
//! `nuon releases export`: a release (the newest successful build of every
//! component of an app's latest config version) as an OCI image layout
//! directory, with `release.json` naming each artifact by digest, for
//! installs with no route to the vendor's store. The install's runner
//! imports it with `nuon-runner import`.

use std::path::PathBuf;

use clap::Subcommand;
use nuon_core::JobStatus;
use nuon_core::wire::{ReleaseInfo, ReleaseList};
use nuon_plugins::oci::LayoutStore;
use nuon_plugins::oci::copy;
use nuon_plugins::release::{Release, ReleaseArtifact, write_release};

use crate::output::{Render, emit, emit_with};
use crate::{CliError, Global, client};

#[derive(Debug, Subcommand)]
pub(crate) enum ReleasesCommand {
    /// Freeze a release: a config version of the app (default: the
    /// latest) and the newest successful build of each of its components
    /// and its sandbox. Refused while one has none.
    Create {
        /// The app, by name or id.
        #[arg(long)]
        app: String,
        /// The config version (default: the latest).
        #[arg(long = "config", value_name = "VERSION")]
        config: Option<u32>,
    },
    /// List the org's releases, newest first.
    List {
        /// Only this app's.
        #[arg(long)]
        app: Option<String>,
    },
    /// Show one release: its config version and each component's artifact.
    Get {
        /// The release's id.
        release: String,
    },
    #[command(flatten)]
    Rollouts(crate::rollouts::RolloutCommand),
    /// Export an app's newest builds as an OCI image layout directory.
    Export {
        /// The app, by name or id.
        #[arg(long)]
        app: String,
        /// The vendor's store the builds are in: a registry URL or a layout
        /// directory.
        #[arg(long)]
        vendor_store: String,
        /// The directory to write (created; must be empty when it exists).
        #[arg(long)]
        out: PathBuf,
    },
}

impl Render for ReleaseInfo {
    fn render(&self) {
        let r = self;
        outln!("id:       {}", r.id);
        outln!(
            "app:      {} (config v{})",
            r.app_name.clone().unwrap_or_else(|| r.app_id.to_string()),
            r.config_version
        );
        outln!("created:  {}", crate::fmt_time(Some(r.created_at_ms)));
        for (component, a) in &r.builds {
            outln!("build:    {component}: {}@{}", a.repo, a.digest);
        }
    }
}

impl Render for ReleaseList {
    fn render(&self) {
        crate::table(
            &["ID", "APP", "CONFIG", "COMPONENTS", "CREATED"],
            self.releases
                .iter()
                .map(|r| {
                    vec![
                        r.id.to_string(),
                        r.app_name.clone().unwrap_or_else(|| r.app_id.to_string()),
                        format!("v{}", r.config_version),
                        r.builds.len().to_string(),
                        crate::fmt_time(Some(r.created_at_ms)),
                    ]
                })
                .collect(),
        );
    }
}

pub(crate) async fn releases(g: &Global, command: &ReleasesCommand) -> Result<u8, CliError> {
    let (app, vendor_store, out) = match command {
        ReleasesCommand::Export {
            app,
            vendor_store,
            out,
        } => (app, vendor_store, out),
        ReleasesCommand::Rollouts(command) => return crate::rollouts::rollouts(g, command).await,
        ReleasesCommand::Create { app, config } => {
            emit(g, &client(g)?.create_release(app, *config).await?)?;
            return Ok(0);
        }
        ReleasesCommand::Get { release } => {
            emit(g, &client(g)?.get_release(release).await?)?;
            return Ok(0);
        }
        ReleasesCommand::List { app } => {
            emit(g, &client(g)?.list_releases(app.as_deref()).await?)?;
            return Ok(0);
        }
    };
    let client = client(g)?;
    let config = client.get_config(app, None).await?;
    let builds = client.list_builds(app).await?.builds;
    let mut artifacts: Vec<ReleaseArtifact> = Vec::new();
    for b in builds {
        if b.config_version != config.version || b.status != JobStatus::Succeeded {
            continue;
        }
        if artifacts.iter().any(|a| a.component == b.component) {
            continue;
        }
        if let Some(a) = b.artifact {
            artifacts.push(ReleaseArtifact {
                component: b.component,
                repo: a.repo,
                digest: a.digest,
            });
        }
    }
    // A bundle is the whole release: every component (and the sandbox).
    let expected = config
        .config
        .sandbox
        .iter()
        .map(|_| "sandbox".to_owned())
        .chain(config.config.components.iter().map(|c| c.name.clone()));
    let missing: Vec<String> = expected
        .filter(|n| !artifacts.iter().any(|a| &a.component == n))
        .collect();
    if !missing.is_empty() {
        return Err(CliError::usage(format!(
            "app {app} has no successful build of {} in config v{}: run `nuon builds create --app {app} --wait` first",
            missing.join(", "),
            config.version
        )));
    }
    if out.exists()
        && std::fs::read_dir(out)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(CliError::usage(format!(
            "{} exists and is not empty: export into a new directory",
            out.display()
        )));
    }
    // A directory must be there: an export reads it, and a typo would
    // otherwise open an empty store.
    let is_url = vendor_store.starts_with("http://") || vendor_store.starts_with("https://");
    if !is_url && !std::path::Path::new(vendor_store).is_dir() {
        return Err(CliError::usage(format!(
            "--vendor-store {vendor_store} is neither a registry URL nor a directory"
        )));
    }
    let source = nuon_plugins::oci::open_store(vendor_store)
        .map_err(|e| CliError::usage(format!("--vendor-store {vendor_store}: {e}")))?;
    let bundle = LayoutStore::open(out).map_err(|e| CliError::usage(e.to_string()))?;
    let opts = nuon_plugins::oci::CopyOptions {
        verify: true,
        ..Default::default()
    };
    for a in &artifacts {
        copy(
            &*source,
            &a.repo,
            a.digest.as_str(),
            &bundle,
            &a.repo,
            None,
            &opts,
        )
        .await
        .map_err(|e| CliError {
            message: format!("exporting {} ({}@{}): {e}", a.component, a.repo, a.digest),
            code: 1,
            api_code: None,
        })?;
    }
    let release = Release {
        app: config.app_id.to_string(),
        config_version: config.version,
        artifacts,
    };
    write_release(out, &release).map_err(|e| CliError::usage(e.to_string()))?;
    emit_with(g, &release, |release| {
        outln!(
            "exported {} artifact(s) of config v{} into {}; import it on the install's machine with `nuon-runner import --bundle DIR --store-dir STORE`",
            release.artifacts.len(),
            release.config_version,
            out.display()
        )
    })?;
    Ok(0)
}
