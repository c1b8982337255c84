//! A finished trial read back as the conversation it had: what `replay`
//! needs to answer the same way again.

use std::collections::HashSet;
use std::path::Path;

use arrow_array::{Array, RecordBatch, StringArray, UInt32Array, UInt64Array};
use tack_protocol::{FinishReason, Message, Role, Usage};

use crate::schema::{SPANS_DIR, TRIALS_DIR, col, kind};
use crate::{Columns, TableError, TraceError, read_table_files, read_trial_rows, trial_transcript};

/// The model's answers of one trial, in order, each with the finish reason
/// and usage of the call that produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedAnswers {
    pub model: String,
    pub answers: Vec<(Message, FinishReason, Usage)>,
}

pub fn recorded_answers(run_dir: &Path, trial_id: &str) -> Result<RecordedAnswers, TraceError> {
    let messages: Vec<Message> = trial_transcript(run_dir, trial_id)?
        .into_iter()
        .map(|entry| entry.message)
        .filter(|message| message.role == Role::Assistant)
        .collect();
    let mut calls: Vec<(u64, String, FinishReason, Usage)> = Vec::new();
    let wanted = HashSet::from([trial_id]);
    for (path, batch) in read_trial_rows(run_dir, SPANS_DIR, Columns::All, &wanted)? {
        calls.extend(answered_calls(&batch, trial_id).map_err(TraceError::table(&path))?);
    }
    calls.sort_by_key(|(seq, ..)| *seq);
    if messages.len() != calls.len() {
        return Err(TraceError::Format {
            path: run_dir.to_path_buf(),
            message: format!(
                "trial {trial_id}: {} assistant messages but {} answered model calls; the trace \
                 is incomplete",
                messages.len(),
                calls.len()
            ),
        });
    }
    let model = calls.first().map(|c| c.1.clone()).unwrap_or_default();
    let answers = messages
        .into_iter()
        .zip(calls)
        .map(|(message, (_, _, finish, usage))| (message, finish, usage))
        .collect();
    Ok(RecordedAnswers { model, answers })
}

pub(crate) fn strings<'b>(
    batch: &'b RecordBatch,
    name: &'static str,
) -> Result<&'b StringArray, TableError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or(TableError::NotText(name))
}

pub(crate) fn numbers<'b, T: 'static>(
    batch: &'b RecordBatch,
    name: &'static str,
) -> Result<&'b T, TableError> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or(TableError::WrongType(name))
}

fn answered_calls(
    batch: &RecordBatch,
    trial_id: &str,
) -> Result<Vec<(u64, String, FinishReason, Usage)>, TableError> {
    let trials = strings(batch, col::TRIAL_ID)?;
    let kinds = strings(batch, col::KIND)?;
    let statuses = strings(batch, col::STATUS)?;
    let models = strings(batch, col::RESPONSE_MODEL)?;
    let finishes = strings(batch, col::FINISH_REASON)?;
    let seqs = numbers::<UInt64Array>(batch, col::SEQ)?;
    let input = numbers::<UInt64Array>(batch, col::INPUT_TOKENS)?;
    let output = numbers::<UInt64Array>(batch, col::OUTPUT_TOKENS)?;
    let mut out = Vec::new();
    for i in 0..batch.num_rows() {
        let answered = trials.value(i) == trial_id
            && kinds.value(i) == kind::MODEL_CALL
            && statuses.value(i) == "ok";
        if !answered {
            continue;
        }
        let finish = match finishes.value(i) {
            "stop" => FinishReason::Stop,
            "tool_calls" => FinishReason::ToolCalls,
            "length" => FinishReason::Length,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_string()),
        };
        let usage = Usage {
            input_tokens: input.value(i),
            output_tokens: output.value(i),
            ..Usage::default()
        };
        out.push((seqs.value(i), models.value(i).to_string(), finish, usage));
    }
    Ok(out)
}

/// Which variant and task a trial of the run belongs to.
pub fn trial_identity(run_dir: &Path, trial_id: &str) -> Result<(String, String), TraceError> {
    let wanted = HashSet::from([trial_id]);
    let columns = [col::TRIAL_ID, col::VARIANT, col::TASK];
    for (path, batch) in read_trial_rows(run_dir, TRIALS_DIR, Columns::Only(&columns), &wanted)? {
        let table = TraceError::table(&path);
        let ids = strings(&batch, col::TRIAL_ID).map_err(&table)?;
        let variants = strings(&batch, col::VARIANT).map_err(&table)?;
        let tasks = strings(&batch, col::TASK).map_err(&table)?;
        if let Some(i) = (0..batch.num_rows()).find(|i| ids.value(*i) == trial_id) {
            return Ok((variants.value(i).to_string(), tasks.value(i).to_string()));
        }
    }
    Err(TraceError::NoTrial(Box::new(crate::no_trial(
        run_dir, trial_id,
    ))))
}

/// One row of a run's trials table, as far as resuming needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedTrial {
    pub trial_id: String,
    pub variant: String,
    pub task: String,
    pub trial_index: u32,
    /// 0 for the first attempt; runs before schema version 3 had only that.
    pub attempt: u32,
    pub outcome: String,
}

/// Every trial the run's tables hold, in no particular order.
pub fn recorded_trials(run_dir: &Path) -> Result<Vec<RecordedTrial>, TraceError> {
    let wanted = [
        col::TRIAL_ID,
        col::VARIANT,
        col::TASK,
        col::TRIAL_INDEX,
        col::TRIAL_ATTEMPT,
        col::OUTCOME,
    ];
    let mut out = Vec::new();
    for (path, batch) in read_table_files(run_dir, TRIALS_DIR, Columns::Only(&wanted))? {
        let table = TraceError::table(&path);
        let ids = strings(&batch, col::TRIAL_ID).map_err(&table)?;
        let variants = strings(&batch, col::VARIANT).map_err(&table)?;
        let tasks = strings(&batch, col::TASK).map_err(&table)?;
        let indices = numbers::<UInt32Array>(&batch, col::TRIAL_INDEX).map_err(&table)?;
        let attempts = numbers::<UInt32Array>(&batch, col::TRIAL_ATTEMPT).ok();
        let outcomes = strings(&batch, col::OUTCOME).map_err(&table)?;
        for i in 0..batch.num_rows() {
            out.push(RecordedTrial {
                trial_id: ids.value(i).to_string(),
                variant: variants.value(i).to_string(),
                task: tasks.value(i).to_string(),
                trial_index: indices.value(i),
                attempt: attempts.map_or(0, |a| a.value(i)),
                outcome: outcomes.value(i).to_string(),
            });
        }
    }
    Ok(out)
}
