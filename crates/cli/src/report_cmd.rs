use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tack_analysis::cost::{CostReport, ModelPrice, Rates};
use tack_harness::PriceTable;
use tack_protocol::ModelSpec;

use crate::exit::{Classify, CommandResult, Failure};
use crate::out::{out, outln};

const AFTER_HELP: &str = "\
The report is static HTML with no scripts: index.html (each variant's pass rate with its interval,
tokens and cost per success, the task × variant matrix, the failed trials), a page per listed
failed trial, cost.html and cost.csv. A run killed before it stored its trials is recovered from
their journals first; a run still going is reported as far as it has stored.

Examples:
  tack report traces/<run-id>
  tack report <run-id> --out /tmp/report
  tack report <run-id> --cost     # tokens and dollars, in the terminal
  tack report s3://bucket/runs/<run-id> --json

Exit codes: 0 written (or printed), 2 no such run or a bad flag, 3 the traces could not be read
or the report could not be written.";

#[derive(Debug, Args)]
#[command(after_help = AFTER_HELP)]
pub struct ReportArgs {
    /// A run's trace directory, traces/<run-id>, its run id (looked up under --traces), or its URL
    /// (s3://BUCKET/PREFIX/<run-id>, gs://, az://, file://), fetched into tack's cache first.
    run: PathBuf,
    /// Where run ids are looked up (a directory, or a URL prefix).
    #[arg(long, default_value = "traces")]
    traces: PathBuf,
    /// Where to write the report [default: reports/<run-id>]. Its trial pages (trials/*.html) replace
    /// those of an earlier report there.
    #[arg(long, value_parser = crate::dir_arg::out_dir)]
    out: Option<PathBuf>,
    /// Print the analysis (per-variant figures, matrix, failed trials) as JSON instead of writing HTML.
    #[arg(long)]
    json: bool,
    /// Print the run's cost (tokens and dollars by variant × model × task, with the prices used) instead
    /// of writing HTML; with --json, as JSON. The HTML report has it too, as cost.html and cost.csv.
    #[arg(long)]
    cost: bool,
    /// List (and write a page for) at most this many failed trials per variant and task: the first
    /// by trial index. The index says how many were left out; `tack show` opens any of them.
    #[arg(long, value_name = "N", default_value_t = 5)]
    failed_per_task: usize,
    /// List at most this many failed trials in all, every variant and task's first failure before
    /// any one's second, the variants taking turns. Infra errors count among them.
    #[arg(long, value_name = "N", default_value_t = 500)]
    max_failed: usize,
}

pub async fn run(mut args: ReportArgs) -> CommandResult {
    args.run = crate::run_arg::resolve(&args.run, &args.traces).await?;
    crate::run_arg::recover_run(&args.run)?;
    if args.cost {
        let mut cost = tack_analysis::cost::cost_report(&args.run).or_fail(Failure::Internal)?;
        set_prices(&mut cost);
        if args.json {
            let json = serde_json::to_string_pretty(&cost).or_fail(Failure::Internal)?;
            outln!("{json}")?;
        } else {
            out!("{}", tack_report::text::cost(&cost))?;
        }
        return Ok(ExitCode::SUCCESS);
    }
    if args.json {
        let analysis = tack_analysis::analyze_run(&args.run).or_fail(Failure::Internal)?;
        outln!(
            "{}",
            serde_json::to_string_pretty(&analysis).or_fail(Failure::Internal)?
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    let manifest = tack_trace::Manifest::read(&args.run).or_fail(Failure::Usage)?;
    let out = args
        .out
        .unwrap_or_else(|| PathBuf::from("reports").join(&manifest.run_id));
    let options = tack_report::ReportOptions {
        failed: tack_analysis::FailedLimit {
            per_task: args.failed_per_task,
            total: args.max_failed,
        },
    };
    let files = tack_report::write_report_with_prices(&args.run, &out, &options, set_prices)
        .or_fail(Failure::Internal)?;
    outln!("report: {}", files.index.display())?;
    Ok(ExitCode::SUCCESS)
}

/// Lists the models' prices on the cost table, from the price table `tack
/// run` uses (the built-in one with `$TACK_PRICES` over it); the table is
/// left without prices, saying why, when that is not the table that priced
/// the run.
pub fn set_prices(cost: &mut CostReport) {
    match tack_harness::price_table() {
        Ok(table) => cost.set_prices(table.version(), |model| model_price(&table, model)),
        Err(error) => {
            cost.prices_note = Some(format!("the price table could not be read: {error}"))
        }
    }
}

fn model_price(table: &PriceTable, model: &str) -> ModelPrice {
    let found = ModelSpec::parse(model)
        .ok()
        .and_then(|spec| tack_harness::priced_as(table, &spec));
    ModelPrice {
        model: model.to_string(),
        entry: found.map(|(entry, _)| entry.to_string()),
        rates: found.map(|(_, p)| Rates {
            input: p.input,
            cached_input: p.cached_input.unwrap_or(p.input),
            cache_write: p.cache_write.unwrap_or(p.input),
            output: p.output,
            reasoning: p.reasoning.unwrap_or(p.output),
        }),
    }
}
