//! The HTTP side both providers share: one client per model, the POST with
//! its headers, status and transport errors mapped to `ModelError`, server-
//! sent events read chunk by chunk, and the rate limiter around each call.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, Once};
use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use tack_model::{CallAnnotation, ModelError, ModelResponse};

use crate::config::{ApiKey, ProviderConfig, ProviderError, is_loopback};
use crate::errors::{api_error, transport_error};
use crate::ratelimit::{RateLimiter, RateWait, WaitObserver};
use crate::sse::{SseEvent, SseParser};
use crate::wire::{Flow, Wire};

/// Connecting never needs minutes, whatever the request timeout.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Clone)]
pub(crate) struct Endpoint {
    client: reqwest::Client,
    url: String,
    headers: HeaderMap,
    /// Kept only to scrub it out of error text.
    key: Option<ApiKey>,
    timeout: Duration,
    limiter: Option<Arc<RateLimiter>>,
    on_wait: Option<WaitObserver>,
}

impl std::fmt::Debug for Endpoint {
    // No headers: one of them is the key.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoint")
            .field("url", &self.url)
            .field("key", &self.key)
            .field("timeout", &self.timeout)
            .field("rate_limited", &self.limiter.is_some())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// An endpoint at `{base_url}{path}`, sending `headers` and, when there is
    /// a key, `auth` (the header name and its value).
    pub(crate) fn new(
        config: &ProviderConfig,
        path: &str,
        mut headers: HeaderMap,
        auth: Option<(HeaderName, String)>,
        key: Option<ApiKey>,
    ) -> Result<Endpoint, ProviderError> {
        let base = config.base_url();
        let invalid = |reason: String| ProviderError::InvalidBaseUrl {
            url: base.to_string(),
            reason,
        };
        let parsed = reqwest::Url::parse(base).map_err(|e| invalid(e.to_string()))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err(invalid("the scheme must be http or https".to_string()));
        }
        if let Some((name, value)) = auth {
            let mut value = HeaderValue::from_str(&value).map_err(|_| {
                ProviderError::Client("the API key is not a valid header value".into())
            })?;
            // Keeps the value out of reqwest's own Debug output.
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        Ok(Endpoint {
            client: match &config.http_clients {
                Some(shared) => shared.get(config.timeout, base)?,
                None => client(config.timeout, base)?,
            },
            url: format!("{base}{path}"),
            headers,
            key,
            timeout: config.timeout,
            limiter: config.rate_limiter.clone(),
            on_wait: config.on_rate_wait.clone(),
        })
    }

    pub(crate) fn key(&self) -> Option<&ApiKey> {
        self.key.as_ref()
    }

    /// Runs `call` under the rate limiter: waits for a budget estimated at
    /// a token per four request bytes, reports the wait, and books the real
    /// usage (or a 429) afterwards. Returns the wait with the result.
    pub(crate) async fn limited(
        &self,
        request_bytes: usize,
        call: impl Future<Output = Result<ModelResponse, ModelError>>,
    ) -> (Result<ModelResponse, ModelError>, Option<RateWait>) {
        let Some(limiter) = &self.limiter else {
            return (call.await, None);
        };
        let permit = limiter.acquire(request_bytes as u64 / 4).await;
        let wait = permit.wait;
        if let (Some(wait), Some(observer)) = (&wait, &self.on_wait) {
            observer(wait);
        }
        let result = call.await;
        match &result {
            Ok(response) => permit.succeeded(response.usage.total()),
            Err(ModelError::Api { status: 429, .. }) => permit.throttled(),
            Err(_) => permit.failed(),
        }
        (result, wait)
    }

    /// POSTs `body`; any answer but 2xx becomes `ModelError::Api`.
    pub(crate) async fn post(
        &self,
        body: Vec<u8>,
        stream: bool,
    ) -> Result<reqwest::Response, ModelError> {
        let mut request = self
            .client
            .post(&self.url)
            .headers(self.headers.clone())
            .body(body);
        if !stream {
            // A stream may run long; its silences are bounded by the client's
            // read timeout instead.
            request = request.timeout(self.timeout);
        }
        let response = request
            .send()
            .await
            .map_err(|e| transport_error(&e, self.key()))?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let headers = response.headers().clone();
        // The error body is only for the message: a broken one still leaves
        // the status to act on.
        let body = response.bytes().await.unwrap_or_default();
        Err(api_error(status.as_u16(), &headers, &body, self.key()))
    }

    pub(crate) async fn read_body(
        &self,
        response: reqwest::Response,
    ) -> Result<bytes::Bytes, ModelError> {
        response
            .bytes()
            .await
            .map_err(|e| transport_error(&e, self.key()))
    }

    /// Reads server-sent events until the handler says `Done` or the body
    /// ends; returns what the handler said last, so the caller can tell a
    /// finished stream from one cut off.
    pub(crate) async fn read_events(
        &self,
        mut response: reqwest::Response,
        mut on_event: impl FnMut(SseEvent) -> Result<Flow, ModelError>,
    ) -> Result<Flow, ModelError> {
        let mut parser = SseParser::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|e| transport_error(&e, self.key()))?
        {
            for event in parser.feed(&chunk) {
                if on_event(event)? == Flow::Done {
                    return Ok(Flow::Done);
                }
            }
        }
        Ok(Flow::Continue)
    }
}

/// HTTP clients shared by the models of one run. Building a client loads
/// the system's root certificates (milliseconds of PEM decoding each, which
/// at a thousand trials starting at once held the whole run up), and a
/// shared client keeps its connections alive from one trial to the next.
/// Keyed by what a client fixes: its timeouts and whether it bypasses
/// proxies. Pooled connections belong to the tokio runtime that opened
/// them, so one set serves one runtime (one run).
#[derive(Debug, Default)]
pub struct HttpClients {
    clients: Mutex<HashMap<(Duration, bool), reqwest::Client>>,
}

impl HttpClients {
    fn get(&self, timeout: Duration, base_url: &str) -> Result<reqwest::Client, ProviderError> {
        // Held while building, so trials starting together build it once.
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let key = (timeout, is_loopback(base_url));
        if let Some(shared) = clients.get(&key) {
            return Ok(shared.clone());
        }
        let built = client(timeout, base_url)?;
        clients.insert(key, built.clone());
        Ok(built)
    }
}

fn client(timeout: Duration, base_url: &str) -> Result<reqwest::Client, ProviderError> {
    install_crypto_provider();
    let mut builder = reqwest::Client::builder()
        .user_agent(concat!("tack/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(timeout.min(MAX_CONNECT_TIMEOUT))
        .read_timeout(timeout);
    if is_loopback(base_url) {
        // A proxy from the environment cannot reach this machine's servers.
        builder = builder.no_proxy();
    }
    builder
        .build()
        .map_err(|e| ProviderError::Client(e.to_string()))
}

/// reqwest is built without a rustls crypto provider (see the workspace
/// manifest); ring is installed as the process default once. If the host
/// program installed one first, that one is used. Call it before building
/// any reqwest client that may speak HTTPS.
pub fn install_crypto_provider() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let _already_installed = rustls::crypto::ring::default_provider().install_default();
    });
}

impl Endpoint {
    /// One request and its answer, read as `W` says, within the rate limit:
    /// the answer and how long the limiter made it wait.
    pub(crate) async fn exchange<W: Wire>(
        &self,
        body: Vec<u8>,
        stream: bool,
        requested: &str,
    ) -> (Result<ModelResponse, ModelError>, Option<RateWait>) {
        let size = body.len();
        let call = async {
            let response = self.post(body, stream).await?;
            if !stream {
                let bytes = self.read_body(response).await?;
                return W::parse(&bytes, requested);
            }
            let mut state = W::default();
            let flow = self
                .read_events(response, |event| state.apply(&event))
                .await?;
            state.finish(flow == Flow::Done, requested)
        };
        self.limited(size, call).await
    }
}

/// The note the harness records on a call's span: the time it waited for
/// the shared rate limiter, if it had to.
pub(crate) fn annotation(wait: Option<RateWait>) -> Option<CallAnnotation> {
    wait.map(|wait| CallAnnotation {
        fault: None,
        rate_limit_wait_ms: wait.waited.as_millis() as u64,
    })
}
