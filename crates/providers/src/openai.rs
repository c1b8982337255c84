//! OpenAI Chat Completions (`POST {base_url}/chat/completions`), which
//! OpenRouter, vLLM, Ollama, llama.cpp, LM Studio and DeepSeek also speak.

use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde_json::{Value, json};
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

    fn body(&self, request: &ModelRequest<'_>) -> Value {
        let mut body = json!({
            "model": self.model,
            "messages": request.messages.iter().map(message).collect::<Vec<_>>(),
        });
        if !request.tools.is_empty() {
            // An empty `tools` array is an error on OpenAI's API.
            body["tools"] = request.tools.iter().map(tool).collect();
        }
        if self.stream {
            body["stream"] = json!(true);
            // Without this the stream carries no usage at all.
            body["stream_options"] = json!({ "include_usage": true });
        }
        if let Some(max) = self.max_tokens {
            body[self.max_tokens_field] = json!(max);
        }
        body
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

fn message(message: &Message) -> Value {
    match message.role {
        Role::System | Role::User => json!({
            "role": message.role.as_str(),
            "content": message.content,
        }),
        Role::Assistant => assistant(message),
        Role::Tool => json!({
            "role": "tool",
            "tool_call_id": message.tool_call_id.as_deref().unwrap_or_default(),
            "content": message.content,
        }),
    }
}

fn assistant(message: &Message) -> Value {
    // A turn of tool calls alone has `content: null`, as the API writes it.
    let content = if message.content.is_empty() && !message.tool_calls.is_empty() {
        Value::Null
    } else {
        json!(message.content)
    };
    let mut value = json!({ "role": "assistant", "content": content });
    if !message.tool_calls.is_empty() {
        value["tool_calls"] = message.tool_calls.iter().map(tool_call).collect();
    }
    value
}

/// The arguments go back exactly as the model wrote them, broken or not.
fn tool_call(call: &ToolCall) -> Value {
    json!({
        "id": call.id,
        "type": "function",
        "function": { "name": call.name, "arguments": call.arguments },
    })
}

fn tool(spec: &ToolSpec) -> Value {
    json!({
        "type": "function",
        "function": {
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let values: Vec<Value> = messages.iter().map(message).collect();
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
