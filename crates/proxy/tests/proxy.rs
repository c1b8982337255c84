//! The proxy between a real HTTP client and the testkit's loopback
//! servers: every API streamed and not, errors, an unreachable upstream,
//! and a stream that reaches the client before it has ended.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{Value, json};
use tack_protocol::{Event, ModelCallRecord, SpanStatus, Usage, VecSink};
use tack_proxy::{Proxy, ProxyConfig, RunningProxy};
use tack_testkit::{
    AnthropicServer, MockServer, OpenAiServer, ScriptedCall, ScriptedResponse, ScriptedUsage,
    TEST_API_KEY,
};

const USAGE: ScriptedUsage = ScriptedUsage {
    input: 120,
    output: 17,
    cached: 20,
    cache_write: 0,
    reasoning: 3,
};

/// The usage as tack records it: the scripted numbers, normalised.
fn recorded_usage(anthropic: bool) -> Usage {
    Usage {
        input_tokens: USAGE.input,
        output_tokens: USAGE.output,
        cache_read_tokens: USAGE.cached,
        cache_write_tokens: USAGE.cache_write,
        // Anthropic reports no reasoning tokens apart.
        reasoning_tokens: if anthropic { 0 } else { USAGE.reasoning },
    }
}

async fn proxy_to(upstream: &MockServer) -> RunningProxy<VecSink> {
    let origin = format!("http://{}", upstream.addr());
    let config = ProxyConfig::new("127.0.0.1:0".parse().unwrap(), origin.parse().unwrap());
    Proxy::start(config, VecSink::default()).await.unwrap()
}

fn calls(events: &[Event]) -> Vec<&ModelCallRecord> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ModelCall(call) => Some(call),
            _ => None,
        })
        .collect()
}

fn messages(events: &[Event]) -> Vec<&tack_protocol::Message> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Message { message, .. } => Some(message),
            _ => None,
        })
        .collect()
}

#[derive(Clone, Copy, Debug)]
enum Api {
    Chat,
    Responses,
    Messages,
}

impl Api {
    fn path(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Responses => "/v1/responses",
            Api::Messages => "/v1/messages",
        }
    }

    fn body(self, stream: bool) -> Value {
        match self {
            Api::Chat => json!({
                "model": "gpt-4o", "stream": stream,
                "stream_options": if stream { json!({"include_usage": true}) } else { Value::Null },
                "messages": [{"role": "system", "content": "be brief"},
                             {"role": "user", "content": "hello"}],
            }),
            Api::Responses => json!({
                "model": "gpt-4o", "stream": stream, "instructions": "be brief",
                "input": [{"role": "user", "content": "hello"}],
            }),
            Api::Messages => json!({
                "model": "claude-sonnet-4-20250514", "max_tokens": 100, "stream": stream,
                "system": "be brief", "messages": [{"role": "user", "content": "hello"}],
            }),
        }
    }

    fn request(
        self,
        client: &reqwest::Client,
        proxy: &str,
        body: &Value,
    ) -> reqwest::RequestBuilder {
        let request = client
            .post(format!("{proxy}{}", self.path()))
            .header("content-type", "application/json")
            .body(body.to_string());
        match self {
            Api::Messages => request
                .header("x-api-key", TEST_API_KEY)
                .header("anthropic-version", "2023-06-01"),
            _ => request.bearer_auth(TEST_API_KEY),
        }
    }
}

async fn upstream(api: Api, script: Vec<ScriptedResponse>) -> MockServer {
    match api {
        Api::Messages => AnthropicServer::start(script).await.unwrap().into_inner(),
        _ => OpenAiServer::start(script).await.unwrap().into_inner(),
    }
}

/// One call through the proxy: the client gets the upstream's answer, the
/// upstream gets the key, and the recording has the call with its tokens.
async fn one_call(api: Api, stream: bool) {
    let answer = ScriptedResponse::tool_calls(vec![ScriptedCall::new(
        "call_1",
        "bash",
        r#"{"command":"ls"}"#,
    )])
    .with_text("let me look")
    .with_usage(USAGE);
    let server = upstream(api, vec![answer]).await;
    let proxy = proxy_to(&server).await;
    let client = reqwest::Client::new();
    let response = api
        .request(
            &client,
            &format!("http://{}", proxy.addr()),
            &api.body(stream),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{api:?} stream={stream}");
    let text = response.text().await.unwrap();
    // A stream's text comes in pieces; the recorded answer below is whole.
    assert!(stream || text.contains("let me look"), "{api:?}: {text}");
    assert_eq!(stream, text.contains("data: "), "{text}");

    let seen = server.requests();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, api.path());
    assert!(seen[0].auth_matches, "the upstream got the key");

    let stopped = proxy.shutdown().await.unwrap();
    assert!(stopped.sink_error.is_none());
    assert_eq!((stopped.calls, stopped.failed_calls), (1, 0));
    let events = &stopped.sink.events;
    let calls = calls(events);
    assert_eq!(calls.len(), 1);
    let call = calls[0];
    assert_eq!(call.status, SpanStatus::Ok, "{:?}", call.error);
    assert_eq!(call.usage, recorded_usage(matches!(api, Api::Messages)));
    assert_eq!(call.finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(call.messages, [0, 1]);
    assert_eq!((call.step, call.attempt), (1, 1));
    assert!(call.cost_usd.is_some(), "{} is priced", call.request_model);
    let provider = if matches!(api, Api::Messages) {
        "anthropic"
    } else {
        "openai"
    };
    assert_eq!(call.provider, provider);
    let recorded = messages(events);
    assert_eq!(recorded.len(), 3, "system, user, the answer");
    assert_eq!(recorded[0].content, "be brief");
    assert_eq!(recorded[2].content, "let me look");
    assert_eq!(recorded[2].tool_calls[0].arguments, r#"{"command":"ls"}"#);
    let everything = serde_json::to_string(events).unwrap();
    assert!(!everything.contains(TEST_API_KEY), "the key was recorded");
}

#[tokio::test]
async fn chat_completions_json_and_stream() {
    one_call(Api::Chat, false).await;
    one_call(Api::Chat, true).await;
}

#[tokio::test]
async fn responses_json_and_stream() {
    one_call(Api::Responses, false).await;
    one_call(Api::Responses, true).await;
}

#[tokio::test]
async fn anthropic_messages_json_and_stream() {
    one_call(Api::Messages, false).await;
    one_call(Api::Messages, true).await;
}

#[tokio::test]
async fn upstream_errors_reach_the_client_and_a_retry_counts_as_attempt_two() {
    let script = vec![
        ScriptedResponse::status(500),
        ScriptedResponse::rate_limited(1),
        ScriptedResponse::text("fine").with_usage(USAGE),
    ];
    let server = upstream(Api::Chat, script).await;
    let proxy = proxy_to(&server).await;
    let client = reqwest::Client::new();
    let base = format!("http://{}", proxy.addr());
    let body = Api::Chat.body(false);
    let mut statuses = Vec::new();
    for _ in 0..3 {
        let response = Api::Chat
            .request(&client, &base, &body)
            .send()
            .await
            .unwrap();
        statuses.push(response.status().as_u16());
        if response.status() == 429 {
            assert_eq!(response.headers()["retry-after"], "1");
        }
    }
    assert_eq!(statuses, [500, 429, 200]);
    let stopped = proxy.shutdown().await.unwrap();
    let calls = calls(&stopped.sink.events);
    let summary: Vec<_> = calls
        .iter()
        .map(|c| (c.status, c.step, c.attempt))
        .collect();
    assert_eq!(
        summary,
        [
            (SpanStatus::Error, 1, 1),
            (SpanStatus::Error, 1, 2),
            (SpanStatus::Ok, 1, 3)
        ]
    );
    let first = calls[0].error.as_deref().unwrap();
    assert!(first.starts_with("HTTP 500: "), "{first}");
    assert!(first.contains("scripted status 500"), "{first}");
    assert!(calls[1].error.as_deref().unwrap().starts_with("HTTP 429: "));
    assert_eq!(calls[2].usage, recorded_usage(false));
    assert_eq!(stopped.totals.retries, 2);
    assert_eq!(stopped.failed_calls, 2);
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_502_and_an_error_span() {
    // A port that was just free: nothing listens there.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let origin = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let config = ProxyConfig::new("127.0.0.1:0".parse().unwrap(), origin.parse().unwrap());
    let proxy = Proxy::start(config, VecSink::default()).await.unwrap();
    let client = reqwest::Client::new();
    let base = format!("http://{}", proxy.addr());
    let response = Api::Messages
        .request(&client, &base, &Api::Messages.body(true))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 502);
    let body: Value = serde_json::from_str(&response.text().await.unwrap()).unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("could not reach the upstream"),
        "{message}"
    );
    assert!(!message.contains(TEST_API_KEY));
    // Unrecorded paths fail the same way, and are not recorded.
    let models = client
        .get(format!("{base}/v1/models"))
        .send()
        .await
        .unwrap();
    assert_eq!(models.status(), 502);
    let stopped = proxy.shutdown().await.unwrap();
    let calls = calls(&stopped.sink.events);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].status, SpanStatus::Error);
    assert_eq!(calls[0].provider, "anthropic");
    let error = calls[0].error.as_deref().unwrap();
    assert!(error.starts_with("upstream unreachable: "), "{error}");
}

#[tokio::test]
async fn a_stream_reaches_the_client_before_it_ends() {
    let text = "one two three four five six seven eight";
    let script = vec![ScriptedResponse::paced(
        150,
        ScriptedResponse::text(text).with_usage(USAGE),
    )];
    let server = upstream(Api::Chat, script).await;
    let proxy = proxy_to(&server).await;
    let client = reqwest::Client::new();
    let base = format!("http://{}", proxy.addr());
    let mut response = Api::Chat
        .request(&client, &base, &Api::Chat.body(true))
        .send()
        .await
        .unwrap();
    let first = response.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).starts_with("data: "));
    // The call is recorded when the upstream's stream ends, before the
    // client sees the end: none yet means the stream is still going.
    assert_eq!(proxy.calls(), 0, "the first chunk came only after the end");
    let mut rest = first.to_vec();
    while let Some(chunk) = response.chunk().await.unwrap() {
        rest.extend_from_slice(&chunk);
    }
    assert!(String::from_utf8_lossy(&rest).ends_with("data: [DONE]\n\n"));
    assert_eq!(proxy.calls(), 1);
    let stopped = proxy.shutdown().await.unwrap();
    let calls = calls(&stopped.sink.events);
    assert_eq!(calls[0].usage, recorded_usage(false));
    let answer = messages(&stopped.sink.events).pop().unwrap();
    assert_eq!(answer.content, text);
}

#[tokio::test]
async fn other_paths_pass_through_unrecorded() {
    let server = upstream(Api::Chat, Vec::new()).await;
    let proxy = proxy_to(&server).await;
    let client = reqwest::Client::new();
    let url = format!("http://{}/v1/models?limit=2", proxy.addr());
    let response = client
        .get(url)
        .bearer_auth(TEST_API_KEY)
        .send()
        .await
        .unwrap();
    // The testkit has no such route: its own 404 comes back unchanged.
    assert_eq!(response.status(), 404);
    let body = response.text().await.unwrap();
    assert!(body.contains("no route for GET /v1/models"), "{body}");
    let seen = server.requests();
    assert_eq!(seen[0].path, "/v1/models");
    let stopped = proxy.shutdown().await.unwrap();
    assert!(stopped.sink.events.is_empty());
}

/// A client holding a stand-in (an external agent) never gets the real key
/// back, streamed or not, when the upstream echoes it, nor does the trace
/// hold what the upstream echoed. The testkit echoes the request's model
/// name in every chunk, in one piece: the test names the key as the model
/// (a client that held the real key could; this one stands for the
/// upstream that quotes it).
#[tokio::test]
async fn an_echoed_key_is_cut_from_answers_and_streams() {
    for stream in [false, true] {
        let script = vec![ScriptedResponse::paced(
            5,
            ScriptedResponse::text("done").with_usage(USAGE),
        )];
        let server = upstream(Api::Chat, script).await;
        let origin = format!("http://{}", server.addr());
        let mut config = ProxyConfig::new("127.0.0.1:0".parse().unwrap(), origin.parse().unwrap());
        let key = tack_proxy::KeyStandIn::new(tack_providers::ApiKey::new(TEST_API_KEY));
        let stand_in = key.stand_in.clone();
        config.key = Some(key);
        let proxy = Proxy::start(config, VecSink::default()).await.unwrap();
        let mut body = Api::Chat.body(stream);
        body["model"] = json!(TEST_API_KEY);
        let response = reqwest::Client::new()
            .post(format!("http://{}{}", proxy.addr(), Api::Chat.path()))
            .header("content-type", "application/json")
            .bearer_auth(&stand_in)
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let text = response.text().await.unwrap();
        assert!(!text.contains(TEST_API_KEY), "stream={stream}: {text}");
        assert!(
            text.contains(r#""model":"[redacted]""#),
            "stream={stream}: {text}"
        );
        assert!(
            server.requests()[0].auth_matches,
            "the upstream got the key"
        );
        let stopped = proxy.shutdown().await.unwrap();
        let calls = calls(&stopped.sink.events);
        assert_eq!(calls[0].status, SpanStatus::Ok, "{:?}", calls[0].error);
        assert_eq!(calls[0].response_model, "[redacted]");
    }
}
