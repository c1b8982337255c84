//! A finished trial read back as the conversation it had: what `replay`
//! needs to answer the same way again.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use arrow_array::{Array, ListArray, RecordBatch, StringArray, UInt32Array, UInt64Array};
use tack_protocol::{FinishReason, Message, Role, ToolCall, Usage};

use crate::schema::{MESSAGES_DIR, SPANS_DIR, TRIALS_DIR, col, kind};
use crate::{TraceError, read_table, read_table_files};

/// The model's answers of one trial, in order, each with the finish reason
/// and usage of the call that produced it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedAnswers {
    pub model: String,
    pub answers: Vec<(Message, FinishReason, Usage)>,
}

pub fn recorded_answers(run_dir: &Path, trial_id: &str) -> Result<RecordedAnswers, TraceError> {
    let missing = |what: &str| TraceError::Format {
        path: run_dir.to_path_buf(),
        message: format!("trial {trial_id}: {what}"),
    };
    let messages: Vec<Message> = trial_transcript(run_dir, trial_id)?
        .into_iter()
        .map(|entry| entry.message)
        .filter(|message| message.role == Role::Assistant)
        .collect();
    let mut calls: Vec<(u64, String, FinishReason, Usage)> = Vec::new();
    for batch in read_table(run_dir, SPANS_DIR)? {
        calls.extend(answered_calls(&batch, trial_id).map_err(|m| missing(&m))?);
    }
    calls.sort_by_key(|(seq, ..)| *seq);
    if messages.len() != calls.len() {
        return Err(missing(&format!(
            "{} assistant messages but {} answered model calls; the trace is incomplete",
            messages.len(),
            calls.len()
        )));
    }
    let model = calls.first().map(|c| c.1.clone()).unwrap_or_default();
    let answers = messages
        .into_iter()
        .zip(calls)
        .map(|(message, (_, _, finish, usage))| (message, finish, usage))
        .collect();
    Ok(RecordedAnswers { model, answers })
}

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
    let format = |message: String| TraceError::Format {
        path: run_dir.to_path_buf(),
        message: format!("trial {trial_id}: {message}"),
    };
    let wanted = [col::TRIAL_ID, col::MESSAGE_IDS, col::MESSAGE_SEQS];
    let mut listed: Option<Vec<(String, u64)>> = None;
    for (_, batch) in read_table_files(run_dir, TRIALS_DIR, Some(&wanted))? {
        if batch.column_by_name(col::MESSAGE_IDS).is_none() {
            return legacy_transcript(run_dir, trial_id);
        }
        let ids = strings(&batch, col::TRIAL_ID).map_err(format)?;
        if let Some(row) = (0..batch.num_rows()).find(|i| ids.value(*i) == trial_id) {
            listed = Some(transcript_of_row(&batch, row).map_err(format)?);
            break;
        }
    }
    let listed = listed.ok_or_else(|| format("no such finished trial in this run".to_string()))?;
    let needed: HashSet<&str> = listed.iter().map(|(id, _)| id.as_str()).collect();
    let mut found: HashMap<String, Message> = HashMap::new();
    for (_, batch) in read_table_files(run_dir, MESSAGES_DIR, None)? {
        for (id, message) in stored_messages(&batch).map_err(format)? {
            if needed.contains(id.as_str()) {
                found.insert(id, message);
            }
        }
    }
    listed
        .into_iter()
        .map(|(id, seq)| match found.get(&id) {
            Some(message) => Ok(TranscriptMessage {
                message: message.clone(),
                id,
                seq,
            }),
            None => Err(format(format!("message {id} is not in the messages table"))),
        })
        .collect()
}

/// The (message id, seq) list of one trials row.
fn transcript_of_row(batch: &RecordBatch, row: usize) -> Result<Vec<(String, u64)>, String> {
    let lists = numbers::<ListArray>(batch, col::MESSAGE_IDS)?;
    let seq_lists = numbers::<ListArray>(batch, col::MESSAGE_SEQS)?;
    let ids = lists.value(row);
    let ids = ids
        .as_any()
        .downcast_ref::<StringArray>()
        .ok_or("message_ids is not a list of text")?;
    let seqs = seq_lists.value(row);
    let seqs = seqs
        .as_any()
        .downcast_ref::<UInt64Array>()
        .ok_or("message_seqs is not a list of numbers")?;
    if ids.len() != seqs.len() {
        return Err("message_ids and message_seqs differ in length".to_string());
    }
    Ok((0..ids.len())
        .map(|i| (ids.value(i).to_string(), seqs.value(i)))
        .collect())
}

/// Every message of a messages-table batch, by id.
fn stored_messages(batch: &RecordBatch) -> Result<Vec<(String, Message)>, String> {
    let ids = strings(batch, col::MESSAGE_ID)?;
    (0..batch.num_rows())
        .map(|i| Ok((ids.value(i).to_string(), message_at(batch, i)?)))
        .collect()
}

fn message_at(batch: &RecordBatch, i: usize) -> Result<Message, String> {
    let roles = strings(batch, col::ROLE)?;
    let contents = strings(batch, col::CONTENT)?;
    let calls = strings(batch, col::TOOL_CALLS_JSON)?;
    let call_ids = strings(batch, col::TOOL_CALL_ID)?;
    let role: Role = serde_json::from_value(serde_json::Value::String(roles.value(i).to_string()))
        .map_err(|e| format!("role: {e}"))?;
    let tool_calls: Vec<ToolCall> = if calls.is_null(i) {
        Vec::new()
    } else {
        serde_json::from_str(calls.value(i)).map_err(|e| format!("tool_calls_json: {e}"))?
    };
    Ok(Message {
        role,
        content: contents.value(i).to_string(),
        tool_calls,
        tool_call_id: (!call_ids.is_null(i)).then(|| call_ids.value(i).to_string()),
    })
}

/// Runs before schema version 3 stored each trial's messages by position.
fn legacy_transcript(run_dir: &Path, trial_id: &str) -> Result<Vec<TranscriptMessage>, TraceError> {
    let format = |message: String| TraceError::Format {
        path: run_dir.to_path_buf(),
        message: format!("trial {trial_id}: {message}"),
    };
    let mut messages: Vec<(u32, TranscriptMessage)> = Vec::new();
    for batch in read_table(run_dir, MESSAGES_DIR)? {
        let trials = strings(&batch, col::TRIAL_ID).map_err(format)?;
        let indices = numbers::<UInt32Array>(&batch, col::MESSAGE_INDEX).map_err(format)?;
        let seqs = numbers::<UInt64Array>(&batch, col::SEQ).map_err(format)?;
        for i in 0..batch.num_rows() {
            if trials.value(i) == trial_id {
                let index = indices.value(i);
                messages.push((
                    index,
                    TranscriptMessage {
                        id: legacy_message_id(index),
                        seq: seqs.value(i),
                        message: message_at(&batch, i).map_err(format)?,
                    },
                ));
            }
        }
    }
    messages.sort_by_key(|(index, _)| *index);
    Ok(messages.into_iter().map(|(_, m)| m).collect())
}

/// The id a message of a run before schema version 3 goes by: its position
/// in the trial's history, which is what those runs' model calls referred to.
pub fn legacy_message_id(index: u32) -> String {
    format!("#{index}")
}

fn strings<'b>(batch: &'b RecordBatch, name: &str) -> Result<&'b StringArray, String> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<StringArray>())
        .ok_or_else(|| format!("column {name} is missing or not text"))
}

fn numbers<'b, T: 'static>(batch: &'b RecordBatch, name: &str) -> Result<&'b T, String> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| format!("column {name} is missing or of the wrong type"))
}

fn answered_calls(
    batch: &RecordBatch,
    trial_id: &str,
) -> Result<Vec<(u64, String, FinishReason, Usage)>, String> {
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
    for batch in read_table(run_dir, crate::schema::TRIALS_DIR)? {
        let format = |message: String| TraceError::Format {
            path: run_dir.to_path_buf(),
            message,
        };
        let ids = strings(&batch, col::TRIAL_ID).map_err(format)?;
        let variants = strings(&batch, col::VARIANT).map_err(format)?;
        let tasks = strings(&batch, col::TASK).map_err(format)?;
        if let Some(i) = (0..batch.num_rows()).find(|i| ids.value(*i) == trial_id) {
            return Ok((variants.value(i).to_string(), tasks.value(i).to_string()));
        }
    }
    Err(TraceError::Format {
        path: run_dir.to_path_buf(),
        message: format!(
            "no finished trial `{trial_id}` in this run; see its trials/ directory for the ids"
        ),
    })
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
    for (path, batch) in read_table_files(run_dir, TRIALS_DIR, Some(&wanted))? {
        let format = |message: String| TraceError::Format {
            path: path.clone(),
            message,
        };
        let ids = strings(&batch, col::TRIAL_ID).map_err(format)?;
        let variants = strings(&batch, col::VARIANT).map_err(format)?;
        let tasks = strings(&batch, col::TASK).map_err(format)?;
        let indices = numbers::<UInt32Array>(&batch, col::TRIAL_INDEX).map_err(format)?;
        let attempts = numbers::<UInt32Array>(&batch, col::TRIAL_ATTEMPT).ok();
        let outcomes = strings(&batch, col::OUTCOME).map_err(format)?;
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
