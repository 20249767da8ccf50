//! The schemas of Nuon's platform files (`stack.toml`, `permissions`,
//! `runbooks/`, ...): a table's keys and what each holds, read into JSON
//! with every string kept for the template checks.

use serde_json::{Map, Value};

use super::reader::{Located, Reader};
use nuon_core::app::Diagnostics;

/// What a key holds.
#[derive(Clone, Copy)]
pub(crate) enum K {
    Str,
    Bool,
    Int,
    StrList,
    StrMap,
    /// Anything (a free-form table or value).
    Any,
    Tables(&'static Spec),
}

impl K {
    /// What a key of this kind holds, in the reference's words.
    fn holds(self) -> &'static str {
        match self {
            K::Str => "a string",
            K::Bool => "a boolean",
            K::Int => "an integer",
            K::StrList => "an array of strings",
            K::StrMap => "a table of strings",
            K::Any => "any value",
            K::Tables(_) => "an array of tables",
        }
    }
}

/// A table's schema: its keys, and which are required.
pub(crate) struct Spec {
    pub keys: &'static [(&'static str, K)],
    pub required: &'static [&'static str],
}

/// Reads `r` against `spec` into JSON; every string goes to `strings` (for
/// template checks); unknown keys are warnings (Nuon ignores them).
pub(crate) fn read(
    r: &mut Reader<'_, '_>,
    d: &mut Diagnostics,
    spec: &Spec,
    strings: &mut Vec<Located>,
) -> Map<String, Value> {
    let mut out = Map::new();
    for &(key, kind) in spec.keys {
        r.holds(key, kind.holds());
        if spec.required.contains(&key) {
            r.holds(key, "required");
        }
        let present = r.get(key).is_some();
        if !present {
            if spec.required.contains(&key) {
                r.req_str(d, key);
            }
            continue;
        }
        let v = match kind {
            K::Str => r.str(d, key).map(|l| {
                strings.push(l.clone());
                Value::String(l.text)
            }),
            K::Bool => r.bool(d, key).map(Value::Bool),
            K::Int => r.int(d, key).map(Value::from),
            K::StrList => {
                let l = r.str_list(d, key);
                strings.extend(l.iter().cloned());
                Some(Value::Array(
                    l.into_iter().map(|x| Value::String(x.text)).collect(),
                ))
            }
            K::StrMap => {
                let m = r.str_map(d, key, strings);
                Some(Value::Object(
                    m.into_iter().map(|(k, v)| (k, Value::String(v))).collect(),
                ))
            }
            K::Any => r.any(d, key).map(|(j, _)| j),
            K::Tables(sub) => {
                let items: Vec<Value> = r
                    .tables(d, key)
                    .into_iter()
                    .map(|mut t| {
                        let m = read(&mut t, d, sub, strings);
                        t.finish(d, &[], |_| None);
                        Value::Object(m)
                    })
                    .collect();
                Some(Value::Array(items))
            }
        };
        if let Some(v) = v {
            out.insert(key.to_owned(), v);
        }
    }
    out
}

/// Deserializes what [`read`] gave; a shape it cannot take (a missing key
/// reported already) is `None`.
pub(crate) fn typed<T: serde::de::DeserializeOwned>(m: Map<String, Value>) -> Option<T> {
    serde_json::from_value(Value::Object(m)).ok()
}
