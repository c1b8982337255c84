//! Column names and Arrow schemas of the three trace tables. Names follow the
//! OpenTelemetry GenAI conventions where they fit, with `.` spelled `_` so
//! that SQL readers need no quoting: `gen_ai_usage_input_tokens` includes
//! cached tokens; cache reads and writes are separate counts; reasoning tokens
//! are part of the output tokens.

use arrow_schema::{DataType, Field, Schema, SchemaRef};
use std::sync::{Arc, OnceLock};

/// Directory names, below `traces/<run-id>/`, of the three tables. Each holds
/// part files, `part-<session>-<seq>.parquet`, of many finished trials each
/// (runs written before schema version 3: one file per trial).
pub const TRIALS_DIR: &str = "trials";
pub const SPANS_DIR: &str = "spans";
pub const MESSAGES_DIR: &str = "messages";
/// Append-only JSON-lines journal of a trial still running (or interrupted).
pub const JOURNAL_DIR: &str = "journal";

pub mod col {
    pub const RUN_ID: &str = "run_id";
    pub const TRIAL_ID: &str = "trial_id";
    pub const VARIANT: &str = "variant";
    pub const TASK: &str = "task";
    pub const TRIAL_INDEX: &str = "trial_index";
    pub const TRIAL_ATTEMPT: &str = "trial_attempt";
    pub const SEED: &str = "seed";
    pub const MODEL: &str = "model";
    pub const OUTCOME: &str = "outcome";
    pub const STOP_REASON: &str = "stop_reason";
    pub const STEPS: &str = "steps";
    pub const TOOL_CALLS: &str = "tool_calls";
    pub const TOOL_ERRORS: &str = "tool_errors";
    pub const INPUT_TOKENS: &str = "gen_ai_usage_input_tokens";
    pub const OUTPUT_TOKENS: &str = "gen_ai_usage_output_tokens";
    pub const CACHE_READ_TOKENS: &str = "gen_ai_usage_cache_read_input_tokens";
    pub const CACHE_WRITE_TOKENS: &str = "gen_ai_usage_cache_creation_input_tokens";
    pub const REASONING_TOKENS: &str = "gen_ai_usage_reasoning_output_tokens";
    pub const TOTAL_TOKENS: &str = "total_tokens";
    pub const COST_USD: &str = "cost_usd";
    pub const RETRIES: &str = "retries";
    pub const INTERVENTIONS: &str = "interventions";
    pub const FEEDBACK_ROUNDS: &str = "feedback_rounds";
    pub const TAMPERED: &str = "tampered";
    pub const SANDBOX_DENIALS: &str = "sandbox_denials";
    pub const COMPACTIONS: &str = "compactions";
    pub const SANDBOX_PROFILE: &str = "sandbox_profile";
    /// Where a trial ran: `host`, `image` (its image's filesystem under
    /// tack's sandbox) or `engine` (a container the engine ran); null in
    /// runs recorded before it was.
    pub const ENVIRONMENT: &str = "environment";
    pub const CHECKS_PASSED: &str = "checks_passed";
    pub const STARTED_AT_MS: &str = "started_at_ms";
    pub const DURATION_MS: &str = "duration_ms";
    pub const ERROR: &str = "error";

    pub const SPAN_ID: &str = "span_id";
    pub const PARENT_SPAN_ID: &str = "parent_span_id";
    pub const SEQ: &str = "seq";
    pub const STEP: &str = "step";
    pub const KIND: &str = "kind";
    /// The model of a model call (or why the harness made it:
    /// `compaction`), the tool of a tool call, the check's name.
    pub const NAME: &str = "name";
    pub const STATUS: &str = "status";
    pub const ERROR_KIND: &str = "error_kind";
    pub const PROVIDER: &str = "gen_ai_provider_name";
    pub const REQUEST_MODEL: &str = "gen_ai_request_model";
    pub const RESPONSE_MODEL: &str = "gen_ai_response_model";
    pub const FINISH_REASON: &str = "gen_ai_response_finish_reason";
    pub const ATTEMPT: &str = "attempt";
    pub const RETRY_WAIT_MS: &str = "retry_wait_ms";
    pub const RATE_LIMIT_WAIT_MS: &str = "rate_limit_wait_ms";
    pub const FAULT: &str = "fault";
    pub const PERMISSION: &str = "permission";
    pub const PERMISSION_RULE: &str = "permission_rule";
    pub const PERMISSION_PART: &str = "permission_part";
    pub const APPROVED: &str = "approved";
    pub const APPROVER: &str = "approver";
    /// Model calls of runs before schema version 3: the messages sent, as
    /// the index range `[messages_from, messages_to)` of the trial's history.
    pub const MESSAGES_FROM: &str = "messages_from";
    pub const MESSAGES_TO: &str = "messages_to";
    /// On a model call: the ids of the messages it sent, in order. On a
    /// trial: its transcript, every message in the order it was added.
    pub const MESSAGE_IDS: &str = "message_ids";
    /// On a model call: how many messages it sent, the length of its
    /// `message_ids`, so that a reader showing the count need not
    /// decompress the lists (after command output, most of a spans part).
    /// Absent from files written before it was added.
    pub const MESSAGES_SENT: &str = "messages_sent";
    /// On a trial, beside `message_ids`: the sequence number of the event
    /// that added each message, to interleave messages with spans.
    pub const MESSAGE_SEQS: &str = "message_seqs";
    pub const TOOL_NAME: &str = "gen_ai_tool_name";
    pub const TOOL_CALL_ID: &str = "gen_ai_tool_call_id";
    pub const TOOL_ARGUMENTS: &str = "tool_arguments";
    /// What a tool call's model was shown. Runs of schema 3 and later keep
    /// it once, as the tool message answering `gen_ai_tool_call_id` in the
    /// messages table; earlier runs also have it in the spans table.
    pub const TOOL_RESULT: &str = "tool_result";
    pub const EXIT_CODE: &str = "exit_code";
    pub const STDOUT: &str = "stdout";
    pub const STDERR: &str = "stderr";
    pub const TRUNCATED: &str = "truncated";
    pub const CHECK_COMMAND: &str = "check_command";
    pub const CHECK_PASSED: &str = "check_passed";
    pub const CHECK_OUTPUT: &str = "check_output";
    /// On a tool call: the MCP server whose tool it was.
    pub const MCP_SERVER: &str = "mcp_server";

    /// Runs before schema version 3 kept messages per trial, by position.
    pub const MESSAGE_INDEX: &str = "message_index";
    /// A message's content address within its run: 16 hex digits of the
    /// SHA-256 of its role, content, tool calls and tool call id.
    pub const MESSAGE_ID: &str = "message_id";
    pub const ROLE: &str = "role";
    pub const CONTENT: &str = "content";
    pub const TOOL_CALLS_JSON: &str = "tool_calls_json";
}

/// How a count is summed up over a variant's scored trials.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Summary {
    /// The mean per trial (a run report's "Mean steps"; `mean_<column>`
    /// in `--json`).
    Mean,
    /// The sum over the trials (`<column>` in `--json`).
    Sum,
}

/// A count the trials table keeps for each trial: a `UInt32` column,
/// taken from the trial's [`TrialFinished`](tack_protocol::TrialFinished).
/// Everything downstream reads [`TRIAL_COUNTS`]: the trial rows and the
/// per-variant figures of the analysis, the run report's tables, `tack
/// compare` and its report; `tack query` sees the column. So a new count is
/// a field of [`RunTotals`](tack_protocol::RunTotals) with its rule in
/// `RunTotals::observe`, a column in [`trials_schema`] and an entry here.
/// Runs written before a count existed read it as 0.
#[derive(Debug, Clone, Copy)]
pub struct TrialCount {
    /// Its column in the trials table, and its key in `--json`.
    pub column: &'static str,
    /// What it counts, as a table heading says it.
    pub label: &'static str,
    /// How a run report's variant table shows it; `None`: per trial only.
    pub summary: Option<Summary>,
    /// `tack compare` shows its mean per trial on both sides, with an
    /// interval of the difference.
    pub compared: bool,
    /// Its value for one trial.
    pub of: fn(&tack_protocol::TrialFinished) -> u32,
}

/// Every count of the trials table, in the order reports show them.
pub const TRIAL_COUNTS: [TrialCount; 8] = [
    TrialCount {
        column: col::STEPS,
        label: "Steps",
        summary: Some(Summary::Mean),
        compared: true,
        of: |f| f.totals.steps,
    },
    TrialCount {
        column: col::RETRIES,
        label: "Retries",
        summary: Some(Summary::Sum),
        compared: true,
        of: |f| f.totals.retries,
    },
    TrialCount {
        column: col::INTERVENTIONS,
        label: "Interventions",
        summary: Some(Summary::Sum),
        compared: true,
        of: |f| f.totals.interventions,
    },
    TrialCount {
        column: col::FEEDBACK_ROUNDS,
        label: "Feedback rounds",
        summary: Some(Summary::Sum),
        compared: false,
        of: |f| f.feedback_rounds,
    },
    TrialCount {
        column: col::SANDBOX_DENIALS,
        label: "Sandbox denials",
        summary: Some(Summary::Sum),
        compared: false,
        of: |f| f.totals.sandbox_denials,
    },
    TrialCount {
        column: col::COMPACTIONS,
        label: "Compactions",
        summary: Some(Summary::Sum),
        compared: true,
        of: |f| f.totals.compactions,
    },
    TrialCount {
        column: col::TOOL_ERRORS,
        label: "Tool errors",
        summary: Some(Summary::Sum),
        compared: false,
        of: |f| f.totals.tool_errors,
    },
    TrialCount {
        column: col::TOOL_CALLS,
        label: "Tool calls",
        summary: None,
        compared: false,
        of: |f| f.totals.tool_calls,
    },
];

/// Free-text columns: what commands printed, what the model was shown,
/// arguments and errors. Readers fetch them, never filter on their range.
pub const BULK_TEXT: [&str; 11] = [
    col::TOOL_ARGUMENTS,
    col::STDOUT,
    col::STDERR,
    col::CHECK_COMMAND,
    col::CHECK_OUTPUT,
    col::ERROR,
    col::CONTENT,
    col::TOOL_CALLS_JSON,
    col::SANDBOX_DENIALS,
    col::PERMISSION_RULE,
    col::PERMISSION_PART,
];

/// Values of the `kind` column of the spans table.
pub mod kind {
    pub const MODEL_CALL: &str = "model_call";
    pub const TOOL_CALL: &str = "tool_call";
    pub const CHECK: &str = "check";
    /// A tool call that waited for an approver; `duration_ms` is the wait.
    pub const APPROVAL: &str = "approval";
}

fn field(name: &str, data_type: DataType, nullable: bool) -> Field {
    Field::new(name, data_type, nullable)
}

/// A list column's type: lists of non-null `item`s.
pub fn list_of(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(item, false)))
}

/// A schema built once and shared (every part file of a table is written
/// with the same one).
fn cached(cell: &'static OnceLock<SchemaRef>, fields: fn() -> Vec<Field>) -> SchemaRef {
    cell.get_or_init(|| Arc::new(Schema::new(fields()))).clone()
}

/// One row per trial.
pub fn trials_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    cached(&SCHEMA, || {
        use DataType::*;
        vec![
            field(col::RUN_ID, Utf8, false),
            field(col::TRIAL_ID, Utf8, false),
            field(col::VARIANT, Utf8, false),
            field(col::TASK, Utf8, false),
            field(col::TRIAL_INDEX, UInt32, false),
            field(col::TRIAL_ATTEMPT, UInt32, false),
            field(col::SEED, UInt64, false),
            field(col::MODEL, Utf8, false),
            field(col::OUTCOME, Utf8, false),
            field(col::STOP_REASON, Utf8, false),
            field(col::STEPS, UInt32, false),
            field(col::TOOL_CALLS, UInt32, false),
            field(col::TOOL_ERRORS, UInt32, false),
            field(col::INPUT_TOKENS, UInt64, false),
            field(col::OUTPUT_TOKENS, UInt64, false),
            field(col::CACHE_READ_TOKENS, UInt64, false),
            field(col::CACHE_WRITE_TOKENS, UInt64, false),
            field(col::REASONING_TOKENS, UInt64, false),
            field(col::TOTAL_TOKENS, UInt64, false),
            field(col::COST_USD, Float64, true),
            field(col::RETRIES, UInt32, false),
            field(col::INTERVENTIONS, UInt32, false),
            field(col::FEEDBACK_ROUNDS, UInt32, false),
            field(col::TAMPERED, Boolean, false),
            field(col::SANDBOX_DENIALS, UInt32, true),
            field(col::COMPACTIONS, UInt32, false),
            field(col::ENVIRONMENT, Utf8, true),
            field(col::CHECKS_PASSED, Boolean, true),
            field(col::STARTED_AT_MS, Int64, false),
            field(col::DURATION_MS, UInt64, false),
            field(col::ERROR, Utf8, true),
            field(col::MESSAGE_IDS, list_of(Utf8), false),
            field(col::MESSAGE_SEQS, list_of(UInt64), false),
        ]
    })
}

/// One row per model call, tool call and check, in sequence order.
pub fn spans_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    cached(&SCHEMA, || {
        use DataType::*;
        vec![
            field(col::RUN_ID, Utf8, false),
            field(col::TRIAL_ID, Utf8, false),
            field(col::SPAN_ID, UInt32, false),
            field(col::PARENT_SPAN_ID, UInt32, true),
            field(col::SEQ, UInt64, false),
            field(col::STEP, UInt32, true),
            field(col::KIND, Utf8, false),
            field(col::NAME, Utf8, false),
            field(col::STARTED_AT_MS, Int64, false),
            field(col::DURATION_MS, UInt64, false),
            field(col::STATUS, Utf8, false),
            field(col::ERROR_KIND, Utf8, true),
            field(col::ERROR, Utf8, true),
            field(col::PROVIDER, Utf8, true),
            field(col::REQUEST_MODEL, Utf8, true),
            field(col::RESPONSE_MODEL, Utf8, true),
            field(col::FINISH_REASON, Utf8, true),
            field(col::INPUT_TOKENS, UInt64, true),
            field(col::OUTPUT_TOKENS, UInt64, true),
            field(col::CACHE_READ_TOKENS, UInt64, true),
            field(col::CACHE_WRITE_TOKENS, UInt64, true),
            field(col::REASONING_TOKENS, UInt64, true),
            field(col::COST_USD, Float64, true),
            field(col::ATTEMPT, UInt32, true),
            field(col::RETRY_WAIT_MS, UInt64, true),
            field(col::RATE_LIMIT_WAIT_MS, UInt64, true),
            field(col::FAULT, Utf8, true),
            field(col::MESSAGE_IDS, list_of(Utf8), true),
            field(col::MESSAGES_SENT, UInt32, true),
            field(col::TOOL_NAME, Utf8, true),
            field(col::TOOL_CALL_ID, Utf8, true),
            field(col::TOOL_ARGUMENTS, Utf8, true),
            field(col::EXIT_CODE, Int32, true),
            field(col::STDOUT, Utf8, true),
            field(col::STDERR, Utf8, true),
            field(col::TRUNCATED, Boolean, true),
            field(col::PERMISSION, Utf8, true),
            field(col::PERMISSION_RULE, Utf8, true),
            field(col::PERMISSION_PART, Utf8, true),
            field(col::APPROVED, Boolean, true),
            field(col::APPROVER, Utf8, true),
            field(col::SANDBOX_PROFILE, Utf8, true),
            field(col::SANDBOX_DENIALS, Utf8, true),
            field(col::CHECK_COMMAND, Utf8, true),
            field(col::CHECK_PASSED, Boolean, true),
            field(col::CHECK_OUTPUT, Utf8, true),
            field(col::MCP_SERVER, Utf8, true),
        ]
    })
}

/// One row per distinct message of the run: a system prompt or instruction
/// that every trial sent, or a tool result that repeats, is stored once, in
/// the part of the trial that sent it first (`trial_id`), beside that
/// trial's other new messages: a reader of a trial's transcript finds them
/// by the part's few distinct trial ids instead of looking up every message
/// id the part holds.
pub fn messages_schema() -> SchemaRef {
    static SCHEMA: OnceLock<SchemaRef> = OnceLock::new();
    cached(&SCHEMA, || {
        use DataType::*;
        vec![
            field(col::RUN_ID, Utf8, false),
            field(col::TRIAL_ID, Utf8, false),
            field(col::MESSAGE_ID, Utf8, false),
            field(col::ROLE, Utf8, false),
            field(col::CONTENT, Utf8, false),
            field(col::TOOL_CALLS_JSON, Utf8, true),
            field(col::TOOL_CALL_ID, Utf8, true),
        ]
    })
}
