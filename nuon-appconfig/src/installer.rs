//! Reading `installer.toml`, the customer's installer page, against
//! Nuon's schema: links a browser would run are refused.

use crate::reader::{Located, Reader};
use crate::schema::{K, Spec, read, typed};
use nuon_core::app::*;

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
            && !(IMAGE_KEYS.contains(&key) && nuon_core::app::is_file_ref(url))
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
    use crate::parse;
    use nuon_core::app::SourceFile;

    fn load(installer: &str) -> (Option<nuon_core::app::AppConfig>, Diagnostics) {
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
