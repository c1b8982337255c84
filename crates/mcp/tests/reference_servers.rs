//! The MCP client against the protocol's reference servers from npm
//! (`.ci/run` installs them and sets `TACK_MCP_SERVERS` to their `.bin`
//! directory): tools listed and called over stdio inside the strict
//! sandbox and over streamable HTTP, a long-running call, calls that fail,
//! a hung server and a killed one restarted, the filesystem server kept to
//! the workspace.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tack_agent::{Tool, ToolContext, ToolOutput};
use tack_mcp::{McpServers, McpSetup};
use tack_protocol::{McpServerConfig, SandboxProfile, ToolAccess, ToolErrorKind, ToolHint};
use tack_sandbox::{Confinement, TestGate};

fn strict_sandbox() -> bool {
    match tack_sandbox::test_gate(SandboxProfile::Strict) {
        TestGate::Run => true,
        TestGate::Skip(why) => {
            eprintln!("skipped: {why}");
            false
        }
        TestGate::Fail(why) => panic!("{why}"),
    }
}

/// The servers' directory when both they and the strict sandbox are here.
fn servers_in_sandbox() -> Option<PathBuf> {
    tack_testkit::mcp_reference_servers().filter(|_| strict_sandbox())
}

fn setup(workspace: &Path) -> McpSetup {
    McpSetup {
        workspace: workspace.to_path_buf(),
        base_dir: workspace.to_path_buf(),
        env: Vec::new(),
        confinement: Arc::new(Confinement::for_profile(SandboxProfile::Strict, workspace)),
    }
}

fn ctx(workspace: &Path) -> ToolContext {
    ToolContext {
        workspace: workspace.to_path_buf(),
        env: Vec::new(),
        command_timeout: Duration::from_secs(10),
        output_limit: 16 * 1024,
        confinement: Arc::new(Confinement::off()),
        session: None,
        results_dir: None,
        skills: Default::default(),
        held_workspace: Default::default(),
    }
}

fn tool(servers: &McpServers, name: &str) -> Arc<dyn Tool> {
    servers
        .tools()
        .into_iter()
        .find(|t| t.spec().name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

fn text(output: ToolOutput) -> String {
    match output {
        ToolOutput::Text { text, .. } => text,
        other => panic!("expected text, got {other:?}"),
    }
}

fn everything(bin: &Path) -> McpServerConfig {
    let command = bin.join("mcp-server-everything");
    McpServerConfig::stdio("everything", command.to_str().unwrap(), &[])
}

#[tokio::test]
async fn everything_server_tools_are_listed_and_called_inside_the_sandbox() {
    let Some(bin) = servers_in_sandbox() else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let servers = McpServers::connect(&[everything(&bin)], &setup(ws.path()))
        .await
        .unwrap();
    let names: Vec<String> = servers.tools().iter().map(|t| t.spec().name).collect();
    assert!(names.contains(&"everything__echo".to_string()), "{names:?}");
    let echo = tool(&servers, "everything__echo");
    assert_eq!(echo.server(), Some("everything"));
    assert_eq!(
        echo.spec().parameters["properties"]["message"]["type"],
        "string"
    );
    assert_eq!(
        echo.access(&serde_json::json!({})),
        vec![ToolAccess::Hinted(ToolHint::ReadOnly)]
    );

    let said = echo
        .run(serde_json::json!({"message": "hello"}), &ctx(ws.path()))
        .await
        .unwrap();
    assert_eq!(text(said), "Echo: hello");
    let sum = tool(&servers, "everything__get-sum")
        .run(serde_json::json!({"a": 2, "b": 3}), &ctx(ws.path()))
        .await
        .unwrap();
    assert!(text(sum).contains('5'));
    let long = tool(&servers, "everything__trigger-long-running-operation")
        .run(
            serde_json::json!({"duration": 2, "steps": 4}),
            &ctx(ws.path()),
        )
        .await
        .unwrap();
    assert!(
        text(long).contains("Long running operation completed"),
        "the long-running call returns its result"
    );
    let image = tool(&servers, "everything__get-tiny-image")
        .run(serde_json::json!({}), &ctx(ws.path()))
        .await
        .unwrap();
    assert!(
        text(image).contains("[image image/png"),
        "images are described, not dumped"
    );
    // A server-side error (a resource that does not exist) is the call's
    // error, and the server stays up.
    let refused = tool(&servers, "everything__get-resource-reference")
        .run(
            serde_json::json!({"resourceType": "Text", "resourceId": -1}),
            &ctx(ws.path()),
        )
        .await
        .unwrap_err();
    assert_eq!(
        refused.kind,
        ToolErrorKind::ExecutionFailed,
        "{}",
        refused.message
    );
    assert_eq!(servers.servers()[0].restarts(), 0);
}

#[tokio::test]
async fn a_hung_server_times_out_and_a_killed_one_is_restarted() {
    let Some(bin) = servers_in_sandbox() else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let mut config = everything(&bin);
    config.call_timeout_secs = 1;
    let servers = McpServers::connect(&[config], &setup(ws.path()))
        .await
        .unwrap();
    let server = Arc::clone(&servers.servers()[0]);
    let long = tool(&servers, "everything__trigger-long-running-operation");
    let echo = tool(&servers, "everything__echo");

    let hung = long
        .run(
            serde_json::json!({"duration": 5, "steps": 5}),
            &ctx(ws.path()),
        )
        .await
        .unwrap_err();
    assert_eq!(hung.kind, ToolErrorKind::Timeout);
    assert!(hung.message.contains("restarted"), "{}", hung.message);
    let again = echo
        .run(serde_json::json!({"message": "back"}), &ctx(ws.path()))
        .await
        .unwrap();
    assert_eq!(text(again), "Echo: back");
    assert_eq!(server.restarts(), 1);
}

#[tokio::test]
async fn a_server_killed_during_a_call_fails_that_call_only() {
    let Some(bin) = servers_in_sandbox() else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let servers = McpServers::connect(&[everything(&bin)], &setup(ws.path()))
        .await
        .unwrap();
    let server = Arc::clone(&servers.servers()[0]);
    let pid = server
        .process_id()
        .await
        .expect("a stdio server has a process");
    let long = tool(&servers, "everything__trigger-long-running-operation");
    let workspace = ws.path().to_path_buf();
    let call = tokio::spawn(async move {
        long.run(
            serde_json::json!({"duration": 30, "steps": 30}),
            &ctx(&workspace),
        )
        .await
    });
    // Give the call time to reach the server, then kill its whole group.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let killed = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .status()
        .unwrap();
    assert!(killed.success());
    let failed = call.await.unwrap().unwrap_err();
    assert!(failed.message.contains("everything"), "{}", failed.message);
    assert!(failed.message.contains("restarted"), "{}", failed.message);

    let echo = tool(&servers, "everything__echo");
    let said = echo
        .run(serde_json::json!({"message": "again"}), &ctx(ws.path()))
        .await
        .unwrap();
    assert_eq!(text(said), "Echo: again");
    assert_eq!(server.restarts(), 1);
    assert_ne!(server.process_id().await, Some(pid));
}

#[tokio::test]
async fn the_filesystem_server_sees_only_the_workspace() {
    let Some(bin) = servers_in_sandbox() else {
        return;
    };
    let ws = tempfile::tempdir().unwrap();
    let root = ws.path().canonicalize().unwrap();
    std::fs::write(root.join("notes.txt"), "remember the milk\n").unwrap();
    let command = bin.join("mcp-server-filesystem");
    let config = McpServerConfig::stdio("fs", command.to_str().unwrap(), &["${WORKSPACE}"]);
    let servers = McpServers::connect(&[config], &setup(&root)).await.unwrap();
    let ctx = ctx(&root);

    let allowed = tool(&servers, "fs__list_allowed_directories")
        .run(serde_json::json!({}), &ctx)
        .await
        .unwrap();
    let allowed = text(allowed);
    assert!(allowed.contains(root.to_str().unwrap()), "{allowed}");
    assert_eq!(
        allowed.lines().filter(|l| l.starts_with('/')).count(),
        1,
        "{allowed}"
    );

    let read = tool(&servers, "fs__read_text_file");
    assert_eq!(
        read.access(&serde_json::json!({})),
        vec![ToolAccess::Hinted(ToolHint::ReadOnly)]
    );
    let notes = read
        .run(serde_json::json!({"path": root.join("notes.txt")}), &ctx)
        .await
        .unwrap();
    assert_eq!(text(notes).trim(), "remember the milk");
    let outside = read
        .run(serde_json::json!({"path": "/etc/hostname"}), &ctx)
        .await
        .unwrap_err();
    assert!(outside.message.contains("denied"), "{}", outside.message);
    let missing = read
        .run(serde_json::json!({"path": root.join("nope.txt")}), &ctx)
        .await
        .unwrap_err();
    assert_eq!(missing.kind, ToolErrorKind::ExecutionFailed);

    let write = tool(&servers, "fs__write_file");
    assert_eq!(
        write.access(&serde_json::json!({})),
        vec![ToolAccess::Hinted(ToolHint::Destructive)]
    );
    write
        .run(
            serde_json::json!({"path": root.join("new.txt"), "content": "made by mcp"}),
            &ctx,
        )
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(root.join("new.txt")).unwrap(),
        "made by mcp"
    );
}

/// The everything server in its streamable-HTTP mode, on a free port,
/// stopped when dropped.
struct HttpServer {
    child: std::process::Child,
    port: u16,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start_http_server(bin: &Path) -> HttpServer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = std::process::Command::new(bin.join("mcp-server-everything"))
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    for _ in 0..200 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return HttpServer { child, port };
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the streamable-HTTP server did not listen on port {port}");
}

#[tokio::test]
async fn streamable_http_servers_are_called_too() {
    let Some(bin) = tack_testkit::mcp_reference_servers() else {
        return;
    };
    let http = start_http_server(&bin);
    let ws = tempfile::tempdir().unwrap();
    let mut config =
        McpServerConfig::http("remote", &format!("http://127.0.0.1:{}/mcp", http.port));
    config
        .headers
        .insert("X-Trace".to_string(), "tack-test".to_string());
    let servers = McpServers::connect(&[config], &setup(ws.path()))
        .await
        .unwrap();
    let said = tool(&servers, "remote__echo")
        .run(serde_json::json!({"message": "over http"}), &ctx(ws.path()))
        .await
        .unwrap();
    assert_eq!(text(said), "Echo: over http");
    assert_eq!(servers.servers()[0].process_id().await, None);
}

#[tokio::test]
async fn a_server_that_cannot_start_names_itself_and_the_fix() {
    let ws = tempfile::tempdir().unwrap();
    let config = McpServerConfig::stdio("ghost", "/nonexistent/mcp-server", &[]);
    let setup = McpSetup {
        confinement: Arc::new(Confinement::off()),
        ..setup(ws.path())
    };
    let error = McpServers::connect(&[config], &setup).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("`ghost`"), "{message}");
    assert!(message.contains("/nonexistent/mcp-server"), "{message}");
    // A program that is not an MCP server fails the handshake, with what
    // it printed.
    let config = McpServerConfig::stdio("liar", "bash", &["-c", "echo not json; echo oops >&2"]);
    let error = McpServers::connect(&[config], &setup).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("`liar`"), "{message}");
}

/// An MCP server that shakes hands and lists one tool properly, then
/// answers every call with garbage.
const GARBAGE_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method = msg.get("method")
    if method == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "garbage", "version": "0"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "speak", "inputSchema": {"type": "object"}}]}
    else:
        print("this is not JSON-RPC {{{", flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

#[tokio::test]
async fn a_server_answering_garbage_costs_the_call_and_is_restarted() {
    if !strict_sandbox() {
        return;
    }
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("server.py"), GARBAGE_SERVER).unwrap();
    let mut config = McpServerConfig::stdio("garbage", "python3", &["${WORKSPACE}/server.py"]);
    config.call_timeout_secs = 1;
    let servers = McpServers::connect(&[config], &setup(ws.path()))
        .await
        .unwrap();
    let speak = tool(&servers, "garbage__speak");
    for round in 1..=2 {
        let error = speak
            .run(serde_json::json!({}), &ctx(ws.path()))
            .await
            .unwrap_err();
        assert!(error.message.contains("restarted"), "{}", error.message);
        assert_eq!(servers.servers()[0].restarts(), round - 1);
    }
}

/// A server whose tool names clash once made safe for the providers.
const CLASHING_SERVER: &str = r#"
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "clash", "version": "0"}}
    else:
        schema = {"type": "object"}
        result = {"tools": [{"name": "read.file", "inputSchema": schema},
                            {"name": "read_file", "inputSchema": schema}]}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
"#;

#[tokio::test]
async fn tool_names_that_clash_once_made_safe_are_refused_with_the_fix() {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("server.py"), CLASHING_SERVER).unwrap();
    let config = McpServerConfig::stdio("clash", "python3", &["${WORKSPACE}/server.py"]);
    let setup = McpSetup {
        confinement: Arc::new(Confinement::off()),
        ..setup(ws.path())
    };
    let error = McpServers::connect(&[config], &setup).await.unwrap_err();
    let message = error.to_string();
    assert!(message.contains("`read.file` and `read_file`"), "{message}");
    assert!(
        message.contains("clash__read_file") && message.contains("tools = ["),
        "{message}"
    );
}
