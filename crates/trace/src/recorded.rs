//! A finished trial read back as the conversation it had: what `replay`
//! needs to answer the same way again.

use std::path::Path;

use arrow_array::{Array, RecordBatch, StringArray, UInt32Array, UInt64Array};
use tack_protocol::{FinishReason, Message, Role, ToolCall, Usage};

use crate::schema::{MESSAGES_DIR, SPANS_DIR, col, kind};
use crate::{TraceError, read_table};

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
    let mut messages: Vec<(u32, Message)> = Vec::new();
    for batch in read_table(run_dir, MESSAGES_DIR)? {
        messages.extend(assistant_messages(&batch, trial_id).map_err(|m| missing(&m))?);
    }
    messages.sort_by_key(|(index, _)| *index);
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
        .map(|((_, message), (_, _, finish, usage))| (message, finish, usage))
        .collect();
    Ok(RecordedAnswers { model, answers })
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

fn assistant_messages(batch: &RecordBatch, trial_id: &str) -> Result<Vec<(u32, Message)>, String> {
    let trials = strings(batch, col::TRIAL_ID)?;
    let roles = strings(batch, col::ROLE)?;
    let contents = strings(batch, col::CONTENT)?;
    let calls = strings(batch, col::TOOL_CALLS_JSON)?;
    let indices = numbers::<UInt32Array>(batch, col::MESSAGE_INDEX)?;
    let mut out = Vec::new();
    for i in 0..batch.num_rows() {
        if trials.value(i) != trial_id || roles.value(i) != Role::Assistant.as_str() {
            continue;
        }
        let tool_calls: Vec<ToolCall> = if calls.is_null(i) {
            Vec::new()
        } else {
            serde_json::from_str(calls.value(i)).map_err(|e| format!("tool_calls_json: {e}"))?
        };
        out.push((
            indices.value(i),
            Message::assistant(contents.value(i), tool_calls),
        ));
    }
    Ok(out)
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
