//! Helpers shared by the CLI's end-to-end tests: run the `tack` binary from
//! the repository root and read its `--json` output.

#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)] // each test binary uses some

use std::path::PathBuf;
use std::process::{Command, Output};

use serde_json::Value;

pub mod images;
pub mod viewer;

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The one run under `traces` (a test's own traces directory).
pub fn only_run(traces: &std::path::Path) -> PathBuf {
    let mut runs = std::fs::read_dir(traces).unwrap();
    let run = runs.next().unwrap().unwrap().path();
    assert!(
        runs.next().is_none(),
        "more than one run under {}",
        traces.display()
    );
    run
}

/// `tack query SQL RUN_DIR --json`: the rows, one object each.
pub fn query_rows(run_dir: &std::path::Path, sql: &str) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(["query", sql])
        .arg(run_dir)
        .arg("--json")
        .output()
        .unwrap();
    stdout_json(&output)
}

/// Runs `tack` from the repository root: suites and manifests name
/// `suites/demo` relative to it.
pub fn tack(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap()
}

/// The JSON `tack` printed, after checking it succeeded.
pub fn stdout_json(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "tack failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The sandbox profile for a test's commands: `strict` where the kernel
/// confines (CI requires it), else `off`, saying why.
pub fn sandbox_profile() -> &'static str {
    match tack_sandbox::test_gate(tack_protocol::SandboxProfile::Strict) {
        tack_sandbox::TestGate::Run => "strict",
        tack_sandbox::TestGate::Skip(why) => {
            eprintln!("sandbox off: {why}");
            "off"
        }
        tack_sandbox::TestGate::Fail(why) => panic!("{why}"),
    }
}

/// The Python with the official `openai` and `anthropic` SDKs
/// (`TACK_SDK_PYTHON`, which `.ci/run` sets up), or `None`, having said
/// why, to skip; with `TACK_REQUIRE_SDKS` set a missing SDK fails instead.
pub fn sdk_python() -> Option<String> {
    let python = std::env::var("TACK_SDK_PYTHON").unwrap_or_else(|_| "python3".to_string());
    let probe = Command::new(&python)
        .args(["-c", "import openai, anthropic"])
        .output();
    if probe.is_ok_and(|o| o.status.success()) {
        return Some(python);
    }
    assert!(
        std::env::var_os("TACK_REQUIRE_SDKS").is_none(),
        "the openai and anthropic SDKs are required here but `{python}` cannot import them"
    );
    eprintln!("skipped: {python} cannot import openai and anthropic (CI installs them)");
    None
}

/// Inspect AI's `inspect` command (`TACK_INSPECT`, which `.ci/run` installs
/// with a tiktoken cache so `mockllm/model` runs offline), or `None`,
/// having said why, to skip; with `TACK_REQUIRE_INSPECT` set a missing
/// Inspect fails instead.
pub fn inspect_command() -> Option<String> {
    let inspect = std::env::var("TACK_INSPECT").unwrap_or_else(|_| "inspect".to_string());
    let probe = Command::new(&inspect).arg("--version").output();
    if probe.is_ok_and(|o| o.status.success()) {
        return Some(inspect);
    }
    assert!(
        std::env::var_os("TACK_REQUIRE_INSPECT").is_none(),
        "Inspect AI is required here but `{inspect} --version` does not run"
    );
    eprintln!("skipped: `{inspect}` does not run (set TACK_INSPECT; CI installs inspect-ai)");
    None
}

/// A column of a trace batch, as its Arrow array type.
pub fn column<'b, T: 'static>(batch: &'b arrow_array::RecordBatch, name: &str) -> &'b T {
    batch
        .column_by_name(name)
        .unwrap()
        .as_any()
        .downcast_ref::<T>()
        .unwrap()
}

/// Every file below `dir`, to search what tack wrote (for a key, say).
pub fn files_below(dir: &std::path::Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            files_below(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// `tack run SUITE --json` with traces and reports under `dir` and `env`
/// set; its JSON, after checking it succeeded.
pub fn run_suite(
    suite: &std::path::Path,
    dir: &std::path::Path,
    args: &[&str],
    env: &[(&str, &str)],
) -> Value {
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .arg("run")
        .arg(suite)
        .args(["--json", "--traces"])
        .arg(dir.join("traces"))
        .arg("--reports")
        .arg(dir.join("reports"))
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    stdout_json(&output)
}

/// Runs `tack args` from the repository root with its stdout a pipe whose
/// only reader is closed before tack writes anything, so every write meets
/// a broken pipe. Returns the exit code and stderr.
pub fn with_closed_stdout(args: &[&str]) -> (Option<i32>, String) {
    with_one_pipe_closed(args, true)
}

/// As [`with_closed_stdout`], stderr closed instead; returns the exit code
/// and stdout.
pub fn with_closed_stderr(args: &[&str]) -> (Option<i32>, String) {
    with_one_pipe_closed(args, false)
}

fn with_one_pipe_closed(args: &[&str], close_stdout: bool) -> (Option<i32>, String) {
    use std::io::Read;
    use std::process::Stdio;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (stdout, stderr) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let mut open: Box<dyn Read> = if close_stdout {
        drop(stdout);
        Box::new(stderr)
    } else {
        drop(stderr);
        Box::new(stdout)
    };
    let mut read = String::new();
    open.read_to_string(&mut read).unwrap();
    (child.wait().unwrap().code(), read)
}

/// A free port on loopback (bound, then let go) for a server a test starts.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Copies a directory tree (a task, say) into `to`: the suite crate's
/// copy, modes and links kept.
pub fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    tack_suite::copy_tree(from, to, from).unwrap();
}

/// The Python named by the variable `var` if it can run `imports` (an
/// import statement); else `None`, having said how to get one (`hint`), to
/// skip. `.ci/run` makes each such Python and sets `require`=1, which makes
/// a missing one fail instead.
pub fn python_with(var: &str, require: &str, imports: &str, hint: &str) -> Option<String> {
    let required = std::env::var(require).is_ok_and(|v| v == "1");
    let python = std::env::var(var).ok();
    let works = python.as_ref().is_some_and(|python| {
        Command::new(python)
            .args(["-c", imports])
            .output()
            .is_ok_and(|o| o.status.success())
    });
    if works {
        return python;
    }
    assert!(
        !required,
        "{require}=1 but {var} ({python:?}) cannot run `{imports}`; run .ci/run"
    );
    eprintln!("skipped: set {var} to a Python with {hint}, as .ci/run does");
    None
}

/// A Python (3.12 or later) that imports Harbor's models (PyPI `harbor`):
/// `TACK_HARBOR_PYTHON`, which `.ci/run` makes (a venv in a Debian trixie
/// image).
pub fn harbor_python() -> Option<String> {
    python_with(
        "TACK_HARBOR_PYTHON",
        "TACK_REQUIRE_HARBOR_PYTHON",
        "import harbor.models.trajectories",
        "`pip install harbor` (Python 3.12 or later)",
    )
}

/// `tack proxy --json` on a free port in front of `upstream` (an origin URL),
/// recording into `traces`: the child, its stdout (for the `proxy_finished`
/// line), the URL it listens on and its run directory.
pub fn start_proxy(
    upstream: &str,
    traces: &std::path::Path,
) -> (
    std::process::Child,
    std::io::BufReader<std::process::ChildStdout>,
    String,
    PathBuf,
) {
    use std::io::BufRead;
    let mut child = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--json",
            "--upstream",
            upstream,
        ])
        // Spelled as every other command spells it (`--run` is the same).
        .arg("--traces")
        .arg(traces)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    let listening: Value = serde_json::from_str(&line).expect("a proxy_listening line");
    assert_eq!(listening["type"], "proxy_listening");
    let url = listening["url"].as_str().unwrap().to_string();
    let run = PathBuf::from(listening["run"].as_str().unwrap());
    (child, stdout, url, run)
}

/// A process's name and its parent's id, from `/proc/<pid>/stat`.
pub fn name_and_parent(pid: u32) -> Option<(String, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid ...: the name may hold spaces and parentheses.
    let (open, close) = (stat.find('(')?, stat.rfind(')')?);
    let parent = stat[close + 1..].split_whitespace().nth(1)?.parse().ok()?;
    Some((stat[open + 1..close].to_string(), parent))
}

/// The ids of every process on the machine.
pub fn processes() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}
