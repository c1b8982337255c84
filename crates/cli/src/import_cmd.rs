//! `tack import`: other tools' evaluation logs as tack runs, so `tack
//! report`, `tack compare` and `tack query` read them. One subcommand per
//! source format.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Subcommand};

use crate::exit::{Classify, CommandError, CommandResult, Failure};
use crate::import_harbor::HarborArgs;
use crate::out::{err, errln, outln};

#[derive(Debug, Subcommand)]
pub enum ImportCommand {
    /// Harbor (Terminal-Bench) task directories: each becomes a task of a tack suite.
    Harbor(HarborArgs),
    /// Inspect AI logs (.eval or .json): one run per log, samples as tasks, epochs as trials.
    Inspect(InspectArgs),
    /// Harbor job directories: one run per job, its trials (rewards, trajectories, tokens) as tack trials.
    HarborJob(HarborJobArgs),
}

const HARBOR_JOB_HELP: &str = "\
Each job directory (result.json and a directory per trial, as `harbor run` writes it) becomes a
run OUT/<run-id>, with
  variant   <agent>-<model> (`/` as `-`): terminus-2-openai-gpt-5, oracle
  task      the task's name (its last `/` part); trial index by start time
            within variant × task
  checks    one per verifier reward: a reward of 1 or more passes
  spans     from agent/trajectory.json (ATIF) when the agent wrote one: each
            agent step a model call (model, tokens, cost) and its tool calls
            with their results; without one, the trial's token and cost totals
            as a single model call
  outcome   the rewards when the verifier ran (a timed-out agent is graded, as
            Harbor does); else the exception: an agent timeout is `limit`, an
            environment, Docker or build error `infra_error`, any other
            `harness_error`
The run id is <started>-harbor-<job dir>-<job id>. What Harbor kept that a tack run has no
place for (multi-step results, artifacts, images, reasoning, logprobs, subagent trajectories)
is counted by kind in the summary and --json (not_carried), never dropped silently. Harbor's
oracle agent is marked simulated: it runs the reference solution, not a model.

Examples:
  tack import harbor-job jobs/2026-12-01__10-00-00 --out traces
  tack compare traces/<tack-run> traces/<harbor-run> \\
      --variants sim-full,terminus-2-openai-gpt-5

Exit codes:
  0  every trial of every job was imported
  1  some trial directories were skipped (listed, with the reason),
     the rest imported
  2  a job could not be read (missing, not a Harbor job, already imported)
  3  a run could not be written";

#[derive(Debug, Args)]
#[command(after_help = HARBOR_JOB_HELP)]
pub struct HarborJobArgs {
    /// Harbor job directories.
    #[arg(required = true, value_name = "JOB_DIR")]
    jobs: Vec<PathBuf>,
    /// The traces directory: each job's run goes into DIR/<run-id>/.
    #[arg(long, value_name = "DIR", default_value = "traces")]
    out: PathBuf,
    /// Print one JSON object per job on stdout: the run, every trial, skipped trials, not_carried.
    #[arg(long)]
    json: bool,
}

const INSPECT_HELP: &str = "\
Each log (one Inspect task on one model) becomes a run OUT/<run-id>, with
  variant   the model, `/` as `-` (openai/gpt-4o → openai-gpt-4o)
  task      the sample id; trial index = epoch - 1
  spans     model events as model calls (tokens, cache tokens, provider, model,
            timing), tool events as tool calls (name, arguments, result, error),
            each scorer as a check
  messages  the conversation, stored once; model calls refer to the messages
            they sent
The run id is <created>-inspect-<task>-<eval id>: importing a log again finds the first
import (delete that run to redo it).

Scores become outcomes: a sample passes when every scorer passes; `C`, `yes`, `true` and numbers
>= 1.0 pass, `I`, `P` (partial), `N`, 0.5 and other numbers below 1 fail; a list or dict passes
when all its entries do. The raw score, answer and explanation are in each check's output
(tack show). A sample Inspect ended with an error is `harness_error`; one that hit a limit is
`limit`. Event kinds tack has no counterpart for (spans, state, store, logger, …) are counted,
not imported.

Examples:
  tack import inspect logs/*.eval --out traces
  tack report traces/<run-id>
  tack compare traces/<run-a> traces/<run-b> \\
      --variants openai-gpt-4o,anthropic-claude-sonnet-4-0

Exit codes:
  0  every sample of every log was imported
  1  some samples were skipped (listed, with the reason), the rest imported;
     or a log held no samples
  2  a log could not be read (missing, not an Inspect log, already imported)
  3  a run could not be written";

#[derive(Debug, Args)]
#[command(after_help = INSPECT_HELP)]
pub struct InspectArgs {
    /// Inspect AI log files: .eval archives or .json logs.
    #[arg(required = true, value_name = "LOG")]
    logs: Vec<PathBuf>,
    /// The traces directory: each log's run goes into DIR/<run-id>/.
    #[arg(long, value_name = "DIR", default_value = "traces")]
    out: PathBuf,
    /// Print one JSON object per log on stdout: the run, every trial, every skipped sample.
    #[arg(long)]
    json: bool,
}

pub fn run(command: ImportCommand) -> CommandResult {
    match command {
        ImportCommand::Harbor(args) => crate::import_harbor::run(args),
        ImportCommand::Inspect(args) => inspect(args),
        ImportCommand::HarborJob(args) => harbor_job(args),
    }
}

fn harbor_job(args: HarborJobArgs) -> CommandResult {
    let command_line: Vec<String> = std::env::args().collect();
    import_each(
        &args.jobs,
        args.json,
        ("harbor_job", "job"),
        |job| tack_import::harbor_job::import_job(job, &args.out, &command_line),
        |import| import.skipped.len(),
        tack_import::harbor_job_summary,
    )
}

fn inspect(args: InspectArgs) -> CommandResult {
    let command_line: Vec<String> = std::env::args().collect();
    import_each(
        &args.logs,
        args.json,
        ("inspect", "log"),
        |log| tack_import::inspect::import_log(log, &args.out, &command_line),
        // A log with no samples imported nothing: not a success.
        |import| import.skipped.len() + usize::from(import.no_samples),
        tack_import::inspect_summary,
    )
}

/// Imports each source in turn: its account on stderr (or a JSON line
/// `<kind>_imported` on stdout), an unreadable source said and counted
/// (`<kind>_import_failed`, naming it under `field`), a failure to write a
/// run the end. Exit 2 if a source was unreadable, 1 if one skipped some of
/// its parts, else 0.
fn import_each<T: serde::Serialize>(
    sources: &[PathBuf],
    json: bool,
    (kind, field): (&str, &str),
    import: impl Fn(&Path) -> Result<T, tack_import::ImportError>,
    skipped_in: impl Fn(&T) -> usize,
    summary: impl Fn(&T) -> String,
) -> CommandResult {
    let (mut unreadable, mut skipped) = (0, 0);
    for source in sources {
        match import(source) {
            Ok(done) => {
                skipped += skipped_in(&done);
                if json {
                    let mut value = serde_json::to_value(&done).or_fail(Failure::Internal)?;
                    value["type"] = format!("{kind}_imported").into();
                    outln!("{value}")?;
                } else {
                    err!("{}", summary(&done));
                }
            }
            Err(error) if error.is_input_error() => {
                unreadable += 1;
                errln!("error: {error}");
                if json {
                    let mut line = serde_json::json!({
                        "type": format!("{kind}_import_failed"), "error": error.to_string(),
                    });
                    line[field] = serde_json::json!(source);
                    outln!("{line}")?;
                }
            }
            Err(error) => {
                return Err(CommandError {
                    kind: Failure::Internal,
                    error: error.into(),
                });
            }
        }
    }
    Ok(if unreadable > 0 {
        Failure::Usage.into()
    } else if skipped > 0 {
        Failure::Found.into()
    } else {
        ExitCode::SUCCESS
    })
}
