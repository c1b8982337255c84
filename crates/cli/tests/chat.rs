//! `tack chat` through a real pseudo-terminal, against a loopback
//! OpenAI-compatible server: a two-turn conversation whose first turn keeps
//! a plan and asks for one approval inline, `/todos` and `/skills` in between, a third
//! turn cancelled with Ctrl-C, and Ctrl-D to leave.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::process::Command;
use std::time::Duration;

use expectrl::{ControlCode, Expect, Session};
use tack_testkit::{Dialect, MockServer, ScriptedCall, ScriptedResponse, ServerOptions};

/// What the line editor shows when it waits for a line.
const PROMPT: &str = "› ";

/// `tack chat` on `server`'s model in `workspace`, on a pseudo-terminal.
fn spawn_chat(
    server: &MockServer,
    workspace: &std::path::Path,
    history: &std::path::Path,
) -> expectrl::session::OsSession {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tack"));
    command
        .args(["chat", "--model", "openai:gpt-4o-mini", "--sandbox", "off"])
        .arg("--base-url")
        .arg(server.base_url())
        .arg("--workspace")
        .arg(workspace)
        .arg("--history")
        .arg(history)
        .env("API_KEY", tack_testkit::TEST_API_KEY);
    let mut chat = Session::spawn(command).unwrap();
    chat.set_expect_timeout(Some(Duration::from_secs(60)));
    chat
}

#[test]
fn a_two_turn_chat_with_an_approval_and_todos() {
    let todos = serde_json::json!({
        "todos": [
            {"content": "write hi.txt", "status": "in_progress"},
            {"content": "say so", "status": "pending"}
        ]
    });
    let write = serde_json::json!({ "command": "echo hi > hi.txt" });
    let script = vec![
        ScriptedResponse::tool_calls(vec![ScriptedCall::new(
            "call_1",
            "write_todos",
            todos.to_string(),
        )]),
        ScriptedResponse::tool_calls(vec![ScriptedCall::new("call_2", "bash", write.to_string())]),
        ScriptedResponse::text("Wrote hi.txt."),
        ScriptedResponse::text("You are welcome."),
        ScriptedResponse::delayed(30_000, ScriptedResponse::text("Too late.")),
    ];
    let server =
        MockServer::start_background(Dialect::OpenAi, script, ServerOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("ws");
    std::fs::create_dir(&workspace).unwrap();
    let skill = workspace.join("skills/notes");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: notes\ndescription: How to write notes here.\n---\nShort lines.\n",
    )
    .unwrap();

    let mut chat = spawn_chat(&server, &workspace, &dir.path().join("history"));
    chat.expect("/help for commands").unwrap();

    chat.expect(PROMPT).unwrap();
    chat.send_line("Write hi.txt, and keep a plan.").unwrap();
    chat.expect("Allow? [y/N]").unwrap();
    chat.send_line("y").unwrap();
    chat.expect("Wrote hi.txt.").unwrap();
    assert_eq!(
        std::fs::read_to_string(workspace.join("hi.txt")).unwrap(),
        "hi\n"
    );

    chat.expect(PROMPT).unwrap();
    chat.send_line("/todos").unwrap();
    chat.expect("[~] write hi.txt").unwrap();
    chat.expect("[ ] say so").unwrap();

    chat.expect(PROMPT).unwrap();
    chat.send_line("/skills").unwrap();
    chat.expect("notes: How to write notes here.").unwrap();

    chat.expect(PROMPT).unwrap();
    chat.send_line("Thanks.").unwrap();
    chat.expect("You are welcome.").unwrap();
    // Ctrl-C cancels a turn that is waiting on the model; the session
    // goes on.
    chat.expect(PROMPT).unwrap();
    chat.send_line("Take your time.").unwrap();
    // Once the model has the request, the turn is under way (and the
    // editor has given the terminal back).
    let asked = std::time::Instant::now();
    while server.requests().len() < 5 {
        assert!(
            asked.elapsed() < Duration::from_secs(60),
            "the turn never reached the model"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    chat.send(ControlCode::EndOfText).unwrap();
    chat.expect("(turn cancelled)").unwrap();
    chat.expect(PROMPT).unwrap();
    chat.send_line("/cost").unwrap();
    chat.expect("tokens").unwrap();

    // Lines and Ctrl-D go to the editor once it has the terminal (its
    // prompt is shown): typed ahead in cooked mode, the terminal itself
    // would take a Ctrl-D.
    chat.expect(PROMPT).unwrap();
    chat.send(ControlCode::EndOfTransmission).unwrap();
    chat.expect(expectrl::Eof).unwrap();
    // Both turns were one conversation: the second request carried the
    // first turn's messages.
    let requests = server.requests();
    assert_eq!(requests.len(), 5);
    let sent = requests[3].body["messages"].to_string();
    assert!(sent.contains("Write hi.txt, and keep a plan.") && sent.contains("Thanks."));
    assert!(
        std::fs::read_to_string(dir.path().join("history"))
            .unwrap()
            .contains("/todos")
    );
}

/// Ctrl-C at an approval question cancels the turn and the question with
/// it: the next line typed goes to the chat's prompt, not to a reader
/// still waiting for the question's answer.
#[test]
fn ctrl_c_at_an_approval_question_gives_the_next_line_to_the_prompt() {
    let write = serde_json::json!({ "command": "echo hi > hi.txt" });
    let script = vec![
        ScriptedResponse::tool_calls(vec![ScriptedCall::new("call_1", "bash", write.to_string())]),
        ScriptedResponse::text("Hello again."),
    ];
    let server =
        MockServer::start_background(Dialect::OpenAi, script, ServerOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut chat = spawn_chat(&server, dir.path(), &dir.path().join("history"));
    chat.expect(PROMPT).unwrap();
    chat.send_line("Write hi.txt.").unwrap();
    chat.expect("Allow? [y/N]").unwrap();
    chat.send(ControlCode::EndOfText).unwrap();
    chat.expect("(turn cancelled)").unwrap();
    chat.expect(PROMPT).unwrap();
    chat.send_line("/todos").unwrap();
    chat.expect("(no plan yet").unwrap();
    chat.expect(PROMPT).unwrap();
    chat.send_line("Hello?").unwrap();
    chat.expect("Hello again.").unwrap();
    chat.expect(PROMPT).unwrap();
    chat.send(ControlCode::EndOfTransmission).unwrap();
    chat.expect(expectrl::Eof).unwrap();
    assert!(!dir.path().join("hi.txt").exists());
    assert_eq!(server.requests().len(), 2);
}
