//! Kyverno policies (Nuon's default policy engine for Kubernetes objects),
//! evaluated as `kyverno apply` would evaluate their validate rules: on
//! each object a Helm chart, a manifest or a kustomization renders, before
//! anything is applied.
//!
//! Read: `ClusterPolicy` and `Policy` (`kyverno.io/v1`, `v2beta1`), each
//! rule's `match`/`exclude` (`any`, `all` or `resources`: kinds, names,
//! namespaces, label selectors, annotations, operations), `preconditions`,
//! and `validate` with `pattern`, `anyPattern` or `deny` conditions, its
//! `message`, and the failure action (`validationFailureAction` of the
//! policy, or `failureAction` of the rule): an `Enforce` failure denies the
//! step, an `Audit` one is a warning on it. Variables (`{{ request.object.… }}`)
//! are JMESPath ([`jmespath`]). A rule written for `Pod` also checks the
//! pod template of the controllers Kyverno generates rules for (its
//! `autogen`). Rules this platform does not evaluate (`foreach`, `cel`,
//! `podSecurity`, `manifests`) are refused when the policy is read, never
//! passed over in silence; `mutate`, `generate` and `verifyImages` rules
//! change or make objects in a cluster and are not checks: they are left
//! out.

pub mod jmespath;
mod pattern;

use std::collections::HashMap;

use serde_json::{Value, json};

use pattern::Outcome;

/// A failure action.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Enforce,
    Audit,
}

fn action_of(v: &Value) -> Option<Action> {
    match v.as_str()?.to_ascii_lowercase().as_str() {
        "enforce" => Some(Action::Enforce),
        "audit" => Some(Action::Audit),
        _ => None,
    }
}

/// A policy, read.
#[derive(Debug, Clone)]
pub struct KyvernoPolicy {
    /// `metadata.name`.
    pub name: String,
    /// A `Policy`'s namespace (a `ClusterPolicy` has none).
    namespace: Option<String>,
    action: Action,
    /// The pod controllers its `Pod` rules also check.
    autogen: Vec<String>,
    rules: Vec<Rule>,
    /// Every `{{ expression }}` of the policy, parsed once.
    exprs: HashMap<String, jmespath::Expr>,
}

#[derive(Debug, Clone)]
struct Rule {
    name: String,
    matcher: Value,
    exclude: Value,
    preconditions: Value,
    validate: Value,
    action: Option<Action>,
    /// The match names only `Pod`: the rule checks pod templates too.
    pods_only: bool,
}

/// What one rule said of one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// An `Enforce` failure (else `Audit`: a warning).
    pub enforce: bool,
    /// `POLICY/RULE: MESSAGE`.
    pub message: String,
}

const CONTROLLERS: &[&str] = &[
    "DaemonSet",
    "Deployment",
    "Job",
    "StatefulSet",
    "ReplicaSet",
    "ReplicationController",
    "CronJob",
];

/// Whether a policy document is Kyverno's.
pub fn is_kyverno(doc: &Value) -> bool {
    doc["apiVersion"]
        .as_str()
        .is_some_and(|v| v.starts_with("kyverno.io/"))
}

/// Reads every policy of a YAML text (one or more documents).
pub fn parse(yaml: &str) -> Result<Vec<KyvernoPolicy>, String> {
    let docs = crate::manifests::manifest_objects(yaml)?;
    if docs.is_empty() {
        return Err("no policy in it (a kyverno.io ClusterPolicy or Policy)".into());
    }
    docs.iter()
        .enumerate()
        .map(|(i, d)| read(d).map_err(|e| format!("document {}: {e}", i + 1)))
        .collect()
}

fn read(doc: &Value) -> Result<KyvernoPolicy, String> {
    let kind = doc["kind"].as_str().unwrap_or_default();
    if !is_kyverno(doc) || !matches!(kind, "ClusterPolicy" | "Policy") {
        return Err(format!(
            "expected a kyverno.io ClusterPolicy or Policy, found {} {kind}",
            doc["apiVersion"].as_str().unwrap_or("no apiVersion")
        ));
    }
    let name = doc["metadata"]["name"]
        .as_str()
        .ok_or("the policy has no metadata.name")?
        .to_owned();
    let spec = &doc["spec"];
    let action = match &spec["validationFailureAction"] {
        Value::Null => Action::Audit,
        v => action_of(v).ok_or_else(|| {
            format!("{name}: validationFailureAction {v} is not Enforce or Audit")
        })?,
    };
    let autogen =
        match doc["metadata"]["annotations"]["pod-policies.kyverno.io/autogen-controllers"].as_str()
        {
            None => CONTROLLERS.iter().map(|s| s.to_string()).collect(),
            Some("none") => Vec::new(),
            Some(list) => list.split(',').map(|s| s.trim().to_owned()).collect(),
        };
    let mut rules = Vec::new();
    for r in spec["rules"]
        .as_array()
        .ok_or(format!("{name}: spec.rules is not a list"))?
    {
        let rule = r["name"].as_str().unwrap_or("unnamed").to_owned();
        let at = format!("{name}/{rule}");
        let validate = &r["validate"];
        if validate.is_null() {
            if ["mutate", "generate", "verifyImages"]
                .iter()
                .any(|k| !r[k].is_null())
            {
                continue; // not a check
            }
            return Err(format!("{at}: the rule has no validate"));
        }
        for unsupported in ["foreach", "cel", "podSecurity", "manifests", "assert"] {
            if !validate[unsupported].is_null() {
                return Err(format!(
                    "{at}: validate.{unsupported} is not evaluated by this platform (pattern, anyPattern and deny are)"
                ));
            }
        }
        if validate["pattern"].is_null()
            && validate["anyPattern"].is_null()
            && validate["deny"].is_null()
        {
            return Err(format!("{at}: validate has no pattern, anyPattern or deny"));
        }
        if r["match"].is_null() {
            return Err(format!("{at}: the rule has no match"));
        }
        let action = match &validate["failureAction"] {
            Value::Null => None,
            v => Some(
                action_of(v)
                    .ok_or_else(|| format!("{at}: failureAction {v} is not Enforce or Audit"))?,
            ),
        };
        rules.push(Rule {
            name: rule,
            pods_only: only_pods(&r["match"]),
            matcher: r["match"].clone(),
            exclude: r["exclude"].clone(),
            preconditions: r["preconditions"].clone(),
            validate: validate.clone(),
            action,
        });
    }
    let mut exprs = HashMap::new();
    for r in &rules {
        for v in [&r.validate, &r.preconditions] {
            collect_exprs(v, &mut exprs).map_err(|e| format!("{name}/{}: {e}", r.name))?;
        }
    }
    Ok(KyvernoPolicy {
        name,
        namespace: (kind == "Policy").then(|| {
            doc["metadata"]["namespace"]
                .as_str()
                .unwrap_or("default")
                .to_owned()
        }),
        action,
        autogen,
        rules,
        exprs,
    })
}

/// The `{{ … }}` of every string under `v`.
fn variables(s: &str) -> impl Iterator<Item = (usize, usize, &str)> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let start = at + s[at..].find("{{")?;
        let end = start + s[start..].find("}}")?;
        at = end + 2;
        Some((start, end + 2, s[start + 2..end].trim()))
    })
}

fn collect_exprs(v: &Value, out: &mut HashMap<String, jmespath::Expr>) -> Result<(), String> {
    match v {
        Value::String(s) => {
            for (_, _, e) in variables(s) {
                if !out.contains_key(e) {
                    out.insert(e.to_owned(), jmespath::parse(e)?);
                }
            }
        }
        Value::Array(a) => {
            for x in a {
                collect_exprs(x, out)?;
            }
        }
        Value::Object(m) => {
            for x in m.values() {
                collect_exprs(x, out)?;
            }
        }
        _ => {}
    }
    Ok(())
}

impl KyvernoPolicy {
    /// Every finding of the policy's rules on `object`, which goes to
    /// `namespace` when it names none.
    pub fn evaluate(&self, object: &Value, namespace: Option<&str>) -> Vec<Finding> {
        let ns = object["metadata"]["namespace"].as_str().or(namespace);
        if let Some(own) = &self.namespace
            && ns != Some(own.as_str())
        {
            return Vec::new();
        }
        let mut out = Vec::new();
        let kind = object["kind"].as_str().unwrap_or_default();
        // What variables read: the object (or its pod), made once for all rules.
        let context = |checked: &Value| {
            json!({"request": {
                "object": checked,
                "operation": "CREATE",
                "namespace": ns,
                "name": checked["metadata"]["name"],
                "kind": {"kind": checked["kind"]},
            }})
        };
        let as_object = std::cell::OnceCell::new();
        let pod = std::cell::OnceCell::new();
        let as_pod = std::cell::OnceCell::new();
        for rule in &self.rules {
            let (ctx, prefix) =
                if matches(&rule.matcher, object, ns) && !matches(&rule.exclude, object, ns) {
                    (as_object.get_or_init(|| context(object)), "")
                } else if self.autogen.iter().any(|c| c == kind)
                    && rule.pods_only
                    && let Some(p) = pod.get_or_init(|| pod_of(object, ns))
                    && matches(&rule.matcher, p, ns)
                    && !matches(&rule.exclude, p, ns)
                {
                    (as_pod.get_or_init(|| context(p)), "autogen-")
                } else {
                    continue;
                };
            let failed = match self.conditions(&rule.preconditions, ctx) {
                Ok(false) => continue,
                Ok(true) => self.validate(rule, ctx),
                Err(e) => Some(format!("preconditions: {e}")),
            };
            if let Some(why) = failed {
                out.push(Finding {
                    enforce: rule.action.unwrap_or(self.action) == Action::Enforce,
                    message: format!("{}/{prefix}{}: {why}", self.name, rule.name),
                });
            }
        }
        out
    }

    /// Why `rule` fails on the object of `ctx`, if it does.
    fn validate(&self, rule: &Rule, ctx: &Value) -> Option<String> {
        let v = &rule.validate;
        // Made only for a failure.
        let message = || match self.substitute(&v["message"], ctx) {
            Ok(Value::String(s)) => s,
            Ok(Value::Null) => "validation failed".into(),
            Ok(other) => other.to_string(),
            Err(e) => format!("message: {e}"),
        };
        let object = &ctx["request"]["object"];
        if !v["pattern"].is_null() {
            return match pattern::check(object, &v["pattern"], "/") {
                Outcome::Fail(at) => Some(format!("{} (at {at})", message())),
                _ => None,
            };
        }
        if let Some(patterns) = v["anyPattern"].as_array() {
            let mut why = Vec::new();
            for p in patterns {
                match pattern::check(object, p, "/") {
                    Outcome::Fail(at) => why.push(at),
                    _ => return None,
                }
            }
            return Some(format!(
                "{} (no pattern of anyPattern matches: {})",
                message(),
                why.join("; ")
            ));
        }
        match self.conditions(&v["deny"]["conditions"], ctx) {
            Ok(true) => Some(message()),
            Ok(false) => None,
            Err(e) => Some(format!("deny: {e}")),
        }
    }

    /// Whether conditions (`{any, all}`, or a list: all) hold; none do.
    fn conditions(&self, c: &Value, ctx: &Value) -> Result<bool, String> {
        let (any, all) = match c {
            Value::Null => return Ok(true),
            Value::Array(all) => (&[][..], &all[..]),
            Value::Object(m) => (
                m.get("any")
                    .and_then(Value::as_array)
                    .map_or(&[][..], |a| &a[..]),
                m.get("all")
                    .and_then(Value::as_array)
                    .map_or(&[][..], |a| &a[..]),
            ),
            other => return Err(format!("conditions {other} are not a list or {{any, all}}")),
        };
        for x in all {
            if !self.condition(x, ctx)? {
                return Ok(false);
            }
        }
        if any.is_empty() {
            return Ok(true);
        }
        for x in any {
            if self.condition(x, ctx)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    fn condition(&self, c: &Value, ctx: &Value) -> Result<bool, String> {
        let key = self.substitute(&c["key"], ctx)?;
        let value = self.substitute(&c["value"], ctx)?;
        let op = c["operator"].as_str().unwrap_or_default();
        operate(op, &key, &value)
    }

    /// `v` with its `{{ … }}` replaced: a string that is one variable
    /// becomes its value, else the values' text in place.
    fn substitute(&self, v: &Value, ctx: &Value) -> Result<Value, String> {
        Ok(match v {
            Value::String(s) => {
                let vars: Vec<_> = variables(s).collect();
                if vars.is_empty() {
                    return Ok(v.clone());
                }
                let eval = |e: &str| match self.exprs.get(e) {
                    Some(x) => jmespath::eval(x, ctx),
                    None => jmespath::parse(e).and_then(|x| jmespath::eval(&x, ctx)),
                };
                if let [(0, end, e)] = vars[..]
                    && end == s.len()
                {
                    return eval(e);
                }
                let mut out = String::new();
                let mut last = 0;
                for (start, end, e) in vars {
                    out.push_str(&s[last..start]);
                    match eval(e)? {
                        Value::String(t) => out.push_str(&t),
                        other => out.push_str(&other.to_string()),
                    }
                    last = end;
                }
                out.push_str(&s[last..]);
                Value::String(out)
            }
            Value::Array(a) => Value::Array(
                a.iter()
                    .map(|x| self.substitute(x, ctx))
                    .collect::<Result<_, _>>()?,
            ),
            other => other.clone(),
        })
    }
}

/// The operators of Kyverno's conditions.
pub const OPERATORS: &[&str] = &[
    "Equals",
    "NotEquals",
    "In",
    "NotIn",
    "AnyIn",
    "AllIn",
    "AnyNotIn",
    "AllNotIn",
    "GreaterThan",
    "GreaterThanOrEquals",
    "LessThan",
    "LessThanOrEquals",
];

fn same(key: &Value, value: &Value) -> bool {
    match (key, value) {
        (Value::String(k), Value::String(p)) => pattern::wildcard(k, p),
        (k, Value::String(p)) if !k.is_object() && !k.is_array() => {
            pattern::string_pattern(&k.to_string(), p)
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        (k, v) => k == v,
    }
}

fn operate(op: &str, key: &Value, value: &Value) -> Result<bool, String> {
    let keys: Vec<&Value> = match key {
        Value::Array(a) => a.iter().collect(),
        k => vec![k],
    };
    let values: Vec<&Value> = match value {
        Value::Array(a) => a.iter().collect(),
        v => vec![v],
    };
    let inside = |k: &Value| values.iter().any(|v| same(k, v));
    let number = |v: &Value| match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => pattern::quantity(s),
        _ => None,
    };
    let compare = |f: fn(f64, f64) -> bool| match (number(key), number(value)) {
        (Some(a), Some(b)) => Ok(f(a, b)),
        _ => Err(format!(
            "{op}: {key} and {value} are not both numbers or quantities"
        )),
    };
    Ok(match op {
        "Equals" | "Equal" => same(key, value),
        "NotEquals" | "NotEqual" => !same(key, value),
        "AnyIn" => keys.iter().any(|k| inside(k)),
        "AllIn" | "In" => keys.iter().all(|k| inside(k)),
        "AnyNotIn" => keys.iter().any(|k| !inside(k)),
        "AllNotIn" | "NotIn" => keys.iter().all(|k| !inside(k)),
        "GreaterThan" => compare(|a, b| a > b)?,
        "GreaterThanOrEquals" => compare(|a, b| a >= b)?,
        "LessThan" => compare(|a, b| a < b)?,
        "LessThanOrEquals" => compare(|a, b| a <= b)?,
        other => {
            return Err(format!(
                "operator {other:?} is not one of {}",
                OPERATORS.join(", ")
            ));
        }
    })
}

/// Whether a `match` (or `exclude`) takes the object: `any` of its
/// filters, `all` of them, or its `resources`. An empty one takes nothing.
fn matches(m: &Value, object: &Value, ns: Option<&str>) -> bool {
    if let Some(any) = m["any"].as_array() {
        return any.iter().any(|f| filter(f, object, ns));
    }
    if let Some(all) = m["all"].as_array() {
        return !all.is_empty() && all.iter().all(|f| filter(f, object, ns));
    }
    !m["resources"].is_null() && filter(m, object, ns)
}

/// One filter: its `resources` (and no user: a filter of `subjects`,
/// `roles` or `clusterRoles` takes nothing, there being no admission request).
fn filter(f: &Value, object: &Value, ns: Option<&str>) -> bool {
    if ["subjects", "roles", "clusterRoles"]
        .iter()
        .any(|k| !f[k].is_null())
    {
        return false;
    }
    let r = &f["resources"];
    if r.is_null() {
        return false;
    }
    let strings = |k: &str| -> Vec<&str> {
        r[k].as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let kind = object["kind"].as_str().unwrap_or_default();
    let kinds = strings("kinds");
    if !kinds.is_empty() && !kinds.iter().any(|k| kind_is(k, kind)) {
        return false;
    }
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let mut names = strings("names");
    if let Some(n) = r["name"].as_str() {
        names.push(n);
    }
    if !names.is_empty() && !names.iter().any(|p| pattern::wildcard(name, p)) {
        return false;
    }
    let namespaces = strings("namespaces");
    if !namespaces.is_empty()
        && !namespaces
            .iter()
            .any(|p| pattern::wildcard(ns.unwrap_or_default(), p))
    {
        return false;
    }
    let operations = strings("operations");
    if !operations.is_empty() && !operations.contains(&"CREATE") {
        return false;
    }
    let labels = &object["metadata"]["labels"];
    if !selector(&r["selector"], labels) {
        return false;
    }
    if let Some(want) = r["annotations"].as_object() {
        let have = &object["metadata"]["annotations"];
        let ok = want.iter().all(|(k, p)| {
            have[k]
                .as_str()
                .is_some_and(|v| pattern::wildcard(v, p.as_str().unwrap_or("*")))
        });
        if !ok {
            return false;
        }
    }
    true
}

fn kind_is(entry: &str, kind: &str) -> bool {
    if entry == "*" {
        return true;
    }
    // `Pod`, `v1/Pod`, `apps/v1/Deployment`; a subresource (`Pod/exec`) never.
    let last = entry.rsplit('/').next().unwrap_or(entry);
    if entry.contains('/') && last.starts_with(|c: char| c.is_ascii_lowercase()) {
        return false;
    }
    pattern::wildcard(kind, last)
}

/// A label selector (`matchLabels`, `matchExpressions`); none takes all.
fn selector(sel: &Value, labels: &Value) -> bool {
    if sel.is_null() {
        return true;
    }
    if let Some(want) = sel["matchLabels"].as_object()
        && !want
            .iter()
            .all(|(k, v)| labels[k].as_str().is_some_and(|l| Some(l) == v.as_str()))
    {
        return false;
    }
    sel["matchExpressions"]
        .as_array()
        .into_iter()
        .flatten()
        .all(|e| {
            let have = labels[e["key"].as_str().unwrap_or_default()].as_str();
            let values: Vec<&str> = e["values"]
                .as_array()
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            match e["operator"].as_str().unwrap_or_default() {
                "In" => have.is_some_and(|h| values.contains(&h)),
                "NotIn" => have.is_none_or(|h| !values.contains(&h)),
                "Exists" => have.is_some(),
                "DoesNotExist" => have.is_none(),
                _ => false,
            }
        })
}

/// Whether a match names only `Pod` (so Kyverno generates its rules for
/// the pod controllers).
fn only_pods(m: &Value) -> bool {
    let mut kinds = Vec::new();
    for f in m["any"]
        .as_array()
        .into_iter()
        .flatten()
        .chain(m["all"].as_array().into_iter().flatten())
        .chain(std::iter::once(m))
    {
        for k in f["resources"]["kinds"].as_array().into_iter().flatten() {
            kinds.push(k.as_str().unwrap_or_default());
        }
    }
    !kinds.is_empty() && kinds.iter().all(|k| kind_is(k, "Pod") && *k != "*")
}

/// The pod a controller's template makes.
fn pod_of(object: &Value, ns: Option<&str>) -> Option<Value> {
    let t = match object["kind"].as_str()? {
        "CronJob" => &object["spec"]["jobTemplate"]["spec"]["template"],
        _ => &object["spec"]["template"],
    };
    if !t.is_object() {
        return None;
    }
    let mut meta = t["metadata"].clone();
    if !meta.is_object() {
        meta = json!({});
    }
    if meta["name"].is_null() {
        meta["name"] = object["metadata"]["name"].clone();
    }
    if let Some(ns) = ns {
        meta["namespace"] = Value::String(ns.to_owned());
    }
    Some(json!({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": t["spec"]}))
}

#[cfg(test)]
mod tests;
