//! The Anthropic Messages API as the real API writes it: `message` bodies,
//! the named event stream, and `{"type": "error", ...}` bodies.

use serde_json::{Value, json};

use crate::script::{Finish, Reply, pieces};

fn stop_reason(reply: &Reply) -> &'static str {
    match reply.finish {
        Finish::Length => "max_tokens",
        Finish::ContentFilter => "refusal",
        Finish::Natural if reply.tool_calls.is_empty() => "end_turn",
        Finish::Natural => "tool_use",
    }
}

/// Anthropic's `input_tokens` counts only the tokens after the last cache
/// breakpoint: the cached ones are reported apart.
fn usage(reply: &Reply, output: u64) -> Value {
    let u = reply.usage;
    json!({
        "input_tokens": u.input.saturating_sub(u.cached + u.cache_write),
        "cache_creation_input_tokens": u.cache_write,
        "cache_read_input_tokens": u.cached,
        "output_tokens": output,
    })
}

/// A tool input as the API sends it: an object. Arguments that are not
/// one (scripted broken JSON) go as a string — the real API only sends
/// broken input when streaming.
fn input(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(object)) => Value::Object(object),
        _ => json!(arguments),
    }
}

pub(crate) fn body(reply: &Reply, model: &str, id: &str) -> Value {
    let mut content = Vec::new();
    if !reply.text.is_empty() {
        content.push(json!({ "type": "text", "text": reply.text }));
    }
    for call in &reply.tool_calls {
        content.push(json!({
            "type": "tool_use", "id": call.id, "name": call.name, "input": input(&call.arguments),
        }));
    }
    json!({
        "id": id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": stop_reason(reply),
        "stop_sequence": null,
        "usage": usage(reply, reply.usage.output),
    })
}

fn event(name: &str, data: Value) -> String {
    format!("event: {name}\ndata: {data}\n\n")
}

pub(crate) fn events(reply: &Reply, model: &str, id: &str) -> Vec<String> {
    let start = json!({ "type": "message_start", "message": {
        "id": id, "type": "message", "role": "assistant", "model": model, "content": [],
        "stop_reason": null, "stop_sequence": null, "usage": usage(reply, 1),
    }});
    let mut events = vec![
        event("message_start", start),
        event("ping", json!({ "type": "ping" })),
    ];
    let mut index = 0;
    if !reply.text.is_empty() {
        let block = json!({ "type": "text", "text": "" });
        let deltas = pieces(&reply.text, 4)
            .into_iter()
            .map(|piece| json!({ "type": "text_delta", "text": piece }));
        block_events(&mut events, index, block, deltas);
        index += 1;
    }
    for call in &reply.tool_calls {
        let block = json!({ "type": "tool_use", "id": call.id, "name": call.name, "input": {} });
        let deltas = pieces(&call.arguments, 5)
            .into_iter()
            .map(|piece| json!({ "type": "input_json_delta", "partial_json": piece }));
        block_events(&mut events, index, block, deltas);
        index += 1;
    }
    let delta = json!({
        "type": "message_delta",
        "delta": { "stop_reason": stop_reason(reply), "stop_sequence": null },
        "usage": { "output_tokens": reply.usage.output },
    });
    events.push(event("message_delta", delta));
    events.push(event("message_stop", json!({ "type": "message_stop" })));
    events
}

fn block_events(
    events: &mut Vec<String>,
    index: usize,
    block: Value,
    deltas: impl Iterator<Item = Value>,
) {
    let start = json!({ "type": "content_block_start", "index": index, "content_block": block });
    events.push(event("content_block_start", start));
    for delta in deltas {
        let data = json!({ "type": "content_block_delta", "index": index, "delta": delta });
        events.push(event("content_block_delta", data));
    }
    let stop = json!({ "type": "content_block_stop", "index": index });
    events.push(event("content_block_stop", stop));
}

pub(crate) fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    json!({ "type": "error", "error": { "type": kind, "message": message } })
}
