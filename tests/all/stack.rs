//! Install stacks: the `vm` bundle applied for real on loopback (its
//! installer starts the runner, which phones home with the stack's
//! one-time token), the stack's outputs reaching Terraform, the unit
//! checked by `systemd-analyze verify`, and a token used twice, or
//! unknown, refused clearly; a stack output changed in the store refused.

use std::process::{Command, Stdio};
use std::time::Duration;

use nuon_core::workflow::WorkflowKind;
use nuon_tests::{ControlPlane, bin, have_python_module, have_tool, ours, rt, wait_for};

use crate::deploy::{METADATA, Manual, ok, run_workflow, text};

/// A component whose Terraform reads an output of the install's stack.
const REGIONAL: (&str, &str) = (
    "components/regional.toml",
    "name = \"regional\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"tf\"\n\n[vars]\nregion = \"{{ .nuon.install_stack.outputs.region }}\"\nhost = \"{{ .nuon.install_stack.outputs.hostname }}\"\n",
);
const REGIONAL_TF: (&str, &str) = (
    "tf/main.tf",
    "variable \"region\" {\n  type = string\n}\n\nvariable \"host\" {\n  type = string\n}\n\nresource \"terraform_data\" \"x\" {\n  input = var.region\n}\n\noutput \"region\" {\n  value = terraform_data.x.output\n}\n\noutput \"host\" {\n  value = var.host\n}\n",
);

/// `nuon installs stack demo --format vm --out DIR`: what it printed, and
/// the one-time token of the bundle it wrote.
fn vm_stack(m: &Manual, dir: &std::path::Path) -> (String, String) {
    let out = m.cp.nuon(&[
        "installs",
        "stack",
        "demo",
        "--format",
        "vm",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
    let env = std::fs::read_to_string(dir.join("nuon-runner.env")).unwrap();
    let token = env
        .lines()
        .find_map(|l| l.strip_prefix("NUON_RUNNER_INSTALL_TOKEN="))
        .expect("the bundle's token")
        .to_owned();
    (text(&out), token)
}

/// A fresh `nuon-runner run` in work dir `dir` with `token` as its stack's
/// one-time token.
fn phone_home_again(m: &Manual, dir: &str, token: &str) -> std::process::Output {
    phone_home(m, &m.dir.path().join(dir), token)
        .output()
        .unwrap()
}

/// `nuon-runner run` in `work` with `token` as its stack's one-time token.
pub(crate) fn phone_home(m: &Manual, work: &std::path::Path, token: &str) -> Command {
    let mut cmd = ours("nuon-runner");
    cmd.arg("run")
        .args([
            "--api",
            &m.cp.runner_url,
            "--signing-key",
            &m.cp.signing_key,
        ])
        .arg("--work-dir")
        .arg(work)
        .env("NUON_RUNNER_INSTALL_TOKEN", token);
    cmd
}

#[test]
fn the_vm_bundle_starts_a_runner_that_phones_home_once_and_its_outputs_reach_terraform() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let mut m = Manual::start(&[METADATA, REGIONAL, REGIONAL_TF]);
    // No hand-started runner: the stack brings it.
    m.stop_runner();
    let c = m.cp.client();
    let stack_dir = m.dir.path().join("stack");
    let (_, token) = vm_stack(&m, &stack_dir);
    use std::os::unix::fs::PermissionsExt;
    let mode = |f: &str| {
        std::fs::metadata(stack_dir.join(f))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(
        (mode("install.sh"), mode("nuon-runner.env")),
        (0o755, 0o600)
    );
    assert!(token.starts_with("stk_"), "{token}");

    // A value that would not read back alike in systemd and sh is refused.
    let bad = Command::new("sh")
        .arg(stack_dir.join("install.sh"))
        .args([
            "--no-systemd",
            "--binary",
            bin("nuon-runner").to_str().unwrap(),
        ])
        .args(["--output", "region=eu west"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(64), "{}", text(&bad));
    assert!(
        text(&bad).contains("--output takes KEY=VALUE"),
        "{}",
        text(&bad)
    );

    let prefix = m.dir.path().join("opt");
    let work = m.dir.path().join("vm-work");
    let log = std::fs::File::create(m.dir.path().join("vm-runner.log")).unwrap();
    let vm = Command::new("sh")
        .arg(stack_dir.join("install.sh"))
        .args(["--no-systemd", "--prefix", prefix.to_str().unwrap()])
        .args(["--work-dir", work.to_str().unwrap()])
        .args(["--binary", bin("nuon-runner").to_str().unwrap()])
        .args(["--output", "region=eu-test-1"])
        .envs(m.runner_store_env())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    // Stopped however the test ends: install.sh execs the runner.
    let _vm = KillOnDrop(vm);
    // The installed unit is a valid systemd unit.
    let unit = prefix.join("nuon-runner.service");
    wait_for("the unit to be written", Duration::from_secs(20), || {
        unit.exists().then_some(())
    })
    .unwrap();
    if have_tool("systemd-analyze", "check the runner's systemd unit") {
        let out = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&unit)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    }
    // The runner phoned home: its token is kept, the stack's outputs too.
    wait_for("the phone-home", Duration::from_secs(30), || {
        work.join("runner-token").exists().then_some(())
    })
    .unwrap();
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.install_stack["region"], "eu-test-1");
    assert!(outputs.install_stack.contains_key("hostname"));
    assert!(outputs.install_stack.contains_key("arch"));

    // Provision through the stack's runner: the outputs reach Terraform.
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(
        w.status,
        "succeeded",
        "{w:#?}\n{}",
        std::fs::read_to_string(m.dir.path().join("vm-runner.log")).unwrap_or_default()
    );
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.components["regional"]["region"], "eu-test-1");
    assert_eq!(
        outputs.components["regional"]["host"],
        outputs.install_stack["hostname"]
    );

    // The token works once: a second runner with it is refused, clearly.
    let again = phone_home_again(&m, "second", &token);
    assert_eq!(again.status.code(), Some(64), "{}", text(&again));
    assert!(
        text(&again).contains("used already") && text(&again).contains("nuon installs stack"),
        "{}",
        text(&again)
    );
    let unknown = phone_home_again(&m, "third", "stk_not-a-token");
    assert_eq!(unknown.status.code(), Some(64), "{}", text(&unknown));
    assert!(
        text(&unknown).contains("unknown install token"),
        "{}",
        text(&unknown)
    );
    // The phone-home is in the audit trail.
    let trail = ok(m.cp.nuon(&["audit", "list", "--limit", "1000", "--json"]));
    assert!(trail.contains("\"phoneHome\""), "{trail}");
    assert!(trail.contains("\"getInstallStack\""), "{trail}");

    // A stack output changed behind the control plane's back (a role ARN
    // swapped in the store) is refused, not used: by the API and by a job.
    if have_tool("sqlite3", "edit a stack output behind the store") {
        crate::ops::sqlite3(
            &m.cp.data_dir.join("nuon.db"),
            "UPDATE installs SET stack_outputs = substr(stack_outputs, 1, length(stack_outputs) - 6) || 'AAAAAA' WHERE name = 'demo'",
        );
        let refused = m.cp.nuon(&["installs", "outputs", "demo"]);
        assert!(!refused.status.success(), "{}", text(&refused));
        assert!(
            text(&refused).contains("changed outside the control plane")
                && text(&refused).contains("nuon installs stack demo"),
            "{}",
            text(&refused)
        );
        let refused = m.cp.nuon(&["installs", "deploy", "demo"]);
        assert!(!refused.status.success(), "{}", text(&refused));
        assert!(
            text(&refused).contains("changed outside the control plane"),
            "{}",
            text(&refused)
        );
    }
}

/// A child killed when the test ends, passed or not.
pub(crate) struct KillOnDrop(pub(crate) std::process::Child);

impl Drop for KillOnDrop {
    /// Kills the child, and its whole group when it leads one (started
    /// with `process_group(0)`: a shell and the runner it started).
    fn drop(&mut self) {
        nuon_tests::signal_group(self.0.id(), libc::SIGKILL);
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An app using every feature of `stack.toml`, `runner.toml`,
/// `permissions` and `break_glass`.
const EVERY_FEATURE: &[(&str, &str)] = &[
    METADATA,
    (
        "runner.toml",
        "runner_type = \"aws\"\ninstance_type = \"t3a.large\"\ninit_script_url = \"https://acme.example.com/init.sh\"\nhelm_driver = \"configmap\"\n\n[env_vars]\nTF_IN_AUTOMATION = \"1\"\n",
    ),
    (
        "stack.toml",
        "type = \"aws-cloudformation\"\nname = \"acme-{{ .nuon.install.name }}\"\ndescription = \"Acme in your account\"\nvpc_nested_template_url = \"https://acme-stacks.s3.amazonaws.com/vpc.yaml\"\nrunner_nested_template_url = \"https://acme-stacks.s3.amazonaws.com/runner.yaml\"\n\n[[custom_nested_stacks]]\nname = \"audit-logs\"\ntemplate_url = \"https://acme-stacks.s3.amazonaws.com/audit.yaml\"\nindex = 2\n\n[custom_nested_stacks.parameters]\nRetentionDays = \"30\"\n\n[[custom_nested_stacks]]\nname = \"dns\"\ntemplate_url = \"https://acme-stacks.s3.amazonaws.com/dns.yaml\"\nindex = 1\n",
    ),
    (
        "permissions/provision.toml",
        "type = \"provision\"\nname = \"{{ .nuon.install.id }}-provision\"\ndescription = \"Creates the install's infrastructure\"\ndisplay_name = \"Provision\"\npermissions_boundary = \"./boundary.json\"\n\n[[policies]]\nmanaged_policy_name = \"AdministratorAccess\"\n\n[[named_policies]]\nname = \"eks-access\"\n",
    ),
    (
        "permissions/maintenance.toml",
        "type = \"maintenance\"\nname = \"{{ .nuon.install.id }}-maintenance\"\ndescription = \"Day-two operations\"\npermissions_boundary = \"./boundary.json\"\n\n[[policies]]\nname = \"read-only\"\ncontents = '''\n{\"Version\": \"2012-10-17\", \"Statement\": [{\"Effect\": \"Allow\", \"Action\": [\"ec2:Describe*\", \"s3:GetObject\"], \"Resource\": \"*\"}]}\n'''\n",
    ),
    (
        "permissions/deprovision.toml",
        "type = \"deprovision\"\nname = \"{{ .nuon.install.id }}-deprovision\"\ndescription = \"Tears the install down\"\n\n[[policies]]\nmanaged_policy_name = \"PowerUserAccess\"\n",
    ),
    (
        "permissions/custom.toml",
        "type = \"custom\"\nname = \"{{ .nuon.install.id }}-dns\"\ndescription = \"Manages the install's DNS records\"\n\n[[policies]]\nname = \"route53\"\ncontents = '{\"Version\": \"2012-10-17\", \"Statement\": [{\"Effect\": \"Allow\", \"Action\": \"route53:ChangeResourceRecordSets\", \"Resource\": \"*\"}]}'\n",
    ),
    (
        "permissions/boundary.json",
        "{\"Version\": \"2012-10-17\", \"Statement\": [{\"Effect\": \"Allow\", \"Action\": \"*\", \"Resource\": \"*\"}, {\"Effect\": \"Deny\", \"Action\": [\"iam:CreateUser\", \"organizations:*\"], \"Resource\": \"*\"}]}\n",
    ),
    (
        "permissions/policies/eks.toml",
        "name = \"eks-access\"\ndescription = \"EKS\"\ncontents = '{\"Version\": \"2012-10-17\", \"Statement\": [{\"Effect\": \"Allow\", \"Action\": \"eks:*\", \"Resource\": \"*\"}]}'\n",
    ),
    (
        "break_glass.toml",
        "[[role]]\ntype = \"custom\"\nname = \"{{ .nuon.install.id }}-break-glass\"\ndescription = \"Vendor access for emergencies\"\n\n[[role.policies]]\nmanaged_policy_name = \"AdministratorAccess\"\n\n[[role]]\ntype = \"custom\"\nname = \"{{ .nuon.install.id }}-support\"\ndescription = \"Read-only support access\"\nenabled_in_stack = true\n\n[[role.policies]]\nmanaged_policy_name = \"ReadOnlyAccess\"\n",
    ),
    (
        "components/web.toml",
        "name = \"web\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"tf\"\n",
    ),
    ("tf/main.tf", "output \"ok\" {\n  value = true\n}\n"),
];

/// Real Helm (Helm v4's Go SDK, through PyPI's helm-python-sdk) lints the
/// chart strictly and renders it with its default values and with
/// `values` (JSON), each with the one value it requires (the image's
/// repository): what it prints is `{"default": {...}, "test": {...},
/// "no_image": why}`, each template's path to its manifest.
const HELM_CHECK: &str = r#"
import json, sys
import helm_python as helm
chart_dir, test_values = sys.argv[1], json.loads(sys.argv[2])
image = {"image": {"repository": "registry.example.com/nuon-runner"}}
out = {}
try:
    helm.Chart.load(chart_dir).render(None, name="nuon-runner", namespace="customer-ns", is_install=True)
    out["no_image"] = "rendered"
except Exception as e:
    out["no_image"] = str(e)
for name, values in (("default", image), ("test", {**test_values, **image})):
    report = helm.lint(chart_dir, values, strict=True)
    bad = [m for m in report["messages"] if m["severity"] >= 2] + report.get("errors", [])
    if bad:
        sys.exit(f"helm lint ({name} values): {bad}")
    out[name] = helm.Chart.load(chart_dir).render(values, name="nuon-runner", namespace="customer-ns", is_install=True)
print(json.dumps(out))
"#;

fn write_app(dir: &std::path::Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let p = dir.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// `cfn-lint` on a template: no error (warnings are printed).
pub(crate) fn cfn_lint(template: &std::path::Path) {
    let out = Command::new("cfn-lint").arg(template).output().unwrap();
    let code = out.status.code().unwrap_or(-1);
    // Its exit code is a bit set: 2 an error, 4 a warning, 8 informational.
    assert!(
        code >= 0 && code & 2 == 0 && code & 1 == 0,
        "cfn-lint {}: exit {code}\n{}",
        template.display(),
        text(&out)
    );
    assert_eq!(code & 4, 0, "cfn-lint warns:\n{}", text(&out));
}

/// `nuon installs stack INSTALL --format F --out DIR`, `DIR`.
fn stack_of(
    cp: &ControlPlane,
    dir: &std::path::Path,
    install: &str,
    format: Option<&str>,
) -> std::path::PathBuf {
    let out_dir = dir.join(format!("{install}-{}", format.unwrap_or("default")));
    let mut args = vec![
        "installs",
        "stack",
        install,
        "--out",
        out_dir.to_str().unwrap(),
    ];
    if let Some(f) = format {
        args.extend(["--format", f]);
    }
    ok(cp.nuon(&args));
    out_dir
}

#[test]
fn cloudformation_and_helm_stacks_pass_cfn_lint_and_real_helm() {
    if !have_tool("cfn-lint", "check the CloudFormation install stacks")
        || !have_python_module(
            "helm_python",
            "helm-python-sdk",
            "check the Helm chart install stacks with real Helm",
        )
    {
        return;
    }
    let cp = ControlPlane::start("3s").expect("control plane");
    let dir = tempfile::tempdir().unwrap();
    // An app using every stack and permission feature, and one whose
    // runner runs on ECS Fargate.
    write_app(&dir.path().join("full"), EVERY_FEATURE);
    let mut ecs: Vec<(&str, &str)> = EVERY_FEATURE
        .iter()
        .copied()
        .filter(|(p, _)| !p.starts_with("stack.toml") && *p != "runner.toml")
        .collect();
    ecs.push(("runner.toml", "runner_type = \"aws-ecs\"\n"));
    write_app(&dir.path().join("ecs"), &ecs);
    let hello = nuon_tests::manifest_dir().join("../examples/apps/hello");
    for (app, path) in [
        ("full", dir.path().join("full")),
        ("ecs", dir.path().join("ecs")),
        ("hello", hello),
    ] {
        ok(cp.nuon(&["apps", "create", app]));
        let synced = ok(cp.nuon(&["apps", "sync", path.to_str().unwrap(), "--app", app]));
        if app == "full" {
            // What takes effect now is not warned about.
            assert!(
                !synced.contains("stack.toml cannot take effect"),
                "{synced}"
            );
        }
        let mut create = vec!["installs", "create", "--app", app, "--name", app];
        if app == "hello" {
            create.extend(["--input", "api_key=demo-key"]);
        }
        ok(cp.nuon(&create));
    }
    let c = cp.client();
    let full_id = rt().block_on(c.get_install("full")).unwrap().id.to_string();

    // CloudFormation: the runner type's default for aws, and asked for.
    let full = stack_of(&cp, dir.path(), "full", None);
    let template = full.join("template.json");
    cfn_lint(&template);
    let t: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&template).unwrap()).unwrap();
    let r = &t["Resources"];
    assert_eq!(
        r["ProvisionRole"]["Properties"]["RoleName"],
        format!("{full_id}-provision"),
        "role names are rendered for the install"
    );
    assert!(r["ProvisionRoleBoundary"].is_object() && r["MaintenanceRoleBoundary"].is_object());
    assert_eq!(
        r["VpcStack"]["Properties"]["TemplateURL"],
        "https://acme-stacks.s3.amazonaws.com/vpc.yaml"
    );
    // Nested stacks in index order, then the break-glass roles: off unless
    // enabled in the stack.
    let keys: Vec<&String> = r.as_object().unwrap().keys().collect();
    assert!(
        keys.contains(&&"NestedDns".to_owned()) && keys.contains(&&"NestedAuditLogs".to_owned())
    );
    assert_eq!(
        r["NestedAuditLogs"]["Properties"]["Parameters"]["RetentionDays"],
        "30"
    );
    assert_eq!(t["Parameters"]["BreakGlassRoleEnabled"]["Default"], "false");
    assert_eq!(t["Parameters"]["BreakGlassRole2Enabled"]["Default"], "true");
    let inline =
        r["CustomRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"][0]["Action"]
            .clone();
    assert_eq!(inline, "route53:ChangeResourceRecordSets");
    let named = &r["ProvisionRole"]["Properties"]["Policies"][0];
    assert_eq!(named["PolicyName"], "eks-access");
    // The token: in the NoEcho parameter only, and the file is private.
    let text_of = std::fs::read_to_string(&template).unwrap();
    let token = t["Parameters"]["InstallToken"]["Default"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(token.starts_with("stk_"));
    assert_eq!(text_of.matches(&token).count(), 1);
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        std::fs::metadata(&template).unwrap().permissions().mode() & 0o777,
        0o600
    );
    for (install, format) in [("ecs", None), ("hello", Some("cloudformation"))] {
        let d = stack_of(&cp, dir.path(), install, format);
        cfn_lint(&d.join("template.json"));
    }
    let ecs_t: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("ecs-default/template.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        ecs_t["Resources"]["RunnerService"]["Properties"]["LaunchType"],
        "FARGATE"
    );

    // A Helm chart, for the example app and the full one: strict lint and
    // render by real Helm with the default values and with test values.
    let test_values = serde_json::json!({
        "namespace": {"create": false},
        "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/runner"}},
        "persistence": {"storageClass": "gp3", "size": "20Gi"},
        "runner": {"stackOutputs": {"cluster": "prod-eks", "region": "eu-west-1"}},
        "nodeSelector": {"kubernetes.io/os": "linux"}
    });
    for install in ["hello", "full"] {
        let d = stack_of(&cp, dir.path(), install, Some("helm"));
        let chart = d.join("nuon-runner");
        let out = Command::new("python3")
            .args(["-c", HELM_CHECK])
            .arg(&chart)
            .arg(test_values.to_string())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let rendered: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        // No image is invented: without one the chart says what to set.
        let no_image = rendered["no_image"].as_str().unwrap();
        assert!(
            no_image.contains(
                "image.repository: set the registry and repository of your nuon-runner image"
            ),
            "{no_image}"
        );
        let values = std::fs::read_to_string(chart.join("values.yaml")).unwrap();
        let token = values
            .lines()
            .find_map(|l| l.trim().strip_prefix("installToken: "))
            .unwrap()
            .trim_matches('"')
            .to_owned();
        let default = &rendered["default"];
        let secret = default["nuon-runner/templates/secret.yaml"]
            .as_str()
            .unwrap();
        assert!(secret.contains(&token), "{secret}");
        assert!(secret.contains("namespace=nuon-runner-"), "{secret}");
        let ns = default["nuon-runner/templates/namespace.yaml"]
            .as_str()
            .unwrap();
        assert!(ns.contains("kind: Namespace"), "{ns}");
        let sts = default["nuon-runner/templates/statefulset.yaml"]
            .as_str()
            .unwrap();
        assert!(
            sts.contains("kind: StatefulSet") && sts.contains("volumeClaimTemplates"),
            "{sts}"
        );
        let test = &rendered["test"];
        assert!(
            test["nuon-runner/templates/namespace.yaml"]
                .as_str()
                .unwrap_or("")
                .trim()
                .is_empty(),
            "namespace.create=false makes none"
        );
        let secret = test["nuon-runner/templates/secret.yaml"].as_str().unwrap();
        assert!(
            secret.contains("namespace: customer-ns")
                && secret.contains("cluster=prod-eks")
                && secret.contains("region=eu-west-1"),
            "{secret}"
        );
        let sa = test["nuon-runner/templates/serviceaccount.yaml"]
            .as_str()
            .unwrap();
        assert!(sa.contains("eks.amazonaws.com/role-arn"), "{sa}");
        let sts = test["nuon-runner/templates/statefulset.yaml"]
            .as_str()
            .unwrap();
        assert!(sts.contains("storageClassName: \"gp3\""), "{sts}");
    }

    // A format that is not one, and a policy that is not JSON: clear.
    let out = cp.nuon(&["installs", "stack", "full", "--format", "bicep"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("cloudformation, terraform, helm, vm"),
        "{}",
        text(&out)
    );
}

const GREETER: (&str, &str) = (
    "components/greeter.toml",
    "name = \"greeter\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"greeter\"\n",
);
const GREETER_TF: (&str, &str) = (
    "greeter/main.tf",
    "variable \"greeting\" {\n  type = string\n}\n\noutput \"greeting\" {\n  value = var.greeting\n}\n",
);

fn runner_toml(word: &str) -> String {
    format!(
        "runner_type = \"local\"\n\n[env_vars]\nTF_VAR_greeting = \"{word} from {{{{ .nuon.install.name }}}}\"\n"
    )
}

#[test]
fn runner_settings_reach_every_job_and_a_change_is_fetched_without_a_restart() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let first = runner_toml("hello");
    let m = Manual::start(&[METADATA, GREETER, GREETER_TF, ("runner.toml", &first)]);
    let c = m.cp.client();
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.components["greeter"]["greeting"], "hello from demo");

    // A new runner.toml: the same runner, not restarted, learns of it from
    // its next claim and its next job runs with it.
    let app = m.dir.path().join("app");
    std::fs::write(app.join("runner.toml"), runner_toml("bonjour")).unwrap();
    ok(m.cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]));
    ok(m.cp.nuon(&["builds", "create", "--app", "app", "--wait"]));
    let w = run_workflow(&c, WorkflowKind::Deploy);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(
        outputs.components["greeter"]["greeting"],
        "bonjour from demo"
    );
    let log = std::fs::read_to_string(m.dir.path().join("install.log")).unwrap();
    assert!(log.matches("runner settings fetched").count() >= 2, "{log}");
}

#[test]
fn the_customer_disables_the_runner_nothing_new_is_queued_and_a_waiting_step_fails_after_its_bound()
{
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let cp = ControlPlane::start_with("3s", &["--await-runner-timeout", "8s"]).unwrap();
    let settings = runner_toml("hello");
    let m = Manual::start_on(
        cp,
        &[METADATA, GREETER, GREETER_TF, ("runner.toml", &settings)],
        None,
        |_| {},
        &[],
    );
    let c = m.cp.client();
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");

    // The customer's switch, on the runner's own machine, while it runs.
    let work = m.runner_work_dir();
    let switch = |args: &[&str]| {
        let out = ours("nuon-runner")
            .args(args)
            .arg("--work-dir")
            .arg(&work)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        text(&out)
    };
    let said = switch(&["disable", "--reason", "change freeze until Monday"]);
    assert!(said.contains("nuon-runner enable"), "{said}");
    // The vendor sees it: the runner calls, disabled, with the reason.
    wait_for(
        "the runner to be shown disabled",
        Duration::from_secs(60),
        || {
            let list = rt().block_on(c.list_runners()).ok()?;
            list.runners
                .iter()
                .any(|r| {
                    r.telemetry.as_ref().and_then(|t| t.disabled.as_deref())
                        == Some("change freeze until Monday")
                })
                .then_some(())
        },
    )
    .unwrap();
    let health = rt().block_on(c.install_health("demo")).unwrap();
    assert_eq!(health.status, "disabled", "{health:#?}");
    let listed = ok(m.cp.nuon(&["runners", "list"]));
    assert!(listed.contains("(disabled)"), "{listed}");

    // A deploy queues nothing for it: its first step waits, saying why,
    // and fails after --await-runner-timeout.
    let w = run_workflow(&c, WorkflowKind::Deploy);
    assert_eq!(w.status, "failed", "{w:#?}");
    let first = &w.steps[0];
    assert!(first.job_id.is_none(), "nothing was queued: {first:#?}");
    let reason = first.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("gave up after 8 s")
            && reason.contains("the customer disabled install demo's runner")
            && reason.contains("change freeze until Monday"),
        "{reason}"
    );
    assert!(w.steps.iter().all(|s| s.job_id.is_none()), "{w:#?}");

    // Enabled again: the retry runs.
    let said = switch(&["enable"]);
    assert!(said.contains("enabled"), "{said}");
    let retried = rt()
        .block_on(c.retry_workflow(w.id.as_str(), None))
        .unwrap();
    let done = crate::deploy::wait_workflow(&c, retried.id.as_str(), crate::deploy::ended);
    assert_eq!(done.status, "succeeded", "{done:#?}");
    let health = rt().block_on(c.install_health("demo")).unwrap();
    assert_eq!(health.status, "healthy", "{health:#?}");
}

/// An app whose jobs run with the roles of their operations.
const ROLES_APP: &[(&str, &str)] = &[
    METADATA,
    (
        "permissions/provision.toml",
        "type = \"provision\"\nname = \"{{ .nuon.install.name }}-provision\"\ndescription = \"provisions\"\n",
    ),
    (
        "permissions/maintenance.toml",
        "type = \"maintenance\"\nname = \"{{ .nuon.install.name }}-maintenance\"\ndescription = \"day two\"\n",
    ),
    (
        "permissions/deprovision.toml",
        "type = \"deprovision\"\nname = \"{{ .nuon.install.name }}-deprovision\"\ndescription = \"tears down\"\n",
    ),
    (
        "permissions/dns.toml",
        "type = \"custom\"\nname = \"{{ .nuon.install.name }}-dns\"\ndescription = \"DNS records\"\n",
    ),
    (
        "break_glass.toml",
        "[[role]]\ntype = \"custom\"\nname = \"{{ .nuon.install.name }}-bg\"\ndescription = \"emergencies\"\n",
    ),
    (
        "operation_roles.toml",
        "type = \"matrix\"\n\n[[rules]]\nprincipal = \"nuon::component:greeter\"\noperation = \"deploy\"\nrole = \"{{ .nuon.install.name }}-dns\"\n",
    ),
    (
        "components/base.toml",
        "name = \"base\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"base\"\n",
    ),
    ("base/main.tf", "output \"ok\" {\n  value = true\n}\n"),
    (
        "components/greeter.toml",
        "name = \"greeter\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"greeter\"\n\n[vars]\ngreeting = \"hi\"\n",
    ),
    GREETER_TF,
    (
        "actions/whoami.toml",
        "name = \"whoami\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"who\"\ncommand = \"echo role=$NUON_JOB_ROLE >> $NUON_ACTIONS_OUTPUT_FILEPATH\"\n",
    ),
    (
        "actions/emergency.toml",
        "name = \"emergency\"\ntimeout = \"1m\"\nbreak_glass_role = \"{{ .nuon.install.name }}-bg\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"fix\"\ncommand = \"echo role=$NUON_JOB_ROLE >> $NUON_ACTIONS_OUTPUT_FILEPATH\"\n",
    ),
    (
        "actions/on_break_glass.toml",
        "name = \"on_break_glass\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"role-enabled\"\n\n[[steps]]\nname = \"tell\"\ncommand = \"echo break-glass-on\"\n",
    ),
    (
        "actions/off_break_glass.toml",
        "name = \"off_break_glass\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"role-disabled\"\n\n[[steps]]\nname = \"tell\"\ncommand = \"echo break-glass-off\"\n",
    ),
];

/// The log of the job of step `name`.
fn step_log(m: &Manual, w: &nuon_core::wire::WorkflowInfo, name: &str) -> String {
    let job = crate::deploy::step(w, name).job_id.clone().expect("a job");
    // The runner's own lines are on stderr.
    let out = m.cp.nuon(&["jobs", "logs", job.as_str()]);
    assert!(out.status.success(), "{}", text(&out));
    text(&out)
}

#[test]
fn each_job_gets_its_operations_role_and_break_glass_waits_for_the_customer() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let mut m = Manual::start(ROLES_APP);
    // What the stack created, as its outputs say; the env provider hands
    // each job its role.
    let arn = |n: &str| format!("arn:aws:iam::123456789012:role/demo-{n}");
    let outputs = format!(
        "account_id=123456789012 provision_iam_role_arn={} maintenance_iam_role_arn={} deprovision_iam_role_arn={} iam_role_arn_demo_dns={} break_glass_iam_role_arn_demo_bg={}",
        arn("provision"),
        arn("maintenance"),
        arn("deprovision"),
        arn("dns"),
        arn("bg")
    );
    m.restart_runner_with(&["--credentials", "env", "--stack-outputs", &outputs]);
    let c = m.cp.client();

    // Provision: the provision role, but the greeter's deploy has its rule.
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let log = step_log(&m, &w, "apply base");
    assert!(
        log.contains("runs as role demo-provision (provision"),
        "{log}"
    );
    let log = step_log(&m, &w, "apply greeter");
    assert!(
        log.contains(
            "runs as role demo-dns (custom; operation_roles.toml: nuon::component:greeter deploy)"
        ),
        "{log}"
    );
    // Day two: the maintenance role, for a deploy and an action.
    let w = run_workflow(&c, WorkflowKind::Deploy);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert!(step_log(&m, &w, "plan base").contains("runs as role demo-maintenance (maintenance"));
    let run = |action: &str| {
        let w = rt()
            .block_on(c.run_action("demo", action, Default::default()))
            .unwrap();
        crate::deploy::wait_workflow(&c, w.id.as_str(), crate::deploy::ended)
    };
    let w = run("whoami");
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.actions["whoami"]["role"], "demo-maintenance");

    // A break-glass role is refused until the customer turns it on, which
    // starts the app's role-enabled action.
    let w = run("emergency");
    assert_eq!(w.status, "failed", "{w:#?}");
    assert!(
        format!("{w:?}").contains("break-glass role demo-bg is off"),
        "{w:#?}"
    );
    let before = rt()
        .block_on(c.list_workflows("demo"))
        .unwrap()
        .workflows
        .len();
    let out = ours("nuon-runner")
        .args(["break-glass", "enable", "demo-bg", "--work-dir"])
        .arg(m.runner_work_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // The first workflow of `trigger`, once it ended.
    let fired_by = |trigger: &str| {
        let fired = wait_for(
            &format!("the {trigger} action"),
            Duration::from_secs(90),
            || {
                let list = rt().block_on(c.list_workflows("demo")).ok()?;
                list.workflows
                    .into_iter()
                    .find(|w| w.trigger.as_deref() == Some(trigger))
            },
        )
        .unwrap();
        crate::deploy::wait_workflow(&c, fired.id.as_str(), crate::deploy::ended)
    };
    let fired = fired_by("role-enabled");
    assert!(
        rt().block_on(c.list_workflows("demo"))
            .unwrap()
            .workflows
            .len()
            > before
    );
    assert_eq!(fired.status, "succeeded", "{fired:#?}");
    assert_eq!(
        fired.component.as_deref(),
        Some("on_break_glass"),
        "{fired:#?}"
    );
    let w = run("emergency");
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.actions["emergency"]["role"], "demo-bg");
    let trail = ok(m.cp.nuon(&["audit", "list", "--limit", "1000", "--json"]));
    assert!(
        trail.contains("role-enabled: the customer turned break-glass demo-bg on"),
        "{trail}"
    );
    // Turned off again: the role-disabled action runs.
    let out = ours("nuon-runner")
        .args(["break-glass", "disable", "demo-bg", "--work-dir"])
        .arg(m.runner_work_dir())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let fired = fired_by("role-disabled");
    assert_eq!(fired.status, "succeeded", "{fired:#?}");
    assert_eq!(
        fired.component.as_deref(),
        Some("off_break_glass"),
        "{fired:#?}"
    );
    let trail = ok(m.cp.nuon(&["audit", "list", "--limit", "1000", "--json"]));
    assert!(
        trail.contains("role-disabled: the customer turned break-glass demo-bg off"),
        "{trail}"
    );

    // Teardown: the deprovision role.
    let w = run_workflow(&c, WorkflowKind::Deprovision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert!(
        step_log(&m, &w, "destroy base").contains("runs as role demo-deprovision (deprovision")
    );
}

#[test]
fn an_expired_stack_token_is_refused_clearly() {
    let cp = ControlPlane::start_with("3s", &["--stack-token-ttl", "1s"]).unwrap();
    let m = Manual::start_on(cp, &[METADATA], None, |_| {}, &[]);
    let (instructions, token) = vm_stack(&m, &m.dir.path().join("stack"));
    assert!(instructions.contains("expires in 1 s"), "{instructions}");
    std::thread::sleep(Duration::from_millis(1500));
    let late = phone_home_again(&m, "late", &token);
    assert_eq!(late.status.code(), Some(64), "{}", text(&late));
    assert!(
        text(&late).contains("this install token expired")
            && text(&late).contains("nuon installs stack INSTALL"),
        "{}",
        text(&late)
    );
}

/// An app written for Nuon's AWS stack: its templates read Nuon's state
/// (`.nuon.org.name`, `.nuon.cloud_account.aws.region`) and the stack's
/// outputs in Nuon's contract (`break_glass_role_arns` and
/// `custom_role_arns`, maps by role name); a role's policy and its empty
/// boundary as Nuon writes them, and an action on the old trigger name.
const NUON_AWS_APP: &[(&str, &str)] = &[
    METADATA,
    ("runner.toml", "runner_type = \"aws\"\n"),
    (
        "permissions/reader.toml",
        "type = \"custom\"\nname = \"{{ .nuon.install.id }}-reader\"\ndescription = \"reads\"\npermissions_boundary = \"\"\n\n[[policies]]\nname = \"read\"\ncontents = \"./read.json\"\n",
    ),
    (
        "permissions/read.json",
        "{\"Version\": \"2012-10-17\", \"Statement\": [{\"Effect\": \"Allow\", \"Action\": \"s3:GetObject\", \"Resource\": \"*\"}]}\n",
    ),
    (
        "break_glass.toml",
        "[[role]]\ntype = \"custom\"\nname = \"{{ .nuon.install.id }}-bg\"\ndescription = \"emergencies\"\n",
    ),
    (
        "components/cluster.toml",
        "name = \"cluster\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"tf\"\n\n[vars]\nregion = \"{{ .nuon.cloud_account.aws.region }}\"\nvendor = \"{{ .nuon.org.name }}/{{ .nuon.name }}\"\nbreak_glass = \"{{ range $name, $arn := .nuon.install_stack.outputs.break_glass_role_arns }}{{ $name }}={{ $arn }}{{ end }}\"\ncustom = \"{{ len .nuon.install_stack.outputs.custom_role_arns }}\"\n",
    ),
    (
        "tf/main.tf",
        "variable \"region\" {\n  type = string\n}\n\nvariable \"vendor\" {\n  type = string\n}\n\nvariable \"break_glass\" {\n  type = string\n}\n\nvariable \"custom\" {\n  type = string\n}\n\noutput \"seen\" {\n  value = \"${var.region} ${var.vendor} ${var.break_glass} ${var.custom}\"\n}\n",
    ),
    (
        "actions/before.toml",
        "name = \"before\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"pre-component-deploy\"\ncomponent_name = \"cluster\"\n\n[[steps]]\nname = \"say\"\ncommand = \"echo before the cluster\"\n",
    ),
];

#[test]
fn a_sandbox_written_for_nuons_aws_stack_renders_against_our_stacks_outputs() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let mut m = Manual::start(NUON_AWS_APP);
    m.stop_runner();
    let c = m.cp.client();
    let id = rt().block_on(c.get_install("demo")).unwrap().id.to_string();
    let org = rt().block_on(c.get_org()).unwrap().name;
    // The stack reports flat KEY=VALUE text, as CloudFormation and user
    // data carry it; the role outputs are named after the rendered names.
    let arn = |n: &str| format!("arn:aws:iam::123456789012:role/{id}-{n}");
    let lower = id.to_lowercase();
    let outputs = format!(
        "region=eu-west-1 account_id=123456789012 runner_subnet_id=subnet-1 iam_role_arn_{lower}_reader={} break_glass_iam_role_arn_{lower}_bg={}",
        arn("reader"),
        arn("bg")
    );
    let (_, token) = vm_stack(&m, &m.dir.path().join("stack"));
    let work = m.dir.path().join("aws-work");
    let runner = phone_home(&m, &work, &token)
        .args(["--stack-outputs", &outputs])
        .envs(m.runner_store_env())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _runner = KillOnDrop(runner);
    wait_for("the phone-home", Duration::from_secs(30), || {
        work.join("runner-token").exists().then_some(())
    })
    .unwrap();

    // Kept in Nuon's contract: maps by the roles' rendered names, beside
    // what the stack reported.
    let got = rt().block_on(c.install_outputs("demo")).unwrap();
    let stack = &got.install_stack;
    assert_eq!(
        stack["break_glass_role_arns"],
        serde_json::json!({format!("{id}-bg"): arn("bg")}),
        "{stack:#?}"
    );
    assert_eq!(
        stack["custom_role_arns"],
        serde_json::json!({format!("{id}-reader"): arn("reader")})
    );
    assert_eq!(stack["runner_subnet"], "subnet-1");
    assert_eq!(stack["phone_home_type"], "aws");
    assert_eq!(stack["region"], "eu-west-1");

    // The component renders as it would against Nuon's stack.
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let got = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(
        got.components["cluster"]["seen"],
        format!("eu-west-1 {org}/demo {id}-bg={} 1", arn("bg"))
    );
    // The old trigger name runs the action before the component's deploy.
    assert!(
        w.steps.iter().any(|s| s.name.contains("before")),
        "{:#?}",
        w.steps
    );
}

/// The installer page's download of a stack of several files.
#[test]
fn a_stack_bundle_writes_each_file_with_its_mode_whatever_it_holds() {
    let stack = nuon_core::wire::InstallStack {
        install: "acme".into(),
        format: "vm".into(),
        files: vec![
            nuon_core::wire::StackFile {
                path: "install.sh".into(),
                contents: "#!/bin/sh\necho '$HOME' \"`x`\"\nNUON_STACK_FILE_END\n".into(),
                mode: 0o755,
            },
            nuon_core::wire::StackFile {
                path: "templates/a b.yaml".into(),
                contents: "no newline at the end".into(),
                mode: 0o600,
            },
        ],
        instructions: "Run `sh install.sh`.".into(),
        token_expires_at_ms: 0,
    };
    let script = nuon_core::stack::shell_bundle(&stack, "nuon stack/../x");
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(&script)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let root = dir.path().join("nuon-stack-..-x");
    assert_eq!(
        std::fs::read_to_string(root.join("install.sh")).unwrap(),
        stack.files[0].contents
    );
    assert_eq!(
        std::fs::read_to_string(root.join("templates/a b.yaml")).unwrap(),
        "no newline at the end\n"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &str| {
        std::fs::metadata(root.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("install.sh"), 0o755);
    assert_eq!(mode("templates/a b.yaml"), 0o600);
    assert!(String::from_utf8_lossy(&out.stdout).contains("Run `sh install.sh`."));
}

/// `GET` of the Runner API's runner download with `token`: the status, the
/// digest header and the body.
fn download(m: &Manual, path: &str, token: Option<&str>) -> (u16, String, Vec<u8>) {
    rt().block_on(async {
        let mut req = reqwest::Client::new().get(format!("{}{path}", m.cp.runner_url));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let digest = resp
            .headers()
            .get("x-nuon-digest")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (status, digest, resp.bytes().await.unwrap().to_vec())
    })
}

/// `nuon installs stack demo --format cloudformation` into `dir` (under
/// the test's directory): where, and the template.
fn cloudformation_stack(m: &Manual, dir: &str) -> (std::path::PathBuf, serde_json::Value) {
    let out = m.dir.path().join(dir);
    ok(m.cp.nuon(&[
        "installs",
        "stack",
        "demo",
        "--format",
        "cloudformation",
        "--out",
        out.to_str().unwrap(),
    ]));
    let text = std::fs::read_to_string(out.join("template.json")).unwrap();
    (out, serde_json::from_str(&text).unwrap())
}

#[test]
fn a_stack_fetches_its_runner_from_the_control_plane_and_refuses_a_tampered_one() {
    let mut m = Manual::start(&[METADATA]);
    m.stop_runner();
    let version = env!("CARGO_PKG_VERSION");
    let runner = std::fs::read(bin("nuon-runner")).unwrap();
    let platform = format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH);

    // Nothing served yet: the bundle installs the binary it is given, and
    // the AWS stack has no address to invent (empty: no runner installed).
    let before = m.dir.path().join("before");
    let (said, _) = vm_stack(&m, &before);
    assert!(!before.join("runner-release.env").exists());
    assert!(said.contains("serves no runner release yet"), "{said}");
    let (_, template) = cloudformation_stack(&m, "cfn-before");
    assert_eq!(template["Parameters"]["RunnerBinaryUrl"]["Default"], "");
    assert_eq!(template["Parameters"]["RunnerBinarySha256"]["Default"], "");

    // Published: pushed to the vendor's store, signed, and served.
    let vendor = m.dir.path().join("vendor");
    let published = ok(m.cp.nuon(&[
        "runners",
        "release",
        "publish",
        "--version",
        version,
        "--binary",
        bin("nuon-runner").to_str().unwrap(),
        "--store",
        vendor.to_str().unwrap(),
        "--json",
    ]));
    let published: serde_json::Value = serde_json::from_str(&published).unwrap();
    assert_eq!(published["served"], true, "{published}");
    let digest = published["digest"].as_str().unwrap().to_owned();
    let sha256 = digest.strip_prefix("sha256:").unwrap().to_owned();
    let list = ok(m.cp.nuon(&["runners", "release", "list"]));
    assert!(list.contains("SERVED") && list.contains("yes"), "{list}");
    // The wrong bytes are not taken as the release's.
    let other = m.dir.path().join("other-binary");
    std::fs::write(&other, b"#!/bin/sh\necho not the runner\n").unwrap();
    let refused = m.cp.nuon(&[
        "runners",
        "release",
        "upload",
        version,
        "--binary",
        other.to_str().unwrap(),
    ]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains(&format!("this is not runner version {version}'s binary")),
        "{}",
        text(&refused)
    );

    // Every stack form that runs a binary now fetches this one.
    let (cfn, template) = cloudformation_stack(&m, "cfn");
    let url = format!(
        "{}/v1/runner/releases/{version}/linux-x86_64",
        m.cp.runner_url.trim_end_matches('/')
    );
    assert_eq!(template["Parameters"]["RunnerBinaryUrl"]["Default"], url);
    assert_eq!(
        template["Parameters"]["RunnerBinarySha256"]["Default"],
        sha256
    );
    if have_tool("cfn-lint", "check the CloudFormation install stack") {
        cfn_lint(&cfn.join("template.json"));
    }
    let stack_dir = m.dir.path().join("stack");
    let (said, token) = vm_stack(&m, &stack_dir);
    assert!(
        said.contains("from the control plane and checks its SHA-256"),
        "{said}"
    );
    let release = std::fs::read_to_string(stack_dir.join("runner-release.env")).unwrap();
    assert!(
        release.contains(&format!("release_sha256={sha256}")),
        "{release}"
    );

    // The Runner API serves it to the stack's token, and to nobody else.
    let path = format!("/v1/runner/releases/{version}/{platform}");
    let (status, _, _) = download(&m, &path, None);
    assert_eq!(status, 401);
    let (status, _, body) = download(&m, &path, Some("stk_not-a-token"));
    assert_eq!(status, 401, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("unknown install token"));
    let (status, got, body) = download(&m, &path, Some(&token));
    assert_eq!((status, got.as_str()), (200, digest.as_str()));
    assert!(body == runner, "the served binary is the published one");
    let (status, _, body) = download(
        &m,
        &format!("/v1/runner/releases/{version}/plan9-mips"),
        Some(&token),
    );
    assert_eq!(status, 404);
    assert!(
        String::from_utf8_lossy(&body)
            .contains(&format!("is built for {platform}, not plan9-mips")),
        "{}",
        String::from_utf8_lossy(&body)
    );

    // A binary that is not the release's (here served from a file the
    // bundle was pointed at) is refused, and nothing is installed.
    let tampered = m.dir.path().join("tampered-runner");
    let mut bytes = runner.clone();
    bytes.extend_from_slice(b"\0tampered");
    std::fs::write(&tampered, bytes).unwrap();
    let bad_dir = m.dir.path().join("tampered-stack");
    std::fs::create_dir_all(&bad_dir).unwrap();
    for f in ["install.sh", "nuon-runner.env", "nuon-runner.service"] {
        std::fs::copy(stack_dir.join(f), bad_dir.join(f)).unwrap();
    }
    std::fs::write(
        bad_dir.join("runner-release.env"),
        release.replace(&url, &format!("file://{}", tampered.display())),
    )
    .unwrap();
    let bad_prefix = m.dir.path().join("opt-tampered");
    let out = Command::new("sh")
        .arg(bad_dir.join("install.sh"))
        .args(["--no-systemd", "--prefix", bad_prefix.to_str().unwrap()])
        .args([
            "--work-dir",
            m.dir.path().join("w-tampered").to_str().unwrap(),
        ])
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(65), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("not {sha256}"))
            && text(&out).contains("refused, nothing installed"),
        "{}",
        text(&out)
    );
    assert_eq!(
        std::fs::read_dir(bad_prefix.join("bin")).unwrap().count(),
        0,
        "nothing is left in the prefix"
    );

    // As downloaded: with no nuon-runner on PATH, the bundle fetches the
    // release from the control plane, checks it, and the runner phones home.
    let prefix = m.dir.path().join("opt");
    let work = m.dir.path().join("vm-work");
    let log = std::fs::File::create(m.dir.path().join("vm-runner.log")).unwrap();
    let vm = Command::new("sh")
        .arg(stack_dir.join("install.sh"))
        .args(["--no-systemd", "--prefix", prefix.to_str().unwrap()])
        .args(["--work-dir", work.to_str().unwrap()])
        .env("PATH", "/usr/bin:/bin")
        .envs(m.runner_store_env())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let _vm = KillOnDrop(vm);
    wait_for("the phone-home", Duration::from_secs(30), || {
        work.join("runner-token").exists().then_some(())
    })
    .unwrap_or_else(|e| {
        panic!(
            "{e}\n{}",
            std::fs::read_to_string(m.dir.path().join("vm-runner.log")).unwrap_or_default()
        )
    });
    assert!(std::fs::read(prefix.join("bin/nuon-runner")).unwrap() == runner);
    // Spent at the phone-home: the token downloads nothing more.
    let (status, _, body) = download(&m, &path, Some(&token));
    assert_eq!(status, 401);
    assert!(String::from_utf8_lossy(&body).contains("used already"));
}
