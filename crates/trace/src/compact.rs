//! Compaction: after a run, a resume or a merge, small parts are combined
//! into parts of up to [`PartLimits::trials`] trials, and a message stored
//! by two writers (shards, sessions) is kept once.
//!
//! The new files are written under temporary names first; then a plan
//! (`compaction.json`) names what to rename and what to delete, and is
//! carried out. A crash at any point leaves either the old files, or a plan
//! that [`finish_pending`] completes, never a half-compacted run.

use std::collections::HashSet;
use std::fs::{self, File};
use std::path::{Path, PathBuf};

use arrow_array::{Array, RecordBatch, StringArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use serde::{Deserialize, Serialize};

use crate::TraceError;
use crate::fsutil::{temporary_path, write_atomically};
use crate::parts::{
    PART_TABLES, PartLimits, message_key, next_session, parse_part_name, part_name,
};
use crate::schema::{MESSAGES_DIR, TRIALS_DIR, col};

const PLAN_FILE: &str = "compaction.json";

/// What a compaction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Compaction {
    /// Parts (per table) before and after.
    pub parts_before: usize,
    pub parts_after: usize,
    /// Duplicate message rows dropped.
    pub messages_deduplicated: usize,
}

#[derive(Serialize, Deserialize)]
struct Plan {
    /// (temporary, final) pairs, renamed in order.
    rename: Vec<(PathBuf, PathBuf)>,
    remove: Vec<PathBuf>,
}

/// Completes a compaction that a crash interrupted after its plan was
/// written. Everything the plan names was durably written before the plan.
pub fn finish_pending(run_dir: &Path) -> Result<(), TraceError> {
    let path = run_dir.join(PLAN_FILE);
    let Ok(text) = fs::read_to_string(&path) else {
        return Ok(());
    };
    let plan: Plan = serde_json::from_str(&text).map_err(|e| TraceError::Format {
        path: path.clone(),
        message: format!("{e}; the compaction plan is damaged"),
    })?;
    carry_out(&plan)?;
    fs::remove_file(&path).map_err(|e| TraceError::io(&path, e))
}

fn carry_out(plan: &Plan) -> Result<(), TraceError> {
    for (temporary, path) in &plan.rename {
        if temporary.exists() {
            fs::rename(temporary, path).map_err(|e| TraceError::io(path, e))?;
        }
    }
    for path in &plan.remove {
        match fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(TraceError::io(path, e));
            }
            _ => {}
        }
    }
    Ok(())
}

/// One part: its name, present in every table, and its trial count.
struct Part {
    name: String,
    trials: usize,
}

/// The run's parts in the order they were written. Files of runs before
/// schema version 3 (one per trial) are not parts and are left alone.
fn parts(run_dir: &Path) -> Result<Vec<Part>, TraceError> {
    let dir = run_dir.join(TRIALS_DIR);
    let mut names: Vec<(u32, u32, String)> = fs::read_dir(&dir)
        .map_err(|e| TraceError::io(&dir, e))?
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().to_string_lossy().into_owned();
            let (session, seq) = parse_part_name(&name)?;
            Some((session, seq, name))
        })
        .collect();
    names.sort();
    names
        .into_iter()
        .map(|(_, _, name)| {
            let trials = row_count(&dir.join(&name))?;
            Ok(Part { name, trials })
        })
        .collect()
}

fn row_count(path: &Path) -> Result<usize, TraceError> {
    let file = File::open(path).map_err(|e| TraceError::io(path, e))?;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|source| TraceError::Parquet {
            path: path.to_path_buf(),
            source,
        })?;
    Ok(builder.metadata().file_metadata().num_rows().max(0) as usize)
}

/// Groups consecutive parts into bins of at most `limit` trials.
fn bins(parts: Vec<Part>, limit: usize) -> Vec<Vec<Part>> {
    let mut bins: Vec<Vec<Part>> = Vec::new();
    let mut current_trials = 0;
    for part in parts {
        match bins.last_mut() {
            Some(bin) if current_trials + part.trials <= limit => {
                current_trials += part.trials;
                bin.push(part);
            }
            _ => {
                current_trials = part.trials;
                bins.push(vec![part]);
            }
        }
    }
    bins
}

/// Combines the run's small parts and drops duplicate messages.
pub fn compact(run_dir: &Path, limits: PartLimits) -> Result<Compaction, TraceError> {
    finish_pending(run_dir)?;
    let parts = parts(run_dir)?;
    let mut summary = Compaction {
        parts_before: parts.len(),
        ..Compaction::default()
    };
    let session = next_session(run_dir);
    let mut seq = 0;
    let mut seen: HashSet<u64> = HashSet::new();
    let mut plan = Plan {
        rename: Vec::new(),
        remove: Vec::new(),
    };
    let bins = bins(parts, limits.trials.max(1));
    summary.parts_after = bins.len();
    for bin in bins {
        let sources: Vec<&str> = bin.iter().map(|p| p.name.as_str()).collect();
        if let [only] = sources[..] {
            // A part that stays: only its messages may need rewriting, when
            // another writer stored some of them first.
            let path = run_dir.join(MESSAGES_DIR).join(only);
            let (kept, dropped) = copy_messages(std::slice::from_ref(&path), &mut seen)?;
            if dropped > 0 {
                summary.messages_deduplicated += dropped;
                let temporary = write_batches(&path, &kept)?;
                plan.rename.push((temporary, path));
            }
            continue;
        }
        let name = part_name(session, seq);
        seq += 1;
        for table in PART_TABLES {
            let dir = run_dir.join(table);
            let inputs: Vec<PathBuf> = sources.iter().map(|s| dir.join(s)).collect();
            let target = dir.join(&name);
            let batches = if table == MESSAGES_DIR {
                let (kept, dropped) = copy_messages(&inputs, &mut seen)?;
                summary.messages_deduplicated += dropped;
                kept
            } else {
                read_all(&inputs)?
            };
            let temporary = write_batches(&target, &batches)?;
            plan.rename.push((temporary, target));
            plan.remove.extend(inputs);
        }
    }
    if plan.rename.is_empty() {
        return Ok(summary);
    }
    let text = serde_json::to_vec_pretty(&plan).map_err(|e| TraceError::Format {
        path: run_dir.join(PLAN_FILE),
        message: e.to_string(),
    })?;
    write_atomically(&run_dir.join(PLAN_FILE), &text)?;
    finish_pending(run_dir)?;
    Ok(summary)
}

fn read_all(paths: &[PathBuf]) -> Result<Vec<RecordBatch>, TraceError> {
    let mut batches = Vec::new();
    for path in paths {
        let parquet_error = |source| TraceError::Parquet {
            path: path.clone(),
            source,
        };
        let file = File::open(path).map_err(|e| TraceError::io(path, e))?;
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .and_then(|b| b.build())
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

/// The message rows of `paths` whose ids are not in `seen` (adding them),
/// and how many were dropped as duplicates.
fn copy_messages(
    paths: &[PathBuf],
    seen: &mut HashSet<u64>,
) -> Result<(Vec<RecordBatch>, usize), TraceError> {
    let mut dropped = 0;
    let mut kept = Vec::new();
    for batch in read_all(paths)? {
        let Some(ids) = batch
            .column_by_name(col::MESSAGE_ID)
            .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        else {
            kept.push(batch);
            continue;
        };
        let keep: arrow_array::BooleanArray = (0..ids.len())
            .map(|i| Some(seen.insert(message_key(ids.value(i)))))
            .collect();
        dropped += keep.false_count();
        let filtered =
            arrow_select::filter::filter_record_batch(&batch, &keep).map_err(|source| {
                TraceError::Arrow {
                    table: MESSAGES_DIR,
                    source,
                }
            })?;
        kept.push(filtered);
    }
    Ok((kept, dropped))
}

/// Writes `batches` to `path`'s temporary name, durably; returns that name.
pub(crate) fn write_batches(path: &Path, batches: &[RecordBatch]) -> Result<PathBuf, TraceError> {
    let temporary = temporary_path(path);
    let parquet_error = |source| TraceError::Parquet {
        path: temporary.clone(),
        source,
    };
    let Some(schema) = batches.first().map(RecordBatch::schema) else {
        return Err(TraceError::Format {
            path: path.to_path_buf(),
            message: "nothing to write".to_string(),
        });
    };
    let file = File::create(&temporary).map_err(|e| TraceError::io(&temporary, e))?;
    let mut writer = crate::parts::parquet_writer(file, schema).map_err(parquet_error)?;
    for batch in batches {
        writer.write(batch).map_err(parquet_error)?;
    }
    let file = writer.into_inner().map_err(parquet_error)?;
    file.sync_all().map_err(|e| TraceError::io(&temporary, e))?;
    Ok(temporary)
}
