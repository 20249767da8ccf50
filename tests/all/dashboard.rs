//! The dashboard in real headless Chromium (Debian's `chromium` and
//! `chromium-driver`), against the real binaries and a real deploy: sign in
//! with the admin token, see the installs, approve a step in the browser;
//! a read-only token sees the pages and no button and its forged POST is
//! refused, a POST without the CSRF token is refused, another org's
//! install is not found, and hostile text shows as text with no script run.

use std::time::Duration;

use nuon_tests::webdriver::Chrome;
use nuon_tests::{ControlPlane, have_tool, rt};
use serde_json::{Value, json};

use crate::approvals::{FILES, waiting};
use crate::deploy::{Manual, ok, step, wait_workflow};

const XSS: &str = "<script>alert(1)</script>\"><img src=x onerror=alert(2)>";

/// axe-core's script (tests/browser, installed by `npm ci` there).
pub(crate) fn axe_source() -> String {
    let dir = nuon_tests::manifest_dir().join("browser");
    let path = dir.join("node_modules/axe-core/axe.min.js");
    if !path.is_file() {
        let done = std::process::Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(
            done,
            "`npm ci --prefix tests/browser` failed: cannot install axe-core"
        );
    }
    std::fs::read_to_string(path).unwrap()
}

/// The page's serious and critical accessibility violations, by axe-core.
pub(crate) fn run_axe(b: &Chrome, axe: &str) -> Vec<String> {
    let script = format!(
        "{axe}\nreturn axe.run(document, {{resultTypes: ['violations']}}).then(r => r.violations.filter(v => v.impact === 'serious' || v.impact === 'critical').map(v => v.id + ': ' + v.help + ' at ' + v.nodes.map(n => n.target.join(' ')).join(', ')));"
    );
    b.exec(&script, json!([]))
        .as_array()
        .unwrap_or_else(|| panic!("axe did not run"))
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_owned())
        .collect()
}

/// Clicks `css` (a form's button) and waits for the page the form loads.
pub(crate) fn submit(b: &Chrome, css: &str) {
    b.exec("window.beforeSubmit = true;", json!([]));
    b.click(css);
    b.wait_until("the form's answer", Duration::from_secs(20), |b| {
        b.exec(
            "return window.beforeSubmit !== true && document.readyState === 'complete';",
            json!([]),
        ) == json!(true)
    });
}

pub(crate) fn sign_in(b: &Chrome, base: &str, token: &str) {
    b.goto(&format!("{base}/login"));
    b.type_into("#token", token);
    b.click("form[action='/login'] button");
    b.wait_until(
        "the overview after signing in",
        Duration::from_secs(10),
        |b| b.url() == format!("{base}/"),
    );
}

fn sign_out(b: &Chrome) {
    b.click("form[action='/logout'] button");
    b.wait_until("the sign-in page", Duration::from_secs(10), |b| {
        b.url().ends_with("/login")
    });
}

/// A POST from the page's own script: its status and the text it answers.
fn post_from_page(b: &Chrome, path: &str, body: &str) -> (u64, String) {
    let v = b.exec(
        "return fetch(arguments[0], {method: 'POST', headers: {'content-type': 'application/x-www-form-urlencoded'}, body: arguments[1], redirect: 'manual'}).then(async r => [r.status, await r.text()]);",
        json!([path, body]),
    );
    (
        v[0].as_u64().unwrap(),
        v[1].as_str().unwrap_or_default().to_owned(),
    )
}

#[test]
fn the_dashboard_signs_in_shows_the_fleet_approves_in_the_browser_and_refuses_what_it_must() {
    if !have_tool("terraform", "deploy the app the dashboard shows") {
        return;
    }
    let Some(b) = Chrome::start() else { return };
    let cp = ControlPlane::start("5s").unwrap();
    let base = cp.control_url.clone();
    // The approvals app, with an action and a runbook run from the page
    // with their inputs.
    let mut files = FILES.to_vec();
    files.extend([
        (
            "actions/greet.toml",
            "name = \"greet\"\ntimeout = \"1m\"\n\n[[inputs]]\nname = \"WHO\"\nrequired = true\n\n[[triggers]]\ntype = \"manual\"\n\n[[steps]]\nname = \"say\"\ncommand = \"echo \\\"hello $WHO\\\"\"\n",
        ),
        (
            "runbooks/hello.toml",
            "name = \"hello\"\ndescription = \"Says hello\"\n\n[[input]]\nname = \"WHO\"\nrequired = true\n\n[[steps]]\nname = \"greet\"\ntype = \"action\"\naction_name = \"greet\"\n",
        ),
    ]);
    let mut m = Manual::start_on(cp, &files, None, |_| {}, &["--approval", "prompt"]);
    // Another app with an install whose input carries hostile text.
    let hello = nuon_tests::manifest_dir().join("../examples/apps/hello");
    ok(m.cp.nuon(&["apps", "create", "hello"]));
    ok(m.cp.nuon(&["apps", "sync", hello.to_str().unwrap(), "--app", "hello"]));
    ok(m.cp.nuon(&["builds", "create", "--app", "hello", "--wait"]));
    ok(m.cp.nuon(&[
        "installs",
        "create",
        "--app",
        "hello",
        "--name",
        "hostile",
        "--input",
        &format!("greeting={XSS}"),
        "--input",
        "api_key=k3y-demo",
    ]));
    // A provision whose first apply waits for an approval.
    let wf = rt()
        .block_on(m.cp.client().create_workflow(
            "demo",
            nuon_core::workflow::WorkflowKind::Provision,
            None,
        ))
        .expect("provision")
        .id
        .to_string();
    waiting(&m, &wf, "apply db");

    // The admin signs in by a one-time link (what `nuon dev` prints): its
    // page says who and where, and signs in when asked. The overview has
    // both installs and the one that waits for an approval.
    let link = rt()
        .block_on(m.cp.client().create_sign_in_code())
        .expect("a sign-in link");
    b.goto(&link.url);
    assert!(b.source().contains("Sign in?"), "{}", b.source());
    b.click("form[action='/login/code'] button");
    b.wait_until(
        "the overview after the sign-in link",
        Duration::from_secs(10),
        |b| b.url() == format!("{base}/"),
    );
    let page = b.source();
    assert!(
        page.contains(">demo<") && page.contains(">hostile<"),
        "{page}"
    );
    assert!(
        b.find(&format!("a[href='/workflows/{wf}']")).is_some(),
        "the waiting deploy is linked: {page}"
    );
    let cookies = b.exec("return document.cookie;", json!([]));
    assert_eq!(
        cookies,
        Value::String(String::new()),
        "the session cookie is HttpOnly"
    );

    // Hostile text is text: no dialog, no injected element.
    let hostile = m.cp.client();
    let inst = rt().block_on(hostile.get_install("hostile")).unwrap();
    b.goto(&format!("{base}/installs/{}", inst.id));
    let shown = b
        .exec("return document.body.innerText;", json!([]))
        .as_str()
        .unwrap()
        .to_owned();
    assert!(shown.contains(XSS), "{shown}");
    assert_eq!(
        b.exec(
            "return document.querySelectorAll('img, main script').length;",
            json!([])
        ),
        json!(0)
    );
    assert_eq!(b.dialog(), None, "a script ran");
    assert!(
        !shown.contains("k3y-demo"),
        "a sensitive input is shown: {shown}"
    );

    // Approve in the browser; then, with no reload, the page follows the
    // steps to the end (Server-Sent Events) and names who approved.
    b.goto(&format!("{base}/workflows/{wf}"));
    b.click("form[action$='/approve'] button");
    // It asks first, showing the plan it applies.
    b.wait_until("the confirmation", Duration::from_secs(10), |b| {
        b.find("h1").is_some() && b.text("h1") == "Approve apply db?"
    });
    assert!(
        b.source().contains("class=\"add\">+1<"),
        "the plan's summary: {}",
        b.source()
    );
    b.exec("window.beforeApproval = true;", json!([]));
    b.click("form[action$='/approve'] button");
    b.wait_until(
        "the workflow page after approving",
        Duration::from_secs(10),
        |b| {
            b.exec(
                "return window.beforeApproval !== true && document.readyState === 'complete';",
                json!([]),
            ) == json!(true)
        },
    );
    b.exec("window.notReloaded = true;", json!([]));
    let badge = |b: &Chrome, step: &str| {
        b.exec(
            "return document.querySelector(`tr[data-step='${arguments[0]}'] .badge`).textContent;",
            json!([step]),
        )
    };
    // The running step's log streams into the page below the steps.
    b.wait_until(
        "the running step's log in the page",
        Duration::from_secs(60),
        |b| {
            b.exec(
                "return document.querySelectorAll('#current-log tbody tr').length;",
                json!([]),
            )
            .as_u64()
            .unwrap_or(0)
                > 0
        },
    );
    b.wait_until(
        "apply db to turn green in place",
        Duration::from_secs(60),
        |b| badge(b, "apply db") == json!("succeeded"),
    );
    b.wait_until(
        "the workflow to end in place",
        Duration::from_secs(60),
        |b| b.text("#status") == "succeeded",
    );
    assert_eq!(
        b.exec("return window.notReloaded === true;", json!([])),
        json!(true)
    );
    // Who approved, by the token's name (never its id).
    let approval = b.text("tr[data-step='apply db'] .approval");
    assert!(
        approval.starts_with("approved by ") && approval.ends_with("(token)"),
        "{approval}"
    );
    let w = wait_workflow(&m.cp.client(), &wf, crate::deploy::ended);
    assert_eq!(w.status.as_str(), "succeeded", "{w:#?}");
    assert!(
        step(&w, "apply db")
            .approved_by
            .as_deref()
            .is_some_and(|a| a.starts_with("tok_"))
    );
    b.goto(&format!("{base}/workflows/{wf}"));
    assert!(b.source().contains("succeeded"));

    // The overview: every component of demo deployed; the filters.
    b.goto(&format!("{base}/"));
    let cells = b.exec(
        "return [...document.querySelectorAll('tbody tr')].find(r => r.querySelector('a').textContent === 'demo').querySelectorAll('.cell').length;",
        json!([]),
    );
    assert_eq!(cells, json!(2), "{}", b.source());
    let ok_cells = b.exec(
        "return [...[...document.querySelectorAll('tbody tr')].find(r => r.querySelector('a').textContent === 'demo').querySelectorAll('.cell')].filter(c => c.classList.contains('ok')).length;",
        json!([]),
    );
    assert_eq!(
        ok_cells,
        json!(2),
        "every component deployed: {}",
        b.source()
    );
    // The install's page shows what each component output.
    let demo_install = rt().block_on(m.cp.client().get_install("demo")).unwrap().id;
    b.goto(&format!("{base}/installs/{demo_install}"));
    let outputs = b.exec(
        "return [...document.querySelectorAll('ul.outputs li')].map(l => l.textContent);",
        json!([]),
    );
    assert!(
        outputs.as_array().is_some_and(|o| o
            .iter()
            .any(|l| l.as_str().is_some_and(|l| l.starts_with("at = ")))),
        "db's output: {outputs}"
    );
    // Never provisioned: not deployed (never healthy, whatever its runner).
    b.goto(&format!("{base}/?show=not_deployed"));
    let page = b.source();
    assert!(
        page.contains(">hostile<") && !page.contains(">demo<"),
        "{page}"
    );
    // The first view counts the whole fleet from what the replica keeps;
    // a page far past the last shows the last.
    b.goto(&format!("{base}/?page=18446744073709551615"));
    let page = b.source();
    assert!(
        page.contains("<strong>2</strong>installs")
            && page.contains(">hostile<")
            && page.contains(">demo<"),
        "{page}"
    );

    // A job's log grows in the page as the runner sends it, stdout and
    // stderr told apart, hostile lines as text.
    // An ad-hoc command to an install's runner is a debug command: its
    // operator allows them here.
    m.restart_runner_with(&["--debug-commands", "any"]);
    let script = format!("echo first; sleep 3; echo '{XSS}'; echo oops >&2; echo last-line");
    let job: Value = serde_json::from_str(&ok(m.cp.nuon(&[
        "--json", "jobs", "exec", "--runner", "demo", "--", "sh", "-c", &script,
    ])))
    .unwrap();
    let job = job["id"].as_str().unwrap().to_owned();
    b.goto(&format!("{base}/jobs/{job}"));
    b.exec("window.notReloaded = true;", json!([]));
    b.wait_until("the log's last line, live", Duration::from_secs(60), |b| {
        b.exec(
            "return document.getElementById('log').getAttribute('data-complete');",
            json!([]),
        ) == json!("true")
    });
    let text = b.exec(
        "return document.getElementById('log').innerText;",
        json!([]),
    );
    let text = text.as_str().unwrap();
    assert!(
        text.contains("first") && text.contains("last-line") && text.contains(XSS),
        "{text}"
    );
    assert_eq!(
        b.exec("return window.notReloaded === true;", json!([])),
        json!(true)
    );
    let rows = b.exec(
        "return document.querySelectorAll('#log tbody tr').length;",
        json!([]),
    );
    assert_eq!(rows, json!(4), "each line once: {text}");
    let live = b.exec(
        "return document.querySelectorAll('#log tr[data-live]').length;",
        json!([]),
    );
    assert!(live.as_u64().unwrap() >= 2, "lines came live: {live}");
    assert_eq!(
        b.exec(
            "return document.querySelectorAll('#log tr.stderr').length;",
            json!([])
        ),
        json!(1)
    );
    assert_eq!(
        b.exec("return document.querySelectorAll('img').length;", json!([])),
        json!(0)
    );
    assert_eq!(b.dialog(), None, "a script ran");
    b.type_into("#log-filter", "last");
    let shown = b.exec(
        "return [...document.querySelectorAll('#log tbody tr')].filter(r => !r.hidden).length;",
        json!([]),
    );
    assert_eq!(shown, json!(1), "a search keeps the matching line");
    let raw = b.exec(
        "return fetch(arguments[0]).then(r => r.text());",
        json!([format!("/jobs/{job}/raw")]),
    );
    assert!(raw.as_str().unwrap().contains("last-line\n"), "{raw}");

    // The apps: config versions with a diff of two, the components and
    // their dependency graph, the builds.
    let changed = tempfile::tempdir().unwrap();
    let copied = std::process::Command::new("cp")
        .arg("-r")
        .arg(&hello)
        .arg(changed.path().join("hello"))
        .status()
        .unwrap();
    assert!(copied.success());
    let sandbox = changed.path().join("hello/sandbox.toml");
    let mut text = std::fs::read_to_string(&sandbox).unwrap();
    text.push_str("# a second version\n");
    std::fs::write(&sandbox, text).unwrap();
    // The app's display name, from its config, carries hostile text too.
    let metadata = changed.path().join("hello/metadata.toml");
    let text = std::fs::read_to_string(&metadata).unwrap();
    let text = text.replace(
        "display_name = \"Hello\"",
        &format!("display_name = '{XSS}'"),
    );
    std::fs::write(&metadata, text).unwrap();
    ok(m.cp.nuon(&[
        "apps",
        "sync",
        changed.path().join("hello").to_str().unwrap(),
        "--app",
        "hello",
    ]));
    b.goto(&format!("{base}/apps"));
    b.click("a[href^='/apps/']");
    let graph = |b: &Chrome| {
        b.exec(
            "return [document.querySelectorAll('svg.graph g.node').length, document.querySelectorAll('svg.graph line.edge').length];",
            json!([]),
        )
    };
    let apps: Vec<String> = b
        .exec(
            "return [...document.querySelectorAll('main a')].map(a => a.textContent);",
            json!([]),
        )
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert!(!apps.is_empty());
    let demo_app = rt()
        .block_on(m.cp.client().get_install("demo"))
        .unwrap()
        .app_id;
    b.goto(&format!("{base}/apps/{demo_app}"));
    assert_eq!(
        graph(&b),
        json!([2, 1]),
        "db and app, app -> db: {}",
        b.source()
    );
    assert!(b.source().contains("succeeded"), "its builds");
    let hello_app = inst.app_id.clone();
    b.goto(&format!("{base}/apps/{hello_app}"));
    b.click("form[action$='/diff'] button");
    b.wait_until("the diff", Duration::from_secs(10), |b| {
        b.url().contains("/diff?")
    });
    let ins = b.exec(
        "return [...document.querySelectorAll('pre.diff ins')].map(e => e.textContent);",
        json!([]),
    );
    assert_eq!(
        ins,
        json!([
            format!("+ display_name = '{XSS}'\n"),
            "+ # a second version\n"
        ]),
        "{}",
        b.source()
    );

    // The display name is text, on the app's page and the overview.
    for p in [format!("{base}/apps/{hello_app}"), format!("{base}/")] {
        b.goto(&p);
        let shown = b.exec("return document.body.innerText;", json!([]));
        assert!(shown.as_str().unwrap().contains(XSS), "{p}: {shown}");
        assert_eq!(
            b.exec("return document.querySelectorAll('img').length;", json!([])),
            json!(0)
        );
        assert_eq!(b.dialog(), None, "a script ran on {p}");
    }

    // The runners: the install's runner is there, with its version.
    b.goto(&format!("{base}/runners"));
    let page = b.source();
    assert!(
        page.contains(">demo<") && page.contains(env!("CARGO_PKG_VERSION")),
        "{page}"
    );

    // Every page: no serious or critical accessibility violation (axe-core),
    // in light and dark, and nothing wider than a phone at 390 px.
    let pages = [
        ("overview", "/".to_owned()),
        ("install", format!("/installs/{}", inst.id)),
        ("workflow", format!("/workflows/{wf}")),
        ("job-log", format!("/jobs/{job}")),
        ("apps", "/apps".to_owned()),
        ("app", format!("/apps/{demo_app}")),
        ("config-diff", format!("/apps/{hello_app}/diff?from=1&to=2")),
        ("runners", "/runners".to_owned()),
        ("inputs", format!("/installs/{}/inputs", inst.id)),
    ];
    let axe = axe_source();
    // For a reviewer: each page, light, dark and at a phone's width.
    let shots = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
    for dark in [false, true] {
        let scheme = if dark { "dark" } else { "light" };
        b.cdp(
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
        );
        for (name, p) in &pages {
            b.goto(&format!("{base}{p}"));
            b.screenshot(&shots.join(format!("{scheme}-{name}.png")));
            let found = run_axe(&b, &axe);
            assert!(found.is_empty(), "{p} ({scheme}): {found:#?}");
        }
    }
    let bg = b.exec(
        "return getComputedStyle(document.body).backgroundColor;",
        json!([]),
    );
    assert_eq!(bg, json!("rgb(13, 17, 23)"), "dark mode");
    b.set_size(390, 844);
    for (name, p) in &pages {
        b.goto(&format!("{base}{p}"));
        b.screenshot(&shots.join(format!("phone-{name}.png")));
        let wide = b.exec(
            "return document.documentElement.scrollWidth <= window.innerWidth;",
            json!([]),
        );
        assert_eq!(wide, json!(true), "{p} is wider than a phone");
    }
    b.set_size(1280, 900);

    // The lifecycle verbs, each through a confirmation. A bad value is
    // refused, saying which and why, and nothing is changed.
    b.goto(&format!("{base}/installs/{}/inputs", inst.id));
    b.exec(
        "document.getElementById('input-greeting').value = 'lost'; document.getElementById('input-replicas').value = 'many';",
        json!([]),
    );
    b.click("form[action$='/inputs'] button.primary");
    b.wait_until("the refusal of a bad value", Duration::from_secs(10), |b| {
        b.text("h1").starts_with("400")
    });
    assert!(b.text("main").contains("replicas"), "{}", b.text("main"));
    let kept = rt().block_on(m.cp.client().get_install("hostile")).unwrap();
    assert_eq!(kept.inputs["greeting"], json!(XSS));
    // An input changed in its form: the dry run says what redeploys, then
    // yes starts it.
    b.goto(&format!("{base}/installs/{}/inputs", inst.id));
    b.exec(
        "document.getElementById('input-greeting').value = 'hi there';",
        json!([]),
    );
    b.click("form[action$='/inputs'] button.primary");
    b.wait_until(
        "the input change's confirmation",
        Duration::from_secs(10),
        |b| b.text("h1") == "Change greeting of hostile?",
    );
    let asked = b.text("main");
    assert!(asked.contains("Redeployed: app"), "{asked}");
    b.click("form[action$='/inputs'] button");
    b.wait_until("the redeploy's workflow", Duration::from_secs(10), |b| {
        b.url().contains("/workflows/")
    });
    let redeploy = b.url().rsplit('/').next().unwrap().to_owned();
    let changed = rt().block_on(m.cp.client().get_install("hostile")).unwrap();
    assert_eq!(changed.inputs["greeting"], json!("hi there"));
    assert!(
        changed
            .inputs
            .get("replicas")
            .is_none_or(|v| v == &json!(2) || v == &json!("2")),
        "an input left as it was is not sent: {:?}",
        changed.inputs
    );
    // The app cannot go while it has an install.
    b.goto(&format!("{base}/apps/{hello_app}"));
    b.click("form[action$='/delete'] button");
    b.wait_until("the app's confirmation", Duration::from_secs(10), |b| {
        b.text("h1") == "Delete app hello?"
    });
    b.type_into("#confirm-name", "hello");
    b.click("form[action$='/delete'] button");
    b.wait_until("the refusal", Duration::from_secs(10), |b| {
        b.text("h1").starts_with("409")
    });
    assert!(b.text("main").contains("hostile"), "{}", b.text("main"));
    // Forgetting asks for the install's name; a wrong one asks again.
    ok(m.cp.nuon(&["workflows", "cancel", &redeploy]));
    b.goto(&format!("{base}/installs/{}", inst.id));
    b.click("form[action$='/forget'] button");
    b.wait_until("the forget confirmation", Duration::from_secs(10), |b| {
        b.text("h1") == "Forget install hostile?"
    });
    b.type_into("#confirm-name", "hostil");
    b.click("form[action$='/forget'] button");
    b.wait_until("asked again", Duration::from_secs(10), |b| {
        b.find("p.error").is_some()
    });
    assert!(rt().block_on(m.cp.client().get_install("hostile")).is_ok());
    b.type_into("#confirm-name", "hostile");
    b.click("form[action$='/forget'] button");
    b.wait_until("forgotten", Duration::from_secs(30), |b| {
        b.text("h1") == "Install hostile forgotten"
    });
    assert!(
        b.text("main").contains("not deprovisioned"),
        "{}",
        b.text("main")
    );
    assert!(rt().block_on(m.cp.client().get_install("hostile")).is_err());
    // Labels set and removed from the install's page; a bad one refused.
    let demo_id = rt().block_on(m.cp.client().get_install("demo")).unwrap().id;
    b.goto(&format!("{base}/installs/{demo_id}"));
    b.type_into("#labels", "tier=staging team=core");
    submit(&b, "form[action$='/labels'] button");
    let labels = |m: &Manual| {
        rt().block_on(m.cp.client().get_install("demo"))
            .unwrap()
            .labels
    };
    assert_eq!(
        labels(&m),
        [
            ("team".to_string(), "core".to_string()),
            ("tier".to_string(), "staging".to_string())
        ]
        .into()
    );
    b.type_into("#labels", "team-");
    submit(&b, "form[action$='/labels'] button");
    assert_eq!(
        labels(&m),
        [("tier".to_string(), "staging".to_string())].into()
    );
    b.type_into("#labels", "bad key=1");
    submit(&b, "form[action$='/labels'] button");
    assert!(b.text("h1").starts_with("400"), "{}", b.source());
    // A group made on the groups page selects demo by its label; deleted
    // once confirmed.
    b.goto(&format!("{base}/groups"));
    b.type_into("#group-name", "staging");
    b.type_into("#group-selector", "tier=staging");
    submit(&b, "form[action='/groups'] button");
    let row = b.exec(
        "const r = [...document.querySelectorAll('tbody tr')].find(r => r.cells[0].textContent === 'staging'); return r ? r.cells[2].textContent : null;",
        json!([]),
    );
    assert_eq!(row, json!("demo"), "{}", b.source());
    submit(&b, "form[action='/groups/staging/delete'] button");
    assert_eq!(b.text("h1"), "Delete group staging?");
    submit(&b, "form[action='/groups/staging/delete'] button");
    assert!(
        rt().block_on(m.cp.client().list_groups())
            .unwrap()
            .groups
            .is_empty()
    );
    // A build started from the app's page.
    let builds = |m: &Manual| {
        rt().block_on(m.cp.client().list_builds(demo_app.as_str()))
            .unwrap()
            .builds
            .len()
    };
    let before = builds(&m);
    b.goto(&format!("{base}/apps/{demo_app}"));
    submit(&b, "form[action$='/builds'] button");
    assert!(builds(&m) > before, "a build was started");
    // A workflow started from the install's page, once confirmed: a
    // drift check of db, which plans and changes nothing.
    b.goto(&format!("{base}/installs/{demo_id}"));
    b.exec(
        "document.getElementById('start-kind').value = 'drift'; document.getElementById('start-component').value = 'db';",
        json!([]),
    );
    b.click("form[action$='/workflows'] button");
    b.wait_until("the start's confirmation", Duration::from_secs(10), |b| {
        b.text("h1") == "Start drift of db on demo?"
    });
    b.click("form[action$='/workflows'] button");
    b.wait_until("the drift check's page", Duration::from_secs(10), |b| {
        b.url().contains("/workflows/")
    });
    let drift = b.url().rsplit('/').next().unwrap().to_owned();
    let ended = wait_workflow(&m.cp.client(), &drift, |w| !w.status.is_active());
    assert_eq!(ended.kind, nuon_core::workflow::WorkflowKind::Drift);
    assert_eq!(ended.component.as_deref(), Some("db"));
    // A runbook run from the page with its input, which reaches its
    // action; the confirmation names them.
    b.goto(&format!("{base}/installs/{demo_id}"));
    b.type_into("#start-runbook-inputs", "WHO=the page");
    b.click("form:has(#start-runbook) button");
    b.wait_until("the runbook's confirmation", Duration::from_secs(10), |b| {
        b.text("h1") == "Start runbook hello with WHO=the page on demo?"
    });
    b.click("form[action$='/workflows'] button");
    b.wait_until("the runbook's page", Duration::from_secs(10), |b| {
        b.url().contains("/workflows/")
    });
    let run = b.url().rsplit('/').next().unwrap().to_owned();
    let ended = wait_workflow(&m.cp.client(), &run, |w| !w.status.is_active());
    assert_eq!(ended.kind, nuon_core::workflow::WorkflowKind::Runbook);
    assert_eq!(ended.status, "succeeded", "{ended:#?}");
    assert_eq!(ended.inputs["WHO"], "the page");
    // An action whose required input is missing is refused, saying so.
    b.goto(&format!("{base}/installs/{demo_id}"));
    b.click("form:has(#start-action) button");
    b.wait_until("the action's confirmation", Duration::from_secs(10), |b| {
        b.text("h1") == "Start action greet on demo?"
    });
    b.click("form[action$='/workflows'] button");
    b.wait_until("the refusal", Duration::from_secs(10), |b| {
        b.text("body").contains("needs input \"WHO\"")
    });
    // The install's own Terraform variables for app, set from its page:
    // it is deployed with them, and the page shows them.
    b.goto(&format!("{base}/installs/{demo_id}"));
    b.exec(
        "const t = document.getElementById('override-target'); t.value = 'app/tf_vars'; t.closest('details').open = true;",
        json!([]),
    );
    b.type_into("#override-values", "db = \"from the page\"\n");
    b.click("form[action$='/overrides'] button");
    b.wait_until("the override's deploy", Duration::from_secs(10), |b| {
        b.url().contains("/workflows/")
    });
    let run = b.url().rsplit('/').next().unwrap().to_owned();
    let ended = wait_workflow(&m.cp.client(), &run, |w| !w.status.is_active());
    assert_eq!(ended.kind, nuon_core::workflow::WorkflowKind::Deploy);
    assert_eq!(ended.component.as_deref(), Some("app"));
    assert_eq!(ended.status, "succeeded", "{ended:#?}");
    let list =
        ok(m.cp.nuon(&["--json", "installs", "components", "list", "demo"]));
    assert!(list.contains(r#"db = \"from the page\""#), "{list}");
    b.goto(&format!("{base}/installs/{demo_id}"));
    assert!(
        b.source().contains("Terraform variables</summary>"),
        "{}",
        b.source()
    );
    // Recorded as the API records it, under the person's operation.
    let audit = ok(m.cp.nuon(&["--json", "audit", "list"]));
    assert!(
        [
            "updateInstallInputs",
            "forgetInstall",
            "deleteApp",
            "createWorkflow",
            "setInstallLabels",
            "createBuilds",
            "createInstallGroup",
            "deleteInstallGroup",
            "setInstallComponentOverrides"
        ]
        .iter()
        .all(|op| audit.contains(op)),
        "{audit}"
    );

    // A long log keeps only its last 1,000 lines in the live view.
    let long: Value = serde_json::from_str(&ok(m.cp.nuon(&[
        "--json",
        "jobs",
        "exec",
        "--runner",
        "demo",
        "--",
        "sh",
        "-c",
        "sleep 2; seq 1 6000",
    ])))
    .unwrap();
    let long = long["id"].as_str().unwrap().to_owned();
    b.goto(&format!("{base}/jobs/{long}"));
    b.wait_until("the long log, live", Duration::from_secs(60), |b| {
        b.exec(
            "return document.getElementById('log').getAttribute('data-complete');",
            json!([]),
        ) == json!("true")
    });
    let (rows, last, trimmed) = (
        b.exec(
            "return document.querySelectorAll('#log tbody tr').length;",
            json!([]),
        ),
        b.exec(
            "return document.querySelector('#log tbody tr:last-child pre').textContent;",
            json!([]),
        ),
        b.exec(
            "return document.getElementById('log').hasAttribute('data-trimmed');",
            json!([]),
        ),
    );
    assert_eq!(
        (rows, last, trimmed),
        (json!(1000), json!("6000"), json!(true))
    );

    // A POST without the session's CSRF token is refused.
    let (status, _) = post_from_page(&b, &format!("/workflows/{wf}/retry"), "csrf=forged");
    assert_eq!(status, 403);

    // Another org's install is not found.
    let other = m.cp.create_org("other").unwrap();
    let as_other = |args: &[&str]| {
        nuon_tests::ours("nuon")
            .args(args)
            .env("NUON_API_URL", &base)
            .env("NUON_TOKEN", &other)
            .output()
            .unwrap()
    };
    ok(as_other(&["apps", "create", "elsewhere"]));
    ok(as_other(&[
        "apps",
        "sync",
        hello.to_str().unwrap(),
        "--app",
        "elsewhere",
    ]));
    let theirs: Value = serde_json::from_str(&ok(as_other(&[
        "--json",
        "installs",
        "create",
        "--app",
        "elsewhere",
        "--name",
        "theirs",
        "--input",
        "api_key=k3y-demo",
    ])))
    .unwrap();
    let theirs = theirs["install"]["id"].as_str().unwrap().to_owned();
    b.goto(&format!("{base}/installs/{theirs}"));
    let page = b.source();
    assert!(page.contains("404") && !page.contains("theirs"), "{page}");
    b.goto(&format!("{base}/"));
    sign_out(&b);

    // A read-only token: the same pages, no button; a forged POST with a
    // good CSRF token is refused as the API refuses it.
    let reader = rt()
        .block_on(
            m.cp.client()
                .create_token("viewer", nuon_core::wire::TokenScope::Read),
        )
        .unwrap();
    sign_in(&b, &base, &reader.secret);
    b.goto(&format!("{base}/workflows/{wf}"));
    assert_eq!(
        b.exec(
            "return document.querySelectorAll('.actions button').length;",
            json!([])
        ),
        json!(0)
    );
    let csrf = b
        .exec(
            "return document.querySelector(\"input[name='csrf']\").value;",
            json!([]),
        )
        .as_str()
        .unwrap()
        .to_owned();
    let (status, text) = post_from_page(
        &b,
        &format!("/workflows/{wf}/retry"),
        &format!("csrf={csrf}"),
    );
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("read-only"), "{text}");
    // Nor may it start a workflow, or change or delete an install.
    b.goto(&format!("{base}/installs/{demo_id}"));
    assert!(
        b.find("form[action$='/delete']").is_none(),
        "{}",
        b.source()
    );
    assert!(
        b.find("form[action$='/workflows']").is_none(),
        "{}",
        b.source()
    );
    let (status, text) = post_from_page(
        &b,
        &format!("/installs/{demo_id}/workflows"),
        &format!("csrf={csrf}&confirm=yes&kind=deploy"),
    );
    assert_eq!(status, 403, "{text}");
    let (status, text) = post_from_page(
        &b,
        &format!("/installs/{demo_id}/delete"),
        &format!("csrf={csrf}&confirm=yes&name=demo"),
    );
    assert_eq!(status, 403, "{text}");
    b.goto(&format!("{base}/people"));
    assert!(b.find("form[action='/tokens']").is_none(), "{}", b.source());
    sign_out(&b);
    // Signed out: the session is gone on the server too.
    b.goto(&format!("{base}/"));
    assert!(b.url().ends_with("/login"));

    // People and tokens, as the admin: invite, change the role, remove
    // (once confirmed); a token made on the page works, and revoked
    // there, it no longer does.
    sign_in(&b, &base, &m.cp.admin_token);
    b.goto(&format!("{base}/people"));
    b.type_into("#invite-email", "Ada@example.com");
    b.exec(
        "document.getElementById('invite-role').value = 'deployer';",
        json!([]),
    );
    b.click("form[action='/people/invite'] button");
    b.wait_until("the invited person", Duration::from_secs(10), |b| {
        b.text("main").contains("ada@example.com")
    });
    let role_of = || {
        rt().block_on(m.cp.client().list_users())
            .unwrap()
            .users
            .into_iter()
            .find(|u| u.email == "ada@example.com")
            .map(|u| u.role.as_str().to_owned())
    };
    assert_eq!(role_of().as_deref(), Some("deployer"));
    b.exec(
        "document.querySelector(\"select[id^='role-']\").value = 'viewer';",
        json!([]),
    );
    submit(&b, "form[action$='/role'] button");
    assert_eq!(role_of().as_deref(), Some("viewer"));
    b.click("form[action$='/remove'] button");
    b.wait_until("the removal's confirmation", Duration::from_secs(10), |b| {
        b.text("h1") == "Remove this person?"
    });
    submit(&b, "form[action$='/remove'] button");
    assert_eq!(role_of(), None);
    b.type_into("#token-name", "from-the-page");
    b.exec(
        "document.getElementById('token-scope').value = 'read';",
        json!([]),
    );
    b.click("form[action='/tokens'] button");
    b.wait_until("the token's secret", Duration::from_secs(10), |b| {
        b.find("#token-secret").is_some()
    });
    let secret = b.text("#token-secret");
    let as_page_token = m.cp.client_with(&secret);
    assert!(rt().block_on(as_page_token.list_installs()).is_ok());
    b.goto(&format!("{base}/people"));
    let revoke = b
        .exec(
            "return [...document.querySelectorAll('tr')].find(r => r.textContent.includes('from-the-page')).querySelector(\"form[action$='/revoke']\").getAttribute('action');",
            json!([]),
        )
        .as_str()
        .unwrap()
        .to_owned();
    b.click(&format!("form[action='{revoke}'] button"));
    b.wait_until(
        "the revocation's confirmation",
        Duration::from_secs(10),
        |b| b.text("h1") == "Revoke this token?",
    );
    submit(&b, &format!("form[action='{revoke}'] button"));
    assert!(rt().block_on(as_page_token.list_installs()).is_err());

    // A rollout planned from the app's page (the dry run names who gets
    // it, in which wave), started once confirmed, and cancelled from its
    // page.
    ok(m.cp.nuon(&["installs", "label", "demo", "tier=prod"]));
    let release: Value = serde_json::from_str(&ok(m.cp.nuon(&[
        "--json",
        "releases",
        "create",
        "--app",
        demo_app.as_str(),
    ])))
    .unwrap();
    let release = release["id"].as_str().unwrap().to_owned();
    b.goto(&format!("{base}/apps/{demo_app}"));
    b.type_into(&format!("#to-{release}"), "tier=prod");
    b.click(&format!(
        "form[action='/releases/{release}/rollouts'] button"
    ));
    b.wait_until("the rollout's plan", Duration::from_secs(10), |b| {
        b.text("h1") == format!("Roll release {release} out to tier=prod?")
    });
    assert!(b.text("main").contains("demo"), "{}", b.text("main"));
    b.click(&format!(
        "form[action='/releases/{release}/rollouts'] button"
    ));
    b.wait_until("the rollout's page", Duration::from_secs(10), |b| {
        b.url().contains("/rollouts/rol_")
    });
    let rollout = b.url().rsplit('/').next().unwrap().to_owned();
    assert!(b.text("main").contains("demo"), "{}", b.text("main"));
    b.click(&format!("form[action='/rollouts/{rollout}/cancel'] button"));
    b.wait_until("the cancel's confirmation", Duration::from_secs(10), |b| {
        b.text("h1") == "Cancel this rollout?"
    });
    // A confirmation page passes axe-core too.
    let found = run_axe(&b, &axe);
    assert!(found.is_empty(), "a confirmation: {found:#?}");
    b.screenshot(&shots.join("confirmation.png"));
    b.click(&format!("form[action='/rollouts/{rollout}/cancel'] button"));
    b.wait_until("cancelled", Duration::from_secs(10), |b| {
        b.text("main").contains("cancelling")
    });
    b.goto(&format!("{base}/rollouts"));
    assert!(b.find(&format!("a[href='/rollouts/{rollout}']")).is_some());
    for scheme in ["light", "dark"] {
        b.cdp(
            "Emulation.setEmulatedMedia",
            json!({"features": [{"name": "prefers-color-scheme", "value": scheme}]}),
        );
        for (name, p) in [
            ("people", "/people".to_owned()),
            ("rollouts", "/rollouts".to_owned()),
            ("rollout", format!("/rollouts/{rollout}")),
            ("groups", "/groups".to_owned()),
        ] {
            b.goto(&format!("{base}{p}"));
            b.screenshot(&shots.join(format!("{scheme}-{name}.png")));
            let found = run_axe(&b, &axe);
            assert!(found.is_empty(), "{p} ({scheme}): {found:#?}");
        }
    }
}

/// An admin creates an install from the app's page: a form made from the
/// app's config (inputs by group, secrets, toggles, the install's own
/// values), checked by axe; a refusal by the API shows the form again
/// with the reason and what was typed (secrets excepted); the answer
/// shows the runner's token once, which the Runner API takes, and the
/// install is as the form said.
#[test]
fn an_admin_creates_an_install_from_the_dashboard() {
    let Some(b) = Chrome::start() else { return };
    let cp = ControlPlane::start("5s").unwrap();
    let base = cp.control_url.clone();
    let dir = tempfile::tempdir().unwrap();
    let tf_component = |name: &str, extra: &str| {
        format!(
            "name = \"{name}\"\ntype = \"terraform_module\"\nterraform_version = \">= 1.5\"\npath = \"tf\"\n{extra}"
        )
    };
    let files = [
        ("metadata.toml", "version = \"v2\"\n".to_owned()),
        (
            "inputs.toml",
            "[[group]]\nname = \"network\"\ndisplay_name = \"Network settings\"\ndescription = \"Where the shop answers\"\n\n[[input]]\nname = \"domain\"\ngroup = \"network\"\ndescription = \"The shop's domain\"\nrequired = true\n\n[[input]]\nname = \"replicas\"\ndefault = \"2\"\n\n[[input]]\nname = \"build_id\"\ninternal = true\ndefault = \"b1\"\n".into(),
        ),
        (
            "secrets.toml",
            "[[secret]]\nname = \"db_password\"\ndisplay_name = \"Database password\"\ndescription = \"The database user's password\"\nrequired = true\n".into(),
        ),
        ("components/db.toml", tf_component("db", "")),
        (
            "components/cache.toml",
            tf_component("cache", "toggleable = true\ndefault_enabled = false\n"),
        ),
        (
            "components/search.toml",
            tf_component("search", "toggleable = true\n"),
        ),
        ("tf/main.tf", "variable \"size\" {\n  default = \"s\"\n}\n".into()),
    ];
    for (path, text) in &files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    ok(cp.nuon(&["apps", "create", "shop"]));
    ok(cp.nuon(&[
        "apps",
        "sync",
        dir.path().to_str().unwrap(),
        "--app",
        "shop",
    ]));
    // One install already has the name the admin types first.
    ok(cp.nuon(&[
        "installs",
        "create",
        "--app",
        "shop",
        "--name",
        "taken",
        "--input",
        "domain=a.example",
        "--secret",
        "db_password=long-enough",
    ]));
    let app = rt().block_on(cp.client().get_app("shop")).unwrap();
    sign_in(&b, &base, &cp.admin_token);
    b.goto(&format!("{base}/apps/{}", app.id));
    b.click(&format!("a[href='/apps/{}/installs/new']", app.id));
    b.wait_until("the new install form", Duration::from_secs(10), |b| {
        b.find("#install-name").is_some()
    });
    let page = b.source();
    assert!(
        page.contains("<legend>Network settings</legend>")
            && page.contains("Where the shop answers")
            && page.contains("domain</code> (required)")
            && page.contains("Left empty: <code>2</code>"),
        "{page}"
    );
    assert!(
        !page.contains("build_id"),
        "internal inputs are not asked: {page}"
    );
    let violations = run_axe(&b, &axe_source());
    assert!(
        violations.is_empty(),
        "axe on the new install form: {violations:#?}"
    );
    assert_eq!(
        b.exec(
            "return document.querySelector('#on-cache').checked;",
            json!([])
        ),
        json!(false),
        "cache starts as its default_enabled says"
    );
    assert_eq!(
        b.exec(
            "return document.querySelector('#on-search').checked;",
            json!([])
        ),
        json!(true)
    );
    // The name is taken: the form comes back with the API's reason and
    // what was typed, but not the secret.
    b.type_into("#install-name", "taken");
    b.type_into("#input-domain", "shop.acme.example");
    b.type_into("#secret-db_password", "s3cret");
    b.type_into("#install-labels", "tier=prod region=eu");
    b.exec(
        "document.querySelector('#install-approval').value = 'prompt'; document.querySelector('#on-cache').click(); document.querySelector('#on-search').click(); document.querySelector('details').open = true;",
        json!([]),
    );
    b.type_into("#own-db", "size = \"xl\"\n");
    submit(&b, "form[action$='/installs'] button.primary");
    let said = b.text("p.error");
    assert!(
        said.starts_with("Not created: ") && said.contains("\"taken\""),
        "{said}"
    );
    assert_eq!(
        b.exec("return [document.querySelector('#input-domain').value, document.querySelector('#secret-db_password').value, document.querySelector('#install-approval').value, document.querySelector('#on-cache').checked, document.querySelector('#on-search').checked, document.querySelector('#own-db').value];", json!([])),
        json!(["shop.acme.example", "", "prompt", true, false, "size = \"xl\"\n"]),
    );
    // Named anew, with the secret typed again: created.
    b.exec(
        "document.querySelector('#install-name').value = '';",
        json!([]),
    );
    b.type_into("#install-name", "acme");
    b.type_into("#secret-db_password", "s3cret");
    submit(&b, "form[action$='/installs'] button.primary");
    assert_eq!(b.text("h1"), "Install acme created", "{}", b.source());
    let token = b.text("#runner-token");
    assert!(token.starts_with("rnr_"), "{token}");
    assert!(
        b.source().contains("nuon-runner run --api"),
        "{}",
        b.source()
    );
    // The install is as the form said.
    let c = cp.client();
    let i = rt().block_on(c.get_install("acme")).unwrap();
    assert_eq!(i.approval, "prompt");
    assert_eq!(i.inputs["domain"], "shop.acme.example");
    assert_eq!(i.inputs["replicas"], "2", "{:?}", i.inputs);
    assert_eq!(i.secrets, ["db_password"]);
    assert_eq!(i.labels["tier"], "prod");
    assert_eq!(i.labels["region"], "eu");
    let parts = rt().block_on(c.install_components("acme")).unwrap();
    let part = |n: &str| {
        parts
            .components
            .iter()
            .find(|p| p.name == n)
            .unwrap()
            .clone()
    };
    assert!(part("cache").enabled && !part("search").enabled && part("db").enabled);
    assert_eq!(
        part("db").overrides.and_then(|o| o.tf_vars).as_deref(),
        Some("size = \"xl\"\n")
    );
    // The token shown is the runner's: the Runner API takes it.
    let runner = nuon_client::RunnerClient::new(
        nuon_client::ClientConfig::new(&cp.runner_url, &token).unwrap(),
    )
    .unwrap();
    let settings = rt().block_on(nuon_core::Transport::settings(&runner));
    assert!(settings.is_ok(), "{settings:?}");
    // Recorded as the API records it.
    let audit = ok(cp.nuon(&["audit", "list", "--json"]));
    assert!(audit.contains("createInstall"), "{audit}");
}
