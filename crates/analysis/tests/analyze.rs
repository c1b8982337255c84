// Tests may panic on failure; the workspace's unwrap ban is for library code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fixture;

use std::path::Path;
use tack_analysis::{AnalysisError, analyze_run, load_trial_trace};
use tack_trace::schema::{col, kind};

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
    assert_eq!(names, ["baseline", "real", "unused", "chaos"]);

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
    assert!(close(baseline.counts.mean(col::STEPS), 4.0));
    assert_eq!(baseline.counts.sum(col::RETRIES), 4);
    assert_eq!(baseline.counts.sum(col::TOOL_ERRORS), 4);
    assert_eq!(baseline.counts.sum(col::INTERVENTIONS), 2);
    assert_eq!(baseline.counts.sum(col::FEEDBACK_ROUNDS), 2);
    assert_eq!(baseline.tampered, 1, "trials, not a sum of anything else");
    assert_eq!(
        baseline.denied_calls, 2,
        "the approver's and a rule's refusal"
    );
    assert_eq!(baseline.injected_faults, 0);
    assert!(baseline.faults_by_kind.is_empty());
    assert_eq!(baseline.rate_limit_wait_ms, 0);
    assert_eq!(baseline.outcomes.get("passed"), Some(&2));
    assert_eq!(baseline.outcomes.get("verification_failed"), Some(&1));
    assert_eq!(baseline.outcomes.get("limit"), Some(&1));
    assert_eq!(baseline.stop_reasons.get("completed"), Some(&3));
    assert_eq!(baseline.stop_reasons.get("step_limit"), Some(&1));

    let real = &analysis.variants[1];
    assert_eq!((real.trials, real.passed), (3, 2));
    assert_eq!(real.tokens_per_success, Some(400.0));
    assert!(close(real.cost_usd.unwrap(), 0.03));
    assert!(close(real.counts.mean(col::STEPS), 3.0));
    assert_eq!(real.counts.sum(col::RETRIES), 3);
    assert_eq!(real.counts.sum(col::INTERVENTIONS), 0);
    assert_eq!(real.counts.sum(col::FEEDBACK_ROUNDS), 1);
    assert_eq!(real.tampered, 0);
    assert_eq!(real.denied_calls, 0);
    assert_eq!((real.injected_faults, real.rate_limit_wait_ms), (0, 0));
}

#[test]
fn chaos_variants_count_their_injected_faults() {
    let dir = run_dir();
    let analysis = analyze_run(dir.path()).unwrap();
    let chaos = &analysis.variants[3];
    assert_eq!(chaos.variant, "chaos");
    assert_eq!((chaos.trials, chaos.passed), (2, 1));
    assert_eq!(chaos.injected_faults, 2);
    let kinds: Vec<(&str, u64)> = chaos
        .faults_by_kind
        .iter()
        .map(|(kind, &count)| (kind.as_str(), count))
        .collect();
    assert_eq!(kinds, [("malformed_json", 1), ("transport_error", 1)]);
    assert_eq!(chaos.rate_limit_wait_ms, fixture::CHAOS_RATE_LIMIT_WAIT_MS);
    assert_eq!(chaos.denied_calls, 0, "faults are not denials");
    let unused = &analysis.variants[2];
    assert_eq!((unused.injected_faults, unused.rate_limit_wait_ms), (0, 0));
    assert!(unused.faults_by_kind.is_empty());

    let row = |id: &str| analysis.trials.iter().find(|t| t.trial_id == id).unwrap();
    let failed = row(&fixture::chaos_trial_id());
    assert_eq!(failed.injected_faults, 2);
    assert_eq!(failed.rate_limit_wait_ms, fixture::CHAOS_RATE_LIMIT_WAIT_MS);
    let passed = row("chaos--add-test--0");
    assert_eq!((passed.injected_faults, passed.rate_limit_wait_ms), (0, 0));
    assert_eq!(row(&fixture::traced_trial_id()).injected_faults, 0);
    // A single trial's row counts its own spans, as the run's rows do.
    let trace = load_trial_trace(dir.path(), &fixture::chaos_trial_id()).unwrap();
    assert_eq!(&trace.trial, failed);
}

#[test]
fn spans_carry_injected_faults_and_rate_limit_waits() {
    let dir = run_dir();
    let spans = load_trial_trace(dir.path(), &fixture::chaos_trial_id())
        .unwrap()
        .spans;
    let kinds: Vec<&str> = spans.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            kind::MODEL_CALL,
            kind::MODEL_CALL,
            kind::TOOL_CALL,
            kind::MODEL_CALL,
            kind::CHECK
        ]
    );
    let (transport, malformed, broken, clean) = (&spans[0], &spans[1], &spans[2], &spans[3]);
    assert_eq!(transport.fault.as_deref(), Some("transport_error"));
    assert_eq!(
        (transport.status.as_str(), transport.attempt),
        ("error", Some(1))
    );
    assert_eq!(transport.error.as_deref(), Some(fixture::INJECTED_ERROR));
    assert_eq!(transport.rate_limit_wait_ms, Some(250));
    assert_eq!(malformed.fault.as_deref(), Some("malformed_json"));
    assert_eq!(
        (malformed.status.as_str(), malformed.attempt),
        ("ok", Some(2))
    );
    assert_eq!(malformed.rate_limit_wait_ms, Some(0));
    assert_eq!(broken.parent_span_id, Some(malformed.span_id));
    assert_eq!(broken.error_kind.as_deref(), Some("invalid_json"));
    assert_eq!(
        broken.tool_arguments.as_deref(),
        Some(fixture::MALFORMED_ARGUMENTS)
    );
    assert_eq!(
        (broken.fault.as_deref(), broken.rate_limit_wait_ms),
        (None, None),
        "model-call columns"
    );
    assert_eq!(clean.fault, None);
    assert_eq!(clean.rate_limit_wait_ms, Some(1200));
}

#[test]
fn trial_rows_carry_feedback_tampering_and_denials() {
    let dir = run_dir();
    let analysis = analyze_run(dir.path()).unwrap();
    let row = |id: &str| {
        analysis
            .trials
            .iter()
            .find(|t| t.trial_id == id)
            .unwrap_or_else(|| panic!("no trial {id}"))
    };
    let traced = row(&fixture::traced_trial_id());
    assert!(traced.tampered);
    assert_eq!(
        (
            traced.counts.get(col::FEEDBACK_ROUNDS),
            traced.counts.get(col::INTERVENTIONS),
            traced.denied_calls
        ),
        (2, 2, 1)
    );
    assert_eq!(traced.counts.get(col::RETRIES), 1);
    assert_eq!(row(&fixture::rule_denied_trial_id()).denied_calls, 1);
    let untouched = row("baseline--fix-bug--0");
    assert!(!untouched.tampered);
    assert_eq!(
        (
            untouched.counts.get(col::FEEDBACK_ROUNDS),
            untouched.denied_calls
        ),
        (0, 0)
    );
    assert!(analysis.failed_trials[0].tampered, "failed rows too");
    // A single trial's row counts its own denials, as the run's rows do.
    let trace = load_trial_trace(dir.path(), &fixture::traced_trial_id()).unwrap();
    assert_eq!(&trace.trial, traced);
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
    let expected = |b: (u64, u64), r: (u64, u64), c: (u64, u64)| {
        vec![
            ("baseline".to_string(), b.0, b.1),
            ("real".to_string(), r.0, r.1),
            ("unused".to_string(), 0, 0),
            ("chaos".to_string(), c.0, c.1),
        ]
    };
    assert_eq!(cells(0), expected((1, 2), (1, 2), (0, 1)));
    assert_eq!(cells(1), expected((1, 2), (1, 1), (1, 1)));

    assert_eq!(analysis.trials.len(), 9);
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
            "real--fix-bug--0",
            "chaos--fix-bug--0"
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
    assert_eq!(seqs, [2, 3, 5, 7, 9, 10, 12, 13, 15, 17]);
    let kinds: Vec<&str> = trace.spans.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(
        kinds,
        [
            kind::MODEL_CALL,
            kind::MODEL_CALL,
            kind::TOOL_CALL,
            kind::TOOL_CALL,
            kind::APPROVAL,
            kind::TOOL_CALL,
            kind::APPROVAL,
            kind::TOOL_CALL,
            kind::MODEL_CALL,
            kind::CHECK,
        ]
    );
    // A run before schema version 3 named the positions a call sent.
    assert_eq!(
        trace.spans[0].message_ids,
        Some(vec!["#0".to_string(), "#1".to_string()])
    );
    assert_eq!(
        trace.spans[0].messages_sent,
        Some(2),
        "counted from the list"
    );
    let tool = &trace.spans[2];
    assert_eq!(tool.tool_name.as_deref(), Some("bash"));
    assert_eq!(tool.tool_result.as_deref(), Some(fixture::HOSTILE));
    assert_eq!(tool.exit_code, Some(0));
    assert_eq!(trace.spans[3].error_kind.as_deref(), Some("invalid_json"));
    let check = &trace.spans[9];
    assert_eq!(check.kind, kind::CHECK);
    assert_eq!(check.check_passed, Some(false));
    assert_eq!(check.exit_code, Some(101));
    let indexes: Vec<u32> = trace.messages.iter().map(|m| m.message_index).collect();
    assert_eq!(indexes, [0, 1, 2, 3, 4, 5, 6, 7]);
    assert_eq!(trace.messages[1].message_id, "#1");
    assert_eq!(trace.messages[0].role, "system");
    assert!(trace.messages[2].tool_calls_json.is_some());
}

#[test]
fn spans_carry_retries_permissions_and_approvals() {
    let dir = run_dir();
    let spans = load_trial_trace(dir.path(), &fixture::traced_trial_id())
        .unwrap()
        .spans;
    let (failed, retry) = (&spans[0], &spans[1]);
    assert_eq!((failed.attempt, failed.status.as_str()), (Some(1), "error"));
    assert_eq!(
        failed.error.as_deref(),
        Some("HTTP 429: rate limited <slow down>")
    );
    assert_eq!((retry.attempt, retry.retry_wait_ms), (Some(2), Some(1500)));
    let allowed = &spans[2];
    assert_eq!(allowed.permission.as_deref(), Some("allow"));
    assert_eq!(
        allowed.permission_rule.as_deref(),
        Some("allow bash: cat *")
    );
    assert_eq!(allowed.permission_part.as_deref(), Some("cat src/lib.rs"));
    assert_eq!(spans[3].permission, None, "broken calls get no verdict");
    let refusal = &spans[4];
    assert_eq!(refusal.tool_call_id.as_deref(), Some("call-3"));
    assert_eq!(refusal.parent_span_id, Some(2));
    assert_eq!(refusal.permission.as_deref(), Some("ask"));
    assert_eq!(refusal.permission_part.as_deref(), Some("rm -rf tests"));
    assert_eq!(refusal.approved, Some(false));
    assert_eq!(refusal.approver.as_deref(), Some("script: ./approve.sh"));
    assert_eq!(refusal.error.as_deref(), Some(fixture::DENIAL_REASON));
    assert_eq!(refusal.duration_ms, 2500);
    let denied = &spans[5];
    assert_eq!(denied.error_kind.as_deref(), Some("denied"));
    assert_eq!(denied.tool_call_id, refusal.tool_call_id);
    assert_eq!(spans[6].approved, Some(true));
    assert_eq!(spans[6].approver.as_deref(), Some("approve_all"));
    let check = &spans[9];
    assert_eq!((check.approved, check.permission.as_deref()), (None, None));
}

/// Traces written before feedback rounds, tamper detection, permissions,
/// retry and rate-limit waits and injected faults were recorded: the new
/// fields read as 0, false or none.
#[test]
fn traces_without_the_new_columns_still_read() {
    let dir = tempfile::tempdir().unwrap();
    fixture::write_run_as(dir.path(), |_| true);
    let analysis = analyze_run(dir.path()).unwrap();
    let baseline = &analysis.variants[0];
    assert_eq!((baseline.trials, baseline.passed), (4, 2));
    assert_eq!(
        (baseline.counts.sum(col::FEEDBACK_ROUNDS), baseline.tampered),
        (0, 0)
    );
    assert_eq!(
        baseline.counts.sum(col::INTERVENTIONS),
        2,
        "an old column, still read"
    );
    assert!(
        analysis
            .trials
            .iter()
            .all(|t| !t.tampered && t.counts.get(col::FEEDBACK_ROUNDS) == 0)
    );
    for variant in &analysis.variants {
        assert_eq!(variant.injected_faults, 0, "{}", variant.variant);
        assert!(variant.faults_by_kind.is_empty());
        assert_eq!(variant.rate_limit_wait_ms, 0);
    }
    assert!(
        analysis
            .trials
            .iter()
            .all(|t| t.injected_faults == 0 && t.rate_limit_wait_ms == 0)
    );
    let chaos = load_trial_trace(dir.path(), &fixture::chaos_trial_id()).unwrap();
    assert_eq!(chaos.trial.injected_faults, 0);
    assert!(
        chaos
            .spans
            .iter()
            .all(|s| s.fault.is_none() && s.rate_limit_wait_ms.is_none())
    );
    assert_eq!(chaos.spans[2].error_kind.as_deref(), Some("invalid_json"));
    let trace = load_trial_trace(dir.path(), &fixture::traced_trial_id()).unwrap();
    assert!(!trace.trial.tampered);
    assert_eq!(trace.trial.counts.get(col::FEEDBACK_ROUNDS), 0);
    assert_eq!(trace.spans.len(), 8, "no approval spans back then");
    for span in &trace.spans {
        assert_eq!(span.retry_wait_ms, None);
        assert_eq!(
            (span.rate_limit_wait_ms, span.fault.as_deref()),
            (None, None)
        );
        assert_eq!(span.permission, None);
        assert_eq!(span.permission_rule, None);
        assert_eq!(span.permission_part, None);
        assert_eq!(span.approved, None);
        assert_eq!(span.approver, None);
    }
    assert_eq!(trace.spans[1].attempt, Some(2), "old columns are kept");
}

/// A run whose files come from two tack versions (e.g. resumed by a newer
/// one). Trials: the file sorting first lacks columns later ones have; spans:
/// the file sorting first has columns a later one lacks.
#[test]
fn old_and_new_files_in_one_run_read_together() {
    let dir = tempfile::tempdir().unwrap();
    let new = fixture::rule_denied_trial_id();
    fixture::write_run_as(dir.path(), |id| id.starts_with("baseline") && id != new);
    let analysis = analyze_run(dir.path()).unwrap();
    let (baseline, real) = (&analysis.variants[0], &analysis.variants[1]);
    assert_eq!(
        (baseline.counts.sum(col::FEEDBACK_ROUNDS), baseline.tampered),
        (0, 0)
    );
    assert_eq!(
        (real.counts.sum(col::FEEDBACK_ROUNDS), real.tampered),
        (1, 0)
    );
    assert_eq!(baseline.denied_calls, 2, "error_kind is an old column");
    let rule_denied = load_trial_trace(dir.path(), &new).unwrap();
    assert_eq!(rule_denied.spans[1].permission.as_deref(), Some("deny"));
    let old = load_trial_trace(dir.path(), &fixture::traced_trial_id()).unwrap();
    assert_eq!(old.spans[2].permission, None);
    assert_eq!(old.trial.denied_calls, 1);
    assert_eq!(old.spans[0].rate_limit_wait_ms, None);
    // The chaos trial's file is new; the old files beside it add no faults.
    assert_eq!(baseline.injected_faults, 0);
    let chaos = &analysis.variants[3];
    assert_eq!(chaos.injected_faults, 2);
    assert_eq!(chaos.rate_limit_wait_ms, fixture::CHAOS_RATE_LIMIT_WAIT_MS);
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
    assert_eq!(analysis.failed_trials.len(), 4);
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

/// The fixture writes Parquet by hand; this checks the reader against what
/// tack-trace's writer makes of the protocol's events.
#[test]
fn reads_what_the_trace_writer_writes() {
    use tack_protocol::{
        ApprovalRecord, Event, EventSink, ModelCallRecord, RunTotals, SpanStatus, StopReason,
        ToolCallRecord, ToolErrorKind, TrialFinished, TrialOutcome, TrialStarted, Usage,
    };
    let root = tempfile::tempdir().unwrap();
    let manifest = fixture::manifest();
    let writer = tack_trace::RunWriter::create(root.path(), &manifest).unwrap();
    let mut trial = writer
        .trial(TrialStarted {
            run_id: manifest.run_id.clone(),
            trial_id: "baseline--fix-bug--0".into(),
            variant: "baseline".into(),
            task: "fix-bug".into(),
            trial_index: 0,
            attempt: 0,
            seed: 1,
            model: "sim".into(),
            started_at_ms: 0,
            environment: None,
        })
        .unwrap();
    let model_call =
        |span_id, attempt, retry_wait_ms, status, error: Option<&str>, fault: Option<&str>| {
            Event::ModelCall(ModelCallRecord {
                span_id,
                step: 1,
                provider: "sim".into(),
                request_model: "sim".into(),
                response_model: "sim".into(),
                started_at_ms: 0,
                duration_ms: 5,
                finish_reason: None,
                usage: Usage::default(),
                cost_usd: None,
                messages: Vec::new(),
                attempt,
                retry_wait_ms,
                rate_limit_wait_ms: 30 * u64::from(span_id),
                fault: fault.map(str::to_owned),
                purpose: None,
                parent_span_id: None,
                status,
                error: error.map(str::to_owned),
            })
        };
    let events = [
        model_call(
            1,
            1,
            0,
            SpanStatus::Error,
            Some("overloaded"),
            Some("transport_error"),
        ),
        model_call(2, 2, 800, SpanStatus::Ok, None, None),
        Event::Approval(ApprovalRecord {
            span_id: 3,
            parent_span_id: 2,
            step: 1,
            call_id: "c1".into(),
            tool_name: "bash".into(),
            arguments: "{\"command\":\"rm -rf tests\"}".into(),
            rule: "ask bash: rm *".into(),
            part: "rm -rf tests".into(),
            approved: false,
            approver: "rules".into(),
            reason: Some("no deleting tests".into()),
            started_at_ms: 0,
            wait_ms: 40,
        }),
        Event::ToolCall(ToolCallRecord {
            span_id: 4,
            parent_span_id: 2,
            step: 1,
            call_id: "c1".into(),
            tool_name: "bash".into(),
            arguments: "{\"command\":\"rm -rf tests\"}".into(),
            result: "denied".into(),
            exit_code: None,
            stdout: None,
            stderr: None,
            truncated: false,
            started_at_ms: 0,
            duration_ms: 0,
            status: SpanStatus::Error,
            error_kind: Some(ToolErrorKind::Denied),
            permission: Some("ask".into()),
            permission_rule: Some("ask bash: rm *".into()),
            permission_part: Some("rm -rf tests".into()),
            sandbox_profile: None,
            sandbox_denials: Vec::new(),
            mcp_server: None,
        }),
        Event::TrialFinished(TrialFinished {
            outcome: TrialOutcome::VerificationFailed,
            stop_reason: StopReason::Completed,
            totals: RunTotals {
                steps: 1,
                retries: 1,
                interventions: 1,
                tool_errors: 1,
                ..RunTotals::default()
            },
            feedback_rounds: 3,
            tampered: true,
            checks_passed: Some(false),
            duration_ms: 100,
            finished_at_ms: 100,
            error: None,
        }),
    ];
    for event in events {
        trial.record(event).unwrap();
    }
    trial.finish().unwrap();
    writer.close(&manifest).unwrap();

    let run_dir = writer.dir();
    let analysis = analyze_run(run_dir).unwrap();
    let baseline = &analysis.variants[0];
    assert_eq!(
        (
            baseline.counts.sum(col::RETRIES),
            baseline.counts.sum(col::INTERVENTIONS),
            baseline.counts.sum(col::FEEDBACK_ROUNDS),
            baseline.tampered,
            baseline.denied_calls
        ),
        (1, 1, 3, 1, 1)
    );
    assert_eq!(baseline.injected_faults, 1);
    assert_eq!(baseline.faults_by_kind.get("transport_error"), Some(&1));
    assert_eq!(baseline.rate_limit_wait_ms, 90);
    let trace = load_trial_trace(run_dir, "baseline--fix-bug--0").unwrap();
    assert!(trace.trial.tampered);
    assert_eq!(trace.trial.denied_calls, 1);
    assert_eq!(
        (trace.trial.injected_faults, trace.trial.rate_limit_wait_ms),
        (1, 90)
    );
    let spans = &trace.spans;
    assert_eq!(spans.len(), 4);
    assert_eq!(spans[0].error.as_deref(), Some("overloaded"));
    assert_eq!(spans[0].fault.as_deref(), Some("transport_error"));
    assert_eq!(
        (spans[0].rate_limit_wait_ms, spans[1].rate_limit_wait_ms),
        (Some(30), Some(60))
    );
    assert_eq!(spans[1].fault, None);
    assert_eq!(
        (spans[1].attempt, spans[1].retry_wait_ms),
        (Some(2), Some(800))
    );
    let approval = &spans[2];
    assert_eq!(approval.kind, kind::APPROVAL);
    assert_eq!(approval.status, "error");
    assert_eq!(approval.approved, Some(false));
    assert_eq!(approval.approver.as_deref(), Some("rules"));
    assert_eq!(approval.error.as_deref(), Some("no deleting tests"));
    assert_eq!(approval.permission.as_deref(), Some("ask"));
    assert_eq!(approval.permission_rule.as_deref(), Some("ask bash: rm *"));
    assert_eq!(approval.duration_ms, 40);
    assert_eq!(approval.parent_span_id, Some(2));
    assert_eq!(spans[3].error_kind.as_deref(), Some("denied"));
    assert_eq!(spans[3].permission_part.as_deref(), Some("rm -rf tests"));
}
