//! Cluster bootstrap by task for differences between two variants.
//!
//! Trials of one task share the task's difficulty, so they are not
//! independent observations; resampling trials would make intervals too
//! narrow. Resampling whole tasks (each with its base and candidate trials)
//! keeps that dependence and the pairing of the two sides.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

/// Resamples `tack compare` draws for each interval.
pub const DEFAULT_BOOTSTRAP_REPS: usize = 10_000;

/// Coverage of the percentile intervals.
pub const CONFIDENCE: f64 = 0.95;

/// A 95% bootstrap percentile interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
    /// Resamples drawn, including skipped ones.
    pub reps: usize,
    /// Resamples in which the statistic had no value (e.g. no success on a
    /// side, so no "tokens per success") and which were left out; the
    /// interval comes from the other `reps − skipped`. A large share
    /// means the interval rests on the resamples that happened to include
    /// the few tasks that give the statistic a value.
    pub skipped: usize,
}

/// Cluster bootstrap over `tasks` tasks: each of `reps` resamples draws
/// `tasks` task indices uniformly with replacement and passes them to
/// `statistic` (an index appears as often as it was drawn); the interval is
/// the 2.5th and 97.5th percentile of the values it returns (linear
/// interpolation between order statistics, numpy's default).
///
/// `statistic` returns `None` (or a non-finite value) when a resample has
/// no value; such resamples are counted in [`Interval::skipped`]. Indices
/// come from a ChaCha8 stream seeded with `seed`, so the same inputs and
/// seed give the same interval on every platform. `None` when there are no
/// tasks, no reps, or every resample was skipped.
///
/// Assumes tasks are independent and the percentile interval's usual
/// conditions: enough tasks (a few dozen) that the resampling distribution
/// resembles the sampling distribution; with very few tasks the interval is
/// too narrow.
pub fn cluster_bootstrap<F>(tasks: usize, reps: usize, seed: u64, statistic: &F) -> Option<Interval>
where
    F: Fn(&[usize]) -> Option<f64> + ?Sized,
{
    if tasks == 0 || reps == 0 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut sample = vec![0usize; tasks];
    let mut values = Vec::with_capacity(reps);
    for _ in 0..reps {
        for slot in sample.iter_mut() {
            *slot = rng.random_range(0..tasks);
        }
        if let Some(value) = statistic(&sample).filter(|v| v.is_finite()) {
            values.push(value);
        }
    }
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let tail = (1.0 - CONFIDENCE) / 2.0;
    Some(Interval {
        low: percentile(&values, tail),
        high: percentile(&values, 1.0 - tail),
        reps,
        skipped: reps - values.len(),
    })
}

/// Cluster bootstrap of candidate − base for a per-side statistic. Each
/// task is (base trials, candidate trials), with any per-trial value `T`
/// (an `f64` measure, a `bool` outcome, a (value, passed) pair). Per
/// resample, `statistic` gets one side's trials of the drawn tasks (one
/// slice per draw) and computes that side's value over them, so
/// ratio-of-sums statistics are recomputed per resample as they should be,
/// not averaged from per-task ratios. A resample where either side has no
/// value is skipped. See [`cluster_bootstrap`] for the rest.
pub fn paired_bootstrap<T, S>(
    tasks: &[(Vec<T>, Vec<T>)],
    reps: usize,
    seed: u64,
    statistic: S,
) -> Option<Interval>
where
    S: Fn(&[&[T]]) -> Option<f64>,
{
    let delta = |sample: &[usize]| {
        let base: Vec<&[T]> = sample.iter().map(|&t| tasks[t].0.as_slice()).collect();
        let candidate: Vec<&[T]> = sample.iter().map(|&t| tasks[t].1.as_slice()).collect();
        Some(statistic(&candidate)? - statistic(&base)?)
    };
    cluster_bootstrap(tasks.len(), reps, seed, &delta)
}

/// 95% interval for the difference in success rate, candidate − base,
/// each task given as (base, candidate) [`PassCount`]s: what
/// [`paired_bootstrap`] with [`pass_rate`] gives over the tasks' outcomes
/// (passes ÷ trials pooled over the resample's tasks, which is the mean of
/// per-task differences when every task has the same number of trials).
pub fn success_rate_bootstrap(
    tasks: &[(PassCount, PassCount)],
    reps: usize,
    seed: u64,
) -> Option<Interval> {
    // Each task's passes and trials are summed once: a resample adds up
    // tasks, not every trial again (a million trials, 10,000 resamples).
    let rate = |sample: &[usize], side: fn(&(PassCount, PassCount)) -> PassCount| {
        let (passes, trials) = sample.iter().fold((0u64, 0u64), |(p, n), &t| {
            let (passed, trials) = side(&tasks[t]);
            (p + passed, n + trials)
        });
        (trials > 0).then(|| passes as f64 / trials as f64)
    };
    let delta = |sample: &[usize]| Some(rate(sample, |t| t.1)? - rate(sample, |t| t.0)?);
    cluster_bootstrap(tasks.len(), reps, seed, &delta)
}

/// One side of one task: (trials passed, trials).
pub type PassCount = (u64, u64);

/// Passes ÷ trials over the given tasks' trials; `None` without trials.
pub fn pass_rate(side: &[&[bool]]) -> Option<f64> {
    let (passes, trials) = side.iter().fold((0usize, 0usize), |(p, n), trials| {
        (p + trials.iter().filter(|t| **t).count(), n + trials.len())
    });
    (trials > 0).then(|| passes as f64 / trials as f64)
}

/// Mean of a per-trial value (steps, retries, interventions, wall time)
/// over the given tasks' trials; `None` without trials.
pub fn trial_mean(side: &[&[f64]]) -> Option<f64> {
    let (sum, count) = side.iter().fold((0.0, 0usize), |(s, n), trials| {
        (s + trials.iter().sum::<f64>(), n + trials.len())
    });
    (count > 0).then(|| sum / count as f64)
}

/// Σ value over all trials ÷ number of successes, for (value, passed)
/// trials: what a success costs when failed attempts are paid for too.
/// This is how the run summary computes tokens per success. `None` without
/// a success.
pub fn total_per_success(side: &[&[(f64, bool)]]) -> Option<f64> {
    let (sum, successes) = fold_trials(side, |_| true);
    (successes > 0).then(|| sum / successes as f64)
}

/// Σ value over successful trials ÷ number of successes, for (value,
/// passed) trials: what a successful attempt itself takes. `None` without a
/// success.
pub fn mean_over_successes(side: &[&[(f64, bool)]]) -> Option<f64> {
    let (sum, successes) = fold_trials(side, |(_, passed)| *passed);
    (successes > 0).then(|| sum / successes as f64)
}

/// (Σ value over trials kept by `keep`, number of successes).
fn fold_trials(side: &[&[(f64, bool)]], keep: impl Fn(&(f64, bool)) -> bool) -> (f64, usize) {
    side.iter()
        .flat_map(|trials| trials.iter())
        .fold((0.0, 0usize), |(sum, successes), trial| {
            (
                sum + if keep(trial) { trial.0 } else { 0.0 },
                successes + usize::from(trial.1),
            )
        })
}

/// The q-quantile of sorted, non-empty `values`, interpolating linearly
/// between order statistics (numpy's default, R's type 7).
fn percentile(values: &[f64], q: f64) -> f64 {
    let position = q * (values.len() - 1) as f64;
    let below = position.floor() as usize;
    let above = (below + 1).min(values.len() - 1);
    let fraction = position - below as f64;
    values[below] + fraction * (values[above] - values[below])
}

#[cfg(test)]
mod tests;
