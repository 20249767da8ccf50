//! `nuon apps` and `nuon components`.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Subcommand;
use nuon_core::app;
use nuon_core::wire::{AppInfo, AppList, ComponentList, ConfigFile, ConfigVersionList, ErrorCode};

use crate::output::{Render, emit, emit_with};
use crate::{CliError, EXIT_INVALID_CONFIG, Global, client, fmt_time, plural, table};

#[derive(Debug, Subcommand)]
pub(crate) enum AppsCommand {
    /// Create an app.
    Create {
        /// Unique in the org.
        name: String,
    },
    /// List the org's apps.
    List,
    /// Show one app.
    Get {
        /// The app, by name or id.
        app: String,
    },
    /// Sync a config directory as the app's next config version. An invalid
    /// config is refused with every problem (exit 65).
    Sync {
        /// The config directory (the one with metadata.toml).
        dir: PathBuf,
        /// The app, by name or id.
        #[arg(long)]
        app: String,
    },
    /// List an app's config versions.
    Configs {
        /// The app, by name or id.
        app: String,
    },
    /// Delete an app with its config versions, builds and releases
    /// (refused while it has installs).
    Delete {
        /// The app, by name or id.
        app: String,
    },
    /// Check an app config directory, offline: every problem at once, as
    /// FILE:LINE:COL: MESSAGE. Exits 0 when valid (warnings allowed), 65 when not.
    Validate {
        /// The config directory (the one with metadata.toml).
        dir: PathBuf,
    },
    /// Render, offline, every value the steps of a workflow would be
    /// given: variables, var files, Helm values, manifests and action
    /// scripts. Prints each (or writes them with --out) and every render
    /// error as FILE:LINE:COL: STEP: MESSAGE; exits 1 on any error.
    Render(crate::render::RenderArgs),
}

#[derive(Debug, Subcommand)]
pub(crate) enum ComponentsCommand {
    /// List the components of an app's latest config, dependencies first.
    List {
        /// The app, by name or id.
        #[arg(long)]
        app: String,
    },
}

fn print_diagnostics(diags: &[app::Diagnostic]) {
    let mut err = std::io::stderr().lock();
    for d in diags {
        let _ = writeln!(err, "{d}");
    }
}

/// An API error; a refused config prints its problems and exits 65.
fn api_error(e: nuon_client::Error) -> CliError {
    if let nuon_client::Error::Api {
        code, diagnostics, ..
    } = &e
        && ErrorCode::InvalidConfig == code.as_str()
    {
        print_diagnostics(diagnostics);
        return CliError {
            message: e.to_string(),
            code: EXIT_INVALID_CONFIG,
            api_code: Some(code.clone()),
        };
    }
    e.into()
}

fn validate(g: &Global, dir: &Path) -> Result<u8, CliError> {
    let (config, diags) = nuon_client::app_dir::validate_dir(dir);
    let errors = diags.errors().count();
    let warnings = diags.warnings().count();
    let doc = serde_json::json!({
        "valid": config.is_some(),
        "errors": errors,
        "warnings": warnings,
        "diagnostics": diags.0,
    });
    emit_with(g, &doc, |_| {
        print_diagnostics(&diags.0);
        match &config {
            Some(c) => outln!(
                "{} is a valid app config: {}, {}, {}, {}, {}{}",
                dir.display(),
                plural(c.components.len(), "component"),
                plural(c.inputs.len(), "input"),
                plural(c.secrets.len(), "secret"),
                plural(c.actions.len(), "action"),
                plural(c.installs.len(), "install"),
                if warnings > 0 {
                    format!(" ({})", plural(warnings, "warning"))
                } else {
                    String::new()
                }
            ),
            None => eprintln!(
                "{} is not a valid app config: {}, {}",
                dir.display(),
                plural(errors, "error"),
                plural(warnings, "warning")
            ),
        }
    })?;
    Ok(if config.is_some() {
        0
    } else {
        EXIT_INVALID_CONFIG
    })
}

pub(crate) async fn apps(g: &Global, command: &AppsCommand) -> Result<u8, CliError> {
    match command {
        AppsCommand::Validate { dir } => return validate(g, dir),
        AppsCommand::Render(a) => return crate::render::render(g, a),
        _ => {}
    }
    let client = client(g)?;
    match command {
        AppsCommand::Delete { app } => return crate::lifecycle::delete_app(g, app).await,
        AppsCommand::Create { name } => {
            let app = client.create_app(name).await?;
            emit_with(g, &app, |app| {
                outln!("created app {} ({})", app.name, app.id)
            })?;
        }
        AppsCommand::List => emit(g, &client.list_apps().await?)?,
        AppsCommand::Get { app } => emit(g, &client.get_app(app).await?)?,
        AppsCommand::Sync { dir, app } => {
            let files = nuon_client::app_dir::read_dir(dir).map_err(|d| {
                print_diagnostics(&d.0);
                CliError {
                    message: format!("cannot read the config in {}", dir.display()),
                    code: EXIT_INVALID_CONFIG,
                    api_code: None,
                }
            })?;
            let sources = crate::deploy::read_sources(dir, &files).await?;
            let files = files
                .into_iter()
                .map(|f| ConfigFile {
                    path: f.name,
                    contents: f.text,
                    encoding: None,
                })
                .collect();
            let v = client
                .sync_config(app, files, sources)
                .await
                .map_err(api_error)?;
            emit_with(g, &v, |v| {
                print_diagnostics(&v.warnings);
                if v.unchanged {
                    outln!(
                        "{} is config v{} of app {} already: no new version",
                        dir.display(),
                        v.version,
                        app
                    );
                } else {
                    outln!(
                        "synced {} as config v{} of app {}: {}",
                        dir.display(),
                        v.version,
                        app,
                        plural(v.config.components.len(), "component")
                    );
                }
            })?;
        }
        AppsCommand::Configs { app } => emit(g, &client.list_configs(app).await?)?,
        AppsCommand::Validate { .. } | AppsCommand::Render(_) => unreachable!("handled above"),
    }
    Ok(0)
}

pub(crate) async fn components(g: &Global, command: &ComponentsCommand) -> Result<u8, CliError> {
    let client = client(g)?;
    let ComponentsCommand::List { app } = command;
    emit(g, &client.list_components(app).await?)?;
    Ok(0)
}

impl Render for AppList {
    fn render(&self) {
        table(
            &["ID", "NAME", "CONFIG", "CREATED"],
            self.apps
                .iter()
                .map(|a| {
                    vec![
                        a.id.to_string(),
                        a.name.clone(),
                        a.latest_config.map_or("-".into(), |v| format!("v{v}")),
                        fmt_time(Some(a.created_at_ms)),
                    ]
                })
                .collect(),
        );
    }
}

impl Render for AppInfo {
    fn render(&self) {
        outln!("id:      {}", self.id);
        outln!("name:    {}", self.name);
        outln!(
            "config:  {}",
            self.latest_config
                .map_or("none synced".into(), |v| format!("v{v}"))
        );
        outln!("created: {}", fmt_time(Some(self.created_at_ms)));
    }
}

impl Render for ConfigVersionList {
    fn render(&self) {
        table(
            &["VERSION", "COMPONENTS", "SYNCED"],
            self.configs
                .iter()
                .map(|c| {
                    vec![
                        format!("v{}", c.version),
                        c.components.to_string(),
                        fmt_time(Some(c.created_at_ms)),
                    ]
                })
                .collect(),
        );
    }
}

impl Render for ComponentList {
    fn render(&self) {
        table(
            &["NAME", "TYPE", "DEPENDS ON"],
            self.components
                .iter()
                .map(|c| {
                    vec![
                        c.name.clone(),
                        c.kind().as_str().to_owned(),
                        if c.depends_on.is_empty() {
                            "-".into()
                        } else {
                            c.depends_on.join(", ")
                        },
                    ]
                })
                .collect(),
        );
    }
}
