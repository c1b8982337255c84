//! The public event schema: everything a trial records, in the order it
//! happened. The trace crate turns these into Parquet rows; `tack exec --json`
//! (later) streams them as JSON lines. Keep this file the one place where the
//! schema is defined.

use crate::{Message, StopReason, TrialOutcome, Usage};
use serde::{Deserialize, Serialize};
use std::fmt;

/// One event of a trial's stream. The sink numbers events in arrival order;
/// that number is the event's sequence number in the trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    TrialStarted(TrialStarted),
    /// A message appended to the conversation. Each message is recorded once;
    /// model calls refer to the messages they were sent by index range.
    Message {
        index: u32,
        message: Message,
    },
    ModelCall(ModelCallRecord),
    ToolCall(ToolCallRecord),
    /// A call waiting for an approver. Its `Approval` follows once
    /// answered; a session resumed in between asks again.
    ApprovalRequested(ApprovalRequestedRecord),
    Approval(ApprovalRecord),
    Check(CheckRecord),
    TrialFinished(TrialFinished),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialStarted {
    pub run_id: String,
    pub trial_id: String,
    pub variant: String,
    pub task: String,
    pub trial_index: u32,
    /// 0 for a trial's first run; each rerun of the same (variant, task,
    /// trial index), after an infrastructure failure or an interrupted run,
    /// is the next attempt under its own `trial_id`.
    #[serde(default)]
    pub attempt: u32,
    pub seed: u64,
    /// The model id the variant names, e.g. `sim` or `openai:gpt-4o`.
    pub model: String,
    pub started_at_ms: i64,
    /// Where the trial ran (host, image, engine); unknown in runs recorded
    /// before it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<crate::TrialEnvironment>,
}

/// The id of one attempt at one planned trial: `<variant>--<task>--<index>`
/// for the first attempt, `--attempt<k>` appended for each rerun. Ids depend
/// only on the plan, so shards, resumes and merged runs agree on them.
pub fn trial_id(variant: &str, task: &str, trial_index: u32, attempt: u32) -> String {
    if attempt == 0 {
        format!("{variant}--{task}--{trial_index}")
    } else {
        format!("{variant}--{task}--{trial_index}--attempt{attempt}")
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanStatus {
    Ok,
    Error,
}

impl SpanStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SpanStatus::Ok => "ok",
            SpanStatus::Error => "error",
        }
    }
}

/// One request to the model and its answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelCallRecord {
    pub span_id: u32,
    /// 1-based step of the agent loop this call belongs to.
    pub step: u32,
    pub provider: String,
    pub request_model: String,
    pub response_model: String,
    pub started_at_ms: i64,
    pub duration_ms: u64,
    pub finish_reason: Option<String>,
    pub usage: Usage,
    /// Cost in US dollars; `None` when the model has no price (never 0 for
    /// "unknown").
    pub cost_usd: Option<f64>,
    /// The recorded messages the request carried, by their `index`, in the
    /// order sent. A context strategy that drops, replaces or summarises
    /// messages sends a list that is not a prefix of the history. Journals
    /// written before this list existed (when every call sent the whole
    /// history) read back as empty; the trace writer restores the prefix.
    #[serde(default)]
    pub messages: Vec<u32>,
    /// 1 for the first attempt; retries count up.
    pub attempt: u32,
    /// How long the harness waited before this attempt (backoff, Retry-After).
    pub retry_wait_ms: u64,
    /// How long the call waited for a shared rate limit.
    pub rate_limit_wait_ms: u64,
    /// A fault injected on purpose (the `chaos` wrapper), e.g. `malformed_json`.
    pub fault: Option<String>,
    /// Why the harness made this call, when not for a step of the loop:
    /// `compaction` (summarising the older history).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub purpose: Option<String>,
    /// The span this call belongs to: a subagent's calls belong to the
    /// `task` call that started it; the agent's own calls to none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_span_id: Option<u32>,
    pub status: SpanStatus,
    pub error: Option<String>,
}

/// The `purpose` of a model call that compacts the history.
pub const COMPACTION_PURPOSE: &str = "compaction";

/// The `purpose` of a subagent's model calls (a `task` call's child).
pub const SUBAGENT_PURPOSE: &str = "subagent";

/// What the harness asks in a compaction call, after the history it is to
/// summarise. The built-in simulated agent recognises it and summarises.
pub const COMPACTION_PROMPT: &str = "You are compacting the history of a coding agent's session so that it can go on within its context window. Summarise the conversation above for the agent itself: what the task is, what has been done and found (files, commands, results, errors), what is left to do, and anything it must not forget. Be specific and brief. Answer with the summary only.";

/// Why a tool call did not run as asked. Each kind becomes a readable error
/// result for the model, and the run goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolErrorKind {
    /// The arguments were not valid JSON.
    InvalidJson,
    /// No tool of that name is available.
    UnknownTool,
    /// Valid JSON that does not fit the tool's schema.
    InvalidArguments,
    /// The model's output limit cut the call off.
    TruncatedCall,
    /// The tool ran and failed (file not found, no match to replace, …).
    ExecutionFailed,
    /// The tool itself crashed; tack caught it.
    Panicked,
    /// The command outlived its timeout and was killed.
    Timeout,
    /// A permission rule or the approver refused the call.
    Denied,
    /// The sandbox refused what the call would touch (a file tool writing
    /// `.git/`, leaving the workspace, writing through a hard link).
    SandboxDenied,
}

impl ToolErrorKind {
    pub const ALL: [ToolErrorKind; 9] = [
        ToolErrorKind::InvalidJson,
        ToolErrorKind::UnknownTool,
        ToolErrorKind::InvalidArguments,
        ToolErrorKind::TruncatedCall,
        ToolErrorKind::ExecutionFailed,
        ToolErrorKind::Panicked,
        ToolErrorKind::Timeout,
        ToolErrorKind::Denied,
        ToolErrorKind::SandboxDenied,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolErrorKind::InvalidJson => "invalid_json",
            ToolErrorKind::UnknownTool => "unknown_tool",
            ToolErrorKind::InvalidArguments => "invalid_arguments",
            ToolErrorKind::TruncatedCall => "truncated_call",
            ToolErrorKind::ExecutionFailed => "execution_failed",
            ToolErrorKind::Panicked => "panicked",
            ToolErrorKind::Timeout => "timeout",
            ToolErrorKind::Denied => "denied",
            ToolErrorKind::SandboxDenied => "sandbox_denied",
        }
    }
}

impl fmt::Display for ToolErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One tool call: what the model asked, what ran, and what the model was shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCallRecord {
    pub span_id: u32,
    /// The model call that asked for this tool.
    pub parent_span_id: u32,
    pub step: u32,
    pub call_id: String,
    pub tool_name: String,
    /// The arguments exactly as the model wrote them.
    pub arguments: String,
    /// The text the model was shown, after the harness's result view.
    pub result: String,
    pub exit_code: Option<i32>,
    pub stdout: Option<String>,
    pub stderr: Option<String>,
    /// Output was cut at the harness's cap.
    pub truncated: bool,
    pub started_at_ms: i64,
    pub duration_ms: u64,
    pub status: SpanStatus,
    pub error_kind: Option<ToolErrorKind>,
    /// The permission verdict (`allow`, `ask`, `deny`) and the rule that made
    /// it, when permissions are on.
    pub permission: Option<String>,
    pub permission_rule: Option<String>,
    /// The part of a compound command the verdict was about.
    pub permission_part: Option<String>,
    /// The sandbox profile a command ran under (`strict`, `workspace_write`,
    /// `off`); `None` for tools that run no command.
    pub sandbox_profile: Option<String>,
    /// Operations the sandbox refused that surfaced in the output (EPERM,
    /// EACCES, EROFS, refused connects).
    pub sandbox_denials: Vec<String>,
    /// The MCP server whose tool this was; `None` for built-in tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_server: Option<String>,
}

/// A tool call put to the approver, before the answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequestedRecord {
    pub step: u32,
    pub call_id: String,
    pub tool_name: String,
    /// The arguments exactly as the model wrote them.
    pub arguments: String,
    /// Why approval is needed, and the part of the call it is about.
    pub rule: String,
    pub part: String,
}

/// A tool call that waited for an approver: an intervention.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    pub span_id: u32,
    /// The model call that asked for the tool.
    pub parent_span_id: u32,
    pub step: u32,
    pub call_id: String,
    pub tool_name: String,
    pub arguments: String,
    /// Why approval was needed: the rule, or `requires_approval`.
    pub rule: String,
    /// The part of the command that was judged.
    pub part: String,
    pub approved: bool,
    /// `approve_all`, `rules`, `script: …`, `interactive: <user>`.
    pub approver: String,
    pub reason: Option<String>,
    pub started_at_ms: i64,
    pub wait_ms: u64,
}

/// One hidden check run after the agent stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CheckRecord {
    pub span_id: u32,
    pub name: String,
    pub command: String,
    pub exit_code: Option<i32>,
    pub passed: bool,
    /// Combined stdout and stderr, capped.
    pub output: String,
    pub started_at_ms: i64,
    pub duration_ms: u64,
}

/// The trial's totals, recorded last.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialFinished {
    pub outcome: TrialOutcome,
    pub stop_reason: StopReason,
    /// What the agent loop did and spent (flattened: the journal keeps one
    /// flat object per trial).
    #[serde(flatten)]
    pub totals: RunTotals,
    /// Verification rounds in which failing checks went back to the model.
    pub feedback_rounds: u32,
    /// The agent changed files the checks depend on (e.g. the visible tests).
    pub tampered: bool,
    pub checks_passed: Option<bool>,
    pub duration_ms: u64,
    pub finished_at_ms: i64,
    /// What went wrong, for error outcomes.
    pub error: Option<String>,
}

/// What one agent run did and spent. The agent loop counts into it, and the
/// same struct travels in `TrialFinished` to the trace row and the runner's
/// summary, so a new counter is added here once.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunTotals {
    /// Model turns (an attempt that failed and was retried is not a turn).
    pub steps: u32,
    pub usage: Usage,
    /// Dollars of the priced calls; `None` when no call had a price.
    pub cost_usd: Option<f64>,
    /// Tool calls the model asked for (journals written before this field
    /// existed read as 0).
    #[serde(default)]
    pub tool_calls: u32,
    /// Tool calls that ended in an error result.
    pub tool_errors: u32,
    /// Model-call attempts beyond the first.
    pub retries: u32,
    /// Calls that waited for a human or an approver.
    pub interventions: u32,
    /// Tool calls in which the sandbox refused something.
    pub sandbox_denials: u32,
    /// Times the history was compacted into a summary (answered compaction
    /// calls; journals written before this field existed read as 0).
    #[serde(default)]
    pub compactions: u32,
}

impl RunTotals {
    /// Folds one event into the totals. This is the one definition of what
    /// each event adds: the agent loop, a restored session, adopted
    /// subagents, the recording proxy, importers and the trace writer's
    /// recovery all count through it, so a new counter is taught here once.
    ///
    /// A step is a model turn of the agent itself: its calls carry no
    /// `purpose` (compactions and subagents' calls do) and every attempt at
    /// one turn carries its step number, so the highest seen is the count.
    /// The agent loop also counts a step it begins before its call is
    /// recorded (a call the time limit cuts off records nothing).
    pub fn observe(&mut self, event: &Event) {
        match event {
            Event::ModelCall(call) => {
                if call.attempt > 1 {
                    self.retries += 1;
                }
                self.usage += call.usage;
                if let Some(cost) = call.cost_usd {
                    *self.cost_usd.get_or_insert(0.0) += cost;
                }
                match call.purpose.as_deref() {
                    None => self.steps = self.steps.max(call.step),
                    Some(COMPACTION_PURPOSE) if call.status == SpanStatus::Ok => {
                        self.compactions += 1
                    }
                    Some(_) => {}
                }
            }
            Event::ToolCall(call) => {
                self.tool_calls += 1;
                if call.status == SpanStatus::Error {
                    self.tool_errors += 1;
                }
                if !call.sandbox_denials.is_empty() {
                    self.sandbox_denials += 1;
                }
            }
            Event::Approval(_) => self.interventions += 1,
            Event::TrialStarted(_)
            | Event::Message { .. }
            | Event::ApprovalRequested(_)
            | Event::Check(_)
            | Event::TrialFinished(_) => {}
        }
    }

    /// The totals of a stream of events.
    pub fn of<'e>(events: impl IntoIterator<Item = &'e Event>) -> RunTotals {
        let mut totals = RunTotals::default();
        for event in events {
            totals.observe(event);
        }
        totals
    }
}

/// Why a sink could not take an event; the trial stops as a harness error.
#[derive(Debug, thiserror::Error)]
pub enum SinkError {
    #[error("could not record event: {0}")]
    Io(#[from] std::io::Error),
    #[error("could not record event: it could not be encoded: {0}")]
    Encode(#[from] serde_json::Error),
    /// Nobody takes the events any more (a closed pipe, a stopped reader).
    #[error("could not record event: {0}")]
    Closed(&'static str),
    /// The sink's own store failed (a session log, an output stream).
    #[error("could not record event: {0}")]
    Store(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl SinkError {
    /// A store's failure, whatever its error type.
    pub fn store(error: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> SinkError {
        SinkError::Store(error.into())
    }
}

/// Where a trial's events go. Recording must not silently drop data: a sink
/// that cannot write says so, and the harness stops the trial.
pub trait EventSink: Send {
    fn record(&mut self, event: Event) -> Result<(), SinkError>;
}

/// Keeps events in memory, for tests and for callers that stream them later.
#[derive(Debug, Default)]
pub struct VecSink {
    pub events: Vec<Event>,
}

impl EventSink for VecSink {
    fn record(&mut self, event: Event) -> Result<(), SinkError> {
        self.events.push(event);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model_call(step: u32, attempt: u32, purpose: Option<&str>, status: SpanStatus) -> Event {
        let answered = status == SpanStatus::Ok;
        Event::ModelCall(ModelCallRecord {
            span_id: 0,
            step,
            provider: "test".into(),
            request_model: "m".into(),
            response_model: "m".into(),
            started_at_ms: 0,
            duration_ms: 0,
            finish_reason: None,
            usage: Usage {
                input_tokens: if answered { 100 } else { 0 },
                output_tokens: if answered { 10 } else { 0 },
                ..Usage::default()
            },
            cost_usd: answered.then_some(0.25),
            messages: Vec::new(),
            attempt,
            retry_wait_ms: 0,
            rate_limit_wait_ms: 0,
            fault: None,
            purpose: purpose.map(str::to_string),
            parent_span_id: None,
            status,
            error: None,
        })
    }

    fn tool_call(status: SpanStatus, denials: &[&str]) -> Event {
        Event::ToolCall(ToolCallRecord {
            span_id: 0,
            parent_span_id: 0,
            step: 1,
            call_id: "c".into(),
            tool_name: "bash".into(),
            arguments: "{}".into(),
            result: String::new(),
            exit_code: None,
            stdout: None,
            stderr: None,
            truncated: false,
            started_at_ms: 0,
            duration_ms: 0,
            status,
            error_kind: None,
            permission: None,
            permission_rule: None,
            permission_part: None,
            sandbox_profile: None,
            sandbox_denials: denials.iter().map(|d| d.to_string()).collect(),
            mcp_server: None,
        })
    }

    fn approval() -> Event {
        Event::Approval(ApprovalRecord {
            span_id: 0,
            parent_span_id: 0,
            step: 1,
            call_id: "c".into(),
            tool_name: "bash".into(),
            arguments: "{}".into(),
            rule: "ask".into(),
            part: "rm x".into(),
            approved: true,
            approver: "approve_all".into(),
            reason: None,
            started_at_ms: 0,
            wait_ms: 0,
        })
    }

    #[test]
    fn steps_are_the_agents_turns_and_retries_the_attempts_beyond_the_first() {
        let totals = RunTotals::of(&[
            model_call(1, 1, None, SpanStatus::Ok),
            model_call(2, 1, None, SpanStatus::Error),
            model_call(2, 2, None, SpanStatus::Ok),
            model_call(3, 1, Some(COMPACTION_PURPOSE), SpanStatus::Ok),
            model_call(7, 1, Some(SUBAGENT_PURPOSE), SpanStatus::Ok),
        ]);
        assert_eq!(totals.steps, 2, "compactions and subagents take no step");
        assert_eq!(totals.compactions, 1);
        assert_eq!(totals.retries, 1);
        assert_eq!(totals.usage.input_tokens, 400, "every answered call spends");
        assert_eq!(totals.cost_usd, Some(1.0));
    }

    #[test]
    fn unpriced_calls_leave_the_cost_unknown() {
        let mut call = model_call(1, 1, None, SpanStatus::Ok);
        if let Event::ModelCall(record) = &mut call {
            record.cost_usd = None;
        }
        assert_eq!(RunTotals::of(&[call]).cost_usd, None);
    }

    #[test]
    fn tool_calls_errors_denials_and_interventions_are_counted() {
        let totals = RunTotals::of(&[
            tool_call(SpanStatus::Ok, &[]),
            tool_call(SpanStatus::Error, &[]),
            tool_call(SpanStatus::Error, &["EROFS /etc", "EPERM connect"]),
            approval(),
        ]);
        assert_eq!(totals.tool_calls, 3);
        assert_eq!(totals.tool_errors, 2);
        assert_eq!(
            totals.sandbox_denials, 1,
            "a call with refusals counts once"
        );
        assert_eq!(totals.interventions, 1);
    }
}
