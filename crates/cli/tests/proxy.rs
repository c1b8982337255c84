//! `tack proxy` end to end: the official `openai` and `anthropic` Python
//! SDKs talk to the testkit's servers through the `tack` binary; the run it
//! writes has every call with the upstream's tokens, and no file of it
//! holds the key. CI installs the SDKs (.ci/run) and sets TACK_REQUIRE_SDKS;
//! elsewhere the test says it skipped when they are missing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::Command;

use arrow_array::{Array, RecordBatch, StringArray, UInt64Array};
use serde_json::Value;
use tack_testkit::{Dialect, MockServer, ScriptedResponse, ScriptedUsage, ServerOptions};

const KEY: &str = "sk-test-SECRET123";

const SCRIPT: &str = r#"
import json, sys
import anthropic, openai

mode, base = sys.argv[1], sys.argv[2]
KEY = "sk-test-SECRET123"
ask = [{"role": "user", "content": "say something"}]
seen = []
if mode == "openai":
    client = openai.OpenAI(base_url=base + "/v1", api_key=KEY, max_retries=0)
    r = client.chat.completions.create(model="gpt-4o", messages=ask)
    seen.append([r.choices[0].message.content, r.usage.prompt_tokens, r.usage.completion_tokens])
    text, usage = "", None
    for chunk in client.chat.completions.create(
        model="gpt-4o", messages=ask, stream=True, stream_options={"include_usage": True}
    ):
        if chunk.choices and chunk.choices[0].delta.content:
            text += chunk.choices[0].delta.content
        if chunk.usage:
            usage = chunk.usage
    seen.append([text, usage.prompt_tokens, usage.completion_tokens])
    r = client.responses.create(model="gpt-4o", instructions="be brief", input="say something")
    seen.append([r.output_text, r.usage.input_tokens, r.usage.output_tokens])
    text, usage = "", None
    for event in client.responses.create(model="gpt-4o", input=ask, stream=True):
        if event.type == "response.output_text.delta":
            text += event.delta
        elif event.type == "response.completed":
            usage = event.response.usage
    seen.append([text, usage.input_tokens, usage.output_tokens])
else:
    client = anthropic.Anthropic(base_url=base, api_key=KEY, max_retries=0)
    model = "claude-sonnet-4-20250514"
    r = client.messages.create(model=model, max_tokens=100, system="be brief", messages=ask)
    seen.append([r.content[0].text, r.usage.input_tokens, r.usage.output_tokens])
    with client.messages.stream(model=model, max_tokens=100, messages=ask) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    seen.append([text, final.usage.input_tokens, final.usage.output_tokens])
print(json.dumps(seen))
"#;

fn usage(n: u64, cached: u64) -> ScriptedUsage {
    ScriptedUsage {
        input: 100 * n + 7,
        output: 10 * n + 3,
        cached,
        ..ScriptedUsage::default()
    }
}

/// A scripted upstream expecting the test's key; one reply per call, each
/// with its own text and usage.
fn upstream(dialect: Dialect, usages: &[ScriptedUsage]) -> MockServer {
    let script = usages
        .iter()
        .enumerate()
        .map(|(n, usage)| ScriptedResponse::text(format!("answer number {n}")).with_usage(*usage))
        .collect();
    let options = ServerOptions {
        expected_key: KEY.to_string(),
        ..ServerOptions::default()
    };
    MockServer::start_background(dialect, script, options).unwrap()
}

fn strings(batch: &RecordBatch, column: &str) -> Vec<Option<String>> {
    let array = batch.column_by_name(column).unwrap();
    let array = array.as_any().downcast_ref::<StringArray>().unwrap();
    (0..array.len())
        .map(|i| (!array.is_null(i)).then(|| array.value(i).to_string()))
        .collect()
}

fn numbers(batch: &RecordBatch, column: &str) -> Vec<u64> {
    let array = batch.column_by_name(column).unwrap();
    let array = array.as_any().downcast_ref::<UInt64Array>().unwrap();
    (0..array.len()).map(|i| array.value(i)).collect()
}

/// (provider, status, input, output, cache read) of each model call, in
/// span order.
fn recorded_calls(run: &Path) -> Vec<(String, String, u64, u64, u64)> {
    let mut calls = Vec::new();
    for batch in tack_trace::read_table(run, "spans").unwrap() {
        let kinds = strings(&batch, "kind");
        let providers = strings(&batch, "gen_ai_provider_name");
        let statuses = strings(&batch, "status");
        let input = numbers(&batch, "gen_ai_usage_input_tokens");
        let output = numbers(&batch, "gen_ai_usage_output_tokens");
        let cached = numbers(&batch, "gen_ai_usage_cache_read_input_tokens");
        for i in 0..batch.num_rows() {
            if kinds[i].as_deref() == Some("model_call") {
                let provider = providers[i].clone().unwrap_or_default();
                let status = statuses[i].clone().unwrap_or_default();
                calls.push((provider, status, input[i], output[i], cached[i]));
            }
        }
    }
    calls
}

/// Every file under `dir`, raw, and every text value of the run's tables
/// (Parquet pages are compressed, so the raw bytes alone prove little).
fn assert_key_nowhere(dir: &Path, runs: &[&Path]) {
    let mut files = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            pending.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
            continue;
        }
        files += 1;
        let bytes = std::fs::read(&path).unwrap();
        let found = bytes.windows(KEY.len()).any(|w| w == KEY.as_bytes())
            || bytes.windows(9).any(|w| w == b"SECRET123");
        assert!(!found, "the key is in {}", path.display());
    }
    assert!(files >= 4, "only {files} files under {}", dir.display());
    for (run, table) in runs
        .iter()
        .flat_map(|run| ["trials", "spans", "messages"].map(|table| (run, table)))
    {
        for batch in tack_trace::read_table(run, table).unwrap() {
            for (field, column) in batch.schema().fields().iter().zip(batch.columns()) {
                if let Some(text) = column.as_any().downcast_ref::<StringArray>() {
                    for value in text.iter().flatten() {
                        assert!(!value.contains("SECRET123"), "{table}.{}", field.name());
                    }
                }
            }
        }
    }
}

/// Runs the SDK script against a proxy in front of `upstream`, stops the
/// proxy with SIGTERM, and returns what the SDKs saw and the run.
fn session(
    python: &str,
    mode: &str,
    upstream: &MockServer,
    traces: &Path,
) -> (Vec<Value>, PathBuf) {
    let (mut child, mut stdout, url, run) =
        common::start_proxy(&format!("http://{}", upstream.addr()), traces);
    let output = Command::new(python)
        .args(["-c", SCRIPT, mode, &url])
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("ANTHROPIC_BASE_URL")
        .output()
        .unwrap();
    let stopped = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let status = child.wait().unwrap();
    assert!(
        output.status.success(),
        "the {mode} script failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(status.success(), "tack proxy exited with {status}");
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let finished: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(finished["type"], "proxy_finished");
    let seen: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(finished["calls"], seen.len());
    assert_eq!(finished["failed_calls"], 0);
    // The key went on, in the header the SDK chose (recent anthropic SDKs
    // send `authorization`, which the testkit records only by name).
    for request in upstream.requests() {
        let forwarded = request.auth_matches || !request.other_key_headers.is_empty();
        assert!(
            forwarded,
            "{} came without a key: {request:?}",
            request.path
        );
    }
    (seen, run)
}

#[test]
fn the_openai_and_anthropic_sdks_are_recorded_through_the_proxy() {
    let Some(python) = common::sdk_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");

    let openai: Vec<_> = (1..=4).map(|n| usage(n, 0)).collect();
    let server = upstream(Dialect::OpenAi, &openai);
    let (seen, openai_run) = session(&python, "openai", &server, &traces);
    let run = openai_run.clone();
    let paths: Vec<_> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(
        paths,
        [
            "/v1/chat/completions",
            "/v1/chat/completions",
            "/v1/responses",
            "/v1/responses"
        ]
    );
    for (n, (seen, usage)) in seen.iter().zip(&openai).enumerate() {
        assert_eq!(seen[0], format!("answer number {n}"), "call {n}");
        assert_eq!(
            (seen[1].as_u64(), seen[2].as_u64()),
            (Some(usage.input), Some(usage.output))
        );
    }
    let expected: Vec<_> = openai
        .iter()
        .map(|u| ("openai".to_string(), "ok".to_string(), u.input, u.output, 0))
        .collect();
    assert_eq!(recorded_calls(&run), expected);
    let shown = common::tack(&["show", run.to_str().unwrap(), "proxy--proxy--0"]);
    let stderr = String::from_utf8_lossy(&shown.stderr);
    assert!(shown.status.success(), "{stderr}");
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(shown.contains("answer number 3"), "{shown}");
    let report = common::tack(&["report", run.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&report.stderr);
    assert!(report.status.success(), "{stderr}");

    let anthropic = [usage(5, 40), usage(6, 0)];
    let server = upstream(Dialect::Anthropic, &anthropic);
    let (seen, run) = session(&python, "anthropic", &server, &traces);
    for (n, (seen, usage)) in seen.iter().zip(&anthropic).enumerate() {
        assert_eq!(seen[0], format!("answer number {n}"));
        // The API leaves cached tokens out of input_tokens; tack counts them in.
        let reported = usage.input - usage.cached;
        assert_eq!(
            (seen[1].as_u64(), seen[2].as_u64()),
            (Some(reported), Some(usage.output))
        );
    }
    let expected: Vec<_> = anthropic
        .iter()
        .map(|u| {
            (
                "anthropic".to_string(),
                "ok".to_string(),
                u.input,
                u.output,
                u.cached,
            )
        })
        .collect();
    assert_eq!(recorded_calls(&run), expected);
    eprintln!(
        "recorded {} openai and {} anthropic calls through the SDKs",
        openai.len(),
        anthropic.len()
    );
    assert_key_nowhere(&traces, &[&openai_run, &run]);
}

mod common;
