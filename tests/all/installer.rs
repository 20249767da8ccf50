//! The customer's installer: a vendor invites (`nuon installs invite`),
//! the customer opens the link in a fresh headless Chromium with no
//! session and no token, sets the inputs the app lets them set (one
//! refused first with the API's reason, what they typed kept), downloads
//! the install stack (the VM bundle), applies it, and watches the
//! provision to the install's README rendered with a real output, with no
//! reload. The link works once, for one browser; an expired, revoked or
//! unknown one says so; hostile Markdown shows as text; the vendor sees
//! which inputs the customer set, a sensitive one by name only.

use std::process::{Command, Stdio};
use std::time::Duration;

use nuon_tests::webdriver::Chrome;
use nuon_tests::{bin, have_tool, rt};
use serde_json::json;

use crate::deploy::{METADATA, Manual, ok, text};
use crate::stack::KillOnDrop;

const README: &str = "# Acme Queue\n\nYour queue answers at **{{ .nuon.components.queue.outputs.endpoint }}**.\n\n<script>window.pwned = 1</script>\n\n[a trap](javascript:window.pwned=2) and [the docs](https://docs.acme.test/queue).\n";

/// The vendor's logo: an SVG that would run a script if it could.
const LOGO: &str = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"64\" height=\"32\"><script>window.pwned = 3</script><rect width=\"64\" height=\"32\" fill=\"#36c\"/></svg>\n";

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x60, 0x60, 0x60, 0xf8,
    0x0f, 0x00, 0x01, 0x04, 0x01, 0x00, 0x5f, 0xe5, 0xc3, 0x4b, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

/// Serves `body` over HTTP on 127.0.0.1 to every request, in a thread;
/// its address.
fn serve(body: &'static [u8]) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: image/png\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = conn.write_all(head.as_bytes());
            let _ = conn.write_all(body);
        }
    });
    format!("http://{addr}")
}

fn files() -> Vec<(&'static str, String)> {
    vec![
        (
            METADATA.0,
            "version = \"v2\"\ndisplay_name = \"Acme Queue\"\ndescription = \"A queue that runs in your own account.\"\nreadme = \"./README.md\"\n".into(),
        ),
        ("README.md", README.into()),
        ("logo.svg", LOGO.into()),
        (
            "inputs.toml",
            "[[group]]\nname = \"sizing\"\ndisplay_name = \"Sizing\"\ndescription = \"How big the queue is\"\n\n\
             [[input]]\nname = \"queue_size\"\ngroup = \"sizing\"\ntype = \"number\"\ndefault = \"5\"\ndescription = \"Slots in the queue\"\nuser_configurable = true\n\n\
             [[input]]\nname = \"team\"\ndescription = \"Who owns it\"\nrequired = true\nuser_configurable = true\n\n\
             [[input]]\nname = \"admin_password\"\nsensitive = true\ndescription = \"The queue's admin password\"\nuser_configurable = true\n\n\
             [[input]]\nname = \"tier\"\ndefault = \"standard\"\n".into(),
        ),
        (
            "installer.toml",
            "name = \"Acme\"\ndescription = \"Install Acme's queue in your account\"\ndocumentation_url = \"https://docs.acme.test\"\nhomepage_url = \"https://acme.test\"\n\
             logo_url = \"./logo.svg\"\n\
             post_install_markdown = \"Next: **open the queue** from your VPC.\"\nfooter_markdown = \"[Terms](https://acme.test/terms) <b>bold?</b>\"\ncopyright_markdown = \"(c) Acme\"\n".into(),
        ),
        (
            "components/queue.toml",
            "name = \"queue\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"tf\"\nreadme = \"It has {{ .nuon.install.inputs.queue_size }} slots.\"\n\n[vars]\nsize = \"{{ .nuon.install.inputs.queue_size }}\"\nteam = \"{{ .nuon.install.inputs.team }}\"\n".into(),
        ),
        (
            "tf/main.tf",
            "variable \"size\" {\n  type = string\n}\n\nvariable \"team\" {\n  type = string\n}\n\nresource \"terraform_data\" \"q\" {\n  input = \"queue-${var.size}.${var.team}.internal\"\n}\n\noutput \"endpoint\" {\n  value = terraform_data.q.output\n}\n".into(),
        ),
    ]
}

/// An invitation's link, made by the CLI.
fn invite(m: &Manual, args: &[&str]) -> (String, String) {
    let mut cmd = vec!["installs", "invite", "--app", "app", "--json"];
    cmd.extend_from_slice(args);
    let v: serde_json::Value = serde_json::from_str(&ok(m.cp.nuon(&cmd))).unwrap();
    (
        v["url"].as_str().unwrap().to_owned(),
        v["invitation"]["id"].as_str().unwrap().to_owned(),
    )
}

/// A GET of `url` with no cookie: its status and body.
fn fetch(url: &str) -> (u16, String) {
    rt().block_on(async {
        let r = reqwest::get(url).await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    })
}

#[test]
fn a_customer_installs_from_an_invitation_with_no_account_and_sees_the_readme_live() {
    if !have_tool("terraform", "run Terraform") {
        return;
    }
    let Some(b) = Chrome::start() else { return };
    let owned = files();
    let borrowed: Vec<(&str, &str)> = owned.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let m = Manual::start_full(&borrowed, None, |_| {}, &["--input", "team=vendor"]);
    let base = m.cp.control_url.clone();

    // The installer as the vendor's tooling sees it.
    let got = ok(m.cp.nuon(&["installers", "get", "app", "--json"]));
    let got: serde_json::Value = serde_json::from_str(&got).unwrap();
    assert_eq!(got["installer"]["name"], "Acme", "{got}");
    assert_eq!(
        got["installer"]["documentation_url"],
        "https://docs.acme.test"
    );
    let listed = ok(m.cp.nuon(&["installers", "list"]));
    assert!(
        listed.contains("app") && listed.contains("Acme"),
        "{listed}"
    );

    let (url, id) = invite(&m, &["--email", "ops@customer.test", "--expires", "2h"]);
    assert!(url.starts_with(&format!("{base}/install/ilk_")), "{url}");
    let listed = ok(m.cp.nuon(&["invitations", "list"]));
    assert!(
        listed.contains(&id) && listed.contains("pending") && listed.contains("in 1h"),
        "{listed}"
    );

    // The vendor's dashboard makes one too, from the app's page, in a
    // browser of its own.
    let vendor = Chrome::start().expect("chromium started once already");
    crate::dashboard::sign_in(&vendor, &base, &m.cp.admin_token);
    let app = rt().block_on(m.cp.client().get_app("app")).unwrap();
    vendor.goto(&format!("{base}/apps/{}", app.id));
    vendor.type_into("#invite-email", "it@customer.test");
    crate::dashboard::submit(&vendor, "form.invite button");
    let link = vendor.text("#invitation-url");
    assert!(link.starts_with(&format!("{base}/install/ilk_")), "{link}");
    // Seven days from its making, less the milliseconds since (none when
    // the page is made in the same one).
    let page = vendor.source();
    assert!(
        page.contains("expires in 6 d") || page.contains("expires in 7 d"),
        "{page}"
    );
    assert_eq!(fetch(&link).0, 200);
    drop(vendor);

    // A fresh browser: no session, no token.
    b.goto(&url);
    b.wait_until("the installer form", Duration::from_secs(10), |b| {
        b.find("#install-name").is_some()
    });
    let page = b.source();
    assert!(page.contains("<h1>Install Acme Queue</h1>"), "{page}");
    assert!(
        page.contains("A queue that runs in your own account.")
            || page.contains("Install Acme's queue"),
        "{page}"
    );
    assert!(
        page.contains("<legend>Sizing</legend>") && page.contains("Left empty: <code>5</code>"),
        "{page}"
    );
    assert!(
        !page.contains("input-tier"),
        "a vendor's input is not asked: {page}"
    );
    assert!(
        page.contains("type=\"password\"") && page.contains("input-admin_password"),
        "{page}"
    );
    // The README's hostile Markdown is text; nothing ran; links are safe.
    assert!(
        page.contains("&lt;script&gt;window.pwned = 1&lt;/script&gt;"),
        "{page}"
    );
    assert!(!page.contains("href=\"javascript"), "{page}");
    assert!(
        page.contains("<a href=\"https://docs.acme.test/queue\" rel=\"noopener noreferrer nofollow\">the docs</a>"),
        "{page}"
    );
    assert!(
        page.contains("&lt;b&gt;bold?&lt;/b&gt;"),
        "footer HTML is text: {page}"
    );
    assert_eq!(
        b.exec("return window.pwned === undefined;", json!([])),
        json!(true)
    );
    // The vendor's logo (an SVG with a script in it) is shown, from here.
    let shown = b.exec(
        "const i = document.querySelector('header img.logo'); return i && i.complete && i.naturalWidth > 0 && new URL(i.src).origin === location.origin;",
        json!([]),
    );
    assert_eq!(shown, json!(true), "the logo is shown");
    // Nothing from elsewhere, and nothing wider than a phone.
    let csp = rt().block_on(async {
        reqwest::get(&url).await.unwrap().headers()["content-security-policy"]
            .to_str()
            .unwrap()
            .to_owned()
    });
    assert!(csp.contains("default-src 'none'"), "{csp}");
    let axe = crate::dashboard::axe_source();
    let violations = crate::dashboard::run_axe(&b, &axe);
    assert!(
        violations.is_empty(),
        "axe on the installer: {violations:#?}"
    );
    b.set_size(390, 844);
    let wide = b.exec("return document.documentElement.scrollWidth;", json!([]));
    assert!(
        wide.as_u64().unwrap() <= 390,
        "the page is {wide} px wide on a phone"
    );
    b.set_size(1280, 900);

    // One input refused with the API's reason; what was typed stays, the
    // password excepted.
    b.type_into("#install-name", "acme");
    b.type_into("#input-queue_size", "lots");
    b.type_into("#input-team", "platform");
    b.type_into("#input-admin_password", "hunter22hunter22");
    crate::dashboard::submit(&b, "form[action^='/install/'] button.primary");
    let said = b.text("p.error");
    assert!(
        said.starts_with("Not created: ") && said.contains("queue_size"),
        "{said}"
    );
    assert_eq!(
        b.exec(
            "return [document.querySelector('#install-name').value, document.querySelector('#input-queue_size').value, document.querySelector('#input-team').value, document.querySelector('#input-admin_password').value];",
            json!([])
        ),
        json!(["acme", "lots", "platform", ""]),
    );
    assert!(
        rt().block_on(m.cp.client().get_install("acme")).is_err(),
        "a refused form makes no install"
    );
    b.exec(
        "document.querySelector('#input-queue_size').value = '';",
        json!([]),
    );
    b.type_into("#input-queue_size", "9");
    b.type_into("#input-admin_password", "hunter22hunter22");
    crate::dashboard::submit(&b, "form[action^='/install/'] button.primary");
    b.wait_until("the install's page", Duration::from_secs(20), |b| {
        b.find("#stack").is_some()
    });
    assert_eq!(b.url(), url, "back on the link's own page");
    assert_eq!(b.text("h1"), "Install acme of Acme Queue");

    // The vendor sees what the customer set; the password by name only.
    let info = rt().block_on(m.cp.client().get_install("acme")).unwrap();
    assert_eq!(
        info.customer_inputs,
        ["admin_password", "queue_size", "team"],
        "{info:?}"
    );
    assert_eq!(info.inputs["queue_size"], json!(9), "{:?}", info.inputs);
    assert_eq!(info.inputs["tier"], "standard");
    assert!(!info.inputs.contains_key("admin_password"));
    assert_eq!(info.sensitive_inputs, ["admin_password"]);
    let shown = ok(m.cp.nuon(&["installs", "get", "acme"]));
    assert!(
        shown.contains("team = platform  (set by the customer)")
            && shown.contains("admin_password = (sensitive, set)  (set by the customer)")
            && !shown.contains("hunter22"),
        "{shown}"
    );
    let page = m.cp.dashboard_page("/installs/acme");
    assert!(
        page.contains("(set by the customer)") && !page.contains("hunter22"),
        "{page}"
    );
    let trail = ok(m.cp.nuon(&["audit", "list", "--limit", "1000", "--json"]));
    assert!(
        trail.contains(&format!("customer (invitation {id})"))
            && trail.contains("inputs set by the customer: admin_password, queue_size, team"),
        "{trail}"
    );

    // The link is spent: another browser is told so, and the vendor sees it used.
    let (status, body) = fetch(&url);
    assert_eq!(status, 410, "{body}");
    assert!(body.contains("was used already"), "{body}");
    let listed = ok(m.cp.nuon(&["invitations", "list", "--json"]));
    assert!(
        listed.contains("\"used\"") && listed.contains(info.id.as_str()),
        "{listed}"
    );

    // The stack, downloaded from the page, applied on this machine.
    let bundle = b.exec(
        "return fetch(arguments[0]).then(r => r.text());",
        json!([format!("{url}/stack/vm")]),
    );
    let bundle = bundle.as_str().unwrap();
    assert!(bundle.starts_with("#!/bin/sh"), "{bundle}");
    let there = m.dir.path().join("customer");
    std::fs::create_dir_all(&there).unwrap();
    std::fs::write(there.join("nuon-stack-acme.sh"), bundle).unwrap();
    let unpacked = Command::new("sh")
        .arg("nuon-stack-acme.sh")
        .current_dir(&there)
        .output()
        .unwrap();
    assert!(unpacked.status.success(), "{}", text(&unpacked));
    let stack_dir = there.join("nuon-stack-acme");
    let mut env = m.runner_store_env();
    env.retain(|(k, _)| *k != "NUON_RUNNER_STORE_DIR");
    let runner = Command::new("sh")
        .arg(stack_dir.join("install.sh"))
        .args(["--no-systemd", "--prefix"])
        .arg(there.join("opt"))
        .arg("--work-dir")
        .arg(there.join("work"))
        .args(["--binary", bin("nuon-runner").to_str().unwrap()])
        .envs(env)
        .env("NUON_RUNNER_STORE_DIR", there.join("store"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(there.join("runner.log")).unwrap())
        .spawn()
        .unwrap();
    let _runner = KillOnDrop(runner);

    // The page follows the provision to the README, with no reload.
    b.exec("window.sameDocument = true;", json!([]));
    b.wait_until("the install to be up", Duration::from_secs(600), |b| {
        b.exec(
            "var s = document.querySelector('#progress'); return s && s.getAttribute('data-ended');",
            json!([]),
        ) != json!(null)
    });
    assert_eq!(
        b.exec("return window.sameDocument === true;", json!([])),
        json!(true),
        "the page was not reloaded"
    );
    let readme = b.text("#readme-body");
    assert!(
        readme.contains("queue-9.platform.internal")
            && readme.contains("It has 9 slots.")
            && readme.contains("open the queue"),
        "{readme}\n{}",
        std::fs::read_to_string(there.join("runner.log")).unwrap_or_default()
    );
    assert_eq!(b.text("#state"), "active");
    assert_eq!(
        b.exec("return window.pwned === undefined;", json!([])),
        json!(true)
    );
    let readme_html = b.exec(
        "return document.querySelector('#readme-body').innerHTML;",
        json!([]),
    );
    let readme_html = readme_html.as_str().unwrap();
    assert!(
        readme_html.contains("<strong>queue-9.platform.internal</strong>")
            && !readme_html.contains("<script"),
        "{readme_html}"
    );
}

#[test]
fn an_invitation_works_for_its_org_only_until_it_expires_or_is_revoked() {
    let owned = files();
    let borrowed: Vec<(&str, &str)> = owned.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let m = Manual::start_full(&borrowed, None, |_| {}, &["--input", "team=vendor"]);
    // Revoked: the link says so at once.
    let (url, id) = invite(&m, &["--name", "revoked-one"]);
    let (status, body) = fetch(&url);
    assert_eq!(status, 200, "{body}");
    let revoked = ok(m.cp.nuon(&["invitations", "revoke", &id, "--json"]));
    assert!(revoked.contains("\"revoked\""), "{revoked}");
    let (status, body) = fetch(&url);
    assert_eq!(status, 410);
    assert!(body.contains("revoked by the vendor"), "{body}");
    // Unknown, and a mangled one.
    let (status, body) = fetch(&format!("{url}x"));
    assert_eq!(status, 404);
    assert!(body.contains("not a link to an installer"), "{body}");
    // Expired: its time moved back in the store.
    let (url, id) = invite(&m, &["--expires", "1m"]);
    if have_tool("sqlite3", "age an invitation in the store") {
        crate::ops::sqlite3(
            &m.cp.data_dir.join("nuon.db"),
            &format!("UPDATE invitations SET expires_at = 1 WHERE id = '{id}'"),
        );
        let (status, body) = fetch(&url);
        assert_eq!(status, 410);
        assert!(body.contains("has expired"), "{body}");
        let listed = ok(m.cp.nuon(&["invitations", "list"]));
        assert!(listed.contains("expired"), "{listed}");
    }
    // A form posted without this browser's cookie and token is refused.
    let (url, _) = invite(&m, &[]);
    let posted = rt().block_on(async {
        reqwest::Client::new()
            .post(&url)
            .form(&[("name", "sneaky"), ("csrf", "x")])
            .send()
            .await
            .unwrap()
            .status()
            .as_u16()
    });
    assert_eq!(posted, 403);
    // Bad requests say what is wrong.
    let bad =
        m.cp.nuon(&["installs", "invite", "--app", "app", "--expires", "100d"]);
    assert!(!bad.status.success());
    assert!(text(&bad).contains("between 1m and 90d"), "{}", text(&bad));
    let bad = m.cp.nuon(&["installs", "invite", "--app", "nope"]);
    assert!(text(&bad).contains("no app \"nope\""), "{}", text(&bad));
    // An install the vendor made, never provisioned: the customer gets
    // its stack, not a form of inputs.
    let (finish, _) = invite(&m, &["--install", "demo"]);
    let (status, page) = fetch(&finish);
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("prepared the install <strong>demo</strong>") && !page.contains("input-team"),
        "{page}"
    );
    let bad =
        m.cp.nuon(&["installs", "invite", "--app", "app", "--install", "nope"]);
    assert!(text(&bad).contains("no install \"nope\""), "{}", text(&bad));
    // Another org sees none of it.
    let other = m.cp.create_org("other").unwrap();
    let theirs = m.cp.nuon_as(&other, &["invitations", "list", "--json"]);
    assert!(!text(&theirs).contains(&id), "{}", text(&theirs));
    let theirs = m.cp.nuon_as(&other, &["invitations", "revoke", &id]);
    assert!(!theirs.status.success());
    assert!(text(&theirs).contains("no invitation"), "{}", text(&theirs));
    let theirs =
        m.cp.nuon_as(&other, &["installs", "invite", "--app", "app"]);
    assert!(
        text(&theirs).contains("no app \"app\""),
        "{}",
        text(&theirs)
    );
    // A read-only token cannot invite.
    let read: serde_json::Value = serde_json::from_str(&ok(m
        .cp
        .nuon(&["orgs", "tokens", "create", "--name", "reader", "--json"])))
    .unwrap();
    let read = read["secret"].as_str().unwrap().to_owned();
    let refused = m.cp.nuon_as(&read, &["installs", "invite", "--app", "app"]);
    assert!(text(&refused).contains("read-only"), "{}", text(&refused));
}

/// A page's hidden CSRF field.
fn csrf_in(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").expect("a CSRF field") + 19;
    page[at..].split('"').next().unwrap().to_owned()
}

/// One href of `page`, by the element's id.
fn href_of(page: &str, id: &str) -> Option<String> {
    let at = page.find(&format!("id=\"{id}\""))?;
    let start = page[..at].rfind('<')?;
    let tag = &page[start..start + page[start..].find('>')?];
    let h = tag.find("href=\"")? + 6;
    Some(tag[h..].split('"').next()?.replace("&amp;", "&"))
}

/// A query parameter of a URL (after `#` too, where AWS's console reads
/// them), decoded.
fn param(url: &str, name: &str) -> Option<String> {
    let query = url.rsplit_once('?')?.1;
    query.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=')?;
        (k == name).then(|| {
            let bytes = v.as_bytes();
            let mut out = Vec::new();
            let mut i = 0;
            while i < bytes.len() {
                if bytes[i] == b'%' {
                    out.push(u8::from_str_radix(&v[i + 1..i + 3], 16).unwrap());
                    i += 3;
                } else {
                    out.push(bytes[i]);
                    i += 1;
                }
            }
            String::from_utf8(out).unwrap()
        })
    })
}

/// A customer's browser without JavaScript: its cookie, after it made
/// the install from the link with two inputs.
struct Customer {
    client: reqwest::Client,
    url: String,
    cookie: String,
}

impl Customer {
    fn installs(url: &str) -> Customer {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let mut c = Customer {
            client,
            url: url.to_owned(),
            cookie: String::new(),
        };
        let (set, form) = c.page("");
        c.cookie = set.expect("a new browser gets its cookie");
        let posted = rt().block_on(async {
            c.client
                .post(&c.url)
                .header("cookie", &c.cookie)
                .form(&[
                    ("csrf", csrf_in(&form).as_str()),
                    ("input.team", "platform"),
                    ("input.queue_size", "3"),
                ])
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        });
        assert_eq!(posted, 303, "the install is made and the page shown");
        c
    }

    /// The link's page as `cookie`'s browser sees it, and the cookie it
    /// is given when new.
    fn page(&self, cookie: &str) -> (Option<String>, String) {
        rt().block_on(async {
            let r = self
                .client
                .get(&self.url)
                .header("cookie", cookie)
                .send()
                .await
                .unwrap();
            let set = r
                .headers()
                .get("set-cookie")
                .map(|v| v.to_str().unwrap().split(';').next().unwrap().to_owned());
            (set, r.text().await.unwrap())
        })
    }
}

/// The installer app with an AWS runner.
fn aws_files() -> Vec<(&'static str, String)> {
    let mut owned = files();
    owned.push(("runner.toml", "runner_type = \"aws\"\n".into()));
    owned
}

/// An app whose runner is an AWS one, on a control plane with no template
/// bucket: the page offers `template.json` and says why there is no
/// one-click launch (AWS's console reads quick-create templates from S3
/// only); the vendor's logo (a file of the config) and favicon (a web
/// link the CLI fetched when it synced) are served from here to the
/// customer's browser only, the SVG unable to run anything.
#[test]
fn an_aws_install_without_a_template_bucket_offers_the_download_and_the_vendors_images() {
    let mut owned = aws_files();
    // The favicon is a web link: the CLI fetches it when it syncs.
    let icon = format!("{}/favicon.png", serve(PNG));
    for (path, text) in &mut owned {
        if *path == "installer.toml" {
            text.push_str(&format!("favicon_url = \"{icon}\"\n"));
        }
    }
    let borrowed: Vec<(&str, &str)> = owned.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let m = Manual::start_full(&borrowed, None, |_| {}, &["--input", "team=vendor"]);
    let (url, _) = invite(&m, &["--name", "cloudy"]);
    let customer = Customer::installs(&url);
    let (_, mine) = customer.page(&customer.cookie);
    assert!(href_of(&mine, "launch-stack").is_none(), "{mine}");
    assert!(
        mine.contains("id=\"no-launch\"") && mine.contains("AWS's console reads them from S3 only"),
        "{mine}"
    );
    assert!(mine.contains("download=\"template.json\""), "{mine}");

    let token = url.rsplit('/').next().unwrap();
    assert!(
        mine.contains(&format!("src=\"/install/{token}/logo\""))
            && mine.contains(&format!("rel=\"icon\" href=\"/install/{token}/favicon\"")),
        "{mine}"
    );
    let image = |which: &str, cookie: &str| {
        rt().block_on(async {
            let r = reqwest::Client::new()
                .get(format!("{}/install/{token}/{which}", m.cp.control_url))
                .header("cookie", cookie)
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let h = |n: &str| r.headers().get(n).map(|v| v.to_str().unwrap().to_owned());
            let (kind, csp) = (h("content-type"), h("content-security-policy"));
            (status, kind, csp, r.bytes().await.unwrap().to_vec())
        })
    };
    let (_, kind, csp, bytes) = image("logo", &customer.cookie);
    assert_eq!(kind.as_deref(), Some("image/svg+xml"));
    assert!(csp.unwrap().contains("sandbox"));
    assert_eq!(bytes, LOGO.as_bytes());
    let (_, kind, _, bytes) = image("favicon", &customer.cookie);
    assert_eq!(kind.as_deref(), Some("image/png"));
    assert_eq!(bytes, PNG);
    // Not to a browser with no cookie, nor to another one after the link
    // was used.
    assert_eq!(image("logo", "").0, 403);
    assert_eq!(image("logo", "nuon_customer=someone-else").0, 410);
}

/// With a template bucket (`nuon-ctl serve --stack-template-bucket`; moto's
/// S3 here, IAM enforced, the control plane's keys allowed only to put and
/// get objects), "Launch stack" puts the install's template in the bucket
/// and sends the browser to the quick-create page with a presigned link
/// to it; the launch link works once.
#[test]
fn with_a_template_bucket_launch_stack_puts_the_template_in_s3_for_the_console() {
    let Some(moto) = nuon_test_fixtures::moto::Moto::start().unwrap() else {
        return;
    };
    moto.aws(&["s3api", "create-bucket", "--bucket", "acme-templates"])
        .unwrap();
    let keys = moto
        .user("templates", &["s3:PutObject", "s3:GetObject"])
        .unwrap();
    let cp = nuon_tests::ControlPlane::start_with_env(
        "3s",
        &[
            "--stack-template-bucket",
            "s3://acme-templates/quick-create",
        ],
        &moto.env(&keys),
    )
    .unwrap();
    let owned = aws_files();
    let borrowed: Vec<(&str, &str)> = owned.iter().map(|(p, t)| (*p, t.as_str())).collect();
    let m = Manual::start_on(cp, &borrowed, None, |_| {}, &["--input", "team=vendor"]);
    let (url, _) = invite(&m, &["--name", "bucketed"]);
    let customer = Customer::installs(&url);
    let (_, mine) = customer.page(&customer.cookie);
    let launch = href_of(&mine, "launch-stack").unwrap_or_else(|| panic!("{mine}"));
    assert!(
        launch.starts_with("/stack-templates/ctt_")
            && !launch.contains(&url.rsplit('/').next().unwrap()[..20]),
        "the link goes by the control plane first, with a token of its own: {launch}"
    );
    let go = |path: &str| {
        rt().block_on(async {
            let r = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap()
                .get(format!("{}{path}", m.cp.control_url))
                .send()
                .await
                .unwrap();
            let to = r
                .headers()
                .get("location")
                .map(|v| v.to_str().unwrap().to_owned());
            (r.status().as_u16(), to, r.text().await.unwrap())
        })
    };
    let (status, to, body) = go(&launch);
    assert_eq!(status, 303, "{body}");
    let console = to.unwrap();
    assert!(
        console.starts_with(
            "https://console.aws.amazon.com/cloudformation/home#/stacks/create/review?"
        ),
        "{console}"
    );
    assert_eq!(
        param(&console, "stackName").as_deref(),
        Some("nuon-bucketed")
    );
    let template = param(&console, "templateURL").unwrap();
    assert!(
        template.starts_with(&format!("{}/acme-templates/quick-create/ins_", moto.url))
            && template.contains("X-Amz-Signature="),
        "a presigned link to the object: {template}"
    );
    // What the console would read: the install's template. (moto answers
    // a presigned GET with a 500 while it enforces IAM, so the object is
    // read as the administrator; the presigned link's form is checked
    // against AWS's worked example in `nuon_control::s3`'s tests.)
    let key = template
        .split_once("/acme-templates/")
        .unwrap()
        .1
        .split('?')
        .next()
        .unwrap()
        .to_owned();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("template.json");
    moto.aws(&[
        "s3api",
        "get-object",
        "--bucket",
        "acme-templates",
        "--key",
        &key,
        out.to_str().unwrap(),
    ])
    .unwrap();
    let body = std::fs::read_to_string(&out).unwrap();
    let json: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(json["AWSTemplateFormatVersion"], "2010-09-09");
    assert!(
        body.contains("stk_"),
        "its runner's one-time token is in it"
    );
    if have_tool("cfn-lint", "check CloudFormation templates") {
        crate::stack::cfn_lint(&out);
    }
    // The launch link works once; each drawing of the page makes a new
    // one and the one before dies; revoked, the invitation's links stop.
    let (status, _, body) = go(&launch);
    assert_eq!(status, 404);
    assert!(body.contains("works once"), "{body}");
    let (_, first) = customer.page(&customer.cookie);
    let (_, second) = customer.page(&customer.cookie);
    let (old, new) = (
        href_of(&first, "launch-stack").unwrap(),
        href_of(&second, "launch-stack").unwrap(),
    );
    assert_ne!(old, new);
    assert_eq!(go(&old).0, 404);
    assert_eq!(go(&new).0, 303);
    let (_, third) = customer.page(&customer.cookie);
    let last = href_of(&third, "launch-stack").unwrap();
    let listed: serde_json::Value =
        serde_json::from_str(&ok(m.cp.nuon(&["invitations", "list", "--json"]))).unwrap();
    let id = listed["invitations"][0]["id"].as_str().unwrap().to_owned();
    ok(m.cp.nuon(&["invitations", "revoke", &id]));
    assert_eq!(go(&last).0, 404);
}
