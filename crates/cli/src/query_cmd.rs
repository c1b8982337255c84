//! `tack query "SQL" [RUN...]`: SQL over the trace tables, printed as a
//! table, CSV or JSON.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use tack_analysis::query::{Cell, QueryError, QueryResult, QueryTables};

use crate::exit::{CommandError, CommandResult, Failure};
use crate::show_cmd::{resolve_run, run_ids};

#[derive(Debug, Args)]
#[command(
    after_help = "Tables: trials (one row per trial), spans (one per model call, tool call, approval and \
check), messages (one per conversation message); every table has run_id and trial_id. Their columns are \
the Parquet files' (see the README's Traces section); a failed query lists them. The SQL is Polars' dialect \
(SELECT, WHERE, GROUP BY, JOIN, ORDER BY, LIMIT, CTEs, most scalar and aggregate functions).\n\n\
Examples:\n  tack query \"select variant, count(*) from trials group by 1\"\n  \
tack query \"select variant, avg(steps) from trials where outcome = 'passed' group by variant\" traces/<run-id>\n  \
tack query \"select gen_ai_tool_name, count(*) from spans where kind = 'tool_call' group by 1 order by 2 desc\" --csv\n\n\
Exit codes: 0 done, 2 a bad query (the message says why and lists the tables) or no run to query, \
3 the traces could not be read."
)]
pub struct QueryArgs {
    /// One SQL statement over the tables trials, spans and messages.
    sql: String,
    /// The runs to query: traces/<run-id> or run ids [default: every run under --traces].
    runs: Vec<String>,
    /// Where runs (and run ids) are looked up.
    #[arg(long, default_value = "traces")]
    traces: PathBuf,
    /// Print CSV (a header line, then one line per row).
    #[arg(long, conflicts_with = "json")]
    csv: bool,
    /// Print a JSON array with one object per row.
    #[arg(long)]
    json: bool,
}

pub fn run(args: QueryArgs) -> CommandResult {
    let run_dirs = if args.runs.is_empty() {
        let ids = run_ids(&args.traces);
        if ids.is_empty() {
            return Err(usage(format!(
                "there are no runs under {} to query; name runs (traces/<run-id>) or pass --traces DIR",
                args.traces.display()
            )));
        }
        ids.iter().map(|id| args.traces.join(id)).collect()
    } else {
        args.runs
            .iter()
            .map(|run| resolve_run(run, &args.traces))
            .collect::<Result<Vec<_>, _>>()?
    };
    let result = QueryTables::open(&run_dirs)
        .and_then(|mut tables| tables.run(&args.sql))
        .map_err(|error| {
            let kind = if error.is_user_error() {
                Failure::Usage
            } else {
                Failure::Internal
            };
            query_failure(kind, error)
        })?;
    let text = if args.json {
        json(&result)
    } else if args.csv {
        csv(&result)
    } else {
        table(&result)
    };
    print!("{text}");
    Ok(ExitCode::SUCCESS)
}

fn usage(message: String) -> CommandError {
    CommandError {
        kind: Failure::Usage,
        error: anyhow::anyhow!(message),
    }
}

fn query_failure(kind: Failure, error: QueryError) -> CommandError {
    let error = match error {
        QueryError::Sql { .. } => anyhow::anyhow!("the query failed: {error}"),
        other => anyhow::Error::new(other),
    };
    CommandError { kind, error }
}

/// The value as CSV and JSON show it: whole, numbers unrounded.
fn plain(cell: &Cell) -> String {
    match cell {
        Cell::Null => String::new(),
        Cell::Bool(b) => b.to_string(),
        Cell::Int(v) => v.to_string(),
        Cell::UInt(v) => v.to_string(),
        Cell::Float(v) => v.to_string(),
        Cell::Text(s) => s.clone(),
    }
}

fn csv(result: &QueryResult) -> String {
    let line = |fields: Vec<String>| {
        let quoted: Vec<String> = fields
            .iter()
            .map(|f| tack_analysis::cost::csv_field(f))
            .collect();
        quoted.join(",") + "\n"
    };
    let mut out = line(result.columns.clone());
    for row in &result.rows {
        out.push_str(&line(row.iter().map(plain).collect()));
    }
    out
}

/// One object per row, keys in column order (serde_json's map would sort
/// them).
fn json(result: &QueryResult) -> String {
    let keys: Vec<String> = result
        .columns
        .iter()
        .map(|c| serde_json::Value::from(c.as_str()).to_string())
        .collect();
    let rows: Vec<String> = result
        .rows
        .iter()
        .map(|row| {
            let fields: Vec<String> = keys
                .iter()
                .zip(row)
                .map(|(key, cell)| {
                    let value = serde_json::to_string(cell).unwrap_or_else(|_| "null".into());
                    format!("{key}: {value}")
                })
                .collect();
            format!("  {{{}}}", fields.join(", "))
        })
        .collect();
    if rows.is_empty() {
        "[]\n".to_string()
    } else {
        format!("[\n{}\n]\n", rows.join(",\n"))
    }
}

/// Widest a text column gets in the table view; `--csv` and `--json` print
/// whole values.
const MAX_WIDTH: usize = 60;

fn table(result: &QueryResult) -> String {
    let numeric: Vec<bool> = result
        .types
        .iter()
        .map(|t| t.starts_with('i') || t.starts_with('u') || t.starts_with('f'))
        .collect();
    let rows: Vec<Vec<String>> = result
        .rows
        .iter()
        .map(|row| row.iter().map(shown).collect())
        .collect();
    let mut out = format_table(&result.columns, &rows, &numeric);
    let n = result.rows.len();
    out.push_str(&format!("({n} row{})\n", if n == 1 { "" } else { "s" }));
    out
}

/// The value as the table view shows it: one line, floats to six decimals.
fn shown(cell: &Cell) -> String {
    let text = match cell {
        Cell::Null => "null".to_string(),
        Cell::Float(v) => {
            let fixed = format!("{v:.6}");
            let trimmed = fixed.trim_end_matches('0').trim_end_matches('.');
            trimmed.to_string()
        }
        other => plain(other),
    };
    let flat = text.replace('\n', "⏎");
    if flat.chars().count() > MAX_WIDTH {
        let cut: String = flat.chars().take(MAX_WIDTH - 1).collect();
        format!("{cut}…")
    } else {
        flat
    }
}

/// Columns padded to their widest value; `right` aligns numbers.
pub(crate) fn format_table(headers: &[String], rows: &[Vec<String>], right: &[bool]) -> String {
    let width = |s: &str| s.chars().count();
    let mut widths: Vec<usize> = headers.iter().map(|h| width(h)).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(width(cell));
            }
        }
    }
    let line = |cells: &[String]| {
        let padded: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, cell)| {
                let pad = widths
                    .get(i)
                    .copied()
                    .unwrap_or(0)
                    .saturating_sub(width(cell));
                if right.get(i).copied().unwrap_or(false) {
                    format!("{}{cell}", " ".repeat(pad))
                } else {
                    format!("{cell}{}", " ".repeat(pad))
                }
            })
            .collect();
        padded.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = line(headers);
    let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
    out.push_str(&line(&rule));
    for row in rows {
        out.push_str(&line(row));
    }
    out
}
