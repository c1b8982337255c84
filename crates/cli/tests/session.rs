//! Sessions end to end: `tack exec --session` is killed (-9) while a call
//! waits for approval; `tack exec --resume` asks the approver again, runs the
//! call once and finishes the task; `tack events --after-seq` (and
//! `--follow`) hand out every event exactly once across the restart.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tack_testkit::{Dialect, MockServer, ScriptedCall, ScriptedResponse, ServerOptions};

fn tack() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tack"));
    command.env("API_KEY", tack_testkit::TEST_API_KEY);
    command
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn events(dir: &Path, after: Option<u64>) -> Vec<Value> {
    let mut command = tack();
    command.arg("events").arg(dir);
    if let Some(after) = after {
        command.args(["--after-seq", &after.to_string()]);
    }
    let output = command.output().unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn seqs(lines: &[Value]) -> Vec<u64> {
    lines.iter().map(|l| l["seq"].as_u64().unwrap()).collect()
}

#[test]
fn a_killed_session_resumes_asks_again_and_streams_every_event_once() {
    // The model asks for one command that needs approval, then answers.
    let command = "echo ran >> ran.txt";
    let arguments = serde_json::json!({ "command": command }).to_string();
    let script = vec![
        ScriptedResponse::tool_calls(vec![ScriptedCall::new("call_1", "bash", arguments)]),
        ScriptedResponse::text("Done: ran.txt says ran."),
    ];
    let server =
        MockServer::start_background(Dialect::OpenAi, script, ServerOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (workspace, session) = (dir.path().join("ws"), dir.path().join("session"));
    std::fs::create_dir(&workspace).unwrap();
    let marks = dir.path().join("marks");
    std::fs::create_dir(&marks).unwrap();
    // The first approver is a person who does not answer (until the test
    // lets the orphaned script go, at the end).
    let hanging = format!(
        "touch {m}/asked-1; while [ ! -e {m}/release ]; do sleep 0.1; done; touch {m}/left; exit 1",
        m = marks.display()
    );
    let mut first = tack()
        .args(["exec", "Write ran.txt.", "--model", "openai:gpt-4o-mini"])
        .arg("--base-url")
        .arg(server.base_url())
        .arg("--workspace")
        .arg(&workspace)
        .arg("--session")
        .arg(&session)
        .args([
            "--permissions",
            "default",
            "--sandbox",
            common::sandbox_profile(),
        ])
        .args(["--approve-with", &hanging, "--check", "grep -q ran ran.txt"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .unwrap();
    wait_for("the approval request", || marks.join("asked-1").exists());
    let before = events(&session, None);
    assert_eq!(
        before.last().unwrap()["event"]["type"],
        "approval_requested",
        "{before:#?}"
    );
    // kill -9 tack (and its sandbox spawner, in its process group).
    let killed = Command::new("kill")
        .args(["-s", "KILL", "--", &format!("-{}", first.id())])
        .status()
        .unwrap();
    assert!(killed.success());
    first.wait().unwrap();
    assert!(!workspace.join("ran.txt").exists());
    let seen = seqs(&before);
    let last_seen = *seen.last().unwrap();
    assert_eq!(seen, (0..=last_seen).collect::<Vec<_>>());

    // A client follows the log from where it was, across the restart.
    let follower = tack()
        .arg("events")
        .arg(&session)
        .args(["--after-seq", &last_seen.to_string(), "--follow"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let approving = format!("touch {}/asked-2", marks.display());
    let resumed = tack()
        .arg("exec")
        .arg("--resume")
        .arg(&session)
        .args(["--approve-with", &approving])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(
        marks.join("asked-2").exists(),
        "the approver was not asked again"
    );
    // The call ran once, after the second approval.
    assert_eq!(
        std::fs::read_to_string(workspace.join("ran.txt")).unwrap(),
        "ran\n"
    );
    // The model was asked twice in all: the first turn was not repeated.
    assert_eq!(server.requests().len(), 2);

    let after = events(&session, Some(last_seen));
    let all = events(&session, None);
    assert_eq!(seqs(&all), (0..all.len() as u64).collect::<Vec<_>>());
    assert_eq!(seqs(&after), seqs(&all)[before.len()..]);
    let kinds: Vec<&str> = after
        .iter()
        .map(|l| l["event"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.first(), Some(&"approval_requested"), "{kinds:?}");
    assert!(
        kinds.contains(&"approval") && kinds.contains(&"tool_call") && kinds.contains(&"check")
    );
    assert_eq!(kinds.last(), Some(&"exec_finished"));
    assert_eq!(after.last().unwrap()["event"]["outcome"], "passed");

    let followed = follower.wait_with_output().unwrap();
    assert!(followed.status.success());
    let followed: Vec<Value> = String::from_utf8(followed.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(seqs(&followed), seqs(&after));

    // Waited for: were the marks removed first, it would wait for ever.
    std::fs::write(marks.join("release"), "").unwrap();
    wait_for("the orphaned approver to leave", || {
        marks.join("left").exists()
    });

    // A finished session is not resumed again.
    let again = tack()
        .arg("exec")
        .arg("--resume")
        .arg(&session)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("has finished"));
}

/// `tack events` on a run's directory says what it is and what reads it,
/// not that no session was started there.
#[test]
fn events_on_a_run_directory_points_to_tack_show() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("manifest.json"), "{}").unwrap();
    let output = tack().arg("events").arg(dir.path()).output().unwrap();
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("is a run's trace directory, not a session: `tack show"),
        "{stderr}"
    );
}
