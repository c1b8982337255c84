//! Analysis of a run's traces (`traces/<run-id>/`): per-variant success rates
//! with confidence intervals, token efficiency, outcome breakdowns, the task ×
//! variant matrix, and single-trial traces. Aggregation is done with Polars
//! lazy queries over the run's Parquet parts, reading only the columns each
//! needs; results come out as plain serialisable structs so the CLI
//! (`--json`) and the report need no Polars.
//!
//! It must not depend on `tack-agent`, `tack-harness` or `tack-runner`: it
//! reads traces, whoever wrote them.
//!
//! Only the final attempt of each planned trial counts, and a final
//! `infra_error` is counted apart rather than scored: see [`attempts`] for
//! what that means and why.

mod attempts;
mod batch;
pub mod browse;
pub mod compare;
pub mod cost;
mod counts;
mod error;
mod failed;
mod frame;
pub mod history;
mod load;
pub mod query;
mod rollup;
mod span_sums;
pub mod stats;
mod summary;
mod tables;
mod trace;
mod trials;

pub use counts::{Counts, VariantCount, VariantCounts};
pub use error::AnalysisError;
pub use load::{
    TRACE_BATCH, load_trial_trace, load_trial_traces, load_trials, trial_traces_in_batches,
};
pub use stats::wilson_interval;
pub use summary::{MatrixCell, MatrixRow, VariantSummary};
pub use tables::RunTables;
pub use tack_trace::Manifest;
pub use trace::{MessageRow, SpanRow, TrialTrace};
pub use trials::TrialRow;

use serde::Serialize;
use std::collections::HashSet;
use std::path::Path;

/// Everything the report shows about a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunAnalysis {
    pub manifest: Manifest,
    /// One per variant, in manifest order.
    pub variants: Vec<VariantSummary>,
    /// One row per task (manifest order), one cell per variant.
    pub matrix: Vec<MatrixRow>,
    /// Final attempts that did not pass (infra errors included), by
    /// variant, task and trial index (manifest order): every one, or those
    /// [`AnalyzeOptions::failed`] picked.
    pub failed_trials: Vec<TrialRow>,
    /// Final attempts that did not pass, listed in `failed_trials` or not.
    pub failed_total: u64,
    /// Every final attempt, by variant, task and trial index (manifest
    /// order); empty unless [`AnalyzeOptions::every_trial`].
    pub trials: Vec<TrialRow>,
}

impl RunAnalysis {
    /// Planned trials that ran to a final attempt, scored or not.
    pub fn final_trials(&self) -> u64 {
        self.variants
            .iter()
            .map(|v| v.trials + v.infra_errors + v.cancelled)
            .sum()
    }

    /// Attempts that were run again, over every variant.
    pub fn retried_attempts(&self) -> u64 {
        self.variants.iter().map(|v| v.retried_attempts).sum()
    }
}

/// Which failed trials an analysis lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FailedLimit {
    /// At most this many per variant and task: the first by trial index.
    pub per_task: usize,
    /// At most this many in all, a rank at a time: every variant and
    /// task's first failure before any one's second, the variants taking
    /// turns within a rank.
    pub total: usize,
}

/// What an analysis lists besides the aggregates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnalyzeOptions {
    /// List every final attempt in [`RunAnalysis::trials`] (comparisons and
    /// `--json` need them; a report of a million trials does not).
    pub every_trial: bool,
    /// `None`: list every failed trial.
    pub failed: Option<FailedLimit>,
}

impl AnalyzeOptions {
    /// Every trial and every failure.
    pub fn everything() -> AnalyzeOptions {
        AnalyzeOptions {
            every_trial: true,
            failed: None,
        }
    }
}

/// Reads `run_dir/manifest.json` and the trials table and aggregates them,
/// listing every trial.
pub fn analyze_run(run_dir: &Path) -> Result<RunAnalysis, AnalysisError> {
    analyze(&RunTables::open(run_dir)?, AnalyzeOptions::everything())
}

/// Each variant's summary from the trials table alone — success rate,
/// tokens, cost: what a list of runs shows, without reading the spans. The
/// counts only spans hold (denied calls, injected faults, rate-limit waits)
/// are left at 0; [`analyze`] has them.
pub fn summarize_trials(tables: &RunTables) -> Result<Vec<VariantSummary>, AnalysisError> {
    let rollup = tables.rollup(rollup::RollupNeeds::trials_only())?;
    summary::variant_summaries(
        &rollup.cube(),
        tables.trials_dir(),
        tables.manifest(),
        std::collections::HashMap::new(),
    )
}

/// Aggregates an opened run.
pub fn analyze(tables: &RunTables, options: AnalyzeOptions) -> Result<RunAnalysis, AnalysisError> {
    let (mut analysis, needs_counts) = analyze_listing(tables, options, false)?;
    if needs_counts {
        load::add_span_counts(tables, &mut analysis.failed_trials)?;
    }
    Ok(analysis)
}

/// [`analyze`] for a report that gives each failed trial it lists a page:
/// the listed rows' span counts (denied calls, injected faults, rate-limit
/// waits) are left for [`trial_traces_in_batches`], which reads their spans
/// anyway, to fill in.
pub fn analyze_for_pages(
    tables: &RunTables,
    options: AnalyzeOptions,
) -> Result<RunAnalysis, AnalysisError> {
    Ok(analyze_listing(tables, options, true)?.0)
}

/// The analysis, its failed rows not yet counted from the spans; and whether
/// they still need counting (they are listed, and not from every trial's
/// counted rows).
fn analyze_listing(
    tables: &RunTables,
    options: AnalyzeOptions,
    with_traces: bool,
) -> Result<(RunAnalysis, bool), AnalysisError> {
    let manifest = tables.manifest().clone();
    let dir = tables.trials_dir();
    let rollup = tables.rollup(rollup::RollupNeeds {
        spans: true,
        failed: match options.failed {
            None => rollup::FailedRows::All,
            Some(limit) => rollup::FailedRows::FirstPerTask(limit.per_task),
        },
    })?;
    if !rollup.has_trials() {
        return Err(AnalysisError::NoTrials {
            dir: dir.to_path_buf(),
        });
    }
    let cube = rollup.cube();
    let span_totals = rollup.span_sums().totals_by_variant();
    let variants = summary::variant_summaries(&cube, dir, &manifest, span_totals)?;
    let variant_names: Vec<String> = variants.iter().map(|v| v.variant.clone()).collect();
    let matrix = summary::task_matrix(&cube, dir, &manifest.tasks, &variant_names)?;
    let failed = failed::select(
        rollup.failed(),
        rollup.failed_total()?,
        dir,
        options.failed,
        &variant_names,
        &manifest.tasks,
    )?;
    let (mut trials, mut failed_trials, needs_counts) = if options.every_trial {
        let all = load::final_trial_rows(tables)?;
        let listed: HashSet<&str> = failed.ids.iter().map(String::as_str).collect();
        let failed_rows = all
            .iter()
            .filter(|t| listed.contains(t.trial_id.as_str()))
            .cloned()
            .collect();
        (all, failed_rows, false)
    } else {
        // Counted by the caller: from the traces, or from their spans.
        let rows = load::trial_rows_of(tables, &failed.ids)?;
        (Vec::new(), rows, !with_traces)
    };
    trials::sort_rows(&mut trials, &variant_names, &manifest.tasks);
    trials::sort_rows(&mut failed_trials, &variant_names, &manifest.tasks);
    let analysis = RunAnalysis {
        manifest,
        variants,
        matrix,
        failed_trials,
        failed_total: failed.total,
        trials,
    };
    Ok((analysis, needs_counts))
}

fn read_manifest(run_dir: &Path) -> Result<Manifest, AnalysisError> {
    Manifest::read(run_dir).map_err(|source| AnalysisError::Manifest {
        run_dir: run_dir.to_path_buf(),
        source,
    })
}
