use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use crate::exit::{Classify, CommandResult, Failure};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run's trace directory, traces/<run-id>.
    run: PathBuf,
    /// Where to write the report [default: reports/<run-id>].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Print the analysis (per-variant figures, matrix, failed trials) as JSON instead of writing HTML.
    #[arg(long)]
    json: bool,
}

pub fn run(args: ReportArgs) -> CommandResult {
    if !args.run.join(tack_trace::Manifest::FILE_NAME).is_file() {
        return Err(crate::exit::CommandError {
            kind: Failure::Usage,
            error: anyhow::anyhow!(
                "{} is not a run's trace directory (no manifest.json); pass traces/<run-id>",
                args.run.display()
            ),
        });
    }
    if tack_trace::run_in_progress(&args.run) {
        eprintln!(
            "note: this run is still in progress; the report covers the trials finished so far"
        );
    }
    let recovered = tack_trace::recover_journals(&args.run).or_fail(Failure::Internal)?;
    if recovered > 0 {
        eprintln!("recovered {recovered} interrupted trial(s) from their journals");
    }
    if args.json {
        let analysis = tack_analysis::analyze_run(&args.run).or_fail(Failure::Internal)?;
        println!(
            "{}",
            serde_json::to_string_pretty(&analysis).or_fail(Failure::Internal)?
        );
        return Ok(ExitCode::SUCCESS);
    }
    let manifest = tack_trace::Manifest::read(&args.run).or_fail(Failure::Usage)?;
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from("reports").join(&manifest.run_id));
    let files = tack_report::write_report(&args.run, &out).or_fail(Failure::Internal)?;
    println!("report: {}", files.index.display());
    Ok(ExitCode::SUCCESS)
}
