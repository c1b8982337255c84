//! Which rows of the trials table count.
//!
//! A planned trial — one (variant, task, trial index) — can have been run
//! more than once: again after an `infra_error` (`tack run --infra-retries`),
//! or again after a crash cut it off (the cut-off attempt is kept as
//! `cancelled`, and `tack run --resume` runs the next). Every attempt stays
//! in the traces under its own trial id (`trial_attempt` 0, 1, …); runs
//! written before attempts existed have none of that column and read as
//! attempt 0. Every aggregate counts only the **final** attempt of each
//! planned trial, the one with the highest `trial_attempt`.
//!
//! A final attempt that ended in `infra_error` measured nothing about the
//! agent: its sandbox could not be prepared, or the provider stayed down
//! through every retry. Such trials are not **scored**: they are left out of
//! success rates and their intervals, token and cost efficiency, the task
//! matrix and comparisons, and are counted apart, per variant, beside the
//! attempts that were retried. This is what Inspect does with samples that
//! end in an error (no score, so not in the metrics' denominator, reported as
//! errors); counting them as failures would charge the agent for the
//! infrastructure, and a run with many should be rerun, not read.

use polars::prelude::*;
use tack_protocol::TrialOutcome;
use tack_trace::schema::col;

/// A column added to the trials table: the row is its planned trial's final
/// attempt.
pub(crate) const IS_FINAL: &str = "is_final_attempt";
/// A column added to the trials table: the row is final and not an infra
/// error, so it counts in success rates.
pub(crate) const IS_SCORED: &str = "is_scored";

/// `trials` with [`IS_FINAL`] and [`IS_SCORED`]; it must have
/// `trial_attempt` (see `trials::scan`), `variant`, `task`, `trial_index`
/// and `outcome`.
pub(crate) fn mark(trials: LazyFrame) -> PolarsResult<LazyFrame> {
    let last = col(col::TRIAL_ATTEMPT).max().over([
        col(col::VARIANT),
        col(col::TASK),
        col(col::TRIAL_INDEX),
    ])?;
    let is_final = col(col::TRIAL_ATTEMPT).eq(last);
    let not_infra = col(col::OUTCOME).neq(lit(TrialOutcome::InfraError.as_str()));
    Ok(trials.with_columns([
        is_final.clone().alias(IS_FINAL),
        is_final.and(not_infra).alias(IS_SCORED),
    ]))
}

/// A final attempt that ended in `infra_error`.
pub(crate) fn is_final_infra_error() -> Expr {
    col(IS_FINAL).and(col(IS_SCORED).not())
}
