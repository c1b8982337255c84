use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tack_analysis::cost::{CostReport, CostRow, ModelPrice, Rates};
use tack_protocol::ModelSpec;
use tack_providers::PriceTable;

use crate::exit::{Classify, CommandResult, Failure};

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A run's trace directory, traces/<run-id>, or its URL (s3://BUCKET/PREFIX/<run-id>, gs://,
    /// az://, file://), fetched into tack's cache first.
    run: PathBuf,
    /// Where to write the report [default: reports/<run-id>].
    #[arg(long)]
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
    args.run = crate::store_arg::local_run(&args.run).await?;
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
    if args.cost {
        let mut cost = tack_analysis::cost::cost_report(&args.run).or_fail(Failure::Internal)?;
        set_prices(&mut cost);
        if args.json {
            let json = serde_json::to_string_pretty(&cost).or_fail(Failure::Internal)?;
            println!("{json}");
        } else {
            print!("{}", cost_text(&cost));
        }
        return Ok(ExitCode::SUCCESS);
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
    let options = tack_report::ReportOptions {
        failed: tack_analysis::FailedLimit {
            per_task: args.failed_per_task,
            total: args.max_failed,
        },
    };
    let files = tack_report::write_report_with_prices(&args.run, &out, &options, set_prices)
        .or_fail(Failure::Internal)?;
    println!("report: {}", files.index.display());
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
    // Priced as the harness prices calls: by the provider's model id, under
    // any chaos(...) wrapper.
    let spec = ModelSpec::parse(model).ok();
    let found = spec
        .as_ref()
        .and_then(|spec| spec.provider())
        .and_then(|(_, id)| table.lookup(id));
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

/// The cost table for the terminal: per variant, then per task.
fn cost_text(cost: &CostReport) -> String {
    let headers: Vec<String> = [
        "variant",
        "model",
        "task",
        "trials",
        "passed",
        "calls",
        "input",
        "cached",
        "cache-write",
        "output",
        "reasoning",
        "dollars",
        "per success",
        "unknown-cost calls",
    ]
    .iter()
    .map(|h| h.to_string())
    .collect();
    let right: Vec<bool> = (0..headers.len()).map(|i| i >= 3).collect();
    let row = |r: &CostRow| {
        vec![
            r.variant.clone(),
            r.model.clone(),
            r.task.clone().unwrap_or_else(|| "(all)".to_string()),
            r.trials.to_string(),
            r.successes.to_string(),
            r.calls.to_string(),
            r.input_tokens.to_string(),
            r.cache_read_tokens.to_string(),
            r.cache_write_tokens.to_string(),
            r.output_tokens.to_string(),
            r.reasoning_tokens.to_string(),
            r.usd_text(),
            r.per_success_text(),
            r.unknown_cost_calls.to_string(),
        ]
    };
    // Variant totals, the run's, a blank line, then variant × task.
    let mut rows: Vec<Vec<String>> = cost.by_variant.iter().map(row).collect();
    rows.push(row(&cost.total));
    rows.push(Vec::new());
    rows.extend(cost.rows.iter().map(row));
    let mut out = format!(
        "cost of run {} (price table {})\n\n",
        cost.run_id,
        cost.price_table.as_deref().unwrap_or("not recorded")
    );
    out.push_str(&crate::query_cmd::format_table(&headers, &rows, &right));
    out.push('\n');
    out.push_str(&cost_notes(cost));
    out
}

/// What the table's labels mean, and the prices used.
fn cost_notes(cost: &CostReport) -> String {
    let mut out = String::new();
    if !cost.simulated.is_empty() {
        out.push_str(&format!(
            "simulated (built-in models, not an LLM; never priced): {}\n",
            cost.simulated.join(", ")
        ));
    }
    if cost.any_unknown() {
        out.push_str(&format!(
            "{} model calls have no price: their cost is unknown, not 0. \"≥ $x\" is a lower bound \
             (what the priced calls cost); \"unknown\" means no call was priced.\n",
            cost.total.unknown_cost_calls
        ));
    }
    out.push_str("input tokens include cached ones; output tokens include reasoning ones.\n");
    for p in &cost.prices {
        match &p.rates {
            Some(r) => out.push_str(&format!(
                "price of {} (entry {}), $ per million tokens: input {}, cache read {}, cache write {}, output {}, reasoning {}\n",
                p.model,
                p.entry.as_deref().unwrap_or(""),
                r.input, r.cached_input, r.cache_write, r.output, r.reasoning
            )),
            None => {
                let builtin = ModelSpec::parse(&p.model).is_ok_and(|m| m.is_simulated());
                let why = if builtin {
                    "built-in model, never priced"
                } else {
                    "not in the price table"
                };
                out.push_str(&format!("price of {}: none ({why}), cost unknown\n", p.model));
            }
        }
    }
    if let Some(note) = &cost.prices_note {
        out.push_str(&format!("prices not listed: {note}\n"));
    }
    out
}
