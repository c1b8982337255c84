//! A comparison (`tack compare`) for the terminal: both sides, the
//! difference and its tests, each task's flip, pass@k, the metrics' deltas,
//! the power, and what drifted between the runs.

use std::fmt::Write;

use tack_analysis::compare::{Comparison, Flip, MetricDelta};

/// The comparison `c`, and `drift` (what changed between the runs, one
/// line each).
pub fn comparison(c: &Comparison, drift: &[String]) -> String {
    let mut out = String::new();
    difference(&mut out, c);
    notes(&mut out, c);
    tasks(&mut out, c);
    pass_at_k(&mut out, c);
    out.push_str("\nmetric               base        cand        delta (95% CI)\n");
    for m in &c.metrics {
        let _ = writeln!(out, "{}", metric_line(m));
    }
    power(&mut out, c);
    for d in drift {
        let _ = writeln!(out, "drift: {d}");
    }
    // Task and variant names of imported runs come from elsewhere.
    tack_protocol::printable(&out).into_owned()
}

/// Both sides' success rates, and the difference with its tests.
fn difference(out: &mut String, c: &Comparison) {
    let side = |name: &str, s: &tack_analysis::compare::SideInfo| {
        format!(
            "{name:<10} {:<28} {:<16} {:>3}/{:<3} {:>5.1}%  [{:.0}–{:.0}%]\n",
            s.run_id,
            s.variant,
            s.passed,
            s.trials,
            s.success_rate * 100.0,
            s.ci_low * 100.0,
            s.ci_high * 100.0
        )
    };
    out.push_str(&side("base", &c.base));
    out.push_str(&side("candidate", &c.candidate));
    let s = &c.success;
    let interval = match (s.ci_low, s.ci_high) {
        (Some(low), Some(high)) => format!(
            ", 95% CI [{:+.1}, {:+.1}] (bootstrap over tasks)",
            low * 100.0,
            high * 100.0
        ),
        _ => String::new(),
    };
    let _ = writeln!(
        out,
        "difference {:+.1} points{interval}; {} p = {:.4} ({} pairs: {} base only, {} candidate only)",
        s.delta * 100.0,
        s.test,
        s.p_value,
        s.pairs,
        s.base_only,
        s.candidate_only
    );
    if let (Some(test), Some(p)) = (&s.task_test, s.task_p_value) {
        let _ = writeln!(
            out,
            "           tasks as the sample: {test} p = {p:.4} (over {})",
            tack_protocol::count(c.tasks.len(), "task")
        );
    }
}

/// What a reader must know before trusting the figures: re-run trials,
/// infra errors, a simulated model.
fn notes(out: &mut String, c: &Comparison) {
    for (name, s) in [("base", &c.base), ("candidate", &c.candidate)] {
        if s.rerun_trials > 0 {
            let without = s
                .success_rate_without_reruns
                .map(|r| format!("; without them {:.1}%", r * 100.0))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "note: {} of {name}'s {} were decided by a later attempt (run again){without}",
                s.rerun_trials,
                tack_protocol::count(s.trials, "trial")
            );
        }
        if s.infra_errors > 0 {
            let _ = writeln!(
                out,
                "note: {} ended in an infra error: not scored, not paired",
                tack_protocol::count(s.infra_errors, &format!("{name} trial"))
            );
        }
        if s.cancelled > 0 {
            let _ = writeln!(
                out,
                "note: {} {} cut off (cancelled: the run was interrupted): not scored, not paired",
                tack_protocol::count(s.cancelled, &format!("{name} trial")),
                if s.cancelled == 1 { "was" } else { "were" }
            );
        }
    }
    if let Some(note) = simulated_note(c) {
        out.push_str(&note);
        out.push('\n');
    }
}

/// Which side's results come from a built-in model, when one's do.
pub fn simulated_note(c: &Comparison) -> Option<String> {
    let whose = match (c.base.simulated, c.candidate.simulated) {
        (true, true) => "results",
        (true, false) => "the base's results",
        (false, true) => "the candidate's results",
        (false, false) => return None,
    };
    Some(format!(
        "note: {whose} from a simulated (built-in) model, not an LLM"
    ))
}

/// Each task's passes on both sides and its flip; the tasks not paired.
fn tasks(out: &mut String, c: &Comparison) {
    out.push_str("\ntask                           base   cand   flip\n");
    for t in &c.tasks {
        let marker = match t.flip {
            Flip::Fixed => "  +",
            Flip::Broken => "  -",
            Flip::Better => "  (+)",
            Flip::Worse => "  (-)",
            _ => "",
        };
        let _ = writeln!(
            out,
            "{:<30} {:>2}/{:<3} {:>2}/{:<3} {}{marker}",
            t.task,
            t.base_passed,
            t.base_trials,
            t.candidate_passed,
            t.candidate_trials,
            t.flip.as_str()
        );
    }
    for u in &c.unpaired {
        let _ = writeln!(out, "{:<30} not paired: {}", u.task, u.reason);
    }
}

fn pass_at_k(out: &mut String, c: &Comparison) {
    if c.pass_at_k.is_empty() {
        return;
    }
    out.push_str("\nk   pass@k base  cand    pass^k base  cand\n");
    for p in &c.pass_at_k {
        let _ = writeln!(
            out,
            "{:<3} {:>10.1}% {:>5.1}%  {:>10.1}% {:>5.1}%",
            p.k,
            p.base_pass_at_k * 100.0,
            p.candidate_pass_at_k * 100.0,
            p.base_pass_hat_k * 100.0,
            p.candidate_pass_hat_k * 100.0
        );
    }
}

/// The smallest difference these tasks and trials can detect, and what a
/// difference of the size asked for would need.
fn power(out: &mut String, c: &Comparison) {
    let p = &c.power;
    let plan = format!(
        "{} × {}",
        tack_protocol::count(p.tasks, "task"),
        tack_protocol::count(p.trials_per_task, "trial")
    );
    let _ = match p.min_detectable_effect {
        Some(effect) => writeln!(
            out,
            "\npower: {plan} detect a difference of {:.1} points with 80% power (alpha 0.05)",
            effect * 100.0
        ),
        None => writeln!(
            out,
            "\npower: {plan} cannot detect any difference with 80% power"
        ),
    };
    match (p.effect, p.trials_needed) {
        (Some(effect), Some(needed)) => {
            let _ = writeln!(
                out,
                "       {:.1} points, up or down, would need {needed} trials per task",
                effect * 100.0
            );
        }
        (Some(effect), None) => {
            let _ = writeln!(
                out,
                "       {:.1} points: no success rate is that far from the base's {:.1}% either way",
                effect * 100.0,
                c.base.success_rate * 100.0
            );
        }
        _ => {}
    }
}

fn metric_line(m: &MetricDelta) -> String {
    let value = |v: Option<f64>| match v {
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        // Three decimals, or three significant digits below 1 (a cost per
        // success of $0.00039 is not 0), none written that say nothing
        // (55.5, not 55.500).
        Some(v) => {
            let decimals = if v != 0.0 && v.abs() < 1.0 {
                (2 - v.abs().log10().floor() as i32).clamp(3, 9) as usize
            } else {
                3
            };
            let text = format!("{v:.decimals$}");
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        }
        None => "unknown".to_string(),
    };
    let interval = match (m.ci_low, m.ci_high) {
        (Some(low), Some(high)) => format!(" [{}, {}]", value(Some(low)), value(Some(high))),
        _ => String::new(),
    };
    let relative = m
        .relative
        .map(|r| format!(" ({:+.1}%)", r * 100.0))
        .unwrap_or_default();
    format!(
        "{:<20} {:>10}  {:>10}  {}{relative}{interval}  {}",
        m.name,
        value(m.base),
        value(m.candidate),
        value(m.delta),
        m.unit
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use tack_analysis::compare::{
        PassAtK, Power, SideInfo, SuccessDelta, TaskComparison, UnpairedTask,
    };

    fn side(run_id: &str, passed: u64) -> SideInfo {
        SideInfo {
            run_id: run_id.into(),
            variant: "v".into(),
            model: "sim".into(),
            simulated: true,
            trials: 10,
            infra_errors: u64::from(run_id == "cand"),
            cancelled: 0,
            passed,
            success_rate: passed as f64 / 10.0,
            ci_low: 0.1,
            ci_high: 0.9,
            rerun_trials: 0,
            success_rate_without_reruns: None,
        }
    }

    fn example() -> Comparison {
        Comparison {
            base: side("base", 5),
            candidate: side("cand", 8),
            tasks: vec![TaskComparison {
                task: "t1".into(),
                base_trials: 2,
                base_passed: 0,
                candidate_trials: 2,
                candidate_passed: 2,
                flip: Flip::Fixed,
                base_trial_ids: vec![],
                candidate_trial_ids: vec![],
            }],
            unpaired: vec![UnpairedTask {
                task: "t2".into(),
                reason: "changed".into(),
                missing_on: None,
            }],
            success: SuccessDelta {
                delta: 0.3,
                ci_low: Some(0.1),
                ci_high: Some(0.5),
                test: "mcnemar_exact".into(),
                p_value: 0.0312,
                task_test: None,
                task_p_value: None,
                base_only: 0,
                candidate_only: 3,
                pairs: 10,
            },
            pass_at_k: vec![PassAtK {
                k: 1,
                base_pass_at_k: 0.5,
                candidate_pass_at_k: 0.8,
                base_pass_hat_k: 0.5,
                candidate_pass_hat_k: 0.8,
            }],
            metrics: vec![MetricDelta {
                name: "tokens/success".into(),
                unit: "tokens".into(),
                base: Some(1200.0),
                candidate: Some(900.0),
                delta: Some(-300.0),
                relative: Some(-0.25),
                ci_low: None,
                ci_high: None,
                skipped_resamples: 0,
            }],
            power: Power {
                tasks: 5,
                trials_per_task: 2,
                min_detectable_effect: None,
                effect: None,
                trials_needed: None,
            },
        }
    }

    #[test]
    fn every_part_of_the_comparison_is_shown() {
        let text = comparison(&example(), &["task `t2` changed".to_string()]);
        for expected in [
            "difference +30.0 points, 95% CI [+10.0, +50.0] (bootstrap over tasks); \
             mcnemar_exact p = 0.0312 (10 pairs: 0 base only, 3 candidate only)",
            "note: 1 candidate trial ended in an infra error",
            "note: results from a simulated (built-in) model",
            "fixed  +",
            "t2                             not paired: changed",
            "tokens/success             1200         900  -300 (-25.0%)  tokens",
            "cannot detect any difference",
            "drift: task `t2` changed",
        ] {
            assert!(text.contains(expected), "{expected:?} in\n{text}");
        }
    }

    #[test]
    fn small_dollars_keep_three_significant_digits() {
        let line = metric_line(&MetricDelta {
            name: "cost per success".to_string(),
            unit: "USD".to_string(),
            base: Some(0.00039),
            candidate: Some(0.0065),
            delta: Some(0.00611),
            relative: Some(15.67),
            ci_low: Some(0.0),
            ci_high: Some(0.0123456),
            skipped_resamples: 0,
        });
        assert!(line.contains(" 0.00039 "), "{line}");
        assert!(line.contains(" 0.0065 "), "{line}");
        assert!(line.contains("[0, 0.0123]"), "{line}");
    }

    #[test]
    fn the_simulated_note_names_the_side() {
        let mut c = example();
        c.base.simulated = true;
        c.candidate.simulated = false;
        let note = simulated_note(&c).unwrap();
        assert!(note.starts_with("note: the base's results from"), "{note}");
        c.base.simulated = false;
        assert_eq!(simulated_note(&c), None);
    }
}
