//! sprig 3's functions, as Helm and Nuon templates use them.

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use base64::Engine as _;
use sha2::Digest as _;

use super::{Func, Ty, add};
use crate::fmt::{json, plain, quote};
use crate::value::{Elem, IntType, Value};
use crate::{parse, time};

mod dates;
mod regexes;

type R = Result<Value, String>;

const ANY: &[Ty] = &[Ty::Any];
const ANY2: &[Ty] = &[Ty::Any, Ty::Any];
const STR: &[Ty] = &[Ty::Str];
const STR2: &[Ty] = &[Ty::Str, Ty::Str];
const STR3: &[Ty] = &[Ty::Str, Ty::Str, Ty::Str];
const INT_STR: &[Ty] = &[Ty::Int, Ty::Str];

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

fn int_arg(v: &Value) -> i64 {
    match v {
        Value::Int(i, _) => *i,
        _ => 0,
    }
}

fn text(v: impl Into<String>) -> R {
    Ok(Value::from(v.into()))
}

fn i64v(i: i64) -> Value {
    Value::Int(i, IntType::Int64)
}

/// sprig's `strval`: a value as text.
/// The most one function may make: a string of this many bytes, or a
/// list of a sixteenth as many items. A function's result counts against
/// the budget only once it is made, so what it would make is checked
/// first (Go has no bound: a bomb of a template takes the process down).
const MAX_MADE: u128 = 16 << 20;

/// Refuses a result of `len` bytes past [`MAX_MADE`].
fn made(what: &str, len: u128) -> Result<(), String> {
    if len > MAX_MADE {
        return Err(format!(
            "{what} would make {len} bytes, over {} MiB: a template renders config values, not bulk data",
            MAX_MADE >> 20
        ));
    }
    Ok(())
}

/// The most items one function may make.
const MAX_ITEMS: usize = (MAX_MADE >> 4) as usize;

/// Refuses a result of `n` items past [`MAX_ITEMS`].
fn made_items(what: &str, n: usize) -> Result<(), String> {
    if n > MAX_ITEMS {
        return Err(format!(
            "{what} would make {n} items, over a million: a template renders config values, not bulk data"
        ));
    }
    Ok(())
}

pub(crate) fn strval(v: &Value) -> String {
    match v {
        Value::Str(s) => s.to_string(),
        other => plain(other),
    }
}

/// sprig's `strslice`: a list as strings (nils dropped), anything else as one.
fn strslice(v: &Value) -> Vec<String> {
    match v {
        Value::List(l, _) => l
            .iter()
            .filter(|e| !matches!(e, Value::Nil | Value::Missing))
            .map(strval)
            .collect(),
        Value::Nil | Value::Missing => Vec::new(),
        other => vec![strval(other)],
    }
}

/// sprig's `empty`: the zero value of its type.
pub(crate) fn empty(v: &Value) -> bool {
    !v.truth()
}

/// spf13/cast's `ToInt64`: errors read as 0.
pub(crate) fn to_i64(v: &Value) -> i64 {
    match v {
        Value::Int(i, _) => *i,
        Value::Float(f) => *f as i64,
        Value::Bool(b) => i64::from(*b),
        Value::Str(s) => {
            let t = trim_zero_decimal(s);
            parse::number(t)
                .ok()
                .filter(|_| !t.contains(['.', 'e', 'E', 'p', 'P', '\'']) && !t.starts_with('+'))
                .and_then(|n| n.int)
                .unwrap_or(0)
        }
        _ => 0,
    }
}

fn trim_zero_decimal(s: &str) -> &str {
    let b = s.as_bytes();
    let mut found_zero = false;
    for i in (1..=b.len()).rev() {
        match b[i - 1] {
            b'.' => {
                if found_zero {
                    return &s[..i - 1];
                }
            }
            b'0' => found_zero = true,
            _ => return s,
        }
    }
    s
}

/// spf13/cast's `ToFloat64`: errors read as 0.
pub(crate) fn to_f64(v: &Value) -> f64 {
    match v {
        Value::Int(i, _) => *i as f64,
        Value::Float(f) => *f,
        Value::Bool(b) => f64::from(u8::from(*b)),
        Value::Str(s) => go_parse_float(s).unwrap_or(0.0),
        _ => 0.0,
    }
}

fn go_parse_float(s: &str) -> Option<f64> {
    // Rust reads `inf`, `infinity` and `nan` in any case, as Go does; Go
    // reads underscores and hex floats only in literals, not here.
    let body = s.trim_start_matches(['+', '-']);
    if s.contains('_') || body.starts_with("0x") || body.starts_with("0X") {
        return None;
    }
    s.parse::<f64>().ok()
}

/// The items of a slice; the error Go's sprig gives for anything else.
fn items<'v>(v: &'v Value, what: &str) -> Result<&'v Rc<Vec<Value>>, String> {
    match v {
        Value::List(l, _) => Ok(l),
        Value::Missing | Value::Nil => {
            Err("runtime error: invalid memory address or nil pointer dereference".into())
        }
        other => Err(format!("Cannot {what} on type {}", other.kind_name())),
    }
}

/// Go's `reflect.DeepEqual` over template values.
fn deep_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Missing | Value::Nil, Value::Missing | Value::Nil) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x, tx), Value::Int(y, ty)) => x == y && tx == ty,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::Str(x), Value::Str(y)) => x == y,
        (Value::Time(x), Value::Time(y)) => x == y,
        // The same list or map is equal to itself (Go's shortcut too).
        (Value::List(x, ex), Value::List(y, ey)) => {
            ex == ey
                && (Rc::ptr_eq(x, y)
                    || x.len() == y.len() && x.iter().zip(y.iter()).all(|(a, b)| deep_equal(a, b)))
        }
        (Value::Map(x, ex), Value::Map(y, ey)) if Rc::ptr_eq(x, y) => ex == ey,
        (Value::Map(x, ex), Value::Map(y, ey)) => {
            let (x, y) = (x.borrow(), y.borrow());
            ex == ey
                && x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| deep_equal(v, w)))
        }
        _ => false,
    }
}

/// What [`deep_equal`] compares a scalar by: equal keys, equal values.
/// None for lists, maps and NaN (equal to nothing, itself included).
fn scalar_key(v: &Value) -> Option<(u8, i128, Option<Rc<str>>)> {
    Some(match v {
        Value::Missing | Value::Nil => (0, 0, None),
        Value::Bool(b) => (1, i128::from(*b), None),
        Value::Int(i, ty) => (2, i128::from(*i), Some(format!("{ty:?}").into())),
        // `0.0 == -0.0`: one key for both.
        Value::Float(f) if !f.is_nan() => (3, i128::from((f + 0.0).to_bits()), None),
        Value::Str(s) => (4, 0, Some(s.clone())),
        Value::Time(t) => (5, *t, None),
        _ => return None,
    })
}

/// A copy of `v` that shares nothing with it; refused past [`MAX_ITEMS`]
/// items (a value shared many times inside itself is small, its copy is
/// not).
fn deep_copy(v: &Value) -> R {
    fn copy(v: &Value, budget: &mut usize) -> R {
        *budget = budget
            .checked_sub(1)
            .ok_or_else(|| format!("deepCopy would make over {MAX_ITEMS} items"))?;
        Ok(match v {
            Value::List(l, e) => {
                let items = l
                    .iter()
                    .map(|x| copy(x, budget))
                    .collect::<Result<_, _>>()?;
                Value::List(Rc::new(items), *e)
            }
            Value::Map(m, e) => {
                let entries = m
                    .borrow()
                    .iter()
                    .map(|(k, x)| Ok((k.clone(), copy(x, budget)?)))
                    .collect::<Result<_, String>>()?;
                Value::Map(Rc::new(std::cell::RefCell::new(entries)), *e)
            }
            other => other.clone(),
        })
    }
    let mut budget = MAX_ITEMS;
    copy(v, &mut budget)
}

fn map_of(v: &Value) -> Result<std::cell::Ref<'_, BTreeMap<String, Value>>, String> {
    match v {
        Value::Map(m, _) => Ok(m.borrow()),
        other => Err(format!(
            "interface conversion: interface {{}} is {}, not map[string]interface {{}}",
            other.type_name()
        )),
    }
}

pub(super) fn register(m: &mut HashMap<&'static str, Func>) {
    strings(m);
    lists(m);
    dicts(m);
    numbers(m);
    encodings(m);
    regexes::register(m);
    dates::register(m);
    misc(m);
}

fn strings(m: &mut HashMap<&'static str, Func>) {
    add(m, "hello", &[], None, |_, _| text("Hello!"));
    add(m, "trim", STR, None, |_, a| {
        text(s(&a[0]).trim_matches(go_space))
    });
    add(m, "upper", STR, None, |_, a| {
        text(map_chars(s(&a[0]), true))
    });
    add(m, "lower", STR, None, |_, a| {
        text(map_chars(s(&a[0]), false))
    });
    add(m, "title", STR, None, |_, a| text(title(s(&a[0]))));
    add(m, "untitle", STR, None, |_, a| {
        let mut next = true;
        text(
            s(&a[0])
                .chars()
                .map(|c| {
                    if go_space(c) {
                        next = true;
                        c
                    } else if next {
                        next = false;
                        one(c.to_lowercase(), c)
                    } else {
                        c
                    }
                })
                .collect::<String>(),
        )
    });
    add(m, "substr", &[Ty::Int, Ty::Int, Ty::Str], None, |_, a| {
        let (start, end, t) = (int_arg(&a[0]), int_arg(&a[1]), s(&a[2]).as_bytes());
        let len = t.len() as i64;
        let (lo, hi) = if start < 0 {
            (0, end)
        } else if end < 0 || end > len {
            (start, len)
        } else {
            (start, end)
        };
        if lo < 0 || hi < lo || hi > len {
            return Err(format!(
                "runtime error: slice bounds out of range [{lo}:{hi}] with length {len}"
            ));
        }
        text(String::from_utf8_lossy(&t[lo as usize..hi as usize]).into_owned())
    });
    add(m, "repeat", INT_STR, None, |_, a| {
        let n = int_arg(&a[0]);
        if n < 0 {
            return Err("strings: negative Repeat count".into());
        }
        let t = s(&a[1]);
        made("repeat", t.len() as u128 * n as u128)?;
        text(t.repeat(n as usize))
    });
    for name in ["trimAll", "trimall"] {
        add(m, name, STR2, None, |_, a| {
            let cut: std::collections::HashSet<char> = s(&a[0]).chars().collect();
            text(s(&a[1]).trim_matches(|c| cut.contains(&c)))
        });
    }
    add(m, "trimSuffix", STR2, None, |_, a| {
        text(s(&a[1]).strip_suffix(s(&a[0])).unwrap_or(s(&a[1])))
    });
    add(m, "trimPrefix", STR2, None, |_, a| {
        text(s(&a[1]).strip_prefix(s(&a[0])).unwrap_or(s(&a[1])))
    });
    add(m, "nospace", STR, None, |_, a| {
        text(
            s(&a[0])
                .chars()
                .filter(|&c| !go_space(c))
                .collect::<String>(),
        )
    });
    add(m, "initials", STR, None, |_, a| {
        let mut out = String::new();
        let mut gap = true;
        for c in s(&a[0]).chars() {
            if go_space(c) {
                gap = true;
            } else if gap {
                out.push(c);
                gap = false;
            }
        }
        text(out)
    });
    add(m, "swapcase", STR, None, |_, a| {
        text(
            s(&a[0])
                .chars()
                .map(|c| {
                    if c.is_uppercase() {
                        one(c.to_lowercase(), c)
                    } else if c.is_lowercase() {
                        one(c.to_uppercase(), c)
                    } else {
                        c
                    }
                })
                .collect::<String>(),
        )
    });
    add(m, "snakecase", STR, None, |_, a| {
        text(case_words(s(&a[0]), '_'))
    });
    add(m, "kebabcase", STR, None, |_, a| {
        text(case_words(s(&a[0]), '-'))
    });
    add(m, "camelcase", STR, None, |_, a| text(camel(s(&a[0]))));
    add(m, "wrap", &[Ty::Int, Ty::Str], None, |_, a| {
        text(wrap(s(&a[1]), int_arg(&a[0]), "\n", false))
    });
    add(m, "wrapWith", &[Ty::Int, Ty::Str, Ty::Str], None, |_, a| {
        // At most a break after every byte.
        let (t, sep) = (s(&a[2]), s(&a[1]));
        made("wrapWith", t.len() as u128 * (1 + sep.len() as u128))?;
        text(wrap(t, int_arg(&a[0]), sep, true))
    });
    add(m, "contains", STR2, None, |_, a| {
        Ok(Value::Bool(s(&a[1]).contains(s(&a[0]))))
    });
    add(m, "hasPrefix", STR2, None, |_, a| {
        Ok(Value::Bool(s(&a[1]).starts_with(s(&a[0]))))
    });
    add(m, "hasSuffix", STR2, None, |_, a| {
        Ok(Value::Bool(s(&a[1]).ends_with(s(&a[0]))))
    });
    add(m, "quote", &[], Some(Ty::Any), |_, a| {
        let parts: Vec<String> = a
            .iter()
            .filter(|v| !matches!(v, Value::Nil))
            .map(|v| quote(&strval(v), false))
            .collect();
        text(parts.join(" "))
    });
    add(m, "squote", &[], Some(Ty::Any), |_, a| {
        let parts: Vec<String> = a
            .iter()
            .filter(|v| !matches!(v, Value::Nil))
            .map(|v| format!("'{}'", plain(v)))
            .collect();
        text(parts.join(" "))
    });
    add(m, "cat", &[], Some(Ty::Any), |_, a| {
        let parts: Vec<String> = a
            .iter()
            .filter(|v| !matches!(v, Value::Nil))
            .map(plain)
            .collect();
        text(parts.join(" "))
    });
    add(m, "indent", INT_STR, None, |_, a| {
        text(indent(int_arg(&a[0]), s(&a[1]))?)
    });
    add(m, "nindent", INT_STR, None, |_, a| {
        text(format!("\n{}", indent(int_arg(&a[0]), s(&a[1]))?))
    });
    add(m, "replace", STR3, None, |_, a| {
        text(go_replace(s(&a[2]), s(&a[0]), s(&a[1]))?)
    });
    add(m, "plural", &[Ty::Str, Ty::Str, Ty::Int], None, |_, a| {
        Ok(if int_arg(&a[2]) == 1 {
            a[0].clone()
        } else {
            a[1].clone()
        })
    });
    add(m, "trunc", INT_STR, None, |_, a| {
        let (c, t) = (int_arg(&a[0]), s(&a[1]).as_bytes());
        let len = t.len() as i64;
        let out = if c < 0 && len + c > 0 {
            &t[(len + c) as usize..]
        } else if c >= 0 && len > c {
            &t[..c as usize]
        } else {
            t
        };
        text(String::from_utf8_lossy(out).into_owned())
    });
    add(m, "abbrev", INT_STR, None, |_, a| {
        let (w, t) = (int_arg(&a[0]), s(&a[1]));
        if w < 4 {
            return Ok(a[1].clone());
        }
        text(abbreviate(t, 0, w).unwrap_or_default())
    });
    add(
        m,
        "abbrevboth",
        &[Ty::Int, Ty::Int, Ty::Str],
        None,
        |_, a| {
            let (l, r, t) = (int_arg(&a[0]), int_arg(&a[1]), s(&a[2]));
            if r < 4 || l > 0 && r < 7 {
                return Ok(a[2].clone());
            }
            text(abbreviate(t, l, r).unwrap_or_default())
        },
    );
    add(m, "join", &[Ty::Str, Ty::Any], None, |_, a| {
        let (parts, sep) = (strslice(&a[1]), s(&a[0]));
        let len: u128 = parts.iter().map(|p| p.len() as u128).sum::<u128>()
            + sep.len() as u128 * parts.len().saturating_sub(1) as u128;
        made("join", len)?;
        text(parts.join(sep))
    });
    add(m, "split", STR2, None, |_, a| {
        Ok(parts_map(go_split(s(&a[1]), s(&a[0]), -1)?))
    });
    add(m, "splitn", &[Ty::Str, Ty::Int, Ty::Str], None, |_, a| {
        Ok(parts_map(go_split(s(&a[2]), s(&a[0]), int_arg(&a[1]))?))
    });
    add(m, "splitList", STR2, None, |_, a| {
        Ok(Value::strings(go_split(s(&a[1]), s(&a[0]), -1)?))
    });
    add(m, "toStrings", ANY, None, |_, a| {
        Ok(Value::strings(strslice(&a[0])))
    });
    add(m, "toString", ANY, None, |_, a| text(strval(&a[0])));
    add(m, "sortAlpha", ANY, None, |_, a| {
        let mut v = match &a[0] {
            Value::List(..) => strslice(&a[0]),
            other => vec![strval(other)],
        };
        v.sort();
        Ok(Value::strings(v))
    });
}

/// The one character a case mapping gives, or `c` when it gives several
/// (Go maps rune by rune).
fn one(mut it: impl Iterator<Item = char>, c: char) -> char {
    match (it.next(), it.next()) {
        (Some(x), None) => x,
        _ => c,
    }
}

fn map_chars(t: &str, upper: bool) -> String {
    t.chars()
        .map(|c| {
            if upper {
                one(c.to_uppercase(), c)
            } else {
                one(c.to_lowercase(), c)
            }
        })
        .collect()
}

fn go_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\x0b' | '\x0c' | '\r' | ' ' | '\u{85}' | '\u{a0}'
    ) || ((c as u32) > 0xff && c.is_whitespace())
}

/// Go's `strings.Title`.
fn title(t: &str) -> String {
    let sep = |c: char| {
        if c.is_ascii() {
            return !(c.is_ascii_alphanumeric() || c == '_');
        }
        if c.is_alphanumeric() {
            return false;
        }
        go_space(c)
    };
    let mut prev = ' ';
    t.chars()
        .map(|c| {
            let out = if sep(prev) {
                one(c.to_uppercase(), c)
            } else {
                c
            };
            prev = c;
            out
        })
        .collect()
}

fn indent(n: i64, t: &str) -> Result<String, String> {
    let pad = " ".repeat(n.clamp(0, 1 << 16) as usize);
    let lines = t.bytes().filter(|&b| b == b'\n').count() as u128 + 1;
    made("indent", t.len() as u128 + lines * pad.len() as u128)?;
    Ok(format!("{pad}{}", t.replace('\n', &format!("\n{pad}"))))
}

/// Go's `strings.Replace(src, old, new, -1)` (an empty `old` matches
/// between every character).
fn go_replace(src: &str, old: &str, new: &str) -> Result<String, String> {
    let n = if old.is_empty() {
        src.chars().count() + 1
    } else {
        src.matches(old).count()
    } as u128;
    made(
        "replace",
        src.len() as u128 + n * new.len() as u128 - n * old.len() as u128,
    )?;
    Ok(if old.is_empty() {
        let mut out = String::from(new);
        for c in src.chars() {
            out.push(c);
            out.push_str(new);
        }
        out
    } else {
        src.replace(old, new)
    })
}

/// Go's `strings.SplitN` (`n < 0`: all).
fn go_split(t: &str, sep: &str, n: i64) -> Result<Vec<String>, String> {
    if n == 0 {
        return Ok(Vec::new());
    }
    let pieces = if sep.is_empty() {
        t.chars().count()
    } else {
        t.matches(sep).count() + 1
    };
    made_items(
        "split",
        if n > 0 {
            pieces.min(n as usize)
        } else {
            pieces
        },
    )?;
    if sep.is_empty() {
        let cs: Vec<String> = t.chars().map(String::from).collect();
        if n > 0 && (n as usize) < cs.len() {
            let mut head: Vec<String> = cs[..n as usize - 1].to_vec();
            let rest: String = cs[n as usize - 1..].concat();
            head.push(rest);
            return Ok(head);
        }
        return Ok(cs);
    }
    Ok(if n < 0 {
        t.split(sep).map(String::from).collect()
    } else {
        t.splitn(n as usize, sep).map(String::from).collect()
    })
}

fn parts_map(parts: Vec<String>) -> Value {
    Value::string_map(
        parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| (format!("_{i}"), Value::from(p)))
            .collect(),
    )
}

/// goutils' `AbbreviateFull`.
fn abbreviate(t: &str, offset: i64, max: i64) -> Option<String> {
    let b = t.as_bytes();
    let len = b.len() as i64;
    if t.is_empty() {
        return Some(String::new());
    }
    if max < 4 {
        return None;
    }
    if len <= max {
        return Some(t.into());
    }
    let mut offset = offset.min(len);
    // goutils' ints wrap, as Go's do.
    if len.wrapping_sub(offset) < max - 3 {
        offset = len - (max - 3);
    }
    let lossy = |x: &[u8]| String::from_utf8_lossy(x).into_owned();
    if offset <= 4 {
        return Some(lossy(&b[..(max - 3) as usize]) + "...");
    }
    if max < 7 {
        return None;
    }
    if offset + max - 3 < len {
        let rest = abbreviate(&lossy(&b[offset as usize..]), 0, max - 3)?;
        return Some(format!("...{rest}"));
    }
    Some(format!("...{}", lossy(&b[(len - (max - 3)) as usize..])))
}

/// goutils' `WrapCustom`.
fn wrap(t: &str, width: i64, newline: &str, long_words: bool) -> String {
    if t.is_empty() {
        return String::new();
    }
    let nl = if newline.is_empty() { "\n" } else { newline };
    let w = width.max(1) as usize;
    let b = t.as_bytes();
    let lossy = |x: &[u8]| String::from_utf8_lossy(x).into_owned();
    let mut out = String::new();
    let mut off = 0usize;
    while b.len() - off > w {
        if b[off] == b' ' {
            off += 1;
            continue;
        }
        let end = (w + off + 1).min(b.len());
        let space = b[off..end]
            .iter()
            .rposition(|&c| c == b' ')
            .map(|i| i + off);
        match space {
            Some(sp) => {
                out.push_str(&lossy(&b[off..sp]));
                out.push_str(nl);
                off = sp + 1;
            }
            None if long_words => {
                out.push_str(&lossy(&b[off..off + w]));
                out.push_str(nl);
                off += w;
            }
            None => {
                let end = w + off;
                match b[end..].iter().position(|&c| c == b' ') {
                    None => {
                        out.push_str(&lossy(&b[off..]));
                        off = b.len();
                    }
                    Some(i) => {
                        let sp = i + end;
                        out.push_str(&lossy(&b[off..sp]));
                        out.push_str(nl);
                        off = sp + 1;
                    }
                }
            }
        }
    }
    out.push_str(&lossy(&b[off..]));
    out
}

/// Words of an identifier-like string: split at `_`, `-`, spaces and
/// lower-to-upper changes (keeping acronyms together).
fn words(t: &str) -> Vec<String> {
    let cs: Vec<char> = t.chars().collect();
    let mut words = Vec::new();
    let mut cur = String::new();
    for (i, &c) in cs.iter().enumerate() {
        if c == '_' || c == '-' || c.is_whitespace() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            continue;
        }
        if c.is_uppercase() && !cur.is_empty() {
            let prev = cs[i - 1];
            let next_lower = cs.get(i + 1).is_some_and(|n| n.is_lowercase());
            if prev.is_lowercase() || prev.is_ascii_digit() || (prev.is_uppercase() && next_lower) {
                words.push(std::mem::take(&mut cur));
            }
        }
        cur.push(c);
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

fn case_words(t: &str, sep: char) -> String {
    words(t)
        .iter()
        .map(|w| map_chars(w, false))
        .collect::<Vec<_>>()
        .join(&sep.to_string())
}

/// xstrings' `ToCamelCase`: `foo_bar` → `FooBar`.
fn camel(t: &str) -> String {
    let mut out = String::new();
    let mut upper_next = true;
    for c in t.chars() {
        if c == '_' {
            if !upper_next && out.is_empty() {
                out.push(c);
            }
            upper_next = true;
            continue;
        }
        if upper_next {
            out.push(one(c.to_uppercase(), c));
            upper_next = false;
        } else {
            out.push(c);
        }
    }
    out
}

fn lists(m: &mut HashMap<&'static str, Func>) {
    add(m, "list", &[], Some(Ty::Any), |_, a| Ok(Value::list(a)));
    add(m, "tuple", &[], Some(Ty::Any), |_, a| Ok(Value::list(a)));
    add(m, "first", ANY, None, |_, a| {
        first_last(&a[0], true, "find first").map(|v| v.unwrap_or(Value::Nil))
    });
    add(m, "mustFirst", ANY, None, |_, a| {
        first_last(&a[0], true, "find first").map(|v| v.unwrap_or(Value::Nil))
    });
    add(m, "last", ANY, None, |_, a| {
        first_last(&a[0], false, "find last").map(|v| v.unwrap_or(Value::Nil))
    });
    add(m, "mustLast", ANY, None, |_, a| {
        first_last(&a[0], false, "find last").map(|v| v.unwrap_or(Value::Nil))
    });
    add(m, "rest", ANY, None, |_, a| {
        let l = items(&a[0], "find rest")?;
        Ok(Value::list(l.iter().skip(1).cloned().collect()))
    });
    add(m, "mustRest", ANY, None, |_, a| {
        let l = items(&a[0], "find rest")?;
        Ok(Value::list(l.iter().skip(1).cloned().collect()))
    });
    add(m, "initial", ANY, None, |_, a| {
        let l = items(&a[0], "find initial")?;
        Ok(Value::list(
            l.iter().take(l.len().saturating_sub(1)).cloned().collect(),
        ))
    });
    add(m, "mustInitial", ANY, None, |_, a| {
        let l = items(&a[0], "find initial")?;
        Ok(Value::list(
            l.iter().take(l.len().saturating_sub(1)).cloned().collect(),
        ))
    });
    for name in ["append", "push", "mustAppend", "mustPush"] {
        add(m, name, ANY2, None, |_, a| {
            let mut l = items(&a[0], "push")?.to_vec();
            l.push(a[1].clone());
            Ok(Value::list(l))
        });
    }
    for name in ["prepend", "mustPrepend"] {
        add(m, name, ANY2, None, |_, a| {
            let mut l = vec![a[1].clone()];
            l.extend(items(&a[0], "prepend")?.iter().cloned());
            Ok(Value::list(l))
        });
    }
    for name in ["reverse", "mustReverse"] {
        add(m, name, ANY, None, |_, a| {
            Ok(Value::list(
                items(&a[0], "find reverse")?
                    .iter()
                    .rev()
                    .cloned()
                    .collect(),
            ))
        });
    }
    for name in ["compact", "mustCompact"] {
        add(m, name, ANY, None, |_, a| {
            Ok(Value::list(
                items(&a[0], "compact")?
                    .iter()
                    .filter(|v| !empty(v))
                    .cloned()
                    .collect(),
            ))
        });
    }
    for name in ["uniq", "mustUniq"] {
        add(m, name, ANY, None, |_, a| {
            // Scalars by a key (linear); lists and maps among themselves.
            let mut out: Vec<Value> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            let mut nested: Vec<Value> = Vec::new();
            for v in items(&a[0], "find uniq")?.iter() {
                let new = match scalar_key(v) {
                    Some(k) => seen.insert(k),
                    None if matches!(v, Value::List(..) | Value::Map(..)) => {
                        !nested.iter().any(|o| deep_equal(o, v)) && {
                            nested.push(v.clone());
                            true
                        }
                    }
                    None => true,
                };
                if new {
                    out.push(v.clone());
                }
            }
            Ok(Value::list(out))
        });
    }
    for name in ["without", "mustWithout"] {
        add(m, name, ANY, Some(Ty::Any), |_, a| {
            let omit = &a[1..];
            Ok(Value::list(
                items(&a[0], "find without")?
                    .iter()
                    .filter(|v| !omit.iter().any(|o| deep_equal(o, v)))
                    .cloned()
                    .collect(),
            ))
        });
    }
    for name in ["has", "mustHas"] {
        add(m, name, ANY2, None, |_, a| {
            if matches!(a[1], Value::Nil) {
                return Ok(Value::Bool(false));
            }
            Ok(Value::Bool(
                items(&a[1], "find has")?
                    .iter()
                    .any(|v| deep_equal(&a[0], v)),
            ))
        });
    }
    for name in ["slice", "mustSlice"] {
        add(m, name, ANY, Some(Ty::Any), |_, a| {
            let l = match &a[0] {
                Value::List(l, _) => l,
                Value::Missing | Value::Nil => {
                    return Err(
                        "runtime error: invalid memory address or nil pointer dereference".into(),
                    );
                }
                other => {
                    return Err(format!(
                        "list should be type of slice or array but {}",
                        other.kind_name()
                    ));
                }
            };
            if l.is_empty() {
                return Ok(Value::Nil);
            }
            let start = a.get(1).map_or(0, to_i64);
            let end = if a.len() < 3 {
                l.len() as i64
            } else {
                to_i64(&a[2])
            };
            if start < 0 || end < start || end as usize > l.len() {
                return Err("reflect: slice index out of range".into());
            }
            let elem = match &a[0] {
                Value::List(_, e) => *e,
                _ => Elem::Any,
            };
            Ok(Value::List(
                Rc::new(l[start as usize..end as usize].to_vec()),
                elem,
            ))
        });
    }
    add(m, "concat", &[], Some(Ty::Any), |_, a| {
        let mut out = Vec::new();
        for l in &a {
            match l {
                Value::List(l, _) => out.extend(l.iter().cloned()),
                Value::Nil | Value::Missing => {
                    return Err(
                        "runtime error: invalid memory address or nil pointer dereference".into(),
                    );
                }
                other => return Err(format!("Cannot concat type {} as list", other.kind_name())),
            }
        }
        Ok(Value::list(out))
    });
    for name in ["chunk", "mustChunk"] {
        add(m, name, &[Ty::Int, Ty::Any], None, |_, a| {
            let size = int_arg(&a[0]);
            let l = items(&a[1], "chunk")?;
            if size <= 0 {
                return Err("runtime error: integer divide by zero".into());
            }
            let chunks = l
                .chunks(size as usize)
                .map(|c| Value::list(c.to_vec()))
                .collect();
            Ok(Value::List(Rc::new(chunks), Elem::List))
        });
    }
}

fn first_last(v: &Value, first: bool, what: &str) -> Result<Option<Value>, String> {
    let l = items(v, what)?;
    Ok(if first { l.first() } else { l.last() }.cloned())
}

fn dicts(m: &mut HashMap<&'static str, Func>) {
    add(m, "dict", &[], Some(Ty::Any), |_, a| {
        let mut d = BTreeMap::new();
        for pair in a.chunks(2) {
            let v = pair.get(1).cloned().unwrap_or_else(|| Value::from(""));
            d.insert(strval(&pair[0]), v);
        }
        Ok(Value::map(d))
    });
    add(m, "get", &[Ty::Map, Ty::Str], None, |_, a| {
        Ok(map_of(&a[0])?
            .get(s(&a[1]))
            .cloned()
            .unwrap_or_else(|| Value::from("")))
    });
    add(m, "set", &[Ty::Map, Ty::Str, Ty::Any], None, |_, a| {
        if let Value::Map(d, _) = &a[0] {
            d.borrow_mut().insert(s(&a[1]).to_string(), a[2].clone());
        }
        Ok(a[0].clone())
    });
    add(m, "unset", &[Ty::Map, Ty::Str], None, |_, a| {
        if let Value::Map(d, _) = &a[0] {
            d.borrow_mut().remove(s(&a[1]));
        }
        Ok(a[0].clone())
    });
    add(m, "hasKey", &[Ty::Map, Ty::Str], None, |_, a| {
        Ok(Value::Bool(map_of(&a[0])?.contains_key(s(&a[1]))))
    });
    add(m, "pluck", STR, Some(Ty::Map), |_, a| {
        let mut out = Vec::new();
        for d in &a[1..] {
            if let Some(v) = map_of(d)?.get(s(&a[0])) {
                out.push(v.clone());
            }
        }
        Ok(Value::list(out))
    });
    add(m, "keys", &[], Some(Ty::Map), |_, a| {
        let mut out = Vec::new();
        for d in &a {
            out.extend(map_of(d)?.keys().cloned());
        }
        Ok(Value::strings(out))
    });
    add(m, "values", &[Ty::Map], None, |_, a| {
        Ok(Value::list(map_of(&a[0])?.values().cloned().collect()))
    });
    add(m, "pick", &[Ty::Map], Some(Ty::Str), |_, a| {
        let d = map_of(&a[0])?;
        let keep: Vec<&str> = a[1..].iter().map(s).collect();
        Ok(Value::map(
            d.iter()
                .filter(|(k, _)| keep.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ))
    });
    add(m, "omit", &[Ty::Map], Some(Ty::Str), |_, a| {
        let d = map_of(&a[0])?;
        let drop: Vec<&str> = a[1..].iter().map(s).collect();
        Ok(Value::map(
            d.iter()
                .filter(|(k, _)| !drop.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        ))
    });
    for (name, overwrite) in [
        ("merge", false),
        ("mustMerge", false),
        ("mergeOverwrite", true),
        ("mustMergeOverwrite", true),
    ] {
        let call: super::Call = if overwrite {
            |_, a| merge_all(&a, true)
        } else {
            |_, a| merge_all(&a, false)
        };
        add(m, name, &[Ty::Map], Some(Ty::Map), call);
        let _ = name;
    }
    add(m, "deepCopy", ANY, None, |_, a| deep_copy(&a[0]));
    add(m, "mustDeepCopy", ANY, None, |_, a| deep_copy(&a[0]));
    add(m, "dig", &[], Some(Ty::Any), |_, a| {
        if a.len() < 3 {
            return Err("dig needs at least three arguments".into());
        }
        let n = a.len();
        let mut d = match &a[n - 1] {
            Value::Map(_, Elem::Any) => a[n - 1].clone(),
            other => {
                return Err(format!(
                    "interface conversion: interface {{}} is {}, not map[string]interface {{}}",
                    other.type_name()
                ));
            }
        };
        let default = a[n - 2].clone();
        let keys: Vec<String> = a[..n - 2]
            .iter()
            .map(|k| match k {
                Value::Str(k) => Ok(k.to_string()),
                other => Err(format!(
                    "interface conversion: interface {{}} is {}, not string",
                    other.type_name()
                )),
            })
            .collect::<Result<_, _>>()?;
        for (i, k) in keys.iter().enumerate() {
            let step = map_of(&d)?.get(k).cloned();
            let Some(step) = step else { return Ok(default) };
            if i == keys.len() - 1 {
                return Ok(step);
            }
            d = match step {
                Value::Map(_, Elem::Any) => step,
                other => {
                    return Err(format!(
                        "interface conversion: interface {{}} is {}, not map[string]interface {{}}",
                        other.type_name()
                    ));
                }
            };
        }
        Ok(default)
    });
}

/// mergo's `Merge` (`overwrite`: `MergeWithOverwrite`) of every source into
/// the first map, in place.
fn merge_all(a: &[Value], overwrite: bool) -> R {
    fn merge(dst: &Value, src: &Value, overwrite: bool) {
        let (Value::Map(d, _), Value::Map(s, _)) = (dst, src) else {
            return;
        };
        if Rc::ptr_eq(d, s) {
            return;
        }
        let src = s.borrow().clone();
        for (k, sv) in src {
            let dv = d.borrow().get(&k).cloned();
            match dv {
                Some(dv @ Value::Map(..)) if matches!(sv, Value::Map(..)) => {
                    merge(&dv, &sv, overwrite)
                }
                Some(dv) if !empty(&dv) && (!overwrite || empty(&sv)) => {}
                _ => {
                    if !overwrite || !empty(&sv) || d.borrow().get(&k).is_none() {
                        d.borrow_mut().insert(k, sv);
                    }
                }
            }
        }
    }
    for src in &a[1..] {
        merge(&a[0], src, overwrite);
    }
    Ok(a[0].clone())
}

fn numbers(m: &mut HashMap<&'static str, Func>) {
    add(m, "int", ANY, None, |_, a| Ok(Value::int(to_i64(&a[0]))));
    add(m, "int64", ANY, None, |_, a| Ok(i64v(to_i64(&a[0]))));
    add(m, "float64", ANY, None, |_, a| {
        Ok(Value::Float(to_f64(&a[0])))
    });
    add(m, "atoi", STR, None, |_, a| {
        let t = s(&a[0]);
        let ok = !t.is_empty()
            && t.trim_start_matches(['+', '-'])
                .bytes()
                .all(|b| b.is_ascii_digit())
            && t.len() > usize::from(t.starts_with(['+', '-']));
        Ok(Value::int(if ok {
            t.parse::<i64>().unwrap_or(0)
        } else {
            0
        }))
    });
    add(m, "toDecimal", ANY, None, |_, a| {
        let t = plain(&a[0]);
        let body = t.strip_prefix(['+', '-']).unwrap_or(&t);
        let v = if !body.is_empty() && body.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
            i64::from_str_radix(&t, 8).unwrap_or(0)
        } else {
            0
        };
        Ok(i64v(v))
    });
    add(m, "add1", ANY, None, |_, a| {
        Ok(i64v(to_i64(&a[0]).wrapping_add(1)))
    });
    add(m, "add", &[], Some(Ty::Any), |_, a| {
        Ok(i64v(a.iter().map(to_i64).fold(0i64, i64::wrapping_add)))
    });
    add(m, "sub", ANY2, None, |_, a| {
        Ok(i64v(to_i64(&a[0]).wrapping_sub(to_i64(&a[1]))))
    });
    add(m, "mul", ANY, Some(Ty::Any), |_, a| {
        Ok(i64v(a.iter().map(to_i64).fold(1i64, i64::wrapping_mul)))
    });
    add(m, "div", ANY2, None, |_, a| {
        let d = to_i64(&a[1]);
        if d == 0 {
            return Err("runtime error: integer divide by zero".into());
        }
        Ok(i64v(to_i64(&a[0]).wrapping_div(d)))
    });
    add(m, "mod", ANY2, None, |_, a| {
        let d = to_i64(&a[1]);
        if d == 0 {
            return Err("runtime error: integer divide by zero".into());
        }
        Ok(i64v(to_i64(&a[0]).wrapping_rem(d)))
    });
    for name in ["max", "biggest"] {
        add(m, name, ANY, Some(Ty::Any), |_, a| {
            Ok(i64v(a.iter().map(to_i64).max().unwrap_or(0)))
        });
    }
    add(m, "min", ANY, Some(Ty::Any), |_, a| {
        Ok(i64v(a.iter().map(to_i64).min().unwrap_or(0)))
    });
    add(m, "maxf", ANY, Some(Ty::Any), |_, a| {
        Ok(Value::Float(
            a.iter().map(to_f64).fold(f64::NEG_INFINITY, go_max),
        ))
    });
    add(m, "minf", ANY, Some(Ty::Any), |_, a| {
        Ok(Value::Float(
            a.iter().map(to_f64).fold(f64::INFINITY, go_min),
        ))
    });
    add(m, "floor", ANY, None, |_, a| {
        Ok(Value::Float(to_f64(&a[0]).floor()))
    });
    add(m, "ceil", ANY, None, |_, a| {
        Ok(Value::Float(to_f64(&a[0]).ceil()))
    });
    add(m, "round", &[Ty::Any, Ty::Int], Some(Ty::Float), |_, a| {
        let on = match a.get(2) {
            Some(Value::Float(f)) => *f,
            _ => 0.5,
        };
        let val = to_f64(&a[0]);
        let pow = 10f64.powf(int_arg(&a[1]) as f64);
        let digit = pow * val;
        let frac = digit - digit.trunc();
        let r = if frac >= on {
            digit.ceil()
        } else {
            digit.floor()
        };
        Ok(Value::Float(r / pow))
    });
    add(m, "until", &[Ty::Int], None, |_, a| {
        let n = int_arg(&a[0]);
        until_step(0, n, if n < 0 { -1 } else { 1 })
    });
    add(
        m,
        "untilStep",
        &[Ty::Int, Ty::Int, Ty::Int],
        None,
        |_, a| until_step(int_arg(&a[0]), int_arg(&a[1]), int_arg(&a[2])),
    );
    add(m, "seq", &[], Some(Ty::Int), |_, a| {
        let p: Vec<i64> = a.iter().map(int_arg).collect();
        let list = match p.as_slice() {
            [] => return text(""),
            [end] => {
                let inc = if *end < 1 { -1 } else { 1 };
                until_step(1, end.wrapping_add(inc), inc)?
            }
            [start, end] => {
                let inc = if end < start { -1 } else { 1 };
                until_step(*start, end.wrapping_add(inc), inc)?
            }
            [start, step, end] => {
                let mut inc = 1;
                if end < start {
                    inc = -1;
                    if *step > 0 {
                        return text("");
                    }
                }
                until_step(*start, end.wrapping_add(inc), *step)?
            }
            _ => return Err("seq: too many arguments".into()),
        };
        let Value::List(l, _) = list else {
            return text("");
        };
        text(l.iter().map(plain).collect::<Vec<_>>().join(" "))
    });
    add(m, "addf", &[], Some(Ty::Any), |_, a| {
        decimal_op(&Value::Float(0.0), &a, '+')
    });
    add(m, "add1f", ANY, None, |_, a| {
        decimal_op(&a[0], &[Value::int(1)], '+')
    });
    add(m, "subf", ANY, Some(Ty::Any), |_, a| {
        decimal_op(&a[0], &a[1..], '-')
    });
    add(m, "mulf", ANY, Some(Ty::Any), |_, a| {
        decimal_op(&a[0], &a[1..], '*')
    });
    add(m, "divf", ANY, Some(Ty::Any), |_, a| {
        decimal_op(&a[0], &a[1..], '/')
    });
}

fn go_max(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.max(b)
    }
}

fn go_min(a: f64, b: f64) -> f64 {
    if a.is_nan() || b.is_nan() {
        f64::NAN
    } else {
        a.min(b)
    }
}

fn until_step(start: i64, stop: i64, step: i64) -> R {
    let mut v = Vec::new();
    let limit = MAX_ITEMS;
    if stop < start {
        if step < 0 {
            let mut i = start;
            while i > stop {
                v.push(Value::int(i));
                i = i.wrapping_add(step);
                if v.len() > limit {
                    return Err("untilStep: over a million items".into());
                }
            }
        }
    } else if step > 0 {
        let mut i = start;
        while i < stop {
            v.push(Value::int(i));
            // Go's ints wrap; the item limit ends the loop.
            i = i.wrapping_add(step);
            if v.len() > limit {
                return Err("untilStep: over a million items".into());
            }
        }
    }
    Ok(Value::List(Rc::new(v), Elem::Int))
}

/// A decimal: mantissa × 10^-scale.
#[derive(Clone, Copy)]
struct Dec(i128, u32);

impl Dec {
    fn of(f: f64) -> Option<Dec> {
        if !f.is_finite() {
            return None;
        }
        let t = crate::value::format_float(f, 'e', None);
        let (mant, exp) = t.split_once('e')?;
        let exp: i32 = exp.parse().ok()?;
        let neg = mant.starts_with('-');
        let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
        let frac_len = mant.split_once('.').map_or(0, |(_, f)| f.len()) as i32;
        let mut m: i128 = digits.parse().ok()?;
        if neg {
            m = -m;
        }
        let scale = frac_len - exp;
        if scale < 0 {
            m = m.checked_mul(10i128.checked_pow((-scale) as u32)?)?;
            Some(Dec(m, 0))
        } else {
            Some(Dec(m, scale as u32))
        }
    }

    fn align(self, o: Dec) -> Option<(i128, i128, u32)> {
        let s = self.1.max(o.1);
        let a = self.0.checked_mul(10i128.checked_pow(s - self.1)?)?;
        let b = o.0.checked_mul(10i128.checked_pow(s - o.1)?)?;
        Some((a, b, s))
    }

    fn to_f64(self) -> f64 {
        format!("{}e-{}", self.0, self.1)
            .parse()
            .unwrap_or(f64::NAN)
    }
}

/// shopspring/decimal arithmetic as sprig's `addf`… use it: exact for
/// `+ - *`, 16 decimal places (rounded half away from zero) for `/`.
fn decimal_op(first: &Value, rest: &[Value], op: char) -> R {
    let mut acc = Dec::of(to_f64(first));
    let mut fallback = to_f64(first);
    for x in rest {
        let xf = to_f64(x);
        fallback = match op {
            '+' => fallback + xf,
            '-' => fallback - xf,
            '*' => fallback * xf,
            _ => fallback / xf,
        };
        if op == '/' && xf == 0.0 {
            return Err("decimal division by 0".into());
        }
        acc = (|| {
            let a = acc?;
            let b = Dec::of(xf)?;
            match op {
                '+' | '-' => {
                    let (x, y, s) = a.align(b)?;
                    Some(Dec(
                        if op == '+' {
                            x.checked_add(y)?
                        } else {
                            x.checked_sub(y)?
                        },
                        s,
                    ))
                }
                '*' => Some(Dec(a.0.checked_mul(b.0)?, a.1 + b.1)),
                _ => {
                    // (a.0 / 10^a.1) / (b.0 / 10^b.1) to 16 places.
                    let num = a.0.checked_mul(10i128.checked_pow(16 + b.1 + 1)?)?;
                    let den = b.0.checked_mul(10i128.checked_pow(a.1)?)?;
                    let q = num / den; // 17 places, truncated
                    let r = if q % 10 >= 5 {
                        q / 10 + 1
                    } else if q % 10 <= -5 {
                        q / 10 - 1
                    } else {
                        q / 10
                    };
                    Some(Dec(r, 16))
                }
            }
        })();
    }
    Ok(Value::Float(acc.map_or(fallback, Dec::to_f64)))
}

fn encodings(m: &mut HashMap<&'static str, Func>) {
    add(m, "b64enc", STR, None, |_, a| {
        text(base64::engine::general_purpose::STANDARD.encode(s(&a[0])))
    });
    add(m, "b64dec", STR, None, |_, a| {
        text(
            match base64::engine::general_purpose::STANDARD.decode(s(&a[0])) {
                Ok(b) => String::from_utf8_lossy(&b).into_owned(),
                Err(e) => go_base64_error(s(&a[0]), &e),
            },
        )
    });
    add(m, "b32enc", STR, None, |_, a| {
        text(base32_encode(s(&a[0]).as_bytes()))
    });
    add(m, "b32dec", STR, None, |_, a| {
        text(match base32_decode(s(&a[0])) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(at) => format!("illegal base32 data at input byte {at}"),
        })
    });
    add(m, "sha256sum", STR, None, |_, a| {
        text(hex::encode(sha2::Sha256::digest(s(&a[0]).as_bytes())))
    });
    add(m, "sha1sum", STR, None, |_, a| {
        text(hex::encode(sha1::Sha1::digest(s(&a[0]).as_bytes())))
    });
    add(m, "adler32sum", STR, None, |_, a| {
        let (mut x, mut y) = (1u32, 0u32);
        for b in s(&a[0]).bytes() {
            x = (x + u32::from(b)) % 65521;
            y = (y + x) % 65521;
        }
        text(((y << 16) | x).to_string())
    });
    add(m, "toJson", ANY, None, |_, a| {
        text(json(&a[0], None, true).unwrap_or_default())
    });
    add(m, "mustToJson", ANY, None, |_, a| {
        text(json(&a[0], None, true)?)
    });
    add(m, "toPrettyJson", ANY, None, |_, a| {
        text(json(&a[0], Some("  "), true).unwrap_or_default())
    });
    add(m, "mustToPrettyJson", ANY, None, |_, a| {
        text(json(&a[0], Some("  "), true)?)
    });
    add(m, "toRawJson", ANY, None, |_, a| {
        text(json(&a[0], None, false)?)
    });
    add(m, "mustToRawJson", ANY, None, |_, a| {
        text(json(&a[0], None, false)?)
    });
    add(m, "fromJson", STR, None, |_, a| {
        Ok(from_json(s(&a[0])).unwrap_or(Value::Nil))
    });
    add(m, "mustFromJson", STR, None, |_, a| from_json(s(&a[0])));
}

fn from_json(t: &str) -> R {
    serde_json::from_str::<serde_json::Value>(t)
        .map(|v| Value::from_json(&v))
        .map_err(|e| format!("invalid JSON: {e}"))
}

fn go_base64_error(input: &str, e: &base64::DecodeError) -> String {
    let at = match e {
        base64::DecodeError::InvalidByte(i, _) => *i,
        base64::DecodeError::InvalidLastSymbol(i, _) => *i,
        base64::DecodeError::InvalidLength(n) => (*n / 4) * 4,
        base64::DecodeError::InvalidPadding => input.find('=').unwrap_or(input.len()),
    };
    format!("illegal base64 data at input byte {at}")
}

const B32: &[u8; 32] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";

fn base32_encode(b: &[u8]) -> String {
    let mut out = String::new();
    for chunk in b.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let n = u64::from_be_bytes([0, 0, 0, buf[0], buf[1], buf[2], buf[3], buf[4]]);
        let chars = match chunk.len() {
            1 => 2,
            2 => 4,
            3 => 5,
            4 => 7,
            _ => 8,
        };
        for i in 0..8 {
            if i < chars {
                out.push(B32[((n >> (35 - 5 * i)) & 31) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

fn base32_decode(t: &str) -> Result<Vec<u8>, usize> {
    let b: Vec<u8> = t.bytes().filter(|&c| c != b'\n' && c != b'\r').collect();
    if !b.len().is_multiple_of(8) {
        return Err(b.len() / 8 * 8);
    }
    let mut out = Vec::new();
    for (ci, chunk) in b.chunks(8).enumerate() {
        let mut n: u64 = 0;
        let mut count = 0;
        for (i, &c) in chunk.iter().enumerate() {
            if c == b'=' {
                break;
            }
            let v = B32.iter().position(|&x| x == c).ok_or(ci * 8 + i)?;
            n |= (v as u64) << (35 - 5 * i);
            count += 1;
        }
        let bytes = match count {
            8 => 5,
            7 => 4,
            5 => 3,
            4 => 2,
            2 => 1,
            0 => 0,
            _ => return Err(ci * 8 + count),
        };
        let all = n.to_be_bytes();
        out.extend_from_slice(&all[3..3 + bytes]);
    }
    Ok(out)
}

fn misc(m: &mut HashMap<&'static str, Func>) {
    add(m, "default", ANY, Some(Ty::Any), |_, a| {
        Ok(match a.get(1) {
            Some(g) if !empty(g) => g.clone(),
            _ => a[0].clone(),
        })
    });
    add(m, "empty", ANY, None, |_, a| Ok(Value::Bool(empty(&a[0]))));
    add(m, "coalesce", &[], Some(Ty::Any), |_, a| {
        Ok(a.iter().find(|v| !empty(v)).cloned().unwrap_or(Value::Nil))
    });
    add(m, "all", &[], Some(Ty::Any), |_, a| {
        Ok(Value::Bool(a.iter().all(|v| !empty(v))))
    });
    add(m, "any", &[], Some(Ty::Any), |_, a| {
        Ok(Value::Bool(a.iter().any(|v| !empty(v))))
    });
    add(m, "ternary", &[Ty::Any, Ty::Any, Ty::Bool], None, |_, a| {
        Ok(if a[2].truth() {
            a[0].clone()
        } else {
            a[1].clone()
        })
    });
    add(m, "fail", STR, None, |_, a| Err(s(&a[0]).to_string()));
    // Helm's `required`, which Nuon's configs use as Helm charts do.
    add(m, "required", &[Ty::Str, Ty::Any], None, |_, a| {
        match &a[1] {
            Value::Nil | Value::Missing => Err(s(&a[0]).to_string()),
            Value::Str(v) if v.is_empty() => Err(s(&a[0]).to_string()),
            v => Ok(v.clone()),
        }
    });
    add(m, "typeOf", ANY, None, |_, a| text(a[0].type_name()));
    add(m, "typeIs", &[Ty::Str, Ty::Any], None, |_, a| {
        Ok(Value::Bool(s(&a[0]) == a[1].type_name()))
    });
    add(m, "typeIsLike", &[Ty::Str, Ty::Any], None, |_, a| {
        let t = a[1].type_name();
        Ok(Value::Bool(s(&a[0]) == t || s(&a[0]) == format!("*{t}")))
    });
    add(m, "kindOf", ANY, None, |_, a| text(a[0].kind_name()));
    add(m, "kindIs", &[Ty::Str, Ty::Any], None, |_, a| {
        Ok(Value::Bool(s(&a[0]) == a[1].kind_name()))
    });
    add(m, "deepEqual", ANY2, None, |_, a| {
        Ok(Value::Bool(deep_equal(&a[0], &a[1])))
    });
    add(m, "base", STR, None, |_, a| text(path_base(s(&a[0]))));
    add(m, "osBase", STR, None, |_, a| text(path_base(s(&a[0]))));
    add(m, "dir", STR, None, |_, a| text(path_dir(s(&a[0]))));
    add(m, "osDir", STR, None, |_, a| text(path_dir(s(&a[0]))));
    add(m, "clean", STR, None, |_, a| text(path_clean(s(&a[0]))));
    add(m, "osClean", STR, None, |_, a| text(path_clean(s(&a[0]))));
    add(m, "ext", STR, None, |_, a| text(path_ext(s(&a[0]))));
    add(m, "osExt", STR, None, |_, a| text(path_ext(s(&a[0]))));
    add(m, "urlParse", STR, None, |_, a| url_parse(s(&a[0])));
    add(m, "urlJoin", &[Ty::Map], None, |_, a| url_join(&a[0]));
    add(m, "isAbs", STR, None, |_, a| {
        Ok(Value::Bool(s(&a[0]).starts_with('/')))
    });
    add(m, "osIsAbs", STR, None, |_, a| {
        Ok(Value::Bool(s(&a[0]).starts_with('/')))
    });
    add(m, "semverCompare", STR2, None, |_, a| {
        super::semver::compare(s(&a[0]), s(&a[1])).map(Value::Bool)
    });
    add(m, "semver", STR, None, |_, a| {
        super::semver::parse_value(s(&a[0]))
    });
    add(m, "uuidv4", &[], None, |_, _| {
        let mut b = [0u8; 16];
        getrandom::fill(&mut b).map_err(|e| e.to_string())?;
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        let h = hex::encode(b);
        text(format!(
            "{}-{}-{}-{}-{}",
            &h[..8],
            &h[8..12],
            &h[12..16],
            &h[16..20],
            &h[20..]
        ))
    });
    const ALNUM: &str = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    add(m, "randAlphaNum", &[Ty::Int], None, |_, a| {
        random(&a[0], ALNUM)
    });
    add(m, "randAlpha", &[Ty::Int], None, |_, a| {
        random(&a[0], &ALNUM[..52])
    });
    add(m, "randNumeric", &[Ty::Int], None, |_, a| {
        random(&a[0], &ALNUM[52..])
    });
    add(m, "randAscii", &[Ty::Int], None, |_, a| {
        let printable: String = (b' '..=b'~').map(char::from).collect();
        random(&a[0], &printable)
    });
}

fn random(n: &Value, set: &str) -> R {
    let n = int_arg(n).clamp(0, 1 << 16) as usize;
    let mut b = vec![0u8; n];
    getrandom::fill(&mut b).map_err(|e| e.to_string())?;
    let cs = set.as_bytes();
    text(
        b.iter()
            .map(|x| cs[*x as usize % cs.len()] as char)
            .collect::<String>(),
    )
}

/// Go's `path.Clean`.
fn path_clean(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for seg in p.split('/') {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|l| *l != "..") {
                    parts.pop();
                } else if !rooted {
                    parts.push("..");
                }
            }
            s => parts.push(s),
        }
    }
    let body = parts.join("/");
    match (rooted, body.is_empty()) {
        (true, _) => format!("/{body}"),
        (false, true) => ".".into(),
        (false, false) => body,
    }
}

fn path_base(p: &str) -> String {
    if p.is_empty() {
        return ".".into();
    }
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        return "/".into();
    }
    t.rsplit('/').next().unwrap_or(t).to_string()
}

fn path_dir(p: &str) -> String {
    let dir = match p.rfind('/') {
        Some(i) => &p[..=i],
        None => "",
    };
    path_clean(dir)
}

fn path_ext(p: &str) -> String {
    for (i, c) in p.char_indices().rev() {
        if c == '/' {
            break;
        }
        if c == '.' {
            return p[i..].to_string();
        }
    }
    String::new()
}

/// sprig's `urlParse` over Go's `net/url` reading of a URL.
fn url_parse(t: &str) -> R {
    let mut rest = t;
    let mut out = BTreeMap::new();
    let mut put = |k: &str, v: &str| {
        out.insert(k.to_string(), Value::from(v));
    };
    let (before_frag, fragment) = rest.split_once('#').unwrap_or((rest, ""));
    rest = before_frag;
    let mut scheme = "";
    if let Some(i) = rest.find(':') {
        let cand = &rest[..i];
        if !cand.is_empty()
            && cand.starts_with(|c: char| c.is_ascii_alphabetic())
            && cand
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        {
            scheme = cand;
            rest = &rest[i + 1..];
        } else if i == 0 {
            return Err(format!(
                "unable to parse url: parse {}: missing protocol scheme",
                quote(t, false)
            ));
        }
    }
    let (before_q, query) = match rest.split_once('?') {
        Some((a, b)) => (a, b),
        None => (rest, ""),
    };
    rest = before_q;
    let (mut host, mut userinfo, mut opaque, mut path) = ("", "", "", rest);
    if let Some(auth) = rest.strip_prefix("//") {
        let end = auth.find('/').unwrap_or(auth.len());
        let authority = &auth[..end];
        path = &auth[end..];
        match authority.rsplit_once('@') {
            Some((u, h)) => {
                userinfo = u;
                host = h;
            }
            None => host = authority,
        }
    } else if !scheme.is_empty() && !rest.starts_with('/') {
        opaque = rest;
        path = "";
    }
    let hostname = if let Some(h) = host.strip_prefix('[') {
        h.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    put("scheme", scheme);
    put("host", host);
    put("hostname", hostname);
    put("path", path);
    put("query", query);
    put("opaque", opaque);
    put("fragment", fragment);
    put("userinfo", userinfo);
    Ok(Value::map(out))
}

/// sprig's `urlJoin`: Go's `URL.String()` of the parts.
fn url_join(d: &Value) -> R {
    let m = map_of(d)?;
    let get = |k: &str| -> Result<String, String> {
        match m.get(k) {
            None => Ok(String::new()),
            Some(Value::Str(v)) => Ok(v.to_string()),
            Some(other) => Err(format!(
                "unable to parse {k} key, must be of type string, but {} found",
                other.kind_name()
            )),
        }
    };
    let (scheme, host, path, query, opaque, fragment, user) = (
        get("scheme")?,
        get("host")?,
        get("path")?,
        get("query")?,
        get("opaque")?,
        get("fragment")?,
        get("userinfo")?,
    );
    let mut out = String::new();
    if !scheme.is_empty() {
        out.push_str(&scheme);
        out.push(':');
    }
    if !opaque.is_empty() {
        out.push_str(&opaque);
    } else {
        if !scheme.is_empty() || !host.is_empty() || !user.is_empty() {
            if !host.is_empty() || !path.is_empty() || !user.is_empty() {
                out.push_str("//");
            }
            if !user.is_empty() {
                out.push_str(&user);
                out.push('@');
            }
            out.push_str(&host);
        }
        if !path.is_empty() && !path.starts_with('/') && !host.is_empty() {
            out.push('/');
        }
        out.push_str(&path);
    }
    if !query.is_empty() {
        out.push('?');
        out.push_str(&query);
    }
    if !fragment.is_empty() {
        out.push('#');
        out.push_str(&fragment);
    }
    text(out)
}
