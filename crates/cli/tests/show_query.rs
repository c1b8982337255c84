//! `tack show`, `tack query` and `tack report --cost` on a small run of the
//! demo suite.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(args)
        .current_dir(repo())
        .env_remove("NO_COLOR")
        .output()
        .unwrap()
}

fn stdout(output: &Output) -> String {
    assert!(
        output.status.success(),
        "tack failed ({:?}): {}",
        output.status.code(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout.clone()).unwrap()
}

struct Run {
    traces: PathBuf,
    reports: PathBuf,
    run_dir: PathBuf,
    run_id: String,
    json: Value,
}

/// oracle, sim-full and sim-approvals (whose tests and edits wait for an
/// approver) × 2 tasks × 2 trials.
fn shared_run() -> &'static Run {
    static RUN: OnceLock<Run> = OnceLock::new();
    RUN.get_or_init(|| {
        let base = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("show-query-run");
        let _ = std::fs::remove_dir_all(&base);
        let traces = base.join("traces");
        let reports = base.join("reports");
        let output = tack(&[
            "run",
            "suites/demo",
            "--variant",
            "oracle,sim-full,sim-approvals",
            "--task",
            "median-even,total-missing-file",
            "--trials",
            "2",
            "--jobs",
            "2",
            "--traces",
            traces.to_str().unwrap(),
            "--reports",
            reports.to_str().unwrap(),
            "--json",
        ]);
        let json: Value = serde_json::from_str(&stdout(&output)).unwrap();
        let run_dir = PathBuf::from(json["run"]["run_dir"].as_str().unwrap());
        let run_id = json["run"]["run_id"].as_str().unwrap().to_string();
        Run {
            traces,
            reports,
            run_dir,
            run_id,
            json,
        }
    })
}

fn trial_ids(run: &Run, variant: &str) -> Vec<String> {
    run.json["run"]["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["variant"] == variant)
        .map(|t| t["trial_id"].as_str().unwrap().to_string())
        .collect()
}

/// A sim-approvals trial that waited for an approver.
fn approved_trial(run: &Run) -> String {
    run.json["run"]["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["variant"] == "sim-approvals" && t["interventions"].as_u64() > Some(0))
        .map(|t| t["trial_id"].as_str().unwrap().to_string())
        .expect("a sim-approvals trial with an intervention")
}

fn position(text: &str, needle: &str) -> usize {
    text.find(needle)
        .unwrap_or_else(|| panic!("`{needle}` not in:\n{text}"))
}

#[test]
fn show_prints_the_header_then_calls_approvals_and_checks_in_order() {
    let run = shared_run();
    let trial = approved_trial(run);
    let text = stdout(&tack(&["show", run.run_dir.to_str().unwrap(), &trial]));
    for field in [
        "variant", "task", "model", "outcome", "steps", "tokens", "cost",
    ] {
        assert!(
            text.lines().any(|l| l.trim_start().starts_with(field)),
            "no {field}:\n{text}"
        );
    }
    assert!(text.contains("sim (simulated"), "{text}");
    // The steps line names what happened and leaves out the counts of zero.
    let steps = text
        .lines()
        .find(|l| l.trim_start().starts_with("steps"))
        .unwrap();
    assert!(steps.contains(" intervention"), "{steps}");
    assert!(!steps.contains(" 0 "), "{steps}");
    assert!(
        text.contains("cost      unknown"),
        "built-in models are unpriced:\n{text}"
    );
    let first_call = position(&text, "model call");
    let approval = position(&text, " approval ");
    let check = position(&text, "      check ");
    assert!(first_call < approval && approval < check, "{text}");
    assert!(text.contains("approved by rules"), "{text}");
    assert!(
        text.contains("→ exit "),
        "tool calls show exit codes:\n{text}"
    );
    assert!(text.contains("│ "), "tool results are shown:\n{text}");
    // Not a terminal: no colour codes.
    assert!(!text.contains('\x1b'), "{text}");
}

#[test]
fn show_takes_a_run_id_looked_up_under_traces() {
    let run = shared_run();
    let trial = &trial_ids(run, "oracle")[0];
    let traces = run.traces.to_str().unwrap();
    let by_id = stdout(&tack(&["show", &run.run_id, trial, "--traces", traces]));
    let by_path = stdout(&tack(&["show", run.run_dir.to_str().unwrap(), trial]));
    assert_eq!(by_id, by_path);
}

#[test]
fn show_json_holds_the_row_every_span_and_every_message() {
    let run = shared_run();
    let trial = approved_trial(run);
    let text = stdout(&tack(&[
        "show",
        run.run_dir.to_str().unwrap(),
        &trial,
        "--json",
    ]));
    let json: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(json["trial"]["trial_id"], trial.as_str());
    assert_eq!(json["run_id"], run.run_id.as_str());
    let count = |table: &str| {
        let sql = format!("select count(*) as n from {table} where trial_id = '{trial}'");
        let out = stdout(&tack(&[
            "query",
            &sql,
            run.run_dir.to_str().unwrap(),
            "--csv",
        ]));
        out.lines().nth(1).unwrap().parse::<usize>().unwrap()
    };
    let spans = json["spans"].as_array().unwrap();
    assert_eq!(spans.len(), count("spans"));
    assert_eq!(
        json["messages"].as_array().unwrap().len(),
        tack_trace::trial_transcript(&run.run_dir, &trial)
            .unwrap()
            .len()
    );
    assert!(spans.iter().all(|s| s["sandbox_denials"].is_array()));
    assert!(spans.iter().any(|s| s["kind"] == "approval"));
}

/// `--full` shows each tool call's arguments as the model wrote them:
/// a failed edit is about the whitespace a one-line summary folds.
#[test]
fn show_full_keeps_the_arguments_whole() {
    let run = shared_run();
    let run_dir = run.run_dir.to_str().unwrap();
    let trial = trial_ids(run, "sim-full").remove(0);
    let json: Value =
        serde_json::from_str(&stdout(&tack(&["show", run_dir, &trial, "--json"]))).unwrap();
    let arguments: Vec<&str> = json["spans"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["tool_arguments"].as_str())
        .collect();
    assert!(!arguments.is_empty(), "{json:#}");
    let full = stdout(&tack(&["show", run_dir, &trial, "--full"]));
    for argument in &arguments {
        assert!(full.contains(argument), "{argument} in\n{full}");
    }
    let spaced = arguments.iter().find(|a| a.contains("  ") || a.len() > 120);
    let summary = stdout(&tack(&["show", run_dir, &trial]));
    if let Some(spaced) = spaced {
        assert!(
            !summary.contains(spaced),
            "folded without --full:\n{summary}"
        );
    }
}

#[test]
fn an_unknown_trial_or_run_exits_2_and_lists_what_there_is() {
    let run = shared_run();
    let output = tack(&[
        "show",
        run.run_dir.to_str().unwrap(),
        "sim-full--median-evn--0",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("no trial `sim-full--median-evn--0`"),
        "{stderr}"
    );
    assert!(stderr.contains("sim-full--median-even--0"), "{stderr}");

    let output = tack(&[
        "show",
        "no-such-run",
        "x",
        "--traces",
        run.traces.to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains(&run.run_id), "{stderr}");
}

/// (variant, count) pairs from `tack query --json`.
fn variant_counts(json: &str) -> BTreeMap<String, u64> {
    let rows: Vec<Value> = serde_json::from_str(json).unwrap();
    rows.iter()
        .map(|r| {
            (
                r["variant"].as_str().unwrap().to_string(),
                r["n"].as_u64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn query_groups_trials_as_the_run_recorded_them() {
    let run = shared_run();
    let sql = "select variant, count(*) as n from trials group by 1";
    let json = stdout(&tack(&[
        "query",
        sql,
        "--traces",
        run.traces.to_str().unwrap(),
        "--json",
    ]));
    let counts = variant_counts(&json);
    let expected: BTreeMap<String, u64> = ["oracle", "sim-full", "sim-approvals"]
        .iter()
        .map(|v| (v.to_string(), 4))
        .collect();
    assert_eq!(counts, expected);
}

/// A run named twice is queried once; two copies of one run (the same
/// run id) are refused: every row would count twice.
#[test]
fn a_run_named_twice_counts_once_and_a_copy_is_refused() {
    let run = shared_run();
    let dir = run.run_dir.to_str().unwrap();
    let sql = "select variant, count(*) as n from trials group by 1";
    let traces = run.traces.to_str().unwrap();
    let named = [
        "query",
        sql,
        dir,
        dir,
        &run.run_id,
        "--traces",
        traces,
        "--json",
    ];
    let json = stdout(&tack(&named));
    assert!(variant_counts(&json).values().all(|n| *n == 4), "{json}");
    let copy = tempfile::tempdir().unwrap();
    let copied = copy.path().join(&run.run_id);
    tack_suite::copy_tree(&run.run_dir, &copied, &run.run_dir).unwrap();
    let output = tack(&["query", sql, dir, copied.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("are copies of one run"), "{stderr}");
}

/// DuckDB reading the same files with a plain glob must agree with `tack
/// query`. CI installs DuckDB (.ci/run) and sets TACK_REQUIRE_PYTHON_READERS;
/// elsewhere the test says it skipped when DuckDB is missing.
#[test]
fn query_agrees_with_duckdb_on_the_same_files() {
    let run = shared_run();
    let python = std::env::var("TACK_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let probe = Command::new(&python).args(["-c", "import duckdb"]).output();
    if !probe.is_ok_and(|o| o.status.success()) {
        assert!(
            std::env::var_os("TACK_REQUIRE_PYTHON_READERS").is_none(),
            "duckdb is required here but `{python}` cannot import it"
        );
        eprintln!("skipped: {python} cannot import duckdb (CI installs it)");
        return;
    }
    let script = r#"
import sys, json, duckdb
traces = sys.argv[1]
rows = duckdb.sql(f"select variant, count(*) from '{traces}/*/trials/*.parquet' group by 1").fetchall()
calls = duckdb.sql(f"select count(*) from '{traces}/*/spans/*.parquet' where kind = 'model_call'").fetchall()[0][0]
print(json.dumps({"variants": {v: n for v, n in rows}, "model_calls": calls}))
"#;
    let output = Command::new(&python)
        .args(["-c", script, run.traces.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let duck: Value = serde_json::from_slice(&output.stdout).unwrap();
    let duck_counts: BTreeMap<String, u64> = duck["variants"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_u64().unwrap()))
        .collect();
    let traces = run.traces.to_str().unwrap();
    let sql = "select variant, count(*) as n from trials group by 1";
    let ours = variant_counts(&stdout(&tack(&[
        "query", sql, "--traces", traces, "--json",
    ])));
    assert_eq!(ours, duck_counts);
    let sql = "select count(*) from spans where kind = 'model_call'";
    let csv = stdout(&tack(&["query", sql, "--traces", traces, "--csv"]));
    assert_eq!(
        csv.lines().nth(1).unwrap().parse::<u64>().unwrap(),
        duck["model_calls"].as_u64().unwrap()
    );
}

/// A list column is every item, as a JSON array under --json and that
/// array's text in a CSV field: Polars' own printing of a list elides its
/// middle, which a script would take for the data.
#[test]
fn query_json_and_csv_keep_every_item_of_a_list() {
    let run = shared_run();
    let trial = approved_trial(run);
    let dir = run.run_dir.to_str().unwrap();
    let sql = format!("select message_ids from trials where trial_id = '{trial}'");
    let json: Value =
        serde_json::from_str(&stdout(&tack(&["query", &sql, dir, "--json"]))).unwrap();
    let ids = json[0]["message_ids"].as_array().unwrap();
    let shown: Value =
        serde_json::from_str(&stdout(&tack(&["show", dir, &trial, "--json"]))).unwrap();
    let listed: Vec<&Value> = shown["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["message_id"])
        .collect();
    assert!(
        ids.len() > 10,
        "a long list, the kind Polars elides: {ids:?}"
    );
    assert_eq!(ids.iter().collect::<Vec<_>>(), listed);
    let csv = stdout(&tack(&["query", &sql, dir, "--csv"]));
    let field = csv.lines().nth(1).unwrap();
    let unquoted = field.trim_matches('"').replace("\"\"", "\"");
    let from_csv: Value = serde_json::from_str(&unquoted).unwrap();
    assert_eq!(from_csv, json[0]["message_ids"], "{csv}");
}

#[test]
fn every_table_carries_the_run_id_and_the_formats_differ_as_documented() {
    let run = shared_run();
    let traces = run.traces.to_str().unwrap();
    for table in ["trials", "spans", "messages"] {
        let sql = format!("select run_id, count(*) as n from {table} group by run_id");
        let text = stdout(&tack(&["query", &sql, "--traces", traces]));
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("run_id") && lines[0].ends_with(" n"),
            "{text}"
        );
        assert!(lines[1].starts_with("---"), "{text}");
        assert!(lines[2].starts_with(&run.run_id), "{table}: {text}");
        assert_eq!(lines.last(), Some(&"(1 row)"), "{text}");
    }
    let sql = "select trial_id, outcome from trials order by trial_id";
    let csv = stdout(&tack(&["query", sql, "--traces", traces, "--csv"]));
    assert!(csv.starts_with("trial_id,outcome\n"), "{csv}");
    assert_eq!(csv.lines().count(), 1 + 12, "{csv}");
}

#[test]
fn a_bad_query_exits_2_with_polars_message_and_the_tables() {
    let run = shared_run();
    let traces = run.traces.to_str().unwrap();
    let empty = tack(&["query", "  ", "--traces", traces]);
    assert_eq!(empty.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&empty.stderr);
    assert!(
        stderr.contains("the query is empty: give one SQL statement"),
        "{stderr}"
    );
    // Naming no table it knows: every table's columns.
    for sql in ["selec 1", "select * from nope"] {
        let output = tack(&["query", sql, "--traces", traces]);
        assert_eq!(output.status.code(), Some(2), "{sql}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("the query failed"), "{stderr}");
        for table in ["trials: run_id", "spans: run_id", "messages: run_id"] {
            assert!(stderr.contains(table), "{sql}: {stderr}");
        }
    }
    // An unknown column of a table it names: that table's columns, the
    // others by name, and the nearest column.
    let output = tack(&["query", "select outcom from trials", "--traces", traces]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("unable to find column \"outcom\""),
        "{stderr}"
    );
    assert!(stderr.contains("hint: did you mean outcome?"), "{stderr}");
    assert!(
        stderr.contains("(the tables: trials, final_trials, spans, messages)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("trials: run_id") && !stderr.contains("spans: run_id"),
        "{stderr}"
    );
}

#[test]
fn report_cost_says_built_in_models_are_unpriced_not_free() {
    let run = shared_run();
    let dir = run.run_dir.to_str().unwrap();
    let text = stdout(&tack(&["report", dir, "--cost"]));
    assert!(text.contains("unknown"), "{text}");
    assert!(!text.contains("$0 "), "{text}");
    assert!(
        text.contains("price of sim: none (built-in model"),
        "{text}"
    );
    assert!(text.contains("cost is unknown, not 0"), "{text}");
    // Built-in models cache nothing and do not reason: those columns go.
    assert!(
        text.contains("none in this run: cached, cache-write, reasoning"),
        "{text}"
    );
    assert!(!text.lines().any(|l| l.contains("reasoning  ")), "{text}");

    let json: Value =
        serde_json::from_str(&stdout(&tack(&["report", dir, "--cost", "--json"]))).unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 3 * 2, "variants × tasks");
    assert!(rows.iter().all(|r| r["status"] == "unknown"), "{json}");
    let calls: u64 = rows.iter().map(|r| r["calls"].as_u64().unwrap()).sum();
    assert_eq!(calls, json["total"]["unknown_cost_calls"].as_u64().unwrap());
    // Every variant built in: so is the total (it said `false`).
    assert_eq!(json["total"]["simulated"], true, "{json}");

    // `tack run` wrote the HTML report: cost.html and cost.csv beside index.html.
    let report = run.reports.join(&run.run_id);
    let index = std::fs::read_to_string(report.join("index.html")).unwrap();
    assert!(index.contains("href=\"cost.html\""));
    let page = std::fs::read_to_string(report.join("cost.html")).unwrap();
    assert!(page.contains("simulated-banner"), "the page says simulated");
    assert!(page.contains("Unknown costs are not zero"));
    assert!(!page.contains("<script"));
    let csv = std::fs::read_to_string(report.join("cost.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + rows.len());
}

#[test]
fn a_run_before_the_sql_is_a_usage_error_that_says_the_order() {
    let run = shared_run();
    let dir = run.run_dir.to_str().unwrap();
    let output = tack(&["query", dir, "select count(*) from trials"]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the SQL comes first")
            && stderr.contains(&format!("tack query \"select count(*) from trials\" {dir}")),
        "{stderr}"
    );
}

#[test]
fn query_without_runs_is_a_usage_error() {
    let empty = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("no-traces-here");
    let _ = std::fs::create_dir_all(&empty);
    let output = tack(&[
        "query",
        "select 1",
        "--traces",
        Path::new(&empty).to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("no runs"));
}

/// A run in object storage is read by URL as any other: show, query and
/// export fetch it into tack's cache (a `file://` bucket here).
#[test]
fn show_query_and_export_read_a_run_by_its_url() {
    let dir = tempfile::tempdir().unwrap();
    let bucket = format!("file://{}/bucket", dir.path().display());
    let cache = dir.path().join("cache");
    let tack_with_cache = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_tack"))
            .args(args)
            .current_dir(repo())
            .env("XDG_CACHE_HOME", &cache)
            .output()
            .unwrap()
    };
    let run = tack_with_cache(&[
        "run",
        "suites/demo",
        "--variant",
        "oracle",
        "--task",
        "median-even",
        "--trials",
        "1",
        "--traces",
        &bucket,
        "--no-report",
        "--json",
    ]);
    let json: Value = serde_json::from_str(&stdout(&run)).unwrap();
    let url = format!("{bucket}/{}", json["run"]["run_id"].as_str().unwrap());
    let show = stdout(&tack_with_cache(&["show", &url, "oracle--median-even--0"]));
    assert!(show.contains("trial oracle--median-even--0"), "{show}");
    let sql = "select count(*) as n from trials";
    let query = stdout(&tack_with_cache(&["query", sql, &url, "--csv"]));
    assert_eq!(query.lines().nth(1), Some("1"), "{query}");
    let out = dir.path().join("atif");
    stdout(&tack_with_cache(&[
        "export",
        "atif",
        &url,
        "--out",
        out.to_str().unwrap(),
    ]));
    assert!(out.join("oracle--median-even--0.json").is_file());
}

/// `tack show RUN` without a trial names some, those that did not pass
/// first (the ones worth opening), each with how it ended.
#[test]
fn show_without_a_trial_lists_the_ones_that_did_not_pass_first() {
    let run = shared_run();
    let dir = run.run_dir.to_str().unwrap();
    let output = tack(&["show", dir]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    let counted = tack(&[
        "query",
        "select count(*) as n from trials where outcome <> 'passed'",
        dir,
        "--json",
    ]);
    let counted: Value = serde_json::from_slice(&counted.stdout).unwrap();
    let failed = counted[0]["n"].as_u64().unwrap();
    let first = stderr
        .split("e.g. ")
        .nth(1)
        .and_then(|listed| listed.split(", ").next())
        .unwrap_or_default();
    assert!(first.contains(" ("), "{stderr}");
    assert_eq!(
        first.contains("(passed)"),
        failed == 0,
        "{failed}: {stderr}"
    );
}
