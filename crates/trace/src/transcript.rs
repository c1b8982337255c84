//! Trials' conversations read back: each trial's row lists its messages by
//! content address, and each message is in the part that stored it first.
//!
//! A million trials make a thousand parts per table, so nothing here reads a
//! whole table: a trial's row is found by the row groups' `trial_id`
//! statistics, and its messages are looked for in its own part first (where
//! everything it said new was stored), then in the other parts in the order
//! they were written (a system prompt is stored by the first trial that sent
//! it), decoding message text only for the rows asked for.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use arrow_array::{Array, ListArray, RecordBatch, StringArray, UInt32Array, UInt64Array};
use tack_protocol::{Message, Role, ToolCall};

use crate::reader::{
    Columns, FILES_PER_THREAD, Footer, no_column, read_trial_rows, read_trial_rows_in, table_files,
};
use crate::recorded::{numbers, strings};
use crate::schema::{MESSAGES_DIR, TRIALS_DIR, col};
use crate::{TableError, TraceError, read_table};

/// One message of a trial's conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct TranscriptMessage {
    /// Its content address; in runs before schema version 3, which had
    /// none, `#<position>`.
    pub id: String,
    /// The sequence number of the event that added it to the conversation.
    pub seq: u64,
    pub message: Message,
}

/// A trial's conversation in the order it grew.
pub fn trial_transcript(
    run_dir: &Path,
    trial_id: &str,
) -> Result<Vec<TranscriptMessage>, TraceError> {
    trial_transcripts(run_dir, &[trial_id])?
        .remove(trial_id)
        .ok_or_else(|| TraceError::Format {
            path: run_dir.to_path_buf(),
            message: format!("trial {trial_id}: no such finished trial in this run"),
        })
}

/// The conversations of `trial_ids`, read together, by trial id. A trial
/// the trials table does not hold is absent; a message its row lists that
/// no part holds is an error naming it.
pub fn trial_transcripts(
    run_dir: &Path,
    trial_ids: &[&str],
) -> Result<HashMap<String, Vec<TranscriptMessage>>, TraceError> {
    trial_transcripts_in(run_dir, trial_ids, None)
}

/// [`trial_transcripts`] of trials whose rows are in the trials files named
/// in `parts`, when given: a caller that knows them spares reading every
/// part's message lists.
pub fn trial_transcripts_in(
    run_dir: &Path,
    trial_ids: &[&str],
    parts: Option<&[String]>,
) -> Result<HashMap<String, Vec<TranscriptMessage>>, TraceError> {
    let wanted: HashSet<&str> = trial_ids.iter().copied().collect();
    let columns = [col::TRIAL_ID, col::MESSAGE_IDS, col::MESSAGE_SEQS];
    let mut listed: HashMap<String, Vec<(String, u64)>> = HashMap::new();
    // Trials in files of runs before schema version 3 (a run resumed by a
    // newer tack has both kinds).
    let mut legacy: HashSet<String> = HashSet::new();
    // Files whose trials are wanted: their messages are looked in first.
    let mut own_parts: Vec<String> = Vec::new();
    for (path, batch) in
        read_trial_rows_in(run_dir, TRIALS_DIR, Columns::Only(&columns), &wanted, parts)?
    {
        let table = TraceError::table(&path);
        let ids = strings(&batch, col::TRIAL_ID).map_err(&table)?;
        if batch.column_by_name(col::MESSAGE_IDS).is_none() {
            legacy.extend((0..batch.num_rows()).map(|i| ids.value(i).to_string()));
            continue;
        }
        for row in 0..batch.num_rows() {
            listed.insert(
                ids.value(row).to_string(),
                transcript_of_row(&batch, row).map_err(&table)?,
            );
        }
        if let Some(name) = path.file_name().and_then(|n| n.to_str())
            && !own_parts.iter().any(|p| p == name)
        {
            own_parts.push(name.to_string());
        }
    }
    let found = find_messages(run_dir, &listed, &own_parts, &wanted)?;
    let mut transcripts = if legacy.is_empty() {
        HashMap::new()
    } else {
        legacy_transcripts(run_dir, &legacy.iter().map(String::as_str).collect())?
    };
    for entry in listed.into_iter().map(|(trial_id, entries)| {
        let messages = entries
            .into_iter()
            .map(|(id, seq)| match found.get(&id) {
                Some(message) => Ok(TranscriptMessage {
                    message: message.clone(),
                    id,
                    seq,
                }),
                None => Err(TraceError::Format {
                    path: run_dir.join(MESSAGES_DIR),
                    message: format!(
                        "trial {trial_id}: message {id} is not in the messages table; \
                             the run is incomplete (was a part file removed?)"
                    ),
                }),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((trial_id, messages))
    }) {
        let (trial_id, messages) = entry?;
        transcripts.insert(trial_id, messages);
    }
    Ok(transcripts)
}

/// Parts searched at once for messages other trials stored: a part's
/// search is mostly its footer and bloom filters, a fraction of a
/// millisecond, so a few at a time keep the cores busy, and the search goes
/// at most a few parts past the last message it needed.
const SEARCHED_AT_ONCE: usize = 8;

/// The messages `listed` for the wanted `trials`, by id: what the trials
/// stored, from their own parts by the parts' trial ids (where the parts
/// have them); then the rest (messages another trial stored first) by id,
/// in [`search_order`], until every one is found. A part's key column is
/// read on its own; the rest of a row is decoded only when it is needed.
fn find_messages(
    run_dir: &Path,
    listed: &HashMap<String, Vec<(String, u64)>>,
    own: &[String],
    trials: &HashSet<&str>,
) -> Result<HashMap<String, Message>, TraceError> {
    let mut needed: foldhash::HashSet<&str> = listed
        .values()
        .flatten()
        .map(|(id, _)| id.as_str())
        .collect();
    let mut found = HashMap::new();
    if needed.is_empty() {
        return Ok(found);
    }
    let dir = run_dir.join(MESSAGES_DIR);
    let own_paths: Vec<PathBuf> = (own.iter())
        .map(|name| dir.join(name))
        .filter(|path| path.is_file())
        .collect();
    // Footers parsed once for both of an own part's reads.
    let own_rows = crate::map_on_cores(&own_paths, FILES_PER_THREAD, |path| {
        let footer = Footer::read(path)?;
        let rows = footer.rows_where(col::TRIAL_ID, trials, Columns::All)?;
        Ok::<_, TraceError>((footer, rows))
    })?;
    let mut footers: HashMap<&Path, Footer> = HashMap::with_capacity(own.len());
    for (path, (footer, rows)) in own_paths.iter().zip(own_rows) {
        if let Some(rows) = rows {
            take_found(&rows, &mut needed, &mut found, path)?;
        }
        footers.insert(path, footer);
    }
    let order = search_order(&own_paths, table_files(run_dir, MESSAGES_DIR)?);
    // A few parts at a time, each on a core of its own, the messages found
    // taken out of those still needed before the next few: the search stops
    // within a few parts of the last one found.
    for parts in order.chunks(SEARCHED_AT_ONCE) {
        if needed.is_empty() {
            break;
        }
        let rows = crate::map_on_cores(parts, 1, |path| {
            let read;
            let footer = match footers.get(path.as_path()) {
                Some(footer) => footer,
                None => {
                    read = Footer::read(path)?;
                    &read
                }
            };
            (footer.rows_where(col::MESSAGE_ID, &needed, Columns::All)?)
                .ok_or_else(|| no_column(path, col::MESSAGE_ID))
        })?;
        for (path, rows) in parts.iter().zip(rows) {
            take_found(&rows, &mut needed, &mut found, path)?;
        }
    }
    Ok(found)
}

/// Moves the messages of `rows` that are `needed` into `found`.
fn take_found(
    rows: &[RecordBatch],
    needed: &mut foldhash::HashSet<&str>,
    found: &mut HashMap<String, Message>,
    path: &Path,
) -> Result<(), TraceError> {
    let table = TraceError::table(path);
    for batch in rows {
        let ids = strings(batch, col::MESSAGE_ID).map_err(&table)?;
        for i in 0..batch.num_rows() {
            let id = ids.value(i);
            if needed.remove(id) {
                found.insert(id.to_string(), message_at(batch, i).map_err(&table)?);
            }
        }
    }
    Ok(())
}

/// Where to look for messages: the trials' own parts, then the parts written
/// before the first of them from both ends at once (nearest first, and
/// earliest first), then the rest. A message another trial stored first is
/// in an earlier part: near the trial's own when trials ran in plan order (a
/// task's instruction, stored by its first trial), in the first parts when
/// they ran interleaved (every task starts early); from both ends, either is
/// found within twice the reads of the better of the two.
fn search_order(own: &[PathBuf], all: Vec<PathBuf>) -> Vec<PathBuf> {
    let is_own: HashSet<&PathBuf> = own.iter().collect();
    let earliest_own = all.iter().position(|path| is_own.contains(path));
    let (earlier, later) = all.split_at(earliest_own.unwrap_or(all.len()));
    let mut order = Vec::with_capacity(all.len().max(own.len()));
    order.extend(own.iter().cloned());
    let (mut start, mut end) = (0, earlier.len());
    while start < end {
        end -= 1;
        order.push(earlier[end].clone());
        if start < end {
            order.push(earlier[start].clone());
            start += 1;
        }
    }
    order.extend(later.iter().filter(|path| !is_own.contains(path)).cloned());
    order
}

/// The (message id, seq) list of one trials row.
fn transcript_of_row(batch: &RecordBatch, row: usize) -> Result<Vec<(String, u64)>, TableError> {
    let lists = numbers::<ListArray>(batch, col::MESSAGE_IDS)?;
    let seq_lists = numbers::<ListArray>(batch, col::MESSAGE_SEQS)?;
    let ids = lists.value(row);
    let ids = ids
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or(TableError::NotAList {
            column: col::MESSAGE_IDS,
            items: "text",
        })?;
    let seqs = seq_lists.value(row);
    let seqs = seqs
        .as_any()
        .downcast_ref::<UInt64Array>()
        .ok_or(TableError::NotAList {
            column: col::MESSAGE_SEQS,
            items: "numbers",
        })?;
    if ids.len() != seqs.len() {
        return Err(TableError::ListLengths);
    }
    Ok((0..ids.len())
        .map(|i| (ids.value(i).to_string(), seqs.value(i)))
        .collect())
}

fn message_at(batch: &RecordBatch, i: usize) -> Result<Message, TableError> {
    let roles = strings(batch, col::ROLE)?;
    let contents = strings(batch, col::CONTENT)?;
    let calls = strings(batch, col::TOOL_CALLS_JSON)?;
    let call_ids = strings(batch, col::TOOL_CALL_ID)?;
    let role: Role = serde_json::from_value(serde_json::Value::String(roles.value(i).to_string()))
        .map_err(TableError::Role)?;
    let tool_calls: Vec<ToolCall> = if calls.is_null(i) {
        Vec::new()
    } else {
        serde_json::from_str(calls.value(i)).map_err(TableError::ToolCalls)?
    };
    Ok(Message {
        role,
        content: contents.value(i).to_string(),
        tool_calls,
        tool_call_id: (!call_ids.is_null(i)).then(|| call_ids.value(i).to_string()),
    })
}

/// Runs before schema version 3 stored each trial's messages by position,
/// with the trial's id on every row.
fn legacy_transcripts(
    run_dir: &Path,
    wanted: &HashSet<&str>,
) -> Result<HashMap<String, Vec<TranscriptMessage>>, TraceError> {
    let messages_dir = run_dir.join(MESSAGES_DIR);
    let table = TraceError::table(&messages_dir);
    let mut by_trial: HashMap<String, Vec<(u32, TranscriptMessage)>> = HashMap::new();
    for batch in read_table(run_dir, MESSAGES_DIR)? {
        // Parts a newer tack wrote into the run store messages by id.
        if batch.column_by_name(col::MESSAGE_INDEX).is_none() {
            continue;
        }
        let trials = strings(&batch, col::TRIAL_ID).map_err(&table)?;
        let indices = numbers::<UInt32Array>(&batch, col::MESSAGE_INDEX).map_err(&table)?;
        let seqs = numbers::<UInt64Array>(&batch, col::SEQ).map_err(&table)?;
        for i in 0..batch.num_rows() {
            if wanted.contains(trials.value(i)) {
                let index = indices.value(i);
                by_trial
                    .entry(trials.value(i).to_string())
                    .or_default()
                    .push((
                        index,
                        TranscriptMessage {
                            id: legacy_message_id(index),
                            seq: seqs.value(i),
                            message: message_at(&batch, i).map_err(&table)?,
                        },
                    ));
            }
        }
    }
    // A trial whose row exists but that recorded no message has an empty
    // conversation, not a missing one.
    for (path, batch) in
        read_trial_rows(run_dir, TRIALS_DIR, Columns::Only(&[col::TRIAL_ID]), wanted)?
    {
        let ids = strings(&batch, col::TRIAL_ID).map_err(TraceError::table(&path))?;
        for i in 0..batch.num_rows() {
            by_trial.entry(ids.value(i).to_string()).or_default();
        }
    }
    Ok(by_trial
        .into_iter()
        .map(|(trial, mut messages)| {
            messages.sort_by_key(|(index, _)| *index);
            (trial, messages.into_iter().map(|(_, m)| m).collect())
        })
        .collect())
}

/// The id a message of a run before schema version 3 goes by: its position
/// in the trial's history, which is what those runs' model calls referred to.
pub fn legacy_message_id(index: u32) -> String {
    format!("#{index}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(names: &[&str]) -> Vec<PathBuf> {
        names.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn messages_are_looked_for_in_own_parts_then_earlier_ones_from_both_ends() {
        let all = parts(&["p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"]);
        let order = search_order(&parts(&["p5", "p6"]), all.clone());
        assert_eq!(
            order,
            parts(&["p5", "p6", "p4", "p0", "p3", "p1", "p2", "p7"])
        );
        // Every part once, whatever the own parts.
        for own in [vec![], parts(&["p0"]), parts(&["p7", "p2"])] {
            let mut order = search_order(&own, all.clone());
            order.sort();
            assert_eq!(order, all);
        }
    }
}
