//! Analysis of a run's traces (`traces/<run-id>/`): per-variant success rates
//! with confidence intervals, token efficiency, outcome breakdowns, the task ×
//! variant matrix, and single-trial traces. Aggregation is done with Polars
//! lazy queries over the per-trial Parquet files; results come out as plain
//! serialisable structs so the CLI (`--json`) and the report need no Polars.

pub mod compare;
pub mod cost;
mod error;
mod frame;
pub mod query;
pub mod stats;
mod summary;
mod trace;
mod trials;

pub use error::AnalysisError;
pub use stats::wilson_interval;
pub use summary::{MatrixCell, MatrixRow, VariantSummary};
pub use tack_trace::Manifest;
pub use trace::{MessageRow, SpanRow, TrialTrace};
pub use trials::TrialRow;

use serde::Serialize;
use std::path::Path;
use tack_protocol::TrialOutcome;
use tack_trace::schema::TRIALS_DIR;

/// Everything the report shows about a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunAnalysis {
    pub manifest: Manifest,
    /// One per variant, in manifest order.
    pub variants: Vec<VariantSummary>,
    /// One row per task (manifest order), one cell per variant.
    pub matrix: Vec<MatrixRow>,
    /// Trials whose outcome is not `passed`, in the order of `trials`.
    pub failed_trials: Vec<TrialRow>,
    /// Every finished trial, by variant, task and trial index (manifest order).
    pub trials: Vec<TrialRow>,
}

/// Reads `run_dir/manifest.json` and the trials table and aggregates them.
pub fn analyze_run(run_dir: &Path) -> Result<RunAnalysis, AnalysisError> {
    let manifest = read_manifest(run_dir)?;
    let dir = run_dir.join(TRIALS_DIR);
    let files = frame::parquet_files(&dir)?;
    if files.is_empty() {
        return Err(AnalysisError::NoTrials { dir });
    }
    // Read the files once; the aggregations below run on the collected frame.
    let table = frame::Frame::collect(trials::scan(&dir, &files)?, &dir, TRIALS_DIR)?;
    if table.height() == 0 {
        return Err(AnalysisError::NoTrials { dir });
    }
    let trials_lf = table.lazy();
    let span_counts = trace::span_counts(run_dir)?;
    let mut trials = trials::trial_rows(&table, &span_counts)?;
    let variants = summary::variant_summaries(&trials_lf, &dir, &manifest, &trials, &span_counts)?;
    let variant_names: Vec<String> = variants.iter().map(|v| v.variant.clone()).collect();
    let matrix = summary::task_matrix(&trials_lf, &dir, &manifest.tasks, &variant_names)?;
    trials::sort_rows(&mut trials, &variant_names, &manifest.tasks);
    let failed_trials = trials
        .iter()
        .filter(|t| t.outcome != TrialOutcome::Passed.as_str())
        .cloned()
        .collect();
    Ok(RunAnalysis {
        manifest,
        variants,
        matrix,
        failed_trials,
        trials,
    })
}

/// Reads one trial's row, spans and messages.
pub fn load_trial_trace(run_dir: &Path, trial_id: &str) -> Result<TrialTrace, AnalysisError> {
    trace::check_trial_id(trial_id)?;
    let dir = run_dir.join(TRIALS_DIR);
    let not_found = || AnalysisError::TrialNotFound {
        dir: dir.clone(),
        trial_id: trial_id.to_string(),
    };
    // The trial's own file first; scan the whole table only if the writer
    // ever named files differently.
    let own_file = dir.join(format!("{trial_id}.parquet"));
    let files = if own_file.is_file() {
        vec![own_file]
    } else {
        frame::parquet_files(&dir)?
    };
    if files.is_empty() {
        return Err(not_found());
    }
    let lazy = trials::scan(&dir, &files)?;
    let mut trial = trials::find_trial(lazy, &dir, trial_id)?.ok_or_else(not_found)?;
    let spans = trace::read_spans(run_dir, trial_id)?;
    let counts = trace::SpanCounts::of(&spans);
    trial.denied_calls = counts.denied_calls;
    trial.injected_faults = counts.injected_faults();
    trial.rate_limit_wait_ms = counts.rate_limit_wait_ms;
    Ok(TrialTrace {
        trial,
        spans,
        messages: trace::read_messages(run_dir, trial_id)?,
    })
}

fn read_manifest(run_dir: &Path) -> Result<Manifest, AnalysisError> {
    Manifest::read(run_dir).map_err(|source| AnalysisError::Manifest {
        run_dir: run_dir.to_path_buf(),
        source,
    })
}
