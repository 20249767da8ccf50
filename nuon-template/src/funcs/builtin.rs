//! Go's template builtins: comparison, `index`, `len`, printing and
//! escaping (`and`/`or` short-circuit in the executor).

use std::collections::HashMap;
use std::fmt::Write as _;

use super::{Ctx, Func, Ty, add};
use crate::fmt::{sprint, sprintf, sprintln};
use crate::value::{Elem, Value};

const REFL: &[Ty] = &[Ty::Refl];
const REFL2: &[Ty] = &[Ty::Refl, Ty::Refl];

pub(super) fn register(m: &mut HashMap<&'static str, Func>) {
    add(m, "not", REFL, None, |_, a| Ok(Value::Bool(!a[0].truth())));
    add(m, "len", REFL, None, |_, a| length(&a[0]));
    add(m, "index", REFL, Some(Ty::Refl), |ctx, a| {
        if ctx.tmpl.is_unknown(&a[0]) {
            return Ok(a[0].clone());
        }
        index(&a[0], &a[1..])
    });
    add(m, "print", &[], Some(Ty::Any), |_, a| Ok(sprint(&a).into()));
    add(m, "println", &[], Some(Ty::Any), |_, a| {
        Ok(sprintln(&a).into())
    });
    add(m, "printf", &[Ty::Str], Some(Ty::Any), |_, a| {
        Ok(sprintf(a[0].as_str().unwrap_or_default(), &a[1..]).into())
    });
    add(m, "urlquery", &[], Some(Ty::Any), |_, a| {
        Ok(url_query(&eval_args(&a)).into())
    });
    add(m, "js", &[], Some(Ty::Any), |_, a| {
        Ok(js_escape(&eval_args(&a)).into())
    });
    add(m, "html", &[], Some(Ty::Any), |_, a| {
        Ok(html_escape(&eval_args(&a)).into())
    });
    add(m, "eq", REFL, Some(Ty::Refl), |_, a| {
        eq(&a[0], &a[1..]).map(Value::Bool)
    });
    add(m, "ne", REFL2, None, |_, a| {
        eq(&a[0], &a[1..]).map(|b| Value::Bool(!b))
    });
    add(m, "lt", REFL2, None, |_, a| {
        lt(&a[0], &a[1]).map(Value::Bool)
    });
    add(m, "le", REFL2, None, |_, a| {
        le(&a[0], &a[1]).map(Value::Bool)
    });
    add(m, "gt", REFL2, None, |_, a| {
        le(&a[0], &a[1]).map(|b| Value::Bool(!b))
    });
    add(m, "ge", REFL2, None, |_, a| {
        lt(&a[0], &a[1]).map(|b| Value::Bool(!b))
    });
    add(m, "call", REFL, Some(Ty::Refl), call);
}

fn call(_: &Ctx<'_>, a: Vec<Value>) -> Result<Value, String> {
    match &a[0] {
        Value::Missing | Value::Nil => Err("call of nil".into()),
        other => Err(format!("non-function of type {}", other.type_name())),
    }
}

/// The arguments of `html`, `js` and `urlquery` as one string.
fn eval_args(args: &[Value]) -> String {
    if let [Value::Str(s)] = args {
        return s.to_string();
    }
    let args: Vec<Value> = args
        .iter()
        .map(|a| match a {
            Value::Nil | Value::Missing => Value::from("<no value>"),
            a => a.clone(),
        })
        .collect();
    sprint(&args)
}

fn length(v: &Value) -> Result<Value, String> {
    match v {
        Value::Str(s) => Ok(Value::int(s.len() as i64)),
        Value::List(l, _) => Ok(Value::int(l.len() as i64)),
        Value::Map(m, _) => Ok(Value::int(m.borrow().len() as i64)),
        Value::Nil => Err("len of nil pointer".into()),
        Value::Missing => Err("len of untyped nil".into()),
        other => Err(format!("len of type {}", other.type_name())),
    }
}

fn index(item: &Value, indexes: &[Value]) -> Result<Value, String> {
    let mut item = item.clone();
    if matches!(item, Value::Missing | Value::Nil) {
        return Err("index of untyped nil".into());
    }
    for ix in indexes {
        item = match &item {
            Value::Nil => return Err("index of nil pointer".into()),
            Value::List(l, _) => {
                let x = index_arg(ix, l.len())?;
                l.get(x)
                    .cloned()
                    .ok_or("reflect: slice index out of range")?
            }
            Value::Str(s) => {
                let x = index_arg(ix, s.len())?;
                let b = *s
                    .as_bytes()
                    .get(x)
                    .ok_or("reflect: string index out of range")?;
                Value::int(i64::from(b))
            }
            Value::Map(m, elem) => {
                let key = match ix {
                    Value::Str(k) => k,
                    Value::Missing | Value::Nil => {
                        return Err("value is nil; should be of type string".into());
                    }
                    other => {
                        return Err(format!(
                            "value has type {}; should be string",
                            other.type_name()
                        ));
                    }
                };
                let found = m.borrow().get(&**key).cloned();
                match found {
                    Some(v) => v,
                    None => match elem {
                        Elem::Str => Value::from(""),
                        Elem::Int => Value::int(0),
                        Elem::List => Value::list(Vec::new()),
                        Elem::Any => Value::Nil,
                    },
                }
            }
            other => return Err(format!("can't index item of type {}", other.type_name())),
        };
    }
    Ok(item)
}

fn index_arg(ix: &Value, cap: usize) -> Result<usize, String> {
    let x = match ix {
        Value::Int(i, _) => *i,
        Value::Missing | Value::Nil => return Err("cannot index slice/array with nil".into()),
        other => {
            return Err(format!(
                "cannot index slice/array with type {}",
                other.type_name()
            ));
        }
    };
    if x < 0 || x as u64 > cap as u64 {
        return Err(format!("index out of range: {x}"));
    }
    Ok(x as usize)
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum Kind {
    Bool,
    Int,
    Float,
    Str,
    Invalid,
}

fn basic_kind(v: &Value) -> Kind {
    match v {
        Value::Bool(_) => Kind::Bool,
        Value::Int(..) => Kind::Int,
        Value::Float(_) => Kind::Float,
        Value::Str(_) => Kind::Str,
        _ => Kind::Invalid,
    }
}

fn is_nil(v: &Value) -> bool {
    matches!(v, Value::Missing | Value::Nil)
}

fn eq(a: &Value, others: &[Value]) -> Result<bool, String> {
    if others.is_empty() {
        return Err("missing argument for comparison".into());
    }
    let k1 = basic_kind(a);
    for b in others {
        let k2 = basic_kind(b);
        let truth = if k1 != k2 {
            if !is_nil(a) && !is_nil(b) {
                return Err("incompatible types for comparison".into());
            }
            false
        } else {
            match (a, b) {
                (Value::Bool(x), Value::Bool(y)) => x == y,
                (Value::Int(x, _), Value::Int(y, _)) => x == y,
                (Value::Float(x), Value::Float(y)) => x == y,
                (Value::Str(x), Value::Str(y)) => x == y,
                _ => {
                    let kind = |v: &Value| v.kind_name();
                    if kind(a) != kind(b) && !is_nil(a) && !is_nil(b) {
                        return Err(format!(
                            "non-comparable types {}: {}, {}: {}",
                            crate::fmt::plain(a),
                            a.type_name(),
                            b.type_name(),
                            crate::fmt::plain(b)
                        ));
                    }
                    if is_nil(a) || is_nil(b) {
                        is_nil(a) == is_nil(b)
                    } else if let (Value::Time(x), Value::Time(y)) = (a, b) {
                        x == y
                    } else {
                        return Err(format!(
                            "non-comparable type {}: {}",
                            crate::fmt::plain(b),
                            b.type_name()
                        ));
                    }
                }
            }
        };
        if truth {
            return Ok(true);
        }
    }
    Ok(false)
}

fn lt(a: &Value, b: &Value) -> Result<bool, String> {
    let (k1, k2) = (basic_kind(a), basic_kind(b));
    if k1 == Kind::Invalid || k2 == Kind::Invalid {
        return Err("invalid type for comparison".into());
    }
    if k1 != k2 {
        return Err("incompatible types for comparison".into());
    }
    Ok(match (a, b) {
        (Value::Int(x, _), Value::Int(y, _)) => x < y,
        (Value::Float(x), Value::Float(y)) => x < y,
        (Value::Str(x), Value::Str(y)) => x < y,
        _ => return Err("invalid type for comparison".into()),
    })
}

fn le(a: &Value, b: &Value) -> Result<bool, String> {
    if lt(a, b)? {
        return Ok(true);
    }
    eq(a, std::slice::from_ref(b))
}

/// Go's `url.QueryEscape`.
pub(crate) fn url_query(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// Go's `template.JSEscapeString`.
fn js_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u00{:02X}", c as u32);
            }
            c if (c as u32) < 0x80 => out.push(c),
            c if !c.is_control() && !c.is_whitespace() => out.push(c),
            c => {
                let _ = write!(out, "\\u{:04X}", c as u32);
            }
        }
    }
    out
}

/// Go's `template.HTMLEscapeString`.
fn html_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '\0' => out.push('\u{FFFD}'),
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}
