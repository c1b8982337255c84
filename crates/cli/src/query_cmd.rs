//! `tack query "SQL" [RUN...]`: SQL over the trace tables, printed as a
//! table, CSV or JSON.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;
use tack_analysis::query::{QueryError, QueryTables};
use tack_report::text;

use crate::exit::{CommandError, CommandResult, Failure, usage};
use crate::out::out;
use crate::run_arg::resolve;

#[derive(Debug, Args)]
#[command(
    after_help = "Tables: trials (one row per trial attempt), final_trials (each trial's latest attempt: what \
reports count), spans (one per model call, tool call, approval and check), messages (one per conversation \
message); every table has run_id and trial_id. Their columns are the Parquet files' (see the README's \
Traces section); a failed query lists them. The SQL is Polars' dialect (SELECT, WHERE, GROUP BY, JOIN, \
ORDER BY, LIMIT, CTEs, most scalar and aggregate functions). A killed run's trials still in its journals \
are stored first, as `tack report` does; a run still going is queried as far as it has stored.\n\n\
Examples:\n  tack query \"select variant, count(*) as trials from trials \\\n      group by 1 order by 1\"\n  \
tack query \"select variant, avg(steps) from trials where outcome = 'passed' \\\n      \
group by variant\" traces/<run-id>\n  \
tack query \"select gen_ai_tool_name, count(*) from spans \\\n      \
where kind = 'tool_call' group by 1 order by 2 desc\" --csv\n\n\
Exit codes: 0 done, 2 a bad query (the message says why and lists the tables) or no run to query, \
3 the traces could not be read."
)]
pub struct QueryArgs {
    /// One SQL statement over the tables trials, spans and messages.
    sql: String,
    /// The runs to query: traces/<run-id>, run ids or runs' URLs [default: every run under
    /// --traces].
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

pub async fn run(args: QueryArgs) -> CommandResult {
    if args.sql.trim().is_empty() {
        return Err(usage(
            "the query is empty: give one SQL statement, e.g. \
             tack query \"select outcome, count(*) as trials from trials group by 1\"",
        ));
    }
    // A run id holds no space; a run named by SQL is the arguments swapped.
    if let Some(sql) = args.runs.iter().find(|run| looks_like_sql(run)) {
        return Err(usage(format!(
            "`{sql}` is SQL in the place of a run: the SQL comes first, then the runs \
             (tack query \"{sql}\" {})",
            args.sql
        )));
    }
    let run_dirs = if args.runs.is_empty() {
        let ids = tack_trace::run_ids(&args.traces);
        if ids.is_empty() {
            return Err(usage(format!(
                "there are no runs under {} to query; name runs (traces/<run-id>) or pass --traces DIR",
                args.traces.display()
            )));
        }
        ids.iter().map(|id| args.traces.join(id)).collect()
    } else {
        let mut dirs = Vec::with_capacity(args.runs.len());
        for run in &args.runs {
            dirs.push(resolve(Path::new(run), &args.traces).await?);
        }
        dirs
    };
    let run_dirs = distinct_runs(run_dirs)?;
    for run in &run_dirs {
        crate::run_arg::recover_run(run)?;
    }
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
        text::query_json(&result)
    } else if args.csv {
        text::query_csv(&result)
    } else {
        text::query_table(&result)
    };
    out!("{text}")?;
    Ok(ExitCode::SUCCESS)
}

/// Each run once: a directory named twice is queried once, and two copies
/// of one run (the same run id) are refused, since every row would count
/// twice.
fn distinct_runs(dirs: Vec<PathBuf>) -> Result<Vec<PathBuf>, CommandError> {
    // (the directory, its real path, its run id), in the order named.
    let mut kept: Vec<(PathBuf, PathBuf, Option<String>)> = Vec::with_capacity(dirs.len());
    for dir in dirs {
        let real = dir.canonicalize().unwrap_or_else(|_| dir.clone());
        if kept.iter().any(|(_, other, _)| *other == real) {
            continue;
        }
        let id = tack_trace::Manifest::read(&dir).ok().map(|m| m.run_id);
        if let Some((first, _, Some(id))) = kept
            .iter()
            .find(|(_, _, other)| id.is_some() && *other == id)
        {
            return Err(usage(format!(
                "{} and {} are copies of one run ({id}): every row would count twice; name the \
                 runs to query, one copy of each",
                first.display(),
                dir.display()
            )));
        }
        kept.push((dir, real, id));
    }
    Ok(kept.into_iter().map(|(dir, _, _)| dir).collect())
}

fn query_failure(kind: Failure, error: QueryError) -> CommandError {
    let error = match error {
        QueryError::Sql { .. } => anyhow::anyhow!("the query failed: {error}"),
        other => anyhow::Error::new(other),
    };
    CommandError { kind, error }
}

/// Whether `text` reads as a query rather than a run: a statement's first
/// word and a space.
fn looks_like_sql(text: &str) -> bool {
    let mut words = text.split_whitespace();
    let first = words.next().unwrap_or_default().to_ascii_lowercase();
    words.next().is_some() && matches!(first.as_str(), "select" | "with")
}

#[cfg(test)]
mod tests {
    use super::looks_like_sql;

    #[test]
    fn sql_is_told_from_run_ids() {
        assert!(looks_like_sql("SELECT task, outcome from final_trials"));
        assert!(looks_like_sql("with x as (select 1) select * from x"));
        assert!(!looks_like_sql("20261205-111807-fetched-1f2e"));
        assert!(!looks_like_sql("traces/select"));
        assert!(!looks_like_sql("select"));
    }
}
