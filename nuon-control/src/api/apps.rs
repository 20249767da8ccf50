//! The Control API for apps, their config versions and components, and
//! installs with their inputs and secrets.

use nuon_core::endpoint as ep;
use nuon_core::wire::ErrorCode;
use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::routing::{get, patch, post};
use nuon_core::app::{self, SourceFile};
use nuon_core::endpoint::{GetInstall, GetInstallReadme, RenderInstall, UpdateInstall};
use nuon_core::wire::{
    AppInfo, AppList, ComponentList, ConfigFile, ConfigVersionInfo, ConfigVersionList,
    ConfigVersionSummary, CreateApp, CreateInstall, EditInstall, InstallCreated, InstallInfo,
    InstallList, SetInputs, SyncConfig, WorkflowInfo, WorkflowList,
};
use nuon_core::{AppId, WorkflowId};

use serde_json::Value;

use super::control::require_admin;
use super::doc::Op;
use super::{ApiAuth, AppState, Body, Caller, SharedState, body_of};
use crate::error::Error;
use crate::keys::{open_config, seal_config};
use crate::secrets::Sealed;
pub(super) use crate::service::installs::{install_info, resolve_inputs};
pub(super) use crate::service::{check_name, internal};
use crate::store::{StoredConfig, StoredInstall};

/// See [`crate::service::apps::decode_config`].
pub(super) fn decode_config(
    state: &AppState,
    app: &AppInfo,
    c: StoredConfig,
) -> Result<ConfigVersionInfo, Error> {
    crate::service::apps::decode_config(&state.secrets, app, c)
}

/// See [`Services::find_app`](crate::service::Services::find_app).
pub(super) async fn app_of(
    state: &SharedState,
    auth: &ApiAuth,
    key: &str,
) -> Result<AppInfo, Error> {
    state.services().find_app(&auth.caller(), key).await
}

/// See [`Services::latest_config`](crate::service::Services::latest_config).
pub(super) async fn latest_config(
    state: &SharedState,
    auth: &ApiAuth,
    app: &AppInfo,
) -> Result<ConfigVersionInfo, Error> {
    state.services().latest_config(&auth.caller(), app).await
}

pub(super) async fn create_install(
    State(state): State<SharedState>,
    caller: Caller,
    body: Result<Body<CreateInstall>, Error>,
) -> Result<(StatusCode, Json<InstallCreated>), Error> {
    let req = body_of::<ep::CreateInstall, _>(&state, &caller, &[], body).await?;
    let made = state.services().create_install(&caller, req).await?;
    Ok((StatusCode::CREATED, Json(made)))
}

pub(super) fn ops() -> Vec<Op> {
    vec![
        Op::endpoint::<ep::CreateApp>(post(create_app)),
        Op::endpoint::<ep::ListApps>(get(list_apps)),
        Op::endpoint::<ep::GetApp>(get(get_app)),
        Op::endpoint::<ep::SyncAppConfig>(post(sync_config))
            .or_status(200, "The files are those of the latest version: no version is made; the answer is that one."),
        Op::endpoint::<ep::ListAppConfigs>(get(list_configs)),
        Op::endpoint::<ep::GetAppConfig>(get(get_config)),
        Op::endpoint::<ep::ListComponents>(get(list_components)),
        Op::endpoint::<ep::CreateInstall>(post(create_install)).audited_by_service(),
        Op::endpoint::<ep::ListInstalls>(get(list_installs))
            .query("selector", serde_json::json!({"type": "string"}), "A label selector: `tier=prod,region!=us`, `tier in (a,b)`, `team`, `!legacy`."),
        Op::endpoint::<GetInstall>(get(get_install)),
        Op::endpoint::<RenderInstall>(get(render_install)),
        Op::endpoint::<GetInstallReadme>(get(install_readme)),
        Op::endpoint::<ep::ListInstallSecrets>(get(install_secrets)),
        Op::endpoint::<UpdateInstall>(patch(update_install)).audited_by_service(),
        Op::endpoint::<ep::SetInstallInputs>(patch(set_inputs)),
        Op::endpoint::<ep::ListInstallWorkflows>(get(list_workflows)),
        Op::endpoint::<ep::GetWorkflow>(get(get_workflow)),
    ]
}

async fn create_app(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Body(req): Body<CreateApp>,
) -> Result<(StatusCode, Json<AppInfo>), Error> {
    require_admin(&auth)?;
    check_name("app", &req.name)?;
    let app = state
        .store
        .create_app(&auth.0.org_id, &AppId::generate(), &req.name)
        .await?;
    tracing::info!(app = %app.id, name = %app.name, "app created");
    Ok((StatusCode::CREATED, Json(app)))
}

async fn list_apps(
    State(state): State<SharedState>,
    auth: ApiAuth,
) -> Result<Json<AppList>, Error> {
    let apps = state.store.list_apps(&auth.0.org_id).await?;
    Ok(Json(AppList { apps }))
}

async fn get_app(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<Json<AppInfo>, Error> {
    Ok(Json(app_of(&state, &auth, &key).await?))
}

/// The most files one config version may have.
const MAX_CONFIG_FILES: usize = 1000;

fn check_path(path: &str) -> Result<(), String> {
    let ok = !path.is_empty()
        && !path.starts_with('/')
        && !path.contains('\\')
        && path
            .split('/')
            .all(|p| !p.is_empty() && p != "." && p != "..");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "file path {path:?} must be relative to the config directory, with '/' separators and no '.' or '..' parts"
        ))
    }
}

/// Keeps the installer's logo and favicon the sync sent (sources
/// [`app::LOGO_SOURCE`] and [`app::FAVICON_SOURCE`], base64) by noting
/// their types in the config: each must be an image of a known type and
/// size. What is wrong (errors), and each image named but not sent
/// (warnings: the page shows the vendor's name instead).
fn keep_installer_images(
    config: &mut app::AppConfig,
    sources: &[ConfigFile],
) -> (Vec<String>, Vec<String>) {
    use base64::Engine as _;
    let (mut errors, mut warnings) = (Vec::new(), Vec::new());
    let named: Vec<(&str, &str)> = config
        .installer
        .as_ref()
        .map(|i| i.images().into_iter().map(|(k, s, _)| (k, s)).collect())
        .unwrap_or_default();
    for (source, key) in [
        (app::LOGO_SOURCE, app::IMAGE_KEYS[0]),
        (app::FAVICON_SOURCE, app::IMAGE_KEYS[1]),
    ] {
        let sent = sources.iter().find(|f| f.path == source);
        let Some(installer) = config.installer.as_mut() else {
            if sent.is_some() {
                errors.push(format!(
                    "source {source:?}: the config has no installer.toml to show it"
                ));
            }
            continue;
        };
        let slot = if key == app::IMAGE_KEYS[0] {
            &mut installer.logo_type
        } else {
            &mut installer.favicon_type
        };
        match sent {
            None if named.iter().any(|(k, _)| *k == key) => warnings.push(format!(
                "installer.toml {key} was not sent with the config, so the page shows no image: sync with `nuon apps sync`, which reads or fetches it"
            )),
            None => {}
            Some(_) if !named.iter().any(|(k, _)| *k == key) => {
                errors.push(format!("source {source:?}: installer.toml has no {key}"));
            }
            Some(f) => {
                let bytes = match f.encoding.as_deref() {
                    Some("base64") => base64::engine::general_purpose::STANDARD.decode(&f.contents).ok(),
                    _ => None,
                };
                match bytes {
                    None => errors.push(format!("source {source:?}: send the image as base64 (`encoding = \"base64\"`)")),
                    Some(b) if b.len() > app::MAX_IMAGE_BYTES => errors.push(format!(
                        "installer.toml {key}: the image is larger than {} KiB",
                        app::MAX_IMAGE_BYTES >> 10
                    )),
                    Some(b) => match app::image_type(&b) {
                        Some(t) => *slot = Some(t.to_owned()),
                        None => errors.push(format!(
                            "installer.toml {key}: not a PNG, JPEG, GIF, WebP, ICO or SVG image"
                        )),
                    },
                }
            }
        }
    }
    (errors, warnings)
}

async fn sync_config(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
    Body(req): Body<SyncConfig>,
) -> Result<(StatusCode, Json<ConfigVersionInfo>), Error> {
    require_admin(&auth)?;
    let app = app_of(&state, &auth, &key).await?;
    if req.files.len() > MAX_CONFIG_FILES {
        return Err(Error::bad_request(format!(
            "a config may have at most {MAX_CONFIG_FILES} files, got {}",
            req.files.len()
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    for f in &req.files {
        check_path(&f.path).map_err(Error::bad_request)?;
        if !seen.insert(f.path.as_str()) {
            return Err(Error::bad_request(format!(
                "file {:?} is given twice",
                f.path
            )));
        }
    }
    let mut seen_sources = std::collections::BTreeSet::new();
    for f in &req.sources {
        check_path(&f.path).map_err(Error::bad_request)?;
        if !seen_sources.insert(f.path.as_str()) {
            return Err(Error::bad_request(format!(
                "source file {:?} is given twice",
                f.path
            )));
        }
    }
    let sources: Vec<SourceFile> = req
        .files
        .iter()
        .filter(|f| f.path.ends_with(".toml"))
        .map(|f| SourceFile::new(f.path.clone(), f.contents.clone()))
        .collect();
    // The check renders each template once under a budget: a tenant's
    // work, off the runtime's threads.
    let (config, mut diags) = crate::render_pool::in_place(|| app::parse(&sources)).await;
    // Files named in contents: the config version keeps their text.
    let config = config.and_then(|mut c| {
        let text_of = |rel: &str| {
            req.sources
                .iter()
                .find(|f| f.path == rel && f.encoding.is_none())
                .map(|f| f.contents.clone())
        };
        let bad = app::check_policies(&c, &text_of);
        let compiles = bad.is_empty();
        diags.0.extend(bad);
        if !compiles {
            return None;
        }
        let mut problems = app::inline_file_refs(&mut c, &text_of);
        let (bad_images, unsent) = keep_installer_images(&mut c, &req.sources);
        problems.extend(bad_images);
        for p in unsent {
            diags.0.push(app::Diagnostic {
                file: "installer.toml".into(),
                line: 1,
                col: 1,
                warning: true,
                message: p,
            });
        }
        for p in &problems {
            diags.0.push(app::Diagnostic {
                file: ".".into(),
                line: 1,
                col: 1,
                warning: false,
                message: p.clone(),
            });
        }
        problems.is_empty().then_some(c)
    });
    let Some(config) = config else {
        let errors = diags.errors().count();
        return Err(Error::InvalidConfig {
            message: format!(
                "the config has {errors} error{}; nothing was stored (see diagnostics, or run `nuon apps validate DIR`)",
                if errors == 1 { "" } else { "s" }
            ),
            diagnostics: diags.0,
        });
    };
    let warnings: Vec<_> = diags.warnings().cloned().collect();
    // The same files and sources as the latest version: that version it
    // stays (a new one would start workflows and builds for nothing).
    if let Some(latest) = state
        .store
        .get_config(&auth.0.org_id, &app.id, None)
        .await?
    {
        let same_sources = open_config(&state.secrets, &app.id, "sources", &latest.sources_json)
            .ok()
            .and_then(|s| serde_json::from_str::<Vec<ConfigFile>>(&s).ok())
            .is_some_and(|s| s == req.sources);
        let mut latest = decode_config(&state, &app, latest)?;
        if same_sources && latest.files == req.files {
            latest.unchanged = true;
            tracing::info!(app = %app.id, version = latest.version, "app config synced unchanged");
            return Ok((StatusCode::OK, Json(latest)));
        }
    }
    let stored = StoredConfig {
        version: 0,
        created_at_ms: 0,
        components: config.components.len() as u32,
        files_json: seal_config(
            &state.secrets,
            &app.id,
            "files",
            &serde_json::to_string(&req.files).map_err(|e| internal("cannot encode files", e))?,
        ),
        config_json: seal_config(
            &state.secrets,
            &app.id,
            "config",
            &serde_json::to_string(&config).map_err(|e| internal("cannot encode config", e))?,
        ),
        warnings_json: serde_json::to_string(&warnings)
            .map_err(|e| internal("cannot encode warnings", e))?,
        sources_json: seal_config(
            &state.secrets,
            &app.id,
            "sources",
            &serde_json::to_string(&req.sources)
                .map_err(|e| internal("cannot encode sources", e))?,
        ),
    };
    let stored = state
        .store
        .add_config(&auth.0.org_id, &app.id, stored)
        .await?;
    tracing::info!(app = %app.id, version = stored.version, components = stored.components, "app config synced");
    Ok((
        StatusCode::CREATED,
        Json(ConfigVersionInfo {
            app_id: app.id,
            version: stored.version,
            created_at_ms: stored.created_at_ms,
            config,
            files: req.files,
            warnings,
            unchanged: false,
        }),
    ))
}

async fn list_configs(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<Json<ConfigVersionList>, Error> {
    let app = app_of(&state, &auth, &key).await?;
    let configs = state
        .store
        .list_configs(&auth.0.org_id, &app.id)
        .await?
        .into_iter()
        .map(|c| ConfigVersionSummary {
            version: c.version,
            created_at_ms: c.created_at_ms,
            components: c.components,
        })
        .collect();
    Ok(Json(ConfigVersionList { configs }))
}

/// An install of the token's org, its app and the app's latest config.
pub(super) async fn install_app_config(
    state: &SharedState,
    auth: &ApiAuth,
    key: &str,
) -> Result<(StoredInstall, AppInfo, ConfigVersionInfo), Error> {
    state
        .services()
        .install_app_config(&auth.caller(), key)
        .await
}

async fn get_config(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path((key, version)): Path<(String, String)>,
) -> Result<Json<ConfigVersionInfo>, Error> {
    let app = app_of(&state, &auth, &key).await?;
    if version == "latest" {
        return Ok(Json(latest_config(&state, &auth, &app).await?));
    }
    let v: u32 = version.parse().map_err(|_| {
        Error::not_found(format!(
            "no config version {version:?} (give a number or latest)"
        ))
    })?;
    let c = state
        .store
        .get_config(&auth.0.org_id, &app.id, Some(v))
        .await?
        .ok_or_else(|| Error::not_found(format!("app {:?} has no config version {v}", app.name)))?;
    Ok(Json(decode_config(&state, &app, c)?))
}

async fn list_components(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<Json<ComponentList>, Error> {
    let app = app_of(&state, &auth, &key).await?;
    let c = latest_config(&state, &auth, &app).await?;
    Ok(Json(ComponentList {
        config_version: c.version,
        components: c.config.components,
    }))
}

async fn list_installs(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Query(q): Query<super::groups::SelectorQuery>,
) -> Result<Json<InstallList>, Error> {
    let selector = super::groups::selector_of(q.selector.as_deref().unwrap_or(""))?;
    let stored: Vec<StoredInstall> = state
        .store
        .list_installs(&auth.0.org_id)
        .await?
        .into_iter()
        .filter(|i| selector.matches(&i.labels))
        .collect();
    let fleet = state.services().fleet(&auth.caller(), &stored).await?;
    let installs = stored
        .into_iter()
        .map(|i| Ok(fleet.show(&i, install_info(i.clone())?)))
        .collect::<Result<_, Error>>()?;
    Ok(Json(InstallList {
        installs: named(&state, &auth, installs).await?,
    }))
}

pub(super) async fn install_of(
    state: &SharedState,
    auth: &ApiAuth,
    key: &str,
) -> Result<StoredInstall, Error> {
    state.services().find_install(&auth.caller(), key).await
}

async fn get_install(
    State(state): State<SharedState>,
    caller: Caller,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<Json<InstallInfo>, Error> {
    let info = state.services().get_install(&caller, &key).await?;
    // Its health and sync, as listInstalls shows them.
    let install = install_of(&state, &auth, info.id.as_str()).await?;
    let fleet = state
        .services()
        .fleet(&auth.caller(), std::slice::from_ref(&install))
        .await?;
    Ok(Json(fleet.show(&install, info)))
}

async fn render_install(
    State(state): State<SharedState>,
    caller: Caller,
    Path((key, workflow)): Path<(String, String)>,
) -> Result<Json<nuon_core::rendered::RenderedWorkflow>, Error> {
    Ok(Json(
        state
            .services()
            .render_install(&caller, &key, &workflow)
            .await?,
    ))
}

async fn install_readme(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<nuon_core::rendered::RenderedReadme>, Error> {
    Ok(Json(state.services().install_readme(&caller, &key).await?))
}

async fn install_secrets(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
) -> Result<Json<nuon_core::wire::InstallSecrets>, Error> {
    Ok(Json(state.services().install_secrets(&caller, &key).await?))
}

async fn update_install(
    State(state): State<SharedState>,
    caller: Caller,
    Path(key): Path<String>,
    body: Result<Body<EditInstall>, Error>,
) -> Result<Json<InstallInfo>, Error> {
    let req = body_of::<UpdateInstall, _>(&state, &caller, &[&key], body).await?;
    state
        .services()
        .update_install(&caller, &key, req)
        .await
        .map(Json)
}

/// An install with its app's name.
pub(super) async fn with_app_name(
    state: &SharedState,
    auth: &ApiAuth,
    install: InstallInfo,
) -> Result<InstallInfo, Error> {
    state.services().with_names(&auth.0.org_id, install).await
}

/// Installs with their apps' names (the org's apps read once).
async fn named(
    state: &SharedState,
    auth: &ApiAuth,
    mut installs: Vec<InstallInfo>,
) -> Result<Vec<InstallInfo>, Error> {
    let apps = state.services().app_names(&auth.0.org_id).await?;
    let releases = state.store.install_releases(&auth.0.org_id).await?;
    for i in &mut installs {
        i.app_name = apps.get(&i.app_id).cloned();
        i.release_id = releases.get(&i.id).cloned();
    }
    Ok(installs)
}

async fn set_inputs(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
    Body(req): Body<SetInputs>,
) -> Result<Json<InstallInfo>, Error> {
    require_admin(&auth)?;
    let install = install_of(&state, &auth, &key).await?;
    let app = state
        .store
        .find_app(&auth.0.org_id, install.app_id.as_str())
        .await?
        .ok_or_else(|| Error::not_found(format!("no app {}", install.app_id)))?;
    let c = state
        .store
        .get_config(&auth.0.org_id, &app.id, Some(install.config_version))
        .await?
        .ok_or_else(|| Error::not_found(format!("no config version {}", install.config_version)))?;
    let config = decode_config(&state, &app, c)?.config;
    let mut plain: BTreeMap<String, Value> = serde_json::from_str(&install.inputs_json)
        .map_err(|e| internal("stored inputs unreadable", e))?;
    let mut sealed: Sealed = serde_json::from_str(&install.sealed_json)
        .map_err(|e| internal("stored secrets unreadable", e))?;
    let mut problems = Vec::new();
    resolve_inputs(
        &config,
        &install.id,
        &req.inputs,
        &mut plain,
        &mut sealed,
        &state.secrets,
        &mut problems,
    );
    if !problems.is_empty() {
        return Err(Error::api(
            StatusCode::BAD_REQUEST,
            ErrorCode::InvalidInputs,
            format!("install {:?}: {}", install.name, problems.join("; ")),
        ));
    }
    state
        .store
        .set_install_inputs(
            &auth.0.org_id,
            &install.id,
            &serde_json::to_string(&plain).map_err(|e| internal("cannot encode inputs", e))?,
            &serde_json::to_string(&sealed).map_err(|e| internal("cannot encode secrets", e))?,
        )
        .await?
        .ok_or_else(|| Error::not_found(format!("no install {key:?}")))?;
    // Not deployed now: pending until the components that read them are.
    let names: Vec<String> = req.inputs.keys().cloned().collect();
    let readers: Vec<String> = nuon_core::app::components_reading(&config, &names, &[])
        .into_iter()
        .filter(|c| config.component(c).is_some_and(|c| install.enabled(c)))
        .collect();
    let services = state.services();
    services
        .note_change(&auth.0.org_id, &install, readers, None)
        .await?;
    let again = services
        .find_install(&auth.caller(), install.id.as_str())
        .await?;
    let info = install_info(again)?;
    Ok(Json(with_app_name(&state, &auth, info).await?))
}

async fn list_workflows(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(key): Path<String>,
) -> Result<Json<WorkflowList>, Error> {
    let install = install_of(&state, &auth, &key).await?;
    let workflows = state
        .store
        .list_workflows(&auth.0.org_id, &install.id)
        .await?;
    Ok(Json(WorkflowList {
        workflows: workflows.into_iter().map(super::workflow_view).collect(),
    }))
}

async fn get_workflow(
    State(state): State<SharedState>,
    auth: ApiAuth,
    Path(raw): Path<String>,
) -> Result<Json<WorkflowInfo>, Error> {
    let id: WorkflowId = super::path_id("workflow", &raw)?;
    let org = &auth.0.org_id;
    let wf = state
        .store
        .get_workflow(org, &id)
        .await?
        .ok_or_else(|| Error::not_found(format!("no workflow {raw:?}")))?;
    Ok(Json(state.services().workflow_live(org, wf).await?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use nuon_core::app::SourceFile;

    fn config(installer: &str) -> app::AppConfig {
        let mut files = vec![SourceFile::new("metadata.toml", "version = \"v2\"\n")];
        if !installer.is_empty() {
            files.push(SourceFile::new("installer.toml", installer));
        }
        let (c, d) = app::parse(&files);
        c.unwrap_or_else(|| panic!("{d}"))
    }

    fn sent(path: &str, contents: &str) -> ConfigFile {
        ConfigFile {
            path: path.into(),
            contents: contents.into(),
            encoding: Some("base64".into()),
        }
    }

    #[test]
    fn the_installers_images_are_kept_by_type_and_what_is_wrong_is_said() {
        // `<svg/>` and a PNG's first bytes.
        let svg = sent(app::LOGO_SOURCE, "PHN2Zy8+");
        let png = sent(app::FAVICON_SOURCE, "iVBORw0KGgo=");
        let mut c = config("logo_url = \"./l.svg\"\nfavicon_url = \"https://a.test/f.png\"\n");
        let (errors, warnings) = keep_installer_images(&mut c, &[svg.clone(), png]);
        assert!(
            errors.is_empty() && warnings.is_empty(),
            "{errors:?} {warnings:?}"
        );
        let i = c.installer.unwrap();
        assert_eq!(i.logo_type.as_deref(), Some("image/svg+xml"));
        assert_eq!(i.favicon_type.as_deref(), Some("image/png"));

        // Named, not sent: a warning; the page shows no image.
        let mut c = config("logo_url = \"./l.svg\"\n");
        let (errors, warnings) = keep_installer_images(&mut c, &[]);
        assert!(errors.is_empty());
        assert!(
            warnings[0].contains("logo_url was not sent"),
            "{warnings:?}"
        );
        assert!(c.installer.unwrap().logo_type.is_none());

        // Not an image, not base64, sent but not named, no installer.
        let html = sent(app::LOGO_SOURCE, "PGh0bWw+"); // <html>
        let mut plain = html.clone();
        plain.encoding = None;
        for (installer, sources, why) in [
            (
                "logo_url = \"./l.svg\"\n",
                vec![html],
                "not a PNG, JPEG, GIF, WebP, ICO or SVG image",
            ),
            (
                "logo_url = \"./l.svg\"\n",
                vec![plain],
                "send the image as base64",
            ),
            (
                "name = \"x\"\n",
                vec![svg.clone()],
                "installer.toml has no logo_url",
            ),
            ("", vec![svg], "the config has no installer.toml"),
        ] {
            let (errors, _) = keep_installer_images(&mut config(installer), &sources);
            assert!(errors.len() == 1 && errors[0].contains(why), "{errors:?}");
        }
    }
}
