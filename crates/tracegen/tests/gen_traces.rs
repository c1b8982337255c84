//! `tack-tracegen gen-traces` writes a run that tack's own reader, analysis and
//! report take as a real one: the counts it prints are the rows on disk, the
//! same seed gives the same run, and `tack report` (the library under it)
//! lists failures within its cap.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use tack_analysis::{AnalyzeOptions, FailedLimit, RunTables, analyze, analyze_run};
use tack_report::ReportOptions;
use tack_trace::schema::{MESSAGES_DIR, SPANS_DIR, TRIALS_DIR};
use tack_trace::{Manifest, RunStatus, count_rows};

fn generate(out: &Path, trials: u64, seed: u64) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_tack-tracegen"))
        .args(["gen-traces", "--trials", &trials.to_string()])
        .args(["--spans-per-trial", "20", "--seed", &seed.to_string()])
        .args(["--variants", "4", "--tasks", "12", "--json", "--out"])
        .arg(out)
        .output()
        .expect("tack-tracegen runs");
    assert!(
        output.status.success(),
        "gen-traces failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("gen-traces --json prints its summary")
}

fn number(summary: &Value, key: &str) -> u64 {
    summary[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} in {summary}"))
}

#[test]
fn a_generated_run_reads_back_and_reports() {
    let dir = tempfile::tempdir().expect("tempdir");
    let run = dir.path().join("synthetic-a");
    let summary = generate(&run, 480, 7);
    assert_eq!(number(&summary, "trials"), 480);
    assert_eq!(number(&summary, "variants"), 4);
    assert_eq!(number(&summary, "tasks"), 12);
    assert_eq!(number(&summary, "trials_per_task"), 10);

    // What it says it wrote is what is on disk.
    let attempts = number(&summary, "attempts");
    let spans = number(&summary, "spans");
    assert!(attempts >= 480, "every planned trial has an attempt");
    assert_eq!(
        count_rows(&run, TRIALS_DIR).expect("trials") as u64,
        attempts
    );
    assert_eq!(count_rows(&run, SPANS_DIR).expect("spans") as u64, spans);
    let per_trial = spans as f64 / attempts as f64;
    assert!(
        (14.0..=26.0).contains(&per_trial),
        "about 20 spans per trial, got {per_trial:.1}"
    );
    // Repeated content (system prompts, files read again) is stored once.
    let messages = count_rows(&run, MESSAGES_DIR).expect("messages") as u64;
    assert!(
        messages > 0 && messages < spans,
        "{messages} messages for {spans} spans"
    );

    let manifest = Manifest::read(&run).expect("manifest");
    assert_eq!(manifest.status, RunStatus::Finished);
    assert_eq!(manifest.run_id, "synthetic-a");
    assert_eq!(manifest.trials_per_task, 10);

    // The analysis sees every planned trial once, reruns apart.
    let analysis = analyze_run(&run).expect("analysis");
    assert_eq!(analysis.final_trials(), 480);
    assert_eq!(analysis.trials.len(), 480);
    assert_eq!(analysis.retried_attempts(), attempts - 480);
    let passed: u64 = analysis.variants.iter().map(|v| v.passed).sum();
    assert!(
        passed > 100 && passed < 420,
        "a mix of outcomes, got {passed} passed"
    );
    assert!(analysis.variants.iter().any(|v| v.cost_usd.is_some()));

    // The report lists at most the capped failures, and says how many failed.
    let options = ReportOptions {
        failed: FailedLimit {
            per_task: 1,
            total: 30,
        },
    };
    let out = dir.path().join("report");
    let files =
        tack_report::write_report_with_prices(&run, &out, &options, |_| {}).expect("tack report");
    assert!(files.index.is_file());
    assert_eq!(files.trial_pages.len(), 30);
    let capped = analyze(
        &RunTables::open(&run).expect("tables"),
        AnalyzeOptions {
            every_trial: false,
            failed: Some(options.failed),
        },
    )
    .expect("capped analysis");
    assert_eq!(capped.failed_trials.len(), 30);
    assert_eq!(capped.failed_total, 480 - passed);
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let first = generate(&dir.path().join("synthetic-b"), 60, 3);
    let again = generate(&dir.path().join("synthetic-c"), 60, 3);
    generate(&dir.path().join("synthetic-d"), 60, 4);
    for key in ["attempts", "spans", "bytes"] {
        assert_eq!(first[key], again[key], "{key}");
    }
    let a = analyze_run(&dir.path().join("synthetic-b")).expect("b");
    let b = analyze_run(&dir.path().join("synthetic-c")).expect("c");
    let c = analyze_run(&dir.path().join("synthetic-d")).expect("d");
    assert_eq!(a.variants, b.variants);
    assert_eq!(a.matrix, b.matrix);
    assert_ne!(a.variants, c.variants, "another seed draws other trials");
}

#[test]
fn any_number_of_writers_writes_the_same_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut summaries = Vec::new();
    for writers in ["1", "3"] {
        let out = dir.path().join(format!("synthetic-w{writers}"));
        let output = Command::new(env!("CARGO_BIN_EXE_tack-tracegen"))
            .args([
                "gen-traces",
                "--trials",
                "90",
                "--seed",
                "5",
                "--json",
                "--writers",
                writers,
            ])
            .arg("--out")
            .arg(&out)
            .output()
            .expect("tack-tracegen runs");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        summaries.push(serde_json::from_slice::<Value>(&output.stdout).expect("summary"));
        assert!(
            !dir.path()
                .join(format!(".synthetic-w{writers}.writers"))
                .exists(),
            "the writers' shards are removed"
        );
    }
    for key in ["attempts", "spans"] {
        assert_eq!(summaries[0][key], summaries[1][key], "{key}");
    }
    let one = analyze_run(&dir.path().join("synthetic-w1")).expect("one writer");
    let three = analyze_run(&dir.path().join("synthetic-w3")).expect("three writers");
    assert_eq!(one.variants, three.variants);
    assert_eq!(one.matrix, three.matrix);
    assert_eq!(one.failed_total, three.failed_total);
}

#[test]
fn an_existing_directory_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_tack-tracegen"))
        .args(["gen-traces", "--trials", "10", "--out"])
        .arg(dir.path())
        .output()
        .expect("tack-tracegen runs");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("already exists"));
}
