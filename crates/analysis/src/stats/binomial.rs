//! Exact binomial tests with p = ½: McNemar's test on discordant trial pairs
//! and the sign test on per-task differences are the same computation.

/// Two-sided exact McNemar test of "neither variant is better" on paired
/// trials, from the discordant pairs only: `b` pairs where the base passed
/// and the candidate failed, `c` where the base failed and the candidate
/// passed (concordant pairs carry no information about the difference).
///
/// Under the null each discordant pair goes either way with probability ½,
/// so min(b, c) ~ Binomial(b + c, ½) and the p-value is
/// min(1, 2·P(X ≤ min(b, c))) — the same as statsmodels
/// `mcnemar(table, exact=True)`. 1 when there are no discordant pairs.
///
/// Assumes the pairs are independent: one trial per task and side, or
/// trials of one task that do not share anything but the task. With several
/// trials per task, use the task-level test ([`super::task_level_test`]).
pub fn mcnemar_exact(b: u64, c: u64) -> f64 {
    two_sided_half(b.min(c), b.saturating_add(c))
}

/// Two-sided exact sign test on paired differences: counts the tasks where
/// the candidate did better (positive difference) and worse (negative), and
/// tests whether improvements and regressions are equally likely, as scipy
/// `binomtest(positives, positives + negatives, 0.5)`. Zero and non-finite
/// differences carry no sign and are dropped; 1 when none is left.
///
/// Assumes only that tasks are independent; it ignores how large each
/// difference is, so it has less power than the permutation test when the
/// differences vary in size.
pub fn sign_test(diffs: &[f64]) -> f64 {
    let (mut positive, mut negative) = (0u64, 0u64);
    for d in diffs.iter().filter(|d| d.is_finite()) {
        if *d > 0.0 {
            positive += 1;
        } else if *d < 0.0 {
            negative += 1;
        }
    }
    two_sided_half(positive.min(negative), positive + negative)
}

/// min(1, 2·P(X ≤ k)) for X ~ Binomial(n, ½) and k ≤ n/2. For p = ½ the
/// distribution is symmetric, so this is also the "as or less likely"
/// two-sided p-value scipy computes.
fn two_sided_half(k: u64, n: u64) -> f64 {
    if n == 0 {
        return 1.0;
    }
    (2.0 * lower_tail_half(k, n)).min(1.0)
}

/// P(X ≤ k) for X ~ Binomial(n, ½), k ≤ n/2, in log space so that large n
/// (thousands of pairs) neither overflows C(n, k) nor underflows 2⁻ⁿ before
/// the product is formed.
fn lower_tail_half(k: u64, n: u64) -> f64 {
    let (kf, nf) = (k as f64, n as f64);
    // ln C(n, k) = Σ_{j=1..k} ln((n − k + j) / j).
    let ln_choose: f64 = (1..=k)
        .map(|j| {
            let j = j as f64;
            ((nf - kf + j) / j).ln()
        })
        .sum();
    // Σ_{i ≤ k} C(n, i) / C(n, k), summed from the largest term down; the
    // terms fall geometrically once away from the centre.
    let (mut ratio, mut sum) = (1.0f64, 1.0f64);
    let mut i = kf;
    while i >= 1.0 {
        ratio *= i / (nf - i + 1.0);
        sum += ratio;
        if ratio < sum * 1e-17 {
            break;
        }
        i -= 1.0;
    }
    (ln_choose - nf * std::f64::consts::LN_2 + sum.ln()).exp()
}

#[cfg(test)]
mod tests {
    use super::{mcnemar_exact, sign_test};

    fn assert_relative(actual: f64, expected: f64) {
        assert!(
            (actual - expected).abs() <= 1e-10 * expected.abs(),
            "{actual} != {expected}"
        );
    }

    #[test]
    fn mcnemar_matches_statsmodels() {
        // from statsmodels.stats.contingency_tables import mcnemar; the
        // concordant cells (10, 5) do not enter the exact test.
        let cases = [
            // mcnemar([[10, 0], [0, 5]], exact=True).pvalue
            (0, 0, 1.0),
            // mcnemar([[10, 3], [12, 5]], exact=True).pvalue
            (3, 12, 0.03515625),
            // mcnemar([[10, 12], [3, 5]], exact=True).pvalue
            (12, 3, 0.03515625),
            // mcnemar([[10, 5], [5, 5]], exact=True).pvalue
            (5, 5, 1.0),
            // mcnemar([[10, 0], [1, 5]], exact=True).pvalue
            (0, 1, 1.0),
            // mcnemar([[10, 0], [6, 5]], exact=True).pvalue
            (0, 6, 0.03125),
            // mcnemar([[10, 1], [10, 5]], exact=True).pvalue
            (1, 10, 0.01171875),
            // mcnemar([[10, 7], [8, 5]], exact=True).pvalue
            (7, 8, 1.0),
            // mcnemar([[10, 25], [40, 5]], exact=True).pvalue
            (25, 40, 0.08168153394154003),
            // mcnemar([[10, 400], [500, 5]], exact=True).pvalue
            (400, 500, 0.0009564441369189373),
            // mcnemar([[10, 4000], [4100, 5]], exact=True).pvalue
            (4000, 4100, 0.2713310871439323),
            // mcnemar([[10, 0], [1000, 5]], exact=True).pvalue
            (0, 1000, 1.8665272370064378e-301),
        ];
        for (b, c, expected) in cases {
            assert_relative(mcnemar_exact(b, c), expected);
        }
        // mcnemar([[10, 3], [1200, 5]], exact=True).pvalue == 0.0 (underflow);
        // the true value, 2·C(1203, 3)·2⁻¹²⁰³, is below the smallest f64.
        assert!(mcnemar_exact(3, 1200) < 1e-300);
        assert_eq!(mcnemar_exact(u64::MAX, 0), 0.0);
    }

    #[test]
    fn sign_test_matches_scipy_binomtest() {
        // from scipy.stats import binomtest
        let third = 1.0 / 3.0;
        // 7 positive, 3 negative, 2 ties: binomtest(7, 10, 0.5).pvalue
        let diffs = [
            1.0,
            third,
            third,
            0.5,
            1.0,
            2.0 * third,
            0.25,
            -third,
            -1.0,
            -0.5,
            0.0,
            0.0,
        ];
        assert_relative(sign_test(&diffs), 0.34375);
        // binomtest(3, 10, 0.5).pvalue: the mirror image
        let mirrored: Vec<f64> = diffs.iter().map(|d| -d).collect();
        assert_relative(sign_test(&mirrored), 0.34375);
        // binomtest(10, 10, 0.5).pvalue
        assert_relative(sign_test(&[0.5; 10]), 0.001953125);
        // binomtest(0, 1, 0.5).pvalue
        assert_relative(sign_test(&[-1.0]), 1.0);
        // binomtest(13, 20, 0.5).pvalue
        let diffs: Vec<f64> = (0..20).map(|i| if i < 13 { 0.2 } else { -0.7 }).collect();
        assert_relative(sign_test(&diffs), 0.26317596435546875);
        // binomtest(60, 100, 0.5).pvalue
        let diffs: Vec<f64> = (0..100).map(|i| if i < 60 { 1.0 } else { -1.0 }).collect();
        assert_relative(sign_test(&diffs), 0.05688793364098089);
    }

    #[test]
    fn sign_test_without_signs_is_one() {
        assert_eq!(sign_test(&[]), 1.0);
        assert_eq!(sign_test(&[0.0, 0.0, f64::NAN]), 1.0);
    }
}
