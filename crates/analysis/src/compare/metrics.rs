//! Deltas of what a success costs and how much work it took, each with a
//! 95% interval from a bootstrap that resamples tasks (trials of one task
//! are not independent).

use serde::Serialize;

use super::{CompareOptions, Paired, passed};
use crate::TrialRow;
use crate::stats;

/// One metric on both sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricDelta {
    pub name: String,
    pub unit: String,
    /// `None` when the side has no value: no success (per-success
    /// metrics), or an unpriced model (cost).
    pub base: Option<f64>,
    pub candidate: Option<f64>,
    /// candidate − base.
    pub delta: Option<f64>,
    /// candidate / base − 1.
    pub relative: Option<f64>,
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// Resamples in which a side had no value (e.g. no success).
    pub skipped_resamples: usize,
}

/// How a metric is computed over a set of trials.
enum Statistic {
    /// Σ value over all trials ÷ number of successes.
    PerSuccess(fn(&TrialRow) -> Option<f64>),
    /// Mean over trials.
    Mean(fn(&TrialRow) -> Option<f64>),
}

impl Statistic {
    fn of<'a>(&self, trials: impl Iterator<Item = &'a TrialRow>) -> Option<f64> {
        let mut sum = 0.0;
        let mut count = 0usize;
        let mut successes = 0usize;
        for trial in trials {
            let value = match self {
                Statistic::PerSuccess(get) | Statistic::Mean(get) => get(trial)?,
            };
            sum += value;
            count += 1;
            successes += usize::from(passed(trial));
        }
        match self {
            Statistic::PerSuccess(_) => (successes > 0).then(|| sum / successes as f64),
            Statistic::Mean(_) => (count > 0).then(|| sum / count as f64),
        }
    }
}

const METRICS: [(&str, &str, Statistic); 6] = [
    (
        "tokens per success",
        "tokens",
        Statistic::PerSuccess(|t| Some(t.total_tokens as f64)),
    ),
    (
        "cost per success",
        "USD",
        Statistic::PerSuccess(|t| t.cost_usd),
    ),
    (
        "steps",
        "per trial",
        Statistic::Mean(|t| Some(f64::from(t.steps))),
    ),
    (
        "retries",
        "per trial",
        Statistic::Mean(|t| Some(f64::from(t.retries))),
    ),
    (
        "interventions",
        "per trial",
        Statistic::Mean(|t| Some(f64::from(t.interventions))),
    ),
    (
        "wall time",
        "s per trial",
        Statistic::Mean(|t| Some(t.duration_ms as f64 / 1000.0)),
    ),
];

pub(super) fn deltas(paired: &[Paired<'_>], options: &CompareOptions) -> Vec<MetricDelta> {
    METRICS
        .iter()
        .enumerate()
        .map(|(i, (name, unit, statistic))| {
            // `candidate`: which side of each drawn task's trials.
            let side = |tasks: &[usize], candidate: bool| {
                statistic.of(tasks.iter().flat_map(|&t| {
                    let (_, base, cand) = &paired[t];
                    if candidate { cand } else { base }.iter().copied()
                }))
            };
            let delta_of = |tasks: &[usize]| Some(side(tasks, true)? - side(tasks, false)?);
            let all: Vec<usize> = (0..paired.len()).collect();
            let base = side(&all, false);
            let candidate = side(&all, true);
            // One seed per metric, so adding a metric does not move the others.
            let seed = options.seed.wrapping_add(i as u64);
            let interval =
                stats::cluster_bootstrap(paired.len(), options.bootstrap_reps, seed, &delta_of);
            MetricDelta {
                name: name.to_string(),
                unit: unit.to_string(),
                base,
                candidate,
                delta: base.zip(candidate).map(|(b, c)| c - b),
                relative: base
                    .zip(candidate)
                    .filter(|(b, _)| *b != 0.0)
                    .map(|(b, c)| c / b - 1.0),
                ci_low: interval.map(|i| i.low),
                ci_high: interval.map(|i| i.high),
                skipped_resamples: interval.map_or(0, |i| i.skipped),
            }
        })
        .collect()
}
