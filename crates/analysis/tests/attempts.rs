//! Trials run more than once: only the final attempt counts, and a final
//! infra error is counted apart instead of scored.

// Tests may panic on failure; the workspace's unwrap ban is for library code.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fixture;

use std::collections::HashSet;
use tack_analysis::compare::{CompareOptions, Side, compare};
use tack_analysis::{
    AnalyzeOptions, FailedLimit, RunTables, VariantSummary, analyze, analyze_run, load_trial_trace,
};

fn run_with_attempts() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    fixture::write_run_with_attempts(dir.path());
    dir
}

fn variant<'a>(variants: &'a [VariantSummary], name: &str) -> &'a VariantSummary {
    variants.iter().find(|v| v.variant == name).unwrap()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn only_the_final_attempt_of_a_trial_counts() {
    let dir = run_with_attempts();
    let analysis = analyze_run(dir.path()).unwrap();
    let real = variant(&analysis.variants, "real");
    // Three trials before, plus the third attempt of add-test #1.
    assert_eq!((real.trials, real.passed), (4, 3));
    assert_eq!((real.infra_errors, real.retried_attempts), (0, 2));
    assert!(close(real.success_rate, 0.75));
    // The cut-off attempt's 1,000 tokens, $0.05, denied call and rate-limit
    // wait belong to an attempt that was run again.
    assert_eq!(real.total_tokens, 800 + 600);
    assert!(close(real.cost_usd.unwrap(), 0.06));
    assert_eq!((real.denied_calls, real.rate_limit_wait_ms), (0, 0));
    assert_eq!(real.outcomes.get("cancelled"), None);
    assert_eq!(real.outcomes.get("infra_error"), None);
    assert_eq!(real.outcomes.values().sum::<u64>(), 4);

    // Every (variant, task, trial index) once, by its final attempt.
    let mut seen = HashSet::new();
    for t in &analysis.trials {
        assert!(seen.insert((&t.variant, &t.task, t.trial_index)), "{t:?}");
    }
    let ids: Vec<&str> = analysis
        .trials
        .iter()
        .map(|t| t.trial_id.as_str())
        .collect();
    assert!(ids.contains(&"real--add-test--1--attempt2"));
    assert!(!ids.contains(&fixture::cut_off_trial_id().as_str()));
    assert!(!ids.contains(&"real--add-test--1--attempt1"));
    let rerun = analysis
        .trials
        .iter()
        .find(|t| t.trial_id == "real--add-test--1--attempt2")
        .unwrap();
    assert_eq!(rerun.trial_attempt, 2);
    assert_eq!(analysis.retried_attempts(), 3);
    assert_eq!(analysis.final_trials(), fixture::trials().len() as u64 + 2);

    // An earlier attempt still opens, with its own spans.
    let cut_off = load_trial_trace(dir.path(), &fixture::cut_off_trial_id()).unwrap();
    assert_eq!(cut_off.trial.outcome, "cancelled");
    assert_eq!(
        (cut_off.trial.trial_attempt, cut_off.trial.denied_calls),
        (0, 1)
    );
    assert_eq!(cut_off.trial.rate_limit_wait_ms, 700);
}

#[test]
fn a_final_infra_error_is_counted_apart_not_scored() {
    let dir = run_with_attempts();
    let analysis = analyze_run(dir.path()).unwrap();
    let chaos = variant(&analysis.variants, "chaos");
    assert_eq!(
        (chaos.trials, chaos.passed),
        (2, 1),
        "not in the denominator"
    );
    assert!(close(chaos.success_rate, 0.5));
    assert_eq!((chaos.infra_errors, chaos.retried_attempts), (1, 1));
    assert_eq!(chaos.total_tokens, 700, "its tokens are not the agent's");
    assert_eq!(
        chaos.outcomes.get("infra_error"),
        Some(&1),
        "outcomes list it"
    );
    assert_eq!(chaos.stop_reasons.get("provider_unavailable"), Some(&1));
    let cell = analysis
        .matrix
        .iter()
        .find(|row| row.task == "fix-bug")
        .unwrap()
        .cells
        .iter()
        .find(|c| c.variant == "chaos")
        .unwrap();
    assert_eq!((cell.trials, cell.passed, cell.infra_errors), (1, 0, 1));
    // Listed among the trials that did not pass, where the report shows
    // infra errors apart.
    let failed: Vec<&str> = analysis
        .failed_trials
        .iter()
        .map(|t| t.trial_id.as_str())
        .collect();
    assert!(failed.contains(&fixture::final_infra_error_id().as_str()));
    assert!(!failed.contains(&"chaos--fix-bug--1"), "an earlier attempt");
    assert_eq!(analysis.failed_total, failed.len() as u64);
}

#[test]
fn comparisons_pair_final_scored_attempts() {
    let dir = run_with_attempts();
    let tables = RunTables::open(dir.path()).unwrap();
    let side = |variant| Side::load(&tables, variant).unwrap();
    let options = CompareOptions {
        bootstrap_reps: 200,
        ..CompareOptions::default()
    };
    let comparison = compare(&side("real"), &side("chaos"), &options).unwrap();
    assert_eq!(comparison.candidate.infra_errors, 1);
    assert_eq!(comparison.base.infra_errors, 0);
    let fix_bug = comparison
        .tasks
        .iter()
        .find(|t| t.task == "fix-bug")
        .unwrap();
    assert_eq!(fix_bug.candidate_trials, 1, "the infra error is not paired");
    let add_test = comparison
        .tasks
        .iter()
        .find(|t| t.task == "add-test")
        .unwrap();
    assert_eq!(
        add_test.base_trial_ids,
        ["real--add-test--0", "real--add-test--1--attempt2"]
    );
}

#[test]
fn the_cost_table_counts_scored_trials_and_the_rest_apart() {
    let dir = run_with_attempts();
    let cost = tack_analysis::cost::cost_report(dir.path()).unwrap();
    let real = cost
        .by_variant
        .iter()
        .find(|r| r.variant == "real")
        .unwrap();
    assert_eq!((real.trials, real.successes), (4, 3));
    // The cut-off attempt's and the final infra error's answered calls.
    assert_eq!(cost.not_scored.trials, 4);
    assert_eq!(cost.not_scored.calls, 2);
    assert!(close(cost.not_scored.known_usd, 0.06));
    let scored_calls: u64 = cost.by_variant.iter().map(|r| r.calls).sum();
    assert_eq!(cost.total.calls, scored_calls);
}

#[test]
fn a_capped_listing_takes_every_tasks_first_failure_first_variants_in_turn() {
    let dir = tempfile::tempdir().unwrap();
    fixture::write_run(dir.path());
    let everything = analyze_run(dir.path()).unwrap();
    let tables = RunTables::open(dir.path()).unwrap();
    let options = AnalyzeOptions {
        every_trial: false,
        failed: Some(FailedLimit {
            per_task: 1,
            total: 3,
        }),
    };
    let capped = analyze(&tables, options).unwrap();
    assert!(capped.trials.is_empty());
    assert_eq!(capped.failed_total, everything.failed_total);
    assert_eq!(capped.failed_total, 4);
    let ids: Vec<&str> = capped
        .failed_trials
        .iter()
        .map(|t| t.trial_id.as_str())
        .collect();
    // Each variant's first failing task before baseline's second: that one
    // is left out, not chaos's failure. Listed in manifest order.
    assert_eq!(
        ids,
        [
            "baseline--fix-bug--1",
            "real--fix-bug--0",
            "chaos--fix-bug--0"
        ]
    );
    // The listed rows are the same as in the full analysis, span counts
    // included.
    for row in &capped.failed_trials {
        let full = everything
            .trials
            .iter()
            .find(|t| t.trial_id == row.trial_id)
            .unwrap();
        assert_eq!(row, full);
    }
    assert_eq!(capped.variants, everything.variants);
    assert_eq!(capped.matrix, everything.matrix);
}

#[test]
fn a_listing_capped_at_zero_lists_nothing_and_still_counts() {
    let dir = tempfile::tempdir().unwrap();
    fixture::write_run(dir.path());
    let tables = RunTables::open(dir.path()).unwrap();
    for (per_task, total) in [(0, 500), (5, 0)] {
        let options = AnalyzeOptions {
            every_trial: false,
            failed: Some(FailedLimit { per_task, total }),
        };
        let capped = analyze(&tables, options).unwrap();
        assert!(capped.failed_trials.is_empty(), "{per_task} / {total}");
        assert_eq!(capped.failed_total, 4);
    }
}

#[test]
fn runs_from_before_attempts_read_as_first_attempts() {
    let dir = tempfile::tempdir().unwrap();
    // Every file lacks trial_attempt and the other newer columns.
    fixture::write_run_as(dir.path(), |_| true);
    let analysis = analyze_run(dir.path()).unwrap();
    assert_eq!(analysis.retried_attempts(), 0);
    assert!(analysis.trials.iter().all(|t| t.trial_attempt == 0));
    assert_eq!(analysis.final_trials(), fixture::trials().len() as u64);
}

/// 300 planned trials of the fixture's variants and tasks with assorted
/// outcomes; every seventh run again after an infra error, every eleventh
/// ending in one.
fn many_trials() -> Vec<fixture::Trial> {
    use tack_protocol::{StopReason, TrialOutcome};
    let mut trials = Vec::new();
    for variant in ["baseline", "real", "chaos"] {
        for task in ["fix-bug", "add-test"] {
            for index in 0..50u32 {
                let (outcome, stop) = match index % 4 {
                    0 | 1 => (TrialOutcome::Passed, StopReason::Completed),
                    2 => (TrialOutcome::VerificationFailed, StopReason::Completed),
                    _ => (TrialOutcome::Limit, StopReason::StepLimit),
                };
                let attempt = |attempt, outcome, stop| fixture::Trial {
                    variant,
                    task,
                    index,
                    attempt,
                    outcome,
                    stop,
                    input_tokens: 100 + u64::from(index),
                    output_tokens: 10 + u64::from(attempt),
                    cost: (variant != "baseline").then_some(0.001 * f64::from(index + 1)),
                    error: None,
                    interventions: index % 3,
                    feedback_rounds: 0,
                    tampered: index % 13 == 0,
                };
                let infra = (TrialOutcome::InfraError, StopReason::ProviderUnavailable);
                if index % 11 == 5 {
                    trials.push(attempt(0, infra.0, infra.1));
                    trials.push(attempt(1, infra.0, infra.1));
                } else if index % 7 == 3 {
                    trials.push(attempt(0, infra.0, infra.1));
                    trials.push(attempt(1, outcome, stop));
                } else {
                    trials.push(attempt(0, outcome, stop));
                }
            }
        }
    }
    trials
}

#[test]
fn a_run_of_many_parts_adds_up_as_the_same_run_in_one() {
    let trials = many_trials();
    let many = tempfile::tempdir().unwrap();
    fixture::write_trials_with_calls(many.path(), &trials, false);
    let one = tempfile::tempdir().unwrap();
    fixture::write_trials_with_calls(one.path(), &trials, true);
    // The analysis reads 64 parts at a time: the many-part run takes several
    // batches, and some planned trial has its attempts in two of them.
    let mut names: Vec<String> = trials.iter().map(|t| t.id()).collect();
    names.sort();
    let split = names.windows(2).enumerate().any(|(i, pair)| {
        (i + 1) % 64 == 0 && pair[1].starts_with(&format!("{}--attempt", pair[0]))
    });
    assert!(
        split,
        "no rerun straddles a batch boundary: the test no longer tests it"
    );

    let limit = FailedLimit {
        per_task: 2,
        total: 9,
    };
    for options in [
        AnalyzeOptions::everything(),
        AnalyzeOptions {
            every_trial: false,
            failed: Some(limit),
        },
    ] {
        let a = analyze(&RunTables::open(many.path()).unwrap(), options).unwrap();
        let b = analyze(&RunTables::open(one.path()).unwrap(), options).unwrap();
        assert_eq!(a, b, "{options:?}");
    }
    let a = tack_analysis::cost::cost_report(many.path()).unwrap();
    let b = tack_analysis::cost::cost_report(one.path()).unwrap();
    assert_eq!(a.rows, b.rows);
    assert_eq!((&a.total, &a.not_scored), (&b.total, &b.not_scored));

    // And what it adds up to is what the trials say.
    let analysis = analyze_run(many.path()).unwrap();
    assert_eq!(analysis.final_trials(), 300);
    let reruns = trials.iter().filter(|t| t.attempt > 0).count() as u64;
    assert_eq!(analysis.retried_attempts(), reruns);
    let last = |t: &fixture::Trial| {
        !trials.iter().any(|u| {
            (u.variant, u.task, u.index) == (t.variant, t.task, t.index) && u.attempt > t.attempt
        })
    };
    let scored: Vec<&fixture::Trial> = trials
        .iter()
        .filter(|t| last(t) && t.outcome != tack_protocol::TrialOutcome::InfraError)
        .collect();
    for v in &analysis.variants {
        let mine = scored.iter().filter(|t| t.variant == v.variant);
        let passed = mine
            .clone()
            .filter(|t| t.outcome == tack_protocol::TrialOutcome::Passed)
            .count() as u64;
        assert_eq!(
            (v.trials, v.passed),
            (mine.count() as u64, passed),
            "{}",
            v.variant
        );
    }
    let failed = scored
        .iter()
        .filter(|t| t.outcome != tack_protocol::TrialOutcome::Passed)
        .count() as u64;
    let final_infra = trials
        .iter()
        .filter(|t| last(t) && t.outcome == tack_protocol::TrialOutcome::InfraError)
        .count() as u64;
    assert_eq!(analysis.failed_total, failed + final_infra);
}

#[test]
fn listed_trials_read_a_batch_at_a_time_are_the_trials_read_at_once() {
    let trials = many_trials();
    let run = tempfile::tempdir().unwrap();
    fixture::write_trials_with_calls(run.path(), &trials, false);
    // The fixture's trials sent no messages: a run's (empty) messages table.
    std::fs::create_dir(run.path().join("messages")).unwrap();
    let tables = RunTables::open(run.path()).unwrap();
    let listed = analyze(&tables, AnalyzeOptions::everything())
        .unwrap()
        .failed_trials;
    assert!(listed.len() > 20, "too few failed trials to batch");
    let at_once = tack_analysis::load_trial_traces(&tables, &listed).unwrap();
    assert!(
        at_once.iter().all(|t| !t.spans.is_empty()),
        "traces without spans"
    );

    let mut batches = Vec::new();
    let counted = tack_analysis::trial_traces_in_batches(&tables, &listed, 7, |traces| {
        batches.push(traces);
        Ok::<_, tack_analysis::AnalysisError>(())
    })
    .unwrap();
    assert!(
        batches.len() >= listed.len() / 7,
        "{} batches",
        batches.len()
    );
    assert!(batches.iter().all(|b| !b.is_empty() && b.len() <= 7));
    let mut batched: Vec<_> = batches.into_iter().flatten().collect();
    batched.sort_by(|a, b| a.trial.trial_id.cmp(&b.trial.trial_id));
    let mut expected = at_once.clone();
    expected.sort_by(|a, b| a.trial.trial_id.cmp(&b.trial.trial_id));
    assert_eq!(batched, expected);
    // The rows come back in the listing's order, counted from their spans.
    let rows: Vec<_> = at_once.into_iter().map(|t| t.trial).collect();
    assert_eq!(counted, rows);
}

/// A run interrupted and not resumed ends with trials cut off: they
/// measured nothing of the agent, so they are counted apart, as infra
/// errors are, not failed; a comparison does not pair them.
#[test]
fn a_final_attempt_cut_off_is_counted_apart_not_scored() {
    use tack_protocol::{StopReason, TrialOutcome};
    let trial = |index, outcome, stop| fixture::Trial {
        variant: "real",
        task: "fix-bug",
        index,
        attempt: 0,
        outcome,
        stop,
        input_tokens: 100,
        output_tokens: 10,
        cost: Some(0.01),
        error: None,
        interventions: 0,
        feedback_rounds: 0,
        tampered: false,
    };
    let trials = [
        trial(0, TrialOutcome::Passed, StopReason::Completed),
        trial(1, TrialOutcome::Cancelled, StopReason::Cancelled),
    ];
    let dir = tempfile::tempdir().unwrap();
    fixture::write_trials_with_calls(dir.path(), &trials, true);
    let analysis = analyze_run(dir.path()).unwrap();
    let real = variant(&analysis.variants, "real");
    assert_eq!((real.trials, real.passed, real.cancelled), (1, 1, 1));
    assert!(close(real.success_rate, 1.0));
    assert_eq!(real.infra_errors, 0);
    assert_eq!(analysis.final_trials(), 2);

    let tables = RunTables::open(dir.path()).unwrap();
    let side = Side::load(&tables, "real").unwrap();
    let comparison = compare(&side, &side, &CompareOptions::default()).unwrap();
    assert_eq!(comparison.base.trials, 1);
    assert_eq!(comparison.base.cancelled, 1);
}
