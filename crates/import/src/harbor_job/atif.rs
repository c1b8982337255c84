//! An ATIF trajectory (`agent/trajectory.json`) as a trial's events: system
//! and user steps are messages; an agent step is a model call (its model,
//! tokens and cost; the conversation so far as what it sent), the
//! assistant's message with its tool calls, and a tool call span and tool
//! message per observation result that names a call. A result that names
//! none (Terminus-style agents act through the message text) is what the
//! next call is shown: a user message.

use serde_json::Value;
use tack_protocol::time::parse_rfc3339_ms;
use tack_protocol::{Event, Message, ModelCallRecord, SpanStatus, ToolCall, ToolCallRecord, Usage};

/// Appends the trajectory's events to `events`; returns the next free span
/// id. `not_carried` counts what has no tack counterpart, by kind.
pub(super) fn events(
    trajectory: &Value,
    default_model: &str,
    events: &mut Vec<Event>,
    not_carried: &mut dyn FnMut(&str),
) -> u32 {
    let mut builder = Builder {
        events,
        messages: 0,
        next_span: 1,
        step: 0,
    };
    let model = trajectory
        .get("agent")
        .and_then(|a| a.get("model_name"))
        .and_then(Value::as_str)
        .unwrap_or(default_model)
        .to_string();
    for (field, kind) in [
        ("subagent_trajectories", "ATIF subagent trajectories"),
        ("continued_trajectory_ref", "ATIF continuation file"),
    ] {
        if trajectory.get(field).is_some_and(|v| !v.is_null()) {
            not_carried(kind);
        }
    }
    for step in trajectory
        .get("steps")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let (text, media) = content(step.get("message"));
        if media {
            not_carried("ATIF images and audio");
        }
        for (field, kind) in [
            ("reasoning_content", "ATIF reasoning content"),
            ("extra", "ATIF step extra"),
        ] {
            if step.get(field).is_some_and(|v| !v.is_null()) {
                not_carried(kind);
            }
        }
        match step.get("source").and_then(Value::as_str) {
            Some("agent") => builder.agent(step, &model, text, not_carried),
            Some("user") => builder.message(Message::user(text)),
            _ => builder.message(Message::system(text)),
        }
    }
    builder.next_span
}

struct Builder<'e> {
    events: &'e mut Vec<Event>,
    messages: u32,
    next_span: u32,
    step: u32,
}

impl Builder<'_> {
    fn message(&mut self, message: Message) {
        self.events.push(Event::Message {
            index: self.messages,
            message,
        });
        self.messages += 1;
    }

    fn span(&mut self) -> u32 {
        self.next_span += 1;
        self.next_span - 1
    }

    fn agent(
        &mut self,
        step: &Value,
        model: &str,
        text: String,
        not_carried: &mut dyn FnMut(&str),
    ) {
        let at = step
            .get("timestamp")
            .and_then(Value::as_str)
            .and_then(parse_rfc3339_ms)
            .unwrap_or(0);
        if step
            .get("metrics")
            .and_then(|m| m.get("logprobs"))
            .is_some_and(|l| !l.is_null())
        {
            not_carried("ATIF logprobs and token ids");
        }
        // A step with `llm_call_count: 0` was the agent's own dispatch, no model call.
        let called = step.get("llm_call_count").and_then(Value::as_u64) != Some(0);
        let mut parent = None;
        if called {
            self.step += 1;
            let span_id = self.span();
            parent = Some(span_id);
            let call = model_call(step, model, at, span_id, self.step, self.messages);
            self.events.push(Event::ModelCall(call));
        }
        let calls: Vec<ToolCall> = step
            .get("tool_calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|call| ToolCall {
                id: text_field(call, "tool_call_id"),
                name: text_field(call, "function_name"),
                arguments: call
                    .get("arguments")
                    .map_or_else(|| "{}".to_string(), Value::to_string),
            })
            .collect();
        self.message(Message::assistant(text, calls.clone()));
        let results: Vec<&Value> = step
            .get("observation")
            .and_then(|o| o.get("results"))
            .and_then(Value::as_array)
            .map(|r| r.iter().collect())
            .unwrap_or_default();
        for result in results {
            self.result(result, &calls, parent.unwrap_or(0), at, not_carried);
        }
    }

    /// One observation result: a tool call span and a tool message when it
    /// names one of the step's calls, else what the next call is shown.
    fn result(
        &mut self,
        result: &Value,
        calls: &[ToolCall],
        parent: u32,
        at: i64,
        not_carried: &mut dyn FnMut(&str),
    ) {
        let (output, media) = content(result.get("content"));
        if media {
            not_carried("ATIF images and audio");
        }
        if result
            .get("subagent_trajectory_ref")
            .is_some_and(|v| !v.is_null())
        {
            not_carried("ATIF subagent trajectory references");
        }
        let source = result.get("source_call_id").and_then(Value::as_str);
        let Some(call) = source.and_then(|id| calls.iter().find(|c| c.id == id)) else {
            self.message(Message::user(output));
            return;
        };
        let span_id = self.span();
        self.events.push(Event::ToolCall(ToolCallRecord {
            span_id,
            parent_span_id: parent,
            step: self.step,
            call_id: call.id.clone(),
            tool_name: call.name.clone(),
            arguments: call.arguments.clone(),
            result: output.clone(),
            exit_code: None,
            stdout: None,
            stderr: None,
            truncated: false,
            started_at_ms: at,
            duration_ms: 0,
            status: SpanStatus::Ok,
            error_kind: None,
            permission: None,
            permission_rule: None,
            permission_part: None,
            sandbox_profile: None,
            sandbox_denials: Vec::new(),
            mcp_server: None,
        }));
        self.message(Message::tool_result(call.id.clone(), output));
    }
}

/// An agent step's model call: its model, tokens and cost (ATIF's
/// `prompt_tokens` include cached ones, as tack's input tokens do); it sent
/// the `sent` messages so far.
fn model_call(
    step: &Value,
    model: &str,
    at: i64,
    span_id: u32,
    number: u32,
    sent: u32,
) -> ModelCallRecord {
    let metrics = step.get("metrics").filter(|m| !m.is_null());
    let tokens = |field: &str| {
        metrics
            .and_then(|m| m.get(field))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    let model = step
        .get("model_name")
        .and_then(Value::as_str)
        .unwrap_or(model);
    ModelCallRecord {
        span_id,
        step: number,
        provider: String::new(),
        request_model: model.to_string(),
        response_model: model.to_string(),
        started_at_ms: at,
        duration_ms: 0,
        finish_reason: None,
        usage: Usage {
            input_tokens: tokens("prompt_tokens"),
            output_tokens: tokens("completion_tokens"),
            cache_read_tokens: tokens("cached_tokens"),
            ..Usage::default()
        },
        cost_usd: metrics
            .and_then(|m| m.get("cost_usd"))
            .and_then(Value::as_f64),
        messages: (0..sent).collect(),
        attempt: 1,
        retry_wait_ms: 0,
        rate_limit_wait_ms: 0,
        fault: None,
        purpose: None,
        parent_span_id: None,
        status: SpanStatus::Ok,
        error: None,
    }
}

fn text_field(value: &Value, field: &str) -> String {
    value
        .get(field)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

/// A message or result's text (a string, or the text parts of a list of
/// content parts), and whether it had images or audio, which tack does not
/// keep.
fn content(value: Option<&Value>) -> (String, bool) {
    match value {
        Some(Value::String(text)) => (text.clone(), false),
        Some(Value::Array(parts)) => {
            let mut media = false;
            let mut text = Vec::new();
            for part in parts {
                match part.get("type").and_then(Value::as_str) {
                    Some("text") => text.push(text_field(part, "text")),
                    _ => media = true,
                }
            }
            (text.join("\n"), media)
        }
        _ => (String::new(), false),
    }
}
