//! People and OpenID Connect sign-in, against a real provider: the npm
//! package `oidc-provider` (a certified implementation) on loopback, run by
//! `tests/oidc/provider.mjs`. The browser is played by an HTTP client that
//! follows the redirects and keeps the provider's cookies.
//!
//! Shown here: an invited person signs in (authorization code with PKCE)
//! and gets a token of their own, held to their role; a wrong `state`, a
//! replayed answer, a wrong nonce and a person nobody invited are refused;
//! a viewer cannot approve (403), a deployer can, and the audit trail names
//! the person; a demotion holds at once.

use std::collections::HashMap;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use nuon_core::wire::SignedIn;
use nuon_tests::{ControlPlane, have_tool, manifest_dir, require_all, rt, wait_for};
use serde_json::Value;

use crate::approvals::{FILES, deploy, waiting};
use crate::deploy::{Manual, free_port, ok};

const SECRET: &str = "a client secret / with = odd & characters";

/// `tests/oidc` with its packages installed, or `None` (skipped loudly).
fn provider_dir() -> Option<std::path::PathBuf> {
    if !have_tool("node", "run the OpenID Connect provider (oidc-provider)")
        || !have_tool("npm", "install the OpenID Connect provider (oidc-provider)")
    {
        return None;
    }
    let dir = manifest_dir().join("oidc");
    if !dir.join("node_modules/oidc-provider").is_dir() {
        let done = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        if !done {
            let msg = "`npm ci --prefix tests/oidc` failed: cannot install oidc-provider";
            assert!(!require_all(), "{msg} (NUON_TEST_REQUIRE=all)");
            eprintln!("SKIPPED: {msg}");
            return None;
        }
    }
    Some(dir)
}

/// The provider process, stopped when dropped.
struct Provider {
    child: Child,
    issuer: String,
}

impl Provider {
    fn start(dir: &std::path::Path, port: u16, redirect: &str) -> Provider {
        let mut child = Command::new("node")
            .arg(dir.join("provider.mjs"))
            .args([&port.to_string(), redirect, SECRET])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("node");
        let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        assert_eq!(line.trim(), "listening", "the provider did not start");
        // Its notices go on coming: read them, or it dies writing them.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        Provider {
            child,
            issuer: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A browser: follows redirects by hand and keeps the provider's cookies.
struct Browser<'a> {
    http: reqwest::Client,
    cookies: HashMap<String, String>,
    provider: &'a Provider,
    cp: &'a ControlPlane,
}

impl<'a> Browser<'a> {
    fn new(provider: &'a Provider, cp: &'a ControlPlane) -> Self {
        Browser {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: HashMap::new(),
            provider,
            cp,
        }
    }

    /// One GET: its status, its `Location` made absolute, its body.
    async fn get(&mut self, url: &str) -> (u16, Option<String>, String) {
        let mut req = self.http.get(url);
        if url.starts_with(&self.provider.issuer) && !self.cookies.is_empty() {
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            req = req.header("cookie", jar.join("; "));
        }
        let resp = req.send().await.unwrap();
        for c in resp.headers().get_all("set-cookie") {
            let pair = c.to_str().unwrap().split(';').next().unwrap();
            if let Some((k, v)) = pair.split_once('=') {
                self.cookies.insert(k.trim().into(), v.trim().into());
            }
        }
        let status = resp.status().as_u16();
        let location = resp.headers().get("location").map(|l| {
            let l = l.to_str().unwrap();
            if l.starts_with('/') {
                format!("{}{l}", self.provider.issuer)
            } else {
                l.to_owned()
            }
        });
        (status, location, resp.text().await.unwrap_or_default())
    }

    /// Signs `email` in up to the provider's answer: the callback URL the
    /// browser is sent back to (not yet visited). `tamper` may change the
    /// authorization request on its way to the provider.
    async fn sign_in_until_callback(
        &mut self,
        email: &str,
        tamper: impl Fn(String) -> String,
    ) -> String {
        let login = format!("{}/v1/auth/oidc/login?org=default", self.cp.control_url);
        let (status, to, body) = self.get(&login).await;
        assert!((300..400).contains(&status), "login: {status} {body}");
        let mut url = tamper(format!("{}&login_hint={email}", to.unwrap()));
        assert!(url.starts_with(&self.provider.issuer), "{url}");
        for _ in 0..12 {
            if url.starts_with(&self.cp.control_url) {
                return url;
            }
            let (status, to, body) = self.get(&url).await;
            url = to.unwrap_or_else(|| panic!("{url}: {status} {body}"));
        }
        panic!("the provider never sent the browser back");
    }

    /// Visits the callback as a browser does: the page it shows.
    async fn callback_page(&self, url: &str) -> (u16, String, String) {
        let resp = self
            .http
            .get(url)
            .header("accept", "text/html,application/xhtml+xml")
            .send()
            .await
            .unwrap();
        let csp = resp
            .headers()
            .get("content-security-policy")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        (resp.status().as_u16(), csp, resp.text().await.unwrap())
    }

    /// Visits the callback: its status and JSON answer.
    async fn callback(&self, url: &str) -> (u16, Value) {
        let resp = self
            .http
            .get(url)
            .header("accept", "application/json")
            .send()
            .await
            .unwrap();
        (
            resp.status().as_u16(),
            resp.json().await.unwrap_or(Value::Null),
        )
    }
}

/// `url` with the query parameter `name` set to `value`.
fn with_param(url: &str, name: &str, value: &str) -> String {
    let (base, query) = url.split_once('?').unwrap();
    let query: Vec<String> = query
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((k, _)) if k == name => format!("{k}={value}"),
            _ => p.to_owned(),
        })
        .collect();
    format!("{base}?{}", query.join("&"))
}

fn signed_in(answer: Value) -> SignedIn {
    serde_json::from_value(answer).unwrap()
}

#[test]
fn people_sign_in_through_a_real_provider_and_act_as_their_role_allows() {
    let Some(dir) = provider_dir() else { return };
    if !have_tool("terraform", "deploy the app whose approval people answer") {
        return;
    }
    // The provider's port first: the control plane is told its issuer,
    // then the provider is told the control plane's redirect URI.
    let port = free_port();
    let tmp = tempfile::tempdir().unwrap();
    let secret_file = tmp.path().join("client-secret");
    std::fs::write(&secret_file, format!("{SECRET}\n")).unwrap();
    let issuer = format!("http://127.0.0.1:{port}");
    let cp = ControlPlane::start_with(
        "5s",
        &[
            "--oidc-issuer",
            &issuer,
            "--oidc-client-id",
            "nuon",
            "--oidc-client-secret-file",
            secret_file.to_str().unwrap(),
            "--session-ttl",
            "1h",
        ],
    )
    .unwrap();
    let provider = Provider::start(
        &dir,
        port,
        &format!("{}/v1/auth/oidc/callback", cp.control_url),
    );
    let login: Value =
        serde_json::from_str(&ok(cp.nuon(&["--json", "login", "--org", "default"]))).unwrap();
    assert_eq!(
        login["url"],
        format!("{}/v1/auth/oidc/login?org=default", cp.control_url)
    );
    for (email, role) in [
        ("vera@example.com", "viewer"),
        ("dave@example.com", "deployer"),
    ] {
        let out = cp.nuon(&["--json", "users", "invite", email, "--role", role]);
        let user: Value = serde_json::from_str(&ok(out)).unwrap();
        assert_eq!(
            (user["role"].as_str(), user["status"].as_str()),
            (Some(role), Some("invited"))
        );
    }

    let (vera, dave) = rt().block_on(async {
        let mut b = Browser::new(&provider, &cp);
        // A wrong state finds no sign-in; the right one works once.
        let back = b.sign_in_until_callback("vera@example.com", |u| u).await;
        let (status, answer) = b.callback(&with_param(&back, "state", "forged")).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (400, Some("unknown_sign_in")),
            "{answer}"
        );
        let (status, answer) = b.callback(&back).await;
        assert_eq!(status, 200, "{answer}");
        let vera = signed_in(answer);
        assert_eq!(
            (vera.user.email.as_str(), vera.user.status),
            ("vera@example.com", nuon_core::wire::UserStatus::Active)
        );
        assert_eq!(vera.token.token.scope, nuon_core::wire::TokenScope::Read);
        assert!(vera.token.token.expires_at_ms.is_some());
        let (status, answer) = b.callback(&back).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (400, Some("unknown_sign_in")),
            "a replayed answer: {answer}"
        );

        // A nonce changed on the way to the provider: the ID token carries
        // it, not this sign-in's, and is refused.
        let mut b = Browser::new(&provider, &cp);
        let back = b
            .sign_in_until_callback("dave@example.com", |u| {
                with_param(&u, "nonce", "injected-nonce")
            })
            .await;
        let (status, answer) = b.callback(&back).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (401, Some("sign_in_refused")),
            "{answer}"
        );
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("nonce"),
            "{answer}"
        );

        // Someone nobody invited.
        let mut b = Browser::new(&provider, &cp);
        let back = b.sign_in_until_callback("eve@example.com", |u| u).await;
        let (status, answer) = b.callback(&back).await;
        assert_eq!(
            (status, answer["error"]["code"].as_str()),
            (403, Some("not_invited")),
            "{answer}"
        );

        // In a browser, the answer is a page with the token, once.
        let mut b = Browser::new(&provider, &cp);
        let back = b.sign_in_until_callback("dave@example.com", |u| u).await;
        let (status, csp, page) = b.callback_page(&back).await;
        assert_eq!(status, 200, "{page}");
        assert!(
            page.contains("Signed in as dave@example.com (deployer)"),
            "{page}"
        );
        assert!(csp.starts_with("default-src 'none'"), "{csp}");

        let mut b = Browser::new(&provider, &cp);
        let back = b.sign_in_until_callback("dave@example.com", |u| u).await;
        let (status, answer) = b.callback(&back).await;
        assert_eq!(status, 200, "{answer}");
        (vera, signed_in(answer))
    });
    assert_eq!(
        dave.token.token.scope,
        nuon_core::wire::TokenScope::Deployer
    );
    let users: Value = serde_json::from_str(&ok(cp.nuon(&["--json", "users", "list"]))).unwrap();
    let statuses: Vec<(&str, &str)> = users["users"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["email"].as_str().unwrap(), u["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("vera@example.com", "active"),
            ("dave@example.com", "active")
        ]
    );

    // A deploy whose first apply waits for an approval.
    let m = Manual::start_on(cp, &FILES, None, |_| {}, &["--approval", "prompt"]);
    let wf = deploy(&m);
    waiting(&m, &wf, "apply db");
    let as_vera = m.cp.client_with(&vera.token.secret);
    let as_dave = m.cp.client_with(&dave.token.secret);
    let err = rt().block_on(as_vera.approve_step(&wf, None)).unwrap_err();
    assert!(
        err.to_string().contains("read-only"),
        "a viewer approves: {err}"
    );
    let approved = rt()
        .block_on(as_dave.approve_step(&wf, None))
        .expect("a deployer approves");
    let apply = approved
        .steps
        .iter()
        .find(|s| s.name == "apply db")
        .unwrap();
    assert_eq!(
        apply.approved_by.as_deref(),
        Some("dave@example.com"),
        "{apply:?}"
    );
    // A viewer's token cannot be made into more than its person's role.
    let made = rt()
        .block_on(as_vera.create_token("more", nuon_core::wire::TokenScope::Admin))
        .unwrap_err();
    assert!(made.to_string().contains("read-only"), "{made}");

    // The audit trail names the person, with the token they used.
    let admin = m.cp.client();
    // Written in batches: wait for the approval's entry.
    let audit = wait_for(
        "dave's approval in the audit trail",
        Duration::from_secs(10),
        || {
            let a = rt()
                .block_on(admin.list_audit(0, 1000, Some("dave@example.com")))
                .unwrap();
            a.entries
                .iter()
                .any(|e| e.action == "approveWorkflowStep")
                .then_some(a)
        },
    )
    .unwrap();
    let approved = audit
        .entries
        .iter()
        .find(|e| e.action == "approveWorkflowStep")
        .unwrap();
    assert_eq!(approved.outcome, "200");
    assert!(
        approved.detail.contains(dave.token.token.id.as_str()),
        "{approved:?}"
    );
    assert!(
        audit.entries.iter().any(|e| e.action == "signIn"),
        "{:?}",
        audit.entries
    );
    let refused = rt()
        .block_on(admin.list_audit(0, 1000, Some("vera@example.com")))
        .unwrap();
    assert!(
        refused
            .entries
            .iter()
            .any(|e| e.action == "approveWorkflowStep" && e.outcome == "403"),
        "{:?}",
        refused.entries
    );

    // A demotion holds at once for the tokens the person has.
    ok(m.cp.nuon(&["users", "set-role", "dave@example.com", "viewer"]));
    let err = rt().block_on(as_dave.approve_step(&wf, None)).unwrap_err();
    assert!(err.to_string().contains("read-only"), "{err}");
    // Removed: their tokens authenticate nothing.
    ok(m.cp.nuon(&["users", "remove", "dave@example.com"]));
    let err = rt().block_on(as_dave.list_users()).unwrap_err();
    assert!(err.to_string().contains("invalid or revoked"), "{err}");
}
