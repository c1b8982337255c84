//! `list_files` and `grep` on a real workspace: ignore files are honoured,
//! output is sorted, long results are cut with a marker, and paths that leave
//! the workspace are refused.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers fail loudly by design

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tack_agent::tools::BUILTIN_TOOLS;
use tack_agent::{Dispatcher, ToolContext, ToolError, ToolOutput};
use tack_protocol::{ToolCall, ToolErrorKind};

/// A workspace with ignored files of every kind next to the ones that count.
/// Like a trial workspace it is not a git checkout: ignore files apply anyway.
fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let files: &[(&str, &[u8])] = &[
        (".gitignore", b"build/\n*.log\n"),
        (".ignore", b"secret.txt\n"),
        (".env", b"HELLO=1\n"),
        ("README.md", b"Hello\n"),
        ("app.log", b"hello from the log\n"),
        ("secret.txt", b"hello secret\n"),
        ("build/out.py", b"hello = 'built'\n"),
        ("data.bin", b"hello\0binary\n"),
        (
            "src/main.py",
            b"def main():\n    print('hello')\n    return 0\n",
        ),
        ("src/util/.gitignore", b"generated.py\n"),
        ("src/util/generated.py", b"hello = 'generated'\n"),
        ("src/util/debug.log", b"hello debug\n"),
        (
            "src/util/helpers.py",
            b"def helper():\n    return 'hello world'\n# hello again\n",
        ),
    ];
    for (path, content) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }
    dir
}

fn dispatcher(workspace: &Path, output_limit: usize) -> Dispatcher {
    let names: Vec<String> = BUILTIN_TOOLS.iter().map(|name| name.to_string()).collect();
    let ctx = ToolContext {
        workspace: workspace.to_path_buf(),
        env: vec![],
        command_timeout: Duration::from_secs(5),
        output_limit,
        confinement: std::sync::Arc::new(tack_sandbox::Confinement::off()),
        session: None,
        results_dir: None,
        skills: Default::default(),
        held_workspace: Default::default(),
    };
    Dispatcher::builtin(&names, ctx).unwrap()
}

async fn run(d: &Dispatcher, tool: &str, arguments: Value) -> Result<ToolOutput, ToolError> {
    let call = ToolCall {
        id: "call_1".to_string(),
        name: tool.to_string(),
        arguments: arguments.to_string(),
    };
    d.dispatch(&call, false).await
}

/// The text of a successful call, and whether it was cut.
async fn text(d: &Dispatcher, tool: &str, arguments: Value) -> (String, bool) {
    match run(d, tool, arguments.clone()).await {
        Ok(ToolOutput::Text { text, truncated }) => (text, truncated),
        other => panic!("{tool} {arguments}: expected text, got {other:?}"),
    }
}

async fn lines(d: &Dispatcher, tool: &str, arguments: Value) -> Vec<String> {
    let (text, truncated) = text(d, tool, arguments).await;
    assert!(!truncated, "{text}");
    text.lines().map(String::from).collect()
}

#[tokio::test]
async fn list_files_honours_ignore_files_and_sorts_by_path() {
    let dir = workspace();
    let d = dispatcher(dir.path(), 4096);
    let all = lines(&d, "list_files", json!({})).await;
    // Not listed: build/ and *.log (.gitignore), secret.txt (.ignore),
    // generated.py (a nested .gitignore).
    let expected = [
        ".env",
        ".gitignore",
        ".ignore",
        "README.md",
        "data.bin",
        "src/main.py",
        "src/util/.gitignore",
        "src/util/helpers.py",
    ];
    assert_eq!(all, expected);
    // The same with an explicit ".", and with `max_results` at the total.
    let dot = lines(&d, "list_files", json!({"path": ".", "max_results": 8})).await;
    assert_eq!(dot, expected);
}

#[tokio::test]
async fn git_metadata_is_skipped() {
    let dir = workspace();
    std::fs::create_dir(dir.path().join(".git")).unwrap();
    std::fs::write(dir.path().join(".git/HEAD"), "hello git\n").unwrap();
    let d = dispatcher(dir.path(), 4096);
    let all = lines(&d, "list_files", json!({})).await;
    assert!(all.iter().all(|path| !path.starts_with(".git/")), "{all:?}");
    let found = lines(&d, "grep", json!({"pattern": "hello git"})).await;
    assert_eq!(found, ["no matches for `hello git` in `.`"]);
}

#[tokio::test]
async fn ignore_files_above_the_workspace_do_not_apply() {
    let outer = tempfile::tempdir().unwrap();
    std::fs::write(outer.path().join(".gitignore"), "*.py\n").unwrap();
    std::fs::write(outer.path().join(".ignore"), "ws/\n").unwrap();
    let ws = outer.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("main.py"), "print('hi')\n").unwrap();
    let d = dispatcher(&ws, 4096);
    assert_eq!(lines(&d, "list_files", json!({})).await, ["main.py"]);
    assert_eq!(
        lines(&d, "grep", json!({"pattern": "hi"})).await,
        ["main.py:1:print('hi')"]
    );
}

#[tokio::test]
async fn list_files_filters_by_glob_and_folder() {
    let dir = workspace();
    let d = dispatcher(dir.path(), 4096);
    let py = ["src/main.py", "src/util/helpers.py"];
    assert_eq!(
        lines(&d, "list_files", json!({"pattern": "*.py"})).await,
        py
    );
    assert_eq!(
        lines(&d, "list_files", json!({"pattern": "**/*.py"})).await,
        py
    );
    assert_eq!(
        lines(&d, "list_files", json!({"pattern": "src/*.py"})).await,
        ["src/main.py"]
    );
    // A subfolder: the root's .gitignore still applies (debug.log stays out),
    // paths stay workspace-relative, and the glob is relative to the folder.
    assert_eq!(
        lines(&d, "list_files", json!({"path": "src/util"})).await,
        ["src/util/.gitignore", "src/util/helpers.py"]
    );
    assert_eq!(
        lines(
            &d,
            "list_files",
            json!({"path": "src", "pattern": "util/*.py"})
        )
        .await,
        ["src/util/helpers.py"]
    );
    let (none, _) = text(&d, "list_files", json!({"pattern": "*.rs"})).await;
    assert!(
        none.starts_with("no files matching `*.rs` in `.`"),
        "{none}"
    );
}

#[tokio::test]
async fn list_files_cuts_long_listings_with_a_marker() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..2100 {
        std::fs::write(dir.path().join(format!("f{i:04}.txt")), "x").unwrap();
    }
    let d = dispatcher(dir.path(), 1 << 20);
    let (text, truncated) = text(&d, "list_files", json!({"max_results": 3})).await;
    assert!(truncated);
    assert_eq!(
        text,
        "f0000.txt\nf0001.txt\nf0002.txt\n[truncated: showing 3 of 2100 files; narrow the pattern or the path]"
    );
    // The default is 200; a larger request is capped at 2000.
    let (text, _) = self::text(&d, "list_files", json!({})).await;
    assert!(
        text.ends_with("[truncated: showing 200 of 2100 files; narrow the pattern or the path]")
    );
    let (text, _) = self::text(&d, "list_files", json!({"max_results": 5000})).await;
    assert_eq!(text.lines().count(), 2001);
    assert!(
        text.ends_with("[truncated: showing 2000 of 2100 files; narrow the pattern or the path]")
    );
    // The output limit cuts too.
    let small = dispatcher(dir.path(), 25);
    let (text, truncated) = self::text(&small, "list_files", json!({})).await;
    assert!(truncated);
    assert!(
        text.starts_with("f0000.txt\nf0001.txt\n[truncated: showing 2 of 2100 files"),
        "{text}"
    );
}

#[tokio::test]
async fn list_files_and_grep_stay_inside_the_workspace() {
    let dir = workspace();
    std::os::unix::fs::symlink("/etc", dir.path().join("etc_link")).unwrap();
    let d = dispatcher(dir.path(), 4096);
    for (tool, arguments) in [
        ("list_files", json!({"path": ".."})),
        ("list_files", json!({"path": "/etc"})),
        ("list_files", json!({"path": "src/../../"})),
        ("list_files", json!({"path": "etc_link"})),
        ("grep", json!({"pattern": "root", "path": "/etc/passwd"})),
        (
            "grep",
            json!({"pattern": "root", "path": "etc_link/passwd"}),
        ),
        ("grep", json!({"pattern": "root", "path": "../"})),
    ] {
        let error = run(&d, tool, arguments.clone()).await.unwrap_err();
        assert_eq!(
            error.kind,
            ToolErrorKind::SandboxDenied,
            "{tool} {arguments}"
        );
        assert!(
            error.message.contains("outside the workspace"),
            "{}",
            error.message
        );
    }
    // A symlink met on the walk is neither listed nor followed.
    let all = lines(&d, "list_files", json!({})).await;
    assert!(
        all.iter().all(|path| !path.starts_with("etc_link")),
        "{all:?}"
    );
    let (found, _) = text(&d, "grep", json!({"pattern": "root"})).await;
    assert!(found.starts_with("no matches"), "{found}");
}

#[tokio::test]
async fn grep_prints_sorted_matches_and_skips_ignored_and_binary_files() {
    let dir = workspace();
    let d = dispatcher(dir.path(), 4096);
    // Not found: app.log, debug.log, build/, secret.txt, generated.py
    // (ignored), data.bin (binary), README.md (case).
    assert_eq!(
        lines(&d, "grep", json!({"pattern": "hello"})).await,
        [
            "src/main.py:2:    print('hello')",
            "src/util/helpers.py:2:    return 'hello world'",
            "src/util/helpers.py:3:# hello again",
        ]
    );
    assert_eq!(
        lines(
            &d,
            "grep",
            json!({"pattern": "^hel+o", "case_insensitive": true})
        )
        .await,
        [".env:1:HELLO=1", "README.md:1:Hello"]
    );
    assert_eq!(
        lines(
            &d,
            "grep",
            json!({"pattern": "hello", "glob": "*.md", "case_insensitive": true})
        )
        .await,
        ["README.md:1:Hello"]
    );
    assert_eq!(
        lines(
            &d,
            "grep",
            json!({"pattern": "hello", "path": "src", "glob": "util/*.py"})
        )
        .await,
        [
            "src/util/helpers.py:2:    return 'hello world'",
            "src/util/helpers.py:3:# hello again",
        ]
    );
    // A file named outright is searched, even an ignored one, as in ripgrep.
    assert_eq!(
        lines(&d, "grep", json!({"pattern": "hello", "path": "app.log"})).await,
        ["app.log:1:hello from the log"]
    );
    let (none, truncated) = text(&d, "grep", json!({"pattern": "goodbye"})).await;
    assert_eq!(none, "no matches for `goodbye` in `.`");
    assert!(!truncated);
}

#[tokio::test]
async fn grep_cuts_long_results_with_a_marker() {
    let dir = tempfile::tempdir().unwrap();
    for i in 0..30 {
        std::fs::write(
            dir.path().join(format!("f{i:02}.txt")),
            "needle\nhay\nneedle\n",
        )
        .unwrap();
    }
    let d = dispatcher(dir.path(), 1 << 20);
    let (text, truncated) = text(&d, "grep", json!({"pattern": "needle", "max_results": 3})).await;
    assert!(truncated);
    assert_eq!(
        text,
        "f00.txt:1:needle\nf00.txt:3:needle\nf01.txt:1:needle\n[truncated: showing 3 of 60 matching lines; narrow the pattern, the path or the glob]"
    );
    // Under the default of 100: all 60, uncut.
    assert_eq!(
        lines(&d, "grep", json!({"pattern": "needle"})).await.len(),
        60
    );
    // Very long lines are shortened, so one minified file cannot fill the output.
    std::fs::write(
        dir.path().join("min.js"),
        format!("{}needle\n", "x".repeat(5000)),
    )
    .unwrap();
    let (text, _) = self::text(&d, "grep", json!({"pattern": "needle", "path": "min.js"})).await;
    assert!(
        text.starts_with("min.js:1:xxx") && text.ends_with("[line cut at 300 bytes]"),
        "{text}"
    );
    assert!(text.len() < 400);
}

#[tokio::test]
async fn grep_reports_a_bad_regex_with_the_parser_error() {
    let dir = workspace();
    let d = dispatcher(dir.path(), 4096);
    for (pattern, why) in [
        ("(", "unclosed group"),
        ("a{2,1}", "invalid repetition"),
        ("[z-a]", "invalid character class range"),
    ] {
        let error = run(&d, "grep", json!({"pattern": pattern}))
            .await
            .unwrap_err();
        assert_eq!(error.kind, ToolErrorKind::ExecutionFailed);
        assert!(
            error
                .message
                .contains(&format!("invalid regex `{pattern}`")),
            "{}",
            error.message
        );
        assert!(error.message.contains(why), "{}", error.message);
    }
}

/// The ignore files are the agent's: read as the file tools read, so one
/// linked to /dev/zero or to a host file, or a FIFO, is not read (tack,
/// outside the sandbox, filled its memory or hung on them).
#[tokio::test]
async fn ignore_files_that_are_links_or_fifos_are_not_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("kept.txt"), "hello\n").unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/also.txt"), "hello\n").unwrap();
    std::os::unix::fs::symlink("/dev/zero", dir.path().join(".gitignore")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(dir.path().join("sub/.ignore"))
        .status()
        .unwrap();
    assert!(made.success());
    let d = dispatcher(dir.path(), 4096);
    let listing = tokio::time::timeout(Duration::from_secs(10), lines(&d, "list_files", json!({})))
        .await
        .expect("list_files returns, whatever the ignore files are");
    assert!(listing.contains(&"kept.txt".to_string()), "{listing:?}");
    assert!(listing.contains(&"sub/also.txt".to_string()), "{listing:?}");
}
