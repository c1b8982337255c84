//! End-to-end: nothing the agent writes reaches outside its workspace —
//! not through the checks that import its code, not through the file tools.
//! Each test writes a small suite whose reference solution (applied by the
//! `oracle` through the real tools) tries an escape, runs `tack run` on it,
//! and reads back the trace and the files outside.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::collections::HashMap;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;

use arrow_array::{Array, RecordBatch, StringArray};
use serde_json::Value;

/// The sandbox must be enforceable here, or the test says why it skipped
/// (and fails under `TACK_REQUIRE_SANDBOX=1`, as in CI).
fn sandbox_available() -> bool {
    match tack_sandbox::test_gate(tack_sandbox::SandboxProfile::Strict) {
        tack_sandbox::TestGate::Run => true,
        tack_sandbox::TestGate::Skip(why) => {
            eprintln!("skipped: {why}");
            false
        }
        tack_sandbox::TestGate::Fail(why) => panic!("{why}"),
    }
}

/// The hidden check of most cases: the workspace's calc.py adds.
const ADDS_UP: &str =
    "import sys, os\nsys.path.insert(0, os.getcwd())\nimport calc\nassert calc.add(2, 3) == 5\n";

struct Case {
    dir: tempfile::TempDir,
    /// The trial directories `run` kept (`--keep-workspaces`), in the
    /// system tmp: removed with the case.
    kept: std::cell::RefCell<Vec<PathBuf>>,
}

impl Drop for Case {
    fn drop(&mut self) {
        for dir in self.kept.take() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Case {
    /// A one-task suite: `fixture` files, a hidden check, and the oracle's
    /// solution edits (`[[solution.edits]]` TOML).
    fn new(check_py: &str, solution_edits: &str) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let suite = dir.path().join("suite");
        let task = suite.join("tasks/escape");
        std::fs::create_dir_all(task.join("fixture")).unwrap();
        std::fs::create_dir_all(task.join("checks")).unwrap();
        std::fs::write(
            suite.join("suite.toml"),
            "[suite]\nname = \"escape\"\n\n[[variants]]\nname = \"oracle\"\nmodel = \"oracle\"\n",
        )
        .unwrap();
        std::fs::write(
            task.join("task.toml"),
            format!(
                "instruction = \"Fix calc.py.\"\n\n[environment]\nenv = {{ PYTHONDONTWRITEBYTECODE = \"1\" }}\n\n\
                 [[checks]]\nname = \"hidden\"\nrun = 'python3 \"$TACK_CHECKS/check.py\"'\n\n\
                 [solution]\n{solution_edits}\n"
            ),
        )
        .unwrap();
        std::fs::write(task.join("checks/check.py"), check_py).unwrap();
        std::fs::write(
            task.join("fixture/calc.py"),
            "def add(a, b):\n    return a - b\n",
        )
        .unwrap();
        Case {
            dir,
            kept: Default::default(),
        }
    }

    /// A task the oracle solves by fixing calc.py, checked by [`ADDS_UP`].
    fn fixing_calc() -> Case {
        Case::new(
            ADDS_UP,
            "[[solution.edits]]\npath = \"calc.py\"\nold = \"a - b\"\nnew = \"a + b\"\n",
        )
    }

    fn fixture(&self) -> PathBuf {
        self.dir.path().join("suite/tasks/escape/fixture")
    }

    /// A place outside everything the trial may write.
    fn outside(&self) -> PathBuf {
        let outside = self.dir.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        outside
    }

    /// `tack run` of the suite, without a report, with `tmp` as the system
    /// tmp: what it printed and how it exited.
    fn run_in_tmp(&self, tmp: &Path) -> std::process::Output {
        Command::new(env!("CARGO_BIN_EXE_tack"))
            .args([
                "run",
                "suite",
                "--json",
                "--no-report",
                "--traces",
                "traces",
            ])
            .current_dir(self.dir.path())
            .env("TMPDIR", tmp)
            .output()
            .unwrap()
    }

    /// [`run_in_tmp`](Self::run_in_tmp)'s one trial, from its JSON.
    fn trial_in_tmp(&self, tmp: &Path) -> Value {
        let output = self.run_in_tmp(tmp);
        let stderr = String::from_utf8_lossy(&output.stderr);
        let json: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("no JSON ({e}): {stderr}"));
        json["run"]["trials"][0].clone()
    }

    fn run(&self) -> (PathBuf, Value) {
        let output = Command::new(env!("CARGO_BIN_EXE_tack"))
            .args(["run", "suite", "--json", "--keep-workspaces"])
            .args(["--traces", "traces", "--reports", "reports"])
            .current_dir(self.dir.path())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        let json: Value = serde_json::from_slice(&output.stdout)
            .unwrap_or_else(|e| panic!("no JSON ({e}); stderr: {stderr}"));
        let run_dir = self
            .dir
            .path()
            .join(json["run"]["run_dir"].as_str().unwrap());
        let trial = json["run"]["trials"][0].clone();
        if let Some(kept) = trial["kept_workspace"].as_str() {
            let dir = Path::new(kept).parent().unwrap().to_path_buf();
            self.kept.borrow_mut().push(dir);
        }
        (run_dir, trial)
    }
}

fn string_column(batch: &RecordBatch, name: &str) -> StringArray {
    batch
        .column_by_name(name)
        .unwrap()
        .as_any()
        .downcast_ref::<StringArray>()
        .unwrap()
        .clone()
}

/// `(kind, error_kind, check_output, tool_result)` of every span; what a
/// tool call's model was shown is the tool message answering it.
fn spans(run_dir: &Path) -> Vec<[Option<String>; 4]> {
    let mut answers = HashMap::new();
    for batch in tack_trace::read_table(run_dir, "messages").unwrap() {
        let [ids, contents] =
            ["gen_ai_tool_call_id", "content"].map(|name| string_column(&batch, name));
        for row in (0..batch.num_rows()).filter(|&row| !ids.is_null(row)) {
            answers.insert(ids.value(row).to_string(), contents.value(row).to_string());
        }
    }
    let mut rows = Vec::new();
    for batch in tack_trace::read_table(run_dir, "spans").unwrap() {
        let columns = ["kind", "error_kind", "check_output", "gen_ai_tool_call_id"]
            .map(|name| string_column(&batch, name));
        for row in 0..batch.num_rows() {
            let [kind, error, output, call] = columns
                .each_ref()
                .map(|c| (!c.is_null(row)).then(|| c.value(row).to_string()));
            let result = call.and_then(|id| answers.get(&id).cloned());
            rows.push([kind, error, output, result]);
        }
    }
    rows
}

fn sandbox_denied_results(run_dir: &Path) -> Vec<String> {
    spans(run_dir)
        .into_iter()
        .filter(|[kind, error, ..]| {
            kind.as_deref() == Some("tool_call") && error.as_deref() == Some("sandbox_denied")
        })
        .filter_map(|[.., result]| result)
        .collect()
}

/// A confined run whose system tmp is below /dev/shm would fail every
/// trial inside the sandbox: it is refused before any starts (exit 2),
/// saying what to set.
#[test]
fn a_confined_run_below_dev_shm_is_refused_before_it_starts() {
    let shm = Path::new("/dev/shm");
    if !sandbox_available() || !shm.is_dir() || shm.is_symlink() {
        return;
    }
    let case = Case::fixing_calc();
    let below = tempfile::tempdir_in(shm).unwrap();
    let output = case.run_in_tmp(below.path());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("{} is below /dev/shm", below.path().display()))
            && stderr.contains("keep workspaces and TMPDIR"),
        "{stderr}"
    );
    // No trial started: nothing was made in the tmp for one.
    assert!(!below.path().join("tack-trials").exists(), "{stderr}");
}

/// With TMPDIR outside /tmp, a socket there (a daemon's) and one another
/// trial left in its workspace are out of reach of a confined command: the
/// check, which runs the agent's code, sees the first through a read-only
/// overlay, where it does not answer, and not the second at all.
#[test]
fn sockets_in_a_tmpdir_outside_the_system_tmp_do_not_answer() {
    if !sandbox_available() {
        return;
    }
    let outside = outside_the_system_tmp();
    let tmp = outside.path().join("tmp");
    let other = tmp.join("tack-trials/other-trial/workspace");
    std::fs::create_dir_all(&other).unwrap();
    let daemon = tmp.join("daemon.sock");
    let planted = other.join("agent.sock");
    let _listeners = [&daemon, &planted].map(|path| UnixListener::bind(path).unwrap());
    let check = format!(
        "{ADDS_UP}import errno, socket\n\
         def reach(path):\n    s = socket.socket(socket.AF_UNIX)\n    \
         try:\n        s.connect(path)\n        return 0\n    \
         except OSError as e:\n        return e.errno\n\
         assert os.path.exists({daemon:?}), 'the daemon socket is in sight'\n\
         assert reach({daemon:?}) == errno.ECONNREFUSED, 'the daemon answered'\n\
         assert reach({planted:?}) == errno.ENOENT, 'another trial is in sight'\n",
        daemon = daemon.display().to_string(),
        planted = planted.display().to_string(),
    );
    let case = Case::new(
        &check,
        "[[solution.edits]]\npath = \"calc.py\"\nold = \"a - b\"\nnew = \"a + b\"\n",
    );
    let output = case.run_in_tmp(&tmp);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let trial = &json["run"]["trials"][0];
    assert_eq!(trial["outcome"], "passed", "{trial}\n{stderr}");
}

/// A directory the task places inside a covered one (here where the
/// target directory is, /var/tmp in CI) is the trial's, and the rest of
/// that directory is seen as it is: tack's own init, which lives there in
/// CI, still starts the session, and the check reads what was placed.
#[test]
fn a_directory_placed_inside_a_covered_one_is_shown_and_the_rest_stays() {
    if !sandbox_available() {
        return;
    }
    let outside = outside_the_system_tmp();
    let at = outside.path().join("placed");
    let check = format!(
        "{ADDS_UP}assert open({:?}).read() == 'placed\\n'\n",
        at.join("info.txt").display().to_string()
    );
    let case = Case::new(
        &check,
        "[[solution.edits]]\npath = \"calc.py\"\nold = \"a - b\"\nnew = \"a + b\"\n",
    );
    let task = case.dir.path().join("suite/tasks/escape");
    std::fs::create_dir(task.join("data")).unwrap();
    std::fs::write(task.join("data/info.txt"), "placed\n").unwrap();
    let toml = std::fs::read_to_string(task.join("task.toml"))
        .unwrap()
        .replace(
            "[environment]\n",
            &format!(
                "[environment]\nplaces = [{{ from = \"data\", at = {:?} }}]\n",
                at.display().to_string()
            ),
        );
    std::fs::write(task.join("task.toml"), toml).unwrap();
    let (_, trial) = case.run();
    assert_eq!(trial["outcome"], "passed", "{trial}");
}

/// A directory outside `/tmp`, which a confined command sees covered (but
/// for what it may use): there the walls themselves (read-only mounts,
/// Landlock's seal) are what stop a write or a read, and what these tests
/// show.
fn outside_the_system_tmp() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

#[test]
fn a_check_that_imports_the_agents_code_cannot_write_outside() {
    if !sandbox_available() {
        return;
    }
    let probe = outside_the_system_tmp();
    let target = probe.path().join("x");
    // The "fix" also writes outside the workspace when imported; the check
    // imports it.
    let edit = format!(
        "[[solution.edits]]\npath = \"calc.py\"\nold = \"return a - b\"\nnew = '''return a + b\n\nopen(\"{}\", \"w\").write(\"escaped\")'''\n",
        target.display()
    );
    let case = Case::new(ADDS_UP, &edit);
    let (run_dir, trial) = case.run();
    assert!(!target.exists(), "the check wrote {}", target.display());
    assert_eq!(trial["outcome"], "verification_failed", "{trial}");
    let outputs: Vec<String> = spans(&run_dir)
        .into_iter()
        .filter(|[kind, ..]| kind.as_deref() == Some("check"))
        .filter_map(|[_, _, output, _]| output)
        .collect();
    assert!(
        outputs
            .iter()
            .any(|o| o.contains("Read-only file system") || o.contains("Permission denied")),
        "the check's output does not show the denial: {outputs:?}"
    );
}

#[test]
fn str_replace_on_git_config_is_a_sandbox_denial() {
    if !sandbox_available() {
        return;
    }
    let edit = "[[solution.edits]]\npath = \".git/config\"\nold = \"[core]\"\nnew = \"[core]\\n\\thooksPath = /tmp/evil-hooks\"\n";
    let case = Case::new("raise SystemExit(1)\n", edit);
    let git = case.fixture().join(".git");
    std::fs::create_dir_all(&git).unwrap();
    std::fs::write(git.join("config"), "[core]\n\tbare = false\n").unwrap();
    let (run_dir, trial) = case.run();
    let denied = sandbox_denied_results(&run_dir);
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert!(denied[0].contains(".git"), "{}", denied[0]);
    assert_eq!(trial["sandbox_denials"], 1, "{trial}");
    let kept = PathBuf::from(trial["kept_workspace"].as_str().unwrap());
    let config = std::fs::read_to_string(kept.join(".git/config")).unwrap();
    assert!(!config.contains("hooksPath"), "{config}");
}

#[test]
fn a_fixture_symlink_pointing_outside_is_not_written_through() {
    if !sandbox_available() {
        return;
    }
    let edit =
        "[[solution.edits]]\npath = \"notes.txt\"\nold = \"original\"\nnew = \"overwritten\"\n";
    let case = Case::new("raise SystemExit(1)\n", edit);
    let outside = case.outside().join("notes.txt");
    std::fs::write(&outside, "original\n").unwrap();
    // The fixture's file, swapped for a link by a setup command: a suite
    // whose own link leads out of its task is refused when it loads.
    std::fs::write(case.fixture().join("notes.txt"), "original\n").unwrap();
    let task = case.dir.path().join("suite/tasks/escape/task.toml");
    let text = std::fs::read_to_string(&task).unwrap().replace(
        "[environment]\n",
        &format!(
            "[environment]\nsetup = ['ln -sf \"{}\" notes.txt']\n",
            outside.display()
        ),
    );
    std::fs::write(&task, text).unwrap();
    let (run_dir, trial) = case.run();
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "original\n");
    let denied = sandbox_denied_results(&run_dir);
    assert_eq!(denied.len(), 1, "{denied:?} {trial}");
    // `tack suite check` applies the solution's edits itself, outside the
    // sandbox: not through the link either.
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["suite", "check", "suite"])
        .current_dir(case.dir.path())
        .output()
        .unwrap();
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "original\n");
    let said = String::from_utf8_lossy(&output.stdout).to_string()
        + &String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{said}");
    assert!(
        said.contains("the solution's edit cannot be applied"),
        "{said}"
    );
    assert!(said.contains("notes.txt"), "{said}");
}

#[test]
fn suite_check_runs_setup_and_solution_scripts_in_the_sandbox() {
    if !sandbox_available() {
        return;
    }
    let probe = outside_the_system_tmp();
    let (from_setup, from_solution) = (probe.path().join("setup"), probe.path().join("solution"));
    let case = Case::new(
        "raise SystemExit(0)\n",
        &format!("script = 'touch \"{}\"'\n", from_solution.display()),
    );
    let task = case.dir.path().join("suite/tasks/escape/task.toml");
    let text = std::fs::read_to_string(&task).unwrap().replace(
        "[environment]\n",
        &format!(
            "[environment]\nsetup = ['touch \"{}\" || true']\n",
            from_setup.display()
        ),
    );
    std::fs::write(&task, text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["suite", "check", "suite", "--json"])
        .current_dir(case.dir.path())
        .output()
        .unwrap();
    assert!(!from_setup.exists(), "the setup command wrote outside");
    assert!(!from_solution.exists(), "the solution script wrote outside");
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let detail = json["tasks"][0]["solution_failed"]
        .as_str()
        .unwrap_or_default();
    assert!(
        detail.contains("Read-only file system") || detail.contains("Permission denied"),
        "{json}"
    );
}

#[test]
fn a_check_that_needs_the_network_says_so_in_suite_show() {
    let case = Case::new("raise SystemExit(0)\n", "script = \"true\"\n");
    let task = case.dir.path().join("suite/tasks/escape/task.toml");
    let text = std::fs::read_to_string(&task)
        .unwrap()
        .replace("name = \"hidden\"\n", "name = \"hidden\"\nnetwork = true\n");
    std::fs::write(&task, text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["suite", "show", "suite"])
        .current_dir(case.dir.path())
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        shown.contains("network for: check `hidden`"),
        "{shown}{stderr}"
    );
}

#[test]
fn an_agent_cannot_read_another_trials_workspace() {
    if !sandbox_available() {
        return;
    }
    // Another trial's workspace, already solved, where tack makes them.
    let tmp = outside_the_system_tmp();
    let other = tmp.path().join("tack-trials/other-trial/workspace");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("answer.txt"), "the solved answer").unwrap();
    // The agent (the oracle running the solution script through `bash`)
    // tries to copy it; the check passes only if it got nothing, and the
    // trials' root showed its own trial alone.
    let script = format!(
        "script = 'cat \"{}\" > stolen.txt 2> denied.txt; ls \"{}\" > listed.txt; true'\n",
        other.join("answer.txt").display(),
        tmp.path().join("tack-trials").display()
    );
    let check = "import os\nassert os.path.getsize('stolen.txt') == 0\n\
                 listed = open('listed.txt').read().split()\n\
                 assert len(listed) == 1 and 'other-trial' not in listed, listed\n\
                 assert open('denied.txt').read().strip()\n";
    let case = Case::new(check, &script);
    let trial = case.trial_in_tmp(tmp.path());
    assert_eq!(trial["outcome"], "passed", "{trial}");
}

/// A check runs the agent's code: it reads its own copy of the hidden
/// checks, never another trial's (verifying beside it in the checks root).
#[test]
fn a_check_cannot_read_another_trials_hidden_checks() {
    if !sandbox_available() {
        return;
    }
    let tmp = outside_the_system_tmp();
    let other = tmp.path().join("tack-checks/victim-trial/checks");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::write(other.join("expected.txt"), "the hidden answer").unwrap();
    let check = format!(
        "import os\nassert open(os.path.join(os.environ['TACK_CHECKS'], 'check.py')).read()\n\
         try:\n    open('{}').read()\nexcept (PermissionError, FileNotFoundError):\n    pass\n\
         else:\n    raise SystemExit('read another trial\\'s hidden check')\n",
        other.join("expected.txt").display()
    );
    let case = Case::new(&check, "script = \"true\"\n");
    let trial = case.trial_in_tmp(tmp.path());
    assert_eq!(trial["outcome"], "passed", "{trial}");
}

/// A hidden check has the network only when the task says so, whatever
/// the variant gives its agent: its verdict must not depend on the agent's
/// sandbox. Under a `workspace_write` variant (the host's network), a check
/// without `network = true` cannot reach a port this test listens on; one
/// with it can.
#[test]
fn a_checks_network_is_the_tasks_not_the_variants() {
    if !sandbox_available() {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let reach = format!(
        "import socket, sys\ntry:\n    socket.create_connection(('127.0.0.1', {port}), 2)\n\
         except OSError:\n    sys.exit(0 if sys.argv[1] == 'no' else 1)\n\
         sys.exit(0 if sys.argv[1] == 'yes' else 1)\n"
    );
    let case = Case::new(&reach, "script = \"true\"\n");
    let suite = case.dir.path().join("suite/suite.toml");
    let text = std::fs::read_to_string(&suite).unwrap();
    std::fs::write(
        &suite,
        format!("{text}[variants.harness]\nsandbox = \"workspace_write\"\n"),
    )
    .unwrap();
    let task = case.dir.path().join("suite/tasks/escape/task.toml");
    let text = std::fs::read_to_string(&task).unwrap().replace(
        "run = 'python3 \"$TACK_CHECKS/check.py\"'\n",
        "run = 'python3 \"$TACK_CHECKS/check.py\" no'\n\n\
         [[checks]]\nname = \"online\"\nnetwork = true\n\
         run = 'python3 \"$TACK_CHECKS/check.py\" yes'\n",
    );
    assert!(text.contains("online"), "{text}");
    std::fs::write(&task, text).unwrap();
    let (_, trial) = case.run();
    assert_eq!(trial["outcome"], "passed", "{trial}");
}

/// A check whose reward directory is where the workspace is shown would
/// judge an empty directory: refused when the suite loads, naming both.
#[test]
fn a_reward_dir_over_the_workspace_is_refused() {
    if !sandbox_available() {
        return;
    }
    let case = Case::new("raise SystemExit(0)\n", "script = \"true\"\n");
    let task = case.dir.path().join("suite/tasks/escape/task.toml");
    let text = std::fs::read_to_string(&task)
        .unwrap()
        .replace("[environment]\n", "[environment]\nworkdir = \"/app\"\n")
        .replace(
            "name = \"hidden\"\n",
            "name = \"hidden\"\nreward_dir = \"/app\"\nchecks_at = \"/tests\"\n",
        );
    std::fs::write(&task, text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["suite", "check", "suite"])
        .current_dir(case.dir.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{said}");
    assert!(
        said.contains("checks[0].reward_dir: `/app` is where the workspace is shown"),
        "{said}"
    );
}

/// A trial whose environment failed (here its setup command) is not
/// scored, and `tack run` says why on stderr, not only a count.
#[test]
fn tack_run_says_why_a_trial_ended_in_infra_error() {
    let case = Case::new("raise SystemExit(0)\n", "script = \"true\"\n");
    let task = case.dir.path().join("suite/tasks/escape/task.toml");
    let text = std::fs::read_to_string(&task).unwrap().replace(
        "[environment]\n",
        "[environment]\nsetup = ['echo the fixture server is down >&2; exit 3']\n",
    );
    std::fs::write(&task, text).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["run", "suite", "--no-report", "--traces", "traces"])
        .current_dir(case.dir.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("warning: 1 of 1 trial ended in infra_error"),
        "{stderr}"
    );
    assert!(stderr.contains("the fixture server is down"), "{stderr}");
    assert!(stderr.contains("--rerun infra_error"), "{stderr}");
}

/// A run killed with `kill -9` (tack and its sandbox spawner) leaves no
/// process, but its trial directories, private tmps and copies of the
/// checks; the next run on the machine sweeps them, and leaves none of its
/// own.
#[test]
fn what_a_killed_run_leaves_is_swept_by_the_next() {
    if !sandbox_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let tmp = dir.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let suite = dir.path().join("suite");
    // The slow task's check runs in walls of its own, started by the
    // spawner (the agent's commands run in the trial's session, whose init
    // ends with tack). Its duration is this test's own (the fraction is the
    // test's pid), so that another copy of the test running on the machine
    // is not taken for this one; an argument ends with a NUL in
    // /proc/PID/cmdline, so no other pid's sleep holds it.
    let sleep = format!("59.{}", std::process::id());
    let slow_check = format!("sleep {sleep}");
    let running = format!("{sleep}\0");
    for (task, check) in [("slow", slow_check.as_str()), ("quick", "true")] {
        let task = suite.join("tasks").join(task);
        std::fs::create_dir_all(task.join("fixture")).unwrap();
        std::fs::write(
            task.join("task.toml"),
            format!(
                "instruction = \"Wait.\"\n\n[[checks]]\nname = \"ok\"\nrun = \"{check}\"\n\n\
                 [solution]\nscript = \"true\"\n"
            ),
        )
        .unwrap();
    }
    std::fs::write(
        suite.join("suite.toml"),
        "[suite]\nname = \"leftovers\"\n\n[[variants]]\nname = \"oracle\"\nmodel = \"oracle\"\n\
         [variants.harness]\nsandbox = \"strict\"\n",
    )
    .unwrap();
    let tack = |task: &str| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_tack"));
        command
            .args(["run", suite.to_str().unwrap(), "-t", task, "--no-report"])
            .arg("--traces")
            .arg(dir.path().join("traces"))
            .env("TMPDIR", &tmp)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        command
    };
    let entries = |name: &str| -> Vec<String> {
        std::fs::read_dir(tmp.join(name))
            .map(|e| {
                e.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut slow = tack("slow").spawn().unwrap();
    let started = std::time::Instant::now();
    while !any_process_running(&running) {
        assert!(started.elapsed().as_secs() < 60, "the check never ran");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // tack and its sandbox spawner (a child of tack's in a session of its
    // own, which would otherwise outlive tack and clean up after it).
    let spawner = children_named(slow.id(), "tack-spawner");
    assert_eq!(spawner.len(), 1, "tack's spawner: {spawner:?}");
    // The small init binary beside tack serves as the spawner, not a copy
    // of tack (whose page tables every confined command's fork would copy).
    let exe = std::fs::read_link(format!("/proc/{}/exe", spawner[0])).unwrap();
    assert!(
        exe.ends_with("tack-sandbox-init"),
        "the spawner runs {exe:?}"
    );
    let killed = Command::new("kill")
        .args([
            "-s",
            "KILL",
            &slow.id().to_string(),
            &spawner[0].to_string(),
        ])
        .status()
        .unwrap();
    assert!(killed.success());
    slow.wait().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    // The check dies with the spawner, though nothing is left to enforce
    // its timeout.
    let started = std::time::Instant::now();
    while any_process_running(&running) {
        assert!(started.elapsed().as_secs() < 10, "the check outlived tack");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(!entries("tack-sandbox-tmp").is_empty(), "nothing was left");
    assert!(!entries("tack-trials").is_empty(), "nothing was left");
    // The slow check's copy of the task's checks.
    assert!(!entries("tack-checks").is_empty(), "nothing was left");
    // The slow check's pids cgroup, where the machine gives them.
    let killed = [slow.id(), spawner[0]];
    let cgroups = pids_cgroup_base();
    if let Some(base) = &cgroups {
        assert!(!cgroups_of(base, &killed).is_empty(), "no cgroup was left");
    }

    let quick = tack("quick").output().unwrap();
    assert!(quick.status.success(), "{quick:?}");
    assert_eq!(entries("tack-sandbox-tmp"), Vec::<String>::new());
    assert_eq!(entries("tack-trials"), Vec::<String>::new());
    assert_eq!(entries("tack-checks"), Vec::<String>::new());
    if let Some(base) = &cgroups {
        assert_eq!(cgroups_of(base, &killed), Vec::<String>::new());
    }
}

/// This process's own cgroup in the pids hierarchy (cgroup v1) or the
/// unified one, where tack makes a cgroup per command, if it can.
fn pids_cgroup_base() -> Option<PathBuf> {
    let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let own = |v1: bool| {
        own.lines().find_map(|line| {
            let mut fields = line.splitn(3, ':');
            let (_, controllers, path) = (fields.next()?, fields.next()?, fields.next()?);
            let found = if v1 {
                controllers.split(',').any(|c| c == "pids")
            } else {
                controllers.is_empty()
            };
            found.then(|| path.trim_start_matches('/').to_owned())
        })
    };
    let point = |v1: bool| {
        mountinfo.lines().find_map(|line| {
            let (mount, fs) = line.split_once(" - ")?;
            let mut fs = fs.split(' ');
            let (kind, options) = (fs.next()?, fs.nth(1)?);
            let found = if v1 {
                kind == "cgroup" && options.split(',').any(|o| o == "pids")
            } else {
                kind == "cgroup2"
            };
            found.then(|| mount.split(" ").nth(4).map(PathBuf::from))?
        })
    };
    let base = point(true)
        .zip(own(true))
        .or_else(|| point(false).zip(own(false)))
        .map(|(point, own)| point.join(own))?;
    base.join("cgroup.procs").exists().then_some(base)
}

/// The cgroups under `base` that tack made in the processes `pids`.
fn cgroups_of(base: &Path, pids: &[u32]) -> Vec<String> {
    let prefixes: Vec<String> = pids.iter().map(|pid| format!("tack-{pid}-")).collect();
    std::fs::read_dir(base)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| prefixes.iter().any(|p| name.starts_with(p.as_str())))
        .collect()
}

/// Whether a process whose command line holds `word` runs.
fn any_process_running(word: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .is_ok_and(|line| String::from_utf8_lossy(&line).contains(word))
    })
}

/// The processes whose parent is `parent` and whose name is `name`.
fn children_named(parent: u32, name: &str) -> Vec<u32> {
    common::processes()
        .into_iter()
        .filter(|&pid| {
            common::name_and_parent(pid).is_some_and(|(named, up)| named == name && up == parent)
        })
        .collect()
}
