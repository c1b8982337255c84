//! `tack export otlp` through the binary, against a real collector: Arize
//! Phoenix (PyPI `arize-phoenix`) started on loopback, the spans read back
//! through Phoenix's own client and held against the Parquet traces (the
//! trial / model call / tool call tree, GenAI attribute values, token
//! counts, evaluation results), over HTTP and gRPC. `TACK_PHOENIX_PYTHON`
//! names a Python with Phoenix installed (`.ci/run` makes one and sets
//! `TACK_REQUIRE_PHOENIX=1`); elsewhere that test is skipped, saying so.
//! And a collector that is not there, or never answers, costs the spans,
//! counted, not the export's end.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::collections::{BTreeMap, HashMap};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Every span of the default project, as JSON, through Phoenix's client.
const READ_SPANS: &str = r#"
import json, sys
from phoenix.client import Client
spans = Client(base_url=sys.argv[1]).spans.get_spans(project_identifier="default", limit=100000)
print(json.dumps([{
    "name": s["name"], "span_id": s["context"]["span_id"], "trace_id": s["context"]["trace_id"],
    "parent_id": s.get("parent_id"), "attributes": s.get("attributes") or {},
    "events": s.get("events") or [], "status_code": s.get("status_code"),
} for s in spans]))
"#;

fn phoenix_python() -> Option<String> {
    common::python_with(
        "TACK_PHOENIX_PYTHON",
        "TACK_REQUIRE_PHOENIX",
        "import phoenix.server.main, phoenix.client",
        "`pip install arize-phoenix`",
    )
}

/// A Phoenix server on free loopback ports; dropping it stops it.
struct Phoenix {
    child: Child,
    http: u16,
    grpc: u16,
    python: String,
    _dir: tempfile::TempDir,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Phoenix {
    /// A Phoenix started, or `None` (having said why) where it is not
    /// installed and not required.
    fn if_installed() -> Option<Phoenix> {
        phoenix_python().map(Phoenix::start)
    }

    fn start(python: String) -> Phoenix {
        let dir = tempfile::tempdir().unwrap();
        let (http, grpc) = (common::free_port(), common::free_port());
        let log = std::fs::File::create(dir.path().join("phoenix.log")).unwrap();
        let child = Command::new(&python)
            .args(["-m", "phoenix.server.main", "serve"])
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", http.to_string())
            .env("PHOENIX_GRPC_PORT", grpc.to_string())
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_TELEMETRY_ENABLED", "false")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        let phoenix = Phoenix {
            child,
            http,
            grpc,
            python,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(120);
        while std::net::TcpStream::connect(("127.0.0.1", http)).is_err()
            || std::net::TcpStream::connect(("127.0.0.1", grpc)).is_err()
        {
            let log = std::fs::read_to_string(phoenix._dir.path().join("phoenix.log"));
            assert!(
                Instant::now() < deadline,
                "Phoenix did not start: {}",
                log.unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
        phoenix
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.http)
    }

    /// The spans Phoenix holds, once it holds `count` (it writes in the
    /// background).
    fn spans(&self, count: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let out = Command::new(&self.python)
                .args(["-c", READ_SPANS, &self.url()])
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let spans: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
            if spans.len() >= count || Instant::now() > deadline {
                return spans;
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

/// `tack run` of two demo tasks with `variants`, then `more` arguments.
fn demo_args<'a>(variants: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "run",
        "suites/demo",
        "-v",
        variants,
        "-t",
        "leap-year-400,total-missing-file",
    ];
    args.extend_from_slice(more);
    args
}

fn demo_run(traces: &std::path::Path, variants: &str) -> String {
    let more = [
        "--json",
        "--no-report",
        "--traces",
        traces.to_str().unwrap(),
    ];
    let run = common::stdout_json(&common::tack(&demo_args(variants, &more)));
    run["run"]["run_dir"].as_str().unwrap().to_string()
}

/// `tack export otlp RUN --endpoint URL --json`, then `more`; its JSON.
fn export(run: &str, endpoint: &str, more: &[&str]) -> Value {
    let mut args = vec!["export", "otlp", run, "--endpoint", endpoint, "--json"];
    args.extend_from_slice(more);
    common::stdout_json(&common::tack(&args))
}

fn query(sql: &str, run: &str) -> Vec<Value> {
    let rows = common::stdout_json(&common::tack(&["query", "--json", sql, run]));
    rows.as_array().unwrap().clone()
}

fn attr<'a>(span: &'a Value, key: &str) -> &'a Value {
    &span["attributes"][key]
}

#[test]
fn a_run_exported_to_phoenix_reads_back_as_its_traces() {
    let Some(phoenix) = Phoenix::if_installed() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    let run = demo_run(&traces, "sim-full,sim-strip");

    let exported = export(&run, &phoenix.url(), &["--content"]);
    let sent = exported["sent"]["spans"].as_u64().unwrap() as usize;
    assert_eq!(exported["sent"]["dropped_spans"], 0, "{exported}");

    let trials = query(
        "SELECT trial_id, outcome, gen_ai_usage_input_tokens AS input, \
         gen_ai_usage_output_tokens AS output FROM trials",
        &run,
    );
    let spans = query(
        "SELECT trial_id, kind, name, gen_ai_tool_name AS tool_name, check_passed, \
         gen_ai_usage_input_tokens AS input FROM spans",
        &run,
    );
    assert_eq!(
        sent,
        trials.len() + spans.len(),
        "a root per trial, a span per span"
    );
    let read = phoenix.spans(sent);
    assert_eq!(read.len(), sent, "Phoenix holds every span sent");

    let by_id: HashMap<&str, &Value> = read
        .iter()
        .map(|s| (s["span_id"].as_str().unwrap(), s))
        .collect();
    let roots: Vec<&Value> = read
        .iter()
        .filter(|s| s["name"] == "invoke_agent tack")
        .collect();
    assert_eq!(roots.len(), trials.len());
    for trial in &trials {
        let id = trial["trial_id"].as_str().unwrap();
        let root = roots
            .iter()
            .find(|r| attr(r, "gen_ai.conversation.id") == id)
            .unwrap_or_else(|| panic!("no root span for {id}"));
        assert!(root["parent_id"].is_null());
        assert_eq!(attr(root, "gen_ai.operation.name"), "invoke_agent");
        assert_eq!(attr(root, "tack.outcome"), &trial["outcome"]);
        assert_eq!(attr(root, "tack.simulated"), true);
        assert_eq!(attr(root, "gen_ai.usage.input_tokens"), &trial["input"]);
        assert_eq!(attr(root, "gen_ai.usage.output_tokens"), &trial["output"]);
        // Its children, by kind, against the spans table.
        let children: Vec<&Value> = read
            .iter()
            .filter(|s| s["trace_id"] == root["trace_id"] && s["span_id"] != root["span_id"])
            .collect();
        let mine: Vec<&Value> = spans.iter().filter(|s| s["trial_id"] == id).collect();
        assert_eq!(children.len(), mine.len(), "{id}");
        let count = |kind: &str| mine.iter().filter(|s| s["kind"] == kind).count();
        let named = |prefix: &str| {
            children
                .iter()
                .filter(|s| s["name"].as_str().unwrap().starts_with(prefix))
                .count()
        };
        assert_eq!(named("chat "), count("model_call"), "{id}");
        assert_eq!(named("execute_tool "), count("tool_call"), "{id}");
        assert_eq!(named("check "), count("check"), "{id}");
        for child in &children {
            let name = child["name"].as_str().unwrap();
            let parent = by_id[child["parent_id"].as_str().unwrap()];
            if let Some(tool) = name.strip_prefix("execute_tool ") {
                // A tool call hangs under the model call that asked for it.
                assert!(
                    parent["name"].as_str().unwrap().starts_with("chat "),
                    "{child}"
                );
                assert_eq!(attr(child, "gen_ai.tool.name").as_str().unwrap(), tool);
                assert!(
                    attr(child, "gen_ai.tool.call.result").is_string(),
                    "--content"
                );
            } else {
                assert_eq!(parent["span_id"], root["span_id"], "{child}");
            }
            if name.starts_with("chat ") {
                assert_eq!(attr(child, "gen_ai.operation.name"), "chat");
                assert_eq!(attr(child, "gen_ai.request.model"), "sim");
                assert!(
                    attr(child, "gen_ai.input.messages").is_string(),
                    "--content"
                );
            }
        }
        // Token counts: the model calls' sum is the trial's.
        let tokens: u64 = children
            .iter()
            .filter_map(|s| attr(s, "gen_ai.usage.input_tokens").as_u64())
            .sum();
        let recorded: u64 = mine.iter().filter_map(|s| s["input"].as_u64()).sum();
        assert_eq!(tokens, recorded, "{id}");
        // Each check's verdict is an evaluation event.
        let verdicts: Vec<f64> = children
            .iter()
            .flat_map(|s| s["events"].as_array().unwrap().iter())
            .filter(|e| e["name"] == "gen_ai.evaluation.result")
            .map(|e| {
                e["attributes"]["gen_ai.evaluation.score.value"]
                    .as_f64()
                    .unwrap()
            })
            .collect();
        let checks: Vec<f64> = mine
            .iter()
            .filter(|s| s["kind"] == "check")
            .map(|s| if s["check_passed"] == true { 1.0 } else { 0.0 })
            .collect();
        assert_eq!(verdicts, checks, "{id}");
    }
    // The tool names, all told, are the spans table's.
    let mut tools: BTreeMap<String, usize> = BTreeMap::new();
    for s in spans.iter().filter(|s| s["kind"] == "tool_call") {
        *tools
            .entry(s["tool_name"].as_str().unwrap().to_string())
            .or_default() += 1;
    }
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    for s in read
        .iter()
        .filter(|s| s["name"].as_str().unwrap().starts_with("execute_tool "))
    {
        *seen
            .entry(attr(s, "gen_ai.tool.name").as_str().unwrap().to_string())
            .or_default() += 1;
    }
    assert_eq!(seen, tools);

    // Over gRPC too: a second run lands beside the first.
    let second = demo_run(&traces, "oracle");
    let grpc_url = format!("http://127.0.0.1:{}", phoenix.grpc);
    let grpc = export(&second, &grpc_url, &["--protocol", "grpc"]);
    assert_eq!(grpc["sent"]["dropped_spans"], 0, "{grpc}");
    let more = grpc["sent"]["spans"].as_u64().unwrap() as usize;
    let read = phoenix.spans(sent + more);
    assert_eq!(read.len(), sent + more);
    let second_id = std::path::Path::new(&second)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(
        read.iter()
            .any(|s| attr(s, "tack.run_id") == second_id.as_str())
    );
    // Without --content no message text leaves the machine.
    assert!(
        read.iter()
            .filter(|s| attr(s, "tack.run_id") == second_id.as_str())
            .all(|s| attr(s, "gen_ai.input.messages").is_null())
    );
}

/// Two collectors that take no span, each with the error it causes: a port
/// where nothing listens, and one (kept open by the listener returned)
/// that accepts connections and never answers.
fn dead_collectors() -> (TcpListener, [(u16, &'static str); 2]) {
    let closed = common::free_port();
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_port = silent.local_addr().unwrap().port();
    let collectors = [
        (closed, "could not connect"),
        (silent_port, "no answer in time"),
    ];
    (silent, collectors)
}

#[test]
fn a_collector_that_is_not_there_or_never_answers_costs_the_spans_not_the_export() {
    let dir = tempfile::tempdir().unwrap();
    let run = demo_run(&dir.path().join("traces"), "sim-full");
    let (silent, collectors) = dead_collectors();
    for (port, what) in collectors {
        let started = Instant::now();
        let output = Command::new(env!("CARGO_BIN_EXE_tack"))
            .args(["export", "otlp", &run, "--json", "--endpoint"])
            .arg(format!("http://127.0.0.1:{port}"))
            .env("OTEL_EXPORTER_OTLP_TIMEOUT", "1000")
            .output()
            .unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{what}: took {:?}",
            started.elapsed()
        );
        assert_eq!(output.status.code(), Some(1), "{what}");
        let json: Value = serde_json::from_slice(&output.stdout).unwrap();
        let dropped = json["sent"]["dropped_spans"].as_u64().unwrap();
        assert!(dropped > 0 && json["sent"]["spans"] == 0, "{what}: {json}");
        let error = json["sent"]["first_error"].as_str().unwrap();
        assert!(error.contains(what), "{error}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            stderr.contains(&format!("{dropped} spans dropped")),
            "{stderr}"
        );
    }
    drop(silent);
}

/// The spans an export of `run` sends: a root per trial, one per span.
fn spans_of(run: &str) -> u64 {
    let count = |table: &str| {
        query(&format!("SELECT count(*) AS n FROM {table}"), run)[0]["n"]
            .as_u64()
            .unwrap()
    };
    count("trials") + count("spans")
}

/// `tack run --otlp` on a demo subset, one trial at a time so the run lasts
/// a few of the stream's two-second looks; its JSON.
fn streamed_run(traces: &std::path::Path, endpoint: &str, timeout_ms: &str) -> (Value, Duration) {
    let started = Instant::now();
    let more = [
        "-j",
        "1",
        "--json",
        "--no-report",
        "--otlp",
        endpoint,
        "--traces",
    ];
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(demo_args("sim-full", &more))
        .arg(traces)
        .current_dir(common::repo())
        .env("OTEL_EXPORTER_OTLP_TIMEOUT", timeout_ms)
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    assert_eq!(
        output.status.code(),
        Some(0),
        "spans a collector does not take never fail the run: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let dropped = json["otlp"]["sent"]["dropped_spans"].as_u64().unwrap();
    assert!(
        stderr.contains(&format!("{dropped} dropped")),
        "the stream is accounted for on stderr: {stderr}"
    );
    (json, elapsed)
}

#[test]
fn a_run_streamed_with_otlp_reaches_phoenix_as_its_export_would() {
    let Some(phoenix) = Phoenix::if_installed() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (json, _) = streamed_run(&dir.path().join("traces"), &phoenix.url(), "10000");
    let run = json["run"]["run_dir"].as_str().unwrap().to_string();
    let otlp = &json["otlp"];
    let expected = spans_of(&run);
    assert_eq!(otlp["sent"]["dropped_spans"], 0, "{otlp}");
    assert_eq!(otlp["sent"]["spans"], expected, "{otlp}");
    assert_eq!(otlp["trials"], 6, "{otlp}");
    assert_eq!(otlp["unread_trials"], 0, "{otlp}");
    let read = phoenix.spans(expected as usize);
    assert_eq!(
        read.len() as u64,
        expected,
        "Phoenix holds every span streamed"
    );
    let run_id = json["run"]["run_id"].as_str().unwrap();
    let roots = read
        .iter()
        .filter(|s| attr(s, "tack.run_id") == run_id)
        .count();
    assert_eq!(roots, 6, "a root span per trial");

    // The export of the finished run sends the very same spans (ids come
    // from the run and the trials): Phoenix, which keeps a span once per
    // id, holds no more than before.
    let exported = export(&run, &phoenix.url(), &[]);
    assert_eq!(exported["sent"]["spans"], expected, "{exported}");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(phoenix.spans(expected as usize).len() as u64, expected);
}

#[test]
fn a_run_streaming_to_a_collector_that_is_down_or_silent_ends_on_time_and_counts_the_spans() {
    let dir = tempfile::tempdir().unwrap();
    // The same run without a collector, for its time.
    let plain_traces = dir.path().join("plain");
    let more = [
        "-j",
        "1",
        "--no-report",
        "--traces",
        plain_traces.to_str().unwrap(),
    ];
    let started = Instant::now();
    assert!(common::tack(&demo_args("sim-full", &more)).status.success());
    let plain = started.elapsed();
    let (silent, collectors) = dead_collectors();
    for (port, what) in collectors {
        let traces = dir.path().join(format!("traces-{port}"));
        let endpoint = format!("http://127.0.0.1:{port}");
        let (json, elapsed) = streamed_run(&traces, &endpoint, "1000");
        // One timeout at most at the end: the stream never holds the run.
        assert!(
            elapsed < plain + Duration::from_secs(10),
            "{what}: {elapsed:?} against {plain:?} without --otlp"
        );
        let run = json["run"]["run_dir"].as_str().unwrap().to_string();
        let otlp = &json["otlp"];
        assert_eq!(otlp["sent"]["spans"], 0, "{what}: {otlp}");
        assert_eq!(
            otlp["sent"]["dropped_spans"],
            spans_of(&run),
            "{what}: every span counted as dropped: {otlp}"
        );
        let error = otlp["sent"]["first_error"].as_str().unwrap();
        assert!(error.contains(what), "{error}");
        // The run itself is whole.
        let trials = query("SELECT outcome FROM trials", &run);
        assert_eq!(trials.len(), 6);
    }
    drop(silent);
}

/// A suite whose one task takes four seconds a trial (its check sleeps):
/// long enough for the stream's looks to fall inside the run.
fn slow_suite(root: &std::path::Path) {
    let task = root.join("tasks/slow");
    std::fs::create_dir_all(task.join("fixture")).unwrap();
    std::fs::write(
        root.join("suite.toml"),
        "[suite]\nname = \"slow\"\ntrials = 5\nseed = 1\n\n[[variants]]\nname = \"oracle\"\nmodel = \"oracle\"\n",
    )
    .unwrap();
    std::fs::write(
        task.join("task.toml"),
        "instruction = \"Make file.txt say fixed.\"\n\n[[checks]]\nname = \"slow\"\nrun = \"sleep 4 && grep -q fixed file.txt\"\ntimeout_secs = 60\n\n[solution]\n\n[[solution.edits]]\npath = \"file.txt\"\nold = \"broken\"\nnew = \"fixed\"\n",
    )
    .unwrap();
    std::fs::write(task.join("fixture/file.txt"), "broken\n").unwrap();
}

#[test]
fn spans_leave_while_the_run_runs_not_only_at_its_end() {
    // tack's loopback server is also an OTLP/HTTP collector that counts
    // what it receives.
    let collector = tack_testkit::OpenAiServer::start_background(vec![]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    slow_suite(dir.path());
    let mut child = Command::new(env!("CARGO_BIN_EXE_tack"))
        .arg("run")
        .arg(dir.path())
        .args(["-j", "1", "--no-report", "--json", "--otlp"])
        .arg(format!("http://{}", collector.addr()))
        .arg("--traces")
        .arg(dir.path().join("traces"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Five trials of four seconds, one at a time: the first trial's spans
    // are due about four seconds after it ends, long before the last.
    let mut during = 0;
    while child.try_wait().unwrap().is_none() {
        during = collector.stats().otlp_requests;
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().unwrap();
    let json: Value = serde_json::from_slice(&output.stdout).unwrap_or_else(|_| {
        panic!("{}", String::from_utf8_lossy(&output.stderr));
    });
    assert!(
        during >= 1,
        "no spans arrived while the run ran: {}",
        json["otlp"]
    );
    let run = json["run"]["run_dir"].as_str().unwrap().to_string();
    assert_eq!(json["otlp"]["trials"], 5, "{}", json["otlp"]);
    assert_eq!(json["otlp"]["sent"]["spans"], spans_of(&run));
    assert_eq!(json["otlp"]["sent"]["dropped_spans"], 0);
    let stats = collector.stats();
    assert_eq!(stats.otlp_requests, json["otlp"]["sent"]["requests"]);
    assert!(stats.otlp_requests >= 2, "streamed in batches: {stats:?}");
    assert_eq!(stats.requests, 0, "the oracle calls no model");
}
