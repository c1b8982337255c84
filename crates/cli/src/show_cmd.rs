//! `tack show RUN TRIAL`: one trial's trajectory in the terminal.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use tack_analysis::AnalysisError;
use tack_report::text;
use tack_trace::Manifest;

use crate::exit::{Classify, CommandError, CommandResult, Failure};
use crate::out::{out, outln};

#[derive(Debug, Args)]
#[command(
    after_help = "Prints a header (variant, task, model, outcome, stop reason, steps, tokens, cost), then, in \
order, every model call (step, tokens, finish reason) with the assistant's text, every tool call (arguments \
shortened, the result the model was shown, exit code, error kind, sandbox denials), every approval, and the \
checks (command, pass or fail, the tail of their output).\n\n\
Colour is used only when stdout is a terminal and NO_COLOR is unset; otherwise the text is plain. \
--json prints the trial's row, spans and messages as one JSON object instead.\n\n\
Exit codes: 0 shown, 2 no such run or trial (the error lists some trial ids), 3 the traces could not be read."
)]
pub struct ShowArgs {
    /// The run: traces/<run-id>, the run id (looked up under --traces), or its URL
    /// (s3://BUCKET/PREFIX/<run-id>, fetched into tack's cache).
    run: String,
    /// The trial id, e.g. sim-full--median-even--1 (left out: some of the run's are listed).
    trial: Option<String>,
    /// Where run ids are looked up.
    #[arg(long, default_value = "traces")]
    traces: PathBuf,
    /// Print the trial as JSON (row, spans with their sandbox denials, messages).
    #[arg(long)]
    json: bool,
    /// Print tool results, assistant text and check output whole instead of shortened.
    #[arg(long)]
    full: bool,
}

pub async fn run(args: ShowArgs) -> CommandResult {
    let run_dir = crate::run_arg::resolve(Path::new(&args.run), &args.traces).await?;
    crate::run_arg::recover_run(&run_dir)?;
    let Some(trial) = args.trial.as_deref() else {
        return Err(tack_trace::trial_not_named(&run_dir)).or_fail(Failure::Usage);
    };
    let trace = match tack_analysis::load_trial_trace(&run_dir, trial) {
        Ok(trace) => trace,
        Err(AnalysisError::TrialNotFound { .. } | AnalysisError::InvalidTrialId { .. }) => {
            return Err(tack_trace::no_trial(&run_dir, trial)).or_fail(Failure::Usage);
        }
        Err(error) => return Err(error).or_fail(Failure::Internal),
    };
    let denials =
        tack_analysis::query::sandbox_denials(&run_dir, trial).or_fail(Failure::Internal)?;
    let manifest = Manifest::read(&run_dir).or_fail(Failure::Internal)?;
    let later = later_attempts(&run_dir, &trace.trial)?;
    if args.json {
        let mut json =
            text::trial_json(&manifest.run_id, &trace, &denials).or_fail(Failure::Internal)?;
        if let Some(object) = json.as_object_mut() {
            object.insert("later_attempts".to_string(), serde_json::json!(later));
        }
        outln!(
            "{}",
            serde_json::to_string_pretty(&json).or_fail(Failure::Internal)?
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let simulated = manifest
        .variants
        .iter()
        .any(|v| v.name == trace.trial.variant && v.simulated);
    let style = text::TrialStyle {
        color: std::io::stdout().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        full: args.full,
    };
    out!(
        "{}",
        text::trial(&manifest.run_id, &trace, simulated, &denials, style)
    )?;
    if let Some(latest) = later.last() {
        outln!(
            "\nnote: this trial ran again; its latest attempt, the one reports count, is {latest} \
             (tack show {} {latest})",
            args.run
        )?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The ids of the attempts after `trial` at the same planned trial (its
/// reruns), oldest first: showing an attempt that was run again says so.
fn later_attempts(
    run_dir: &Path,
    trial: &tack_analysis::TrialRow,
) -> Result<Vec<String>, CommandError> {
    let stored = tack_trace::stored_trial_ids(run_dir).or_fail(Failure::Internal)?;
    // A received run's attempt may be any number: no overflow at the top.
    Ok((trial.trial_attempt.checked_add(1).into_iter())
        .flat_map(|next| next..=u32::MAX)
        .map(|attempt| {
            tack_protocol::trial_id(&trial.variant, &trial.task, trial.trial_index, attempt)
        })
        .take_while(|id| stored.contains(id))
        .collect())
}
