//! Kyverno's validate patterns: an object matches a pattern when every
//! field the pattern names is there and matches, with Kyverno's anchors
//! (`(key)` conditional, `<(key)` global, `=(key)` equality, `X(key)`
//! negation, `^(key)` existence, `+(key)` ignored) and its value syntax
//! (`*` and `?` wildcards, `!` not, `|` or, `&` and, `>`, `>=`, `<`, `<=`
//! and `a-b` ranges on numbers and Kubernetes quantities).

use serde_json::{Map, Value};

/// What a pattern said of a value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Outcome {
    /// It matches.
    Pass,
    /// It does not, at this path.
    Fail(String),
    /// A conditional anchor did not hold: the nearest list element (or
    /// the rule, at the top) is not checked.
    Skip,
    /// A global anchor did not hold: the rule is not checked.
    GlobalSkip,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Anchor {
    Plain,
    Conditional,
    Global,
    Equality,
    Negation,
    Existence,
    Add,
}

fn anchor(key: &str) -> (Anchor, &str) {
    let inner = |prefix: &str| key.strip_prefix(prefix).and_then(|k| k.strip_suffix(')'));
    for (prefix, a) in [
        ("<(", Anchor::Global),
        ("=(", Anchor::Equality),
        ("X(", Anchor::Negation),
        ("^(", Anchor::Existence),
        ("+(", Anchor::Add),
        ("(", Anchor::Conditional),
    ] {
        if let Some(k) = inner(prefix) {
            return (a, k);
        }
    }
    (Anchor::Plain, key)
}

/// Whether `resource` (at `path`) matches `pattern`.
pub(super) fn check(resource: &Value, pattern: &Value, path: &str) -> Outcome {
    match (pattern, resource) {
        (Value::Object(p), Value::Object(r)) => check_map(r, p, path),
        (Value::Object(_), _) => Outcome::Fail(format!("{path}: expected an object")),
        (Value::Array(p), Value::Array(r)) => check_list(r, p, path),
        (Value::Array(_), _) => Outcome::Fail(format!("{path}: expected a list")),
        (p, r) => {
            if scalar(r, p) {
                Outcome::Pass
            } else {
                Outcome::Fail(format!("{path}: {} does not match {}", show(r), show(p)))
            }
        }
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        other => other.to_string(),
    }
}

fn check_map(r: &Map<String, Value>, p: &Map<String, Value>, path: &str) -> Outcome {
    // Conditions first: when one does not hold, nothing else here is checked.
    for (key, pv) in p {
        let (a, k) = anchor(key);
        if !matches!(a, Anchor::Conditional | Anchor::Global) {
            continue;
        }
        let skip = if a == Anchor::Global {
            Outcome::GlobalSkip
        } else {
            Outcome::Skip
        };
        let Some(rv) = r.get(k) else { return skip };
        match check(rv, pv, &format!("{path}{k}/")) {
            Outcome::Pass => {}
            Outcome::GlobalSkip => return Outcome::GlobalSkip,
            _ => return skip,
        }
    }
    for (key, pv) in p {
        let (a, k) = anchor(key);
        let at = format!("{path}{k}/");
        let got = r.get(k);
        let outcome = match (a, got) {
            (Anchor::Conditional | Anchor::Global | Anchor::Add, _) => Outcome::Pass,
            (Anchor::Negation, Some(_)) => Outcome::Fail(format!("{at}: must not be set")),
            (Anchor::Negation, None) | (Anchor::Equality, None) => Outcome::Pass,
            (Anchor::Equality | Anchor::Plain, Some(rv)) => check(rv, pv, &at),
            (Anchor::Plain, None) => Outcome::Fail(format!("{at}: is missing")),
            (Anchor::Existence, got) => {
                let elem = match pv {
                    Value::Array(ps) => ps.first().cloned().unwrap_or(Value::Null),
                    other => other.clone(),
                };
                let any = got.and_then(Value::as_array).is_some_and(|items| {
                    items
                        .iter()
                        .enumerate()
                        .any(|(i, x)| check(x, &elem, &format!("{at}{i}/")) == Outcome::Pass)
                });
                if any {
                    Outcome::Pass
                } else {
                    Outcome::Fail(format!("{at}: no element matches"))
                }
            }
        };
        if outcome != Outcome::Pass {
            return outcome;
        }
    }
    Outcome::Pass
}

fn check_list(r: &[Value], p: &[Value], path: &str) -> Outcome {
    match p {
        [] => Outcome::Pass,
        [one] => {
            for (i, x) in r.iter().enumerate() {
                match check(x, one, &format!("{path}{i}/")) {
                    Outcome::Fail(m) => return Outcome::Fail(m),
                    Outcome::GlobalSkip => return Outcome::GlobalSkip,
                    // A conditional anchor left this element out.
                    Outcome::Pass | Outcome::Skip => {}
                }
            }
            Outcome::Pass
        }
        many => {
            if r.len() < many.len() {
                return Outcome::Fail(format!("{path}: expected {} elements", many.len()));
            }
            for (i, (x, pi)) in r.iter().zip(many).enumerate() {
                match check(x, pi, &format!("{path}{i}/")) {
                    Outcome::Pass | Outcome::Skip => {}
                    other => return other,
                }
            }
            Outcome::Pass
        }
    }
}

/// A scalar value's text, as a pattern compares it.
fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", f as i64),
            _ => n.to_string(),
        }),
        Value::Bool(b) => Some(b.to_string()),
        Value::Null => Some(String::new()),
        _ => None,
    }
}

fn scalar(r: &Value, p: &Value) -> bool {
    match p {
        Value::String(s) => text(r).is_some_and(|t| string_pattern(&t, s)),
        Value::Number(n) => match (r, n.as_f64()) {
            (Value::Number(x), Some(y)) => x.as_f64() == Some(y),
            (Value::String(s), Some(y)) => quantity(s) == Some(y),
            _ => false,
        },
        Value::Bool(b) => r == &Value::Bool(*b),
        Value::Null => r.is_null(),
        _ => false,
    }
}

/// `a|b` any, `a&b` all, then each atom.
pub(super) fn string_pattern(value: &str, pattern: &str) -> bool {
    pattern
        .split('|')
        .any(|alt| alt.split('&').all(|atom| atom_matches(value, atom.trim())))
}

fn atom_matches(value: &str, atom: &str) -> bool {
    if let Some(rest) = atom.strip_prefix('!') {
        return !atom_matches(value, rest.trim());
    }
    for op in [">=", "<=", ">", "<"] {
        if let Some(rest) = atom.strip_prefix(op) {
            let (Some(v), Some(w)) = (quantity(value), quantity(rest.trim())) else {
                return false;
            };
            return match op {
                ">=" => v >= w,
                "<=" => v <= w,
                ">" => v > w,
                _ => v < w,
            };
        }
    }
    // A range of numbers or quantities: `1-10`, `100Mi-1Gi`.
    if let Some((lo, hi)) = atom.split_once('-')
        && let (Some(lo), Some(hi)) = (quantity(lo), quantity(hi))
    {
        return quantity(value).is_some_and(|v| lo <= v && v <= hi);
    }
    wildcard(value, atom)
        || matches!((quantity(value), quantity(atom)), (Some(a), Some(b)) if a == b)
}

/// `*` any run of characters, `?` one.
pub(super) fn wildcard(value: &str, pattern: &str) -> bool {
    let (v, p): (Vec<char>, Vec<char>) = (value.chars().collect(), pattern.chars().collect());
    let (mut i, mut j) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while i < v.len() {
        if j < p.len() && (p[j] == '?' || p[j] == v[i]) {
            i += 1;
            j += 1;
        } else if j < p.len() && p[j] == '*' {
            star = Some(j);
            mark = i;
            j += 1;
        } else if let Some(s) = star {
            j = s + 1;
            mark += 1;
            i = mark;
        } else {
            return false;
        }
    }
    p[j..].iter().all(|c| *c == '*')
}

/// A number or a Kubernetes quantity (`500m`, `1Gi`, `2k`), as a number.
pub(super) fn quantity(text: &str) -> Option<f64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || matches!(c, '.' | '-' | '+')))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let n: f64 = num.parse().ok()?;
    let k: f64 = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        _ => return None,
    };
    Some(n * k)
}
