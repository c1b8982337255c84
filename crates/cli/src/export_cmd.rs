//! `tack export`: a recorded run in another tool's format. One subcommand
//! per format.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand};
use tack_interop::InteropError;

use crate::exit::{Classify, CommandError, CommandResult, Failure};
use crate::out::outln;

#[derive(Debug, Subcommand)]
pub enum ExportCommand {
    /// Harbor's agent trajectories (ATIF): one JSON file per trial, as Harbor's own models read them.
    Atif(AtifArgs),
}

const ATIF_HELP: &str = "\
Writes OUT/<trial_id>.json for every trial of the run, every attempt, in the Agent Trajectory
Interchange Format (ATIF-v1.6) that Harbor's models (harbor.models.trajectories.Trajectory)
validate:
  session_id       the trial id
  agent            name `tack`, tack's version, the variant's model (variant under extra)
  steps            the conversation in order: system and user messages as steps of that source;
                   each assistant message an `agent` step with its tool calls, the model that
                   answered and that call's tokens and cost; the tool results as its observation
  final_metrics    the trial's tokens, cached tokens, cost, and the number of steps
  extra.tack       what ATIF has no field for: run, variant, task, trial index, attempt,
                   outcome, stop reason, every check (command, passed, output), duration, error
Each tool result's extra holds the call's exit code and error; an agent step's extra the model
calls that failed before the one that answered. Nothing recorded is left out.

Examples:
  tack export atif traces/<run-id>
  tack export atif <run-id> --out trajectories/ --json

Exit codes: 0 written, 2 no such run or OUT is not empty, 3 the traces could not be read or the
files not written.";

#[derive(Debug, Args)]
#[command(after_help = ATIF_HELP)]
pub struct AtifArgs {
    /// The run: traces/<run-id>, or just the run id (looked up under --traces).
    run: String,
    /// Where run ids are looked up.
    #[arg(long, default_value = "traces")]
    traces: PathBuf,
    /// The directory to write the trajectories to; it must not exist or be empty
    /// [default: exports/<run-id>/atif].
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Print one JSON object when done: {"type": "atif_exported", "out_dir", "trajectories"}.
    #[arg(long)]
    json: bool,
}

pub fn run(command: ExportCommand) -> CommandResult {
    match command {
        ExportCommand::Atif(args) => atif(args),
    }
}

fn atif(args: AtifArgs) -> CommandResult {
    let run_dir = crate::show_cmd::resolve_run(&args.run, &args.traces)?;
    let run_id = run_dir
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from("exports").join(run_id).join("atif"));
    // Progress on long exports, for a person watching.
    let show_progress = std::io::stderr().is_terminal() && !args.json;
    let progress = |done: usize, total: usize| {
        if show_progress {
            eprint!("\rtack export atif: {done}/{total} trials");
        }
    };
    let exported = tack_interop::atif::export(&run_dir, &out, progress).map_err(|error| {
        let kind = match error {
            InteropError::OutExists { .. } => Failure::Usage,
            _ => Failure::Internal,
        };
        CommandError {
            kind,
            error: error.into(),
        }
    })?;
    if show_progress {
        eprintln!();
    }
    if args.json {
        let mut value = serde_json::to_value(&exported).or_fail(Failure::Internal)?;
        value["type"] = "atif_exported".into();
        outln!("{value}")?;
    } else {
        outln!(
            "wrote {} ATIF trajectories to {}",
            exported.trajectories,
            exported.out_dir.display()
        )?;
    }
    Ok(ExitCode::SUCCESS)
}
