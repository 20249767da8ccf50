//! Operating installs after day one, with the real binaries: debug and log
//! requests the runner decides on, both audit trails (and tampering with
//! either), runner health with signed webhooks, a webhook receiver that
//! is down for two minutes, and `/metrics` checked by `promtool`.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nuon_core::audit::AuditEntry;
use nuon_tests::{ControlPlane, Runner, RunnerOpts, have_tool, ours, rt, signal, wait_for};

use crate::deploy::{METADATA, Manual, ok, text};

/// An app of one action: enough for an install with a runner.
const HELLO: (&str, &str) = (
    "actions/hello.toml",
    "name = \"hello\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"say\"\ncommand = \"echo hello\"\n",
);

fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_str(&ok_text(out)).unwrap_or_else(|e| panic!("{e}: {}", text(out)))
}

fn ok_text(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn runner_audit(args: &[&str], work_dir: &Path) -> std::process::Output {
    ours("nuon-runner")
        .arg("audit")
        .args(args)
        .arg("--work-dir")
        .arg(work_dir)
        .output()
        .unwrap()
}

fn journal(work_dir: &Path) -> Vec<AuditEntry> {
    std::fs::read_to_string(work_dir.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

pub(crate) fn sqlite3(db: &Path, sql: &str) {
    crate::security::sqlite3(db, sql);
}

#[test]
fn debug_commands_are_the_runners_call_and_both_audit_trails_record_them_and_catch_tampering() {
    if !have_tool("sqlite3", "edit the audit table behind the store") {
        return;
    }
    let mut m = Manual::start(&[METADATA, HELLO]);
    // The default: the runner refuses, and says how its operator could allow.
    let out =
        m.cp.nuon(&["installs", "debug", "demo", "--", "echo", "hello-debug"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("--debug-commands off"),
        "{}",
        text(&out)
    );

    let list = m.dir.path().join("allow-list");
    std::fs::write(
        &list,
        "# what the vendor may run\necho hello-debug\necho 'some logs'\n",
    )
    .unwrap();
    m.restart_runner_with(&["--debug-commands", "allow-list", list.to_str().unwrap()]);
    let out =
        m.cp.nuon(&["installs", "debug", "demo", "--", "echo", "hello-debug"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(ok_text(&out).contains("hello-debug"), "{}", text(&out));
    let out = m.cp.nuon(&[
        "installs",
        "logs-request",
        "demo",
        "--",
        "echo",
        "some logs",
    ]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(ok_text(&out).contains("some logs"), "{}", text(&out));
    // Matched on the whole command line.
    let out = m.cp.nuon(&[
        "installs",
        "debug",
        "demo",
        "--",
        "echo",
        "hello-debug",
        "--more",
    ]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("not on this runner's allow-list"),
        "{}",
        text(&out)
    );

    // The runner's journal: the refusals and the runs, with where each
    // came from.
    let work = m.runner_work_dir();
    let j = journal(&work);
    let actions: Vec<&str> = j.iter().map(|e| e.action.as_str()).collect();
    assert_eq!(
        actions.iter().filter(|a| **a == "job.refused").count(),
        2,
        "{j:#?}"
    );
    assert_eq!(
        actions.iter().filter(|a| **a == "job.accepted").count(),
        2,
        "{j:#?}"
    );
    let refused = j.iter().find(|e| e.action == "job.refused").unwrap();
    assert!(
        refused.detail.contains("--debug-commands off")
            && refused.detail.contains("spec sha256:")
            && refused.detail.contains("signed by ed25519:"),
        "{refused:#?}"
    );
    let ours: Vec<&str> = j
        .iter()
        .filter(|e| e.action != "job.accepted")
        .map(|e| e.target.as_str())
        .collect();
    assert_eq!(ours.len(), 4, "{j:#?}");

    // The control plane's trail: the four requests, and each job's end.
    let trail = json(&m.cp.nuon(&["audit", "list", "--limit", "1000", "--json"]));
    let entries: Vec<AuditEntry> = serde_json::from_value(trail["entries"].clone()).unwrap();
    let requests: Vec<&AuditEntry> = entries
        .iter()
        .filter(|e| e.action == "requestInstallDebug")
        .collect();
    assert_eq!(requests.len(), 4, "{entries:#?}");
    assert!(
        requests.iter().all(|e| e.outcome == "201"
            && e.actor.starts_with("tok_")
            && e.target == "/v1/installs/demo/debug"
            && e.source == "127.0.0.1"),
        "{requests:#?}"
    );
    let ends = wait_for(
        "the jobs' ends in the trail",
        Duration::from_secs(20),
        || {
            let trail = json(&m.cp.nuon(&["audit", "list", "--limit", "1000", "--json"]));
            let entries: Vec<AuditEntry> = serde_json::from_value(trail["entries"].clone()).ok()?;
            let ends: Vec<AuditEntry> = ours
                .iter()
                .filter_map(|t| {
                    entries
                        .iter()
                        .find(|e| e.action == "job.finished" && e.target == *t)
                        .cloned()
                })
                .collect();
            (ends.len() == 4).then_some(ends)
        },
    )
    .unwrap();
    let outcomes: Vec<&str> = ends.iter().map(|e| e.outcome.as_str()).collect();
    assert_eq!(
        outcomes,
        ["failed", "succeeded", "succeeded", "failed"],
        "{ends:#?}"
    );
    assert!(ends.iter().all(|e| e.actor.starts_with("runner:rnr_")));
    let out = runner_audit(&["verify"], &work);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        ok_text(&out).contains(&format!("ok: {} entries chain", j.len())),
        "{}",
        text(&out)
    );

    // The two sides agree; a job missing from either is named.
    let export = m.dir.path().join("export.ndjson");
    ok(m.cp.nuon(&[
        "audit",
        "export",
        "--install",
        "demo",
        "--out",
        export.to_str().unwrap(),
    ]));
    let out = runner_audit(&["compare", export.to_str().unwrap()], &work);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        ok_text(&out).contains("4 jobs on both sides"),
        "{}",
        text(&out)
    );
    let lines: Vec<String> = std::fs::read_to_string(&export)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let dropped: AuditEntry = serde_json::from_str(&lines[1]).unwrap();
    let short = export.with_extension("short");
    let kept: Vec<&String> = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 1)
        .map(|(_, l)| l)
        .collect();
    std::fs::write(
        &short,
        kept.iter().map(|l| format!("{l}\n")).collect::<String>(),
    )
    .unwrap();
    let out = runner_audit(&["compare", short.to_str().unwrap()], &work);
    assert!(!out.status.success(), "{}", text(&out));
    let job = dropped.target.strip_prefix("job:").unwrap();
    assert!(
        ok_text(&out).contains(&format!("only in this runner's journal: job {job}")),
        "{}",
        text(&out)
    );
    // A job the control plane says this runner ran, that it never saw.
    let mut extra = dropped.clone();
    extra.target = "job:job_01JZZZZZZZZZZZZZZZZZZZZZZZ".into();
    std::fs::write(
        &short,
        format!(
            "{}\n{}\n",
            lines.join("\n"),
            serde_json::to_string(&extra).unwrap()
        ),
    )
    .unwrap();
    let out = runner_audit(&["compare", short.to_str().unwrap()], &work);
    assert!(!out.status.success());
    assert!(
        ok_text(&out)
            .contains("only in the control plane's record: job job_01JZZZZZZZZZZZZZZZZZZZZZZZ"),
        "{}",
        text(&out)
    );

    // The runner's journal tampered with: edited, deleted, reordered.
    m.stop_runner();
    let path = work.join("audit.jsonl");
    let original = std::fs::read_to_string(&path).unwrap();
    let rows: Vec<&str> = original.lines().collect();
    let broken_at = |rows: &[String]| -> String {
        std::fs::write(
            &path,
            rows.iter().map(|l| format!("{l}\n")).collect::<String>(),
        )
        .unwrap();
        let out = runner_audit(&["verify"], &work);
        assert!(!out.status.success(), "{}", text(&out));
        ok_text(&out)
    };
    let mut edited: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
    edited[2] = edited[2].replace("\"outcome\":\"", "\"outcome\":\"x");
    assert!(broken_at(&edited).contains("BROKEN at entry 3: changed"));
    let mut deleted: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
    deleted.remove(1);
    assert!(broken_at(&deleted).contains("BROKEN at entry 2: missing"));
    let mut swapped: Vec<String> = rows.iter().map(|r| r.to_string()).collect();
    swapped.swap(1, 2);
    assert!(broken_at(&swapped).starts_with("BROKEN at entry 2"));
    std::fs::write(&path, &original).unwrap();

    // The control plane's trail tampered with in the store.
    let db = m.cp.data_dir.join("nuon.db");
    let verify = |cp: &ControlPlane| cp.nuon(&["audit", "verify"]);
    let out = verify(&m.cp);
    assert!(out.status.success(), "{}", text(&out));
    // Counted in English ("entries", never "entrys").
    assert!(ok_text(&out).contains(" entries chain"), "{}", text(&out));
    sqlite3(&db, "UPDATE audit SET outcome = outcome || 'x' WHERE n = 3");
    let out = verify(&m.cp);
    assert!(!out.status.success());
    assert!(
        ok_text(&out).contains("BROKEN at entry 3: changed"),
        "{}",
        text(&out)
    );
    sqlite3(
        &db,
        "UPDATE audit SET outcome = substr(outcome, 1, length(outcome) - 1) WHERE n = 3",
    );
    let out = verify(&m.cp);
    assert!(out.status.success(), "{}", text(&out));
    let swap = "BEGIN IMMEDIATE; UPDATE audit SET n = -1 WHERE n = 3; UPDATE audit SET n = 3 WHERE n = 4; UPDATE audit SET n = 4 WHERE n = -1; COMMIT";
    sqlite3(&db, swap);
    let out = verify(&m.cp);
    assert!(!out.status.success());
    assert!(
        ok_text(&out).contains("BROKEN at entry 3"),
        "{}",
        text(&out)
    );
    sqlite3(&db, swap);
    let out = verify(&m.cp);
    assert!(out.status.success(), "{}", text(&out));
    sqlite3(&db, "DELETE FROM audit WHERE n IN (3, 4)");
    let out = verify(&m.cp);
    assert!(
        ok_text(&out).contains("BROKEN at entry 3: missing"),
        "{}",
        text(&out)
    );
    let v = json(&m.cp.nuon(&["audit", "verify", "--json"]));
    assert_eq!(v["entries"], 2);
    assert_eq!(v["broken"]["entry"], 3);
}

/// One delivery a webhook receiver got: its event, id, body and whether
/// its signature checked out.
pub(crate) type Delivery = (String, String, serde_json::Value, bool);

/// What a webhook receiver got.
#[derive(Clone, Default)]
pub(crate) struct Received(Arc<Mutex<Vec<Delivery>>>);

impl Received {
    pub(crate) fn all(&self) -> Vec<Delivery> {
        self.0.lock().unwrap().clone()
    }

    /// Waits until `n` deliveries came (`what` names them), and answers all.
    pub(crate) fn at_least(&self, n: usize, what: &str) -> Vec<Delivery> {
        wait_for(what, Duration::from_secs(60), || {
            let all = self.all();
            (all.len() >= n).then_some(all)
        })
        .unwrap()
    }
}

/// Serves a webhook receiver on `addr` that checks each delivery's
/// signature under `secret`, until the handle is aborted.
pub(crate) fn receiver(
    addr: SocketAddr,
    secret: String,
    got: Received,
) -> tokio::task::JoinHandle<()> {
    use axum::http::HeaderMap;
    use nuon_core::webhook;
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: axum::body::Bytes| {
            let (secret, got) = (secret.clone(), got.clone());
            async move {
                let h = |n: &str| {
                    headers
                        .get(n)
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_owned()
                };
                let signed = webhook::verify(
                    secret.as_bytes(),
                    &h(webhook::SIGNATURE_HEADER),
                    &body,
                    nuon_core::now_ms() / 1000,
                    300,
                )
                .is_ok();
                let value = serde_json::from_slice(&body).unwrap_or_default();
                got.0.lock().unwrap().push((
                    h(webhook::EVENT_HEADER),
                    h(webhook::DELIVERY_HEADER),
                    value,
                    signed,
                ));
                "ok"
            }
        }),
    );
    let listener = rt().block_on(tokio::net::TcpListener::bind(addr)).unwrap();
    rt().spawn(async move {
        let _ = axum::serve(listener, app).await;
    })
}

pub(crate) fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A control plane with short health thresholds and webhook backoff, one
/// runner, and a webhook for runner health at an address nothing listens
/// on yet (with its secret).
fn watched(max_backoff: &str) -> (ControlPlane, Runner, SocketAddr, String) {
    let cp = ControlPlane::start_with(
        "3s",
        &[
            "--max-claim-wait",
            "1s",
            "--runner-unhealthy-after",
            "4s",
            "--runner-offline-after",
            "9s",
            "--webhook-max-backoff",
            max_backoff,
            // The receiver is on loopback.
            "--webhook-allow-private-networks",
        ],
    )
    .unwrap();
    let token = cp.create_runner("edge").unwrap();
    // Its claims are held a second (--max-claim-wait), so it calls every
    // second while idle.
    let runner = Runner::start_with_args(
        &cp.runner_url,
        RunnerOpts {
            token: &token,
            signing_key: &cp.signing_key,
            slots: 2,
            grace: "1s",
            work_dir: None,
        },
        &["--claim-wait-ms", "1000"],
    )
    .unwrap();
    let addr = free_port();
    let hook = format!("http://{addr}/hook");
    let added = json(&cp.nuon(&[
        "orgs",
        "webhooks",
        "add",
        &hook,
        "--events",
        "runner_unhealthy,runner_healthy",
        "--json",
    ]));
    let secret = added["secret"].as_str().unwrap().to_owned();
    (cp, runner, addr, secret)
}

fn health_of(cp: &ControlPlane, name: &str) -> String {
    let list = json(&cp.nuon(&["runners", "list", "--json"]));
    list["runners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .map(|r| r["health"].as_str().unwrap_or("").to_owned())
        .unwrap_or_default()
}

fn wait_health(cp: &ControlPlane, name: &str, want: &str, limit: Duration) {
    wait_for(&format!("runner {name} to be {want}"), limit, || {
        (health_of(cp, name) == want).then_some(())
    })
    .unwrap();
}

#[test]
fn a_stopped_runner_turns_unhealthy_then_offline_fires_signed_webhooks_and_recovers() {
    let (cp, runner, addr, secret) = watched("2s");
    assert!(secret.starts_with("whsec_"));
    // Kept sealed: nowhere in the data dir in the clear.
    for f in std::fs::read_dir(&cp.data_dir).unwrap().flatten() {
        let bytes = std::fs::read(f.path()).unwrap_or_default();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "the webhook secret is in the clear in {}",
            f.path().display()
        );
    }
    let got = Received::default();
    let server = receiver(addr, secret, got.clone());
    wait_health(&cp, "edge", "healthy", Duration::from_secs(20));

    signal(runner.pid(), libc::SIGSTOP);
    wait_health(&cp, "edge", "unhealthy", Duration::from_secs(20));
    wait_health(&cp, "edge", "offline", Duration::from_secs(30));
    let told = got.at_least(2, "two runner_unhealthy deliveries");
    signal(runner.pid(), libc::SIGCONT);
    wait_health(&cp, "edge", "healthy", Duration::from_secs(20));
    let all = got.at_least(3, "the runner_healthy delivery");
    server.abort();
    assert_eq!(told[0].0, "runner_unhealthy");
    assert_eq!(told[0].2["data"]["health"], "unhealthy");
    assert_eq!(told[1].2["data"]["health"], "offline");
    assert_eq!(all[2].0, "runner_healthy");
    assert!(
        all.iter().all(|d| d.3),
        "every signature checks out: {all:#?}"
    );
    assert!(all.iter().all(|d| d.2["id"] == d.1.as_str()));
    // The transitions are in the audit trail.
    let trail = json(&cp.nuon(&["audit", "list", "--actor", "control-plane", "--json"]));
    let healths: Vec<&str> = trail["entries"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "runner.health")
        .map(|e| e["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(
        healths,
        ["healthy", "unhealthy", "offline", "healthy"],
        "{trail:#}"
    );
    // The runner's telemetry reached the control plane.
    let list = json(&cp.nuon(&["runners", "list", "--json"]));
    let edge = list["runners"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "edge")
        .unwrap()
        .clone();
    assert_eq!(edge["telemetry"]["slots"], 2, "{edge:#}");
}

#[test]
fn a_webhook_receiver_down_for_two_minutes_gets_every_event_in_order_and_once() {
    let (cp, runner, addr, secret) = watched("5s");
    wait_health(&cp, "edge", "healthy", Duration::from_secs(20));
    // Nothing listens: three events happen, and are tried, meanwhile.
    let down = std::time::Instant::now();
    let deliveries = |n: usize| {
        wait_for(
            &format!("{n} deliveries queued"),
            Duration::from_secs(40),
            || {
                let list = json(&cp.nuon(&["orgs", "webhooks", "deliveries", "--json"]));
                (list["deliveries"].as_array()?.len() >= n).then_some(list)
            },
        )
        .unwrap()
    };
    signal(runner.pid(), libc::SIGSTOP);
    // Unhealthy, then offline: the transitions recorded, not only shown.
    deliveries(2);
    signal(runner.pid(), libc::SIGCONT);
    let pending = deliveries(3);
    let d = pending["deliveries"].as_array().unwrap();
    assert_eq!(d.len(), 3, "{pending:#}");
    assert!(d.iter().all(|d| d["status"] == "pending"), "{pending:#}");
    std::thread::sleep(Duration::from_secs(120).saturating_sub(down.elapsed()));
    let tried = json(&cp.nuon(&["orgs", "webhooks", "deliveries", "--json"]));
    let oldest = tried["deliveries"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        oldest["attempts"].as_u64().unwrap() >= 5,
        "retried while down: {oldest:#}"
    );
    assert!(
        oldest["last_error"]
            .as_str()
            .unwrap()
            .contains("cannot reach"),
        "{oldest:#}"
    );

    let got = Received::default();
    let server = receiver(addr, secret, got.clone());
    let all = got.at_least(3, "every event once the receiver is back");
    // A little longer: nothing comes twice.
    std::thread::sleep(Duration::from_secs(3));
    let all_later = got.all();
    server.abort();
    assert_eq!(
        all_later.len(),
        all.len(),
        "nothing delivered twice: {all_later:#?}"
    );
    let events: Vec<(&str, &str)> = all
        .iter()
        .map(|d| (d.0.as_str(), d.2["data"]["health"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        events,
        [
            ("runner_unhealthy", "unhealthy"),
            ("runner_unhealthy", "offline"),
            ("runner_healthy", "healthy")
        ]
    );
    let ids: BTreeSet<&str> = all.iter().map(|d| d.1.as_str()).collect();
    assert_eq!(ids.len(), 3, "three deliveries, three ids");
    assert!(all.iter().all(|d| d.3), "signed: {all:#?}");
    let log = json(&cp.nuon(&["orgs", "webhooks", "deliveries", "--json"]));
    assert!(
        log["deliveries"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d["status"] == "delivered"),
        "{log:#}"
    );
}

#[test]
fn promtool_accepts_both_metrics_pages_while_jobs_run() {
    if !have_tool(
        "promtool",
        "check the metrics pages (Debian's prometheus package)",
    ) {
        return;
    }
    let cp = ControlPlane::start("3s").unwrap();
    // By default an org's webhook may not point into the control plane's
    // network.
    let refused = cp.nuon(&[
        "orgs",
        "webhooks",
        "add",
        "http://169.254.169.254/latest",
        "--events",
        "workflow_failed",
    ]);
    assert!(!refused.status.success());
    assert!(
        text(&refused).contains("not a public address"),
        "{}",
        text(&refused)
    );
    let token = cp.create_runner("metered").unwrap();
    let metrics = free_port();
    let metrics_arg = metrics.to_string();
    let _runner = Runner::start_with_args(
        &cp.runner_url,
        RunnerOpts {
            token: &token,
            signing_key: &cp.signing_key,
            slots: 2,
            grace: "1s",
            work_dir: None,
        },
        &["--metrics-listen", &metrics_arg],
    )
    .unwrap();
    let c = cp.client();
    let done = crate::queue_sh(&c, "metered", "echo done", 1);
    nuon_tests::wait_job(&c, &done.id, Duration::from_secs(30)).unwrap();
    let slow = crate::queue_sh(&c, "metered", "sleep 30", 1);
    wait_for("the slow job to run", Duration::from_secs(30), || {
        let j = rt().block_on(c.get_job(&slow.id)).ok()?;
        (j.status == nuon_core::JobStatus::Running).then_some(())
    })
    .unwrap();
    let http = reqwest::Client::new();
    let page = |url: String| {
        rt().block_on(async { http.get(url).send().await.unwrap().text().await.unwrap() })
    };
    let control = page(format!("{}/metrics", cp.control_url));
    let runner = wait_for(
        "the runner to count its running job",
        Duration::from_secs(20),
        || {
            let p = page(format!("http://{metrics}/metrics"));
            p.contains("nuon_runner_jobs_running 1").then_some(p)
        },
    )
    .unwrap();
    for (name, text) in [("control plane", &control), ("runner", &runner)] {
        let mut child = Command::new("promtool")
            .args(["check", "metrics"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), text.as_bytes()).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "promtool on the {name}'s page: {}\n{text}",
            crate::deploy::text(&out)
        );
    }
    assert!(
        control.contains("nuon_jobs{status=\"running\",kind=\"exec\"} 1"),
        "{control}"
    );
    assert!(
        control.contains("nuon_runners{health=\"healthy\"} 1"),
        "{control}"
    );
    assert!(
        control.contains("nuon_dispatch_latency_seconds_count 2"),
        "{control}"
    );
    assert!(
        control.contains("nuon_store_write_duration_seconds_count{op=\"complete\"}"),
        "{control}"
    );
    assert!(
        runner.contains("nuon_runner_jobs_total{outcome=\"succeeded\"} 1"),
        "{runner}"
    );
    assert!(
        runner.contains("nuon_runner_heartbeat_rtt_seconds_count"),
        "{runner}"
    );
    rt().block_on(c.cancel_job(&slow.id)).unwrap();
}
