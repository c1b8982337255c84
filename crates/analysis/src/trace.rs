//! One trial's full trace: its spans and messages, for a trial page.

use crate::AnalysisError;
use crate::batch::BatchColumns;
use crate::frame::{self, Frame};
use crate::trials::TrialRow;
use polars::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::path::{Path, PathBuf};
use tack_protocol::ToolErrorKind;
use tack_trace::schema::{SPANS_DIR, col, kind};

/// Everything recorded about one trial.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TrialTrace {
    pub trial: TrialRow,
    /// Model calls, tool calls, approvals and checks in `seq` order.
    pub spans: Vec<SpanRow>,
    /// The conversation, in the order it grew. Each message appears once; a
    /// model call's `message_ids` says which it was sent.
    pub messages: Vec<MessageRow>,
}

/// One row of the spans table. Which optional fields are set depends on
/// `kind` (`schema::kind::*`): model calls have the `gen_ai_*`-derived
/// fields, `attempt`, `retry_wait_ms`, `rate_limit_wait_ms` and, under the
/// `chaos` wrapper, `fault`; tool calls the
/// `tool_*`/`exit_code`/`stdout`/`stderr` fields and, when permissions were
/// on, `permission*`; approvals (a tool call that waited for an approver)
/// the tool's name, call id and arguments, `permission*`, `approved`,
/// `approver`, the approver's reason in `error` and the wait in
/// `duration_ms`; checks the `check_*` fields and `exit_code`. Columns added
/// after a trace was written read as `None`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SpanRow {
    pub span_id: u32,
    pub parent_span_id: Option<u32>,
    pub seq: u64,
    pub step: Option<u32>,
    pub kind: String,
    pub name: String,
    pub started_at_ms: i64,
    pub duration_ms: u64,
    pub status: String,
    pub error_kind: Option<String>,
    pub error: Option<String>,
    // Model calls.
    pub provider: Option<String>,
    pub request_model: Option<String>,
    pub response_model: Option<String>,
    pub finish_reason: Option<String>,
    pub input_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    pub cache_read_tokens: Option<u64>,
    pub cache_write_tokens: Option<u64>,
    pub reasoning_tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    /// 1 for the first attempt at a model call; retries count up.
    pub attempt: Option<u32>,
    /// The backoff waited before this attempt.
    pub retry_wait_ms: Option<u64>,
    /// How long the call waited for a shared provider rate limit.
    pub rate_limit_wait_ms: Option<u64>,
    /// A fault injected on purpose by the `chaos(...)` wrapper:
    /// `transport_error` on a failed attempt; `malformed_json`,
    /// `unknown_tool`, `wrong_types` or `truncated` on a successful call
    /// whose answer was corrupted.
    pub fault: Option<String>,
    /// On a model call: the ids of the messages it sent, in order. `None`
    /// where a reader of trial pages left the lists unread
    /// ([`crate::trial_traces_in_batches`]); `messages_sent` counts them.
    pub message_ids: Option<Vec<String>>,
    /// On a model call: how many messages it sent.
    pub messages_sent: Option<u32>,
    // Tool calls.
    pub tool_name: Option<String>,
    pub tool_call_id: Option<String>,
    pub tool_arguments: Option<String>,
    /// What the model was shown.
    pub tool_result: Option<String>,
    pub exit_code: Option<i32>,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    pub truncated: Option<bool>,
    // Tool calls and approvals.
    /// The permission verdict: `allow`, `ask` or `deny` (`ask` on approvals).
    pub permission: Option<String>,
    /// The rule behind the verdict; for an approval, why approval was needed.
    pub permission_rule: Option<String>,
    /// The part of a compound command the verdict was about.
    pub permission_part: Option<String>,
    // Approvals.
    pub approved: Option<bool>,
    /// Who decided: `rules`, `approve_all`, `script: …`, `interactive…`.
    pub approver: Option<String>,
    // Checks.
    pub check_command: Option<String>,
    pub check_passed: Option<bool>,
    pub check_output: Option<String>,
    /// The MCP server of a tool call to one.
    pub mcp_server: Option<String>,
}

/// One conversation message.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MessageRow {
    /// Its position in the trial's conversation.
    pub message_index: u32,
    /// Its content address in the run (`#<position>` in runs written
    /// before messages had one).
    pub message_id: String,
    pub seq: u64,
    /// `system`, `user`, `assistant` or `tool`.
    pub role: String,
    pub content: String,
    /// The assistant's tool calls as JSON (`[{id, name, arguments}]`).
    pub tool_calls_json: Option<String>,
    /// For a tool message, the call it answers.
    pub tool_call_id: Option<String>,
}

/// Trial ids become file names; refuse anything that could leave the table
/// directory.
pub(crate) fn check_trial_id(trial_id: &str) -> Result<(), AnalysisError> {
    if !tack_protocol::is_plain_name(trial_id) {
        return Err(AnalysisError::InvalidTrialId {
            trial_id: trial_id.to_string(),
        });
    }
    Ok(())
}

/// A scan of spans files whose columns `schema` has (see
/// [`frame::scan_as`]), with the columns added since the first traces were
/// written (null in older files).
pub(crate) fn scan_spans(
    dir: &Path,
    files: &[PathBuf],
    schema: &SchemaRef,
) -> Result<LazyFrame, AnalysisError> {
    frame::with_columns(
        frame::scan_as(dir, SPANS_DIR, files, schema, None)?,
        &added_span_columns(),
        dir,
        SPANS_DIR,
    )
}

/// Span columns that some files lack, with their types: those added after the
/// first traces were written (older files read as nulls there), and
/// `tool_result`, which schema 3 stopped writing (it is the tool message).
fn added_span_columns() -> [(&'static str, DataType, Expr); 14] {
    [
        (
            col::MESSAGE_IDS,
            DataType::List(Box::new(DataType::String)),
            lit(NULL),
        ),
        (col::MESSAGES_SENT, DataType::UInt32, lit(NULL)),
        (col::MESSAGES_FROM, DataType::UInt32, lit(NULL)),
        (col::MESSAGES_TO, DataType::UInt32, lit(NULL)),
        (col::RETRY_WAIT_MS, DataType::UInt64, lit(NULL)),
        (col::RATE_LIMIT_WAIT_MS, DataType::UInt64, lit(NULL)),
        (col::FAULT, DataType::String, lit(NULL)),
        (col::PERMISSION, DataType::String, lit(NULL)),
        (col::PERMISSION_RULE, DataType::String, lit(NULL)),
        (col::PERMISSION_PART, DataType::String, lit(NULL)),
        (col::APPROVED, DataType::Boolean, lit(NULL)),
        (col::APPROVER, DataType::String, lit(NULL)),
        (col::TOOL_RESULT, DataType::String, lit(NULL)),
        (col::MCP_SERVER, DataType::String, lit(NULL)),
    ]
}

fn is_denied_call() -> Expr {
    col(col::KIND)
        .eq(lit(kind::TOOL_CALL))
        .and(col(col::ERROR_KIND).eq(lit(ToolErrorKind::Denied.as_str())))
}

fn is_injected_fault() -> Expr {
    col(col::KIND)
        .eq(lit(kind::MODEL_CALL))
        .and(col(col::FAULT).is_not_null())
}

/// What one trial's spans say that its row in the trials table does not.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct SpanCounts {
    /// Tool calls refused by a permission rule or the approver.
    pub denied_calls: u32,
    /// Model calls with a fault injected by the `chaos` wrapper, per kind.
    pub faults: BTreeMap<String, u32>,
    /// Time the model calls waited for a shared rate limit.
    pub rate_limit_wait_ms: u64,
}

impl SpanCounts {
    /// The counts of one trial's spans.
    pub(crate) fn of(spans: &[SpanRow]) -> SpanCounts {
        let mut counts = SpanCounts::default();
        for span in spans {
            let is_tool_call = span.kind == kind::TOOL_CALL;
            if is_tool_call && span.error_kind.as_deref() == Some(ToolErrorKind::Denied.as_str()) {
                counts.denied_calls = counts.denied_calls.saturating_add(1);
            }
            if span.kind == kind::MODEL_CALL
                && let Some(fault) = &span.fault
            {
                let count = counts.faults.entry(fault.clone()).or_default();
                *count = count.saturating_add(1);
            }
            counts.rate_limit_wait_ms = counts
                .rate_limit_wait_ms
                .saturating_add(span.rate_limit_wait_ms.unwrap_or(0));
        }
        counts
    }

    /// All injected faults, whatever their kind.
    pub(crate) fn injected_faults(&self) -> u32 {
        self.faults
            .values()
            .fold(0u32, |sum, &count| sum.saturating_add(count))
    }
}

/// Names of the flags of [`count_flags`].
const IS_DENIED: &str = "is_denied_call";
const IS_FAULT: &str = "is_injected_fault";

/// Whether each span is a denied tool call and an injected fault, as
/// columns: [`counted`] and [`count_aggregates`] read them, so each span's
/// kind (a string) is compared once, not again in every expression.
pub(crate) fn count_flags() -> [Expr; 2] {
    [
        is_denied_call().alias(IS_DENIED),
        is_injected_fault().alias(IS_FAULT),
    ]
}

/// The spans that change a count: denied tool calls, injected faults and
/// rate-limit waits. Few spans of a run are: filtering them first keeps the
/// group-bys small. Reads [`count_flags`].
pub(crate) fn counted() -> Expr {
    col(IS_DENIED)
        .or(col(IS_FAULT))
        .or(col(col::RATE_LIMIT_WAIT_MS).gt(lit(0u64)))
}

/// Names of the sums of [`count_aggregates`].
pub(crate) const DENIED: &str = "denied_calls";
pub(crate) const FAULTS: &str = "injected_faults";
pub(crate) const WAIT: &str = "rate_limit_wait_ms_sum";

/// The sums behind [`SpanCounts`] over a group of spans: denied tool
/// calls, injected faults and rate-limit waits.
pub(crate) fn count_aggregates() -> [Expr; 3] {
    [
        col(IS_DENIED).cast(DataType::UInt64).sum().alias(DENIED),
        col(IS_FAULT).cast(DataType::UInt64).sum().alias(FAULTS),
        col(col::RATE_LIMIT_WAIT_MS)
            .cast(DataType::UInt64)
            .sum()
            .alias(WAIT),
    ]
}

/// Denied tool calls, injected faults and rate-limit waits per trial id, of
/// the spans in `spans`; trials with none of them are absent.
///
/// Only the `trial_id`, `kind`, `error_kind`, `fault` and
/// `rate_limit_wait_ms` columns are read: the filter and group-by let Polars
/// push the projection into the Parquet reader, so the large text columns
/// (tool output, check output, arguments) are never decoded. Traces written
/// before `fault` and `rate_limit_wait_ms` existed read as having none.
pub(crate) fn span_counts(
    spans: LazyFrame,
    dir: &Path,
) -> Result<HashMap<String, SpanCounts>, AnalysisError> {
    // One group per trial and fault kind; the group without a fault carries
    // the trial's denials and the waits of its calls without a fault.
    let lazy = spans
        .with_columns(count_flags())
        .filter(counted())
        .group_by([col(col::TRIAL_ID), col(col::FAULT)])
        .agg(count_aggregates());
    let frame = Frame::collect(lazy, dir, SPANS_DIR)?;
    let trial_ids = frame.strs(col::TRIAL_ID)?;
    let fault = frame.opt_strs(col::FAULT)?;
    let denied = frame.u32s(DENIED)?;
    let faults = frame.u32s(FAULTS)?;
    let wait = frame.u64s(WAIT)?;
    let mut out: HashMap<String, SpanCounts> = HashMap::new();
    for (i, trial_id) in trial_ids.into_iter().enumerate() {
        let counts = out.entry(trial_id).or_default();
        counts.denied_calls = counts.denied_calls.saturating_add(denied[i]);
        counts.rate_limit_wait_ms = counts.rate_limit_wait_ms.saturating_add(wait[i]);
        if let Some(kind) = &fault[i]
            && faults[i] > 0
        {
            let count = counts.faults.entry(kind.clone()).or_default();
            *count = count.saturating_add(faults[i]);
        }
    }
    Ok(out)
}

/// A trial's conversation as message rows.
pub(crate) fn message_rows(transcript: Vec<tack_trace::TranscriptMessage>) -> Vec<MessageRow> {
    transcript
        .into_iter()
        .enumerate()
        .map(|(index, entry)| MessageRow {
            message_index: index as u32,
            message_id: entry.id,
            seq: entry.seq,
            role: entry.message.role.as_str().to_string(),
            content: entry.message.content,
            tool_calls_json: (!entry.message.tool_calls.is_empty())
                .then(|| serde_json::to_string(&entry.message.tool_calls).unwrap_or_default()),
            tool_call_id: entry.message.tool_call_id,
        })
        .collect()
}

/// Gives each tool call without a stored result (every one since schema 3)
/// the tool message that answered it: the result is stored once, as that
/// message. Calls answered by id in order, so a reused id pairs up in turn.
pub(crate) fn attach_tool_results(spans: &mut [SpanRow], messages: &[MessageRow]) {
    let mut answers: HashMap<&str, VecDeque<&str>> = HashMap::new();
    for message in messages {
        if let Some(id) = &message.tool_call_id {
            answers
                .entry(id.as_str())
                .or_default()
                .push_back(&message.content);
        }
    }
    for span in spans.iter_mut().filter(|s| s.kind == kind::TOOL_CALL) {
        let Some(id) = span.tool_call_id.as_deref() else {
            continue;
        };
        let answer = answers.get_mut(id).and_then(VecDeque::pop_front);
        if span.tool_result.is_none() {
            span.tool_result = answer.map(str::to_string);
        }
    }
}

/// The ids a model call sent: listed in current runs; a position range in
/// runs before schema version 3.
fn sent_ids(
    listed: Option<Vec<String>>,
    from: Option<u32>,
    to: Option<u32>,
) -> Option<Vec<String>> {
    listed.or_else(|| Some((from?..to?).map(tack_trace::legacy_message_id).collect()))
}

pub(crate) fn span_rows(f: &BatchColumns) -> Result<Vec<SpanRow>, AnalysisError> {
    let span_id = f.u32s(col::SPAN_ID)?;
    let parent = f.opt_u32s(col::PARENT_SPAN_ID)?;
    let seq = f.u64s(col::SEQ)?;
    let step = f.opt_u32s(col::STEP)?;
    let kind = f.strs(col::KIND)?;
    let name = f.strs(col::NAME)?;
    let started = f.i64s(col::STARTED_AT_MS)?;
    let duration = f.u64s(col::DURATION_MS)?;
    let status = f.strs(col::STATUS)?;
    let error_kind = f.opt_strs(col::ERROR_KIND)?;
    let error = f.opt_strs(col::ERROR)?;
    let provider = f.opt_strs(col::PROVIDER)?;
    let request_model = f.opt_strs(col::REQUEST_MODEL)?;
    let response_model = f.opt_strs(col::RESPONSE_MODEL)?;
    let finish_reason = f.opt_strs(col::FINISH_REASON)?;
    let input = f.opt_u64s(col::INPUT_TOKENS)?;
    let output = f.opt_u64s(col::OUTPUT_TOKENS)?;
    let cache_read = f.opt_u64s(col::CACHE_READ_TOKENS)?;
    let cache_write = f.opt_u64s(col::CACHE_WRITE_TOKENS)?;
    let reasoning = f.opt_u64s(col::REASONING_TOKENS)?;
    let cost = f.opt_f64s(col::COST_USD)?;
    let attempt = f.opt_u32s(col::ATTEMPT)?;
    let retry_wait_ms = f.opt_u64s(col::RETRY_WAIT_MS)?;
    let rate_limit_wait_ms = f.opt_u64s(col::RATE_LIMIT_WAIT_MS)?;
    let fault = f.opt_strs(col::FAULT)?;
    let mut message_ids = f.opt_str_lists(col::MESSAGE_IDS)?;
    let messages_from = f.opt_u32s(col::MESSAGES_FROM)?;
    let messages_sent = f.opt_u32s(col::MESSAGES_SENT)?;
    let messages_to = f.opt_u32s(col::MESSAGES_TO)?;
    let tool_name = f.opt_strs(col::TOOL_NAME)?;
    let tool_call_id = f.opt_strs(col::TOOL_CALL_ID)?;
    let arguments = f.opt_strs(col::TOOL_ARGUMENTS)?;
    let result = f.opt_strs(col::TOOL_RESULT)?;
    let exit_code = f.opt_i64s(col::EXIT_CODE)?;
    let stdout = f.opt_strs(col::STDOUT)?;
    let stderr = f.opt_strs(col::STDERR)?;
    let truncated = f.opt_bools(col::TRUNCATED)?;
    let permission = f.opt_strs(col::PERMISSION)?;
    let permission_rule = f.opt_strs(col::PERMISSION_RULE)?;
    let permission_part = f.opt_strs(col::PERMISSION_PART)?;
    let approved = f.opt_bools(col::APPROVED)?;
    let approver = f.opt_strs(col::APPROVER)?;
    let check_command = f.opt_strs(col::CHECK_COMMAND)?;
    let check_passed = f.opt_bools(col::CHECK_PASSED)?;
    let check_output = f.opt_strs(col::CHECK_OUTPUT)?;
    let mcp_server = f.opt_strs(col::MCP_SERVER)?;
    Ok((0..f.height())
        .map(|i| {
            let ids = sent_ids(message_ids[i].take(), messages_from[i], messages_to[i]);
            // Files before `messages_sent` count their lists.
            let sent = messages_sent[i].or_else(|| {
                let count = ids.as_ref()?.len();
                Some(u32::try_from(count).unwrap_or(u32::MAX))
            });
            SpanRow {
                span_id: span_id[i],
                parent_span_id: parent[i],
                seq: seq[i],
                step: step[i],
                kind: kind[i].clone(),
                name: name[i].clone(),
                started_at_ms: started[i],
                duration_ms: duration[i],
                status: status[i].clone(),
                error_kind: error_kind[i].clone(),
                error: error[i].clone(),
                provider: provider[i].clone(),
                request_model: request_model[i].clone(),
                response_model: response_model[i].clone(),
                finish_reason: finish_reason[i].clone(),
                input_tokens: input[i],
                output_tokens: output[i],
                cache_read_tokens: cache_read[i],
                cache_write_tokens: cache_write[i],
                reasoning_tokens: reasoning[i],
                cost_usd: cost[i],
                attempt: attempt[i],
                retry_wait_ms: retry_wait_ms[i],
                rate_limit_wait_ms: rate_limit_wait_ms[i],
                fault: fault[i].clone(),
                message_ids: ids,
                messages_sent: sent,
                tool_name: tool_name[i].clone(),
                tool_call_id: tool_call_id[i].clone(),
                tool_arguments: arguments[i].clone(),
                tool_result: result[i].clone(),
                // The schema's exit code is Int32; read via i64 and narrow.
                exit_code: exit_code[i].and_then(|c| i32::try_from(c).ok()),
                stdout: stdout[i].clone(),
                stderr: stderr[i].clone(),
                truncated: truncated[i],
                permission: permission[i].clone(),
                permission_rule: permission_rule[i].clone(),
                permission_part: permission_part[i].clone(),
                approved: approved[i],
                approver: approver[i].clone(),
                check_command: check_command[i].clone(),
                check_passed: check_passed[i],
                check_output: check_output[i].clone(),
                mcp_server: mcp_server[i].clone(),
            }
        })
        .collect())
}
