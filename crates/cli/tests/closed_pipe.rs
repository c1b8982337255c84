//! A reader that stops early (`tack compare RUN --json | head -c 100`)
//! ends tack's output, quietly: no panic, no message, and the command's
//! own exit code, so a gate's verdict survives the pipe.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use common::{repo, run_suite, with_closed_stderr, with_closed_stdout};

#[test]
fn a_closed_pipe_ends_the_output_not_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_suite(
        &repo().join("suites/demo"),
        dir.path(),
        &[
            "-v",
            "oracle",
            "-t",
            "median-even,leap-year-400",
            "--trials",
            "1",
            "--no-report",
        ],
        &[],
    );
    let run_dir = run["run"]["run_dir"].as_str().unwrap();
    let trial = run["run"]["trials"][0]["trial_id"].as_str().unwrap();
    let reports = dir.path().join("reports");
    let reports = reports.to_str().unwrap();
    let same = ["--variants", "oracle,oracle"];
    let cases: [(Vec<&str>, i32); 6] = [
        (
            [&["compare", run_dir, "--json", "--out", reports], &same[..]].concat(),
            0,
        ),
        (
            [&["compare", run_dir, "--no-report"], &same[..]].concat(),
            0,
        ),
        ([&["gate", run_dir], &same[..]].concat(), 0),
        (vec!["query", "select * from spans", run_dir], 0),
        (vec!["show", run_dir, trial, "--full"], 0),
        // A verdict is the exit code, printed or not.
        (vec!["permissions", "check", "--", "git push origin"], 11),
    ];
    for (args, code) in cases {
        let (got, stderr) = with_closed_stdout(&args);
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(!stderr.contains("Broken pipe"), "{args:?}: {stderr}");
        assert_eq!(got, Some(code), "{args:?}: {stderr}");
    }
}

/// A closed stderr (`tack run … 2>&1 | head -2`, a progress reader that
/// stopped) loses the progress lines, not the run: it finishes, its
/// manifest says so, and the table still reaches stdout.
#[test]
fn a_closed_stderr_loses_the_progress_not_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    let (code, stdout) = with_closed_stderr(&[
        "run",
        "suites/demo",
        "-v",
        "oracle",
        "-t",
        "median-even,leap-year-400",
        "--trials",
        "2",
        "--no-report",
        "--traces",
        traces.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("traces: "), "{stdout}");
    let runs: Vec<_> = std::fs::read_dir(&traces).unwrap().collect();
    assert_eq!(runs.len(), 1);
    let manifest = runs[0].as_ref().unwrap().path().join("manifest.json");
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(manifest).unwrap()).unwrap();
    assert_eq!(manifest["status"], "finished", "{manifest}");
}
