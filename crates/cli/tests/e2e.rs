//! End-to-end: run the `tack` binary on a small slice of the demo suite and
//! read back what it wrote.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use arrow_array::{Array, ListArray, StringArray, UInt32Array};
use serde_json::Value;

mod common;
use common::{stdout_json, tack};

const TASKS: &str = "duration-minutes,total-missing-file";
const TRIALS: usize = 2;

/// One run shared by the tests that read it: every demo variant × 2 tasks × 2 trials.
fn shared_run() -> &'static (PathBuf, Value) {
    static RUN: OnceLock<(PathBuf, Value)> = OnceLock::new();
    RUN.get_or_init(|| {
        let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("e2e-run");
        let _ = std::fs::remove_dir_all(&base);
        let traces = base.join("traces");
        let reports = base.join("reports");
        let output = tack(&[
            "run",
            "suites/demo",
            "--task",
            TASKS,
            "--trials",
            &TRIALS.to_string(),
            "--jobs",
            "2",
            "--traces",
            traces.to_str().unwrap(),
            "--reports",
            reports.to_str().unwrap(),
            "--json",
        ]);
        let json = stdout_json(&output);
        let run_dir = PathBuf::from(json["run"]["run_dir"].as_str().unwrap());
        (run_dir, json)
    })
}

fn column_sum(run_dir: &Path, table: &str, column: &str) -> u64 {
    tack_trace::read_table(run_dir, table)
        .unwrap()
        .iter()
        .map(|batch| {
            let values = batch.column_by_name(column).unwrap();
            let values = values.as_any().downcast_ref::<UInt32Array>().unwrap();
            values.iter().flatten().map(u64::from).sum::<u64>()
        })
        .sum()
}

/// The messages in all trials' transcripts, counting repeats.
fn transcript_lengths(run_dir: &Path) -> u64 {
    tack_trace::read_table(run_dir, "trials")
        .unwrap()
        .iter()
        .map(|batch| {
            let lists = batch.column_by_name("message_ids").unwrap();
            let lists = lists.as_any().downcast_ref::<ListArray>().unwrap();
            (0..lists.len())
                .map(|i| lists.value_length(i) as u64)
                .sum::<u64>()
        })
        .sum()
}

fn count_kind(run_dir: &Path, kind: &str) -> usize {
    count_spans(run_dir, |k, _| k == kind)
}

/// Spans whose kind and name pass `keep`.
fn count_spans(run_dir: &Path, keep: impl Fn(&str, &str) -> bool) -> usize {
    tack_trace::read_table(run_dir, "spans")
        .unwrap()
        .iter()
        .map(|batch| {
            let column = |name: &str| {
                let values = batch.column_by_name(name).unwrap();
                values
                    .as_any()
                    .downcast_ref::<StringArray>()
                    .unwrap()
                    .clone()
            };
            let (kinds, names) = (column("kind"), column("name"));
            (0..batch.num_rows())
                .filter(|&i| keep(kinds.value(i), names.value(i)))
                .count()
        })
        .sum()
}

/// Distinct `task` spans that subagents' model calls point at.
fn subagents_started(run_dir: &Path) -> usize {
    let mut parents = std::collections::HashSet::new();
    for batch in tack_trace::read_table(run_dir, "spans").unwrap() {
        let column = |name: &str| batch.column_by_name(name).unwrap().clone();
        let (trials, names, parent) =
            (column("trial_id"), column("name"), column("parent_span_id"));
        let trials = trials.as_any().downcast_ref::<StringArray>().unwrap();
        let names = names.as_any().downcast_ref::<StringArray>().unwrap();
        let parent = parent
            .as_any()
            .downcast_ref::<arrow_array::UInt32Array>()
            .unwrap();
        for i in 0..batch.num_rows() {
            if names.value(i) == "subagent" {
                parents.insert((trials.value(i).to_string(), parent.value(i)));
            }
        }
    }
    parents.len()
}

#[test]
fn the_trace_holds_one_row_per_trial_model_call_tool_call_and_message() {
    let (run_dir, json) = shared_run();
    let trials = json["run"]["trials"].as_array().unwrap();
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(run_dir.join("manifest.json")).unwrap())
            .unwrap();
    let variants = manifest["variants"].as_array().unwrap().len();
    assert!(variants >= 3);
    assert_eq!(trials.len(), variants * 2 * TRIALS);
    assert_eq!(
        tack_trace::count_rows(run_dir, "trials").unwrap(),
        trials.len()
    );

    let steps: u64 = trials.iter().map(|t| t["steps"].as_u64().unwrap()).sum();
    assert_eq!(column_sum(run_dir, "trials", "steps"), steps);
    // One model-call span per step, plus one per retried attempt, plus
    // the compactions (sim-compact summarises the history as it goes),
    // plus the subagents' calls (sim-delegate's `task` calls: their steps
    // are their own, not the trial's).
    let retries = column_sum(run_dir, "trials", "retries");
    let compactions = count_spans(run_dir, |k, n| k == "model_call" && n == "compaction");
    let subagent_calls = count_spans(run_dir, |k, n| k == "model_call" && n == "subagent");
    // A `task` call the model malformed started no subagent.
    let subagents = subagents_started(run_dir);
    assert!(subagents > 0 && subagent_calls >= 2 * subagents);
    assert_eq!(
        count_kind(run_dir, "model_call") as u64,
        steps + retries + compactions as u64 + subagent_calls as u64
    );
    let tool_calls = column_sum(run_dir, "trials", "tool_calls");
    assert!(
        tool_calls > steps / 2,
        "{tool_calls} tool calls for {steps} steps"
    );
    assert_eq!(count_kind(run_dir, "tool_call") as u64, tool_calls);
    // Checks run once, and again after each feedback round.
    let feedback = column_sum(run_dir, "trials", "feedback_rounds");
    assert_eq!(
        count_kind(run_dir, "check") as u64,
        trials.len() as u64 + feedback
    );
    // Each transcript: system prompt and instruction, one message per model
    // answer (a step whose call the model refused has none: sim-window's
    // context_length_exceeded), per tool result and per feedback round, and
    // per compaction its instruction and the summary, and each stub a
    // stripped result was replaced by (sim-strip), and each subagent's
    // system prompt, task and answers (its tool results are among the
    // trial's tool calls). The run stores each
    // distinct message once, so the shared system prompt and the repeated
    // instructions and answers make the table far smaller than the sum.
    let refused = trials
        .iter()
        .filter(|t| t["stop_reason"] == "model_error")
        .count() as u64;
    let stubs: usize = trials
        .iter()
        .map(|t| {
            let trial = t["trial_id"].as_str().unwrap();
            let transcript = tack_trace::trial_transcript(run_dir, trial).unwrap();
            transcript
                .iter()
                .filter(|m| {
                    m.message
                        .content
                        .contains("dropped by the harness to save context")
                })
                .count()
        })
        .sum();
    let transcripts = transcript_lengths(run_dir);
    assert_eq!(
        transcripts,
        2 * trials.len() as u64 + steps - refused
            + tool_calls
            + feedback
            + 2 * compactions as u64
            + stubs as u64
            + 2 * subagents as u64
            + subagent_calls as u64
    );
    let messages = tack_trace::count_rows(run_dir, "messages").unwrap() as u64;
    assert!(
        messages * 2 < transcripts,
        "{messages} stored messages for {transcripts} in transcripts"
    );
    assert_eq!(
        std::fs::read_dir(run_dir.join("journal")).unwrap().count(),
        0
    );

    assert_eq!(manifest["status"], "finished");
    assert_eq!(
        manifest["suite"]["content_hash"].as_str().unwrap().len(),
        64
    );
}

#[test]
fn the_oracle_scores_everything_and_the_report_says_it_is_simulated() {
    let (run_dir, json) = shared_run();
    let analysis = stdout_json(&tack(&["report", run_dir.to_str().unwrap(), "--json"]));
    let variants = analysis["variants"].as_array().unwrap();
    let oracle = variants.iter().find(|v| v["variant"] == "oracle").unwrap();
    assert_eq!(oracle["success_rate"], 1.0);
    assert_eq!(oracle["trials"], 2 * TRIALS as u64);

    let index = PathBuf::from(json["report"].as_str().unwrap());
    let html = std::fs::read_to_string(&index).unwrap();
    assert!(html.contains("Results from simulated models"));
    assert!(
        !html.contains("<script"),
        "the report must need no JavaScript"
    );
    let failed: Vec<&Value> = json["run"]["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["outcome"] != "passed")
        .collect();
    for trial in failed {
        let id = trial["trial_id"].as_str().unwrap();
        let page = index
            .parent()
            .unwrap()
            .join("trials")
            .join(format!("{id}.html"));
        let page = std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{id}: {e}"));
        assert!(
            page.contains("Tool call"),
            "{id}: the page shows no tool calls"
        );
    }
}

/// DuckDB and pyarrow must read the traces as they are. CI installs them
/// (.ci/run) and sets TACK_REQUIRE_PYTHON_READERS; elsewhere the test says
/// it skipped when they are missing.
#[test]
fn duckdb_and_pyarrow_read_the_traces() {
    let (run_dir, json) = shared_run();
    let python = std::env::var("TACK_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let probe = Command::new(&python)
        .args(["-c", "import duckdb, pyarrow"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var_os("TACK_REQUIRE_PYTHON_READERS").is_none(),
            "duckdb/pyarrow are required here but `{python}` cannot import them"
        );
        eprintln!("skipped: {python} cannot import duckdb and pyarrow (CI installs them)");
        return;
    }
    let script = r#"
import sys, duckdb, pyarrow.parquet as pq, pyarrow.dataset as ds
run = sys.argv[1]
con = duckdb.connect()
one = lambda sql: con.execute(sql).fetchall()[0][0]
trials = one(f"select count(*) from '{run}/trials/*.parquet'")
steps = one(f"select sum(steps) from '{run}/trials/*.parquet'")
calls = one(f"select count(*) from '{run}/spans/*.parquet' where kind = 'model_call' and status = 'ok' and name not in ('compaction', 'subagent')")
messages = ds.dataset(f"{run}/messages", format="parquet").to_table().num_rows
sent = one(f"select sum(len(message_ids)) from '{run}/trials/*.parquet'")
# Every id a transcript or a model call lists is in the messages table.
dangling = one(f"""
  select count(*) from (
    select unnest(message_ids) as id from '{run}/trials/*.parquet'
    union all
    select unnest(message_ids) from '{run}/spans/*.parquet' where message_ids is not null
  ) listed anti join '{run}/messages/*.parquet' m on listed.id = m.message_id""")
print(trials, steps, calls, messages, sent, dangling)
"#;
    let output = Command::new(&python)
        .args(["-c", script, run_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let numbers: Vec<u64> = String::from_utf8_lossy(&output.stdout)
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    let trials = json["run"]["trials"].as_array().unwrap();
    let steps: u64 = trials.iter().map(|t| t["steps"].as_u64().unwrap()).sum();
    // A step whose call the model refused (sim-window's window) has no
    // successful call; compactions and subagents' calls are not steps.
    let refused = trials
        .iter()
        .filter(|t| t["stop_reason"] == "model_error")
        .count() as u64;
    assert_eq!(numbers[0], trials.len() as u64);
    assert_eq!(numbers[1], steps);
    assert_eq!(numbers[2], steps - refused);
    assert_eq!(
        numbers[3],
        tack_trace::count_rows(run_dir, "messages").unwrap() as u64
    );
    assert_eq!(numbers[4], transcript_lengths(run_dir));
    assert_eq!(numbers[5], 0, "message ids with no message");
}

#[test]
fn suite_check_proves_the_demo_sound() {
    let output = tack(&["suite", "check", "suites/demo", "--json"]);
    let json = stdout_json(&output);
    let tasks = json["tasks"].as_array().unwrap();
    assert!(tasks.len() >= 8);
    for task in tasks {
        assert_eq!(task["fails_untouched"], true, "{task}");
        assert_eq!(task["passes_with_solution"], true, "{task}");
    }
    assert_eq!(json["sound"], true);
}

/// A decoy is a wrong fix the sim agent makes when it misses: one that
/// passes every check would score a miss as a pass, so the task is unsound.
#[test]
fn a_decoy_that_passes_the_checks_makes_its_task_unsound() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("demo");
    common::copy_dir(&common::repo().join("suites/demo"), &suite);
    let task = suite.join("tasks/median-even/task.toml");
    let text = std::fs::read_to_string(&task).unwrap();
    // The reference fix, once more as a third decoy.
    let fix = text
        .split("[[solution.edits]]")
        .nth(1)
        .and_then(|rest| rest.split("[[solution.decoys]]").next())
        .unwrap();
    std::fs::write(&task, format!("{text}\n[[solution.decoys]]{fix}")).unwrap();
    let output = tack(&[
        "suite",
        "check",
        suite.to_str().unwrap(),
        "--task",
        "median-even",
        "--json",
    ]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let checked = &json["tasks"][0];
    assert_eq!(
        checked["passing_decoys"],
        serde_json::json!([2]),
        "{json:#}"
    );
    assert!(
        checked["detail"]
            .as_str()
            .unwrap()
            .starts_with("solution.decoys[2] pass every check"),
        "{json:#}"
    );
    assert_eq!(json["sound"], false);
}

/// A solution script that fixes the task and then fails (Harbor tasks do:
/// a `solve.sh` whose last step runs a test tool the image lacks) leaves
/// the verdict to the checks, in `tack suite check` as in `tack run`, and
/// the check says how the script ended.
#[test]
fn a_solution_script_that_fails_after_its_fix_is_judged_by_the_checks() {
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("suite/tasks/calc");
    std::fs::create_dir_all(task.join("fixture")).unwrap();
    std::fs::write(
        dir.path().join("suite/suite.toml"),
        "[suite]\nname = \"fails-late\"\n\n[[variants]]\nname = \"oracle\"\nmodel = \"oracle\"\n",
    )
    .unwrap();
    std::fs::write(
        task.join("fixture/calc.py"),
        "def add(a, b):\n    return a - b\n",
    )
    .unwrap();
    std::fs::write(
        task.join("task.toml"),
        "instruction = \"Fix add in calc.py.\"\n\n\
         [[checks]]\nname = \"adds\"\n\
         run = \"python3 -c 'import calc; assert calc.add(2, 2) == 4'\"\n\n\
         [solution]\nscript = \"sed -i 's/a - b/a + b/' calc.py && echo fixed && no-such-test-tool\"\n",
    )
    .unwrap();
    let tack_in = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_tack"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let check = tack_in(&["suite", "check", "suite", "--json"]);
    let json = stdout_json(&check);
    let calc = &json["tasks"][0];
    assert_eq!(json["sound"], true, "{json:#}");
    assert_eq!(calc["checked"], true);
    let said = calc["solution_failed"].as_str().unwrap();
    assert!(
        said.starts_with("the solution script exited with code 127"),
        "{said}"
    );
    assert!(
        said.contains("fixed") && said.contains("no-such-test-tool"),
        "{said}"
    );

    let text = tack_in(&["suite", "check", "suite"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("the solution script exited with code 127"),
        "{text}"
    );

    let run = tack_in(&[
        "run",
        "suite",
        "--json",
        "--traces",
        "traces",
        "--no-report",
    ]);
    let run = stdout_json(&run);
    assert_eq!(run["run"]["trials"][0]["outcome"], "passed", "{run:#}");
}

#[test]
fn suite_show_lists_variants_and_tasks() {
    let output = tack(&["suite", "show", "suites/demo"]);
    assert!(output.status.success());
    insta::assert_snapshot!(String::from_utf8_lossy(&output.stdout));
}

fn usage_error(args: &[&str]) -> String {
    let output = tack(args);
    assert_eq!(
        output.status.code(),
        Some(2),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn input_errors_exit_2_and_say_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("suite.toml"),
        "[suite]\nname = \"x\"\ntrails = 2\n",
    )
    .unwrap();
    let message = usage_error(&["run", dir.path().to_str().unwrap()]);
    let message = message.replace(dir.path().to_str().unwrap(), "<suite>");
    insta::assert_snapshot!("bad_suite_field", message);

    let message = usage_error(&["run", "suites/demo", "--variant", "nope"]);
    insta::assert_snapshot!("unknown_variant", message);

    let message = usage_error(&["report", dir.path().to_str().unwrap()]);
    assert!(
        message.contains(&format!(
            "{} is not a run's trace directory",
            dir.path().display()
        )),
        "{message}"
    );
}

/// A replay says how it came out against the trial it replays: replayed
/// as recorded, the same; after a file appeared in the task, the first tool
/// call whose result differs; after its check changed, the outcome.
#[test]
fn a_replay_says_whether_and_where_it_differs_from_the_original() {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("demo");
    common::copy_dir(&common::repo().join("suites/demo"), &suite);
    let run = common::run_suite(
        &suite,
        dir.path(),
        &[
            "--variant",
            "oracle,sim-full",
            "--task",
            "median-even",
            "--trials",
            "1",
        ],
        &[],
    );
    let run_dir = run["run"]["run_dir"].as_str().unwrap().to_string();
    let replay = |trial: &str| {
        let output = Command::new(env!("CARGO_BIN_EXE_tack"))
            .args(["replay", &run_dir, trial, "--json", "--traces"])
            .arg(dir.path().join("traces"))
            .arg("--reports")
            .arg(dir.path().join("reports"))
            .output()
            .unwrap();
        stdout_json(&output)["replay"].clone()
    };

    let same = replay("oracle--median-even--0");
    assert_eq!(same["original_trial"], "oracle--median-even--0", "{same:#}");
    assert_eq!(same["original_outcome"], "passed", "{same:#}");
    assert_eq!(same["replay_outcome"], "passed", "{same:#}");
    assert!(same["first_different_call"].is_null(), "{same:#}");

    // sim-full starts by listing the project's files.
    let task = suite.join("tasks/median-even");
    std::fs::write(task.join("fixture/NOTES.md"), "p50 is the median\n").unwrap();
    let listed = replay("sim-full--median-even--0");
    assert_eq!(
        listed["first_different_call"],
        serde_json::json!({"number": 1, "tool": "bash", "differs_in": "stdout"}),
        "{listed:#}"
    );

    std::fs::write(task.join("checks/check_stats.py"), "raise SystemExit(1)\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["replay", &run_dir, "oracle--median-even--0", "--traces"])
        .arg(dir.path().join("traces"))
        .arg("--reports")
        .arg(dir.path().join("reports"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(
            "replay: oracle--median-even--0 passed then, verification_failed now; \
             every tool result as recorded"
        ),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
