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

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::images::*;
use serde_json::Value;

/// A test's directory, in which every `tack` drives docker through
/// podman's Docker API on a socket of its own; the service is stopped,
/// then the directory removed, when dropped.
struct DockerTest {
    service: Child,
    dir: tempfile::TempDir,
}

impl DockerTest {
    /// Started, once the docker CLI gets an answer through it and `tack
    /// doctor` finds docker; or `None` (the test skips) without podman or
    /// the docker CLI.
    fn start() -> Option<DockerTest> {
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
        let dir = tempfile::tempdir().unwrap();
        let log = std::fs::File::create(dir.path().join("docker-api.log")).unwrap();
        let service = Command::new("podman")
            .args(["system", "service", "--time=0"])
            .arg(host(dir.path()))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let test = DockerTest { service, dir };
        test.wait_for_the_api();
        set_tack_env(
            test.dir(),
            &[
                ("TACK_ENGINE", "docker"),
                ("DOCKER_HOST", &host(test.dir())),
            ],
        );
        let doctor = run(test.dir(), &["doctor", "--json"]);
        let json: Value = serde_json::from_slice(&doctor.stdout).unwrap();
        assert_eq!(json["image_engine"]["name"], "docker", "{json}");
        let version = json["image_engine"]["version"].as_str().unwrap();
        assert!(version.starts_with("Docker version"), "{json}");
        Some(test)
    }

    fn dir(&self) -> &Path {
        self.dir.path()
    }

    fn wait_for_the_api(&self) {
        let started = Instant::now();
        loop {
            let version = Command::new("docker")
                .args(["--host", &host(self.dir()), "version"])
                .output()
                .unwrap();
            if version.status.success() {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "podman's Docker API never answered: {}{}",
                String::from_utf8_lossy(&version.stderr),
                std::fs::read_to_string(self.dir().join("docker-api.log")).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The Docker API's address: a socket in the test's directory.
fn host(dir: &Path) -> String {
    format!("unix://{}", dir.join("docker.sock").display())
}

impl Drop for DockerTest {
    fn drop(&mut self) {
        let _ = self.service.kill();
        let _ = self.service.wait();
    }
}

#[test]
fn a_dockerfile_task_is_built_and_run_by_docker_in_both_modes() {
    let Some(base) = base_image() else { return };
    let Some(test) = DockerTest::start() else {
        return;
    };
    let dir = test.dir();
    let suite = dir.join("suite");
    write(
        &suite.join("suite.toml"),
        &format!(
            "[suite]\nname = \"docker\"\ntrials = 1\n\n[images]\n\"debian:bookworm\" = \"{base}\"\n\n\
             [[variants]]\nname = \"sandbox\"\nmodel = \"oracle\"\n\n\
             [[variants]]\nname = \"engine\"\nmodel = \"oracle\"\n\
             [variants.harness]\nimage_tasks = \"engine\"\n"
        ),
    );
    // Its test checks that `nobody` still owns the fixed file and can read
    // it: in engine mode the file is in the workspace tack binds, whose
    // owners must be the ids docker's container sees (the host's).
    write_greet_task(&suite.join("tasks/greet"), 0);
    let suite_arg = suite.to_str().unwrap();
    let check = run(dir, &["suite", "check", suite_arg]);
    assert!(check.status.success(), "{}", text(&check));

    let ran = run(dir, &["run", suite_arg, "--json", "--no-report"]);
    assert!(ran.status.success(), "{}", text(&ran));
    let rows = common::query_rows(
        &run_dir(dir),
        "select variant, environment, outcome from final_trials order by variant",
    );
    assert_eq!(
        rows,
        serde_json::json!([
            {"variant": "engine", "environment": "engine", "outcome": "passed"},
            {"variant": "sandbox", "environment": "image", "outcome": "passed"},
        ])
    );
    assert_eq!(containers_under(dir), Vec::<String>::new());
    assert_eq!(trial_dirs(dir), Vec::<String>::new());
    assert_eq!(mounts_under(dir), Vec::<String>::new());
}

/// The compose task of compose_services.rs, through docker: its service
/// containers join the trial's network (docker has no `--userns
/// container:`), and the run killed while its containers and volumes exist
/// is resumed by a run that finds them by docker's listing of their labels
/// and removes them.
#[test]
fn a_compose_task_killed_and_resumed_through_docker_leaves_nothing() {
    let Some(python) = python_image() else { return };
    let Some(test) = DockerTest::start() else {
        return;
    };
    let (suite, _) = import_lookup(test.dir(), &python);
    kill_lookup(test.dir(), &suite);
    resume_lookup(test.dir());
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
    write_greet_task(&suite.join("tasks/greet"), 0);
    let check = run(dir.path(), &["suite", "check", suite.to_str().unwrap()]);
    assert!(!check.status.success());
    let said = text(&check);
    assert!(
        said.contains("TACK_ENGINE is `dockr`") && said.contains("set it to podman or docker"),
        "{said}"
    );
}
