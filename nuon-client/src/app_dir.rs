//! Reading an app config directory from disk: the loader that walks it and
//! hands its files to `nuon_core::app`, which parses and checks them
//! without touching the file system.

use std::path::{Path, PathBuf};

use nuon_core::app::{self, AppConfig, Diagnostics, SourceFile};

/// Reads the config files of directory `dir` (those
/// [`nuon_appconfig::reads_file`] names: the layout's files, and Nuon's other files so
/// they can be reported). Everything else is left alone.
pub fn read_dir(dir: &Path) -> Result<Vec<SourceFile>, Diagnostics> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| nuon_appconfig::unreadable_dir(&dir.display().to_string(), &e))?;
    let mut names = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        if path.is_dir() {
            if nuon_appconfig::reads_dir(&name) {
                collect(&path, &name, &mut names);
            }
        } else if nuon_appconfig::reads_file(&name) {
            names.push((name, path));
        }
    }
    names.sort();
    nuon_appconfig::check_file_count(names.len())?;
    let mut d = Diagnostics::default();
    let mut out = Vec::new();
    for (name, path) in names {
        let read = std::fs::read(&path).map_err(|e| e.to_string());
        out.extend(nuon_appconfig::source_file(name, read, &mut d));
    }
    if d.has_errors() { Err(d) } else { Ok(out) }
}

/// Every file under `dir` the loader reads, named `prefix/...`.
fn collect(dir: &Path, prefix: &str, out: &mut Vec<(String, PathBuf)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = format!("{prefix}/{}", entry.file_name().to_string_lossy());
        let path = entry.path();
        if path.is_dir() {
            collect(&path, &name, out);
        } else if nuon_appconfig::reads_file(&name) {
            out.push((name, path));
        }
    }
}

/// Reads and checks the config in `dir`, and that the sources and files
/// it names exist next to it: the config when it has no error, and every
/// problem found (warnings too).
pub fn validate_dir(dir: &Path) -> (Option<AppConfig>, Diagnostics) {
    match read_dir(dir) {
        Ok(files) => {
            let (config, mut d) = nuon_appconfig::validate(&files, &|path, is_dir| {
                let full = dir.join(path);
                if is_dir {
                    full.is_dir()
                } else {
                    full.is_file()
                }
            });
            let Some(c) = config else { return (None, d) };
            // Each local Terraform module's variables and outputs against
            // the [vars] and references that use them.
            d.0.extend(nuon_appconfig::check_module_interfaces(
                &c,
                &files,
                &|rel| module_files(&dir.join(rel)),
            ));
            d.0.sort();
            // Rego policies compile, with their files read from the directory.
            let bad = nuon_appconfig::check_policies(&c, &|rel| {
                std::fs::read_to_string(dir.join(rel)).ok()
            });
            if bad.is_empty() {
                return (Some(c), d);
            }
            d.0.extend(bad);
            d.0.sort();
            (None, d)
        }
        Err(d) => (None, d),
    }
}

/// The `.tf` files of a module directory, by name, in order (`None` when it
/// has none that read).
fn module_files(dir: &Path) -> Option<Vec<app::SourceFile>> {
    let mut files: Vec<app::SourceFile> = std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "tf"))
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            Some(app::SourceFile::new(e.file_name().to_string_lossy(), text))
        })
        .collect();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    Some(files)
}

/// The installer's logo and favicon, to sync with the config in `dir` as
/// sources ([`app::LOGO_SOURCE`], [`app::FAVICON_SOURCE`]; base64): read
/// from the config (`logo_url = "./logo.png"`) or fetched from their web
/// link here, on the vendor's side, so that neither the customer's browser
/// nor the control plane ever loads them from elsewhere. Each must be a
/// PNG, JPEG, GIF, WebP, ICO or SVG image of at most
/// [`app::MAX_IMAGE_BYTES`]. A file of the config that is not one is an
/// error; a web link that does not give one is a warning (the page then
/// shows no image), so a sync never fails on someone else's server. The
/// images, and the warnings.
pub async fn installer_images(
    dir: &Path,
    config: &AppConfig,
) -> Result<(Vec<nuon_core::wire::ConfigFile>, Vec<String>), String> {
    use base64::Engine as _;
    let Some(installer) = &config.installer else {
        return Ok(Default::default());
    };
    let (mut out, mut warnings) = (Vec::new(), Vec::new());
    for (key, source, at) in installer.images() {
        let why = |e: String| format!("installer.toml {key} {at:?}: {e}");
        let web = app::is_web_url(at);
        let bytes = if web {
            fetch_image(at).await
        } else {
            read_image(dir, at)
        };
        let checked = bytes.and_then(|b| match app::image_type(&b) {
            Some(_) => Ok(b),
            None => Err("is not a PNG, JPEG, GIF, WebP, ICO or SVG image".to_owned()),
        });
        match checked {
            Ok(bytes) => out.push(nuon_core::wire::ConfigFile {
                path: source.to_owned(),
                contents: base64::engine::general_purpose::STANDARD.encode(&bytes),
                encoding: Some("base64".to_owned()),
            }),
            Err(e) if web => warnings.push(format!("{}; the page shows no image", why(e))),
            Err(e) => return Err(why(e)),
        }
    }
    Ok((out, warnings))
}

/// The image file `at` of the config in `dir`, read up to
/// [`app::MAX_IMAGE_BYTES`].
fn read_image(dir: &Path, at: &str) -> Result<Vec<u8>, String> {
    let path = dir.join(app::source_dir(at)?);
    let meta =
        std::fs::metadata(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if meta.len() > app::MAX_IMAGE_BYTES as u64 {
        return Err(too_large());
    }
    std::fs::read(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))
}

fn too_large() -> String {
    format!(
        "is larger than {} KiB: give a smaller image",
        app::MAX_IMAGE_BYTES >> 10
    )
}

/// The image at `url`, read up to [`app::MAX_IMAGE_BYTES`].
async fn fetch_image(url: &str) -> Result<Vec<u8>, String> {
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(15))
        .redirect(reqwest::redirect::Policy::limited(5))
        .build()
        .map_err(|e| e.to_string())?;
    let mut resp = client
        .get(url)
        .send()
        .await
        .map_err(|e| format!("cannot fetch it: {e} (the CLI fetches the installer's images when it syncs; fix the link or name a file of the config)"))?;
    if !resp.status().is_success() {
        return Err(format!("fetching it answered {}", resp.status()));
    }
    let mut bytes = Vec::new();
    while let Some(chunk) = resp
        .chunk()
        .await
        .map_err(|e| format!("cannot fetch it: {e}"))?
    {
        bytes.extend_from_slice(&chunk);
        if bytes.len() > app::MAX_IMAGE_BYTES {
            return Err(too_large());
        }
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nuon_appconfig::parse;
    use nuon_core::app::SourceFile;

    fn config(installer: &str) -> AppConfig {
        let (c, d) = parse(&[
            SourceFile::new("metadata.toml", "version = \"v2\"\n"),
            SourceFile::new("installer.toml", installer),
        ]);
        c.unwrap_or_else(|| panic!("{d}"))
    }

    #[tokio::test]
    async fn installer_images_are_read_checked_and_sent_as_base64() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("logo.svg"), "<svg/>").unwrap();
        std::fs::write(dir.path().join("page.svg"), "<html>not an image</html>").unwrap();
        std::fs::write(
            dir.path().join("big.svg"),
            format!("<svg>{}</svg>", " ".repeat(app::MAX_IMAGE_BYTES)),
        )
        .unwrap();
        let (sent, warnings) = installer_images(dir.path(), &config("logo_url = \"./logo.svg\"\n"))
            .await
            .unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].path, app::LOGO_SOURCE);
        assert_eq!(sent[0].contents, "PHN2Zy8+");
        assert_eq!(sent[0].encoding.as_deref(), Some("base64"));

        for (installer, why) in [
            (
                "logo_url = \"./page.svg\"\n",
                "installer.toml logo_url \"./page.svg\": is not a PNG, JPEG, GIF, WebP, ICO or SVG image",
            ),
            (
                "favicon_url = \"./big.svg\"\n",
                "installer.toml favicon_url \"./big.svg\": is larger than 256 KiB",
            ),
            (
                "logo_url = \"./gone.png\"\n",
                "installer.toml logo_url \"./gone.png\": cannot read",
            ),
        ] {
            let e = installer_images(dir.path(), &config(installer))
                .await
                .unwrap_err();
            assert!(e.starts_with(why), "{e}");
        }
        // A web link that gives no image: a warning, nothing sent.
        let (sent, warnings) = installer_images(
            dir.path(),
            &config("logo_url = \"http://127.0.0.1:9/logo.png\"\n"),
        )
        .await
        .unwrap();
        assert!(sent.is_empty());
        assert!(
            warnings.len() == 1
                && warnings[0].starts_with(
                    "installer.toml logo_url \"http://127.0.0.1:9/logo.png\": cannot fetch it"
                )
                && warnings[0].ends_with("the page shows no image"),
            "{warnings:?}"
        );
        let (sent, warnings) = installer_images(dir.path(), &config("name = \"x\"\n"))
            .await
            .unwrap();
        assert!(sent.is_empty() && warnings.is_empty());
    }
}
