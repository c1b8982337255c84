//! Trial rows: one per trial, as the report and `--json` show them.

use crate::AnalysisError;
use crate::counts::{self, Counts};
use crate::frame::{self, Frame};
use crate::trace::SpanCounts;
use polars::prelude::*;
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tack_trace::schema::{TRIALS_DIR, col};

/// One trial's totals, from the trials table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrialRow {
    pub trial_id: String,
    pub variant: String,
    pub task: String,
    pub trial_index: u32,
    /// 0 for the first attempt at this (variant, task, trial index); reruns
    /// count up. Listings show final attempts only (see the crate docs).
    pub trial_attempt: u32,
    pub model: String,
    /// Where it ran: `host`, `image` or `engine` (a `TrialEnvironment`);
    /// `None` in runs recorded before tack said.
    pub environment: Option<String>,
    /// A `TrialOutcome::as_str()` value.
    pub outcome: String,
    /// A `StopReason::as_str()` value.
    pub stop_reason: String,
    /// The trials table's counts (steps, tool calls, retries, …), by column.
    #[serde(flatten)]
    pub counts: Counts,
    /// The agent changed files the checks depend on (e.g. the visible tests).
    pub tampered: bool,
    /// Tool calls refused by a permission rule or the approver (tool-call
    /// spans with error kind `denied`).
    pub denied_calls: u32,
    /// Model calls with a fault injected on purpose by the `chaos(...)`
    /// wrapper (model-call spans with a `fault`).
    pub injected_faults: u32,
    /// Time the model calls waited for a shared provider rate limit.
    pub rate_limit_wait_ms: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// `None` when the model has no price.
    pub cost_usd: Option<f64>,
    /// `None` when the checks did not run.
    pub checks_passed: Option<bool>,
    /// When the trial started (Unix ms). Not in JSON listings, whose shape
    /// is settled; exports (OTLP) place the trial in time with it.
    #[serde(skip)]
    pub started_at_ms: i64,
    pub duration_ms: u64,
    pub error: Option<String>,
}

/// A scan of the trials table, with each row's file as
/// [`frame::FILE_PATH`] when `file_names`. Traces written before a count,
/// `tampered` or `trial_attempt` existed read as 0 and false there (every
/// trial of them was a first attempt).
pub(crate) fn scan(
    dir: &Path,
    files: &[PathBuf],
    file_names: bool,
) -> Result<LazyFrame, AnalysisError> {
    scan_as(dir, files, &frame::union_schema(files)?, file_names)
}

/// [`scan`] of files whose columns `schema` has (see [`frame::scan_as`]).
pub(crate) fn scan_as(
    dir: &Path,
    files: &[PathBuf],
    schema: &SchemaRef,
    file_names: bool,
) -> Result<LazyFrame, AnalysisError> {
    let file_paths = file_names.then_some(frame::FILE_PATH);
    let lazy = frame::scan_as(dir, TRIALS_DIR, files, schema, file_paths)?;
    let mut added = counts::added_columns();
    added.push((col::TAMPERED, DataType::Boolean, lit(false)));
    added.push((col::TRIAL_ATTEMPT, DataType::UInt32, lit(0u32)));
    added.push((col::ENVIRONMENT, DataType::String, lit(NULL)));
    frame::with_columns(lazy, &added, dir, TRIALS_DIR)
}

/// The trials columns every reader of trial figures needs: who ran what,
/// how it ended, and what it spent and counted; not the transcripts'
/// message lists, which are most of the table's bytes.
pub(crate) fn figure_columns() -> Vec<Expr> {
    let mut columns: Vec<Expr> = [
        col::TRIAL_ID,
        col::VARIANT,
        col::TASK,
        col::TRIAL_INDEX,
        col::MODEL,
        col::OUTCOME,
        col::STOP_REASON,
        col::TAMPERED,
        col::INPUT_TOKENS,
        col::OUTPUT_TOKENS,
        col::TOTAL_TOKENS,
        col::COST_USD,
    ]
    .into_iter()
    .map(col)
    .collect();
    columns.extend(counts::columns());
    columns
}

/// The trials columns a [`TrialRow`] is made of.
pub(crate) fn row_columns() -> Vec<Expr> {
    let mut columns = figure_columns();
    columns.extend(
        [
            col::TRIAL_ATTEMPT,
            col::ENVIRONMENT,
            col::CHECKS_PASSED,
            col::STARTED_AT_MS,
            col::DURATION_MS,
            col::ERROR,
        ]
        .map(col),
    );
    columns
}

/// Every row of a collected trials frame, in frame order, with what the
/// spans say per trial id (absent: nothing to count).
pub(crate) fn trial_rows(
    frame: &Frame,
    spans: &HashMap<String, SpanCounts>,
) -> Result<Vec<TrialRow>, AnalysisError> {
    let none = SpanCounts::default();
    let trial_id = frame.strs(col::TRIAL_ID)?;
    let variant = frame.strs(col::VARIANT)?;
    let task = frame.strs(col::TASK)?;
    let trial_index = frame.u32s(col::TRIAL_INDEX)?;
    let trial_attempt = frame.u32s(col::TRIAL_ATTEMPT)?;
    let model = frame.strs(col::MODEL)?;
    let environment = frame.opt_strs(col::ENVIRONMENT)?;
    let outcome = frame.strs(col::OUTCOME)?;
    let stop_reason = frame.strs(col::STOP_REASON)?;
    let mut row_counts = counts::per_row(frame)?.into_iter();
    let tampered = frame.bools(col::TAMPERED)?;
    let input_tokens = frame.u64s(col::INPUT_TOKENS)?;
    let output_tokens = frame.u64s(col::OUTPUT_TOKENS)?;
    let total_tokens = frame.u64s(col::TOTAL_TOKENS)?;
    let cost_usd = frame.opt_f64s(col::COST_USD)?;
    let checks_passed = frame.opt_bools(col::CHECKS_PASSED)?;
    let started_at_ms = frame.i64s(col::STARTED_AT_MS)?;
    let duration_ms = frame.u64s(col::DURATION_MS)?;
    let error = frame.opt_strs(col::ERROR)?;
    Ok((0..frame.height())
        .map(|i| {
            let counts = spans.get(&trial_id[i]).unwrap_or(&none);
            TrialRow {
                trial_id: trial_id[i].clone(),
                variant: variant[i].clone(),
                task: task[i].clone(),
                trial_index: trial_index[i],
                trial_attempt: trial_attempt[i],
                model: model[i].clone(),
                environment: environment[i].clone(),
                outcome: outcome[i].clone(),
                stop_reason: stop_reason[i].clone(),
                counts: row_counts.next().unwrap_or_default(),
                tampered: tampered[i],
                denied_calls: counts.denied_calls,
                injected_faults: counts.injected_faults(),
                rate_limit_wait_ms: counts.rate_limit_wait_ms,
                input_tokens: input_tokens[i],
                output_tokens: output_tokens[i],
                total_tokens: total_tokens[i],
                cost_usd: cost_usd[i],
                checks_passed: checks_passed[i],
                started_at_ms: started_at_ms[i],
                duration_ms: duration_ms[i],
                error: error[i].clone(),
            }
        })
        .collect())
}

/// Sorts rows by the manifest's variant and task order, then trial index, so
/// every listing of a run reads the same way. Names the manifest does not know
/// (should not happen) sort last, by name.
pub(crate) fn sort_rows(rows: &mut [TrialRow], variants: &[String], tasks: &[String]) {
    let position = |list: &[String], name: &str| list.iter().position(|n| n == name);
    rows.sort_by(|a, b| {
        let key = |r: &TrialRow| {
            (
                position(variants, &r.variant).unwrap_or(usize::MAX),
                r.variant.clone(),
                position(tasks, &r.task).unwrap_or(usize::MAX),
                r.task.clone(),
                r.trial_index,
                r.trial_attempt,
                r.trial_id.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
}
