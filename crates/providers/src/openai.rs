//! Requests in OpenAI Chat Completions (`POST {base_url}/chat/completions`),
//! which OpenRouter, vLLM, Ollama, llama.cpp, LM Studio and DeepSeek also
//! speak: the format [`crate::OpenAiModel`] writes.

use reqwest::header::{AUTHORIZATION, HeaderName};
use serde::Serialize;
use tack_model::ModelRequest;
use tack_protocol::{Message, Role, ToolCall, ToolSpec};

use crate::config::{ApiKey, Provider, ProviderConfig};
use crate::model::{BodyCache, Format};
use crate::wire::{ChatCompletionsReader, WireFormat};

/// The Chat Completions settings of one model.
#[derive(Debug, Clone)]
pub struct ChatCompletions {
    max_tokens: Option<u32>,
    /// OpenAI's own API wants `max_completion_tokens` (its reasoning models
    /// reject `max_tokens`); compatible servers know `max_tokens`.
    official: bool,
}

impl Format for ChatCompletions {
    const WIRE: WireFormat = WireFormat::ChatCompletions;
    /// An OpenAI base URL ends in the version (`…/v1`).
    const PATH_PREFIX: &'static str = "";
    type Reader = ChatCompletionsReader;

    fn from_config(config: &ProviderConfig) -> ChatCompletions {
        ChatCompletions {
            max_tokens: config.max_tokens,
            official: config.base_url() == Provider::OpenAi.default_base_url(),
        }
    }

    fn auth(key: &ApiKey) -> (HeaderName, String) {
        (AUTHORIZATION, format!("Bearer {}", key.expose()))
    }

    /// Borrows the conversation: a call late in a long trial sends the whole
    /// history, and copying it into a JSON tree first was a tenth of tack's
    /// CPU with a thousand trials in flight.
    fn body<'a>(
        &'a self,
        model: &'a str,
        stream: bool,
        request: &'a ModelRequest<'_>,
    ) -> impl Serialize + Send + Sync {
        Body {
            model,
            messages: request.messages.iter().map(message).collect(),
            // An empty `tools` array is an error on OpenAI's API.
            tools: request.tools.iter().map(tool).collect(),
            options: self.options(stream),
        }
    }

    /// [`body`](Format::body)'s bytes, each message and the tool list
    /// written once per conversation: a trial's calls send the same
    /// history, longer each time, and escaping its text again was the
    /// largest part of tack's CPU per call with a thousand trials at once.
    fn write_body(
        &self,
        model: &str,
        stream: bool,
        request: &ModelRequest<'_>,
        cache: &mut BodyCache,
    ) -> serde_json::Result<Vec<u8>> {
        let mut out = cache.buffer();
        out.extend_from_slice(b"{\"model\":");
        serde_json::to_writer(&mut out, model)?;
        out.extend_from_slice(b",\"messages\":[");
        for (index, entry) in request.messages.iter().enumerate() {
            if index > 0 {
                out.push(b',');
            }
            out.extend_from_slice(
                cache.message(index, entry, |m| serde_json::to_vec(&message(m)))?,
            );
        }
        out.push(b']');
        if !request.tools.is_empty() {
            out.extend_from_slice(b",\"tools\":");
            out.extend_from_slice(cache.tools(request.tools, |tools| {
                serde_json::to_vec(&tools.iter().map(tool).collect::<Vec<_>>())
            })?);
        }
        // The options as the whole body writes them, after the lists.
        let options = serde_json::to_vec(&self.options(stream))?;
        if let Some(fields) = options
            .strip_prefix(b"{")
            .and_then(|o| o.strip_suffix(b"}"))
            && !fields.is_empty()
        {
            out.push(b',');
            out.extend_from_slice(fields);
        }
        out.push(b'}');
        cache.wrote(&out);
        Ok(out)
    }
}

impl ChatCompletions {
    fn options(&self, stream: bool) -> Options {
        Options {
            stream,
            // Without this the stream carries no usage at all.
            stream_options: stream.then_some(StreamOptions {
                include_usage: true,
            }),
            max_tokens: self.max_tokens.filter(|_| !self.official),
            max_completion_tokens: self.max_tokens.filter(|_| self.official),
        }
    }
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(flatten)]
    options: Options,
}

/// The body's fields after the conversation.
#[derive(Serialize)]
struct Options {
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
    use tack_model::ModelRequest;

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

    /// The body written part by part, through the cache, is the body
    /// serialized whole: on a first call, a next one that adds messages
    /// (the cache reused), after a compaction (another history), with other
    /// tools, streaming or not, with either token limit.
    #[test]
    fn the_body_written_through_the_cache_is_the_whole_body() {
        let tools = vec![ToolSpec {
            name: "bash".into(),
            description: "Runs a \"command\".\nReturns its output.".into(),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
        }];
        let mut history = vec![
            Message::system("be brief"),
            Message::user("fix \"it\"\n\tnow"),
        ];
        let mut cache = BodyCache::default();
        let check = |format: &ChatCompletions,
                     stream: bool,
                     messages: &[Message],
                     tools: &[ToolSpec],
                     cache: &mut BodyCache| {
            let request = ModelRequest { messages, tools };
            let whole = serde_json::to_vec(&format.body("gpt-x", stream, &request)).unwrap();
            let parts = format.write_body("gpt-x", stream, &request, cache).unwrap();
            assert_eq!(
                String::from_utf8(parts).unwrap(),
                String::from_utf8(whole).unwrap()
            );
        };
        let plain = ChatCompletions {
            max_tokens: None,
            official: false,
        };
        check(&plain, false, &history, &tools, &mut cache);
        history.push(Message::assistant(
            "",
            vec![ToolCall {
                id: "call_1".into(),
                name: "bash".into(),
                arguments: "{}".into(),
            }],
        ));
        history.push(Message::tool_result("call_1", "a.py\nb.py"));
        check(&plain, false, &history, &tools, &mut cache);
        assert_eq!(cache.kept(), 4);
        let compacted = [
            history[0].clone(),
            Message::user("summary"),
            history[3].clone(),
        ];
        check(&plain, true, &compacted, &tools, &mut cache);
        assert_eq!(cache.kept(), 3);
        let limited = ChatCompletions {
            max_tokens: Some(64),
            official: true,
        };
        check(&limited, true, &history, &[], &mut cache);
        let unofficial = ChatCompletions {
            max_tokens: Some(64),
            official: false,
        };
        check(&unofficial, false, &history, &tools, &mut cache);
    }
}
