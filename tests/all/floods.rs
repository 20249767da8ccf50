//! Floods and slow clients against the real `nuon-ctl serve`: half-open
//! connections (slowloris), a connection cap, kept-alive connections left
//! idle.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use nuon_core::Transport;
use nuon_tests::ControlPlane;

/// Opens `n` connections to `addr`: every other one sends the start of a
/// request head and stops, the others send nothing.
fn half_open(addr: &str, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|i| {
            let mut s = TcpStream::connect(addr).unwrap();
            if i % 2 == 0 {
                s.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
                    .unwrap();
            }
            s
        })
        .collect()
}

/// Whether the server has closed `s` (end of stream or reset), looking for
/// at most `wait`.
fn closed(s: &mut TcpStream, wait: Duration) -> bool {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            // hyper answers a cut head with nothing, or a 408 or 400.
            Ok(_) => continue,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return false;
            }
            Err(_) => return true,
        }
    }
}

/// One request on a fresh connection, its status and how long it took.
fn healthz(addr: &str) -> (u16, Duration) {
    let t = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    let status = raw
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, t.elapsed())
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// How many sockets process `pid` holds: what a connection cap bounds (the
/// store's files, which its pool opens as it needs them, are not counted).
fn open_sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .is_ok_and(|l| l.to_string_lossy().starts_with("socket:"))
                })
                .count()
        })
        .unwrap_or(0)
}

/// Slowloris: 1,000 half-open connections to each port. A real request on
/// each port is answered during the attack, and every half-open connection
/// (silent, or with a head that never ends, or one trickling a byte at a
/// time) is closed within the header timeout.
#[test]
fn half_open_connections_are_closed_within_the_header_timeout() {
    let cp = ControlPlane::start_with("10s", &["--header-timeout", "2s", "--idle-timeout", "3s"])
        .unwrap();
    let ports = [
        cp.control_url.trim_start_matches("http://").to_owned(),
        cp.runner_url.trim_start_matches("http://").to_owned(),
    ];
    let fds_before = open_fds(cp.pid());
    let opened = Instant::now();
    let mut attack: Vec<Vec<TcpStream>> = ports.iter().map(|p| half_open(p, 1000)).collect();
    let opening = opened.elapsed();
    // A client that keeps sending a header a byte every 200 ms is not
    // busy: the timeout counts from the connection's start.
    let trickle_addr = ports[0].clone();
    let trickler = std::thread::spawn(move || {
        let mut s = TcpStream::connect(&trickle_addr).unwrap();
        s.write_all(b"GET /healthz HTTP/1.1\r\nX-Slow: ").unwrap();
        let start = Instant::now();
        while s.write_all(b"a").is_ok() && start.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(200));
        }
        start.elapsed()
    });

    // During the attack, both listeners answer.
    for port in &ports {
        let (status, took) = healthz(port);
        assert_eq!(status, 200, "{port} did not answer during the attack");
        assert!(
            took < Duration::from_secs(1),
            "{port} took {took:?} during the attack"
        );
    }
    let held = open_fds(cp.pid());
    assert!(
        held >= fds_before + 1500,
        "the control plane holds {held} descriptors (had {fds_before}): the attack did not reach it"
    );

    // Every half-open connection is closed by 2 s after it opened, plus
    // the time it took to open them all and a second of slack.
    let deadline = opened + opening + Duration::from_secs(3);
    let mut still_open = 0;
    for s in attack.iter_mut().flatten() {
        let left = deadline.saturating_duration_since(Instant::now());
        if !closed(s, left.max(Duration::from_millis(10))) {
            still_open += 1;
        }
    }
    assert_eq!(
        still_open,
        0,
        "{still_open} of 2,000 half-open connections were still open {:?} after the attack began",
        opened.elapsed()
    );
    let trickled = trickler.join().unwrap();
    assert!(
        trickled < Duration::from_secs(4),
        "a connection trickling its head a byte at a time was held {trickled:?}"
    );
    let after = open_fds(cp.pid());
    assert!(
        after < fds_before + 50,
        "the control plane still holds {after} descriptors (had {fds_before} before the attack)"
    );
    eprintln!(
        "slowloris: 2,000 half-open connections opened in {opening:?}, all closed within {:?}; descriptors {fds_before} -> {held} -> {after}",
        deadline.saturating_duration_since(opened)
    );
}

/// A kept-alive connection is closed after the idle timeout, and not while
/// a request (a runner's parked claim) is in flight on it.
#[test]
fn idle_connections_close_but_requests_in_flight_do_not() {
    let cp = ControlPlane::start_with("10s", &["--header-timeout", "1s", "--idle-timeout", "2s"])
        .unwrap();
    let addr = cp.control_url.trim_start_matches("http://").to_owned();
    let mut s = TcpStream::connect(&addr).unwrap();
    write!(s, "GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let mut buf = [0u8; 512];
    let n = s.read(&mut buf).unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let answered = Instant::now();
    // Past the header timeout, within the idle one: still open, and usable.
    std::thread::sleep(Duration::from_millis(1300));
    write!(s, "GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n").unwrap();
    let n = s.read(&mut buf).unwrap();
    assert!(
        String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"),
        "a kept-alive connection was closed before its idle timeout"
    );
    let answered_again = Instant::now();
    assert!(closed(&mut s, Duration::from_secs(4)));
    let idle = answered_again.elapsed();
    assert!(
        (Duration::from_millis(1800)..Duration::from_millis(3500)).contains(&idle),
        "closed after {idle:?} idle (the idle timeout is 2s); first answer {:?} ago",
        answered.elapsed()
    );

    // A runner's claim parked longer than both timeouts is answered, not
    // cut (the server holds a claim for at most a share of the lease, and
    // ends it up to a tenth early: about 4 s here).
    let token = cp.create_runner("parked").unwrap();
    let client = runner_client(&cp, &token);
    let t = Instant::now();
    let got = nuon_tests::rt()
        .block_on(client.claim(&claim_request("exec", 1, 5000, None)))
        .expect("a parked claim longer than the idle timeout was cut");
    assert!(got.jobs.is_empty());
    assert!(t.elapsed() >= Duration::from_secs(3), "{:?}", t.elapsed());
}

/// At `--max-connections`, a new connection closes the one idle longest:
/// a flood of silent connections cannot lock a real client out, and the
/// control plane holds no more than the cap.
#[test]
fn at_the_connection_cap_the_idle_make_room_for_a_real_request() {
    let cp = ControlPlane::start_with(
        "10s",
        // A header timeout far past the wait below: the flood is closed
        // by eviction, not by the timeout.
        &["--header-timeout", "120s", "--max-connections", "100"],
    )
    .unwrap();
    let addr = cp.control_url.trim_start_matches("http://").to_owned();
    let fds_before = open_sockets(cp.pid());
    let mut flood = half_open(&addr, 400);
    let (status, took) = healthz(&addr);
    assert_eq!(status, 200, "a real request was locked out at the cap");
    assert!(took < Duration::from_secs(1), "{took:?}");
    // The server takes in the whole flood, each newcomer closing the one
    // idle longest (its task closes it when next it runs: on a busy
    // machine, a while later); then it holds no more than the cap.
    let deadline = Instant::now() + Duration::from_secs(20);
    let held = loop {
        let held = open_sockets(cp.pid());
        if held <= fds_before + 100 + 5 || Instant::now() > deadline {
            break held;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        held <= fds_before + 100 + 5,
        "the control plane holds {held} sockets at a cap of 100 (had {fds_before})"
    );
    // The oldest were closed for the newest: at least 300 are gone.
    let gone = flood
        .iter_mut()
        .map(|s| closed(s, Duration::from_millis(20)))
        .filter(|&c| c)
        .count();
    assert!(
        gone >= 300,
        "only {gone} of 400 flooding connections were closed at a cap of 100"
    );
}

/// A Runner API client of the runner whose token is `token`.
fn runner_client(cp: &ControlPlane, token: &str) -> nuon_client::RunnerClient {
    nuon_client::RunnerClient::new(nuon_client::ClientConfig::new(&cp.runner_url, token).unwrap())
        .unwrap()
}

/// A claim of `slots` jobs of `kind`, held up to `wait_ms`.
fn claim_request(
    kind: &str,
    slots: u32,
    wait_ms: u64,
    telemetry: Option<nuon_core::wire::RunnerTelemetry>,
) -> nuon_core::wire::ClaimRequest {
    nuon_core::wire::ClaimRequest {
        kinds: vec![kind.into()],
        slots,
        wait_ms,
        signing_key: None,
        telemetry,
        settings_version: None,
    }
}

/// One HTTP/1.1 request to `to` from the loopback address `from` (any of
/// 127.0.0.0/8): status, head and body.
pub(crate) fn request_from(
    from: &str,
    to: &str,
    (method, path): (&str, &str),
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String, String) {
    let mut s = nuon_tests::rt().block_on(async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(format!("{from}:0").parse().unwrap()).unwrap();
        socket
            .connect(to.parse().unwrap())
            .await
            .unwrap()
            .into_std()
            .unwrap()
    });
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {to}\r\nConnection: close\r\n");
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
    s.write_all(req.as_bytes()).unwrap();
    let mut raw = String::new();
    let _ = s.read_to_string(&mut raw);
    let (head, body) = raw.split_once("\r\n\r\n").unwrap_or((&raw, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, head.to_ascii_lowercase(), body.to_owned())
}

fn retry_after(head: &str) -> Option<u64> {
    head.lines()
        .find_map(|l| l.strip_prefix("retry-after: "))
        .and_then(|v| v.trim().parse().ok())
}

/// Failed token checks and sign-ins are throttled per address and per
/// account (the id before a token's dot): past the burst they are answered
/// 429 with Retry-After before any check, on the Control API, the Runner
/// API and the dashboard's sign-in form; a token shown good still works
/// from a throttled address; after Retry-After a try is checked again.
#[test]
fn failed_sign_ins_are_answered_429_with_retry_after() {
    let cp = ControlPlane::start_with(
        "10s",
        &[
            "--auth-failure-burst",
            "4",
            "--auth-failures-per-minute",
            "30",
        ],
    )
    .unwrap();
    let control = cp.control_url.trim_start_matches("http://").to_owned();
    let runner = cp.runner_url.trim_start_matches("http://").to_owned();
    let admin = format!("Bearer {}", cp.admin_token);
    let apps = ("GET", "/v1/apps");
    // The admin token works first from the address under attack.
    let (status, ..) = request_from(
        "127.0.0.2",
        &control,
        apps,
        &[("Authorization", &admin)],
        "",
    );
    assert_eq!(status, 200);

    // 300 guesses from one address: 4 are checked, the rest are 429.
    let started = Instant::now();
    let mut answers = std::collections::BTreeMap::new();
    let mut last_head = String::new();
    for i in 0..300 {
        let guess = format!("Bearer guess{i}.{i:064}");
        let (status, head, body) = request_from(
            "127.0.0.2",
            &control,
            apps,
            &[("Authorization", &guess)],
            "",
        );
        *answers.entry(status).or_insert(0) += 1;
        if status == 429 {
            assert!(body.contains("too_many_attempts"), "{body}");
            last_head = head;
        }
    }
    let guessing = started.elapsed();
    assert_eq!(answers.get(&401), Some(&4), "{answers:?}");
    assert_eq!(answers.get(&429), Some(&296), "{answers:?}");
    let wait = retry_after(&last_head).expect("a 429 without Retry-After");
    assert!((1..=3).contains(&wait), "Retry-After: {wait}");
    // The Runner API and the dashboard's form are throttled for it too.
    let (status, head, _) = request_from(
        "127.0.0.2",
        &runner,
        ("POST", "/v1/runner/claim"),
        &[
            ("Authorization", "Bearer r.x"),
            ("Content-Type", "application/json"),
        ],
        "{}",
    );
    assert_eq!(status, 429, "{head}");
    let (_, head, _) = request_from("127.0.0.2", &control, ("GET", "/login"), &[], "");
    let csrf = head
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: "))
        .and_then(|c| c.split(';').next())
        .unwrap()
        .to_owned();
    let value = csrf.split_once('=').unwrap().1.to_owned();
    let (status, head, body) = request_from(
        "127.0.0.2",
        &control,
        ("POST", "/login"),
        &[
            ("Cookie", &csrf),
            ("Content-Type", "application/x-www-form-urlencoded"),
        ],
        &format!("csrf={value}&token=nope.nope"),
    );
    assert_eq!(status, 429, "{head}");
    assert!(retry_after(&head).is_some(), "{head}");
    assert!(body.contains("too many failed sign-ins"), "{body}");
    // A token shown good still works from the throttled address; another
    // address is not throttled.
    let (status, ..) = request_from(
        "127.0.0.2",
        &control,
        apps,
        &[("Authorization", &admin)],
        "",
    );
    assert_eq!(status, 200, "a token shown good was throttled");
    let (status, ..) = request_from(
        "127.0.0.3",
        &control,
        apps,
        &[("Authorization", "Bearer other.guess")],
        "",
    );
    assert_eq!(status, 401);

    // One account guessed from many addresses: held back after half the burst.
    let mut account = Vec::new();
    for i in 0..4 {
        let (status, ..) = request_from(
            &format!("127.0.1.{}", 10 + i),
            &control,
            apps,
            &[("Authorization", &format!("Bearer tok_victim.{i:064}"))],
            "",
        );
        account.push(status);
    }
    assert_eq!(account, [401, 401, 429, 429], "guesses on one account");

    // After Retry-After, the address is checked again.
    std::thread::sleep(Duration::from_secs(wait) + Duration::from_millis(100));
    let (status, ..) = request_from(
        "127.0.0.2",
        &control,
        apps,
        &[("Authorization", "Bearer late.guess")],
        "",
    );
    assert_eq!(status, 401, "still throttled after Retry-After");
    eprintln!("sign-in throttle: 300 guesses in {guessing:?}: {answers:?}; Retry-After {wait}s");
}

/// The bytes of every file under `dir`.
fn disk_use(dir: &std::path::Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let meta = entry.metadata().unwrap();
        total += if meta.is_dir() {
            disk_use(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

/// A log flood: a runner token shipping 100 MB for one job grows the
/// control plane's data dir by about the per-job quota, not by 100 MB; the
/// job's log ends saying it was truncated. A real job printing 30 MB under
/// a real runner finishes as it should, its log cut the same way; the
/// runner's quota per hour then cuts the next job's log, saying which
/// quota did.
#[test]
fn a_log_flood_is_cut_at_its_quota_and_the_job_goes_on() {
    use nuon_core::wire::{Completion, LogBatch, LogRecords, LogStream};
    use nuon_core::{JobResult, JobStatus};

    let cp = ControlPlane::start_with(
        "30s",
        &[
            "--log-quota-per-job",
            "2MiB",
            "--log-quota-per-runner",
            "3MiB",
        ],
    )
    .unwrap();
    let client = cp.client();
    let attacker = cp.create_runner("flood").unwrap();
    let job = crate::queue_sh(&client, "flood", "true", 1);
    let runner = runner_client(&cp, &attacker);
    let before = disk_use(&cp.data_dir);
    let rt = nuon_tests::rt();
    let claimed = rt
        .block_on(runner.claim(&claim_request("exec", 1, 5000, None)))
        .unwrap();
    let attempt = claimed.jobs[0].attempt;
    let line = "x".repeat(1000);
    let mut seq = 1;
    let started = Instant::now();
    for _ in 0..100 {
        let mut lines = LogRecords::new();
        for _ in 0..1000 {
            lines.push(LogStream::Stdout, 1, &line).unwrap();
        }
        let batch = LogBatch {
            attempt,
            first_seq: seq,
            lines,
        };
        let ack = rt.block_on(runner.append_logs(&job.id, &batch)).unwrap();
        seq += 1000;
        assert_eq!(ack.acked_seq, seq - 1, "a flood's lines are acknowledged");
    }
    let shipping = started.elapsed();
    rt.block_on(runner.complete(
        &job.id,
        &Completion {
            attempt,
            logs: None,
            log_lines: seq - 1,
            result: JobResult::failed("the flood is over"),
        },
    ))
    .unwrap();
    let grown = disk_use(&cp.data_dir).saturating_sub(before);
    assert!(
        grown < 6 << 20,
        "100 MB shipped against a 2 MiB quota grew the data dir by {grown} bytes"
    );
    let logs = nuon_tests::all_logs(&client, &job.id).unwrap();
    let last = logs.last().unwrap();
    assert!(last.text.contains("log truncated"), "{}", last.text);
    assert!(logs.len() < 2200, "{} lines kept", logs.len());

    // A real job printing 30 MB of lines finishes under a real runner.
    let token = cp.create_runner("real").unwrap();
    let _real = nuon_tests::Runner::start(
        &cp,
        nuon_tests::RunnerOpts {
            token: &token,
            signing_key: &cp.signing_key,
            slots: 1,
            grace: "5s",
            work_dir: None,
        },
    )
    .unwrap();
    let chatty = "yes 0123456789012345678901234567890123456789012345678901234567890123456789 | head -c 30000000; echo done >&2";
    for (n, quota) in [(1, "--log-quota-per-job"), (2, "--log-quota-per-runner")] {
        let job = crate::queue_sh(&client, "real", chatty, 1);
        let info = nuon_tests::wait_job(&client, &job.id, crate::LONG).unwrap();
        assert_eq!(info.status, JobStatus::Succeeded, "job {n}: {info:?}");
        let logs = nuon_tests::all_logs(&client, &job.id).unwrap();
        let last = logs.last().unwrap();
        assert!(
            last.text.contains("log truncated") && last.text.contains(quota),
            "job {n}'s last line: {}",
            last.text
        );
        let kept: usize = logs.iter().map(|l| l.text.len()).sum();
        assert!(kept < 2 << 20, "job {n} kept {kept} bytes");
    }
    eprintln!(
        "log flood: 100 MB shipped in {shipping:?}; the data dir grew by {grown} bytes (quota 2 MiB)"
    );
}

/// Telemetry that flips a break-glass role on and off with every claim (200
/// times, as fast as the Runner API answers) sets off the burst of audit
/// entries and role-enabled / role-disabled workflows, not 200 of each;
/// the change shown last is not lost, only held back.
#[test]
fn flapping_telemetry_sets_off_a_bounded_number_of_audit_entries_and_workflows() {
    use nuon_core::wire::RunnerTelemetry;

    let cp = ControlPlane::start("30s").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("app");
    crate::deploy::write_files(
        &app,
        &[
            crate::deploy::METADATA,
            (
                "break_glass.toml",
                "[[role]]\ntype = \"custom\"\nname = \"{{ .nuon.install.name }}-bg\"\ndescription = \"emergencies\"\n",
            ),
            (
                "actions/on.toml",
                "name = \"on\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"role-enabled\"\n\n[[steps]]\nname = \"tell\"\ncommand = \"echo on\"\n",
            ),
            (
                "actions/off.toml",
                "name = \"off\"\ntimeout = \"1m\"\n\n[[triggers]]\ntype = \"role-disabled\"\n\n[[steps]]\nname = \"tell\"\ncommand = \"echo off\"\n",
            ),
        ],
    );
    crate::deploy::ok(cp.nuon(&["apps", "create", "app"]));
    crate::deploy::ok(cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]));
    let created = crate::deploy::ok(cp.nuon(&[
        "installs", "create", "--app", "app", "--name", "demo", "--json",
    ]));
    let v: serde_json::Value = serde_json::from_str(&created).unwrap();
    let token = v["runner_token"].as_str().unwrap();
    let runner = runner_client(&cp, token);
    let rt = nuon_tests::rt();
    let started = Instant::now();
    for i in 0..200 {
        let telemetry = RunnerTelemetry {
            break_glass: if i % 2 == 0 {
                vec!["demo-bg".into()]
            } else {
                vec![]
            },
            ..Default::default()
        };
        rt.block_on(runner.claim(&claim_request("noop", 0, 0, Some(telemetry))))
            .unwrap();
    }
    let flapping = started.elapsed();
    let client = cp.client();
    let audit = rt.block_on(client.list_audit(0, 1000, None)).unwrap();
    let entries = audit
        .entries
        .iter()
        .filter(|e| e.action == "breakGlass")
        .count();
    let workflows = rt
        .block_on(client.list_workflows("demo"))
        .unwrap()
        .workflows
        .into_iter()
        .filter(|w| matches!(w.trigger.as_deref(), Some("role-enabled" | "role-disabled")))
        .count();
    assert!(
        (1..=12).contains(&entries),
        "200 flips of break-glass made {entries} audit entries"
    );
    assert!(
        (1..=12).contains(&workflows),
        "200 flips of break-glass started {workflows} workflows"
    );
    eprintln!(
        "flapping telemetry: 200 claims in {flapping:?} made {entries} audit entries and {workflows} workflows"
    );
}
