//! The OpenAI Responses API (`POST /v1/responses`) as the real API writes
//! it: `response` objects whose `output` holds message and function-call
//! items, and the named event stream from `response.created` to
//! `response.completed` (or `response.incomplete` when the output limit cut
//! the answer). Errors use the Chat Completions `{"error": {...}}` shape,
//! as the real API does.

use serde_json::{Value, json};

use crate::script::{Finish, Reply, pieces};

const CREATED: u64 = 1_793_491_200; // 2026-11-01, fixed so answers are reproducible

fn usage(reply: &Reply) -> Value {
    let u = reply.usage;
    json!({
        "input_tokens": u.input,
        "input_tokens_details": { "cached_tokens": u.cached },
        "output_tokens": u.output,
        "output_tokens_details": { "reasoning_tokens": u.reasoning },
        "total_tokens": u.input + u.output,
    })
}

/// `completed`, or `incomplete` with the reason the real API gives.
fn status(reply: &Reply) -> (&'static str, Value) {
    match reply.finish {
        Finish::Natural => ("completed", Value::Null),
        Finish::Length => ("incomplete", json!({ "reason": "max_output_tokens" })),
        Finish::ContentFilter => ("incomplete", json!({ "reason": "content_filter" })),
    }
}

fn message_item(id: &str, text: &str, status: &str) -> Value {
    let content = if status == "completed" {
        json!([{ "type": "output_text", "text": text, "annotations": [] }])
    } else {
        json!([])
    };
    json!({
        "type": "message", "id": format!("msg_{id}"), "status": status,
        "role": "assistant", "content": content,
    })
}

fn call_item(id: &str, index: usize, call: &crate::ScriptedCall, arguments: &str) -> Value {
    json!({
        "type": "function_call", "id": format!("fc_{id}_{index}"), "call_id": call.id,
        "name": call.name, "arguments": arguments, "status": "completed",
    })
}

fn output(reply: &Reply, id: &str) -> Vec<Value> {
    let mut items = Vec::new();
    if !reply.text.is_empty() || reply.tool_calls.is_empty() {
        items.push(message_item(id, &reply.text, "completed"));
    }
    for (index, call) in reply.tool_calls.iter().enumerate() {
        items.push(call_item(id, index, call, &call.arguments));
    }
    items
}

/// The response object; `done` false gives the in-progress shell that
/// `response.created` carries.
fn response(reply: &Reply, model: &str, id: &str, done: bool) -> Value {
    let (status, incomplete) = if done {
        status(reply)
    } else {
        ("in_progress", Value::Null)
    };
    json!({
        "id": format!("resp_{id}"),
        "object": "response",
        "created_at": CREATED,
        "status": status,
        "error": null,
        "incomplete_details": incomplete,
        "instructions": null,
        "model": model,
        "output": if done { output(reply, id) } else { Vec::new() },
        "parallel_tool_calls": true,
        "temperature": 1.0,
        "tool_choice": "auto",
        "tools": [],
        "top_p": 1.0,
        "usage": if done { usage(reply) } else { Value::Null },
    })
}

pub(crate) fn body(reply: &Reply, model: &str, id: &str) -> Value {
    response(reply, model, id, true)
}

/// The events of a streamed answer, each `event: <type>` with the same
/// `type` and a `sequence_number` in its data.
pub(crate) fn events(reply: &Reply, model: &str, id: &str) -> Vec<String> {
    let mut events = vec![
        json!({ "type": "response.created", "response": response(reply, model, id, false) }),
        json!({ "type": "response.in_progress", "response": response(reply, model, id, false) }),
    ];
    let mut index = 0;
    if !reply.text.is_empty() || reply.tool_calls.is_empty() {
        text_events(&mut events, reply, id);
        index += 1;
    }
    for (n, call) in reply.tool_calls.iter().enumerate() {
        call_events(&mut events, id, index, n, call);
        index += 1;
    }
    let last = match status(reply).0 {
        "completed" => "response.completed",
        _ => "response.incomplete",
    };
    events.push(json!({ "type": last, "response": response(reply, model, id, true) }));
    events
        .into_iter()
        .enumerate()
        .map(|(seq, mut event)| {
            event["sequence_number"] = json!(seq);
            let kind = event["type"].as_str().unwrap_or_default().to_string();
            format!("event: {kind}\ndata: {event}\n\n")
        })
        .collect()
}

fn text_events(events: &mut Vec<Value>, reply: &Reply, id: &str) {
    let item_id = format!("msg_{id}");
    let at = json!({ "item_id": item_id, "output_index": 0, "content_index": 0 });
    let with = |kind: &str, extra: Value| {
        let mut event = at.clone();
        event["type"] = json!(kind);
        if let (Some(event), Value::Object(extra)) = (event.as_object_mut(), extra) {
            event.extend(extra);
        }
        event
    };
    events.push(json!({
        "type": "response.output_item.added", "output_index": 0,
        "item": message_item(id, "", "in_progress"),
    }));
    let empty_part = json!({ "type": "output_text", "text": "", "annotations": [] });
    events.push(with(
        "response.content_part.added",
        json!({ "part": empty_part }),
    ));
    for piece in pieces(&reply.text, 4) {
        events.push(with(
            "response.output_text.delta",
            json!({ "delta": piece }),
        ));
    }
    events.push(with(
        "response.output_text.done",
        json!({ "text": reply.text }),
    ));
    let part = json!({ "type": "output_text", "text": reply.text, "annotations": [] });
    events.push(with("response.content_part.done", json!({ "part": part })));
    events.push(json!({
        "type": "response.output_item.done", "output_index": 0,
        "item": message_item(id, &reply.text, "completed"),
    }));
}

fn call_events(
    events: &mut Vec<Value>,
    id: &str,
    output_index: usize,
    n: usize,
    call: &crate::ScriptedCall,
) {
    let mut started = call_item(id, n, call, "");
    started["status"] = json!("in_progress");
    let item_id = format!("fc_{id}_{n}");
    events.push(json!({
        "type": "response.output_item.added", "output_index": output_index, "item": started,
    }));
    for piece in pieces(&call.arguments, 5) {
        events.push(json!({
            "type": "response.function_call_arguments.delta", "item_id": item_id,
            "output_index": output_index, "delta": piece,
        }));
    }
    events.push(json!({
        "type": "response.function_call_arguments.done", "item_id": item_id,
        "output_index": output_index, "arguments": call.arguments,
    }));
    events.push(json!({
        "type": "response.output_item.done", "output_index": output_index,
        "item": call_item(id, n, call, &call.arguments),
    }));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ScriptedCall, ScriptedUsage};

    fn reply() -> Reply {
        Reply {
            text: "hello there".into(),
            tool_calls: vec![ScriptedCall::new("call_1", "bash", r#"{"command":"ls"}"#)],
            usage: ScriptedUsage {
                input: 30,
                output: 7,
                cached: 10,
                ..ScriptedUsage::default()
            },
            ..Reply::default()
        }
    }

    #[test]
    fn a_body_holds_the_text_the_calls_and_the_usage() {
        let body = body(&reply(), "gpt-5", "1");
        assert_eq!(body["status"], "completed");
        assert_eq!(body["output"][0]["content"][0]["text"], "hello there");
        assert_eq!(body["output"][1]["call_id"], "call_1");
        assert_eq!(body["output"][1]["arguments"], r#"{"command":"ls"}"#);
        assert_eq!(body["usage"]["input_tokens"], 30);
        assert_eq!(body["usage"]["input_tokens_details"]["cached_tokens"], 10);
    }

    #[test]
    fn a_stream_puts_the_pieces_between_created_and_completed() {
        let events = events(&reply(), "gpt-5", "1");
        let data: Vec<Value> = events
            .iter()
            .map(|e| serde_json::from_str(e.split_once("data: ").unwrap().1.trim()).unwrap())
            .collect();
        assert_eq!(data[0]["type"], "response.created");
        assert_eq!(data.last().unwrap()["type"], "response.completed");
        let text: String = data
            .iter()
            .filter(|d| d["type"] == "response.output_text.delta")
            .map(|d| d["delta"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(text, "hello there");
        let numbers: Vec<u64> = data
            .iter()
            .map(|d| d["sequence_number"].as_u64().unwrap())
            .collect();
        assert_eq!(numbers, (0..data.len() as u64).collect::<Vec<_>>());
        assert!(events[0].starts_with("event: response.created\n"));
        let limited = Reply {
            finish: Finish::Length,
            ..reply()
        };
        let last = self::events(&limited, "m", "2").pop().unwrap();
        assert!(last.starts_with("event: response.incomplete\n"), "{last}");
    }
}
