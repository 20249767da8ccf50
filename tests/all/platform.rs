//! Shipping the control plane: its Helm chart (`deploy/helm/nuon-ctl`),
//! linted and rendered by real Helm (v4's Go SDK, through PyPI's
//! helm-python-sdk; there is no Kubernetes API server here, so the
//! rendered objects are checked by our own rules below, as kubeconform
//! would check them against the API's schemas).

use std::collections::BTreeMap;

use nuon_test_fixtures::{have_python_module, have_tool};
use serde_json::{Value, json};

/// Lints the chart strictly, then renders it, with each named set of
/// values: prints `{name: {"objects": [...], "notes": "..."} | {"error":
/// "..."}}`, the rendered YAML documents parsed.
const CHART_CHECK: &str = r#"
import json, sys, yaml
import helm_python as helm
chart_dir, cases = sys.argv[1], json.loads(sys.argv[2])
out = {}
for name, values in cases.items():
    try:
        report = helm.lint(chart_dir, values, strict=True)
        bad = [m for m in report["messages"] if m["severity"] >= 2] + report.get("errors", [])
        if bad:
            out[name] = {"error": f"helm lint: {bad}"}
            continue
        files = helm.Chart.load(chart_dir).render(values, name="nuon", namespace="nuon-system", is_install=True)
    except Exception as e:
        out[name] = {"error": str(e)}
        continue
    objects = [d for path, text in sorted(files.items()) if path.endswith(".yaml")
               for d in yaml.safe_load_all(text) if d]
    notes = "".join(t for p, t in files.items() if p.endswith("NOTES.txt"))
    out[name] = {"objects": objects, "notes": notes}
print(json.dumps(out))
"#;

fn chart_dir() -> std::path::PathBuf {
    nuon_tests::repo_root().join("deploy/helm/nuon-ctl")
}

/// Renders the chart with each of `cases`.
fn render(cases: &Value) -> BTreeMap<String, Value> {
    serde_json::from_value(json_of(
        std::process::Command::new("python3")
            .args(["-c", CHART_CHECK])
            .arg(chart_dir())
            .arg(cases.to_string()),
    ))
    .unwrap()
}

/// What `command` prints, as JSON, once it has succeeded.
fn json_of(command: &mut std::process::Command) -> Value {
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The one object of `kind`, or none.
fn one<'a>(objects: &'a [Value], kind: &str) -> Option<&'a Value> {
    let mut of = objects.iter().filter(|o| o["kind"] == kind);
    let found = of.next();
    assert!(of.next().is_none(), "more than one {kind}");
    found
}

/// What the API server (and kubeconform's schemas) would refuse, and what
/// our chart promises: every object named and labelled; the pods non-root,
/// read-only, without capabilities, with resources and probes on ports
/// that exist; selectors that select the pods; ingress backends that name
/// the service's ports.
fn check_objects(case: &str, objects: &[Value]) {
    let is_dns_label = |s: &str| {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    };
    for o in objects {
        let kind = o["kind"].as_str().unwrap_or_default();
        assert!(
            o["apiVersion"].is_string() && !kind.is_empty(),
            "{case}: {o:#}"
        );
        let name = o["metadata"]["name"].as_str().unwrap_or_default();
        assert!(is_dns_label(name), "{case}: {kind} named {name:?}");
        assert_eq!(
            o["metadata"]["labels"]["app.kubernetes.io/name"], "nuon-ctl",
            "{case}: {kind} is labelled"
        );
    }
    let deploy = one(objects, "Deployment").expect("a Deployment");
    let pod = &deploy["spec"]["template"];
    let pod_labels = pod["metadata"]["labels"].as_object().unwrap();
    let selects = |selector: &Value| {
        let sel = selector.as_object().unwrap();
        !sel.is_empty() && sel.iter().all(|(k, v)| pod_labels.get(k) == Some(v))
    };
    assert!(
        selects(&deploy["spec"]["selector"]["matchLabels"]),
        "{case}"
    );
    let spec = &pod["spec"];
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true, "{case}");
    assert_eq!(spec["automountServiceAccountToken"], false, "{case}");
    let containers = spec["containers"].as_array().unwrap();
    let volumes: Vec<&str> = spec["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["name"].as_str().unwrap())
        .collect();
    for c in containers {
        let ports: Vec<&str> = c["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let n = p["name"].as_str().unwrap();
                assert!(n.len() <= 15 && is_dns_label(n), "{case}: port {n}");
                n
            })
            .collect();
        let sc = &c["securityContext"];
        assert_eq!(sc["readOnlyRootFilesystem"], true, "{case}");
        assert_eq!(sc["allowPrivilegeEscalation"], false, "{case}");
        assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]), "{case}");
        assert!(c["resources"]["requests"]["memory"].is_string(), "{case}");
        for probe in ["readinessProbe", "livenessProbe"] {
            let p = &c[probe]["httpGet"];
            assert_eq!(p["path"], "/healthz", "{case}: {probe}");
            assert!(
                ports.contains(&p["port"].as_str().unwrap()),
                "{case}: {probe} on a port the container has"
            );
        }
        for m in c["volumeMounts"].as_array().unwrap() {
            assert!(
                volumes.contains(&m["name"].as_str().unwrap()),
                "{case}: mount {m} of a volume the pod has"
            );
        }
        for e in c["env"].as_array().into_iter().flatten() {
            let name = e["name"].as_str().unwrap();
            assert!(
                e["value"].is_string() || e["valueFrom"]["secretKeyRef"]["key"].is_string(),
                "{case}: env {name}"
            );
        }
    }
    let service = one(objects, "Service").expect("a Service");
    assert!(selects(&service["spec"]["selector"]), "{case}");
    let service_ports: Vec<&str> = service["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(service_ports, ["control", "runner"], "{case}");
    if let Some(pdb) = one(objects, "PodDisruptionBudget") {
        assert!(selects(&pdb["spec"]["selector"]["matchLabels"]), "{case}");
    }
    if let Some(ingress) = one(objects, "Ingress") {
        for rule in ingress["spec"]["rules"].as_array().unwrap() {
            let backend = &rule["http"]["paths"][0]["backend"]["service"];
            assert_eq!(backend["name"], service["metadata"]["name"], "{case}");
            assert!(
                service_ports.contains(&backend["port"]["name"].as_str().unwrap()),
                "{case}: ingress backend {backend}"
            );
        }
    }
}

fn args_of(objects: &[Value]) -> Vec<String> {
    let c = &one(objects, "Deployment").unwrap()["spec"]["template"]["spec"]["containers"][0];
    c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn the_control_plane_chart_passes_helm_lint_and_template_with_its_values() {
    if !have_python_module(
        "helm_python",
        "helm-python-sdk",
        "check the control plane's Helm chart with real Helm",
    ) {
        return;
    }
    // The chart runs the release it ships with.
    let chart = std::fs::read_to_string(chart_dir().join("Chart.yaml")).unwrap();
    let manifest = std::fs::read_to_string(nuon_tests::repo_root().join("Cargo.toml")).unwrap();
    let version = manifest
        .lines()
        .find_map(|l| l.strip_prefix("version = "))
        .unwrap();
    assert!(
        chart.contains(&format!("appVersion: {version}")),
        "Chart.yaml's appVersion is the workspace's version {version}"
    );

    let image = json!({"image": {"repository": "registry.example.com/nuon-ctl"}});
    let with = |more: Value| {
        let mut v = image.clone();
        v.as_object_mut()
            .unwrap()
            .extend(more.as_object().unwrap().clone());
        v
    };
    let cases = json!({
        // The defaults, with the one value there is no default for.
        "default": image,
        "postgres_tls": with(json!({
            "replicas": 3,
            "runnerUrl": "https://runners.example.com",
            "database": {"existingSecret": "nuon-db"},
            "secretsKey": {"existingSecret": "nuon-secrets-key"},
            "tls": {"secretName": "nuon-tls"},
            "ingress": {
                "enabled": true,
                "className": "nginx",
                "annotations": {"nginx.ingress.kubernetes.io/backend-protocol": "HTTPS"},
                "controlHost": "nuon.example.com",
                "runnerHost": "runners.example.com",
                "tls": [{"secretName": "nuon-tls", "hosts": ["nuon.example.com", "runners.example.com"]}],
            },
            "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"memory": "2Gi"}},
            "extraArgs": ["--retention=90d"],
        })),
        "no_image": {},
        "replicas_without_database": with(json!({"replicas": 2})),
        "database_without_key": with(json!({"database": {"existingSecret": "nuon-db"}})),
        "zero_replicas": with(json!({"replicas": 0})),
        "runner_url_with_path": with(json!({"runnerUrl": "https://x.example.com/v1"})),
    });
    let out = render(&cases);
    let objects = |name: &str| -> Vec<Value> {
        let case = &out[name];
        assert!(case["error"].is_null(), "{name}: {}", case["error"]);
        case["objects"].as_array().unwrap().clone()
    };

    // Defaults: one replica on the embedded store's volume, plain HTTP.
    let default = objects("default");
    check_objects("default", &default);
    let kinds: Vec<&str> = default
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "Deployment",
            "PersistentVolumeClaim",
            "Service",
            "ServiceAccount"
        ]
    );
    let d = one(&default, "Deployment").unwrap();
    assert_eq!(d["spec"]["strategy"]["type"], "Recreate");
    let c = &d["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        c["image"],
        format!(
            "registry.example.com/nuon-ctl:{}",
            version.trim_matches('"')
        )
    );
    assert_eq!(c["readinessProbe"]["httpGet"]["scheme"], "HTTP");
    assert!(!args_of(&default).iter().any(|a| a.starts_with("--tls")));
    assert!(
        out["default"]["notes"]
            .as_str()
            .unwrap()
            .contains("runnerUrl is not set")
    );

    // PostgreSQL, TLS, an ingress and three replicas.
    let pg = objects("postgres_tls");
    check_objects("postgres_tls", &pg);
    assert!(one(&pg, "PersistentVolumeClaim").is_none());
    assert_eq!(
        one(&pg, "PodDisruptionBudget").unwrap()["spec"]["maxUnavailable"],
        1
    );
    let d = one(&pg, "Deployment").unwrap();
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(d["spec"]["strategy"]["type"], "RollingUpdate");
    let args = args_of(&pg);
    for want in [
        "--tls-cert=/etc/nuon/tls/tls.crt",
        "--tls-key=/etc/nuon/tls/tls.key",
        "--runner-url=https://runners.example.com",
        "--retention=90d",
    ] {
        assert!(args.iter().any(|a| a == want), "{want} in {args:?}");
    }
    let pod = &d["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(c["livenessProbe"]["httpGet"]["scheme"], "HTTPS");
    let env: BTreeMap<&str, &Value> = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (e["name"].as_str().unwrap(), &e["valueFrom"]["secretKeyRef"]))
        .collect();
    assert_eq!(env["NUON_DATABASE_URL"]["name"], "nuon-db");
    assert_eq!(env["NUON_SECRETS_KEY"]["name"], "nuon-secrets-key");
    let tls_volume = pod["volumes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["name"] == "tls")
        .unwrap();
    assert_eq!(tls_volume["secret"]["secretName"], "nuon-tls");
    assert_eq!(c["resources"]["limits"]["memory"], "2Gi");
    let ingress = one(&pg, "Ingress").unwrap();
    assert_eq!(ingress["spec"]["rules"].as_array().unwrap().len(), 2);

    // Values that cannot work are refused with what to set.
    for (case, says) in [
        ("no_image", "image.repository"),
        ("replicas_without_database", "needs PostgreSQL"),
        ("database_without_key", "secretsKey.existingSecret"),
        ("zero_replicas", "replicas"),
        ("runner_url_with_path", "runnerUrl"),
    ] {
        let err = out[case]["error"].as_str().unwrap_or_default();
        assert!(
            err.contains(says),
            "{case}: want {says:?} in {:#}",
            out[case]
        );
    }
}

/// `skopeo inspect` of `image` on the loopback registry, with `args`.
fn skopeo_inspect(args: &[&str], image: &str) -> Value {
    json_of(
        std::process::Command::new("skopeo")
            .args(["inspect", "--tls-verify=false"])
            .args(args)
            .arg(format!("docker://{image}")),
    )
}

/// Unpacks `image` (via `skopeo copy` to a directory) into `rootfs`.
fn unpack(image: &str, work: &std::path::Path, rootfs: &std::path::Path) {
    let dir = work.join("image");
    let out = std::process::Command::new("skopeo")
        .args(["copy", "--src-tls-verify=false"])
        .arg(format!("docker://{image}"))
        .arg(format!("dir:{}", dir.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    std::fs::create_dir_all(rootfs).unwrap();
    for layer in manifest["layers"].as_array().unwrap() {
        let hex = layer["digest"]
            .as_str()
            .unwrap()
            .trim_start_matches("sha256:");
        let status = std::process::Command::new("tar")
            .arg("-xzf")
            .arg(dir.join(hex))
            .arg("-C")
            .arg(rootfs)
            .status()
            .unwrap();
        assert!(status.success());
    }
}

#[test]
fn platform_images_are_pushed_inspected_and_the_control_plane_runs_under_runc() {
    if !have_tool("skopeo", "inspect the platform's images")
        || !have_tool("runc", "run the control plane's image")
        || !have_tool("busybox", "put a shell in the runner's image")
    {
        return;
    }
    let Some(registry) = nuon_tests::Registry::start(None).unwrap() else {
        return;
    };
    // Our own binaries, as `cargo build --bins` leaves them.
    let pushed = json_of(
        nuon_tests::ours("nuon")
            .args(["images", "platform", "--push", &registry.url])
            .args(["--prefix", "acme", "--tag", "t1", "--json", "--bin-dir"])
            .arg(nuon_tests::bin_dir()),
    );
    assert_eq!(pushed["images"].as_array().unwrap().len(), 2, "{pushed}");
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    for (name, image) in pushed["images"].as_array().unwrap().iter().enumerate() {
        let repo = image["repository"].as_str().unwrap();
        assert_eq!(repo, ["acme/nuon-ctl", "acme/nuon-runner"][name]);
        let reference = format!("{}/{repo}:t1", registry.host);
        // The tag names an index of this machine's platform.
        let index = skopeo_inspect(&["--raw"], &reference);
        assert_eq!(
            index["mediaType"],
            "application/vnd.oci.image.index.v1+json"
        );
        assert_eq!(index["manifests"][0]["platform"]["os"], "linux");
        assert_eq!(index["manifests"][0]["platform"]["architecture"], arch);
        assert_eq!(index["manifests"][0]["digest"], image["manifest"]);
        // Labels, platform, and a user that is not root.
        let info = skopeo_inspect(&[], &reference);
        assert_eq!(info["Os"], "linux");
        assert_eq!(info["Architecture"], arch);
        let title = repo.rsplit('/').next().unwrap();
        assert_eq!(info["Labels"]["org.opencontainers.image.title"], title);
        assert_eq!(
            info["Labels"]["org.opencontainers.image.version"],
            env!("CARGO_PKG_VERSION")
        );
        assert_eq!(
            info["Labels"]["dev.nuon.sbom"],
            "/usr/share/doc/nuon/sbom.spdx.json"
        );
        let config = skopeo_inspect(&["--config"], &reference);
        assert_eq!(config["config"]["User"], "65532:65532");
        assert_eq!(
            config["config"]["Entrypoint"],
            json!([format!("/usr/local/bin/{title}")])
        );
    }

    // The control plane's image, unpacked, runs under runc as user 65532
    // on a read-only root and answers /healthz.
    let work = tempfile::tempdir().unwrap();
    let bundle = work.path().join("bundle");
    let rootfs = bundle.join("rootfs");
    unpack(
        &format!("{}/acme/nuon-ctl:t1", registry.host),
        work.path(),
        &rootfs,
    );
    // The SBOM names the binary and each library it links, with digests.
    let sbom: Value = serde_json::from_slice(
        &std::fs::read(rootfs.join("usr/share/doc/nuon/sbom.spdx.json")).unwrap(),
    )
    .unwrap();
    let names: Vec<&str> = sbom["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"nuon-ctl"), "{names:?}");
    assert!(names.iter().any(|n| n.starts_with("libc.so")), "{names:?}");
    let status = std::process::Command::new("runc")
        .arg("spec")
        .current_dir(&bundle)
        .status()
        .unwrap();
    assert!(status.success());
    let mut spec: Value =
        serde_json::from_slice(&std::fs::read(bundle.join("config.json")).unwrap()).unwrap();
    let port = crate::deploy::free_port();
    let runner_port = crate::deploy::free_port();
    spec["process"]["terminal"] = json!(false);
    spec["process"]["user"] = json!({"uid": 65532, "gid": 65532});
    spec["process"]["args"] = json!([
        "/usr/local/bin/nuon-ctl",
        "serve",
        "--data-dir=/var/lib/nuon",
        format!("--listen=127.0.0.1:{port}"),
        format!("--runner-listen=127.0.0.1:{runner_port}"),
    ]);
    spec["root"]["readonly"] = json!(true);
    // The host's network, so the test reaches it on loopback.
    let namespaces = spec["linux"]["namespaces"].as_array_mut().unwrap();
    namespaces.retain(|n| n["type"] != "network");
    let mounts = spec["mounts"].as_array_mut().unwrap();
    for (at, options) in [
        ("/tmp", "mode=1777"),
        ("/var/lib/nuon", "mode=0700,uid=65532,gid=65532"),
    ] {
        mounts.push(json!({
            "destination": at, "type": "tmpfs", "source": "tmpfs",
            "options": ["nosuid", "nodev", options],
        }));
    }
    std::fs::write(bundle.join("config.json"), spec.to_string()).unwrap();
    let state = work.path().join("runc-state");
    let id = format!("nuon-ctl-test-{}", std::process::id());
    let log = work.path().join("ctl.log");
    let mut child = std::process::Command::new("runc")
        .arg("--root")
        .arg(&state)
        .args(["run", "--bundle"])
        .arg(&bundle)
        .arg(&id)
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&log).unwrap())
        .stderr(std::fs::File::create(work.path().join("runc.err")).unwrap())
        .spawn()
        .unwrap();
    let healthz = format!("http://127.0.0.1:{port}/healthz");
    let answered = nuon_tests::wait_for(
        "the control plane in its container to answer /healthz",
        std::time::Duration::from_secs(60),
        || {
            let r = nuon_tests::rt().block_on(reqwest::get(&healthz)).ok()?;
            r.status().is_success().then_some(())
        },
    );
    let stop = |signal: &str| {
        std::process::Command::new("runc")
            .arg("--root")
            .arg(&state)
            .args(["kill", &id, signal])
            .status()
    };
    let _ = stop("TERM");
    let exited = nuon_tests::wait_for(
        "the control plane to stop on SIGTERM",
        std::time::Duration::from_secs(20),
        || child.try_wait().ok().flatten(),
    );
    if exited.is_err() {
        let _ = stop("KILL");
        let _ = child.wait();
    }
    let _ = std::process::Command::new("runc")
        .arg("--root")
        .arg(&state)
        .args(["delete", "-f", &id])
        .status();
    let said = format!(
        "{}{}",
        std::fs::read_to_string(&log).unwrap_or_default(),
        std::fs::read_to_string(work.path().join("runc.err")).unwrap_or_default()
    );
    answered.unwrap_or_else(|e| panic!("{e}: {said}"));
    assert!(
        said.contains(&format!("control-api: http://127.0.0.1:{port}")),
        "{said}"
    );
    assert!(
        exited.is_ok_and(|s| s.success()),
        "a clean stop on SIGTERM: {said}"
    );
}

/// YAML as JSON, by Python's yaml (an independent parser).
fn yaml_to_json(yaml: &[u8]) -> Value {
    let mut child = std::process::Command::new("python3")
        .args([
            "-c",
            "import json, sys, yaml; print(json.dumps(yaml.safe_load(sys.stdin)))",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(yaml).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success());
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn the_cli_writes_a_man_page_per_command_and_prints_yaml_as_it_prints_json() {
    if !have_python_module("yaml", "pyyaml", "read the CLI's YAML") {
        return;
    }
    let pages = tempfile::tempdir().unwrap();
    let out = nuon_tests::ours("nuon")
        .arg("man")
        .arg(pages.path())
        .args(["--output", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written: Value = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<String> = std::fs::read_dir(pages.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(written["pages"].as_array().unwrap().len(), names.len());
    // Every command has its page, down to the leaves.
    for name in [
        "nuon.1",
        "nuon-apps-create.1",
        "nuon-installs-state-list.1",
        "nuon-images-platform.1",
        "nuon-context-add.1",
        "nuon-man.1",
    ] {
        assert!(names.iter().any(|n| n == name), "{name} in {names:?}");
    }
    let page = std::fs::read_to_string(pages.path().join("nuon-installs-state-list.1")).unwrap();
    assert!(page.contains(".TH nuon-installs-state-list 1"), "{page}");
    assert!(page.contains("nuon installs state list"), "{page}");

    // --output yaml is the --json document, in YAML; errors too.
    let cp = nuon_tests::ControlPlane::start("3s").unwrap();
    crate::deploy::ok(cp.nuon(&["apps", "create", "shop"]));
    for args in [
        &["apps", "list"][..],
        &["apps", "get", "shop"],
        &["runners", "list"],
    ] {
        let json = crate::deploy::ok(cp.nuon(&[args, &["--json"]].concat()));
        let yaml = cp.nuon(&[args, &["--output", "yaml"]].concat());
        assert!(yaml.status.success(), "{}", crate::deploy::text(&yaml));
        assert!(!yaml.stdout.starts_with(b"{"), "YAML, not JSON");
        assert_eq!(
            yaml_to_json(&yaml.stdout),
            serde_json::from_str::<Value>(&json).unwrap(),
            "{args:?}"
        );
    }
    let missing = cp.nuon(&["apps", "get", "nope", "-o", "yaml"]);
    assert!(!missing.status.success());
    let doc = yaml_to_json(&missing.stdout);
    assert_eq!(doc["code"], "not_found", "{doc}");
    let both = cp.nuon(&["apps", "list", "--json", "--output", "yaml"]);
    assert_eq!(both.status.code(), Some(64), "--json and --output conflict");
}
