//! Runs part of the demo suite through the real runner and reads the trace
//! back with the Parquet reader.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::path::PathBuf;
use std::sync::Arc;

use tack_protocol::TrialOutcome;
use tack_runner::{RunPlan, run};

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
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn oracle_passes_and_the_trace_counts_match() {
    let traces = tempfile::tempdir().unwrap();
    let tasks = ["duration-minutes", "total-missing-file"];
    let result = run(
        plan(traces.path(), &["oracle", "sim-full"], &tasks, 2),
        Arc::new(|_| {}),
    )
    .await
    .unwrap();
    assert_eq!(result.trials.len(), 8);
    for trial in result.trials.iter().filter(|t| t.variant == "oracle") {
        assert_eq!(trial.outcome, TrialOutcome::Passed, "{trial:?}");
    }
    let dir = &result.run_dir;
    assert_eq!(tack_trace::count_rows(dir, "trials").unwrap(), 8);
    let steps: u32 = result.trials.iter().map(|t| t.steps).sum();
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
    assert!(tack_trace::count_rows(dir, "messages").unwrap() > 8 * 3);
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
    let first = run(plan(a.path(), &["sim-full"], &tasks, 3), Arc::new(|_| {}))
        .await
        .unwrap();
    let second = run(plan(b.path(), &["sim-full"], &tasks, 3), Arc::new(|_| {}))
        .await
        .unwrap();
    let shape = |r: &tack_runner::RunResult| -> Vec<_> {
        r.trials
            .iter()
            .map(|t| (t.trial_id.clone(), t.outcome, t.steps, t.total_tokens))
            .collect()
    };
    assert_eq!(shape(&first), shape(&second));
}
