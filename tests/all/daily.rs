//! The vendor's daily work, through the real binaries: an install's
//! condition told one way everywhere (its state, its health and whether
//! what is desired is deployed), and a question before anything is
//! destroyed.

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use nuon_tests::webdriver::Chrome;
use nuon_tests::{have_tool, ours, rt};
use serde_json::{Value, json};

use crate::dashboard::sign_in;
use crate::deploy::{METADATA, Manual, ended, ok, step, text, wait_workflow};
use crate::stack::KillOnDrop;

/// One Terraform component, `queue`, sized by the install's `queue_size`
/// (5 unless set; Terraform refuses 100 or more).
pub(crate) const QUEUE: [(&str, &str); 4] = [
    METADATA,
    (
        "inputs.toml",
        "[[input]]\nname = \"queue_size\"\ndescription = \"How many messages the queue holds\"\ndefault = \"5\"\n",
    ),
    (
        "components/queue.toml",
        "name = \"queue\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/queue\"\n\n[vars]\nqueue_size = \"{{ .nuon.install.inputs.queue_size }}\"\n",
    ),
    (
        "src/queue/main.tf",
        "variable \"queue_size\" {\n  type = number\n  validation {\n    condition     = var.queue_size < 100\n    error_message = \"A queue holds fewer than 100 messages.\"\n  }\n}\n\nresource \"terraform_data\" \"queue\" {\n  input = var.queue_size\n}\n\noutput \"size\" {\n  value = terraform_data.queue.output\n}\n",
    ),
];

/// `nuon --json ARGS`, read as JSON.
pub(crate) fn json(m: &Manual, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    serde_json::from_str(&ok(m.cp.nuon(&all))).unwrap()
}

/// Makes install `name` (more `args` to `installs create`) and starts its
/// runner.
pub(crate) fn another_install(m: &Manual, name: &str, args: &[&str]) -> KillOnDrop {
    let mut create = vec!["installs", "create", "--app", "app", "--name", name];
    create.extend_from_slice(args);
    let created = json(m, &create);
    KillOnDrop(m.start_runner_of(name, created["runner_token"].as_str().unwrap()))
}

/// The check of `install`'s health named `name` (`kind` too, for the
/// install's own, whose name is the install's).
fn check<'a>(health: &'a Value, kind: &str, name: &str) -> &'a Value {
    health["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["kind"] == kind && c["name"] == name)
        .unwrap_or_else(|| panic!("no check {kind} {name} in {health:#}"))
}

/// A healthy install, one whose provision failed and one deprovisioned,
/// and a change that was denied: state, health and sync agree on the API,
/// the CLI (`installs list|get|health`) and the dashboard's overview; a
/// deprovisioned install is never healthy, nor are its components `ok`.
#[test]
fn an_installs_state_health_and_sync_agree_everywhere() {
    if !have_tool("terraform", "deploy the queue") {
        return;
    }
    let m = Manual::start(&QUEUE);
    let _broken = another_install(&m, "broken", &["--input", "queue_size=500"]);
    let _gone = another_install(&m, "gone", &[]);
    for name in ["demo", "gone"] {
        ok(m.cp.nuon(&["installs", "provision", name, "--wait"]));
    }
    // The runner it waited for is named by its install (not by the id
    // its runner is named after).
    let w = crate::deploy::newest_workflow(&m.cp.client());
    assert_eq!(
        step(&w, "await runner").reason.as_deref(),
        Some("install demo's runner is healthy"),
        "{w:#?}"
    );
    // Terraform refuses 500: the provision fails.
    let out = m.cp.nuon(&["installs", "provision", "broken", "--wait"]);
    assert!(!out.status.success(), "{}", text(&out));

    // Destroying asks first: with no terminal, --yes is needed, and
    // nothing starts without it.
    let before = json(&m, &["workflows", "list", "--install", "gone"]);
    for verb in ["deprovision", "teardown", "delete", "forget"] {
        let out = m.cp.nuon(&["installs", verb, "gone"]);
        assert_eq!(out.status.code(), Some(64), "{verb}: {}", text(&out));
        assert!(
            text(&out).contains("give --yes to go on"),
            "{verb}: {}",
            text(&out)
        );
    }
    assert_eq!(
        json(&m, &["workflows", "list", "--install", "gone"]),
        before
    );
    // On a terminal, the install's name must be typed: a wrong one
    // changes nothing, the right one goes on.
    let on_terminal = |typed: &str| {
        let nuon = ours("nuon");
        let line = format!(
            "{} installs deprovision gone --wait",
            nuon.get_program().to_string_lossy()
        );
        let mut c = Command::new("script");
        c.args(["-qec", &line, "/dev/null"])
            .envs(nuon.get_envs().filter_map(|(k, v)| Some((k, v?))))
            .env("NUON_API_URL", &m.cp.control_url)
            .env("NUON_TOKEN", &m.cp.admin_token)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = c.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(format!("{typed}\n").as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let out = on_terminal("demo");
    let said = text(&out);
    assert!(
        said.contains("Type the install's name (gone) to go on")
            && said.contains("not confirmed (\"demo\" is not \"gone\")"),
        "{said}"
    );
    assert_eq!(
        json(&m, &["workflows", "list", "--install", "gone"]),
        before
    );
    let out = on_terminal("gone");
    assert!(out.status.success(), "{}", text(&out));

    // A change of demo's queue, denied: demo stays healthy and is out of
    // sync until a deploy applies it.
    ok(m.cp.nuon(&["installs", "update", "demo", "--approval", "prompt"]));
    let changed = json(&m, &["installs", "update-inputs", "demo", "queue_size=9"]);
    let wf = changed["workflow"]["id"].as_str().unwrap().to_owned();
    crate::approvals::waiting(&m, &wf, "apply queue");
    ok(m.cp.nuon(&["workflows", "respond", &wf, "deny-skip-current"]));
    let w = wait_workflow(&m.cp.client(), &wf, ended);
    assert_eq!(step(&w, "apply queue").status.as_str(), "denied");

    // The API and the CLI's --json.
    // (It exits 1 for an install that is not healthy.)
    let health = |name: &str| -> Value {
        let out = m.cp.nuon(&["--json", "installs", "health", name]);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("{}", text(&out)))
    };
    let demo = health("demo");
    assert_eq!(
        (&demo["state"], &demo["status"], &demo["sync"]),
        (&json!("active"), &json!("healthy"), &json!("out_of_sync")),
        "{demo:#}"
    );
    let queue = check(&demo, "component", "queue");
    assert_eq!(queue["status"], "ok", "{demo:#}");
    assert_eq!(queue["pending"]["status"], "denied", "{demo:#}");
    assert_eq!(queue["pending"]["workflow_id"], wf.as_str(), "{demo:#}");
    assert!(
        queue["detail"]
            .as_str()
            .unwrap()
            .contains("drift from desired: its last change was denied"),
        "{demo:#}"
    );
    let broken = health("broken");
    assert_eq!(
        (&broken["state"], &broken["status"], &broken["sync"]),
        (&json!("failed"), &json!("unhealthy"), &json!("out_of_sync")),
        "{broken:#}"
    );
    assert_eq!(check(&broken, "install", "broken")["status"], "failed");
    let gone = health("gone");
    assert_eq!(
        (&gone["state"], &gone["status"]),
        (&json!("deprovisioned"), &json!("not_deployed")),
        "{gone:#}"
    );
    let queue = check(&gone, "component", "queue");
    assert_eq!(queue["status"], "absent", "{gone:#}");
    assert_eq!(queue["detail"], "torn down", "{gone:#}");
    // Not healthy: the CLI says so in its exit code.
    let out = m.cp.nuon(&["installs", "health", "gone"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));

    // `installs list` and `get`: state, health and sync side by side.
    let list = json(&m, &["installs", "list"]);
    let row = |name: &str| {
        let i = list["installs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["name"] == name)
            .unwrap();
        (
            i["state"].as_str().unwrap().to_owned(),
            i["health"].as_str().unwrap().to_owned(),
            i["sync"].as_str().unwrap().to_owned(),
        )
    };
    let want = [
        ("demo", ("active", "healthy", "out_of_sync")),
        ("broken", ("failed", "unhealthy", "out_of_sync")),
        ("gone", ("deprovisioned", "not_deployed", "in_sync")),
    ];
    for (name, (state, health, sync)) in want {
        assert_eq!(
            row(name),
            (state.into(), health.into(), sync.into()),
            "{list:#}"
        );
        let one = json(&m, &["installs", "get", name]);
        assert_eq!(
            (one["health"].as_str(), one["sync"].as_str()),
            (Some(health), Some(sync))
        );
    }
    let table = ok(m.cp.nuon(&["installs", "list"]));
    let line = |name: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_else(|| panic!("{table}"))
            .to_owned()
    };
    assert!(
        line("gone").contains("deprovisioned  not_deployed"),
        "{table}"
    );
    assert!(
        line("demo").contains("active         healthy       out_of_sync"),
        "{table}"
    );
    let got = ok(m.cp.nuon(&["installs", "get", "demo"]));
    assert!(
        got.contains("health:   healthy, out of sync (a component's last change was not applied"),
        "{got}"
    );
    let all = m.cp.nuon(&["installs", "health"]);
    let all = text(&all);
    assert!(
        all.lines().any(|l| l.contains("demo")
            && l.contains("component queue")
            && l.contains("drift from desired")),
        "{all}"
    );

    // The dashboard's overview: a state column, health beside it, and a
    // deprovisioned install's components not shown as ok.
    let Some(b) = Chrome::start() else { return };
    sign_in(&b, &m.cp.control_url, &m.cp.admin_token);
    b.goto(&format!("{}/", m.cp.control_url));
    let rows = b.exec(
        "return Array.from(document.querySelectorAll('tbody tr')).map(r => Array.from(r.cells).map(c => c.innerText.trim()));",
        json!([]),
    );
    let cells = |name: &str| -> Vec<String> {
        rows.as_array()
            .unwrap()
            .iter()
            .find(|r| r[0].as_str().unwrap().starts_with(name))
            .unwrap_or_else(|| panic!("{rows:#}"))
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap().to_owned())
            .collect()
    };
    let head = b.exec(
        "return Array.from(document.querySelectorAll('thead th')).map(c => c.innerText.trim());",
        json!([]),
    );
    assert_eq!(head[2], "State", "{head}");
    assert_eq!(head[3], "Health", "{head}");
    let demo = cells("demo");
    assert_eq!(demo[2], "active");
    assert_eq!(demo[3], "healthy out of sync", "{demo:?}");
    assert!(demo[4].contains("queue: ok · change denied"), "{demo:?}");
    let broken = cells("broken");
    assert_eq!(
        (broken[2].as_str(), broken[3].as_str()),
        ("failed", "unhealthy out of sync")
    );
    let gone = cells("gone");
    assert_eq!(
        (gone[2].as_str(), gone[3].as_str()),
        ("deprovisioned", "not deployed")
    );
    assert!(gone[4].contains("queue: absent"), "{gone:?}");
    assert!(!gone[4].contains(": ok"), "{gone:?}");
    // Counted by health, with a link for each status.
    let counts = b.text("ul.counts");
    assert!(
        counts.contains("1healthy") || counts.contains("1 healthy"),
        "{counts}"
    );
    assert!(b.find("a[href='/?show=not_deployed']").is_some());
    b.goto(&format!("{}/?show=not_deployed", m.cp.control_url));
    let shown = b.text("tbody");
    assert!(shown.contains("gone") && !shown.contains("demo"), "{shown}");
}

/// [`QUEUE`], and `worker` reading the queue's size: a change of the
/// size asks two approvals.
fn queue_and_worker() -> Vec<(&'static str, &'static str)> {
    let mut files = QUEUE.to_vec();
    files.extend([
        (
            "components/worker.toml",
            "name = \"worker\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"./src/worker\"\ndependencies = [\"queue\"]\n\n[vars]\nqueue_size = \"{{ .nuon.components.queue.outputs.size }}\"\n",
        ),
        (
            "src/worker/main.tf",
            "variable \"queue_size\" {\n  type = number\n}\n\nresource \"terraform_data\" \"worker\" {\n  input = var.queue_size * 2\n}\n",
        ),
    ]);
    files
}

/// The queue and its worker on install `demo`, which asks for every
/// approval.
fn prompt_install() -> Manual {
    let cp = nuon_tests::ControlPlane::start("3s").unwrap();
    Manual::start_on(
        cp,
        &queue_and_worker(),
        None,
        |_| {},
        &["--approval", "prompt"],
    )
}

/// An install that asks for every approval: `--wait` and `workflows
/// watch` stop at an approval (exit 3) with the plan attribute by
/// attribute (`input: 5 → 9`) and the commands; `approve --all` approves
/// the rest of the workflow with one audit record per step, from the CLI
/// and from the dashboard's button; `deny|respond --wait` follow to the
/// end.
#[test]
fn approvals_show_each_change_and_can_approve_the_rest() {
    if !have_tool("terraform", "deploy the queue") {
        return;
    }
    let m = prompt_install();
    let c = m.cp.client();
    // The provision stops at its first approval, saying how to answer.
    let out = m.cp.nuon(&["installs", "provision", "demo", "--wait"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let wf = crate::deploy::newest_workflow(&c).id.to_string();
    // So does watching it, where it used to wait for ever.
    let out = m.cp.nuon(&["workflows", "watch", &wf]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("apply queue waits for an approval")
            && said.contains(&format!(
                "approve: nuon workflows approve {wf} --step \"apply queue\""
            )),
        "{said}"
    );
    // Approve it and the rest: the provision ends, each apply approved.
    let out = m.cp.nuon(&["workflows", "approve", &wf, "--all", "--wait"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let w = rt().block_on(c.get_workflow(&wf)).unwrap();
    assert_eq!(w.status.as_str(), "succeeded", "{w:#?}");
    let me = |s: &str| step(&w, s).approved_by.clone();
    assert!(
        me("apply queue").is_some() && me("apply queue") == me("apply worker"),
        "{w:#?}"
    );
    // One audit record per step approved.
    nuon_tests::wait_for("the audit trail", Duration::from_secs(20), || {
        let trail = rt().block_on(c.list_audit(0, 1000, None)).ok()?;
        let approvals = trail
            .entries
            .iter()
            .filter(|e| {
                e.action == "approveWorkflowStep" && e.target.contains(&wf) && e.outcome == "200"
            })
            .count();
        (approvals == 2).then_some(())
    })
    .unwrap();

    // A change: its plan says what changes, attribute by attribute, on
    // the CLI and the API.
    let changed = json(&m, &["installs", "update-inputs", "demo", "queue_size=9"]);
    let wf = changed["workflow"]["id"].as_str().unwrap().to_owned();
    crate::approvals::waiting(&m, &wf, "apply queue");
    let out = m.cp.nuon(&["workflows", "watch", &wf]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("terraform_data.queue (update)") && said.contains("input: 5 \u{2192} 9"),
        "{said}"
    );
    let w = rt().block_on(c.get_workflow(&wf)).unwrap();
    let values = &step(&w, "plan queue").outputs["changes"]["resources"][0]["values"];
    assert!(
        values
            .as_array()
            .unwrap()
            .contains(&json!({"path": "input", "before": "5", "after": "9"})),
        "{values:#}"
    );

    // The dashboard shows it, and approves the rest with one button.
    if let Some(b) = Chrome::start() {
        sign_in(&b, &m.cp.control_url, &m.cp.admin_token);
        b.goto(&format!("{}/workflows/{wf}", m.cp.control_url));
        let page = b.text("main");
        assert!(page.contains("input: 5 \u{2192} 9"), "{page}");
        crate::dashboard::submit(&b, "form[action$='/approve'] input[name=all] ~ button");
        let asked = b.text("main");
        assert!(
            asked.contains("Approve apply queue and the rest of this workflow?")
                && asked.contains("input: 5 \u{2192} 9"),
            "{asked}"
        );
        crate::dashboard::submit(&b, "form[action$='/approve'] button.primary");
        let w = wait_workflow(&c, &wf, ended);
        assert_eq!(w.status.as_str(), "succeeded", "{w:#?}");
        assert!(step(&w, "apply worker").approved_by.is_some(), "{w:#?}");
    } else {
        ok(m.cp.nuon(&["workflows", "approve", &wf, "--all", "--wait"]));
    }

    // deny --wait and respond --wait follow to the end: a denial of the
    // next change skips it and its dependent; the workflow ends partial
    // (exit 4).
    let changed = json(&m, &["installs", "update-inputs", "demo", "queue_size=7"]);
    let wf = changed["workflow"]["id"].as_str().unwrap().to_owned();
    crate::approvals::waiting(&m, &wf, "apply queue");
    let out = m.cp.nuon(&["workflows", "deny", &wf, "--wait"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let changed = json(&m, &["installs", "update-inputs", "demo", "queue_size=6"]);
    let wf = changed["workflow"]["id"].as_str().unwrap().to_owned();
    crate::approvals::waiting(&m, &wf, "apply queue");
    // Approved, it goes on to the worker's approval: exit 3 there.
    let out =
        m.cp.nuon(&["workflows", "respond", &wf, "approve", "--wait"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("apply worker waits for an approval"),
        "{}",
        text(&out)
    );
}

/// The processes whose command line names `needle` (their pids).
fn processes_naming(needle: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .collect()
}

/// `nuon dev` stopped by SIGTERM (a supervisor's, or `kill`) stops its
/// control plane and runners first; killed outright (SIGKILL, a crash),
/// its children stop by themselves (each asked the kernel for SIGTERM
/// when its parent ends): none is left running either way.
#[test]
fn nuon_dev_stopped_by_sigterm_leaves_no_child_running() {
    if !have_tool("terraform", "provision the app nuon dev runs") {
        return;
    }
    for signal in [15, 9] {
        let dir = tempfile::tempdir().unwrap();
        let app = dir.path().join("app");
        crate::deploy::write_files(&app, &crate::deploy::BOX_APP);
        let data = dir.path().join("data");
        let ports = (crate::deploy::free_port(), crate::deploy::free_port());
        let mut dev = crate::deploy::dev_of(&app, &data, ports, &[])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        crate::deploy::provisioned_by_dev(&data, ports.0);
        let needle = data.to_string_lossy().into_owned();
        let children: Vec<u32> = processes_naming(&needle)
            .into_iter()
            .filter(|p| *p != dev.id())
            .collect();
        assert!(
            children.len() >= 3,
            "control plane and runners: {children:?}"
        );
        nuon_tests::signal(dev.id(), signal);
        let status = nuon_tests::wait_for("nuon dev to stop", Duration::from_secs(90), || {
            dev.try_wait().ok().flatten()
        });
        let _ = dev.kill();
        assert!(status.is_ok(), "nuon dev did not stop on signal {signal}");
        // A drain takes a moment; none outlives it.
        let left = nuon_tests::wait_for("its children to stop", Duration::from_secs(60), || {
            processes_naming(&needle).is_empty().then_some(())
        });
        assert!(
            left.is_ok(),
            "left running after signal {signal}: {:?}",
            processes_naming(&needle)
        );
    }
}

/// Point: "a test installs the binaries with `cargo install --path` into
/// a temporary root, then runs `nuon dev --once` from an empty directory
/// outside the repo": the example app built into `nuon` is written to the
/// data dir and provisioned. A missing binary is named, with how to get it.
#[test]
fn nuon_dev_runs_from_anywhere_with_its_binaries_side_by_side() {
    let Ok(terraform) = which::which("terraform") else {
        have_tool("terraform", "provision the example nuon dev runs");
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let bin_dir = root.path().join("bin");
    nuon_tests::cargo_install(
        &["nuon", "nuon-ctl", "nuon-build-runner", "nuon-runner"],
        root.path(),
    )
    .unwrap();
    let somewhere = root.path().join("somewhere");
    std::fs::create_dir_all(&somewhere).unwrap();
    let path = format!("{}:/usr/bin:/bin", terraform.parent().unwrap().display());
    let dev = |data: &str| {
        let ports = (crate::deploy::free_port(), crate::deploy::free_port());
        Command::new(bin_dir.join("nuon"))
            .args(["dev", "--once", "--data-dir", data])
            .args(["--listen", &format!("127.0.0.1:{}", ports.0)])
            .args(["--runner-listen", &format!("127.0.0.1:{}", ports.1)])
            .current_dir(&somewhere)
            .env_clear()
            .env("PATH", &path)
            .env("HOME", root.path())
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = dev("data");
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("the example app hello, written to data/apps/hello"),
        "{said}"
    );
    assert!(somewhere.join("data/apps/hello/metadata.toml").is_file());
    assert!(said.contains("succeeded"), "{said}");

    std::fs::remove_file(bin_dir.join("nuon-build-runner")).unwrap();
    let out = dev("data2");
    assert!(!out.status.success());
    assert!(
        text(&out).contains("nuon-build-runner is not next to")
            && text(&out).contains("cargo install --path bins/nuon-build-runner"),
        "{}",
        text(&out)
    );
}

/// The CLI as people use CLIs: bash completes its commands from the
/// script `nuon completion bash` prints (zsh's and fish's are made too),
/// and `nuon version` says its own version and the control plane's, or
/// why it cannot.
#[test]
fn the_cli_completes_in_bash_and_says_both_versions() {
    let cp = nuon_tests::ControlPlane::start("3s").unwrap();
    let v: Value = serde_json::from_str(&ok(cp.nuon(&["version", "--json"]))).unwrap();
    assert_eq!(v["client"], env!("CARGO_PKG_VERSION"));
    assert_eq!(v["control_plane"], env!("CARGO_PKG_VERSION"), "{v}");
    let out = ours("nuon")
        .args(["version", "--api", "http://127.0.0.1:9", "--token", "x"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("nuon {}", env!("CARGO_PKG_VERSION")))
            && text(&out).contains("control plane at http://127.0.0.1:9"),
        "{}",
        text(&out)
    );

    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("nuon.bash");
    let out = ours("nuon").args(["completion", "bash"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    std::fs::write(&script, &out.stdout).unwrap();
    let complete = |line: &str| {
        let words: Vec<&str> = line.split(' ').collect();
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!(
                "source {}; COMP_WORDS=({}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT={}; _nuon nuon \"${{COMP_WORDS[COMP_CWORD]}}\" \"${{COMP_WORDS[COMP_CWORD-1]}}\"; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
                script.display(),
                words.join(" "),
                words.len() - 1,
                line.len()
            ))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(
        complete("nuon inst").lines().any(|l| l == "installs"),
        "{}",
        complete("nuon inst")
    );
    let deploys = complete("nuon installs dep");
    assert!(
        deploys.lines().any(|l| l == "deploy") && deploys.lines().any(|l| l == "deprovision"),
        "{deploys}"
    );
    for (shell, mark) in [("zsh", "#compdef nuon"), ("fish", "complete -c nuon")] {
        let out = ours("nuon").args(["completion", shell]).output().unwrap();
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(mark),
            "{shell}"
        );
    }
    let bad = ours("nuon").args(["completion", "tcsh"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(64), "{}", text(&bad));
}

/// Contexts, as kubectl keeps clusters: a control plane and its token by
/// name, in a file only its owner reads; the current one is used when no
/// `--api` is given, another by `--context`, and a context's token never
/// goes to another address.
#[test]
fn contexts_keep_control_planes_by_name_and_their_tokens_private() {
    let cp = nuon_tests::ControlPlane::start("3s").unwrap();
    let config = tempfile::tempdir().unwrap();
    let nuon = |args: &[&str]| {
        ours("nuon")
            .args(args)
            .env("NUON_CONFIG_DIR", config.path())
            .output()
            .unwrap()
    };
    let listed: Value = serde_json::from_str(&ok(nuon(&["context", "list", "--json"]))).unwrap();
    assert_eq!(listed["contexts"], json!([]));
    ok(nuon(&[
        "context",
        "add",
        "local",
        "--api",
        &cp.control_url,
        "--token",
        &cp.admin_token,
    ]));
    use std::os::unix::fs::PermissionsExt;
    let file = config.path().join("contexts.json");
    assert_eq!(
        std::fs::metadata(&file).unwrap().permissions().mode() & 0o777,
        0o600
    );
    // The first one added is current: commands talk to it, with its own
    // token even when another is in the environment.
    ok(nuon(&["apps", "list"]));
    let out = ours("nuon")
        .args(["apps", "list"])
        .env("NUON_CONFIG_DIR", config.path())
        .env("NUON_TOKEN", "tok_of_another_control_plane")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // A token only in the environment is not kept with a context.
    let out = ours("nuon")
        .args([
            "context",
            "add",
            "env-only",
            "--api",
            &cp.control_url,
            "--json",
        ])
        .env("NUON_CONFIG_DIR", config.path())
        .env("NUON_TOKEN", "tok_of_another_control_plane")
        .output()
        .unwrap();
    let kept: Value = serde_json::from_slice(&out.stdout).unwrap();
    let env_only = kept["contexts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "env-only")
        .unwrap();
    assert_eq!(env_only["token"], false, "{kept}");
    ok(nuon(&["context", "remove", "env-only"]));
    ok(nuon(&[
        "context",
        "add",
        "elsewhere",
        "--api",
        "http://127.0.0.1:9",
        "--token",
        "tok_elsewhere",
    ]));
    ok(nuon(&["context", "use", "elsewhere"]));
    let out = nuon(&["apps", "list"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("127.0.0.1:9"), "{}", text(&out));
    ok(nuon(&["apps", "list", "--context", "local"]));
    let v: Value =
        serde_json::from_str(&ok(nuon(&["version", "--context", "local", "--json"]))).unwrap();
    assert_eq!(v["context"], "local", "{v}");
    // An address given by hand gets no context's token.
    ok(nuon(&["context", "use", "local"]));
    let out = nuon(&["apps", "list", "--api", "http://127.0.0.1:9"]);
    assert!(text(&out).contains("no API token"), "{}", text(&out));
    // Listed with the current one marked, and no token shown.
    let table = ok(nuon(&["context", "list"]));
    assert!(
        table
            .lines()
            .any(|l| l.starts_with('*') && l.contains("local")),
        "{table}"
    );
    assert!(
        !table.contains(&cp.admin_token) && !table.contains("tok_elsewhere"),
        "{table}"
    );
    ok(nuon(&["context", "remove", "elsewhere"]));
    let out = nuon(&["context", "use", "elsewhere"]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
    assert!(
        text(&out).contains("no context \"elsewhere\""),
        "{}",
        text(&out)
    );
    let out = nuon(&["apps", "list", "--context", "nope"]);
    assert_eq!(out.status.code(), Some(64), "{}", text(&out));
}

/// The small things a newcomer tripped on, through the CLI: a selector
/// with no value is refused, an install name's typo is answered with the
/// name meant, and an install's runner is shown by its install's name.
#[test]
fn selectors_names_and_runners_say_what_is_meant() {
    let cp = nuon_tests::ControlPlane::start("3s").unwrap();
    let dir = tempfile::tempdir().unwrap();
    crate::deploy::write_files(dir.path(), &crate::deploy::BOX_APP);
    ok(cp.nuon(&["apps", "create", "app"]));
    ok(cp.nuon(&["apps", "sync", dir.path().to_str().unwrap(), "--app", "app"]));
    ok(cp.nuon(&[
        "installs",
        "create",
        "--app",
        "app",
        "--name",
        "qw-us",
        "--label",
        "tier=prod",
    ]));
    // The runner command `installs create` prints works when pasted,
    // where `nuon-runner` is not on PATH (the README's walkthrough runs
    // ./target/debug/nuon), after the stack that starts it the customer's
    // way.
    let here = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(here.path().join("nuon-data/vendor-store")).unwrap();
    let out = ours("nuon")
        .args(["installs", "create", "--app", "app", "--name", "pasted"])
        .env("NUON_API_URL", &cp.control_url)
        .env("NUON_TOKEN", &cp.admin_token)
        .current_dir(here.path())
        .output()
        .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("installs stack pasted"), "{said}");
    let command: String = said
        .split("the runner token is shown only now:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{said}"))
        .lines()
        .take_while(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(!command.contains("RUNNER_API_URL"), "{command}");
    let pasted = KillOnDrop(
        Command::new("sh")
            .args(["-c", &command])
            .process_group(0)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", here.path())
            .current_dir(here.path())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(here.path().join("runner.log")).unwrap())
            .spawn()
            .unwrap(),
    );
    let c = cp.client();
    nuon_tests::wait_for("the pasted runner to call", Duration::from_secs(60), || {
        let list = rt().block_on(c.list_runners()).ok()?;
        list.runners
            .iter()
            .any(|r| r.install.as_deref() == Some("pasted") && r.last_seen_at_ms.is_some())
            .then_some(())
    })
    .unwrap_or_else(|_| {
        panic!(
            "{command}\n{}",
            std::fs::read_to_string(here.path().join("runner.log")).unwrap_or_default()
        )
    });
    // The shell and the runner it started, as one group.
    nuon_tests::signal_group(pasted.0.id(), 9);
    // `tier==` selected nothing, silently; now it says why.
    let out = cp.nuon(&["installs", "list", "--selector", "tier=="]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("`tier==` has no value: give one (`tier==prod`)"),
        "{}",
        text(&out)
    );
    let out = cp.nuon(&["installs", "list", "--selector", "tier==prod"]);
    assert!(ok(out).contains("qw-us"));
    // A typo of an install's name.
    let out = cp.nuon(&["installs", "get", "qw-su"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("no install \"qw-su\", did you mean \"qw-us\"?"),
        "{}",
        text(&out)
    );
    // The install's runner, by its install's name.
    let runners: Value =
        serde_json::from_str(&ok(cp.nuon(&["--json", "runners", "list"]))).unwrap();
    let install_runner = runners["runners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == "install")
        .unwrap();
    assert_eq!(install_runner["install"], "qw-us", "{runners:#}");
    let table = ok(cp.nuon(&["runners", "list"]));
    let head = table.lines().next().unwrap();
    assert!(head.contains("INSTALL"), "{table}");
    assert!(
        table
            .lines()
            .any(|l| l.contains("qw-us") && l.contains("install")),
        "{table}"
    );
}

/// The dashboard can be found around in: a job's log leads back to its
/// step, workflow, install and app; workflows are named by kind and time;
/// an approval names who gave it, never a token's id; the timeline has a
/// time axis; an app's page lists its installs; a finished rollout offers
/// only what can still be done.
#[test]
fn the_dashboard_leads_from_a_job_back_to_its_app() {
    if !have_tool("terraform", "deploy the queue") {
        return;
    }
    let Some(b) = Chrome::start() else { return };
    let cp = nuon_tests::ControlPlane::start("3s").unwrap();
    let m = Manual::start_on(cp, &QUEUE, None, |_| {}, &["--approval", "prompt"]);
    let c = m.cp.client();
    let out = m.cp.nuon(&["installs", "provision", "demo", "--wait"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let wf = crate::deploy::newest_workflow(&c).id.to_string();
    ok(m.cp.nuon(&["workflows", "approve", &wf, "--all", "--wait"]));
    let w = rt().block_on(c.get_workflow(&wf)).unwrap();
    let job = step(&w, "apply queue").job_id.clone().unwrap();
    let base = m.cp.control_url.clone();
    sign_in(&b, &base, &m.cp.admin_token);
    // Signed in as a name, not a token id.
    let who = b.text("header");
    assert!(!who.contains("tok_"), "{who}");

    // The job's page: where it came from, each a link.
    b.goto(&format!("{base}/jobs/{job}"));
    let crumbs = b.exec(
        "return Array.from(document.querySelectorAll('nav.crumbs li')).map(l => [l.innerText.trim(), (l.querySelector('a') || {}).href || '']);",
        json!([]),
    );
    let labels: Vec<&str> = crumbs
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c[0].as_str().unwrap())
        .collect();
    assert_eq!(labels[..3], ["Installs", "app", "demo"], "{crumbs}");
    assert!(labels[3].starts_with("provision, "), "{crumbs}");
    assert_eq!(labels[4..], ["apply queue", "log"], "{crumbs}");
    let facts = b.text("dl.facts");
    assert!(
        facts.contains("Step") && facts.contains("apply queue") && facts.contains("terraform job"),
        "{facts}"
    );
    // Back to the workflow, at the step.
    b.click("nav.crumbs li:nth-child(5) a");
    b.wait_until("the workflow's page", Duration::from_secs(10), |b| {
        b.url().contains(&format!("/workflows/{wf}#step-"))
    });
    // Its approval names who gave it.
    let approvals = b.text("#steps");
    assert!(approvals.contains("approved by"), "{approvals}");
    assert!(!approvals.contains("approved by tok_"), "{approvals}");
    // The timeline reads against a time axis.
    let ticks = b.exec(
        "return Array.from(document.querySelectorAll('svg.timeline text.tick')).map(t => t.textContent);",
        json!([]),
    );
    assert!(ticks[0] == "0 s" || ticks[0] == "0.0 s", "{ticks}");
    assert!(ticks.as_array().unwrap().len() >= 2, "{ticks}");
    // Up to the install, then the app, which lists its installs.
    b.click("nav.crumbs li:nth-child(3) a");
    b.wait_until("the install's page", Duration::from_secs(10), |b| {
        b.url().contains("/installs/")
    });
    b.click("nav.crumbs li:nth-child(2) a");
    b.wait_until("the app's page", Duration::from_secs(10), |b| {
        b.url().contains("/apps/")
    });
    let installs = b.text("table.installs");
    assert!(
        installs.contains("demo") && installs.contains("active"),
        "{installs}"
    );

    // A rollout of the first release, finished: nothing to pause, cancel
    // or retry; it can still be rolled back (to the config version the
    // install ran before).
    let release = json(&m, &["releases", "create", "--app", "app"]);
    let release = release["id"].as_str().unwrap().to_owned();
    let out = m.cp.nuon(&["releases", "rollout", &release, "--wait"]);
    // The deploy asks for an approval: approve it as it waits.
    let _ = out;
    let r = json(&m, &["releases", "status", &release]);
    let r_id = r["id"].as_str().unwrap().to_owned();
    nuon_tests::wait_for("the rollout to end", Duration::from_secs(120), || {
        let r = json(&m, &["releases", "status", &release]);
        if let Some(wf) = r["targets"][0]["workflow_id"].as_str() {
            let _ = m.cp.nuon(&["workflows", "approve", wf, "--all"]);
        }
        (r["status"] == "succeeded").then_some(())
    })
    .unwrap();
    b.goto(&format!("{base}/rollouts/{r_id}"));
    let page = b.text("main");
    assert!(
        page.contains("every install") && page.contains("1 (100%)"),
        "{page}"
    );
    for act in ["pause", "resume", "retry", "cancel"] {
        assert!(
            b.find(&format!("form[action$='/{act}']")).is_none(),
            "{act} offered on a finished rollout: {page}"
        );
    }
    assert!(b.find("form[action$='/rollback']").is_some(), "{page}");
}

/// The output `name` of the install's `queue` component, if any.
fn queue_output(m: &Manual, name: &str) -> Value {
    let o = json(m, &["installs", "outputs", "demo"]);
    o["components"]["queue"][name].clone()
}

/// A first release rolls back to the config version the install ran
/// before; `installs deploy` takes a release or any config version, and
/// says what is wrong with one it cannot take.
#[test]
fn a_first_release_rolls_back_and_a_deploy_takes_any_version() {
    if !have_tool("terraform", "deploy the queue") {
        return;
    }
    let m = Manual::start(&QUEUE);
    ok(m.cp.nuon(&["installs", "provision", "demo", "--wait"]));
    assert_eq!(queue_output(&m, "version"), Value::Null);
    // Config v2 adds an output; released, rolled out.
    let app = m.dir.path().join("app");
    let main = app.join("src/queue/main.tf");
    let mut tf = std::fs::read_to_string(&main).unwrap();
    tf.push_str("\noutput \"version\" {\n  value = \"2\"\n}\n");
    std::fs::write(&main, tf).unwrap();
    ok(m.cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]));
    ok(m.cp.nuon(&["builds", "create", "--app", "app", "--wait"]));
    let release = json(&m, &["releases", "create", "--app", "app"]);
    let release = release["id"].as_str().unwrap().to_owned();
    assert_eq!(release_of_config(&m), (Value::Null, 1));
    ok(m.cp.nuon(&["releases", "rollout", &release, "--wait"]));
    assert_eq!(queue_output(&m, "version"), "2");
    assert_eq!(release_of_config(&m), (json!(release), 2));

    // Its first release: rolled back to config v1, outside releases.
    let out = ok(m.cp.nuon(&["releases", "rollback", &release, "--wait"]));
    assert!(out.contains("config v1"), "{out}");
    assert_eq!(queue_output(&m, "version"), Value::Null);
    assert_eq!(release_of_config(&m), (Value::Null, 1));
    // The release's newest rollout is the rollback.
    let back = json(&m, &["releases", "status", &release]);
    assert!(back["rollback_of"].is_string(), "{back:#}");
    assert_eq!(back["status"], "succeeded", "{back:#}");
    assert_eq!(back["targets"][0]["config_version"], 1, "{back:#}");

    // A deploy takes the release back, then config v1 again.
    ok(m.cp.nuon(&[
        "installs",
        "deploy",
        "demo",
        "--release",
        &release,
        "--wait",
    ]));
    assert_eq!(queue_output(&m, "version"), "2");
    assert_eq!(release_of_config(&m), (json!(release), 2));
    ok(m.cp.nuon(&["installs", "deploy", "demo", "--config", "1", "--wait"]));
    assert_eq!(queue_output(&m, "version"), Value::Null);
    assert_eq!(release_of_config(&m), (Value::Null, 1));

    // What it cannot take, said.
    for (args, says) in [
        (
            vec!["--config", "9"],
            "app app has no config version 9 (the install runs 1",
        ),
        (
            vec!["--release", "rel_00000000000000000000000000"],
            "app app has no release rel_00000000000000000000000000",
        ),
        (vec!["--release", "v2"], "is not a release id"),
        (
            vec!["--release", &release, "--config", "1"],
            "cannot be used with",
        ),
    ] {
        let mut all = vec!["installs", "deploy", "demo"];
        all.extend(args.iter().copied());
        let out = m.cp.nuon(&all);
        assert!(!out.status.success(), "{args:?}: {}", text(&out));
        assert!(text(&out).contains(says), "{args:?}: {}", text(&out));
    }
}

/// The install's release (`Null` when it runs none) and config version.
fn release_of_config(m: &Manual) -> (Value, u64) {
    let i = json(m, &["installs", "get", "demo"]);
    (
        i["release_id"].clone(),
        i["config_version"].as_u64().unwrap(),
    )
}

/// A change whose workflow was denied stays desired and is shown as
/// pending, the same on the API, the CLI (`installs get`, `installs
/// health`) and the dashboard, with the commands to apply or discard it;
/// a discard returns the deployed value (from the dashboard), an apply
/// deploys the pending one (from the CLI).
#[test]
fn a_denied_change_stays_pending_until_applied_or_discarded() {
    if !have_tool("terraform", "deploy the queue") {
        return;
    }
    let m = prompt_install();
    let c = m.cp.client();
    let out = m.cp.nuon(&["installs", "provision", "demo", "--wait"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let wf = crate::deploy::newest_workflow(&c).id.to_string();
    ok(m.cp.nuon(&["workflows", "approve", &wf, "--all", "--wait"]));
    let i = json(&m, &["installs", "get", "demo"]);
    assert!(i["pending"].is_null(), "{i:#}");

    // queue_size 5 → 9, denied.
    let deny = |size: &str| {
        let changed = json(&m, &["installs", "update-inputs", "demo", size]);
        let wf = changed["workflow"]["id"].as_str().unwrap().to_owned();
        crate::approvals::waiting(&m, &wf, "apply queue");
        let out = m.cp.nuon(&["workflows", "deny", &wf, "--wait"]);
        assert_eq!(out.status.code(), Some(4), "{}", text(&out));
        // Following it to its end says what stays desired, and what to do.
        assert!(
            text(&out)
                .contains("install demo holds values not deployed: input queue_size: 5 \u{2192} 9")
                && text(&out).contains(
                    "or go back to what is deployed with `nuon installs discard-pending demo`"
                ),
            "{}",
            text(&out)
        );
        wf
    };
    let wf = deny("queue_size=9");
    let i = json(&m, &["installs", "get", "demo"]);
    assert_eq!(i["inputs"]["queue_size"], "9", "{i:#}");
    let p = &i["pending"];
    assert_eq!(
        p["changes"],
        json!([{"kind": "input", "name": "queue_size", "deployed": "5", "desired": "9"}]),
        "{i:#}"
    );
    assert_eq!(p["ended"], "denied", "{i:#}");
    assert_eq!(p["workflow_id"], wf.as_str(), "{i:#}");
    assert_eq!(p["components"], json!(["queue", "worker"]), "{i:#}");
    assert_eq!(p["discard"], "nuon installs discard-pending demo", "{i:#}");
    assert_eq!(i["sync"], "out_of_sync", "{i:#}");
    let shown = ok(m.cp.nuon(&["installs", "get", "demo"]));
    assert!(
        shown.contains("pending:  input queue_size: 5 \u{2192} 9; not deployed to queue, worker")
            && shown.contains(&format!("workflow {wf} was denied"))
            && shown.contains("`nuon installs apply-pending demo`")
            && shown.contains("`nuon installs discard-pending demo`"),
        "{shown}"
    );
    let h = json(&m, &["installs", "health", "demo"]);
    let own = check(&h, "install", "demo")["detail"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        own.contains("drift from desired: input queue_size: 5 \u{2192} 9"),
        "{own}"
    );
    // Nothing to discard or apply where nothing is pending (a new install).
    let _other = another_install(&m, "other", &[]);
    let out = m.cp.nuon(&["installs", "apply-pending", "other"]);
    assert!(
        !out.status.success() && text(&out).contains("install other has no pending values"),
        "{}",
        text(&out)
    );

    // Discarded from the dashboard: 5 again, deployed again to match (its
    // plans show no change, so nothing asks).
    let discarded = if let Some(b) = Chrome::start() {
        sign_in(&b, &m.cp.control_url, &m.cp.admin_token);
        let id = i["id"].as_str().unwrap();
        b.goto(&format!("{}/installs/{id}", m.cp.control_url));
        let page = b.text("dl.facts");
        assert!(
            page.contains("input queue_size: 5 \u{2192} 9") && page.contains("was denied"),
            "{page}"
        );
        assert!(b.find("form[action$='/pending/apply']").is_some(), "{page}");
        crate::dashboard::submit(&b, "form[action$='/pending/discard'] button");
        let page = b.text("dl.facts");
        assert!(!page.contains("Pending"), "{page}");
        crate::deploy::newest_workflow(&c).id.to_string()
    } else {
        let d = json(&m, &["installs", "discard-pending", "demo"]);
        d["workflows"][0]["id"].as_str().unwrap().to_owned()
    };
    let w = wait_workflow(&c, &discarded, ended);
    assert_eq!(w.status.as_str(), "succeeded", "{w:#?}");
    let i = json(&m, &["installs", "get", "demo"]);
    assert_eq!(i["inputs"]["queue_size"], "5", "{i:#}");
    assert!(i["pending"].is_null(), "{i:#}");
    assert_eq!(i["sync"], "in_sync", "{i:#}");
    assert_eq!(
        json(&m, &["installs", "outputs", "demo"])["components"]["queue"]["size"],
        5
    );

    // Approved at the queue, denied at the worker: the queue runs 9, the
    // worker waits.
    let changed = json(&m, &["installs", "update-inputs", "demo", "queue_size=9"]);
    let wf = changed["workflow"]["id"].as_str().unwrap().to_owned();
    crate::approvals::waiting(&m, &wf, "apply queue");
    ok(m.cp.nuon(&["workflows", "approve", &wf, "--step", "apply queue"]));
    crate::approvals::waiting(&m, &wf, "apply worker");
    let out = m.cp.nuon(&["workflows", "deny", &wf, "--wait"]);
    assert_eq!(out.status.code(), Some(4), "{}", text(&out));
    let i = json(&m, &["installs", "get", "demo"]);
    assert_eq!(i["pending"]["components"], json!(["worker"]), "{i:#}");
    assert_eq!(i["pending"]["applied"], json!(["queue"]), "{i:#}");
    assert_eq!(
        json(&m, &["installs", "outputs", "demo"])["components"]["queue"]["size"],
        9
    );
    // Discarding is an admin's.
    let t = rt()
        .block_on(c.create_token("deployer", nuon_core::wire::TokenScope::Deployer))
        .unwrap();
    let e = rt()
        .block_on(m.cp.client_with(&t.secret).discard_pending("demo"))
        .unwrap_err();
    assert_eq!(e.status(), Some(403), "{e}");
    // Discarded: 5 again, and the queue, which runs 9, is deployed again
    // (its plan changes 9 back to 5, so it asks); until then that is what
    // is pending.
    let d = json(&m, &["installs", "discard-pending", "demo"]);
    assert!(
        d["message"]
            .as_str()
            .unwrap()
            .contains("dropped input queue_size: 5 \u{2192} 9"),
        "{d:#}"
    );
    let wf = d["workflows"][0]["id"].as_str().unwrap().to_owned();
    crate::approvals::waiting(&m, &wf, "apply queue");
    let i = json(&m, &["installs", "get", "demo"]);
    assert_eq!(i["inputs"]["queue_size"], "5", "{i:#}");
    assert_eq!(
        i["pending"]["changes"],
        json!([{"kind": "input", "name": "queue_size", "deployed": "9", "desired": "5"}]),
        "{i:#}"
    );
    assert_eq!(i["pending"]["components"], json!(["queue"]), "{i:#}");
    ok(m.cp.nuon(&["workflows", "approve", &wf, "--all", "--wait"]));
    let i = json(&m, &["installs", "get", "demo"]);
    assert!(i["pending"].is_null(), "{i:#}");
    assert_eq!(
        json(&m, &["installs", "outputs", "demo"])["components"]["queue"]["size"],
        5
    );

    // Denied again, then applied from the CLI: it waits for its approval
    // (exit 3), approved it deploys 9, and nothing is pending.
    deny("queue_size=9");
    let out = m.cp.nuon(&["installs", "apply-pending", "demo", "--wait"]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(
        text(&out).contains("install demo's pending values deploy to queue, worker"),
        "{}",
        text(&out)
    );
    let wf = crate::deploy::newest_workflow(&c).id.to_string();
    ok(m.cp.nuon(&["workflows", "approve", &wf, "--all", "--wait"]));
    let i = json(&m, &["installs", "get", "demo"]);
    assert_eq!(i["inputs"]["queue_size"], "9", "{i:#}");
    assert!(i["pending"].is_null(), "{i:#}");
    assert_eq!(i["sync"], "in_sync", "{i:#}");
    assert_eq!(
        json(&m, &["installs", "outputs", "demo"])["components"]["queue"]["size"],
        9
    );
}
