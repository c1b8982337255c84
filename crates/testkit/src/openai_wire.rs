//! OpenAI Chat Completions as the real API writes it: `chat.completion`
//! bodies, `chat.completion.chunk` events ending in a usage chunk and
//! `[DONE]`, and `{"error": {...}}` bodies.

use serde_json::{Value, json};

use crate::script::{Finish, Reply, pieces};

const CREATED: u64 = 1_793_491_200; // 2026-11-01, fixed so answers are reproducible

fn finish_reason(reply: &Reply) -> &'static str {
    match reply.finish {
        Finish::Length => "length",
        Finish::ContentFilter => "content_filter",
        Finish::Natural if reply.tool_calls.is_empty() => "stop",
        Finish::Natural => "tool_calls",
    }
}

fn usage(reply: &Reply) -> Value {
    let u = reply.usage;
    json!({
        "prompt_tokens": u.input,
        "completion_tokens": u.output,
        "total_tokens": u.input + u.output,
        "prompt_tokens_details": { "cached_tokens": u.cached, "audio_tokens": 0 },
        "completion_tokens_details": {
            "reasoning_tokens": u.reasoning,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    })
}

pub(crate) fn body(reply: &Reply, model: &str, id: &str) -> Value {
    let content = if reply.text.is_empty() && !reply.tool_calls.is_empty() {
        Value::Null
    } else {
        json!(reply.text)
    };
    let mut message = json!({ "role": "assistant", "content": content, "refusal": null });
    if !reply.tool_calls.is_empty() {
        message["tool_calls"] = reply
            .tool_calls
            .iter()
            .map(|call| {
                json!({
                    "id": call.id,
                    "type": "function",
                    "function": { "name": call.name, "arguments": call.arguments },
                })
            })
            .collect();
    }
    json!({
        "id": id,
        "object": "chat.completion",
        "created": CREATED,
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason(reply),
        }],
        "usage": usage(reply),
        "system_fingerprint": "fp_tack_testkit",
    })
}

/// The events of a streamed answer: a role chunk, content pieces, each
/// call's id and name then its arguments in pieces, the finish, the usage.
pub(crate) fn events(reply: &Reply, model: &str, id: &str) -> Vec<String> {
    let chunk = |delta: Value, finish: Option<&str>| {
        json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": CREATED,
            "model": model,
            "system_fingerprint": "fp_tack_testkit",
            "choices": [{ "index": 0, "delta": delta, "logprobs": null, "finish_reason": finish }],
        })
    };
    let mut chunks = vec![chunk(json!({ "role": "assistant", "content": "" }), None)];
    for piece in pieces(&reply.text, 4) {
        chunks.push(chunk(json!({ "content": piece }), None));
    }
    for (index, call) in reply.tool_calls.iter().enumerate() {
        let start = json!({ "tool_calls": [{
            "index": index, "id": call.id, "type": "function",
            "function": { "name": call.name, "arguments": "" },
        }]});
        chunks.push(chunk(start, None));
        for piece in pieces(&call.arguments, 5) {
            let delta =
                json!({ "tool_calls": [{ "index": index, "function": { "arguments": piece } }] });
            chunks.push(chunk(delta, None));
        }
    }
    chunks.push(chunk(json!({}), Some(finish_reason(reply))));
    let mut last = chunk(json!({}), None);
    last["choices"] = json!([]);
    last["usage"] = usage(reply);
    chunks.push(last);
    let mut events: Vec<String> = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    events.push("data: [DONE]\n\n".to_string());
    events
}

/// OpenAI's answer to a request longer than the model's window.
pub(crate) fn context_length_body(tokens: u64, window: u64) -> Value {
    let message = format!(
        "This model's maximum context length is {window} tokens. However, your messages \
         resulted in {tokens} tokens. Please reduce the length of the messages."
    );
    json!({ "error": {
        "message": message, "type": "invalid_request_error",
        "param": "messages", "code": "context_length_exceeded",
    }})
}

pub(crate) fn error_body(status: u16, message: &str) -> Value {
    let (kind, code) = match status {
        429 => ("requests", "rate_limit_exceeded"),
        400 => ("invalid_request_error", "invalid_request"),
        401 => ("invalid_request_error", "invalid_api_key"),
        404 => ("invalid_request_error", "model_not_found"),
        _ => ("server_error", "server_error"),
    };
    json!({ "error": { "message": message, "type": kind, "param": null, "code": code } })
}
