//! Subagents: two `task` calls in one turn run at once, each child works
//! with its own (read-only) tools and context, a child's writes are
//! refused, and only the children's final answers reach the parent.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use tack_harness::{Harness, HarnessSetup, Verification};
use tack_model::{Model, ModelError, ModelRequest, ModelResponse};
use tack_protocol::{
    Event, FinishReason, HarnessConfig, Message, ModelCallRecord, Role, SUBAGENT_SYSTEM_PROMPT,
    SandboxProfile, StopReason, SubagentConfig, ToolCall, ToolCallRecord, Usage, VecSink,
};

/// A model that plans by the conversation it is sent: as the parent it
/// delegates two searches in one turn, then reports their answers; as a
/// child it tries to write (twice, two ways), reads the file its prompt
/// names, and answers with its first line. Every answer takes a while, as
/// a real model's does, so children that run at once overlap.
struct Delegator;

const LATENCY: Duration = Duration::from_millis(300);

fn call(id: &str, name: &str, arguments: serde_json::Value) -> ToolCall {
    ToolCall {
        id: id.to_string(),
        name: name.to_string(),
        arguments: arguments.to_string(),
    }
}

#[async_trait]
impl Model for Delegator {
    fn provider(&self) -> &str {
        "test"
    }

    fn model_name(&self) -> &str {
        "delegator"
    }

    fn fork(&self) -> Option<Box<dyn Model>> {
        Some(Box::new(Delegator))
    }

    async fn complete(&mut self, request: ModelRequest<'_>) -> Result<ModelResponse, ModelError> {
        tokio::time::sleep(LATENCY).await;
        let messages = request.messages;
        let results: Vec<&Message> = messages.iter().filter(|m| m.role == Role::Tool).collect();
        let child = messages[0].content == SUBAGENT_SYSTEM_PROMPT;
        let (text, calls) = if child {
            let file = messages[1].content.trim_start_matches("Read ").to_string();
            match results.len() {
                0 => (
                    "Trying to write.".to_string(),
                    vec![call(
                        "w1",
                        "write_file",
                        serde_json::json!({"path": "owned.txt", "content": "x"}),
                    )],
                ),
                1 => (
                    "Trying the shell.".to_string(),
                    vec![call(
                        "w2",
                        "bash",
                        serde_json::json!({"command": "echo x > owned.txt"}),
                    )],
                ),
                2 => (
                    "Reading.".to_string(),
                    vec![call("r", "read_file", serde_json::json!({"path": file}))],
                ),
                _ => {
                    let first = results[2].content.lines().next().unwrap_or_default();
                    (format!("{file} starts: {first}"), vec![])
                }
            }
        } else if results.is_empty() {
            let task = |id: &str, file: &str| {
                call(
                    id,
                    "task",
                    serde_json::json!({"description": file, "prompt": format!("Read {file}")}),
                )
            };
            (
                "Delegating.".to_string(),
                vec![task("t1", "a.txt"), task("t2", "b.txt")],
            )
        } else {
            let answers: Vec<&str> = results.iter().map(|m| m.content.as_str()).collect();
            (answers.join("\n"), vec![])
        };
        let finish = if calls.is_empty() {
            FinishReason::Stop
        } else {
            FinishReason::ToolCalls
        };
        Ok(ModelResponse {
            message: Message::assistant(text, calls),
            finish_reason: finish,
            usage: Usage {
                input_tokens: 100,
                output_tokens: 10,
                ..Usage::default()
            },
            response_model: "delegator".to_string(),
        })
    }
}

fn sandbox() -> SandboxProfile {
    match tack_sandbox::test_gate(SandboxProfile::Strict) {
        tack_sandbox::TestGate::Run => SandboxProfile::Strict,
        tack_sandbox::TestGate::Skip(why) => {
            eprintln!("sandbox off: {why}");
            SandboxProfile::Off
        }
        tack_sandbox::TestGate::Fail(why) => panic!("{why}"),
    }
}

async fn delegate(workspace: &Path, profile: SandboxProfile) -> (Vec<Event>, StopReason, u64) {
    std::fs::write(workspace.join("a.txt"), "alpha first\nmore\n").unwrap();
    std::fs::write(workspace.join("b.txt"), "beta first\nmore\n").unwrap();
    let config = HarnessConfig {
        tools: vec!["read_file".to_string(), "task".to_string()],
        sandbox: profile,
        subagents: SubagentConfig {
            // The shell too, to show the sandbox refuses a child's writes
            // where the dispatcher would let the command run.
            tools: vec!["read_file".to_string(), "bash".to_string()],
            ..SubagentConfig::default()
        },
        ..HarnessConfig::default()
    };
    let harness = Harness::assemble(HarnessSetup {
        config,
        workspace: workspace.to_path_buf(),
        env: Vec::new(),
        hidden: Vec::new(),
        base_dir: workspace.to_path_buf(),
        interactive: None,
        walls: Default::default(),
    })
    .await
    .unwrap();
    let mut sink = VecSink::default();
    let run = harness
        .run(
            &mut Delegator,
            None,
            "Find out how a.txt and b.txt start.",
            &Verification::Commands(&[]),
            &mut sink,
        )
        .await;
    let tokens = run.agent.totals.usage.total();
    (sink.events, run.agent.stop_reason, tokens)
}

fn model_calls(events: &[Event]) -> Vec<&ModelCallRecord> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ModelCall(call) => Some(call),
            _ => None,
        })
        .collect()
}

fn tool_calls(events: &[Event]) -> Vec<&ToolCallRecord> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall(call) => Some(call),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn two_task_calls_run_at_once_read_only_and_return_only_their_answers() {
    let dir = tempfile::tempdir().unwrap();
    let profile = sandbox();
    let (events, stop, tokens) = delegate(dir.path(), profile).await;
    assert_eq!(stop, StopReason::Completed);

    let tools = tool_calls(&events);
    let tasks: Vec<_> = tools.iter().filter(|t| t.tool_name == "task").collect();
    assert_eq!(tasks.len(), 2);
    // Their spans overlap in time: the children ran at once. Each child
    // makes four calls of LATENCY, so one after the other they would take
    // twice as long as either.
    let (a, b) = (tasks[0], tasks[1]);
    let end = |t: &ToolCallRecord| t.started_at_ms + t.duration_ms as i64;
    assert!(
        a.started_at_ms < end(b) && b.started_at_ms < end(a),
        "task spans do not overlap: {}+{} and {}+{}",
        a.started_at_ms,
        a.duration_ms,
        b.started_at_ms,
        b.duration_ms
    );
    assert!(a.duration_ms >= 4 * LATENCY.as_millis() as u64);

    // Each child's attempts to write were refused, one way or the other.
    let writes: Vec<_> = tools.iter().filter(|t| t.call_id == "w1").collect();
    assert_eq!(writes.len(), 2);
    for write in writes {
        assert_eq!(
            write.error_kind,
            Some(tack_protocol::ToolErrorKind::UnknownTool)
        );
        assert!(write.result.contains("no tool named `write_file`"));
    }
    let shells: Vec<_> = tools.iter().filter(|t| t.call_id == "w2").collect();
    assert_eq!(shells.len(), 2);
    if profile == SandboxProfile::Strict {
        for shell in &shells {
            assert_ne!(shell.exit_code, Some(0), "{shell:?}");
            assert_eq!(shell.sandbox_profile.as_deref(), Some("strict"));
        }
        assert!(!dir.path().join("owned.txt").exists());
    }

    // The children's calls sit beneath their task spans.
    let calls = model_calls(&events);
    let task_spans: Vec<u32> = tasks.iter().map(|t| t.span_id).collect();
    let children: Vec<_> = calls
        .iter()
        .filter(|c| c.parent_span_id.is_some())
        .collect();
    assert_eq!(children.len(), 8);
    for child in &children {
        assert!(task_spans.contains(&child.parent_span_id.unwrap()));
        assert_eq!(child.purpose.as_deref(), Some("subagent"));
    }
    let per_task: HashMap<u32, usize> = children.iter().fold(HashMap::new(), |mut m, c| {
        *m.entry(c.parent_span_id.unwrap()).or_default() += 1;
        m
    });
    assert_eq!(per_task.values().copied().collect::<Vec<_>>(), vec![4, 4]);
    // Their tokens count in the trial's: two parent calls, eight children's.
    assert_eq!(tokens, 10 * 110);

    // Only the answers entered the parent's context: its last call sent
    // five messages (system, task, its turn, two results), the results are
    // the answers, and none of the children's messages.
    let messages: HashMap<u32, &Message> = events
        .iter()
        .filter_map(|e| match e {
            Event::Message { index, message } => Some((*index, message)),
            _ => None,
        })
        .collect();
    let last = calls
        .iter()
        .rev()
        .find(|c| c.parent_span_id.is_none())
        .unwrap();
    let sent: Vec<&Message> = last.messages.iter().map(|i| messages[i]).collect();
    assert_eq!(sent.len(), 5, "{sent:#?}");
    assert_eq!(sent[3].content, "a.txt starts: alpha first");
    assert_eq!(sent[4].content, "b.txt starts: beta first");
    assert!(sent.iter().all(|m| m.content != SUBAGENT_SYSTEM_PROMPT));
    // The children's own messages are in the trace, each sent by its calls.
    let first_child = children[0];
    assert_eq!(
        messages[&first_child.messages[0]].content,
        SUBAGENT_SYSTEM_PROMPT
    );
}
