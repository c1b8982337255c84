//! `tack-tracegen`: synthetic traces for measuring tack at scale. `gen-traces` writes a
//! synthetic run in the real trace layout, for `tack report` and DuckDB to
//! aggregate side by side (see `bench/report-scale`).

mod gen_traces;
mod synth;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "tack-tracegen",
    version,
    about = "Synthetic runs in the real trace layout, for benchmarks"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Write a synthetic run (manifest and Parquet parts, as `tack run` writes them) for
    /// benchmarks of the analysis.
    ///
    /// Trials run through realistic variants (priced, unpriced and simulated models, a step
    /// limit, a stdout-only result view, an approver, injected faults) on tasks of varied
    /// difficulty; about 1.3% of trials hit an infrastructure failure and are rerun, a few were
    /// cut off by a crash and resumed. Tool output varies in length (log-normal, cut at 16 KiB);
    /// system prompts, instructions and file contents repeat, and are stored once.
    ///
    /// Example: tack-tracegen gen-traces --trials 100000 --out /var/tmp/tack-bench/run-100k
    GenTraces {
        /// Planned trials (variant × task × trial index); reruns add attempts on top.
        #[arg(long)]
        trials: u64,
        /// Mean spans (model calls, tool calls, approvals, checks) per trial.
        #[arg(long, default_value_t = 20)]
        spans_per_trial: u32,
        /// The run directory to create; its name becomes the run id. Must not exist.
        #[arg(long)]
        out: PathBuf,
        /// Seed of every random choice: the same seed and sizes give the same run.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Number of variants.
        #[arg(long, default_value_t = 6)]
        variants: usize,
        /// Number of tasks [default: about 20 trials per variant and task, 10 to 500].
        #[arg(long)]
        tasks: Option<usize>,
        /// Threads that encode and compress the parts (nine tenths of the work) [default: one
        /// per core]. The run's content is the same for any number.
        #[arg(long)]
        writers: Option<usize>,
        /// Print what was written as JSON on stdout.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::GenTraces {
            trials,
            spans_per_trial,
            out,
            seed,
            variants,
            tasks,
            writers,
            json,
        } => {
            if trials == 0 || variants == 0 || tasks == Some(0) || writers == Some(0) {
                eprintln!("error: --trials, --variants, --tasks and --writers must be at least 1");
                return ExitCode::from(2);
            }
            if out.exists() {
                eprintln!(
                    "error: {} already exists; pass a new directory (the run is written there)",
                    out.display()
                );
                return ExitCode::from(2);
            }
            let options = gen_traces::GenOptions {
                trials,
                spans_per_trial,
                variants,
                tasks,
                seed,
                out,
                writers: writers
                    .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())),
            };
            // Long runs (a million trials take minutes) say how far they got.
            let started = std::time::Instant::now();
            let progress = |drawn: u64| {
                if trials >= 100_000 {
                    eprintln!(
                        "  {drawn} of {trials} trials drawn ({:.0}%), {:.0} s",
                        drawn as f64 * 100.0 / trials as f64,
                        started.elapsed().as_secs_f64()
                    );
                }
            };
            match gen_traces::gen_traces(&options, &progress) {
                Ok(summary) => {
                    eprintln!(
                        "wrote {} trials ({} attempts, {} spans; {} variants × {} tasks × {} trials) \
                         to {} in {:.1} s: {} files, {:.1} MB",
                        summary.trials,
                        summary.attempts,
                        summary.spans,
                        summary.variants,
                        summary.tasks,
                        summary.trials_per_task,
                        summary.run_dir.display(),
                        summary.seconds,
                        summary.files,
                        summary.bytes as f64 / 1e6
                    );
                    if json {
                        match serde_json::to_string(&summary) {
                            Ok(text) => println!("{text}"),
                            Err(error) => {
                                eprintln!("error: {error}");
                                return ExitCode::from(3);
                            }
                        }
                    }
                    ExitCode::SUCCESS
                }
                Err(error) => {
                    eprintln!("error: {error:#}");
                    ExitCode::from(3)
                }
            }
        }
    }
}
