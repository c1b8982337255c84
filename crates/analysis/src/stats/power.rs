//! Power of a comparison of success rates: how small a difference T tasks ×
//! m trials can be expected to detect, and how many trials a given
//! difference needs.
//!
//! The main functions use the normal approximation on Cohen's arcsine
//! scale, h = 2·asin√p₂ − 2·asin√p₁, for two proportions each estimated
//! from N = T·m trials: the test statistic is ĥ·√(N/2), so at two-sided
//! level α the power is Φ(|h|·√(N/2) − z₁₋α/₂) (plus the other tail's
//! Φ(−|h|·√(N/2) − z₁₋α/₂)). This is statsmodels' `NormalIndPower` with
//! `proportion_effectsize`, against which the tests check it. Its
//! assumptions, and which way each one errs:
//!
//! - Trials are independent and their success probability is the base rate
//!   (the candidate's, base + effect). In a suite tasks differ in
//!   difficulty, which makes the real variance smaller than p(1 − p) per
//!   trial: conservative.
//! - The two sides are independent, while `tack compare` pairs them by task
//!   and trial and tests the pairs; pairing removes the shared task
//!   difficulty: conservative. [`pairs_needed`] takes the pairing into
//!   account when the discordant share is known.
//! - The effect is the same on every task. An effect that varies between
//!   tasks adds variance that more trials per task do not remove, only more
//!   tasks: optimistic, and increasingly so as m grows.

use super::normal::{normal_cdf, normal_quantile};

/// The smallest difference in success rate that T = `tasks` tasks with
/// `trials_per_task` trials per side detect with probability `power` in a
/// two-sided test at level `alpha`, starting from `base_rate`: in whichever
/// direction the difference goes, a change at least this large is detected
/// with that power.
///
/// On the arcsine scale the detectable effect is the same both ways,
/// h = (z₁₋α/₂ + z_power)·√(2/N), but near 0 or 1 it maps to different
/// changes up and down; this returns the larger of the two, leaving out a
/// direction in which no rate in [0, 1] is far enough (e.g. up from 0.98
/// with few trials). The other tail's rejections are ignored, as in most
/// textbook formulas: they change h by less than 1e-5 relative for
/// alpha ≤ 0.05 and power ≥ 0.5. See the module docs for assumptions.
///
/// `None` when no change in either direction is detectable, when there are
/// no trials, or when `alpha` or `power` is not strictly between 0 and 1 or
/// `base_rate` is not in [0, 1].
pub fn min_detectable_effect(
    tasks: u64,
    trials_per_task: u64,
    base_rate: f64,
    alpha: f64,
    power: f64,
) -> Option<f64> {
    let z = critical_sum(alpha, power)?;
    let trials = tasks.checked_mul(trials_per_task).filter(|n| *n > 0)? as f64;
    if !(0.0..=1.0).contains(&base_rate) {
        return None;
    }
    let half_h = z * (2.0 / trials).sqrt() / 2.0;
    let theta = base_rate.sqrt().asin();
    let up = (theta + half_h <= std::f64::consts::FRAC_PI_2)
        .then(|| (theta + half_h).sin().powi(2) - base_rate);
    let down = (theta - half_h >= 0.0).then(|| base_rate - (theta - half_h).sin().powi(2));
    match (up, down) {
        (Some(u), Some(d)) => Some(u.max(d)),
        (one, other) => one.or(other),
    }
}

/// Trials per task, on each side, for T = `tasks` tasks to detect a change
/// of `effect` (candidate − base, negative for a regression) from
/// `base_rate` with probability `power` in a two-sided test at level
/// `alpha`: N = 2·((z₁₋α/₂ + z_power)/h)² trials per side, divided among
/// the tasks and rounded up, at least 1. See the module docs for
/// assumptions; with a task-varying effect, adding tasks helps more than
/// adding trials.
///
/// `None` when `effect` is 0 or not finite, `base_rate + effect` is outside
/// [0, 1], there are no tasks, or `alpha` or `power` is not strictly
/// between 0 and 1.
pub fn trials_needed(
    effect: f64,
    tasks: u64,
    base_rate: f64,
    alpha: f64,
    power: f64,
) -> Option<u64> {
    let z = critical_sum(alpha, power)?;
    let h = arcsine_effect(base_rate, effect)?;
    if tasks == 0 {
        return None;
    }
    let trials = 2.0 * (z / h).powi(2);
    Some(((trials / tasks as f64).ceil() as u64).max(1))
}

/// Probability that T = `tasks` tasks × `trials_per_task` trials per side
/// detect a change of `effect` from `base_rate` in a two-sided test at
/// level `alpha`, both tails counted (statsmodels `NormalIndPower().power`
/// with `proportion_effectsize`). See the module docs for assumptions.
/// `None` on the same inputs as [`trials_needed`], or without trials.
pub fn detection_power(
    effect: f64,
    tasks: u64,
    trials_per_task: u64,
    base_rate: f64,
    alpha: f64,
) -> Option<f64> {
    if !(alpha > 0.0 && alpha < 1.0) {
        return None;
    }
    let h = arcsine_effect(base_rate, effect)?;
    let trials = tasks.checked_mul(trials_per_task).filter(|n| *n > 0)? as f64;
    let shift = h * (trials / 2.0).sqrt();
    let z = normal_quantile(1.0 - alpha / 2.0);
    Some(normal_cdf(shift - z) + normal_cdf(-shift - z))
}

/// Pairs (task × trial-index pairs of a base and a candidate trial) needed
/// to detect `effect` with McNemar's test, by Connor's normal
/// approximation (R. J. Connor, "Sample size for testing differences in
/// proportions for the paired-sample design", Biometrics 43(1), 1987):
/// n = (z₁₋α/₂·√ψ + z_power·√(ψ − δ²))² / δ², rounded up, where δ =
/// `effect` is the difference in success rate and ψ = `discordant` the
/// share of pairs whose outcomes differ.
///
/// Pairing pays off through ψ: tasks that both variants always pass or
/// always fail are concordant and cost nothing. Take ψ from a previous
/// comparison ((b + c) / pairs); if the two sides' outcomes were
/// independent it would be p₁(1 − p₂) + p₂(1 − p₁), which gives about the
/// unpaired answer of [`trials_needed`]. Assumes independent pairs, so with
/// several trials per task it shares the caveat of the module docs about
/// effects that vary by task.
///
/// `None` when `effect` is 0 or not finite, |`effect`| > `discordant`,
/// `discordant` > 1, or `alpha` or `power` is not strictly between 0 and 1.
pub fn pairs_needed(effect: f64, discordant: f64, alpha: f64, power: f64) -> Option<u64> {
    if !(alpha > 0.0 && alpha < 1.0 && power > 0.0 && power < 1.0) {
        return None;
    }
    if !(effect.is_finite() && effect != 0.0 && effect.abs() <= discordant && discordant <= 1.0) {
        return None;
    }
    let z_alpha = normal_quantile(1.0 - alpha / 2.0);
    let z_power = normal_quantile(power);
    let root = z_alpha * discordant.sqrt() + z_power * (discordant - effect * effect).sqrt();
    Some((root * root / (effect * effect)).ceil() as u64)
}

/// z₁₋α/₂ + z_power, or `None` if either is not strictly between 0 and 1.
fn critical_sum(alpha: f64, power: f64) -> Option<f64> {
    (alpha > 0.0 && alpha < 1.0 && power > 0.0 && power < 1.0)
        .then(|| normal_quantile(1.0 - alpha / 2.0) + normal_quantile(power))
}

/// |h| for a change of `effect` from `base_rate`, `None` when there is no
/// such change within [0, 1].
fn arcsine_effect(base_rate: f64, effect: f64) -> Option<f64> {
    let candidate = base_rate + effect;
    let valid = effect.is_finite()
        && effect != 0.0
        && (0.0..=1.0).contains(&base_rate)
        && (0.0..=1.0).contains(&candidate);
    valid.then(|| 2.0 * (candidate.sqrt().asin() - base_rate.sqrt().asin()).abs())
}

#[cfg(test)]
mod tests {
    use super::{detection_power, min_detectable_effect, pairs_needed, trials_needed};

    // In the comments, from statsmodels.stats.power import NormalIndPower;
    // from statsmodels.stats.proportion import proportion_effectsize;
    // P = NormalIndPower(); and the minimum detectable effect is
    // h = P.solve_power(nobs1=T * m, alpha=a, power=pw, ratio=1.0)
    // turned into rates with th = math.asin(math.sqrt(p1)):
    // max(math.sin(th + h / 2) ** 2 - p1, p1 - math.sin(th - h / 2) ** 2),
    // leaving out a side whose angle leaves [0, π/2].

    #[test]
    fn min_detectable_effect_matches_statsmodels() {
        let cases = [
            // T=50, m=3, p1=0.5, a=0.05, pw=0.8: h = 0.32349879894309624
            ((50, 3, 0.5, 0.05, 0.8), 0.1589429061607287),
            // T=10, m=1, p1=0.7: h = 1.252905208173164, up leaves [0, 1]
            ((10, 1, 0.7, 0.05, 0.8), 0.5727845410497202),
            // T=100, m=5, p1=0.9: h = 0.17718769489108327; up 0.0466
            ((100, 5, 0.9, 0.05, 0.8), 0.059141285226992135),
            // T=20, m=3, p1=0.05: h = 0.5114964841399763; down leaves [0, 1]
            ((20, 3, 0.05, 0.05, 0.8), 0.16427445014782915),
            // T=30, m=2, p1=0.6, a=0.01, pw=0.9: h = 0.7042581695696667
            ((30, 2, 0.6, 0.01, 0.9), 0.3409843632305354),
            // T=2, m=1, p1=0.98: h = 2.8015817571418333; only a fall to
            // 0.0008 is detectable
            ((2, 1, 0.98, 0.05, 0.8), 0.9792101262626076),
        ];
        for ((tasks, trials, base, alpha, power), expected) in cases {
            let effect = min_detectable_effect(tasks, trials, base, alpha, power).unwrap();
            // statsmodels also counts the other tail; that moves h by <1e-5.
            assert!((effect - expected).abs() < 1e-5, "{effect} != {expected}");
        }
        // T=1, m=1, p1=0.5: h = 3.962032792346552 reaches neither 0 nor 1
        assert_eq!(min_detectable_effect(1, 1, 0.5, 0.05, 0.8), None);
    }

    #[test]
    fn trials_needed_matches_statsmodels() {
        let cases = [
            // P.solve_power(effect_size=proportion_effectsize(0.6, 0.5),
            //     alpha=0.05, power=0.8, ratio=1.0) = 387.17 trials; / 50 tasks
            ((0.1, 50, 0.5, 0.05, 0.8), 8),
            // proportion_effectsize(0.4, 0.5): 387.17 / 50
            ((-0.1, 50, 0.5, 0.05, 0.8), 8),
            // proportion_effectsize(0.95, 0.9): 423.73 / 100
            ((0.05, 100, 0.9, 0.05, 0.8), 5),
            // proportion_effectsize(0.5, 0.7): 92.70 / 10
            ((-0.2, 10, 0.7, 0.05, 0.8), 10),
            // proportion_effectsize(0.35, 0.05), alpha=0.01, power=0.9: 44.79 / 20
            ((0.3, 20, 0.05, 0.01, 0.9), 3),
            // proportion_effectsize(1.0, 0.5): 6.36 / 200, but at least one
            ((0.5, 200, 0.5, 0.05, 0.8), 1),
        ];
        for ((effect, tasks, base, alpha, power), expected) in cases {
            assert_eq!(
                trials_needed(effect, tasks, base, alpha, power),
                Some(expected),
                "{effect} from {base} over {tasks} tasks"
            );
        }
    }

    #[test]
    fn power_matches_statsmodels() {
        let cases = [
            // P.power(effect_size=proportion_effectsize(0.6, 0.5), nobs1=150,
            //     alpha=0.05, ratio=1.0)
            ((0.1, 50, 3, 0.5, 0.05), 0.4145403587270055),
            // proportion_effectsize(0.9, 0.7), nobs1=10
            ((0.2, 10, 1, 0.7, 0.05), 0.2108596197138793),
            // proportion_effectsize(0.85, 0.9), nobs1=500, alpha=0.01
            ((-0.05, 100, 5, 0.9, 0.01), 0.430887688180751),
            // proportion_effectsize(0.6, 0.5), nobs1=1
            ((0.1, 1, 1, 0.5, 0.05), 0.05232549849854368),
        ];
        for ((effect, tasks, trials, base, alpha), expected) in cases {
            let power = detection_power(effect, tasks, trials, base, alpha).unwrap();
            assert!((power - expected).abs() < 1e-12, "{power} != {expected}");
        }
    }

    #[test]
    fn power_functions_agree_with_each_other() {
        for (tasks, trials, base) in [(50, 3, 0.5), (20, 2, 0.8), (200, 1, 0.3)] {
            let effect = min_detectable_effect(tasks, trials, base, 0.05, 0.8).unwrap();
            let up = detection_power(effect, tasks, trials, base, 0.05);
            let down = detection_power(-effect, tasks, trials, base, 0.05);
            // At least 80% in each direction that has room for the change.
            for power in [up, down].into_iter().flatten() {
                assert!(power >= 0.8 - 1e-9, "{power}");
            }
            // A fall slightly larger than the effect needs no more trials.
            let needed = trials_needed(-effect * 1.01, tasks, base, 0.05, 0.8).unwrap();
            assert!(needed <= trials, "{needed} > {trials}");
        }
    }

    #[test]
    fn pairs_needed_matches_connor() {
        // Connor (1987): n = (za*sqrt(psi) + zb*sqrt(psi - d*d))**2 / (d*d),
        // computed with from scipy.stats import norm; za = norm.ppf(1 - a/2),
        // zb = norm.ppf(pw), then math.ceil(n).
        let cases = [
            // d=0.1, psi=0.2, a=0.05, pw=0.8: n = 154.59856956021102
            ((0.1, 0.2, 0.05, 0.8), 155),
            // d=-0.05, psi=0.3: n = 939.5042435637713
            ((-0.05, 0.3, 0.05, 0.8), 940),
            // d=0.2, psi=0.2, pw=0.9: n = 48.242968446290845
            ((0.2, 0.2, 0.05, 0.9), 49),
            // d=0.02, psi=0.1, a=0.01: n = 2916.8636722625665
            ((0.02, 0.1, 0.01, 0.8), 2917),
        ];
        for ((effect, discordant, alpha, power), expected) in cases {
            assert_eq!(
                pairs_needed(effect, discordant, alpha, power),
                Some(expected)
            );
        }
    }

    #[test]
    fn impossible_questions_have_no_answer() {
        assert_eq!(min_detectable_effect(0, 3, 0.5, 0.05, 0.8), None);
        assert_eq!(min_detectable_effect(10, 0, 0.5, 0.05, 0.8), None);
        assert_eq!(min_detectable_effect(10, 3, 1.5, 0.05, 0.8), None);
        assert_eq!(min_detectable_effect(10, 3, 0.5, 0.0, 0.8), None);
        assert_eq!(min_detectable_effect(10, 3, 0.5, 0.05, 1.0), None);
        assert_eq!(trials_needed(0.0, 10, 0.5, 0.05, 0.8), None);
        assert_eq!(trials_needed(0.6, 10, 0.5, 0.05, 0.8), None);
        assert_eq!(trials_needed(f64::NAN, 10, 0.5, 0.05, 0.8), None);
        assert_eq!(trials_needed(0.1, 0, 0.5, 0.05, 0.8), None);
        assert_eq!(detection_power(0.1, 10, 0, 0.5, 0.05), None);
        assert_eq!(pairs_needed(0.3, 0.2, 0.05, 0.8), None);
        assert_eq!(pairs_needed(0.0, 0.2, 0.05, 0.8), None);
        assert_eq!(pairs_needed(0.1, 1.2, 0.05, 0.8), None);
    }
}
