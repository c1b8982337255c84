//! The conversation a request carries, as tack's `Message`s. tack's
//! providers only write these wire formats; reading them back is the
//! proxy's own job. Parts tack has no field for (images, files, thinking,
//! cache markers) are left out: the recorded message keeps the text, the
//! tool calls and the tool results.

use serde_json::Value;
use tack_protocol::{Message, Role, ToolCall};

use crate::api::Api;

/// What the proxy records about a request.
#[derive(Debug, Clone, PartialEq)]
pub struct RequestInfo {
    pub model: String,
    pub messages: Vec<Message>,
}

/// Reads `body`; a body that is not JSON still gets recorded, with no
/// model and no messages.
pub fn read_request(api: Api, body: &[u8]) -> RequestInfo {
    let json: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let model = text(json.get("model"));
    let messages = match api {
        Api::ChatCompletions => chat_messages(&json),
        Api::Responses => responses_messages(&json),
        Api::Messages => anthropic_messages(&json),
    };
    RequestInfo { model, messages }
}

fn text(value: Option<&Value>) -> String {
    value
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn items(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// Content as a string, or as a list of parts whose text (`text`,
/// `input_text`, `output_text`) is joined.
fn content_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|part| {
                let kind = part.get("type").and_then(Value::as_str);
                matches!(kind, None | Some("text" | "input_text" | "output_text"))
            })
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// Tool arguments as the model wrote them: a string kept, an object
/// serialised (as the providers' readers do).
fn arguments(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(raw)) => raw.clone(),
        Some(Value::Null) | None => String::new(),
        Some(other) => other.to_string(),
    }
}

fn role(name: &str) -> Role {
    match name {
        "system" | "developer" => Role::System,
        "assistant" => Role::Assistant,
        "tool" | "function" => Role::Tool,
        _ => Role::User,
    }
}

fn chat_messages(json: &Value) -> Vec<Message> {
    items(json.get("messages"))
        .iter()
        .map(|wire| {
            let role = role(&text(wire.get("role")));
            let calls = items(wire.get("tool_calls"))
                .iter()
                .map(|call| ToolCall {
                    id: text(call.get("id")),
                    name: text(call.pointer("/function/name")),
                    arguments: arguments(call.pointer("/function/arguments")),
                })
                .collect();
            Message {
                role,
                content: content_text(wire.get("content")),
                tool_calls: calls,
                tool_call_id: wire
                    .get("tool_call_id")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            }
        })
        .collect()
}

/// `instructions` first, then `input`: a string, or items — messages,
/// `function_call`s (joined to the assistant message before them, as Chat
/// Completions has them) and `function_call_output`s.
fn responses_messages(json: &Value) -> Vec<Message> {
    let mut messages = Vec::new();
    let instructions = text(json.get("instructions"));
    if !instructions.is_empty() {
        messages.push(Message::system(instructions));
    }
    match json.get("input") {
        Some(Value::String(input)) => messages.push(Message::user(input.clone())),
        Some(Value::Array(input)) => {
            for item in input {
                responses_item(&mut messages, item);
            }
        }
        _ => {}
    }
    messages
}

fn responses_item(messages: &mut Vec<Message>, item: &Value) {
    match item.get("type").and_then(Value::as_str) {
        Some("function_call") => {
            let call = ToolCall {
                id: text(item.get("call_id")),
                name: text(item.get("name")),
                arguments: arguments(item.get("arguments")),
            };
            match messages.last_mut() {
                Some(last) if last.role == Role::Assistant => last.tool_calls.push(call),
                _ => messages.push(Message::assistant("", vec![call])),
            }
        }
        Some("function_call_output") => messages.push(Message::tool_result(
            text(item.get("call_id")),
            content_text(item.get("output")),
        )),
        Some("message") | None => {
            let role = role(&text(item.get("role")));
            let content = content_text(item.get("content"));
            messages.push(Message {
                role,
                content,
                tool_calls: Vec::new(),
                tool_call_id: None,
            });
        }
        Some(_) => {} // reasoning, item references, …: not conversation text
    }
}

/// `system` first, then the turns. A user turn's `tool_result` blocks
/// become one tool message each, before the turn's own text.
fn anthropic_messages(json: &Value) -> Vec<Message> {
    let mut messages = Vec::new();
    let system = content_text(json.get("system"));
    if !system.is_empty() {
        messages.push(Message::system(system));
    }
    for turn in items(json.get("messages")) {
        let content = turn.get("content");
        if text(turn.get("role")) == "assistant" {
            let calls = blocks(content, "tool_use")
                .map(|block| ToolCall {
                    id: text(block.get("id")),
                    name: text(block.get("name")),
                    arguments: block
                        .get("input")
                        .map_or_else(|| "{}".to_string(), |input| arguments(Some(input))),
                })
                .collect();
            messages.push(Message::assistant(content_text(content), calls));
            continue;
        }
        for result in blocks(content, "tool_result") {
            messages.push(Message::tool_result(
                text(result.get("tool_use_id")),
                content_text(result.get("content")),
            ));
        }
        let own = content_text(content);
        let only_results = blocks(content, "tool_result").next().is_some() && own.is_empty();
        if !only_results {
            messages.push(Message::user(own));
        }
    }
    messages
}

fn blocks<'v>(content: Option<&'v Value>, kind: &'v str) -> impl Iterator<Item = &'v Value> {
    items(content)
        .iter()
        .filter(move |block| block.get("type").and_then(Value::as_str) == Some(kind))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(api: Api, body: Value) -> RequestInfo {
        read_request(api, body.to_string().as_bytes())
    }

    #[test]
    fn chat_messages_keep_roles_calls_and_results() {
        let info = read(
            Api::ChatCompletions,
            json!({"model": "gpt-4o", "messages": [
                {"role": "developer", "content": "be brief"},
                {"role": "user", "content": [{"type": "text", "text": "list"},
                                             {"type": "image_url", "image_url": {"url": "x"}}]},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "a.txt"}]}),
        );
        assert_eq!(info.model, "gpt-4o");
        assert_eq!(
            info.messages,
            [
                Message::system("be brief"),
                Message::user("list"),
                Message::assistant(
                    "",
                    vec![ToolCall {
                        id: "c1".into(),
                        name: "bash".into(),
                        arguments: "{\"command\":\"ls\"}".into(),
                    }]
                ),
                Message::tool_result("c1", "a.txt"),
            ]
        );
    }

    #[test]
    fn responses_input_joins_calls_to_the_assistant_turn() {
        let info = read(
            Api::Responses,
            json!({"model": "gpt-5", "instructions": "sys", "input": [
                {"role": "user", "content": [{"type": "input_text", "text": "go"}]},
                {"type": "message", "role": "assistant",
                 "content": [{"type": "output_text", "text": "ok"}]},
                {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{}"},
                {"type": "function_call", "call_id": "c2", "name": "grep", "arguments": "{}"},
                {"type": "reasoning", "summary": []},
                {"type": "function_call_output", "call_id": "c1", "output": "done"}]}),
        );
        assert_eq!(info.messages.len(), 4);
        assert_eq!(info.messages[0], Message::system("sys"));
        assert_eq!(info.messages[1], Message::user("go"));
        assert_eq!(info.messages[2].content, "ok");
        assert_eq!(info.messages[2].tool_calls.len(), 2);
        assert_eq!(info.messages[3], Message::tool_result("c1", "done"));
        let short = read(Api::Responses, json!({"model": "m", "input": "hi"}));
        assert_eq!(short.messages, [Message::user("hi")]);
    }

    #[test]
    fn anthropic_tool_results_become_tool_messages() {
        let info = read(
            Api::Messages,
            json!({"model": "claude", "system": [{"type": "text", "text": "sys"}], "messages": [
                {"role": "user", "content": "fix it"},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hm"},
                    {"type": "text", "text": "looking"},
                    {"type": "tool_use", "id": "t1", "name": "bash", "input": {"command": "ls"}}]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1",
                     "content": [{"type": "text", "text": "a.txt"}]}]}]}),
        );
        assert_eq!(info.messages.len(), 4);
        assert_eq!(info.messages[0], Message::system("sys"));
        assert_eq!(info.messages[2].content, "looking");
        assert_eq!(
            info.messages[2].tool_calls[0].arguments,
            r#"{"command":"ls"}"#
        );
        assert_eq!(info.messages[3], Message::tool_result("t1", "a.txt"));
        let broken = read_request(Api::Messages, b"not json");
        assert_eq!(broken.model, "");
        assert!(broken.messages.is_empty());
    }
}
