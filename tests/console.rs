//! The web console in a real browser: headless Chromium driven through
//! ChromeDriver (W3C WebDriver over loopback HTTP) against `ebb serve`
//! with a token. It logs in, runs a query and sees its rows, follows the
//! cursor, sees an error with its code, runs EXPLAIN, uploads a plugin and
//! calls it, checks the phone-sized layout and that the page logged no
//! script error or policy violation. Needs `chromium` and `chromedriver`
//! (installed by `scripts/prereqs.sh --test`); every wait is bounded.
//!
//! With `EBB_SCREENSHOT_DIR` set, it saves `console.png` and
//! `console-phone.png` there (`make screenshots` refreshes docs/).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::common::{Server, call, wasm};

/// The key WebDriver names element references with.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";
/// Longest any one wait in the page may take.
const WAIT: Duration = Duration::from_secs(15);
const TOKEN: &str = "console-test-token";

/// A ChromeDriver process and one browser session of it; both end on drop.
struct Browser {
    driver: Child,
    base: String,
    session: String,
    agent: ureq::Agent,
    _profile: tempfile::TempDir,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn find(program: &str, candidates: &[&str]) -> PathBuf {
    candidates
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!("{program} is missing: run ./scripts/prereqs.sh --test (make test does)")
        })
}

impl Browser {
    fn start() -> Browser {
        let driver_bin = find("chromedriver", &["/usr/bin/chromedriver"]);
        let chromium = find("chromium", &["/usr/bin/chromium"]);
        let port = free_port();
        let driver = Command::new(driver_bin)
            .args([format!("--port={port}"), "--allowed-ips=127.0.0.1".into()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let profile = tempfile::tempdir().unwrap();
        let mut browser = Browser {
            driver,
            base: format!("http://127.0.0.1:{port}"),
            session: String::new(),
            agent,
            _profile: profile,
        };
        let started = Instant::now();
        while browser.get_raw("/status").is_none() {
            assert!(started.elapsed() < WAIT, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let args = [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-dev-shm-usage",
            "--window-size=1280,900",
            &format!("--user-data-dir={}", browser._profile.path().display()),
        ];
        let answer = browser.post(
            "/session",
            json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {"binary": chromium, "args": args},
                "goog:loggingPrefs": {"browser": "ALL"},
            }}}),
        );
        browser.session = answer["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {answer}"))
            .to_string();
        browser
    }

    fn get_raw(&self, path: &str) -> Option<Value> {
        let mut response = self.agent.get(format!("{}{path}", self.base)).call().ok()?;
        serde_json::from_str(&response.body_mut().read_to_string().ok()?).ok()
    }

    fn post(&self, path: &str, body: Value) -> Value {
        let mut response = self
            .agent
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .send(body.to_string())
            .expect("a WebDriver command");
        let answer: Value =
            serde_json::from_str(&response.body_mut().read_to_string().unwrap()).unwrap();
        if answer["value"]["error"].is_string() {
            panic!("WebDriver {path}: {}", answer["value"]);
        }
        answer.get("value").cloned().unwrap_or(answer)
    }

    fn command(&self, path: &str, body: Value) -> Value {
        self.post(&format!("/session/{}{path}", self.session), body)
    }

    fn get(&self, path: &str) -> Value {
        let answer = self
            .get_raw(&format!("/session/{}{path}", self.session))
            .expect("a WebDriver query");
        if answer["value"]["error"].is_string() {
            panic!("WebDriver {path}: {}", answer["value"]);
        }
        answer["value"].clone()
    }

    fn open(&self, url: &str) {
        self.command("/url", json!({"url": url}));
    }

    /// Run `script` in the page (a function body; `arguments` are `args`).
    fn script(&self, script: &str, args: Value) -> Value {
        self.command("/execute/sync", json!({"script": script, "args": args}))
    }

    fn element(&self, css: &str) -> String {
        let found = self.command("/element", json!({"using": "css selector", "value": css}));
        found[ELEMENT].as_str().unwrap().to_string()
    }

    fn click(&self, css: &str) {
        let id = self.element(css);
        self.command(&format!("/element/{id}/click"), json!({}));
    }

    /// Replace an input's text.
    fn fill(&self, css: &str, text: &str) {
        let id = self.element(css);
        self.command(&format!("/element/{id}/clear"), json!({}));
        self.command(&format!("/element/{id}/value"), json!({"text": text}));
    }

    fn text(&self, css: &str) -> String {
        let id = self.element(css);
        self.get(&format!("/element/{id}/text"))
            .as_str()
            .unwrap_or_default()
            .to_string()
    }

    /// Poll `check` (a script returning a value) until `done` holds.
    fn wait_for(&self, what: &str, check: &str, done: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let value = self.script(check, json!([]));
            if done(&value) {
                return value;
            }
            assert!(
                started.elapsed() < WAIT,
                "timed out waiting for {what}; last: {value}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Wait until the element matching `css` is shown.
    fn wait_shown(&self, css: &str) {
        let check = format!(
            "const e = document.querySelector({css:?}); return !!e && e.getClientRects().length > 0 && getComputedStyle(e).visibility !== 'hidden';"
        );
        self.wait_for(&format!("{css} to show"), &check, |v| v == &json!(true));
    }

    fn rows(&self, css: &str) -> Vec<String> {
        let script =
            format!("return [...document.querySelectorAll({css:?})].map(r => r.textContent);");
        let rows = self.script(&script, json!([]));
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| r.as_str().unwrap().to_string())
            .collect()
    }

    /// Wait until `css` matches `n` rows.
    fn wait_rows(&self, css: &str, n: usize) -> Vec<String> {
        let script = format!("return document.querySelectorAll({css:?}).length;");
        self.wait_for(&format!("{n} rows of {css}"), &script, |v| v == &json!(n));
        self.rows(css)
    }

    fn screenshot(&self, dir: &Path, name: &str) {
        use base64::Engine;
        let png = self.get("/screenshot");
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap())
            .unwrap();
        std::fs::write(dir.join(name), bytes).unwrap();
    }

    /// The page's console messages since the last call.
    fn log(&self) -> Vec<Value> {
        let log = self.command("/se/log", json!({"type": "browser"}));
        log.as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self
                .agent
                .delete(format!("{}/session/{}", self.base, self.session))
                .call();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

#[test]
fn the_console_runs_queries_pages_shows_errors_and_uploads_a_plugin_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(&dir.path().join("data"), &["--auth-token", TOKEN]);
    let bearer = format!("Bearer {TOKEN}");
    let auth = [("authorization", bearer.as_str())];
    for i in 0..25 {
        let url = format!("{}/v1/tables/fruit/keys/k{i:02}", server.url);
        let value = format!("{}", i * 3);
        let put = call("PUT", &url, &auth, Some(value.as_bytes()));
        assert_eq!(put.status, 200, "{}", put.text());
    }
    let page = call("GET", &format!("{}/", server.url), &[], None);
    assert_eq!(page.status, 200, "the page needs no token");
    assert!(
        page.header("content-security-policy")
            .unwrap()
            .contains("script-src 'self'")
    );

    let browser = Browser::start();
    browser.open(&format!("{}/", server.url));

    // The server wants a token: the page asks for it.
    browser.wait_shown("#login");
    browser.fill("#token", TOKEN);
    browser.click("#login-submit");
    browser.wait_for(
        "the token kept for the session only",
        "return [sessionStorage.getItem('ebb.token'), localStorage.getItem('ebb.token')];",
        |v| v == &json!([TOKEN, null]),
    );

    // A query, its first page of rows, then the cursor's next page.
    browser.fill(
        "#sql",
        "SELECT key, CAST(value AS INTEGER) AS n FROM fruit ORDER BY key",
    );
    browser.fill("#page-size", "10");
    browser.click("#run");
    let rows = browser.wait_rows("#result tbody tr", 10);
    assert!(rows[0].starts_with("k00"), "{rows:?}");
    assert!(
        rows[9].starts_with("k09") && rows[9].ends_with("27"),
        "{rows:?}"
    );
    browser.wait_shown("#more");
    browser.click("#more");
    let rows = browser.wait_rows("#result tbody tr", 20);
    assert!(rows[10].starts_with("k10"), "{rows:?}");
    browser.click("#more");
    let rows = browser.wait_rows("#result tbody tr", 25);
    assert!(
        rows[24].starts_with("k24") && rows[24].ends_with("72"),
        "{rows:?}"
    );
    browser.wait_for(
        "no cursor left",
        "return document.getElementById('more').hidden;",
        |v| v == &json!(true),
    );
    // A text and a numeric column: a chart, one bar per row.
    browser.wait_shown("#chart");
    let bars = browser.script(
        "return document.querySelectorAll('#chart rect').length;",
        json!([]),
    );
    assert!(bars.as_u64().unwrap() >= 25, "{bars}");
    // The query went to the history.
    assert!(
        browser.text("#history").contains("FROM fruit ORDER BY key"),
        "{}",
        browser.text("#history")
    );

    // An error shows its code and message.
    browser.fill("#sql", "SELEC key FROM fruit");
    browser.click("#run");
    browser.wait_shown("#error");
    let code = browser.script(
        "return document.getElementById('error').dataset.code;",
        json!([]),
    );
    assert_eq!(code, json!("invalid_sql"));
    assert!(browser.text("#error").starts_with("invalid_sql: "));

    // EXPLAIN shows the plan.
    browser.fill("#sql", "SELECT key FROM fruit WHERE key >= 'k20'");
    browser.click("#explain");
    browser.wait_for(
        "the plan",
        "return document.querySelector('#result')?.textContent ?? '';",
        |v| v.as_str().is_some_and(|t| t.contains("fruit")),
    );

    // Upload a plugin, see it listed, call it from SQL.
    browser.click("a[href='#plugins']");
    browser.wait_shown("#plugin-file");
    let module = wasm("ebb_plugin_json");
    assert!(
        module.exists(),
        "{} (make plugins builds it)",
        module.display()
    );
    browser.fill("#plugin-name", "json_up");
    let file = browser.element("#plugin-file");
    browser.command(
        &format!("/element/{file}/value"),
        json!({"text": module.to_str().unwrap()}),
    );
    browser.click("#plugin-upload");
    browser.wait_for(
        "the uploaded plugin in the list",
        "return document.querySelector('#plugins-list tbody')?.textContent ?? '';",
        |v| v.as_str().is_some_and(|t| t.contains("json_up")),
    );
    assert!(browser.text("#plugin-message").contains("json_up"));
    let listed = call(
        "GET",
        &format!("{}/v1/plugins/json_up", server.url),
        &auth,
        None,
    );
    assert_eq!(listed.status, 200, "the server has it: {}", listed.text());
    browser.click("a[href='#query']");
    browser.fill(
        "#sql",
        r#"SELECT json_up.get_int('{"a": 7}', '$.a') AS a FROM fruit WHERE key = 'k01'"#,
    );
    browser.click("#run");
    let rows = browser.wait_rows("#result tbody tr", 1);
    assert_eq!(rows[0], "7");

    // Tables with their counts.
    browser.click("a[href='#tables']");
    let tables = browser.wait_rows("#tables-list tbody tr", 1);
    assert!(tables[0].starts_with("fruit25"), "{tables:?}");

    // Handlers: a change handler bound through the API shows with its status.
    let flaky = std::fs::read(wasm("ebb_test_flaky")).expect("make plugins builds flaky");
    let upload = call(
        "PUT",
        &format!("{}/v1/plugins/flaky", server.url),
        &auth,
        Some(&flaky),
    );
    assert_eq!(upload.status, 200, "{}", upload.text());
    let bind = call(
        "PUT",
        &format!("{}/v1/tables/fruit/change-handler", server.url),
        &auth,
        Some(br#"{"plugin": "flaky", "function": "record"}"#),
    );
    assert_eq!(bind.status, 200, "{}", bind.text());
    browser.click("a[href='#handlers']");
    browser.wait_for(
        "the change handler's binding and status",
        "return document.getElementById('handlers-list').textContent;",
        |v| {
            v.as_str()
                .is_some_and(|t| t.contains("flaky") && t.contains("record"))
        },
    );

    if let Some(dir) = std::env::var_os("EBB_SCREENSHOT_DIR") {
        // Tall enough for the rows and the chart below them.
        browser.command(
            "/window/rect",
            json!({"width": 1280, "height": 1400, "x": 0, "y": 0}),
        );
        browser.click("a[href='#query']");
        browser.fill(
            "#sql",
            "SELECT key, CAST(value AS INTEGER) AS n FROM fruit ORDER BY key LIMIT 12",
        );
        browser.fill("#page-size", "100");
        browser.click("#run");
        browser.wait_rows("#result tbody tr", 12);
        browser.screenshot(Path::new(&dir), "console.png");
    }

    // A phone-sized screen: nothing wider than the screen.
    browser.command(
        "/window/rect",
        json!({"width": 390, "height": 844, "x": 0, "y": 0}),
    );
    for view in ["#query", "#tables", "#plugins", "#handlers"] {
        browser.click(&format!("a[href='{view}']"));
        browser.wait_for(
            &format!("{view} to fit a phone's width"),
            "return document.documentElement.scrollWidth <= window.innerWidth + 1 && window.innerWidth < 500;",
            |v| v == &json!(true),
        );
    }
    if let Some(dir) = std::env::var_os("EBB_SCREENSHOT_DIR") {
        browser.click("a[href='#query']");
        browser.wait_rows("#result tbody tr", 12);
        browser.screenshot(Path::new(&dir), "console-phone.png");
    }

    // No script error and no policy violation. Answers with a 4xx status
    // are logged by the browser as failed loads: the error above is one.
    let problems: Vec<Value> = browser
        .log()
        .into_iter()
        .filter(|entry| entry["level"] == "SEVERE" || entry["level"] == "WARNING")
        .filter(|entry| {
            !entry["message"]
                .as_str()
                .unwrap_or_default()
                .contains("the server responded with a status of 4")
        })
        .collect();
    assert!(problems.is_empty(), "{problems:#?}");
}
