//! `tack view` in a real browser: Debian's Chromium driven through
//! chromium-driver (WebDriver), as a user clicks through it — the runs
//! list, the trials filtered by outcome and by a search, a failed trial and
//! its first failing step, a comparison and a flipped task side by side —
//! with no console message on any page; a run started during the test
//! appears and advances on the runs list by itself; and a run full of
//! markup opens no alert on any page.
//!
//! Runs when `chromium` and `chromedriver` are installed; `.ci/run`
//! installs both and sets `TACK_REQUIRE_CHROMIUM=1`, which turns a missing
//! one into a failure.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::viewer::{Viewer, demo_run, hostile_suite, request};
use serde_json::{Value, json};

fn installed(names: &[&str]) -> Option<PathBuf> {
    names
        .iter()
        .filter_map(|name| {
            Command::new("sh")
                .args(["-c", &format!("command -v {name}")])
                .output()
                .ok()
        })
        .find(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// (chromium, chromedriver), or `None` having said why.
fn browser() -> Option<(PathBuf, PathBuf)> {
    let chromium = installed(&["chromium", "chromium-browser", "google-chrome"]);
    let driver = installed(&["chromedriver"]);
    if let (Some(chromium), Some(driver)) = (chromium, driver) {
        return Some((chromium, driver));
    }
    let why =
        "skipped: no chromium or chromedriver here (apt-get install chromium chromium-driver)";
    assert!(
        std::env::var("TACK_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
        "{why}, and TACK_REQUIRE_CHROMIUM=1 requires them"
    );
    eprintln!("{why}");
    None
}

/// A WebDriver session on a chromedriver of its own; both end when dropped.
struct Browser {
    driver: Child,
    base: String,
    session: String,
    /// Every console message seen so far, with the page it came from.
    console: Vec<String>,
    _profile: tempfile::TempDir,
}

impl Browser {
    fn start(chromium: &Path, chromedriver: &Path) -> Browser {
        let port = common::free_port();
        let driver = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(base.trim_start_matches("http://")).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        let profile = tempfile::tempdir().unwrap();
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                         "--disable-background-networking", "--disable-component-update",
                         "--disable-sync", format!("--user-data-dir={}", profile.path().display())],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        }}});
        let mut browser = Browser {
            driver,
            base,
            session: String::new(),
            console: Vec::new(),
            _profile: profile,
        };
        let created = browser.call("POST", "/session", Some(&capabilities));
        browser.session = created["sessionId"].as_str().unwrap().to_string();
        browser
    }

    /// A WebDriver command; its `value`, after checking it did not fail.
    fn call(&mut self, method: &str, path: &str, body: Option<&Value>) -> Value {
        let answer = self.try_call(method, path, body);
        assert!(answer.0 < 300, "{method} {path}: {}", answer.1);
        answer.1
    }

    fn try_call(&mut self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        let path = if path == "/session" {
            path.to_string()
        } else {
            format!("/session/{}{path}", self.session)
        };
        let empty = json!({});
        let body = body.or((method == "POST").then_some(&empty));
        let answer = request(method, &self.base, &path, "", body);
        let value: Value = serde_json::from_str(&answer.body).unwrap();
        (answer.status, value["value"].clone())
    }

    fn goto(&mut self, url: &str) {
        self.call("POST", "/url", Some(&json!({ "url": url })));
        self.settle();
    }

    fn url(&mut self) -> String {
        self.call("GET", "/url", None).as_str().unwrap().to_string()
    }

    fn source(&mut self) -> String {
        self.call("GET", "/source", None)
            .as_str()
            .unwrap()
            .to_string()
    }

    fn find(&mut self, css: &str) -> String {
        let found = self.call(
            "POST",
            "/element",
            Some(&json!({"using": "css selector", "value": css})),
        );
        found
            .as_object()
            .unwrap()
            .values()
            .next()
            .unwrap()
            .as_str()
            .unwrap()
            .to_string()
    }

    /// `command` (a path after `/element/ID`) on the element `css` finds,
    /// found again if the page was replaced in between (the runs list
    /// reloads itself).
    fn on_element(
        &mut self,
        css: &str,
        method: &str,
        command: &str,
        body: Option<&Value>,
    ) -> Value {
        for _ in 0..5 {
            let element = self.find(css);
            let (status, value) =
                self.try_call(method, &format!("/element/{element}{command}"), body);
            if status < 300 {
                return value;
            }
            assert_eq!(
                value["error"], "stale element reference",
                "{css}{command}: {value}"
            );
        }
        panic!("{css} kept going stale");
    }

    /// Clicks what does not leave the page (an option of a select).
    fn pick(&mut self, css: &str) {
        self.on_element(css, "POST", "/click", None);
    }

    /// Clicks what leads to another address, and waits for it to load.
    fn click(&mut self, css: &str) {
        let before = self.url();
        self.on_element(css, "POST", "/click", None);
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.url() == before {
            assert!(Instant::now() < deadline, "clicking {css} led nowhere");
            std::thread::sleep(Duration::from_millis(20));
        }
        self.settle();
    }

    fn text(&mut self, css: &str) -> String {
        let text = self.on_element(css, "GET", "/text", None);
        text.as_str().unwrap().to_string()
    }

    fn attribute(&mut self, css: &str, name: &str) -> String {
        let value = self.on_element(css, "GET", &format!("/attribute/{name}"), None);
        value.as_str().unwrap_or_default().to_string()
    }

    fn type_into(&mut self, css: &str, text: &str) {
        self.on_element(css, "POST", "/clear", None);
        self.on_element(css, "POST", "/value", Some(&json!({ "text": text })));
    }

    /// After a page loads: no alert is open (a script of the trace's would
    /// have opened one), and its console messages are kept.
    fn settle(&mut self) {
        let (status, alert) = self.try_call("GET", "/alert/text", None);
        assert_eq!(status, 404, "an alert is open: {alert}");
        let page = self.url();
        let logs = self.call("POST", "/se/log", Some(&json!({"type": "browser"})));
        for entry in logs.as_array().unwrap() {
            self.console.push(format!("{page}: {entry}"));
        }
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.try_call("DELETE", "", None);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

/// A suite whose trials each take a second (the solution sleeps), so a run
/// of it is seen running.
fn slow_suite(root: &Path, trials: u32) -> PathBuf {
    let suite = root.join("slow");
    let task = suite.join("tasks/nap");
    std::fs::create_dir_all(task.join("fixture")).unwrap();
    std::fs::write(
        suite.join("suite.toml"),
        format!(
            "[suite]\nname = \"slow\"\ntrials = {trials}\n\n[[variants]]\nname = \"oracle\"\n\
             model = \"oracle\"\n[variants.harness]\nsandbox = \"off\"\n"
        ),
    )
    .unwrap();
    std::fs::write(task.join("fixture/state.txt"), "awake\n").unwrap();
    std::fs::write(
        task.join("task.toml"),
        "instruction = \"Make state.txt say asleep.\"\n\n[[checks]]\nname = \"asleep\"\n\
         run = \"grep -q asleep state.txt\"\n\n[solution]\nscript = \"sleep 1.5; echo asleep > state.txt\"\n",
    )
    .unwrap();
    suite
}

/// The runs list's row of `run_id`, as text; `None` while it is not listed.
fn row_of(source: &str, suite: &str) -> Option<String> {
    source
        .split("<tr>")
        .find(|row| row.contains(&format!("<td>{suite}</td>")))
        .map(str::to_string)
}

/// "k / n" in a runs-list row: the trials finished so far.
fn finished_in(row: &str) -> u32 {
    let cell = row.split("<td class=\"num\">").nth(1).unwrap();
    cell.split(" / ").next().unwrap().trim().parse().unwrap()
}

#[test]
fn a_user_clicks_through_the_viewer_in_chromium() {
    let Some((chromium, chromedriver)) = browser() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run = demo_run(dir.path());
    let run_id = run["run"]["run_id"].as_str().unwrap().to_string();
    let trials = run["run"]["trials"].as_array().unwrap().clone();
    let count = |pred: &dyn Fn(&Value) -> bool| trials.iter().filter(|t| pred(t)).count();
    let failed = count(&|t| t["outcome"] == "verification_failed");
    let slugify = count(&|t| t["task"] == "slugify-dashes");
    let traces = dir.path().join("traces");
    let viewer = Viewer::start(&traces, 1);
    let mut browser = Browser::start(&chromium, &chromedriver);

    // The runs list, reached through the printed address.
    browser.goto(&viewer.url);
    assert_eq!(
        browser.url(),
        format!("{}/", viewer.base),
        "the token left the address"
    );
    assert!(browser.source().contains(&run_id));

    // The run's trials, filtered by outcome through the form.
    browser.click("table.runs td a");
    assert!(browser.url().contains(&format!("run={run_id}")));
    browser.pick("select[name=outcome] option[value=verification_failed]");
    browser.click("#filter");
    assert_eq!(browser.text("#total"), failed.to_string());
    assert!(
        browser.url().contains("outcome=verification_failed"),
        "the filter is in the URL"
    );

    // Searched, with any outcome.
    browser.pick("select[name=outcome] option[value='']");
    browser.type_into("input[name=q]", "slugify");
    browser.click("#filter");
    assert_eq!(browser.text("#total"), slugify.to_string());

    // A failed trial, and its first failing step.
    browser.pick("select[name=outcome] option[value=verification_failed]");
    browser.type_into("input[name=q]", "");
    browser.click("#filter");
    // One whose agent had a tool call fail (the sim sends malformed calls).
    let broken = trials
        .iter()
        .find(|t| t["outcome"] == "verification_failed" && t["tool_errors"].as_u64() > Some(0))
        .expect("a failed trial with a failed tool call");
    let id = broken["trial_id"].as_str().unwrap();
    browser.click(&format!("a.trial-link[href$='id={id}']"));
    assert!(browser.url().contains("/trial?"));
    browser.click("#first-failure");
    let anchor = browser.url().split('#').nth(1).unwrap().to_string();
    let class = browser.attribute(&format!("#{anchor}"), "class");
    assert!(
        class.contains("error"),
        "the first failing step is marked: {class}"
    );
    // Often the first failing step is that call: the link leads where we are.
    let href = browser.attribute("#first-failed-tool-call", "href");
    let anchor = href.split('#').nth(1).unwrap().to_string();
    if browser.url().ends_with(&format!("#{anchor}")) {
        browser.pick("#first-failed-tool-call");
    } else {
        browser.click("#first-failed-tool-call");
    }
    assert!(browser.url().ends_with(&format!("#{anchor}")));
    let class = browser.attribute(&format!("#{anchor}"), "class");
    assert!(
        class.contains("tool_call") && class.contains("error"),
        "the first failed tool call: {class}"
    );

    // Two variants compared, and a flipped task side by side.
    browser.click("nav a[href='/compare']");
    browser.pick(&format!("select[name=a] option[value='{run_id}/sim-full']"));
    browser.pick(&format!(
        "select[name=b] option[value='{run_id}/sim-stdout']"
    ));
    browser.click("#compare");
    assert!(browser.source().contains("Difference in success rate"));
    browser.click("a[href^='/compare/task']");
    assert!(browser.source().contains("side-by-side"));

    // A run started now appears and advances while the page reloads itself.
    let planned = 5;
    let suite = slow_suite(dir.path(), planned);
    let mut running = Command::new(env!("CARGO_BIN_EXE_tack"))
        .arg("run")
        .arg(&suite)
        .args(["--jobs", "1", "--traces"])
        .arg(&traces)
        .arg("--reports")
        .arg(dir.path().join("reports"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    browser.goto(&format!("{}/", viewer.base));
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let source = browser.source();
        if let Some(row) = row_of(&source, "slow") {
            let state = if row.contains("status-running") {
                "running"
            } else {
                "done"
            };
            let entry = (state, finished_in(&row));
            if state == "running" && entry.1 > 0 && entry.1 < planned {
                // Passes shown as they happen, before any part is written.
                // (Once the last trial is in, the run writes its part before
                // it says it finished: a poll in between sees the part's
                // figures, still running.)
                let live = format!("oracle {n} of {n} passed", n = entry.1);
                assert!(row.contains(&live), "{row}");
            }
            if seen.last() != Some(&entry) {
                seen.push(entry);
            }
            if state == "done" {
                break;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the run did not finish: {seen:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(running.wait().unwrap().success());
    let counts: Vec<u32> = seen
        .iter()
        .filter(|(s, _)| *s == "running")
        .map(|(_, n)| *n)
        .collect();
    assert!(
        counts.len() >= 2 && counts.windows(2).all(|w| w[0] < w[1]),
        "seen running, advancing, without a reload by the test: {seen:?}"
    );
    assert_eq!(seen.last(), Some(&("done", planned)));
    browser.settle();

    // Markup in a trace runs nothing, on any page of its run.
    let hostile = hostile_suite(dir.path());
    let hostile_run = common::run_suite(&hostile, dir.path(), &[], &[]);
    let hostile_id = hostile_run["run"]["run_id"].as_str().unwrap();
    let base = viewer.base.clone();
    let hostile_text = "alert(1)";
    for (path, expected) in [
        (
            format!("/trials?run={hostile_id}&q=%3Cscript%3Ealert(1)%3C%2Fscript%3E"),
            hostile_text,
        ),
        (
            format!("/trial?run={hostile_id}&id=oracle--x-task--0"),
            hostile_text,
        ),
        (
            format!("/trial?run={hostile_id}&id=sim--x-task--0"),
            hostile_text,
        ),
        (
            format!("/compare?a={hostile_id}%2Foracle&b={hostile_id}%2Fsim"),
            "x-task",
        ),
        (
            format!("/compare/task?a={hostile_id}%2Foracle&b={hostile_id}%2Fsim&task=x-task"),
            hostile_text,
        ),
    ] {
        browser.goto(&format!("{base}{path}"));
        assert!(
            browser.source().contains(expected),
            "{path} shows {expected}"
        );
    }

    assert!(
        browser.console.is_empty(),
        "console messages: {:#?}",
        browser.console
    );
}
