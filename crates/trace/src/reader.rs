use std::fs::{self, File};
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

use crate::TraceError;

/// The finished Parquet files of one table (`trials`, `spans`, `messages`),
/// in name order. Temporary files are skipped.
pub fn table_files(run_dir: &Path, table: &str) -> Result<Vec<PathBuf>, TraceError> {
    let dir = run_dir.join(table);
    let mut files: Vec<PathBuf> = fs::read_dir(&dir)
        .map_err(|e| TraceError::io(&dir, e))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|ext| ext == "parquet"))
        .collect();
    files.sort();
    Ok(files)
}

/// Reads a whole table as Arrow batches.
pub fn read_table(run_dir: &Path, table: &str) -> Result<Vec<RecordBatch>, TraceError> {
    Ok(read_table_files(run_dir, table, None)?
        .into_iter()
        .map(|(_, batch)| batch)
        .collect())
}

/// Reads a table as Arrow batches, each with the file it came from, decoding
/// only `columns` when given: the spans table carries every command's
/// output, which a scan for a few columns has no need to decode.
pub fn read_table_files(
    run_dir: &Path,
    table: &str,
    columns: Option<&[&str]>,
) -> Result<Vec<(PathBuf, RecordBatch)>, TraceError> {
    let mut batches = Vec::new();
    for path in table_files(run_dir, table)? {
        let parquet_error = |source| TraceError::Parquet {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(|e| TraceError::io(&path, e))?;
        let mut builder = ParquetRecordBatchReaderBuilder::try_new(file).map_err(parquet_error)?;
        if let Some(columns) = columns {
            let mask = ProjectionMask::columns(builder.parquet_schema(), columns.iter().copied());
            builder = builder.with_projection(mask);
        }
        let reader = builder.build().map_err(parquet_error)?;
        for batch in reader {
            let batch = batch.map_err(|e| TraceError::Format {
                path: path.clone(),
                message: e.to_string(),
            })?;
            batches.push((path.clone(), batch));
        }
    }
    Ok(batches)
}

/// Rows in a table.
pub fn count_rows(run_dir: &Path, table: &str) -> Result<usize, TraceError> {
    Ok(read_table(run_dir, table)?
        .iter()
        .map(RecordBatch::num_rows)
        .sum())
}
