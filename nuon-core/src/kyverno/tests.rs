//! One table row per rule form: the policy, the object, what Kyverno's
//! `kyverno apply` says (pass, or the finding and whether it enforces).

use serde_json::{Value, json};

use super::*;

fn policy(action: &str, rule: &str) -> String {
    format!(
        "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata:\n  name: p\nspec:\n  validationFailureAction: {action}\n  rules:\n{rule}"
    )
}

fn deployment(name: &str, labels: Value, containers: Value) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {"template": {"metadata": {"labels": labels}, "spec": {"containers": containers}}}})
}

fn pod(name: &str, containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {"containers": containers}})
}

/// (what, policy, object, finding expected: None passes, Some((enforce, text in it))).
type Row = (&'static str, String, Value, Option<(bool, &'static str)>);

#[test]
fn each_rule_form_says_what_kyverno_says() {
    let limits = "  - name: limits\n    match:\n      any:\n      - resources:\n          kinds: [Pod]\n    validate:\n      message: \"limits are required\"\n      pattern:\n        spec:\n          containers:\n          - resources:\n              limits:\n                memory: \"?*\"\n                cpu: \"<=2\"\n";
    let good = json!([{"name": "a", "image": "nginx:1.27", "resources": {"limits": {"memory": "1Gi", "cpu": "500m"}}}]);
    let no_mem =
        json!([{"name": "a", "image": "nginx:1.27", "resources": {"limits": {"cpu": "1"}}}]);
    let big_cpu = json!([{"name": "a", "image": "nginx", "resources": {"limits": {"memory": "1Gi", "cpu": "4"}}}]);
    let latest = "  - name: no-latest\n    match:\n      any:\n      - resources:\n          kinds: [Pod]\n    validate:\n      message: \"{{ request.object.metadata.name }}: pin the image\"\n      pattern:\n        spec:\n          containers:\n          - image: \"!*:latest & *:*\"\n";
    let conditional = "  - name: pull-policy\n    match:\n      any:\n      - resources:\n          kinds: [Pod]\n    validate:\n      message: \"latest must always be pulled\"\n      pattern:\n        spec:\n          containers:\n          - (image): \"*:latest\"\n            imagePullPolicy: Always\n";
    let negation = "  - name: no-host-path\n    match:\n      any:\n      - resources:\n          kinds: [Pod]\n    validate:\n      message: \"no hostPath\"\n      pattern:\n        spec:\n          =(volumes):\n          - X(hostPath): \"null\"\n";
    let any_pattern = "  - name: runs-as\n    match:\n      any:\n      - resources:\n          kinds: [Pod]\n    validate:\n      message: \"run as non-root\"\n      anyPattern:\n      - spec:\n          securityContext:\n            runAsNonRoot: true\n      - spec:\n          containers:\n          - securityContext:\n              runAsNonRoot: true\n";
    let deny = "  - name: replicas\n    match:\n      any:\n      - resources:\n          kinds: [Deployment]\n          namespaces: [\"prod-*\"]\n    validate:\n      message: \"{{ request.object.metadata.name }} wants {{ request.object.spec.replicas }} replicas; at least 2 in prod\"\n      deny:\n        conditions:\n          any:\n          - key: \"{{ request.object.spec.replicas }}\"\n            operator: LessThan\n            value: 2\n";
    let deny_in = "  - name: registries\n    match:\n      any:\n      - resources:\n          kinds: [Pod]\n    validate:\n      message: \"images come from our registry\"\n      deny:\n        conditions:\n          all:\n          - key: \"{{ request.object.spec.containers[].image }}\"\n            operator: AnyNotIn\n            value: [\"registry.example.com/*\"]\n";
    let selected = "  - name: team-label\n    match:\n      any:\n      - resources:\n          kinds: [Deployment]\n          selector:\n            matchLabels:\n              tier: web\n    exclude:\n      any:\n      - resources:\n          names: [\"legacy-*\"]\n    validate:\n      message: \"a team label\"\n      pattern:\n        metadata:\n          labels:\n            team: \"?*\"\n";
    let global = "  - name: only-labelled\n    match:\n      any:\n      - resources:\n          kinds: [Pod]\n    validate:\n      message: \"checked pods have a port\"\n      pattern:\n        metadata:\n          <(labels):\n            check: \"yes\"\n        spec:\n          containers:\n          - ports:\n            - containerPort: \">0\"\n";
    let existence = "  - name: one-probe\n    match:\n      any:\n      - resources:\n          kinds: [Pod]\n    validate:\n      failureAction: Enforce\n      message: \"one container has a readiness probe\"\n      pattern:\n        spec:\n          ^(containers):\n          - readinessProbe:\n              periodSeconds: \">0\"\n";
    let pre = "  - name: prod-only\n    match:\n      any:\n      - resources:\n          kinds: [Pod]\n    preconditions:\n      all:\n      - key: \"{{ request.object.metadata.labels.env || '' }}\"\n        operator: Equals\n        value: prod\n    validate:\n      message: \"prod pods name an owner\"\n      pattern:\n        metadata:\n          annotations:\n            owner: \"?*\"\n";
    let web = json!({"tier": "web"});
    let rows: Vec<Row> = vec![
        (
            "pattern passes",
            policy("Enforce", limits),
            pod("a", good.clone()),
            None,
        ),
        (
            "pattern: a missing field",
            policy("Enforce", limits),
            pod("a", no_mem.clone()),
            Some((
                true,
                "limits are required (at /spec/containers/0/resources/limits/memory/: is missing)",
            )),
        ),
        (
            "pattern: a quantity past <=",
            policy("Enforce", limits),
            pod("a", big_cpu),
            Some((true, "cpu/: \"4\" does not match \"<=2\"")),
        ),
        (
            "audit is a warning",
            policy("Audit", limits),
            pod("a", no_mem.clone()),
            Some((false, "limits are required")),
        ),
        (
            "autogen: a Pod rule checks a Deployment's template",
            policy("Enforce", limits),
            deployment("web", web.clone(), no_mem.clone()),
            Some((true, "p/autogen-limits: limits are required")),
        ),
        (
            "autogen passes a good template",
            policy("Enforce", limits),
            deployment("web", web.clone(), good.clone()),
            None,
        ),
        (
            "a kind the rule does not match",
            policy("Enforce", limits),
            json!({"kind": "Service", "metadata": {"name": "s"}}),
            None,
        ),
        (
            "! and & with a variable message",
            policy("enforce", latest),
            pod("api", json!([{"image": "busybox:latest"}])),
            Some((true, "api: pin the image")),
        ),
        (
            "an image with no tag",
            policy("enforce", latest),
            pod("api", json!([{"image": "busybox"}])),
            Some((true, "pin the image")),
        ),
        (
            "conditional anchor holds: checked",
            policy("Enforce", conditional),
            pod(
                "a",
                json!([{"image": "x:latest", "imagePullPolicy": "IfNotPresent"}]),
            ),
            Some((true, "latest must always be pulled")),
        ),
        (
            "conditional anchor does not hold: skipped",
            policy("Enforce", conditional),
            pod(
                "a",
                json!([{"image": "x:1", "imagePullPolicy": "IfNotPresent"}]),
            ),
            None,
        ),
        (
            "negation anchor",
            policy("Enforce", negation),
            json!({"kind": "Pod", "metadata": {"name": "a"}, "spec": {"volumes": [{"name": "v", "hostPath": {"path": "/"}}], "containers": []}}),
            Some((true, "hostPath/: must not be set")),
        ),
        (
            "equality anchor: absent passes",
            policy("Enforce", negation),
            pod("a", json!([])),
            None,
        ),
        (
            "anyPattern: the second matches",
            policy("Enforce", any_pattern),
            pod("a", json!([{"securityContext": {"runAsNonRoot": true}}])),
            None,
        ),
        (
            "anyPattern: none matches",
            policy("Enforce", any_pattern),
            pod("a", json!([{"image": "x"}])),
            Some((true, "no pattern of anyPattern matches")),
        ),
        (
            "deny with a namespace match",
            policy("Enforce", deny),
            json!({"kind": "Deployment", "metadata": {"name": "web", "namespace": "prod-eu"}, "spec": {"replicas": 1}}),
            Some((true, "web wants 1 replicas; at least 2 in prod")),
        ),
        (
            "deny: the condition does not hold",
            policy("Enforce", deny),
            json!({"kind": "Deployment", "metadata": {"name": "web", "namespace": "prod-eu"}, "spec": {"replicas": 3}}),
            None,
        ),
        (
            "deny: another namespace",
            policy("Enforce", deny),
            json!({"kind": "Deployment", "metadata": {"name": "web", "namespace": "dev"}, "spec": {"replicas": 1}}),
            None,
        ),
        (
            "deny AnyNotIn over a projection",
            policy("Enforce", deny_in),
            pod(
                "a",
                json!([{"image": "registry.example.com/a:1"}, {"image": "docker.io/b:1"}]),
            ),
            Some((true, "images come from our registry")),
        ),
        (
            "deny AnyNotIn: all in",
            policy("Enforce", deny_in),
            pod("a", json!([{"image": "registry.example.com/a:1"}])),
            None,
        ),
        (
            "a label selector",
            policy("Enforce", selected),
            deployment("web", web.clone(), good.clone()),
            Some((true, "a team label")),
        ),
        (
            "a selector that does not take it",
            policy("Enforce", selected),
            deployment("web", json!({"tier": "db"}), good.clone()),
            None,
        ),
        (
            "exclude by name",
            policy("Enforce", selected),
            deployment("legacy-web", web.clone(), good.clone()),
            None,
        ),
        (
            "global anchor holds",
            policy("Enforce", global),
            json!({"kind": "Pod", "metadata": {"name": "a", "labels": {"check": "yes"}}, "spec": {"containers": [{"ports": [{"containerPort": 0}]}]}}),
            Some((true, "checked pods have a port")),
        ),
        (
            "global anchor does not hold: the rule is skipped",
            policy("Enforce", global),
            json!({"kind": "Pod", "metadata": {"name": "a", "labels": {"check": "no"}}, "spec": {"containers": [{"ports": [{"containerPort": 0}]}]}}),
            None,
        ),
        (
            "existence anchor: one matches",
            policy("Audit", existence),
            pod(
                "a",
                json!([{"name": "a"}, {"name": "b", "readinessProbe": {"periodSeconds": 5}}]),
            ),
            None,
        ),
        (
            "existence anchor: none, and the rule's own Enforce",
            policy("Audit", existence),
            pod("a", json!([{"name": "a"}])),
            Some((true, "one container has a readiness probe")),
        ),
        (
            "preconditions hold",
            policy("Enforce", pre),
            json!({"kind": "Pod", "metadata": {"name": "a", "labels": {"env": "prod"}}, "spec": {}}),
            Some((true, "prod pods name an owner")),
        ),
        (
            "preconditions do not hold",
            policy("Enforce", pre),
            json!({"kind": "Pod", "metadata": {"name": "a"}, "spec": {}}),
            None,
        ),
    ];
    for (what, text, object, want) in rows {
        let policies = parse(&text).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
        let found = policies[0].evaluate(&object, Some("default"));
        match want {
            None => assert!(found.is_empty(), "{what}: {found:?}"),
            Some((enforce, text)) => {
                assert_eq!(found.len(), 1, "{what}: {found:?}");
                assert_eq!(found[0].enforce, enforce, "{what}: {found:?}");
                assert!(
                    found[0].message.contains(text),
                    "{what}: {:?} has no {text:?}",
                    found[0].message
                );
            }
        }
    }
}

#[test]
fn what_is_not_evaluated_is_refused_when_read() {
    let rule = |validate: &str| {
        policy(
            "Enforce",
            &format!(
                "  - name: r\n    match:\n      any:\n      - resources:\n          kinds: [Pod]\n    validate:\n{validate}"
            ),
        )
    };
    for (validate, said) in [
        (
            "      foreach:\n      - list: \"request.object.spec.containers\"\n",
            "validate.foreach is not evaluated",
        ),
        (
            "      cel:\n        expressions: []\n",
            "validate.cel is not evaluated",
        ),
        ("      message: x\n", "no pattern, anyPattern or deny"),
        (
            "      message: \"{{ lookup('x') }}\"\n      pattern:\n        a: b\n",
            "lookup() is not one this platform evaluates",
        ),
    ] {
        let e = parse(&rule(validate)).unwrap_err();
        assert!(e.contains(said), "{e}");
    }
    assert!(
        parse("apiVersion: v1\nkind: ConfigMap\n")
            .unwrap_err()
            .contains("expected a kyverno.io ClusterPolicy")
    );
    let e = parse(&policy(
        "Block",
        "  - name: r\n    match: {}\n    validate:\n      deny: {}\n",
    ))
    .unwrap_err();
    assert!(e.contains("validationFailureAction \"Block\""), "{e}");
    // A mutate rule is not a check: left out, the policy still read.
    let p = parse(&policy("Enforce", "  - name: m\n    match:\n      any:\n      - resources:\n          kinds: [Pod]\n    mutate:\n      patchStrategicMerge: {}\n")).unwrap();
    assert!(p[0].evaluate(&pod("a", json!([])), None).is_empty());
}
