//! What a task or an agent printed reaches the terminal shown, never
//! obeyed: a check whose output retitles the window, clears the screen and
//! forges a line, and a suite whose description does the same, leave no
//! control character in what `tack run`, `tack show`, `tack query` and
//! `tack suite` print for people (their `--json` keeps the bytes).

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::sandbox_profile;

/// What the check prints: a window title, a screen clear, a line hidden by
/// a carriage return and a forged verdict, and a C1 control sequence.
const NASTY: &str = r"printf '\033]0;pwned\007\033[2J\r\033[Kfake: all checks passed\302\233m\n'";

fn write_suite(dir: &Path) {
    let suite = format!(
        "[suite]\nname = \"nasty\"\ndescription = \"a \\u001b]0;title\\u0007 suite\"\n\
         [[variants]]\nname = \"oracle\"\nmodel = \"oracle\"\n\
         [variants.harness]\nsandbox = \"{}\"\n",
        sandbox_profile()
    );
    std::fs::write(dir.join("suite.toml"), suite).unwrap();
    let task = dir.join("tasks/esc");
    std::fs::create_dir_all(task.join("fixture")).unwrap();
    std::fs::write(task.join("fixture/file.txt"), "broken\n").unwrap();
    let toml = format!(
        "instruction = \"fix file.txt\"\n\
         [[checks]]\nname = \"hidden\"\nrun = {}\n\
         [solution]\n[[solution.edits]]\npath = \"file.txt\"\nold = \"broken\"\nnew = \"fixed\"\n",
        toml_string(&format!("{NASTY}; grep -q fixed file.txt"))
    );
    std::fs::write(task.join("task.toml"), toml).unwrap();
}

fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn tack(dir: &Path, args: &[&str]) -> Output {
    let output = Command::new(env!("CARGO_BIN_EXE_tack"))
        .args(args)
        .current_dir(dir)
        .env_remove("NO_COLOR")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Control characters a terminal obeys: C0 but newline and tab, DEL, C1.
fn controls(bytes: &[u8]) -> Vec<char> {
    String::from_utf8_lossy(bytes)
        .chars()
        .filter(|c| c.is_control() && !matches!(c, '\n' | '\t'))
        .collect()
}

#[test]
fn control_characters_from_tasks_are_shown_not_obeyed() {
    let dir = tempfile::tempdir().unwrap();
    write_suite(dir.path());
    let traces = dir.path().join("traces");
    let run = tack(
        dir.path(),
        &[
            "run",
            ".",
            "--traces",
            traces.to_str().unwrap(),
            "--no-report",
        ],
    );
    assert_eq!(controls(&run.stdout), [], "run's stdout");
    assert_eq!(controls(&run.stderr), [], "run's stderr");
    let run_dir = common::only_run(&traces);
    let run_dir = run_dir.to_str().unwrap();

    // Not a terminal: no colours either, so any control character leaked.
    let show = tack(dir.path(), &["show", run_dir, "oracle--esc--0", "--full"]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert_eq!(controls(&show.stdout), [], "{text}");
    assert!(
        text.contains("^[]0;pwned^G^[[2J^M^[[Kfake: all checks passed<U+009B>m"),
        "the output is shown, escaped: {text}"
    );
    // The recorded output keeps its bytes: --json says what was printed.
    let json = tack(dir.path(), &["show", run_dir, "oracle--esc--0", "--json"]);
    assert!(String::from_utf8_lossy(&json.stdout).contains("\\u001b]0;pwned\\u0007"));

    let sql = "select check_output from spans where check_output is not null";
    let query = tack(dir.path(), &["query", sql, run_dir]);
    assert_eq!(
        controls(&query.stdout),
        [],
        "{}",
        String::from_utf8_lossy(&query.stdout)
    );

    let show_suite = tack(dir.path(), &["suite", "show", "."]);
    let text = String::from_utf8_lossy(&show_suite.stdout);
    assert_eq!(controls(&show_suite.stdout), [], "{text}");
    assert!(text.contains("a ^[]0;title^G suite"), "{text}");
    let check = tack(dir.path(), &["suite", "check", "."]);
    assert_eq!(controls(&check.stdout), [], "suite check's stdout");
    assert_eq!(controls(&check.stderr), [], "suite check's stderr");
}
