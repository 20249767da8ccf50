//! Go's `fmt` as templates meet it (`print`, `printf`, `println`, `%v`),
//! Go's string quoting, and `encoding/json` output.

use std::fmt::Write as _;

use super::value::{Value, format_float};

mod json;
pub use json::json;

/// `fmt.Sprint`: operands joined, with a space between two operands when
/// neither is a string.
pub fn sprint(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 && a.as_str().is_none() && args[i - 1].as_str().is_none() {
            out.push(' ');
        }
        write_plain(&mut out, a);
    }
    out
}

/// `fmt.Sprintln`: operands joined by spaces, then a newline.
pub fn sprintln(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, a) in args.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        write_plain(&mut out, a);
    }
    out.push('\n');
    out
}

#[derive(Default, Clone, Copy)]
struct Spec {
    minus: bool,
    plus: bool,
    sharp: bool,
    space: bool,
    zero: bool,
    width: Option<usize>,
    prec: Option<usize>,
}

/// `fmt.Sprintf`.
pub fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::new();
    let mut next = 0usize;
    let mut reordered = false;
    let mut chars = format.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        // Each verb may pad to a million characters: a format of hundreds
        // of them stops at the most text a value is written as (and the
        // budget, which counts the result by its size, refuses it).
        if out.len() > MAX_TEXT {
            return out;
        }
        let mut spec = Spec::default();
        // Flags.
        while let Some(&(_, f)) = chars.peek() {
            match f {
                '-' => {
                    spec.minus = true;
                    spec.zero = false;
                }
                '+' => spec.plus = true,
                '#' => spec.sharp = true,
                ' ' => spec.space = true,
                '0' => spec.zero = !spec.minus,
                _ => break,
            }
            chars.next();
        }
        // Width and precision: digits, or `*` for an int argument (Go's
        // `intFromArg`: over a million, or not an int, is bad).
        let number = |chars: &mut std::iter::Peekable<std::str::CharIndices<'_>>,
                      out: &mut String,
                      next: &mut usize,
                      what: &str|
         -> Option<i64> {
            if chars.peek().map(|&(_, c)| c) == Some('*') {
                chars.next();
                let v = args.get(*next);
                *next += 1;
                return match v {
                    Some(Value::Int(i, _)) if i.unsigned_abs() < 1_000_000 => Some(*i),
                    _ => {
                        let _ = write!(out, "%!({what})");
                        None
                    }
                };
            }
            let mut n: Option<i64> = None;
            while let Some(&(_, d)) = chars.peek() {
                let Some(v) = d.to_digit(10) else { break };
                n = Some((n.unwrap_or(0) * 10 + i64::from(v)).min(1_000_000));
                chars.next();
            }
            n
        };
        // A negative width pads on the right, as `-` does.
        spec.width = number(&mut chars, &mut out, &mut next, "BADWIDTH").map(|w| {
            if w < 0 {
                spec.minus = true;
                spec.zero = false;
            }
            w.unsigned_abs() as usize
        });
        if chars.peek().map(|&(_, c)| c) == Some('.') {
            chars.next();
            let star = chars.peek().map(|&(_, c)| c) == Some('*');
            spec.prec = match number(&mut chars, &mut out, &mut next, "BADPREC") {
                Some(p) if p >= 0 => Some(p as usize),
                // A negative precision is none, and said to be bad.
                Some(_) => {
                    out.push_str("%!(BADPREC)");
                    None
                }
                None if star => None,
                None => Some(0),
            };
        }
        // An explicit argument index: %[2]s.
        if chars.peek().map(|&(_, c)| c) == Some('[') {
            let mut n = String::new();
            let mut probe = chars.clone();
            probe.next();
            let mut closed = false;
            for (_, d) in probe.by_ref() {
                if d == ']' {
                    closed = true;
                    break;
                }
                n.push(d);
            }
            match n.parse::<usize>() {
                Ok(i) if closed && i >= 1 && i <= args.len() => {
                    chars = probe;
                    next = i - 1;
                    reordered = true;
                }
                _ => {
                    chars = probe;
                    out.push_str("%!(BADINDEX)");
                    continue;
                }
            }
        }
        let Some((_, verb)) = chars.next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        let Some(arg) = args.get(next) else {
            let _ = write!(out, "%!{verb}(MISSING)");
            continue;
        };
        next += 1;
        if verb == 'v' {
            // %+v marks struct fields; numbers get no sign from it.
            spec.plus = false;
        }
        format_arg(&mut out, arg, verb, spec);
    }
    if !reordered && next < args.len() {
        out.push_str("%!(EXTRA ");
        for (i, a) in args[next..].iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            match a {
                Value::Nil | Value::Missing => out.push_str("<nil>"),
                a => {
                    let _ = write!(out, "{}=", a.type_name());
                    write_plain(&mut out, a);
                }
            }
        }
        out.push(')');
    }
    out
}

/// `n` times `c`, copied in blocks: a width of a million is written a
/// million times over in one `printf`.
fn fill_with(out: &mut String, c: char, n: usize) {
    let mut buf = [0u8; 4];
    out.push_str(&c.encode_utf8(&mut buf).repeat(n));
}

fn pad(out: &mut String, s: &str, spec: Spec, zero_ok: bool) {
    let n = s.chars().count();
    let w = spec.width.unwrap_or(0);
    if n >= w {
        out.push_str(s);
        return;
    }
    let fill = w - n;
    if spec.minus {
        out.push_str(s);
        fill_with(out, ' ', fill);
    } else if spec.zero && zero_ok {
        // Zeros go after a sign.
        let (sign, rest) = match s.chars().next() {
            Some(c @ ('+' | '-' | ' ')) if n > 1 => (Some(c), &s[1..]),
            _ => (None, s),
        };
        if let Some(c) = sign {
            out.push(c);
        }
        fill_with(out, '0', fill);
        out.push_str(rest);
    } else {
        fill_with(out, ' ', fill);
        out.push_str(s);
    }
}

fn bad_verb(out: &mut String, v: &Value, verb: char) {
    match v {
        Value::Nil | Value::Missing => {
            let _ = write!(out, "%!{verb}(<nil>)");
        }
        v => {
            let _ = write!(out, "%!{verb}({}=", v.type_name());
            write_plain(out, v);
            out.push(')');
        }
    }
}

/// `v` as `fmt.Sprint` shows it.
pub(crate) fn plain(v: &Value) -> String {
    let mut s = String::new();
    write_plain(&mut s, v);
    s
}

/// The most text a value is written as: printing stops there (a value
/// shared many times inside itself is small to make and huge to write),
/// and the output's own limit, or the budget, refuses it.
const MAX_TEXT: usize = 64 << 20;

/// `v` as `%v` writes it (and `fmt.Print`).
pub(crate) fn write_plain(out: &mut String, v: &Value) {
    format_arg(out, v, 'v', Spec::default());
}

fn format_arg(out: &mut String, v: &Value, verb: char, spec: Spec) {
    if verb == 'T' {
        pad(out, &v.type_name(), spec, false);
        return;
    }
    if verb == 'v' && spec.sharp {
        let mut s = String::new();
        go_syntax(&mut s, v, true);
        pad(out, &s, spec, false);
        return;
    }
    match v {
        Value::Nil | Value::Missing => {
            if verb == 'v' {
                pad(out, "<nil>", spec, false);
            } else {
                bad_verb(out, v, verb);
            }
        }
        Value::Bool(b) => match verb {
            'v' | 't' => pad(out, if *b { "true" } else { "false" }, spec, false),
            _ => bad_verb(out, v, verb),
        },
        Value::Int(i, _) => format_int(out, v, *i, verb, spec),
        Value::Float(f) => format_float_verb(out, v, *f, verb, spec),
        Value::Str(s) => format_str(out, v, s, verb, spec),
        Value::Time(_) => match verb {
            'v' | 's' => pad(out, &super::time::go_string(time_of(v)), spec, false),
            'q' => pad(
                out,
                &quote(&super::time::go_string(time_of(v)), false),
                spec,
                false,
            ),
            _ => bad_verb(out, v, verb),
        },
        Value::List(l, _) => {
            out.push('[');
            for (i, e) in l.iter().enumerate() {
                if out.len() > MAX_TEXT {
                    break;
                }
                if i > 0 {
                    out.push(' ');
                }
                format_arg(out, e, verb, spec);
            }
            out.push(']');
        }
        Value::Map(m, _) => {
            out.push_str("map[");
            for (i, (k, e)) in m.borrow().iter().enumerate() {
                if out.len() > MAX_TEXT {
                    break;
                }
                if i > 0 {
                    out.push(' ');
                }
                format_arg(out, &Value::from(k.as_str()), verb, spec);
                out.push(':');
                format_arg(out, e, verb, spec);
            }
            out.push(']');
        }
    }
}

fn time_of(v: &Value) -> i128 {
    match v {
        Value::Time(t) => *t,
        _ => 0,
    }
}

fn format_int(out: &mut String, v: &Value, i: i64, verb: char, spec: Spec) {
    let neg = i < 0;
    let u = i.unsigned_abs();
    let (mut digits, prefix) = match verb {
        'v' | 'd' => (u.to_string(), ""),
        'b' => (format!("{u:b}"), if spec.sharp { "0b" } else { "" }),
        'o' => (format!("{u:o}"), if spec.sharp { "0" } else { "" }),
        'O' => (format!("{u:o}"), "0o"),
        'x' => (format!("{u:x}"), if spec.sharp { "0x" } else { "" }),
        'X' => (format!("{u:X}"), if spec.sharp { "0X" } else { "" }),
        'c' => {
            let c = char::from_u32(i as u32)
                .filter(|_| (0..=0x10FFFF).contains(&i))
                .unwrap_or('\u{FFFD}');
            pad(out, &c.to_string(), spec, false);
            return;
        }
        'q' => {
            let c = char::from_u32(i as u32)
                .filter(|_| (0..=0x10FFFF).contains(&i))
                .unwrap_or('\u{FFFD}');
            pad(out, &quote_rune(c, spec.plus), spec, false);
            return;
        }
        'U' => {
            let mut s = format!("U+{u:04X}");
            if let Some(c) = char::from_u32(i as u32).filter(|_| spec.sharp) {
                let _ = write!(s, " '{c}'");
            }
            pad(out, &s, spec, false);
            return;
        }
        _ => {
            bad_verb(out, v, verb);
            return;
        }
    };
    if let Some(p) = spec.prec {
        if p == 0 && u == 0 {
            digits.clear();
        }
        if digits.len() < p {
            digits.insert_str(0, &"0".repeat(p - digits.len()));
        }
    }
    let sign = if neg {
        "-"
    } else if spec.plus {
        "+"
    } else if spec.space {
        " "
    } else {
        ""
    };
    let s = format!("{sign}{prefix}{digits}");
    if spec.zero && spec.prec.is_none() && !spec.minus {
        let w = spec.width.unwrap_or(0);
        let body = format!("{prefix}{digits}");
        let fill = w.saturating_sub(sign.len() + body.len());
        out.push_str(sign);
        out.push_str(prefix);
        fill_with(out, '0', fill);
        out.push_str(&digits);
        return;
    }
    pad(out, &s, spec, false);
}

fn format_float_verb(out: &mut String, v: &Value, f: f64, verb: char, spec: Spec) {
    let mut s = match verb {
        'x' | 'X' => {
            let h = hex_float(f, spec.prec);
            if verb == 'X' { h.to_uppercase() } else { h }
        }
        'v' | 'g' | 'G' => format_float(f, if verb == 'G' { 'G' } else { 'g' }, spec.prec),
        'e' | 'E' => format_float(f, verb, Some(spec.prec.unwrap_or(6))),
        'f' | 'F' => format_float(f, 'f', Some(spec.prec.unwrap_or(6))),
        _ => {
            bad_verb(out, v, verb);
            return;
        }
    };
    if !f.is_finite() {
        // Go writes infinities with their sign and NaN bare (signed only
        // when asked), padded with spaces, never zeros.
        let s = match (f.is_nan(), spec.plus, spec.space) {
            (true, true, _) => "+NaN".to_owned(),
            (true, false, true) => " NaN".to_owned(),
            (true, false, false) => "NaN".to_owned(),
            (false, ..) if f > 0.0 => "+Inf".to_owned(),
            (false, ..) => "-Inf".to_owned(),
        };
        pad(
            out,
            &s,
            Spec {
                zero: false,
                ..spec
            },
            false,
        );
        return;
    }
    if spec.sharp && !s.contains('.') && !s.contains(['e', 'E']) {
        s.push('.');
    }
    if !s.starts_with('-') {
        if spec.plus {
            s.insert(0, '+');
        } else if spec.space {
            s.insert(0, ' ');
        }
    }
    pad(out, &s, spec, true);
}

/// Go's `%x` of a float: `0x1.8p+00`.
fn hex_float(f: f64, prec: Option<usize>) -> String {
    if !f.is_finite() {
        return format_float(f, 'g', None);
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if f == 0.0 {
        let zeros = prec.map_or(String::new(), |p| {
            if p > 0 {
                format!(".{}", "0".repeat(p))
            } else {
                String::new()
            }
        });
        return format!("{sign}0x0{zeros}p+00");
    }
    let bits = f.abs().to_bits();
    let mut exp = ((bits >> 52) & 0x7ff) as i32;
    let mut mant = bits & ((1u64 << 52) - 1);
    if exp == 0 {
        exp = -1022;
        while mant & (1u64 << 52) == 0 {
            mant <<= 1;
            exp -= 1;
        }
        mant &= (1u64 << 52) - 1;
    } else {
        exp -= 1023;
    }
    let mut frac = format!("{mant:013x}");
    let mut lead = 1u64;
    if let Some(p) = prec.filter(|&p| p < 13) {
        // Round to p hex digits, half to even.
        let shift = 4 * (13 - p) as u32;
        let full = (1u64 << 52) | mant;
        let keep = full >> shift;
        let rest = full & ((1u64 << shift) - 1);
        let half = 1u64 << (shift - 1);
        let rounded = if rest > half || (rest == half && keep & 1 == 1) {
            keep + 1
        } else {
            keep
        };
        let bits_kept = 4 * p as u32;
        if rounded >> bits_kept > 1 {
            exp += 1;
            lead = 1;
            frac = if p > 0 {
                format!(
                    "{:0width$x}",
                    (rounded >> 1) & ((1u64 << bits_kept) - 1),
                    width = p
                )
            } else {
                String::new()
            };
        } else {
            lead = rounded >> bits_kept;
            frac = if p > 0 {
                format!(
                    "{:0width$x}",
                    rounded & ((1u64 << bits_kept) - 1),
                    width = p
                )
            } else {
                String::new()
            };
        }
    } else {
        while frac.ends_with('0') {
            frac.pop();
        }
        if let Some(p) = prec {
            while frac.len() < p {
                frac.push('0');
            }
        }
    }
    let dot = if frac.is_empty() {
        String::new()
    } else {
        format!(".{frac}")
    };
    let esign = if exp < 0 { '-' } else { '+' };
    format!("{sign}0x{lead}{dot}p{esign}{:02}", exp.abs())
}

fn format_str(out: &mut String, v: &Value, s: &str, verb: char, spec: Spec) {
    let truncated: String;
    let s = match spec.prec {
        Some(p) if matches!(verb, 'v' | 's' | 'q') => {
            truncated = s.chars().take(p).collect();
            truncated.as_str()
        }
        _ => s,
    };
    match verb {
        'v' | 's' => pad(out, s, spec, true),
        'q' => {
            let q = if spec.sharp
                && !s.contains('`')
                && s.chars().all(|c| c == '\t' || !c.is_control())
            {
                format!("`{s}`")
            } else {
                quote(s, spec.plus)
            };
            pad(out, &q, spec, true)
        }
        'x' | 'X' => {
            let bytes = match spec.prec {
                Some(p) => &s.as_bytes()[..p.min(s.len())],
                None => s.as_bytes(),
            };
            let mut h = String::new();
            for (i, b) in bytes.iter().enumerate() {
                if spec.space && i > 0 {
                    h.push(' ');
                }
                if spec.sharp && (spec.space || i == 0) {
                    h.push_str(if verb == 'x' { "0x" } else { "0X" });
                }
                if verb == 'x' {
                    let _ = write!(h, "{b:02x}");
                } else {
                    let _ = write!(h, "{b:02X}");
                }
            }
            pad(out, &h, spec, true)
        }
        _ => bad_verb(out, v, verb),
    }
}

/// Whether Go's `strconv.IsPrint` holds, approximately: not a control
/// character and not a space other than U+0020.
fn printable(c: char) -> bool {
    !c.is_control()
        && (c == ' ' || !c.is_whitespace())
        && !matches!(c, '\u{ad}' | '\u{feff}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{206f}' | '\u{fff9}'..='\u{fffb}' | '\u{e000}'..='\u{f8ff}')
}

fn escape_into(out: &mut String, c: char, quote_char: char, ascii_only: bool) {
    match c {
        '\x07' => out.push_str("\\a"),
        '\x08' => out.push_str("\\b"),
        '\x0c' => out.push_str("\\f"),
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\x0b' => out.push_str("\\v"),
        '\\' => out.push_str("\\\\"),
        c if c == quote_char => {
            out.push('\\');
            out.push(c);
        }
        c if (c as u32) < 0x80 && printable(c) => out.push(c),
        c if (c as u32) < 0x80 => {
            let _ = write!(out, "\\x{:02x}", c as u32);
        }
        c if printable(c) && !ascii_only => out.push(c),
        c if (c as u32) < 0x10000 => {
            let _ = write!(out, "\\u{:04x}", c as u32);
        }
        c => {
            let _ = write!(out, "\\U{:08x}", c as u32);
        }
    }
}

/// Go's `strconv.Quote` (`QuoteToASCII` with `ascii_only`).
pub fn quote(s: &str, ascii_only: bool) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        escape_into(&mut out, c, '"', ascii_only);
    }
    out.push('"');
    out
}

fn quote_rune(c: char, ascii_only: bool) -> String {
    let mut out = String::from("'");
    escape_into(&mut out, c, '\'', ascii_only);
    out.push('\'');
    out
}

/// `%#v`: Go syntax.
fn go_syntax(out: &mut String, v: &Value, top: bool) {
    match v {
        Value::Nil | Value::Missing => {
            out.push_str(if top { "<nil>" } else { "interface {}(nil)" })
        }
        Value::Str(s) => out.push_str(&quote(s, false)),
        Value::Int(i, _) => {
            let _ = write!(out, "{i}");
        }
        Value::Float(f) => {
            let s = format_float(*f, 'g', None);
            out.push_str(&s);
            if !s.contains(['.', 'e', 'N', 'I']) {
                out.push_str(".0");
            }
        }
        Value::Bool(b) => {
            let _ = write!(out, "{b}");
        }
        Value::List(l, _) => {
            out.push_str(&v.type_name());
            out.push('{');
            for (i, e) in l.iter().enumerate() {
                if out.len() > MAX_TEXT {
                    break;
                }
                if i > 0 {
                    out.push_str(", ");
                }
                go_syntax(out, e, false);
            }
            out.push('}');
        }
        Value::Map(m, _) => {
            out.push_str(&v.type_name());
            out.push('{');
            for (i, (k, e)) in m.borrow().iter().enumerate() {
                if out.len() > MAX_TEXT {
                    break;
                }
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&quote(k, false));
                out.push(':');
                go_syntax(out, e, false);
            }
            out.push('}');
        }
        Value::Time(t) => out.push_str(&super::time::go_string(*t)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_format_of_many_wide_verbs_stops_at_the_most_text() {
        // 370 verbs of a million characters each: 370 MB in Go; here the
        // text stops past 64 MiB (and the budget refuses it), quickly.
        let format = "%999999[1]d".repeat(370);
        let out = sprintf(&format, &[Value::int(1)]);
        assert!(
            out.len() > MAX_TEXT && out.len() < MAX_TEXT + 2_000_000,
            "{}",
            out.len()
        );
        assert!(out.ends_with(&format!("{}1", " ".repeat(999_998))));
    }

    #[test]
    fn printf_follows_go() {
        let s = |v: &str| Value::from(v);
        assert_eq!(
            sprintf("%5d|%-5s|%05d", &[Value::int(42), s("ab"), Value::int(-42)]),
            "   42|ab   |-0042"
        );
        assert_eq!(sprintf("%d", &[s("hi")]), "%!d(string=hi)");
        assert_eq!(sprintf("%s %s", &[s("a")]), "a %!s(MISSING)");
        assert_eq!(sprintf("%s", &[s("a"), Value::int(1)]), "a%!(EXTRA int=1)");
        assert_eq!(
            sprintf(
                "%.2f %e %q %x",
                &[
                    Value::Float(1.23456),
                    Value::Float(1500.0),
                    s("a\"b"),
                    Value::int(255)
                ]
            ),
            "1.23 1.500000e+03 \"a\\\"b\" ff"
        );
        assert_eq!(
            sprintf(
                "%v %T",
                &[Value::list(vec![s("a"), Value::int(1)]), Value::Float(1.0)]
            ),
            "[a 1] float64"
        );
    }

    #[test]
    fn json_follows_go() {
        let v = Value::list(vec![
            Value::Float(1e6),
            Value::Float(1e21),
            Value::Float(1e-7),
            Value::from("<a&b>"),
        ]);
        assert_eq!(
            json(&v, None, true).unwrap(),
            r#"[1000000,1e+21,1e-7,"\u003ca\u0026b\u003e"]"#
        );
    }
}
