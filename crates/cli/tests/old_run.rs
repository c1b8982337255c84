//! A run written by the release before trace schema 3 (one Parquet file per
//! trial and table, messages by position, model calls naming a range of
//! positions), kept as a fixture: every command that reads runs still reads
//! it, and a trial of it still replays.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::path::{Path, PathBuf};

use serde_json::Value;

mod common;
use common::{repo, stdout_json, tack};

const RUN_ID: &str = "20261201-190243-demo-e3a8";

/// A copy of the fixture: reading a run may recover its journals in place.
fn old_run(dir: &Path) -> PathBuf {
    let from = repo()
        .join("crates/cli/tests/fixtures/run-schema2")
        .join(RUN_ID);
    let to = dir.join("traces").join(RUN_ID);
    for table in ["trials", "spans", "messages"] {
        std::fs::create_dir_all(to.join(table)).unwrap();
        for entry in std::fs::read_dir(from.join(table)).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(table).join(entry.file_name())).unwrap();
        }
    }
    std::fs::copy(from.join("manifest.json"), to.join("manifest.json")).unwrap();
    to
}

#[test]
fn a_run_of_the_previous_trace_schema_reads_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let run = old_run(dir.path());
    let run_arg = run.to_str().unwrap();
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["schema_version"], 2);

    let reports = dir.path().join("reports");
    let report = stdout_json(&tack(&[
        "report",
        run_arg,
        "--out",
        reports.to_str().unwrap(),
        "--json",
    ]));
    let variants: Vec<&str> = report["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["variant"].as_str().unwrap())
        .collect();
    assert_eq!(variants, ["oracle", "sim-approvals"]);

    let trial = "sim-approvals--median-even--0";
    let shown = stdout_json(&tack(&["show", run_arg, trial, "--json"]));
    let messages = shown["messages"].as_array().unwrap();
    assert!(messages.len() >= 4, "{shown}");
    assert_eq!(messages[0]["role"], "system");
    assert_eq!(messages[2]["message_id"], "#2");
    let first_call = shown["spans"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["kind"] == "model_call")
        .unwrap();
    assert_eq!(first_call["message_ids"], serde_json::json!(["#0", "#1"]));

    let sql = "select count(*) as n from trials";
    let csv = tack(&["query", sql, run_arg, "--csv"]);
    assert_eq!(
        String::from_utf8_lossy(&csv.stdout).lines().nth(1),
        Some("2")
    );

    // The recorded answers drive a replay of the old trial, the run named
    // by its id under --traces (where the replay is written too).
    let traces = dir.path().join("traces");
    let replay = stdout_json(&tack(&[
        "replay",
        RUN_ID,
        trial,
        "--traces",
        traces.to_str().unwrap(),
        "--reports",
        reports.to_str().unwrap(),
        "--json",
    ]));
    let replayed = &replay["run"]["trials"][0];
    assert_eq!(replayed["outcome"], "passed", "{replay}");
}

/// `report` and `replay` take a bare run id, as `show`, `query` and
/// `compare` do; one that is not there is named as such, with the runs
/// there are.
#[test]
fn report_and_replay_take_a_run_id() {
    let dir = tempfile::tempdir().unwrap();
    old_run(dir.path());
    let in_dir = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_tack"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let report = stdout_json(&in_dir(&["report", RUN_ID, "--json"]));
    assert_eq!(report["manifest"]["run_id"], RUN_ID);
    for args in [
        &["report", "20261201-000000-nosuch"][..],
        &["replay", "20261201-000000-nosuch", "oracle--median-even--0"][..],
    ] {
        let output = in_dir(args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains("no run `20261201-000000-nosuch`") && stderr.contains(RUN_ID),
            "{args:?}: {stderr}"
        );
    }
}
