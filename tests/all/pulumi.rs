//! Pulumi programs end to end: a Pulumi sandbox and a `pulumi` component
//! packaged, synced, previewed, brought up and destroyed by the runner,
//! their stacks kept by the control plane between jobs. There is no
//! `pulumi` binary on the machines that test this project: a stand-in
//! keeps each stack in the job's local backend as Pulumi's would, checks
//! that a stack's secrets are sealed with the salt it was made with, and
//! records what it is given.

use std::path::PathBuf;

use nuon_core::workflow::WorkflowKind;
use nuon_tests::rt;

use crate::deploy::{METADATA, Manual, run_workflow, step, write_executable};

/// A stand-in `pulumi` (Python) and the file it records to.
fn stand_in_pulumi() -> (tempfile::TempDir, PathBuf) {
    let bin = tempfile::tempdir().unwrap();
    let record = bin.path().join("record");
    let script = format!(
        r#"#!/usr/bin/env python3
import json, os, sys
REC = {rec:?}
args = sys.argv[1:]
def log(line):
    with open(REC, "a") as f:
        f.write(line + "\n")
def opt(name):
    return args[args.index(name) + 1] if name in args else None
def fail(why):
    print("error: " + why, file=sys.stderr)
    sys.exit(255)
log("ARGS " + " ".join(args))
if args[:1] == ["version"]:
    print("v3.99.0")
    sys.exit(0)
stack, cwd = opt("--stack"), opt("--cwd")
if "--non-interactive" not in args or not stack or not cwd:
    fail("want --stack, --cwd and --non-interactive")
backend = os.environ.get("PULUMI_BACKEND_URL", "")
if not backend.startswith("file://"):
    fail("a file backend, not " + backend)
passphrase = os.environ.get("PULUMI_CONFIG_PASSPHRASE", "")
if not passphrase:
    fail("passphrase must be set with PULUMI_CONFIG_PASSPHRASE")
project = [l.split(":", 1)[1].strip() for l in open(os.path.join(cwd, "Pulumi.yaml")) if l.startswith("name:")][0]
state = os.path.join(backend[len("file://"):], stack + ".json")
settings = os.path.join(cwd, "Pulumi." + stack + ".yaml")
def load():
    return json.load(open(state))
def save(d):
    json.dump(d, open(state, "w"))
def salt():
    text = open(settings).read()
    if text.startswith("{{"):
        return json.loads(text).get("encryptionsalt")
    return text.split(":", 1)[1].strip()
def sealed_with():
    # What the stack's secrets are sealed with: its salt and passphrase.
    return (salt() or "") + "/" + passphrase
def resources():
    return [r for r in load()["deployment"]["resources"]]
def outputs():
    for r in resources():
        if r["type"] == "pulumi:pulumi:Stack":
            return r.get("outputs", {{}})
    return {{}}
cmd = " ".join(args[:2]) if args[0] == "stack" else args[0]
if cmd in ("stack init", "stack select"):
    if os.path.exists(state) and cmd == "stack init":
        fail("stack " + stack + " already exists")
    if not os.path.exists(state):
        if cmd == "stack select" and "--create" not in args:
            fail("no stack named " + stack)
        save({{"version": 3, "deployment": {{"resources": []}}}})
    if not os.path.exists(settings):
        open(settings, "w").write("encryptionsalt: v1:salt-%d\n" % os.getpid())
elif cmd.startswith("stack import"):
    d = json.load(open(opt("--file")))
    log("IMPORT " + json.dumps(d, sort_keys=True))
    save(d)
elif cmd.startswith("stack export"):
    json.dump(load(), open(opt("--file"), "w"))
elif cmd.startswith("stack output"):
    d = load()
    if d.get("sealed_with") not in (None, sealed_with()):
        fail("failed to decrypt: incorrect passphrase or salt")
    shown = outputs() if "--show-secrets" in args else {{k: ("[secret]" if k == "password" else v) for k, v in outputs().items()}}
    print(json.dumps(shown))
elif cmd == "preview":
    config = json.load(open(settings))["config"]
    log("CONFIG " + json.dumps(config, sort_keys=True))
    log("ENV GREETING=" + os.environ.get("GREETING", ""))
    made = [r for r in resources() if r["type"].startswith("random:")]
    steps = [] if made else [{{"op": "create", "urn": "urn:pulumi:%s::%s::random:index/randomPet:RandomPet::pet" % (stack, project)}}]
    print(json.dumps({{"steps": steps, "changeSummary": {{"same": 3}} if made else {{"create": 1}}}}))
elif cmd == "up":
    d = load()
    if d.get("sealed_with") not in (None, sealed_with()):
        fail("failed to decrypt: incorrect passphrase or salt")
    config = json.load(open(settings))["config"]
    outs = {{"name": project + "-" + config.get(project + ":suffix", "made"), "password": "pw-" + stack}}
    if project + ":cluster" in config:
        outs["cluster"] = config[project + ":cluster"]
    urn = "urn:pulumi:%s::%s::" % (stack, project)
    d["sealed_with"] = sealed_with()
    d["deployment"]["resources"] = [
        {{"urn": urn + "pulumi:pulumi:Stack::" + project, "type": "pulumi:pulumi:Stack", "outputs": outs}},
        {{"urn": urn + "pulumi:providers:random::default", "type": "pulumi:providers:random"}},
        {{"urn": urn + "random:index/randomPet:RandomPet::pet", "type": "random:index/randomPet:RandomPet"}},
    ]
    save(d)
elif cmd == "destroy":
    d = load()
    d["deployment"]["resources"] = []
    save(d)
else:
    fail("unexpected: " + " ".join(args))
"#,
        rec = record.display().to_string()
    );
    write_executable(&bin.path().join("pulumi"), &script);
    (bin, record)
}

const SANDBOX: &str = r#"type           = "pulumi"
runtime        = "python"
pulumi_version = "3.100.0"
path           = "./sandbox"

[pulumi_config]
"sbx:suffix"  = "{{ .nuon.install.inputs.suffix }}"
"aws:region"  = "us-east-2"
"#;

const COMPONENT: &str = r#"name    = "app"
type    = "pulumi"
runtime = "nodejs"
path    = "./app"

[config]
cluster    = "{{ .nuon.sandbox.outputs.name }}"
"app:tier" = "web"

[env_vars]
GREETING = "hello {{ .nuon.install.name }}"
"#;

/// A Pulumi sandbox and a `pulumi` component reading its outputs: without
/// `pulumi` on the runner the sandbox's preview fails saying what to
/// install; with it (a stand-in), a provision previews and brings both up
/// (the component's config rendered from the sandbox's outputs, a bare
/// config key under the project's namespace, its secret output kept as
/// sensitive); a second deploy imports the stack the control plane kept
/// (salt and passphrase unchanged, so its secrets still open) and previews
/// no change; a deprovision counts and destroys what the stacks hold.
#[test]
fn pulumi_programs_preview_up_and_destroy_with_their_stacks_kept_by_the_control_plane() {
    let (bin, record) = stand_in_pulumi();
    let mut m = Manual::start(&[
        METADATA,
        (
            "inputs.toml",
            "[[input]]\nname = \"suffix\"\ndescription = \"the sandbox's name suffix\"\ndefault = \"blue\"\n",
        ),
        ("sandbox.toml", SANDBOX),
        ("sandbox/Pulumi.yaml", "name: sbx\nruntime: python\n"),
        ("sandbox/__main__.py", "import pulumi\n"),
        ("components/app.toml", COMPONENT),
        ("app/Pulumi.yaml", "name: app\nruntime: nodejs\n"),
        ("app/index.js", "module.exports = {};\n"),
    ]);
    let c = m.cp.client();

    // No `pulumi` on the runner: the preview says what to install.
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "failed", "{w:#?}");
    let reason = step(&w, "plan sandbox").reason.clone().unwrap_or_default();
    assert!(
        reason.contains("`pulumi` binary is not on this runner's PATH")
            && reason.contains("install the Pulumi CLI"),
        "{reason}"
    );

    m.restart_runner_with_tools(bin.path());
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert_eq!(step(&w, "plan sandbox").outputs["changes"]["add"], 1);
    assert_eq!(step(&w, "plan app").outputs["changes"]["add"], 1);
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.sandbox["name"], "sbx-blue", "{outputs:?}");
    assert_eq!(outputs.components["app"]["cluster"], "sbx-blue");
    assert!(
        outputs.sensitive.contains(&"sandbox.password".to_owned())
            && outputs.sensitive.contains(&"app.password".to_owned()),
        "{:?}",
        outputs.sensitive
    );
    let rec = std::fs::read_to_string(&record).unwrap();
    assert!(
        rec.contains(r#"CONFIG {"app:cluster": "sbx-blue", "app:tier": "web"}"#),
        "the component's config is rendered from the sandbox's outputs, a bare key under the project's namespace: {rec}"
    );
    assert!(
        rec.contains(r#"CONFIG {"aws:region": "us-east-2", "sbx:suffix": "blue"}"#),
        "{rec}"
    );
    assert!(rec.contains("ENV GREETING=hello demo"), "{rec}");
    // The control plane keeps both stacks, and no lock is left held.
    let states = rt().block_on(c.list_states("demo")).unwrap().states;
    for part in ["sandbox", "app"] {
        let s = states.iter().find(|s| s.component == part);
        assert!(
            s.is_some_and(|s| s.versions >= 1 && s.lock.is_none()),
            "{part}: {states:?}"
        );
    }
    assert!(
        rec.contains("ARGS up --yes --skip-preview --stack ") && !rec.contains("IMPORT"),
        "new stacks import nothing: {rec}"
    );

    // A second deploy imports the kept stacks and changes nothing.
    std::fs::write(&record, "").unwrap();
    let w = run_workflow(&c, WorkflowKind::Reprovision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    for plan in ["plan sandbox", "plan app"] {
        assert_eq!(
            step(&w, plan).outputs["changes"],
            serde_json::json!({"add": 0, "change": 0, "destroy": 0}),
            "{plan}: {w:#?}"
        );
    }
    let rec = std::fs::read_to_string(&record).unwrap();
    assert!(
        rec.matches("IMPORT ").count() >= 4
            && rec.contains("random:index/randomPet:RandomPet::pet"),
        "each job imports the stack its last up left: {rec}"
    );

    // A deprovision counts what each stack holds and destroys it.
    std::fs::write(&record, "").unwrap();
    let w = run_workflow(&c, WorkflowKind::Deprovision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    assert_eq!(
        step(&w, "plan destroy app").outputs["changes"]["destroy"],
        1
    );
    assert_eq!(
        step(&w, "plan destroy sandbox").outputs["changes"]["destroy"],
        1
    );
    let rec = std::fs::read_to_string(&record).unwrap();
    assert_eq!(
        rec.matches("ARGS destroy --yes --skip-preview").count(),
        2,
        "{rec}"
    );
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert!(outputs.sandbox.is_empty(), "{outputs:?}");
}

/// A `pulumi` component whose environment names a backend of the
/// customer's own (`PULUMI_BACKEND_URL`): the stack lives there, selected
/// (made at its first job), and the control plane keeps nothing of it.
#[test]
fn a_pulumi_stack_in_the_customers_own_backend_is_kept_there() {
    let (bin, record) = stand_in_pulumi();
    let own = tempfile::tempdir().unwrap();
    let component = format!(
        "name = \"app\"\ntype = \"pulumi\"\nruntime = \"go\"\npath = \"./app\"\n\n[env_vars]\nPULUMI_BACKEND_URL = \"file://{}\"\nPULUMI_CONFIG_PASSPHRASE = \"the customer's\"\n",
        own.path().display()
    );
    let mut m = Manual::start(&[
        METADATA,
        ("components/app.toml", &component),
        ("app/Pulumi.yaml", "name: app\nruntime: go\n"),
        ("app/main.go", "package main\n"),
    ]);
    let c = m.cp.client();
    m.restart_runner_with_tools(bin.path());
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status, "succeeded", "{w:#?}");
    let rec = std::fs::read_to_string(&record).unwrap();
    assert!(
        rec.contains("ARGS stack select --create --stack ") && !rec.contains("IMPORT"),
        "{rec}"
    );
    let kept: Vec<_> = std::fs::read_dir(own.path()).unwrap().flatten().collect();
    assert_eq!(kept.len(), 1, "the stack is in the customer's backend");
    let stack = std::fs::read_to_string(kept[0].path()).unwrap();
    assert!(stack.contains("RandomPet"), "{stack}");
    let states = rt().block_on(c.list_states("demo")).unwrap().states;
    assert!(
        states
            .iter()
            .all(|s| s.component != "app" || s.versions == 0),
        "the control plane keeps nothing of it: {states:?}"
    );
    let outputs = rt().block_on(c.install_outputs("demo")).unwrap();
    assert_eq!(outputs.components["app"]["name"], "app-made", "{outputs:?}");
}
