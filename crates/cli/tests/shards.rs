//! `tack run --shard` and `tack merge` through the binary: three shards of a
//! plan, run as separate processes, merge into the trials of one unsharded
//! run, and shards of different plans refuse to merge.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

const SLICE: [&str; 6] = [
    "-v",
    "oracle,sim-full",
    "-t",
    "median-even,leap-year-400,duration-minutes",
    "--trials",
    "2",
];

fn demo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../suites/demo")
}

fn tack(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tack"));
    command.args(args).current_dir(dir);
    for name in [
        "JOB_COMPLETION_INDEX",
        "TACK_SHARDS",
        "SLURM_ARRAY_TASK_ID",
        "SLURM_ARRAY_TASK_COUNT",
        "SLURM_ARRAY_TASK_MIN",
    ] {
        command.env_remove(name);
    }
    command.envs(env.iter().copied());
    command.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Runs the slice of the demo and returns the run directory.
fn run(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> PathBuf {
    let demo = demo();
    let mut args = vec![
        "run",
        demo.to_str().unwrap(),
        "--json",
        "--no-report",
        "--traces",
        "traces",
        "-j",
        "2",
    ];
    args.extend(SLICE);
    args.extend(extra);
    let output = tack(dir, &args, env);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    dir.join(json["run"]["run_dir"].as_str().unwrap())
}

fn trial_ids(run_dir: &Path) -> Vec<String> {
    let mut ids: Vec<String> = tack_trace::stored_trial_ids(run_dir)
        .unwrap()
        .into_iter()
        .collect();
    ids.sort();
    ids
}

fn manifest(run_dir: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(run_dir.join("manifest.json")).unwrap()).unwrap()
}

fn merge(dir: &Path, runs: &[&Path], out: &str) -> Output {
    let mut args = vec!["merge"];
    args.extend(runs.iter().map(|r| r.to_str().unwrap()));
    args.extend(["--out", out]);
    tack(dir, &args, &[])
}

#[test]
fn three_shards_merge_into_the_trials_of_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let whole = run(dir.path(), &[], &[]);
    let first = run(dir.path(), &["--shard", "1/3"], &[]);
    let second = run(
        dir.path(),
        &[],
        &[
            ("SLURM_ARRAY_TASK_ID", "1"),
            ("SLURM_ARRAY_TASK_COUNT", "3"),
        ],
    );
    let third = run(dir.path(), &["--shard", "3/3"], &[]);
    assert_eq!(manifest(&second)["shard"]["index"], 2);
    assert_eq!(manifest(&second)["shard"]["count"], 3);
    let sizes: Vec<usize> = [&first, &second, &third]
        .iter()
        .map(|run| trial_ids(run).len())
        .collect();
    assert_eq!(sizes, [4, 4, 4]);

    let output = merge(dir.path(), &[&third, &first, &second], "traces/merged");
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(text(&output.stdout).starts_with("merged 3 shard runs (12 trial attempts)"));
    let merged = dir.path().join("traces/merged");
    let ids = trial_ids(&merged);
    assert_eq!(ids, trial_ids(&whole));
    assert_eq!(ids.iter().collect::<BTreeSet<_>>().len(), 12);
    // Compacted: the merged run is one part per table, as a single run is,
    // and the messages the shards share are stored once.
    for table in ["trials", "spans", "messages"] {
        assert_eq!(tack_trace::table_files(&merged, table).unwrap().len(), 1);
    }
    let stored = |run: &Path| tack_trace::count_rows(run, "messages").unwrap();
    assert!(stored(&merged) < stored(&first) + stored(&second) + stored(&third));
    let m = manifest(&merged);
    assert_eq!(m["status"], "finished");
    assert!(m["shard"].is_null());
    assert_eq!(m["merged_from"].as_array().unwrap().len(), 3);
    // By run ids, looked up under traces/, as every other command takes them.
    let ids: Vec<&Path> = [&first, &second, &third]
        .iter()
        .map(|run| Path::new(run.file_name().unwrap()))
        .collect();
    let mut args = vec!["merge"];
    args.extend(ids.iter().map(|id| id.to_str().unwrap()));
    args.extend(["--out", "traces/by-id", "--json"]);
    let output = tack(dir.path(), &args, &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["run_id"], "by-id", "{json}");
    assert_eq!(json["shards"], 3, "{json}");
    assert_eq!(json["trial_attempts"], 12, "{json}");
    assert_eq!(json["complete"], true, "{json}");
    assert_eq!(
        trial_ids(&dir.path().join("traces/by-id")),
        trial_ids(&whole)
    );

    let report = tack(
        dir.path(),
        &["report", "traces/merged", "--out", "reports/merged"],
        &[],
    );
    assert!(report.status.success(), "{}", text(&report.stderr));
    let compare = tack(
        dir.path(),
        &[
            "compare",
            whole.to_str().unwrap(),
            "traces/merged",
            "--variants",
            "sim-full",
            "--json",
        ],
        &[],
    );
    assert!(compare.status.success(), "{}", text(&compare.stderr));
    // One shard is some of the plan's trials: gating on it would judge the
    // candidate by a third of its tasks, unpaired.
    let gate = tack(
        dir.path(),
        &[
            "gate",
            "traces/merged",
            first.to_str().unwrap(),
            "--variants",
            "sim-full",
        ],
        &[],
    );
    assert_eq!(gate.status.code(), Some(2), "{}", text(&gate.stdout));
    let said = text(&gate.stderr);
    assert!(said.contains("is shard 1/3 of its plan"), "{said}");
    assert!(said.contains("tack merge"), "{said}");

    // A shard missing, or the same shard twice, is refused.
    let output = merge(dir.path(), &[&first, &second], "traces/partial");
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("3/3"));
    let output = merge(dir.path(), &[&first, &first, &second], "traces/twice");
    assert_eq!(output.status.code(), Some(2));
    let partial = merge(dir.path(), &[&first, &second], "traces/partial");
    assert_eq!(partial.status.code(), Some(2));
    let mut args = vec!["merge", first.to_str().unwrap(), second.to_str().unwrap()];
    args.extend(["--out", "traces/partial", "--allow-partial"]);
    let output = tack(dir.path(), &args, &[]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert_eq!(
        manifest(&dir.path().join("traces/partial"))["status"],
        "interrupted"
    );

    // A trial recorded by two shards is refused.
    let part = &tack_trace::table_files(&first, "trials").unwrap()[0];
    std::fs::copy(part, second.join("trials/part-900-00000.parquet")).unwrap();
    let output = merge(dir.path(), &[&first, &second, &third], "traces/dup");
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("is in both run"));
}

#[test]
fn shards_of_different_plans_do_not_merge() {
    let dir = tempfile::tempdir().unwrap();
    let one = run(dir.path(), &["--shard", "1/2"], &[]);
    let other = run(dir.path(), &["--shard", "2/2", "--seed", "99"], &[]);
    let output = merge(dir.path(), &[&one, &other], "traces/merged");
    assert_eq!(output.status.code(), Some(2));
    let stderr = text(&output.stderr);
    assert!(stderr.contains("seed"), "{stderr}");
    assert!(!dir.path().join("traces/merged").exists());
}

/// A shard resumed keeps its slice: another index would run another
/// shard's trials into it, which the merge would then find twice.
#[test]
fn a_shard_resumed_as_another_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let one = run(dir.path(), &["--shard", "1/2"], &[]);
    let resume = ["run", "--resume", one.to_str().unwrap(), "--no-report"];
    let output = tack(
        dir.path(),
        &[&resume[..], &["--shard", "2/2"]].concat(),
        &[],
    );
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("the shard differs: 1/2 recorded, 2/2 now"),
        "{stderr}"
    );
    let output = tack(
        dir.path(),
        &[&resume[..], &["--shard", "1/2"]].concat(),
        &[],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
}

#[test]
fn bad_shard_values_exit_2_naming_the_variable() {
    let dir = tempfile::tempdir().unwrap();
    let demo = demo();
    let mut args = vec!["run", demo.to_str().unwrap(), "--no-report"];
    args.extend(SLICE);
    let output = tack(dir.path(), &args, &[("JOB_COMPLETION_INDEX", "x")]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("JOB_COMPLETION_INDEX"));
    let output = tack(dir.path(), &args, &[("JOB_COMPLETION_INDEX", "0")]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("TACK_SHARDS"));
    args.extend(["--shard", "4/3"]);
    let output = tack(dir.path(), &args, &[]);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("--shard"));
}

/// A shard that the plan's trials do not reach says so, instead of a bare
/// table and "running 0 trials".
#[test]
fn an_empty_shard_says_it_has_nothing_to_run() {
    let dir = tempfile::tempdir().unwrap();
    let demo = demo();
    let output = tack(
        dir.path(),
        &[
            "run",
            demo.to_str().unwrap(),
            "-v",
            "oracle",
            "-t",
            "median-even",
            "--trials",
            "1",
            "--shard",
            "2/3",
            "--no-report",
        ],
        &[],
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.starts_with("nothing to run: no trial of the plan falls to this run"),
        "{stdout}"
    );
    assert!(!text(&output.stderr).contains("running 0 trials"));
}

/// A slice and a count for the environment's index say opposite things:
/// refused before anything runs, both named. (`--no-report` beside
/// `--reports` or `--out`, and `report --json` beside `--out`, are taken:
/// scripts pass the place always and the switch now and then.)
#[test]
fn a_shard_and_a_shard_count_are_refused_together() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["run", "suite", "--shard", "1/2", "--shards", "2"];
    let output = tack(dir.path(), &args, &[]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("'--shard <INDEX/COUNT>' cannot be used with '--shards <COUNT>'"),
        "{stderr}"
    );
}
