// Tests may panic on failure; the workspace's unwrap ban is for library code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fixture;

use std::path::Path;
use tack_analysis::{AnalysisError, analyze_run, load_trial_trace};
use tack_trace::schema::kind;

fn run_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fixture::write_run(dir.path());
    dir
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn summarises_each_variant_in_manifest_order() {
    let dir = run_dir();
    let analysis = analyze_run(dir.path()).unwrap();
    let names: Vec<&str> = analysis
        .variants
        .iter()
        .map(|v| v.variant.as_str())
        .collect();
    assert_eq!(names, ["baseline", "real", "unused"]);

    let baseline = &analysis.variants[0];
    assert!(baseline.simulated);
    assert_eq!(baseline.model, "sim");
    assert_eq!((baseline.trials, baseline.passed), (4, 2));
    assert!(close(baseline.success_rate, 0.5));
    assert!(baseline.ci_low < 0.5 && baseline.ci_high > 0.5);
    assert_eq!(baseline.total_tokens, 1000);
    assert_eq!(baseline.input_tokens, 750);
    assert_eq!(baseline.output_tokens, 250);
    assert_eq!(baseline.tokens_per_success, Some(500.0));
    assert_eq!(baseline.mean_tokens_successful, Some(200.0));
    assert_eq!(
        baseline.cost_usd, None,
        "unpriced trials make the cost unknown"
    );
    assert!(close(baseline.mean_steps, 4.0));
    assert_eq!(baseline.retries, 4);
    assert_eq!(baseline.tool_errors, 4);
    assert_eq!(baseline.interventions, 0);
    assert_eq!(baseline.outcomes.get("passed"), Some(&2));
    assert_eq!(baseline.outcomes.get("verification_failed"), Some(&1));
    assert_eq!(baseline.outcomes.get("limit"), Some(&1));
    assert_eq!(baseline.stop_reasons.get("completed"), Some(&3));
    assert_eq!(baseline.stop_reasons.get("step_limit"), Some(&1));

    let real = &analysis.variants[1];
    assert_eq!((real.trials, real.passed), (3, 2));
    assert_eq!(real.tokens_per_success, Some(400.0));
    assert!(close(real.cost_usd.unwrap(), 0.03));
    assert!(close(real.mean_steps, 3.0));
}

#[test]
fn a_variant_without_trials_has_zeros_not_nan() {
    let dir = run_dir();
    let unused = analyze_run(dir.path()).unwrap().variants.remove(2);
    assert_eq!((unused.trials, unused.passed), (0, 0));
    assert_eq!(unused.success_rate, 0.0);
    assert_eq!((unused.ci_low, unused.ci_high), (0.0, 0.0));
    assert_eq!(unused.tokens_per_success, None);
    assert_eq!(unused.mean_tokens_successful, None);
    assert!(unused.outcomes.is_empty());
}

#[test]
fn matrix_and_failed_trials() {
    let dir = run_dir();
    let analysis = analyze_run(dir.path()).unwrap();
    let cells = |row: usize| -> Vec<(String, u64, u64)> {
        let row = &analysis.matrix[row];
        row.cells
            .iter()
            .map(|c| (c.variant.clone(), c.passed, c.trials))
            .collect()
    };
    assert_eq!(analysis.matrix[0].task, "fix-bug");
    assert_eq!(analysis.matrix[1].task, "add-test");
    let expected = |b: (u64, u64), r: (u64, u64)| {
        vec![
            ("baseline".to_string(), b.0, b.1),
            ("real".to_string(), r.0, r.1),
            ("unused".to_string(), 0, 0),
        ]
    };
    assert_eq!(cells(0), expected((1, 2), (1, 2)));
    assert_eq!(cells(1), expected((1, 2), (1, 1)));

    assert_eq!(analysis.trials.len(), 7);
    let failed: Vec<&str> = analysis
        .failed_trials
        .iter()
        .map(|t| t.trial_id.as_str())
        .collect();
    assert_eq!(
        failed,
        [
            "baseline--fix-bug--1",
            "baseline--add-test--1",
            "real--fix-bug--0"
        ]
    );
    let model_error = &analysis.failed_trials[2];
    assert_eq!(model_error.outcome, "model_error");
    assert_eq!(
        model_error.error.as_deref(),
        Some("provider said: rate limited <429>")
    );
}

#[test]
fn trial_trace_is_in_sequence_order() {
    let dir = run_dir();
    let trace = load_trial_trace(dir.path(), &fixture::traced_trial_id()).unwrap();
    assert_eq!(trace.trial.outcome, "verification_failed");
    let seqs: Vec<u64> = trace.spans.iter().map(|s| s.seq).collect();
    assert_eq!(seqs, [2, 4, 5, 7, 9]);
    assert_eq!(trace.spans[0].kind, kind::MODEL_CALL);
    assert_eq!(trace.spans[0].messages_to, Some(2));
    let tool = &trace.spans[1];
    assert_eq!(tool.tool_name.as_deref(), Some("bash"));
    assert_eq!(tool.tool_result.as_deref(), Some(fixture::HOSTILE));
    assert_eq!(tool.exit_code, Some(0));
    assert_eq!(trace.spans[2].error_kind.as_deref(), Some("invalid_json"));
    let check = &trace.spans[4];
    assert_eq!(check.kind, kind::CHECK);
    assert_eq!(check.check_passed, Some(false));
    assert_eq!(check.exit_code, Some(101));
    let indexes: Vec<u32> = trace.messages.iter().map(|m| m.message_index).collect();
    assert_eq!(indexes, [0, 1, 2, 3, 4, 5]);
    assert_eq!(trace.messages[0].role, "system");
    assert!(trace.messages[2].tool_calls_json.is_some());
}

#[test]
fn a_trial_without_spans_has_an_empty_trace() {
    let dir = run_dir();
    let trace = load_trial_trace(dir.path(), "real--fix-bug--0").unwrap();
    assert!(trace.spans.is_empty() && trace.messages.is_empty());
}

#[test]
fn unknown_and_malformed_trial_ids_are_errors() {
    let dir = run_dir();
    let err = load_trial_trace(dir.path(), "nope").unwrap_err();
    assert!(matches!(err, AnalysisError::TrialNotFound { .. }), "{err}");
    let err = load_trial_trace(dir.path(), "../manifest").unwrap_err();
    assert!(matches!(err, AnalysisError::InvalidTrialId { .. }), "{err}");
}

#[test]
fn a_run_without_trials_says_so() {
    let dir = tempfile::tempdir().unwrap();
    fixture::manifest().write(dir.path()).unwrap();
    let err = analyze_run(dir.path()).unwrap_err();
    assert!(matches!(err, AnalysisError::NoTrials { .. }));
    assert!(err.to_string().contains("did the run start?"), "{err}");
    std::fs::create_dir(dir.path().join("trials")).unwrap();
    assert!(matches!(
        analyze_run(dir.path()).unwrap_err(),
        AnalysisError::NoTrials { .. }
    ));
}

#[test]
fn a_missing_manifest_names_the_directory() {
    let err = analyze_run(Path::new("/nonexistent/run")).unwrap_err();
    assert!(err.to_string().contains("/nonexistent/run"), "{err}");
}

#[test]
fn a_variant_without_successes_has_no_token_efficiency() {
    let dir = tempfile::tempdir().unwrap();
    fixture::manifest().write(dir.path()).unwrap();
    let failures: Vec<_> = fixture::trials()
        .into_iter()
        .filter(|t| t.outcome != tack_protocol::TrialOutcome::Passed)
        .collect();
    fixture::write_trials(dir.path(), &failures);
    let analysis = analyze_run(dir.path()).unwrap();
    let baseline = &analysis.variants[0];
    assert_eq!((baseline.trials, baseline.passed), (2, 0));
    assert_eq!(baseline.tokens_per_success, None);
    assert_eq!(baseline.mean_tokens_successful, None);
    assert_eq!(baseline.success_rate, 0.0);
    assert!(
        baseline.ci_high > 0.0,
        "an upper bound remains with 0 successes"
    );
    assert_eq!(analysis.failed_trials.len(), 3);
}

#[test]
fn a_corrupt_parquet_file_is_an_error_naming_it() {
    let dir = run_dir();
    std::fs::write(
        dir.path().join("trials/broken.parquet"),
        b"not parquet at all",
    )
    .unwrap();
    let err = analyze_run(dir.path()).unwrap_err();
    assert!(matches!(err, AnalysisError::NotParquet { .. }), "{err}");
    assert!(err.to_string().contains("trials/broken.parquet"), "{err}");
}

#[test]
fn a_missing_column_is_an_error_naming_it() {
    use arrow_array::{RecordBatch, StringArray};
    use arrow_schema::{DataType, Field, Schema};
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    fixture::manifest().write(dir.path()).unwrap();
    std::fs::create_dir(dir.path().join("trials")).unwrap();
    let schema = Arc::new(Schema::new(vec![Field::new(
        "trial_id",
        DataType::Utf8,
        false,
    )]));
    let ids = Arc::new(StringArray::from(vec!["t1"]));
    let batch = RecordBatch::try_new(schema.clone(), vec![ids]).unwrap();
    let file = std::fs::File::create(dir.path().join("trials/t1.parquet")).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, schema, None).unwrap();
    writer.write(&batch).unwrap();
    writer.close().unwrap();
    let err = analyze_run(dir.path()).unwrap_err();
    let message = err.to_string();
    assert!(message.contains("variant"), "{message}");
}
