//! Reading the per-trial Parquet files of one table into Polars, and getting
//! typed columns back out with errors that name the table and column.

use crate::AnalysisError;
use polars::prelude::*;
use polars_core::query_result::QueryResult;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The finished Parquet files of a table directory, sorted by name. Temporary
/// files (`.<name>.partial`) and anything else not ending in `.parquet` are
/// skipped: a trial still being written must not break the analysis. A missing
/// directory has no files; a part that is not a regular file is an error.
pub(crate) fn parquet_files(dir: &Path) -> Result<Vec<PathBuf>, AnalysisError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(AnalysisError::Io {
                path: dir.to_path_buf(),
                source,
            });
        }
    };
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|source| AnalysisError::Io {
                path: dir.to_path_buf(),
                source,
            })?
            .path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if !name.ends_with(".parquet") || name.starts_with('.') {
            continue;
        }
        // A run may come from elsewhere: a part that is a link (to another
        // file of the machine) or a pipe (which would hang the scan) is
        // refused, as tack_trace refuses it.
        let regular = std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_file());
        if !regular {
            return Err(AnalysisError::Io {
                path,
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "is not a regular file (a link, a pipe or a device): a run's parts are \
                     regular files",
                ),
            });
        }
        files.push(path);
    }
    files.sort();
    Ok(files)
}

/// A lazy scan over `files` (all of one table). The file list is explicit and
/// globbing off, so what is read is exactly what [`parquet_files`] chose.
///
/// Files written by different tack versions can have different columns (a
/// run resumed by a newer tack, or a directory of mixed runs). Polars would
/// take the first file's columns and refuse any file with more, so the scan
/// is given the union of all files' columns instead: a file without a column
/// reads as nulls there. Columns no file has are left out; [`with_columns`]
/// adds the ones a reader needs.
pub(crate) fn scan(
    dir: &Path,
    table: &'static str,
    files: &[PathBuf],
) -> Result<LazyFrame, AnalysisError> {
    scan_as(dir, table, files, &union_schema(files)?, None)
}

/// Name of the column [`scan_as`] adds when asked: each row's file. The
/// three tables name their files alike (a part, or one trial's file in runs
/// before schema version 3), so a trial's row tells which file of the other
/// tables holds its spans and messages.
pub(crate) const FILE_PATH: &str = "__file_path";

/// The union of `files`' columns, each file's footer read: what [`scan`]
/// gives Polars, and what [`scan_as`] takes so a scan of some of the same
/// files need not read their footers again.
pub(crate) fn union_schema(files: &[PathBuf]) -> Result<SchemaRef, AnalysisError> {
    let mut schema = Schema::default();
    for file_schema in file_schemas(files)? {
        for (name, dtype) in file_schema.iter() {
            if !schema.contains(name) {
                schema.with_column(name.clone(), dtype.clone());
            }
        }
    }
    Ok(Arc::new(schema))
}

/// [`scan`] of `files` (some of those `schema` was made of), with each
/// row's file as `file_paths` when named.
pub(crate) fn scan_as(
    dir: &Path,
    table: &'static str,
    files: &[PathBuf],
    schema: &SchemaRef,
    file_paths: Option<&str>,
) -> Result<LazyFrame, AnalysisError> {
    let polars_error = |source| AnalysisError::Polars {
        dir: dir.to_path_buf(),
        table,
        source,
    };
    let paths = files
        .iter()
        .map(|file| PlRefPath::try_from_path(file))
        .collect::<PolarsResult<Vec<_>>>()
        .map_err(polars_error)?;
    let args = ScanArgsParquet {
        glob: false,
        schema: Some(schema.clone()),
        allow_missing_columns: true,
        include_file_paths: file_paths.map(PlSmallStr::from),
        ..ScanArgsParquet::default()
    };
    LazyFrame::scan_parquet_files(paths.into(), args).map_err(polars_error)
}

/// The columns of every file, in file order. A million trials are a thousand
/// parts per table; their footers are read on every core.
fn file_schemas(files: &[PathBuf]) -> Result<Vec<Schema>, AnalysisError> {
    tack_trace::map_on_cores(files, 32, |file| file_schema(file))
}

/// The columns of one Parquet file, from its footer. Polars' error for a
/// broken file does not say which file it was; checking the footer magic
/// first lets the error name it.
fn file_schema(file: &Path) -> Result<Schema, AnalysisError> {
    use std::io::{Read, Seek, SeekFrom};
    let corrupt = || AnalysisError::NotParquet {
        path: file.to_path_buf(),
    };
    let io_error = |source| AnalysisError::Io {
        path: file.to_path_buf(),
        source,
    };
    let mut handle = std::fs::File::open(file).map_err(io_error)?;
    if handle.metadata().map_err(io_error)?.len() < 12 {
        return Err(corrupt());
    }
    let mut magic = [0u8; 4];
    handle.seek(SeekFrom::End(-4)).map_err(io_error)?;
    handle.read_exact(&mut magic).map_err(io_error)?;
    if &magic != b"PAR1" {
        return Err(corrupt());
    }
    let arrow_schema = ParquetReader::new(handle).schema().map_err(|_| corrupt())?;
    Ok(Schema::from_arrow_schema(&arrow_schema))
}

/// `lazy` with every column of `columns` present: a column no file had is
/// added as `default` (cast to its type), and nulls in it (files that lacked
/// it) become `default` too. For columns added to the trace schema after
/// traces were first written; `default` may be a null literal.
pub(crate) fn with_columns(
    mut lazy: LazyFrame,
    columns: &[(&str, DataType, Expr)],
    dir: &Path,
    table: &'static str,
) -> Result<LazyFrame, AnalysisError> {
    let schema = lazy
        .collect_schema()
        .map_err(|source| AnalysisError::Polars {
            dir: dir.to_path_buf(),
            table,
            source,
        })?;
    let exprs: Vec<Expr> = columns
        .iter()
        .map(|(name, dtype, default)| {
            let default = default.clone().cast(dtype.clone());
            if schema.contains(name) {
                col(*name).fill_null(default).alias(*name)
            } else {
                default.alias(*name)
            }
        })
        .collect();
    Ok(if exprs.is_empty() {
        lazy
    } else {
        lazy.with_columns(exprs)
    })
}

/// A collected table with its provenance, for error messages.
pub(crate) struct Frame {
    df: DataFrame,
    dir: PathBuf,
    table: &'static str,
}

impl Frame {
    pub(crate) fn collect(
        lazy: LazyFrame,
        dir: &Path,
        table: &'static str,
    ) -> Result<Frame, AnalysisError> {
        let polars_error = |source| AnalysisError::Polars {
            dir: dir.to_path_buf(),
            table,
            source,
        };
        // The streaming engine reads the files a morsel at a time, so a
        // scan of twenty million spans never sits in memory whole, and its
        // joins and group-bys run on every core.
        let df = match lazy
            .collect_with_engine(Engine::Streaming)
            .map_err(polars_error)?
        {
            QueryResult::Single(df) => df,
            // Only a plan with several sinks has several results; none here.
            QueryResult::Multiple(mut dfs) => dfs.pop().unwrap_or_default(),
        };
        Ok(Frame {
            df,
            dir: dir.to_path_buf(),
            table,
        })
    }

    /// The frame with its text columns copied into buffers of their own.
    /// Polars' text columns are views into the buffers they were decoded
    /// or gathered from, so a few rows kept from a batch (a cube's keys, a
    /// failed trial's id) would keep the batch's whole text buffers alive:
    /// at a million trials, about a megabyte per batch, held to the end.
    pub(crate) fn compacted(self) -> Result<Frame, AnalysisError> {
        let height = self.df.height();
        let columns = self
            .df
            .columns()
            .iter()
            .map(|column| match column.str() {
                Ok(text) => text
                    .iter()
                    .collect::<StringChunked>()
                    .with_name(column.name().clone())
                    .into_column(),
                Err(_) => column.clone(),
            })
            .collect();
        let df = DataFrame::new(height, columns).map_err(|source| AnalysisError::Polars {
            dir: self.dir.clone(),
            table: self.table,
            source,
        })?;
        Ok(Frame { df, ..self })
    }

    /// The collected table as a lazy frame again, for further queries that
    /// should not re-read the files. Cloning a DataFrame shares its buffers.
    pub(crate) fn lazy(&self) -> LazyFrame {
        self.df.clone().lazy()
    }

    pub(crate) fn height(&self) -> usize {
        self.df.height()
    }

    fn column_error(&self, column: &str, problem: impl std::fmt::Display) -> AnalysisError {
        AnalysisError::Column {
            dir: self.dir.clone(),
            table: self.table,
            column: column.to_string(),
            problem: problem.to_string(),
        }
    }

    /// The column cast to `dtype` (a no-op when it already has that type), so
    /// that callers need not know what Polars' aggregations return.
    fn cast(&self, name: &str, dtype: &DataType) -> Result<Column, AnalysisError> {
        let column = self
            .df
            .column(name)
            .map_err(|e| self.column_error(name, format!("is missing ({e})")))?;
        column
            .cast(dtype)
            .map_err(|e| self.column_error(name, format!("cannot be read as {dtype} ({e})")))
    }

    pub(crate) fn opt_strs(&self, name: &str) -> Result<Vec<Option<String>>, AnalysisError> {
        let column = self.cast(name, &DataType::String)?;
        let values = column.str().map_err(|e| self.column_error(name, e))?;
        Ok(values.iter().map(|v| v.map(str::to_owned)).collect())
    }

    pub(crate) fn opt_u64s(&self, name: &str) -> Result<Vec<Option<u64>>, AnalysisError> {
        let column = self.cast(name, &DataType::UInt64)?;
        let values = column.u64().map_err(|e| self.column_error(name, e))?;
        Ok(values.iter().collect())
    }

    pub(crate) fn opt_i64s(&self, name: &str) -> Result<Vec<Option<i64>>, AnalysisError> {
        let column = self.cast(name, &DataType::Int64)?;
        let values = column.i64().map_err(|e| self.column_error(name, e))?;
        Ok(values.iter().collect())
    }

    pub(crate) fn opt_f64s(&self, name: &str) -> Result<Vec<Option<f64>>, AnalysisError> {
        let column = self.cast(name, &DataType::Float64)?;
        let values = column.f64().map_err(|e| self.column_error(name, e))?;
        Ok(values.iter().collect())
    }

    pub(crate) fn opt_bools(&self, name: &str) -> Result<Vec<Option<bool>>, AnalysisError> {
        let column = self.cast(name, &DataType::Boolean)?;
        let values = column.bool().map_err(|e| self.column_error(name, e))?;
        Ok(values.iter().collect())
    }

    pub(crate) fn strs(&self, name: &str) -> Result<Vec<String>, AnalysisError> {
        let values = self.opt_strs(name)?;
        self.required(name, values)
    }

    pub(crate) fn bools(&self, name: &str) -> Result<Vec<bool>, AnalysisError> {
        let values = self.opt_bools(name)?;
        self.required(name, values)
    }

    pub(crate) fn u64s(&self, name: &str) -> Result<Vec<u64>, AnalysisError> {
        let values = self.opt_u64s(name)?;
        self.required(name, values)
    }

    /// A non-nullable column as `u32`; values above `u32::MAX` are an error
    /// rather than silently truncated.
    pub(crate) fn u32s(&self, name: &str) -> Result<Vec<u32>, AnalysisError> {
        self.u64s(name)?
            .into_iter()
            .map(|v| u32::try_from(v).map_err(|_| self.column_error(name, "overflows u32")))
            .collect()
    }

    pub(crate) fn i64s(&self, name: &str) -> Result<Vec<i64>, AnalysisError> {
        let values = self.opt_i64s(name)?;
        self.required(name, values)
    }

    fn required<T>(&self, name: &str, values: Vec<Option<T>>) -> Result<Vec<T>, AnalysisError> {
        values
            .into_iter()
            .collect::<Option<Vec<T>>>()
            .ok_or_else(|| self.column_error(name, "has nulls where the schema allows none"))
    }
}

/// Dollars as whole picodollars: integers, whose sums are exact, so the same
/// run sums to the same figure whatever order the streaming engine adds its
/// calls in (float sums differ in the last digit from one run to the next).
/// Costs are prices per million tokens times tokens, so a picodollar is
/// finer than any real price makes them. Nulls stay null.
pub(crate) fn picodollars(usd: Expr) -> Expr {
    let scaled = usd.cast(DataType::Float64) * lit(PICO_PER_USD);
    when(scaled.clone().lt(lit(0.0)))
        .then(scaled.clone() - lit(0.5))
        .otherwise(scaled + lit(0.5))
        .cast(DataType::Int64)
}

const PICO_PER_USD: f64 = 1e12;

/// A sum of [`picodollars`] back in dollars.
pub(crate) fn usd_of_picodollars(pico: i64) -> f64 {
    pico as f64 / PICO_PER_USD
}
