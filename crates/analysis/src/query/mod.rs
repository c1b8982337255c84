//! SQL over the trace tables of one or more runs (`tack query`), with Polars'
//! SQL engine. The result comes out as plain rows so the CLI needs no Polars.

mod names;

use crate::frame;
use crate::{AnalysisError, trials};
use polars::prelude::*;
use polars::sql::SQLContext;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tack_trace::schema::{MESSAGES_DIR, SPANS_DIR, TRIALS_DIR, col, kind};

/// The tables a query can name, in the order the hint lists them.
pub const TABLES: [&str; 3] = [TRIALS_DIR, SPANS_DIR, MESSAGES_DIR];

/// A view of `trials` with the final attempt of each (variant, task, trial
/// index) only: what the report counts (with infra errors, which it does not
/// score: add `where outcome <> 'infra_error'` for its denominator).
pub const FINAL_TRIALS: &str = "final_trials";

#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    /// The query is wrong: bad SQL, an unknown table or column, a type
    /// mismatch. The user can fix it.
    #[error("{message}\nhint: {hint}")]
    Sql { message: String, hint: String },

    #[error("none of the runs has any finished trial to query; run `tack run` first")]
    NoTables,

    /// The traces could not be read: not the query's fault.
    #[error(transparent)]
    Read(#[from] AnalysisError),

    #[error(
        "could not read the trace files while running the query: {0}; a file may be corrupt or \
         still being written (a run in progress); retry, or name only finished runs"
    )]
    Scan(PolarsError),
}

impl QueryError {
    /// True when the query itself is at fault, not the traces.
    pub fn is_user_error(&self) -> bool {
        matches!(self, QueryError::Sql { .. } | QueryError::NoTables)
    }
}

/// One query's answer: column names and types, then the rows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueryResult {
    pub columns: Vec<String>,
    /// Polars' name for each column's type (`str`, `u32`, `f64`, …).
    pub types: Vec<String>,
    pub rows: Vec<Vec<Cell>>,
}

/// One value. A list is a list of values, whole; types without a natural
/// JSON form (dates, structs) come out as Polars prints them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Cell {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Text(String),
    List(Vec<Cell>),
}

/// The trace tables of a set of runs, registered for SQL.
pub struct QueryTables {
    ctx: SQLContext,
    /// Each registered table's columns, for the hint after a failed query.
    columns: Vec<(&'static str, Vec<String>)>,
}

impl std::fmt::Debug for QueryTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QueryTables")
            .field("columns", &self.columns)
            .finish_non_exhaustive()
    }
}

impl QueryTables {
    /// Registers `trials`, `spans` and `messages` over every finished
    /// Parquet file of `run_dirs` — what the glob
    /// `<run>/<table>/*.parquet` matches. Each table is one lazy scan over
    /// the files of all runs, given the union of their columns, so runs
    /// written by different tack versions query together (a column a file
    /// lacks reads as null). Every table carries `run_id`. A table no run
    /// has a file for is not registered.
    pub fn open(run_dirs: &[PathBuf]) -> Result<QueryTables, QueryError> {
        let ctx = SQLContext::new();
        let mut columns = Vec::new();
        for table in TABLES {
            let mut files = Vec::new();
            for run in run_dirs {
                files.extend(frame::parquet_files(&run.join(table))?);
            }
            if files.is_empty() {
                continue;
            }
            let dir = common_dir(run_dirs, table);
            let mut lazy = if table == TRIALS_DIR {
                // Fills the columns older traces lack as the analysis does.
                trials::scan(&dir, &files, false)?
            } else {
                frame::scan(&dir, table, &files)?
            };
            let schema = lazy
                .collect_schema()
                .map_err(|source| AnalysisError::Polars {
                    dir: dir.clone(),
                    table,
                    source,
                })?;
            let names: Vec<String> = schema.iter_names().map(|n| n.to_string()).collect();
            columns.push((table, names.clone()));
            if table == TRIALS_DIR {
                let reruns = crate::attempts::reruns(lazy.clone());
                let last = crate::attempts::mark(lazy.clone(), reruns)
                    .filter(col(crate::attempts::IS_FINAL))
                    .drop(by_name(
                        [crate::attempts::IS_FINAL, crate::attempts::IS_SCORED],
                        true,
                        false,
                    ));
                columns.push((FINAL_TRIALS, names));
                ctx.register(FINAL_TRIALS, last);
            }
            ctx.register(table, lazy);
        }
        if columns.is_empty() {
            return Err(QueryError::NoTables);
        }
        Ok(QueryTables { ctx, columns })
    }

    /// The registered tables and their columns.
    pub fn tables(&self) -> &[(&'static str, Vec<String>)] {
        &self.columns
    }

    /// Runs one SQL statement. Errors in the statement (syntax, unknown
    /// names, types) are [`QueryError::Sql`] with Polars' message and a hint
    /// listing the tables; an error reading the files is not.
    /// Unaliased expressions are named by their text (`count(*)`, not
    /// Polars' `len`; see [`names`]).
    pub fn run(&mut self, sql: &str) -> Result<QueryResult, QueryError> {
        let named = names::named(sql);
        let mut lazy = (self.ctx)
            .execute(named.as_deref().unwrap_or(sql))
            .map_err(|e| self.sql_error(e, sql))?;
        let failed = |e: PolarsError| {
            if is_io_error(&e) {
                QueryError::Scan(e)
            } else {
                self.sql_error(e, sql)
            }
        };
        // Resolving the schema reports unknown columns and type errors before
        // any file is read.
        lazy.collect_schema().map_err(failed)?;
        let df = lazy.collect().map_err(failed)?;
        result_rows(&df).map_err(|e| self.sql_error(e, sql))
    }

    /// Polars' message, and a hint: the columns of the tables `sql` names
    /// (of every table when it names none), after the nearest names to an
    /// unknown column. Polars' own list of valid columns is left out: it
    /// said the same once more.
    fn sql_error(&self, error: PolarsError, sql: &str) -> QueryError {
        let mut message = error.to_string();
        // Polars' list of valid columns says what the hint says; its plan
        // dump is Polars' internals, not the user's query.
        for tail in ["; valid columns:", "\n\nResolved plan until failure"] {
            if let Some(at) = message.find(tail) {
                message.truncate(at);
            }
        }
        let words: Vec<String> = sql
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map(str::to_ascii_lowercase)
            .collect();
        let named: Vec<&(&str, Vec<String>)> = self
            .columns
            .iter()
            .filter(|(table, _)| words.iter().any(|w| w == table))
            .collect();
        let shown: Vec<&(&str, Vec<String>)> = if named.is_empty() {
            self.columns.iter().collect()
        } else {
            named
        };
        let mut hint = String::new();
        if let PolarsError::ColumnNotFound(_) = error {
            let unknown = message.split('"').nth(1).unwrap_or_default();
            let near = tack_protocol::nearest(
                unknown,
                shown.iter().flat_map(|(_, c)| c.iter().map(String::as_str)),
            );
            if !near.is_empty() {
                hint.push_str(&format!("did you mean {}? ", near.join(" or ")));
            }
        }
        let tables: Vec<String> = shown
            .iter()
            .map(|(table, columns)| format!("  {table}: {}", columns.join(", ")))
            .collect();
        let all = if shown.len() < self.columns.len() {
            let names: Vec<&str> = self.columns.iter().map(|(t, _)| *t).collect();
            format!(" (the tables: {})", names.join(", "))
        } else {
            " (one row per trial, per span, per message)".to_string()
        };
        hint.push_str(&format!("the columns{all}:\n{}", tables.join("\n")));
        QueryError::Sql { message, hint }
    }
}

/// The directory error messages name for a table: the run's own when there
/// is one run, else the directory holding the runs.
fn common_dir(run_dirs: &[PathBuf], table: &str) -> PathBuf {
    match run_dirs {
        [one] => one.join(table),
        [first, ..] => first.parent().unwrap_or(first).to_path_buf(),
        [] => PathBuf::from(table),
    }
}

/// An error reading the files, not the query's: I/O, or a Parquet file
/// that does not decode (Polars reports those as compute errors whose
/// message starts `parquet:`), so exit 3 and a hint about the files, not
/// the column list.
fn is_io_error(error: &PolarsError) -> bool {
    match error {
        PolarsError::IO { .. } => true,
        PolarsError::ComputeError(message) => message.starts_with("parquet:"),
        PolarsError::Context { error, .. } | PolarsError::ExprContext { error, .. } => {
            is_io_error(error)
        }
        _ => false,
    }
}

fn result_rows(df: &DataFrame) -> PolarsResult<QueryResult> {
    let columns = df.columns();
    let mut rows = vec![Vec::with_capacity(columns.len()); df.height()];
    for column in columns {
        for (i, row) in rows.iter_mut().enumerate() {
            row.push(cell(column.get(i)?)?);
        }
    }
    Ok(QueryResult {
        columns: columns.iter().map(|c| c.name().to_string()).collect(),
        types: columns.iter().map(|c| c.dtype().to_string()).collect(),
        rows,
    })
}

fn cell(value: AnyValue<'_>) -> PolarsResult<Cell> {
    Ok(match value {
        AnyValue::Null => Cell::Null,
        AnyValue::Boolean(b) => Cell::Bool(b),
        AnyValue::String(s) => Cell::Text(s.to_string()),
        AnyValue::StringOwned(s) => Cell::Text(s.to_string()),
        AnyValue::Int8(v) => Cell::Int(v.into()),
        AnyValue::Int16(v) => Cell::Int(v.into()),
        AnyValue::Int32(v) => Cell::Int(v.into()),
        AnyValue::Int64(v) => Cell::Int(v),
        AnyValue::UInt8(v) => Cell::UInt(v.into()),
        AnyValue::UInt16(v) => Cell::UInt(v.into()),
        AnyValue::UInt32(v) => Cell::UInt(v.into()),
        AnyValue::UInt64(v) => Cell::UInt(v),
        AnyValue::Float32(v) => Cell::Float(v.into()),
        AnyValue::Float64(v) => Cell::Float(v),
        // Every item: Polars' own printing elides the middle of a long list.
        AnyValue::List(items) | AnyValue::Array(items, _) => Cell::List(
            (0..items.len())
                .map(|i| cell(items.get(i)?))
                .collect::<PolarsResult<_>>()?,
        ),
        other => Cell::Text(other.to_string()),
    })
}

/// What the sandbox refused during each of one trial's tool calls, by span
/// id: the `sandbox_denials` column of the spans table, one line per denial.
/// Tool calls without denials are absent; so is everything for traces
/// written before the column existed.
pub fn sandbox_denials(
    run_dir: &Path,
    trial_id: &str,
) -> Result<BTreeMap<u32, Vec<String>>, AnalysisError> {
    crate::trace::check_trial_id(trial_id)?;
    let dir = run_dir.join(SPANS_DIR);
    if !dir.is_dir() {
        return Ok(BTreeMap::new());
    }
    let wanted = std::collections::HashSet::from([trial_id]);
    let columns = [col::TRIAL_ID, col::SPAN_ID, col::KIND, col::SANDBOX_DENIALS];
    let batches = tack_trace::read_trial_rows(
        run_dir,
        SPANS_DIR,
        tack_trace::Columns::Only(&columns),
        &wanted,
    )
    .map_err(|source| AnalysisError::Trace {
        run_dir: run_dir.to_path_buf(),
        source,
    })?;
    let mut out = BTreeMap::new();
    for (path, batch) in batches {
        let column = |name: &str| batch.column_by_name(name);
        let Some(denials) = column(col::SANDBOX_DENIALS) else {
            continue;
        };
        let malformed = |what: &str| AnalysisError::Column {
            dir: dir.clone(),
            table: SPANS_DIR,
            column: what.to_string(),
            problem: format!("has an unexpected type in {}", path.display()),
        };
        let denials = denials
            .as_any()
            .downcast_ref::<arrow_array::StringArray>()
            .ok_or_else(|| malformed(col::SANDBOX_DENIALS))?;
        let ids = column(col::SPAN_ID)
            .and_then(|c| c.as_any().downcast_ref::<arrow_array::UInt32Array>())
            .ok_or_else(|| malformed(col::SPAN_ID))?;
        let kinds = column(col::KIND)
            .and_then(|c| c.as_any().downcast_ref::<arrow_array::StringArray>())
            .ok_or_else(|| malformed(col::KIND))?;
        for i in 0..batch.num_rows() {
            use arrow_array::Array;
            if kinds.value(i) == kind::TOOL_CALL
                && !denials.is_null(i)
                && !denials.value(i).is_empty()
            {
                let lines = denials.value(i).lines().map(str::to_owned).collect();
                out.insert(ids.value(i), lines);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
#[path = "../../tests/fixture/mod.rs"]
mod fixture;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn ints(result: &QueryResult) -> Vec<Vec<Cell>> {
        result.rows.clone()
    }

    #[test]
    fn runs_of_different_tack_versions_query_together() {
        let tmp = tempfile::tempdir().unwrap();
        let old = tmp.path().join("old");
        let new = tmp.path().join("new");
        std::fs::create_dir_all(&old).unwrap();
        std::fs::create_dir_all(&new).unwrap();
        // Every file of `old` lacks the columns added since the first traces.
        fixture::write_run_as(&old, |_| true);
        fixture::write_run(&new);
        let mut tables = QueryTables::open(&[old, new]).unwrap();
        let trials = fixture::trials().len() as u64;
        let result = tables
            .run("select count(*) as n, sum(feedback_rounds) as f from trials")
            .unwrap();
        assert_eq!(result.columns, ["n", "f"]);
        // The old run's feedback rounds read as 0, as the analysis reads them.
        assert_eq!(ints(&result), [[Cell::UInt(2 * trials), Cell::UInt(3)]]);
        let approvals = tables
            .run("select count(*) from spans where kind = 'approval' and approved is not null")
            .unwrap();
        assert_eq!(
            approvals.rows,
            [[Cell::UInt(2)]],
            "only the new run has approvals"
        );
    }

    #[test]
    fn a_bad_query_is_the_users_error_and_lists_the_columns_it_could_use() {
        let tmp = tempfile::tempdir().unwrap();
        fixture::write_run(tmp.path());
        let mut tables = QueryTables::open(&[tmp.path().to_path_buf()]).unwrap();
        let names: Vec<&str> = tables.tables().iter().map(|(t, _)| *t).collect();
        assert_eq!(names, [TRIALS_DIR, FINAL_TRIALS, SPANS_DIR, MESSAGES_DIR]);
        // Naming no table it knows: every table's columns.
        for sql in ["select * from nowhere", "selec"] {
            let error = tables.run(sql).unwrap_err();
            assert!(error.is_user_error(), "{sql}: {error}");
            let text = error.to_string();
            assert!(text.contains("spans: run_id, trial_id, span_id"), "{text}");
            assert!(text.contains("messages: run_id"), "{text}");
        }
        // An unknown column of a table it names: that table's columns, once,
        // after the nearest names.
        let error = tables.run("select total_token from spans").unwrap_err();
        let text = error.to_string();
        assert!(error.is_user_error(), "{text}");
        assert!(
            text.contains(
                "the columns (the tables: trials, final_trials, spans, messages):\n  spans: run_id"
            ),
            "{text}"
        );
        assert!(
            !text.contains("messages: run_id") && !text.contains("valid columns"),
            "{text}"
        );
        for (sql, near) in [
            ("select outcom from trials", "outcome"),
            ("select total_token from trials", "total_tokens"),
        ] {
            let text = tables.run(sql).unwrap_err().to_string();
            assert!(
                text.contains(&format!("hint: did you mean {near}?")),
                "{text}"
            );
        }
    }

    #[test]
    fn final_trials_hold_the_last_attempt_of_each_trial() {
        let tmp = tempfile::tempdir().unwrap();
        fixture::write_run_with_attempts(tmp.path());
        let mut tables = QueryTables::open(&[tmp.path().to_path_buf()]).unwrap();
        let all = tables.run("select count(*) from trials").unwrap();
        let last = tables
            .run("select count(*), max(trial_attempt) from final_trials")
            .unwrap();
        let rows = (fixture::trials().len() + fixture::retried_trials().len()) as u64;
        assert_eq!(all.rows, [[Cell::UInt(rows)]]);
        // Two planned trials had three and two attempts.
        assert_eq!(last.rows, [[Cell::UInt(rows - 3), Cell::UInt(2)]]);
        let columns = &tables.tables()[1];
        assert_eq!(columns.0, FINAL_TRIALS);
        assert!(!columns.1.iter().any(|c| c.starts_with("is_")));
    }

    #[test]
    fn a_run_without_trials_has_nothing_to_query() {
        let tmp = tempfile::tempdir().unwrap();
        let error = QueryTables::open(&[tmp.path().to_path_buf()]).unwrap_err();
        assert!(matches!(error, QueryError::NoTables), "{error}");
    }

    /// A part whose pages do not decode is the files' fault, not the
    /// query's: exit 3 with a word on the files, not the column list.
    #[test]
    fn a_corrupt_part_is_a_read_error_not_a_bad_query() {
        let tmp = tempfile::tempdir().unwrap();
        fixture::write_run(tmp.path());
        let dir = tmp.path().join(SPANS_DIR);
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let mut bytes = std::fs::read(&path).unwrap();
            // The pages only: the footer (its length in the 4 bytes before
            // the closing `PAR1`) stays whole, so the table opens.
            let n = bytes.len();
            let footer = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap()) as usize;
            for byte in &mut bytes[4..n - 8 - footer] {
                *byte = b'A';
            }
            std::fs::write(&path, bytes).unwrap();
        }
        let mut tables = QueryTables::open(&[tmp.path().to_path_buf()]).unwrap();
        let error = tables.run("select * from spans").unwrap_err();
        assert!(!error.is_user_error(), "{error}");
        assert!(matches!(error, QueryError::Scan(_)), "{error}");
    }

    #[test]
    fn values_keep_their_types() {
        let tmp = tempfile::tempdir().unwrap();
        fixture::write_run(tmp.path());
        let mut tables = QueryTables::open(&[tmp.path().to_path_buf()]).unwrap();
        let sql = format!(
            "select trial_id, tampered, cost_usd, steps, error from trials where trial_id = '{}'",
            fixture::traced_trial_id()
        );
        let result = tables.run(&sql).unwrap();
        assert_eq!(
            result.rows,
            [[
                Cell::Text(fixture::traced_trial_id()),
                Cell::Bool(true),
                Cell::Null,
                Cell::UInt(3),
                Cell::Null,
            ]]
        );
        assert_eq!(result.types[1], "bool");
    }

    #[test]
    fn aggregates_without_aliases_are_named_and_sort() {
        let tmp = tempfile::tempdir().unwrap();
        fixture::write_run(tmp.path());
        let mut tables = QueryTables::open(&[tmp.path().to_path_buf()]).unwrap();
        let result = tables
            .run(
                "select variant, count(*), sum(steps), max(steps) from trials \
                 group by variant order by count(*) desc, variant",
            )
            .unwrap();
        assert_eq!(
            result.columns,
            ["variant", "count(*)", "sum(steps)", "max(steps)"]
        );
        // COLUMNS() stands for several columns and keeps their names.
        let several = tables
            .run("select COLUMNS('^trial_i.*$'), steps + 1 from trials limit 1")
            .unwrap();
        assert_eq!(several.columns, ["trial_id", "trial_index", "steps + 1"]);
        let counts: Vec<u64> = result
            .rows
            .iter()
            .map(|row| match row[1] {
                Cell::UInt(n) => n,
                ref other => panic!("count(*) is {other:?}"),
            })
            .collect();
        let mut sorted = counts.clone();
        sorted.sort_by_key(|n| std::cmp::Reverse(*n));
        assert!(
            counts.len() > 1 && counts.first() != counts.last(),
            "{counts:?}"
        );
        assert_eq!(counts, sorted);
    }

    #[test]
    fn sandbox_denials_are_read_per_tool_call() {
        let tmp = tempfile::tempdir().unwrap();
        fixture::write_run(tmp.path());
        let none = sandbox_denials(tmp.path(), &fixture::traced_trial_id()).unwrap();
        assert!(none.is_empty());
        assert!(sandbox_denials(tmp.path(), "../x").is_err());
        assert!(
            sandbox_denials(tmp.path(), "no-such-trial")
                .unwrap()
                .is_empty()
        );
    }
}
