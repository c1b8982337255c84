//! Answers read correctly from both providers, streamed and not, against
//! loopback servers speaking the real wire formats: text, several tool
//! calls (arguments put back together from deltas, broken JSON kept as
//! written), usage with cached and reasoning tokens, finish by length, and
//! the request as the provider's API expects it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::{CASES, Case};
use serde_json::json;
use tack_protocol::{FinishReason, ToolCall, Usage};
use tack_providers::{ANTHROPIC_VERSION, Provider};
use tack_testkit::{ScriptedCall, ScriptedResponse, ScriptedUsage, TEST_API_KEY};

#[tokio::test]
async fn a_text_answer_is_read_in_every_mode() {
    for case in CASES {
        let text = "Here are the files: a.py, b.py — ünïcode included.";
        let (result, server) = case.call_once(vec![ScriptedResponse::text(text)]).await;
        let response = result.unwrap();
        assert_eq!(response.message.content, text, "{case:?}");
        assert!(response.message.tool_calls.is_empty());
        assert_eq!(response.finish_reason, FinishReason::Stop, "{case:?}");
        assert_eq!(response.response_model, "test-model");
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn several_tool_calls_in_one_turn_keep_their_arguments_exactly() {
    let broken = r#"{"command": "cat a.py"#;
    let script = || {
        vec![
            ScriptedResponse::tool_calls(vec![
                ScriptedCall::new("call_a", "bash", r#"{"command": "ls -la"}"#),
                ScriptedCall::new(
                    "call_b",
                    "read_file",
                    r#"{"path": "src/main.rs", "start": 1}"#,
                ),
                ScriptedCall::new("call_c", "bash", broken),
            ])
            .with_text("Let me look."),
        ]
    };
    for case in CASES {
        let (result, _server) = case.call_once(script()).await;
        let response = result.unwrap();
        assert_eq!(response.finish_reason, FinishReason::ToolCalls, "{case:?}");
        assert_eq!(response.message.content, "Let me look.");
        let calls = &response.message.tool_calls;
        assert_eq!(calls.len(), 3, "{case:?}");
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("call_a", "bash")
        );
        assert_eq!(calls[1].name, "read_file");
        assert_eq!(calls[2].arguments, broken, "{case:?}");
        // Valid arguments: the same JSON (non-streamed Anthropic sends an
        // object, which is re-serialised).
        for (call, expected) in calls.iter().zip([
            json!({"command": "ls -la"}),
            json!({"path": "src/main.rs", "start": 1}),
        ]) {
            let parsed: serde_json::Value = serde_json::from_str(&call.arguments).unwrap();
            assert_eq!(parsed, expected, "{case:?}");
        }
        if case.stream || case.provider == Provider::OpenAi {
            assert_eq!(calls[0].arguments, r#"{"command": "ls -la"}"#, "{case:?}");
        }
    }
}

#[tokio::test]
async fn usage_counts_cached_tokens_in_the_input_and_reasoning_in_the_output() {
    let usage = ScriptedUsage {
        input: 1_250,
        output: 300,
        cached: 1_000,
        cache_write: 0,
        reasoning: 120,
    };
    for case in CASES {
        let reply = ScriptedResponse::text("ok").with_usage(usage);
        let (result, _server) = case.call_once(vec![reply]).await;
        let got = result.unwrap().usage;
        let reasoning = match case.provider {
            Provider::OpenAi => 120,
            Provider::Anthropic => 0, // the Messages API does not report it apart
        };
        let expected = Usage {
            input_tokens: 1_250,
            output_tokens: 300,
            cache_read_tokens: 1_000,
            cache_write_tokens: 0,
            reasoning_tokens: reasoning,
        };
        assert_eq!(got, expected, "{case:?}");
    }
}

#[tokio::test]
async fn anthropic_input_tokens_are_normalised_with_cache_reads_and_writes() {
    // On the wire: input_tokens 50, cache_read 1000, cache_creation 200.
    let usage = ScriptedUsage {
        input: 1_250,
        output: 40,
        cached: 1_000,
        cache_write: 200,
        reasoning: 0,
    };
    for case in CASES
        .into_iter()
        .filter(|c| c.provider == Provider::Anthropic)
    {
        let reply = ScriptedResponse::text("ok").with_usage(usage);
        let (result, _server) = case.call_once(vec![reply]).await;
        let got = result.unwrap().usage;
        assert_eq!(
            (
                got.input_tokens,
                got.cache_read_tokens,
                got.cache_write_tokens,
                got.output_tokens
            ),
            (1_250, 1_000, 200, 40),
            "{case:?}"
        );
    }
}

#[tokio::test]
async fn an_answer_cut_by_the_output_limit_finishes_by_length() {
    for case in CASES {
        let cut = ScriptedResponse::tool_calls(vec![ScriptedCall::new(
            "call_1",
            "write_file",
            r#"{"path": "a.py", "content": "def f(x):\n    ret"#,
        )])
        .finished_by_length();
        let (result, _server) = case.call_once(vec![cut]).await;
        let response = result.unwrap();
        assert_eq!(response.finish_reason, FinishReason::Length, "{case:?}");
        assert_eq!(
            response.message.tool_calls,
            [ToolCall {
                id: "call_1".into(),
                name: "write_file".into(),
                arguments: r#"{"path": "a.py", "content": "def f(x):\n    ret"#.into(),
            }],
            "{case:?}"
        );
    }
}

#[tokio::test]
async fn the_key_goes_in_the_providers_header_and_nowhere_else() {
    for case in CASES {
        let (result, server) = case.call_once(vec![ScriptedResponse::text("hi")]).await;
        result.unwrap();
        let request = &server.requests()[0];
        assert!(request.auth_present && request.auth_matches, "{case:?}");
        assert!(
            request.other_key_headers.is_empty(),
            "{case:?}: {:?}",
            request.other_key_headers
        );
        assert!(!request.body.to_string().contains(TEST_API_KEY));
        assert!(request.headers.values().all(|v| !v.contains(TEST_API_KEY)));
    }
}

#[tokio::test]
async fn openai_requests_follow_the_chat_completions_format() {
    for stream in [false, true] {
        let case = Case {
            provider: Provider::OpenAi,
            stream,
        };
        let (_, server) = case.call_once(vec![ScriptedResponse::text("hi")]).await;
        let request = &server.requests()[0];
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/v1/chat/completions")
        );
        let body = &request.body;
        assert_eq!(body["model"], "test-model");
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "You are terse."})
        );
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["tools"][0]["function"]["name"], "bash");
        assert_eq!(
            body["tools"][0]["function"]["parameters"]["required"],
            json!(["command"])
        );
        if stream {
            assert_eq!(body["stream"], true);
            assert_eq!(body["stream_options"], json!({"include_usage": true}));
        } else {
            assert!(body.get("stream").is_none());
        }
    }
}

#[tokio::test]
async fn anthropic_requests_follow_the_messages_format() {
    for stream in [false, true] {
        let case = Case {
            provider: Provider::Anthropic,
            stream,
        };
        let (_, server) = case.call_once(vec![ScriptedResponse::text("hi")]).await;
        let request = &server.requests()[0];
        assert_eq!(
            (request.method.as_str(), request.path.as_str()),
            ("POST", "/v1/messages")
        );
        assert_eq!(request.headers["anthropic-version"], ANTHROPIC_VERSION);
        let body = &request.body;
        assert_eq!(body["system"], "You are terse.");
        assert_eq!(body["max_tokens"], 4096);
        assert_eq!(
            body["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "List the files."}]}])
        );
        assert_eq!(body["tools"][0]["input_schema"]["type"], "object");
        assert_eq!(
            body.get("stream")
                .and_then(|s| s.as_bool())
                .unwrap_or(false),
            stream
        );
    }
}

#[tokio::test]
async fn the_output_limit_is_sent_under_each_apis_name() {
    for (provider, field, default) in [
        (Provider::OpenAi, "max_tokens", None),
        (Provider::Anthropic, "max_tokens", Some(4096)),
    ] {
        let case = Case {
            provider,
            stream: false,
        };
        let server = case
            .server(vec![
                ScriptedResponse::text("a"),
                ScriptedResponse::text("b"),
            ])
            .await;
        let mut config = case.config(&server);
        let mut model = tack_providers::build_model(&config, config.api_key.clone()).unwrap();
        common::call(model.as_mut()).await.unwrap();
        config.max_tokens = Some(123);
        let mut model = tack_providers::build_model(&config, config.api_key.clone()).unwrap();
        common::call(model.as_mut()).await.unwrap();
        let requests = server.requests();
        assert_eq!(
            requests[0].body.get(field).and_then(|v| v.as_u64()),
            default
        );
        assert_eq!(requests[1].body[field], 123, "{provider:?}");
    }
}
