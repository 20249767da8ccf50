//! An app's config versions: syncing the next one from its files (every
//! file checked, the config parsed and its policies checked, the
//! installer's images kept, then sealed and stored; the same files as the
//! latest version make none), and reading them.

use std::collections::BTreeSet;

use axum::http::StatusCode;
use nuon_core::app::{self, SourceFile};
use nuon_core::endpoint::{self as ep, path_of};
use nuon_core::wire::{
    ConfigFile, ConfigVersionInfo, ConfigVersionList, ConfigVersionSummary, SyncConfig,
};

use super::apps::decode_config;
use super::{Caller, Services, internal, require_admin};
use crate::error::Error;
use crate::keys::{open_config, seal_config};
use crate::store::StoredConfig;

/// The most files one config version may have.
const MAX_CONFIG_FILES: usize = 1000;

impl Services<'_> {
    /// `POST /v1/apps/{id}/configs`: the app's next config version from
    /// its files, checked whole (an invalid config is refused with every
    /// diagnostic, nothing stored); the same files and sources as the
    /// latest version make none, and that version is the answer, marked
    /// `unchanged` (the API answers it 200, not 201). Admins only;
    /// recorded in the audit trail, refusals included.
    pub(crate) async fn sync_app_config(
        &self,
        caller: &Caller,
        key: &str,
        req: SyncConfig,
    ) -> Result<ConfigVersionInfo, Error> {
        let result = self.sync_config(caller, key, req).await;
        let ok = match &result {
            Ok(c) if c.unchanged => StatusCode::OK,
            _ => StatusCode::CREATED,
        };
        let target = path_of::<ep::SyncAppConfig>(&[key]);
        self.audited_as::<ep::SyncAppConfig, _>(caller, target, ok, result)
            .await
    }

    async fn sync_config(
        &self,
        caller: &Caller,
        key: &str,
        req: SyncConfig,
    ) -> Result<ConfigVersionInfo, Error> {
        require_admin(&caller.principal)?;
        let app = self.find_app(caller, key).await?;
        let org = &caller.principal.org_id;
        if req.files.len() > MAX_CONFIG_FILES {
            return Err(Error::bad_request(format!(
                "a config may have at most {MAX_CONFIG_FILES} files, got {}",
                req.files.len()
            )));
        }
        let mut seen = BTreeSet::new();
        for f in &req.files {
            check_path(&f.path).map_err(Error::bad_request)?;
            if !seen.insert(f.path.as_str()) {
                return Err(Error::bad_request(format!(
                    "file {:?} is given twice",
                    f.path
                )));
            }
        }
        let mut seen_sources = BTreeSet::new();
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
        let (config, mut diags) =
            crate::render_pool::in_place(|| nuon_appconfig::parse(&sources)).await;
        // Files named in contents: the config version keeps their text.
        let config = config.and_then(|mut c| {
            let text_of = |rel: &str| {
                req.sources
                    .iter()
                    .find(|f| f.path == rel && f.encoding.is_none())
                    .map(|f| f.contents.clone())
            };
            let bad = nuon_appconfig::check_policies(&c, &text_of);
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
        if let Some(latest) = self.store.get_config(org, &app.id, None).await? {
            let same_sources = open_config(self.secrets, &app.id, "sources", &latest.sources_json)
                .ok()
                .and_then(|s| serde_json::from_str::<Vec<ConfigFile>>(&s).ok())
                .is_some_and(|s| s == req.sources);
            let mut latest = decode_config(self.secrets, &app, latest)?;
            if same_sources && latest.files == req.files {
                latest.unchanged = true;
                tracing::info!(app = %app.id, version = latest.version, "app config synced unchanged");
                return Ok(latest);
            }
        }
        let stored = StoredConfig {
            version: 0,
            created_at_ms: 0,
            components: config.components.len() as u32,
            files_json: seal_config(
                self.secrets,
                &app.id,
                "files",
                &serde_json::to_string(&req.files)
                    .map_err(|e| internal("cannot encode files", e))?,
            ),
            config_json: seal_config(
                self.secrets,
                &app.id,
                "config",
                &serde_json::to_string(&config).map_err(|e| internal("cannot encode config", e))?,
            ),
            warnings_json: serde_json::to_string(&warnings)
                .map_err(|e| internal("cannot encode warnings", e))?,
            sources_json: seal_config(
                self.secrets,
                &app.id,
                "sources",
                &serde_json::to_string(&req.sources)
                    .map_err(|e| internal("cannot encode sources", e))?,
            ),
        };
        let stored = self.store.add_config(org, &app.id, stored).await?;
        tracing::info!(app = %app.id, version = stored.version, components = stored.components, "app config synced");
        Ok(ConfigVersionInfo {
            app_id: app.id,
            version: stored.version,
            created_at_ms: stored.created_at_ms,
            config,
            files: req.files,
            warnings,
            unchanged: false,
        })
    }

    /// `GET /v1/apps/{id}/configs`: the app's config versions, each by
    /// number, date and count of components.
    pub(crate) async fn list_configs(
        &self,
        caller: &Caller,
        key: &str,
    ) -> Result<ConfigVersionList, Error> {
        let app = self.find_app(caller, key).await?;
        let configs = self
            .store
            .list_configs(&caller.principal.org_id, &app.id)
            .await?
            .into_iter()
            .map(|c| ConfigVersionSummary {
                version: c.version,
                created_at_ms: c.created_at_ms,
                components: c.components,
            })
            .collect();
        Ok(ConfigVersionList { configs })
    }

    /// `GET /v1/apps/{id}/configs/{version}`: one config version of the
    /// app, opened: `version` a number, or `latest`.
    pub(crate) async fn get_config(
        &self,
        caller: &Caller,
        key: &str,
        version: &str,
    ) -> Result<ConfigVersionInfo, Error> {
        let app = self.find_app(caller, key).await?;
        if version == "latest" {
            return self.latest_config(caller, &app).await;
        }
        let v: u32 = version.parse().map_err(|_| {
            Error::not_found(format!(
                "no config version {version:?} (give a number or latest)"
            ))
        })?;
        let c = self
            .store
            .get_config(&caller.principal.org_id, &app.id, Some(v))
            .await?
            .ok_or_else(|| {
                Error::not_found(format!("app {:?} has no config version {v}", app.name))
            })?;
        decode_config(self.secrets, &app, c)
    }
}

/// Refuses a file's path that is not relative to the config directory,
/// with `/` separators and no `.` or `..` parts: what is wrong, said.
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

#[cfg(test)]
mod tests {
    use super::*;
    use nuon_core::app::SourceFile;

    fn config(installer: &str) -> app::AppConfig {
        let mut files = vec![SourceFile::new("metadata.toml", "version = \"v2\"\n")];
        if !installer.is_empty() {
            files.push(SourceFile::new("installer.toml", installer));
        }
        let (c, d) = nuon_appconfig::parse(&files);
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
