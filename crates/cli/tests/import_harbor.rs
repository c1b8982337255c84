//! `tack import harbor` end to end: Harbor-layout tasks written for these
//! tests (`tests/fixtures/harbor`) import into a suite that `tack suite
//! check` proves sound and the oracle passes, reading the workspace at the
//! WORKDIR, the checks at /tests and the reward from /logs/verifier. With
//! `TACK_HARBOR_SAMPLES` (the public tasks beside the project, which
//! `.ci/run` points at with their pinned wheels), the same for them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use arrow_array::{Array, StringArray};
use serde_json::Value;

/// Tool environments outside /tmp: a task with a workdir has a /tmp of its
/// own and would not see them there.
fn tool_envs() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("tool-envs")
}

fn tack_in(dir: &Path, args: &[&str], env: &[(&str, &Path)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(args)
        .current_dir(dir)
        .env("TACK_TOOL_ENVS", tool_envs())
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

/// `tack import harbor SOURCE --out SUITE --json`.
fn import(dir: &Path, source: &Path, suite: &Path, env: &[(&str, &Path)]) -> Output {
    let args = [
        "import",
        "harbor",
        source.to_str().unwrap(),
        "--out",
        suite.to_str().unwrap(),
        "--json",
        // These tests are about the host path; image tasks: image_tasks.rs.
        "--approximate",
    ];
    tack_in(dir, &args, env)
}

/// `tack run SUITE --variant oracle --json`, traces and reports in `dir`.
fn run_oracle(dir: &Path, suite: &Path, env: &[(&str, &Path)]) -> Output {
    let suite = suite.to_str().unwrap();
    let args = [
        "run",
        suite,
        "--variant",
        "oracle",
        "--json",
        "--traces",
        "traces",
        "--reports",
        "reports",
    ];
    tack_in(dir, &args, env)
}

fn json_of(output: &Output) -> Value {
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\nstderr: {}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })
}

/// Harbor tasks need the sandbox's mount namespace (the workspace at
/// /app) and the Debian packages they list (`debs`, checked on the host,
/// which `.ci/run` installs): without them the test says why and skips,
/// or fails under `TACK_REQUIRE_HARBOR`.
fn runnable(debs: &[&str]) -> bool {
    if common::sandbox_profile() != "strict" {
        return false;
    }
    let missing: Vec<&str> = debs
        .iter()
        .copied()
        .filter(|deb| {
            let status = Command::new("dpkg-query")
                .args(["-W", "-f=${db:Status-Abbrev}", deb])
                .output();
            !status.is_ok_and(|o| o.stdout.starts_with(b"ii"))
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    assert!(
        std::env::var_os("TACK_REQUIRE_HARBOR").is_none(),
        "the Harbor tasks need Debian packages this host lacks: {missing:?}"
    );
    eprintln!("skipped: this host lacks the Debian packages {missing:?} (.ci/run installs them)");
    false
}

/// The checks' output per task, from the run's spans.
fn check_outputs(run_dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for batch in tack_trace::read_table(run_dir, "spans").unwrap() {
        let trial = common::column::<StringArray>(&batch, "trial_id");
        let kind = common::column::<StringArray>(&batch, "kind");
        let output = common::column::<StringArray>(&batch, "check_output");
        for i in 0..batch.num_rows() {
            if kind.value(i) == "check" && !output.is_null(i) {
                out.push((trial.value(i).to_string(), output.value(i).to_string()));
            }
        }
    }
    out
}

#[test]
fn harbor_tasks_import_check_sound_and_pass_with_the_oracle() {
    if !runnable(&["python3", "curl"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fixtures = common::repo().join("crates/cli/tests/fixtures/harbor");
    let suite = dir.path().join("suite");
    let suite_arg = suite.to_str().unwrap();
    let imported = import(dir.path(), &fixtures, &suite, &[]);
    assert_eq!(imported.status.code(), Some(0), "{imported:?}");
    let report = json_of(&imported);
    let converted = report["converted"].as_array().unwrap();
    let names: Vec<&str> = converted
        .iter()
        .map(|t| t["task"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["compiled", "greeting", "prebuilt", "scores"]);
    let reasons = |i: usize| converted[i]["container_reasons"].as_array().unwrap().len();
    assert_eq!(
        (reasons(0), reasons(1), reasons(2), reasons(3)),
        (1, 0, 1, 0),
        "{report:#}"
    );

    // What the Dockerfile copied: into the WORKDIR as the fixture, to
    // /srv/words as a place; tests/ and solution/ beside them.
    let greeting = suite.join("tasks/greeting");
    assert_eq!(
        std::fs::read_to_string(greeting.join("fixture/data/name.txt")).unwrap(),
        "harbor\n"
    );
    assert!(greeting.join("places/1/words.txt").is_file());
    let task_toml = std::fs::read_to_string(greeting.join("task.toml")).unwrap();
    for expected in [
        "workdir = \"/app\"",
        "at = \"/srv/words\"",
        "debian = [\"python3\", \"curl\"]",
        "stand_ins = true",
        "max_wall_secs = 120",
        "memory_mb = 2048",
        "timeout_secs = 60",
        "reward_dir = \"/logs/verifier\"",
        "files_at = \"/solution\"",
    ] {
        assert!(task_toml.contains(expected), "{expected} in {task_toml}");
    }
    // The task files as a user reads them, the findings on top.
    let fixtures_text = fixtures.to_str().unwrap();
    for task in ["greeting", "scores", "compiled", "prebuilt"] {
        let text = std::fs::read_to_string(suite.join("tasks").join(task).join("task.toml"))
            .unwrap()
            .replace(fixtures_text, "<fixtures>");
        insta::assert_snapshot!(format!("harbor_{task}_task_toml"), text);
    }
    // The compose file's `context: ..` put the task root's app/ in /app.
    assert!(suite.join("tasks/scores/fixture/stats.py").is_file());

    let check = tack_in(dir.path(), &["suite", "check", suite_arg, "--json"], &[]);
    let check_json = json_of(&check);
    assert_eq!(check_json["sound"], true, "{check_json:#}");
    assert_eq!(check_json["not_checked"], 2, "{check_json:#}");

    let run = run_oracle(dir.path(), &suite, &[]);
    let run_json = json_of(&run);
    let stderr = String::from_utf8_lossy(&run.stderr);
    for left_out in ["compiled", "prebuilt"] {
        assert!(
            stderr.contains(&format!("left out task `{left_out}`")),
            "{stderr}"
        );
    }
    let trials = run_json["run"]["trials"].as_array().unwrap();
    let outcomes: Vec<(&str, &str)> = trials
        .iter()
        .map(|t| (t["task"].as_str().unwrap(), t["outcome"].as_str().unwrap()))
        .collect();
    assert_eq!(outcomes.len(), 2, "{run_json:#}");
    assert!(outcomes.iter().all(|(_, o)| *o == "passed"), "{outcomes:?}");
    let run_dir = PathBuf::from(run_json["run"]["run_dir"].as_str().unwrap());
    let checks = check_outputs(&dir.path().join(run_dir));
    let rewards: Vec<String> = checks
        .iter()
        .filter_map(|(_, out)| {
            out.lines()
                .find(|l| l.starts_with("[reward:"))
                .map(str::to_string)
        })
        .collect();
    assert!(
        rewards.contains(&"[reward: reward=1]".to_string()),
        "{checks:?}"
    );
    assert!(
        rewards.contains(&"[reward: correctness=1 style=1]".to_string()),
        "{checks:?}"
    );

    // Again: every task is already there, so each is skipped (exit 1).
    let again = import(dir.path(), &fixtures, &suite, &[]);
    assert_eq!(again.status.code(), Some(1), "{again:?}");
    assert_eq!(json_of(&again)["skipped"].as_array().unwrap().len(), 4);

    // A task with a workdir has its own /tmp: tool environments there
    // would be out of its sight, so that is refused up front.
    let hidden = dir.path().join("envs-in-tmp");
    let refused = tack_in(
        dir.path(),
        &["suite", "check", suite_arg],
        &[("TACK_TOOL_ENVS", &hidden)],
    );
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("set TACK_TOOL_ENVS to a directory outside /tmp"),
        "{stderr}"
    );
}

#[test]
fn a_source_that_is_no_harbor_task_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let output = tack_in(
        dir.path(),
        &["import", "harbor", "empty", "missing", "--out", "suite"],
        &[],
    );
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("error: empty: is not a Harbor task"),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: missing: cannot read it"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("suite").exists(),
        "nothing imported, nothing written"
    );

    // Every task refused (its task.toml does not parse): exit 2, no suite.
    let broken = dir.path().join("broken");
    for sub in ["environment", "tests"] {
        std::fs::create_dir_all(broken.join(sub)).unwrap();
    }
    std::fs::write(broken.join("task.toml"), "version = \"1.0\"\n[verifier\n").unwrap();
    std::fs::write(broken.join("instruction.md"), "do it\n").unwrap();
    let output = tack_in(
        dir.path(),
        &["import", "harbor", "broken", "--out", "suite"],
        &[],
    );
    assert_eq!(output.status.code(), Some(2), "{output:?}");
    assert!(!dir.path().join("suite").exists(), "{output:?}");
}

/// The public Harbor tasks beside the project (`TACK_HARBOR_SAMPLES`, set
/// by `.ci/run` with `TACK_HARBOR_WHEELS`, the pinned pytest wheels their
/// checks run, so the tool environments install offline).
#[test]
fn the_public_harbor_samples_import_sound_and_pass_with_the_oracle() {
    let (Some(samples), Some(wheels)) = (
        std::env::var_os("TACK_HARBOR_SAMPLES"),
        std::env::var_os("TACK_HARBOR_WHEELS"),
    ) else {
        eprintln!("skipped: set TACK_HARBOR_SAMPLES and TACK_HARBOR_WHEELS (.ci/run does)");
        return;
    };
    if !runnable(&["python3", "python3-pip", "curl", "gcc", "make"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("samples");
    let suite_arg = suite.to_str().unwrap();
    let offline = [
        ("PIP_NO_INDEX", Path::new("1")),
        ("PIP_FIND_LINKS", Path::new(&wheels)),
    ];
    let imported = import(dir.path(), Path::new(&samples), &suite, &offline);
    assert_eq!(imported.status.code(), Some(0), "{imported:?}");
    let converted = json_of(&imported)["converted"].as_array().unwrap().len();
    assert_eq!(converted, 5);
    let check = tack_in(
        dir.path(),
        &["suite", "check", suite_arg, "--json"],
        &offline,
    );
    let check_json = json_of(&check);
    assert_eq!(
        check_json["sound"],
        true,
        "{check_json:#}\n{}",
        String::from_utf8_lossy(&check.stderr)
    );
    assert_eq!(check_json["not_checked"], 0);
    let run = run_oracle(dir.path(), &suite, &offline);
    let run_json = json_of(&run);
    let trials = run_json["run"]["trials"].as_array().unwrap();
    assert_eq!(trials.len(), 5);
    assert!(
        trials.iter().all(|t| t["outcome"] == "passed"),
        "{run_json:#}"
    );
    // The cookbook tasks' test.sh sources the uv installer's env file,
    // which the stand-in for curl writes (a script under `set -e` stops
    // where it is missing).
    let run_dir = PathBuf::from(run_json["run"]["run_dir"].as_str().unwrap());
    for (trial, output) in check_outputs(&dir.path().join(run_dir)) {
        assert!(!output.contains(".local/bin/env"), "{trial}: {output}");
    }
}

/// A Dockerfile's `COPY` destination that climbs with `..` lands where
/// Docker puts it (`..` stops at `/`), as a place of the task inside the
/// suite: never at the host path it spells, which the import, as root,
/// would have overwritten.
#[test]
fn a_copy_destination_that_climbs_writes_nothing_outside_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let task = dir.path().join("source/climber");
    let minimal = common::repo().join("crates/import/tests/fixtures/harbor/minimal");
    for file in [
        "instruction.md",
        "task.toml",
        "tests/test.sh",
        "solution/solve.sh",
    ] {
        std::fs::create_dir_all(task.join(file).parent().unwrap()).unwrap();
        std::fs::copy(minimal.join(file), task.join(file)).unwrap();
    }
    std::fs::create_dir_all(task.join("environment/keys")).unwrap();
    std::fs::write(
        task.join("environment/payload.txt"),
        "written by the task\n",
    )
    .unwrap();
    std::fs::write(
        task.join("environment/keys/authorized_keys"),
        "ssh-ed25519 AAAA\n",
    )
    .unwrap();
    let victim = dir.path().join("victim.txt");
    std::fs::write(&victim, "the host's own\n").unwrap();
    let climb = "/..".repeat(20);
    let dockerfile = format!(
        "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY payload.txt /app{climb}{victim}\n\
         COPY keys /app{climb}{home}/.ssh\nCOPY payload.txt ../../../../../../../{name}\n",
        victim = victim.display(),
        home = dir.path().join("home").display(),
        name = "climbed.txt",
    );
    std::fs::write(task.join("environment/Dockerfile"), dockerfile).unwrap();

    let suite = dir.path().join("suite");
    let imported = import(dir.path(), &task, &suite, &[]);
    assert_eq!(imported.status.code(), Some(0), "{imported:?}");
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "the host's own\n"
    );
    assert!(!dir.path().join("home").exists());
    assert!(!Path::new("/climbed.txt").exists());
    // Each is at the path Docker would have used: the directory as a
    // place of the task in the suite, the files over host directories
    // that exist (the tempdir, `/`) as reasons to build the image instead.
    let task_toml = std::fs::read_to_string(suite.join("tasks/climber/task.toml")).unwrap();
    let home = dir.path().join("home/.ssh");
    let place = format!("{{ from = \"places/1\", at = \"{}\" }}", home.display());
    assert!(task_toml.contains(&place), "{place} in {task_toml}");
    assert!(
        suite
            .join("tasks/climber/places/1/authorized_keys")
            .is_file()
    );
    let report = json_of(&imported);
    let reasons = report["converted"][0]["container_reasons"].to_string();
    for at in [victim.display().to_string(), "/climbed.txt".to_string()] {
        assert!(reasons.contains(&format!("to {at}")), "{at} in {reasons}");
    }
}
