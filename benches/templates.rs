//! Template rendering and config validation.
//!
//! `cargo bench -p nuon-benches --bench templates [-- render validate rego
//! redaction]` (release; the parts named, or all):
//!
//! 1. Every case of `tests/templates/cases.txt` that Go renders, executed
//!    `ITER` times by our engine and by the Go oracle (Go's `text/template`
//!    and sprig 3.2.3, `tests/templates/oracle`): the execute loops only
//!    (templates parsed and data decoded before timing), the ratio ours/Go.
//! 2. `nuon apps validate` of a generated app with 100 components, 50
//!    actions and 200 inputs: in process (`validate_dir`) and as the CLI
//!    (process start included), medians.
//! 3. A Rego policy over a plan of 1,000 resource changes.
//! 4. Log redaction: the check the runner's spool makes of each block of
//!    a job's output (64 KiB of lines) for 50 secrets in every form, over
//!    211 MB of the job-loop bench's awk lines, against the same blocks'
//!    UTF-8 check alone (what the spool does with no secret).
//! 5. `apps-render`: `nuon apps render` of the generated app of 2. (its
//!    deploy: 100 components), as a process.
//! 6. `kyverno`: a Kyverno policy set of 20 rules over 1,000 rendered
//!    objects, as the runner checks a chart before its apply.

use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nuon_core::template::{MissingKey, Template, Value};
use nuon_test_fixtures::templates;

const ITER: u32 = 200;

fn main() -> Result<()> {
    // `cargo bench --bench templates -- redaction` runs that part alone.
    let only: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let want = |part: &str| only.is_empty() || only.iter().any(|o| o == part);
    if want("render") {
        render_against_go()?;
    }
    if want("validate") {
        validate_generated_app()?;
    }
    if want("rego") {
        rego_over_a_large_plan()?;
    }
    if want("apps-render") {
        render_generated_app()?;
    }
    if want("kyverno") {
        kyverno_over_many_objects()?;
    }
    if want("redaction") {
        redaction_over_a_large_log();
    }
    Ok(())
}

/// The spool's per-block work over 211 MB of log lines, with no secret and
/// with 50 (each in every form: 50 × about 20 patterns), medians of 5.
fn redaction_over_a_large_log() {
    let mut block = String::new();
    let mut i = 0u64;
    while block.len() < 64 * 1024 - 100 {
        let _ = writeln!(
            block,
            "line {i} the quick brown fox jumps over the lazy dog 0123456789 abcdefghijklmnop"
        );
        i += 1;
    }
    let blocks = 211_000_000 / block.len();
    let secrets: Vec<String> = (0..50)
        .map(|i| {
            format!(
                "s3cr3t-{i:02}-{:016x}",
                0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i + 1)
            )
        })
        .collect();
    let redactor = nuon_core::redact::Redactor::new(&secrets);
    // What the runner did before the sampling filter: the automaton alone
    // over the joined lines (the same patterns and options as
    // `Redactor::new`).
    let mut patterns: Vec<String> = secrets
        .iter()
        .flat_map(|s| nuon_core::redact::forms(s))
        .collect();
    patterns.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    patterns.dedup();
    let automaton = aho_corasick::AhoCorasickBuilder::new()
        .match_kind(aho_corasick::MatchKind::LeftmostLongest)
        .ascii_case_insensitive(true)
        .kind(Some(aho_corasick::AhoCorasickKind::DFA))
        .build(&patterns)
        .expect("the automaton builds");
    let alone = |b: &[u8]| {
        let mut joined = Vec::with_capacity(b.len());
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', b) {
            joined.extend_from_slice(&b[start..end]);
            start = end + 1;
        }
        joined.extend_from_slice(&b[start..]);
        automaton.is_match(&joined)
    };
    let time = |f: &dyn Fn(&[u8]) -> bool| {
        let mut times = Vec::new();
        for _ in 0..5 {
            let start = Instant::now();
            let mut hits = 0usize;
            for _ in 0..blocks {
                hits += usize::from(f(std::hint::black_box(block.as_bytes())));
            }
            assert_eq!(hits, 0, "no secret is in the log");
            times.push(start.elapsed().as_secs_f64());
        }
        times.sort_by(f64::total_cmp);
        times[2]
    };
    let plain = time(&|b| std::str::from_utf8(b).is_err());
    let before = time(&|b| alone(b) || std::str::from_utf8(b).is_err());
    let redacted = time(&|b| redactor.finds_in_block("", b) || std::str::from_utf8(b).is_err());
    // A block with a value in it is still found, by both.
    let mut found = block.clone();
    found.push_str(&format!("x {} y\n", secrets[7].to_uppercase()));
    assert!(redactor.finds_in_block("", found.as_bytes()) && alone(found.as_bytes()));
    let mb = (blocks * block.len()) as f64 / 1e6;
    println!("\n## Log redaction, {mb:.0} MB in 64 KiB blocks\n");
    println!("| what | time | rate |\n|---|---|---|");
    println!(
        "| no secret: UTF-8 check only | {:.3} s | {:.0} MB/s |",
        plain,
        mb / plain
    );
    println!(
        "| 50 secrets in every form ({} patterns): the automaton alone (before) + UTF-8 check | {:.3} s | {:.0} MB/s |",
        patterns.len(),
        before,
        mb / before
    );
    println!(
        "| 50 secrets in every form: the sampling filter, then the automaton where it points (what ships) + UTF-8 check | {:.3} s | {:.0} MB/s |",
        redacted,
        mb / redacted
    );
}

/// A Rego policy (deny and warn) over a Terraform plan JSON of 1,000
/// resource changes: compile, load the input and evaluate, as the runner
/// does after each plan.
fn rego_over_a_large_plan() -> Result<()> {
    let changes: Vec<serde_json::Value> = (0..1000)
        .map(|i| {
            serde_json::json!({
                "address": format!("aws_s3_bucket.b{i}"),
                "type": "aws_s3_bucket",
                "change": {"actions": ["create"], "after": {"acl": if i % 250 == 0 { "public-read" } else { "private" }, "tags": {"team": "t"}}}
            })
        })
        .collect();
    let plan = serde_json::json!({"format_version": "1.2", "resource_changes": changes});
    let policy = nuon_core::policy::PolicySource {
        name: "no-public-buckets".into(),
        contents: "package nuon.s3\nimport rego.v1\n\ndeny contains msg if {\n  some r in input.resource_changes\n  r.type == \"aws_s3_bucket\"\n  r.change.after.acl == \"public-read\"\n  msg := sprintf(\"%s is public\", [r.address])\n}\n\nwarn contains msg if {\n  some r in input.resource_changes\n  not r.change.after.tags.owner\n  msg := sprintf(\"%s has no owner tag\", [r.address])\n}\n".into(),
        engine: None,
    };
    let mut times = Vec::new();
    let mut verdict = None;
    for _ in 0..10 {
        let start = Instant::now();
        verdict = Some(
            nuon_core::policy::evaluate(std::slice::from_ref(&policy), &plan)
                .map_err(anyhow::Error::msg)?,
        );
        times.push(start.elapsed());
    }
    let v = verdict.unwrap_or_default();
    anyhow::ensure!(
        v.deny.len() == 4 && v.warn.len() == 1000,
        "deny {} warn {}",
        v.deny.len(),
        v.warn.len()
    );
    println!(
        "rego: a deny and a warn rule over a plan of 1,000 resource changes: {:.1} ms (compile, input and evaluation; median of 10; 4 denials, 1,000 warnings)",
        median(times).as_secs_f64() * 1e3
    );
    Ok(())
}

fn render_against_go() -> Result<()> {
    let dir = templates::dir();
    let (cases_path, data_path) = (dir.join("cases.txt"), dir.join("data.json"));
    let cases = templates::read_cases(&cases_path)?;
    let default: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&data_path)?)?;
    let tmp = tempfile::tempdir()?;
    let Some(oracle) = templates::build_oracle(tmp.path())? else {
        println!("templates: Go or sprig missing, no comparison");
        return Ok(());
    };
    let go = templates::run_oracle(&oracle, &cases_path, &data_path)?;
    // The cases Go renders, parsed once, with their data decoded once.
    let mut ready: Vec<(Template, Value)> = Vec::new();
    for (case, data) in templates::go_rendered(&cases, &go, &default)? {
        let mk = match case.missing_key.as_deref() {
            Some("error") => MissingKey::Error,
            Some("zero") => MissingKey::Zero,
            _ => MissingKey::Default,
        };
        let t = Template::parse(&case.name, &case.template)
            .with_context(|| format!("case {}", case.name))?
            .missing_key(mk);
        ready.push((t, Value::from_json(&data)));
    }
    // Warm up, then time the execute loop.
    for (t, d) in &ready {
        let _ = t.execute(d);
    }
    let mut ours = Vec::new();
    let mut theirs = Vec::new();
    for _ in 0..3 {
        let start = Instant::now();
        for _ in 0..ITER {
            for (t, d) in &ready {
                std::hint::black_box(t.execute(d).ok());
            }
        }
        ours.push(start.elapsed());
        let (n, ns) = templates::time_oracle(&oracle, &cases_path, &data_path, ITER)?;
        anyhow::ensure!(n == ready.len(), "Go timed {n} cases, we {}", ready.len());
        theirs.push(Duration::from_nanos(ns as u64));
    }
    ours.sort();
    theirs.sort();
    let (o, g) = (ours[1], theirs[1]);
    let per = |d: Duration| d.as_nanos() as f64 / (f64::from(ITER) * ready.len() as f64);
    println!(
        "templates: {} cases x {ITER}: ours {:.1} ms ({:.0} ns a render), Go {:.1} ms ({:.0} ns a render), ratio ours/Go {:.2} (median of 3)",
        ready.len(),
        o.as_secs_f64() * 1e3,
        per(o),
        g.as_secs_f64() * 1e3,
        per(g),
        o.as_secs_f64() / g.as_secs_f64()
    );
    Ok(())
}

/// Writes an app of `components` components (terraform modules reading
/// inputs and each other's outputs), `actions` actions and `inputs` inputs.
pub fn generate_app(dir: &Path, components: usize, actions: usize, inputs: usize) -> Result<()> {
    let w = |p: &str, s: &str| -> Result<()> {
        let path = dir.join(p);
        std::fs::create_dir_all(path.parent().unwrap_or(dir))?;
        std::fs::write(path, s)?;
        Ok(())
    };
    w(
        "metadata.toml",
        "version = \"v2\"\ndisplay_name = \"Generated\"\ndescription = \"A big app\"\n",
    )?;
    w(
        "sandbox.toml",
        "terraform_version = \"1.9.0\"\npath = \"./src/sandbox\"\n",
    )?;
    w(
        "src/sandbox/main.tf",
        "output \"network_id\" { value = \"n\" }\n",
    )?;
    w(
        "src/mod/main.tf",
        "variable \"a\" {}\noutput \"url\" { value = var.a }\n",
    )?;
    let mut s = String::from(
        "[[group]]\nname = \"main\"\ndisplay_name = \"Main\"\ndescription = \"Main inputs\"\n",
    );
    for i in 0..inputs {
        write!(
            s,
            "\n[[input]]\nname = \"in_{i}\"\ndisplay_name = \"Input {i}\"\ndescription = \"Input number {i}\"\ngroup = \"main\"\ndefault = \"v{i}\"\n"
        )?;
    }
    w("inputs.toml", &s)?;
    for c in 0..components {
        let mut s = format!(
            "name = \"c{c}\"\ntype = \"terraform_module\"\nterraform_version = \"1.9.0\"\npath = \"./src/mod\"\n\n[vars]\na = \"{{{{ .nuon.install.inputs.in_{} | upper }}}}-{{{{ .nuon.sandbox.outputs.network_id }}}}\"\n",
            c % inputs.max(1)
        );
        if c > 0 {
            writeln!(
                s,
                "b = \"{{{{ .nuon.components.c{}.outputs.url }}}}\"",
                c - 1
            )?;
        }
        writeln!(
            s,
            "tags = \"{{{{ join \\\",\\\" (list .nuon.install.id .nuon.app.name) }}}}\""
        )?;
        w(&format!("components/c{c}.toml"), &s)?;
    }
    for a in 0..actions {
        let s = format!(
            "name = \"a{a}\"\ntimeout = \"5m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"run\"\ncommand = \"echo {{{{ .nuon.install.inputs.in_{} }}}} {{{{ .nuon.components.c{}.outputs.url }}}}\"\n",
            a % inputs.max(1),
            a % components.max(1)
        );
        w(&format!("actions/a{a}.toml"), &s)?;
    }
    Ok(())
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn validate_generated_app() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    generate_app(tmp.path(), 100, 50, 200)?;
    let (config, diags) = nuon_client::app_dir::validate_dir(tmp.path());
    anyhow::ensure!(config.is_some(), "the generated app is invalid:\n{diags}");
    let mut inproc = Vec::new();
    for _ in 0..20 {
        let start = Instant::now();
        std::hint::black_box(nuon_client::app_dir::validate_dir(tmp.path()));
        inproc.push(start.elapsed());
    }
    let nuon = nuon_tests::bin("nuon");
    let mut cli = Vec::new();
    for _ in 0..10 {
        let start = Instant::now();
        let out = std::process::Command::new(&nuon)
            .args(["apps", "validate"])
            .arg(tmp.path())
            .output()?;
        cli.push(start.elapsed());
        anyhow::ensure!(
            out.status.success(),
            "nuon apps validate: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    println!(
        "validate: app of 100 components, 50 actions, 200 inputs: {:.1} ms in process, {:.1} ms as `nuon apps validate` (medians of 20 and 10)",
        median(inproc).as_secs_f64() * 1e3,
        median(cli).as_secs_f64() * 1e3
    );
    Ok(())
}

/// `nuon apps render` of the generated app's deploy (100 components, each
/// reading inputs, the sandbox's and the previous component's outputs), as
/// the process a vendor's CI runs: medians of 10.
fn render_generated_app() -> Result<()> {
    let tmp = tempfile::tempdir()?;
    generate_app(tmp.path(), 100, 50, 200)?;
    let nuon = nuon_tests::bin("nuon");
    let mut times = Vec::new();
    let mut artifacts = 0;
    for _ in 0..10 {
        let start = Instant::now();
        let out = std::process::Command::new(&nuon)
            .args(["apps", "render"])
            .arg(tmp.path())
            .args(["--workflow", "deploy", "--json"])
            .output()?;
        times.push(start.elapsed());
        anyhow::ensure!(
            out.status.success(),
            "nuon apps render: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        artifacts = v["artifacts"].as_array().map_or(0, Vec::len);
    }
    println!(
        "apps-render: deploy of an app of 100 components ({artifacts} values): {:.1} ms as `nuon apps render` (median of 10)",
        median(times).as_secs_f64() * 1e3
    );
    Ok(())
}

/// 20 Kyverno rules (patterns with anchors and quantities, deny
/// conditions over JMESPath projections, a Pod rule checking Deployments'
/// templates) over 1,000 Deployments and Services, as
/// `nuon_core::policy::evaluate_objects` runs them before a chart's apply
/// (policies read once per call): medians of 10.
fn kyverno_over_many_objects() -> Result<()> {
    let mut rules = String::new();
    for i in 0..20 {
        let rule = match i % 4 {
            0 => format!(
                "  - name: limits-{i}\n    match:\n      any:\n      - resources:\n          kinds: [Pod]\n    validate:\n      message: \"limits\"\n      pattern:\n        spec:\n          containers:\n          - resources:\n              limits:\n                memory: \"<=2Gi\"\n                cpu: \"?*\"\n"
            ),
            1 => format!(
                "  - name: tags-{i}\n    match:\n      any:\n      - resources:\n          kinds: [Deployment]\n    validate:\n      message: \"{{{{ request.object.metadata.name }}}}: pin images\"\n      deny:\n        conditions:\n          any:\n          - key: \"{{{{ request.object.spec.template.spec.containers[].image }}}}\"\n            operator: AnyIn\n            value: [\"*:latest\"]\n"
            ),
            2 => format!(
                "  - name: pull-{i}\n    match:\n      any:\n      - resources:\n          kinds: [Deployment]\n          selector:\n            matchLabels:\n              tier: web\n    validate:\n      message: \"pull latest\"\n      pattern:\n        spec:\n          template:\n            spec:\n              containers:\n              - (image): \"*:latest\"\n                imagePullPolicy: Always\n"
            ),
            _ => format!(
                "  - name: lb-{i}\n    match:\n      any:\n      - resources:\n          kinds: [Service]\n    validate:\n      message: \"no load balancers\"\n      pattern:\n        spec:\n          =(type): \"!LoadBalancer\"\n"
            ),
        };
        rules.push_str(&rule);
    }
    let policy = nuon_core::policy::PolicySource {
        name: "bench".into(),
        contents: format!(
            "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata:\n  name: bench\nspec:\n  validationFailureAction: Audit\n  rules:\n{rules}"
        ),
        engine: Some("kyverno".into()),
    };
    let objects: Vec<serde_json::Value> = (0..1000)
        .map(|i| {
            if i % 2 == 0 {
                serde_json::json!({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": {"name": format!("d{i}"), "labels": {"tier": "web"}},
                    "spec": {"replicas": 2, "template": {"metadata": {"labels": {"tier": "web"}}, "spec": {"containers": [
                        {"name": "app", "image": if i % 10 == 0 { "nginx:latest" } else { "nginx:1.27" }, "imagePullPolicy": "IfNotPresent",
                         "resources": {"limits": {"memory": "512Mi", "cpu": "500m"}}},
                        {"name": "side", "image": "busybox:1.36", "resources": {"limits": {"memory": "64Mi", "cpu": "100m"}}}
                    ]}}}})
            } else {
                serde_json::json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("s{i}")},
                    "spec": {"type": if i % 50 == 1 { "LoadBalancer" } else { "ClusterIP" }, "ports": [{"port": 80}]}})
            }
        })
        .collect();
    let mut times = Vec::new();
    let mut verdict = None;
    for _ in 0..10 {
        let start = Instant::now();
        let v = nuon_core::policy::evaluate_objects(
            std::slice::from_ref(&policy),
            &objects,
            Some("apps"),
        )
        .map_err(anyhow::Error::msg)?;
        times.push(start.elapsed());
        verdict = Some(v);
    }
    let v = verdict.context("no run")?;
    println!(
        "kyverno: 20 rules over 1,000 objects: {:.1} ms ({} findings; median of 10)",
        median(times).as_secs_f64() * 1e3,
        v.warn.len()
    );
    Ok(())
}
