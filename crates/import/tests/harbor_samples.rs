//! The Harbor analysis against five published tasks kept next to the
//! repository (`../shared/harbor-samples`, see its SOURCES.tsv), which are
//! not ours to copy in. Skipped when that directory is absent.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tack_import::harbor::{Assessment, Dockerfile, HarborTask, RewardKind};

fn samples() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/harbor-samples");
    if dir.is_dir() {
        Some(dir)
    } else {
        eprintln!("skipped: {} is absent", dir.display());
        None
    }
}

fn dockerfile(task: &HarborTask) -> &Dockerfile {
    match &task.environment.dockerfile {
        Some(file) => file,
        None => panic!("{} has no Dockerfile", task.dir.display()),
    }
}

fn load(samples: &Path, name: &str) -> (HarborTask, Assessment) {
    match HarborTask::load(&samples.join(name)) {
        Ok(task) => {
            let assessment = task.assessment();
            (task, assessment)
        }
        Err(e) => panic!("sample {name} did not load: {e}"),
    }
}

const CTRF_PINS: [&str; 2] = ["pytest==8.4.1", "pytest-json-ctrf==0.3.5"];

#[test]
fn log_report_copies_its_log_and_tests_with_the_image_pytest() {
    let Some(samples) = samples() else { return };
    let (task, assessment) = load(&samples, "log-report");
    assert_eq!(task.name, "dynamo/log-report");
    let file = dockerfile(&task);
    assert_eq!(file.base_image.name, "python");
    assert!(file.base_image.digest.is_some());
    assert_eq!(file.workdir.as_deref(), Some("/app"));
    assert_eq!(file.python_packages(), CTRF_PINS);
    assert_eq!(file.copies[0].sources, ["access.log"]);
    assert_eq!(file.copies[0].destination, "/app/access.log");
    assert_eq!(task.tests.reward, RewardKind::Text);
    assert!(task.tests.script.needs.pytest);
    assert!(task.tests.script.needs.uv_runs.is_empty());
    assert_eq!(task.config.artifacts, ["/app/report.json"]);
    assert_eq!(task.config.resources.gpus, Some(0));

    assert!(assessment.container_reasons.is_empty(), "{assessment:?}");
    assert!(assessment.toolchain_differences.is_empty());
    assert_eq!(assessment.provisioning.python_packages, CTRF_PINS);
    assert_eq!(
        assessment.provisioning.python_version.as_deref(),
        Some("3.13")
    );
    assert!(!assessment.provisioning.uv);
    assert_eq!(assessment.placements.len(), 1);
    assert!(
        assessment.placements[0]
            .source
            .ends_with("environment/access.log")
    );
}

#[test]
fn cookbook_simple_task_installs_curl_and_uv_at_test_time() {
    let Some(samples) = samples() else { return };
    let (task, assessment) = load(&samples, "cookbook-simple-task");
    assert_eq!(task.name, "cookbook-simple-task");
    assert_eq!(task.config.timeouts.agent, Some(Duration::from_secs(120)));
    assert!(dockerfile(&task).runs.is_empty());
    let needs = &task.tests.script.needs;
    assert_eq!(needs.debian_packages, ["curl"]);
    assert_eq!(
        needs.uv_installer.as_deref(),
        Some("https://astral.sh/uv/0.9.7/install.sh")
    );
    assert_eq!(needs.uv_runs.len(), 1);
    assert_eq!(needs.uv_runs[0].with, CTRF_PINS);
    assert_eq!(needs.uv_runs[0].command[0], "pytest");
    assert_eq!(task.tests.reward, RewardKind::Text);

    assert!(assessment.container_reasons.is_empty(), "{assessment:?}");
    assert!(assessment.provisioning.uv);
    assert_eq!(assessment.provisioning.uv_with, CTRF_PINS);
    assert_eq!(assessment.provisioning.debian_packages, ["curl"]);
}

#[test]
fn sha256_xor_c_needs_a_c_toolchain_and_pytest_8_0() {
    let Some(samples) = samples() else { return };
    let (task, assessment) = load(&samples, "sha256-xor-c");
    let file = dockerfile(&task);
    assert_eq!(file.base_image.reference, "ubuntu:24.04");
    assert_eq!(
        file.debian_packages(),
        ["gcc", "make", "python3", "python3-pip"]
    );
    assert_eq!(file.python_packages(), ["pytest==8.0.0"]);
    assert!(file.copies.is_empty());
    assert_eq!(task.config.resources.cpus, Some(2.0));
    assert_eq!(task.config.timeouts.verifier, Some(Duration::from_secs(60)));
    assert!(task.tests.script.needs.pytest);
    let solution = task.solution.as_ref().map(|s| &s.script);
    assert!(solution.is_some_and(|s| s.programs.contains("gcc")));
    // The C source in solve.sh's heredoc is data, not commands.
    assert!(solution.is_some_and(|s| !s.programs.contains("static")));

    assert!(assessment.container_reasons.is_empty(), "{assessment:?}");
    assert_eq!(assessment.provisioning.python_packages, ["pytest==8.0.0"]);
}

#[test]
fn reconcile_batch_is_schema_1_3_and_copies_its_project() {
    let Some(samples) = samples() else { return };
    let (task, assessment) = load(&samples, "reconcile-batch");
    let config = &task.config;
    assert_eq!(config.schema_version.as_deref(), Some("1.3"));
    assert_eq!(task.name, "Amol07/reconcile-batch-task");
    assert!(config.network.allow_internet);
    assert_eq!(
        config.network.raw.as_deref(),
        Some("network_mode = \"public\"")
    );
    assert!(config.verifier_env.is_empty());
    assert_eq!(config.timeouts.agent, Some(Duration::from_secs(1800)));
    let file = dockerfile(&task);
    assert_eq!(file.base_image.reference, "python:3.12-slim");
    assert_eq!(file.env.len(), 2);
    assert_eq!(file.copies[0].sources, ["project/"]);
    assert_eq!(file.copies[0].destination, "/app/");
    assert_eq!(file.cmd.as_deref(), Some(r#"["bash"]"#));
    assert_eq!(task.tests.script.needs.uv_runs[0].with, CTRF_PINS);

    assert!(assessment.container_reasons.is_empty(), "{assessment:?}");
    assert_eq!(
        assessment.provisioning.python_version.as_deref(),
        Some("3.12")
    );
    assert!(
        assessment.placements[0]
            .source
            .ends_with("environment/project/")
    );
    assert!(!assessment.placements[0].outside_workdir);
}

#[test]
fn cookbook_multi_reward_writes_two_keys_to_reward_json() {
    let Some(samples) = samples() else { return };
    let (task, assessment) = load(&samples, "cookbook-multi-reward");
    assert_eq!(
        task.tests.reward,
        RewardKind::Json {
            keys: vec!["correctness".to_string(), "performance".to_string()]
        }
    );
    let needs = &task.tests.script.needs;
    assert_eq!(needs.uv_runs.len(), 2);
    assert!(task.tests.script.programs.contains("python3"));
    assert_eq!(dockerfile(&task).debian_packages(), ["python3"]);
    assert_eq!(
        task.tests.files,
        ["test.sh", "test_correctness.py", "test_performance.py"].map(PathBuf::from)
    );

    assert!(assessment.container_reasons.is_empty(), "{assessment:?}");
    assert_eq!(assessment.provisioning.debian_packages, ["python3", "curl"]);
}
