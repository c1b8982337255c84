//! Every malformed call becomes a readable error result with a kind, and the
//! loop goes on.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::json;
use tack_agent::tools::{BUILTIN_TOOLS, builtin_tool};
use tack_agent::{Dispatcher, DispatcherError, Tool, ToolContext, ToolError, ToolOutput};
use tack_protocol::{ToolCall, ToolErrorKind, ToolSpec};

struct PanickingTool;

#[async_trait]
impl Tool for PanickingTool {
    fn access(&self, _: &serde_json::Value) -> Vec<tack_protocol::ToolAccess> {
        Vec::new()
    }

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

fn context(workspace: &std::path::Path) -> ToolContext {
    ToolContext {
        workspace: workspace.to_path_buf(),
        env: vec![],
        command_timeout: Duration::from_secs(5),
        output_limit: 4096,
        confinement: std::sync::Arc::new(tack_sandbox::Confinement::off()),
        session: None,
        results_dir: None,
        skills: Default::default(),
        held_workspace: Default::default(),
    }
}

fn dispatcher(workspace: &std::path::Path) -> Dispatcher {
    let mut tools: Vec<Arc<dyn Tool>> = BUILTIN_TOOLS
        .iter()
        .filter_map(|name| builtin_tool(name))
        .collect();
    tools.push(Arc::new(PanickingTool));
    Dispatcher::new(tools, context(workspace)).unwrap()
}

fn call(name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id: "call_1".to_string(),
        name: name.to_string(),
        arguments: arguments.to_string(),
    }
}

/// One malformed call: what is sent, the error kind expected, and the words the
/// message must hold — for argument errors, the field's JSON pointer and what
/// was expected of it.
struct Case {
    tool: &'static str,
    arguments: &'static str,
    cut_off: bool,
    kind: ToolErrorKind,
    words: &'static [&'static str],
}

const fn case(
    tool: &'static str,
    arguments: &'static str,
    kind: ToolErrorKind,
    words: &'static [&'static str],
) -> Case {
    Case {
        tool,
        arguments,
        cut_off: false,
        kind,
        words,
    }
}

const fn cut_off(
    tool: &'static str,
    arguments: &'static str,
    words: &'static [&'static str],
) -> Case {
    Case {
        tool,
        arguments,
        cut_off: true,
        kind: ToolErrorKind::TruncatedCall,
        words,
    }
}

// One case per line: the table reads better than rustfmt's layout.
#[rustfmt::skip]
const CASES: &[Case] = {
    use ToolErrorKind::*;
    &[
        // Not JSON at all.
        case("bash", r#"{"command": "ls""#, InvalidJson, &["`bash`", "not valid JSON"]),
        case("bash", r#"{command: "ls"}"#, InvalidJson, &["`bash`", "not valid JSON"]),
        case("bash", r#"{'command': 'ls'}"#, InvalidJson, &["`bash`", "not valid JSON"]),
        case("bash", "ls -la", InvalidJson, &["`bash`", "not valid JSON"]),
        case("bash", r#"{"command": "ls"} trailing"#, InvalidJson, &["not valid JSON", "trailing characters"]),
        case("read_file", "{\"path\": \"a.txt\"", InvalidJson, &["`read_file`", "not valid JSON"]),
        // JSON, but not an object.
        case("bash", r#"["ls"]"#, InvalidArguments, &["`bash`", "must be a JSON object, not an array"]),
        case("bash", r#""ls""#, InvalidArguments, &["`bash`", "not a string"]),
        case("bash", "42", InvalidArguments, &["`bash`", "not a number"]),
        case("bash", "null", InvalidArguments, &["`bash`", "not null"]),
        // No such tool.
        case("run_shell", r#"{"command": "ls"}"#, UnknownTool, &["`run_shell`", "Available tools: bash, read_file"]),
        case("", r#"{}"#, UnknownTool, &["no tool named ``"]),
        case("Bash", r#"{"command": "ls"}"#, UnknownTool, &["no tool named `Bash`"]),
        // The schema: wrong types.
        case("bash", r#"{"command": 42}"#, InvalidArguments, &[r#"/command: 42 is not of type "string""#]),
        case("bash", r#"{"command": ["ls"]}"#, InvalidArguments, &[r#"/command: ["ls"] is not of type "string""#]),
        case("bash", r#"{"command": "ls", "timeout_secs": "ten"}"#, InvalidArguments, &[r#"/timeout_secs: "ten" is not of type "integer""#]),
        case("read_file", r#"{"path": 7}"#, InvalidArguments, &[r#"/path: 7 is not of type "string""#]),
        case("read_file", r#"{"path": "a.txt", "start_line": "one"}"#, InvalidArguments, &[r#"/start_line: "one" is not of type "integer""#]),
        case("read_file", r#"{"path": "a.txt", "end_line": 2.5}"#, InvalidArguments, &[r#"/end_line: 2.5 is not of type "integer""#]),
        case("write_file", r#"{"path": "b.txt", "content": 5}"#, InvalidArguments, &[r#"/content: 5 is not of type "string""#]),
        case("list_files", r#"{"max_results": "10"}"#, InvalidArguments, &[r#"/max_results: "10" is not of type "integer""#]),
        case("list_files", r#"{"pattern": ["*.py"]}"#, InvalidArguments, &[r#"/pattern: ["*.py"] is not of type "string""#]),
        case("grep", r#"{"pattern": "x", "case_insensitive": "yes"}"#, InvalidArguments, &[r#"/case_insensitive: "yes" is not of type "boolean""#]),
        case("grep", r#"{"pattern": "x", "glob": 7}"#, InvalidArguments, &[r#"/glob: 7 is not of type "string""#]),
        case("write_todos", r#"{"todos": [{"content": "fix it", "status": "doing"}]}"#, InvalidArguments, &[r#"/todos/0/status: "doing" is not one of"#, "in_progress"]),
        case("write_todos", r#"{"todos": [{"content": "", "status": "pending"}]}"#, InvalidArguments, &[r#"/todos/0/content: "" is shorter than 1 character"#]),
        case("write_todos", r#"{"todos": "fix it"}"#, InvalidArguments, &[r#"/todos: "fix it" is not of type "array""#]),
        // The schema: bounds.
        case("bash", r#"{"command": "ls", "timeout_secs": -1}"#, InvalidArguments, &["/timeout_secs: -1 is less than the minimum of 1"]),
        case("bash", r#"{"command": "ls", "timeout_secs": 0}"#, InvalidArguments, &["/timeout_secs: 0 is less than the minimum of 1"]),
        case("read_file", r#"{"path": "a.txt", "start_line": 0}"#, InvalidArguments, &["/start_line: 0 is less than the minimum of 1"]),
        case("list_files", r#"{"max_results": 0}"#, InvalidArguments, &["/max_results: 0 is less than the minimum of 1"]),
        case("grep", r#"{"pattern": "x", "max_results": -5}"#, InvalidArguments, &["/max_results: -5 is less than the minimum of 1"]),
        case("grep", r#"{"pattern": ""}"#, InvalidArguments, &[r#"/pattern: "" is shorter than 1 character"#]),
        // The schema: missing fields.
        case("bash", r#"{}"#, InvalidArguments, &[r#"/command: "command" is a required property"#]),
        case("bash", "", InvalidArguments, &[r#"/command: "command" is a required property"#]),
        case("write_file", r#"{"path": "b.txt"}"#, InvalidArguments, &[r#"/content: "content" is a required property"#]),
        case("grep", r#"{}"#, InvalidArguments, &[r#"/pattern: "pattern" is a required property"#]),
        // The schema: unexpected fields, each named with the allowed ones.
        case("bash", r#"{"command": "ls", "sudo": true}"#, InvalidArguments, &[r#"/sudo: "sudo" is not expected (additional property; allowed: command, timeout_secs)"#]),
        case("list_files", r#"{"dir": "."}"#, InvalidArguments, &[r#"/dir: "dir" is not expected (additional property; allowed: max_results, path, pattern)"#]),
        case("grep", r#"{"pattern": "x", "regex": true}"#, InvalidArguments, &[r#"/regex: "regex" is not expected"#, "allowed: case_insensitive, glob, max_results, path, pattern"]),
        // The schema: several problems at once, all listed.
        case("bash", r#"{"cmd": "ls"}"#, InvalidArguments, &["(2 problems)", r#"/command: "command" is a required property"#, r#"/cmd: "cmd" is not expected"#]),
        case("read_file", r#"{"file": "a.txt"}"#, InvalidArguments, &["(2 problems)", r#"/path: "path" is a required property"#, r#"/file: "file" is not expected"#]),
        case("grep", r#"{"query": "x"}"#, InvalidArguments, &[r#"/pattern: "pattern" is a required property"#, r#"/query: "query" is not expected"#]),
        case("str_replace", r#"{"path": "a.txt", "old": "x", "new": "z"}"#, InvalidArguments, &["(4 problems)", r#"/old_string: "old_string" is a required property"#, r#"/new_string: "new_string" is a required property"#, r#"/old: "old" is not expected (additional property; allowed: new_string, old_string, path)"#, r#"/new: "new" is not expected"#, "Check the tool's schema"]),
        // Past the schema, the typed parse still guards: 5.0 is a JSON Schema
        // integer but not a Rust u64.
        case("bash", r#"{"command": "ls", "timeout_secs": 5.0}"#, InvalidArguments, &["field `timeout_secs`", "expected u64"]),
        // Valid arguments, and the tool fails.
        case("read_file", r#"{"path": "missing.txt"}"#, ExecutionFailed, &["`missing.txt` does not exist"]),
        case("read_file", r#"{"path": "../outside"}"#, SandboxDenied, &["`../outside` is outside the workspace"]),
        case("read_file", r#"{"path": "a.txt", "start_line": 9}"#, ExecutionFailed, &["the file has 3 lines"]),
        case("write_file", r#"{"path": "/etc/tack-test", "content": "x"}"#, SandboxDenied, &["`/etc/tack-test` is outside the workspace"]),
        case("str_replace", r#"{"path": "a.txt", "old_string": "x", "new_string": "z"}"#, ExecutionFailed, &["matches 2 times (lines 1, 3)"]),
        case("str_replace", r#"{"path": "a.txt", "old_string": "q", "new_string": "z"}"#, ExecutionFailed, &["`old_string` was not found", "0 matches"]),
        case("str_replace", r#"{"path": "a.txt", "old_string": "", "new_string": "z"}"#, ExecutionFailed, &["`old_string` is empty"]),
        case("list_files", r#"{"path": "../"}"#, SandboxDenied, &["`../` is outside the workspace"]),
        case("list_files", r#"{"path": "/etc"}"#, SandboxDenied, &["`/etc` is outside the workspace"]),
        case("list_files", r#"{"path": "nope"}"#, ExecutionFailed, &["`nope` does not exist"]),
        case("list_files", r#"{"pattern": "a["}"#, ExecutionFailed, &["invalid glob `a[`"]),
        case("grep", r#"{"pattern": "("}"#, ExecutionFailed, &["invalid regex `(`", "unclosed group"]),
        case("grep", r#"{"pattern": "x", "path": "../../etc"}"#, SandboxDenied, &["`../../etc` is outside the workspace"]),
        case("grep", r#"{"pattern": "x", "glob": "{a"}"#, ExecutionFailed, &["invalid glob `{a`"]),
        // Cut off by the output limit: not run at all.
        cut_off("bash", r#"{"command": "echo hi"}"#, &["`bash` call", "Re-issue it with complete arguments"]),
        cut_off("str_replace", r#"{"path": "a.txt", "old_str"#, &["`str_replace` call", "cut off"]),
        // The tool crashed.
        case("explode", "{}", Panicked, &["`explode` tool crashed (boom)"]),
    ]
};

#[tokio::test]
async fn malformed_calls_become_readable_errors() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "x\ny\nx\n").unwrap();
    let d = dispatcher(dir.path());
    assert!(CASES.len() >= 36, "{} cases", CASES.len());
    for case in CASES {
        let (tool, arguments) = (case.tool, case.arguments);
        let result = d.dispatch(&call(tool, arguments), case.cut_off).await;
        let error = match result {
            Err(error) => error,
            Ok(output) => panic!("{tool} {arguments}: expected {}, got {output:?}", case.kind),
        };
        assert_eq!(
            error.kind, case.kind,
            "{tool} {arguments}: {}",
            error.message
        );
        for words in case.words {
            assert!(
                error.message.contains(words),
                "{tool} {arguments}: message `{}` lacks `{words}`",
                error.message
            );
        }
    }
    // Nothing was written by the refused calls, and the dispatcher is still fine.
    assert!(!dir.path().join("b.txt").exists());
    let ok = d
        .dispatch(&call("bash", r#"{"command": "echo still here"}"#), false)
        .await;
    assert!(matches!(ok, Ok(ToolOutput::Command(out)) if out.stdout == "still here\n"));
}

#[tokio::test]
async fn schema_errors_list_at_most_five_problems() {
    let dir = tempfile::tempdir().unwrap();
    let d = dispatcher(dir.path());
    let arguments = r#"{"a": 1, "b": 2, "c": 3, "d": 4, "e": 5, "f": 6}"#;
    let error = d
        .dispatch(&call("bash", arguments), false)
        .await
        .unwrap_err();
    assert_eq!(error.kind, ToolErrorKind::InvalidArguments);
    let listed = error
        .message
        .lines()
        .filter(|l| l.starts_with("- /"))
        .count();
    assert_eq!(listed, 5, "{}", error.message);
    assert!(error.message.contains("(7 problems)"), "{}", error.message);
    assert!(
        error.message.contains("- … and 2 more"),
        "{}",
        error.message
    );
    assert!(
        error
            .message
            .ends_with("call it again with every field fixed.")
    );
}

struct BrokenSchemaTool;

#[async_trait]
impl Tool for BrokenSchemaTool {
    fn access(&self, _: &serde_json::Value) -> Vec<tack_protocol::ToolAccess> {
        Vec::new()
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "broken".to_string(),
            description: "its schema has a typo".to_string(),
            parameters: json!({"type": "object", "properties": {"x": {"type": "strng"}}}),
        }
    }

    async fn run(&self, _: serde_json::Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        unreachable!("never dispatched")
    }
}

#[test]
fn a_tool_with_a_broken_schema_is_refused_when_the_dispatcher_is_built() {
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(BrokenSchemaTool)];
    let error = Dispatcher::new(tools, context(std::path::Path::new("."))).unwrap_err();
    assert_eq!(error.tool, "broken");
    assert!(error.to_string().contains("`broken` tool"), "{error}");
}

#[test]
fn dispatchers_can_be_shared_across_trial_tasks() {
    fn shareable<T: Send + Sync>() {}
    shareable::<Dispatcher>();
}

#[test]
fn every_builtin_tool_has_a_valid_schema_and_unknown_names_are_refused() {
    let names: Vec<String> = BUILTIN_TOOLS.iter().map(|name| name.to_string()).collect();
    let ctx = context(std::path::Path::new("."));
    let d = Dispatcher::builtin(&names, ctx.clone()).unwrap();
    let offered: Vec<String> = d.specs().into_iter().map(|spec| spec.name).collect();
    assert_eq!(offered, names);
    let error = Dispatcher::builtin(&["find".to_string()], ctx).unwrap_err();
    assert!(matches!(error, DispatcherError::UnknownTool(_)));
    assert!(error.to_string().contains("unknown tool `find`"), "{error}");
    assert!(error.to_string().contains("list_files, grep"), "{error}");
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

#[tokio::test]
async fn write_todos_reads_the_list_back_and_touches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dispatcher(dir.path());
    let arguments = r#"{"todos": [
        {"content": "find the bug", "status": "completed"},
        {"content": "fix it", "status": "in_progress"}
    ]}"#;
    let todos = call("write_todos", arguments);
    let prepared = d.prepare(&todos, false).unwrap();
    // Nothing on the machine to judge: the permission engine sees only the tool.
    assert!(prepared.access.is_empty());
    let output = d.dispatch(&todos, false).await.unwrap();
    let ToolOutput::Text { text, .. } = output else {
        panic!("{output:?}")
    };
    assert_eq!(
        text,
        "Todo list updated: 1 completed, 1 in progress, 0 pending.\n[x] find the bug\n[~] fix it\n"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no file was added"
    );
}

/// A tool offered by name and description only (an MCP tool among many):
/// its schema still checks every call, and a call that does not fit is
/// shown the schema.
struct WithheldSchemaTool;

#[async_trait]
impl Tool for WithheldSchemaTool {
    fn access(&self, _: &serde_json::Value) -> Vec<tack_protocol::ToolAccess> {
        Vec::new()
    }

    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "srv__lookup".to_string(),
            description: "looks a thing up".to_string(),
            parameters: json!({"type": "object"}),
        }
    }

    fn full_parameters(&self) -> Option<serde_json::Value> {
        Some(json!({
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
            "additionalProperties": false
        }))
    }

    fn server(&self) -> Option<&str> {
        Some("srv")
    }

    async fn run(&self, args: serde_json::Value, _: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::Text {
            text: format!("found {}", args["key"]),
            truncated: false,
        })
    }
}

#[tokio::test]
async fn a_withheld_schema_still_checks_calls_and_is_shown_when_one_does_not_fit() {
    let dir = tempfile::tempdir().unwrap();
    let dispatcher =
        Dispatcher::new(vec![Arc::new(WithheldSchemaTool)], context(dir.path())).unwrap();
    assert_eq!(dispatcher.specs()[0].parameters, json!({"type": "object"}));
    assert_eq!(dispatcher.server_of("srv__lookup"), Some("srv"));
    assert_eq!(dispatcher.server_of("bash"), None);
    let wrong = dispatcher
        .dispatch(&call("srv__lookup", r#"{"name": "x"}"#), false)
        .await
        .unwrap_err();
    assert_eq!(wrong.kind, ToolErrorKind::InvalidArguments);
    assert!(wrong.message.contains("/key"), "{}", wrong.message);
    assert!(
        wrong
            .message
            .contains(r#"The tool's parameters, as a JSON Schema: {"#)
            && wrong.message.contains(r#""required":["key"]"#),
        "{}",
        wrong.message
    );
    let right = dispatcher
        .dispatch(&call("srv__lookup", r#"{"key": "x"}"#), false)
        .await
        .unwrap();
    assert_eq!(
        right,
        ToolOutput::Text {
            text: "found \"x\"".to_string(),
            truncated: false
        }
    );
}
