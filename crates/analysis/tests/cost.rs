//! The cost table of a run written by tack's own trace writer: priced calls,
//! a call whose cost is unknown, a failed attempt, and a simulated variant.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use serde_json::json;
use std::path::Path;
use tack_analysis::cost::{CostReport, CostRow, CostStatus, ModelPrice, Rates, cost_report};
use tack_protocol::{
    Event, EventSink, ModelCallRecord, RunTotals, SpanStatus, StopReason, TrialFinished,
    TrialOutcome, TrialStarted, Usage,
};
use tack_trace::{Manifest, RunWriter};

const RUN_ID: &str = "cost-run";
const PRICE_TABLE: &str = "2026-11-01";

fn manifest() -> Manifest {
    let variant = |name: &str, model: &str, simulated: bool| {
        json!({"name": name, "model": model, "simulated": simulated,
               "description": "", "config": {}})
    };
    serde_json::from_value(json!({
        "run_id": RUN_ID, "tack_version": "0.1.0",
        "suite": {"name": "s", "path": "suites/s", "content_hash": "h"},
        "variants": [variant("real", "openai:gpt-4o", false), variant("sim", "sim", true)],
        "tasks": ["fix-bug", "add-test"], "trials_per_task": 2, "seed": 1, "jobs": 1,
        "host": {"os": "linux", "arch": "x86_64", "cpus": 2, "hostname": "t"},
        "command_line": ["tack", "run"], "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:01:00Z", "status": "finished",
        "price_table": PRICE_TABLE,
    }))
    .unwrap()
}

/// An answered call: `usage` as (input incl. cache, cache read, cache write,
/// output incl. reasoning, reasoning).
fn call(span_id: u32, usage: (u64, u64, u64, u64, u64), cost: Option<f64>) -> ModelCallRecord {
    ModelCallRecord {
        span_id,
        step: span_id,
        provider: "openai".to_string(),
        request_model: "gpt-4o".to_string(),
        response_model: "gpt-4o-2024-08-06".to_string(),
        started_at_ms: 0,
        duration_ms: 5,
        finish_reason: Some("stop".to_string()),
        usage: Usage {
            input_tokens: usage.0,
            cache_read_tokens: usage.1,
            cache_write_tokens: usage.2,
            output_tokens: usage.3,
            reasoning_tokens: usage.4,
        },
        cost_usd: cost,
        messages: vec![0],
        attempt: 1,
        retry_wait_ms: 0,
        rate_limit_wait_ms: 0,
        fault: None,
        purpose: None,
        parent_span_id: None,
        status: SpanStatus::Ok,
        error: None,
    }
}

/// A failed attempt: no usage, no cost; it must not count as an unknown cost.
fn failed_attempt(span_id: u32) -> ModelCallRecord {
    ModelCallRecord {
        finish_reason: None,
        usage: Usage::default(),
        status: SpanStatus::Error,
        error: Some("HTTP 529: overloaded".to_string()),
        ..call(span_id, (0, 0, 0, 0, 0), None)
    }
}

fn write_trial(
    writer: &RunWriter,
    (variant, task, index): (&str, &str, u32),
    passed: bool,
    calls: Vec<ModelCallRecord>,
) {
    let model = if variant == "sim" {
        "sim"
    } else {
        "openai:gpt-4o"
    };
    let mut recorder = writer
        .trial(TrialStarted {
            run_id: RUN_ID.to_string(),
            trial_id: format!("{variant}--{task}--{index}"),
            variant: variant.to_string(),
            task: task.to_string(),
            trial_index: index,
            attempt: 0,
            seed: 1,
            model: model.to_string(),
            started_at_ms: 0,
            environment: None,
        })
        .unwrap();
    let steps = calls.len() as u32;
    for call in calls {
        recorder.record(Event::ModelCall(call)).unwrap();
    }
    let outcome = if passed {
        TrialOutcome::Passed
    } else {
        TrialOutcome::VerificationFailed
    };
    recorder
        .record(Event::TrialFinished(TrialFinished {
            outcome,
            stop_reason: StopReason::Completed,
            totals: RunTotals {
                steps,
                ..RunTotals::default()
            },
            feedback_rounds: 0,
            tampered: false,
            checks_passed: Some(passed),
            duration_ms: 10,
            finished_at_ms: 10,
            error: None,
        }))
        .unwrap();
    recorder.finish().unwrap();
}

/// real × fix-bug: trial 0 passed with two priced calls (and a failed
/// attempt), trial 1 failed with one priced call and one of unknown cost.
/// real × add-test: one passed trial, one priced call. sim × fix-bug: one
/// passed trial, two unpriced calls. sim × add-test: one failed trial that
/// made no call.
fn write_run(root: &Path) -> std::path::PathBuf {
    let manifest = manifest();
    let writer = RunWriter::create(root, &manifest).unwrap();
    let calls = vec![
        failed_attempt(1),
        call(2, (1000, 200, 100, 300, 50), Some(0.01)),
        call(3, (2000, 1500, 0, 100, 0), Some(0.02)),
    ];
    write_trial(&writer, ("real", "fix-bug", 0), true, calls);
    let calls = vec![
        call(1, (500, 0, 0, 50, 0), Some(0.005)),
        call(2, (700, 0, 0, 70, 0), None),
    ];
    write_trial(&writer, ("real", "fix-bug", 1), false, calls);
    let calls = vec![call(1, (400, 0, 0, 40, 0), Some(0.004))];
    write_trial(&writer, ("real", "add-test", 0), true, calls);
    let calls = vec![
        call(1, (100, 0, 0, 10, 0), None),
        call(2, (200, 0, 0, 20, 0), None),
    ];
    write_trial(&writer, ("sim", "fix-bug", 0), true, calls);
    write_trial(&writer, ("sim", "add-test", 0), false, Vec::new());
    writer.close(&manifest).unwrap();
    writer.dir().to_path_buf()
}

fn report() -> CostReport {
    let tmp = tempfile::tempdir().unwrap();
    let run_dir = write_run(tmp.path());
    cost_report(&run_dir).unwrap()
}

fn row<'a>(report: &'a CostReport, variant: &str, task: &str) -> &'a CostRow {
    report
        .rows
        .iter()
        .find(|r| r.variant == variant && r.task.as_deref() == Some(task))
        .unwrap_or_else(|| panic!("no row {variant} × {task}: {:#?}", report.rows))
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-12
}

#[test]
fn rows_come_by_variant_model_and_task_in_manifest_order() {
    let report = report();
    let keys: Vec<(&str, &str, Option<&str>)> = report
        .rows
        .iter()
        .map(|r| (r.variant.as_str(), r.model.as_str(), r.task.as_deref()))
        .collect();
    assert_eq!(
        keys,
        [
            ("real", "openai:gpt-4o", Some("fix-bug")),
            ("real", "openai:gpt-4o", Some("add-test")),
            ("sim", "sim", Some("fix-bug")),
            ("sim", "sim", Some("add-test")),
        ]
    );
    assert_eq!(report.price_table.as_deref(), Some(PRICE_TABLE));
    assert_eq!(report.simulated, ["sim"]);
    // A real variant beside the simulated one: the total is no simulation.
    assert!(!report.total.simulated);
    assert_eq!(report.run_id, RUN_ID);
}

#[test]
fn tokens_of_each_kind_are_summed_over_answered_calls_only() {
    let report = report();
    let r = row(&report, "real", "fix-bug");
    assert_eq!((r.trials, r.successes), (2, 1));
    // The failed attempt carries no usage and is not a call.
    assert_eq!(r.calls, 4);
    assert_eq!(r.input_tokens, 1000 + 2000 + 500 + 700);
    assert_eq!(r.cache_read_tokens, 1700);
    assert_eq!(r.cache_write_tokens, 100);
    assert_eq!(r.output_tokens, 300 + 100 + 50 + 70);
    assert_eq!(r.reasoning_tokens, 50);
}

#[test]
fn a_call_of_unknown_cost_makes_its_totals_a_lower_bound_not_zero() {
    let report = report();
    let r = row(&report, "real", "fix-bug");
    assert_eq!(r.unknown_cost_calls, 1);
    assert_eq!(r.status, CostStatus::LowerBound);
    assert!(close(r.known_usd, 0.035), "{}", r.known_usd);
    assert!(close(r.usd_per_success.unwrap(), 0.035));
    assert_eq!(r.usd_text(), "≥ $0.0350");
    assert_eq!(r.per_success_text(), "≥ $0.0350");

    let exact = row(&report, "real", "add-test");
    assert_eq!(exact.status, CostStatus::Exact);
    assert_eq!(exact.usd_text(), "$0.0040");

    let variant = &report.by_variant[0];
    assert_eq!(
        (variant.variant.as_str(), variant.task.as_deref()),
        ("real", None)
    );
    assert_eq!(
        (variant.trials, variant.successes, variant.calls),
        (3, 2, 5)
    );
    assert_eq!(variant.status, CostStatus::LowerBound);
    assert!(close(variant.usd_per_success.unwrap(), 0.039 / 2.0));
}

#[test]
fn unpriced_simulated_calls_read_unknown_and_a_callless_trial_costs_nothing() {
    let report = report();
    let sim = row(&report, "sim", "fix-bug");
    assert!(sim.simulated);
    assert_eq!((sim.calls, sim.unknown_cost_calls), (2, 2));
    assert_eq!(sim.status, CostStatus::Unknown);
    assert_eq!(sim.usd_text(), "unknown");
    assert_eq!(sim.per_success_text(), "unknown");
    assert_eq!(sim.usd_per_success, None);

    let idle = row(&report, "sim", "add-test");
    assert_eq!((idle.calls, idle.status), (0, CostStatus::Exact));
    assert_eq!(idle.per_success_text(), "no success");

    let variant = &report.by_variant[1];
    assert_eq!(variant.status, CostStatus::Unknown);
    assert_eq!(report.total.status, CostStatus::LowerBound);
    assert_eq!(report.total.unknown_cost_calls, 3);
    assert!(report.any_unknown());
}

#[test]
fn the_csv_has_one_line_per_row_and_leaves_unknown_dollars_empty() {
    let report = report();
    let csv = report.to_csv();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + report.rows.len(), "{csv}");
    assert!(lines[0].starts_with("run_id,variant,model,task,"));
    assert!(
        lines[1].starts_with(
            "cost-run,real,openai:gpt-4o,fix-bug,false,2,1,4,4200,1700,100,520,50,0.035"
        ),
        "{csv}"
    );
    assert!(lines[1].contains(",lower_bound,"), "{csv}");
    assert!(lines[3].contains(",,unknown,,2"), "{csv}");
}

#[test]
fn prices_are_listed_only_from_the_table_that_priced_the_run() {
    let mut report = report();
    let lookup = |model: &str| ModelPrice {
        model: model.to_string(),
        entry: (model != "sim").then(|| "gpt-4o".to_string()),
        rates: (model != "sim").then_some(Rates {
            input: 2.5,
            cached_input: 1.25,
            cache_write: 2.5,
            output: 10.0,
            reasoning: 10.0,
        }),
    };
    report.set_prices(PRICE_TABLE, lookup);
    let models: Vec<&str> = report.prices.iter().map(|p| p.model.as_str()).collect();
    assert_eq!(models, ["openai:gpt-4o", "sim"]);
    assert!(report.prices[1].rates.is_none());
    assert_eq!(report.prices_note, None);

    report.set_prices("2027-01-01", lookup);
    assert!(report.prices.is_empty());
    let note = report.prices_note.clone().unwrap();
    assert!(
        note.contains(PRICE_TABLE) && note.contains("2027-01-01"),
        "{note}"
    );
}
