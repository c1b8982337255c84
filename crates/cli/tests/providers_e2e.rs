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
    common::copy_dir(&task, &root.join("tasks/total-missing-file"));
    let toml = format!(
        "[suite]\nname = \"providers\"\n\n[[variants]]\nname = \"local-openai\"\nmodel = \"openai:gpt-4o-mini\"\n\
         [variants.provider]\nbase_url = \"{base_url}\"\napi_key_env = \"TACK_E2E_KEY\"\nrequests_per_minute = 600\n"
    );
    std::fs::write(root.join("suite.toml"), toml).unwrap();
    root
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
/// its call attempts (`model_attempts = 2`) — and then answers with
/// `then`; and the suite that talks to it.
fn outage(dir: &Path, then: Vec<ScriptedResponse>) -> (MockServer, PathBuf) {
    let options = ServerOptions {
        port: 0,
        expected_key: PLANTED_KEY.to_string(),
        record_to: None,
    };
    let mut script = vec![ScriptedResponse::status(503), ScriptedResponse::status(503)];
    script.extend(then);
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

/// The answers that solve one trial of the task.
fn solved() -> [ScriptedResponse; 2] {
    [
        ScriptedResponse::tool_calls(vec![fix_call()]),
        ScriptedResponse::text("Fixed: missing files now exit 1."),
    ]
}

#[test]
fn a_provider_outage_is_an_infra_error_and_infra_retries_run_the_trial_again() {
    // The first attempt meets the outage; the trial's second attempt finds
    // the provider back.
    let dir = tempfile::tempdir().unwrap();
    let (_server, suite) = outage(dir.path(), solved().into());
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
fn a_run_killed_during_a_provider_outage_resumes_and_reruns_its_infra_errors() {
    // Trial 0 meets the outage (infra_error); trial 1's first call hangs
    // and the run is killed there (SIGKILL); trial 2 never started.
    let dir = tempfile::tempdir().unwrap();
    let hang = ScriptedResponse::delayed(60_000, ScriptedResponse::text("too late"));
    let (server, suite) = outage(dir.path(), vec![hang]);
    let traces = dir.path().join("traces");
    let tack = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tack"));
        command
            .args(args)
            .args(["--json", "--no-report"])
            .env("TACK_E2E_KEY", PLANTED_KEY);
        command
    };
    let mut first = tack(&["run", suite.to_str().unwrap(), "--trials", "3", "-j", "1"])
        .args(["--traces", traces.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while server.stats().requests < 3 {
        assert!(
            std::time::Instant::now() < deadline,
            "trial 1 never called the model"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    first.kill().unwrap(); // SIGKILL, mid-call
    first.wait().unwrap();
    let run_dir = common::only_run(&traces);
    let run_dir = run_dir.to_str().unwrap();
    let run = |args: &[&str]| -> Value {
        let output = tack(args).output().unwrap();
        serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&output.stderr)))
    };

    // A plain resume runs the cut-off trial and the one never started, and
    // keeps what finished, the infra error included.
    for response in solved().into_iter().chain(solved()) {
        server.push(response);
    }
    // One trial at a time: the scripted answers go to the trials in order.
    let resumed = run(&["run", "--resume", run_dir, "-j", "1"]);
    // (The plan's order is shuffled by its seed: which trials met the
    // outage and the kill is read, not assumed.)
    let ran: BTreeSet<(u64, String)> = resumed["run"]["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["attempt"].as_u64().unwrap(),
                t["outcome"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(
        ran,
        BTreeSet::from([(0, "passed".to_string()), (1, "passed".to_string())]),
        "{resumed}"
    );

    // With the provider back, --rerun infra_error runs trial 0 again.
    for response in solved() {
        server.push(response);
    }
    let again = run(&["run", "--resume", run_dir, "--rerun", "infra_error"]);
    assert_eq!(again["run"]["rerun"], 1, "{again}");
    assert_eq!(again["run"]["trials"][0]["outcome"], "passed", "{again}");
    assert_eq!(again["run"]["trials"][0]["attempt"], 1);

    // Every attempt is in the traces: the outage's trial, the cut-off
    // one (recovered from its journal) and the one the kill kept from
    // starting.
    let mut attempts: std::collections::BTreeMap<u32, Vec<(u32, String)>> = Default::default();
    for trial in tack_trace::recorded_trials(Path::new(run_dir)).unwrap() {
        attempts
            .entry(trial.trial_index)
            .or_default()
            .push((trial.attempt, trial.outcome));
    }
    let mut histories: Vec<Vec<String>> = attempts
        .into_values()
        .map(|mut tries| {
            tries.sort();
            tries.into_iter().map(|(_, outcome)| outcome).collect()
        })
        .collect();
    histories.sort();
    assert_eq!(
        histories,
        [
            vec!["cancelled", "passed"],
            vec!["infra_error", "passed"],
            vec!["passed"]
        ]
    );
    // … each trial once in the latest view, and the report gives the
    // figures with and without the trials a later attempt decided.
    let report = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["report", run_dir, "--json"])
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    let variant = &report["variants"][0];
    assert_eq!(
        (&variant["trials"], &variant["passed"]),
        (&json!(3), &json!(3)),
        "{variant}"
    );
    assert_eq!(variant["retried_attempts"], 2, "{variant}");
    assert_eq!(variant["rerun_trials"], 2, "{variant}");
    assert_eq!(variant["success_rate_without_reruns"], 1.0, "{variant}");
    let html = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["report", run_dir, "--out"])
        .arg(dir.path().join("report"))
        .output()
        .unwrap();
    assert!(
        html.status.success(),
        "{}",
        String::from_utf8_lossy(&html.stderr)
    );
    let index = std::fs::read_to_string(dir.path().join("report/index.html")).unwrap();
    assert!(
        index.contains(r#"id="reruns""#),
        "the report names the re-run trials"
    );
}
