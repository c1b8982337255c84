//! Events to Arrow record batches, one per table.

use std::sync::Arc;

use arrow_array::builder::{ListBuilder, StringBuilder, UInt64Builder};
use arrow_array::{
    ArrayRef, BooleanArray, Float64Array, Int32Array, Int64Array, RecordBatch, StringArray,
    UInt32Array, UInt64Array,
};
use arrow_schema::{DataType, Field};
use sha2::{Digest, Sha256};
use tack_protocol::{Event, Message, TrialFinished, TrialStarted, Usage};

use crate::TraceError;
use crate::schema::{TRIAL_COUNTS, col, kind, messages_schema, spans_schema, trials_schema};

fn strings<T>(rows: &[T], get: impl Fn(&T) -> Option<&str>) -> ArrayRef {
    Arc::new(rows.iter().map(get).collect::<StringArray>())
}

fn strings_owned<T>(rows: &[T], get: impl Fn(&T) -> Option<String>) -> ArrayRef {
    Arc::new(rows.iter().map(get).collect::<StringArray>())
}

fn u32s<T>(rows: &[T], get: impl Fn(&T) -> Option<u32>) -> ArrayRef {
    Arc::new(rows.iter().map(get).collect::<UInt32Array>())
}

fn u64s<T>(rows: &[T], get: impl Fn(&T) -> Option<u64>) -> ArrayRef {
    Arc::new(rows.iter().map(get).collect::<UInt64Array>())
}

fn i64s<T>(rows: &[T], get: impl Fn(&T) -> Option<i64>) -> ArrayRef {
    Arc::new(rows.iter().map(get).collect::<Int64Array>())
}

fn i32s<T>(rows: &[T], get: impl Fn(&T) -> Option<i32>) -> ArrayRef {
    Arc::new(rows.iter().map(get).collect::<Int32Array>())
}

fn f64s<T>(rows: &[T], get: impl Fn(&T) -> Option<f64>) -> ArrayRef {
    Arc::new(rows.iter().map(get).collect::<Float64Array>())
}

fn bools<T>(rows: &[T], get: impl Fn(&T) -> Option<bool>) -> ArrayRef {
    Arc::new(rows.iter().map(get).collect::<BooleanArray>())
}

fn batch(
    table: &'static str,
    schema: arrow_schema::SchemaRef,
    columns: Vec<ArrayRef>,
) -> Result<RecordBatch, TraceError> {
    RecordBatch::try_new(schema, columns).map_err(|source| TraceError::Arrow { table, source })
}

/// The trial's one row, a column per field of [`trials_schema`]: the
/// counts of [`TRIAL_COUNTS`] by their rule, the rest by name.
pub(crate) fn trial_batch(
    started: &TrialStarted,
    finished: &TrialFinished,
    transcript: &Transcript,
) -> Result<RecordBatch, TraceError> {
    let schema = trials_schema();
    let columns = schema
        .fields()
        .iter()
        .map(|field| trial_column(field.name(), started, finished, transcript))
        .collect::<Result<Vec<_>, _>>()?;
    batch("trials", schema, columns)
}

/// One column of a trial's row.
fn trial_column(
    name: &str,
    t: &TrialStarted,
    f: &TrialFinished,
    transcript: &Transcript,
) -> Result<ArrayRef, TraceError> {
    if let Some(count) = TRIAL_COUNTS.iter().find(|c| c.column == name) {
        return Ok(u32s(&[f], |f| Some((count.of)(f))));
    }
    let one = [()];
    let text = |value: Option<&str>| -> ArrayRef { Arc::new(StringArray::from(vec![value])) };
    let usage = |value: u64| u64s(&one, |_| Some(value));
    Ok(match name {
        col::RUN_ID => text(Some(&t.run_id)),
        col::TRIAL_ID => text(Some(&t.trial_id)),
        col::VARIANT => text(Some(&t.variant)),
        col::TASK => text(Some(&t.task)),
        col::TRIAL_INDEX => u32s(&one, |_| Some(t.trial_index)),
        col::TRIAL_ATTEMPT => u32s(&one, |_| Some(t.attempt)),
        col::SEED => u64s(&one, |_| Some(t.seed)),
        col::MODEL => text(Some(&t.model)),
        col::ENVIRONMENT => text(t.environment.map(|e| e.as_str())),
        col::OUTCOME => text(Some(f.outcome.as_str())),
        col::STOP_REASON => text(Some(f.stop_reason.as_str())),
        col::INPUT_TOKENS => usage(f.totals.usage.input_tokens),
        col::OUTPUT_TOKENS => usage(f.totals.usage.output_tokens),
        col::CACHE_READ_TOKENS => usage(f.totals.usage.cache_read_tokens),
        col::CACHE_WRITE_TOKENS => usage(f.totals.usage.cache_write_tokens),
        col::REASONING_TOKENS => usage(f.totals.usage.reasoning_tokens),
        col::TOTAL_TOKENS => usage(f.totals.usage.total()),
        col::COST_USD => f64s(&one, |_| f.totals.cost_usd),
        col::TAMPERED => bools(&one, |_| Some(f.tampered)),
        col::CHECKS_PASSED => bools(&one, |_| f.checks_passed),
        col::STARTED_AT_MS => i64s(&one, |_| Some(t.started_at_ms)),
        col::DURATION_MS => u64s(&one, |_| Some(f.duration_ms)),
        col::ERROR => text(f.error.as_deref()),
        col::MESSAGE_IDS => id_lists([Some(transcript.ids())]),
        col::MESSAGE_SEQS => seq_list(transcript.entries.iter().map(|e| e.seq)),
        other => {
            return Err(TraceError::UnfilledColumn {
                table: "trials",
                column: other.to_string(),
            });
        }
    })
}

/// A list column of message ids, one list (or null) per row.
fn id_lists<'a, I, L>(rows: I) -> ArrayRef
where
    I: IntoIterator<Item = Option<L>>,
    L: IntoIterator<Item = &'a str>,
{
    let item = Arc::new(Field::new_list_field(DataType::Utf8, false));
    let mut builder = ListBuilder::new(StringBuilder::new()).with_field(item);
    for row in rows {
        match row {
            Some(ids) => {
                for id in ids {
                    builder.values().append_value(id);
                }
                builder.append(true);
            }
            None => builder.append(false),
        }
    }
    Arc::new(builder.finish())
}

/// A one-row list column of sequence numbers.
fn seq_list(seqs: impl Iterator<Item = u64>) -> ArrayRef {
    let item = Arc::new(Field::new_list_field(DataType::UInt64, false));
    let mut builder = ListBuilder::new(UInt64Builder::new()).with_field(item);
    for seq in seqs {
        builder.values().append_value(seq);
    }
    builder.append(true);
    Arc::new(builder.finish())
}

/// A message's content address: the same role, content, tool calls and
/// tool call id give the same id in every trial and every run.
pub(crate) fn message_id(message: &Message, tool_calls_json: Option<&str>) -> String {
    let mut hash = Sha256::new();
    for part in [
        message.role.as_str(),
        &message.content,
        tool_calls_json.unwrap_or(""),
        message.tool_call_id.as_deref().unwrap_or(""),
    ] {
        // Length-prefixed, so no two different messages hash the same bytes.
        hash.update((part.len() as u64).to_le_bytes());
        hash.update(part.as_bytes());
    }
    hash.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// One message of a trial's history: its id and the event that added it.
pub(crate) struct TranscriptEntry<'e> {
    pub index: u32,
    pub seq: u64,
    pub id: String,
    pub message: &'e Message,
    pub tool_calls_json: Option<String>,
}

/// A trial's messages in history order, each with its content address.
pub(crate) struct Transcript<'e> {
    pub entries: Vec<TranscriptEntry<'e>>,
}

impl<'e> Transcript<'e> {
    pub fn of(events: &'e [(u64, Event)]) -> Transcript<'e> {
        let mut entries: Vec<TranscriptEntry> = events
            .iter()
            .filter_map(|(seq, event)| match event {
                Event::Message { index, message } => {
                    let calls = (!message.tool_calls.is_empty())
                        .then(|| serde_json::to_string(&message.tool_calls).unwrap_or_default());
                    Some(TranscriptEntry {
                        index: *index,
                        seq: *seq,
                        id: message_id(message, calls.as_deref()),
                        message,
                        tool_calls_json: calls,
                    })
                }
                _ => None,
            })
            .collect();
        entries.sort_by_key(|e| e.index);
        Transcript { entries }
    }

    fn ids(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.id.as_str())
    }

    /// The ids of the messages a model call (event `seq`) sent, given by
    /// history position; positions never recorded (a torn journal) are left
    /// out rather than invented. An empty list comes from a journal written
    /// before calls listed their messages, when each call sent the whole
    /// history recorded before it.
    fn sent(&self, positions: &[u32], seq: u64) -> Vec<&str> {
        if positions.is_empty() {
            return self
                .entries
                .iter()
                .filter(|e| e.seq < seq)
                .map(|e| e.id.as_str())
                .collect();
        }
        positions
            .iter()
            .filter_map(|index| {
                let found = self.entries.binary_search_by_key(index, |e| e.index);
                found.ok().map(|at| self.entries[at].id.as_str())
            })
            .collect()
    }
}

/// A span row: a model call, a tool call or a check, with its sequence number.
struct Span<'e> {
    seq: u64,
    event: &'e Event,
}

impl Span<'_> {
    fn model(&self) -> Option<&tack_protocol::ModelCallRecord> {
        match self.event {
            Event::ModelCall(m) => Some(m),
            _ => None,
        }
    }

    fn tool(&self) -> Option<&tack_protocol::ToolCallRecord> {
        match self.event {
            Event::ToolCall(t) => Some(t),
            _ => None,
        }
    }

    fn approval(&self) -> Option<&tack_protocol::ApprovalRecord> {
        match self.event {
            Event::Approval(a) => Some(a),
            _ => None,
        }
    }

    fn check(&self) -> Option<&tack_protocol::CheckRecord> {
        match self.event {
            Event::Check(c) => Some(c),
            _ => None,
        }
    }

    fn common(&self) -> (u32, &str, &str, i64, u64, &str) {
        match self.event {
            // A call the harness made for itself (a compaction) is named
            // for why; the model is in its own column either way.
            Event::ModelCall(m) => (
                m.span_id,
                kind::MODEL_CALL,
                m.purpose.as_deref().unwrap_or(&m.request_model),
                m.started_at_ms,
                m.duration_ms,
                m.status.as_str(),
            ),
            Event::ToolCall(t) => (
                t.span_id,
                kind::TOOL_CALL,
                &t.tool_name,
                t.started_at_ms,
                t.duration_ms,
                t.status.as_str(),
            ),
            Event::Approval(a) => {
                let status = if a.approved { "ok" } else { "error" };
                (
                    a.span_id,
                    kind::APPROVAL,
                    &a.tool_name,
                    a.started_at_ms,
                    a.wait_ms,
                    status,
                )
            }
            Event::Check(c) => {
                let status = if c.passed { "ok" } else { "error" };
                (
                    c.span_id,
                    kind::CHECK,
                    &c.name,
                    c.started_at_ms,
                    c.duration_ms,
                    status,
                )
            }
            _ => (0, "", "", 0, 0, ""),
        }
    }
}

pub(crate) fn spans_batch(
    started: &TrialStarted,
    events: &[(u64, Event)],
    transcript: &Transcript,
) -> Result<RecordBatch, TraceError> {
    let rows: Vec<Span> = events
        .iter()
        .filter(|(_, e)| {
            matches!(
                e,
                Event::ModelCall(_) | Event::ToolCall(_) | Event::Approval(_) | Event::Check(_)
            )
        })
        .map(|(seq, event)| Span { seq: *seq, event })
        .collect();
    let mut columns = common_columns(started, &rows);
    columns.extend(model_columns(&rows, transcript));
    columns.extend(tool_columns(&rows));
    batch("spans", spans_schema(), columns)
}

/// The spans' columns every kind fills: the trial, the span and its place,
/// its timing, status and error.
fn common_columns(started: &TrialStarted, rows: &[Span]) -> Vec<ArrayRef> {
    vec![
        strings(rows, |_| Some(&started.run_id)),
        strings(rows, |_| Some(&started.trial_id)),
        u32s(rows, |r| Some(r.common().0)),
        u32s(rows, |r| {
            r.tool()
                .map(|t| t.parent_span_id)
                .or(r.approval().map(|a| a.parent_span_id))
                .or(r.model().and_then(|m| m.parent_span_id))
        }),
        u64s(rows, |r| Some(r.seq)),
        u32s(rows, |r| {
            r.model()
                .map(|m| m.step)
                .or(r.tool().map(|t| t.step))
                .or(r.approval().map(|a| a.step))
        }),
        strings(rows, |r| Some(r.common().1)),
        strings(rows, |r| Some(r.common().2)),
        i64s(rows, |r| Some(r.common().3)),
        u64s(rows, |r| Some(r.common().4)),
        strings(rows, |r| Some(r.common().5)),
        strings(rows, |r| {
            r.tool().and_then(|t| t.error_kind.map(|k| k.as_str()))
        }),
        strings(rows, |r| {
            r.model()
                .and_then(|m| m.error.as_deref())
                .or(r.approval().and_then(|a| a.reason.as_deref()))
        }),
    ]
}

/// The model calls' columns: provider, models, usage, cost, retries and
/// the messages sent.
fn model_columns(rows: &[Span], transcript: &Transcript) -> Vec<ArrayRef> {
    let usage = |get: fn(&Usage) -> u64| u64s(rows, move |r| r.model().map(|m| get(&m.usage)));
    let sent: Vec<Option<Vec<&str>>> = rows
        .iter()
        .map(|r| r.model().map(|m| transcript.sent(&m.messages, r.seq)))
        .collect();
    vec![
        strings(rows, |r| r.model().map(|m| m.provider.as_str())),
        strings(rows, |r| r.model().map(|m| m.request_model.as_str())),
        strings(rows, |r| r.model().map(|m| m.response_model.as_str())),
        strings(rows, |r| r.model().and_then(|m| m.finish_reason.as_deref())),
        usage(|u| u.input_tokens),
        usage(|u| u.output_tokens),
        usage(|u| u.cache_read_tokens),
        usage(|u| u.cache_write_tokens),
        usage(|u| u.reasoning_tokens),
        f64s(rows, |r| r.model().and_then(|m| m.cost_usd)),
        u32s(rows, |r| r.model().map(|m| m.attempt)),
        u64s(rows, |r| r.model().map(|m| m.retry_wait_ms)),
        u64s(rows, |r| r.model().map(|m| m.rate_limit_wait_ms)),
        strings(rows, |r| r.model().and_then(|m| m.fault.as_deref())),
        id_lists(
            sent.iter()
                .map(|ids| ids.as_ref().map(|ids| ids.iter().copied())),
        ),
        u32s(&sent, |ids| {
            ids.as_ref()
                .map(|ids| u32::try_from(ids.len()).unwrap_or(u32::MAX))
        }),
    ]
}

/// The tool calls', approvals' and checks' columns.
fn tool_columns(rows: &[Span]) -> Vec<ArrayRef> {
    vec![
        strings(rows, |r| {
            r.tool()
                .map(|t| t.tool_name.as_str())
                .or(r.approval().map(|a| a.tool_name.as_str()))
        }),
        strings(rows, |r| {
            r.tool()
                .map(|t| t.call_id.as_str())
                .or(r.approval().map(|a| a.call_id.as_str()))
        }),
        strings(rows, |r| {
            r.tool()
                .map(|t| t.arguments.as_str())
                .or(r.approval().map(|a| a.arguments.as_str()))
        }),
        i32s(rows, |r| {
            r.tool()
                .and_then(|t| t.exit_code)
                .or(r.check().and_then(|c| c.exit_code))
        }),
        strings(rows, |r| r.tool().and_then(|t| t.stdout.as_deref())),
        strings(rows, |r| r.tool().and_then(|t| t.stderr.as_deref())),
        bools(rows, |r| r.tool().map(|t| t.truncated)),
        strings(rows, |r| {
            r.tool()
                .and_then(|t| t.permission.as_deref())
                .or(r.approval().map(|_| "ask"))
        }),
        strings(rows, |r| {
            r.tool()
                .and_then(|t| t.permission_rule.as_deref())
                .or(r.approval().map(|a| a.rule.as_str()))
        }),
        strings(rows, |r| {
            r.tool()
                .and_then(|t| t.permission_part.as_deref())
                .or(r.approval().map(|a| a.part.as_str()))
        }),
        bools(rows, |r| r.approval().map(|a| a.approved)),
        strings(rows, |r| r.approval().map(|a| a.approver.as_str())),
        strings(rows, |r| {
            r.tool().and_then(|t| t.sandbox_profile.as_deref())
        }),
        strings_owned(rows, |r| {
            r.tool()
                .filter(|t| !t.sandbox_denials.is_empty())
                .map(|t| t.sandbox_denials.join("\n"))
        }),
        strings(rows, |r| r.check().map(|c| c.command.as_str())),
        bools(rows, |r| r.check().map(|c| c.passed)),
        strings(rows, |r| r.check().map(|c| c.output.as_str())),
        strings(rows, |r| r.tool().and_then(|t| t.mcp_server.as_deref())),
    ]
}

/// The rows of the messages table for `entries` of `started`'s trial, each
/// naming that trial; the part they are appended to keeps only those its run
/// has not stored yet.
pub(crate) fn messages_batch(
    started: &TrialStarted,
    entries: &[&TranscriptEntry],
) -> Result<RecordBatch, TraceError> {
    batch(
        "messages",
        messages_schema(),
        vec![
            strings(entries, |_| Some(started.run_id.as_str())),
            strings(entries, |_| Some(started.trial_id.as_str())),
            strings(entries, |e| Some(&e.id)),
            strings(entries, |e| Some(e.message.role.as_str())),
            strings(entries, |e| Some(&e.message.content)),
            strings(entries, |e| e.tool_calls_json.as_deref()),
            strings(entries, |e| e.message.tool_call_id.as_deref()),
        ],
    )
}
