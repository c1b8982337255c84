//! A model behind a provider's HTTP API. What every wire format shares — the
//! endpoint (client, key, rate limiter, error mapping), the model id,
//! streaming or not, the rate-limit wait of the last call, forking for a
//! subagent — is written here once; what differs between formats (the path,
//! the headers, the request body, the reader of the answer) is a [`Format`].

use async_trait::async_trait;
use reqwest::header::{HeaderMap, HeaderName};
use serde::Serialize;
use tack_model::{CallAnnotation, Model, ModelError, ModelRequest, ModelResponse};
use tack_protocol::{Message, ToolSpec};

use crate::anthropic::Messages;
use crate::config::{ApiKey, ProviderConfig, ProviderError};
use crate::http::{Endpoint, annotation};
use crate::openai::ChatCompletions;
use crate::ratelimit::RateWait;
use crate::wire::{Wire, WireFormat};

/// OpenAI Chat Completions, which OpenRouter, vLLM, Ollama, llama.cpp,
/// LM Studio and DeepSeek also speak.
pub type OpenAiModel = ProviderModel<ChatCompletions>;

/// The Anthropic Messages API.
pub type AnthropicModel = ProviderModel<Messages>;

/// How a model speaks one wire format. Not nameable outside this crate, so
/// the formats are the ones tack's providers implement.
pub trait Format: std::fmt::Debug + Clone + Send + Sync + 'static {
    /// The format, as a value: its provider and the end of its path.
    const WIRE: WireFormat;
    /// What goes between the base URL and [`WireFormat::path`]: the API's
    /// version, for a provider whose base URL leaves it out.
    const PATH_PREFIX: &'static str;
    /// The reader of its answers, whole or streamed.
    type Reader: Wire + Send;

    /// The format's own settings, from the configuration.
    fn from_config(config: &ProviderConfig) -> Self;
    /// Headers every call sends, besides the key's.
    fn headers() -> HeaderMap {
        HeaderMap::new()
    }
    /// The header that carries the key, and its value.
    fn auth(key: &ApiKey) -> (HeaderName, String);
    /// The request body for `request`, borrowing the conversation.
    fn body<'a>(
        &'a self,
        model: &'a str,
        stream: bool,
        request: &'a ModelRequest<'_>,
    ) -> impl Serialize + Send + Sync;
    /// The request body's bytes: by default [`body`](Self::body) written
    /// whole. A format may reuse from `cache` what it wrote of the same
    /// conversation for the trial's earlier calls, each of which sends it
    /// all again.
    fn write_body(
        &self,
        model: &str,
        stream: bool,
        request: &ModelRequest<'_>,
        cache: &mut BodyCache,
    ) -> serde_json::Result<Vec<u8>> {
        let _ = cache;
        serde_json::to_vec(&self.body(model, stream, request))
    }
}

/// What a format wrote of one conversation's messages and tools, kept
/// beside the message or tool list it was written from: the next call
/// reuses each part whose source is equal, and writes the rest.
#[derive(Debug, Default)]
pub struct BodyCache {
    messages: Vec<(Message, Vec<u8>)>,
    tools: Option<(Vec<ToolSpec>, Vec<u8>)>,
    /// The last body's length: the next, as long and a little more, is
    /// written into one allocation instead of growing through several.
    last_len: usize,
}

impl BodyCache {
    /// Message `index`'s JSON: the one written before if the message is
    /// the same, else `write`'s (kept for the next call).
    pub(crate) fn message(
        &mut self,
        index: usize,
        message: &Message,
        write: impl FnOnce(&Message) -> serde_json::Result<Vec<u8>>,
    ) -> serde_json::Result<&[u8]> {
        let fresh = match self.messages.get(index) {
            Some((kept, _)) if kept == message => None,
            _ => Some(write(message)?),
        };
        if let Some(json) = fresh {
            // A different history from here on (a compaction): what was
            // kept after this message is of no use.
            self.messages.truncate(index);
            self.messages.push((message.clone(), json));
        }
        Ok(&self.messages[index].1)
    }

    /// A buffer for the next body.
    pub(crate) fn buffer(&self) -> Vec<u8> {
        Vec::with_capacity(self.last_len + 1024)
    }

    /// Notes the body just written.
    pub(crate) fn wrote(&mut self, body: &[u8]) {
        self.last_len = body.len();
    }

    /// How many messages it keeps.
    #[cfg(test)]
    pub(crate) fn kept(&self) -> usize {
        self.messages.len()
    }

    /// The tools' JSON, reused while the list is the same.
    pub(crate) fn tools(
        &mut self,
        tools: &[ToolSpec],
        write: impl FnOnce(&[ToolSpec]) -> serde_json::Result<Vec<u8>>,
    ) -> serde_json::Result<&[u8]> {
        let same = matches!(&self.tools, Some((kept, _)) if kept.as_slice() == tools);
        if !same {
            self.tools = Some((tools.to_vec(), write(tools)?));
        }
        Ok(self.tools.as_ref().map_or(&[][..], |(_, json)| json))
    }
}

/// A provider model speaking the wire format `F`. Its `Debug` shows no key:
/// the endpoint's leaves it out.
#[derive(Debug)]
pub struct ProviderModel<F> {
    endpoint: Endpoint,
    model: String,
    stream: bool,
    /// The last call's wait for the rate limiter, until the harness takes it.
    last_wait: Option<RateWait>,
    format: F,
    /// What the format wrote of this conversation so far.
    cache: BodyCache,
}

impl<F: Format> ProviderModel<F> {
    pub fn new(config: &ProviderConfig, key: Option<ApiKey>) -> Result<Self, ProviderError> {
        let auth = key.as_ref().map(F::auth);
        let path = format!("{}{}", F::PATH_PREFIX, F::WIRE.path());
        Ok(ProviderModel {
            endpoint: Endpoint::new(config, &path, F::headers(), auth, key)?,
            model: config.model.clone(),
            stream: config.stream,
            last_wait: None,
            format: F::from_config(config),
            cache: BodyCache::default(),
        })
    }
}

#[async_trait]
impl<F: Format> Model for ProviderModel<F> {
    fn provider(&self) -> &str {
        F::WIRE.provider().as_str()
    }

    fn model_name(&self) -> &str {
        &self.model
    }

    fn fork(&self) -> Option<Box<dyn Model>> {
        Some(Box::new(ProviderModel {
            endpoint: self.endpoint.clone(),
            model: self.model.clone(),
            stream: self.stream,
            last_wait: None,
            format: self.format.clone(),
            cache: BodyCache::default(),
        }))
    }

    async fn complete(&mut self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        self.last_wait = None;
        let body = self
            .format
            .write_body(&self.model, self.stream, &request, &mut self.cache)
            .map_err(|e| {
                ModelError::InvalidResponse(format!("could not encode the request: {e}"))
            })?;
        let (result, wait) = self
            .endpoint
            .exchange::<F::Reader>(body, self.stream, &self.model)
            .await;
        self.last_wait = wait;
        result
    }

    /// The rate-limit wait of the last call, for its span.
    fn take_annotation(&mut self) -> Option<CallAnnotation> {
        annotation(self.last_wait.take())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tack_protocol::Provider;

    #[test]
    fn each_format_calls_its_providers_path() {
        let mut config = ProviderConfig::new(Provider::OpenAi, "m");
        config.base_url = Some("http://127.0.0.1:9/v1".to_string());
        let openai = OpenAiModel::new(&config, None).unwrap();
        assert_eq!(openai.provider(), "openai");
        assert!(format!("{openai:?}").contains("http://127.0.0.1:9/v1/chat/completions"));
        config.base_url = Some("http://127.0.0.1:9".to_string());
        let anthropic = AnthropicModel::new(&config, None).unwrap();
        assert_eq!(anthropic.provider(), "anthropic");
        assert!(format!("{anthropic:?}").contains("http://127.0.0.1:9/v1/messages"));
    }
}
