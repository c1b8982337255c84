//! A trial as OpenTelemetry spans, named and attributed by the GenAI
//! semantic conventions: the trial is the root (`invoke_agent tack`), its
//! model calls (`chat <model>`), tool calls (`execute_tool <tool>`),
//! approvals and checks its children, a tool call under the model call that
//! asked for it. A check's verdict is a `gen_ai.evaluation.result` event.
//! tack's own fields carry a `tack.` prefix; Phoenix's OpenInference kinds
//! and token counts ride along, so its UI shows the tree as an agent's.
//! Message content only with `content`.

use std::collections::HashMap;

use opentelemetry_proto::tonic::common::v1::{AnyValue, ArrayValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::{Span, Status, span, status};
use serde_json::{Value, json};
use tack_analysis::{MessageRow, SpanRow, TrialTrace};
use tack_trace::schema::kind;

use crate::answers::answered_by;

/// What every span of a run carries besides its trial.
#[derive(Debug, Clone)]
pub struct RunContext {
    pub run_id: String,
    /// Variants whose answers come from a built-in simulated model.
    pub simulated: Vec<String>,
    /// Message content (prompts, answers, tool arguments and results) on
    /// the spans: off unless asked, as the conventions advise.
    pub content: bool,
}

/// The spans of one trial: the root first.
pub fn trial_spans(trace: &TrialTrace, run: &RunContext) -> Vec<Span> {
    let trial = &trace.trial;
    let trace_id = id_bytes(&[&run.run_id, &trial.trial_id], 16);
    let root_id = id_bytes(&[&run.run_id, &trial.trial_id, "root"], 8);
    let span_id = |id: u32| id_bytes(&[&run.run_id, &trial.trial_id, &id.to_string()], 8);
    let start = nanos(trial.started_at_ms);
    let mut spans = vec![Span {
        trace_id: trace_id.clone(),
        span_id: root_id.clone(),
        ..root_span(trace, run, start)
    }];
    let answers: HashMap<u32, &MessageRow> = answered_by(&trace.spans, &trace.messages)
        .into_iter()
        .map(|(at, call)| (call.span_id, &trace.messages[at]))
        .collect();
    let messages: HashMap<&str, &MessageRow> = trace
        .messages
        .iter()
        .map(|m| (m.message_id.as_str(), m))
        .collect();
    for row in &trace.spans {
        let (name, kind, attributes, events) = match row.kind.as_str() {
            kind::MODEL_CALL => model_call(row, &answers, &messages, &trial.trial_id, run),
            kind::TOOL_CALL => tool_call(row, run),
            kind::APPROVAL => approval(row),
            kind::CHECK => check(row, start),
            other => (
                other.to_string(),
                span::SpanKind::Internal,
                Attributes::default(),
                vec![],
            ),
        };
        let parent = match row.parent_span_id {
            Some(parent) => span_id(parent),
            None => root_id.clone(),
        };
        let begin = nanos(row.started_at_ms);
        spans.push(Span {
            trace_id: trace_id.clone(),
            span_id: span_id(row.span_id),
            parent_span_id: parent,
            name,
            kind: kind as i32,
            start_time_unix_nano: begin,
            end_time_unix_nano: begin + row.duration_ms * 1_000_000,
            attributes: attributes.0,
            events,
            status: Some(if row.status == "ok" {
                Status::default()
            } else {
                error_status(row.error.as_deref().unwrap_or("error"))
            }),
            ..Span::default()
        });
    }
    spans
}

/// The trial's own span (ids left to the caller): the agent's invocation,
/// its totals and its outcome.
fn root_span(trace: &TrialTrace, run: &RunContext, start: u64) -> Span {
    let trial = &trace.trial;
    let mut root = Attributes::default();
    root.str("gen_ai.operation.name", "invoke_agent");
    root.str("gen_ai.agent.name", "tack");
    root.str("gen_ai.conversation.id", &trial.trial_id);
    root.str("gen_ai.request.model", &trial.model);
    // The provider the trial's model calls went to (the semantic
    // conventions ask it of an agent's span too).
    let provider = trace
        .spans
        .iter()
        .find_map(|span| span.provider.as_deref().filter(|p| !p.is_empty()));
    root.opt_str("gen_ai.provider.name", provider);
    root.int("gen_ai.usage.input_tokens", trial.input_tokens);
    root.int("gen_ai.usage.output_tokens", trial.output_tokens);
    root.str("openinference.span.kind", "AGENT");
    root.str("tack.run_id", &run.run_id);
    root.str("tack.trial_id", &trial.trial_id);
    root.str("tack.variant", &trial.variant);
    root.str("tack.task", &trial.task);
    root.int("tack.trial_index", u64::from(trial.trial_index));
    root.int("tack.attempt", u64::from(trial.trial_attempt));
    root.str("tack.outcome", &trial.outcome);
    root.str("tack.stop_reason", &trial.stop_reason);
    root.bool("tack.simulated", run.simulated.contains(&trial.variant));
    if let Some(cost) = trial.cost_usd {
        root.double("tack.cost_usd", cost);
    }
    if let Some(passed) = trial.checks_passed {
        root.bool("tack.checks_passed", passed);
    }
    if let Some(environment) = &trial.environment {
        root.str("tack.environment", environment);
    }
    // A trial the checks judged ran fine, whatever they said.
    let failed = !matches!(trial.outcome.as_str(), "passed" | "verification_failed");
    Span {
        name: "invoke_agent tack".into(),
        kind: span::SpanKind::Internal as i32,
        start_time_unix_nano: start,
        end_time_unix_nano: start + trial.duration_ms * 1_000_000,
        attributes: root.0,
        status: Some(if failed {
            error_status(trial.error.as_deref().unwrap_or(&trial.outcome))
        } else {
            Status {
                message: String::new(),
                code: status::StatusCode::Ok as i32,
            }
        }),
        ..Span::default()
    }
}

type Converted = (String, span::SpanKind, Attributes, Vec<span::Event>);

fn model_call(
    row: &SpanRow,
    answers: &HashMap<u32, &MessageRow>,
    messages: &HashMap<&str, &MessageRow>,
    conversation: &str,
    run: &RunContext,
) -> Converted {
    let model = row.request_model.as_deref().unwrap_or(&row.name);
    let mut a = Attributes::default();
    a.str("gen_ai.operation.name", "chat");
    a.str("gen_ai.conversation.id", conversation);
    a.str("openinference.span.kind", "LLM");
    a.opt_str("gen_ai.provider.name", row.provider.as_deref());
    a.opt_str("gen_ai.request.model", row.request_model.as_deref());
    a.opt_str("gen_ai.response.model", row.response_model.as_deref());
    a.opt_str(
        "llm.model_name",
        row.response_model
            .as_deref()
            .filter(|m| !m.is_empty())
            .or(Some(model)),
    );
    if let Some(reason) = &row.finish_reason {
        a.strs("gen_ai.response.finish_reasons", &[reason.as_str()]);
    }
    for (name, value) in [
        ("gen_ai.usage.input_tokens", row.input_tokens),
        ("gen_ai.usage.output_tokens", row.output_tokens),
        (
            "gen_ai.usage.cache_read.input_tokens",
            row.cache_read_tokens,
        ),
        (
            "gen_ai.usage.cache_creation.input_tokens",
            row.cache_write_tokens,
        ),
        ("llm.token_count.prompt", row.input_tokens),
        ("llm.token_count.completion", row.output_tokens),
    ] {
        if let Some(value) = value {
            a.int(name, value);
        }
    }
    if let Some(step) = row.step {
        a.int("tack.step", u64::from(step));
    }
    if let Some(attempt) = row.attempt {
        a.int("tack.attempt", u64::from(attempt));
    }
    if let Some(cost) = row.cost_usd {
        a.double("tack.cost_usd", cost);
    }
    if row.name != model {
        // Why the harness made it (a compaction's summary, say).
        a.str("tack.purpose", &row.name);
    }
    a.opt_str("tack.fault", row.fault.as_deref());
    a.opt_str(
        "error.type",
        error_type(&row.status, row.error_kind.as_deref(), row.fault.as_deref()),
    );
    if run.content {
        let sent: Vec<Value> = row
            .message_ids
            .iter()
            .flatten()
            .filter_map(|id| messages.get(id.as_str()))
            .map(|m| semconv_message(m))
            .collect();
        a.str("gen_ai.input.messages", &Value::Array(sent).to_string());
        if let Some(answer) = answers.get(&row.span_id) {
            let mut out = semconv_message(answer);
            if let Some(reason) = &row.finish_reason {
                out["finish_reason"] = json!(reason);
            }
            a.str("gen_ai.output.messages", &json!([out]).to_string());
        }
    }
    (
        format!("chat {model}"),
        span::SpanKind::Client,
        a,
        Vec::new(),
    )
}

/// A failed model call's `error.type`: its error's kind, else the fault
/// injected, else `_OTHER` (the semantic conventions' word for an error of
/// no known type); none for a call that answered.
fn error_type<'a>(status: &str, kind: Option<&'a str>, fault: Option<&'a str>) -> Option<&'a str> {
    if status == "ok" {
        return None;
    }
    let kind = kind.filter(|k| !k.is_empty());
    Some(kind.or(fault).unwrap_or("_OTHER"))
}

fn tool_call(row: &SpanRow, run: &RunContext) -> Converted {
    let tool = row.tool_name.as_deref().unwrap_or(&row.name);
    let mut a = Attributes::default();
    a.str("gen_ai.operation.name", "execute_tool");
    a.str("gen_ai.tool.name", tool);
    a.str(
        "gen_ai.tool.type",
        if row.mcp_server.is_some() {
            "extension"
        } else {
            "function"
        },
    );
    a.str("openinference.span.kind", "TOOL");
    a.opt_str("gen_ai.tool.call.id", row.tool_call_id.as_deref());
    a.opt_str("tack.mcp_server", row.mcp_server.as_deref());
    a.opt_str("tack.permission", row.permission.as_deref());
    a.opt_str("error.type", row.error_kind.as_deref());
    if let Some(code) = row.exit_code {
        a.int_signed("tack.exit_code", i64::from(code));
    }
    if let Some(step) = row.step {
        a.int("tack.step", u64::from(step));
    }
    if run.content {
        a.opt_str("gen_ai.tool.call.arguments", row.tool_arguments.as_deref());
        a.opt_str("gen_ai.tool.call.result", row.tool_result.as_deref());
    }
    (
        format!("execute_tool {tool}"),
        span::SpanKind::Internal,
        a,
        Vec::new(),
    )
}

fn approval(row: &SpanRow) -> Converted {
    let tool = row.tool_name.as_deref().unwrap_or(&row.name);
    let mut a = Attributes::default();
    a.str("gen_ai.tool.name", tool);
    a.opt_str("gen_ai.tool.call.id", row.tool_call_id.as_deref());
    if let Some(approved) = row.approved {
        a.bool("tack.approved", approved);
    }
    a.opt_str("tack.approver", row.approver.as_deref());
    a.opt_str("tack.permission_rule", row.permission_rule.as_deref());
    (
        format!("approval {tool}"),
        span::SpanKind::Internal,
        a,
        Vec::new(),
    )
}

/// A check: its span, and its verdict as the conventions' evaluation event.
fn check(row: &SpanRow, trial_start: u64) -> Converted {
    let passed = row.check_passed.unwrap_or(row.status == "ok");
    let mut a = Attributes::default();
    a.str("openinference.span.kind", "EVALUATOR");
    a.str("tack.check.name", &row.name);
    a.opt_str("tack.check.command", row.check_command.as_deref());
    a.bool("tack.check.passed", passed);
    if let Some(code) = row.exit_code {
        a.int_signed("tack.exit_code", i64::from(code));
    }
    let mut event = Attributes::default();
    event.str("gen_ai.evaluation.name", &row.name);
    event.double(
        "gen_ai.evaluation.score.value",
        if passed { 1.0 } else { 0.0 },
    );
    event.str(
        "gen_ai.evaluation.score.label",
        if passed { "pass" } else { "fail" },
    );
    if let Some(output) = &row.check_output {
        event.str("gen_ai.evaluation.explanation", output);
    }
    let at = nanos(row.started_at_ms).max(trial_start) + row.duration_ms * 1_000_000;
    let events = vec![span::Event {
        time_unix_nano: at,
        name: "gen_ai.evaluation.result".into(),
        attributes: event.0,
        dropped_attributes_count: 0,
    }];
    (
        format!("check {}", row.name),
        span::SpanKind::Internal,
        a,
        events,
    )
}

/// A message in the conventions' shape: a role and its parts.
fn semconv_message(message: &MessageRow) -> Value {
    let mut parts = Vec::new();
    if !message.content.is_empty() {
        let part = match &message.tool_call_id {
            Some(id) => {
                json!({"type": "tool_call_response", "id": id, "response": message.content})
            }
            None => json!({"type": "text", "content": message.content}),
        };
        parts.push(part);
    }
    let calls: Vec<tack_protocol::ToolCall> = message
        .tool_calls_json
        .as_deref()
        .and_then(|json| serde_json::from_str(json).ok())
        .unwrap_or_default();
    for call in calls {
        let arguments =
            serde_json::from_str::<Value>(&call.arguments).unwrap_or(Value::String(call.arguments));
        parts.push(
            json!({"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments}),
        );
    }
    json!({"role": message.role, "parts": parts})
}

fn error_status(message: &str) -> Status {
    Status {
        message: message.to_string(),
        code: status::StatusCode::Error as i32,
    }
}

fn nanos(ms: i64) -> u64 {
    u64::try_from(ms).unwrap_or(0) * 1_000_000
}

/// A stable id of `len` bytes (16 for a trace, 8 for a span) from `parts`:
/// exporting a run twice gives the same ids. FNV-1a, run once per 8 bytes
/// with the block number mixed in; never all zero (an invalid id).
pub(crate) fn id_bytes(parts: &[&str], len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    for block in 0..len.div_ceil(8) {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325 ^ (block as u64);
        for part in parts {
            for byte in part.bytes().chain([0xff]) {
                hash ^= u64::from(byte);
                hash = hash.wrapping_mul(0x0100_0000_01b3);
            }
        }
        out.extend_from_slice(&hash.max(1).to_be_bytes());
    }
    out.truncate(len);
    out
}

/// Span attributes as they are built.
#[derive(Default)]
pub(crate) struct Attributes(pub(crate) Vec<KeyValue>);

impl Attributes {
    fn put(&mut self, key: &str, value: any_value::Value) {
        self.0.push(KeyValue {
            key: key.to_string(),
            value: Some(AnyValue { value: Some(value) }),
            ..KeyValue::default()
        });
    }

    pub(crate) fn str(&mut self, key: &str, value: &str) {
        self.put(key, any_value::Value::StringValue(value.to_string()));
    }

    /// `value` when there is one: an empty string (a response model no
    /// answer named) is none.
    fn opt_str(&mut self, key: &str, value: Option<&str>) {
        if let Some(value) = value.filter(|v| !v.is_empty()) {
            self.str(key, value);
        }
    }

    fn strs(&mut self, key: &str, values: &[&str]) {
        let values = values
            .iter()
            .map(|v| AnyValue {
                value: Some(any_value::Value::StringValue(v.to_string())),
            })
            .collect();
        self.put(key, any_value::Value::ArrayValue(ArrayValue { values }));
    }

    fn int(&mut self, key: &str, value: u64) {
        self.int_signed(key, i64::try_from(value).unwrap_or(i64::MAX));
    }

    fn int_signed(&mut self, key: &str, value: i64) {
        self.put(key, any_value::Value::IntValue(value));
    }

    fn double(&mut self, key: &str, value: f64) {
        self.put(key, any_value::Value::DoubleValue(value));
    }

    fn bool(&mut self, key: &str, value: bool) {
        self.put(key, any_value::Value::BoolValue(value));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_model_call_always_has_an_error_type() {
        assert_eq!(error_type("ok", Some("x"), None), None);
        assert_eq!(error_type("error", Some("timeout"), None), Some("timeout"));
        assert_eq!(
            error_type("error", Some(""), Some("transport_error")),
            Some("transport_error")
        );
        assert_eq!(error_type("error", None, None), Some("_OTHER"));
    }

    #[test]
    fn ids_are_stable_sized_and_differ_by_part() {
        let a = id_bytes(&["run", "trial"], 16);
        assert_eq!(a.len(), 16);
        assert_eq!(a, id_bytes(&["run", "trial"], 16));
        assert_ne!(a, id_bytes(&["run", "trial2"], 16));
        // The separator keeps ("ab", "c") and ("a", "bc") apart.
        assert_ne!(id_bytes(&["ab", "c"], 8), id_bytes(&["a", "bc"], 8));
        assert_ne!(a[..8], a[8..]);
    }
}
