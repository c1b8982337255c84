use std::collections::HashSet;
use std::fs::{self, File};
use std::hash::BuildHasher;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::Int32Type;
use arrow_array::{Array, BooleanArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ProjectionMask;
use parquet::arrow::arrow_reader::{
    ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder, RowSelection,
};
use parquet::file::metadata::{PageIndexPolicy, RowGroupMetaData};
use parquet::schema::types::SchemaDescriptor;

use crate::TraceError;
use crate::fsutil::open_run_file;
use crate::schema::col;

/// The reader's own default: rows decoded at once when many are wanted.
const MAX_BATCH_ROWS: usize = 1024;

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
    Ok(read_table_files(run_dir, table, Columns::All)?
        .into_iter()
        .map(|(_, batch)| batch)
        .collect())
}

/// The ids of the trials in each trials file named (part file names, as
/// they appear under `trials/`), in the order named.
pub fn trial_ids_in(
    run_dir: &Path,
    names: &[String],
) -> Result<Vec<(String, Vec<String>)>, TraceError> {
    let dir = run_dir.join(crate::schema::TRIALS_DIR);
    names
        .iter()
        .map(|name| Ok((name.clone(), trial_ids_of(&dir.join(name))?)))
        .collect()
}

/// The `trial_id` column of one trials file.
pub(crate) fn trial_ids_of(path: &Path) -> Result<Vec<String>, TraceError> {
    let mut ids = Vec::new();
    if !each_text_of(path, col::TRIAL_ID, |id| ids.push(id.to_string()))? {
        return Err(TraceError::Format {
            path: path.to_path_buf(),
            message: "the trials table has no trial_id column".to_string(),
        });
    }
    Ok(ids)
}

/// Hands `each` every non-null value of text column `column` of one file,
/// decoding that column only; false when the file has no such column (a
/// messages file of a run before schema version 3 has no ids).
pub(crate) fn each_text_of(
    path: &Path,
    column: &str,
    mut each: impl FnMut(&str),
) -> Result<bool, TraceError> {
    let mut builder = open_parquet(path)?;
    let schema = builder.parquet_schema();
    if !schema.columns().iter().any(|c| c.path().string() == column) {
        return Ok(false);
    }
    let mask = ProjectionMask::columns(schema, [column]);
    builder = builder.with_projection(mask);
    let format = |message: String| TraceError::Format {
        path: path.to_path_buf(),
        message,
    };
    let reader = builder.build().map_err(|source| TraceError::ParquetRead {
        path: path.to_path_buf(),
        source,
    })?;
    for batch in reader {
        let batch = batch.map_err(|e| format(e.to_string()))?;
        let values = batch
            .column_by_name(column)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
            .ok_or_else(|| format(format!("the column {column} does not hold text")))?;
        values.iter().flatten().for_each(&mut each);
    }
    Ok(true)
}

/// Which columns a read of a table's rows decodes.
#[derive(Debug, Clone, Copy)]
pub enum Columns<'a> {
    All,
    /// These (a list column by its name).
    Only(&'a [&'a str]),
    /// Every column but the model calls' `message_ids` lists, where the
    /// file has their lengths (`messages_sent`): a page that shows how many
    /// messages a call sent then decompresses no list, the largest column of
    /// a spans part after command output.
    AllButSentIds,
}

impl Columns<'_> {
    /// The mask for a file of `schema`; `None` reads every column.
    fn mask(self, schema: &SchemaDescriptor) -> Option<ProjectionMask> {
        match self {
            Columns::All => None,
            Columns::Only(names) => Some(ProjectionMask::columns(schema, names.iter().copied())),
            Columns::AllButSentIds => {
                // A leaf's top-level column: a list's leaf is `name.list.item`.
                let columns = schema.columns();
                let top = |i: usize| columns[i].path().parts().first().map(String::as_str);
                if !(0..columns.len()).any(|i| top(i) == Some(col::MESSAGES_SENT)) {
                    return None;
                }
                let kept = (0..columns.len()).filter(|&i| top(i) != Some(col::MESSAGE_IDS));
                Some(ProjectionMask::leaves(schema, kept))
            }
        }
    }
}

/// The rows of `path` whose text column `key` holds one of `wanted`, with
/// `columns` (they must include `key` for the caller to see it), from the
/// row groups that the column's statistics and bloom filter (where the file
/// has them) do not rule out. Read in two passes over one parse of the
/// footer: `key` alone, then the rows found only, the pages of the other
/// columns that hold none of them skipped by the file's offset index rather
/// than decompressed — tool output and message text are most of a file's
/// bytes, and a reader of a few trials needs few of its rows.
pub(crate) fn read_rows_where<S: BuildHasher>(
    path: &Path,
    key: &str,
    wanted: &HashSet<&str, S>,
    columns: Columns,
) -> Result<Vec<RecordBatch>, TraceError> {
    let footer = Footer::read(path)?;
    (footer.rows_where(key, wanted, columns)?).ok_or_else(|| no_column(path, key))
}

/// The error of a file without column `key`.
pub(crate) fn no_column(path: &Path, key: &str) -> TraceError {
    TraceError::Format {
        path: path.to_path_buf(),
        message: format!("the table has no {key} column"),
    }
}

/// One Parquet file's footer, parsed once for reads of its rows by more
/// than one key ([`read_rows_where`]).
pub(crate) struct Footer {
    path: PathBuf,
    file: File,
    metadata: ArrowReaderMetadata,
}

impl Footer {
    /// Parses the footer of `path`, with its offset index where it has one.
    pub(crate) fn read(path: &Path) -> Result<Footer, TraceError> {
        let file = open_run_file(path).map_err(|e| TraceError::io(path, e))?;
        let options = ArrowReaderOptions::new().with_page_index_policy(PageIndexPolicy::Optional);
        let metadata = ArrowReaderMetadata::load(&file, options).map_err(|source| {
            TraceError::ParquetRead {
                path: path.to_path_buf(),
                source,
            }
        })?;
        Ok(Footer {
            path: path.to_path_buf(),
            file,
            metadata,
        })
    }

    /// [`read_rows_where`] of this file; `None` when it has no column `key`.
    pub(crate) fn rows_where<S: BuildHasher>(
        &self,
        key: &str,
        wanted: &HashSet<&str, S>,
        columns: Columns,
    ) -> Result<Option<Vec<RecordBatch>>, TraceError> {
        let schema = self.metadata.parquet_schema();
        let Some(key_column) = (schema.columns().iter()).position(|c| c.path().string() == key)
        else {
            return Ok(None);
        };
        let groups = self.groups_that_may_hold(key_column, wanted)?;
        if groups.is_empty() {
            return Ok(Some(Vec::new()));
        }
        let keep = self.wanted_rows(key, key_column, &groups, wanted)?;
        let kept: usize = keep.iter().map(BooleanArray::true_count).sum();
        if kept == 0 {
            return Ok(Some(Vec::new()));
        }
        // Batches sized to the rows kept: a reader allocates each column's
        // buffers for a whole batch (1024 rows by default), so a file's few
        // wanted rows would otherwise hold a batch's worth of memory per
        // column and per file, and a report's five hundred trials sit in
        // hundreds of files of a large run.
        let mut rows = (self.builder(self.metadata.clone())?.with_row_groups(groups))
            .with_batch_size(kept.min(MAX_BATCH_ROWS));
        if let Some(mask) = columns.mask(schema) {
            rows = rows.with_projection(mask);
        }
        let rows = rows
            .with_row_selection(RowSelection::from_filters(&keep))
            .build()
            .map_err(|source| self.parquet_error(source))?
            .map(|batch| batch.map_err(|e| self.format(e.to_string())))
            .collect::<Result<_, _>>()?;
        Ok(Some(rows))
    }

    /// The row groups whose statistics and bloom filter on `column` do not
    /// rule out every key of `wanted`.
    fn groups_that_may_hold<S: BuildHasher>(
        &self,
        column: usize,
        wanted: &HashSet<&str, S>,
    ) -> Result<Vec<usize>, TraceError> {
        // One reader for the bloom filters of every row group.
        let filters = self.builder(self.metadata.clone())?;
        let mut groups = Vec::new();
        for (i, group) in self.metadata.metadata().row_groups().iter().enumerate() {
            if may_hold(group, column, wanted)
                && bloom_may_hold(&filters, i, column, wanted)
                    .map_err(|source| self.parquet_error(source))?
            {
                groups.push(i);
            }
        }
        Ok(groups)
    }

    /// For each batch of column `key` (leaf `column`) in `groups`, which of
    /// its rows hold one of `wanted`.
    fn wanted_rows<S: BuildHasher>(
        &self,
        key: &str,
        column: usize,
        groups: &[usize],
        wanted: &HashSet<&str, S>,
    ) -> Result<Vec<BooleanArray>, TraceError> {
        let key_only = ProjectionMask::leaves(self.metadata.parquet_schema(), [column]);
        let first = self.metadata.metadata().row_group(groups[0]).column(column);
        let reader = if first.dictionary_page_offset().is_some() {
            // A dictionary-encoded key (a part's trial ids) is read as one:
            // each distinct value is looked up once, not each row's copy.
            let hinted = as_dictionary(self.metadata.schema(), key);
            let options = ArrowReaderOptions::new().with_schema(hinted);
            let metadata = ArrowReaderMetadata::try_new(self.metadata.metadata().clone(), options)
                .map_err(|source| self.parquet_error(source))?;
            // One batch per row group: one lookup of its dictionary.
            self.builder(metadata)?
                .with_batch_size(crate::parts::ROW_GROUP_ROWS)
        } else {
            self.builder(self.metadata.clone())?
        };
        let batches = (reader.with_row_groups(groups.to_vec()))
            .with_projection(key_only)
            .build()
            .map_err(|source| self.parquet_error(source))?;
        batches
            .map(|batch| {
                let batch = batch.map_err(|e| self.format(e.to_string()))?;
                (batch.column_by_name(key))
                    .and_then(|keys| rows_holding(keys.as_ref(), wanted))
                    .ok_or_else(|| self.format(format!("{key} is not text")))
            })
            .collect()
    }

    fn builder(
        &self,
        metadata: ArrowReaderMetadata,
    ) -> Result<ParquetRecordBatchReaderBuilder<File>, TraceError> {
        let file = (self.file.try_clone()).map_err(|e| TraceError::io(&self.path, e))?;
        Ok(ParquetRecordBatchReaderBuilder::new_with_metadata(
            file, metadata,
        ))
    }

    fn parquet_error(&self, source: parquet::errors::ParquetError) -> TraceError {
        TraceError::ParquetRead {
            path: self.path.clone(),
            source,
        }
    }

    fn format(&self, message: String) -> TraceError {
        TraceError::Format {
            path: self.path.clone(),
            message,
        }
    }
}

/// `schema` with its text column `key` read as a dictionary of text.
fn as_dictionary(schema: &SchemaRef, key: &str) -> SchemaRef {
    let fields: Vec<Field> = (schema.fields().iter())
        .map(|field| match field.name() == key {
            true => Field::new(
                key,
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
                field.is_nullable(),
            ),
            false => field.as_ref().clone(),
        })
        .collect();
    Arc::new(Schema::new_with_metadata(fields, schema.metadata().clone()))
}

/// Which of `keys` (text, or a dictionary of text) are in `wanted`; `None`
/// when they are neither.
fn rows_holding<S: BuildHasher>(
    keys: &dyn Array,
    wanted: &HashSet<&str, S>,
) -> Option<BooleanArray> {
    let holds =
        |values: &StringArray, i: usize| values.is_valid(i) && wanted.contains(values.value(i));
    if let Some(keys) = keys.as_dictionary_opt::<Int32Type>() {
        let values = keys.values().as_string_opt::<i32>()?;
        let member: Vec<bool> = (0..values.len()).map(|i| holds(values, i)).collect();
        return Some(
            (keys.keys().iter())
                .map(|k| {
                    let k = k.and_then(|k| usize::try_from(k).ok());
                    Some(k.and_then(|k| member.get(k).copied()) == Some(true))
                })
                .collect(),
        );
    }
    let keys = keys.as_string_opt::<i32>()?;
    Some((0..keys.len()).map(|i| Some(holds(keys, i))).collect())
}

/// Opens one Parquet file for reading, errors naming it.
pub(crate) fn open_parquet(
    path: &Path,
) -> Result<ParquetRecordBatchReaderBuilder<File>, TraceError> {
    let file = open_run_file(path).map_err(|e| TraceError::io(path, e))?;
    ParquetRecordBatchReaderBuilder::try_new(file).map_err(|source| TraceError::ParquetRead {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads a table as Arrow batches, each with the file it came from, decoding
/// `columns`: the spans table carries every command's output, which a scan
/// for a few columns has no need to decode.
pub fn read_table_files(
    run_dir: &Path,
    table: &str,
    columns: Columns,
) -> Result<Vec<(PathBuf, RecordBatch)>, TraceError> {
    let mut batches = Vec::new();
    for path in table_files(run_dir, table)? {
        let parquet_error = |source| TraceError::ParquetRead {
            path: path.clone(),
            source,
        };
        let mut builder = open_parquet(&path)?;
        if let Some(mask) = columns.mask(builder.parquet_schema()) {
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

/// The rows of `trial_ids` in one table (`trials` or `spans`), each batch
/// with the file it came from, decoding `columns` (they must include
/// `trial_id`). A row group whose `trial_id` statistics rule out
/// every wanted trial is not read: parts hold trials in the order they ran,
/// so a few trials of a million are found without decoding the rest.
pub fn read_trial_rows(
    run_dir: &Path,
    table: &str,
    columns: Columns,
    trial_ids: &HashSet<&str>,
) -> Result<Vec<(PathBuf, RecordBatch)>, TraceError> {
    read_trial_rows_in(run_dir, table, columns, trial_ids, None)
}

/// Files a reader of a few trials' rows reads on a thread of its own at
/// least: a file's read is a millisecond or more, a thread's start tens of
/// microseconds.
pub(crate) const FILES_PER_THREAD: usize = 2;

/// [`read_trial_rows`] from the files of the table named in `parts` only,
/// when given (the three tables name a trial's file alike, so a caller that
/// knows which trials file holds a trial need not open the others); names
/// with no such file are skipped.
pub fn read_trial_rows_in(
    run_dir: &Path,
    table: &str,
    columns: Columns,
    trial_ids: &HashSet<&str>,
    parts: Option<&[String]>,
) -> Result<Vec<(PathBuf, RecordBatch)>, TraceError> {
    let mut batches = Vec::new();
    if trial_ids.is_empty() {
        return Ok(batches);
    }
    // Every row of a part's trial_id column is looked up: foldhash, not
    // the standard library's SipHash, which was a tenth of the time a
    // report spent reading its trial pages' spans.
    let trial_ids: foldhash::HashSet<&str> = trial_ids.iter().copied().collect();
    let files = match parts {
        None => table_files(run_dir, table)?,
        Some(names) => {
            let dir = run_dir.join(table);
            let mut files: Vec<PathBuf> = names
                .iter()
                .map(|name| dir.join(name))
                .filter(|path| path.is_file())
                .collect();
            files.sort();
            files.dedup();
            files
        }
    };
    // Read on every core: a report's trial pages read a few trials from
    // each of hundreds of parts, beside its reader of their conversations.
    let per_file = crate::map_on_cores(&files, FILES_PER_THREAD, |path| {
        read_rows_where(path, col::TRIAL_ID, &trial_ids, columns)
    })?;
    for (path, rows) in files.iter().zip(per_file) {
        batches.extend(rows.into_iter().map(|batch| (path.clone(), batch)));
    }
    Ok(batches)
}

/// Whether a row group's range of column `column` (its statistics, bounds
/// even when truncated) can hold one of `keys`; without statistics it can.
fn may_hold<S: BuildHasher>(
    group: &RowGroupMetaData,
    column: usize,
    keys: &HashSet<&str, S>,
) -> bool {
    let Some(stats) = group.column(column).statistics() else {
        return true;
    };
    let (Some(min), Some(max)) = (stats.min_bytes_opt(), stats.max_bytes_opt()) else {
        return true;
    };
    keys.iter()
        .any(|id| min <= id.as_bytes() && id.as_bytes() <= max)
}

/// Whether row group `group`'s bloom filter on column `column` may hold one
/// of `keys`; without a filter (files written before tack wrote them, and
/// columns without one) it may. A filter is a few kilobytes read where the
/// column itself would be decompressed and every value looked up.
fn bloom_may_hold<S: BuildHasher>(
    reader: &ParquetRecordBatchReaderBuilder<File>,
    group: usize,
    column: usize,
    keys: &HashSet<&str, S>,
) -> Result<bool, parquet::errors::ParquetError> {
    let filter = reader.get_row_group_column_bloom_filter(group, column)?;
    Ok(filter.is_none_or(|filter| keys.iter().any(|key| filter.check(*key))))
}

/// Rows in a table.
pub fn count_rows(run_dir: &Path, table: &str) -> Result<usize, TraceError> {
    Ok(read_table(run_dir, table)?
        .iter()
        .map(RecordBatch::num_rows)
        .sum())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design
    use super::*;

    /// A file of one `message_id` column holding `ids`, as tack writes parts.
    fn ids_file(dir: &Path, name: &str, ids: &[&str]) -> PathBuf {
        let path = dir.join(name);
        let schema = Arc::new(Schema::new(vec![Field::new(
            col::MESSAGE_ID,
            DataType::Utf8,
            false,
        )]));
        let column = Arc::new(StringArray::from(ids.to_vec()));
        let batch = RecordBatch::try_new(schema.clone(), vec![column]).unwrap();
        let mut writer =
            crate::parts::parquet_writer(File::create(&path).unwrap(), schema).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        path
    }

    #[test]
    fn rows_are_found_by_a_dictionary_encoded_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part.parquet");
        let trials: Vec<String> = (0..3000).map(|i| format!("trial-{}", i / 5)).collect();
        let rows: Vec<String> = (0..3000).map(|i| format!("row {i}")).collect();
        let schema = Arc::new(Schema::new(vec![
            Field::new(col::TRIAL_ID, DataType::Utf8, false),
            Field::new(col::CONTENT, DataType::Utf8, false),
        ]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(StringArray::from(trials)),
                Arc::new(StringArray::from(rows)),
            ],
        )
        .unwrap();
        let mut writer =
            crate::parts::parquet_writer(File::create(&path).unwrap(), schema).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
        let reader = open_parquet(&path).unwrap();
        let chunk = reader.metadata().row_group(0).column(0);
        assert!(
            chunk.dictionary_page_offset().is_some(),
            "trial ids have a dictionary"
        );

        let wanted = HashSet::from(["trial-3", "trial-577", "trial-9999"]);
        let found = read_rows_where(&path, col::TRIAL_ID, &wanted, Columns::All).unwrap();
        let found: Vec<(String, String)> = found
            .iter()
            .flat_map(|batch| {
                let text = |name| batch.column_by_name(name).unwrap().as_string::<i32>();
                let (trials, rows) = (text(col::TRIAL_ID), text(col::CONTENT));
                (0..batch.num_rows())
                    .map(|i| (trials.value(i).to_string(), rows.value(i).to_string()))
                    .collect::<Vec<_>>()
            })
            .collect();
        let expected: Vec<(String, String)> = (15..20)
            .chain(2885..2890)
            .map(|i| (format!("trial-{}", i / 5), format!("row {i}")))
            .collect();
        assert_eq!(found, expected);
    }

    #[test]
    fn a_part_without_the_ids_wanted_is_passed_over_by_its_bloom_filter() {
        let dir = tempfile::tempdir().unwrap();
        let own: Vec<String> = (0..2000).map(|i| format!("{:016x}", 2 * i)).collect();
        let own: Vec<&str> = own.iter().map(String::as_str).collect();
        let path = ids_file(dir.path(), "part.parquet", &own);
        let reader = open_parquet(&path).unwrap();
        let column = (reader.parquet_schema().columns().iter())
            .position(|c| c.path().string() == col::MESSAGE_ID)
            .unwrap();
        let filter = reader.get_row_group_column_bloom_filter(0, column).unwrap();
        assert!(
            filter.is_some(),
            "message ids are written with a bloom filter"
        );
        // Ids of other parts: in range of the part's statistics, so only
        // the filter rules them out.
        let others: Vec<String> = (0..100).map(|i| format!("{:016x}", 2 * i + 1)).collect();
        let others: HashSet<&str> = others.iter().map(String::as_str).collect();
        assert!(may_hold(reader.metadata().row_group(0), column, &others));
        assert!(!bloom_may_hold(&reader, 0, column, &others).unwrap());
        assert!(
            read_rows_where(&path, col::MESSAGE_ID, &others, Columns::All)
                .unwrap()
                .is_empty()
        );
        // One of its own among them: the filter lets it through and the row
        // is found.
        let mut wanted = others.clone();
        wanted.insert(own[1234]);
        assert!(bloom_may_hold(&reader, 0, column, &wanted).unwrap());
        let rows = read_rows_where(&path, col::MESSAGE_ID, &wanted, Columns::All).unwrap();
        assert_eq!(rows.iter().map(RecordBatch::num_rows).sum::<usize>(), 1);
    }
}
