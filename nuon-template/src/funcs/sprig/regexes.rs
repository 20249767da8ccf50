//! sprig's regular expressions (Go's RE2 syntax, as the `regex` crate
//! reads it), each call's work bounded by the pattern and the text.

use super::*;

pub(super) fn register(m: &mut HashMap<&'static str, Func>) {
    add(m, "regexMatch", STR2, None, |_, a| {
        // A pattern that does not compile matches nothing; one too slow
        // for the text is an error still.
        match compile(s(&a[0]), s(&a[1])) {
            Ok(r) => Ok(Value::Bool(r.is_match(s(&a[1])))),
            Err(e) if e.starts_with("regexp:") => Ok(Value::Bool(false)),
            Err(e) => Err(e),
        }
    });
    add(m, "mustRegexMatch", STR2, None, |_, a| {
        Ok(Value::Bool(compile(s(&a[0]), s(&a[1]))?.is_match(s(&a[1]))))
    });
    for name in ["regexFind", "mustRegexFind"] {
        add(m, name, STR2, None, |_, a| {
            text(
                compile(s(&a[0]), s(&a[1]))?
                    .find(s(&a[1]))
                    .map_or("", |x| x.as_str()),
            )
        });
    }
    for name in ["regexFindAll", "mustRegexFindAll"] {
        add(m, name, &[Ty::Str, Ty::Str, Ty::Int], None, |_, a| {
            let re = compile(s(&a[0]), s(&a[1]))?;
            let n = int_arg(&a[2]);
            if n == 0 {
                return Ok(Value::strings(Vec::new()));
            }
            let take = if n < 0 { usize::MAX } else { n as usize };
            let n = re.find_iter(s(&a[1])).take(take.min(MAX_ITEMS + 1)).count();
            made_items("regexFindAll", n)?;
            let all = re.find_iter(s(&a[1])).map(|x| x.as_str().to_string());
            Ok(Value::strings(all.take(take).collect()))
        });
    }
    for name in ["regexReplaceAll", "mustRegexReplaceAll"] {
        add(m, name, STR3, None, |_, a| {
            text(regex_replace(
                &compile(s(&a[0]), s(&a[1]))?,
                s(&a[1]),
                s(&a[2]),
                false,
            )?)
        });
    }
    for name in ["regexReplaceAllLiteral", "mustRegexReplaceAllLiteral"] {
        add(m, name, STR3, None, |_, a| {
            text(regex_replace(
                &compile(s(&a[0]), s(&a[1]))?,
                s(&a[1]),
                s(&a[2]),
                true,
            )?)
        });
    }
    for name in ["regexSplit", "mustRegexSplit"] {
        add(m, name, &[Ty::Str, Ty::Str, Ty::Int], None, |_, a| {
            let re = compile(s(&a[0]), s(&a[1]))?;
            let (t, n) = (s(&a[1]), int_arg(&a[2]));
            if n == 0 {
                return Ok(Value::strings(Vec::new()));
            }
            if !s(&a[0]).is_empty() && t.is_empty() {
                return Ok(Value::strings(vec![String::new()]));
            }
            let mut out = Vec::new();
            let (mut beg, mut end) = (0, 0);
            let take = if n < 0 { usize::MAX } else { n as usize };
            let matches: Vec<_> = re.find_iter(t).take(take.min(MAX_ITEMS + 1)).collect();
            made_items("regexSplit", matches.len())?;
            for mt in matches {
                if n > 0 && out.len() as i64 == n - 1 {
                    break;
                }
                end = mt.start();
                if mt.end() != 0 {
                    out.push(t[beg..end].to_string());
                }
                beg = mt.end();
            }
            if end != t.len() {
                out.push(t[beg..].to_string());
            }
            Ok(Value::strings(out))
        });
    }
    add(m, "regexQuoteMeta", STR, None, |_, a| {
        let mut out = String::new();
        for c in s(&a[0]).chars() {
            if "\\.+*?()|[]{}^$".contains(c) {
                out.push('\\');
            }
            out.push(c);
        }
        text(out)
    });
}

/// Go's `ReplaceAllString` (`$1`, `${name}` expanded) or
/// `ReplaceAllLiteralString`, stopped once its result is past [`MAX_MADE`].
fn regex_replace(
    re: &regex::Regex,
    src: &str,
    repl: &str,
    literal: bool,
) -> Result<String, String> {
    // Read once, not at each match: a replacement of many `$` (or `${`
    // never closed) made each match's expansion slow.
    let pieces = if literal {
        vec![Piece::Text(repl.to_owned())]
    } else {
        pieces(repl)
    };
    let mut out = String::new();
    let mut last = 0;
    // A reference to a group that is not there writes nothing, so the
    // result alone does not bound the work: each match costs its pieces.
    let per_match = pieces
        .iter()
        .filter(|p| !matches!(p, Piece::Text(_)))
        .count() as u64;
    let mut work = 0u64;
    for caps in re.captures_iter(src) {
        let Some(m) = caps.get(0) else { continue };
        work += per_match;
        if u128::from(work) > MAX_MADE {
            return Err(format!(
                "regexReplaceAll: a replacement of {per_match} group references, at each match in {} bytes, is more work than a template may do",
                src.len()
            ));
        }
        out.push_str(&src[last..m.start()]);
        for p in &pieces {
            let group = match p {
                Piece::Text(t) => {
                    out.push_str(t);
                    continue;
                }
                Piece::Index(i) => caps.get(*i),
                Piece::Name(n) => caps.name(n),
            };
            out.push_str(group.map_or("", |g| g.as_str()));
        }
        last = m.end();
        made("regexReplaceAll", out.len() as u128)?;
    }
    out.push_str(&src[last..]);
    Ok(out)
}

/// A part of a replacement: text, or a group by number or name.
#[derive(Debug, PartialEq)]
enum Piece<'a> {
    Text(String),
    Index(usize),
    Name(&'a str),
}

/// `repl` read as `regex`'s `Captures::expand` reads it (Go's `Expand`):
/// `$$` is `$`; `$name` takes the longest run of letters, digits and `_`,
/// `${name}` anything up to `}`; a name that is a number is a group's
/// index; a `$` that starts no reference is itself.
fn pieces(repl: &str) -> Vec<Piece<'_>> {
    let b = repl.as_bytes();
    // Where the next `}` is from each byte on: many `${` never closed must
    // not each look to the end.
    let mut close = vec![usize::MAX; b.len() + 1];
    for i in (0..b.len()).rev() {
        close[i] = if b[i] == b'}' { i } else { close[i + 1] };
    }
    let letter = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut out = Vec::new();
    let mut text = String::new();
    let mut i = 0;
    while i < b.len() {
        let Some(j) = b[i..].iter().position(|&c| c == b'$') else {
            text.push_str(&repl[i..]);
            break;
        };
        text.push_str(&repl[i..i + j]);
        i += j;
        if b.get(i + 1) == Some(&b'$') {
            text.push('$');
            i += 2;
            continue;
        }
        let found = if b.get(i + 1) == Some(&b'{') {
            let end = close[i + 2];
            (end != usize::MAX).then(|| (&repl[i + 2..end], end + 1))
        } else {
            let mut end = i + 1;
            while b.get(end).copied().is_some_and(letter) {
                end += 1;
            }
            (end > i + 1).then(|| (&repl[i + 1..end], end))
        };
        match found {
            None => {
                text.push('$');
                i += 1;
            }
            Some((name, end)) => {
                if !text.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut text)));
                }
                out.push(match name.parse::<usize>() {
                    Ok(n) => Piece::Index(n),
                    Err(_) => Piece::Name(name),
                });
                i = end;
            }
        }
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    out
}

/// The most work one regular expression call may be asked for: its
/// pattern's weight (about the automaton's states) times the text's bytes.
/// A pattern the fast engine gives up on runs in time proportional to
/// that (`[a-m][A-Za-z]{300}[^A-Za-z]` over 1 MiB took 13 s).
const MAX_REGEX_WORK: u64 = 64 << 20;

/// `re` compiled (kept per thread), once its work over `haystack` is
/// within [`MAX_REGEX_WORK`].
fn compile(re: &str, haystack: &str) -> Result<regex::Regex, String> {
    thread_local! {
        static CACHE: std::cell::RefCell<HashMap<String, (regex::Regex, u64)>> =
            std::cell::RefCell::new(HashMap::new());
    }
    let (compiled, weight) = match CACHE.with(|c| c.borrow().get(re).cloned()) {
        Some(hit) => hit,
        None => {
            let compiled = regex::RegexBuilder::new(re)
                .size_limit(1 << 20)
                .build()
                .map_err(|e| {
                    format!(
                        "regexp: Compile({}): {}",
                        quote(re, false),
                        e.to_string()
                            .lines()
                            .last()
                            .unwrap_or("error parsing regexp")
                    )
                })?;
            let weight = regex_syntax::parse(re).map_or(u64::MAX, |h| weight(&h));
            CACHE.with(|c| {
                let mut c = c.borrow_mut();
                if c.len() >= 256 {
                    c.clear();
                }
                c.insert(re.to_owned(), (compiled.clone(), weight));
            });
            (compiled, weight)
        }
    };
    let work = weight.saturating_mul(haystack.len() as u64);
    if work > MAX_REGEX_WORK {
        return Err(format!(
            "the pattern {} (about {weight} states) over {} bytes of text is too much work for one call: a template renders config values, not bulk data",
            quote(re, false),
            haystack.len()
        ));
    }
    Ok(compiled)
}

/// About how many states a pattern's automaton has: literals by their
/// bytes, a counted repetition by its count.
fn weight(h: &regex_syntax::hir::Hir) -> u64 {
    use regex_syntax::hir::HirKind;
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) | HirKind::Class(_) => 1,
        HirKind::Literal(l) => l.0.len() as u64,
        HirKind::Repetition(r) => {
            let times = r.max.unwrap_or(r.min.saturating_add(1)).max(1);
            weight(&r.sub).saturating_mul(u64::from(times))
        }
        HirKind::Capture(c) => weight(&c.sub),
        HirKind::Concat(hs) | HirKind::Alternation(hs) => {
            hs.iter().map(weight).fold(1, u64::saturating_add)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replacement_expands_as_the_regex_crate_expands_it() {
        let re = regex::Regex::new(r"(?P<first>a)(b)?(?P<x_1>c)").unwrap();
        let src = "zacz abc";
        for repl in [
            "",
            "$",
            "$$",
            "$$$",
            "$1",
            "$01",
            "$1a",
            "${1}a",
            "$first",
            "${first}",
            "$x_1-",
            "${x_1}",
            "${",
            "${first",
            "$}",
            "${}",
            "${nope}",
            "$nope",
            "$2",
            "$9",
            "${+1}",
            "a$ b",
            "$$first",
            "${${first}",
            "é$firsté",
            "$99999999999999999999999",
        ] {
            let want = re.replace_all(src, repl).into_owned();
            let got = regex_replace(&re, src, repl, false).unwrap();
            assert_eq!(got, want, "replacement {repl:?}");
        }
    }

    #[test]
    fn references_at_every_match_are_bounded_work() {
        let re = regex::Regex::new("a").unwrap();
        let src = "a".repeat(1_000_000);
        // 10,000 references to no group at each of a million matches.
        let repl = "S$SSSSx".repeat(10_000);
        let e = regex_replace(&re, &src, &repl, false).unwrap_err();
        assert!(e.contains("more work than a template may do"), "{e}");
        // A plain replacement at every match is fine.
        assert_eq!(
            regex_replace(&re, &src, "b", false).unwrap().len(),
            1_000_000
        );
    }

    #[test]
    fn unclosed_braces_are_text() {
        // 50,000 `${` never closed: one piece of text, found in one pass.
        let repl = "${".repeat(50_000);
        assert_eq!(pieces(&repl), [Piece::Text(repl.clone())]);
        assert_eq!(
            pieces("x${1}$$y$name"),
            [
                Piece::Text("x".into()),
                Piece::Index(1),
                Piece::Text("$y".into()),
                Piece::Name("name")
            ]
        );
    }
}
