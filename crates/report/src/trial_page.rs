//! The view of one trial: its header and its trace as a timeline.

use crate::view::thousands;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use tack_analysis::{MessageRow, SpanRow, TrialRow, TrialTrace};
use tack_trace::schema::kind;

/// The page's file name for a trial id. Ids are made by the runner from
/// variant, task and index; anything outside a safe set becomes `_` so an id
/// can never escape the `trials/` directory or need URL encoding.
pub(crate) fn file_name(trial_id: &str) -> String {
    let safe: String = trial_id
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
            _ => '_',
        })
        .collect();
    format!("{safe}.html")
}

/// The trial row as analysed, plus the figures formatted for reading.
#[derive(Debug, Serialize)]
pub(crate) struct TrialView {
    #[serde(flatten)]
    pub row: TrialRow,
    pub tokens: String,
    pub cost: String,
    pub checks: &'static str,
    pub duration: String,
    /// The model calls' total wait for the rate limit, formatted; `None`
    /// when they did not wait.
    pub rate_limit_wait: Option<String>,
    pub timeline: Vec<Item>,
    /// The timeline entry that failed first (a model or tool call that
    /// failed, a denied approval, a failed check): where a reader starts.
    pub first_failure: Option<usize>,
    /// The first tool call that failed, when one did.
    pub first_failed_tool_call: Option<usize>,
    pub messages: Vec<MessageView>,
    /// The subagents its `task` calls started, with what each spent.
    pub subagents: Vec<SubagentView>,
}

/// One `task` call's child: what it was asked, and what it spent.
#[derive(Debug, Serialize)]
pub(crate) struct SubagentView {
    pub call_id: Option<String>,
    pub description: String,
    pub model_calls: usize,
    pub tool_calls: usize,
    pub tokens: String,
    pub cost: String,
    pub duration_ms: u64,
    pub status: String,
}

/// One entry of the timeline, in span sequence order.
#[derive(Debug, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum Item {
    ModelCall {
        step: Option<u32>,
        attempt: Option<u32>,
        /// A retry: the attempt after a failed one.
        retry: bool,
        /// The backoff waited before this attempt, formatted; `None` when
        /// there was no wait.
        waited: Option<String>,
        /// The wait for a shared provider rate limit, formatted; `None` when
        /// there was none.
        rate_limit_wait: Option<String>,
        /// A fault the `chaos(...)` wrapper injected on purpose.
        fault: Option<String>,
        /// The harness summarising the older history (a context strategy).
        compaction: bool,
        /// A subagent's call: the id of the `task` call that started it.
        subagent_of: Option<String>,
        status: String,
        error: Option<String>,
        model: String,
        tokens_in: String,
        tokens_out: String,
        cache_read: Option<u64>,
        finish_reason: Option<String>,
        duration_ms: u64,
        sent: String,
        /// System and user messages first sent with this call, and stubs a
        /// context strategy sent in place of older tool results; tool
        /// results appear with their tool calls, assistant messages as
        /// responses.
        new_messages: Vec<MessageView>,
        response: Option<MessageView>,
    },
    ToolCall {
        step: Option<u32>,
        tool_name: String,
        call_id: Option<String>,
        arguments: String,
        arguments_are_json: bool,
        result: Option<String>,
        exit_code: Option<i32>,
        stdout: Option<String>,
        stderr: Option<String>,
        truncated: bool,
        status: String,
        error_kind: Option<String>,
        error: Option<String>,
        duration_ms: u64,
        permission: Option<Permission>,
        /// The fault injected into the model call that asked for this tool,
        /// when the call then failed: what broke it was deliberate.
        after_fault: Option<String>,
        /// The MCP server the tool belongs to.
        mcp_server: Option<String>,
    },
    /// A tool call that waited for an approver: an intervention.
    Approval {
        step: Option<u32>,
        tool_name: String,
        call_id: Option<String>,
        /// The shell command, when the arguments have one.
        command: Option<String>,
        arguments: String,
        arguments_are_json: bool,
        /// Why approval was needed.
        rule: Option<String>,
        /// The part of the command that was judged.
        part: Option<String>,
        /// `None` when the trace does not say (should not happen).
        approved: Option<bool>,
        approver: Option<String>,
        reason: Option<String>,
        wait: String,
    },
    Check {
        name: String,
        command: Option<String>,
        passed: Option<bool>,
        exit_code: Option<i32>,
        output: Option<String>,
        duration_ms: u64,
    },
    /// A span kind this report does not know (newer trace format).
    Other { kind: String, name: String },
}

impl Item {
    fn failed(&self) -> bool {
        match self {
            Item::ModelCall { status, .. } | Item::ToolCall { status, .. } => status != "ok",
            Item::Approval { approved, .. } => *approved == Some(false),
            Item::Check { passed, .. } => *passed == Some(false),
            Item::Other { .. } => false,
        }
    }
}

/// A tool call's permission verdict, when permissions were on.
#[derive(Debug, Serialize)]
pub(crate) struct Permission {
    /// `allow`, `ask` or `deny` as recorded.
    pub verdict: String,
    /// A CSS class suffix: the verdict when known, else `other`.
    pub class: &'static str,
    pub rule: Option<String>,
    pub part: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct MessageView {
    pub index: u32,
    /// The sequence number of the event that added it: messages sit
    /// between spans by it.
    #[serde(skip)]
    pub seq: u64,
    pub role: String,
    pub content: String,
    pub tool_calls: Vec<ToolCallView>,
    pub tool_call_id: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub(crate) struct ToolCallView {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

pub(crate) fn trial_view(trace: &TrialTrace) -> TrialView {
    let t = &trace.trial;
    let messages: Vec<MessageView> = trace.messages.iter().map(message_view).collect();
    let timeline = timeline(&trace.spans, &messages);
    let first_failure = timeline.iter().position(Item::failed);
    let first_failed_tool_call = timeline
        .iter()
        .position(|item| matches!(item, Item::ToolCall { .. }) && item.failed());
    TrialView {
        row: t.clone(),
        tokens: format!(
            "{} ({} in, {} out)",
            thousands(t.total_tokens as f64),
            thousands(t.input_tokens as f64),
            thousands(t.output_tokens as f64)
        ),
        cost: t.cost_usd.map_or("—".to_string(), |c| format!("${c:.4}")),
        checks: match t.checks_passed {
            Some(true) => "passed",
            Some(false) => "failed",
            None => "did not run",
        },
        duration: format!("{:.1} s", t.duration_ms as f64 / 1000.0),
        rate_limit_wait: milliseconds(t.rate_limit_wait_ms),
        timeline,
        first_failure,
        first_failed_tool_call,
        messages,
        subagents: subagents(&trace.spans),
    }
}

/// Each `task` call with the spans beneath it (a child's model calls
/// point at the task span, its tool calls at those).
fn subagents(spans: &[SpanRow]) -> Vec<SubagentView> {
    spans
        .iter()
        .filter(|s| s.kind == kind::TOOL_CALL && s.tool_name.as_deref() == Some("task"))
        .map(|task| {
            let calls: Vec<&SpanRow> = spans
                .iter()
                .filter(|s| s.kind == kind::MODEL_CALL && s.parent_span_id == Some(task.span_id))
                .collect();
            let call_ids: BTreeSet<u32> = calls.iter().map(|c| c.span_id).collect();
            let tool_calls = spans
                .iter()
                .filter(|s| {
                    s.kind == kind::TOOL_CALL
                        && s.parent_span_id.is_some_and(|p| call_ids.contains(&p))
                })
                .count();
            let tokens: u64 = calls
                .iter()
                .map(|c| c.input_tokens.unwrap_or(0) + c.output_tokens.unwrap_or(0))
                .sum();
            let cost: Option<f64> = calls.iter().filter_map(|c| c.cost_usd).reduce(|a, b| a + b);
            let description = task
                .tool_arguments
                .as_deref()
                .and_then(|a| serde_json::from_str::<serde_json::Value>(a).ok())
                .and_then(|a| {
                    let text = a.get("description").or(a.get("prompt"))?.as_str()?;
                    Some(text.chars().take(120).collect())
                })
                .unwrap_or_default();
            SubagentView {
                call_id: task.tool_call_id.clone(),
                description,
                model_calls: calls.len(),
                tool_calls,
                tokens: thousands(tokens as f64),
                cost: cost.map_or("—".to_string(), |c| format!("${c:.4}")),
                duration_ms: task.duration_ms,
                status: task.status.clone(),
            }
        })
        .collect()
}

fn timeline(spans: &[SpanRow], messages: &[MessageView]) -> Vec<Item> {
    let task_calls: HashMap<u32, &str> = spans
        .iter()
        .filter(|s| s.tool_name.as_deref() == Some("task"))
        .filter_map(|s| Some((s.span_id, s.tool_call_id.as_deref()?)))
        .collect();
    let mut shown_upto = 0u32;
    let mut responses_shown = BTreeSet::new();
    let stubs = stub_indices(messages);
    let faults: HashMap<u32, &str> = spans
        .iter()
        .filter(|s| s.kind == kind::MODEL_CALL)
        .filter_map(|s| Some((s.span_id, s.fault.as_deref()?)))
        .collect();
    spans
        .iter()
        .map(|span| match span.kind.as_str() {
            kind::MODEL_CALL => {
                let mut item = model_call(
                    span,
                    messages,
                    &stubs,
                    &mut shown_upto,
                    &mut responses_shown,
                );
                if let Item::ModelCall { subagent_of, .. } = &mut item {
                    *subagent_of = span
                        .parent_span_id
                        .and_then(|id| task_calls.get(&id))
                        .map(|id| id.to_string());
                }
                item
            }
            kind::TOOL_CALL => {
                let parent_fault = span.parent_span_id.and_then(|id| faults.get(&id).copied());
                tool_call(span, parent_fault)
            }
            kind::APPROVAL => approval(span),
            kind::CHECK => Item::Check {
                name: span.name.clone(),
                command: span.check_command.clone(),
                passed: span.check_passed,
                exit_code: span.exit_code,
                output: span.check_output.clone(),
                duration_ms: span.duration_ms,
            },
            other => Item::Other {
                kind: other.to_string(),
                name: span.name.clone(),
            },
        })
        .collect()
}

/// Tool messages that stand in for an earlier result of the same call: the
/// stubs a context strategy sent instead of stale results.
fn stub_indices(messages: &[MessageView]) -> BTreeSet<u32> {
    let mut answered = BTreeSet::new();
    messages
        .iter()
        .filter(|m| m.role == "tool")
        .filter_map(|m| {
            let id = m.tool_call_id.as_deref()?;
            (!answered.insert(id)).then_some(m.index)
        })
        .collect()
}

fn model_call(
    span: &SpanRow,
    messages: &[MessageView],
    stubs: &BTreeSet<u32>,
    shown_upto: &mut u32,
    responses_shown: &mut BTreeSet<u32>,
) -> Item {
    // What the call was sent that no earlier call showed: the messages
    // added before it.
    let before = messages.iter().take_while(|m| m.seq < span.seq);
    let new_messages = before
        .clone()
        .filter(|m| m.index >= *shown_upto)
        .filter(|m| m.role == "system" || m.role == "user" || stubs.contains(&m.index))
        .cloned()
        .collect();
    *shown_upto = (*shown_upto).max(before.count() as u32);
    // The answer is the message added right after the call; a failed
    // attempt has none, and a retry must not show the same answer twice.
    let response = (span.status == "ok")
        .then(|| {
            messages
                .iter()
                .find(|m| m.seq > span.seq)
                .filter(|m| m.role == "assistant")
        })
        .flatten()
        .filter(|m| responses_shown.insert(m.index))
        .cloned();
    Item::ModelCall {
        step: span.step,
        attempt: span.attempt,
        retry: span.attempt.is_some_and(|a| a > 1),
        waited: span.retry_wait_ms.and_then(milliseconds),
        rate_limit_wait: span.rate_limit_wait_ms.and_then(milliseconds),
        fault: span.fault.clone(),
        compaction: span.name == tack_protocol::COMPACTION_PURPOSE,
        subagent_of: None,
        status: span.status.clone(),
        error: span.error.clone(),
        model: span
            .response_model
            .clone()
            .or_else(|| span.request_model.clone())
            .unwrap_or_default(),
        tokens_in: span
            .input_tokens
            .map_or("—".into(), |n| thousands(n as f64)),
        tokens_out: span
            .output_tokens
            .map_or("—".into(), |n| thousands(n as f64)),
        cache_read: span.cache_read_tokens.filter(|&n| n > 0),
        finish_reason: span.finish_reason.clone(),
        duration_ms: span.duration_ms,
        sent: span
            .messages_sent
            .map_or("—".to_string(), |n| tack_protocol::count(n, "message")),
        new_messages,
        response,
    }
}

/// `1,200 ms`; `None` for no wait.
fn milliseconds(ms: u64) -> Option<String> {
    (ms > 0).then(|| format!("{} ms", thousands(ms as f64)))
}

fn tool_call(span: &SpanRow, parent_fault: Option<&str>) -> Item {
    let raw = span.tool_arguments.clone().unwrap_or_default();
    let (arguments, arguments_are_json) = pretty_json(&raw);
    Item::ToolCall {
        step: span.step,
        tool_name: span.tool_name.clone().unwrap_or_else(|| span.name.clone()),
        call_id: span.tool_call_id.clone(),
        arguments,
        arguments_are_json,
        result: span.tool_result.clone(),
        exit_code: span.exit_code,
        stdout: span.stdout.clone().filter(|s| !s.is_empty()),
        stderr: span.stderr.clone().filter(|s| !s.is_empty()),
        truncated: span.truncated.unwrap_or(false),
        status: span.status.clone(),
        error_kind: span.error_kind.clone(),
        error: span.error.clone(),
        duration_ms: span.duration_ms,
        permission: span.permission.as_ref().map(|verdict| Permission {
            verdict: verdict.clone(),
            class: match verdict.as_str() {
                "allow" => "allow",
                "ask" => "ask",
                "deny" => "deny",
                _ => "other",
            },
            rule: span.permission_rule.clone(),
            part: span.permission_part.clone(),
        }),
        after_fault: parent_fault
            .filter(|_| span.status != "ok")
            .map(str::to_owned),
        mcp_server: span.mcp_server.clone(),
    }
}

fn approval(span: &SpanRow) -> Item {
    let raw = span.tool_arguments.clone().unwrap_or_default();
    let command = serde_json::from_str::<serde_json::Value>(&raw)
        .ok()
        .and_then(|v| v.get("command")?.as_str().map(str::to_owned));
    let (arguments, arguments_are_json) = pretty_json(&raw);
    Item::Approval {
        step: span.step,
        tool_name: span.tool_name.clone().unwrap_or_else(|| span.name.clone()),
        call_id: span.tool_call_id.clone(),
        command,
        arguments,
        arguments_are_json,
        rule: span.permission_rule.clone(),
        part: span.permission_part.clone(),
        approved: span.approved,
        approver: span.approver.clone(),
        reason: span.error.clone(),
        wait: format!("{} ms", thousands(span.duration_ms as f64)),
    }
}

/// Pretty-printed JSON when `raw` parses, else `raw` unchanged: the model's
/// exact text matters most when it is broken.
fn pretty_json(raw: &str) -> (String, bool) {
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(value) => (
            serde_json::to_string_pretty(&value).unwrap_or_else(|_| raw.to_string()),
            true,
        ),
        Err(_) => (raw.to_string(), false),
    }
}

fn message_view(m: &MessageRow) -> MessageView {
    #[derive(serde::Deserialize)]
    struct Call {
        #[serde(default)]
        id: String,
        #[serde(default)]
        name: String,
        #[serde(default)]
        arguments: String,
    }
    let tool_calls = m
        .tool_calls_json
        .as_deref()
        .map(|json| match serde_json::from_str::<Vec<Call>>(json) {
            Ok(calls) => calls
                .into_iter()
                .map(|c| ToolCallView {
                    id: c.id,
                    name: c.name,
                    arguments: pretty_json(&c.arguments).0,
                })
                .collect(),
            // Unknown shape: show it raw rather than drop it.
            Err(_) => vec![ToolCallView {
                id: String::new(),
                name: "(unparsed tool calls)".to_string(),
                arguments: json.to_string(),
            }],
        })
        .unwrap_or_default();
    MessageView {
        index: m.message_index,
        seq: m.seq,
        role: m.role.clone(),
        content: m.content.clone(),
        tool_calls,
        tool_call_id: m.tool_call_id.clone(),
    }
}
