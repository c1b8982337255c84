//! A trial with an MCP server, as `tack run` assembles it: the server's
//! tools offered beside the built-in ones, its annotations deciding
//! approvals, and a server killed mid-trial costing one tool error while
//! the trial finishes. Needs the reference servers `.ci/run` installs
//! (`TACK_MCP_SERVERS`) and the strict sandbox.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::time::Duration;

use tack_harness::{Harness, HarnessSetup, Verification};
use tack_model::ReplayModel;
use tack_protocol::{
    ApproverPolicy, Event, FinishReason, HarnessConfig, McpServerConfig, Message, SpanStatus,
    StopReason, ToolCall, TrialOutcome, Usage, VecSink,
};
use tack_sandbox::TestGate;
use tack_suite::Check;

fn call(id: &str, name: &str, arguments: serde_json::Value) -> ToolCall {
    ToolCall {
        id: id.to_string(),
        name: name.to_string(),
        arguments: arguments.to_string(),
    }
}

fn answer(text: &str, calls: Vec<ToolCall>) -> (Message, FinishReason, Usage) {
    let finish = if calls.is_empty() {
        FinishReason::Stop
    } else {
        FinishReason::ToolCalls
    };
    (Message::assistant(text, calls), finish, Usage::default())
}

/// The `everything` reference server, as a stdio server named so, where it
/// and the strict sandbox are here; `None` (the test skips, saying why)
/// where not.
fn everything_server() -> Option<McpServerConfig> {
    let bin = tack_testkit::mcp_reference_servers()?;
    let program = bin.join("mcp-server-everything");
    match tack_sandbox::test_gate(tack_protocol::SandboxProfile::Strict) {
        TestGate::Run => Some(McpServerConfig::stdio("everything", program.to_str()?, &[])),
        TestGate::Skip(why) => {
            eprintln!("skipped: {why}");
            None
        }
        TestGate::Fail(why) => panic!("{why}"),
    }
}

/// The harness a trial assembles with `config` in `workspace`.
async fn assemble(config: HarnessConfig, workspace: &std::path::Path) -> Harness {
    Harness::assemble(HarnessSetup {
        config,
        workspace: workspace.to_path_buf(),
        env: Vec::new(),
        hidden: Vec::new(),
        base_dir: workspace.to_path_buf(),
        interactive: None,
        walls: Default::default(),
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn a_server_killed_mid_trial_costs_one_tool_error_and_the_trial_finishes() {
    let Some(everything) = everything_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap();
    // Rules that deny whatever they do not allow: the servers' annotations
    // decide (read-only tools run, the rest go to the approver, who denies).
    std::fs::write(workspace.join("rules.toml"), "fallback = \"deny\"\n").unwrap();
    let config = HarnessConfig {
        permissions: Some("rules.toml".to_string()),
        approver: tack_protocol::ApproverConfig {
            policy: ApproverPolicy::DenyAll,
            ..Default::default()
        },
        mcp_servers: vec![everything],
        ..HarnessConfig::default()
    };
    let harness = assemble(config, &workspace).await;
    let server = std::sync::Arc::clone(&harness.mcp_servers().servers()[0]);
    let pid = server.process_id().await.unwrap();
    let mut model = ReplayModel::new(
        "scripted",
        vec![
            answer(
                "a slow one",
                vec![call(
                    "c1",
                    "everything__trigger-long-running-operation",
                    serde_json::json!({"duration": 30, "steps": 30}),
                )],
            ),
            answer(
                "again",
                vec![
                    call(
                        "c2",
                        "everything__echo",
                        serde_json::json!({"message": "hi"}),
                    ),
                    call(
                        "c3",
                        "everything__toggle-simulated-logging",
                        serde_json::json!({}),
                    ),
                ],
            ),
            answer("done", vec![]),
        ],
    );
    // Kill the server's whole process group while the slow call runs.
    let killer = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(2)).await;
        std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{pid}")])
            .status()
            .unwrap()
    });
    let checks = [Check::command("always".to_string(), "true".to_string(), 10)];
    let mut sink = VecSink::default();
    let run = harness
        .run(
            &mut model,
            None,
            "use the tools",
            &Verification::Commands(&checks),
            &mut sink,
        )
        .await;
    assert!(killer.await.unwrap().success());
    assert_eq!(run.agent.stop_reason, StopReason::Completed, "{run:?}");
    assert_eq!(run.outcome(), TrialOutcome::Passed, "{run:?}");

    let tools: Vec<_> = sink
        .events
        .iter()
        .filter_map(|e| match e {
            Event::ToolCall(t) => Some(t),
            _ => None,
        })
        .collect();
    assert_eq!(tools.len(), 3, "{tools:#?}");
    let [slow, echo, toggle] = [tools[0], tools[1], tools[2]];
    assert_eq!(slow.status, SpanStatus::Error);
    assert!(slow.result.contains("restarted"), "{}", slow.result);
    assert_eq!(slow.mcp_server.as_deref(), Some("everything"));
    assert_eq!(
        slow.permission_rule.as_deref(),
        Some("annotation readOnlyHint")
    );
    assert_eq!(echo.status, SpanStatus::Ok);
    assert!(echo.result.contains("Echo: hi"), "{}", echo.result);
    // Neither read-only nor destructive: no say from its annotations, so
    // the rules' fallback asks… denies, here.
    assert_eq!(toggle.status, SpanStatus::Error);
    assert_eq!(toggle.permission.as_deref(), Some("deny"), "{toggle:#?}");
    assert_eq!(server.restarts(), 1);
}

/// The checks run with none of the agent's processes: its stdio MCP
/// servers are ended (with what they started) before each round of checks,
/// and started again for a call in the round of feedback that follows,
/// which is no restart.
#[tokio::test]
async fn mcp_servers_are_ended_before_the_checks_and_started_again_after() {
    let Some(everything) = everything_server() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().canonicalize().unwrap();
    let config = HarnessConfig {
        feedback_rounds: 1,
        mcp_servers: vec![everything],
        ..HarnessConfig::default()
    };
    let harness = assemble(config, &workspace).await;
    let server = std::sync::Arc::clone(&harness.mcp_servers().servers()[0]);
    let first = server.process_id().await.unwrap();
    let echo = |id: &str| call(id, "everything__echo", serde_json::json!({"message": id}));
    let mut model = ReplayModel::new(
        "scripted",
        vec![
            answer("once", vec![echo("c1")]),
            answer("done", vec![]),
            answer("again", vec![echo("c2")]),
            answer("done again", vec![]),
        ],
    );
    // Fails the first time (leaving a mark), passes the second.
    let checks = [Check::command(
        "second time".to_string(),
        "test -e checked || { touch checked; exit 1; }".to_string(),
        10,
    )];
    let mut sink = VecSink::default();
    let run = harness
        .run(
            &mut model,
            None,
            "use the tools",
            &Verification::Commands(&checks),
            &mut sink,
        )
        .await;
    assert_eq!(run.outcome(), TrialOutcome::Passed, "{run:?}");
    assert_eq!(run.feedback_rounds, 1, "{run:?}");
    let results: Vec<_> = (sink.events.iter())
        .filter_map(|e| match e {
            Event::ToolCall(t) => Some((t.status, t.result.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert!(
        results.iter().all(|(status, _)| *status == SpanStatus::Ok),
        "{results:?}"
    );
    assert!(results[1].1.contains("Echo: c2"), "{results:?}");
    // Ended before the last checks too, and reaped: nothing of it is left.
    assert_eq!(server.process_id().await, None);
    assert!(!std::path::Path::new(&format!("/proc/{first}")).exists());
    assert_eq!(server.restarts(), 0);
}
