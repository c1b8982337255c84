//! The sign-flip permutation test on per-task differences, and the choice
//! of task-level test for `tack compare` when tasks have several trials.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Up to this many non-zero differences the test enumerates all 2ⁿ sign
/// patterns (about a million at 20); beyond, it samples.
pub const EXACT_PERMUTATION_LIMIT: usize = 20;

/// Random sign patterns drawn by [`task_level_test`] when the test cannot
/// be exact; the Monte Carlo standard error of the p-value is then at most
/// √(0.25 / 100 000) ≈ 0.0016.
pub const DEFAULT_PERMUTATIONS: usize = 100_000;

/// Seed of [`task_level_test`]'s sampling, fixed so a comparison is
/// reproducible.
pub const TASK_LEVEL_TEST_SEED: u64 = 0;

/// Name of the test [`task_level_test`] runs, as reported by `tack compare`.
pub const TASK_LEVEL_TEST: &str = "paired_permutation";

/// The default task-level test for comparing two variants when tasks have
/// more than one trial per side: [`paired_permutation_test`] on
/// `diffs[t]` = candidate pass rate − base pass rate of task t, with
/// [`DEFAULT_PERMUTATIONS`] samples and a fixed seed when there are more
/// than [`EXACT_PERMUTATION_LIMIT`] non-zero differences. Returns the
/// test's name ([`TASK_LEVEL_TEST`]) and the two-sided p-value.
///
/// The permutation test rather than the [`super::sign_test`] because it uses
/// how much each task moved (0/3 → 3/3 weighs more than 2/3 → 3/3) and
/// tests the quantity the comparison reports, the mean difference; the
/// sign test only counts directions. Trials of one task are not
/// independent pairs, so the task, not the trial, is the unit here.
pub fn task_level_test(diffs: &[f64]) -> (String, f64) {
    (
        TASK_LEVEL_TEST.to_string(),
        paired_permutation_test(diffs, DEFAULT_PERMUTATIONS, TASK_LEVEL_TEST_SEED),
    )
}

/// Two-sided sign-flip permutation test of "the mean paired difference is
/// zero": the share of the 2ⁿ ways of flipping the signs of the differences
/// whose sum is at least as far from zero as the observed sum (relative
/// tolerance 1e-9, so equal sums that differ by rounding count as ties).
///
/// Assumes that under the null the base and candidate labels within a task
/// are exchangeable, so each task's difference is as likely to be negative
/// as positive; tasks are independent. This is exact when each task has the
/// same number of trials on both sides.
///
/// Zero and non-finite differences (a task with no trials on a side) cannot
/// change sign and are dropped; 1 when none is left. With at most
/// [`EXACT_PERMUTATION_LIMIT`] differences every pattern is enumerated and
/// the p-value is exact (matches scipy `permutation_test(...,
/// permutation_type="samples")`); above, `resamples` random patterns drawn
/// from a ChaCha8 stream seeded with `seed` give the Monte Carlo p-value
/// (1 + hits) / (1 + resamples), which is never 0 (Phipson & Smyth, 2010).
/// `resamples` of 0 is taken as 1.
pub fn paired_permutation_test(diffs: &[f64], resamples: usize, seed: u64) -> f64 {
    let diffs: Vec<f64> = diffs
        .iter()
        .copied()
        .filter(|d| d.is_finite() && *d != 0.0)
        .collect();
    if diffs.is_empty() {
        return 1.0;
    }
    let scale: f64 = diffs.iter().map(|d| d.abs()).sum();
    let observed: f64 = diffs.iter().sum();
    let threshold = observed.abs() - 1e-9 * scale;
    if diffs.len() <= EXACT_PERMUTATION_LIMIT {
        exact(&diffs, threshold)
    } else {
        monte_carlo(&diffs, threshold, resamples.max(1), seed)
    }
}

/// Enumerates all sign patterns. The sums are split into the low and high
/// halves of the differences, each half's 2ⁿᐟ² partial sums computed once,
/// so every pattern costs one addition and carries no accumulated rounding.
fn exact(diffs: &[f64], threshold: f64) -> f64 {
    let (low, high) = diffs.split_at(diffs.len() / 2);
    let low_sums = signed_sums(low);
    let high_sums = signed_sums(high);
    let mut hits = 0u64;
    for h in &high_sums {
        hits += low_sums
            .iter()
            .filter(|l| (*l + h).abs() >= threshold)
            .count() as u64;
    }
    hits as f64 / (low_sums.len() * high_sums.len()) as f64
}

/// Σ ±dᵢ for every sign pattern (bit i set = dᵢ negated).
fn signed_sums(diffs: &[f64]) -> Vec<f64> {
    (0..1u32 << diffs.len())
        .map(|mask| {
            diffs
                .iter()
                .enumerate()
                .map(|(i, d)| if mask >> i & 1 == 1 { -d } else { *d })
                .sum()
        })
        .collect()
}

fn monte_carlo(diffs: &[f64], threshold: f64, resamples: usize, seed: u64) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut hits = 0u64;
    for _ in 0..resamples {
        let mut sum = 0.0;
        // One random bit per difference, 64 at a time.
        for chunk in diffs.chunks(64) {
            let bits: u64 = rng.random();
            for (i, d) in chunk.iter().enumerate() {
                sum += if bits >> i & 1 == 1 { -d } else { *d };
            }
        }
        hits += u64::from(sum.abs() >= threshold);
    }
    (1 + hits) as f64 / (1 + resamples) as f64
}

#[cfg(test)]
mod tests {
    use super::{DEFAULT_PERMUTATIONS, paired_permutation_test, task_level_test};

    fn assert_relative(actual: f64, expected: f64, tolerance: f64) {
        assert!(
            (actual - expected).abs() <= tolerance * expected.abs(),
            "{actual} != {expected}"
        );
    }

    /// Per-task differences of pass rates over three trials.
    const THIRDS: [f64; 12] = [
        1.0,
        2.0 / 3.0,
        1.0 / 3.0,
        1.0 / 3.0,
        0.0,
        -1.0 / 3.0,
        1.0,
        0.0,
        2.0 / 3.0,
        -2.0 / 3.0,
        1.0 / 3.0,
        0.0,
    ];

    #[test]
    fn exact_test_matches_scipy_permutation_test() {
        // import numpy as np; from scipy.stats import permutation_test
        // d = np.array([1, 2/3, 1/3, 1/3, 0, -1/3, 1, 0, 2/3, -2/3, 1/3, 0])
        // permutation_test((d,), np.mean, permutation_type="samples",
        //     n_resamples=np.inf).pvalue
        assert_relative(paired_permutation_test(&THIRDS, 0, 0), 0.125, 1e-12);
        // permutation_test((np.array([1, 1, 1, -1, .5]),), np.mean,
        //     permutation_type="samples", n_resamples=np.inf).pvalue
        assert_relative(
            paired_permutation_test(&[1.0, 1.0, 1.0, -1.0, 0.5], 0, 0),
            0.375,
            1e-12,
        );
        // permutation_test((np.full(10, 0.5),), np.mean,
        //     permutation_type="samples", n_resamples=np.inf).pvalue
        // (only the observed pattern and its mirror are as extreme: 2/2¹⁰)
        assert_relative(
            paired_permutation_test(&[0.5; 10], 0, 0),
            0.001953125,
            1e-12,
        );
    }

    #[test]
    fn exact_test_at_the_enumeration_limit() {
        // d = np.array([(-1)**(i % 3 == 0) * (1 + i % 4) / 4 for i in range(20)])
        // permutation_test((d,), np.mean, permutation_type="samples",
        //     n_resamples=np.inf).pvalue
        let diffs: Vec<f64> = (0..20)
            .map(|i| {
                let sign = if i % 3 == 0 { -1.0 } else { 1.0 };
                sign * f64::from(1 + i % 4) / 4.0
            })
            .collect();
        assert_relative(
            paired_permutation_test(&diffs, 0, 0),
            0.2941703796386719,
            1e-12,
        );
    }

    #[test]
    fn monte_carlo_test_is_close_to_exact_and_reproducible() {
        // 24 non-zero differences: sampled. Exact value by enumerating all
        // 2²⁴ patterns in numpy, as the two halves' 2¹² signed sums:
        // d = np.array([(-1)**(i % 4 == 0) * (1 + i % 3) / 3 for i in range(24)])
        // sums = lambda x: np.array(list(itertools.product([1, -1], repeat=12))) @ x
        // total = sums(d[:12])[:, None] + sums(d[12:])[None, :]
        // np.mean(np.abs(total) >= abs(d.sum()) - 1e-9 * np.abs(d).sum())
        let diffs: Vec<f64> = (0..24)
            .map(|i| {
                let sign = if i % 4 == 0 { -1.0 } else { 1.0 };
                sign * f64::from(1 + i % 3) / 3.0
            })
            .collect();
        let exact = 0.027925491333007812;
        let p = paired_permutation_test(&diffs, DEFAULT_PERMUTATIONS, 7);
        // Monte Carlo SE at p ≈ 0.028 with 1e5 samples is 0.00052.
        assert!((p - exact).abs() < 0.002, "{p} vs {exact}");
        assert_eq!(p, paired_permutation_test(&diffs, DEFAULT_PERMUTATIONS, 7));
        assert_ne!(p, paired_permutation_test(&diffs, DEFAULT_PERMUTATIONS, 8));
    }

    #[test]
    fn no_information_gives_one() {
        assert_eq!(paired_permutation_test(&[], 10, 0), 1.0);
        assert_eq!(paired_permutation_test(&[0.0, f64::NAN], 10, 0), 1.0);
        // A symmetric set of differences is as central as can be.
        assert_eq!(paired_permutation_test(&[0.5, -0.5], 10, 0), 1.0);
    }

    #[test]
    fn task_level_test_is_the_permutation_test() {
        let (name, p) = task_level_test(&THIRDS);
        assert_eq!(name, "paired_permutation");
        assert_eq!(p, paired_permutation_test(&THIRDS, 0, 0));
    }
}
