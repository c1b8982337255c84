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
//!
//! Nor is a final attempt that was cut off (`cancelled`: the run was
//! interrupted and not resumed): it measured nothing either, and is
//! counted apart beside the infra errors.

use polars::prelude::*;
use tack_protocol::TrialOutcome;
use tack_trace::schema::col;

/// A column added to the trials table: the row is its planned trial's final
/// attempt.
pub(crate) const IS_FINAL: &str = "is_final_attempt";
/// A column added to the trials table: the row is final and neither an
/// infra error nor cut off, so it counts in success rates.
pub(crate) const IS_SCORED: &str = "is_scored";

/// A column of [`reruns`]: the planned trial's last attempt.
const LAST_ATTEMPT: &str = "last_attempt";

/// The planned trials that were run more than once, each with its last
/// attempt: all [`mark`] needs to know about the rest of the run to mark a
/// row. A row per planned trial run again (a few in a run), not one per
/// attempt, so the run can be marked a part at a time in bounded memory.
/// `trials` must have `variant`, `task`, `trial_index` and `trial_attempt`.
pub(crate) fn reruns(trials: LazyFrame) -> LazyFrame {
    trials
        .filter(col(col::TRIAL_ATTEMPT).gt(lit(0u32)))
        .group_by(planned_trial())
        .agg([col(col::TRIAL_ATTEMPT).max().alias(LAST_ATTEMPT)])
}

/// The columns naming a planned trial. Not its run: the rows of a merged
/// run keep their shard's run id, and a merged run can be resumed.
fn planned_trial() -> [Expr; 3] {
    [col(col::VARIANT), col(col::TASK), col(col::TRIAL_INDEX)]
}

/// `trials` (any rows of the run: all, or one part's) with [`IS_FINAL`] and
/// [`IS_SCORED`], in the same order; `reruns` is the whole run's
/// [`reruns`]. `trials` must have `trial_attempt` (see `trials::scan`),
/// `variant`, `task`, `trial_index` and `outcome`.
pub(crate) fn mark(trials: LazyFrame, reruns: LazyFrame) -> LazyFrame {
    // A planned trial never run again has one attempt, which is final.
    let last = col(LAST_ATTEMPT).fill_null(col(col::TRIAL_ATTEMPT));
    let is_final = col(col::TRIAL_ATTEMPT).eq(last);
    let scored_outcome = col(col::OUTCOME)
        .neq(lit(TrialOutcome::InfraError.as_str()))
        .and(col(col::OUTCOME).neq(lit(TrialOutcome::Cancelled.as_str())));
    let mut args = JoinArgs::new(JoinType::Left);
    args.maintain_order = MaintainOrderJoin::Left;
    trials
        .join(reruns, planned_trial(), planned_trial(), args)
        .with_columns([
            is_final.clone().alias(IS_FINAL),
            is_final.and(scored_outcome).alias(IS_SCORED),
        ])
        .drop(cols([LAST_ATTEMPT]))
}

/// A final attempt that ended in `infra_error`.
pub(crate) fn is_final_infra_error() -> Expr {
    is_final_outcome(TrialOutcome::InfraError)
}

/// A final attempt that was cut off (`cancelled`).
pub(crate) fn is_final_cancelled() -> Expr {
    is_final_outcome(TrialOutcome::Cancelled)
}

fn is_final_outcome(outcome: TrialOutcome) -> Expr {
    col(IS_FINAL).and(col(col::OUTCOME).eq(lit(outcome.as_str())))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A merged run's rows keep their shard's run id; an attempt written
    /// when the merged run is resumed carries the merged run's.
    #[test]
    fn the_last_attempt_is_final_whatever_run_id_its_rows_carry() {
        let trials = df!(
            col::RUN_ID => ["shard-1", "shard-2", "merged"],
            col::VARIANT => ["v", "v", "v"],
            col::TASK => ["t", "t", "t"],
            col::TRIAL_INDEX => [0u32, 1, 0],
            col::TRIAL_ATTEMPT => [0u32, 0, 1],
            col::OUTCOME => ["infra_error", "passed", "passed"],
        )
        .unwrap()
        .lazy();
        let marked = crate::frame::Frame::collect(
            mark(trials.clone(), reruns(trials)),
            std::path::Path::new("trials"),
            "trials",
        )
        .unwrap();
        assert_eq!(marked.bools(IS_FINAL).unwrap(), [false, true, true]);
        assert_eq!(marked.bools(IS_SCORED).unwrap(), [false, true, true]);
    }
}
