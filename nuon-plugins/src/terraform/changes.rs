//! What a plan changes, attribute by attribute, as people approve it:
//! each changed attribute's path with its value before and after, masked
//! where Terraform marks it sensitive and said to be unknown where the
//! plan cannot know it (HCP Terraform's run view, in a few lines).

use serde_json::{Value, json};

/// The most attributes told of one resource.
const MAX_VALUES: usize = 20;

/// The longest value shown, in characters (longer ones are cut with `…`).
const MAX_VALUE_CHARS: usize = 120;

/// What a sensitive value reads as.
pub const SENSITIVE: &str = "(sensitive)";

/// What a value the plan cannot know reads as.
pub const UNKNOWN: &str = "(known after apply)";

/// The attributes a resource change of `terraform show -json` changes
/// (its `change` object), in order, at most twenty: each as `{"path",
/// "before", "after"}`, the values as short text (`5`, `"eu-west-1"`,
/// `(none)`), [`SENSITIVE`] where `before_sensitive`/`after_sensitive`
/// mark them, [`UNKNOWN`] where `after_unknown` does.
pub fn changed_values(change: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    walk(
        Marked {
            before: &change["before"],
            after: &change["after"],
            before_sensitive: &change["before_sensitive"],
            after_sensitive: &change["after_sensitive"],
            after_unknown: &change["after_unknown"],
        },
        "",
        &mut out,
    );
    out
}

/// One place in a change: the values and the marks Terraform gives them
/// there (a mark is `true` for the whole value, or a tree of marks shaped
/// like it).
#[derive(Clone, Copy)]
struct Marked<'a> {
    before: &'a Value,
    after: &'a Value,
    before_sensitive: &'a Value,
    after_sensitive: &'a Value,
    after_unknown: &'a Value,
}

impl<'a> Marked<'a> {
    /// The place at key or index `at` below this one.
    fn at(self, at: &dyn Fn(&'a Value) -> &'a Value) -> Marked<'a> {
        // A mark of `true` holds for everything below it.
        let mark = |m: &'a Value| if m == &Value::Bool(true) { m } else { at(m) };
        Marked {
            before: at(self.before),
            after: at(self.after),
            before_sensitive: mark(self.before_sensitive),
            after_sensitive: mark(self.after_sensitive),
            after_unknown: mark(self.after_unknown),
        }
    }
}

fn walk(m: Marked<'_>, path: &str, out: &mut Vec<Value>) {
    let unknown = m.after_unknown == &Value::Bool(true);
    if out.len() >= MAX_VALUES || (!unknown && m.before == m.after) {
        return;
    }
    let join = |k: &str| {
        if path.is_empty() {
            k.to_owned()
        } else {
            format!("{path}.{k}")
        }
    };
    let whole = m.before_sensitive == &Value::Bool(true)
        || m.after_sensitive == &Value::Bool(true)
        || unknown;
    match (m.before, m.after) {
        (Value::Object(b), Value::Object(a)) if !whole => {
            let keys: std::collections::BTreeSet<&String> = b.keys().chain(a.keys()).collect();
            for k in keys {
                walk(m.at(&|v: &Value| &v[k.as_str()]), &join(k), out);
            }
        }
        (Value::Array(b), Value::Array(a)) if !whole && b.len() == a.len() => {
            for i in 0..b.len() {
                walk(m.at(&|v: &Value| &v[i]), &format!("{path}[{i}]"), out);
            }
        }
        _ => {
            // Told whole: when anything in it, on either side, is marked
            // sensitive, both sides are masked (as Terraform shows them),
            // whatever the shapes (a list that grew, null to an object).
            let sensitive = marked(m.before_sensitive) || marked(m.after_sensitive);
            let shown = |v: &Value| {
                if sensitive {
                    SENSITIVE.to_owned()
                } else {
                    text(v)
                }
            };
            let after = if unknown {
                UNKNOWN.to_owned()
            } else {
                shown(m.after)
            };
            out.push(json!({
                "path": if path.is_empty() { "(whole value)" } else { path },
                "before": shown(m.before),
                "after": after,
            }));
        }
    }
}

/// Whether a mark tree marks anything: `true`, or `true` somewhere in it.
fn marked(mark: &Value) -> bool {
    match mark {
        Value::Bool(b) => *b,
        Value::Object(m) => m.values().any(marked),
        Value::Array(a) => a.iter().any(marked),
        _ => false,
    }
}

/// A value as short text: JSON, `(none)` for null, cut at
/// [`MAX_VALUE_CHARS`].
fn text(v: &Value) -> String {
    if v.is_null() {
        return "(none)".into();
    }
    let s = v.to_string();
    match s.char_indices().nth(MAX_VALUE_CHARS) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_changed_attribute_reads_before_and_after_with_secrets_masked() {
        let change = json!({
            "actions": ["update"],
            "before": {"input": 5, "output": 5, "id": "x", "tags": {"team": "a", "env": "dev"},
                       "password": "hunter2", "rules": [{"port": 80}], "note": null},
            "after": {"input": 9, "output": null, "id": "x", "tags": {"team": "b", "env": "dev"},
                      "password": "hunter3", "rules": [{"port": 8080}], "note": "hi"},
            "before_sensitive": {"password": true},
            "after_sensitive": {"password": true, "tags": {}},
            "after_unknown": {"output": true},
        });
        let got: Vec<(String, String, String)> = changed_values(&change)
            .iter()
            .map(|v| {
                (
                    v["path"].as_str().unwrap().to_owned(),
                    v["before"].as_str().unwrap().to_owned(),
                    v["after"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        let want = [
            ("input", "5", "9"),
            ("note", "(none)", "\"hi\""),
            ("output", "5", UNKNOWN),
            ("password", SENSITIVE, SENSITIVE),
            ("rules[0].port", "80", "8080"),
            ("tags.team", "\"a\"", "\"b\""),
        ]
        .map(|(p, b, a)| (p.to_owned(), b.to_owned(), a.to_owned()));
        assert_eq!(got, want);
        // A sensitive block is masked whole, never walked into.
        let change = json!({
            "before": {"creds": {"key": "old"}}, "after": {"creds": {"key": "new"}},
            "before_sensitive": {"creds": true}, "after_sensitive": {"creds": true},
            "after_unknown": {},
        });
        assert_eq!(
            changed_values(&change),
            [json!({"path": "creds", "before": SENSITIVE, "after": SENSITIVE})]
        );
        // A value told whole shows nothing of what is marked inside it: a
        // list that grew, null to an object, an unknown after a sensitive
        // before.
        for change in [
            json!({"before": {"rules": [{"key": "old"}]}, "after": {"rules": [{"key": "old"}, {"key": "s3cret"}]},
                   "before_sensitive": {"rules": [{"key": true}]}, "after_sensitive": {"rules": [{"key": true}, {"key": true}]},
                   "after_unknown": {}}),
            json!({"before": {"auth": null}, "after": {"auth": {"token": "s3cret"}},
                   "before_sensitive": {}, "after_sensitive": {"auth": {"token": true}}, "after_unknown": {}}),
            json!({"before": {"conn": {"password": "s3cret", "host": "h"}}, "after": {"conn": null},
                   "before_sensitive": {"conn": {"password": true}}, "after_sensitive": {},
                   "after_unknown": {"conn": true}}),
        ] {
            let told = serde_json::to_string(&changed_values(&change)).unwrap();
            assert!(
                !told.contains("s3cret") && told.contains(SENSITIVE),
                "{told}"
            );
        }
        // Nothing changed, nothing told; long values cut; at most twenty.
        assert!(changed_values(&json!({"before": {"a": 1}, "after": {"a": 1}})).is_empty());
        let long = "x".repeat(500);
        let v = changed_values(&json!({"before": {"a": 1}, "after": {"a": long}}));
        assert_eq!(
            v[0]["after"].as_str().unwrap().chars().count(),
            MAX_VALUE_CHARS + 1
        );
        let many: serde_json::Map<String, Value> =
            (0..50).map(|i| (format!("k{i:02}"), json!(i))).collect();
        let v = changed_values(&json!({"before": {}, "after": Value::Object(many)}));
        assert_eq!(v.len(), MAX_VALUES);
    }
}
