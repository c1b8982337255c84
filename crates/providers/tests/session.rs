//! The harness loop driving the OpenAI provider over loopback HTTP: a 429
//! with Retry-After, then a tool call, then an answer. The trace must show
//! the failed attempt, the retry as attempt 2 after exactly the server's
//! Retry-After, and the tool call running on the real files.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::Case;
use tack_protocol::{Event, HarnessConfig, SpanStatus, StopReason};
use tack_providers::{Provider, build_model};
use tack_testkit::{ScriptedCall, ScriptedResponse, ScriptedUsage};

#[tokio::test]
async fn a_429_is_retried_after_its_retry_after_and_every_attempt_is_recorded() {
    let usage = ScriptedUsage {
        input: 900,
        output: 40,
        cached: 512,
        ..ScriptedUsage::default()
    };
    let script = vec![
        ScriptedResponse::rate_limited(1),
        ScriptedResponse::tool_calls(vec![ScriptedCall::new(
            "call_1",
            "read_file",
            r#"{"path": "notes.txt"}"#,
        )])
        .with_usage(usage),
        ScriptedResponse::text("The notes say hello.").with_usage(usage),
    ];
    let case = Case {
        provider: Provider::OpenAi,
        stream: true,
    };
    let server = case.server(script).await;
    let config = case.config(&server);
    let mut model = build_model(&config, config.api_key.clone()).unwrap();

    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    let harness = HarnessConfig {
        tools: vec!["read_file".to_string()],
        ..HarnessConfig::default()
    };
    let (run, sink) =
        common::run_loop(&harness, model.as_mut(), dir.path(), "read notes.txt").await;

    assert_eq!(run.stop_reason, StopReason::Completed, "{:?}", run.error);
    assert_eq!(run.final_message.as_deref(), Some("The notes say hello."));
    assert_eq!(run.totals.retries, 1);
    assert_eq!(run.totals.usage.cache_read_tokens, 1024);
    let calls: Vec<_> = sink
        .events
        .iter()
        .filter_map(|event| match event {
            Event::ModelCall(call) => Some(call),
            _ => None,
        })
        .collect();
    let shape: Vec<_> = calls
        .iter()
        .map(|c| (c.step, c.attempt, c.retry_wait_ms, c.status))
        .collect();
    assert_eq!(
        shape,
        [
            (1, 1, 0, SpanStatus::Error),
            (1, 2, 1000, SpanStatus::Ok),
            (2, 1, 0, SpanStatus::Ok),
        ]
    );
    assert!(calls[0].error.as_deref().unwrap().contains("429"));
    assert_eq!(calls[1].provider, "openai");
    assert_eq!(calls[1].finish_reason.as_deref(), Some("tool_calls"));
    assert_eq!(calls[1].usage.input_tokens, 900);
    let tool = sink
        .events
        .iter()
        .find_map(|event| match event {
            Event::ToolCall(tool) => Some(tool),
            _ => None,
        })
        .unwrap();
    assert_eq!(tool.status, SpanStatus::Ok);
    assert!(tool.result.contains("hello"));

    // The last request carried the whole conversation back, tool result included.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let messages = requests[2].body["messages"].as_array().unwrap().clone();
    let roles: Vec<_> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert_eq!(messages[2]["tool_calls"][0]["id"], "call_1");
    assert_eq!(messages[3]["tool_call_id"], "call_1");
}
