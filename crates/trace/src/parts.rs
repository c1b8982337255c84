//! Part files: each table of a run is written as a few large Parquet files
//! rather than one file per trial. A small file costs a Parquet footer and a
//! file-system entry per trial and compresses nothing across trials; a part
//! holds up to [`PartLimits::trials`] trials, so the same system prompt or
//! tool output compresses once per part, and a million trials are a
//! thousand files per table.
//!
//! A part is written under a temporary name and renamed once complete,
//! spans and messages before trials, so a trial row is only visible once
//! its details are. Until then the trials it holds keep their journals,
//! which is what makes a crash lose nothing.

use std::collections::HashSet;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use arrow_array::{BooleanArray, RecordBatch, StringArray};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_writer::ArrowWriterOptions;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use sha2::{Digest, Sha256};

use crate::TraceError;
use crate::fsutil::temporary_path;
use crate::schema::{MESSAGES_DIR, SPANS_DIR, TRIALS_DIR, col};

/// The tables of a part, in the order a part is made visible.
pub(crate) const PART_TABLES: [&str; 3] = [SPANS_DIR, MESSAGES_DIR, TRIALS_DIR];

/// When a part closes: whichever limit is reached first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartLimits {
    pub trials: usize,
    /// Encoded bytes of the three tables together.
    pub bytes: usize,
    /// A part also closes when a trial finishes this long after the part
    /// opened. Until its part is written a trial is only in its journal,
    /// invisible to `tack report` on the running run; compaction at the end
    /// combines the small parts a slow run leaves.
    pub age: Duration,
}

impl Default for PartLimits {
    fn default() -> Self {
        PartLimits {
            trials: 1000,
            bytes: 128 << 20,
            age: Duration::from_secs(120),
        }
    }
}

/// `part-<session>-<seq>.parquet`: the session numbers each process that
/// wrote to the run (the first run, each resume, each compaction), so two
/// never pick the same name.
pub(crate) fn part_name(session: u32, seq: u32) -> String {
    format!("part-{session:03}-{seq:05}.parquet")
}

/// The session and sequence number of a part file's name.
pub(crate) fn parse_part_name(name: &str) -> Option<(u32, u32)> {
    let stem = name.strip_prefix("part-")?.strip_suffix(".parquet")?;
    let (session, seq) = stem.split_once('-')?;
    Some((session.parse().ok()?, seq.parse().ok()?))
}

/// The first session number no part of the run uses yet.
pub(crate) fn next_session(run_dir: &Path) -> u32 {
    PART_TABLES
        .iter()
        .filter_map(|table| fs::read_dir(run_dir.join(table)).ok())
        .flatten()
        .filter_map(|entry| {
            let name = entry.ok()?.file_name();
            let name = name.to_string_lossy();
            // A temporary part of a dead process still claims its session.
            let name = name.trim_start_matches('.').trim_end_matches(".partial");
            parse_part_name(name).map(|(session, _)| session + 1)
        })
        .max()
        .unwrap_or(0)
}

/// Text columns written without a dictionary, each with the most bytes a
/// data page of it holds (see [`parquet_writer`]).
const UNIQUE_TEXT: [(&str, usize); 6] = [
    (col::MESSAGE_ID, ID_PAGE_BYTES),
    (col::CONTENT, TEXT_PAGE_BYTES),
    (col::TOOL_CALLS_JSON, TEXT_PAGE_BYTES),
    (col::TOOL_CALL_ID, ID_PAGE_BYTES),
    (col::STDOUT, TEXT_PAGE_BYTES),
    (col::CHECK_OUTPUT, TEXT_PAGE_BYTES),
];

/// Rows in a row group at most.
pub(crate) const ROW_GROUP_ROWS: usize = 16 * 1024;

/// Bytes in a data page of [`UNIQUE_TEXT`]'s text at most (the ids:
/// [`ID_PAGE_BYTES`]), before compression (Parquet's default, which the
/// other columns keep, is 1 MiB). A reader of a few trials decompresses
/// every page that holds one of their rows: a
/// trial's output and messages are a few kilobytes, a page of them a
/// hundred trials' worth. Measured on a million-trial run: a report's trial
/// pages read in 0.84-0.89 s instead of 1.1-1.25 s. zstd compresses each
/// page apart and finds fewer repeats: that run is 2.8% bigger with these
/// pages and the id lists' dictionary dropped (below) than before either
/// (2,211.7 against 2,151.7 MB); 128 KiB pages cost 14% for little more.
const TEXT_PAGE_BYTES: usize = 256 * 1024;

/// Bytes in a data page of the id columns of [`UNIQUE_TEXT`] (message
/// ids, tool call ids) at most, before compression. Random ids give zstd
/// little to find across a page, so small pages cost no bytes, and a
/// reader of a few trials
/// decompresses far less of them: a million-trial run's report read its
/// 500 trial pages in 0.70-0.76 s instead of 0.79-0.86 s, and the run was
/// 4 MB smaller (2,159 against 2,163 MB).
const ID_PAGE_BYTES: usize = 32 * 1024;

/// A Parquet writer for one file of a table, as every part is written.
///
/// Sized for traces, where a model call must cost a small fraction of a
/// kilobyte: zstd across a whole part; statistics per row group only (the
/// offset index, by which a reader of a few rows skips the other pages, is
/// kept; no column index) and none on the bulk text columns, whose minimum
/// and maximum no reader filters on; a bloom filter on the messages' ids;
/// no dictionary for ids, id lists, message text and command output, and
/// smaller pages for all but the id lists; timestamps delta-encoded; and no
/// embedded Arrow schema, since the Parquet types say all the tables need.
pub(crate) fn parquet_writer(
    file: File,
    schema: arrow_schema::SchemaRef,
) -> Result<ArrowWriter<File>, parquet::errors::ParquetError> {
    let mut properties = WriterProperties::builder()
        .set_compression(Compression::ZSTD(ZstdLevel::try_new(9)?))
        // Row groups small enough that a reader looking for one trial skips
        // most of a part by its statistics.
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_statistics_truncate_length(Some(32));
    for column in crate::schema::BULK_TEXT {
        properties = properties
            .set_column_statistics_enabled(ColumnPath::from(column), EnabledStatistics::None);
    }
    let list_item = |name: &str| ColumnPath::new(vec![name.into(), "list".into(), "item".into()]);
    for list in [
        crate::schema::col::MESSAGE_IDS,
        crate::schema::col::MESSAGE_SEQS,
    ] {
        properties =
            properties.set_column_statistics_enabled(list_item(list), EnabledStatistics::None);
    }
    // A message is stored once, by the first trial that sent it, so a
    // reader of a trial's transcript looks for the messages it shares in
    // other parts; a bloom filter on the id lets it pass over a part that
    // holds none of them without decoding its ids. Sized for a full row
    // group and folded down to the ids written, so a small part's filter is
    // small. A report's five hundred trial pages look for about seven
    // hundred ids in every part until found: at one in a thousand a filter
    // let half the parts through (a million-trial run: 682 row groups'
    // ids decoded for about 150 that held one); at one in 100,000, one in a
    // hundred, for 4% more bytes of messages (64 KiB for a full row group,
    // not 32).
    let message_id = || ColumnPath::from(col::MESSAGE_ID);
    properties = properties
        .set_column_bloom_filter_enabled(message_id(), true)
        .set_column_bloom_filter_fpp(message_id(), 0.00001)
        .set_column_bloom_filter_max_ndv(message_id(), ROW_GROUP_ROWS as u64);
    // Columns whose values are mostly unique within a part (ids, message
    // text, command output): a dictionary saves them nothing, zstd finds
    // what repeats (measured: within 0.5% of the bytes either way), and a
    // reader of a few rows would have to decompress a whole dictionary page
    // per row group to reach them, where without one the offset index lets
    // it skip every data page that holds none of its rows.
    for (column, page_bytes) in UNIQUE_TEXT {
        properties = properties
            .set_column_dictionary_enabled(ColumnPath::from(column), false)
            .set_column_data_page_size_limit(ColumnPath::from(column), page_bytes);
    }
    // The ids of the messages each model call sent (spans) and each trial's
    // transcript (trials) repeat within a trial, which zstd finds without a
    // dictionary: parts 3% smaller without one (a 20,000-trial run: 49.7
    // against 48.1 MB), and a reader of a few rows no longer decompresses a
    // row group's whole dictionary of ids. Their pages keep the default
    // size: a long trial's calls each list every message before them, and
    // at 256 KiB a run of five 100-step trials was 25% bigger.
    properties = properties.set_column_dictionary_enabled(list_item(col::MESSAGE_IDS), false);
    for column in [col::STARTED_AT_MS, col::SEQ] {
        properties = properties
            .set_column_dictionary_enabled(ColumnPath::from(column), false)
            .set_column_encoding(ColumnPath::from(column), Encoding::DELTA_BINARY_PACKED);
    }
    let options = ArrowWriterOptions::new()
        .with_properties(properties.build())
        .with_skip_arrow_metadata(true);
    ArrowWriter::try_new_with_options(file, schema, options)
}

/// One table's file of the part being written.
struct TableFile {
    path: PathBuf,
    temporary: PathBuf,
    writer: ArrowWriter<File>,
}

impl TableFile {
    fn create(path: PathBuf, schema: arrow_schema::SchemaRef) -> Result<TableFile, TraceError> {
        let temporary = temporary_path(&path);
        let parquet_error = |source| TraceError::Parquet {
            path: temporary.clone(),
            source,
        };
        let file =
            crate::fsutil::create_fresh(&temporary).map_err(|e| TraceError::io(&temporary, e))?;
        let writer = parquet_writer(file, schema).map_err(parquet_error)?;
        Ok(TableFile {
            path,
            temporary,
            writer,
        })
    }

    fn write(&mut self, batch: &RecordBatch) -> Result<(), TraceError> {
        if batch.num_rows() == 0 {
            return Ok(());
        }
        self.writer
            .write(batch)
            .map_err(|source| TraceError::Parquet {
                path: self.temporary.clone(),
                source,
            })
    }

    fn size(&self) -> usize {
        self.writer.bytes_written() + self.writer.in_progress_size()
    }

    /// Completes the file under its temporary name, durably.
    fn finish(self) -> Result<(PathBuf, PathBuf), TraceError> {
        let file = self
            .writer
            .into_inner()
            .map_err(|source| TraceError::Parquet {
                path: self.temporary.clone(),
                source,
            })?;
        file.sync_all()
            .map_err(|e| TraceError::io(&self.temporary, e))?;
        Ok((self.temporary, self.path))
    }
}

/// The rows one trial adds to each table.
#[derive(Debug)]
pub(crate) struct TrialRows {
    pub spans: RecordBatch,
    /// Every message of the trial's transcript; the part writer keeps only
    /// those its run has not stored yet.
    pub messages: RecordBatch,
    pub trials: RecordBatch,
    /// Deleted once the part holding these rows is on disk.
    pub journal: Option<PathBuf>,
}

struct OpenPart {
    spans: TableFile,
    messages: TableFile,
    trials: TableFile,
    trial_count: usize,
    journals: Vec<PathBuf>,
    opened: Instant,
}

/// Writes one run's parts; one per process writing the run.
pub(crate) struct PartWriter {
    run_dir: PathBuf,
    session: u32,
    next_seq: u32,
    limits: PartLimits,
    /// The messages the run has stored, in any part.
    stored: StoredMessages,
    open: Option<OpenPart>,
}

impl std::fmt::Debug for PartWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PartWriter")
            .field("run_dir", &self.run_dir)
            .field("session", &self.session)
            .field("next_seq", &self.next_seq)
            .field("stored_messages", &self.stored.0.len())
            .finish()
    }
}

impl PartWriter {
    /// A writer for a run that may already hold parts: it continues with a
    /// new session and knows which messages are stored.
    pub fn open(run_dir: &Path, limits: PartLimits) -> Result<PartWriter, TraceError> {
        Ok(PartWriter {
            run_dir: run_dir.to_path_buf(),
            session: next_session(run_dir),
            next_seq: 0,
            limits,
            stored: StoredMessages::of_run(run_dir)?,
            open: None,
        })
    }

    pub fn append(&mut self, rows: TrialRows) -> Result<(), TraceError> {
        let messages = self.unstored(&rows.messages)?;
        if self.open.is_none() {
            self.open = Some(self.start_part()?);
        }
        let Some(part) = self.open.as_mut() else {
            return Ok(());
        };
        part.spans.write(&rows.spans)?;
        part.messages.write(&messages)?;
        part.trials.write(&rows.trials)?;
        part.trial_count += 1;
        part.journals.extend(rows.journal);
        let size = part.spans.size() + part.messages.size() + part.trials.size();
        let full = part.trial_count >= self.limits.trials || size >= self.limits.bytes;
        if full || part.opened.elapsed() >= self.limits.age {
            self.flush()?;
        }
        Ok(())
    }

    /// Closes the open part if it opened at least `age` ago.
    pub fn flush_older_than(&mut self, age: Duration) -> Result<(), TraceError> {
        match &self.open {
            Some(part) if part.opened.elapsed() >= age => self.flush(),
            _ => Ok(()),
        }
    }

    /// Closes the open part, if any: its files become visible and the
    /// journals of its trials are removed.
    pub fn flush(&mut self) -> Result<(), TraceError> {
        let Some(part) = self.open.take() else {
            return Ok(());
        };
        let finished = [
            part.spans.finish()?,
            part.messages.finish()?,
            part.trials.finish()?,
        ];
        for (temporary, path) in finished {
            fs::rename(&temporary, &path).map_err(|e| TraceError::io(&path, e))?;
        }
        for journal in part.journals {
            fs::remove_file(&journal).map_err(|e| TraceError::io(&journal, e))?;
        }
        Ok(())
    }

    fn start_part(&mut self) -> Result<OpenPart, TraceError> {
        let name = part_name(self.session, self.next_seq);
        self.next_seq += 1;
        let file =
            |table: &str, schema| TableFile::create(self.run_dir.join(table).join(&name), schema);
        Ok(OpenPart {
            spans: file(SPANS_DIR, crate::schema::spans_schema())?,
            messages: file(MESSAGES_DIR, crate::schema::messages_schema())?,
            trials: file(TRIALS_DIR, crate::schema::trials_schema())?,
            trial_count: 0,
            journals: Vec::new(),
            opened: Instant::now(),
        })
    }

    /// The rows of `messages` whose ids the run has not stored, marking them
    /// stored. Repeats within the batch are dropped too.
    fn unstored(&mut self, messages: &RecordBatch) -> Result<RecordBatch, TraceError> {
        let (kept, _) = self
            .stored
            .drop_stored(messages)
            .map_err(|source| TraceError::Arrow {
                table: MESSAGES_DIR,
                source,
            })?;
        Ok(kept)
    }
}

/// The messages a run has stored, by id. Ids are 64-bit content hashes
/// written as hex: kept as numbers, ten million of them take 160 MB, not
/// the 600 MB their text would.
#[derive(Debug, Default)]
pub(crate) struct StoredMessages(HashSet<u64>);

impl StoredMessages {
    /// Every message the run's parts hold. Runs before schema version 3
    /// have no ids and hold none.
    pub fn of_run(run_dir: &Path) -> Result<StoredMessages, TraceError> {
        let mut stored = StoredMessages::default();
        if !run_dir.join(MESSAGES_DIR).is_dir() {
            return Ok(stored);
        }
        for path in crate::reader::table_files(run_dir, MESSAGES_DIR)? {
            // Read for its ids alone; a file without them holds none.
            crate::reader::each_text_of(&path, col::MESSAGE_ID, |id| {
                stored.0.insert(id_key(id));
            })?;
        }
        Ok(stored)
    }

    /// Whether none of the messages of the messages file `path` is stored
    /// (nor repeated in it); if so they are marked stored. Reads their ids
    /// only: a part whose messages are all new needs no rewriting.
    pub fn take_if_new(&mut self, path: &Path) -> Result<bool, TraceError> {
        let mut keys = Vec::new();
        // A file without ids (before schema version 3) holds none stored.
        crate::reader::each_text_of(path, col::MESSAGE_ID, |id| keys.push(id_key(id)))?;
        for (taken, key) in keys.iter().enumerate() {
            if !self.0.insert(*key) {
                for key in &keys[..taken] {
                    self.0.remove(key);
                }
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// `batch` without the messages already stored, marking the rest
    /// stored, and how many were dropped. A batch without ids (a run before
    /// schema version 3) is kept whole.
    pub fn drop_stored(
        &mut self,
        batch: &RecordBatch,
    ) -> Result<(RecordBatch, usize), arrow_schema::ArrowError> {
        let Some(ids) = message_ids(batch) else {
            return Ok((batch.clone(), 0));
        };
        let keep: BooleanArray = ids
            .iter()
            .map(|id| Some(id.is_none_or(|id| self.0.insert(id_key(id)))))
            .collect();
        let dropped = keep.false_count();
        if dropped == 0 {
            return Ok((batch.clone(), 0));
        }
        let kept = arrow_select::filter::filter_record_batch(batch, &keep)?;
        Ok((kept, dropped))
    }
}

/// A message id as a number: the 16 hex digits it is, or for any other text
/// a hash of it.
fn id_key(id: &str) -> u64 {
    u64::from_str_radix(id, 16).unwrap_or_else(|_| {
        let digest = Sha256::digest(id.as_bytes());
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&digest[..8]);
        u64::from_le_bytes(bytes)
    })
}

fn message_ids(batch: &RecordBatch) -> Option<&StringArray> {
    batch
        .column_by_name(col::MESSAGE_ID)?
        .as_any()
        .downcast_ref::<StringArray>()
}

/// Copies the tables and journals of run `from` into run `into`, renumbering
/// parts so that they follow those `into` already has: how shards become
/// one run. Files of runs before schema version 3 keep their names (one per
/// trial id). Run [`crate::compact`] afterwards to combine the parts and
/// drop messages stored by more than one source.
///
/// A part is linked rather than copied where both runs are on one file
/// system: no writer changes a part once it is written (compaction writes
/// new files and renames them into place), so the two runs can share it,
/// and merging a run of millions of trials costs no second copy of it.
/// Journals are copied: a resumed run rewrites its own.
pub fn adopt_parts(from: &Path, into: &Path) -> Result<(), TraceError> {
    crate::fsutil::check_run_dirs(from)?;
    let base = next_session(into);
    for table in PART_TABLES.iter().chain([&crate::schema::JOURNAL_DIR]) {
        let link = *table != crate::schema::JOURNAL_DIR;
        let source = from.join(table);
        let target = into.join(table);
        fs::create_dir_all(&target).map_err(|e| TraceError::io(&target, e))?;
        let Ok(entries) = fs::read_dir(&source) else {
            continue;
        };
        for entry in entries {
            let entry = entry.map_err(|e| TraceError::io(&source, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue;
            }
            let renamed = match parse_part_name(&name) {
                Some((session, seq)) => part_name(base + session, seq),
                None => name,
            };
            let to = target.join(renamed);
            if to.exists() {
                return Err(TraceError::Format {
                    path: to,
                    message: "two runs hold a file of this name; each trial must come from one run"
                        .to_string(),
                });
            }
            // A run is read from wherever it came from: a link in it (to
            // ~/.ssh/id_rsa) is not a part, and is not copied through.
            let kind = entry
                .file_type()
                .map_err(|e| TraceError::io(&entry.path(), e))?;
            if !kind.is_file() {
                return Err(TraceError::Format {
                    path: entry.path(),
                    message: "is not a regular file (a link is not followed); a run's parts \
                              are files tack wrote"
                        .to_string(),
                });
            }
            let linked = link && fs::hard_link(entry.path(), &to).is_ok();
            if !linked {
                copy_part(&entry.path(), &to)?;
            }
        }
    }
    Ok(())
}

/// Copies the part at `from` to a new file at `to`. Opened as a run's
/// file is, so that a link put in its place since it was listed is not
/// followed.
fn copy_part(from: &Path, to: &Path) -> Result<(), TraceError> {
    let mut source = crate::fsutil::open_run_file(from).map_err(|e| TraceError::io(from, e))?;
    let mut target = crate::fsutil::create_fresh(to).map_err(|e| TraceError::io(to, e))?;
    std::io::copy(&mut source, &mut target).map_err(|e| TraceError::io(to, e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A shard came from elsewhere: a part that is a link (to a key) is not
    /// copied through into the merged run.
    #[test]
    fn a_linked_part_is_refused_not_copied() {
        let (from, into) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let secret = from.path().join("id_rsa");
        fs::write(&secret, "PRIVATE KEY").unwrap();
        fs::create_dir_all(from.path().join(TRIALS_DIR)).unwrap();
        std::os::unix::fs::symlink(&secret, from.path().join(TRIALS_DIR).join(part_name(0, 0)))
            .unwrap();
        let error = adopt_parts(from.path(), into.path()).unwrap_err();
        assert!(error.to_string().contains("not a regular file"), "{error}");
        let copied = fs::read_dir(into.path().join(TRIALS_DIR)).unwrap().count();
        assert_eq!(copied, 0);
    }
}
