//! Statistics for analysing and comparing runs: the Wilson interval for one
//! variant's success rate, and for two variants paired by task the tests,
//! intervals, pass@k / pass^k and power calculations behind `tack compare`
//! and `tack gate`. Pure functions on counts and per-task values; no Polars.
//!
//! Which test when: with one trial per task and side, trial pairs are
//! independent and [`mcnemar_exact`] applies. With several trials per task
//! they are not (they share the task), so the unit is the task:
//! [`task_level_test`] (the sign-flip [`paired_permutation_test`] on
//! per-task differences in pass rate; [`sign_test`] is the alternative that
//! ignores magnitudes). Intervals for differences come from
//! [`cluster_bootstrap`], which resamples tasks for the same reason.

mod binomial;
mod bootstrap;
mod normal;
mod pass_k;
mod permutation;
mod power;

pub use binomial::{mcnemar_exact, sign_test};
pub use bootstrap::{
    CONFIDENCE, DEFAULT_BOOTSTRAP_REPS, Interval, PassCount, cluster_bootstrap,
    mean_over_successes, paired_bootstrap, pass_rate, success_rate_bootstrap, total_per_success,
    trial_mean,
};
pub use normal::{normal_cdf, normal_quantile};
pub use pass_k::{mean_pass_at_k, mean_pass_hat_k, pass_at_k, pass_hat_k};
pub use permutation::{
    DEFAULT_PERMUTATIONS, EXACT_PERMUTATION_LIMIT, TASK_LEVEL_TEST, TASK_LEVEL_TEST_SEED,
    paired_permutation_test, task_level_test,
};
pub use power::{detection_power, min_detectable_effect, pairs_needed, trials_needed};

/// z for a two-sided 95% interval, Φ⁻¹(0.975).
const Z_95: f64 = 1.959963984540054;

/// Wilson score interval (95%) for `successes` out of `trials`.
///
/// Wilson rather than the normal approximation because runs are small (a few
/// trials per task) and rates are often 0 or 1, where the normal interval
/// collapses to a point. With no trials there is nothing to estimate; we
/// return `(0.0, 0.0)` rather than NaN so tables and plots stay printable.
/// Successes above `trials` are clamped to `trials`.
pub fn wilson_interval(successes: u64, trials: u64) -> (f64, f64) {
    if trials == 0 {
        return (0.0, 0.0);
    }
    let n = trials as f64;
    let p = successes.min(trials) as f64 / n;
    let z2 = Z_95 * Z_95;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half_width = Z_95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    (
        (centre - half_width).clamp(0.0, 1.0),
        (centre + half_width).clamp(0.0, 1.0),
    )
}

#[cfg(test)]
mod tests {
    use super::wilson_interval;

    fn assert_close(actual: (f64, f64), expected: (f64, f64)) {
        assert!(
            (actual.0 - expected.0).abs() < 5e-4 && (actual.1 - expected.1).abs() < 5e-4,
            "{actual:?} != {expected:?}"
        );
    }

    #[test]
    fn matches_statsmodels() {
        // from statsmodels.stats.proportion import proportion_confint
        let cases = [
            // proportion_confint(8, 10, alpha=0.05, method="wilson")
            ((8, 10), (0.49016247153664183, 0.9433178485456247)),
            // proportion_confint(0, 10, alpha=0.05, method="wilson")
            ((0, 10), (0.0, 0.27753279986288926)),
            // proportion_confint(10, 10, alpha=0.05, method="wilson")
            ((10, 10), (0.7224672001371106, 1.0)),
            // proportion_confint(1, 2, alpha=0.05, method="wilson")
            ((1, 2), (0.09453120573423068, 0.9054687942657693)),
            // proportion_confint(50, 100, alpha=0.05, method="wilson")
            ((50, 100), (0.4038315303659956, 0.5961684696340044)),
            // proportion_confint(3, 7, alpha=0.05, method="wilson")
            ((3, 7), (0.15821985525146964, 0.7495416354723428)),
            // proportion_confint(17, 30, alpha=0.05, method="wilson")
            ((17, 30), (0.39197307000813597, 0.7262251442353348)),
            // proportion_confint(999, 1000, alpha=0.05, method="wilson")
            ((999, 1000), (0.9943574414020421, 0.9998234536293739)),
            // proportion_confint(1, 1, alpha=0.05, method="wilson")
            ((1, 1), (0.2065493143772374, 1.0)),
        ];
        for ((successes, trials), (low, high)) in cases {
            let (l, h) = wilson_interval(successes, trials);
            assert!(
                (l - low).abs() < 1e-12 && (h - high).abs() < 1e-12,
                "{successes}/{trials}: ({l}, {h}) != ({low}, {high})"
            );
        }
    }

    #[test]
    fn z_is_the_normal_quantile() {
        assert!((super::Z_95 - super::normal_quantile(0.975)).abs() < 1e-15);
    }

    #[test]
    fn known_values() {
        assert_close(wilson_interval(8, 10), (0.4902, 0.9433));
        assert_close(wilson_interval(0, 10), (0.0, 0.2775));
        assert_close(wilson_interval(10, 10), (0.7225, 1.0));
        assert_close(wilson_interval(1, 2), (0.0945, 0.9055));
        assert_close(wilson_interval(50, 100), (0.4038, 0.5962));
    }

    #[test]
    fn no_trials_gives_no_nan() {
        assert_eq!(wilson_interval(0, 0), (0.0, 0.0));
    }

    #[test]
    fn interval_stays_in_unit_range_and_contains_the_rate() {
        for n in 1..30u64 {
            for s in 0..=n {
                let (low, high) = wilson_interval(s, n);
                let p = s as f64 / n as f64;
                assert!((0.0..=1.0).contains(&low) && (0.0..=1.0).contains(&high));
                assert!(low <= p + 1e-12 && p <= high + 1e-12, "{s}/{n}");
            }
        }
        assert_eq!(wilson_interval(5, 3), wilson_interval(3, 3));
    }
}
