//! Markdown (an app's README, an installer's notes) as HTML a page can
//! show: CommonMark with tables and strikethrough, parsed by
//! `pulldown-cmark` and written by this module, which lets nothing active
//! through. Raw HTML is shown as text; a link is kept only to `http(s)`
//! and `mailto` (with `rel="noopener noreferrer nofollow"`), anything
//! else keeps its words and loses its target; an image becomes a link to
//! it (the pages load nothing from elsewhere); headings move one level
//! down, under the page's own title.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};

use super::escape;

/// `text` as sanitized HTML.
pub(crate) fn to_html(text: &str) -> String {
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    let mut w = Writer {
        out: String::with_capacity(text.len() * 3 / 2 + 64),
        links: Vec::new(),
        image: None,
        table_head: false,
    };
    for event in Parser::new_ext(text, options) {
        w.event(event);
    }
    w.out
}

/// Whether a link may keep its target.
fn safe_url(url: &str) -> bool {
    let lower = url.trim_start().to_ascii_lowercase();
    (lower.starts_with("https://") || lower.starts_with("http://") || lower.starts_with("mailto:"))
        && !url.chars().any(char::is_control)
}

struct Writer {
    out: String,
    /// For each open link, whether it was written as `<a>` (and so needs
    /// its `</a>`).
    links: Vec<bool>,
    /// An image being read: its URL, and its alt text so far.
    image: Option<(String, String)>,
    /// Whether the table's cells are its head's.
    table_head: bool,
}

impl Writer {
    fn push(&mut self, s: &str) {
        self.out.push_str(s);
    }

    fn text(&mut self, t: &str) {
        if let Some((_, alt)) = &mut self.image {
            alt.push_str(t);
        } else {
            let e = escape(t);
            self.out.push_str(&e);
        }
    }

    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => self.text(&t),
            Event::Code(t) => {
                self.push("<code>");
                self.text(&t);
                self.push("</code>");
            }
            // Raw HTML is shown as what it is: text.
            Event::Html(t) | Event::InlineHtml(t) => self.text(&t),
            Event::InlineMath(t) | Event::DisplayMath(t) => self.text(&t),
            Event::FootnoteReference(t) => self.text(&format!("[^{t}]")),
            Event::SoftBreak => self.push("\n"),
            Event::HardBreak => self.push("<br>\n"),
            Event::Rule => self.push("<hr>\n"),
            Event::TaskListMarker(done) => self.push(if done { "[x] " } else { "[ ] " }),
        }
    }

    fn start(&mut self, tag: Tag<'_>) {
        match tag {
            Tag::Paragraph => self.push("<p>"),
            Tag::Heading { level, .. } => {
                let n = heading(level);
                self.push(&format!("<h{n}>"));
            }
            Tag::BlockQuote(_) => self.push("<blockquote>\n"),
            Tag::CodeBlock(kind) => match kind {
                CodeBlockKind::Fenced(lang) if !lang.is_empty() => {
                    let lang = lang.split_whitespace().next().unwrap_or_default();
                    self.push(&format!("<pre><code class=\"language-{}\">", escape(lang)));
                }
                _ => self.push("<pre><code>"),
            },
            Tag::HtmlBlock => {}
            Tag::List(Some(1)) => self.push("<ol>\n"),
            Tag::List(Some(n)) => self.push(&format!("<ol start=\"{n}\">\n")),
            Tag::List(None) => self.push("<ul>\n"),
            Tag::Item => self.push("<li>"),
            Tag::Table(_) => self.push("<table>"),
            Tag::TableHead => {
                self.table_head = true;
                self.push("<thead><tr>");
            }
            Tag::TableRow => self.push("<tr>"),
            Tag::TableCell => self.push(if self.table_head { "<th>" } else { "<td>" }),
            Tag::Emphasis => self.push("<em>"),
            Tag::Strong => self.push("<strong>"),
            Tag::Strikethrough => self.push("<del>"),
            Tag::Superscript => self.push("<sup>"),
            Tag::Subscript => self.push("<sub>"),
            Tag::Link {
                dest_url, title, ..
            } => {
                let keep = safe_url(&dest_url);
                if keep {
                    self.push(&format!("<a href=\"{}\"", escape(dest_url.trim())));
                    if !title.is_empty() {
                        self.push(&format!(" title=\"{}\"", escape(&title)));
                    }
                    self.push(" rel=\"noopener noreferrer nofollow\">");
                }
                self.links.push(keep);
            }
            Tag::Image { dest_url, .. } => self.image = Some((dest_url.to_string(), String::new())),
            Tag::FootnoteDefinition(_)
            | Tag::DefinitionList
            | Tag::DefinitionListTitle
            | Tag::DefinitionListDefinition
            | Tag::MetadataBlock(_) => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.push("</p>\n"),
            TagEnd::Heading(level) => {
                let n = heading(level);
                self.push(&format!("</h{n}>\n"));
            }
            TagEnd::BlockQuote(_) => self.push("</blockquote>\n"),
            TagEnd::CodeBlock => self.push("</code></pre>\n"),
            TagEnd::List(true) => self.push("</ol>\n"),
            TagEnd::List(false) => self.push("</ul>\n"),
            TagEnd::Item => self.push("</li>\n"),
            TagEnd::Table => self.push("</tbody></table>\n"),
            TagEnd::TableHead => {
                self.table_head = false;
                self.push("</tr></thead><tbody>");
            }
            TagEnd::TableRow => self.push("</tr>"),
            TagEnd::TableCell => self.push(if self.table_head { "</th>" } else { "</td>" }),
            TagEnd::Emphasis => self.push("</em>"),
            TagEnd::Strong => self.push("</strong>"),
            TagEnd::Strikethrough => self.push("</del>"),
            TagEnd::Superscript => self.push("</sup>"),
            TagEnd::Subscript => self.push("</sub>"),
            TagEnd::Link => {
                let opened = self.links.pop() == Some(true);
                self.push(if opened { "</a>" } else { "" });
            }
            TagEnd::Image => {
                if let Some((url, alt)) = self.image.take() {
                    let alt = if alt.is_empty() {
                        "image".to_owned()
                    } else {
                        alt
                    };
                    if safe_url(&url) {
                        self.push(&format!(
                            "<a href=\"{}\" rel=\"noopener noreferrer nofollow\">{}</a>",
                            escape(url.trim()),
                            escape(&alt)
                        ));
                    } else {
                        self.text(&alt);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A heading's level on the page: one down, at most `h6`.
fn heading(level: HeadingLevel) -> u8 {
    (level as u8 + 1).min(6)
}

#[cfg(test)]
mod tests {
    use super::to_html;

    #[test]
    fn markdown_renders() {
        let html = to_html(
            "# Title\n\nSome **bold** and `code`.\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```sh\necho hi\n```\n",
        );
        assert!(html.contains("<h2>Title</h2>"), "{html}");
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(html.contains("<code>code</code>"), "{html}");
        assert!(html.contains("<li>one</li>"), "{html}");
        assert!(
            html.contains("<th>a</th>") && html.contains("<td>2</td>"),
            "{html}"
        );
        assert!(
            html.contains("<pre><code class=\"language-sh\">echo hi\n</code></pre>"),
            "{html}"
        );
    }

    #[test]
    fn nothing_active_gets_through() {
        let hostile = "<script>alert(1)</script>\n\n\
            Inline <img src=x onerror=alert(1)> html.\n\n\
            [js](javascript:alert(1)) [JS](JaVaScRiPt:alert(1)) [data](data:text/html,<script>x</script>) \
            [ok](https://example.com/a?b=\"c\") ![pic](javascript:alert(1)) ![logo](https://example.com/l.png)\n\n\
            <a href=\"javascript:alert(1)\">raw</a>\n\n\
            [x](https://e.test \"t\\\" onmouseover=\\\"alert(1)\")\n";
        let html = to_html(hostile);
        for bad in [
            "<script",
            "<img",
            "href=\"javascript",
            "href=\"JaVa",
            "href=\"data:",
            "<a href=\"javascript",
            "\" onmouseover=\"",
        ] {
            assert!(!html.contains(bad), "{bad:?} in {html}");
        }
        assert!(
            html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{html}"
        );
        assert!(
            html.contains("<a href=\"https://example.com/a?b=%22c%22\" rel=\"noopener noreferrer nofollow\">ok</a>")
                || html.contains("<a href=\"https://example.com/a?b=&quot;c&quot;\" rel=\"noopener noreferrer nofollow\">ok</a>"),
            "{html}"
        );
        assert!(html.contains(">logo</a>"), "an image is a link: {html}");
        assert!(
            html.contains("js") && html.contains("pic"),
            "the words stay: {html}"
        );
    }

    #[test]
    fn deep_nesting_is_linear() {
        let deep = ">".repeat(50_000) + " x\n";
        let html = to_html(&deep);
        assert!(html.len() < 2_000_000, "{}", html.len());
        let list = "- ".repeat(20_000) + "x\n";
        assert!(to_html(&list).len() < 2_000_000);
    }
}
