//! pass@k (at least one of k trials passes) and pass^k (all k pass),
//! estimated per task from n trials of which c passed, then averaged over
//! tasks.
//!
//! Both treat the n trials of a task as exchangeable draws and estimate the
//! probability for k trials drawn from them without replacement, which is
//! unbiased for the same quantity over fresh trials. `k` must be at most
//! `n`; a larger `k` is taken as `n` (all trials drawn) rather than
//! extrapolated. `c` above `n` is taken as `n`.

/// pass@k: the probability that at least one of k trials passes, by the
/// unbiased estimator of Chen et al. 2021 ("Evaluating Large Language
/// Models Trained on Code", §2.1): 1 − C(n − c, k) / C(n, k), computed as
/// 1 − Π_{i = n−c+1..n} (1 − k/i) so no binomial coefficient is formed.
/// 1 when n − c < k (every draw of k contains a pass), 0 when c = 0.
pub fn pass_at_k(n: u64, c: u64, k: u64) -> f64 {
    let c = c.min(n);
    let k = k.min(n);
    if n - c < k {
        return 1.0;
    }
    let kf = k as f64;
    1.0 - (n - c + 1..=n)
        .map(|i| 1.0 - kf / i as f64)
        .product::<f64>()
}

/// pass^k as in τ-bench (Yao et al. 2024): the probability that k trials
/// drawn without replacement from the n all pass, C(c, k) / C(n, k),
/// computed as Π_{i = 0..k} (c − i) / (n − i). It measures consistency:
/// it falls with k unless the task always passes. 1 when k = 0, 0 when
/// k > c.
pub fn pass_hat_k(n: u64, c: u64, k: u64) -> f64 {
    let c = c.min(n);
    let k = k.min(n);
    if k > c {
        return 0.0;
    }
    (0..k).map(|i| (c - i) as f64 / (n - i) as f64).product()
}

/// [`pass_at_k`] averaged over tasks, each given as (trials, passed), every
/// task weighing the same whatever its number of trials. `None` without
/// tasks.
pub fn mean_pass_at_k(tasks: &[(u64, u64)], k: u64) -> Option<f64> {
    mean(tasks.iter().map(|&(n, c)| pass_at_k(n, c, k)), tasks.len())
}

/// [`pass_hat_k`] averaged over tasks, as [`mean_pass_at_k`].
pub fn mean_pass_hat_k(tasks: &[(u64, u64)], k: u64) -> Option<f64> {
    mean(tasks.iter().map(|&(n, c)| pass_hat_k(n, c, k)), tasks.len())
}

fn mean(values: impl Iterator<Item = f64>, count: usize) -> Option<f64> {
    (count > 0).then(|| values.sum::<f64>() / count as f64)
}

#[cfg(test)]
mod tests {
    use super::{mean_pass_at_k, mean_pass_hat_k, pass_at_k, pass_hat_k};

    fn assert_close(actual: f64, expected: f64) {
        assert!((actual - expected).abs() <= 1e-12, "{actual} != {expected}");
    }

    #[test]
    fn pass_at_k_matches_chen_et_al() {
        // Each value: float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))
        // in Python; Chen et al.'s numpy estimator (Fig. 3 of the paper,
        // `1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1))`, 1.0 when
        // n - c < k) agrees to 2e-16.
        let cases = [
            ((10, 3, 1), 0.3),
            ((10, 3, 5), 0.9166666666666666),
            ((200, 13, 1), 0.065),
            ((200, 13, 10), 0.49755111473060615),
            ((200, 13, 100), 0.9999194971988055),
            ((100, 50, 10), 0.9994065803274141),
            ((3, 1, 2), 0.6666666666666666),
            ((5, 0, 3), 0.0),
            ((5, 5, 3), 1.0),
            ((3, 1, 3), 1.0),
            ((20, 2, 19), 1.0),
        ];
        for ((n, c, k), expected) in cases {
            assert_close(pass_at_k(n, c, k), expected);
        }
    }

    #[test]
    fn pass_hat_k_matches_the_binomial_ratio() {
        // Each value: float(Fraction(math.comb(c, k), math.comb(n, k)))
        let cases = [
            ((10, 3, 1), 0.3),
            ((10, 3, 2), 0.06666666666666667),
            ((10, 3, 4), 0.0),
            ((200, 150, 10), 0.05209362940404299),
            ((100, 90, 50), 0.0005934196725858287),
            ((5, 5, 5), 1.0),
            ((3, 2, 2), 0.3333333333333333),
            ((3, 1, 2), 0.0),
        ];
        for ((n, c, k), expected) in cases {
            assert_close(pass_hat_k(n, c, k), expected);
        }
    }

    #[test]
    fn k_of_one_is_the_pass_rate_and_edges_are_clamped() {
        for n in 1..12 {
            for c in 0..=n {
                let rate = c as f64 / n as f64;
                assert_close(pass_at_k(n, c, 1), rate);
                assert_close(pass_hat_k(n, c, 1), rate);
            }
        }
        assert_eq!(pass_at_k(3, 1, 0), 0.0);
        assert_eq!(pass_hat_k(3, 1, 0), 1.0);
        // k beyond n means drawing all n trials.
        assert_eq!(pass_at_k(3, 1, 5), pass_at_k(3, 1, 3));
        assert_eq!(pass_hat_k(3, 3, 5), 1.0);
        assert_eq!(pass_at_k(3, 0, 5), 0.0);
        // c beyond n is n.
        assert_eq!(pass_hat_k(3, 7, 2), 1.0);
        assert_eq!(pass_at_k(0, 0, 1), 0.0);
    }

    #[test]
    fn means_weigh_every_task_the_same() {
        let tasks = [(3, 0), (3, 1), (3, 3), (5, 2)];
        // sum(1 - Fraction(comb(n - c, 2), comb(n, 2)) for n, c in tasks) / 4
        assert_close(
            mean_pass_at_k(&tasks, 2).unwrap_or(f64::NAN),
            0.5916666666666667,
        );
        // sum(Fraction(comb(c, 2), comb(n, 2)) for n, c in tasks) / 4
        assert_close(mean_pass_hat_k(&tasks, 2).unwrap_or(f64::NAN), 0.275);
        assert_eq!(mean_pass_at_k(&[], 1), None);
        assert_eq!(mean_pass_hat_k(&[], 1), None);
    }
}
