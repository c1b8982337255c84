use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Format { path: PathBuf, message: String },
    #[error("{path}: could not write Parquet: {source}")]
    Parquet {
        path: PathBuf,
        source: parquet::errors::ParquetError,
    },
    /// A table file that does not read as Parquet: damaged (cut short,
    /// overwritten) or not written by tack.
    #[error("{path}: not a readable Parquet file ({source}); it is damaged or not tack's")]
    ParquetRead {
        path: PathBuf,
        source: parquet::errors::ParquetError,
    },
    #[error("could not build Arrow batch for {table}: {source}")]
    Arrow {
        table: &'static str,
        source: arrow_schema::ArrowError,
    },
    /// A column of the schema that the row builder has no value for: a bug
    /// in tack, not in the trace.
    #[error(
        "the {table} table's column `{column}` has no value for this trial; this is a bug in \
         tack, please report it"
    )]
    UnfilledColumn { table: &'static str, column: String },
    /// A batch of a table file could not be decoded. `Read` and `Table`
    /// hold their cause in `error`, not as `source()`: the message says it
    /// already, and the CLI prints an error's sources after its message,
    /// which would say it twice.
    #[error("{path}: {error}")]
    Read {
        path: PathBuf,
        error: arrow_schema::ArrowError,
    },
    /// A table file lacks what this tack reads from it.
    #[error("{path}: {error}")]
    Table { path: PathBuf, error: TableError },
    /// A trial asked for that the run does not hold (the closest ids named).
    #[error(transparent)]
    NoTrial(Box<crate::RunsError>),
}

/// What is wrong with the columns of a trace table: a file that this tack
/// did not write, or that was damaged.
#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[error("column {0} is missing or not text")]
    NotText(&'static str),
    #[error("column {0} is missing or of the wrong type")]
    WrongType(&'static str),
    #[error("{column} is not a list of {items}")]
    NotAList {
        column: &'static str,
        items: &'static str,
    },
    #[error("message_ids and message_seqs differ in length")]
    ListLengths,
    #[error("role: {0}")]
    Role(#[source] serde_json::Error),
    #[error("tool_calls_json: {0}")]
    ToolCalls(#[source] serde_json::Error),
}

impl TraceError {
    pub fn io(path: &Path, source: std::io::Error) -> TraceError {
        TraceError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// A [`TableError`] about the table file at `path`.
    pub(crate) fn table(path: &Path) -> impl Fn(TableError) -> TraceError + '_ {
        move |error| TraceError::Table {
            path: path.to_path_buf(),
            error,
        }
    }
}
