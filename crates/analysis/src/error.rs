use std::path::PathBuf;

/// Everything that can go wrong reading a run's traces. Each message names
/// the file, table or column involved and, where there is one, what to do.
#[derive(Debug, thiserror::Error)]
pub enum AnalysisError {
    #[error(
        "no finished trials in {dir}; did the run start? (a run still going stores its finished \
         trials every two minutes, a thousand at a time, and when it ends; the trials of a run \
         killed before that are in its journal: `tack report` or `tack run --resume` on the run \
         stores them)"
    )]
    NoTrials { dir: PathBuf },

    #[error(
        "could not read the run manifest: {source}; is {run_dir} a tack trace directory (traces/<run-id>/)?"
    )]
    Manifest {
        run_dir: PathBuf,
        source: tack_trace::TraceError,
    },

    #[error(
        "{path} is not a complete Parquet file (interrupted copy or writer?); move it out of the trace directory and retry"
    )]
    NotParquet { path: PathBuf },

    #[error("could not read {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },

    #[error(
        "could not read the {table} table in {dir}: {source}; the Parquet files may be corrupt or written by another tack version"
    )]
    Polars {
        dir: PathBuf,
        table: &'static str,
        source: polars::error::PolarsError,
    },

    #[error(
        "column `{column}` of the {table} table in {dir} {problem}; the Parquet files may be corrupt or written by another tack version"
    )]
    Column {
        dir: PathBuf,
        table: &'static str,
        column: String,
        problem: String,
    },

    #[error(
        "could not read the trace of a trial in {run_dir}: {source}; {}",
        trace_hint(source)
    )]
    Trace {
        run_dir: PathBuf,
        source: tack_trace::TraceError,
    },

    #[error(
        "trial `{trial_id}` is not in {dir}; `tack show {dir}` lists the run's trials with \
         their ids"
    )]
    TrialNotFound { dir: PathBuf, trial_id: String },

    #[error("`{trial_id}` is not a trial id: ids are never `.` or `..` and hold no path separator")]
    InvalidTrialId { trial_id: String },
}

/// What to do about a trace that does not read: a damaged table file is
/// moved aside (nothing recovers it); otherwise the run may have stopped
/// before storing its trials, which `tack report` recovers from journals.
fn trace_hint(source: &tack_trace::TraceError) -> &'static str {
    match source {
        tack_trace::TraceError::ParquetRead { .. } => {
            "move that file out of the run's directory to read the rest"
        }
        _ => "the run may be incomplete (try `tack report` to recover its journals)",
    }
}
