//! Per-variant and per-task aggregates, computed with Polars lazy group-bys.

use crate::AnalysisError;
use crate::attempts::{IS_FINAL, IS_SCORED, is_final_cancelled, is_final_infra_error};
use crate::counts::{self, VariantCounts};
use crate::frame::{Frame, usd_of_picodollars};
use crate::rollup::{COST_KNOWN, PICO, RERUN, count_where, weight};
use crate::stats::wilson_interval;
use polars::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use tack_protocol::TrialOutcome;
use tack_trace::schema::{TRIALS_DIR, col};
use tack_trace::{Manifest, VariantInfo};

/// Names of the aggregate columns this module creates (not trace columns).
mod agg {
    pub const TRIALS: &str = "trials";
    pub const PASSED: &str = "passed";
    pub const COUNT: &str = "count";
    pub const MEAN_TOKENS_SUCCESSFUL: &str = "mean_tokens_successful";
    pub const COST_NULLS: &str = "cost_nulls";
    pub const TAMPERED_TRIALS: &str = "tampered_trials";
    pub const INFRA_ERRORS: &str = "infra_errors";
    pub const CANCELLED: &str = "cancelled";
    pub const RETRIED: &str = "retried_attempts";
    pub const RERUN_TRIALS: &str = "rerun_trials";
    pub const RERUN_PASSED: &str = "rerun_passed";
}

/// One variant's results over its scored trials: the final attempt of each
/// planned trial, final infra errors left out (see the crate docs). Outcome
/// and stop-reason counts cover every final attempt, infra errors included.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct VariantSummary {
    pub variant: String,
    pub model: String,
    /// The model is built in (oracle, sim): these are not LLM results.
    pub simulated: bool,
    /// Scored trials: the denominator of the success rate.
    pub trials: u64,
    pub passed: u64,
    /// `passed / trials`; 0 when there are no trials.
    pub success_rate: f64,
    /// Planned trials whose final attempt ended in `infra_error`: not
    /// scored, not in `trials`.
    pub infra_errors: u64,
    /// Planned trials whose final attempt was cut off (`cancelled`: the
    /// run was interrupted and not resumed): not scored, not in `trials`.
    pub cancelled: u64,
    /// Attempts that were run again (after an infra error, or cut off by a
    /// crash): in the traces, counted nowhere else.
    pub retried_attempts: u64,
    /// Scored trials whose result is from a later attempt than their first
    /// (`--infra-retries`, a resume, `--rerun`).
    pub rerun_trials: u64,
    /// The success rate over the other scored trials, those decided at
    /// their first attempt; `None` when no trial was run again (or every
    /// one was).
    pub success_rate_without_reruns: Option<f64>,
    /// Wilson 95% interval of the success rate.
    pub ci_low: f64,
    pub ci_high: f64,
    pub total_tokens: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// All tokens the variant spent, failed trials included, per passed
    /// trial; `None` with no successes.
    pub tokens_per_success: Option<f64>,
    /// Mean total tokens of the passed trials; `None` with no successes.
    pub mean_tokens_successful: Option<f64>,
    /// `None` if any trial has no cost (an unpriced model), so a partial sum
    /// is never shown as the total.
    pub cost_usd: Option<f64>,
    /// The trials table's counts over the scored trials: each a sum and a
    /// mean per trial (`--json`: `mean_steps`, `retries`, …).
    #[serde(flatten)]
    pub counts: VariantCounts,
    /// Trials in which the agent changed files the checks depend on.
    pub tampered: u64,
    /// Tool calls refused by a permission rule or the approver.
    pub denied_calls: u64,
    /// Model calls with a fault injected on purpose by the `chaos(...)`
    /// wrapper; deliberate, to show how the harness copes.
    pub injected_faults: u64,
    /// `injected_faults` per fault kind (`transport_error`,
    /// `malformed_json`, `unknown_tool`, `wrong_types`, `truncated`).
    pub faults_by_kind: BTreeMap<String, u64>,
    /// Time the model calls waited for a shared provider rate limit.
    pub rate_limit_wait_ms: u64,
    /// Trials per `TrialOutcome::as_str()`.
    pub outcomes: BTreeMap<String, u64>,
    /// Trials per `StopReason::as_str()`.
    pub stop_reasons: BTreeMap<String, u64>,
}

/// One task's results, a cell per variant.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatrixRow {
    pub task: String,
    pub cells: Vec<MatrixCell>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MatrixCell {
    pub variant: String,
    /// Scored trials.
    pub trials: u64,
    pub passed: u64,
    /// Final infra errors, not in `trials`.
    pub infra_errors: u64,
    /// Final attempts cut off, not in `trials`.
    pub cancelled: u64,
}

fn passed_expr() -> Expr {
    col(col::OUTCOME).eq(lit(TrialOutcome::Passed.as_str()))
}

/// Sum of a summed cube column.
fn sum_of(name: &str) -> Expr {
    col(name).sum().alias(name)
}

/// The numeric totals per variant, keyed by variant name.
struct Totals {
    trials: u64,
    passed: u64,
    total_tokens: u64,
    input_tokens: u64,
    output_tokens: u64,
    mean_tokens_successful: Option<f64>,
    cost_usd: Option<f64>,
    counts: VariantCounts,
    tampered: u64,
    /// Scored trials whose final attempt is not their first, and how many
    /// of those passed.
    rerun: (u64, u64),
}

fn variant_totals(trials: LazyFrame, dir: &Path) -> Result<HashMap<String, Totals>, AnalysisError> {
    let passed = count_where(passed_expr());
    let mut aggregates = vec![
        weight().alias(agg::TRIALS),
        passed.clone().alias(agg::PASSED),
        sum_of(col::TOTAL_TOKENS),
        sum_of(col::INPUT_TOKENS),
        sum_of(col::OUTPUT_TOKENS),
        when(passed.clone().gt(lit(0u64)))
            .then(
                col(col::TOTAL_TOKENS)
                    .filter(passed_expr())
                    .sum()
                    .cast(DataType::Float64)
                    / passed.cast(DataType::Float64),
            )
            .otherwise(lit(NULL).cast(DataType::Float64))
            .alias(agg::MEAN_TOKENS_SUCCESSFUL),
        col(PICO).sum().alias(col::COST_USD),
        count_where(col(COST_KNOWN).not()).alias(agg::COST_NULLS),
        col(col::TAMPERED).sum().alias(agg::TAMPERED_TRIALS),
        count_where(col(RERUN)).alias(agg::RERUN_TRIALS),
        count_where(col(RERUN).and(passed_expr())).alias(agg::RERUN_PASSED),
    ];
    aggregates.extend(counts::sums());
    let lazy = trials
        .filter(col(IS_SCORED))
        .group_by([col(col::VARIANT)])
        .agg(aggregates);
    let frame = Frame::collect(lazy, dir, TRIALS_DIR)?;
    let variant = frame.strs(col::VARIANT)?;
    let trials = frame.u64s(agg::TRIALS)?;
    let passed = frame.u64s(agg::PASSED)?;
    let total_tokens = frame.u64s(col::TOTAL_TOKENS)?;
    let input_tokens = frame.u64s(col::INPUT_TOKENS)?;
    let output_tokens = frame.u64s(col::OUTPUT_TOKENS)?;
    let mean_tokens = frame.opt_f64s(agg::MEAN_TOKENS_SUCCESSFUL)?;
    let cost = frame.i64s(col::COST_USD)?;
    let cost_nulls = frame.u64s(agg::COST_NULLS)?;
    let tampered = frame.u64s(agg::TAMPERED_TRIALS)?;
    let rerun_trials = frame.u64s(agg::RERUN_TRIALS)?;
    let rerun_passed = frame.u64s(agg::RERUN_PASSED)?;
    let mut counts = counts::per_group(&frame, &trials)?.into_iter();
    Ok((0..frame.height())
        .map(|i| {
            let totals = Totals {
                trials: trials[i],
                passed: passed[i],
                total_tokens: total_tokens[i],
                input_tokens: input_tokens[i],
                output_tokens: output_tokens[i],
                mean_tokens_successful: mean_tokens[i],
                cost_usd: (cost_nulls[i] == 0).then(|| usd_of_picodollars(cost[i])),
                counts: counts.next().unwrap_or_else(VariantCounts::zero),
                tampered: tampered[i],
                rerun: (rerun_trials[i], rerun_passed[i]),
            };
            (variant[i].clone(), totals)
        })
        .collect())
}

/// Final attempts per (variant, value of `column`), e.g. outcomes per
/// variant.
fn counts_by(
    trials: LazyFrame,
    dir: &Path,
    column: &str,
) -> Result<HashMap<String, BTreeMap<String, u64>>, AnalysisError> {
    let lazy = trials
        .filter(col(IS_FINAL))
        .group_by([col(col::VARIANT), col(column)])
        .agg([weight().alias(agg::COUNT)]);
    let frame = Frame::collect(lazy, dir, TRIALS_DIR)?;
    let variants = frame.strs(col::VARIANT)?;
    let values = frame.strs(column)?;
    let counts = frame.u64s(agg::COUNT)?;
    let mut out: HashMap<String, BTreeMap<String, u64>> = HashMap::new();
    for ((variant, value), count) in variants.into_iter().zip(values).zip(counts) {
        out.entry(variant).or_default().insert(value, count);
    }
    Ok(out)
}

/// What of a variant's attempts is not scored: final infra errors, final
/// attempts cut off, and attempts that were run again.
#[derive(Debug, Clone, Copy, Default)]
struct Unscored {
    infra_errors: u64,
    cancelled: u64,
    retried_attempts: u64,
}

/// [`Unscored`] per variant.
fn attempt_counts(
    trials: LazyFrame,
    dir: &Path,
) -> Result<HashMap<String, Unscored>, AnalysisError> {
    let lazy = trials.group_by([col(col::VARIANT)]).agg([
        count_where(is_final_infra_error()).alias(agg::INFRA_ERRORS),
        count_where(is_final_cancelled()).alias(agg::CANCELLED),
        count_where(col(IS_FINAL).not()).alias(agg::RETRIED),
    ]);
    let frame = Frame::collect(lazy, dir, TRIALS_DIR)?;
    let variants = frame.strs(col::VARIANT)?;
    let infra = frame.u64s(agg::INFRA_ERRORS)?;
    let cancelled = frame.u64s(agg::CANCELLED)?;
    let retried = frame.u64s(agg::RETRIED)?;
    Ok(variants
        .into_iter()
        .enumerate()
        .map(|(i, variant)| {
            let unscored = Unscored {
                infra_errors: infra[i],
                cancelled: cancelled[i],
                retried_attempts: retried[i],
            };
            (variant, unscored)
        })
        .collect())
}

/// One summary per variant, in manifest order; variants that appear only in
/// the trials (not expected) follow, by name. A variant with no finished
/// trials gets zeros rather than disappearing. `trials` is the run's cube
/// ([`crate::rollup::Rollup::cube`]); `from_spans` has each variant's
/// counts from the spans table, over its scored trials.
pub(crate) fn variant_summaries(
    trials: &LazyFrame,
    dir: &Path,
    manifest: &Manifest,
    mut from_spans: HashMap<String, SpanTotals>,
) -> Result<Vec<VariantSummary>, AnalysisError> {
    let mut totals = variant_totals(trials.clone(), dir)?;
    let mut outcomes = counts_by(trials.clone(), dir, col::OUTCOME)?;
    let mut stops = counts_by(trials.clone(), dir, col::STOP_REASON)?;
    let mut attempts = attempt_counts(trials.clone(), dir)?;
    let mut extra: Vec<String> = attempts
        .keys()
        .filter(|name| !manifest.variants.iter().any(|v| &v.name == *name))
        .cloned()
        .collect();
    extra.sort();
    let infos = manifest
        .variants
        .iter()
        .cloned()
        .chain(extra.into_iter().map(|name| VariantInfo {
            name,
            model: String::new(),
            simulated: false,
            description: String::new(),
            config: Default::default(),
        }));
    Ok(infos
        .map(|info| {
            let t = totals.remove(&info.name);
            let outcomes = outcomes.remove(&info.name).unwrap_or_default();
            let stop_reasons = stops.remove(&info.name).unwrap_or_default();
            let spans = from_spans.remove(info.name.as_str()).unwrap_or_default();
            let attempts = attempts.remove(&info.name).unwrap_or_default();
            summarize(info, t, spans, attempts, outcomes, stop_reasons)
        })
        .collect())
}

/// A variant's counts from the spans table, summed over its scored trials.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SpanTotals {
    pub denied_calls: u64,
    pub injected_faults: u64,
    pub faults_by_kind: BTreeMap<String, u64>,
    pub rate_limit_wait_ms: u64,
}

fn summarize(
    info: VariantInfo,
    totals: Option<Totals>,
    spans: SpanTotals,
    unscored: Unscored,
    outcomes: BTreeMap<String, u64>,
    stop_reasons: BTreeMap<String, u64>,
) -> VariantSummary {
    let t = totals.unwrap_or(Totals {
        trials: 0,
        passed: 0,
        total_tokens: 0,
        input_tokens: 0,
        output_tokens: 0,
        mean_tokens_successful: None,
        cost_usd: None,
        counts: VariantCounts::zero(),
        tampered: 0,
        rerun: (0, 0),
    });
    let (ci_low, ci_high) = wilson_interval(t.passed, t.trials);
    VariantSummary {
        variant: info.name,
        model: info.model,
        simulated: info.simulated,
        trials: t.trials,
        passed: t.passed,
        success_rate: if t.trials == 0 {
            0.0
        } else {
            t.passed as f64 / t.trials as f64
        },
        infra_errors: unscored.infra_errors,
        cancelled: unscored.cancelled,
        retried_attempts: unscored.retried_attempts,
        rerun_trials: t.rerun.0,
        success_rate_without_reruns: (t.rerun.0 > 0 && t.trials > t.rerun.0)
            .then(|| (t.passed - t.rerun.1) as f64 / (t.trials - t.rerun.0) as f64),
        ci_low,
        ci_high,
        total_tokens: t.total_tokens,
        input_tokens: t.input_tokens,
        output_tokens: t.output_tokens,
        tokens_per_success: (t.passed > 0).then(|| t.total_tokens as f64 / t.passed as f64),
        mean_tokens_successful: t.mean_tokens_successful,
        cost_usd: t.cost_usd,
        counts: t.counts,
        tampered: t.tampered,
        denied_calls: spans.denied_calls,
        injected_faults: spans.injected_faults,
        faults_by_kind: spans.faults_by_kind,
        rate_limit_wait_ms: spans.rate_limit_wait_ms,
        outcomes,
        stop_reasons,
    }
}

/// The task × variant matrix: rows in manifest task order (then unknown tasks
/// by name), cells in the order of `variants`.
pub(crate) fn task_matrix(
    trials: &LazyFrame,
    dir: &Path,
    tasks: &[String],
    variants: &[String],
) -> Result<Vec<MatrixRow>, AnalysisError> {
    let lazy = trials
        .clone()
        .filter(col(IS_FINAL))
        .group_by([col(col::TASK), col(col::VARIANT)])
        .agg([
            count_where(col(IS_SCORED)).alias(agg::TRIALS),
            count_where(passed_expr()).alias(agg::PASSED),
            count_where(is_final_infra_error()).alias(agg::INFRA_ERRORS),
            count_where(is_final_cancelled()).alias(agg::CANCELLED),
        ]);
    let frame = Frame::collect(lazy, dir, TRIALS_DIR)?;
    let task_col = frame.strs(col::TASK)?;
    let variant_col = frame.strs(col::VARIANT)?;
    let trial_counts = frame.u64s(agg::TRIALS)?;
    let passed_counts = frame.u64s(agg::PASSED)?;
    let infra_counts = frame.u64s(agg::INFRA_ERRORS)?;
    let cancelled_counts = frame.u64s(agg::CANCELLED)?;
    let mut cells: HashMap<(String, String), MatrixCell> = HashMap::new();
    for i in 0..frame.height() {
        let cell = MatrixCell {
            variant: variant_col[i].clone(),
            trials: trial_counts[i],
            passed: passed_counts[i],
            infra_errors: infra_counts[i],
            cancelled: cancelled_counts[i],
        };
        cells.insert((task_col[i].clone(), variant_col[i].clone()), cell);
    }
    let mut extra: Vec<String> = task_col
        .into_iter()
        .filter(|t| !tasks.contains(t))
        .collect();
    extra.sort();
    extra.dedup();
    Ok(tasks
        .iter()
        .cloned()
        .chain(extra)
        .map(|task| MatrixRow {
            cells: variants
                .iter()
                .map(|variant| {
                    cells
                        .remove(&(task.clone(), variant.clone()))
                        .unwrap_or_else(|| MatrixCell {
                            variant: variant.clone(),
                            trials: 0,
                            passed: 0,
                            infra_errors: 0,
                            cancelled: 0,
                        })
                })
                .collect(),
            task,
        })
        .collect())
}
