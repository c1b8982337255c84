//! The table `tack run` ends with: per variant, passed trials, success rate
//! with its Wilson 95% interval, and tokens per success.

use tack_protocol::{TrialOutcome, printable};

/// What the summary needs of one trial (its final attempt).
#[derive(Debug, Clone, Copy)]
pub struct SummaryTrial<'a> {
    pub variant: &'a str,
    pub task: &'a str,
    pub trial_index: u32,
    pub outcome: TrialOutcome,
    /// Every token the trial's model calls used.
    pub tokens: u64,
    pub error: Option<&'a str>,
}

/// One variant's line of the run summary.
#[derive(Default)]
struct Tally {
    passed: u64,
    scored: u64,
    tokens: u64,
    infra_errors: u64,
    cancelled: u64,
}

/// The summary table, a blank line before and after, variants in the order
/// their first trial comes (the suite's order, in which trials are
/// planned). A final infra error or a trial cut off is not scored, as in
/// the report, and is counted apart. A variant with no scored trial has no
/// rate to show: a dash, not 0%.
pub fn run_summary<'a>(trials: impl IntoIterator<Item = SummaryTrial<'a>>) -> String {
    let mut per_variant: Vec<(&str, Tally)> = Vec::new();
    for trial in trials {
        let at = match per_variant.iter().position(|(v, _)| *v == trial.variant) {
            Some(at) => at,
            None => {
                per_variant.push((trial.variant, Tally::default()));
                per_variant.len() - 1
            }
        };
        let entry = &mut per_variant[at].1;
        match trial.outcome {
            TrialOutcome::InfraError => {
                entry.infra_errors += 1;
                continue;
            }
            TrialOutcome::Cancelled => {
                entry.cancelled += 1;
                continue;
            }
            _ => {}
        }
        entry.scored += 1;
        entry.tokens += trial.tokens;
        if trial.outcome == TrialOutcome::Passed {
            entry.passed += 1;
        }
    }
    // As wide as the longest name, so a long one does not push the
    // columns out of line.
    let width = (per_variant.iter())
        .map(|(variant, _)| printable(variant).chars().count())
        .max()
        .unwrap_or(0)
        .max(16);
    let mut out = format!(
        "\n{:<width$} {:>8} {:>7} {:>15} {:>15}\n",
        "variant", "passed", "rate", "95% CI", "tokens/success"
    );
    for (variant, tally) in per_variant {
        let Tally {
            passed,
            scored: total,
            tokens,
            infra_errors: infra,
            cancelled,
        } = tally;
        let (rate, interval) = match total {
            0 => ("—".to_string(), "—".to_string()),
            _ => {
                let (low, high) = tack_analysis::wilson_interval(passed, total);
                (
                    format!("{:.1}%", 100.0 * passed as f64 / total as f64),
                    format!("{:.0}–{:.0}%", 100.0 * low, 100.0 * high),
                )
            }
        };
        // Rounded as the report and `tack compare` round it, not cut.
        let per_success = match passed {
            0 => "—".to_string(),
            n => format!("{:.0}", tokens as f64 / n as f64),
        };
        let mut apart = Vec::new();
        if infra > 0 {
            apart.push(tack_protocol::count(infra, "infra error"));
        }
        if cancelled > 0 {
            apart.push(format!("{cancelled} cut off"));
        }
        let apart = match apart.is_empty() {
            true => String::new(),
            false => format!("  +{}, not scored", apart.join(", ")),
        };
        out.push_str(&format!(
            "{:<width$} {:>8} {rate:>7} {interval:>15} {per_success:>15}{apart}\n",
            printable(variant),
            format!("{passed}/{total}")
        ));
    }
    out.push('\n');
    out
}

/// The trials that ended in `harness_error`, each with its error, and what
/// to do; `None` when there are none. Such a trial says nothing about the
/// model (tack could not set up or drive the agent), so a run with one is
/// not a success, whatever the other trials scored.
pub fn harness_errors(trials: &[SummaryTrial<'_>]) -> Option<String> {
    let (listed, count) = listing(trials, TrialOutcome::HarnessError, usize::MAX)?;
    Some(format!(
        "error: {count} of {} ended in harness_error (tack could not set up or drive the agent; \
         this says nothing about the model):\n{listed}they are in the traces and the report; fix \
         what the errors name and run again (a suite that loads cleanly should not cause this: \
         please report it)\n",
        tack_protocol::count(trials.len(), "trial")
    ))
}

/// Trials listed by [`infra_errors`] before the rest are counted.
const INFRA_LISTED: usize = 10;

/// The trials that ended in `infra_error` (their environment failed: a
/// setup command, an image build, the provider through every retry), each
/// with its error, and how to run them again; `None` when there are none.
/// They are not scored, so the run's figures stand without them, but a
/// user must see why, not only a count.
pub fn infra_errors(trials: &[SummaryTrial<'_>], run_dir: &str) -> Option<String> {
    let (listed, count) = listing(trials, TrialOutcome::InfraError, INFRA_LISTED)?;
    let more = count.saturating_sub(INFRA_LISTED);
    let more = match more {
        0 => String::new(),
        n => format!("  and {n} more (tack show {run_dir} lists every trial)\n"),
    };
    Some(format!(
        "warning: {count} of {} ended in infra_error (the environment failed, not the agent; \
         not scored):\n{listed}{more}once the cause is fixed: tack run --resume {run_dir} \
         --rerun infra_error\n",
        tack_protocol::count(trials.len(), "trial")
    ))
}

/// The trials that ended in `outcome`, at most `most` of them one a line
/// with its error, and how many there are; `None` when there are none.
fn listing(
    trials: &[SummaryTrial<'_>],
    outcome: TrialOutcome,
    most: usize,
) -> Option<(String, usize)> {
    let ended: Vec<_> = trials.iter().filter(|t| t.outcome == outcome).collect();
    if ended.is_empty() {
        return None;
    }
    let mut out = String::new();
    let mut above = None;
    for trial in ended.iter().take(most) {
        let error = trial.error.unwrap_or("no error was recorded");
        // One cause (an image that did not build) ends every trial of its
        // task alike: its log once, not once a trial.
        let said = if above == Some(error) {
            "the same as above".to_string()
        } else {
            printable(error).replace('\n', "\n    ")
        };
        above = Some(error);
        out.push_str(&format!(
            "  variant {}, task {}, trial {}: {said}\n",
            printable(trial.variant),
            printable(trial.task),
            trial.trial_index,
        ));
    }
    Some((out, ended.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(variant: &str, outcome: TrialOutcome, tokens: u64) -> SummaryTrial<'_> {
        SummaryTrial {
            variant,
            task: "t",
            trial_index: 0,
            outcome,
            tokens,
            error: Some("could not start\nthe sandbox"),
        }
    }

    #[test]
    fn harness_errors_are_listed_with_their_error() {
        assert_eq!(harness_errors(&[trial("v", TrialOutcome::Passed, 1)]), None);
        let text = harness_errors(&[
            trial("v", TrialOutcome::Passed, 1),
            trial("w", TrialOutcome::HarnessError, 1),
        ])
        .unwrap_or_default();
        assert!(
            text.starts_with("error: 1 of 2 trials ended in harness_error"),
            "{text}"
        );
        assert!(
            text.contains("\n  variant w, task t, trial 0: could not start\n    the sandbox\n"),
            "{text}"
        );
    }

    #[test]
    fn a_long_variant_name_keeps_the_columns_in_line() {
        let long = "a-variant-with-a-long-name";
        let text = run_summary([
            trial("sim", TrialOutcome::Passed, 100),
            trial(long, TrialOutcome::Passed, 100),
        ]);
        let lines: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
        let rate_at = |line: &str| line.find("100.0%").or_else(|| line.find("rate"));
        assert_eq!(rate_at(lines[1]), rate_at(lines[2]), "{text}");
        assert!(
            lines[0].starts_with(&format!("{:<26} ", "variant")),
            "{text}"
        );
    }

    #[test]
    fn infra_errors_are_listed_up_to_ten_then_counted() {
        let many: Vec<SummaryTrial> = (0..12)
            .map(|_| trial("v", TrialOutcome::InfraError, 0))
            .collect();
        let text = infra_errors(&many, "traces/r").unwrap_or_default();
        assert!(
            text.starts_with("warning: 12 of 12 trials ended in infra_error"),
            "{text}"
        );
        assert_eq!(text.matches("  variant v, task t").count(), 10, "{text}");
        // The error once, then "the same as above".
        assert_eq!(text.matches("could not start").count(), 1, "{text}");
        assert_eq!(text.matches(": the same as above\n").count(), 9, "{text}");
        assert!(text.contains("and 2 more (tack show traces/r"), "{text}");
        assert!(
            text.contains("tack run --resume traces/r --rerun infra_error"),
            "{text}"
        );
        assert_eq!(infra_errors(&many[..0], "traces/r"), None);
    }

    #[test]
    fn variants_in_order_infra_errors_apart() {
        let text = run_summary([
            trial("sim", TrialOutcome::Passed, 100),
            trial("oracle", TrialOutcome::Passed, 10),
            trial("sim", TrialOutcome::VerificationFailed, 300),
            trial("sim", TrialOutcome::InfraError, 999),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "");
        assert!(lines[1].starts_with("variant "), "{text}");
        assert!(lines[2].starts_with("sim "), "{text}");
        assert!(
            lines[2].contains("1/2") && lines[2].contains("50.0%"),
            "{text}"
        );
        // 400 tokens over the scored trials, 1 success.
        assert!(
            lines[2].contains(" 400  +1 infra error, not scored"),
            "{text}"
        );
        assert!(
            lines[3].starts_with("oracle ") && lines[3].contains("1/1"),
            "{text}"
        );
        assert_eq!(lines.len(), 5, "{text}");
    }

    #[test]
    fn trials_cut_off_are_apart_and_no_scored_trial_has_no_rate() {
        let text = run_summary([
            trial("v", TrialOutcome::Passed, 10),
            trial("v", TrialOutcome::Cancelled, 10),
            trial("w", TrialOutcome::InfraError, 10),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[2].contains("1/1") && lines[2].contains("100.0%"),
            "{text}"
        );
        assert!(lines[2].ends_with("+1 cut off, not scored"), "{text}");
        assert!(
            lines[3].contains("0/0") && !lines[3].contains('%'),
            "{text}"
        );
        assert!(lines[3].ends_with("+1 infra error, not scored"), "{text}");
    }

    #[test]
    fn tokens_per_success_are_rounded_not_cut() {
        let text = run_summary([
            trial("v", TrialOutcome::Passed, 1811),
            trial("v", TrialOutcome::Passed, 1812),
        ]);
        assert!(
            text.lines().nth(2).unwrap_or("").ends_with(" 1812"),
            "{text}"
        );
    }

    #[test]
    fn no_success_has_no_tokens_per_success() {
        let text = run_summary([trial("v", TrialOutcome::Limit, 50)]);
        assert!(text.contains("0/1") && text.contains('—'), "{text}");
    }
}
