//! The customer's installer page against one real `nuon-ctl` (SQLite):
//! the page's size and its first paint in headless Chromium, and the
//! install's README rendered on the server with 100 outputs (the README
//! reads every one of the 100 outputs the install stack reported, and is
//! rendered from its template to sanitized HTML on each GET).
//!
//! ```text
//! cargo bench -p nuon-benches --bench installer -- [--gets N]
//! ```
#![allow(missing_docs)]

use std::time::Instant;

use anyhow::{Context, Result, bail};
use nuon_tests::{ControlPlane, rt};

const OUTPUTS: usize = 100;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let gets: usize = args
        .iter()
        .position(|a| a == "--gets")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(200);
    let cp = ControlPlane::start("10s")?;
    let dir = tempfile::tempdir()?;
    let readme: String = std::iter::once("# Acme\n\n| output | value |\n|---|---|\n".to_owned())
        .chain(
            (0..OUTPUTS)
                .map(|i| format!("| o{i} | `{{{{ .nuon.install_stack.outputs.o{i} }}}}` |\n")),
        )
        .chain(std::iter::once(
            "\nOpen **the app** at [its page](https://acme.test).\n".to_owned(),
        ))
        .collect();
    let files = [
        (
            "metadata.toml",
            "version = \"v2\"\ndisplay_name = \"Acme\"\ndescription = \"Acme in your account\"\nreadme = \"./README.md\"\n".to_owned(),
        ),
        ("README.md", readme),
        (
            "inputs.toml",
            "[[input]]\nname = \"team\"\ndescription = \"Who owns it\"\nuser_configurable = true\ndefault = \"ops\"\n".to_owned(),
        ),
        (
            "installer.toml",
            "name = \"Acme\"\ndocumentation_url = \"https://docs.acme.test\"\nfooter_markdown = \"[Terms](https://acme.test/terms)\"\n".to_owned(),
        ),
    ];
    for (path, text) in &files {
        std::fs::write(dir.path().join(path), text)?;
    }
    run(&cp, &["apps", "create", "acme"])?;
    run(
        &cp,
        &[
            "apps",
            "sync",
            dir.path().to_str().context("utf-8 dir")?,
            "--app",
            "acme",
        ],
    )?;
    let made: serde_json::Value = serde_json::from_str(&run(
        &cp,
        &["installs", "invite", "--app", "acme", "--json"],
    )?)?;
    let url = made["url"].as_str().context("url")?.to_owned();

    println!("| what | result |");
    println!("|---|---|");
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()?;
    // The form, as a browser first gets it.
    let (form, cookie) = rt().block_on(async {
        let r = http.get(&url).send().await?;
        let cookie = r
            .headers()
            .get_all(reqwest::header::SET_COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .find_map(|v| v.strip_prefix("nuon_customer="))
            .and_then(|v| v.split(';').next())
            .map(str::to_owned)
            .context("no customer cookie")?;
        Ok::<_, anyhow::Error>((r.text().await?, cookie))
    })?;
    println!(
        "| installer page (the form), bytes | {} ({:.1} KB) |",
        form.len(),
        form.len() as f64 / 1024.0
    );
    first_paint(&url, "the form");

    // The customer installs; the stack phones home with 100 outputs.
    let csrf = form
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .context("no csrf field")?
        .to_owned();
    let stack = rt().block_on(async {
        let sent = http
            .post(&url)
            .header(reqwest::header::COOKIE, format!("nuon_customer={cookie}"))
            .form(&[("csrf", csrf.as_str()), ("name", "acme-1")])
            .send()
            .await?;
        if sent.status() != 303 {
            bail!("the form was refused: {}", sent.text().await?);
        }
        let stack = http
            .get(format!("{url}/stack/vm"))
            .header(reqwest::header::COOKIE, format!("nuon_customer={cookie}"))
            .send()
            .await?
            .text()
            .await?;
        Ok(stack)
    })?;
    let token = stack
        .lines()
        .find_map(|l| l.strip_prefix("NUON_RUNNER_INSTALL_TOKEN="))
        .context("no stack token in the bundle")?
        .to_owned();
    let outputs: serde_json::Map<String, serde_json::Value> = (0..OUTPUTS)
        .map(|i| {
            (
                format!("o{i}"),
                format!("value-{i}-{}", "x".repeat(20)).into(),
            )
        })
        .collect();
    rt().block_on(async {
        let r = http
            .post(format!("{}/v1/runner/phone-home", cp.runner_url))
            .json(&serde_json::json!({"install_token": token, "outputs": outputs}))
            .send()
            .await?;
        if !r.status().is_success() {
            bail!("phone-home refused: {}", r.text().await?);
        }
        Ok(())
    })?;
    let installed = rt().block_on(async {
        http.get(&url)
            .header(reqwest::header::COOKIE, format!("nuon_customer={cookie}"))
            .send()
            .await?
            .text()
            .await
    })?;
    println!(
        "| installer page (the install: stack, progress), bytes | {} ({:.1} KB) |",
        installed.len(),
        installed.len() as f64 / 1024.0
    );

    // The README with 100 outputs, rendered on each GET: as the API
    // renders it (template), and as the dashboard shows it (HTML).
    let page = cp.dashboard_page("/installs/acme-1/readme");
    if !page.contains("value-99-") {
        bail!("the README did not render its outputs: {page}");
    }
    let client = cp.client();
    let mut api = Vec::with_capacity(gets);
    for _ in 0..gets {
        let t = Instant::now();
        let r = rt().block_on(client.install_readme("acme-1"))?;
        api.push(t.elapsed().as_secs_f64() * 1000.0);
        if !r.warnings.is_empty() {
            bail!("the README has warnings: {:?}", r.warnings);
        }
    }
    api.sort_by(f64::total_cmp);
    println!(
        "| README with {OUTPUTS} outputs, GET /v1/installs/ID/readme ({gets} GETs) | p50 {:.2} ms, p99 {:.2} ms |",
        pct(&api, 0.5),
        pct(&api, 0.99)
    );
    let html = dashboard_times(&cp, "/installs/acme-1/readme", gets)?;
    println!(
        "| README with {OUTPUTS} outputs as sanitized HTML, dashboard page ({gets} GETs) | p50 {:.2} ms, p99 {:.2} ms |",
        pct(&html, 0.5),
        pct(&html, 0.99)
    );
    Ok(())
}

fn run(cp: &ControlPlane, args: &[&str]) -> Result<String> {
    let out = cp.nuon(args);
    if !out.status.success() {
        bail!(
            "nuon {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn pct(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// The time of `n` GETs of a dashboard page, signed in, in ms, sorted.
fn dashboard_times(cp: &ControlPlane, path: &str, n: usize) -> Result<Vec<f64>> {
    let session = cp.dashboard_session();
    rt().block_on(async {
        let http = reqwest::Client::new();
        let base = &cp.control_url;
        let mut times = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            let r = http
                .get(format!("{base}{path}"))
                .header(reqwest::header::COOKIE, format!("nuon_session={session}"))
                .send()
                .await?;
            let body = r.text().await?;
            times.push(t.elapsed().as_secs_f64() * 1000.0);
            if !body.contains("value-99-") {
                bail!("the page lost its outputs");
            }
        }
        times.sort_by(f64::total_cmp);
        Ok(times)
    })
}

/// The page's first contentful paint in headless Chromium, median of
/// five loads.
fn first_paint(url: &str, what: &str) {
    let Some(b) = nuon_tests::webdriver::Chrome::start() else {
        return;
    };
    if let Some((ms, measure)) = b.first_paint(url, 5) {
        println!(
            "| installer page ({what}) in headless Chromium: {measure}, median of 5 | {ms:.0} ms |"
        );
    }
}
