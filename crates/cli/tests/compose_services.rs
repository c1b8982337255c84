//! Multi-container tasks end to end: a Harbor task (written for these
//! tests) whose `docker-compose.yaml` starts a key-value service beside the
//! agent's container imports as an image task with that service; the
//! `tack` binary builds both images with the real engine, waits for the
//! service's health check, and the oracle and the checks reach it by its
//! name; its entrypoint, user and volumes (a volume of the trial filled
//! from its image, one shared with the agent's container, files of the
//! task) are as the compose file says. A run killed with `kill -9` leaves
//! its containers and the volumes; a run with another trials directory
//! leaves them too, the resumed run removes them, and nothing is left. A
//! service that ends before the trial starts makes its trials
//! infrastructure errors quoting its log.
//! Without an engine or the base images the tests say so and skip, unless
//! `TACK_REQUIRE_ENGINE=1`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly by design

mod common;

use std::path::Path;

use common::images::*;
use serde_json::Value;

#[test]
fn a_compose_task_runs_with_its_service_and_a_killed_run_leaves_no_container() {
    let Some(python) = python_image() else { return };
    let dir = tempfile::tempdir().unwrap();
    let (suite, import) = import_lookup(dir.path(), &python);
    let suite_arg = suite.to_str().unwrap();
    let json: Value = serde_json::from_slice(&import.stdout).unwrap();
    let converted = &json["converted"][0];
    assert_eq!(converted["mode"], "image", "{json}");
    assert_eq!(converted["engine"], true, "{json}");
    // A mount of the host's is the one thing of the compose file left out.
    let notes: Vec<&str> = converted["notes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .filter(|note| note.contains("not reproduced"))
        .collect();
    assert_eq!(
        notes,
        [
            "service `kv`: not reproduced: `volumes: /var/run/docker.sock:/var/run/docker.sock` \
          (not a file of the task)"
        ],
        "{json}"
    );
    let task_dir = suite
        .join("tasks")
        .join(converted["task"].as_str().unwrap());
    let task_toml = std::fs::read_to_string(task_dir.join("task.toml")).unwrap();
    for expected in [
        "mode = \"engine\"",
        "volumes = [{ name = \"exchange\", at = \"/exchange\" }]",
        "[[environment.services]]\nname = \"kv\"\ndockerfile = \"environment/kv/Dockerfile\"",
        "entrypoint = [\"python3\", \"-u\"]\ncommand = [\"/srv/serve.py\"]\nuser = \"nobody\"",
        "volumes = [{ name = \"kv-data\", at = \"/data\" }, { name = \"exchange\", at = \
         \"/exchange\", read_only = true }, { path = \"mounts/environment/kv/words\", at = \
         \"/srv/words\", read_only = true }]",
        "[environment.services.healthcheck]",
        "[[environment.services]]\nname = \"seed\"\nimage = \"python:3.12-slim\"",
        "wait = \"completed\"",
    ] {
        assert!(task_toml.contains(expected), "{expected}\n{task_toml}");
    }
    assert!(task_dir.join("environment/kv/serve.py").is_file());
    assert!(
        task_dir
            .join("mounts/environment/kv/words/answer.txt")
            .is_file()
    );

    let check = run(dir.path(), &["suite", "check", suite_arg]);
    assert!(check.status.success(), "{}", text(&check));
    assert_eq!(containers_under(dir.path()), Vec::<String>::new());
    assert_eq!(volumes_under(dir.path()), Vec::<String>::new());

    kill_lookup(dir.path(), &suite);
    a_run_elsewhere_leaves_them(dir.path(), &suite, 3, 2);
    let run_dir = resume_lookup(dir.path());

    let manifest: Value =
        serde_json::from_slice(&std::fs::read(run_dir.join("manifest.json")).unwrap()).unwrap();
    let tasks = &manifest["fingerprint"]["tasks"];
    let print = tasks.as_object().unwrap().values().next().unwrap();
    assert!(
        print["services"]["kv"]
            .as_str()
            .is_some_and(|id| id.starts_with("sha256:")),
        "{manifest}"
    );
}

#[test]
fn a_service_that_ends_before_the_trial_or_a_job_that_fails_is_an_infrastructure_error() {
    let Some(python) = python_image() else { return };
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite");
    write(
        &suite.join("suite.toml"),
        &oracle_suite_toml("services", &python),
    );
    // A job that fails: the trial waited for it to end well.
    write(
        &suite.join("tasks/job/task.toml"),
        r#"instruction = "Use the seeded data."
[environment]
image = "python:3.12-slim"
workdir = "/app"
[[environment.services]]
name = "seed"
image = "python:3.12-slim"
command = ["python3", "-c", "import sys; print('no data to seed'); sys.exit(4)"]
wait = "completed"
[[checks]]
name = "tests"
run = "true"
[solution]
script = "true"
"#,
    );
    write(
        &suite.join("tasks/gone/task.toml"),
        r#"instruction = "Ask the database."
[environment]
image = "python:3.12-slim"
workdir = "/app"
[[environment.services]]
name = "db"
image = "python:3.12-slim"
command = ["python3", "-c", "import sys; print('no database here'); sys.exit(3)"]
[environment.services.healthcheck]
command = "false"
interval_secs = 0.2
start_period_secs = 0
retries = 2
[[checks]]
name = "tests"
run = "true"
[solution]
script = "true"
"#,
    );
    let output = run(
        dir.path(),
        &["run", suite.to_str().unwrap(), "--json", "--no-report"],
    );
    let json: Value = serde_json::from_slice(&output.stdout).unwrap_or_default();
    let error_of = |task: &str| {
        let trials = json["run"]["trials"].as_array();
        let trial = (trials.unwrap_or_else(|| panic!("no trials: {}", text(&output))))
            .iter()
            .find(|t| t["task"] == task)
            .unwrap_or_else(|| panic!("no trial of {task}: {}", text(&output)))
            .clone();
        assert_eq!(trial["outcome"], "infra_error", "{}", text(&output));
        trial["error"].as_str().unwrap().to_string()
    };
    let error = error_of("gone");
    assert!(
        error.contains("service `db` ended (exit 3) before it was healthy")
            && error.contains("no database here"),
        "{error}"
    );
    let error = error_of("job");
    assert!(
        error.contains(
            "service `seed` ended with exit 4; the trial waits for it to complete successfully"
        ) && error.contains("no data to seed"),
        "{error}"
    );
    assert_eq!(containers_under(dir.path()), Vec::<String>::new());
    assert!(Path::new(&dir.path().join("traces")).is_dir());
}
