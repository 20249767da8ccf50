//! A hostile tenant, as an attacker tried it against the real binaries:
//! a template bomb (at validate, and one that only goes off with an
//! install's inputs, at render), a diff bomb on the dashboard, and an
//! ad-hoc shell on an install's runner. Each is refused, and the control
//! plane keeps answering meanwhile. An install's secrets glued, encoded and
//! re-cased by a template stay hidden from read-only views and at rest.

use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nuon_core::wire::CreateJob;
use nuon_tests::{ControlPlane, Runner, RunnerOpts, rt, wait_job};

use crate::deploy::{METADATA, ok, text, walk, write_files as write_app};

/// One plain HTTP/1.1 GET on a fresh connection: status and body.
fn get(base: &str, path: &str, cookie: Option<&str>) -> (u16, String, Vec<String>) {
    let addr = base.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let cookie = cookie.map_or(String::new(), |c| format!("Cookie: {c}\r\n"));
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{cookie}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    parse_answer(&raw)
}

fn parse_answer(raw: &[u8]) -> (u16, String, Vec<String>) {
    let text = String::from_utf8_lossy(raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let cookies = head
        .lines()
        .filter_map(|l| {
            l.strip_prefix("set-cookie: ")
                .or_else(|| l.strip_prefix("Set-Cookie: "))
        })
        .map(|c| c.split(';').next().unwrap_or("").to_owned())
        .collect();
    (status, body.to_owned(), cookies)
}

/// Watches `/healthz` every 20 ms on a thread of its own until dropped:
/// the slowest answer it saw, and how many did not answer 200.
struct HealthWatch {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<(Duration, usize, usize)>>,
}

impl HealthWatch {
    fn start(base: &str) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let (base, flag) = (base.to_owned(), stop.clone());
        let thread = std::thread::spawn(move || {
            let (mut slowest, mut bad, mut n) = (Duration::ZERO, 0, 0);
            while !flag.load(Ordering::Relaxed) {
                let t = Instant::now();
                let (status, ..) = get(&base, "/healthz", None);
                slowest = slowest.max(t.elapsed());
                n += 1;
                if status != 200 {
                    bad += 1;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (slowest, bad, n)
        });
        HealthWatch {
            stop,
            thread: Some(thread),
        }
    }

    /// The slowest answer, the failures and the count.
    fn finish(mut self) -> (Duration, usize, usize) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// The control plane's peak resident memory, in MiB.
fn peak_rss_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

const WEB: (&str, &str) = (
    "components/web.toml",
    "name = \"web\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"tf\"\n",
);
const TF: (&str, &str) = ("tf/main.tf", "output \"ok\" {\n  value = true\n}\n");

fn provision_role(name: &str) -> String {
    format!(
        "type = \"provision\"\nname = \"{name}\"\ndescription = \"Creates the install\"\n\n[[policies]]\nmanaged_policy_name = \"AdministratorAccess\"\n"
    )
}

/// The template bomb: as written, it is refused at validate with its
/// place and the budget; one that only goes off with the install's input
/// is refused when the stack is made. Meanwhile `/healthz` answers.
#[test]
fn a_template_bomb_is_refused_and_the_control_plane_keeps_answering() {
    let cp = ControlPlane::start("3s").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("bomb");
    let bomb = "{{ .nuon.install.id }}{{ range until 1000000 }}{{ range until 1000000 }}{{ end }}{{ end }}-x";
    write_app(
        &app,
        &[
            METADATA,
            WEB,
            TF,
            ("permissions/provision.toml", &provision_role(bomb)),
        ],
    );
    let started = Instant::now();
    let out = cp.nuon(&["apps", "validate", app.to_str().unwrap()]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("permissions/provision.toml:2:") && said.contains("work budget exhausted"),
        "{said}"
    );
    ok(cp.nuon(&["apps", "create", "app"]));
    let watch = HealthWatch::start(&cp.control_url);
    let out = cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("work budget exhausted"),
        "{}",
        text(&out)
    );
    let refused_in = started.elapsed();

    // A bomb that needs the install's input to go off passes validate.
    let late = "{{ .nuon.install.id }}{{ range until (atoi .nuon.install.inputs.n) }}{{ range until (atoi .nuon.install.inputs.n) }}{{ end }}{{ end }}-x";
    write_app(
        &app,
        &[
            (
                "inputs.toml",
                "[[input]]\nname = \"n\"\ndescription = \"how many\"\ndefault = \"3\"\n",
            ),
            ("permissions/provision.toml", &provision_role(late)),
        ],
    );
    ok(cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]));
    ok(cp.nuon(&[
        "installs",
        "create",
        "--app",
        "app",
        "--name",
        "demo",
        "--input",
        "n=1000000",
    ]));
    // Two at once, as the attacker sent them.
    let stacks: Vec<_> = (0..2)
        .map(|_| {
            let (url, token) = (cp.control_url.clone(), cp.admin_token.clone());
            std::thread::spawn(move || {
                nuon_tests::ours("nuon")
                    .args(["installs", "stack", "demo", "--format", "vm", "--json"])
                    .env("NUON_API_URL", url)
                    .env("NUON_TOKEN", token)
                    .output()
                    .unwrap()
            })
        })
        .collect();
    for s in stacks {
        let out = s.join().unwrap();
        assert!(!out.status.success(), "{}", text(&out));
        assert!(
            text(&out).contains("work budget exhausted")
                || text(&out).contains("time budget exhausted"),
            "{}",
            text(&out)
        );
    }
    // Another org is served meanwhile.
    let other = cp.create_org("other").unwrap();
    let c = cp.client_with(&other);
    rt().block_on(c.list_apps()).unwrap();
    let (slowest, bad, n) = watch.finish();
    let rss = peak_rss_mib(cp.pid());
    eprintln!(
        "template bomb: refused at sync in {refused_in:?}; /healthz {n} times, slowest {slowest:?}; control plane peak RSS {rss} MiB"
    );
    assert_eq!(bad, 0, "/healthz failed while the bomb was refused");
    assert!(
        slowest < Duration::from_millis(500),
        "/healthz took {slowest:?}"
    );
    assert!(rss < 500, "peak RSS {rss} MiB");
}

/// Signs in to the dashboard as a browser would, without one: the
/// session cookie.
fn dashboard_session(cp: &ControlPlane) -> String {
    let (status, page, cookies) = get(&cp.control_url, "/login", None);
    assert_eq!(status, 200, "{page}");
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("the form's csrf")
        .to_owned();
    let login_cookie = cookies.join("; ");
    let form = format!("csrf={csrf}&token={}", cp.admin_token);
    let addr = cp.control_url.trim_start_matches("http://");
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "POST /login HTTP/1.1\r\nHost: {addr}\r\nCookie: {login_cookie}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{form}",
        form.len()
    )
    .unwrap();
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let (status, body, cookies) = parse_answer(&raw);
    assert_eq!(status, 303, "{body}");
    cookies
        .into_iter()
        .filter(|c| !c.ends_with('='))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The diff bomb: two versions whose inputs.toml has 45,000 short lines,
/// every one changed. The page says the file was not diffed line by line,
/// at once, and the control plane's memory stays small.
#[test]
fn a_diff_bomb_is_refused_and_the_control_plane_keeps_answering() {
    let cp = ControlPlane::start("3s").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("notes");
    ok(cp.nuon(&["apps", "create", "app"]));
    for v in ["a", "b"] {
        // A file of the config: short comment lines, every one changed.
        let notes: String = (0..45_000).map(|i| format!("# {v}{i}\n")).collect();
        write_app(&app, &[METADATA, WEB, TF, ("inputs.toml", &notes)]);
        ok(cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]));
    }
    let apps: serde_json::Value =
        serde_json::from_str(&ok(cp.nuon(&["apps", "list", "--json"]))).unwrap();
    let id = apps
        .as_array()
        .and_then(|a| a.first())
        .or_else(|| apps["apps"].as_array().and_then(|a| a.first()))
        .and_then(|a| a["id"].as_str())
        .expect("the app's id")
        .to_owned();
    let session = dashboard_session(&cp);
    let watch = HealthWatch::start(&cp.control_url);
    let t = Instant::now();
    let (status, page, _) = get(
        &cp.control_url,
        &format!("/apps/{id}/diff?from=1&to=2"),
        Some(&session),
    );
    let took = t.elapsed();
    let (slowest, bad, n) = watch.finish();
    let rss = peak_rss_mib(cp.pid());
    eprintln!(
        "diff bomb: the page in {took:?}; /healthz {n} times, slowest {slowest:?}; control plane peak RSS {rss} MiB"
    );
    assert_eq!(status, 200, "{page}");
    assert!(page.contains("inputs.toml"), "{page}");
    assert!(page.contains("not shown line by line"), "{page}");
    assert_eq!(bad, 0);
    assert!(
        slowest < Duration::from_millis(500),
        "/healthz took {slowest:?}"
    );
    assert!(rss < 500, "peak RSS {rss} MiB");
}

/// An ad-hoc `exec` job for an install's runner is a debug command: the
/// runner's `--debug-commands off` (its default) refuses it, and any
/// other ad-hoc kind is refused by the API. A generic runner still runs
/// what it is given.
#[test]
fn an_ad_hoc_shell_on_an_install_runner_goes_through_the_customers_policy() {
    let cp = ControlPlane::start("3s").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let app = dir.path().join("app");
    write_app(&app, &[METADATA, WEB, TF]);
    ok(cp.nuon(&["apps", "create", "app"]));
    ok(cp.nuon(&["apps", "sync", app.to_str().unwrap(), "--app", "app"]));
    let created: serde_json::Value = serde_json::from_str(&ok(cp.nuon(&[
        "installs", "create", "--app", "app", "--name", "demo", "--json",
    ])))
    .unwrap();
    let token = created["runner_token"].as_str().unwrap().to_owned();
    let _runner = Runner::start(
        &cp,
        RunnerOpts {
            token: &token,
            signing_key: &cp.signing_key,
            slots: 1,
            grace: "2s",
            work_dir: None,
        },
    )
    .unwrap();
    let c = cp.client();
    let exec = |runner: &str, kind: &str| {
        rt().block_on(c.create_job(&CreateJob {
            runner: runner.into(),
            kind: kind.into(),
            payload: serde_json::json!({"command": "sh", "args": ["-c", "id"]}),
            timeout_secs: Some(60),
            max_attempts: Some(1),
            sandbox: None,
        }))
    };
    let job = exec("demo", "exec").unwrap();
    assert_eq!(job.kind, "debug", "{job:?}");
    let done = wait_job(&c, &job.id, Duration::from_secs(60)).unwrap();
    assert_eq!(done.status, nuon_core::JobStatus::Failed, "{done:?}");
    let reason = done.reason.unwrap_or_default();
    assert!(reason.contains("--debug-commands off"), "{reason}");
    let logs = nuon_tests::all_logs(&c, &job.id).unwrap();
    assert!(
        !logs.iter().any(|l| l.text.contains("uid=")),
        "the command ran: {logs:?}"
    );
    // Another kind, made by no workflow, is refused before any job.
    let e = exec("demo", "terraform").unwrap_err().to_string();
    assert!(
        e.contains("install's runner") && e.contains("nuon installs debug"),
        "{e}"
    );

    // A generic runner runs the same command.
    let generic = cp.create_runner("box").unwrap();
    let _g = Runner::start(
        &cp,
        RunnerOpts {
            token: &generic,
            signing_key: &cp.signing_key,
            slots: 1,
            grace: "2s",
            work_dir: None,
        },
    )
    .unwrap();
    let job = exec("box", "exec").unwrap();
    assert_eq!(job.kind, "exec");
    let done = wait_job(&c, &job.id, Duration::from_secs(60)).unwrap();
    assert_eq!(done.status, nuon_core::JobStatus::Succeeded, "{done:?}");
}

/// Every form of `value` one template function (or a shell's `printf`)
/// away: upper and lower case, base64 in both alphabets (less the last
/// characters, whose bits depend on what follows), hex in both cases and
/// percent-encoding.
pub(crate) fn forms_of(what: &str, value: &str) -> Vec<(String, String)> {
    use base64::Engine as _;
    let b64 = |e: &base64::engine::GeneralPurpose| {
        let t = e.encode(value);
        t[..t.len() - 3].to_owned()
    };
    let url: String = value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect();
    let hex: String = value.bytes().map(|b| format!("{b:02x}")).collect();
    [
        ("as it is", value.to_owned()),
        ("upper case", value.to_uppercase()),
        ("lower case", value.to_lowercase()),
        ("base64", b64(&base64::engine::general_purpose::STANDARD)),
        (
            "base64 (URL)",
            b64(&base64::engine::general_purpose::URL_SAFE),
        ),
        ("hex", hex.clone()),
        ("upper-case hex", hex.to_uppercase()),
        ("percent-encoded", url),
    ]
    .into_iter()
    .map(|(form, v)| (format!("{what} ({form})"), v))
    .collect()
}

/// Each of `needles` found in `hay`, named with `place`.
fn found_in(needles: &[(String, String)], place: &str, hay: &[u8]) -> Vec<String> {
    needles
        .iter()
        .filter(|(_, v)| hay.windows(v.len()).any(|w| w == v.as_bytes()))
        .map(|(what, _)| format!("{what} in {place}"))
        .collect()
}

const SENSITIVE_INPUT: &str = "SensInput-7a3b9c2d";
const SECRET: &str = "Secret/Val+ue=5e8f1a4b";

/// Attack 3: an action's step glues, encodes and re-cases an install's
/// sensitive input and secret. What a read-only token sees of the job, its
/// workflow and its log shows none of their forms, and neither does any
/// file of the control plane's data directory (its database and WAL).
#[test]
fn secrets_in_every_form_stay_out_of_read_only_views_and_the_data_dir() {
    let leak = r#"name = "leak"
timeout = "1m"

[[triggers]]
type = "manual"

[[steps]]
name = "say"
command = '''echo K{{ .nuon.install.inputs.api_key }}Z X{{ .nuon.secrets.db_password }}Y {{ .nuon.secrets.db_password | b64enc }} {{ .nuon.secrets.db_password | upper }} {{ .nuon.install.inputs.api_key | b64enc }} {{ printf "%x" .nuon.secrets.db_password }} {{ .nuon.secrets.db_password | urlquery }}; echo "{{ .nuon.secrets.db_password | wrap 6 }}"; printf '%s' '{{ .nuon.install.inputs.api_key }}' | od -An -tx1 | tr -d ' \n' | tr a-f A-F; echo'''
"#;
    let m = crate::deploy::Manual::start_full(
        &[
            METADATA,
            (
                "inputs.toml",
                "[[input]]\nname = \"api_key\"\ndescription = \"the vendor's API key\"\nsensitive = true\n",
            ),
            (
                "secrets.toml",
                "[[secret]]\nname = \"db_password\"\ndescription = \"the database's password\"\n",
            ),
            ("actions/leak.toml", leak),
        ],
        None,
        |_| {},
        &[
            "--input",
            &format!("api_key={SENSITIVE_INPUT}"),
            "--secret",
            &format!("db_password={SECRET}"),
        ],
    );
    let ran: serde_json::Value = serde_json::from_str(&ok(m.cp.nuon(&[
        "installs",
        "run-action",
        "demo",
        "leak",
        "--wait",
        "--json",
    ])))
    .unwrap();
    assert_eq!(ran["status"], "succeeded", "{ran:#}");
    let wf = ran["id"].as_str().unwrap().to_owned();
    let job: nuon_core::JobId = ran["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|s| s["job_id"].as_str())
        .expect("the step's job")
        .parse()
        .unwrap();
    let mut needles = forms_of("the sensitive input", SENSITIVE_INPUT);
    needles.extend(forms_of("the secret", SECRET));

    // The job ran them all: its log shows where, masked.
    let admin = m.cp.client();
    let log: Vec<String> = nuon_tests::all_logs(&admin, &job)
        .unwrap()
        .into_iter()
        .map(|l| l.text)
        .collect();
    let text = log.join("\n");
    assert!(text.contains("K***Z X***Y"), "{text}");

    let created = rt()
        .block_on(admin.create_token("reader", nuon_core::wire::TokenScope::Read))
        .unwrap();
    let reader = m.cp.client_with(&created.secret);
    let shown_job = rt().block_on(reader.get_job(&job)).unwrap();
    let shown_wf = rt().block_on(reader.get_workflow(&wf)).unwrap();
    let shown_log = nuon_tests::all_logs(&reader, &job).unwrap();
    let mut hits = Vec::new();
    let payload = serde_json::to_string(&shown_job).unwrap();
    // Rendered with stand-ins, not searched afterwards.
    assert!(
        payload.contains("K(sensitive)Z X(secret)Y"),
        "the payload as shown: {payload}"
    );
    hits.extend(found_in(&needles, "the job as shown", payload.as_bytes()));
    let wf_text = serde_json::to_string(&shown_wf).unwrap();
    hits.extend(found_in(
        &needles,
        "the workflow as shown",
        wf_text.as_bytes(),
    ));
    let log_text = serde_json::to_string(&shown_log).unwrap();
    hits.extend(found_in(&needles, "the log", log_text.as_bytes()));
    // The search finds what it looks for.
    assert!(!found_in(&needles, "x", format!("a{SECRET}b").as_bytes()).is_empty());

    for entry in walk(&m.cp.data_dir) {
        let bytes = std::fs::read(&entry).unwrap();
        hits.extend(found_in(&needles, &entry.display().to_string(), &bytes));
    }
    assert!(hits.is_empty(), "found in the clear: {hits:#?}");
}
