//! Helpers of the end-to-end tests of tasks that run in container images:
//! the base images `.ci/run` builds (or why a test cannot run), `tack` run
//! with its temporary files and image cache under a test's directory, and
//! what a run left behind (mounts, trial directories, containers).

#![allow(clippy::print_stderr)] // a skipped test says why

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The base image, or why the test cannot run.
pub fn base_image() -> Option<String> {
    let required = std::env::var("TACK_REQUIRE_ENGINE").is_ok_and(|v| v == "1");
    let skip = |why: String| {
        assert!(!required, "TACK_REQUIRE_ENGINE=1, but {why}");
        eprintln!("skipped: {why}");
        None
    };
    let engine = match tack_image::Engine::detect(None) {
        Ok(engine) => engine,
        Err(error) => return skip(error.to_string()),
    };
    let Ok(base) = std::env::var("TACK_IMAGE_BASE") else {
        return skip("TACK_IMAGE_BASE names no base image".to_string());
    };
    if !engine.has_image(&base) {
        return skip(format!("the engine has no image {base}"));
    }
    if let tack_sandbox::TestGate::Skip(why) =
        tack_sandbox::test_gate(tack_protocol::SandboxProfile::Strict)
    {
        return skip(why.to_string());
    }
    Some(base)
}

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// `tack ARGS` with its temporary files (trial directories among them)
/// and its image cache under `dir`, and the environment a test set for
/// the tack it runs there ([`set_tack_env`]).
pub fn tack(dir: &Path) -> Command {
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_tack"));
    command
        .current_dir(dir)
        .env("TMPDIR", &tmp)
        .env("TACK_IMAGE_CACHE", image_cache());
    if let Ok(env) = std::fs::read_to_string(dir.join(TACK_ENV)) {
        for line in env.lines() {
            let (name, value) = line.split_once('=').unwrap();
            command.env(name, value);
        }
    }
    command
}

/// Where [`set_tack_env`] keeps what it sets, in a test's directory.
const TACK_ENV: &str = "tack.env";

/// Every `tack` run in `dir` from now on (by [`tack`] and the helpers
/// here) gets `vars` in its environment: the tests' own process
/// environment is shared by tests running side by side.
pub fn set_tack_env(dir: &Path, vars: &[(&str, &str)]) {
    let lines: Vec<String> = vars.iter().map(|(n, v)| format!("{n}={v}")).collect();
    std::fs::write(dir.join(TACK_ENV), lines.join("\n")).unwrap();
}

/// Shared by the tests (and kept between runs): what it holds is keyed by
/// content.
pub fn image_cache() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("image-cache")
}

pub fn run(dir: &Path, args: &[&str]) -> Output {
    tack(dir).args(args).output().unwrap()
}

pub fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// The mounts of this machine that name a path under `dir`.
pub fn mounts_under(dir: &Path) -> Vec<String> {
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let dir = dir.display().to_string();
    info.lines()
        .filter(|line| line.contains(&dir))
        .map(str::to_string)
        .collect()
}

/// What is left in the trial directories' root under `dir`.
pub fn trial_dirs(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir.join("tmp/tack-trials")) {
        Ok(entries) => entries
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

pub fn run_dir(dir: &Path) -> PathBuf {
    let traces = dir.join("traces");
    let mut runs: Vec<PathBuf> = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    runs.pop().unwrap()
}

pub fn trials(json: &Value) -> &Vec<Value> {
    json["run"]["trials"].as_array().unwrap()
}

/// The Python base image (`TACK_IMAGE_PYTHON`, which `.ci/run` builds
/// beside the bare one), or why the test cannot run.
pub fn python_image() -> Option<String> {
    base_image()?;
    let required = std::env::var("TACK_REQUIRE_ENGINE").is_ok_and(|v| v == "1");
    match std::env::var("TACK_IMAGE_PYTHON") {
        Ok(image) => Some(image),
        Err(_) => {
            assert!(
                !required,
                "TACK_REQUIRE_ENGINE=1, but TACK_IMAGE_PYTHON is not set"
            );
            eprintln!("skipped: TACK_IMAGE_PYTHON names no Python base image");
            None
        }
    }
}

/// The trial containers of the engine whose trial directory is under
/// `dir`.
pub fn containers_under(dir: &Path) -> Vec<String> {
    let engine = tack_image::Engine::detect(None).unwrap();
    engine
        .trial_containers()
        .unwrap()
        .into_iter()
        .filter(|(_, trial)| trial.starts_with(dir))
        .map(|(name, _)| name)
        .collect()
}

/// The engine's volumes of trials under `dir`.
pub fn volumes_under(dir: &Path) -> Vec<String> {
    let engine = tack_image::Engine::detect(None).unwrap();
    engine
        .trial_volumes()
        .unwrap()
        .into_iter()
        .filter(|(_, trial)| trial.starts_with(dir))
        .map(|(name, _)| name)
        .collect()
}

/// Runs `tack run SUITE --no-report` in `dir` and kills it (SIGKILL) once
/// `containers` trial containers run; a killed run cannot remove them.
pub fn kill_once_containers_run(dir: &Path, suite: &Path, containers: usize) {
    let log = dir.join("run.log");
    let mut child = tack(dir)
        .args(["run", suite.to_str().unwrap(), "--no-report"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while containers_under(dir).len() < containers {
        let ended = child.try_wait().unwrap().is_some();
        assert!(
            !ended && started.elapsed() < Duration::from_secs(300),
            "the trial's {containers} container(s) never ran: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        containers_under(dir).len(),
        containers,
        "a killed run cannot remove its containers; its log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// Resumes the one run in `dir`, finds its one trial passed and nothing
/// left (no container, no trial directory), and returns the run's
/// directory.
pub fn resume_to_one_pass(dir: &Path) -> PathBuf {
    let run_dir = run_dir(dir);
    let resumed = run(
        dir,
        &[
            "run",
            "--resume",
            run_dir.to_str().unwrap(),
            "--json",
            "--no-report",
        ],
    );
    assert!(resumed.status.success(), "{}", text(&resumed));
    let json: Value = serde_json::from_slice(&resumed.stdout).unwrap();
    let outcomes: Vec<&str> = trials(&json)
        .iter()
        .map(|t| t["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["passed"], "{json}");
    assert_eq!(containers_under(dir), Vec::<String>::new());
    assert_eq!(trial_dirs(dir), Vec::<String>::new());
    run_dir
}

/// A suite's `suite.toml`: one oracle variant, one trial, and
/// `python:3.12-slim` mapped to `python` (the Python base image).
pub fn oracle_suite_toml(name: &str, python: &str) -> String {
    format!(
        "[suite]\nname = \"{name}\"\ntrials = 1\n\n[images]\n\"python:3.12-slim\" = \"{python}\"\n\n\
         [[variants]]\nname = \"oracle\"\nmodel = \"oracle\"\n"
    )
}

/// `tack import harbor SOURCES --out SUITE --json` in `dir`.
pub fn import_harbor(dir: &Path, sources: &Path, suite: &Path) -> Output {
    run(
        dir,
        &[
            "import",
            "harbor",
            sources.to_str().unwrap(),
            "--out",
            suite.to_str().unwrap(),
            "--json",
        ],
    )
}

/// The compose task of the fixture `harbor-services/lookup` (a service, a
/// job and volumes), imported from `dir/harbor` into the suite `dir/suite`,
/// whose `python:3.12-slim` is `python`; the suite, and what the import
/// printed.
pub fn import_lookup(dir: &Path, python: &str) -> (PathBuf, Output) {
    let sources = dir.join("harbor");
    super::copy_dir(
        &super::repo().join("crates/cli/tests/fixtures/harbor-services/lookup"),
        &sources.join("lookup"),
    );
    let suite = dir.join("suite");
    write(
        &suite.join("suite.toml"),
        &oracle_suite_toml("services", python),
    );
    let import = import_harbor(dir, &sources, &suite);
    assert!(import.status.success(), "{}", text(&import));
    (suite, import)
}

/// Runs the lookup task ([`import_lookup`]) and kills the run once its
/// three containers run (the seed job starts last) and its two volumes
/// exist.
pub fn kill_lookup(dir: &Path, suite: &Path) {
    kill_once_containers_run(dir, suite, 3);
    assert_eq!(volumes_under(dir).len(), 2);
}

/// Resumes the killed run of [`kill_lookup`]: the resumed run removes its
/// containers and volumes, passes, and leaves nothing. Returns the run's
/// directory.
pub fn resume_lookup(dir: &Path) -> PathBuf {
    let run_dir = resume_to_one_pass(dir);
    assert_eq!(volumes_under(dir), Vec::<String>::new());
    let rows = super::query_rows(&run_dir, "select environment, outcome from final_trials");
    assert_eq!(
        rows,
        serde_json::json!([{"environment": "engine", "outcome": "passed"}])
    );
    run_dir
}

/// A run of `suite` from `dir/elsewhere`, with a trials directory of its
/// own (as another user's run, or a test's beside this one), passes and
/// leaves what the run killed in `dir` left, `containers` containers and
/// `volumes` volumes: a run sweeps only its own trials directory, so the
/// killed run's resume finds them.
pub fn a_run_elsewhere_leaves_them(dir: &Path, suite: &Path, containers: usize, volumes: usize) {
    let elsewhere = dir.join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    if let Ok(env) = std::fs::read(dir.join(TACK_ENV)) {
        std::fs::write(elsewhere.join(TACK_ENV), env).unwrap();
    }
    let ran = run(&elsewhere, &["run", suite.to_str().unwrap(), "--no-report"]);
    assert!(ran.status.success(), "{}", text(&ran));
    assert_eq!(containers_under(dir).len(), containers);
    assert_eq!(volumes_under(dir).len(), volumes);
    std::fs::remove_dir_all(&elsewhere).unwrap();
}

/// A task written as for a container: its Dockerfile makes /app with a
/// file owned by `nobody`; its tests (shown at /tests only to the checks)
/// switch to `nobody` and write a reward; its solution is at /solution.
pub const GREET_DOCKERFILE: &str = "FROM debian:bookworm\n\
WORKDIR /app\n\
RUN echo 'hello wrld' > /app/greeting.txt && chown nobody /app/greeting.txt\n\
COPY notes.txt /app/\n";

pub const GREET_TEST: &str = "#!/bin/bash\n\
set -e\n\
grep -qx 'hello world' /app/greeting.txt\n\
test \"$(stat -c %U /app/greeting.txt)\" = nobody\n\
test \"$(su nobody -s /bin/sh -c 'id -un; cat /app/greeting.txt' | head -1)\" = nobody\n\
test -f /app/notes.txt\n\
echo 1 > /logs/verifier/reward.txt\n";

/// A `task.toml` written as for a container: `instruction`, the
/// `[environment]` table's lines `environment` (and tables of its own after
/// them), tests at /tests that write their reward in /logs/verifier, and
/// the solution at /solution.
pub fn image_task_toml(instruction: &str, environment: &str) -> String {
    format!(
        "instruction = \"{instruction}\"\n[environment]\n{environment}\
         [[checks]]\nname = \"tests\"\nrun = \"bash /tests/test.sh\"\nchecks_at = \"/tests\"\n\
         reward_dir = \"/logs/verifier\"\n\
         [solution]\nfiles_at = \"/solution\"\nscript = \"bash /solution/solve.sh\"\n"
    )
}

/// The task `greet` in the directory `task`, its solution first sleeping
/// `sleep` seconds.
pub fn write_greet_task(task: &Path, sleep: u32) {
    let toml = image_task_toml(
        "Fix the typo in /app/greeting.txt.",
        "dockerfile = \"environment/Dockerfile\"\n",
    );
    write(&task.join("task.toml"), &toml);
    write(&task.join("environment/Dockerfile"), GREET_DOCKERFILE);
    write(&task.join("environment/notes.txt"), "notes\n");
    write(&task.join("checks/test.sh"), GREET_TEST);
    write(
        &task.join("solution/solve.sh"),
        &format!("sleep {sleep}\nsed -i 's/wrld/world/' /app/greeting.txt\n"),
    );
}
