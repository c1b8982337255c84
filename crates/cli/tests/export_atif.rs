//! `tack export atif` through the binary: a demo run's trials become ATIF
//! trajectories that match the traces (tokens, tool calls, outcomes) and
//! that Harbor's own models accept. The models come from PyPI's `harbor`,
//! which needs Python 3.12 or later: `TACK_HARBOR_PYTHON` names a Python
//! that imports it (`.ci/run` makes one in a Debian trixie image and sets
//! `TACK_REQUIRE_HARBOR_PYTHON=1`); elsewhere that part is skipped, saying
//! so.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::collections::HashMap;
use std::process::Command;

use serde_json::Value;

/// Validates every `*.json` in a directory with Harbor's `Trajectory`
/// model; prints `{"files": n, "invalid": [...]}`.
const VALIDATE: &str = r#"
import json, pathlib, sys
from harbor.models.trajectories import Trajectory
files = sorted(pathlib.Path(sys.argv[1]).glob("*.json"))
invalid = []
for f in files:
    try:
        Trajectory.model_validate(json.loads(f.read_text()))
    except Exception as e:
        invalid.append(f"{f.name}: {e}")
print(json.dumps({"files": len(files), "invalid": invalid}))
"#;

fn tack(args: &[&str]) -> Value {
    common::stdout_json(&common::tack(args))
}

/// `tack export atif RUN_DIR --out OUT --json`: its JSON.
fn export(run_dir: &str, out: &std::path::Path) -> Value {
    tack(&[
        "export",
        "atif",
        run_dir,
        "--out",
        out.to_str().unwrap(),
        "--json",
    ])
}

/// `tack run suites/demo -v VARIANTS -t TASKS` (then `more`) into `traces`:
/// its JSON.
fn demo_run(variants: &str, tasks: &str, more: &[&str], traces: &std::path::Path) -> Value {
    let mut args = vec!["run", "suites/demo", "-v", variants, "-t", tasks, "--json"];
    args.extend(["--no-report", "--traces", traces.to_str().unwrap()]);
    args.extend_from_slice(more);
    tack(&args)
}

#[test]
fn a_runs_trials_export_as_atif_trajectories_that_match_the_traces() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    let run = demo_run(
        "oracle,sim-full,sim-strip,sim-approvals",
        "leap-year-400,median-even,total-missing-file",
        &[],
        &traces,
    );
    let run_dir = run["run"]["run_dir"].as_str().unwrap();
    let trials: HashMap<String, &Value> = run["run"]["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["trial_id"].as_str().unwrap().to_string(), t))
        .collect();

    let out = dir.path().join("atif");
    let exported = export(run_dir, &out);
    assert_eq!(exported["type"], "atif_exported");
    assert_eq!(exported["trajectories"], trials.len());

    // The model calls that answered, by trial: one agent step each.
    let answered = tack(&[
        "query",
        "--json",
        "SELECT trial_id, count(*) AS n FROM spans WHERE kind = 'model_call' AND status = 'ok' \
         GROUP BY trial_id",
        run_dir,
    ]);
    let answered: HashMap<&str, u64> = answered
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["trial_id"].as_str().unwrap(),
                row["n"].as_u64().unwrap(),
            )
        })
        .collect();
    let (mut unanswered, mut approved) = (0, 0);
    for (trial_id, trial) in &trials {
        let path = out.join(format!("{trial_id}.json"));
        let atif: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        check_trajectory(&atif, trial, answered[trial_id.as_str()]);
        // Every approval is in, with who answered.
        let approvals = atif["extra"]["tack"]["approvals"].as_array().unwrap();
        approved += approvals.len();
        assert!(
            approvals.iter().all(|a| a["approver"].is_string()),
            "{trial_id}: {approvals:?}"
        );
        if trial["variant"] != "sim-approvals" {
            assert!(approvals.is_empty(), "{trial_id}: {approvals:?}");
        }
        let calls = &atif["extra"]["tack"]["unanswered_model_calls"];
        if trial["outcome"] == "model_error" {
            // The call that failed is listed, not dropped.
            assert!(!calls.as_array().unwrap().is_empty(), "{trial_id}: {atif}");
            unanswered += 1;
        } else {
            // A call that answered is in its step, not among the unanswered.
            let listed = calls.as_array().map_or(&[][..], Vec::as_slice);
            assert!(
                listed.iter().all(|call| call["status"] != "ok"),
                "{trial_id}: {calls}"
            );
        }
    }
    assert!(
        unanswered > 0,
        "sim-strip overflows its context on some trial"
    );
    assert!(approved > 0, "sim-approvals waits for approvals");

    // A second export into the same directory is refused: nothing mixed.
    let again = common::tack(&["export", "atif", run_dir, "--out", out.to_str().unwrap()]);
    assert_eq!(again.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&again.stderr);
    assert!(stderr.contains("not empty"), "{stderr}");

    if let Some(python) = common::harbor_python() {
        let validated = Command::new(python)
            .args(["-c", VALIDATE])
            .arg(&out)
            .output()
            .unwrap();
        assert!(
            validated.status.success(),
            "{}",
            String::from_utf8_lossy(&validated.stderr)
        );
        let report: Value = serde_json::from_slice(&validated.stdout).unwrap();
        assert_eq!(report["files"], trials.len(), "{report}");
        assert_eq!(report["invalid"], serde_json::json!([]), "{report}");
    }
}

/// One trajectory against the trial `tack run --json` reported.
fn check_trajectory(atif: &Value, trial: &Value, answered: u64) {
    let id = trial["trial_id"].as_str().unwrap();
    assert_eq!(atif["schema_version"], "ATIF-v1.6");
    assert_eq!(atif["session_id"], id);
    assert_eq!(atif["agent"]["name"], "tack");
    assert_eq!(
        atif["agent"]["extra"]["simulated"], true,
        "the demo's models are built in"
    );
    let tack = &atif["extra"]["tack"];
    for field in ["outcome", "stop_reason", "variant", "task"] {
        assert_eq!(tack[field], trial[field], "{id}: {field}");
    }
    assert!(
        !tack["checks"].as_array().unwrap().is_empty(),
        "{id}: its checks"
    );
    let steps = atif["steps"].as_array().unwrap();
    for (index, step) in steps.iter().enumerate() {
        assert_eq!(step["step_id"], index + 1, "{id}");
    }
    let agent: Vec<&Value> = steps.iter().filter(|s| s["source"] == "agent").collect();
    let sum = |field: &str| -> u64 {
        agent
            .iter()
            .filter_map(|s| s["metrics"][field].as_u64())
            .sum()
    };
    // Every model call that answered is an agent step with its tokens.
    assert_eq!(sum("prompt_tokens"), trial["usage"]["input_tokens"], "{id}");
    assert_eq!(
        sum("completion_tokens"),
        trial["usage"]["output_tokens"],
        "{id}"
    );
    assert_eq!(
        atif["final_metrics"]["total_prompt_tokens"],
        trial["usage"]["input_tokens"]
    );
    assert_eq!(agent.len() as u64, answered, "{id}");
    let calls: usize = agent
        .iter()
        .map(|s| s["tool_calls"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(
        calls,
        trial["tool_calls"].as_u64().unwrap() as usize,
        "{id}"
    );
    // Every result names a call of its own step, and every call has one.
    for step in &agent {
        let ids: Vec<&Value> = step["tool_calls"]
            .as_array()
            .map(|calls| calls.iter().map(|c| &c["tool_call_id"]).collect())
            .unwrap_or_default();
        let results: Vec<&Value> = step["observation"]["results"]
            .as_array()
            .map(|r| r.iter().map(|r| &r["source_call_id"]).collect())
            .unwrap_or_default();
        assert_eq!(ids, results, "{id}: {step}");
    }
}

/// What the harness wrote in the user's role — a compaction's instruction
/// and the summary that stands for the history — is not the user's: it is
/// exported as a `system` step, marked.
#[test]
fn a_compactions_instruction_and_summary_are_the_harness_steps() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    let run = demo_run("sim-compact", "median-even", &["--trials", "2"], &traces);
    let run_dir = run["run"]["run_dir"].as_str().unwrap();
    let out = dir.path().join("atif");
    export(run_dir, &out);
    let mut marked = 0;
    for entry in std::fs::read_dir(&out).unwrap() {
        let atif: Value =
            serde_json::from_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap()).unwrap();
        for step in atif["steps"].as_array().unwrap() {
            let message = step["message"].as_str().unwrap_or_default();
            if step["source"] == "user" {
                assert!(
                    !message.starts_with(tack_protocol::COMPACTION_SUMMARY_START),
                    "{step}"
                );
            }
            if step["extra"]["tack"]["written_by"] == "harness" {
                assert_eq!(step["source"], "system", "{step}");
                marked += 1;
            }
        }
    }
    assert!(
        marked >= 2,
        "sim-compact compacts: its instruction and summary ({marked})"
    );
}
