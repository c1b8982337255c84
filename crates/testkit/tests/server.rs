//! The servers over plain HTTP/1.1 from a raw socket: what they record,
//! the wire shapes tests elsewhere rely on, the background mode for
//! blocking callers, and the `tack-testkit-server` binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};

use serde_json::{Value, json};
use tack_testkit::{
    AnthropicServer, Dialect, MockServer, OpenAiServer, ScriptedResponse, ScriptedUsage,
    ServerOptions, TEST_API_KEY,
};

/// One request; the server closes the connection after its answer.
fn post(addr: SocketAddr, path: &str, headers: &[(&str, &str)], body: &Value) -> (u16, String) {
    let body = body.to_string();
    let mut stream = TcpStream::connect(addr).unwrap();
    let mut request = format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let body = answer.split_once("\r\n\r\n").unwrap().1.to_string();
    (status, body)
}

fn request(stream: bool) -> Value {
    json!({"model": "m", "stream": stream, "messages": []})
}

#[test]
fn anthropic_writes_input_tokens_without_the_cached_ones() {
    let usage = ScriptedUsage {
        input: 1_250,
        output: 40,
        cached: 1_000,
        cache_write: 200,
        reasoning: 0,
    };
    let script = vec![ScriptedResponse::text("hi").with_usage(usage)];
    let server =
        MockServer::start_background(Dialect::Anthropic, script, ServerOptions::default()).unwrap();
    let (status, body) = post(server.addr(), "/v1/messages", &[], &request(false));
    assert_eq!(status, 200);
    let body: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        body["usage"],
        json!({"input_tokens": 50, "cache_read_input_tokens": 1_000,
               "cache_creation_input_tokens": 200, "output_tokens": 40})
    );
    assert_eq!(body["content"], json!([{"type": "text", "text": "hi"}]));
    assert_eq!(body["stop_reason"], "end_turn");
}

#[test]
fn requests_are_recorded_without_key_values() {
    let options = ServerOptions::default();
    let script = vec![ScriptedResponse::text("a"), ScriptedResponse::text("b")];
    let server = MockServer::start_background(Dialect::OpenAi, script, options).unwrap();
    let bearer = format!("Bearer {TEST_API_KEY}");
    post(
        server.addr(),
        "/v1/chat/completions",
        &[("authorization", &bearer)],
        &request(false),
    );
    post(
        server.addr(),
        "/v1/chat/completions",
        &[
            ("authorization", "Bearer wrong"),
            ("x-api-key", TEST_API_KEY),
        ],
        &request(true),
    );
    let requests = server.requests();
    assert!(requests[0].auth_present && requests[0].auth_matches);
    assert!(requests[1].auth_present && !requests[1].auth_matches);
    assert_eq!(requests[1].other_key_headers, ["x-api-key"]);
    for request in &requests {
        assert!(!request.headers.contains_key("authorization"));
        assert!(!request.headers.contains_key("x-api-key"));
        assert_eq!(request.headers["content-type"], "application/json");
    }
    assert_eq!(requests[1].body["stream"], true);
    assert_eq!(server.remaining(), 0);
}

#[test]
fn a_wrong_path_is_404_and_an_exhausted_script_says_so() {
    let server =
        MockServer::start_background(Dialect::OpenAi, vec![], ServerOptions::default()).unwrap();
    let (status, _) = post(server.addr(), "/v1/completions", &[], &request(false));
    assert_eq!(status, 404);
    let (status, body) = post(server.addr(), "/v1/chat/completions", &[], &request(false));
    assert_eq!(status, 400);
    assert!(body.contains("no answer left for request 2"), "{body}");
    server.push(ScriptedResponse::text("late addition"));
    let (status, body) = post(server.addr(), "/v1/chat/completions", &[], &request(false));
    assert_eq!(status, 200);
    assert!(body.contains("late addition"));
}

#[tokio::test]
async fn streams_are_event_streams_in_each_dialect() {
    let openai = OpenAiServer::start(vec![ScriptedResponse::text("hello")])
        .await
        .unwrap();
    let anthropic = AnthropicServer::start(vec![ScriptedResponse::text("hello")])
        .await
        .unwrap();
    assert!(openai.base_url().ends_with("/v1"));
    assert!(!anthropic.base_url().ends_with("/v1"));
    let (a, b) = (openai.addr(), anthropic.addr());
    let (openai_body, anthropic_body) = tokio::task::spawn_blocking(move || {
        let (_, openai) = post(a, "/v1/chat/completions", &[], &request(true));
        let (_, anthropic) = post(b, "/v1/messages", &[], &request(true));
        (openai, anthropic)
    })
    .await
    .unwrap();
    assert!(openai_body.contains("\"object\":\"chat.completion.chunk\""));
    assert!(openai_body.contains("data: [DONE]"));
    for event in [
        "message_start",
        "content_block_delta",
        "message_delta",
        "message_stop",
    ] {
        assert!(
            anthropic_body.contains(&format!("event: {event}\n")),
            "{event}"
        );
    }
}

#[test]
fn the_binary_serves_a_script_file() {
    let dir = std::env::temp_dir().join(format!("tack-testkit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let script = dir.join("script.json");
    std::fs::write(
        &script,
        r#"[{"type": "status", "status": 529}, {"type": "reply", "text": "ok"}]"#,
    )
    .unwrap();
    let record = dir.join("requests.jsonl");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tack-testkit-server"))
        .args(["--provider", "anthropic", "--script"])
        .arg(&script)
        .arg("--record")
        .arg(&record)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: SocketAddr = line
        .trim()
        .strip_prefix("http://")
        .unwrap()
        .parse()
        .unwrap();
    let (first, body) = post(addr, "/v1/messages", &[], &request(false));
    let (second, _) = post(
        addr,
        "/v1/messages",
        &[("x-api-key", "sk-secret")],
        &request(true),
    );
    child.kill().unwrap();
    child.wait().unwrap();
    let recorded = std::fs::read_to_string(&record).unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let lines: Vec<Value> = recorded
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{recorded}");
    assert_eq!(lines[1]["body"]["stream"], true);
    assert_eq!(lines[1]["auth_present"], true);
    assert!(!recorded.contains("sk-secret"));
    assert_eq!((first, second), (529, 200));
    assert!(body.contains("overloaded_error"), "{body}");

    let usage = Command::new(env!("CARGO_BIN_EXE_tack-testkit-server"))
        .output()
        .unwrap();
    assert_eq!(usage.status.code(), Some(2));
}

/// A conversation with `results` tool results, offering tack's `bash`.
fn conversation(results: usize) -> Value {
    let mut messages = vec![json!({"role": "user", "content": "go"})];
    for step in 1..=results {
        messages.push(json!({"role": "assistant", "tool_calls": [{"id": format!("call_{step}")}]}));
        messages
            .push(json!({"role": "tool", "tool_call_id": format!("call_{step}"), "content": "ok"}));
    }
    json!({
        "model": "m",
        "messages": messages,
        "tools": [{"type": "function", "function": {"name": "bash", "parameters": {
            "type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}],
    })
}

#[test]
fn the_binary_serves_a_tool_loop_to_concurrent_conversations() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tack-testkit-server"))
        .args(["--provider", "openai", "--tool-loop", "2"])
        .args(["--argument", "echo {step}", "--latency-ms", "30"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: SocketAddr = line
        .trim()
        .strip_prefix("http://")
        .unwrap()
        .trim_end_matches("/v1")
        .parse()
        .unwrap();
    // The server keeps connections alive; these ask it to close.
    let close = [("connection", "close")];
    let answers: Vec<(u16, String)> = std::thread::scope(|scope| {
        let handles: Vec<_> = [0, 1, 2, 0]
            .map(|results| {
                scope.spawn(move || {
                    post(addr, "/v1/chat/completions", &close, &conversation(results))
                })
            })
            .into_iter()
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let stats = {
        let mut stream = TcpStream::connect(addr).unwrap();
        write!(
            stream,
            "GET /tack-testkit/stats HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        let body = answer.split_once("\r\n\r\n").unwrap().1.to_string();
        serde_json::from_str::<Value>(&body).unwrap()
    };
    let (status, refused) = post(
        addr,
        "/v1/chat/completions",
        &close,
        &json!({"messages": []}),
    );
    child.kill().unwrap();
    child.wait().unwrap();

    let bodies: Vec<Value> = answers
        .iter()
        .map(|(status, body)| {
            assert_eq!(*status, 200, "{body}");
            serde_json::from_str(body).unwrap()
        })
        .collect();
    let call = |body: &Value| body["choices"][0]["message"]["tool_calls"][0]["function"].clone();
    assert_eq!(
        call(&bodies[0]),
        json!({"name": "bash", "arguments": r#"{"command":"echo 1"}"#})
    );
    assert_eq!(call(&bodies[1])["arguments"], r#"{"command":"echo 2"}"#);
    assert_eq!(bodies[2]["choices"][0]["message"]["content"], "done");
    assert_eq!(bodies[2]["choices"][0]["finish_reason"], "stop");
    assert_eq!(bodies[3], {
        let mut same = bodies[0].clone();
        same["id"] = bodies[3]["id"].clone();
        same
    });
    assert!(bodies[0]["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    // Four requests, each with 30 ms of latency that is not the server's time.
    assert_eq!(stats["requests"], 4);
    assert!(stats["busy_us"].as_u64().unwrap() < 4 * 30_000, "{stats}");
    assert_eq!(status, 400);
    assert!(refused.contains("offers []"), "{refused}");
}
