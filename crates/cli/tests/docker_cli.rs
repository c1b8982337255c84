//! Image tasks driven by the docker CLI, end to end, as by podman: a
//! Dockerfile task built by docker and run in both modes (tack's sandbox
//! over the image's files, and engine mode's container), and a compose
//! task whose run is killed while its three containers and two volumes
//! exist, then resumed; nothing is left.
//!
//! No docker daemon runs on these machines, so each test starts podman's
//! Docker-compatible API (`podman system service`) on a socket of its own
//! and points the real docker client at it (`DOCKER_HOST`, with
//! `TACK_ENGINE=docker`): every command tack gives docker is parsed and
//! answered by docker's own CLI (its flags, its listing templates, its
//! errors) over the Docker API. What lies behind that API is podman's
//! (its store, its runtime), not dockerd's. Without podman, the docker CLI
//! or the base images the tests say so and skip, unless
//! `TACK_REQUIRE_ENGINE=1`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)] // tests fail loudly by design

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::images::*;
use serde_json::Value;

/// Podman's Docker API on a socket in a test's directory, for the docker
/// CLI; stopped when dropped.
struct DockerApi {
    service: Child,
    socket: PathBuf,
}

impl DockerApi {
    /// Started, once the docker CLI gets an answer through it; or why not.
    fn start(dir: &Path) -> Option<DockerApi> {
        let required = std::env::var("TACK_REQUIRE_ENGINE").is_ok_and(|v| v == "1");
        let answers = |program: &str| {
            Command::new(program)
                .arg("--version")
                .output()
                .is_ok_and(|out| out.status.success())
        };
        for program in ["podman", "docker"] {
            if !answers(program) {
                assert!(
                    !required,
                    "TACK_REQUIRE_ENGINE=1, but there is no {program}"
                );
                eprintln!("skipped: there is no {program}");
                return None;
            }
        }
        let socket = dir.join("docker.sock");
        let log = std::fs::File::create(dir.join("docker-api.log")).unwrap();
        let service = Command::new("podman")
            .args(["system", "service", "--time=0"])
            .arg(format!("unix://{}", socket.display()))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let api = DockerApi { service, socket };
        let started = Instant::now();
        loop {
            let version = Command::new("docker")
                .args(["--host", &api.host(), "version"])
                .output()
                .unwrap();
            if version.status.success() {
                return Some(api);
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "podman's Docker API never answered: {}{}",
                String::from_utf8_lossy(&version.stderr),
                std::fs::read_to_string(dir.join("docker-api.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    /// Every `tack` the test runs in `dir` drives docker through this API.
    fn drive_tack_in(&self, dir: &Path) {
        set_tack_env(
            dir,
            &[("TACK_ENGINE", "docker"), ("DOCKER_HOST", &self.host())],
        );
        let doctor = run(dir, &["doctor", "--json"]);
        let json: Value = serde_json::from_slice(&doctor.stdout).unwrap();
        assert_eq!(json["image_engine"]["name"], "docker", "{json}");
        let version = json["image_engine"]["version"].as_str().unwrap();
        assert!(version.starts_with("Docker version"), "{json}");
    }
}

impl Drop for DockerApi {
    fn drop(&mut self) {
        let _ = self.service.kill();
        let _ = self.service.wait();
    }
}

/// Its Dockerfile makes /app with a file owned by `nobody`, and its tests
/// check that `nobody` still owns the fixed file and can read it: in
/// engine mode the file is in the workspace tack binds, whose owners must
/// be the ids docker's container sees (the host's).
const TASK: &str = r#"instruction = "Fix the typo in /app/greeting.txt."
[environment]
dockerfile = "environment/Dockerfile"
[[checks]]
name = "tests"
run = "bash /tests/test.sh"
checks_at = "/tests"
reward_dir = "/logs/verifier"
[solution]
files_at = "/solution"
script = "bash /solution/solve.sh"
"#;

const DOCKERFILE: &str = "FROM debian:bookworm\nWORKDIR /app\n\
RUN echo 'hello wrld' > /app/greeting.txt && chown nobody /app/greeting.txt\n";

const TEST: &str = "#!/bin/bash\nset -e\n\
grep -qx 'hello world' /app/greeting.txt\n\
test \"$(stat -c %U /app/greeting.txt)\" = nobody\n\
test \"$(su nobody -s /bin/sh -c 'cat /app/greeting.txt')\" = 'hello world'\n\
echo 1 > /logs/verifier/reward.txt\n";

#[test]
fn a_dockerfile_task_is_built_and_run_by_docker_in_both_modes() {
    let Some(base) = base_image() else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some(api) = DockerApi::start(dir.path()) else {
        return;
    };
    api.drive_tack_in(dir.path());
    let suite = dir.path().join("suite");
    write(
        &suite.join("suite.toml"),
        &format!(
            "[suite]\nname = \"docker\"\ntrials = 1\n\n[images]\n\"debian:bookworm\" = \"{base}\"\n\n\
             [[variants]]\nname = \"sandbox\"\nmodel = \"oracle\"\n\n\
             [[variants]]\nname = \"engine\"\nmodel = \"oracle\"\n\
             [variants.harness]\nimage_tasks = \"engine\"\n"
        ),
    );
    let task = suite.join("tasks/greet");
    write(&task.join("task.toml"), TASK);
    write(&task.join("environment/Dockerfile"), DOCKERFILE);
    write(&task.join("checks/test.sh"), TEST);
    write(
        &task.join("solution/solve.sh"),
        "sed -i 's/wrld/world/' /app/greeting.txt\n",
    );
    let suite_arg = suite.to_str().unwrap();
    let check = run(dir.path(), &["suite", "check", suite_arg]);
    assert!(check.status.success(), "{}", text(&check));

    let ran = run(dir.path(), &["run", suite_arg, "--json", "--no-report"]);
    assert!(ran.status.success(), "{}", text(&ran));
    let rows = common::query_rows(
        &run_dir(dir.path()),
        "select variant, environment, outcome from final_trials order by variant",
    );
    assert_eq!(
        rows,
        serde_json::json!([
            {"variant": "engine", "environment": "engine", "outcome": "passed"},
            {"variant": "sandbox", "environment": "image", "outcome": "passed"},
        ])
    );
    assert_eq!(containers_under(dir.path()), Vec::<String>::new());
    assert_eq!(trial_dirs(dir.path()), Vec::<String>::new());
    assert_eq!(mounts_under(dir.path()), Vec::<String>::new());
}

/// The compose task of compose_services.rs, through docker: its service
/// containers join the trial's network (docker has no `--userns
/// container:`), and the run killed while its containers and volumes exist
/// is resumed by a run that finds them by docker's listing of their labels
/// and removes them.
#[test]
fn a_compose_task_killed_and_resumed_through_docker_leaves_nothing() {
    let Some(python) = python_image() else { return };
    let dir = tempfile::tempdir().unwrap();
    let Some(api) = DockerApi::start(dir.path()) else {
        return;
    };
    api.drive_tack_in(dir.path());
    let sources = dir.path().join("harbor");
    common::copy_dir(
        &common::repo().join("crates/cli/tests/fixtures/harbor-services/lookup"),
        &sources.join("lookup"),
    );
    let suite = dir.path().join("suite");
    write(
        &suite.join("suite.toml"),
        &oracle_suite_toml("services", &python),
    );
    let import = import_harbor(dir.path(), &sources, &suite);
    assert!(import.status.success(), "{}", text(&import));

    kill_once_containers_run(dir.path(), &suite, 3);
    assert_eq!(volumes_under(dir.path()).len(), 2);
    let run_dir = resume_to_one_pass(dir.path());
    assert_eq!(volumes_under(dir.path()), Vec::<String>::new());
    let rows = common::query_rows(&run_dir, "select environment, outcome from final_trials");
    assert_eq!(
        rows,
        serde_json::json!([{"environment": "engine", "outcome": "passed"}])
    );
}

/// `TACK_ENGINE` naming no engine tack drives is said, naming the
/// variable, by `tack doctor` and by a command that needs the engine.
#[test]
fn tack_engine_naming_no_engine_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    set_tack_env(dir.path(), &[("TACK_ENGINE", "dockr")]);
    let doctor = run(dir.path(), &["doctor"]);
    let said = text(&doctor);
    assert!(
        said.contains("engine              NONE — TACK_ENGINE is `dockr`, which is not an engine"),
        "{said}"
    );
    let suite = dir.path().join("suite");
    write(
        &suite.join("suite.toml"),
        "[suite]\nname = \"docker\"\ntrials = 1\n\n[[variants]]\nname = \"oracle\"\nmodel = \"oracle\"\n",
    );
    write(&suite.join("tasks/greet/task.toml"), TASK);
    write(
        &suite.join("tasks/greet/environment/Dockerfile"),
        DOCKERFILE,
    );
    write(&suite.join("tasks/greet/checks/test.sh"), TEST);
    write(&suite.join("tasks/greet/solution/solve.sh"), "true\n");
    let check = run(dir.path(), &["suite", "check", suite.to_str().unwrap()]);
    assert!(!check.status.success());
    let said = text(&check);
    assert!(
        said.contains("TACK_ENGINE is `dockr`") && said.contains("set it to podman or docker"),
        "{said}"
    );
}
