//! Tasks that run in a container image, end to end: the `tack` binary
//! builds each task's Dockerfile with the real engine (its `FROM` mapped by
//! the suite's `[images]` to the base image `.ci/run` builds from Debian's
//! packages, `TACK_IMAGE_BASE`), proves the task sound, runs the oracle in
//! the image's filesystem under tack's sandbox, and leaves nothing behind:
//! no mount, no trial directory, even after a `kill -9` and a resume.
//! Without an engine or the base image the tests say so and skip, unless
//! `TACK_REQUIRE_ENGINE=1`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // tests fail loudly by design

mod common;

use common::images::*;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

/// A suite in `dir` whose `debian:bookworm` is `base`, with the task
/// `greet` (its solution first sleeping `sleep` seconds) and the tasks
/// `more` adds.
fn suite(dir: &Path, base: &str, sleep: u32, more: &[(&str, &str, &str)]) -> PathBuf {
    let suite = dir.join("suite");
    write(
        &suite.join("suite.toml"),
        &format!(
            "[suite]\nname = \"images\"\ntrials = 1\n\n[images]\n\"debian:bookworm\" = \"{base}\"\n\n\
             [[variants]]\nname = \"oracle\"\nmodel = \"oracle\"\n"
        ),
    );
    write_greet_task(&suite.join("tasks/greet"), sleep);
    for (name, task, dockerfile) in more {
        let task_dir = suite.join("tasks").join(name);
        write(&task_dir.join("task.toml"), task);
        write(&task_dir.join("environment/Dockerfile"), dockerfile);
    }
    suite
}

/// Sound, and the oracle passes in the image; a task whose build fails is
/// an infrastructure error with the build's words, the others run; the
/// image's id is in the run's fingerprint; nothing is left mounted.
#[test]
fn an_image_task_is_sound_and_its_trials_run_in_the_image() {
    let Some(base) = base_image() else { return };
    let dir = tempfile::tempdir().unwrap();
    let broken_task = "instruction = \"Nothing.\"\n[environment]\n\
                       dockerfile = \"environment/Dockerfile\"\n\
                       [[checks]]\nname = \"t\"\nrun = \"true\"\n[solution]\nscript = \"true\"\n";
    let broken = "FROM debian:bookworm\nWORKDIR /app\nRUN echo about to fail && false\n";
    // Harbor's [agent] user: the agent and the solution run as `agent`, the
    // checks as the image's root; /logs/agent is the agent's to write.
    let as_agent_task = "instruction = \"Say who you are in /app/whoami.txt.\"\n\
                         [environment]\ndockerfile = \"environment/Dockerfile\"\nuser = \"agent\"\n\
                         [[checks]]\nname = \"t\"\nrun = \"bash /tests/test.sh\"\n\
                         checks_at = \"/tests\"\nreward_dir = \"/logs/verifier\"\n\
                         [solution]\nscript = \"bash /solution/solve.sh\"\nfiles_at = \"/solution\"\n";
    let as_agent = "FROM debian:bookworm\nRUN useradd -m agent && mkdir -p /app && chown agent /app\n\
                    WORKDIR /app\n";
    let suite = suite(
        dir.path(),
        &base,
        0,
        &[
            ("broken", broken_task, broken),
            ("as-agent", as_agent_task, as_agent),
        ],
    );
    let tasks = suite.join("tasks/as-agent");
    write(
        &tasks.join("solution/solve.sh"),
        "id -un > /app/whoami.txt\necho done > /logs/agent/solve.log\n",
    );
    write(
        &tasks.join("checks/test.sh"),
        "set -e\ngrep -qx agent /app/whoami.txt\ntest \"$(id -un)\" = root\n\
         echo 1 > /logs/verifier/reward.txt\n",
    );
    let suite_arg = suite.to_str().unwrap();

    let check = run(
        dir.path(),
        &["suite", "check", suite_arg, "--task", "greet,as-agent"],
    );
    assert!(check.status.success(), "{}", text(&check));
    assert!(
        text(&check).contains("2 of 2 tasks sound"),
        "{}",
        text(&check)
    );

    let output = run(
        dir.path(),
        &["run", suite_arg, "--trials", "2", "--json", "--no-report"],
    );
    assert!(output.status.success(), "{}", text(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let outcome = |task: &str| -> Vec<String> {
        trials(&json)
            .iter()
            .filter(|t| t["task"] == task)
            .map(|t| t["outcome"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(outcome("greet"), ["passed", "passed"], "{json}");
    assert_eq!(outcome("as-agent"), ["passed", "passed"], "{json}");
    assert_eq!(outcome("broken"), ["infra_error", "infra_error"], "{json}");
    let broken = trials(&json)
        .iter()
        .find(|t| t["task"] == "broken")
        .unwrap();
    let broken_error = broken["error"].as_str().unwrap().to_string();
    assert!(broken_error.contains("about to fail"), "{broken_error}");
    // The agent never started: not tack's failure, the environment's.
    assert_eq!(broken["stop_reason"], "environment_error", "{broken}");

    let manifest: Value =
        serde_json::from_slice(&std::fs::read(run_dir(dir.path()).join("manifest.json")).unwrap())
            .unwrap();
    let text = manifest.to_string();
    assert!(text.contains("\"image\":\"sha256:"), "{manifest}");

    assert_eq!(mounts_under(dir.path()), Vec::<String>::new());
    assert_eq!(trial_dirs(dir.path()), Vec::<String>::new());
}

/// A build never reads outside its task: a `COPY ../` and a link out of
/// the context are refused when the suite loads, naming the file, and no
/// build starts.
#[test]
fn a_build_that_would_read_outside_its_task_is_refused_at_load() {
    let Some(base) = base_image() else { return };
    let dir = tempfile::tempdir().unwrap();
    write(&dir.path().join("secret.txt"), "the host's secret\n");
    let task = "instruction = \"x\"\n[environment]\ndockerfile = \"environment/Dockerfile\"\n\
                [[checks]]\nname = \"t\"\nrun = \"true\"\n[solution]\nscript = \"true\"\n";
    let above = "FROM debian:bookworm\nWORKDIR /app\nCOPY ../../../../secret.txt /app/\n";
    let suite_dir = suite(dir.path(), &base, 0, &[("above", task, above)]);
    let check = run(dir.path(), &["suite", "check", suite_dir.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(2), "{}", text(&check));
    let said = text(&check);
    assert!(
        said.contains("above") && said.contains("Dockerfile"),
        "{said}"
    );
    assert!(said.contains("line 3"), "{said}");

    // The same task with a link to the secret in its context instead.
    let dockerfile = suite_dir.join("tasks/above/environment/Dockerfile");
    std::fs::write(
        &dockerfile,
        "FROM debian:bookworm\nWORKDIR /app\nCOPY . /app/\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(
        dir.path().join("secret.txt"),
        suite_dir.join("tasks/above/environment/secret.txt"),
    )
    .unwrap();
    let check = run(dir.path(), &["suite", "check", suite_dir.to_str().unwrap()]);
    assert_eq!(check.status.code(), Some(2), "{}", text(&check));
    let said = text(&check);
    assert!(said.contains("secret.txt"), "{said}");
    assert!(!said.contains("preparing"), "a build started: {said}");
}

/// `kill -9` in the middle of an image trial leaves no mount; the resumed
/// run sweeps the killed trial's directory, finishes, and leaves nothing.
#[test]
fn a_killed_image_run_leaves_nothing_once_resumed() {
    let Some(base) = base_image() else { return };
    let dir = tempfile::tempdir().unwrap();
    let suite = suite(dir.path(), &base, 4, &[]);
    let mut child = tack(dir.path())
        .args(["run", suite.to_str().unwrap(), "--no-report"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The overlay is mounted in the trial's namespace only: seen in the
    // mounts of its processes (the solution sleeps in it).
    let started = Instant::now();
    while no_process_in(dir.path()) {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the trial never started"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let gone = Instant::now();
    while !no_process_in(dir.path()) && gone.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(no_process_in(dir.path()), "a process of the run is left");
    assert_eq!(mounts_under(dir.path()), Vec::<String>::new());
    assert_eq!(
        trial_dirs(dir.path()).len(),
        1,
        "the killed trial's directory"
    );

    let run_dir = run_dir(dir.path());
    let resumed = run(
        dir.path(),
        &["run", "--resume", run_dir.to_str().unwrap(), "--no-report"],
    );
    assert!(resumed.status.success(), "{}", text(&resumed));
    assert_eq!(trial_dirs(dir.path()), Vec::<String>::new());
    assert_eq!(mounts_under(dir.path()), Vec::<String>::new());
}

/// Whether no process on this machine has a trial directory under `dir`
/// among its mounts (a trial's namespace shows its workspace from there).
fn no_process_in(dir: &Path) -> bool {
    let needle = dir.join("tmp/tack-trials").display().to_string();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return true;
    };
    !procs.flatten().any(|entry| {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            return false;
        };
        std::fs::read_to_string(format!("/proc/{pid}/mountinfo"))
            .is_ok_and(|info| info.contains(&needle))
    })
}

/// `tack import harbor` builds instead of approximating: a Harbor task
/// (written for these tests, its build context the task root through
/// docker-compose) imports as an image task that is sound and passes with
/// the oracle; a copy whose tests/ links out of it and one whose Dockerfile
/// copies from above its context are refused (exit 1), nothing of the
/// host's is read into the suite, and the good tasks are imported all the
/// same. A task with no Dockerfile and a prebuilt `docker_image` runs from
/// that image, mapped by the suite's `[images]`.
#[test]
fn harbor_tasks_import_as_image_tasks_and_pass_with_the_oracle() {
    let Some(python) = python_image() else { return };
    let dir = tempfile::tempdir().unwrap();
    let fixtures = common::repo().join("crates/cli/tests/fixtures/harbor");
    let sources = dir.path().join("harbor");
    common::copy_dir(&fixtures.join("scores"), &sources.join("scores"));
    common::copy_dir(&fixtures.join("prebuilt"), &sources.join("prebuilt"));
    write(
        &dir.path().join("secret/the-host.txt"),
        "the host's secret\n",
    );
    let linked = sources.join("scores-linked");
    common::copy_dir(&fixtures.join("scores"), &linked);
    std::fs::remove_dir_all(linked.join("tests")).unwrap();
    std::os::unix::fs::symlink(dir.path().join("secret"), linked.join("tests")).unwrap();
    let above = sources.join("scores-above");
    common::copy_dir(&fixtures.join("scores"), &above);
    let dockerfile = above.join("environment/Dockerfile");
    let original = std::fs::read_to_string(&dockerfile).unwrap();
    std::fs::write(
        &dockerfile,
        format!("{original}COPY ../secret/the-host.txt /app/\n"),
    )
    .unwrap();

    let suite = dir.path().join("suite");
    write(
        &suite.join("suite.toml"),
        &oracle_suite_toml("harbor", &python),
    );
    let import = import_harbor(dir.path(), &sources, &suite);
    assert_eq!(import.status.code(), Some(1), "{}", text(&import));
    let json: Value = serde_json::from_slice(&import.stdout).unwrap();
    let converted = json["converted"].as_array().unwrap();
    let modes: Vec<(&str, &str)> = converted
        .iter()
        .map(|t| (t["task"].as_str().unwrap(), t["mode"].as_str().unwrap()))
        .collect();
    assert_eq!(
        modes,
        [("prebuilt", "image"), ("scores", "image")],
        "{json}"
    );
    let prebuilt = std::fs::read_to_string(suite.join("tasks/prebuilt/task.toml")).unwrap();
    assert!(
        prebuilt.contains("\nimage = \"python:3.12-slim\"\n"),
        "{prebuilt}"
    );
    let refused: Vec<String> = json["refused"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["reason"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(refused.len(), 2, "{json}");
    assert!(
        refused
            .iter()
            .any(|r| r.contains("tests") && r.contains("outside the task")),
        "{refused:?}"
    );
    assert!(
        refused
            .iter()
            .any(|r| r.contains("Dockerfile line 7") && r.contains("../secret")),
        "{refused:?}"
    );
    let mut written = Vec::new();
    common::files_below(&suite, &mut written);
    for file in &written {
        let bytes = std::fs::read(file).unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&bytes).contains("the host's secret"),
            "{} holds the host's file",
            file.display()
        );
    }

    // The base image standing in for python:3.12-slim sets no WORKDIR, as
    // the real one does not: tack says where to give the agent a workspace.
    let suite_arg = suite.to_str().unwrap();
    let check = run(dir.path(), &["suite", "check", suite_arg]);
    assert_eq!(check.status.code(), Some(1), "{}", text(&check));
    assert!(
        text(&check).contains("the image sets no WORKDIR (or `/`), so there is no workspace")
            && text(&check).contains("set `workdir` in the task's [environment]"),
        "{}",
        text(&check)
    );
    write(
        &suite.join("tasks/prebuilt/task.toml"),
        &prebuilt.replace(
            "image = \"python:3.12-slim\"",
            "image = \"python:3.12-slim\"\nworkdir = \"/app\"",
        ),
    );
    let check = run(dir.path(), &["suite", "check", suite_arg]);
    assert!(check.status.success(), "{}", text(&check));
    let output = run(dir.path(), &["run", suite_arg, "--json", "--no-report"]);
    assert!(output.status.success(), "{}", text(&output));
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let outcomes: Vec<&str> = trials(&json)
        .iter()
        .map(|t| t["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["passed", "passed"], "{json}");
}

/// Engine mode: a task whose image's ENTRYPOINT starts a web server runs
/// in a container the engine starts, held to its `cpus` and `memory_mb`
/// (the check reads the container's cgroup); tack waits for its health check, the
/// oracle fetches from the server, and the check finds the server still up
/// (the same container). `kill -9` leaves the container; the resumed run
/// removes it, passes, and records that its trial ran in the engine.
/// The check's test that the container has 1.5 CPUs and 256 MiB (cgroup v2
/// files, else v1's).
const LIMITS_HELD: &str = "\
mem=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)
test \"$mem\" = 268435456
cpu=$(cat /sys/fs/cgroup/cpu.max 2>/dev/null || cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us)
test \"${cpu%% *}\" = 150000
";

#[test]
fn an_engine_task_talks_to_its_entrypoint_service_and_leaves_no_container() {
    let Some(python) = python_image() else { return };
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite");
    write(
        &suite.join("suite.toml"),
        &oracle_suite_toml("engine", &python),
    );
    let task = suite.join("tasks/serve");
    write(
        &task.join("task.toml"),
        &image_task_toml(
            "A server listens on port 8080. Save what it serves at / in /app/result.txt.",
            r#"dockerfile = "environment/Dockerfile"
mode = "engine"
cpus = 1.5
memory_mb = 256
[environment.healthcheck]
command = "python3 -c 'import urllib.request; urllib.request.urlopen(\"http://127.0.0.1:8080/\")'"
interval_secs = 1.0
start_period_secs = 20.0
start_interval_secs = 0.5
"#,
        ),
    );
    write(
        &task.join("environment/Dockerfile"),
        "FROM python:3.12-slim\nWORKDIR /app\nRUN mkdir /site && echo served-by-entrypoint > /site/index.html\n\
         COPY entrypoint.sh /entrypoint.sh\nRUN chmod +x /entrypoint.sh\nENTRYPOINT [\"/entrypoint.sh\"]\n",
    );
    write(
        &task.join("environment/entrypoint.sh"),
        "#!/bin/sh\n(sleep 1; exec python3 -m http.server 8080 --directory /site) &\nexec \"$@\"\n",
    );
    let fetch = "python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://127.0.0.1:8080/\").read().decode().strip())'";
    write(
        &task.join("solution/solve.sh"),
        &format!("sleep 3\n{fetch} > /app/result.txt\n"),
    );
    write(
        &task.join("checks/test.sh"),
        &format!(
            "set -e\ngrep -qx served-by-entrypoint /app/result.txt\n\
             test \"$({fetch})\" = served-by-entrypoint\n\
             {LIMITS_HELD}echo 1 > /logs/verifier/reward.txt\n"
        ),
    );

    kill_once_containers_run(dir.path(), &suite, 1);
    let run_dir = resume_to_one_pass(dir.path());
    let rows = common::query_rows(&run_dir, "select environment, outcome from final_trials");
    assert_eq!(
        rows,
        serde_json::json!([{"environment": "engine", "outcome": "passed"}])
    );
}
