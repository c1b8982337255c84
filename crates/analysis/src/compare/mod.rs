//! Two sides — a variant of one run against a variant of another run (or
//! the same run) — paired by task and by trial index: per-task flips, the
//! paired difference in success rate with its interval and test, pass@k and
//! pass^k, deltas of cost and effort, and the power of the comparison. The
//! numbers come out as plain serialisable structs for the terminal, `--json`
//! and the compare report.

mod divergence;
mod gate;
mod metrics;
mod pairing;
mod side;

use std::collections::BTreeMap;

use serde::Serialize;

use crate::{AnalysisError, stats, wilson_interval};
use side::ComparedTrial;

pub use divergence::{
    DifferentCall, Differs, ReplayDifference, first_divergence, replay_difference,
};
pub use gate::{GateError, GateOptions, GateVerdict, gate};
pub use metrics::MetricDelta;
pub use pairing::{DriftError, Pairing, pairing};
pub use side::Side;

/// How the comparison is computed.
#[derive(Debug, Clone)]
pub struct CompareOptions {
    /// Bootstrap resamples for every interval.
    pub bootstrap_reps: usize,
    /// Seed of the bootstrap, so a comparison is reproducible.
    pub seed: u64,
    /// An effect (difference in success rate) to size the trials for.
    pub effect: Option<f64>,
    /// Tasks left out of the pairing, with why (drifted between the runs).
    pub excluded: BTreeMap<String, String>,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            bootstrap_reps: 10_000,
            seed: 0,
            effect: None,
            excluded: BTreeMap::new(),
        }
    }
}

/// What one side is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideInfo {
    pub run_id: String,
    pub variant: String,
    pub model: String,
    /// The model is built in: these are not LLM results.
    pub simulated: bool,
    /// Scored trials of the paired tasks.
    pub trials: u64,
    /// Trials of the side's variant whose final attempt ended in
    /// `infra_error`: not scored, so not paired (see the crate docs).
    pub infra_errors: u64,
    /// Trials whose final attempt was cut off (`cancelled`): not scored,
    /// not paired.
    pub cancelled: u64,
    pub passed: u64,
    pub success_rate: f64,
    /// Wilson 95% interval.
    pub ci_low: f64,
    pub ci_high: f64,
    /// Of `trials`, those decided by a later attempt than their first (an
    /// infra retry, a resume, `--rerun`), and the success rate of the rest;
    /// `None` when none was run again (or all were).
    pub rerun_trials: u64,
    pub success_rate_without_reruns: Option<f64>,
}

/// How a task's outcome moved from base to candidate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Flip {
    /// Every base trial failed, every candidate trial passed.
    Fixed,
    /// Every base trial passed, every candidate trial failed.
    Broken,
    StablePass,
    StableFail,
    /// Mixed outcomes on at least one side, and the candidate passed a
    /// larger share of its trials (3/3 against 1/3).
    Better,
    /// … a smaller share.
    Worse,
    /// Mixed outcomes on at least one side and the same share passed on
    /// both: the trials of one configuration disagree with each other, and
    /// nothing says either side is the better.
    Flaky,
}

impl Flip {
    pub fn as_str(self) -> &'static str {
        match self {
            Flip::Fixed => "fixed",
            Flip::Broken => "broken",
            Flip::StablePass => "stable pass",
            Flip::StableFail => "stable fail",
            Flip::Better => "better",
            Flip::Worse => "worse",
            Flip::Flaky => "flaky",
        }
    }

    fn of(base: (u64, u64), candidate: (u64, u64)) -> Flip {
        let all = |(passed, trials): (u64, u64)| passed == trials;
        let none = |(passed, _): (u64, u64)| passed == 0;
        match (all(base), none(base), all(candidate), none(candidate)) {
            (true, _, true, _) => Flip::StablePass,
            (_, true, _, true) => Flip::StableFail,
            (_, true, true, _) => Flip::Fixed,
            (true, _, _, true) => Flip::Broken,
            // Shares compared as fractions, exactly: passed_c / trials_c
            // against passed_b / trials_b.
            _ => match (u128::from(candidate.0) * u128::from(base.1))
                .cmp(&(u128::from(base.0) * u128::from(candidate.1)))
            {
                std::cmp::Ordering::Greater => Flip::Better,
                std::cmp::Ordering::Less => Flip::Worse,
                std::cmp::Ordering::Equal => Flip::Flaky,
            },
        }
    }
}

/// One task on both sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskComparison {
    pub task: String,
    pub base_trials: u64,
    pub base_passed: u64,
    pub candidate_trials: u64,
    pub candidate_passed: u64,
    pub flip: Flip,
    /// Trial ids, by trial index, for opening them side by side.
    pub base_trial_ids: Vec<String>,
    pub candidate_trial_ids: Vec<String>,
}

/// A task that was not paired, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct UnpairedTask {
    pub task: String,
    pub reason: String,
    /// `base` or `candidate` when that side has no scored trial of the task
    /// (it was not left out): a run interrupted before it, or whose every
    /// trial of it was an infrastructure error.
    pub missing_on: Option<&'static str>,
}

/// The paired difference in success rate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SuccessDelta {
    /// candidate − base.
    pub delta: f64,
    /// 95% cluster bootstrap interval (tasks resampled).
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// `mcnemar_exact` over the trial pairs (same task, same trial index).
    /// Conditional on the tasks, each discordant pair is a fair coin under
    /// "same per-task success probabilities", however the tasks differ, so
    /// the test is exact for "did it change on these tasks?" — the question
    /// a gate on a fixed suite asks.
    pub test: String,
    pub p_value: f64,
    /// With several trials per task: the task-level test on per-task
    /// differences, for "would it change on tasks like these?" (tasks as
    /// the sample); less powerful with few tasks.
    pub task_test: Option<String>,
    pub task_p_value: Option<f64>,
    /// Pairs (same task, same trial index) the base passed and the
    /// candidate failed, and the other way round.
    pub base_only: u64,
    pub candidate_only: u64,
    pub pairs: u64,
}

/// pass@k and pass^k at one k, averaged over the paired tasks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PassAtK {
    pub k: u64,
    pub base_pass_at_k: f64,
    pub candidate_pass_at_k: f64,
    pub base_pass_hat_k: f64,
    pub candidate_pass_hat_k: f64,
}

/// How much this comparison can tell apart.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Power {
    pub tasks: u64,
    pub trials_per_task: u64,
    /// The smallest difference in success rate detected with 80% power at
    /// alpha 0.05 (`None`: no change is detectable with these trials).
    pub min_detectable_effect: Option<f64>,
    /// `--effect`, and the trials per task that would detect it.
    pub effect: Option<f64>,
    pub trials_needed: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub base: SideInfo,
    pub candidate: SideInfo,
    pub tasks: Vec<TaskComparison>,
    pub unpaired: Vec<UnpairedTask>,
    pub success: SuccessDelta,
    pub pass_at_k: Vec<PassAtK>,
    pub metrics: Vec<MetricDelta>,
    pub power: Power,
}

impl Comparison {
    /// Either side's results come from a built-in model.
    pub fn simulated(&self) -> bool {
        self.base.simulated || self.candidate.simulated
    }

    pub fn flipped(&self) -> impl Iterator<Item = &TaskComparison> {
        self.tasks
            .iter()
            .filter(|t| matches!(t.flip, Flip::Fixed | Flip::Broken))
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    #[error("run {run_id} has no variant `{variant}`; its variants are: {known}")]
    UnknownVariant {
        run_id: String,
        variant: String,
        known: String,
    },
    #[error(
        "no task has finished trials on both sides ({base} and {candidate}); compare runs of the same suite"
    )]
    NothingPaired { base: String, candidate: String },
    #[error(transparent)]
    Read(#[from] AnalysisError),
}

fn passed(trial: &ComparedTrial) -> bool {
    trial.passed
}

/// A task's trials on one side, counted: (passed, trials).
fn pass_count(trials: &[ComparedTrial]) -> stats::PassCount {
    let passed = trials.iter().filter(|t| passed(t)).count() as u64;
    (passed, trials.len() as u64)
}

/// Pairs the two sides by task and computes everything.
pub fn compare(
    base: &Side,
    candidate: &Side,
    options: &CompareOptions,
) -> Result<Comparison, CompareError> {
    let (paired, unpaired) = pair(&base.tasks, &candidate.tasks, &options.excluded);
    if paired.is_empty() {
        return Err(CompareError::NothingPaired {
            base: base.label(),
            candidate: candidate.label(),
        });
    }
    let tasks: Vec<TaskComparison> = paired.iter().map(task_comparison).collect();
    let success = success_delta(&paired, options);
    let trials_per_task = paired
        .iter()
        .map(|(_, b, c)| b.len().min(c.len()) as u64)
        .min()
        .unwrap_or(0);
    let base_info = side_info(base, paired.iter().flat_map(|(_, b, _)| b.iter()));
    let power = power(&tasks, trials_per_task, base_info.success_rate, options);
    Ok(Comparison {
        base: base_info,
        candidate: side_info(candidate, paired.iter().flat_map(|(_, _, c)| c.iter())),
        pass_at_k: pass_at_k(&tasks),
        metrics: metrics::deltas(&paired, options),
        tasks,
        unpaired,
        success,
        power,
    })
}

/// A task with its base and candidate trials.
pub(crate) type Paired<'a> = (&'a str, &'a [ComparedTrial], &'a [ComparedTrial]);

/// A side's scored trials by task.
type ByTask = BTreeMap<String, Vec<ComparedTrial>>;

fn pair<'a>(
    base: &'a ByTask,
    candidate: &'a ByTask,
    excluded: &BTreeMap<String, String>,
) -> (Vec<Paired<'a>>, Vec<UnpairedTask>) {
    let mut paired = Vec::new();
    let mut unpaired = Vec::new();
    let tasks: std::collections::BTreeSet<&str> = base
        .keys()
        .chain(candidate.keys())
        .map(String::as_str)
        .collect();
    for task in tasks {
        let (reason, missing_on) = match (base.get(task), candidate.get(task), excluded.get(task)) {
            (_, _, Some(why)) => (why.clone(), None),
            (Some(b), Some(c), None) => {
                paired.push((task, b.as_slice(), c.as_slice()));
                continue;
            }
            (None, _, None) => ("no trials on the base side".to_string(), Some("base")),
            (_, None, None) => (
                "no trials on the candidate side".to_string(),
                Some("candidate"),
            ),
        };
        unpaired.push(UnpairedTask {
            task: task.to_string(),
            reason,
            missing_on,
        });
    }
    (paired, unpaired)
}

fn task_comparison(paired: &Paired<'_>) -> TaskComparison {
    let (task, base, candidate) = paired;
    let (b, c) = (pass_count(base), pass_count(candidate));
    let ids = |trials: &[ComparedTrial]| trials.iter().map(|t| t.trial_id.clone()).collect();
    TaskComparison {
        task: task.to_string(),
        base_trials: b.1,
        base_passed: b.0,
        candidate_trials: c.1,
        candidate_passed: c.0,
        flip: Flip::of(b, c),
        base_trial_ids: ids(base),
        candidate_trial_ids: ids(candidate),
    }
}

fn side_info<'a>(side: &Side, trials: impl Iterator<Item = &'a ComparedTrial>) -> SideInfo {
    let (mut total, mut passed_count, mut rerun_trials, mut rerun_passed) =
        (0u64, 0u64, 0u64, 0u64);
    for trial in trials {
        total += 1;
        passed_count += u64::from(passed(trial));
        rerun_trials += u64::from(trial.rerun);
        rerun_passed += u64::from(trial.rerun && passed(trial));
    }
    let (ci_low, ci_high) = wilson_interval(passed_count, total);
    SideInfo {
        run_id: side.run_id.clone(),
        variant: side.variant.clone(),
        model: side.model.clone(),
        simulated: side.simulated,
        trials: total,
        infra_errors: side.infra_errors,
        cancelled: side.cancelled,
        passed: passed_count,
        success_rate: if total == 0 {
            0.0
        } else {
            passed_count as f64 / total as f64
        },
        ci_low,
        ci_high,
        rerun_trials,
        success_rate_without_reruns: (rerun_trials > 0 && total > rerun_trials)
            .then(|| (passed_count - rerun_passed) as f64 / (total - rerun_trials) as f64),
    }
}

/// The paired difference: McNemar on the trial pairs, and with several
/// trials per task also the task-level test (see [`SuccessDelta`]).
fn success_delta(paired: &[Paired<'_>], options: &CompareOptions) -> SuccessDelta {
    let (mut base_only, mut candidate_only, mut pairs) = (0u64, 0u64, 0u64);
    for (_, base, candidate) in paired {
        for b in base.iter() {
            // Both sides are in trial index order.
            if let Ok(at) = candidate.binary_search_by_key(&b.trial_index, |c| c.trial_index) {
                let c = &candidate[at];
                pairs += 1;
                match (passed(b), passed(c)) {
                    (true, false) => base_only += 1,
                    (false, true) => candidate_only += 1,
                    _ => {}
                }
            }
        }
    }
    let counts: Vec<(stats::PassCount, stats::PassCount)> = paired
        .iter()
        .map(|(_, b, c)| (pass_count(b), pass_count(c)))
        .collect();
    let rate = |(passed, trials): stats::PassCount| passed as f64 / trials.max(1) as f64;
    let single = paired.iter().all(|(_, b, c)| b.len() == 1 && c.len() == 1);
    let (task_test, task_p_value) = if single {
        (None, None)
    } else {
        let diffs: Vec<f64> = counts.iter().map(|&(b, c)| rate(c) - rate(b)).collect();
        let (test, p) = stats::task_level_test(&diffs);
        (Some(test), Some(p))
    };
    let interval = stats::success_rate_bootstrap(&counts, options.bootstrap_reps, options.seed);
    let total = counts.iter().fold(((0, 0), (0, 0)), |(b, c), &(tb, tc)| {
        ((b.0 + tb.0, b.1 + tb.1), (c.0 + tc.0, c.1 + tc.1))
    });
    SuccessDelta {
        delta: rate(total.1) - rate(total.0),
        ci_low: interval.map(|i| i.low),
        ci_high: interval.map(|i| i.high),
        test: "mcnemar_exact".to_string(),
        p_value: stats::mcnemar_exact(base_only, candidate_only),
        task_test,
        task_p_value,
        base_only,
        candidate_only,
        pairs,
    }
}

/// pass@k and pass^k for k = 1..the fewest trials any paired task has on
/// either side, averaged over tasks.
fn pass_at_k(tasks: &[TaskComparison]) -> Vec<PassAtK> {
    let max_k = tasks
        .iter()
        .map(|t| t.base_trials.min(t.candidate_trials))
        .min()
        .unwrap_or(0);
    let mean = |f: &dyn Fn(&TaskComparison) -> f64| {
        tasks.iter().map(f).sum::<f64>() / tasks.len().max(1) as f64
    };
    (1..=max_k)
        .map(|k| PassAtK {
            k,
            base_pass_at_k: mean(&|t| stats::pass_at_k(t.base_trials, t.base_passed, k)),
            candidate_pass_at_k: mean(&|t| {
                stats::pass_at_k(t.candidate_trials, t.candidate_passed, k)
            }),
            base_pass_hat_k: mean(&|t| stats::pass_hat_k(t.base_trials, t.base_passed, k)),
            candidate_pass_hat_k: mean(&|t| {
                stats::pass_hat_k(t.candidate_trials, t.candidate_passed, k)
            }),
        })
        .collect()
}

fn power(
    tasks: &[TaskComparison],
    trials_per_task: u64,
    base_rate: f64,
    options: &CompareOptions,
) -> Power {
    let task_count = tasks.len() as u64;
    Power {
        tasks: task_count,
        trials_per_task,
        min_detectable_effect: stats::min_detectable_effect(
            task_count,
            trials_per_task,
            base_rate,
            0.05,
            0.8,
        ),
        effect: options.effect,
        trials_needed: options
            .effect
            .and_then(|effect| trials_for_either_way(effect, task_count, base_rate)),
    }
}

/// Trials per task to detect a change of `size` from `base_rate` in
/// either direction: the more the two need (near 0 or 1 a rise and a drop
/// of one size differ), or the one a rate in [0, 1] allows. `--effect` is
/// a size, as the detectable difference is; a gate cares about drops.
fn trials_for_either_way(size: f64, tasks: u64, base_rate: f64) -> Option<u64> {
    let need = |effect: f64| stats::trials_needed(effect, tasks, base_rate, 0.05, 0.8);
    match (need(size.abs()), need(-size.abs())) {
        (Some(up), Some(down)) => Some(up.max(down)),
        (one, other) => one.or(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// From 95% a rise of 5 points ends at 100% (cheap to tell on the
    /// arcsine scale) while a drop of 5 is what a gate must see: the size
    /// asked for is sized for the harder direction; beyond 100% only the
    /// drop counts, and a size no rate allows has no answer.
    #[test]
    fn an_effect_is_sized_for_the_harder_direction() {
        let drop = stats::trials_needed(-0.05, 10, 0.95, 0.05, 0.8);
        let rise = stats::trials_needed(0.05, 10, 0.95, 0.05, 0.8);
        assert!(drop > rise, "{drop:?} {rise:?}");
        assert_eq!(trials_for_either_way(0.05, 10, 0.95), drop);
        assert_eq!(
            trials_for_either_way(0.2, 10, 0.95),
            stats::trials_needed(-0.2, 10, 0.95, 0.05, 0.8)
        );
        assert!(trials_for_either_way(0.2, 10, 0.95).is_some());
        assert_eq!(trials_for_either_way(0.6, 10, 0.5), None);
    }

    #[test]
    fn flips_are_classified_from_both_sides_counts() {
        assert_eq!(Flip::of((0, 3), (3, 3)), Flip::Fixed);
        assert_eq!(Flip::of((3, 3), (0, 3)), Flip::Broken);
        assert_eq!(Flip::of((3, 3), (3, 3)), Flip::StablePass);
        assert_eq!(Flip::of((0, 3), (0, 3)), Flip::StableFail);
        assert_eq!(Flip::of((1, 3), (3, 3)), Flip::Better);
        assert_eq!(Flip::of((3, 3), (1, 3)), Flip::Worse);
        assert_eq!(Flip::of((1, 3), (2, 3)), Flip::Better);
        assert_eq!(Flip::of((2, 3), (2, 3)), Flip::Flaky);
        assert_eq!(Flip::of((1, 2), (2, 4)), Flip::Flaky);
        assert_eq!(Flip::of((0, 3), (1, 3)), Flip::Better);
        assert_eq!(Flip::of((0, 1), (1, 1)), Flip::Fixed);
    }
}
