//! Runs part of the demo suite through the real runner and reads the trace
//! back with the Parquet reader.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::path::PathBuf;
use std::sync::Arc;

use tack_protocol::TrialOutcome;
use tack_runner::{CancelFlag, RunPlan, run};

fn demo_suite() -> tack_suite::Suite {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../suites/demo");
    tack_suite::load_suite(&root).unwrap()
}

fn plan(traces: &std::path::Path, variants: &[&str], tasks: &[&str], trials: u32) -> RunPlan {
    RunPlan {
        suite: demo_suite(),
        variants: variants.iter().map(|s| s.to_string()).collect(),
        tasks: tasks.iter().map(|s| s.to_string()).collect(),
        trials_per_task: trials,
        jobs: 2,
        seed: 7,
        traces_root: traces.to_path_buf(),
        run_id: "test-run".to_string(),
        command_line: vec![],
        keep_failed_workspaces: false,
        replay: None,
        hidden: Vec::new(),
        interactive: None,
        shard: None,
        infra_retries: 0,
        resume: false,
        rerun: Default::default(),
        images: Default::default(),
        visible_within: None,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn oracle_passes_and_the_trace_counts_match() {
    let traces = tempfile::tempdir().unwrap();
    let tasks = ["duration-minutes", "total-missing-file"];
    let result = run(
        plan(traces.path(), &["oracle", "sim-full"], &tasks, 2),
        Arc::new(|_| {}),
        CancelFlag::default(),
    )
    .await
    .unwrap();
    assert_eq!(result.trials.len(), 8);
    for trial in result.trials.iter().filter(|t| t.variant == "oracle") {
        assert_eq!(trial.outcome, TrialOutcome::Passed, "{trial:?}");
    }
    let dir = &result.run_dir;
    assert_eq!(tack_trace::count_rows(dir, "trials").unwrap(), 8);
    let steps: u32 = result.trials.iter().map(|t| t.totals.steps).sum();
    let spans = tack_trace::read_table(dir, "spans").unwrap();
    let mut model_calls = 0;
    for batch in &spans {
        let kinds = batch
            .column_by_name("kind")
            .unwrap()
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .unwrap();
        model_calls += kinds.iter().filter(|k| *k == Some("model_call")).count();
    }
    assert_eq!(model_calls as u32, steps);
    // Messages are stored once per run: the system prompt every trial sent
    // is one row.
    let messages = tack_trace::count_rows(dir, "messages").unwrap();
    let mut sent = 0;
    for trial in &result.trials {
        let transcript = tack_trace::trial_transcript(dir, &trial.trial_id).unwrap();
        assert!(transcript.len() >= 3, "{transcript:?}");
        sent += transcript.len();
    }
    assert!(
        messages + result.trials.len() <= sent,
        "{messages} messages stored for {sent} sent"
    );
    assert!(
        !dir.join("journal").read_dir().unwrap().any(|_| true),
        "journals left behind"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn same_seed_same_trajectory() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let tasks = ["median-even"];
    let first = run(
        plan(a.path(), &["sim-full"], &tasks, 3),
        Arc::new(|_| {}),
        CancelFlag::default(),
    )
    .await
    .unwrap();
    let second = run(
        plan(b.path(), &["sim-full"], &tasks, 3),
        Arc::new(|_| {}),
        CancelFlag::default(),
    )
    .await
    .unwrap();
    // Tool results carry timings and temp paths, so token counts may differ
    // by a few; the trajectory — every call and its arguments — may not.
    let outcomes = |r: &tack_runner::RunResult| -> Vec<_> {
        r.trials
            .iter()
            .map(|t| (t.trial_id.clone(), t.outcome, t.totals.steps))
            .collect()
    };
    assert_eq!(outcomes(&first), outcomes(&second));
    assert_eq!(tool_calls(&first.run_dir), tool_calls(&second.run_dir));
    assert!(tool_calls(&first.run_dir).len() > 10);
}

/// Every tool call of the run as (trial, sequence number, tool, arguments).
fn tool_calls(run_dir: &std::path::Path) -> Vec<(String, u64, String, String)> {
    use arrow_array::{Array, StringArray, UInt64Array};
    let mut calls = Vec::new();
    for batch in tack_trace::read_table(run_dir, "spans").unwrap() {
        let text = |name: &str| {
            batch
                .column_by_name(name)
                .unwrap()
                .as_any()
                .downcast_ref::<StringArray>()
                .unwrap()
                .clone()
        };
        let (trial, kind, tool, arguments) = (
            text("trial_id"),
            text("kind"),
            text("name"),
            text("tool_arguments"),
        );
        let seq = batch
            .column_by_name("seq")
            .unwrap()
            .as_any()
            .downcast_ref::<UInt64Array>()
            .unwrap()
            .clone();
        for i in 0..batch.num_rows() {
            if kind.value(i) == "tool_call" {
                calls.push((
                    trial.value(i).to_string(),
                    seq.value(i),
                    tool.value(i).to_string(),
                    arguments.value(i).to_string(),
                ));
            }
        }
    }
    calls.sort();
    calls
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replayed_trial_makes_exactly_the_original_tool_calls() {
    let traces = tempfile::tempdir().unwrap();
    let original = run(
        plan(traces.path(), &["sim-chaos"], &["slugify-dashes"], 2),
        Arc::new(|_| {}),
        CancelFlag::default(),
    )
    .await
    .unwrap();
    for trial in &original.trials {
        let (replay, _warning) = tack_runner::replay_plan(
            &original.run_dir,
            &trial.trial_id,
            traces.path().to_path_buf(),
            vec![],
        )
        .unwrap();
        let replayed = run(replay, Arc::new(|_| {}), CancelFlag::default())
            .await
            .unwrap();
        assert_eq!(replayed.trials.len(), 1);
        assert_eq!(
            replayed.trials[0].outcome, trial.outcome,
            "{}",
            trial.trial_id
        );
        let calls = |dir: &std::path::Path, id: &str| -> Vec<(String, String)> {
            tool_calls(dir)
                .into_iter()
                .filter(|(trial, ..)| trial == id)
                .map(|(_, _, tool, arguments)| (tool, arguments))
                .collect()
        };
        let before = calls(&original.run_dir, &trial.trial_id);
        let after = calls(&replayed.run_dir, &replayed.trials[0].trial_id);
        assert!(!before.is_empty());
        assert_eq!(before, after, "{}", trial.trial_id);
    }
}
