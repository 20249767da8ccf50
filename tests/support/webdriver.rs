//! A small W3C WebDriver client over `chromedriver`, driving Debian's
//! headless Chromium for the dashboard's tests: no crate beyond the HTTP
//! client the tests have.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::rt;

/// The key W3C WebDriver names an element by.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A headless Chromium, driven; quit and its driver stopped when dropped.
pub struct Chrome {
    driver: Child,
    http: reqwest::Client,
    base: String,
    session: String,
    _profile: tempfile::TempDir,
}

impl Chrome {
    /// Starts `chromedriver` and a headless Chromium; `None` (skipped
    /// loudly, or a failure under `NUON_TEST_REQUIRE=all`) when either is
    /// not installed (Debian's `chromium` and `chromium-driver`).
    pub fn start() -> Option<Chrome> {
        if !crate::have_tool(
            "chromium",
            "drive the dashboard in a browser (apt-get install chromium)",
        ) || !crate::have_tool(
            "chromedriver",
            "drive the dashboard in a browser (apt-get install chromium-driver)",
        ) {
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let base = format!("http://127.0.0.1:{port}");
        let http = reqwest::Client::new();
        let start = Instant::now();
        loop {
            let ready = rt().block_on(async {
                let r = http.get(format!("{base}/status")).send().await.ok()?;
                let v: Value = r.json().await.ok()?;
                v["value"]["ready"].as_bool()
            });
            if ready == Some(true) {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "chromedriver did not start"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let profile = tempfile::tempdir().expect("a profile dir");
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--disable-quic".into(),
            "--no-first-run".into(),
            "--disable-background-networking".into(),
            "--disable-component-update".into(),
            "--disable-sync".into(),
            "--window-size=1280,900".into(),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": "/usr/bin/chromium", "args": args},
            "unhandledPromptBehavior": "ignore",
        }}});
        let mut chrome = Chrome {
            driver,
            http,
            base,
            session: String::new(),
            _profile: profile,
        };
        let v = chrome.call(reqwest::Method::POST, "/session", Some(caps));
        chrome.session = v["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {v}"))
            .to_owned();
        Some(chrome)
    }

    /// One WebDriver command; its `value`, or a panic naming the error.
    fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        self.try_call(method, path, body)
            .unwrap_or_else(|e| panic!("webdriver {path}: {e}"))
    }

    fn try_call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, String> {
        let url = if path.starts_with("/session/") || path == "/session" {
            format!("{}{path}", self.base)
        } else {
            format!("{}/session/{}{path}", self.base, self.session)
        };
        rt().block_on(async {
            let mut req = self.http.request(method, url);
            if let Some(b) = body {
                req = req.json(&b);
            }
            let resp = req.send().await.map_err(|e| e.to_string())?;
            let ok = resp.status().is_success();
            let v: Value = resp.json().await.map_err(|e| e.to_string())?;
            if ok {
                Ok(v["value"].clone())
            } else {
                Err(format!("{} {}", v["value"]["error"], v["value"]["message"]))
            }
        })
    }

    /// Loads `url` and waits for it.
    pub fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({"url": url})));
    }

    /// The page's URL now.
    pub fn url(&self) -> String {
        self.call(reqwest::Method::GET, "/url", None)
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The page's HTML now.
    pub fn source(&self) -> String {
        self.call(reqwest::Method::GET, "/source", None)
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// The first element matching a CSS selector, if any.
    pub fn find(&self, css: &str) -> Option<String> {
        self.try_call(
            reqwest::Method::POST,
            "/element",
            Some(json!({"using": "css selector", "value": css})),
        )
        .ok()
        .and_then(|v| v[ELEMENT].as_str().map(str::to_owned))
    }

    fn must(&self, css: &str) -> String {
        self.find(css)
            .unwrap_or_else(|| panic!("no {css} on {}:\n{}", self.url(), self.source()))
    }

    /// Types into the element a CSS selector finds.
    pub fn type_into(&self, css: &str, text: &str) {
        let e = self.must(css);
        self.call(
            reqwest::Method::POST,
            &format!("/element/{e}/value"),
            Some(json!({"text": text})),
        );
    }

    /// Clicks the element a CSS selector finds.
    pub fn click(&self, css: &str) {
        let e = self.must(css);
        self.call(
            reqwest::Method::POST,
            &format!("/element/{e}/click"),
            Some(json!({})),
        );
    }

    /// The visible text of the first element a CSS selector finds (empty
    /// when there is none). Read in the page, so a page being replaced
    /// gives the old or the new text, never a stale element.
    pub fn text(&self, css: &str) -> String {
        self.exec(
            "const e = document.querySelector(arguments[0]); return e ? e.innerText : '';",
            json!([css]),
        )
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }

    /// Runs `script` (a function body; `arguments` are `args`) in the
    /// page; a promise it returns is awaited.
    pub fn exec(&self, script: &str, args: Value) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
    }

    /// Resizes the window (a phone's width: 390).
    pub fn set_size(&self, width: u32, height: u32) {
        self.call(
            reqwest::Method::POST,
            "/window/rect",
            Some(json!({"width": width, "height": height})),
        );
    }

    /// A Chrome DevTools Protocol command (`Emulation.setEmulatedMedia`).
    pub fn cdp(&self, cmd: &str, params: Value) -> Value {
        self.call(
            reqwest::Method::POST,
            "/goog/cdp/execute",
            Some(json!({"cmd": cmd, "params": params})),
        )
    }

    /// The memory of this browser's largest tab renderer process (the
    /// tab's, with one tab open), from `/proc`: its private memory (what
    /// Chromium's task manager calls its footprint) and its resident set
    /// (shared libraries included), in bytes; `None` where there is no
    /// `/proc` or no renderer yet.
    pub fn renderer_memory(&self) -> Option<(u64, u64)> {
        let driver = self.driver.id();
        // Each process's parent, to find the driver's descendants.
        let mut procs = Vec::new();
        for entry in std::fs::read_dir("/proc").ok()?.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(status) = std::fs::read_to_string(entry.path().join("status")) else {
                continue;
            };
            let field = |name: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(name))
                    .and_then(|v| v.split_whitespace().next())
                    .and_then(|v| v.parse::<u64>().ok())
            };
            // (Chromium rewrites its renderers' command lines: one string,
            // not one argument each.) Its own UI's renderer is not a tab.
            let cmdline = String::from_utf8_lossy(
                &std::fs::read(entry.path().join("cmdline")).unwrap_or_default(),
            )
            .into_owned();
            let renderer =
                cmdline.contains("--type=renderer") && !cmdline.contains("--top-chrome-webui");
            procs.push((
                pid,
                field("PPid:").unwrap_or(0) as u32,
                field("VmRSS:"),
                renderer,
            ));
        }
        let descends = |mut pid: u32| {
            for _ in 0..16 {
                if pid == driver {
                    return true;
                }
                match procs.iter().find(|p| p.0 == pid) {
                    Some(p) if p.1 != 0 => pid = p.1,
                    _ => return false,
                }
            }
            false
        };
        let pid = procs
            .iter()
            .filter(|p| p.3 && descends(p.0))
            .max_by_key(|p| p.2.unwrap_or(0))?
            .0;
        // Private: what is this process's alone (smaps_rollup).
        let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
        let kb = |name: &str| {
            rollup
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.split_whitespace().next())
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        let private = kb("Private_Clean:") + kb("Private_Dirty:");
        Some((private * 1024, kb("Rss:") * 1024))
    }

    /// Saves a PNG of the window to `path`.
    pub fn screenshot(&self, path: &std::path::Path) {
        use base64::Engine as _;
        let png = self.call(reqwest::Method::GET, "/screenshot", None);
        let png = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap_or_default())
            .expect("a base64 screenshot");
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).expect("the screenshots' directory");
        }
        std::fs::write(path, png).expect("the screenshot is written");
    }

    /// The text of an open dialog (`alert`, `confirm`), if one is open.
    pub fn dialog(&self) -> Option<String> {
        self.try_call(reqwest::Method::GET, "/alert/text", None)
            .ok()
            .map(|v| v.as_str().unwrap_or_default().to_owned())
    }

    /// The first contentful paint of `url`, median of `loads` loads, in ms,
    /// and what was measured: the paint where headless Chromium reports
    /// one, else the load's end (navigation timing), an upper bound of it.
    pub fn first_paint(&self, url: &str, loads: usize) -> Option<(f64, &'static str)> {
        let mut paints = Vec::new();
        let mut measure = "first contentful paint";
        for _ in 0..loads {
            self.goto(url);
            self.wait_until("the page", Duration::from_secs(20), |b| {
                b.exec(
                    "return document.readyState === 'complete';",
                    serde_json::json!([]),
                ) == serde_json::json!(true)
            });
            let v = self.exec(
                "const p = performance.getEntriesByType('paint').find(e => e.name === 'first-contentful-paint'); \
                 return p ? [p.startTime, true] : [performance.getEntriesByType('navigation')[0].loadEventEnd, false];",
                serde_json::json!([]),
            );
            if v[1] == serde_json::json!(false) {
                measure = "load complete (no paint entry in headless mode)";
            }
            paints.extend(v[0].as_f64());
        }
        paints.sort_by(f64::total_cmp);
        paints.get(paints.len() / 2).map(|m| (*m, measure))
    }

    /// Waits up to `limit` for `f` to hold, looking every 100 ms.
    pub fn wait_until(&self, what: &str, limit: Duration, mut f: impl FnMut(&Chrome) -> bool) {
        let start = Instant::now();
        while !f(self) {
            assert!(
                start.elapsed() < limit,
                "{what}: not within {limit:?} on {}:\n{}",
                self.url(),
                self.source()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Chrome {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.try_call(
                reqwest::Method::DELETE,
                &format!("/session/{}", self.session),
                None,
            );
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
