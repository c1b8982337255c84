//! Every malformed call becomes a readable error result with a kind, and the
//! loop goes on.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use tack_agent::tools::builtin_tool;
use tack_agent::{Dispatcher, Tool, ToolContext, ToolError, ToolOutput};
use tack_protocol::{ToolCall, ToolErrorKind, ToolSpec};

struct PanickingTool;

#[async_trait]
impl Tool for PanickingTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "explode".to_string(),
            description: "always panics".to_string(),
            parameters: json!({"type": "object"}),
        }
    }

    async fn run(&self, _: serde_json::Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        panic!("boom");
    }
}

fn dispatcher(workspace: &std::path::Path) -> Dispatcher {
    let mut tools: Vec<Arc<dyn Tool>> = ["bash", "read_file", "write_file", "str_replace"]
        .iter()
        .filter_map(|name| builtin_tool(name))
        .collect();
    tools.push(Arc::new(PanickingTool));
    let ctx = ToolContext {
        workspace: workspace.to_path_buf(),
        env: vec![],
        command_timeout: Duration::from_secs(5),
        output_limit: 4096,
    };
    Dispatcher::new(tools, ctx)
}

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: "call_1".to_string(),
        name: name.to_string(),
        arguments: arguments.to_string(),
    }
}

#[tokio::test]
async fn malformed_calls_become_readable_errors() {
    use ToolErrorKind::*;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x\ny\nx\n").unwrap();
    let d = dispatcher(dir.path());
    // (tool, arguments, cut off by the output limit, expected kind, words the message must hold)
    let cases: &[(&str, &str, bool, ToolErrorKind, &str)] = &[
        (
            "bash",
            r#"{"command": "ls""#,
            false,
            InvalidJson,
            "not valid JSON",
        ),
        (
            "bash",
            r#"{command: "ls"}"#,
            false,
            InvalidJson,
            "not valid JSON",
        ),
        (
            "bash",
            r#"{'command': 'ls'}"#,
            false,
            InvalidJson,
            "not valid JSON",
        ),
        ("bash", "ls -la", false, InvalidJson, "not valid JSON"),
        (
            "bash",
            r#"{"command": "ls"} trailing"#,
            false,
            InvalidJson,
            "not valid JSON",
        ),
        (
            "read_file",
            "{\"path\": \"a.txt\"",
            false,
            InvalidJson,
            "not valid JSON",
        ),
        (
            "bash",
            r#"["ls"]"#,
            false,
            InvalidArguments,
            "must be a JSON object, not an array",
        ),
        ("bash", r#""ls""#, false, InvalidArguments, "not a string"),
        ("bash", "42", false, InvalidArguments, "not a number"),
        ("bash", "null", false, InvalidArguments, "not null"),
        (
            "run_shell",
            r#"{"command": "ls"}"#,
            false,
            UnknownTool,
            "Available tools: bash, read_file",
        ),
        ("", r#"{}"#, false, UnknownTool, "no tool named"),
        (
            "Bash",
            r#"{"command": "ls"}"#,
            false,
            UnknownTool,
            "no tool named `Bash`",
        ),
        (
            "bash",
            r#"{"command": 42}"#,
            false,
            InvalidArguments,
            "field `command`",
        ),
        (
            "bash",
            r#"{"command": ["ls"]}"#,
            false,
            InvalidArguments,
            "field `command`",
        ),
        (
            "bash",
            r#"{"command": "ls", "timeout_secs": "ten"}"#,
            false,
            InvalidArguments,
            "field `timeout_secs`",
        ),
        (
            "bash",
            r#"{"command": "ls", "timeout_secs": -1}"#,
            false,
            InvalidArguments,
            "timeout_secs",
        ),
        (
            "bash",
            r#"{}"#,
            false,
            InvalidArguments,
            "missing field `command`",
        ),
        (
            "bash",
            "",
            false,
            InvalidArguments,
            "missing field `command`",
        ),
        (
            "bash",
            r#"{"cmd": "ls"}"#,
            false,
            InvalidArguments,
            "unknown field `cmd`",
        ),
        (
            "bash",
            r#"{"command": "ls", "sudo": true}"#,
            false,
            InvalidArguments,
            "unknown field `sudo`",
        ),
        (
            "read_file",
            r#"{"path": 7}"#,
            false,
            InvalidArguments,
            "field `path`",
        ),
        (
            "read_file",
            r#"{"file": "a.txt"}"#,
            false,
            InvalidArguments,
            "unknown field `file`",
        ),
        (
            "read_file",
            r#"{"path": "a.txt", "start_line": "one"}"#,
            false,
            InvalidArguments,
            "start_line",
        ),
        (
            "read_file",
            r#"{"path": "missing.txt"}"#,
            false,
            ExecutionFailed,
            "cannot read `missing.txt`",
        ),
        (
            "read_file",
            r#"{"path": "../outside"}"#,
            false,
            ExecutionFailed,
            "outside the workspace",
        ),
        (
            "read_file",
            r#"{"path": "a.txt", "start_line": 9}"#,
            false,
            ExecutionFailed,
            "the file has 3 lines",
        ),
        (
            "write_file",
            r#"{"path": "b.txt"}"#,
            false,
            InvalidArguments,
            "missing field `content`",
        ),
        (
            "write_file",
            r#"{"path": "/etc/tack-test", "content": "x"}"#,
            false,
            ExecutionFailed,
            "outside the workspace",
        ),
        (
            "str_replace",
            r#"{"path": "a.txt", "old_string": "x", "new_string": "z"}"#,
            false,
            ExecutionFailed,
            "matches 2 times (lines 1, 3)",
        ),
        (
            "str_replace",
            r#"{"path": "a.txt", "old_string": "q", "new_string": "z"}"#,
            false,
            ExecutionFailed,
            "0 matches",
        ),
        (
            "str_replace",
            r#"{"path": "a.txt", "old_string": "", "new_string": "z"}"#,
            false,
            ExecutionFailed,
            "empty",
        ),
        (
            "str_replace",
            r#"{"path": "a.txt", "old": "x", "new": "z"}"#,
            false,
            InvalidArguments,
            "expected one of `path`, `old_string`, `new_string`",
        ),
        (
            "bash",
            r#"{"command": "echo hi"}"#,
            true,
            TruncatedCall,
            "Re-issue it with complete arguments",
        ),
        (
            "str_replace",
            r#"{"path": "a.txt", "old_str"#,
            true,
            TruncatedCall,
            "cut off",
        ),
        ("explode", "{}", false, Panicked, "crashed (boom)"),
    ];
    assert!(cases.len() >= 30);
    for (tool, arguments, cut_off, kind, words) in cases {
        let result = d.dispatch(&call(tool, arguments), *cut_off).await;
        let error = match result {
            Err(error) => error,
            Ok(output) => panic!("{tool} {arguments}: expected {kind}, got {output:?}"),
        };
        assert_eq!(error.kind, *kind, "{tool} {arguments}: {}", error.message);
        assert!(
            error.message.contains(words),
            "{tool} {arguments}: message `{}` lacks `{words}`",
            error.message
        );
    }
    // The dispatcher is still fine after all of that.
    let ok = d
        .dispatch(&call("bash", r#"{"command": "echo still here"}"#), false)
        .await;
    assert!(matches!(ok, Ok(ToolOutput::Command(out)) if out.stdout == "still here\n"));
}

#[tokio::test]
async fn commands_that_outlive_their_timeout_are_killed() {
    let dir = tempfile::tempdir().unwrap();
    let d = dispatcher(dir.path());
    let result = d
        .dispatch(
            &call("bash", r#"{"command": "sleep 30", "timeout_secs": 1}"#),
            false,
        )
        .await;
    match result {
        Ok(ToolOutput::Command(out)) => assert!(out.timed_out && out.exit_code.is_none()),
        other => panic!("expected a timed-out command, got {other:?}"),
    }
}
