//! The harness as `tack run` and `tack exec` both use it: assembly errors
//! name the setting, and a run goes agent → checks → feedback rounds.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::path::Path;

use tack_harness::{Harness, HarnessError, HarnessSetup, Verification};
use tack_model::ReplayModel;
use tack_protocol::{
    ApproverPolicy, Event, FinishReason, HarnessConfig, Message, SandboxProfile, StopReason,
    ToolCall, TrialOutcome, Usage, VecSink,
};
use tack_suite::Check;

fn setup(workspace: &Path, config: HarnessConfig) -> HarnessSetup {
    HarnessSetup {
        config,
        workspace: workspace.to_path_buf(),
        env: Vec::new(),
        hidden: Vec::new(),
        base_dir: workspace.to_path_buf(),
        interactive: None,
        walls: Default::default(),
    }
}

/// Unconfined, so the loop itself is tested on any machine; the sandboxed
/// paths have their own tests through the binary.
fn unconfined() -> HarnessConfig {
    HarnessConfig {
        sandbox: SandboxProfile::Off,
        ..HarnessConfig::default()
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

fn check(name: &str, run: &str) -> Check {
    Check::command(name.to_string(), run.to_string(), 10)
}

#[tokio::test]
async fn assembly_errors_name_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = unconfined();
    config.approver.policy = ApproverPolicy::Interactive;
    let error = Harness::assemble(setup(dir.path(), config))
        .await
        .unwrap_err();
    assert!(
        matches!(error, HarnessError::NoInteractiveApprover),
        "{error}"
    );
    assert!(error.to_string().contains("harness.approver"), "{error}");

    let mut config = unconfined();
    config.permissions = Some("missing.toml".to_string());
    let error = Harness::assemble(setup(dir.path(), config))
        .await
        .unwrap_err();
    assert!(matches!(error, HarnessError::Permissions(_)), "{error}");
    assert!(error.to_string().contains("missing.toml"), "{error}");

    let mut config = unconfined();
    config.tools = vec!["teleport".to_string()];
    let error = Harness::assemble(setup(dir.path(), config))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("harness.tools"), "{error}");
}

#[tokio::test]
async fn failing_checks_go_back_to_the_model_for_each_feedback_round() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = unconfined();
    config.feedback_rounds = 1;
    let harness = Harness::assemble(setup(dir.path(), config)).await.unwrap();
    let fix = ToolCall {
        id: "c1".to_string(),
        name: "write_file".to_string(),
        arguments: r#"{"path": "done.txt", "content": "yes"}"#.to_string(),
    };
    let mut model = ReplayModel::new(
        "scripted",
        vec![
            answer("all done", vec![]),
            answer("fixing", vec![fix]),
            answer("now done", vec![]),
        ],
    );
    let checks = [check("done exists", "test -f done.txt")];
    let mut sink = VecSink::default();
    let run = harness
        .run(
            &mut model,
            None,
            "make done.txt",
            &Verification::Commands(&checks),
            &mut sink,
        )
        .await;
    assert_eq!(run.outcome(), TrialOutcome::Passed, "{run:?}");
    assert_eq!(run.feedback_rounds, 1);
    assert_eq!(run.agent.stop_reason, StopReason::Completed);
    assert_eq!(run.agent.totals.steps, 3);
    assert_eq!(run.agent.totals.tool_calls, 1);
    let checks_seen: Vec<bool> = sink
        .events
        .iter()
        .filter_map(|e| match e {
            Event::Check(c) => Some(c.passed),
            _ => None,
        })
        .collect();
    assert_eq!(checks_seen, [false, true]);
    let feedback = sink.events.iter().find_map(|e| match e {
        Event::Message { index, message }
            if *index > 1 && message.role == tack_protocol::Role::User =>
        {
            Some(message.content.clone())
        }
        _ => None,
    });
    let feedback = feedback.expect("the failing check went back to the model");
    assert!(
        feedback.contains("## done exists FAILED (exit code 1)\n$ test -f done.txt"),
        "{feedback}"
    );
}

#[tokio::test]
async fn no_feedback_rounds_means_a_failing_check_fails_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let harness = Harness::assemble(setup(dir.path(), unconfined()))
        .await
        .unwrap();
    let mut model = ReplayModel::new("scripted", vec![answer("done", vec![])]);
    let checks = [check("always fails", "exit 3")];
    let mut sink = VecSink::default();
    let run = harness
        .run(
            &mut model,
            None,
            "x",
            &Verification::Commands(&checks),
            &mut sink,
        )
        .await;
    assert_eq!(run.outcome(), TrialOutcome::VerificationFailed);
    assert_eq!((run.checks_passed, run.feedback_rounds), (Some(false), 0));
}

/// Runs the harness once on `workspace` with a model that answers at once,
/// and returns what its one model call was sent, by role and text.
async fn first_call_messages(
    workspace: &Path,
    config: HarnessConfig,
) -> Vec<(tack_protocol::Role, String)> {
    let harness = Harness::assemble(setup(workspace, config)).await.unwrap();
    let mut model = ReplayModel::new("scripted", vec![answer("done", vec![])]);
    let mut sink = VecSink::default();
    let no_checks = Verification::Commands(&[]);
    harness
        .run(&mut model, None, "fix it", &no_checks, &mut sink)
        .await;
    let message = |at: u32| {
        sink.events.iter().find_map(|e| match e {
            Event::Message { index, message } if *index == at => {
                Some((message.role, message.content.clone()))
            }
            _ => None,
        })
    };
    let sent = sink.events.iter().find_map(|e| match e {
        Event::ModelCall(call) => Some(call.messages.clone()),
        _ => None,
    });
    sent.unwrap()
        .into_iter()
        .map(|at| message(at).unwrap())
        .collect()
}

#[tokio::test]
async fn agents_md_goes_into_the_context_before_the_task_unless_turned_off() {
    use tack_protocol::Role;
    let dir = tempfile::tempdir().unwrap();
    let instructions = "Run `make test` before you finish.\n";
    std::fs::write(dir.path().join("AGENTS.md"), instructions).unwrap();
    for (agents_md, expected) in [(true, 3), (false, 2)] {
        let config = HarnessConfig {
            agents_md,
            ..unconfined()
        };
        let sent = first_call_messages(dir.path(), config).await;
        assert_eq!(sent.len(), expected, "{sent:?}");
        assert_eq!(sent[0].0, Role::System);
        assert_eq!(sent[expected - 1], (Role::User, "fix it".to_string()));
        if agents_md {
            let (role, text) = &sent[1];
            assert_eq!(*role, Role::User);
            assert!(text.starts_with("Instructions for this project, from AGENTS.md"));
            assert!(text.ends_with(instructions));
        }
    }
    // Without the file nothing is added.
    let empty = tempfile::tempdir().unwrap();
    assert_eq!(
        first_call_messages(empty.path(), unconfined()).await.len(),
        2
    );
}

/// tack reads AGENTS.md itself, outside the sandbox: a link out of the
/// workspace (to a key) is not followed, and a FIFO is not waited on; the
/// model is told the file was not read. A link within is followed.
#[tokio::test]
async fn agents_md_that_is_a_link_or_a_fifo_is_not_read() {
    let secret_dir = tempfile::tempdir().unwrap();
    let secret = secret_dir.path().join("id_rsa");
    std::fs::write(&secret, "PRIVATE KEY 0xDEADBEEF").unwrap();
    let linked = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&secret, linked.path().join("AGENTS.md")).unwrap();
    let fifo = tempfile::tempdir().unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(fifo.path().join("AGENTS.md"))
        .status()
        .unwrap();
    assert!(made.success());
    for (dir, reason) in [
        (linked.path(), "outside the workspace"),
        (fifo.path(), "not a regular file"),
    ] {
        let sent = first_call_messages(dir, unconfined()).await;
        let all = format!("{sent:?}");
        assert!(!all.contains("DEADBEEF"), "{all}");
        assert!(all.contains("the harness did not read it"), "{all}");
        assert!(all.contains(reason), "{all}");
    }
    // A link that stays in the workspace (AGENTS.md -> CLAUDE.md) is read.
    let within = tempfile::tempdir().unwrap();
    std::fs::write(within.path().join("CLAUDE.md"), "Use tabs.\n").unwrap();
    std::os::unix::fs::symlink("CLAUDE.md", within.path().join("AGENTS.md")).unwrap();
    let sent = first_call_messages(within.path(), unconfined()).await;
    assert!(sent[1].1.ends_with("Use tabs.\n"), "{sent:?}");
}
