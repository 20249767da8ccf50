//! Hiding a job's secrets in what it writes: every value, in every form one
//! template function away from it, wherever it stands in a line, and when
//! a line break splits it.
//!
//! A secret printed as `{{ .nuon.secrets.x | b64enc }}`, `upper`, `urlquery`
//! or `toJson` is no less a secret: [`forms`] lists what such a value looks
//! like (its lines; base64 in the standard and URL alphabets at each of the
//! three alignments it can have inside a longer encoded text; hex; URL and
//! JSON escaping), and a [`Redactor`] finds them all in one pass (an
//! Aho-Corasick automaton, ASCII case ignored, so the upper- and lower-case
//! forms are found too). The lines of a log are searched as one text with
//! their breaks taken out, so a value a `wrap` cut into pieces is found and
//! each piece is masked.
//!
//! Pure: the runner's log spool and the control plane's views call it.

use std::borrow::Cow;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, AhoCorasickKind, MatchKind};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};

/// What a hidden value is replaced with.
pub const MASK: &str = "***";

/// The shortest derived form that is searched for: shorter ones would hide
/// ordinary text (the value itself is searched for whatever its length; the
/// control plane refuses secrets shorter than
/// [`MIN_SECRET_CHARS`](crate::wire::MIN_SECRET_CHARS)).
const MIN_FORM_CHARS: usize = 4;

/// Every form of `value` a log may show it in: each of its lines as they
/// are, and, of the whole value and of each line, base64 (standard and URL
/// alphabets, each of the three alignments), hex, percent-encoding (with
/// `%20` and with `+` for spaces) and JSON string escaping. Case is left to
/// the search (it ignores ASCII case, which covers upper-case hex and
/// `upper`/`lower`).
pub fn forms(value: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let lines: Vec<&str> = value
        .split('\n')
        .map(|l| l.trim_end_matches('\r'))
        .filter(|l| !l.is_empty())
        .collect();
    out.extend(lines.iter().map(|l| (*l).to_owned()));
    let mut encoded = |text: &str| {
        let bytes = text.as_bytes();
        for align in 0..3 {
            for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
                out.push(base64_inner(engine, bytes, align));
            }
        }
        out.push(hex::encode(bytes));
        out.push(percent(text, false));
        out.push(percent(text, true));
        if let Ok(json) = serde_json::to_string(text) {
            out.push(json[1..json.len() - 1].to_owned());
        }
    };
    if lines.len() > 1 || lines.first().is_some_and(|l| *l != value) {
        encoded(value);
    }
    for l in &lines {
        encoded(l);
    }
    let plain: std::collections::BTreeSet<&str> = lines.iter().copied().collect();
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|f| {
        (plain.contains(f.as_str()) || f.chars().count() >= MIN_FORM_CHARS)
            && seen.insert(f.to_ascii_lowercase())
    });
    out
}

/// The base64 characters that depend on `bytes` alone when they stand
/// `align` bytes into a longer encoded text: those the bytes before and
/// after do not touch.
fn base64_inner(
    engine: &base64::engine::general_purpose::GeneralPurpose,
    bytes: &[u8],
    align: usize,
) -> String {
    let mut padded = vec![0u8; align];
    padded.extend_from_slice(bytes);
    let text = engine.encode(&padded);
    let from = (8 * align).div_ceil(6);
    let to = (8 * (align + bytes.len())) / 6;
    text.get(from..to.min(text.len())).unwrap_or("").to_owned()
}

/// Percent-encoding as `urlquery` and URL builders write it: everything but
/// the unreserved characters, a space as `+` when `plus`.
fn percent(text: &str, plus: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(b as char)
            }
            b' ' if plus => out.push('+'),
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Finds and masks the forms of a set of values.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    automaton: Option<AhoCorasick>,
    /// In front of the automaton when every form is long enough.
    sampled: Option<Sampled>,
    mask: &'static str,
}

impl Redactor {
    /// A redactor of every form ([`forms`]) of each of `values`.
    pub fn new<S: AsRef<str>>(values: &[S]) -> Self {
        let mut patterns: Vec<String> = values.iter().flat_map(|v| forms(v.as_ref())).collect();
        // Longest first: with leftmost-longest matching a value that
        // contains another is masked whole either way; this only keeps
        // the list in a stable order.
        patterns.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        patterns.dedup();
        if patterns.is_empty() {
            return Redactor {
                automaton: None,
                sampled: None,
                mask: MASK,
            };
        }
        let sampled = Sampled::new(&patterns);
        // A full DFA: one table lookup a byte. Ignoring case and with
        // hundreds of patterns no prefilter applies, and the default
        // (an NFA for this many) searched 211 MB in 0.5 s.
        let automaton = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .ascii_case_insensitive(true)
            .kind(Some(AhoCorasickKind::DFA))
            .build(&patterns)
            .ok();
        Redactor {
            automaton,
            sampled,
            mask: MASK,
        }
    }

    /// The same, replacing values with `mask` instead of [`MASK`].
    pub fn masking_with(self, mask: &'static str) -> Self {
        Redactor { mask, ..self }
    }

    /// Whether there is nothing to hide.
    pub fn is_empty(&self) -> bool {
        self.automaton.is_none()
    }

    /// Whether `head` (the start of a line) followed by `block` (lines,
    /// each ending in `\n`) shows a value, whole or split across the
    /// line breaks.
    pub fn finds_in_block(&self, head: &str, block: &[u8]) -> bool {
        let Some(ac) = &self.automaton else {
            return false;
        };
        let mut joined = Vec::with_capacity(head.len() + block.len());
        joined.extend_from_slice(head.as_bytes());
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', block) {
            joined.extend_from_slice(&block[start..end]);
            start = end + 1;
        }
        joined.extend_from_slice(&block[start..]);
        match &self.sampled {
            Some(sampled) => sampled.finds(ac, &joined),
            None => ac.is_match(&joined),
        }
    }

    /// Masks every value in `text`, a line break splitting one included
    /// (each piece is masked; the breaks stay).
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if self.automaton.is_none() {
            return Cow::Borrowed(text);
        }
        let mut lines: Vec<Cow<'_, str>> = text.split('\n').map(Cow::Borrowed).collect();
        if !self.redact_lines(&mut lines) {
            return Cow::Borrowed(text);
        }
        Cow::Owned(lines.join("\n"))
    }

    /// Masks every value in `lines` (one log line each, without its
    /// newline): those within a line, and those the breaks between
    /// consecutive lines split (each piece is masked). Says whether any
    /// line changed.
    pub fn redact_lines(&self, lines: &mut [Cow<'_, str>]) -> bool {
        let Some(ac) = &self.automaton else {
            return false;
        };
        let mut joined = String::new();
        let mut starts = Vec::with_capacity(lines.len() + 1);
        for l in lines.iter() {
            starts.push(joined.len());
            joined.push_str(l);
        }
        starts.push(joined.len());
        // The ranges to mask, per line.
        let mut masks: Vec<Vec<(usize, usize)>> = vec![Vec::new(); lines.len()];
        let mut any = false;
        for m in ac.find_iter(joined.as_bytes()) {
            let (s, e) = (m.start(), m.end());
            // The first line the match touches: the last start at or
            // before `s` of a non-empty line.
            let mut i = starts.partition_point(|&x| x <= s).saturating_sub(1);
            while i < lines.len() && starts[i] < e {
                let (ls, le) = (starts[i], starts[i + 1]);
                let (a, b) = (s.max(ls), e.min(le));
                if a < b {
                    masks[i].push((a - ls, b - ls));
                    any = true;
                }
                i += 1;
            }
        }
        if !any {
            return false;
        }
        for (line, ranges) in lines.iter_mut().zip(masks) {
            if ranges.is_empty() {
                continue;
            }
            let mut out = String::with_capacity(line.len());
            let mut at = 0;
            for (a, b) in ranges {
                out.push_str(&line[at..a]);
                out.push_str(self.mask);
                at = b;
            }
            out.push_str(&line[at..]);
            *line = Cow::Owned(out);
        }
        true
    }
}

/// The length of the pieces [`Sampled`] looks up.
const GRAM: usize = 4;
/// Bits of the hash of a piece: a table of 2^20 bits (128 KiB), so the
/// pieces of a few hundred forms set about one bit in a hundred.
const GRAM_BITS: u32 = 20;
/// The shortest form for which sampling pays: the text is looked at every
/// `shortest - GRAM + 1` bytes.
const SAMPLED_FROM: usize = 8;

/// A filter that passes over most of a text without the automaton: every
/// form is at least `shortest` bytes long, so any place a form stands in a
/// text covers a position that is a multiple of `step` (`shortest - GRAM +
/// 1`) with the four bytes from there inside the form. Only the four bytes
/// at those positions are looked up (ASCII case folded, as the automaton
/// folds it) among the pieces of every form; where one is found, the
/// automaton searches the stretch around it that a form through it can
/// span. Text with no form in it is looked at a `step`th of its bytes.
#[derive(Debug, Clone)]
struct Sampled {
    /// One bit for each hash of a [`GRAM`]-byte piece of any form.
    grams: Box<[u64]>,
    step: usize,
    /// The longest form, in bytes.
    longest: usize,
}

impl Sampled {
    /// `None` when a form is shorter than [`SAMPLED_FROM`] bytes.
    fn new(patterns: &[String]) -> Option<Sampled> {
        let shortest = patterns.iter().map(String::len).min()?;
        if shortest < SAMPLED_FROM {
            return None;
        }
        let mut grams = vec![0u64; 1 << (GRAM_BITS - 6)].into_boxed_slice();
        for p in patterns {
            for piece in p.as_bytes().windows(GRAM) {
                let h = Self::hash(piece);
                grams[h >> 6] |= 1 << (h & 63);
            }
        }
        Some(Sampled {
            grams,
            step: shortest - GRAM + 1,
            longest: patterns.iter().map(String::len).max().unwrap_or(shortest),
        })
    }

    fn hash(piece: &[u8]) -> usize {
        let folded = u32::from_le_bytes([
            piece[0].to_ascii_lowercase(),
            piece[1].to_ascii_lowercase(),
            piece[2].to_ascii_lowercase(),
            piece[3].to_ascii_lowercase(),
        ]);
        (folded.wrapping_mul(0x9E37_79B1) >> (32 - GRAM_BITS)) as usize
    }

    /// Whether `text` shows a form, as `ac.is_match(text)` says.
    fn finds(&self, ac: &AhoCorasick, text: &[u8]) -> bool {
        // Where the pieces found are so many that searching around each
        // would cost more than one search of it all (a text made of forms'
        // alphabets), the rest is searched whole.
        let budget = text.len();
        let mut searched = 0;
        let mut at = 0;
        while at + GRAM <= text.len() {
            let h = Self::hash(&text[at..at + GRAM]);
            if self.grams[h >> 6] & (1 << (h & 63)) != 0 {
                // A form through `at..at + GRAM` starts no earlier than
                // `at + GRAM - longest` and ends no later than `at + longest`.
                let from = (at + GRAM).saturating_sub(self.longest);
                let to = (at + self.longest).min(text.len());
                if ac.is_match(&text[from..to]) {
                    return true;
                }
                searched += to - from;
                if searched > budget {
                    return ac.is_match(&text[from..]);
                }
            }
            at += self.step;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shows(r: &Redactor, text: &str) -> String {
        r.redact(text).into_owned()
    }

    #[test]
    fn each_form_one_template_function_away_is_masked() {
        let secret = "Sup3r-s3cret value/42";
        let r = Redactor::new(&[secret]);
        let b64 = base64::engine::general_purpose::STANDARD;
        let url = base64::engine::general_purpose::URL_SAFE;
        let cases = [
            secret.to_owned(),
            format!("K{secret}Z"),
            secret.to_uppercase(),
            secret.to_lowercase(),
            b64.encode(secret),
            url.encode(secret),
            hex::encode(secret),
            hex::encode_upper(secret),
            percent(secret, false),
            percent(secret, true),
            percent(secret, false).to_lowercase(),
            serde_json::to_string(&format!("a\"{secret}")).unwrap(),
        ];
        for shown in &cases {
            let out = shows(&r, &format!("x {shown} y"));
            assert!(out.contains(MASK), "{shown:?} was not masked: {out:?}");
            assert!(!out.contains(secret), "{out:?}");
        }
        // Base64 of the value inside a longer text, at each alignment.
        for prefix in ["", "a", "ab", "abc"] {
            for engine in [&b64, &url] {
                let enc = engine.encode(format!("{prefix}{secret}:tail"));
                let out = shows(&r, &enc);
                assert!(out.contains(MASK), "{prefix:?}: {enc} not masked: {out}");
                let (head, _) = out.split_once(MASK).unwrap();
                assert!(head.len() <= prefix.len() * 4 / 3 + 2, "{out}");
            }
        }
    }

    #[test]
    fn ordinary_text_stays_as_it_is() {
        let r = Redactor::new(&["hunter22"]);
        let text = "plan: 3 to add, 0 to change, 0 to destroy";
        assert!(matches!(r.redact(text), Cow::Borrowed(_)));
        assert!(Redactor::new::<&str>(&[]).is_empty());
        let r = Redactor::new(&["hunter22"]).masking_with("(secret)");
        assert_eq!(r.redact("pw=hunter22;"), "pw=(secret);");
        assert_eq!(Redactor::new::<&str>(&[]).redact("x"), "x");
    }

    #[test]
    fn a_value_split_across_lines_is_masked_piece_by_piece() {
        let secret = "0123456789abcdefghijKLMNOPQRST";
        let r = Redactor::new(&[secret]);
        // `wrap 10`: three lines of ten.
        let wrapped = "key:\n0123456789\nabcdefghij\nKLMNOPQRST\ndone";
        assert_eq!(shows(&r, wrapped), "key:\n***\n***\n***\ndone");
        // The base64 form wrapped at 8 columns.
        let enc = base64::engine::general_purpose::STANDARD.encode(secret);
        let cut: Vec<&str> = enc
            .as_bytes()
            .chunks(8)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        let out = shows(&r, &cut.join("\n"));
        for piece in &cut[..cut.len() - 1] {
            assert!(!out.contains(piece), "{piece} left in {out}");
        }
        assert!(r.finds_in_block("", format!("{}\n", cut.join("\n")).as_bytes()));
        assert!(r.finds_in_block(cut[0], format!("{}\n", cut[1..].join("\n")).as_bytes()));
        assert!(!r.finds_in_block("", b"nothing\nhere\n"));
    }

    #[test]
    fn a_multi_line_value_is_masked_line_by_line_and_encoded_whole() {
        let pem = "-----BEGIN KEY-----\nMIIBOgIBAAJBAKj34GkxFhD9\n-----END KEY-----\n";
        let r = Redactor::new(&[pem]);
        assert_eq!(shows(&r, "MIIBOgIBAAJBAKj34GkxFhD9"), MASK);
        let whole = base64::engine::general_purpose::STANDARD.encode(pem);
        let out = shows(&r, &whole);
        // What is left: at most the last character and the padding.
        assert!(
            out.starts_with(MASK) && out.len() <= MASK.len() + 3,
            "{out}"
        );
        let json = serde_json::to_string(pem).unwrap();
        assert_eq!(shows(&r, &json), format!("\"{MASK}\""));
    }

    /// The sampling filter says what the automaton alone says, on texts
    /// where forms stand anywhere (whole, cut by line breaks, in another
    /// case) and on texts made of their alphabets.
    #[test]
    fn the_sampling_filter_finds_what_the_automaton_finds() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        let values: Vec<String> = (0..50)
            .map(|i| format!("s3cret-{i:02}-{}", "QwErTyUiOp".repeat(2)))
            .collect();
        let r = Redactor::new(&values);
        assert!(r.sampled.is_some(), "26-byte values are sampled");
        let plain = Redactor {
            sampled: None,
            ..r.clone()
        };
        let forms: Vec<String> = values.iter().flat_map(|v| forms(v)).collect();
        let alphabet = b"ABCDEFabcdef0123456789+/=-_%\n line ";
        let (mut found, mut missed) = (0, 0);
        for round in 0..3000 {
            let len = 1 + next(600);
            let mut text: Vec<u8> = (0..len).map(|_| alphabet[next(alphabet.len())]).collect();
            if round % 2 == 0 {
                let f = forms[next(forms.len())].as_bytes();
                let at = next(text.len());
                let mut planted: Vec<u8> = f.to_vec();
                if round % 4 == 0 {
                    planted.make_ascii_uppercase();
                }
                // Sometimes a form is cut short: no longer a form.
                if round % 6 == 0 {
                    planted.truncate(f.len() - 1 - next(f.len() / 2));
                }
                text.splice(at..at, planted);
            }
            let mut block = Vec::new();
            for piece in text.chunks(1 + next(40)) {
                block.extend_from_slice(piece);
                block.push(b'\n');
            }
            let head = "head ";
            let expected = plain.finds_in_block(head, &block);
            assert_eq!(
                r.finds_in_block(head, &block),
                expected,
                "round {round}: {:?}",
                String::from_utf8_lossy(&block)
            );
            if expected { found += 1 } else { missed += 1 }
        }
        assert!(found > 1000 && missed > 1000, "{found} found, {missed} not");
        // Values too short to sample go to the automaton alone.
        assert!(Redactor::new(&["short1"]).sampled.is_none());
    }

    #[test]
    fn forms_are_not_shorter_than_the_threshold() {
        for f in forms("abcd") {
            assert!(f.len() >= MIN_FORM_CHARS, "{f:?}");
        }
        // The value itself, whatever its length.
        assert!(forms("ab").contains(&"ab".to_owned()));
    }
}
