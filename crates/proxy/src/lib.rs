//! A recording proxy for OpenAI- and Anthropic-compatible APIs, so that
//! agents tack does not drive itself (Claude Code, Codex CLI,
//! mini-swe-agent, …) can be evaluated from the same traces as its own.
//!
//! It must not depend on `tack-agent`, `tack-suite` or `tack-trace`: it
//! records through an event sink like the agent loop.
//!
//! Point the agent's base URL at the proxy; it forwards every request to
//! the upstream (same method, path and query, headers minus hop-by-hop
//! ones) and passes the answer back, a stream chunk by chunk as it
//! arrives. Calls to OpenAI Chat Completions (`POST …/chat/completions`),
//! OpenAI Responses (`POST …/responses`) and Anthropic Messages
//! (`POST …/messages`) are recorded as the events a native trial records:
//! [`Event::Message`](tack_protocol::Event::Message) for each message the
//! first time a request carries it, then an
//! [`Event::ModelCall`](tack_protocol::Event::ModelCall) with tokens, cost,
//! timing, retries and errors, then the answer as a message. Other paths
//! (`GET /v1/models`, …) are forwarded unrecorded.
//!
//! Keys (`authorization`, `x-api-key`, `api-key`, any header) are passed
//! to the upstream and never stored: events hold no headers, and error
//! text is scrubbed of every header value the request carried.
//!
//! ```no_run
//! # async fn demo() -> Result<(), tack_proxy::ProxyError> {
//! use tack_protocol::VecSink;
//! use tack_proxy::{Proxy, ProxyConfig};
//! let config = ProxyConfig::new(
//!     "127.0.0.1:0".parse().unwrap(),
//!     "https://api.openai.com".parse().unwrap(),
//! );
//! let proxy = Proxy::start(config, VecSink::default()).await?;
//! // the agent's base URL: format!("http://{}/v1", proxy.addr())
//! let stopped = proxy.shutdown().await?;
//! println!("{} calls", stopped.calls);
//! # Ok(()) }
//! ```

mod api;
mod forward;
mod recording;
mod request;
mod scrub;
mod server;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tack_protocol::{EventSink, RunTotals, SinkError};
use tack_providers::PriceTable;
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use api::Api;

use recording::Recording;

/// How long [`RunningProxy::shutdown`] lets calls in flight finish (a
/// stream being answered) before it cuts them off; a cut call is recorded
/// as an error.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Where the proxy listens and where it forwards.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Port 0 picks a free port: see [`RunningProxy::addr`].
    pub listen: SocketAddr,
    /// The API's origin, without the `/v1` the clients send, e.g.
    /// `https://api.openai.com` or `https://api.anthropic.com`: a request to
    /// `/v1/messages?beta=true` goes to `{upstream}/v1/messages?beta=true`.
    pub upstream: url::Url,
    /// Prices for each call's `cost_usd` (`None` for unpriced models).
    pub prices: PriceTable,
    /// How long the upstream may stay silent (before answering, or between
    /// two chunks of a stream) before the call fails.
    pub read_timeout: Duration,
    /// A stand-in key given to the client, and the real key the proxy puts
    /// in its place on the way up: a client whose output is recorded (an
    /// external agent echoing its environment) never holds the real one.
    pub key: Option<KeyStandIn>,
}

/// The stand-in a client sends (`Authorization: Bearer <stand-in>` or
/// `x-api-key: <stand-in>`) and the key sent upstream instead.
#[derive(Debug, Clone)]
pub struct KeyStandIn {
    pub stand_in: String,
    pub key: tack_providers::ApiKey,
}

impl KeyStandIn {
    /// A fresh random stand-in for `key`, shaped like a key
    /// (`tack-stand-in-<32 hex>`), so clients that check the form accept it.
    pub fn new(key: tack_providers::ApiKey) -> KeyStandIn {
        KeyStandIn {
            stand_in: format!("tack-stand-in-{:016x}{:016x}", os_random(), os_random()),
            key,
        }
    }
}

/// 64 bits from the OS's randomness: std seeds every `RandomState` from it
/// (and steps it for each new one in a thread), no other crate needed.
fn os_random() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(0);
    hasher.finish()
}

impl ProxyConfig {
    /// With tack's built-in price table and a ten-minute read timeout.
    pub fn new(listen: SocketAddr, upstream: url::Url) -> ProxyConfig {
        ProxyConfig {
            listen,
            upstream,
            prices: PriceTable::builtin().clone(),
            read_timeout: Duration::from_secs(600),
            key: None,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("could not listen on {addr}: {source} (is the port taken? port 0 picks a free one)")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "the upstream {url} cannot be proxied to: {reason} (give the API's origin, e.g. \
         https://api.openai.com)"
    )]
    Upstream { url: String, reason: String },
    #[error("could not build the HTTP client for the upstream: {0}")]
    Client(String),
    #[error("the proxy's server task failed: {0} (the calls recorded so far were lost)")]
    Server(String),
}

/// Starts proxies.
#[derive(Debug)]
pub struct Proxy;

impl Proxy {
    /// Binds `config.listen` and serves on the current tokio runtime until
    /// [`RunningProxy::shutdown`]. Every recorded call's events go to
    /// `sink`, as the call ends; the sink comes back at shutdown.
    pub async fn start<S: EventSink + 'static>(
        config: ProxyConfig,
        sink: S,
    ) -> Result<RunningProxy<S>, ProxyError> {
        let upstream = forward::upstream_origin(&config.upstream)?;
        let client = forward::client(&upstream, config.read_timeout)?;
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| ProxyError::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| ProxyError::Bind {
            addr: config.listen,
            source,
        })?;
        let shared = Arc::new(forward::Shared {
            upstream,
            client,
            key: config.key,
            recording: Mutex::new(Recording::new(sink, config.prices)),
        });
        let (stop, stopped) = watch::channel(false);
        let task = tokio::spawn(server::serve(listener, shared.clone(), stopped));
        Ok(RunningProxy {
            addr,
            stop,
            task,
            shared,
        })
    }
}

/// A proxy serving; [`RunningProxy::shutdown`] stops it and hands back the
/// sink. Dropped without a shutdown, it stops accepting at once and its
/// calls in flight finish in the background, recorded into a sink no one
/// gets back.
#[derive(Debug)]
pub struct RunningProxy<S> {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    shared: Arc<forward::Shared<S>>,
}

/// What a proxy did, once stopped.
#[derive(Debug)]
pub struct Stopped<S> {
    /// The sink given to [`Proxy::start`], with every event recorded.
    pub sink: S,
    /// Calls recorded, failed ones included.
    pub calls: u32,
    /// Calls recorded with status `error`.
    pub failed_calls: u32,
    /// Steps, tokens, cost and retries over all calls, for a trial's
    /// `TrialFinished`.
    pub totals: RunTotals,
    /// The first event the sink refused, if any: the recording is then
    /// incomplete.
    pub sink_error: Option<SinkError>,
}

impl<S: EventSink + 'static> RunningProxy<S> {
    /// The address it listens on (the port chosen, when 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Calls recorded so far.
    pub fn calls(&self) -> u32 {
        forward::lock(&self.shared.recording).calls
    }

    /// Stops accepting, lets calls in flight finish (up to
    /// [`SHUTDOWN_GRACE`]), and returns the sink with what was recorded.
    pub async fn shutdown(self) -> Result<Stopped<S>, ProxyError> {
        let _ = self.stop.send(true);
        self.task
            .await
            .map_err(|error| ProxyError::Server(error.to_string()))?;
        let shared = Arc::try_unwrap(self.shared)
            .map_err(|_| ProxyError::Server("a connection outlived the shutdown".to_string()))?;
        let recording = shared
            .recording
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Ok(Stopped {
            sink: recording.sink,
            calls: recording.calls,
            failed_calls: recording.failed_calls,
            totals: recording.totals,
            sink_error: recording.sink_error,
        })
    }
}
