//! One side of a comparison, read from its run: a variant's scored final
//! attempts with only what a comparison computes with, grouped by task.
//! Not the run's [`TrialRow`](crate::TrialRow)s with their span counts: a
//! comparison held one of those for every trial of every variant, which at
//! ten million trials was more than this 24 GB machine had.

use std::collections::BTreeMap;

use polars::prelude::*;
use tack_protocol::TrialOutcome;
use tack_trace::schema::{TRIAL_COUNTS, TRIALS_DIR, col};

use super::CompareError;
use crate::attempts::IS_FINAL;
use crate::frame::Frame;
use crate::tables::RunTables;

/// A variant of a run, as a comparison sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Side {
    pub run_id: String,
    pub variant: String,
    pub model: String,
    /// The model is built in: these are not LLM results.
    pub simulated: bool,
    /// Scored final attempts, by task, in trial index order.
    pub(crate) tasks: BTreeMap<String, Vec<ComparedTrial>>,
    /// Final attempts that ended in `infra_error`: not scored, so not
    /// paired (see the crate docs).
    pub(crate) infra_errors: u64,
    /// Final attempts cut off: not scored, not paired.
    pub(crate) cancelled: u64,
}

/// One scored trial: what the pairing, the tests and the metrics read.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ComparedTrial {
    pub trial_id: String,
    pub trial_index: u32,
    /// Decided by a later attempt than its first (an infra retry, a
    /// resume, `--rerun`).
    pub rerun: bool,
    pub passed: bool,
    pub total_tokens: u64,
    /// `None` when the model has no price.
    pub cost_usd: Option<f64>,
    pub duration_ms: u64,
    /// The counts [`compared_counts`] names, in that order.
    pub counts: Box<[u32]>,
}

/// The trials table's counts a comparison shows ([`TRIAL_COUNTS`] marks
/// them `compared`), in order.
pub(crate) fn compared_counts() -> impl Iterator<Item = &'static tack_trace::schema::TrialCount> {
    TRIAL_COUNTS.iter().filter(|c| c.compared)
}

const PASSED: &str = "compare_passed";
const INFRA_ERROR: &str = "compare_infra_error";
const CANCELLED: &str = "compare_cancelled";

impl Side {
    /// `variant` of the opened run: one scan of its final attempts, reading
    /// a dozen narrow columns.
    pub fn load(tables: &RunTables, variant: &str) -> Result<Side, CompareError> {
        let manifest = tables.manifest();
        let Some(info) = manifest.variants.iter().find(|v| v.name == variant) else {
            return Err(CompareError::UnknownVariant {
                run_id: manifest.run_id.clone(),
                variant: variant.to_string(),
                known: manifest
                    .variants
                    .iter()
                    .map(|v| v.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        };
        let outcome = |outcome: TrialOutcome| col(col::OUTCOME).eq(lit(outcome.as_str()));
        let mut columns = vec![
            col(col::TRIAL_ID),
            col(col::TASK),
            col(col::TRIAL_INDEX),
            col(col::TRIAL_ATTEMPT),
            outcome(TrialOutcome::Passed).alias(PASSED),
            outcome(TrialOutcome::InfraError).alias(INFRA_ERROR),
            outcome(TrialOutcome::Cancelled).alias(CANCELLED),
            col(col::TOTAL_TOKENS),
            col(col::COST_USD),
            col(col::DURATION_MS),
        ];
        columns.extend(compared_counts().map(|c| col(c.column)));
        let lazy = tables
            .marked_trials()?
            .filter(col(IS_FINAL).and(col(col::VARIANT).eq(lit(variant))))
            .select(columns);
        let frame = Frame::collect(lazy, tables.trials_dir(), TRIALS_DIR)?;
        let counts = compared_counts()
            .map(|c| frame.u32s(c.column))
            .collect::<Result<Vec<_>, _>>()?;
        let trial_index = frame.u32s(col::TRIAL_INDEX)?;
        let attempt = frame.u32s(col::TRIAL_ATTEMPT)?;
        let passed = frame.bools(PASSED)?;
        let infra_error = frame.bools(INFRA_ERROR)?;
        let cancelled = frame.bools(CANCELLED)?;
        let total_tokens = frame.u64s(col::TOTAL_TOKENS)?;
        let cost_usd = frame.opt_f64s(col::COST_USD)?;
        let duration_ms = frame.u64s(col::DURATION_MS)?;
        let mut tasks: BTreeMap<String, Vec<ComparedTrial>> = BTreeMap::new();
        let (mut infra_errors, mut cut_off) = (0, 0);
        let rows = frame.strs(col::TRIAL_ID)?.into_iter();
        for (i, (trial_id, task)) in rows.zip(frame.strs(col::TASK)?).enumerate() {
            // Not scored, so not paired (crate::attempts).
            if infra_error[i] {
                infra_errors += 1;
                continue;
            }
            if cancelled[i] {
                cut_off += 1;
                continue;
            }
            tasks.entry(task).or_default().push(ComparedTrial {
                trial_id,
                trial_index: trial_index[i],
                rerun: attempt[i] > 0,
                passed: passed[i],
                total_tokens: total_tokens[i],
                cost_usd: cost_usd[i],
                duration_ms: duration_ms[i],
                counts: counts.iter().map(|column| column[i]).collect(),
            });
        }
        for trials in tasks.values_mut() {
            trials.sort_by_key(|t| t.trial_index);
        }
        Ok(Side {
            run_id: manifest.run_id.clone(),
            variant: variant.to_string(),
            model: info.model.clone(),
            simulated: info.simulated,
            tasks,
            infra_errors,
            cancelled: cut_off,
        })
    }

    /// The run and variant, as `RUN:VARIANT`.
    pub fn label(&self) -> String {
        format!("{}:{}", self.run_id, self.variant)
    }
}
