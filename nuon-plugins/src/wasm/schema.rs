//! Checks a plugin's config against the JSON schema its `info` gives.
//!
//! The subset of JSON Schema (2020-12) plugins use for configs: `type`
//! (one or a list), `enum`, `const`, `required`, `properties`,
//! `additionalProperties` (a boolean or a schema), `items`, `minItems`,
//! `maxItems`, `minLength`, `maxLength`, `minimum`, `maximum`, and
//! `anyOf`. Annotations (`title`, `description`, `default`, `$schema`,
//! `examples`) are ignored; so are keywords outside the subset, which the
//! plugin's own `validate` must then check.

use serde_json::Value;

/// Every way `value` breaks `schema`, each with its JSON path (`config.a.b`).
pub fn check(schema: &Value, value: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(schema, value, "config", &mut out);
    out
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_type(v: &Value, t: &str) -> bool {
    let actual = type_name(v);
    actual == t
        || (t == "number" && actual == "integer")
        || (t == "integer" && v.as_f64().is_some_and(|f| f.fract() == 0.0))
}

fn walk(schema: &Value, v: &Value, path: &str, out: &mut Vec<String>) {
    let Some(s) = schema.as_object() else {
        if schema == &Value::Bool(false) {
            out.push(format!("{path}: no value is allowed here"));
        }
        return;
    };
    match s.get("type") {
        Some(Value::String(t)) if !is_type(v, t) => {
            out.push(format!("{path}: expected {t}, found {}", type_name(v)));
            return;
        }
        Some(Value::Array(ts)) if !ts.iter().filter_map(Value::as_str).any(|t| is_type(v, t)) => {
            let names: Vec<&str> = ts.iter().filter_map(Value::as_str).collect();
            out.push(format!(
                "{path}: expected {}, found {}",
                names.join(" or "),
                type_name(v)
            ));
            return;
        }
        _ => {}
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(v)
    {
        let list: Vec<String> = options.iter().map(Value::to_string).collect();
        out.push(format!("{path}: {v} is not one of {}", list.join(", ")));
    }
    if let Some(c) = s.get("const")
        && c != v
    {
        out.push(format!("{path}: must be {c}"));
    }
    if let Some(Value::Array(any)) = s.get("anyOf")
        && !any.iter().any(|alt| check_at(alt, v))
    {
        out.push(format!("{path}: matches none of the allowed shapes"));
    }
    match v {
        Value::Object(map) => {
            if let Some(Value::Array(req)) = s.get("required") {
                for k in req.iter().filter_map(Value::as_str) {
                    if !map.contains_key(k) {
                        out.push(format!("{path}: {k:?} is required"));
                    }
                }
            }
            let props = s.get("properties").and_then(Value::as_object);
            for (k, child) in map {
                let at = format!("{path}.{k}");
                match props.and_then(|p| p.get(k)) {
                    Some(ps) => walk(ps, child, &at, out),
                    None => match s.get("additionalProperties") {
                        Some(Value::Bool(false)) => {
                            let known: Vec<&str> = props
                                .map(|p| p.keys().map(String::as_str).collect())
                                .unwrap_or_default();
                            out.push(format!("{at}: unknown key (known: {})", known.join(", ")));
                        }
                        Some(extra @ Value::Object(_)) => walk(extra, child, &at, out),
                        _ => {}
                    },
                }
            }
        }
        Value::Array(items) => {
            let n = items.len() as u64;
            if let Some(min) = s.get("minItems").and_then(Value::as_u64)
                && n < min
            {
                out.push(format!("{path}: needs at least {min} items, has {n}"));
            }
            if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
                && n > max
            {
                out.push(format!("{path}: allows at most {max} items, has {n}"));
            }
            if let Some(item) = s.get("items") {
                for (i, x) in items.iter().enumerate() {
                    walk(item, x, &format!("{path}[{i}]"), out);
                }
            }
        }
        Value::String(text) => {
            let n = text.chars().count() as u64;
            if let Some(min) = s.get("minLength").and_then(Value::as_u64)
                && n < min
            {
                out.push(format!("{path}: must be at least {min} characters"));
            }
            if let Some(max) = s.get("maxLength").and_then(Value::as_u64)
                && n > max
            {
                out.push(format!("{path}: must be at most {max} characters"));
            }
        }
        Value::Number(num) => {
            let f = num.as_f64().unwrap_or_default();
            if let Some(min) = s.get("minimum").and_then(Value::as_f64)
                && f < min
            {
                out.push(format!("{path}: must be at least {min}"));
            }
            if let Some(max) = s.get("maximum").and_then(Value::as_f64)
                && f > max
            {
                out.push(format!("{path}: must be at most {max}"));
            }
        }
        _ => {}
    }
}

fn check_at(schema: &Value, v: &Value) -> bool {
    let mut out = Vec::new();
    walk(schema, v, "", &mut out);
    out.is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reports_every_problem_with_its_path() {
        let schema = json!({
            "type": "object",
            "required": ["endpoint", "id"],
            "properties": {
                "endpoint": {"type": "string", "minLength": 8},
                "id": {"type": "string"},
                "fields": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
                "mode": {"enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2}
            },
            "additionalProperties": false
        });
        assert!(check(&schema, &json!({"endpoint": "http://x", "id": "a"})).is_empty());
        let problems = check(
            &schema,
            &json!({"endpoint": "h", "fields": {"seats": -1, "n": "x"}, "mode": "c", "tags": [1, "a", "b"], "extra": 1}),
        );
        let text = problems.join("\n");
        for want in [
            "config: \"id\" is required",
            "config.endpoint: must be at least 8 characters",
            "config.fields.seats: must be at least 0",
            "config.fields.n: expected integer, found string",
            "config.mode: \"c\" is not one of",
            "config.tags: allows at most 2 items",
            "config.tags[0]: expected string, found integer",
            "config.extra: unknown key",
        ] {
            assert!(text.contains(want), "missing {want:?} in:\n{text}");
        }
        assert_eq!(problems.len(), 8, "{text}");
    }
}
