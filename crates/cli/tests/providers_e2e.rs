//! A suite run against an OpenAI-compatible server on loopback (the
//! testkit's, speaking the real wire format): provider, model, tokens, cost
//! and retries land in the trace, and the API key lands nowhere.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use arrow_array::{Array, Float64Array, StringArray, UInt32Array, UInt64Array};
use serde_json::{Value, json};
use tack_testkit::{Dialect, MockServer, ScriptedCall, ScriptedResponse, ServerOptions};

const PLANTED_KEY: &str = "sk-test-PLANTED-key-4242";

/// A one-task suite whose only variant talks to `base_url`.
fn suite(dir: &Path, base_url: &str) -> PathBuf {
    let root = dir.join("suite");
    let task = common::repo().join("suites/demo/tasks/total-missing-file");
    copy(&task, &root.join("tasks/total-missing-file"));
    let toml = format!(
        "[suite]\nname = \"providers\"\n\n[[variants]]\nname = \"local-openai\"\nmodel = \"openai:gpt-4o-mini\"\n\
         [variants.provider]\nbase_url = \"{base_url}\"\napi_key_env = \"TACK_E2E_KEY\"\nrequests_per_minute = 600\n"
    );
    std::fs::write(root.join("suite.toml"), toml).unwrap();
    root
}

fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

/// The task's reference fix as a str_replace call, so the scripted model
/// solves it for real through the harness.
fn fix_call() -> ScriptedCall {
    let text = std::fs::read_to_string(
        common::repo().join("suites/demo/tasks/total-missing-file/task.toml"),
    )
    .unwrap();
    let task: toml::Table = toml::from_str(&text).unwrap();
    let edit = &task["solution"]["edits"][0];
    let arguments = json!({
        "path": edit["path"].as_str().unwrap(),
        "old_string": edit["old"].as_str().unwrap(),
        "new_string": edit["new"].as_str().unwrap(),
    });
    ScriptedCall::new("call_fix", "str_replace", arguments.to_string())
}

#[test]
fn a_run_against_a_loopback_openai_server_records_provider_tokens_cost_and_retries() {
    let options = ServerOptions {
        expected_key: PLANTED_KEY.to_string(),
        ..ServerOptions::default()
    };
    let mut answer = ScriptedResponse::tool_calls(vec![fix_call()]);
    if let ScriptedResponse::Reply(reply) = &mut answer {
        reply.usage.input = 1200;
        reply.usage.output = 80;
        reply.usage.cached = 1000;
    }
    let script = vec![
        ScriptedResponse::rate_limited(1),
        answer,
        ScriptedResponse::text("Fixed: missing files now exit 1."),
    ];
    let server = MockServer::start_background(Dialect::OpenAi, script, options).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let suite = suite(dir.path(), &server.base_url());
    let (traces, reports) = (dir.path().join("traces"), dir.path().join("reports"));
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args([
            "run",
            suite.to_str().unwrap(),
            "--jobs",
            "1",
            "--json",
            "--traces",
        ])
        .arg(&traces)
        .arg("--reports")
        .arg(&reports)
        .env("TACK_E2E_KEY", PLANTED_KEY)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["run"]["trials"][0]["outcome"], "passed");
    assert!(
        server.requests().iter().all(|r| r.auth_matches),
        "the key was not sent as expected"
    );

    let run_dir = PathBuf::from(json["run"]["run_dir"].as_str().unwrap());
    let mut calls = Vec::new();
    for batch in tack_trace::read_table(&run_dir, "spans").unwrap() {
        let kind = common::column::<StringArray>(&batch, "kind");
        let provider = common::column::<StringArray>(&batch, "gen_ai_provider_name");
        let model = common::column::<StringArray>(&batch, "gen_ai_request_model");
        let input = common::column::<UInt64Array>(&batch, "gen_ai_usage_input_tokens");
        let cached = common::column::<UInt64Array>(&batch, "gen_ai_usage_cache_read_input_tokens");
        let cost = common::column::<Float64Array>(&batch, "cost_usd");
        let attempt = common::column::<UInt32Array>(&batch, "attempt");
        let wait = common::column::<UInt64Array>(&batch, "retry_wait_ms");
        let status = common::column::<StringArray>(&batch, "status");
        for i in (0..batch.num_rows()).filter(|i| kind.value(*i) == "model_call") {
            calls.push((
                provider.value(i).to_string(),
                model.value(i).to_string(),
                status.value(i).to_string(),
                attempt.value(i),
                wait.value(i),
                input.value(i),
                cached.value(i),
                (!cost.is_null(i)).then(|| cost.value(i)),
            ));
        }
    }
    assert_eq!(calls.len(), 3, "{calls:?}");
    assert!(
        calls
            .iter()
            .all(|c| c.0 == "openai" && c.1 == "gpt-4o-mini")
    );
    // The 429, then the same turn again after the server's Retry-After.
    assert_eq!((calls[0].2.as_str(), calls[0].3), ("error", 1));
    assert_eq!(
        (calls[1].2.as_str(), calls[1].3, calls[1].4),
        ("ok", 2, 1000)
    );
    assert_eq!((calls[1].5, calls[1].6), (1200, 1000));
    let cost = calls[1].7.expect("gpt-4o-mini is in the price table");
    assert!(cost > 0.0 && cost < 0.01, "{cost}");
    let trial = &tack_trace::read_table(&run_dir, "trials").unwrap()[0];
    assert_eq!(common::column::<UInt32Array>(trial, "retries").value(0), 1);

    // The key is nowhere in what tack wrote.
    let mut written = Vec::new();
    common::files_below(&traces, &mut written);
    common::files_below(&reports, &mut written);
    assert!(written.len() >= 5, "{written:?}");
    for file in written {
        let bytes = std::fs::read(&file).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(PLANTED_KEY),
            "{} holds the API key",
            file.display()
        );
    }
}

/// A provider that is down for a trial's first attempt — 503 to both of
/// its call attempts (`model_attempts = 2`) — and then answers with the
/// task's fix; and the suite that talks to it.
fn outage(dir: &Path) -> (MockServer, PathBuf) {
    let options = ServerOptions {
        port: 0,
        expected_key: PLANTED_KEY.to_string(),
        record_to: None,
    };
    let script = vec![
        ScriptedResponse::status(503),
        ScriptedResponse::status(503),
        ScriptedResponse::tool_calls(vec![fix_call()]),
        ScriptedResponse::text("Fixed: missing files now exit 1."),
    ];
    let server = MockServer::start_background(Dialect::OpenAi, script, options).unwrap();
    let suite = suite(dir, &server.base_url());
    let toml = std::fs::read_to_string(suite.join("suite.toml")).unwrap();
    std::fs::write(
        suite.join("suite.toml"),
        format!("{toml}[variants.harness]\nmodel_attempts = 2\n"),
    )
    .unwrap();
    (server, suite)
}

#[test]
fn a_provider_outage_is_an_infra_error_and_infra_retries_run_the_trial_again() {
    // The first attempt meets the outage; the trial's second attempt finds
    // the provider back.
    let dir = tempfile::tempdir().unwrap();
    let (_server, suite) = outage(dir.path());
    let traces = dir.path().join("traces");
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["run", suite.to_str().unwrap(), "--json", "--no-report"])
        .args(["--infra-retries", "1", "--traces"])
        .arg(&traces)
        .env("TACK_E2E_KEY", PLANTED_KEY)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let trials = json["run"]["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 1, "{json}");
    assert_eq!(trials[0]["outcome"], "passed");
    assert_eq!(trials[0]["attempt"], 1);

    let run_dir = PathBuf::from(json["run"]["run_dir"].as_str().unwrap());
    let mut recorded = tack_trace::recorded_trials(&run_dir).unwrap();
    recorded.sort_by_key(|t| t.attempt);
    let seen: Vec<(&str, u32, &str)> = recorded
        .iter()
        .map(|t| (t.trial_id.as_str(), t.attempt, t.outcome.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("local-openai--total-missing-file--0", 0, "infra_error"),
            ("local-openai--total-missing-file--0--attempt1", 1, "passed"),
        ]
    );
    let trials = &tack_trace::read_table(&run_dir, "trials").unwrap()[0];
    let stops = common::column::<StringArray>(trials, "stop_reason");
    let stops: BTreeSet<&str> = (0..stops.len()).map(|i| stops.value(i)).collect();
    assert!(stops.contains("provider_unavailable"), "{stops:?}");
}

#[test]
fn a_model_that_keeps_failing_makes_tack_exec_exit_5() {
    let script = (0..4).map(|_| ScriptedResponse::status(503)).collect();
    let server =
        MockServer::start_background(Dialect::OpenAi, script, ServerOptions::default()).unwrap();
    let workspace = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args([
            "exec",
            "say hi",
            "--json",
            "--model",
            "openai:gpt-4o-mini",
            "--base-url",
        ])
        .arg(server.base_url())
        .arg("--workspace")
        .arg(workspace.path())
        .env("API_KEY", tack_testkit::TEST_API_KEY)
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let last: Value = serde_json::from_str(
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .last()
            .unwrap(),
    )
    .unwrap();
    // A provider down through every retry is an outage, not the model's
    // doing: infra_error in the trace, exit 5 for someone running one task.
    assert_eq!(last["event"]["outcome"], "infra_error");
    assert_eq!(last["event"]["stop_reason"], "provider_unavailable");
    assert_eq!(last["event"]["retries"], 3);
}

/// A provider outage staged through a whole run leaves its trial in
/// `infra_error`; `--resume --rerun infra_error` once the provider is back
/// runs it again as a new attempt, which passes; both attempts stay in the
/// traces and the report counts the latest.
#[test]
fn a_rerun_after_a_provider_outage_runs_the_infra_errors_again() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, suite) = outage(dir.path());
    let traces = dir.path().join("traces");
    let run = |args: &[&str]| -> Value {
        let output = Command::new(env!("CARGO_BIN_EXE_tack"))
            .args(args)
            .args(["--json", "--no-report"])
            .env("TACK_E2E_KEY", PLANTED_KEY)
            .output()
            .unwrap();
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)))
    };
    let first = run(&[
        "run",
        suite.to_str().unwrap(),
        "--traces",
        traces.to_str().unwrap(),
    ]);
    assert_eq!(
        first["run"]["trials"][0]["outcome"], "infra_error",
        "{first}"
    );
    let run_dir = first["run"]["run_dir"].as_str().unwrap().to_string();

    // Without --rerun, a resume keeps what finished, infra errors included.
    let kept = run(&["run", "--resume", &run_dir]);
    assert_eq!(kept["run"]["trials"].as_array().unwrap().len(), 0, "{kept}");

    let again = run(&["run", "--resume", &run_dir, "--rerun", "infra_error"]);
    assert_eq!(again["run"]["rerun"], 1, "{again}");
    assert_eq!(again["run"]["trials"][0]["outcome"], "passed", "{again}");
    assert_eq!(again["run"]["trials"][0]["attempt"], 1);
    let mut recorded = tack_trace::recorded_trials(Path::new(&run_dir)).unwrap();
    recorded.sort_by_key(|t| t.attempt);
    let outcomes: Vec<&str> = recorded.iter().map(|t| t.outcome.as_str()).collect();
    assert_eq!(outcomes, ["infra_error", "passed"]);
    let report = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["report", &run_dir, "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    let variant = &report["variants"][0];
    assert_eq!(
        (&variant["trials"], &variant["passed"]),
        (&json!(1), &json!(1))
    );
    assert_eq!(variant["retried_attempts"], 1, "{variant}");
}
