use std::fs::{self, File};
use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
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
    let mut batches = Vec::new();
    for path in table_files(run_dir, table)? {
        let parquet_error = |source| TraceError::Parquet {
            path: path.clone(),
            source,
        };
        let file = File::open(&path).map_err(|e| TraceError::io(&path, e))?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|builder| builder.build())
            .map_err(parquet_error)?;
        for batch in reader {
            batches.push(batch.map_err(|e| TraceError::Format {
                path: path.clone(),
                message: e.to_string(),
            })?);
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
