//! Number and character literals, read as Go's `parse.newNumber` reads
//! them.

use super::{Number, unescape};

/// Parses a number or character literal as Go's `parse.newNumber` does.
pub(crate) fn number(text: &str) -> Result<Number, String> {
    if let Some(inner) = text.strip_prefix('\'') {
        let inner = inner
            .strip_suffix('\'')
            .ok_or("malformed character constant")?;
        let c = match inner.strip_prefix('\\') {
            Some(esc) => {
                let (s, rest) = unescape(esc, '\'')
                    .map_err(|_| format!("malformed character constant: {text}"))?;
                if !rest.is_empty() {
                    return Err(format!("malformed character constant: {text}"));
                }
                s.chars().next().ok_or("malformed character constant")?
            }
            None => {
                let mut cs = inner.chars();
                match (cs.next(), cs.next()) {
                    (Some(c), None) => c,
                    _ => return Err(format!("malformed character constant: {text}")),
                }
            }
        };
        let v = c as i64;
        return Ok(Number {
            text: text.into(),
            int: Some(v),
            float: Some(v as f64),
        });
    }
    if text.ends_with('i') {
        return Err(format!("complex numbers are not supported: {text}"));
    }
    let illegal = || format!("illegal number syntax: {text:?}");
    let int = parse_int(text);
    let mut n = Number {
        text: text.into(),
        int,
        float: int.map(|i| i as f64),
    };
    if n.int.is_none() {
        let clean: String = text.chars().filter(|&c| c != '_').collect();
        let body = clean.trim_start_matches(['+', '-']);
        let is_hex = body.starts_with("0x") || body.starts_with("0X");
        let f = if is_hex {
            parse_hex_float(text).filter(|f| f.is_finite())
        } else if !underscores_ok(body) {
            None
        } else {
            clean.parse::<f64>().ok().filter(|f| f.is_finite())
        };
        match f {
            Some(f) => {
                if !text.contains(['.', 'e', 'E', 'p', 'P']) {
                    return Err(format!("integer overflow: {text:?}"));
                }
                n.float = Some(f);
                if f.fract() == 0.0 && f.abs() < 9.2e18 {
                    n.int = Some(f as i64);
                }
            }
            None => return Err(illegal()),
        }
    }
    Ok(n)
}

/// Go's `strconv.ParseInt(text, 0, 64)`: base prefixes, and `_` between
/// digits.
fn parse_int(text: &str) -> Option<i64> {
    let (neg, body) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let (radix, digits) = if let Some(h) = body.strip_prefix("0x").or(body.strip_prefix("0X")) {
        (16, h)
    } else if let Some(o) = body.strip_prefix("0o").or(body.strip_prefix("0O")) {
        (8, o)
    } else if let Some(b) = body.strip_prefix("0b").or(body.strip_prefix("0B")) {
        (2, b)
    } else if body.len() > 1 && body.starts_with('0') {
        (8, &body[1..])
    } else {
        (10, body)
    };
    if !underscores_ok(body) {
        return None;
    }
    let clean: String = digits.chars().filter(|&c| c != '_').collect();
    if clean.is_empty() {
        return None;
    }
    let v = u64::from_str_radix(&clean, radix).ok()?;
    if neg {
        if v > i64::MAX as u64 + 1 {
            return None;
        }
        Some((v as i128).wrapping_neg() as i64)
    } else {
        i64::try_from(v).ok()
    }
}

/// Go's `underscoreOK`: each `_` sits between digits or after a base prefix.
fn underscores_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let mut saw = '^';
    let mut i = 0;
    let mut hex = false;
    if b.len() >= 2 && b[0] == b'0' && matches!(b[1].to_ascii_lowercase(), b'x' | b'o' | b'b') {
        hex = b[1].eq_ignore_ascii_case(&b'x');
        i = 2;
        saw = '0';
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw = '0';
        } else if c == b'_' {
            if saw != '0' {
                return false;
            }
            saw = '_';
        } else {
            if saw == '_' {
                return false;
            }
            saw = '!';
        }
        i += 1;
    }
    saw != '_'
}

/// A hexadecimal float (`0x1.8p4`).
fn parse_hex_float(text: &str) -> Option<f64> {
    let (neg, body) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let body = body.strip_prefix("0x").or(body.strip_prefix("0X"))?;
    let (mant, exp) = body.split_once(['p', 'P'])?;
    let exp: i32 = exp.replace('_', "").parse().ok()?;
    let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
    let mut v = 0f64;
    for c in int.chars().filter(|&c| c != '_') {
        v = v * 16.0 + f64::from(c.to_digit(16)?);
    }
    let mut scale = 1.0 / 16.0;
    for c in frac.chars().filter(|&c| c != '_') {
        v += f64::from(c.to_digit(16)?) * scale;
        scale /= 16.0;
    }
    let v = v * 2f64.powi(exp);
    Some(if neg { -v } else { v })
}
