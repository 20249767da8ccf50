//! Masterminds/semver v3 as sprig's `semver` and `semverCompare` use it:
//! lenient versions (`v1.2`), and constraints with `=`, `!=`, `>`, `>=`,
//! `<`, `<=`, `~`, `^`, wildcards, hyphen ranges, `,` (and) and `||` (or).

use std::cmp::Ordering;
use std::collections::BTreeMap;

use crate::value::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
struct Version {
    major: u64,
    minor: u64,
    patch: u64,
    pre: String,
    meta: String,
}

fn parse(v: &str) -> Result<Version, String> {
    let invalid = || "Invalid Semantic Version".to_string();
    let t = v.strip_prefix('v').unwrap_or(v);
    let (t, meta) = t.split_once('+').map_or((t, ""), |(a, b)| (a, b));
    let (t, pre) = t.split_once('-').map_or((t, ""), |(a, b)| (a, b));
    let nums: Vec<&str> = t.split('.').collect();
    if nums.is_empty()
        || nums.len() > 3
        || nums
            .iter()
            .any(|n| n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()))
    {
        return Err(invalid());
    }
    let n = |i: usize| -> Result<u64, String> {
        nums.get(i)
            .map_or(Ok(0), |x| x.parse().map_err(|_| invalid()))
    };
    let ok_ident = |s: &str| {
        s.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
    };
    if (!pre.is_empty() && !ok_ident(pre)) || (!meta.is_empty() && !ok_ident(meta)) {
        return Err(invalid());
    }
    Ok(Version {
        major: n(0)?,
        minor: n(1)?,
        patch: n(2)?,
        pre: pre.into(),
        meta: meta.into(),
    })
}

fn cmp_pre(a: &str, b: &str) -> Ordering {
    match (a.is_empty(), b.is_empty()) {
        (true, true) => return Ordering::Equal,
        (true, false) => return Ordering::Greater,
        (false, true) => return Ordering::Less,
        _ => {}
    }
    let (xs, ys): (Vec<&str>, Vec<&str>) = (a.split('.').collect(), b.split('.').collect());
    for (x, y) in xs.iter().zip(ys.iter()) {
        let o = match (x.parse::<u64>(), y.parse::<u64>()) {
            (Ok(p), Ok(q)) => p.cmp(&q),
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            _ => x.cmp(y),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    xs.len().cmp(&ys.len())
}

fn cmp(a: &Version, b: &Version) -> Ordering {
    (a.major, a.minor, a.patch)
        .cmp(&(b.major, b.minor, b.patch))
        .then_with(|| cmp_pre(&a.pre, &b.pre))
}

/// A constraint's version, where `x`/`*` or a missing part is a wildcard.
struct Partial {
    v: Version,
    /// How many of major, minor, patch were given (not wildcards).
    given: usize,
}

fn partial(t: &str) -> Result<Partial, String> {
    let bad = || format!("improper constraint: {t}");
    let t = t.strip_prefix('v').unwrap_or(t);
    if t.is_empty() || matches!(t, "*" | "x" | "X") {
        return Ok(Partial {
            v: parse("0.0.0").map_err(|_| bad())?,
            given: 0,
        });
    }
    let (core, rest) = match t.find(['-', '+']) {
        Some(i) => (&t[..i], &t[i..]),
        None => (t, ""),
    };
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() > 3 {
        return Err(bad());
    }
    let mut given = 0;
    let mut nums = [0u64; 3];
    for (i, p) in parts.iter().enumerate() {
        if matches!(*p, "x" | "X" | "*") {
            break;
        }
        nums[i] = p.parse().map_err(|_| bad())?;
        given = i + 1;
    }
    let text = format!("{}.{}.{}{rest}", nums[0], nums[1], nums[2]);
    Ok(Partial {
        v: parse(&text).map_err(|_| bad())?,
        given,
    })
}

fn bump(v: &Version, at: usize) -> Version {
    let mut n = Version {
        major: v.major,
        minor: v.minor,
        patch: v.patch,
        pre: String::new(),
        meta: String::new(),
    };
    match at {
        0 => {
            n.major = n.major.wrapping_add(1);
            n.minor = 0;
            n.patch = 0;
        }
        1 => {
            n.minor = n.minor.wrapping_add(1);
            n.patch = 0;
        }
        _ => {
            n.patch = n.patch.wrapping_add(1);
        }
    }
    n
}

/// Whether `v` satisfies one comparison `op p`.
fn check_one(v: &Version, op: &str, p: &Partial) -> bool {
    // A pre-release only matches a constraint that names a pre-release.
    if !v.pre.is_empty() && p.v.pre.is_empty() {
        return false;
    }
    let c = cmp(v, &p.v);
    let lower_only = |v: &Version| cmp(v, &p.v) != Ordering::Less;
    match op {
        "" | "=" => {
            if p.given == 3 {
                c == Ordering::Equal
            } else if p.given == 0 {
                true
            } else {
                lower_only(v) && cmp(v, &bump(&p.v, p.given - 1)) == Ordering::Less
            }
        }
        "!=" => {
            if p.given == 3 {
                c != Ordering::Equal
            } else if p.given == 0 {
                false
            } else {
                !(lower_only(v) && cmp(v, &bump(&p.v, p.given - 1)) == Ordering::Less)
            }
        }
        ">" => {
            if p.given == 3 {
                c == Ordering::Greater
            } else if p.given == 0 {
                false
            } else {
                cmp(v, &bump(&p.v, p.given - 1)) != Ordering::Less
            }
        }
        ">=" | "=>" => c != Ordering::Less,
        "<" => c == Ordering::Less,
        "<=" | "=<" => {
            if p.given == 3 || p.given == 0 {
                c != Ordering::Greater || p.given == 0
            } else {
                cmp(v, &bump(&p.v, p.given - 1)) == Ordering::Less
            }
        }
        "~" | "~>" => {
            let upper = if p.given <= 1 {
                bump(&p.v, 0)
            } else {
                bump(&p.v, 1)
            };
            lower_only(v) && cmp(v, &upper) == Ordering::Less
        }
        "^" => {
            let upper = if p.v.major > 0 || p.given <= 1 {
                bump(&p.v, 0)
            } else if p.v.minor > 0 || p.given == 2 {
                bump(&p.v, 1)
            } else {
                bump(&p.v, 2)
            };
            lower_only(v) && cmp(v, &upper) == Ordering::Less
        }
        _ => false,
    }
}

fn split_op(t: &str) -> (&str, &str) {
    for op in ["!=", ">=", "=>", "<=", "=<", "~>", ">", "<", "=", "~", "^"] {
        if let Some(rest) = t.strip_prefix(op) {
            return (op, rest.trim());
        }
    }
    ("", t)
}

/// sprig's `semverCompare CONSTRAINT VERSION`.
pub(super) fn compare(constraint: &str, version: &str) -> Result<bool, String> {
    let mut groups: Vec<Vec<(String, Partial)>> = Vec::new();
    for group in constraint.split("||") {
        let g = group.trim();
        let mut list = Vec::new();
        // Hyphen ranges: "1.2 - 1.4.5".
        if let Some((lo, hi)) = g.split_once(" - ") {
            list.push((">=".into(), partial(lo.trim())?));
            list.push(("<=".into(), partial(hi.trim())?));
            groups.push(list);
            continue;
        }
        let g = g.replace(',', " ");
        let toks: Vec<&str> = g.split_whitespace().collect();
        let mut i = 0;
        while i < toks.len() {
            let mut t = toks[i].to_string();
            // "> 1.0": an operator on its own, then the version.
            if matches!(
                t.as_str(),
                "!=" | ">=" | "=>" | "<=" | "=<" | "~>" | ">" | "<" | "=" | "~" | "^"
            ) && i + 1 < toks.len()
            {
                t.push_str(toks[i + 1]);
                i += 1;
            }
            let (op, rest) = split_op(&t);
            list.push((op.to_string(), partial(rest)?));
            i += 1;
        }
        if list.is_empty() {
            return Err(format!("improper constraint: {constraint}"));
        }
        groups.push(list);
    }
    let v = parse(version)?;
    Ok(groups
        .iter()
        .any(|g| g.iter().all(|(op, p)| check_one(&v, op, p))))
}

/// sprig's `semver`: the version's parts, as a map.
pub(super) fn parse_value(t: &str) -> Result<Value, String> {
    let v = parse(t)?;
    let mut m = BTreeMap::new();
    m.insert(
        "Major".into(),
        Value::Int(v.major as i64, crate::value::IntType::Int64),
    );
    m.insert(
        "Minor".into(),
        Value::Int(v.minor as i64, crate::value::IntType::Int64),
    );
    m.insert(
        "Patch".into(),
        Value::Int(v.patch as i64, crate::value::IntType::Int64),
    );
    m.insert("Prerelease".into(), Value::from(v.pre.as_str()));
    m.insert("Metadata".into(), Value::from(v.meta.as_str()));
    m.insert("Original".into(), Value::from(t));
    Ok(Value::map(m))
}
