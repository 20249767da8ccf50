//! Terraform's own `http` backend client against the control plane's state
//! backend (acceptance 4 of "Terraform apps end to end"): locking between
//! two applies, kept versions, a stale lock released by force.

use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use nuon_tests::{ControlPlane, rt, wait_for};

const MODULE: &str = r#"
terraform {
  backend "http" {}
}

variable "pause" {
  type    = number
  default = 0
}

variable "value" {
  type    = string
  default = "one"
}

resource "terraform_data" "thing" {
  input            = var.value
  triggers_replace = [var.value, var.pause]

  provisioner "local-exec" {
    command = "sleep ${var.pause}"
  }
}

output "thing" {
  value = terraform_data.thing.output
}
"#;

struct Module {
    dir: tempfile::TempDir,
    address: String,
    token: String,
}

impl Module {
    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("terraform");
        cmd.args(args)
            .current_dir(self.dir.path())
            .env("TF_IN_AUTOMATION", "1")
            .env("TF_INPUT", "0")
            .env("TF_HTTP_ADDRESS", &self.address)
            .env("TF_HTTP_LOCK_ADDRESS", &self.address)
            .env("TF_HTTP_UNLOCK_ADDRESS", &self.address)
            .env("TF_HTTP_USERNAME", "runner")
            .env("TF_HTTP_PASSWORD", &self.token)
            .env("CHECKPOINT_DISABLE", "1")
            .stdin(Stdio::null());
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "terraform {args:?}:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn spawn(&self, args: &[&str]) -> Child {
        use std::os::unix::process::CommandExt;
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap()
    }
}

fn states(cp: &ControlPlane) -> serde_json::Value {
    serde_json::to_value(rt().block_on(cp.client().list_states("demo")).unwrap()).unwrap()
}

fn lock_of(cp: &ControlPlane, component: &str) -> Option<serde_json::Value> {
    states(cp)["states"]
        .as_array()?
        .iter()
        .find(|s| s["component"] == component)
        .and_then(|s| s.get("lock").cloned())
}

#[test]
fn terraform_uses_the_state_backend_with_locks_and_versions() {
    if !nuon_tests::have_tool("terraform", "run Terraform against the state backend") {
        return;
    }
    let cp = ControlPlane::start("10s").unwrap();
    let example = nuon_tests::manifest_dir().join("../examples/apps/hello");
    for args in [
        vec!["apps", "create", "hello"],
        vec!["apps", "sync", example.to_str().unwrap(), "--app", "hello"],
    ] {
        assert!(cp.nuon(&args).status.success());
    }
    let created = cp.nuon(&[
        "installs",
        "create",
        "--app",
        "hello",
        "--name",
        "demo",
        "--input",
        "api_key=k3y-demo",
        "--json",
    ]);
    assert!(
        created.status.success(),
        "{}",
        String::from_utf8_lossy(&created.stderr)
    );
    let created: serde_json::Value = serde_json::from_slice(&created.stdout).unwrap();
    let token = created["runner_token"].as_str().unwrap().to_owned();

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.tf"), MODULE).unwrap();
    let m = Module {
        dir,
        address: format!("{}/v1/runner/state/app", cp.runner_url),
        token,
    };
    m.ok(&["init"]);
    m.ok(&["apply", "-auto-approve"]);
    assert!(m.ok(&["output", "-raw", "thing"]).contains("one"));
    let first = states(&cp);
    assert_eq!(first["states"][0]["component"], "app");
    let v1 = first["states"][0]["latest_version"].as_u64().unwrap();

    // Two applies at once: the second is refused with the holder named.
    let mut slow = m.spawn(&[
        "apply",
        "-auto-approve",
        "-var",
        "pause=6",
        "-var",
        "value=two",
    ]);
    let held = match wait_for(
        "the first apply to take the lock",
        Duration::from_secs(30),
        || lock_of(&cp, "app"),
    ) {
        Ok(held) => held,
        Err(e) => {
            let _ = slow.kill();
            let out = slow.wait_with_output().unwrap();
            panic!(
                "{e}:\n{}\n{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    };
    let who = held["info"]["Who"].as_str().unwrap().to_owned();
    assert_eq!(held["info"]["Operation"], "OperationTypeApply");
    let second = m.run(&[
        "apply",
        "-auto-approve",
        "-lock-timeout=0s",
        "-var",
        "value=three",
    ]);
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(err.contains("Error acquiring the state lock"), "{err}");
    assert!(err.contains(&who), "the holder {who} is named: {err}");
    let slow_out = slow.wait_with_output().unwrap();
    assert!(
        slow_out.status.success(),
        "{}",
        String::from_utf8_lossy(&slow_out.stderr)
    );
    assert!(
        lock_of(&cp, "app").is_none(),
        "the lock is released after the apply"
    );
    assert!(m.ok(&["output", "-raw", "thing"]).contains("two"));
    let after = states(&cp);
    let v2 = after["states"][0]["latest_version"].as_u64().unwrap();
    assert!(v2 > v1, "a new version: {v1} -> {v2}");
    assert_eq!(
        after["states"][0]["versions"].as_u64().unwrap(),
        v2,
        "every version is kept"
    );

    // A run killed while it holds the lock: the lock stays, named, until an
    // operator releases it by force.
    let mut dying = m.spawn(&[
        "apply",
        "-auto-approve",
        "-var",
        "pause=60",
        "-var",
        "value=four",
    ]);
    wait_for("the lock", Duration::from_secs(30), || lock_of(&cp, "app")).unwrap();
    // kill -9 the whole group: terraform and its provisioner's sleep.
    nuon_tests::signal_group(dying.id(), 9);
    let _ = dying.wait();
    let plan = m.run(&["plan", "-lock-timeout=0s"]);
    assert!(!plan.status.success(), "still locked by the dead run");
    let list = cp.nuon(&["installs", "state", "list", "demo"]);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(text.contains("app") && text.contains(&who), "{text}");
    let out = cp.nuon(&["installs", "state", "unlock", "demo", "--component", "app"]);
    let msg = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert!(
        msg.contains("released the lock") && msg.contains(&who),
        "{msg}"
    );
    let again = cp.nuon(&["installs", "state", "unlock", "demo", "--component", "app"]);
    assert!(String::from_utf8_lossy(&again.stdout).contains("was not locked"));
    m.ok(&["plan", "-lock-timeout=0s"]);

    // The state is sealed at rest: no Terraform state is in the files (its
    // `lineage` key is in every state; module sources synced with the app
    // config may name resources, states are the only thing with a lineage).
    for entry in std::fs::read_dir(&cp.data_dir).unwrap() {
        let bytes = std::fs::read(entry.unwrap().path()).unwrap_or_default();
        assert!(!String::from_utf8_lossy(&bytes).contains("\"lineage\""));
    }
}
