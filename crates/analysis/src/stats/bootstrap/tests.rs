use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{
    DEFAULT_BOOTSTRAP_REPS, Interval, cluster_bootstrap, mean_over_successes, paired_bootstrap,
    pass_rate, percentile, success_rate_bootstrap, total_per_success, trial_mean,
};

type Outcomes = Vec<(Vec<bool>, Vec<bool>)>;

/// `tasks` tasks with pass probabilities spread over [0, 1] (tasks differ
/// in difficulty, as real ones do), `trials` trials per side; the
/// candidate's probability is the base's plus `shift`, clamped.
fn simulated(tasks: usize, trials: usize, shift: f64, seed: u64) -> Outcomes {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..tasks)
        .map(|t| {
            let p = (t % 7) as f64 / 6.0;
            let q = (p + shift).clamp(0.0, 1.0);
            let base = (0..trials).map(|_| rng.random_bool(p)).collect();
            let candidate = (0..trials).map(|_| rng.random_bool(q)).collect();
            (base, candidate)
        })
        .collect()
}

fn observed_delta(tasks: &Outcomes) -> f64 {
    let base: Vec<&[bool]> = tasks.iter().map(|t| t.0.as_slice()).collect();
    let candidate: Vec<&[bool]> = tasks.iter().map(|t| t.1.as_slice()).collect();
    pass_rate(&candidate).unwrap() - pass_rate(&base).unwrap()
}

fn bootstrap(tasks: &Outcomes, seed: u64) -> Interval {
    let count = |trials: &[bool]| {
        let passed = trials.iter().filter(|p| **p).count() as u64;
        (passed, trials.len() as u64)
    };
    let counts: Vec<_> = tasks.iter().map(|(b, c)| (count(b), count(c))).collect();
    let interval = success_rate_bootstrap(&counts, DEFAULT_BOOTSTRAP_REPS, seed).unwrap();
    // The same as resampling the trials' outcomes themselves.
    let outcomes = paired_bootstrap(tasks, DEFAULT_BOOTSTRAP_REPS, seed, pass_rate).unwrap();
    assert_eq!(interval, outcomes);
    interval
}

#[test]
fn identical_sides_give_a_zero_interval() {
    let tasks: Outcomes = simulated(40, 3, 0.0, 1)
        .into_iter()
        .map(|(base, _)| (base.clone(), base))
        .collect();
    let interval = bootstrap(&tasks, 0);
    assert_eq!((interval.low, interval.high), (0.0, 0.0));
    assert_eq!(
        (interval.reps, interval.skipped),
        (DEFAULT_BOOTSTRAP_REPS, 0)
    );
}

#[test]
fn sides_from_one_process_give_an_interval_around_zero() {
    let tasks = simulated(60, 3, 0.0, 2);
    let estimate = observed_delta(&tasks);
    let interval = bootstrap(&tasks, 0);
    assert!(interval.low < 0.0 && 0.0 < interval.high, "{interval:?}");
    // Percentile intervals of a mean of 60 tasks are nearly symmetric.
    let (below, above) = (estimate - interval.low, interval.high - estimate);
    assert!(
        (below - above).abs() < 0.15 * (below + above),
        "{interval:?} around {estimate}"
    );
}

#[test]
fn a_known_shift_is_centred_and_excludes_zero() {
    // Every base failure on tasks 0, 4, 8, … becomes a candidate pass; the
    // rest is unchanged, so the difference is exactly known.
    let tasks: Outcomes = simulated(80, 3, 0.0, 3)
        .into_iter()
        .enumerate()
        .map(|(t, (base, _))| {
            let candidate = base.iter().map(|&b| b || t % 4 == 0).collect();
            (base, candidate)
        })
        .collect();
    let failures_fixed: usize = tasks
        .iter()
        .step_by(4)
        .map(|(b, _)| b.iter().filter(|p| !**p).count())
        .sum();
    let shift = failures_fixed as f64 / (80.0 * 3.0);
    assert!((observed_delta(&tasks) - shift).abs() < 1e-12);
    let interval = bootstrap(&tasks, 0);
    assert!(interval.low > 0.0, "{interval:?}");
    let centre = (interval.low + interval.high) / 2.0;
    assert!(
        (centre - shift).abs() < 0.1 * (interval.high - interval.low),
        "{interval:?} around {shift}"
    );
}

#[test]
fn width_matches_the_normal_approximation() {
    // With equal trials per task the pooled difference is the mean of the
    // per-task differences d_t, so the bootstrap interval should be close
    // to d̄ ± 1.96·sd(d)/√T (population sd: the bootstrap's plug-in
    // variance). Computed here by hand from the same data.
    let tasks = simulated(200, 3, 0.1, 4);
    let rate = |trials: &[bool]| trials.iter().filter(|p| **p).count() as f64 / 3.0;
    let diffs: Vec<f64> = tasks.iter().map(|(b, c)| rate(c) - rate(b)).collect();
    let n = diffs.len() as f64;
    let mean = diffs.iter().sum::<f64>() / n;
    let sd = (diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / n).sqrt();
    let normal_half_width = 1.959963984540054 * sd / n.sqrt();
    let interval = bootstrap(&tasks, 0);
    let half_width = (interval.high - interval.low) / 2.0;
    assert!(
        (half_width / normal_half_width - 1.0).abs() < 0.1,
        "{half_width} vs {normal_half_width}"
    );
    let centre = (interval.low + interval.high) / 2.0;
    assert!(
        (centre - mean).abs() < 0.1 * normal_half_width,
        "{centre} vs {mean}"
    );
}

#[test]
fn the_seed_makes_it_reproducible() {
    let tasks = simulated(30, 3, 0.2, 5);
    assert_eq!(bootstrap(&tasks, 11), bootstrap(&tasks, 11));
    assert_ne!(bootstrap(&tasks, 11), bootstrap(&tasks, 12));
}

#[test]
fn per_success_statistics_are_ratios_of_sums() {
    // Base: 100 tokens for a pass and 300 for a failure; candidate: 50 and
    // 50 for two passes. One task, so every resample is the sample itself.
    let tasks = vec![(
        vec![(100.0, true), (300.0, false)],
        vec![(50.0, true), (50.0, true)],
    )];
    let total = paired_bootstrap(&tasks, 100, 0, total_per_success).unwrap();
    assert_eq!((total.low, total.high), (50.0 - 400.0, 50.0 - 400.0));
    let mean = paired_bootstrap(&tasks, 100, 0, mean_over_successes).unwrap();
    assert_eq!((mean.low, mean.high), (50.0 - 100.0, 50.0 - 100.0));

    // Two tasks of very different size: the ratio of sums over both, not
    // the mean of per-task ratios (which would be (10 + 1000) / 2 = 505).
    let side: [&[(f64, bool)]; 2] = [&[(10.0, true)], &[(1000.0, true), (1000.0, true)]];
    assert_eq!(mean_over_successes(&side), Some(2010.0 / 3.0));
    assert_eq!(total_per_success(&[&[(5.0, false)]]), None);
}

#[test]
fn resamples_without_a_success_are_skipped_and_counted() {
    // Only task 0 has a base success; a resample misses it with probability
    // (2/3)³ = 0.296.
    let tasks = vec![
        (vec![(10.0, true)], vec![(8.0, true)]),
        (vec![(10.0, false)], vec![(8.0, true)]),
        (vec![(10.0, false)], vec![(8.0, true)]),
    ];
    let interval = paired_bootstrap(&tasks, DEFAULT_BOOTSTRAP_REPS, 0, total_per_success).unwrap();
    let share = interval.skipped as f64 / interval.reps as f64;
    assert!((share - 8.0 / 27.0).abs() < 0.02, "{share}");
    // No success at all on the base side: nothing to report.
    let never = vec![(vec![(1.0, false)], vec![(1.0, true)])];
    assert_eq!(paired_bootstrap(&never, 100, 0, total_per_success), None);
}

#[test]
fn generic_means_per_side() {
    let tasks = vec![(vec![3.0, 5.0], vec![2.0]), (vec![4.0], vec![1.0, 1.0])];
    let side: [&[f64]; 2] = [&tasks[0].0, &tasks[1].0];
    assert_eq!(trial_mean(&side), Some(4.0));
    let interval = paired_bootstrap(&tasks, 1000, 0, trial_mean).unwrap();
    // Every resample's candidate mean is below its base mean.
    assert!(interval.high < 0.0 && interval.low >= -3.0, "{interval:?}");
    assert_eq!(trial_mean(&[]), None);
}

#[test]
fn nothing_to_resample_gives_none() {
    assert_eq!(success_rate_bootstrap(&[], 100, 0), None);
    assert_eq!(success_rate_bootstrap(&[((1, 1), (0, 1))], 0, 0), None);
    assert_eq!(cluster_bootstrap(3, 10, 0, &|_: &[usize]| None), None);
    let nan = cluster_bootstrap(3, 10, 0, &|_: &[usize]| Some(f64::NAN));
    assert_eq!(nan, None);
}

#[test]
fn percentiles_interpolate_like_numpy() {
    // np.percentile(np.arange(1, 11), [2.5, 97.5]) == [1.225, 9.775]
    let values: Vec<f64> = (1..=10).map(f64::from).collect();
    assert!((percentile(&values, 0.025) - 1.225).abs() < 1e-12);
    assert!((percentile(&values, 0.975) - 9.775).abs() < 1e-12);
    // np.percentile([-1.0, 2.0, 3.0], [2.5, 97.5]) == [-0.85, 2.95]
    assert!((percentile(&[-1.0, 2.0, 3.0], 0.025) + 0.85).abs() < 1e-12);
    assert!((percentile(&[-1.0, 2.0, 3.0], 0.975) - 2.95).abs() < 1e-12);
    assert_eq!(percentile(&[4.0], 0.975), 4.0);
}
