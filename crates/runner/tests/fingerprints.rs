//! A run's manifest fingerprints its tasks and environment: the same suite
//! run twice does not drift, and a changed fixture makes exactly its task
//! drift, naming the fixture.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::fs;
use std::path::Path;
use std::sync::Arc;

use tack_runner::{CancelFlag, RunPlan, run};
use tack_sandbox::{SandboxProfile, TestGate};
use tack_trace::{MANIFEST_SCHEMA_VERSION, Manifest, TaskDrift, TaskPart, drift};

const BASH_VERSION: &str = "bash --version | head -1";

// The trials run unconfined so that the drift checks run on any machine;
// the fingerprint commands are confined all the same.
const SUITE: &str = r#"
[suite]
name = "tiny"
fingerprint = ["bash --version | head -1", "echo 'on stderr' >&2"]

[[variants]]
name = "oracle"
model = "oracle"
[variants.harness]
sandbox = "off"
"#;

const TASK: &str = r#"
instruction = "Replace broken with fixed in file.txt."
[[checks]]
name = "fixed"
run = "grep -q fixed file.txt"
[solution]
[[solution.edits]]
path = "file.txt"
old = "broken"
new = "fixed"
"#;

fn write_suite(root: &Path) {
    fs::write(root.join("suite.toml"), SUITE).unwrap();
    for id in ["alpha", "beta"] {
        let task = root.join("tasks").join(id);
        fs::create_dir_all(task.join("fixture")).unwrap();
        fs::write(task.join("task.toml"), TASK).unwrap();
        fs::write(task.join("fixture/file.txt"), "broken\n").unwrap();
    }
}

async fn run_once(suite: &Path, traces: &Path, run_id: &str) -> Manifest {
    let plan = RunPlan {
        suite: tack_suite::load_suite(suite).unwrap(),
        variants: vec![],
        tasks: vec![],
        trials_per_task: 1,
        jobs: 2,
        seed: 1,
        traces_root: traces.to_path_buf(),
        run_id: run_id.to_string(),
        command_line: vec![],
        keep_failed_workspaces: false,
        replay: None,
        hidden: Vec::new(),
        interactive: None,
        shard: None,
        infra_retries: 0,
        resume: false,
        rerun: Default::default(),
        images: Default::default(),
        visible_within: None,
    };
    let result = run(plan, Arc::new(|_| {}), CancelFlag::default())
        .await
        .unwrap();
    Manifest::read(&result.run_dir).unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_changed_fixture_makes_exactly_its_task_drift() {
    let suite = tempfile::tempdir().unwrap();
    let traces = tempfile::tempdir().unwrap();
    write_suite(suite.path());
    let first = run_once(suite.path(), traces.path(), "run-1").await;
    let second = run_once(suite.path(), traces.path(), "run-2").await;

    let (one, two) = (
        first.fingerprint.as_ref().unwrap(),
        second.fingerprint.as_ref().unwrap(),
    );
    assert_eq!(one.tasks.len(), 2);
    assert_eq!(one.tasks, two.tasks);
    assert!(
        drift(&first, &second).is_empty(),
        "{:?}",
        drift(&first, &second)
    );

    fs::write(
        suite.path().join("tasks/alpha/fixture/file.txt"),
        "broken\nand a second line\n",
    )
    .unwrap();
    let third = run_once(suite.path(), traces.path(), "run-3").await;
    let drift = drift(&second, &third);
    assert_eq!(drift.tasks.len(), 1, "{:?}", drift.tasks);
    assert_eq!(
        drift.tasks["alpha"],
        TaskDrift::Changed(vec![TaskPart::Fixture])
    );
    assert_eq!(drift.describe(), vec!["task `alpha`: fixture changed"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_manifest_records_environment_config_and_answering_models() {
    let suite = tempfile::tempdir().unwrap();
    let traces = tempfile::tempdir().unwrap();
    write_suite(suite.path());
    let manifest = run_once(suite.path(), traces.path(), "run-env").await;
    assert_eq!(manifest.schema_version, MANIFEST_SCHEMA_VERSION);
    let print = manifest.fingerprint.unwrap();

    let env = &print.environment;
    assert!(!env.os.is_empty() && !env.kernel.is_empty());
    assert!(!env.tack_commit.is_empty());
    let bash = &env.toolchains[BASH_VERSION];
    match tack_sandbox::test_gate(SandboxProfile::Strict) {
        TestGate::Run => {
            assert!(bash.starts_with("GNU bash"), "{bash}");
            // A version printed on stderr is taken from there.
            assert_eq!(env.toolchains["echo 'on stderr' >&2"], "on stderr");
        }
        // Never run unconfined instead: the refusal is the value.
        TestGate::Skip(_) => assert!(bash.starts_with("error: "), "{bash}"),
        TestGate::Fail(reason) => panic!("{reason}"),
    }

    let oracle = &print.variants["oracle"];
    assert_eq!(oracle.config_hash.len(), 64);
    assert_eq!(oracle.models_answered, vec!["oracle".to_string()]);
    let alpha = &print.tasks["alpha"];
    assert_eq!(alpha.checks, None);
    assert_eq!(alpha.task_toml, print.tasks["beta"].task_toml);
}
