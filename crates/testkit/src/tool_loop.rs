//! A conversation-driven answer policy. A script is consumed in arrival
//! order, which only suits one conversation at a time; a tool loop answers
//! each request from its own messages — a call of one tool until the
//! conversation holds `steps` tool results, then a final answer — so any
//! number of concurrent conversations, from tack or from another harness,
//! are driven alike. Benchmarks use it.

use serde::{Deserialize, Serialize};
use serde_json::Value;

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
}

impl Default for ToolLoop {
    fn default() -> ToolLoop {
        ToolLoop {
            steps: 10,
            tool: "bash".to_string(),
            argument: "echo step {step}".to_string(),
            latency_ms: 0,
            final_text: "done".to_string(),
        }
    }
}

/// Why a request cannot be answered by the loop; sent back as a 400.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LoopError(pub String);

impl ToolLoop {
    /// The answer to one request body, and its step (0 for the final one).
    pub(crate) fn answer(
        &self,
        dialect: Dialect,
        request: &Value,
        body_len: usize,
    ) -> Result<(Reply, u32), LoopError> {
        let done = tool_results(dialect, request);
        // Rough token figures, so harnesses record non-zero usage: four
        // bytes of request per input token.
        let usage = |output: &str| ScriptedUsage {
            input: (body_len / 4) as u64,
            output: (output.len() / 4 + 1) as u64,
            ..ScriptedUsage::default()
        };
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

/// Tool results in the conversation so far: `tool` messages (OpenAI), or
/// `tool_result` blocks of user messages (Anthropic).
fn tool_results(dialect: Dialect, request: &Value) -> usize {
    let messages = request
        .get("messages")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    match dialect {
        Dialect::OpenAi => messages
            .iter()
            .filter(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
            .count(),
        Dialect::Anthropic => messages
            .iter()
            .filter_map(|m| m.get("content").and_then(Value::as_array))
            .flatten()
            .filter(|block| block.get("type").and_then(Value::as_str) == Some("tool_result"))
            .count(),
    }
}

/// Picks one field out of a tool definition.
type Field = fn(&Value) -> Option<&Value>;

/// The first required parameter of the tool named `tool` among the
/// request's tools (else its first property).
fn first_parameter(dialect: Dialect, request: &Value, tool: &str) -> Result<String, LoopError> {
    let tools = request
        .get("tools")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let (name_of, schema_of): (Field, Field) = match dialect {
        Dialect::OpenAi => (
            |t| t.pointer("/function/name"),
            |t| t.pointer("/function/parameters"),
        ),
        Dialect::Anthropic => (|t| t.get("name"), |t| t.get("input_schema")),
    };
    let offered: Vec<&str> = tools
        .iter()
        .filter_map(|t| name_of(t).and_then(Value::as_str))
        .collect();
    let schema = tools
        .iter()
        .find(|t| name_of(t).and_then(Value::as_str) == Some(tool))
        .and_then(schema_of)
        .ok_or_else(|| {
            LoopError(format!(
                "tack-testkit: the tool loop calls `{tool}`, but the request offers {offered:?}"
            ))
        })?;
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .and_then(|r| r.first())
        .and_then(Value::as_str);
    let first_property = || {
        schema
            .get("properties")
            .and_then(Value::as_object)
            .and_then(|p| p.keys().next())
            .map(String::as_str)
    };
    required
        .or_else(first_property)
        .map(str::to_string)
        .ok_or_else(|| LoopError(format!("tack-testkit: tool `{tool}` has no parameters")))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
        let (first, step) = tool_loop.answer(Dialect::OpenAi, &openai(0), 400).unwrap();
        assert_eq!(step, 1);
        assert_eq!(first.tool_calls[0].name, "bash");
        assert_eq!(first.tool_calls[0].arguments, r#"{"cmd":"echo step 1"}"#);
        assert_eq!(first.usage.input, 100);
        let (second, step) = tool_loop.answer(Dialect::OpenAi, &openai(1), 400).unwrap();
        assert_eq!((step, second.tool_calls[0].id.as_str()), (2, "call_2"));
        let (last, step) = tool_loop.answer(Dialect::OpenAi, &openai(2), 400).unwrap();
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
        let (reply, _) = tool_loop.answer(Dialect::OpenAi, &openai(0), 0).unwrap();
        assert_eq!(reply.tool_calls[0].arguments, r#"{"path":"notes.txt"}"#);
        let missing = ToolLoop {
            tool: "grep".to_string(),
            ..ToolLoop::default()
        };
        let error = missing.answer(Dialect::OpenAi, &openai(0), 0).unwrap_err();
        assert!(
            error.0.contains("`grep`") && error.0.contains("\"bash\""),
            "{error:?}"
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
        let (reply, step) = ToolLoop::default()
            .answer(Dialect::Anthropic, &request, 0)
            .unwrap();
        assert_eq!(step, 2);
        assert_eq!(
            reply.tool_calls[0].arguments,
            r#"{"command":"echo step 2"}"#
        );
    }
}
