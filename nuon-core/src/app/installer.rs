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
