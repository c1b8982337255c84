//! OpenAI Chat Completions (`POST {base_url}/chat/completions`), which
//! OpenRouter, vLLM, Ollama, llama.cpp, LM Studio and DeepSeek also speak.

use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde::Serialize;
use tack_model::{CallAnnotation, Model, ModelError, ModelRequest, ModelResponse};
use tack_protocol::{Message, Role, ToolCall, ToolSpec};

use crate::config::{ApiKey, Provider, ProviderConfig, ProviderError};
use crate::http::{Endpoint, annotation};
use crate::openai_response::StreamState;
use crate::ratelimit::RateWait;

pub struct OpenAiModel {
    endpoint: Endpoint,
    model: String,
    stream: bool,
    /// The last call's wait for the rate limiter, until the harness takes it.
    last_wait: Option<RateWait>,
    max_tokens: Option<u32>,
    /// OpenAI's own API wants `max_completion_tokens` (its reasoning models
    /// reject `max_tokens`); compatible servers know `max_tokens`.
    max_tokens_field: &'static str,
}

impl std::fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("model", &self.model)
            .field("endpoint", &self.endpoint)
            .field("stream", &self.stream)
            .finish_non_exhaustive()
    }
}

impl OpenAiModel {
    pub fn new(config: &ProviderConfig, key: Option<ApiKey>) -> Result<OpenAiModel, ProviderError> {
        let auth = key
            .as_ref()
            .map(|key| (AUTHORIZATION, format!("Bearer {}", key.expose())));
        let endpoint = Endpoint::new(config, "/chat/completions", HeaderMap::new(), auth, key)?;
        let official = config.base_url() == Provider::OpenAi.default_base_url();
        Ok(OpenAiModel {
            endpoint,
            model: config.model.clone(),
            stream: config.stream,
            last_wait: None,
            max_tokens: config.max_tokens,
            max_tokens_field: if official {
                "max_completion_tokens"
            } else {
                "max_tokens"
            },
        })
    }

    /// The request body, borrowing the conversation: a call late in a long
    /// trial sends the whole history, and copying it into a JSON tree first
    /// was a tenth of tack's CPU with a thousand trials in flight.
    fn body<'a>(&'a self, request: &'a ModelRequest<'_>) -> Body<'a> {
        let official = self.max_tokens_field == "max_completion_tokens";
        Body {
            model: &self.model,
            messages: request.messages.iter().map(message).collect(),
            // An empty `tools` array is an error on OpenAI's API.
            tools: request.tools.iter().map(tool).collect(),
            stream: self.stream,
            // Without this the stream carries no usage at all.
            stream_options: self.stream.then_some(StreamOptions {
                include_usage: true,
            }),
            max_tokens: self.max_tokens.filter(|_| !official),
            max_completion_tokens: self.max_tokens.filter(|_| official),
        }
    }
}

#[async_trait]
impl Model for OpenAiModel {
    fn provider(&self) -> &str {
        Provider::OpenAi.as_str()
    }

    fn model_name(&self) -> &str {
        &self.model
    }

    fn fork(&self) -> Option<Box<dyn Model>> {
        Some(Box::new(OpenAiModel {
            endpoint: self.endpoint.clone(),
            model: self.model.clone(),
            last_wait: None,
            ..*self
        }))
    }

    async fn complete(&mut self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        let body = self.body(&request);
        let (result, wait) = self
            .endpoint
            .exchange::<StreamState>(&body, self.stream, &self.model)
            .await;
        self.last_wait = wait;
        result
    }

    /// The rate-limit wait of the last call, for its span.
    fn take_annotation(&mut self) -> Option<CallAnnotation> {
        annotation(self.last_wait.take())
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct WireMessage<'a> {
    role: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    /// `None` is written as `null`.
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tool_calls: Vec<WireToolCall<'a>>,
}

#[derive(Serialize)]
struct WireToolCall<'a> {
    id: &'a str,
    r#type: &'static str,
    function: WireFunctionCall<'a>,
}

/// The arguments go back exactly as the model wrote them, broken or not.
#[derive(Serialize)]
struct WireFunctionCall<'a> {
    name: &'a str,
    arguments: &'a str,
}

#[derive(Serialize)]
struct WireTool<'a> {
    r#type: &'static str,
    function: WireFunction<'a>,
}

#[derive(Serialize)]
struct WireFunction<'a> {
    name: &'a str,
    description: &'a str,
    parameters: &'a serde_json::Value,
}

fn message(message: &Message) -> WireMessage<'_> {
    let (tool_call_id, content) = match message.role {
        Role::System | Role::User => (None, Some(message.content.as_str())),
        Role::Tool => (
            Some(message.tool_call_id.as_deref().unwrap_or_default()),
            Some(message.content.as_str()),
        ),
        // A turn of tool calls alone has `content: null`, as the API writes it.
        Role::Assistant if message.content.is_empty() && !message.tool_calls.is_empty() => {
            (None, None)
        }
        Role::Assistant => (None, Some(message.content.as_str())),
    };
    WireMessage {
        role: message.role.as_str(),
        tool_call_id,
        content,
        tool_calls: message.tool_calls.iter().map(tool_call).collect(),
    }
}

fn tool_call(call: &ToolCall) -> WireToolCall<'_> {
    WireToolCall {
        id: &call.id,
        r#type: "function",
        function: WireFunctionCall {
            name: &call.name,
            arguments: &call.arguments,
        },
    }
}

fn tool(spec: &ToolSpec) -> WireTool<'_> {
    WireTool {
        r#type: "function",
        function: WireFunction {
            name: &spec.name,
            description: &spec.description,
            parameters: &spec.parameters,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    #[test]
    fn the_conversation_is_written_in_chat_completions_form() {
        let messages = [
            Message::system("be brief"),
            Message::user("fix it"),
            Message::assistant(
                "",
                vec![ToolCall {
                    id: "call_1".into(),
                    name: "bash".into(),
                    arguments: "{\"command\": \"ls".into(),
                }],
            ),
            Message::tool_result("call_1", "a.py"),
        ];
        let values: Vec<Value> = messages
            .iter()
            .map(|m| serde_json::to_value(message(m)).unwrap())
            .collect();
        assert_eq!(values[0], json!({"role": "system", "content": "be brief"}));
        assert_eq!(
            values[2],
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "bash", "arguments": "{\"command\": \"ls"}}]})
        );
        assert_eq!(
            values[3],
            json!({"role": "tool", "tool_call_id": "call_1", "content": "a.py"})
        );
    }
}
