use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use nuon_core::app::{HealthProbe, ProbeKind};
use nuon_core::{
    HealthJob, HostError, Job, JobHost, JobId, JobSpec, OrgId, Outcome, Plugin, ProcessExit,
    ProcessSpec, RunnerId, StopReason,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::HealthPlugin;

/// A host that keeps the job's log, and asks the job to stop once it has
/// been asked `stop_after` times.
struct Host {
    dir: PathBuf,
    log: Vec<String>,
    asked: u32,
    stop_after: Option<u32>,
}

impl Host {
    fn new() -> Self {
        Host {
            dir: std::env::temp_dir(),
            log: Vec::new(),
            asked: 0,
            stop_after: None,
        }
    }
}

#[async_trait]
impl JobHost for Host {
    fn work_dir(&self) -> &Path {
        &self.dir
    }
    fn log(&mut self, text: &str) {
        self.log.push(text.to_owned());
    }
    async fn run_process(&mut self, _: ProcessSpec) -> Result<ProcessExit, HostError> {
        unreachable!("this host confines nothing: exec probes run on it directly")
    }
    fn stop_requested(&mut self) -> Option<StopReason> {
        self.asked += 1;
        self.stop_after
            .filter(|n| self.asked > *n)
            .map(|_| StopReason::Cancelled)
    }
}

/// A loopback HTTP server answering every request with `status`.
async fn http_server(status: u16) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((mut s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = s.read(&mut buf).await;
                let reply = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                );
                let _ = s.write_all(reply.as_bytes()).await;
            });
        }
    });
    format!("http://{addr}/healthz")
}

fn probe(kind: ProbeKind, name: &str, url: Option<&str>, command: &[&str]) -> HealthProbe {
    HealthProbe {
        kind,
        name: name.into(),
        url: url.map(Into::into),
        command: command.iter().map(|c| c.to_string()).collect(),
    }
}

fn spec(probes: Vec<HealthProbe>, window_ms: u64, interval_ms: u64, block: bool) -> JobSpec {
    let job = HealthJob {
        component: "web".into(),
        probes,
        window_ms,
        interval_ms,
        hold_rounds: 3,
        block_deploy: block,
    };
    JobSpec {
        job_id: JobId::generate(),
        org_id: OrgId::generate(),
        runner_id: RunnerId::generate(),
        kind: HealthJob::KIND.into(),
        payload: serde_json::to_value(job).unwrap(),
        timeout_secs: 60,
        retry: Default::default(),
        created_at_ms: 0,
        redact: Vec::new(),
        role: None,
        sandbox: Default::default(),
        customer_secrets: Vec::new(),
    }
}

#[tokio::test]
async fn every_kind_of_probe_passing_three_rounds_in_a_row_holds() {
    let url = http_server(204).await;
    let addr = url
        .trim_start_matches("http://")
        .trim_end_matches("/healthz")
        .to_owned();
    let probes = vec![
        probe(ProbeKind::Http, "api", Some(&url), &[]),
        probe(ProbeKind::Tcp, "port", Some(&addr), &[]),
        probe(ProbeKind::Exec, "true", None, &["true"]),
    ];
    let mut host = Host::new();
    let r = HealthPlugin::new()
        .run(&spec(probes, 10_000, 50, true), &mut host)
        .await
        .unwrap();
    assert_eq!(r.outcome, Outcome::Succeeded, "{r:?}");
    assert_eq!(r.outputs["held"], true);
    assert_eq!(r.outputs["healthy"], true);
    assert_eq!(r.outputs["rounds"], 3);
    let probes = r.outputs["probes"].as_array().unwrap();
    assert_eq!(probes.len(), 3);
    assert!(
        probes[0]["detail"]
            .as_str()
            .unwrap()
            .starts_with("HTTP 204")
    );
    assert_eq!(probes[1]["type"], "tcp");
    assert_eq!(probes[2]["passes"], 3);
    assert!(
        host.log.iter().any(|l| l.starts_with("round 3: api ok")),
        "{:?}",
        host.log
    );
    assert!(host.log.last().unwrap().contains("web is healthy"));
}

#[tokio::test]
async fn a_failing_probe_fails_a_blocking_deploy_and_is_recorded_by_one_that_does_not_block() {
    let url = http_server(503).await;
    for block in [true, false] {
        let probes = vec![
            probe(ProbeKind::Http, "api", Some(&url), &[]),
            probe(ProbeKind::Exec, "true", None, &["true"]),
        ];
        let r = HealthPlugin::new()
            .run(&spec(probes, 500, 100, block), &mut Host::new())
            .await
            .unwrap();
        assert_eq!(r.outputs["held"], false);
        assert_eq!(r.outputs["healthy"], false);
        assert_eq!(r.outputs["rounds"], 5, "{r:?}");
        assert_eq!(r.outputs["probes"][0]["failures"], 5);
        assert_eq!(r.outputs["probes"][1]["ok"], true);
        if block {
            assert_eq!(r.outcome, Outcome::Failed);
            let reason = r.reason.unwrap();
            assert!(reason.contains("did not hold within 500ms"), "{reason}");
            assert!(
                reason.contains("probe api failed 5 of 5 rounds, last: HTTP 503"),
                "{reason}"
            );
            assert!(reason.contains("block_deploy"), "{reason}");
        } else {
            assert_eq!(r.outcome, Outcome::Succeeded);
        }
    }
}

#[tokio::test]
async fn health_that_comes_later_holds_from_then_and_a_hanging_or_missing_probe_fails() {
    let dir = tempfile::tempdir().unwrap();
    let flag = dir.path().join("ready");
    let flag_text = flag.to_string_lossy().into_owned();
    let later = flag.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(400)).await;
        std::fs::write(later, "").unwrap();
    });
    let probes = vec![probe(
        ProbeKind::Exec,
        "ready",
        None,
        &["test", "-f", &flag_text],
    )];
    let r = HealthPlugin::new()
        .run(&spec(probes, 10_000, 100, true), &mut Host::new())
        .await
        .unwrap();
    assert_eq!(r.outcome, Outcome::Succeeded, "{r:?}");
    assert!(r.outputs["held_after_ms"].as_u64().unwrap() >= 400, "{r:?}");
    assert!(r.outputs["probes"][0]["failures"].as_u64().unwrap() >= 3);

    // A probe that does not answer within the interval has failed (and
    // its process is gone); one that cannot run says why.
    let probes = vec![
        probe(ProbeKind::Exec, "sleepy", None, &["sleep", "30"]),
        probe(
            ProbeKind::Exec,
            "absent",
            None,
            &["no-such-probe-nuon-test"],
        ),
        probe(ProbeKind::Tcp, "closed", Some("127.0.0.1:1"), &[]),
    ];
    let started = std::time::Instant::now();
    let r = HealthPlugin::new()
        .run(&spec(probes, 400, 200, true), &mut Host::new())
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(r.outcome, Outcome::Failed);
    let p = &r.outputs["probes"];
    assert!(
        p[0]["detail"]
            .as_str()
            .unwrap()
            .starts_with("no answer within 200ms"),
        "{p}"
    );
    assert!(
        p[1]["detail"]
            .as_str()
            .unwrap()
            .contains("cannot run \"no-such-probe-nuon-test\""),
        "{p}"
    );
    assert!(
        p[2]["detail"]
            .as_str()
            .unwrap()
            .contains("cannot connect to 127.0.0.1:1"),
        "{p}"
    );
}

#[tokio::test]
async fn a_cancel_stops_the_watch() {
    let probes = vec![probe(ProbeKind::Exec, "false", None, &["false"])];
    let mut host = Host::new();
    host.stop_after = Some(3);
    let r = HealthPlugin::new()
        .run(&spec(probes, 60_000, 1000, true), &mut host)
        .await
        .unwrap();
    assert_eq!(r.outcome, Outcome::Cancelled, "{r:?}");
}

#[test]
fn a_job_the_plugin_cannot_run_is_refused_before_it_starts() {
    let plugin = HealthPlugin::new();
    let bad = [
        (vec![], "no probe"),
        (
            vec![probe(ProbeKind::Http, "x", Some("example.com"), &[])],
            "full http",
        ),
        (
            vec![probe(ProbeKind::Tcp, "x", Some("db"), &[])],
            "host:port",
        ),
        (
            vec![probe(ProbeKind::Exec, "x", None, &[])],
            "require a command",
        ),
    ];
    for (probes, want) in bad {
        let err = plugin
            .validate(&spec(probes, 1000, 100, false))
            .unwrap_err();
        assert!(err.to_string().contains(want), "{err} lacks {want}");
    }
    let ok = vec![probe(ProbeKind::Exec, "x", None, &["true"])];
    assert!(plugin.validate(&spec(ok.clone(), 0, 100, false)).is_err());
    plugin.validate(&spec(ok, 1000, 100, false)).unwrap();
}
