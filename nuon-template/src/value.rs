//! The values a template works on, with Go's types, truth and printing.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::rc::Rc;

/// The element type of a list or map, for Go's type names (`[]string`,
/// `map[string]interface {}`) and for which functions accept it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Elem {
    /// `interface {}`: anything.
    Any,
    /// `string`.
    Str,
    /// `int`.
    Int,
    /// `[]interface {}` (sprig's `chunk`).
    List,
}

/// The integer types Go templates meet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IntType {
    /// `int`: literals, `len`, sprig's `int`.
    Int,
    /// `int64`: sprig's arithmetic.
    Int64,
    /// `int32`: a character literal (`'a'`).
    Rune,
}

/// A template value, as Go's `reflect.Value` of the data a template reads.
///
/// JSON data arrives the way Go's `encoding/json` decodes into
/// `interface{}`: numbers are `float64`, objects `map[string]interface {}`.
#[derive(Debug, Clone)]
pub enum Value {
    /// No value at all (Go's invalid `reflect.Value`): a missing map key.
    /// Printed as `<no value>`.
    Missing,
    /// A nil `interface{}` (JSON `null`).
    Nil,
    /// `bool`.
    Bool(bool),
    /// An integer of one of Go's integer types.
    Int(i64, IntType),
    /// `float64`.
    Float(f64),
    /// `string`.
    Str(Rc<str>),
    /// A slice.
    List(Rc<Vec<Value>>, Elem),
    /// A map with string keys, iterated in key order as Go's templates do.
    /// Shared and mutable, as a Go map is (sprig's `set` changes it in place).
    Map(Rc<RefCell<BTreeMap<String, Value>>>, Elem),
    /// A `time.Time`, as Unix nanoseconds (UTC).
    Time(i128),
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(Rc::from(s))
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(Rc::from(s))
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

impl Value {
    /// Whether it is a list or a map.
    pub(crate) fn is_container(&self) -> bool {
        matches!(self, Value::List(..) | Value::Map(..))
    }

    /// A Go `int`.
    pub fn int(i: i64) -> Value {
        Value::Int(i, IntType::Int)
    }

    /// A `[]interface {}`.
    pub fn list(items: Vec<Value>) -> Value {
        Value::List(Rc::new(items), Elem::Any)
    }

    /// A `[]string`.
    pub fn strings(items: Vec<String>) -> Value {
        Value::List(
            Rc::new(items.into_iter().map(Value::from).collect()),
            Elem::Str,
        )
    }

    /// A `map[string]interface {}`.
    pub fn map(m: BTreeMap<String, Value>) -> Value {
        Value::Map(Rc::new(RefCell::new(m)), Elem::Any)
    }

    /// A `map[string]string`.
    pub fn string_map(m: BTreeMap<String, Value>) -> Value {
        Value::Map(Rc::new(RefCell::new(m)), Elem::Str)
    }

    /// The value Go's `encoding/json` gives for `v` decoded into `interface{}`.
    pub fn from_json(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Nil,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
            serde_json::Value::String(s) => Value::from(s.as_str()),
            serde_json::Value::Array(a) => Value::list(a.iter().map(Value::from_json).collect()),
            serde_json::Value::Object(o) => Value::map(
                o.iter()
                    .map(|(k, v)| (k.clone(), Value::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// Go's type name, as `%T` prints it.
    pub fn type_name(&self) -> String {
        match self {
            Value::Missing | Value::Nil => "<nil>".into(),
            Value::Bool(_) => "bool".into(),
            Value::Int(_, IntType::Int) => "int".into(),
            Value::Int(_, IntType::Int64) => "int64".into(),
            Value::Int(_, IntType::Rune) => "int32".into(),
            Value::Float(_) => "float64".into(),
            Value::Str(_) => "string".into(),
            Value::List(_, e) => format!("[]{}", elem_name(*e)),
            Value::Map(_, e) => format!("map[string]{}", elem_name(*e)),
            Value::Time(_) => "time.Time".into(),
        }
    }

    /// Go's `reflect.Kind` name.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Missing | Value::Nil => "invalid",
            Value::Bool(_) => "bool",
            Value::Int(_, IntType::Int) => "int",
            Value::Int(_, IntType::Int64) => "int64",
            Value::Int(_, IntType::Rune) => "int32",
            Value::Float(_) => "float64",
            Value::Str(_) => "string",
            Value::List(..) => "slice",
            Value::Map(..) => "map",
            Value::Time(_) => "struct",
        }
    }

    /// Go's template truth: not the zero value of its type.
    pub fn truth(&self) -> bool {
        match self {
            Value::Missing | Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i, _) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::List(l, _) => !l.is_empty(),
            Value::Map(m, _) => !m.borrow().is_empty(),
            Value::Time(_) => true,
        }
    }

    /// The string inside, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    /// This value as JSON, the way Go's `encoding/json` marshals it.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Missing | Value::Nil => serde_json::Value::Null,
            Value::Bool(b) => (*b).into(),
            Value::Int(i, _) => (*i).into(),
            Value::Float(f) => serde_json::Number::from_f64(*f)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null),
            Value::Str(s) => serde_json::Value::String(s.to_string()),
            Value::List(l, _) => l.iter().map(Value::to_json).collect(),
            Value::Map(m, _) => serde_json::Value::Object(
                m.borrow()
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
            Value::Time(t) => serde_json::Value::String(super::time::rfc3339_nano(*t)),
        }
    }
}

fn elem_name(e: Elem) -> &'static str {
    match e {
        Elem::Any => "interface {}",
        Elem::Str => "string",
        Elem::Int => "int",
        Elem::List => "[]interface {}",
    }
}

/// The decimal digits of `f` (no leading or trailing zeros) and the
/// position of the decimal point: `f = 0.DIGITS × 10^point`. With `sig`,
/// rounded to that many significant digits; otherwise the shortest digits
/// that read back as `f`.
/// More significant digits than an f64's exact decimal expansion has (767).
const MAX_F64_DIGITS: usize = 800;

/// More fractional digits than an f64's exact decimal expansion has (1,074,
/// the smallest subnormal's).
const MAX_F64_FRACTION: usize = 1_100;

fn digits(f: f64, sig: Option<usize>) -> (String, i32) {
    let s = match sig {
        // An f64's exact decimal expansion has at most 767 significant
        // digits; past them are zeros, which are dropped below (and Rust's
        // formatter takes no precision past `u16::MAX`).
        Some(p) => format!("{:.*e}", p.clamp(1, MAX_F64_DIGITS) - 1, f.abs()),
        None => format!("{:e}", f.abs()),
    };
    let (mant, exp) = s.split_once('e').unwrap_or((&s, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let mut d: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    while d.len() > 1 && d.ends_with('0') {
        d.pop();
    }
    if d == "0" {
        return (d, 1);
    }
    (d, exp + 1)
}

fn fmt_e(neg: bool, d: &str, point: i32, prec: usize, e: char) -> String {
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    let mut ds = d.chars();
    s.push(ds.next().unwrap_or('0'));
    if prec > 0 {
        s.push('.');
        let rest: String = ds.collect();
        s.push_str(&rest);
        for _ in rest.len()..prec {
            s.push('0');
        }
    }
    let x = if d == "0" { 0 } else { point - 1 };
    let _ = write!(s, "{e}{}{:02}", if x < 0 { '-' } else { '+' }, x.abs());
    s
}

fn fmt_f(neg: bool, d: &str, point: i32, prec: usize) -> String {
    let mut s = String::new();
    if neg {
        s.push('-');
    }
    let db = d.as_bytes();
    let digit = |i: i32| -> char {
        if i >= 0 && (i as usize) < db.len() {
            db[i as usize] as char
        } else {
            '0'
        }
    };
    if point > 0 {
        for i in 0..point {
            s.push(digit(i));
        }
    } else {
        s.push('0');
    }
    if prec > 0 {
        s.push('.');
        for i in 0..prec as i32 {
            s.push(digit(point + i));
        }
    }
    s
}

/// Formats `f` as Go's `strconv.FormatFloat(f, verb, prec, 64)` does, for
/// the verbs `e`, `E`, `f`, `g` and `G`; `None` is the shortest precision.
pub fn format_float(f: f64, verb: char, prec: Option<usize>) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    let neg = f.is_sign_negative();
    match verb {
        'e' | 'E' => {
            let (d, point) = match prec {
                Some(p) => digits(f, Some(p + 1)),
                None => digits(f, None),
            };
            let p = prec.unwrap_or(d.len() - 1);
            fmt_e(neg, &d, point, p, verb)
        }
        'f' | 'F' => match prec {
            Some(p) => {
                // Past the 1,074 fractional digits of the smallest f64,
                // every digit is a zero.
                let exact = p.min(MAX_F64_FRACTION);
                let mut s = format!("{:.*}", exact, f.abs());
                s.extend(std::iter::repeat_n('0', p - exact));
                if neg { format!("-{s}") } else { s }
            }
            None => {
                let (d, point) = digits(f, None);
                let p = (d.len() as i32 - point).max(0) as usize;
                fmt_f(neg, &d, point, p)
            }
        },
        _ => {
            let e = if verb == 'G' { 'E' } else { 'e' };
            let (d, point, eprec, mut p) = match prec {
                None => {
                    let (d, point) = digits(f, None);
                    let n = d.len();
                    (d, point, 6, n)
                }
                Some(p) => {
                    let p = p.max(1);
                    let (d, point) = digits(f, Some(p));
                    let mut eprec = p as i32;
                    if eprec > d.len() as i32 && d.len() as i32 >= point {
                        eprec = d.len() as i32;
                    }
                    (d, point, eprec, p)
                }
            };
            let x = if d == "0" { 0 } else { point - 1 };
            if x < -4 || x >= eprec {
                if p > d.len() {
                    p = d.len();
                }
                fmt_e(neg, &d, point, p - 1, e)
            } else {
                if p as i32 > point {
                    p = d.len();
                }
                fmt_f(neg, &d, point, (p as i32 - point).max(0) as usize)
            }
        }
    }
}

/// How deep lists and maps may nest in a value a function returns: the
/// engine, the printers and dropping a value all recurse on it, on
/// threads with small stacks.
pub(crate) const MAX_VALUE_DEPTH: usize = 100;

/// Why a value may not be kept.
pub(crate) enum Unkeepable {
    /// Lists and maps nest past [`MAX_VALUE_DEPTH`].
    TooDeep,
    /// A map holds itself (sprig's `set $d "k" $d`): it cannot be printed,
    /// copied or compared.
    Cycle,
}

/// Checks how lists and maps nest in `v`, visiting each one once however
/// often it is shared; the number visited, the work it took.
pub(crate) fn check_nesting(v: &Value) -> Result<u64, Unkeepable> {
    use std::collections::{HashMap, HashSet};
    struct Walk {
        /// Finished containers and their depth.
        done: HashMap<usize, usize>,
        /// Containers being walked now (a cycle meets one again).
        open: HashSet<usize>,
    }
    impl Walk {
        fn depth(&mut self, v: &Value, level: usize) -> Result<usize, Unkeepable> {
            let (id, children): (usize, Vec<Value>) = match v {
                Value::List(l, _) => {
                    let id = Rc::as_ptr(l) as usize;
                    if let Some(d) = self.done.get(&id) {
                        return Ok(*d);
                    }
                    (id, l.iter().filter(|c| c.is_container()).cloned().collect())
                }
                Value::Map(m, _) => {
                    let id = Rc::as_ptr(m) as *const u8 as usize;
                    if let Some(d) = self.done.get(&id) {
                        return Ok(*d);
                    }
                    let children = m
                        .borrow()
                        .values()
                        .filter(|c| c.is_container())
                        .cloned()
                        .collect();
                    (id, children)
                }
                _ => return Ok(0),
            };
            if level >= MAX_VALUE_DEPTH {
                return Err(Unkeepable::TooDeep);
            }
            if !self.open.insert(id) {
                return Err(Unkeepable::Cycle);
            }
            let mut deepest = 0;
            for c in &children {
                deepest = deepest.max(self.depth(c, level + 1)?);
            }
            self.open.remove(&id);
            let d = deepest + 1;
            if level + d > MAX_VALUE_DEPTH {
                return Err(Unkeepable::TooDeep);
            }
            self.done.insert(id, d);
            Ok(d)
        }
    }
    if !v.is_container() {
        return Ok(0);
    }
    let mut w = Walk {
        done: HashMap::new(),
        open: HashSet::new(),
    };
    w.depth(v, 0)?;
    Ok(w.done.len() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_go_prints_them() {
        for (f, want) in [
            (3.0, "3"),
            (1.5, "1.5"),
            (1e6, "1e+06"),
            (100000.0, "100000"),
            (123456.7, "123456.7"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (1e21, "1e+21"),
            (-2.0, "-2"),
            (0.0, "0"),
            (1234567.0, "1.234567e+06"),
        ] {
            assert_eq!(format_float(f, 'g', None), want, "{f}");
        }
        assert_eq!(format_float(1.23456, 'f', Some(2)), "1.23");
        assert_eq!(format_float(1.5, 'e', None), "1.5e+00");
        assert_eq!(format_float(1.5, 'e', Some(3)), "1.500e+00");
        assert_eq!(format_float(0.000123, 'g', Some(2)), "0.00012");
        assert_eq!(format_float(123456.0, 'g', Some(3)), "1.23e+05");
        assert_eq!(format_float(1.0, 'g', Some(3)), "1");
        assert_eq!(format_float(2.5, 'f', None), "2.5");
        // Precisions past what Rust's formatter takes (found by the fuzzer:
        // `printf "%.99999g" .pi` panicked).
        let pi = std::f64::consts::PI;
        let g = format_float(pi, 'g', Some(99_999));
        assert!(g.starts_with("3.14159265358979311599796346854"), "{g}");
        assert!(g.len() < 1_000, "{}", g.len());
        let f = format_float(0.1, 'f', Some(70_000));
        assert_eq!(f.len(), 70_002);
        assert!(f.starts_with("0.1000000000000000055511151231257827") && f.ends_with("000"));
        assert_eq!(format_float(pi, 'e', Some(70_000)).len(), 70_006);
    }
}
