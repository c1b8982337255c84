//! `tack run --resume` after `kill -9`: the run is killed at several points
//! (mid-run, right after a resume started, again mid-run), resumed each
//! time, and in the end holds every planned (variant, task, trial) exactly
//! once, with every trial that had finished before a kill unchanged.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use arrow_array::{Array, RecordBatch, StringArray};

const VARIANTS: &str = "oracle,sim-full";
const TASKS: &str = "median-even,leap-year-400,duration-minutes,slugify-dashes";
const TRIALS: u32 = 3;

fn demo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../suites/demo")
}

fn tack(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tack"));
    command.current_dir(dir);
    for name in ["JOB_COMPLETION_INDEX", "TACK_SHARDS", "SLURM_ARRAY_TASK_ID"] {
        command.env_remove(name);
    }
    command
}

/// The demo suite copied into `dir`, its median-even task's check a sleep
/// of `secs` seconds: a trial that is still running when a signal comes.
fn slow_demo(dir: &Path, secs: u32) -> PathBuf {
    let suite = dir.join("demo");
    tack_suite::copy_tree(&demo(), &suite, &demo()).unwrap();
    let task = suite.join("tasks/median-even/task.toml");
    let text = std::fs::read_to_string(&task).unwrap();
    let slow = text.replace(
        "run = \"python3 \\\"$TACK_CHECKS/check_stats.py\\\"\"",
        &format!("run = \"sleep {secs}\""),
    );
    assert_ne!(slow, text, "the check to slow down is in the task");
    std::fs::write(&task, slow).unwrap();
    suite
}

/// `dir/traces`, once a run has started there.
fn wait_for_a_run(dir: &Path) -> PathBuf {
    let traces = dir.join("traces");
    wait_for("the run to start", || {
        std::fs::read_dir(&traces).is_ok_and(|mut runs| runs.next().is_some())
    });
    traces
}

fn start_run(dir: &Path) -> Child {
    let demo = demo();
    let trials = TRIALS.to_string();
    tack(dir)
        .args(["run", demo.to_str().unwrap(), "-v", VARIANTS, "-t", TASKS])
        .args(["--trials", &trials, "-j", "2", "--no-report"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn start_resume(dir: &Path, run_dir: &Path) -> Child {
    tack(dir)
        .args(["run", "--resume", run_dir.to_str().unwrap(), "-j", "2"])
        .arg("--no-report")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn kill(mut child: Child) {
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

fn journals(run_dir: &Path) -> Vec<String> {
    std::fs::read_dir(run_dir.join("journal"))
        .map(|entries| {
            entries
                .filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read_to_string(e.path()).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Trials that finished but whose part is not written yet: their journal
/// holds the end event.
fn finished_in_journals(run_dir: &Path) -> usize {
    journals(run_dir)
        .iter()
        .filter(|j| j.contains("\"type\":\"trial_finished\""))
        .count()
}

fn strings<'b>(batch: &'b RecordBatch, name: &str) -> &'b StringArray {
    batch
        .column_by_name(name)
        .unwrap()
        .as_any()
        .downcast_ref()
        .unwrap()
}

/// Every row of `table`, rendered, by trial id.
fn rows(run_dir: &Path, table: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for batch in tack_trace::read_table(run_dir, table).unwrap() {
        let ids = strings(&batch, "trial_id");
        for i in 0..batch.num_rows() {
            let row = format!("{:?}", batch.slice(i, 1).columns());
            out.entry(ids.value(i).to_string()).or_default().push(row);
        }
    }
    for rows in out.values_mut() {
        rows.sort();
    }
    out
}

/// The rows of the trials that had finished before the last kill, as
/// recovery (the first step of a resume) stores them.
fn finished_rows(run_dir: &Path) -> BTreeMap<String, (Vec<String>, Vec<String>)> {
    tack_trace::recover_journals(run_dir).unwrap();
    let spans = rows(run_dir, "spans");
    tack_trace::recorded_trials(run_dir)
        .unwrap()
        .into_iter()
        .filter(|t| t.outcome != "cancelled")
        .map(|t| {
            let trial = rows(run_dir, "trials").remove(&t.trial_id).unwrap();
            let spans = spans.get(&t.trial_id).cloned().unwrap_or_default();
            (t.trial_id, (trial, spans))
        })
        .collect()
}

/// A run started under `dir`, killed once `finished` of its trials have
/// finished (their journals say so) while others run; its directory.
fn killed_with_finished_trials(dir: &Path, finished: usize) -> PathBuf {
    let traces = dir.join("traces");
    let child = start_run(dir);
    wait_for("the run to start", || {
        traces.is_dir() && traces.read_dir().unwrap().count() == 1
    });
    let run_dir = run_dir_of(&traces);
    wait_for("finished trials", || {
        finished_in_journals(&run_dir) >= finished
    });
    kill(child);
    run_dir
}

fn run_dir_of(traces: &Path) -> PathBuf {
    std::fs::read_dir(traces)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path()
}

fn manifest(run_dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(run_dir.join("manifest.json")).unwrap()).unwrap()
}

#[test]
fn a_run_killed_at_several_points_resumes_to_every_trial_exactly_once() {
    let dir = tempfile::tempdir().unwrap();

    // 1. Killed mid-run, with trials finished and others running.
    let run_dir = killed_with_finished_trials(dir.path(), 3);
    let mut kept = finished_rows(&run_dir);
    assert!(kept.len() >= 3, "{} trials kept", kept.len());

    // 2. Killed right after the resume began, before it finished a trial.
    let child = start_resume(dir.path(), &run_dir);
    wait_for("the resume to register", || {
        manifest(&run_dir)["resumes"].as_array().map_or(0, Vec::len) == 1
            && !journals(&run_dir).is_empty()
    });
    kill(child);
    kept.extend(finished_rows(&run_dir));

    // 3. Killed mid-run again.
    let before = kept.len();
    let child = start_resume(dir.path(), &run_dir);
    wait_for("more finished trials", || {
        finished_in_journals(&run_dir) >= 2
    });
    kill(child);
    let now = finished_rows(&run_dir);
    assert!(now.len() >= before + 2, "{before} then {}", now.len());
    for (id, rows) in &kept {
        assert_eq!(now.get(id), Some(rows), "trial {id} changed after a resume");
    }
    kept = now;

    // 4. Resumed to the end.
    let output: Output = tack(dir.path())
        .args([
            "run",
            "--resume",
            run_dir.to_str().unwrap(),
            "--no-report",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        output.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let recorded = tack_trace::recorded_trials(&run_dir).unwrap();
    let ids: BTreeSet<&str> = recorded.iter().map(|t| t.trial_id.as_str()).collect();
    assert_eq!(ids.len(), recorded.len(), "a trial id recorded twice");
    let mut finished: BTreeMap<(String, String, u32), u32> = BTreeMap::new();
    for trial in recorded.iter().filter(|t| t.outcome != "cancelled") {
        *finished
            .entry((trial.variant.clone(), trial.task.clone(), trial.trial_index))
            .or_default() += 1;
    }
    let planned = VARIANTS.split(',').count() * TASKS.split(',').count() * TRIALS as usize;
    assert_eq!(finished.len(), planned, "{finished:?}");
    assert!(finished.values().all(|n| *n == 1), "{finished:?}");

    let last = finished_rows(&run_dir);
    for (id, rows) in &kept {
        assert_eq!(
            last.get(id),
            Some(rows),
            "trial {id} changed after a resume"
        );
    }

    // Each cut-off trial is kept as a cancelled attempt, and reruns count
    // up: a trial's attempts are 0, 1, … and only the last finished.
    type Unit<'a> = (&'a str, &'a str, u32);
    let mut attempts: BTreeMap<Unit, Vec<(u32, &str)>> = BTreeMap::new();
    for t in &recorded {
        attempts
            .entry((&t.variant, &t.task, t.trial_index))
            .or_default()
            .push((t.attempt, &t.outcome));
    }
    for (unit, mut tries) in attempts {
        tries.sort();
        let numbers: Vec<u32> = tries.iter().map(|(attempt, _)| *attempt).collect();
        assert_eq!(
            numbers,
            (0..tries.len() as u32).collect::<Vec<_>>(),
            "{unit:?}"
        );
        let (_, last) = tries.pop().unwrap();
        assert_ne!(last, "cancelled", "{unit:?}");
        assert!(tries.iter().all(|(_, o)| *o == "cancelled"), "{unit:?}");
    }
    let manifest = manifest(&run_dir);
    let resumes = manifest["resumes"].as_array().unwrap();
    assert_eq!(resumes.len(), 3);
    assert!(
        resumes[0]["trials_kept"].as_u64().unwrap() >= 3,
        "{resumes:?}"
    );
    assert_eq!(manifest["status"], "finished");
    assert!(journals(&run_dir).is_empty());
    // Compacted: one part per table.
    for table in ["trials", "spans", "messages"] {
        assert_eq!(
            tack_trace::table_files(&run_dir, table).unwrap().len(),
            1,
            "{table}"
        );
    }
}

#[test]
fn a_resume_that_would_change_the_plan_exits_2_and_names_the_difference() {
    let dir = tempfile::tempdir().unwrap();
    let output = tack(dir.path())
        .args([
            "run",
            demo().to_str().unwrap(),
            "-v",
            "oracle",
            "-t",
            "median-even",
        ])
        .args(["--trials", "1", "--no-report", "--json"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let run_dir = json["run"]["run_dir"].as_str().unwrap().to_string();
    let run_dir = dir.path().join(run_dir);

    let output = tack(dir.path())
        .args([
            "run",
            "--resume",
            run_dir.to_str().unwrap(),
            "--trials",
            "2",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("the trials per task differ: 1 recorded, 2 now"),
        "{stderr}"
    );

    // Resuming a finished run runs nothing and keeps what is there.
    let output = tack(dir.path())
        .args([
            "run",
            "--resume",
            run_dir.to_str().unwrap(),
            "--no-report",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["run"]["trials"].as_array().unwrap().len(), 0);
    assert_eq!(tack_trace::recorded_trials(&run_dir).unwrap().len(), 1);

    let output = tack(dir.path())
        .args(["run", "--resume", dir.path().join("nope").to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("not a run's trace directory"));
}

/// The demo's sim-stdout variant, two trials of [`TASKS`], into `traces`.
fn sim_stdout_run(dir: &Path, traces: &Path) -> Output {
    let demo = demo();
    tack(dir)
        .args([
            "run",
            demo.to_str().unwrap(),
            "-v",
            "sim-stdout",
            "-t",
            TASKS,
        ])
        .args(["--trials", "2", "--no-report", "--json", "--traces"])
        .arg(traces)
        .output()
        .unwrap()
}

/// `--rerun verification_failed` on a finished run: those trials run again
/// as new attempts, every attempt stays in the traces, the report counts
/// the latest and says how many were run again; the others are kept.
#[test]
fn a_rerun_runs_the_failed_trials_again_as_new_attempts() {
    let dir = tempfile::tempdir().unwrap();
    let first = sim_stdout_run(dir.path(), &dir.path().join("traces"));
    let first: serde_json::Value = serde_json::from_slice(&first.stdout).unwrap();
    let failed: BTreeSet<String> = first["run"]["trials"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["outcome"] == "verification_failed")
        .map(|t| t["trial_id"].as_str().unwrap().to_string())
        .collect();
    assert!(!failed.is_empty(), "sim-stdout fails some demo trials");
    let run_dir = run_dir_of(&dir.path().join("traces"));

    let bad = tack(dir.path())
        .args([
            "run",
            "--resume",
            run_dir.to_str().unwrap(),
            "--rerun",
            "flaked",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("verification_failed"));

    let again = tack(dir.path())
        .args(["run", "--resume", run_dir.to_str().unwrap()])
        .args(["--rerun", "verification_failed", "--no-report", "--json"])
        .output()
        .unwrap();
    let again: serde_json::Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(again["run"]["rerun"], failed.len());
    let rerun: BTreeSet<String> = again["run"]["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            assert_eq!(t["attempt"], 1, "{t}");
            t["trial_id"].as_str().unwrap().to_string()
        })
        .collect();
    let expected: BTreeSet<String> = failed.iter().map(|id| format!("{id}--attempt1")).collect();
    assert_eq!(rerun, expected);
    assert_eq!(
        manifest(&run_dir)["resumes"][0]["trials_rerun"],
        failed.len()
    );

    // Showing a first attempt that ran again points to the latest.
    let some = failed.iter().next().unwrap();
    let shown = tack(dir.path())
        .args(["show", run_dir.to_str().unwrap(), some])
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains(&format!(
            "its latest attempt, the one reports count, is {some}--attempt1"
        )),
        "{shown}"
    );
    let shown = tack(dir.path())
        .args(["show", run_dir.to_str().unwrap(), some, "--json"])
        .output()
        .unwrap();
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    assert_eq!(
        shown["later_attempts"],
        serde_json::json!([format!("{some}--attempt1")])
    );

    // Every attempt in the traces; the report counts each planned trial once.
    let recorded = tack_trace::recorded_trials(&run_dir).unwrap();
    assert_eq!(recorded.len(), 8 + failed.len());
    let report = tack(dir.path())
        .args(["report", run_dir.to_str().unwrap(), "--json"])
        .output()
        .unwrap();
    let report: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    let variant = &report["variants"][0];
    assert_eq!(variant["trials"], 8, "{variant}");
    assert_eq!(variant["retried_attempts"], failed.len(), "{variant}");
    // With and without the trials decided by a later attempt: the others
    // all passed at their first.
    assert_eq!(variant["rerun_trials"], failed.len(), "{variant}");
    assert_eq!(variant["success_rate_without_reruns"], 1.0, "{variant}");
    let out = dir.path().join("report");
    let html = tack(dir.path())
        .args([
            "report",
            run_dir.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(html.status.success());
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    let note = index
        .split("id=\"reruns\">")
        .nth(1)
        .expect("the re-runs are named");
    let note = note.split("</p>").next().unwrap();
    assert!(
        note.contains(&format!("sim-stdout {} of 8 trials", failed.len()))
            && note.contains("success rate without them 100.0%"),
        "{note}"
    );

    // Compared with a run that re-ran nothing, the candidate says so too.
    let base = dir.path().join("base");
    let fresh = sim_stdout_run(dir.path(), &base);
    assert!(fresh.status.success());
    let compared = tack(dir.path())
        .arg("compare")
        .arg(run_dir_of(&base))
        .arg(&run_dir)
        .args(["--variants", "sim-stdout", "--no-report", "--json"])
        .output()
        .unwrap();
    let compared: serde_json::Value = serde_json::from_slice(&compared.stdout).unwrap();
    let sides = &compared["comparison"];
    assert_eq!(sides["base"]["rerun_trials"], 0, "{sides}");
    assert_eq!(sides["candidate"]["rerun_trials"], failed.len(), "{sides}");
    assert_eq!(sides["candidate"]["success_rate_without_reruns"], 1.0);

    // A resume with nothing left to run says so, not an empty table.
    let nothing = tack(dir.path())
        .args(["run", "--resume", run_dir.to_str().unwrap(), "--no-report"])
        .output()
        .unwrap();
    assert!(nothing.status.success());
    let nothing = String::from_utf8_lossy(&nothing.stdout);
    assert!(
        nothing.starts_with("nothing to run: all 8 planned trials had finished"),
        "{nothing}"
    );
}

/// A killed run's finished trials that were still in their journals are
/// stored by `tack query` before it reads the run, as `tack report` does,
/// and it says so: they are not left out of the count unsaid.
#[test]
fn a_query_over_a_killed_run_counts_the_trials_in_its_journals() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = killed_with_finished_trials(dir.path(), 2);
    let journaled = finished_in_journals(&run_dir);
    let count = |run_dir: &Path| {
        rows(run_dir, "trials")
            .values()
            .map(Vec::len)
            .sum::<usize>()
    };
    let stored = count(&run_dir);
    let output = tack(dir.path())
        .args(["query", "select count(*) as n from trials", "--csv"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("recovered") && stderr.contains("from their journals"),
        "{stderr}"
    );
    let counted: usize = String::from_utf8_lossy(&output.stdout)
        .lines()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    // The trials that were still running are stored too, as cancelled.
    assert!(
        counted >= stored + journaled,
        "{counted} < {stored} + {journaled}"
    );
    assert_eq!(counted, count(&run_dir), "stderr: {stderr}");
    assert!(journals(&run_dir).is_empty());
}

/// `tack show` and `tack gate` read a killed run as query and report do:
/// its journals' trials stored first, then the run judged as interrupted
/// (not "did the run start?", when its parts were not yet written).
#[test]
fn show_and_gate_over_a_killed_run_read_the_trials_in_its_journals() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = killed_with_finished_trials(dir.path(), 2);
    let run = run_dir.to_str().unwrap();
    let show = tack(dir.path()).args(["show", run]).output().unwrap();
    let said = String::from_utf8_lossy(&show.stderr);
    assert!(said.contains("from their journals"), "{said}");
    assert!(!said.contains("did the run start"), "{said}");
    assert!(journals(&run_dir).is_empty());
    let variant = manifest(&run_dir)["variants"][0]["name"]
        .as_str()
        .unwrap()
        .to_string();
    let gate = tack(dir.path())
        .args(["gate", run, run, "--variants", &variant])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&gate.stderr);
    assert_eq!(gate.status.code(), Some(2), "{said}");
    assert!(said.contains("was interrupted: resume it"), "{said}");
}

/// A run written from another host (shards on a shared traces volume)
/// cannot be looked up in this host's process table: while its claim is
/// touched, a reader takes it for running and leaves its journals alone
/// (recovering them would store its trials in progress as cancelled under
/// its feet); a claim untouched for two minutes is a killed run's.
#[test]
fn a_run_claimed_by_another_host_is_left_alone_until_its_claim_goes_stale() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = killed_with_finished_trials(dir.path(), 2);
    std::fs::write(run_dir.join("run.pid"), "4242").unwrap();
    let claim = run_dir.join("run.claim");
    std::fs::write(&claim, "some-other-node/boot/pid:[4026531836] 77\n").unwrap();
    let before = journals(&run_dir);
    assert!(!before.is_empty());
    let query = |dir: &Path| {
        let output = tack(dir)
            .args(["query", "select count(*) as n from trials", "--csv"])
            .output()
            .unwrap();
        // Nothing stored yet: only its journals hold its trials.
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let stderr = query(dir.path());
    assert!(
        stderr.contains("still in progress (process 4242 of host some-other-node"),
        "{stderr}"
    );
    assert_eq!(journals(&run_dir), before, "nothing recovered");
    assert_eq!(manifest(&run_dir)["status"], "running");
    let merge = tack(dir.path())
        .args(["run", "--resume", run_dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(merge.status.code(), Some(2), "{merge:?}");
    assert!(
        String::from_utf8_lossy(&merge.stderr)
            .contains("process 4242 of host some-other-node (taken for stopped 120 s after its last sign of life) is still writing it"),
        "{merge:?}"
    );

    let stale = std::time::SystemTime::now() - std::time::Duration::from_secs(200);
    std::fs::File::options()
        .write(true)
        .open(&claim)
        .unwrap()
        .set_modified(stale)
        .unwrap();
    let stderr = query(dir.path());
    assert!(stderr.contains("from their journals"), "{stderr}");
    assert!(journals(&run_dir).is_empty());
    assert_eq!(manifest(&run_dir)["status"], "interrupted");
}

/// A run bound for object storage is written in tack's staging area; killed
/// there, it is resumed from there, and uploaded where its first
/// invocation said even when the resume does not repeat `--traces`.
#[test]
fn a_staged_run_resumed_without_traces_is_uploaded_where_it_was_bound() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let bucket = format!("file://{}/bucket", dir.path().display());
    let demo = demo();
    let trials = TRIALS.to_string();
    let child = tack(dir.path())
        .env("XDG_CACHE_HOME", &cache)
        .args(["run", demo.to_str().unwrap(), "-v", VARIANTS, "-t", TASKS])
        .args([
            "--trials",
            &trials,
            "-j",
            "2",
            "--no-report",
            "--traces",
            &bucket,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let staging = cache.join("tack/staging");
    wait_for("the run to start", || {
        staging.is_dir() && staging.read_dir().unwrap().count() == 1
    });
    let run_dir = run_dir_of(&staging);
    wait_for("a finished trial", || finished_in_journals(&run_dir) >= 1);
    kill(child);
    let output = tack(dir.path())
        .env("XDG_CACHE_HOME", &cache)
        .args(["run", "--resume", run_dir.to_str().unwrap(), "--no-report"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("is in tack's staging area: it is uploaded to"),
        "{stderr}"
    );
    let run_id = run_dir.file_name().unwrap();
    let uploaded = dir.path().join("bucket").join(run_id);
    assert_eq!(manifest(&uploaded)["status"], "finished");
}

/// The stderr of `child` once `signal` (`-INT`, `-TERM`) has stopped it,
/// which it did with exit 130.
fn stopped_by(child: Child, signal: &str) -> String {
    let sent = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    stderr
}

/// `tack` with `args` then `more`, started in `dir` with a TMPDIR of its
/// own (returned), stderr piped: what it leaves stays in the test's
/// directory.
fn start_in_own_tmp(dir: &Path, args: &[&str], more: &[&str]) -> (Child, PathBuf) {
    let tmp = dir.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let child = tack(dir)
        .env("TMPDIR", &tmp)
        .args(args)
        .args(more)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, tmp)
}

/// A second Ctrl-C stops at once and says how to carry the run on; the
/// first waits for the running trials (here, a check that takes 30 s).
#[test]
fn a_second_ctrl_c_stops_now_and_says_how_to_resume() {
    let dir = tempfile::tempdir().unwrap();
    let suite = slow_demo(dir.path(), 30);
    // What the stopped trial leaves for its resume stays in the test's own
    // temporary directory.
    let (child, _tmp) = start_in_own_tmp(
        dir.path(),
        &[
            "run",
            suite.to_str().unwrap(),
            "-v",
            "oracle",
            "-t",
            "median-even",
        ],
        &["--trials", "1", "--no-report"],
    );
    let traces = wait_for_a_run(dir.path());
    std::thread::sleep(Duration::from_secs(2));
    for _ in 0..2 {
        let sent = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        std::thread::sleep(Duration::from_millis(300));
    }
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(130), "{stderr}");
    let run_dir = run_dir_of(&traces);
    assert!(
        stderr.contains(&format!(
            "stopped: the trials cut off run again with `tack run --resume {}`",
            run_dir.strip_prefix(dir.path()).unwrap().display()
        )),
        "{stderr}"
    );
}

/// SIGTERM (a cancelled CI job, an evicted pod) stops a run as a first
/// Ctrl-C does: the running trial finishes and is stored, no other starts,
/// and the run is recorded as interrupted, ready for `--resume`.
#[test]
fn sigterm_lets_the_running_trials_finish_and_records_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let suite = slow_demo(dir.path(), 3);
    let child = tack(dir.path())
        .args(["run", suite.to_str().unwrap(), "-v", "oracle"])
        .args([
            "-t",
            "median-even",
            "--trials",
            "2",
            "-j",
            "1",
            "--no-report",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let traces = wait_for_a_run(dir.path());
    std::thread::sleep(Duration::from_secs(1));
    let stderr = stopped_by(child, "-TERM");
    assert!(stderr.contains("interrupting"), "{stderr}");
    let run_dir = run_dir_of(&traces);
    assert_eq!(manifest(&run_dir)["status"], "interrupted", "{stderr}");
    assert_eq!(rows(&run_dir, "trials").len(), 1, "{stderr}");
    assert!(journals(&run_dir).is_empty(), "{stderr}");
}

/// A misspelt --rerun-variant or --rerun-task is refused as a misspelt -v
/// or -t is (exit 2, naming the suite's own), not taken to mean "nothing
/// to run again".
#[test]
fn a_misspelt_rerun_selection_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let output = tack(dir.path())
        .args(["run", demo().to_str().unwrap(), "-v", "oracle"])
        .args(["-t", "median-even", "--trials", "1", "--no-report"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let run_dir = run_dir_of(&dir.path().join("traces"));
    for (flag, name, said) in [
        ("--rerun-variant", "oracel", "no variant named `oracel`"),
        ("--rerun-task", "median-evn", "no task named `median-evn`"),
    ] {
        let output = tack(dir.path())
            .args(["run", "--resume", run_dir.to_str().unwrap(), flag, name])
            .arg("--no-report")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(said), "{stderr}");
    }
}

/// Ctrl-C stops `tack suite check` as it stops a run: exit 130, a word on
/// stderr, and the checks' workspaces (here, one whose check sleeps) gone,
/// not left for the next command's sweep.
#[test]
fn ctrl_c_stops_a_suite_check_and_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let suite = slow_demo(dir.path(), 60);
    let (child, tmp) = start_in_own_tmp(
        dir.path(),
        &[
            "suite",
            "check",
            suite.to_str().unwrap(),
            "-t",
            "median-even",
        ],
        &[],
    );
    let made = |tmp: &Path| -> Vec<PathBuf> {
        let Ok(places) = std::fs::read_dir(tmp) else {
            return Vec::new();
        };
        places
            .flatten()
            .filter_map(|place| std::fs::read_dir(place.path()).ok())
            .flat_map(|entries| entries.flatten().map(|entry| entry.path()))
            .collect()
    };
    wait_for("the check's workspace", || !made(&tmp).is_empty());
    std::thread::sleep(Duration::from_secs(1));
    let stderr = stopped_by(child, "-INT");
    assert!(
        stderr.contains("interrupted: the checks were stopped"),
        "{stderr}"
    );
    // The sandbox's helper process, tack's child, may still be removing a
    // command's private tmp as tack exits.
    let exited = Instant::now();
    while !made(&tmp).is_empty() && exited.elapsed() < Duration::from_secs(15) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(made(&tmp), Vec::<PathBuf>::new());
}
