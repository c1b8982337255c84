//! Trial rows: one per trial, as the report and `--json` show them.

use crate::AnalysisError;
use crate::frame::Frame;
use polars::prelude::*;
use serde::Serialize;
use std::path::Path;
use tack_trace::schema::col;

/// One trial's totals, from the trials table.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrialRow {
    pub trial_id: String,
    pub variant: String,
    pub task: String,
    pub trial_index: u32,
    pub model: String,
    /// A `TrialOutcome::as_str()` value.
    pub outcome: String,
    /// A `StopReason::as_str()` value.
    pub stop_reason: String,
    pub steps: u32,
    pub tool_calls: u32,
    pub tool_errors: u32,
    pub retries: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    /// `None` when the model has no price.
    pub cost_usd: Option<f64>,
    /// `None` when the checks did not run.
    pub checks_passed: Option<bool>,
    pub duration_ms: u64,
    pub error: Option<String>,
}

/// Every row of a collected trials frame, in frame order.
pub(crate) fn trial_rows(frame: &Frame) -> Result<Vec<TrialRow>, AnalysisError> {
    let trial_id = frame.strs(col::TRIAL_ID)?;
    let variant = frame.strs(col::VARIANT)?;
    let task = frame.strs(col::TASK)?;
    let trial_index = frame.u32s(col::TRIAL_INDEX)?;
    let model = frame.strs(col::MODEL)?;
    let outcome = frame.strs(col::OUTCOME)?;
    let stop_reason = frame.strs(col::STOP_REASON)?;
    let steps = frame.u32s(col::STEPS)?;
    let tool_calls = frame.u32s(col::TOOL_CALLS)?;
    let tool_errors = frame.u32s(col::TOOL_ERRORS)?;
    let retries = frame.u32s(col::RETRIES)?;
    let input_tokens = frame.u64s(col::INPUT_TOKENS)?;
    let output_tokens = frame.u64s(col::OUTPUT_TOKENS)?;
    let total_tokens = frame.u64s(col::TOTAL_TOKENS)?;
    let cost_usd = frame.opt_f64s(col::COST_USD)?;
    let checks_passed = frame.opt_bools(col::CHECKS_PASSED)?;
    let duration_ms = frame.u64s(col::DURATION_MS)?;
    let error = frame.opt_strs(col::ERROR)?;
    Ok((0..frame.height())
        .map(|i| TrialRow {
            trial_id: trial_id[i].clone(),
            variant: variant[i].clone(),
            task: task[i].clone(),
            trial_index: trial_index[i],
            model: model[i].clone(),
            outcome: outcome[i].clone(),
            stop_reason: stop_reason[i].clone(),
            steps: steps[i],
            tool_calls: tool_calls[i],
            tool_errors: tool_errors[i],
            retries: retries[i],
            input_tokens: input_tokens[i],
            output_tokens: output_tokens[i],
            total_tokens: total_tokens[i],
            cost_usd: cost_usd[i],
            checks_passed: checks_passed[i],
            duration_ms: duration_ms[i],
            error: error[i].clone(),
        })
        .collect())
}

/// Trial rows of one trial (normally exactly one) from the trials table.
pub(crate) fn find_trial(
    trials: LazyFrame,
    dir: &Path,
    trial_id: &str,
) -> Result<Option<TrialRow>, AnalysisError> {
    let lazy = trials.filter(col(col::TRIAL_ID).eq(lit(trial_id)));
    let frame = Frame::collect(lazy, dir, tack_trace::schema::TRIALS_DIR)?;
    Ok(trial_rows(&frame)?.into_iter().next())
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
                r.trial_id.clone(),
            )
        };
        key(a).cmp(&key(b))
    });
}
