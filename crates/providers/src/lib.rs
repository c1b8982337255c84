//! Real models for the harness: OpenAI Chat Completions (and the servers
//! that speak it — OpenRouter, vLLM, Ollama, llama.cpp, LM Studio, DeepSeek)
//! and the Anthropic Messages API, streaming or not, with usage normalised
//! to the OpenTelemetry GenAI conventions, failures mapped to `ModelError`
//! so the harness retries what is worth retrying, client-side rate limits
//! shared across trials, and a dated price table for cost reports.
//!
//! The API key never appears in an error, a `Debug` output or a log line.

mod anthropic;
mod anthropic_response;
mod config;
mod env;
mod errors;
mod http;
mod openai;
mod openai_response;
mod prices;
mod ratelimit;
pub mod sse;

/// The readers of each API's answers (a whole JSON body, or a stream of
/// server-sent events), for code that sees these answers without making the
/// call itself, like the recording proxy.
pub mod wire {
    pub use crate::anthropic_response::StreamState as MessagesReader;
    pub use crate::errors::{chain as error_chain, error_message};
    pub use crate::http::{Flow, Wire, install_crypto_provider};
    pub use crate::openai_response::StreamState as ChatCompletionsReader;
}

pub use anthropic::{ANTHROPIC_VERSION, AnthropicModel};
pub use config::{
    ApiKey, DEFAULT_ANTHROPIC_MAX_TOKENS, DEFAULT_TIMEOUT, Provider, ProviderConfig, ProviderError,
    build_model, provider_model,
};
pub use env::{EnvSettings, env_file_path, env_settings, env_settings_with, parse_env_file};
pub use http::HttpClients;
pub use openai::OpenAiModel;
pub use prices::{Price, PriceError, PriceTable, cost};
pub use ratelimit::{
    Permit, RateLimiter, RateLimiters, RateLimits, RateWait, WaitCause, WaitLog, WaitObserver,
};
