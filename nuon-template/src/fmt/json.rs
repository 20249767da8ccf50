//! Values as Go's `encoding/json` writes them (sprig's `toJson`,
//! `toPrettyJson`, `toRawJson`).

use std::fmt::Write as _;

use super::MAX_TEXT;
use crate::value::{Value, format_float};

/// Writes `v` as Go's `encoding/json` marshals it (`indent` for
/// `MarshalIndent(v, "", indent)`; `escape_html` for `<`, `>` and `&`).
/// Fails on NaN and infinities, as Go does.
pub fn json(v: &Value, indent: Option<&str>, escape_html: bool) -> Result<String, String> {
    let mut out = String::new();
    json_into(&mut out, v, indent, 0, escape_html)?;
    Ok(out)
}

fn newline(out: &mut String, indent: Option<&str>, depth: usize) {
    if let Some(ind) = indent {
        out.push('\n');
        for _ in 0..depth {
            out.push_str(ind);
        }
    }
}

/// JSON past [`MAX_TEXT`] is refused (a value shared many times inside
/// itself is small to make and huge to write).
fn too_long(out: &str) -> Result<(), String> {
    if out.len() > MAX_TEXT {
        return Err(format!(
            "json: over {} MiB: a template renders config values, not bulk data",
            MAX_TEXT >> 20
        ));
    }
    Ok(())
}

fn json_into(
    out: &mut String,
    v: &Value,
    indent: Option<&str>,
    depth: usize,
    html: bool,
) -> Result<(), String> {
    match v {
        Value::Nil | Value::Missing => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Int(i, _) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => {
            if !f.is_finite() {
                return Err(format!(
                    "json: unsupported value: {}",
                    format_float(*f, 'g', None)
                ));
            }
            let a = f.abs();
            if a != 0.0 && !(1e-6..1e21).contains(&a) {
                let mut s = format_float(*f, 'e', None);
                // e-07 → e-7
                let b = s.as_bytes();
                let n = b.len();
                if n >= 4 && b[n - 4] == b'e' && b[n - 3] == b'-' && b[n - 2] == b'0' {
                    s.remove(n - 2);
                }
                out.push_str(&s);
            } else {
                out.push_str(&format_float(*f, 'f', None));
            }
        }
        Value::Str(s) => json_string(out, s, html),
        Value::Time(t) => json_string(out, &crate::time::rfc3339_nano(*t), html),
        Value::List(l, _) => {
            if l.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            for (i, e) in l.iter().enumerate() {
                too_long(out)?;
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent, depth + 1);
                json_into(out, e, indent, depth + 1, html)?;
            }
            newline(out, indent, depth);
            out.push(']');
        }
        Value::Map(m, _) => {
            let m = m.borrow();
            if m.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            out.push('{');
            for (i, (k, e)) in m.iter().enumerate() {
                too_long(out)?;
                if i > 0 {
                    out.push(',');
                }
                newline(out, indent, depth + 1);
                json_string(out, k, html);
                out.push(':');
                if indent.is_some() {
                    out.push(' ');
                }
                json_into(out, e, indent, depth + 1, html)?;
            }
            newline(out, indent, depth);
            out.push('}');
        }
    }
    Ok(())
}

fn json_string(out: &mut String, s: &str, html: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '<' | '>' | '&' if html => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
