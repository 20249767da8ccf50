//! TLS on the control plane (`nuon-ctl serve --tls-cert --tls-key`): the
//! runner (and Terraform's state backend through it), the CLI, the build
//! runner and the dashboard over HTTPS with a CA made in the test; a
//! renewed certificate served without a restart; expired, wrong-host and
//! unknown certificates, plain HTTP on a TLS port and unusable files each
//! refused with a message that says what is wrong.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use nuon_core::workflow::WorkflowKind;
use nuon_tests::{ControlPlane, Runner, RunnerOpts, have_tool, ours, rt, wait_for};
use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair, date_time_ymd};

use crate::deploy::{BOX_APP, Manual, ok, run_workflow, text};

/// A certificate authority made for one test.
pub(crate) struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A server certificate for `names`, valid from `from` to `until`
    /// (years): its PEM and its key's.
    fn issue(&self, names: &[&str], from: i32, until: i32) -> (String, String) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params.not_before = date_time_ymd(from, 1, 1);
        params.not_after = date_time_ymd(until, 1, 1);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

/// `nuon-ctl serve`'s flags serving `cert` and `key`, then `more`.
pub(crate) fn serving<'a>(cert: &'a Path, key: &'a Path, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    args.extend_from_slice(more);
    args
}

/// A CA made for the test, its PEM written to `dir/ca.pem`.
pub(crate) fn ca_in(dir: &Path) -> (Ca, PathBuf) {
    let ca = Ca::new("nuon test CA");
    let file = dir.join("ca.pem");
    std::fs::write(&file, &ca.pem).unwrap();
    (ca, file)
}

/// Writes a certificate and key where the control plane reads them.
pub(crate) fn install(dir: &Path, (cert, key): &(String, String)) -> (PathBuf, PathBuf) {
    let (c, k) = (dir.join("server.crt"), dir.join("server.key"));
    // The key first: a reload that sees the new key with the old
    // certificate keeps the old pair, and the next look finds both new.
    std::fs::write(&k, key).unwrap();
    std::fs::write(&c, cert).unwrap();
    (c, k)
}

pub(crate) fn good(ca: &Ca) -> (String, String) {
    ca.issue(&["localhost", "127.0.0.1"], 2020, 2100)
}

/// `nuon apps list` against `url`, trusting `ca` when given.
fn apps_list(cp: &ControlPlane, url: &str, ca: Option<&Path>) -> Output {
    let mut c = ours("nuon");
    c.args(["apps", "list", "--json"])
        .env("NUON_API_URL", url)
        .env("NUON_TOKEN", &cp.admin_token);
    if let Some(ca) = ca {
        c.env("NUON_CA_BUNDLE", ca);
    }
    c.output().unwrap()
}

#[test]
fn runner_cli_and_dashboard_work_over_https_end_to_end() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let certs = tempfile::tempdir().unwrap();
    let (ca, ca_file) = ca_in(certs.path());
    let (cert, key) = install(certs.path(), &good(&ca));
    let mut cp = ControlPlane::start_with("3s", &serving(&cert, &key, &[])).unwrap();
    assert!(cp.control_url.starts_with("https://"), "{}", cp.control_url);
    assert!(cp.runner_url.starts_with("https://"), "{}", cp.runner_url);
    cp.ca_bundle = Some(ca_file.clone());

    // The app synced and built (the build runner over HTTPS), an install
    // created and provisioned: its runner and Terraform's state backend
    // reach the Runner API over HTTPS, trusting the CA given to the runner.
    let m = Manual::start_on(cp, &BOX_APP, None, |_| {}, &[]);
    let c = m.cp.client();
    let w = run_workflow(&c, WorkflowKind::Provision);
    assert_eq!(w.status.as_str(), "succeeded", "{w:#?}");
    let state = ok(m.cp.nuon(&["installs", "state", "list", "demo", "--json"]));
    assert!(state.contains("box"), "{state}");

    // The dashboard: served over HTTPS, its session cookie Secure.
    rt().block_on(async {
        let http = m.cp.browser();
        let base = &m.cp.control_url;
        let form = http.get(format!("{base}/login")).send().await.unwrap();
        assert_eq!(form.status(), 200);
        let cookies: Vec<String> = form
            .headers()
            .get_all(reqwest::header::SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect();
        assert!(
            cookies.iter().any(|c| c.starts_with("nuon_login=")),
            "{cookies:?}"
        );
        assert!(
            cookies.iter().all(|c| c.contains("; Secure")),
            "cookies over HTTPS are Secure: {cookies:?}"
        );
    });
    let overview = m.cp.dashboard_page("/");
    assert!(overview.contains("demo"), "{overview}");
}

#[test]
fn bad_certificates_and_plain_http_are_refused_with_what_is_wrong() {
    let certs = tempfile::tempdir().unwrap();
    let (ca, ca_file) = ca_in(certs.path());
    let good = good(&ca);

    // Files that cannot be served stop the start, naming the file.
    let (cert, key) = install(certs.path(), &good);
    let other_key = certs.path().join("other.key");
    std::fs::write(&other_key, KeyPair::generate().unwrap().serialize_pem()).unwrap();
    let data = tempfile::tempdir().unwrap();
    for (c, k, says) in [
        (&cert, &other_key, "the key is not the certificate's"),
        (&key, &key, "holds no PEM certificate"),
        (
            &certs.path().join("missing.crt"),
            &key,
            "cannot read --tls-cert",
        ),
    ] {
        let out = ours("nuon-ctl")
            .args([
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--runner-listen",
                "127.0.0.1:0",
            ])
            .arg("--data-dir")
            .arg(data.path())
            .arg("--tls-cert")
            .arg(c)
            .arg("--tls-key")
            .arg(k)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{}", text(&out));
        assert!(text(&out).contains(says), "want {says:?}: {}", text(&out));
    }

    let mut cp =
        ControlPlane::start_with("3s", &serving(&cert, &key, &["--key-refresh", "500ms"])).unwrap();
    cp.ca_bundle = Some(ca_file.clone());
    let url = cp.control_url.clone();
    ok(apps_list(&cp, &url, Some(&ca_file)));

    // Not trusting the CA.
    let out = apps_list(&cp, &url, None);
    assert!(!out.status.success());
    let said = text(&out);
    assert!(
        said.contains("signed by an authority this machine does not trust")
            && said.contains("--ca-bundle"),
        "{said}"
    );

    // Plain HTTP on the TLS port: the URL to use instead.
    let plain = url.replacen("https://", "http://", 1);
    let out = apps_list(&cp, &plain, None);
    assert!(!out.status.success());
    let said = text(&out);
    let https = format!("use {url}/v1/apps");
    assert!(
        said.contains("this port speaks HTTPS") && said.contains(&https),
        "want {https:?}: {said}"
    );

    // A runner not given the CA (`Runner::start` passes none) says why it
    // cannot connect.
    let token = cp.create_runner("untrusting").unwrap();
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
    wait_for(
        "the runner to say it does not trust the certificate",
        Duration::from_secs(30),
        || {
            let log = runner.log_text();
            log.contains("signed by an authority this machine does not trust")
                .then_some(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}: {}", runner.log_text()));

    // Renewed in place, without a restart: a certificate for another host,
    // then an expired one, each refused in words; then a good one again.
    let swap = |pair: &(String, String), want_ok: bool, says: &str| {
        install(certs.path(), pair);
        wait_for(
            &format!("the control plane to serve the new certificate ({says})"),
            Duration::from_secs(20),
            || {
                let out = apps_list(&cp, &url, Some(&ca_file));
                let said = text(&out);
                (out.status.success() == want_ok && said.contains(says)).then_some(())
            },
        )
        .unwrap_or_else(|e| panic!("{e}: {}", text(&apps_list(&cp, &url, Some(&ca_file)))));
    };
    swap(
        &ca.issue(&["cp.example.com"], 2020, 2100),
        false,
        "is for cp.example.com, not 127.0.0.1",
    );
    swap(&ca.issue(&["127.0.0.1"], 2020, 2021), false, "expired");
    swap(&good, true, "\"apps\"");
    assert!(
        cp.server_log()
            .contains("serving the renewed TLS certificate"),
        "{}",
        cp.server_log()
    );
    ok(cp.nuon(&["apps", "list"]));
}
