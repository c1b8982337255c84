//! Bad suite files are rejected with the file, the field and what to do.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::fs;
use std::path::Path;

const SUITE: &str = r#"
[suite]
name = "mini"
[[variants]]
name = "oracle"
model = "oracle"
"#;

const TASK: &str = r#"
instruction = "fix it"
[[checks]]
name = "hidden"
run = "grep -q fixed file.txt"
[solution]
[[solution.edits]]
path = "file.txt"
old = "broken"
new = "fixed"
"#;

/// An `[environment]` naming an image.
const IMAGE: &str = "image = \"debian:bookworm\"\nworkdir = \"/app\"";

/// [`TASK`] with `environment` as its `[environment]` and one service.
fn with_services(environment: &str, service: &str) -> String {
    TASK.replace(
        "instruction = \"fix it\"",
        &format!(
            "instruction = \"fix it\"\n[environment]\n{environment}\n[[environment.services]]\n{service}"
        ),
    )
}

fn write_suite(dir: &Path, suite: &str, task: &str) {
    fs::write(dir.join("suite.toml"), suite).unwrap();
    let task_dir = dir.join("tasks/one");
    fs::create_dir_all(task_dir.join("fixture")).unwrap();
    fs::write(task_dir.join("task.toml"), task).unwrap();
    fs::write(task_dir.join("fixture/file.txt"), "broken\n").unwrap();
}

fn load_error(suite: &str, task: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    write_suite(dir.path(), suite, task);
    match tack_suite::load_suite(dir.path()) {
        Ok(_) => panic!("expected an error"),
        Err(error) => error.to_string(),
    }
}

#[test]
fn a_good_suite_loads() {
    let dir = tempfile::tempdir().unwrap();
    write_suite(dir.path(), SUITE, TASK);
    let suite = tack_suite::load_suite(dir.path()).unwrap();
    assert_eq!(suite.tasks.len(), 1);
    assert_eq!(suite.variants[0].harness.max_steps, 30);
}

#[test]
fn errors_name_file_field_and_fix() {
    let cases: Vec<(String, String, &[&str])> = vec![
        (SUITE.replace("name = \"mini\"", "name = \"mini\"\ntrails = 3"), TASK.to_string(), &["suite.toml", "unknown field `trails`", "line"]),
        (SUITE.replace("model = \"oracle\"", "model = \"gpt-9\""), TASK.to_string(), &["suite.toml", "model", "`gpt-9`"]),
        (SUITE.replace("name = \"oracle\"", "name = \"has space\""), TASK.to_string(), &["variants[0].name", "letters, digits"]),
        (format!("{SUITE}[[variants]]\nname = \"oracle\"\nmodel = \"sim\"\n"), TASK.to_string(), &["variants[1].name", "used by two variants"]),
        (format!("{SUITE}[variants.sim]\nskill = 2.0\n"), TASK.to_string(), &["variants[0].sim", "`skill` must be between 0 and 1"]),
        (format!("{SUITE}[variants.harness]\ntool_results = \"everything\"\n"), TASK.to_string(), &["suite.toml", "unknown value `everything`"]),
        (format!("{SUITE}[variants.harness]\nmax_steps = 0\n"), TASK.to_string(), &["variants[0].harness.max_steps", "at least 1"]),
        (format!("{SUITE}[variants.harness.context]\ncompact_at = 0.8\n"), TASK.to_string(), &["variants[0].harness.context", "compact_at needs context_window"]),
        (format!("{SUITE}[variants.harness.context]\ncontext_window = 1000\ncompact_at = 80\n"), TASK.to_string(), &["harness.context", "compact_at = 80", "e.g. 0.8"]),
        (format!("{SUITE}[variants.harness.context]\nstrip_after = 3\n"), TASK.to_string(), &["suite.toml", "unknown field `strip_after`", "strip_results_after"]),
        ("[suite]\nname = \"x\"\n".to_string(), TASK.to_string(), &["variants", "add a [[variants]] table"]),
        (format!("{SUITE}[[variants.harness.mcp_servers]]\nname = \"fs\"\n"), TASK.to_string(), &["variants[0].harness.mcp_servers[0]", "needs `command`"]),
        (format!("{SUITE}[variants.agent]\ncommand = \"my-agent\"\n"), TASK.to_string(), &["variants[0].model", "needs a provider model"]),
        (format!("{SUITE}[variants.agent]\ncommand = \" \"\n").replace("\"oracle\"\n[", "\"openai:gpt-4o\"\n["), TASK.to_string(), &["variants[0].agent.command", "is empty"]),
        (format!("{SUITE}[variants.agent]\ncommand = \"a\"\nargs = []\n"), TASK.to_string(), &["suite.toml", "unknown field `args`"]),
        (format!("{SUITE}[[variants.harness.mcp_servers]]\nname = \"fs\"\ncommand = \"x\"\nurl = \"http://h\"\n"), TASK.to_string(), &["mcp_servers[0]", "both `command` and `url`"]),
        (format!("{SUITE}[[variants.harness.mcp_servers]]\nname = \"fs\"\ncommand = \"x\"\n[[variants.harness.mcp_servers]]\nname = \"fs\"\nurl = \"http://h/mcp\"\n"), TASK.to_string(), &["mcp_servers[1].name", "`fs` names two servers"]),
        (format!("{SUITE}[[variants.harness.mcp_servers]]\nname = \"db\"\ncommand = \"./servers/db.py\"\n"), TASK.to_string(), &["mcp_servers[0].command", "not a file in the suite directory"]),
        (format!("{SUITE}[[variants.harness.mcp_servers]]\nname = \"fs\"\ncommand = \"x\"\ntimeout = 3\n"), TASK.to_string(), &["suite.toml", "unknown field `timeout`"]),
        (SUITE.to_string(), TASK.replace("old = \"broken\"", "old = \"missing\""), &["task.toml", "solution.edits[0].old", "does not occur in file.txt"]),
        (SUITE.to_string(), TASK.replace("path = \"file.txt\"", "path = \"nope.txt\""), &["solution.edits[0].path", "cannot read nope.txt"]),
        (SUITE.to_string(), TASK.replace("[[checks]]\nname = \"hidden\"\nrun = \"grep -q fixed file.txt\"\n", ""), &["task.toml", "checks", "no hidden checks"]),
        (SUITE.to_string(), TASK.replace("instruction = \"fix it\"", "instructions = \"fix it\""), &["task.toml", "unknown field `instructions`"]),
        (SUITE.to_string(), TASK.replace("[solution]\n[[solution.edits]]\npath = \"file.txt\"\nold = \"broken\"\nnew = \"fixed\"\n", ""), &["solution", "no reference solution"]),
        (SUITE.to_string(), TASK.replace("name = \"hidden\"", "name = 5"), &["task.toml", "invalid type"]),
        (SUITE.to_string(), format!("{TASK}[[checks]]\nname = \"hidden\"\nrun = \"true\"\n"), &["task.toml", "checks[1].name", "`hidden` is also the name of checks[0]"]),
        (SUITE.to_string(), with_services("", "name = \"db\"\nimage = \"redis:7\""), &["environment.services", "the task names no image"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"DB\"\nimage = \"redis:7\""), &["environment.services[0].name", "not a host name"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\""), &["environment.services[0]", "names no image: add `image` or `dockerfile`"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\n[[environment.services]]\nname = \"db\"\nimage = \"b\""), &["environment.services[1].name", "`db` is taken"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\ndockerfile = \"../db/Dockerfile\""), &["environment.services[0].dockerfile", "inside the task directory"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\ncontext = \"db\""), &["environment.services[0].context", "names none"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\ncommand = []"), &["environment.services[0].command", "is empty"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\nenv = { 1X = \"a\" }"), &["environment.services[0].env.1X", "not a usable variable name"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\nhealthcheck = { command = \"true\", interval_secs = 0 }"), &["environment.services[0].healthcheck.interval_secs", "give seconds"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\nuser = \"a b\""), &["environment.services[0].user", "not a user of an image"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\nvolumes = [{ at = \"/data\" }]"), &["environment.services[0].volumes[0]", "mounts nothing: add `name`"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\nvolumes = [{ name = \"d\", path = \"file.txt\", at = \"/d\" }]"), &["environment.services[0].volumes[0].name", "and `path` both"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\nvolumes = [{ name = \"-d\", at = \"/d\" }]"), &["environment.services[0].volumes[0].name", "`-d` is not a volume name"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\nvolumes = [{ path = \"../secret\", at = \"/d\" }]"), &["environment.services[0].volumes[0].path", "inside the task directory"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\nvolumes = [{ path = \"nope.txt\", at = \"/d\" }]"), &["environment.services[0].volumes[0].path", "cannot be read"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\nvolumes = [{ name = \"d\", at = \"data\" }]"), &["environment.services[0].volumes[0].at", "give an absolute path"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\nvolumes = [{ name = \"d\", at = \"/d\" }, { name = \"e\", at = \"/d/\" }]"), &["environment.services[0].volumes[1].at", "`/d/` is mounted twice"]),
        (SUITE.to_string(), TASK.replace("instruction = \"fix it\"", "instruction = \"fix it\"\n[environment]\nvolumes = [{ name = \"d\", at = \"/d\" }]"), &["environment.volumes", "the task names no image"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\nwait = \"healthy\""), &["environment.services[0].wait", "has no health check"]),
        (SUITE.to_string(), with_services(IMAGE, "name = \"db\"\nimage = \"a\"\nwait = \"done\""), &["task.toml", "unknown value `done`"]),
    ];
    for (suite, task, words) in cases {
        let message = load_error(&suite, &task);
        for word in words {
            assert!(message.contains(word), "`{message}` lacks `{word}`");
        }
    }
}

#[test]
fn a_missing_suite_says_what_a_suite_is() {
    let dir = tempfile::tempdir().unwrap();
    let message = tack_suite::load_suite(dir.path()).unwrap_err().to_string();
    assert!(message.contains("suite.toml"), "{message}");
}

#[tokio::test]
async fn suite_check_finds_a_task_that_cannot_fail() {
    let dir = tempfile::tempdir().unwrap();
    write_suite(
        dir.path(),
        SUITE,
        &TASK.replace("grep -q fixed file.txt", "true"),
    );
    let suite = tack_suite::load_suite(dir.path()).unwrap();
    let results = tack_suite::check_suite(
        &suite,
        1,
        tack_protocol::SandboxProfile::Off,
        &Default::default(),
        &|_| {},
    )
    .await
    .unwrap();
    assert!(!results[0].sound());
    assert!(
        results[0]
            .detail
            .as_deref()
            .unwrap_or("")
            .contains("pass on the untouched fixture")
    );
    write_suite(dir.path(), SUITE, TASK);
    let suite = tack_suite::load_suite(dir.path()).unwrap();
    assert!(
        tack_suite::check_suite(
            &suite,
            1,
            tack_protocol::SandboxProfile::Off,
            &Default::default(),
            &|_| {},
        )
        .await
        .unwrap()[0]
            .sound()
    );
}

/// A service's volume is read on the host: a link anywhere on its path (a
/// directory of the task linked to ~/.config/tack) is refused, not only at
/// its last part (the walk of the suite's tree finds it first).
#[test]
fn a_volume_reached_through_a_link_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(outside.path().join("env"), "KEY=secret\n").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let task = with_services(
        IMAGE,
        "name = \"db\"\nimage = \"a\"\nvolumes = [{ path = \"d/env\", at = \"/secret\" }]",
    );
    write_suite(dir.path(), SUITE, &task);
    std::os::unix::fs::symlink(outside.path(), dir.path().join("tasks/one/d")).unwrap();
    let error = match tack_suite::load_suite(dir.path()) {
        Ok(_) => panic!("a volume through a link loaded"),
        Err(error) => error.to_string(),
    };
    // The walk of the suite's tree, before any task is read, finds it.
    assert!(
        error.contains("tasks/one/d: is a symbolic link") && error.contains("outside"),
        "{error}"
    );
}

/// A task.toml (or suite.toml) linked out of the suite is refused before it
/// is read: parsed, a line of the file it leads to (a host's secret) would
/// be quoted in the error.
#[test]
fn a_task_file_linked_out_is_refused_unread() {
    let outside = tempfile::tempdir().unwrap();
    fs::write(
        outside.path().join("secret"),
        "password = host-secret-1\n[broken\n",
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_suite(dir.path(), SUITE, TASK);
    for linked in ["tasks/one/task.toml", "suite.toml"] {
        let path = dir.path().join(linked);
        let kept = fs::read(&path).unwrap();
        fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), &path).unwrap();
        let error = match tack_suite::load_suite(dir.path()) {
            Ok(_) => panic!("a {linked} linked out loaded"),
            Err(error) => error.to_string(),
        };
        assert!(error.contains("outside"), "{error}");
        assert!(error.contains(linked), "{error}");
        assert!(!error.contains("host-secret"), "{error}");
        fs::remove_file(&path).unwrap();
        fs::write(&path, kept).unwrap();
    }
}
