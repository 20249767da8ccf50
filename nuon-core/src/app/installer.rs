//! `installer.toml`: the page a vendor sends its customer to install the
//! app (Nuon's hosted installer), with every key of Nuon's schema: what
//! the page says of the vendor (name, description, logo and links) and
//! the Markdown it shows (after the install, in its footer, as its
//! copyright). Links must be `http(s)` (they are shown to customers), and
//! `app_ids` is refused as Nuon refuses it.
//!
//! The logo and the favicon are never loaded from their URLs by the
//! customer's browser (the page loads nothing from another origin) nor by
//! the control plane (a tenant's URL would be a way into its network):
//! the vendor's CLI fetches them when it syncs the config (or reads them
//! from the config, `logo_url = "./logo.png"`) and sends them with it,
//! as sources named [`LOGO_SOURCE`] and [`FAVICON_SOURCE`]; the control
//! plane keeps an image of a known type ([`image_type`]) no larger than
//! [`MAX_IMAGE_BYTES`] and serves it itself.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::diag::Diagnostics;
use super::reader::{Located, Reader};
use super::schema::{K, Spec, read, typed};

/// `installer.toml`'s keys (`source` and `app_ids` are answered apart).
pub(crate) const INSTALLER: Spec = Spec {
    keys: &[
        ("name", K::Str),
        ("description", K::Str),
        ("slug", K::Str),
        ("apps", K::StrList),
        ("documentation_url", K::Str),
        ("community_url", K::Str),
        ("homepage_url", K::Str),
        ("github_url", K::Str),
        ("logo_url", K::Str),
        ("favicon_url", K::Str),
        ("og_image_url", K::Str),
        ("demo_url", K::Str),
        ("post_install_markdown", K::Str),
        ("copyright_markdown", K::Str),
        ("footer_markdown", K::Str),
    ],
    required: &[],
};

/// The keys of [`Installer`] that are links shown to the customer.
const URL_KEYS: [&str; 6] = [
    "documentation_url",
    "community_url",
    "homepage_url",
    "github_url",
    "og_image_url",
    "demo_url",
];

/// The keys of [`Installer`] that are images the page shows: a web link or
/// a file of the config (`./logo.png`).
pub const IMAGE_KEYS: [&str; 2] = ["logo_url", "favicon_url"];

/// The source a synced config carries its installer's logo as.
pub const LOGO_SOURCE: &str = ".installer/logo";
/// The source a synced config carries its installer's favicon as.
pub const FAVICON_SOURCE: &str = ".installer/favicon";
/// The largest logo or favicon kept.
pub const MAX_IMAGE_BYTES: usize = 256 * 1024;

/// The media type of an image the installer page may show, by its first
/// bytes: PNG, JPEG, GIF, WebP, ICO or SVG; `None` for anything else.
pub fn image_type(bytes: &[u8]) -> Option<&'static str> {
    const MAGIC: [(&[u8], &str); 6] = [
        (b"\x89PNG\r\n\x1a\n", "image/png"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"GIF87a", "image/gif"),
        (b"GIF89a", "image/gif"),
        (b"\x00\x00\x01\x00", "image/x-icon"),
        (b"RIFF", "image/webp"),
    ];
    if let Some((_, t)) = MAGIC.iter().find(|(m, _)| bytes.starts_with(m)) {
        return (*t != "image/webp" || bytes.get(8..12) == Some(b"WEBP")).then_some(*t);
    }
    let start = &bytes[..bytes.len().min(1024)];
    // The first KiB as text, a character cut at its end left out.
    let head = match std::str::from_utf8(start) {
        Ok(t) => t,
        Err(e) if e.error_len().is_none() => std::str::from_utf8(&start[..e.valid_up_to()]).ok()?,
        Err(_) => return None,
    };
    let head = head.trim_start_matches('\u{feff}').trim_start();
    let svg = head.starts_with("<svg")
        || ((head.starts_with("<?xml")
            || head.starts_with("<!--")
            || head.starts_with("<!DOCTYPE svg"))
            && head.contains("<svg"));
    svg.then_some("image/svg+xml")
}

/// `installer.toml`: what the customer's installer page shows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Installer {
    /// The page's title (the app's display name when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// One paragraph under the title (the app's description when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A short name for the installer, as Nuon keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slug: Option<String>,
    /// The apps it offers, by name (this app when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub apps: Vec<String>,
    /// The vendor's documentation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub documentation_url: Option<String>,
    /// The vendor's community (forum, chat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub community_url: Option<String>,
    /// The vendor's home page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub homepage_url: Option<String>,
    /// The vendor's GitHub.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub github_url: Option<String>,
    /// The vendor's logo, shown at the top of the page: a web link or a
    /// file of the config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logo_url: Option<String>,
    /// The page's icon: a web link or a file of the config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub favicon_url: Option<String>,
    /// The logo's media type, once the sync kept it (set by the control
    /// plane, not read from the file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logo_type: Option<String>,
    /// The favicon's media type, once the sync kept it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub favicon_type: Option<String>,
    /// The image a link preview shows (`og:image`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub og_image_url: Option<String>,
    /// A demo of the app.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub demo_url: Option<String>,
    /// Markdown shown once the install is up (what to do next).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_install_markdown: Option<String>,
    /// Markdown shown as the page's copyright line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copyright_markdown: Option<String>,
    /// Markdown shown in the page's footer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub footer_markdown: Option<String>,
}

impl Installer {
    /// The links it gives, by key, in the order the page shows them.
    pub fn links(&self) -> Vec<(&'static str, &str)> {
        [
            ("Documentation", &self.documentation_url),
            ("Community", &self.community_url),
            ("Home page", &self.homepage_url),
            ("GitHub", &self.github_url),
            ("Demo", &self.demo_url),
        ]
        .into_iter()
        .filter_map(|(label, v)| v.as_deref().map(|v| (label, v)))
        .collect()
    }

    /// Its images, each as (key, the source it is synced as, where it is:
    /// a web link or a file of the config).
    pub fn images(&self) -> Vec<(&'static str, &'static str, &str)> {
        [
            (IMAGE_KEYS[0], LOGO_SOURCE, &self.logo_url),
            (IMAGE_KEYS[1], FAVICON_SOURCE, &self.favicon_url),
        ]
        .into_iter()
        .filter_map(|(key, source, v)| v.as_deref().map(|v| (key, source, v)))
        .collect()
    }

    /// Whether `app` is one it offers (every installer offers its own app).
    pub fn offers(&self, own_app: &str, app: &str) -> bool {
        app == own_app || self.apps.iter().any(|a| a == app)
    }
}

/// Whether `url` is a link a page may show: `https://` or `http://` and a
/// host, nothing a browser would run.
pub fn is_web_url(url: &str) -> bool {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    rest.is_some_and(|r| {
        !r.is_empty()
            && !r.starts_with('/')
            && !url
                .chars()
                .any(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '<' | '>'))
    })
}

/// Reads `installer.toml`.
pub(crate) fn read_installer(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    strings: &mut Vec<Located>,
) -> Option<Installer> {
    if let Some(v) = r.get("app_ids") {
        let span = v.span();
        d.push(r.file.at(
            &span,
            "installer.toml \"app_ids\" is not read: please use `apps` instead (the apps' names), as Nuon asks",
        ));
    }
    let m = read(r, d, &INSTALLER, strings);
    for key in URL_KEYS.into_iter().chain(IMAGE_KEYS) {
        if let Some(url) = m.get(key).and_then(|v| v.as_str())
            && !is_web_url(url)
            && !(IMAGE_KEYS.contains(&key) && super::files::is_file_ref(url))
        {
            let at = r.file.text.find(url).unwrap_or(0);
            d.push(r.file.diag(
                at,
                format!(
                    "installer.toml {key} {:?} is not a web link: write an https:// URL (it is shown to the customer){}",
                    url.chars().take(80).collect::<String>(),
                    if IMAGE_KEYS.contains(&key) {
                        ", or a file of the config (\"./logo.png\")"
                    } else {
                        ""
                    }
                ),
            ));
        }
    }
    r.finish(
        d,
        &[(
            "source",
            "the installer is read from this file; write its keys here",
        )],
        |_| None,
    );
    typed(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::{SourceFile, parse};

    fn load(installer: &str) -> (Option<crate::app::AppConfig>, Diagnostics) {
        parse(&[
            SourceFile::new("metadata.toml", "version = \"v2\"\n"),
            SourceFile::new("installer.toml", installer),
        ])
    }

    #[test]
    fn every_key_of_nuons_schema_is_kept() {
        let text = r#"
name = "Acme Analytics"
description = "Analytics in your own account"
slug = "acme"
apps = ["analytics"]
documentation_url = "https://docs.acme.test"
community_url = "https://community.acme.test"
homepage_url = "https://acme.test"
github_url = "https://github.com/acme"
logo_url = "https://acme.test/logo.svg"
favicon_url = "https://acme.test/favicon.ico"
og_image_url = "https://acme.test/og.png"
demo_url = "https://acme.test/demo"
post_install_markdown = "Open **the app**."
copyright_markdown = "(c) Acme"
footer_markdown = "[Terms](https://acme.test/terms)"
"#;
        let (c, d) = load(text);
        let c = c.unwrap_or_else(|| panic!("{d}"));
        assert!(
            d.iter().all(|x| !x.message.contains("installer")),
            "no warning about installer.toml: {d}"
        );
        let i = c.installer.expect("kept");
        assert_eq!(i.name.as_deref(), Some("Acme Analytics"));
        assert_eq!(i.apps, vec!["analytics"]);
        assert_eq!(
            i.footer_markdown.as_deref(),
            Some("[Terms](https://acme.test/terms)")
        );
        assert_eq!(i.links().len(), 5);
        assert!(i.offers("own", "own") && i.offers("own", "analytics") && !i.offers("own", "x"));
    }

    #[test]
    fn app_ids_and_links_a_browser_would_run_are_refused() {
        let (c, d) = load("app_ids = [\"app_1\"]\nlogo_url = \"javascript:alert(1)\"\n");
        assert!(c.is_none(), "refused");
        let text = d.to_string();
        assert!(text.contains("please use `apps` instead"), "{text}");
        assert!(
            text.contains("logo_url \"javascript:alert(1)\" is not a web link"),
            "{text}"
        );
    }

    #[test]
    fn images_are_web_links_or_files_of_the_config_and_known_by_their_bytes() {
        let (c, d) =
            load("logo_url = \"./brand/logo.svg\"\nfavicon_url = \"https://acme.test/f.ico\"\n");
        let i = c.unwrap_or_else(|| panic!("{d}")).installer.unwrap();
        assert_eq!(
            i.images(),
            [
                ("logo_url", LOGO_SOURCE, "./brand/logo.svg"),
                ("favicon_url", FAVICON_SOURCE, "https://acme.test/f.ico")
            ]
        );
        let (c, d) = load("favicon_url = \"favicon.ico\"\ndemo_url = \"./demo.md\"\n");
        assert!(c.is_none());
        let text = d.to_string();
        assert!(text.contains("favicon_url \"favicon.ico\" is not a web link: write an https:// URL (it is shown to the customer), or a file of the config (\"./logo.png\")"), "{text}");
        let demo = text
            .lines()
            .find(|l| l.contains("demo_url"))
            .unwrap_or_default();
        assert!(
            demo.contains("is not a web link") && !demo.contains("a file of the config"),
            "a link is no file: {text}"
        );

        for (bytes, kind) in [
            (&b"\x89PNG\r\n\x1a\n...."[..], Some("image/png")),
            (b"\xff\xd8\xff\xe0JFIF", Some("image/jpeg")),
            (b"GIF89a..", Some("image/gif")),
            (b"RIFF\x10\x00\x00\x00WEBPVP8 ", Some("image/webp")),
            (b"RIFF\x10\x00\x00\x00WAVEfmt ", None),
            (b"\x00\x00\x01\x00\x01\x00", Some("image/x-icon")),
            (
                b"<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
                Some("image/svg+xml"),
            ),
            (
                b"\xef\xbb\xbf<?xml version=\"1.0\"?>\n<svg/>",
                Some("image/svg+xml"),
            ),
            (b"<html><script>alert(1)</script>", None),
            (b"<?xml version=\"1.0\"?><feed/>", None),
            (
                b"<!DOCTYPE svg PUBLIC \"-//W3C//DTD SVG 1.1//EN\" \"x\">\n<svg/>",
                Some("image/svg+xml"),
            ),
            (b"", None),
        ] {
            assert_eq!(
                image_type(bytes),
                kind,
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn source_is_a_warning() {
        let (c, d) = load("source = \"./other.toml\"\nname = \"x\"\n");
        assert!(c.is_some(), "{d}");
        assert!(
            d.to_string()
                .contains("key \"source\" cannot take effect here"),
            "{d}"
        );
    }

    #[test]
    fn web_urls() {
        assert!(is_web_url("https://a.test/x?y=1"));
        assert!(is_web_url("http://a.test"));
        for bad in [
            "javascript:alert(1)",
            "https://",
            "https:///x",
            "ftp://a",
            "https://a b",
            "data:text/html,x",
        ] {
            assert!(!is_web_url(bad), "{bad}");
        }
    }
}
