//! `tack replay`: one recorded trial's tool side again, the model's
//! answers the recorded ones, and how the replay came out against it.

use std::path::PathBuf;

use clap::Args;
use tack_analysis::compare::{ReplayDifference, replay_difference};
use tack_runner::RunResult;

use crate::exit::{Classify, CommandResult, Failure};
use crate::out::errln;
use crate::run_cmd::{Output, execute};

#[derive(Debug, Args)]
#[command(
    after_help = "The replay runs the trial's task in a fresh workspace with the same variant, answering every model \
call with the recorded answer in order, so the tool side (commands, edits, checks) runs again exactly as the model asked. \
It writes a new run (traces/<replay-run-id>/) and its report. If the tools now behave differently — the suite changed, \
or the environment did — the replay diverges, and it says where: the outcome then and now, and the first tool call \
whose result (status, exit code, output) is not the recorded one (in --json: `replay`).\n\n\
Exit codes: as `tack run`: 0 done, 2 the run or trial cannot be found or replayed, 3 tack failed (the run's traces do not read) or the \
replayed trial ended in harness_error, 130 interrupted."
)]
pub struct ReplayArgs {
    /// The recorded run: traces/<run-id>, or its run id (looked up under --traces).
    run: PathBuf,
    /// The trial to replay, e.g. sim-full--median-even--1 (see the run's report).
    trial: String,
    /// Where the replay's traces go, and where a run id given as RUN is looked up.
    #[arg(long, default_value = "traces")]
    traces: PathBuf,
    /// Where its report goes.
    #[arg(long, default_value = "reports", value_parser = crate::dir_arg::out_dir)]
    reports: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub async fn run(args: ReplayArgs) -> CommandResult {
    let run = crate::run_arg::resolve(&args.run, &args.traces).await?;
    let (mut plan, warning) = tack_runner::replay_plan(
        &run,
        &args.trial,
        args.traces.clone(),
        std::env::args().collect(),
    )
    .map_err(|error| {
        // A run whose tables do not read is tack's failure, as for every
        // command that reads runs; the rest (no such trial, a suite that
        // no longer loads) is the user's to fix.
        use tack_trace::TraceError as T;
        let kind = match &error {
            tack_runner::RunError::Trace(
                T::ParquetRead { .. } | T::Read { .. } | T::Table { .. },
            ) => Failure::Internal,
            _ => Failure::Usage,
        };
        crate::exit::CommandError {
            kind,
            error: error.into(),
        }
    })?;
    if let Some(warning) = warning {
        errln!("warning: {warning}");
    }
    plan.hidden.push(args.reports.clone());
    plan.interactive = Some(crate::terminal_approver::shared());
    plan.validate().or_fail(Failure::Usage)?;
    let output = Output {
        reports: args.reports,
        no_report: false,
        json: args.json,
        upload: None,
        otlp: None,
        replay_of: Some(ReplayOf {
            run,
            trial: args.trial,
        }),
    };
    execute(plan, &output).await
}

/// The recorded trial a replay re-runs.
#[derive(Debug)]
pub struct ReplayOf {
    run: PathBuf,
    trial: String,
}

/// How the replay's one trial differs from the recorded one; `None`, with a
/// warning, when either trace cannot be read back (the run itself stands).
pub fn difference(of: &ReplayOf, result: &RunResult) -> Option<ReplayDifference> {
    let replayed = result.trials.first()?;
    let traces = tack_analysis::load_trial_trace(&of.run, &of.trial).and_then(|original| {
        let replay = tack_analysis::load_trial_trace(&result.run_dir, &replayed.trial_id)?;
        Ok(replay_difference(&original, &replay))
    });
    match traces {
        Ok(difference) => Some(difference),
        Err(error) => {
            errln!(
                "warning: cannot compare the replay with {}: {error}",
                of.trial
            );
            None
        }
    }
}

/// One line: the outcome then and now, and the first tool result that
/// differs.
pub fn describe(replay: &ReplayDifference) -> String {
    let ReplayDifference {
        original_trial,
        original_outcome,
        replay_outcome,
        first_different_call,
    } = replay;
    let outcome = if original_outcome == replay_outcome {
        format!("{original_trial} {replay_outcome} then and now")
    } else {
        format!("{original_trial} {original_outcome} then, {replay_outcome} now")
    };
    match first_different_call {
        None => format!("replay: {outcome}; every tool result as recorded"),
        Some(call) => format!(
            "replay: {outcome}; tool call {} ({}) is the first to differ, {}",
            call.number, call.tool, call.differs_in
        ),
    }
}
