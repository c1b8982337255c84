//! The run report, its cost page and the compare report render in headless
//! Chromium with no console messages (no failed resource, no script error).
//! Runs when `chromium` is installed; `.ci/run` installs it and sets
//! `TACK_REQUIRE_CHROMIUM=1`, which turns a missing browser into a failure.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .map(|name| {
            Command::new("sh")
                .args(["-c", &format!("command -v {name}")])
                .output()
        })
        .filter_map(Result::ok)
        .find(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    if found.is_none() {
        let why = "skipped: no chromium on this machine (apt-get install chromium)";
        assert!(
            std::env::var("TACK_REQUIRE_CHROMIUM").as_deref() != Ok("1"),
            "{why}, and TACK_REQUIRE_CHROMIUM=1 requires it"
        );
        eprintln!("{why}");
    }
    found
}

fn tack(dir: &Path, args: &[&str]) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// Loads `page` headless and returns (the DOM, every console line).
fn load(browser: &Path, page: &Path, profile: &Path) -> (String, Vec<String>) {
    let output = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--log-level=0",
            "--virtual-time-budget=2000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&output.stderr);
    let console = log
        .lines()
        .filter(|line| line.contains(":CONSOLE"))
        .map(str::to_string)
        .collect();
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        console,
    )
}

#[test]
fn run_and_compare_reports_render_without_console_errors() {
    let Some(browser) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let demo = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../suites/demo");
    let run = tack(
        dir.path(),
        &[
            "run",
            demo.to_str().unwrap(),
            "-v",
            "sim-full,sim-stdout",
            "-t",
            "cart-empty-total,duration-minutes,slugify-dashes",
            "--trials",
            "2",
            "--json",
        ],
    );
    let run_dir = dir.path().join(run["run"]["run_dir"].as_str().unwrap());
    let report = dir.path().join(run["report"].as_str().unwrap());
    let compare = tack(
        dir.path(),
        &[
            "compare",
            run_dir.to_str().unwrap(),
            "--variants",
            "sim-full,sim-stdout",
            "--out",
            "cmp",
            "--json",
        ],
    );
    assert!(compare["report"].is_string());
    let reports = report.parent().unwrap();
    let mut pages = vec![
        (report.clone(), "Summary"),
        (reports.join("cost.html"), "cost"),
        (
            dir.path().join("cmp/index.html"),
            "Difference in success rate",
        ),
    ];
    let first_in = |folder: PathBuf| {
        std::fs::read_dir(folder)
            .ok()
            .and_then(|mut entries| entries.next())
            .and_then(Result::ok)
            .map(|entry| entry.path())
    };
    if let Some(trial) = first_in(reports.join("trials")) {
        pages.push((trial, "check"));
    }
    if let Some(task) = first_in(dir.path().join("cmp/tasks")) {
        pages.push((task, "candidate"));
    }
    let profile = tempfile::tempdir().unwrap();
    for (page, expected) in pages {
        let (dom, console) = load(&browser, &page, profile.path());
        assert!(
            dom.contains(expected),
            "{}: `{expected}` not rendered",
            page.display()
        );
        assert!(
            console.is_empty(),
            "{}: console messages:\n{}",
            page.display(),
            console.join("\n")
        );
    }
}
