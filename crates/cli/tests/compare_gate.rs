//! `tack compare` and `tack gate` through the binary: verdicts on demo runs,
//! drift between runs, and a simulation of the gate's error rates with the
//! simulated agent.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tack(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs a suite and returns the run directory.
fn run(dir: &Path, suite: &Path, extra: &[&str]) -> PathBuf {
    let mut args = vec![
        "run",
        suite.to_str().unwrap(),
        "--json",
        "--no-report",
        "--traces",
        "traces",
    ];
    args.extend(extra);
    let output = tack(dir, &args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    dir.join(json["run"]["run_dir"].as_str().unwrap())
}

fn gate(dir: &Path, args: &[&str]) -> (Option<i32>, Value) {
    let mut all = vec!["gate", "--json"];
    all.extend(args);
    let output = tack(dir, &all);
    let json = serde_json::from_slice(&output.stdout).unwrap_or(Value::Null);
    (output.status.code(), json)
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn the_gate_passes_two_seeds_of_one_variant_and_fails_a_worse_one() {
    let dir = tempfile::tempdir().unwrap();
    let demo = repo().join("suites/demo");
    let first = run(
        dir.path(),
        &demo,
        &["-v", "sim-full,sim-stdout", "--seed", "1"],
    );
    let second = run(dir.path(), &demo, &["-v", "sim-full", "--seed", "2"]);

    let (code, json) = gate(
        dir.path(),
        &[path(&first), path(&second), "--variants", "sim-full"],
    );
    assert_eq!(code, Some(0), "{json:#}");
    assert_eq!(json["verdict"]["passed"], true);

    let (code, json) = gate(
        dir.path(),
        &[path(&first), "--variants", "sim-full,sim-stdout"],
    );
    assert_eq!(code, Some(1), "{json:#}");
    let failures = json["verdict"]["failures"].to_string();
    assert!(failures.contains("success rate dropped"), "{failures}");

    // A budget that cannot be measured (built-in models have no price) is a
    // usage error, never a silent pass.
    let (code, _) = gate(
        dir.path(),
        &[
            path(&first),
            path(&second),
            "--variants",
            "sim-full",
            "--max-cost-increase",
            "10%",
        ],
    );
    assert_eq!(code, Some(2));

    // The same through `compare`, as a person reads it.
    let output = tack(
        dir.path(),
        &[
            "compare",
            path(&first),
            "--variants",
            "sim-full,sim-stdout",
            "--out",
            "cmp",
        ],
    );
    let shown = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    for part in [
        "difference",
        "broken",
        "pass@k",
        "tokens per success",
        "power:",
        "simulated",
    ] {
        assert!(shown.contains(part), "`{part}` missing from:\n{shown}");
    }
    let report = std::fs::read_to_string(dir.path().join("cmp/index.html")).unwrap();
    assert!(report.contains("<svg") && report.contains("simulated-banner"));
    assert!(
        !report.contains("<script"),
        "the compare report runs no scripts"
    );
    let flipped = std::fs::read_dir(dir.path().join("cmp/tasks"))
        .unwrap()
        .count();
    assert!(flipped > 0, "every flipped task has a side-by-side page");
}

#[test]
fn a_task_that_changed_between_runs_is_not_paired() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite");
    common::copy_dir(&repo().join("suites/demo"), &suite);
    let only = ["-v", "oracle", "-t", "median-even,leap-year-400"];
    let before = run(dir.path(), &suite, &only);
    let fixture = suite.join("tasks/median-even/fixture/stats.py");
    let mut source = std::fs::read_to_string(&fixture).unwrap();
    source.push_str("\n# edited between the runs\n");
    std::fs::write(&fixture, source).unwrap();
    let after = run(dir.path(), &suite, &only);

    let output = tack(
        dir.path(),
        &["compare", path(&before), path(&after), "--no-report"],
    );
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stdout));
    let error = text(&output.stderr);
    assert!(
        error.contains("median-even") && error.contains("fixture"),
        "{error}"
    );
    assert!(!error.contains("leap-year-400"), "{error}");

    let output = tack(
        dir.path(),
        &[
            "compare",
            path(&before),
            path(&after),
            "--allow-drift",
            "--no-report",
            "--json",
            "--effect",
            "5%",
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    // A percentage, as gate's --max-drop takes one.
    assert_eq!(json["comparison"]["power"]["effect"], 0.05, "{json:#}");
    let tasks: Vec<&str> = json["comparison"]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task"].as_str().unwrap())
        .collect();
    assert_eq!(tasks, ["leap-year-400"]);
    assert!(json["drift"].to_string().contains("median-even"));
}

/// A candidate that ran fewer tasks does not pass the gate on the tasks it
/// kept: the ones it skipped are drift, named, until --allow-drift.
#[test]
fn a_candidate_that_skipped_tasks_does_not_pass_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let suite = repo().join("suites/demo");
    let base = run(
        dir.path(),
        &suite,
        &["-v", "oracle", "-t", "median-even,leap-year-400"],
    );
    let candidate = run(dir.path(), &suite, &["-v", "oracle", "-t", "median-even"]);
    let output = tack(
        dir.path(),
        &[
            "gate",
            path(&base),
            path(&candidate),
            "--variants",
            "oracle",
        ],
    );
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stdout));
    let error = text(&output.stderr);
    assert!(
        error.contains("task `leap-year-400`: only in the base run"),
        "{error}"
    );
    assert!(error.contains("--allow-drift"), "{error}");
    // A script that asked for JSON gets the error as JSON on stdout.
    let (code, json) = gate(
        dir.path(),
        &[path(&base), path(&candidate), "--variants", "oracle"],
    );
    assert_eq!(code, Some(2), "{json:#}");
    assert_eq!(json["exit_code"], 2, "{json:#}");
    assert!(
        json["error"]
            .as_str()
            .unwrap()
            .contains("task `leap-year-400`: only in the base run"),
        "{json:#}"
    );
    // So does one whose command line clap refuses before any command runs.
    let output = tack(
        dir.path(),
        &["gate", path(&base), path(&candidate), "--bogus", "--json"],
    );
    assert_eq!(output.status.code(), Some(2));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["exit_code"], 2, "{json:#}");
    let error = json["error"].as_str().unwrap();
    assert!(error.contains("unexpected argument '--bogus'"), "{error}");
    assert!(text(&output.stderr).contains("Usage:"));

    let (code, json) = gate(
        dir.path(),
        &[
            path(&base),
            path(&candidate),
            "--variants",
            "oracle",
            "--allow-drift",
        ],
    );
    assert_eq!(code, Some(0), "{json:#}");
    let unpaired = json["comparison"]["unpaired"].to_string();
    assert!(
        unpaired.contains("leap-year-400") && unpaired.contains("only in the base run"),
        "{unpaired}"
    );
}

/// A candidate that did not finish (here a merge of one shard of two, with
/// --allow-partial: one task never ran) does not pass on what it has: the
/// gate exits 2 naming what is missing, unless --allow-partial.
#[test]
fn an_unfinished_candidate_does_not_pass_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let suite = repo().join("suites/demo");
    let tasks = [
        "-v",
        "oracle",
        "-t",
        "median-even,leap-year-400",
        "--trials",
        "1",
    ];
    let base = run(dir.path(), &suite, &tasks);
    let mut sharded = tasks.to_vec();
    sharded.extend(["--shard", "1/2"]);
    let shard = run(dir.path(), &suite, &sharded);
    let merged = dir.path().join("traces/partial");
    let output = tack(
        dir.path(),
        &[
            "merge",
            path(&shard),
            "--out",
            path(&merged),
            "--allow-partial",
        ],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let output = tack(
        dir.path(),
        &["gate", path(&base), path(&merged), "--variants", "oracle"],
    );
    let error = text(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{error}");
    assert!(
        error.contains("the candidate run partial was merged from shards that did not all finish"),
        "{error}"
    );
    assert!(
        error.contains("has no scored trial on the candidate side"),
        "{error}"
    );
    assert!(error.contains("--allow-partial"), "{error}");

    let (code, json) = gate(
        dir.path(),
        &[
            path(&base),
            path(&merged),
            "--variants",
            "oracle",
            "--allow-partial",
        ],
    );
    assert_eq!(code, Some(0), "{json:#}");
    assert_eq!(
        json["incomplete"].as_array().map(Vec::len),
        Some(2),
        "{json:#}"
    );
    let missing: Vec<&Value> = json["comparison"]["unpaired"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["missing_on"] == "candidate")
        .collect();
    assert_eq!(missing.len(), 1, "{json:#}");
}

/// A quick suite for many repetitions: `tasks` one-line shell fixes, each
/// with a plausible wrong fix, and sim variants whose one fix attempt is
/// right with probability `skill`.
fn quick_suite(root: &Path, tasks: usize, variants: &[(&str, f64)]) -> PathBuf {
    let suite = root.join("quick");
    let mut toml = String::from("[suite]\nname = \"quick\"\ntrials = 3\n");
    for (name, skill) in variants {
        toml.push_str(&format!(
            "\n[[variants]]\nname = \"{name}\"\nmodel = \"sim\"\n[variants.harness]\nsandbox = \"off\"\n\
             [variants.sim]\nskill = {skill}\nmalformed_rate = 0.0\nmax_attempts = 1\n"
        ));
    }
    std::fs::create_dir_all(&suite).unwrap();
    std::fs::write(suite.join("suite.toml"), toml).unwrap();
    for i in 0..tasks {
        let task = suite.join(format!("tasks/t{i:02}"));
        std::fs::create_dir_all(task.join("fixture")).unwrap();
        std::fs::create_dir_all(task.join("checks")).unwrap();
        std::fs::write(task.join("fixture/value.txt"), format!("value {i} = bug\n")).unwrap();
        std::fs::write(task.join("fixture/test.sh"), "grep -q fixed value.txt\n").unwrap();
        std::fs::write(task.join("checks/check.sh"), "grep -q fixed value.txt\n").unwrap();
        std::fs::write(
            task.join("task.toml"),
            format!(
                "instruction = \"value.txt says bug; make it say fixed.\"\ntest_command = \"bash test.sh\"\n\n\
                 [[checks]]\nname = \"fixed\"\nrun = 'bash \"$TACK_CHECKS/check.sh\"'\n\n\
                 [[solution.edits]]\npath = \"value.txt\"\nold = \"value {i} = bug\"\nnew = \"value {i} = fixed\"\n\n\
                 [[solution.decoys]]\npath = \"value.txt\"\nold = \"value {i} = bug\"\nnew = \"value {i} = fxied\"\n"
            ),
        )
        .unwrap();
    }
    suite
}

/// Two identically configured sim variants, over many seeds: the gate
/// (max drop 2 points, alpha 0.05) must pass at least 95% of the time — a
/// gate that fails on noise would be switched off. Each seed is fixed, so
/// the count is the same on every run of this test.
#[test]
fn identical_sim_variants_pass_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let suite = quick_suite(dir.path(), 12, &[("a", 0.7), ("b", 0.7)]);
    let repetitions = 20;
    let mut passed = 0;
    for seed in 1..=repetitions {
        let run_dir = run(
            dir.path(),
            &suite,
            &["--seed", &seed.to_string(), "-j", "2"],
        );
        let (code, json) = gate(dir.path(), &[path(&run_dir), "--variants", "a,b"]);
        assert!(matches!(code, Some(0 | 1)), "{json:#}");
        passed += usize::from(code == Some(0));
    }
    eprintln!("the gate passed {passed} of {repetitions} comparisons of identical variants");
    assert!(
        passed * 100 >= repetitions * 95,
        "the gate passed {passed} of {repetitions} comparisons of identical variants"
    );
}

#[test]
fn a_much_weaker_sim_variant_fails_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let suite = quick_suite(dir.path(), 12, &[("strong", 0.9), ("weak", 0.5)]);
    let run_dir = run(dir.path(), &suite, &["--seed", "7", "-j", "2"]);
    let (code, json) = gate(dir.path(), &[path(&run_dir), "--variants", "strong,weak"]);
    assert_eq!(code, Some(1), "{json:#}");
}

/// A drop too few trials can call one passes the gate, and the verdict
/// says so rather than reading as a clean pass: one task, three pairs, all
/// broken, McNemar p = 0.25.
#[test]
fn a_drop_too_few_trials_can_call_passes_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let suite = quick_suite(dir.path(), 1, &[("right", 1.0), ("wrong", 0.0)]);
    let run_dir = run(dir.path(), &suite, &["--seed", "1"]);
    let (code, json) = gate(dir.path(), &[path(&run_dir), "--variants", "right,wrong"]);
    assert_eq!(code, Some(0), "{json:#}");
    let line = json["verdict"]["line"].as_str().unwrap();
    assert!(
        line.starts_with("PASS right 3/3 vs wrong 0/3: -100.0 points")
            && line.contains("not significant at alpha 0.05"),
        "{line}"
    );
    // The interval excludes no change: it is said which of the two decides.
    let excludes_zero = json["comparison"]["success"]["ci_high"]
        .as_f64()
        .is_some_and(|high| high < 0.0);
    assert!(excludes_zero, "{json:#}");
    assert!(line.contains("the verdict is the test's"), "{line}");
}
