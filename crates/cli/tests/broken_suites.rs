//! Broken suites through the real binary. Each case applies one mutation to
//! a small valid suite and runs `tack suite show`, `tack suite check` and
//! `tack run` on the result: each must exit 2 before any trial, without a
//! panic or a hang, with a message naming the file and the field (for a
//! file that is missing or unreadable, the file and what is wrong with it).
//! Adding a case is one line in `CASES`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::fs;
use std::io::Read;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SUITE: &str = "suite.toml";
const TASK: &str = "tasks/fix/task.toml";
const RULES: &str = "rules.toml";
const FIXTURE: &str = "tasks/fix/fixture";

const BASE_SUITE: &str = r#"[suite]
name = "base"
trials = 1
seed = 7

[[variants]]
name = "oracle"
model = "oracle"

[variants.harness]
max_steps = 10
command_timeout_secs = 30
permissions = "rules.toml"
requires_approval = ["write_file"]

[variants.harness.approver]
policy = "rules"
approve = ["write_file"]
"#;

const BASE_RULES: &str = r#"fallback = "allow"

[[rules]]
action = "deny"
command = "rm -rf /*"
"#;

const BASE_TASK: &str = r#"instruction = "Make file.txt say fixed."
protected = ["**/test_*"]

[limits]
max_steps = 8

[[checks]]
name = "hidden"
run = "sh \"$TACK_CHECKS/check.sh\""
timeout_secs = 30

[solution]

[[solution.edits]]
path = "file.txt"
old = "broken"
new = "fixed"
"#;

/// Writes the valid base suite into `root`.
fn write_base(root: &Path) {
    fs::create_dir_all(root.join(FIXTURE)).unwrap();
    fs::create_dir_all(root.join("tasks/fix/checks")).unwrap();
    fs::write(root.join(SUITE), BASE_SUITE).unwrap();
    fs::write(root.join(RULES), BASE_RULES).unwrap();
    fs::write(root.join(TASK), BASE_TASK).unwrap();
    fs::write(root.join(FIXTURE).join("file.txt"), "broken\n").unwrap();
    fs::write(
        root.join("tasks/fix/checks/check.sh"),
        "grep -q fixed file.txt\n",
    )
    .unwrap();
}

/// Replaces the one occurrence of `from` in a file of the suite.
fn edit(root: &Path, file: &str, from: &str, to: &str) {
    let path = root.join(file);
    let text = fs::read_to_string(&path).unwrap();
    assert_eq!(text.matches(from).count(), 1, "`{from}` in {file}");
    fs::write(&path, text.replacen(from, to, 1)).unwrap();
}

fn append(root: &Path, file: &str, text: &str) {
    let path = root.join(file);
    let mut old = fs::read_to_string(&path).unwrap();
    old.push_str(text);
    fs::write(&path, old).unwrap();
}

fn write(root: &Path, file: &str, bytes: &[u8]) {
    fs::write(root.join(file), bytes).unwrap();
}

fn remove(root: &Path, path: &str) {
    let path = root.join(path);
    if path.is_dir() {
        fs::remove_dir_all(&path).unwrap();
    } else {
        fs::remove_file(&path).unwrap();
    }
}

/// Replaces `path` by a symbolic link to `target`.
fn link(root: &Path, path: &str, target: &str) {
    let path = root.join(path);
    let _ = fs::remove_file(&path);
    symlink(target, path).unwrap();
}

type Mutation = fn(&Path);

/// (name, mutation of the base suite, what stderr must mention).
#[rustfmt::skip]
const CASES: &[(&str, Mutation, &[&str])] = &[
    // TOML syntax
    ("suite: unclosed table header", |r| edit(r, SUITE, "[suite]", "[suite"), &[SUITE, "[suite"]),
    ("suite: unterminated string", |r| edit(r, SUITE, "name = \"base\"", "name = \"base"), &[SUITE, "name = \"base"]),
    ("suite: duplicate key", |r| edit(r, SUITE, "trials = 1", "trials = 1\ntrials = 2"), &[SUITE, "trials"]),
    ("suite: key without a value", |r| edit(r, SUITE, "seed = 7", "seed ="), &[SUITE, "seed"]),
    ("task: key without a value", |r| edit(r, TASK, "[limits]\nmax_steps = 8", "[limits]\nmax_steps ="), &[TASK, "max_steps"]),
    ("rules: unclosed table header", |r| write(r, RULES, b"[[rules]\naction = \"allow\"\n"), &[SUITE, "harness.permissions", RULES]),
    // wrong types
    ("suite: trials is a string", |r| edit(r, SUITE, "trials = 1", "trials = \"one\""), &[SUITE, "trials"]),
    ("harness: max_steps is a string", |r| edit(r, SUITE, "max_steps = 10", "max_steps = \"ten\""), &[SUITE, "max_steps"]),
    ("harness: tools is a string", |r| edit(r, SUITE, "max_steps = 10", "max_steps = 10\ntools = \"bash\""), &[SUITE, "tools"]),
    ("harness: max_steps is a float", |r| edit(r, SUITE, "max_steps = 10", "max_steps = 10.5"), &[SUITE, "max_steps"]),
    ("approver: approve is a string", |r| edit(r, SUITE, "approve = [\"write_file\"]", "approve = \"write_file\""), &[SUITE, "approve"]),
    ("suite: variants is a table", |r| edit(r, SUITE, "[[variants]]", "[variants]"), &[SUITE, "variants"]),
    ("task: instruction is a number", |r| edit(r, TASK, "instruction = \"Make file.txt say fixed.\"", "instruction = 5"), &[TASK, "instruction"]),
    ("task: timeout_secs is a string", |r| edit(r, TASK, "timeout_secs = 30", "timeout_secs = \"30\""), &[TASK, "timeout_secs"]),
    // unknown keys
    ("suite: unknown key", |r| edit(r, SUITE, "trials = 1", "trails = 1"), &[SUITE, "trails"]),
    ("variant: unknown key", |r| edit(r, SUITE, "model = \"oracle\"", "model = \"oracle\"\ntemperature = 0.2"), &[SUITE, "temperature"]),
    ("harness: unknown key", |r| edit(r, SUITE, "max_steps = 10", "max_step = 10"), &[SUITE, "max_step"]),
    ("approver: unknown key", |r| edit(r, SUITE, "policy = \"rules\"", "policies = \"rules\""), &[SUITE, "policies"]),
    ("task: unknown key", |r| edit(r, TASK, "instruction =", "instructions ="), &[TASK, "instructions"]),
    ("task limits: a harness key tasks cannot set", |r| edit(r, TASK, "max_steps = 8", "max_cost_usd = 8"), &[TASK, "max_cost_usd"]),
    ("check: unknown key", |r| edit(r, TASK, "timeout_secs = 30", "timeout = 30"), &[TASK, "timeout"]),
    ("edit: unknown key", |r| edit(r, TASK, "path = \"file.txt\"", "file = \"file.txt\""), &[TASK, "file"]),
    // bad values
    ("harness: negative max_steps", |r| edit(r, SUITE, "max_steps = 10", "max_steps = -1"), &[SUITE, "max_steps"]),
    ("harness: zero max_steps", |r| edit(r, SUITE, "max_steps = 10", "max_steps = 0"), &[SUITE, "harness.max_steps", "oracle"]),
    ("harness: NaN cost limit", |r| edit(r, SUITE, "max_steps = 10", "max_steps = 10\nmax_cost_usd = nan"), &[SUITE, "harness.max_cost_usd", "oracle"]),
    ("harness: infinite cost limit", |r| edit(r, SUITE, "max_steps = 10", "max_steps = 10\nmax_cost_usd = inf"), &[SUITE, "harness.max_cost_usd"]),
    ("harness: negative cost limit", |r| edit(r, SUITE, "max_steps = 10", "max_steps = 10\nmax_cost_usd = -0.5"), &[SUITE, "harness.max_cost_usd"]),
    ("harness: zero command timeout", |r| edit(r, SUITE, "command_timeout_secs = 30", "command_timeout_secs = 0"), &[SUITE, "harness.command_timeout_secs"]),
    ("harness: zero wall time", |r| edit(r, SUITE, "max_steps = 10", "max_steps = 10\nmax_wall_secs = 0"), &[SUITE, "harness.max_wall_secs"]),
    ("harness: no tools", |r| edit(r, SUITE, "max_steps = 10", "max_steps = 10\ntools = []"), &[SUITE, "harness.tools"]),
    ("harness: a tool that does not exist", |r| edit(r, SUITE, "max_steps = 10", "max_steps = 10\ntools = [\"bash\", \"teleport\"]"), &[SUITE, "harness.tools[1]", "teleport"]),
    ("harness: approval for a tool not offered", |r| edit(r, SUITE, "requires_approval = [\"write_file\"]", "requires_approval = [\"wirte_file\"]"), &[SUITE, "harness.requires_approval[0]", "wirte_file"]),
    ("suite: zero trials", |r| edit(r, SUITE, "trials = 1", "trials = 0"), &[SUITE, "suite.trials"]),
    ("suite: empty name", |r| edit(r, SUITE, "name = \"base\"", "name = \"\""), &[SUITE, "suite.name"]),
    ("suite: name with a slash", |r| edit(r, SUITE, "name = \"base\"", "name = \"../up\""), &[SUITE, "suite.name"]),
    ("variant: empty name", |r| edit(r, SUITE, "name = \"oracle\"", "name = \"\""), &[SUITE, "variants[0].name"]),
    ("variant: duplicate names", |r| append(r, SUITE, "\n[[variants]]\nname = \"oracle\"\nmodel = \"sim\"\n"), &[SUITE, "variants[1].name", "two variants"]),
    ("variant: model without a provider", |r| edit(r, SUITE, "model = \"oracle\"", "model = \"gpt-4\""), &[SUITE, "model", "gpt-4"]),
    ("variant: chaos around no model", |r| edit(r, SUITE, "model = \"oracle\"", "model = \"chaos(nope)\""), &[SUITE, "model", "nope"]),
    ("variant: empty model", |r| edit(r, SUITE, "model = \"oracle\"", "model = \"\""), &[SUITE, "model"]),
    ("variant: sim skill above 1", |r| append(r, SUITE, "\n[variants.sim]\nskill = 1.5\n"), &[SUITE, "variants[0].sim", "skill"]),
    ("variant: chaos rates above 1", |r| append(r, SUITE, "\n[variants.chaos]\ntruncated = 0.7\nunknown_tool = 0.7\n"), &[SUITE, "variants[0].chaos"]),
    ("provider: zero concurrency", |r| append(r, SUITE, "\n[variants.provider]\nmax_concurrency = 0\n"), &[SUITE, "provider.max_concurrency"]),
    ("variant: fault rates without chaos(...)", |r| append(r, SUITE, "\n[variants.chaos]\ntruncated = 0.2\n"), &[SUITE, "variants[0].chaos", "chaos(oracle)"]),
    ("variant: sim parameters for the oracle", |r| append(r, SUITE, "\n[variants.sim]\nskill = 0.5\n"), &[SUITE, "variants[0].sim", "not `sim`"]),
    ("variant: provider settings for a built-in model", |r| append(r, SUITE, "\n[variants.provider]\nmax_concurrency = 4\n"), &[SUITE, "variants[0].provider", "built in"]),
    ("approver: bad glob", |r| edit(r, SUITE, "approve = [\"write_file\"]", "approve = [\"python3 [x\"]"), &[SUITE, "harness.approver.approve[0]", "glob"]),
    ("approver: unknown policy", |r| edit(r, SUITE, "policy = \"rules\"", "policy = \"ask_mom\""), &[SUITE, "policy", "ask_mom"]),
    ("approver: script policy without a script", |r| edit(r, SUITE, "policy = \"rules\"\napprove = [\"write_file\"]", "policy = \"script\""), &[SUITE, "harness.approver.script"]),
    ("approver: reviewer script missing", |r| edit(r, SUITE, "policy = \"rules\"\napprove = [\"write_file\"]", "policy = \"script\"\nscript = \"./review.sh\""), &[SUITE, "harness.approver.script", "review.sh"]),
    ("approver: approve list with another policy", |r| edit(r, SUITE, "policy = \"rules\"", "policy = \"deny_all\""), &[SUITE, "harness.approver.approve"]),
    ("task: empty instruction", |r| edit(r, TASK, "\"Make file.txt say fixed.\"", "\"  \""), &[TASK, "instruction"]),
    ("task: zero step override", |r| edit(r, TASK, "max_steps = 8", "max_steps = 0"), &[TASK, "limits.max_steps"]),
    ("task: zero command timeout override", |r| edit(r, TASK, "max_steps = 8", "command_timeout_secs = 0"), &[TASK, "limits.command_timeout_secs"]),
    ("task: zero check timeout", |r| edit(r, TASK, "timeout_secs = 30", "timeout_secs = 0"), &[TASK, "checks[0].timeout_secs"]),
    ("task: empty check name", |r| edit(r, TASK, "name = \"hidden\"", "name = \"\""), &[TASK, "checks[0].name"]),
    ("task: no checks", |r| edit(r, TASK, "[[checks]]\nname = \"hidden\"\nrun = \"sh \\\"$TACK_CHECKS/check.sh\\\"\"\ntimeout_secs = 30\n", ""), &[TASK, "checks"]),
    ("task: bad protected glob", |r| edit(r, TASK, "\"**/test_*\"", "\"[oops\""), &[TASK, "protected"]),
    ("task: edit text not in the file", |r| edit(r, TASK, "old = \"broken\"", "old = \"missing\""), &[TASK, "solution.edits[0].old"]),
    ("task: edit path outside the workspace", |r| edit(r, TASK, "path = \"file.txt\"", "path = \"../../../suite.toml\""), &[TASK, "solution.edits[0].path"]),
    ("task: bad environment variable name", |r| append(r, TASK, "\n[environment]\nenv = { \"NOT OK\" = \"1\" }\n"), &[TASK, "environment.env"]),
    ("task: workdir with checks reading $TACK_CHECKS unshown", |r| append(r, TASK, "\n[environment]\nworkdir = \"/app\"\n"), &[TASK, "checks[0].checks_at", "TACK_CHECKS"]),
    ("task: relative workdir", |r| append(r, TASK, "\n[environment]\nworkdir = \"app\"\n"), &[TASK, "environment.workdir"]),
    ("task: workdir under /proc", |r| append(r, TASK, "\n[environment]\nworkdir = \"/proc/app\"\n"), &[TASK, "environment.workdir", "/proc"]),
    ("task: place from a missing directory", |r| append(r, TASK, "\n[environment]\nplaces = [{ from = \"places/1\", at = \"/data\" }]\n"), &[TASK, "environment.places[0].from"]),
    ("task: place climbing out", |r| append(r, TASK, "\n[environment]\nplaces = [{ from = \"../x\", at = \"/data\" }]\n"), &[TASK, "environment.places[0].from", ".."]),
    ("task: bad Debian package name", |r| append(r, TASK, "\n[environment]\ndebian = [\"Python3=3.11\"]\n"), &[TASK, "environment.debian[0]"]),
    ("task: empty Python requirement", |r| append(r, TASK, "\n[environment]\npython = [\" \"]\n"), &[TASK, "environment.python[0]"]),
    ("task: container reasons without requires", |r| append(r, TASK, "\n[environment]\ncontainer_reasons = [\"x\"]\n"), &[TASK, "environment.container_reasons"]),
    ("task: unknown requirement", |r| append(r, TASK, "\n[environment]\nrequires = \"vm\"\n"), &[TASK, "requires"]),
    ("task: image user without an image", |r| append(r, TASK, "\n[environment]\nuser = \"agent\"\n"), &[TASK, "environment.user", "image"]),
    ("task: both image and dockerfile", |r| append(r, TASK, "\n[environment]\nimage = \"debian:bookworm\"\ndockerfile = \"environment/Dockerfile\"\n"), &[TASK, "environment.image", "keep one"]),
    ("task: image with host tools", |r| append(r, TASK, "\n[environment]\nimage = \"debian:bookworm\"\npython = [\"pytest\"]\n"), &[TASK, "environment.python", "Dockerfile"]),
    ("task: context without a dockerfile", |r| append(r, TASK, "\n[environment]\ncontext = \".\"\n"), &[TASK, "environment.context"]),
    ("task: dockerfile missing", |r| append(r, TASK, "\n[environment]\ndockerfile = \"environment/Dockerfile\"\n"), &[TASK, "environment.dockerfile", "cannot be read"]),
    ("task: relative reward dir", |r| edit(r, TASK, "timeout_secs = 30", "timeout_secs = 30\nreward_dir = \"logs\""), &[TASK, "checks[0].reward_dir"]),
    ("task: zero memory", |r| edit(r, TASK, "max_steps = 8", "max_steps = 8\nmemory_mb = 0"), &[TASK, "limits.memory_mb"]),
    ("task: solution files without solution/", |r| edit(r, TASK, "[solution]", "[solution]\nfiles_at = \"/solution\""), &[TASK, "solution.files_at"]),
    ("task: no solution", |r| edit(r, TASK, "[[solution.edits]]\npath = \"file.txt\"\nold = \"broken\"\nnew = \"fixed\"\n", ""), &[TASK, "solution"]),
    ("task: directory name with a space", |r| fs::rename(r.join("tasks/fix"), r.join("tasks/has space")).unwrap(), &["task.toml", "task directory name"]),
    // missing files
    ("suite.toml missing", |r| remove(r, SUITE), &[SUITE, "does not exist"]),
    ("task.toml missing", |r| remove(r, TASK), &[TASK, "does not exist"]),
    ("tasks/ missing", |r| remove(r, "tasks"), &["tasks", "does not exist"]),
    ("fixture missing", |r| remove(r, FIXTURE), &[FIXTURE, TASK]),
    ("rules file missing", |r| remove(r, RULES), &[SUITE, "harness.permissions", RULES, "does not exist"]),
    ("check file missing", |r| remove(r, "tasks/fix/checks/check.sh"), &[TASK, "checks[0].run", "check.sh"]),
    ("checks directory missing", |r| remove(r, "tasks/fix/checks"), &[TASK, "checks[0].run", "check.sh"]),
    ("file the solution edits missing", |r| remove(r, "tasks/fix/fixture/file.txt"), &[TASK, "solution.edits[0].path", "file.txt"]),
    // files of the wrong kind
    ("suite.toml links to itself", |r| link(r, SUITE, SUITE), &[SUITE, "symbolic link"]),
    ("rules file links to itself", |r| link(r, RULES, RULES), &[RULES, "symbolic link", "loops"]),
    ("symlink loop in tasks/", |r| link(r, "tasks/loop", "loop"), &["tasks/loop", "symbolic link"]),
    ("symlink loop in the fixture", |r| link(r, "tasks/fix/fixture/loop", "loop"), &["fixture/loop", "symbolic link"]),
    ("dangling link in the fixture", |r| link(r, "tasks/fix/fixture/gone", "/nonexistent/tack"), &["fixture/gone", "symbolic link"]),
    ("fixture links to a directory", |r| link(r, "tasks/fix/fixture/up", ".."), &["fixture/up", "directory"]),
    ("named pipe in the fixture", |r| mkfifo(&r.join("tasks/fix/fixture/pipe")), &["fixture/pipe", "named pipe"]),
    ("a task that is a file", |r| write(r, "tasks/notes.txt", b"not a task"), &["tasks/notes.txt", "not a task directory"]),
    ("task.toml is a directory", |r| { remove(r, TASK); fs::create_dir(r.join(TASK)).unwrap() }, &[TASK, "directory"]),
    ("suite.toml is a directory", |r| { remove(r, SUITE); fs::create_dir(r.join(SUITE)).unwrap() }, &[SUITE, "directory"]),
    ("fixture is a file", |r| { remove(r, FIXTURE); write(r, FIXTURE, b"x") }, &[FIXTURE, TASK]),
    ("suite.toml not UTF-8", |r| write(r, SUITE, b"[suite]\nname = \"b\xffse\"\n"), &[SUITE, "UTF-8", "line 2"]),
    ("task.toml not UTF-8", |r| write(r, TASK, b"instruction = \"\xc3\x28\"\n"), &[TASK, "UTF-8", "line 1"]),
    ("rules file not UTF-8", |r| write(r, RULES, b"fallback = \"\xfe\"\n"), &[SUITE, "harness.permissions", RULES, "UTF-8"]),
    ("suite.toml empty", |r| write(r, SUITE, b""), &[SUITE, "suite"]),
    ("task.toml empty", |r| write(r, TASK, b""), &[TASK, "instruction"]),
];

fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

const TIMEOUT: Duration = Duration::from_secs(60);

struct Ran {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs the binary with a deadline; `None` if it hung and was killed.
fn tack(args: &[&Path], cwd: &Path) -> Option<Ran> {
    tack_args(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>(), cwd)
}

fn tack_args(args: &[&std::ffi::OsStr], cwd: &Path) -> Option<Ran> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(args)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Read both pipes while waiting, so a chatty child cannot block on a full pipe.
    let mut out = child.stdout.take().unwrap();
    let mut err = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = out.read_to_string(&mut text);
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = err.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    status.map(|status| Ran {
        code: status.code(),
        stdout,
        stderr,
    })
}

/// A scratch directory for one case: `suite/` holds the suite; traces go
/// beside it, so a refused run can be seen to have written none.
struct Scratch {
    _dir: tempfile::TempDir,
    suite: PathBuf,
    traces: PathBuf,
}

fn scratch() -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let suite = dir.path().join("suite");
    fs::create_dir(&suite).unwrap();
    write_base(&suite);
    Scratch {
        traces: dir.path().join("traces"),
        suite,
        _dir: dir,
    }
}

fn commands(s: &Scratch) -> [(&'static str, Vec<&std::ffi::OsStr>); 3] {
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    [
        (
            "suite show",
            vec![os("suite"), os("show"), s.suite.as_os_str()],
        ),
        (
            "suite check",
            vec![os("suite"), os("check"), s.suite.as_os_str()],
        ),
        (
            "run",
            vec![
                os("run"),
                s.suite.as_os_str(),
                os("--traces"),
                s.traces.as_os_str(),
                os("--no-report"),
            ],
        ),
    ]
}

/// What is wrong with one command's answer to a broken suite, if anything.
fn problem(ran: Option<Ran>, expect: &[&str], s: &Scratch) -> Option<String> {
    let Some(ran) = ran else {
        return Some(format!("hung for {}s and was killed", TIMEOUT.as_secs()));
    };
    let mut wrong = Vec::new();
    if ran.stderr.contains("panicked") {
        wrong.push("panicked".to_string());
    }
    if ran.code != Some(2) {
        wrong.push(format!("exit {:?}, not 2", ran.code));
    }
    for word in expect {
        if !ran.stderr.contains(word) {
            wrong.push(format!("stderr lacks `{word}`"));
        }
    }
    if s.traces.exists() {
        wrong.push("wrote traces".to_string());
    }
    (!wrong.is_empty()).then(|| {
        format!(
            "{}\n      stderr: {}\n      stdout: {}",
            wrong.join("; "),
            ran.stderr.trim().replace('\n', "\n              "),
            ran.stdout.trim()
        )
    })
}

#[test]
fn every_broken_suite_is_refused_before_any_trial() {
    assert!(CASES.len() >= 50, "only {} cases", CASES.len());
    let names: std::collections::HashSet<_> = CASES.iter().map(|c| c.0).collect();
    assert_eq!(names.len(), CASES.len(), "case names must be distinct");
    let mut failures = Vec::new();
    for (name, mutate, expect) in CASES {
        let s = scratch();
        mutate(&s.suite);
        for (command, args) in commands(&s) {
            let ran = tack_args(&args, s.suite.parent().unwrap());
            if let Some(problem) = problem(ran, expect, &s) {
                failures.push(format!("{name} — tack {command}: {problem}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} commands misbehaved:\n{}",
        failures.len(),
        CASES.len() * 3,
        failures.join("\n")
    );
}

#[test]
fn the_base_suite_is_valid_so_each_case_breaks_one_thing() {
    let s = scratch();
    for (command, args) in commands(&s) {
        let ran = tack_args(&args, s.suite.parent().unwrap()).expect("hung");
        assert_eq!(
            ran.code,
            Some(0),
            "tack {command} on the base suite: {}\n{}",
            ran.stderr,
            ran.stdout
        );
        if command == "suite show" {
            // The base suite has no description: its name ends the line.
            assert!(ran.stdout.starts_with("suite base\n"), "{}", ran.stdout);
        }
    }
}

/// A trial that ends in `harness_error` makes `tack run` exit 3 and name it.
/// The suite is valid when it loads; its task's setup then deletes the rules
/// file the variant names, so assembling the harness fails in the trial.
#[test]
fn a_harness_error_in_a_trial_exits_3_and_names_the_trial() {
    let s = scratch();
    let rules = s.suite.join(RULES);
    edit(
        &s.suite,
        SUITE,
        "max_steps = 10",
        "max_steps = 10\nsandbox = \"off\"",
    );
    append(
        &s.suite,
        TASK,
        &format!(
            "\n[environment]\nsetup = [\"rm -f '{}'\"]\n",
            rules.display()
        ),
    );
    let ran = tack(
        &[
            Path::new("run"),
            &s.suite,
            Path::new("--traces"),
            &s.traces,
            Path::new("--no-report"),
            Path::new("--json"),
        ],
        s.suite.parent().unwrap(),
    )
    .expect("hung");
    assert_eq!(ran.code, Some(3), "{}\n{}", ran.stderr, ran.stdout);
    assert!(!ran.stderr.contains("panicked"), "{}", ran.stderr);
    for word in [
        "harness_error",
        "variant oracle",
        "task fix",
        "trial 0",
        RULES,
    ] {
        assert!(
            ran.stderr.contains(word),
            "stderr lacks `{word}`: {}",
            ran.stderr
        );
    }
    let json: serde_json::Value = serde_json::from_str(&ran.stdout).unwrap();
    assert_eq!(json["run"]["trials"][0]["outcome"], "harness_error");
}

#[test]
fn run_help_documents_the_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let ran = tack(&[Path::new("run"), Path::new("--help")], dir.path()).expect("hung");
    assert_eq!(ran.code, Some(0));
    for word in ["Exit codes", "harness_error", "130"] {
        assert!(
            ran.stdout.contains(word),
            "`tack run --help` lacks `{word}`"
        );
    }
}
