//! Deltas of what a success costs and how much work it took, each with a
//! 95% interval from a bootstrap that resamples tasks (trials of one task
//! are not independent).

use serde::Serialize;

use super::side::{ComparedTrial, compared_counts};
use super::{CompareOptions, Paired, passed};
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
    PerSuccess(fn(&ComparedTrial) -> Option<f64>),
    /// Mean over trials.
    Mean(fn(&ComparedTrial) -> Option<f64>),
    /// Mean of one of the trials table's counts over trials: the
    /// [`compared_counts`] at this position.
    MeanCount(usize),
}

impl Statistic {
    fn value(&self, trial: &ComparedTrial) -> Option<f64> {
        match self {
            Statistic::PerSuccess(get) | Statistic::Mean(get) => get(trial),
            Statistic::MeanCount(at) => trial.counts.get(*at).copied().map(f64::from),
        }
    }

    /// What the statistic needs of some trials, summed: computed once per
    /// task and side, so a resample adds up tasks, not every trial again
    /// (10,000 resamples over a million trials took minutes).
    fn sums<'a>(&self, trials: impl Iterator<Item = &'a ComparedTrial>) -> Sums {
        let mut sums = Sums::default();
        for trial in trials {
            match self.value(trial) {
                Some(value) => sums.sum += value,
                None => sums.missing = true,
            }
            sums.count += 1;
            sums.successes += usize::from(passed(trial));
        }
        sums
    }

    /// The statistic over the trials `sums` summed; `None` when a trial has
    /// no value, or there is nothing to divide by.
    fn of(&self, sums: impl Iterator<Item = Sums>) -> Option<f64> {
        let total = sums.fold(Sums::default(), Sums::add);
        if total.missing {
            return None;
        }
        match self {
            Statistic::PerSuccess(_) => {
                (total.successes > 0).then(|| total.sum / total.successes as f64)
            }
            Statistic::Mean(_) | Statistic::MeanCount(_) => {
                (total.count > 0).then(|| total.sum / total.count as f64)
            }
        }
    }
}

/// Some trials' values summed, with how many there were and passed, and
/// whether one had no value.
#[derive(Debug, Clone, Copy, Default)]
struct Sums {
    sum: f64,
    count: usize,
    successes: usize,
    missing: bool,
}

impl Sums {
    fn add(self, other: Sums) -> Sums {
        Sums {
            sum: self.sum + other.sum,
            count: self.count + other.count,
            successes: self.successes + other.successes,
            missing: self.missing || other.missing,
        }
    }
}

/// What a comparison shows: what a success costs, each count
/// [`compared_counts`] (per trial), and the wall time.
fn metrics() -> Vec<(String, &'static str, Statistic)> {
    let mut metrics = vec![
        (
            "tokens per success".to_string(),
            "tokens",
            Statistic::PerSuccess(|t| Some(t.total_tokens as f64)),
        ),
        (
            "cost per success".to_string(),
            "USD",
            Statistic::PerSuccess(|t| t.cost_usd),
        ),
    ];
    metrics.extend(compared_counts().enumerate().map(|(at, c)| {
        (
            c.label.to_lowercase(),
            "per trial",
            Statistic::MeanCount(at),
        )
    }));
    metrics.push((
        "wall time".to_string(),
        "s per trial",
        Statistic::Mean(|t| Some(t.duration_ms as f64 / 1000.0)),
    ));
    metrics
}

/// A metric's own bootstrap seed, from its name: adding or reordering
/// metrics does not move another's interval.
fn seed_of(base: u64, name: &str) -> u64 {
    // FNV-1a: stable across Rust versions, unlike `DefaultHasher`.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    base ^ hash
}

pub(super) fn deltas(paired: &[Paired<'_>], options: &CompareOptions) -> Vec<MetricDelta> {
    metrics()
        .into_iter()
        .map(|(name, unit, statistic)| {
            // Each task's two sides summed once; `candidate`: which side of
            // each drawn task.
            let sums: Vec<(Sums, Sums)> = paired
                .iter()
                .map(|(_, base, cand)| {
                    let side = |trials: &[ComparedTrial]| statistic.sums(trials.iter());
                    (side(base), side(cand))
                })
                .collect();
            let side = |tasks: &[usize], candidate: bool| {
                statistic.of(tasks.iter().map(|&t| {
                    let (base, cand) = sums[t];
                    if candidate { cand } else { base }
                }))
            };
            let delta_of = |tasks: &[usize]| Some(side(tasks, true)? - side(tasks, false)?);
            let all: Vec<usize> = (0..paired.len()).collect();
            let base = side(&all, false);
            let candidate = side(&all, true);
            let seed = seed_of(options.seed, &name);
            let interval =
                stats::cluster_bootstrap(paired.len(), options.bootstrap_reps, seed, &delta_of);
            MetricDelta {
                name,
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
