//! Helm `[values]` as Nuon gives them to a chart: `--set` style, so a
//! dotted key is a path into nested values (`"ingress.host" = "x"` is
//! `{ingress: {host: x}}`, `\.` a literal dot, `list[0]` an element) and a
//! rendered string is typed as `--set` types it (`true`, `false`, `null`,
//! integers).

use serde_json::{Map, Value};

/// One step of a key's path.
#[derive(Debug, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn path_of(key: &str) -> Result<Vec<Seg>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = key.chars().peekable();
    let bad = |why: &str| format!("value key {key:?}: {why}");
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(n) => cur.push(n),
                None => return Err(bad("ends with a lone '\\'")),
            },
            '.' => {
                if cur.is_empty() && !matches!(out.last(), Some(Seg::Index(_))) {
                    return Err(bad("has an empty part"));
                }
                if !cur.is_empty() {
                    out.push(Seg::Key(std::mem::take(&mut cur)));
                }
            }
            '[' => {
                if !cur.is_empty() {
                    out.push(Seg::Key(std::mem::take(&mut cur)));
                }
                let mut n = String::new();
                loop {
                    match chars.next() {
                        Some(']') => break,
                        Some(d) if d.is_ascii_digit() => n.push(d),
                        _ => return Err(bad("a list index is written [N]")),
                    }
                }
                let i: usize = n.parse().map_err(|_| bad("a list index is written [N]"))?;
                if i > 65_535 {
                    return Err(bad("a list index is at most 65535"));
                }
                out.push(Seg::Index(i));
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(Seg::Key(cur));
    } else if out.is_empty() || matches!(out.last(), Some(Seg::Key(_))) && key.ends_with('.') {
        return Err(bad("has an empty part"));
    }
    Ok(out)
}

/// Helm's `--set` typing of a string: `true`/`false`, `null` and integers
/// (without a leading zero) become those; anything else stays a string.
pub fn set_typed(s: &str) -> Value {
    if s.eq_ignore_ascii_case("true") {
        return Value::Bool(true);
    }
    if s.eq_ignore_ascii_case("false") {
        return Value::Bool(false);
    }
    if s.eq_ignore_ascii_case("null") {
        return Value::Null;
    }
    if s == "0" {
        return Value::from(0);
    }
    if !s.starts_with('0')
        && let Ok(i) = s.parse::<i64>()
    {
        return Value::from(i);
    }
    Value::String(s.to_owned())
}

fn put(target: &mut Value, path: &[Seg], value: Value) {
    let Some((first, rest)) = path.split_first() else {
        *target = value;
        return;
    };
    match first {
        Seg::Key(k) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(m) = target {
                put(m.entry(k.clone()).or_insert(Value::Null), rest, value);
            }
        }
        Seg::Index(i) => {
            if !target.is_array() {
                *target = Value::Array(Vec::new());
            }
            if let Value::Array(a) = target {
                if a.len() <= *i {
                    a.resize(i + 1, Value::Null);
                }
                put(&mut a[*i], rest, value);
            }
        }
    }
}

/// The chart values of rendered `[values]`: dotted keys nested, strings
/// typed as `--set` types them, later keys over earlier ones.
pub fn helm_values<'a>(
    values: impl IntoIterator<Item = (&'a String, &'a Value)>,
) -> Result<Map<String, Value>, String> {
    let mut root = Value::Object(Map::new());
    for (k, v) in values {
        let path = path_of(k)?;
        let v = match v {
            Value::String(s) => set_typed(s),
            other => other.clone(),
        };
        put(&mut root, &path, v);
    }
    match root {
        Value::Object(m) => Ok(m),
        _ => Ok(Map::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nest(pairs: &[(&str, Value)]) -> Value {
        let owned: Vec<(String, Value)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect();
        Value::Object(helm_values(owned.iter().map(|(k, v)| (k, v))).unwrap())
    }

    #[test]
    fn dotted_keys_nest_and_strings_are_typed_as_set_types_them() {
        assert_eq!(
            nest(&[
                ("ingress.host", json!("acme.example.com")),
                ("ingress.enabled", json!("true")),
                ("replicaCount", json!("3")),
                ("image.tag", json!("0123")),
                ("annotations.a\\.b/c", json!("x")),
                ("hosts[1].name", json!("b")),
                ("plain", json!(7)),
                ("nothing", json!("null")),
            ]),
            json!({
                "ingress": {"host": "acme.example.com", "enabled": true},
                "replicaCount": 3,
                "image": {"tag": "0123"},
                "annotations": {"a.b/c": "x"},
                "hosts": [null, {"name": "b"}],
                "plain": 7,
                "nothing": null
            })
        );
    }

    #[test]
    fn bad_keys_say_why() {
        for k in ["a..b", ".a", "a[x]", "a\\"] {
            let owned = [(k.to_string(), json!(1))];
            assert!(
                helm_values(owned.iter().map(|(k, v)| (k, v))).is_err(),
                "{k}"
            );
        }
    }
}
