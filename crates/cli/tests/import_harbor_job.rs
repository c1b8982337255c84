//! `tack import harbor-job` through the binary: a job directory written with
//! Harbor's own models (tests/fixtures/harbor_job.py, run by the Python
//! `TACK_HARBOR_PYTHON` names) imports as a run whose trials, tokens,
//! rewards and trajectories match what Harbor recorded, and `tack compare`
//! runs between it and a tack run of the same tasks.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::process::Command;

use serde_json::{Value, json};

const HARBOR_VARIANT: &str = "terminus-2-openai-gpt-5";

#[test]
fn a_harbor_job_imports_as_a_run_and_compares_with_a_tack_run() {
    let Some(python) = common::harbor_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let job = dir.path().join("jobs/2026-12-01__10-00-00");
    let script =
        std::fs::read_to_string(common::repo().join("crates/cli/tests/fixtures/harbor_job.py"))
            .unwrap();
    let written = Command::new(python)
        .args(["-c", &script])
        .arg(&job)
        .output()
        .unwrap();
    assert!(
        written.status.success(),
        "{}",
        String::from_utf8_lossy(&written.stderr)
    );
    let traces = dir.path().join("traces");
    let imported = common::stdout_json(&common::tack(&[
        "import",
        "harbor-job",
        job.to_str().unwrap(),
        "--out",
        traces.to_str().unwrap(),
        "--json",
    ]));
    assert_eq!(imported["type"], "harbor_job_imported");
    assert_eq!(imported["skipped"], json!([]));
    let trials = imported["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 6, "{imported}");
    let outcomes: Vec<(&str, &str)> = trials
        .iter()
        .map(|t| {
            (
                t["trial_id"].as_str().unwrap(),
                t["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("leap-year-400--0", "verification_failed"), // timed out, graded 0
        ("leap-year-400--1", "infra_error"),         // its environment never started
        ("median-even--0", "passed"),
        ("median-even--1", "verification_failed"),
        ("total-missing-file--0", "passed"),
        ("total-missing-file--1", "passed"),
    ];
    for (suffix, outcome) in expected {
        let id = format!("{HARBOR_VARIANT}--{suffix}");
        assert!(
            outcomes.contains(&(id.as_str(), outcome)),
            "{id} {outcome}: {outcomes:?}"
        );
    }
    // Harbor's token totals, whether from a trajectory's steps or its result.json.
    for trial in trials {
        let usage = &trial["usage"];
        assert_eq!(usage["input_tokens"], 3100, "{trial}");
        assert_eq!(usage["output_tokens"], 200, "{trial}");
    }
    assert_eq!(
        imported["not_carried"]["per-call detail (no agent/trajectory.json; totals kept as one model call)"],
        4
    );
    let run = imported["run_dir"].as_str().unwrap();

    // A trajectory became model calls, a tool call and the conversation.
    let shown = common::stdout_json(&common::tack(&[
        "show",
        run,
        &format!("{HARBOR_VARIANT}--median-even--0"),
        "--json",
    ]));
    let spans: Vec<(&str, Option<u64>, Option<&str>)> = shown["spans"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["kind"].as_str().unwrap(),
                s["input_tokens"].as_u64(),
                s["tool_result"].as_str(),
            )
        })
        .collect();
    assert_eq!(
        spans,
        [
            ("model_call", Some(1200), None),
            ("tool_call", None, Some("a.py\n")),
            ("model_call", Some(1900), None),
            ("check", None, None),
        ]
    );
    let roles: Vec<&str> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"]);

    // The report reads it; compare puts it beside a tack run of the same tasks.
    let report = common::stdout_json(&common::tack(&["report", run, "--json"]));
    let variant = &report["variants"][0];
    assert_eq!(
        (&variant["variant"], &variant["passed"]),
        (&json!(HARBOR_VARIANT), &json!(3)),
        "{variant}"
    );
    let ours = common::stdout_json(&common::tack(&[
        "run",
        "suites/demo",
        "-v",
        "sim-full",
        "-t",
        "median-even,total-missing-file,leap-year-400",
        "--trials",
        "2",
        "--json",
        "--no-report",
        "--traces",
        traces.to_str().unwrap(),
    ]));
    let compared = common::stdout_json(&common::tack(&[
        "compare",
        ours["run"]["run_dir"].as_str().unwrap(),
        run,
        "--variants",
        &format!("sim-full,{HARBOR_VARIANT}"),
        "--json",
        "--no-report",
    ]));
    let comparison = &compared["comparison"];
    assert_eq!(
        comparison["candidate"]["trials"], 5,
        "the infra error is not scored"
    );
    assert_eq!(comparison["candidate"]["infra_errors"], 1);
    assert_eq!(comparison["candidate"]["passed"], 3);
    assert_eq!(comparison["base"]["trials"], 6);
    assert_eq!(
        comparison["tasks"].as_array().unwrap().len(),
        3,
        "{comparison}"
    );
}

#[test]
fn a_directory_that_is_not_a_job_exits_2_and_a_bad_trial_is_skipped_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let traces = dir.path().join("traces");
    let not_a_job = dir.path().join("empty");
    std::fs::create_dir_all(&not_a_job).unwrap();
    let refused = common::tack(&[
        "import",
        "harbor-job",
        not_a_job.to_str().unwrap(),
        "--out",
        traces.to_str().unwrap(),
    ]);
    assert_eq!(refused.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("result.json") && stderr.contains("Harbor job"),
        "{stderr}"
    );

    // A job whose second trial's result.json lacks its task: that trial is
    // skipped and named, the other imported.
    let job = dir.path().join("job");
    let write = |path: &str, value: Value| {
        let path = job.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, value.to_string()).unwrap();
    };
    write(
        "result.json",
        json!({"id": "0f0e0d0c-0000-0000-0000-000000000000", "started_at": "2026-12-02T08:00:00Z",
               "n_total_trials": 2, "stats": {}}),
    );
    write(
        "median-even__abc/result.json",
        json!({"task_name": "median-even", "trial_name": "median-even__abc",
               "agent_info": {"name": "oracle", "version": "1"},
               "verifier_result": {"rewards": {"reward": 1}},
               "started_at": "2026-12-02T08:00:01Z", "finished_at": "2026-12-02T08:00:09Z"}),
    );
    write(
        "broken__def/result.json",
        json!({"trial_name": "broken__def", "agent_info": {"name": "oracle", "version": "1"}}),
    );
    let output = common::tack(&[
        "import",
        "harbor-job",
        job.to_str().unwrap(),
        "--out",
        traces.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(1));
    let imported: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(imported["trials"][0]["trial_id"], "oracle--median-even--0");
    assert_eq!(imported["trials"][0]["outcome"], "passed");
    let skipped = &imported["skipped"][0];
    assert!(
        skipped["path"]
            .as_str()
            .unwrap()
            .ends_with("broken__def/result.json")
            && skipped["reason"].as_str().unwrap().contains("task_name"),
        "{skipped}"
    );
    // Harbor's oracle runs the reference solution, not a model: the run says so.
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(imported["run_dir"].as_str().unwrap()).join("manifest.json"),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(manifest["variants"][0]["simulated"], true);
    let report = common::stdout_json(&common::tack(&[
        "report",
        imported["run_dir"].as_str().unwrap(),
        "--json",
    ]));
    assert_eq!(report["variants"][0]["passed"], 1);
    let again = common::tack(&[
        "import",
        "harbor-job",
        job.to_str().unwrap(),
        "--out",
        traces.to_str().unwrap(),
    ]);
    assert_eq!(again.status.code(), Some(2), "a second import is refused");
}
