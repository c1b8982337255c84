use std::path::{Path, PathBuf};
use std::time::Duration;

use super::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/harbor")
        .join(name)
}

fn load(name: &str) -> HarborTask {
    match HarborTask::load(&fixture(name)) {
        Ok(task) => task,
        Err(e) => panic!("fixture {name} did not load: {e}"),
    }
}

#[test]
fn minimal_task_with_workdir_copy_and_reward_txt() {
    let task = load("minimal");
    assert_eq!(task.name, "minimal");
    assert!(task.instruction.starts_with("Count the lines"));
    let timeouts = task.config.timeouts;
    assert_eq!(timeouts.agent, Some(Duration::from_secs(300)));
    assert_eq!(timeouts.verifier, Some(Duration::from_secs(60)));
    assert_eq!(timeouts.build, Some(Duration::from_millis(120_500)));
    assert_eq!(task.config.resources.memory_mb, Some(1024));
    assert_eq!(task.config.resources.storage_mb, None);
    assert!(task.config.network.allow_internet);
    assert_eq!(task.config.network.raw, None);

    let Some(file) = &task.environment.dockerfile else {
        panic!("no Dockerfile read")
    };
    assert_eq!(file.base_image.name, "debian");
    assert!(file.base_image.is_stock());
    assert_eq!(file.workdir.as_deref(), Some("/app"));
    assert_eq!(file.copies.len(), 1);
    assert_eq!(file.copies[0].sources, ["data.txt"]);
    assert_eq!(file.copies[0].destination, "/app/");
    assert_eq!(task.tests.reward, RewardKind::Text);
    assert_eq!(task.tests.files, [PathBuf::from("test.sh")]);

    let assessment = task.assessment();
    assert!(assessment.container_reasons.is_empty(), "{assessment:?}");
    assert!(assessment.toolchain_differences.is_empty());
    let placement = &assessment.placements[0];
    assert_eq!(
        placement.source,
        task.environment.build_context.join("data.txt")
    );
    assert_eq!(placement.at, "/app/");
    assert!(!placement.outside_workdir);
}

#[test]
fn compose_context_chown_and_copy_outside_workdir() {
    let task = load("compose-context");
    assert_eq!(
        task.environment.build_context,
        fixture("compose-context/environment/..")
    );
    assert!(task.environment.compose_file.is_some());
    assert!(!task.config.network.allow_internet);
    assert_eq!(
        task.config.network.raw.as_deref(),
        Some("allow_internet = false")
    );

    let Some(file) = &task.environment.dockerfile else {
        panic!("no Dockerfile read")
    };
    assert_eq!(file.base_image.name, "python");
    assert_eq!(file.base_image.tag.as_deref(), Some("3.12-slim-bookworm"));
    assert!(
        file.base_image
            .digest
            .as_deref()
            .is_some_and(|d| d.starts_with("sha256:"))
    );
    let copies: Vec<(&[String], &str, Option<&str>)> = file
        .copies
        .iter()
        .map(|c| {
            (
                c.sources.as_slice(),
                c.destination.as_str(),
                c.chown.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        copies,
        [
            (&["app/".to_string()][..], "/app/", None),
            (
                &["settings.json".to_string()][..],
                "/app/config/settings.json",
                Some("1000:1000")
            ),
            (&["queries".to_string()][..], "/queries", None),
        ]
    );
    assert_eq!(file.user.as_deref(), Some("1000"));
    assert_eq!(file.cmd.as_deref(), Some(r#"["python", "-m", "src"]"#));
    assert_eq!(task.tests.reward, RewardKind::ExitCode);
    assert!(task.tests.script.needs.pytest);

    let assessment = task.assessment();
    let reasons = &assessment.container_reasons;
    // Only solve.sh's chown and su need a container; the copies are placeable.
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert!(
        reasons[0].starts_with("solution/solve.sh line 3: `chown -R nobody /app/out` needs root")
    );
    assert!(reasons[1].starts_with("solution/solve.sh line 4: `su nobody"));
    let queries = &assessment.placements[2];
    assert!(queries.outside_workdir);
    assert_eq!(
        queries.source,
        task.environment.build_context.join("queries")
    );
    assert!(
        assessment
            .notes
            .iter()
            .any(|n| n.contains("places queries at /queries, outside the WORKDIR"))
    );
    assert_eq!(assessment.placements[1].chown.as_deref(), Some("1000:1000"));
    assert_eq!(
        assessment.provisioning.python_version.as_deref(),
        Some("3.12")
    );
}

#[test]
fn multi_line_run_with_a_build_step_is_unreproducible_as_a_whole() {
    let task = load("mixed-run");
    let Some(file) = &task.environment.dockerfile else {
        panic!("no Dockerfile read")
    };
    assert_eq!(file.workdir, None);
    assert_eq!(
        file.env,
        [
            ("LANG".to_string(), "C.UTF-8".to_string()),
            ("TOOL_HOME".to_string(), "/opt/tool dir".to_string()),
        ]
    );
    let step = &file.runs[0];
    assert_eq!(step.line, 6);
    assert_eq!(step.commands.len(), 5);
    assert_eq!(
        step.unreproducible().map(|(c, _)| c),
        Some("make -C /opt/gen")
    );
    assert_eq!(file.debian_packages(), ["gcc", "make", "python3-pip"]);
    assert_eq!(file.python_packages(), ["numpy==2.1.0", "requests==2.32.3"]);
    assert_eq!(file.runs[1].unreproducible(), None);
    assert_eq!(
        file.runs[2].commands,
        [RunCommand::Directories {
            paths: vec!["/data/out".to_string()]
        }]
    );

    let assessment = task.assessment();
    assert_eq!(assessment.container_reasons.len(), 1, "{assessment:?}");
    let reason = &assessment.container_reasons[0];
    assert!(
        reason.starts_with("Dockerfile line 6: `RUN apt-get update &&"),
        "{reason}"
    );
    assert!(
        reason.ends_with("`make -C /opt/gen` builds something tack cannot reproduce"),
        "{reason}"
    );
    // An absolute destination needs no WORKDIR; the note says WORKDIR is unset.
    assert!(file.copies[0].workdir_known);
    assert!(
        assessment
            .notes
            .iter()
            .any(|n| n.contains("sets no WORKDIR"))
    );
    assert_eq!(
        assessment.provisioning.python_packages,
        ["numpy==2.1.0", "requests==2.32.3", "pytest==8.3.3"]
    );
    assert_eq!(
        task.tests.reward,
        RewardKind::Json {
            keys: vec!["correct".to_string(), "fast".to_string()]
        }
    );
}

#[test]
fn schema_1_3_task_toml_with_network_mode_and_env_tables() {
    let task = load("schema13");
    let config = &task.config;
    assert_eq!(config.schema_version.as_deref(), Some("1.3"));
    assert_eq!(task.name, "fixtures/schema13");
    assert!(!config.network.allow_internet);
    assert_eq!(
        config.network.raw.as_deref(),
        Some("network_mode = \"none\"")
    );
    assert_eq!(config.timeouts.verifier, None);
    assert_eq!(config.timeouts.agent, Some(Duration::from_secs(1200)));
    assert_eq!(
        config.verifier_env.get("MODE").map(String::as_str),
        Some("strict")
    );
    assert_eq!(
        config.verifier_env.get("RETRIES").map(String::as_str),
        Some("3")
    );
    assert_eq!(
        config.solution_env.get("HINT").map(String::as_str),
        Some("none")
    );
    assert_eq!(config.skills_dir.as_deref(), Some("/skills"));
    assert_eq!(
        config.docker_image.as_deref(),
        Some("example.org/tasks/schema13:1.0")
    );
    let mut notes = Vec::new();
    super::write::unenforced_notes(&task, &mut notes);
    assert!(
        notes.iter().any(|n| n.starts_with(
            "docker_image example.org/tasks/schema13:1.0 is not pulled: the task's image is built"
        )),
        "{notes:?}"
    );
    assert_eq!(config.artifacts, ["/app/out.txt"]);
    assert_eq!(config.resources.gpus, Some(0));
    assert!(task.solution.is_none());

    let needs = &task.tests.script.needs;
    assert_eq!(needs.debian_packages, ["curl"]);
    assert_eq!(
        needs.uv_installer.as_deref(),
        Some("https://astral.sh/uv/0.9.7/install.sh")
    );
    let run = &needs.uv_runs[0];
    assert_eq!(run.python.as_deref(), Some("3.13"));
    assert_eq!(run.with, ["pytest==8.4.1"]);
    assert_eq!(run.command[0], "pytest");
    assert!(!needs.pytest, "pytest comes from uvx, not the image");

    let assessment = task.assessment();
    assert_eq!(assessment.toolchain_differences.len(), 1);
    assert!(assessment.toolchain_differences[0].contains("alpine:3.20 is not a stock"));
    let reasons = &assessment.container_reasons;
    assert!(
        reasons
            .iter()
            .any(|r| r.contains("`apk add --no-cache bash python3` uses a package manager"))
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("tests/test.sh line 6: `useradd checker` needs root"))
    );
    assert_eq!(assessment.provisioning.uv_python.as_deref(), Some("3.13"));
    assert!(
        assessment
            .notes
            .iter()
            .any(|n| n.contains("no internet (network_mode = \"none\")"))
    );
}

/// A copy of the minimal fixture in a temporary directory, to break.
fn scratch() -> tempfile::TempDir {
    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => panic!("no temporary directory: {e}"),
    };
    copy_tree(&fixture("minimal"), dir.path());
    dir
}

fn copy_tree(from: &Path, to: &Path) {
    if let Err(e) = tack_suite::copy_tree(from, to, from) {
        panic!("could not copy {}: {e}", from.display());
    }
}

fn write(dir: &Path, name: &str, text: &str) {
    if let Err(e) = std::fs::write(dir.join(name), text) {
        panic!("could not write {name}: {e}");
    }
}

fn load_error(dir: &Path) -> String {
    match HarborTask::load(dir) {
        Ok(task) => panic!("{} loaded: {task:?}", dir.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_scratch_copy_loads_before_it_is_broken() {
    let dir = scratch();
    assert!(HarborTask::load(dir.path()).is_ok());
}

#[test]
fn missing_instruction_names_the_file() {
    let dir = scratch();
    std::fs::remove_file(dir.path().join("instruction.md")).ok();
    let message = load_error(dir.path());
    assert!(message.contains("instruction.md is missing"), "{message}");
}

#[test]
fn unparsable_task_toml_names_file_and_line() {
    let dir = scratch();
    write(
        dir.path(),
        "task.toml",
        "version = \"1.0\"\n\n[agent]\ntimeout_sec = = 3\n",
    );
    let message = load_error(dir.path());
    assert!(message.contains("task.toml line 4:"), "{message}");
}

#[test]
fn wrongly_typed_field_is_named() {
    let dir = scratch();
    write(dir.path(), "task.toml", "[agent]\ntimeout_sec = \"soon\"\n");
    let message = load_error(dir.path());
    assert!(
        message.contains("[agent] timeout_sec must be a number, found string"),
        "{message}"
    );
}

#[test]
fn keys_harbor_does_not_know_are_named_with_the_nearest_it_does() {
    let dir = scratch();
    write(
        dir.path(),
        "task.toml",
        "version = \"1.0\"\nextra = 1\n[metadata]\nanything = 2\n[environment]\nmemroy_mb = 512\n\
         workdir = \"/srv\"\n[environment.healthcheck]\ncommand = \"true\"\nretry = 3\n",
    );
    let task = HarborTask::load(dir.path()).unwrap();
    assert_eq!(
        task.config.unknown_keys,
        [
            "`extra` is not a Harbor setting",
            "`environment.memroy_mb` is not a Harbor setting: did you mean `memory_mb`?",
            "`environment.healthcheck.retry` is not a Harbor setting: did you mean `retries`?",
        ]
    );
    assert_eq!(task.config.workdir.as_deref(), Some("/srv"));
    assert_eq!(task.workdir(), Some("/srv"));
}

#[test]
fn harbors_spellings_of_no_network_are_read_as_none() {
    for mode in ["none", "no-network", "no_network", "offline"] {
        let dir = scratch();
        write(
            dir.path(),
            "task.toml",
            &format!("[environment]\nnetwork_mode = \"{mode}\"\n"),
        );
        match HarborTask::load(dir.path()) {
            Ok(task) => assert!(!task.config.network.allow_internet, "{mode}"),
            Err(e) => panic!("{mode}: {e}"),
        }
    }
    let dir = scratch();
    write(
        dir.path(),
        "task.toml",
        "[environment]\nnetwork_mode = \"mesh\"\n",
    );
    let message = load_error(dir.path());
    assert!(
        message.contains("\"mesh\" is not a network mode"),
        "{message}"
    );
}

#[test]
fn dockerfile_without_from_is_an_error() {
    let dir = scratch();
    write(
        &dir.path().join("environment"),
        "Dockerfile",
        "# nothing\n\n",
    );
    let message = load_error(dir.path());
    assert!(
        message.contains("Dockerfile has no FROM instruction"),
        "{message}"
    );
    write(
        &dir.path().join("environment"),
        "Dockerfile",
        "# base\nWORKDIR /app\nFROM debian\n",
    );
    let message = load_error(dir.path());
    assert!(
        message.contains("Dockerfile line 2: WORKDIR comes before any FROM"),
        "{message}"
    );
}

#[test]
fn two_sources_with_one_name_import_the_first_and_say_why_not_the_second() {
    let Ok(dir) = tempfile::tempdir() else {
        panic!("no temporary directory");
    };
    let (first, second) = (dir.path().join("a/task"), dir.path().join("b/task"));
    copy_tree(&fixture("minimal"), &first);
    copy_tree(&fixture("minimal"), &second);
    let import = match super::import_tasks(
        &[first.clone(), second.clone()],
        &dir.path().join("suite"),
        super::TaskMode::Host,
    ) {
        Ok(import) => import,
        Err(e) => panic!("{e}"),
    };
    assert_eq!(import.converted.len(), 1, "{import:?}");
    assert_eq!(import.skipped.len(), 1, "{import:?}");
    assert_eq!(import.skipped[0].source, second);
    assert!(
        import.skipped[0].reason.contains("same directory name"),
        "{}",
        import.skipped[0].reason
    );
}

/// A solution that starts a server the tests then reach (Terminal-Bench's
/// configure-git-webserver starts nginx and sshd) imports in engine mode,
/// the line named: under tack's sandbox the server would end with the
/// command that started it.
#[test]
fn a_solution_that_leaves_a_server_running_imports_in_engine_mode() {
    let dir = scratch();
    write(
        dir.path(),
        "solution/solve.sh",
        "#!/bin/bash\napt-get install -y nginx\nservice nginx start\n",
    );
    let task = match HarborTask::load(dir.path()) {
        Ok(task) => task,
        Err(e) => panic!("{e}"),
    };
    let out = scratch();
    let converted = match image_task::write_image_task(
        &task,
        "minimal".into(),
        &out.path().join("staged"),
        &out.path().join("minimal"),
    ) {
        Ok(converted) => converted,
        Err(e) => panic!("{e}"),
    };
    assert!(converted.engine);
    let toml = std::fs::read_to_string(out.path().join("staged/task.toml")).unwrap_or_default();
    assert!(
        toml.contains(
            "# Its solution leaves a process running for the tests (solution/solve.sh line 3: \
             `service nginx start`): it runs in a container the engine starts.\nmode = \"engine\""
        ),
        "{toml}"
    );

    // The same task without it runs in the image's filesystem.
    let plain = load("minimal");
    assert!(plain.solution.iter().all(|s| s.script.daemons.is_empty()));
}

/// A task made for a cluster that cannot build (Harbor's `docker_image`,
/// no Dockerfile) imports as an image task of that image; approximated on
/// the host it needs its container, and without either it is refused with
/// what to add.
#[test]
fn a_task_with_a_prebuilt_image_and_no_dockerfile_runs_from_that_image() {
    let dir = scratch();
    std::fs::remove_file(dir.path().join("environment/Dockerfile")).ok();
    let message = load_error(dir.path());
    assert!(
        message.contains("environment/Dockerfile is missing")
            && message.contains("or [environment] docker_image in task.toml"),
        "{message}"
    );
    write(
        dir.path(),
        "task.toml",
        "[environment]\ndocker_image = \"example.org/tasks/prebuilt:2\"\n",
    );
    let task = match HarborTask::load(dir.path()) {
        Ok(task) => task,
        Err(e) => panic!("{e}"),
    };
    assert!(task.environment.dockerfile.is_none());
    let assessment = task.assessment();
    assert!(
        assessment.container_reasons.iter().any(|r| r.contains(
            "it has no Dockerfile: it runs from the prebuilt image example.org/tasks/prebuilt:2"
        )),
        "{assessment:?}"
    );

    let out = scratch();
    let converted = match image_task::write_image_task(
        &task,
        "prebuilt".into(),
        &out.path().join("staged"),
        &out.path().join("prebuilt"),
    ) {
        Ok(converted) => converted,
        Err(e) => panic!("{e}"),
    };
    assert!(!converted.engine);
    assert!(
        converted.notes.iter().all(|n| !n.contains("is not pulled")),
        "{:?}",
        converted.notes
    );
    let toml = std::fs::read_to_string(out.path().join("staged/task.toml")).unwrap_or_default();
    assert!(
        toml.contains("# run from its prebuilt image example.org/tasks/prebuilt:2, each trial")
            && toml.contains("workdir = \"/app\".\nimage = \"example.org/tasks/prebuilt:2\"\n")
            && !toml.contains("dockerfile ="),
        "{toml}"
    );
    let config: toml::Table = match toml.parse() {
        Ok(config) => config,
        Err(e) => panic!("{e}\n{toml}"),
    };
    assert_eq!(
        config["environment"]["image"].as_str(),
        Some("example.org/tasks/prebuilt:2")
    );
}

/// Docker reads an absolute COPY source in the build context; the host
/// approximation must too, never the host's own file of that name.
#[test]
fn an_absolute_copy_source_is_read_in_the_build_context() {
    let dir = scratch();
    write(
        &dir.path().join("environment"),
        "Dockerfile",
        "FROM debian:bookworm\nWORKDIR /app\nCOPY /etc/hostname /data.txt /app/\n",
    );
    let task = match HarborTask::load(dir.path()) {
        Ok(task) => task,
        Err(e) => panic!("did not load: {e}"),
    };
    let context = &task.environment.build_context;
    let sources: Vec<PathBuf> = task
        .assessment()
        .placements
        .iter()
        .map(|p| p.source.clone())
        .collect();
    assert_eq!(
        sources,
        [context.join("etc/hostname"), context.join("data.txt")]
    );
}

#[test]
fn a_dockerfile_named_outside_the_task_is_refused_unread() {
    let root = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => panic!("no temporary directory: {e}"),
    };
    let task = root.path().join("task");
    copy_tree(&fixture("minimal"), &task);
    write(
        root.path(),
        "host.txt",
        "FROM debian\nRUN echo host-secret\n",
    );
    for dockerfile in [
        "../../host.txt".to_string(),
        root.path().join("host.txt").display().to_string(),
    ] {
        write(
            &task.join("environment"),
            "docker-compose.yaml",
            &format!(
                "services:\n  main:\n    build:\n      context: .\n      dockerfile: {dockerfile}\n"
            ),
        );
        let message = load_error(&task);
        assert!(message.contains("is outside the task"), "{message}");
        assert!(!message.contains("host-secret"), "{message}");
    }
}

/// The task's own words written into a comment of the task.toml written
/// (its name, an unknown key) cannot end the comment and add settings.
#[test]
fn a_task_name_cannot_write_settings_into_the_imported_task_toml() {
    let Ok(dir) = tempfile::tempdir() else {
        panic!("no temporary directory");
    };
    let task = dir.path().join("inj");
    copy_tree(&fixture("minimal"), &task);
    let toml = "version = \"1.0\"\n[task]\nname = \"x`\\ntest_command = \\\"echo injected\\\"\\n#\"\n\
                \"evil\\nmax_steps = 1\" = 1\n";
    write(&task, "task.toml", toml);
    for mode in [super::TaskMode::Host, super::TaskMode::Image] {
        let suite = dir.path().join(format!("suite-{mode:?}"));
        let import = match super::import_tasks(std::slice::from_ref(&task), &suite, mode) {
            Ok(import) => import,
            Err(e) => panic!("{e}"),
        };
        assert_eq!(import.converted.len(), 1, "{import:?}");
        let written = match std::fs::read_to_string(suite.join("tasks/inj/task.toml")) {
            Ok(text) => text,
            Err(e) => panic!("{e}"),
        };
        let table: toml::Table = match written.parse() {
            Ok(table) => table,
            Err(e) => panic!("{e}\n{written}"),
        };
        assert!(!table.contains_key("test_command"), "{written}");
        assert!(!table.contains_key("max_steps"), "{written}");
        assert!(written.contains("x`^Jtest_command"), "{written}");
    }
}

/// Harbor's tests come in at /tests after the agent stops: an imported task
/// protects nothing of its workspace, so an agent asked to write
/// tests/test_x.py (and the oracle doing so) is not flagged as tampering.
#[test]
fn an_imported_task_protects_no_workspace_file() {
    let Ok(dir) = tempfile::tempdir() else {
        panic!("no temporary directory");
    };
    let task = dir.path().join("plain");
    copy_tree(&fixture("minimal"), &task);
    for mode in [super::TaskMode::Host, super::TaskMode::Image] {
        let suite = dir.path().join(format!("suite-{mode:?}"));
        if let Err(e) = super::import_tasks(std::slice::from_ref(&task), &suite, mode) {
            panic!("{e}");
        }
        let written =
            std::fs::read_to_string(suite.join("tasks/plain/task.toml")).unwrap_or_default();
        let table: toml::Table = written.parse().unwrap_or_default();
        assert_eq!(
            table.get("protected"),
            Some(&toml::Value::Array(Vec::new())),
            "{written}"
        );
        // The suite file names, commented out, the images to map offline.
        let suite_file = std::fs::read_to_string(suite.join("suite.toml")).unwrap_or_default();
        let stub = "# [images]\n# \"debian:bookworm-slim\" = \"localhost/...\"";
        assert_eq!(
            mode == super::TaskMode::Image,
            suite_file.contains(stub),
            "{suite_file}"
        );
    }
}
