//! One request: forwarded to the upstream, its answer passed back, and —
//! for the model APIs — recorded once the answer has ended. A stream is
//! passed on chunk by chunk as it arrives while a [`Tap`] reads its events;
//! the call is recorded when the stream ends, before the client sees the
//! end, so a client that has its whole answer has its call recorded.

use std::collections::hash_map::DefaultHasher;
use std::convert::Infallible;
use std::hash::{Hash, Hasher};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Request, Response, StatusCode};
use tack_model::{ModelError, ModelResponse};
use tack_protocol::EventSink;
use tack_protocol::time::now_ms;
use tack_providers::wire::{error_message, install_crypto_provider};

use crate::ProxyError;
use crate::api::{Api, Tap};
use crate::recording::{Call, Recording};
use crate::request::{RequestInfo, read_request};
use crate::scrub::{Scrub, Secrets};

pub(crate) type Body = UnsyncBoxBody<Bytes, io::Error>;

#[derive(Debug)]
pub(crate) struct Shared<S> {
    /// The origin, without a trailing slash.
    pub upstream: String,
    pub client: reqwest::Client,
    pub key: Option<crate::KeyStandIn>,
    pub recording: Mutex<Recording<S>>,
}

/// The recording stays consistent through a panic in another call.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Hop-by-hop headers (RFC 9110 §7.6.1) belong to one connection, not the
/// message. `host` and `content-length` are set anew for the other side.
/// `accept-encoding` is dropped so the upstream answers uncompressed: the
/// tap must read the events, and the client gets the same bytes anyway.
const NOT_FORWARDED: [&str; 11] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "host",
    "content-length",
];

fn forwarded(headers: &HeaderMap, request: bool) -> HeaderMap {
    let mut kept = HeaderMap::new();
    for (name, value) in headers {
        let name_str = name.as_str();
        let dropped =
            NOT_FORWARDED.contains(&name_str) || (request && name_str == "accept-encoding");
        if !dropped {
            kept.append(name.clone(), value.clone());
        }
    }
    kept
}

/// The headers a provider reads its key from.
const KEY_HEADERS: [&str; 3] = ["authorization", "x-api-key", "api-key"];

/// A request's headers for the upstream, with the real key where the client
/// sent the stand-in in a key header (the whole value, or after a scheme:
/// `Bearer`), and only on a model call (`swap`): the agent must not be able
/// to have the key put into a header or a path the upstream echoes back.
fn request_headers(headers: &HeaderMap, key: Option<&crate::KeyStandIn>, swap: bool) -> HeaderMap {
    let mut kept = forwarded(headers, true);
    let Some(key) = key.filter(|_| swap) else {
        return kept;
    };
    for (name, value) in kept.iter_mut() {
        if !KEY_HEADERS.contains(&name.as_str()) {
            continue;
        }
        let Ok(text) = value.to_str() else { continue };
        let swapped = match text.split_once(' ') {
            Some((scheme, token)) if token.trim() == key.stand_in => {
                format!("{scheme} {}", key.key.expose())
            }
            _ if text.trim() == key.stand_in => key.key.expose().to_string(),
            _ => continue,
        };
        if let Ok(mut real) = HeaderValue::from_str(&swapped) {
            real.set_sensitive(true);
            *value = real;
        }
    }
    kept
}

/// `upstream` as an origin to append request paths to.
pub(crate) fn upstream_origin(upstream: &url::Url) -> Result<String, ProxyError> {
    let refuse = |reason: &str| ProxyError::Upstream {
        url: upstream.to_string(),
        reason: reason.to_string(),
    };
    if !matches!(upstream.scheme(), "http" | "https") {
        return Err(refuse("the scheme must be http or https"));
    }
    if upstream.query().is_some() || upstream.fragment().is_some() {
        return Err(refuse("it has a query or fragment; give the origin only"));
    }
    // The agent's own requests start with /v1: an upstream ending in it
    // would be asked for /v1/v1/….
    if upstream.path().trim_end_matches('/').ends_with("/v1") {
        return Err(refuse(
            "its path ends in /v1, which the agent sends itself; give the origin without it",
        ));
    }
    Ok(upstream.as_str().trim_end_matches('/').to_string())
}

pub(crate) fn client(
    upstream: &str,
    read_timeout: std::time::Duration,
) -> Result<reqwest::Client, ProxyError> {
    install_crypto_provider();
    let mut builder = reqwest::Client::builder()
        .connect_timeout(std::time::Duration::from_secs(30))
        .read_timeout(read_timeout)
        // The client decides whether to follow, as it would without us.
        .redirect(reqwest::redirect::Policy::none());
    let loopback = url::Url::parse(upstream)
        .ok()
        .is_some_and(|url| matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]")));
    if loopback {
        // A proxy from the environment cannot reach this machine's servers.
        builder = builder.no_proxy();
    }
    builder
        .build()
        .map_err(|error| ProxyError::Client(error.to_string()))
}

/// Why a recorded call has no answer: its span's error.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CallError {
    #[error("upstream unreachable: {}", describe(.0))]
    Unreachable(#[source] reqwest::Error),
    #[error("the upstream's answer broke off: {}", describe(.0))]
    AnswerBrokeOff(#[source] reqwest::Error),
    #[error("the upstream's stream broke off: {}", describe(.0))]
    StreamBrokeOff(#[source] reqwest::Error),
    /// The upstream's own error message, from its answer's body.
    #[error("HTTP {status}: {message}")]
    Status { status: u16, message: String },
    #[error(transparent)]
    Answer(#[from] ModelError),
    #[error(
        "the stream was cut off before it ended: the client closed the connection, or the proxy \
         stopped"
    )]
    CutOff,
}

/// A recorded call in progress: what is known before the answer.
struct Pending {
    api: Api,
    request: RequestInfo,
    fingerprint: u64,
    started_at_ms: i64,
    started: Instant,
    secrets: Secrets,
}

impl Pending {
    fn end(self, result: Result<ModelResponse, CallError>) -> Call {
        Call {
            api: self.api,
            result,
            secrets: self.secrets,
            request: self.request,
            fingerprint: self.fingerprint,
            started_at_ms: self.started_at_ms,
            duration_ms: self.started.elapsed().as_millis() as u64,
        }
    }
}

fn full(bytes: Bytes) -> Body {
    Full::new(bytes)
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

fn respond(status: StatusCode, headers: HeaderMap, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    *response.headers_mut() = headers;
    response
}

/// The proxy's own error, in a shape both SDKs read: OpenAI's
/// `error.message`, Anthropic's `type: error`.
fn proxy_error(status: StatusCode, code: &str, message: &str) -> Response<Body> {
    let body = serde_json::json!({
        "type": "error",
        "error": { "type": "proxy_error", "code": code, "message": message },
    });
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    respond(status, headers, full(Bytes::from(body.to_string())))
}

/// reqwest's error and its causes, without the URL (a query may hold a key).
fn describe(error: &reqwest::Error) -> String {
    tack_providers::wire::error_chain(error)
}

pub(crate) async fn handle<S: EventSink + 'static>(
    shared: Arc<Shared<S>>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let (parts, body) = request.into_parts();
    let body = match body.collect().await {
        Ok(body) => body.to_bytes(),
        Err(error) => {
            let message = format!("tack proxy: could not read the request: {error}");
            return Ok(proxy_error(
                StatusCode::BAD_REQUEST,
                "bad_request",
                &message,
            ));
        }
    };
    let path_and_query = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    let url = format!("{}{path_and_query}", shared.upstream);
    let api = (parts.method == hyper::Method::POST)
        .then(|| Api::of_path(parts.uri.path()))
        .flatten();
    let pending = api.map(|api| {
        let mut hasher = DefaultHasher::new();
        path_and_query.hash(&mut hasher);
        body.hash(&mut hasher);
        Pending {
            api,
            request: read_request(api, &body),
            fingerprint: hasher.finish(),
            started_at_ms: now_ms(),
            started: Instant::now(),
            // The real key too: an upstream's error may quote it.
            secrets: Secrets::of(&parts.headers, parts.uri.query())
                .and(shared.key.as_ref().map(|key| key.key.expose())),
        }
    });
    let sent = shared
        .client
        .request(parts.method.clone(), &url)
        .headers(request_headers(
            &parts.headers,
            shared.key.as_ref(),
            api.is_some(),
        ))
        .body(body)
        .send()
        .await;
    let upstream = match sent {
        Ok(upstream) => upstream,
        Err(error) => return Ok(unreachable(&shared, pending, error)),
    };
    let Some(pending) = pending else {
        return Ok(pass_through(upstream));
    };
    let status = upstream.status();
    let is_stream = upstream
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/event-stream"));
    if status.is_success() && is_stream {
        return Ok(tapped(shared, pending, upstream));
    }
    Ok(whole(&shared, pending, upstream).await)
}

/// The upstream could not be reached: a 502 for the client, an error span.
fn unreachable<S: EventSink>(
    shared: &Shared<S>,
    pending: Option<Pending>,
    error: reqwest::Error,
) -> Response<Body> {
    let error = error.without_url();
    let message = format!(
        "tack proxy: could not reach the upstream {}: {}",
        shared.upstream,
        describe(&error)
    );
    let message = match pending {
        Some(pending) => {
            let message = pending.secrets.scrub(&message);
            let call = pending.end(Err(CallError::Unreachable(error)));
            lock(&shared.recording).record(call);
            message
        }
        None => message,
    };
    proxy_error(StatusCode::BAD_GATEWAY, "upstream_unreachable", &message)
}

/// An unrecorded request's answer, passed on as it arrives.
fn pass_through(upstream: reqwest::Response) -> Response<Body> {
    let status = upstream.status();
    let headers = forwarded(upstream.headers(), false);
    let chunks = futures::stream::unfold(Some(upstream), |upstream| async move {
        let mut upstream = upstream?;
        match upstream.chunk().await {
            Ok(Some(chunk)) => Some((Ok(Frame::data(chunk)), Some(upstream))),
            Ok(None) => None,
            Err(error) => Some((Err(io::Error::other(describe(&error.without_url()))), None)),
        }
    });
    respond(status, headers, StreamBody::new(chunks).boxed_unsync())
}

/// A whole answer (JSON, or an error status): read, recorded, passed on.
async fn whole<S: EventSink>(
    shared: &Shared<S>,
    pending: Pending,
    upstream: reqwest::Response,
) -> Response<Body> {
    let status = upstream.status();
    let headers = response_headers(shared, upstream.headers());
    let body = match upstream.bytes().await {
        Ok(body) => body,
        Err(error) => {
            let error = error.without_url();
            let message = format!(
                "tack proxy: the upstream's answer broke off: {}",
                describe(&error)
            );
            let call = pending.end(Err(CallError::AnswerBrokeOff(error)));
            lock(&shared.recording).record(call);
            return proxy_error(StatusCode::BAD_GATEWAY, "upstream_broke_off", &message);
        }
    };
    let body = match &shared.key {
        Some(key) => Scrub::whole(key.key.expose(), &body),
        None => body,
    };
    let result = if status.is_success() {
        let requested = pending.request.model.clone();
        pending
            .api
            .parse(&body, &requested)
            .map_err(CallError::from)
    } else {
        Err(CallError::Status {
            status: status.as_u16(),
            message: error_message(&body),
        })
    };
    lock(&shared.recording).record(pending.end(result));
    respond(status, headers, full(body))
}

/// The upstream's answer headers for the client, the real key cut out.
fn response_headers<S>(shared: &Shared<S>, headers: &HeaderMap) -> HeaderMap {
    let kept = forwarded(headers, false);
    match &shared.key {
        Some(key) => Scrub::headers(key.key.expose(), kept),
        None => kept,
    }
}

/// A stream in passage: each chunk, the real key cut out, goes to the tap
/// and on to the client.
struct Passage<S: EventSink + 'static> {
    shared: Arc<Shared<S>>,
    upstream: reqwest::Response,
    tap: Option<Tap>,
    pending: Option<Pending>,
    scrub: Option<Scrub>,
}

impl<S: EventSink + 'static> Passage<S> {
    /// `chunk` as the client and the tap get it.
    fn pass(&mut self, chunk: Bytes) -> Bytes {
        let chunk = match self.scrub.as_mut() {
            Some(scrub) => scrub.feed(&chunk),
            None => chunk,
        };
        if let Some(tap) = self.tap.as_mut() {
            tap.feed(&chunk);
            // Recorded now: a client that has what it waited for may hang
            // up before the upstream's end is read, which is no cut-off.
            if tap.is_done() {
                self.record(None);
            }
        }
        chunk
    }

    /// What the scrub held back at the stream's end, then the record.
    fn end(&mut self) -> Option<Bytes> {
        let held = self.scrub.as_mut().map(Scrub::end).unwrap_or_default();
        if let Some(tap) = self.tap.as_mut() {
            tap.feed(&held);
        }
        self.record(None);
        (!held.is_empty()).then_some(held)
    }

    /// Records the call, once: `error` when the stream broke.
    fn record(&mut self, error: Option<CallError>) {
        let (Some(tap), Some(pending)) = (self.tap.take(), self.pending.take()) else {
            return;
        };
        let result = match error {
            Some(error) => Err(error),
            None => tap.finish(&pending.request.model).map_err(CallError::from),
        };
        lock(&self.shared.recording).record(pending.end(result));
    }
}

impl<S: EventSink + 'static> Drop for Passage<S> {
    /// The client went away, or the proxy cut the call at shutdown.
    fn drop(&mut self) {
        self.record(Some(CallError::CutOff));
    }
}

fn tapped<S: EventSink + 'static>(
    shared: Arc<Shared<S>>,
    pending: Pending,
    upstream: reqwest::Response,
) -> Response<Body> {
    let status = upstream.status();
    let headers = response_headers(&shared, upstream.headers());
    let passage = Passage {
        tap: Some(Tap::new(pending.api)),
        pending: Some(pending),
        scrub: shared.key.as_ref().map(|key| Scrub::new(key.key.expose())),
        shared,
        upstream,
    };
    let chunks = futures::stream::unfold(Some(passage), |passage| async move {
        let mut passage = passage?;
        match passage.upstream.chunk().await {
            Ok(Some(chunk)) => {
                let chunk = passage.pass(chunk);
                Some((Ok(Frame::data(chunk)), Some(passage)))
            }
            Ok(None) => {
                let held = passage.end()?;
                // The last frame; the next turn ends the stream.
                Some((Ok(Frame::data(held)), None))
            }
            Err(error) => {
                let error = error.without_url();
                let what = describe(&error);
                passage.record(Some(CallError::StreamBrokeOff(error)));
                Some((Err(io::Error::other(what)), None))
            }
        }
    });
    respond(status, headers, StreamBody::new(chunks).boxed_unsync())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderName;

    #[test]
    fn the_stand_in_key_is_swapped_for_the_real_one_and_nothing_else() {
        let key = crate::KeyStandIn::new(tack_providers::ApiKey::new("sk-real-key-123"));
        assert!(key.stand_in.starts_with("tack-stand-in-") && key.stand_in.len() == 46);
        let mut headers = HeaderMap::new();
        let bearer = format!("Bearer {}", key.stand_in);
        headers.insert("authorization", HeaderValue::from_str(&bearer).unwrap());
        headers.insert("x-api-key", HeaderValue::from_str(&key.stand_in).unwrap());
        headers.insert("x-other", HeaderValue::from_static("sk-its-own-key"));
        headers.insert("x-echo", HeaderValue::from_str(&key.stand_in).unwrap());
        let sent = request_headers(&headers, Some(&key), true);
        assert_eq!(sent["authorization"], "Bearer sk-real-key-123");
        assert_eq!(sent["x-api-key"], "sk-real-key-123");
        assert_eq!(sent["x-other"], "sk-its-own-key");
        // Not in a header the upstream might echo, nor off a model call.
        assert_eq!(sent["x-echo"], key.stand_in.as_str());
        assert!(sent["authorization"].is_sensitive());
        let stand_in = key.stand_in.as_str();
        assert_eq!(request_headers(&headers, None, true)["x-api-key"], stand_in);
        assert_eq!(
            request_headers(&headers, Some(&key), false)["x-api-key"],
            stand_in
        );
    }

    #[test]
    fn hop_by_hop_headers_stay_behind() {
        let mut headers = HeaderMap::new();
        for (name, value) in [
            ("connection", "keep-alive"),
            ("host", "127.0.0.1:1"),
            ("accept-encoding", "gzip"),
            ("x-api-key", "k"),
            ("anthropic-version", "2023-06-01"),
        ] {
            headers.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        let kept = forwarded(&headers, true);
        let names: Vec<_> = kept.keys().map(HeaderName::as_str).collect();
        assert_eq!(names, ["x-api-key", "anthropic-version"]);
        assert!(forwarded(&headers, false).contains_key("accept-encoding"));
    }

    #[test]
    fn an_upstream_must_be_an_http_origin() {
        let origin = |text: &str| upstream_origin(&text.parse().unwrap());
        assert_eq!(
            origin("https://api.openai.com/").unwrap(),
            "https://api.openai.com"
        );
        assert_eq!(
            origin("http://127.0.0.1:9/proxy").unwrap(),
            "http://127.0.0.1:9/proxy"
        );
        assert!(origin("ftp://host").is_err());
        assert!(origin("https://host/?key=1").is_err());
        assert!(origin("https://api.openai.com/v1").is_err());
        assert!(origin("https://api.openai.com/v1/").is_err());
    }
}
