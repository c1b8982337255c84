//! A crash costs only the trials still running: finished trials are whole
//! Parquet files, and left-over journals are recovered.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::io::Write;

use arrow_array::{Array, StringArray};
use tack_protocol::{
    Event, EventSink, Message, ModelCallRecord, RunTotals, SpanStatus, StopReason, TrialFinished,
    TrialOutcome, TrialStarted, Usage,
};
use tack_trace::{HostInfo, Manifest, RunStatus, RunWriter, SuiteInfo};

fn manifest() -> Manifest {
    Manifest {
        schema_version: tack_trace::MANIFEST_SCHEMA_VERSION,
        run_id: "run-1".to_string(),
        tack_version: "test".to_string(),
        suite: SuiteInfo {
            name: "s".to_string(),
            path: "suites/s".to_string(),
            content_hash: "0".repeat(64),
        },
        variants: vec![],
        tasks: vec!["t".to_string()],
        trials_per_task: 1,
        seed: 1,
        jobs: 1,
        host: HostInfo::current(),
        command_line: vec![],
        started_at: "2026-11-30T00:00:00Z".to_string(),
        finished_at: None,
        status: RunStatus::Running,
        price_table: None,
        fingerprint: None,
        shard: None,
        merged_from: Vec::new(),
        resumes: Vec::new(),
    }
}

fn started(id: &str) -> TrialStarted {
    TrialStarted {
        run_id: "run-1".to_string(),
        trial_id: id.to_string(),
        variant: "v".to_string(),
        task: "t".to_string(),
        trial_index: 0,
        attempt: 0,
        seed: 9,
        model: "sim".to_string(),
        started_at_ms: 1,
    }
}

fn model_call(span_id: u32) -> Event {
    Event::ModelCall(ModelCallRecord {
        span_id,
        step: span_id,
        provider: "tack".to_string(),
        request_model: "sim".to_string(),
        response_model: "sim".to_string(),
        started_at_ms: 2,
        duration_ms: 1,
        finish_reason: Some("tool_calls".to_string()),
        usage: Usage {
            input_tokens: 100,
            output_tokens: 10,
            ..Usage::default()
        },
        cost_usd: None,
        messages_from: 0,
        messages_to: 1,
        attempt: 1,
        retry_wait_ms: 0,
        rate_limit_wait_ms: 0,
        fault: None,
        status: SpanStatus::Ok,
        error: None,
    })
}

fn finished() -> Event {
    Event::TrialFinished(TrialFinished {
        outcome: TrialOutcome::Passed,
        stop_reason: StopReason::Completed,
        totals: RunTotals {
            steps: 1,
            ..RunTotals::default()
        },
        feedback_rounds: 0,
        tampered: false,
        checks_passed: Some(true),
        duration_ms: 5,
        finished_at_ms: 6,
        error: None,
    })
}

fn outcomes(run_dir: &std::path::Path) -> Vec<String> {
    let mut all = Vec::new();
    for batch in tack_trace::read_table(run_dir, "trials").unwrap() {
        let column = batch.column_by_name("outcome").unwrap();
        let values = column.as_any().downcast_ref::<StringArray>().unwrap();
        all.extend((0..values.len()).map(|i| values.value(i).to_string()));
    }
    all.sort();
    all
}

#[test]
fn interrupted_trials_are_recovered_from_their_journals() {
    let root = tempfile::tempdir().unwrap();
    let writer = RunWriter::create(root.path(), &manifest()).unwrap();

    let mut done = writer.trial(started("done")).unwrap();
    done.record(Event::Message {
        index: 0,
        message: Message::user("go"),
    })
    .unwrap();
    done.record(model_call(1)).unwrap();
    done.record(finished()).unwrap();
    done.finish().unwrap();

    // This one is cut off mid-trial, its last journal line torn.
    let mut crashed = writer.trial(started("crashed")).unwrap();
    crashed
        .record(Event::Message {
            index: 0,
            message: Message::user("go"),
        })
        .unwrap();
    crashed.record(model_call(1)).unwrap();
    drop(crashed);
    let journal = writer.dir().join("journal/crashed.jsonl");
    std::fs::OpenOptions::new()
        .append(true)
        .open(&journal)
        .unwrap()
        .write_all(b"{\"seq\":3,\"event\":{\"type\":\"mod")
        .unwrap();

    assert_eq!(outcomes(writer.dir()), ["passed"]);
    // While the writing process lives, its journals are trials in progress.
    assert!(tack_trace::run_in_progress(writer.dir()));
    assert_eq!(tack_trace::recover_journals(writer.dir()).unwrap(), 0);
    // A crash leaves the id of a process that no longer exists.
    std::fs::write(writer.dir().join("run.pid"), "4294967295").unwrap();
    assert_eq!(tack_trace::recover_journals(writer.dir()).unwrap(), 1);
    assert_eq!(
        Manifest::read(writer.dir()).unwrap().status,
        RunStatus::Interrupted
    );
    assert_eq!(outcomes(writer.dir()), ["cancelled", "passed"]);
    assert!(!journal.exists());
    assert_eq!(tack_trace::count_rows(writer.dir(), "spans").unwrap(), 2);
    assert_eq!(tack_trace::count_rows(writer.dir(), "messages").unwrap(), 2);
    // Nothing left to recover the second time.
    assert_eq!(tack_trace::recover_journals(writer.dir()).unwrap(), 0);
}

#[test]
fn no_partial_files_are_left_and_readers_skip_them() {
    let root = tempfile::tempdir().unwrap();
    let writer = RunWriter::create(root.path(), &manifest()).unwrap();
    let mut trial = writer.trial(started("a")).unwrap();
    trial.record(finished()).unwrap();
    trial.finish().unwrap();
    std::fs::write(writer.dir().join("trials/.b.parquet.partial"), b"torn").unwrap();
    assert_eq!(tack_trace::count_rows(writer.dir(), "trials").unwrap(), 1);
    let manifest = Manifest::read(writer.dir()).unwrap();
    assert_eq!(manifest.status, RunStatus::Running);
}
