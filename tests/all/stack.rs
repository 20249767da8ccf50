//! Install stacks: the `vm` bundle applied for real on loopback (its
//! installer starts the runner, which phones home with the stack's
//! one-time token), the stack's outputs reaching Terraform, the unit
//! checked by `systemd-analyze verify`, and a token used twice, or
//! unknown, refused clearly.

use std::process::{Command, Stdio};
use std::time::Duration;

use nuon_core::workflow::WorkflowKind;
use nuon_tests::{bin, have_tool, rt, wait_for};

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

/// A fresh `nuon-runner run` in work dir `dir` with `token` as its stack's
/// one-time token.
fn phone_home_again(m: &Manual, dir: &str, token: &str) -> std::process::Output {
    Command::new(bin("nuon-runner"))
        .arg("run")
        .args([
            "--api",
            &m.cp.runner_url,
            "--signing-key",
            &m.cp.signing_key,
        ])
        .arg("--work-dir")
        .arg(m.dir.path().join(dir))
        .env("NUON_RUNNER_INSTALL_TOKEN", token)
        .output()
        .unwrap()
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
    let out = m.cp.nuon(&[
        "installs",
        "stack",
        "demo",
        "--format",
        "vm",
        "--out",
        stack_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out));
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
    let env = std::fs::read_to_string(stack_dir.join("nuon-runner.env")).unwrap();
    let token = env
        .lines()
        .find_map(|l| l.strip_prefix("NUON_RUNNER_INSTALL_TOKEN="))
        .unwrap()
        .to_owned();
    assert!(token.starts_with("stk_"), "{env}");

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
    let mut vm = Command::new("sh")
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
        outputs.install_stack["hostname"].as_str()
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
    let _ = vm.kill();
    let _ = vm.wait();
}
