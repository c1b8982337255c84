//! `tack exec` exit codes, one per outcome, through the real binary.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::process::{Command, Output, Stdio};

use serde_json::Value;

fn exec(workspace: &std::path::Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["exec", "tidy up the greeting", "--workspace"])
        .arg(workspace)
        .args(extra)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Whether a process whose command line is `cmdline` (NUL-separated, as
/// /proc has it) runs below process `ancestor` (its sandbox included).
fn runs_below(ancestor: u32, cmdline: &[u8]) -> bool {
    common::processes().into_iter().any(|pid| {
        if std::fs::read(format!("/proc/{pid}/cmdline"))
            .ok()
            .as_deref()
            != Some(cmdline)
        {
            return false;
        }
        let mut at = pid;
        while let Some((_, up)) = common::name_and_parent(at).filter(|(_, up)| *up > 1) {
            if up == ancestor {
                return true;
            }
            at = up;
        }
        false
    })
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("greet.sh"), "echo hello\n").unwrap();
    dir
}

fn events(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn completed_and_verified_exits_0_with_an_ordered_event_stream() {
    let dir = workspace();
    let output = exec(dir.path(), &["--check", "grep -q hello greet.sh", "--json"]);
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events = events(&output);
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (0..events.len() as u64).collect::<Vec<_>>());
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["event"]["type"].as_str().unwrap())
        .collect();
    assert_eq!(types.first(), Some(&"message"));
    assert!(
        types.contains(&"model_call") && types.contains(&"tool_call") && types.contains(&"check")
    );
    let last = &events.last().unwrap()["event"];
    assert_eq!(last["type"], "exec_finished");
    assert_eq!(last["outcome"], "passed");
    assert_eq!(last["verified"], true);
}

/// Without `--check` nothing verified the agent's work: the run says so
/// in text, in `--json` and in the session log, and is never "passed".
#[test]
fn without_a_check_the_run_is_completed_not_verified() {
    let dir = workspace();
    let output = exec(dir.path(), &[]);
    assert_eq!(output.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("completed, not verified"), "{stderr}");
    assert!(!stderr.contains("passed"), "{stderr}");
    // The agent's answer is stdout's, the account stderr's.
    let answer = String::from_utf8_lossy(&output.stdout);
    assert!(
        !answer.trim().is_empty(),
        "no answer on stdout; stderr: {stderr}"
    );
    assert!(!answer.contains("step "), "{answer}");

    let session = tempfile::tempdir().unwrap();
    let log = session.path().join("s");
    let output = exec(dir.path(), &["--json", "--session", log.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(0));
    let events = events(&output);
    let last = &events.last().unwrap()["event"];
    assert_eq!(
        (&last["type"], &last["outcome"], &last["verified"]),
        (&"exec_finished".into(), &"unverified".into(), &false.into())
    );
    let logged = std::fs::read_to_string(log.join("events.jsonl")).unwrap();
    let finished: Value = serde_json::from_str(logged.lines().last().unwrap()).unwrap();
    assert_eq!(finished["event"]["outcome"], "unverified", "{finished}");
}

#[test]
fn a_failing_check_exits_1() {
    let dir = workspace();
    let output = exec(dir.path(), &["--check", "grep -q goodbye greet.sh"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("verification_failed"));
}

#[test]
fn a_step_limit_exits_4() {
    let dir = workspace();
    let output = exec(dir.path(), &["--max-steps", "1", "--json"]);
    assert_eq!(output.status.code(), Some(4));
    let events = events(&output);
    assert_eq!(events.last().unwrap()["event"]["stop_reason"], "step_limit");
}

#[test]
fn usage_errors_exit_2() {
    let output = exec(std::path::Path::new("/nonexistent/tack"), &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("is not a directory"));
    let dir = workspace();
    let output = exec(dir.path(), &["--model", "gpt-9"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("`gpt-9` is not a model"));
    // The oracle has no reference solution outside a suite.
    let output = exec(dir.path(), &["--model", "oracle"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--model oracle applies a suite task's reference solution"),
        "{stderr}"
    );
    // A rules file that is not there is blamed on the flag that named it.
    let output = exec(dir.path(), &["--permissions", "/nonexistent/rules.toml"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("error: --permissions: "), "{stderr}");
    // An empty check (an unset `$TEST_CMD`) would pass anything.
    let output = exec(dir.path(), &["--check", " "]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("an empty check passes whatever"),
        "{stderr}"
    );
}

#[test]
fn an_event_stream_that_cannot_be_written_is_a_harness_error_exit_3() {
    let dir = workspace();
    let workspace = dir.path().to_str().unwrap();
    // Nobody reads the events: the first write fails with a broken pipe.
    let (code, stderr) =
        common::with_closed_stdout(&["exec", "look around", "--json", "--workspace", workspace]);
    assert_eq!(code, Some(3), "{stderr}");
}

#[test]
fn denied_calls_go_back_to_the_model_and_the_run_goes_on() {
    let dir = workspace();
    let rules = dir.path().join("rules.toml");
    std::fs::write(
        &rules,
        "[[rules]]\naction = \"deny\"\ncommand = \"find*\"\nreason = \"no walking\"\n",
    )
    .unwrap();
    let output = exec(
        dir.path(),
        &["--permissions", rules.to_str().unwrap(), "--json"],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events = events(&output);
    let denied = events
        .iter()
        .find(|e| e["event"]["type"] == "tool_call" && e["event"]["error_kind"] == "denied")
        .expect("a denied tool call");
    assert_eq!(denied["event"]["permission"], "deny");
    assert!(
        denied["event"]["result"]
            .as_str()
            .unwrap()
            .contains("no walking")
    );
}

/// Ctrl-C ends the run with an `exec_interrupted` line, numbered like
/// every other and in the session's log (so `tack events --follow` ends),
/// and the session can be carried on.
#[test]
fn ctrl_c_cancels_and_exits_130() {
    let dir = workspace();
    let session = tempfile::tempdir().unwrap();
    let log = session.path().join("s");
    let child = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args([
            "exec",
            "look around",
            "--json",
            "--check",
            "sleep 30",
            "--session",
            log.to_str().unwrap(),
            "--workspace",
        ])
        .arg(dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the agent is done and the (slow) check is running: its
    // `sleep 30` is a process below tack's. Fixed waits (after the agent's
    // last event) lost the race on a loaded machine.
    let started = std::time::Instant::now();
    while !runs_below(child.id(), b"sleep\x0030\x00") {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(60),
            "the check never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let interrupted = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let output = child.wait_with_output().unwrap();
    assert_eq!(
        output.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events = events(&output);
    let last = events.last().unwrap();
    assert_eq!(last["event"]["type"], "exec_interrupted", "{last}");
    assert_eq!(last["event"]["outcome"], "cancelled");
    assert_eq!(
        last["seq"].as_u64(),
        Some(events.len() as u64 - 1),
        "{last}"
    );
    let logged = std::fs::read_to_string(log.join("events.jsonl")).unwrap();
    let logged_last: Value = serde_json::from_str(logged.lines().last().unwrap()).unwrap();
    assert_eq!(&logged_last, last);
    // It ends a follower, and the session is not finished.
    let follow = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["events", log.to_str().unwrap(), "--follow"])
        .output()
        .unwrap();
    assert_eq!(follow.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("carry the session on with `tack exec --resume"),
        "{stderr}"
    );
}

/// Skills in the workspace's `skills/`: the system prompt lists each by
/// name and description only, the simulated agent loads the one listed
/// with `read_skill`, and the body comes back whole.
#[test]
fn skills_are_listed_and_loaded_on_demand() {
    let dir = workspace();
    let skill = dir.path().join("skills/greeting-style");
    std::fs::create_dir_all(&skill).unwrap();
    let body = "# Greetings\nAlways greet in lower case.\n";
    std::fs::write(
        skill.join("SKILL.md"),
        format!("---\nname: greeting-style\ndescription: How this project writes greetings.\n---\n{body}"),
    )
    .unwrap();
    let output = exec(dir.path(), &["--json", "--sandbox", "off"]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let events = events(&output);
    let system = events
        .iter()
        .find(|e| e["event"]["type"] == "message")
        .map(|e| {
            e["event"]["message"]["content"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .unwrap();
    assert!(
        system.contains("- greeting-style: How this project writes greetings."),
        "{system}"
    );
    assert!(
        !system.contains("Always greet"),
        "the body is loaded on demand"
    );
    let read = events
        .iter()
        .find(|e| e["event"]["type"] == "tool_call" && e["event"]["tool_name"] == "read_skill")
        .unwrap_or_else(|| panic!("no read_skill call: {stderr}"));
    assert_eq!(read["event"]["status"], "ok");
    assert!(read["event"]["result"].as_str().unwrap().contains(body));

    // A broken SKILL.md is a usage error naming the file and line.
    std::fs::write(skill.join("SKILL.md"), "---\nname: [oops\n---\n").unwrap();
    let output = exec(dir.path(), &["--sandbox", "off"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("skills/greeting-style/SKILL.md line"),
        "{stderr}"
    );
}

/// `--mcp-config` takes a project's `.mcp.json`: the agent gets the
/// server's tools, the stdio server runs in the sandbox, and the span
/// names it. Needs the MCP reference servers (`.ci/run` installs them).
#[test]
fn an_mcp_config_gives_the_agent_the_servers_tools() {
    let Some(bin) = tack_testkit::mcp_reference_servers() else {
        return;
    };
    let call = tack_testkit::ScriptedCall::new(
        "call_echo",
        "everything__echo",
        r#"{"message": "from exec"}"#.to_string(),
    );
    let server = tack_testkit::OpenAiServer::start_background(vec![
        tack_testkit::ScriptedResponse::tool_calls(vec![call]),
        tack_testkit::ScriptedResponse::text("echoed"),
    ])
    .unwrap();
    let dir = workspace();
    let config = tempfile::tempdir().unwrap();
    let file = config.path().join(".mcp.json");
    let everything = bin.join("mcp-server-everything");
    let json = serde_json::json!({"mcpServers": {"everything": {"command": everything}}});
    std::fs::write(&file, json.to_string()).unwrap();
    let profile = common::sandbox_profile();
    let output = exec(
        dir.path(),
        &[
            "--mcp-config",
            file.to_str().unwrap(),
            "--model",
            "openai:gpt-4o-mini",
            "--base-url",
            &server.base_url(),
            "--sandbox",
            profile,
            "--json",
        ],
    );
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let events = events(&output);
    let echo = events
        .iter()
        .map(|e| &e["event"])
        .find(|e| e["type"] == "tool_call")
        .expect("a tool call");
    assert_eq!(echo["tool_name"], "everything__echo");
    assert_eq!(echo["mcp_server"], "everything");
    assert_eq!(echo["result"], "Echo: from exec");
    // The model was offered the server's tools with their schemas.
    let offered = &server.requests()[0].body["tools"];
    let names: Vec<&str> = offered
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"bash") && names.contains(&"everything__get-sum"),
        "{names:?}"
    );
}

/// Under `strict`, a run's bash commands start in one sandbox built for the
/// run: they share its /tmp (a file written by one is there for the next)
/// and its process table (bash is not pid 1; the sandbox's init is). Each
/// is still locked down: a write outside the workspace is refused.
#[test]
fn a_runs_commands_share_one_sandbox() {
    if common::sandbox_profile() != "strict" {
        return;
    }
    let tool_loop = tack_testkit::ToolLoop {
        steps: 3,
        argument: "echo x >> \"$TMPDIR/seen\"; echo \"pid=$$ seen=$(wc -l < \"$TMPDIR/seen\")\"; touch /etc/tack-never 2>&1 | head -c 0".to_string(),
        ..tack_testkit::ToolLoop::default()
    };
    let server = tack_testkit::MockServer::start_tool_loop(
        tack_testkit::Dialect::OpenAi,
        tool_loop,
        tack_testkit::ServerOptions::default(),
    )
    .unwrap();
    let dir = workspace();
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["exec", "look around", "--workspace"])
        .arg(dir.path())
        .args(["--model", "openai:gpt-4o-mini", "--base-url"])
        .arg(server.base_url())
        .args(["--sandbox", "strict", "--json"])
        .env("API_KEY", tack_testkit::TEST_API_KEY)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let results: Vec<String> = events(&output)
        .iter()
        .map(|e| &e["event"])
        .filter(|e| e["type"] == "tool_call")
        .map(|e| e["stdout"].as_str().unwrap_or_default().trim().to_string())
        .collect();
    assert_eq!(results.len(), 3, "{results:?}");
    for (i, result) in results.iter().enumerate() {
        assert!(result.ends_with(&format!("seen={}", i + 1)), "{results:?}");
        assert!(!result.starts_with("pid=1 "), "{results:?}");
    }
    assert!(!std::path::Path::new("/etc/tack-never").exists());
}

/// `--max-wall-secs` bounds a command already running, not only the model
/// calls: a 30-second command under a 2-second limit is stopped at the
/// limit, and the run ends for the time limit.
#[test]
fn the_wall_clock_limit_stops_a_running_command() {
    let call = tack_testkit::ScriptedCall::new(
        "call_sleep",
        "bash",
        r#"{"command": "sleep 30; echo slept > after.txt"}"#.to_string(),
    );
    let server = tack_testkit::OpenAiServer::start_background(vec![
        tack_testkit::ScriptedResponse::tool_calls(vec![call]),
        tack_testkit::ScriptedResponse::text("done"),
    ])
    .unwrap();
    let dir = workspace();
    let output = exec(
        dir.path(),
        &[
            "--model",
            "openai:gpt-4o-mini",
            "--base-url",
            &server.base_url(),
            "--sandbox",
            common::sandbox_profile(),
            "--approver",
            "approve_all",
            "--max-wall-secs",
            "2",
            "--json",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(4), "{stderr}");
    let events = events(&output);
    let call = events
        .iter()
        .map(|e| &e["event"])
        .find(|e| e["type"] == "tool_call")
        .expect("the command ran");
    // Killed at the limit: no exit code of its own.
    assert!(call["exit_code"].is_null(), "{call}");
    assert!(
        !dir.path().join("after.txt").exists(),
        "the command ran to its end"
    );
    let last = &events.last().unwrap()["event"];
    assert_eq!(last["stop_reason"], "time_limit", "{last}");
}

/// An outage ends the run, not the session: resumed with the model server
/// where it now is (`--base-url`), the session carries on; flags a session
/// keeps as its own are refused on a resume, not ignored.
#[test]
fn a_session_ended_by_an_outage_carries_on_where_the_server_now_is() {
    let dir = workspace();
    let session = tempfile::tempdir().unwrap();
    let log = session.path().join("s");
    let log_arg = log.to_str().unwrap();
    // Nothing listens on port 9: every attempt fails to connect.
    let down = exec(
        dir.path(),
        &[
            "--model",
            "openai:gpt-4o-mini",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--session",
            log_arg,
            "--json",
        ],
    );
    assert_eq!(down.status.code(), Some(5), "{down:?}");
    let down_events = events(&down);
    let last = &down_events.last().unwrap()["event"];
    assert_eq!(last["outcome"], "infra_error", "{last}");
    assert!(last["checks_passed"].is_null(), "no check judged: {last}");

    let server =
        tack_testkit::OpenAiServer::start_background(vec![tack_testkit::ScriptedResponse::text(
            "all done",
        )])
        .unwrap();
    let resume = |extra: &[&str]| {
        let mut args = vec!["exec", "--resume", log_arg, "--json"];
        args.extend_from_slice(extra);
        Command::new(env!("CARGO_BIN_EXE_tack"))
            .args(&args)
            .env("OPENAI_API_KEY", tack_testkit::TEST_API_KEY)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let refused = resume(&["--max-steps", "3"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let refused = resume(&["--model", "sim"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(String::from_utf8_lossy(&refused.stderr).contains("keeps its model"));
    let mcp_json = session.path().join("mcp.json");
    std::fs::write(&mcp_json, r#"{"mcpServers": {}}"#).unwrap();
    let refused = resume(&["--mcp-config", mcp_json.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("keeps its MCP servers (none)"),
        "{refused:?}"
    );
    let up = resume(&["--base-url", &server.base_url()]);
    assert_eq!(
        up.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let up_events = events(&up);
    let last = &up_events.last().unwrap()["event"];
    assert_eq!(last["outcome"], "unverified", "{last}");
}

/// A session kept inside the workspace would be the agent's to rewrite
/// (its sandbox, its checks) before a --resume: refused.
#[test]
fn a_session_inside_the_workspace_is_refused() {
    let dir = workspace();
    let log = dir.path().join(".tack/s1");
    let output = exec(dir.path(), &["--session", log.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is inside the workspace"), "{stderr}");
    assert!(!log.exists());
}
