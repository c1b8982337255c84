//! Compaction: after a run, a resume or a merge, small parts are combined
//! into parts of up to [`PartLimits::trials`] trials, and a message stored
//! by two writers (shards, sessions) is kept once.
//!
//! The new files are written under temporary names first; then a plan
//! (`compaction.json`) names what to rename and what to delete, and is
//! carried out. A crash at any point leaves either the old files, or a plan
//! that [`finish_pending`] completes, never a half-compacted run.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::TraceError;
use crate::fsutil::{read_run_text, temporary_path, write_atomically};
use crate::parts::{
    PART_TABLES, PartLimits, StoredMessages, next_session, parquet_writer, parse_part_name,
    part_name,
};
use crate::reader::open_parquet;
use crate::schema::{MESSAGES_DIR, TRIALS_DIR};

const PLAN_FILE: &str = "compaction.json";

/// A plan names each part of a run twice or thrice: a million-trial run
/// has a few thousand.
const PLAN_LIMIT: u64 = 64 << 20;

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
    let text = match read_run_text(&path, PLAN_LIMIT) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(TraceError::io(&path, e)),
    };
    let plan: Plan = serde_json::from_str(&text).map_err(|e| TraceError::Format {
        path: path.clone(),
        message: format!("{e}; the compaction plan is damaged"),
    })?;
    carry_out(run_dir, &plan).map_err(|error| match error {
        PlanError::Io(error) => error,
        PlanError::Outside(named) => TraceError::Format {
            path: path.clone(),
            message: format!(
                "names {}, which is not a part file of this run's tables: refused, nothing \
                 renamed or removed (a run received from elsewhere? remove {PLAN_FILE} if \
                 the run's parts are whole)",
                named.display()
            ),
        },
    })?;
    fs::remove_file(&path).map_err(|e| TraceError::io(&path, e))
}

enum PlanError {
    Io(TraceError),
    Outside(PathBuf),
}

/// Where `named`, a path of a plan, is: the part file of the same table
/// and name in `run_dir`, wherever the plan was written (a run moved after
/// a crash). The plan is the run's, which may come from elsewhere: it must
/// not rename or remove anything but the run's own part files.
fn part_file(run_dir: &Path, named: &Path) -> Result<PathBuf, PlanError> {
    let outside = || PlanError::Outside(named.to_path_buf());
    let name = named
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(outside)?;
    let table = named
        .parent()
        .and_then(Path::file_name)
        .and_then(|t| t.to_str())
        .ok_or_else(outside)?;
    let is_part = name.ends_with(".parquet") || name.ends_with(".parquet.partial");
    if !PART_TABLES.contains(&table) || !tack_protocol::is_plain_name(name) || !is_part {
        return Err(outside());
    }
    let dir = run_dir.join(table);
    // A table linked elsewhere would carry the renames out of the run.
    if !fs::symlink_metadata(&dir).is_ok_and(|meta| meta.is_dir()) {
        return Err(outside());
    }
    Ok(dir.join(name))
}

fn carry_out(run_dir: &Path, plan: &Plan) -> Result<(), PlanError> {
    // Every name is checked before the first change.
    let rename = (plan.rename.iter())
        .map(|(temporary, path)| Ok((part_file(run_dir, temporary)?, part_file(run_dir, path)?)))
        .collect::<Result<Vec<_>, PlanError>>()?;
    let remove = (plan.remove.iter())
        .map(|path| part_file(run_dir, path))
        .collect::<Result<Vec<_>, PlanError>>()?;
    for (temporary, path) in &rename {
        if temporary.exists() {
            fs::rename(temporary, path).map_err(|e| PlanError::Io(TraceError::io(path, e)))?;
        }
    }
    for path in &remove {
        match fs::remove_file(path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(PlanError::Io(TraceError::io(path, e)));
            }
            _ => {}
        }
    }
    Ok(())
}

/// One part: its name, present in every table, its trial count, its bytes
/// in all three tables and their columns.
struct Part {
    name: String,
    trials: usize,
    bytes: u64,
    /// Each table's column names: parts written by tacks of different
    /// versions (a run resumed by a newer one) may differ, and a file holds
    /// one schema.
    layout: Vec<Vec<String>>,
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
            let mut trials = 0;
            let mut bytes = 0;
            let mut layout = Vec::with_capacity(PART_TABLES.len());
            for table in PART_TABLES {
                let path = run_dir.join(table).join(&name);
                bytes += fs::metadata(&path)
                    .map_err(|e| TraceError::io(&path, e))?
                    .len();
                // One read of each file's footer: its columns, and the
                // trials file's rows.
                let file = open_parquet(&path)?;
                if table == TRIALS_DIR {
                    trials = file.metadata().file_metadata().num_rows().max(0) as usize;
                }
                layout.push(
                    file.schema()
                        .fields()
                        .iter()
                        .map(|f| f.name().clone())
                        .collect(),
                );
            }
            Ok(Part {
                name,
                trials,
                bytes,
                layout,
            })
        })
        .collect()
}

/// Groups consecutive parts of the same columns into bins within the part
/// limits.
fn bins(parts: Vec<Part>, limits: PartLimits) -> Vec<Vec<Part>> {
    let mut bins: Vec<Vec<Part>> = Vec::new();
    let (mut trials, mut bytes) = (0, 0);
    for part in parts {
        let fits = trials + part.trials <= limits.trials.max(1)
            && bytes + part.bytes <= limits.bytes as u64;
        let alike = |bin: &Vec<Part>| bin.last().is_some_and(|last| last.layout == part.layout);
        match bins.last_mut() {
            Some(bin) if fits && alike(bin) => {
                trials += part.trials;
                bytes += part.bytes;
                bin.push(part);
            }
            _ => {
                (trials, bytes) = (part.trials, part.bytes);
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
    let mut seen = StoredMessages::default();
    let mut plan = Plan {
        rename: Vec::new(),
        remove: Vec::new(),
    };
    let bins = bins(parts, limits);
    summary.parts_after = bins.len();
    for bin in bins {
        let sources: Vec<&str> = bin.iter().map(|p| p.name.as_str()).collect();
        if let [only] = sources[..] {
            // A part that stays: only its messages may need rewriting, when
            // another writer stored some of them first. Most parts hold
            // none stored before: their ids alone are read.
            let path = run_dir.join(MESSAGES_DIR).join(only);
            if seen.take_if_new(&path)? {
                continue;
            }
            let (temporary, dropped) =
                rewrite(&path, std::slice::from_ref(&path), Some(&mut seen))?;
            if dropped > 0 {
                summary.messages_deduplicated += dropped;
                plan.rename.push((temporary, path));
            } else {
                fs::remove_file(&temporary).map_err(|e| TraceError::io(&temporary, e))?;
            }
            continue;
        }
        let name = part_name(session, seq);
        seq += 1;
        for table in PART_TABLES {
            let dir = run_dir.join(table);
            let inputs: Vec<PathBuf> = sources.iter().map(|s| dir.join(s)).collect();
            let target = dir.join(&name);
            let dedupe = (table == MESSAGES_DIR).then_some(&mut seen);
            let (temporary, dropped) = rewrite(&target, &inputs, dedupe)?;
            summary.messages_deduplicated += dropped;
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

/// Copies the rows of `inputs`, files of one table, batch by batch into the
/// temporary name of `target`, durably; with `dedupe`, messages already
/// stored are dropped. Returns the temporary name and how many rows were
/// dropped. Memory stays at a batch, whatever the parts hold.
fn rewrite(
    target: &Path,
    inputs: &[PathBuf],
    mut dedupe: Option<&mut StoredMessages>,
) -> Result<(PathBuf, usize), TraceError> {
    let temporary = temporary_path(target);
    let parquet_error = |source| TraceError::Parquet {
        path: temporary.clone(),
        source,
    };
    let mut writer = None;
    let mut dropped = 0;
    for input in inputs {
        let builder = open_parquet(input)?;
        let writer = match &mut writer {
            Some(writer) => writer,
            None => {
                let file = crate::fsutil::create_fresh(&temporary)
                    .map_err(|e| TraceError::io(&temporary, e))?;
                let created =
                    parquet_writer(file, builder.schema().clone()).map_err(parquet_error)?;
                writer.insert(created)
            }
        };
        let batches = builder.build().map_err(|source| TraceError::ParquetRead {
            path: input.clone(),
            source,
        })?;
        for batch in batches {
            let batch = batch.map_err(|e| TraceError::Format {
                path: input.clone(),
                message: e.to_string(),
            })?;
            let batch = match dedupe.as_deref_mut() {
                Some(stored) => {
                    let (kept, count) =
                        stored
                            .drop_stored(&batch)
                            .map_err(|error| TraceError::Read {
                                path: input.clone(),
                                error,
                            })?;
                    dropped += count;
                    kept
                }
                None => batch,
            };
            writer.write(&batch).map_err(parquet_error)?;
        }
    }
    let Some(writer) = writer else {
        return Err(TraceError::Format {
            path: target.to_path_buf(),
            message: "no part to compact into it".to_string(),
        });
    };
    let file = writer.into_inner().map_err(parquet_error)?;
    file.sync_all().map_err(|e| TraceError::io(&temporary, e))?;
    Ok((temporary, dropped))
}
