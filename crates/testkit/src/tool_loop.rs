//! A conversation-driven answer policy. A script is consumed in arrival
//! order, which only suits one conversation at a time; a tool loop answers
//! each request from its own messages — a call of one tool until the
//! conversation holds `steps` tool results, then a final answer — so any
//! number of concurrent conversations, from tack or from another harness,
//! are driven alike. Benchmarks use it.
//!
//! With a `context_window`, a request whose messages hold more tokens
//! (counted with `o200k_base`, as the providers count them) is refused
//! with the provider's real `context_length_exceeded` error; a harness that
//! asks for a summary (a user message after the tool results) gets one, and
//! the loop's progress survives the compaction (it is read from the last
//! tool result's call id).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::request_view::{Content, RequestView};
use crate::script::{Reply, ScriptedCall, ScriptedUsage};
use crate::server::Dialect;

/// Calls `tool` `steps` times per conversation, then answers `final_text`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolLoop {
    /// Tool calls per conversation before the final answer.
    pub steps: u32,
    /// The tool to call; it must be among the request's tools.
    pub tool: String,
    /// The value given to the tool's first required parameter (whatever
    /// the harness names it: tack's `bash` takes `command`, Inspect's
    /// `cmd`); `{step}` becomes the step number, from 1.
    pub argument: String,
    /// Every answer waits this long first, as a model's latency would.
    pub latency_ms: u64,
    pub final_text: String,
    /// Tokens a request may hold; more is refused as too long.
    pub context_window: Option<u64>,
    /// When the last tool result says it was saved to a file (tack's
    /// preview of an offloaded result: `saved to PATH.`), read that file
    /// with `read_file` before the next step, as a model told where the
    /// rest of a result is would.
    pub read_saved_results: bool,
}

impl Default for ToolLoop {
    fn default() -> ToolLoop {
        ToolLoop {
            steps: 10,
            tool: "bash".to_string(),
            argument: "echo step {step}".to_string(),
            latency_ms: 0,
            final_text: "done".to_string(),
            context_window: None,
            read_saved_results: false,
        }
    }
}

/// Why a request cannot be answered by the loop; sent back as a 400.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LoopError {
    /// The request does not fit the loop (a tool it does not offer).
    Unfit(String),
    /// The request holds more tokens than the window.
    TooLong { tokens: u64, window: u64 },
}

impl ToolLoop {
    /// The answer to one request, read as `request` from `body`, and its
    /// step (0 for the final one).
    pub(crate) fn answer(
        &self,
        dialect: Dialect,
        request: &RequestView,
        body: &[u8],
    ) -> Result<(Reply, u32), LoopError> {
        if let Some(window) = self.context_window {
            let whole: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let tokens = request_tokens(&whole);
            if tokens > window {
                return Err(LoopError::TooLong { tokens, window });
            }
        }
        let done = progress(dialect, request);
        // Rough token figures, so harnesses record non-zero usage: four
        // bytes of request per input token.
        let usage = |output: &str| ScriptedUsage {
            input: (body.len() / 4) as u64,
            output: (output.len() / 4 + 1) as u64,
            ..ScriptedUsage::default()
        };
        if done > 0 && asks_for_text(dialect, request) {
            let text = format!("Summary: {done} of {} steps done; carry on.", self.steps);
            let reply = Reply {
                usage: usage(&text),
                text,
                ..Reply::default()
            };
            return Ok((reply, 0));
        }
        if self.read_saved_results
            && let Some(path) = saved_result(dialect, request)
        {
            let arguments = serde_json::json!({ "path": path }).to_string();
            let reply = Reply {
                usage: usage(&arguments),
                tool_calls: vec![ScriptedCall::new(
                    format!("read_{done}"),
                    "read_file",
                    arguments,
                )],
                ..Reply::default()
            };
            return Ok((reply, done as u32));
        }
        if done >= self.steps as usize {
            let reply = Reply {
                text: self.final_text.clone(),
                usage: usage(&self.final_text),
                ..Reply::default()
            };
            return Ok((reply, 0));
        }
        let step = done as u32 + 1;
        let parameter = first_parameter(dialect, request, &self.tool)?;
        let value = self.argument.replace("{step}", &step.to_string());
        let arguments = serde_json::json!({ parameter: value }).to_string();
        let reply = Reply {
            usage: usage(&arguments),
            tool_calls: vec![ScriptedCall::new(
                format!("call_{step}"),
                &self.tool,
                arguments,
            )],
            ..Reply::default()
        };
        Ok((reply, step))
    }
}

/// Steps done: the step of the last tool result's call (`call_<step>`,
/// or `read_<step>` for the read of a saved result, as this loop names its
/// calls), which a harness that dropped or summarised older results still
/// sends; else the results counted.
fn progress(dialect: Dialect, request: &RequestView) -> usize {
    last_tool_result(dialect, request)
        .and_then(|(id, _)| {
            id.strip_prefix("call_")
                .or_else(|| id.strip_prefix("read_"))?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| tool_results(dialect, request))
}

/// The call id and text of the conversation's last tool result.
fn last_tool_result<'r>(dialect: Dialect, request: &'r RequestView) -> Option<(&'r str, String)> {
    request.messages.iter().rev().find_map(|m| match dialect {
        Dialect::OpenAi => Some((m.tool_call_id.as_deref()?, m.content.text())),
        Dialect::Anthropic => {
            let Content::Blocks(blocks) = &m.content else {
                return None;
            };
            let block = blocks.iter().rev().find(|b| b.tool_use_id.is_some())?;
            Some((block.tool_use_id.as_deref()?, block.content.text()))
        }
    })
}

/// The file the last tool result was saved to, if it says so and was not
/// itself the read of a saved result.
fn saved_result(dialect: Dialect, request: &RequestView) -> Option<String> {
    let (id, text) = last_tool_result(dialect, request)?;
    if !id.starts_with("call_") {
        return None;
    }
    let (_, rest) = text.split_once("saved to ")?;
    let path = rest.split_whitespace().next()?.trim_end_matches('.');
    Some(path.to_string())
}

/// Whether the conversation ends with the user asking something (text,
/// not a tool result; Anthropic puts text after the tool results of the
/// same turn): after the first step, that is a harness asking for a
/// summary of the history.
fn asks_for_text(dialect: Dialect, request: &RequestView) -> bool {
    let Some(last) = request.messages.last() else {
        return false;
    };
    if last.role.as_deref() != Some("user") {
        return false;
    }
    match (dialect, &last.content) {
        (_, Content::Text(_)) => true,
        (Dialect::Anthropic, Content::Blocks(blocks)) => blocks
            .last()
            .is_some_and(|b| b.kind.as_deref() == Some("text")),
        _ => false,
    }
}

/// The request's tokens: every text in its messages, system prompt and
/// tools, by `o200k_base`, and a few per message, as the providers count.
fn request_tokens(request: &Value) -> u64 {
    fn texts(value: &Value, bpe: &tiktoken_rs::CoreBPE) -> u64 {
        match value {
            Value::String(text) => bpe.encode_ordinary(text).len() as u64,
            Value::Array(items) => items.iter().map(|v| texts(v, bpe)).sum(),
            Value::Object(fields) => fields.values().map(|v| texts(v, bpe)).sum(),
            _ => 0,
        }
    }
    let bpe = tiktoken_rs::o200k_base_singleton();
    let messages = request.get("messages").and_then(Value::as_array);
    let overhead = 4 * messages.map_or(0, Vec::len) as u64 + 3;
    ["messages", "system", "tools"]
        .iter()
        .filter_map(|key| request.get(*key))
        .map(|v| texts(v, bpe))
        .sum::<u64>()
        + overhead
}

/// Tool results in the conversation so far: `tool` messages (OpenAI), or
/// `tool_result` blocks of user messages (Anthropic).
fn tool_results(dialect: Dialect, request: &RequestView) -> usize {
    let messages = &request.messages;
    match dialect {
        Dialect::OpenAi => messages
            .iter()
            .filter(|m| m.role.as_deref() == Some("tool"))
            .count(),
        Dialect::Anthropic => messages
            .iter()
            .filter_map(|m| match &m.content {
                Content::Blocks(blocks) => Some(blocks),
                _ => None,
            })
            .flatten()
            .filter(|block| block.kind.as_deref() == Some("tool_result"))
            .count(),
    }
}

/// The first required parameter of the tool named `tool` among the
/// request's tools (else its first property by name).
fn first_parameter(
    dialect: Dialect,
    request: &RequestView,
    tool: &str,
) -> Result<String, LoopError> {
    let openai = dialect == Dialect::OpenAi;
    let offered: Vec<&str> = (request.tools.iter())
        .filter_map(|t| t.named(openai).0)
        .collect();
    let schema = (request.tools.iter())
        .map(|t| t.named(openai))
        .find(|(name, _)| *name == Some(tool))
        .and_then(|(_, schema)| schema)
        .ok_or_else(|| {
            LoopError::Unfit(format!(
                "tack-testkit: the tool loop calls `{tool}`, but the request offers {offered:?}"
            ))
        })?;
    (schema.required.first())
        .or(schema.properties.0.as_ref())
        .map(|name| name.to_string())
        .ok_or_else(|| LoopError::Unfit(format!("tack-testkit: tool `{tool}` has no parameters")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// `answer` to `request` as its body.
    fn answer(
        tool_loop: &ToolLoop,
        dialect: Dialect,
        request: &Value,
    ) -> Result<(Reply, u32), LoopError> {
        let body = serde_json::to_vec(request).unwrap();
        tool_loop.answer(dialect, &RequestView::parse(&body), &body)
    }

    fn openai(tool_messages: usize) -> Value {
        let mut messages = vec![json!({"role": "user", "content": "go"})];
        for _ in 0..tool_messages {
            messages.push(json!({"role": "assistant", "content": null}));
            messages.push(json!({"role": "tool", "content": "ok"}));
        }
        json!({
            "messages": messages,
            "tools": [
                {"type": "function", "function": {"name": "read", "parameters": {"properties": {"path": {}}}}},
                {"type": "function", "function": {"name": "bash", "parameters": {
                    "properties": {"timeout": {}, "cmd": {}}, "required": ["cmd"]}}},
            ],
        })
    }

    #[test]
    fn calls_the_tool_until_the_conversation_has_enough_results() {
        let tool_loop = ToolLoop {
            steps: 2,
            ..ToolLoop::default()
        };
        let (first, step) = answer(&tool_loop, Dialect::OpenAi, &openai(0)).unwrap();
        assert_eq!(step, 1);
        assert_eq!(first.tool_calls[0].name, "bash");
        assert_eq!(first.tool_calls[0].arguments, r#"{"cmd":"echo step 1"}"#);
        // Four bytes of the body per input token.
        let body = serde_json::to_vec(&openai(0)).unwrap();
        assert_eq!(first.usage.input, (body.len() / 4) as u64);
        let (second, step) = answer(&tool_loop, Dialect::OpenAi, &openai(1)).unwrap();
        assert_eq!((step, second.tool_calls[0].id.as_str()), (2, "call_2"));
        let (last, step) = answer(&tool_loop, Dialect::OpenAi, &openai(2)).unwrap();
        assert_eq!((step, last.text.as_str()), (0, "done"));
        assert!(last.tool_calls.is_empty());
    }

    #[test]
    fn takes_the_first_property_without_required_and_names_missing_tools() {
        let tool_loop = ToolLoop {
            tool: "read".to_string(),
            argument: "notes.txt".to_string(),
            ..ToolLoop::default()
        };
        let (reply, _) = answer(&tool_loop, Dialect::OpenAi, &openai(0)).unwrap();
        assert_eq!(reply.tool_calls[0].arguments, r#"{"path":"notes.txt"}"#);
        let missing = ToolLoop {
            tool: "grep".to_string(),
            ..ToolLoop::default()
        };
        let error = answer(&missing, Dialect::OpenAi, &openai(0)).unwrap_err();
        let LoopError::Unfit(message) = &error else {
            panic!("{error:?}")
        };
        assert!(
            message.contains("`grep`") && message.contains("\"bash\""),
            "{error:?}"
        );
    }

    #[test]
    fn refuses_what_outgrows_the_window_and_survives_a_compaction() {
        let tool_loop = ToolLoop {
            steps: 5,
            context_window: Some(200),
            ..ToolLoop::default()
        };
        let mut long = openai(0);
        long["messages"][0]["content"] = json!("word ".repeat(300));
        let refused = answer(&tool_loop, Dialect::OpenAi, &long).unwrap_err();
        let LoopError::TooLong { tokens, window } = refused else {
            panic!("{refused:?}")
        };
        assert!(tokens > 300 && window == 200, "{tokens}");
        // A compacted conversation: the summary, then the last step's call
        // and result. Progress comes from the call id, not the count.
        let compacted = json!({
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "user", "content": "summary of steps 1-2"},
                {"role": "assistant", "content": null, "tool_calls": [{"id": "call_3"}]},
                {"role": "tool", "tool_call_id": "call_3", "content": "ok"},
            ],
            "tools": openai(0)["tools"],
        });
        let (next, step) = answer(&tool_loop, Dialect::OpenAi, &compacted).unwrap();
        assert_eq!((step, next.tool_calls[0].id.as_str()), (4, "call_4"));
        // Asked for a summary after the tool results: text, no call.
        let mut asking = compacted.clone();
        asking["messages"]
            .as_array_mut()
            .unwrap()
            .push(json!({"role": "user", "content": "summarise"}));
        let (summary, step) = answer(&tool_loop, Dialect::OpenAi, &asking).unwrap();
        assert_eq!(step, 0);
        assert!(summary.tool_calls.is_empty());
        assert!(
            summary.text.starts_with("Summary: 3 of 5 steps"),
            "{}",
            summary.text
        );
    }

    #[test]
    fn counts_anthropic_tool_result_blocks() {
        let request = json!({
            "messages": [
                {"role": "user", "content": "go"},
                {"role": "assistant", "content": [{"type": "tool_use"}]},
                {"role": "user", "content": [{"type": "tool_result"}]},
            ],
            "tools": [{"name": "bash", "input_schema": {"required": ["command"]}}],
        });
        let (reply, step) = answer(&ToolLoop::default(), Dialect::Anthropic, &request).unwrap();
        assert_eq!(step, 2);
        assert_eq!(
            reply.tool_calls[0].arguments,
            r#"{"command":"echo step 2"}"#
        );
    }
}
