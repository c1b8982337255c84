//! `tack import inspect` on a log Inspect AI itself wrote: the fixture task
//! runs offline on `mockllm/model` (a scripted model that calls a tool, one
//! call failing), and the run tack makes of it must report the same scores
//! and token counts as Inspect's own dump of the log.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::{inspect_command, stdout_json, tack};
use serde_json::Value;

/// Per (sample id, epoch): the raw score and the input and output tokens.
type Samples = BTreeMap<(String, u64), (String, u64, u64)>;

fn run_inspect(inspect: &str, logs: &Path) -> PathBuf {
    let fixture = common::repo().join("crates/cli/tests/fixtures/inspect");
    let output = Command::new(inspect)
        // Inspect globs the task path and refuses absolute ones.
        .args(["eval", "arithmetic.py", "--display", "none", "--log-dir"])
        .arg(logs)
        .current_dir(&fixture)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "inspect eval failed (is TIKTOKEN_CACHE_DIR set up? see .ci/run): {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let mut found: Vec<PathBuf> = std::fs::read_dir(logs)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "eval"))
        .collect();
    assert_eq!(found.len(), 1, "one log: {found:?}");
    found.remove(0)
}

/// Inspect's own view of the log, from `inspect log dump`.
fn inspect_view(inspect: &str, log: &Path) -> Samples {
    let output = Command::new(inspect)
        .args(["log", "dump"])
        .arg(log)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let dump: Value = serde_json::from_slice(&output.stdout).unwrap();
    let mut samples = Samples::new();
    for sample in dump["samples"].as_array().unwrap() {
        let id = sample["id"].as_str().unwrap().to_string();
        let epoch = sample["epoch"].as_u64().unwrap();
        let value = sample["scores"]["match"]["value"]
            .as_str()
            .unwrap()
            .to_string();
        let (mut input, mut output) = (0, 0);
        for usage in sample["model_usage"].as_object().unwrap().values() {
            input += usage["input_tokens"].as_u64().unwrap();
            output += usage["output_tokens"].as_u64().unwrap();
        }
        samples.insert((id, epoch), (value, input, output));
    }
    samples
}

#[test]
fn an_inspect_log_imports_with_the_scores_and_tokens_inspect_reports() {
    let Some(inspect) = inspect_command() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log = run_inspect(&inspect, &dir.path().join("logs"));
    let expected = inspect_view(&inspect, &log);
    assert_eq!(expected.len(), 6, "3 samples × 2 epochs: {expected:?}");
    let values: Vec<&str> = expected.values().map(|(v, _, _)| v.as_str()).collect();
    assert!(values.contains(&"C") && values.contains(&"I"), "{values:?}");

    let out = dir.path().join("traces");
    let import = stdout_json(&tack(&[
        "import",
        "inspect",
        log.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(import["skipped"].as_array().unwrap().len(), 0, "{import}");
    assert_eq!(import["trials"].as_array().unwrap().len(), 6);
    let run = import["run_dir"].as_str().unwrap();

    let report = stdout_json(&tack(&["report", run, "--json"]));
    let variant = &report["variants"][0];
    let passed = values.iter().filter(|v| **v == "C").count() as u64;
    let total_input: u64 = expected.values().map(|(_, i, _)| i).sum();
    let total_output: u64 = expected.values().map(|(_, _, o)| o).sum();
    eprintln!(
        "inspect: {} samples, {passed} correct, {total_input} input and {total_output} output tokens",
        expected.len()
    );
    assert_eq!(variant["variant"], "mockllm-model");
    assert_eq!(variant["trials"], 6);
    assert_eq!(variant["passed"], passed);
    assert_eq!(variant["input_tokens"], total_input);
    assert_eq!(variant["output_tokens"], total_output);
    assert_eq!(
        variant["tool_errors"], 2,
        "div 7 0 fails in the tool, twice"
    );
    let mut failed: Vec<(String, u64)> = report["failed_trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["task"].as_str().unwrap().to_string(),
                t["trial_index"].as_u64().unwrap() + 1,
            )
        })
        .collect();
    failed.sort();
    let incorrect: Vec<(String, u64)> = expected
        .iter()
        .filter(|(_, (value, _, _))| value != "C")
        .map(|(key, _)| key.clone())
        .collect();
    assert_eq!(failed, incorrect);

    // Per sample: the trace's outcome, tokens and the raw score in the check.
    let rows = stdout_json(&tack(&[
        "query",
        "select t.task, t.trial_index, t.outcome, t.gen_ai_usage_input_tokens as input_tokens, \
         t.gen_ai_usage_output_tokens as output_tokens, s.check_output as output \
         from trials t join spans s on s.trial_id = t.trial_id where s.kind = 'check'",
        run,
        "--json",
    ]));
    let mut seen = 0;
    for row in rows.as_array().unwrap() {
        let key = (
            row["task"].as_str().unwrap().to_string(),
            row["trial_index"].as_u64().unwrap() + 1,
        );
        let (value, input, output) = &expected[&key];
        let outcome = if value == "C" {
            "passed"
        } else {
            "verification_failed"
        };
        eprintln!(
            "{key:?}: inspect {value} {input}/{output}, tack {} {}/{}",
            row["outcome"], row["input_tokens"], row["output_tokens"]
        );
        assert_eq!(row["outcome"], outcome, "{key:?}");
        assert_eq!(row["input_tokens"], *input, "{key:?}");
        assert_eq!(row["output_tokens"], *output, "{key:?}");
        let check = row["output"].as_str().unwrap();
        assert!(check.starts_with(&format!("value: {value}\n")), "{check}");
        seen += 1;
    }
    assert_eq!(seen, expected.len());

    // The same log again is refused: the first import stands.
    let again = tack(&[
        "import",
        "inspect",
        log.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(2));
}

/// A log Inspect did not finish (`status: started`: a crash, a Ctrl-C)
/// imports the samples it holds into a run marked interrupted, and says so;
/// a log without samples (`--no-log-samples`) imports nothing and exits 1.
#[test]
fn an_unfinished_log_is_interrupted_and_one_without_samples_exits_1() {
    let Some(inspect) = inspect_command() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let log = run_inspect(&inspect, &dir.path().join("logs"));
    let dump = Command::new(&inspect)
        .args(["log", "dump"])
        .arg(&log)
        .output()
        .unwrap();
    let mut json: Value = serde_json::from_slice(&dump.stdout).unwrap();
    json["status"] = "started".into();
    let started = dir.path().join("started.json");
    std::fs::write(&started, json.to_string()).unwrap();
    let import = |log: &Path, out: &str| {
        tack(&[
            "import",
            "inspect",
            log.to_str().unwrap(),
            "--out",
            dir.path().join(out).to_str().unwrap(),
        ])
    };
    let output = import(&started, "a");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(stderr.contains("the log's status is `started`"), "{stderr}");
    let run = common::only_run(&dir.path().join("a"));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["status"], "interrupted");

    json.as_object_mut().unwrap().remove("samples");
    let empty = dir.path().join("empty.json");
    std::fs::write(&empty, json.to_string()).unwrap();
    let output = import(&empty, "b");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("the log holds no samples"), "{stderr}");
}

#[test]
fn a_file_that_is_not_an_inspect_log_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.json");
    std::fs::write(&path, "[1, 2]").unwrap();
    let output = tack(&[
        "import",
        "inspect",
        path.to_str().unwrap(),
        "--out",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a readable Inspect AI log"), "{stderr}");
}
