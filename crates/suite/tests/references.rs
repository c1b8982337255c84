//! Everything a variant or task names — rules files, approvers, limits,
//! check files, the suite's own files — is checked when the suite loads, so
//! a bad suite stops before a run starts instead of failing every trial.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::fs;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

const SUITE: &str = r#"
[suite]
name = "mini"
[[variants]]
name = "guarded"
model = "oracle"
[variants.harness]
"#;

const TASK: &str = r#"
instruction = "fix it"
[[checks]]
name = "hidden"
run = "sh \"$TACK_CHECKS/check.sh\""
[solution]
[[solution.edits]]
path = "file.txt"
old = "broken"
new = "fixed"
"#;

const RULES: &str = "fallback = \"ask\"\n[[rules]]\naction = \"allow\"\ncommand = \"ls *\"\n";

/// A valid suite in a fresh directory; `harness` is appended to the
/// variant's `[variants.harness]` table.
fn suite(harness: &str, task: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    fs::write(root.join("suite.toml"), format!("{SUITE}{harness}")).unwrap();
    fs::write(root.join("rules.toml"), RULES).unwrap();
    let task_dir = root.join("tasks/one");
    fs::create_dir_all(task_dir.join("fixture")).unwrap();
    fs::create_dir_all(task_dir.join("checks")).unwrap();
    fs::write(task_dir.join("task.toml"), task).unwrap();
    fs::write(task_dir.join("fixture/file.txt"), "broken\n").unwrap();
    fs::write(task_dir.join("checks/check.sh"), "grep -q fixed file.txt\n").unwrap();
    dir
}

fn error_of(dir: &Path) -> String {
    match tack_suite::load_suite(dir) {
        Ok(_) => panic!("expected {} to be refused", dir.display()),
        Err(error) => error.to_string(),
    }
}

fn assert_mentions(message: &str, words: &[&str]) {
    for word in words {
        assert!(message.contains(word), "`{message}` lacks `{word}`");
    }
}

#[test]
fn the_base_suite_loads_with_its_rules_file_and_approvers() {
    for harness in [
        "",
        "permissions = \"default\"\n",
        "permissions = \"rules.toml\"\n",
        "permissions = \"rules.toml\"\nrequires_approval = [\"bash\"]\n[variants.harness.approver]\npolicy = \"rules\"\napprove = [\"python3 -m unittest*\", \"str_replace\"]\n",
        "[variants.harness.approver]\npolicy = \"script\"\nscript = \"grep -q unittest && echo fine\"\n",
        "max_cost_usd = 0.5\nmax_wall_secs = 60\nmax_tokens = 1000\n",
    ] {
        let dir = suite(harness, TASK);
        if let Err(error) = tack_suite::load_suite(dir.path()) {
            panic!("{harness:?} was refused: {error}");
        }
    }
}

#[test]
#[rustfmt::skip] // one case a line
fn harness_settings_are_checked_when_the_suite_loads() {
    let field = "variants[0].harness";
    let cases: &[(&str, &[&str])] = &[
        ("permissions = \"missing.toml\"\n", &["suite.toml", "harness.permissions", "(variant `guarded`)", "missing.toml", "does not exist"]),
        ("permissions = \"\"\n", &["harness.permissions", "is empty"]),
        ("permissions = \"tasks\"\n", &["harness.permissions", "is a directory"]),
        ("permissions = \"suite.toml\"\n", &["harness.permissions", "not valid", "unknown key"]),
        ("max_cost_usd = nan\n", &[field, "max_cost_usd", "NaN", "leave it out"]),
        ("max_cost_usd = inf\n", &["max_cost_usd", "inf"]),
        ("max_cost_usd = -1.0\n", &["max_cost_usd", "-1"]),
        ("max_cost_usd = 0.0\n", &["max_cost_usd", "above 0"]),
        ("max_steps = 0\n", &["harness.max_steps", "at least 1"]),
        ("max_steps = -3\n", &["suite.toml", "max_steps", "-3"]),
        ("command_timeout_secs = 0\n", &["harness.command_timeout_secs"]),
        ("output_limit_bytes = 0\n", &["harness.output_limit_bytes"]),
        ("model_attempts = 0\n", &["harness.model_attempts", "no retries"]),
        ("max_wall_secs = 0\n", &["harness.max_wall_secs"]),
        ("max_tokens = 0\n", &["harness.max_tokens"]),
        ("tools = []\n", &["harness.tools", "no tools"]),
        ("tools = [\"bash\", \"\"]\n", &["harness.tools[1]", "empty"]),
        ("tools = [\"bash\", \"bash\"]\n", &["harness.tools[1]", "twice"]),
        ("tools = [\"bash\"]\nrequires_approval = [\"write_flie\"]\n", &["harness.requires_approval[0]", "write_flie"]),
        ("[variants.harness.approver]\npolicy = \"script\"\n", &["harness.approver.script", "is missing"]),
        ("[variants.harness.approver]\npolicy = \"script\"\nscript = \"  \"\n", &["harness.approver.script", "is empty"]),
        ("[variants.harness.approver]\npolicy = \"script\"\nscript = \"./review.sh\"\n", &["harness.approver.script", "review.sh", "does not exist"]),
        ("[variants.harness.approver]\npolicy = \"script\"\nscript = \"no-such-reviewer-program --strict\"\n", &["harness.approver.script", "not on PATH"]),
        ("[variants.harness.approver]\npolicy = \"script\"\nscript = \"python3 review.py\"\n", &["harness.approver.script", "review.py", "does not exist"]),
        ("[variants.harness.approver]\npolicy = \"rules\"\napprove = [\"python3 [unclosed\"]\n", &["harness.approver.approve[0]", "not a valid glob"]),
        ("[variants.harness.approver]\napprove = [\"ls\"]\n", &["harness.approver.approve", "only read with policy = \"rules\"", "deny_all"]),
        ("[variants.harness.approver]\npolicy = \"approve_all\"\nscript = \"x\"\n", &["harness.approver.script", "only read with policy = \"script\""]),
        ("[variants.harness.approver]\npolicy = \"maybe\"\n", &["suite.toml", "policy", "maybe"]),
        ("[variants.provider]\nmax_concurrency = 0\n", &["provider.max_concurrency", "at least 1"]),
        ("[variants.provider]\napi_key_env = \"\"\n", &["provider.api_key_env", "empty"]),
    ];
    for (harness, words) in cases {
        let dir = suite(harness, TASK);
        assert_mentions(&error_of(dir.path()), words);
    }
}

#[test]
fn a_broken_rules_file_is_named_with_its_rule_and_field() {
    let dir = suite("permissions = \"rules.toml\"\n", TASK);
    fs::write(
        dir.path().join("rules.toml"),
        "[[rules]]\naction = \"perhaps\"\ncommand = \"ls\"\n",
    )
    .unwrap();
    assert_mentions(
        &error_of(dir.path()),
        &[
            "suite.toml",
            "harness.permissions",
            "rules.toml",
            "rules[0].action",
            "tack permissions check",
        ],
    );
    fs::write(dir.path().join("rules.toml"), "[[rules]\n").unwrap();
    assert_mentions(
        &error_of(dir.path()),
        &["harness.permissions", "rules.toml", "not valid"],
    );
}

#[test]
fn a_reviewer_script_is_found_from_the_suite_directory() {
    let harness =
        "[variants.harness.approver]\npolicy = \"script\"\nscript = \"./review.sh --strict\"\n";
    let dir = suite(harness, TASK);
    let script = dir.path().join("review.sh");
    fs::write(&script, "#!/bin/sh\nexit 0\n").unwrap();
    assert_mentions(
        &error_of(dir.path()),
        &["review.sh", "not executable", "chmod +x"],
    );
    fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
    tack_suite::load_suite(dir.path()).unwrap();

    let dir = suite(
        "[variants.harness.approver]\npolicy = \"script\"\nscript = \"sh review.sh\"\n",
        TASK,
    );
    fs::write(dir.path().join("review.sh"), "exit 0\n").unwrap();
    tack_suite::load_suite(dir.path()).unwrap();
}

#[test]
#[rustfmt::skip] // one case a line
fn task_settings_are_checked_when_the_suite_loads() {
    let cases: Vec<(String, &[&str])> = vec![
        (format!("{TASK}[limits]\nmax_steps = 0\n"), &["task.toml", "limits.max_steps", "at least 1"]),
        (format!("{TASK}[limits]\ncommand_timeout_secs = 0\n"), &["task.toml", "limits.command_timeout_secs"]),
        (format!("{TASK}[limits]\nmax_wall_secs = 0\n"), &["task.toml", "limits.max_wall_secs", "at least 1"]),
        (format!("{TASK}[limits]\nmax_cost_usd = 10\n"), &["task.toml", "unknown field `max_cost_usd`"]),
        (format!("{TASK}[environment]\nworkdir = \"/\"\n"), &["task.toml", "environment.workdir", "below `/`"]),
        (format!("{TASK}[environment]\nworkdir = \"/app\"\nplaces = [{{ from = \"fixture\", at = \"/app\" }}]\n"), &["environment.places[0].at", "already where environment.workdir appears"]),
        (TASK.replace("check.sh", "gone.sh"), &["task.toml", "checks[0].run", "gone.sh", "does not exist"]),
        (TASK.replace("name = \"hidden\"", "name = \"\""), &["task.toml", "checks[0].name", "empty"]),
        (TASK.replace("name = \"hidden\"", "name = \"hidden\"\ntimeout_secs = 0"), &["checks[0].timeout_secs", "at least 1"]),
        (format!("{TASK}[environment]\nenv = {{ \"BAD NAME\" = \"x\" }}\n"), &["task.toml", "environment.env.BAD NAME", "variable name"]),
        (format!("{TASK}[environment]\nsetup = [\"\"]\n"), &["environment.setup[0]", "empty"]),
        (TASK.replace("path = \"file.txt\"", "path = \"../../../suite.toml\""), &["solution.edits[0].path", "inside the workspace"]),
        (TASK.replace("path = \"file.txt\"", "path = \"/etc/hostname\""), &["solution.edits[0].path", "inside the workspace"]),
        (TASK.replace("[solution]\n", "[solution]\nscript = \" \"\n"), &["solution.script", "empty"]),
    ];
    for (task, words) in cases {
        let dir = suite("", &task);
        assert_mentions(&error_of(dir.path()), words);
    }
}

#[test]
fn every_table_refuses_unknown_keys() {
    let suite_tables = [
        ("[suite]\n", "[suite]\ntypo = 1\n"),
        ("model = \"oracle\"\n", "model = \"oracle\"\ntypo = 1\n"),
        ("[variants.harness]\n", "[variants.harness]\ntypo = 1\n"),
    ];
    for (from, to) in suite_tables {
        let dir = suite("", TASK);
        let text = fs::read_to_string(dir.path().join("suite.toml")).unwrap();
        fs::write(dir.path().join("suite.toml"), text.replacen(from, to, 1)).unwrap();
        assert_mentions(
            &error_of(dir.path()),
            &["suite.toml", "unknown field `typo`"],
        );
    }
    for table in [
        "variants.harness.approver",
        "variants.sim",
        "variants.chaos",
        "variants.provider",
    ] {
        let dir = suite(&format!("[{table}]\ntypo = 1\n"), TASK);
        assert_mentions(
            &error_of(dir.path()),
            &["suite.toml", "unknown field `typo`"],
        );
    }
    let task_tables = [
        format!("typo = 1\n{TASK}"),
        format!("{TASK}[environment]\ntypo = 1\n"),
        format!("{TASK}[limits]\ntypo = 1\n"),
        TASK.replace("name = \"hidden\"", "name = \"hidden\"\ntypo = 1"),
        TASK.replace("[solution]\n", "[solution]\ntypo = 1\n"),
        TASK.replace("new = \"fixed\"", "new = \"fixed\"\ntypo = 1"),
        format!(
            "{TASK}[[solution.decoys]]\npath = \"file.txt\"\nold = \"broken\"\nnew = \"x\"\ntypo = 1\n"
        ),
    ];
    for task in task_tables {
        let dir = suite("", &task);
        assert_mentions(
            &error_of(dir.path()),
            &["task.toml", "unknown field `typo`"],
        );
    }
}

#[test]
#[rustfmt::skip] // one case a line
fn the_suites_files_are_checked_before_anything_reads_them() {
    type Mutation = fn(&Path);
    let cases: &[(&str, Mutation, &[&str])] = &[
        ("suite.toml links to itself", |root| { fs::remove_file(root.join("suite.toml")).unwrap(); symlink("suite.toml", root.join("suite.toml")).unwrap() }, &["suite.toml", "symbolic link that cannot be followed"]),
        ("suite.toml is not UTF-8", |root| fs::write(root.join("suite.toml"), b"[suite]\nname = \"mi\xffni\"\n").unwrap(), &["suite.toml", "not UTF-8", "line 2"]),
        ("suite.toml is empty", |root| fs::write(root.join("suite.toml"), "").unwrap(), &["suite.toml", "missing field `suite`"]),
        ("task.toml is missing", |root| fs::remove_file(root.join("tasks/one/task.toml")).unwrap(), &["task.toml", "does not exist", "every directory in tasks/"]),
        ("a task is a file", |root| fs::write(root.join("tasks/notes.txt"), "x").unwrap(), &["notes.txt", "not a task directory"]),
        ("tasks/ loops", |root| symlink("loop", root.join("tasks/loop")).unwrap(), &["tasks/loop", "cannot be followed"]),
        ("tasks/ is missing", |root| fs::remove_dir_all(root.join("tasks")).unwrap(), &["tasks", "does not exist"]),
        ("the fixture is missing", |root| fs::remove_dir_all(root.join("tasks/one/fixture")).unwrap(), &["fixture", "task.toml", "files the agent starts from"]),
        ("the fixture holds a loop", |root| symlink("loop", root.join("tasks/one/fixture/loop")).unwrap(), &["fixture/loop", "cannot be followed"]),
        ("the fixture links to a directory", |root| symlink("..", root.join("tasks/one/fixture/up")).unwrap(), &["fixture/up", "symbolic link to a directory"]),
        ("the fixture links out of the suite", |root| symlink("/etc/hostname", root.join("tasks/one/fixture/host")).unwrap(), &["fixture/host", "outside", "copy the file in"]),
        ("the checks link out of their task", |root| symlink("../../../rules.toml", root.join("tasks/one/checks/rules.toml")).unwrap(), &["checks/rules.toml", "outside", "tasks/one"]),
        ("a cache holds a named pipe", |root| { fs::create_dir_all(root.join("tasks/one/fixture/__pycache__")).unwrap(); assert!(std::process::Command::new("mkfifo").arg(root.join("tasks/one/fixture/__pycache__/x.pyc")).status().unwrap().success()) }, &["__pycache__/x.pyc", "named pipe"]),
        ("the checks directory is a file", |root| { fs::remove_dir_all(root.join("tasks/one/checks")).unwrap(); fs::write(root.join("tasks/one/checks"), "x").unwrap() }, &["checks", "not a directory"]),
    ];
    for (name, mutate, words) in cases {
        let dir = suite("", TASK);
        mutate(dir.path());
        let message = error_of(dir.path());
        for word in *words {
            assert!(message.contains(word), "{name}: `{message}` lacks `{word}`");
        }
    }
}

/// A link inside its task loads; the copies a trial gets keep a link that
/// stays inside the copied tree and hold the file itself for one that
/// leads elsewhere in the task (it would point at nothing in the copy).
#[test]
fn links_inside_a_task_load_and_arrive_whole() {
    let dir = suite("", TASK);
    let task = dir.path().join("tasks/one");
    fs::write(task.join("expected.txt"), "fixed\n").unwrap();
    symlink("../expected.txt", task.join("checks/expected.txt")).unwrap();
    symlink("file.txt", task.join("fixture/alias.txt")).unwrap();
    // Absolute, or climbing out of the tree and back: the same file, but
    // the text would not mean it in the copy.
    symlink(
        task.join("fixture/file.txt"),
        task.join("fixture/absolute.txt"),
    )
    .unwrap();
    fs::create_dir_all(task.join("fixture/sub")).unwrap();
    symlink(
        "../../fixture/file.txt",
        task.join("fixture/sub/climbs.txt"),
    )
    .unwrap();
    tack_suite::load_suite(dir.path()).unwrap();
    let copies = tempfile::tempdir().unwrap();
    let (checks, fixture) = (copies.path().join("checks"), copies.path().join("fixture"));
    tack_suite::copy_tree(&task.join("checks"), &checks, &task).unwrap();
    tack_suite::copy_tree(&task.join("fixture"), &fixture, &task).unwrap();
    let copied = checks.join("expected.txt");
    assert!(!copied.is_symlink());
    assert_eq!(fs::read_to_string(copied).unwrap(), "fixed\n");
    let alias = fixture.join("alias.txt");
    assert_eq!(fs::read_link(&alias).unwrap(), Path::new("file.txt"));
    assert_eq!(fs::read_to_string(alias).unwrap(), "broken\n");
    for copied in [fixture.join("absolute.txt"), fixture.join("sub/climbs.txt")] {
        assert!(!copied.is_symlink(), "{}", copied.display());
        assert_eq!(fs::read_to_string(copied).unwrap(), "broken\n");
    }
    // A link out of the task is refused, not followed.
    symlink("/etc/hostname", task.join("fixture/host")).unwrap();
    let refused = tack_suite::copy_tree(&task.join("fixture"), &copies.path().join("again"), &task);
    assert!(
        refused
            .unwrap_err()
            .to_string()
            .contains("outside its task")
    );
}

#[test]
fn a_task_given_for_its_suite_says_where_the_suite_is() {
    let dir = suite("", TASK);
    let message = error_of(&dir.path().join("tasks/one"));
    assert_mentions(&message, &["is a task, not a suite", "-t one"]);
}

#[test]
fn hidden_entries_in_tasks_are_not_tasks() {
    let dir = suite("", TASK);
    fs::write(dir.path().join("tasks/.DS_Store"), "x").unwrap();
    let loaded = tack_suite::load_suite(dir.path()).unwrap();
    assert_eq!(loaded.tasks.len(), 1);
}
