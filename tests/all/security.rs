//! Isolation, signed jobs and bad input.

use std::time::Duration;

use nuon_core::JobStatus;
use nuon_core::wire::{ClaimRequest, Completion, LogBatch, LogRecords, LogStream};
use nuon_core::{JobResult, Transport};
use nuon_tests::{ControlPlane, Runner, RunnerOpts, all_logs, rt, wait_for, wait_job};

use crate::{LONG, queue_sh, setup};

fn runner_client(cp: &ControlPlane, token: &str) -> nuon_client::RunnerClient {
    nuon_client::RunnerClient::new(nuon_client::ClientConfig::new(&cp.runner_url, token).unwrap())
        .unwrap()
}

/// Acceptance 9: runner tokens see only their own jobs; API tokens only their
/// org; tokens are stored only as hashes.
#[test]
fn tokens_are_scoped_and_stored_hashed() {
    let cp = ControlPlane::start("10s").unwrap();
    let t1 = cp.create_runner("r1").unwrap();
    let t2 = cp.create_runner("r2").unwrap();
    let client = cp.client();
    let job = queue_sh(&client, "r1", "echo hi", 1);

    // r2's token claims nothing of r1's, and cannot write into r1's job.
    let r2 = runner_client(&cp, &t2);
    let got = rt()
        .block_on(r2.claim(&ClaimRequest {
            kinds: vec!["exec".into()],
            slots: 4,
            wait_ms: 200,
            signing_key: None,
            telemetry: None,
            settings_version: None,
        }))
        .unwrap();
    assert!(got.jobs.is_empty());
    let r1 = runner_client(&cp, &t1);
    let claimed = rt()
        .block_on(r1.claim(&ClaimRequest {
            kinds: vec!["exec".into()],
            slots: 4,
            wait_ms: 1000,
            signing_key: None,
            telemetry: None,
            settings_version: None,
        }))
        .unwrap();
    assert_eq!(claimed.jobs.len(), 1);
    let mut lines = LogRecords::new();
    lines.push(LogStream::Stdout, 0, "forged").unwrap();
    let batch = LogBatch {
        attempt: 1,
        first_seq: 1,
        lines,
    };
    let err = rt().block_on(r2.append_logs(&job.id, &batch)).unwrap_err();
    assert!(
        matches!(err, nuon_core::TransportError::Stale(_)),
        "{err:?}"
    );
    let completion = Completion {
        attempt: 1,
        logs: None,
        log_lines: 0,
        result: JobResult::failed("forged"),
    };
    let err = rt()
        .block_on(r2.complete(&job.id, &completion))
        .unwrap_err();
    assert!(
        matches!(err, nuon_core::TransportError::Stale(_)),
        "{err:?}"
    );

    // Another org sees nothing of this one.
    let other_token = cp.create_org("other").unwrap();
    let other = cp.client_with(&other_token);
    assert!(rt().block_on(other.list_jobs()).unwrap().jobs.is_empty());
    // The other org sees only its own build runner.
    let runners = rt().block_on(other.list_runners()).unwrap().runners;
    assert_eq!(runners.len(), 1);
    assert_eq!(runners[0].role, nuon_core::wire::RunnerRole::Build);
    for err in [
        rt().block_on(other.get_job(&job.id)).unwrap_err(),
        rt().block_on(other.cancel_job(&job.id)).unwrap_err(),
        rt().block_on(other.job_logs(&job.id, 0)).unwrap_err(),
        rt().block_on(other.revoke_runner("r1")).unwrap_err(),
    ] {
        assert_eq!(err.status(), Some(404), "{err}");
    }
    let err = rt()
        .block_on(other.create_job(&nuon_core::wire::CreateJob {
            runner: "r1".into(),
            kind: "exec".into(),
            payload: serde_json::json!({"command": "true"}),
            timeout_secs: None,
            max_attempts: None,
            sandbox: None,
        }))
        .unwrap_err();
    assert_eq!(err.status(), Some(404), "{err}");

    // A revoked runner token is refused.
    rt().block_on(client.revoke_runner("r2")).unwrap();
    let err = rt()
        .block_on(r2.claim(&ClaimRequest {
            kinds: vec!["exec".into()],
            slots: 1,
            wait_ms: 0,
            signing_key: None,
            telemetry: None,
            settings_version: None,
        }))
        .unwrap_err();
    assert!(
        matches!(err, nuon_core::TransportError::Unauthorized(_)),
        "{err:?}"
    );

    // No token text is anywhere in the database files.
    let mut bytes = Vec::new();
    for entry in std::fs::read_dir(&cp.data_dir).unwrap() {
        let path = entry.unwrap().path();
        if path.file_name().unwrap().to_string_lossy().contains(".db") {
            bytes.extend(std::fs::read(&path).unwrap());
        }
    }
    let haystack = String::from_utf8_lossy(&bytes);
    for token in [&t1, &t2, &cp.admin_token, &other_token] {
        let secret = token.split_once('.').unwrap().1;
        assert!(!haystack.contains(secret), "a token is stored in clear");
    }
}

/// Acceptance 10: a job whose signed spec was altered is refused and never
/// executed; so is every job when the runner has another org's key.
#[test]
fn a_tampered_job_is_refused_and_never_runs() {
    let cp = ControlPlane::start("10s").unwrap();
    let token = cp.create_runner("r1").unwrap();
    let client = cp.client();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("pwned");
    let job = queue_sh(&client, "r1", "echo harmless", 1);
    // Rewrite the stored spec behind the control plane's back, as a
    // compromised database would. Specs are sealed at rest, so this
    // attacker holds the secrets key too (an insider): the spec is opened,
    // altered and sealed again; only the signature stands in the way.
    let db = cp.data_dir.join("nuon.db");
    let Some(stored) = sqlite3(
        &db,
        &format!("SELECT spec FROM jobs WHERE id = '{}'", job.id),
    ) else {
        return;
    };
    let secrets = nuon_control::secrets::SecretBox::load(&cp.data_dir)
        .unwrap()
        .unwrap();
    let context = nuon_control::keys::spec_context(&job.id);
    let spec = secrets.open(stored.trim(), &context).unwrap();
    assert!(spec.contains("echo harmless"), "{spec}");
    let altered = spec.replace("echo harmless", &format!("touch {}", marker.display()));
    sqlite3(
        &db,
        &format!(
            "UPDATE jobs SET spec = '{}' WHERE id = '{}'",
            secrets.seal(&altered, &context),
            job.id
        ),
    )
    .unwrap();
    let runner = Runner::start(
        &cp,
        RunnerOpts {
            token: &token,
            signing_key: &cp.signing_key,
            slots: 1,
            grace: "1s",
            work_dir: None,
        },
    )
    .unwrap();
    let done = wait_job(&client, &job.id, LONG).unwrap();
    assert_eq!(done.status, JobStatus::Failed);
    assert!(
        done.reason.as_deref().unwrap_or("").contains("signature"),
        "{done:?}"
    );
    assert!(!marker.exists(), "the tampered job ran");
    let logs = all_logs(&client, &job.id).unwrap();
    assert!(
        logs.iter()
            .any(|l| l.stream == LogStream::System && l.text.contains("signature"))
    );
    assert!(
        runner.log_text().contains("signature"),
        "runner log should say why"
    );
    // The runner's journal records the refusal, and names no signer: the
    // signature is nobody's it trusts.
    let journal = std::fs::read_to_string(runner.work_dir.join("audit.jsonl")).unwrap();
    let refused = journal
        .lines()
        .find(|l| l.contains("job.refused"))
        .unwrap_or_else(|| panic!("no refusal in the journal: {journal}"));
    assert!(refused.contains("signed by no trusted key"), "{refused}");
    drop(runner);

    // A runner holding a key its org never signed with is stopped at its
    // first claim, told which key to use (not job by job); the job waits.
    let wrong_key = nuon_core::OrgSigningKey::generate()
        .public_key()
        .to_string();
    let mut wrong = Runner::start_with_args(
        &cp.runner_url,
        RunnerOpts {
            token: &token,
            signing_key: &wrong_key,
            slots: 1,
            grace: "1s",
            work_dir: None,
        },
        &["--replace"],
    )
    .unwrap();
    let job = queue_sh(&client, "r1", &format!("touch {}", marker.display()), 1);
    let code = wrong.wait_exit(LONG).unwrap();
    let log = wrong.log_text();
    assert_ne!(code, Some(0), "{log}");
    assert!(log.contains("a key its org never signed with"), "{log}");
    assert!(
        log.contains(&format!(
            "restart the runner with --signing-key {}",
            cp.signing_key
        )),
        "{log}"
    );
    let waiting = rt().block_on(client.get_job(&job.id)).unwrap();
    assert_eq!(waiting.status, JobStatus::Queued);
    assert!(!marker.exists(), "a job signed by another key ran");
}

/// A stored spec altered without the secrets key does not open: the
/// control plane fails the job with why, and never sends it.
#[test]
fn a_sealed_spec_altered_without_the_key_is_never_sent() {
    let s = setup("10s", "r1", 1, "1s");
    let client = s.cp.client();
    // Keep the runner busy while the next job is altered.
    let busy = queue_sh(&client, "r1", "sleep 2", 1);
    let job = queue_sh(&client, "r1", "echo harmless", 1);
    let db = s.cp.data_dir.join("nuon.db");
    // Flip a character of the sealed text (base64 stays base64).
    let flip = format!(
        "UPDATE jobs SET spec = CASE substr(spec, 40, 1) WHEN 'A' THEN \
         substr(spec, 1, 39) || 'B' || substr(spec, 41) ELSE substr(spec, 1, 39) || 'A' || \
         substr(spec, 41) END WHERE id = '{}'",
        job.id
    );
    if sqlite3(&db, &flip).is_none() {
        return;
    }
    let done = wait_job(&client, &job.id, LONG).unwrap();
    assert_eq!(done.status, JobStatus::Failed, "{done:?}");
    let reason = done.reason.clone().unwrap_or_default();
    assert!(
        reason.contains("cannot open the job's stored spec"),
        "{reason}"
    );
    assert_eq!(done.attempts, 1, "refused once, not retried: {done:?}");
    assert_eq!(
        wait_job(&client, &busy.id, LONG).unwrap().status,
        JobStatus::Succeeded
    );
    // The runner goes on with the next job.
    let next = queue_sh(&client, "r1", "echo next", 1);
    assert_eq!(
        wait_job(&client, &next.id, LONG).unwrap().status,
        JobStatus::Succeeded
    );
}

/// Runs `sql` on `db` with the `sqlite3` tool; `None` (a loud skip) when
/// it is not installed.
pub(crate) fn sqlite3(db: &std::path::Path, sql: &str) -> Option<String> {
    // The control plane writes beside it (every claim records when the
    // runner was seen): wait for its lock rather than fail.
    match std::process::Command::new("sqlite3")
        .args(["-cmd", ".timeout 10000"])
        .arg(db)
        .arg(sql)
        .output()
    {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) => panic!("sqlite3 {sql}: {}", String::from_utf8_lossy(&o.stderr)),
        Err(_) => {
            let msg = "sqlite3 is not installed: cannot tamper with the stored job";
            assert!(!nuon_tests::require_all(), "{msg}");
            eprintln!("SKIPPED: {msg}");
            None
        }
    }
}

/// Acceptance 11: bad input gets a clear error and harms nothing.
#[test]
fn bad_input_gets_clear_errors_and_harms_nothing() {
    let s = setup("10s", "r1", 1, "1s");
    let client = s.cp.client();
    let good = queue_sh(&client, "r1", "echo kept", 1);
    wait_job(&client, &good.id, LONG).unwrap();

    // No pooled connections: a server that answers 413 before a large
    // body is all sent closes that connection.
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    // Runner API requests name a session: the runner's own (same host and
    // work dir), so they are not refused as another live runner.
    let work = std::path::absolute(&s.runner.work_dir).unwrap();
    let session = nuon_client::session_of_this_process(&work.display().to_string()).header(false);
    // Too large: 413, or (when the server closes before the client has
    // sent it all, a race HTTP/1.1 allows) a connection closed mid-request.
    let refused_as_too_large = |url: String, token: &str, content_type: &str| {
        let sent = rt().block_on(
            http.post(url)
                .bearer_auth(token)
                .header(nuon_core::wire::SESSION_HEADER, &session)
                .header("content-type", content_type)
                .body(vec![b'o'; 5 * 1024 * 1024])
                .send(),
        );
        match sent {
            Ok(resp) => assert_eq!(resp.status().as_u16(), 413),
            Err(e) => assert!(e.is_request(), "{e}"),
        }
    };
    let post_as = |url: String, token: &str, content_type: &str, body: Vec<u8>| {
        rt().block_on(async {
            let resp = http
                .post(url)
                .bearer_auth(token)
                .header(nuon_core::wire::SESSION_HEADER, &session)
                .header("content-type", content_type)
                .body(body)
                .send()
                .await
                .unwrap();
            let status = resp.status().as_u16();
            let v: serde_json::Value = resp.json().await.unwrap_or_default();
            (status, v)
        })
    };
    let post =
        |url: String, token: &str, body: Vec<u8>| post_as(url, token, "application/json", body);
    let jobs_url = format!("{}/v1/jobs", s.cp.control_url);
    let (st, v) = post(
        jobs_url.clone(),
        &s.cp.admin_token,
        b"{\"runner\": ".to_vec(),
    );
    assert_eq!(st, 400);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("line 1"),
        "{v}"
    );
    let (st, v) = post(
        jobs_url.clone(),
        &s.cp.admin_token,
        br#"{"runner":"r1","kind":"exec","payload":{},"bogus":1}"#.to_vec(),
    );
    assert_eq!(st, 400);
    assert!(
        v["error"]["message"].as_str().unwrap().contains("bogus"),
        "{v}"
    );
    refused_as_too_large(jobs_url.clone(), &s.cp.admin_token, "application/json");
    let (st, v) = post(jobs_url.clone(), "nope", b"{}".to_vec());
    assert_eq!(st, 401);
    assert_eq!(v["error"]["code"], "unauthorized");
    let (st, _) = post(
        format!("{}/v1/runner/claim", s.cp.runner_url),
        "rnr_x.y",
        b"{}".to_vec(),
    );
    assert_eq!(st, 401);
    let (st, _) = post(
        format!("{}/v1/runner/claim", s.cp.runner_url),
        &s.token,
        b"[1,2".to_vec(),
    );
    assert_eq!(st, 400);

    // Log batches: records only, checked before anything is stored.
    let logs_url =
        |query: &str| format!("{}/v1/runner/jobs/{}/logs{query}", s.cp.runner_url, good.id);
    let records = nuon_core::wire::LOG_RECORDS_CONTENT_TYPE;
    let (st, v) = post(logs_url("?attempt=1&first_seq=2"), &s.token, b"[]".to_vec());
    assert_eq!(st, 415, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains(records),
        "{v}"
    );
    let (st, v) = post_as(
        logs_url("?attempt=1&first_seq=2"),
        &s.token,
        records,
        b"o1 fine\nx1 bad stream\n".to_vec(),
    );
    assert_eq!(st, 400, "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("line 3") && msg.contains("stream code"),
        "{msg}"
    );
    let (st, v) = post_as(logs_url(""), &s.token, records, b"o1 a\n".to_vec());
    assert_eq!(st, 400, "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("query"),
        "{v}"
    );
    refused_as_too_large(logs_url("?attempt=1&first_seq=2"), &s.token, records);

    let missing = nuon_core::JobId::generate();
    assert_eq!(
        rt().block_on(client.get_job(&missing))
            .unwrap_err()
            .status(),
        Some(404)
    );
    let out = s.cp.nuon(&["jobs", "get", "job_not-an-id"]);
    assert_eq!(out.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid job id"));

    // A missing binary: the job fails, with the reason in its log.
    let out = s.cp.nuon(&[
        "jobs",
        "exec",
        "--runner",
        "r1",
        "--wait",
        "--",
        "no-such-binary-xyz",
        "arg",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value =
        serde_json::from_slice(&s.cp.nuon(&["jobs", "list", "--json"]).stdout).unwrap();
    let failed = &v["jobs"][0];
    assert_eq!(failed["status"], "failed");
    assert!(
        failed["reason"]
            .as_str()
            .unwrap()
            .contains("no-such-binary-xyz"),
        "{failed}"
    );
    let id = failed["id"].as_str().unwrap().parse().unwrap();
    let logs = all_logs(&client, &id).unwrap();
    assert!(
        logs.iter().any(|l| l.text.contains("no-such-binary-xyz")),
        "{logs:?}"
    );

    // The server is up and what it had is intact.
    wait_for("health", Duration::from_secs(5), || {
        rt().block_on(client.get_job(&good.id)).ok()
    })
    .unwrap();
    assert_eq!(all_logs(&client, &good.id).unwrap()[0].text, "kept");
}

/// Issue "The destroy side and the CLI's contracts", point 13: an empty
/// `NUON_TOKEN=` is named as such, not as a malformed header.
#[test]
fn an_empty_token_is_named() {
    let cp = ControlPlane::start("10s").unwrap();
    let out = nuon_tests::ours("nuon")
        .args(["apps", "list"])
        .env("NUON_API_URL", &cp.control_url)
        .env("NUON_TOKEN", "")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(64), "a usage error: {err}");
    assert!(err.contains("the API token is empty"), "{err}");
    assert!(!err.contains("malformed"), "{err}");
    // Polish: an empty list says so instead of printing a bare header.
    let out = cp.nuon(&["installs", "list"]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "(none)\n");
}

/// Point 9: a runner pointed at the Control API stops with a message that
/// names the Runner API's address, instead of retrying a 404 for ever; the
/// CLI pointed at the Runner API is told where the Control API is.
#[test]
fn each_api_names_the_other_when_reached_by_mistake() {
    let cp = ControlPlane::start("10s").unwrap();
    let token = cp.create_runner("lost").unwrap();
    let mut runner = Runner::start_with_api(
        &cp.control_url,
        RunnerOpts {
            token: &token,
            signing_key: &cp.signing_key,
            slots: 1,
            grace: "5s",
            work_dir: None,
        },
    )
    .unwrap();
    let code = runner.wait_exit(LONG).unwrap();
    let log = runner.log_text();
    assert_ne!(code, Some(0), "{log}");
    assert!(log.contains("not its Runner API"), "{log}");
    assert!(log.contains(&cp.runner_url), "{log}");

    let out = nuon_tests::ours("nuon")
        .args(["apps", "list", "--json"])
        .env("NUON_API_URL", &cp.runner_url)
        .env("NUON_TOKEN", &cp.admin_token)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(0));
    let err: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let message = err["error"].as_str().unwrap();
    assert_eq!(err["code"], "wrong_api", "{err}");
    assert!(message.contains("not its Control API"), "{message}");
    assert!(message.contains(&cp.control_url), "{message}");
}

/// A man in the middle of a plain-HTTP Runner API: forwards every request
/// to `upstream`, keeps the first claim answer that carried a job, and
/// once told to, answers every claim with it again.
struct ReplayProxy {
    url: String,
    replaying: std::sync::Arc<std::sync::atomic::AtomicBool>,
    saved: std::sync::Arc<std::sync::Mutex<Option<Vec<u8>>>>,
}

impl ReplayProxy {
    fn start(upstream: &str) -> ReplayProxy {
        use std::sync::atomic::Ordering;
        let upstream = upstream
            .trim_start_matches("http://")
            .trim_end_matches('/')
            .to_owned();
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let replaying = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let saved = std::sync::Arc::new(std::sync::Mutex::new(None::<Vec<u8>>));
        let (r, s) = (replaying.clone(), saved.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming().flatten() {
                let (upstream, r, s) = (upstream.clone(), r.clone(), s.clone());
                std::thread::spawn(move || {
                    let _ = Self::one(conn, &upstream, r.load(Ordering::SeqCst), &s);
                });
            }
        });
        ReplayProxy {
            url,
            replaying,
            saved,
        }
    }

    /// One request on `conn`, answered with `Connection: close`.
    fn one(
        mut conn: std::net::TcpStream,
        upstream: &str,
        replaying: bool,
        saved: &std::sync::Mutex<Option<Vec<u8>>>,
    ) -> std::io::Result<()> {
        use std::io::{Read, Write};
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        let head_end = loop {
            let n = conn.read(&mut chunk)?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let length: usize = head
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("content-length")
                    .then(|| v.trim().parse().ok())?
            })
            .unwrap_or(0);
        while buf.len() < head_end + length {
            let n = conn.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let is_claim = head.starts_with(&format!("POST {} ", nuon_core::wire::routes::CLAIM));
        if is_claim
            && replaying
            && let Some(answer) = saved.lock().unwrap().clone()
        {
            return conn.write_all(&answer);
        }
        // Forwarded, asking the upstream to close after its answer.
        let mut out: Vec<u8> = head
            .split("\r\n")
            .filter(|l| !l.to_ascii_lowercase().starts_with("connection:") && !l.is_empty())
            .flat_map(|l| [l.as_bytes(), b"\r\n"].concat())
            .collect();
        out.extend_from_slice(b"Connection: close\r\n\r\n");
        out.extend_from_slice(&buf[head_end..]);
        let mut up = std::net::TcpStream::connect(upstream)?;
        up.write_all(&out)?;
        let mut answer = Vec::new();
        up.read_to_end(&mut answer)?;
        if is_claim
            && answer.windows(8).any(|w| w == b"\"grant\":")
            && saved.lock().unwrap().is_none()
        {
            *saved.lock().unwrap() = Some(answer.clone());
        }
        conn.write_all(&answer)
    }
}

/// The runner's journal entries about `job` with `action`.
fn journal_has(work: &std::path::Path, action: &str, job: &nuon_core::JobId) -> usize {
    std::fs::read_to_string(work.join("audit.jsonl"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(&format!("\"action\":\"{action}\"")) && l.contains(job.as_str()))
        .count()
}

/// Attack 5, against the real binaries: a claim answer saved once and
/// served again by a man in the middle of a plain-HTTP link runs the job
/// once: the replay is refused in the same process and after a restart,
/// the runner's journal never shows `job.accepted` after `job.finished`,
/// and the run's end is never dropped for the replay's sake. A plain-HTTP
/// Runner API on another machine is refused before any request.
#[test]
fn a_replayed_claim_answer_runs_nothing() {
    let cp = ControlPlane::start("10s").unwrap();
    let token = cp.create_runner("r1").unwrap();
    let proxy = ReplayProxy::start(&cp.runner_url);
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let marker = tmp.path().join("ran");
    let client = cp.client();
    let job = queue_sh(
        &client,
        "r1",
        &format!("echo once >> '{}'", marker.display()),
        1,
    );
    let opts = || RunnerOpts {
        token: &token,
        signing_key: &cp.signing_key,
        slots: 1,
        grace: "2s",
        work_dir: Some(&work),
    };
    // The replay is served on the runner's next claim: a short long-poll
    // makes that come at once rather than when a parked claim (50 s by
    // default) returns.
    let quick = ["--claim-wait-ms", "2000"];
    let mut runner = Runner::start_with_args(&proxy.url, opts(), &quick).unwrap();
    let done = wait_job(&client, &job.id, LONG).unwrap();
    assert_eq!(done.status, JobStatus::Succeeded, "{done:?}");
    assert!(proxy.saved.lock().unwrap().is_some(), "the answer was kept");
    let runs = || {
        std::fs::read_to_string(&marker)
            .unwrap_or_default()
            .lines()
            .count()
    };
    assert_eq!(runs(), 1);

    proxy
        .replaying
        .store(true, std::sync::atomic::Ordering::SeqCst);
    wait_for("the replay refused", LONG, || {
        (journal_has(&work, "job.refused", &job.id) > 0).then_some(())
    })
    .unwrap();
    runner.kill9();
    let refused = journal_has(&work, "job.refused", &job.id);
    let mut runner =
        Runner::start_with_args(&proxy.url, opts(), &["--replace", quick[0], quick[1]]).unwrap();
    wait_for("the replay refused after a restart", LONG, || {
        (journal_has(&work, "job.refused", &job.id) > refused).then_some(())
    })
    .unwrap();
    runner.kill9();
    assert_eq!(runs(), 1, "the job ran again");
    assert_eq!(journal_has(&work, "job.accepted", &job.id), 1);
    let journal = std::fs::read_to_string(work.join("audit.jsonl")).unwrap();
    // Each replay is refused as an attempt run here to its end; the
    // refusal touches nothing of that attempt, so its end still counts.
    assert!(
        journal.contains("ran attempt 1 of this job to its end (succeeded"),
        "{journal}"
    );
    assert_eq!(journal_has(&work, "job.dropped", &job.id), 0, "{journal}");

    // Plain HTTP to another machine: refused before any request.
    let out = nuon_tests::ours("nuon-runner")
        .args(["run", "--api", "http://192.0.2.10:7401", "--token", &token])
        .args(["--signing-key", &cp.signing_key, "--work-dir"])
        .arg(tmp.path().join("other"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("plain HTTP to another machine") && err.contains("--allow-insecure-http"),
        "{err}"
    );
}

/// Attack 6 (in part): a Runner API request without the runner-session
/// header skipped "one token, one live runner". It is refused now, naming
/// the header; `RunnerClient` names its process by default.
#[test]
fn runner_requests_without_a_session_are_refused() {
    let cp = ControlPlane::start("10s").unwrap();
    let token = cp.create_runner("r1").unwrap();
    let url = format!(
        "{}{}",
        cp.runner_url.trim_end_matches('/'),
        nuon_core::wire::routes::CLAIM
    );
    let (status, body) = rt().block_on(async {
        let answer = reqwest::Client::new()
            .post(&url)
            .bearer_auth(&token)
            .json(&serde_json::json!({"kinds": ["exec"], "slots": 1, "wait_ms": 0}))
            .send()
            .await
            .unwrap();
        (
            answer.status().as_u16(),
            answer.json::<serde_json::Value>().await.unwrap(),
        )
    });
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "runner_session_required", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("nuon-runner-session"), "{message}");
    let claimed = rt()
        .block_on(runner_client(&cp, &token).claim(&ClaimRequest {
            kinds: vec!["exec".into()],
            slots: 1,
            wait_ms: 0,
            signing_key: None,
            telemetry: None,
            settings_version: None,
        }))
        .unwrap();
    assert!(claimed.jobs.is_empty());
}

/// A raw HTTP/1.1 request: status, lower-cased head, body.
fn http(
    base: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let addr = base.trim_start_matches("http://");
    crate::floods::request_from("127.0.0.1", addr, (method, path), headers, body)
}

/// The value of cookie `name` a response sets.
fn set_cookie<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines()
        .filter_map(|l| l.strip_prefix("set-cookie: "))
        .find_map(|c| c.split(';').next()?.strip_prefix(&format!("{name}=")))
        .filter(|v| !v.is_empty())
}

/// Login CSRF: a sign-in link somebody plants does not sign the victim in.
/// A `/login#token=` link no longer signs in by itself (no script fills
/// and sends the form); a one-time code's page shows the org and person
/// and signs in only when asked, from the browser that opened it, once.
#[test]
fn sign_in_links_cannot_be_planted() {
    let cp = ControlPlane::start("10s").unwrap();
    let client = cp.client();
    let org = rt().block_on(client.get_org()).unwrap();
    let base = cp.control_url.clone();

    // The fragment link is a plain sign-in form now.
    let (status, _, page) = http(&base, "GET", "/login", &[], "");
    assert_eq!(status, 200);
    assert!(
        !page.contains("<script"),
        "the sign-in page runs a script: {page}"
    );
    let (status, ..) = http(&base, "GET", "/assets/login.js", &[], "");
    assert_eq!(status, 404);

    // A code, as `nuon dev` and `nuon orgs sign-in-link` make them.
    let out = cp.nuon(&["orgs", "sign-in-link", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let link: nuon_core::wire::SignInCode = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        link.url.starts_with(&format!("{base}/login?code=")),
        "{}",
        link.url
    );
    assert!(link.expires_at_ms - nuon_core::now_ms() <= 10 * 60 * 1000 + 5000);
    let path = format!("/login?code={}", link.code);
    let (status, head, page) = http(&base, "GET", &path, &[], "");
    assert_eq!(status, 200);
    assert!(
        page.contains("Sign in?") && page.contains(&org.name),
        "{page}"
    );
    assert!(
        set_cookie(&head, "nuon_session").is_none(),
        "opening the link signed in"
    );
    let csrf = set_cookie(&head, "nuon_login")
        .expect("a form token")
        .to_owned();

    // Sent from another browser (no form cookie), as a planted form would
    // be: refused, and the code still works for its owner.
    let form = format!("csrf={csrf}&code={}", link.code);
    let urlencoded = ("Content-Type", "application/x-www-form-urlencoded");
    let (status, head, _) = http(&base, "POST", "/login/code", &[urlencoded], &form);
    assert_eq!(status, 401);
    assert!(set_cookie(&head, "nuon_session").is_none());

    // Asked, from the browser that opened it: signed in.
    let cookie = format!("nuon_login={csrf}");
    let with_cookie = [urlencoded, ("Cookie", cookie.as_str())];
    let (status, head, _) = http(&base, "POST", "/login/code", &with_cookie, &form);
    assert_eq!(status, 303, "{head}");
    let session = set_cookie(&head, "nuon_session")
        .expect("a session")
        .to_owned();
    let (status, _, page) = http(
        &base,
        "GET",
        "/",
        &[("Cookie", &format!("nuon_session={session}"))],
        "",
    );
    assert_eq!(status, 200, "{page}");

    // Once only, and a guessed code is nothing.
    let (status, _, page) = http(&base, "POST", "/login/code", &with_cookie, &form);
    assert_eq!(status, 401);
    assert!(page.contains("used already"), "{page}");
    let (_, _, page) = http(&base, "GET", &path, &[], "");
    assert!(
        page.contains("used already") && !page.contains("Sign in?"),
        "{page}"
    );
    let (_, _, page) = http(
        &base,
        "GET",
        "/login?code=00112233445566778899aabbccddeeff",
        &[],
        "",
    );
    assert!(page.contains("used already"), "{page}");

    // A code made by a token revoked since signs nobody in.
    let made = rt()
        .block_on(client.create_token("short", nuon_core::wire::TokenScope::Deployer))
        .unwrap();
    let theirs = nuon_client::ControlClient::new(
        nuon_client::ClientConfig::new(&cp.control_url, &made.secret).unwrap(),
    )
    .unwrap();
    let code = rt().block_on(theirs.create_sign_in_code()).unwrap();
    rt().block_on(client.revoke_token(made.token.id.as_str()))
        .unwrap();
    let (_, _, page) = http(&base, "GET", &format!("/login?code={}", code.code), &[], "");
    assert!(!page.contains("Sign in?"), "{page}");
}
