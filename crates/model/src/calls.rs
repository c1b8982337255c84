//! Tool calls as the built-in models write them, and the bookkeeping every
//! answer needs (call ids, token usage).

use serde_json::json;
use tack_protocol::{FinishReason, Message, ToolCall, ToolSpec};

use crate::tool_names::{BASH, READ_FILE, STR_REPLACE};
use crate::{ModelRequest, ModelResponse, TokenCounter};

#[derive(Debug, Default)]
pub(crate) struct CallWriter {
    issued: u32,
    pub(crate) tokens: TokenCounter,
}

impl CallWriter {
    /// Tool calls written so far.
    pub(crate) fn issued(&self) -> u32 {
        self.issued
    }

    pub(crate) fn call(&mut self, name: &str, arguments: serde_json::Value) -> ToolCall {
        self.raw_call(name, arguments.to_string())
    }

    pub(crate) fn raw_call(&mut self, name: &str, arguments: String) -> ToolCall {
        self.issued += 1;
        ToolCall {
            id: format!("call_{}", self.issued),
            name: name.to_string(),
            arguments,
        }
    }

    pub(crate) fn bash(&mut self, command: &str) -> ToolCall {
        self.call(BASH, json!({ "command": command }))
    }

    pub(crate) fn read_file(&mut self, path: &str) -> ToolCall {
        self.call(READ_FILE, json!({ "path": path }))
    }

    pub(crate) fn str_replace(&mut self, path: &str, old: &str, new: &str) -> ToolCall {
        self.call(
            STR_REPLACE,
            json!({ "path": path, "old_string": old, "new_string": new }),
        )
    }

    /// An answer to `request`, with usage counted over the real request.
    pub(crate) fn respond(
        &mut self,
        request: ModelRequest<'_>,
        message: Message,
        finish_reason: FinishReason,
        model: &str,
    ) -> ModelResponse {
        let usage = self.tokens.usage(request.messages, request.tools, &message);
        ModelResponse {
            message,
            finish_reason,
            usage,
            response_model: model.to_string(),
        }
    }
}

pub(crate) fn offers(tools: &[ToolSpec], name: &str) -> bool {
    tools.iter().any(|tool| tool.name == name)
}

/// The tool results that answer the latest assistant turn.
pub(crate) fn latest_results(messages: &[Message]) -> impl Iterator<Item = &Message> {
    messages
        .iter()
        .rev()
        .take_while(|m| m.role == tack_protocol::Role::Tool)
}
