//! `installer.toml`: the page a vendor sends its customer to install the
//! app (Nuon's hosted installer), with every key of Nuon's schema: what
//! the page says of the vendor (name, description, logo and links) and
//! the Markdown it shows (after the install, in its footer, as its
//! copyright). Links must be `http(s)` (they are shown to customers), and
//! `app_ids` is refused as Nuon refuses it.

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
const URL_KEYS: [&str; 8] = [
    "documentation_url",
    "community_url",
    "homepage_url",
    "github_url",
    "logo_url",
    "favicon_url",
    "og_image_url",
    "demo_url",
];

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
    /// The vendor's logo, shown at the top of the page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logo_url: Option<String>,
    /// The page's icon.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub favicon_url: Option<String>,
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
    for key in URL_KEYS {
        if let Some(url) = m.get(key).and_then(|v| v.as_str())
            && !is_web_url(url)
        {
            let at = r.file.text.find(url).unwrap_or(0);
            d.push(r.file.diag(
                at,
                format!(
                    "installer.toml {key} {:?} is not a web link: write an https:// URL (it is shown to the customer)",
                    url.chars().take(80).collect::<String>()
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
