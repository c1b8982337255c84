//! The loopback server: hyper on 127.0.0.1. A scripted server takes one
//! request per connection so that a connection-level fault (a reset, a cut)
//! hits exactly the request it was scripted for, and records every request
//! before answering it; a tool-loop server keeps connections alive, as a
//! real API does, and keeps counts only.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Channel, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde::Serialize;
use serde_json::Value;
use tokio::net::TcpListener;

use crate::ServerOptions;
use crate::io::Resettable;
use crate::request_view::RequestView;
use crate::script::{Reply, ScriptedResponse};
use crate::tool_loop::{LoopError, ToolLoop};
use crate::{anthropic_wire, openai_wire, responses_wire};

/// The wire format a server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// `POST /v1/chat/completions` and `POST /v1/responses` (the Responses
    /// API), key in `Authorization: Bearer`.
    OpenAi,
    /// `POST /v1/messages`, key in `x-api-key`.
    Anthropic,
}

/// Which of a dialect's APIs a request is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Api {
    ChatCompletions,
    Responses,
    Messages,
}

impl Dialect {
    fn route(self, path: &str) -> Option<Api> {
        match (self, path) {
            (Dialect::OpenAi, "/v1/chat/completions") => Some(Api::ChatCompletions),
            (Dialect::OpenAi, "/v1/responses") => Some(Api::Responses),
            (Dialect::Anthropic, "/v1/messages") => Some(Api::Messages),
            _ => None,
        }
    }

    fn auth_header(self) -> &'static str {
        match self {
            Dialect::OpenAi => "authorization",
            Dialect::Anthropic => "x-api-key",
        }
    }

    fn key_value(self, key: &str) -> String {
        match self {
            Dialect::OpenAi => format!("Bearer {key}"),
            Dialect::Anthropic => key.to_string(),
        }
    }
}

/// Headers that may carry a key; their values are never recorded.
const KEY_HEADERS: [&str; 2] = ["authorization", "x-api-key"];

/// One request as the server saw it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// Lower-case names; `authorization` and `x-api-key` left out.
    pub headers: BTreeMap<String, String>,
    /// The dialect's auth header was present.
    pub auth_present: bool,
    /// …and held exactly the expected test key.
    pub auth_matches: bool,
    /// Key-carrying headers present other than the dialect's own.
    pub other_key_headers: Vec<String>,
    /// The body as JSON (`Null` if it was not JSON).
    pub body: Value,
}

/// Where answers come from.
pub(crate) enum Answers {
    /// In arrival order, one entry per request.
    Script(Mutex<VecDeque<ScriptedResponse>>),
    /// From each request's own conversation.
    Loop(ToolLoop),
}

/// What a server has done so far (`GET /tack-testkit/stats` returns it as
/// JSON).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ServerStats {
    /// Requests received, on any path but this one.
    pub requests: u64,
    /// Time spent in the server's own work — reading the request, choosing
    /// and writing the answer — not counting scripted delays or latency,
    /// nor the sending of a streamed body. Benchmarks subtract it from a
    /// client's wall time.
    pub busy_us: u64,
    /// OTLP/HTTP trace exports received at `POST /v1/traces` (not in
    /// `requests`; their handling is in `busy_us`), and their body bytes.
    pub otlp_requests: u64,
    pub otlp_bytes: u64,
}

pub(crate) struct Shared {
    pub(crate) dialect: Dialect,
    expected_key: String,
    record_to: Option<PathBuf>,
    answers: Answers,
    requests: Mutex<Vec<RecordedRequest>>,
    received: AtomicU64,
    busy_us: AtomicU64,
    otlp_requests: AtomicU64,
    otlp_bytes: AtomicU64,
}

impl Shared {
    pub(crate) fn new(dialect: Dialect, answers: Answers, options: &ServerOptions) -> Shared {
        Shared {
            dialect,
            expected_key: options.expected_key.clone(),
            record_to: options.record_to.clone(),
            answers,
            requests: Mutex::new(Vec::new()),
            received: AtomicU64::new(0),
            busy_us: AtomicU64::new(0),
            otlp_requests: AtomicU64::new(0),
            otlp_bytes: AtomicU64::new(0),
        }
    }

    pub(crate) fn script(script: Vec<ScriptedResponse>) -> Answers {
        Answers::Script(Mutex::new(script.into()))
    }

    pub(crate) fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.requests).clone()
    }

    pub(crate) fn remaining(&self) -> usize {
        match &self.answers {
            Answers::Script(script) => lock(script).len(),
            Answers::Loop(_) => 0,
        }
    }

    /// Adds to a script; a tool loop has none, and ignores it.
    pub(crate) fn push(&self, response: ScriptedResponse) {
        if let Answers::Script(script) = &self.answers {
            lock(script).push_back(response);
        }
    }

    pub(crate) fn stats(&self) -> ServerStats {
        ServerStats {
            requests: self.received.load(Ordering::SeqCst),
            busy_us: self.busy_us.load(Ordering::SeqCst),
            otlp_requests: self.otlp_requests.load(Ordering::SeqCst),
            otlp_bytes: self.otlp_bytes.load(Ordering::SeqCst),
        }
    }

    fn keep_alive(&self) -> bool {
        matches!(self.answers, Answers::Loop(_))
    }
}

/// Data behind these locks stays consistent through a panic.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

type Body = BoxBody<Bytes, io::Error>;

/// Accepts connections until the task is dropped.
pub(crate) async fn serve(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(_) => {
                // Out of descriptors or similar: let it pass, keep serving.
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let reset = Arc::new(AtomicBool::new(false));
        let io = TokioIo::new(Resettable::new(stream, reset.clone()));
        let shared = shared.clone();
        let keep_alive = shared.keep_alive();
        tokio::spawn(async move {
            let service = service_fn(move |request| answer(shared.clone(), reset.clone(), request));
            // A connection that ends in a scripted fault ends in an error.
            let _ = http1::Builder::new()
                .keep_alive(keep_alive)
                .serve_connection(io, service)
                .await;
        });
    }
}

pub(crate) async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// The path of the server's counters.
pub const STATS_PATH: &str = "/tack-testkit/stats";

/// Where an OTLP/HTTP exporter posts traces: the server is also a
/// collector that accepts them, so a benchmark can stream a run's spans to
/// the server that answers its model calls.
pub const OTLP_TRACES_PATH: &str = "/v1/traces";

async fn answer(
    shared: Arc<Shared>,
    reset: Arc<AtomicBool>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    if request.method() == hyper::Method::GET && request.uri().path() == STATS_PATH {
        let stats = serde_json::to_string(&shared.stats()).unwrap_or_default();
        return Ok(json_response(200, &[], Bytes::from(stats)));
    }
    let started = Instant::now();
    if request.method() == hyper::Method::POST && request.uri().path() == OTLP_TRACES_PATH {
        let response = otlp_sink(&shared, request).await;
        let busy_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        shared.busy_us.fetch_add(busy_us, Ordering::SeqCst);
        return Ok(response);
    }
    let number = shared.received.fetch_add(1, Ordering::SeqCst) + 1;
    let (response, slept) = handle(&shared, &reset, request, number).await;
    let busy = started.elapsed().saturating_sub(slept);
    let busy_us = u64::try_from(busy.as_micros()).unwrap_or(u64::MAX);
    shared.busy_us.fetch_add(busy_us, Ordering::SeqCst);
    Ok(response)
}

/// Takes an OTLP/HTTP export: counted, and answered as a collector that
/// kept every span does (an empty `ExportTraceServiceResponse`, which is
/// zero bytes of protobuf).
async fn otlp_sink(shared: &Shared, request: Request<Incoming>) -> Response<Body> {
    let protobuf = request
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == b"application/x-protobuf");
    let bytes = request
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    if !protobuf {
        let message = "tack-testkit: OTLP exports must be application/x-protobuf";
        return error(shared.dialect, 415, message, &[]);
    }
    shared.otlp_requests.fetch_add(1, Ordering::SeqCst);
    shared
        .otlp_bytes
        .fetch_add(bytes.len() as u64, Ordering::SeqCst);
    let response = builder(200, "application/x-protobuf");
    finish(
        response,
        Full::new(Bytes::new())
            .map_err(|never| match never {})
            .boxed(),
    )
}

/// The answer to request `number`, and how long it slept (scripted delays,
/// latency) before answering.
async fn handle(
    shared: &Shared,
    reset: &AtomicBool,
    request: Request<Incoming>,
    number: u64,
) -> (Response<Body>, Duration) {
    let (parts, body) = request.into_parts();
    let bytes = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let dialect = shared.dialect;
    // What a tool loop reads of the body (and the answer's stream and
    // model), borrowed from it, parsed once; the whole JSON tree only when
    // the request is recorded.
    let view = RequestView::parse(&bytes);
    if !shared.keep_alive() {
        let json: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        let recorded = record(shared, &parts, json);
        if let Some(path) = &shared.record_to {
            append_line(path, &recorded);
        }
        lock(&shared.requests).push(recorded);
    }
    let route = dialect.route(parts.uri.path());
    let Some(api) = route.filter(|_| parts.method == hyper::Method::POST) else {
        let message = format!(
            "tack-testkit: no route for {} {}",
            parts.method,
            parts.uri.path()
        );
        return (error(dialect, 404, &message, &[]), Duration::ZERO);
    };
    let next = match &shared.answers {
        Answers::Script(script) => lock(script).pop_front(),
        Answers::Loop(tool_loop) => Some(match tool_loop.answer(dialect, &view, &bytes) {
            Ok((reply, _)) => {
                ScriptedResponse::delayed(tool_loop.latency_ms, ScriptedResponse::Reply(reply))
            }
            Err(refused) => return (loop_error(dialect, &refused), Duration::ZERO),
        }),
    };
    let Some(next) = next else {
        let message = format!("tack-testkit: the script has no answer left for request {number}");
        return (error(dialect, 400, &message, &[]), Duration::ZERO);
    };
    let context = Context {
        dialect,
        api,
        pace: Duration::ZERO,
        stream: view.stream.unwrap_or(false),
        model: view.model.as_deref().unwrap_or("unknown").to_string(),
        id: format!("tack-test-{number}"),
    };
    respond(&context, next, reset).await
}

/// The request as recorded: headers without key values, whether the
/// expected key came.
fn record(shared: &Shared, parts: &hyper::http::request::Parts, body: Value) -> RecordedRequest {
    let dialect = shared.dialect;
    let auth = parts
        .headers
        .get(dialect.auth_header())
        .map(|v| v.as_bytes().to_vec());
    let expected = dialect.key_value(&shared.expected_key);
    RecordedRequest {
        method: parts.method.to_string(),
        path: parts.uri.path().to_string(),
        headers: parts
            .headers
            .iter()
            .filter(|(name, _)| !KEY_HEADERS.contains(&name.as_str()))
            .map(|(name, value)| {
                let value = String::from_utf8_lossy(value.as_bytes()).to_string();
                (name.to_string(), value)
            })
            .collect(),
        auth_present: auth.is_some(),
        auth_matches: auth.as_deref() == Some(expected.as_bytes()),
        other_key_headers: KEY_HEADERS
            .iter()
            .filter(|name| **name != dialect.auth_header() && parts.headers.contains_key(**name))
            .map(|name| name.to_string())
            .collect(),
        body,
    }
}

/// Appends `recorded` to the record file. A failure shows as a missing
/// line, which the caller reading the file reports; the answer still goes.
fn append_line(path: &Path, recorded: &RecordedRequest) {
    let Ok(mut line) = serde_json::to_vec(recorded) else {
        return;
    };
    line.push(b'\n');
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    if let Ok(mut file) = file {
        let _ = file.write_all(&line);
    }
}

struct Context {
    dialect: Dialect,
    api: Api,
    /// The pause between two events of a stream.
    pace: Duration,
    stream: bool,
    model: String,
    id: String,
}

async fn respond(
    context: &Context,
    mut next: ScriptedResponse,
    reset: &AtomicBool,
) -> (Response<Body>, Duration) {
    let mut slept = Duration::ZERO;
    loop {
        let response = match next {
            ScriptedResponse::Delay { delay_ms, then } => {
                let delay = Duration::from_millis(delay_ms);
                let before = Instant::now();
                tokio::time::sleep(delay).await;
                slept += before.elapsed();
                next = *then;
                continue;
            }
            ScriptedResponse::Paced { pause_ms, then } => {
                let paced = Context {
                    pace: Duration::from_millis(pause_ms),
                    model: context.model.clone(),
                    id: context.id.clone(),
                    ..*context
                };
                let (response, more) = Box::pin(respond(&paced, *then, reset)).await;
                return (response, slept + more);
            }
            ScriptedResponse::Reply(reply) => full_answer(context, &reply, None),
            ScriptedResponse::Status {
                status,
                retry_after,
                retry_after_ms,
                message,
            } => {
                let mut headers = Vec::new();
                if let Some(value) = retry_after {
                    headers.push(("retry-after", value));
                }
                if let Some(ms) = retry_after_ms {
                    headers.push(("retry-after-ms", ms.to_string()));
                }
                let message = message.unwrap_or_else(|| format!("scripted status {status}"));
                error(context.dialect, status, &message, &headers)
            }
            ScriptedResponse::MalformedJson => malformed(context.stream),
            ScriptedResponse::CutStream { after_events } => {
                let reply = Reply {
                    text: "this answer is cut off part-way".into(),
                    ..Reply::default()
                };
                full_answer(context, &reply, Some(after_events))
            }
            ScriptedResponse::Reset => {
                // The connection's next write resets it instead.
                reset.store(true, Ordering::SeqCst);
                json_response(200, &[], Bytes::from_static(b"{}"))
            }
        };
        return (response, slept);
    }
}

/// A reply as JSON or events; with `cut`, the connection closes after that
/// many events (or half the JSON body).
fn full_answer(context: &Context, reply: &Reply, cut: Option<usize>) -> Response<Body> {
    let model = reply.model.as_deref().unwrap_or(&context.model);
    if context.stream {
        let events = match context.api {
            Api::ChatCompletions => openai_wire::events(reply, model, &context.id),
            Api::Responses => responses_wire::events(reply, model, &context.id),
            Api::Messages => anthropic_wire::events(reply, model, &context.id),
        };
        return event_stream(events, cut, context.pace);
    }
    let body = match context.api {
        Api::ChatCompletions => openai_wire::body(reply, model, &context.id),
        Api::Responses => responses_wire::body(reply, model, &context.id),
        Api::Messages => anthropic_wire::body(reply, model, &context.id),
    };
    let bytes = Bytes::from(body.to_string());
    match cut {
        None => json_response(200, &[], bytes),
        Some(_) => cut_body(bytes),
    }
}

fn error(
    dialect: Dialect,
    status: u16,
    message: &str,
    headers: &[(&str, String)],
) -> Response<Body> {
    let body = match dialect {
        Dialect::OpenAi => openai_wire::error_body(status, message),
        Dialect::Anthropic => anthropic_wire::error_body(status, message),
    };
    json_response(status, headers, Bytes::from(body.to_string()))
}

/// A request the tool loop refuses, in the provider's own words: a too
/// long one as OpenAI's `context_length_exceeded` or Anthropic's "prompt is
/// too long".
fn loop_error(dialect: Dialect, refused: &LoopError) -> Response<Body> {
    let body = match (refused, dialect) {
        (LoopError::Unfit(message), _) => return error(dialect, 400, message, &[]),
        (LoopError::TooLong { tokens, window }, Dialect::OpenAi) => {
            openai_wire::context_length_body(*tokens, *window)
        }
        (LoopError::TooLong { tokens, window }, Dialect::Anthropic) => {
            let message = format!("prompt is too long: {tokens} tokens > {window} maximum");
            anthropic_wire::error_body(400, &message)
        }
    };
    json_response(400, &[], Bytes::from(body.to_string()))
}

fn malformed(stream: bool) -> Response<Body> {
    const BROKEN: &str = r#"{"id": "broken", "choices": [{"index": 0, "#;
    if stream {
        return event_stream(vec![format!("data: {BROKEN}\n\n")], None, Duration::ZERO);
    }
    json_response(200, &[], Bytes::from_static(BROKEN.as_bytes()))
}

fn builder(status: u16, content_type: &str) -> hyper::http::response::Builder {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    Response::builder()
        .status(status)
        .header("content-type", content_type)
}

fn finish(builder: hyper::http::response::Builder, body: Body) -> Response<Body> {
    // Only a bad header could fail here, and the headers are ours.
    builder
        .body(body)
        .unwrap_or_else(|_| Response::new(empty()))
}

fn empty() -> Body {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

fn json_response(status: u16, headers: &[(&str, String)], body: Bytes) -> Response<Body> {
    let mut response = builder(status, "application/json");
    for (name, value) in headers {
        response = response.header(*name, value);
    }
    finish(
        response,
        Full::new(body).map_err(|never| match never {}).boxed(),
    )
}

/// Sends `events` as a chunked `text/event-stream`; with `cut`, stops after
/// that many and breaks the connection (no final chunk); `pace` apart.
fn event_stream(events: Vec<String>, cut: Option<usize>, pace: Duration) -> Response<Body> {
    let (mut sender, body) = Channel::<Bytes, io::Error>::new(4);
    tokio::spawn(async move {
        let keep = cut.unwrap_or(events.len());
        for (n, event) in events.into_iter().take(keep).enumerate() {
            if n > 0 && !pace.is_zero() {
                tokio::time::sleep(pace).await;
            }
            if sender.send_data(Bytes::from(event)).await.is_err() {
                return; // the client went away
            }
        }
        if cut.is_some() {
            sender.abort(io::Error::other("tack-testkit: scripted cut"));
        }
    });
    let response = builder(200, "text/event-stream").header("cache-control", "no-cache");
    finish(response, body.boxed())
}

/// Announces the whole body's length, sends half, breaks the connection.
fn cut_body(bytes: Bytes) -> Response<Body> {
    let (mut sender, body) = Channel::<Bytes, io::Error>::new(2);
    let length = bytes.len();
    tokio::spawn(async move {
        if sender.send_data(bytes.slice(..length / 2)).await.is_ok() {
            sender.abort(io::Error::other("tack-testkit: scripted cut"));
        }
    });
    let response = builder(200, "application/json").header("content-length", length);
    finish(response, body.boxed())
}
