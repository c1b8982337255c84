//! A long task against a model with a small window, over loopback HTTP in
//! both providers' wire formats: a 200-step conversation through a tool
//! loop server with a 16k-token window. Sent whole, the conversation
//! outgrows the window and the provider's `context_length_exceeded` ends the
//! trial in `model_error`; with `compact_at` the harness summarises the
//! older history as it goes and the task completes, and every call's list
//! of messages shows what it was sent.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use tack_agent::AgentRun;
use tack_protocol::{
    COMPACTION_PURPOSE, ContextConfig, Event, HarnessConfig, Message, ModelCallRecord, Role,
    StopReason, VecSink,
};
use tack_providers::{ApiKey, Provider, ProviderConfig, build_model};
use tack_testkit::{Dialect, MockServer, ServerOptions, TEST_API_KEY, ToolLoop};

const STEPS: u32 = 200;
const WINDOW: u64 = 16_384;

async fn long_task(provider: Provider, context: ContextConfig) -> (AgentRun, VecSink) {
    task_of(provider, STEPS, context).await
}

async fn task_of(provider: Provider, steps: u32, context: ContextConfig) -> (AgentRun, VecSink) {
    let dialect = match provider {
        Provider::OpenAi => Dialect::OpenAi,
        Provider::Anthropic => Dialect::Anthropic,
    };
    let tool_loop = ToolLoop {
        steps,
        tool: "read_file".to_string(),
        argument: "notes.txt".to_string(),
        context_window: Some(WINDOW),
        ..ToolLoop::default()
    };
    let server = MockServer::start_tool_loop(dialect, tool_loop, ServerOptions::default()).unwrap();
    let mut config = ProviderConfig::new(provider, "test-model");
    config.base_url = Some(server.base_url());
    config.api_key = Some(ApiKey::new(TEST_API_KEY));
    config.timeout = Duration::from_secs(20);
    let mut model = build_model(&config, config.api_key.clone()).unwrap();

    let dir = tempfile::tempdir().unwrap();
    // About 250 tokens a read: 200 reads are three windows' worth.
    let notes: String = (1..=60)
        .map(|n| format!("line {n} of the notes\n"))
        .collect();
    std::fs::write(dir.path().join("notes.txt"), notes).unwrap();
    let harness = HarnessConfig {
        tools: vec!["read_file".to_string()],
        max_steps: steps + 10,
        context,
        ..HarnessConfig::default()
    };
    let instruction = "Read notes.txt as often as you are told.";
    common::run_loop(&harness, model.as_mut(), dir.path(), instruction).await
}

fn model_calls(sink: &VecSink) -> Vec<&ModelCallRecord> {
    sink.events
        .iter()
        .filter_map(|e| match e {
            Event::ModelCall(call) => Some(call),
            _ => None,
        })
        .collect()
}

/// Every recorded message, by its history position.
fn history(sink: &VecSink) -> Vec<&Message> {
    let mut messages: Vec<(u32, &Message)> = sink
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Message { index, message } => Some((*index, message)),
            _ => None,
        })
        .collect();
    messages.sort_by_key(|(index, _)| *index);
    for (position, (index, _)) in messages.iter().enumerate() {
        assert_eq!(*index as usize, position, "history positions are dense");
    }
    messages.into_iter().map(|(_, m)| m).collect()
}

fn compacting() -> ContextConfig {
    ContextConfig {
        context_window: Some(WINDOW),
        compact_at: Some(0.8),
        ..ContextConfig::default()
    }
}

#[tokio::test]
async fn without_a_strategy_the_conversation_outgrows_the_window() {
    for (provider, says) in [
        (Provider::OpenAi, "maximum context length is 16384 tokens"),
        (Provider::Anthropic, "prompt is too long"),
    ] {
        let (run, sink) = long_task(provider, ContextConfig::default()).await;
        assert_eq!(run.stop_reason, StopReason::ModelError, "{provider:?}");
        let error = run.error.unwrap();
        assert!(error.contains(says), "{provider:?}: {error}");
        // It got some way before the window filled, and never compacted.
        assert!(run.totals.steps > 20 && run.totals.steps < STEPS);
        assert!(model_calls(&sink).iter().all(|c| c.purpose.is_none()));
    }
}

#[tokio::test]
async fn compaction_keeps_a_200_step_task_inside_the_window() {
    for provider in [Provider::OpenAi, Provider::Anthropic] {
        let (run, sink) = long_task(provider, compacting()).await;
        assert_eq!(
            run.stop_reason,
            StopReason::Completed,
            "{provider:?}: {:?}",
            run.error
        );
        // 200 tool steps and the final answer; compactions are not steps.
        assert_eq!(run.totals.steps, STEPS + 1);
        let history = history(&sink);
        let calls = model_calls(&sink);
        let compactions: Vec<_> = calls
            .iter()
            .filter(|c| c.purpose.as_deref() == Some(COMPACTION_PURPOSE))
            .collect();
        assert!(
            compactions.len() >= 3,
            "{provider:?}: {}",
            compactions.len()
        );
        for compaction in &compactions {
            // Sent the system prompt and task first, the instruction last.
            let sent = &compaction.messages;
            assert_eq!(sent[..2], [0, 1]);
            let instruction = history[*sent.last().unwrap() as usize];
            assert!(instruction.content.starts_with("You are compacting"));
        }
        // Each compaction's summary takes the older history's place: the
        // next step's call sends the system prompt, the task, the summary
        // and the steps kept, and nothing the summary replaced.
        for (at, call) in calls.iter().enumerate() {
            if call.purpose.is_some() {
                let next = calls[at + 1];
                let summary = history[next.messages[2] as usize];
                assert_eq!(summary.role, Role::User);
                assert!(summary.content.contains("compacted the conversation"));
                assert!(summary.content.contains("Summary:"));
                let kept = &next.messages[3..];
                assert!(kept.windows(2).all(|w| w[0] < w[1]));
                assert!(kept.len() <= 2 * 5 + 1, "{kept:?}");
            }
        }
        // No call was sent more than the window.
        let last = calls.last().unwrap();
        assert!(last.messages.len() < 2 * 50, "{}", last.messages.len());
        assert_eq!(run.final_message.as_deref(), Some("done"));
    }
}

#[tokio::test]
async fn stale_results_are_sent_as_stubs_and_recorded_once() {
    let context = ContextConfig {
        strip_results_after: Some(3),
        ..ContextConfig::default()
    };
    let (run, sink) = task_of(Provider::OpenAi, 10, context).await;
    assert_eq!(run.stop_reason, StopReason::Completed, "{:?}", run.error);
    let history = history(&sink);
    let last = *model_calls(&sink).last().unwrap();
    let sent: Vec<&Message> = last.messages.iter().map(|&i| history[i as usize]).collect();
    let results: Vec<&Message> = sent.into_iter().filter(|m| m.role == Role::Tool).collect();
    assert_eq!(results.len(), 10);
    // The final call (step 11) sees steps 8–10 whole, 1–7 as stubs.
    let (stubs, whole): (Vec<&Message>, Vec<&Message>) = results
        .into_iter()
        .partition(|m| m.content.contains("dropped by the harness"));
    assert_eq!((stubs.len(), whole.len()), (7, 3));
    assert!(
        stubs[0].content.contains("step 1 dropped"),
        "{}",
        stubs[0].content
    );
    assert!(
        stubs[0].content.contains("60 lines"),
        "{}",
        stubs[0].content
    );
    assert!(
        whole
            .iter()
            .all(|m| m.content.contains("line 60 of the notes"))
    );
    // Each stub is recorded once, with the call id of the result it stands for.
    let recorded_stubs = history
        .iter()
        .filter(|m| m.content.contains("dropped by the harness"))
        .count();
    assert_eq!(recorded_stubs, 7);
    assert_eq!(stubs[0].tool_call_id.as_deref(), Some("call_1"));
}
