//! `tack gate`: a regression verdict a CI job can act on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use tack_analysis::compare::{GateOptions, gate};

use crate::compare_cmd::{SidesArgs, load};
use crate::exit::{Classify, CommandError, CommandResult, Failure, usage};
use crate::out::{errln, outln};

const AFTER_HELP: &str = "\
Fails when the candidate's success rate is lower than the base's by more than --max-drop AND the
paired test finds the drop significant at --alpha (so noise alone does not fail a build), or when
a budget is exceeded. The test is exact McNemar on trial pairs (same task, same trial index): it
asks whether the candidate does worse on this suite's tasks. With several trials per task,
--per-task uses the task-level permutation test instead, which treats the tasks as a sample and asks
whether it would do worse on tasks like these; with few tasks it needs a large drop. A budget that
cannot be measured (an unpriced model) is a usage error, never a silent pass. Tasks that changed
between the runs, or that only one run ran, make it exit 2 unless --allow-drift: a candidate that
skipped tasks does not pass on the rest. So does a run that did not finish (interrupted, a merge
with --allow-partial, still running) or a task with no scored trial on one side, unless
--allow-partial: resume the run and gate again.

--quarantine FILE leaves out the tasks it lists, one name a line (`#` starts a comment): flaky tasks
whose identical configurations disagree, as `tack view`'s Tasks page exports them. The verdict
says how many were left out, and --json lists each under the comparison's `unpaired`.

Exit codes: 0 passed, 1 regression, 2 usage error or drift, 3 tack failed.

Examples:
  tack gate traces/<baseline-run> traces/<pr-run> --max-drop 0.02
  tack gate baseline pr --max-cost-increase 10% --json
  tack gate baseline pr --quarantine flaky-tasks.txt";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct GateArgs {
    #[command(flatten)]
    pub sides: SidesArgs,
    /// Largest tolerated drop in success rate: `0.02` or `2%` (two points).
    #[arg(long, default_value = "0.02", value_parser = crate::fraction_arg::parse_fraction)]
    pub max_drop: f64,
    /// Significance level of the paired test.
    #[arg(long, default_value_t = 0.05)]
    pub alpha: f64,
    /// Largest tolerated increase in cost per success: `10%` or `0.1`.
    #[arg(long, value_parser = crate::fraction_arg::parse_fraction)]
    pub max_cost_increase: Option<f64>,
    /// Largest tolerated increase in tokens per success: `10%` or `0.1`.
    #[arg(long, value_parser = crate::fraction_arg::parse_fraction)]
    pub max_tokens_increase: Option<f64>,
    /// Judge significance by the task-level test (tasks as the sample: "would it drop on tasks
    /// like these?") instead of McNemar on the trial pairs ("did it drop on these tasks?").
    #[arg(long)]
    pub per_task: bool,
    /// Leave out the tasks this file lists (one a line; `#` comments): a quarantine list.
    #[arg(long, value_name = "FILE")]
    pub quarantine: Option<PathBuf>,
    /// Judge what the runs have even when one did not finish or a task has no scored trial on one
    /// side (each is listed), instead of exiting 2.
    #[arg(long)]
    pub allow_partial: bool,
    /// Print the verdict and the comparison as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The tasks a quarantine file lists, each with the reason it is left out.
fn quarantined(file: &Path) -> Result<BTreeMap<String, String>, CommandError> {
    let text = std::fs::read_to_string(file).map_err(|error| {
        usage(format!(
            "cannot read the quarantine list {}: {error}; it lists one task name a line",
            file.display()
        ))
    })?;
    let reason = format!("quarantined by {}", file.display());
    Ok(text
        .lines()
        .map(|line| line.split('#').next().unwrap_or("").trim())
        .filter(|name| !name.is_empty())
        .map(|name| (name.to_string(), reason.clone()))
        .collect())
}

pub async fn run(args: GateArgs) -> CommandResult {
    if args.max_drop > 1.0 {
        return Err(usage(
            "--max-drop is a drop in success rate of at most 1 (100 points): 0.02 or 2% for two \
             points",
        ));
    }
    if !(args.alpha > 0.0 && args.alpha < 1.0) {
        return Err(usage("--alpha is between 0 and 1, e.g. 0.05"));
    }
    let left_out = match &args.quarantine {
        Some(file) => quarantined(file)?,
        None => BTreeMap::new(),
    };
    let loaded = load(&args.sides, None, left_out.clone()).await?;
    if !loaded.incomplete.is_empty() && !args.allow_partial {
        let listed: Vec<String> = (loaded.incomplete.iter())
            .map(|line| format!("  {}", tack_protocol::printable(line)))
            .collect();
        return Err(usage(format!(
            "the runs are not complete, so a pass would judge only part of the suite:\n{}\n\
             resume the run and gate again, or pass --allow-partial to judge what there is",
            listed.join("\n")
        )));
    }
    let options = GateOptions {
        max_drop: args.max_drop,
        alpha: args.alpha,
        max_cost_increase: args.max_cost_increase,
        max_tokens_increase: args.max_tokens_increase,
        per_task: args.per_task,
    };
    let verdict = gate(&loaded.comparison, &options).or_fail(Failure::Usage)?;
    if args.json {
        let json = serde_json::json!({
            "verdict": verdict,
            "comparison": loaded.comparison,
            "drift": loaded.drift,
            "incomplete": loaded.incomplete,
        });
        outln!(
            "{}",
            serde_json::to_string_pretty(&json).or_fail(Failure::Internal)?
        )?;
    } else {
        print_verdict(
            &verdict.line,
            &loaded,
            args.quarantine.as_deref(),
            &left_out,
        )?;
    }
    if let Some(file) = &args.quarantine {
        let unknown: Vec<&str> = left_out
            .keys()
            .filter(|name| !loaded.tasks.contains(*name))
            .map(String::as_str)
            .collect();
        if !unknown.is_empty() {
            errln!(
                "warning: {} lists {} neither run has (a typo?): {}",
                file.display(),
                tack_protocol::count(unknown.len(), "task"),
                unknown.join(", ")
            );
        }
    }
    Ok(if verdict.passed {
        ExitCode::SUCCESS
    } else {
        Failure::Found.into()
    })
}

/// The verdict for people: its line, what the runs lack or changed, and
/// the tasks a quarantine list left out (`left_out`, from `quarantine`).
fn print_verdict(
    line: &str,
    loaded: &crate::compare_cmd::Loaded,
    quarantine: Option<&Path>,
    left_out: &BTreeMap<String, String>,
) -> Result<(), CommandError> {
    // Variant and suite names of imported runs come from elsewhere.
    outln!("{}", tack_protocol::printable(line))?;
    if let Some(note) = tack_report::text::simulated_note(&loaded.comparison) {
        outln!("{note}")?;
    }
    for drift in &loaded.drift {
        outln!("drift: {}", tack_protocol::printable(drift))?;
    }
    for missing in &loaded.incomplete {
        outln!("incomplete: {}", tack_protocol::printable(missing))?;
    }
    if let Some(file) = quarantine {
        // The names neither run has are a warning, not left out.
        let names: Vec<&str> = (left_out.keys())
            .filter(|name| loaded.tasks.contains(*name))
            .map(String::as_str)
            .collect();
        outln!(
            "quarantined: {} left out ({}): {}",
            tack_protocol::count(names.len(), "task"),
            file.display(),
            match (names.is_empty(), left_out.len()) {
                (false, _) => names.join(", "),
                (true, 0) => "none listed".to_string(),
                (true, listed) => format!(
                    "the {} it lists {} of neither run",
                    tack_protocol::count(listed, "name"),
                    if listed == 1 {
                        "is a task"
                    } else {
                        "are tasks"
                    }
                ),
            }
        )?;
    }
    Ok(())
}
