/// z for a two-sided 95% interval.
const Z_95: f64 = 1.959964;

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
