//! The policy engines: Rego through regorus, Kyverno through our own
//! reader ([`crate::kyverno`]). Built with nuon-core's `policies` feature.

use super::{CompileError, PolicySource, Verdict};

fn error_of(e: &dyn std::fmt::Display) -> CompileError {
    let text = e.to_string();
    let mut out = CompileError {
        line: 1,
        col: 1,
        message: text
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("invalid Rego")
            .trim()
            .trim_start_matches("error: ")
            .to_owned(),
    };
    if let Some(at) = text.lines().find_map(|l| l.trim().strip_prefix("--> ")) {
        let mut parts = at.rsplitn(3, ':');
        let col = parts.next().and_then(|c| c.trim().parse().ok());
        let line = parts.next().and_then(|l| l.trim().parse().ok());
        if let (Some(line), Some(col)) = (line, col) {
            out.line = line;
            out.col = col;
        }
    }
    out
}

fn engine(p: &PolicySource) -> Result<(regorus::Engine, String), CompileError> {
    let mut e = regorus::Engine::new();
    let file = format!("{}.rego", p.name);
    let first = match e.add_policy(file.clone(), p.contents.clone()) {
        Ok(package) => return Ok((e, package)),
        Err(err) => error_of(&err),
    };
    let mut old = regorus::Engine::new();
    old.set_rego_v0(true);
    match old.add_policy(file, p.contents.clone()) {
        Ok(package) => Ok((old, package)),
        Err(_) => Err(first),
    }
}

/// Compiles a policy; the first error, with its place.
pub fn compile(p: &PolicySource) -> Result<(), CompileError> {
    engine(p).map(|_| ())
}

fn messages(e: &mut regorus::Engine, rule: &str) -> Result<Vec<String>, String> {
    match e.eval_rule(rule.to_owned()) {
        Ok(v) => {
            let json: serde_json::Value =
                serde_json::from_str(&v.to_json_str().map_err(|e| e.to_string())?)
                    .map_err(|e| e.to_string())?;
            Ok(match json {
                serde_json::Value::Array(a) => a
                    .into_iter()
                    .map(|m| match m {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    })
                    .collect(),
                serde_json::Value::Null => Vec::new(),
                serde_json::Value::Bool(false) => Vec::new(),
                serde_json::Value::String(s) => vec![s],
                other => vec![other.to_string()],
            })
        }
        // A policy without the rule says nothing of it.
        Err(err) if err.to_string().contains("not a valid rule path") => Ok(Vec::new()),
        Err(err) => Err(err.to_string()),
    }
}

/// Evaluates every policy against each Kubernetes object in turn (the
/// object is Rego's `input`, as conftest gives it; Kyverno's
/// `request.object`, going to `namespace` when it names none); each
/// message is prefixed with the object's `Kind/name`. A Kyverno `Enforce`
/// failure is a `deny`, an `Audit` one a `warn`.
pub fn evaluate_objects(
    policies: &[PolicySource],
    objects: &[serde_json::Value],
    namespace: Option<&str>,
) -> Result<Verdict, String> {
    let mut kyverno = Vec::new();
    for p in policies.iter().filter(|p| p.is_kyverno()) {
        let read = crate::kyverno::parse(&p.contents).map_err(|e| {
            format!(
                "policy {:?} is not a Kyverno policy this platform reads: {e}",
                p.name
            )
        })?;
        kyverno.extend(read.into_iter().map(|k| (p.name.as_str(), k)));
    }
    let mut all = Verdict::default();
    for o in objects {
        let who = format!(
            "{}/{}",
            o["kind"].as_str().unwrap_or("object"),
            o["metadata"]["name"].as_str().unwrap_or("unnamed")
        );
        let mut v = evaluate(policies, o)?;
        for (name, k) in &kyverno {
            for f in k.evaluate(o, namespace) {
                let said = if *name == k.name {
                    f.message
                } else {
                    format!("{name}: {}", f.message)
                };
                if f.enforce { &mut v.deny } else { &mut v.warn }.push(said);
            }
        }
        all.deny
            .extend(v.deny.into_iter().map(|m| format!("{who}: {m}")));
        all.warn
            .extend(v.warn.into_iter().map(|m| format!("{who}: {m}")));
    }
    Ok(all)
}

/// Evaluates every Rego policy's `deny` and `warn` against `input`
/// (Kyverno's are for Kubernetes objects: [`evaluate_objects`]).
pub fn evaluate(policies: &[PolicySource], input: &serde_json::Value) -> Result<Verdict, String> {
    let mut verdict = Verdict::default();
    if policies.iter().all(PolicySource::is_kyverno) {
        return Ok(verdict);
    }
    let input = regorus::Value::from_json_str(&input.to_string()).map_err(|e| e.to_string())?;
    for p in policies.iter().filter(|p| !p.is_kyverno()) {
        let (mut e, package) = engine(p).map_err(|c| {
            format!(
                "policy {:?} does not compile: {}:{}: {}",
                p.name, c.line, c.col, c.message
            )
        })?;
        e.set_input(input.clone());
        for (rule, out) in [("deny", &mut verdict.deny), ("warn", &mut verdict.warn)] {
            let found = messages(&mut e, &format!("{package}.{rule}"))
                .map_err(|err| format!("policy {:?}: {rule}: {err}", p.name))?;
            out.extend(found.into_iter().map(|m| format!("{}: {m}", p.name)));
        }
    }
    Ok(verdict)
}

/// Reads a Kyverno policy document: an error says why this platform does
/// not evaluate it.
pub fn check_kyverno(text: &str) -> Result<(), String> {
    crate::kyverno::parse(text).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{looks_like_rego, manifest_objects};

    fn policy(name: &str, text: &str) -> PolicySource {
        PolicySource {
            name: name.into(),
            contents: text.into(),
            engine: None,
        }
    }

    #[test]
    fn manifests_are_read_object_by_object() {
        let yaml = "---\n# Source: chart/templates/a.yaml\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  type: LoadBalancer\n---\n# only a comment\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  replicas: 3\n...\n";
        let objects = manifest_objects(yaml).unwrap();
        assert_eq!(objects.len(), 2, "{objects:?}");
        assert_eq!(objects[1]["spec"]["replicas"], 3);
        let p = policy(
            "no-lb",
            "package k8s\nimport rego.v1\n\ndeny contains \"load balancers are not allowed\" if {\n  input.kind == \"Service\"\n  input.spec.type == \"LoadBalancer\"\n}\n",
        );
        let v = evaluate_objects(&[p], &objects, None).unwrap();
        assert_eq!(
            v.deny,
            ["Service/web: no-lb: load balancers are not allowed"]
        );
        let e = manifest_objects("kind: [unclosed\n").unwrap_err();
        assert!(e.contains("document 1 of the manifests is not YAML"), "{e}");
        assert!(looks_like_rego("# checks\n\npackage nuon.x\n"));
        assert!(!looks_like_rego(
            "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\n"
        ));
    }

    #[test]
    fn deny_and_warn_come_back_with_their_policy() {
        let p = policy(
            "no-public",
            "package nuon.s3\nimport rego.v1\n\ndeny contains msg if {\n  some r in input.resource_changes\n  r.change.after.acl == \"public-read\"\n  msg := sprintf(\"%s is public\", [r.address])\n}\n\nwarn contains \"plans are reviewed\" if { true }\n",
        );
        let plan = serde_json::json!({"resource_changes": [
            {"address": "aws_s3_bucket.a", "change": {"after": {"acl": "public-read"}}},
            {"address": "aws_s3_bucket.b", "change": {"after": {"acl": "private"}}}
        ]});
        let v = evaluate(&[p], &plan).unwrap();
        assert_eq!(v.deny, ["no-public: aws_s3_bucket.a is public"]);
        assert_eq!(v.warn, ["no-public: plans are reviewed"]);
    }

    #[test]
    fn the_older_syntax_is_read_and_bad_rego_says_where() {
        let old = policy(
            "old",
            "package old\ndeny[msg] { input.x == 1; msg := \"x is 1\" }\n",
        );
        let v = evaluate(&[old], &serde_json::json!({"x": 1})).unwrap();
        assert_eq!(v.deny, ["old: x is 1"]);
        let bad = policy(
            "bad",
            "package nuon\nimport rego.v1\n\ndeny contains msg if {\n  x := \n}\n",
        );
        let e = compile(&bad).unwrap_err();
        assert_eq!((e.line, e.col), (5, 5), "{e:?}");
        assert!(e.message.contains("expecting"), "{e:?}");
    }
}
